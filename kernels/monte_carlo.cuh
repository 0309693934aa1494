// cufold: fused Monte Carlo, a reduction whose input is drawn in the kernel.
//
// Sample i of a run (i = 0 .. n-1) is D draws, uniform in (0, 1) or standard normal, of the
// Philox stream of the run's seed (random.cuh). Its draws are the draws k = i*D .. i*D+D-1
// of the run's flat sequence, and draw k is draw k % P of Philox sample k / P (P = 4 for
// float, 2 for double: the values one Philox block gives), so four float samples of one
// draw, or one sample of four, cost one Philox call. The sample is mapped and lifted by the
// operator (an ops::Mapped: a Transform, then any operator) and reduced along the canonical
// tree by reduce.cuh's grid machinery: no sample is ever stored, and the bits depend on
// (seed, n, map, operator) alone.
#pragma once

#include "cufold/random.cuh"
#include "cufold/reduce.cuh"

#define CF_DRAW_UNIFORM 0
#define CF_DRAW_NORMAL 1

namespace cf {

// A sample type: T (one draw) or cf::Array<T, D>; T is float or double.
template <class S> struct SampleShape {
    typedef S Scalar;
    static constexpr int D = 1;
    static __device__ __forceinline__ void set(S& s, int, S v) { s = v; }
};
template <class T, int N> struct SampleShape<Array<T, N>> {
    typedef T Scalar;
    static constexpr int D = N;
    static __device__ __forceinline__ void set(Array<T, N>& s, int j, T v) { s.v[j] = v; }
};

// The run's first sample: 0, or for a rank's chunk of a distributed run (src/dist, a
// cf::Tree over the run's operator) the chunk's first global sample, so that sample i of the
// chunk is sample first + i of the whole run (first * D a multiple of P, checked by the host).
template <class Op> __device__ __forceinline__ u64 sample_base(const Op&) { return 0; }
template <class O> __device__ __forceinline__ u64 sample_base(const Tree<O>& op) { return op.first; }

// Lifts VEC consecutive samples from position p (p a multiple of VEC, VEC * D a multiple of
// P): the VEC * D draws come from VEC * D / P whole Philox blocks.
template <class Op, int VEC, int DRAW> struct SampleLoader {
    typedef typename Op::In S;
    typedef typename Op::Acc Acc;
    typedef SampleShape<S> Shape;
    typedef typename Shape::Scalar T;
    static constexpr int D = Shape::D;
    static constexpr int P = RandomLayout<T>::PER_BLOCK;
    static_assert((VEC * D) % P == 0, "a group of samples takes whole Philox blocks");
    u64 seed;
    u64 n;
    u64 base;  // sample_base(op): the run's first sample

    // The VEC samples at p, unlifted (lane runs: reduce.cuh's warp_runs; the run's
    // whole tiles only, so all VEC are in range).
    __device__ __forceinline__ void fetch(u64 p, S (&s)[VEC]) const {
        T v[VEC * D];
        const u64 first = (base + p) * (u64)D / P;  // the Philox sample of draw p * D
#pragma unroll
        for (int b = 0; b < VEC * D / P; ++b) {
            const PhiloxBlock blk = philox_block(seed, first + b, 0u);
#pragma unroll
            for (int k = 0; k < P; k += 2) {
                const T u1 = RandomLayout<T>::uniform(blk, k), u2 = RandomLayout<T>::uniform(blk, k + 1);
                if (DRAW == CF_DRAW_NORMAL) {
                    box_muller(u1, u2, v[b * P + k], v[b * P + k + 1]);
                } else {
                    v[b * P + k] = u1;
                    v[b * P + k + 1] = u2;
                }
            }
        }
#pragma unroll
        for (int i = 0; i < VEC; ++i)
#pragma unroll
            for (int j = 0; j < D; ++j) Shape::set(s[i], j, v[i * D + j]);
    }

    __device__ __forceinline__ void load(const Op& op, u64 p, Acc (&items)[VEC]) const {
        S s[VEC];
        fetch(p, s);
        // One range check per group: only the last group of a run can be partial.
        if (p + VEC <= n) {
#pragma unroll
            for (int i = 0; i < VEC; ++i) items[i] = op.lift(s[i], p + i);
        } else {
#pragma unroll
            for (int i = 0; i < VEC; ++i) items[i] = p + i < n ? op.lift(s[i], p + i) : op.identity();
        }
    }
};

template <class Op, int VEC, int DRAW> struct draws_input<SampleLoader<Op, VEC, DRAW>> {
    static constexpr bool value = true;
};

}  // namespace cf

#ifdef CF_MONTE_CARLO_KERNEL
// Instantiated by the generated source, which defines CF_OP (an operator whose In is the
// sample type), CF_BLOCK, CF_K, CF_VEC, CF_FINAL_K, CF_DRAW (CF_DRAW_UNIFORM or
// CF_DRAW_NORMAL), CF_ORDER_FREE and CF_OP_BYTES.
typedef CF_OP cf_op_t;
typedef cf_op_t::Acc cf_acc_t;
typedef cf_op_t::Out cf_out_t;

// Operators with lane runs (MeanVar) ask for 640 threads an SM, as in reduce.cuh
// (cf::min_blocks): the 4-d Gaussian's MeanVar kernel took 135 registers when its tiles'
// joins moved into groups, one block of 256 an SM instead of two.
extern "C" __global__ void __launch_bounds__(CF_BLOCK, cf::lane_runs<cf_op_t>::value ? 640 / CF_BLOCK : 1)
cf_monte_carlo(cf::u64 seed, cf::u64 n, cf::u64 tiles_per_block, cf::u64 limit, cf_acc_t* partials,
               unsigned long long* ticket, cf_out_t* out,
               const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    const cf::SampleLoader<cf_op_t, CF_VEC, CF_DRAW> ld{seed, n, cf::sample_base(op)};
    cf::reduce_grid<cf_op_t, CF_BLOCK, CF_K, CF_VEC, CF_FINAL_K, CF_ORDER_FREE != 0>(
        op, ld, n, tiles_per_block, limit, partials, ticket, out);
}
#endif
