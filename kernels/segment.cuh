// cufold: segmented reductions: one canonical tree per segment.
//
// Segment s is positions lo..hi of the input (rows of a matrix: lo = s * stride, hi = lo +
// cols; CSR offsets: lo = offsets[s], hi = offsets[s + 1]). Its result is the canonical tree
// (docs/ARCHITECTURE.md) over its own hi - lo positions, lifted with their place in the
// segment (0 .. hi - lo), as the whole-array reduction of that segment alone would give:
//
//   group    GROUP threads per segment (one thread, one warp, or the whole block),
//            segments taken in turn (grid-stride); a lone thread reduces its segment
//            when it has up to CF_REDUCE_LANE_MAX positions (CF_REDUCE_FREE_LANE_MAX for
//            order-free operators), hands those up to CF_REDUCE_GROUP_MAX to groups
//            of lanes of its warp, gathered across its steps (cf::group_push), and
//            longer ones to its whole warp;
//   tile     GROUP * K * VEC positions (a power of two): cf::tile_reduce_at, the same tile
//            tree as the whole-array kernel, cut at next_pow2(hi - lo) for a short segment;
//   tiles    for a longer segment, the tile trees in order on a binary counter in the
//            group's first thread (cf::TreeCounter): aligned pairs combine as they
//            complete; tiles past the end complete the tree to next_pow2 tiles as absent
//            blocks (a present left half combines with the identity, as the CPU's does).
//            A warp or a block per segment issues each tile's loads before it joins the
//            tile before (cf::pipelined_trees), across its segments too; order-free
//            operators fold instead (cf::free_run).
//
// Empty segments get finish(identity, 0) when the operator has an empty value (`write_empty`)
// and are left untouched otherwise; a segment with hi < lo or hi > n (offsets on the device
// that are not monotone or run past the input) is not read and its output not written.
#pragma once

#include "cufold/key_runs.cuh"
#include "cufold/long_list.cuh"
#include "cufold/lookback.cuh"
#include "cufold/reduce.cuh"

namespace cf {

// The leaves of one segment: positions 0..n from `x` (the segment's first element), lifted
// with their place in the segment; 16-byte loads where the segment's start is aligned.
template <class Op, int VEC> struct SegmentLoader {
    typedef typename Op::In In;
    typedef typename Op::Acc Acc;
    const In* x;
    u64 n;
    bool aligned;
    __device__ __forceinline__ void load(const Op& op, u64 p, Acc (&items)[VEC]) const {
        if constexpr (VEC * sizeof(In) == 16) {
            if (aligned && p + VEC <= n) {
                uint4 raw = __ldg(reinterpret_cast<const uint4*>(x + p));
                In v[VEC];
                memcpy(v, &raw, sizeof(raw));
#pragma unroll
                for (int i = 0; i < VEC; ++i) items[i] = op.lift(v[i], p + i);
                return;
            }
        }
#pragma unroll
        for (int i = 0; i < VEC; ++i) items[i] = p + i < n ? op.lift(x[p + i], p + i) : op.identity();
    }
    // The VEC raw inputs at p, unlifted (cf::free_run); positions past n are left alone.
    __device__ __forceinline__ void fetch(u64 p, In (&v)[VEC]) const {
        if constexpr (VEC * sizeof(In) == 16) {
            if (aligned && p + VEC <= n) {
                uint4 raw = __ldg(reinterpret_cast<const uint4*>(x + p));
                memcpy(v, &raw, sizeof(raw));
                return;
            }
        }
#pragma unroll
        for (int i = 0; i < VEC; ++i)
            if (p + i < n) v[i] = x[p + i];
    }
};

// The canonical tree built left to right, one unit (a value, a tile's tree) at a time, on a
// binary counter: stack[l] is the tree over the last completed aligned block of 2^l units.
template <class Acc> struct TreeCounter {
    Acc stack[64];
    // Unit i (0, 1, 2, ... in order) joins; aligned pairs combine as they complete.
    template <class Op> __device__ __forceinline__ void push(const Op& op, u64 i, Acc v) {
        int l = 0;
        for (; (i >> l) & 1; ++l) v = op.combine(stack[l], v);
        stack[l] = v;
    }
    // After `count` units, units count .. padded - 1 (padded a power of two) are absent: the
    // largest aligned absent block at i joins the present block to its left (bit ctz(i) of
    // i is set) as the identity, as the CPU's tree does, and the result climbs while blocks
    // complete. Returns the tree over the padded units.
    template <class Op> __device__ __forceinline__ Acc complete(const Op& op, u64 count, u64 padded) {
        for (u64 i = count; i < padded;) {
            int l = __ffsll((long long)i) - 1;
            const u64 size = 1ull << l;
            Acc v = op.combine(stack[l], op.identity());
            for (++l; (i >> l) & 1; ++l) v = op.combine(stack[l], v);
            stack[l] = v;
            i += size;
        }
        return stack[63 - __clzll((long long)padded)];
    }
};

// The canonical tree over `tiles` consecutive units built in order on a TreeCounter in the
// group's `leader`, units tiles .. padded - 1 (padded a power of two) absent: `unit(i)` is
// unit i's tree, called by every thread of the group (it may be a group-wide tile). The
// result is meaningful in the leader.
template <class Op, class Unit>
__device__ __forceinline__ typename Op::Acc counter_tree(const Op& op, u64 tiles, u64 padded, bool leader, Unit unit) {
    TreeCounter<typename Op::Acc> tree;
    for (u64 i = 0; i < tiles; ++i) {
        const typename Op::Acc v = unit(i);
        if (leader) tree.push(op, i, v);
    }
    return leader ? tree.complete(op, tiles, padded) : op.identity();
}

// The canonical tree over the n >= 1 positions of `ld` from `first` (a multiple of the
// tile), by a group of GROUP threads (every
// thread of the group calls it; the result is meaningful in the group's first thread).
// `smem`: two buffers of GROUP / 32 accumulators, alternated by the running count `calls`
// (a block-wide group synchronises inside each tile, and a buffer is written again only
// after the next tile's barrier).
//
// ORDER_FREE (Operator::ORDER_FREE): every order gives the canonical tree's bits, so the
// group (the whole block or one warp) runs cf::free_run over the segment's tiles, one
// accumulator per thread and one tree at the end, as the whole-array reduction does.
//
// `p` is the tree's width: next_pow2(n) for a segment's own tree, or a larger power of two
// for a chunk of a longer row (the chunk's subtree of the row's tree, positions past n
// absent).
template <class Op, int GROUP, int K, int VEC, bool ORDER_FREE = false, class Loader>
__device__ __forceinline__ typename Op::Acc segment_tree(const Op& op, const Loader& ld, u64 first, u64 n, u64 p,
                                                         typename Op::Acc (*smem)[GROUP / 32 > 0 ? GROUP / 32 : 1],
                                                         int warp, unsigned& calls) {
    constexpr u64 TILE = (u64)GROUP * K * VEC;
    if constexpr (ORDER_FREE)
        return free_run<Op, GROUP, K, VEC>(op, ld, first, (n + TILE - 1) / TILE, first + n, smem[calls++ & 1], warp);
    if (p <= TILE) return tile_reduce_at<Op, GROUP, K, VEC>(op, ld, first, p, smem[calls++ & 1], warp);
    return counter_tree(op, (n + TILE - 1) / TILE, p / TILE, threadIdx.x % GROUP == 0, [&](u64 i) {
        return tile_reduce_at<Op, GROUP, K, VEC>(op, ld, first + i * TILE, TILE, smem[calls++ & 1], warp);
    });
}

// One thread's K loads of a tile, raw (cf::SegmentLoader::fetch): load k takes the VEC
// positions at `at` + k * WIDTH * VEC (WIDTH lanes share a load instruction), all K issued
// before any is used.
template <class Op, int K, int VEC, int WIDTH>
__device__ __forceinline__ void fetch_tile(const SegmentLoader<Op, VEC>& ld, u64 at, typename Op::In (&v)[K][VEC]) {
#pragma unroll
    for (int k = 0; k < K; ++k) ld.fetch(at + k * (u64)WIDTH * VEC, v[k]);
}

// The trees over a thread's K loads (cf::fetch_tile at `at`), each lifted with its places
// and cut at `limit`; CHECK: the identity from n on, else every position is below n.
template <class Op, int K, int VEC, int WIDTH, bool CHECK>
__device__ __forceinline__ void lift_fetched(const Op& op, const typename Op::In (&raw)[K][VEC], u64 at, u64 n,
                                             u64 limit, typename Op::Acc (&v)[K]) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const u64 p = at + k * (u64)WIDTH * VEC;
        typename Op::Acc items[VEC];
#pragma unroll
        for (int i = 0; i < VEC; ++i) items[i] = !CHECK || p + i < n ? op.lift(raw[k][i], p + i) : op.identity();
        thread_reduce(op, items, limit);
        v[k] = items[0];
    }
}

// The tile tree over the loads cf::fetch_tile took at `at`, lifted with their places (the
// identity from n on), cut at `limit`: cf::tile_reduce_at's tree from the same loads, for a
// group of GROUP threads (WIDTH lanes to a load). A thread whose loads all lie below n (in
// every tile of a long row but its last) lifts them without a test a position.
template <class Op, int GROUP, int K, int VEC, int WIDTH = 32>
__device__ __forceinline__ typename Op::Acc join_fetched(const Op& op, const typename Op::In (&raw)[K][VEC], u64 at,
                                                         u64 n, u64 limit, typename Op::Acc* smem) {
    typename Op::Acc v[K];
    if (at + (u64)(K - 1) * WIDTH * VEC + VEC <= n)
        lift_fetched<Op, K, VEC, WIDTH, false>(op, raw, at, n, limit, v);
    else
        lift_fetched<Op, K, VEC, WIDTH, true>(op, raw, at, n, limit, v);
    return tile_join<Op, GROUP, K, VEC, WIDTH>(op, v, limit, smem);
}

