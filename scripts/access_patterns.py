#!/usr/bin/env python3
"""Micro-benchmark of access patterns on the GPU (CuPy): a device copy of 2^28 floats with
coalesced (striped) 16-byte accesses against blocked runs of 32/64 bytes per thread, the
pattern a scan thread uses for its contiguous items. GB/s counts read + write."""
import cupy as cp, statistics
src = r'''
extern "C" __global__ void striped(const float4* x, float4* y, long long n4) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) y[i] = x[i];
}
template <int V> __device__ void blocked(const float4* x, float4* y, long long n4) {
    long long base = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * V;
    if (base + V > n4) return;
    float4 r[V];
    #pragma unroll
    for (int i = 0; i < V; ++i) r[i] = __ldg(x + base + i);
    #pragma unroll
    for (int i = 0; i < V; ++i) y[base + i] = r[i];
}
extern "C" __global__ void blocked2(const float4* x, float4* y, long long n4) { blocked<2>(x, y, n4); }
extern "C" __global__ void blocked4(const float4* x, float4* y, long long n4) { blocked<4>(x, y, n4); }
extern "C" __global__ void blocked8(const float4* x, float4* y, long long n4) { blocked<8>(x, y, n4); }
'''
mod = cp.RawModule(code=src, options=("-std=c++17",), name_expressions=None)
n = 1 << 28
x = cp.random.rand(n, dtype=cp.float32); y = cp.empty_like(x); n4 = n // 4
def t(fn, grid, block):
    for _ in range(3): fn((grid,), (block,), (x, y, cp.int64(n4)))
    ts = []
    for _ in range(20):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(); fn((grid,), (block,), (x, y, cp.int64(n4))); b.record(); b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    ms = statistics.median(ts)
    return 2 * n * 4 / (ms * 1e-3) / 1e9
print("striped grid-stride  %.0f GB/s" % t(mod.get_function("striped"), 132 * 16, 256))
for v in (2, 4, 8):
    print("blocked %3d B/thread %.0f GB/s" % (16 * v, t(mod.get_function("blocked%d" % v), n4 // v // 256, 256)))
