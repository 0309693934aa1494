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
    // A NaN as the `half` crate converts it, sign and top payload bits kept, quiet (the
    // conversion alone gives 0x7fff for every NaN).
    const unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) h.bits = (unsigned short)(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu));
    return h;
}
template <> __device__ __forceinline__ bf16 down<bf16>(float v) {
    // Round to nearest even, NaN kept quiet (as the `half` crate does).
    const unsigned u = __float_as_uint(v);
    const unsigned short quiet = (unsigned short)((u >> 16) | 0x0040u);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    bf16 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // The hardware conversion rounds to nearest even, as the integer recipe below does; a
    // select (no branch) puts the NaN in.
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(v));
#else
    r.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
    r.bits = nan ? quiet : r.bits;
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

// The total orders of Max and Min (src/element.rs, float_keys): each maps every bit pattern
// to a distinct unsigned key. `u` is the classic sort key (sign bit set for positives, every
// bit flipped for negatives): numbers in order with -0 below +0, positive NaNs above +inf,
// negative NaNs below -inf. Max's key is u - C and Min's u + C (mod 2^bits, C = 2^mantissa
// - 1), which moves the negative NaNs above everything for Max and the positive NaNs below
// everything for Min: then max and min are one unsigned comparison, order-free, with NaN
// propagating. f16 and bf16 keys live in the top half of 32 bits (the low half is constant
// for a given sign), so their arithmetic needs no masking. Integers are their own keys.
template <class T> struct ext_key {
    typedef T K;
    static constexpr bool FLOAT = false;
    static __device__ __forceinline__ K max_key(T x) { return x; }
    static __device__ __forceinline__ K min_key(T x) { return x; }
    static __device__ __forceinline__ T from_max_key(K k) { return k; }
    static __device__ __forceinline__ T from_min_key(K k) { return k; }
    // The element with the arg- operators' ties merged: -0 as +0 (none for integers).
    static __device__ __forceinline__ T merge_zeros(T x) { return x; }
};
// U: the key type; BITS: the pattern as U, top-aligned; C: 2^mantissa - 1, top-aligned.
template <class T, class U, class B, U C> struct float_ext_key {
    typedef U K;
    static constexpr bool FLOAT = true;
    static constexpr U TOP = (U)1 << (8 * sizeof(U) - 1);
    static __device__ __forceinline__ U u_of(T x) {
        const U b = B::to(x);
        // Arithmetic shift: all ones for negatives.
        const U neg = (U)((typename B::S)b >> (8 * sizeof(U) - 1));
        return b ^ (neg | TOP);
    }
    static __device__ __forceinline__ T of_u(U u) { return B::from((u & TOP) ? (u ^ TOP) : ~u); }
    static __device__ __forceinline__ K max_key(T x) { return u_of(x) - C; }
    static __device__ __forceinline__ K min_key(T x) { return u_of(x) + C; }
    static __device__ __forceinline__ T from_max_key(K k) { return of_u(k + C); }
    static __device__ __forceinline__ T from_min_key(K k) { return of_u(k - C); }
    static __device__ __forceinline__ T merge_zeros(T x) { return B::to(x) == TOP ? B::from(0) : x; }
};
struct f32_bits {
    typedef int S;
    static __device__ __forceinline__ unsigned to(float x) { return __float_as_uint(x); }
    static __device__ __forceinline__ float from(unsigned b) { return __uint_as_float(b); }
};
struct f64_bits {
    typedef i64 S;
    static __device__ __forceinline__ u64 to(double x) { return (u64)__double_as_longlong(x); }
    static __device__ __forceinline__ double from(u64 b) { return __longlong_as_double((i64)b); }
};
template <class H> struct half_bits {
    typedef int S;
    static __device__ __forceinline__ unsigned to(H x) { return (unsigned)x.bits << 16; }
    static __device__ __forceinline__ H from(unsigned b) { H h; h.bits = (unsigned short)(b >> 16); return h; }
};
template <> struct ext_key<float> : float_ext_key<float, unsigned, f32_bits, 0x007fffffu> {};
template <> struct ext_key<double> : float_ext_key<double, u64, f64_bits, 0x000fffffffffffffull> {};
template <> struct ext_key<f16> : float_ext_key<f16, unsigned, half_bits<f16>, 0x03ffu << 16> {};
template <> struct ext_key<bf16> : float_ext_key<bf16, unsigned, half_bits<bf16>, 0x007fu << 16> {};

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

