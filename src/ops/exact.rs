//! Exact sums: [`ExactSum`] and [`ExactMean`], the correctly rounded sum and mean of
//! floating-point elements, whatever their number, order or condition.
//!
//! The accumulator ([`ExactAcc`]) is a fixed-point integer wide enough for every sum of
//! fewer than 2^64 elements of the type: `K` signed 64-bit chunks, chunk `i` worth
//! `2^(LOW + 48 i)`, where `LOW` is the exponent of the smallest subnormal (`2^-149` for
//! f32, f16 and bf16, `2^-1074` for f64). In canonical form, the form of every accumulator
//! that `lift` and `combine` return, chunks `0..K-1` hold digits in `[0, 2^48)` and the top
//! chunk holds the rest, signed (two's complement across the chunks): each value has one
//! form, so an accumulator's bits depend on the set of elements only, and the operators are
//! [order-free](Operator::ORDER_FREE). kernels/exact.cuh is the CUDA half, step for step;
//! both round from the integers, so their bits agree by construction.

use super::{CudaOp, Operator};
use crate::element::{DeviceValue, Element};
use crate::gpu::jit::embedded::defines;
use crate::laws::{Approx, Tolerance};
use half::{bf16, f16};

/// Bits of one digit (a chunk's share in canonical form).
const DIGIT: u32 = defines::CF_EXACT_DIGIT;
const MASK: i64 = (1 << DIGIT) - 1;
/// Chunks of the f32 (f16, bf16) and f64 accumulators.
const CHUNKS_F32: usize = defines::CF_EXACT_CHUNKS_F32 as usize;
const CHUNKS_F64: usize = defines::CF_EXACT_CHUNKS_F64 as usize;
/// The most chunks of any accumulator, plus the mean's extra digit.
const MAX_DIGITS: usize = CHUNKS_F64 + 1;
/// Elements a leaf adds between normalisations: each adds less than 2^48 to a chunk, so the
/// chunks stay below 2^62 in magnitude.
const LEAF_ADDS: usize = 1 << 13;

const NAN: u64 = defines::CF_EXACT_NAN as u64;
const POS_INF: u64 = defines::CF_EXACT_POS_INF as u64;
const NEG_INF: u64 = defines::CF_EXACT_NEG_INF as u64;
const SEEN: u64 = defines::CF_EXACT_SEEN as u64;
const NOT_NEG_ZERO: u64 = defines::CF_EXACT_NOT_NEG_ZERO as u64;

/// The exact accumulator of [`ExactSum`] and [`ExactMean`]: `K` signed 64-bit chunks of a
/// fixed-point integer and a word of flags (NaN, `+inf`, `-inf`, whether any element was
/// seen, whether any was not `-0.0`), `8 (K + 1)` bytes. `K` is 7 for f32, f16 and bf16
/// (64 bytes) and 45 for f64 (368 bytes).
///
/// Its fields are private: it is the value [`Cpu::reduce_acc`](crate::Cpu::reduce_acc)
/// and the kernels pass around, and two accumulators of the same elements, in any order,
/// are equal bit for bit.
///
/// ```
/// use cufold::ops::{ExactAcc, ExactSum, Operator};
/// let lift = |x: f64| ExactSum.lift(x, 0);
/// let add = |a, b| <ExactSum as Operator<f64>>::combine(&ExactSum, a, b);
/// let (big, one, minus_big) = (lift(1e100), lift(1.0), lift(-1e100));
/// let left: ExactAcc<45> = add(add(big, one), minus_big);
/// let right = add(minus_big, add(one, big));
/// assert_eq!(left, right); // the same bits
/// assert_eq!(<ExactSum as Operator<f64>>::finish(&ExactSum, left, 3), 1.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct ExactAcc<const K: usize> {
    chunks: [i64; K],
    flags: u64,
}

// SAFETY: #[repr(C)]: K i64 and a u64, the fields of cf::ExactAcc<K> in the same order.
unsafe impl<const K: usize> cudarc::driver::DeviceRepr for ExactAcc<K> {}
// SAFETY: integers only, for which zero bits are valid.
unsafe impl<const K: usize> cudarc::driver::ValidAsZeroBits for ExactAcc<K> {}
// SAFETY: cf::ExactAcc<K> (kernels/exact.cuh) is `{ i64 chunk[K]; u64 flags; }`, the same
// size, alignment and layout (its static_assert checks the size); every bit pattern is an
// accumulator (a non-canonical one only if the device wrote garbage).
unsafe impl<const K: usize> DeviceValue for ExactAcc<K> {
    const DENSE: bool = true;
    fn cuda_name() -> String {
        format!("cf::ExactAcc<{K}>")
    }
}