// The segments first, first + step, ... below `segments` of one group of GROUP threads (a
// warp, or the whole block), each reduced to segment_tree's tree (tiles of GROUP * K * VEC
// positions; a segment of several on a binary counter in the group's first thread), with
// every tile's loads issued before the tile before it is joined, the next segment's first
// tile before the last tile of the one before: a group's loads are in flight while it
// shuffles and synchronises, not only between those stages. The bits are segment_tree's:
// the same tiles, joined in the same order. Each thread holds two tiles' raw inputs (K *
// VEC values each).
//
// `bounds(s, lo, hi)` is cf_bounds (false: the segment is skipped); `ahead(s)` asks for
// segment s's bounds without waiting (cf::prefetch_bounds), called as the segment before
// it is taken, so that a group reading offsets finds them in the L1 a segment later
// instead of waiting on memory between segments. `emit(s, tree, len)` takes a non-empty
// segment's tree in the group's first thread, `empty(s)` an empty segment in every thread.
// Every thread of the group calls it.
template <class Op, int GROUP, int K, int VEC, class Bounds, class Ahead, class Emit, class Empty>
__device__ __forceinline__ void pipelined_trees(const Op& op, const typename Op::In* __restrict__ x, u64 first,
                                                u64 step, u64 segments, Bounds bounds, Ahead ahead, Emit emit,
                                                Empty empty,
                                                typename Op::Acc (*smem)[GROUP / 32 > 0 ? GROUP / 32 : 1], int warp) {
    typedef typename Op::In In;
    typedef typename Op::Acc Acc;
    constexpr u64 SEG = 32ull * VEC;
    constexpr u64 TILE = (u64)GROUP * K * VEC;
    const u64 at = (u64)warp * SEG * K + (u64)(threadIdx.x & 31) * VEC;  // the thread's first place in a tile
    const bool leader = threadIdx.x % GROUP == 0;
    struct Seg {
        u64 s, lo, n;
    };
    // The first segment from s on with positions (empty ones go to `empty` on the way).
    const auto find = [&](u64 s, Seg& g) {
        for (; s < segments; s += step) {
            u64 lo, hi;
            if (!bounds(s, lo, hi)) continue;
            if (hi == lo) {
                empty(s);
                continue;
            }
            g = Seg{s, lo, hi - lo};
            if (s + step < segments) ahead(s + step);
            return true;
        }
        return false;
    };
    const auto fetch = [&](const Seg& g, u64 tile, In (&v)[K][VEC]) {
        const SegmentLoader<Op, VEC> ld{x + g.lo, g.n, (reinterpret_cast<unsigned long long>(x + g.lo) & 15) == 0};
        fetch_tile<Op, K, VEC, 32>(ld, tile * TILE + at, v);
    };
    Seg cur;
    if (!find(first, cur)) return;
    In raw[K][VEC];
    fetch(cur, 0, raw);
    TreeCounter<Acc> tree;
    unsigned calls = 0;
    for (u64 tile = 0;;) {
        const u64 tiles = (cur.n + TILE - 1) / TILE, width = next_pow2(cur.n);
        Seg next = cur;
        u64 next_tile = tile + 1;
        bool more = true;
        if (next_tile == tiles) {
            more = find(cur.s + step, next);
            next_tile = 0;
        }
        In ahead[K][VEC];
        if (more) fetch(next, next_tile, ahead);
        const u64 limit = width < TILE ? width : TILE;
        const Acc t = join_fetched<Op, GROUP, K, VEC>(op, raw, tile * TILE + at, cur.n, limit, smem[calls++ & 1]);
        if (leader) {
            if (tiles == 1) {
                emit(cur.s, t, cur.n);
            } else {
                tree.push(op, tile, t);
                if (tile + 1 == tiles) emit(cur.s, tree.complete(op, tiles, width / TILE), cur.n);
            }
        }
        if (!more) return;
        cur = next;
        tile = next_tile;
#pragma unroll
        for (int k = 0; k < K; ++k)
#pragma unroll
            for (int i = 0; i < VEC; ++i) raw[k][i] = ahead[k][i];
    }
}

// A segment's canonical tree by a group of LANES lanes (8 or 16) of one warp, the warp's
// other groups on other segments of the same length at the same time (rows): a tile is
// LANES * K * VEC positions, cf::tile_reduce_at with WIDTH = LANES (the same tree as a
// warp's); longer segments go tile by tile on a binary counter in the group's first lane
// (cf::counter_tree). Every lane of the warp calls it with the same n and p (the shuffles
// are the whole warp's); the result is meaningful in the group's first lane.
//
// ORDER_FREE (Operator::ORDER_FREE): every order gives the tree's bits, so each lane folds
// what it reads, in index order, into its run state (cf::run_loads, as cf::free_run does),
// and the group joins the lanes' results with one tree of shuffles.
template <class Op, int LANES, int K, int VEC, bool ORDER_FREE, class Loader>
__device__ __forceinline__ typename Op::Acc lanes_tree(const Op& op, const Loader& ld, u64 n, u64 p) {
    constexpr u64 TILE = (u64)LANES * K * VEC;
    if constexpr (ORDER_FREE) {
        typedef Run<Op> R;
        const u64 lane = threadIdx.x % LANES;
        typename R::State st = R::start(op);
        for (u64 tbase = 0; tbase < n; tbase += TILE)
            run_loads<Op, K, VEC, LANES>(op, ld, st, tbase + lane * VEC, tbase + TILE <= n, n);
        return warp_reduce(op, R::end(op, st), LANES);
    }
    if (p <= TILE) return tile_reduce_at<Op, LANES, K, VEC, LANES>(op, ld, 0, p, nullptr, 0);
    return counter_tree(op, (n + TILE - 1) / TILE, p / TILE, threadIdx.x % LANES == 0, [&](u64 i) {
        return tile_reduce_at<Op, LANES, K, VEC, LANES>(op, ld, i * TILE, TILE, nullptr, 0);
    });
}

// Shared memory per warp in which a scan's thread-schedule warp stages its span (below,
// kernels/segment_scan.cuh): 4 KiB, or less for blocks over 256 threads (32 KiB a block).
template <int BLOCK> struct SpanStage {
    static constexpr int BYTES = 32768 / (BLOCK / 32) < 4096 ? 32768 / (BLOCK / 32) : 4096;
};

// A span of values cut for 16-byte copies (cf::copy_span) that start `skew` values into
// their 16 bytes.
template <class T> struct SpanPieces {
    // Values a 16-byte piece holds; 1 (no pieces) for types that do not tile 16 bytes.
    static constexpr unsigned V = sizeof(T) <= 16 && 16 % sizeof(T) == 0 ? 16 / sizeof(T) : 1;
    unsigned head;    // values before the first whole piece
    unsigned pieces;  // whole pieces
    unsigned tail;    // values after the last whole piece
    __device__ __forceinline__ SpanPieces(unsigned skew, unsigned span, bool pieces_ok) {
        if (V == 1 || !pieces_ok) {
            head = span;
            pieces = 0;
        } else {
            head = (V - skew) % V < span ? (V - skew) % V : span;
            pieces = (span - head) / V;
        }
        tail = span - head - pieces * V;
    }
};

// Whether p's 16 bytes split into whole values before it (a type of 8 bytes aligned to 4
// may start 4 bytes into them: then no pieces), and p's place in them, in values.
template <class T> __device__ __forceinline__ bool span_pieces_ok(const T* p) {
    return SpanPieces<T>::V > 1 && (reinterpret_cast<unsigned long long>(p) & 15) % sizeof(T) == 0;
}
template <class T> __device__ __forceinline__ unsigned span_skew(const T* p) {
    return span_pieces_ok(p) ? (unsigned)(reinterpret_cast<unsigned long long>(p) & 15) / sizeof(T) : 0;
}

// The span `sp` describes copied from src to dst (which share their place in 16 bytes) by
// the whole warp: the values before the first and after the last whole piece one at a
// time, the pieces in 16-byte loads and stores, four a lane in flight. GLOBAL_SRC: src is
// global memory, read through the read-only cache (else shared memory, plain loads).
template <bool GLOBAL_SRC, class T>
__device__ __forceinline__ void copy_span(T* __restrict__ dst, const T* __restrict__ src, const SpanPieces<T>& sp) {
    const unsigned lane = threadIdx.x & 31;
#pragma unroll 4
    for (unsigned k = lane; k < sp.head; k += 32) dst[k] = src[k];
    const unsigned tail_at = sp.head + sp.pieces * SpanPieces<T>::V;
    if (lane < sp.tail) dst[tail_at + lane] = src[tail_at + lane];
    if constexpr (SpanPieces<T>::V > 1) {
        const uint4* from = reinterpret_cast<const uint4*>(src + sp.head);
        uint4* to = reinterpret_cast<uint4*>(dst + sp.head);
        for (unsigned c = lane; c < sp.pieces; c += 4 * 32) {
            uint4 r[4];
#pragma unroll
            for (unsigned i = 0; i < 4; ++i)
                if (c + 32 * i < sp.pieces) r[i] = GLOBAL_SRC ? __ldg(from + c + 32 * i) : from[c + 32 * i];
#pragma unroll
            for (unsigned i = 0; i < 4; ++i)
                if (c + 32 * i < sp.pieces) to[c + 32 * i] = r[i];
        }
    }
}

// A thread-schedule warp's 32 segments from shared memory: when every segment of the warp
// (lane l: [lo, hi); `mine` false past the last segment) is `short_ok` (valid and short
// enough for its lane), each starts where the one before it ends, and together they span at
// most CAP values (with the skew below), the span [start, start + span) is copied to
// stage[skew ..] by the whole warp, and true is returned (the same in every lane; the copy
// is complete). `skew` is x + start's place in its 16 bytes, in values, so that the stage
// and the input share their alignment and the whole 16-byte pieces of the span go in
// 16-byte loads, four a lane in flight at a time (the values before the first and after
// the last whole piece one at a time). Lanes then read their segments from the stage, and
// a scan writes its outputs there for coalesced stores (cf::unstage_span), where a lane
// storing to its own segment makes one store instruction touch as many sectors as lanes.
// (Copied one value a lane at a time, four in flight, the H100's segmented scans of
// segments of 4 to 32 waited on those loads more than on anything else, ncu.)
template <int CAP, class T>
__device__ __forceinline__ bool stage_span(const T* __restrict__ x, bool mine, bool short_ok, u64 lo, u64 hi,
                                           T* stage, u64& start, unsigned& skew, unsigned& span) {
    const unsigned lane = threadIdx.x & 31;
    const unsigned in = __ballot_sync(~0u, mine);
    const u64 prev = __shfl_up_sync(~0u, hi, 1);
    const bool good = !mine || (short_ok && (lane == 0 || lo == prev));
    if (in == 0 || __ballot_sync(~0u, good) != ~0u) return false;
    start = __shfl_sync(~0u, lo, 0);
    const u64 whole = __shfl_sync(~0u, hi, 31 - __clz(in)) - start;
    skew = span_skew(x + start);
    if (whole + skew > (u64)CAP) return false;
    span = (unsigned)whole;
    copy_span<true>(stage + skew, x + start, SpanPieces<T>(skew, span, span_pieces_ok(x + start)));
    __syncwarp();
    return true;
}

