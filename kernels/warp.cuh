// cufold: warp-level building blocks.
//
// `cf::shfl_down` / `cf::shfl_xor` / `cf::shfl_idx` move any trivially copyable value (a
// struct accumulator too) between lanes, four bytes at a time. `cf::warp_reduce` combines
// aligned neighbours with offsets 1, 2, 4, 8, 16, so that lane 0 ends with the balanced
// binary tree over the lanes' values in lane order: the canonical tree, correct for
// non-commutative operators. `cf::WarpScan` is the canonical scan of the 32 lanes' values
// (see below).
#pragma once

#include "cufold/thread.cuh"

namespace cf {

// Moves `v` four bytes at a time with `shfl(word)`, a warp shuffle of one 32-bit word.
template <class T, class Shfl> __device__ __forceinline__ T shfl_words(const T& v, Shfl shfl) {
    constexpr int WORDS = (sizeof(T) + 3) / 4;
    int w[WORDS];
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < WORDS; ++i) w[i] = shfl(w[i]);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

template <class T> __device__ __forceinline__ T shfl_down(const T& v, int offset) {
    return shfl_words(v, [offset](int w) { return __shfl_down_sync(0xffffffffu, w, offset); });
}

template <class T> __device__ __forceinline__ T shfl_xor(const T& v, int mask) {
    return shfl_words(v, [mask](int w) { return __shfl_xor_sync(0xffffffffu, w, mask); });
}

template <class T> __device__ __forceinline__ T shfl_idx(const T& v, int src) {
    return shfl_words(v, [src](int w) { return __shfl_sync(0xffffffffu, w, src); });
}

// Lane 0 receives the tree over the first `lanes` lanes (a power of two, at most 32; 1 or
// less: the lane's own value). Every lane of the warp must call it.
template <class Op, class Acc>
__device__ __forceinline__ Acc warp_reduce(const Op& op, Acc v, int lanes = 32) {
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        if (off >= lanes) break;
        Acc other = shfl_down(v, off);
        v = op.combine(v, other);
    }
    return v;
}

// K independent warp trees at once (each v[k] as in the one-value form), level by level,
// so that the K shuffles of a level are in flight together.
template <int K, class Op, class Acc>
__device__ __forceinline__ void warp_reduce(const Op& op, Acc (&v)[K], int lanes = 32) {
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        if (off >= lanes) break;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            Acc other = shfl_down(v[k], off);
            v[k] = op.combine(v[k], other);
        }
    }
}

// The canonical scan of a warp's 32 values (one per lane, in lane order): the exclusive
// prefix of lane L is the left fold, largest block first, of the trees over the aligned
// power-of-two blocks of lanes that make up [0, L), starting from an incoming prefix.
//
//   up(op, v)        butterfly: at step d every lane combines its block's tree with the
//                    neighbouring block's (shuffle with lane ^ 2^d); returns the tree over
//                    all LANES lanes, in every lane. Keeps the left sibling of each step.
//   down(op, p, has) folds the kept left siblings onto the incoming prefix `p`, largest
//                    block first: the lane's exclusive prefix (`has` false only when `p`
//                    was empty and the lane is 0).
//
// LANES (a power of two, at most 32) limits the scan to the first LANES lanes; all 32 lanes
// must call both. Shuffles: log2(LANES) in all. Combines per lane: 2 log2(LANES) at most,
// every lane busy at every step: O(n log n) work in O(log n) steps.
template <class Op, class Acc, int LANES = 32> struct WarpScan {
    static constexpr int LOG = LANES <= 1 ? 0 : LANES <= 2 ? 1 : LANES <= 4 ? 2 : LANES <= 8 ? 3 : LANES <= 16 ? 4 : 5;
    static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "LANES: a power of two, 1..32");
    Acc left[LOG > 0 ? LOG : 1];

    __device__ __forceinline__ Acc up(const Op& op, Acc v) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int d = 0; d < LOG; ++d) {
            Acc other = shfl_xor(v, 1 << d);
            left[d] = other;
            v = ((lane >> d) & 1) ? op.combine(other, v) : op.combine(v, other);
        }
        return v;
    }

    __device__ __forceinline__ Acc down(const Op& op, Acc p, bool& has) const {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int d = LOG - 1; d >= 0; --d)
            if ((lane >> d) & 1) extend(op, p, has, left[d]);
        return p;
    }
};

}  // namespace cf
