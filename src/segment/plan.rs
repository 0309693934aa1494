//! The segmented reduction's planner: pure functions from the segments' shape and the
//! device's size to a schedule and a grid, unit-tested on the CPU.
//!
//! The schedule changes only the speed: every schedule computes each segment's canonical
//! tree, so the bits are the same.

use crate::error::{Error, ErrorKind, Result};
use crate::gpu::DeviceProps;

/// Inputs from this many elements on get the long pass in the thread schedule (below it, a
/// segment long enough for it is short work for its warp anyway); the segmented scan's too.
pub(super) const LONG_PASS_MIN_N: u64 = 1 << 20;

/// Who reduces a segment.
///
/// ```
/// use cufold::segment::Schedule;
/// assert_ne!(Schedule::Warp, Schedule::Block);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// One thread per segment, the block's threads on different segments: for very short
    /// segments (a few elements each), where a warp would leave most lanes idle. In a
    /// reduction a lane keeps segments of at most 8 elements (32 for order-free operators,
    /// which fold in order), groups of four or eight lanes of its warp take those of up to
    /// 64, and its whole warp the longer ones (the long tail of ragged lengths); in a scan
    /// a lane keeps segments of up to 32 elements and hands longer ones to its warp. On
    /// ragged offsets of 2^20 elements or more, the longest (a reduction's over 4096
    /// elements, a scan's of half a scan tile or more) go to a pass of their own.
    Thread,
    /// One warp per segment, the block's warps on different segments: for short segments
    /// (many segments, a few tiles each at most); for a scan, rows of 33 elements or more
    /// ([`SCAN_THREAD_MAX_COLS`]) up to those of the whole-array scan's tiles.
    Warp,
    /// A group of [`LANES`] lanes per row, a warp's groups on as many rows at once: for
    /// rows of at most [`LANES_MAX_BYTES`] bytes (one tile of the group), where a warp per
    /// row gives each lane one load and a five-level shuffle tree. Reductions of rows only
    /// (segments by offsets, and scans, take a warp instead).
    Lanes,
    /// One block per segment: for segments of many tiles.
    Block,
    /// The whole-array [`Reducer`](crate::Reducer) once per row, with as many blocks as it
    /// plans; for a scan, the whole-array [`Scanner`](crate::Scanner)'s tiles and look-back
    /// on every row, one launch for all the rows: rows only.
    Whole,
    /// Rows too few to fill the device and each long: every row cut into aligned chunks of
    /// a power-of-two length (subtrees of the row's tree), a block per chunk, then a block
    /// per row joining its chunks; two launches for all the rows. Reductions of rows only
    /// (a scan takes [`Schedule::Whole`] instead).
    Split,
}

/// Mean segment length up to which a thread takes a segment ([`Schedule::Thread`]).
pub const THREAD_MAX_MEAN: u64 = 64;
/// Mean segment length up to which a warp takes a segment ([`Schedule::Warp`]): 16 tiles
/// of a warp (8192 f32).
pub const WARP_MAX_MEAN: u64 = 8192;
/// Lanes per row of the [`Schedule::Lanes`] schedule.
pub const LANES: u32 = 8;
/// Bytes of a row up to which a reduction of rows takes a group of [`LANES`] lanes per row
/// ([`Schedule::Lanes`]) where [`plan`] gives a warp: one tile of the group (8 lanes of
/// four 16-byte loads). Measured on an H100 (rows of 128 f32, 2^28 in all, one call):
/// see docs/performance-notes.md, "Segments".
pub const LANES_MAX_BYTES: u64 = 512;

/// For a reduction, the mean length above which a block takes a segment that [`plan`]
/// gives a warp: order-free operators ([`Operator::ORDER_FREE`]) fold a warp's share in
/// registers with one tree at the end, so a warp pays off up to 4096; other operators build
/// a warp's tree tile by tile, and a block per segment wins from 4096 on. Measured on an
/// H100 (rows of 2^28 f32 in all, one call, GB/s, warp against block): 2048 long, sum 2621
/// / 2212, max 3052 / 2209, argmax 2972 / 1423; 4096 long, sum 2542 / 2937, max 3006 / 3121,
/// argmax 3006 / 2652; 8192 long, sum 2524 / 2919, max 3031 / 3111, argmax 2983 / 3086.
///
/// [`Operator::ORDER_FREE`]: crate::ops::Operator::ORDER_FREE
pub const REDUCE_WARP_MAX_MEAN: [u64; 2] = [2048, 4096];