// The span that cf::stage_span staged, written from `stage` (stage[skew ..], outputs of the
// inputs' size) to y[start .. start + span) by the whole warp (cf::copy_span): in 16-byte
// pieces where y shares x's alignment there (outputs placed as the inputs were), else one
// value a lane at a time, coalesced either way.
template <class T>
__device__ __forceinline__ void unstage_span(T* __restrict__ y, const T* stage, u64 start, unsigned skew,
                                             unsigned span) {
    T* dst = y + start;
    copy_span<false>(dst, stage + skew, SpanPieces<T>(skew, span, span_pieces_ok(dst) && span_skew(dst) == skew));
}

// TreeCounter's push on a counter held in registers by one thread: stack[l] is the tree of
// the last completed aligned block of 2^l units while bit l of `i` (the units counted so
// far) is set. v, a block of 2^from units, joins at level `from` (bits of i below it are
// not looked at): aligned pairs combine as they complete. The levels are unrolled (`from` a
// constant where it is inlined), so that no array is indexed at run time and nothing goes
// to local memory. Used by the segmented scan's cf::thread_scan.
template <int LEVELS, class Acc, class Op>
__device__ __forceinline__ void counter_push(const Op& op, Acc (&stack)[LEVELS], unsigned i, Acc v, int from = 0) {
#pragma unroll
    for (int l = 0; l < LEVELS; ++l) {
        if (l < from) continue;
        if (((i >> l) & 1) == 0) {
            stack[l] = v;
            return;
        }
        v = op.combine(stack[l], v);
    }
}

// next_pow2 for a 32-bit n <= 2^31 (short segments' trees, in 32-bit registers).
__device__ __forceinline__ unsigned next_pow2_32(unsigned n) {
    return n <= 1 ? 1u : 1u << (32 - __clz(n - 1));
}

// One thread's N positions first .. first + N - 1 of the n values at x (lifted with their
// place, the identity from n on), reduced by cf::thread_reduce cut at `width`: a lane's
// share of a short segment's tree (cf::group_tree). Positions, n and the
// width in 32 bits (segments of a few hundred values at most): with 64-bit ones, the
// compares and next_pow2 took two instructions each in the one pass by key's rounds.
template <int N, class Op>
__device__ __forceinline__ typename Op::Acc padded_tree(const Op& op, const typename Op::In* __restrict__ x,
                                                        unsigned first, unsigned n, unsigned width) {
    typename Op::Acc items[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const unsigned pos = first + i;
        items[i] = pos < n ? op.lift(x[pos], (u64)pos) : op.identity();
    }
    thread_reduce(op, items, width);
    return items[0];
}

// Positions first .. first + G - 1 of the n values at x (those below n) folded in order into
// a run state (cf::Run), each under its own predicate: the same instructions in every lane
// of the warp, whatever its segment's length. (All G at once where all are there,
// Run::add_all, else one at a time, split a group's lanes between two paths and measured
// slower on an H100, lanes up to 8, short segments: max 1638 and argmax 1108 GB/s, against
// 2085 and 1541 under predicates in the call before. The G loads issued before the first
// fold, H100, ms, 2^24 segments of 4 to 32 / power-law lengths: max 0.543 -> 0.537 / 0.293
// -> 0.272, but argmax 0.737 -> 0.740 / 0.474 -> 0.486, at 70 registers a thread instead
// of 63; not kept.) Positions in 32 bits (a lane's or a group's segment is short): with
// 64-bit ones each position's predicate took four instructions; H100, ms, the same shapes:
// max 0.538-0.547 -> 0.524-0.529 / 0.293-0.294 -> 0.267-0.270, argmax 0.735-0.736 ->
// 0.710-0.714 / 0.473-0.475 -> 0.441-0.442.
template <int G, class Op>
__device__ __forceinline__ void fold_run(const Op& op, typename ShortRun<Op>::State& st,
                                         const typename Op::In* __restrict__ x, unsigned first, unsigned n) {
#pragma unroll
    for (int j = 0; j < G; ++j)
        if (first + j < n) ShortRun<Op>::add(op, st, x[first + j], first + j);
}

// An order-free operator's result over the 1 <= n <= MAX values at x by one thread (MAX a
// power of two, a few values): every order gives the canonical tree's bits, so the thread
// folds the values in order into its run state (cf::Run), as a group's lane does. (A binary
// counter over runs of eight, which a lane needed for segments of up to 256 values before
// groups and warps took those, cost a segment of a few values about five times the
// instructions.) Operators with a tree build a lane's own segment's tree in cf::thread_step.
template <int MAX, class Op>
__device__ __forceinline__ typename Op::Acc thread_fold(const Op& op, const typename Op::In* __restrict__ x, u64 n) {
    constexpr int G = MAX < 8 ? MAX : 8;
    typename ShortRun<Op>::State st = ShortRun<Op>::start(op);
    for (unsigned b = 0; b < (unsigned)n; b += G) fold_run<G>(op, st, x, b, (unsigned)n);
    return ShortRun<Op>::end(op, st);
}

// The tree of width `width` (a power of two, next_pow2(n) <= width <= GL * VEC) over the
// n <= GL * VEC values at x, positions from n on the identity, by a group of GL lanes (GL a
// power of two; every lane of the warp calls it, each group with its own x, n and width; the
// result is meaningful in the group's first lane): lane j of the group reduces its VEC
// positions VEC * j .. (cf::padded_tree; order-free operators fold them into their run
// state, cf::fold_run, as every order gives the tree's bits), then the group joins its lanes
// with shuffles up to the width: tile_reduce_at's tree for GL lanes and one load, in 32-bit
// positions. Groups of 4, 8 or 16 lanes take the thread schedule's middle lengths
// (cf::group_pass); the whole warp (GL = 32) its segments of up to 256, and those of
// operators with a tree up to 2^CF_LONG_MIN_LOG as passes of width 256 on a counter
// (cf::thread_step), where the general cf::segment_tree (tiles of 32 * K * VEC, 64-bit
// positions, vector loads under checks) cost more than the loads. H100, f32, power-law
// lengths, ms, three rounds, the warp's segments up to 256: max 0.268-0.271 ->
// 0.256-0.258, argmax 0.356-0.358 -> 0.347-0.349, sum 0.246-0.249 -> 0.247-0.248, the one
// pass by key without lengths 0.361-0.369 -> 0.355-0.361; 2^24 segments of 4 to 32
// unchanged (BENCHMARKS.md, "Segments, twenty-fourth step").
template <int GL, int VEC, bool ORDER_FREE, class Op>
__device__ __forceinline__ typename Op::Acc group_tree(const Op& op, const typename Op::In* __restrict__ x, unsigned n,
                                                       unsigned width) {
    typedef typename Op::Acc Acc;
    const unsigned gl = (threadIdx.x & 31) % GL;
    Acc v;
    if constexpr (ORDER_FREE) {
        typename ShortRun<Op>::State st = ShortRun<Op>::start(op);
        fold_run<VEC>(op, st, x, gl * VEC, n);
        v = ShortRun<Op>::end(op, st);
    } else {
        v = padded_tree<VEC>(op, x, gl * VEC, n, width);
    }
    const unsigned lanes = width / VEC;  // lanes of the group the tree spans
#pragma unroll
    for (int off = 1; off < GL; off <<= 1) {
        const Acc other = shfl_down(v, off);
        if ((unsigned)off < lanes) v = op.combine(v, other);
    }
    return v;
}

// The thread schedule's middle lengths wait here for a group of GL lanes: a warp gathers them
// across its steps, in shared memory, and reduces them PER = 32 / GL at a time
// (cf::group_pass), so that every group of a pass has a segment. Each step's own segments
// alone, a pass for each PER of them, left most groups idle: on power-law lengths a step hands
// groups about two segments, and those passes ran 30% of the thread schedule's instructions
// (ncu, H100, f32 sum). Gathered, H100, f32, ms, two rounds in one call against the step
// before, which passed each step's own: power-law lengths, sum 0.227-0.228 -> 0.221-0.223,
// max 0.250 -> 0.241-0.242, argmax 0.345 -> 0.343-0.344, the one pass by key without lengths
// 0.346-0.347 -> 0.339-0.340 (CUB's ReduceByKey 0.338); 2^24 segments of 4 to 32, one round,
// sum 0.514 -> 0.523, argmax 0.689 -> 0.682, by key 1.009 -> 1.015 (BENCHMARKS.md, "Segments,
// twenty-sixth step"). Entries of 16 bytes (the length in the start's top bits) in a ring,
// with no move of the rest to the front, were no faster (by key 0.341-0.344). USED false: an
// empty queue, for a tier the schedule does not use. Its count (`unsigned`, the same in every
// lane) is the caller's.
template <int GL, bool USED = true> struct GroupQueue {
    static constexpr unsigned PER = 32 / GL;  // segments a pass
    static constexpr int CAP = USED ? (int)PER - 1 + 32 : 1;  // a pass's remainder and a step
    u64 lo[CAP], s[CAP];
    unsigned len[CAP];
};

// Queued segments first .. first + PER - 1 (those below `count`), a group of GL lanes on
// each: the tree cf::group_tree gives over the segment's VEC * GL or fewer positions, cut at
// its own width; the group's first lane writes its result to out[s]. Every lane of the warp
// calls it, after a __syncwarp since the queue was written.
//
// ORDER_FREE (Operator::ORDER_FREE): each lane folds its positions in order (the tree, a
// combine for every position, cost Max and ArgMax more than a lane alone walking segments
// of up to 64: H100, short segments, max 1995 -> 1344 GB/s).
template <int GL, int VEC, bool ORDER_FREE, class Op, bool USED>
__device__ __forceinline__ void group_pass(const Op& op, const typename Op::In* __restrict__ x,
                                           const GroupQueue<GL, USED>& q, unsigned first, unsigned count,
                                           typename Op::Out* out) {
    const unsigned lane = threadIdx.x & 31, k = first + lane / GL;
    const bool have = k < count;
    const u64 lo = have ? q.lo[k] : 0;
    const unsigned m = have ? q.len[k] : 0;
    const typename Op::Acc v = group_tree<GL, VEC, ORDER_FREE>(op, x + lo, m, next_pow2_32(m));
    if (have && lane % GL == 0) store_out(out + q.s[k], op.finish(v, m));
}

