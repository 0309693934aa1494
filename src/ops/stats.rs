//! Means: the plain mean, mean and variance in one pass, and the paper's halving mean.

use super::{CudaOp, Operator, WideSum};
use crate::element::{Element, Real, WideValue, Widen};

/// The arithmetic mean as f64: [`WideSum`]'s sum, divided by N at the end.
///
/// - **Integers** (i32, i64, u32, u64, u8) add exactly in 128 bits (i128 / u128, which no
///   sum of up to 2^64 - 1 elements leaves), and the finish rounds once: the result is the
///   f64 nearest to the exact `sum / N`, ties to even
///   ([`round_ratio_to_f64`](super::round_ratio_to_f64)), on the CPU and the GPU alike. So
///   the mean of `[i64::MAX, i64::MAX]` is `2^63` (the f64 nearest to `i64::MAX`), and no
///   mean of integers wraps. Integer means are [order-free](Operator::ORDER_FREE).
/// - **Floats** add along the canonical tree in the [`Widen::Wide`] type (f32 inputs in
///   f64, f16/bf16 in f32, f64 in f64), and the sum, as f64, is divided by N as f64.
///   Pairwise (tree) summation bounds the rounding error by O(log N) ulps of the wide type,
///   and the wide type leaves room for 2^29 ≥ N f32 values without absorption: adding a
///   small value to a large partial sum keeps its bits.
///
/// Empty input: an error (the exclusive scan's first output, `finish(identity, 0)`, is NaN).
///
/// ```
/// let m = cufold::Cpu::new().reduce(&[1.0f32, 2.0, 4.0, 5.0], cufold::ops::Mean)?;
/// assert_eq!(m, 3.0);
/// let m = cufold::Cpu::new().reduce(&[u64::MAX, u64::MAX], cufold::ops::Mean)?;
/// assert_eq!(m, 2f64.powi(64)); // the f64 nearest to u64::MAX, no wrapping
/// let m = cufold::Cpu::new().reduce(&[i64::MIN, i64::MIN, 1], cufold::ops::Mean)?;
/// assert_eq!(m, -(2f64.powi(64)) / 3.0); // rounded once from the exact (2^64 - 1) / -3
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Mean;

/// [`WideSum`]'s monoid, with a finish that divides by N ([`WideValue::mean_of`]).
impl<T: Widen> Operator<T> for Mean {
    type Acc = T::Wide;
    type Out = f64;
    const COMMUTATIVE: bool = true;
    const ORDER_FREE: bool = !T::IS_FLOAT;
    const LANE_RUNS: bool = <WideSum as Operator<T>>::LANE_RUNS;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "Mean";
    fn identity(&self) -> T::Wide {
        <WideSum as Operator<T>>::identity(&WideSum)
    }
    fn lift(&self, x: T, index: u64) -> T::Wide {
        WideSum.lift(x, index)
    }
    fn combine(&self, a: T::Wide, b: T::Wide) -> T::Wide {
        <WideSum as Operator<T>>::combine(&WideSum, a, b)
    }
    fn finish(&self, acc: T::Wide, n: u64) -> f64 {
        acc.mean_of(n)
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("Mean")
    }
}

/// Count, mean and sum of squared deviations (`m2`): the output of [`MeanVar`].
///
/// ```
/// let s = cufold::Cpu::new().reduce(&[2.0f64, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], cufold::ops::MeanVar)?;
/// assert_eq!(s.mean, 5.0);
/// assert_eq!(s.variance(), 4.0);
/// assert_eq!(s.sample_variance(), 32.0 / 7.0);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct MeanVarValue {
    /// The number of elements (exact up to 2^53).
    pub count: f64,
    /// Their mean.
    pub mean: f64,
    /// The sum of squared deviations from the mean.
    pub m2: f64,
}

// SAFETY: #[repr(C)] with the fields of cf::MeanVarV in the same order.
unsafe impl cudarc::driver::DeviceRepr for MeanVarValue {}
// SAFETY: all fields are f64, for which zero bits are valid.
unsafe impl cudarc::driver::ValidAsZeroBits for MeanVarValue {}
// SAFETY: #[repr(C)] with the fields of cf::MeanVarV in the same order.
unsafe impl crate::DeviceValue for MeanVarValue {
    const DENSE: bool = true;
    fn cuda_name() -> String {
        "cf::MeanVarV".into()
    }
}

