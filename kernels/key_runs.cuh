// cufold: runs of equal keys (the first step of reduce_by_key, and KeyRuns; the one passes by
// key find their heads with cf::KeySpan in their own tiles, kernels/segment.cuh).
//
// A run is a maximal stretch of consecutive equal keys; position i starts one (is a head)
// when i == 0 or key[i] != key[i - 1], keys compared by their bits (CF_OP is the unsigned
// word of a key's width). A warp takes a span of SPAN = 32 * CF_ITEMS consecutive keys at a
// time; the runs' CSR offsets are written in three steps, on one stream:
//
//   cf_run_count    the number of heads in each span, and each lane's heads (a word a lane,
//                   32 a span: one bit a key);
//   (host)          the exclusive sum of the counts (cufold's own scan, over u64), one
//                   more than the spans, so that its last value is the number of runs;
//   cf_run_scatter  each span with a head, from its heads' words: their positions, in order, to
//                   offsets[start[s]..] and, if `keys_out` is not null, their keys to
//                   keys_out[start[s]..], through a list in shared memory so that the warp
//                   writes them whole; the last span writes n after the last run's start
//                   and, if `runs` is not null, the number of runs to *runs. If
//                   `lengths_out` is not null, the length of each run but a span's last,
//                   whose end is the next head in the list.
//   cf_run_last_lengths  the length of each span's last run, from the offsets.
//
// The offsets of run r are offsets[r] .. offsets[r + 1]. The keys are read once, by the
// count; the scatter reads one bit a key and, for `keys_out`, each run's first key.
//
// A span is read in chunks of 32 16-byte vectors (V keys a lane, lane l holding keys
// l * V .. l * V + V of its chunk; one key at a time where the keys are not 16-byte aligned
// or the chunk passes n); a lane's heads are the bits of one word, bit c * V + p for key p
// of its vector in chunk c.
#pragma once

#include "cufold/types.cuh"

