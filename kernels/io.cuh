// cufold: moving values between global memory and registers.
//
// `cf::load_cg` reads values other blocks of the same launch wrote (around L1). `cf::store_out`
// writes an output (an arg- operator's whole, its padding too).
// `cf::load_run` / `cf::store_run` move a thread's run of J contiguous values, with 16-byte
// accesses where the run is aligned and whole. Staging (`cf::stage_runs`, `cf::lift_staged`,
// `cf::store_run_warp`) moves a warp's 32 runs through shared memory so that global
// accesses are coalesced 16-byte copies, loads by cp.async.
#pragma once

#include "cufold/ops.cuh"

namespace cf {

// Values written by other blocks of this launch (partials): read around L1.
template <class T> __device__ __forceinline__ T load_cg(const T* p) {
    T r;
    if (sizeof(T) % 4 == 0) {
        unsigned w[sizeof(T) / 4 + 1];
        const unsigned* q = reinterpret_cast<const unsigned*>(p);
#pragma unroll
        for (int i = 0; i < (int)(sizeof(T) / 4); ++i) w[i] = __ldcg(q + i);
        memcpy(&r, w, sizeof(T));
    } else if (sizeof(T) % 2 == 0) {
        unsigned short w[sizeof(T) / 2 + 1];
        const unsigned short* q = reinterpret_cast<const unsigned short*>(p);
#pragma unroll
        for (int i = 0; i < (int)(sizeof(T) / 2); ++i) w[i] = __ldcg(q + i);
        memcpy(&r, w, sizeof(T));
    } else {
        unsigned char w[sizeof(T)];
        const unsigned char* q = reinterpret_cast<const unsigned char*>(p);
#pragma unroll
        for (int i = 0; i < (int)sizeof(T); ++i) w[i] = __ldcg(q + i);
        memcpy(&r, w, sizeof(T));
    }
    return r;
}

// Writes an output v to *p (a reduction's result, a segment's, a scan's value). For Indexed<T>
// with a T under 8 bytes, every byte of its 16 is written, the padding after the value as
// zeros: a plain assignment stores the value and the index and leaves the padding unwritten,
// so that no 32-byte sector of the outputs is ever whole, and the H100 read each one from
// memory to merge the writes into it (ncu, f32 ArgMax over 2^24 segments of 4 to 32: 1.61 GB
// read for 1.34 of input and offsets, 0.660 ms; with every byte written, 1.34 GB and 0.587
// ms). One 16-byte store where p is aligned to 16, else two of 8. Other outputs as assigned.
template <class T> __device__ __forceinline__ void store_out(T* p, const T& v) { *p = v; }
template <class T> __device__ __forceinline__ void store_out(Indexed<T>* p, const Indexed<T>& v) {
    if constexpr (sizeof(T) < 8) {
        static_assert(sizeof(Indexed<T>) == 16, "a value under 8 bytes, padded to 8, and the index");
        u64 word = 0;
        memcpy(&word, &v.value, sizeof(T));
        if ((reinterpret_cast<u64>(p) & 15) == 0) {
            *reinterpret_cast<ulonglong2*>(p) = make_ulonglong2(word, v.index);
        } else {
            reinterpret_cast<u64*>(p)[0] = word;
            reinterpret_cast<u64*>(p)[1] = v.index;
        }
    } else {
        *p = v;
    }
}

// Loads and lifts the run of J positions at `pos` (identity past n): 16-byte loads when
// the run is aligned and whole, read-only-cache loads unless the input is being overwritten.
template <int J, class Op>
__device__ __forceinline__ void load_run(const Op& op, const typename Op::In* x, u64 n, u64 pos, bool aligned,
                                         bool in_place, typename Op::Acc (&a)[J]) {
    typedef typename Op::In In;
    constexpr int BYTES = J * (int)sizeof(In);
    if constexpr (BYTES % 16 == 0) {
        if (aligned && pos + J <= n) {
            const uint4* src = reinterpret_cast<const uint4*>(x + pos);
            uint4 raw[BYTES / 16];
#pragma unroll
            for (int i = 0; i < BYTES / 16; ++i) raw[i] = in_place ? src[i] : __ldg(src + i);
            In v[J];
            memcpy(v, raw, sizeof(v));
#pragma unroll
            for (int j = 0; j < J; ++j) a[j] = op.lift(v[j], pos + j);
            return;
        }
    }
#pragma unroll
    for (int j = 0; j < J; ++j) a[j] = pos + j < n ? op.lift(x[pos + j], pos + j) : op.identity();
}

// Stores the run of J outputs at `pos` (none past n): 16-byte stores when aligned and whole.
template <int J, class Out>
__device__ __forceinline__ void store_run(Out* y, u64 n, u64 pos, bool aligned, const Out (&o)[J]) {
    constexpr int BYTES = J * (int)sizeof(Out);
    if constexpr (BYTES % 16 == 0) {
        if (aligned && pos + J <= n) {
            uint4 raw[BYTES / 16];
            memcpy(raw, o, sizeof(o));
            uint4* dst = reinterpret_cast<uint4*>(y + pos);
#pragma unroll
            for (int i = 0; i < BYTES / 16; ++i) dst[i] = raw[i];
            return;
        }
    }
#pragma unroll
    for (int j = 0; j < J; ++j)
        if (pos + j < n) store_out(y + pos + j, o[j]);
}

// Vectors of a run of J values of type T: J * sizeof(T) / 16 when that is whole (else 0).
template <int J, class T> struct RunVectors {
    static constexpr int R = (J * (int)sizeof(T)) % 16 == 0 ? J * (int)sizeof(T) / 16 : 0;
};

// Staging (ScanShape::staging): the warp's 32 runs (32 J contiguous positions) move between
// global memory and a per-warp buffer with coalesced 16-byte accesses (lane l takes vectors
// l, l + 32, ...; loads by cp.async, so they travel while the look-back starts), and between
// the buffer and the lanes' registers run by run. Each run is padded by one vector in the
// buffer, so that lanes reading their runs hit different banks. `stage` holds 32 * (R + 1)
// vectors. (cf::cp_async16: types.cuh.)

// Whether the warp's 32 runs of J values (this lane's at `pos`, so the warp's from
// pos - lane * J) are aligned and end by n, so that the warp can move them with coalesced
// 16-byte accesses. Every lane of the warp gets the same answer.
template <int J> __device__ __forceinline__ bool warp_span_whole(u64 n, u64 pos, bool aligned) {
    return aligned && pos - (u64)(threadIdx.x & 31) * J + 32 * J <= n;
}

// The warp's 32 runs of J values, whole but not 16-byte aligned (segments and views at any
// offset), moved between global memory at `span` (the first run's start) and a buffer
// value by value: value i of the span by lane i % 32, so that each access of the warp is
// one coalesced stretch of 32 values; `at(run, j)` is where value j of run `run` sits in the
// buffer. Each lane's own run, value by value (what the runs took before), touches a line
// a lane an access: the long pass of ragged segments' scan ran at 13% of the device's
// memory bandwidth, its segments starting anywhere (H100, ncu; BENCHMARKS.md, "Segments,
// sixteenth step").
// Loads go C at a time (C values a lane in registers, not J).
template <int J, class T, class At> __device__ __forceinline__ void gather_span(const T* span, At at) {
    constexpr int C = J < 16 ? J : 16;
    static_assert(J % C == 0, "a run is whole rounds of loads");
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int r = 0; r < J; r += C) {
        T v[C];
#pragma unroll
        for (int i = 0; i < C; ++i) v[i] = span[(r + i) * 32 + lane];
#pragma unroll
        for (int i = 0; i < C; ++i) *at(((r + i) * 32 + lane) / J, ((r + i) * 32 + lane) % J) = v[i];
    }
}
template <int J, class T, class At> __device__ __forceinline__ void scatter_span(T* span, At at) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < J; ++i) span[i * 32 + lane] = *at((i * 32 + lane) / J, (i * 32 + lane) % J);
}