impl MeanVarValue {
    /// The population variance, `m2 / count`.
    ///
    /// ```
    /// let s = cufold::ops::MeanVarValue { count: 2.0, mean: 1.0, m2: 2.0 };
    /// assert_eq!(s.variance(), 1.0);
    /// ```
    pub fn variance(&self) -> f64 {
        self.m2 / self.count
    }

    /// The unbiased sample variance, `m2 / (count - 1)`.
    ///
    /// ```
    /// let s = cufold::ops::MeanVarValue { count: 2.0, mean: 1.0, m2: 2.0 };
    /// assert_eq!(s.sample_variance(), 2.0);
    /// ```
    pub fn sample_variance(&self) -> f64 {
        self.m2 / (self.count - 1.0)
    }

    /// The standard error of the mean, `sqrt(sample_variance / count)`: the uncertainty of
    /// [`mean`](MeanVarValue::mean) as a Monte Carlo estimate.
    ///
    /// ```
    /// let s = cufold::ops::MeanVarValue { count: 5.0, mean: 1.0, m2: 20.0 };
    /// assert_eq!(s.std_error(), 1.0); // sqrt(20 / 4 / 5)
    /// ```
    pub fn std_error(&self) -> f64 {
        (self.sample_variance() / self.count).sqrt()
    }
}

/// Mean and variance in one pass over the data, in f64, by Chan, Golub and LeVeque's
/// pairwise update: combining (n_a, mean_a, m2_a) and (n_b, mean_b, m2_b) with
/// `d = mean_b - mean_a` and `w = n_b / n` gives `mean = mean_a + d w`,
/// `m2 = m2_a + m2_b + d² (n_a w)` (`w` is exactly 0.5, without a division, for equal
/// counts). Numerically stable (no `E[x²] - E[x]²` cancellation). Empty input: an error.
///
/// Extremes, as NumPy: where `d` is not finite the mean is `mean_a (1 - w) + mean_b w`, so
/// `[f64::MAX, -f64::MAX]` has mean 0 and `[inf, 1]` mean `inf`; data holding an infinity
/// has NaN variance, and deviations past `f64::MAX` an infinite one.
///
/// On `u8` input every node over `n = 2^k ≤ 2^18` positions is exact: its mean is a multiple
/// of `2^-k` below 256, and its `m2`, `(n Σx² - (Σx)²) / n`, a multiple of `2^-k` below
/// `2^(k+14)` (at most 50 significant bits), so every subtraction, product and sum of the
/// combine is exact. The GPU computes such nodes from integer sums (four bytes an
/// instruction), with the tree's bits.
///
/// ```
/// let s = cufold::Cpu::new().reduce(&[1.0f32, 2.0, 3.0], cufold::ops::MeanVar)?;
/// assert_eq!((s.mean, s.variance()), (2.0, 2.0 / 3.0));
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MeanVar;

