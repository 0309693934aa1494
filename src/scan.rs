//! Device-wide scans on the GPU: a compiled kernel per operator and element type, one launch
//! per scan, on the caller's stream.

use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::{alloc_scratch, Gpu, ScanScratch};
use crate::jit;
use crate::ops::Operator;
use crate::plan::{plan_scan, ScanPlan, ScanShape, TypeSizes};
use cudarc::driver::{CudaFunction, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use std::marker::PhantomData;

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

/// Mode bits of the kernel (kernels/scan.cuh).
const EXCLUSIVE: u32 = 1;
const X_ALIGNED: u32 = 2;
const Y_ALIGNED: u32 = 4;
const IN_PLACE: u32 = 8;
/// Bytes before the flags: the ticket counter.
const TICKET_BYTES: usize = 256;

pub(crate) fn check_scannable<T: DeviceValue, O: Operator<T>>() -> Result<()> {
    if !O::SCANNABLE {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "{} cannot be scanned: its combine is associative only on the balanced tree of a \
                 reduction, so its prefixes mean nothing (scan Mean for running means)",
                O::NAME
            ),
        ));
    }
    Ok(())
}

fn length_mismatch(n: usize, out: usize) -> Error {
    Error::new(
        ErrorKind::LengthMismatch,
        format!(
            "a scan writes one output per input: the input has {n} elements but the output {out}"
        ),
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
    shape: ScanShape,
    function: CudaFunction,
    _input: PhantomData<fn(T)>,
}

impl<T: DeviceValue, O: Operator<T>> std::fmt::Debug for Scanner<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("op", &O::NAME)
            .field("input", &T::cuda_name())
            .field("shape", &self.shape)
            .field("gpu", &self.gpu)
            .finish()
    }
}

impl<T: DeviceValue, O: Operator<T>> Scanner<T, O> {
    pub(crate) fn new(gpu: Gpu, op: O) -> Result<Self> {
        check_scannable::<T, O>()?;
        let opts = &gpu.inner.opts;
        let shape = ScanShape::fitting(
            TypeSizes::of::<T, O>(),
            opts.scan_block(),
            opts.scan_bytes() as usize,
            opts.algorithm(),
            opts.scan_staging(),
        )?;
        let cuda = op.cuda();
        let function = gpu.kernel("cf_scan", &cuda, &shape, || {
            jit::scan_kernel_source(&cuda, &shape)
        })?;
        Ok(Scanner {
            gpu,
            op,
            shape,
            function,
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

    /// The kernel's compile-time shape.
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
        plan_scan(n, &self.shape)
    }

    /// Enqueues the inclusive scan of `x` into `out` (the same length): output `i` is
    /// `finish(x[0] ⊕ ... ⊕ x[i], i + 1)`. Inputs and outputs may be `CudaSlice`s or views at
    /// any offset.
    ///
    /// Errors: lengths that differ ([`ErrorKind::LengthMismatch`]), driver failures.
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
        if x.len() != out.len() {
            return Err(length_mismatch(x.len(), out.len()));
        }
        let stream = &self.gpu.inner.stream;
        let (x_ptr, _x_guard) = x.device_ptr(stream);
        let (y_ptr, _y_guard) = out.device_ptr_mut(stream);
        self.launch(x_ptr, y_ptr, x.len() as u64, kind, false)
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
        self.launch(ptr, ptr, n, kind, true)
    }

    fn launch(&self, x_ptr: u64, y_ptr: u64, n: u64, kind: ScanKind, in_place: bool) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let plan = self.plan(n)?;
        let inner = &self.gpu.inner;
        let stream = &inner.stream;
        let mut mode = 0;
        if kind == ScanKind::Exclusive {
            mode |= EXCLUSIVE;
        }
        if x_ptr % 16 == 0 {
            mode |= X_ALIGNED;
        }
        if y_ptr % 16 == 0 {
            mode |= Y_ALIGNED;
        }
        if in_place {
            mode |= IN_PLACE;
        }
        let mut scratch = inner.scan_scratch.lock().unwrap();
        let (epoch, base, ticket, leaves, nodes) = if plan.tiles > 1 {
            // Per tile, a leaf and a node, each 32-bit word in a 64-bit word beside the epoch.
            let slots = plan.tiles as usize * std::mem::size_of::<O::Acc>().div_ceil(4) * 8;
            let need = TICKET_BYTES + 2 * slots;
            if scratch.bytes < need {
                let bytes = need.max(64 * 1024).next_power_of_two();
                let (buf, ptr) =
                    alloc_scratch(stream, bytes, "allocating the scan's look-back memory")?;
                *scratch = ScanScratch {
                    buf: Some(buf),
                    ptr,
                    bytes,
                    epoch: scratch.epoch,
                    tickets: 0,
                };
            }
            next_epoch(stream, &mut scratch)?;
            let p = scratch.ptr;
            let leaves = p + TICKET_BYTES as u64;
            (
                scratch.epoch,
                scratch.tickets,
                p,
                leaves,
                leaves + slots as u64,
            )
        } else {
            (0, 0, 0, 0, 0)
        };
        let cfg = LaunchConfig {
            grid_dim: (plan.tiles as u32, 1, 1),
            block_dim: (self.shape.block, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(&self.function);
        launch
            .arg(&x_ptr)
            .arg(&y_ptr)
            .arg(&n)
            .arg(&plan.tiles)
            .arg(&mode)
            .arg(&epoch)
            .arg(&base)
            .arg(&ticket)
            .arg(&leaves)
            .arg(&nodes);
        // SAFETY: the kernel's parameters are (const In*, Out*, u64, u64, unsigned, unsigned,
        // u64, u64*, u64*, u64*), matching the values pushed. x and y hold n elements of In
        // and Out (the same memory only for in-place scans, where In = Out and the kernel
        // reads every element of a tile before writing it). With more than one tile, ticket,
        // leaves and nodes point into this handle's look-back memory: a ticket counter that
        // has handed out `base` tickets, then a leaf and a node of ceil(size_of::<Acc>() / 4)
        // 64-bit words per tile; this launch's epoch differs from every epoch written there
        // before, and the memory is used only on this stream, in order.
        unsafe { launch.launch(cfg) }.map_err(|e| Error::driver("launching the scan kernel", e))?;
        if plan.tiles > 1 {
            scratch.tickets += plan.tiles;
        }
        Ok(())
    }
}

/// Advances the epoch; when it would wrap, clears the flags so that no old flag can equal a
/// new epoch.
fn next_epoch(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    s: &mut ScanScratch,
) -> Result<()> {
    if s.epoch == u32::MAX {
        if let Some(buf) = s.buf.as_mut() {
            stream
                .memset_zeros(buf)
                .map_err(|e| Error::driver("clearing the scan's look-back memory", e))?;
        }
        s.epoch = 0;
        s.tickets = 0;
    }
    s.epoch += 1;
    Ok(())
}

impl Gpu {
    /// A scanner for `op` over elements of type `T`: its kernel is compiled (or loaded from
    /// a cache) now, once.
    ///
    /// Errors for an operator that cannot be scanned ([`ErrorKind::InvalidConfig`], see
    /// [`Operator::SCANNABLE`]) or whose kernel does not compile.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let running_max = gpu.scanner::<i32, _>(cufold::ops::Max)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scanner<T: DeviceValue, O: Operator<T>>(&self, op: O) -> Result<Scanner<T, O>> {
        Scanner::new(self.clone(), op)
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
        self.scanner(op)?.scan(x, out, kind)
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
        let scanner = self.scanner(op)?;
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
}
