//! The GPU backend: a handle on the caller's stream, and reducers with compiled kernels.

use crate::cpu::check_empty;
use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::jit::{self, DiskCache};
use crate::ops::Operator;
use crate::plan::{plan_reduce, DeviceProps, KernelShape, Plan, ScanAlgorithm};
use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig,
    PushKernelArg,
};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};

/// Options of a [`Gpu`] handle, builder style.
///
/// ```
/// let opts = cufold::GpuOptions::default().block_size(512).disk_cache(cufold::DiskCache::Off);
/// assert_eq!(opts.block(), 512);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GpuOptions {
    block: u32,
    pub(crate) disk_cache: DiskCache,
    scan_block: u32,
    scan_bytes: u32,
    scan_algorithm: ScanAlgorithm,
    scan_staging: bool,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            block: 1024,
            disk_cache: DiskCache::Default,
            scan_block: 256,
            scan_bytes: 128,
            scan_algorithm: ScanAlgorithm::default(),
            scan_staging: true,
        }
    }
}

impl GpuOptions {
    /// Threads per block of the reduction kernels: a power of two from 32 to 1024 (default
    /// 1024, the fastest for sums on an H100 in BENCHMARKS.md). It changes the speed, never
    /// the result.
    ///
    /// ```
    /// let opts = cufold::GpuOptions::default().block_size(128);
    /// assert_eq!(opts.block(), 128);
    /// ```
    pub fn block_size(mut self, block: u32) -> Self {
        self.block = block;
        self
    }

    /// Where compiled kernels are cached between processes (see [`DiskCache`]).
    ///
    /// ```
    /// let opts = cufold::GpuOptions::default().disk_cache(cufold::DiskCache::Dir("/tmp/k".into()));
    /// # let _ = opts;
    /// ```
    pub fn disk_cache(mut self, cache: DiskCache) -> Self {
        self.disk_cache = cache;
        self
    }

    /// The block size these options ask for.
    ///
    /// ```
    /// assert_eq!(cufold::GpuOptions::default().block(), 1024);
    /// ```
    pub fn block(&self) -> u32 {
        self.block
    }

    /// Threads per block of the scan kernels: a power of two from 32 to 1024 (default 256;
    /// halved automatically while an operator's accumulators would not fit the block's
    /// shared memory). It changes the speed, never the result.
    ///
    /// ```
    /// let opts = cufold::GpuOptions::default().scan_block_size(512);
    /// assert_eq!(opts.scan_block(), 512);
    /// ```
    pub fn scan_block_size(mut self, block: u32) -> Self {
        self.scan_block = block;
        self
    }

    /// The scan block size these options ask for.
    ///
    /// ```
    /// assert_eq!(cufold::GpuOptions::default().scan_block(), 256);
    /// ```
    pub fn scan_block(&self) -> u32 {
        self.scan_block
    }

    /// Bytes of input each scan thread loads per tile (default 128: eight 16-byte loads; from
    /// 1 to 1024, rounded to the items of a power-of-two run). It changes the speed, never
    /// the result.
    ///
    /// ```
    /// let opts = cufold::GpuOptions::default().scan_bytes_per_thread(128);
    /// assert_eq!(opts.scan_bytes(), 128);
    /// ```
    pub fn scan_bytes_per_thread(mut self, bytes: u32) -> Self {
        self.scan_bytes = bytes.clamp(1, 1024);
        self
    }

    /// The bytes per scan thread these options ask for.
    ///
    /// ```
    /// assert_eq!(cufold::GpuOptions::default().scan_bytes(), 128);
    /// ```
    pub fn scan_bytes(&self) -> u32 {
        self.scan_bytes
    }

    /// The block-level algorithm of the scan kernels (default [`ScanAlgorithm::Blelloch`]).
    /// All compute the same bits.
    ///
    /// ```
    /// use cufold::{GpuOptions, ScanAlgorithm};
    /// let opts = GpuOptions::default().scan_algorithm(ScanAlgorithm::HillisSteele);
    /// assert_eq!(opts.algorithm(), ScanAlgorithm::HillisSteele);
    /// ```
    pub fn scan_algorithm(mut self, algorithm: ScanAlgorithm) -> Self {
        self.scan_algorithm = algorithm;
        self
    }

