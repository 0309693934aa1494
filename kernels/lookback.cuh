// cufold: the state that tiles of one scan launch share, and the look-back over it.
//
// Tiles publish values (their trees, Fenwick nodes of many tiles) in global memory, in
// slots whose every 32-bit word travels beside the launch's epoch (`cf::NodeSlots`); a
// tile's exclusive prefix is folded from them by one warp (`cf::look_back`), in the
// canonical grouping, so the bits never depend on which tile ran when.
#pragma once

#include "cufold/thread.cuh"
#include "cufold/warp.cuh"

namespace cf {

// Values published in global memory for other tiles (tile trees, Fenwick nodes), one slot of
// WORDS 64-bit words per tile. Each 32-bit word of a value travels beside the launch's epoch,
// so a reader that sees the epoch in every word has the whole value, with no fence and no
// separate flag (aligned 64-bit accesses are single-copy atomic), and slots need no clearing
// between launches.
template <class Acc> struct NodeSlots {
    static constexpr int WORDS = (sizeof(Acc) + 3) / 4;
    unsigned long long* slots;  // WORDS per tile
    unsigned epoch;

    __device__ __forceinline__ void publish(u64 tile, const Acc& v) const {
        unsigned w[WORDS];
        w[WORDS - 1] = 0;
        memcpy(w, &v, sizeof(Acc));
        unsigned long long* p = slots + tile * WORDS;
#pragma unroll
        for (int i = 0; i < WORDS; ++i) {
            unsigned long long word = ((unsigned long long)w[i] << 32) | epoch;
            asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p + i), "l"(word) : "memory");
        }
    }

    // One look: the node if it is there already.
    __device__ __forceinline__ bool try_get(u64 tile, Acc& v) const {
        const unsigned long long* p = slots + tile * WORDS;
        unsigned w[WORDS];
        bool ready = true;
#pragma unroll
        for (int i = 0; i < WORDS; ++i) {
            unsigned long long word;
            asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(word) : "l"(p + i) : "memory");
            ready &= (unsigned)word == epoch;
            w[i] = (unsigned)(word >> 32);
        }
        if (ready) memcpy(&v, w, sizeof(Acc));
        return ready;
    }

    __device__ __forceinline__ Acc wait(u64 tile) const {
        Acc v;
        for (unsigned ns = 0; !try_get(tile, v); ns = ns ? (ns < 128 ? 2 * ns : ns) : 16)
            if (ns) __nanosleep(ns);
        return v;
    }
};

// The Fenwick tree over tiles: node_u is the tree over the 2^ctz(u+1) tiles ending at
// tile u. The exclusive prefix of tile t is the left fold, largest first, of the trees of
// the aligned blocks of t's binary decomposition. Blocks of CF_CHUNK tiles or more ("big")
// are Fenwick nodes, published by the tile that ends them and waited for; smaller blocks
// lie inside t's aligned chunk of CF_CHUNK tiles, and the look-back warp builds their trees
// itself from the leaves (tile trees) the chunk's earlier tiles published. A node is
// published from its own chunk and smaller big nodes only, so no chain of waits runs
// longer than log2(tiles / CF_CHUNK).
//
// Tiles per chunk (a power of two, 32 to 256; the planner's ScanShape::chunk, which keeps
// a chunk of accumulators within 8 KiB of shared memory).
#ifndef CF_CHUNK
#define CF_CHUNK 256
#endif
constexpr int CHUNK_LOG = ilog2(CF_CHUNK);

// The Fenwick node that lane `lane` of the look-back warp waits for, if any: the lane-th
// largest block of tile t's decomposition that has CF_CHUNK or more tiles (bits of t at or
// above CHUNK_LOG, highest first). The block for bit b ends where t, cut below bit b, ends;
// its node is published by the tile before that.
__device__ __forceinline__ bool big_block(u64 t, int lane, u64& node) {
    u64 rest = t >> CHUNK_LOG << CHUNK_LOG;
    if (lane >= __popcll(rest)) return false;
    for (int k = 0; k < lane; ++k) rest &= ~(1ull << (63 - __clzll(rest)));
    node = (t & ~((1ull << (63 - __clzll(rest))) - 1)) - 1;
    return true;
}

