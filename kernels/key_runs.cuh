// cufold: runs of equal keys (the first step of reduce_by_key and scan_by_key).
//
// A run is a maximal stretch of consecutive equal keys; position i starts one (is a head)
// when i == 0 or key[i] != key[i - 1], keys compared by their bits (CF_OP is the unsigned
// word of a key's width). The runs' CSR offsets are written in three steps, on one stream:
//
//   cf_run_count    one count of heads per tile of TILE = CF_BLOCK * CF_ITEMS positions;
//   (host)          the exclusive sum of the counts (cufold's own scan, over u64), one
//                   more than the tiles, so that its last value is the number of runs;
//   cf_run_scatter  each tile again: head number r (counted from the tile's start) of tile t
//                   writes its position to offsets[start[t] + r]; the last tile writes n
//                   after the last run's start and, if `runs` is not null, the number of
//                   runs to *runs.
//
// The offsets of runs r are offsets[r] .. offsets[r + 1]; `cf_run_gather` then writes each
// run's key and length. Keys are read twice (the count and the scatter), the offsets once.
#pragma once

#include "cufold/types.cuh"

#ifdef CF_KEY_RUNS_KERNEL
typedef CF_OP cf_word_t;
constexpr cf::u64 CF_RUN_TILE = (cf::u64)CF_BLOCK * CF_ITEMS;

__device__ __forceinline__ bool cf_is_head(const cf_word_t* __restrict__ k, cf::u64 i) {
    return i == 0 || __ldg(k + i) != __ldg(k + i - 1);
}

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_run_count(const cf_word_t* __restrict__ k, cf::u64 n, cf::u64 tiles, cf::u64* __restrict__ counts) {
    __shared__ unsigned warp_counts[CF_BLOCK / 32];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (cf::u64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const cf::u64 base = t * CF_RUN_TILE;
        unsigned c = 0;
#pragma unroll 4
        for (int j = 0; j < CF_ITEMS; ++j) {
            const cf::u64 i = base + (cf::u64)j * CF_BLOCK + threadIdx.x;
            c += i < n && cf_is_head(k, i);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
        if (lane == 0) warp_counts[warp] = c;
        __syncthreads();
        if (threadIdx.x == 0) {
            cf::u64 total = 0;
            for (int w = 0; w < CF_BLOCK / 32; ++w) total += warp_counts[w];
            counts[t] = total;
        }
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_run_scatter(const cf_word_t* __restrict__ k, cf::u64 n, cf::u64 tiles, const cf::u64* __restrict__ starts,
               const cf::u64* __restrict__ counts, cf::u64* __restrict__ offsets, cf::u64* __restrict__ runs) {
    __shared__ unsigned warp_counts[CF_BLOCK / 32];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (cf::u64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const cf::u64 base = t * CF_RUN_TILE;
        cf::u64 rank = starts[t];
        for (int j = 0; j < CF_ITEMS; ++j) {
            const cf::u64 i = base + (cf::u64)j * CF_BLOCK + threadIdx.x;
            const bool head = i < n && cf_is_head(k, i);
            const unsigned ballot = __ballot_sync(0xffffffffu, head);
            if (lane == 0) warp_counts[warp] = __popc(ballot);
            __syncthreads();
            unsigned before = 0, total = 0;
            for (int w = 0; w < CF_BLOCK / 32; ++w) {
                const unsigned c = warp_counts[w];
                before += w < (int)warp ? c : 0;
                total += c;
            }
            if (head) offsets[rank + before + __popc(ballot & ((1u << lane) - 1))] = i;
            rank += total;
            __syncthreads();
        }
        if (t == tiles - 1 && threadIdx.x == 0) {
            const cf::u64 all = starts[t] + counts[t];
            offsets[all] = n;
            if (runs) *runs = all;
        }
    }
}

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_run_gather(const cf_word_t* __restrict__ k, const cf::u64* __restrict__ offsets, cf::u64 runs,
              cf_word_t* __restrict__ keys_out, cf::u64* __restrict__ lengths_out) {
    for (cf::u64 r = (cf::u64)blockIdx.x * CF_BLOCK + threadIdx.x; r < runs; r += (cf::u64)gridDim.x * CF_BLOCK) {
        const cf::u64 lo = offsets[r];
        if (keys_out) keys_out[r] = k[lo];
        if (lengths_out) lengths_out[r] = offsets[r + 1] - lo;
    }
}
#endif
