//! Probes: operators whose `finish` applies every method, operator and cast the
//! translation supports to one sample, so that the translated C++ can be compared with
//! the Rust half value by value (tests/host_cxx.rs on the host, tests/gpu_macros.rs on a
//! GPU). The input is the sample itself; `combine` keeps its left operand, so a sample
//! reduced alone (with identity padding on its right, if any) is finished as it is.
// Unparenthesised mixes of `|`, `<<`, `^` and `&` are the point: the C++ must follow
// Rust's precedence.
#![allow(clippy::precedence)]

use crate::common::Rng;
use cufold::{bf16, f16};

/// A float sample `x` and a second operand `y` and exponent `n` derived from its position.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct FSample {
    pub x: f32,
    pub y: f32,
    pub n: i32,
    pub pad: u32,
}

/// What must agree bit for bit everywhere: IEEE arithmetic, sqrt, mul_add, rounding,
/// comparisons, bits, and casts from floats (saturating, NaN to 0).
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct ExactF {
    pub to_u64: u64,
    pub to_i64: i64,
    pub wide: f64,
    pub sqrt64: f64,
    pub abs: f32,
    pub sqrt: f32,
    pub powi: f32,
    pub mul_add: f32,
    pub rounding: f32,
    pub round: f32,
    pub round_ties_even: f32,
    pub fract: f32,
    pub recip: f32,
    pub degrees: f32,
    pub signum: f32,
    pub copysign: f32,
    pub min: f32,
    pub max: f32,
    pub clamp: f32,
    pub rem: f32,
    pub rem_euclid: f32,
    pub div_euclid: f32,
    pub literal_math: f32,
    pub flags: u32,
    pub bits: u32,
    pub to_i32: i32,
    pub to_u32: u32,
    pub half: f16,
    pub bhalf: bf16,
    pub to_u8: u8,
    pub to_i8: u8,
    pub to_i16: u8,
    pub to_u16: u8,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct ExactProbe;

#[cufold::op]
impl ExactProbe {
    fn identity() -> FSample {
        FSample {
            x: 0.0,
            y: 0.0,
            n: 0,
            pad: 0,
        }
    }
    fn combine(a: FSample, _b: FSample) -> FSample {
        a
    }
    fn finish(s: FSample, _count: u64) -> ExactF {
        let x = s.x;
        let y = s.y;
        let d = x as f64;
        let half = 0.5;
        ExactF {
            to_u64: x as u64,
            to_i64: (x * 1e10) as i64,
            wide: d * 0.1 + f64::from(y) / 3.0,
            sqrt64: d.abs().sqrt().mul_add(std::f64::consts::PI, d.powi(s.n)),
            abs: x.abs(),
            sqrt: x.sqrt(),
            powi: x.powi(s.n) + y.powi(5),
            mul_add: x.mul_add(y, 0.1),
            rounding: x.floor() * 4.0 + x.ceil() * 2.0 + x.trunc(),
            round: x.round(),
            round_ties_even: x.round_ties_even(),
            fract: x.fract(),
            recip: x.recip(),
            degrees: x.to_degrees() + y.to_radians(),
            signum: x.signum(),
            copysign: y.copysign(x),
            min: x.min(y),
            max: f32::max(x, half),
            clamp: x.clamp(-1.5, 2.0),
            rem: x % y,
            rem_euclid: x.rem_euclid(y),
            div_euclid: x.div_euclid(y),
            literal_math: if x > 1.0 {
                1.0 / 3.0
            } else {
                -x * (half + 0.25)
            },
            flags: (x.is_nan() as u32)
                | (x.is_finite() as u32) << 1
                | (x.is_infinite() as u32) << 2
                | (x.is_sign_negative() as u32) << 3
                | (x.is_sign_positive() as u32) << 4
                | (x < y) as u32 * 32
                | ((x >= y && !(x == y)) as u32) << 6
                | ((x != y || x <= 0.0) as u32) << 7,
            bits: x.to_bits() ^ f32::from_bits(0x3f80_0000).to_bits(),
            to_i32: x as i32,
            to_u32: x as u32,
            half: f16::from_f32(x),
            bhalf: bf16::from_f32(y * x),
            to_u8: x as u8,
            to_i8: x as i8 as u8,
            to_i16: (x as i16 >> 4) as u8,
            to_u16: (x as u16 % 251) as u8,
        }
    }
}

/// The transcendental functions: libm's on the CPU, CUDA's on the GPU, which differ by a
/// few ulps (on the host both call the same libm, all but `cbrt`).
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct MathF {
    pub exp64: f64,
    pub ln64: f64,
    pub powf64: f64,
    pub sin64: f64,
    pub cbrt64: f64,
    pub atan2_64: f64,
    pub exp: f32,
    pub exp2: f32,
    pub exp_m1: f32,
    pub ln: f32,
    pub ln_1p: f32,
    pub log2: f32,
    pub log10: f32,
    pub log: f32,
    pub powf: f32,
    pub sin: f32,
    pub cos: f32,
    pub tan: f32,
    pub asin: f32,
    pub acos: f32,
    pub atan: f32,
    pub atan2: f32,
    pub sinh: f32,
    pub cosh: f32,
    pub tanh: f32,
    pub hypot: f32,
    pub cbrt: f32,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct MathProbe;

#[cufold::op]
impl MathProbe {
    fn identity() -> FSample {
        FSample {
            x: 0.0,
            y: 0.0,
            n: 0,
            pad: 0,
        }
    }
    fn combine(a: FSample, _b: FSample) -> FSample {
        a
    }
    fn finish(s: FSample, _count: u64) -> MathF {
        let x = s.x;
        let y = s.y;
        let d = x as f64;
        MathF {
            exp64: d.exp(),
            ln64: d.ln(),
            powf64: d.abs().powf(y as f64),
            sin64: d.sin(),
            cbrt64: d.cbrt(),
            atan2_64: d.atan2(y as f64),
            exp: x.exp(),
            exp2: x.exp2(),
            exp_m1: x.exp_m1(),
            ln: x.ln(),
            ln_1p: x.ln_1p(),
            log2: x.log2(),
            log10: x.log10(),
            log: x.log(y.abs() + 1.5),
            powf: x.powf(y),
            sin: x.sin(),
            cos: x.cos(),
            tan: x.tan(),
            asin: (x / 1e3).asin(),
            acos: (x / 1e3).acos(),
            atan: x.atan(),
            atan2: x.atan2(y),
            sinh: (x / 100.0).sinh(),
            cosh: (x / 100.0).cosh(),
            tanh: x.tanh(),
            hypot: x.hypot(y),
            cbrt: x.cbrt(),
        }
    }
}

/// An integer sample and its position.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct ISample {
    pub x: i64,
    pub i: u64,
}

/// Every integer method and operator the translation supports, compound assignments,
/// and casts between integers and to floats: bit for bit everywhere.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
pub struct ExactI {
    pub arith: i64,
    pub div: i64,
    pub shifts: i64,
    pub bits: u64,
    pub counts: u64,
    pub rotations: u64,
    pub euclid: i64,
    pub saturating: i64,
    pub minmax: i64,
    pub casts: i64,
    pub unsigned: u64,
    pub literal_math: i64,
    pub wide_float: f64,
    pub narrow_float: f32,
    pub small: i32,
    pub flags: u32,
    pub tiny: u8,
    pub tiny_ops: u8,
    pub pad: u8,
    pub pad2: u8,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct IntProbe;

#[cufold::op]
impl IntProbe {
    fn identity() -> ISample {
        ISample { x: 0, i: 0 }
    }
    fn combine(a: ISample, _b: ISample) -> ISample {
        a
    }
    fn finish(sample: ISample, _count: u64) -> ExactI {
        let x = sample.x;
        let i = sample.i;
        let k = (i % 13) as i64 + 1;
        let s = (i % 64) as u32;
        let u = x as u64;
        let w = x as i32;
        let b = x as u8;
        let mut acc: i64 = 0;
        acc += x.wrapping_mul(k);
        acc ^= x >> 3;
        acc %= 1000;
        acc /= 3;
        acc *= 7;
        acc -= 5;
        acc |= 1;
        acc &= !2;
        acc <<= 1;
        acc >>= 2;
        acc = acc.wrapping_add(1);
        ExactI {
            arith: x.wrapping_add(k).wrapping_mul(3).wrapping_sub(x / 7) ^ acc,
            div: (x / k)
                .wrapping_add(x % k)
                .wrapping_sub(x.wrapping_abs().wrapping_neg() / (k + 2))
                .wrapping_add((x as i32 % 5) as i64),
            shifts: (x << s)
                ^ (x >> (s / 2))
                ^ (u >> s) as i64
                ^ x.wrapping_shl(s + 64)
                ^ x.wrapping_shr(s + 70)
                ^ (w.wrapping_shr(s) as i64) << 1
                ^ (b.wrapping_shl(s) as i64) << 2
                ^ (b.wrapping_shr(s + 1) as i64) << 3,
            bits: !u & (u | 0xff00) ^ (u.swap_bytes() & 0xffff_0000) ^ u.reverse_bits(),
            counts: (u.count_ones()
                + u.count_zeros() * 2
                + u.leading_zeros() * 3
                + u.trailing_zeros() * 5) as u64
                + (w.leading_zeros()
                    + b.trailing_zeros()
                    + b.count_ones()
                    + (b as u16).leading_zeros()) as u64,
            rotations: u.rotate_left(s) ^ u.rotate_right(s + 1) ^ (w.rotate_left(7) as u64),
            euclid: x.rem_euclid(k) + x.div_euclid(-(k + 1)) + x.wrapping_neg().rem_euclid(3) * 100,
            saturating: x.saturating_add(i64::MAX / 2).saturating_sub(i64::MIN / 3)
                ^ w.saturating_add(w) as i64,
            minmax: (x.min(k).max(-100).clamp(-50, 5000) + x.signum() + w.abs_diff(-5) as i64)
                .wrapping_add(x.wrapping_neg().max(0)),
            casts: (x as i8) as i64
                + (x as i16) as i64 * 3
                + (x as u16) as i64 * 5
                + (x as u32) as i64
                + (b as i8) as i64,
            unsigned: u.wrapping_pow(3)
                ^ (u % 1000).pow(2)
                ^ (u.is_power_of_two() as u64)
                ^ u.abs_diff(12345),
            literal_math: (-7 + 2 * 3) * (x % 10) - 0x10 + 0b101 + 1_000,
            wide_float: x as f64 + u as f64 / 3.0,
            narrow_float: x as f32 * 0.5 + w as f32,
            small: w.wrapping_mul(w) / 3 - (w >> 31) + (!w & 0x7f) + w.wrapping_pow(2) % 1000,
            flags: (x > 0) as u32
                | (x.is_negative() as u32) << 1
                | (x.is_positive() as u32) << 2
                | (u > 1u64 << 40) as u32 * 8,
            tiny: b.wrapping_add(200).wrapping_mul(b) ^ b.rotate_left(3) ^ (b << 2) ^ !b,
            tiny_ops: (b / 3 + b % 7)
                .wrapping_sub(b >> 1)
                .max(b.saturating_add(b)),
            pad: 0,
            pad2: 0,
        }
    }
}

/// Float samples that reach every branch: signed zeros, halves, subnormals, values past
/// every integer type's range, infinities, NaN, and random values at several scales.
pub fn float_values() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        3.5,
        0.1,
        -0.7,
        1e-40,
        -1e-42,
        1e30,
        -1e30,
        3e9,
        -3e9,
        4.3e9,
        1e19,
        2e19,
        -1e19,
        255.5,
        256.7,
        -128.9,
        65535.9,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        f32::EPSILON,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        std::f32::consts::PI,
    ];
    let mut r = Rng(0x5eed);
    for _ in 0..200 {
        let scale = [1.0, 10.0, 1000.0, 1e-3][(r.next() % 4) as usize];
        v.push(((r.unit() * 2.0 - 1.0) * scale) as f32);
    }
    v
}

/// The float values with their derived operands.
pub fn float_samples() -> Vec<FSample> {
    float_values()
        .into_iter()
        .enumerate()
        .map(|(i, x)| FSample {
            x,
            y: i as f32 * 0.37 - 2.0,
            n: (i % 7) as i32 - 3,
            pad: 0,
        })
        .collect()
}

/// Integer samples: every type's edges and random values of every magnitude.
pub fn int_samples() -> Vec<ISample> {
    let mut v = vec![
        0,
        1,
        -1,
        2,
        -2,
        7,
        -7,
        127,
        128,
        255,
        256,
        -129,
        65535,
        65536,
        i32::MAX as i64,
        i32::MIN as i64,
        1 << 40,
        (1 << 40) + 1,
        i64::MAX,
        i64::MIN,
        i64::MAX - 1,
        i64::MIN + 1,
    ];
    let mut r = Rng(0xface);
    for k in 0..200 {
        v.push((r.next() >> (k % 64)) as i64);
    }
    v.into_iter()
        .enumerate()
        .map(|(i, x)| ISample { x, i: i as u64 })
        .collect()
}
