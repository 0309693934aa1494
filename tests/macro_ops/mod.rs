//! Operators and maps made with `#[cufold::op]`, `#[cufold::transform]` and
//! `#[derive(cufold::DeviceType)]`, shared by the CPU tests (tests/macros.rs), the host C++
//! check (tests/host_cxx.rs) and the GPU tests (tests/gpu_macros.rs, tests/params_gpu.rs).
//! Between them they use every construct the translation supports.
#![allow(dead_code, unreachable_pub)]

use cufold::{bf16, f16};

pub mod probes;

/// An affine map `x -> a*x + b`.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Affine {
    pub a: f32,
    pub b: f32,
}

/// x -> a*x + b, composed left to right (not commutative).
#[cufold::op(identity = Affine { a: 1.0, b: 0.0 })]
pub fn compose(f: Affine, g: Affine) -> Affine {
    Affine {
        a: g.a * f.a,
        b: g.a * f.b + g.b,
    }
}

/// Log-sum-exp accumulator: the value is max + ln(sum).
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Lse {
    pub max: f32,
    pub sum: f32,
}

#[cufold::op(identity = Lse { max: f32::NEG_INFINITY, sum: 0.0 }, commutative)]
pub fn lse(x: Lse, y: Lse) -> Lse {
    let m = x.max.max(y.max);
    if x.max == y.max {
        // No exp(inf - inf) for two infinite maxima (the identity's among them); on finite
        // ones the bits of the rescaling.
        Lse {
            max: m,
            sum: x.sum + y.sum,
        }
    } else {
        // Only the smaller side is rescaled (exp(0) = 1 would give the same bits on the
        // other, and exp(inf - inf) a NaN where the larger maximum is +inf).
        let e = (-(x.max - y.max).abs()).exp();
        if x.max > y.max {
            Lse {
                max: m,
                sum: x.sum + y.sum * e,
            }
        } else {
            Lse {
                max: m,
                sum: x.sum * e + y.sum,
            }
        }
    }
}

/// Log-sum-exp of raw f32 values: one definition, lift and finish included. Its `combine` is
/// examples/common/log_sum_exp.rs's, as written (the golden C++ in tests/macros.rs is its
/// translation).
#[derive(Clone, Copy, Debug, Default)]
pub struct LogSumExp;

#[cufold::op(commutative)]
impl LogSumExp {
    fn identity() -> Lse {
        Lse {
            max: f32::NEG_INFINITY,
            sum: 0.0,
        }
    }
    fn lift(x: f32) -> Lse {
        Lse { max: x, sum: 1.0 }
    }
    fn combine(a: Lse, b: Lse) -> Lse {
        let m = a.max.max(b.max);
        if a.max == b.max {
            // Equal maxima need no rescaling (the factor would be exp(0) = 1: the same bits
            // as below on finite values), and two infinite maxima must not meet
            // exp(inf - inf), a NaN: [inf, inf] is inf, and two -inf sides (the identity
            // among them) add their sums, so the identity is exact on lift(-inf) too.
            Lse {
                max: m,
                sum: a.sum + b.sum,
            }
        } else {
            // Only the side with the smaller maximum is rescaled: the other's factor would
            // be exp(0) = 1, so one `exp` a combine gives the bits two would.
            let e = (-(a.max - b.max).abs()).exp();
            if a.max > b.max {
                Lse {
                    max: m,
                    sum: a.sum + b.sum * e,
                }
            } else {
                Lse {
                    max: m,
                    sum: a.sum * e + b.sum,
                }
            }
        }
    }
    fn finish(acc: Lse, _n: u64) -> f32 {
        acc.max + acc.sum.ln()
    }
}

/// Infinite and NaN inputs, with the result each must give (`combine` of two +inf maxima
/// used to meet exp(inf - inf) and give NaN).
pub fn log_sum_exp_special_cases() -> Vec<(Vec<f32>, f32)> {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    vec![
        (vec![inf, inf], inf),
        (vec![-inf, -inf], -inf),
        (vec![inf, 1.0], inf),
        (vec![1.0, inf], inf),
        (vec![inf, inf, inf, 1.0, -inf], inf),
        (vec![nan, 1.0], nan),
        (vec![1.0, nan], nan),
        (vec![nan, inf], nan),
        (vec![0.0, 0.0], 2.0f32.ln()),
    ]
}

