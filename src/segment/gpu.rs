//! The segmented reduction on the GPU: one compiled kernel per operator, element type and
//! schedule (a warp or a block per segment), one launch per call, on the caller's stream.

use super::key_runs::RunCache;
use super::plan::{
    check_offsets_len, check_rows, check_rows_out, on_thread_blocks, plan_reduction,
    split_chunk_log, with_schedule, Schedule, SegmentPlan, LANES, LONG_PASS_MIN_N,
};
use super::{Rows, SegmentConfig};
use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::jit::embedded::defines;
use crate::gpu::{allow_dynamic_shared, get_or_try, jit, resident_grid, Gpu};
use crate::ops::check::check_empty;
use crate::ops::{CudaOp, Operator, ParamBlob};
use crate::reduce::{ReduceShape, Reducer};
use crate::scan::look_back_bytes;
use cudarc::driver::{
    CudaFunction, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};
use std::marker::PhantomData;
use std::sync::OnceLock;

/// Bytes a thread of the warp schedule may hold per tile (loaded inputs of an order-free
/// operator, accumulators of the others), for which its loads are doubled: 128. Measured on an
/// H100 (2^28 f32 in all, one call, two rounds, GB/s, four loads a thread against eight):
/// 2^18 rows of 1024 sum 2734 / 2714 -> 2860 / 2862, max 3012 / 3026 -> 3064 / 3076; the same
/// doubling for a block per segment lost (2^14 rows of 2^14, sum 2888 / 2903 -> 2661 / 2666;
/// 2^15 rows of 8192, 2919 / 2917 -> 2794 / 2812), so blocks keep the reduction's shape
/// (docs/performance-notes.md, "Segments"). Since each tile's loads are issued before the
/// tile before it is joined (`cf::pipelined_trees`, a thread holding two tiles' inputs), the
/// doubling measured again (one call, two rounds, sums, four loads against eight): rows of
/// 1024 2968 / 2939 -> 3020 / 3014, rows of 2048 2796 / 2800 -> 3006 / 3020; for blocks,
/// rows of 4096 3122 / 3109 -> 1745 / 1740 (a tile of 8192 over a row of 4096), 2^14 rows of
/// 2^14 3022 / 3006 -> 3016 / 3029 ("Segments").
const WARP_HELD_BYTES: usize = 128;

/// The reduction's `shape` with twice the loads in flight (at most 8) where a thread then
/// holds at most [`WARP_HELD_BYTES`] per tile, `held` bytes per position (a row of 1024 f32
/// is then one warp tile). The tiles are aligned blocks of the canonical tree either way: the
/// bits do not change.
fn warp_shape(shape: ReduceShape, held: usize) -> ReduceShape {
    let loads = (shape.loads * 2).min(8);
    if loads as usize * shape.vec as usize * held <= WARP_HELD_BYTES {
        ReduceShape { loads, ..shape }
    } else {
        shape
    }
}

/// The loads a lane of the warp schedule takes per tile for segments of `mean` positions on
/// average, `vec` a load: the fewest whose tile (32 lanes, `loads * vec` positions each)
/// holds the mean, a power of two, at most `most` (the reduction's [`warp_shape`]). A tile
/// of 1024 f32 over segments of 128 spent seven lanes' loads and trees of eight on positions
/// past the segment (ncu, H100: 99 registers, 25% occupancy, 2.4 ms for 2^21 segments of
/// 128 by offsets, 28% of a copy; BENCHMARKS.md). The tiles are aligned blocks of the
/// canonical tree whatever their size: the bits do not change.
fn warp_loads(mean: u64, vec: u32, most: u32) -> u32 {
    let want = mean
        .div_ceil(32 * vec.max(1) as u64)
        .max(1)
        .next_power_of_two();
    want.min(most.max(1) as u64) as u32
}

/// The full CUDA source of the segmented reduction kernel for `op` (whose run-time
/// parameters are `param_bytes` long), with `shape`'s block size, loads and order-free
/// schedule (an in-order fold instead of the tree, for every group), and `group`
/// threads per segment (1, 32, or the whole block; 8 or 16 for rows only: the kernel does
/// nothing for segments by offsets).
///
/// ```
/// use cufold::ops::{Operator, Sum};
/// let shape = cufold::reduce::ReduceShape::for_sizes(4, 256).unwrap();
/// let src = cufold::segment::kernel_source(&<Sum as Operator<f32>>::cuda(&Sum), 0, &shape, 32);
/// assert!(src.contains("#define CF_GROUP 32") && src.contains("#include \"cufold/segment.cuh\""));
/// ```
pub fn kernel_source(op: &CudaOp, param_bytes: usize, shape: &ReduceShape, group: u32) -> String {
    jit::kernel_source("segment", op, &segment_defines(param_bytes, shape, group))
}

/// The defines of the segmented reduction kernel's source ([`kernel_source`]).
fn segment_defines(
    param_bytes: usize,
    shape: &ReduceShape,
    group: u32,
) -> Vec<(&'static str, String)> {
    vec![
        ("CF_BLOCK", shape.block.to_string()),
        ("CF_GROUP", group.to_string()),
        ("CF_K", shape.loads.to_string()),
        ("CF_VEC", shape.vec.to_string()),
        ("CF_ORDER_FREE", (shape.order_free as u32).to_string()),
        ("CF_OP_BYTES", param_bytes.to_string()),
    ]
}

