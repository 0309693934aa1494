// cufold: the device-wide reduction.
//
// The input's positions 0..P (P = next_pow2(N), positions past N hold the identity) are
// combined as the balanced binary tree over them, whatever the launch shape:
//
//   thread    VEC contiguous items (one 16-byte load when the input is aligned):
//             cf::thread_reduce (thread.cuh)
//   warp      32 lanes x VEC items per load, K loads: cf::warp_reduce of the K loads at
//             once (warp.cuh), then the K load results in order (cf::thread_reduce)
//   block     WARPS warp results in warp order: cf::block_reduce_warps (block.cuh)
//                                                       -> one TILE = BLOCK*K*VEC positions
//   grid      each block reduces R consecutive tiles (R a power of two) with a binary
//             counter, writes one partial; the last block to finish (the handle's ticket
//             counter) reduces the partials as the tree over next_pow2(#blocks) and applies
//             finish.
//
// Every stage combines aligned neighbours, so the result is the canonical tree: identical
// bits for any BLOCK, K, R or grid, and correct for non-commutative operators. A stage
// combines two nodes only while the node spans at most `limit` = P positions, which keeps
// the tree exactly log2(P) levels tall when N is smaller than a tile.
#pragma once

#include "cufold/block.cuh"
#include "cufold/io.cuh"
#include "cufold/ops.cuh"

namespace cf {

// Reads the op's input, lifts it with its global index; identity past n.
template <class Op, int VEC, bool VECTOR> struct InputLoader {
    typedef typename Op::In In;
    typedef typename Op::Acc Acc;
    const In* __restrict__ x;
    u64 n;
    __device__ __forceinline__ void load(const Op& op, u64 p, Acc (&items)[VEC]) const {
        if (VECTOR && p + VEC <= n) {
            static_assert(!VECTOR || sizeof(In) * VEC == 16, "vector loads are 16 bytes");
            uint4 raw = __ldg(reinterpret_cast<const uint4*>(x + p));
            In v[VEC];
            memcpy(v, &raw, sizeof(raw));
#pragma unroll
            for (int i = 0; i < VEC; ++i) items[i] = op.lift(v[i], p + i);
        } else {
#pragma unroll
            for (int i = 0; i < VEC; ++i) items[i] = (p + i < n) ? op.lift(x[p + i], p + i) : op.identity();
        }
    }
    // The VEC raw inputs at p, unlifted (for cf::free_run, which lifts one at a time): one
    // 16-byte load when VECTOR and all VEC are in range; positions past n are left alone.
    __device__ __forceinline__ void fetch(u64 p, In (&v)[VEC]) const {
        if (VECTOR && p + VEC <= n) {
            uint4 raw = __ldg(reinterpret_cast<const uint4*>(x + p));
            memcpy(v, &raw, sizeof(raw));
        } else {
#pragma unroll
            for (int i = 0; i < VEC; ++i)
                if (p + i < n) v[i] = x[p + i];
        }
    }
};

// Reads accumulators (the per-block partials); identity past n.
template <class Op> struct PartialLoader {
    typedef typename Op::Acc Acc;
    const Acc* p_;
    u64 n;
    __device__ __forceinline__ void load(const Op& op, u64 p, Acc (&items)[1]) const {
        items[0] = p < n ? load_cg(p_ + p) : op.identity();
    }
};

// cf::tile_reduce_at's stages after the loads: v[k] is the tree over the thread's VEC positions
// of load k (cut at `limit`); the warp (group) joins its lanes, each thread its K loads,
// and the block its warps. Every thread of the group calls it; the result is meaningful in
// the group's first thread. (Separate so that a tile's loads may be issued before the tile
// before it is joined: cf::pipelined_trees.)
template <class Op, int BLOCK, int K, int VEC, int WIDTH = 32>
__device__ __forceinline__ typename Op::Acc tile_join(const Op& op, typename Op::Acc (&v)[K], u64 limit,
                                                      typename Op::Acc* smem) {
    constexpr u64 SEG = (u64)WIDTH * VEC;
    constexpr u64 WARP_SPAN = SEG * K;
    // How many lanes (warps) a tree of `limit` positions spans at each stage, at most `most`.
    const auto spans = [limit](u64 unit, int most) { return (int)(limit / unit < (u64)most ? limit / unit : most); };
    warp_reduce(op, v, spans(VEC, WIDTH));
    thread_reduce(op, v, limit / SEG);
    if constexpr (WIDTH < 32)
        return v[0];
    else
        return block_reduce_warps<BLOCK>(op, v[0], smem, spans(WARP_SPAN, 32));
}

// The canonical tree over TILE = BLOCK*K*VEC positions starting at `base`, cut at `limit`
// positions (a power of two). The result is meaningful in thread 0. `smem`: WARPS accs,
// not written again before the block's next __syncthreads() (see cf::block_reduce_warps).
//
// tile_reduce_at is the same for a group of BLOCK threads that is not the whole block (one
// warp of a block whose warps reduce different segments, kernels/segment.cuh): `warp` is
// the calling warp's place in the group. WIDTH is how many lanes share one load instruction:
// 32, or a group of WIDTH = BLOCK lanes narrower than a warp (8 or 16, the warp's other
// groups on other segments at the same time), which has no block stage (`smem` unused, `warp`
// 0) and whose result is meaningful in the group's first lane: load k of lane j reads the VEC
// positions at k * WIDTH * VEC + j * VEC, and the shuffles join aligned neighbours only
// within a group, so every width builds the same tree.
template <class Op, int BLOCK, int K, int VEC, int WIDTH = 32, class Loader>
__device__ __forceinline__ typename Op::Acc tile_reduce_at(const Op& op, const Loader& ld, u64 base, u64 limit,
                                                           typename Op::Acc* smem, int warp) {
    typedef typename Op::Acc Acc;
    static_assert(WIDTH == 32 || WIDTH == BLOCK, "a group narrower than a warp is one load wide");
    constexpr u64 SEG = (u64)WIDTH * VEC;  // positions one warp (group) covers per load
    constexpr u64 WARP_SPAN = SEG * K;     // positions one warp covers per tile
    const int lane = (int)(threadIdx.x % WIDTH);
    const u64 wbase = base + (u64)warp * WARP_SPAN;

    Acc v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        Acc items[VEC];
        ld.load(op, wbase + k * SEG + (u64)lane * VEC, items);
        thread_reduce(op, items, limit);
        v[k] = items[0];
    }
    return tile_join<Op, BLOCK, K, VEC, WIDTH>(op, v, limit, smem);
}