// The look-back of tile t (tree `tile`), by all 32 lanes of one warp. `chunk` is shared
// memory for CF_CHUNK accumulators and `big` for 32. `early`/`have`: a first look at this
// lane's big node taken before the tile's loads completed.
//
// Returns in lane 0 the tile's exclusive prefix P_t (`has` false for tile 0) and I_t, the
// prefix through tile t (P_{t+1}). With a `carry` (the prefix of what comes before tile 0),
// both are folded from it: P_t is the carry, then t's blocks; tile 0's is the carry itself.
// The published leaves and nodes are the tiles' own trees, carry or not.
template <class Op>
__device__ __forceinline__ void look_back(const Op& op, const NodeSlots<typename Op::Acc>& leaves,
                                          const NodeSlots<typename Op::Acc>& nodes, u64 t,
                                          typename Op::Acc tile, bool have, typename Op::Acc early,
                                          typename Op::Acc* chunk, typename Op::Acc* big,
                                          typename Op::Acc& prefix, bool& has, typename Op::Acc& incl,
                                          const typename Op::Acc* carry = nullptr) {
    typedef typename Op::Acc Acc;
    const int lane = threadIdx.x & 31;
    const u64 base = t >> CHUNK_LOG << CHUNK_LOG;  // the chunk's first tile
    const int r = (int)(t - base);                  // t's place in its chunk
    const int z = __ffsll((long long)(t + 1)) - 1;  // node_t covers 2^z tiles
    const int nbig = __popcll(base);
    if (lane == 0) leaves.publish(t, tile);  // first: later tiles of the chunk wait for it
    // The chunk's earlier leaves, then this tile's, then the identity (padding, never used
    // for a block inside [0, r]).
    for (int i = lane; i < CF_CHUNK; i += 32) chunk[i] = i < r ? leaves.wait(base + i) : i == r ? tile : op.identity();
    u64 node_index;
    if (big_block(t, lane, node_index)) big[lane] = have ? early : nodes.wait(node_index);
    __syncwarp();
    // Up-sweep in place: chunk[i + 2^k - 1] becomes the tree over [i, i + 2^k) for every
    // aligned block that is a left child (and the whole chunk at CF_CHUNK - 1).
#pragma unroll
    for (int s = 1; s < CF_CHUNK; s <<= 1) {
        for (int k = lane; k < CF_CHUNK / (2 * s); k += 32) {
            const int i = (2 * k + 2) * s - 1;
            chunk[i] = op.combine(chunk[i - s], chunk[i]);
        }
        __syncwarp();
    }
    if (lane != 0) return;
    // P_t: the big blocks largest first, then the blocks of r in the chunk, largest first.
    has = t > 0 || carry != nullptr;
    bool h = carry != nullptr;
    Acc p = carry ? *carry : tile;
    for (int k = 0; k < nbig; ++k) extend(op, p, h, big[k]);
    for (int b = CHUNK_LOG - 1, start = 0; b >= 0; --b)
        if ((r >> b) & 1) {
            extend(op, p, h, chunk[start + (1 << b) - 1]);
            start += 1 << b;
        }
    if (has) prefix = p;
    if (r + 1 < CF_CHUNK) {
        // I_t = P_{t+1}: the same big blocks, then the blocks of r + 1.
        h = carry != nullptr;
        if (carry) p = *carry;
        for (int k = 0; k < nbig; ++k) extend(op, p, h, big[k]);
        for (int b = CHUNK_LOG - 1, start = 0; b >= 0; --b)
            if (((r + 1) >> b) & 1) {
                extend(op, p, h, chunk[start + (1 << b) - 1]);
                start += 1 << b;
            }
        incl = p;
    } else {
        // t ends its chunk, so node_t covers 2^z >= CF_CHUNK tiles: the chunk's tree, then
        // the big blocks for bits CHUNK_LOG .. z - 1 of t (the last ones), smallest first.
        Acc node = chunk[CF_CHUNK - 1];
        for (int m = 0; m < z - CHUNK_LOG; ++m) node = op.combine(big[nbig - 1 - m], node);
        nodes.publish(t, node);
        // I_t: the big blocks above bit z, then node_t.
        h = carry != nullptr;
        if (carry) p = *carry;
        for (int k = 0; k < nbig - (z - CHUNK_LOG); ++k) extend(op, p, h, big[k]);
        extend(op, p, h, node);
        incl = p;
    }
}