impl<const K: usize> Approx for ExactAcc<K> {
    /// Equal bits, under every tolerance: the accumulator is exact.
    fn approx_eq(&self, other: &Self, _: Tolerance) -> bool {
        self == other
    }
}

mod sealed {
    /// A float format: what the accumulator needs to know of its element type.
    pub trait Sealed: Copy {
        /// Stored significand bits.
        const MANT: u32;
        /// Exponent bits.
        const EXP: u32;
        /// The exponent of the accumulator's unit (chunk 0's lowest bit).
        const LOW: i32;
        /// The bits, as a u64.
        fn exact_bits(self) -> u64;
        /// The value of these bits.
        fn from_exact_bits(b: u64) -> Self;
    }

    /// The chunks and flags of an accumulator (hidden: the type is [`super::ExactAcc`]).
    pub trait Chunks: Copy {
        fn zero() -> Self;
        fn chunks(&self) -> &[i64];
        fn parts_mut(&mut self) -> (&mut [i64], &mut u64);
        fn flags(&self) -> u64;
    }
}
use sealed::{Chunks, Sealed};

impl<const K: usize> Chunks for ExactAcc<K> {
    fn zero() -> Self {
        ExactAcc {
            chunks: [0; K],
            flags: 0,
        }
    }
    fn chunks(&self) -> &[i64] {
        &self.chunks
    }
    fn parts_mut(&mut self) -> (&mut [i64], &mut u64) {
        (&mut self.chunks, &mut self.flags)
    }
    fn flags(&self) -> u64 {
        self.flags
    }
}

/// The element types of [`ExactSum`] and [`ExactMean`]: f32, f64, f16 and bf16, each with
/// its exact accumulator (f16 and bf16 share f32's, which holds them exactly). Sealed.
///
/// ```
/// use cufold::ops::{ExactAcc, ExactFloat};
/// fn acc_of<T: ExactFloat>() -> usize { std::mem::size_of::<T::Acc>() }
/// assert_eq!(acc_of::<f32>(), std::mem::size_of::<ExactAcc<7>>());
/// assert_eq!((acc_of::<f32>(), acc_of::<f64>(), acc_of::<cufold::f16>()), (64, 368, 64));
/// ```
pub trait ExactFloat: Element + sealed::Sealed {
    /// The exact accumulator: [`ExactAcc<7>`] for f32, f16 and bf16, [`ExactAcc<45>`] for
    /// f64.
    type Acc: DeviceValue + Approx + PartialEq + Chunks;
}

macro_rules! exact_float {
    ($t:ty, $k:expr, $mant:expr, $exp:expr, $low:expr, $bits:expr, $of:expr) => {
        impl ExactFloat for $t {
            type Acc = ExactAcc<{ $k }>;
        }
        impl Sealed for $t {
            const MANT: u32 = $mant;
            const EXP: u32 = $exp;
            const LOW: i32 = $low;
            #[inline(always)]
            fn exact_bits(self) -> u64 {
                $bits(self) as u64
            }
            #[inline(always)]
            fn from_exact_bits(b: u64) -> Self {
                $of(b)
            }
        }
    };
}
exact_float!(f32, CHUNKS_F32, 23, 8, -149, f32::to_bits, |b: u64| {
    f32::from_bits(b as u32)
});
exact_float!(f64, CHUNKS_F64, 52, 11, -1074, f64::to_bits, f64::from_bits);
exact_float!(f16, CHUNKS_F32, 10, 5, -149, f16::to_bits, |b: u64| {
    f16::from_bits(b as u16)
});
exact_float!(bf16, CHUNKS_F32, 7, 8, -149, bf16::to_bits, |b: u64| {
    bf16::from_bits(b as u16)
});

/// The exponent of the smallest subnormal of a format of `mant` stored significand bits
/// and `exp` exponent bits.
fn sub_exp(mant: u32, exp: u32) -> i32 {
    2 - (1 << (exp - 1)) - mant as i32
}

