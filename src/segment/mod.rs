//! Segmented reductions: one result per row of a matrix or per segment of CSR offsets.
//!
//! One place for the primitive: its planner ([`plan`], [`Schedule`], [`SegmentPlan`]), the
//! GPU launches ([`SegmentReducer`], built by [`Gpu::segment_reducer`](crate::Gpu::segment_reducer);
//! [`SegmentScanner`], built by [`Gpu::segment_scanner`](crate::Gpu::segment_scanner)), and
//! their CPU twins ([`Cpu::reduce_rows`](crate::Cpu::reduce_rows),
//! [`Cpu::reduce_segments`](crate::Cpu::reduce_segments), [`Cpu::scan_rows`](crate::Cpu::scan_rows),
//! [`Cpu::scan_segments_into`](crate::Cpu::scan_segments_into)).
//!
//! Scans work the same way: each row or segment is scanned in its own canonical grouping,
//! positions counted from its start, so its outputs are those of the whole-array scan of
//! that segment alone. Rows are written packed (`rows * cols` outputs); segments by offsets
//! into the same positions of an output as long as the input, positions outside every
//! segment left as they are.
//!
//! **Same bits as the whole array.** Segment `i`'s result is what the whole-array reduction
//! of that segment alone gives: the canonical tree over its own length, its elements lifted
//! with their place in the segment (so a per-row `ArgMax` gives the column), in order for
//! non-commutative operators. On the GPU and on the CPU alike, whatever the schedule.
//!
//! **Empty segments.** An operator with a value for an empty input (`Sum`, `Prod`, `WideSum`,
//! ...) gives `finish(identity, 0)`, as a reduction of an empty slice does. One without
//! (`Min`, `Max`, `ArgMax`, the means: the whole-array reduction errors with
//! [`ErrorKind::EmptyInput`](crate::ErrorKind::EmptyInput)) has no result there: the GPU
//! leaves that output as it was (fill the buffer with a value no segment can give to tell
//! them apart, or compare the offsets), the CPU returns `None`.
//!
//! **Offsets.** Segment `i` is `offsets[i]..offsets[i + 1]`, so `n` segments take `n + 1`
//! offsets; they need not start at 0 or end at the input's end. On the CPU they are checked
//! before any work (monotone, within the input). On the GPU they live in device memory, so
//! only their count is checked before the launch; the kernel skips a segment whose end lies
//! before its start or past the input: nothing is read outside the input, nothing is written
//! but the outputs of valid segments.
//!
//! **By key.** Runs of equal consecutive keys are segments too: `reduce_by_key` gives each
//! run's key, result and length ([`SegmentReducer::reduce_by_key`],
//! [`Cpu::reduce_by_key`](crate::Cpu::reduce_by_key)), `scan_by_key_into` restarts the scan
//! at each run ([`SegmentScanner::scan_by_key_into`],
//! [`Cpu::scan_by_key_into`](crate::Cpu::scan_by_key_into)). A run is a maximal stretch of
//! keys with equal bits: `-0.0` and `0.0` are different keys, a NaN key equals a NaN with
//! the same bits. For `reduce_by_key` the runs' offsets are found first ([`KeyRuns`]: a
//! count of run starts per span of 1024 keys, their exclusive sum, a scatter), then the
//! segmented kernels take them as CSR offsets, so each run's result has the bits of the
//! whole-array primitive applied to that run alone. It learns the number of runs before it
//! plans the launch and allocates its outputs: it waits for the stream once, after the runs
//! are counted (as `torch.unique_consecutive` does); runs fewer than the multiprocessors and
//! [`WHOLE_MIN_LEN`] long on average take the thread schedule's long pass, as segments by
//! offsets do ([`plan_reduction`]). `scan_by_key_into` never waits: one pass over keys and
//! values finds the runs a tile at a time (as `reduce_by_key_into` below) and scans each with
//! the thread schedule's steps from the run's own first position, and, for inputs of 2^20
//! or more, the runs of half a tile of the whole-array scan or more with that scan's tiles
//! and look-back, each on the largest tile it fills, a launch for each tile size.
//! [`KeyRuns::offsets_into`] never waits, nor does
//! [`SegmentReducer::reduce_by_key_into`], the one-pass form into the caller's buffers (room
//! for every key always suffices; the number of runs goes to a device buffer): a block takes
//! a span of 1024 keys a warp, finds their run heads, learns the runs before it from the blocks
//! before (a decoupled look-back over integer counts, so no bit depends on timing), and
//! reduces each run that ends in its spans with the same tree as a segment by offsets. It
//! reads the keys once where the waiting form reads them twice; on an H100 it was faster for
//! runs of up to 1024 and within 4% for longer ones, and the faster of the two beat CUB's
//! `DeviceReduce::ReduceByKey` on every shape measured but power-law run lengths.
//! [`SegmentReducer::reduce_by_key_into_without_lengths`] is the same pass without the
//! lengths (what CUB's gives): 8 bytes less written a run, 0.95x CUB on power-law runs
//! (docs/performance-notes.md, "Segments").
//!
//! ```
//! use cufold::{ops, segment::Rows, Cpu};
//! let x = [1.0f32, 5.0, 2.0, /* */ 7.0, 3.0, 9.0];
//! let cpu = Cpu::new();
//! assert_eq!(cpu.reduce_rows(&x, Rows::new(2, 3), ops::Sum)?, [8.0, 19.0]);
//! assert_eq!(cpu.reduce_rows(&x, Rows::new(2, 3), ops::ArgMax)?[1].index, 2); // a column
//! let maxima = cpu.reduce_segments(&x, &[0, 1, 1, 6], ops::Max)?;
//! assert_eq!(maxima, [Some(1.0), None, Some(9.0)]); // the middle segment is empty
//! # Ok::<(), cufold::Error>(())
//! ```