namespace cf {

// Keys of the unsigned word type W, ITEMS a lane (a span: 32 * ITEMS keys, one bit each in
// a lane's word of heads).
template <class W, int ITEMS> struct KeySpan {
    static constexpr int V = 16 / (int)sizeof(W);
    static constexpr int CHUNKS = ITEMS / V;
    static constexpr int SPAN = 32 * ITEMS;
    static_assert(ITEMS % V == 0 && ITEMS <= 32, "a lane's heads fit in one word");
    static_assert(SPAN <= 65536, "a head's place in its span fits 16 bits");

    static __device__ __forceinline__ W shfl(W w, int src) {
        if constexpr (sizeof(W) == 8) return __shfl_sync(0xffffffffu, w, src);
        else return (W)__shfl_sync(0xffffffffu, (unsigned)w, src);
    }
    static __device__ __forceinline__ W shfl_up(W w) {
        if constexpr (sizeof(W) == 8) return __shfl_up_sync(0xffffffffu, w, 1);
        else return (W)__shfl_up_sync(0xffffffffu, (unsigned)w, 1);
    }

    static __device__ __forceinline__ bool aligned(const W* k) { return ((unsigned long long)k & 15) == 0; }

    // This lane's heads in the span of keys starting at `base` (see the layout above).
    // Chunks are loaded BATCH at a time, all of a batch's loads issued before any key is
    // compared: one chunk at a time, each chunk's shuffle waited on its own load, eight
    // round trips to memory a span. (H200, `reduce_by_key_into`, ms, one at a time / eight:
    // 2^24 short runs 1.158 / 1.112, power-law 0.444 / 0.424, 2^18 runs of 1024 0.747 /
    // 0.694, 16 runs of 2^24 0.780 / 0.723; four at a time fell between.)
    static constexpr int BATCH = CHUNKS < 8 ? CHUNKS : 8;
    static __device__ __forceinline__ unsigned heads(const W* __restrict__ k, u64 n, u64 base, bool aligned) {
        constexpr int B = BATCH;
        const unsigned lane = threadIdx.x & 31;
        // The key before each chunk's lane 0: the one before the span, then lane 31's last.
        W last = lane == 0 && base > 0 && base <= n ? __ldg(k + base - 1) : (W)0;
        unsigned heads = 0;
#pragma unroll
        for (int c0 = 0; c0 < CHUNKS; c0 += B) {
            W v[B][V];
            if (aligned && base + (u64)(c0 + B) * 32 * V <= n) {
                union { uint4 q; W w[V]; } u[B];
#pragma unroll
                for (int b = 0; b < B; ++b)
                    u[b].q = __ldg(reinterpret_cast<const uint4*>(k + base + (u64)(c0 + b) * 32 * V + (u64)lane * V));
#pragma unroll
                for (int b = 0; b < B; ++b)
#pragma unroll
                    for (int p = 0; p < V; ++p) v[b][p] = u[b].w[p];
            } else {
#pragma unroll
                for (int b = 0; b < B; ++b) {
                    const u64 at = base + (u64)(c0 + b) * 32 * V + (u64)lane * V;
                    if (aligned && at + V <= n) {
                        union { uint4 q; W w[V]; } u;
                        u.q = __ldg(reinterpret_cast<const uint4*>(k + at));
#pragma unroll
                        for (int p = 0; p < V; ++p) v[b][p] = u.w[p];
                    } else {
#pragma unroll
                        for (int p = 0; p < V; ++p) v[b][p] = at + p < n ? __ldg(k + at + p) : (W)0;
                    }
                }
            }
#pragma unroll
            for (int b = 0; b < B; ++b) {
                const int c = c0 + b;
                const u64 at = base + (u64)c * 32 * V + (u64)lane * V;
                const W up = shfl_up(v[b][V - 1]);
                const W before = lane == 0 ? last : up;
                last = shfl(v[b][V - 1], 31);
#pragma unroll
                for (int p = 0; p < V; ++p) {
                    const u64 i = at + p;
                    if (i < n && (i == 0 || v[b][p] != (p == 0 ? before : v[b][p - 1]))) heads |= 1u << (c * V + p);
                }
            }
        }
        return heads;
    }

    // The place in its span of the head that bit `b` of lane `lane`'s word stands for.
    static __device__ __forceinline__ unsigned place(int lane, int b) {
        return (unsigned)((b / V) * 32 * V + lane * V + b % V);
    }

    // The warp's heads (each lane's word from `heads`) listed in order into `list`, as places
    // in the span; returns how many (the same in every lane; the list is complete for the
    // warp). Every lane calls it.
    //
    // The words are first turned around by CHUNKS shuffles, so that lane l holds the heads
    // of places l * ITEMS .. l * ITEMS + ITEMS - 1, in order (a chunk's 32 * V places are G
    // lanes' worth, lane l's taken from lanes CHUNKS * (l % G) ..): then a lane's heads'
    // ranks are one exclusive sum of the lanes' counts, and each lane writes its own heads
    // in one loop. (Chunk by chunk, each chunk's ranks from V ballots and each lane's loop
    // over its heads in the chunk, the list took 16% of the one pass's instructions on
    // power-law runs, ncu, H200: 534 warp instructions a span.)
    static __device__ __forceinline__ unsigned list_heads(unsigned heads, unsigned short* list) {
        static_assert((CHUNKS & (CHUNKS - 1)) == 0, "a span's chunks split the lanes evenly");
        constexpr int G = 32 / CHUNKS;  // lanes of places a chunk holds
        constexpr unsigned NIBBLE = (1u << V) - 1;  // V <= 16
        const unsigned lane = threadIdx.x & 31;
        const unsigned c = lane / G, from = CHUNKS * (lane % G);
        unsigned word = 0;
#pragma unroll
        for (int i = 0; i < CHUNKS; ++i) {
            const unsigned w = __shfl_sync(0xffffffffu, heads, from + i);
            word |= ((w >> (c * V)) & NIBBLE) << (i * V);
        }
        const unsigned count = __popc(word);
        unsigned below = count;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const unsigned o = __shfl_up_sync(0xffffffffu, below, d);
            if (lane >= (unsigned)d) below += o;
        }
        const unsigned listed = __shfl_sync(0xffffffffu, below, 31);
        unsigned at = below - count;
        for (unsigned b = word; b != 0; b &= b - 1)
            list[at++] = (unsigned short)(lane * ITEMS + __ffs(b) - 1);
        __syncwarp();
        return listed;
    }
};

}  // namespace cf