// The lanes' segments that `mine` marks (segment s at lo, len positions) joined to the
// warp's queue `q` of `count`, then reduced in full passes while it holds PER or more
// (cf::group_pass); fewer than PER stay, moved to the front. Every lane of the warp calls it.
template <int GL, int VEC, bool ORDER_FREE, class Op, bool USED>
__device__ __forceinline__ void group_push(const Op& op, const typename Op::In* __restrict__ x,
                                           GroupQueue<GL, USED>& q, unsigned& count, bool mine, u64 s, u64 lo,
                                           unsigned len, typename Op::Out* out) {
    constexpr unsigned PER = GroupQueue<GL, USED>::PER;
    const unsigned lane = threadIdx.x & 31;
    const unsigned mask = __ballot_sync(~0u, mine);
    if (mine) {
        const unsigned at = count + __popc(mask & ((1u << lane) - 1));
        q.lo[at] = lo;
        q.s[at] = s;
        q.len[at] = len;
    }
    count += __popc(mask);
    if (count < PER) return;
    __syncwarp();
    unsigned first = 0;
    do {
        group_pass<GL, VEC, ORDER_FREE>(op, x, q, first, first + PER, out);
        first += PER;
    } while (first + PER <= count);
    const unsigned rest = count - first;
    const bool moving = lane < rest;
    u64 a = 0, b = 0;
    unsigned c = 0;
    if (moving) {
        a = q.lo[first + lane];
        b = q.s[first + lane];
        c = q.len[first + lane];
    }
    __syncwarp();
    if (moving) {
        q.lo[lane] = a;
        q.s[lane] = b;
        q.len[lane] = c;
    }
    __syncwarp();
    count = rest;
}

// The segments left in a warp's queue after its last step: one pass of fewer than PER.
// Every lane of the warp calls it.
template <int GL, int VEC, bool ORDER_FREE, class Op, bool USED>
__device__ __forceinline__ void group_flush(const Op& op, const typename Op::In* __restrict__ x,
                                            const GroupQueue<GL, USED>& q, unsigned& count, typename Op::Out* out) {
    if (count == 0) return;
    __syncwarp();
    group_pass<GL, VEC, ORDER_FREE>(op, x, q, 0, count, out);
    count = 0;
}

}  // namespace cf

// The reduction's thread schedule: a lane alone takes segments up to CF_REDUCE_LANE_MAX
// positions (order-free operators: CF_REDUCE_FREE_LANE_MAX), a group of four or eight
// lanes those up to CF_REDUCE_GROUP_MAX (cf::group_push), the whole warp longer ones (or,
// with a long list, the long pass those over 2^CF_LONG_MIN_LOG).
#define CF_REDUCE_LANE_MAX 8
#define CF_REDUCE_FREE_LANE_MAX 32
#define CF_REDUCE_GROUP_MAX 64
// With mid groups (the reduction by key's one pass, operators that are not order-free),
// groups of sixteen lanes take the segments of CF_REDUCE_GROUP_MAX + 1 to CF_REDUCE_MID_MAX
// positions, two a pass, instead of the whole warp one at a time.
#define CF_REDUCE_MID_MAX 128
// Shared memory a warp's queues of middle lengths take (cf::StepQueues: the most, that of
// operators with a tree and sixteen-lane groups; a static_assert checks it), which the thread
// schedule's launches pass a warp (src/segment/gpu.rs, step_queue_bytes).
#define CF_STEP_QUEUE_BYTES 2152
// In the reduction's thread schedule with a long list (ragged offsets with a long tail),
// segments longer than 2^CF_LONG_MIN_LOG go to the long pass instead of a warp: aligned
// chunks of at least 2^CF_LONG_CHUNK_MIN_LOG positions, a block per chunk, then a warp per
// long segment joining its chunks (the list: kernels/long_list.cuh).