/// Carries propagated upwards: the canonical form of the same value.
#[inline(always)]
fn normalize(c: &mut [i64]) {
    let (top, low) = c.split_last_mut().expect("chunks");
    let mut carry = 0i64;
    for v in low {
        let t = *v + carry;
        *v = t & MASK;
        carry = t >> DIGIT;
    }
    *top += carry;
}

/// `mant * 2^pos` (pos counted from the unit), negated if `neg`, added into `c` without
/// normalising: as `cf::exact::deposit`.
#[inline(always)]
fn deposit(c: &mut [i64], neg: bool, mant: u64, pos: u32) {
    let i = (pos / DIGIT) as usize;
    let s = pos % DIGIT;
    let lo = (mant << s) as i64 & MASK;
    let mid = (mant >> (DIGIT - s)) as i64 & MASK;
    let hi = if s > 2 * DIGIT - 64 {
        (mant >> (2 * DIGIT - s)) as i64
    } else {
        0
    };
    let sign = if neg { -1 } else { 1 };
    c[i] += sign * lo;
    c[i + 1] += sign * mid;
    if hi != 0 {
        c[i + 2] += sign * hi;
    }
}

/// `x` added into `c` (not normalised) and into the flags: as `cf::exact::add_element`.
#[inline(always)]
fn add_element<T: ExactFloat>(c: &mut [i64], flags: &mut u64, x: T) {
    let b = x.exact_bits();
    let neg = (b >> (T::MANT + T::EXP)) & 1 != 0;
    let emax = (1u64 << T::EXP) - 1;
    let e = (b >> T::MANT) & emax;
    let frac = b & ((1u64 << T::MANT) - 1);
    if e == emax {
        *flags |= SEEN
            | NOT_NEG_ZERO
            | if frac != 0 {
                NAN
            } else if neg {
                NEG_INF
            } else {
                POS_INF
            };
    } else if e == 0 && frac == 0 {
        *flags |= SEEN | if neg { 0 } else { NOT_NEG_ZERO };
    } else {
        *flags |= SEEN | NOT_NEG_ZERO;
        let mant = if e == 0 { frac } else { frac | 1 << T::MANT };
        let pos = e.max(1) as i32 - 1 + sub_exp(T::MANT, T::EXP) - T::LOW;
        deposit(c, neg, mant, pos as u32);
    }
}

/// The canonical accumulator of `xs` (at most [`LEAF_ADDS`] elements between two
/// normalisations; any number).
#[inline(always)]
fn accumulate<T: ExactFloat>(xs: &[T]) -> T::Acc {
    let mut acc = T::Acc::zero();
    let (c, flags) = acc.parts_mut();
    for part in xs.chunks(LEAF_ADDS) {
        for &x in part {
            add_element(c, flags, x);
        }
        normalize(c);
    }
    acc
}

/// The bits of the NaN or infinity the flags call for, if any, in a format of `mant`
/// stored significand bits and `exp` exponent bits.
fn special_bits(flags: u64, mant: u32, exp: u32) -> Option<u64> {
    let inf = ((1u64 << exp) - 1) << mant;
    let sign = 1u64 << (mant + exp);
    if flags & NAN != 0 || flags & (POS_INF | NEG_INF) == POS_INF | NEG_INF {
        Some(inf | 1 << (mant - 1)) // the quiet NaN, positive
    } else if flags & POS_INF != 0 {
        Some(inf)
    } else if flags & NEG_INF != 0 {
        Some(inf | sign)
    } else {
        None
    }
}

/// The sign of a canonical accumulator's value and its magnitude's canonical digits (in
/// `mag[..c.len()]`); `None` for zero.
fn magnitude(c: &[i64], mag: &mut [u64; MAX_DIGITS]) -> Option<bool> {
    let neg = c[c.len() - 1] < 0;
    let mut m = [0i64; MAX_DIGITS];
    let m = &mut m[..c.len()];
    for (d, &v) in m.iter_mut().zip(c) {
        *d = if neg { -v } else { v };
    }
    normalize(m);
    for (d, &v) in mag.iter_mut().zip(m.iter()) {
        *d = v as u64;
    }
    m.iter().any(|&d| d != 0).then_some(neg)
}

