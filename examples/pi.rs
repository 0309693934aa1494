//! π by map-reduce: the composite trapezoidal rule for
//!
//! ```text
//! ∫_{-1}^{1} √(1 - x²) dx = π/2,   T_n = h Σ_{k=1}^{n-1} f(-1 + k h),   h = 2/n,   π ≈ 2 T_n
//! ```
//!
//! (the end points add f(±1) = 0). Each term is made on the way into the reduction by a
//! `#[cufold::transform]` from its index alone (the input is an array of n - 1 bytes that
//! are never read), with `f(-1 + t) = √(t (2 - t))` and `t = k h`, which avoids the
//! cancellation of `1 - x²` near the ends; the term is computed in f64 and, for the f32
//! rows, rounded once to f32. Four sums of the same terms, side by side: a sequential loop
//! in the type, `Sum` (the pairwise tree), `CompensatedSum` (a double-word tree) and
//! `ExactSum` (the exact sum rounded once), each with its error against π and its time.
//!
//! The rule's own error: the integrand has a square-root singularity at each end, so the
//! error falls as n^-1.5, not n^-2 (Navot's extension of the Euler–Maclaurin formula): with
//! `f(-1 + t) = √t √(2 - t)`, each end adds `ζ(-1/2) √2 h^1.5` to `T_n`, so
//! `2 T_n - π ≈ 4 √2 ζ(-1/2) h^1.5 ≈ -3.33 n^-1.5`. Table 1 (small n) shows every method
//! at that error. Table 2 (large n) shows the sums' own errors once the rule's falls below
//! them (in f32; in f64 only the loop's shows by 10^8): the f32 loop stalls once its running
//! sum passes 2^24 (past n ≈ 2·10^7, each term below 1 is rounded away), the pairwise f32 sum
//! carries a rounding from each of its levels, and the compensated and exact sums stay within
//! the final rounding of the sum to f32 (here they agree to the bit).
//!
//! `cargo run --release --example pi [-- --max-log10 9]`: n from 10^3 to 10^max (default
//! 10^9 on a GPU, 10^8 on the CPU backend). Runs on `Backend::auto()`: the GPU if there is
//! one, else the CPU backend (the same trees). It checks, and exits non-zero otherwise, that
//! the backend's ExactSum, Sum and CompensatedSum have the CPU backend's bits up to 10^7
//! (the terms use only `+ - * /` and `sqrt`, correctly rounded on both), and that the f64
//! error at 10^6 is the rule's predicted error within 5%.

use cufold::ops::{CompensatedSum, ExactSum, Mapped, Operator, Sum, Transform};
use cufold::{Backend, Cpu, Element};
use std::time::Instant;

/// The k-th interior term, `f(-1 + (k + 1) h)`, in f64.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Term64 {
    h: f64,
}

#[cufold::transform]
impl Term64 {
    fn apply(&self, _x: u8, k: u64) -> f64 {
        let t = (k + 1) as f64 * self.h;
        (t * (2.0 - t)).sqrt()
    }
}

/// The same term, rounded once to f32.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Term32 {
    h: f64,
}

#[cufold::transform]
impl Term32 {
    fn apply(&self, _x: u8, k: u64) -> f32 {
        let t = (k + 1) as f64 * self.h;
        (t * (2.0 - t)).sqrt() as f32
    }
}

/// ζ(-1/2).
const ZETA_MINUS_HALF: f64 = -0.207_886_224_977_354_57;

/// The trapezoidal rule's leading error in π for n intervals: `4 √2 ζ(-1/2) (2/n)^1.5`.
fn rule_error(n: u64) -> f64 {
    4.0 * std::f64::consts::SQRT_2 * ZETA_MINUS_HALF * (2.0 / n as f64).powf(1.5)
}

/// The n - 1 unread input bytes, where the backend reduces.
enum Input {
    Host(Vec<u8>),
    Device(cudarc::driver::CudaSlice<u8>),
}

