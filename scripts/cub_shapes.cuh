// The shapes of benches/gpu_segment.rs for the CUB scripts beside it (cub_by_key.cu,
// cub_segments.cu): each shape's segment lengths from the bench's splitmix64 stream, so that
// CUB runs on the same lengths as cufold, the scripts' CUDA error check, and their timing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CHECK(x)                                                                            \
    do {                                                                                    \
        cudaError_t e = (x);                                                                \
        if (e != cudaSuccess) {                                                             \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
            std::exit(1);                                                                   \
        }                                                                                   \
    } while (0)

// The bench's splitmix64 stream from its seed 0x5eed (lengths, then the values in each
// script).
struct SplitMix {
    uint64_t state = 0x5eed;
    uint64_t next() {
        state += 0x9e3779b97f4a7c15ull;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
};

// The segment lengths of the bench's shape `name` (rows as equal lengths, packed).
static std::vector<uint64_t> lengths_of(const std::string& name) {
    SplitMix r;
    std::vector<uint64_t> l;
    const auto same = [&](uint64_t count, uint64_t len) { l.assign(count, len); };
    if (name == "short") {
        for (int i = 0; i < (1 << 24); ++i) l.push_back(4 + r.next() % 29);
    } else if (name == "powerlaw") {
        uint64_t total = 0;
        while (total < (1ull << 26)) {
            const double u = ((double)(r.next() >> 11) + 0.5) / (double)(1ull << 53);
            const uint64_t x = std::clamp<uint64_t>((uint64_t)std::floor(std::pow(u, -1.0 / 1.2)), 1, 1ull << 22);
            l.push_back(x);
            total += x;
        }
    } else if (name == "square") same(1 << 14, 1 << 14);
    else if (name == "long") same(16, 1 << 24);
    else if (name == "mid") same(1 << 18, 1 << 10);
    else if (name == "wide") same(1 << 15, 1 << 13);
    else if (name == "narrow") same(1 << 21, 1 << 7);
    else if (name == "long_offsets") same(16, 1ull << 24);
    else if (name == "few_offsets") same(512, 1ull << 19);
    else if (name == "offsets_128") same(1 << 21, 1ull << 7);
    else if (name == "offsets_1k") same(1 << 18, 1ull << 10);
    else if (name == "offsets_4k") same(1 << 16, 1ull << 12);
    else if (name == "offsets_8k") same(1 << 15, 1ull << 13);
    else if (name == "offsets_16k") same(1 << 14, 1ull << 14);
    else if (name == "offsets_64k") same(1 << 12, 1ull << 16);
    else {
        std::fprintf(stderr, "unknown shape %s\n", name.c_str());
        std::exit(2);
    }
    return l;
}

// The median of `reps` event-timed runs of `call` (after three untimed ones), in ms: how the
// bench times cufold.
inline double median_ms(int reps, const std::function<cudaError_t()>& call) {
    for (int i = 0; i < 3; ++i) CHECK(call());
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) {
        CHECK(cudaEventRecord(a));
        CHECK(call());
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float t = 0;
        CHECK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}
