//! Fused Monte Carlo on the GPU: one compiled kernel per (sample, map, operator) type,
//! one launch per estimate, on the caller's stream.

use super::{check_sample, check_samples, MonteCarlo, Sample};
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::{jit, Gpu};
use crate::ops::check::{check_empty, check_reduce_output};
use crate::ops::{CudaOp, Mapped, Operator, ParamBlob, Transform};
use crate::reduce::{launch_grid, plan, ReducePlan, ReduceShape};
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtrMut};

/// Samples per thread per load: sixteen consecutive samples (four Philox blocks of f32
/// draws), so that every group takes whole Philox blocks (kernels/monte_carlo.cuh) and the
/// tree's warp and block stages, which cost the same per load whatever its length, are
/// spread over many samples.
const VEC: u32 = 16;

/// The kernel's shape: 256 threads, two loads of sixteen samples per thread per tile. The
/// kernel reads no memory, so nothing ties the load length to coalescing; on an H100 this
/// shape drew 1.44x the samples per second of four-sample loads for a mean of U(0,1) and
/// 1.7x for MeanVar (BENCHMARKS.md), the same bits as every shape.
/// The canonical schedule for every operator (`order_free: false`), so the kernel's source
/// does not depend on the operator's claim: drawing dominates the time, not the tree.
fn shape() -> ReduceShape {
    ReduceShape {
        block: 256,
        vec: VEC,
        loads: 2,
        final_loads: 8,
        order_free: false,
    }
}

/// The full CUDA source of the Monte Carlo kernel for `op` (an operator over samples: a
/// [`Mapped`] map and reduction), whose run-time parameters are `param_bytes` long, drawing
/// `draws`.
///
/// ```
/// use cufold::monte_carlo::{kernel_source, Draws, MonteCarlo};
/// use cufold::ops::{Identity, Operator};
/// let mc = MonteCarlo::<f32, _>::new(Identity);
/// let op = mc.operator();
/// let src = kernel_source(&<_ as Operator<f32>>::cuda(&op), 0, Draws::Uniform);
/// assert!(src.contains("#include \"cufold/monte_carlo.cuh\"") && src.contains("#define CF_DRAW 0"));
/// ```
pub fn kernel_source(op: &CudaOp, param_bytes: usize, draws: super::Draws) -> String {
    let s = shape();
    jit::kernel_source(
        "monte_carlo",
        op,
        &[
            ("CF_BLOCK", s.block.to_string()),
            ("CF_K", s.loads.to_string()),
            ("CF_VEC", s.vec.to_string()),
            ("CF_FINAL_K", s.final_loads.to_string()),
            ("CF_DRAW", draws.cuda_id().to_string()),
            ("CF_ORDER_FREE", (s.order_free as u32).to_string()),
            ("CF_OP_BYTES", param_bytes.to_string()),
        ],
    )
}

/// Compiles the Monte Carlo kernel of `op` for the GPU architecture `arch` (such as
/// `"sm_90"`) and returns its CUBIN: NVRTC is needed, no device.
///
/// ```no_run
/// use cufold::monte_carlo::{compile_kernel, Draws, MonteCarlo};
/// use cufold::ops::{Identity, Operator};
/// let op = MonteCarlo::<f32, _>::new(Identity).operator();
/// let cubin = compile_kernel(&<_ as Operator<f32>>::cuda(&op), 0, Draws::Normal, "sm_90")?;
/// # Ok::<(), cufold::Error>(())
/// ```
pub fn compile_kernel(
    op: &CudaOp,
    param_bytes: usize,
    draws: super::Draws,
    arch: &str,
) -> Result<Vec<u8>> {
    jit::probe_nvrtc()?;
    jit::compile(
        &kernel_source(op, param_bytes, draws),
        &jit::compile_options(arch),
    )
}

/// A compiled Monte Carlo estimate on a [`Gpu`]'s stream: [`Integrator::estimate`] draws
/// `n` samples in the kernel and reduces them, and [`Integrator::with`] takes another seed
/// or another value of the map's parameters without compiling again.
///
/// ```no_run
/// use cufold::monte_carlo::MonteCarlo;
/// use cufold::ops::Identity;
/// let gpu = cufold::Gpu::open(0)?;
/// let mean_of_u = gpu.integrator(&MonteCarlo::<f32, _>::new(Identity))?;
/// let est = mean_of_u.estimate(1 << 30)?;
/// println!("{} ± {}", est.mean, est.std_error());
/// # Ok::<(), cufold::Error>(())
/// ```
pub struct Integrator<S, F, O> {
    gpu: Gpu,
    mc: MonteCarlo<S, F, O>,
    params: Box<ParamBlob>,
    param_bytes: usize,
    function: CudaFunction,
}

