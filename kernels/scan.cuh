// cufold: the device-wide scan.
//
// The canonical grouping (DESIGN.md): the exclusive prefix of position q is the left fold,
// largest block first, of the trees over the aligned power-of-two blocks that make up
// [0, q); the inclusive prefix of q is the exclusive prefix of q + 1. One launch, one block
// per tile of TILE = BLOCK * ITEMS positions (a power of two), tiles taken in order from a
// ticket counter:
//
//   thread   ITEMS contiguous positions: up-sweep in registers (the tree of the run)
//   block    BlockScan (block.cuh) over the runs' trees: the tile's tree, its leaf
//   grid     the tile's exclusive prefix P_t, the left fold of the trees over the aligned
//            blocks of tiles that make up [0, t) (look_back below):
//            - blocks of fewer than CHUNK tiles lie in t's aligned chunk of CHUNK tiles: one
//              warp reads the leaves published by the chunk's earlier tiles and builds their
//              trees itself, in shared memory;
//            - larger blocks are Fenwick nodes: the tile that ends a block of 2^m >= CHUNK
//              tiles publishes its tree, built from its own chunk and smaller such nodes.
//            Both give exactly the canonical trees, so the bits never depend on timing, and
//            no tile waits on a chain of other tiles' waits longer than log2(tiles / CHUNK).
//   down     BlockScan's down-sweep from P_t, then each thread's run in registers.
//
// Published values carry the launch's epoch in every 64-bit word, so they need no flags
// and no clearing between launches. A tile waits only on earlier tiles, which hold their
// tickets and so are running or done: no deadlock.
#pragma once

