// CUB's reduction by key (cub::DeviceReduce::ReduceByKey, Sum of f32 values over u32 keys)
// on the shapes of benches/gpu_segment.rs (the same splitmix64 lengths), timed as the bench
// times cufold: median of `reps` event-timed calls into preallocated outputs. For the
// device machine, where nvcc is there and Rust is not:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/cub_by_key.cu -o /tmp/cub_by_key
//   /tmp/cub_by_key short,powerlaw,narrow,mid,wide,square,long 20
//
// Prints, per shape: runs, elements, ms, and GB/s counting keys and values read and the
// keys, sums and lengths of the runs written once (the bench's count, so that the columns
// compare; CUB writes no lengths, so its own traffic is 8 bytes a run less).
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>

#include "cub_shapes.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    const std::string shapes = argc > 1 ? argv[1] : "short,powerlaw,narrow,mid,wide,square,long";
    const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# CUB %d.%d.%d DeviceReduce::ReduceByKey on %s, median of %d event-timed calls\n",
                CUB_MAJOR_VERSION, CUB_MINOR_VERSION, CUB_SUBMINOR_VERSION, prop.name, reps);
    std::stringstream ss(shapes);
    std::string name;
    while (std::getline(ss, name, ',')) {
        const std::vector<uint64_t> lengths = lengths_of(name);
        std::vector<uint32_t> keys;
        for (size_t i = 0; i < lengths.size(); ++i) keys.insert(keys.end(), lengths[i], (uint32_t)i);
        const size_t n = keys.size(), runs = lengths.size();
        std::vector<float> values(n);
        SplitMix r;
        for (auto& v : values) v = (float)((r.next() >> 40) * (1.0 / (1 << 24)));
        uint32_t *k, *k_out;
        float *x, *v_out;
        uint64_t* count;
        CHECK(cudaMalloc(&k, n * 4));
        CHECK(cudaMalloc(&x, n * 4));
        CHECK(cudaMalloc(&k_out, n * 4));
        CHECK(cudaMalloc(&v_out, n * 4));
        CHECK(cudaMalloc(&count, 8));
        CHECK(cudaMemcpy(k, keys.data(), n * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(x, values.data(), n * 4, cudaMemcpyHostToDevice));
        size_t temp_bytes = 0;
        void* temp = nullptr;
        const auto call = [&]() {
            return cub::DeviceReduce::ReduceByKey(temp, temp_bytes, k, k_out, x, v_out, count,
                                                  cuda::std::plus<float>{}, (int64_t)n);
        };
        CHECK(call());
        CHECK(cudaMalloc(&temp, temp_bytes));
        CHECK(call());
        uint64_t got = 0;
        CHECK(cudaMemcpy(&got, count, 8, cudaMemcpyDeviceToHost));
        if (got != runs) std::printf("MISMATCH %s: %llu runs, want %zu\n", name.c_str(), (unsigned long long)got, runs);
        const double med = median_ms(reps, call);
        const double bytes = (double)n * 8 + (double)runs * (4 + 4 + 8);
        std::printf("cub     reduce_by_key   %-9s %9zu runs %11zu elems %9.4f ms %8.1f GB/s\n", name.c_str(), runs, n, med,
                    bytes / (med * 1e-3) / 1e9);
        CHECK(cudaFree(temp));
        CHECK(cudaFree(k));
        CHECK(cudaFree(x));
        CHECK(cudaFree(k_out));
        CHECK(cudaFree(v_out));
        CHECK(cudaFree(count));
    }
    return 0;
}
