//! The operators behind the tensor methods, each with a Rust half and a CUDA half that give
//! the same bits: the arg-operators' index as `u32`,
//! means and variances in the element type, and a log-sum-exp whose `exp` and `ln` are
//! computed by the same arithmetic on the CPU and the GPU.
//!
//! They are ordinary cufold operators: use them with cufold directly too.
//!
//! ```
//! use cufold_candle::ops::{ArgIndex, LogSumExp};
//! let cpu = cufold::Cpu::new();
//! assert_eq!(cpu.reduce(&[1.0f32, 7.0, 7.0], ArgIndex::<true>)?, 1);
//! let lse = cpu.reduce(&[0.0f32, 0.0], LogSumExp)?;
//! assert!((lse - 2f32.ln()).abs() < 1e-7);
//! # Ok::<(), cufold::Error>(())
//! ```

use cufold::ops::{ArgMax, ArgMin, CudaOp, Indexed, Mean, MeanVar, MeanVarValue, Operator};
use cufold::{bf16, f16, DeviceValue, Element, Widen};

/// An element type whose reductions may be returned in the element type itself: the
/// rounding of an `f64` (a mean, a variance, a log-sum-exp) to it, the same on the CPU and
/// the GPU (f16 and bf16 round through f32, on both).
///
/// ```
/// use cufold_candle::ops::Narrow;
/// assert_eq!(<f32 as Narrow>::narrow(0.1), 0.1f32);
/// assert_eq!(<half::bf16 as Narrow>::narrow(1.0), half::bf16::ONE);
/// ```
pub trait Narrow: Element {
    /// `x` rounded to the element type.
    fn narrow(x: f64) -> Self;
    /// The same rounding as a C++ expression of the `double` expression `x`.
    fn narrow_cuda(x: &str) -> String;
}

impl Narrow for f32 {
    fn narrow(x: f64) -> f32 {
        x as f32
    }
    fn narrow_cuda(x: &str) -> String {
        format!("(float)({x})")
    }
}
impl Narrow for f64 {
    fn narrow(x: f64) -> f64 {
        x
    }
    fn narrow_cuda(x: &str) -> String {
        format!("({x})")
    }
}
impl Narrow for f16 {
    fn narrow(x: f64) -> f16 {
        f16::from_f32(x as f32)
    }
    fn narrow_cuda(x: &str) -> String {
        format!("cf::down<cf::f16>((float)({x}))")
    }
}
impl Narrow for bf16 {
    fn narrow(x: f64) -> bf16 {
        bf16::from_f32(x as f32)
    }
    fn narrow_cuda(x: &str) -> String {
        format!("cf::down<cf::bf16>((float)({x}))")
    }
}

/// The position of the largest (`MAX = true`) or smallest element as a `u32`, the index
/// type of candle's own `argmax`: NaN wins (the first NaN), ties go to the lowest index.
/// cufold's [`ArgMax`] / [`ArgMin`] with only the index kept, and their fast paths.
///
/// ```
/// use cufold_candle::ops::ArgIndex;
/// let cpu = cufold::Cpu::new();
/// assert_eq!(cpu.reduce(&[3i64, 9, 1, 9], ArgIndex::<true>)?, 1);
/// assert_eq!(cpu.reduce(&[3.0f32, f32::NAN, 1.0], ArgIndex::<false>)?, 1);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ArgIndex<const MAX: bool>;

impl<T: Element, const MAX: bool> Operator<T> for ArgIndex<MAX> {
    type Acc = Indexed<T>;
    type Out = u32;
    const COMMUTATIVE: bool = true;
    const ORDER_FREE: bool = true;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = if MAX { "ArgMaxIndex" } else { "ArgMinIndex" };
    fn identity(&self) -> Indexed<T> {
        if MAX {
            Operator::<T>::identity(&ArgMax)
        } else {
            Operator::<T>::identity(&ArgMin)
        }
    }
    fn lift(&self, x: T, index: u64) -> Indexed<T> {
        Indexed { value: x, index }
    }
    fn combine(&self, a: Indexed<T>, b: Indexed<T>) -> Indexed<T> {
        if MAX {
            ArgMax.combine(a, b)
        } else {
            ArgMin.combine(a, b)
        }
    }
    #[inline(always)]
    fn full_leaf(&self, xs: &[T], first: u64) -> Option<Indexed<T>> {
        if MAX {
            ArgMax.full_leaf(xs, first)
        } else {
            ArgMin.full_leaf(xs, first)
        }
    }
    /// The index; rows longer than `u32::MAX + 1` are refused before any work.
    fn finish(&self, acc: Indexed<T>, _: u64) -> u32 {
        acc.index as u32
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: format!("cfc::ArgIndex<{}, {MAX}>", T::cuda_name()),
            source: ARG_INDEX_CUDA.to_string(),
        }
    }
}

