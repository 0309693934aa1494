// cufold: thread-level building blocks, over a register array of one thread.
//
// `cf::thread_reduce` is the canonical tree over a thread's N contiguous values (aligned
// neighbours first), cut at a width: the first level of every device-wide reduction.
// `cf::extend` is the one way a prefix grows in every scan: an empty prefix takes the block
// as it is, so no identity ever enters a prefix. `cf::run_up` / `cf::run_down` are the
// canonical scan of a thread's run: the up-sweep of its tree and the down-sweep of
// exclusive prefixes; `cf::run_outputs` turns the latter into a run's scan outputs.
#pragma once

#include "cufold/types.cuh"

namespace cf {

// a[0] becomes the tree over a[0..N) (N a power of two), combining aligned pairs at
// stride s = 1, 2, 4, ... only while 2s <= width: with width < N the tree stops at blocks
// of `width` values (the canonical tree of a short input is log2(next_pow2(n)) levels tall,
// whatever N is). Other elements of `a` are overwritten.
template <int N, class Op, class Acc>
__device__ __forceinline__ void thread_reduce(const Op& op, Acc (&a)[N], unsigned long long width) {
#pragma unroll
    for (int s = 1; s < N; s <<= 1) {
        if ((unsigned long long)(2 * s) > width) break;
#pragma unroll
        for (int i = 0; i < N; i += 2 * s) a[i] = op.combine(a[i], a[i + s]);
    }
}

// `pre` extended by the block `b` to its right. An empty prefix (`has == false`, the prefix
// of position 0) becomes `b` itself, without a call to the operator: no identity ever enters
// a scan (identities can fail bitwise for signed zeros: 0.0 + -0.0 is +0.0).
template <class Op, class Acc>
__device__ __forceinline__ void extend(const Op& op, Acc& pre, bool& has, const Acc& b) {
    pre = has ? op.combine(pre, b) : b;
    has = true;
}

// The up-sweep of a thread's run, in place: afterwards a[i + s - 1] holds the tree over
// [i, i + s) for every aligned block that is a left child (or the whole run: a[N - 1]).
template <int N, class Op, class Acc> __device__ __forceinline__ void run_up(const Op& op, Acc (&a)[N]) {
#pragma unroll
    for (int s = 1; s < N; s <<= 1)
#pragma unroll
        for (int i = 2 * s - 1; i < N; i += 2 * s) a[i] = op.combine(a[i - s], a[i]);
}

// The down-sweep of a run from the prefix `p` (empty if !has): e[j] becomes the exclusive
// prefix of item j (e[0] = p, the only one that may be empty).
template <int N, class Op, class Acc>
__device__ __forceinline__ void run_down(const Op& op, const Acc (&a)[N], Acc p, bool has, Acc (&e)[N]) {
    e[0] = p;
#pragma unroll
    for (int s = N / 2; s >= 1; s >>= 1)
#pragma unroll
        for (int i = 0; i < N; i += 2 * s) {
            Acc q = e[i];
            bool h = has || i > 0;
            extend(op, q, h, a[i + s - 1]);
            e[i + s] = q;
        }
}

// A run's outputs from its up-swept items `a` (run_up), its exclusive prefix `p` (empty
// unless `has`) and `after`, the prefix through its last item (the next run's exclusive
// prefix): exclusive outputs are finish(prefix before j, pos + j), the identity standing for
// an empty one; inclusive ones finish(prefix through j, pos + j + 1).
template <int N, class Op>
__device__ __forceinline__ void run_outputs(const Op& op, const typename Op::Acc (&a)[N], typename Op::Acc p, bool has,
                                            const typename Op::Acc& after, u64 pos, bool exclusive,
                                            typename Op::Out (&o)[N]) {
    typename Op::Acc e[N];
    run_down(op, a, p, has, e);
#pragma unroll
    for (int j = 0; j < N; ++j) {
        if (exclusive)
            o[j] = op.finish(j == 0 && !has ? op.identity() : e[j], pos + j);
        else
            o[j] = op.finish(j + 1 < N ? e[j + 1 < N ? j + 1 : 0] : after, pos + j + 1);
    }
}

}  // namespace cf
