//! The reduction on the GPU: a compiled kernel per operator, element type and shape, one
//! launch per reduction, on the caller's stream.

use super::plan::{plan, ReducePlan, ReduceShape};
use super::ReduceConfig;
use crate::element::DeviceValue;
use crate::error::{Error, Result};
use crate::gpu::{get_or_try, jit, Gpu};
use crate::ops::check::{check_empty, check_reduce_output};
use crate::ops::{CudaOp, Operator, ParamBlob};
use cudarc::driver::{
    CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

/// The full CUDA source of the reduction kernel for `op`, whose run-time parameters
/// ([`Operator::params`]) are `param_bytes` long, with compile-time `shape`
/// (`vector_loads`: whether the input is read as 16-byte vectors, for aligned inputs).
///
/// ```
/// use cufold::ops::{Operator, Sum};
/// let shape = cufold::reduce::ReduceShape::for_sizes(4, 256).unwrap();
/// let src = cufold::reduce::kernel_source(&<Sum as Operator<f32>>::cuda(&Sum), 0, &shape, true);
/// assert!(src.contains("#define CF_OP cf::Sum<float>"));
/// assert!(src.contains("#include \"cufold/reduce.cuh\""));
/// ```
pub fn kernel_source(
    op: &CudaOp,
    param_bytes: usize,
    shape: &ReduceShape,
    vector_loads: bool,
) -> String {
    jit::kernel_source(
        "reduce",
        op,
        &[
            ("CF_BLOCK", shape.block.to_string()),
            ("CF_K", shape.loads.to_string()),
            ("CF_VEC", shape.vec.to_string()),
            ("CF_VECTOR", (vector_loads as u32).to_string()),
            ("CF_FINAL_K", shape.final_loads.to_string()),
            ("CF_ORDER_FREE", (shape.order_free as u32).to_string()),
            ("CF_OP_BYTES", param_bytes.to_string()),
        ],
    )
}

/// Compiles the reduction kernel of `op` for the GPU architecture `arch` (such as
/// `"sm_90"`) and returns its CUBIN: no device is needed, only NVRTC. Use it to check an
/// operator's CUDA half ahead of time; errors carry the NVRTC log and the numbered source.
///
/// ```no_run
/// use cufold::ops::{Operator, Sum};
/// let shape = cufold::reduce::ReduceShape::for_sizes(4, 256)?;
/// let cubin = cufold::reduce::compile_kernel(&<Sum as Operator<f32>>::cuda(&Sum), 0, &shape, true, "sm_90")?;
/// assert!(!cubin.is_empty());
/// # Ok::<(), cufold::Error>(())
/// ```
pub fn compile_kernel(
    op: &CudaOp,
    param_bytes: usize,
    shape: &ReduceShape,
    vector_loads: bool,
    arch: &str,
) -> Result<Vec<u8>> {
    jit::probe_nvrtc()?;
    jit::compile(
        &kernel_source(op, param_bytes, shape, vector_loads),
        &jit::compile_options(arch),
    )
}

impl Gpu {
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
        self.reducer_with(op, ReduceConfig::default())
    }

    /// A reducer for `op` built with `config` (block sizes): the speed changes, never the
    /// result.
    ///
    /// ```no_run
    /// use cufold::reduce::ReduceConfig;
    /// let gpu = cufold::Gpu::open(0)?;
    /// let sum = gpu.reducer_with::<f32, _>(cufold::ops::Sum, ReduceConfig::default().block(256))?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reducer_with<T: DeviceValue, O: Operator<T>>(
        &self,
        op: O,
        config: ReduceConfig,
    ) -> Result<Reducer<T, O>> {
        config.check()?;
        Reducer::new(self.clone(), op, config)
    }

    /// Reduces `x` (a `CudaSlice`, `CudaView` or `CudaViewMut` at any offset) and returns
    /// the result on the host: enqueues the reduction and a copy, then waits for the stream.
    ///
    /// The handle keeps the kernels of each operator type (and CUDA text) it was asked for,
    /// so after the first call this costs on the host what [`Reducer::reduce`] does, plus the
    /// operator's CUDA text, a map look-up and a copy of its parameters (no kernel looked
    /// up). A value compiled into an operator's CUDA text gets kernels of its own.
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
        self.memo_reducer(op)?.reduce(x)
    }

    /// Enqueues the reduction of `x` on the stream, leaving the result in `out` (length 1),
    /// and returns at once: no synchronisation, no host copy, and (after the first call for
    /// this operator type and the largest input size) no allocation, so it may be captured
    /// into a CUDA graph and replayed.
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
        self.memo_reducer(op)?.reduce_into(x, out)
    }

    /// Uploads host data and reduces it (a convenience for data that is not on the GPU yet).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// assert_eq!(gpu.reduce_host(&[1u8, 2, 3], cufold::ops::WideSum)?, 6u128);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_host<T: DeviceValue, O: Operator<T>>(&self, x: &[T], op: O) -> Result<O::Out> {
        let reducer = self.memo_reducer(op)?;
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
}