use crate::scan::ScanConfig;

mod by_key;
mod cpu;
mod gpu;
mod host;
mod key_runs;
mod plan;
mod scan_gpu;

pub use by_key::{ByKey, DeviceByKey, KeyRuns};
pub use gpu::{compile_kernel, kernel_source, SegmentReducer};
pub(crate) use host::{rows_outputs, try_zeroed};
pub use key_runs::{compile_runs_kernel, runs_kernel_source};
pub use plan::{
    plan, plan_reduction, plan_scan, split_chunk_log, with_schedule, Schedule, SegmentPlan, LANES,
    LANES_MAX_BYTES, REDUCE_WARP_MAX_MEAN, SCAN_OFFSETS_FEW, SCAN_OFFSETS_LONG_MEAN,
    SCAN_OFFSETS_LONG_MIN_TOTAL, SCAN_THREAD_MAX_COLS, SCAN_WHOLE_MIN_COLS, THREAD_MAX_MEAN,
    WARP_MAX_MEAN, WHOLE_MIN_LEN,
};
pub use scan_gpu::{
    compile_scan_kernel, compile_scan_long_kernel, scan_kernel_source, SegmentScanner,
};

/// The rows of a row-major matrix inside a buffer: `rows` rows of `cols` elements, row `r`
/// starting at element `r * stride` (a view of a wider matrix when `stride > cols`).
///
/// ```
/// use cufold::segment::Rows;
/// let r = Rows::new(3, 4).stride(10);
/// assert_eq!((r.rows, r.cols, r.stride), (3, 4, 10));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rows {
    /// Number of rows (and of results).
    pub rows: usize,
    /// Elements per row.
    pub cols: usize,
    /// Elements from the start of one row to the start of the next (at least `cols`).
    pub stride: usize,
}

impl Rows {
    /// `rows` rows of `cols` elements, packed (`stride = cols`).
    ///
    /// ```
    /// assert_eq!(cufold::segment::Rows::new(2, 5).stride, 5);
    /// ```
    pub fn new(rows: usize, cols: usize) -> Rows {
        Rows {
            rows,
            cols,
            stride: cols,
        }
    }

    /// The same rows with another stride (elements between row starts).
    ///
    /// ```
    /// assert_eq!(cufold::segment::Rows::new(2, 5).stride(8).stride, 8);
    /// ```
    pub fn stride(mut self, stride: usize) -> Rows {
        self.stride = stride;
        self
    }
}

