//! A map on the way in: an operator applied to transformed inputs.

use super::{CudaOp, OpParams, Operator};
use crate::element::DeviceValue;

/// A map applied to each input element (and its index) before an operator lifts it: the
/// "transform" of a transform-reduce or transform-scan, written once for the CPU
/// ([`Transform::apply`]) and once for CUDA ([`Transform::cuda`]).
///
/// The CUDA half is a C++ struct with typedefs `In` and `Out` and
/// `__device__ Out operator()(In x, unsigned long long index) const`. Parameters (a grid
/// spacing, a location) travel at run time as [`Transform::params`], the bytes of the
/// struct, so that one compiled kernel serves every value; `#[cufold::transform]` writes
/// both halves and the parameters from one Rust definition. (Parameters compiled into the
/// source instead, with [`cuda_f64`], cost one compile per distinct value.)
///
/// ```
/// use cufold::ops::{CudaOp, Mapped, Sum, Transform};
/// use cufold::{Cpu, ScanKind};
///
/// /// x -> x * x
/// #[derive(Clone, Copy)]
/// struct Square;
/// impl Transform<f64> for Square {
///     type Out = f64;
///     fn apply(&self, x: f64, _: u64) -> f64 { x * x }
///     fn cuda(&self) -> CudaOp {
///         CudaOp {
///             type_name: "Square".into(),
///             source: "struct Square { typedef double In; typedef double Out;
///                 __device__ double operator()(double x, unsigned long long) const { return x * x; } };".into(),
///         }
///     }
/// }
///
/// let sum_of_squares = Mapped::new(Square, Sum);
/// assert_eq!(Cpu::new().reduce(&[1.0, 2.0, 3.0], sum_of_squares)?, 14.0);
/// assert_eq!(Cpu::new().scan(&[1.0, 2.0, 3.0], sum_of_squares, ScanKind::Inclusive)?, [1.0, 5.0, 14.0]);
/// # Ok::<(), cufold::Error>(())
/// ```
pub trait Transform<In: DeviceValue>: Copy + Send + Sync + 'static {
    /// What the map produces: the operator's input type.
    type Out: DeviceValue;
    /// The image of the element `x` at position `index`.
    fn apply(&self, x: In, index: u64) -> Self::Out;
    /// The CUDA half: the C++ struct's name and its definition.
    fn cuda(&self) -> CudaOp;
    /// The run-time parameters the CUDA half is built from in every kernel (see
    /// [`OpParams`]); the default, none, default-constructs it.
    fn params(&self) -> OpParams {
        OpParams::none()
    }
}

/// An exact C++ literal for an f64 (a hexadecimal float, or the expressions for infinities
/// and NaN), for parameters compiled into a [`Transform`]'s or an operator's source.
///
/// ```
/// assert_eq!(cufold::ops::cuda_f64(0.1), "0x1.999999999999ap-4");
/// assert_eq!(cufold::ops::cuda_f64(-2.0), "-0x1.0000000000000p+1");
/// assert_eq!(cufold::ops::cuda_f64(0.0), "0x0.0p+0");
/// ```
pub fn cuda_f64(x: f64) -> String {
    if x.is_nan() {
        return "__longlong_as_double(0x7ff8000000000000ll)".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "__longlong_as_double(0x7ff0000000000000ll)".into()
        } else {
            "__longlong_as_double(0xfff0000000000000ll)".into()
        };
    }
    let bits = x.to_bits();
    let sign = if bits >> 63 == 1 { "-" } else { "" };
    let exp = ((bits >> 52) & 0x7ff) as i64;
    let man = bits & ((1u64 << 52) - 1);
    if exp == 0 {
        if man == 0 {
            return format!("{sign}0x0.0p+0");
        }
        return format!("{sign}0x0.{man:013x}p-1022");
    }
    format!("{sign}0x1.{man:013x}p{:+}", exp - 1023)
}

