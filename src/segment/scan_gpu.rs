//! The segmented scan on the GPU: a thread or a block per segment, or the whole-array
//! scanner once per row, one launch per call, on the caller's stream.

use super::gpu::{
    by_key_items, clear_long_list, key_tiles, launch_segments, long_list_layout, SegmentArgs,
};
use super::key_runs::key_word;
use super::plan::{
    check_offsets_len, check_rows, check_rows_out, on_thread_blocks, plan_scan, scan_warp_items,
    Schedule, SegmentPlan, LONG_PASS_MIN_N,
};
use super::{Rows, SegmentConfig};
use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::jit::embedded::defines;
use crate::gpu::scratch::Lease;
use crate::gpu::{allow_dynamic_shared, get_or_try, jit, resident_grid, Gpu};
use crate::ops::check::{check_scan_lengths, check_scannable};
use crate::ops::{CudaOp, Operator, ParamBlob};
use crate::scan::{ScanAlgorithm, ScanConfig, ScanKind, ScanShape, Scanner, TypeSizes};
use cudarc::driver::{CudaFunction, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use std::marker::PhantomData;
use std::sync::OnceLock;

/// The full CUDA source of the segmented scan kernel for `op` (run-time parameters
/// `param_bytes` long) with `block` threads, `items` positions per thread per tile, `group`
/// threads per segment (1, 32 or `block`), and `long_tiles`: the tiles of the device-wide
/// scan's long passes (one to three, ascending powers of two, each a [`ScanShape::tile`]
/// for these types), which take the longest segments of ragged offsets on the thread
/// schedule, each segment on the largest tile it fills, or on the smallest from half of it.
///
/// ```
/// use cufold::ops::{Operator, Sum};
/// let src = cufold::segment::scan_kernel_source(&<Sum as Operator<f32>>::cuda(&Sum), 0, 256, 16, 1, &[4096, 8192]);
/// assert!(src.contains("#include \"cufold/segment_scan.cuh\"") && src.contains("#define CF_GROUP 1"));
/// assert!(src.contains("#define CF_LIST_TILE_LOGS 12,13"));
/// ```
pub fn scan_kernel_source(
    op: &CudaOp,
    param_bytes: usize,
    block: u32,
    items: u32,
    group: u32,
    long_tiles: &[u64],
) -> String {
    jit::kernel_source(
        "segment_scan",
        op,
        &scan_defines(param_bytes, block, items, group, long_tiles),
    )
}

/// The defines of [`scan_kernel_source`]. Without long tiles, the tile of 8192 stands in
/// (the kernel is then given no lists).
fn scan_defines(
    param_bytes: usize,
    block: u32,
    items: u32,
    group: u32,
    long_tiles: &[u64],
) -> Vec<(&'static str, String)> {
    let logs: Vec<String> = match long_tiles {
        [] => vec!["13".into()],
        tiles => tiles.iter().map(|t| t.ilog2().to_string()).collect(),
    };
    vec![
        ("CF_BLOCK", block.to_string()),
        ("CF_GROUP", group.to_string()),
        ("CF_ITEMS", items.to_string()),
        ("CF_ALGO", ScanAlgorithm::Blelloch.cuda_id().to_string()),
        ("CF_OP_BYTES", param_bytes.to_string()),
        ("CF_LIST_TILE_LOGS", logs.join(",")),
    ]
}

/// The source of the one-pass scan by key (kernels/segment_scan.cuh, `cf_scan_by_key`): the
/// thread schedule's ([`scan_kernel_source`] with a thread per segment) for keys whose
/// unsigned word is `key_word`, in blocks of `block` threads of `items` positions a tile,
/// listing runs for the long passes on `long_tiles`.
fn scan_by_key_source(
    op: &CudaOp,
    param_bytes: usize,
    (block, items): (u32, u32),
    long_tiles: &[u64],
    key_word: &str,
) -> String {
    let mut defines = scan_defines(param_bytes, block, items, 1, long_tiles);
    defines.push(("CF_KEY_WORD", key_word.to_string()));
    defines.push(("CF_KEY_ITEMS", by_key_items(block).to_string()));
    jit::kernel_source("segment_scan", op, &defines)
}

/// The dynamic shared memory of the one-pass scan by key in blocks of `block` threads: each
/// warp's list of its span's heads and n's place (`cf::KeyTile`, u16 places), rounded up to
/// 16 bytes. (Its warps' stages take the static shared memory.)
fn key_places_bytes(block: u32) -> u32 {
    let per_warp = 32 * by_key_items(block) + 1;
    (block / 32 * per_warp * 2).next_multiple_of(16)
}

/// Compiles the segmented scan kernel (see [`scan_kernel_source`]) for `arch` and returns
/// its CUBIN; it needs NVRTC but no device.
///
/// ```no_run
/// use cufold::ops::{Operator, Sum};
/// let cubin = cufold::segment::compile_scan_kernel(&<Sum as Operator<f32>>::cuda(&Sum), 0, 256, 16, 256, &[8192], "sm_90")?;
/// assert!(!cubin.is_empty());
/// # Ok::<(), cufold::Error>(())
/// ```
pub fn compile_scan_kernel(
    op: &CudaOp,
    param_bytes: usize,
    block: u32,
    items: u32,
    group: u32,
    long_tiles: &[u64],
    arch: &str,
) -> Result<Vec<u8>> {
    jit::probe_nvrtc()?;
    jit::compile(
        &scan_kernel_source(op, param_bytes, block, items, group, long_tiles),
        &jit::compile_options(arch),
    )
}

/// Compiles the segmented scan's long pass for `op` (with these type `sizes` and run-time
/// parameters `param_bytes` long) in the device-wide scan's `shape` for `arch`, and returns
/// its CUBIN; it needs NVRTC but no device. On ragged offsets the thread schedule lists the
/// segments longer than half of `shape`'s tile, and this kernel scans each of them with the
/// device-wide scan's tiles and look-back (many blocks per segment, the same grouping).
///
/// ```no_run
/// use cufold::ops::{Operator, Sum};
/// use cufold::scan::{ScanShape, TypeSizes};
/// let sizes = TypeSizes::uniform(4);
/// let shape = ScanShape::for_sizes(sizes, 256, 128, Default::default(), true)?;
/// let cubin = cufold::segment::compile_scan_long_kernel(&<Sum as Operator<f32>>::cuda(&Sum), 0, sizes, &shape, "sm_90")?;
/// assert!(!cubin.is_empty());
/// # Ok::<(), cufold::Error>(())
/// ```
pub fn compile_scan_long_kernel(
    op: &CudaOp,
    param_bytes: usize,
    sizes: TypeSizes,
    shape: &ScanShape,
    arch: &str,
) -> Result<Vec<u8>> {
    jit::probe_nvrtc()?;
    jit::compile(
        &crate::scan::long_source(op, param_bytes, sizes, shape),
        &jit::compile_options(arch),
    )
}

/// A compiled segmented scan for `op` over elements of type `T`, on a [`Gpu`]'s stream:
/// every row of a matrix, or every segment of CSR offsets, scanned on its own (module
/// [`segment`](crate::segment): each segment's outputs have the bits of the whole-array
/// scan of that segment alone).
///
/// Schedules: a thread per segment ([`Schedule::Thread`], also for segments by offsets that
/// the reduction gives a warp when they are many), a warp per row for rows over 32 elements
/// ([`Schedule::Warp`]: tiles of 32 runs sized so that a row of a few hundred fills them),
/// a block per segment ([`Schedule::Block`]), and for
/// few long rows the whole-array scan's tiles and look-back on every row, in one launch for
/// all the rows ([`Schedule::Whole`]; one row goes to the whole-array [`Scanner`]). On the
/// thread schedule a segment over 32 elements goes to its thread's warp, one after another
/// (in shared memory where the warp's adjacent segments, none over 256, were staged there
/// together), and, for ragged offsets over 2^20 elements, one of half a tile of the
/// whole-array scan or more (and of 4096 or more) to a second launch that scans it with that
/// scan's tiles and look-back ([`compile_scan_long_kernel`]); the bits are the same on every
/// path. The thread schedule runs in blocks of [`SegmentConfig::thread_block`]; the scan by
/// key ([`SegmentScanner::scan_by_key_into`]: one pass over keys and values, its runs on the
/// thread schedule's steps and the long passes) in blocks of [`SegmentConfig::block`]. Every
/// method enqueues on the stream and returns at once.
///
/// ```no_run
/// use cufold::{ops, segment::Rows, ScanKind};
/// let gpu = cufold::Gpu::open(0)?;
/// let x = gpu.stream().clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
/// let mut y = gpu.stream().alloc_zeros::<f32>(6).unwrap();
/// let cumsum = gpu.segment_scanner::<f32, _>(ops::Sum)?;
/// cumsum.scan_rows_into(&x, Rows::new(2, 3), &mut y, ScanKind::Inclusive)?;
/// assert_eq!(gpu.stream().clone_dtoh(&y).unwrap(), [1.0, 3.0, 6.0, 4.0, 9.0, 15.0]);
/// # Ok::<(), cufold::Error>(())
/// ```
pub struct SegmentScanner<T: DeviceValue, O: Operator<T>> {
    pub(super) gpu: Gpu,
    op: O,
    params: Box<ParamBlob>,
    param_bytes: usize,
    config: SegmentConfig,
    block: u32,
    /// The thread schedule's block ([`SegmentConfig::thread_block`]).
    thread_block: u32,
    items: u32,
    /// The device-wide scan's shapes ([`tile_shapes`]): the first its own, whose tiles take
    /// the long segments ([`SegmentScanner::long_shape`]), then smaller tiles for rows on
    /// [`Schedule::Whole`] ([`SegmentScanner::rows_shape`], kernels in `rows_fns`). Empty
    /// for accumulators too large for it (their long segments stay with their warps).
    tile_shapes: Vec<ScanShape>,
    /// The device-wide scan's large tiles ([`ScanShape::large`]), for long rows of large
    /// inputs on [`Schedule::Whole`] (kernel in `large_fn`).
    large: Option<ScanShape>,
    large_fn: OnceLock<CudaFunction>,
    /// The thread schedule's kernels, listing long segments for the long passes of
    /// [`SegmentScanner::thread_passes`]: on the device-wide scan's own tiles (`OWN`), on its
    /// large tiles (`LARGE`), or on its small and own tiles (`SMALL`).
    thread_fns: [OnceLock<CudaFunction>; 3],
    /// The warp schedule's kernels, by log2 of their positions a lane a tile
    /// ([`scan_warp_items`]: at most the scanner's own, a power of two).
    warp_fns: [OnceLock<CudaFunction>; WARP_ITEMS_LOGS],
    block_fn: OnceLock<CudaFunction>,
    /// The long pass's kernels on the own, large and small tiles (`OWN`, `LARGE`, `SMALL`),
    /// and the blocks of each the device holds at once.
    long_fns: [OnceLock<(CudaFunction, u64)>; 3],
    rows_fns: [OnceLock<CudaFunction>; ROWS_SHAPES],
    whole: OnceLock<Scanner<T, O>>,
    /// The one-pass scan by key's kernels, by log2 of the key's bytes, then by the number of
    /// long passes they list runs for ([`SegmentScanner::by_key_passes`]: none, or the small
    /// tiles where the types have them, the own tiles, and the large tiles for large inputs).
    by_key_fns: [[OnceLock<CudaFunction>; 4]; 4],
    _input: PhantomData<fn(T)>,
}

impl<T: DeviceValue, O: Operator<T>> std::fmt::Debug for SegmentScanner<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentScanner")
            .field("op", &O::name())
            .field("input", &T::cuda_name())
            .field("config", &self.config)
            .field("gpu", &self.gpu)
            .finish()
    }
}

