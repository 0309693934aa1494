// cufold: segmented reductions: one canonical tree per segment.
//
// Segment s is positions lo..hi of the input (rows of a matrix: lo = s * stride, hi = lo +
// cols; CSR offsets: lo = offsets[s], hi = offsets[s + 1]). Its result is the canonical tree
// (docs/ARCHITECTURE.md) over its own hi - lo positions, lifted with their place in the
// segment (0 .. hi - lo), as the whole-array reduction of that segment alone would give:
//
//   group    GROUP threads per segment (one warp, or the whole block), segments taken in
//            turn (grid-stride);
//   tile     GROUP * K * VEC positions (a power of two): cf::tile_reduce_at, the same tile
//            tree as the whole-array kernel, cut at next_pow2(hi - lo) for a short segment;
//   tiles    for a longer segment, the tile trees in order on a binary counter in the
//            group's first thread: aligned pairs combine as they complete; tiles past the
//            end complete the tree to next_pow2 tiles as absent blocks (a present left
//            half combines with the identity, as the CPU's tree does).
//
// Empty segments get finish(identity, 0) when the operator has an empty value (`write_empty`)
// and are left untouched otherwise; a segment with hi < lo or hi > n (offsets on the device
// that are not monotone or run past the input) is not read and its output not written.
#pragma once

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
};

// The canonical tree over the n >= 1 positions of `ld`, by a group of GROUP threads (every
// thread of the group calls it; the result is meaningful in the group's first thread).
// `smem`: two buffers of GROUP / 32 accumulators, alternated by the running count `calls`
// (a block-wide group synchronises inside each tile, and a buffer is written again only
// after the next tile's barrier).
template <class Op, int GROUP, int K, int VEC, class Loader>
__device__ __forceinline__ typename Op::Acc segment_tree(const Op& op, const Loader& ld, u64 n,
                                                         typename Op::Acc (*smem)[GROUP / 32 > 0 ? GROUP / 32 : 1],
                                                         int warp, unsigned& calls) {
    typedef typename Op::Acc Acc;
    constexpr u64 TILE = (u64)GROUP * K * VEC;
    const u64 p = next_pow2(n);
    if (p <= TILE) return tile_reduce_at<Op, GROUP, K, VEC>(op, ld, 0, p, smem[calls++ & 1], warp);
    const bool first = (threadIdx.x % GROUP) == 0;
    // stack[l]: the tree over the last completed aligned block of 2^l tiles.
    Acc stack[64];
    const u64 tiles = (n + TILE - 1) / TILE, padded = p / TILE;
    for (u64 i = 0; i < tiles; ++i) {
        Acc v = tile_reduce_at<Op, GROUP, K, VEC>(op, ld, i * TILE, TILE, smem[calls++ & 1], warp);
        if (first) {
            int l = 0;
            for (; (i >> l) & 1; ++l) v = op.combine(stack[l], v);
            stack[l] = v;
        }
    }
    if (!first) return op.identity();
    // Tiles tiles..padded - 1 are absent: the largest aligned absent block at i joins the
    // present block to its left (bit ctz(i) of i is set) as the identity, and the result
    // climbs while blocks complete.
    for (u64 i = tiles; i < padded;) {
        int l = __ffsll((long long)i) - 1;
        const u64 size = 1ull << l;
        Acc v = op.combine(stack[l], op.identity());
        for (++l; (i >> l) & 1; ++l) v = op.combine(stack[l], v);
        stack[l] = v;
        i += size;
    }
    return stack[63 - __clzll((long long)padded)];
}

}  // namespace cf

#ifdef CF_SEGMENT_KERNEL
// Instantiated by the generated source, which defines CF_OP, CF_BLOCK, CF_GROUP (32 or
// CF_BLOCK: threads per segment), CF_K, CF_VEC and CF_OP_BYTES.
typedef CF_OP cf_op_t;
typedef cf_op_t::In cf_in_t;
typedef cf_op_t::Acc cf_acc_t;
typedef cf_op_t::Out cf_out_t;

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_segment_reduce(const cf_in_t* __restrict__ x, cf::u64 n, cf::u64 segments, const cf::u64* __restrict__ offsets,
                  cf::u64 stride, cf::u64 cols, unsigned write_empty, cf_out_t* out,
                  const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    static_assert(CF_GROUP == 32 || CF_GROUP == CF_BLOCK, "a segment takes a warp or the whole block");
    constexpr int GROUPS = CF_BLOCK / CF_GROUP;
    __shared__ cf_acc_t smem[2][CF_GROUP / 32];
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    const int group = (int)(threadIdx.x / CF_GROUP), warp = (int)((threadIdx.x % CF_GROUP) >> 5);
    const bool leader = (threadIdx.x % CF_GROUP) == 0;
    unsigned calls = 0;
    for (cf::u64 s = (cf::u64)blockIdx.x * GROUPS + group; s < segments; s += (cf::u64)gridDim.x * GROUPS) {
        cf::u64 lo, hi;
        if (offsets) {
            lo = offsets[s];
            hi = offsets[s + 1];
        } else {
            lo = s * stride;
            hi = lo + cols;
        }
        if (hi < lo || hi > n) continue;  // invalid offsets: nothing read, nothing written
        if (hi == lo) {
            if (write_empty && leader) out[s] = op.finish(op.identity(), 0);
            continue;
        }
        const cf::SegmentLoader<cf_op_t, CF_VEC> ld{x + lo, hi - lo, (reinterpret_cast<unsigned long long>(x + lo) & 15) == 0};
        const cf_acc_t r = cf::segment_tree<cf_op_t, CF_GROUP, CF_K, CF_VEC>(op, ld, hi - lo, smem, warp, calls);
        if (leader) out[s] = op.finish(r, hi - lo);
    }
}
#endif