/// The operator `op` applied to `map`'s images of the inputs: lift is
/// `op.lift(map.apply(x, i), i)`; identity, combine and finish are `op`'s. It reduces and
/// scans like any operator (a transform-reduce, a transform-scan), in one pass over the
/// data.
///
/// ```
/// use cufold::ops::{Mapped, Max, Transform, CudaOp};
/// /// The absolute value.
/// #[derive(Clone, Copy)]
/// struct Abs;
/// impl Transform<i32> for Abs {
///     type Out = i64;
///     fn apply(&self, x: i32, _: u64) -> i64 { (x as i64).abs() }
///     fn cuda(&self) -> CudaOp {
///         CudaOp { type_name: "Abs".into(), source: "struct Abs { typedef int In; typedef long long Out;
///             __device__ long long operator()(int x, unsigned long long) const { return x < 0 ? -(long long)x : x; } };".into() }
///     }
/// }
/// let largest_magnitude = cufold::Cpu::new().reduce(&[3, -7, 5], Mapped::new(Abs, Max))?;
/// assert_eq!(largest_magnitude, 7);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Mapped<F, O> {
    /// The map on the way in.
    pub map: F,
    /// The operator.
    pub op: O,
}

impl<F, O> Mapped<F, O> {
    /// `op` over `map`'s images.
    ///
    /// ```
    /// # use cufold::ops::{Mapped, Sum};
    /// # #[derive(Clone, Copy)] struct Id;
    /// let m = Mapped::new(Id, Sum);
    /// # let _ = m;
    /// ```
    pub fn new(map: F, op: O) -> Self {
        Mapped { map, op }
    }
}

impl<In: DeviceValue, F: Transform<In>, O: Operator<F::Out>> Operator<In> for Mapped<F, O> {
    type Acc = O::Acc;
    type Out = O::Out;
    const COMMUTATIVE: bool = O::COMMUTATIVE;
    const ORDER_FREE: bool = O::ORDER_FREE;
    const LANE_RUNS: bool = O::LANE_RUNS;
    const EMPTY_IS_ERROR: bool = O::EMPTY_IS_ERROR;
    const NAME: &'static str = "Mapped";
    fn name() -> String {
        format!("Mapped<{}, {}>", super::short_type_name::<F>(), O::name())
    }
    const SCANNABLE: bool = O::SCANNABLE;
    fn identity(&self) -> O::Acc {
        self.op.identity()
    }
    fn lift(&self, x: In, index: u64) -> O::Acc {
        self.op.lift(self.map.apply(x, index), index)
    }
    fn combine(&self, a: O::Acc, b: O::Acc) -> O::Acc {
        self.op.combine(a, b)
    }
    fn finish(&self, acc: O::Acc, n: u64) -> O::Out {
        self.op.finish(acc, n)
    }
    fn cuda(&self) -> CudaOp {
        let (map, op) = (self.map.cuda(), self.op.cuda());
        CudaOp {
            type_name: format!("cf::Mapped<{}, {}>", map.type_name, op.type_name),
            source: format!("{}\n{}", map.source, op.source),
        }
    }
    /// The map's parameters, then the operator's, as `cf::Mapped`'s two members.
    fn params(&self) -> OpParams {
        OpParams::pair(&self.map.params(), &self.op.params())
    }
}

/// The identity map: each input as it is (a [`Transform`] for [`Mapped`] and Monte Carlo
/// estimates that reduce the samples themselves).
///
/// ```
/// use cufold::ops::{Identity, Mapped, Sum};
/// assert_eq!(cufold::Cpu::new().reduce(&[1.0f32, 2.0], Mapped::new(Identity, Sum))?, 3.0);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

impl<T: DeviceValue> Transform<T> for Identity {
    type Out = T;
    fn apply(&self, x: T, _: u64) -> T {
        x
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: format!("cf::Identity<{}>", T::cuda_name()),
            source: T::cuda_decl(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Max, Sum};

    /// A map of this test module's, with a generic parameter.
    #[derive(Clone, Copy)]
    struct Twice<T>(std::marker::PhantomData<T>);
    impl Transform<f32> for Twice<f32> {
        type Out = f32;
        fn apply(&self, x: f32, _: u64) -> f32 {
            2.0 * x
        }
        fn cuda(&self) -> CudaOp {
            unimplemented!()
        }
    }

    #[test]
    fn messages_name_the_map_and_the_operator() {
        type M = Mapped<Twice<f32>, Max>;
        assert_eq!(<M as Operator<f32>>::name(), "Mapped<Twice<f32>, Max>");
        type Nested = Mapped<Identity, Mapped<Twice<f32>, Sum>>;
        assert_eq!(
            <Nested as Operator<f32>>::name(),
            "Mapped<Identity, Mapped<Twice<f32>, Sum>>"
        );
        let op = Mapped::new(Twice(std::marker::PhantomData), Max);
        let e = crate::Cpu::new().reduce(&[] as &[f32], op).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Mapped<Twice<f32>, Max> has no value for an empty input"),
            "{e}"
        );
    }
}
