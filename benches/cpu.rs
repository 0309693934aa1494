//! The CPU backend beside plain loops of the same semantics, on f32 inputs in [0, 1).
//!
//! `cargo bench --bench cpu` runs the criterion benches (N = 10^7). `cargo bench --bench cpu
//! -- --table [--sizes 10000000,100000000] [--runs 7]` prints a markdown table instead: GB/s
//! (input bytes over the median time of `runs` warm runs) of each cufold CPU call beside its
//! plain loops, on the current machine's rayon pool (RAYON_NUM_THREADS sets its size). A
//! staged release binary takes the same arguments (no toolchain needed where it runs).
//!
//! Plain loops: per-core loops over contiguous chunks (eight lanes where the semantics
//! allow it), one chunk per thread, results joined in chunk order; rayon's unordered
//! `par_iter().sum()`; a sequential prefix loop for the scan.
use criterion::{BenchmarkId, Criterion, Throughput};
use cufold::ops::{ArgMax, Div2Mean, Max, Mean, MeanVar, MinMax, Sum};
use cufold::{Cpu, ScanKind};
use rayon::prelude::*;
use std::cell::RefCell;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// One contiguous chunk per thread of the current pool, reduced by `f`, in chunk order.
fn per_core<R: Send>(x: &[f32], f: impl Fn(usize, &[f32]) -> R + Sync) -> Vec<R> {
    let t = rayon::current_num_threads();
    let len = x.len().div_ceil(t).max(1);
    x.par_chunks(len)
        .enumerate()
        .map(|(c, xs)| f(c * len, xs))
        .collect()
}

fn lanes_sum(xs: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let mut it = xs.chunks_exact(8);
    for c in &mut it {
        for k in 0..8 {
            acc[k] += c[k];
        }
    }
    acc.iter().sum::<f32>() + it.remainder().iter().sum::<f32>()
}

fn lanes_sum_f64(xs: &[f32]) -> f64 {
    let mut acc = [0f64; 8];
    let mut it = xs.chunks_exact(8);
    for c in &mut it {
        for k in 0..8 {
            acc[k] += c[k] as f64;
        }
    }
    acc.iter().sum::<f64>() + it.remainder().iter().map(|&v| v as f64).sum::<f64>()
}

/// NaN-propagating maximum: eight lanes of `max` and a NaN flag.
fn lanes_max(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let mut nan = [false; 8];
    let mut it = xs.chunks_exact(8);
    for c in &mut it {
        for k in 0..8 {
            acc[k] = acc[k].max(c[k]);
            nan[k] |= c[k].is_nan();
        }
    }
    let m = it
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    if nan.iter().any(|&b| b) || it.remainder().iter().any(|v| v.is_nan()) {
        f32::NAN
    } else {
        acc.iter().fold(m, |a, &b| a.max(b))
    }
}

fn lanes_minmax(xs: &[f32]) -> (f32, f32) {
    let mut lo = [f32::INFINITY; 8];
    let mut hi = [f32::NEG_INFINITY; 8];
    let mut nan = [false; 8];
    let mut it = xs.chunks_exact(8);
    for c in &mut it {
        for k in 0..8 {
            lo[k] = lo[k].min(c[k]);
            hi[k] = hi[k].max(c[k]);
            nan[k] |= c[k].is_nan();
        }
    }
    let r = it.remainder();
    if nan.iter().any(|&b| b) || r.iter().any(|v| v.is_nan()) {
        return (f32::NAN, f32::NAN);
    }
    let l = lo.iter().chain(r).fold(f32::INFINITY, |a, &b| a.min(b));
    let h = hi.iter().chain(r).fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    (l, h)
}

/// NaN-propagating argmax (first NaN wins, ties to the lowest index): a scalar loop.
fn loop_argmax(lo: usize, xs: &[f32]) -> (f32, usize) {
    let (mut best, mut at) = (f32::NEG_INFINITY, lo);
    for (i, &v) in xs.iter().enumerate() {
        if best.is_nan() {
            break;
        }
        if v > best || v.is_nan() {
            best = v;
            at = lo + i;
        }
    }
    (best, at)
}