impl<T: Element> Operator<T> for MeanVar {
    type Acc = MeanVarValue;
    type Out = MeanVarValue;
    const COMMUTATIVE: bool = true;
    const LANE_RUNS: bool = true;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "MeanVar";
    fn identity(&self) -> MeanVarValue {
        MeanVarValue {
            count: 0.0,
            mean: 0.0,
            m2: 0.0,
        }
    }
    fn lift(&self, x: T, _: u64) -> MeanVarValue {
        MeanVarValue {
            count: 1.0,
            mean: x.to_f64(),
            m2: 0.0,
        }
    }
    fn combine(&self, a: MeanVarValue, b: MeanVarValue) -> MeanVarValue {
        if a.count == 0.0 {
            return b;
        }
        if b.count == 0.0 {
            return a;
        }
        let count = a.count + b.count;
        // b's weight n_b / n: exactly 0.5 for equal counts (every inner node of a full
        // subtree of the canonical tree), where the division is skipped with the same bits.
        let w = if a.count == b.count {
            0.5
        } else {
            b.count / count
        };
        let d = b.mean - a.mean;
        if d.is_finite() {
            return MeanVarValue {
                count,
                mean: a.mean + d * w,
                m2: a.m2 + b.m2 + d * d * (a.count * w),
            };
        }
        // An infinite (or NaN) mean, or a difference past f64::MAX: the weighted mean, which
        // keeps an infinity (NumPy's mean of [inf, 1] is inf) and does not overflow
        // ([f64::MAX, -f64::MAX] has mean 0); the variance of data holding an infinity is
        // NaN, as NumPy's is, and a difference past f64::MAX makes it infinite.
        let m2 = if a.mean.is_finite() && b.mean.is_finite() {
            a.m2 + b.m2 + d * d * (a.count * w)
        } else {
            f64::NAN
        };
        MeanVarValue {
            count,
            mean: a.mean * (1.0 - w) + b.mean * w,
            m2,
        }
    }
    /// `combine` for two non-empty nodes of equal count: the same bits without the
    /// division and the empty-side checks, both cases of `d` computed and one selected
    /// (straight-line code, so that neighbouring combines share vector registers). The CUDA
    /// half's `combine_full` is the same function.
    #[inline(always)]
    fn combine_full(&self, a: MeanVarValue, b: MeanVarValue) -> MeanVarValue {
        let d = b.mean - a.mean;
        let m2 = a.m2 + b.m2 + d * d * (a.count * 0.5);
        let (mean, m2) = if d.is_finite() {
            (a.mean + d * 0.5, m2)
        } else {
            let both_finite = a.mean.is_finite() && b.mean.is_finite();
            (
                a.mean * 0.5 + b.mean * 0.5,
                if both_finite { m2 } else { f64::NAN },
            )
        };
        MeanVarValue {
            count: a.count + b.count,
            mean,
            m2,
        }
    }
    /// The tree of a full leaf with its means and `m2`s in two arrays, a level at a time
    /// ([`moments_level`]): the same operations as `combine_full` on the same values, in
    /// vector lanes.
    #[inline(always)]
    fn full_leaf(&self, xs: &[T], _: u64) -> Option<MeanVarValue> {
        const B: usize = 256;
        // Called with the power-of-two leaves of the tree, at most 4096 positions.
        if xs.len() < 4 || xs.len() > 4096 || !xs.len().is_power_of_two() {
            return None;
        }
        let b = xs.len().min(B);
        let mut tops = [Operator::<T>::identity(self); 4096 / B];
        for (top, xs) in tops.iter_mut().zip(xs.chunks_exact(b)) {
            // Inputs of magnitude at most 2^1022 (no NaN, no infinity) keep every mean
            // within about that and every difference of means finite: the finite branch
            // of `combine_full` throughout, without the selects.
            let tame = xs
                .iter()
                .fold(true, |ok, x| ok & (x.to_f64().abs() <= TAME_MAX));
            let (mean, m2) = if tame {
                moments_tree::<T, true, { B / 4 }>(xs)
            } else {
                moments_tree::<T, false, { B / 4 }>(xs)
            };
            *top = MeanVarValue {
                count: b as f64,
                mean,
                m2,
            };
        }
        let mut len = xs.len() / b;
        while len > 1 {
            for k in 0..len / 2 {
                tops[k] = Operator::<T>::combine_full(self, tops[2 * k], tops[2 * k + 1]);
            }
            len /= 2;
        }
        Some(tops[0])
    }
    fn finish(&self, acc: MeanVarValue, _: u64) -> MeanVarValue {
        acc
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("MeanVar")
    }
}

/// The largest magnitude of [`MeanVar`]'s inputs on the fast path of its leaves: any two
/// means of such inputs differ by less than `f64::MAX`.
const TAME_MAX: f64 = 4.49423283715579e307; // 2^1022

/// [`MeanVar`]'s `combine_full` of `(mean, m2)` pairs of two nodes of `count` positions
/// each: the same operations in the same order, with selects for the branches. `TAME`: the
/// caller knows that `d` is finite (and the means too), so the finite branch is the result.
#[inline(always)]
fn moments<const TAME: bool>(count: f64, a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    let d = b.0 - a.0;
    let m2 = a.1 + b.1 + d * d * (count * 0.5);
    let finite = a.0 + d * 0.5;
    if TAME {
        return (finite, m2);
    }
    let weighted = a.0 * 0.5 + b.0 * 0.5;
    let both_finite = a.0.is_finite() && b.0.is_finite();
    let d_finite = d.is_finite();
    (
        if d_finite { finite } else { weighted },
        if d_finite || both_finite {
            m2
        } else {
            f64::NAN
        },
    )
}

