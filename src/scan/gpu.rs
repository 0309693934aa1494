//! The scan on the GPU: a compiled kernel per operator, element type and shape, one launch
//! per scan, on the caller's stream.

use super::plan::{plan, ScanPlan, ScanShape, TypeSizes};
use super::{ScanConfig, ScanKind};
use crate::element::DeviceValue;
use crate::error::{Error, Result};
use crate::gpu::jit::{self, embedded::defines};
use crate::gpu::Gpu;
use crate::ops::check::{check_scan_lengths, check_scannable};
use crate::ops::{CudaOp, Operator, ParamBlob};
use cudarc::driver::{CudaFunction, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use std::marker::PhantomData;

/// 64-bit words per published accumulator in the look-back's slots (kernels/lookback.cuh's
/// `NodeSlots::WORDS`, which the kernel checks against this): each 32-bit word of the
/// accumulator beside the launch's epoch.
pub(crate) fn slot_words(acc_bytes: usize) -> usize {
    acc_bytes.div_ceil(4)
}

/// Bytes of look-back slots for `tiles` tiles of accumulators of `acc_bytes` bytes: a leaf
/// and a node of [`slot_words`] 64-bit words per tile, the leaves in the first half and the
/// nodes in the second.
pub(crate) fn look_back_bytes(tiles: u64, acc_bytes: usize) -> usize {
    2 * 8 * tiles as usize * slot_words(acc_bytes)
}

/// The full CUDA source of the scan kernel for `op` (with these type `sizes`, and
/// run-time parameters of `param_bytes` bytes, see [`Operator::params`]) and compile-time
/// `shape`.
///
/// ```
/// use cufold::ops::{Operator, Sum};
/// use cufold::scan::{ScanShape, TypeSizes};
/// let sizes = TypeSizes::uniform(4);
/// let shape = ScanShape::for_sizes(sizes, 256, 64, cufold::ScanAlgorithm::Blelloch, true).unwrap();
/// let src = cufold::scan::kernel_source(&<Sum as Operator<f32>>::cuda(&Sum), 0, sizes, &shape);
/// assert!(src.contains("#define CF_OP cf::Sum<float>") && src.contains("#define CF_ALGO 1"));
/// assert!(src.contains("#include \"cufold/scan.cuh\""));
/// ```
pub fn kernel_source(
    op: &CudaOp,
    param_bytes: usize,
    sizes: TypeSizes,
    shape: &ScanShape,
) -> String {
    source(op, param_bytes, sizes, shape, false)
}

/// [`kernel_source`], or with `long` the segmented scan's long pass (`cf_scan_long`) in its
/// place: the same tiles and look-back over the segments a thread-schedule launch listed.
fn source(
    op: &CudaOp,
    param_bytes: usize,
    sizes: TypeSizes,
    shape: &ScanShape,
    long: bool,
) -> String {
    let long = long.then(|| ("CF_SCAN_LONG", "1".to_string()));
    jit::kernel_source(
        "scan",
        op,
        &[
            ("CF_BLOCK", shape.block.to_string()),
            ("CF_ITEMS", shape.items.to_string()),
            ("CF_ALGO", shape.algorithm.cuda_id().to_string()),
            ("CF_STAGING", shape.staging_mode().to_string()),
            ("CF_MIN_BLOCKS", shape.min_blocks.to_string()),
            ("CF_PREFETCH", shape.prefetch.to_string()),
            ("CF_CHUNK", shape.chunk.to_string()),
            ("CF_SLOT_WORDS", slot_words(sizes.acc).to_string()),
            ("CF_SHARED_BYTES", shape.shared_bytes(sizes).to_string()),
            ("CF_OP_BYTES", param_bytes.to_string()),
        ]
        .into_iter()
        .chain(long)
        .collect::<Vec<_>>(),
    )
}

/// The device-wide scan's shape for operators with these type `sizes` under `c` (the
/// default [`ScanConfig`]: what [`Gpu::scanner`] compiles).
pub(crate) fn shape_for(sizes: TypeSizes, c: &ScanConfig) -> Result<ScanShape> {
    ScanShape::fitting_with(
        sizes,
        c.get_block(),
        c.get_bytes_per_thread() as usize,
        c.get_algorithm(),
        c.get_staging(),
        if c.get_resident() {
            c.get_resident_acc_bytes() as usize
        } else {
            0
        },
    )
}

/// The shape for large inputs under `c` on `gpu` ([`large_inputs_shape`] with the
/// device's shared memory per multiprocessor).
pub(crate) fn large_shape(gpu: &Gpu, sizes: TypeSizes, c: &ScanConfig) -> Option<ScanShape> {
    large_inputs_shape(sizes, c, gpu.inner.shared_per_sm)
}

/// The shape for large inputs ([`ScanConfig::large_from`]; `None` for never) under `c`, on
/// multiprocessors of `sm_shared` bytes of shared memory: the large tiles
/// ([`ScanShape::large`]) where `c` lets tiles stay resident and the types have them, else
/// [`shape_for`]'s, which for large inputs admits resident tiles of 8-byte accumulators
/// whatever `c`'s [`ScanConfig::resident_acc_bytes`] says; either with `c`'s L2 prefetch
/// ([`ScanConfig::prefetch_bytes`]).
///
/// Compensated sums of f32 (4-byte inputs, 8-byte double words) have no large tiles with
/// the default block scan (three blocks of 512 threads do not fit), and their runs in
/// registers held three blocks of 256 an H200 multiprocessor: at 2^28 resident tiles of 256
/// x 32 ran 2109 GB/s against 1841 (docs/performance-notes.md, "Exact sums").
fn large_inputs_shape(sizes: TypeSizes, c: &ScanConfig, sm_shared: usize) -> Option<ScanShape> {
    if c.get_large_from() == u64::MAX {
        return None;
    }
    let resident = c.get_staging() && c.get_resident();
    let small = if resident {
        c.resident_acc_bytes(c.get_resident_acc_bytes().max(8))
    } else {
        *c
    };
    resident
        .then(|| ScanShape::large(sizes, c.get_algorithm(), sm_shared))
        .flatten()
        .or_else(|| shape_for(sizes, &small).ok())
        .map(|s| s.with_prefetch(sizes, c.get_prefetch_bytes()))
}

/// A kernel of the segmented scan's long source (kernels/scan.cuh, `CF_SCAN_LONG`) for `op`
/// with these type `sizes`, in the device-wide scan's `shape`:
///
/// - `cf_scan_long`, the long pass: (const In*, Out*, u64 n, unsigned exclusive, u64*
///   ticket, u64* leaves, u64* nodes, u64* long_hdr, OpBytes), one block per tile of the long
///   list's capacity;
/// - `cf_scan_rows`, every row of a matrix: (const In*, Out*, u64 stride, u64 cols, u64
///   per_row, unsigned exclusive, u64* ticket, u64* leaves, u64* nodes, OpBytes), one block
///   per tile of every row (`per_row` tiles a row).
pub(crate) fn long_kernel(
    gpu: &Gpu,
    name: &str,
    op: &CudaOp,
    param_bytes: usize,
    sizes: TypeSizes,
    shape: &ScanShape,
) -> Result<CudaFunction> {
    let f = gpu.kernel(name, long_source(op, param_bytes, sizes, shape))?;
    allow_dynamic_shared(&f, shape, sizes)?;
    Ok(f)
}

/// The device-wide scan's kernel (`cf_scan`) for `op` with these type `sizes`, in `shape`,
/// allowed the dynamic shared memory its launches pass.
fn scan_kernel(
    gpu: &Gpu,
    op: &CudaOp,
    param_bytes: usize,
    sizes: TypeSizes,
    shape: &ScanShape,
) -> Result<CudaFunction> {
    let f = gpu.kernel("cf_scan", kernel_source(op, param_bytes, sizes, shape))?;
    allow_dynamic_shared(&f, shape, sizes)?;
    Ok(f)
}

/// The launch of `grid` blocks of a scan kernel of `shape` for these type `sizes`: the
/// shape's block, and the dynamic shared memory its resident tile takes
/// ([`ScanShape::dynamic_bytes`]), which every launch of a scan kernel must pass.
pub(crate) fn launch_config(shape: &ScanShape, sizes: TypeSizes, grid: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (shape.block, 1, 1),
        shared_mem_bytes: shape.dynamic_bytes(sizes) as u32,
    }
}

