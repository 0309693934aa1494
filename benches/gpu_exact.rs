//! The exact and compensated sums beside the plain one, on several data distributions: GB/s
//! of compulsory traffic (N x element size), each the median of event-timed launches after
//! warm-up as in `gpu_reduce`; ExactSum's (ExactMean's, CompensatedSum's) GB/s as a percentage
//! of Sum's in the same run; Sum's and CompensatedSum's error against ExactSum's GPU result,
//! `|got - exact| / |exact|` in f64 and in ulps of the exact value in the element type.
//!
//! ```text
//! cargo bench --bench gpu_exact -- [--dtypes f32,f64,f16,bf16] [--log2 20,24,28]
//!                                  [--data uniform,normal,wide,illcond]
//!                                  [--shapes whole,rows,segments] [--reps 50]
//!                                  [--check-up-to 24] [--json OUT.json]
//! ```
//!
//! The data, from seeded ChaCha8 generators on all cores: `uniform` U(0, 1); `normal` N(0, 1);
//! `wide`: random signs, significands uniform in [1, 2), exponents uniform in -E..=E (E: 600
//! for f64, 100 for f32 and bf16, 14 for f16); `illcond`: ill-conditioned sums after Ogita,
//! Rump and Oishi's GenSum, made so that 2^28 elements take seconds: half the elements `a`
//! are log-uniform in [2^lo, 2^(lo + b)], with random signs, and their partners are `-a`;
//! but the `a` below 2^(lo + p - 1) (p: the significand's bits) are positive and their
//! partners `2^lo - a` (exact). The exact sum is 2^lo times their number, and `b` makes the
//! condition number `sum |x| / |sum x|` about 1e30 for f64, 1e12 for f32, 1e4 for bf16 and
//! 1e3 for f16 (lo: -14 for f16, else 0). In place of a shuffle, a seeded permutation
//! scatters the pairs: blocks of 2^10 elements to random places, and each block's elements
//! by its own affine map (see `permutation`). Each data set's condition number is printed
//! (against ExactSum's result).
//!
//! `whole` times Sum, ExactSum, ExactMean and CompensatedSum over the array, each checked
//! against the CPU backend bit for bit for N up to 2^`--check-up-to`. At 2^24 and 2^28 only:
//! `rows` reduces the same array as a 2^12 x 2^12 or 2^14 x 2^14 matrix, per row, and
//! `segments` 2^(log2 - 4) segments of random lengths 4..=32 by offsets (2^24 segments,
//! about 3e8 elements, at 2^28) on data of their own; both time Sum and ExactSum, check
//! ExactSum's results against the CPU's (bits), and count the input, the outputs and the
//! offsets once, as `gpu_segment` does. f16 sums pass 65504 early (uniform data from 2^17
//! elements): both sides are then infinite, and no error is given.

use cudarc::driver::CudaSlice;
use cufold::ops::{CompensatedSum, ExactFloat, ExactMean, ExactSum, Operator, Sum};
use cufold::segment::Rows;
use cufold::{bf16, f16, Cpu, Element, Gpu};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;

#[path = "common/mod.rs"]
mod common;
use common::{fill, median_ms};

const ALL_DTYPES: &str = "f32,f64,f16,bf16";
const ALL_DATA: &str = "uniform,normal,wide,illcond";
const ALL_SHAPES: &str = "whole,rows,segments";

/// Exact and compensated sums beside the plain sum (GB/s, relative errors), on several data
/// distributions. Lists are comma-separated.
#[derive(clap::Parser, Debug)]
#[command(name = "gpu_exact", bin_name = "gpu_exact", args_override_self = true)]
struct Args {
    /// The element types.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = "f32,f64",
          value_parser = clap::builder::PossibleValuesParser::new(ALL_DTYPES.split(',')))]
    dtypes: Vec<String>,
    /// log2 of the input sizes (rows and segments run at 24 and 28).
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = "20,24,28")]
    log2: Vec<u32>,
    /// The data distributions.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = ALL_DATA,
          value_parser = clap::builder::PossibleValuesParser::new(ALL_DATA.split(',')))]
    data: Vec<String>,
    /// The shapes: the whole array, a square matrix's rows, ragged segments by offsets.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = ALL_SHAPES,
          value_parser = clap::builder::PossibleValuesParser::new(ALL_SHAPES.split(',')))]
    shapes: Vec<String>,
    /// Event-timed launches per measurement (the median is reported).
    #[arg(long, default_value_t = 50)]
    reps: usize,
    /// Check the whole-array results against the CPU backend for N up to 2^this.
    #[arg(long, default_value_t = 24)]
    check_up_to: u32,
    #[command(flatten)]
    out: common::Output,
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// (median ms, the GPU's result, `Some(bits agreed)` or `None` when not checked)
type Timed<T> = Res<(f64, T, Option<bool>)>;