template <class Op, int BLOCK, int K, int VEC, class Loader>
__device__ __forceinline__ typename Op::Acc tile_reduce(const Op& op, const Loader& ld, u64 base, u64 limit,
                                                        typename Op::Acc* smem) {
    return tile_reduce_at<Op, BLOCK, K, VEC>(op, ld, base, limit, smem, (int)(threadIdx.x >> 5));
}

// The calling thread's first position in the tile at `base` for loads of 32 lanes side by side,
// a warp's K loads one after another (tile_reduce's layout): its load k is at the result + k
// * 32 * VEC.
template <int K, int VEC> __device__ __forceinline__ u64 tile_load_at(u64 base) {
    constexpr u64 SEG = 32ull * VEC;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    return base + (u64)warp * SEG * K + (u64)lane * VEC;
}

// A binary counter of nodes: node t, which closes position i at `level` (0 for a leaf, log2
// of its size for a larger node ending at i), joins (`join(left, right)`) every complete
// aligned group it ends, and the result waits in stack[level] for its right neighbour.
// (lane_run_loads keeps its own copy of these lines: through this helper MeanVar<f32>'s
// kernel compiled to another instruction schedule, 16 instructions longer.)
template <class Acc, class Join>
__device__ __forceinline__ void counter_push(Acc* stack, u64 i, int level, Acc t, const Join& join) {
#pragma unroll
    for (; (i >> level) & 1; ++level) t = join(stack[level], t);
    stack[level] = t;
}

// tile_reduce of a tile that lies wholly in the input, read through an aligned InputLoader
// (cf::stages_input): all K 16-byte loads issued first, with no bounds test, then each load's
// tree, then the same joins. The same nodes as tile_reduce (its trees are cut at `limit`,
// which is at least the tile here), with the thread's K loads in flight together: the bounds
// test between tile_reduce's loads keeps the compiler from issuing one before the tree of
// the one before (a load at a time a thread).
template <class Op, int BLOCK, int K, int VEC, class Loader>
__device__ __forceinline__ typename Op::Acc tile_reduce_whole(const Op& op, const Loader& ld, u64 base, u64 limit,
                                                              typename Op::Acc* smem) {
    typedef typename Op::Acc Acc;
    typedef typename Op::In In;
    static_assert(sizeof(In) * VEC == 16, "whole tiles read 16 bytes a load");
    constexpr u64 SEG = 32ull * VEC;
    const u64 at = tile_load_at<K, VEC>(base);
    uint4 w[K];
#pragma unroll
    for (int k = 0; k < K; ++k) w[k] = __ldg(reinterpret_cast<const uint4*>(ld.x + at + k * SEG));
    Acc v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        In raw[VEC];
        memcpy(raw, &w[k], 16);
        Acc items[VEC];
#pragma unroll
        for (int i = 0; i < VEC; ++i) items[i] = op.lift(raw[i], at + k * SEG + i);
        thread_reduce(op, items, VEC);
        v[k] = items[0];
    }
    return tile_join<Op, BLOCK, K, VEC>(op, v, limit, smem);
}

// An operator's combine for two non-empty nodes of equal count, which is every combine inside
// a tile that lies wholly in the input (the canonical tree is balanced there): an operator
// may define `combine_full` for that case, with combine's bits and less work (MeanVar: no
// division, no empty-side checks). full_op<Op>::type is then Op with combine_full as its
// combine, else Op itself.
template <class Op> struct FullCombine : Op {
    __device__ __forceinline__ typename Op::Acc combine(typename Op::Acc a, typename Op::Acc b) const {
        return Op::combine_full(a, b);
    }
};
template <class T> struct void_type { typedef void type; };
template <class Op, class = void> struct full_op {
    typedef Op type;
    static constexpr bool HAS = false;
};
template <class Op> struct full_op<Op, typename void_type<decltype(&Op::combine_full)>::type> {
    typedef FullCombine<Op> type;
    static constexpr bool HAS = true;
};