/// Lets `function`, a scan kernel of `shape` for these type `sizes`, take the dynamic
/// shared memory its launches pass ([`ScanShape::dynamic_bytes`], the resident tile;
/// `gpu::allow_dynamic_shared`). Errors if the device has less to give.
pub(crate) fn allow_dynamic_shared(
    function: &CudaFunction,
    shape: &ScanShape,
    sizes: TypeSizes,
) -> Result<()> {
    crate::gpu::allow_dynamic_shared(function, shape.dynamic_bytes(sizes), || {
        format!(
            "letting the scan kernel take {} bytes of shared memory (block {}, {} items a \
             thread): use a smaller ScanConfig block or bytes_per_thread on this GPU",
            shape.shared_bytes(sizes),
            shape.block,
            shape.items
        )
    })
}

/// The source of [`long_kernel`].
pub(crate) fn long_source(
    op: &CudaOp,
    param_bytes: usize,
    sizes: TypeSizes,
    shape: &ScanShape,
) -> String {
    source(op, param_bytes, sizes, shape, true)
}

/// Compiles the scan kernel of `op` (with these type `sizes`) for the GPU architecture
/// `arch` (such as `"sm_90"`) and returns its CUBIN; like
/// [`reduce::compile_kernel`](crate::reduce::compile_kernel), it needs NVRTC but no device.
///
/// ```no_run
/// use cufold::ops::{Operator, Sum};
/// use cufold::scan::{ScanShape, TypeSizes};
/// let sizes = TypeSizes::uniform(4);
/// let shape = ScanShape::for_sizes(sizes, 256, 128, Default::default(), true)?;
/// let cubin = cufold::scan::compile_kernel(&<Sum as Operator<f32>>::cuda(&Sum), 0, sizes, &shape, "sm_90")?;
/// assert!(!cubin.is_empty());
/// # Ok::<(), cufold::Error>(())
/// ```
pub fn compile_kernel(
    op: &CudaOp,
    param_bytes: usize,
    sizes: TypeSizes,
    shape: &ScanShape,
    arch: &str,
) -> Result<Vec<u8>> {
    jit::probe_nvrtc()?;
    jit::compile(
        &kernel_source(op, param_bytes, sizes, shape),
        &jit::compile_options(arch),
    )
}

