//! The CPU backend beside plain loops of the same semantics, on f32 inputs in [0, 1).
//!
//! `cargo bench --bench cpu` runs the criterion benches (N = 10^7). `cargo bench --bench cpu
//! -- --table [--sizes 10000000,100000000] [--runs 7]` prints a markdown table instead: GB/s
//! (input bytes over the median time of `runs` warm runs) of each cufold CPU call beside its
//! plain loops, on the current machine's rayon pool (RAYON_NUM_THREADS sets its size). A
//! staged release binary takes the same arguments (no toolchain needed where it runs).
//!
//! `cargo bench --bench cpu -- --segments [--n 10000000] [--lengths 1,4,16] [--runs 5]` prints
//! milliseconds of the segmented calls (CSR segments, rows, runs by key, all of one length;
//! length 0: 2^24 empty segments) with `Cpu::with_threads(1)` and on the whole pool, beside a
//! sequential loop of the same semantics on one thread. `--help` lists the options.
//!
//! Plain loops: per-core loops over contiguous chunks (eight lanes where the semantics
//! allow it), one chunk per thread, results joined in chunk order; rayon's unordered
//! `par_iter().sum()`; a sequential prefix loop for the scan.
use criterion::{BenchmarkId, Criterion, Throughput};
use cufold::ops::{ArgMax, Div2Mean, Max, Mean, MeanVar, MinMax, Sum};
use cufold::segment::Rows;
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

/// A shape of segments over N elements: `len` elements each (the last elements in none when
/// `len` does not divide N), or `EMPTY` empty segments.
const EMPTY: usize = 0;

/// The CSR offsets of a shape: segments of `len` over the first `n / len * len` elements, or
/// 2^24 empty segments at 0.
fn shape_offsets(n: usize, len: usize) -> Vec<u64> {
    if len == EMPTY {
        return vec![0; (1 << 24) + 1];
    }
    (0..=n / len).map(|i| (i * len) as u64).collect()
}

/// The segment cases of one shape: each cufold call with `with_threads(1)` and on the whole
/// pool, beside a sequential loop of the same semantics (one thread), f32 `Sum`, inclusive.
fn segment_cases<'a>(
    x: &'a [f32],
    len: usize,
    offsets: &'a [u64],
    keys: &'a [u32],
    out: &'a RefCell<Vec<f32>>,
) -> Vec<Case<'a>> {
    let cols = len;
    let rows = Rows::new(if len == EMPTY { 1 << 24 } else { x.len() / len }, cols);
    let used = &x[..rows.rows * cols];
    let inc = ScanKind::Inclusive;
    let mut v: Vec<Case<'a>> = Vec::new();
    for (t, name) in [(1usize, "1 thread"), (0, "pool")] {
        let cpu = if t == 1 {
            Cpu::with_threads(1)
        } else {
            Cpu::new()
        };
        let tag = |op: &'static str| -> &'static str {
            Box::leak(format!("{op}: cufold {name}").into_boxed_str())
        };
        v.push((
            tag("reduce_segments"),
            Box::new(move || {
                black_box(cpu.reduce_segments(x, offsets, Sum).unwrap());
            }),
        ));
        v.push((
            tag("scan_segments_into"),
            Box::new(move || {
                cpu.scan_segments_into(x, offsets, &mut out.borrow_mut(), Sum, inc)
                    .unwrap();
            }),
        ));
        v.push((
            tag("reduce_rows"),
            Box::new(move || {
                black_box(cpu.reduce_rows(used, rows, Sum).unwrap());
            }),
        ));
        v.push((
            tag("scan_rows_into"),
            Box::new(move || {
                let o = &mut out.borrow_mut()[..used.len()];
                cpu.scan_rows_into(used, rows, o, Sum, inc).unwrap();
            }),
        ));
        if len != EMPTY {
            v.push((
                tag("reduce_by_key"),
                Box::new(move || {
                    black_box(cpu.reduce_by_key(keys, x, Sum).unwrap());
                }),
            ));
            v.push((
                tag("scan_by_key_into"),
                Box::new(move || {
                    cpu.scan_by_key_into(keys, x, &mut out.borrow_mut(), Sum, inc)
                        .unwrap();
                }),
            ));
        }
    }
    v.push((
        "reduce_segments: loop",
        Box::new(move || {
            let r: Vec<Option<f32>> = offsets
                .windows(2)
                .map(|w| {
                    Some(
                        x[w[0] as usize..w[1] as usize]
                            .iter()
                            .fold(0.0, |a, &b| a + b),
                    )
                })
                .collect();
            black_box(r);
        }),
    ));
    v.push((
        "scan_segments_into: loop",
        Box::new(move || {
            let o = &mut out.borrow_mut();
            for w in offsets.windows(2) {
                let (lo, hi) = (w[0] as usize, w[1] as usize);
                prefix_loop(&x[lo..hi], &mut o[lo..hi]);
            }
        }),
    ));
    v.push((
        "reduce_rows: loop",
        Box::new(move || {
            let r: Vec<f32> = if cols == 0 {
                vec![0.0; rows.rows]
            } else {
                used.chunks_exact(cols)
                    .map(|c| c.iter().fold(0.0, |a, &b| a + b))
                    .collect()
            };
            black_box(r);
        }),
    ));
    v.push((
        "scan_rows_into: loop",
        Box::new(move || {
            if cols > 0 {
                let o = &mut out.borrow_mut()[..used.len()];
                for (xs, ys) in used.chunks_exact(cols).zip(o.chunks_exact_mut(cols)) {
                    prefix_loop(xs, ys);
                }
            }
        }),
    ));
    if len != EMPTY {
        v.push((
            "reduce_by_key: loop",
            Box::new(move || {
                let (mut k, mut s, mut l) = (Vec::new(), Vec::new(), Vec::new());
                for (i, (&key, &v)) in keys.iter().zip(x).enumerate() {
                    if i == 0 || key != keys[i - 1] {
                        k.push(key);
                        s.push(v);
                        l.push(1u64);
                    } else {
                        *s.last_mut().unwrap() += v;
                        *l.last_mut().unwrap() += 1;
                    }
                }
                black_box((k, s, l));
            }),
        ));
        v.push((
            "scan_by_key_into: loop",
            Box::new(move || {
                let o = &mut out.borrow_mut();
                let mut acc = 0f32;
                for (i, (&key, &v)) in keys.iter().zip(x).enumerate() {
                    if i == 0 || key != keys[i - 1] {
                        acc = 0.0;
                    }
                    acc += v;
                    o[i] = acc;
                }
            }),
        ));
    }
    v
}