impl Gpu {
    /// A reducer for `op` with the default configuration whose kernels this handle keeps
    /// for the convenient forms ([`Gpu::reduce`], [`Gpu::reduce_into`],
    /// [`Gpu::reduce_host`]): after the first call for an operator's type and CUDA text, a map look-up and a
    /// parameter copy, no kernel look-up.
    pub(crate) fn memo_reducer<T: DeviceValue, O: Operator<T>>(
        &self,
        op: O,
    ) -> Result<Reducer<T, O>> {
        let kernels: ReduceKernels<T, O> =
            self.memo(op.cuda(), || Ok(self.reducer(op)?.kernels()))?;
        if kernels.param_bytes != op.params().bytes().len() {
            return self.reducer(op);
        }
        Reducer::from_kernels(self.clone(), op, kernels)
    }
}

/// A reducer's compiled kernels and shapes (what [`Gpu::reduce`] keeps per operator type and CUDA text; no
/// handle inside, so that the handle does not keep itself alive).
struct ReduceKernels<T, O> {
    param_bytes: usize,
    small: ShapeKernels,
    large: Option<Large>,
    _types: PhantomData<fn(T, O)>,
}

impl<T, O> Clone for ReduceKernels<T, O> {
    fn clone(&self) -> Self {
        ReduceKernels {
            param_bytes: self.param_bytes,
            small: self.small.clone(),
            large: self.large.clone(),
            _types: PhantomData,
        }
    }
}

/// The kernels of one shape: the 16-byte-vector form for aligned inputs (where the type has
/// one) compiled when the shape is first needed, the element-by-element form on first use
/// (shared by the reducer's clones).
#[derive(Clone)]
struct ShapeKernels {
    shape: ReduceShape,
    vector: Option<GridKernel>,
    scalar: Arc<OnceLock<GridKernel>>,
}

/// A compiled reduction kernel and the device as its launches see it: as many resident
/// threads a multiprocessor as its blocks fit there at once (its registers and shared memory
/// counted, `cuOccupancyMaxActiveBlocksPerMultiprocessor`), so that the planner's one wave
/// ([`plan`]) is this kernel's. By thread count alone, kernels held to fewer blocks (the
/// staged lane runs' shared-memory ring, 110 registers for MeanVar) got grids of 1.3 to 2.6
/// waves, the last one part-empty.
#[derive(Clone)]
struct GridKernel {
    f: CudaFunction,
    props: crate::gpu::DeviceProps,
}

/// An order-free operator's kernel for large inputs ([`ReduceConfig::large_block`]): its
/// shape, the length from which it is taken, and its kernels, compiled on first use.
#[derive(Clone)]
struct Large {
    shape: ReduceShape,
    from: u64,
    kernels: Arc<OnceLock<ShapeKernels>>,
}

/// A compiled reduction for `op` over elements of type `T`, on a [`Gpu`]'s stream.
///
/// One kernel serves every length: small inputs (up to one tile, 16384 f32) take a single
/// block and a single launch; larger ones one launch of at most one wave of blocks whose
/// last block to finish reduces the partials and writes the result. Order-free operators
/// take a second kernel, of smaller blocks, from [`ReduceConfig::large_from_len`] elements
/// (compiled on first use). The result is the canonical tree (crate docs): the same bits for
/// every length-N input on every GPU and block size, and the CPU backend's bits for
/// operators built from `+ - * /`, min, max and comparisons.
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
    params: Box<ParamBlob>,
    param_bytes: usize,
    small: ShapeKernels,
    large: Option<Large>,
    _input: PhantomData<fn(T)>,
}

impl<T: DeviceValue, O: Operator<T>> std::fmt::Debug for Reducer<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reducer")
            .field("op", &O::name())
            .field("input", &T::cuda_name())
            .field("shape", &self.small.shape)
            .field("large", &self.large.as_ref().map(|l| (l.from, l.shape)))
            .field("gpu", &self.gpu)
            .finish()
    }
}