/// The largest value and the lowest index where it occurs (inputs without NaN).
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Best {
    pub value: f32,
    pub pad: u32,
    pub index: u64,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct ArgMaxTies;

#[cufold::op(commutative, empty = error)]
impl ArgMaxTies {
    fn identity() -> Best {
        Best {
            value: f32::NEG_INFINITY,
            pad: 0,
            index: u64::MAX,
        }
    }
    fn lift(x: f32, index: u64) -> Best {
        Best {
            value: x,
            pad: 0,
            index,
        }
    }
    fn combine(a: Best, b: Best) -> Best {
        if b.value > a.value || (b.value == a.value && b.index < a.index) {
            b
        } else {
            a
        }
    }
    fn finish(acc: Best, _n: u64) -> u64 {
        acc.index
    }
}

/// The smallest interval holding every value (comparisons only: bit-exact everywhere).
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Hull;

#[cufold::op(commutative, empty = error)]
impl Hull {
    fn identity() -> Interval {
        Interval {
            lo: f64::INFINITY,
            hi: f64::NEG_INFINITY,
        }
    }
    fn lift(x: f64) -> Interval {
        Interval { lo: x, hi: x }
    }
    fn combine(a: Interval, b: Interval) -> Interval {
        let lo = if b.lo < a.lo { b.lo } else { a.lo };
        let hi = if b.hi > a.hi { b.hi } else { a.hi };
        Interval { lo, hi }
    }
}

/// `f32::min` / `f32::max` on both ends (Rust leaves ±0 ordering unspecified there: the
/// GPU tests give it no signed zeros).
#[derive(Clone, Copy, Debug, Default)]
pub struct HullByMethods;

#[cufold::op(commutative)]
impl HullByMethods {
    fn identity() -> Interval {
        Interval {
            lo: f64::INFINITY,
            hi: -f64::INFINITY,
        }
    }
    fn lift(x: f32) -> Interval {
        Interval {
            lo: x as f64,
            hi: f64::from(x),
        }
    }
    fn combine(a: Interval, b: Interval) -> Interval {
        Interval {
            lo: a.lo.min(b.lo),
            hi: f64::max(a.hi, b.hi),
        }
    }
}

/// Count, mean and the sum of squared deviations, with early returns, `let mut` and
/// compound assignment. Only + - * /: the GPU's bits equal the CPU's.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Moments {
    pub n: f64,
    pub mean: f64,
    pub m2: f64,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Welford;

#[cufold::op(commutative, empty = error)]
impl Welford {
    fn identity() -> Moments {
        Moments {
            n: 0.0,
            mean: 0.0,
            m2: 0.0,
        }
    }
    fn lift(x: f32, _i: u64) -> Moments {
        Moments {
            n: 1.0,
            mean: x as f64,
            m2: 0.0,
        }
    }
    fn combine(a: Moments, b: Moments) -> Moments {
        if a.n == 0.0 {
            return b;
        }
        if b.n == 0.0 {
            return a;
        }
        let n = a.n + b.n;
        let d = b.mean - a.mean;
        let mut m2 = a.m2 + b.m2;
        m2 += d * d * (a.n * b.n / n);
        let mean = {
            let step = d * (b.n / n);
            a.mean + step
        };
        Moments { n, mean, m2 }
    }
    fn finish(acc: Moments, _n: u64) -> f64 {
        acc.m2 / acc.n
    }
}

/// f16 sums, rounded after every add as the half crate does (`ops::Sum` adds in f32).
#[cufold::op(identity = f16::ZERO, commutative)]
pub fn hsum(a: f16, b: f16) -> f16 {
    a + b
}

/// bf16 maximum with the half crate's semantics (a NaN yields the other value).
#[cufold::op(identity = bf16::NEG_INFINITY, commutative)]
pub fn bmax(a: bf16, b: bf16) -> bf16 {
    a.max(b)
}

/// Halves inside a struct, lifted from f32 and finished to f32.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct HalfStats {
    pub sum: f32,
    pub max: f16,
    pub min: bf16,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct HalfSummary;

#[cufold::op]
impl HalfSummary {
    fn identity() -> HalfStats {
        HalfStats {
            sum: 0.0,
            max: f16::NEG_INFINITY,
            min: bf16::INFINITY,
        }
    }
    fn lift(x: f32) -> HalfStats {
        HalfStats {
            sum: f16::from_f32(x).to_f32(),
            max: f16::from_f32(x),
            min: bf16::from_f32(x),
        }
    }
    fn combine(a: HalfStats, b: HalfStats) -> HalfStats {
        HalfStats {
            sum: a.sum + b.sum,
            max: if b.max > a.max { b.max } else { a.max },
            min: if b.min < a.min { b.min } else { a.min },
        }
    }
    fn finish(acc: HalfStats, _n: u64) -> f32 {
        acc.sum + acc.max.to_f32() - f32::from(acc.min)
    }
}

/// Integer bit statistics: wrapping sums, xor, or, and, popcounts, shifts and rotations.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Bits {
    pub sum: u64,
    pub xor: u32,
    pub ones: u32,
    pub or: u32,
    pub and: u32,
    pub signed: i32,
    pub low: u8,
    pub pad1: u8,
    pub pad2: u8,
    pub pad3: u8,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct BitStats;

#[cufold::op(commutative)]
impl BitStats {
    fn identity() -> Bits {
        Bits {
            sum: 0,
            xor: 0,
            ones: 0,
            or: 0,
            and: u32::MAX,
            signed: 0,
            low: 0,
            pad1: 0,
            pad2: 0,
            pad3: 0,
        }
    }
    fn lift(x: u32, index: u64) -> Bits {
        let spread = (x as u64).wrapping_mul(index & 7) << 3;
        Bits {
            sum: spread ^ (x as u64 >> 5),
            xor: x.rotate_left((index % 32) as u32),
            ones: x
                .count_ones()
                .wrapping_add(x.leading_zeros())
                .wrapping_sub(x.trailing_zeros().min(3)),
            or: x >> (index as u32 & 31),
            and: !x | 1u32 << 7,
            signed: (x as i32).wrapping_mul(-3) >> 2,
            low: (x & 0xff) as u8,
            pad1: 0,
            pad2: 0,
            pad3: 0,
        }
    }
    fn combine(a: Bits, b: Bits) -> Bits {
        Bits {
            sum: a.sum.wrapping_add(b.sum),
            xor: a.xor ^ b.xor,
            ones: a.ones.wrapping_add(b.ones),
            or: a.or | b.or,
            and: a.and & b.and,
            signed: a.signed.wrapping_add(b.signed),
            low: a.low.wrapping_add(b.low),
            pad1: 0,
            pad2: 0,
            pad3: 0,
        }
    }
}

/// A struct whose field names are C++ keywords, and a nested struct.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Keywords {
    pub new: f32,
    pub class: u32,
}