impl<S: Sample, F: Transform<S>, O: Operator<F::Out>> std::fmt::Debug for Integrator<S, F, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Integrator")
            .field("sample", &S::cuda_name())
            .field("op", &O::name())
            .field("seed", &self.mc.get_seed())
            .field("draws", &self.mc.get_draws())
            .field("gpu", &self.gpu)
            .finish()
    }
}

/// The Monte Carlo kernel of `op` (an operator over samples) drawing `draws`, with its
/// parameter blob and the blob's size.
fn mc_kernel<S: Sample, P: Operator<S>>(
    gpu: &Gpu,
    op: &P,
    draws: super::Draws,
) -> Result<(CudaFunction, Box<ParamBlob>, usize)> {
    let cuda = op.cuda();
    let params = op.params();
    let param_bytes = params.bytes().len();
    let function = gpu.kernel("cf_monte_carlo", kernel_source(&cuda, param_bytes, draws))?;
    Ok((function, ParamBlob::new(&params, P::name)?, param_bytes))
}

impl<S: Sample, F: Transform<S>, O: Operator<F::Out>> Integrator<S, F, O> {
    fn new(gpu: Gpu, mc: MonteCarlo<S, F, O>) -> Result<Self> {
        check_sample::<S>()?;
        let (function, params, param_bytes) = mc_kernel(&gpu, &mc.operator(), mc.get_draws())?;
        Ok(Integrator {
            params,
            gpu,
            mc,
            param_bytes,
            function,
        })
    }