/// Bytes of what the one-pass reduction by key's tiles publish (`cf::RunMark`: heads
/// counted, one past the last head's position).
const RUN_MARK_BYTES: usize = 16;
/// The tiles of a one-pass kernel by key (kernels/segment.cuh, `cf::KeyTile`: a block a
/// tile of a span of keys a warp, tiles in ticket order) over `n` keys in blocks of `block`
/// threads, and the bytes of the look-back's slots they publish in (none for one tile).
/// Errors where the tiles are more than one launch's grid takes; `what` names the call.
pub(super) fn key_tiles(n: u64, block: u32, what: &str) -> Result<(u64, usize)> {
    let tile = u64::from(block) * u64::from(by_key_items(block));
    let tiles = n.div_ceil(tile);
    if tiles > i32::MAX as u64 {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!("{what} of {n} keys needs more tiles than one launch takes"),
        ));
    }
    let slot_bytes = if tiles > 1 {
        look_back_bytes(tiles, RUN_MARK_BYTES)
    } else {
        0
    };
    Ok((tiles, slot_bytes))
}

/// Keys a lane takes in the one-pass reduction by key (kernels/segment.cuh,
/// `cf_reduce_by_key`) for blocks of `block` threads: 32 (a warp's span of 1024 keys), 16
/// for blocks over 512, so that the block's lists of heads stay within 32 KiB of shared
/// memory.
pub(super) fn by_key_items(block: u32) -> u32 {
    if block > 512 {
        16
    } else {
        32
    }
}

/// The source of the one-pass reduction by key (kernels/segment.cuh, `cf_reduce_by_key`):
/// the thread schedule's ([`kernel_source`] with one thread per segment) for keys whose
/// unsigned word is `key_word`.
pub(super) fn by_key_source(
    op: &CudaOp,
    param_bytes: usize,
    shape: &ReduceShape,
    key_word: &str,
) -> String {
    let mut defines = segment_defines(param_bytes, shape, 1);
    defines.push(("CF_KEY_WORD", key_word.to_string()));
    defines.push(("CF_KEY_ITEMS", by_key_items(shape.block).to_string()));
    jit::kernel_source("segment", op, &defines)
}

/// Compiles the segmented reduction kernel of `op` for the GPU architecture `arch` (such
/// as `"sm_90"`) and returns its CUBIN; like
/// [`reduce::compile_kernel`](crate::reduce::compile_kernel), it needs NVRTC but no device.
///
/// ```no_run
/// use cufold::ops::{Operator, Sum};
/// let shape = cufold::reduce::ReduceShape::for_sizes(4, 256)?;
/// let cubin = cufold::segment::compile_kernel(&<Sum as Operator<f32>>::cuda(&Sum), 0, &shape, 32, "sm_90")?;
/// assert!(!cubin.is_empty());
/// # Ok::<(), cufold::Error>(())
/// ```
pub fn compile_kernel(
    op: &CudaOp,
    param_bytes: usize,
    shape: &ReduceShape,
    group: u32,
    arch: &str,
) -> Result<Vec<u8>> {
    jit::probe_nvrtc()?;
    jit::compile(
        &kernel_source(op, param_bytes, shape, group),
        &jit::compile_options(arch),
    )
}

/// A compiled segmented reduction for `op` over elements of type `T`, on a [`Gpu`]'s
/// stream: one result per row of a matrix or per segment of CSR offsets (module
/// [`segment`](crate::segment): each result has the bits of the whole-array reduction of
/// its segment alone).
///
/// Every method enqueues on the stream and returns at once: no synchronisation, no host
/// copy; the split schedule's partial results use the [`Gpu`] handle's scratch memory
/// (allocated once, grown when needed). Kernels are compiled (or loaded from the cache) on
/// first use of
/// each schedule.
///
/// ```no_run
/// use cufold::{ops, segment::Rows};
/// let gpu = cufold::Gpu::open(0)?;
/// let x = gpu.stream().clone_htod(&[1.0f32, 5.0, 2.0, 7.0, 3.0, 9.0]).unwrap();
/// let mut out = gpu.stream().alloc_zeros::<f32>(2).unwrap();
/// let sums = gpu.segment_reducer::<f32, _>(ops::Sum)?;
/// sums.reduce_rows_into(&x, Rows::new(2, 3), &mut out)?;
/// assert_eq!(gpu.stream().clone_dtoh(&out).unwrap(), [8.0, 19.0]);
/// # Ok::<(), cufold::Error>(())
/// ```
pub struct SegmentReducer<T: DeviceValue, O: Operator<T>> {
    pub(super) gpu: Gpu,
    op: O,
    pub(super) params: Box<ParamBlob>,
    param_bytes: usize,
    config: SegmentConfig,
    pub(super) shape: ReduceShape,
    /// The thread schedule's shape: `shape` in blocks of [`SegmentConfig::thread_block`].
    thread_shape: ReduceShape,
    split_shape: ReduceShape,
    thread: OnceLock<CudaFunction>,
    /// The warp schedule's kernels by the log2 of their loads ([`warp_loads`]).
    warp: [OnceLock<CudaFunction>; 4],
    lanes: OnceLock<CudaFunction>,
    block: OnceLock<CudaFunction>,
    chunk_fn: OnceLock<CudaFunction>,
    combine_fn: OnceLock<CudaFunction>,
    /// The long pass's chunk kernel and the blocks of it the device holds at once.
    long_chunks_fn: OnceLock<(CudaFunction, u64)>,
    long_combine_fn: OnceLock<CudaFunction>,
    /// The one-pass reduction by key, by the log2 of the key's bytes.
    pub(super) by_key: [OnceLock<CudaFunction>; 4],
    whole: OnceLock<Reducer<T, O>>,
    pub(super) runs: RunCache,
    _input: PhantomData<fn(T)>,
}