    /// Whether scan kernels move each warp's runs between global memory and registers
    /// through shared memory (default true): global loads and stores are then coalesced
    /// 16-byte accesses, the loads asynchronous (`cp.async`), overlapping the look-back.
    /// It changes the speed, never the result.
    ///
    /// ```
    /// let opts = cufold::GpuOptions::default().scan_shared_staging(false);
    /// assert!(!opts.scan_staging());
    /// ```
    pub fn scan_shared_staging(mut self, staging: bool) -> Self {
        self.scan_staging = staging;
        self
    }

    /// Whether scans stage through shared memory (see
    /// [`GpuOptions::scan_shared_staging`]).
    ///
    /// ```
    /// assert!(cufold::GpuOptions::default().scan_staging());
    /// ```
    pub fn scan_staging(&self) -> bool {
        self.scan_staging
    }

    /// The scan algorithm these options ask for.
    ///
    /// ```
    /// assert_eq!(cufold::GpuOptions::default().algorithm(), cufold::ScanAlgorithm::Blelloch);
    /// ```
    pub fn algorithm(&self) -> ScanAlgorithm {
        self.scan_algorithm
    }
}

/// Checks that the CUDA driver and NVRTC libraries can be loaded, so that cudarc (which
/// panics when it cannot find them) is never asked to.
fn probe_libraries() -> Result<()> {
    // SAFETY: only tries to dlopen the libraries by their usual names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Error::new(
            ErrorKind::NoCuda,
            "no CUDA driver: libcuda could not be loaded (install the NVIDIA driver, or use cufold::Cpu)",
        ));
    }
    jit::probe_nvrtc()?;
    Ok(())
}

struct Scratch {
    // Owns the memory `ptr` points into.
    _buf: Option<CudaSlice<u8>>,
    ptr: u64,
    bytes: usize,
}

/// A zeroed device buffer of `bytes` bytes for a handle's temporary memory, and its address
/// (the buffer owns the memory; work on `stream` only ever uses it in stream order).
pub(crate) fn alloc_scratch(
    stream: &Arc<CudaStream>,
    bytes: usize,
    what: &str,
) -> Result<(CudaSlice<u8>, u64)> {
    let mut buf = stream
        .alloc_zeros::<u8>(bytes)
        .map_err(|e| Error::driver(what, e))?;
    let ptr = {
        let (ptr, _record) = buf.device_ptr_mut(stream);
        ptr
    };
    Ok((buf, ptr))
}

/// Bytes before the partials: the ticket counter of the last-block-done protocol.
const TICKET_BYTES: usize = 256;

/// The scan kernels' look-back memory: a ticket counter, then per tile a node whose words
/// each carry the epoch of the launch that wrote them, so nothing is cleared between
/// launches; the buffer only grows.
pub(crate) struct ScanScratch {
    // Owns the memory `ptr` points into.
    pub(crate) buf: Option<CudaSlice<u8>>,
    pub(crate) ptr: u64,
    pub(crate) bytes: usize,
    /// The epoch of the last launch (flags of later launches differ from every earlier one).
    pub(crate) epoch: u32,
    /// Tickets handed out in this buffer so far (the kernel subtracts it).
    pub(crate) tickets: u64,
}

pub(crate) struct Inner {
    pub(crate) stream: Arc<CudaStream>,
    props: DeviceProps,
    pub(crate) arch: String,
    name: String,
    pub(crate) opts: GpuOptions,
    scratch: Mutex<Scratch>,
    pub(crate) scan_scratch: Mutex<ScanScratch>,
}

/// A handle for running cufold on a CUDA stream: the caller's stream, the caller's buffers.
///
/// Cheap to clone. It holds a small temporary buffer (the per-block partials of large
/// reductions), allocated once and reused by every reduction on this handle; work is only
/// ever enqueued on the handle's stream, in order, so reuse is safe without host
/// synchronisation.
///
/// ```no_run
/// use cudarc::driver::CudaContext;
/// let ctx = CudaContext::new(0).unwrap();
/// let stream = ctx.default_stream();
/// let x = stream.clone_htod(&[1.0f32, 2.0, 3.0]).unwrap();
/// let gpu = cufold::Gpu::new(&stream)?;
/// let total: f32 = gpu.reduce(&x, cufold::ops::Sum)?;
/// let best = gpu.reduce(&x, cufold::ops::ArgMax)?;
/// assert_eq!((total, best.index), (6.0, 2));
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("device", &self.inner.name)
            .field("arch", &self.inner.arch)
            .finish()
    }
}

