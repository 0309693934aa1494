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

// NaN-propagating min / max, order-free (src/ops/mod.rs): the lesser (greater) under Min's
// (Max's) total order of the bit patterns, cf::ext_key. Equal keys mean equal bits.
template <class T> __device__ __forceinline__ T min2(T a, T b) {
    return ext_key<T>::min_key(b) < ext_key<T>::min_key(a) ? b : a;
}
template <class T> __device__ __forceinline__ T max2(T a, T b) {
    return ext_key<T>::max_key(a) < ext_key<T>::max_key(b) ? b : a;
}

// The arg- operators' rank of a value: Max's (Min's) key with -0 ranked as +0 and every NaN
// given one key above (below) every number, so that ties of any kind go to the lowest index.
template <class T, bool MAX> __device__ __forceinline__ typename ext_key<T>::K arg_key(T x) {
    typedef ext_key<T> E;
    if constexpr (!E::FLOAT) {
        return x;
    } else if constexpr (MAX) {
        const typename E::K k = E::max_key(E::merge_zeros(x)), nan = E::max_key(limits<T>::highest()) + 1;
        return k < nan ? k : nan;
    } else {
        const typename E::K k = E::min_key(E::merge_zeros(x)), nan = E::min_key(limits<T>::lowest()) - 1;
        return k > nan ? k : nan;
    }
}

// Operators with f64 accumulators read full tiles as lane runs (reduce.cuh): one f64 shuffle
// tree a tile instead of one a load (f64 sums 5-8% faster at 2^24 on an H200).
template <class A> struct f64_acc { static constexpr bool value = false; };
template <> struct f64_acc<double> { static constexpr bool value = true; };

// Sum and Prod accumulate in sum_calc<T>::type: float for f16 and bf16 (rounded to the
// element once, at the finish), the element itself otherwise (Element::Calc in Rust).
template <class T> struct Sum {
    typedef T In; typedef typename sum_calc<T>::type Acc; typedef T Out;
    static constexpr bool LANE_RUNS = f64_acc<Acc>::value;
    __device__ Acc identity() const { return zero<Acc>(); }
    __device__ Acc lift(In x, u64) const { return sum_calc<T>::to(x); }
    __device__ Acc combine(Acc a, Acc b) const { return arith<Acc>::add(a, b); }
    __device__ Out finish(Acc a, u64) const { return sum_calc<T>::from(a); }
};

template <class T> struct Prod {
    typedef T In; typedef typename sum_calc<T>::type Acc; typedef T Out;
    static constexpr bool LANE_RUNS = f64_acc<Acc>::value;
    __device__ Acc identity() const { return one<Acc>(); }
    __device__ Acc lift(In x, u64) const { return sum_calc<T>::to(x); }
    __device__ Acc combine(Acc a, Acc b) const { return arith<Acc>::mul(a, b); }
    __device__ Out finish(Acc a, u64) const { return sum_calc<T>::from(a); }
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
        const auto ka = arg_key<T, MAX>(a.value), kb = arg_key<T, MAX>(b.value);
        if (ka != kb) return (MAX ? ka < kb : kb < ka) ? b : a;
        return b.index < a.index ? b : a;
    }
    __device__ Out finish(Acc a, u64) const { return a; }
};
template <class T> struct ArgMax : ArgExt<T, true> {};
template <class T> struct ArgMin : ArgExt<T, false> {};

// The sum in wide<T>: f32 for halves, f64 for f32 and f64, exact 128-bit integers
// (cf::i128 / cf::u128) for integer elements, which no input of fewer than 2^64 elements
// makes wrap.
template <class T> struct WideSum {
    typedef T In; typedef typename wide<T>::type Acc; typedef Acc Out;
    static constexpr bool LANE_RUNS = f64_acc<Acc>::value;
    __device__ Acc identity() const { return zero<Acc>(); }
    __device__ Acc lift(In x, u64) const { return widen(x); }
    __device__ Acc combine(Acc a, Acc b) const { return arith<Acc>::add(a, b); }
    __device__ Out finish(Acc a, u64) const { return a; }
};