// What Sum and Prod accumulate in (Element::Calc on the Rust side): float for f16 and bf16,
// converted exactly on the way in and rounded to nearest even once on the way out; the
// element itself for every other type.
template <class T> struct sum_calc {
    typedef T type;
    static __device__ __forceinline__ T to(T x) { return x; }
    static __device__ __forceinline__ T from(T a) { return a; }
};
template <class H> struct half_sum_calc {
    typedef float type;
    static __device__ __forceinline__ float to(H x) { return up(x); }
    static __device__ __forceinline__ H from(float a) { return down<H>(a); }
};
template <> struct sum_calc<f16> : half_sum_calc<f16> {};
template <> struct sum_calc<bf16> : half_sum_calc<bf16> {};

// ---- 128-bit integers --------------------------------------------------------------------
//
// WideSum's and Mean's exact accumulators of integer elements (src/element.rs, WideValue):
// two 64-bit words, low first, 16-byte aligned, the layout of Rust's i128 and u128. Not
// __int128, which NVRTC accepts only with --device-int128 (and only on Linux). Two's
// complement, so one addition serves both; a sum of at most 2^64 - 1 elements of 64 bits
// or fewer never leaves 128 bits, so no sum of elements wraps.
struct alignas(16) i128 { u64 lo; u64 hi; };
struct alignas(16) u128 { u64 lo; u64 hi; };

template <class W> __device__ __forceinline__ W add128(W a, W b) {
    W r;
    r.lo = a.lo + b.lo;
    r.hi = a.hi + b.hi + (u64)(r.lo < a.lo);
    return r;
}
template <> struct arith<i128> {
    static __device__ __forceinline__ i128 add(i128 a, i128 b) { return add128(a, b); }
};
template <> struct arith<u128> {
    static __device__ __forceinline__ u128 add(u128 a, u128 b) { return add128(a, b); }
};
template <> __device__ __forceinline__ i128 zero<i128>() { i128 r; r.lo = 0; r.hi = 0; return r; }
template <> __device__ __forceinline__ u128 zero<u128>() { u128 r; r.lo = 0; r.hi = 0; return r; }
__device__ __forceinline__ i128 to_i128(i64 x) {
    i128 r;
    r.lo = (u64)x;
    r.hi = x < 0 ? ~0ull : 0ull;
    return r;
}
__device__ __forceinline__ u128 to_u128(u64 x) { u128 r; r.lo = x; r.hi = 0; return r; }

// The widened accumulator of an element type (what WideSum and Mean add in), and the exact
// conversion into it.
template <class T> struct wide;
template <class T, class W> struct wide_float {
    typedef W type;
    static __device__ __forceinline__ W of(T x) { return (W)up(x); }
};
template <> struct wide<f16> : wide_float<f16, float> {};
template <> struct wide<bf16> : wide_float<bf16, float> {};
template <> struct wide<float> : wide_float<float, double> {};
template <> struct wide<double> : wide_float<double, double> {};
template <class T> struct wide_signed {
    typedef i128 type;
    static __device__ __forceinline__ i128 of(T x) { return to_i128((i64)x); }
};
template <class T> struct wide_unsigned {
    typedef u128 type;
    static __device__ __forceinline__ u128 of(T x) { return to_u128((u64)x); }
};
template <> struct wide<int> : wide_signed<int> {};
template <> struct wide<i64> : wide_signed<i64> {};
template <> struct wide<unsigned> : wide_unsigned<unsigned> {};
template <> struct wide<u64> : wide_unsigned<u64> {};
template <> struct wide<unsigned char> : wide_unsigned<unsigned char> {};

template <class T> __device__ __forceinline__ typename wide<T>::type widen(T x) { return wide<T>::of(x); }

