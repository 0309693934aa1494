//! Associative operators: the trait and the built-in operators.
//!
//! An operator is a monoid with a lift and a finish, written once for the CPU (the trait's
//! methods) and once for CUDA (the C++ struct named by [`Operator::cuda`]); the two halves
//! compute the same bits for everything built from `+ - * /`, min, max and comparisons.
//!
//! | operator | input | accumulator | output | N = 0 |
//! |---|---|---|---|---|
//! | [`Sum`], [`Prod`] | any [`Element`] | same | same (**wrapping** for integers) | 0, 1 |
//! | [`WideSum`] | any [`Widen`](crate::Widen) | [`Widen::Wide`](crate::Widen::Wide): f32, f64, or i128 / u128 (exact) for integers | same | 0 |
//! | [`Min`], [`Max`] | any [`Element`] | same | same (NaN propagates) | error |
//! | [`MinMax`] | any [`Element`] | [`MinMaxValue`] | same | error |
//! | [`ArgMin`], [`ArgMax`] | any [`Element`] | [`Indexed`] | same (ties: lowest index) | error |
//! | [`Mean`] | any [`Widen`](crate::Widen) | [`Widen::Wide`](crate::Widen::Wide) (exact for integers) | f64 (integers: correctly rounded) | error |
//! | [`MeanVar`] | any [`Element`] | [`MeanVarValue`] | same | error |
//! | [`Div2Mean`] | f32, f64 | same | same | error |
//! | [`ExactSum`] | f32, f64, f16, bf16 | [`ExactAcc`] (exact) | same type, correctly rounded | 0 |
//! | [`ExactMean`] | f32, f64, f16, bf16 | [`ExactAcc`] (exact) | same type, correctly rounded | error |
//! | [`CompensatedSum`] | f32, f64, f16, bf16 | [`DoubleWord`] (f32 words; f64 for f64) | same type | 0 |
//! | [`Compose`] | [`Affine<R>`] | same | same (not commutative) | identity map |
//! | [`MatMul`] | [`Mat2<R>`] | same | same (not commutative) | identity matrix |
//! | [`Mapped`] | a [`Transform`]'s input | the operator's | the operator's | the operator's |
//!
//! **Integer overflow.** [`Sum`] and [`Prod`] of integers wrap, as Rust's `wrapping_add`
//! and `wrapping_mul` do, on every backend and with no error: `Sum` of `[u8::MAX, 1]` is 0.
//! This is the documented integer semantics (it keeps them in the element type and
//! order-free), not an accident of the GPU. Where the value itself is wanted, [`WideSum`]
//! adds integers exactly in 128 bits and [`Mean`] divides that exact sum, rounding once
//! ([`round_ratio_to_f64`]); neither wraps, for any input of fewer than 2^64 elements.
//!
//! ```
//! use cufold::{ops, Cpu};
//! assert_eq!(Cpu::new().reduce(&[u8::MAX, 1], ops::Sum)?, 0); // wraps
//! assert_eq!(Cpu::new().reduce(&[u8::MAX, 1], ops::WideSum)?, 256u128); // exact
//! assert_eq!(Cpu::new().reduce(&[i64::MAX, i64::MAX], ops::Mean)?, 2f64.powi(63));
//! # Ok::<(), cufold::Error>(())
//! ```
//!
//! **Scans.** Every operator but [`Div2Mean`] can be scanned: the output at position `i` is
//! `finish(prefix, count)` with the prefix of the `count` elements before it (exclusive)
//! or up to and including it (inclusive), so a [`Mean`] scan is the running mean and an
//! [`ArgMax`] scan the running argmax. An exclusive scan's first output is
//! `finish(identity, 0)` (for [`Mean`], 0/0 = NaN; for [`Max`], the lowest value).
//!
//! **NaN and signed zeros.** [`Min`], [`Max`], [`MinMax`], [`ArgMin`] and [`ArgMax`]
//! propagate NaN as NumPy and PyTorch do: if any input is NaN the result is NaN (for the
//! arg- operators, the index of the first NaN). `Min` and `Max` order `-0.0` below `0.0`, as
//! IEEE 754-2019's `minimum` and `maximum` do: `Max` of `[-0.0, 0.0]` and of `[0.0, -0.0]` is
//! `0.0`, `Min` of either is `-0.0`, whatever the order. This is a choice, kept on purpose:
//! NumPy and PyTorch return one of the two zeros by position, not by sign, and not the same
//! one everywhere (measured with NumPy 2.5.2 and PyTorch 2.11 on an H200: NumPy's `max` and
//! `min` return the later zero, as do PyTorch's on CUDA and on short CPU inputs, but
//! PyTorch's CPU reductions of 2^21 elements return the earlier one, and its CPU
//! `maximum(a, b)` returns `a`). Following them would make the result depend on the order of
//! combination, which the canonical tree fixes only for operators that need it; the sign
//! rule makes `Max` and `Min` order-free, so the GPU may use any schedule and still return
//! the CPU's bits. `ArgMin` and `ArgMax` treat the two zeros as
//! equal and report the lowest index. Over several different NaNs (payloads or signs, rare in
//! practice) `Max` returns the greatest under a total order of the bit patterns that puts
//! every NaN above `+inf` (negative NaNs above positive ones) and `Min` the least under one
//! that puts every NaN below `-inf` (positive NaNs below negative ones): which NaN comes back
//! depends on the values only. These rules make the five operators
//! [order-free](Operator::ORDER_FREE): every order of combination gives the same bits, and
//! the GPU folds each thread's elements through the same keys with one integer comparison
//! each.

