//! Sums, products, extremes and their indices.

use super::lanes::{arg_best, extreme_key, min_max_keys};
use super::{device_struct, max2, min2, CudaOp, Operator};
use crate::element::{Element, WideValue, Widen};

/// The sum, in the element type. f16 and bf16 are added in f32 and the sum is rounded to
/// the element type once, at the finish (as PyTorch sums them; a scan rounds each prefix
/// once): [`Element::Calc`].
///
/// **Integers wrap** on overflow, as Rust's `wrapping_add` does (on the CPU and the GPU
/// alike): `Sum` of `[i32::MAX, 1]` is `i32::MIN`, with no error. That keeps the sum in the
/// element type and [order-free](Operator::ORDER_FREE); for a sum that cannot wrap use
/// [`WideSum`] (exact, in 128 bits), and for a mean [`Mean`](super::Mean).
///
/// ```
/// assert_eq!(cufold::Cpu::new().reduce(&[i32::MAX, 1], cufold::ops::Sum)?, i32::MIN);
/// let total: i32 = cufold::Cpu::new().reduce(&[1, 2, 3], cufold::ops::Sum)?;
/// assert_eq!(total, 6);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Sum;

impl<T: Element> Operator<T> for Sum {
    type Acc = T::Calc;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const ORDER_FREE: bool = !T::IS_FLOAT;
    // f64 accumulators read full tiles as lane runs (kernels/ops.cuh, `f64_acc`).
    const LANE_RUNS: bool = T::IS_FLOAT && std::mem::size_of::<T::Calc>() == 8;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "Sum";
    fn identity(&self) -> T::Calc {
        T::Calc::zero()
    }
    fn lift(&self, x: T, _: u64) -> T::Calc {
        x.to_calc()
    }
    fn combine(&self, a: T::Calc, b: T::Calc) -> T::Calc {
        a.add(b)
    }
    fn finish(&self, acc: T::Calc, _: u64) -> T {
        T::from_calc(acc)
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("Sum")
    }
}

/// The product, in the element type (f16 and bf16 multiplied in f32 and rounded once, at
/// the finish: [`Element::Calc`]).
///
/// **Integers wrap** on overflow, as Rust's `wrapping_mul` does (on the CPU and the GPU
/// alike): the result is the true product modulo 2^bits, with no error.
///
/// ```
/// assert_eq!(cufold::Cpu::new().reduce(&[1u8 << 4, 1 << 4, 3], cufold::ops::Prod)?, 0);
/// let p: u64 = cufold::Cpu::new().reduce(&[2u64, 3, 7], cufold::ops::Prod)?;
/// assert_eq!(p, 42);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Prod;

impl<T: Element> Operator<T> for Prod {
    type Acc = T::Calc;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const ORDER_FREE: bool = !T::IS_FLOAT;
    const LANE_RUNS: bool = <Sum as Operator<T>>::LANE_RUNS;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "Prod";
    fn identity(&self) -> T::Calc {
        T::Calc::one()
    }
    fn lift(&self, x: T, _: u64) -> T::Calc {
        x.to_calc()
    }
    fn combine(&self, a: T::Calc, b: T::Calc) -> T::Calc {
        a.mul(b)
    }
    fn finish(&self, acc: T::Calc, _: u64) -> T {
        T::from_calc(acc)
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("Prod")
    }
}

/// The sum accumulated in the wider type of [`Widen`], which is also the output: f16/bf16
/// in f32, f32 in f64, f64 in f64, and integers **exactly** in 128 bits (i32, i64 → i128;
/// u8, u32, u64 → u128).
///
/// No integer `WideSum` wraps: a sum of at most 2^64 - 1 elements of 64 bits or fewer stays
/// within 128 bits (|sum| ≤ 2^127 for i64, < 2^128 for u64), so the result is the true sum,
/// and integer `WideSum`s are [order-free](Operator::ORDER_FREE), as [`Sum`] of integers
/// is. Scans of it give 128-bit prefixes. Floating-point sums are rounded along the
/// canonical tree.
///
/// ```
/// let s: f64 = cufold::Cpu::new().reduce(&[1e8f32, 1.0, -1e8], cufold::ops::WideSum)?;
/// assert_eq!(s, 1.0);
/// let s: u128 = cufold::Cpu::new().reduce(&[u64::MAX, 1], cufold::ops::WideSum)?;
/// assert_eq!(s, 1 << 64); // Sum would wrap to 0
/// let s: i128 = cufold::Cpu::new().reduce(&[i32::MIN, i32::MIN], cufold::ops::WideSum)?;
/// assert_eq!(s, -(1 << 32));
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct WideSum;