/// One method's result: the sum of the terms (as f64) and the seconds it took.
struct Run {
    sum: f64,
    secs: f64,
}

/// `op` (mapped from `map`) over the input on the backend: its value and time.
fn reduce<M, O>(backend: &Backend, input: &Input, map: M, op: O) -> cufold::Result<(O::Out, f64)>
where
    M: Transform<u8>,
    O: Operator<M::Out>,
{
    let op = Mapped::new(map, op);
    let t = Instant::now();
    let v = match (backend, input) {
        (Backend::Gpu(g), Input::Device(d)) => g.reduce(d, op)?,
        (Backend::Cpu(c), Input::Host(h)) => c.reduce(h, op)?,
        _ => unreachable!("the input lives where the backend reduces"),
    };
    Ok((v, t.elapsed().as_secs_f64()))
}

/// The four methods for one type: the loop, Sum, CompensatedSum and ExactSum; `check`
/// compares the backend's tree sums with the CPU backend's bits.
fn methods<T, M>(
    backend: &Backend,
    input: &Input,
    map: M,
    n: u64,
    check: bool,
) -> Result<[Run; 4], String>
where
    T: Element,
    M: Transform<u8, Out = T>,
    Sum: Operator<T, Out = T>,
    CompensatedSum: Operator<T, Out = T>,
    ExactSum: Operator<T, Out = T>,
{
    let t = Instant::now();
    let mut acc = T::zero();
    for k in 0..n - 1 {
        acc = acc.add(map.apply(0, k));
    }
    let looped = Run {
        sum: acc.to_f64(),
        secs: t.elapsed().as_secs_f64(),
    };
    let err = |e: cufold::Error| e.to_string();
    let (s, ss) = reduce(backend, input, map, Sum).map_err(err)?;
    let (c, cs) = reduce(backend, input, map, CompensatedSum).map_err(err)?;
    let (e, es) = reduce(backend, input, map, ExactSum).map_err(err)?;
    if check {
        let bytes = vec![0u8; (n - 1) as usize];
        let cpu = Cpu::new();
        let want = (
            cpu.reduce(&bytes, Mapped::new(map, Sum)).map_err(err)?,
            cpu.reduce(&bytes, Mapped::new(map, CompensatedSum))
                .map_err(err)?,
            cpu.reduce(&bytes, Mapped::new(map, ExactSum))
                .map_err(err)?,
        );
        // As f64 (exact for f32), bit for bit.
        let bits = |v: (T, T, T)| [v.0, v.1, v.2].map(|x| x.to_f64().to_bits());
        if bits((s, c, e)) != bits(want) {
            return Err(format!(
                "{} at n = {n}: the backend's Sum, CompensatedSum and ExactSum {:?} differ from \
                 the CPU backend's {:?}",
                T::NAME,
                (s, c, e),
                want
            ));
        }
    }
    let run = |v: T, secs| Run {
        sum: v.to_f64(),
        secs,
    };
    Ok([looped, run(s, ss), run(c, cs), run(e, es)])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = Backend::auto();
    let on_gpu = matches!(backend, Backend::Gpu(_));
    let args: Vec<String> = std::env::args().collect();
    let max_log10: u32 = match args.iter().position(|a| a == "--max-log10") {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .filter(|&v| (3..=10).contains(&v))
            .ok_or("--max-log10 takes a number from 3 to 10")?,
        None if on_gpu => 9,
        None => 8,
    };
    println!("backend: {}", backend.describe());
    println!(
        "π = 2 ∫_{{-1}}^{{1}} √(1 - x²) dx by the trapezoidal rule with n intervals; each cell: the \
         error of 2 h Σ terms against π, and the sum's milliseconds"
    );
    println!(
        "(loop: a sequential loop in the type, on the host; Sum: the pairwise tree; CompensatedSum: \
         a double-word tree; ExactSum: the exact sum rounded once{})",
        if on_gpu {
            "; GPU times: the reduction of the device's index array, the result copied back"
        } else {
            ""
        }
    );
    if let Backend::Gpu(g) = &backend {
        // Compile (or load) the kernels first, so that the tables time reductions only: those
        // of small inputs, and the order-free ExactSum's second kernel, which it takes from
        // 2^16 elements (its f64 form takes NVRTC most of a minute on a cold cache).
        for n in [10u64, (1 << 17) + 1] {
            let input = Input::Device(g.stream().alloc_zeros::<u8>((n - 1) as usize)?);
            methods::<f64, _>(&backend, &input, Term64 { h: 2.0 / n as f64 }, n, false)?;
            methods::<f32, _>(&backend, &input, Term32 { h: 2.0 / n as f64 }, n, false)?;
        }
    }
    let mut failed = Vec::new();
    let mut f64_at_1e6 = f64::NAN;
    let header = || {
        println!(
            "{:<4} {:>6} {:>10} | {:>20} | {:>20} | {:>20} | {:>20}",
            "type", "n", "rule's", "loop", "Sum", "CompensatedSum", "ExactSum"
        );
    };
    for (title, logs) in [
        (
            "Table 1: small n, where the error is the rule's (about -3.33 n^-1.5)",
            3..=5u32,
        ),
        (
            "Table 2: large n, where the rule's error falls below the sums' own",
            6..=max_log10,
        ),
    ] {
        println!("\n{title}");
        header();
        for log in logs {
            let n = 10u64.pow(log);
            let h = 2.0 / n as f64;
            let input = match &backend {
                Backend::Gpu(g) => Input::Device(g.stream().alloc_zeros::<u8>((n - 1) as usize)?),
                Backend::Cpu(_) => Input::Host(vec![0u8; (n - 1) as usize]),
            };
            let check = n <= 10_000_000;
            for ty in ["f64", "f32"] {
                let runs = match ty {
                    "f64" => methods::<f64, _>(&backend, &input, Term64 { h }, n, check),
                    _ => methods::<f32, _>(&backend, &input, Term32 { h }, n, check),
                };
                let runs = match runs {
                    Ok(r) => r,
                    Err(e) => {
                        failed.push(e);
                        continue;
                    }
                };
                let cells: Vec<String> = runs
                    .iter()
                    .map(|r| {
                        let err = 2.0 * h * r.sum - std::f64::consts::PI;
                        format!("{err:>10.2e} {:>9.2}", r.secs * 1e3)
                    })
                    .collect();
                if ty == "f64" && n == 1_000_000 {
                    f64_at_1e6 = 2.0 * h * runs[3].sum - std::f64::consts::PI;
                }
                println!(
                    "{ty:<4} {:>6} {:>10.2e} | {} | {} | {} | {}",
                    format!("1e{log}"),
                    rule_error(n),
                    cells[0],
                    cells[1],
                    cells[2],
                    cells[3]
                );
            }
        }
    }
    println!(
        "(rule's: 4 √2 ζ(-1/2) (2/n)^1.5, the trapezoidal rule's leading error for this integrand)"
    );
    let predicted = rule_error(1_000_000);
    let within = (f64_at_1e6 - predicted).abs() <= 0.05 * predicted.abs(); // false for NaN
    if max_log10 >= 6 && !within {
        failed.push(format!(
            "the f64 error at n = 10^6 is {f64_at_1e6:e}, not the rule's {predicted:e} within 5%"
        ));
    }
    if !failed.is_empty() {
        for f in &failed {
            eprintln!("FAILED: {f}");
        }
        std::process::exit(1);
    }
    println!(
        "ok: the backend's tree sums have the CPU backend's bits up to n = 10^7, and the f64 error \
         at 10^6 ({f64_at_1e6:.3e}) is the rule's ({predicted:.3e}) within 5%"
    );
    Ok(())
}
