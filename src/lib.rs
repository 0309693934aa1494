//! # cufold
//!
//! GPU reductions and scans with any associative operator, on
//! [cudarc](https://docs.rs/cudarc) and NVRTC, with results that depend on the input alone —
//! never on the GPU, its launch shape or timing.
//!
//! ```no_run
//! use cufold::{ops, Gpu};
//! let gpu = Gpu::open(0)?; // no driver or device: an Error, never a panic
//! let samples: Vec<f32> = (0..1_000_000).map(|i| (i % 1000) as f32 / 1000.0).collect();
//! let x = gpu.stream().clone_htod(&samples).unwrap();
//! let total: f32 = gpu.reduce(&x, ops::Sum)?;
//! let mean = gpu.reduce(&x, ops::Div2Mean)?;    // the paper's halving mean
//! let best = gpu.reduce(&x, ops::ArgMax)?;      // value and index
//! println!("{total} {mean} {} at {}", best.value, best.index);
//! # Ok::<(), cufold::Error>(())
//! ```
//!
//! Without a GPU, [`Cpu`] runs the same reductions, scans, segmented reductions and scans and
//! Monte Carlo integrations along the same tree and grouping, on the caller's rayon pool, and
//! [`Backend::auto`] picks the GPU when one is usable:
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
//! into the CUDA half, [`transform`] does the same for a map on the way in, and
//! [`DeviceType`] gives your `#[repr(C)]` structs their C++ twins. Operators and maps with
//! fields read them through `&self`: their values travel to the kernel at run time, so one
//! compiled kernel serves every value.
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
//! [`Gpu::new`] works on the caller's `Arc<CudaStream>` (of a cudarc context the caller
//! owns) and buffers. [`Gpu::reduce_into`], [`Reducer::reduce_into`] and every [`Scanner`]
//! method enqueue and return without synchronising, leaving results in device buffers.
//! [`cuda_header`] (or [`cuda_headers`], for NVRTC's header list) exposes the thread-, warp-
//! and block-level building blocks for your own NVRTC kernels.
//!
//! ## Layout
//!
//! One module per primitive, each with its planner, GPU launch and CPU twin side by side:
//! [`reduce`] and [`scan`]. They sit on the GPU core ([`gpu`]: the handle, its options, its
//! scratch memory, kernel generation, NVRTC and the kernel cache) and the CPU core ([`Cpu`]).
//! docs/ARCHITECTURE.md in the repository has the whole map.
#![deny(missing_docs, unreachable_pub, unsafe_op_in_unsafe_fn)]

// The module map (docs/ARCHITECTURE.md has the whole picture):
//   element, ops (+ ops::check), laws    values, operators, their contract and its checks
//   tree                                  the canonical tree and grouping on the CPU
//   gpu (handle, options, scratch, jit, cache), cpu     the two cores
//   reduce, scan                          one module per primitive: plan, GPU launch, CPU twin
//   backend                               host data on whichever core is there
mod backend;
mod cpu;
pub mod dist;
mod element;
mod error;
pub mod gpu;
pub mod laws;
mod macro_support;
pub mod monte_carlo;
pub mod ops;
pub mod random;
pub mod reduce;
pub mod scan;
pub mod segment;
mod tree;

pub use backend::Backend;
pub use cpu::Cpu;
pub use element::{DeviceValue, Element, Real, WideValue, Widen};
pub use error::{Error, ErrorKind, Result};
pub use gpu::{cuda_header, cuda_headers, DiskCache, Gpu, GpuOptions};
pub use half::{bf16, f16};
pub use reduce::Reducer;
pub use scan::{ScanAlgorithm, ScanKind, Scanner};

/// The cudarc crate cufold is built on, re-exported so that your buffers, streams and
/// contexts are the types cufold takes, whatever cudarc your `Cargo.toml` names.
///
/// ```no_run
/// use cufold::cudarc::driver::CudaContext;
/// let ctx = CudaContext::new(0)?;
/// let gpu = cufold::Gpu::new(&ctx.default_stream())?;
/// let x = gpu.stream().clone_htod(&[1.0f32, 2.0])?;
/// assert_eq!(gpu.reduce(&x, cufold::ops::Sum)?, 3.0);
/// # Ok::<(), cufold::Error>(())
/// ```
pub use cudarc;