impl<T: DeviceValue, O: Operator<T>> std::fmt::Debug for SegmentReducer<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentReducer")
            .field("op", &O::name())
            .field("input", &T::cuda_name())
            .field("config", &self.config)
            .field("gpu", &self.gpu)
            .finish()
    }
}

impl<T: DeviceValue, O: Operator<T>> SegmentReducer<T, O> {
    pub(crate) fn new(gpu: Gpu, op: O, config: SegmentConfig) -> Result<Self> {
        config.check()?;
        let shape = ReduceShape::for_operator::<T, O>(config.get_block())?;
        let thread_shape = ReduceShape::for_operator::<T, O>(config.get_thread_block())?;
        let split_shape = ReduceShape::for_operator::<T, O>(config.get_split_block())?;
        let params = op.params();
        Ok(SegmentReducer {
            gpu,
            op,
            params: ParamBlob::new(&params, O::name)?,
            param_bytes: params.bytes().len(),
            config,
            shape,
            thread_shape,
            split_shape,
            thread: OnceLock::new(),
            warp: Default::default(),
            lanes: OnceLock::new(),
            block: OnceLock::new(),
            chunk_fn: OnceLock::new(),
            combine_fn: OnceLock::new(),
            long_chunks_fn: OnceLock::new(),
            long_combine_fn: OnceLock::new(),
            by_key: Default::default(),
            whole: OnceLock::new(),
            runs: RunCache::default(),
            _input: PhantomData,
        })
    }

    /// The operator.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let r = gpu.segment_reducer::<f32, _>(cufold::ops::Max)?;
    /// let _max: &cufold::ops::Max = r.op();
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn op(&self) -> &O {
        &self.op
    }

