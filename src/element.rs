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
    note = "device values are f32, f64, f16, bf16, i32, i64, u32, u64, u8, i128, u128, cufold's value types \
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
    /// It matters for speed in an operator's output type too. A kernel may store a struct
    /// field by field and leave its padding unwritten; outputs written so (one a segment, or
    /// a scan's) leave every 32-byte sector partly written, and an H100 then reads each one
    /// from memory to merge the writes (f32 `ArgMax` over 2^24 short segments: 13% slower;
    /// docs/performance-notes.md, "Segments"). cufold writes its own `Indexed` whole,
    /// padding as zeros; for an output struct of your own, an explicit padding field (set in
    /// `finish`) makes it dense.
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
    /// The type [`Sum`](crate::ops::Sum) and [`Prod`](crate::ops::Prod) accumulate in:
    /// f32 for f16 and bf16 (rounded to the element once, at the finish, as PyTorch does),
    /// the element type itself for the others.
    ///
    /// ```
    /// use cufold::Element;
    /// let x = half::bf16::from_f32(1.5);
    /// assert_eq!(x.to_calc(), 1.5f32);
    /// assert_eq!(<half::bf16 as Element>::from_calc(1.5f32), x);
    /// assert_eq!(7i32.to_calc(), 7i32);
    /// ```
    type Calc: Element;
    /// The value in [`Calc`](Element::Calc), exactly.
    fn to_calc(self) -> Self::Calc;
    /// The nearest value of the element type (for f16/bf16: rounded to nearest even).
    fn from_calc(c: Self::Calc) -> Self;
    /// This value's rank in the total order [`Max`](crate::ops::Max) maximises: numeric
    /// order with `-0.0` below `0.0` and every NaN above `+inf` (for integers, the value
    /// itself). Distinct bit patterns have distinct keys.
    #[doc(hidden)]
    fn max_key(self) -> u64;
    /// This value's rank in the total order [`Min`](crate::ops::Min) minimises: numeric
    /// order with `-0.0` below `0.0` and every NaN below `-inf`.
    #[doc(hidden)]
    fn min_key(self) -> u64;

    /// A signed integer of the type's width, for the keys the CPU's vectorised leaves
    /// compare (eight 32-bit keys fill a vector register where eight u64 keys would not).
    #[doc(hidden)]
    type LaneKey: Copy + Ord + Send + Sync + Debug + 'static;
    /// [`max_key`](Element::max_key) in the signed order of [`LaneKey`](Element::LaneKey):
    /// `a.max_key() < b.max_key()` exactly when `a.max_lane_key() < b.max_lane_key()`.
    #[doc(hidden)]
    fn max_lane_key(self) -> Self::LaneKey;
    /// The value whose [`max_lane_key`](Element::max_lane_key) is `k` (a bijection).
    #[doc(hidden)]
    fn from_max_lane_key(k: Self::LaneKey) -> Self;
    /// [`min_key`](Element::min_key) in the signed order of [`LaneKey`](Element::LaneKey).
    #[doc(hidden)]
    fn min_lane_key(self) -> Self::LaneKey;
    /// The value whose [`min_lane_key`](Element::min_lane_key) is `k` (a bijection).
    #[doc(hidden)]
    fn from_min_lane_key(k: Self::LaneKey) -> Self;
    /// The rank [`ArgMax`](crate::ops::ArgMax) maximises, ties going to the lowest index:
    /// numeric order, `-0.0` equal to `0.0`, every NaN equal to every other and above all
    /// numbers (the greatest key).
    #[doc(hidden)]
    fn arg_max_key(self) -> Self::LaneKey;
    /// The rank [`ArgMin`](crate::ops::ArgMin) maximises: numeric order reversed, `-0.0`
    /// equal to `0.0`, every NaN above all numbers.
    #[doc(hidden)]
    fn arg_min_key(self) -> Self::LaneKey;
}