// WideSum's monoid, finished by dividing by N (cf::mean_of: for integers the exact sum's
// quotient, rounded once to the nearest double).
template <class T> struct Mean : WideSum<T> {
    typedef double Out;
    __device__ Out finish(typename WideSum<T>::Acc a, u64 n) const { return mean_of(a, n); }
};

struct MeanVarV { double count; double mean; double m2; };

// MeanVar's integer inputs: always tame (below), so neither tested nor checked.
template <class T> struct meanvar_int { static constexpr bool value = false; };
template <> struct meanvar_int<int> { static constexpr bool value = true; };
template <> struct meanvar_int<i64> { static constexpr bool value = true; };
template <> struct meanvar_int<unsigned> { static constexpr bool value = true; };
template <> struct meanvar_int<u64> { static constexpr bool value = true; };
template <> struct meanvar_int<unsigned char> { static constexpr bool value = true; };

// Whether an input keeps MeanVar's combine_full on its finite branch: a magnitude of at most
// 2^1022 as a double, no NaN (src/ops/stats.rs, TAME_MAX), so that every mean of such inputs
// and every difference of two means is finite. Floats of 4 bytes or less are tame when
// finite (their largest is far below 2^1022), integers always.
template <class T> __device__ __forceinline__ bool meanvar_tame(T x) {
    if constexpr (meanvar_int<T>::value) return true;
    else return fabs((double)up(x)) <= 4.49423283715579e307;
}
__device__ __forceinline__ bool meanvar_tame(float x) { return (__float_as_uint(x) & 0x7fffffffu) < 0x7f800000u; }
__device__ __forceinline__ bool meanvar_tame(f16 x) { return (x.bits & 0x7fffu) < 0x7c00u; }
__device__ __forceinline__ bool meanvar_tame(bf16 x) { return (x.bits & 0x7fffu) < 0x7f80u; }

