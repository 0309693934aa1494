//! The compensated sum: [`CompensatedSum`], a double-word accumulator on the canonical tree.
//!
//! Each accumulator is a [`DoubleWord`] `(hi, lo)` whose value is `hi + lo` exactly: a lift
//! is `(x, 0)`, a combine adds the high words with TwoSum (error-free), adds the low words
//! and TwoSum's error to a correction, and renormalises with FastTwoSum; the finish rounds
//! `hi + lo` to the element type. kernels/compensated.cuh is the CUDA half, operation for
//! operation: additions and subtractions only, so the bits agree.

use super::{device_struct, CudaOp, Operator};
use crate::element::Element;
use crate::laws::{Approx, Tolerance};

/// The accumulator of [`CompensatedSum`]: a high and a low word whose exact sum is the
/// value, with `|lo|` at most half an ulp of `hi` (the low word holds what `hi` could not).
/// The words are f32 for f32, f16 and bf16 elements and f64 for f64 elements.
///
/// ```
/// use cufold::ops::{CompensatedSum, DoubleWord, Operator};
/// let op = CompensatedSum;
/// let a = <CompensatedSum as Operator<f32>>::combine(&op, op.lift(1.0f32, 0), op.lift(1e-8f32, 1));
/// assert_eq!(a, DoubleWord { hi: 1.0f32, lo: 1e-8 }); // 1 + 1e-8 is 1 in f32: the rest is kept
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct DoubleWord<W> {
    /// The high word: the value rounded to `W`.
    pub hi: W,
    /// The low word: the rest, exactly.
    pub lo: W,
}
device_struct!(DoubleWord, "DoubleWord", Element, dense = T::DENSE);

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The words of a [`DoubleWord`]: f32 and f64 (sealed). [`CompensatedSum`] takes the element
/// types whose [`Element::Calc`] is one of them: f32, f64, f16 and bf16.
pub trait CompensatedWord:
    Element + Approx + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + sealed::Sealed
{
    /// Neither an infinity nor a NaN.
    #[doc(hidden)]
    fn finite(self) -> bool;
    /// The absolute value.
    #[doc(hidden)]
    fn magnitude(self) -> Self;
    /// The spacing of this type's values at magnitude `m` (for [`Approx`]).
    #[doc(hidden)]
    fn ulp_at(m: f64) -> f64;
}

impl CompensatedWord for f32 {
    #[inline(always)]
    fn finite(self) -> bool {
        self.is_finite()
    }
    #[inline(always)]
    fn magnitude(self) -> Self {
        self.abs()
    }
    fn ulp_at(m: f64) -> f64 {
        let e = ((m as f32).to_bits() >> 23) & 0xff;
        2f64.powi(e.max(1) as i32 - 127 - 23)
    }
}

impl CompensatedWord for f64 {
    #[inline(always)]
    fn finite(self) -> bool {
        self.is_finite()
    }
    #[inline(always)]
    fn magnitude(self) -> Self {
        self.abs()
    }
    fn ulp_at(m: f64) -> f64 {
        let e = (m.to_bits() >> 52) & 0x7ff;
        2f64.powi(e.max(1) as i32 - 1023 - 52)
    }
}

impl<W: CompensatedWord> Approx for DoubleWord<W> {
    /// `Bits` and `Exact`: both words, as floats compare under them. `Relative` and `Ulps`:
    /// the values `hi + lo`, within `eps` times the larger `|hi|` or within that many ulps
    /// of `W` there (the high words alone where either is not finite).
    fn approx_eq(&self, other: &Self, tol: Tolerance) -> bool {
        match tol {
            Tolerance::Bits | Tolerance::Exact => {
                self.hi.approx_eq(&other.hi, tol) && self.lo.approx_eq(&other.lo, tol)
            }
            Tolerance::Relative(_) | Tolerance::Ulps(_) => {
                if !self.hi.finite() || !other.hi.finite() {
                    return self.hi.approx_eq(&other.hi, tol);
                }
                let d =
                    (self.hi.to_f64() - other.hi.to_f64()) + (self.lo.to_f64() - other.lo.to_f64());
                let m = self.hi.to_f64().abs().max(other.hi.to_f64().abs());
                match tol {
                    Tolerance::Relative(eps) => d.abs() <= eps * m,
                    Tolerance::Ulps(n) => d.abs() <= n as f64 * W::ulp_at(m),
                    _ => unreachable!(),
                }
            }
        }
    }
}

/// `(s, e)`: `s = RN(a + b)` and `e = a + b - s` exactly, as `cf::dw::two_sum`: FastTwoSum
/// with the operand of larger magnitude first (a comparison and two selects, no branch).
/// Knuth's six-operation TwoSum gives the same `(s, e)` but can overflow inside where `s`
/// is finite: for `a = -1.5 * 2^104` and `b = f32::MAX`, `s - a` is `f32::MAX` plus half an
/// ulp, which rounds to infinity, and the sum came out NaN. Here `s - big` is `small` plus
/// `s`'s rounding error: it overflows only if both magnitudes are the largest finite value,
/// where `s` is 0 (opposite signs) or itself infinite.
#[inline(always)]
fn two_sum<W: CompensatedWord>(a: W, b: W) -> (W, W) {
    let (big, small) = if a.magnitude() >= b.magnitude() {
        (a, b)
    } else {
        (b, a)
    };
    fast_two_sum(big, small)
}

