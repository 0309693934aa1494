//! Values that live in device memory, and the scalar element types.

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use half::{bf16, f16};
use std::fmt::Debug;

/// A value that can be stored in device memory and has a CUDA C++ twin.
///
/// Scalars, the built-in accumulators ([`Indexed`](crate::ops::Indexed), ...) and the
/// structures of non-commutative operators ([`Affine`](crate::ops::Affine), ...) implement it.
///
/// # Safety
///
/// `cuda_name()` must name a C++ type with exactly the size, alignment and field layout of
/// `Self` (a `#[repr(C)]` struct and the same fields in the same order), and every bit
/// pattern the device writes must be a valid `Self`.
///
/// ```
/// use cufold::DeviceValue;
/// assert_eq!(f32::cuda_name(), "float");
/// assert_eq!(cufold::ops::Indexed::<u32>::cuda_name(), "cf::Indexed<unsigned int>");
/// ```
///
/// Structs of your own get it from `#[derive(cufold::DeviceType)]`, which writes their C++
/// twin for you (see [`DeviceType`](crate::DeviceType)).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a device value: it has no CUDA twin",
    label = "not a device value",
    note = "device values are f32, f64, f16, bf16, i32, i64, u32, u64, u8, cufold's value types \
            (ops::Affine<f32>, ops::Indexed<f32>, ...) and #[repr(C)] structs with #[derive(cufold::DeviceType)]"
)]
pub unsafe trait DeviceValue:
    Copy + Send + Sync + Debug + DeviceRepr + ValidAsZeroBits + 'static
{
    /// The C++ type name used in generated kernels.
    fn cuda_name() -> String;

    /// Whether every byte of a value belongs to a field (no padding, here or in any nested
    /// struct): then its bytes can be read and sent to a kernel as an operator's run-time
    /// parameters ([`OpParams::of`](crate::ops::OpParams::of)). Scalars and cufold's value
    /// types with fields of one type say true; `#[derive(cufold::DeviceType)]` computes it.
    /// The default, false, is always safe.
    ///
    /// ```
    /// use cufold::DeviceValue;
    /// assert!(f32::DENSE && cufold::ops::Affine::<f64>::DENSE);
    /// assert!(!cufold::ops::Indexed::<f32>::DENSE); // 4 bytes of padding after the value
    /// ```
    const DENSE: bool = false;

    /// The C++ declarations the type needs before it can be named: for a struct derived
    /// with `#[derive(cufold::DeviceType)]`, those of its fields' types, then its own
    /// `struct`, each inside an include guard (`#ifndef CUFOLD_DECL_<name>`) so that repeats
    /// are harmless. Empty for the built-in types, which kernels/ defines.
    ///
    /// ```
    /// use cufold::DeviceValue;
    /// assert_eq!(f32::cuda_decl(), "");
    /// assert_eq!(cufold::ops::Affine::<f64>::cuda_decl(), "");
    ///
    /// #[derive(Clone, Copy, cufold::DeviceType)]
    /// #[repr(C)]
    /// struct Interval { lo: f32, hi: f32 }
    /// let decl = Interval::cuda_decl();
    /// let name = Interval::cuda_name(); // "Interval_" and a hash of the module path
    /// assert!(name.starts_with("Interval_"));
    /// assert!(decl.contains(&format!("#ifndef CUFOLD_DECL_{name}")));
    /// assert!(decl.contains(&format!("struct {name} {{\n    float lo;\n    float hi;\n}};")));
    /// ```
    fn cuda_decl() -> String {
        String::new()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A scalar element type: f32, f64, f16, bf16, i32, i64, u32, u64 or u8.
///
/// Its methods are the arithmetic the kernels use, with the same bits: f16 and bf16 are
/// computed through f32 and rounded back to nearest-even after each operation, integers
/// wrap on overflow (as `wrapping_add` / `wrapping_mul`).
///
/// ```
/// use cufold::Element;
/// assert_eq!(i32::MAX.add(1), i32::MIN); // wraps, like the GPU
/// assert!(f32::NAN.is_nan_value());
/// assert_eq!(<u8 as Element>::NAME, "u8");
/// ```
// Not num-traits' Zero/One/Bounded/Float/NumCast: their meanings differ where it matters
// (wrapping, infinite identities, saturation, NaN for integers); docs/ARCHITECTURE.md,
// "Element types and num-traits", says precisely how.
pub trait Element: DeviceValue + PartialOrd + sealed::Sealed {
    /// The Rust name of the type, for messages and tables.
    const NAME: &'static str;
    /// Whether the type is a floating-point type (so it has NaN and infinities).
    const IS_FLOAT: bool;
    /// Addition (wrapping for integers; rounded once for f16/bf16).
    fn add(self, other: Self) -> Self;
    /// Multiplication (wrapping for integers; rounded once for f16/bf16).
    fn mul(self, other: Self) -> Self;
    /// Whether this is a NaN (always false for integers).
    fn is_nan_value(self) -> bool;
    /// `-inf` for floats, `MIN` for integers: the identity of max.
    fn lowest() -> Self;
    /// `+inf` for floats, `MAX` for integers: the identity of min.
    fn highest() -> Self;
    /// Zero.
    fn zero() -> Self;
    /// One.
    fn one() -> Self;
    /// The value as f64, rounded to nearest (exact for every type but i64/u64).
    fn to_f64(self) -> f64;
    /// The nearest value of this type to `x` (saturating for integers, as `as` does).
    fn from_f64(x: f64) -> Self;
    /// This value's rank in the total order [`Max`](crate::ops::Max) maximises: numeric
    /// order with `-0.0` below `0.0` and every NaN above `+inf` (for integers, the value
    /// itself). Distinct bit patterns have distinct keys.
    #[doc(hidden)]
    fn max_key(self) -> u64;
    /// This value's rank in the total order [`Min`](crate::ops::Min) minimises: numeric
    /// order with `-0.0` below `0.0` and every NaN below `-inf`.
    #[doc(hidden)]
    fn min_key(self) -> u64;
}

/// An element with a wider accumulator type, for [`WideSum`](crate::ops::WideSum) and
/// [`Mean`](crate::ops::Mean): f16/bf16 → f32, f32 → f64, f64 → f64, signed → i64,
/// unsigned → u64.
///
/// ```
/// use cufold::Widen;
/// let w: f64 = 0.1f32.widen();
/// assert_eq!(w, 0.1f32 as f64);
/// ```
pub trait Widen: Element {
    /// The accumulator type.
    type Wide: Element;
    /// Exact conversion into the accumulator type.
    fn widen(self) -> Self::Wide;
}

/// The real floating-point types f32 and f64, for operators that need true arithmetic in
/// the element type ([`Div2Mean`](crate::ops::Div2Mean), [`Compose`](crate::ops::Compose),
/// [`MatMul`](crate::ops::MatMul)).
///
/// ```
/// use cufold::Real;
/// assert_eq!(<f32 as Real>::HALF, 0.5);
/// ```
pub trait Real:
    Element
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Div<Output = Self>
{
    /// One half.
    const HALF: Self;
}

impl Real for f32 {
    const HALF: Self = 0.5;
}
impl Real for f64 {
    const HALF: Self = 0.5;
}

macro_rules! int_element {
    ($t:ty, $cuda:expr, $wide:ty) => {
        // SAFETY: the C++ type has the same size and alignment; every bit pattern is valid.
        unsafe impl DeviceValue for $t {
            const DENSE: bool = true;
            fn cuda_name() -> String {
                $cuda.to_string()
            }
        }
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const NAME: &'static str = stringify!($t);
            const IS_FLOAT: bool = false;
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            fn mul(self, other: Self) -> Self {
                self.wrapping_mul(other)
            }
            fn is_nan_value(self) -> bool {
                false
            }
            fn lowest() -> Self {
                <$t>::MIN
            }
            fn highest() -> Self {
                <$t>::MAX
            }
            fn zero() -> Self {
                0
            }
            fn one() -> Self {
                1
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[allow(unused_comparisons)]
            fn max_key(self) -> u64 {
                // Signed values shift by 2^63 so that unsigned order is numeric order.
                if <$t>::MIN < 0 {
                    (self as i64 as u64) ^ (1 << 63)
                } else {
                    self as u64
                }
            }
            fn min_key(self) -> u64 {
                self.max_key()
            }
        }
        impl Widen for $t {
            type Wide = $wide;
            fn widen(self) -> $wide {
                self as $wide
            }
        }
    };
}

int_element!(i32, "int", i64);
int_element!(i64, "long long", i64);
int_element!(u32, "unsigned int", u64);
int_element!(u64, "unsigned long long", u64);
int_element!(u8, "unsigned char", u64);

/// The keys of [`Element::max_key`] and [`Element::min_key`] for a float of `width` bits
/// with `mantissa` stored mantissa bits, as kernels/types.cuh computes them: `u` is the
/// classic sort key (sign bit set for positives, all bits flipped for negatives), in which
/// numbers are in order with -0 below +0, positive NaNs above +inf and negative NaNs below
/// -inf; subtracting `C = 2^mantissa - 1` (mod 2^width) moves the negative NaNs to the top,
/// for Max, and adding it moves the positive NaNs to the bottom, for Min.
fn float_keys(bits: u64, width: u32, mantissa: u32) -> (u64, u64) {
    let mask = u64::MAX >> (64 - width);
    let top = 1u64 << (width - 1);
    let u = if bits & top != 0 {
        !bits & mask
    } else {
        bits | top
    };
    let c = (1u64 << mantissa) - 1;
    (u.wrapping_sub(c) & mask, u.wrapping_add(c) & mask)
}

/// `Element::max_key` and `min_key` of a float type (f32, f64, f16, bf16), from its bits.
macro_rules! float_key_methods {
    ($t:ty) => {
        fn max_key(self) -> u64 {
            float_keys(
                self.to_bits() as u64,
                8 * std::mem::size_of::<Self>() as u32,
                <$t>::MANTISSA_DIGITS - 1,
            )
            .0
        }
        fn min_key(self) -> u64 {
            float_keys(
                self.to_bits() as u64,
                8 * std::mem::size_of::<Self>() as u32,
                <$t>::MANTISSA_DIGITS - 1,
            )
            .1
        }
    };
}

macro_rules! float_element {
    ($t:ty, $cuda:expr, $wide:ty) => {
        // SAFETY: the C++ type has the same size and alignment; every bit pattern is valid.
        unsafe impl DeviceValue for $t {
            const DENSE: bool = true;
            fn cuda_name() -> String {
                $cuda.to_string()
            }
        }
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const NAME: &'static str = stringify!($t);
            const IS_FLOAT: bool = true;
            fn add(self, other: Self) -> Self {
                self + other
            }
            fn mul(self, other: Self) -> Self {
                self * other
            }
            fn is_nan_value(self) -> bool {
                self.is_nan()
            }
            fn lowest() -> Self {
                <$t>::NEG_INFINITY
            }
            fn highest() -> Self {
                <$t>::INFINITY
            }
            fn zero() -> Self {
                0.0
            }
            fn one() -> Self {
                1.0
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            float_key_methods!($t);
        }
        impl Widen for $t {
            type Wide = $wide;
            fn widen(self) -> $wide {
                self as $wide
            }
        }
    };
}

float_element!(f32, "float", f64);
float_element!(f64, "double", f64);

macro_rules! half_element {
    ($t:ident, $cuda:expr) => {
        // SAFETY: cf::f16 / cf::bf16 are structs of one unsigned short: 2 bytes, align 2,
        // like half's types; every bit pattern is a valid value.
        unsafe impl DeviceValue for $t {
            const DENSE: bool = true;
            fn cuda_name() -> String {
                $cuda.to_string()
            }
        }
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const NAME: &'static str = stringify!($t);
            const IS_FLOAT: bool = true;
            fn add(self, other: Self) -> Self {
                $t::from_f32(self.to_f32() + other.to_f32())
            }
            fn mul(self, other: Self) -> Self {
                $t::from_f32(self.to_f32() * other.to_f32())
            }
            fn is_nan_value(self) -> bool {
                self.is_nan()
            }
            fn lowest() -> Self {
                $t::NEG_INFINITY
            }
            fn highest() -> Self {
                $t::INFINITY
            }
            fn zero() -> Self {
                $t::ZERO
            }
            fn one() -> Self {
                $t::ONE
            }
            fn to_f64(self) -> f64 {
                self.to_f64()
            }
            fn from_f64(x: f64) -> Self {
                $t::from_f64(x)
            }
            float_key_methods!($t);
        }
        impl Widen for $t {
            type Wide = f32;
            fn widen(self) -> f32 {
                self.to_f32()
            }
        }
    };
}

half_element!(f16, "cf::f16");
half_element!(bf16, "cf::bf16");

// SAFETY: `cf::Array<T, N>` (kernels/types.cuh) is `struct { T v[N]; }`: the size, alignment
// and layout of `[T; N]`; every bit pattern of the elements is valid.
unsafe impl<T: Element, const N: usize> DeviceValue for [T; N] {
    const DENSE: bool = T::DENSE;
    fn cuda_name() -> String {
        format!("cf::Array<{}, {N}>", T::cuda_name())
    }
}
