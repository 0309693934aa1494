// CUB's sums beside cufold's ExactSum: cub::DeviceReduce::Sum (the classic two-phase call) and,
// where CCCL has it (3.1 on), the gpu_to_gpu deterministic Sum of its environment API, each
// timed and set against the exact sum of the same device data. For the device machine:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/cub_exact.cu -o /tmp/cub_exact
//   /tmp/cub_exact f32|f64 LOG2 uniform|normal|wide|illcond REPS   (comma lists run each)
//
// One line a measurement, as scripts/exact_peers.py prints them ('#' lines are comments):
//   cub      sum      f32  uniform  2^28    0.1234 ms  2950.0 GB/s  rel err 3.1e-07  ulps +0
// op "sum" is the classic call (temp storage allocated once, outside the timing); "sum_g2g" is
// Sum(d_in, d_out, num_items, cuda::execution::require(cuda::execution::determinism::gpu_to_gpu)),
// timed as called, so with the temp storage CCCL allocates and frees in each call (stream-ordered
// cudaMallocAsync). Time: median of REPS calls between CUDA events, after 5 warm-up calls;
// GB/s = n * size / time; rel err = |result - exact| / |exact|; ulps = (result - exact rounded to
// the dtype) / its ulp, 0 for a correctly rounded sum.
//
// Data as exact_peers.py describes it (same distributions, not the same numbers), drawn on the
// device from splitmix64 of the element's counter: uniform [0, 1); normal by Box-Muller; wide:
// random signs, exponents uniform over +-100 (f32) or +-600 (f64), random significand bits;
// illcond: a = +-2^k (1 + f), k uniform in [0, L], L = 41 (f32) or 101 (f64), and b = -(a + u),
// u in [0, 1), pairs scattered by a bijective hash of the index; condition number near 1e12 or
// 1e30 (printed). The exact sum: each element is m * 2^(e - p), |m| < 2^p an integer (frexp);
// |m| in two pieces (26 low bits, the rest) summed per exponent as 64-bit integers (shared-memory
// then global atomics; below 2^57 for n <= 2^30), combined on the host in a two's complement
// integer of 32-bit limbs.
#include <cub/device/device_reduce.cuh>

#if defined(CCCL_VERSION) && CCCL_VERSION >= 3001000 && __has_include(<cuda/__execution/determinism.h>)
#  include <cuda/__execution/determinism.h>
#  include <cuda/__execution/require.h>
#  define HAVE_GPU_TO_GPU 1
#else
#  define HAVE_GPU_TO_GPU 0
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cub_shapes.cuh"  // CHECK, median_ms

// p: significand bits; frexp's exponent range for finite values (subnormals too); nmin: least
// normal binade; wide: the wide data's exponent bound; L: illcond's top exponent.
template <class T> struct Fmt;
template <> struct Fmt<float> {
    static constexpr int p = 24, emin = -148, emax = 128, nmin = -126, mbits = 23, ebias = 127, wide = 100, L = 41;
};
template <> struct Fmt<double> {
    static constexpr int p = 53, emin = -1073, emax = 1024, nmin = -1022, mbits = 52, ebias = 1023, wide = 600, L = 101;
};
constexpr int PIECE = 26;
enum Kind { UNIFORM, NORMAL, WIDE, ILLCOND };