/// An element with a wider accumulator type, for [`WideSum`](crate::ops::WideSum) and
/// [`Mean`](crate::ops::Mean): f16/bf16 → f32, f32 → f64, f64 → f64, and every integer
/// type to 128 bits, signed (i32, i64) → i128, unsigned (u8, u32, u64) → u128.
///
/// The integer accumulators are exact: a sum of at most 2^64 - 1 elements of 64 bits or
/// fewer never leaves 128 bits (|sum| ≤ 2^127 for i64, < 2^128 for u64), so `WideSum`
/// returns the true sum and `Mean` the correctly rounded f64 of the true mean, where
/// [`Sum`](crate::ops::Sum) wraps in the element type.
///
/// ```
/// use cufold::Widen;
/// let w: f64 = 0.1f32.widen();
/// assert_eq!(w, 0.1f32 as f64);
/// let i: i128 = i64::MIN.widen();
/// assert_eq!(i, i64::MIN as i128);
/// let u: u128 = 255u8.widen();
/// assert_eq!(u, 255);
/// ```
pub trait Widen: Element {
    /// The accumulator type: f32 or f64 for floats, i128 or u128 for integers.
    type Wide: WideValue;
    /// Exact conversion into the accumulator type.
    fn widen(self) -> Self::Wide;
}

/// An accumulator type of [`Widen`]: f32, f64, i128 or u128, with the addition
/// [`WideSum`](crate::ops::WideSum) combines with and the division
/// [`Mean`](crate::ops::Mean) finishes with. Sealed.
///
/// The 128-bit integers are device values whose C++ twins are `cf::i128` and `cf::u128`
/// (kernels/types.cuh: two 64-bit words, low first, 16-byte aligned, as Rust lays out
/// `i128` and `u128` on x86_64 and aarch64), so they need no `__int128` support from NVRTC.
///
/// ```
/// use cufold::{DeviceValue, WideValue};
/// assert_eq!(i128::cuda_name(), "cf::i128");
/// assert_eq!(u128::cuda_name(), "cf::u128");
/// assert_eq!(u128::MAX.wide_add(2), 1); // wraps, but no sum of 64-bit inputs gets there
/// assert_eq!(7i128.mean_of(2), 3.5);
/// assert_eq!(3.0f64.mean_of(2), 1.5);
/// ```
pub trait WideValue: DeviceValue + PartialEq + sealed::Sealed {
    /// Zero, the identity of the sum.
    fn wide_zero() -> Self;
    /// The sum (wrapping for the 128-bit integers, which sums of at most 2^64 - 1 inputs
    /// of 64 bits never do).
    fn wide_add(self, other: Self) -> Self;
    /// The mean of `n` elements whose sum is `self`, as [`Mean`](crate::ops::Mean)
    /// finishes: for floats `self / n` in f64 (`self` rounded to f64 first), for the
    /// 128-bit integers the correctly rounded (nearest, ties to even) f64 of the exact
    /// quotient ([`round_ratio_to_f64`](crate::ops::round_ratio_to_f64)). NaN for `n = 0`.
    fn mean_of(self, n: u64) -> f64;
}

macro_rules! wide_float {
    ($t:ty) => {
        impl WideValue for $t {
            fn wide_zero() -> Self {
                0.0
            }
            fn wide_add(self, other: Self) -> Self {
                self + other
            }
            fn mean_of(self, n: u64) -> f64 {
                self as f64 / n as f64
            }
        }
    };
}
wide_float!(f32);
wide_float!(f64);

macro_rules! wide_int {
    ($t:ty, $cuda:expr, $ratio:path) => {
        // SAFETY: `cf::i128` / `cf::u128` (kernels/types.cuh) are `struct alignas(16) { u64
        // lo; u64 hi; }`: 16 bytes, 16-byte aligned, the low word first, which is the layout
        // of Rust's 128-bit integers on the little-endian targets CUDA runs on (16-byte
        // alignment since Rust 1.77 on x86_64); every bit pattern is a valid value.
        unsafe impl DeviceValue for $t {
            const DENSE: bool = true;
            fn cuda_name() -> String {
                $cuda.to_string()
            }
        }
        impl sealed::Sealed for $t {}
        impl WideValue for $t {
            fn wide_zero() -> Self {
                0
            }
            fn wide_add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            fn mean_of(self, n: u64) -> f64 {
                $ratio(self, n)
            }
        }
    };
}
wide_int!(i128, "cf::i128", crate::ops::round_ratio_to_f64);
wide_int!(u128, "cf::u128", crate::ops::round_ratio_to_f64_unsigned);

