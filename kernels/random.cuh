// cufold: counter-based random numbers (Philox4x32-10), the CUDA twin of src/random.rs.
//
// Philox4x32-10 is the generator of Salmon, Moraes, Dror and Shaw, "Parallel random
// numbers: as easy as 1, 2, 3" (SC11), as in Random123, cuRAND's Philox, JAX and PyTorch's
// CUDA generator: a keyed bijection of a 128-bit counter, so any value of any stream can be
// computed directly, in any thread, in any order. Every value below depends on (seed,
// sample, draw) alone, never on the launch shape, and the Rust half computes the same bits.
//
// Stream layout. Seed s (64 bits), sample i (64 bits), block b (32 bits):
//     block(s, i, b) = philox4x32_10(counter = {lo32(i), hi32(i), b, 0},
//                                    key     = {lo32(s), hi32(s)})       -> 4 words w[0..4)
//   u32 draw j:     word j % 4 of block j / 4
//   f32 uniform j:  open01_f32(u32 draw j)                  (4 per block)
//   f64 uniform j:  open01_f64(lo = w[2(j % 2)], hi = w[2(j % 2) + 1]) of block j / 2
//                                                            (2 per block)
//   normal j (T = float or double): Box-Muller on the T uniforms 2(j / 2) and 2(j / 2) + 1;
//     r = sqrt(-2 ln u1), t = 2pi * u2; draw j is r cos t for even j, r sin t for odd j.
//   So draw j of every kind of one type lies in the same block (j / 4 for f32, j / 2 for
//   f64): kinds that share draw indices share bits. A kernel that needs several kinds for
//   one sample gives them disjoint draw ranges (the `first` argument of the helpers).
//
// Uniforms are in the open interval (0, 1), exactly, on every device:
//   open01_f32(w)      = ((w >> 8) | 1) * 2^-24 = ((w >> 9) + 0.5) * 2^-23:
//                        2^23 values, the centres of equal cells; smallest 2^-24
//                        (5.96e-8), largest 1 - 2^-24 (0.99999994, the largest float < 1).
//   open01_f64(lo, hi) = ((x >> 11) | 1) * 2^-53 with x = hi * 2^32 + lo:
//                        2^52 values; smallest 2^-53 (1.1e-16), largest 1 - 2^-53 (the
//                        largest double < 1).
//   The odd integer is below 2^24 (2^53), so its conversion and the scaling by a power of
//   two are exact: no rounding can reach 0 or 1, and contraction cannot change the bits.
//   (((w >> 8) + 0.5) * 2^-24 would need 25 bits and round 2^24 - 0.5 up to 1.)
//
// Uniforms (and the words) agree with the Rust half bit for bit. Normals use ln, sqrt,
// sin and cos: sqrt is correctly rounded on both sides, but CUDA's logf/log are within 1
// ulp and sinf/cosf/sin/cos within 2 ulps, the host's libm within about 1, so a GPU normal
// is within 16 ulps of the Rust one (relative difference below 2^-20 for float, 2^-49 for
// double); on the host, with the same libm, they are identical. This needs the precise
// math functions: do not compile with --use_fast_math (cufold never does).
//
// Also compiled as host C++ (tests/host_cxx.rs) with __device__ and __forceinline__
// defined away and __umulhi provided: nothing here is device-only.
#pragma once

