//! The scan's launch planner: pure functions from (N, type sizes, options) to a kernel shape
//! and a launch plan, unit-tested on the CPU.
//!
//! Every scan kernel follows the canonical grouping (crate docs), so the shape changes only
//! the speed, never the bits.

use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::check_block;
use crate::gpu::jit::embedded::defines;
use crate::ops::Operator;

/// The block-level algorithm of a device-wide scan (`kernels/block.cuh`). All three compute
/// the canonical grouping (crate docs), so they give the same bits; they differ in schedule
/// and speed. `n` below is the number of values a block scans (one per thread).
///
/// ```
/// use cufold::ScanAlgorithm;
/// let config = cufold::scan::ScanConfig::default().algorithm(ScanAlgorithm::WarpShuffle);
/// assert_eq!(config.get_algorithm(), ScanAlgorithm::WarpShuffle);
/// assert_eq!(ScanAlgorithm::default(), ScanAlgorithm::Blelloch);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ScanAlgorithm {
    /// Each warp scans its 32 values with register shuffles (a butterfly up, keeping each
    /// step's neighbouring block, then a fold of those, largest first), and one warp scans
    /// the warp totals the same way. Shared memory: two values per warp. Steps:
    /// log2(32) + log2(n / 32) shuffle rounds; work O(n log n) combines.
    WarpShuffle,
    /// Blelloch's work-efficient scan: an up-sweep building the tree over a shared array and
    /// a down-sweep handing each node its prefix. Work 2 (n - 1) combines, 2 log2(n) steps,
    /// with the number of active threads halving, then doubling, from step to step. The
    /// default: the fastest on an H100 (BENCHMARKS.md), and the fewest registers.
    #[default]
    Blelloch,
    /// Hillis and Steele's step-efficient schedule: at each of log2(n) doubling steps every
    /// thread exchanges its block's tree with thread `i ^ 2^d` through shared memory and
    /// keeps the left neighbour's, then it folds those onto the incoming prefix, largest
    /// first. Work O(n log n) combines, every thread active at every step.
    HillisSteele,
}

impl ScanAlgorithm {
    /// The value of `CF_ALGO` in `kernels/block.cuh`.
    pub(crate) fn cuda_id(self) -> u32 {
        match self {
            ScanAlgorithm::WarpShuffle => defines::CF_SCAN_WARP,
            ScanAlgorithm::Blelloch => defines::CF_SCAN_BLELLOCH,
            ScanAlgorithm::HillisSteele => defines::CF_SCAN_HILLIS,
        }
    }
}

/// The byte sizes of a scan's input, accumulator and output types: what the planner needs to
/// know about an operator.
///
/// ```
/// use cufold::scan::TypeSizes;
/// let s = TypeSizes::of::<cufold::f16, cufold::ops::Mean>();
/// assert_eq!((s.input, s.acc, s.output), (2, 4, 8));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeSizes {
    /// Bytes of an input element.
    pub input: usize,
    /// Bytes of an accumulator.
    pub acc: usize,
    /// Bytes of an output element.
    pub output: usize,
}

impl TypeSizes {
    /// The sizes for `op: O` over elements of type `T`.
    ///
    /// ```
    /// let s = cufold::scan::TypeSizes::of::<f32, cufold::ops::ArgMax>();
    /// assert_eq!((s.input, s.acc, s.output), (4, 16, 16));
    /// ```
    pub fn of<T: DeviceValue, O: Operator<T>>() -> TypeSizes {
        TypeSizes {
            input: std::mem::size_of::<T>(),
            acc: std::mem::size_of::<O::Acc>(),
            output: std::mem::size_of::<O::Out>(),
        }
    }

    /// The same size for all three (an operator such as `Sum`).
    ///
    /// ```
    /// assert_eq!(cufold::scan::TypeSizes::uniform(8).output, 8);
    /// ```
    pub fn uniform(size: usize) -> TypeSizes {
        TypeSizes {
            input: size,
            acc: size,
            output: size,
        }
    }
}