// Lane runs: a tile that lies wholly in the input, read so that each lane holds K * VEC
// contiguous positions (its K loads one after another, at `base` + warp * 32 K VEC + lane *
// K VEC + k VEC) instead of load k of every lane side by side. The lane builds the tree over
// its run alone, then the warp joins its 32 runs and the block its warps: the same aligned
// nodes in the same order, so the same bits as tile_reduce_at, with one shuffle tree a tile
// instead of one a load. For operators whose accumulator is large or whose combine is dear
// (MeanVar's 24 bytes: a shuffle tree of 30 shuffles and 5 combines a load was most of its
// instructions; CompensatedSum's TwoSums); the loads stride K * 16 bytes across the warp,
// which the L1 cache merges, so operators with small accumulators keep the side-by-side loads.
// An operator asks for it with a static `LANE_RUNS = true`.
template <class Op, class = void> struct lane_runs { static constexpr bool value = false; };
template <class Op> struct lane_runs<Op, typename void_type<decltype(Op::LANE_RUNS)>::type> {
    static constexpr bool value = Op::LANE_RUNS;
};
// An operator may also give a cheaper combine for nodes whose inputs all pass its `tame`
// test (MeanVar: finite differences of means, no branch): `combine_tame`, with combine's bits
// on such nodes. A lane joins each load whose inputs are all tame with it, and its loads'
// trees while every load so far was (lane_run_by_load).
template <class Op, class = void> struct has_tame { static constexpr bool value = false; };
template <class Op> struct has_tame<Op, typename void_type<decltype(&Op::combine_tame)>::type> {
    static constexpr bool value = true;
};
// The wrappers of ops.cuh that map inputs or move positions (Mapped, At, Tree) keep their
// operator's faster forms, with its bits: its lane runs, its combine_full and, for At and
// Tree, whose inputs are the operator's own, its tame combine (Mapped's inputs are samples
// or values before its map, which the operator's `tame` does not judge). `o` is a wrapper's
// operator.
template <class W> struct WrappedFull : W {
    __device__ __forceinline__ typename W::Acc combine(typename W::Acc a, typename W::Acc b) const {
        typedef decltype(W::o) O;
        typename full_op<O>::type f;
        static_cast<O&>(f) = this->o;
        return f.combine(a, b);
    }
};
template <class F, class O> struct full_op<Mapped<F, O>, void> {
    typedef WrappedFull<Mapped<F, O>> type;
    static constexpr bool HAS = full_op<O>::HAS;
};
template <class O> struct full_op<At<O>, void> {
    typedef WrappedFull<At<O>> type;
    static constexpr bool HAS = full_op<O>::HAS;
};
template <class O> struct full_op<Tree<O>, void> {
    typedef WrappedFull<Tree<O>> type;
    static constexpr bool HAS = full_op<O>::HAS;
};
template <class F, class O> struct lane_runs<Mapped<F, O>, void> { static constexpr bool value = lane_runs<O>::value; };
template <class O> struct lane_runs<At<O>, void> { static constexpr bool value = lane_runs<O>::value; };
template <class O> struct lane_runs<Tree<O>, void> { static constexpr bool value = lane_runs<O>::value; };
template <class O> struct has_tame<At<O>, void> { static constexpr bool value = has_tame<O>::value; };
template <class O> struct has_tame<Tree<O>, void> { static constexpr bool value = has_tame<O>::value; };
template <class W> struct has_tame<WrappedFull<W>, void> { static constexpr bool value = has_tame<W>::value; };
// An operator whose raw inputs its tame test cannot judge (Mapped: they are values before the
// map) may judge lifted inputs instead, `tame_acc(Acc)` (lane_run_by_load takes either). Only
// where the raw test is not there: At and Tree over MeanVar keep it.
template <class Op, class = void> struct has_tame_acc { static constexpr bool value = false; };
template <class O, class = void> struct tame_acc_member { static constexpr bool value = false; };
template <class O> struct tame_acc_member<O, typename void_type<decltype(&O::tame_acc)>::type> {
    static constexpr bool value = true;
};
template <class F, class O> struct has_tame_acc<Mapped<F, O>, void> {
    static constexpr bool value = has_tame<O>::value && tame_acc_member<O>::value;
};
template <class O> struct has_tame_acc<At<O>, void> { static constexpr bool value = has_tame_acc<O>::value; };
template <class O> struct has_tame_acc<Tree<O>, void> { static constexpr bool value = has_tame_acc<O>::value; };
template <class W> struct has_tame_acc<WrappedFull<W>, void> { static constexpr bool value = has_tame_acc<W>::value; };
// An operator over bytes may give the node over up to 2^18 aligned positions from their
// integer sum and sum of squares (`BYTE_RUNS`, `byte_run(sum, sumsq, n)`: MeanVar<u8>, whose
// nodes there are exact), which the block then computes with __dp4a, four bytes an
// instruction (byte_group, byte_tile_reduce).
template <class Op, class = void> struct byte_runs { static constexpr bool value = false; };
template <class Op> struct byte_runs<Op, typename void_type<decltype(Op::BYTE_RUNS)>::type> {
    static constexpr bool value = Op::BYTE_RUNS;
};
// Whether loader L reads aligned input with 16-byte loads (InputLoader with VECTOR), which
// staged lane runs and byte groups read straight from x.
template <class L> struct stages_input { static constexpr bool value = false; };
template <class Op, int VEC> struct stages_input<InputLoader<Op, VEC, true>> { static constexpr bool value = true; };
// Byte runs in groups: the tree over `tiles` whole tiles from `base` (a power of two of them,
// at most byte_group_most() positions, an aligned node of the canonical tree), from the integer sum and
// sum of squares of its bytes, which every thread gathers from the tiles' coalesced loads in
// any order (the node is exact, so the order of the bytes does not matter), the warps with
// __reduce_add_sync and thread 0 from the warps' pairs in `smem` (WARPS of them; callers
// alternate two arrays between groups): one barrier a group, no f64 arithmetic in the loop.
// The result is meaningful in thread 0.
template <int BLOCK, int K, int VEC>
__device__ __forceinline__ constexpr u64 byte_group_most() {
    // 2^18 positions keep every node exact (ops.cuh, MeanVar::byte_run); at most 2^16 a warp
    // keeps a warp's sum of squares (each at most 255^2) in 32 bits.
    return (BLOCK / 32) * 65536ull < (1ull << 18) ? (BLOCK / 32) * 65536ull : (1ull << 18);
}
// The K 16-byte loads of one tile of the calling thread's at `at` (byte_group), issued
// together: straight from x for aligned input (stages_input; the group is whole, so no
// position needs a guard), else through the loader.
template <int K, int VEC, class Loader>
__device__ __forceinline__ void byte_loads(const Loader& ld, u64 at, uint4 (&w)[K]) {
    constexpr u64 SEG = 32ull * VEC;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        if constexpr (stages_input<Loader>::value) {
            w[k] = __ldg(reinterpret_cast<const uint4*>(ld.x + at + k * SEG));
        } else {
            unsigned char v[VEC];
            ld.fetch(at + k * SEG, v);
            memcpy(&w[k], v, 16);
        }
    }
}
// Adds the bytes of K loads to `sum` and `sumsq`, four an instruction.
template <int K> __device__ __forceinline__ void byte_sums(const uint4 (&w)[K], unsigned& sum, unsigned& sumsq) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const unsigned words[4] = {w[k].x, w[k].y, w[k].z, w[k].w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            sum = __dp4a(words[q], 0x01010101u, sum);
            sumsq = __dp4a(words[q], words[q], sumsq);
        }
    }
}
template <class Op, int BLOCK, int K, int VEC, class Loader>
__device__ __forceinline__ typename Op::Acc byte_group(const Op& op, const Loader& ld, u64 base, u64 tiles,
                                                       uint2* smem) {
    constexpr int WARPS = BLOCK / 32;
    constexpr u64 TILE = (u64)BLOCK * K * VEC;
    static_assert(sizeof(typename Op::In) == 1 && VEC == 16, "byte groups read 16 bytes a load");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned sum = 0, sumsq = 0;
    const u64 at = tile_load_at<K, VEC>(base);
    // Two tiles' loads in turn: the next tile's are issued before this one's are added, so
    // that a thread always has loads in flight.
    uint4 a[K], b[K];
    byte_loads<K, VEC>(ld, at, a);
    u64 j = 1;
#pragma unroll 1
    for (; j + 1 < tiles; j += 2) {
        byte_loads<K, VEC>(ld, at + j * TILE, b);
        byte_sums(a, sum, sumsq);
        byte_loads<K, VEC>(ld, at + (j + 1) * TILE, a);
        byte_sums(b, sum, sumsq);
    }
    if (j < tiles) {
        byte_loads<K, VEC>(ld, at + j * TILE, b);
        byte_sums(a, sum, sumsq);
        byte_sums(b, sum, sumsq);
    } else {
        byte_sums(a, sum, sumsq);
    }
    sum = __reduce_add_sync(0xffffffffu, sum);
    sumsq = __reduce_add_sync(0xffffffffu, sumsq);
    if (lane == 0) smem[warp] = make_uint2(sum, sumsq);
    __syncthreads();
    typename Op::Acc r = op.identity();
    if (threadIdx.x == 0) {
        u64 s = 0, q = 0;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
            s += smem[w].x;
            q += smem[w].y;
        }
        r = op.byte_run(s, q, tiles * TILE);
    }
    return r;
}
// A byte operator's tree over the VEC positions of one load at `p` (tile_reduce_at's lifted
// items and thread_reduce, in few registers, for the tile where the input ends): from the
// integer sums where all VEC are in the input (an exact node), else a binary counter over the
// lifted positions with the identity past n, the same tree (the identity joins as nothing).
template <class Op, int VEC, class Loader>
__device__ __forceinline__ typename Op::Acc byte_load_tree(const Op& op, const Loader& ld, u64 p, u64 n) {
    typedef typename Op::Acc Acc;
    static_assert(sizeof(typename Op::In) == 1 && VEC == 16, "a load of 16 bytes");
    typename Op::In raw[VEC];
    ld.fetch(p, raw);
    if (p + VEC <= n) {
        uint4 w[1];
        memcpy(w, raw, 16);
        unsigned sum = 0, sumsq = 0;
        byte_sums(w, sum, sumsq);
        return op.byte_run(sum, sumsq, VEC);
    }
    Acc stack[ilog2(VEC) + 1];
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        counter_push(stack, i, 0, p + i < n ? op.lift(raw[i], p + i) : op.identity(),
                     [&](Acc a, Acc b) { return op.combine(a, b); });
    }
    return stack[ilog2(VEC)];
}
// tile_reduce for a byte operator (the tile where the input ends): the same trees and joins, a
// load's bytes at a time (byte_load_tree), in few registers.
template <class Op, int BLOCK, int K, int VEC, class Loader>
__device__ __forceinline__ typename Op::Acc byte_tile_reduce(const Op& op, const Loader& ld, u64 base, u64 n,
                                                             u64 limit, typename Op::Acc* smem) {
    const u64 at = tile_load_at<K, VEC>(base);
    typename Op::Acc v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = byte_load_tree<Op, VEC>(op, ld, at + k * 32ull * VEC, n);
    return tile_join<Op, BLOCK, K, VEC>(op, v, limit, smem);
}
// An operator may instead check its tame combine's result (`tree_tame(tree, bounded)`: whether
// a tree built with the tame combine has combine's bits, and in `bounded` whether it may join
// others with it), and give a cheaper tame combine of two lifted inputs
// (`combine_lifted_tame`), and say with `TREE_CHECK` whether to (MeanVar of floats; its
// integers are always tame, with no test). lane_run_by_load then tests one tree a load, not
// every input.
template <class Op, class = void> struct checks_tame { static constexpr bool value = false; };
template <class Op> struct checks_tame<Op, typename void_type<decltype(&Op::tree_tame)>::type> {
    static constexpr bool value = Op::TREE_CHECK;
};
template <class F, class O> struct checks_tame<Mapped<F, O>, void> { static constexpr bool value = checks_tame<O>::value; };
template <class O> struct checks_tame<At<O>, void> { static constexpr bool value = checks_tame<O>::value; };
template <class O> struct checks_tame<Tree<O>, void> { static constexpr bool value = checks_tame<O>::value; };
template <class W> struct checks_tame<WrappedFull<W>, void> { static constexpr bool value = checks_tame<W>::value; };
// A load's tree over VEC positions into items[0]: each leaf pair joined by `pair(i)` (the
// joined lifts of positions i and i + 1, by a cheaper form), the rest by c's combine.
template <class C, int VEC, class Pair>
__device__ __forceinline__ void pair_tree(const C& c, typename C::Acc (&items)[VEC], const Pair& pair) {
#pragma unroll
    for (int i = 0; i < VEC; i += 2) items[i] = pair(i);
#pragma unroll
    for (int s = 2; s < VEC; s <<= 1)
#pragma unroll
        for (int i = 0; i < VEC; i += 2 * s) items[i] = c.combine(items[i], items[i + s]);
}
// An operator with a cheaper form of combine for two lifted inputs, `combine_lifted(lift(x),
// lift(y))`, with combine's bits (CompensatedSum: the low words are zero). Lane runs join
// each load's leaves in pairs with it. Only the operator's own type: wrappers (Mapped, At)
// take combine.
template <class Op, class = void> struct has_lifted { static constexpr bool value = false; };
template <class Op> struct has_lifted<Op, typename void_type<decltype(&Op::combine_lifted)>::type> {
    static constexpr bool value = true;
};
template <class Op> struct TameCombine : Op {
    __device__ __forceinline__ typename Op::Acc combine(typename Op::Acc a, typename Op::Acc b) const {
        return Op::combine_tame(a, b);
    }
};
// The tree over a lane's run of K loads at position `at`, a load at a time (`src(k, raw)`
// gives load k's VEC raw inputs): each load's inputs lifted and joined, with the tame combine
// where they pass the operator's test (`tame` on raw inputs, or `tame_acc` on lifted ones), and
// the loads' trees joined as a binary counter, with the tame combine while every load so far
// passed. The tame combine has combine's bits on such nodes, so the result is the canonical
// tree's; it is held in one load's inputs and log2(K) + 1 nodes rather than K loads'
// accumulators.
template <class Op, int K, int VEC, class Source>
__device__ __forceinline__ typename Op::Acc lane_run_loads(const Op& op, const Source& src, u64 at) {
    typedef typename Op::Acc Acc;
    constexpr u64 RUN = (u64)K * VEC;
    constexpr bool RAW = has_tame<Op>::value, LIFTED = has_tame_acc<Op>::value;
    Acc stack[ilog2(K) + 1];
    bool all = true;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        typename Op::In raw[VEC];
        src(k, raw);
        Acc items[VEC];
        TameCombine<Op> tc;
        static_cast<Op&>(tc) = op;
        if constexpr (checks_tame<Op>::value && VEC >= 2) {
            // The load's tree with the tame combine, its leaves' pairs by the cheaper form for
            // lifted inputs, then the result checked: a finite m2 means every difference of
            // the tree was finite, where the tame combine has combine's bits. Otherwise (an
            // infinity, a NaN, a difference past DBL_MAX) the tree again with combine. The
            // loads' trees join with the tame combine while every one so far also had a mean
            // within the tame bound (their differences are then finite).
            pair_tree(tc, items, [&](int i) {
                return tc.combine_lifted_tame(op.lift(raw[i], at + (u64)k * VEC + i),
                                              op.lift(raw[i + 1], at + (u64)k * VEC + i + 1));
            });
            bool bounded = true;
            if (!tc.tree_tame(items[0], bounded)) {
#pragma unroll
                for (int i = 0; i < VEC; ++i) items[i] = op.lift(raw[i], at + (u64)k * VEC + i);
                thread_reduce(op, items, RUN);
                bounded = false;
            }
            all &= bounded;
        } else if constexpr (has_lifted<Op>::value && VEC >= 2) {
            // The load's tree, its leaves' pairs by the cheaper form for two lifts.
            pair_tree(op, items, [&](int i) {
                return op.combine_lifted(op.lift(raw[i], at + (u64)k * VEC + i),
                                         op.lift(raw[i + 1], at + (u64)k * VEC + i + 1));
            });
        } else {
            bool tame = RAW || LIFTED;
#pragma unroll
            for (int i = 0; i < VEC; ++i) {
                items[i] = op.lift(raw[i], at + (u64)k * VEC + i);
                if constexpr (RAW)
                    tame &= op.tame(raw[i]);
                else if constexpr (LIFTED)
                    tame &= op.tame_acc(items[i]);
            }
            all &= tame;
            if constexpr (RAW || LIFTED) {
                if (tame)
                    thread_reduce(tc, items, RUN);
                else
                    thread_reduce(op, items, RUN);
            } else {
                thread_reduce(op, items, RUN);
            }
        }
        // combine, or the tame combine where `ok` (only for an operator with a tame test).
        const auto join = [&](bool ok, Acc a, Acc b) {
            if constexpr (RAW || LIFTED || checks_tame<Op>::value)
                return ok ? tc.combine(a, b) : op.combine(a, b);
            else
                return op.combine(a, b);
        };
        Acc t = items[0];
        int level = 0;
#pragma unroll
        for (; (k >> level) & 1; ++level) t = join(all, stack[level], t);
        stack[level] = t;
    }
    return stack[ilog2(K)];
}
// An operator whose combine has a cheaper form with combine's bits wherever the run's result
// passes a test: `combine_unchecked` (and `combine_lifted_unchecked` for two lifts) and
// `unchecked_ok(Acc)` (CompensatedSum: no finiteness selects; a sum of high words that was
// not finite anywhere in the run leaves the run's high word not finite). Lane runs build
// their tree with it and again with combine where the test fails.
template <class Op, class = void> struct has_unchecked { static constexpr bool value = false; };
template <class Op> struct has_unchecked<Op, typename void_type<decltype(&Op::combine_unchecked)>::type> {
    static constexpr bool value = true;
};
template <class Op> struct UncheckedCombine : Op {
    __device__ __forceinline__ typename Op::Acc combine(typename Op::Acc a, typename Op::Acc b) const {
        return Op::combine_unchecked(a, b);
    }
    __device__ __forceinline__ typename Op::Acc combine_lifted(typename Op::Acc a, typename Op::Acc b) const {
        return Op::combine_lifted_unchecked(a, b);
    }
};
template <class Op, int K, int VEC, class Source>
__device__ __forceinline__ typename Op::Acc lane_run_by_load(const Op& op, const Source& src, u64 at) {
    if constexpr (has_unchecked<Op>::value) {
        UncheckedCombine<Op> uc;
        static_cast<Op&>(uc) = op;
        const typename Op::Acc r = lane_run_loads<UncheckedCombine<Op>, K, VEC>(uc, src, at);
        if (op.unchecked_ok(r)) return r;
    }
    return lane_run_loads<Op, K, VEC>(op, src, at);
}
// Whether a loader computes its inputs rather than reading them (Monte Carlo's samples,
// monte_carlo.cuh): its lane runs take them a load at a time (lane_run_by_load), since no load
// waits on memory, in fewer registers.
template <class L> struct draws_input { static constexpr bool value = false; };
// Whether a kernel reading through loader L takes lane runs for Op. Drawn samples keep the
// side-by-side loads for the f64 sums (ops.cuh's f64_acc), whose lane runs only save shuffles:
// taken a load at a time they drew 11% fewer samples a second for the 4-d Gaussian's mean
// (H200, 2^28 and 2^30), where MeanVar's dear combine still gains.
template <class Op, class L> struct reads_runs {
    static constexpr bool value = lane_runs<Op>::value && !(draws_input<L>::value && f64_acc<typename Op::Acc>::value);
};
// The calling lane's run in the tile at `base`: its first position.
template <int K, int VEC> __device__ __forceinline__ u64 lane_run_at(u64 base) {
    constexpr u64 RUN = (u64)K * VEC;
    return base + (u64)(threadIdx.x >> 5) * 32 * RUN + (u64)(threadIdx.x & 31) * RUN;
}
// The tree over the calling warp's 32 lane runs of a tile (lane_run_by_load, loads from
// `src`), in lane 0.
template <class Op, int K, int VEC, class Source>
__device__ __forceinline__ typename Op::Acc warp_lane_runs(const Op& op, const Source& src, u64 at) {
    return warp_reduce(op, lane_run_by_load<Op, K, VEC>(op, src, at));
}
// The warp's tree over its lane runs of the tile at `base`, read through `ld` (in lane 0).
template <class Op, int K, int VEC, class Loader>
__device__ __forceinline__ typename Op::Acc warp_runs(const Op& op, const Loader& ld, u64 base) {
    const u64 at = lane_run_at<K, VEC>(base);
    if constexpr (draws_input<Loader>::value) {
        const auto src = [&](int k, typename Op::In (&raw)[VEC]) { ld.fetch(at + (u64)k * VEC, raw); };
        return warp_lane_runs<Op, K, VEC>(op, src, at);
    } else {
        // The raw inputs first, all K loads in flight, then joined a load at a time.
        typename Op::In raw[K][VEC];
#pragma unroll
        for (int k = 0; k < K; ++k) ld.fetch(at + (u64)k * VEC, raw[k]);
        const auto src = [&](int k, typename Op::In (&v)[VEC]) {
#pragma unroll
            for (int i = 0; i < VEC; ++i) v[i] = raw[k][i];
        };
        return warp_lane_runs<Op, K, VEC>(op, src, at);
    }
}