impl Gpu {
    /// A handle on `stream` with default options.
    ///
    /// Errors with [`ErrorKind::NoCuda`] when NVRTC cannot be loaded.
    ///
    /// ```no_run
    /// let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    /// let gpu = cufold::Gpu::new(&ctx.default_stream())?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn new(stream: &Arc<CudaStream>) -> Result<Gpu> {
        Gpu::with_options(stream, GpuOptions::default())
    }

    /// A handle on `stream` with `opts`.
    ///
    /// ```no_run
    /// let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    /// let opts = cufold::GpuOptions::default().block_size(512);
    /// let gpu = cufold::Gpu::with_options(&ctx.default_stream(), opts)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn with_options(stream: &Arc<CudaStream>, opts: GpuOptions) -> Result<Gpu> {
        probe_libraries()?;
        KernelShape::for_sizes(4, opts.block)?;
        KernelShape::for_sizes(4, opts.scan_block)?;
        let ctx = stream.context();
        let attr = |a| {
            ctx.attribute(a)
                .map_err(|e| Error::driver("reading device properties", e))
        };
        let props = DeviceProps {
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            max_threads_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?
                as u32,
        };
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| Error::driver("reading the compute capability", e))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown CUDA device".into());
        Ok(Gpu {
            inner: Arc::new(Inner {
                stream: stream.clone(),
                props,
                arch: format!("sm_{major}{minor}"),
                name,
                opts,
                scratch: Mutex::new(Scratch {
                    _buf: None,
                    ptr: 0,
                    bytes: 0,
                }),
                scan_scratch: Mutex::new(ScanScratch {
                    buf: None,
                    ptr: 0,
                    bytes: 0,
                    epoch: 0,
                    tickets: 0,
                }),
            }),
        })
    }

    /// Opens device `ordinal` and a handle on its default stream, or explains why not:
    /// no driver, no NVRTC, or no such device is an [`ErrorKind::NoCuda`] error, never a
    /// panic.
    ///
    /// ```
    /// match cufold::Gpu::open(0) {
    ///     Ok(gpu) => println!("running on {}", gpu.device_name()),
    ///     Err(e) => println!("no GPU: {e}"),
    /// }
    /// ```
    pub fn open(ordinal: usize) -> Result<Gpu> {
        probe_libraries()?;
        let ctx = std::panic::catch_unwind(|| CudaContext::new(ordinal))
            .map_err(|_| {
                Error::new(
                    ErrorKind::NoCuda,
                    "the CUDA driver could not be initialised",
                )
            })?
            .map_err(|e| {
                Error::new(
                    ErrorKind::NoCuda,
                    format!("CUDA device {ordinal} could not be opened: {e:?}"),
                )
                .with_source(e)
            })?;
        Gpu::new(&ctx.default_stream())
    }

    /// The stream everything is enqueued on.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[1u32, 2, 3]).unwrap();
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// The device's name, as the driver reports it.
    ///
    /// ```no_run
    /// println!("{}", cufold::Gpu::open(0)?.device_name());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn device_name(&self) -> &str {
        &self.inner.name
    }

    /// The properties the launch planner uses.
    ///
    /// ```no_run
    /// assert!(cufold::Gpu::open(0)?.props().sm_count > 0);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn props(&self) -> DeviceProps {
        self.inner.props
    }

    /// A reducer for `op` over elements of type `T`: its kernel is compiled (or loaded from
    /// a cache) now, once.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let sum = gpu.reducer::<f32, _>(cufold::ops::Sum)?;
    /// let x = gpu.stream().clone_htod(&vec![1.0f32; 1000]).unwrap();
    /// assert_eq!(sum.reduce(&x)?, 1000.0);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reducer<T: DeviceValue, O: Operator<T>>(&self, op: O) -> Result<Reducer<T, O>> {
        Reducer::new(self.clone(), op, self.inner.opts.block)
    }

    /// Reduces `x` (a `CudaSlice`, `CudaView` or `CudaViewMut` at any offset) and returns
    /// the result on the host: enqueues the reduction and a copy, then waits for the stream.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[4.0f64, 1.0, 7.0]).unwrap();
    /// let m = gpu.reduce(&x.slice(1..), cufold::ops::Max)?; // views at any offset
    /// assert_eq!(m, 7.0);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &impl DevicePtr<T>,
        op: O,
    ) -> Result<O::Out> {
        self.reducer(op)?.reduce(x)
    }

    /// Enqueues the reduction of `x` on the stream, leaving the result in `out` (length 1),
    /// and returns at once: no synchronisation, no host copy.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[1i32, 2, 3]).unwrap();
    /// let mut out = gpu.stream().alloc_zeros::<i32>(1).unwrap();
    /// gpu.reduce_into(&x, cufold::ops::Sum, &mut out)?; // asynchronous
    /// assert_eq!(gpu.stream().clone_dtoh(&out).unwrap(), [6]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &impl DevicePtr<T>,
        op: O,
        out: &mut impl DevicePtrMut<O::Out>,
    ) -> Result<()> {
        self.reducer(op)?.reduce_into(x, out)
    }

    /// Uploads host data and reduces it (a convenience for data that is not on the GPU yet).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// assert_eq!(gpu.reduce_host(&[1u8, 2, 3], cufold::ops::WideSum)?, 6u64);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_host<T: DeviceValue, O: Operator<T>>(&self, x: &[T], op: O) -> Result<O::Out> {
        let reducer = self.reducer(op)?;
        check_empty::<T, O>(x.len() as u64)?;
        if x.is_empty() {
            let empty: CudaSlice<T> = self.alloc(0)?;
            return reducer.reduce(&empty);
        }
        let dev = self
            .stream()
            .clone_htod(x)
            .map_err(|e| Error::driver("copying the input to the device", e))?;
        reducer.reduce(&dev)
    }

    /// The kernel `name` of `op` compiled with `shape` (a cache key), from the memory cache,
    /// the disk cache or NVRTC (`src` builds its source only when needed).
    pub(crate) fn kernel(
        &self,
        name: &str,
        op: &crate::ops::CudaOp,
        shape: &impl std::fmt::Debug,
        src: impl FnOnce() -> String,
    ) -> Result<CudaFunction> {
        let key = format!(
            "{name}|{}|{:016x}|{shape:?}",
            op.type_name,
            jit::fnv64(op.source.as_bytes(), 0),
        );
        let inner = &self.inner;
        jit::load_function(
            inner.stream.context(),
            &inner.arch,
            &inner.opts.disk_cache,
            &key,
            name,
            src,
        )
    }

    pub(crate) fn alloc<T: DeviceValue>(&self, len: usize) -> Result<CudaSlice<T>> {
        self.stream()
            .alloc_zeros::<T>(len)
            .map_err(|e| Error::driver("allocating device memory", e))
    }
}