/// Shapes at most for rows on [`Schedule::Whole`] ([`tile_shapes`]).
const ROWS_SHAPES: usize = 4;

/// The long passes' tiles, by their cell in `long_fns` and the thread schedule's kernel
/// that lists for them in `thread_fns` ([`SegmentScanner::thread_passes`]): the device-wide
/// scan's own ([`SegmentScanner::long_shape`]), its large ([`ScanShape::large`]), and its
/// small ([`SegmentScanner::small_shape`]).
const OWN: usize = 0;
const LARGE: usize = 1;
const SMALL: usize = 2;

/// Warp-schedule kernels at most: positions a lane a tile of 1 to 2^(WARP_ITEMS_LOGS - 1),
/// at most a scanner's own ([`ScanShape::fitting`]: at most 32).
const WARP_ITEMS_LOGS: usize = 6;

/// The device-wide scan's shapes under `scan` for rows on [`Schedule::Whole`], tiles halving
/// as long as they shrink: its own, then with half the bytes per thread down to 64, then
/// with half the threads per block down to 64 (f32: 256 x 32, 256 x 16, 128 x 16, 64 x 16).
/// Rows of 2048 f32 measured on an H100: 2890 GB/s on tiles of 128 x 16, 2676 on 256 x 8
/// (docs/performance-notes.md, "Segments"). Empty where the types have no device-wide
/// shape.
fn tile_shapes(sizes: TypeSizes, scan: &ScanConfig) -> Vec<ScanShape> {
    let mut shapes: Vec<ScanShape> = Vec::with_capacity(ROWS_SHAPES);
    let mut c = *scan;
    while shapes.len() < ROWS_SHAPES {
        match crate::scan::shape_for(sizes, &c) {
            Ok(s) if shapes.last().map_or(true, |l| s.tile() < l.tile()) => shapes.push(s),
            _ => break,
        }
        c = if c.get_bytes_per_thread() > 64 {
            c.bytes_per_thread(c.get_bytes_per_thread() / 2)
        } else if c.get_block() > 64 {
            c.block(c.get_block() / 2)
        } else {
            break;
        };
    }
    shapes
}

