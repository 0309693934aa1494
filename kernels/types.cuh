// cufold: element types and their arithmetic, and the integer helpers, shared by every kernel.
//
// Every operation here matches the Rust side bit for bit: f16 and bf16 values are
// computed through float and rounded back to nearest-even after each operation (the
// double rounding is harmless for + - * / because float carries more than twice their
// precision), signed integers wrap like Rust's wrapping_* methods, and kernels are
// compiled with --fmad=false so that no multiply-add is contracted.
#pragma once

namespace cf {

typedef unsigned long long u64;
typedef long long i64;

struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };

__device__ __forceinline__ float up(f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}
__device__ __forceinline__ float up(bf16 h) { return __uint_as_float(((unsigned)h.bits) << 16); }
__device__ __forceinline__ float up(float x) { return x; }
__device__ __forceinline__ double up(double x) { return x; }
__device__ __forceinline__ int up(int x) { return x; }
__device__ __forceinline__ i64 up(i64 x) { return x; }
__device__ __forceinline__ unsigned up(unsigned x) { return x; }
__device__ __forceinline__ u64 up(u64 x) { return x; }
__device__ __forceinline__ unsigned up(unsigned char x) { return x; }

// The type an element is computed in, and the rounding back to the element.
template <class T> struct calc { typedef T type; };
template <> struct calc<f16> { typedef float type; };
template <> struct calc<bf16> { typedef float type; };
template <> struct calc<unsigned char> { typedef unsigned type; };

template <class T> __device__ __forceinline__ T down(typename calc<T>::type v) { return (T)v; }
template <> __device__ __forceinline__ f16 down<f16>(float v) {
    f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));
    return h;
}
template <> __device__ __forceinline__ bf16 down<bf16>(float v) {
    // Round to nearest even, NaN kept quiet (as the `half` crate does).
    unsigned u = __float_as_uint(v);
    bf16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.bits = (unsigned short)((u >> 16) | 0x0040u);
        return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    r.bits = (unsigned short)(u >> 16);
    return r;
}

// Wrapping integer arithmetic (signed overflow is undefined in C++, so go through unsigned).
template <class T> struct arith {
    static __device__ __forceinline__ T add(T a, T b) { return down<T>(up(a) + up(b)); }
    static __device__ __forceinline__ T mul(T a, T b) { return down<T>(up(a) * up(b)); }
};
template <> struct arith<int> {
    static __device__ __forceinline__ int add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
    static __device__ __forceinline__ int mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
};
template <> struct arith<i64> {
    static __device__ __forceinline__ i64 add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
    static __device__ __forceinline__ i64 mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
};

template <class T> __device__ __forceinline__ bool is_nan(T x) { return up(x) != up(x); }
template <class T> __device__ __forceinline__ bool lt(T a, T b) { return up(a) < up(b); }

// The order-free total order of Min and Max on values that are not NaN (ops.cuh): numbers by
// value and -0 below +0. For floats it is the integer order of a key made from the bits
// (sign and magnitude to two's complement), with no conversion for f16 and bf16; integers
// are their own keys.
template <class T> struct order_key {
    typedef T type;
    static __device__ __forceinline__ T of(T x) { return x; }
};
template <> struct order_key<float> {
    typedef int type;
    static __device__ __forceinline__ int of(float x) {
        const int k = __float_as_int(x);
        return k ^ ((k >> 31) & 0x7fffffff);
    }
};
template <> struct order_key<double> {
    typedef i64 type;
    static __device__ __forceinline__ i64 of(double x) {
        const i64 k = __double_as_longlong(x);
        return k ^ ((k >> 63) & 0x7fffffffffffffffll);
    }
};
template <> struct order_key<f16> {
    typedef int type;
    static __device__ __forceinline__ int of(f16 x) {
        const int k = (short)x.bits;
        return k ^ ((k >> 15) & 0x7fff);
    }
};
template <> struct order_key<bf16> {
    typedef int type;
    static __device__ __forceinline__ int of(bf16 x) {
        const int k = (short)x.bits;
        return k ^ ((k >> 15) & 0x7fff);
    }
};

