//! Operators of your own, written once in Rust: `#[cufold::op]` keeps the Rust code as the
//! CPU half and translates it into the CUDA half.
//!
//! 1. Log-sum-exp of 10^8 f32 values, `ln(Σ exp(x_i))`, as one definition with a lift
//!    (raw f32 to accumulator) and a finish (accumulator to f32), against an f64 reference.
//! 2. A linear recurrence `x[t+1] = a[t] * x[t] + b[t]` solved at every step at once by an
//!    inclusive scan of its affine maps with an order-keeping (non-commutative) operator of
//!    a dozen lines, a few prefixes checked against the sequential loop, and the law checker
//!    run on the operator.
//!
//! `cargo run --release --example custom_op [-- --quick]` (`--quick`: 10^6 values).
//! Without a GPU it runs on the CPU backend (the same tree, the same code) and says so.

#[path = "../benches/common/mod.rs"]
mod common;

use cufold::laws::{self, Tolerance};
use cufold::{Backend, ScanKind};
use std::time::Instant;

// ---- 1. log-sum-exp: the accumulator is (max, sum of exp(x - max)) ----------------------

// The operator, written once with `#[cufold::op]`: a maximum and a sum of `exp(x - max)` a
// side, the side with the smaller maximum rescaled at each combine (the same operator as
// examples/row_logsumexp.rs, in the file both examples and the segment bench include).
#[path = "common/log_sum_exp.rs"]
mod log_sum_exp;
use log_sum_exp::LogSumExp;

// ---- 2. a complete operator: affine maps x -> a*x + b, composed in order ---------------

#[derive(Clone, Copy, Default, cufold::DeviceType)]
#[repr(C)]
struct Affine {
    a: f64,
    b: f64,
}

/// Apply `f`, then `g`. Not commutative: reductions and scans keep the input order.
#[cufold::op(identity = Affine { a: 1.0, b: 0.0 })]
fn compose(f: Affine, g: Affine) -> Affine {
    Affine {
        a: g.a * f.a,
        b: g.a * f.b + g.b,
    }
}

// ---- data ------------------------------------------------------------------------------

/// `n` values of `f(u)` for u uniform in [0, 1), generated on all cores.
fn generate<T: Send + Default + Clone>(n: usize, seed: u64, f: impl Fn(f64) -> T + Sync) -> Vec<T> {
    common::fill(n, seed, T::default(), |rng| f(common::unit(rng)))
}

/// log-sum-exp in f64, with a compensated sum: the reference.
fn lse_reference(x: &[f32]) -> f64 {
    let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let (mut sum, mut c) = (0.0f64, 0.0f64);
    for &v in x {
        let t = (v as f64 - max).exp();
        let s = sum + t;
        c += if sum.abs() >= t {
            (sum - s) + t
        } else {
            (t - s) + sum
        };
        sum = s;
    }
    max + (sum + c).ln()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let backend = Backend::auto();
    println!("backend: {}", backend.describe());

    let n = if quick { 1_000_000 } else { 100_000_000 };
    // Values in [-40, 10): exp() of them spans 35 orders of magnitude.
    println!("data: seed 42 (values), seed 7 (maps), rand's ChaCha8 streams");
    let x = generate(n, 42, |u| (u * 50.0 - 40.0) as f32);
    let t = Instant::now();
    let got = backend.reduce(&x, LogSumExp)?;
    let secs = t.elapsed().as_secs_f64();
    let want = lse_reference(&x);
    let upload = match backend {
        Backend::Gpu(_) => ", the upload included",
        Backend::Cpu(_) => "",
    };
    println!(
        "log-sum-exp of {n} f32 values: {got} (f64 reference {want:.9}, relative error {:.2e}), \
         {:.1} ms{upload}",
        (got as f64 - want).abs() / want.abs(),
        secs * 1e3
    );

    if (got as f64 - want).abs() > 1e-5 * want.abs() {
        return Err("log-sum-exp off by more than 1e-5 relative".into());
    }

    // x[t+1] = a[t] x[t] + b[t]: the inclusive scan of the maps holds, at t, the composition
    // of maps 0..=t, so x[t+1] is that map applied to x[0].
    let steps = if quick { 100_000 } else { 10_000_000 };
    let maps = generate(steps, 7, |u| Affine {
        a: 0.999 + 0.002 * u,
        b: u - 0.5,
    });
    let transfers = match backend {
        Backend::Gpu(_) => " (upload and download included)",
        Backend::Cpu(_) => "",
    };
    let t = Instant::now();
    let prefixes = backend.scan(&maps, compose, ScanKind::Inclusive)?;
    let secs = t.elapsed().as_secs_f64();
    if let Backend::Gpu(_) = backend {
        // Built from + and *: the GPU's bits are the CPU backend's, or the example fails.
        let cpu = cufold::Cpu::new().scan(&maps, compose, ScanKind::Inclusive)?;
        let same = |f: &Affine, g: &Affine| {
            (f.a.to_bits(), f.b.to_bits()) == (g.a.to_bits(), g.b.to_bits())
        };
        if !prefixes.iter().zip(&cpu).all(|(f, g)| same(f, g)) {
            return Err("the GPU's scan of the maps differs from the CPU backend's".into());
        }
    }
    let x0 = 1.0;
    println!(
        "linear recurrence over {steps} steps: the scan of its maps, {:.1} ms{transfers}; x[t+1] by \
         the scan and by the sequential loop:",
        secs * 1e3
    );
    // The b have both signs, so x[t] is a sum of terms of either sign: where |x[t]| is small
    // next to them, both results' rounding shows as a larger relative difference.
    let checks = [0, 1, 1000, steps / 2, steps - 1];
    let mut state = x0;
    for (step, m) in maps.iter().enumerate() {
        state = m.a * state + m.b;
        if checks.contains(&step) {
            let f = prefixes[step];
            let scanned = f.a * x0 + f.b;
            println!(
                "  t = {step:>8}: scan {scanned:>20.12}, loop {state:>20.12}, relative difference {:.1e}",
                (scanned - state).abs() / state.abs()
            );
        }
    }

    // The law checker, as in a user's test: compose is associative on exact (dyadic)
    // maps, and its identity is one; it is not commutative, and does not claim to be.
    let dyadic: Vec<Affine> = (0..40)
        .map(|i| Affine {
            a: [0.5, 1.0, 2.0, -1.0][i % 4],
            b: (i % 7) as f64 - 3.0,
        })
        .collect();
    laws::check(compose, &dyadic, Tolerance::Exact)?;
    laws::check(LogSumExp, &x[..40], Tolerance::Relative(1e-5))?;
    println!("laws: compose and LogSumExp pass the identity and associativity checks");
    Ok(())
}