/// Makes an associative operator from Rust code written once: the CPU half is the code as
/// written, the CUDA half is translated from the same body at compile time.
///
/// **Function form**, when input, accumulator and output are one type: the function
/// becomes a unit struct of the same name implementing [`ops::Operator`], whose `combine`
/// is the body. `identity = EXPR` is required; `commutative` is a claim (documentation and
/// the [`laws`] checker; results never depend on it); `order_free` claims more, that
/// `combine` is exactly associative and commutative on every value, bit for bit (as min,
/// max and integer sums are), which lets reductions use a cheaper schedule with the same
/// bits ([`ops::Operator::ORDER_FREE`]; [`laws::check`] tests it under
/// [`laws::Tolerance::Bits`]); `empty = error` makes an empty input an
/// [`ErrorKind::EmptyInput`] error instead of the identity.
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
/// **Impl form**, on a struct you declare: `fn identity() -> Acc`, `fn combine(a: Acc,
/// b: Acc) -> Acc`, and optionally `fn lift(x: In, index: u64) -> Acc` (default: `In` is
/// `Acc`, unchanged; the index may be left out) and `fn finish(acc: Acc, n: u64) -> Out`
/// (default: the accumulator; `n` may be left out). The functions stay callable as written
/// (as inherent functions, which method calls prefer to the trait's).
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
/// ## Fields and `&self`: run-time parameters
///
/// In the impl form any of the four functions may take `&self` and read the operator's
/// fields, `self.field` (nested structs too: `self.window.lo`). The struct then needs
/// `#[derive(Clone, Copy, cufold::DeviceType)]` and `#[repr(C)]`, and must have no padding
/// bytes (reorder the fields or add explicit ones): its value is the operator's run-time
/// parameters ([`ops::Operator::params`]), sent to every kernel as its bytes. The CUDA struct
/// derives from the parameters' C++ twin and adds no data, so only the *type* is compiled
/// into a kernel: every value of it (a new threshold, scale or window) reuses the compiled
/// kernel, and [`Reducer::with_op`] / [`Scanner::with_op`] swap values without even a cache
/// look-up. `self` is read field by field: `self` alone and `self.method()` are compile
/// errors, as are a struct without [`DeviceType`] and one with padding. An operator whose
/// functions take no `&self` has no parameters, whatever its fields.
///
/// ```
/// use cufold::ops::Operator;
///
/// #[derive(Clone, Copy, cufold::DeviceType)]
/// #[repr(C)]
/// struct Huber { delta: f64 }
///
/// /// The Huber loss of each residual, summed.
/// #[cufold::op(commutative)]
/// impl Huber {
///     fn identity() -> f64 { 0.0 }
///     fn lift(&self, r: f64) -> f64 {
///         let a = r.abs();
///         if a <= self.delta { 0.5 * r * r } else { self.delta * (a - 0.5 * self.delta) }
///     }
///     fn combine(a: f64, b: f64) -> f64 { a + b }
/// }
///
/// let residuals = [0.5, -3.0, 1.0];
/// let cpu = cufold::Cpu::new();
/// assert_eq!(cpu.reduce(&residuals, Huber { delta: 1.0 })?, 0.125 + 2.5 + 0.5);
/// assert_eq!(cpu.reduce(&residuals, Huber { delta: 10.0 })?, 0.125 + 4.5 + 0.5);
/// // One CUDA source for every delta, which travels as the kernel's argument.
/// assert_eq!(Huber { delta: 1.0 }.cuda(), Huber { delta: 10.0 }.cuda());
/// assert_eq!(Huber { delta: 10.0 }.params().bytes(), 10.0f64.to_ne_bytes());
/// # Ok::<(), cufold::Error>(())
/// ```
///
/// [`transform`] does the same for a map on the way in (an [`ops::Transform`]).
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
/// ## Test its laws
///
/// Nothing checks at compile time what an operator claims: that `identity` is an identity,
/// that `combine` is associative, and, with `commutative` or `order_free`, more. A wrong
/// claim compiles and gives wrong results. [`laws::check`] is the test to write for every
/// operator, on samples that exercise its branches (ties, signed zeros, NaN, infinities,
/// the identity's own value):
///
/// ```
/// use cufold::laws::{self, Law, Tolerance};
///
/// #[cufold::op(identity = 0, order_free)]
/// fn bit_or(a: u32, b: u32) -> u32 { a | b }
///
/// // In a #[test] of your crate:
/// laws::check(bit_or, &[0, 1, 6, 1 << 31, u32::MAX], Tolerance::Exact)?;
///
/// // A wrong claim: 1 is no identity of a sum.
/// #[cufold::op(identity = 1, commutative)]
/// fn sum_from_one(a: i64, b: i64) -> i64 { a.wrapping_add(b) }
/// let e = laws::check(sum_from_one, &[2, 3], Tolerance::Exact).unwrap_err();
/// assert_eq!(e.law(), Law::LeftIdentity);
/// # Ok::<(), laws::LawViolation>(())
/// ```
///
/// Debug builds also try the laws on the first eight values of every reduction and scan of
/// the CPU backend ([`Cpu::reduce`], [`Cpu::scan`], [`Cpu::scan_into`],
/// [`Cpu::scan_in_place`]): the identity, and for an `order_free` claim associativity and
/// commutativity, bit for bit, under `laws::check`'s rules. A violation is an
/// [`ErrorKind::InvalidConfig`] error that names the operator, the law and the values. That
/// catches a wrong claim on whatever data a run has; it is no substitute for the test.
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

