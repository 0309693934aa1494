// cufold: the long list: segments of a thread-schedule launch (ragged offsets with a long
// tail) that are too long for a warp, set aside in scratch memory for a pass of their own,
// where many blocks share each one.
//
// The list is laid out from `n` (the input's length) and two logs alone, so that the host
// (src/segment/gpu.rs, long_list_layout) and every kernel agree: two counters (segments
// listed, chunks reserved; zeroed before the launch that fills the list), `cap` entries
// (segment, start, length, first chunk), `chunk_cap` chunk owners (the entry's index, or ~0
// for chunks reserved but not used), then, for the reduction, `chunk_cap` partials.
// Segments of 2^min_log positions or more (the scan's; the reduction's are longer) that do
// not overlap hold at most n >> min_log entries and n >> chunk_min_log chunks of
// 2^chunk_min_log positions or more, plus one partial chunk each; a segment that finds no room (offsets that overlap) stays with its warp.
//
//   reduction   segments over 2^CF_LONG_MIN_LOG, chunks of 2^CF_LONG_CHUNK_MIN_LOG or more
//               (kernels/segment.cuh: a block per chunk, then a warp per segment);
//   scan        segments of half a tile of the device-wide scan or more (and of 4096 or more),
//               chunks of one tile
//               (kernels/scan.cuh, cf_scan_long: the device-wide scan's tiles and look-back,
//               each segment on its own); a launch may list for up to three tiles, each
//               segment on one (cf::list_for_scan), the lists one after another.
#pragma once

#include "cufold/types.cuh"

// The reduction's long list (kernels/segment.cuh): segments over 4096 positions, in chunks
// of 4096 or more (at most half of the segment's tree, so that the joining warp's tree is
// the segment's). With segments over 2^16 listed (chunks of 2^14), the warps kept the
// segments of 257 to 65536 positions, one tile after another, and the power-law shape
// waited on its warps with the longest: sum 718 -> 960 GB/s, max 727 -> 1064, argmax 673
// -> 921 on an H100 with this limit (2^14 and chunks of 2^13: 934, 1013, 867).
#define CF_LONG_MIN_LOG 12
#define CF_LONG_CHUNK_MIN_LOG 12
// The reduction's long pass takes blocks of CF_LONG_BLOCK threads for operators that are not
// order-free (their chunks at least one such block's tile), the reducer's own for the
// others. 16 segments of 2^24 f32 by offsets, H100, ms, two rounds: sum on blocks of 256
// 0.415 / 0.424, of 512 0.386 / 0.389; max 0.365 / 0.367 against 0.371 / 0.372 (BENCHMARKS.md,
// "Segments, sixteenth step"), as the split schedule's rows measured before.
#define CF_LONG_BLOCK 512

namespace cf {

struct LongList {
    u64* hdr;
    u64 cap;
    u64 chunk_cap;
    __device__ __forceinline__ LongList(u64* h, u64 n, int min_log, int chunk_min_log)
        : hdr(h), cap((n >> min_log) + 1), chunk_cap((n >> chunk_min_log) + (n >> min_log) + 1) {}
    __device__ __forceinline__ u64* entry(u64 i) const { return hdr + 2 + 4 * i; }
    __device__ __forceinline__ unsigned* owner() const { return reinterpret_cast<unsigned*>(hdr + 2 + 4 * cap); }
    // The bytes of the counters, entries and chunk owners, to a 16-byte boundary: where the
    // partials start, and, for the scan's lists (which have none), the next list.
    __device__ __forceinline__ u64 head_bytes() const { return (16 + 32 * cap + 4 * chunk_cap + 15) & ~15ull; }
    template <class Acc> __device__ __forceinline__ Acc* partials() const {
        return reinterpret_cast<Acc*>(reinterpret_cast<char*>(hdr) + head_bytes());
    }
    // Chunks reserved so far (or all there are room for), after the filling launch.
    __device__ __forceinline__ u64 reserved() const { return hdr[1] < chunk_cap ? hdr[1] : chunk_cap; }
    // Entries listed (or all there are room for), after the filling launch.
    __device__ __forceinline__ u64 listed() const { return hdr[0] < cap ? hdr[0] : cap; }

    // Lists segment s (positions lo .. lo + len, in chunks of 2^chunk_log): reserves its
    // chunks and an entry, names the entry as the owner of its chunks. False (nothing
    // listed, its reserved chunks marked unowned) when the list is full.
    __device__ __forceinline__ bool add(u64 s, u64 lo, u64 len, int chunk_log) const {
        const u64 chunks = (len + (1ull << chunk_log) - 1) >> chunk_log;
        const u64 first = atomicAdd(reinterpret_cast<unsigned long long*>(hdr + 1), (unsigned long long)chunks);
        u64 slot = ~0ull;
        if (first + chunks <= chunk_cap) {
            slot = atomicAdd(reinterpret_cast<unsigned long long*>(hdr), 1ull);
            if (slot >= cap) slot = ~0ull;
        }
        return own(slot, s, lo, len, first, chunks);
    }