/// [`plan`] for a reduction (segmented or by key) of an operator that is `order_free` or
/// not, over elements of `elem_bytes` bytes: a block per segment from
/// [`REDUCE_WARP_MAX_MEAN`] on instead of a warp, and a group of [`LANES`] lanes per row
/// for rows of at most [`LANES_MAX_BYTES`] bytes, and the thread schedule for segments by
/// offsets too few to fill the device and each long (as [`Schedule::Split`] for rows): a
/// block per segment would leave most multiprocessors idle, where the thread schedule's
/// long pass cuts every segment over 4096 elements into chunks, a block each. (The
/// segmented scan keeps [`plan`]'s limits: its warp schedule is another kernel.)
///
/// ```
/// use cufold::gpu::DeviceProps;
/// use cufold::segment::{plan_reduction, Schedule};
/// let h100 = DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// // 2^16 rows of 4096 f32: a block for a sum, a warp for an order-free max.
/// assert_eq!(plan_reduction(1 << 16, 1 << 28, true, false, 4, 256, &h100).schedule, Schedule::Block);
/// assert_eq!(plan_reduction(1 << 16, 1 << 28, true, true, 4, 256, &h100).schedule, Schedule::Warp);
/// // 2^21 rows of 128 f32: 8 lanes a row; the same lengths by offsets: a warp.
/// assert_eq!(plan_reduction(1 << 21, 1 << 28, true, false, 4, 256, &h100).schedule, Schedule::Lanes);
/// assert_eq!(plan_reduction(1 << 21, 1 << 28, false, false, 4, 256, &h100).schedule, Schedule::Warp);
/// // 16 segments of 2^24 by offsets: the thread schedule's long pass; as rows: split.
/// assert_eq!(plan_reduction(16, 1 << 28, false, false, 4, 256, &h100).schedule, Schedule::Thread);
/// assert_eq!(plan_reduction(16, 1 << 28, true, false, 4, 256, &h100).schedule, Schedule::Split);
/// ```
pub fn plan_reduction(
    segments: u64,
    total: u64,
    rows: bool,
    order_free: bool,
    elem_bytes: u64,
    block: u32,
    dev: &DeviceProps,
) -> SegmentPlan {
    let p = plan(segments, total, rows, block, dev);
    let mean = total / segments.max(1);
    if p.schedule == Schedule::Warp && mean > REDUCE_WARP_MAX_MEAN[order_free as usize] {
        with_schedule(Schedule::Block, segments, block, dev)
    } else if p.schedule == Schedule::Warp
        && rows
        && mean.saturating_mul(elem_bytes) <= LANES_MAX_BYTES
    {
        with_schedule(Schedule::Lanes, segments, block, dev)
    } else if p.schedule == Schedule::Block && !rows && few_and_long(segments, mean, dev) {
        with_schedule(Schedule::Thread, segments, block, dev)
    } else {
        p
    }
}

/// Row length from which a scan of rows takes [`Schedule::Whole`] ([`plan_scan`]): every
/// row on the device-wide scan's tiles (a tile no longer than the row), all rows in one
/// launch. Measured on an H100 (f32 inclusive sums, 2^28 elements in all, one call, GB/s,
/// whole against the schedule taken before): rows of 16384 2754 / 2068 (block), of 8192
/// 2951 / 2211, of 4096 2996 / 2307, of 2048 2676 / 2212 (thread); rows of 1024 1700 to 1920
/// against 2230 (thread), which they keep. docs/performance-notes.md, "Segments".
pub const SCAN_WHOLE_MIN_COLS: u64 = 2048;

/// Mean length from which a scan of segments by offsets takes [`Schedule::Thread`]
/// ([`plan_scan`]) whatever their number, where the types have a device-wide scan and the
/// input holds [`SCAN_OFFSETS_LONG_MIN_TOTAL`] elements or more (or at least 2^20 in fewer
/// than [`SCAN_OFFSETS_FEW`] segments): the thread schedule's long pass then scans each
/// segment of 4096 positions or more (or of half the tile it takes) on the device-wide scan's
/// tiles, many blocks to a segment, where a block per segment scans its tiles one after
/// another. Measured on an H100 (f32 inclusive sums, 2^28 elements in all, one call, ms,
/// thread against a block per segment): segments of 8192 0.824 / 1.013, of 16384 0.814 /
/// 1.039, of 65536 0.835 / 1.066, of 2^19 0.865 / 1.059 (docs/performance-notes.md,
/// "Segments"); segments of 4096, since the long pass puts them on tiles of 4096:
/// 2^12 of them 0.066 / 0.071, 2^14 0.203 / 0.251 ("Segments").
///
/// ```
/// use cufold::gpu::DeviceProps;
/// use cufold::segment::{plan_scan, Schedule, SCAN_OFFSETS_LONG_MEAN, SCAN_OFFSETS_LONG_MIN_TOTAL};
/// let h100 = DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// let by_offsets = |segments: u64, mean: u64| {
///     plan_scan(segments, segments * mean, false, true, None, 256, &h100).schedule
/// };
/// let many = SCAN_OFFSETS_LONG_MIN_TOTAL / SCAN_OFFSETS_LONG_MEAN;
/// assert_eq!(by_offsets(many, SCAN_OFFSETS_LONG_MEAN), Schedule::Thread);
/// assert_eq!(by_offsets(many, SCAN_OFFSETS_LONG_MEAN - 1), Schedule::Block);
/// assert_eq!(by_offsets(many / 2, SCAN_OFFSETS_LONG_MEAN), Schedule::Block); // 2^22 elements
/// assert_eq!(by_offsets(16, 1 << 16), Schedule::Thread); // 2^20 elements in few segments
/// assert_eq!(by_offsets(16, 8192), Schedule::Block); // 2^17 elements: no long pass
/// ```
// The long pass's own least length (CF_SCAN_LONG_MIN_LOG, kernels/long_list.cuh), so that
// the rule follows the kernel's.
pub const SCAN_OFFSETS_LONG_MEAN: u64 =
    1 << crate::gpu::jit::embedded::defines::CF_SCAN_LONG_MIN_LOG;

/// Elements from which segments by offsets of a mean of [`SCAN_OFFSETS_LONG_MEAN`] or more
/// take the thread schedule's long pass in a scan ([`plan_scan`]). Below it a block per
/// segment is as fast or faster where the segments number [`SCAN_OFFSETS_FEW`] or more: the
/// thread schedule takes a launch for its steps and one for each long pass, a block per
/// segment one in all. Measured on an H100 (f32 inclusive sums, one call, two rounds, ms,
/// thread against a block per segment; docs/performance-notes.md, "Segments"):
///
/// | elements | segments of 4096 | of 8192 | of 16384 |
/// |---|---|---|---|
/// | 2^20 | 0.019-0.021 / 0.011-0.012 | 0.016-0.019 / 0.013-0.014 | 0.019 / 0.017 |
/// | 2^22 | 0.026 / 0.023-0.024 | 0.023-0.024 / 0.024-0.025 | 0.025 / 0.025 |
/// | 2^23 | 0.039-0.043 / 0.040-0.041 | | |
/// | 2^24 | 0.066 / 0.071 | 0.062 / 0.075 | 0.063 / 0.082 |
/// | 2^26 | 0.203 / 0.251 | | 0.205 / 0.263-0.264 |
pub const SCAN_OFFSETS_LONG_MIN_TOTAL: u64 = 1 << 23;