// Staged lane runs: the whole tiles of a block's span are copied into shared memory one tile
// ahead (cp.async, a commit group a tile), so that the next tile's bytes travel while this
// one's tree is built. Operators with lane runs are dear a position (MeanVar's f64 combine)
// and their registers hold few warps an SM: loads issued only when a tile starts left DRAM
// idle for most of each tile. Each warp copies its own 32 runs (K vectors each,
// padded by one so that lanes reading their runs hit different banks) with coalesced
// 16-byte copies, and only its lanes read them: a __syncwarp orders the copies and the reads.
// For aligned input (cf::stages_input) and rings of at most RING_BYTES.
constexpr int RING_BYTES = 40960;
template <int BLOCK, int K> struct RunRing {
    static constexpr int WARP = 32 * (K + 1);  // vectors of one warp's stage
    static constexpr int BYTES = 2 * (BLOCK / 32) * WARP * 16;
};
// Starts the copy of the calling warp's 32 runs of the tile at `base` into `stage` (that
// warp's part of the ring); the caller commits the group.
template <int K, int VEC, class In>
__device__ __forceinline__ void stage_tile_runs(const In* x, u64 base, uint4* stage) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint4* src = reinterpret_cast<const uint4*>(x + base + (u64)warp * 32 * K * VEC);
#pragma unroll
    for (int i = 0; i < K; ++i) {
        const int v = i * 32 + lane;  // the warp's vector v: run v / K, load v % K
        cp_async16(stage + (v / K) * (K + 1) + v % K, src + v);
    }
}
// Waits for every commit group but the newest, then lets the warp read what its lanes copied.
__device__ __forceinline__ void cp_async_wait_prior() {
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncwarp();
}
// warp_runs from the lane's run in its warp's stage.
template <class Op, int K, int VEC>
__device__ __forceinline__ typename Op::Acc warp_runs_staged(const Op& op, const uint4* stage, u64 base) {
    const uint4* run = stage + (threadIdx.x & 31) * (K + 1);
    const auto src = [&](int k, typename Op::In (&raw)[VEC]) {
        const uint4 w = run[k];
        memcpy(raw, &w, sizeof(w));
    };
    return warp_lane_runs<Op, K, VEC>(op, src, lane_run_at<K, VEC>(base));
}