    /// The plan for `segments` segments holding about `total` elements (`rows`: rows of a
    /// matrix), with this reducer's configuration.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let r = gpu.segment_reducer::<f32, _>(cufold::ops::Sum)?;
    /// assert_eq!(r.plan(1 << 20, 16 << 20, false).schedule, cufold::segment::Schedule::Thread);
    /// assert_eq!(r.plan(1 << 14, 1 << 24, true).schedule, cufold::segment::Schedule::Warp);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn plan(&self, segments: u64, total: u64, rows: bool) -> SegmentPlan {
        let (block, dev) = (self.config.get_block(), &self.gpu.inner.props);
        let plan = match self.config.get_schedule() {
            None => plan_reduction(
                segments,
                total,
                rows,
                O::ORDER_FREE,
                std::mem::size_of::<T>() as u64,
                block,
                dev,
            ),
            // Whole rows, split rows and groups of lanes are for rows only: segments on the
            // device have lengths the host does not know.
            Some(Schedule::Whole | Schedule::Split) if !rows => {
                with_schedule(Schedule::Block, segments, block, dev)
            }
            Some(Schedule::Lanes) if !rows => with_schedule(Schedule::Warp, segments, block, dev),
            Some(s) => with_schedule(s, segments, block, dev),
        };
        on_thread_blocks(plan, segments, self.thread_shape.block, dev)
    }

    /// Enqueues one result per row of `rows` in `x` into `out` (`rows.rows` values): row
    /// `r`'s result is the reduction of `x[r * stride..][..cols]`.
    ///
    /// Errors, before any launch, as [`Cpu::reduce_rows`](crate::Cpu::reduce_rows)'s: a
    /// stride shorter than a row, for one row too
    /// ([`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig)), an output past
    /// `isize::MAX` bytes ([`ErrorKind::TooLarge`](crate::ErrorKind::TooLarge)), an `x` too
    /// short for the rows or an `out` of another length than `rows.rows`
    /// ([`ErrorKind::LengthMismatch`](crate::ErrorKind::LengthMismatch)), zero columns for an
    /// operator without an empty value ([`ErrorKind::EmptyInput`](crate::ErrorKind::EmptyInput)).
    ///
    /// ```no_run
    /// use cufold::{ops, segment::Rows};
    /// let gpu = cufold::Gpu::open(0)?;
    /// // Column of the largest element of each row of a 2 x 3 view of a 2 x 4 matrix.
    /// let x = gpu.stream().clone_htod(&[1.0f32, 9.0, 2.0, 0.0, 7.0, 3.0, 8.0, 0.0]).unwrap();
    /// let mut out = gpu.stream().alloc_zeros::<cufold::ops::Indexed<f32>>(2).unwrap();
    /// gpu.segment_reducer::<f32, _>(ops::ArgMax)?.reduce_rows_into(&x, Rows::new(2, 3).stride(4), &mut out)?;
    /// let host = gpu.stream().clone_dtoh(&out).unwrap();
    /// assert_eq!((host[0].index, host[1].index), (1, 2));
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_rows_into(
        &self,
        x: &impl DevicePtr<T>,
        rows: Rows,
        out: &mut impl DevicePtrMut<O::Out>,
    ) -> Result<()> {
        let count = check_rows::<O::Out>(&rows, x.len(), 1)?;
        check_rows_out(&rows, count, out.len())?;
        if rows.rows == 0 {
            return Ok(());
        }
        check_empty::<T, O>(rows.cols as u64)?;
        let total = (rows.rows as u64).saturating_mul(rows.cols as u64);
        let plan = self.plan(rows.rows as u64, total, true);
        let stream = &self.gpu.inner.stream;
        let (x_ptr, _x_guard) = x.device_ptr(stream);
        let (out_ptr, _out_guard) = out.device_ptr_mut(stream);
        if plan.schedule == Schedule::Split && rows.cols > 1 {
            return self.split_rows(x_ptr, rows, out_ptr);
        }
        if plan.schedule == Schedule::Whole && rows.cols > 0 {
            let reducer = self.whole()?;
            let (t, o) = (
                std::mem::size_of::<T>() as u64,
                std::mem::size_of::<O::Out>() as u64,
            );
            for r in 0..rows.rows as u64 {
                reducer.launch(
                    x_ptr + r * rows.stride as u64 * t,
                    rows.cols as u64,
                    out_ptr + r * o,
                )?;
            }
            return Ok(());
        }
        // SAFETY: x holds at least (rows - 1) * stride + cols elements (checked), out holds
        // `rows` outputs.
        unsafe {
            self.launch(
                plan,
                SegmentArgs::rows(x_ptr, x.len() as u64, rows, out_ptr),
            )
        }
    }

    /// Enqueues one result per segment `offsets[i]..offsets[i + 1]` of `x` into `out`
    /// (`offsets.len() - 1` values). An empty segment gets `finish(identity, 0)` if the
    /// operator has an empty value, and is left untouched otherwise; a segment whose
    /// offsets decrease or pass the end of `x` is not read and its output not written
    /// (module [`segment`](crate::segment)).
    ///
    /// Errors, before any launch: no offsets, or an `out` whose length is not
    /// `offsets.len() - 1` ([`ErrorKind::LengthMismatch`](crate::ErrorKind::LengthMismatch)).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[3.0f64, 1.0, 4.0, 1.0, 5.0]).unwrap();
    /// let offsets = gpu.stream().clone_htod(&[0u64, 2, 2, 5]).unwrap();
    /// let mut out = gpu.stream().alloc_zeros::<f64>(3).unwrap();
    /// gpu.segment_reducer::<f64, _>(cufold::ops::Sum)?.reduce_segments_into(&x, &offsets, &mut out)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&out).unwrap(), [4.0, 0.0, 10.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_segments_into(
        &self,
        x: &impl DevicePtr<T>,
        offsets: &impl DevicePtr<u64>,
        out: &mut impl DevicePtrMut<O::Out>,
    ) -> Result<()> {
        check_offsets_len(offsets.len(), out.len())?;
        let segments = out.len() as u64;
        if segments == 0 {
            return Ok(());
        }
        let plan = self.plan(segments, x.len() as u64, false);
        let stream = &self.gpu.inner.stream;
        let (x_ptr, _x_guard) = x.device_ptr(stream);
        let (off_ptr, _off_guard) = offsets.device_ptr(stream);
        let (out_ptr, _out_guard) = out.device_ptr_mut(stream);
        // SAFETY: offsets hold segments + 1 values, out holds `segments` outputs; the kernel
        // reads only segments within x's length.
        unsafe {
            self.launch(
                plan,
                SegmentArgs::offsets(x_ptr, x.len() as u64, segments, off_ptr, out_ptr),
            )
        }
    }

    /// The whole-array reducer, for rows long and few enough to take it one by one.
    fn whole(&self) -> Result<&Reducer<T, O>> {
        get_or_try(&self.whole, || self.gpu.reducer::<T, O>(self.op))
    }

    /// [`Schedule::Split`]: a block per aligned chunk of every row into the handle's scratch
    /// memory (each chunk's subtree of its row's tree, unfinished), then a block per row
    /// joining them. Two launches, in order on the stream.
    fn split_rows(&self, x_ptr: u64, rows: Rows, out_ptr: u64) -> Result<()> {
        let dev = &self.gpu.inner.props;
        let (r, cols) = (rows.rows as u64, rows.cols as u64);
        let shape = self.split_shape;
        let block = shape.block;
        let chunk_log = split_chunk_log(r, cols, shape.tile(), block, dev);
        let chunks = r * cols.div_ceil(1 << chunk_log);
        let chunk_fn = self.kernel_with(&self.chunk_fn, "cf_segment_chunks", shape, block)?;
        let combine_fn = self.kernel_with(&self.combine_fn, "cf_segment_combine", shape, block)?;
        let grid = with_schedule(Schedule::Block, chunks, block, dev).grid as u32;
        let rows_grid = r.clamp(1, i32::MAX as u64) as u32;
        let plain = chunks as usize * std::mem::size_of::<O::Acc>();
        let stream = &self.gpu.inner.stream;
        self.gpu
            .inner
            .scratch
            .with_lease(stream, 0, plain, |lease| {
                let (stride, chunk_log32) = (rows.stride as u64, chunk_log);
                let mut a = stream.launch_builder(chunk_fn);
                a.arg(&x_ptr)
                    .arg(&r)
                    .arg(&stride)
                    .arg(&cols)
                    .arg(&chunk_log32)
                    .arg(&lease.plain)
                    .arg(&*self.params);
                let cfg = |g: u32| LaunchConfig {
                    grid_dim: (g, 1, 1),
                    block_dim: (block, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: (const In*, u64, u64, u64, unsigned, Acc*, OpBytes): x holds the rows
                // (checked by the caller), the plain region `chunks` accumulators.
                unsafe { a.launch(cfg(grid.max(1))) }.map_err(|e| {
                    Error::driver("launching the segmented reduction's chunk kernel", e)
                })?;
                let mut b = stream.launch_builder(combine_fn);
                b.arg(&lease.plain)
                    .arg(&r)
                    .arg(&cols)
                    .arg(&chunk_log32)
                    .arg(&out_ptr)
                    .arg(&*self.params);
                // SAFETY: (const Acc*, u64, u64, unsigned, Out*, OpBytes): the partials the chunk
                // kernel wrote before it on this stream, `rows` outputs.
                unsafe { b.launch(cfg(rows_grid)) }
                    .map(|_| ())
                    .map_err(|e| {
                        Error::driver("launching the segmented reduction's combine kernel", e)
                    })
            })
    }

    /// The shape of the kernel for `group` threads per segment: [`warp_shape`] for a warp
    /// per segment, the thread schedule's own blocks for a thread, the reduction's for the
    /// others.
    fn shape_for(&self, group: u32) -> ReduceShape {
        let held = if O::ORDER_FREE {
            std::mem::size_of::<T>()
        } else {
            std::mem::size_of::<O::Acc>()
        };
        match group {
            32 => warp_shape(self.shape, held),
            1 => self.thread_shape,
            _ => self.shape,
        }
    }

    /// The kernel `name` of the generated source with `group` threads per segment, compiled
    /// (or loaded) into `cell` on first use.
    fn kernel<'a>(
        &self,
        cell: &'a OnceLock<CudaFunction>,
        name: &str,
        group: u32,
    ) -> Result<&'a CudaFunction> {
        self.kernel_with(cell, name, self.shape_for(group), group)
    }

    /// The kernel `name` of `shape` with `group` threads per segment, compiled (or loaded)
    /// into `cell` on first use.
    fn kernel_with<'a>(
        &self,
        cell: &'a OnceLock<CudaFunction>,
        name: &str,
        shape: ReduceShape,
        group: u32,
    ) -> Result<&'a CudaFunction> {
        get_or_try(cell, || self.compile(name, shape, group))
    }

    /// The kernel `name` of `shape` with `group` threads per segment, compiled (or loaded
    /// from the caches).
    fn compile(&self, name: &str, shape: ReduceShape, group: u32) -> Result<CudaFunction> {
        let cuda = self.op.cuda();
        self.gpu
            .kernel(name, kernel_source(&cuda, self.param_bytes, &shape, group))
    }

    /// The thread schedule's kernel (a thread per segment), compiled (or loaded) on first
    /// use, and let take its warps' queues ([`step_queue_bytes`]).
    fn thread_kernel(&self) -> Result<&CudaFunction> {
        get_or_try(&self.thread, || {
            let shape = self.shape_for(1);
            let f = self.compile("cf_segment_reduce", shape, 1)?;
            allow_step_queues(&f, shape.block, "segmented reduction", "thread_block")?;
            Ok(f)
        })
    }

    /// The one-pass reduction by key (kernels/segment.cuh, `cf_reduce_by_key`) for keys of
    /// `bytes` bytes whose unsigned word is `key_word`, on the thread schedule's shape;
    /// compiled (or loaded) on first use, and let take its warps' queues
    /// ([`step_queue_bytes`]).
    pub(super) fn by_key_kernel(&self, bytes: usize, key_word: &str) -> Result<&CudaFunction> {
        get_or_try(&self.by_key[bytes.trailing_zeros() as usize], || {
            let cuda = self.op.cuda();
            let shape = self.shape;
            let f = self.gpu.kernel(
                "cf_reduce_by_key",
                by_key_source(&cuda, self.param_bytes, &shape, key_word),
            )?;
            allow_step_queues(&f, shape.block, "reduction by key", "block")?;
            Ok(f)
        })
    }

    /// # Safety
    ///
    /// As [`launch_segments`].
    pub(super) unsafe fn launch(&self, plan: SegmentPlan, args: SegmentArgs) -> Result<()> {
        let f = match plan.schedule {
            Schedule::Thread => self.thread_kernel()?,
            Schedule::Warp => {
                let full = self.shape_for(32);
                let mean = if args.off_ptr == 0 {
                    args.cols
                } else {
                    args.n / args.segments.max(1)
                };
                let loads = warp_loads(mean, full.vec, full.loads);
                let shape = ReduceShape { loads, ..full };
                let cell = &self.warp[loads.trailing_zeros() as usize];
                self.kernel_with(cell, "cf_segment_reduce", shape, 32)?
            }
            Schedule::Lanes => self.kernel(&self.lanes, "cf_segment_reduce", LANES)?,
            _ => self.kernel(&self.block, "cf_segment_reduce", self.config.get_block())?,
        };
        let write_empty = u32::from(!O::EMPTY_IS_ERROR);
        let (block, shared) = match plan.schedule {
            Schedule::Thread => {
                let block = self.thread_shape.block;
                (block, step_queue_bytes(block))
            }
            _ => (self.config.get_block(), 0),
        };
        let what = "launching the segmented reduction kernel";
        // SAFETY (of each call): the caller's buffers; `hdr` is 0 or the long list, laid out
        // as the kernel derives it from n (long_list_layout).
        let launch = |hdr: u64| unsafe {
            launch_segments(
                &self.gpu,
                f,
                plan.grid,
                (block, shared),
                &args,
                write_empty,
                hdr,
                &self.params,
                what,
            )
        };
        if plan.schedule != Schedule::Thread || args.off_ptr == 0 || args.n < LONG_PASS_MIN_N {
            return launch(0);
        }
        // Ragged offsets on the thread schedule: segments too long for a warp (a long tail of
        // lengths) are listed for the long pass, chunks of them a block each, then a warp
        // per listed segment joining its chunks.
        let long = self.long_pass()?;
        let stream = &self.gpu.inner.stream;
        self.gpu
            .inner
            .scratch
            .with_lease(stream, 0, long.list_bytes(args.n), |lease| {
                let hdr = lease.plain;
                clear_long_list(stream, hdr)?;
                launch(hdr)?;
                // SAFETY: the list the launch above filled, over the same inputs and outputs.
                unsafe { long.launch(hdr, args.x_ptr, args.n, args.out_ptr) }
            })
    }

    /// The long pass's kernels, compiled (or loaded) on first use.
    pub(super) fn long_pass(&self) -> Result<LongPass<'_, T, O>> {
        // Blocks of CF_LONG_BLOCK for operators that are not order-free (kernels/long_list.cuh;
        // the thread schedule's loads, on which the chunks' least length depends), the
        // reducer's own for the others.
        let shape = match O::ORDER_FREE {
            true => self.shape,
            false => ReduceShape {
                block: defines::CF_LONG_BLOCK,
                ..self.shape
            },
        };
        // Blocks take the chunks in turn, so the chunk kernel's grid is what the device holds
        // at once: by thread count (8 blocks of 256 on an H100) a quarter of them waited for
        // a second round at 40 registers a thread (6 a multiprocessor); 16 segments of 2^24
        // f32 summed in 0.446 ms (ncu), 60% of the warps active, 0.415 ms with the grid
        // from the occupancy calculator.
        let (chunks, wave) = get_or_try(&self.long_chunks_fn, || {
            let f = self.compile("cf_segment_long_chunks", shape, shape.block)?;
            let sm_count = self.gpu.props().sm_count;
            let grid = resident_grid(&f, shape.block, 0, sm_count, "long-chunk")?;
            Ok((f, grid))
        })?;
        let combine = self.kernel_with(
            &self.long_combine_fn,
            "cf_segment_long_combine",
            shape,
            shape.block,
        )?;
        Ok(LongPass {
            reducer: self,
            shape,
            chunks,
            wave: *wave,
            combine,
        })
    }
}