const ARG_INDEX_CUDA: &str = r#"#ifndef CFC_ARG_INDEX
#define CFC_ARG_INDEX
namespace cfc {
template <class T, bool MAX> struct ArgIndex : cf::ArgExt<T, MAX> {
    typedef unsigned int Out;
    __device__ Out finish(cf::Indexed<T> a, cf::u64) const { return (unsigned int)a.index; }
};
}
namespace cf {
// The arg-operators' private runs (kernels/ops.cuh) serve the index-only form too.
template <class T, bool MAX> struct Run<cfc::ArgIndex<T, MAX>> : ArgRun<T, MAX> {};
template <class T, bool MAX> struct ShortRun<cfc::ArgIndex<T, MAX>> : ShortArgRun<T, MAX> {};
template <bool MAX> struct ShortRun<cfc::ArgIndex<float, MAX>> : ShortArgRunFloat<float, MAX> {};
template <bool MAX> struct ShortRun<cfc::ArgIndex<double, MAX>> : ShortArgRunFloat<double, MAX> {};
}
#endif
"#;

/// The mean in the element type: cufold's [`Mean`] (a tree sum in the wide type, divided
/// once), rounded to the element type.
///
/// ```
/// use cufold_candle::ops::MeanOf;
/// assert_eq!(cufold::Cpu::new().reduce(&[1.0f32, 2.0], MeanOf)?, 1.5);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MeanOf;

impl<T: Widen + Narrow> Operator<T> for MeanOf {
    type Acc = <T as Widen>::Wide;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "MeanOf";
    fn identity(&self) -> Self::Acc {
        Operator::<T>::identity(&Mean)
    }
    fn lift(&self, x: T, index: u64) -> Self::Acc {
        Mean.lift(x, index)
    }
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
        Operator::<T>::combine(&Mean, a, b)
    }
    fn finish(&self, acc: Self::Acc, n: u64) -> T {
        T::narrow(Operator::<T>::finish(&Mean, acc, n))
    }
    fn cuda(&self) -> CudaOp {
        let t = T::cuda_name();
        let name = format!("MeanOf_{}", cuda_ident(&t));
        CudaOp {
            type_name: format!("cfc::{name}"),
            source: format!(
                "namespace cfc {{\nstruct {name} : cf::Mean<{t}> {{\n    typedef {t} Out;\n    \
                 __device__ Out finish(Acc a, cf::u64 n) const {{ return {}; }}\n}};\n}}\n",
                T::narrow_cuda(&format!("cf::Mean<{t}>::finish(a, n)"))
            ),
        }
    }
}

/// The sample variance (divided by `n - 1`, as candle's `var` and PyTorch's default) in the
/// element type: cufold's [`MeanVar`] (one pass, Chan's pairwise combination in f64),
/// `m2 / (count - 1)`, rounded to the element type. One element gives NaN (0 / 0).
///
/// ```
/// use cufold_candle::ops::VarOf;
/// assert_eq!(cufold::Cpu::new().reduce(&[1.0f64, 2.0, 3.0], VarOf)?, 1.0);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct VarOf;

impl<T: Narrow> Operator<T> for VarOf {
    type Acc = MeanVarValue;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "VarOf";
    fn identity(&self) -> MeanVarValue {
        Operator::<T>::identity(&MeanVar)
    }
    fn lift(&self, x: T, index: u64) -> MeanVarValue {
        MeanVar.lift(x, index)
    }
    fn combine(&self, a: MeanVarValue, b: MeanVarValue) -> MeanVarValue {
        Operator::<T>::combine(&MeanVar, a, b)
    }
    fn combine_full(&self, a: MeanVarValue, b: MeanVarValue) -> MeanVarValue {
        Operator::<T>::combine_full(&MeanVar, a, b)
    }
    #[inline(always)]
    fn full_leaf(&self, xs: &[T], first: u64) -> Option<MeanVarValue> {
        MeanVar.full_leaf(xs, first)
    }
    fn finish(&self, acc: MeanVarValue, _: u64) -> T {
        T::narrow(acc.m2 / (acc.count - 1.0))
    }
    fn cuda(&self) -> CudaOp {
        let t = T::cuda_name();
        let name = format!("VarOf_{}", cuda_ident(&t));
        CudaOp {
            type_name: format!("cfc::{name}"),
            source: format!(
                "namespace cfc {{\nstruct {name} : cf::MeanVar<{t}> {{\n    typedef {t} Out;\n    \
                 __device__ Out finish(cf::MeanVarV a, cf::u64) const {{ return {}; }}\n}};\n}}\n",
                T::narrow_cuda("a.m2 / (a.count - 1.0)")
            ),
        }
    }
}

