// CUB's segmented reductions by offsets (cub::DeviceSegmentedReduce::Sum, Max and ArgMax
// over f32, u64 CSR offsets) and its scan by key (cub::DeviceScan::InclusiveSumByKey with
// u32 key i on segment i, "cumsum_by_key": CUB has no segmented scan by offsets) on the offsets shapes of
// benches/gpu_segment.rs (the same splitmix64 lengths), timed as the bench times cufold:
// median of `reps` event-timed calls into preallocated outputs. For the device machine,
// where nvcc is there and Rust is not:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/cub_segments.cu -o /tmp/cub_segments
//   /tmp/cub_segments short,powerlaw,long_offsets,few_offsets,offsets_128,offsets_1k,offsets_4k,offsets_8k,offsets_16k,offsets_64k 20
//
// GB/s uses the bench's byte count for the same op and shape (input, offsets and outputs as
// cufold writes them: 16 bytes an argmax; the scan by key reads keys and values and writes
// the outputs, 12 bytes an element), so ratios of GB/s are ratios of time. CUB's own
// traffic differs for argmax, which writes 8 bytes a segment.
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>

#include "cub_shapes.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    const std::string shapes = argc > 1 ? argv[1] : "short,powerlaw,long_offsets,few_offsets,offsets_4k";
    const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# CUB %d.%d.%d DeviceSegmentedReduce and DeviceScan::InclusiveSumByKey on %s, median of %d calls\n",
                CUB_MAJOR_VERSION, CUB_MINOR_VERSION, CUB_SUBMINOR_VERSION, prop.name, reps);
    std::stringstream ss(shapes);
    std::string name;
    while (std::getline(ss, name, ',')) {
        const std::vector<uint64_t> lengths = lengths_of(name);
        const size_t segs = lengths.size();
        std::vector<uint64_t> offsets(segs + 1, 0);
        for (size_t i = 0; i < segs; ++i) offsets[i + 1] = offsets[i] + lengths[i];
        const size_t n = offsets[segs];
        std::vector<float> values(n);
        SplitMix r;
        for (auto& v : values) v = (float)((r.next() >> 40) * (1.0 / (1 << 24)));
        std::vector<uint32_t> keys(n);
        for (size_t i = 0; i < segs; ++i) std::fill(keys.begin() + offsets[i], keys.begin() + offsets[i + 1], (uint32_t)i);

        float *x, *sum, *max, *scan;
        uint64_t* o;
        uint32_t* k;
        cub::KeyValuePair<int, float>* arg;
        CHECK(cudaMalloc(&x, n * 4));
        CHECK(cudaMalloc(&scan, n * 4));
        CHECK(cudaMalloc(&k, n * 4));
        CHECK(cudaMalloc(&o, (segs + 1) * 8));
        CHECK(cudaMalloc(&sum, segs * 4));
        CHECK(cudaMalloc(&max, segs * 4));
        CHECK(cudaMalloc(&arg, segs * sizeof(*arg)));
        CHECK(cudaMemcpy(x, values.data(), n * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(k, keys.data(), n * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(o, offsets.data(), (segs + 1) * 8, cudaMemcpyHostToDevice));

        const int64_t ns = (int64_t)segs;
        const auto with_temp = [&](const std::function<cudaError_t(void*, size_t&)>& f) {
            size_t bytes = 0;
            CHECK(f(nullptr, bytes));
            void* temp = nullptr;
            CHECK(cudaMalloc(&temp, std::max<size_t>(bytes, 1)));
            return std::make_pair(temp, bytes);
        };
        struct Op {
            const char* name;
            size_t out_bytes;  // a segment's output, as cufold writes it
            std::function<cudaError_t(void*, size_t&)> f;
        };
        const Op ops[] = {
            {"sum", 4, [&](void* t, size_t& b) { return cub::DeviceSegmentedReduce::Sum(t, b, x, sum, ns, o, o + 1); }},
            {"max", 4, [&](void* t, size_t& b) { return cub::DeviceSegmentedReduce::Max(t, b, x, max, ns, o, o + 1); }},
            {"argmax", 16,
             [&](void* t, size_t& b) { return cub::DeviceSegmentedReduce::ArgMax(t, b, x, arg, ns, o, o + 1); }},
            {"cumsum_by_key", 0,
             [&](void* t, size_t& b) { return cub::DeviceScan::InclusiveSumByKey(t, b, k, x, scan, (int64_t)n); }},
        };
        for (const Op& op : ops) {
            const std::pair<void*, size_t> scratch = with_temp(op.f);
            void* temp = scratch.first;
            const double ms = median_ms(reps, [&]() {
                size_t b = scratch.second;
                return op.f(temp, b);
            });
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaFree(temp));
            const double traffic = std::string(op.name) == "cumsum_by_key"
                                       ? (double)n * 12
                                       : (double)n * 4 + (double)(segs + 1) * 8 + (double)segs * op.out_bytes;
            std::printf("cub     %-13s %-12s %9zu segs %11zu elems %9.4f ms %8.1f GB/s\n", op.name, name.c_str(), segs, n, ms,
                        traffic / (ms * 1e-3) / 1e9);
        }

        // The results beside a CPU loop: max and argmax exact, sums and the scan's last
        // position of each segment within 1e-3 of the segment's sum in double.
        std::vector<float> s(segs), m(segs), y(n);
        std::vector<cub::KeyValuePair<int, float>> a(segs);
        CHECK(cudaMemcpy(s.data(), sum, segs * 4, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(m.data(), max, segs * 4, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(a.data(), arg, segs * sizeof(a[0]), cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(y.data(), scan, n * 4, cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (size_t i = 0; i < segs; ++i) {
            double want = 0;
            float best = -INFINITY;
            int at = 0;
            for (uint64_t p = offsets[i]; p < offsets[i + 1]; ++p) {
                want += values[p];
                if (values[p] > best) best = values[p], at = (int)(p - offsets[i]);
            }
            const double tol = 1e-3 * std::max(1.0, want);
            const bool ok = std::fabs(s[i] - want) <= tol && m[i] == best && a[i].key == at && a[i].value == best &&
                            std::fabs(y[offsets[i + 1] - 1] - want) <= tol;
            bad += !ok;
        }
        if (bad) std::printf("MISMATCH %s: %zu segments differ from the CPU loop\n", name.c_str(), bad);
        CHECK(cudaFree(x));
        CHECK(cudaFree(scan));
        CHECK(cudaFree(k));
        CHECK(cudaFree(o));
        CHECK(cudaFree(sum));
        CHECK(cudaFree(max));
        CHECK(cudaFree(arg));
    }
    return 0;
}
