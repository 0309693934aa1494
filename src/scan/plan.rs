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
    /// Contiguous positions per thread: a power of two from 1 to 32.
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
    /// 1280 threads' blocks in 228 KiB of shared memory (an H100's); elsewhere the staged
    /// path holds the runs in registers.
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
        )
    }

    /// [`ScanShape::for_sizes`], with resident tiles only for accumulators of at most
    /// `resident_acc` bytes (0: never).
    pub(crate) fn build(
        sizes: TypeSizes,
        block: u32,
        bytes_per_thread: usize,
        algorithm: ScanAlgorithm,
        staging: bool,
        resident_acc: usize,
    ) -> Result<ScanShape> {
        check_block(block)?;
        let fit = |bytes: usize, size: usize| {
            let k = (bytes / size.max(1)).max(1);
            1usize << k.ilog2()
        };
        let items = fit(bytes_per_thread, sizes.input)
            .min(fit(2 * bytes_per_thread, sizes.acc))
            .min(MAX_ITEMS);
        let chunk = (8192 / sizes.acc.max(1)).clamp(32, 256);
        let mut shape = ScanShape {
            block,
            items: items as u32,
            algorithm,
            staging,
            resident: false,
            min_blocks: 1,
            chunk: 1 << chunk.ilog2(),
        };
        if staging && shape.resident_runs(sizes, resident_acc) {
            let mut resident = ScanShape {
                resident: true,
                ..shape
            };
            let smem = resident.shared_bytes(sizes);
            let blocks_in_shared = SM_SHARED / (smem + SHARED_PER_BLOCK_RESERVED);
            resident.min_blocks = (RESIDENT_THREADS / block)
                .max(1)
                .min(blocks_in_shared as u32);
            let fewest = RESIDENT_MIN_THREADS
                .div_ceil(block)
                .min(RESIDENT_THREADS / block)
                .max(1);
            if smem <= MAX_SHARED && resident.min_blocks >= fewest {
                shape = resident;
            }
        }
        let smem = shape.shared_bytes(sizes);
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
            match ScanShape::build(sizes, b, bytes_per_thread, algorithm, staging, resident_acc) {
                Err(e) if e.kind() == ErrorKind::InvalidConfig && b > 32 => b /= 2,
                other => return other,
            }
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

    /// Static shared memory of the kernel for these type sizes: the sum of its `__shared__`
    /// arrays plus 64 bytes for their alignment and small flags. The kernel checks this
    /// number at compile time (a `static_assert` in kernels/scan.cuh), so it cannot drift
    /// from the kernel's arrays.
    ///
    /// ```
    /// use cufold::scan::{ScanShape, TypeSizes};
    /// let s = ScanShape::for_sizes(TypeSizes::uniform(4), 256, 64, Default::default(), false).unwrap();
    /// assert!(s.shared_bytes(TypeSizes::uniform(4)) < 8192);
    /// ```
    pub fn shared_bytes(&self, sizes: TypeSizes) -> usize {
        let b = self.block as usize;
        let acc = sizes.acc;
        let storage = match self.algorithm {
            ScanAlgorithm::WarpShuffle => 2 * (b / 32),
            ScanAlgorithm::Blelloch | ScanAlgorithm::HillisSteele => 2 * b,
        };
        // Staging: per warp, 32 runs of whole 16-byte vectors, each padded by one vector;
        // resident, the same unpadded (the input's vectors, which the outputs replace).
        let staging = if self.resident {
            b * self.items as usize * sizes.input
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
            // Four blocks of 256 (64 KiB of f64 values) are too few to take the resident path.
            let four = ScanShape::fitting_with(TypeSizes::uniform(8), 256, 256, algo, true, 8);
            assert!(!four.unwrap().resident);
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