namespace cf {

// The up-sweep of a thread's run, in place: afterwards a[i + s - 1] holds the tree over
// [i, i + s) for every aligned block that is a left child (or the whole run: a[N - 1]).
template <int N, class Op, class Acc> __device__ __forceinline__ void run_up(const Op& op, Acc (&a)[N]) {
#pragma unroll
    for (int s = 1; s < N; s <<= 1)
#pragma unroll
        for (int i = 2 * s - 1; i < N; i += 2 * s) a[i] = op.combine(a[i - s], a[i]);
}

// The down-sweep of a run from the prefix `p` (empty if !has): e[j] becomes the exclusive
// prefix of item j (e[0] = p, the only one that may be empty).
template <int N, class Op, class Acc>
__device__ __forceinline__ void run_down(const Op& op, const Acc (&a)[N], Acc p, bool has, Acc (&e)[N]) {
    e[0] = p;
#pragma unroll
    for (int s = N / 2; s >= 1; s >>= 1)
#pragma unroll
        for (int i = 0; i < N; i += 2 * s) {
            Acc q = e[i];
            bool h = has || i > 0;
            extend(op, q, h, a[i + s - 1]);
            e[i + s] = q;
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
        if (pos + j < n) y[pos + j] = o[j];
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
// vectors.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}

// Starts copying the warp's 32 runs into `stage` (asynchronously, 16-byte coalesced copies)
// when the warp's span is whole and aligned; returns whether it did. Every lane of the warp
// gets the same answer.
template <int J, class In>
__device__ __forceinline__ bool stage_runs(const In* x, u64 n, u64 pos, bool aligned, uint4* stage) {
    constexpr int R = RunVectors<J, In>::R;
    if constexpr (R > 0) {
        const int lane = threadIdx.x & 31;
        const u64 wpos = pos - (u64)lane * J;
        if (!aligned || wpos + 32 * J > n) return false;
        const uint4* src = reinterpret_cast<const uint4*>(x + wpos);
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

// Stores this lane's run through the buffer when the warp's span is whole and aligned;
// returns whether it did (the same answer in every lane of the warp).
template <int J, class Out>
__device__ __forceinline__ bool store_run_warp(Out* y, u64 n, u64 pos, bool aligned, const Out (&o)[J],
                                               uint4* stage) {
    constexpr int R = RunVectors<J, Out>::R;
    if constexpr (R > 0) {
        const int lane = threadIdx.x & 31;
        const u64 wpos = pos - (u64)lane * J;
        if (!aligned || wpos + 32 * J > n) return false;
        uint4 raw[R];
        memcpy(raw, o, sizeof(raw));
#pragma unroll
        for (int k = 0; k < R; ++k) stage[lane * (R + 1) + k] = raw[k];
        __syncwarp();
        uint4* dst = reinterpret_cast<uint4*>(y + wpos);
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

// The look-back of tile t (tree `tile`), run by all 32 lanes of one warp. The nodes of the
// Fenwick tree over tiles: node_u is the tree over the 2^ctz(u+1) tiles ending at tile u.
// The exclusive prefix of tile t is the left fold, largest first, of the nodes of the blocks
// of t's binary decomposition (the node ending each block). Its last z = ctz(t + 1) blocks
// are the left children that node_t is built from (the low blocks, L); the others are the
// high blocks (H), shared with the decomposition of t + 1.
//
// Lane k < z waits for the node of low block k, lane z + k for the node of high block k, all
// at once. node_t is published as soon as the low nodes are in, before the high ones: a node
// then depends only on nodes inside its own block of tiles, so no chain of waits runs across
// many tiles. Lane 0 returns the tile's exclusive prefix (`has` false for tile 0) and I_t,
// the prefix through tile t (the exclusive prefix of tile t + 1).
// Tiles per chunk in the look-back (a power of two, 32 to 1024; the planner's ScanShape::chunk).
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
// prefix through tile t (P_{t+1}).
template <class Op>
__device__ __forceinline__ void look_back(const Op& op, const NodeSlots<typename Op::Acc>& leaves,
                                          const NodeSlots<typename Op::Acc>& nodes, u64 t,
                                          typename Op::Acc tile, bool have, typename Op::Acc early,
                                          typename Op::Acc* chunk, typename Op::Acc* big,
                                          typename Op::Acc& prefix, bool& has, typename Op::Acc& incl) {
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
    has = t > 0;
    bool h = false;
    Acc p = tile;
    for (int k = 0; k < nbig; ++k) extend(op, p, h, big[k]);
    for (int b = CHUNK_LOG - 1, start = 0; b >= 0; --b)
        if ((r >> b) & 1) {
            extend(op, p, h, chunk[start + (1 << b) - 1]);
            start += 1 << b;
        }
    if (has) prefix = p;
    if (r + 1 < CF_CHUNK) {
        // I_t = P_{t+1}: the same big blocks, then the blocks of r + 1.
        h = false;
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
        h = false;
        for (int k = 0; k < nbig - (z - CHUNK_LOG); ++k) extend(op, p, h, big[k]);
        extend(op, p, h, node);
        incl = p;
    }
}

}  // namespace cf

#ifdef CF_SCAN_KERNEL
// Instantiated by the generated source, which defines CF_OP, CF_BLOCK, CF_ITEMS (a power of
// two) and CF_ALGO (CF_SCAN_WARP, CF_SCAN_BLELLOCH or CF_SCAN_HILLIS).
typedef CF_OP cf_op_t;
typedef cf_op_t::In cf_in_t;
typedef cf_op_t::Acc cf_acc_t;
typedef cf_op_t::Out cf_out_t;

#define CF_SCAN_EXCLUSIVE 1u  // mode bits
#define CF_SCAN_X_ALIGNED 2u  // x is 16-byte aligned
#define CF_SCAN_Y_ALIGNED 4u  // y is 16-byte aligned
#define CF_SCAN_IN_PLACE 8u   // x and y are the same memory

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_scan(const cf_in_t* x, cf_out_t* y, cf::u64 n, cf::u64 tiles, unsigned mode, unsigned epoch,
        cf::u64 ticket_base, unsigned long long* ticket, unsigned long long* leaf_slots,
        unsigned long long* node_slots) {
    constexpr int J = CF_ITEMS;
    constexpr cf::u64 TILE = (cf::u64)CF_BLOCK * J;
    typedef cf::BlockScan<CF_ALGO, CF_BLOCK, cf_op_t, cf_acc_t> block_scan_t;
    __shared__ typename block_scan_t::Storage storage;
    __shared__ cf_acc_t next[CF_BLOCK + 1];
    __shared__ cf_acc_t tile_prefix;
    __shared__ bool tile_has;
    __shared__ cf_acc_t big[32];
    __shared__ cf_acc_t chunk[CF_CHUNK];
    __shared__ cf::u64 tile_id;
#if CF_STAGING
    constexpr int RV = cf::RunVectors<J, cf_in_t>::R > cf::RunVectors<J, cf_out_t>::R ? cf::RunVectors<J, cf_in_t>::R
                                                                                          : cf::RunVectors<J, cf_out_t>::R;
    __shared__ uint4 staging[CF_BLOCK / 32][RV > 0 ? 32 * (RV + 1) : 1];
    uint4* wstage = staging[threadIdx.x >> 5];
#endif
    const cf_op_t op{};

    cf::u64 t = 0;
    if (tiles > 1) {
        if (threadIdx.x == 0) tile_id = atomicAdd(ticket, 1ull) - ticket_base;
        __syncthreads();
        t = tile_id;
    }
    const cf::u64 pos = t * TILE + (cf::u64)threadIdx.x * J;

    // Start this thread's run on its way (a warp's runs through shared memory when whole and
    // aligned); take a first look at the look-back nodes while it travels; then lift the run
    // (identity past n).
    cf_acc_t a[J];
    const bool in_place = (mode & CF_SCAN_IN_PLACE) != 0;
    const bool x_aligned = (mode & CF_SCAN_X_ALIGNED) != 0;
#if CF_STAGING
    const bool staged = cf::stage_runs<J>(x, n, pos, x_aligned, wstage);
#else
    const bool staged = false;
#endif
    cf::NodeSlots<cf_acc_t> leaves{leaf_slots, epoch}, nodes{node_slots, epoch};
    cf_acc_t early;
    bool have = false;
    if (tiles > 1 && threadIdx.x < 32) {
        cf::u64 node;
        if (cf::big_block(t, threadIdx.x, node)) have = nodes.try_get(node, early);
    }
#if CF_STAGING
    if (staged) cf::lift_staged<J>(op, pos, a, wstage);
#endif
    if (!staged) cf::load_run<J>(op, x, n, pos, x_aligned, in_place, a);

    cf::run_up(op, a);
    block_scan_t bs;
    cf_acc_t tile_tree = bs.up(op, a[J - 1], storage);
    if (tiles == 1) {
        if (threadIdx.x == 0) {
            tile_has = false;
            next[CF_BLOCK] = tile_tree;
        }
    } else if (threadIdx.x < 32) {
        // Every BlockScan leaves the tile's tree in thread 0.
        cf_acc_t prefix, incl;
        bool h;
        cf::look_back(op, leaves, nodes, t, cf::shfl_idx(tile_tree, 0), have, early, chunk, big, prefix, h, incl);
        if (threadIdx.x == 0) {
            tile_prefix = prefix;
            tile_has = h;
            next[CF_BLOCK] = incl;
        }
    }
    __syncthreads();
    bool has = tile_has;
    cf_acc_t p = bs.down(op, tile_prefix, has, storage);
    next[threadIdx.x] = p;
    __syncthreads();

    // Exclusive prefixes of the run; the inclusive prefix of item j is the exclusive prefix
    // of item j + 1, or of the next thread's run for the last item.
    cf_acc_t e[J];
    cf::run_down(op, a, p, has, e);
    const bool exclusive = mode & CF_SCAN_EXCLUSIVE;
    cf_out_t o[J];
#pragma unroll
    for (int j = 0; j < J; ++j) {
        if (exclusive) {
            o[j] = op.finish(j == 0 && !has ? op.identity() : e[j], pos + j);
        } else {
            o[j] = op.finish(j + 1 < J ? e[j + 1 < J ? j + 1 : 0] : next[threadIdx.x + 1], pos + j + 1);
        }
    }
#if CF_STAGING
    if (!cf::store_run_warp<J>(y, n, pos, (mode & CF_SCAN_Y_ALIGNED) != 0, o, wstage))
#endif
        cf::store_run<J>(y, n, pos, (mode & CF_SCAN_Y_ALIGNED) != 0, o);
}
#endif