namespace cf {

// Segment s's bounds (offsets, or rows of `cols` every `stride`), unchecked.
__device__ __forceinline__ void raw_bounds(u64 s, const u64* __restrict__ offsets, u64 stride, u64 cols, u64& lo,
                                           u64& hi) {
    if (offsets) {
        lo = offsets[s];
        hi = offsets[s + 1];
    } else {
        lo = s * stride;
        hi = lo + cols;
    }
}

// Segment s's offsets asked of the L1 without waiting, so that cf::raw_bounds finds them
// there a segment later; nothing for rows (no offsets). For cf::pipelined_trees, whose group
// takes a few segments in turn (BLOCK_GRID_WAVES, src/segment/plan.rs). H100, f32 sums by
// offsets, a block per segment, ms, two rounds, without / with it: 2^16 segments of 4096
// 0.352-0.353 / 0.349-0.350, 2^15 of 8192 0.348-0.349 / 0.347 (BENCHMARKS.md, "Segments,
// twenty-eighth step"). Loading the bounds into registers a segment ahead instead ran
// slower (a block a segment then: rows of 4096 0.343 -> 0.369, such offsets 0.414 -> 0.471;
// more registers a thread is the likely cause, not checked).
__device__ __forceinline__ void prefetch_bounds(u64 s, const u64* offsets) {
    if (offsets) asm volatile("prefetch.global.L1 [%0];" ::"l"(offsets + s));
}

// Whether bounds lo .. hi (cf::raw_bounds) are a segment of an input of n positions; offsets
// that decrease or run past the end are not, and such a segment is neither read nor written.
__device__ __forceinline__ bool segment_in_input(u64 lo, u64 hi, u64 n) { return lo <= hi && hi <= n; }

// The lines of x[start, end) asked of the L1 without waiting by a warp, a line a lane: the
// first 32 lines, or all of them (ALL).
template <bool ALL, class T> __device__ __forceinline__ void prefetch_lines(const T* x, u64 start, u64 end) {
    if (start >= end) return;
    const u64 a = reinterpret_cast<u64>(x + start), b = reinterpret_cast<u64>(x + end);
    for (u64 line = (a & ~127ull) + (u64)(threadIdx.x & 31) * 128; line < b; line += 32 * 128) {
        asm volatile("prefetch.global.L1 [%0];" ::"l"(line < a ? a : line));
        if (!ALL) return;
    }
}

// A thread-schedule warp's step from `base` (lane l holding segment base + l's bounds,
// unchecked): the lines of its span, from the first segment's start to the last one's end
// (clamped to n), asked of the L1 without waiting, the first 32 at most, a line a lane.
template <class T>
__device__ __forceinline__ void prefetch_step(const T* x, u64 n, u64 base, u64 segments, u64 lo, u64 hi) {
    if (base >= segments) return;
    const int last = segments - base > 32 ? 31 : (int)(segments - base - 1);
    u64 start = __shfl_sync(~0u, lo, 0), end = __shfl_sync(~0u, hi, last);
    if (end > n) end = n;
    prefetch_lines<false>(x, start, end);
}

// The thread schedule's walk over the segments, by every thread of a block of BLOCK: each
// warp takes steps of 32 consecutive segments, the grid's warps in turn, and calls
// body(s, lo, hi) once a step in every lane, lane l on segment s = base + l with its bounds
// unchecked (cf::raw_bounds; 0 and 0 past the last segment). Each step's bounds are loaded a
// step ahead, and its span asked of the L1 at the end of the step before (cf::prefetch_step),
// so that a step waits neither on its offsets nor, in turn, on its lanes' loads. The
// reduction's and the scan's thread schedules share it (their kernels give the measurements).
template <int BLOCK, class T, class Body>
__device__ __forceinline__ void thread_steps(const T* x, u64 n, u64 segments, const u64* __restrict__ offsets,
                                             u64 stride, u64 cols, Body body) {
    const int lane = threadIdx.x & 31;
    const u64 step = (u64)gridDim.x * BLOCK;
    const u64 first_base = (u64)blockIdx.x * BLOCK + (threadIdx.x & ~31u);
    u64 lo = 0, hi = 0;
    if (first_base + lane < segments) raw_bounds(first_base + lane, offsets, stride, cols, lo, hi);
    prefetch_step(x, n, first_base, segments, lo, hi);
    for (u64 base = first_base; base < segments; base += step) {
        u64 next_lo = 0, next_hi = 0;
        if (base + step + lane < segments) raw_bounds(base + step + lane, offsets, stride, cols, next_lo, next_hi);
        body(base + lane, lo, hi);
        prefetch_step(x, n, base + step, segments, next_lo, next_hi);
        lo = next_lo;
        hi = next_hi;
    }
}

// log2 of a long segment's chunk: at least 2^CF_LONG_CHUNK_MIN_LOG positions and one tile of
// the long pass's blocks (2^TILE_LOG), and at most 2^CF_LONG_CHUNKS_LOG chunks
// (next_pow2(len) >> log; the joining warp's one tile holds 32 * 8). 16
// segments of 2^24 f32 by offsets, chunks of 2^16 against 2^13 (2048 a segment, the most a
// block of 256 joins), H100, ms: sum 0.454 / 0.472, max 0.365 / 0.394, argmax 0.371 /
// 0.42-0.45 (chunks of 2^18: the same as 2^16); power-law lengths unchanged (BENCHMARKS.md,
// "Segments, fifteenth step").
#define CF_LONG_CHUNKS_LOG 8
template <int TILE_LOG> __device__ __forceinline__ int long_chunk_log(u64 len) {
    constexpr int LEAST = TILE_LOG > CF_LONG_CHUNK_MIN_LOG ? TILE_LOG : CF_LONG_CHUNK_MIN_LOG;
    const int l = 63 - __clzll((long long)next_pow2(len)) - CF_LONG_CHUNKS_LOG;
    return l > LEAST ? l : LEAST;
}


// A warp's queues of the thread schedule's middle lengths (cf::GroupQueue), in shared
// memory: groups of four lanes for segments of LANE_MAX + 1 to CF_REDUCE_GROUP_MAX / 2
// positions where lanes hand those down (not for order-free operators, whose lanes keep
// them), of eight up to CF_REDUCE_GROUP_MAX, and with MID_GROUPS of sixteen up to
// CF_REDUCE_MID_MAX. Each lane of a group reduces eight positions. StepCounts holds their
// counts, in registers.
template <bool ORDER_FREE, bool MID_GROUPS> struct StepQueues {
    static constexpr unsigned LANE_MAX = ORDER_FREE ? CF_REDUCE_FREE_LANE_MAX : CF_REDUCE_LANE_MAX;
    static constexpr bool FOURS = LANE_MAX < CF_REDUCE_GROUP_MAX / 2;
    GroupQueue<4, FOURS> fours;
    GroupQueue<8> eights;
    GroupQueue<16, MID_GROUPS> mids;
};
struct StepCounts {
    unsigned fours = 0, eights = 0, mids = 0;
};
static_assert(sizeof(StepQueues<false, true>) == CF_STEP_QUEUE_BYTES, "the largest queues, as the host passes them");
static_assert(sizeof(StepQueues<false, false>) <= CF_STEP_QUEUE_BYTES &&
                  sizeof(StepQueues<true, true>) <= CF_STEP_QUEUE_BYTES,
              "every kernel's queues within a warp's share");

// The calling warp's queues, in the kernel's dynamic shared memory: CF_STEP_QUEUE_BYTES a
// warp of the block, which every launch of a kernel that calls it passes (the host's side:
// src/segment/gpu.rs, step_queue_bytes). Dynamic, since a block of 1024 threads takes 67 KiB
// of them, past the 48 KiB a kernel may declare: cf_reduce_by_key's declared tables and these
// queues did not compile so.
template <bool ORDER_FREE, bool MID_GROUPS>
__device__ __forceinline__ StepQueues<ORDER_FREE, MID_GROUPS>& warp_queues() {
    extern __shared__ __align__(16) unsigned char cf_step_queues[];
    unsigned char* mine = cf_step_queues + (threadIdx.x >> 5) * CF_STEP_QUEUE_BYTES;
    return *reinterpret_cast<StepQueues<ORDER_FREE, MID_GROUPS>*>(mine);
}

// One step of the reduction's thread schedule, by a whole warp: lane l's segment is
// positions lo .. hi of x (of n values) when `valid`, its result goes to out[s]. A lane alone
// takes segments up to CF_REDUCE_LANE_MAX positions (order-free operators:
// CF_REDUCE_FREE_LANE_MAX); segments up to CF_REDUCE_GROUP_MAX join the warp's queues for
// groups of four or eight lanes (StepQueues, cf::group_push), and longer ones go to the
// whole warp, one after another (cf::group_tree over all 32 lanes up to 256 positions,
// passes of it up to 2^CF_LONG_MIN_LOG for operators with a tree, cf::segment_tree beyond),
// so that no lane reads a long segment alone while the others wait; with a long list
// (`long_hdr` not null), those over 2^CF_LONG_MIN_LOG are listed for the long pass instead
// (chunks of at least 2^TILE_LOG). MID_GROUPS: segments up to CF_REDUCE_MID_MAX join a queue
// for groups of sixteen lanes instead of going to the warp. The bits are the same either
// way. An empty segment gets finish(identity, 0) if `write_empty`. `smem` is the warp
// group's (unused by one warp). Every lane calls it; after the warp's last step,
// cf::flush_step_queues reduces what its queues still hold.
template <class Op, int K, int VEC, bool ORDER_FREE, int TILE_LOG, bool MID_GROUPS = false>
__device__ __forceinline__ void thread_step(const Op& op, const typename Op::In* __restrict__ x, u64 n, bool valid,
                                            u64 s, u64 lo, u64 hi, bool write_empty, typename Op::Out* out,
                                            u64* long_hdr, typename Op::Acc (*smem)[1],
                                            StepQueues<ORDER_FREE, MID_GROUPS>& queues, StepCounts& counts) {
    typedef StepQueues<ORDER_FREE, MID_GROUPS> Queues;
    const int lane = threadIdx.x & 31;
    // The length in 32 bits, saturated, for the choice of lane, group or warp: each 64-bit
    // compare took two instructions (and the groups' shuffles a conversion). H100, f32,
    // power-law lengths, ms, five rounds in two calls against 64 bits: argmax 0.359-0.362
    // -> 0.355-0.358; sum, max and the one pass by key within the rounds' spread; 2^24
    // segments of 4 to 32 unchanged.
    const u64 len64 = hi - lo;
    const unsigned len = len64 >> 32 ? 0xffffffffu : (unsigned)len64;
    // Order-free operators fold a lane's segment in order (Run: a key comparison a
    // position for Max, a rank for ArgMax), eight positions a step under predicates, so
    // a lane keeps segments up to 32 and groups take 33 to 64. Measured on an H100, GB/s,
    // lanes up to 32 against up to 8 (one call), and the rule before, lanes up to 64 and
    // no groups (an earlier call): 2^24 segments of 4 to 32, max 2447 / 2122 / 2030,
    // argmax 1788 / 1455 / 1692; power-law lengths, max 1447 / 1478 / 1118, argmax 1161
    // / 1233 / 1078.
    constexpr unsigned LANE_MAX = Queues::LANE_MAX;
    const bool longer = valid && len > (MID_GROUPS ? CF_REDUCE_MID_MAX : CF_REDUCE_GROUP_MAX);
    // Each lane reads its own segment from global memory: staging the warp's span in
    // shared memory (stage_span, which the scan's thread schedule uses to coalesce
    // its stores) made these reductions slower on an H100 (short segments 1.08 ->
    // 1.48 ms): their loads already meet in L1, and the stage costs occupancy.
    //
    // A lane's own segment: order-free operators fold it here (cf::thread_fold). Operators
    // with a tree load it here into `raw` and build its tree at the end of the step, after
    // the groups' passes and the warp's segments, so that its loads are in flight meanwhile
    // (before, the step waited on them first). H100, f32, ms, one round a binary in one call
    // (BENCHMARKS.md, "Segments, twenty-fifth step"): power-law lengths, sum 0.237 -> 0.231,
    // the one pass by key without lengths 0.352 both; 2^24 segments of 4 to 32, sum 0.520 ->
    // 0.516. (With the groups' segments gathered across steps, cf::GroupQueue, it took the
    // one pass by key 0.351 -> 0.341 too.)
    typename Op::In raw[LANE_MAX];
    if constexpr (ORDER_FREE) {
        if (valid && len <= LANE_MAX) {
            if (len > 0)
                store_out(out + s, op.finish(thread_fold<LANE_MAX>(op, x + lo, len), len));
            else if (write_empty)
                store_out(out + s, op.finish(op.identity(), 0));
        }
    } else {
        const bool alone = valid && len <= LANE_MAX;
#pragma unroll
        for (unsigned i = 0; i < LANE_MAX; ++i)
            if (alone && i < len) raw[i] = x[lo + i];
    }
    // Groups of four lanes for segments of up to half the groups' longest, of eight for the
    // rest (each lane eight loads either way).
    constexpr unsigned HALF = CF_REDUCE_GROUP_MAX / 2;
    if constexpr (Queues::FOURS)
        group_push<4, 8, ORDER_FREE>(op, x, queues.fours, counts.fours, valid && len > LANE_MAX && len <= HALF, s,
                                     lo, len, out);
    group_push<8, 8, ORDER_FREE>(op, x, queues.eights, counts.eights,
                                 valid && len > (Queues::FOURS ? HALF : LANE_MAX) && len <= CF_REDUCE_GROUP_MAX, s, lo,
                                 len, out);
    // The mid groups' segments, runs of 128 on an H100 (2^21 of them, f32 Sum by key, one
    // pass): 1.24 ms by the whole warp one at a time, 0.93 by groups of sixteen lanes. For
    // segments by offsets the tier measured no faster, and order-free operators' short
    // segments slower with it compiled in (argmax, 2^24 of 4 to 32: 0.75 -> 0.88 ms), so it
    // is the one pass's, for operators with a tree.
    if constexpr (MID_GROUPS)
        group_push<16, 8, ORDER_FREE>(op, x, queues.mids, counts.mids,
                                      valid && len > CF_REDUCE_GROUP_MAX && len <= CF_REDUCE_MID_MAX, s, lo, len, out);
    // With a long list, the longest go to the long pass (cf_segment_long_chunks).
    const bool listed = longer && long_hdr && len > (1u << CF_LONG_MIN_LOG) &&
                        reduce_long_list(long_hdr, n).add(s, lo, len64, long_chunk_log<TILE_LOG>(len64));
    for (unsigned mask = __ballot_sync(~0u, longer && !listed); mask; mask &= mask - 1) {
        const int j = __ffs(mask) - 1;
        const u64 a = __shfl_sync(~0u, lo, j), b = __shfl_sync(~0u, hi, j);
        typename Op::Acc r;
        // The same trees as segment_tree's, with fewer instructions: up to 256 positions in
        // one pass, up to 2^CF_LONG_MIN_LOG (operators with a tree) as passes of 256 on a
        // counter. (Order-free operators' cf::free_run measured faster than passes of 256
        // folded in each lane: H100, f32, power-law lengths, ms, max 0.254-0.257 against
        // 0.259-0.265, argmax 0.347-0.351 against 0.349-0.351; the tree's sum 0.246-0.250
        // -> 0.238-0.239.)
        const unsigned m = (unsigned)(b - a);
        if (b - a <= 32 * 8) {
            r = group_tree<32, 8, ORDER_FREE>(op, x + a, m, next_pow2_32(m));
        } else if (!ORDER_FREE && b - a <= (1u << CF_LONG_MIN_LOG)) {
            r = counter_tree(op, (m + 255) / 256, next_pow2_32(m) / 256, lane == 0, [&](u64 i) {
                const unsigned f = (unsigned)i * 256;
                return group_tree<32, 8, false>(op, x + a + f, m - f < 256 ? m - f : 256u, 256u);
            });
        } else {
            const SegmentLoader<Op, VEC> ld{x + a, b - a, (reinterpret_cast<unsigned long long>(x + a) & 15) == 0};
            unsigned calls = 0;
            r = segment_tree<Op, 32, K, VEC, ORDER_FREE>(op, ld, 0, b - a, next_pow2(b - a), smem, 0, calls);
        }
        const u64 at = __shfl_sync(~0u, s, j);
        if (lane == 0) store_out(out + at, op.finish(r, b - a));
    }
    // The lane's own segment's tree, from `raw`: cf::padded_tree's tree, cut at
    // next_pow2(len). (A version that built it, and cf::padded_tree's, through shared
    // helpers for the loads and the lifted tree measured slower in one call, on top of the
    // gathered groups: power-law lengths, the one pass by key 0.472 ms against 0.343, sum
    // 0.232-0.234 against 0.224.)
    if constexpr (!ORDER_FREE) {
        if (valid && len <= LANE_MAX) {
            if (len > 0) {
                typename Op::Acc items[LANE_MAX];
#pragma unroll
                for (unsigned i = 0; i < LANE_MAX; ++i) items[i] = i < len ? op.lift(raw[i], (u64)i) : op.identity();
                thread_reduce(op, items, next_pow2_32(len));
                store_out(out + s, op.finish(items[0], len));
            } else if (write_empty) {
                store_out(out + s, op.finish(op.identity(), 0));
            }
        }
    }
}

// What a warp's queues still hold after its last cf::thread_step, reduced. Every lane of the
// warp calls it.
template <class Op, bool ORDER_FREE, bool MID_GROUPS>
__device__ __forceinline__ void flush_step_queues(const Op& op, const typename Op::In* __restrict__ x,
                                                  typename Op::Out* out,
                                                  const StepQueues<ORDER_FREE, MID_GROUPS>& queues,
                                                  StepCounts& counts) {
    if constexpr (StepQueues<ORDER_FREE, MID_GROUPS>::FOURS)
        group_flush<4, 8, ORDER_FREE>(op, x, queues.fours, counts.fours, out);
    group_flush<8, 8, ORDER_FREE>(op, x, queues.eights, counts.eights, out);
    if constexpr (MID_GROUPS) group_flush<16, 8, ORDER_FREE>(op, x, queues.mids, counts.mids, out);
}

// What the look-back of the one passes by key carries over runs of keys: heads counted, and
// one past the position of the last of them (0 for none).
struct RunMark {
    u64 count, end;
};
struct RunMarkOp {
    typedef RunMark Acc;
    __device__ __forceinline__ RunMark identity() const { return RunMark{0, 0}; }
    __device__ __forceinline__ RunMark combine(const RunMark& a, const RunMark& b) const {
        return RunMark{a.count + b.count, b.end ? b.end : a.end};
    }
};

// A block's tile of the one passes by key (cf_reduce_by_key here, cf_scan_by_key in
// kernels/segment_scan.cuh): WARPS spans of 32 * ITEMS keys, a warp each, tiles in ticket
// order (cf::take_ticket), and each warp's runs that end in its span, in order.
//
//   heads      each warp finds its span's run heads (cf::KeySpan, a bit a key);
//   look-back  one warp publishes the tile's (heads, one past its last head) and folds
//              those of the tiles before it (cf::chained_look_back over cf::RunMarks:
//              integers, so any grouping gives the same numbers): the runs before the tile
//              and where the last of them starts;
//   bounds     the warp's runs are the run open at the span's start (if a head ends it),
//              the runs between its heads, and, in the last span, the last run: run r0 + j
//              is bound(j) .. bound(j + 1), for j + 1 < bounds.
//
// The values of a span with a head are asked of the L1 while the look-back runs (a line a
// lane; a span inside a long run leaves its values to whoever takes that run).
template <class W, int ITEMS, int WARPS> struct KeyTile {
    typedef KeySpan<W, ITEMS> span_t;
    static constexpr int SPAN = span_t::SPAN;
    static_assert(SPAN < 65536, "n's place after a span's heads fits 16 bits");
    // The block's shared part, besides its lists of heads (WARPS lists of SPAN + 1 places:
    // a warp's heads, then n's place).
    struct Shared {
        RunMark marks[WARPS];
        RunMark tile_prefix;
    };
    u64 base = 0;            // the warp's span's first position
    unsigned short* list;    // the warp's heads, as places in its span
    RunMark before;          // runs before the span, one past where the last starts (0: none)
    bool open = false;       // a run open at the span's start
    bool last_span = false;  // the span holds n's place
    unsigned k = 0;          // heads in the span
    unsigned bounds = 0;     // the bounds of the warp's runs (bound)
    u64 r0 = 0;              // the index of the warp's first run

    // Every thread of the block calls it once; false (in a whole warp) for a span past n,
    // after the block's last barrier.
    template <class V>
    __device__ __forceinline__ bool take(Shared& sh, unsigned short* places, const W* __restrict__ keys,
                                         const V* x, u64 n, u64 tiles, unsigned long long* ticket,
                                         unsigned long long* agg_slots, unsigned long long* incl_slots) {
        const RunMarkOp marker;
        const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
        u64 t = 0;
        unsigned epoch = 1;
        // A block's ticket is most often its own index: that tile's keys are asked of the L1
        // before the ticket comes back.
        const u64 guess = ((u64)blockIdx.x * WARPS + warp) * SPAN;
        prefetch_lines<true>(keys, guess, guess + SPAN < n ? guess + SPAN : n);
        if (tiles > 1) take_ticket(ticket, tiles, t, epoch);
        base = (t * WARPS + warp) * SPAN;
        const unsigned heads = span_t::heads(keys, n, base, span_t::aligned(keys));
        k = __reduce_add_sync(~0u, (unsigned)__popc(heads));
        {
            const unsigned last = __reduce_max_sync(~0u, heads ? span_t::place(lane, 31 - __clz(heads)) + 1 : 0u);
            if (lane == 0) sh.marks[warp] = RunMark{k, last ? base + last : 0};
        }
        if (k > 0) prefetch_lines<true>(x, base, base + SPAN < n ? base + SPAN : n);
        __syncthreads();
        if (tiles > 1 && warp == 0) {
            RunMark tile = marker.identity();
            for (int w = 0; w < WARPS; ++w) tile = marker.combine(tile, sh.marks[w]);
            const NodeSlots<RunMark> aggs{agg_slots, epoch}, incls{incl_slots, epoch};
            if (lane == 0) {
                if (t == 0) incls.publish(0, tile);
                else aggs.publish(t, tile);
            }
            const RunMark prefix = t > 0 ? chained_look_back(marker, aggs, incls, t, tile) : marker.identity();
            if (lane == 0) sh.tile_prefix = prefix;
        }
        // Each warp's heads listed in order while warp 0 looks back (then warp 0's).
        list = places + warp * (SPAN + 1);
        span_t::list_heads(heads, list);
        if (tiles > 1) __syncthreads();
        if (base >= n) return false;
        before = tiles > 1 ? sh.tile_prefix : marker.identity();
        for (int w = 0; w < warp; ++w) before = marker.combine(before, sh.marks[w]);
        // The span's bounds in order: the open run's start (if any), its heads, then n in the
        // last span (its place after the heads in the list: n - base <= SPAN). One load and a
        // select for each bound (bound): with a branch for n and one for the open run, a
        // round's two bounds took some 50 instructions (ncu, H100).
        open = before.end != 0;
        last_span = n - base <= (u64)SPAN;
        bounds = (open ? 1u : 0u) + k + (last_span ? 1u : 0u);
        if (last_span && lane == 0) list[k] = (unsigned short)(n - base);
        __syncwarp();
        r0 = before.count - (open ? 1u : 0u);
        return true;
    }

    // Bound i < bounds of the warp's runs.
    __device__ __forceinline__ u64 bound(unsigned i) const {
        const bool at_open = open && i == 0;
        const u64 at = base + list[at_open ? 0u : i - (open ? 1u : 0u)];
        return at_open ? before.end - 1 : at;
    }
};
}  // namespace cf

