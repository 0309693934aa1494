// cufold: the device-wide scan.
//
// The canonical grouping (docs/ARCHITECTURE.md): the exclusive prefix of position q is the left fold,
// largest block first, of the trees over the aligned power-of-two blocks that make up
// [0, q); the inclusive prefix of q is the exclusive prefix of q + 1. One launch, one block
// per tile of TILE = BLOCK * ITEMS positions (a power of two), tiles taken in order from a
// ticket counter:
//
//   thread   ITEMS contiguous positions (io.cuh, staged through shared memory): up-sweep in
//            registers (thread.cuh), the tree of the run. Two data paths: the run held in
//            registers from its load to its store, or (CF_STAGING == 2, ScanShape::resident)
//            the tile resident in shared memory and the run taken in pieces of eight (four
//            for 8-byte accumulators), its tree the tree of the pieces' trees, so that a
//            waiting tile holds few registers and six blocks share a multiprocessor where
//            four did (CF_MIN_BLOCKS)
//   block    BlockScan (block.cuh) over the runs' trees: the tile's tree, its leaf
//   grid     the tile's exclusive prefix P_t, the left fold of the trees over the aligned
//            blocks of tiles that make up [0, t) (cf::look_back, lookback.cuh):
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
// and no clearing between launches. Tile order and epoch live on the device, so that no
// launch depends on numbers kept by the host and a captured CUDA graph replays correctly:
// one word holds the ticket count (low 32 bits, zero between launches) and the last launch's
// epoch (high 32 bits, 0 before the first); a block's atomicAdd on it returns both, and the
// block that takes the last ticket writes this launch's epoch with a zero count
// (cf::take_ticket). A tile waits only on earlier tiles, which hold their tickets and so are
// running or done: no deadlock.
#pragma once

#include "cufold/block.cuh"
#include "cufold/io.cuh"
#include "cufold/long_list.cuh"
#include "cufold/lookback.cuh"
#include "cufold/ops.cuh"

#ifdef CF_SCAN_KERNEL
// Launch bounds: with CF_MIN_BLOCKS (ScanShape::min_blocks, resident tiles), registers for
// that many blocks per multiprocessor; otherwise the compiler's choice.
#if defined(CF_MIN_BLOCKS) && CF_MIN_BLOCKS > 1
#define CF_SCAN_BOUNDS __launch_bounds__(CF_BLOCK, CF_MIN_BLOCKS)
#else
#define CF_SCAN_BOUNDS __launch_bounds__(CF_BLOCK)
#endif
// Instantiated by the generated source, which defines CF_OP, CF_BLOCK, CF_ITEMS (a power of
// two), CF_ALGO (CF_SCAN_WARP, CF_SCAN_BLELLOCH or CF_SCAN_HILLIS), CF_STAGING (0: none,
// 1: staged runs in registers, 2: resident tiles), CF_MIN_BLOCKS, CF_PREFETCH (tiles ahead
// whose input a block asks the L2 for; 0: none), CF_CHUNK, and the two
// numbers the host computed from its side of the contract, checked
// here: CF_SLOT_WORDS (64-bit words per published accumulator) and CF_SHARED_BYTES
// (ScanShape::shared_bytes, the shared memory the planner budgets for, static and the
// resident tile's dynamic); and
// CF_OP_BYTES, the size of the operator's run-time parameters (0 for none).
typedef CF_OP cf_op_t;
typedef cf_op_t::In cf_in_t;
typedef cf_op_t::Acc cf_acc_t;
typedef cf_op_t::Out cf_out_t;

// Mode bits (src/scan/gpu.rs reads these definitions, through build.rs).
#define CF_SCAN_EXCLUSIVE 1u  // mode bits
#define CF_SCAN_X_ALIGNED 2u  // x is 16-byte aligned
#define CF_SCAN_Y_ALIGNED 4u  // y is 16-byte aligned
#define CF_SCAN_IN_PLACE 8u   // x and y are the same memory

typedef cf::BlockScan<CF_ALGO, CF_BLOCK, cf_op_t, cf_acc_t> cf_block_scan_t;