/// Two-pass mean and sum of squared deviations in f64 (eight lanes each).
fn two_pass_meanvar(x: &[f32]) -> (f64, f64) {
    let s: f64 = per_core(x, |_, xs| lanes_sum_f64(xs)).iter().sum();
    let mean = s / x.len() as f64;
    let m2: f64 = per_core(x, |_, xs| {
        let mut acc = [0f64; 8];
        let mut it = xs.chunks_exact(8);
        for c in &mut it {
            for k in 0..8 {
                let d = c[k] as f64 - mean;
                acc[k] += d * d;
            }
        }
        acc.iter().sum::<f64>()
            + it.remainder()
                .iter()
                .map(|&v| (v as f64 - mean) * (v as f64 - mean))
                .sum::<f64>()
    })
    .iter()
    .sum();
    (mean, m2)
}

fn prefix_loop(x: &[f32], out: &mut [f32]) {
    let mut acc = 0f32;
    for (o, &v) in out.iter_mut().zip(x) {
        acc += v;
        *o = acc;
    }
}

fn data(n: usize) -> Vec<f32> {
    (0..n)
        .into_par_iter()
        .map(|i| {
            let h = (i as u64 ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            ((h >> 40) as f32) / (1u64 << 24) as f32
        })
        .collect()
}

/// A row of the table: what, and the work to time.
type Case<'a> = (&'static str, Box<dyn FnMut() + 'a>);

fn cases<'a>(x: &'a [f32], out: &'a RefCell<Vec<f32>>) -> Vec<Case<'a>> {
    let cpu = Cpu::new();
    vec![
        (
            "sum: cufold Cpu::reduce(Sum)",
            Box::new(move || {
                black_box(cpu.reduce(x, Sum).unwrap());
            }),
        ),
        (
            "sum: per-core 8-lane loop",
            Box::new(move || {
                black_box(per_core(x, |_, xs| lanes_sum(xs)).iter().sum::<f32>());
            }),
        ),
        (
            "sum: rayon par_iter().sum() (unordered)",
            Box::new(move || {
                black_box(x.par_iter().sum::<f32>());
            }),
        ),
        (
            "mean: cufold Cpu::reduce(Mean) (f64 acc)",
            Box::new(move || {
                black_box(cpu.reduce(x, Mean).unwrap());
            }),
        ),
        (
            "mean: per-core 8-lane f64 loop",
            Box::new(move || {
                black_box(per_core(x, |_, xs| lanes_sum_f64(xs)).iter().sum::<f64>());
            }),
        ),
        (
            "div2mean: cufold Cpu::reduce(Div2Mean)",
            Box::new(move || {
                black_box(cpu.reduce(x, Div2Mean).unwrap());
            }),
        ),
        (
            "max: cufold Cpu::reduce(Max)",
            Box::new(move || {
                black_box(cpu.reduce(x, Max).unwrap());
            }),
        ),
        (
            "max: per-core 8-lane NaN-propagating loop",
            Box::new(move || {
                black_box(per_core(x, |_, xs| lanes_max(xs)));
            }),
        ),
        (
            "minmax: cufold Cpu::reduce(MinMax)",
            Box::new(move || {
                black_box(cpu.reduce(x, MinMax).unwrap());
            }),
        ),
        (
            "minmax: per-core 8-lane NaN-propagating loop",
            Box::new(move || {
                black_box(per_core(x, |_, xs| lanes_minmax(xs)));
            }),
        ),
        (
            "argmax: cufold Cpu::reduce(ArgMax)",
            Box::new(move || {
                black_box(cpu.reduce(x, ArgMax).unwrap());
            }),
        ),
        (
            "argmax: per-core NaN-propagating loop",
            Box::new(move || {
                black_box(per_core(x, loop_argmax));
            }),
        ),
        (
            "meanvar: cufold Cpu::reduce(MeanVar)",
            Box::new(move || {
                black_box(cpu.reduce(x, MeanVar).unwrap());
            }),
        ),
        (
            "meanvar: per-core two-pass f64 loops",
            Box::new(move || {
                black_box(two_pass_meanvar(x));
            }),
        ),
        (
            "scan: cufold Cpu::scan_into(Sum, inclusive)",
            Box::new(move || {
                cpu.scan_into(x, &mut out.borrow_mut(), Sum, ScanKind::Inclusive)
                    .unwrap();
            }),
        ),
        (
            "scan: cufold 1 thread (Cpu::with_threads(1))",
            Box::new(move || {
                Cpu::with_threads(1)
                    .scan_into(x, &mut out.borrow_mut(), Sum, ScanKind::Inclusive)
                    .unwrap();
            }),
        ),
        (
            "scan: sequential prefix loop (1 core)",
            Box::new(move || {
                prefix_loop(x, &mut out.borrow_mut());
            }),
        ),
    ]
}

/// The median time of each case over `runs` rounds, the cases taking turns within a round
/// (so that a slow patch of a shared machine does not fall on one case only), each round
/// starting one case later than the one before (no case always runs first). In a round
/// each case runs twice in a row and the second run is timed: every case is timed with the
/// caches as its own previous run left them, not as the case before it did (a large
/// last-level cache holds much of a 10^7 input, and a case after an output-writing scan
/// would otherwise read its input from memory where the next reads it from the cache).
fn medians(runs: usize, cases: &mut [Case<'_>]) -> Vec<f64> {
    let mut t = vec![Vec::with_capacity(runs); cases.len()];
    let m = cases.len();
    for round in 0..runs {
        // Each round starts one case later, so that every case takes every place.
        for k in (0..m).map(|j| (j + round) % m) {
            let f = &mut cases[k].1;
            f();
            let s = Instant::now();
            f();
            t[k].push(s.elapsed().as_secs_f64());
        }
    }
    t.into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect()
}

fn table(sizes: &[usize], runs: usize) {
    println!(
        "rayon pool: {} threads; GB/s = 4 N bytes / median of {runs} warm runs",
        rayon::current_num_threads()
    );
    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    for (k, &n) in sizes.iter().enumerate() {
        let x = data(n);
        let out = RefCell::new(vec![0f32; n]);
        let mut cases = cases(&x, &out);
        let secs = medians(runs, &mut cases);
        for (r, ((name, _), t)) in cases.iter().zip(secs).enumerate() {
            if k == 0 {
                rows.push((name.to_string(), Vec::new()));
            }
            rows[r].1.push(4.0 * n as f64 / t / 1e9);
        }
    }
    print!("\n| operation |");
    for n in sizes {
        print!(" N = {n:e} |");
    }
    print!("\n|---|");
    for _ in sizes {
        print!("---:|");
    }
    println!();
    for (name, v) in rows {
        print!("| {name} |");
        for g in v {
            print!(" {g:.2} |");
        }
        println!();
    }
}

fn criterion_benches() {
    let mut c = Criterion::default().configure_from_args();
    let n = 10_000_000;
    let x = data(n);
    let out = RefCell::new(vec![0f32; n]);
    let mut g = c.benchmark_group("cpu");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300))
        .throughput(Throughput::Bytes(4 * n as u64));
    for (name, mut f) in cases(&x, &out) {
        g.bench_function(BenchmarkId::from_parameter(name), |b| b.iter(&mut *f));
    }
    g.finish();
    c.final_summary();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--table") {
        return criterion_benches();
    }
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let sizes: Vec<usize> = value("--sizes")
        .map(|s| s.split(',').map(|v| v.parse().expect("a size")).collect())
        .unwrap_or_else(|| vec![10_000_000, 100_000_000]);
    let runs = value("--runs").map_or(7, |r| r.parse().expect("a run count"));
    table(&sizes, runs);
}