// Value j of run `run` in stage_runs' buffer (R vectors a run, padded by one).
template <int R, class T> __device__ __forceinline__ T* staged_at(uint4* stage, int run, int j) {
    return reinterpret_cast<T*>(stage + run * (R + 1)) + j;
}

// Starts copying the warp's 32 runs into `stage` when the warp's span is whole: 16-byte
// coalesced copies, asynchronous, where it is aligned, else value by value (gather_span);
// returns whether it did. Every lane of the warp gets the same answer.
template <int J, class In>
__device__ __forceinline__ bool stage_runs(const In* x, u64 n, u64 pos, bool aligned, uint4* stage) {
    constexpr int R = RunVectors<J, In>::R;
    if constexpr (R > 0) {
        if (!warp_span_whole<J>(n, pos, true)) return false;
        const int lane = threadIdx.x & 31;
        if (!aligned) {
            gather_span<J>(x + (pos - (u64)lane * J), [&](int run, int j) { return staged_at<R, In>(stage, run, j); });
            return true;
        }
        const uint4* src = reinterpret_cast<const uint4*>(x + (pos - (u64)lane * J));
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const int v = i * 32 + lane;
            cp_async16(stage + v + v / R, src + v);
        }
        return true;
    }
    return false;
}

// Waits for the copies stage_runs started and lifts this lane's run from the buffer.
template <int J, class Op>
__device__ __forceinline__ void lift_staged(const Op& op, u64 pos, typename Op::Acc (&a)[J], const uint4* stage) {
    typedef typename Op::In In;
    constexpr int R = RunVectors<J, In>::R;
    if constexpr (R > 0) {
        asm volatile("cp.async.wait_all;" ::: "memory");
        __syncwarp();
        const int lane = threadIdx.x & 31;
        uint4 raw[R];
#pragma unroll
        for (int k = 0; k < R; ++k) raw[k] = stage[lane * (R + 1) + k];
        __syncwarp();
        In vals[J];
        memcpy(vals, raw, sizeof(vals));
#pragma unroll
        for (int j = 0; j < J; ++j) a[j] = op.lift(vals[j], pos + j);
    }
}

