//! Scans: every prefix of the input, inclusive or exclusive, in the canonical grouping.
//!
//! One place for the primitive: its launch planner ([`plan`], [`ScanShape`], [`ScanPlan`],
//! [`TypeSizes`], [`ScanAlgorithm`]), the GPU launch ([`Scanner`], built by
//! [`Gpu::scanner`](crate::Gpu::scanner) and [`Gpu::scanner_with`](crate::Gpu::scanner_with)),
//! and its CPU twin ([`Cpu::scan`](crate::Cpu::scan) and the `_into` / `_in_place` forms).
//! [`kernel_source`] and [`compile_kernel`] show and check the generated CUDA without a
//! device.
//!
//! ```
//! use cufold::{ops::Sum, Cpu, ScanKind};
//! assert_eq!(Cpu::new().scan(&[1, 2, 3], Sum, ScanKind::Inclusive)?, [1, 3, 6]);
//! # Ok::<(), cufold::Error>(())
//! ```

pub(crate) mod cpu;
mod gpu;
mod plan;

pub use gpu::{compile_kernel, kernel_source, Scanner};
pub(crate) use gpu::{
    large_shape, launch_config, long_kernel, long_source, look_back_bytes, shape_for,
};
pub use plan::{plan, ScanAlgorithm, ScanPlan, ScanShape, TypeSizes};

/// Which prefix each output position holds.
///
/// ```
/// use cufold::{ops::Sum, Cpu, ScanKind};
/// let cpu = Cpu::new();
/// assert_eq!(cpu.scan(&[1, 2, 3], Sum, ScanKind::Inclusive)?, [1, 3, 6]);
/// assert_eq!(cpu.scan(&[1, 2, 3], Sum, ScanKind::Exclusive)?, [0, 1, 3]);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanKind {
    /// Output `i` combines inputs `0..=i`: `finish(prefix, i + 1)`.
    Inclusive,
    /// Output `i` combines inputs `0..i`: `finish(prefix, i)`, and output 0 is
    /// `finish(identity, 0)`.
    Exclusive,
}

/// How a [`Scanner`] is built, builder style (`NAME(value)` sets, `get_NAME()` reads).
/// Every setting changes the speed, never the result.
///
/// ```
/// use cufold::scan::{ScanAlgorithm, ScanConfig};
/// let config = ScanConfig::default().block(512).algorithm(ScanAlgorithm::HillisSteele);
/// assert_eq!((config.get_block(), config.get_algorithm()), (512, ScanAlgorithm::HillisSteele));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScanConfig {
    block: u32,
    bytes_per_thread: u32,
    algorithm: ScanAlgorithm,
    staging: bool,
    resident: bool,
    resident_acc_bytes: u32,
    large_from: u64,
    prefetch_bytes: u64,
}

impl Default for ScanConfig {
    fn default() -> Self {
        ScanConfig {
            block: 256,
            bytes_per_thread: 128,
            algorithm: ScanAlgorithm::default(),
            staging: true,
            resident: true,
            resident_acc_bytes: 4,
            large_from: 1 << 26,
            prefetch_bytes: 4 << 20,
        }
    }
}