impl<T: Widen> Operator<T> for WideSum {
    type Acc = T::Wide;
    type Out = T::Wide;
    const COMMUTATIVE: bool = true;
    const ORDER_FREE: bool = !T::IS_FLOAT;
    const LANE_RUNS: bool = T::IS_FLOAT && std::mem::size_of::<T::Wide>() == 8;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "WideSum";
    fn identity(&self) -> T::Wide {
        T::Wide::wide_zero()
    }
    fn lift(&self, x: T, _: u64) -> T::Wide {
        x.widen()
    }
    fn combine(&self, a: T::Wide, b: T::Wide) -> T::Wide {
        a.wide_add(b)
    }
    fn finish(&self, acc: T::Wide, _: u64) -> T::Wide {
        acc
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("WideSum")
    }
}

/// The minimum; NaN propagates (see the [module docs](crate::ops)). Empty input: an error.
///
/// ```
/// let m: f32 = cufold::Cpu::new().reduce(&[3.0f32, -1.0, 2.0], cufold::ops::Min)?;
/// assert_eq!(m, -1.0);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Min;

impl<T: Element> Operator<T> for Min {
    type Acc = T;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const ORDER_FREE: bool = true;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "Min";
    fn identity(&self) -> T {
        T::highest()
    }
    fn lift(&self, x: T, _: u64) -> T {
        x
    }
    fn combine(&self, a: T, b: T) -> T {
        min2(a, b)
    }
    #[inline(always)]
    fn full_leaf(&self, xs: &[T], _: u64) -> Option<T> {
        Some(T::from_min_lane_key(extreme_key::<T, false>(
            xs,
            T::min_lane_key,
        )))
    }
    fn finish(&self, acc: T, _: u64) -> T {
        acc
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("Min")
    }
}

/// The maximum; NaN propagates (see the [module docs](crate::ops)). Empty input: an error.
///
/// ```
/// let m: i64 = cufold::Cpu::new().reduce(&[3i64, -1, 2], cufold::ops::Max)?;
/// assert_eq!(m, 3);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Max;

impl<T: Element> Operator<T> for Max {
    type Acc = T;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const ORDER_FREE: bool = true;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "Max";
    fn identity(&self) -> T {
        T::lowest()
    }
    fn lift(&self, x: T, _: u64) -> T {
        x
    }
    fn combine(&self, a: T, b: T) -> T {
        max2(a, b)
    }
    #[inline(always)]
    fn full_leaf(&self, xs: &[T], _: u64) -> Option<T> {
        Some(T::from_max_lane_key(extreme_key::<T, true>(
            xs,
            T::max_lane_key,
        )))
    }
    fn finish(&self, acc: T, _: u64) -> T {
        acc
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("Max")
    }
}

/// The smallest and largest element, the output of [`MinMax`].
///
/// ```
/// let r = cufold::Cpu::new().reduce(&[3u8, 9, 1], cufold::ops::MinMax)?;
/// assert_eq!((r.min, r.max), (1, 9));
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct MinMaxValue<T> {
    /// The minimum.
    pub min: T,
    /// The maximum.
    pub max: T,
}
device_struct!(MinMaxValue, "MinMaxV", Element, dense = T::DENSE);

/// Minimum and maximum in one pass; NaN propagates into both. Empty input: an error.
///
/// ```
/// let r = cufold::Cpu::new().reduce(&[0.5f64, -2.0, 7.0], cufold::ops::MinMax)?;
/// assert_eq!((r.min, r.max), (-2.0, 7.0));
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MinMax;