/// `(s, e)`: `s = RN(a + b)` and `e = a + b - s`, exact when `a`'s exponent is at least
/// `b`'s (Dekker's FastTwoSum), as `cf::dw::fast_two_sum`.
#[inline(always)]
fn fast_two_sum<W: CompensatedWord>(a: W, b: W) -> (W, W) {
    let s = a + b;
    let z = s - a;
    (s, b - z)
}

/// The double-word sum of `a` and `b`, as `cf::dw::add`: TwoSum of the high words, the low
/// words and its error added, FastTwoSum to renormalise; a high word that is not finite is
/// kept with a zero low word.
#[inline(always)]
fn add<W: CompensatedWord>(a: DoubleWord<W>, b: DoubleWord<W>) -> DoubleWord<W> {
    let (s, e) = two_sum(a.hi, b.hi);
    let t = a.lo + b.lo;
    let c = e + t;
    let (hi, lo) = fast_two_sum(s, c);
    if s.finite() {
        DoubleWord { hi, lo }
    } else {
        DoubleWord {
            hi: s,
            lo: W::zero(),
        }
    }
}

/// The compensated sum: pairwise summation along the canonical tree with a double-word
/// accumulator (TwoSum-based, of the Sum2 / double-double class), rounded once to the
/// element type at the end. About as accurate as a plain sum in twice the working precision,
/// at the cost of a few more additions per element; the GPU's bits equal the CPU's, as for
/// every operator built from `+` and `-` (kernels/compensated.cuh).
///
/// **Error bound.** For `n` elements with exact sum `S`, `u` the unit roundoff of the
/// accumulator's words (2^-24 for f32, f16 and bf16 elements, whose words are f32; 2^-53 for
/// f64) and no intermediate overflow, the result `r` of a reduction satisfies
///
/// ```text
/// |r - S| <= u_T |S| + 4 ceil(log2 n) u^2 sum |x_i|        (f32, f64: u_T = u)
/// ```
///
/// with `u_T` the element type's unit roundoff (for f16 and bf16, whose result is rounded
/// once more from f32, `u_T + 2u` in place of `u_T`). So the relative error is `u_T` (the
/// final rounding) plus `4 ceil(log2 n) u^2` times the condition number
/// `sum |x_i| / |S|`. For positive data (condition number 1) the accumulator is within
/// `4 ceil(log2 n) u^2` relative of the exact sum (8e-13 for 2^28 f32 elements), and the
/// result is that value rounded once: the correctly rounded sum unless the exact sum lies
/// that close to a midpoint between two neighbours of the element type, else its
/// neighbour. Since `4 ceil(log2 n) <= n^2`, this implies the bound
/// Ogita, Rump and Oishi prove for their sequential Sum2 ("Accurate sum and dot product",
/// SISC 2005), `u|S| + γ_n^2 sum |x_i|` with `γ_n = n u / (1 - n u)`, for every `n` with
/// `n u < 1`. Derivation: each combine is exact but for the rounding of `a.lo + b.lo` and
/// of the correction, at most `(3 + u) u^2 (|a.hi| + |b.hi|)` (the low words are at most
/// `u` times their high words), and FastTwoSum is exact here because the correction's
/// exponent never exceeds the high sum's; along the tree each element's magnitude is
/// counted once per level it passes through, and the canonical tree has `ceil(log2 n)`.
///
/// **Scans.** A prefix of `m` elements is combined along the canonical grouping (the trees
/// of the aligned power-of-two blocks of `[0, m)`, folded left), in which an element passes
/// through at most `d(m) = floor(log2 m) + ones(m) - 1` combines (`ones`: the one bits of
/// `m`; `d(m) <= 2 floor(log2 m)`): each prefix is within the bound above with `d(m)` in
/// place of `ceil(log2 n)` (and within Sum2's, as `4 d(m) <= m^2`). The error of a prefix
/// does not drift as the prefixes grow, unlike a plain scan's.
///
/// **Special values.** As the plain [`Sum`](super::Sum): any NaN, or `+inf` with `-inf`,
/// gives NaN; otherwise an infinity gives itself; a sum that overflows gives the infinity of
/// its sign (a high word that is not finite is carried with a zero low word). Zero sums are
/// `+0.0` (the sign of a sum of `-0.0` elements is not kept). Subnormals are not flushed.
///
/// Not [order-free](Operator::ORDER_FREE): the bits depend on the grouping (the canonical
/// tree fixes it), though `combine` is commutative. Scannable, as above.
///
/// ```
/// use cufold::{ops::{CompensatedSum, Sum}, Cpu, ScanKind};
/// let cpu = Cpu::new();
/// assert_eq!(cpu.reduce(&[1e8f32, 1.0, -1e8], CompensatedSum)?, 1.0);
/// assert_eq!(cpu.reduce(&[1e8f32, 1.0, -1e8], Sum)?, 0.0);
/// let x: Vec<f32> = (1..=1000).map(|i| 1.0 / i as f32).collect();
/// let c = cpu.reduce(&x, CompensatedSum)?;
/// let last = *cpu.scan(&x, CompensatedSum, ScanKind::Inclusive)?.last().unwrap();
/// assert_eq!(last, c); // the last prefix is the sum, to the bit
/// assert!(cpu.reduce(&[f32::INFINITY, 1.0], CompensatedSum)?.is_infinite());
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct CompensatedSum;