/// A compiled scan for `op` over elements of type `T`, on a [`Gpu`]'s stream.
///
/// One launch scans any length: a block per tile, tiles taken in order, each tile's prefix
/// found from earlier tiles by a Fenwick tree of partial results in global memory. Every
/// output is the canonical grouping (crate docs): prefix `i` is the left fold, largest block
/// first, of the trees over the aligned power-of-two blocks of `[0, i]`. So the bits do not
/// depend on the GPU, the block size or the [`ScanAlgorithm`](crate::ScanAlgorithm), are
/// identical run to run, and equal the CPU backend's for operators built from `+ - * /`,
/// min, max and comparisons. (The last inclusive prefix is the same fold of the whole
/// input; it can differ in the last bits from [`Reducer`](crate::Reducer)'s tree, which pads
/// to a power of two instead of folding left.)
///
/// Every method enqueues on the stream and returns at once: no synchronisation, no host
/// copy. Temporary memory (a few bytes per tile) belongs to the [`Gpu`] handle, is allocated
/// once and grows when needed.
///
/// ```no_run
/// use cufold::ops::Sum;
/// let gpu = cufold::Gpu::open(0)?;
/// let x = gpu.stream().clone_htod(&vec![1u32; 1 << 20]).unwrap();
/// let mut y = gpu.stream().alloc_zeros::<u32>(1 << 20).unwrap();
/// let cumsum = gpu.scanner::<u32, _>(Sum)?;
/// cumsum.inclusive(&x, &mut y)?;
/// let host = gpu.stream().clone_dtoh(&y).unwrap();
/// assert_eq!(host[999], 1000);
/// # Ok::<(), cufold::Error>(())
/// ```
pub struct Scanner<T: DeviceValue, O: Operator<T>> {
    gpu: Gpu,
    op: O,
    params: Box<ParamBlob>,
    param_bytes: usize,
    shape: ScanShape,
    function: CudaFunction,
    large: Option<Large>,
    _input: PhantomData<fn(T)>,
}