// The middle of tile t, by the whole block, from each thread's run tree `run` to its
// exclusive prefix (returned; empty unless `has`), with `next_out` pointed at the block's
// exclusive prefixes in shared memory (thread i's at i; the prefix through the tile at
// CF_BLOCK): the block's up-sweep, the tile's exclusive prefix P_t (the carry's fold for a
// single tile, else the look-back over `leaves` and `nodes`, `have`/`early` its first look at the big nodes), and
// the block's down-sweep. `carry`, when given, is the exclusive prefix of the positions
// before x (a rank's chunk of a distributed scan, src/dist): every prefix is folded from
// it, first, then the blocks of the tile's own decomposition.
__device__ __forceinline__ cf_acc_t cf_tile_middle(const cf_op_t& op, cf_acc_t run, cf::u64 t, cf::u64 tiles,
                                                   const cf::NodeSlots<cf_acc_t>& leaves,
                                                   const cf::NodeSlots<cf_acc_t>& nodes, bool have, cf_acc_t early,
                                                   const cf_acc_t* carry, const cf_acc_t*& next_out, bool& has) {
    __shared__ cf_block_scan_t::Storage storage;
    __shared__ cf_acc_t next[CF_BLOCK + 1];
    __shared__ cf_acc_t tile_prefix;
    __shared__ bool tile_has;
    __shared__ cf_acc_t big[32];
    __shared__ cf_acc_t chunk[CF_CHUNK];
    cf_block_scan_t bs;
    cf_acc_t tile_tree = bs.up(op, run, storage);
    if (tiles == 1) {
        if (threadIdx.x == 0) {
            tile_has = carry != nullptr;
            if (carry) {
                tile_prefix = *carry;
                next[CF_BLOCK] = op.combine(*carry, tile_tree);
            } else {
                next[CF_BLOCK] = tile_tree;
            }
        }
    } else if (threadIdx.x < 32) {
        // Every BlockScan leaves the tile's tree in thread 0.
        cf_acc_t prefix, incl;
        bool h;
        cf::look_back(op, leaves, nodes, t, cf::shfl_idx(tile_tree, 0), have, early, chunk, big, prefix, h,
                      incl, carry);
        if (threadIdx.x == 0) {
            tile_prefix = prefix;
            tile_has = h;
            next[CF_BLOCK] = incl;
        }
    }
    __syncthreads();
    has = tile_has;
    cf_acc_t p = bs.down(op, tile_prefix, has, storage);
    next[threadIdx.x] = p;
    __syncthreads();
    next_out = next;
    return p;
}

// A first look at the look-back's big nodes, by the look-back warp while the tile's loads
// travel.
__device__ __forceinline__ bool cf_early_look(const cf::NodeSlots<cf_acc_t>& nodes, cf::u64 t, cf::u64 tiles,
                                              cf_acc_t& early) {
    cf::u64 node;
    return tiles > 1 && threadIdx.x < 32 && cf::big_block(t, threadIdx.x, node) && nodes.try_get(node, early);
}

// Asks the L2 for the input of tile t + CF_PREFETCH (ScanShape::prefetch; 0: none) where
// that tile is whole: the block that takes it later finds it there, so that reads from
// memory run ahead of the blocks, which spend part of a tile's life on its look-back and
// stores. A hint only: the bits do not change.
__device__ __forceinline__ void cf_prefetch_ahead(const cf_in_t* x, cf::u64 n, cf::u64 t) {
#if CF_PREFETCH
    constexpr cf::u64 TILE = (cf::u64)CF_BLOCK * CF_ITEMS;
    const cf::u64 ahead = t + CF_PREFETCH;
    if ((ahead + 1) * TILE <= n) cf::prefetch_l2<TILE * sizeof(cf_in_t)>(x + ahead * TILE);
#endif
}

// The shared memory ScanShape::shared_bytes budgets for: cf_tile_middle's, the data path's
// PATH bytes (dynamic on the resident path), and cf::take_ticket's tile_id and launch_epoch.
template <unsigned long long PATH> __device__ __forceinline__ void cf_check_shared() {
    constexpr unsigned long long MIDDLE =
        sizeof(cf_block_scan_t::Storage) + (CF_BLOCK + 1 + 1 + 32 + CF_CHUNK) * sizeof(cf_acc_t) + sizeof(bool);
    constexpr unsigned long long SHARED = MIDDLE + PATH + sizeof(cf::u64) + sizeof(unsigned);
    static_assert(SHARED <= CF_SHARED_BYTES && CF_SHARED_BYTES - SHARED <= 64,
                  "ScanShape::shared_bytes no longer matches this kernel's __shared__ arrays");
}