/// The second of `tile_shapes` (half the own tile), where it holds
/// `2^CF_SCAN_LONG_MIN_LOG` positions or more ([`SegmentScanner::small_shape`]).
fn small_of(tile_shapes: &[ScanShape]) -> Option<ScanShape> {
    tile_shapes
        .get(1)
        .filter(|s| s.tile() >= 1 << defines::CF_SCAN_LONG_MIN_LOG)
        .copied()
}

/// The thread kernel's cell for segments of `mean` elements on average
/// ([`SegmentScanner::thread_cell`]): `LARGE` where `large` (they fill a large tile on a large
/// input), `SMALL` where they fill a `small` tile but not an `own` one, else `OWN`.
fn cell_for(mean: u64, large: bool, small: Option<u64>, own: Option<u64>) -> usize {
    let fills_small = small.is_some_and(|s| s <= mean) && own.is_some_and(|o| mean < o);
    match (large, fills_small) {
        (true, _) => LARGE,
        (false, true) => SMALL,
        (false, false) => OWN,
    }
}

impl<T: DeviceValue, O: Operator<T>> SegmentScanner<T, O> {
    pub(crate) fn new(gpu: Gpu, op: O, config: SegmentConfig) -> Result<Self> {
        check_scannable::<T, O>()?;
        config.check()?;
        let shape = ScanShape::fitting(
            TypeSizes::of::<T, O>(),
            config.get_block(),
            64,
            ScanAlgorithm::Blelloch,
            false,
        )?;
        let tile_shapes = tile_shapes(TypeSizes::of::<T, O>(), &config.get_scan());
        let large = crate::scan::large_shape(&gpu, TypeSizes::of::<T, O>(), &config.get_scan())
            .filter(|l| tile_shapes.first().is_some_and(|f| l.tile() > f.tile()));
        let params = op.params();
        Ok(SegmentScanner {
            gpu,
            op,
            params: ParamBlob::new(&params, O::name)?,
            param_bytes: params.bytes().len(),
            config,
            block: shape.block,
            thread_block: config.get_thread_block(),
            items: shape.items,
            tile_shapes,
            large,
            large_fn: OnceLock::new(),
            thread_fns: Default::default(),
            warp_fns: Default::default(),
            block_fn: OnceLock::new(),
            long_fns: Default::default(),
            rows_fns: Default::default(),
            whole: OnceLock::new(),
            by_key_fns: Default::default(),
            _input: PhantomData,
        })
    }