// Stores this lane's run through the buffer when the warp's span is whole (16-byte stores
// where it is aligned, else value by value: scatter_span); returns whether it did (the same
// answer in every lane of the warp).
template <int J, class Out>
__device__ __forceinline__ bool store_run_warp(Out* y, u64 n, u64 pos, bool aligned, const Out (&o)[J],
                                               uint4* stage) {
    constexpr int R = RunVectors<J, Out>::R;
    if constexpr (R > 0) {
        if (!warp_span_whole<J>(n, pos, true)) return false;
        const int lane = threadIdx.x & 31;
        uint4 raw[R];
        memcpy(raw, o, sizeof(raw));
#pragma unroll
        for (int k = 0; k < R; ++k) stage[lane * (R + 1) + k] = raw[k];
        __syncwarp();
        if (!aligned) {
            scatter_span<J>(y + (pos - (u64)lane * J), [&](int run, int j) { return staged_at<R, Out>(stage, run, j); });
            __syncwarp();
            return true;
        }
        uint4* dst = reinterpret_cast<uint4*>(y + (pos - (u64)lane * J));
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const int v = i * 32 + lane;
            dst[v] = stage[v + v / R];
        }
        __syncwarp();
        return true;
    }
    return false;
}

// Asks the L2 cache for the BYTES bytes at `p`, by the whole block, without waiting: one
// prefetch per 128 bytes. A later block that loads them finds them there. (Bulk prefetches
// of 16 KiB, sm_90's cp.async.bulk.prefetch.L2, measured the same on an H100.)
template <unsigned long long BYTES> __device__ __forceinline__ void prefetch_l2(const void* p) {
    const char* c = reinterpret_cast<const char*>(p);
    for (unsigned long long i = threadIdx.x; i * 128 < BYTES; i += blockDim.x)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(c + i * 128));
}

// Resident tiles (ScanShape::resident, CF_STAGING == 2): a warp's 32 runs stay in a per-warp
// buffer of shared memory from their load to their store, and the registers hold a few
// values at a time, so that more tiles are resident while they wait for the look-back.
// The buffer holds 32 * R vectors, unpadded: vector k of run `run` sits at
// run * R + (k ^ s(run)), the swizzle s keeping eight lanes that read the same vector of
// their runs (one 128-byte shared-memory wavefront) on distinct banks, as it does for the
// eight consecutive vectors of a coalesced copy. R is a power of two.
template <int R> __device__ __forceinline__ int resident_slot(int run, int k) {
    static_assert(R > 0 && (R & (R - 1)) == 0, "resident runs are a power of two of vectors");
    const int s = R >= 8 ? (run & 7) : ((run / (8 / R)) & (R - 1));
    return run * R + (k ^ s);
}

// Value j of run `run` in the resident buffer (E values a vector).
template <int R, int E, class T> __device__ __forceinline__ T* resident_at(uint4* stage, int run, int j) {
    return reinterpret_cast<T*>(stage + resident_slot<R>(run, j / E)) + j % E;
}

