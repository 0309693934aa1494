// cufold: block-level building blocks.
//
// `cf::block_reduce<BLOCK>` gives thread 0 the canonical tree over the block's BLOCK
// values in thread order: each warp reduces its 32 lanes (warp.cuh), then warp 0 reduces
// the warp results in warp order. BLOCK is a power of two, 32 to 1024.
#pragma once

namespace cf {

// `smem` must hold BLOCK / 32 accumulators; every thread of the block must call this.
// Ends with the block synchronised, so `smem` may be reused at once.
template <int BLOCK, class Op, class Acc>
__device__ __forceinline__ Acc block_reduce(const Op& op, Acc v, Acc* smem) {
    constexpr int WARPS = BLOCK / 32;
    static_assert(BLOCK >= 32 && BLOCK <= 1024 && (BLOCK & (BLOCK - 1)) == 0, "BLOCK: a power of two, 32..1024");
    v = warp_reduce(op, v);
    if (WARPS == 1) return v;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
        Acc w = lane < WARPS ? smem[lane] : op.identity();
        v = warp_reduce(op, w, WARPS);
    }
    __syncthreads();
    return v;
}

}  // namespace cf