// Chan, Golub and LeVeque's pairwise combination of (count, mean, sum of squared deviations),
// with NumPy's answers on infinities and overflow (src/ops/stats.rs).
template <class T> struct MeanVar {
    typedef T In; typedef MeanVarV Acc; typedef MeanVarV Out;
    static constexpr bool LANE_RUNS = true;  // full tiles read as lane runs (reduce.cuh)
    __device__ Acc identity() const { Acc r; r.count = 0.0; r.mean = 0.0; r.m2 = 0.0; return r; }
    __device__ Acc lift(In x, u64) const { Acc r; r.count = 1.0; r.mean = (double)up(x); r.m2 = 0.0; return r; }
    // The Rust half's branches, arranged for the device: the common case (both sides
    // non-empty, equal counts, finite difference) is straight-line code with no division,
    // the rest are rare branches and selects, with the same results.
    __device__ Acc combine(Acc a, Acc b) const {
        // b's weight: exactly 0.5 for equal counts, where the division is skipped.
        double w = 0.5;
        if (a.count != b.count) w = b.count / (a.count + b.count);
        Acc r = weighted(a, b, w);
        if (a.count == 0.0) r = b;
        if (b.count == 0.0) r = a;
        return r;
    }
    // combine for two non-empty nodes of equal count, as inside a tile that lies wholly in
    // the input (reduce.cuh, cf::full_op): the same bits, without the division and the
    // empty-side checks.
    __device__ Acc combine_full(Acc a, Acc b) const { return weighted(a, b, 0.5); }
    // combine_full of nodes over tame inputs only (meanvar_tame): d is finite, so this is
    // weighted's finite branch alone, the same bits without the test and the selects (the
    // CPU's leaves take the same shortcut, `moments::<true>`). Used by lane runs (reduce.cuh).
    __device__ bool tame(In x) const { return meanvar_tame(x); }
    // The same test on a lifted input, whose mean is the input as a double (for wrappers
    // whose raw inputs are not MeanVar's: a Monte Carlo map's samples; reduce.cuh).
    __device__ bool tame_acc(Acc a) const { return fabs(a.mean) <= 4.49423283715579e307; }
    __device__ Acc combine_tame(Acc a, Acc b) const {
        Acc r;
        r.count = a.count + b.count;
        const double d = b.mean - a.mean;
        r.mean = a.mean + d * 0.5;
        r.m2 = a.m2 + b.m2 + d * d * (a.count * 0.5);
        return r;
    }
    // combine_tame of two lifted inputs (counts 1, m2s +0), with its bits: (+0 + +0) + y is y
    // for y = d d / 2 >= +0, and for inputs of at most 4 bytes (f32, halves, 32-bit integers)
    // d is 0 or at least 2^-149 and at most 2^129 in magnitude, so d / 2 is exact and
    // (d / 2) d is d d rounded once, halved exactly.
    __device__ Acc combine_lifted_tame(Acc a, Acc b) const {
        Acc r;
        r.count = 2.0;
        const double d = b.mean - a.mean;
        const double h = d * 0.5;
        r.mean = a.mean + h;
        r.m2 = sizeof(T) <= 4 ? h * d : d * d * 0.5;
        return r;
    }
    // Integers are tame with no test (meanvar_tame); floats check their trees instead.
    static constexpr bool TREE_CHECK = !meanvar_int<T>::value;
    // Whether a tree built with the tame combine has combine's bits: its m2 gathers every
    // node's d d (non-negative terms, so an infinity or NaN stays), so a finite m2 means
    // every d was finite, where the two agree. `bounded`: its mean is within the tame bound,
    // so that it joins another such tree with a finite d.
    __device__ bool tree_tame(Acc a, bool& bounded) const {
        bounded = tame_acc(a);
        return isfinite(a.m2);
    }
    __device__ __forceinline__ Acc weighted(Acc a, Acc b, double w) const {
        Acc r;
        r.count = a.count + b.count;
        const double d = b.mean - a.mean;
        r.mean = a.mean + d * w;
        r.m2 = a.m2 + b.m2 + d * d * (a.count * w);
        if (!isfinite(d)) {
            // An infinity or NaN, or a difference past DBL_MAX (the Rust half says why).
            r.mean = a.mean * (1.0 - w) + b.mean * w;
            if (!isfinite(a.mean) || !isfinite(b.mean)) r.m2 = __longlong_as_double(0x7ff8000000000000ll);
        }
        return r;
    }
    __device__ Out finish(Acc a, u64) const { return a; }
    // Byte inputs: every node of the tree over n = 2^k <= 2^18 aligned bytes holds exact values
    // (its mean a multiple of 2^-k below 256; its m2 a multiple of 2^-k below 2^(k+14), at most
    // 50 bits; every difference, square and sum of the combine on the way as well), so such a
    // node is the exact (n, sum / n, (n sumsq - sum^2) / n), computed here from the integer sum
    // and sum of squares of its bytes with the same bits (reduce.cuh: cf::byte_group's groups
    // and cf::byte_load_tree's loads; src/ops/stats.rs says why). n sumsq < 2^52, so the
    // numerator converts exactly.
    static constexpr bool BYTE_RUNS = sizeof(T) == 1;
    __device__ Acc byte_run(u64 sum, u64 sumsq, u64 n) const {
        const double inv = 1.0 / (double)n;
        Acc r;
        r.count = (double)n;
        r.mean = (double)sum * inv;
        r.m2 = (double)(n * sumsq - sum * sum) * inv;
        return r;
    }
};

// Pechprasarn & Khiripet: every pairwise add halves, (a + b) / 2, over the perfect binary
// tree of next_pow2(N) leaves padded with zeros; finish multiplies by next_pow2(N) / N.
template <class T> struct Div2Mean {
    typedef T In; typedef T Acc; typedef T Out;
    static constexpr bool LANE_RUNS = f64_acc<Acc>::value;
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
    // O's tame combine, judged on lifted inputs (reduce.cuh's has_tame_acc): templates, so
    // that an O without one compiles.
    template <class Q = O> __device__ bool tame_acc(Acc a) const { return o.tame_acc(a); }
    template <class Q = O> __device__ Acc combine_tame(Acc a, Acc b) const { return o.combine_tame(a, b); }
    template <class Q = O> __device__ Acc combine_lifted_tame(Acc a, Acc b) const { return o.combine_lifted_tame(a, b); }
    template <class Q = O> __device__ bool tree_tame(Acc a, bool& bounded) const { return o.tree_tame(a, bounded); }
};