// NaN tests and bit patterns without conversions: a float is NaN when its magnitude bits are
// above infinity's.
__device__ __forceinline__ bool nan_bits(float x) { return (__float_as_uint(x) & 0x7fffffffu) > 0x7f800000u; }
__device__ __forceinline__ bool nan_bits(double x) {
    return ((u64)__double_as_longlong(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}
__device__ __forceinline__ bool nan_bits(f16 x) { return (x.bits & 0x7fffu) > 0x7c00u; }
__device__ __forceinline__ bool nan_bits(bf16 x) { return (x.bits & 0x7fffu) > 0x7f80u; }
template <class T> __device__ __forceinline__ bool nan_bits(T) { return false; }
__device__ __forceinline__ unsigned raw_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ u64 raw_bits(double x) { return (u64)__double_as_longlong(x); }
__device__ __forceinline__ unsigned raw_bits(f16 x) { return x.bits; }
__device__ __forceinline__ unsigned raw_bits(bf16 x) { return x.bits; }
template <class T> __device__ __forceinline__ T raw_bits(T x) { return x; }

// Extremes: -inf / +inf for floats, MIN / MAX for integers.
template <class T> struct limits;
template <> struct limits<float> {
    static __device__ __forceinline__ float lowest() { return __int_as_float(0xff800000); }
    static __device__ __forceinline__ float highest() { return __int_as_float(0x7f800000); }
};
template <> struct limits<double> {
    static __device__ __forceinline__ double lowest() { return __longlong_as_double(0xfff0000000000000ull); }
    static __device__ __forceinline__ double highest() { return __longlong_as_double(0x7ff0000000000000ull); }
};
template <> struct limits<f16> {
    static __device__ __forceinline__ f16 lowest() { f16 h; h.bits = 0xfc00; return h; }
    static __device__ __forceinline__ f16 highest() { f16 h; h.bits = 0x7c00; return h; }
};
template <> struct limits<bf16> {
    static __device__ __forceinline__ bf16 lowest() { bf16 h; h.bits = 0xff80; return h; }
    static __device__ __forceinline__ bf16 highest() { bf16 h; h.bits = 0x7f80; return h; }
};
template <> struct limits<int> {
    static __device__ __forceinline__ int lowest() { return (int)0x80000000; }
    static __device__ __forceinline__ int highest() { return 0x7fffffff; }
};
template <> struct limits<i64> {
    static __device__ __forceinline__ i64 lowest() { return (i64)0x8000000000000000ull; }
    static __device__ __forceinline__ i64 highest() { return 0x7fffffffffffffffll; }
};
template <> struct limits<unsigned> {
    static __device__ __forceinline__ unsigned lowest() { return 0u; }
    static __device__ __forceinline__ unsigned highest() { return 0xffffffffu; }
};
template <> struct limits<u64> {
    static __device__ __forceinline__ u64 lowest() { return 0ull; }
    static __device__ __forceinline__ u64 highest() { return 0xffffffffffffffffull; }
};
template <> struct limits<unsigned char> {
    static __device__ __forceinline__ unsigned char lowest() { return 0; }
    static __device__ __forceinline__ unsigned char highest() { return 255; }
};

template <class T> __device__ __forceinline__ T zero() { return down<T>((typename calc<T>::type)0); }
template <class T> __device__ __forceinline__ T one() { return down<T>((typename calc<T>::type)1); }

// The widened accumulator of an element type (what WideSum and Mean add in).
template <class T> struct wide;
template <> struct wide<f16> { typedef float type; };
template <> struct wide<bf16> { typedef float type; };
template <> struct wide<float> { typedef double type; };
template <> struct wide<double> { typedef double type; };
template <> struct wide<int> { typedef i64 type; };
template <> struct wide<i64> { typedef i64 type; };
template <> struct wide<unsigned> { typedef u64 type; };
template <> struct wide<u64> { typedef u64 type; };
template <> struct wide<unsigned char> { typedef u64 type; };

template <class T> __device__ __forceinline__ typename wide<T>::type widen(T x) {
    return (typename wide<T>::type)up(x);
}

// A Rust array [T; N]: N values in a row (a Monte Carlo sample of N draws, say).
template <class T, int N> struct Array { T v[N]; };

// ---- integer helpers -------------------------------------------------------------------

// The smallest power of two >= n (1 for n <= 1): the width of the canonical tree over n.
__device__ __forceinline__ u64 next_pow2(u64 n) {
    if (n <= 1) return 1;
    return 1ull << (64 - __clzll(n - 1));
}

// floor(log2(n)) for n >= 1 (0 for n <= 1), usable in constant expressions.
__host__ __device__ constexpr int ilog2(int n) { return n <= 1 ? 0 : 1 + ilog2(n / 2); }

}  // namespace cf