#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Nested {
    pub inner: Keywords,
    pub map: cufold::ops::Affine<f64>,
}

pub const SCALE: f64 = 0.1;

/// Shadowing, keywords, nested literals, a typed `if` lambda, constants and literals.
///
/// `combine(identity, identity)` must be the identity (the operator contract): a partial last
/// tile on the GPU combines padding with padding where the CPU skips the empty subtree, so
/// the `else` branch keeps the identity's `a = 1`.
#[cufold::op(identity = Nested {
    inner: Keywords { new: 0.0, class: 0 },
    map: cufold::ops::Affine::<f64> { a: 1.0, b: 0.0 },
})]
// A block-valued `if` with a `let` inside is what this operator translates.
#[allow(clippy::let_and_return)]
pub fn syntax(x: Nested, y: Nested) -> Nested {
    let new = x.inner.new + y.inner.new;
    let new = new * 0.5;
    let scale: f64 = if new > 1.0 {
        let t = SCALE * 2.0;
        t
    } else {
        -(-1.0)
    };
    Nested {
        map: cufold::ops::Affine::<f64> {
            a: x.map.a * y.map.a * scale,
            b: x.map.b + (y.map.b as f32) as f64,
        },
        inner: Keywords {
            class: x.inner.class ^ y.inner.class.wrapping_mul(3) >> 1u8,
            new,
        },
    }
}

// ---- run-time parameters: functions that take `&self` ---------------------------------

/// x -> k * x, summed. Its value is its run-time parameters: one compiled kernel serves
/// every `k`.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Scaled {
    pub k: f64,
}

#[cufold::op(commutative)]
impl Scaled {
    fn identity() -> f64 {
        0.0
    }
    fn lift(&self, x: f64) -> f64 {
        x * self.k
    }
    fn combine(a: f64, b: f64) -> f64 {
        a + b
    }
}

/// A half-open range of values.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Window {
    pub lo: f32,
    pub hi: f32,
}

/// How many inputs fell in the window (capped), and their sum.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Hits {
    pub count: u64,
    pub sum: f64,
}

/// The inputs inside `window` from position `first` on: their count, capped at `cap`
/// (min is associative), and their mean times `unit`. Every function but `identity` reads
/// the parameters, nested `window` included.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct InWindow {
    pub window: Window,
    pub first: u64,
    pub cap: u64,
    pub unit: f64,
}

#[cufold::op(commutative)]
impl InWindow {
    fn identity() -> Hits {
        Hits { count: 0, sum: 0.0 }
    }
    fn lift(&self, x: f32, index: u64) -> Hits {
        if index >= self.first && x >= self.window.lo && x < self.window.hi {
            Hits {
                count: 1,
                sum: x as f64,
            }
        } else {
            Hits { count: 0, sum: 0.0 }
        }
    }
    fn combine(&self, a: Hits, b: Hits) -> Hits {
        Hits {
            count: (a.count + b.count).min(self.cap),
            sum: a.sum + b.sum,
        }
    }
    fn finish(&self, acc: Hits, _n: u64) -> f64 {
        acc.sum / (acc.count.max(1) as f64) * self.unit
    }
}

/// (x - mean) * inv_sd, in f64: a map with run-time parameters.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Standardize {
    pub mean: f64,
    pub inv_sd: f64,
}

#[cufold::transform]
impl Standardize {
    pub fn apply(&self, x: f32) -> f64 {
        (x as f64 - self.mean) * self.inv_sd
    }
}

/// x + slope * index, clamped to a window: a map of the value and its position.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct Ramp {
    pub slope: f32,
    pub clip: Window,
}

#[cufold::transform]
impl Ramp {
    fn apply(&self, x: f32, index: u64) -> f32 {
        let y = x + self.slope * index as f32;
        if y < self.clip.lo {
            self.clip.lo
        } else if y > self.clip.hi {
            self.clip.hi
        } else {
            y
        }
    }
}

/// x * x: a map without parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Square;

#[cufold::transform]
impl Square {
    fn apply(x: f64) -> f64 {
        x * x
    }
}