// A distributed array's chunk (src/dist): O over positions `first` onwards of the global
// array. At lifts at the global index and finishes with the global count (a chunk's scan);
// Tree keeps the accumulator unfinished (a chunk's node of the canonical tree). Members as
// OpParams::pair(O's parameters, first) lays them out.
// Both keep O's tame combine (reduce.cuh's has_tame, forwarded there for them): templates,
// so that an O without one compiles.
template <class O> struct At {
    typedef typename O::In In; typedef typename O::Acc Acc; typedef typename O::Out Out;
    O o; u64 first;
    __device__ Acc identity() const { return o.identity(); }
    __device__ Acc lift(In x, u64 i) const { return o.lift(x, first + i); }
    __device__ Acc combine(Acc a, Acc b) const { return o.combine(a, b); }
    __device__ Out finish(Acc a, u64 n) const { return o.finish(a, first + n); }
    template <class Q = O> __device__ bool tame(In x) const { return o.tame(x); }
    template <class Q = O> __device__ bool tame_acc(Acc a) const { return o.tame_acc(a); }
    template <class Q = O> __device__ Acc combine_tame(Acc a, Acc b) const { return o.combine_tame(a, b); }
    template <class Q = O> __device__ Acc combine_lifted_tame(Acc a, Acc b) const { return o.combine_lifted_tame(a, b); }
    template <class Q = O> __device__ bool tree_tame(Acc a, bool& bounded) const { return o.tree_tame(a, bounded); }
};
template <class O> struct Tree {
    typedef typename O::In In; typedef typename O::Acc Acc; typedef typename O::Acc Out;
    O o; u64 first;
    __device__ Acc identity() const { return o.identity(); }
    __device__ Acc lift(In x, u64 i) const { return o.lift(x, first + i); }
    __device__ Acc combine(Acc a, Acc b) const { return o.combine(a, b); }
    __device__ Out finish(Acc a, u64) const { return a; }
    template <class Q = O> __device__ bool tame(In x) const { return o.tame(x); }
    template <class Q = O> __device__ bool tame_acc(Acc a) const { return o.tame_acc(a); }
    template <class Q = O> __device__ Acc combine_tame(Acc a, Acc b) const { return o.combine_tame(a, b); }
    template <class Q = O> __device__ Acc combine_lifted_tame(Acc a, Acc b) const { return o.combine_lifted_tame(a, b); }
    template <class Q = O> __device__ bool tree_tame(Acc a, bool& bounded) const { return o.tree_tame(a, bounded); }
};

