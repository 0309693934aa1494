// cufold: warp-level building blocks.
//
// `cf::shfl_down` moves any trivially copyable value (a struct accumulator too) between
// lanes, four bytes at a time. `cf::warp_reduce` combines aligned neighbours with offsets
// 1, 2, 4, 8, 16, so that lane 0 ends with the balanced binary tree over the 32 lanes' values
// in lane order: the canonical tree, correct for non-commutative operators.
#pragma once

namespace cf {

template <class T> __device__ __forceinline__ T shfl_down(const T& v, int offset) {
    constexpr int WORDS = (sizeof(T) + 3) / 4;
    int w[WORDS];
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < WORDS; ++i) w[i] = __shfl_down_sync(0xffffffffu, w[i], offset);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

// Lane 0 receives the tree over the first `lanes` lanes (a power of two, at most 32).
// Every lane of the warp must call it.
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

}  // namespace cf