fn cuda_ident(t: &str) -> String {
    t.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The accumulator of [`LogSumExp`]: the largest value seen and the sum of `exp(x - max)`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Lse<W> {
    /// The largest element so far (`-inf` for none).
    pub max: W,
    /// The sum of `exp(x - max)` over the elements so far.
    pub sum: W,
}

// SAFETY: two fields of one scalar type, `#[repr(C)]`, no padding: every bit pattern is a
// valid value, and the C++ twin `cfc::Lse<W>` has the same layout.
unsafe impl cufold::cudarc::driver::DeviceRepr for Lse<f32> {}
unsafe impl cufold::cudarc::driver::DeviceRepr for Lse<f64> {}
unsafe impl cufold::cudarc::driver::ValidAsZeroBits for Lse<f32> {}
unsafe impl cufold::cudarc::driver::ValidAsZeroBits for Lse<f64> {}
// SAFETY: as above; the C++ twin is declared by every source that names it (LSE_CUDA).
unsafe impl DeviceValue for Lse<f32> {
    const DENSE: bool = true;
    fn cuda_name() -> String {
        "cfc::Lse<float>".into()
    }
}
unsafe impl DeviceValue for Lse<f64> {
    const DENSE: bool = true;
    fn cuda_name() -> String {
        "cfc::Lse<double>".into()
    }
}

/// `log(sum(exp(x)))` in one pass: each node keeps its largest element and the sum of
/// `exp(x - max)`, and only the side with the smaller maximum is rescaled. f16, bf16 and f32
/// accumulate in f32, f64 in f64; the result is rounded to the element type.
///
/// `exp` and `ln` are computed by this crate from `+ - * /` in f64 (Cody–Waite reduction and
/// polynomials), the same arithmetic on the CPU and the GPU, so both give the same bits;
/// f32 results are within an ulp of the true value, f64 results within a few. An infinity
/// among the inputs gives that infinity (both signs only through NaN), NaN gives NaN, and an
/// empty input is an error.
///
/// ```
/// use cufold_candle::ops::LogSumExp;
/// let cpu = cufold::Cpu::new();
/// let x = [1000.0f64, 1000.0];
/// assert!((cpu.reduce(&x, LogSumExp)? - (1000.0 + 2f64.ln())).abs() < 1e-12);
/// assert_eq!(cpu.reduce(&[f32::NEG_INFINITY; 3], LogSumExp)?, f32::NEG_INFINITY);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct LogSumExp;

/// The element types [`LogSumExp`] takes, with their accumulator type.
pub trait LseElement: Narrow {
    /// f32 or f64.
    type W: LseWide;
    /// The element, exactly, in the accumulator type.
    fn wide(self) -> Self::W;
}

/// The accumulator types of [`LogSumExp`]: f32 and f64, with the portable `exp` and `ln`.
pub trait LseWide: Copy + PartialEq + PartialOrd + Send + Sync + std::fmt::Debug + 'static {
    /// Negative infinity.
    const NEG_INF: Self;
    /// Zero and one.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// `exp(x)` by the portable method.
    fn pexp(self) -> Self;
    /// `max + ln(sum)` by the portable method, in f64.
    fn finish(max: Self, sum: Self) -> f64;
    /// `a + b`, `a - b`, `a * b`.
    fn add(a: Self, b: Self) -> Self;
    /// `a - b`.
    fn sub(a: Self, b: Self) -> Self;
    /// `a * b`.
    fn mul(a: Self, b: Self) -> Self;
    /// The C++ name.
    const CUDA: &'static str;
}