/// Segments by offsets below which a scan of a mean of [`SCAN_OFFSETS_LONG_MEAN`] or more takes
/// the thread schedule's long pass from 2^20 elements on ([`plan_scan`]), under
/// [`SCAN_OFFSETS_LONG_MIN_TOTAL`] too: a block per segment would leave most multiprocessors
/// idle, each scanning its segment's tiles one after another, where the long pass gives each
/// segment many blocks. (From 64 segments on, a block per segment was as fast or faster at
/// 2^20 to 2^22 elements; fewer segments under 2^23 elements were not measured.)
pub const SCAN_OFFSETS_FEW: u64 = 64;

/// Warps of 32 segments a multiprocessor gets at least where the scan takes the thread
/// schedule for segments by offsets that [`plan`] gives a warp; with fewer segments, few
/// warps would scan them all, one after another, and a block per segment is taken instead.
const THREAD_FOR_WARP_WARPS: u64 = 4;

/// Row length up to which a scan of rows keeps [`Schedule::Thread`] ([`plan_scan`]): a lane
/// scans a segment of at most this many positions alone (`CF_SCAN_WARP_MIN` of
/// kernels/segment_scan.cuh) and hands longer ones to its warp, one after another; rows
/// longer than this take [`Schedule::Warp`].
///
/// ```
/// use cufold::gpu::DeviceProps;
/// use cufold::segment::{plan_scan, Schedule, SCAN_THREAD_MAX_COLS};
/// let h100 = DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// let rows_of = |cols: u64| plan_scan(1 << 20, cols << 20, true, true, None, 256, &h100).schedule;
/// assert_eq!(rows_of(SCAN_THREAD_MAX_COLS), Schedule::Thread);
/// assert_eq!(rows_of(SCAN_THREAD_MAX_COLS + 1), Schedule::Warp);
/// ```
pub const SCAN_THREAD_MAX_COLS: u64 = 32;

/// The segmented scan's plan: a `forced` schedule, else [`plan`]'s, with
///
/// - rows of at least [`SCAN_WHOLE_MIN_COLS`] on [`Schedule::Whole`] where the types have
///   a device-wide scan (`whole`);
/// - a warp per row for rows longer than [`SCAN_THREAD_MAX_COLS`] that [`plan`] gives a
///   thread or a warp;
/// - for segments by offsets that [`plan`] gives a warp, a thread when the segments give
///   every multiprocessor four warps of 32 segments or more (the thread schedule hands
///   segments over 32 to the thread's warp, and its longest to a pass of their own), else a
///   block;
/// - segments by offsets of [`SCAN_OFFSETS_LONG_MEAN`] or more on average,
///   [`SCAN_OFFSETS_LONG_MIN_TOTAL`] elements or more in all (2^20 or more in fewer than
///   [`SCAN_OFFSETS_FEW`] segments), where the types have a device-wide scan: a thread, whose
///   long pass scans each long one on the device-wide scan's tiles;
/// - [`Schedule::Whole`] for [`Schedule::Split`] (rows), a block for `Whole` or `Split`
///   forced on segments by offsets, and a warp for [`Schedule::Lanes`] (the scan has no
///   groups of lanes).
///
/// Measured on an H100, f32 inclusive sums, 2^28 elements in all, GB/s: 2^21 rows of 128,
/// a block 224, a thread 417 (before the thread's warps staged their spans), 1833 (after); see
/// docs/performance-notes.md, "Segments", for the warp against the thread, and
/// [`SCAN_WHOLE_MIN_COLS`] for longer rows.
///
/// ```
/// use cufold::gpu::DeviceProps;
/// use cufold::segment::{plan_scan, Schedule};
/// let h100 = DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// let scan = |segments, total, rows| plan_scan(segments, total, rows, true, None, 256, &h100).schedule;
/// assert_eq!(scan(1 << 18, 1 << 28, true), Schedule::Warp); // rows of 1024
/// assert_eq!(scan(1 << 17, 1 << 28, true), Schedule::Whole); // rows of 2048
/// assert_eq!(scan(1 << 23, 1 << 28, true), Schedule::Thread); // rows of 32
/// assert_eq!(scan(1 << 17, 1 << 28, false), Schedule::Thread); // the same lengths by offsets
/// assert_eq!(scan(1 << 12, 1 << 22, false), Schedule::Block); // 4096 segments of 1024
/// assert_eq!(scan(16, 1 << 28, false), Schedule::Thread); // 16 of 2^24: the long pass
/// assert_eq!(scan(512, 1 << 28, false), Schedule::Thread); // 512 of 2^19: the same
/// ```
pub fn plan_scan(
    segments: u64,
    total: u64,
    rows: bool,
    whole: bool,
    forced: Option<Schedule>,
    block: u32,
    dev: &DeviceProps,
) -> SegmentPlan {
    let mean = total / segments.max(1);
    let schedule = match forced {
        Some(Schedule::Whole | Schedule::Split) if !rows => Schedule::Block,
        Some(Schedule::Split) => Schedule::Whole,
        Some(Schedule::Lanes) => Schedule::Warp,
        Some(s) => s,
        None if rows && whole && mean >= SCAN_WHOLE_MIN_COLS => Schedule::Whole,
        // Long segments by offsets: the thread schedule's long pass scans each on the
        // device-wide scan's tiles (as rows take `Whole`), where a block per segment scans
        // its tiles one after another; on smaller inputs a block per segment is as fast,
        // unless the segments are few enough to leave most multiprocessors idle.
        None if !rows
            && whole
            && mean >= SCAN_OFFSETS_LONG_MEAN
            && (total >= SCAN_OFFSETS_LONG_MIN_TOTAL
                || (total >= LONG_PASS_MIN_N && segments < SCAN_OFFSETS_FEW)) =>
        {
            Schedule::Thread
        }
        None => match plan(segments, total, rows, block, dev).schedule {
            Schedule::Thread | Schedule::Warp | Schedule::Lanes
                if rows && mean > SCAN_THREAD_MAX_COLS =>
            {
                Schedule::Warp
            }
            Schedule::Warp | Schedule::Lanes
                if segments >= THREAD_FOR_WARP_WARPS * 32 * dev.sm_count as u64 =>
            {
                Schedule::Thread
            }
            Schedule::Warp | Schedule::Lanes => Schedule::Block,
            Schedule::Split => Schedule::Whole,
            s => s,
        },
    };
    with_schedule(schedule, segments, block, dev)
}