impl ScanConfig {
    /// Checks the configuration without a device (what every entry point that takes one
    /// does first: [`Gpu::scanner_with`](crate::Gpu::scanner_with), and
    /// [`SegmentConfig::check`](crate::segment::SegmentConfig::check) for the one a
    /// segmented scanner takes): the block size is a power of two from 32 to 1024 (the other
    /// settings are clamped or free). Errors:
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), naming the setting.
    ///
    /// ```
    /// use cufold::scan::ScanConfig;
    /// assert!(ScanConfig::default().check().is_ok());
    /// let e = ScanConfig::default().block(1000).check().unwrap_err();
    /// assert!(e.to_string().contains("ScanConfig::block(1000)"));
    /// ```
    pub fn check(&self) -> crate::Result<()> {
        crate::reduce::check_config_block("ScanConfig::block", self.block)
    }

    /// Threads per block: a power of two from 32 to 1024 (default 256; halved automatically
    /// while an operator's accumulators would not fit the block's shared memory).
    ///
    /// ```
    /// assert_eq!(cufold::scan::ScanConfig::default().block(512).get_block(), 512);
    /// ```
    pub fn block(mut self, block: u32) -> Self {
        self.block = block;
        self
    }

    /// The block size this configuration asks for.
    ///
    /// ```
    /// assert_eq!(cufold::scan::ScanConfig::default().get_block(), 256);
    /// ```
    pub fn get_block(&self) -> u32 {
        self.block
    }

    /// Bytes of input each thread loads per tile (default 128: eight 16-byte loads; from 1
    /// to 1024, rounded to the items of a power-of-two run).
    ///
    /// ```
    /// let config = cufold::scan::ScanConfig::default().bytes_per_thread(64);
    /// assert_eq!(config.get_bytes_per_thread(), 64);
    /// ```
    pub fn bytes_per_thread(mut self, bytes: u32) -> Self {
        self.bytes_per_thread = bytes.clamp(1, 1024);
        self
    }

    /// The bytes per thread this configuration asks for.
    ///
    /// ```
    /// assert_eq!(cufold::scan::ScanConfig::default().get_bytes_per_thread(), 128);
    /// ```
    pub fn get_bytes_per_thread(&self) -> u32 {
        self.bytes_per_thread
    }

    /// The block-level algorithm (default [`ScanAlgorithm::Blelloch`]).
    ///
    /// ```
    /// use cufold::scan::{ScanAlgorithm, ScanConfig};
    /// let config = ScanConfig::default().algorithm(ScanAlgorithm::WarpShuffle);
    /// assert_eq!(config.get_algorithm(), ScanAlgorithm::WarpShuffle);
    /// ```
    pub fn algorithm(mut self, algorithm: ScanAlgorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// The block-level algorithm this configuration asks for.
    ///
    /// ```
    /// use cufold::scan::{ScanAlgorithm, ScanConfig};
    /// assert_eq!(ScanConfig::default().get_algorithm(), ScanAlgorithm::Blelloch);
    /// ```
    pub fn get_algorithm(&self) -> ScanAlgorithm {
        self.algorithm
    }

    /// Whether warps move their runs between global memory and registers through shared
    /// memory (default true): global loads and stores are then coalesced 16-byte accesses,
    /// the loads asynchronous (`cp.async`), overlapping the look-back.
    ///
    /// ```
    /// assert!(!cufold::scan::ScanConfig::default().staging(false).get_staging());
    /// ```
    pub fn staging(mut self, staging: bool) -> Self {
        self.staging = staging;
        self
    }

    /// Whether this configuration stages through shared memory.
    ///
    /// ```
    /// assert!(cufold::scan::ScanConfig::default().get_staging());
    /// ```
    pub fn get_staging(&self) -> bool {
        self.staging
    }

    /// Whether a staged scan may keep its tiles resident in shared memory (default true):
    /// where the planner finds it pays ([`ScanShape::resident`]), a tile's values stay in
    /// shared memory from their load to their store and each thread holds a few at a time,
    /// so that more tiles wait for the look-back at once. `false` keeps every run in
    /// registers (the staged path as it was), for comparisons.
    ///
    /// ```
    /// assert!(!cufold::scan::ScanConfig::default().resident(false).get_resident());
    /// ```
    pub fn resident(mut self, resident: bool) -> Self {
        self.resident = resident;
        self
    }

    /// Whether this configuration lets tiles stay resident in shared memory.
    ///
    /// ```
    /// assert!(cufold::scan::ScanConfig::default().get_resident());
    /// ```
    pub fn get_resident(&self) -> bool {
        self.resident
    }

    /// The largest accumulator, in bytes, whose tiles may stay resident (default 4, at most
    /// 8 counts). 8 admits f64, i64 and u64 and pairs of 4-byte values such as affine maps of
    /// f32, in five blocks of 256 threads per H100 multiprocessor where the registers hold
    /// four: measured on an H100 (2^28 elements, BENCHMARKS.md), affine maps of f32 gain 7%
    /// and f64 sums lose 1-2% (8-10% at 2^16), hence the default. This is for the small
    /// tiles: the large ones ([`ScanConfig::large_from`]) take 8-byte accumulators whatever
    /// it says (f64 sums at 2^28: 2388 GB/s there, 2273 in registers).
    ///
    /// ```
    /// use cufold::scan::ScanConfig;
    /// assert_eq!(ScanConfig::default().get_resident_acc_bytes(), 4);
    /// assert_eq!(ScanConfig::default().resident_acc_bytes(8).get_resident_acc_bytes(), 8);
    /// ```
    pub fn resident_acc_bytes(mut self, bytes: u32) -> Self {
        self.resident_acc_bytes = bytes;
        self
    }

    /// The largest accumulator whose tiles this configuration lets stay resident.
    ///
    /// ```
    /// assert_eq!(cufold::scan::ScanConfig::default().get_resident_acc_bytes(), 4);
    /// ```
    pub fn get_resident_acc_bytes(&self) -> u32 {
        self.resident_acc_bytes
    }

    /// Bytes of input from which a scan takes the large inputs' kernel (default 64 MiB;
    /// `u64::MAX`: never), compiled on first use: the large tiles, resident tiles of 64 KiB,
    /// three blocks to a multiprocessor ([`ScanShape::large`], which also says which types
    /// have them; they need staging and resident tiles on), else the shape of the other
    /// settings; either asking the L2 for later tiles ([`ScanConfig::prefetch_bytes`]).
    /// Below, the shape of the other settings without prefetching, whose smaller tiles
    /// finish small inputs sooner. The bits are the same on both (the canonical grouping
    /// does not depend on the tile).
    ///
    /// Measured on an H100 (docs/performance-notes.md, "Scans and the look-back"): f32 inclusive sums at 2^28, 2614
    /// GB/s on large tiles, 2490 on the default's; at 2^16, 14.3 µs on large tiles, 12.6 on
    /// the default's; even at 2^24 (64 MiB).
    ///
    /// ```
    /// use cufold::scan::ScanConfig;
    /// assert_eq!(ScanConfig::default().get_large_from(), 1 << 26);
    /// assert_eq!(ScanConfig::default().large_from(0).get_large_from(), 0); // always
    /// ```
    pub fn large_from(mut self, bytes: u64) -> Self {
        self.large_from = bytes;
        self
    }

    /// Bytes of input from which this configuration takes the large tiles.
    ///
    /// ```
    /// assert_eq!(cufold::scan::ScanConfig::default().large_from(u64::MAX).get_large_from(), u64::MAX);
    /// ```
    pub fn get_large_from(&self) -> u64 {
        self.large_from
    }

    /// How far ahead, in bytes of input, each block of a large input
    /// ([`ScanConfig::large_from`]) asks the L2 cache for a later tile's input (default
    /// 4 MiB: 64 large tiles; 0: never; at least one tile ahead otherwise). The block that
    /// takes that tile then finds it in the L2, so that reads from memory run ahead of the
    /// blocks, which spend part of a tile's life waiting for the look-back and storing.
    /// ([`ScanShape::prefetch`] is the distance in tiles.) A hint: the bits do not change.
    ///
    /// Measured on an H100 (docs/performance-notes.md, "Scans and the look-back"), inclusive sums at
    /// 2^28 in one call: f32 2750-2760 GB/s (93% of a copy), 2616-2628 without; f64 2648
    /// (1.15x `torch.cumsum`), 2393 without; 16 tiles ahead gave half the gain, 264 tiles
    /// (16 MiB) lost 20%. Inputs below `large_from` never prefetch: their tiles all start
    /// at once, and prefetching cost 5-10% at 2^20.
    ///
    /// [`ScanShape::prefetch`]: crate::scan::ScanShape::prefetch
    ///
    /// ```
    /// use cufold::scan::ScanConfig;
    /// assert_eq!(ScanConfig::default().get_prefetch_bytes(), 4 << 20);
    /// assert_eq!(ScanConfig::default().prefetch_bytes(0).get_prefetch_bytes(), 0); // never
    /// ```
    pub fn prefetch_bytes(mut self, bytes: u64) -> Self {
        self.prefetch_bytes = bytes;
        self
    }

    /// How far ahead, in bytes of input, blocks of large inputs prefetch.
    ///
    /// ```
    /// assert_eq!(cufold::scan::ScanConfig::default().prefetch_bytes(1).get_prefetch_bytes(), 1);
    /// ```
    pub fn get_prefetch_bytes(&self) -> u64 {
        self.prefetch_bytes
    }
}
