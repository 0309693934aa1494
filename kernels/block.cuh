// cufold: block-level building blocks.
//
// `cf::block_reduce<BLOCK>` gives thread 0 the canonical tree over the block's BLOCK
// values in thread order: each warp reduces its 32 lanes (warp.cuh), then warp 0 reduces
// the warp results in warp order (`cf::block_reduce_warps`, the second half alone, for
// callers that reduce their warps' values themselves). BLOCK is a power of two, 32 to 1024.
//
// `cf::BlockScan<ALGO, BLOCK, Op, Acc>` is the canonical scan of the block's BLOCK values
// (one per thread, in thread order) by one of three algorithms that compute the same bits:
// the exclusive prefix of thread i is the left fold, largest block first, of the trees over
// the aligned power-of-two blocks of threads that make up [0, i), onto an incoming prefix.
// It runs in two halves so that a device-wide scan can fetch the incoming prefix between
// them:
//
//   Acc up(op, v, storage)         every thread; returns the tree over all BLOCK values
//                                  (meaningful in thread 0); ends synchronised.
//   Acc down(op, p, has, storage)  every thread, with the same incoming prefix `p` (`has`:
//                                  whether `p` is non-empty); returns the thread's exclusive
//                                  prefix, `has` telling whether it is non-empty.
//
// Algorithms (n = BLOCK):
//   CF_SCAN_WARP (0)      warp scans by shuffles, then one warp scans the warp totals by
//                         shuffles. No shared memory but 2 x WARPS values; log2(32) +
//                         log2(WARPS) shuffle steps; O(n log n) combines.
//   CF_SCAN_BLELLOCH (1)  Blelloch's work-efficient up-sweep and down-sweep over a shared
//                         array: 2 (n - 1) combines in 2 log2(n) steps, active threads
//                         halving (up) and doubling (down) from step to step.
//   CF_SCAN_HILLIS (2)    Hillis and Steele's step-efficient schedule: every thread is
//                         active at each of the log2(n) doubling steps (exchanging with
//                         thread i ^ 2^d through shared memory), keeping the neighbouring
//                         block's tree at each step, then folds those largest first:
//                         O(n log n) combines in log2(n) exchange steps.
#pragma once

#include "cufold/warp.cuh"

#define CF_SCAN_WARP 0
#define CF_SCAN_BLELLOCH 1
#define CF_SCAN_HILLIS 2

namespace cf {

// Thread 0 receives the tree over the values `v` of the first `warps` warps (each warp's
// value in its lane 0, in warp order; `warps` a power of two, the same in every thread, at
// most BLOCK / 32). With `warps` <= 1 every thread gets its own `v` back, with no barrier;
// otherwise there is one __syncthreads(), and `smem` (BLOCK / 32 accumulators) may be
// written again only after the next one (or alternate two buffers). Every thread of the
// block must call it.
template <int BLOCK, class Op, class Acc>
__device__ __forceinline__ Acc block_reduce_warps(const Op& op, Acc v, Acc* smem, int warps = BLOCK / 32) {
    constexpr int WARPS = BLOCK / 32;
    static_assert(BLOCK >= 32 && BLOCK <= 1024 && (BLOCK & (BLOCK - 1)) == 0, "BLOCK: a power of two, 32..1024");
    if (WARPS == 1 || warps <= 1) return v;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
        Acc w = lane < WARPS ? smem[lane] : op.identity();
        v = warp_reduce(op, w, warps < WARPS ? warps : WARPS);
    }
    return v;
}

// `smem` must hold BLOCK / 32 accumulators; every thread of the block must call this.
// Ends with the block synchronised, so `smem` may be reused at once.
template <int BLOCK, class Op, class Acc>
__device__ __forceinline__ Acc block_reduce(const Op& op, Acc v, Acc* smem) {
    v = block_reduce_warps<BLOCK>(op, warp_reduce(op, v), smem);
    if (BLOCK > 32) __syncthreads();
    return v;
}

template <int ALGO, int BLOCK, class Op, class Acc> struct BlockScan;