// A thread's private run for an order-free operator (cf::free_run in reduce.cuh): the state
// it keeps while it folds its own elements, in index order, before the block combines the
// threads' results with the operator. The default keeps the accumulator and combines each
// lifted element; Min, Max, MinMax, ArgMin and ArgMax keep keys (cf::ext_key), one integer
// comparison per element instead of a combine that re-derives both operands' keys. Every
// specialisation returns the accumulator the operator's combines would have produced.
//
// add(op, s, x, i) folds element x at index i; add_all(op, s, v, p) folds v[0..VEC) at
// indices p.. (a whole in-range vector load), by default one add at a time.
// add_all as a loop of add: the default, and the run states below that need nothing better.
template <class R> struct EachAdd {
    template <int VEC, class Op, class State, class In>
    static __device__ __forceinline__ void add_all(const Op& op, State& s, const In (&v)[VEC], u64 p) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) R::add(op, s, v[i], p + i);
    }
};
template <class Op> struct Run : EachAdd<Run<Op>> {
    typedef typename Op::Acc State;
    static __device__ __forceinline__ State start(const Op& op) { return op.identity(); }
    static __device__ __forceinline__ void add(const Op& op, State& s, typename Op::In x, u64 i) {
        s = op.combine(s, op.lift(x, i));
    }
    static __device__ __forceinline__ typename Op::Acc end(const Op&, State s) { return s; }
};
// Max (MAX) or Min: the run's extreme key, starting from the identity's.
template <class T, bool MAX> struct ExtRun : EachAdd<ExtRun<T, MAX>> {
    typedef ext_key<T> E;
    typedef typename E::K State;
    template <class Op> static __device__ __forceinline__ State start(const Op&) {
        return MAX ? E::max_key(limits<T>::lowest()) : E::min_key(limits<T>::highest());
    }
    template <class Op> static __device__ __forceinline__ void add(const Op&, State& s, T x, u64) {
        const State k = MAX ? E::max_key(x) : E::min_key(x);
        s = (MAX ? s < k : k < s) ? k : s;
    }
    template <class Op> static __device__ __forceinline__ T end(const Op&, State s) {
        return MAX ? E::from_max_key(s) : E::from_min_key(s);
    }
};
template <class T> struct Run<Max<T>> : ExtRun<T, true> {};
template <class T> struct Run<Min<T>> : ExtRun<T, false> {};
template <class T> struct Run<MinMax<T>> : EachAdd<Run<MinMax<T>>> {
    typedef ext_key<T> E;
    struct State { typename E::K lo, hi; };
    static __device__ __forceinline__ State start(const MinMax<T>&) {
        return State{E::min_key(limits<T>::highest()), E::max_key(limits<T>::lowest())};
    }
    static __device__ __forceinline__ void add(const MinMax<T>&, State& s, T x, u64) {
        const typename E::K lo = E::min_key(x), hi = E::max_key(x);
        s.lo = lo < s.lo ? lo : s.lo;
        s.hi = s.hi < hi ? hi : s.hi;
    }
    static __device__ __forceinline__ MinMaxV<T> end(const MinMax<T>&, State s) {
        MinMaxV<T> r; r.min = E::from_min_key(s.lo); r.max = E::from_max_key(s.hi); return r;
    }
};
// Elements arrive in increasing index order, so a later element replaces the best only when
// its rank is strictly better; the first one always replaces the identity (index ~0). A whole
// vector load is ranked first (one comparison per element) and searched for the position of
// its best only when that beats the run's best, which after the first few loads is rare.
template <class T, bool MAX> struct ArgRun {
    typedef ArgExt<T, MAX> Op;
    typedef typename ext_key<T>::K K;
    struct State { K best; T value; u64 index; };
    static __device__ __forceinline__ bool better(K a, K b) { return MAX ? b < a : a < b; }
    static __device__ __forceinline__ State start(const Op& op) {
        const Indexed<T> id = op.identity();
        return State{arg_key<T, MAX>(id.value), id.value, id.index};
    }
    static __device__ __forceinline__ void add(const Op& op, State& s, T x, u64 i) {
        const T v[1] = {x};
        add_all<1>(op, s, v, i);
    }
    template <int VEC> static __device__ __forceinline__ void add_all(const Op&, State& s, const T (&v)[VEC], u64 p) {
        K r[VEC];
        K top = r[0] = arg_key<T, MAX>(v[0]);
#pragma unroll
        for (int i = 1; i < VEC; ++i) {
            r[i] = arg_key<T, MAX>(v[i]);
            top = better(r[i], top) ? r[i] : top;
        }
        if (s.index == ~0ull || better(top, s.best)) {
            // The first position holding the vector's best.
            T value = v[VEC - 1];
            int at = VEC - 1;
#pragma unroll
            for (int i = VEC - 2; i >= 0; --i)
                if (r[i] == top) { value = v[i]; at = i; }
            s.best = top; s.value = value; s.index = p + at;
        }
    }
    static __device__ __forceinline__ Indexed<T> end(const Op&, State s) {
        Indexed<T> r; r.value = s.value; r.index = s.index; return r;
    }
};
template <class T> struct Run<ArgMax<T>> : ArgRun<T, true> {};
template <class T> struct Run<ArgMin<T>> : ArgRun<T, false> {};