/// Compile-time shape of a scan kernel: one compiled kernel serves every N.
///
/// ```
/// use cufold::scan::{ScanShape, TypeSizes};
/// use cufold::ScanAlgorithm;
/// let s = ScanShape::for_sizes(TypeSizes::uniform(4), 256, 128, ScanAlgorithm::WarpShuffle, true).unwrap();
/// assert_eq!((s.block, s.items, s.tile()), (256, 32, 8192)); // f32 sum: 128 bytes per thread
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScanShape {
    /// Threads per block: a power of two from 32 to 1024.
    pub block: u32,
    /// Contiguous positions per thread: a power of two from 1 to 32 (to 128 on the resident
    /// path of [`ScanShape::large`]).
    pub items: u32,
    /// The block-level algorithm.
    pub algorithm: ScanAlgorithm,
    /// Whether whole warps move their runs through shared memory, so that global loads and
    /// stores are coalesced 16-byte accesses (when a run is a whole number of 16-byte
    /// vectors), rather than each thread reading its own run.
    pub staging: bool,
    /// Whether a staged tile stays resident in shared memory, from its load to its store,
    /// while each thread holds a few of its values at a time (kernels/scan.cuh,
    /// `CF_STAGING == 2`): a tile that waits for the look-back then holds its data once, in
    /// shared memory, and few registers, and [`ScanShape::min_blocks`] blocks share a
    /// multiprocessor where four did. The planner takes it for accumulators of at most 4
    /// bytes (8 where [`ScanConfig::resident_acc_bytes`] admits them), inputs and outputs of
    /// one size (a power of two up to 16 bytes) and a block that leaves room for at least
    /// 1280 threads' blocks, or three of 64 KiB of values, in 228 KiB of shared memory (an
    /// H100's); elsewhere the staged path holds the runs in registers. The resident tile is
    /// dynamic shared memory ([`ScanShape::dynamic_bytes`]), so it may pass 48 KiB.
    ///
    /// [`ScanConfig::resident_acc_bytes`]: super::ScanConfig::resident_acc_bytes
    pub resident: bool,
    /// The fewest blocks per multiprocessor the kernel's registers are budgeted for
    /// (`__launch_bounds__`): for resident tiles 1536 threads' worth (40 registers each), or
    /// as many as the shared memory holds; otherwise 1 (the compiler's choice: bounds of 64
    /// registers on the staged path, tried on an H100, won 2% for f64 sums and lost 2-8% for
    /// affine maps, BENCHMARKS.md).
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// let f32s = ScanShape::for_sizes(TypeSizes::uniform(4), 256, 128, Default::default(), true).unwrap();
    /// assert_eq!((f32s.resident, f32s.min_blocks), (true, 6));
    /// // f64: 8-byte accumulators, runs in registers by default.
    /// let f64s = ScanShape::for_sizes(TypeSizes::uniform(8), 256, 128, Default::default(), true).unwrap();
    /// assert_eq!((f64s.resident, f64s.min_blocks), (false, 1));
    /// ```
    pub min_blocks: u32,
    /// How many tiles ahead each block asks the L2 cache for the input of a later tile (0:
    /// none): tile `t`'s block prefetches tile `t + prefetch`, so that reads from memory run
    /// ahead of the blocks that wait for the look-back. A hint only: the bits do not change.
    /// Set by [`ScanShape::with_prefetch`] on the shape for large inputs
    /// ([`ScanConfig::prefetch_bytes`](super::ScanConfig::prefetch_bytes)).
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// let s = ScanShape::for_sizes(TypeSizes::uniform(4), 256, 128, Default::default(), true).unwrap();
    /// assert_eq!(s.prefetch, 0);
    /// assert_eq!(s.with_prefetch(TypeSizes::uniform(4), 1 << 20).prefetch, 32); // 32 KiB tiles
    /// ```
    pub prefetch: u32,
    /// Tiles per look-back chunk (a power of two from 32 to 256): blocks of fewer tiles are
    /// rebuilt from published tile trees by the tile that needs them, larger ones are
    /// published once (kernels/scan.cuh). At most 8 KiB of accumulators.
    pub chunk: u32,
}