/// Positions a lane holds in each tile of the segmented scan's warp schedule
/// ([`Schedule::Warp`]) for rows of `cols` elements of `elem_bytes` bytes: enough for a
/// row to fill a tile of 32 lanes (next_pow2(cols) / 32), at least a 16-byte load's worth,
/// at most `max_items` (the scanner's own positions per thread: rows of 1024 f32 in one
/// tile of 32 a lane measured 1543 GB/s on an H100, in two of 16 2491); a power of two. The
/// grouping does not depend on it: a tile is an aligned power-of-two block of the row.
pub(crate) fn scan_warp_items(cols: u64, elem_bytes: usize, max_items: u32) -> u32 {
    let per_load = crate::reduce::per_16_bytes(elem_bytes) as u64;
    let want = (cols.max(1).next_power_of_two() / 32).max(per_load);
    want.min(1 << max_items.max(1).ilog2()) as u32
}

/// Length from which rows too few to fill the device are split into chunks
/// ([`Schedule::Split`]).
pub const WHOLE_MIN_LEN: u64 = 1 << 20;

/// Whether `segments` segments of `mean` elements on average are too few to fill the device
/// (fewer than its multiprocessors) and each long ([`WHOLE_MIN_LEN`]): rows are then split
/// ([`Schedule::Split`]), segments by offsets go to the thread schedule's long pass.
fn few_and_long(segments: u64, mean: u64, dev: &DeviceProps) -> bool {
    mean >= WHOLE_MIN_LEN && segments < dev.sm_count as u64
}

/// Waves of resident blocks a grid of warps per segment holds at most (their blocks take
/// many segments each, in turn).
const GRID_WAVES: u64 = 4;
/// The same for the thread schedule (resident blocks by thread count: for its blocks of 64
/// at 64 registers a thread, the device runs twice the waves counted). Measured on an H100, f32,
/// ms, one call, two rounds, waves 4 / 8 / 16 / 64 (docs/performance-notes.md, "Segments"): 2^24 segments of 4 to 32, sum 0.529-0.530 / 0.508 / 0.500 /
/// 0.533, argmax 0.680-0.681 / 0.662-0.663 / 0.653 / 0.681, cumsum 0.919-0.920 /
/// 0.899-0.900 / 0.879-0.880 / 0.894; power-law lengths, sum 0.215-0.216 / 0.213-0.216 /
/// 0.219-0.221 / 0.270, max 0.235-0.237 / 0.235 / 0.244 / 0.282, cumsum 0.405-0.408 / 0.405 /
/// 0.417 / 0.468. Eight gains the short segments 2-4% and keeps the ragged ones; sixteen
/// gains the short ones more and loses the ragged ones 2-4%.
const THREAD_GRID_WAVES: u64 = 8;
/// The same for a block per segment: a block takes one segment (or one chunk of a split row)
/// up to about 16 000 blocks on an H100 (2^14 rows), and from there a few in turn, so that
/// a block's next segment is loaded while it joins the one before (cf::pipelined_trees) and
/// its bounds by offsets are asked for a segment ahead (cf::prefetch_bounds): a block that
/// took one segment waited on its offsets before its first load. Measured on an H100, f32,
/// 2^28 elements, ms, one call, two rounds, waves 64 / 16 / 8 / 4 (docs/performance-notes.md, "Segments"): 2^16 segments of 4096 by offsets, sum 0.415-0.416 / 0.351-0.355 /
/// 0.352 / 0.363-0.364; 2^15 of 8192, sum 0.362 / 0.347-0.352 / 0.349-0.351 /
/// 0.357-0.362; rows of 4096 and of 2^14 the same within the rounds' spread but for four
/// waves (rows of 2^14, sum 0.356-0.360 / 0.355 / 0.356 / 0.360-0.361; a later call, three
/// rounds, put rows of 4096 0.8% slower at 16 than at 64). Four waves lost
/// before too (rows of 2^14 summed at 2703 and 2851 GB/s against 2891 with a block a row):
/// the last wave runs part-empty. The thread schedule loses with as many blocks (ragged
/// power-law sums 518 -> 449 GB/s at 64 waves), so it keeps fewer ([`THREAD_GRID_WAVES`]).
const BLOCK_GRID_WAVES: u64 = 16;

/// A launch of the segmented reduction.
///
/// ```
/// use cufold::gpu::DeviceProps;
/// use cufold::segment::{plan, Schedule};
/// let h100 = DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// let p = plan(1 << 24, 16 << 24, false, 256, &h100);
/// assert_eq!(p.schedule, Schedule::Thread);
/// assert!(p.grid <= 132 * 8 * 8); // eight waves of the blocks 2048 threads a multiprocessor hold
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegmentPlan {
    /// Who reduces a segment.
    pub schedule: Schedule,
    /// Blocks in the grid ([`Schedule::Whole`]: 0, the reducer plans its own launches).
    pub grid: u64,
}