// One thread's K loads of a tile folded into its run state `st` (cf::Run), in index order:
// load k reads the VEC positions at `at` + k * WIDTH * VEC (`at`: the thread's first
// position in the tile; WIDTH lanes share a load instruction), all K issued before any is
// used. `whole`: the tile lies wholly before n, so no position needs a guard.
template <class Op, int K, int VEC, int WIDTH, class Loader>
__device__ __forceinline__ void run_loads(const Op& op, const Loader& ld, typename Run<Op>::State& st, u64 at,
                                          bool whole, u64 n) {
    typedef Run<Op> R;
    constexpr u64 SEG = (u64)WIDTH * VEC;
    typename Op::In v[K][VEC];
#pragma unroll
    for (int k = 0; k < K; ++k) ld.fetch(at + k * SEG, v[k]);
    if (whole) {
#pragma unroll
        for (int k = 0; k < K; ++k) R::template add_all<VEC>(op, st, v[k], at + k * SEG);
    } else {
#pragma unroll
        for (int k = 0; k < K; ++k)
#pragma unroll
            for (int i = 0; i < VEC; ++i)
                if (at + k * SEG + i < n) R::add(op, st, v[k][i], at + k * SEG + i);
    }
}

// An order-free operator's run over a block's tiles (Operator::ORDER_FREE: exactly associative
// and commutative, bit for bit): each thread folds everything it loads into its private run
// state (cf::Run in ops.cuh), in index order, and the block reduces the per-thread results
// once at the end. It reads the same positions as the canonical path (the same coalesced
// loads, all K issued before any is used) but keeps the raw inputs, not K * VEC lifted
// accumulators, in registers and spends one cheap step per element and no per-tile warp or
// block stage; the bits are the canonical tree's because every order gives them. Thread 0
// gets the block's result. BLOCK threads may also be one warp of a block whose warps reduce
// different segments (kernels/segment.cuh: BLOCK = 32, no block stage, lane 0 gets the
// result); `warp` is the calling warp's place among the BLOCK threads.
//
// WHOLE: the BLOCK threads are the whole block, and a run with a `block_end` (ExactSum's:
// integer atomics in shared memory) runs its own `whole_run` over the block's tiles instead
// where its `whole_fits` allows and the input is aligned for 16-byte loads (cf::stages_input),
// else joins the threads' states with `block_end`.
template <class R, class = void> struct has_block_end { static constexpr bool value = false; };
template <class R> struct has_block_end<R, typename void_type<decltype(&R::template block_end<32>)>::type> {
    static constexpr bool value = true;
};
template <class Op, int BLOCK, int K, int VEC, bool WHOLE = false, class Loader>
__device__ __forceinline__ typename Op::Acc free_run(const Op& op, const Loader& ld, u64 first, u64 tiles, u64 n,
                                                     typename Op::Acc* smem, int warp) {
    typedef Run<Op> R;
    if constexpr (WHOLE && has_block_end<R>::value && stages_input<Loader>::value) {
        if constexpr (R::template whole_fits<BLOCK, K, VEC>())
            return R::template whole_run<BLOCK, K, VEC>(op, ld.x, first, tiles, n, smem);
    }
    constexpr u64 SEG = 32ull * VEC;
    constexpr u64 TILE = (u64)BLOCK * K * VEC;
    const int lane = threadIdx.x & 31;
    typename R::State st = R::start(op);
    for (u64 j = 0; j < tiles; ++j) {
        const u64 tbase = first + j * TILE;
        if (tbase >= n) break;
        run_loads<Op, K, VEC, 32>(op, ld, st, tbase + (u64)warp * SEG * K + (u64)lane * VEC, tbase + TILE <= n, n);
    }
    if constexpr (WHOLE && has_block_end<R>::value) return R::template block_end<BLOCK>(op, st, smem);
    typename Op::Acc acc = R::end(op, st);
    acc = warp_reduce(op, acc);
    return block_reduce_warps<BLOCK>(op, acc, smem);
}