// Loads the warp's 32 runs into `stage`: coalesced 16-byte cp.async copies when the warp's
// span is whole and aligned, value by value when it is whole (gather_span), else each lane
// its own run, value by value (none past n). Returns whether the copies were asynchronous
// (then resident_wait must follow; the others are waited for and visible to the warp).
template <int J, class In>
__device__ __forceinline__ bool load_resident(const In* x, u64 n, u64 pos, bool aligned, uint4* stage) {
    constexpr int R = RunVectors<J, In>::R;
    constexpr int E = 16 / (int)sizeof(In);
    static_assert(R > 0 && 16 % sizeof(In) == 0, "a resident run is whole vectors of whole values");
    const int lane = threadIdx.x & 31;
    if (warp_span_whole<J>(n, pos, aligned)) {
        const uint4* src = reinterpret_cast<const uint4*>(x + (pos - (u64)lane * J));
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const int v = i * 32 + lane;
            cp_async16(stage + resident_slot<R>(v / R, v % R), src + v);
        }
        return true;
    }
    if (warp_span_whole<J>(n, pos, true)) {
        gather_span<J>(x + (pos - (u64)lane * J), [&](int run, int j) { return resident_at<R, E, In>(stage, run, j); });
        __syncwarp();
        return false;
    }
#pragma unroll
    for (int k = 0; k < R; ++k) {
        In v[E];
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (pos + k * E + e < n) v[e] = x[pos + k * E + e];
        uint4 raw;
        memcpy(&raw, v, sizeof(raw));
        stage[resident_slot<R>(lane, k)] = raw;
    }
    return false;
}

// Waits for load_resident's asynchronous copies and makes them visible to the warp.
__device__ __forceinline__ void resident_wait() {
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncwarp();
}

// Lifts piece m (S values, S * sizeof(In) a multiple of 16) of this lane's resident run of
// J values at `pos` (identity past n).
template <int S, int J, class Op>
__device__ __forceinline__ void lift_resident(const Op& op, const uint4* stage, int m, u64 pos, u64 n,
                                              typename Op::Acc (&a)[S]) {
    typedef typename Op::In In;
    constexpr int R = RunVectors<J, In>::R;
    constexpr int SV = S * (int)sizeof(In) / 16;
    const int lane = threadIdx.x & 31;
    uint4 raw[SV];
#pragma unroll
    for (int v = 0; v < SV; ++v) raw[v] = stage[resident_slot<R>(lane, m * SV + v)];
    In vals[S];
    memcpy(vals, raw, sizeof(vals));
    if (pos + S <= n) {
#pragma unroll
        for (int j = 0; j < S; ++j) a[j] = op.lift(vals[j], pos + j);
    } else {
#pragma unroll
        for (int j = 0; j < S; ++j) a[j] = pos + j < n ? op.lift(vals[j], pos + j) : op.identity();
    }
}

// Puts piece m of this lane's outputs (S values of Out, the size of In) where its inputs were.
template <int S, int J, class Out>
__device__ __forceinline__ void put_resident(uint4* stage, int m, const Out (&o)[S]) {
    constexpr int R = RunVectors<J, Out>::R;
    constexpr int SV = S * (int)sizeof(Out) / 16;
    const int lane = threadIdx.x & 31;
    uint4 raw[SV];
    memcpy(raw, o, sizeof(raw));
#pragma unroll
    for (int v = 0; v < SV; ++v) stage[resident_slot<R>(lane, m * SV + v)] = raw[v];
}

// Stores the warp's 32 runs of outputs from `stage` (a whole span): coalesced 16-byte stores
// where it is aligned, else value by value (scatter_span).
template <int J, class Out>
__device__ __forceinline__ void store_resident(Out* y, u64 pos, bool aligned, uint4* stage) {
    constexpr int R = RunVectors<J, Out>::R;
    constexpr int E = 16 / (int)sizeof(Out);
    const int lane = threadIdx.x & 31;
    __syncwarp();
    if (!aligned) {
        scatter_span<J>(y + (pos - (u64)lane * J), [&](int run, int j) { return resident_at<R, E, Out>(stage, run, j); });
        return;
    }
    uint4* dst = reinterpret_cast<uint4*>(y + (pos - (u64)lane * J));
#pragma unroll
    for (int i = 0; i < R; ++i) {
        const int v = i * 32 + lane;
        dst[v] = stage[resident_slot<R>(v / R, v % R)];
    }
}

}  // namespace cf