/// Plans the reduction of `segments` segments holding `total` elements between them
/// (`rows`: all of the same length, as the rows of a matrix) with `block`-thread blocks.
///
/// - mean length `total / segments` up to [`THREAD_MAX_MEAN`]: a thread per segment;
/// - up to [`WARP_MAX_MEAN`]: a warp per segment;
/// - rows of at least [`WHOLE_MIN_LEN`] elements, fewer than the device has
///   multiprocessors: [`Schedule::Split`], so that every multiprocessor works on every row;
/// - otherwise a block per segment.
///
/// The grid is at most eight waves of resident blocks for a thread per segment, four for a
/// warp, 64 for a block per segment (about one segment a block); blocks take segments in
/// turn (each group the segments `g, g + groups, ...`).
///
/// ```
/// use cufold::gpu::DeviceProps;
/// use cufold::segment::{plan, Schedule};
/// let h100 = DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// assert_eq!(plan(1 << 14, 1 << 28, true, 256, &h100).schedule, Schedule::Block);
/// assert_eq!(plan(16, 16 << 24, true, 256, &h100).schedule, Schedule::Split);
/// assert_eq!(plan(16, 16 << 24, false, 256, &h100).schedule, Schedule::Block);
/// assert_eq!(plan(3, 12, false, 256, &h100).grid, 1);
/// ```
pub fn plan(segments: u64, total: u64, rows: bool, block: u32, dev: &DeviceProps) -> SegmentPlan {
    let mean = total / segments.max(1);
    let schedule = if mean <= THREAD_MAX_MEAN {
        Schedule::Thread
    } else if mean <= WARP_MAX_MEAN {
        Schedule::Warp
    } else if rows && few_and_long(segments, mean, dev) {
        Schedule::Split
    } else {
        Schedule::Block
    };
    with_schedule(schedule, segments, block, dev)
}

/// The plan for a given `schedule` (a forced one, [`SegmentConfig::schedule`]): the grid
/// that schedule takes for `segments` segments: at most eight waves of resident blocks for
/// threads per segment, four for warps, 64 for a block per segment.
///
/// ```
/// use cufold::gpu::DeviceProps;
/// use cufold::segment::{with_schedule, Schedule};
/// let h100 = DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// assert_eq!(with_schedule(Schedule::Warp, 80, 256, &h100).grid, 10); // 8 warps a block
/// assert_eq!(with_schedule(Schedule::Thread, 80, 256, &h100).grid, 1);
/// assert_eq!(with_schedule(Schedule::Block, 80, 256, &h100).grid, 80);
/// ```
///
/// [`SegmentConfig::schedule`]: super::SegmentConfig::schedule
pub fn with_schedule(
    schedule: Schedule,
    segments: u64,
    block: u32,
    dev: &DeviceProps,
) -> SegmentPlan {
    let per_block = match schedule {
        Schedule::Thread => block as u64,
        Schedule::Warp => block as u64 / 32,
        Schedule::Lanes => (block / LANES) as u64,
        _ => 1,
    };
    let resident = dev.resident_blocks(block);
    let waves = match schedule {
        Schedule::Block => BLOCK_GRID_WAVES,
        Schedule::Thread => THREAD_GRID_WAVES,
        _ => GRID_WAVES,
    };
    let grid = match schedule {
        Schedule::Whole | Schedule::Split => 0,
        _ => segments.div_ceil(per_block).clamp(1, waves * resident),
    };
    SegmentPlan { schedule, grid }
}

/// `plan` with the thread schedule's grid for its own blocks of `thread_block` threads
/// ([`SegmentConfig::thread_block`](super::SegmentConfig::thread_block)): reducers and
/// scanners choose the schedule with their `block`, on which the choice does not depend, and
/// run [`Schedule::Thread`] in blocks of its own.
pub(crate) fn on_thread_blocks(
    plan: SegmentPlan,
    segments: u64,
    thread_block: u32,
    dev: &DeviceProps,
) -> SegmentPlan {
    match plan.schedule {
        Schedule::Thread => with_schedule(Schedule::Thread, segments, thread_block, dev),
        _ => plan,
    }
}

/// The chunk length (a power of two, as its log2) for [`Schedule::Split`]: at least one
/// block's `tile`, at most half of the row's tree width (so that a row has two chunks or
/// more), few enough per row for one block to join (`block * 8`), and otherwise small
/// enough that all the rows' chunks make four waves of resident blocks.
///
/// ```
/// use cufold::gpu::DeviceProps;
/// use cufold::segment::split_chunk_log;
/// let h100 = DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// // 16 rows of 2^24 f32, 4096-position tiles: 2^15-position chunks, 512 per row.
/// assert_eq!(split_chunk_log(16, 1 << 24, 4096, 256, &h100), 15);
/// assert_eq!(split_chunk_log(1, 5000, 4096, 256, &h100), 12); // one tile, two chunks
/// ```
pub fn split_chunk_log(rows: u64, cols: u64, tile: u64, block: u32, dev: &DeviceProps) -> u32 {
    let waves = 4 * dev.resident_blocks(block);
    let want = (rows.max(1) * cols / waves).max(1);
    let width = cols.max(2).next_power_of_two();
    let top = (width / 2).max(1);
    // At least one tile, and few enough chunks per row for one block to join them
    // (block * 8, the joining kernel's tile).
    let bottom = tile.max(width / (block as u64 * 8)).min(top);
    let chunk = (1u64 << want.ilog2()).clamp(bottom, top);
    chunk.ilog2()
}

