// cufold: segmented scans: each segment scanned in its own canonical grouping.
//
// Segment s's outputs are what the whole-array scan of that segment alone gives (positions
// counted from the segment's start). A thread per segment scans runs of eight in registers
// and keeps the canonical prefix of the runs before on a binary counter (the grouping of
// cf::PrefixStack, the CPU's twin); it hands a segment longer than CF_SCAN_WARP_MIN to its
// whole warp (cf::warp_scan_tile, or cf::warp_scan_segment for one over CF_THREAD_MAX) or,
// with long lists, one of half a tile of the device-wide scan or more to that scan's
// tiles and look-back (kernels/scan.cuh, cf_scan_long: many blocks per segment). A warp per
// segment (rows of a few hundred) runs cf::warp_scan_segment on each of its segments. A
// block per segment scans tile after tile with the block-level scan of kernels/scan.cuh,
// each tile starting from the fold, largest first, of the completed aligned blocks of tiles
// before it (thread 0's PrefixStack over tile trees): the look-back of the device-wide scan,
// with the tiles in one block's hands.
#pragma once

#include "cufold/segment.cuh"

namespace cf {

// The canonical prefix of a growing sequence, in one thread (the CPU's PrefixStack):
// blocks[k] are the trees of the completed aligned blocks (largest first), prefixes[k] the
// left fold of blocks[0..=k].
template <class Acc> struct PrefixStack {
    Acc blocks[64];
    Acc prefixes[64];
    int depth = 0;
    u64 count = 0;
    template <class Op> __device__ __forceinline__ void push(const Op& op, Acc v) {
        for (u64 k = count; k & 1; k >>= 1) v = op.combine(blocks[--depth], v);
        prefixes[depth] = depth > 0 ? op.combine(prefixes[depth - 1], v) : v;
        blocks[depth++] = v;
        ++count;
    }
    __device__ __forceinline__ bool has() const { return depth > 0; }
    __device__ __forceinline__ Acc prefix() const { return prefixes[depth - 1]; }
};

// PrefixStack's grouping held by a whole warp (every lane calls every method alike, with
// the same values): lane d holds level d's block tree and prefix, so that no array is
// indexed at run time and nothing goes to local memory. (A PrefixStack in each lane, two
// arrays of 64, lives in local memory, whose lines the streamed inputs push out of L1: the
// warp schedule's scan of rows of 128 f32 on an H100 moved three times the input's bytes
// through L2, ncu; 2000 GB/s against 2796 with this stack. The thread schedule, whose
// warps take only its longer segments, measured the other way: short segments 2320 against
// 1950, registers for a path its short segments never take.) Levels at most 32: 2^32
// tiles, more than any segment has.
template <class Acc> struct WarpPrefixStack {
    Acc block;   // lane d: blocks[d]
    Acc folded;  // lane d: prefixes[d]
    int depth = 0;
    u64 count = 0;
    template <class Op> __device__ __forceinline__ void push(const Op& op, Acc v) {
        for (u64 k = count; k & 1; k >>= 1) v = op.combine(shfl_idx(block, --depth), v);
        Acc p = v;
        if (depth > 0) p = op.combine(shfl_idx(folded, depth - 1), v);
        if ((int)(threadIdx.x & 31) == depth) {
            block = v;
            folded = p;
        }
        ++depth;
        ++count;
    }
    __device__ __forceinline__ bool has() const { return depth > 0; }
    __device__ __forceinline__ Acc prefix() const { return shfl_idx(folded, depth - 1); }
};

// The scan of the n values at x into y by a whole warp (every lane calls it with the same
// arguments), in the canonical grouping: tiles of 32 runs of J, each lane's run scanned in
// registers, the warp's runs by cf::WarpScan, and the tile's incoming prefix the fold,
// largest first, of the completed aligned blocks of tiles before it (a `Stack`, PrefixStack
// or WarpPrefixStack, which every lane sees the tile's tree for): the block-per-segment
// scan with a warp for the block, for segments too long for one thread of the thread
// schedule, and the warp schedule's. `staged`: x is a warp's stage in shared memory (plain
// loads, not the read-only cache's), and y may be x itself (each lane writes only the
// positions it has read).
//
// AHEAD: each tile's run is loaded before the tile before it is scanned, so that a
// segment's loads overlap its scans (a position is still read before it is written). The
// warp schedule's rows of 1024 f32 (two tiles a row) on an H100: 2497 -> 2553 GB/s, three
// rounds of one call; the thread schedule's warps do without (their registers).
template <int J, class Stack, bool AHEAD, class Op>
__device__ __forceinline__ void warp_scan_segment(const Op& op, const typename Op::In* x, u64 n, typename Op::Out* y,
                                                  bool exclusive, bool staged = false) {
    typedef typename Op::Acc Acc;
    constexpr u64 TILE = 32 * (u64)J;
    const int lane = threadIdx.x & 31;
    const bool x_aligned = (reinterpret_cast<unsigned long long>(x) & 15) == 0;
    const bool y_aligned = (reinterpret_cast<unsigned long long>(y) & 15) == 0;
    Stack tiles;
    Acc a[J];
    if constexpr (AHEAD)
        if (n > 0) load_run<J>(op, x, n, (u64)lane * J, x_aligned, staged, a);
    for (u64 base = 0; base < n; base += TILE) {
        const u64 pos = base + (u64)lane * J;
        Acc ahead[AHEAD ? J : 1];
        if constexpr (AHEAD) {
            if (base + TILE < n) load_run<J>(op, x, n, pos + TILE, x_aligned, staged, ahead);
        } else {
            load_run<J>(op, x, n, pos, x_aligned, staged, a);
        }
        run_up(op, a);
        WarpScan<Op, Acc> ws;
        const Acc tree = ws.up(op, a[J - 1]);
        bool has = tiles.has();
        Acc p = has ? tiles.prefix() : tree;  // `tree` only fills an empty prefix's place
        tiles.push(op, tree);
        p = ws.down(op, p, has);
        Acc after = shfl_down(p, 1);  // the next lane's exclusive prefix
        const Acc through = tiles.prefix();  // WarpPrefixStack's is a shuffle: every lane's
        if (lane == 31) after = through;
        typename Op::Out o[J];
        run_outputs(op, a, p, has, after, pos, exclusive, o);
        store_run<J>(y, n, pos, y_aligned, o);
        if constexpr (AHEAD) {
#pragma unroll
            for (int j = 0; j < J; ++j) a[j] = ahead[j];
        }
    }
}

// The scan of the n <= MAX values at x into y (MAX a power of two, at least 8), by one
// thread, in the canonical grouping (positions counted from x): exclusive outputs are
// finish(prefix before i, i), inclusive ones finish(prefix through i, i + 1). Runs of eight
// positions are loaded together and scanned in registers (cf::run_up, cf::run_outputs, as a
// tile's runs are); the completed aligned blocks of runs before them sit on a binary counter
// in registers (cf::counter_push; blk[l]: the tree of the last block of 2^l runs while bit l
// of the count is set). A run's exclusive prefix is the fold, largest first, of those
// blocks: PrefixStack's grouping.
//
// The MAX / 8 runs are unrolled, so that run r's count of completed runs (r: every run
// before the last is whole) is known when the code is compiled and the counter's levels are
// registers; positions are 32-bit. (A loop over the runs, with the count and positions in
// 64 bits, kept the counter in local memory and took about 140 instructions a run: ncu,
// H100, 2^24 segments of 4 to 32 f32, 59% of the scan's instructions.)
template <int MAX, class Op>
__device__ __forceinline__ void thread_scan(const Op& op, const typename Op::In* x, unsigned n, typename Op::Out* y,
                                            bool exclusive) {
    typedef typename Op::Acc Acc;
    constexpr int G = 8;
    static_assert(MAX >= G && (MAX & (MAX - 1)) == 0, "MAX: a power of two, at least a run");
    constexpr int RUNS = MAX / G;
    constexpr int LEVELS = ilog2(RUNS) + 1;
    Acc blk[LEVELS];
    Acc pre;  // the fold of blk, largest first (from the first whole run on)
#pragma unroll
    for (int r = 0; r < RUNS; ++r) {
        const unsigned b = (unsigned)(r * G);
        if (b >= n) break;
        Acc a[G];
#pragma unroll
        for (int j = 0; j < G; ++j) a[j] = b + j < n ? op.lift(x[b + j], (u64)(b + j)) : op.identity();
        run_up(op, a);  // a[G - 1]: the run's tree
        const bool has = r > 0;
        const Acc p = has ? pre : a[G - 1];  // a[G - 1] only fills an empty prefix's place
        Acc after = a[G - 1];                // used only when the run is whole
        if (b + G <= n) {
            counter_push(op, blk, (unsigned)r, a[G - 1]);
            bool h = false;
#pragma unroll
            for (int l = LEVELS - 1; l >= 0; --l)
                if (((r + 1) >> l) & 1) extend(op, pre, h, blk[l]);
            after = pre;
        }
        typename Op::Out o[G];
        run_outputs(op, a, p, has, after, (u64)b, exclusive, o);
#pragma unroll
        for (int j = 0; j < G; ++j)
            if (b + j < n) store_out(y + b + j, o[j]);
    }
}

// The scan of the n <= 32 * J values at x into y by a whole warp, in one tile (every lane
// calls it with the same arguments): cf::warp_scan_segment's first tile, with no counter of
// tiles and 32-bit positions. The thread schedule's warp takes its segments of
// CF_SCAN_WARP_MIN + 1 to CF_THREAD_MAX positions with it (J = 8). x may be the warp's stage
// in shared memory, and y x itself (each lane writes only the positions it has read).
// (cf::warp_scan_segment took about 500 instructions a segment there, with tiles of 32 * 16
// for f32, 64-bit positions and its counter of tiles in local memory: ncu, H100, power-law
// lengths, a third of the scan's instructions.)
template <int J, class Op>
__device__ __forceinline__ void warp_scan_tile(const Op& op, const typename Op::In* x, unsigned n,
                                               typename Op::Out* y, bool exclusive) {
    typedef typename Op::Acc Acc;
    const int lane = threadIdx.x & 31;
    const unsigned pos = (unsigned)lane * J;
    Acc a[J];
#pragma unroll
    for (int j = 0; j < J; ++j) a[j] = pos + j < n ? op.lift(x[pos + j], (u64)(pos + j)) : op.identity();
    run_up(op, a);
    WarpScan<Op, Acc> ws;
    const Acc tree = ws.up(op, a[J - 1]);
    bool has = false;
    const Acc p = ws.down(op, tree, has);  // `tree` only fills an empty prefix's place
    Acc after = shfl_down(p, 1);           // the next lane's exclusive prefix
    if (lane == 31) after = tree;          // through the tile's end
    typename Op::Out o[J];
    run_outputs(op, a, p, has, after, (u64)pos, exclusive, o);
#pragma unroll
    for (int j = 0; j < J; ++j)
        if (pos + j < n) store_out(y + pos + j, o[j]);
}

}  // namespace cf

