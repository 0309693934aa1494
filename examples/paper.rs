//! Reproduces Pechprasarn & Khiripet, "Accelerating Bayesian Computation with Parallel
//! Reduction using CUDA": Monte Carlo sample means by a tree reduction that halves every
//! pairwise add, `(a + b) / 2`, corrected by `C = next_pow2(N) / N`.
//!
//! Table 2 — accuracy. For U(0,1) and N(6,1) samples at the paper's sizes, the mean by a
//! naive sequential f32 sum, by sequential Kahan summation, by the pairwise tree (`Sum` in
//! f32, divided by N), by `Div2Mean` (the paper's halving tree, all in f32), by `Mean` (the
//! f32 samples widened to f64 and tree-summed in f64, then divided by N) and by `ExactMean`
//! in f32 (the exact mean rounded once to f32), each with its error against the exact mean
//! *of the same samples*: `ExactMean` of the samples widened to f64, the exact mean rounded
//! once to f64. The naive f32 sum stalls once the running sum passes 2^24: adding values
//! below 1 to it rounds them away, so at N = 67,107,840 the U(0,1) mean collapses towards
//! 0.25. Kahan and the trees stay right. Halving is pairwise summation scaled by exact powers
//! of two, so `Div2Mean` is exactly as accurate as a pairwise f32 sum (the `Sum` column);
//! what halving adds is headroom against overflow. `ExactMean`'s f32 error is its one
//! rounding, at most half an ulp of the mean.
//!
//! Table 3 — speed. The GPU `Div2Mean` against sequential Kahan on one CPU core, for block
//! sizes 128 to 1024 (the paper's 2048 is not possible: CUDA allows at most 1024 threads per
//! block). The GPU time is the kernel alone (CUDA events, median of 20 launches), the input
//! already on the device, as in the paper; Kahan's time is the median of 5 warm runs. The
//! paper reports speed-ups of up to 57× (a GTX 280 against its CPU of the time); its
//! per-size values are not recorded in this repository, so the table prints that headline
//! beside ours. Without a GPU the table times the CPU backend (all cores, median of 5 warm
//! runs) instead, which has no block size.
//!
//! `cargo run --release --example paper [-- --quick]`; `CUFOLD_SEED=n` fixes the samples.
//! Without a GPU it runs on the CPU backend (same tree, same bits) and says so first.

#[path = "../benches/common/mod.rs"]
mod common;

use cudarc::driver::CudaSlice;
use cufold::ops::{Div2Mean, ExactMean, ExactSum, Mean, Operator, Sum};
use cufold::reduce::ReduceConfig;
use cufold::{Cpu, Gpu};
use std::hint::black_box;

const SIZES: [usize; 5] = [8_388_480, 16_776_960, 33_553_920, 67_107_840, 134_215_680];
const BLOCKS: [u32; 4] = [128, 256, 512, 1024];
/// Warm runs per host timing (the median is reported).
const RUNS: usize = 5;
/// The paper's headline: Div2Mean on a GTX 280 against sequential Kahan on its CPU.
const PAPER_SPEEDUP: &str = "up to 57x (a GTX 280 against sequential Kahan on its CPU of the time)";

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// `n` f32 samples of U(0,1) (`normal == false`) or N(6,1), on all cores, from `seed`.
fn samples(n: usize, seed: u64, normal: bool) -> Vec<f32> {
    let six_one = rand_distr::Normal::new(6.0f64, 1.0).unwrap();
    common::fill(n, seed, 0f32, |rng| {
        if normal {
            rand_distr::Distribution::sample(&six_one, rng) as f32
        } else {
            common::unit(rng) as f32
        }
    })
}

/// The exact means of the prefixes `x[..n]` for each of `sizes` (increasing), rounded once to
/// f64: `ExactMean` of the samples widened to f64 (which holds them exactly), in pieces of
/// 2^20 whose exact accumulators combine to the whole one's (ExactSum is order-free).
fn exact_means(x: &[f32], sizes: &[usize]) -> Vec<f64> {
    let cpu = Cpu::new();
    let mut acc = <ExactSum as Operator<f64>>::identity(&ExactSum);
    let (mut done, mut means) = (0usize, Vec::new());
    let mut wide = Vec::with_capacity(1 << 20);
    for &n in sizes {
        while done < n {
            let end = (done + (1 << 20)).min(n);
            wide.clear();
            wide.extend(x[done..end].iter().map(|&v| v as f64));
            acc = <ExactSum as Operator<f64>>::combine(
                &ExactSum,
                acc,
                cpu.reduce_acc(&wide, ExactSum),
            );
            done = end;
        }
        means.push(<ExactMean as Operator<f64>>::finish(
            &ExactMean, acc, n as u64,
        ));
    }
    means
}