// Tile t of the scan of the n values at x into y (`tiles` tiles; the look-back's leaves and
// nodes in `leaves` and `nodes`, indexed by tile; `carry` as for cf_tile_middle): the whole
// of kernels/scan.cuh's scheme for one tile, by the whole block.
#if CF_STAGING == 2
// Resident tiles (ScanShape::resident): each warp's runs stay in shared memory (io.cuh,
// load_resident) from the load to the store, and a thread holds its run in pieces of S
// values, so that a tile waiting for the look-back holds its data once, in shared memory,
// and few registers: more tiles wait at a time. The same combinations as the other path:
// the run's tree is run_up over the pieces' trees, the pieces' prefixes run_down over them,
// then each piece's outputs from its own prefix.
__device__ __forceinline__ void cf_scan_tile(const cf_op_t& op, const cf_in_t* x, cf_out_t* y, cf::u64 n, cf::u64 t,
                                             cf::u64 tiles, unsigned mode, const cf::NodeSlots<cf_acc_t>& leaves,
                                             const cf::NodeSlots<cf_acc_t>& nodes, const cf_acc_t* carry = nullptr) {
    constexpr int J = CF_ITEMS;
    constexpr cf::u64 TILE = (cf::u64)CF_BLOCK * J;
    constexpr int R = cf::RunVectors<J, cf_in_t>::R;
    static_assert(sizeof(cf_out_t) == sizeof(cf_in_t), "resident tiles put outputs where their inputs were");
    // Pieces of eight values (four of 8-byte accumulators), or of one vector where that
    // holds more; M to a run.
    constexpr int SA = sizeof(cf_acc_t) > 4 ? 4 : 8;
    constexpr int S0 = 16 / (int)sizeof(cf_in_t) > SA ? 16 / (int)sizeof(cf_in_t) : SA;
    constexpr int S = S0 < J ? S0 : J;
    constexpr int M = J / S;
    // Dynamic shared memory (ScanShape::dynamic_bytes, passed by every launch), so that a
    // tile may pass the 48 KiB a kernel declares statically.
    extern __shared__ uint4 cf_resident[];
    cf_check_shared<(unsigned long long)CF_BLOCK * R * 16>();
    uint4* wstage = cf_resident + (threadIdx.x >> 5) * (32 * R);
    const cf::u64 pos = t * TILE + (cf::u64)threadIdx.x * J;

    const bool async = cf::load_resident<J>(x, n, pos, (mode & CF_SCAN_X_ALIGNED) != 0, wstage);
    cf_prefetch_ahead(x, n, t);
    cf_acc_t early;
    const bool have = cf_early_look(nodes, t, tiles, early);
    if (async) cf::resident_wait();

    // The pieces' trees, then the run's.
    cf_acc_t sub[M];
#pragma unroll
    for (int m = 0; m < M; ++m) {
        cf_acc_t a[S];
        cf::lift_resident<S, J>(op, wstage, m, pos + m * S, n, a);
        cf::run_up(op, a);
        sub[m] = a[S - 1];
    }
    cf::run_up(op, sub);
    bool has;
    const cf_acc_t* next;
    const cf_acc_t p = cf_tile_middle(op, sub[M - 1], t, tiles, leaves, nodes, have, early, carry, next, has);

    // The pieces' exclusive prefixes, then each piece's outputs where its inputs were (or
    // straight to y where the warp's span is not whole). The inclusive prefix
    // of the run's last item is the next thread's exclusive prefix.
    cf_acc_t e[M];
    cf::run_down(op, sub, p, has, e);
    const bool exclusive = (mode & CF_SCAN_EXCLUSIVE) != 0;
    const bool y_aligned = (mode & CF_SCAN_Y_ALIGNED) != 0;
    const bool whole = cf::warp_span_whole<J>(n, pos, true);
#pragma unroll
    for (int m = 0; m < M; ++m) {
        cf_acc_t a[S];
        cf::lift_resident<S, J>(op, wstage, m, pos + m * S, n, a);
        cf::run_up(op, a);
        cf_out_t o[S];
        cf::run_outputs(op, a, e[m], has || m > 0, m + 1 < M ? e[m + 1 < M ? m + 1 : 0] : next[threadIdx.x + 1],
                        pos + m * S, exclusive, o);
        if (whole)
            cf::put_resident<S, J>(wstage, m, o);
        else
            cf::store_run<S>(y, n, pos + m * S, y_aligned, o);
    }
    if (whole) cf::store_resident<J>(y, pos, y_aligned, wstage);
}
#else
// Runs in registers: each thread loads its run (a warp's runs staged through shared memory
// when CF_STAGING, whole and aligned) and holds it through the look-back.
__device__ __forceinline__ void cf_scan_tile(const cf_op_t& op, const cf_in_t* x, cf_out_t* y, cf::u64 n, cf::u64 t,
                                             cf::u64 tiles, unsigned mode, const cf::NodeSlots<cf_acc_t>& leaves,
                                             const cf::NodeSlots<cf_acc_t>& nodes, const cf_acc_t* carry = nullptr) {
    constexpr int J = CF_ITEMS;
    constexpr cf::u64 TILE = (cf::u64)CF_BLOCK * J;
#if CF_STAGING
    constexpr int RV = cf::RunVectors<J, cf_in_t>::R > cf::RunVectors<J, cf_out_t>::R ? cf::RunVectors<J, cf_in_t>::R
                                                                                          : cf::RunVectors<J, cf_out_t>::R;
    __shared__ uint4 staging[CF_BLOCK / 32][RV > 0 ? 32 * (RV + 1) : 1];
    uint4* wstage = staging[threadIdx.x >> 5];
    cf_check_shared<sizeof(staging)>();
#else
    cf_check_shared<0>();
#endif
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
    cf_prefetch_ahead(x, n, t);
    cf_acc_t early;
    const bool have = cf_early_look(nodes, t, tiles, early);
#if CF_STAGING
    if (staged) cf::lift_staged<J>(op, pos, a, wstage);
#endif
    if (!staged) cf::load_run<J>(op, x, n, pos, x_aligned, in_place, a);

    cf::run_up(op, a);
    bool has;
    const cf_acc_t* next;
    const cf_acc_t p = cf_tile_middle(op, a[J - 1], t, tiles, leaves, nodes, have, early, carry, next, has);

    // The inclusive prefix of the run's last item is the next thread's exclusive prefix.
    cf_out_t o[J];
    cf::run_outputs(op, a, p, has, next[threadIdx.x + 1], pos, (mode & CF_SCAN_EXCLUSIVE) != 0, o);
#if CF_STAGING
    if (!cf::store_run_warp<J>(y, n, pos, (mode & CF_SCAN_Y_ALIGNED) != 0, o, wstage))
#endif
        cf::store_run<J>(y, n, pos, (mode & CF_SCAN_Y_ALIGNED) != 0, o);
}
#endif