#ifdef CF_SEGMENT_KERNEL
// Instantiated by the generated source, which defines CF_OP, CF_BLOCK, CF_GROUP (1, 8, 16,
// 32 or CF_BLOCK: threads per segment; 8 and 16 for rows only), CF_K, CF_VEC, CF_ORDER_FREE (0/1: Operator::ORDER_FREE:
// threads, warps and blocks fold a segment in order, with no tree) and CF_OP_BYTES.
typedef CF_OP cf_op_t;
typedef cf_op_t::In cf_in_t;
typedef cf_op_t::Acc cf_acc_t;
typedef cf_op_t::Out cf_out_t;

// log2 of the tile of the long pass's blocks (CF_LONG_BLOCK threads of CF_K loads of CF_VEC,
// the thread schedule's loads) for operators that are not order-free, which a long segment's
// chunk holds at least (cf::long_chunk_log); order-free ones take any chunk.
#if CF_ORDER_FREE
#define CF_LONG_TILE_LOG 0
#else
#define CF_LONG_TILE_LOG cf::ilog2(CF_LONG_BLOCK * CF_K * CF_VEC)
#endif

// Segment s's bounds; false for offsets that are not a segment of the input
// (cf::segment_in_input).
__device__ __forceinline__ bool cf_bounds(cf::u64 s, cf::u64 n, const cf::u64* __restrict__ offsets, cf::u64 stride,
                                          cf::u64 cols, cf::u64& lo, cf::u64& hi) {
    cf::raw_bounds(s, offsets, stride, cols, lo, hi);
    return cf::segment_in_input(lo, hi, n);
}

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_segment_reduce(const cf_in_t* __restrict__ x, cf::u64 n, cf::u64 segments, const cf::u64* __restrict__ offsets,
                  cf::u64 stride, cf::u64 cols, unsigned write_empty, cf_out_t* out, cf::u64* long_hdr,
                  const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    static_assert(CF_GROUP == 1 || CF_GROUP == 8 || CF_GROUP == 16 || CF_GROUP == 32 || CF_GROUP == CF_BLOCK,
                  "a segment takes a thread, a group of 8 or 16 lanes, a warp or the whole block");
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
#if CF_GROUP == 1
    // Lane l of a warp takes segment base + l, its warp the step's 32 (cf::thread_step:
    // lanes, groups of lanes or the whole warp by length). (A lane alone up to 256 positions, the
    // earlier rule, ran an H100 at 11.8 threads of 32 an instruction on segments of 4 to 32:
    // each lane's loop as long as its own segment; 28.4 now, ncu.)
    __shared__ cf_acc_t smem[2][1];  // unused by a one-warp group, which has no block stage
    auto& queues = cf::warp_queues<CF_ORDER_FREE != 0, false>();
    cf::StepCounts counts;
    // Each step's bounds are loaded a step ahead, and its span is asked of the L1 at the end
    // of the step before (cf::thread_steps, cf::prefetch_step): a lane's loads, and its groups' passes after
    // them, then find their lines there, where each pass waited on memory in turn. H100,
    // ms, two rounds, 2^24 segments of 4 to 32 / power-law lengths: sum 0.595 -> 0.524 /
    // 0.273 -> 0.265, max 0.575 -> 0.541 / 0.286 -> 0.288, argmax 0.900 -> 0.864 / 0.484 ->
    // 0.487. The same prefetch right after the lanes' own segments was faster on the short
    // segments (max 0.521, argmax 0.750) but slowed the power-law ones (max 0.320, argmax
    // 0.506), and placed there only for steps whose lanes hand nothing on, it gave neither
    // (BENCHMARKS.md); a step's own span at its start, or each lane's own segment, fell in
    // between.
    cf::thread_steps<CF_BLOCK>(x, n, segments, offsets, stride, cols, [&](cf::u64 s, cf::u64 lo, cf::u64 hi) {
        const bool valid = s < segments && cf::segment_in_input(lo, hi, n);
        cf::thread_step<cf_op_t, CF_K, CF_VEC, CF_ORDER_FREE != 0, CF_LONG_TILE_LOG>(
            op, x, n, valid, s, lo, hi, write_empty != 0, out, long_hdr, smem, queues, counts);
    });
    cf::flush_step_queues(op, x, out, queues, counts);
#elif CF_GROUP < 32
    // Rows only (the host plans this schedule for rows, never for offsets): the warp's
    // 32 / CF_GROUP groups take consecutive rows at once, all of `cols` positions, so every
    // lane runs the same loads and shuffles; a group past the last row reads the last row
    // again and writes nothing.
    constexpr int PER_WARP = 32 / CF_GROUP;
    const int sub = (int)((threadIdx.x & 31) / CF_GROUP);
    const bool leader = (threadIdx.x % CF_GROUP) == 0;
    const cf::u64 warps = (cf::u64)gridDim.x * (CF_BLOCK / 32);
    if (offsets) return;  // not planned for offsets
    const cf::u64 warp_first = ((cf::u64)blockIdx.x * (CF_BLOCK / 32) + (threadIdx.x >> 5)) * PER_WARP;
    if constexpr (CF_ORDER_FREE == 0) {
        // Rows of one tile (every row the planner gives this schedule): each row's loads are
        // issued before the row before it is joined, as cf::pipelined_trees does for a warp
        // or a block per segment; the same tree as cf::lanes_tree's.
        constexpr cf::u64 TILE = (cf::u64)CF_GROUP * CF_K * CF_VEC;
        if (cols > 0 && cols <= TILE) {
            const cf::u64 at = (cf::u64)(threadIdx.x % CF_GROUP) * CF_VEC, limit = cf::next_pow2(cols);
            const auto fetch = [&](cf::u64 first, cf_in_t (&v)[CF_K][CF_VEC]) {
                const cf::u64 s = first + sub;
                const cf_in_t* row = x + (s < segments ? s : segments - 1) * stride;
                const cf::SegmentLoader<cf_op_t, CF_VEC> ld{row, cols, (reinterpret_cast<unsigned long long>(row) & 15) == 0};
                cf::fetch_tile<cf_op_t, CF_K, CF_VEC, CF_GROUP>(ld, at, v);
            };
            if (warp_first >= segments) return;
            cf_in_t raw[CF_K][CF_VEC];
            fetch(warp_first, raw);
            for (cf::u64 first = warp_first;;) {
                const cf::u64 next = first + warps * PER_WARP;
                const bool more = next < segments;
                cf_in_t ahead[CF_K][CF_VEC];
                if (more) fetch(next, ahead);
                const cf_acc_t t =
                    cf::join_fetched<cf_op_t, CF_GROUP, CF_K, CF_VEC, CF_GROUP>(op, raw, at, cols, limit, nullptr);
                if (leader && first + sub < segments) cf::store_out(out + first + sub, op.finish(t, cols));
                if (!more) return;
                first = next;
#pragma unroll
                for (int k = 0; k < CF_K; ++k)
#pragma unroll
                    for (int i = 0; i < CF_VEC; ++i) raw[k][i] = ahead[k][i];
            }
        }
    }
    for (cf::u64 first = warp_first; first < segments; first += warps * PER_WARP) {
        const cf::u64 s = first + sub;
        const bool mine = s < segments;
        const cf::u64 r = mine ? s : segments - 1;
        if (cols == 0) {
            if (write_empty && leader && mine) cf::store_out(out + s, op.finish(op.identity(), 0));
            continue;
        }
        const cf_in_t* row = x + r * stride;
        const cf::SegmentLoader<cf_op_t, CF_VEC> ld{row, cols, (reinterpret_cast<unsigned long long>(row) & 15) == 0};
        const cf_acc_t t =
            cf::lanes_tree<cf_op_t, CF_GROUP, CF_K, CF_VEC, CF_ORDER_FREE != 0>(op, ld, cols, cf::next_pow2(cols));
        if (leader && mine) cf::store_out(out + s, op.finish(t, cols));
    }
#else
    constexpr int GROUPS = CF_BLOCK / CF_GROUP;
    const int group = (int)(threadIdx.x / CF_GROUP);
    const bool leader = (threadIdx.x % CF_GROUP) == 0;
    __shared__ cf_acc_t smem[2][CF_GROUP / 32];
    const int warp = (int)((threadIdx.x % CF_GROUP) >> 5);
    if constexpr (CF_ORDER_FREE == 0) {
        // The canonical trees, each tile's loads issued before the tile before it is joined.
        cf::pipelined_trees<cf_op_t, CF_GROUP, CF_K, CF_VEC>(
            op, x, (cf::u64)blockIdx.x * GROUPS + group, (cf::u64)gridDim.x * GROUPS, segments,
            [&](cf::u64 s, cf::u64& lo, cf::u64& hi) { return cf_bounds(s, n, offsets, stride, cols, lo, hi); },
            [&](cf::u64 s) { cf::prefetch_bounds(s, offsets); },
            [&](cf::u64 s, const cf_acc_t& r, cf::u64 len) { cf::store_out(out + s, op.finish(r, len)); },
            [&](cf::u64 s) {
                if (write_empty && leader) cf::store_out(out + s, op.finish(op.identity(), 0));
            },
            smem, warp);
        return;
    }
    // Order-free operators: cf::free_run over each segment's tiles. (The next segment's bounds
    // asked of the L1 first, as cf::pipelined_trees does, gained nothing here and cost a warp
    // per segment of 128 by offsets 3-4%: BENCHMARKS.md, "Segments, twenty-eighth step".)
    unsigned calls = 0;
    for (cf::u64 s = (cf::u64)blockIdx.x * GROUPS + group; s < segments; s += (cf::u64)gridDim.x * GROUPS) {
        cf::u64 lo, hi;
        if (!cf_bounds(s, n, offsets, stride, cols, lo, hi)) continue;
        if (hi == lo) {
            if (write_empty && leader) cf::store_out(out + s, op.finish(op.identity(), 0));
            continue;
        }
        const cf::SegmentLoader<cf_op_t, CF_VEC> ld{x + lo, hi - lo, (reinterpret_cast<unsigned long long>(x + lo) & 15) == 0};
        const cf_acc_t r =
            cf::segment_tree<cf_op_t, CF_GROUP, CF_K, CF_VEC, CF_ORDER_FREE != 0>(
                op, ld, 0, hi - lo, cf::next_pow2(hi - lo), smem, warp, calls);
        if (leader) cf::store_out(out + s, op.finish(r, hi - lo));
    }
#endif
}