/// One level of [`MeanVar`]'s full tree, means and `m2`s in arrays of their own: node `k`
/// of `dst` joins nodes `2k` and `2k + 1` of `src`, each over `count` positions.
#[inline(always)]
fn moments_level<const TAME: bool>(
    count: f64,
    mean: &[f64],
    m2: &[f64],
    dm: &mut [f64],
    d2: &mut [f64],
) {
    let pairs = mean.chunks_exact(2).zip(m2.chunks_exact(2));
    for ((o, s), (m, q)) in dm.iter_mut().zip(d2.iter_mut()).zip(pairs) {
        (*o, *s) = moments::<TAME>(count, (m[0], q[0]), (m[1], q[1]));
    }
}

/// The top of [`MeanVar`]'s tree over `xs` (a power of two of them, 4 to `4 * H`), a level
/// at a time on arrays of means and of `m2`s.
#[inline(always)]
fn moments_tree<T: Element, const TAME: bool, const H: usize>(xs: &[T]) -> (f64, f64) {
    // The leaves are (1, x, 0); the first pass makes the first two levels, each node of
    // the second joining the pairs of four neighbours. Then a level at a time, between two
    // pairs of arrays.
    let (mut mean, mut m2) = ([0.0; H], [0.0; H]);
    for ((m, s), p) in mean.iter_mut().zip(&mut m2).zip(xs.chunks_exact(4)) {
        let a = moments::<TAME>(1.0, (p[0].to_f64(), 0.0), (p[1].to_f64(), 0.0));
        let b = moments::<TAME>(1.0, (p[2].to_f64(), 0.0), (p[3].to_f64(), 0.0));
        (*m, *s) = moments::<TAME>(2.0, a, b);
    }
    let (mut up_mean, mut up_m2) = ([0.0; H], [0.0; H]);
    let (mut from, mut to) = ((&mut mean, &mut m2), (&mut up_mean, &mut up_m2));
    let mut count = 4.0;
    let mut len = xs.len() / 4;
    while len > 1 {
        let (m, s) = (&from.0[..len], &from.1[..len]);
        moments_level::<TAME>(count, m, s, &mut to.0[..len / 2], &mut to.1[..len / 2]);
        std::mem::swap(&mut from, &mut to);
        len /= 2;
        count *= 2.0;
    }
    (from.0[0], from.1[0])
}

/// The paper's divide-by-two mean (Pechprasarn & Khiripet): every pairwise add halves,
/// `(a + b) / 2`, over the perfect binary tree of `P = next_pow2(N)` leaves, the leaves
/// past N being zeros; `finish` multiplies by the correction `C = P / N`.
///
/// Halving by two is exact in binary floating point, so (subnormals aside) every node of
/// this tree is exactly the pairwise [`Sum`](super::Sum) of its leaves times `2^-level`:
/// the result before correction has the bits of the pairwise sum times `2^-log2(P)`.
/// What halving buys is **overflow headroom** — every node stays within the range of the
/// inputs, so data up to `f32::MAX / 2` in magnitude (the bound on `a + b` before it is
/// halved) is averaged without overflow where a plain sum overflows — not extra accuracy: its
/// rounding errors are exactly those of pairwise summation. The final correction rounds
/// once more (in f64, then to the element type). Empty input: an error.
///
/// ```
/// let m: f32 = cufold::Cpu::new().reduce(&[1.0f32, 2.0, 3.0], cufold::ops::Div2Mean)?;
/// assert_eq!(m, 2.0); // ((1+2)/2 + (3+0)/2)/2 = 1.5, times P/N = 4/3
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Div2Mean;

/// `next_pow2(n)`, with `next_pow2(0) = 1`.
pub(crate) fn next_pow2(n: u64) -> u64 {
    n.max(1).next_power_of_two()
}

impl<T: Real> Operator<T> for Div2Mean {
    type Acc = T;
    type Out = T;
    const COMMUTATIVE: bool = true;
    const LANE_RUNS: bool = std::mem::size_of::<T>() == 8;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "Div2Mean";
    const SCANNABLE: bool = false;
    fn identity(&self) -> T {
        T::zero()
    }
    fn lift(&self, x: T, _: u64) -> T {
        x
    }
    fn combine(&self, a: T, b: T) -> T {
        (a + b) * T::HALF
    }
    fn finish(&self, acc: T, n: u64) -> T {
        T::from_f64(acc.to_f64() * (next_pow2(n) as f64 / n as f64))
    }
    fn cuda(&self) -> CudaOp {
        CudaOp::builtin::<T>("Div2Mean")
    }
}