/// A scanner's kernel for large inputs ([`ScanConfig::large_from`]: the large tiles, or the
/// scanner's own shape, with the L2 prefetch): its shape, the input bytes from which it is
/// taken, and the kernel, compiled on first use (shared by the scanner's clones).
#[derive(Clone)]
struct Large {
    shape: ScanShape,
    from: u64,
    function: std::sync::Arc<std::sync::OnceLock<CudaFunction>>,
}

/// A scanner's compiled kernel and shape (what [`Gpu::scan`] keeps per operator type and CUDA text; no
/// handle inside, so that the handle does not keep itself alive).
struct ScanKernel<T, O> {
    shape: ScanShape,
    param_bytes: usize,
    function: CudaFunction,
    large: Option<Large>,
    _types: PhantomData<fn(T, O)>,
}

impl<T, O> Clone for ScanKernel<T, O> {
    fn clone(&self) -> Self {
        ScanKernel {
            shape: self.shape,
            param_bytes: self.param_bytes,
            function: self.function.clone(),
            large: self.large.clone(),
            _types: PhantomData,
        }
    }
}

impl<T: DeviceValue, O: Operator<T>> std::fmt::Debug for Scanner<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("op", &O::name())
            .field("input", &T::cuda_name())
            .field("shape", &self.shape)
            .field("gpu", &self.gpu)
            .finish()
    }
}

impl<T: DeviceValue, O: Operator<T>> Scanner<T, O> {
    pub(crate) fn new(gpu: Gpu, op: O, config: ScanConfig) -> Result<Self> {
        check_scannable::<T, O>()?;
        let sizes = TypeSizes::of::<T, O>();
        let shape = shape_for(sizes, &config)?;
        let cuda = op.cuda();
        let params = op.params();
        let param_bytes = params.bytes().len();
        let function = scan_kernel(&gpu, &cuda, param_bytes, sizes, &shape)?;
        let large = large_shape(&gpu, sizes, &config)
            .filter(|l| *l != shape)
            .map(|l| Large {
                shape: l,
                from: config.get_large_from(),
                function: Default::default(),
            });
        Ok(Scanner {
            gpu,
            op,
            params: ParamBlob::new(&params, O::name)?,
            param_bytes,
            shape,
            function,
            large,
            _input: PhantomData,
        })
    }

    /// What this scanner keeps whatever the operator's value.
    fn kernel(&self) -> ScanKernel<T, O> {
        ScanKernel {
            shape: self.shape,
            param_bytes: self.param_bytes,
            function: self.function.clone(),
            large: self.large.clone(),
            _types: PhantomData,
        }
    }

    /// A scanner of `op` on `gpu` with a kernel built before.
    fn from_kernel(gpu: Gpu, op: O, k: ScanKernel<T, O>) -> Result<Self> {
        let params = ParamBlob::for_kernel(&op.params(), k.param_bytes, O::name)?;
        Ok(Scanner {
            gpu,
            op,
            params,
            param_bytes: k.param_bytes,
            shape: k.shape,
            function: k.function,
            large: k.large,
            _input: PhantomData,
        })
    }