/// The float types: their format and data parameters, and CompensatedSum (whose bound,
/// on `T::Calc`, a generic function cannot name briefly).
trait Float: ExactFloat {
    /// Significand bits (with the implicit one), the smallest normal exponent, `wide`'s
    /// exponents (-WIDE..=WIDE), `illcond`'s condition number and smallest exponent.
    const P: i32;
    const EMIN: i32;
    const WIDE: i32;
    const COND: f64;
    const LO: i32;
    fn compensated(c: &Case<'_, Self>, check: bool) -> Timed<Self>;
}

macro_rules! float {
    ($($t:ty: $p:expr, $emin:expr, $wide:expr, $cond:expr, $lo:expr;)*) => {$(
        impl Float for $t {
            const P: i32 = $p;
            const EMIN: i32 = $emin;
            const WIDE: i32 = $wide;
            const COND: f64 = $cond;
            const LO: i32 = $lo;
            fn compensated(c: &Case<'_, Self>, check: bool) -> Timed<Self> {
                c.time(CompensatedSum, check)
            }
        }
    )*};
}
float! {
    f32: 24, -126, 100, 1e12, 0;
    f64: 53, -1022, 600, 1e30, 0;
    f16: 11, -14, 14, 1e3, -14;
    bf16: 8, -126, 100, 1e4, 0;
}

/// A value's bits, through f64 (exact for every float type; tells -0.0 from +0.0).
fn bits<T: Element>(v: T) -> u64 {
    v.to_f64().to_bits()
}

/// Whether the GPU's results are the CPU's, bit for bit (a mismatch is reported on stderr).
fn agree<T: Float, O: Operator<T>>(got: &[T], want: &[Option<T>]) -> bool {
    let bad = (got.iter().zip(want)).position(|(g, w)| w.map(bits) != Some(bits(*g)));
    if let Some(i) = bad {
        let (name, t) = (O::NAME, T::NAME);
        eprintln!(
            "MISMATCH {name} over {t} at {i}: GPU {:?}, CPU {:?}",
            got[i], want[i]
        );
    }
    bad.is_none()
}

/// `|got - exact| / |exact|` and the same in ulps of `exact` in `T`; `None` where either is
/// not finite or the exact sum is zero.
fn rel_err<T: Float>(got: T, exact: T) -> Option<(f64, f64)> {
    let (g, e) = (got.to_f64(), exact.to_f64());
    if !g.is_finite() || !e.is_finite() || e == 0.0 {
        return None;
    }
    let exp = ((e.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let ulp = ((exp.max(T::EMIN) - (T::P - 1)) as f64).exp2();
    let d = (g - e).abs();
    Some((d / e.abs(), d / ulp))
}

/// Where each element of `illcond` takes its value from, a permutation of 0..n: blocks of
/// 2^10 elements permuted (odd multiplies and xor-shifts modulo a power of two, each a
/// bijection there, cycle-walked back into range), the elements of each block by its own
/// `j * odd + r` modulo 2^10; a tail of n mod 2^10 elements stays in place. (Reads from
/// random places per element took several times as long at 2^28.)
fn permutation(n: usize, r: &mut ChaCha8Rng) -> impl Fn(usize) -> usize + Sync {
    const B: usize = 1 << 10;
    let blocks = (n / B) as u64;
    let k = blocks.max(2).next_power_of_two().trailing_zeros();
    let (mask, shift) = ((1u64 << k) - 1, k.div_ceil(2));
    let m: [u64; 3] = std::array::from_fn(|_| r.random::<u64>() | 1);
    move |q| {
        let c = (q / B) as u64;
        if c >= blocks {
            return q;
        }
        let mut b = c;
        loop {
            for m in &m[..2] {
                b = b.wrapping_mul(*m) & mask;
                b ^= b >> shift;
            }
            if b < blocks {
                break;
            }
        }
        let mut h = (c ^ m[2]).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 32;
        let j = ((q % B) as u64).wrapping_mul(h | 1).wrapping_add(h >> 40) as usize % B;
        b as usize * B + j
    }
}

/// `illcond` (module docs): pairs that cancel but for 2^lo, scattered.
fn illcond<T: Float>(n: usize, seed: u64) -> Vec<T> {
    let p = (T::P - 1) as f64;
    let b = T::COND.log2() + (p * std::f64::consts::LN_2).log2() - 1.0;
    let lo = T::LO as f64;
    let (small, delta) = ((lo + p).exp2(), lo.exp2());
    let half = n / 2;
    let a: Vec<T> = fill(half, seed, T::zero(), |r| {
        let m = T::from_f64((lo + r.random::<f64>() * b).exp2());
        if m.to_f64() < small || r.random::<bool>() {
            m
        } else {
            T::from_f64(-m.to_f64())
        }
    });
    let from = permutation(n, &mut ChaCha8Rng::seed_from_u64(!seed));
    (0..n)
        .into_par_iter()
        .map(|q| match from(q) {
            i if i < half => a[i],
            i if i < 2 * half => match a[i - half].to_f64() {
                f if f > 0.0 && f < small => T::from_f64(delta - f),
                f => T::from_f64(-f),
            },
            _ => T::zero(), // the last of an odd n
        })
        .collect()
}

/// `n` values of the distribution `kind` from `seed`.
fn generate<T: Float>(kind: &str, n: usize, seed: u64) -> Vec<T> {
    let z = T::zero();
    match kind {
        "uniform" => fill(n, seed, z, |r| T::from_f64(r.random::<f64>())),
        "normal" => fill(n, seed, z, |r| {
            T::from_f64(r.sample::<f64, _>(StandardNormal))
        }),
        "wide" => fill(n, seed, z, |r| {
            let sign = if r.random::<bool>() { -1.0 } else { 1.0 };
            let e = r.random_range(-T::WIDE..=T::WIDE) as f64;
            T::from_f64(sign * (1.0 + r.random::<f64>()) * e.exp2())
        }),
        "illcond" => illcond(n, seed),
        other => unreachable!("data {other}"),
    }
}

struct Case<'a, T> {
    gpu: &'a Gpu,
    x: &'a CudaSlice<T>,
    host: &'a [T],
    reps: usize,
}

impl<T: Float> Case<'_, T> {
    /// `op` over the whole array: its result, checked against the CPU's if `check`, then
    /// timed.
    fn time<O: Operator<T, Out = T>>(&self, op: O, check: bool) -> Timed<T> {
        let r = self.gpu.reducer::<T, O>(op)?;
        let got = r.reduce(self.x)?;
        let want = if check {
            Some(Cpu::new().reduce(self.host, op)?)
        } else {
            None
        };
        let checked = want.map(|w| agree::<T, O>(&[got], &[Some(w)]));
        let stream = self.gpu.stream();
        let mut out = stream.alloc_zeros::<T>(1)?;
        let ms = median_ms(stream, self.reps, || r.reduce_into(self.x, &mut out))?;
        Ok((ms, got, checked))
    }
}

/// One measurement, for its printed line and its JSON row.
struct Meas<'a> {
    op: &'a str,
    shape: &'a str,
    size: String,
    n: usize,
    bytes: usize,
    ms: f64,
    err: Option<(f64, f64)>,
    checked: Option<bool>,
}

