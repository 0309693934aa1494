//! What the exact-sum tests share (tests/exact.rs on the CPU, tests/exact_gpu.rs on the GPU):
//! an exact reference written from the IEEE rules, independent of cufold's accumulator, and
//! seeded test data (hard cases, Ogita–Rump–Oishi ill-conditioned sums, wide exponents).
#![allow(dead_code)]

use cufold::{bf16, f16};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;

/// The float formats under test: stored significand bits, exponent bits, and the bits.
pub trait Fmt: Copy + std::fmt::Debug + PartialEq + Send + Sync + 'static {
    const MANT: u32;
    const EXP: u32;
    fn bits(self) -> u64;
    fn of_bits(b: u64) -> Self;
    fn of_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! fmt {
    ($t:ty, $mant:expr, $exp:expr, $u:ty, $of:expr, $to:expr) => {
        impl Fmt for $t {
            const MANT: u32 = $mant;
            const EXP: u32 = $exp;
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
            fn of_bits(b: u64) -> Self {
                <$t>::from_bits(b as $u)
            }
            fn of_f64(x: f64) -> Self {
                $of(x)
            }
            fn to_f64(self) -> f64 {
                $to(self)
            }
        }
    };
}
fmt!(f32, 23, 8, u32, |x| x as f32, |x| x as f64);
fmt!(f64, 52, 11, u64, |x| x, |x| x);
fmt!(f16, 10, 5, u16, f16::from_f64, f16::to_f64);
fmt!(bf16, 7, 8, u16, bf16::from_f64, bf16::to_f64);

/// Limbs of [`Big`]: 2560 bits, two's complement.
const W: usize = 40;

/// A signed integer in units of 2^-1074 (every value of every format is a whole number of
/// them), two's complement over [`W`] 64-bit limbs, low first.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Big([u64; W]);

impl Big {
    pub fn zero() -> Big {
        Big([0; W])
    }
    /// `m * 2^s`.
    fn shifted(m: u64, s: u32) -> Big {
        let mut r = [0u64; W];
        let (q, b) = ((s / 64) as usize, s % 64);
        r[q] = m << b;
        if b > 0 && q + 1 < W {
            r[q + 1] = m >> (64 - b);
        }
        Big(r)
    }
    pub fn add(&self, o: &Big) -> Big {
        let mut r = [0u64; W];
        let mut carry = 0u64;
        for ((r, &a), &b) in r.iter_mut().zip(&self.0).zip(&o.0) {
            let (s1, c1) = a.overflowing_add(b);
            let (s2, c2) = s1.overflowing_add(carry);
            *r = s2;
            carry = (c1 || c2) as u64;
        }
        Big(r)
    }
    pub fn neg(&self) -> Big {
        Big(self.0.map(|l| !l)).add(&Big::shifted(1, 0))
    }
    pub fn is_neg(&self) -> bool {
        self.0[W - 1] >> 63 == 1
    }
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&l| l == 0)
    }
    /// `self * n`, for `self >= 0` (no overflow in the tests' ranges).
    fn mul(&self, n: u64) -> Big {
        let mut r = [0u64; W];
        let mut carry = 0u128;
        for (r, &l) in r.iter_mut().zip(&self.0) {
            let t = l as u128 * n as u128 + carry;
            *r = t as u64;
            carry = t >> 64;
        }
        assert!(carry == 0 && r[W - 1] >> 63 == 0, "Big overflow");
        Big(r)
    }
    /// Signed comparison.
    fn compare(&self, o: &Big) -> Ordering {
        match (self.is_neg(), o.is_neg()) {
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        for i in (0..W).rev() {
            match self.0[i].cmp(&o.0[i]) {
                Ordering::Equal => continue,
                c => return c,
            }
        }
        Ordering::Equal
    }
}

/// The exponent of the smallest subnormal of format `F`.
fn sub_exp<F: Fmt>() -> i32 {
    2 - (1 << (F::EXP - 1)) - F::MANT as i32
}