impl LseWide for f32 {
    const NEG_INF: f32 = f32::NEG_INFINITY;
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const CUDA: &'static str = "float";
    fn pexp(self) -> f32 {
        exp32(self)
    }
    fn finish(max: f32, sum: f32) -> f64 {
        max as f64 + ln64(sum as f64)
    }
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    fn sub(a: f32, b: f32) -> f32 {
        a - b
    }
    fn mul(a: f32, b: f32) -> f32 {
        a * b
    }
}
impl LseWide for f64 {
    const NEG_INF: f64 = f64::NEG_INFINITY;
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const CUDA: &'static str = "double";
    fn pexp(self) -> f64 {
        exp64(self)
    }
    fn finish(max: f64, sum: f64) -> f64 {
        max + ln64(sum)
    }
    fn add(a: f64, b: f64) -> f64 {
        a + b
    }
    fn sub(a: f64, b: f64) -> f64 {
        a - b
    }
    fn mul(a: f64, b: f64) -> f64 {
        a * b
    }
}

impl LseElement for f32 {
    type W = f32;
    fn wide(self) -> f32 {
        self
    }
}
impl LseElement for f64 {
    type W = f64;
    fn wide(self) -> f64 {
        self
    }
}
impl LseElement for f16 {
    type W = f32;
    fn wide(self) -> f32 {
        self.to_f32()
    }
}
impl LseElement for bf16 {
    type W = f32;
    fn wide(self) -> f32 {
        self.to_f32()
    }
}

impl<T: LseElement> Operator<T> for LogSumExp
where
    Lse<T::W>: DeviceValue,
{
    type Acc = Lse<T::W>;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "LogSumExp";
    fn identity(&self) -> Lse<T::W> {
        Lse {
            max: T::W::NEG_INF,
            sum: T::W::ZERO,
        }
    }
    fn lift(&self, x: T, _: u64) -> Lse<T::W> {
        Lse {
            max: x.wide(),
            sum: T::W::ONE,
        }
    }
    fn combine(&self, a: Lse<T::W>, b: Lse<T::W>) -> Lse<T::W> {
        // Mirrored by LSE_CUDA's combine, line for line.
        if a.max == b.max {
            Lse {
                max: a.max,
                sum: T::W::add(a.sum, b.sum),
            }
        } else if a.max > b.max {
            Lse {
                max: a.max,
                sum: T::W::add(a.sum, T::W::mul(b.sum, T::W::sub(b.max, a.max).pexp())),
            }
        } else {
            Lse {
                max: b.max,
                sum: T::W::add(T::W::mul(a.sum, T::W::sub(a.max, b.max).pexp()), b.sum),
            }
        }
    }
    fn finish(&self, acc: Lse<T::W>, _: u64) -> T {
        T::narrow(T::W::finish(acc.max, acc.sum))
    }
    fn cuda(&self) -> CudaOp {
        let t = T::cuda_name();
        let w = T::W::CUDA;
        let name = format!("LogSumExp_{}", cuda_ident(&t));
        let finish = T::narrow_cuda("cfc::lse_finish(a.max, a.sum)");
        CudaOp {
            type_name: format!("cfc::{name}"),
            source: format!(
                "{}namespace cfc {{\nstruct {name} {{\n    typedef {t} In; typedef Lse<{w}> Acc; typedef {t} Out;\n    \
                 __device__ Acc identity() const {{ Acc r; r.max = ({w})(-__longlong_as_double(0x7ff0000000000000ll)); r.sum = 0; return r; }}\n    \
                 __device__ Acc lift(In x, cf::u64) const {{ Acc r; r.max = ({w})cf::up(x); r.sum = 1; return r; }}\n    \
                 __device__ Acc combine(Acc a, Acc b) const {{ return lse_combine(a, b); }}\n    \
                 __device__ Out finish(Acc a, cf::u64) const {{ return {finish}; }}\n}};\n}}\n",
                lse_cuda()
            ),
        }
    }
}

// ---- exp and ln from + - * / in f64, the same on both sides ----
//
// exp: x = k ln2 + r with k = floor(x log2(e) + 1/2) and |r| <= ln2 / 2 (Cody–Waite, ln2 in
// two parts whose first has trailing zeros so that k * LN2_HI is exact), e^r by its Taylor
// series to degree 13 (remainder below 2^-56 relative) in Horner form, times 2^k built from
// its bits (in two steps where 2^k is not a normal double).
// ln: s = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(t), t = (m - 1) / (m + 1),
// |t| <= 0.1716, by its series to t^23.

const LOG2E: f64 = std::f64::consts::LOG2_E;
const LN2_HI: f64 = 0.693_147_180_369_123_8; // 0x3fe62e42fee00000: k * LN2_HI is exact
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10; // 0x3dea39ef35793c76, ln 2 - LN2_HI

