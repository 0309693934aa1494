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
//! and a finish (accumulator and count to output), with a CPU half and a CUDA C++ half. See
//! [`ops`] for the built-in ones and what each returns for N = 0.
//!
//! Write your own once, in Rust: [`op`] keeps the code as the CPU half and translates it
//! into the CUDA half, and [`DeviceType`] gives your `#[repr(C)]` structs their C++ twins.
//! [`laws::check`] tests an operator's identity, associativity and commutativity claims on
//! sample values.
//!
//! ```
//! #[derive(Clone, Copy, cufold::DeviceType)]
//! #[repr(C)]
//! struct Interval { lo: f64, hi: f64 }
//!
//! /// The smallest interval holding both.
//! #[cufold::op(identity = Interval { lo: f64::INFINITY, hi: f64::NEG_INFINITY }, commutative)]
//! fn hull(a: Interval, b: Interval) -> Interval {
//!     Interval { lo: a.lo.min(b.lo), hi: a.hi.max(b.hi) }
//! }
//!
//! let xs: Vec<Interval> = [3.0, -1.0, 7.5].iter().map(|&v| Interval { lo: v, hi: v }).collect();
//! let h = cufold::Backend::auto().reduce(&xs, hull)?; // the GPU if there is one
//! assert_eq!((h.lo, h.hi), (-1.0, 7.5));
//! cufold::laws::check(hull, &xs, cufold::laws::Tolerance::Exact).unwrap();
//! # Ok::<(), cufold::Error>(())
//! ```
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
pub mod laws;
mod macro_support;
pub mod ops;
pub mod plan;
pub mod random;
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

/// Makes an associative operator from Rust code written once: the CPU half is the code as
/// written, the CUDA half is translated from the same body at compile time.
///
/// **Function form**, when input, accumulator and output are one type: the function
/// becomes a unit struct of the same name implementing [`ops::Operator`], whose `combine`
/// is the body. `identity = EXPR` is required; `commutative` is a claim (documentation and
/// the [`laws`] checker; results never depend on it); `empty = error` makes an empty input
/// an [`ErrorKind::EmptyInput`] error instead of the identity.
///
/// ```
/// #[derive(Clone, Copy, cufold::DeviceType)]
/// #[repr(C)]
/// struct Affine { a: f32, b: f32 }
///
/// /// x -> a*x + b, composed left to right (not commutative).
/// #[cufold::op(identity = Affine { a: 1.0, b: 0.0 })]
/// fn compose(f: Affine, g: Affine) -> Affine {
///     Affine { a: g.a * f.a, b: g.a * f.b + g.b }
/// }
///
/// let maps = [Affine { a: 2.0, b: 0.0 }, Affine { a: 1.0, b: 3.0 }]; // double, then add 3
/// let f = cufold::Cpu::new().reduce(&maps, compose)?;
/// assert_eq!((f.a, f.b), (2.0, 3.0));
/// # Ok::<(), cufold::Error>(())
/// ```
///
/// **Impl form**, on a unit struct you declare: `fn identity() -> Acc`, `fn combine(a: Acc,
/// b: Acc) -> Acc`, and optionally `fn lift(x: In, index: u64) -> Acc` (default: `In` is
/// `Acc`, unchanged; the index may be left out) and `fn finish(acc: Acc, n: u64) -> Out`
/// (default: the accumulator; `n` may be left out). The functions stay callable as written.
///
/// ```
/// #[derive(Clone, Copy, cufold::DeviceType)]
/// #[repr(C)]
/// struct Best { value: f32, pad: u32, index: u64 }
///
/// /// The largest value and the lowest index where it occurs.
/// #[derive(Clone, Copy, Debug, Default)]
/// struct ArgMaxTies;
///
/// #[cufold::op(commutative, empty = error)]
/// impl ArgMaxTies {
///     fn identity() -> Best { Best { value: f32::NEG_INFINITY, pad: 0, index: u64::MAX } }
///     fn lift(x: f32, index: u64) -> Best { Best { value: x, pad: 0, index } }
///     fn combine(a: Best, b: Best) -> Best {
///         if b.value > a.value || (b.value == a.value && b.index < a.index) { b } else { a }
///     }
///     fn finish(best: Best, _n: u64) -> u64 { best.index }
/// }
///
/// assert_eq!(cufold::Cpu::new().reduce(&[1.0f32, 7.0, 3.0, 7.0], ArgMaxTies)?, 1);
/// # Ok::<(), cufold::Error>(())
/// ```
///
/// ## What is translated
///
/// Literals and constants (`f32::INFINITY`, `u64::MAX`, `std::f64::consts::PI`, your own
/// `const`s of number types: their values are printed exactly), `+ - * / %` (integers
/// wrap, as Rust's release builds do), comparisons, `&& || !`, `& | ^ << >>` on integers,
/// `as` casts between primitive number types (float to integer saturates, NaN gives 0),
/// `let` (shadowing included; `let mut` and `=`, `+=`, ... on locals and their fields),
/// `if`/`else` and blocks as values, `return` statements, struct literals and field access
/// of [`DeviceType`] structs and cufold's value types, and these methods (also callable as
/// `f32::max(a, b)`): `abs sqrt cbrt exp exp2 exp_m1 ln ln_1p log2 log10 log powi powf sin
/// cos tan asin acos atan atan2 sinh cosh tanh hypot mul_add floor ceil round
/// round_ties_even trunc fract recip to_degrees to_radians signum copysign min max clamp
/// rem_euclid div_euclid is_nan is_finite is_infinite is_sign_negative is_sign_positive
/// to_bits`; on integers `count_ones count_zeros leading_zeros trailing_zeros rotate_left
/// rotate_right swap_bytes reverse_bits is_power_of_two pow wrapping_add wrapping_sub
/// wrapping_mul wrapping_neg wrapping_abs wrapping_pow wrapping_shl wrapping_shr
/// saturating_add saturating_sub abs_diff is_positive is_negative`; on f16 / bf16
/// `to_f32 to_f64 max min signum copysign` and `f16::from_f32`; `T::from(x)` and
/// `T::from_bits(b)`.
///
/// f16 and bf16 are computed through f32 and rounded after each operation, like the
/// `half` crate. Unsuffixed literals take the type of what they meet, as in Rust
/// (`x * 0.5` with `x: f32` multiplies by `0.5f32`).
///
/// Loops, `match`, closures, calls of other functions or methods, macros, references,
/// tuples and arrays are compile errors that point at the construct and say what is
/// supported; a body reports all of them at once.
///
/// ## Same bits on the GPU and the CPU
///
/// Operators built from `+ - * /`, comparisons, `min`/`max`, casts, bit operations and
/// `mul_add` give the same bits on both halves (kernels are compiled without contraction,
/// and the reduction tree is the same). CUDA's `exp`, `ln`, `powf`, `sin`, ... differ from
/// the host's libm by a few ulps. `f32::max`/`min` with one `+0.0` and one `-0.0` may return
/// either zero (Rust leaves it unspecified). Integer overflow panics in a debug build of
/// the CPU half and wraps on the GPU; integer division by zero is undefined on the GPU.
pub use cufold_macros::op;