/// The exact value of the finite non-negative bit pattern `b` of `F`, in units of 2^-1074;
/// the infinity's pattern stands for 2^(emax + 1), the next value after the largest finite
/// if the exponent went on (IEEE's rule for rounding to infinity).
fn value_of<F: Fmt>(b: u64) -> Big {
    let emax_field = (1u64 << F::EXP) - 1;
    let e = b >> F::MANT;
    let frac = b & ((1 << F::MANT) - 1);
    if e == emax_field {
        assert_eq!(frac, 0);
        return Big::shifted(1, ((1i32 << (F::EXP - 1)) + 1074) as u32);
    }
    let m = if e == 0 { frac } else { frac | 1 << F::MANT };
    let lsb = e.max(1) as i32 - 1 + sub_exp::<F>();
    Big::shifted(m, (lsb + 1074) as u32)
}

/// The element as an exact signed [`Big`], or its class if not finite.
pub enum Class {
    Nan,
    Inf(bool),
    Finite(Box<Big>),
}

pub fn classify<F: Fmt>(x: F) -> Class {
    let b = x.bits();
    let sign = 1u64 << (F::MANT + F::EXP);
    let mag = b & (sign - 1);
    let inf = ((1u64 << F::EXP) - 1) << F::MANT;
    if mag > inf {
        Class::Nan
    } else if mag == inf {
        Class::Inf(b & sign != 0)
    } else {
        let v = value_of::<F>(mag);
        Class::Finite(Box::new(if b & sign != 0 { v.neg() } else { v }))
    }
}

/// The exact sum of `xs` (finite elements), and the flags: NaN, +inf, -inf, all -0.
pub struct Exact {
    pub sum: Big,
    pub nan: bool,
    pub pos_inf: bool,
    pub neg_inf: bool,
    pub all_neg_zero: bool,
}

pub fn exact_sum<F: Fmt>(xs: &[F]) -> Exact {
    let mut e = Exact {
        sum: Big::zero(),
        nan: false,
        pos_inf: false,
        neg_inf: false,
        all_neg_zero: !xs.is_empty(),
    };
    let neg_zero = 1u64 << (F::MANT + F::EXP);
    for &x in xs {
        e.all_neg_zero &= x.bits() == neg_zero;
        match classify(x) {
            Class::Nan => e.nan = true,
            Class::Inf(true) => e.neg_inf = true,
            Class::Inf(false) => e.pos_inf = true,
            Class::Finite(v) => e.sum = e.sum.add(&v),
        }
    }
    e
}

/// The quiet NaN the operators return.
pub fn nan_bits<F: Fmt>() -> u64 {
    ((1u64 << F::EXP) - 1) << F::MANT | 1 << (F::MANT - 1)
}