/// Checks the rows of a matrix against the input (`len` elements) and sizes their output,
/// `per_row` values of `V` a row (1 for a reduction, `cols` for a scan), before any work
/// or allocation; returns the number of outputs. The checks every backend makes, in this
/// order:
///
/// - a stride shorter than a row ([`ErrorKind::InvalidConfig`]), for any number of rows
///   (rows would overlap, or a single row would be read with another stride than the one
///   given);
/// - an output past [`MAX_OUTPUT_BYTES`] (`isize::MAX` bytes, the most one Rust allocation
///   or slice holds; [`ErrorKind::TooLarge`]), whether or not the rows have columns;
/// - an input too short for the rows ([`ErrorKind::LengthMismatch`]).
pub(crate) fn check_rows<V>(rows: &super::Rows, len: usize, per_row: usize) -> Result<usize> {
    if rows.stride < rows.cols {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "a row stride of {} is shorter than a row ({} columns): rows would overlap \
                 (the stride is at least the number of columns, for one row too)",
                rows.stride, rows.cols
            ),
        ));
    }
    let outputs = check_outputs::<V>(rows.rows, per_row, || {
        format!("{} rows of {} columns", rows.rows, rows.cols)
    })?;
    let need = if rows.rows == 0 {
        Some(0)
    } else {
        (rows.rows - 1)
            .checked_mul(rows.stride)
            .and_then(|v| v.checked_add(rows.cols))
    };
    match need {
        Some(need) if need <= len => Ok(outputs),
        _ => Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "{} rows of {} columns with stride {} need {} elements, the input has {len}",
                rows.rows,
                rows.cols,
                rows.stride,
                need.map_or("more than 2^64".to_string(), |n| n.to_string())
            ),
        )),
    }
}

/// The most bytes one output of the segmented primitives may take: `isize::MAX`, the most
/// one Rust allocation (a `Vec`) or slice, host or device, holds.
pub(crate) const MAX_OUTPUT_BYTES: usize = isize::MAX as usize;

/// `count * per` outputs of `V`, or an error ([`ErrorKind::TooLarge`]) if they take more
/// than [`MAX_OUTPUT_BYTES`] (`what` names the shape).
pub(crate) fn check_outputs<V>(
    count: usize,
    per: usize,
    what: impl FnOnce() -> String,
) -> Result<usize> {
    let bytes = std::mem::size_of::<V>().max(1);
    match count.checked_mul(per) {
        Some(n) if n <= MAX_OUTPUT_BYTES / bytes => Ok(n),
        _ => Err(Error::new(
            ErrorKind::TooLarge,
            format!(
                "{}: {count} x {per} outputs of {bytes} bytes do not fit in memory (an output \
                 holds at most isize::MAX bytes)",
                what()
            ),
        )),
    }
}

/// An error unless an output buffer of `out` values holds the `need` outputs of `rows`.
pub(crate) fn check_rows_out(rows: &super::Rows, need: usize, out: usize) -> Result<()> {
    if out != need {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "{} rows of {} columns need an output of {need} values, the output holds {out}",
                rows.rows, rows.cols
            ),
        ));
    }
    Ok(())
}