const _: () = assert!(
    std::mem::size_of::<i128>() == 16 && std::mem::align_of::<i128>() == 16,
    "cf::i128 is 16 bytes, 16-byte aligned (Rust 1.77 or later)"
);

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
    ($t:ty, $cuda:expr, $wide:ty, $s:ty, $flip:expr) => {
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
            type Calc = Self;
            fn to_calc(self) -> Self {
                self
            }
            fn from_calc(c: Self) -> Self {
                c
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
            type LaneKey = $s;
            #[inline(always)]
            fn max_lane_key(self) -> $s {
                (self ^ $flip) as $s
            }
            #[inline(always)]
            fn from_max_lane_key(k: $s) -> Self {
                (k as $t) ^ $flip
            }
            #[inline(always)]
            fn min_lane_key(self) -> $s {
                self.max_lane_key()
            }
            #[inline(always)]
            fn from_min_lane_key(k: $s) -> Self {
                Self::from_max_lane_key(k)
            }
            #[inline(always)]
            fn arg_max_key(self) -> $s {
                self.max_lane_key()
            }
            #[inline(always)]
            fn arg_min_key(self) -> $s {
                !self.max_lane_key()
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

// The last two arguments: the signed type of the same width, and what to XOR the value with
// so that the signed order of the result is the value's order (the sign bit, for unsigned).
int_element!(i32, "int", i128, i32, 0);
int_element!(i64, "long long", i128, i64, 0);
int_element!(u32, "unsigned int", u128, i32, 1 << 31);
int_element!(u64, "unsigned long long", u128, i64, 1 << 63);
int_element!(u8, "unsigned char", u128, i8, 1 << 7);

/// The keys of [`Element::max_key`] and [`Element::min_key`] for a float whose bits are the
/// unsigned integer type `$u` with `mantissa` stored mantissa bits, as kernels/types.cuh
/// computes them: `u` is the classic sort key (sign bit set for positives, all bits flipped
/// for negatives), in which numbers are in order with -0 below +0, positive NaNs above +inf
/// and negative NaNs below -inf; subtracting `C = 2^mantissa - 1` (mod 2^width) moves the
/// negative NaNs to the top, for Max, and adding it moves the positive NaNs to the bottom,
/// for Min.
///
/// Computed in `$u` itself, not in u64: the keys are the same numbers, but a comparison of
/// two 32-bit keys is one the compiler can put in the lanes of a vector register (the
/// order-free CPU leaves compare eight elements at a time that way).
macro_rules! float_key_methods {
    ($t:ty, $u:ty, $s:ty) => {
        #[inline(always)]
        fn max_key(self) -> u64 {
            let (max, _) = float_keys_of!(self, $t, $u);
            max as u64
        }
        #[inline(always)]
        fn min_key(self) -> u64 {
            let (_, min) = float_keys_of!(self, $t, $u);
            min as u64
        }
        type LaneKey = $s;
        // The lane keys: `su`, the bits with every bit but the sign flipped for negatives,
        // is the classic key `u` of `float_keys_of` with its top bit flipped (so that its
        // signed order is u's unsigned order), and a lane key is the u64 key (u - C or
        // u + C) with its top bit flipped. `su` is an involution of the bits, which gives
        // the inverses.
        #[inline(always)]
        fn max_lane_key(self) -> Self::LaneKey {
            let (su, c) = lane_su!(self.to_bits(), $t, $u);
            su.wrapping_sub(c)
        }
        #[inline(always)]
        fn from_max_lane_key(k: Self::LaneKey) -> Self {
            let (_, c) = lane_su!(0, $t, $u);
            let (bits, _) = lane_su!(k.wrapping_add(c) as $u, $t, $u);
            Self::from_bits(bits as $u)
        }
        #[inline(always)]
        fn min_lane_key(self) -> Self::LaneKey {
            let (su, c) = lane_su!(self.to_bits(), $t, $u);
            su.wrapping_add(c)
        }
        #[inline(always)]
        fn from_min_lane_key(k: Self::LaneKey) -> Self {
            let (_, c) = lane_su!(0, $t, $u);
            let (bits, _) = lane_su!(k.wrapping_sub(c) as $u, $t, $u);
            Self::from_bits(bits as $u)
        }
        #[inline(always)]
        fn arg_max_key(self) -> Self::LaneKey {
            let (su, nan) = arg_su!(self.to_bits(), $t, $u);
            if nan {
                <Self::LaneKey>::MAX
            } else {
                su
            }
        }
        #[inline(always)]
        fn arg_min_key(self) -> Self::LaneKey {
            let (su, nan) = arg_su!(self.to_bits(), $t, $u);
            if nan {
                <Self::LaneKey>::MAX
            } else {
                !su
            }
        }
    };
}

/// `(su, C)` for the float bits `$b` (of the unsigned type `$u`): `su` the bits as a signed
/// integer in numeric order (every bit but the sign flipped for negatives: -0 just below
/// +0, positive NaNs above +inf, negative ones below -inf), `C = 2^mantissa - 1`.
macro_rules! lane_su {
    ($b:expr, $t:ty, $u:ty) => {{
        let b: $u = $b;
        let s = (b as <$u as KeySigned>::S) >> (<$u>::BITS - 1);
        let su = (b ^ ((s as $u) >> 1)) as <$u as KeySigned>::S;
        let c = ((1 as $u) << (<$t>::MANTISSA_DIGITS - 1)) - 1;
        (su, c as <$u as KeySigned>::S)
    }};
}

/// `(su, is NaN)` for the float bits `$b` with `-0.0` taken as `0.0` (see `lane_su`).
macro_rules! arg_su {
    ($b:expr, $t:ty, $u:ty) => {{
        let b: $u = $b;
        let top: $u = 1 << (<$u>::BITS - 1);
        let (_, c) = lane_su!(0, $t, $u);
        // The exponent bits all set: the bits of +inf; anything above (without the sign)
        // is a NaN.
        let inf = !top & !(c as $u);
        let nan = b & !top > inf;
        let b = if b << 1 == 0 { 0 } else { b };
        let (su, _) = lane_su!(b, $t, $u);
        (su, nan)
    }};
}

/// `(max_key, min_key)` of a float, in its own width (see `float_key_methods`).
macro_rules! float_keys_of {
    ($x:expr, $t:ty, $u:ty) => {{
        let bits: $u = $x.to_bits();
        let top: $u = 1 << (<$u>::BITS - 1);
        // The sign spread over every bit, then the sign bit: flips every bit of a
        // negative, only the sign bit of a positive.
        let flip = ((bits as <$u as KeySigned>::S) >> (<$u>::BITS - 1)) as $u | top;
        let u = bits ^ flip;
        let c: $u = (1 << (<$t>::MANTISSA_DIGITS - 1)) - 1;
        (u.wrapping_sub(c), u.wrapping_add(c))
    }};
}

/// The signed twin of an unsigned type, for an arithmetic shift.
trait KeySigned {
    type S;
}
impl KeySigned for u16 {
    type S = i16;
}
impl KeySigned for u32 {
    type S = i32;
}
impl KeySigned for u64 {
    type S = i64;
}

macro_rules! float_element {
    ($t:ty, $cuda:expr, $wide:ty, $u:ty, $s:ty) => {
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
            type Calc = Self;
            fn to_calc(self) -> Self {
                self
            }
            fn from_calc(c: Self) -> Self {
                c
            }
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            float_key_methods!($t, $u, $s);
        }
        impl Widen for $t {
            type Wide = $wide;
            fn widen(self) -> $wide {
                self as $wide
            }
        }
    };
}

float_element!(f32, "float", f64, u32, i32);
float_element!(f64, "double", f64, u64, i64);

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
            type Calc = f32;
            fn to_calc(self) -> f32 {
                self.to_f32()
            }
            fn from_calc(c: f32) -> Self {
                $t::from_f32(c)
            }
            fn from_f64(x: f64) -> Self {
                $t::from_f64(x)
            }
            float_key_methods!($t, u16, i16);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys as first written, in u64 for every width: the reference for the keys
    /// computed in each type's own width.
    fn reference_keys(bits: u64, width: u32, mantissa: u32) -> (u64, u64) {
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

    /// The lane keys of `x`: the u64 keys with the top bit of their width flipped, inverses
    /// that give back `x`'s bits, and arg- keys that rank as `ArgMax` and `ArgMin` do.
    fn check_lane_keys<T: Element>(
        x: T,
        width: u32,
        bits: impl Fn(T) -> u64,
        key: impl Fn(T::LaneKey) -> u64,
    ) {
        if T::IS_FLOAT {
            let top = 1u64 << (width - 1);
            assert_eq!(key(x.max_lane_key()) ^ top, x.max_key(), "{x:?}");
            assert_eq!(key(x.min_lane_key()) ^ top, x.min_key(), "{x:?}");
        }
        assert_eq!(bits(T::from_max_lane_key(x.max_lane_key())), bits(x));
        assert_eq!(bits(T::from_min_lane_key(x.min_lane_key())), bits(x));
        // Against a few values that tell ranks apart.
        let probes = [
            -2.0,
            -0.0,
            0.0,
            1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        for p in probes.map(T::from_f64) {
            let rank = |a: T, b: T| -> std::cmp::Ordering {
                match (a.is_nan_value(), b.is_nan_value()) {
                    (true, true) => std::cmp::Ordering::Equal,
                    (true, false) => std::cmp::Ordering::Greater,
                    (false, true) => std::cmp::Ordering::Less,
                    _ => a.partial_cmp(&b).expect("numbers"),
                }
            };
            assert_eq!(
                x.arg_max_key().cmp(&p.arg_max_key()),
                rank(x, p),
                "{x:?} {p:?}"
            );
            let reversed = match (x.is_nan_value(), p.is_nan_value()) {
                (false, false) => rank(p, x),
                _ => rank(x, p),
            };
            assert_eq!(
                x.arg_min_key().cmp(&p.arg_min_key()),
                reversed,
                "{x:?} {p:?}"
            );
        }
    }

    #[test]
    fn lane_keys_are_the_u64_keys_in_signed_order() {
        for b in 0..=u16::MAX {
            check_lane_keys(
                f16::from_bits(b),
                16,
                |v| v.to_bits() as u64,
                |k| k as u16 as u64,
            );
            check_lane_keys(
                bf16::from_bits(b),
                16,
                |v| v.to_bits() as u64,
                |k| k as u16 as u64,
            );
        }
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for hi in 0..=u16::MAX as u32 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            for b in [hi << 16, hi << 16 | 1, hi << 16 | 0xffff, (s >> 32) as u32] {
                check_lane_keys(
                    f32::from_bits(b),
                    32,
                    |v| v.to_bits() as u64,
                    |k| k as u32 as u64,
                );
                check_lane_keys(b, 32, |v| v as u64, |k| k as u32 as u64);
                check_lane_keys(b as i32, 32, |v| v as u32 as u64, |k| k as u32 as u64);
            }
            for b in [(hi as u64) << 48, (hi as u64) << 48 | 1, s] {
                check_lane_keys(f64::from_bits(b), 64, |v| v.to_bits(), |k| k as u64);
                check_lane_keys(b, 64, |v| v, |k| k as u64);
                check_lane_keys(b as i64, 64, |v| v as u64, |k| k as u64);
            }
        }
        for b in 0..=u8::MAX {
            check_lane_keys(b, 8, |v| v as u64, |k| k as u8 as u64);
        }
    }

    #[test]
    fn float_keys_in_their_own_width_equal_the_u64_reference() {
        for b in 0..=u16::MAX {
            let h = f16::from_bits(b);
            assert_eq!((h.max_key(), h.min_key()), reference_keys(b as u64, 16, 10));
            let h = bf16::from_bits(b);
            assert_eq!((h.max_key(), h.min_key()), reference_keys(b as u64, 16, 7));
        }
        // Every f32 pattern with the 16 low bits from a few fixed values, and f64 patterns
        // from a fixed-seed mix: signs, zeros, subnormals, infinities and NaNs all occur.
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for hi in 0..=u16::MAX as u32 {
            for lo in [0u32, 1, 0x7fff, 0xffff] {
                let b = hi << 16 | lo;
                let x = f32::from_bits(b);
                assert_eq!((x.max_key(), x.min_key()), reference_keys(b as u64, 32, 23));
            }
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            for b in [
                s,
                (hi as u64) << 48,
                (hi as u64) << 48 | 1,
                (hi as u64) << 48 | s >> 16,
            ] {
                let x = f64::from_bits(b);
                assert_eq!((x.max_key(), x.min_key()), reference_keys(b, 64, 52));
            }
        }
    }
}
