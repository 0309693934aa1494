//! # cufold
//!
//! GPU reductions with any associative operator, on [`cudarc`] and NVRTC, with results that
//! depend on the input alone — never on the GPU, its launch shape or timing.
//!
//! ```no_run
//! use cufold::{ops, Gpu};
//! let ctx = cudarc::driver::CudaContext::new(0).unwrap();
//! let stream = ctx.default_stream();
//! let samples: Vec<f32> = (0..1_000_000).map(|i| (i % 1000) as f32 / 1000.0).collect();
//! let x = stream.clone_htod(&samples).unwrap();
//! let gpu = Gpu::new(&stream)?;
//! let total: f32 = gpu.reduce(&x, ops::Sum)?;
//! let mean = gpu.reduce(&x, ops::Div2Mean)?;    // the paper's halving mean
//! let best = gpu.reduce(&x, ops::ArgMax)?;      // value and index
//! println!("{total} {mean} {} at {}", best.value, best.index);
//! # Ok::<(), cufold::Error>(())
//! ```
//!
//! Without a GPU, [`Cpu`] runs the same operators along the same tree, and [`Backend::auto`]
//! picks the GPU when one is usable:
//!
//! ```
//! let backend = cufold::Backend::auto(); // never panics; falls back to the CPU
//! let m = backend.reduce(&[1.0f64, 2.0, 3.0, 4.0], cufold::ops::Mean)?;
//! assert_eq!(m, 2.5);
//! # Ok::<(), cufold::Error>(())
//! ```
//!
//! ## The canonical combination tree
//!
//! A reduction of N elements is the balanced binary tree over positions `0..P`, where
//! `P = next_pow2(N)` and the positions past N hold the operator's identity:
//! `tree(lo, hi) = combine(tree(lo, mid), tree(mid, hi))`. A subtree with no position below
//! N is the identity and is not computed. On the GPU every stage combines aligned
//! neighbours — a thread's contiguous items, warp lanes by shuffles with offsets 1..16,
//! warps in order, tiles by a binary counter, block partials as a tree — so every launch
//! shape computes this same tree. Consequences:
//!
//! 1. Results are bitwise identical run to run and GPU to GPU (for a given cufold version).
//! 2. Non-commutative operators ([`ops::Compose`], [`ops::MatMul`]) are correct: order is
//!    never changed.
//! 3. The CPU backend computes the same tree, so for operators built from `+ - * /`, min,
//!    max and comparisons the GPU's bits equal the CPU's (kernels are compiled with
//!    `--fmad=false`).
//! 4. The paper's divide-by-two mean ([`ops::Div2Mean`]) is the operator `(a+b)/2` on this
//!    tree: exactly the perfect binary tree it needs.
//!
//! ## Operators
//!
//! An [`ops::Operator`] is a monoid with a lift (input element and index to accumulator)
//! and a finish (accumulator and count to output), written once for the CPU and once as a
//! CUDA C++ struct. See [`ops`] for the built-in ones and what each returns for N = 0.
//!
//! ## Composing with other GPU code
//!
//! [`Gpu`] works on the caller's `Arc<CudaStream>` and buffers. [`Gpu::reduce_into`] and
//! [`Reducer::reduce_into`] enqueue and return without synchronising, leaving the result in
//! a device buffer. [`cuda_header`] exposes the warp- and block-level building blocks as a
//! header to prepend to your own NVRTC kernels.
#![deny(missing_docs, unreachable_pub, unsafe_op_in_unsafe_fn)]

mod cpu;
mod element;
mod error;
mod gpu;
mod jit;
pub mod ops;
pub mod plan;
mod scan;

pub use cpu::Cpu;
pub use element::{DeviceValue, Element, Real, Widen};
pub use error::{Error, ErrorKind, Result};
pub use gpu::{Gpu, GpuOptions, Reducer};
pub use half::{bf16, f16};
pub use jit::{
    compile_reduce_kernel, compile_scan_kernel, cuda_header, reduce_kernel_source,
    scan_kernel_source, DiskCache,
};
pub use plan::ScanAlgorithm;
pub use scan::{ScanKind, Scanner};

use ops::Operator;

/// Where reductions of host data run: a GPU if one is usable, else the CPU.
///
/// ```
/// let b = cufold::Backend::auto();
/// println!("{}", b.describe());
/// assert_eq!(b.reduce(&[5i32, 7], cufold::ops::Max)?, 7);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Debug)]
pub enum Backend {
    /// CUDA device 0's default stream.
    Gpu(Gpu),
    /// All CPU cores.
    Cpu(Cpu),
}

impl Backend {
    /// The GPU (device 0) if a driver, NVRTC and a device are present, else the CPU. Never
    /// panics. [`Gpu::open`] says why a GPU is not usable.
    ///
    /// ```
    /// let b = cufold::Backend::auto();
    /// # let _ = b;
    /// ```
    pub fn auto() -> Backend {
        match Gpu::open(0) {
            Ok(gpu) => Backend::Gpu(gpu),
            Err(_) => Backend::Cpu(Cpu::new()),
        }
    }

    /// Reduces host data: on the GPU (after an upload) or on the CPU. Both compute the same
    /// tree.
    ///
    /// ```
    /// let s = cufold::Backend::Cpu(cufold::Cpu::new()).reduce(&[1u32, 2, 3], cufold::ops::Sum)?;
    /// assert_eq!(s, 6);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce<T: DeviceValue, O: Operator<T>>(&self, x: &[T], op: O) -> Result<O::Out> {
        match self {
            Backend::Gpu(g) => g.reduce_host(x, op),
            Backend::Cpu(c) => c.reduce(x, op),
        }
    }

    /// Scans host data: on the GPU (upload, scan, download) or on the CPU. Both follow the
    /// same canonical grouping.
    ///
    /// ```
    /// use cufold::{ops::Sum, Backend, Cpu, ScanKind};
    /// let s = Backend::Cpu(Cpu::new()).scan(&[1i64, 2, 3], Sum, ScanKind::Inclusive)?;
    /// assert_eq!(s, [1, 3, 6]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        match self {
            Backend::Gpu(g) => g.scan_host(x, op, kind),
            Backend::Cpu(c) => c.scan(x, op, kind),
        }
    }

    /// A line saying which backend this is ("GPU: NVIDIA H100 80GB HBM3", "CPU: 8 threads").
    ///
    /// ```
    /// assert!(cufold::Backend::Cpu(cufold::Cpu::with_threads(2)).describe().starts_with("CPU"));
    /// ```
    pub fn describe(&self) -> String {
        match self {
            Backend::Gpu(g) => format!("GPU: {}", g.device_name()),
            Backend::Cpu(c) => format!("CPU: {} threads", c.threads()),
        }
    }
}