/// The bits of `sum / n` rounded to nearest, ties to even, in format `F`, by the rules:
/// the largest non-negative pattern `b` whose value is at most `|sum| / n` (a binary search
/// over the patterns, which are ordered as their values), then `b` or `b + 1`, whichever
/// is nearer, the one with the even pattern (even significand) on a tie; the infinity's
/// pattern counts as 2^(emax + 1). The sign is the sum's.
pub fn round<F: Fmt>(sum: &Big, n: u64) -> u64 {
    let neg = sum.is_neg();
    let a = if neg { sum.neg() } else { *sum };
    let inf = ((1u64 << F::EXP) - 1) << F::MANT;
    let le = |b: u64| value_of::<F>(b).mul(n).compare(&a) != Ordering::Greater;
    let b = if le(inf) {
        inf
    } else {
        let (mut lo, mut hi) = (0u64, inf); // le(lo), !le(hi)
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if le(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let below = value_of::<F>(lo).mul(n);
        if below == a {
            lo
        } else {
            let twice = a.add(&a);
            let mid = below.add(&value_of::<F>(hi).mul(n));
            match twice.compare(&mid) {
                Ordering::Less => lo,
                Ordering::Greater => hi,
                Ordering::Equal => {
                    if lo & 1 == 0 {
                        lo
                    } else {
                        hi
                    }
                }
            }
        }
    };
    b | (neg as u64) << (F::MANT + F::EXP)
}

/// The reference of `ExactSum` (`n = None`) or `ExactMean` (`Some(n)`, n ≥ 1): special
/// values, then the exact zero's sign, then [`round`].
pub fn reference<F: Fmt>(xs: &[F], mean: bool) -> F {
    let e = exact_sum(xs);
    let sign = 1u64 << (F::MANT + F::EXP);
    let inf = ((1u64 << F::EXP) - 1) << F::MANT;
    let bits = if e.nan || (e.pos_inf && e.neg_inf) {
        nan_bits::<F>()
    } else if e.pos_inf {
        inf
    } else if e.neg_inf {
        inf | sign
    } else if e.sum.is_zero() {
        if e.all_neg_zero {
            sign
        } else {
            0
        }
    } else {
        round::<F>(&e.sum, if mean { xs.len() as u64 } else { 1 })
    };
    F::of_bits(bits)
}

// ---- data ------------------------------------------------------------------------------

pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// `2^k` as f64 (k from -1074 to 1023).
pub fn two(k: i32) -> f64 {
    if k < -1022 {
        f64::from_bits(1u64 << (k + 1074))
    } else {
        f64::from_bits(((k + 1023) as u64) << 52)
    }
}

/// Ogita, Rump and Oishi's generator of ill-conditioned sums (GenSum, after their GenDot):
/// half the elements with exponents spread over `[0, log2(cond) / 2]` (the first and the
/// last at the ends), the other half chosen to cancel the running sum from exponents
/// descending to 0, then shuffled: `sum |x| / |sum x|` is about `cond`. Computed in `F`
/// (the running sum in f64, rounded to `F`).
pub fn gen_sum<F: Fmt>(n: usize, cond: f64, r: &mut ChaCha8Rng) -> Vec<F> {
    assert!(n >= 6);
    let b = cond.log2();
    let half = n / 2;
    let mut x = Vec::with_capacity(n);
    let draw = |r: &mut ChaCha8Rng, e: f64| -> f64 { (2.0 * r.random::<f64>() - 1.0) * e.exp2() };
    for i in 0..half {
        let e = if i == 0 {
            (b / 2.0).round()
        } else if i == half - 1 {
            0.0
        } else {
            (r.random::<f64>() * b / 2.0).round()
        };
        x.push(F::of_f64(draw(r, e)));
    }
    let mut s: f64 = x.iter().map(|v| v.to_f64()).sum();
    for i in half..n {
        let e = (b / 2.0 - (i - half) as f64 * b / 2.0 / (n - half) as f64).round();
        let v = F::of_f64(draw(r, e) - s);
        s += v.to_f64();
        x.push(v);
    }
    shuffle(&mut x, r);
    x
}

pub fn shuffle<T>(x: &mut [T], r: &mut ChaCha8Rng) {
    for i in (1..x.len()).rev() {
        let j = r.random_range(0..=i);
        x.swap(i, j);
    }
}

/// Finite values of `F` with random signs, significands and exponents over the whole
/// finite range (subnormals included): sums that spill into every chunk.
pub fn wide_exponents<F: Fmt>(n: usize, r: &mut ChaCha8Rng) -> Vec<F> {
    let inf = ((1u64 << F::EXP) - 1) << F::MANT;
    (0..n)
        .map(|_| {
            let mag = r.random_range(0..inf);
            let sign = (r.random::<bool>() as u64) << (F::MANT + F::EXP);
            F::of_bits(mag | sign)
        })
        .collect()
}

/// The hard cases of f64 sums, with their exact answers where they are short to state.
pub fn hard_f64() -> Vec<(Vec<f64>, Option<f64>)> {
    let max = f64::MAX;
    let tiny = two(-1074);
    let ulp1 = two(-52);
    vec![
        (vec![], Some(0.0)),
        (vec![1e100, 1.0, -1e100], Some(1.0)),
        (vec![1.0, 1e100, 1.0, -1e100], Some(2.0)),
        (vec![max, max, -max], Some(max)),
        (vec![max, two(970)], Some(f64::INFINITY)), // max + ulp/2: a tie, to even: inf
        (vec![max, two(969)], Some(max)),
        (vec![max, two(970), -tiny], Some(max)),
        (vec![-max, -two(970)], Some(f64::NEG_INFINITY)),
        (vec![-max, -two(970), tiny], Some(-max)),
        (vec![-max, -max], Some(f64::NEG_INFINITY)),
        (vec![1.0, two(-53)], Some(1.0)), // a tie, to even
        (vec![1.0, two(-53), tiny], Some(1.0 + ulp1)),
        (vec![1.0, two(-53), -tiny], Some(1.0)),
        (vec![1.0 + ulp1, two(-53)], Some(1.0 + 2.0 * ulp1)), // a tie, to even: up
        (vec![-1.0, -two(-53)], Some(-1.0)),
        (vec![-1.0, -two(-53), -tiny], Some(-1.0 - ulp1)),
        (vec![-1.0 - ulp1, -two(-53)], Some(-1.0 - 2.0 * ulp1)),
        (
            vec![two(-53), 1.0, tiny, -two(600), two(600)],
            Some(1.0 + ulp1),
        ),
        (vec![f64::INFINITY, f64::NEG_INFINITY], None),
        (vec![f64::INFINITY, 1.0, -max], Some(f64::INFINITY)),
        (
            vec![f64::NEG_INFINITY, f64::NEG_INFINITY, max],
            Some(f64::NEG_INFINITY),
        ),
        (vec![1.0, f64::NAN, 2.0], None),
        (vec![-f64::NAN], None),
        (vec![-0.0], Some(-0.0)),
        (vec![-0.0, -0.0, -0.0], Some(-0.0)),
        (vec![-0.0, 0.0], Some(0.0)),
        (vec![0.0, -0.0], Some(0.0)),
        (vec![1.0, -1.0], Some(0.0)),
        (vec![-1.0, 1.0, -0.0], Some(0.0)),
        (vec![tiny, tiny, tiny], Some(3.0 * tiny)),
        (vec![two(-1022), -tiny], Some(two(-1022) - tiny)), // the largest subnormal
        (vec![-tiny], Some(-tiny)),
        (vec![tiny, -tiny, -0.0], Some(0.0)),
        // Python's math.fsum (exact, then rounded once) gives these three:
        (vec![0.1, 0.2, 0.3, -0.6], Some(two(-55))),
        (
            vec![1e16, 1.0, 1e-16, -1e16, 3.0, 1.0 / 3.0, 2.0 / 3.0],
            Some(5.0),
        ),
        (
            vec![
                4222870081.393921,
                -75948168.81922579,
                15202475991.426804,
                38.92011436905858,
                -0.47099477171638526,
                1.028025774045724e-09,
                1.0734747871922208e+16,
                -8.377653264104819e-05,
                -1.1522677621929445e-10,
                -1.6945319168149078e-15,
                2.5653502908097863e-19,
                0.0018061227873392514,
                -4222870081.393921,
                75948168.81922579,
                -15202475991.426804,
                -38.92011436905858,
                0.47099477171638526,
                1e-300,
                3.5,
                -5e-324,
            ],
            Some(1.0734747871922212e+16),
        ),
        (vec![3.0], Some(3.0)),
        (vec![max], Some(max)),
        (vec![two(1023), two(1023), -two(1023)], Some(two(1023))),
    ]
}

/// The hard cases of f32 sums.
pub fn hard_f32() -> Vec<(Vec<f32>, Option<f32>)> {
    let tiny = f32::from_bits(1);
    let max = f32::MAX;
    let mut ones = vec![1.0f32; 1 << 20];
    ones.insert(0, 16777216.0); // 2^24, then 2^20 ones: each add of a naive sum is lost
    vec![
        (ones, Some(16777216.0 + 1048576.0)),
        (vec![1e30, 1.0, -1e30], Some(1.0)),
        (vec![max, max, -max], Some(max)),
        (vec![max, 2f32.powi(103)], Some(f32::INFINITY)), // max + ulp/2
        (vec![max, 2f32.powi(102)], Some(max)),
        (vec![1.0, 2f32.powi(-24)], Some(1.0)),
        (vec![1.0, 2f32.powi(-24), tiny], Some(1.0 + f32::EPSILON)),
        (
            vec![-1.0, -(2f32.powi(-24)), -tiny],
            Some(-1.0 - f32::EPSILON),
        ),
        (vec![tiny, tiny, tiny], Some(f32::from_bits(3))),
        (
            vec![f32::MIN_POSITIVE, -tiny],
            Some(f32::from_bits(0x007f_ffff)),
        ),
        (vec![-tiny, -tiny], Some(f32::from_bits(0x8000_0002))),
        (
            vec![1e-40, 1e-40],
            Some(f32::from_bits(2 * 1e-40f32.to_bits())),
        ),
        (vec![-0.0], Some(-0.0)),
        (vec![-0.0, 0.0], Some(0.0)),
        (vec![f32::INFINITY, f32::NEG_INFINITY], None),
        (vec![f32::NAN], None),
        (vec![0.1; 10], Some(1.0)), // a naive f32 loop gives 1.0000001
    ]
}