/// Bits `[lo, lo + width)` of the digits (`width` at most 54).
fn window(mag: &[u64], lo: i64, width: u32) -> u64 {
    let d = DIGIT as i64;
    let j0 = lo / d;
    let j1 = ((lo + width as i64 - 1) / d).min(mag.len() as i64 - 1);
    let mut r = 0u64;
    for j in j0..=j1 {
        let base = d * j;
        let v = mag[j as usize];
        r |= if base >= lo {
            v << (base - lo)
        } else {
            v >> (lo - base)
        };
    }
    r & ((1u64 << width) - 1)
}

/// Bit `i` of the digits (the top digit may be wider than 48 bits).
fn bit_at(mag: &[u64], i: i64) -> bool {
    let d = DIGIT as i64;
    let j = (i / d).min(mag.len() as i64 - 1);
    let off = i - d * j;
    off < 64 && (mag[j as usize] >> off) & 1 != 0
}

/// Whether any of bits `[0, end)` of the digits is set.
fn any_below(mag: &[u64], end: i64) -> bool {
    let d = DIGIT as i64;
    let j = (end / d) as usize;
    let off = end - d * j as i64;
    mag[..j.min(mag.len())].iter().any(|&v| v != 0)
        || (j < mag.len() && off > 0 && mag[j] & ((1u64 << off) - 1) != 0)
}

/// The bits of `sum(mag[j] 2^(48 j)) 2^low` (plus a positive amount below `2^low` if
/// `sticky_in`), negated if `neg`, rounded to nearest, ties to even, in the format of
/// `mant` stored significand bits and `exp` exponent bits; `low` lies at or below the
/// format's smallest subnormal. The significand `m` is the `mant + 1` bits from the value's
/// top bit down, or from the subnormal unit up where that is higher, rounded by the bit
/// below it and the sticky bit of all the bits further down; with `q` the binade above the
/// subnormal one, the result's bits are `q * 2^mant + m` (a carry out of `m` moves to the
/// exponent field by itself), infinity past the largest finite. As
/// `cf::exact::round_digits`.
fn round_digits(neg: bool, mag: &[u64], low: i32, sticky_in: bool, mant: u32, exp: u32) -> u64 {
    let sub = (sub_exp(mant, exp) - low) as i64;
    debug_assert!(sub >= 0);
    let top = match mag.iter().rposition(|&d| d != 0) {
        Some(j) => (DIGIT as usize * j) as i64 + 63 - mag[j].leading_zeros() as i64,
        None => -1,
    };
    let lsb = (top - mant as i64).max(sub);
    let mut m = window(mag, lsb, mant + 1);
    let round = lsb >= 1 && bit_at(mag, lsb - 1);
    let sticky = sticky_in || (lsb >= 2 && any_below(mag, lsb - 1));
    if round && (sticky || m & 1 != 0) {
        m += 1;
    }
    let q = (lsb - sub) as u64;
    let inf = ((1u64 << exp) - 1) << mant;
    let bits = if q < (1 << exp) - 1 {
        ((q << mant) + m).min(inf)
    } else {
        inf
    };
    bits | (neg as u64) << (mant + exp)
}

/// The bits of a zero sum: `-0.0` if every element (at least one) was `-0.0`, else `+0.0`.
fn zero_bits(flags: u64, mant: u32, exp: u32) -> u64 {
    let minus = flags & SEEN != 0 && flags & NOT_NEG_ZERO == 0;
    (minus as u64) << (mant + exp)
}

/// [`ExactSum`]'s finish: the exact sum rounded once.
fn sum_of<T: ExactFloat>(acc: &T::Acc) -> T {
    let (mant, exp) = (T::MANT, T::EXP);
    if let Some(b) = special_bits(acc.flags(), mant, exp) {
        return T::from_exact_bits(b);
    }
    let c = acc.chunks();
    let mut mag = [0u64; MAX_DIGITS];
    T::from_exact_bits(match magnitude(c, &mut mag) {
        None => zero_bits(acc.flags(), mant, exp),
        Some(neg) => round_digits(neg, &mag[..c.len()], T::LOW, false, mant, exp),
    })
}