/// Milliseconds (medians of `runs`) of the segment cases, one table row per call and shape.
fn segment_table(n: usize, lengths: &[usize], runs: usize, only: Option<&str>) {
    println!(
        "rayon pool: {} threads; N = {n} f32, Sum, inclusive scans; ms = median of {runs} warm runs",
        rayon::current_num_threads()
    );
    let x = data(n);
    let out = RefCell::new(vec![0f32; n]);
    println!("\n| call | segment length | cufold, 1 thread | cufold, pool | sequential loop | loop / 1 thread | loop / pool |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for &len in lengths {
        let offsets = shape_offsets(n, len);
        let keys: Vec<u32> = (0..n).map(|i| (i / len.max(1)) as u32).collect();
        let mut cases = segment_cases(&x, len, &offsets, &keys, &out);
        if let Some(only) = only {
            cases.retain(|c| c.0.starts_with(only));
        }
        let ms: Vec<f64> = medians(runs, &mut cases).iter().map(|t| t * 1e3).collect();
        let at = |name: String| cases.iter().position(|c| c.0 == name).map(|i| ms[i]);
        let shape = if len == EMPTY {
            "2^24 empty".to_string()
        } else {
            len.to_string()
        };
        for call in [
            "reduce_segments",
            "scan_segments_into",
            "reduce_rows",
            "scan_rows_into",
            "reduce_by_key",
            "scan_by_key_into",
        ] {
            let (Some(one), Some(pool), Some(lp)) = (
                at(format!("{call}: cufold 1 thread")),
                at(format!("{call}: cufold pool")),
                at(format!("{call}: loop")),
            ) else {
                continue;
            };
            println!(
                "| {call} | {shape} | {one:.1} | {pool:.1} | {lp:.1} | {:.2} | {:.2} |",
                lp / one,
                lp / pool
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    if args.iter().any(|a| a == "--help") {
        println!(
            "cargo bench --bench cpu                      criterion benches (N = 10^7)\n\
             cargo bench --bench cpu -- --table [--sizes N,..] [--runs R]\n\
             \x20   GB/s of whole-array calls beside plain loops\n\
             cargo bench --bench cpu -- --segments [--n N] [--lengths 1,4,..,0] [--runs R] [--only CALL]\n\
             \x20   ms of the segment calls (with_threads(1), the pool) beside sequential loops;\n\
             \x20   length 0 is 2^24 empty segments (default lengths 1,4,16,64,256,1024,1048576,0)"
        );
        return;
    }
    if args.iter().any(|a| a == "--segments") {
        let n = value("--n").map_or(10_000_000, |v| v.parse().expect("a size"));
        let lengths: Vec<usize> = value("--lengths")
            .map(|s| s.split(',').map(|v| v.parse().expect("a length")).collect())
            .unwrap_or_else(|| vec![1, 4, 16, 64, 256, 1024, 1 << 20, EMPTY]);
        let runs = value("--runs").map_or(5, |r| r.parse().expect("a run count"));
        let only = value("--only").map(String::as_str);
        return segment_table(n, &lengths, runs, only);
    }
    if !args.iter().any(|a| a == "--table") {
        return criterion_benches();
    }
    let sizes: Vec<usize> = value("--sizes")
        .map(|s| s.split(',').map(|v| v.parse().expect("a size")).collect())
        .unwrap_or_else(|| vec![10_000_000, 100_000_000]);
    let runs = value("--runs").map_or(7, |r| r.parse().expect("a run count"));
    table(&sizes, runs);
}