// The blocks of BLOCK threads a multiprocessor should hold at once, for the kernel's
// __launch_bounds__. An operator's run (cf::Run) may name a register budget `REGS` for its
// threads, as ExactSum's does: its hot loop needs few registers, but code run once a block
// (joining the accumulators, rounding them) holds whole accumulators (368 bytes for f64) and
// would set the register count of the whole kernel. The canonical tree of an operator with
// an accumulator of at most 8 bytes and no lane runs (the sums, products and means) asks for
// a full multiprocessor, 32 registers a thread: left to itself the compiler took 33 to 41 for
// f16 sums, f32 means and f64 sums, which in blocks of 1024 holds one block an SM, half the
// threads (and fits in 32 with no spill). Operators with lane runs (MeanVar, the compensated
// and f64 sums) ask for 640 threads, 102 registers a thread: f16 MeanVar's kernel took 106
// when its tiles' joins moved into groups (reduce_grid), which held four blocks of 128 an SM
// instead of five, and fits in 90 with no spill. MeanVar of bytes takes 96 (byte_group's two
// tiles of loads in flight hold 64); bound to 64 or 40 registers it spills, and read 8% and
// 44% slower at 2^28 (H200). Other operators: 1, no bound.
template <class R, class = void> struct run_regs { static constexpr int value = 0; };
template <class R> struct run_regs<R, typename void_type<decltype(R::REGS)>::type> {
    static constexpr int value = R::REGS;
};
template <class Op, int BLOCK, bool ORDER_FREE> struct min_blocks {
    static constexpr int regs = run_regs<Run<Op>>::value;
    static constexpr bool light = !ORDER_FREE && sizeof(typename Op::Acc) <= 8 && !lane_runs<Op>::value;
    static constexpr int by_regs =
        regs > 0 ? 65536 / (BLOCK * regs) : light ? 2048 / BLOCK : lane_runs<Op>::value && !ORDER_FREE ? 640 / BLOCK : 1;
    static constexpr int value = by_regs < 1 ? 1 : by_regs > 2048 / BLOCK ? 2048 / BLOCK : by_regs;
};