/// The most static shared memory a kernel may declare.
const MAX_SHARED: usize = 48 * 1024;
/// The most contiguous positions one thread scans.
const MAX_ITEMS: usize = 32;
/// Shared memory of one multiprocessor (an H100's), and what the system takes per block.
const SM_SHARED: usize = 228 * 1024;
const SHARED_PER_BLOCK_RESERVED: usize = 1024;
/// The most shared memory a block may take, static and dynamic (an H100's opt-in limit).
const MAX_SHARED_OPTIN: usize = 227 * 1024;
/// The most contiguous positions one thread scans on a large shape's resident path.
const LARGE_MAX_ITEMS: usize = 128;
/// Input bytes of a large tile ([`ScanShape::large`]), and the blocks of it that share a
/// multiprocessor.
const LARGE_TILE_BYTES: usize = 64 * 1024;
const LARGE_BLOCKS: u32 = 3;
/// Resident tiles in flight per multiprocessor that stand in for RESIDENT_MIN_THREADS (three
/// blocks of 64 KiB: f32 on 512 x 32 or 256 x 64, f64 on 256 x 32).
const RESIDENT_MIN_IN_FLIGHT: usize = 192 * 1024;
/// Threads per multiprocessor a resident shape aims at (40 registers each; fewer where the
/// shared memory holds fewer blocks), and the fewest it takes (48 registers each: five
/// blocks of 256, as for f64 with the default block scan, whose six do not fit).
const RESIDENT_THREADS: u32 = 1536;
const RESIDENT_MIN_THREADS: u32 = 1280;
/// The largest accumulator whose tiles stay resident by default
/// ([`ScanConfig::resident_acc_bytes`](super::ScanConfig::resident_acc_bytes)).
const RESIDENT_ACC: usize = 4;

impl ScanShape {
    /// The shape for operators with these type `sizes`, `block` threads per block, about
    /// `bytes_per_thread` bytes of input per thread (a thread's accumulators are held to
    /// twice that, so that wide accumulators do not spill), the block-level `algorithm`, and
    /// whether warps stage their runs through shared memory.
    ///
    /// Errors if `block` is not a power of two in 32..=1024, or if the block's shared memory
    /// would pass 48 KiB.
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// use cufold::ScanAlgorithm::*;
    /// let f16 = TypeSizes::uniform(2);
    /// assert_eq!(ScanShape::for_sizes(f16, 256, 64, WarpShuffle, true).unwrap().items, 32);
    /// let meanvar = TypeSizes { input: 4, acc: 24, output: 24 };
    /// assert_eq!(ScanShape::for_sizes(meanvar, 256, 64, WarpShuffle, true).unwrap().items, 4);
    /// assert!(ScanShape::for_sizes(f16, 2048, 64, Blelloch, true).is_err());
    /// assert!(ScanShape::for_sizes(TypeSizes::uniform(256), 1024, 64, Blelloch, false).is_err());
    /// ```
    pub fn for_sizes(
        sizes: TypeSizes,
        block: u32,
        bytes_per_thread: usize,
        algorithm: ScanAlgorithm,
        staging: bool,
    ) -> Result<ScanShape> {
        ScanShape::build(
            sizes,
            block,
            bytes_per_thread,
            algorithm,
            staging,
            RESIDENT_ACC,
            MAX_ITEMS,
        )
    }