/// The bits of the two parts of ln 2 that `exp32` and `exp64` reduce by (fdlibm's).
///
/// ```
/// let (hi, lo) = cufold_candle::ops::ln2_parts();
/// assert_eq!(f64::from_bits(hi) + f64::from_bits(lo), std::f64::consts::LN_2);
/// ```
pub fn ln2_parts() -> (u64, u64) {
    (LN2_HI.to_bits(), LN2_LO.to_bits())
}

/// 2^k for a k whose power is a normal double (-1022..=1023).
fn pow2(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

fn exp_reduced(x: f64) -> (f64, i64) {
    let k = (x * LOG2E + 0.5).floor();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    // Taylor coefficients 1/j!, j = 13 down to 1.
    let mut p = EXP_TOP;
    for c in EXP_COEFFS {
        p = p * r + c;
    }
    (p, k as i64)
}

const EXP_TOP: f64 = 1.0 / 6_227_020_800.0;
const EXP_COEFFS: [f64; 13] = [
    1.0 / 479_001_600.0,
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
    1.0,
];

/// `e^x` for f64 inputs, within a few ulps; the bits of `LSE_CUDA`'s `cfc::exp64`.
///
/// ```
/// assert!((cufold_candle::ops::exp64(1.0) - std::f64::consts::E).abs() < 1e-15);
/// assert_eq!(cufold_candle::ops::exp64(f64::NEG_INFINITY), 0.0);
/// ```
pub fn exp64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.782_712_893_384 {
        return f64::INFINITY;
    }
    if x < -745.2 {
        return 0.0;
    }
    let (p, k) = exp_reduced(x);
    if k < -1020 {
        (p * pow2(k + 600)) * pow2(-600)
    } else if k > 1023 {
        (p * pow2(k - 1)) * 2.0
    } else {
        p * pow2(k)
    }
}

/// `e^x` for f32 inputs, computed in f64 and rounded once; the bits of `LSE_CUDA`'s
/// `cfc::exp32`.
///
/// ```
/// assert_eq!(cufold_candle::ops::exp32(0.0), 1.0);
/// assert!((cufold_candle::ops::exp32(-1.0) - (-1.0f32).exp()).abs() <= f32::EPSILON);
/// ```
pub fn exp32(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x > 88.8 {
        return f32::INFINITY;
    }
    if x < -104.0 {
        return 0.0;
    }
    let (p, k) = exp_reduced(x as f64);
    (p * pow2(k)) as f32
}

/// `ln(s)` in f64, within a few ulps (NaN and negative give NaN, 0 gives -inf, inf gives
/// inf); the bits of `LSE_CUDA`'s `cfc::ln64`.
///
/// ```
/// assert!((cufold_candle::ops::ln64(10.0) - 10f64.ln()).abs() < 1e-15);
/// ```
pub fn ln64(s: f64) -> f64 {
    if s.is_nan() || s < 0.0 {
        return f64::NAN;
    }
    if s == 0.0 {
        return f64::NEG_INFINITY;
    }
    if s == f64::INFINITY {
        return s;
    }
    let (mut s, mut e) = (s, 0i64);
    if s < 2.2250738585072014e-308 {
        s *= 18014398509481984.0; // 2^54
        e = -54;
    }
    let bits = s.to_bits();
    e += ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    // 2 (t + t^3/3 + ... + t^23/23), Horner in t2.
    let mut q = LN_TOP;
    for c in LN_COEFFS {
        q = q * t2 + c;
    }
    let ef = e as f64;
    ef * LN2_HI + (ef * LN2_LO + 2.0 * t * q)
}

const LN_TOP: f64 = 1.0 / 23.0;
const LN_COEFFS: [f64; 11] = [
    1.0 / 21.0,
    1.0 / 19.0,
    1.0 / 17.0,
    1.0 / 15.0,
    1.0 / 13.0,
    1.0 / 11.0,
    1.0 / 9.0,
    1.0 / 7.0,
    1.0 / 5.0,
    1.0 / 3.0,
    1.0,
];