// (u1 * 2^64 + u0) / v and its remainder, for u1 < v (so that the quotient fits in 64 bits):
// Hacker's Delight's divlu (Knuth's algorithm D on 32-bit digits), 64-bit operations only.
__device__ __forceinline__ u64 div128by64(u64 u1, u64 u0, u64 v, u64* rem) {
    const u64 b = 1ull << 32;
    const int s = __clzll((long long)v);
    v <<= s;
    const u64 vn1 = v >> 32, vn0 = v & 0xffffffffull;
    const u64 un32 = (u1 << s) | (s == 0 ? 0ull : u0 >> (64 - s));
    const u64 un10 = u0 << s;
    const u64 un1 = un10 >> 32, un0 = un10 & 0xffffffffull;
    u64 q1 = un32 / vn1, rhat = un32 - q1 * vn1;
    while (q1 >= b || q1 * vn0 > b * rhat + un1) {
        q1 -= 1;
        rhat += vn1;
        if (rhat >= b) break;
    }
    const u64 un21 = un32 * b + un1 - q1 * v;
    u64 q0 = un21 / vn1;
    rhat = un21 - q0 * vn1;
    while (q0 >= b || q0 * vn0 > b * rhat + un0) {
        q0 -= 1;
        rhat += vn1;
        if (rhat >= b) break;
    }
    *rem = (un21 * b + un0 - q0 * v) >> s;
    return q1 * b + q0;
}

// m / n rounded to the nearest double, ties to even, negated if `negative`; NaN for n = 0
// (the bits of Rust's f64::NAN), +0 for m = 0. The steps of src/ops/ratio.rs, round_ratio:
// where both fit in 53 bits, one IEEE division of their exact images; otherwise m shifted
// (dropped bits into a sticky bit) so that q = floor(D / n) lies in [2^55, 2^57), the
// remainder and the dropped bits set q's lowest bit (below the rounding bit), q is
// converted to double (rounded once, to nearest even) and scaled by an exact power of two.
__device__ __forceinline__ double round_ratio(bool negative, u64 hi, u64 lo, u64 n) {
    if (n == 0) return __longlong_as_double(0x7ff8000000000000ll);
    if ((hi | lo) == 0) return 0.0;
    const u64 exact = 1ull << 53;
    double v;
    if (hi == 0 && lo <= exact && n <= exact) {
        v = (double)lo / (double)n;
    } else {
        const int l = hi != 0 ? 128 - __clzll((long long)hi) : 64 - __clzll((long long)lo);
        const int b = 64 - __clzll((long long)n);
        const int t = 56 + b - l;
        u64 dh, dl;
        bool dropped = false;
        if (t >= 64) {
            dh = lo << (t - 64);
            dl = 0;
        } else if (t > 0) {
            dh = (hi << t) | (lo >> (64 - t));
            dl = lo << t;
        } else if (t == 0) {
            dh = hi;
            dl = lo;
        } else {
            const int k = -t;  // 1..71
            if (k < 64) {
                dropped = (lo << (64 - k)) != 0;
                dl = (lo >> k) | (hi << (64 - k));
                dh = hi >> k;
            } else {
                dropped = lo != 0 || (k > 64 && (hi << (128 - k)) != 0);
                dl = hi >> (k - 64);
                dh = 0;
            }
        }
        u64 r;
        u64 q = div128by64(dh, dl, n, &r);
        q |= (u64)(dropped || r != 0);
        v = (double)q * __longlong_as_double((long long)(1023 - t) << 52);
    }
    return negative ? -v : v;
}

// Mean's finish: the sum of n elements divided by n. Floats: the sum as double over n as
// double; 128-bit integers: the correctly rounded quotient (round_ratio).
__device__ __forceinline__ double mean_of(float a, u64 n) { return (double)a / (double)n; }
__device__ __forceinline__ double mean_of(double a, u64 n) { return a / (double)n; }
__device__ __forceinline__ double mean_of(u128 a, u64 n) { return round_ratio(false, a.hi, a.lo, n); }
__device__ __forceinline__ double mean_of(i128 a, u64 n) {
    const bool negative = (i64)a.hi < 0;
    // The magnitude, two's complement negated (i128's minimum, -2^127, gives 2^127).
    u64 lo = a.lo, hi = a.hi;
    if (negative) {
        lo = ~lo + 1;
        hi = ~hi + (u64)(lo == 0);
    }
    return round_ratio(negative, hi, lo, n);
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

// ---- asynchronous copies (sm_80 and later) ---------------------------------------------

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)  // (not in the host check)
// Starts a 16-byte copy from global to shared memory (both 16-byte aligned): it travels while
// the thread goes on, and is visible to the thread after a wait for its commit group.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
// Closes the thread's copies started since the last commit into one group.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of the thread's groups are still travelling (the newest N).
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#endif

}  // namespace cf