/// How a [`SegmentReducer`] is built, builder style (`NAME(value)` sets, `get_NAME()`
/// reads). It changes the speed, never the result.
///
/// ```
/// use cufold::segment::{Schedule, SegmentConfig};
/// let c = SegmentConfig::default().block(128).schedule(Some(Schedule::Block));
/// assert_eq!((c.get_block(), c.get_schedule()), (128, Some(Schedule::Block)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegmentConfig {
    block: u32,
    thread_block: u32,
    split_block: u32,
    schedule: Option<Schedule>,
    scan: ScanConfig,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig {
            block: 256,
            thread_block: 64,
            split_block: 512,
            schedule: None,
            scan: ScanConfig::default(),
        }
    }
}

impl SegmentConfig {
    /// Checks the configuration without a device, as every entry point that takes one does
    /// first ([`Gpu::segment_reducer_with`](crate::Gpu::segment_reducer_with),
    /// [`Gpu::segment_scanner_with`](crate::Gpu::segment_scanner_with)): the three block
    /// sizes are powers of two from 32 to 1024, and the device-wide scan's configuration
    /// passes [`ScanConfig::check`] (with its message; reducers check it too, though they
    /// do not use it). Errors: [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig),
    /// naming the setting.
    ///
    /// ```
    /// use cufold::{scan::ScanConfig, segment::SegmentConfig};
    /// assert!(SegmentConfig::default().check().is_ok());
    /// let bad = ScanConfig::default().block(1000);
    /// let e = SegmentConfig::default().scan(bad).check().unwrap_err();
    /// assert_eq!(e.to_string(), bad.check().unwrap_err().to_string());
    /// assert!(SegmentConfig::default().thread_block(48).check().is_err());
    /// ```
    pub fn check(&self) -> crate::Result<()> {
        use crate::reduce::check_config_block;
        check_config_block("SegmentConfig::block", self.block)?;
        check_config_block("SegmentConfig::thread_block", self.thread_block)?;
        check_config_block("SegmentConfig::split_block", self.split_block)?;
        self.scan.check()
    }

    /// Threads per block: a power of two from 32 to 1024 (default 256), for every kernel
    /// but the thread schedule's ([`SegmentConfig::thread_block`]) and [`Schedule::Split`]'s
    /// ([`SegmentConfig::split_block`]).
    ///
    /// ```
    /// assert_eq!(cufold::segment::SegmentConfig::default().block(512).get_block(), 512);
    /// ```
    pub fn block(mut self, block: u32) -> Self {
        self.block = block;
        self
    }

    /// The block size this configuration asks for.
    ///
    /// ```
    /// assert_eq!(cufold::segment::SegmentConfig::default().get_block(), 256);
    /// ```
    pub fn get_block(&self) -> u32 {
        self.block
    }

    /// Threads per block of [`Schedule::Thread`] (a thread per segment, for short and
    /// ragged segments), in reductions and scans: a power of two from 32 to 1024 (default
    /// 64), checked when the reducer or scanner is built. (The one passes by key, the
    /// reduction's and the scan's, take [`SegmentConfig::block`]: in smaller blocks their
    /// tiles hold fewer spans, and their look-back has more of them; the reduction of
    /// power-law runs 0.344 ms in blocks of 128, 0.402 in 64, against 0.337-0.340 in 256;
    /// the scan of 2^16 runs of 4096 1.90 ms in blocks of 64, 1.32 in 256.)
    ///
    /// Small blocks, because a block holds its place on the multiprocessor until its
    /// slowest warp is done, and on ragged lengths a warp that meets a long segment is much
    /// slower than the others. Measured on an H100 (docs/performance-notes.md, "Segments", f32, ms, two rounds a call): power-law lengths, blocks of 256 /
    /// 64 / 32 (two calls), sum 0.221-0.222 / 0.215 / 0.221, max 0.241-0.242 / 0.233-0.234 /
    /// 0.239, argmax 0.342-0.343 / 0.333-0.334 / 0.347, and cumsum (one call, 256 / 64)
    /// 0.413-0.414 / 0.404; 2^24 segments of 4 to 32 within 0.5% in blocks of 64 (sum 0.524
    /// / 0.525 / 0.533, cumsum 0.915-0.917 / 0.919).
    ///
    /// ```
    /// use cufold::segment::SegmentConfig;
    /// assert_eq!(SegmentConfig::default().get_thread_block(), 64);
    /// assert_eq!(SegmentConfig::default().thread_block(256).get_thread_block(), 256);
    /// ```
    pub fn thread_block(mut self, block: u32) -> Self {
        self.thread_block = block;
        self
    }