/// Accumulators of at least this many bytes take at most [`HEAVY_BLOCK`] threads a block,
/// when their operator is not order-free ([`ReduceConfig::block`]): in larger blocks their
/// kernels spill.
pub(crate) const HEAVY_ACC_BYTES: usize = 24;
/// See [`HEAVY_ACC_BYTES`].
pub(crate) const HEAVY_BLOCK: u32 = 256;
/// Operators whose kernels read lane runs ([`Operator::LANE_RUNS`]) and are not order-free
/// take blocks of at most this many threads, each thread [`LANE_RUN_LOADS`] 16-byte loads a
/// tile: their tiles are staged in shared memory (40 KB a block at most), not in registers,
/// and longer runs join fewer nodes across the warp.
pub(crate) const LANE_RUN_BLOCK: u32 = 128;
/// See [`LANE_RUN_BLOCK`].
pub(crate) const LANE_RUN_LOADS: u32 = 8;

impl<T: DeviceValue, O: Operator<T>> Reducer<T, O> {
    fn new(gpu: Gpu, op: O, config: ReduceConfig) -> Result<Self> {
        let block = if !O::ORDER_FREE && std::mem::size_of::<O::Acc>() >= HEAVY_ACC_BYTES {
            config.get_block().min(HEAVY_BLOCK)
        } else {
            config.get_block()
        };
        let mut shape = ReduceShape::for_operator::<T, O>(block)?;
        if O::LANE_RUNS && !O::ORDER_FREE {
            shape.block = shape.block.min(LANE_RUN_BLOCK);
            shape.loads = LANE_RUN_LOADS;
        }
        let large_shape = ReduceShape::for_operator::<T, O>(config.get_large_block())?;
        let large =
            (O::ORDER_FREE && config.get_large_from_len() != u64::MAX && large_shape != shape)
                .then(|| Large {
                    shape: large_shape,
                    from: config.get_large_from_len(),
                    kernels: Default::default(),
                });
        let params = op.params();
        let param_bytes = params.bytes().len();
        let small = shape_kernels::<T>(&gpu, &op.cuda(), param_bytes, shape)?;
        Ok(Reducer {
            gpu,
            op,
            params: ParamBlob::new(&params, O::name)?,
            param_bytes,
            small,
            large,
            _input: PhantomData,
        })
    }

    /// What this reducer keeps whatever the operator's value.
    fn kernels(&self) -> ReduceKernels<T, O> {
        ReduceKernels {
            param_bytes: self.param_bytes,
            small: self.small.clone(),
            large: self.large.clone(),
            _types: PhantomData,
        }
    }

    /// A reducer of `op` on `gpu` with kernels built before.
    fn from_kernels(gpu: Gpu, op: O, k: ReduceKernels<T, O>) -> Result<Self> {
        let params = ParamBlob::for_kernel(&op.params(), k.param_bytes, O::name)?;
        Ok(Reducer {
            gpu,
            op,
            params,
            param_bytes: k.param_bytes,
            small: k.small,
            large: k.large,
            _input: PhantomData,
        })
    }