// The scan's thread schedule stages a warp's segments (cf::stage_span) only when none is
// longer than this; longer ones go to the warp (or to the long pass) from x.
#define CF_THREAD_MAX 256
// In the scan's thread schedule, a segment over this many positions goes to its warp
// (cf::warp_scan_segment: from the warp's stage where the warp's span was staged, else from
// x) rather than to its lane alone.
#define CF_SCAN_WARP_MIN 32

#ifdef CF_SEGMENT_SCAN_KERNEL
// The segmented scan, instantiated with CF_OP, CF_BLOCK, CF_GROUP (1: a thread per segment,
// 32: a warp, or CF_BLOCK), CF_ITEMS (a power of two: positions per thread per tile), CF_ALGO,
// CF_OP_BYTES and CF_LIST_TILE_LOGS (log2 of the tiles of the device-wide scan's long
// passes, ascending, comma-separated: one to three). Segment s of x (rows: lo = s * stride,
// cols long; offsets: offsets[s] .. offsets[s + 1]) is scanned into y at s * cols (rows,
// packed) or at lo (offsets). `lists`, for ragged offsets on the thread schedule and runs by
// key, are the long lists (kernels/long_list.cuh, cf::list_for_scan), one for each of those
// tiles, that cf_scan_long then takes; 0 otherwise.
typedef CF_OP cf_op_t;
typedef cf_op_t::In cf_in_t;
typedef cf_op_t::Acc cf_acc_t;
typedef cf_op_t::Out cf_out_t;