    /// The plan for `segments` segments holding about `total` elements (`rows`: rows of a
    /// matrix): [`plan_scan`] on this GPU, with this scanner's forced schedule if any.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let s = gpu.segment_scanner::<f32, _>(cufold::ops::Sum)?;
    /// // On an H100 (132 multiprocessors): a thread from 32 * 4 * 132 segments.
    /// assert_eq!(s.plan(1 << 15, 1 << 25, true).schedule, cufold::segment::Schedule::Thread);
    /// assert_eq!(s.plan(1 << 12, 1 << 22, true).schedule, cufold::segment::Schedule::Block);
    /// // Rows of 2048 or more: the device-wide scan's tiles, every row in one launch.
    /// assert_eq!(s.plan(1 << 10, 1 << 24, true).schedule, cufold::segment::Schedule::Whole);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn plan(&self, segments: u64, total: u64, rows: bool) -> SegmentPlan {
        let dev = &self.gpu.inner.props;
        let plan = plan_scan(
            segments,
            total,
            rows,
            self.long_shape().is_some(),
            self.config.get_schedule(),
            self.block,
            dev,
        );
        on_thread_blocks(plan, segments, self.thread_block, dev)
    }

    /// Enqueues the scan of every row of `rows` in `x` into `y`, packed (`rows * cols`
    /// outputs, row `r` at `r * cols`).
    ///
    /// Errors, before any launch: as [`SegmentReducer::reduce_rows_into`](super::SegmentReducer::reduce_rows_into)
    /// for the rows, and a `y` whose length is not `rows * cols`
    /// ([`ErrorKind::LengthMismatch`]).
    ///
    /// ```no_run
    /// use cufold::{ops, segment::Rows, ScanKind};
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[3.0f32, 1.0, 2.0, 9.0, 5.0, 7.0, 8.0, 9.0]).unwrap();
    /// let mut y = gpu.stream().alloc_zeros::<f32>(6).unwrap();
    /// // Running maxima of the first 3 columns of a 2 x 4 matrix.
    /// gpu.segment_scanner::<f32, _>(ops::Max)?.scan_rows_into(&x, Rows::new(2, 3).stride(4), &mut y, ScanKind::Inclusive)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&y).unwrap(), [3.0, 3.0, 3.0, 5.0, 7.0, 8.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_rows_into(
        &self,
        x: &impl DevicePtr<T>,
        rows: Rows,
        y: &mut impl DevicePtrMut<O::Out>,
        kind: ScanKind,
    ) -> Result<()> {
        let outputs = check_rows::<O::Out>(&rows, x.len(), rows.cols)?;
        check_rows_out(&rows, outputs, y.len())?;
        if outputs == 0 {
            return Ok(());
        }
        let plan = self.plan(rows.rows as u64, outputs as u64, true);
        let stream = &self.gpu.inner.stream;
        let (x_ptr, _x_guard) = x.device_ptr(stream);
        let (y_ptr, _y_guard) = y.device_ptr_mut(stream);
        if plan.schedule == Schedule::Whole {
            if let (Some(k), true) = (self.rows_shape(rows), rows.rows > 1) {
                // SAFETY: rows checked against x; y holds rows * cols outputs.
                return unsafe { self.scan_rows_whole(x_ptr, rows, y_ptr, kind, k) };
            }
            let scanner = self.whole()?;
            let (t, o) = (
                std::mem::size_of::<T>() as u64,
                std::mem::size_of::<O::Out>() as u64,
            );
            for r in 0..rows.rows as u64 {
                let (xr, yr) = (
                    x_ptr + r * rows.stride as u64 * t,
                    y_ptr + r * rows.cols as u64 * o,
                );
                scanner.launch(xr, yr, rows.cols as u64, kind, false, 0)?;
            }
            return Ok(());
        }
        // SAFETY: rows checked against x; y holds rows * cols outputs.
        unsafe {
            self.launch(
                plan,
                SegmentArgs::rows(x_ptr, x.len() as u64, rows, y_ptr),
                kind,
            )
        }
    }

    /// Enqueues the scan of every segment `offsets[i]..offsets[i + 1]` of `x` into the same
    /// positions of `y` (as long as `x`); positions outside every segment are left as they
    /// are, and so are those of a segment whose offsets decrease or pass the end of `x` (not
    /// read, not written: module [`segment`](crate::segment)). Offsets that are not monotone
    /// can make valid segments overlap; their outputs then race, within `y`.
    ///
    /// Errors, before any launch: no offsets ([`ErrorKind::LengthMismatch`]), a `y` of
    /// another length than `x` ([`ErrorKind::LengthMismatch`]).
    ///
    /// ```no_run
    /// use cufold::{ops, ScanKind};
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[1u32, 2, 3, 4, 5, 6]).unwrap();
    /// let offsets = gpu.stream().clone_htod(&[0u64, 2, 2, 5]).unwrap();
    /// let mut y = gpu.stream().alloc_zeros::<u32>(6).unwrap();
    /// gpu.segment_scanner::<u32, _>(ops::Sum)?.scan_segments_into(&x, &offsets, &mut y, ScanKind::Inclusive)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&y).unwrap(), [1, 3, 3, 7, 12, 0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_segments_into(
        &self,
        x: &impl DevicePtr<T>,
        offsets: &impl DevicePtr<u64>,
        y: &mut impl DevicePtrMut<O::Out>,
        kind: ScanKind,
    ) -> Result<()> {
        check_offsets_len(offsets.len(), offsets.len().saturating_sub(1))?;
        check_scan_lengths(x.len(), y.len())?;
        let segments = offsets.len() as u64 - 1;
        if segments == 0 || x.len() == 0 {
            return Ok(());
        }
        let plan = self.plan(segments, x.len() as u64, false);
        let stream = &self.gpu.inner.stream;
        let (x_ptr, _x_guard) = x.device_ptr(stream);
        let (off_ptr, _off_guard) = offsets.device_ptr(stream);
        let (y_ptr, _y_guard) = y.device_ptr_mut(stream);
        // SAFETY: offsets hold segments + 1 values; y is as long as x, and the kernel writes
        // only within valid segments of x.
        unsafe {
            self.launch(
                plan,
                SegmentArgs::offsets(x_ptr, x.len() as u64, segments, off_ptr, y_ptr),
                kind,
            )
        }
    }

    /// [`Schedule::Whole`] for two rows or more: every row scanned by the device-wide scan's
    /// tiles and look-back, each on its own, in one launch (kernels/scan.cuh, `cf_scan_rows`)
    /// rather than a launch per row, whose first and last waves leave the device part-empty.
    ///
    /// # Safety
    ///
    /// `x_ptr` holds the rows (`(rows - 1) * stride + cols` elements), `y_ptr` `rows * cols`
    /// outputs.
    unsafe fn scan_rows_whole(
        &self,
        x_ptr: u64,
        rows: Rows,
        y_ptr: u64,
        kind: ScanKind,
        (shape, cell): (&ScanShape, &OnceLock<CudaFunction>),
    ) -> Result<()> {
        let rows_fn = get_or_try(cell, || {
            crate::scan::long_kernel(
                &self.gpu,
                "cf_scan_rows",
                &self.op.cuda(),
                self.param_bytes,
                TypeSizes::of::<T, O>(),
                shape,
            )
        })?;
        let (r, cols) = (rows.rows as u64, rows.cols as u64);
        let per_row = cols.div_ceil(shape.tile());
        let grid = r
            .checked_mul(per_row)
            .and_then(|t| u32::try_from(t).ok())
            .filter(|&g| g <= i32::MAX as u32)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::TooLarge,
                    format!("a scan of {r} rows of {cols} needs more tiles than one launch takes"),
                )
            })?;
        let slot_bytes = crate::scan::look_back_bytes(grid as u64, std::mem::size_of::<O::Acc>());
        let exclusive = u32::from(kind == ScanKind::Exclusive);
        let stride = rows.stride as u64;
        let stream = &self.gpu.inner.stream;
        self.gpu
            .inner
            .scratch
            .with_lease(stream, slot_bytes, 0, |lease| {
                let (leaves, nodes) = (lease.slots, lease.slots + slot_bytes as u64 / 2);
                let mut b = stream.launch_builder(rows_fn);
                b.arg(&x_ptr)
                    .arg(&y_ptr)
                    .arg(&stride)
                    .arg(&cols)
                    .arg(&per_row)
                    .arg(&exclusive)
                    .arg(&lease.ticket)
                    .arg(&leaves)
                    .arg(&nodes)
                    .arg(&*self.params);
                let cfg = crate::scan::launch_config(shape, TypeSizes::of::<T, O>(), grid);
                // SAFETY: (const In*, Out*, u64 stride, u64 cols, u64 per_row, unsigned, u64*
                // ticket, u64* leaves, u64* nodes, OpBytes), as crate::scan::long_kernel says:
                // the caller's rows and outputs; the ticket word's count is zero and its high half
                // the last epoch (the arena's contract, as for Scanner's launches); leaves and nodes
                // hold `slot_words` words for each of the grid's tiles, in the slot region.
                unsafe { b.launch(cfg) }
                    .map(|_| ())
                    .map_err(|e| Error::driver("launching the rows' scan kernel", e))
            })
    }

    /// The whole-array scanner, for a row long enough to take it alone.
    fn whole(&self) -> Result<&Scanner<T, O>> {
        get_or_try(&self.whole, || {
            self.gpu
                .scanner_with::<T, O>(self.op, self.config.get_scan())
        })
    }

    /// The device-wide scan's own shape, whose tiles take the long segments (`long_fns`);
    /// `None` for accumulators too large for it.
    fn long_shape(&self) -> Option<ScanShape> {
        self.tile_shapes.first().copied()
    }

    /// The device-wide scan's tiles of half its own ([`tile_shapes`]' second), for the long
    /// segments that fill them but not one of its own: where they hold
    /// `2^CF_SCAN_LONG_MIN_LOG` positions or more (the scan's lists take no shorter
    /// segments). 2^16 segments of 4096 f32 by offsets, H100, ms: 0.861 on the own tiles
    /// (256 x 32, each block's tile half empty), 0.814 on these (256 x 16); BENCHMARKS.md,
    /// "Segments".
    fn small_shape(&self) -> Option<ScanShape> {
        small_of(&self.tile_shapes)
    }

    /// The thread schedule's kernel in `thread_fns[cell]` lists long segments for these
    /// passes, ascending by tile, each with its cell in `long_fns`: for `LARGE`, the large
    /// tiles; for `OWN`, the own ([`Self::long_shape`]); for `SMALL`, the small tiles
    /// ([`Self::small_shape`]) and the own. Empty where the types have no device-wide shape.
    fn thread_passes(&self, cell: usize) -> Vec<(usize, ScanShape)> {
        let small = match cell {
            LARGE => return self.large.map(|l| (LARGE, l)).into_iter().collect(),
            SMALL => self.small_shape().map(|s| (SMALL, s)),
            _ => None,
        };
        small
            .into_iter()
            .chain(self.long_shape().map(|s| (OWN, s)))
            .collect()
    }

    /// The thread schedule's kernel (its cell in `thread_fns`) for `segments` segments by
    /// offsets over `n` elements, by the mean length as for rows ([`Self::rows_shape`]):
    /// `LARGE` where the mean segment fills a large tile ([`ScanShape::large`]) and the input
    /// reaches the device-wide scan's [`ScanConfig::large_from`]; `SMALL` where it fills a
    /// small tile ([`Self::small_shape`]) but not an own one; else `OWN`. 16 segments of 2^24
    /// f32 by offsets took 0.944 ms in the long pass on the own tiles (256 x 32), 0.84 on the
    /// large ones (512 x 32), 0.78 as rows (H100; docs/performance-notes.md, "Segments").
    /// A pass of its own for the small tiles costs ragged lengths, whose longest
    /// segments are few: power-law lengths (mean 5) with it, 0.415 -> 0.434-0.438 ms, its two
    /// passes 24 and 43 us under ncu ("Segments").
    fn thread_cell(&self, segments: u64, n: u64) -> usize {
        let mean = n / segments.max(1);
        cell_for(
            mean,
            self.large_for(mean, n).is_some(),
            self.small_shape().map(|s| s.tile()),
            self.long_shape().map(|s| s.tile()),
        )
    }

    /// The large tiles ([`ScanShape::large`]) for segments of `len` elements (on average)
    /// in an input of `n`: where one fills a tile and the input reaches the device-wide
    /// scan's [`ScanConfig::large_from`] bytes; `None` otherwise or where the types have
    /// none. The rule of rows ([`Self::rows_shape`]) and the long passes
    /// ([`Self::thread_cell`]).
    fn large_for(&self, len: u64, n: u64) -> Option<&ScanShape> {
        let bytes = n.saturating_mul(std::mem::size_of::<T>() as u64);
        self.large
            .as_ref()
            .filter(|l| l.tile() <= len && bytes >= self.config.get_scan().get_large_from())
    }

    /// Which tiles scan `rows` on [`Schedule::Whole`]: the large tiles
    /// ([`ScanShape::large`]) where a row fills one and the input reaches the device-wide
    /// scan's [`ScanConfig::large_from`]; else the largest of `tile_shapes` that a row fills
    /// (so that no block of a row's last tile stands mostly idle), else the smallest; `None`
    /// where the types have no device-wide shape. With the shape, the cell that holds (or
    /// will hold) its `cf_scan_rows` kernel.
    fn rows_shape(&self, rows: Rows) -> Option<(&ScanShape, &OnceLock<CudaFunction>)> {
        let cols = rows.cols as u64;
        if let Some(l) = self.large_for(cols, (rows.rows as u64).saturating_mul(cols)) {
            return Some((l, &self.large_fn));
        }
        let last = self.tile_shapes.len().checked_sub(1)?;
        let k = self
            .tile_shapes
            .iter()
            .position(|s| s.tile() <= cols)
            .unwrap_or(last);
        Some((&self.tile_shapes[k], &self.rows_fns[k]))
    }

    /// # Safety
    ///
    /// As [`launch_segments`].
    pub(super) unsafe fn launch(
        &self,
        plan: SegmentPlan,
        args: SegmentArgs,
        kind: ScanKind,
    ) -> Result<()> {
        // Ragged offsets on the thread schedule: segments of half a tile of the device-wide
        // scan or more (a long tail of lengths, or few long ones) are listed, then scanned by that
        // scan's tiles and look-back, each on its own (kernels/scan.cuh, cf_scan_long).
        let thread_cell = self.thread_cell(args.segments, args.n);
        // The tiles the kernel lists long segments for (each cell's kernel is compiled for
        // its own; the others' kernels get no lists), and whether it is given the lists.
        let tiles: Vec<(usize, ScanShape)> = match plan.schedule {
            Schedule::Thread => self.thread_passes(thread_cell),
            _ => Vec::new(),
        };
        let listing = plan.schedule == Schedule::Thread
            && args.off_ptr != 0
            && args.n >= LONG_PASS_MIN_N
            && !tiles.is_empty();
        let (cell, group, block, items) = match plan.schedule {
            Schedule::Thread => (
                &self.thread_fns[thread_cell],
                1,
                self.thread_block,
                self.items,
            ),
            Schedule::Warp => {
                // Segments by offsets (a forced warp) are as long as the mean.
                let cols = match args.off_ptr {
                    0 => args.cols,
                    _ => args.n / args.segments.max(1),
                };
                let items = scan_warp_items(cols, std::mem::size_of::<T>(), self.items);
                (
                    &self.warp_fns[items.ilog2() as usize],
                    32,
                    self.block,
                    items,
                )
            }
            _ => (&self.block_fn, self.block, self.block, self.items),
        };
        let long_tiles: Vec<u64> = tiles.iter().map(|(_, s)| s.tile()).collect();
        let f = get_or_try(cell, || {
            let cuda = self.op.cuda();
            self.gpu.kernel(
                "cf_segment_scan",
                scan_kernel_source(&cuda, self.param_bytes, block, items, group, &long_tiles),
            )
        })?;
        let exclusive = u32::from(kind == ScanKind::Exclusive);
        // The segment kernel, with the long lists from `hdr` (or none: 0).
        let segments = |hdr: u64| {
            // SAFETY: the caller's buffers; `hdr` is 0 or the long lists one after another,
            // with the layouts the kernel derives from n and the tiles (long_list_layout,
            // cf::list_for_scan).
            unsafe {
                launch_segments(
                    &self.gpu,
                    f,
                    plan.grid,
                    (block, 0),
                    &args,
                    exclusive,
                    hdr,
                    &self.params,
                    "launching the segmented scan kernel",
                )
            }
        };
        if !listing {
            return segments(0);
        }
        // SAFETY: the caller's x and y; the kernel lists its long segments from `hdrs[0]`.
        unsafe {
            self.with_long_passes(
                &tiles,
                (args.x_ptr, args.out_ptr, args.n),
                exclusive,
                0,
                |_, hdrs| segments(hdrs[0]),
            )
        }
    }

    /// The long pass's kernel on `long_shape`'s tiles (`which`: its cell in `long_fns`) and
    /// the blocks of it the device holds at once; compiled (or loaded) on first use.
    fn long_kernel(&self, which: usize, long_shape: &ScanShape) -> Result<&(CudaFunction, u64)> {
        get_or_try(&self.long_fns[which], || {
            let f = crate::scan::long_kernel(
                &self.gpu,
                "cf_scan_long",
                &self.op.cuda(),
                self.param_bytes,
                TypeSizes::of::<T, O>(),
                long_shape,
            )?;
            let dynamic = long_shape.dynamic_bytes(TypeSizes::of::<T, O>());
            let sm_count = self.gpu.props().sm_count;
            let grid = resident_grid(&f, long_shape.block, dynamic, sm_count, "long-pass scan")?;
            Ok((f, grid))
        })
    }

    /// Enqueues `fill`, a launch that lists the long segments of `x` (`n` values, scanned
    /// into `y`) at the long lists it is given (one for each of `passes`, in order, one
    /// after another from the first, as `cf::list_for_scan` finds them), with
    /// `fill_slots` bytes of the scratch memory's slots for its own look-back, then each
    /// pass: every segment of its list scanned with the device-wide scan's tiles and
    /// look-back on the pass's tiles (kernels/scan.cuh, `cf_scan_long`; `which`: its kernel's
    /// cell in `long_fns`). All under one lease, one after the other on the stream, each
    /// launch taking tickets from the lease's word in turn.
    ///
    /// # Safety
    ///
    /// `x` holds `n` values and `y` room for `n` outputs; `fill` lists only segments within
    /// them, each list laid out for `n` and its pass's tile (`long_list_layout`,
    /// `cf::scan_long_list`); `passes` ascend by tile.
    unsafe fn with_long_passes(
        &self,
        passes: &[(usize, ScanShape)],
        (x_ptr, y_ptr, n): (u64, u64, u64),
        exclusive: u32,
        fill_slots: usize,
        fill: impl FnOnce(&Lease, &[u64]) -> Result<()>,
    ) -> Result<()> {
        // Each pass's kernel, tiles and grid, its list's place in the plain region and the
        // bytes of its slots.
        let mut plan = Vec::with_capacity(passes.len());
        let (mut list_at, mut slot_bytes) = (0usize, fill_slots);
        for (which, shape) in passes {
            let (f, resident) = self.long_kernel(*which, shape)?;
            let tile_log = shape.tile().ilog2();
            let min_log = (tile_log - 1).max(defines::CF_SCAN_LONG_MIN_LOG);
            let (_, tiles, list_bytes) = long_list_layout(n, min_log, tile_log, 0);
            // Blocks take tiles in turn until the reserved ones run out (kernels/scan.cuh,
            // cf_scan_long), so the grid is what the device holds at once, or the list's
            // capacity if smaller.
            let grid = tiles.min(*resident) as u32;
            let slots = crate::scan::look_back_bytes(tiles, std::mem::size_of::<O::Acc>());
            plan.push((f, shape, grid, list_at as u64, slots));
            list_at += list_bytes;
            slot_bytes = slot_bytes.max(slots);
        }
        let stream = &self.gpu.inner.stream;
        self.gpu
            .inner
            .scratch
            .with_lease(stream, slot_bytes, list_at, |lease| {
                let hdrs: Vec<u64> = plan.iter().map(|p| lease.plain + p.3).collect();
                for &hdr in &hdrs {
                    clear_long_list(stream, hdr)?;
                }
                fill(&lease, &hdrs)?;
                for ((f, shape, grid, _, slots), hdr) in plan.iter().zip(&hdrs) {
                    let (leaves, nodes) = (lease.slots, lease.slots + *slots as u64 / 2);
                    let mut b = stream.launch_builder(f);
                    b.arg(&x_ptr)
                        .arg(&y_ptr)
                        .arg(&n)
                        .arg(&exclusive)
                        .arg(&lease.ticket)
                        .arg(&leaves)
                        .arg(&nodes)
                        .arg(hdr)
                        .arg(&*self.params);
                    let cfg = crate::scan::launch_config(shape, TypeSizes::of::<T, O>(), *grid);
                    // SAFETY: (const In*, Out*, u64 n, unsigned, u64* ticket, u64* leaves, u64*
                    // nodes, u64* long_hdr, OpBytes), as crate::scan::long_kernel says. The list
                    // was filled by `fill`, its segments lie within x (and y, as long as x); the
                    // ticket word's count is zero and its high half the last epoch (the arena's
                    // contract, as for Scanner's launches; each launch before takes its tickets in
                    // full); leaves and nodes hold `slot_words` words for each of the list's
                    // tiles, in the slot region.
                    unsafe { b.launch(cfg) }.map_err(|e| {
                        Error::driver("launching the long segments' scan kernel", e)
                    })?;
                }
                Ok(())
            })
    }

    /// The long passes of a scan by key over `n` values, ascending by tile, with the index of
    /// each one's kernel in `long_fns`: none for inputs under `LONG_PASS_MIN_N`; else the
    /// thread schedule's own and small tiles ([`Self::thread_passes`]) and, where the input
    /// reaches the device-wide scan's [`ScanConfig::large_from`] bytes, the large tiles
    /// ([`ScanShape::large`]). The runs' lengths are not known before the pass, so each run
    /// is listed by its own, on the largest tile it fills (`cf::list_for_scan`).
    fn by_key_passes(&self, n: u64) -> Vec<(usize, ScanShape)> {
        if n < LONG_PASS_MIN_N {
            return Vec::new();
        }
        let mut passes = self.thread_passes(SMALL);
        let bytes = n.saturating_mul(std::mem::size_of::<T>() as u64);
        if let Some(l) = self.large {
            if !passes.is_empty() && bytes >= self.config.get_scan().get_large_from() {
                passes.push((LARGE, l));
            }
        }
        passes
    }

    /// The one-pass scan by key (kernels/segment_scan.cuh, `cf_scan_by_key`) for keys of
    /// `key_bytes` bytes, in blocks of [`SegmentConfig::block`] (a tile of a span of keys a
    /// warp), listing its long runs for `passes` ([`Self::by_key_passes`]); compiled (or
    /// loaded) on first use, and let take its lists of heads ([`key_places_bytes`]).
    fn by_key_kernel(
        &self,
        key_bytes: usize,
        passes: &[(usize, ScanShape)],
    ) -> Result<&CudaFunction> {
        let cell = &self.by_key_fns[key_bytes.trailing_zeros() as usize][passes.len()];
        get_or_try(cell, || {
            let word = key_word(key_bytes)?;
            let cuda = self.op.cuda();
            let (block, items) = (self.block, self.items);
            // Without long passes the kernel gets no lists.
            let long_tiles: Vec<u64> = passes.iter().map(|(_, s)| s.tile()).collect();
            let f = self.gpu.kernel(
                "cf_scan_by_key",
                scan_by_key_source(&cuda, self.param_bytes, (block, items), &long_tiles, word),
            )?;
            let bytes = key_places_bytes(block);
            allow_dynamic_shared(&f, bytes as usize, || {
                format!(
                    "letting the scan by key take {bytes} bytes of shared memory (blocks of \
                     {block}): use a smaller SegmentConfig::block on this GPU"
                )
            })?;
            Ok(f)
        })
    }

    /// Enqueues the scan by key of the `n > 0` values at `x` into `y`, restarting at each
    /// run of equal consecutive keys at `keys` (`key_bytes` bytes each): one pass
    /// (`cf_scan_by_key`), then the long passes for its longest runs
    /// ([`Self::by_key_passes`]).
    ///
    /// # Safety
    ///
    /// `keys`, `x` and `y` hold `n` keys, values and outputs.
    pub(super) unsafe fn launch_by_key(
        &self,
        key_bytes: usize,
        keys: u64,
        x: u64,
        n: u64,
        y: u64,
        kind: ScanKind,
    ) -> Result<()> {
        let passes = self.by_key_passes(n);
        let f = self.by_key_kernel(key_bytes, &passes)?;
        let block = self.block;
        let (tiles, mark_bytes) = key_tiles(n, block, "a scan by key")?;
        let exclusive = u32::from(kind == ScanKind::Exclusive);
        let stream = &self.gpu.inner.stream;
        let by_key = |lease: &Lease, hdrs: &[u64]| -> Result<()> {
            // Each tile's own mark, then its inclusive prefix (cf::chained_look_back).
            let (aggs, incls) = (lease.slots, lease.slots + mark_bytes as u64 / 2);
            let lists = hdrs.first().copied().unwrap_or(0);
            let mut b = stream.launch_builder(f);
            b.arg(&keys)
                .arg(&x)
                .arg(&n)
                .arg(&tiles)
                .arg(&exclusive)
                .arg(&y)
                .arg(&lease.ticket)
                .arg(&aggs)
                .arg(&incls)
                .arg(&lists)
                .arg(&*self.params);
            let cfg = LaunchConfig {
                grid_dim: (tiles as u32, 1, 1),
                block_dim: (block, 1, 1),
                shared_mem_bytes: key_places_bytes(block),
            };
            // SAFETY: (const word* keys, const In* x, u64 n, u64 tiles, unsigned, Out* y,
            // u64* ticket, u64* aggs, u64* incls, u64* lists, OpBytes):
            // the caller's buffers, y written at the runs' positions only; the ticket word's
            // count is zero and its high half the last epoch (the arena's contract); aggs and
            // incls hold a slot of a 16-byte mark per tile each; `lists` is 0 or the cleared
            // long lists for n and the tiles the kernel was compiled for, one after another.
            unsafe { b.launch(cfg) }
                .map(|_| ())
                .map_err(|e| Error::driver("launching the scan by key", e))
        };
        if passes.is_empty() {
            return self
                .gpu
                .inner
                .scratch
                .with_lease(stream, mark_bytes, 0, |lease| by_key(&lease, &[]));
        }
        // SAFETY: the caller's buffers; the kernel lists runs within them for n and the
        // passes' tiles, which it was compiled for.
        unsafe { self.with_long_passes(&passes, (x, y, n), exclusive, mark_bytes, by_key) }
    }
}