    /// The same kernel for another estimate of the same types: another seed, another value
    /// of the map's run-time parameters. No compile, no cache look-up, unless the new map's
    /// or operator's CUDA text differs (a value compiled into it): then its own kernel,
    /// compiled or found in the caches.
    ///
    /// Errors ([`ErrorKind::InvalidConfig`]) if the draws differ (a kernel is compiled for
    /// uniform or for normal draws) or the parameters have another size.
    ///
    /// ```no_run
    /// use cufold::monte_carlo::MonteCarlo;
    /// use cufold::ops::Identity;
    /// let gpu = cufold::Gpu::open(0)?;
    /// let mc = MonteCarlo::<f64, _>::new(Identity);
    /// let first = gpu.integrator(&mc)?;
    /// let again = first.with(&mc.seed(2))?.estimate(1 << 20)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn with(&self, mc: &MonteCarlo<S, F, O>) -> Result<Self> {
        let op = mc.operator();
        let params = <Mapped<F, O> as Operator<S>>::params(&op);
        if params.bytes().len() != self.param_bytes || mc.get_draws() != self.mc.get_draws() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "{}: this estimate needs another kernel (draws {:?}, {} bytes of parameters) than \
                     the compiled one (draws {:?}, {} bytes): build it with Gpu::integrator",
                    O::name(),
                    mc.get_draws(),
                    params.bytes().len(),
                    self.mc.get_draws(),
                    self.param_bytes
                ),
            ));
        }
        // A value compiled into the map's or the operator's CUDA text (rather than passed as
        // parameters) needs a kernel of its own.
        let cuda = |op: &Mapped<F, O>| <Mapped<F, O> as Operator<S>>::cuda(op);
        let function = if cuda(&op) == cuda(&self.mc.operator()) {
            self.function.clone()
        } else {
            mc_kernel(&self.gpu, &op, mc.get_draws())?.0
        };
        Ok(Integrator {
            gpu: self.gpu.clone(),
            mc: *mc,
            params: ParamBlob::new(&params, O::name)?,
            param_bytes: self.param_bytes,
            function,
        })
    }

    /// The estimate this integrator computes.
    ///
    /// ```no_run
    /// # use cufold::monte_carlo::MonteCarlo;
    /// let gpu = cufold::Gpu::open(0)?;
    /// let i = gpu.integrator(&MonteCarlo::<f64, _>::new(cufold::ops::Identity).seed(5))?;
    /// assert_eq!(i.monte_carlo().get_seed(), 5);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn monte_carlo(&self) -> &MonteCarlo<S, F, O> {
        &self.mc
    }

    /// The plan an estimate from `n` samples would launch.
    ///
    /// ```no_run
    /// # use cufold::monte_carlo::MonteCarlo;
    /// let gpu = cufold::Gpu::open(0)?;
    /// let i = gpu.integrator(&MonteCarlo::<f32, _>::new(cufold::ops::Identity))?;
    /// assert!(i.plan(1 << 40)?.grid > 1); // 2^40 samples: fine
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn plan(&self, n: u64) -> Result<ReducePlan> {
        check_samples::<S>(0, n)?;
        plan(n, &shape(), &self.gpu.inner.props)
    }

    /// Draws `n` samples, maps and reduces them, and returns the result on the host (waits
    /// for the stream).
    ///
    /// Errors: `n = 0` for an operator without an empty value (as for a reduction; the
    /// default [`MeanVar`](crate::ops::MeanVar) is one), ([`ErrorKind::TooLarge`]) `n` past
    /// 2^62 or past 2^64 draws in all (as [`Cpu::monte_carlo`](crate::Cpu::monte_carlo)),
    /// driver failures.
    ///
    /// ```no_run
    /// # use cufold::monte_carlo::MonteCarlo;
    /// let gpu = cufold::Gpu::open(0)?;
    /// let i = gpu.integrator(&MonteCarlo::<f32, _>::new(cufold::ops::Identity))?;
    /// assert!((i.estimate(1 << 24)?.mean - 0.5).abs() < 1e-3);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn estimate(&self, n: u64) -> Result<O::Out> {
        let stream = &self.gpu.inner.stream;
        let mut out: CudaSlice<O::Out> = stream
            .alloc_zeros::<O::Out>(1)
            .map_err(|e| Error::driver("allocating the result", e))?;
        self.estimate_into(n, &mut out)?;
        let host = stream
            .clone_dtoh(&out)
            .map_err(|e| Error::driver("copying the result to the host", e))?;
        Ok(host[0])
    }

    /// Enqueues the estimate from `n` samples into `out` (length 1) and returns at once: no
    /// synchronisation, no host copy, no allocation (after the handle's scratch memory has
    /// grown to the plan's size once).
    ///
    /// ```no_run
    /// # use cufold::monte_carlo::MonteCarlo;
    /// let gpu = cufold::Gpu::open(0)?;
    /// let i = gpu.integrator(&MonteCarlo::<f64, _>::new(cufold::ops::Identity))?;
    /// let mut out = gpu.stream().alloc_zeros::<cufold::ops::MeanVarValue>(1).unwrap();
    /// i.estimate_into(1 << 30, &mut out)?; // asynchronous
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn estimate_into(&self, n: u64, out: &mut impl DevicePtrMut<O::Out>) -> Result<()> {
        check_reduce_output(out.len())?;
        check_empty::<S, Mapped<F, O>>(n)?;
        check_samples::<S>(0, n)?;
        let plan = self.plan(n)?;
        let inner = &self.gpu.inner;
        let stream = &inner.stream;
        let (out_ptr, _out_guard) = out.device_ptr_mut(stream);
        // SAFETY: the Monte Carlo kernel's parameters are (u64 seed, u64, u64, u64, Acc*,
        // u64, u64*, Out*, OpBytes<param_bytes>); out holds one Out.
        unsafe {
            launch_grid::<O::Acc>(
                &self.gpu,
                &self.function,
                self.mc.get_seed(),
                n,
                &plan,
                shape().block,
                out_ptr,
                &self.params,
                "launching the Monte Carlo kernel",
            )
        }
    }
}