/// Where the measurements of one type and data set go.
struct Sink<'a> {
    gpu: &'a Gpu,
    dtype: &'a str,
    data: &'a str,
    rows: &'a mut Vec<serde_json::Value>,
    ok: bool,
}

impl Sink<'_> {
    /// Prints and records `m`; its GB/s, with its percentage of `sum_gbs` when given.
    fn put(&mut self, m: Meas<'_>, sum_gbs: Option<f64>) -> f64 {
        let gbs = m.bytes as f64 / (m.ms * 1e-3) / 1e9;
        let pct = sum_gbs.map(|s| 100.0 * gbs / s);
        let mut line = format!(
            "cufold  {:11} {:4} {:8} {:16} {:9.4} ms {gbs:8.1} GB/s",
            m.op, self.dtype, self.data, m.size, m.ms
        );
        if let Some(p) = pct {
            line += &format!("  ({p:5.1}% of sum)");
        }
        if let Some((rel, ulps)) = m.err {
            line += &format!("  err {rel:.3e} ({ulps:.3} ulp)");
        }
        line += match m.checked {
            Some(true) => "",
            Some(false) => "  MISMATCH",
            None => "  (not checked)",
        };
        println!("{line}");
        self.ok &= m.checked != Some(false);
        self.rows.push(serde_json::json!({
            "lib": "cufold", "family": "exact", "op": m.op, "dtype": self.dtype,
            "data": self.data, "shape": m.shape, "n": m.n, "ms": m.ms, "gbs": gbs,
            "pct_of_sum": pct, "rel_err": m.err.map(|e| e.0), "ulps": m.err.map(|e| e.1),
            "checked": m.checked, "device": self.gpu.device_name(),
        }));
        gbs
    }
}