use crate::element::{DeviceValue, Element};

mod basic;
pub(crate) mod check;
mod compensated;
mod exact;
mod lanes;
mod mapped;
mod ordered;
mod params;
mod ratio;
mod stats;

pub use basic::{ArgMax, ArgMin, Indexed, Max, Min, MinMax, MinMaxValue, Prod, Sum, WideSum};
pub use compensated::{CompensatedSum, CompensatedWord, DoubleWord};
pub use exact::{ExactAcc, ExactFloat, ExactMean, ExactSum};
pub use mapped::{cuda_f64, Identity, Mapped, Transform};
pub use ordered::{Affine, Compose, Mat2, MatMul};
pub(crate) use params::ParamBlob;
pub use params::{OpParams, MAX_PARAM_BYTES};
pub use ratio::{round_ratio_to_f64, round_ratio_to_f64_unsigned};
pub use stats::{Div2Mean, Mean, MeanVar, MeanVarValue};

/// The CUDA half of an operator: a C++ type with `In`, `Acc` and `Out` typedefs and the
/// `identity`, `lift`, `combine` and `finish` device member functions, default-constructible.
///
/// ```
/// use cufold::ops::{CudaOp, Operator, Sum};
/// let op: CudaOp = <Sum as Operator<f32>>::cuda(&Sum);
/// assert_eq!(op.type_name, "cf::Sum<float>");
/// assert!(op.source.is_empty()); // built-in: defined in kernels/ops.cuh
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CudaOp {
    /// The C++ type expression of the operator, such as `cf::Sum<float>`.
    pub type_name: String,
    /// C++ definitions the type needs, placed before the kernel (empty for built-ins).
    pub source: String,
}

impl CudaOp {
    /// A built-in operator template of kernels/ops.cuh, instantiated for `T`.
    pub(crate) fn builtin<T: DeviceValue>(template: &str) -> Self {
        CudaOp {
            type_name: format!("cf::{template}<{}>", T::cuda_name()),
            source: String::new(),
        }
    }
}