// The device-wide reduction of positions 0..n read through `ld`, by the whole grid: each
// block reduces `tiles_per_block` consecutive tiles of BLOCK*K*VEC positions (a binary
// counter over tiles; for an ORDER_FREE operator, cf::free_run), writes its partial, and the
// block that takes the last ticket reduces the partials (FINAL_K per thread) and writes
// `finish(tree, n)` to out[0]. With one block, no partial and no ticket. Tickets: `ticket` is
// the handle's counter, zero between launches: this launch's blocks take tickets 0 ..
// gridDim.x - 1, and the block that takes the last one puts the counter back to zero (every
// block has taken its ticket by then, and the next launch on the stream starts after this
// one ends). No launch depends on a count kept by the host, so a captured CUDA graph
// replays correctly.
template <class Op, int BLOCK, int K, int VEC, int FINAL_K, bool ORDER_FREE, class Loader>
__device__ __forceinline__ void reduce_grid(const Op& op, const Loader& ld, u64 n, u64 tiles_per_block, u64 limit,
                                            typename Op::Acc* partials, unsigned long long* ticket,
                                            typename Op::Out* out) {
    typedef typename Op::Acc Acc;
    constexpr int WARPS = BLOCK / 32;
    constexpr u64 TILE = (u64)BLOCK * K * VEC;
    __shared__ Acc smem[2][WARPS];
    __shared__ Acc stack[64];
    __shared__ bool last;

    const u64 first = (u64)blockIdx.x * tiles_per_block * TILE;
    Acc total = op.identity();
    if constexpr (ORDER_FREE) {
        total = free_run<Op, BLOCK, K, VEC, true>(op, ld, first, tiles_per_block, n, smem[0], (int)(threadIdx.x >> 5));
    } else {
        typedef RunRing<BLOCK, K> Ring;
        // Byte runs (MeanVar<u8>) read whole groups of tiles with plain loads (byte_group), so
        // they stage nothing.
        constexpr bool BYTES = byte_runs<Op>::value;
        constexpr bool STAGED =
            lane_runs<Op>::value && !BYTES && stages_input<Loader>::value && Ring::BYTES <= RING_BYTES;
        __shared__ uint4 ring[STAGED ? Ring::BYTES / 16 : 1];
        uint4* const mine = STAGED ? ring + (threadIdx.x >> 5) * Ring::WARP : ring;  // this warp's stages
        const auto whole = [&](u64 j) { return j < tiles_per_block && first + (j + 1) * TILE <= n; };
        if constexpr (STAGED) {
            if (whole(0)) stage_tile_runs<K, VEC>(ld.x, first, mine);
            cp_async_commit();
        }
        // The binary counter of tiles: node t closes tile j at `level` (0 for a tile, log2 of
        // the tiles a group for a group ending at tile j).
        const auto push = [&](Acc t, u64 j, int level) {
            counter_push(stack, j, level, t, [&](Acc a, Acc b) { return op.combine(a, b); });
        };
        // Lane-run tiles join in groups of `g` tiles (up to 64 warp nodes): each warp leaves
        // its tree of the tile in `groups`, and after the group's last tile one barrier lets
        // warp 0 join the group's g * WARPS nodes, in order, in one warp tree: the tiles' trees
        // and their pairs' as the counter would have joined them, with the same bits. A
        // barrier and a block join a tile kept every warp in step with the slowest.
        // Runs from bytes (MeanVar<u8>: a few __dp4a a load) keep a join a tile: in groups they
        // ran 7% slower at 2^28 (H200).
        constexpr bool RUNS = STAGED || reads_runs<Op, Loader>::value;
        constexpr bool GROUPED = RUNS && !byte_runs<Op>::value;
        constexpr int NODES = 64;  // a group's most warp nodes (WARPS <= 32)
        constexpr u64 GROUP_MOST = NODES / WARPS;
        __shared__ Acc groups[GROUPED ? 2 : 1][GROUPED ? NODES : 1];
        const u64 g = tiles_per_block < GROUP_MOST ? tiles_per_block : GROUP_MOST;  // a power of two
        const int glog = __ffsll((long long)g) - 1;
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        // Byte groups: `bg` tiles (a power of two) a node, where the whole group is in the input.
        constexpr u64 BG_MOST = byte_group_most<BLOCK, K, VEC>() / TILE;
        static_assert(!BYTES || BG_MOST >= 1, "a byte group holds at least one tile");
        __shared__ uint2 pairs[BYTES ? 2 : 1][BYTES ? WARPS : 1];
        const u64 bg = tiles_per_block < BG_MOST ? tiles_per_block : BG_MOST;
        const int bglog = __ffsll((long long)bg) - 1;
        for (u64 j = 0; j < tiles_per_block; ++j) {
            const u64 base = first + j * TILE;
            if constexpr (BYTES) {
                if ((j & (bg - 1)) == 0 && whole(j + bg - 1)) {
                    const Acc v = byte_group<Op, BLOCK, K, VEC>(op, ld, base, bg, pairs[(j >> bglog) & 1]);
                    if (threadIdx.x == 0) push(v, j + bg - 1, bglog);
                    j += bg - 1;
                } else if (base < n) {
                    // A tile of the group where the input ends.
                    const Acc t = byte_tile_reduce<Op, BLOCK, K, VEC>(op, ld, base, n, limit, smem[j & 1]);
                    if (threadIdx.x == 0) push(t, j, 0);
                } else if (threadIdx.x == 0) {
                    push(op.identity(), j, 0);
                }
                continue;
            }
            Acc t = op.identity();
            bool done = base >= n;
            if constexpr (STAGED) {
                // The stage tile j + 1 takes was read at tile j - 1 by this warp's lanes.
                __syncwarp();
                if (whole(j + 1))
                    stage_tile_runs<K, VEC>(ld.x, base + TILE, mine + ((j + 1) & 1) * (BLOCK / 32) * Ring::WARP);
                cp_async_commit();
            }
            if constexpr (GROUPED) {
                // Tile j's group lies wholly in the input.
                if (whole(j | (g - 1))) {
                    typedef typename full_op<Op>::type Full;
                    Full full;
                    static_cast<Op&>(full) = op;
                    Acc w;
                    if constexpr (STAGED) {
                        cp_async_wait_prior();
                        w = warp_runs_staged<Full, K, VEC>(full, mine + (j & 1) * (BLOCK / 32) * Ring::WARP, base);
                    } else {
                        w = warp_runs<Full, K, VEC>(full, ld, base);
                    }
                    Acc* const slots = groups[(j >> glog) & 1];
                    if (lane == 0) slots[(j & (g - 1)) * WARPS + warp] = w;
                    if ((j & (g - 1)) == g - 1) {
                        __syncthreads();
                        if (warp == 0) {
                            // Up to 32 nodes a lane each; 64 a pair each, joined first.
                            const int nodes = (int)g * WARPS;
                            Acc v;
                            if (NODES > 32 && nodes > 32)
                                v = warp_reduce(full, full.combine(slots[2 * lane], slots[2 * lane + 1]), nodes / 2);
                            else
                                v = warp_reduce(full, lane < nodes ? slots[lane] : op.identity(), nodes);
                            if (lane == 0) push(v, j, glog);
                        }
                    }
                    continue;
                }
            }
            if constexpr (full_op<Op>::HAS || RUNS) {
                // A whole tile of a group that is not whole (the input ends in it), or of byte
                // runs: alone.
                if (!done && base + TILE <= n) {
                    typedef typename full_op<Op>::type Full;
                    Full full;
                    static_cast<Op&>(full) = op;
                    if constexpr (STAGED) {
                        cp_async_wait_prior();
                        t = block_reduce_warps<BLOCK>(
                            full, warp_runs_staged<Full, K, VEC>(full, mine + (j & 1) * (BLOCK / 32) * Ring::WARP, base),
                            smem[j & 1]);
                    } else if constexpr (RUNS) {
                        t = block_reduce_warps<BLOCK>(full, warp_runs<Full, K, VEC>(full, ld, base), smem[j & 1]);
                    } else {
                        t = tile_reduce<Full, BLOCK, K, VEC>(full, ld, base, limit, smem[j & 1]);
                    }
                    done = true;
                }
            }
            if constexpr (!RUNS && stages_input<Loader>::value) {
                if (!done && base + TILE <= n) {
                    t = tile_reduce_whole<Op, BLOCK, K, VEC>(op, ld, base, limit, smem[j & 1]);
                    done = true;
                }
            }
            if (!done) t = tile_reduce<Op, BLOCK, K, VEC>(op, ld, base, limit, smem[j & 1]);
            if (threadIdx.x == 0) push(t, j, 0);
        }
        int top = 0;
        while ((1ull << top) < tiles_per_block) ++top;
        if (threadIdx.x == 0) total = stack[top];
    }

    if (gridDim.x == 1) {
        if (threadIdx.x == 0) store_out(out, op.finish(total, n));
        return;
    }
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = total;
        __threadfence();
        // The count is the word's low 32 bits; the high ones keep the tile-ordered
        // kernels' epoch (cf::take_ticket), which the last block leaves as it found it.
        last = (unsigned)atomicAdd(ticket, 1ull) == gridDim.x - 1;
        if (last) atomicAdd(ticket, 0ull - gridDim.x);
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const u64 m = gridDim.x;
    Acc r;
    if constexpr (ORDER_FREE && has_block_end<Run<Op>>::value) {
        r = Run<Op>::template join_partials<BLOCK>(op, partials, m, smem[0]);
    } else if constexpr (ORDER_FREE) {
        // Any order gives the bits: each thread folds every BLOCK-th partial, one
        // accumulator in registers (FINAL_K of them at once, as below, set the register
        // count of the whole kernel for large accumulators: ExactSum's).
        r = op.identity();
        for (u64 i = threadIdx.x; i < m; i += BLOCK) r = op.combine(r, load_cg(partials + i));
        r = block_reduce<BLOCK>(op, r, smem[0]);
    } else {
        PartialLoader<Op> pl{partials, m};
        r = tile_reduce<Op, BLOCK, FINAL_K, 1>(op, pl, 0, next_pow2(m), smem[0]);
    }
    if (threadIdx.x == 0) store_out(out, op.finish(r, n));
}

}  // namespace cf