/// Sum, ExactSum, ExactMean and CompensatedSum over the whole array.
fn whole<T: Float>(s: &mut Sink<'_>, case: &Case<'_, T>, lg: u32, check: bool) -> Res<()> {
    let n = case.host.len();
    let (sum, exact, mean) = (
        case.time(Sum, check)?,
        case.time(ExactSum, check)?,
        case.time(ExactMean, check)?,
    );
    let comp = T::compensated(case, check)?;
    let (e, abs) = (exact.1.to_f64(), case.host.iter().map(|v| v.to_f64().abs()));
    let cond = abs.sum::<f64>() / e.abs();
    println!(
        "# {} {} 2^{lg}: exact sum {e:e}, condition number {cond:.2e}",
        s.dtype, s.data
    );
    let meas = |op, (ms, got, checked): (f64, T, Option<bool>), err: bool| Meas {
        op,
        shape: "whole",
        size: format!("2^{lg}"),
        n,
        bytes: std::mem::size_of_val(case.host),
        ms,
        err: if err { rel_err(got, exact.1) } else { None },
        checked,
    };
    let sum_gbs = s.put(meas("sum", sum, true), None);
    s.put(meas("exactsum", exact, false), Some(sum_gbs));
    s.put(meas("exactmean", mean, false), Some(sum_gbs));
    s.put(meas("compensated", comp, true), Some(sum_gbs));
    Ok(())
}

/// Rows of a packed matrix, or segments by offsets (on the host and the device).
enum Shape {
    Rows(Rows),
    Offsets(Vec<u64>, CudaSlice<u64>),
}

/// `op` per row or segment, timed; ExactSum's results checked against the CPU's if `check`.
fn segmented<T: Float, O: Operator<T, Out = T>>(
    gpu: &Gpu,
    op: O,
    (x, host): (&CudaSlice<T>, &[T]),
    shape: &Shape,
    reps: usize,
    check: bool,
) -> Res<(f64, Option<bool>)> {
    let stream = gpu.stream();
    let r = gpu.segment_reducer::<T, O>(op)?;
    let count = match shape {
        Shape::Rows(rows) => rows.rows,
        Shape::Offsets(o, _) => o.len() - 1,
    };
    let mut out = stream.alloc_zeros::<T>(count)?;
    let launch = |out: &mut CudaSlice<T>| match shape {
        Shape::Rows(rows) => r.reduce_rows_into(x, *rows, out),
        Shape::Offsets(_, o) => r.reduce_segments_into(x, o, out),
    };
    let checked = if check {
        launch(&mut out)?;
        let got = stream.clone_dtoh(&out)?;
        let want = match shape {
            Shape::Rows(r) => Cpu::new()
                .reduce_rows(host, *r, op)?
                .into_iter()
                .map(Some)
                .collect(),
            Shape::Offsets(o, _) => Cpu::new().reduce_segments(host, o, op)?,
        };
        Some(agree::<T, O>(&got, &want))
    } else {
        None
    };
    let ms = median_ms(stream, reps, || launch(&mut out))?;
    Ok((ms, checked))
}