    /// The same scanner for another value of the operator: its run-time parameters
    /// ([`Operator::params`]) change, the compiled kernel is reused. A value whose CUDA text
    /// differs from the first's (a constant compiled into [`Operator::cuda`]'s source) gets
    /// kernels of its own, compiled or found in the caches.
    ///
    /// Errors ([`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig)) if the new
    /// value's parameters have another size than the first's.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let s = gpu.scanner::<f32, _>(cufold::ops::Sum)?;
    /// let again = s.with_op(cufold::ops::Sum)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn with_op(&self, op: O) -> Result<Self> {
        let params = ParamBlob::for_kernel(&op.params(), self.param_bytes, O::name)?;
        let cuda = op.cuda();
        // A value compiled into the operator's CUDA text (rather than passed as parameters)
        // needs kernels of its own, of the same shapes.
        let (function, large) = if cuda == self.op.cuda() {
            (self.function.clone(), self.large.clone())
        } else {
            let sizes = TypeSizes::of::<T, O>();
            let function = scan_kernel(&self.gpu, &cuda, self.param_bytes, sizes, &self.shape)?;
            let large = self.large.as_ref().map(|l| Large {
                shape: l.shape,
                from: l.from,
                function: Default::default(),
            });
            (function, large)
        };
        Ok(Scanner {
            gpu: self.gpu.clone(),
            op,
            params,
            param_bytes: self.param_bytes,
            shape: self.shape,
            function,
            large,
            _input: PhantomData,
        })
    }

    /// The operator.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let s = gpu.scanner::<f32, _>(cufold::ops::Max)?;
    /// let _max: cufold::ops::Max = *s.op();
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn op(&self) -> &O {
        &self.op
    }

    /// The compile-time shape of the kernel that scans inputs below
    /// [`ScanConfig::large_from`] bytes ([`Scanner::shape_for_len`] gives the one a length
    /// takes).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let s = gpu.scanner::<f32, _>(cufold::ops::Sum)?;
    /// assert_eq!(s.shape().items, 32);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn shape(&self) -> ScanShape {
        self.shape
    }

    /// The plan a scan of `n` elements would launch.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let s = gpu.scanner::<f32, _>(cufold::ops::Sum)?;
    /// assert_eq!(s.plan(1000)?.tiles, 1);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn plan(&self, n: u64) -> Result<ScanPlan> {
        plan(n, &self.shape_for_len(n))
    }

    /// The shape a scan of `n` elements takes: the large inputs' (large tiles, L2 prefetch)
    /// from [`ScanConfig::large_from`] bytes of input, else [`Scanner::shape`].
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let s = gpu.scanner::<f32, _>(cufold::ops::Sum)?;
    /// assert_eq!(s.shape_for_len(1000), s.shape());
    /// assert_eq!(s.shape_for_len(1 << 28).tile(), 16384); // 64 KiB of f32 on an H100
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn shape_for_len(&self, n: u64) -> ScanShape {
        self.large_for(n).map_or(self.shape, |l| l.shape)
    }

    /// The large inputs' kernel, where a scan of `n` elements takes it.
    fn large_for(&self, n: u64) -> Option<&Large> {
        let bytes = n.saturating_mul(std::mem::size_of::<T>() as u64);
        self.large.as_ref().filter(|l| bytes >= l.from)
    }

    /// The shape and kernel a scan of `n` elements launches (compiling the large inputs'
    /// kernel on first use).
    fn kernel_for(&self, n: u64) -> Result<(ScanShape, &CudaFunction)> {
        let Some(l) = self.large_for(n) else {
            return Ok((self.shape, &self.function));
        };
        let f = crate::gpu::get_or_try(&l.function, || {
            let sizes = TypeSizes::of::<T, O>();
            scan_kernel(
                &self.gpu,
                &self.op.cuda(),
                self.param_bytes,
                sizes,
                &l.shape,
            )
        })?;
        Ok((l.shape, f))
    }

    /// Enqueues the inclusive scan of `x` into `out` (the same length): output `i` is
    /// `finish(x[0] ⊕ ... ⊕ x[i], i + 1)`. Inputs and outputs may be `CudaSlice`s or views at
    /// any offset.
    ///
    /// Errors: lengths that differ ([`ErrorKind::LengthMismatch`](crate::ErrorKind::LengthMismatch)), driver failures.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[3.0f64, 1.0, 2.0]).unwrap();
    /// let mut y = gpu.stream().alloc_zeros::<f64>(3).unwrap();
    /// gpu.scanner::<f64, _>(cufold::ops::Max)?.inclusive(&x, &mut y)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&y).unwrap(), [3.0, 3.0, 3.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn inclusive(
        &self,
        x: &impl DevicePtr<T>,
        out: &mut impl DevicePtrMut<O::Out>,
    ) -> Result<()> {
        self.scan(x, out, ScanKind::Inclusive)
    }

    /// Enqueues the exclusive scan of `x` into `out` (the same length): output `i` is
    /// `finish(x[0] ⊕ ... ⊕ x[i-1], i)`, output 0 is `finish(identity, 0)`.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[3i64, 1, 2]).unwrap();
    /// let mut y = gpu.stream().alloc_zeros::<i64>(3).unwrap();
    /// gpu.scanner::<i64, _>(cufold::ops::Sum)?.exclusive(&x, &mut y)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&y).unwrap(), [0, 3, 4]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn exclusive(
        &self,
        x: &impl DevicePtr<T>,
        out: &mut impl DevicePtrMut<O::Out>,
    ) -> Result<()> {
        self.scan(x, out, ScanKind::Exclusive)
    }

    /// Enqueues the scan of `x` of the given kind into `out` (the same length).
    ///
    /// ```no_run
    /// use cufold::ScanKind;
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[1u32, 2, 3, 4]).unwrap();
    /// let mut y = gpu.stream().alloc_zeros::<u32>(2).unwrap();
    /// let sum = gpu.scanner::<u32, _>(cufold::ops::Sum)?;
    /// sum.scan(&x.slice(2..), &mut y, ScanKind::Inclusive)?; // views at any offset
    /// assert_eq!(gpu.stream().clone_dtoh(&y).unwrap(), [3, 7]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan(
        &self,
        x: &impl DevicePtr<T>,
        out: &mut impl DevicePtrMut<O::Out>,
        kind: ScanKind,
    ) -> Result<()> {
        check_scan_lengths(x.len(), out.len())?;
        let stream = &self.gpu.inner.stream;
        let (x_ptr, _x_guard) = x.device_ptr(stream);
        let (y_ptr, _y_guard) = out.device_ptr_mut(stream);
        self.launch(x_ptr, y_ptr, x.len() as u64, kind, false, 0)
    }

    /// Enqueues the scan of `x` of the given kind, overwriting `x` with its prefixes (for
    /// operators whose output type is the input type).
    ///
    /// ```no_run
    /// use cufold::ScanKind;
    /// let gpu = cufold::Gpu::open(0)?;
    /// let mut x = gpu.stream().clone_htod(&[1.0f32, 2.0, 3.0]).unwrap();
    /// gpu.scanner::<f32, _>(cufold::ops::Sum)?.scan_in_place(&mut x, ScanKind::Inclusive)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&x).unwrap(), [1.0, 3.0, 6.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_in_place(&self, x: &mut impl DevicePtrMut<T>, kind: ScanKind) -> Result<()>
    where
        O: Operator<T, Out = T>,
    {
        let stream = &self.gpu.inner.stream;
        let n = x.len() as u64;
        let (ptr, _guard) = x.device_ptr_mut(stream);
        self.launch(ptr, ptr, n, kind, true, 0)
    }

    /// Enqueues the scan of the `n` elements at `x_ptr` into `y_ptr` (the segmented scan's
    /// per-row launches); the caller holds the buffers' stream guards. `carry_ptr`, unless
    /// 0, is the device address of one accumulator, the exclusive prefix of what comes
    /// before `x` (a distributed scan's chunk): every prefix is folded from it.
    pub(crate) fn launch(
        &self,
        x_ptr: u64,
        y_ptr: u64,
        n: u64,
        kind: ScanKind,
        in_place: bool,
        carry_ptr: u64,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let (shape, function) = self.kernel_for(n)?;
        let plan = plan(n, &shape)?;
        let inner = &self.gpu.inner;
        let stream = &inner.stream;
        let mut mode = 0;
        if kind == ScanKind::Exclusive {
            mode |= defines::CF_SCAN_EXCLUSIVE;
        }
        if x_ptr % 16 == 0 {
            mode |= defines::CF_SCAN_X_ALIGNED;
        }
        if y_ptr % 16 == 0 {
            mode |= defines::CF_SCAN_Y_ALIGNED;
        }
        if in_place {
            mode |= defines::CF_SCAN_IN_PLACE;
        }
        let cfg = launch_config(&shape, TypeSizes::of::<T, O>(), plan.tiles as u32);
        let slot_bytes = if plan.tiles > 1 {
            look_back_bytes(plan.tiles, std::mem::size_of::<O::Acc>())
        } else {
            0
        };
        inner.scratch.with_lease(stream, slot_bytes, 0, |lease| {
            let leaves = lease.slots;
            let nodes = leaves + slot_bytes as u64 / 2;
            let mut launch = stream.launch_builder(function);
            launch
                .arg(&x_ptr)
                .arg(&y_ptr)
                .arg(&n)
                .arg(&plan.tiles)
                .arg(&mode)
                .arg(&lease.ticket)
                .arg(&leaves)
                .arg(&nodes)
                .arg(&carry_ptr)
                .arg(&*self.params);
            // SAFETY: the kernel's parameters are (const In*, Out*, u64, u64, unsigned,
            // u64*, u64*, u64*, const Acc*, OpBytes<param_bytes>), matching the values
            // pushed (the blob holds at least the round_up(param_bytes, 16) bytes the driver
            // copies, the operator's parameters first). x and y hold n
            // elements of In and Out (the same memory only for in-place scans, where In = Out
            // and the kernel reads every element of a tile before writing it). With more than
            // one tile, the ticket word's count is zero and its high half holds the last
            // launch's epoch (each launch's last ticket-taker sees to both), and leaves and
            // nodes each hold `slot_words` 64-bit words per tile in the handle's slot region,
            // where no word carries the epoch this launch takes (the arena is zeroed before
            // the epoch can wrap); the memory is used only on this stream, in order. A
            // nonzero carry_ptr holds one Acc (the caller's promise, with its guard).
            unsafe { launch.launch(cfg) }
                .map(|_| ())
                .map_err(|e| Error::driver("launching the scan kernel", e))
        })
    }
}
impl Gpu {
    /// A scanner for `op` over elements of type `T`: its kernel is compiled (or loaded from
    /// a cache) now, once.
    ///
    /// Errors for an operator that cannot be scanned ([`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), see
    /// [`Operator::SCANNABLE`]) or whose kernel does not compile.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let running_max = gpu.scanner::<i32, _>(cufold::ops::Max)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scanner<T: DeviceValue, O: Operator<T>>(&self, op: O) -> Result<Scanner<T, O>> {
        Scanner::new(self.clone(), op, ScanConfig::default())
    }

    /// A scanner for `op` built with `config` (block size, bytes per thread, block-level
    /// algorithm, staging): the speed changes, never the bits.
    ///
    /// ```no_run
    /// use cufold::scan::{ScanAlgorithm, ScanConfig};
    /// let gpu = cufold::Gpu::open(0)?;
    /// let config = ScanConfig::default().algorithm(ScanAlgorithm::WarpShuffle);
    /// let cumsum = gpu.scanner_with::<f32, _>(cufold::ops::Sum, config)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scanner_with<T: DeviceValue, O: Operator<T>>(
        &self,
        op: O,
        config: ScanConfig,
    ) -> Result<Scanner<T, O>> {
        config.check()?;
        Scanner::new(self.clone(), op, config)
    }

    /// Enqueues the scan of `x` into `out` on the stream and returns at once (a shorthand
    /// for [`Gpu::scanner`] then [`Scanner::scan`]; keep the scanner to scan many times).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[1.0f32, 2.0, 3.0]).unwrap();
    /// let mut y = gpu.stream().alloc_zeros::<f32>(3).unwrap();
    /// gpu.scan(&x, &mut y, cufold::ops::Sum, cufold::ScanKind::Inclusive)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&y).unwrap(), [1.0, 3.0, 6.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &impl DevicePtr<T>,
        out: &mut impl DevicePtrMut<O::Out>,
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        self.memo_scanner(op)?.scan(x, out, kind)
    }

    /// Uploads host data, scans it and returns the prefixes on the host (waits for the
    /// stream): a convenience for data that is not on the GPU.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let y = gpu.scan_host(&[1u64, 2, 3], cufold::ops::Sum, cufold::ScanKind::Exclusive)?;
    /// assert_eq!(y, [0, 1, 3]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_host<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        let scanner = self.memo_scanner(op)?;
        if x.is_empty() {
            return Ok(Vec::new());
        }
        let stream = self.stream();
        let dev = stream
            .clone_htod(x)
            .map_err(|e| Error::driver("copying the input to the device", e))?;
        let mut out = self.alloc::<O::Out>(x.len())?;
        scanner.scan(&dev, &mut out, kind)?;
        stream
            .clone_dtoh(&out)
            .map_err(|e| Error::driver("copying the prefixes to the host", e))
    }

    /// [`Gpu::scan_host`] into `out`, a host slice as long as `x` (waits for the stream).
    pub(crate) fn scan_host_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        check_scan_lengths(x.len(), out.len())?;
        let scanner = self.memo_scanner(op)?;
        if x.is_empty() {
            return Ok(());
        }
        let stream = self.stream();
        let dev = stream
            .clone_htod(x)
            .map_err(|e| Error::driver("copying the input to the device", e))?;
        let mut dev_out = self.alloc::<O::Out>(x.len())?;
        scanner.scan(&dev, &mut dev_out, kind)?;
        stream
            .memcpy_dtoh(&dev_out, out)
            .map_err(|e| Error::driver("copying the prefixes to the host", e))?;
        stream
            .synchronize()
            .map_err(|e| Error::driver("waiting for the prefixes", e))
    }

    /// A scanner for `op` with the default configuration whose kernel this handle keeps for
    /// the convenient forms ([`Gpu::scan`], [`Gpu::scan_host`]): after the first call for an
    /// operator's type and CUDA text, a map look-up and a parameter copy, no kernel look-up.
    pub(crate) fn memo_scanner<T: DeviceValue, O: Operator<T>>(
        &self,
        op: O,
    ) -> Result<Scanner<T, O>> {
        let kernel: ScanKernel<T, O> = self.memo(op.cuda(), || Ok(self.scanner(op)?.kernel()))?;
        if kernel.param_bytes != op.params().bytes().len() {
            return self.scanner(op);
        }
        Scanner::from_kernel(self.clone(), op, kernel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_inputs_take_the_large_tiles_or_their_own_shape_with_a_prefetch() {
        let h100 = 228 * 1024;
        let c = ScanConfig::default();
        let f32s = TypeSizes::uniform(4);
        // The large tiles, 4 MiB ahead: 64 tiles of 64 KiB.
        let l = large_inputs_shape(f32s, &c, h100).unwrap();
        assert_eq!((l.tile(), l.prefetch), (16384, 64));
        assert_eq!(
            l,
            ScanShape::large(f32s, c.get_algorithm(), h100)
                .unwrap()
                .with_prefetch(f32s, 4 << 20)
        );
        // Types without large tiles (affine maps of f64: 16-byte accumulators), and every
        // type with resident tiles off or too little shared memory: the small shape, with
        // the prefetch.
        let affine64 = TypeSizes::uniform(16);
        for (sizes, c, sm) in [
            (affine64, c, h100),
            (f32s, c.resident(false), h100),
            (f32s, c, 100 * 1024),
        ] {
            let small = shape_for(sizes, &c).unwrap();
            let l = large_inputs_shape(sizes, &c, sm).unwrap();
            assert_eq!(
                l,
                ScanShape {
                    prefetch: l.prefetch,
                    ..small
                }
            );
            let tile_bytes = small.tile() * sizes.input as u64;
            assert_eq!(l.prefetch as u64, (4 << 20) / tile_bytes, "{sizes:?}");
        }
        // Compensated sums of f32 (8-byte double words): no large tiles with the default
        // block scan, and the small shape's resident tiles, which admit them here.
        let compensated = TypeSizes {
            input: 4,
            acc: 8,
            output: 4,
        };
        assert!(ScanShape::large(compensated, c.get_algorithm(), h100).is_none());
        let l = large_inputs_shape(compensated, &c, h100).unwrap();
        assert!(l.resident && !shape_for(compensated, &c).unwrap().resident);
        assert_eq!((l.block, l.items, l.min_blocks), (256, 32, 5));
        // Never, and no prefetch.
        assert!(large_inputs_shape(f32s, &c.large_from(u64::MAX), h100).is_none());
        assert_eq!(
            large_inputs_shape(f32s, &c.prefetch_bytes(0), h100)
                .unwrap()
                .prefetch,
            0
        );
        // The small shape never prefetches.
        assert_eq!(shape_for(f32s, &c).unwrap().prefetch, 0);
    }
}