// A short fold's run state: a lane's few positions, below 2^32 (the segments' lanes and
// groups of lanes, cf::fold_run). Run<Op>'s, but the arg-operators keep a 32-bit index
// there (~0u: empty), which takes one register and one compare fewer for each position.
// H100, f32 ArgMax, ms: 2^24 segments of 4 to 32 0.709-0.711 -> 0.701, power-law lengths
// 0.442-0.443 -> 0.416 (62 registers a thread against 64).
template <class Op> struct ShortRun {
    typedef Run<Op> R;
    typedef typename R::State State;
    static __device__ __forceinline__ State start(const Op& op) { return R::start(op); }
    static __device__ __forceinline__ void add(const Op& op, State& s, typename Op::In x, unsigned i) {
        R::add(op, s, x, (u64)i);
    }
    static __device__ __forceinline__ typename Op::Acc end(const Op& op, State s) { return R::end(op, s); }
};
// A short arg-fold's result: its best value at its 32-bit index, widened (~0u, no position
// yet, gives the identity's index).
template <class T> __device__ __forceinline__ Indexed<T> short_arg_result(T value, unsigned index) {
    Indexed<T> r;
    r.value = value;
    r.index = index == ~0u ? ~0ull : (u64)index;
    return r;
}
template <class T, bool MAX> struct ShortArgRun {
    typedef ArgExt<T, MAX> Op;
    typedef typename ext_key<T>::K K;
    struct State { K best; T value; unsigned index; };
    static __device__ __forceinline__ State start(const Op& op) {
        const Indexed<T> id = op.identity();
        return State{arg_key<T, MAX>(id.value), id.value, ~0u};
    }
    static __device__ __forceinline__ void add(const Op&, State& s, T x, unsigned i) {
        const K k = arg_key<T, MAX>(x);
        // Later positions replace the best only when strictly better (ArgRun's rule).
        if (s.index == ~0u || (MAX ? s.best < k : k < s.best)) s = State{k, x, i};
    }
    static __device__ __forceinline__ Indexed<T> end(const Op&, State s) { return short_arg_result(s.value, s.index); }
};
// f32 and f64: arg_key's order by the values' own compares, with no key computed. A value
// ranks strictly above the best (ArgMax; below, ArgMin) when the best is not NaN and the
// value is above it (below) or NaN: every NaN ranks above (below) every number, all NaNs
// tie, and -0 ties +0, as arg_key has it. The best is the value itself, so the state is
// one value and the index. H100, f32 ArgMax, ms: power-law lengths 0.417-0.422 -> 0.358-
// 0.361, 2^24 segments of 4 to 32 0.700-0.702 -> 0.687-0.692 (62 registers either way).
template <class T, bool MAX> struct ShortArgRunFloat {
    typedef ArgExt<T, MAX> Op;
    struct State { T value; unsigned index; };
    static __device__ __forceinline__ State start(const Op& op) { return State{op.identity().value, ~0u}; }
    static __device__ __forceinline__ void add(const Op&, State& s, T x, unsigned i) {
        // !(x <= b) is x > b or unordered; b == b leaves out a NaN best.
        const bool better = s.value == s.value && (MAX ? !(x <= s.value) : !(x >= s.value));
        if (s.index == ~0u || better) s = State{x, i};
    }
    static __device__ __forceinline__ Indexed<T> end(const Op&, State s) { return short_arg_result(s.value, s.index); }
};
template <class T> struct ShortRun<ArgMax<T>> : ShortArgRun<T, true> {};
template <class T> struct ShortRun<ArgMin<T>> : ShortArgRun<T, false> {};
template <> struct ShortRun<ArgMax<float>> : ShortArgRunFloat<float, true> {};
template <> struct ShortRun<ArgMin<float>> : ShortArgRunFloat<float, false> {};
template <> struct ShortRun<ArgMax<double>> : ShortArgRunFloat<double, true> {};
template <> struct ShortRun<ArgMin<double>> : ShortArgRunFloat<double, false> {};
// A chunk's node (Tree, above) runs as its operator does, at the global indices.
template <class O> struct Run<Tree<O>> {
    typedef Run<O> R;
    typedef typename R::State State;
    static __device__ __forceinline__ State start(const Tree<O>& op) { return R::start(op.o); }
    static __device__ __forceinline__ void add(const Tree<O>& op, State& s, typename O::In x, u64 i) {
        R::add(op.o, s, x, op.first + i);
    }
    template <int VEC, class In>
    static __device__ __forceinline__ void add_all(const Tree<O>& op, State& s, const In (&v)[VEC], u64 p) {
        R::template add_all<VEC>(op.o, s, v, op.first + p);
    }
    static __device__ __forceinline__ typename O::Acc end(const Tree<O>& op, State s) { return R::end(op.o, s); }
};

}  // namespace cf

// Exact sums (ExactSum, ExactMean), which need Run above.
#include "cufold/exact.cuh"

// The compensated (double-word) sum (CompensatedSum).
#include "cufold/compensated.cuh"
