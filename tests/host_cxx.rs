//! The CUDA C++ that `#[cufold::op]` generates, compiled for the host by a C++ compiler
//! (`$CXX`, else `g++`, `clang++` or `c++`) with device qualifiers defined away, and run
//! beside the operators' Rust halves on the same inputs: identity, lift, combine and
//! finish must give the same bits. On the host both halves call the same libm, so even
//! `exp` and `ln` must agree exactly (all but `cbrt`: Rust's own is correctly rounded,
//! glibc's `cbrtf` is within 1 ulp); this checks the translation and the `cfm` helpers'
//! Rust semantics (wrapping, saturating casts, f16/bf16 rounding, literal typing, ...)
//! on a machine without CUDA. The GPU tests check the same operators on the device.
//!
//! Without a C++ compiler the test says so and passes, unless `CUFOLD_CI` is set
//! (CI sets it, so there it cannot be skipped).
// Unparenthesised mixes of `|`, `<<`, `^` and `&` are the point of the probes: the C++
// must follow Rust's precedence.
#![allow(clippy::precedence)]

mod common;
mod macro_ops;

use common::{same, Rng};
use cufold::laws::{Approx, Tolerance};
use cufold::ops::{CudaOp, Operator};
use cufold::{bf16, f16, DeviceValue};
use macro_ops::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Device intrinsics and the `cf` element types of kernels/types.cuh, for the host.
const SHIM: &str = r#"
#include <math.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define __device__
#define __forceinline__ inline
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline double __longlong_as_double(long long u) { double f; std::memcpy(&f, &u, 8); return f; }
static inline long long __double_as_longlong(double f) { long long u; std::memcpy(&u, &f, 8); return u; }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned long long __brevll(unsigned long long x) {
    unsigned long long r = 0;
    for (int i = 0; i < 64; ++i) if ((x >> i) & 1) r |= 1ull << (63 - i);
    return r;
}
namespace cf {
typedef unsigned long long u64;
typedef long long i64;
struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };
template <class T> struct Affine { T a; T b; };
inline float up(f16 h) { _Float16 x; std::memcpy(&x, &h.bits, 2); return (float)x; }
inline float up(bf16 h) { return __uint_as_float(((unsigned)h.bits) << 16); }
template <class T> T down(float v);
template <> inline f16 down<f16>(float v) { _Float16 x = (_Float16)v; f16 h; std::memcpy(&h.bits, &x, 2); return h; }
template <> inline bf16 down<bf16>(float v) {
    unsigned u = __float_as_uint(v);
    bf16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) { r.bits = (unsigned short)((u >> 16) | 0x0040u); return r; }
    u += 0x7fffu + ((u >> 16) & 1u);
    r.bits = (unsigned short)(u >> 16);
    return r;
}
}
"#;

const DRIVER: &str = r#"
static void hex_out(const void* p, size_t n) {
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; ++i) std::printf("%02x", b[i]);
    std::printf("\n");
}
static void hex_in(void* p, size_t n) {
    unsigned char* b = (unsigned char*)p;
    for (size_t i = 0; i < n; ++i) {
        unsigned v;
        if (std::scanf("%2x", &v) != 1) std::abort();
        b[i] = (unsigned char)v;
    }
}
// Identity, then lift of every input, combine of pairs, finish of every lifted value.
template <class Op> int run() {
    typedef typename Op::In In;
    typedef typename Op::Acc Acc;
    typedef typename Op::Out Out;
    const Op op = Op();
    size_t n;
    if (std::scanf("%zu", &n) != 1 || n == 0) return 2;
    std::vector<In> xs(n);
    std::vector<Acc> acc(n);
    for (size_t i = 0; i < n; ++i) hex_in(&xs[i], sizeof(In));
    Acc id = op.identity();
    hex_out(&id, sizeof id);
    for (size_t i = 0; i < n; ++i) { acc[i] = op.lift(xs[i], (cf::u64)i); hex_out(&acc[i], sizeof(Acc)); }
    for (size_t i = 0; i < n; ++i) { Acc c = op.combine(acc[i], acc[(i * 7 + 3) % n]); hex_out(&c, sizeof c); }
    for (size_t i = 0; i < n; ++i) { Out o = op.finish(acc[i], (cf::u64)i); hex_out(&o, sizeof o); }
    return 0;
}
"#;

/// The bytes of a value of a type without padding.
fn bytes<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: only called on the padding-free types below, so every byte is initialised.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
        .to_vec()
}