impl Gpu {
    /// An integrator for `mc`: its kernel is compiled (or loaded from a cache) now, once per
    /// type of sample, map and operator and kind of draw; every value of the map's run-time
    /// parameters and every seed reuse it.
    ///
    /// ```no_run
    /// use cufold::monte_carlo::MonteCarlo;
    /// let gpu = cufold::Gpu::open(0)?;
    /// // MeanVar reduces numbers: a sample of several draws needs a map to one.
    /// let i = gpu.integrator(&MonteCarlo::<f64, _>::new(cufold::ops::Identity))?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn integrator<S: Sample, F: Transform<S>, O: Operator<F::Out>>(
        &self,
        mc: &MonteCarlo<S, F, O>,
    ) -> Result<Integrator<S, F, O>> {
        Integrator::new(self.clone(), *mc)
    }

    /// Draws `n` samples of `mc` in the kernel, maps and reduces them along the canonical
    /// tree, and returns the result (a shorthand for [`Gpu::integrator`] then
    /// [`Integrator::estimate`]).
    ///
    /// ```no_run
    /// use cufold::monte_carlo::MonteCarlo;
    /// let gpu = cufold::Gpu::open(0)?;
    /// let est = gpu.monte_carlo(&MonteCarlo::<f32, _>::new(cufold::ops::Identity), 1 << 30)?;
    /// println!("{} ± {}", est.mean, est.std_error());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn monte_carlo<S: Sample, F: Transform<S>, O: Operator<F::Out>>(
        &self,
        mc: &MonteCarlo<S, F, O>,
        n: u64,
    ) -> Result<O::Out> {
        self.integrator(mc)?.estimate(n)
    }
}

/// The fused Monte Carlo kernel over one rank's chunk of a distributed run (`dist`): samples
/// `first ..` of `mc`'s run, reduced to their unfinished tree (kernels/monte_carlo.cuh's
/// `sample_base` and ops.cuh's `cf::Tree`).
pub(crate) struct ChunkEstimator<S, F, O> {
    gpu: Gpu,
    seed: u64,
    first: u64,
    params: Box<ParamBlob>,
    function: CudaFunction,
    _types: std::marker::PhantomData<fn(S, F, O)>,
}

impl<S: Sample, F: Transform<S>, O: Operator<F::Out>> ChunkEstimator<S, F, O> {
    /// The kernel for `mc`'s samples from `first` on of a run of `total` samples (checked
    /// here, the same on every rank). A chunk that holds samples starts at a multiple of 4
    /// (whole Philox blocks; it may end anywhere); an empty one starts at `total`, anything.
    pub(crate) fn new(gpu: &Gpu, mc: &MonteCarlo<S, F, O>, first: u64, total: u64) -> Result<Self> {
        check_sample::<S>()?;
        check_samples::<S>(0, total)?;
        if first % 4 != 0 && first < total {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "a rank's Monte Carlo samples start at {first}: on the GPU, a chunk of a \
                     distributed estimate starts at a whole Philox block, a multiple of 4 \
                     samples (a layout with chunks of at least 4 samples)"
                ),
            ));
        }
        let op = crate::dist::Tree {
            op: mc.operator(),
            first,
        };
        let (function, params, _) = mc_kernel(gpu, &op, mc.get_draws())?;
        Ok(ChunkEstimator {
            gpu: gpu.clone(),
            seed: mc.get_seed(),
            first,
            params,
            function,
            _types: std::marker::PhantomData,
        })
    }

    /// The tree over the chunk's `n` samples (n > 0), on the host (waits for the stream).
    pub(crate) fn tree(&self, n: u64) -> Result<O::Acc> {
        check_samples::<S>(self.first, n)?;
        let plan = plan(n, &shape(), &self.gpu.inner.props)?;
        let stream = &self.gpu.inner.stream;
        let mut out: CudaSlice<O::Acc> = stream
            .alloc_zeros::<O::Acc>(1)
            .map_err(|e| Error::driver("allocating a chunk's tree", e))?;
        {
            let (out_ptr, _out_guard) = out.device_ptr_mut(stream);
            // SAFETY: the Monte Carlo kernel's parameters are (u64 seed, u64, u64, u64, Acc*,
            // u64*, Out*, OpBytes<param_bytes>) with Out = Acc (cf::Tree); out holds one.
            unsafe {
                launch_grid::<O::Acc>(
                    &self.gpu,
                    &self.function,
                    self.seed,
                    n,
                    &plan,
                    shape().block,
                    out_ptr,
                    &self.params,
                    "launching the Monte Carlo kernel",
                )
            }?;
        }
        let host = stream
            .clone_dtoh(&out)
            .map_err(|e| Error::driver("copying a chunk's tree to the host", e))?;
        Ok(host[0])
    }
}