fn naive_mean(x: &[f32]) -> f32 {
    let mut acc = 0f32;
    for &v in x {
        acc += v;
    }
    acc / x.len() as f32
}

fn kahan_mean(x: &[f32]) -> f32 {
    let (mut sum, mut c) = (0f32, 0f32);
    for &v in x {
        let y = v - c;
        let t = sum + y;
        c = (t - sum) - y;
        sum = t;
    }
    sum / x.len() as f32
}

/// Median milliseconds of 20 event-timed `Div2Mean` launches over `x` (after warm-up runs).
fn gpu_ms(gpu: &Gpu, block: u32, x: &CudaSlice<f32>, n: usize) -> Res<f64> {
    let r = gpu.reducer_with::<f32, _>(Div2Mean, ReduceConfig::default().block(block))?;
    let view = x.slice(..n);
    let mut out = gpu.stream().alloc_zeros::<f32>(1)?;
    common::median_ms(gpu.stream(), 20, || r.reduce_into(&view, &mut out))
}

fn main() -> Res<()> {
    let quick = std::env::args().any(|a| a == "--quick")
        || std::env::var("CUFOLD_QUICK").is_ok_and(|v| v == "1");
    let gpu = Gpu::open(0);
    match &gpu {
        Ok(g) => println!("backend: GPU {}", g.device_name()),
        Err(e) => println!(
            "backend: CPU (no GPU: {e}); the Sum, Div2Mean, Mean and ExactMean columns come from the CPU \
             backend, which computes the same trees, and Table 3 times the CPU backend instead of a GPU"
        ),
    }
    let gpu = gpu.ok();
    let sizes: &[usize] = if quick { &SIZES[..2] } else { &SIZES };
    let seed = std::env::var("CUFOLD_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20090101u64);
    println!(
        "seed {seed} (CUFOLD_SEED to change); each size uses the first N samples of one stream\n"
    );

    let nmax = *sizes.last().unwrap();
    let mut uniform = None;
    println!(
        "Table 2: sample means, f32 samples; error = value - exact mean of the same samples \
         (ExactMean over the samples widened to f64: the exact mean, rounded once to f64)"
    );
    println!(
        "(naive, Kahan, Sum (the pairwise tree, then /N) and Div2Mean compute in f32; Mean widens each \
         sample to f64 and sums the tree in f64; ExactMean f32 is the exact mean rounded once to f32)"
    );
    println!(
        "{:<7} {:>11} {:>17} | {:>11} {:>9} | {:>9} | {:>9} | {:>9} | {:>9} | {:>11} {:>9}",
        "dist",
        "N",
        "exact mean",
        "naive f32",
        "error",
        "Kahan",
        "Sum/N",
        "Div2Mean",
        "Mean f64",
        "ExactMean",
        "error"
    );
    for (name, normal) in [("U(0,1)", false), ("N(6,1)", true)] {
        let x = samples(nmax, seed ^ normal as u64, normal);
        let dev = match &gpu {
            Some(g) => Some(g.stream().clone_htod(&x)?),
            None => None,
        };
        let exact_of = exact_means(&x, sizes);
        for (&n, &exact) in sizes.iter().zip(&exact_of) {
            let s = &x[..n];
            let naive = naive_mean(s);
            let kahan = kahan_mean(s);
            let cpu = Cpu::new();
            let on_cpu = |s: &[f32]| -> cufold::Result<(f32, f32, f64, f32)> {
                Ok((
                    cpu.reduce(s, Sum)?,
                    cpu.reduce(s, Div2Mean)?,
                    cpu.reduce(s, Mean)?,
                    cpu.reduce(s, ExactMean)?,
                ))
            };
            let (sum, div2, mean, exact32) = match (&gpu, &dev) {
                (Some(g), Some(d)) => {
                    let d = d.slice(..n);
                    let got = (
                        g.reduce(&d, Sum)?,
                        g.reduce(&d, Div2Mean)?,
                        g.reduce(&d, Mean)?,
                        g.reduce(&d, ExactMean)?,
                    );
                    // The GPU computes the CPU backend's trees (and ExactMean's exact value):
                    // the same bits, or the example fails.
                    let want = on_cpu(s)?;
                    let bits = |v: (f32, f32, f64, f32)| {
                        (v.0.to_bits(), v.1.to_bits(), v.2.to_bits(), v.3.to_bits())
                    };
                    if bits(got) != bits(want) {
                        return Err(format!(
                            "{name}, N = {n}: the GPU's means differ from the CPU backend's \
                             (Sum, Div2Mean, Mean, ExactMean: GPU {got:?}, CPU {want:?})"
                        )
                        .into());
                    }
                    got
                }
                _ => on_cpu(s)?,
            };
            let pairwise = sum / n as f32;
            // ExactMean in f32 is the exact mean rounded once: within half an ulp of it.
            let half_ulp = 0.5 * (f32::from_bits(exact32.to_bits() + 1) - exact32) as f64;
            if (exact32 as f64 - exact).abs() > half_ulp {
                return Err(
                    format!("{name}, N = {n}: ExactMean {exact32} is not {exact} rounded").into(),
                );
            }
            let err = |v: f64| v - exact;
            println!(
                "{name:<7} {n:>11} {exact:>17.15} | {naive:>11.7} {:>9.1e} | {:>9.1e} | {:>9.1e} | {:>9.1e} | {:>9.1e} | {exact32:>11.7} {:>9.1e}",
                err(naive as f64),
                err(kahan as f64),
                err(pairwise as f64),
                err(div2 as f64),
                err(mean),
                err(exact32 as f64)
            );
        }
        if !normal {
            uniform = Some((dev, x));
        }
    }
    let (uniform_dev, x) = uniform.expect("the U(0,1) samples");

    println!("\nTable 3: Div2Mean speed-up over sequential Kahan (one CPU core), U(0,1) samples");
    let kahan_ms: Vec<f64> = sizes
        .iter()
        .map(|&n| {
            common::median_host_ms(RUNS, || {
                black_box(kahan_mean(black_box(&x[..n])));
            })
        })
        .collect();
    match (&gpu, &uniform_dev) {
        (Some(g), Some(dev)) => {
            println!(
                "(block 2048, in the paper, is not possible: CUDA allows at most 1024 threads per block)"
            );
            print!("{:>11} {:>10}", "N", "Kahan ms");
            for b in BLOCKS {
                print!(" | {:>11} {:>8}", format!("{b} thr. ms"), "speed-up");
            }
            println!();
            for (i, &n) in sizes.iter().enumerate() {
                print!("{n:>11} {:>10.2}", kahan_ms[i]);
                for b in BLOCKS {
                    let ms = gpu_ms(g, b, dev, n)?;
                    print!(" | {ms:>11.4} {:>7.0}x", kahan_ms[i] / ms);
                }
                println!();
            }
            println!(
                "(Kahan: median of {RUNS} warm runs; GPU ms per block size: the kernel alone, median of 20 \
                 CUDA-event-timed launches)"
            );
        }
        _ => {
            println!(
                "{:>11} {:>10} | {:>15} {:>8}",
                "N", "Kahan ms", "CPU-backend ms", "speed-up"
            );
            for (i, &n) in sizes.iter().enumerate() {
                let ms = common::median_host_ms(RUNS, || {
                    black_box(Cpu::new().reduce(black_box(&x[..n]), Div2Mean).unwrap());
                });
                println!(
                    "{n:>11} {:>10.2} | {ms:>15.2} {:>7.1}x",
                    kahan_ms[i],
                    kahan_ms[i] / ms
                );
            }
            println!(
                "(no GPU: the CPU backend on all {} threads of the rayon pool; both times the median of {RUNS} warm runs)",
                rayon::current_num_threads()
            );
        }
    }
    println!("paper's Table 3: {PAPER_SPEEDUP}; its per-size speed-ups are not recorded in this repository");
    Ok(())
}