/// An associative operator over inputs of type `In`: a monoid (`identity`, `combine`) with
/// a `lift` from input elements and a `finish` to the output.
///
/// # Contract
///
/// - `combine` is associative, and `identity` is a true identity: `combine(identity, a)`
///   and `combine(a, identity)` equal `a`, and `combine(identity, identity)` is
///   `identity` bit for bit. cufold never relies on commutativity: elements are combined in
///   index order, always along the same tree (see the crate docs), so a non-commutative
///   operator gets its ordered product.
/// - The CPU methods and the C++ struct of [`cuda`](Operator::cuda) compute the same thing;
///   when they use only `+ - * /`, min, max and comparisons the bits agree exactly (kernels
///   are compiled without fused multiply-add contraction).
///
/// ```
/// use cufold::ops::{Operator, Sum};
/// let op = Sum;
/// let acc = Operator::<f32>::combine(&op, op.lift(2.0f32, 0), op.lift(3.0f32, 1));
/// assert_eq!(<Sum as Operator<f32>>::finish(&op, acc, 2), 5.0);
/// ```
pub trait Operator<In: DeviceValue>: Copy + Send + Sync + 'static {
    /// What is combined.
    type Acc: DeviceValue;
    /// What the caller gets back.
    type Out: DeviceValue;
    /// Whether `combine` is commutative. Documentation and fast paths only: correctness
    /// never depends on it.
    const COMMUTATIVE: bool;
    /// Whether `combine` is **order-free**: exactly associative and commutative on every
    /// value, bit for bit (signed zeros and NaN payloads included), with `identity` an exact
    /// identity, so that every order and grouping of the combines gives the same bits. The
    /// planner then reduces with long per-thread runs and one tree at the end instead of the
    /// canonical tree (a cheaper schedule, the same result). Min, Max, MinMax, ArgMin and
    /// ArgMax are order-free, and so are Sum and Prod over integers (wrapping arithmetic),
    /// WideSum and Mean over integers (exact 128-bit sums), and ExactSum and ExactMean
    /// (exact sums of floats); other floating-point sums are not.
    /// [`laws::check`](crate::laws::check) tests the claim bit for bit;
    /// `#[cufold::op(order_free)]` makes it.
    ///
    /// ```
    /// use cufold::ops::{Max, Operator, Sum};
    /// assert!(<Max as Operator<f32>>::ORDER_FREE && <Sum as Operator<i32>>::ORDER_FREE);
    /// assert!(!<Sum as Operator<f32>>::ORDER_FREE);
    /// ```
    const ORDER_FREE: bool = false;
    /// Whether an empty input is an error ([`ErrorKind::EmptyInput`](crate::ErrorKind))
    /// rather than `finish(identity, 0)`.
    const EMPTY_IS_ERROR: bool;
    /// A short name for messages (see [`Operator::name`]).
    const NAME: &'static str;
    /// The name messages use: [`NAME`](Operator::NAME), unless the operator is made of
    /// others and says which ([`Mapped`]: `"Mapped<Square, Sum>"`, from its map's type and
    /// its operator's name). Called only to build messages.
    ///
    /// ```
    /// use cufold::ops::{Identity, Mapped, Operator, Sum};
    /// assert_eq!(<Sum as Operator<f32>>::name(), "Sum");
    /// assert_eq!(<Mapped<Identity, Sum> as Operator<f32>>::name(), "Mapped<Identity, Sum>");
    /// ```
    fn name() -> String {
        Self::NAME.to_string()
    }
    /// Whether prefixes of this operator mean something, so that it may be scanned (true
    /// unless `combine` is associative only on the balanced tree, as [`Div2Mean`]'s is).
    /// Scanning an operator that says false is an [`ErrorKind::InvalidConfig`](crate::ErrorKind)
    /// error.
    const SCANNABLE: bool = true;
    /// Whether the operator's CUDA struct reads whole tiles as lane runs (its `static
    /// constexpr bool LANE_RUNS = true`, kernels/reduce.cuh), as [`MeanVar`],
    /// [`CompensatedSum`] and the float sums with f64 accumulators do, whose combines (or
    /// shuffles) are dear: the reducer then takes blocks of at
    /// most 128 threads and 8 loads a thread, whose tiles fit the shared-memory ring that
    /// copies each tile in while the tile before is joined. A hint for speed only; the bits do
    /// not depend on it.
    #[doc(hidden)]
    const LANE_RUNS: bool = false;
    /// The identity element of `combine`.
    fn identity(&self) -> Self::Acc;
    /// The accumulator of one input element at position `index` (counted from the start of
    /// the slice or view being reduced or scanned).
    fn lift(&self, x: In, index: u64) -> Self::Acc;
    /// Combines two adjacent accumulators, `a` covering lower indices than `b`.
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// `combine` where `a` and `b` are the trees of two sibling subtrees of equal size whose
    /// positions are all present (the inside of a full block of the canonical tree): it must
    /// return `combine(a, b)`'s bits, and may skip the checks that only other nodes need
    /// (empty sides, unequal counts). The default is `combine`. The CPU backend uses it for
    /// full leaf blocks, the GPU (`combine_full` of the C++ half, where present) inside full
    /// tiles.
    ///
    /// ```
    /// use cufold::ops::{MeanVar, MeanVarValue, Operator};
    /// let a = MeanVarValue { count: 2.0, mean: 1.0, m2: 0.5 };
    /// let b = MeanVarValue { count: 2.0, mean: 3.0, m2: 0.5 };
    /// let full = <MeanVar as Operator<f32>>::combine_full(&MeanVar, a, b);
    /// let plain = <MeanVar as Operator<f32>>::combine(&MeanVar, a, b);
    /// assert_eq!(full, plain);
    /// ```
    #[inline(always)]
    fn combine_full(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
        self.combine(a, b)
    }
    /// Hidden: the tree over `xs`, whose count is a power of two (at most 4096) and whose
    /// positions are `first..` and all present, computed by a leaf of the operator's own
    /// (vectorisable: the built-in operators' lanes), or `None` for the generic leaf. It must
    /// return the bits of the canonical tree over `lift(xs[i], first + i)` with
    /// `combine_full` (for an order-free operator, of any grouping). The CPU backend calls
    /// it for each full leaf of a reduction; the default is `None`.
    #[doc(hidden)]
    #[inline(always)]
    fn full_leaf(&self, xs: &[In], first: u64) -> Option<Self::Acc> {
        let _ = (xs, first);
        None
    }
    /// The output for the accumulator of all `n` elements.
    fn finish(&self, acc: Self::Acc, n: u64) -> Self::Out;
    /// The CUDA half.
    fn cuda(&self) -> CudaOp;
    /// The run-time parameters the CUDA half is built from in every kernel (the bytes of
    /// its struct); the default, [`OpParams::none`], default-constructs it. Operators whose
    /// values differ only here share one compiled kernel.
    ///
    /// ```
    /// use cufold::ops::{Operator, Sum};
    /// assert!(<Sum as Operator<f32>>::params(&Sum).is_none());
    /// ```
    fn params(&self) -> OpParams {
        OpParams::none()
    }
}