// Where segment s's outputs start, from its bounds lo .. hi (cf::raw_bounds): at lo for
// offsets, packed at s * cols for rows; false for bounds that are not a segment of the input
// (cf::segment_in_input).
__device__ __forceinline__ bool cf_scan_place(cf::u64 s, cf::u64 n, const cf::u64* __restrict__ offsets,
                                              cf::u64 cols, cf::u64 lo, cf::u64 hi, cf::u64& at) {
    at = offsets ? lo : s * cols;
    return cf::segment_in_input(lo, hi, n);
}

// Segment s's bounds and where its outputs start (cf_scan_place).
__device__ __forceinline__ bool cf_scan_bounds(cf::u64 s, cf::u64 n, const cf::u64* __restrict__ offsets,
                                               cf::u64 stride, cf::u64 cols, cf::u64& lo, cf::u64& hi,
                                               cf::u64& at) {
    cf::raw_bounds(s, offsets, stride, cols, lo, hi);
    return cf_scan_place(s, n, offsets, cols, lo, hi, at);
}

// The scan's thread schedule's step, by every lane of a warp (cf_segment_scan's and
// cf_scan_by_key's): lane l's segment, positions lo .. hi of x (`mine`: the lane holds one,
// `valid`: it is to be scanned, into y from `at`), in `warp_stage` (the warp's
// cf::SpanStage<CF_BLOCK>::BYTES of shared memory) where the warp's segments could be
// staged. `s` names the segment in the long lists at `lists` (kernels/long_list.cuh,
// cf::list_for_scan, with the warp's atomics at once where WARP_LISTS), one for each tile of
// CF_LIST_TILE_LOGS; null for none.
//
// A segment of CF_SCAN_WARP_MIN or fewer positions is scanned by its lane
// (cf::thread_scan); longer ones are then scanned by the whole warp, one after another
// (cf::warp_scan_tile up to CF_THREAD_MAX positions, cf::warp_scan_segment beyond), as the
// reduction's thread schedule does: the same outputs, without one lane walking a long
// segment alone.
//
// A warp whose segments are short and adjacent stages their span in shared memory
// (cf::stage_span) and, when outputs are as wide as inputs, scans each segment there in
// place and stores the span back in coalesced stores. Adjacent segments have at == lo
// (offsets and runs of keys; rows only when the stride is the row length).
template <bool WARP_LISTS>
__device__ __forceinline__ void cf_scan_thread_step(const cf_op_t& op, const cf_in_t* __restrict__ x, cf::u64 n,
                                                    bool mine, bool valid, cf::u64 s, cf::u64 lo, cf::u64 hi,
                                                    cf::u64 at, cf_out_t* __restrict__ y, bool exclusive,
                                                    cf::u64* lists, uint4* warp_stage) {
    constexpr int SPAN_BYTES = cf::SpanStage<CF_BLOCK>::BYTES;
    constexpr bool IN_PLACE = sizeof(cf_out_t) == sizeof(cf_in_t);
    cf_in_t* stage = reinterpret_cast<cf_in_t*>(warp_stage);
    cf_out_t* ostage = reinterpret_cast<cf_out_t*>(warp_stage);
    const bool longer = valid && hi - lo > CF_THREAD_MAX;
    cf::u64 start = 0;
    unsigned skew = 0, span = 0;
    const bool staged = cf::stage_span<SPAN_BYTES / (int)sizeof(cf_in_t)>(x, mine, valid && !longer, lo, hi, stage,
                                                                         start, skew, span);
    // Segments over CF_SCAN_WARP_MIN go to the warp, one after another: where the warp's
    // span could not be staged, a lane's stores to its own segment each touch their own
    // sector, and the warp scans them with coalesced loads and stores; where it was
    // staged, the warp scans them in the stage, so that no lane walks a segment of up to
    // CF_THREAD_MAX alone while the others wait (ragged power-law lengths on an H100: 13.9
    // threads of 32 an instruction, ncu).
    const bool to_warp = valid && !longer && hi - lo > CF_SCAN_WARP_MIN;
    if (valid && !longer && !to_warp) {
        const cf_in_t* src = staged ? stage + skew + (lo - start) : x + lo;
        cf_out_t* dst = staged && IN_PLACE ? ostage + skew + (lo - start) : y + at;
        cf::thread_scan<CF_SCAN_WARP_MIN>(op, src, (unsigned)(hi - lo), dst, exclusive);
    }
    // With long lists (ragged offsets, runs by key), the longest go to the device-wide
    // scan's tiles (kernels/scan.cuh, cf_scan_long): each to the largest tile it fills, from
    // half the smallest on. (Segments of exactly half a tile stayed with the warps, one after
    // another, before: 2^16 segments of 4096 f32 by offsets, H100, ms, two rounds, 0.917 /
    // 0.923 there, 0.861 / 0.861 on the long pass; BENCHMARKS.md, "Segments, twenty-seventh
    // step".) On the tile each fills rather than on one: H100, 2^28 f32 by offsets, ms, on
    // the device-wide scan's own tiles of 8192 / on tiles of 4096: 2^16 segments of 4096
    // 0.861 / 0.814, but 2^15 of 8192 0.825 / 0.893; by key, own / large tiles of 16384:
    // 2^14 runs of 2^14 1.303 / 1.257, 16 runs of 2^24 1.376 / 1.305, but runs of 4096 1.329 /
    // 1.389 (BENCHMARKS.md, "Segments, thirtieth step").
    constexpr int LIST_LOGS[] = {CF_LIST_TILE_LOGS};
    // (A staged span has no segment longer than CF_THREAD_MAX: stage_span's ballot said so.)
    const bool listed =
        lists && !staged && cf::list_for_scan<WARP_LISTS>(longer, lists, n, LIST_LOGS, s, lo, hi - lo);
    // The warp's segments, one after another: from the stage where it was staged (in
    // place where outputs are as wide as inputs: each lane writes only the positions it
    // has read), else from x to y. One call, so that its code (and registers) is there
    // once: with a call for each, the compiler took 127 registers a thread and a
    // quarter of the warps ran (ncu); capping it at 64 (four blocks of 256 a
    // multiprocessor) cost 15% on short segments against this (H100, one call: 1998
    // against 2342 GB/s), and a call for each under that cap measured the same as the
    // cap alone.
    for (unsigned mask = __ballot_sync(~0u, (longer && !listed) || to_warp); mask; mask &= mask - 1) {
        const int j = __ffs(mask) - 1;
        const cf::u64 a = __shfl_sync(~0u, lo, j), b = __shfl_sync(~0u, hi, j), o = __shfl_sync(~0u, at, j);
        const cf_in_t* src = staged ? stage + skew + (a - start) : x + a;
        cf_out_t* dst = staged && IN_PLACE ? ostage + skew + (a - start) : y + o;
        if (b - a <= CF_THREAD_MAX)
            cf::warp_scan_tile<CF_THREAD_MAX / 32>(op, src, (unsigned)(b - a), dst, exclusive);
        else
            cf::warp_scan_segment<CF_ITEMS, cf::PrefixStack<cf_acc_t>, false>(op, src, b - a, dst, exclusive,
                                                                              staged);
    }
    if (staged) {
        __syncwarp();
        if (IN_PLACE) {
            // Every position of the span belongs to one of the warp's segments.
            cf::unstage_span(y, ostage, start, skew, span);
            __syncwarp();
        }
    }
}

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_segment_scan(const cf_in_t* __restrict__ x, cf::u64 n, cf::u64 segments, const cf::u64* __restrict__ offsets,
                cf::u64 stride, cf::u64 cols, unsigned exclusive, cf_out_t* __restrict__ y, cf::u64* lists,
                const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
#if CF_GROUP == 1
    // Lane l of a warp takes segment base + l (cf_scan_thread_step).
    __shared__ uint4 span_stage[CF_BLOCK / 32][cf::SpanStage<CF_BLOCK>::BYTES / 16];
    // Each step's bounds are loaded a step ahead, and its span is asked of the L1 at the end
    // of the step before (cf::thread_steps, as the reduction's thread schedule does): a
    // step waited on its offsets, then on its span. H100, f32 cumsum, ms, 2^24 segments of
    // 4 to 32 / power-law lengths: 1.030 / 0.473-0.476 without, 0.939-0.944 / 0.444-0.449
    // with the prefetch right after the stage is copied, 0.911-0.924 / 0.414-0.417 at the
    // step's end (BENCHMARKS.md, "Segments, twenty-third step"). Capped at 64 registers
    // (four blocks of 256 a multiprocessor instead of three), 1.154-1.161 / 0.486-0.493:
    // not kept.
    cf::thread_steps<CF_BLOCK>(x, n, segments, offsets, stride, cols, [&](cf::u64 s, cf::u64 lo, cf::u64 hi) {
        cf::u64 at;
        const bool valid = cf_scan_place(s, n, offsets, cols, lo, hi, at) && s < segments;
        cf_scan_thread_step<true>(op, x, n, s < segments, valid, s, lo, hi, at, y, exclusive != 0, lists,
                            span_stage[threadIdx.x >> 5]);
    });
#elif CF_GROUP == 32
    // A warp per segment (planned for rows over CF_SCAN_WARP_MIN, whose lengths are all
    // the same; segments by offsets when forced): the block's warps on consecutive segments, each scanned from x into y by its warp
    // (cf::warp_scan_segment) in tiles of 32 runs of CF_ITEMS, which the host picks so that
    // a row of a few hundred positions fills its tiles (rows of 128 f32: four a lane, one
    // tile). No shared memory, few registers: the memory is kept busy by many warps.
    const cf::u64 warps = (cf::u64)gridDim.x * (CF_BLOCK / 32);
    for (cf::u64 s = (cf::u64)blockIdx.x * (CF_BLOCK / 32) + (threadIdx.x >> 5); s < segments; s += warps) {
        cf::u64 lo, hi, at;
        if (cf_scan_bounds(s, n, offsets, stride, cols, lo, hi, at))
            cf::warp_scan_segment<CF_ITEMS, cf::WarpPrefixStack<cf_acc_t>, true>(op, x + lo, hi - lo, y + at, exclusive != 0);
    }
#else
    static_assert(CF_GROUP == CF_BLOCK, "a segment takes a thread, a warp or the whole block");
    constexpr int J = CF_ITEMS;
    constexpr cf::u64 TILE = (cf::u64)CF_BLOCK * J;
    typedef cf::BlockScan<CF_ALGO, CF_BLOCK, cf_op_t, cf_acc_t> block_scan_t;
    __shared__ typename block_scan_t::Storage storage;
    __shared__ cf_acc_t next[CF_BLOCK + 1];
    __shared__ cf_acc_t tile_prefix;
    __shared__ bool tile_has;
    // Thread 0's binary counter over the segment's tiles: the tile's exclusive prefix is the
    // fold, largest first, of the completed aligned blocks of tiles before it.
    cf::PrefixStack<cf_acc_t> tiles;
    for (cf::u64 s = blockIdx.x; s < segments; s += gridDim.x) {
        cf::u64 lo, hi, at;
        if (!cf_scan_bounds(s, n, offsets, stride, cols, lo, hi, at)) continue;
        const cf::u64 len = hi - lo;
        const cf_in_t* xs = x + lo;
        cf_out_t* ys = y + at;
        const bool x_aligned = (reinterpret_cast<unsigned long long>(xs) & 15) == 0;
        const bool y_aligned = (reinterpret_cast<unsigned long long>(ys) & 15) == 0;
        if (threadIdx.x == 0) {
            tiles.depth = 0;
            tiles.count = 0;
        }
        for (cf::u64 base = 0; base < len; base += TILE) {
            const cf::u64 pos = base + (cf::u64)threadIdx.x * J;
            cf_acc_t a[J];
            cf::load_run<J>(op, xs, len, pos, x_aligned, false, a);
            cf::run_up(op, a);
            block_scan_t bs;
            const cf_acc_t tree = bs.up(op, a[J - 1], storage);
            if (threadIdx.x == 0) {
                tile_has = tiles.has();
                if (tile_has) tile_prefix = tiles.prefix();
                tiles.push(op, tree);
                next[CF_BLOCK] = tiles.prefix();
            }
            __syncthreads();
            bool has = tile_has;
            const cf_acc_t p = bs.down(op, tile_prefix, has, storage);
            next[threadIdx.x] = p;
            __syncthreads();
            cf_out_t o[J];
            cf::run_outputs(op, a, p, has, next[threadIdx.x + 1], pos, exclusive != 0, o);
            cf::store_run<J>(ys, len, pos, y_aligned, o);
            __syncthreads();  // next[] and the storage are written again by the next tile
        }
    }
#endif
}
#if CF_GROUP == 1 && defined(CF_KEY_WORD)
// scan_by_key in one pass over keys and values: the thread schedule's steps on runs of
// equal keys, with CF_KEY_WORD (the unsigned word of a key's width) and CF_KEY_ITEMS (keys
// a lane) defined. A block is one tile of CF_BLOCK / 32 spans of 32 * CF_KEY_ITEMS keys
// (cf::KeyTile, as cf_reduce_by_key's: the heads, the look-back over the runs before the
// tile, each warp's runs that end in its span). Each warp takes its runs 32 at a time
// (cf_scan_thread_step, as for segments by offsets): a run is scanned from its own first
// position wherever that lies, since its canonical grouping counts from there, so a run
// that crosses spans or tiles is read and written whole by the warp where it ends or, half
// a tile of the device-wide scan or longer, with long lists, by cf_scan_long (on the
// largest of the lists' tiles it fills). Every
// position belongs to exactly one run, so each output is written once. The lists of heads
// take the dynamic shared memory (src/segment/scan_gpu.rs, key_places_bytes), the warps'
// stages the static.
typedef CF_KEY_WORD cf_key_t;
extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_scan_by_key(const cf_key_t* __restrict__ keys, const cf_in_t* __restrict__ x, cf::u64 n, cf::u64 tiles,
               unsigned exclusive, cf_out_t* __restrict__ y, unsigned long long* ticket,
               unsigned long long* agg_slots, unsigned long long* incl_slots, cf::u64* lists,
               const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    typedef cf::KeyTile<cf_key_t, CF_KEY_ITEMS, CF_BLOCK / 32> key_tile_t;
    extern __shared__ uint4 cf_key_places[];
    __shared__ typename key_tile_t::Shared tile_shared;
    __shared__ uint4 span_stage[CF_BLOCK / 32][cf::SpanStage<CF_BLOCK>::BYTES / 16];
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    key_tile_t tile;
    if (!tile.take(tile_shared, reinterpret_cast<unsigned short*>(cf_key_places), keys, x, n, tiles, ticket,
                   agg_slots, incl_slots))
        return;
    const unsigned lane = threadIdx.x & 31;
    for (unsigned first = 0; first + 1 < tile.bounds; first += 32) {
        const unsigned j = first + lane;
        const bool have = j + 1 < tile.bounds;
        // Lanes past the last run take the first one's bounds (bounds >= 2 here), unused.
        const unsigned b = have ? j : 0u;
        const cf::u64 lo = tile.bound(b), hi = tile.bound(b + 1);
        cf_scan_thread_step<false>(op, x, n, have, have, tile.r0 + j, lo, hi, lo, y, exclusive != 0, lists,
                            span_stage[threadIdx.x >> 5]);
    }
}
#endif
#endif