#if CF_GROUP == CF_BLOCK
// The long pass, after a thread-schedule launch with a long list: a block per chunk of each
// listed segment (its subtree of the segment's canonical tree, unfinished, into the list's
// partials), as cf_segment_chunks does for rows.
extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_segment_long_chunks(const cf_in_t* __restrict__ x, cf::u64 n, cf::u64* long_hdr,
                       const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    __shared__ cf_acc_t smem[2][CF_BLOCK / 32];
    const cf::LongList l = cf::reduce_long_list(long_hdr, n);
    const cf::u64 total = l.reserved();
    cf_acc_t* partials = l.partials<cf_acc_t>();
    unsigned calls = 0;
    for (cf::u64 i = blockIdx.x; i < total; i += gridDim.x) {
        const unsigned slot = l.owner()[i];
        if (slot == ~0u) continue;  // the same for the whole block
        const cf::u64* e = l.entry(slot);
        const cf::u64 lo = e[1], len = e[2], first = e[3];
        const int cl = cf::long_chunk_log<CF_LONG_TILE_LOG>(len);
        const cf::u64 start = (i - first) << cl;
        const cf::u64 m = len - start < (1ull << cl) ? len - start : (1ull << cl);
        // The loader spans the whole segment, so that positions count from its start.
        const cf::SegmentLoader<cf_op_t, CF_VEC> ld{x + lo, len, (reinterpret_cast<unsigned long long>(x + lo) & 15) == 0};
        const cf_acc_t t = cf::segment_tree<cf_op_t, CF_BLOCK, CF_K, CF_VEC, CF_ORDER_FREE != 0>(
            op, ld, start, m, 1ull << cl, smem, (int)(threadIdx.x >> 5), calls);
        if (threadIdx.x == 0) partials[i] = t;
    }
}

