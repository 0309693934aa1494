// cufold: the device-wide scan.
//
// The canonical grouping (docs/ARCHITECTURE.md): the exclusive prefix of position q is the left fold,
// largest block first, of the trees over the aligned power-of-two blocks that make up
// [0, q); the inclusive prefix of q is the exclusive prefix of q + 1. One launch, one block
// per tile of TILE = BLOCK * ITEMS positions (a power of two), tiles taken in order from a
// ticket counter:
//
//   thread   ITEMS contiguous positions (io.cuh, staged through shared memory): up-sweep in
//            registers (thread.cuh), the tree of the run
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
// ticket[0] is the ticket counter, zero between launches; ticket[1] the last launch's epoch
// (0 before the first). Each block reads ticket[1] before it takes its ticket, and the block
// that takes the last ticket writes this launch's epoch there and puts the counter back to
// zero: every block has read the old epoch by then (its read, a fence and its atomicAdd come
// before the last atomicAdd, whose fence comes before the write), and the next launch on the
// stream starts after this one ends. A tile waits only on earlier tiles, which hold their
// tickets and so are running or done: no deadlock.
#pragma once

#include "cufold/block.cuh"
#include "cufold/io.cuh"
#include "cufold/lookback.cuh"
#include "cufold/ops.cuh"

#ifdef CF_SCAN_KERNEL
// Instantiated by the generated source, which defines CF_OP, CF_BLOCK, CF_ITEMS (a power of
// two), CF_ALGO (CF_SCAN_WARP, CF_SCAN_BLELLOCH or CF_SCAN_HILLIS), CF_STAGING (0/1),
// CF_CHUNK, and the two numbers the host computed from its side of the contract, checked
// here: CF_SLOT_WORDS (64-bit words per published accumulator) and CF_SHARED_BYTES
// (ScanShape::shared_bytes, the static shared memory the planner budgets for); and
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

extern "C" __global__ void __launch_bounds__(CF_BLOCK)
cf_scan(const cf_in_t* x, cf_out_t* y, cf::u64 n, cf::u64 tiles, unsigned mode,
        unsigned long long* ticket, unsigned long long* leaf_slots,
        unsigned long long* node_slots, const cf::OpBytes<CF_OP_BYTES> op_bytes) {
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
    __shared__ unsigned launch_epoch;
#if CF_STAGING
    constexpr int RV = cf::RunVectors<J, cf_in_t>::R > cf::RunVectors<J, cf_out_t>::R ? cf::RunVectors<J, cf_in_t>::R
                                                                                          : cf::RunVectors<J, cf_out_t>::R;
    __shared__ uint4 staging[CF_BLOCK / 32][RV > 0 ? 32 * (RV + 1) : 1];
    uint4* wstage = staging[threadIdx.x >> 5];
#endif
    static_assert(cf::NodeSlots<cf_acc_t>::WORDS == CF_SLOT_WORDS, "the host's slot layout differs from NodeSlots'");
    constexpr unsigned long long SHARED = sizeof(storage) + sizeof(next) + sizeof(tile_prefix) + sizeof(tile_has) +
                                          sizeof(big) + sizeof(chunk) + sizeof(tile_id) + sizeof(launch_epoch)
#if CF_STAGING
                                          + sizeof(staging)
#endif
        ;
    static_assert(SHARED <= CF_SHARED_BYTES && CF_SHARED_BYTES - SHARED <= 64,
                  "ScanShape::shared_bytes no longer matches this kernel's __shared__ arrays");
    const cf_op_t op = cf::make_op<cf_op_t>(op_bytes);

    cf::u64 t = 0;
    unsigned epoch = 1;
    if (tiles > 1) {
        if (threadIdx.x == 0) {
            const unsigned last_epoch = (unsigned)*(volatile unsigned long long*)(ticket + 1);
            __threadfence();
            const cf::u64 id = atomicAdd(ticket, 1ull);
            // Never 0, which zeroed slots hold.
            const unsigned e = last_epoch == 0xffffffffu ? 1u : last_epoch + 1u;
            if (id == tiles - 1) {
                __threadfence();
                *(volatile unsigned long long*)(ticket + 1) = e;
                atomicExch(ticket, 0ull);
            }
            tile_id = id;
            launch_epoch = e;
        }
        __syncthreads();
        t = tile_id;
        epoch = launch_epoch;
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

    // The inclusive prefix of the run's last item is the next thread's exclusive prefix.
    cf_out_t o[J];
    cf::run_outputs(op, a, p, has, next[threadIdx.x + 1], pos, (mode & CF_SCAN_EXCLUSIVE) != 0, o);
#if CF_STAGING
    if (!cf::store_run_warp<J>(y, n, pos, (mode & CF_SCAN_Y_ALIGNED) != 0, o, wstage))
#endif
        cf::store_run<J>(y, n, pos, (mode & CF_SCAN_Y_ALIGNED) != 0, o);
}
#endif