/// [`ExactMean`]'s finish: the exact sum over `n` rounded once (NaN for `n = 0`): the digits
/// with one zero digit appended below the unit, divided by `n` from the top digit down,
/// the remainder a sticky bit.
fn mean_of<T: ExactFloat>(acc: &T::Acc, n: u64) -> T {
    let (mant, exp) = (T::MANT, T::EXP);
    if n == 0 {
        return T::from_exact_bits(((1u64 << exp) - 1) << mant | 1 << (mant - 1));
    }
    if let Some(b) = special_bits(acc.flags(), mant, exp) {
        return T::from_exact_bits(b);
    }
    let c = acc.chunks();
    let k = c.len();
    let mut mag = [0u64; MAX_DIGITS];
    let Some(neg) = magnitude(c, &mut mag) else {
        return T::from_exact_bits(zero_bits(acc.flags(), mant, exp));
    };
    let mut q = [0u64; MAX_DIGITS + 1];
    q[k] = mag[k - 1] / n;
    let mut rem = mag[k - 1] % n;
    for j in (0..k).rev() {
        // Digit j of the extended dividend: mag[j - 1], or the appended zero.
        let d = if j > 0 { mag[j - 1] } else { 0 };
        let cur = (rem as u128) << DIGIT | d as u128;
        q[j] = (cur / n as u128) as u64;
        rem = (cur % n as u128) as u64;
    }
    T::from_exact_bits(round_digits(
        neg,
        &q[..k + 1],
        T::LOW - DIGIT as i32,
        rem != 0,
        mant,
        exp,
    ))
}

/// The correctly rounded sum: the exact sum of the elements, rounded once to the nearest
/// value of the element type (ties to even), on the CPU and the GPU alike, whatever the
/// number of elements, their order, their grouping or the sum's condition number.
///
/// - **Special values**, as IEEE addition: any NaN, or `+inf` with `-inf`, gives NaN (the
///   positive quiet NaN, whatever the inputs' payloads); otherwise an infinity gives itself;
///   finite elements whose exact sum rounds past the largest finite value give the infinity
///   of its sign (`[f64::MAX, f64::MAX, -f64::MAX]` is `f64::MAX`: no intermediate
///   overflows).
/// - **Subnormals** are added and returned as they are, never flushed to zero.
/// - **Zeros**: an exact zero sum is `+0.0`, except `-0.0` when every element is `-0.0`;
///   the sum of no elements is `+0.0`.
///
/// The accumulator ([`ExactAcc`]) holds the exact sum as an integer, so `combine` is exactly
/// associative and commutative, bit for bit: the operator is
/// [order-free](Operator::ORDER_FREE), and every split of the input (rows, segments,
/// devices) reduces to the same bits. f16 and bf16 elements are summed in f32's
/// accumulator, which holds them exactly, and the result is rounded once to f16 or bf16.
///
/// A scan gives every prefix's sum, each rounded once. The f64 accumulator (368 bytes) is
/// too large for a GPU scan block's shared memory: the GPU refuses f64 scans with an
/// [`InvalidConfig`](crate::ErrorKind::InvalidConfig) error, and the CPU backend computes
/// them.
///
/// ```
/// use cufold::{ops::ExactSum, Cpu};
/// let cpu = Cpu::new();
/// assert_eq!(cpu.reduce(&[1e100f64, 1.0, -1e100], ExactSum)?, 1.0); // Sum gives 0
/// assert_eq!(cpu.reduce(&[f64::MAX, f64::MAX, -f64::MAX], ExactSum)?, f64::MAX);
/// assert_eq!(cpu.reduce(&[0.1f32; 10], ExactSum)?, 1.0); // a naive f32 loop gives 1.0000001
/// assert!(cpu.reduce(&[f32::INFINITY, f32::NEG_INFINITY], ExactSum)?.is_nan());
/// assert_eq!(cpu.reduce(&[-0.0f32, -0.0], ExactSum)?.to_bits(), (-0.0f32).to_bits());
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactSum;

impl<T: ExactFloat> Operator<T> for ExactSum {
    type Acc = T::Acc;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const ORDER_FREE: bool = true;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "ExactSum";
    fn identity(&self) -> T::Acc {
        T::Acc::zero()
    }
    fn lift(&self, x: T, _: u64) -> T::Acc {
        accumulate(&[x])
    }
    fn combine(&self, a: T::Acc, b: T::Acc) -> T::Acc {
        combine::<T>(a, b)
    }
    #[inline(always)]
    fn full_leaf(&self, xs: &[T], _: u64) -> Option<T::Acc> {
        Some(accumulate(xs))
    }
    fn finish(&self, acc: T::Acc, _: u64) -> T {
        sum_of::<T>(&acc)
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("ExactSum")
    }
}