/// A compiled reduction for `op` over elements of type `T`, on a [`Gpu`]'s stream.
///
/// One kernel serves every length: small inputs (up to one tile, 16384 f32) take a single
/// block and a single launch; larger ones one launch of at most one wave of blocks whose
/// last block to finish reduces the partials and writes the result. The result is the
/// canonical tree (crate docs): the same bits for every length-N input on every GPU and
/// block size, and the CPU backend's bits for operators built from `+ - * /`, min, max and
/// comparisons.
///
/// ```no_run
/// use cufold::ops::{Mean, Sum};
/// let gpu = cufold::Gpu::open(0)?;
/// let x = gpu.stream().clone_htod(&vec![0.5f32; 1 << 20]).unwrap();
/// let mean = gpu.reducer::<f32, _>(Mean)?;
/// for _ in 0..10 {
///     assert_eq!(mean.reduce(&x)?, 0.5); // compiled once, reused
/// }
/// # Ok::<(), cufold::Error>(())
/// ```
pub struct Reducer<T: DeviceValue, O: Operator<T>> {
    gpu: Gpu,
    op: O,
    shape: KernelShape,
    vector: Option<CudaFunction>,
    scalar: OnceLock<CudaFunction>,
    _input: PhantomData<fn(T)>,
}

impl<T: DeviceValue, O: Operator<T>> std::fmt::Debug for Reducer<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reducer")
            .field("op", &O::NAME)
            .field("input", &T::cuda_name())
            .field("shape", &self.shape)
            .field("gpu", &self.gpu)
            .finish()
    }
}

impl<T: DeviceValue, O: Operator<T>> Reducer<T, O> {
    fn new(gpu: Gpu, op: O, block: u32) -> Result<Self> {
        let shape = KernelShape::for_sizes(std::mem::size_of::<T>(), block)?;
        let mut r = Reducer {
            gpu,
            op,
            shape,
            vector: None,
            scalar: OnceLock::new(),
            _input: PhantomData,
        };
        if r.vectorizable() {
            r.vector = Some(r.function(true)?);
        } else {
            let f = r.function(false)?;
            let _ = r.scalar.set(f);
        }
        Ok(r)
    }

    fn vectorizable(&self) -> bool {
        self.shape.vec as usize * std::mem::size_of::<T>() == 16
    }