    /// [`ScanShape::for_sizes`], with resident tiles only for accumulators of at most
    /// `resident_acc` bytes (0: never), and runs of up to `max_resident_items` values on the
    /// resident path (32 elsewhere).
    pub(crate) fn build(
        sizes: TypeSizes,
        block: u32,
        bytes_per_thread: usize,
        algorithm: ScanAlgorithm,
        staging: bool,
        resident_acc: usize,
        max_resident_items: usize,
    ) -> Result<ScanShape> {
        check_block(block)?;
        let fit = |bytes: usize, size: usize| {
            let k = (bytes / size.max(1)).max(1);
            1usize << k.ilog2()
        };
        let wanted = fit(bytes_per_thread, sizes.input).min(fit(2 * bytes_per_thread, sizes.acc));
        let items = wanted.min(MAX_ITEMS);
        let chunk = (8192 / sizes.acc.max(1)).clamp(32, 256);
        let mut shape = ScanShape {
            block,
            items: items as u32,
            algorithm,
            staging,
            resident: false,
            min_blocks: 1,
            prefetch: 0,
            chunk: 1 << chunk.ilog2(),
        };
        if staging && shape.resident_runs(sizes, resident_acc) {
            let mut resident = ScanShape {
                resident: true,
                items: wanted.min(max_resident_items) as u32,
                ..shape
            };
            if !resident.resident_runs(sizes, resident_acc) {
                resident.items = shape.items;
            }
            let smem = resident.shared_bytes(sizes);
            let blocks_in_shared = SM_SHARED / (smem + SHARED_PER_BLOCK_RESERVED);
            resident.min_blocks = (RESIDENT_THREADS / block)
                .max(1)
                .min(blocks_in_shared as u32);
            let fewest = RESIDENT_MIN_THREADS
                .div_ceil(block)
                .min(RESIDENT_THREADS / block)
                .max(1);
            let in_flight = resident.min_blocks as usize * resident.dynamic_bytes(sizes);
            let static_bytes = smem - resident.dynamic_bytes(sizes);
            if static_bytes <= MAX_SHARED
                && smem <= MAX_SHARED_OPTIN
                && (resident.min_blocks >= fewest || in_flight >= RESIDENT_MIN_IN_FLIGHT)
            {
                shape = resident;
            }
        }
        let smem = shape.static_bytes(sizes);
        if smem > MAX_SHARED {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "a {algorithm:?} scan with {block} threads per block needs {smem} bytes of shared \
                     memory for these types ({sizes:?}), more than the {MAX_SHARED} allowed: use a \
                     smaller scan block size or fewer bytes per thread"
                ),
            ));
        }
        Ok(shape)
    }

    /// Like [`ScanShape::for_sizes`], with the largest block size up to `block` whose shared
    /// memory fits (at least 32): a default that works for every operator.
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// use cufold::ScanAlgorithm::Blelloch;
    /// assert_eq!(ScanShape::fitting(TypeSizes::uniform(4), 256, 64, Blelloch, true).unwrap().block, 256);
    /// assert_eq!(ScanShape::fitting(TypeSizes::uniform(128), 256, 64, Blelloch, false).unwrap().block, 64);
    /// ```
    pub fn fitting(
        sizes: TypeSizes,
        block: u32,
        bytes_per_thread: usize,
        algorithm: ScanAlgorithm,
        staging: bool,
    ) -> Result<ScanShape> {
        ScanShape::fitting_with(
            sizes,
            block,
            bytes_per_thread,
            algorithm,
            staging,
            RESIDENT_ACC,
        )
    }

    /// [`ScanShape::fitting`], with resident tiles only for accumulators of at most
    /// `resident_acc` bytes (0: never).
    pub(crate) fn fitting_with(
        sizes: TypeSizes,
        block: u32,
        bytes_per_thread: usize,
        algorithm: ScanAlgorithm,
        staging: bool,
        resident_acc: usize,
    ) -> Result<ScanShape> {
        check_block(block)?;
        let mut b = block;
        loop {
            match ScanShape::build(
                sizes,
                b,
                bytes_per_thread,
                algorithm,
                staging,
                resident_acc,
                MAX_ITEMS,
            ) {
                Err(e) if e.kind() == ErrorKind::InvalidConfig && b > 32 => b /= 2,
                other => return other,
            }
        }
    }

    /// The shape for large inputs ([`ScanConfig::large_from`]): resident tiles of 64 KiB of
    /// input, three blocks to a multiprocessor, on 512 threads with runs of at least 32
    /// values (else 256: f64, 8-byte inputs); accumulators of up to 8 bytes. `None` where the
    /// types have no such shape (runs that cannot stay resident, accumulators past 8 bytes,
    /// inputs past 8 bytes) or three blocks do not fit `sm_shared` bytes of a
    /// multiprocessor's shared memory.
    ///
    /// Measured on an H100 at 2^28 elements (docs/performance-notes.md, "Scans and the look-back"): inclusive sums of
    /// f32 2614 GB/s on 512 x 32 where 256 x 32 gives 2471-2490, f16 2326 on 512 x 64 (1755
    /// on 256 x 32), f64 2371 on 256 x 32 (2218 on 256 x 16 in registers), affine maps of f32
    /// 2580 (2228); below about 2^24 elements the smaller tiles are faster.
    ///
    /// [`ScanConfig::large_from`]: super::ScanConfig::large_from
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// let h100 = 228 * 1024;
    /// let large = |s| ScanShape::large(TypeSizes::uniform(s), Default::default(), h100).unwrap();
    /// assert_eq!((large(4).block, large(4).items, large(4).min_blocks), (512, 32, 3));
    /// assert_eq!((large(2).block, large(2).items), (512, 64));
    /// assert_eq!((large(8).block, large(8).items, large(8).resident), (256, 32, true));
    /// assert!(ScanShape::large(TypeSizes::uniform(16), Default::default(), h100).is_none());
    /// assert!(ScanShape::large(TypeSizes::uniform(4), Default::default(), 100 * 1024).is_none());
    /// ```
    pub fn large(
        sizes: TypeSizes,
        algorithm: ScanAlgorithm,
        sm_shared: usize,
    ) -> Option<ScanShape> {
        // Runs of at least 32 values (f64 on 512 threads: 2194 GB/s, on 256: 2371).
        let block = (LARGE_TILE_BYTES / (32 * sizes.input.max(1))).min(512) as u32;
        (block >= 256).then_some(block).and_then(|block| {
            let bytes = LARGE_TILE_BYTES / block as usize;
            let s =
                ScanShape::build(sizes, block, bytes, algorithm, true, 8, LARGE_MAX_ITEMS).ok()?;
            let per_block = s.shared_bytes(sizes) + SHARED_PER_BLOCK_RESERVED;
            (s.resident
                && s.tile() as usize * sizes.input == LARGE_TILE_BYTES
                && s.min_blocks >= LARGE_BLOCKS
                && LARGE_BLOCKS as usize * per_block <= sm_shared)
                .then_some(s)
        })
    }

    /// This shape with each block asking the L2 for the input of the tile about
    /// `bytes` bytes of input ahead of its own ([`ScanShape::prefetch`]: at least one tile
    /// ahead; none for 0).
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// let f32s = TypeSizes::uniform(4);
    /// let large = ScanShape::large(f32s, Default::default(), 228 * 1024).unwrap();
    /// assert_eq!(large.with_prefetch(f32s, 4 << 20).prefetch, 64); // 64 tiles of 64 KiB
    /// assert_eq!(large.with_prefetch(f32s, 1).prefetch, 1);
    /// assert_eq!(large.with_prefetch(f32s, 0).prefetch, 0);
    /// ```
    pub fn with_prefetch(self, sizes: TypeSizes, bytes: u64) -> ScanShape {
        let tile_bytes = (self.tile() * sizes.input.max(1) as u64).max(1);
        let tiles = if bytes == 0 {
            0
        } else {
            (bytes / tile_bytes).clamp(1, u32::MAX as u64) as u32
        };
        ScanShape {
            prefetch: tiles,
            ..self
        }
    }

    /// Positions one block scans: `block * items`.
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// let s = ScanShape::for_sizes(TypeSizes::uniform(8), 128, 64, Default::default(), true).unwrap();
    /// assert_eq!(s.tile(), 128 * 8);
    /// ```
    pub fn tile(&self) -> u64 {
        self.block as u64 * self.items as u64
    }

    /// How the kernel moves runs (kernels/scan.cuh's `CF_STAGING`): 0 thread by thread,
    /// 1 staged through shared memory into registers ([`ScanShape::staging`]), 2 resident in
    /// shared memory from load to store ([`ScanShape::resident`], which implies staging).
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// let f32s = ScanShape::for_sizes(TypeSizes::uniform(4), 256, 128, Default::default(), true).unwrap();
    /// let f64s = ScanShape::for_sizes(TypeSizes::uniform(8), 256, 128, Default::default(), true).unwrap();
    /// let plain = ScanShape::for_sizes(TypeSizes::uniform(8), 256, 128, Default::default(), false).unwrap();
    /// assert_eq!((f32s.staging_mode(), f64s.staging_mode(), plain.staging_mode()), (2, 1, 0));
    /// ```
    pub fn staging_mode(&self) -> u32 {
        if self.resident {
            2
        } else {
            self.staging as u32
        }
    }

    /// Whether runs of these types can stay resident: accumulators of at most `max_acc` and
    /// 8 bytes (a thread takes its run in pieces of eight 4-byte or four 8-byte
    /// accumulators), outputs the size of the inputs (they replace them in shared memory), a
    /// power of two up to 16 bytes, and a run of a power of two of whole 16-byte vectors (the
    /// swizzle of kernels/io.cuh's `resident_slot`).
    fn resident_runs(&self, sizes: TypeSizes, max_acc: usize) -> bool {
        let run = self.items as usize * sizes.input;
        sizes.acc <= max_acc.min(8)
            && sizes.input == sizes.output
            && sizes.input.is_power_of_two()
            && sizes.input <= 16
            && run % 16 == 0
            && (run / 16).is_power_of_two()
    }

    /// Shared memory of the kernel for these type sizes: the sum of its `__shared__` arrays
    /// plus 64 bytes for their alignment and small flags, and the resident tile it takes as
    /// dynamic shared memory ([`ScanShape::dynamic_bytes`]). The kernel checks this number
    /// at compile time (a `static_assert` in kernels/scan.cuh), so it cannot drift from the
    /// kernel's arrays. The static part is at most 48 KiB, the whole at most 227 KiB.
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// let s = ScanShape::for_sizes(TypeSizes::uniform(4), 256, 64, Default::default(), false).unwrap();
    /// assert!(s.shared_bytes(TypeSizes::uniform(4)) < 8192);
    /// ```
    pub fn shared_bytes(&self, sizes: TypeSizes) -> usize {
        self.static_bytes(sizes) + self.dynamic_bytes(sizes)
    }

    /// The part of [`ScanShape::shared_bytes`] the kernel takes as dynamic shared memory,
    /// which every launch passes: the resident tile (0 on the other paths).
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// let f32s = ScanShape::for_sizes(TypeSizes::uniform(4), 256, 128, Default::default(), true).unwrap();
    /// assert_eq!(f32s.dynamic_bytes(TypeSizes::uniform(4)), 256 * 32 * 4);
    /// ```
    pub fn dynamic_bytes(&self, sizes: TypeSizes) -> usize {
        if self.resident {
            self.block as usize * self.items as usize * sizes.input
        } else {
            0
        }
    }

    /// The statically declared part of [`ScanShape::shared_bytes`].
    fn static_bytes(&self, sizes: TypeSizes) -> usize {
        let b = self.block as usize;
        let acc = sizes.acc;
        let storage = match self.algorithm {
            ScanAlgorithm::WarpShuffle => 2 * (b / 32),
            ScanAlgorithm::Blelloch | ScanAlgorithm::HillisSteele => 2 * b,
        };
        // Staging: per warp, 32 runs of whole 16-byte vectors, each padded by one vector;
        // resident, the same unpadded (the input's vectors, which the outputs replace).
        let staging = if self.resident {
            0
        } else if self.staging {
            let vectors = |size: usize| {
                let run = self.items as usize * size;
                if run % 16 == 0 {
                    run / 16
                } else {
                    0
                }
            };
            // As the kernel declares it: one vector per warp when no run is whole.
            let v = vectors(sizes.input).max(vectors(sizes.output));
            (b / 32) * if v > 0 { 32 * (v + 1) } else { 1 } * 16
        } else {
            0
        };
        // Plus the look-back's chunk and 32 big nodes, and the next-thread prefixes.
        (storage + b + 2 + 32 + self.chunk as usize) * acc + staging + 64
    }
}