/// The reduction's long pass (kernels/segment.cuh): after a thread-schedule launch that
/// filled the long list, a block per chunk of each listed segment, then a warp per listed
/// segment joining its chunks.
pub(super) struct LongPass<'a, T: DeviceValue, O: Operator<T>> {
    reducer: &'a SegmentReducer<T, O>,
    shape: ReduceShape,
    chunks: &'a CudaFunction,
    /// The chunk kernel's blocks the device holds at once.
    wave: u64,
    combine: &'a CudaFunction,
}

impl<T: DeviceValue, O: Operator<T>> LongPass<'_, T, O> {
    /// Bytes of the long list for an input of `n` elements ([`long_list_layout`]).
    pub(super) fn list_bytes(&self, n: u64) -> usize {
        self.layout(n).2
    }

    fn layout(&self, n: u64) -> (u64, u64, usize) {
        long_list_layout(
            n,
            defines::CF_LONG_MIN_LOG,
            defines::CF_LONG_CHUNK_MIN_LOG,
            std::mem::size_of::<O::Acc>(),
        )
    }

    /// Enqueues the long pass over the list at `hdr` that a launch before it on the stream
    /// filled, for the `n` inputs at `x_ptr`: the listed segments' results into `out_ptr`.
    ///
    /// # Safety
    ///
    /// `hdr` holds [`Self::list_bytes`] for `n`, filled by a thread-schedule launch over the
    /// same inputs and outputs (their entries name segments of x and outputs in out).
    pub(super) unsafe fn launch(&self, hdr: u64, x_ptr: u64, n: u64, out_ptr: u64) -> Result<()> {
        let (entries, chunk_cap, _) = self.layout(n);
        let r = self.reducer;
        let stream = &r.gpu.inner.stream;
        let cfg = |g: u64| LaunchConfig {
            grid_dim: (g.max(1) as u32, 1, 1),
            block_dim: (self.shape.block, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = stream.launch_builder(self.chunks);
        b.arg(&x_ptr).arg(&n).arg(&hdr).arg(&*r.params);
        // SAFETY: (const In*, u64 n, u64* long_hdr, OpBytes): the list the launch before
        // filled, chunks within the listed segments of x.
        unsafe { b.launch(cfg(self.wave.min(chunk_cap))) }
            .map_err(|e| Error::driver("launching the long segments' chunk kernel", e))?;
        let mut c = stream.launch_builder(self.combine);
        c.arg(&n).arg(&hdr).arg(&out_ptr).arg(&*r.params);
        // A warp per listed segment.
        let grid = r
            .gpu
            .inner
            .props
            .resident_blocks(self.shape.block)
            .min(entries.div_ceil(u64::from(self.shape.block / 32)));
        // SAFETY: (u64 n, u64* long_hdr, Out*, OpBytes): outputs of listed segments only.
        unsafe { c.launch(cfg(grid)) }
            .map(|_| ())
            .map_err(|e| Error::driver("launching the long segments' combine kernel", e))
    }
}

/// Zeroes the two counters of the long list at `hdr` (a lease's plain region, laid out by
/// [`long_list_layout`], which always holds them), before the launch that fills the list.
pub(super) fn clear_long_list(stream: &CudaStream, hdr: u64) -> Result<()> {
    // SAFETY: `hdr` starts a device region of at least 16 bytes (the list's counters) that
    // only this stream uses.
    unsafe { cudarc::driver::result::memset_d8_async(hdr, 0, 16, stream.cu_stream()) }
        .map_err(|e| Error::driver("clearing the long list's counters", e))
}

/// The long list's entries, chunk capacity and bytes for an input of `n` elements, segments
/// over `2^min_log` positions, chunks of `2^chunk_min_log` or more and `partial_bytes` per
/// chunk after the list, as kernels/long_list.cuh's `cf::LongList` lays them out (counters,
/// entries, chunk owners, then the chunk partials on a 16-byte boundary).
pub(super) fn long_list_layout(
    n: u64,
    min_log: u32,
    chunk_min_log: u32,
    partial_bytes: usize,
) -> (u64, u64, usize) {
    let entries = (n >> min_log) + 1;
    let chunk_cap = (n >> chunk_min_log) + entries;
    let head = (16 + 32 * entries + 4 * chunk_cap).next_multiple_of(16);
    let bytes = head + chunk_cap * partial_bytes as u64;
    (entries, chunk_cap, bytes as usize)
}

/// Where a segment kernel reads and writes (the parameters both segment kernels share):
/// `n` elements at `x_ptr`; `segments` segments, by the `segments + 1` offsets at `off_ptr`,
/// or rows of `cols` every `stride` elements when `off_ptr` is 0; outputs at `out_ptr`.
#[derive(Clone, Copy, Debug)]
pub(super) struct SegmentArgs {
    pub(super) x_ptr: u64,
    pub(super) n: u64,
    pub(super) segments: u64,
    pub(super) off_ptr: u64,
    pub(super) stride: u64,
    pub(super) cols: u64,
    pub(super) out_ptr: u64,
}

impl SegmentArgs {
    /// `segments` segments of the `n` elements at `x_ptr`, by the `segments + 1` offsets at
    /// `off_ptr`; outputs at `out_ptr`.
    pub(super) fn offsets(x_ptr: u64, n: u64, segments: u64, off_ptr: u64, out_ptr: u64) -> Self {
        SegmentArgs {
            x_ptr,
            n,
            segments,
            off_ptr,
            stride: 0,
            cols: 0,
            out_ptr,
        }
    }

    /// The rows of `rows` in the `n` elements at `x_ptr`; outputs at `out_ptr`.
    pub(super) fn rows(x_ptr: u64, n: u64, rows: Rows, out_ptr: u64) -> Self {
        SegmentArgs {
            x_ptr,
            n,
            segments: rows.rows as u64,
            off_ptr: 0,
            stride: rows.stride as u64,
            cols: rows.cols as u64,
            out_ptr,
        }
    }
}

/// The dynamic shared memory the thread schedule's kernels (`cf_segment_reduce` with a
/// thread per segment, `cf_reduce_by_key`) take for blocks of `block` threads: each warp's
/// queues of middle-length segments, `CF_STEP_QUEUE_BYTES` (kernels/segment.cuh,
/// `cf::warp_queues`), which every launch of them passes.
pub(super) fn step_queue_bytes(block: u32) -> u32 {
    block / 32 * defines::CF_STEP_QUEUE_BYTES
}

/// Lets `f`, a thread-schedule kernel (the `what`) for blocks of `block` threads, take the
/// dynamic shared memory of its warps' queues ([`step_queue_bytes`];
/// `gpu::allow_dynamic_shared`). Errors if the device has less to give; `setting` names the
/// [`SegmentConfig`] block that sets `block`, to ask for less.
fn allow_step_queues(f: &CudaFunction, block: u32, what: &str, setting: &str) -> Result<()> {
    let bytes = step_queue_bytes(block);
    allow_dynamic_shared(f, bytes as usize, || {
        format!(
            "letting the {what} kernel take {bytes} bytes of shared memory (blocks of {block}): \
             use a smaller SegmentConfig::{setting} on this GPU"
        )
    })
}

/// Launches a segment kernel (kernels/segment.cuh's reduction or segment_scan.cuh's scan,
/// whose parameters are (const In*, u64 n, u64 segments, const u64* offsets, u64 stride,
/// u64 cols, unsigned flag, Out*, u64* long_hdr, OpBytes)) with `grid` blocks of `block`
/// threads and `shared` bytes of dynamic shared memory (the thread schedule's reduction:
/// [`step_queue_bytes`]; 0 for the others). `long_hdr` is the reduction's long list in
/// scratch memory (`cf::LongList`), or 0 for none (the scan's is always 0).
///
/// # Safety
///
/// `f` has those parameters and reads at most `params.bytes()`; `x_ptr` holds `n` elements;
/// `off_ptr` is 0 (every row within `n`) or holds `segments + 1` offsets; `out_ptr` holds
/// what the kernel writes for them.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn launch_segments(
    gpu: &Gpu,
    f: &CudaFunction,
    grid: u64,
    (block, shared): (u32, u32),
    a: &SegmentArgs,
    flag: u32,
    long_hdr: u64,
    params: &ParamBlob,
    what: &str,
) -> Result<()> {
    let cfg = LaunchConfig {
        grid_dim: (grid.max(1) as u32, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: shared,
    };
    let stream = &gpu.inner.stream;
    let mut launch = stream.launch_builder(f);
    launch
        .arg(&a.x_ptr)
        .arg(&a.n)
        .arg(&a.segments)
        .arg(&a.off_ptr)
        .arg(&a.stride)
        .arg(&a.cols)
        .arg(&flag)
        .arg(&a.out_ptr)
        .arg(&long_hdr)
        .arg(params);
    // SAFETY: the parameters pushed match the kernel's; the caller vouches for the buffers.
    unsafe { launch.launch(cfg) }
        .map(|_| ())
        .map_err(|e| Error::driver(what, e))
}

impl Gpu {
    /// A segmented reducer for `op` over elements of type `T` (module
    /// [`segment`](crate::segment)); kernels are compiled on first use.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let per_row_max = gpu.segment_reducer::<f32, _>(cufold::ops::Max)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn segment_reducer<T: DeviceValue, O: Operator<T>>(
        &self,
        op: O,
    ) -> Result<SegmentReducer<T, O>> {
        self.segment_reducer_with(op, SegmentConfig::default())
    }

    /// A segmented reducer built with `config` (block size, a forced schedule): the speed
    /// changes, never the result.
    ///
    /// ```no_run
    /// use cufold::segment::{Schedule, SegmentConfig};
    /// let gpu = cufold::Gpu::open(0)?;
    /// let config = SegmentConfig::default().schedule(Some(Schedule::Block));
    /// let r = gpu.segment_reducer_with::<f32, _>(cufold::ops::Sum, config)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn segment_reducer_with<T: DeviceValue, O: Operator<T>>(
        &self,
        op: O,
        config: SegmentConfig,
    ) -> Result<SegmentReducer<T, O>> {
        SegmentReducer::new(self.clone(), op, config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warp_takes_the_fewest_loads_whose_tile_holds_the_mean_segment() {
        assert_eq!(warp_loads(128, 4, 8), 1); // 128 f32: one 16-byte load a lane
        assert_eq!(warp_loads(129, 4, 8), 2);
        assert_eq!(warp_loads(300, 4, 8), 4);
        assert_eq!(warp_loads(1024, 4, 8), 8); // rows of 1024 f32: the whole tile
        assert_eq!(warp_loads(1 << 20, 4, 8), 8);
        assert_eq!(warp_loads(0, 2, 4), 1);
        assert_eq!(warp_loads(200, 1, 4), 4); // 24-byte inputs, one a load: at most 4
    }

    #[test]
    fn a_warp_doubles_its_loads_while_it_holds_at_most_128_bytes() {
        let loads = |size: usize, held: usize| {
            warp_shape(ReduceShape::for_sizes(size, 256).unwrap(), held).loads
        };
        assert_eq!(loads(4, 4), 8); // f32 sum: 8 loads of 4 f32
        assert_eq!(loads(8, 8), 8); // f64 sum
        assert_eq!(loads(1, 1), 8); // u8, order-free
        assert_eq!(loads(4, 8), 4); // f32 into an f64 accumulator (Mean)
        assert_eq!(loads(4, 24), 4); // MeanVar
        assert_eq!(loads(24, 24), 4); // a 24-byte input, one a load: 2 -> 4 loads (96 bytes)
        assert_eq!(loads(4, 16), 4); // 16-byte accumulators of f32 inputs: 8 x 4 x 16 > 128
    }
}
