// cufold: the compensated sum, the CUDA half of src/ops/compensated.rs (CompensatedSum).
//
// The accumulator is a double word (hi, lo) of the element's calculation type (float for
// f32, f16 and bf16; double for f64) whose value is hi + lo, exactly. A lift is (x, 0). A
// combine adds the high words with TwoSum (an error-free sum: s + e is a.hi + b.hi exactly;
// here FastTwoSum on the operands ordered by magnitude), adds the low words and e to it, and
// renormalises with FastTwoSum, which is exact here because s's exponent is never below the
// correction's. The finish rounds hi + lo to the element type (f16 and bf16: once, from
// float).
//
// Only additions, subtractions, comparisons and selects: nothing a compiler could contract
// into a fused multiply-add (kernels are compiled with --fmad=false in any case), so every
// operation rounds as the Rust half's does and the bits agree.
//
// A sum whose high word is not finite (an infinity, a NaN, an overflow) keeps that high
// word and a zero low word, so infinities and NaN propagate as in the plain sum: TwoSum of
// an infinity would otherwise leave NaN in the low word.
#pragma once

#include "cufold/types.cuh"
#include "cufold/ops.cuh"

namespace cf {

// src/ops/compensated.rs's DoubleWord<W>: the high word, then the low word.
template <class W> struct DoubleWord {
    W hi;
    W lo;
};

namespace dw {

// s = RN(a + b) and e = a + b - s, exact when a's exponent is at least b's (Dekker).
template <class W> __device__ __forceinline__ void fast_two_sum(W a, W b, W& s, W& e) {
    s = a + b;
    const W z = s - a;
    e = b - z;
}

// s = RN(a + b) and e = a + b - s exactly: fast_two_sum with the operand of larger magnitude
// first (a comparison and two selects, no branch), as the Rust half's two_sum. Knuth's
// six-operation TwoSum gives the same (s, e) but can overflow inside where s is finite
// (a = -1.5 * 2^104, b = FLT_MAX: s - a rounds to infinity, and the sum came out NaN).
template <class W> __device__ __forceinline__ void two_sum(W a, W b, W& s, W& e) {
    const bool keep = fabs(a) >= fabs(b);
    fast_two_sum(keep ? a : b, keep ? b : a, s, e);
}

// The double-word sum of a and b with no finiteness test; `s`: the high words' rounded sum,
// for the caller's test (add).
template <class W> __device__ __forceinline__ DoubleWord<W> add_unchecked(DoubleWord<W> a, DoubleWord<W> b, W& s) {
    W e;
    two_sum(a.hi, b.hi, s, e);
    const W t = a.lo + b.lo;
    const W c = e + t;
    DoubleWord<W> r;
    fast_two_sum(s, c, r.hi, r.lo);
    return r;
}

// add_unchecked of two lifts, (x, 0) and (y, 0), in fewer operations: the correction is c =
// e + (+0); where s is finite, so is e, |c| is at most half an ulp of s and s + c is x + y
// exactly, so renormalising leaves hi = RN(s + c) (s, or +0 for s = -0) and lo = c - (hi -
// s) = c - (+0) = c (c is never -0).
template <class W>
__device__ __forceinline__ DoubleWord<W> add_lifted_unchecked(DoubleWord<W> a, DoubleWord<W> b, W& s) {
    W e;
    two_sum(a.hi, b.hi, s, e);
    const W c = e + (W)0;
    DoubleWord<W> r;
    r.hi = s + c;
    r.lo = c;
    return r;
}

// r, or where s is not finite the plain sum's infinity or NaN s with a zero low word.
template <class W> __device__ __forceinline__ DoubleWord<W> finite_or_plain(DoubleWord<W> r, W s) {
    const bool ok = isfinite(s);
    r.hi = ok ? r.hi : s;
    r.lo = ok ? r.lo : (W)0;
    return r;
}

template <class W> __device__ __forceinline__ DoubleWord<W> add(DoubleWord<W> a, DoubleWord<W> b) {
    W s;
    const DoubleWord<W> r = add_unchecked(a, b, s);
    return finite_or_plain(r, s);
}

}  // namespace dw

// The compensated (double-word) sum of f32, f64, f16 or bf16 elements.
template <class T> struct CompensatedSum {
    typedef typename sum_calc<T>::type W;
    typedef T In; typedef DoubleWord<W> Acc; typedef T Out;
    static_assert(sizeof(Acc) == 2 * sizeof(W), "DoubleWord<W> is two words, as in Rust");
    static constexpr bool LANE_RUNS = true;  // full tiles read as lane runs (reduce.cuh)
    __device__ Acc identity() const { Acc r; r.hi = (W)0; r.lo = (W)0; return r; }
    __device__ Acc lift(In x, u64) const { Acc r; r.hi = sum_calc<T>::to(x); r.lo = (W)0; return r; }
    __device__ Acc combine(Acc a, Acc b) const { return dw::add(a, b); }
    // combine and combine_lifted without the finiteness selects: their bits wherever s is
    // finite. Where some node's s is not (an infinity or a NaN in the high words, or an
    // overflow), that node's high word s + c is not finite either, nor is any node's above
    // it (an infinity or a NaN in a sum of high words stays one), so a lane run whose
    // result's high word is finite (unchecked_ok) never needed the selects; reduce.cuh
    // redoes the others with combine.
    __device__ Acc combine_unchecked(Acc a, Acc b) const {
        W s;
        return dw::add_unchecked(a, b, s);
    }
    __device__ Acc combine_lifted_unchecked(Acc a, Acc b) const {
        W s;
        return dw::add_lifted_unchecked(a, b, s);
    }
    __device__ bool unchecked_ok(Acc a) const { return isfinite(a.hi); }
    // combine of two lifts with its bits in fewer operations (dw::add_lifted_unchecked);
    // reduce.cuh's lane runs join a load's leaves in pairs with it.
    __device__ Acc combine_lifted(Acc a, Acc b) const {
        W s;
        const Acc r = dw::add_lifted_unchecked(a, b, s);
        return dw::finite_or_plain(r, s);
    }
    __device__ Out finish(Acc a, u64) const {
        return sum_calc<T>::from(isfinite(a.hi) ? a.hi + a.lo : a.hi);
    }
};

}  // namespace cf