/// One launch of the scan kernel: one block per tile.
///
/// ```
/// use cufold::scan::{plan, ScanShape, TypeSizes};
/// let shape = ScanShape::for_sizes(TypeSizes::uniform(4), 256, 64, Default::default(), true).unwrap();
/// assert_eq!(plan(1000, &shape).unwrap().tiles, 1);
/// assert_eq!(plan(1 << 28, &shape).unwrap().tiles, 1 << 16);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScanPlan {
    /// Tiles, and blocks in the grid (at least one).
    pub tiles: u64,
    /// Positions per tile.
    pub tile: u64,
}

/// Plans the scan of `n` elements with a kernel of `shape`: one launch whatever N, with a
/// block per tile. Errors ([`ErrorKind::TooLarge`]) past 2^31 - 1 tiles, the most blocks a
/// CUDA grid holds.
///
/// ```
/// use cufold::scan::{plan, ScanShape, TypeSizes};
/// let shape = ScanShape::for_sizes(TypeSizes::uniform(1), 256, 64, Default::default(), true).unwrap();
/// assert_eq!(plan(5_000_000_000, &shape).unwrap().tiles, 610_352); // past 2^32 is fine
/// assert!(plan(1 << 50, &shape).is_err());
/// ```
pub fn plan(n: u64, shape: &ScanShape) -> Result<ScanPlan> {
    let tile = shape.tile();
    let tiles = n.div_ceil(tile).max(1);
    if tiles > i32::MAX as u64 {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!(
                "{n} elements: a scan of {}-position tiles takes at most {} elements",
                tile,
                i32::MAX as u64 * tile
            ),
        ));
    }
    Ok(ScanPlan { tiles, tile })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_shapes_fit_registers_and_shared_memory() {
        use ScanAlgorithm::*;
        for algo in [WarpShuffle, Blelloch, HillisSteele] {
            for (in_size, acc_size, items) in [
                (1, 1, 32),
                (2, 2, 32),
                (4, 4, 16),
                (8, 8, 8),
                (4, 8, 16),
                (4, 24, 4),
                (16, 16, 4),
                (32, 32, 2),
                (64, 64, 1),
            ] {
                let sizes = TypeSizes {
                    input: in_size,
                    acc: acc_size,
                    output: acc_size,
                };
                let s = ScanShape::fitting(sizes, 256, 64, algo, true).unwrap();
                assert_eq!(s.items, items, "{in_size}/{acc_size}");
                assert!(s.shared_bytes(sizes) <= MAX_SHARED);
            }
            // Wide accumulators get a smaller block rather than an error.
            let wide = TypeSizes {
                input: 4,
                acc: 96,
                output: 96,
            };
            let s = ScanShape::fitting(wide, 1024, 64, algo, true).unwrap();
            assert!(s.shared_bytes(wide) <= MAX_SHARED && s.block >= 32);
            // A narrow input with a wide output (Mean over f16): the staging holds the output.
            let mean16 = TypeSizes {
                input: 2,
                acc: 4,
                output: 8,
            };
            let s = ScanShape::fitting(mean16, 256, 128, algo, true).unwrap();
            assert!(s.shared_bytes(mean16) <= MAX_SHARED, "{s:?}");
        }
        assert_eq!(
            ScanShape::for_sizes(TypeSizes::uniform(4), 100, 64, Blelloch, true)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidConfig
        );
    }

    #[test]
    fn large_tiles_are_64_kib_three_to_a_multiprocessor() {
        use ScanAlgorithm::*;
        for algo in [WarpShuffle, Blelloch, HillisSteele] {
            for (input, acc, block, items) in [
                (4, 4, 512, 32),
                (2, 4, 512, 64),
                (2, 2, 512, 64),
                (1, 1, 512, 128),
                (8, 8, 256, 32),
                (8, 4, 256, 32),
            ] {
                let sizes = TypeSizes {
                    input,
                    acc,
                    output: input,
                };
                let s = ScanShape::large(sizes, algo, SM_SHARED).unwrap();
                assert_eq!((s.block, s.items), (block, items), "{sizes:?} {algo:?}");
                assert!(s.resident && s.staging && s.min_blocks == 3, "{s:?}");
                assert_eq!(s.dynamic_bytes(sizes), LARGE_TILE_BYTES);
                assert!(s.static_bytes(sizes) <= MAX_SHARED);
                assert!(3 * (s.shared_bytes(sizes) + SHARED_PER_BLOCK_RESERVED) <= SM_SHARED);
                // Not on a multiprocessor with less shared memory (an A100's 164 KiB).
                assert!(ScanShape::large(sizes, algo, 164 * 1024).is_none());
            }
            // None where runs cannot stay resident: wide accumulators, outputs of another
            // size than the inputs.
            for sizes in [
                TypeSizes::uniform(16),
                TypeSizes {
                    input: 4,
                    acc: 24,
                    output: 24,
                },
                TypeSizes {
                    input: 2,
                    acc: 4,
                    output: 8,
                },
            ] {
                assert!(
                    ScanShape::large(sizes, algo, SM_SHARED).is_none(),
                    "{sizes:?}"
                );
            }
        }
    }

    #[test]
    fn resident_tiles_where_six_blocks_fit() {
        use ScanAlgorithm::*;
        let shape =
            |sizes: TypeSizes, algo| ScanShape::fitting(sizes, 256, 128, algo, true).unwrap();
        for algo in [WarpShuffle, Blelloch, HillisSteele] {
            // 4-byte sums (f32, i32): 32 KiB of values, 6 blocks of 256 threads share an SM.
            let s = shape(TypeSizes::uniform(4), algo);
            assert!(s.resident && s.min_blocks == 6, "{s:?}");
            let per_block = s.shared_bytes(TypeSizes::uniform(4)) + SHARED_PER_BLOCK_RESERVED;
            assert!(6 * per_block <= SM_SHARED);
            // f16 in and out with f32 accumulators: resident too.
            let half = TypeSizes {
                input: 2,
                acc: 4,
                output: 2,
            };
            assert!(shape(half, algo).resident);
            // 8-byte accumulators (f64): runs in registers by default; admitted, 32 KiB of
            // values too, and as many blocks as fit (five or six with the block scan's storage).
            let f64s = shape(TypeSizes::uniform(8), algo);
            assert!(!f64s.resident && f64s.min_blocks == 1 && f64s.staging);
            let f64s =
                ScanShape::fitting_with(TypeSizes::uniform(8), 256, 128, algo, true, 8).unwrap();
            assert!(f64s.resident && f64s.items == 16, "{f64s:?}");
            let per_block = f64s.shared_bytes(TypeSizes::uniform(8)) + SHARED_PER_BLOCK_RESERVED;
            let b = f64s.min_blocks as usize;
            assert!(
                (5..=6).contains(&b) && b * per_block <= SM_SHARED,
                "{f64s:?}"
            );
            assert!(b == 6 || (b + 1) * per_block > SM_SHARED, "{f64s:?}");
            // 16-byte accumulators (affine maps of f64): runs in registers, even if admitted.
            let wide = ScanShape::fitting_with(TypeSizes::uniform(16), 256, 128, algo, true, 16);
            let wide = wide.unwrap();
            assert!(!wide.resident && wide.min_blocks == 1 && wide.staging);
            // Three blocks of 256 x 32 f64 (64 KiB of values each) take the resident path,
            // as their 192 KiB in flight stand in for 1280 threads; two of 512 x 16 do not
            // (the block halves, as for any block whose staged shape passes 48 KiB).
            let three = ScanShape::fitting_with(TypeSizes::uniform(8), 256, 256, algo, true, 8);
            let three = three.unwrap();
            assert!(three.resident && three.min_blocks == 3, "{three:?}");
            if algo != WarpShuffle {
                let two = ScanShape::fitting_with(TypeSizes::uniform(8), 512, 128, algo, true, 8);
                assert_eq!(two.unwrap().block, 256);
            }
            // Outputs of another size than the inputs, or no staging: runs in registers.
            let mean16 = TypeSizes {
                input: 2,
                acc: 4,
                output: 8,
            };
            assert!(!shape(mean16, algo).resident);
            let unstaged = ScanShape::fitting(TypeSizes::uniform(4), 256, 128, algo, false);
            assert!(!unstaged.unwrap().resident);
            // Turned off by the configuration: the staged shape as it was.
            let off = ScanShape::fitting_with(TypeSizes::uniform(4), 256, 128, algo, true, 0);
            let off = off.unwrap();
            assert!(!off.resident && off.staging && off.items == 32);
            assert!(
                off.shared_bytes(TypeSizes::uniform(4)) > s.shared_bytes(TypeSizes::uniform(4))
            );
        }
    }

    #[test]
    fn scan_plans_cover_the_input() {
        let s = ScanShape::for_sizes(
            TypeSizes::uniform(4),
            256,
            64,
            ScanAlgorithm::WarpShuffle,
            true,
        )
        .unwrap();
        for n in [0u64, 1, 4095, 4096, 4097, 1 << 28, (1 << 32) + 3] {
            let p = plan(n, &s).unwrap();
            assert!(p.tiles * p.tile >= n && (p.tiles - 1) * p.tile < n.max(1));
        }
        assert_eq!(plan(u64::MAX, &s).unwrap_err().kind(), ErrorKind::TooLarge);
    }
}
