// cufold: exact sums, the CUDA half of src/ops/exact.rs (ExactSum, ExactMean).
//
// The accumulator is a fixed-point integer wide enough for every sum of fewer than 2^64
// elements of a float type: K signed 64-bit chunks, chunk i worth 2^(LOW + 48 i), LOW being
// the exponent of the smallest subnormal (2^-149 for f32, f16 and bf16; 2^-1074 for f64).
// In canonical form, which every accumulator that leaves lift or combine is in, chunks 0 to
// K-2 hold digits in [0, 2^48) and chunk K-1 holds the rest, signed (two's complement across
// the chunks): one form for each value, so that the bits of a sum do not depend on the order
// or grouping of its adds. Adding an element puts its significand into two or three chunks
// (integer adds); combine adds chunk-wise and propagates the carries once. Flags record NaN,
// +inf, -inf, whether any element was seen and whether any was not -0.
//
// The finish rounds the exact value once, to nearest with ties to even, from the integers
// (no float arithmetic): the significand's bits, a round bit and a sticky bit, subnormals
// kept, overflow to infinity. The mean divides the accumulator, with one more digit below
// its unit, by n (a long division, the remainder a sticky bit) and rounds that once.
#pragma once

#include "cufold/types.cuh"
#include "cufold/ops.cuh"

// Bits of one digit; chunks of the f32 (f16, bf16) and f64 accumulators; the flags.
#define CF_EXACT_DIGIT 48
#define CF_EXACT_CHUNKS_F32 7
#define CF_EXACT_CHUNKS_F64 45
#define CF_EXACT_NAN 1
#define CF_EXACT_POS_INF 2
#define CF_EXACT_NEG_INF 4
#define CF_EXACT_SEEN 8
#define CF_EXACT_NOT_NEG_ZERO 16