/// Chunk-wise sum, normalised; the flags of either.
fn combine<T: ExactFloat>(mut a: T::Acc, b: T::Acc) -> T::Acc {
    let (c, flags) = a.parts_mut();
    for (x, &y) in c.iter_mut().zip(b.chunks()) {
        *x += y;
    }
    normalize(c);
    *flags |= b.flags();
    a
}

/// The correctly rounded mean: the exact sum of the elements divided by their number,
/// rounded once to the nearest value of the element type (ties to even). [`ExactSum`]'s
/// accumulator, finished by a long division of the exact integer by N whose remainder
/// decides the rounding, so neither the sum nor the quotient is rounded on the way
/// (`sum / n` in floating point would round twice, and overflow where the mean does not:
/// the mean of `[f64::MAX, f64::MAX]` is `f64::MAX`).
///
/// Special values as [`ExactSum`]'s (NaN; an infinity; `-0.0` only when every element is
/// `-0.0`); a mean below half the smallest subnormal rounds to a zero of its sign.
/// [Order-free](Operator::ORDER_FREE). Empty input: an error (`finish(identity, 0)` is NaN).
///
/// ```
/// use cufold::{ops::ExactMean, Cpu};
/// let cpu = Cpu::new();
/// assert_eq!(cpu.reduce(&[1.0f32, 2.0, 4.0, 5.0], ExactMean)?, 3.0);
/// assert_eq!(cpu.reduce(&[f64::MAX, f64::MAX], ExactMean)?, f64::MAX);
/// assert_eq!(cpu.reduce(&[1e30f64, 1.0, -1e30], ExactMean)?, 1.0 / 3.0);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactMean;

impl<T: ExactFloat> Operator<T> for ExactMean {
    type Acc = T::Acc;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const ORDER_FREE: bool = true;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "ExactMean";
    fn identity(&self) -> T::Acc {
        T::Acc::zero()
    }
    fn lift(&self, x: T, _: u64) -> T::Acc {
        accumulate(&[x])
    }
    fn combine(&self, a: T::Acc, b: T::Acc) -> T::Acc {
        combine::<T>(a, b)
    }
    #[inline(always)]
    fn full_leaf(&self, xs: &[T], _: u64) -> Option<T::Acc> {
        Some(accumulate(xs))
    }
    fn finish(&self, acc: T::Acc, n: u64) -> T {
        mean_of::<T>(&acc, n)
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("ExactMean")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ranges_fit() {
        // The top bit of the largest finite, and of 2^64 of them, against the chunks.
        for (k, low, top) in [(CHUNKS_F32, -149i32, 128i32), (CHUNKS_F64, -1074, 1024)] {
            let max_bit = (top - 1 - low) as usize; // the largest finite's top bit
            assert!(
                max_bit / DIGIT as usize + 2 < k + 1,
                "deposits stay in the chunks"
            );
            // 2^64 elements: the value below 2^(top + 64); the signed top chunk holds 63 bits.
            let needed = (top + 64 - low) as usize;
            assert!((k - 1) * DIGIT as usize + 63 >= needed, "{k} chunks");
        }
    }

    #[test]
    fn lift_is_canonical_and_negation_cancels() {
        for x in [
            1.0f64,
            -1.0,
            5e-324,
            -5e-324,
            f64::MAX,
            -f64::MAX,
            -3.75e-300,
        ] {
            let a = <ExactSum as Operator<f64>>::lift(&ExactSum, x, 0);
            let mut c = a.chunks;
            normalize(&mut c);
            assert_eq!(c, a.chunks, "{x}");
            let b = <ExactSum as Operator<f64>>::lift(&ExactSum, -x, 0);
            let s = combine::<f64>(a, b);
            assert_eq!(s.chunks, [0; CHUNKS_F64], "{x}");
            assert_eq!(<ExactSum as Operator<f64>>::finish(&ExactSum, a, 1), x);
        }
    }
}