    /// The same reducer for another value of the operator: its run-time parameters
    /// ([`Operator::params`]) change, the compiled kernel is reused (no compile, no cache
    /// look-up). A value whose CUDA text differs from the first's (a constant compiled into
    /// [`Operator::cuda`]'s source) gets kernels of its own, compiled or found in the caches.
    ///
    /// Errors ([`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig)) if the new
    /// value's parameters have another size than the first's.
    ///
    /// ```no_run
    /// use cufold::ops::{Mapped, Sum};
    /// # #[derive(Clone, Copy, Default)] struct Shift(f64);
    /// # impl cufold::ops::Transform<f64> for Shift { type Out = f64;
    /// #   fn apply(&self, x: f64, _: u64) -> f64 { x + self.0 }
    /// #   fn cuda(&self) -> cufold::ops::CudaOp { unimplemented!() } }
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[1.0f64, 2.0])?;
    /// let r = gpu.reducer::<f64, _>(Mapped::new(Shift(0.0), Sum))?;
    /// for k in 0..1000 {
    ///     let sum = r.with_op(Mapped::new(Shift(k as f64), Sum))?.reduce(&x)?;
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_op(&self, op: O) -> Result<Self> {
        let params = ParamBlob::for_kernel(&op.params(), self.param_bytes, O::name)?;
        let cuda = op.cuda();
        // A value compiled into the operator's CUDA text (rather than passed as parameters)
        // needs kernels of its own, of the same shapes.
        let (small, large) = if cuda == self.op.cuda() {
            (self.small.clone(), self.large.clone())
        } else {
            let small = shape_kernels::<T>(&self.gpu, &cuda, self.param_bytes, self.small.shape)?;
            let large = self.large.as_ref().map(|l| Large {
                shape: l.shape,
                from: l.from,
                kernels: Default::default(),
            });
            (small, large)
        };
        Ok(Reducer {
            gpu: self.gpu.clone(),
            op,
            params,
            param_bytes: self.param_bytes,
            small,
            large,
            _input: PhantomData,
        })
    }

    /// The operator.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let r = gpu.reducer::<f32, _>(cufold::ops::Max)?;
    /// let _max: &cufold::ops::Max = r.op();
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn op(&self) -> &O {
        &self.op
    }

    /// The compile-time shape of the kernel a reduction of `n` elements takes: for
    /// order-free operators, [`ReduceConfig::large_block`]'s from
    /// [`ReduceConfig::large_from_len`] elements where `n` is more than one tile of the
    /// configured block's shape; else the configured block's.
    ///
    /// ```no_run
    /// use cufold::ops::{ArgMax, Sum};
    /// let gpu = cufold::Gpu::open(0)?;
    /// let argmax = gpu.reducer::<f32, _>(ArgMax)?;
    /// assert_eq!(argmax.shape_for_len(1000).block, 1024);
    /// assert_eq!(argmax.shape_for_len(1 << 24).block, 128);
    /// assert_eq!(gpu.reducer::<f32, _>(Sum)?.shape_for_len(1 << 24).block, 1024);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn shape_for_len(&self, n: u64) -> ReduceShape {
        self.large_for(n).map_or(self.small.shape, |l| l.shape)
    }

    /// The large inputs' kernel, where a reduction of `n` elements takes it: from
    /// `large_from_len` elements, unless one block of the configured size reduces them in one
    /// tile (u8 at 2^16: one launch of one block, faster than a grid of small blocks).
    fn large_for(&self, n: u64) -> Option<&Large> {
        self.large
            .as_ref()
            .filter(|l| n >= l.from && n > self.small.shape.tile())
    }

    /// The kernels a reduction of `n` elements launches (compiling the large inputs' on
    /// first use).
    fn kernels_for(&self, n: u64) -> Result<&ShapeKernels> {
        let Some(l) = self.large_for(n) else {
            return Ok(&self.small);
        };
        get_or_try(&l.kernels, || {
            shape_kernels::<T>(&self.gpu, &self.op.cuda(), self.param_bytes, l.shape)
        })
    }

    /// The plan a reduction of `n` elements would launch (with the kernel of
    /// [`Reducer::shape_for_len`]).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let r = gpu.reducer::<f32, _>(cufold::ops::Sum)?;
    /// assert_eq!(r.plan(1000)?.grid, 1);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn plan(&self, n: u64) -> Result<ReducePlan> {
        plan(n, &self.shape_for_len(n), &self.gpu.inner.props)
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
    /// Errors: an `out` whose length is not 1 ([`ErrorKind::LengthMismatch`](crate::ErrorKind::LengthMismatch)), an empty `x`
    /// for an operator without an empty value ([`ErrorKind::EmptyInput`](crate::ErrorKind::EmptyInput)), driver failures.
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
        check_reduce_output(out.len())?;
        let n = x.len() as u64;
        check_empty::<T, O>(n)?;
        let stream = &self.gpu.inner.stream;
        let (x_ptr, _x_guard) = x.device_ptr(stream);
        let (out_ptr, _out_guard) = out.device_ptr_mut(stream);
        self.launch(x_ptr, n, out_ptr)
    }

    /// Enqueues the reduction of the `n` elements at device address `x_ptr` into the one
    /// output at `out_ptr` (the segmented reduction's per-row launches). The caller holds
    /// the buffers' stream guards and has checked `n` against the operator's empty value.
    pub(crate) fn launch(&self, x_ptr: u64, n: u64, out_ptr: u64) -> Result<()> {
        let k = self.kernels_for(n)?;
        let kernel = match &k.vector {
            Some(v) if x_ptr % 16 == 0 => v,
            _ => get_or_try(&k.scalar, || {
                reduce_kernel(&self.gpu, &self.op.cuda(), self.param_bytes, k.shape, false)
            })?,
        };
        let plan = plan(n, &k.shape, &kernel.props)?;
        let f = &kernel.f;
        // SAFETY: x holds n elements of In, the kernel's first argument: its parameters are
        // (const In*, u64, u64, u64, Acc*, u64*, Out*, OpBytes<param_bytes>).
        unsafe {
            launch_grid::<O::Acc>(
                &self.gpu,
                f,
                x_ptr,
                n,
                &plan,
                k.shape.block,
                out_ptr,
                &self.params,
                "launching the reduction kernel",
            )
        }
    }
}