namespace cf {

typedef unsigned long long u64;  // as in types.cuh; a repeated identical typedef is legal

// Four 32-bit words: a Philox counter block's output.
struct PhiloxBlock { unsigned w[4]; };

// One Philox4x32 round (Random123's _philox4x32round).
__device__ __forceinline__ void philox4x32_round(unsigned (&c)[4], unsigned k0, unsigned k1) {
    const unsigned m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
    const unsigned hi0 = __umulhi(m0, c[0]), lo0 = m0 * c[0];
    const unsigned hi1 = __umulhi(m1, c[2]), lo1 = m1 * c[2];
    const unsigned x0 = hi1 ^ c[1] ^ k0, x2 = hi0 ^ c[3] ^ k1;
    c[0] = x0;
    c[1] = lo1;
    c[2] = x2;
    c[3] = lo0;
}

// Philox4x32-10: ten rounds, the key bumped by the Weyl constants (0x9E3779B9, 0xBB67AE85)
// before each round after the first, as in Random123's philox4x32_R(10, ctr, key).
__device__ __forceinline__ PhiloxBlock philox4x32_10(const unsigned (&ctr)[4], const unsigned (&key)[2]) {
    unsigned c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    unsigned k0 = key[0], k1 = key[1];
    philox4x32_round(c, k0, k1);
#pragma unroll
    for (int r = 1; r < 10; ++r) {
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
        philox4x32_round(c, k0, k1);
    }
    PhiloxBlock out = {{c[0], c[1], c[2], c[3]}};
    return out;
}

// Block b of sample i of the stream with seed s (the layout above).
__device__ __forceinline__ PhiloxBlock philox_block(u64 seed, u64 sample, unsigned block) {
    const unsigned ctr[4] = {(unsigned)sample, (unsigned)(sample >> 32), block, 0u};
    const unsigned key[2] = {(unsigned)seed, (unsigned)(seed >> 32)};
    return philox4x32_10(ctr, key);
}

// Word k (0..3) of a block, by selects rather than a dynamic index (which would put the
// block in local memory on the device).
__device__ __forceinline__ unsigned philox_pick(const PhiloxBlock& b, unsigned k) {
    return k == 0 ? b.w[0] : k == 1 ? b.w[1] : k == 2 ? b.w[2] : b.w[3];
}

// u32 draw j of sample i: word j % 4 of block j / 4.
__device__ __forceinline__ unsigned random_u32(u64 seed, u64 sample, unsigned draw) {
    return philox_pick(philox_block(seed, sample, draw >> 2), draw & 3u);
}

// ((w >> 8) | 1) * 2^-24: in (0, 1), from 2^-24 to 1 - 2^-24. Computed without an
// integer-to-float conversion: with a = w >> 9, the float 1 + a 2^-23 (a's bits under the
// exponent of 1) plus -(1 - 2^-24) is (2a + 1) 2^-24 = ((w >> 8) | 1) 2^-24, exact (it has 24
// significant bits at most), so one shift, one or and one add give the same bits.
__device__ __forceinline__ float open01_f32(unsigned w) {
    return __uint_as_float(0x3f800000u | (w >> 9)) + -0.999999940395355224609375f;  // -(1 - 2^-24)
}

// ((x >> 11) | 1) * 2^-53 with x = hi * 2^32 + lo: in (0, 1), from 2^-53 to 1 - 2^-53. As for
// float: 1 + (x >> 12) 2^-52 plus -(1 - 2^-53) is exactly ((x >> 11) | 1) 2^-53.
__device__ __forceinline__ double open01_f64(unsigned lo, unsigned hi) {
    const u64 x = ((u64)hi << 32) | (u64)lo;
    return __longlong_as_double((long long)(0x3ff0000000000000ull | (x >> 12))) +
           -0.99999999999999988897769753748434595763683319091796875;  // -(1 - 2^-53)
}

// Per-type layout: how many uniforms a block holds, and uniform k (0 .. PER_BLOCK) of it.
template <class T> struct RandomLayout;
template <> struct RandomLayout<float> {
    enum { PER_BLOCK = 4 };
    static __device__ __forceinline__ float uniform(const PhiloxBlock& b, unsigned k) {
        return open01_f32(philox_pick(b, k));
    }
};
template <> struct RandomLayout<double> {
    enum { PER_BLOCK = 2 };
    static __device__ __forceinline__ double uniform(const PhiloxBlock& b, unsigned k) {
        return k == 0 ? open01_f64(b.w[0], b.w[1]) : open01_f64(b.w[2], b.w[3]);
    }
};

// Box-Muller: r = sqrt(-2 ln u1), t = 2pi * u2 (2pi rounded to the type);
// z0 = r cos t, z1 = r sin t. u1 > 0, so r is finite: |z| <= 5.8 (float), 8.6 (double).
__device__ __forceinline__ void box_muller(float u1, float u2, float& z0, float& z1) {
    const float r = ::sqrtf(-2.0f * ::logf(u1));
    const float t = 6.28318530717958647692f * u2;
    z0 = r * ::cosf(t);
    z1 = r * ::sinf(t);
}
__device__ __forceinline__ void box_muller(double u1, double u2, double& z0, double& z1) {
    const double r = ::sqrt(-2.0 * ::log(u1));
    const double t = 6.28318530717958647692 * u2;
    z0 = r * ::cos(t);
    z1 = r * ::sin(t);
}

// Uniform draw j of sample i, as T (float or double).
template <class T> __device__ __forceinline__ T uniform(u64 seed, u64 sample, unsigned draw) {
    typedef RandomLayout<T> L;
    const PhiloxBlock b = philox_block(seed, sample, draw / (unsigned)L::PER_BLOCK);
    return L::uniform(b, draw % (unsigned)L::PER_BLOCK);
}

// Standard normal draw j of sample i, as T: Box-Muller on the uniforms 2(j/2), 2(j/2) + 1
// (one block: the pair never straddles two); cos for even j, sin for odd j.
template <class T> __device__ __forceinline__ T normal(u64 seed, u64 sample, unsigned draw) {
    typedef RandomLayout<T> L;
    const unsigned u = draw & ~1u;  // the pair's first uniform
    const PhiloxBlock b = philox_block(seed, sample, u / (unsigned)L::PER_BLOCK);
    const unsigned k = u % (unsigned)L::PER_BLOCK;
    T z0, z1;
    box_muller(L::uniform(b, k), L::uniform(b, k + 1), z0, z1);
    return (draw & 1u) ? z1 : z0;
}

__device__ __forceinline__ float uniform_f32(u64 seed, u64 sample, unsigned draw) { return uniform<float>(seed, sample, draw); }
__device__ __forceinline__ double uniform_f64(u64 seed, u64 sample, unsigned draw) { return uniform<double>(seed, sample, draw); }
__device__ __forceinline__ float normal_f32(u64 seed, u64 sample, unsigned draw) { return normal<float>(seed, sample, draw); }
__device__ __forceinline__ double normal_f64(u64 seed, u64 sample, unsigned draw) { return normal<double>(seed, sample, draw); }

// out[k] = uniform<T>(seed, sample, first + k) for k < D, one Philox call per block.
template <class T, int D>
__device__ __forceinline__ void draw_uniform(u64 seed, u64 sample, T (&out)[D], unsigned first = 0) {
    typedef RandomLayout<T> L;
    PhiloxBlock b = philox_block(seed, sample, first / (unsigned)L::PER_BLOCK);
#pragma unroll
    for (int k = 0; k < D; ++k) {
        const unsigned j = first + (unsigned)k;
        const unsigned slot = j % (unsigned)L::PER_BLOCK;
        if (k > 0 && slot == 0) b = philox_block(seed, sample, j / (unsigned)L::PER_BLOCK);
        out[k] = L::uniform(b, slot);
    }
}

// out[k] = normal<T>(seed, sample, first + k) for k < D, one Box-Muller per pair (and one
// Philox call per block).
template <class T, int D>
__device__ __forceinline__ void draw_normal(u64 seed, u64 sample, T (&out)[D], unsigned first = 0) {
    typedef RandomLayout<T> L;
    PhiloxBlock b = philox_block(seed, sample, (first & ~1u) / (unsigned)L::PER_BLOCK);
    T z0 = 0, z1 = 0;
#pragma unroll
    for (int k = 0; k < D; ++k) {
        const unsigned j = first + (unsigned)k;
        if (k == 0 || (j & 1u) == 0) {
            const unsigned u = j & ~1u;
            const unsigned slot = u % (unsigned)L::PER_BLOCK;
            if (k > 0 && slot == 0) b = philox_block(seed, sample, u / (unsigned)L::PER_BLOCK);
            box_muller(L::uniform(b, slot), L::uniform(b, slot + 1), z0, z1);
        }
        out[k] = (j & 1u) ? z1 : z0;
    }
}

}  // namespace cf