/// Checks the lengths of CSR offsets (`segments + 1` of them) and the output.
pub(crate) fn check_offsets_len(offsets: usize, out: usize) -> Result<()> {
    if offsets == 0 {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            "offsets are empty: segment i is offsets[i]..offsets[i + 1], so n segments need n + 1 offsets",
        ));
    }
    if out != offsets - 1 {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "{offsets} offsets make {} segments, but the output holds {out} values",
                offsets - 1
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: DeviceProps = DeviceProps {
        sm_count: 132,
        max_threads_per_sm: 2048,
    };

    #[test]
    fn the_planner_picks_by_mean_length() {
        // The shapes of the issue: many short segments, a square matrix, few long rows.
        assert_eq!(
            plan(1 << 24, 1 << 28, false, 256, &H100).schedule,
            Schedule::Thread
        );
        assert_eq!(
            plan(1 << 20, 1 << 28, false, 256, &H100).schedule,
            Schedule::Warp
        );
        assert_eq!(
            plan(1 << 14, 1 << 28, true, 256, &H100).schedule,
            Schedule::Block
        );
        assert_eq!(
            plan(16, 1 << 28, true, 256, &H100).schedule,
            Schedule::Split
        );
        // Ragged offsets are never split: their lengths are on the device.
        assert_eq!(
            plan(16, 1 << 28, false, 256, &H100).schedule,
            Schedule::Block
        );
        // A block per segment takes one segment up to 16 waves of resident blocks; threads
        // per segment stay within eight, warps within four.
        assert_eq!(plan(1 << 14, 1 << 28, true, 256, &H100).grid, 1 << 14);
        assert_eq!(
            with_schedule(Schedule::Block, 1 << 30, 256, &H100).grid,
            16 * 132 * 8
        );
        assert_eq!(
            with_schedule(Schedule::Warp, 1 << 30, 256, &H100).grid,
            4 * 132 * 8
        );
        assert_eq!(
            with_schedule(Schedule::Thread, 1 << 30, 64, &H100).grid,
            8 * 132 * 32
        );
        // Many long rows fill the device with a block each.
        assert_eq!(
            plan(1000, 1000 << 20, true, 256, &H100).schedule,
            Schedule::Block
        );
        for (segments, total) in [(1u64, 1u64), (7, 0), (1 << 30, 1 << 32), (5, 1 << 40)] {
            for rows in [false, true] {
                let p = plan(segments, total, rows, 256, &H100);
                if p.schedule != Schedule::Split {
                    let waves = match p.schedule {
                        Schedule::Block => 16,
                        Schedule::Thread => 8,
                        _ => 4,
                    };
                    assert!(p.grid >= 1 && p.grid <= waves * 132 * 8, "{p:?}");
                    let groups = p.grid
                        * match p.schedule {
                            Schedule::Thread => 256,
                            Schedule::Warp => 8,
                            Schedule::Lanes => 32,
                            _ => 1,
                        };
                    assert!(groups < segments.max(1) + 256, "{p:?}");
                }
            }
        }
    }

    #[test]
    fn scans_of_rows_of_2048_or_more_take_the_whole_schedule() {
        let scan = |segments: u64, cols: u64, rows, whole, forced| {
            plan_scan(segments, segments * cols, rows, whole, forced, 256, &H100)
        };
        for (segments, cols, rows, whole, want) in [
            // Rows from 2048 on: the device-wide scan's tiles, whatever their number.
            (1u64 << 17, 2048u64, true, true, Schedule::Whole),
            (1 << 16, 4096, true, true, Schedule::Whole),
            (1 << 15, 8192, true, true, Schedule::Whole),
            (1 << 14, 1 << 14, true, true, Schedule::Whole),
            (16, 1 << 24, true, true, Schedule::Whole),
            (1, 4096, true, true, Schedule::Whole),
            // Shorter rows: a warp a row over 32, else a thread.
            (1 << 18, 1024, true, true, Schedule::Warp),
            (1 << 12, 1024, true, true, Schedule::Warp),
            (1 << 21, 128, true, true, Schedule::Warp),
            (3, 33, true, true, Schedule::Warp),
            (1 << 22, 64, true, true, Schedule::Warp),
            (1 << 23, 32, true, true, Schedule::Thread),
            (1 << 24, 4, true, true, Schedule::Thread),
            // Segments by offsets: a thread when many, else a block.
            (1 << 17, 2048, false, true, Schedule::Thread),
            (1 << 21, 128, false, true, Schedule::Thread),
            (1 << 12, 1024, false, true, Schedule::Block),
            (16, 8192, false, true, Schedule::Block),
            // Long ones by offsets, 2^23 elements or more: the thread schedule's long pass,
            // whatever their number.
            (1 << 12, 4096, false, true, Schedule::Thread),
            (1 << 11, 4096, false, true, Schedule::Thread),
            (1 << 14, 4096, false, true, Schedule::Thread),
            (1 << 12, 4097, false, true, Schedule::Thread),
            (1 << 14, 1 << 14, false, true, Schedule::Thread),
            (512, 1 << 19, false, true, Schedule::Thread),
            // Under 2^23 elements: a block per segment from 64 segments on, the long pass
            // for fewer (from 2^20 elements on).
            (1 << 11, 4095, false, true, Schedule::Block),
            (1 << 10, 4096, false, true, Schedule::Block),
            (128, 8192, false, true, Schedule::Block),
            (64, 1 << 16, false, true, Schedule::Block),
            (63, 1 << 16, false, true, Schedule::Thread),
            (1, 1 << 20, false, true, Schedule::Thread),
            (1, (1 << 20) - 1, false, true, Schedule::Block),
            // Types without a device-wide scan: rows up to a warp's lengths take a warp.
            (1 << 14, 1 << 14, true, false, Schedule::Block),
            (1 << 17, 2048, true, false, Schedule::Warp),
            (16, 1 << 24, true, false, Schedule::Whole),
            (16, 1 << 24, false, false, Schedule::Block),
        ] {
            let p = scan(segments, cols, rows, whole, None);
            assert_eq!(
                p.schedule, want,
                "{segments} x {cols}, rows {rows}, whole {whole}"
            );
            assert_eq!(p, with_schedule(want, segments, 256, &H100));
        }
        // Forced schedules: Split is Whole for rows, Whole and Split are a block by offsets,
        // Lanes a warp; the rest as forced.
        for (forced, rows, segments, want) in [
            (Schedule::Split, true, 1u64 << 10, Schedule::Whole),
            (Schedule::Whole, true, 1 << 20, Schedule::Whole),
            (Schedule::Whole, false, 1 << 10, Schedule::Block),
            (Schedule::Split, false, 1 << 10, Schedule::Block),
            (Schedule::Warp, true, 1 << 20, Schedule::Warp),
            (Schedule::Warp, false, 16, Schedule::Warp),
            (Schedule::Lanes, true, 1 << 10, Schedule::Warp),
            (Schedule::Thread, true, 16, Schedule::Thread),
            (Schedule::Block, true, 1 << 20, Schedule::Block),
        ] {
            let p = scan(segments, 4096, rows, true, Some(forced));
            assert_eq!(p.schedule, want, "{forced:?} rows {rows} {segments}");
        }
    }

    #[test]
    fn a_scan_warp_fills_its_tiles_with_16_byte_loads() {
        for (cols, bytes, max, want) in [
            (128u64, 4usize, 16u32, 4u32), // rows of 128 f32: one tile, a load a lane
            (100, 4, 16, 4),
            (1024, 4, 16, 16), // capped at the scanner's own
            (256, 4, 16, 8),
            (33, 4, 16, 4), // at least a 16-byte load
            (64, 8, 8, 2),
            (1024, 8, 8, 8),
            (512, 2, 32, 16),
            (40, 2, 32, 8),
            (4096, 12, 4, 4), // no 16-byte loads for 12-byte values
            (40, 12, 4, 2),
            (64, 32, 2, 2),
            (64, 4, 2, 2),     // a scanner's own below a load's worth
            (1024, 4, 24, 16), // a power of two
        ] {
            assert_eq!(
                scan_warp_items(cols, bytes, max),
                want,
                "{cols} x {bytes} bytes"
            );
        }
        assert_eq!(
            SCAN_THREAD_MAX_COLS,
            crate::gpu::jit::embedded::defines::CF_SCAN_WARP_MIN as u64
        );
    }

    #[test]
    fn reductions_take_a_block_for_long_warp_segments() {
        for (cols, order_free, want) in [
            (1024u64, false, Schedule::Warp),
            (2048, false, Schedule::Warp),
            (4096, false, Schedule::Block),
            (4096, true, Schedule::Warp),
            (8192, true, Schedule::Block),
            (8192, false, Schedule::Block),
            (32, false, Schedule::Thread),
        ] {
            let rows = (1u64 << 28) / cols;
            let p = plan_reduction(rows, 1 << 28, true, order_free, 4, 256, &H100);
            assert_eq!(p.schedule, want, "{cols} {order_free}");
            assert_eq!(p, {
                let q = plan(rows, 1 << 28, true, 256, &H100);
                if q.schedule == want {
                    q
                } else {
                    with_schedule(want, rows, 256, &H100)
                }
            });
        }
        // Rows of at most 512 bytes take 8 lanes a row (32 rows a block) where `plan` gives a
        // warp; longer rows, segments by offsets and shorter rows do not.
        for (cols, elem, rows, want) in [
            (128u64, 4u64, true, Schedule::Lanes),
            (65, 4, true, Schedule::Lanes),
            (64, 8, true, Schedule::Thread),
            (128, 8, true, Schedule::Warp),
            (256, 2, true, Schedule::Lanes),
            (512, 1, true, Schedule::Lanes),
            (129, 4, true, Schedule::Warp),
            (128, 4, false, Schedule::Warp),
        ] {
            let segments = (1u64 << 28) / cols;
            let p = plan_reduction(segments, segments * cols, rows, false, elem, 256, &H100);
            assert_eq!(p.schedule, want, "{cols} x {elem} B, rows {rows}");
            if want == Schedule::Lanes {
                assert_eq!(p, with_schedule(Schedule::Lanes, segments, 256, &H100));
                assert_eq!(p.grid, (4 * 132 * 8).min(segments.div_ceil(32)));
            }
        }
        // The scan's planner is unchanged: rows of 8192 are a warp's.
        assert_eq!(
            plan(1 << 15, 1 << 28, true, 256, &H100).schedule,
            Schedule::Warp
        );
    }

    #[test]
    fn split_chunks_are_subtrees_that_fill_the_device() {
        for (rows, cols) in [
            (1u64, 1u64 << 20),
            (16, 1 << 24),
            (100, 3_000_001),
            (1, 4097),
            (131, 1 << 30),
        ] {
            let l = split_chunk_log(rows, cols, 4096, 256, &H100);
            let chunk = 1u64 << l;
            // Two chunks or more per row, each a power of two no wider than half the row's tree.
            assert!(
                chunk <= cols.next_power_of_two() / 2,
                "{rows} x {cols}: {chunk}"
            );
            assert!(
                chunk >= 4096 || chunk == cols.next_power_of_two() / 2,
                "{rows} x {cols}: {chunk}"
            );
            let chunks = rows * cols.div_ceil(chunk);
            assert!(chunks >= 2, "{rows} x {cols}");
        }
        // Never more chunks per row than a block joins.
        assert_eq!(split_chunk_log(1, 1 << 40, 4096, 256, &H100), 40 - 11);
        // Enough chunks for four waves when the rows are long enough.
        assert!(
            16 * ((1u64 << 24) >> split_chunk_log(16, 1 << 24, 4096, 256, &H100)) >= 4 * 132 * 8
        );
    }

    #[test]
    fn rows_and_offsets_are_checked() {
        use super::super::Rows;
        assert_eq!(check_rows::<f32>(&Rows::new(3, 4), 12, 1).unwrap(), 3);
        assert_eq!(
            check_rows::<f32>(&Rows::new(3, 4).stride(5), 14, 4).unwrap(),
            12
        );
        let e = check_rows::<f32>(&Rows::new(3, 4).stride(3), 100, 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidConfig);
        assert!(e.to_string().contains("stride of 3"));
        // One row, or none, with a stride shorter than the row: the same error.
        for r in [0, 1] {
            for stride in [0, 2] {
                let e = check_rows::<f32>(&Rows::new(r, 3).stride(stride), 100, 1).unwrap_err();
                assert_eq!(
                    e.kind(),
                    ErrorKind::InvalidConfig,
                    "{r} rows, stride {stride}"
                );
            }
        }
        let e = check_rows::<f32>(&Rows::new(3, 4).stride(5), 13, 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LengthMismatch);
        assert!(e.to_string().contains("need 14 elements, the input has 13"));
        assert_eq!(
            check_rows_out(&Rows::new(3, 4), 3, 2).unwrap_err().kind(),
            ErrorKind::LengthMismatch
        );
        let huge = Rows::new(usize::MAX, 2).stride(2);
        assert_eq!(
            check_rows::<u8>(&huge, 10, 1).unwrap_err().kind(),
            ErrorKind::TooLarge
        );
        let huge = Rows::new(1 << 40, 2).stride(2);
        assert_eq!(
            check_rows::<u8>(&huge, 10, 1).unwrap_err().kind(),
            ErrorKind::LengthMismatch
        );
        // Outputs past isize::MAX bytes, with no input at all.
        for (rows, per) in [(usize::MAX, 1), (1 << 61, 1), (1 << 40, 1 << 30)] {
            let e = check_rows::<f32>(&Rows::new(rows, 0), 0, per).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TooLarge, "{rows} x {per}");
        }
        assert_eq!(
            check_rows::<f32>(&Rows::new((1 << 61) - 1, 0), 0, 1).unwrap(),
            (1 << 61) - 1
        );
        assert_eq!(check_rows::<f32>(&Rows::new(1 << 40, 0), 0, 0).unwrap(), 0);
        assert_eq!(check_rows::<f32>(&Rows::new(0, 4), 0, 4).unwrap(), 0);
        assert!(check_offsets_len(4, 3).is_ok());
        assert_eq!(
            check_offsets_len(0, 0).unwrap_err().kind(),
            ErrorKind::LengthMismatch
        );
        assert!(check_offsets_len(4, 4)
            .unwrap_err()
            .to_string()
            .contains("4 offsets make 3 segments"));
    }
}