template <int BLOCK, class Op, class Acc> struct BlockScan<CF_SCAN_WARP, BLOCK, Op, Acc> {
    static_assert(BLOCK >= 32 && BLOCK <= 1024 && (BLOCK & (BLOCK - 1)) == 0, "BLOCK: a power of two, 32..1024");
    static constexpr int WARPS = BLOCK / 32;
    struct Storage { Acc total[WARPS]; Acc prefix[WARPS]; };
    WarpScan<Op, Acc, 32> lanes;
    WarpScan<Op, Acc, WARPS> warps;  // in warp 0

    __device__ __forceinline__ Acc up(const Op& op, Acc v, Storage& st) {
        Acc w = lanes.up(op, v);
        if (WARPS > 1) {
            if ((threadIdx.x & 31) == 0) st.total[threadIdx.x >> 5] = w;
            __syncthreads();
            if (threadIdx.x < 32) w = warps.up(op, st.total[threadIdx.x < WARPS ? threadIdx.x : 0]);
        }
        __syncthreads();
        return w;
    }

    __device__ __forceinline__ Acc down(const Op& op, Acc p, bool& has, Storage& st) const {
        if (WARPS > 1) {
            if (threadIdx.x < 32) {
                bool h = has;
                Acc q = warps.down(op, p, h);
                if (threadIdx.x < WARPS) st.prefix[threadIdx.x] = q;
            }
            __syncthreads();
            const int warp = threadIdx.x >> 5;
            p = st.prefix[warp];
            has = has || warp > 0;
        }
        return lanes.down(op, p, has);
    }
};

template <int BLOCK, class Op, class Acc> struct BlockScan<CF_SCAN_BLELLOCH, BLOCK, Op, Acc> {
    static_assert(BLOCK >= 32 && BLOCK <= 1024 && (BLOCK & (BLOCK - 1)) == 0, "BLOCK: a power of two, 32..1024");
    struct Storage { Acc node[BLOCK]; Acc prefix[BLOCK]; };

    __device__ __forceinline__ Acc up(const Op& op, Acc v, Storage& st) {
        const int t = threadIdx.x;
        st.node[t] = v;
        __syncthreads();
        // node[i] for i = (k+1) 2s - 1 becomes the tree over [k 2s, (k+1) 2s).
#pragma unroll
        for (int s = 1; s < BLOCK; s <<= 1) {
            const int i = (2 * t + 2) * s - 1;
            if (i < BLOCK) st.node[i] = op.combine(st.node[i - s], st.node[i]);
            __syncthreads();
        }
        return st.node[BLOCK - 1];
    }

    __device__ __forceinline__ Acc down(const Op& op, Acc p, bool& has, Storage& st) const {
        const int t = threadIdx.x;
        if (t == 0) st.prefix[0] = p;
        __syncthreads();
        // prefix[i] holds the prefix of the node starting at i; its right child at i + s gets
        // it extended by the left child, the tree over [i, i + s), kept at node[i + s - 1].
#pragma unroll
        for (int s = BLOCK / 2; s >= 1; s >>= 1) {
            const int i = 2 * s * t;
            if (i < BLOCK) {
                Acc q = st.prefix[i];
                bool h = has || i > 0;
                extend(op, q, h, st.node[i + s - 1]);
                st.prefix[i + s] = q;
            }
            __syncthreads();
        }
        Acc r = st.prefix[t];
        has = has || t > 0;
        return r;
    }
};

template <int BLOCK, class Op, class Acc> struct BlockScan<CF_SCAN_HILLIS, BLOCK, Op, Acc> {
    static_assert(BLOCK >= 32 && BLOCK <= 1024 && (BLOCK & (BLOCK - 1)) == 0, "BLOCK: a power of two, 32..1024");
    static constexpr int LOG = ilog2(BLOCK);
    struct Storage { Acc v[2][BLOCK]; };
    Acc left[LOG];

    __device__ __forceinline__ Acc up(const Op& op, Acc v, Storage& st) {
        const int t = threadIdx.x;
#pragma unroll
        for (int d = 0; d < LOG; ++d) {
            // Two buffers: step d + 2 writes this one only after the barrier of step d + 1.
            st.v[d & 1][t] = v;
            __syncthreads();
            Acc other = st.v[d & 1][t ^ (1 << d)];
            left[d] = other;
            v = ((t >> d) & 1) ? op.combine(other, v) : op.combine(v, other);
        }
        __syncthreads();
        return v;
    }

    __device__ __forceinline__ Acc down(const Op& op, Acc p, bool& has, Storage&) const {
        const int t = threadIdx.x;
#pragma unroll
        for (int d = LOG - 1; d >= 0; --d)
            if ((t >> d) & 1) extend(op, p, has, left[d]);
        return p;
    }
};

}  // namespace cf