// Then a warp per listed segment joins its chunk trees (at most 32 * 8 of them after padding
// to next_pow2(len)): the tile tree over them, as cf_segment_combine's block does for a row,
// and writes its result. (A block per segment, as rows have, left most of its threads
// without a chunk and waited at barriers: 2^15 runs of 8192 by key, one chunk each, H100:
// BENCHMARKS.md, "Segments, nineteenth step".)
extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_segment_long_combine(cf::u64 n, cf::u64* long_hdr, cf_out_t* __restrict__ out,
                        const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    static_assert(32 * 8 >= (1 << CF_LONG_CHUNKS_LOG), "the joining warp's tile holds a segment's chunks");
    constexpr int WARPS = CF_BLOCK / 32;
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    const cf::LongList l = cf::reduce_long_list(long_hdr, n);
    const cf::u64 count = l.listed();
    const cf_acc_t* partials = l.partials<cf_acc_t>();
    for (cf::u64 slot = (cf::u64)blockIdx.x * WARPS + (threadIdx.x >> 5); slot < count;
         slot += (cf::u64)gridDim.x * WARPS) {
        const cf::u64* e = l.entry(slot);
        const cf::u64 s = e[0], len = e[2], first = e[3];
        const int cl = cf::long_chunk_log<CF_LONG_TILE_LOG>(len);
        const cf::PartialLoader<cf_op_t> ld{partials + first, (len + (1ull << cl) - 1) >> cl};
        // One warp: no block stage, so no shared memory.
        const cf_acc_t t = cf::tile_reduce_at<cf_op_t, 32, 8, 1>(op, ld, 0, cf::next_pow2(len) >> cl, nullptr, 0);
        if ((threadIdx.x & 31) == 0) cf::store_out(out + s, op.finish(t, len));
    }
}

// Long rows split into aligned chunks of 2^chunk_log positions, a block per chunk: chunk c of
// row r (segment r * per_row + c) is the subtree of the row's canonical tree over positions
// c << chunk_log .. (c + 1) << chunk_log, written unfinished to partials (then
// cf_segment_combine joins each row's chunks).
extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_segment_chunks(const cf_in_t* __restrict__ x, cf::u64 rows, cf::u64 stride, cf::u64 cols, unsigned chunk_log,
                  cf_acc_t* __restrict__ partials, const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    __shared__ cf_acc_t smem[2][CF_BLOCK / 32];
    const cf::u64 chunk = 1ull << chunk_log, per_row = (cols + chunk - 1) >> chunk_log;
    unsigned calls = 0;
    for (cf::u64 s = blockIdx.x; s < rows * per_row; s += gridDim.x) {
        const cf::u64 r = s / per_row, c = s % per_row;
        // The loader spans the whole row, so that positions (and lifted indices) count from
        // the row's start.
        const cf_in_t* row = x + r * stride;
        const cf::u64 first = c << chunk_log;
        const cf::u64 n = first + chunk <= cols ? chunk : cols - first;
        const cf::SegmentLoader<cf_op_t, CF_VEC> ld{row, cols, (reinterpret_cast<unsigned long long>(row) & 15) == 0};
        const cf_acc_t t = cf::segment_tree<cf_op_t, CF_BLOCK, CF_K, CF_VEC, CF_ORDER_FREE != 0>(
            op, ld, first, n, chunk, smem, (int)(threadIdx.x >> 5), calls);
        if (threadIdx.x == 0) partials[s] = t;
    }
}

// A block per row joins the row's chunk trees (cf_segment_chunks) into the row's canonical
// tree: the tile tree over them, cut at next_pow2(cols) >> chunk_log chunks (at most
// CF_BLOCK * 8, split_chunk_log's bound), absent chunks the identity, as the whole-array
// reduction's last block does with its partials; then the row's finish.
extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_segment_combine(const cf_acc_t* __restrict__ partials, cf::u64 rows, cf::u64 cols, unsigned chunk_log,
                   cf_out_t* __restrict__ out, const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    __shared__ cf_acc_t smem[2][CF_BLOCK / 32];
    const cf::u64 per_row = (cols + (1ull << chunk_log) - 1) >> chunk_log;
    const cf::u64 padded = cf::next_pow2(cols) >> chunk_log;
    unsigned calls = 0;
    for (cf::u64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const cf::PartialLoader<cf_op_t> ld{partials + r * per_row, per_row};
        const cf_acc_t t = cf::tile_reduce<cf_op_t, CF_BLOCK, 8, 1>(op, ld, 0, padded, smem[calls++ & 1]);
        if (threadIdx.x == 0) cf::store_out(out + r, op.finish(t, cols));
    }
}
#endif
#if CF_GROUP == 1 && defined(CF_KEY_WORD)
// reduce_by_key in one pass over keys and values: the reduction's thread schedule, with
// CF_KEY_WORD (the unsigned word of a key's width) and CF_KEY_ITEMS (keys a lane) defined.
// A block is one tile of CF_BLOCK / 32 spans of 32 * CF_KEY_ITEMS keys (cf::KeyTile: the
// heads, the look-back over the runs before the tile, each warp's runs that end in its span).
// Each warp then takes its runs in rounds of 32, in order: run r gets its key, its length
// (unless `lengths_out` is null) and its result, the canonical tree over its own positions
// (cf::thread_step, as for segments by offsets, with groups of sixteen lanes for runs of 65
// to 128 positions where the operator is not order-free; a run over 2^CF_LONG_MIN_LOG goes
// to the long list when there is one), written only for r < cap. The last span writes the
// number of runs.
//
// The keys are read once (a run's key again, from cache), the values once for runs within
// a span (a run that started in an earlier span reads that span's values again). H100,
// ms, 2^24 short runs / 16 runs of 2^24 (BENCHMARKS.md): cf::look_back's canonical
// grouping, every earlier leaf of the tile's chunk waited for, 1.75 / 1.33; the decoupled
// look-back 1.44 / 1.17 (0.99 with values prefetched for spans with a head only); a
// look-back a warp, no barrier, 3.73 / 3.04 (ncu: waiting on the loads of the look-back);
// each warp two, four or eight spans in turn (larger tiles, fewer look-backs): 2^24 short
// runs 1.82 / 2.21 / 2.55 ms against 1.43 for one. The block's own tile's keys asked of the
// cache before its ticket: 1.34 / 0.93 (of the L2 instead, the same; the keys of the tile
// 128 to 528 tickets ahead, 1.67-1.76 / 0.93-1.03; the guessed tile's heads found before the
// ticket, 1.51 / 1.11). Blocks that each draw tiles until the last (a grid the device holds),
// the next tile's keys copied to shared memory (cp.async) while this one's runs are
// reduced: 2.64 / 1.40 (likely, not measured: the 32 KiB of staged keys a block leave the L1
// too little room for the values asked of it).
// Without the runs (results wrong) 0.82 / 0.59 ms, without the look-back too 0.76 / 0.41.
// Each warp but warp 0 reducing its first round of short runs before the look-back's
// barrier (where the tile's earlier spans hold a head, so the open run's start is known),
// the results kept in registers until the runs' places are: 2^24 short runs 1.088 -> 1.036
// ms, but power-law runs 0.396 -> 0.404 (0.365 -> 0.380 without lengths) and runs of 1024
// 0.800 -> 0.814 (H100, two rounds; BENCHMARKS.md, "Segments, twenty-second step"); not
// kept, since power-law runs are where the pass trails CUB.
typedef CF_KEY_WORD cf_key_t;

// At most 64 registers a thread (1024 / CF_BLOCK blocks a multiprocessor at least): at 110,
// two blocks of 256 a multiprocessor, 2^24 short runs took 2.37 ms on an H100, 1.75 at 64.
#ifndef CF_BY_KEY_MIN_BLOCKS
#define CF_BY_KEY_MIN_BLOCKS (CF_BLOCK < 1024 ? 1024 / CF_BLOCK : 1)
#endif
extern "C" __global__ void __launch_bounds__(CF_BLOCK, CF_BY_KEY_MIN_BLOCKS)
cf_reduce_by_key(const cf_key_t* __restrict__ keys, const cf_in_t* __restrict__ x, cf::u64 n, cf::u64 tiles,
                 cf::u64 cap, cf_key_t* __restrict__ keys_out, cf_out_t* __restrict__ out,
                 cf::u64* __restrict__ lengths_out, cf::u64* __restrict__ runs_out, unsigned long long* ticket,
                 unsigned long long* agg_slots, unsigned long long* incl_slots, cf::u64* long_hdr,
                 const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    typedef cf::KeyTile<cf_key_t, CF_KEY_ITEMS, CF_BLOCK / 32> key_tile_t;
    __shared__ unsigned short places[CF_BLOCK / 32][key_tile_t::SPAN + 1];
    __shared__ typename key_tile_t::Shared tile_shared;
    __shared__ cf_acc_t smem[2][1];  // unused by a one-warp group
    auto& queues = cf::warp_queues<CF_ORDER_FREE != 0, CF_ORDER_FREE == 0>();
    cf::StepCounts counts;
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    const int lane = (int)(threadIdx.x & 31);
    key_tile_t tile;
    if (!tile.take(tile_shared, &places[0][0], keys, x, n, tiles, ticket, agg_slots, incl_slots)) return;
    const cf::u64 r0 = tile.r0;
    const unsigned bounds = tile.bounds;
    for (unsigned first = 0; first + 1 < bounds; first += 32) {
        const unsigned j = first + lane;
        const bool have = j + 1 < bounds;
        // Lanes past the last run take the first one's bounds (bounds >= 2 here), unused.
        const unsigned b = have ? j : 0u;
        const cf::u64 lo = tile.bound(b), hi = tile.bound(b + 1), r = r0 + j;
        const bool valid = have && r < cap;
        // The run's key is loaded before its tree and stored after it, so that the load's
        // wait overlaps the tree (the empty asm keeps the compiler from moving the load down
        // to the store). Loaded at the store, it was the one pass's longest single wait on
        // short runs (ncu, H200); H200, ms, loaded at the store / early: 2^24 short runs 1.112
        // / 1.048, power-law 0.424 / 0.404, with the keys' batched loads (cf::KeySpan).
        const cf_key_t key = __ldg(keys + lo);
        asm volatile("" ::"l"((unsigned long long)key));
        cf::thread_step<cf_op_t, CF_K, CF_VEC, CF_ORDER_FREE != 0, CF_LONG_TILE_LOG, CF_ORDER_FREE == 0>(
            op, x, n, valid, r, lo, hi, false, out, long_hdr, smem, queues, counts);
        if (valid) {
            keys_out[r] = key;
            if (lengths_out) lengths_out[r] = hi - lo;
        }
    }
    cf::flush_step_queues(op, x, out, queues, counts);
    if (tile.last_span && lane == 0) *runs_out = tile.before.count + tile.k;
}
#endif
#endif
