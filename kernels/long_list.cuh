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
//               each segment on its own).
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
    template <class Acc> __device__ __forceinline__ Acc* partials() const {
        const u64 bytes = (16 + 32 * cap + 4 * chunk_cap + 15) & ~15ull;
        return reinterpret_cast<Acc*>(reinterpret_cast<char*>(hdr) + bytes);
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

}  // namespace cf