/// Derives the CUDA twin of a `#[repr(C)]` struct with named fields, so that it can be an
/// operator's input, accumulator or output: implements [`DeviceValue`] (with a C++ struct
/// of the same fields, guarded by a `static_assert` on size and alignment), cudarc's
/// `DeviceRepr` and `ValidAsZeroBits`, `Debug`, and [`laws::Approx`] (field by field).
///
/// Fields may be f32, f64, f16, bf16, i32, i64, u32, u64, u8, cufold's value types
/// ([`ops::Affine<f32>`](ops::Affine), [`ops::Indexed<f64>`](ops::Indexed), ...) or other
/// `DeviceType` structs. Refused at compile time, with the reason: missing `#[repr(C)]`,
/// `packed`, enums, unions, tuple structs, generics, and field types with no CUDA twin
/// (`bool`, `usize`, references, tuples, arrays, `Vec`, ...).
///
/// The derive writes `Debug` itself (as `#[derive(Debug)]` would): do not derive both.
/// Derive `Clone` and `Copy` beside it.
///
/// ```
/// use cufold::DeviceValue;
///
/// #[derive(Clone, Copy, cufold::DeviceType)]
/// #[repr(C)]
/// struct Lse { max: f32, sum: f32 }
///
/// #[derive(Clone, Copy, cufold::DeviceType)]
/// #[repr(C)]
/// struct Pair { x: Lse, map: cufold::ops::Affine<f64> }
///
/// let decl = Pair::cuda_decl();
/// assert!(decl.find(&Lse::cuda_name()).unwrap() < decl.find(&Pair::cuda_name()).unwrap());
/// assert!(decl.contains("cf::Affine<double> map;"));
/// assert_eq!(format!("{:?}", Lse { max: 1.0, sum: 2.0 }), "Lse { max: 1.0, sum: 2.0 }");
/// ```
pub use cufold_macros::DeviceType;

/// What the code generated by [`op`] and [`DeviceType`] uses. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::macro_support::*;
}

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