// The exclusive prefix of tile t > 0 for an operator whose every grouping gives the same
// bits (integer counts and the like; never a float's sum: the grouping depends on timing),
// by the 32 lanes of one warp, in every lane: the decoupled look-back. Each tile publishes
// its own value `agg` in `aggs` as soon as it has it (tile 0 its inclusive prefix, the same,
// in `incls`), before it calls this; the warp then looks at the 32 tiles before (lane i at
// tile t - 1 - i, read again until every lane up to the nearest with an inclusive prefix has
// at least its tile's value), folds them in order, and steps back 32 tiles when none had its
// inclusive prefix; then lane 0 publishes the tile's inclusive prefix.
template <class Op>
__device__ __forceinline__ typename Op::Acc chained_look_back(const Op& op, const NodeSlots<typename Op::Acc>& aggs,
                                                              const NodeSlots<typename Op::Acc>& incls, u64 t,
                                                              const typename Op::Acc& agg) {
    typedef typename Op::Acc Acc;
    const int lane = threadIdx.x & 31;
    Acc prefix = op.identity();
    for (long long end = (long long)t;;) {
        const long long j = end - 1 - lane;  // lane 0 the nearest
        Acc v = op.identity();
        bool inc = j < 0, ok = j < 0;  // before tile 0: an empty inclusive prefix
        for (unsigned ns = 0;; ns = ns ? (ns < 128 ? 2 * ns : ns) : 16) {
            if (!ok && j >= 0) {
                inc = incls.try_get((u64)j, v);
                ok = inc || aggs.try_get((u64)j, v);
            }
            const unsigned incm = __ballot_sync(~0u, inc);
            const int stop = incm ? __ffs(incm) - 1 : 31;
            const unsigned need = stop == 31 ? ~0u : (2u << stop) - 1;
            if ((__ballot_sync(~0u, ok) & need) == need) break;
            if (ns) __nanosleep(ns);
        }
        const unsigned incm = __ballot_sync(~0u, inc);
        const int stop = incm ? __ffs(incm) - 1 : 31;
        // Lanes stop .. 0 are tiles in increasing order: a higher lane's value on the left.
        Acc w = lane <= stop ? v : op.identity();
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const Acc o = shfl_down(w, off);
            if (lane + off < 32) w = op.combine(o, w);
        }
        prefix = op.combine(shfl_idx(w, 0), prefix);
        if (incm) break;
        end -= 32;
    }
    if (lane == 0) incls.publish(t, op.combine(prefix, agg));
    return prefix;
}

// This block's ticket (its tile, in the order tiles start) and the launch's epoch, for a
// launch of `tickets` blocks (fewer than 2^32). ticket[0] is one word: its low 32 bits count
// the launch's tickets (zero between launches), its high 32 bits hold the last launch's epoch
// (0 before the first). One atomicAdd gives a block both its ticket and the last epoch, and
// the block that takes the last ticket writes this launch's epoch with a zero count: every
// other block's atomicAdd came before its own, so every block of a launch reads the same
// epoch, and the next launch on the stream starts after this one ends. (The epoch was a word
// of its own, read before the atomicAdd behind a __threadfence: that fence, a fence.sc,
// invalidated the multiprocessor's L1 at every block's start, dropping the lines other blocks
// had asked for ahead: H200, `reduce_by_key_into`, 2^24 short runs 1.048 -> 1.022 ms.)
__device__ __forceinline__ void take_ticket(unsigned long long* ticket, u64 tickets, u64& t, unsigned& epoch) {
    __shared__ u64 tile_id;
    __shared__ unsigned launch_epoch;
    if (threadIdx.x == 0) {
        const unsigned long long word = atomicAdd(ticket, 1ull);
        const u64 id = word & 0xffffffffull;
        const unsigned last_epoch = (unsigned)(word >> 32);
        // Never 0, which zeroed slots hold.
        const unsigned e = last_epoch == 0xffffffffu ? 1u : last_epoch + 1u;
        if (id == tickets - 1) atomicExch(ticket, (unsigned long long)e << 32);
        tile_id = id;
        launch_epoch = e;
    }
    __syncthreads();
    t = tile_id;
    epoch = launch_epoch;
}

}  // namespace cf