namespace cf {

// src/ops/exact.rs's ExactAcc<K>: the chunks, then the flags.
template <int K> struct ExactAcc {
    i64 chunk[K];
    u64 flags;
};

// An element format: stored significand bits, exponent bits, the accumulator's chunk count
// and unit, and the bits as a u64 and back.
template <class T> struct exact_traits;
template <> struct exact_traits<float> {
    static constexpr int MANT = 23, EXP = 8, K = CF_EXACT_CHUNKS_F32, LOW = -149;
    static __device__ __forceinline__ u64 bits(float x) { return (u64)__float_as_uint(x); }
    static __device__ __forceinline__ float of(u64 b) { return __uint_as_float((unsigned)b); }
};
template <> struct exact_traits<double> {
    static constexpr int MANT = 52, EXP = 11, K = CF_EXACT_CHUNKS_F64, LOW = -1074;
    static __device__ __forceinline__ u64 bits(double x) { return (u64)__double_as_longlong(x); }
    static __device__ __forceinline__ double of(u64 b) { return __longlong_as_double((i64)b); }
};
template <> struct exact_traits<f16> {
    static constexpr int MANT = 10, EXP = 5, K = CF_EXACT_CHUNKS_F32, LOW = -149;
    static __device__ __forceinline__ u64 bits(f16 x) { return (u64)x.bits; }
    static __device__ __forceinline__ f16 of(u64 b) { f16 h; h.bits = (unsigned short)b; return h; }
};
template <> struct exact_traits<bf16> {
    static constexpr int MANT = 7, EXP = 8, K = CF_EXACT_CHUNKS_F32, LOW = -149;
    static __device__ __forceinline__ u64 bits(bf16 x) { return (u64)x.bits; }
    static __device__ __forceinline__ bf16 of(u64 b) { bf16 h; h.bits = (unsigned short)b; return h; }
};

namespace exact {

constexpr int DIGIT = CF_EXACT_DIGIT;
constexpr i64 MASK = (1ll << DIGIT) - 1;
constexpr u64 NAN_F = CF_EXACT_NAN, POS_INF = CF_EXACT_POS_INF, NEG_INF = CF_EXACT_NEG_INF;
constexpr u64 SEEN = CF_EXACT_SEEN, NOT_NEG_ZERO = CF_EXACT_NOT_NEG_ZERO;
// Element adds a run may make between two normalisations: each adds less than 2^48 to a
// chunk, so chunks stay below 2^62 in magnitude.
constexpr unsigned RUN_ADDS = 1u << 13;

// The exponent of the smallest subnormal of a format.
__device__ __forceinline__ int sub_exp(int mant, int exp) { return 2 - (1 << (exp - 1)) - mant; }

// Carries propagated upwards: the canonical form of the same value. normalize_at: the
// chunks of c every S words (chunk i at c[S i]).
template <int K, int S = 1> __device__ __forceinline__ void normalize_at(i64* c) {
    i64 carry = 0;
#pragma unroll
    for (int i = 0; i < K - 1; ++i) {
        const i64 t = c[S * i] + carry;
        c[S * i] = t & MASK;
        carry = t >> DIGIT;  // arithmetic: the floor
    }
    c[S * (K - 1)] += carry;
}
template <int K> __device__ __forceinline__ void normalize(i64 (&c)[K]) { normalize_at<K>(c); }

// mant * 2^pos (pos counted from the unit), negated if neg, added into c (not normalised):
// the low 48 - s bits of mant into chunk pos / 48, the next 48 into the one above, and, for a
// 53-bit significand shifted by more than 43, the rest into the third.
template <int K> __device__ __forceinline__ void deposit(i64 (&c)[K], bool neg, u64 mant, int pos) {
    const int i = pos / DIGIT, s = pos % DIGIT;
    const i64 lo = (i64)(mant << s) & MASK;
    const i64 mid = (i64)(mant >> (DIGIT - s)) & MASK;
    const i64 hi = s > 2 * DIGIT - 64 ? (i64)(mant >> (2 * DIGIT - s)) : 0;
    c[i] += neg ? -lo : lo;
    c[i + 1] += neg ? -mid : mid;
    if (hi != 0) c[i + 2] += neg ? -hi : hi;
}

// x added into c (not normalised) and into the flags.
template <class T, int K> __device__ __forceinline__ void add_element(i64 (&c)[K], u64& flags, T x) {
    typedef exact_traits<T> F;
    const u64 b = F::bits(x);
    const bool neg = ((b >> (F::MANT + F::EXP)) & 1) != 0;
    const u64 emax = (1ull << F::EXP) - 1;
    const u64 e = (b >> F::MANT) & emax;
    const u64 frac = b & ((1ull << F::MANT) - 1);
    if (e == emax) {
        flags |= SEEN | NOT_NEG_ZERO | (frac != 0 ? NAN_F : neg ? NEG_INF : POS_INF);
    } else if (e == 0 && frac == 0) {
        flags |= SEEN | (neg ? 0ull : NOT_NEG_ZERO);
    } else {
        flags |= SEEN | NOT_NEG_ZERO;
        const u64 mant = e == 0 ? frac : frac | (1ull << F::MANT);
        const int pos = (int)(e == 0 ? 0 : e - 1) + sub_exp(F::MANT, F::EXP) - F::LOW;
        deposit(c, neg, mant, pos);
    }
}

// The bits of a NaN or an infinity the flags call for, or false.
__device__ __forceinline__ bool special_bits(u64 flags, int mant, int exp, u64& out) {
    const u64 inf = ((1ull << exp) - 1) << mant, sign = 1ull << (mant + exp);
    const bool both = (flags & (POS_INF | NEG_INF)) == (POS_INF | NEG_INF);
    if ((flags & NAN_F) != 0 || both) {
        out = inf | (1ull << (mant - 1));  // the quiet NaN, positive
    } else if ((flags & POS_INF) != 0) {
        out = inf;
    } else if ((flags & NEG_INF) != 0) {
        out = inf | sign;
    } else {
        return false;
    }
    return true;
}

// |value| as canonical digits (mag) and its sign.
template <int K> __device__ __forceinline__ bool magnitude(const ExactAcc<K>& a, u64 (&mag)[K]) {
    const bool neg = a.chunk[K - 1] < 0;
    i64 m[K];
#pragma unroll
    for (int i = 0; i < K; ++i) m[i] = neg ? -a.chunk[i] : a.chunk[i];
    normalize(m);
#pragma unroll
    for (int i = 0; i < K; ++i) mag[i] = (u64)m[i];
    return neg;
}

// Bits [lo, lo + width) of the digits (width at most 54).
__device__ __forceinline__ u64 window(const u64* mag, int len, int lo, int width) {
    const int j0 = lo / DIGIT;
    int j1 = (lo + width - 1) / DIGIT;
    if (j1 > len - 1) j1 = len - 1;
    u64 r = 0;
    for (int j = j0; j <= j1; ++j) {
        const int base = DIGIT * j;
        r |= base >= lo ? mag[j] << (base - lo) : mag[j] >> (lo - base);
    }
    return r & ((1ull << width) - 1);
}

// Bit i of the digits (the top digit may be wider than 48 bits).
__device__ __forceinline__ bool bit_at(const u64* mag, int len, int i) {
    int j = i / DIGIT;
    if (j > len - 1) j = len - 1;
    const int off = i - DIGIT * j;
    return off < 64 && ((mag[j] >> off) & 1) != 0;
}

// Whether any of bits [0, end) of the digits is set.
__device__ __forceinline__ bool any_below(const u64* mag, int len, int end) {
    const int j = end / DIGIT;
    bool any = false;
    for (int k = 0; k < j && k < len; ++k) any |= mag[k] != 0;
    const int off = end - DIGIT * j;
    if (j < len && off > 0) any |= (mag[j] & ((1ull << off) - 1)) != 0;
    return any;
}

// The value sum(mag[j] 2^(48 j)) 2^low, plus a positive amount below 2^low if sticky_in,
// negated if neg, rounded to nearest (ties to even) in the format of `mant` stored bits and
// `exp` exponent bits: its bits. low must lie at or below the format's smallest subnormal.
// With the significand m (p bits, from its top bit or from the subnormal unit) and q the
// binade above the subnormal one, the bits are q * 2^mant + m (a carry out of the
// significand moves to the exponent field by itself); past the largest finite, infinity.
__device__ __forceinline__ u64 round_digits(bool neg, const u64* mag, int len, int low, bool sticky_in, int mant,
                                            int exp) {
    const int sub = sub_exp(mant, exp) - low;
    int top = -1;
    for (int j = len - 1; j >= 0; --j)
        if (mag[j] != 0) { top = DIGIT * j + 63 - __clzll((long long)mag[j]); break; }
    const int lsb = top - mant > sub ? top - mant : sub;
    u64 m = window(mag, len, lsb, mant + 1);
    const bool round = lsb >= 1 && bit_at(mag, len, lsb - 1);
    const bool sticky = sticky_in || (lsb >= 2 && any_below(mag, len, lsb - 1));
    if (round && (sticky || (m & 1) != 0)) m += 1;
    const u64 q = (u64)(lsb - sub);
    const u64 inf = ((1ull << exp) - 1) << mant;
    u64 bits = inf;
    if (q < (1ull << exp) - 1) {
        bits = (q << mant) + m;
        if (bits > inf) bits = inf;
    }
    return bits | ((u64)neg << (mant + exp));
}

// An exact zero's bits: -0 only when every element was -0 (at least one), else +0 (the Rust
// half's zero_bits).
__device__ __forceinline__ u64 zero_bits(u64 flags, int mant, int exp) {
    const bool minus = (flags & SEEN) != 0 && (flags & NOT_NEG_ZERO) == 0;
    return minus ? 1ull << (mant + exp) : 0ull;
}

// ExactSum's finish: the exact sum rounded once.
template <class T> __device__ __forceinline__ T sum_of(const ExactAcc<exact_traits<T>::K>& a) {
    typedef exact_traits<T> F;
    constexpr int K = F::K;
    u64 out;
    if (special_bits(a.flags, F::MANT, F::EXP, out)) return F::of(out);
    u64 mag[K];
    const bool neg = magnitude(a, mag);
    bool zero = true;
#pragma unroll
    for (int i = 0; i < K; ++i) zero &= mag[i] == 0;
    if (zero) return F::of(zero_bits(a.flags, F::MANT, F::EXP));
    return F::of(round_digits(neg, mag, K, F::LOW, false, F::MANT, F::EXP));
}

// ExactMean's finish: the exact sum over n rounded once (NaN for n = 0). The quotient of the
// digits with one zero digit appended below the unit, from the top digit down (each step a
// 112-bit by 64-bit division, cf::div128by64). Leading zero digits have zero quotients, and
// three quotient digits from the first non-zero one hold every bit the rounding reads (the
// significand, the rounding bit: at most 55 bits below the leading one); what is left below
// them is only the sticky bit, set where the remainder or any lower digit is not zero. The
// division takes three or four steps where it took K (45 for f64).
template <class T> __device__ __forceinline__ T mean_of(const ExactAcc<exact_traits<T>::K>& a, u64 n) {
    typedef exact_traits<T> F;
    constexpr int K = F::K;
    const u64 nan = (((1ull << F::EXP) - 1) << F::MANT) | (1ull << (F::MANT - 1));
    if (n == 0) return F::of(nan);
    u64 out;
    if (special_bits(a.flags, F::MANT, F::EXP, out)) return F::of(out);
    u64 mag[K];
    const bool neg = magnitude(a, mag);
    bool zero = true;
#pragma unroll
    for (int i = 0; i < K; ++i) zero &= mag[i] == 0;
    if (zero) return F::of(zero_bits(a.flags, F::MANT, F::EXP));
    // q[j + 1]: the quotient digit of mag[j] (q[0] that of the appended zero digit).
    u64 q[K + 1];
    for (int j = 0; j <= K; ++j) q[j] = 0;
    int j = K - 1;
    while (mag[j] == 0) --j;  // not all zero
    q[j + 1] = mag[j] / n;
    u64 rem = mag[j] % n;
    int digits = q[j + 1] != 0;
    bool sticky = false;
    for (--j; j >= -1; --j) {
        if (digits == 3) {
            sticky = rem != 0;
            for (int i = j; i >= 0; --i) sticky |= mag[i] != 0;
            break;
        }
        const u64 d = j >= 0 ? mag[j] : 0ull;
        u64 r;
        q[j + 1] = div128by64(rem >> (64 - DIGIT), (rem << DIGIT) | d, n, &r);
        rem = r;
        digits += digits > 0 || q[j + 1] != 0;
    }
    sticky |= rem != 0;
    return F::of(round_digits(neg, q, K + 1, F::LOW - DIGIT, sticky, F::MANT, F::EXP));
}

}  // namespace exact

// The correctly rounded sum of f32, f64, f16 or bf16 elements (src/ops/exact.rs).
template <class T> struct ExactSum {
    typedef exact_traits<T> F;
    typedef T In; typedef ExactAcc<F::K> Acc; typedef T Out;
    static_assert(sizeof(Acc) == 8 * (F::K + 1), "ExactAcc<K> is K + 1 words, as in Rust");
    __device__ Acc identity() const {
        Acc r;
#pragma unroll
        for (int i = 0; i < F::K; ++i) r.chunk[i] = 0;
        r.flags = 0;
        return r;
    }
    __device__ Acc lift(In x, u64) const {
        Acc r = identity();
        exact::add_element(r.chunk, r.flags, x);
        exact::normalize(r.chunk);
        return r;
    }
    __device__ Acc combine(Acc a, Acc b) const {
#pragma unroll
        for (int i = 0; i < F::K; ++i) a.chunk[i] += b.chunk[i];
        exact::normalize(a.chunk);
        a.flags |= b.flags;
        return a;
    }
    __device__ Out finish(Acc a, u64) const { return exact::sum_of<T>(a); }
};

// ExactSum's monoid, finished by the correctly rounded division by n.
template <class T> struct ExactMean : ExactSum<T> {
    __device__ T finish(typename ExactSum<T>::Acc a, u64 n) const { return exact::mean_of<T>(a, n); }
};

// A thread's run (cf::Run). Elements are summed in double-precision expansions held in
// registers, and only what they cannot hold goes into the integer accumulator:
//
// - Each element, converted to double (exact for every format), is added into the first
//   term of one of E independent expansions (element i of a load into expansion i % E, for
//   instruction-level parallelism) with TwoSum, whose error (exact: a + b - RN(a + b)) goes
//   into the next term the same way, for L terms (f32, f16, bf16: 2; f64: 3). A term is
//   only touched when the error above it is not zero: for f32 input, whose 24-bit
//   significands mostly fit under a double's, the first error is usually zero already.
// - An error still left after the last term is *spilled*: deposited into the accumulator
//   exactly (rare on ordinary data; most elements on data whose exponents span hundreds of
//   binades).
// - An element that is not finite, or whose magnitude is 2^955 or more, is not added to the
//   expansions but deposited directly (add_element: flags, exact digits), so the terms
//   never overflow (n 2^955 < DBL_MAX for every n < 2^64) and never see an infinity or NaN.
// - The end deposits every term into the accumulator, sets the flags the terms imply and
//   carries once.
//
// Every step is exact: the terms and the spilled digits always sum to the elements' exact
// sum, so the end's accumulator is the canonical one of lift and combine (the value has one
// canonical form). The first terms start at -0.0: a first term ends -0.0 only if every
// element added to it was -0.0 (RN(x + y) is -0.0 only for -0.0 + -0.0), which gives the
// flags their sign-of-zero rule without a per-element test.
//
// `fits(x)`: whether the expansions take x (finite, below 2^955 in magnitude), from its bits
// by integer instructions, which leave the FP64 pipe to the TwoSums.
template <class T> struct exact_fast;
//
// ALWAYS: the terms every element goes through with no test first (f64's first error is
// seldom zero, f32's nearly always). STEP_SUMS: whole_run sums a step's elements with plain
// additions first where that is exact (f32, bf16). WHOLE_E, LOADS and REGS shape the
// whole-array run (ExactRun::whole_run): the expansions it adds into, the 16-byte loads each
// thread issues before it adds any of them, the registers a thread may use and the most
// copies of a warp's accumulator it keeps for what the expansions do not take
// (ExactRun::copies). H200, 2^28, share of Sum's GB/s on U(0,1) (f32 / f64), before the step
// sums and against an earlier, slower Sum: 2 loads at 48 registers 88% / 83%; 4 at 64, 101% /
// 101%; 8 at 72 (f32) 97%, at 96 (f64) 103%. Fewer registers spilled the loop.
template <> struct exact_fast<float> {
    static constexpr int E = 4, L = 2, ALWAYS = 1, WHOLE_E = 2, LOADS = 4, REGS = 64, COPIES = 16;
    static constexpr unsigned PLAIN = 0;
    static constexpr int STEP_SUMS = 1;
    static __device__ __forceinline__ double up(float x) { return (double)x; }
    static __device__ __forceinline__ bool fits(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }
};
template <> struct exact_fast<double> {
    static constexpr int E = 2, L = 3, ALWAYS = 2, WHOLE_E = 2, LOADS = 8, REGS = 96, COPIES = 8;
    static constexpr unsigned PLAIN = 0;
    static constexpr int STEP_SUMS = 0;
    static __device__ __forceinline__ double up(double x) { return x; }
    // The high word's exponent field below 1023 + 955.
    static __device__ __forceinline__ bool fits(double x) {
        return ((unsigned)__double2hiint(x) & 0x7fffffffu) < (1978u << 20);
    }
};
// f16's PLAIN: every finite f16 is a whole multiple of 2^-24 below 2^16 in magnitude, so
// any sum of at most 2^13 of them is a multiple of 2^-24 below 2^29, which a double holds:
// whole_run adds them into the first terms with plain additions, exact, and moves the terms
// into the accumulator every 4096 adds.
template <> struct exact_fast<f16> {
    static constexpr int E = 4, L = 2, ALWAYS = 1, WHOLE_E = 2, LOADS = 4, REGS = 64, COPIES = 4;
    static constexpr unsigned PLAIN = 4096;
    static constexpr int STEP_SUMS = 0;
    static __device__ __forceinline__ double up(f16 x) { return (double)cf::up(x); }
    static __device__ __forceinline__ bool fits(f16 x) { return (x.bits & 0x7c00u) != 0x7c00u; }
};
template <> struct exact_fast<bf16> {
    static constexpr int E = 4, L = 2, ALWAYS = 1, WHOLE_E = 2, LOADS = 4, REGS = 64, COPIES = 4;
    static constexpr unsigned PLAIN = 0;
    static constexpr int STEP_SUMS = 1;
    static __device__ __forceinline__ double up(bf16 x) { return (double)cf::up(x); }
    static __device__ __forceinline__ bool fits(bf16 x) { return (x.bits & 0x7f80u) != 0x7f80u; }
};

namespace exact {

// A finite double v, a whole multiple of 2^low, as at most three signed parts c[j] to add
// at chunks at[j] of a K-chunk accumulator (a part for a chunk past the top one is shifted
// into the top one): the parts deposit_double adds. Returns how many.
__device__ __forceinline__ int split_double(double v, int low, int k, i64 (&c)[3], int (&at)[3]) {
    const u64 b = (u64)__double_as_longlong(v);
    const u64 e = (b >> 52) & 0x7ff;
    u64 mant = b & ((1ull << 52) - 1);
    if (e == 0 && mant == 0) return 0;
    if (e != 0) mant |= 1ull << 52;
    int pos = (int)(e == 0 ? 1 : e) - 1075 - low;
    if (pos < 0) {  // the bits below 2^low are zero
        mant >>= -pos;
        pos = 0;
    }
    const int i = pos / DIGIT, s = pos % DIGIT;
    const bool neg = (b >> 63) != 0;
    const i64 part[3] = {(i64)(mant << s) & MASK, (i64)(mant >> (DIGIT - s)) & MASK,
                         s > 2 * DIGIT - 64 ? (i64)(mant >> (2 * DIGIT - s)) : 0};
#pragma unroll
    for (int j = 0; j < 3; ++j) {
        const int idx = i + j;
        const int sh = idx < k - 1 ? 0 : DIGIT * (idx - (k - 1));
        const i64 p = sh < 64 ? (i64)((u64)part[j] << sh) : 0;  // a part past 2^64 is zero
        c[j] = neg ? -p : p;
        at[j] = idx < k - 1 ? idx : k - 1;
    }
    return 3;
}

// A finite double v, a whole multiple of 2^low (every sum and TwoSum error of elements
// is), added into c (not normalised).
template <int K> __device__ __forceinline__ void deposit_double(i64 (&c)[K], double v, int low) {
    i64 part[3];
    int at[3];
    const int parts = split_double(v, low, K, part, at);
    for (int j = 0; j < parts; ++j) c[at[j]] += part[j];
}

// A finite element's digits (from its bits b): its significand at its place as PARTS parts,
// signed as the element, for chunks i, i + 1, ... (split returns i): two for significands
// of up to DIGIT bits, three for f64's. Every finite element's parts fall below chunk K, as
// add_element's do.
template <class T> struct element_digits {
    typedef exact_traits<T> F;
    static constexpr int PARTS = F::MANT + 1 > DIGIT ? 3 : 2;
    static __device__ __forceinline__ int split(u64 b, i64 (&c)[PARTS]) {
        const bool neg = ((b >> (F::MANT + F::EXP)) & 1) != 0;
        const unsigned e = (unsigned)(b >> F::MANT) & ((1u << F::EXP) - 1);
        const u64 frac = b & ((1ull << F::MANT) - 1);
        const u64 mant = e == 0 ? frac : frac | (1ull << F::MANT);
        const int pos = (e == 0 ? 0 : (int)e - 1) + sub_exp(F::MANT, F::EXP) - F::LOW;
        const int i = pos / DIGIT, s = pos % DIGIT;
        c[0] = (i64)(mant << s) & MASK;
        c[1] = (i64)(mant >> (DIGIT - s)) & MASK;
        if constexpr (PARTS == 3) c[2] = s > 2 * DIGIT - 64 ? (i64)(mant >> (2 * DIGIT - s)) : 0;
#pragma unroll
        for (int p = 0; p < PARTS; ++p) c[p] = neg ? -c[p] : c[p];
        return i;
    }
};

// RN(a + b) into a, the exact error a + b - RN(a + b) returned (Knuth's TwoSum).
__device__ __forceinline__ double two_sum_into(double& a, double b) {
    const double s = a + b;
    const double bp = s - a;
    const double err = (a - (s - bp)) + (b - bp);
    a = s;
    return err;
}

}  // namespace exact

// The rare part of a run's state (ExactRun): the spilled digits and the flags of the
// elements deposited directly, set to zero when first needed (most runs never need it), and
// the deposits since its last carry. Only the out-of-line functions below touch it, so it
// lives in local memory and the hot loop keeps just the expansions in registers: inlined at
// every element of a tile, these deposits made the kernel's code large and its register
// count high (156 registers a thread for f32, 23 KB of spills for f64).
template <class Acc> struct ExactSpill {
    Acc acc;
    unsigned adds;
    bool used;
};

namespace exact {

template <class F, class Acc> __device__ __forceinline__ void spill_use(ExactSpill<Acc>& sp) {
    if (!sp.used) {
#pragma unroll
        for (int i = 0; i < F::K; ++i) sp.acc.chunk[i] = 0;
        sp.acc.flags = 0;
        sp.used = true;
    }
}
template <class F, class Acc> __device__ __forceinline__ void spill_counted(ExactSpill<Acc>& sp) {
    if (++sp.adds == RUN_ADDS) {
        normalize(sp.acc.chunk);
        sp.adds = 0;
    }
}
// An expansion's last error r (finite, a whole multiple of 2^LOW) deposited exactly. The
// spill state goes in and out by value: a pointer to it would make the whole run state,
// expansions included, live in local memory.
template <class F, class Acc>
__device__ __noinline__ ExactSpill<Acc> spill_double(ExactSpill<Acc> sp, double r) {
    spill_use<F>(sp);
    deposit_double(sp.acc.chunk, r, F::LOW);
    spill_counted<F>(sp);
    return sp;
}
// An element the expansions do not take (exact_fast::fits false).
template <class F, class Acc, class T>
__device__ __noinline__ ExactSpill<Acc> spill_element(ExactSpill<Acc> sp, T x) {
    spill_use<F>(sp);
    add_element(sp.acc.chunk, sp.acc.flags, x);
    spill_counted<F>(sp);
    return sp;
}
// The same for accumulators too large to pass by value (f64's 368 bytes), through a pointer:
// the run state then lives in local memory.
template <class F, class Acc> __device__ __noinline__ void spill_double_at(ExactSpill<Acc>* sp, double r) {
    spill_use<F>(*sp);
    deposit_double(sp->acc.chunk, r, F::LOW);
    spill_counted<F>(*sp);
}
template <class F, class Acc, class T> __device__ __noinline__ void spill_element_at(ExactSpill<Acc>* sp, T x) {
    spill_use<F>(*sp);
    add_element(sp->acc.chunk, sp->acc.flags, x);
    spill_counted<F>(*sp);
}
// Accumulators passed by value: the f32 (f16, bf16) one.
template <class F> struct spill_by_value { static constexpr bool value = F::K <= 8; };

}  // namespace exact

template <class Op> struct ExactRun {
    typedef typename Op::In In;
    typedef typename Op::Acc Acc;
    typedef exact_traits<In> F;
    typedef exact_fast<In> X;
    static constexpr int E = X::E, L = X::L;
    // Registers a thread may use (cf::min_blocks): exact_fast::REGS, which whole_run's loop
    // takes with no spill (ptxas, sm_90): eight blocks of 128 threads an SM for f32 and the
    // halves, five for f64. Code run once a block (joining, rounding) would take more and
    // spills instead.
    static constexpr int REGS = X::REGS;
    struct State {
        double t[E][L];
        ExactSpill<Acc> spill;
        bool seen;
    };
    static __device__ __forceinline__ State start(const Op& op) {
        State s;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            s.t[e][0] = -0.0;
#pragma unroll
            for (int l = 1; l < L; ++l) s.t[e][l] = 0.0;
        }
        s.spill.adds = 0;
        s.spill.used = false;
        s.seen = false;
        return s;
    }
    // x (exact_fast::fits) into expansion e, from term `from` on.
    static __device__ __forceinline__ void expand(State& s, int e, double x, int from = 0) {
        double r = x;
#pragma unroll
        for (int l = 0; l < L; ++l) {
            if (l < from) continue;
            r = exact::two_sum_into(s.t[e][l], r);
            if (r == 0.0) return;
        }
        if constexpr (exact::spill_by_value<F>::value) s.spill = exact::spill_double<F>(s.spill, r);
        else exact::spill_double_at<F>(&s.spill, r);
    }
    static __device__ __forceinline__ void spill(State& s, In x) {
        if constexpr (exact::spill_by_value<F>::value) s.spill = exact::spill_element<F>(s.spill, x);
        else exact::spill_element_at<F>(&s.spill, x);
    }
    static __device__ __forceinline__ void add(const Op&, State& s, In x, u64) {
        s.seen = true;
        const double d = X::up(x);
        if (X::fits(x)) expand(s, 0, d);
        else spill(s, x);
    }
    template <int VEC>
    static __device__ __forceinline__ void add_all(const Op&, State& s, const In (&v)[VEC], u64) {
        s.seen = true;
        double d[VEC];
        bool fast = true;
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
            d[i] = X::up(v[i]);
            fast &= X::fits(v[i]);
        }
        if (fast) {
            // Every element into its expansion's first term, then, only where some error is
            // not zero (rare for f32 data), the errors into the next terms: one branch a load
            // instead of one an element. Each term still takes its inputs in the same order.
            double r[VEC];
            bool carry = false;
#pragma unroll
            for (int i = 0; i < VEC; ++i) {
                r[i] = exact::two_sum_into(s.t[i % E][0], d[i]);
                carry |= r[i] != 0.0;
            }
            if (carry) {
#pragma unroll
                for (int i = 0; i < VEC; ++i)
                    if (r[i] != 0.0) expand(s, i % E, r[i], 1);
            }
        } else {
#pragma unroll
            for (int i = 0; i < VEC; ++i) {
                if (X::fits(v[i])) expand(s, i % E, d[i]);
                else spill(s, v[i]);
            }
        }
    }
    // The flags the terms imply (see above).
    static __device__ __forceinline__ u64 term_flags(const State& s) {
        bool not_neg_zero = false;
#pragma unroll
        for (int e = 0; e < E; ++e) not_neg_zero |= (u64)__double_as_longlong(s.t[e][0]) != (1ull << 63);
        return s.seen ? exact::SEEN | (not_neg_zero ? exact::NOT_NEG_ZERO : 0ull) : 0ull;
    }
    static __device__ __forceinline__ Acc end(const Op&, State s) {
        exact::spill_use<F>(s.spill);
        // Each chunk is below (RUN_ADDS + E L) 2^48 in magnitude after the deposits below.
        Acc a = s.spill.acc;
#pragma unroll
        for (int e = 0; e < E; ++e)
#pragma unroll
            for (int l = 0; l < L; ++l) exact::deposit_double(a.chunk, s.t[e][l], F::LOW);
        a.flags |= term_flags(s);
        exact::normalize(a.chunk);
        return a;
    }
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)  // (not in the host check)
    // The sum of v over the warp, in every lane (every lane calls it).
    static __device__ __forceinline__ i64 warp_sum(i64 v) {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        return v;
    }
    // Adds every lane's v into w (a shared word): summed over the warp by shuffles first, so
    // that one atomic a warp reaches the word (the threads' terms mostly fall on the same
    // chunks, and an atomic a lane serialised on them: about 200 us of fixed cost a launch
    // on an H200). Skipped when the warp's v are all zero.
    static __device__ __forceinline__ void warp_add(unsigned long long* w, i64 v) {
        if (__any_sync(0xffffffffu, v != 0)) {
            v = warp_sum(v);
            if ((threadIdx.x & 31) == 0 && v != 0) atomicAdd(w, (unsigned long long)v);
        }
    }
    // The block's accumulator, meaningful in thread 0, from every thread's state: the threads
    // add their terms' digits and their (carried) spilled digits into one accumulator in
    // shared memory (smem[0]), chunk by chunk, summed over each warp by shuffles and then
    // with integer atomics, which commute, and thread 0 carries it once. Far cheaper than a
    // tree of 8 (K + 1)-byte accumulators through shuffles; the same value, so the same
    // canonical bits. Every thread of the block calls it.
    template <int BLOCK> static __device__ __forceinline__ Acc block_end(const Op&, State& s, Acc* smem) {
        return join_terms<BLOCK>(s, 0, nullptr, smem);
    }
    // block_end's work, with more flags and, for whole_run, the calling warp's carried
    // accumulator `area` (else null), which its lanes add into the block's chunk by chunk.
    // `area` holds C carried copies of the warp's chunks, chunk-major (chunk i of copy c at
    // i C + c): a lane sums one chunk over the copies, starting at a copy of its own so that
    // the lanes' reads fall on different banks (the copies' sum is below 2^53: no overflow).
    template <int BLOCK, int C = 1>
    static __device__ __forceinline__ Acc join_terms(State& s, unsigned more_flags, const i64* area, Acc* smem) {
        unsigned long long* w = reinterpret_cast<unsigned long long*>(&smem[0]);
        for (int i = threadIdx.x; i < F::K + 1; i += BLOCK) w[i] = 0;
        __syncthreads();
        if (area != nullptr)
            for (int i = threadIdx.x & 31; i < F::K; i += 32) {
                i64 v = 0;
#pragma unroll 1
                for (int c = 0; c < C; ++c) v += area[i * C + (c + i) % C];
                if (v != 0) atomicAdd(&w[i], (unsigned long long)v);
            }
        // This thread's digits by chunk, its (carried) spill and its terms' parts, summed over
        // the warp chunk by chunk (warp_add). A chunk's sum over the block is below
        // BLOCK (1 + 3 E L) 2^48 in magnitude: far from 2^63.
        // - f32 (7 chunks): in registers, each part added where it falls by selects.
        // - f64 (45) where no lane of the warp has a spill (whole_run's warps never do): only
        //   the chunks from the lowest to the highest that the warp's terms reach (a few on
        //   ordinary data), each a sum of the parts that fall on it, by selects. 45 chunks a
        //   thread in local memory, each then summed over the warp, took about 20 us of a
        //   launch on an H200 (a 2^24 f64 sum: 60 us with this join, Sum 42).
        // - f64 with a spill: in local memory.
        constexpr bool REG = exact::spill_by_value<F>::value;
        const bool spilled = s.spill.used;
        if constexpr (!REG) {
            if (!__any_sync(0xffffffffu, spilled)) {
                constexpr int T = E * L;
                i64 c[T][3];
                int base[T];
                int lo = F::K, hi = -1;
#pragma unroll
                for (int tt = 0; tt < T; ++tt) {
                    int where[3];
                    const int parts = exact::split_double(s.t[tt / L][tt % L], F::LOW, F::K, c[tt], where);
                    base[tt] = parts != 0 ? where[0] : F::K;
                    if (parts != 0) {
                        lo = lo < where[0] ? lo : where[0];
                        hi = hi > where[2] ? hi : where[2];
                    }
                }
                lo = __reduce_min_sync(0xffffffffu, lo);
                hi = __reduce_max_sync(0xffffffffu, hi);
#pragma unroll 1
                for (int k = lo; k <= hi; ++k) {
                    i64 v = 0;
#pragma unroll
                    for (int tt = 0; tt < T; ++tt)
#pragma unroll
                        for (int j = 0; j < 3; ++j) {
                            const int at = base[tt] + j < F::K - 1 ? base[tt] + j : F::K - 1;
                            v += base[tt] < F::K && at == k ? c[tt][j] : 0;
                        }
                    warp_add(&w[k], v);
                }
                return joined((unsigned)term_flags(s) | more_flags, smem);
            }
        }
        if (spilled) exact::normalize(s.spill.acc.chunk);
        i64 v[F::K];
#pragma unroll
        for (int i = 0; i < F::K; ++i) v[i] = spilled ? s.spill.acc.chunk[i] : 0;
#pragma unroll
        for (int e = 0; e < E; ++e)
#pragma unroll
            for (int l = 0; l < L; ++l) {
                i64 c[3];
                int where[3];
                const int parts = exact::split_double(s.t[e][l], F::LOW, F::K, c, where);
#pragma unroll
                for (int j = 0; j < 3; ++j) {
                    if (j >= parts) break;
                    if constexpr (REG) {
#pragma unroll
                        for (int i = 0; i < F::K; ++i) v[i] += where[j] == i ? c[j] : 0;
                    } else {
                        v[where[j]] += c[j];
                    }
                }
            }
#pragma unroll(REG ? F::K : 1)
        for (int i = 0; i < F::K; ++i) warp_add(&w[i], v[i]);
        return joined((unsigned)(term_flags(s) | (spilled ? s.spill.acc.flags : 0ull)) | more_flags, smem);
    }
    // The end of block_end and join_partials: every lane's flags ORed into the shared
    // accumulator (smem[0]), which thread 0 then carries and returns.
    static __device__ __forceinline__ Acc joined(unsigned flags, Acc* smem) {
        unsigned long long* w = reinterpret_cast<unsigned long long*>(&smem[0]);
        const unsigned f = __reduce_or_sync(0xffffffffu, flags);
        if ((threadIdx.x & 31) == 0 && f != 0) atomicOr(&w[F::K], (unsigned long long)f);
        __syncthreads();
        Acc a;
        if (threadIdx.x == 0) {
            a = smem[0];
            exact::normalize(a.chunk);
        }
        return a;
    }
    // The block's accumulator, meaningful in thread 0, from the m partials of a launch's
    // blocks (canonical accumulators: chunks 0 to K-2 hold digits below 2^48, and m is at
    // most 2^13, the reduction's largest grid, so no sum overflows). Every thread of the
    // block calls it. The partials (16-byte aligned, K + 1 an even number of words) are read
    // as 16-byte vectors: G groups of V threads each read one partial at a time, thread c
    // of a group its words 2c and 2c + 1, UNROLL partials a thread in flight, and add them
    // (the flags word ORed); the groups' sums are then added in shared memory. Reading each
    // chunk of every partial in turn, chunk after chunk, waited for 45 rounds of loads (f64),
    // about 40 us of a launch on an H200.
    template <int BLOCK>
    static __device__ __forceinline__ Acc join_partials(const Op&, const Acc* p, u64 m, Acc* smem) {
        constexpr int W = F::K + 1, V = W / 2, G = BLOCK / V, UNROLL = 8;
        static_assert(W % 2 == 0 && G >= 1, "join_partials: accumulators of whole 16-byte vectors");
        __shared__ unsigned long long part[G][W];
        const ulonglong2* pv = reinterpret_cast<const ulonglong2*>(p);
        const int g = threadIdx.x / V, c = threadIdx.x % V;
        const bool flags = 2 * c + 1 == F::K;  // the high word is the flags
        if (g < G) {
            unsigned long long lo = 0, hi = 0;
            u64 j = g;
            for (; j + (UNROLL - 1) * G < m; j += UNROLL * G) {
                ulonglong2 v[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) v[u] = __ldcg(pv + (j + u * G) * V + c);
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    lo += v[u].x;
                    hi = flags ? hi | v[u].y : hi + v[u].y;
                }
            }
            for (; j < m; j += G) {
                const ulonglong2 v = __ldcg(pv + j * V + c);
                lo += v.x;
                hi = flags ? hi | v.y : hi + v.y;
            }
            part[g][2 * c] = lo;
            part[g][2 * c + 1] = hi;
        }
        __syncthreads();
        unsigned long long* w = reinterpret_cast<unsigned long long*>(&smem[0]);
        for (int i = threadIdx.x; i < W; i += BLOCK) {
            unsigned long long v = 0;
#pragma unroll 1
            for (int k = 0; k < G; ++k) v = i == F::K ? v | part[k][i] : v + part[k][i];
            w[i] = v;
        }
        return joined(0u, smem);
    }

    // The whole-array reduction's run of a block (cf::free_run with WHOLE): the positions
    // of `tiles` tiles of BLOCK * K * VEC from `first` that lie before n, from `x` (16-byte
    // aligned, VEC elements a 16-byte load). The block's accumulator, meaningful in thread
    // 0; every thread of the block calls it. Any order gives the bits, so the block reads
    // its range as 16-byte vectors in steps of LOADS * BLOCK: thread t takes vectors t,
    // t + BLOCK, ... of each step.
    //
    // The per-thread run above, rearranged so that the loop holds only the expansions and
    // the step's loads in registers and makes no call:
    // - Each thread issues its LOADS loads of a step before it adds any, and the kernel asks
    //   for exact_fast::REGS registers a thread: eight blocks of 128 an SM for f32 (five
    //   for f64), whose loads in flight keep DRAM busy with no staging. A cp.async ring in
    //   shared memory, a tile ahead, at 72 registers (seven blocks) ran at 84-86% of Sum's
    //   GB/s (f32; f64 79%), its warps waiting for the next tile.
    // - Element i of a load goes into expansion i % WHOLE_E.
    // - What the expansions do not take (an element that does not fit, an error left after
    //   the last term) is queued in shared memory, a slot a lane an element of the step.
    //   After each step a lane with queued values deposits them into its copy of the
    //   warp's accumulator in shared memory (K chunks; C = copies() copies, lane l writing
    //   copy l % C: with 32, its own, by plain adds; with fewer, by integer atomics, which
    //   commute), with their flags. A lane deposits at most one value's parts into a chunk
    //   an element, and the warp carries its copies every 16 steps with a deposit, well
    //   within RUN_ADDS adds a chunk. One accumulator a warp, which every lane's deposits
    //   reached by atomics, ran spill-heavy data at 6% (f32) and 13% (f64) of Sum's GB/s
    //   (H200): a 64-bit atomic in shared memory is a compare-and-swap loop, and the lanes'
    //   parts fall on a few chunks, so most lanes went round it many times.
    // - Data that fills the queues (exponents over hundreds of binades) switches the warp to
    //   direct mode (below) for a run of steps: each element's digits go straight into
    //   chunks, with no expansion, queue or drain.
    // - exact_fast<f16>::PLAIN: f16 elements take plain additions in place of the TwoSums.
    // - The tests (fits, whether any error is left for the next term) are integer
    //   instructions on the bits, which leave the FP64 pipe to the TwoSums.
    // - The positions after the last whole step are read one by one: the array's end, and
    //   for f64, whose step is two tiles, a block's last tile when it has an odd number.
    template <int VEC> static __host__ __device__ constexpr int queue_slots() {
        return X::LOADS * VEC;
    }
    // Whether whole_run's shared memory (the queue, the warps' chunks) takes at most 40 KB
    // for this shape (blocks of 128 threads, the reducer's default for large inputs, fit;
    // halves from 256 threads do not). The others run cf::free_run with block_end.
    template <int BLOCK, int K, int VEC> static __host__ __device__ constexpr bool whole_fits() {
        return (BLOCK / 32) * (queue_slots<VEC>() * 32 * 8 + F::K * 8) <= 40960;
    }
    // The copies of a warp's chunks whole_run keeps: exact_fast::COPIES (16 for f32, 8 for
    // f64, whose 45 chunks make them large, 4 for the halves, whose queue is twice f32's),
    // halved until the shared memory fits whole_fits' 40 KB. More shared memory a block
    // leaves the SM too little L1 for the loads in flight: f32 with 32 copies (26 KB a
    // block, eight blocks) ran U(0, 1) at 95% of Sum's GB/s, with 16 (22.5 KB) at 101%
    // (H200, 2^28).
    template <int BLOCK, int VEC> static __host__ __device__ constexpr int copies() {
        int c = X::COPIES;
        while (c > 1 && (BLOCK / 32) * (queue_slots<VEC>() * 32 * 8 + F::K * 8 * c) > 40960) c /= 2;
        return c;
    }
    template <int BLOCK, int K, int VEC>
    static __device__ __forceinline__ Acc whole_run(const Op&, const In* x, u64 first, u64 tiles, u64 n, Acc* smem) {
        static_assert(whole_fits<BLOCK, K, VEC>() && sizeof(In) * VEC == 16, "whole_run: shape");
        constexpr int WARPS = BLOCK / 32, LOADS = X::LOADS, WE = X::WHOLE_E, NE = queue_slots<VEC>();
        static_assert(WE <= E, "whole_run: its expansions are the state's");
        constexpr u64 TILE = (u64)BLOCK * K * VEC;
        constexpr int C = copies<BLOCK, VEC>();
        // Steps between carries of the copies: far fewer than their bound allows, so that a
        // block's run of tens of thousands of elements (the tests') carries; a carry costs a
        // few instructions an element of the steps before it, and only where some lane
        // deposited.
        constexpr unsigned NORM = 16;
        static_assert(NORM * (32 / C) * (NE + 1) <= exact::RUN_ADDS, "whole_run: carries often enough");
        __shared__ double queue[WARPS][NE][32];  // slot-major: a step's pushes hit distinct banks
        __shared__ i64 area[WARPS][F::K * C];    // chunk-major: chunk i of copy c at i C + c
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, copy = lane % C;
        i64* const mine = area[warp];
        for (int i = lane; i < F::K * C; i += 32) mine[i] = 0;
        __syncwarp();
        // Every copy carried (canonical but for the top chunk).
        const auto carry = [&]() {
            __syncwarp();
            if (lane < C) exact::normalize_at<F::K, C>(mine + lane);
            __syncwarp();
        };

        double t[E][L];  // expansions WE .. E - 1 stay empty
#pragma unroll
        for (int e = 0; e < E; ++e) {
            t[e][0] = -0.0;
#pragma unroll
            for (int l = 1; l < L; ++l) t[e][l] = 0.0;
        }
        unsigned flags = 0, queued = 0;
        bool deposited = false;
        const auto push = [&](double v) { queue[warp][queued++][lane] = v; };
        // The lanes' queued values into the warp's chunks, in a loop the whole warp takes in
        // step (as many rounds as the fullest queue; a lane past its own queue adds zero, and
        // the branches are selects): a loop over each lane's own count let the compiler run
        // the lanes' iterations apart, and ExactMean's kernel, whose loop is the same, took
        // twice ExactSum's instructions on spill-heavy data at under 8 active lanes an
        // instruction (ncu).
        const auto drain = [&]() -> unsigned {
            const unsigned most = __reduce_max_sync(0xffffffffu, queued);
            if (most == 0) return 0;
#pragma unroll 1
            for (unsigned q = 0; q < most; ++q) {
                const bool live = q < queued;
                const double v = live ? queue[warp][q][lane] : 0.0;
                const u64 b = (u64)__double_as_longlong(v);
                const bool special = ((b >> 52) & 0x7ff) == 0x7ff;
                // A queued value is never 0 (a non-zero error, or an element that does not fit).
                const unsigned kind =
                    special ? ((b << 12) != 0 ? exact::NAN_F : (b >> 63) != 0 ? exact::NEG_INF : exact::POS_INF) : 0u;
                flags |= live ? (unsigned)exact::NOT_NEG_ZERO | kind : 0u;
                i64 part[3];
                int at[3];
                const int parts = exact::split_double(special ? 0.0 : v, F::LOW, F::K, part, at);
#pragma unroll
                for (int p = 0; p < 3; ++p) {
                    if (p >= parts) break;
                    i64* const d = mine + at[p] * C + copy;
                    if constexpr (C == 32) *d += part[p];  // this lane's own copy
                    else if (part[p] != 0) atomicAdd(reinterpret_cast<unsigned long long*>(d), (unsigned long long)part[p]);
                }
            }
            deposited |= queued != 0;
            queued = 0;
            return most;
        };
        // A load's VEC values (each fits, or -0.0) through the terms of expansions i % WE: the
        // first ALWAYS terms always, the next ones only while some error is left; an error
        // left after the last term queued.
        // The first `count` values of r (a constant where it is called).
        const auto levels = [&](double (&r)[VEC], int count) {
            if constexpr (X::PLAIN != 0) {  // plain additions, exact (exact_fast<f16>)
#pragma unroll
                for (int i = 0; i < VEC; ++i) t[i % WE][0] += r[i];
                return;
            }
            u64 nz = 0;
#pragma unroll
            for (int l = 0; l < L; ++l) {
                if (l >= X::ALWAYS && (nz << 1) == 0) return;  // every error +0 or -0
                nz = 0;
#pragma unroll
                for (int i = 0; i < VEC; ++i) {
                    if (i >= count) break;
                    r[i] = exact::two_sum_into(t[i % WE][l], r[i]);
                    nz |= (u64)__double_as_longlong(r[i]);
                }
            }
            if ((nz << 1) != 0) {
#pragma unroll
                for (int i = 0; i < VEC; ++i)
                    if (i < count && r[i] != 0.0) push(r[i]);
            }
        };
        // A load's elements (valid[i]: element i is one of the input's). Loads whose elements
        // all fit take a path of their own (a shared one merged the values with moves).
        const auto add_load = [&](const In (&v)[VEC], const bool (&valid)[VEC]) {
            bool fast = true;
#pragma unroll
            for (int i = 0; i < VEC; ++i) fast &= valid[i] && X::fits(v[i]);
            double r[VEC];
            if (fast) {
#pragma unroll
                for (int i = 0; i < VEC; ++i) r[i] = X::up(v[i]);
            } else {
#pragma unroll
                for (int i = 0; i < VEC; ++i) {
                    // -0.0 for a position that adds nothing: x + -0.0 is x, also for x = -0.0.
                    r[i] = -0.0;
                    if (valid[i]) {
                        if (X::fits(v[i])) r[i] = X::up(v[i]);
                        else push(X::up(v[i]));
                    }
                }
            }
            levels(r, VEC);
        };

        // exact_fast::PLAIN: the first terms moved into the warp's copies (through the queue,
        // empty after a drain) every FLUSH steps, so that none takes more than PLAIN adds
        // between two moves, the tail's step included: as often as the carries, which keeps
        // the cost small and lets a test of a few hundred thousand elements a block reach it.
        constexpr unsigned FLUSH = NORM;
        static_assert(X::PLAIN == 0 || (FLUSH + 1) * (NE / WE) <= X::PLAIN, "whole_run: plain sums' moves");
        unsigned plain = 0;
        const auto flush = [&]() {
#pragma unroll
            for (int e = 0; e < WE; ++e) {
                const double v = t[e][0];
                flags |= (u64)__double_as_longlong(v) != (1ull << 63) ? (unsigned)exact::NOT_NEG_ZERO : 0u;
                if (v != 0.0) push(v);
                t[e][0] = -0.0;
            }
            drain();
        };

        // Direct mode, for data the expansions do not hold: a step after which some lane had
        // more than half its queue slots filled is followed by up to DIRECT steps in which
        // every element's digits go straight into chunks (element_digits: integer
        // instructions only), where the expansions, the queue and its drain took about 150
        // instructions an element (f32, ncu). Each lane then adds into its own column of K
        // chunks, kept in its queue slots (OWN: when they hold K words; it is carried and
        // added into the warp's copies when the mode ends), or else (f64's 45 chunks) into the
        // warp's copies. The mode is the warp's (the queue's fullest lane decides), and any
        // mix of modes gives the same exact sum. H200, 2^28, wide exponents, % of Sum's GB/s:
        // f32 11% -> 42%, f64 15% -> 26% (its atomics are compare-and-swap loops). The direct
        // steps have a loop of their own: inside the step loop, their code cost f64's U(0, 1)
        // run 5%.
        constexpr bool OWN = NE >= F::K;
        constexpr unsigned DIRECT = 64;
        static_assert(!OWN || DIRECT * NE <= exact::RUN_ADDS, "whole_run: a column's adds");
        typedef exact::element_digits<In> D;
        i64* const col = reinterpret_cast<i64*>(queue[warp][0]) + lane;  // chunk i at col[32 i]
        u64 direct_nz = 0;  // an element other than -0.0 was added directly
        const auto direct_add = [&](In x) {
            const u64 b = F::bits(x);
            direct_nz |= b ^ (1ull << (F::MANT + F::EXP));
            const u64 emax = (1ull << F::EXP) - 1;
            if (((b >> F::MANT) & emax) == emax) {  // infinite or NaN: flags only
                const bool neg = ((b >> (F::MANT + F::EXP)) & 1) != 0;
                flags |= (unsigned)((b & ((1ull << F::MANT) - 1)) != 0 ? exact::NAN_F
                                    : neg                                 ? exact::NEG_INF
                                                                          : exact::POS_INF);
                return;
            }
            i64 c[D::PARTS];
            const int i = D::split(b, c);
#pragma unroll
            for (int p = 0; p < D::PARTS; ++p) {
                if constexpr (OWN) {
                    col[32 * (i + p)] += c[p];
                } else {
                    i64* const d = mine + (i + p) * C + copy;
                    if (c[p] != 0) atomicAdd(reinterpret_cast<unsigned long long*>(d), (unsigned long long)c[p]);
                }
            }
        };
        const auto enter_direct = [&]() {
            if constexpr (OWN) {
#pragma unroll
                for (int i = 0; i < F::K; ++i) col[32 * i] = 0;
            }
        };
        // The lane's column carried and added into its copy of the warp's chunks.
        const auto leave_direct = [&]() {
            if constexpr (OWN) {
                i64 c = 0;
#pragma unroll
                for (int i = 0; i < F::K; ++i) {
                    const i64 t = col[32 * i] + c;
                    const i64 v = i < F::K - 1 ? t & exact::MASK : t;
                    c = t >> exact::DIGIT;
                    i64* const d = mine + i * C + copy;
                    if constexpr (C == 32) *d += v;
                    else if (v != 0) atomicAdd(reinterpret_cast<unsigned long long*>(d), (unsigned long long)v);
                }
                deposited = true;
            }
        };

        const u64 end = n < first + tiles * TILE ? n : first + tiles * TILE;
        const u64 vectors = end > first ? (end - first) / VEC : 0;
        const uint4* const xv = reinterpret_cast<const uint4*>(x + first);
        const u64 steps = vectors / ((u64)LOADS * BLOCK);
        bool all[VEC];
#pragma unroll
        for (int i = 0; i < VEC; ++i) all[i] = true;
        unsigned since = 0;  // steps since the warp last carried its chunks
        const auto step_done = [&]() {
            if (++since == NORM) {
                since = 0;
                if (__any_sync(0xffffffffu, deposited)) {
                    carry();
                    deposited = false;
                }
            }
        };
        // Step st's loads, all issued before any is used: thread t takes vectors t, t + BLOCK, ...
        const auto load = [&](u64 st, uint4(&raw)[LOADS]) {
#pragma unroll
            for (int u = 0; u < LOADS; ++u) raw[u] = __ldg(xv + (st * LOADS + u) * BLOCK + threadIdx.x);
        };
        // A step's elements, load by load (add_load), or for exact_fast::STEP_SUMS (f32,
        // bf16) summed first with plain additions into four partial sums where the step's
        // largest and smallest non-zero magnitudes show that to be exact: every element is a
        // multiple of u = 2^(max(Emin, 1) - BIAS - MANT) (Emin the smallest biased exponent of
        // a non-zero element; zeros are multiples of anything) and below 2^(Emax - BIAS + 1)
        // in magnitude, so a partial sum of TERMS of them is a multiple of u below TERMS
        // 2^(Emax - BIAS + 1), which a double holds when that is at most 2^53 u: Emax -
        // max(Emin, 1) <= 52 - MANT - log2(TERMS) (27 for f32, 42 for bf16). The partial sums
        // (-0.0 only if every element was) then go through the expansions' terms as elements
        // do: 4 TwoSums a step where there were LOADS * VEC. A lane whose step holds an
        // infinity, a NaN or a wider range adds its loads one by one, and so do its next 7
        // steps, with no test. H200, 2^28, share of Sum's GB/s: f32 U(0, 1) 92.5% -> 95.3-96%,
        // at condition number 1e12 66.5% -> 64.5% (60% testing every step); bf16 U(0, 1) 55%
        // -> 84%, at 1e4 55% -> 83%. Decided a warp at a time (a vote), bf16 ran at 60%.
        unsigned skip = 0;
        const auto step_sums = [&](const uint4(&raw)[LOADS]) -> bool {
            if constexpr (X::STEP_SUMS != 0) {
                static_assert((sizeof(In) == 4 && VEC == 4) || (sizeof(In) == 2 && VEC == 8), "step sums: f32, bf16");
                // Four partial sums, the elements of each load's word j into p[j]: TERMS
                // elements a sum (f32: LOADS; bf16: both halves, 2 LOADS).
                constexpr int TERMS = LOADS * (VEC / 4);
                unsigned lo = 0xffffffffu, hi = 0;
                double p[VEC];
#pragma unroll
                for (int i = 0; i < VEC; ++i) p[i] = -0.0;
#pragma unroll
                for (int u = 0; u < LOADS; ++u) {
                    const unsigned w[4] = {raw[u].x, raw[u].y, raw[u].z, raw[u].w};
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        // lo: the smallest magnitude but one (a zero's wraps to the largest
                        // word: zeros constrain nothing).
                        if constexpr (sizeof(In) == 4) {
                            const unsigned m = w[j] & 0x7fffffffu;
                            lo = min(lo, m - 1);
                            hi = max(hi, m);
                            p[j] += (double)__uint_as_float(w[j]);
                        } else {
                            // bf16: elements 2j and 2j + 1 in the low and high halves, their
                            // magnitudes side by side in the halves of lo and hi.
                            const unsigned m = w[j] & 0x7fff7fffu;
                            lo = __vminu2(lo, __vsub2(m, 0x00010001u));
                            hi = __vmaxu2(hi, m);
                            p[j] += (double)__uint_as_float(w[j] << 16);
                            p[j] += (double)__uint_as_float(w[j] & 0xffff0000u);
                        }
                    }
                }
                if constexpr (sizeof(In) == 2) {
                    lo = min((lo & 0xffffu) + 1, (lo >> 16) + 1);
                    hi = max(hi & 0xffffu, hi >> 16);
                } else {
                    lo += 1;  // 0 where every element was a zero
                }
                const int emax = (int)(hi >> F::MANT), emin = max((int)(lo >> F::MANT), 1);
                const bool exact = emax < (1 << F::EXP) - 1 && emax - emin <= 52 - F::MANT - ilog2(TERMS);
                if (!exact) return false;
                levels(p, 4);
                return true;
            }
            return false;
        };
        const auto add_step = [&](const uint4(&raw)[LOADS]) {
            if constexpr (X::STEP_SUMS != 0) {
                if (skip != 0) {
                    --skip;
                } else {
                    if (step_sums(raw)) return;
                    skip = 7;
                }
            }
#pragma unroll
            for (int u = 0; u < LOADS; ++u) {
                // An opaque copy: where this path shared the step sums' conversions, all of a
                // step's elements were held as doubles at once, and the loop spilled.
                uint4 r = raw[u];
                if constexpr (X::STEP_SUMS != 0) asm volatile("" : "+r"(r.x), "+r"(r.y), "+r"(r.z), "+r"(r.w));
                In v[VEC];
                memcpy(v, &r, sizeof(r));
                add_load(v, all);
            }
        };
        for (u64 st = 0; st < steps;) {
            uint4 raw[LOADS];
            load(st, raw);
            add_step(raw);
            const unsigned most = drain();
            if constexpr (X::PLAIN != 0) {
                if (++plain == FLUSH) {
                    plain = 0;
                    flush();
                }
            }
            ++st;
            step_done();
            if (2 * most > NE) {
                // Up to DIRECT steps in direct mode, in a loop of their own.
                enter_direct();
                const u64 stop = steps - st > DIRECT ? st + DIRECT : steps;
                for (; st < stop; ++st) {
                    load(st, raw);
#pragma unroll
                    for (int u = 0; u < LOADS; ++u) {
                        In v[VEC];
                        memcpy(v, &raw[u], sizeof(raw[u]));
#pragma unroll
                        for (int i = 0; i < VEC; ++i) direct_add(v[i]);
                    }
                    if constexpr (!OWN) {
                        deposited = true;
                        step_done();
                    }
                }
                leave_direct();
            }
        }
        flags |= direct_nz != 0 ? (unsigned)exact::NOT_NEG_ZERO : 0u;
        const u64 rest = first + steps * LOADS * BLOCK * VEC;
        if (rest < end) {
#pragma unroll
            for (int u = 0; u < LOADS; ++u) {
                In v[VEC];
                bool valid[VEC];
#pragma unroll
                for (int i = 0; i < VEC; ++i) {
                    const u64 p = rest + ((u64)u * BLOCK + threadIdx.x) * VEC + i;
                    valid[i] = p < end;
                    if (valid[i]) v[i] = x[p];
                }
                add_load(v, valid);
            }
            drain();
        }

        // The warp's copies carried (below 2^48 but the top chunk), then the block's sum.
        carry();
        State s;