impl<T: Element> Operator<T> for MinMax {
    type Acc = MinMaxValue<T>;
    type Out = MinMaxValue<T>;
    const COMMUTATIVE: bool = true;
    const ORDER_FREE: bool = true;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "MinMax";
    fn identity(&self) -> Self::Acc {
        MinMaxValue {
            min: T::highest(),
            max: T::lowest(),
        }
    }
    fn lift(&self, x: T, _: u64) -> Self::Acc {
        MinMaxValue { min: x, max: x }
    }
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
        MinMaxValue {
            min: min2(a.min, b.min),
            max: max2(a.max, b.max),
        }
    }
    #[inline(always)]
    fn full_leaf(&self, xs: &[T], _: u64) -> Option<Self::Acc> {
        let (lo, hi) = min_max_keys(xs);
        Some(MinMaxValue {
            min: T::from_min_lane_key(lo),
            max: T::from_max_lane_key(hi),
        })
    }
    fn finish(&self, acc: Self::Acc, _: u64) -> Self::Out {
        acc
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("MinMax")
    }
}

/// A value and its index in the input: the output of [`ArgMin`] and [`ArgMax`].
///
/// ```
/// let best = cufold::Cpu::new().reduce(&[1.0f32, 5.0, 5.0, 2.0], cufold::ops::ArgMax)?;
/// assert_eq!((best.value, best.index), (5.0, 1)); // ties: the lowest index
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Indexed<T> {
    /// The element.
    pub value: T,
    /// Its position in the input.
    pub index: u64,
}
device_struct!(
    Indexed,
    "Indexed",
    Element,
    dense = T::DENSE && std::mem::size_of::<T>() == 8
);

fn arg_combine<T: Element>(a: Indexed<T>, b: Indexed<T>, max: bool) -> Indexed<T> {
    let (an, bn) = (a.value.is_nan_value(), b.value.is_nan_value());
    let lower = if b.index < a.index { b } else { a };
    if an || bn {
        return if an && bn {
            lower
        } else if an {
            a
        } else {
            b
        };
    }
    let (b_wins, a_wins) = if max {
        (a.value < b.value, b.value < a.value)
    } else {
        (b.value < a.value, a.value < b.value)
    };
    if b_wins {
        b
    } else if a_wins {
        a
    } else {
        lower
    }
}

macro_rules! arg_op {
    ($name:ident, $max:expr, $doc:literal, $example:literal) => {
        #[doc = $doc]
        ///
        /// NaN wins (the first NaN's index is reported); among equal values the lowest index
        /// wins. Empty input: an error.
        ///
        /// ```
        #[doc = $example]
        /// # Ok::<(), cufold::Error>(())
        /// ```
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl<T: Element> Operator<T> for $name {
            type Acc = Indexed<T>;
            type Out = Indexed<T>;
            const COMMUTATIVE: bool = true;
            const ORDER_FREE: bool = true;
            const EMPTY_IS_ERROR: bool = true;
            const NAME: &'static str = stringify!($name);
            fn identity(&self) -> Self::Acc {
                Indexed {
                    value: if $max { T::lowest() } else { T::highest() },
                    index: u64::MAX,
                }
            }
            fn lift(&self, x: T, index: u64) -> Self::Acc {
                Indexed { value: x, index }
            }
            fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
                arg_combine(a, b, $max)
            }
            #[inline(always)]
            fn full_leaf(&self, xs: &[T], first: u64) -> Option<Self::Acc> {
                let at = if $max {
                    arg_best(xs, T::arg_max_key)
                } else {
                    arg_best(xs, T::arg_min_key)
                };
                Some(Indexed {
                    value: xs[at],
                    index: first + at as u64,
                })
            }
            fn finish(&self, acc: Self::Acc, _: u64) -> Self::Out {
                acc
            }
            fn cuda(&self) -> CudaOp {
                CudaOp::builtin::<T>(stringify!($name))
            }
        }
    };
}

arg_op!(
    ArgMax,
    true,
    "The largest element and its index.",
    "let m = cufold::Cpu::new().reduce(&[4i32, 9, 9, 1], cufold::ops::ArgMax)?;\nassert_eq!((m.value, m.index), (9, 1));"
);
arg_op!(
    ArgMin,
    false,
    "The smallest element and its index.",
    "let m = cufold::Cpu::new().reduce(&[4i32, 1, 9, 1], cufold::ops::ArgMin)?;\nassert_eq!((m.value, m.index), (1, 1));"
);
