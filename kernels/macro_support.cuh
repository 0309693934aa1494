// cufold: the helpers that operators translated from Rust by #[cufold::op] call.
//
// The translation turns every Rust operator and method into a call of a function here, so
// that C++ overload resolution does the typing the macro cannot see, with Rust's meaning:
// integers wrap (Rust's release-mode arithmetic); f16 and bf16 are computed through float
// and rounded back after each operation, as the `half` crate does; `as` casts from floats
// to integers saturate and send NaN to 0; an unsuffixed literal takes the type of the
// operand it meets, as Rust's inference gives it. Kernels are compiled with --fmad=false,
// so `a * b + c` is two roundings on both sides, and `mul_add` one (::fmaf) on both sides.
//
// This text is embedded by build.rs and placed at the head of each translated operator's
// source (src/macro_support.rs), under an include guard, so that the source stands alone
// (the host C++ test compiles it without NVRTC's header list).
#ifndef CUFOLD_MACRO_SUPPORT
#define CUFOLD_MACRO_SUPPORT

#include "cufold/types.cuh"

namespace cfm {

typedef cf::u64 u64;
typedef cf::i64 i64;

// ---- literals -------------------------------------------------------------------------

// An unsuffixed float literal, rounded from its decimal text both to f32 and to f64: the
// operand it meets picks one, as Rust's inference would. Between two of them, both
// precisions are carried along (comparisons use the f64 value, Rust's default).
struct FLit {
    float f;
    double d;
    __device__ __forceinline__ operator float() const { return f; }
    __device__ __forceinline__ operator double() const { return d; }
};
__device__ __forceinline__ FLit flit(float f, double d) {
    FLit r;
    r.f = f;
    r.d = d;
    return r;
}

// An unsuffixed integer literal (its value wrapped to 64 bits), converted to the integer
// type it meets.
struct ILit {
    i64 v;
    template <class T> __device__ __forceinline__ operator T() const { return (T)v; }
};
__device__ __forceinline__ ILit ilit(u64 v) {
    ILit r;
    r.v = (i64)v;
    return r;
}

__device__ __forceinline__ float f32_bits(unsigned b) { return __uint_as_float(b); }
__device__ __forceinline__ double f64_bits(u64 b) { return __longlong_as_double((long long)b); }
__device__ __forceinline__ cf::f16 f16_bits(unsigned short b) {
    cf::f16 h;
    h.bits = b;
    return h;
}
__device__ __forceinline__ cf::bf16 bf16_bits(unsigned short b) {
    cf::bf16 h;
    h.bits = b;
    return h;
}

// ---- typing ---------------------------------------------------------------------------

// The type two operands share: Rust allows only equal types, or one untyped literal.
template <class A, class B> struct common;
template <class T> struct common<T, T> { typedef T type; };
template <class T> struct common<T, FLit> { typedef T type; };
template <class T> struct common<FLit, T> { typedef T type; };
template <> struct common<FLit, FLit> { typedef FLit type; };
template <class T> struct common<T, ILit> { typedef T type; };
template <class T> struct common<ILit, T> { typedef T type; };
template <> struct common<ILit, ILit> { typedef ILit type; };

// A value (or a literal) as type T.
template <class T, class U> __device__ __forceinline__ T to(U x) { return (T)x; }

// The value a comparison sees: halves through float, literals in their widest type.
template <class T> __device__ __forceinline__ T val(T x) { return x; }
__device__ __forceinline__ float val(cf::f16 x) { return cf::up(x); }
__device__ __forceinline__ float val(cf::bf16 x) { return cf::up(x); }
__device__ __forceinline__ double val(FLit x) { return x.d; }
__device__ __forceinline__ i64 val(ILit x) { return x.v; }

// The unsigned type an integer's arithmetic wraps in, and the unsigned type of its width.
template <class T> struct wrap;
template <class T> struct bits_of;
#define CFM_INT(T, W, U)                                                                        \
    template <> struct wrap<T> { typedef W type; };                                             \
    template <> struct bits_of<T> { typedef U type; };
CFM_INT(signed char, unsigned, unsigned char)
CFM_INT(unsigned char, unsigned, unsigned char)
CFM_INT(short, unsigned, unsigned short)
CFM_INT(unsigned short, unsigned, unsigned short)
CFM_INT(int, unsigned, unsigned)
CFM_INT(unsigned, unsigned, unsigned)
CFM_INT(long long, u64, u64)
CFM_INT(unsigned long long, u64, u64)
#undef CFM_INT

template <class T> struct lim;
#define CFM_LIM(T, LO, HI)                                                                      \
    template <> struct lim<T> {                                                                 \
        static __device__ __forceinline__ T lo() { return LO; }                                 \
        static __device__ __forceinline__ T hi() { return HI; }                                 \
    };
CFM_LIM(signed char, (signed char)(-128), (signed char)127)
CFM_LIM(unsigned char, (unsigned char)0, (unsigned char)255)
CFM_LIM(short, (short)(-32768), (short)32767)
CFM_LIM(unsigned short, (unsigned short)0, (unsigned short)65535)
CFM_LIM(int, (-2147483647 - 1), 2147483647)
CFM_LIM(unsigned, 0u, 0xffffffffu)
CFM_LIM(long long, (-9223372036854775807ll - 1), 9223372036854775807ll)
CFM_LIM(unsigned long long, 0ull, 0xffffffffffffffffull)
CFM_LIM(float, __uint_as_float(0xff800000u), __uint_as_float(0x7f800000u))
CFM_LIM(double, __longlong_as_double((long long)0xfff0000000000000ull),
        __longlong_as_double(0x7ff0000000000000ll))
#undef CFM_LIM

// ---- arithmetic -----------------------------------------------------------------------

template <class T> struct num;
#define CFM_FLOAT_NUM(T, FMOD)                                                                  \
    template <> struct num<T> {                                                                 \
        static __device__ __forceinline__ T add(T a, T b) { return a + b; }                     \
        static __device__ __forceinline__ T sub(T a, T b) { return a - b; }                     \
        static __device__ __forceinline__ T mul(T a, T b) { return a * b; }                     \
        static __device__ __forceinline__ T div(T a, T b) { return a / b; }                     \
        static __device__ __forceinline__ T rem(T a, T b) { return FMOD(a, b); }                \
        static __device__ __forceinline__ T neg(T a) { return -a; }                             \
    };
CFM_FLOAT_NUM(float, ::fmodf)
CFM_FLOAT_NUM(double, ::fmod)
#undef CFM_FLOAT_NUM

template <class H> struct half_num {
    static __device__ __forceinline__ H add(H a, H b) { return cf::down<H>(cf::up(a) + cf::up(b)); }
    static __device__ __forceinline__ H sub(H a, H b) { return cf::down<H>(cf::up(a) - cf::up(b)); }
    static __device__ __forceinline__ H mul(H a, H b) { return cf::down<H>(cf::up(a) * cf::up(b)); }
    static __device__ __forceinline__ H div(H a, H b) { return cf::down<H>(cf::up(a) / cf::up(b)); }
    static __device__ __forceinline__ H rem(H a, H b) { return cf::down<H>(::fmodf(cf::up(a), cf::up(b))); }
    static __device__ __forceinline__ H neg(H a) {
        H r;
        r.bits = (unsigned short)(a.bits ^ 0x8000u);
        return r;
    }
};
template <> struct num<cf::f16> : half_num<cf::f16> {};
template <> struct num<cf::bf16> : half_num<cf::bf16> {};

template <class T> struct int_num {
    typedef typename wrap<T>::type W;
    static __device__ __forceinline__ T add(T a, T b) { return (T)((W)a + (W)b); }
    static __device__ __forceinline__ T sub(T a, T b) { return (T)((W)a - (W)b); }
    static __device__ __forceinline__ T mul(T a, T b) { return (T)((W)a * (W)b); }
    static __device__ __forceinline__ T div(T a, T b) { return (T)(a / b); }
    static __device__ __forceinline__ T rem(T a, T b) { return (T)(a % b); }
    static __device__ __forceinline__ T neg(T a) { return (T)((W)0 - (W)a); }
};
template <> struct num<signed char> : int_num<signed char> {};
template <> struct num<unsigned char> : int_num<unsigned char> {};
template <> struct num<short> : int_num<short> {};
template <> struct num<unsigned short> : int_num<unsigned short> {};
template <> struct num<int> : int_num<int> {};
template <> struct num<unsigned> : int_num<unsigned> {};
template <> struct num<long long> : int_num<long long> {};
template <> struct num<unsigned long long> : int_num<unsigned long long> {};

template <> struct num<FLit> {
    static __device__ __forceinline__ FLit add(FLit a, FLit b) { return cfm::flit(a.f + b.f, a.d + b.d); }
    static __device__ __forceinline__ FLit sub(FLit a, FLit b) { return cfm::flit(a.f - b.f, a.d - b.d); }
    static __device__ __forceinline__ FLit mul(FLit a, FLit b) { return cfm::flit(a.f * b.f, a.d * b.d); }
    static __device__ __forceinline__ FLit div(FLit a, FLit b) { return cfm::flit(a.f / b.f, a.d / b.d); }
    static __device__ __forceinline__ FLit rem(FLit a, FLit b) { return cfm::flit(::fmodf(a.f, b.f), ::fmod(a.d, b.d)); }
    static __device__ __forceinline__ FLit neg(FLit a) { return cfm::flit(-a.f, -a.d); }
};
template <> struct num<ILit> {
    static __device__ __forceinline__ ILit add(ILit a, ILit b) { return cfm::ilit((u64)a.v + (u64)b.v); }
    static __device__ __forceinline__ ILit sub(ILit a, ILit b) { return cfm::ilit((u64)a.v - (u64)b.v); }
    static __device__ __forceinline__ ILit mul(ILit a, ILit b) { return cfm::ilit((u64)a.v * (u64)b.v); }
    static __device__ __forceinline__ ILit div(ILit a, ILit b) { return cfm::ilit((u64)(a.v / b.v)); }
    static __device__ __forceinline__ ILit rem(ILit a, ILit b) { return cfm::ilit((u64)(a.v % b.v)); }
    static __device__ __forceinline__ ILit neg(ILit a) { return cfm::ilit((u64)0 - (u64)a.v); }
};

#define CFM_BINARY(NAME)                                                                        \
    template <class A, class B>                                                                 \
    __device__ __forceinline__ typename common<A, B>::type NAME(A a, B b) {                     \
        typedef typename common<A, B>::type T;                                                  \
        return num<T>::NAME(cfm::to<T>(a), cfm::to<T>(b));                                      \
    }
CFM_BINARY(add)
CFM_BINARY(sub)
CFM_BINARY(mul)
CFM_BINARY(div)
CFM_BINARY(rem)
#undef CFM_BINARY
template <class T> __device__ __forceinline__ T neg(T a) { return num<T>::neg(a); }

// ---- comparisons ----------------------------------------------------------------------

#define CFM_CMP(NAME, OP)                                                                       \
    template <class A, class B> __device__ __forceinline__ bool NAME(A a, B b) {                \
        typedef typename common<A, B>::type T;                                                  \
        return cfm::val(cfm::to<T>(a)) OP cfm::val(cfm::to<T>(b));                              \
    }
CFM_CMP(eq, ==)
CFM_CMP(ne, !=)
CFM_CMP(lt, <)
CFM_CMP(le, <=)
CFM_CMP(gt, >)
CFM_CMP(ge, >=)
#undef CFM_CMP

// ---- bits (integers and bool) -----------------------------------------------------------

#define CFM_BITOP(NAME, OP)                                                                     \
    template <class A, class B>                                                                 \
    __device__ __forceinline__ typename common<A, B>::type NAME(A a, B b) {                     \
        typedef typename common<A, B>::type T;                                                  \
        return (T)(cfm::to<T>(a) OP cfm::to<T>(b));                                             \
    }                                                                                           \
    __device__ __forceinline__ ILit NAME(ILit a, ILit b) { return cfm::ilit((u64)(a.v OP b.v)); }
CFM_BITOP(bit_and, &)
CFM_BITOP(bit_or, |)
CFM_BITOP(bit_xor, ^)
#undef CFM_BITOP
// Rust's `!`: logical on bool, bitwise on integers.
template <class T> __device__ __forceinline__ T not_(T a) { return (T)~a; }
__device__ __forceinline__ bool not_(bool a) { return !a; }
__device__ __forceinline__ ILit not_(ILit a) { return cfm::ilit(~(u64)a.v); }

// Shifts as Rust's release build does them (wrapping_shl / wrapping_shr): the amount is
// taken modulo the width; `>>` is arithmetic on signed types.
template <class T, class S> __device__ __forceinline__ T shl(T a, S s) {
    typedef typename wrap<T>::type W;
    return (T)((W)a << ((unsigned)s & (unsigned)(sizeof(T) * 8 - 1)));
}
template <class T, class S> __device__ __forceinline__ T shr(T a, S s) {
    return (T)(a >> ((unsigned)s & (unsigned)(sizeof(T) * 8 - 1)));
}
template <class S> __device__ __forceinline__ ILit shl(ILit a, S) {
    static_assert(sizeof(S) == 0, "cufold: shifting an untyped integer literal: give it a suffix (1u32 << n)");
    return a;
}
template <class S> __device__ __forceinline__ ILit shr(ILit a, S) {
    static_assert(sizeof(S) == 0, "cufold: shifting an untyped integer literal: give it a suffix (1u32 >> n)");
    return a;
}

// ---- `as` casts -------------------------------------------------------------------------

template <class To> struct cast_to {  // integer targets
    template <class F> static __device__ __forceinline__ To saturate(F x) {
        if (x != x) return (To)0;
        if (x <= (F)lim<To>::lo()) return lim<To>::lo();
        if (x >= (F)lim<To>::hi()) return lim<To>::hi();
        return (To)x;
    }
    static __device__ __forceinline__ To from(float x) { return saturate(x); }
    static __device__ __forceinline__ To from(double x) { return saturate(x); }
    template <class F> static __device__ __forceinline__ To from(F x) { return (To)x; }
};
template <> struct cast_to<float> {
    template <class F> static __device__ __forceinline__ float from(F x) { return (float)x; }
};
template <> struct cast_to<double> {
    template <class F> static __device__ __forceinline__ double from(F x) { return (double)x; }
};
template <class To, class F> __device__ __forceinline__ To cast(F x) { return cast_to<To>::from(cfm::val(x)); }

// ---- f16 / bf16 conversions -----------------------------------------------------------

__device__ __forceinline__ float to_f32(cf::f16 x) { return cf::up(x); }
__device__ __forceinline__ float to_f32(cf::bf16 x) { return cf::up(x); }
__device__ __forceinline__ double to_f64(cf::f16 x) { return (double)cf::up(x); }
__device__ __forceinline__ double to_f64(cf::bf16 x) { return (double)cf::up(x); }
template <class H, class F> __device__ __forceinline__ H from_f32(F x) { return cf::down<H>(cfm::to<float>(x)); }

// ---- float methods (f32 and f64) ------------------------------------------------------

#define CFM_MATH1(NAME, F32, F64)                                                               \
    __device__ __forceinline__ float NAME(float x) { return F32(x); }                           \
    __device__ __forceinline__ double NAME(double x) { return F64(x); }
CFM_MATH1(sqrt, ::sqrtf, ::sqrt)
CFM_MATH1(cbrt, ::cbrtf, ::cbrt)
CFM_MATH1(exp, ::expf, ::exp)
CFM_MATH1(exp2, ::exp2f, ::exp2)
CFM_MATH1(exp_m1, ::expm1f, ::expm1)
CFM_MATH1(ln, ::logf, ::log)
CFM_MATH1(ln_1p, ::log1pf, ::log1p)
CFM_MATH1(log2, ::log2f, ::log2)
CFM_MATH1(log10, ::log10f, ::log10)
CFM_MATH1(sin, ::sinf, ::sin)
CFM_MATH1(cos, ::cosf, ::cos)
CFM_MATH1(tan, ::tanf, ::tan)
CFM_MATH1(asin, ::asinf, ::asin)
CFM_MATH1(acos, ::acosf, ::acos)
CFM_MATH1(atan, ::atanf, ::atan)
CFM_MATH1(sinh, ::sinhf, ::sinh)
CFM_MATH1(cosh, ::coshf, ::cosh)
CFM_MATH1(tanh, ::tanhf, ::tanh)
CFM_MATH1(floor, ::floorf, ::floor)
CFM_MATH1(ceil, ::ceilf, ::ceil)
CFM_MATH1(round, ::roundf, ::round)
CFM_MATH1(round_ties_even, ::rintf, ::rint)
CFM_MATH1(trunc, ::truncf, ::trunc)
#undef CFM_MATH1
#define CFM_MATH2(NAME, F32, F64)                                                               \
    __device__ __forceinline__ float NAME(float x, float y) { return F32(x, y); }               \
    __device__ __forceinline__ double NAME(double x, double y) { return F64(x, y); }
CFM_MATH2(powf, ::powf, ::pow)
CFM_MATH2(atan2, ::atan2f, ::atan2)
CFM_MATH2(hypot, ::hypotf, ::hypot)
CFM_MATH2(copysign, ::copysignf, ::copysign)
#undef CFM_MATH2
__device__ __forceinline__ float mul_add(float x, float a, float b) { return ::fmaf(x, a, b); }
__device__ __forceinline__ double mul_add(double x, double a, double b) { return ::fma(x, a, b); }
__device__ __forceinline__ float log(float x, float base) { return ::logf(x) / ::logf(base); }
__device__ __forceinline__ double log(double x, double base) { return ::log(x) / ::log(base); }
__device__ __forceinline__ float fract(float x) { return x - ::truncf(x); }
__device__ __forceinline__ double fract(double x) { return x - ::trunc(x); }
__device__ __forceinline__ float recip(float x) { return 1.0f / x; }
__device__ __forceinline__ double recip(double x) { return 1.0 / x; }
// Rust's constants: f32 multiplies by 180/pi rounded to f32 (and by pi_f32 / 180 rounded
// to f32); f64 by 180 / pi and pi / 180 computed in f64.
__device__ __forceinline__ float to_degrees(float x) { return x * __uint_as_float(0x42652ee1u); }
__device__ __forceinline__ double to_degrees(double x) { return x * __longlong_as_double(0x404ca5dc1a63c1f8ll); }
__device__ __forceinline__ float to_radians(float x) { return x * __uint_as_float(0x3c8efa35u); }
__device__ __forceinline__ double to_radians(double x) { return x * __longlong_as_double(0x3f91df46a2529d39ll); }
// powi as compiler-rt's __powisf2 / __powidf2 (and LLVM's expansion for constant powers):
// repeated squaring, the odd powers multiplied in from the lowest.
template <class F> __device__ __forceinline__ F powi_(F a, int b) {
    const bool recip = b < 0;
    F r = 1;
    while (1) {
        if (b & 1) r *= a;
        b /= 2;
        if (b == 0) break;
        a *= a;
    }
    return recip ? 1 / r : r;
}
__device__ __forceinline__ float powi(float x, int n) { return cfm::powi_(x, n); }
__device__ __forceinline__ double powi(double x, int n) { return cfm::powi_(x, n); }

__device__ __forceinline__ float abs(float x) { return ::fabsf(x); }
__device__ __forceinline__ double abs(double x) { return ::fabs(x); }
template <class T> __device__ __forceinline__ T abs(T x) { return x < 0 ? num<T>::neg(x) : x; }

__device__ __forceinline__ float signum(float x) { return x != x ? x : ::copysignf(1.0f, x); }
__device__ __forceinline__ double signum(double x) { return x != x ? x : ::copysign(1.0, x); }
__device__ __forceinline__ cf::f16 signum(cf::f16 x) {
    return cf::up(x) != cf::up(x) ? x : cfm::f16_bits((unsigned short)((x.bits & 0x8000u) | 0x3c00u));
}
__device__ __forceinline__ cf::bf16 signum(cf::bf16 x) {
    return cf::up(x) != cf::up(x) ? x : cfm::bf16_bits((unsigned short)((x.bits & 0x8000u) | 0x3f80u));
}
template <class T> __device__ __forceinline__ T signum(T x) { return (T)((T)0 < x) - (T)(x < (T)0); }
__device__ __forceinline__ cf::f16 copysign(cf::f16 x, cf::f16 s) {
    return cfm::f16_bits((unsigned short)((s.bits & 0x8000u) | (x.bits & 0x7fffu)));
}
__device__ __forceinline__ cf::bf16 copysign(cf::bf16 x, cf::bf16 s) {
    return cfm::bf16_bits((unsigned short)((s.bits & 0x8000u) | (x.bits & 0x7fffu)));
}

template <class T> __device__ __forceinline__ bool is_nan(T x) { return cfm::val(x) != cfm::val(x); }
template <class T> __device__ __forceinline__ bool is_infinite(T x) {
    typedef decltype(cfm::val(x)) F;
    return cfm::val(x) == lim<F>::hi() || cfm::val(x) == lim<F>::lo();
}
template <class T> __device__ __forceinline__ bool is_finite(T x) { return !cfm::is_nan(x) && !cfm::is_infinite(x); }
__device__ __forceinline__ bool is_sign_negative(float x) { return (__float_as_uint(x) >> 31) != 0; }
__device__ __forceinline__ bool is_sign_negative(double x) { return __double_as_longlong(x) < 0; }
__device__ __forceinline__ bool is_sign_negative(cf::f16 x) { return (x.bits & 0x8000u) != 0; }
__device__ __forceinline__ bool is_sign_negative(cf::bf16 x) { return (x.bits & 0x8000u) != 0; }
template <class T> __device__ __forceinline__ bool is_sign_positive(T x) { return !cfm::is_sign_negative(x); }
__device__ __forceinline__ unsigned to_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ u64 to_bits(double x) { return (u64)__double_as_longlong(x); }
__device__ __forceinline__ unsigned short to_bits(cf::f16 x) { return x.bits; }
__device__ __forceinline__ unsigned short to_bits(cf::bf16 x) { return x.bits; }

// min / max: f32 and f64 as fminf / fmaxf (a NaN yields the other operand, like Rust's);
// f16 and bf16 as the half crate (NaN yields the other, ties keep the receiver); integers
// and bool plainly.
template <class T> struct ext {
    static __device__ __forceinline__ T min(T a, T b) { return b < a ? b : a; }
    static __device__ __forceinline__ T max(T a, T b) { return b < a ? a : b; }
};
template <> struct ext<float> {
    static __device__ __forceinline__ float min(float a, float b) { return ::fminf(a, b); }
    static __device__ __forceinline__ float max(float a, float b) { return ::fmaxf(a, b); }
};
template <> struct ext<double> {
    static __device__ __forceinline__ double min(double a, double b) { return ::fmin(a, b); }
    static __device__ __forceinline__ double max(double a, double b) { return ::fmax(a, b); }
};
template <class H> struct half_ext {
    static __device__ __forceinline__ H min(H a, H b) { return (cfm::is_nan(a) || cf::up(b) < cf::up(a)) ? b : a; }
    static __device__ __forceinline__ H max(H a, H b) { return (cfm::is_nan(a) || cf::up(b) > cf::up(a)) ? b : a; }
};
template <> struct ext<cf::f16> : half_ext<cf::f16> {};
template <> struct ext<cf::bf16> : half_ext<cf::bf16> {};
template <class A, class B> __device__ __forceinline__ typename common<A, B>::type min(A a, B b) {
    typedef typename common<A, B>::type T;
    return ext<T>::min(cfm::to<T>(a), cfm::to<T>(b));
}
template <class A, class B> __device__ __forceinline__ typename common<A, B>::type max(A a, B b) {
    typedef typename common<A, B>::type T;
    return ext<T>::max(cfm::to<T>(a), cfm::to<T>(b));
}
// clamp as Rust's (and half's): below min gives min, then above max gives max; NaN stays.
template <class A, class B, class C> __device__ __forceinline__ A clamp(A x, B lo, C hi) {
    if (cfm::lt(x, lo)) x = cfm::to<A>(lo);
    if (cfm::gt(x, hi)) x = cfm::to<A>(hi);
    return x;
}

// rem_euclid / div_euclid, as Rust writes them for floats and integers.
template <class T> struct is_float { static const bool value = false; };
template <> struct is_float<float> { static const bool value = true; };
template <> struct is_float<double> { static const bool value = true; };
template <class A, class B> __device__ __forceinline__ typename common<A, B>::type rem_euclid(A a, B b) {
    typedef typename common<A, B>::type T;
    T r = cfm::rem(a, b);
    return cfm::lt(r, cfm::to<T>(0)) ? cfm::add(r, cfm::abs(cfm::to<T>(b))) : r;
}
template <class A, class B> __device__ __forceinline__ typename common<A, B>::type div_euclid(A a, B b) {
    typedef typename common<A, B>::type T;
    T q = cfm::div(a, b);
    if constexpr (is_float<T>::value) q = cfm::trunc(q);
    if (cfm::lt(cfm::rem(a, b), cfm::to<T>(0))) return cfm::gt(cfm::to<T>(b), cfm::to<T>(0)) ? cfm::sub(q, cfm::to<T>(1)) : cfm::add(q, cfm::to<T>(1));
    return q;
}

// ---- integer methods --------------------------------------------------------------------

template <class T> __device__ __forceinline__ u64 ubits(T x) { return (u64)(typename bits_of<T>::type)x; }
template <class T> __device__ __forceinline__ unsigned width(T) { return (unsigned)(sizeof(T) * 8); }
template <class T> __device__ __forceinline__ unsigned count_ones(T x) { return (unsigned)__popcll(cfm::ubits(x)); }
template <class T> __device__ __forceinline__ unsigned count_zeros(T x) { return cfm::width(x) - cfm::count_ones(x); }
template <class T> __device__ __forceinline__ unsigned leading_zeros(T x) {
    return (unsigned)__clzll((long long)cfm::ubits(x)) - (64u - cfm::width(x));
}
template <class T> __device__ __forceinline__ unsigned trailing_zeros(T x) {
    return x == 0 ? cfm::width(x) : (unsigned)(__ffsll((long long)cfm::ubits(x)) - 1);
}
template <class T> __device__ __forceinline__ T rotate_left(T x, unsigned n) {
    typedef typename bits_of<T>::type U;
    unsigned w = cfm::width(x);
    n &= w - 1;
    U u = (U)x;
    return (T)(U)((u << n) | (n == 0 ? (U)0 : (U)(u >> (w - n))));
}
template <class T> __device__ __forceinline__ T rotate_right(T x, unsigned n) {
    return cfm::rotate_left(x, (cfm::width(x) - (n & (cfm::width(x) - 1))) & (cfm::width(x) - 1));
}
template <class T> __device__ __forceinline__ T reverse_bits(T x) {
    return (T)(typename bits_of<T>::type)(__brevll(cfm::ubits(x)) >> (64u - cfm::width(x)));
}
template <class T> __device__ __forceinline__ T swap_bytes(T x) {
    u64 u = cfm::ubits(x), r = 0;
    for (unsigned i = 0; i < sizeof(T); ++i) r |= ((u >> (8 * i)) & 0xffu) << (8 * (sizeof(T) - 1 - i));
    return (T)(typename bits_of<T>::type)r;
}
template <class T> __device__ __forceinline__ bool is_power_of_two(T x) { return x != 0 && (x & (x - 1)) == 0; }
template <class T> __device__ __forceinline__ T pow(T base, unsigned e) {
    T r = (T)1;
    while (e) {
        if (e & 1u) r = num<T>::mul(r, base);
        e >>= 1;
        if (e) base = num<T>::mul(base, base);
    }
    return r;
}
template <class A, class B> __device__ __forceinline__ typename common<A, B>::type wrapping_add(A a, B b) { return cfm::add(a, b); }
template <class A, class B> __device__ __forceinline__ typename common<A, B>::type wrapping_sub(A a, B b) { return cfm::sub(a, b); }
template <class A, class B> __device__ __forceinline__ typename common<A, B>::type wrapping_mul(A a, B b) { return cfm::mul(a, b); }
template <class T> __device__ __forceinline__ T wrapping_neg(T a) { return cfm::neg(a); }
template <class T> __device__ __forceinline__ T wrapping_abs(T a) { return cfm::abs(a); }
template <class T> __device__ __forceinline__ T wrapping_pow(T a, unsigned e) { return cfm::pow(a, e); }
template <class T, class S> __device__ __forceinline__ T wrapping_shl(T a, S s) { return cfm::shl(a, s); }
template <class T, class S> __device__ __forceinline__ T wrapping_shr(T a, S s) { return cfm::shr(a, s); }
template <class A, class B> __device__ __forceinline__ typename common<A, B>::type saturating_add(A a0, B b0) {
    typedef typename common<A, B>::type T;
    T a = cfm::to<T>(a0), b = cfm::to<T>(b0), r = cfm::add(a, b);
    if (lim<T>::lo() == (T)0) return r < a ? lim<T>::hi() : r;            // unsigned
    if (b > 0 && r < a) return lim<T>::hi();
    if (b < 0 && r > a) return lim<T>::lo();
    return r;
}
template <class A, class B> __device__ __forceinline__ typename common<A, B>::type saturating_sub(A a0, B b0) {
    typedef typename common<A, B>::type T;
    T a = cfm::to<T>(a0), b = cfm::to<T>(b0), r = cfm::sub(a, b);
    if (lim<T>::lo() == (T)0) return r > a ? (T)0 : r;                    // unsigned
    if (b > 0 && r > a) return lim<T>::lo();
    if (b < 0 && r < a) return lim<T>::hi();
    return r;
}
template <class A, class B>
__device__ __forceinline__ typename bits_of<typename common<A, B>::type>::type abs_diff(A a0, B b0) {
    typedef typename common<A, B>::type T;
    typedef typename bits_of<T>::type U;
    T a = cfm::to<T>(a0), b = cfm::to<T>(b0);
    return a < b ? (U)((U)b - (U)a) : (U)((U)a - (U)b);
}
template <class T> __device__ __forceinline__ bool is_positive(T x) { return x > 0; }
template <class T> __device__ __forceinline__ bool is_negative(T x) { return x < 0; }

}  // namespace cfm

#endif  // CUFOLD_MACRO_SUPPORT
