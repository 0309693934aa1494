//! Non-commutative operators: they prove that order is kept.

use super::{device_struct, CudaOp, Operator};
use crate::element::Real;

/// The affine map `x -> a*x + b`.
///
/// ```
/// let f = cufold::ops::Affine { a: 2.0f64, b: 1.0 };
/// assert_eq!(f.apply(3.0), 7.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Affine<T> {
    /// The slope.
    pub a: T,
    /// The offset.
    pub b: T,
}
device_struct!(Affine, "Affine", Real, dense = T::DENSE);

impl<T: Real> Affine<T> {
    /// `a * x + b`.
    ///
    /// ```
    /// assert_eq!(cufold::ops::Affine { a: 0.5f32, b: 1.0 }.apply(4.0), 3.0);
    /// ```
    pub fn apply(&self, x: T) -> T {
        self.a * x + self.b
    }
}

/// Composition of affine maps in sequence order: the reduction of `f0, f1, ..., fn-1` is
/// the map that applies `f0` first and `fn-1` last, so `combine(f, g) = g ∘ f`,
/// `(a, b) = (g.a * f.a, g.a * f.b + g.b)`. Not commutative. It solves linear recurrences
/// `x[t+1] = a[t] * x[t] + b[t]`. Empty input: the identity map.
///
/// ```
/// use cufold::ops::{Affine, Compose};
/// let maps = [Affine { a: 2.0f64, b: 0.0 }, Affine { a: 1.0, b: 3.0 }]; // double, then add 3
/// let f = cufold::Cpu::new().reduce(&maps, Compose)?;
/// assert_eq!(f.apply(1.0), 5.0);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Compose;

impl<T: Real> Operator<Affine<T>> for Compose {
    type Acc = Affine<T>;
    type Out = Affine<T>;
    const COMMUTATIVE: bool = false;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "Compose";
    fn identity(&self) -> Affine<T> {
        Affine {
            a: T::one(),
            b: T::zero(),
        }
    }
    fn lift(&self, x: Affine<T>, _: u64) -> Affine<T> {
        x
    }
    fn combine(&self, f: Affine<T>, g: Affine<T>) -> Affine<T> {
        Affine {
            a: g.a * f.a,
            b: g.a * f.b + g.b,
        }
    }
    fn finish(&self, acc: Affine<T>, _: u64) -> Affine<T> {
        acc
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("Compose")
    }
}

/// A 2×2 matrix, row major: `[[m00, m01], [m10, m11]]`.
///
/// ```
/// let i = cufold::ops::Mat2 { m00: 1.0f32, m01: 0.0, m10: 0.0, m11: 1.0 };
/// assert_eq!(i.m11, 1.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Mat2<T> {
    /// Row 0, column 0.
    pub m00: T,
    /// Row 0, column 1.
    pub m01: T,
    /// Row 1, column 0.
    pub m10: T,
    /// Row 1, column 1.
    pub m11: T,
}
device_struct!(Mat2, "Mat2", Real, dense = T::DENSE);

/// The ordered matrix product `M0 * M1 * ... * Mn-1` of 2×2 matrices. Not commutative.
/// Empty input: the identity matrix.
///
/// ```
/// use cufold::ops::{Mat2, MatMul};
/// let fib = Mat2 { m00: 1.0f64, m01: 1.0, m10: 1.0, m11: 0.0 };
/// let p = cufold::Cpu::new().reduce(&[fib; 10], MatMul)?;
/// assert_eq!(p.m01, 55.0); // the 10th Fibonacci number
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MatMul;

impl<T: Real> Operator<Mat2<T>> for MatMul {
    type Acc = Mat2<T>;
    type Out = Mat2<T>;
    const COMMUTATIVE: bool = false;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "MatMul";
    fn identity(&self) -> Mat2<T> {
        Mat2 {
            m00: T::one(),
            m01: T::zero(),
            m10: T::zero(),
            m11: T::one(),
        }
    }
    fn lift(&self, x: Mat2<T>, _: u64) -> Mat2<T> {
        x
    }
    fn combine(&self, a: Mat2<T>, b: Mat2<T>) -> Mat2<T> {
        Mat2 {
            m00: a.m00 * b.m00 + a.m01 * b.m10,
            m01: a.m00 * b.m01 + a.m01 * b.m11,
            m10: a.m10 * b.m00 + a.m11 * b.m10,
            m11: a.m10 * b.m01 + a.m11 * b.m11,
        }
    }
    fn finish(&self, acc: Mat2<T>, _: u64) -> Mat2<T> {
        acc
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("MatMul")
    }
}