/// Makes a map on the way into an operator (an [`ops::Transform`], for [`ops::Mapped`])
/// from Rust code written once: `fn apply` as written is the CPU half, its translation the
/// CUDA half.
///
/// It goes on an inherent `impl` block of a struct with one function
/// `fn apply(&self, x: In, index: u64) -> Out` (`&self` and the index may be left out);
/// the struct gets `ops::Transform<In>` with `Out` as its output, and `apply` stays
/// callable as written. Use it with [`ops::Mapped::new`] before any operator, to reduce or
/// scan the images of the inputs in one pass (a transform-reduce, a transform-scan). The
/// body is translated as [`op`]'s are (see there for what is supported).
///
/// **Run-time parameters.** With `&self`, `apply` reads the map's fields (`self.field`,
/// `self.field.sub`): the struct needs `#[derive(Clone, Copy, cufold::DeviceType)]` and
/// `#[repr(C)]` and no padding bytes, and its value travels to every kernel as its bytes
/// ([`ops::Transform::params`]), so one compiled kernel serves every value (a new mean, a
/// new grid spacing). Without `&self` the map has no parameters and may be a unit struct.
/// `self` alone and `self.method()` are compile errors, as for operators.
///
/// ```
/// use cufold::ops::{Mapped, Max, Sum, Transform};
/// use cufold::{Cpu, ScanKind};
///
/// #[derive(Clone, Copy, cufold::DeviceType)]
/// #[repr(C)]
/// struct Standardize { mean: f64, inv_sd: f64 }
///
/// #[cufold::transform]
/// impl Standardize {
///     fn apply(&self, x: f32) -> f64 { (x as f64 - self.mean) * self.inv_sd }
/// }
///
/// /// x -> x * x: no parameters.
/// #[derive(Clone, Copy, Debug, Default)]
/// struct Square;
///
/// #[cufold::transform]
/// impl Square {
///     fn apply(x: f64) -> f64 { x * x }
/// }
///
/// let x = [1.0f32, 3.0, 5.0];
/// let z = Standardize { mean: 3.0, inv_sd: 0.5 };
/// assert_eq!(z.apply(5.0), 1.0); // as written
/// let cpu = Cpu::new();
/// assert_eq!(cpu.reduce(&x, Mapped::new(z, Max))?, 1.0);
/// assert_eq!(cpu.scan(&x, Mapped::new(z, Sum), ScanKind::Inclusive)?, [-1.0, -1.0, 0.0]);
/// assert_eq!(cpu.reduce(&[1.0, 2.0, 3.0], Mapped::new(Square, Sum))?, 14.0);
/// // The value is the kernel's argument, not part of its source.
/// let other = Standardize { mean: -1.0, inv_sd: 2.0 };
/// assert_eq!(z.cuda(), other.cuda());
/// assert_eq!(other.params().bytes().len(), 16);
/// assert!(Square.params().is_none());
/// # Ok::<(), cufold::Error>(())
/// ```
pub use cufold_macros::transform;

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

// The examples of the README and of the user guide, compiled (and those without a GPU run)
// as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/operators.md")]
struct OperatorsGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/scans.md")]
struct ScansGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/segments.md")]
struct SegmentsGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/monte-carlo.md")]
struct MonteCarloGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/many-gpus.md")]
struct ManyGpusGuide;

/// What the code generated by [`op`], [`transform`] and [`DeviceType`] uses. Not a public
/// API.
#[doc(hidden)]
pub mod __private {
    pub use crate::macro_support::*;
}