#ifdef CF_KEY_RUNS_KERNEL
typedef CF_OP cf_word_t;
typedef cf::KeySpan<cf_word_t, CF_ITEMS> cf_span_t;
constexpr int CF_SPAN = cf_span_t::SPAN;
static_assert(CF_BLOCK % 32 == 0, "warps take spans");

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_run_count(const cf_word_t* __restrict__ k, cf::u64 n, cf::u64 spans, cf::u64* __restrict__ counts,
             unsigned* __restrict__ heads_out) {
    const unsigned lane = threadIdx.x & 31;
    const bool aligned = cf_span_t::aligned(k);
    const cf::u64 warps = (cf::u64)gridDim.x * (CF_BLOCK / 32);
    for (cf::u64 s = (cf::u64)blockIdx.x * (CF_BLOCK / 32) + (threadIdx.x >> 5); s < spans; s += warps) {
        const unsigned heads = cf_span_t::heads(k, n, s * CF_SPAN, aligned);
        heads_out[s * 32 + lane] = heads;
        const unsigned c = __reduce_add_sync(0xffffffffu, (unsigned)__popc(heads));
        if (lane == 0) counts[s] = c;
    }
}

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_run_scatter(const cf_word_t* __restrict__ k, cf::u64 n, cf::u64 spans, const cf::u64* __restrict__ starts,
               const cf::u64* __restrict__ counts, const unsigned* __restrict__ heads_in,
               cf::u64* __restrict__ offsets, cf_word_t* __restrict__ keys_out, cf::u64* __restrict__ lengths_out,
               cf::u64* __restrict__ runs) {
    // Each warp's list of its span's heads, as places in the span.
    __shared__ unsigned short places[CF_BLOCK / 32][CF_SPAN];
    const unsigned lane = threadIdx.x & 31;
    unsigned short* list = places[threadIdx.x >> 5];
    const cf::u64 warps = (cf::u64)gridDim.x * (CF_BLOCK / 32);
    for (cf::u64 s = (cf::u64)blockIdx.x * (CF_BLOCK / 32) + (threadIdx.x >> 5); s < spans; s += warps) {
        const cf::u64 count = counts[s], base = s * CF_SPAN;
        if (s == spans - 1 && lane == 0) {
            const cf::u64 all = starts[s] + count;
            offsets[all] = n;
            if (runs) *runs = all;
        }
        // A span inside a long run has nothing to write.
        if (count == 0) continue;
        const unsigned listed = cf_span_t::list_heads(heads_in[s * 32 + lane], list);
        // The list, written whole: consecutive lanes, consecutive runs.
        const cf::u64 first = starts[s];
        for (unsigned j = lane; j < listed; j += 32) {
            const unsigned place = list[j];
            offsets[first + j] = base + place;
            if (keys_out) keys_out[first + j] = __ldg(k + base + place);
            if (lengths_out && j + 1 < listed) lengths_out[first + j] = list[j + 1] - place;
        }
        __syncwarp();
    }
}

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_run_last_lengths(const cf::u64* __restrict__ offsets, cf::u64 spans, const cf::u64* __restrict__ starts,
                    const cf::u64* __restrict__ counts, cf::u64* __restrict__ lengths_out) {
    for (cf::u64 s = (cf::u64)blockIdx.x * CF_BLOCK + threadIdx.x; s < spans; s += (cf::u64)gridDim.x * CF_BLOCK) {
        if (counts[s] == 0) continue;
        const cf::u64 r = starts[s + 1] - 1;
        lengths_out[r] = offsets[r + 1] - offsets[r];
    }
}
#endif