impl Gpu {
    /// A segmented scanner for `op` over elements of type `T` (module
    /// [`segment`](crate::segment)); kernels are compiled on first use. Errors for an
    /// operator that cannot be scanned ([`ErrorKind::InvalidConfig`]).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let row_cumsum = gpu.segment_scanner::<f32, _>(cufold::ops::Sum)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn segment_scanner<T: DeviceValue, O: Operator<T>>(
        &self,
        op: O,
    ) -> Result<SegmentScanner<T, O>> {
        self.segment_scanner_with(op, SegmentConfig::default())
    }

    /// A segmented scanner built with `config` (block size, a forced schedule): the speed
    /// changes, never the result.
    ///
    /// ```no_run
    /// use cufold::segment::{Schedule, SegmentConfig};
    /// let gpu = cufold::Gpu::open(0)?;
    /// let config = SegmentConfig::default().schedule(Some(Schedule::Thread));
    /// let s = gpu.segment_scanner_with::<f32, _>(cufold::ops::Sum, config)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn segment_scanner_with<T: DeviceValue, O: Operator<T>>(
        &self,
        op: O,
        config: SegmentConfig,
    ) -> Result<SegmentScanner<T, O>> {
        SegmentScanner::new(self.clone(), op, config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_take_tiles_halving_to_64_bytes_then_64_threads() {
        let tiles = |sizes, scan: ScanConfig| -> Vec<(u32, u32)> {
            tile_shapes(sizes, &scan)
                .iter()
                .map(|s| (s.block, s.items))
                .collect()
        };
        let f32s = TypeSizes::uniform(4);
        assert_eq!(
            tiles(f32s, ScanConfig::default()),
            [(256, 32), (256, 16), (128, 16), (64, 16)]
        );
        assert_eq!(
            tiles(f32s, ScanConfig::default().block(128)),
            [(128, 32), (128, 16), (64, 16)]
        );
        // 32 bytes a thread: kept, the block halves.
        assert_eq!(
            tiles(f32s, ScanConfig::default().bytes_per_thread(32)),
            [(256, 8), (128, 8), (64, 8)]
        );
        assert_eq!(
            tiles(TypeSizes::uniform(8), ScanConfig::default()),
            [(256, 16), (256, 8), (128, 8), (64, 8)]
        );
        // Every shape is the device-wide scan's under that configuration, the first its own.
        let first = tile_shapes(f32s, &ScanConfig::default())[0];
        assert_eq!(
            first,
            crate::scan::shape_for(f32s, &ScanConfig::default()).unwrap()
        );
        assert!(tile_shapes(f32s, &ScanConfig::default())
            .iter()
            .all(|s| s.resident));
    }

    #[test]
    fn long_segments_take_small_tiles_where_the_mean_fills_one_but_not_an_own() {
        let f32s = tile_shapes(TypeSizes::uniform(4), &ScanConfig::default());
        let small = small_of(&f32s).map(|s| s.tile());
        let own = Some(f32s[0].tile());
        assert_eq!((small, own), (Some(4096), Some(8192)));
        // f64: half the own tile is 2048, under the scan's lists' least length.
        let f64s = tile_shapes(TypeSizes::uniform(8), &ScanConfig::default());
        assert_eq!(small_of(&f64s), None);
        for (mean, cell) in [
            (5, OWN),
            (4095, OWN),
            (4096, SMALL),
            (8191, SMALL),
            (8192, OWN),
        ] {
            assert_eq!(cell_for(mean, false, small, own), cell, "mean {mean}");
            assert_eq!(
                cell_for(mean, false, None, own),
                OWN,
                "mean {mean}, no small tiles"
            );
        }
        assert_eq!(cell_for(1 << 20, true, small, own), LARGE);
    }
}