/// Sum and ExactSum per row or segment of `shape` over `x`.
fn per_segment<T: Float>(
    s: &mut Sink<'_>,
    (x, host): (&CudaSlice<T>, &[T]),
    shape: &Shape,
    size: String,
    reps: usize,
) -> Res<()> {
    let (name, count, extra) = match shape {
        Shape::Rows(r) => ("rows", r.rows, 0),
        Shape::Offsets(o, _) => ("segments", o.len() - 1, o.len() * 8),
    };
    let t = std::mem::size_of::<T>();
    let n = host.len();
    let meas = |op, (ms, checked): (f64, Option<bool>)| Meas {
        op,
        shape: name,
        size: size.clone(),
        n,
        bytes: (n + count) * t + extra,
        ms,
        err: None,
        checked,
    };
    let sum = segmented(s.gpu, Sum, (x, host), shape, reps, false)?;
    let sum_gbs = s.put(meas("sum", sum), None);
    let exact = segmented(s.gpu, ExactSum, (x, host), shape, reps, true)?;
    s.put(meas("exactsum", exact), Some(sum_gbs));
    Ok(())
}

fn run<T: Float>(gpu: &Gpu, a: &Args, dtype: &str, rows: &mut Vec<serde_json::Value>) -> Res<bool> {
    let mut ok = true;
    let has = |shape: &str| a.shapes.iter().any(|s| s == shape);
    for (d, data) in a.data.iter().enumerate() {
        let mut s = Sink {
            gpu,
            dtype,
            data,
            rows: &mut *rows,
            ok: true,
        };
        for &lg in &a.log2 {
            let seed = 0x5eed ^ ((lg as u64) << 8) ^ d as u64;
            let big = lg == 24 || lg == 28; // rows and segments
            if has("whole") || (big && has("rows")) {
                let host = generate::<T>(data, 1 << lg, seed);
                let x = gpu.stream().clone_htod(&host)?;
                if has("whole") {
                    let case = Case {
                        gpu,
                        x: &x,
                        host: &host,
                        reps: a.reps,
                    };
                    whole(&mut s, &case, lg, lg <= a.check_up_to)?;
                }
                if big && has("rows") {
                    let side = 1usize << (lg / 2);
                    let shape = Shape::Rows(Rows::new(side, side));
                    let size = format!("2^{}x2^{}", lg / 2, lg / 2);
                    per_segment(&mut s, (&x, &host), &shape, size, a.reps)?;
                }
            }
            if big && has("segments") {
                let mut r = ChaCha8Rng::seed_from_u64(seed ^ 0x5e6);
                let mut offsets = Vec::with_capacity((1 << (lg - 4)) + 1);
                offsets.push(0u64);
                for _ in 0..1usize << (lg - 4) {
                    offsets.push(offsets.last().unwrap() + r.random_range(4..=32u64));
                }
                let host = generate::<T>(data, *offsets.last().unwrap() as usize, !seed);
                let x = gpu.stream().clone_htod(&host)?;
                let o = gpu.stream().clone_htod(&offsets)?;
                let shape = Shape::Offsets(offsets, o);
                let size = format!("2^{} segs", lg - 4);
                per_segment(&mut s, (&x, &host), &shape, size, a.reps)?;
            }
        }
        ok &= s.ok;
    }
    Ok(ok)
}

fn main() -> Res<()> {
    let a = <Args as clap::Parser>::parse();
    let Some(gpu) = common::open_gpu() else {
        return Ok(());
    };
    println!(
        "# cufold {} on {}, median of {} event-timed launches; errors against ExactSum's result",
        env!("CARGO_PKG_VERSION"),
        gpu.device_name(),
        a.reps
    );
    let mut rows = Vec::new();
    let mut ok = true;
    for d in &a.dtypes {
        ok &= match d.as_str() {
            "f32" => run::<f32>(&gpu, &a, d, &mut rows)?,
            "f64" => run::<f64>(&gpu, &a, d, &mut rows)?,
            "f16" => run::<f16>(&gpu, &a, d, &mut rows)?,
            "bf16" => run::<bf16>(&gpu, &a, d, &mut rows)?,
            other => return Err(format!("unknown dtype {other}").into()),
        };
    }
    if let Some(path) = &a.out.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)?;
    }
    if !ok {
        return Err("some GPU results differed from the CPU backend".into());
    }
    Ok(())
}
