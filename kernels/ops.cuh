// cufold: the built-in operators, the CUDA halves of src/ops. Each is a struct with
// In / Acc / Out types and identity, lift, combine and finish; the Rust half of each lives
// in src/ops and must compute the same bits.
#pragma once

#include "cufold/types.cuh"

namespace cf {

// An operator's run-time parameters as a kernel receives them (src/ops/params.rs): the N
// bytes of the operator struct, or none (N = 0) for an operator that is default-constructed.
// One compiled kernel serves every value of the parameters.
template <int N> struct alignas(16) OpBytes { unsigned char b[N > 0 ? N : 1]; };

template <class Op, int N> __device__ __forceinline__ Op make_op(const OpBytes<N>& p) {
    if constexpr (N == 0) {
        return Op{};
    } else {
        static_assert(sizeof(Op) == N,
                      "the operator's CUDA struct does not have the size of its run-time parameters (params())");
        Op op;
        memcpy(&op, p.b, N);
        return op;
    }
}

// NaN-propagating min / max, order-free (src/ops/mod.rs): of two NaNs the one with the larger
// bits wins, a NaN beats a number, numbers compare by value with -0 below +0. The result has
// the same bits for either order of the arguments.
template <class T> __device__ __forceinline__ T nan_pick(T a, T b) {
    const bool an = nan_bits(a), bn = nan_bits(b);
    return an && (!bn || raw_bits(a) >= raw_bits(b)) ? a : b;
}
template <class T> __device__ __forceinline__ T min2(T a, T b) {
    if (nan_bits(a) || nan_bits(b)) return nan_pick(a, b);
    return order_key<T>::of(b) < order_key<T>::of(a) ? b : a;
}
template <class T> __device__ __forceinline__ T max2(T a, T b) {
    if (nan_bits(a) || nan_bits(b)) return nan_pick(a, b);
    return order_key<T>::of(a) < order_key<T>::of(b) ? b : a;
}

template <class T> struct Sum {
    typedef T In; typedef T Acc; typedef T Out;
    __device__ Acc identity() const { return zero<T>(); }
    __device__ Acc lift(In x, u64) const { return x; }
    __device__ Acc combine(Acc a, Acc b) const { return arith<T>::add(a, b); }
    __device__ Out finish(Acc a, u64) const { return a; }
};

template <class T> struct Prod {
    typedef T In; typedef T Acc; typedef T Out;
    __device__ Acc identity() const { return one<T>(); }
    __device__ Acc lift(In x, u64) const { return x; }
    __device__ Acc combine(Acc a, Acc b) const { return arith<T>::mul(a, b); }
    __device__ Out finish(Acc a, u64) const { return a; }
};

template <class T> struct Min {
    typedef T In; typedef T Acc; typedef T Out;
    __device__ Acc identity() const { return limits<T>::highest(); }
    __device__ Acc lift(In x, u64) const { return x; }
    __device__ Acc combine(Acc a, Acc b) const { return min2(a, b); }
    __device__ Out finish(Acc a, u64) const { return a; }
};

template <class T> struct Max {
    typedef T In; typedef T Acc; typedef T Out;
    __device__ Acc identity() const { return limits<T>::lowest(); }
    __device__ Acc lift(In x, u64) const { return x; }
    __device__ Acc combine(Acc a, Acc b) const { return max2(a, b); }
    __device__ Out finish(Acc a, u64) const { return a; }
};

template <class T> struct MinMaxV { T min; T max; };

template <class T> struct MinMax {
    typedef T In; typedef MinMaxV<T> Acc; typedef MinMaxV<T> Out;
    __device__ Acc identity() const { Acc r; r.min = limits<T>::highest(); r.max = limits<T>::lowest(); return r; }
    __device__ Acc lift(In x, u64) const { Acc r; r.min = x; r.max = x; return r; }
    __device__ Acc combine(Acc a, Acc b) const { Acc r; r.min = min2(a.min, b.min); r.max = max2(a.max, b.max); return r; }
    __device__ Out finish(Acc a, u64) const { return a; }
};

template <class T> struct Indexed { T value; u64 index; };

// Argmax / argmin: NaN wins (the lowest-index NaN), ties go to the lowest index.
template <class T, bool MAX> struct ArgExt {
    typedef T In; typedef Indexed<T> Acc; typedef Indexed<T> Out;
    __device__ Acc identity() const {
        Acc r; r.value = MAX ? limits<T>::lowest() : limits<T>::highest(); r.index = ~0ull; return r;
    }
    __device__ Acc lift(In x, u64 i) const { Acc r; r.value = x; r.index = i; return r; }
    __device__ Acc combine(Acc a, Acc b) const {
        bool an = is_nan(a.value), bn = is_nan(b.value);
        if (an || bn) {
            if (an && bn) return b.index < a.index ? b : a;
            return an ? a : b;
        }
        if (MAX ? lt(a.value, b.value) : lt(b.value, a.value)) return b;
        if (MAX ? lt(b.value, a.value) : lt(a.value, b.value)) return a;
        return b.index < a.index ? b : a;
    }
    __device__ Out finish(Acc a, u64) const { return a; }
};
template <class T> struct ArgMax : ArgExt<T, true> {};
template <class T> struct ArgMin : ArgExt<T, false> {};

template <class T> struct WideSum {
    typedef T In; typedef typename wide<T>::type Acc; typedef Acc Out;
    __device__ Acc identity() const { return (Acc)0; }
    __device__ Acc lift(In x, u64) const { return widen(x); }
    __device__ Acc combine(Acc a, Acc b) const { return arith<Acc>::add(a, b); }
    __device__ Out finish(Acc a, u64) const { return a; }
};

// WideSum's monoid, finished by dividing by N.
template <class T> struct Mean : WideSum<T> {
    typedef double Out;
    __device__ Out finish(typename WideSum<T>::Acc a, u64 n) const { return (double)a / (double)n; }
};

struct MeanVarV { double count; double mean; double m2; };

// Chan, Golub and LeVeque's pairwise combination of (count, mean, sum of squared deviations),
// with NumPy's answers on infinities and overflow (src/ops/stats.rs).
template <class T> struct MeanVar {
    typedef T In; typedef MeanVarV Acc; typedef MeanVarV Out;
    __device__ Acc identity() const { Acc r; r.count = 0.0; r.mean = 0.0; r.m2 = 0.0; return r; }
    __device__ Acc lift(In x, u64) const { Acc r; r.count = 1.0; r.mean = (double)up(x); r.m2 = 0.0; return r; }
    // The Rust half's branches, arranged for the device: the common case (both sides
    // non-empty, equal counts, finite difference) is straight-line code with no division,
    // the rest are rare branches and selects, with the same results.
    __device__ Acc combine(Acc a, Acc b) const {
        Acc r;
        r.count = a.count + b.count;
        // b's weight: exactly 0.5 for equal counts, where the division is skipped.
        double w = 0.5;
        if (a.count != b.count) w = b.count / r.count;
        const double d = b.mean - a.mean;
        r.mean = a.mean + d * w;
        r.m2 = a.m2 + b.m2 + d * d * (a.count * w);
        if (!isfinite(d)) {
            // An infinity or NaN, or a difference past DBL_MAX (the Rust half says why).
            r.mean = a.mean * (1.0 - w) + b.mean * w;
            if (!isfinite(a.mean) || !isfinite(b.mean)) r.m2 = __longlong_as_double(0x7ff8000000000000ll);
        }
        if (a.count == 0.0) r = b;
        if (b.count == 0.0) r = a;
        return r;
    }
    __device__ Out finish(Acc a, u64) const { return a; }
};

// Pechprasarn & Khiripet: every pairwise add halves, (a + b) / 2, over the perfect binary
// tree of next_pow2(N) leaves padded with zeros; finish multiplies by next_pow2(N) / N.
template <class T> struct Div2Mean {
    typedef T In; typedef T Acc; typedef T Out;
    __device__ Acc identity() const { return zero<T>(); }
    __device__ Acc lift(In x, u64) const { return x; }
    __device__ Acc combine(Acc a, Acc b) const { return (a + b) * (T)0.5; }
    __device__ Out finish(Acc a, u64 n) const { return (T)((double)a * ((double)next_pow2(n) / (double)n)); }
};

template <class T> struct Affine { T a; T b; };

// Composition of affine maps x -> a*x + b in sequence order: combine(f, g) = g after f.
template <class T> struct Compose {
    typedef Affine<T> In; typedef Affine<T> Acc; typedef Affine<T> Out;
    __device__ Acc identity() const { Acc r; r.a = (T)1; r.b = (T)0; return r; }
    __device__ Acc lift(In x, u64) const { return x; }
    __device__ Acc combine(Acc f, Acc g) const { Acc r; r.a = g.a * f.a; r.b = g.a * f.b + g.b; return r; }
    __device__ Out finish(Acc a, u64) const { return a; }
};

template <class T> struct Mat2 { T m00; T m01; T m10; T m11; };

// The 2x2 matrix product, left to right: combine(A, B) = A * B.
template <class T> struct MatMul {
    typedef Mat2<T> In; typedef Mat2<T> Acc; typedef Mat2<T> Out;
    __device__ Acc identity() const { Acc r; r.m00 = (T)1; r.m01 = (T)0; r.m10 = (T)0; r.m11 = (T)1; return r; }
    __device__ Acc lift(In x, u64) const { return x; }
    __device__ Acc combine(Acc a, Acc b) const {
        Acc r;
        r.m00 = a.m00 * b.m00 + a.m01 * b.m10;
        r.m01 = a.m00 * b.m01 + a.m01 * b.m11;
        r.m10 = a.m10 * b.m00 + a.m11 * b.m10;
        r.m11 = a.m10 * b.m01 + a.m11 * b.m11;
        return r;
    }
    __device__ Out finish(Acc a, u64) const { return a; }
};

// The identity map (ops::Identity).
template <class T> struct Identity {
    typedef T In; typedef T Out;
    __device__ T operator()(T x, u64) const { return x; }
};

// An operator O applied to a map F's images of the inputs (F: In/Out typedefs and
// `Out operator()(In, u64) const`; both default-constructible).
template <class F, class O> struct Mapped {
    typedef typename F::In In; typedef typename O::Acc Acc; typedef typename O::Out Out;
    F f; O o;
    __device__ Acc identity() const { return o.identity(); }
    __device__ Acc lift(In x, u64 i) const { return o.lift(f(x, i), i); }
    __device__ Acc combine(Acc a, Acc b) const { return o.combine(a, b); }
    __device__ Out finish(Acc a, u64 n) const { return o.finish(a, n); }
};

}  // namespace cf