fn from_hex<T: DeviceValue>(line: &str) -> T {
    let b: Vec<u8> = (0..line.len() / 2)
        .map(|i| u8::from_str_radix(&line[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    assert_eq!(b.len(), std::mem::size_of::<T>(), "C++ wrote {line}");
    // SAFETY: the size matches, and every bit pattern is a valid value of these types
    // (numbers, and structs of numbers without padding).
    unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) }
}

trait Case {
    fn name(&self) -> &str;
    fn cuda(&self) -> CudaOp;
    fn stdin(&self) -> String;
    /// Compares the C++ output with the Rust half; returns the mismatches.
    fn check(&self, out: &str) -> Vec<String>;
}

struct Run<In, O> {
    name: &'static str,
    op: O,
    xs: Vec<In>,
    /// None: the same bits; else within this tolerance.
    tol: Option<Tolerance>,
}

impl<In: DeviceValue, O: Operator<In>> Case for Run<In, O>
where
    O::Acc: Approx,
    O::Out: Approx,
{
    fn name(&self) -> &str {
        self.name
    }
    fn cuda(&self) -> CudaOp {
        self.op.cuda()
    }
    fn stdin(&self) -> String {
        let mut s = format!("{}\n", self.xs.len());
        for x in &self.xs {
            for b in bytes(x) {
                s.push_str(&format!("{b:02x}"));
            }
            s.push('\n');
        }
        s
    }
    fn check(&self, out: &str) -> Vec<String> {
        let n = self.xs.len();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines.len(),
            1 + 3 * n,
            "{}: C++ printed {} lines",
            self.name,
            lines.len()
        );
        let op = self.op;
        let mut bad = Vec::new();
        let mut cmp = |what: String, cpp: String, rust: String| {
            if cpp != rust {
                bad.push(format!("{}: {what}: C++ {cpp} != Rust {rust}", self.name));
            }
        };
        let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
        let tol = self.tol;
        fn agree<T: Approx + std::fmt::Debug>(a: &T, b: &T, tol: Option<Tolerance>) -> bool {
            match tol {
                None => same(a, b),
                Some(t) => a.approx_eq(b, t),
            }
        }
        let id: O::Acc = from_hex(lines[0]);
        cmp("identity".into(), show(&id), show(&op.identity()));
        let acc: Vec<O::Acc> = (0..n).map(|i| op.lift(self.xs[i], i as u64)).collect();
        for i in 0..n {
            let c: O::Acc = from_hex(lines[1 + i]);
            if !agree(&c, &acc[i], tol) {
                cmp(
                    format!("lift({:?}, {i})", self.xs[i]),
                    show(&c),
                    show(&acc[i]),
                );
            }
            let j = (i * 7 + 3) % n;
            let c: O::Acc = from_hex(lines[1 + n + i]);
            let r = op.combine(acc[i], acc[j]);
            if !agree(&c, &r, tol) {
                cmp(
                    format!("combine(lift(x[{i}]), lift(x[{j}]))"),
                    show(&c),
                    show(&r),
                );
            }
            let c: O::Out = from_hex(lines[1 + 2 * n + i]);
            let r = op.finish(acc[i], i as u64);
            if !agree(&c, &r, tol) {
                cmp(format!("finish(lift(x[{i}]), {i})"), show(&c), show(&r));
            }
        }
        bad
    }
}