__device__ inline uint64_t rnd(uint64_t seed, uint64_t k) {  // splitmix64's k-th output
    uint64_t z = seed + (k + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
template <class T> __device__ T unit(uint64_t r);  // uniform in [0, 1)
template <> __device__ float unit<float>(uint64_t r) { return (float)(r >> 40) * 0x1p-24f; }
template <> __device__ double unit<double>(uint64_t r) { return (double)(r >> 11) * 0x1p-53; }
__device__ float from_bits(uint64_t b, float) { return __uint_as_float((uint32_t)b); }
__device__ double from_bits(uint64_t b, double) { return __longlong_as_double((long long)b); }
__device__ float dfrexp(float v, int* e) { return frexpf(v, e); }
__device__ double dfrexp(double v, int* e) { return frexp(v, e); }

// +-2^k (1 + f), k uniform in [lo, hi], f's bits uniform: element k of a stream of 4 a counter.
template <class T> __device__ T signed_pow(uint64_t seed, uint64_t k, int lo, int hi) {
    const uint64_t r0 = rnd(seed, 4 * k), r1 = rnd(seed, 4 * k + 1);
    const int e = lo + (int)(r0 % (uint64_t)(hi - lo + 1));
    const uint64_t bits = ((uint64_t)(e + Fmt<T>::ebias) << Fmt<T>::mbits) | (r1 & ((1ull << Fmt<T>::mbits) - 1));
    const T v = from_bits(bits, T{});
    return (r1 >> 63) ? -v : v;
}

// A bijection of [0, 2^lg): odd multiplies, adds and xor-shifts, each invertible mod 2^lg.
__device__ uint64_t scatter(uint64_t i, int lg, uint64_t seed) {
    const uint64_t mask = lg >= 64 ? ~0ull : (1ull << lg) - 1;
    const uint64_t mul[3] = {0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull};
    const int s = (lg + 1) / 2;
    for (int r = 0; r < 3; ++r) {
        i = (i * mul[r] + seed) & mask;
        i ^= i >> s;
    }
    return i;
}

template <class T> __global__ void generate(T* x, uint64_t n, int lg, int kind, uint64_t seed) {
    using F = Fmt<T>;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        T v;
        if (kind == UNIFORM) {
            v = unit<T>(rnd(seed, 4 * i));
        } else if (kind == NORMAL) {
            const double u1 = ((double)(rnd(seed, 4 * i) >> 11) + 0.5) * 0x1p-53, u2 = unit<double>(rnd(seed, 4 * i + 1));
            v = (T)(sqrt(-2.0 * log(u1)) * cospi(2.0 * u2));
        } else if (kind == WIDE) {
            v = signed_pow<T>(seed, i, -F::wide, F::wide);
        } else {  // ILLCOND: position i holds a_j (j < n/2) or b_j = -(a_j + u_j)
            uint64_t j = scatter(i, lg, seed);
            const bool second = j >= n / 2;
            if (second) j -= n / 2;
            const T a = signed_pow<T>(seed, j, 0, F::L);
            v = second ? -(a + unit<T>(rnd(seed, 4 * j + 2))) : a;
        }
        x[i] = v;
    }
}

// Per-exponent sums of the significands' pieces (hi: |m| >> 26, lo: the low 26 bits, signed),
// and sum |x| (for the condition number).
template <class T>
__global__ void exact_buckets(const T* x, uint64_t n, unsigned long long* hi, unsigned long long* lo, double* l1) {
    using F = Fmt<T>;
    constexpr int NB = F::emax - F::emin + 1;
    __shared__ unsigned long long sh[2 * NB];
    for (int b = threadIdx.x; b < 2 * NB; b += blockDim.x) sh[b] = 0;
    __syncthreads();
    double a1 = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const T v = x[i];
        int e;
        const long long m = (long long)(dfrexp(v, &e) * (T)(1ull << F::p));  // exact, |m| < 2^p
        const unsigned long long am = m < 0 ? -m : m;
        const long long h = (long long)(am >> PIECE), l = (long long)(am & ((1ull << PIECE) - 1));
        const int b = e - F::emin;
        if (h) atomicAdd(&sh[b], (unsigned long long)(m < 0 ? -h : h));
        if (l) atomicAdd(&sh[NB + b], (unsigned long long)(m < 0 ? -l : l));
        a1 += fabs((double)v);
    }
    for (int o = 16; o > 0; o /= 2) a1 += __shfl_down_sync(0xffffffffu, a1, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(l1, a1);
    __syncthreads();
    for (int b = threadIdx.x; b < NB; b += blockDim.x) {
        if (sh[b]) atomicAdd(&hi[b], sh[b]);
        if (sh[NB + b]) atomicAdd(&lo[b], sh[NB + b]);
    }
}

// A two's complement integer of W 32-bit limbs (2304 bits: the sum in units of 2^(emin - p)
// needs under 2200).
constexpr int W = 72;
struct Big {
    uint32_t l[W] = {};
};
static void add(Big& a, __int128 v, int shift) {  // a += v * 2^shift, |v| < 2^95
    const int k = shift / 32;
    v *= (__int128)1 << (shift % 32);
    uint64_t carry = 0;
    for (int i = k; i < W; ++i) {
        const uint32_t limb = i - k < 4 ? (uint32_t)(v >> (32 * (i - k))) : (v < 0 ? 0xffffffffu : 0u);
        const uint64_t s = (uint64_t)a.l[i] + limb + carry;
        a.l[i] = (uint32_t)s;
        carry = s >> 32;
    }
}
static bool negative(const Big& a) { return a.l[W - 1] >> 31; }
static Big negate(Big a) {
    uint64_t c = 1;
    for (auto& x : a.l) { const uint64_t s = (uint64_t)(uint32_t)~x + c; x = (uint32_t)s; c = s >> 32; }
    return a;
}
static Big magnitude(const Big& a) { return negative(a) ? negate(a) : a; }
static Big sub(Big a, const Big& b) {
    const Big nb = negate(b);
    uint64_t c = 0;
    for (int i = 0; i < W; ++i) { const uint64_t s = (uint64_t)a.l[i] + nb.l[i] + c; a.l[i] = (uint32_t)s; c = s >> 32; }
    return a;
}
static int top_bit(const Big& m) {  // of a magnitude; -1 for zero
    for (int i = W - 1; i >= 0; --i)
        if (m.l[i]) return 32 * i + 31 - __builtin_clz(m.l[i]);
    return -1;
}
static int bit(const Big& m, int i) { return (m.l[i / 32] >> (i % 32)) & 1; }
static double approx(const Big& m, int& e2) {  // a magnitude as d * 2^e2 (d exact to a double)
    const int t = std::max(top_bit(m) / 32, 2);
    e2 = 32 * (t - 2);
    return std::ldexp((double)m.l[t], 64) + std::ldexp((double)m.l[t - 1], 32) + (double)m.l[t - 2];
}
static double to_double(const Big& a, int scale) {  // a * 2^scale
    int e;
    const double d = approx(magnitude(a), e);
    return std::ldexp(negative(a) ? -d : d, e + scale);
}

// The exact sum rounded to nearest even in T, in the same units, and its ulp as 2^s units.
template <class T> static Big round_exact(const Big& t, int& s) {
    using F = Fmt<T>;
    const Big a = magnitude(t);
    const int h = top_bit(a);
    const int E = h < 0 ? F::nmin : h + F::emin - F::p;  // floor(log2 |value|)
    s = std::max(E, F::nmin) + 1 - F::emin;
    Big q;
    if (h < s - 1) return q;  // below half an ulp of the least normal's: rounds to 0
    uint64_t m = 0;
    for (int i = h; i >= s; --i) m = (m << 1) | bit(a, i);
    bool sticky = false;
    for (int i = 0; i < s - 1 && !sticky; ++i) sticky = bit(a, i);
    if (bit(a, s - 1) && (sticky || (m & 1))) ++m;
    add(q, negative(t) ? -(__int128)m : (__int128)m, s);
    return q;
}

template <class T> struct Errors { double rel, ulps; };
template <class T> static Errors<T> errors(T r, const Big& exact) {
    using F = Fmt<T>;
    if (!std::isfinite(r)) return {INFINITY, INFINITY};
    Big R;
    int e;
    const T fr = std::frexp(r, &e);
    if (r != 0) add(R, (long long)(fr * (T)(1ull << F::p)), e - F::emin);
    const Big D = magnitude(sub(R, exact)), X = magnitude(exact);
    double rel;
    if (top_bit(X) < 0) rel = top_bit(D) < 0 ? 0.0 : INFINITY;
    else {
        int ed, ex;
        const double dd = approx(D, ed), dx = approx(X, ex);
        rel = std::ldexp(dd / dx, ed - ex);
    }
    int s;
    const Big Q = round_exact<T>(exact, s);
    return {rel, to_double(sub(R, Q), -s)};
}

template <class T> static void run(const char* dname, int lg, const std::string& kind_name, int reps) {
    using F = Fmt<T>;
    constexpr int NB = F::emax - F::emin + 1;
    const int kind = kind_name == "uniform" ? UNIFORM : kind_name == "normal" ? NORMAL : kind_name == "wide" ? WIDE
                   : kind_name == "illcond" ? ILLCOND : -1;
    if (kind < 0 || lg < 1 || lg > 30) {
        std::fprintf(stderr, "unknown data %s or log2 %d outside 1..30\n", kind_name.c_str(), lg);
        std::exit(2);
    }
    const uint64_t n = 1ull << lg;
    T *x, *out;
    unsigned long long *hi, *lo;
    double* l1;
    CHECK(cudaMalloc(&x, n * sizeof(T)));
    CHECK(cudaMalloc(&out, sizeof(T)));
    CHECK(cudaMalloc(&hi, NB * 8));
    CHECK(cudaMalloc(&lo, NB * 8));
    CHECK(cudaMalloc(&l1, 8));
    CHECK(cudaMemset(hi, 0, NB * 8));
    CHECK(cudaMemset(lo, 0, NB * 8));
    CHECK(cudaMemset(l1, 0, 8));
    const uint64_t seed = 0x5eedull * 1000003u + (uint64_t)(lg * 16 + kind * 2 + (sizeof(T) == 8));
    generate<T><<<2048, 256>>>(x, n, lg, kind, seed);
    CHECK(cudaGetLastError());
    exact_buckets<T><<<1024, 256>>>(x, n, hi, lo, l1);
    CHECK(cudaGetLastError());
    std::vector<long long> h(NB), l(NB);
    double sum_abs;
    CHECK(cudaMemcpy(h.data(), hi, NB * 8, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(l.data(), lo, NB * 8, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&sum_abs, l1, 8, cudaMemcpyDeviceToHost));
    Big exact;  // in units of 2^(emin - p)
    for (int b = 0; b < NB; ++b) {
        add(exact, h[b], b + PIECE);
        add(exact, l[b], b);
    }
    const double ex = to_double(exact, F::emin - F::p);
    std::printf("# %s %s 2^%d: exact sum %.17g, condition number %.3g\n", dname, kind_name.c_str(), lg, ex,
                sum_abs / std::fabs(ex));

    const auto report = [&](const char* op, float ms) {
        T r;
        CHECK(cudaMemcpy(&r, out, sizeof(T), cudaMemcpyDeviceToHost));
        const Errors<T> er = errors<T>(r, exact);
        std::printf("%-8s %-8s %-4s %-8s 2^%-3d %8.4f ms %7.1f GB/s  rel err %.1e  ulps %+.3g\n", "cub", op, dname,
                    kind_name.c_str(), lg, ms, n * sizeof(T) / (ms * 1e-3) / 1e9, er.rel, er.ulps);
        std::fflush(stdout);
    };
    const int num = (int)n;  // 32-bit offsets: the deterministic path requires them
    size_t bytes = 0;
    CHECK(cub::DeviceReduce::Sum(nullptr, bytes, x, out, num));
    void* temp;
    CHECK(cudaMalloc(&temp, std::max<size_t>(bytes, 1)));
    report("sum", median_ms(reps, [&] { return cub::DeviceReduce::Sum(temp, bytes, x, out, num); }));
    CHECK(cudaFree(temp));
#if HAVE_GPU_TO_GPU
    const auto env = cuda::execution::require(cuda::execution::determinism::gpu_to_gpu);
    report("sum_g2g", median_ms(reps, [&] { return cub::DeviceReduce::Sum(x, out, num, env); }));
#endif
    CHECK(cudaFree(x));
    CHECK(cudaFree(out));
    CHECK(cudaFree(hi));
    CHECK(cudaFree(lo));
    CHECK(cudaFree(l1));
}

static std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> v;
    std::stringstream ss(s);
    for (std::string t; std::getline(ss, t, ',');) v.push_back(t);
    return v;
}

int main(int argc, char** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s f32|f64 LOG2 uniform|normal|wide|illcond REPS (comma lists allowed)\n", argv[0]);
        return 2;
    }
    const int reps = std::max(1, std::atoi(argv[4]));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# CUB %d.%d.%d DeviceReduce::Sum on %s, median of %d calls\n", CUB_MAJOR_VERSION,
                CUB_MINOR_VERSION, CUB_SUBMINOR_VERSION, prop.name, reps);
#if !HAVE_GPU_TO_GPU
    std::printf("# gpu_to_gpu: not available in this CCCL\n");
#endif
    for (const auto& d : split(argv[1]))
        for (const auto& lg : split(argv[2]))
            for (const auto& kind : split(argv[3])) {
                if (d == "f32") run<float>("f32", std::atoi(lg.c_str()), kind, reps);
                else if (d == "f64") run<double>("f64", std::atoi(lg.c_str()), kind, reps);
                else { std::fprintf(stderr, "unknown dtype %s\n", d.c_str()); return 2; }
            }
    return 0;
}