/// The reduction kernel of `cuda` (parameters of `param_bytes`) in `shape`, reading 16-byte
/// vectors (`vector`, for aligned inputs) or element by element.
fn reduce_kernel(
    gpu: &Gpu,
    cuda: &CudaOp,
    param_bytes: usize,
    shape: ReduceShape,
    vector: bool,
) -> Result<GridKernel> {
    let f = gpu.kernel(
        "cf_reduce",
        kernel_source(cuda, param_bytes, &shape, vector),
    )?;
    let props = kernel_props(&f, shape.block, &gpu.inner.props);
    Ok(GridKernel { f, props })
}

/// `dev` as kernel `f`'s launches in blocks of `block` see it: the threads of the blocks a
/// multiprocessor holds at once (at least one block; `dev` itself where the driver does
/// not say).
fn kernel_props(
    f: &CudaFunction,
    block: u32,
    dev: &crate::gpu::DeviceProps,
) -> crate::gpu::DeviceProps {
    match f.occupancy_max_active_blocks_per_multiprocessor(block, 0, None) {
        Ok(blocks) => crate::gpu::DeviceProps {
            sm_count: dev.sm_count,
            max_threads_per_sm: dev.max_threads_per_sm.min(blocks.max(1) * block),
        },
        Err(_) => *dev,
    }
}

/// The kernels of `shape` for inputs of type `T`: the vector form compiled now where `T`
/// has one (16 bytes a load), else the element-by-element form now.
fn shape_kernels<T>(
    gpu: &Gpu,
    cuda: &CudaOp,
    param_bytes: usize,
    shape: ReduceShape,
) -> Result<ShapeKernels> {
    let vectorizable = shape.vec as usize * std::mem::size_of::<T>() == 16;
    let scalar = Arc::new(OnceLock::new());
    let vector = if vectorizable {
        Some(reduce_kernel(gpu, cuda, param_bytes, shape, true)?)
    } else {
        let _ = scalar.set(reduce_kernel(gpu, cuda, param_bytes, shape, false)?);
        None
    };
    Ok(ShapeKernels {
        shape,
        vector,
        scalar,
    })
}

/// Launches a kernel of reduce.cuh's grid machinery (`cf::reduce_grid`: the reduction and
/// Monte Carlo kernels) with the plan's grid, the handle's scratch memory for `plan.grid`
/// partials of type `Acc` and as many tickets, `out_ptr` (one Out) and the operator's
/// parameter blob.
///
/// # Safety
///
/// `f`'s parameters must be (u64-sized `first`, u64 n, u64, u64, Acc*, u64*, Out*,
/// OpBytes<N>) with N at most the blob's bytes; `first` must be what the kernel reads there
/// (an input of n elements, or a seed), and `out_ptr` must hold one output.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn launch_grid<Acc>(
    gpu: &Gpu,
    f: &CudaFunction,
    first: u64,
    n: u64,
    plan: &ReducePlan,
    block: u32,
    out_ptr: u64,
    params: &ParamBlob,
    what: &str,
) -> Result<()> {
    let stream = &gpu.inner.stream;
    let cfg = LaunchConfig {
        grid_dim: (plan.grid as u32, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    };
    let plain = if plan.grid > 1 {
        plan.grid as usize * std::mem::size_of::<Acc>()
    } else {
        0
    };
    gpu.inner.scratch.with_lease(stream, 0, plain, |lease| {
        let mut launch = stream.launch_builder(f);
        launch
            .arg(&first)
            .arg(&n)
            .arg(&plan.tiles_per_block)
            .arg(&plan.limit)
            .arg(&lease.plain)
            .arg(&lease.ticket)
            .arg(&out_ptr)
            .arg(params);
        // SAFETY: the caller vouches for the kernel's parameters, `first` and `out_ptr`; the
        // blob holds at least the round_up(N, 16) bytes the driver copies; with more than
        // one block, the plain region holds at least `grid` accumulators and the ticket
        // word's count is zero (every launch's last ticket-taker puts it back), both this
        // handle's and used only on this stream, in order.
        unsafe { launch.launch(cfg) }
            .map(|_| ())
            .map_err(|e| Error::driver(what, e))
    })
}