/// The C++ of [`LSE_CUDA`] with the constants and coefficients the Rust half uses, printed
/// exactly (Rust's shortest round-trip form).
fn lse_cuda() -> String {
    let lit = |x: f64| format!("{x:?}");
    let steps = |cs: &[f64], v: &str, var: &str| {
        cs.iter()
            .map(|&c| format!("    {v} = {v} * {var} + {};\n", lit(c)))
            .collect::<String>()
    };
    LSE_CUDA
        .replace("@EXP_TOP@", &lit(EXP_TOP))
        .replace("@EXP_STEPS@", &steps(&EXP_COEFFS, "p", "r"))
        .replace("@LN_TOP@", &lit(LN_TOP))
        .replace("@LN_STEPS@", &steps(&LN_COEFFS, "q", "t2"))
        .replace("@LOG2E@", &lit(LOG2E))
        .replace("@LN2_HI@", &lit(LN2_HI))
        .replace("@LN2_LO@", &lit(LN2_LO))
        .replace("@SQRT2@", &lit(std::f64::consts::SQRT_2))
}

/// The CUDA twins of `exp32`, `exp64`, `ln64` and the log-sum-exp combine and finish,
/// written to do the same operations in the same order (kernels compile with
/// `--fmad=false`, so nothing is contracted).
const LSE_CUDA: &str = r#"#ifndef CFC_LSE
#define CFC_LSE
namespace cfc {
template <class W> struct Lse { W max; W sum; };
__device__ __forceinline__ double pow2(long long k) { return __longlong_as_double((k + 1023) << 52); }
__device__ __forceinline__ double exp_reduced(double x, long long* k_out) {
    const double LOG2E = @LOG2E@, LN2_HI = @LN2_HI@, LN2_LO = @LN2_LO@;
    const double k = floor(x * LOG2E + 0.5);
    const double r = (x - k * LN2_HI) - k * LN2_LO;
    double p = @EXP_TOP@;
@EXP_STEPS@    *k_out = (long long)k;
    return p;
}
__device__ __forceinline__ double exp64(double x) {
    if (x != x) return x;
    if (x > 709.782712893384) return __longlong_as_double(0x7ff0000000000000ll);
    if (x < -745.2) return 0.0;
    long long k;
    const double p = exp_reduced(x, &k);
    if (k < -1020) return (p * pow2(k + 600)) * pow2(-600);
    if (k > 1023) return (p * pow2(k - 1)) * 2.0;
    return p * pow2(k);
}
__device__ __forceinline__ float exp32(float x) {
    if (x != x) return x;
    if (x > 88.8f) return __int_as_float(0x7f800000);
    if (x < -104.0f) return 0.0f;
    long long k;
    const double p = exp_reduced((double)x, &k);
    return (float)(p * pow2(k));
}
__device__ __forceinline__ double ln64(double s) {
    if (s != s || s < 0.0) return __longlong_as_double(0x7ff8000000000000ll);
    if (s == 0.0) return __longlong_as_double((long long)0xfff0000000000000ull);
    if (s == __longlong_as_double(0x7ff0000000000000ll)) return s;
    long long e = 0;
    if (s < 2.2250738585072014e-308) { s *= 18014398509481984.0; e = -54; }
    const unsigned long long bits = (unsigned long long)__double_as_longlong(s);
    e += (long long)((bits >> 52) & 0x7ff) - 1023;
    double m = __longlong_as_double((long long)((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull));
    if (m > @SQRT2@) { m *= 0.5; e += 1; }
    const double t = (m - 1.0) / (m + 1.0);
    const double t2 = t * t;
    double q = @LN_TOP@;
@LN_STEPS@    const double LN2_HI = @LN2_HI@, LN2_LO = @LN2_LO@;
    const double ef = (double)e;
    return ef * LN2_HI + (ef * LN2_LO + 2.0 * t * q);
}
__device__ __forceinline__ float pexp(float x) { return exp32(x); }
__device__ __forceinline__ double pexp(double x) { return exp64(x); }
__device__ __forceinline__ double lse_finish(float max, float sum) { return (double)max + ln64((double)sum); }
__device__ __forceinline__ double lse_finish(double max, double sum) { return max + ln64(sum); }
template <class W> __device__ __forceinline__ Lse<W> lse_combine(Lse<W> a, Lse<W> b) {
    Lse<W> r;
    if (a.max == b.max) { r.max = a.max; r.sum = a.sum + b.sum; }
    else if (a.max > b.max) { r.max = a.max; r.sum = a.sum + b.sum * pexp(b.max - a.max); }
    else { r.max = b.max; r.sum = a.sum * pexp(a.max - b.max) + b.sum; }
    return r;
}
}
#endif
"#;