#ifndef CF_SCAN_LONG
extern "C" __global__ void CF_SCAN_BOUNDS
cf_scan(const cf_in_t* x, cf_out_t* y, cf::u64 n, cf::u64 tiles, unsigned mode,
        unsigned long long* ticket, unsigned long long* leaf_slots,
        unsigned long long* node_slots, const cf_acc_t* carry, const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    cf::u64 t = 0;
    unsigned epoch = 1;
    if (tiles > 1) cf::take_ticket(ticket, tiles, t, epoch);
    const cf::NodeSlots<cf_acc_t> leaves{leaf_slots, epoch}, nodes{node_slots, epoch};
    cf_scan_tile(op, x, y, n, t, tiles, mode, leaves, nodes, carry);
}
#else
// The long pass of the segmented scan (the source defines CF_SCAN_LONG): after a
// thread-schedule launch of kernels/segment_scan.cuh has listed the segments of half a
// tile or more (cf::scan_long_list), every listed segment is scanned as the device-wide scan
// scans a whole array, each on its own: global tile g (the block's ticket) is tile
// g - first of the segment that reserved it, with its leaves and nodes at slot `first`
// onwards. A segment's tiles are consecutive tickets, so a tile waits only on earlier tiles
// of its own segment, which hold earlier tickets. The host does not know how many tiles
// were reserved, so the grid is what the device holds at once (or the list's tile capacity
// if smaller), and each block takes tickets until one is past the reserved tiles: a block
// finishes its tile before it takes the next ticket, and a tile waits only on earlier
// tickets, which running blocks hold, so every wait ends. (A grid of the list's capacity,
// one ticket a block, spent about 300 us on an H100 launching 24 577 blocks that found no
// tile, for 2^28 positions.) Tiles of a segment that found the list full (scanned by its
// warp instead) are skipped. Outputs go to the segment's own positions of y.
extern "C" __global__ void CF_SCAN_BOUNDS
cf_scan_long(const cf_in_t* x, cf_out_t* y, cf::u64 n, unsigned exclusive, unsigned long long* ticket,
             unsigned long long* leaf_slots, unsigned long long* node_slots, cf::u64* long_hdr,
             const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    constexpr int TILE_LOG = cf::ilog2(CF_BLOCK * CF_ITEMS);
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    const cf::LongList l = cf::scan_long_list(long_hdr, n, TILE_LOG);
    // Written by the filling launch, so the same in every block: each block takes one
    // ticket past the reserved tiles, and the last of all resets the counter.
    const cf::u64 reserved = l.reserved();
    constexpr int W = cf::NodeSlots<cf_acc_t>::WORDS;
    unsigned first_epoch = 0;
    for (;;) {
        // Every thread has read the last ticket (and is done with the last tile's shared
        // memory) before thread 0 takes the next.
        __syncthreads();
        cf::u64 g;
        unsigned epoch;
        cf::take_ticket(ticket, reserved + gridDim.x, g, epoch);
        // The epoch read before a block's first ticket is the launch's: the counter's word
        // changes only at the last ticket of all, which no block takes before its first.
        if (first_epoch == 0) first_epoch = epoch;
        if (g >= reserved) return;
        const unsigned slot = l.owner()[g];
        if (slot == ~0u) continue;  // the same for the whole block
        const cf::u64* e = l.entry(slot);
        const cf::u64 lo = e[1], len = e[2], first = e[3];
        const cf_in_t* xs = x + lo;
        cf_out_t* ys = y + lo;
        unsigned mode = exclusive ? CF_SCAN_EXCLUSIVE : 0u;
        if ((reinterpret_cast<unsigned long long>(xs) & 15) == 0) mode |= CF_SCAN_X_ALIGNED;
        if ((reinterpret_cast<unsigned long long>(ys) & 15) == 0) mode |= CF_SCAN_Y_ALIGNED;
        const cf::NodeSlots<cf_acc_t> leaves{leaf_slots + first * W, first_epoch},
            nodes{node_slots + first * W, first_epoch};
        cf_scan_tile(op, xs, ys, len, g - first, (len + (1ull << TILE_LOG) - 1) >> TILE_LOG, mode, leaves, nodes);
    }
}