impl<T: Element> Operator<T> for CompensatedSum
where
    T::Calc: CompensatedWord,
{
    type Acc = DoubleWord<T::Calc>;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const LANE_RUNS: bool = true;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "CompensatedSum";
    fn identity(&self) -> Self::Acc {
        DoubleWord {
            hi: T::Calc::zero(),
            lo: T::Calc::zero(),
        }
    }
    #[inline(always)]
    fn lift(&self, x: T, _: u64) -> Self::Acc {
        DoubleWord {
            hi: x.to_calc(),
            lo: T::Calc::zero(),
        }
    }
    #[inline(always)]
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
        add(a, b)
    }
    fn finish(&self, acc: Self::Acc, _: u64) -> T {
        T::from_calc(if acc.hi.finite() {
            acc.hi + acc.lo
        } else {
            acc.hi
        })
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("CompensatedSum")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lift(x: f64) -> DoubleWord<f64> {
        <CompensatedSum as Operator<f64>>::lift(&CompensatedSum, x, 0)
    }
    fn sum(a: DoubleWord<f64>, b: DoubleWord<f64>) -> DoubleWord<f64> {
        <CompensatedSum as Operator<f64>>::combine(&CompensatedSum, a, b)
    }

    #[test]
    fn two_sum_is_error_free_and_the_result_normalised() {
        assert_eq!(two_sum(2f64.powi(53), 1.0), (2f64.powi(53), 1.0));
        assert_eq!(two_sum(1.0, -2f64.powi(-60)), (1.0, -2f64.powi(-60)));
        assert_eq!(two_sum(-2f64.powi(-60), 1.0), (1.0, -2f64.powi(-60)));
        assert_eq!(fast_two_sum(3.0f32, 2f32.powi(-30)), (3.0, 2f32.powi(-30)));
        let r = sum(lift(1.0), lift(2f64.powi(-60)));
        assert_eq!((r.hi, r.lo), (1.0, 2f64.powi(-60)));
        // A normalised accumulator is a fixed point of the identity.
        let id = <CompensatedSum as Operator<f64>>::identity(&CompensatedSum);
        assert_eq!(sum(r, id), r);
        assert_eq!(sum(id, r), r);
    }

    #[test]
    fn non_finite_high_words_stay_as_the_plain_sum_has_them() {
        let inf = sum(lift(f64::INFINITY), lift(1.0));
        assert_eq!((inf.hi, inf.lo), (f64::INFINITY, 0.0));
        assert!(sum(inf, lift(f64::NEG_INFINITY)).hi.is_nan());
        let over = sum(lift(f64::MAX), lift(f64::MAX));
        assert_eq!(over.hi, f64::INFINITY);
        let fin = |a| <CompensatedSum as Operator<f64>>::finish(&CompensatedSum, a, 2);
        assert_eq!(fin(over), f64::INFINITY);
        assert!(fin(sum(lift(f64::NAN), lift(1.0))).is_nan());
    }

    /// A finite sum next to the largest finite value, in either order: `s - a` of Knuth's
    /// TwoSum overflowed here (f32::MAX plus half an ulp) and the sum came out NaN.
    #[test]
    fn a_finite_sum_next_to_the_largest_value_is_finite() {
        let op = CompensatedSum;
        let (a, b) = (-1.5 * 2f32.powi(104), f32::MAX);
        let want = f32::MAX - 2f32.powi(104); // MAX - 1.5 ulp, a tie: to the even MAX - 1 ulp
        for (x, y) in [(a, b), (b, a)] {
            let r = <CompensatedSum as Operator<f32>>::combine(&op, op.lift(x, 0), op.lift(y, 1));
            assert_eq!((r.hi, r.lo), (want, -2f32.powi(103)), "{x:e} + {y:e}");
            assert_eq!(<CompensatedSum as Operator<f32>>::finish(&op, r, 2), want);
        }
        let (a, b) = (-1.5 * 2f64.powi(971), f64::MAX);
        for (x, y) in [(a, b), (b, a)] {
            let r = sum(lift(x), lift(y));
            assert_eq!(
                (r.hi, r.lo),
                (f64::MAX - 2f64.powi(971), -2f64.powi(970)),
                "{x:e} + {y:e}"
            );
        }
    }
}