    /// The block size of the thread schedule (reductions and scans) this configuration asks
    /// for.
    ///
    /// ```
    /// assert_eq!(cufold::segment::SegmentConfig::default().get_thread_block(), 64);
    /// ```
    pub fn get_thread_block(&self) -> u32 {
        self.thread_block
    }

    /// Threads per block of [`Schedule::Split`]'s two kernels (the blocks that reduce chunks
    /// of long rows, and those joining a row's chunks): a power of two from 32 to 1024
    /// (default 512), checked when the reducer is built; reductions only.
    ///
    /// Measured on an H100 (docs/performance-notes.md, "Segments"): 16 rows of 2^24 f32,
    /// sum 2793-2796 GB/s in blocks of 256, 2896-2911 in 512, 2895-2899 in 1024; max within
    /// 1% and argmax 0.6% slower in 512, 4% in 1024.
    ///
    /// ```
    /// use cufold::segment::SegmentConfig;
    /// assert_eq!(SegmentConfig::default().get_split_block(), 512);
    /// assert_eq!(SegmentConfig::default().split_block(1024).get_split_block(), 1024);
    /// ```
    pub fn split_block(mut self, block: u32) -> Self {
        self.split_block = block;
        self
    }

    /// The block size of [`Schedule::Split`]'s kernels this configuration asks for.
    ///
    /// ```
    /// assert_eq!(cufold::segment::SegmentConfig::default().get_split_block(), 512);
    /// ```
    pub fn get_split_block(&self) -> u32 {
        self.split_block
    }

    /// A schedule for every launch, instead of the planner's choice by length (`None`, the
    /// default). [`Schedule::Whole`] and [`Schedule::Split`] apply to rows only; segments by
    /// offsets take [`Schedule::Block`] then (and scans take `Whole` for `Split`).
    ///
    /// ```
    /// use cufold::segment::{Schedule, SegmentConfig};
    /// assert_eq!(SegmentConfig::default().schedule(Some(Schedule::Warp)).get_schedule(), Some(Schedule::Warp));
    /// ```
    pub fn schedule(mut self, schedule: Option<Schedule>) -> Self {
        self.schedule = schedule;
        self
    }

    /// The schedule this configuration forces, if any.
    ///
    /// ```
    /// assert_eq!(cufold::segment::SegmentConfig::default().get_schedule(), None);
    /// ```
    pub fn get_schedule(&self) -> Option<Schedule> {
        self.schedule
    }

    /// The device-wide scan's configuration, for the tiles a segmented scan takes from it:
    /// rows on [`Schedule::Whole`] (with smaller tiles where a row is shorter than its tile)
    /// and the longest ragged segments (default [`ScanConfig::default`]; reductions
    /// ignore it). Like every setting, it changes the speed, never the result.
    ///
    /// ```
    /// use cufold::{scan::ScanConfig, segment::SegmentConfig};
    /// let c = SegmentConfig::default().scan(ScanConfig::default().block(128));
    /// assert_eq!(c.get_scan().get_block(), 128);
    /// ```
    pub fn scan(mut self, scan: ScanConfig) -> Self {
        self.scan = scan;
        self
    }

    /// The device-wide scan's configuration this configuration asks for.
    ///
    /// ```
    /// use cufold::{scan::ScanConfig, segment::SegmentConfig};
    /// assert_eq!(SegmentConfig::default().get_scan(), ScanConfig::default());
    /// ```
    pub fn get_scan(&self) -> ScanConfig {
        self.scan
    }
}