// The rows of a matrix, each scanned as the device-wide scan scans a whole array, in one
// launch (the segmented scan's whole-row schedule, for a few long rows): ticket g is tile
// g % per_row of row g / per_row (per_row tiles to a row of `cols`), the row's leaves and
// nodes at slot row * per_row onwards. A row's tiles are consecutive tickets, so a tile
// waits only on earlier tiles of its own row. Row r is read at x + r * stride and written
// at y + r * cols (packed). The grid is rows * per_row blocks.
extern "C" __global__ void CF_SCAN_BOUNDS
cf_scan_rows(const cf_in_t* x, cf_out_t* y, cf::u64 stride, cf::u64 cols, cf::u64 per_row, unsigned exclusive,
             unsigned long long* ticket, unsigned long long* leaf_slots, unsigned long long* node_slots,
             const cf::OpBytes<CF_OP_BYTES> op_bytes) {
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);
    cf::u64 g;
    unsigned epoch;
    cf::take_ticket(ticket, gridDim.x, g, epoch);
    const cf::u64 r = g / per_row, t = g - r * per_row;
    const cf_in_t* xs = x + r * stride;
    cf_out_t* ys = y + r * cols;
    unsigned mode = exclusive ? CF_SCAN_EXCLUSIVE : 0u;
    if ((reinterpret_cast<unsigned long long>(xs) & 15) == 0) mode |= CF_SCAN_X_ALIGNED;
    if ((reinterpret_cast<unsigned long long>(ys) & 15) == 0) mode |= CF_SCAN_Y_ALIGNED;
    constexpr int W = cf::NodeSlots<cf_acc_t>::WORDS;
    const cf::NodeSlots<cf_acc_t> leaves{leaf_slots + r * per_row * W, epoch}, nodes{node_slots + r * per_row * W, epoch};
    cf_scan_tile(op, xs, ys, cols, t, per_row, mode, leaves, nodes);
}
#endif
#endif