/// A type's name without its module paths (`a::B<c::D>` is `B<D>`), for messages.
pub(crate) fn short_type_name<T: ?Sized>() -> String {
    let full = std::any::type_name::<T>();
    let mut out = String::with_capacity(full.len());
    let mut word = String::new();
    for c in full.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            out.push_str(word.rsplit("::").next().unwrap_or(""));
            word.clear();
            out.push(c);
        }
    }
    out.push_str(word.rsplit("::").next().unwrap_or(""));
    out
}

/// NaN-propagating minimum, order-free: the lesser under [`Element::min_key`]'s total order
/// (numbers in order, `-0.0` below `0.0`, every NaN below `-inf`), so `min2(a, b)` and
/// `min2(b, a)` have the same bits.
pub(crate) fn min2<T: Element>(a: T, b: T) -> T {
    if b.min_key() < a.min_key() {
        b
    } else {
        a
    }
}

/// NaN-propagating maximum, order-free: the greater under [`Element::max_key`]'s total order
/// (numbers in order, `0.0` above `-0.0`, every NaN above `+inf`).
pub(crate) fn max2<T: Element>(a: T, b: T) -> T {
    if a.max_key() < b.max_key() {
        b
    } else {
        a
    }
}

/// Implements `DeviceValue` (and cudarc's marker traits) for a `#[repr(C)]` struct generic
/// over one parameter, whose C++ twin is the template `cf::$cuda<T>`.
macro_rules! device_struct {
    ($name:ident, $cuda:literal, $bound:path, dense = $dense:expr) => {
        // SAFETY: #[repr(C)] with the fields of the C++ template in the same order.
        unsafe impl<T: $bound> cudarc::driver::DeviceRepr for $name<T> {}
        // SAFETY: every field is a number for which all-zero bits are valid.
        unsafe impl<T: $bound> cudarc::driver::ValidAsZeroBits for $name<T> {}
        // SAFETY: #[repr(C)] with the fields of the C++ template in the same order.
        unsafe impl<T: $bound> $crate::element::DeviceValue for $name<T> {
            const DENSE: bool = $dense;
            fn cuda_name() -> String {
                format!(concat!("cf::", $cuda, "<{}>"), T::cuda_name())
            }
        }
    };
}
pub(crate) use device_struct;