fn case<In: DeviceValue, O: Operator<In>>(name: &'static str, op: O, xs: Vec<In>) -> Box<dyn Case>
where
    O::Acc: Approx,
    O::Out: Approx,
{
    Box::new(Run {
        name,
        op,
        xs,
        tol: None,
    })
}

/// Rust's `cbrt` (correctly rounded) against glibc's `cbrtf` (within 1 ulp).
#[derive(Clone, Copy, Debug, Default)]
struct Cbrt;

#[cufold::op]
impl Cbrt {
    fn identity() -> f32 {
        0.0
    }
    fn lift(x: f32) -> f32 {
        x.cbrt() + f64::cbrt(x as f64) as f32
    }
    fn combine(a: f32, _b: f32) -> f32 {
        a
    }
}

/// Every method the translation supports on f32 and f64, and casts from floats.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
struct ProbeF {
    to_u64: u64,
    to_i64: i64,
    wide: f64,
    wide_ops: f64,
    abs: f32,
    sqrt: f32,
    exp: f32,
    exp2: f32,
    exp_m1: f32,
    ln: f32,
    ln_1p: f32,
    log2: f32,
    log10: f32,
    log: f32,
    powi: f32,
    powf: f32,
    trig: f32,
    inverse_trig: f32,
    atan2: f32,
    hyperbolic: f32,
    hypot: f32,
    mul_add: f32,
    rounding: f32,
    round: f32,
    round_ties_even: f32,
    fract: f32,
    recip: f32,
    degrees: f32,
    signum: f32,
    copysign: f32,
    min: f32,
    max: f32,
    clamp: f32,
    rem: f32,
    rem_euclid: f32,
    div_euclid: f32,
    literal_math: f32,
    flags: u32,
    bits: u32,
    to_i32: i32,
    to_u32: u32,
    half: f16,
    bhalf: bf16,
    to_u8: u8,
    to_i8: u8,
    to_i16: u8,
    to_u16: u8,
}

/// A sample and its position's derived operand, the probes' accumulator.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
struct FSample {
    x: f32,
    y: f32,
    n: i32,
    pad: u32,
}

/// `finish` computes every probe of a lifted sample (identity and combine are trivial).
#[derive(Clone, Copy, Debug, Default)]
struct FloatProbe;

#[cufold::op]
impl FloatProbe {
    fn identity() -> FSample {
        FSample {
            x: 0.0,
            y: 0.0,
            n: 0,
            pad: 0,
        }
    }
    fn lift(x: f32, i: u64) -> FSample {
        FSample {
            x,
            y: i as f32 * 0.37 - 2.0,
            n: (i % 7) as i32 - 3,
            pad: 0,
        }
    }
    fn combine(a: FSample, b: FSample) -> FSample {
        if a.x > b.x {
            a
        } else {
            b
        }
    }
    fn finish(s: FSample, _count: u64) -> ProbeF {
        let x = s.x;
        let y = s.y;
        let n = s.n;
        let d = x as f64;
        let half = 0.5;
        ProbeF {
            to_u64: x as u64,
            to_i64: (x * 1e10) as i64,
            wide: d * 0.1 + f64::from(y) / 3.0,
            wide_ops: d
                .sqrt()
                .max(d.abs().ln())
                .mul_add(std::f64::consts::PI, d.powi(n))
                + d.exp().powf(0.25),
            abs: x.abs(),
            sqrt: x.sqrt(),
            exp: x.exp(),
            exp2: x.exp2(),
            exp_m1: x.exp_m1(),
            ln: x.ln(),
            ln_1p: x.ln_1p(),
            log2: x.log2(),
            log10: x.log10(),
            log: x.log(y.abs() + 1.5),
            powi: x.powi(n),
            powf: x.powf(y),
            trig: x.sin() + x.cos() * x.tan(),
            inverse_trig: (x / 1e3).asin() - (x / 1e3).acos() + x.atan(),
            atan2: x.atan2(y),
            hyperbolic: (x / 100.0).sinh() + (x / 100.0).cosh() - x.tanh(),
            hypot: x.hypot(y),
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

/// Every integer method and operator the translation supports, and casts between
/// integers and to floats.
#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
struct ProbeI {
    arith: i64,
    div: i64,
    shifts: i64,
    bits: u64,
    counts: u64,
    rotations: u64,
    euclid: i64,
    saturating: i64,
    minmax: i64,
    casts: i64,
    unsigned: u64,
    literal_math: i64,
    wide_float: f64,
    narrow_float: f32,
    small: i32,
    flags: u32,
    tiny: u8,
    tiny_ops: u8,
    pad: u8,
    pad2: u8,
}

#[derive(Clone, Copy, PartialEq, cufold::DeviceType)]
#[repr(C)]
struct ISample {
    x: i64,
    i: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct IntProbe;

#[cufold::op]
impl IntProbe {
    fn identity() -> ISample {
        ISample { x: 0, i: 0 }
    }
    fn lift(x: i64, i: u64) -> ISample {
        ISample { x, i }
    }
    fn combine(a: ISample, b: ISample) -> ISample {
        if a.x > b.x {
            a
        } else {
            b
        }
    }
    fn finish(sample: ISample, _count: u64) -> ProbeI {
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
        ProbeI {
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

fn float_samples() -> Vec<f32> {
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

fn int_samples() -> Vec<i64> {
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
    v
}

fn cases() -> Vec<Box<dyn Case>> {
    let f = float_samples();
    let finite: Vec<f32> = f
        .iter()
        .copied()
        .filter(|x| x.is_finite() && x.abs() < 1e30)
        .collect();
    let maps: Vec<Affine> = finite
        .windows(2)
        .map(|w| Affine { a: w[0], b: w[1] })
        .collect();
    let lses: Vec<Lse> = finite
        .windows(2)
        .map(|w| Lse {
            max: w[0],
            sum: w[1].abs(),
        })
        .collect();
    let mut r = Rng(7);
    let halves: Vec<f16> = f.iter().map(|&x| f16::from_f32(x)).collect();
    let bhalves: Vec<bf16> = f.iter().map(|&x| bf16::from_f32(x)).collect();
    let words: Vec<u32> = (0..300).map(|_| r.next() as u32).collect();
    let doubles: Vec<f64> = f.iter().map(|&x| x as f64 * 1.25).collect();
    let quantized: Vec<f32> = (0..300).map(|_| (r.next() % 16) as f32).collect();
    let nested: Vec<Nested> = finite
        .windows(3)
        .map(|w| Nested {
            inner: Keywords {
                new: w[0],
                class: w[1].to_bits(),
            },
            map: cufold::ops::Affine {
                a: w[1] as f64,
                b: w[2] as f64 * 1e-3,
            },
        })
        .collect();
    vec![
        case("compose", compose, maps),
        case("lse", lse, lses),
        case("LogSumExp", LogSumExp, f.clone()),
        case("ArgMaxTies", ArgMaxTies, quantized),
        case("Hull", Hull, doubles),
        case("HullByMethods", HullByMethods, f.clone()),
        case("Welford", Welford, f.clone()),
        case("hsum", hsum, halves),
        case("bmax", bmax, bhalves),
        case("HalfSummary", HalfSummary, f.clone()),
        case("BitStats", BitStats, words),
        case("FloatProbe", FloatProbe, f),
        case("IntProbe", IntProbe, int_samples()),
        case("syntax", syntax, nested),
        Box::new(Run {
            name: "Cbrt",
            op: Cbrt,
            xs: float_samples(),
            tol: Some(Tolerance::Ulps(1)),
        }),
    ]
}

fn compiler() -> Option<String> {
    let candidates = std::env::var("CXX")
        .ok()
        .into_iter()
        .chain(["g++", "clang++", "c++"].map(String::from));
    for c in candidates {
        let ok = Command::new(&c)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(c);
        }
    }
    None
}

fn build(cxx: &str, dir: &Path, cases: &[Box<dyn Case>]) -> PathBuf {
    let mut src = String::from(SHIM);
    let mut names = Vec::new();
    for c in cases {
        let op = c.cuda();
        assert!(!op.source.is_empty(), "{}: no source", c.name());
        src.push_str(&op.source);
        names.push(op.type_name);
    }
    src.push_str(DRIVER);
    src.push_str(
        "int main(int argc, char** argv) {\n    switch (argc > 1 ? std::atoi(argv[1]) : -1) {\n",
    );
    for (i, n) in names.iter().enumerate() {
        src.push_str(&format!("    case {i}: return run<{n}>();\n"));
    }
    src.push_str("    }\n    return 3;\n}\n");
    let file = dir.join("ops.cpp");
    std::fs::write(&file, &src).unwrap();
    let bin = dir.join("ops");
    let out = Command::new(cxx)
        .args([
            "-std=c++17",
            "-O1",
            "-ffp-contract=off",
            "-fno-fast-math",
            "-w",
            "-o",
        ])
        .arg(&bin)
        .arg(&file)
        .output()
        .expect("run the C++ compiler");
    assert!(
        out.status.success(),
        "{cxx} refused the generated C++ ({}):\n{}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

#[test]
fn translated_operators_compute_what_their_rust_halves_compute() {
    let Some(cxx) = compiler() else {
        assert!(
            std::env::var_os("CUFOLD_CI").is_none(),
            "CUFOLD_CI is set but no C++ compiler was found ($CXX, g++, clang++, c++)"
        );
        eprintln!("SKIPPED: no host C++ compiler ($CXX, g++, clang++, c++); the GPU tests cover this on a device");
        return;
    };
    let dir = std::env::temp_dir().join(format!("cufold-host-cxx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = cases();
    let bin = build(&cxx, &dir, &cases);
    let mut bad = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let mut child = Command::new(&bin)
            .arg(i.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(c.stdin().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}: the C++ program failed", c.name());
        bad.extend(c.check(&String::from_utf8(out.stdout).unwrap()));
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