#pragma unroll
        for (int e = 0; e < E; ++e)
#pragma unroll
            for (int l = 0; l < L; ++l) s.t[e][l] = t[e][l];
        s.seen = first < n;
        s.spill.used = false;
        return join_terms<BLOCK, C>(s, flags, mine, smem);
    }
#endif
};
template <class T> struct Run<ExactSum<T>> : ExactRun<ExactSum<T>> {};
template <class T> struct Run<ExactMean<T>> : ExactRun<ExactMean<T>> {};

// ExactSum or ExactMean (O) of a map's images (Mapped, ops.cuh): O's run on the images, so
// that the images go through the expansions as the elements of an array do. The default run
// lifted each image into a whole accumulator (64 or 368 bytes) and combined it. Whole
// arrays take the per-thread run and block_end (whole_run reads the input as the images'
// type), at the register budgets that run had before whole_run took its own: 64 (f64) and
// 72 (f32, halves).
template <class F, class O> struct MappedExactRun {
    typedef Run<O> R;
    typedef Mapped<F, O> Op;
    typedef typename R::State State;
    typedef typename O::Acc Acc;
    typedef typename O::In T;
    static constexpr int REGS = sizeof(T) == 8 ? 64 : 72;
    static __device__ __forceinline__ State start(const Op& op) { return R::start(op.o); }
    static __device__ __forceinline__ void add(const Op& op, State& s, typename F::In x, u64 i) {
        R::add(op.o, s, op.f(x, i), i);
    }
    template <int VEC>
    static __device__ __forceinline__ void add_all(const Op& op, State& s, const typename F::In (&v)[VEC], u64 p) {
        T m[VEC];
#pragma unroll
        for (int i = 0; i < VEC; ++i) m[i] = op.f(v[i], p + i);
        R::template add_all<VEC>(op.o, s, m, p);
    }
    static __device__ __forceinline__ Acc end(const Op& op, State s) { return R::end(op.o, s); }
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)  // (not in the host check)
    template <int BLOCK> static __device__ __forceinline__ Acc block_end(const Op& op, State& s, Acc* smem) {
        return R::template block_end<BLOCK>(op.o, s, smem);
    }
    template <int BLOCK>
    static __device__ __forceinline__ Acc join_partials(const Op& op, const Acc* p, u64 m, Acc* smem) {
        return R::template join_partials<BLOCK>(op.o, p, m, smem);
    }
    template <int BLOCK, int K, int VEC> static __host__ __device__ constexpr bool whole_fits() { return false; }
#endif
};
template <class F, class T> struct Run<Mapped<F, ExactSum<T>>> : MappedExactRun<F, ExactSum<T>> {};
template <class F, class T> struct Run<Mapped<F, ExactMean<T>>> : MappedExactRun<F, ExactMean<T>> {};

}  // namespace cf