    fn function(&self, vector: bool) -> Result<CudaFunction> {
        let cuda = self.op.cuda();
        self.gpu
            .kernel("cf_reduce", &cuda, &(self.shape, vector), || {
                jit::reduce_kernel_source(&cuda, &self.shape, vector)
            })
    }

    /// The plan a reduction of `n` elements would launch.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let r = gpu.reducer::<f32, _>(cufold::ops::Sum)?;
    /// assert_eq!(r.plan(1000)?.grid, 1);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn plan(&self, n: u64) -> Result<Plan> {
        plan_reduce(n, &self.shape, &self.gpu.inner.props)
    }

    /// Reduces `x` and returns the result on the host (waits for the stream).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[3u32, 1, 2]).unwrap();
    /// assert_eq!(gpu.reducer::<u32, _>(cufold::ops::Min)?.reduce(&x)?, 1);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce(&self, x: &impl DevicePtr<T>) -> Result<O::Out> {
        let stream = &self.gpu.inner.stream;
        let mut out: CudaSlice<O::Out> = stream
            .alloc_zeros::<O::Out>(1)
            .map_err(|e| Error::driver("allocating the result", e))?;
        self.reduce_into(x, &mut out)?;
        let host = stream
            .clone_dtoh(&out)
            .map_err(|e| Error::driver("copying the result to the host", e))?;
        Ok(host[0])
    }

    /// Enqueues the reduction of `x` into `out` (length 1) on the stream; returns at once.
    ///
    /// Errors: an `out` whose length is not 1 ([`ErrorKind::LengthMismatch`]), an empty `x`
    /// for an operator without an empty value ([`ErrorKind::EmptyInput`]), driver failures.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let r = gpu.reducer::<f32, _>(cufold::ops::Sum)?;
    /// let x = gpu.stream().clone_htod(&[1.0f32; 10]).unwrap();
    /// let mut out = gpu.stream().alloc_zeros::<f32>(1).unwrap();
    /// r.reduce_into(&x.slice(3..), &mut out)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&out).unwrap(), [7.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_into(
        &self,
        x: &impl DevicePtr<T>,
        out: &mut impl DevicePtrMut<O::Out>,
    ) -> Result<()> {
        if out.len() != 1 {
            return Err(Error::new(
                ErrorKind::LengthMismatch,
                format!(
                    "the output of a reduction holds one value, but the buffer given has length {}",
                    out.len()
                ),
            ));
        }
        let n = x.len() as u64;
        check_empty::<T, O>(n)?;
        let plan = self.plan(n)?;
        let inner = &self.gpu.inner;
        let stream = &inner.stream;
        let (x_ptr, _x_guard) = x.device_ptr(stream);
        let (out_ptr, _out_guard) = out.device_ptr_mut(stream);
        let f = match &self.vector {
            Some(v) if x_ptr % 16 == 0 => v,
            _ => match self.scalar.get() {
                Some(f) => f,
                None => {
                    let f = self.function(false)?;
                    self.scalar.get_or_init(|| f)
                }
            },
        };
        let mut scratch = inner.scratch.lock().unwrap();
        let (partials, ticket) = if plan.grid > 1 {
            let need = TICKET_BYTES + plan.grid as usize * std::mem::size_of::<O::Acc>();
            if scratch.bytes < need {
                let bytes = need.max(64 * 1024);
                let (buf, ptr) = alloc_scratch(stream, bytes, "allocating scratch memory")?;
                *scratch = Scratch {
                    _buf: Some(buf),
                    ptr,
                    bytes,
                };
            }
            (scratch.ptr + TICKET_BYTES as u64, scratch.ptr)
        } else {
            (0, 0)
        };
        let cfg = LaunchConfig {
            grid_dim: (plan.grid as u32, 1, 1),
            block_dim: (self.shape.block, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(f);
        launch
            .arg(&x_ptr)
            .arg(&n)
            .arg(&plan.tiles_per_block)
            .arg(&plan.limit)
            .arg(&partials)
            .arg(&ticket)
            .arg(&out_ptr);
        // SAFETY: the kernel's parameters are (const In*, u64, u64, u64, Acc*, unsigned*, Out*),
        // matching the values pushed; x holds n elements of In; out holds one Out; partials
        // and ticket point into scratch memory of at least grid accumulators after a zeroed
        // ticket, owned by this handle and used only on this stream.
        unsafe { launch.launch(cfg) }
            .map_err(|e| Error::driver("launching the reduction kernel", e))?;
        drop(scratch);
        Ok(())
    }
}