    // add, by every lane of a warp at once (`want`: the lane lists its segment), with one
    // atomic on each counter a warp in place of one a lane: the chunks in lane order, then an
    // entry for each lane whose chunks fit, as add reserves them one lane at a time.
    __device__ __forceinline__ bool add_warp(bool want, u64 s, u64 lo, u64 len, int chunk_log) const {
        const unsigned lane = threadIdx.x & 31;
        if (__ballot_sync(~0u, want) == 0) return false;
        const u64 chunks = want ? (len + (1ull << chunk_log) - 1) >> chunk_log : 0;
        u64 upto = chunks;  // the chunks of lanes 0 ..= lane
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const u64 v = __shfl_up_sync(~0u, upto, d);
            if ((int)lane >= d) upto += v;
        }
        u64 base = 0;
        if (lane == 31) base = atomicAdd(reinterpret_cast<unsigned long long*>(hdr + 1), (unsigned long long)upto);
        const u64 first = __shfl_sync(~0u, base, 31) + upto - chunks;
        const bool fits = want && first + chunks <= chunk_cap;
        const unsigned fit = __ballot_sync(~0u, fits);
        u64 slot0 = 0;
        if (fit != 0 && lane == 31)
            slot0 = atomicAdd(reinterpret_cast<unsigned long long*>(hdr), (unsigned long long)__popc(fit));
        const u64 slots = __shfl_sync(~0u, slot0, 31);
        u64 slot = fits ? slots + __popc(fit & ((1u << lane) - 1)) : ~0ull;
        if (slot != ~0ull && slot >= cap) slot = ~0ull;
        return want && own(slot, s, lo, len, first, chunks);
    }

    // Names entry `slot` (~0: none, the list being full) as the owner of the reserved chunks
    // first .. first + chunks that lie within the list, and fills it in with segment s; false
    // where there is no entry.
    __device__ __forceinline__ bool own(u64 slot, u64 s, u64 lo, u64 len, u64 first, u64 chunks) const {
        const unsigned tag = slot == ~0ull ? ~0u : (unsigned)slot;
        const u64 end = first + chunks < chunk_cap ? first + chunks : chunk_cap;
        for (u64 i = first; i < end; ++i) owner()[i] = tag;
        if (slot == ~0ull) return false;
        u64* e = entry(slot);
        e[0] = s;
        e[1] = lo;
        e[2] = len;
        e[3] = first;
        return true;
    }
};

// The reduction's list.
__device__ __forceinline__ LongList reduce_long_list(u64* hdr, u64 n) {
    return LongList(hdr, n, CF_LONG_MIN_LOG, CF_LONG_CHUNK_MIN_LOG);
}

// The scan's list, for the device-wide scan's tiles of 2^tile_log positions: segments of
// half a tile or more, or of 2^CF_SCAN_LONG_MIN_LOG or more for small tiles (wide
// accumulators), so that the list stays within n / 128 bytes.
#define CF_SCAN_LONG_MIN_LOG 12
__device__ __forceinline__ int scan_long_min_log(int tile_log) {
    return tile_log - 1 > CF_SCAN_LONG_MIN_LOG ? tile_log - 1 : CF_SCAN_LONG_MIN_LOG;
}
__device__ __forceinline__ LongList scan_long_list(u64* hdr, u64 n, int tile_log) {
    return LongList(hdr, n, scan_long_min_log(tile_log), tile_log);
}

// Lists segment s (positions lo .. lo + len) for the scan's long passes on tiles of
// 2^logs[0] < 2^logs[1] < ... positions, whose lists lie one after another from `lists`
// (as the host lays them out: src/segment/scan_gpu.rs, with_long_passes), by every lane of
// a warp at once where WARP, else by the lanes that `want` to (`want`: the lane lists its
// segment if it can): on the largest tile the segment fills, or, shorter than every one, on
// the smallest from scan_long_min_log of it on. A segment of half a tile spends half of each
// block's positions; one of a tile or more, at most the last tile's part. False where it is
// too short for any or its list is full (its warp scans it).
//
// WARP: the warp's atomics on each list at once (LongList::add_warp), for warps that list
// many segments a step (segments by offsets: a lane's own, on a list each lane picked, took
// the thread kernel from 57 to 107 us listing 2^16 segments of 4096 f32, ncu; the warp's
// made the whole scan of them 0.868 -> 0.769 ms against a lane's own on one list); else each
// lane's own (LongList::add), for the scan by key, whose warps list at most a few runs a
// span, and whose kernel ran the power-law runs 0.593 -> 0.741 ms with the warp's (H100;
// BENCHMARKS.md, "Segments, thirtieth step"). The lists are walked in a loop, not
// unrolled: the thread kernel keeps its 80 registers a thread (94 with this function a
// call of its own).
template <bool WARP, int LISTS>
__device__ __forceinline__ bool list_for_scan(bool want, u64* lists, u64 n, const int (&logs)[LISTS], u64 s, u64 lo,
                                              u64 len) {
    if (WARP ? __ballot_sync(~0u, want) == 0 : !want) return false;
    int pick = want && len >= (1ull << scan_long_min_log(logs[0])) ? 0 : -1;
#pragma unroll
    for (int k = 1; k < LISTS; ++k)
        if (pick >= 0 && len >= (1ull << logs[k])) pick = k;
    bool listed = false;
    u64* hdr = lists;
#pragma unroll 1
    for (int k = 0; k < LISTS; ++k) {
        // List k's log by selects on k (at most three lists), so that the rolled loop reads
        // no array by a run-time index (the form the thread kernel kept 80 registers with).
        const int log = k == 0 ? logs[0] : k == 1 ? logs[LISTS > 1 ? 1 : 0] : logs[LISTS > 2 ? 2 : 0];
        const LongList l = scan_long_list(hdr, n, log);
        if (WARP)
            listed |= l.add_warp(pick == k, s, lo, len, log);
        else if (pick == k)
            listed = l.add(s, lo, len, log);
        hdr += l.head_bytes() / sizeof(u64);
    }
    return listed;
}

}  // namespace cf