#ifdef CF_REDUCE_KERNEL
// Instantiated by the generated source, which defines CF_OP (the operator type), CF_BLOCK,
// CF_K, CF_VEC, CF_VECTOR (0/1), CF_FINAL_K (loads per thread in the final stage),
// CF_ORDER_FREE (0/1: the operator's Operator::ORDER_FREE, which selects cf::free_run) and
// CF_OP_BYTES (the size of the operator's run-time parameters, 0 for none).
typedef CF_OP cf_op_t;
typedef cf_op_t::In cf_in_t;
typedef cf_op_t::Acc cf_acc_t;
typedef cf_op_t::Out cf_out_t;

extern "C" __global__ void __launch_bounds__(CF_BLOCK, cf::min_blocks<cf_op_t, CF_BLOCK, CF_ORDER_FREE != 0>::value)
cf_reduce(const cf_in_t* __restrict__ x, cf::u64 n, cf::u64 tiles_per_block, cf::u64 limit,
          cf_acc_t* partials, unsigned long long* ticket, cf_out_t* out,
          const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    const cf::InputLoader<cf_op_t, CF_VEC, CF_VECTOR != 0> ld{x, n};
    cf::reduce_grid<cf_op_t, CF_BLOCK, CF_K, CF_VEC, CF_FINAL_K, CF_ORDER_FREE != 0>(
        op, ld, n, tiles_per_block, limit, partials, ticket, out);
}
#endif
