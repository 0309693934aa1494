//! Reproduces Pechprasarn & Khiripet, "Accelerating Bayesian Computation with Parallel
//! Reduction using CUDA": Monte Carlo sample means by a tree reduction that halves every
//! pairwise add, `(a + b) / 2`, corrected by `C = next_pow2(N) / N`.
//!
//! Table 2 — accuracy. For U(0,1) and N(6,1) samples at the paper's sizes, the mean by a
//! naive sequential f32 sum, by sequential Kahan summation, by `Div2Mean` (the paper's
//! halving tree, all in f32) and by `Mean` (the f32 samples widened to f64 and tree-summed
//! in f64, then divided by N), each with its error against the exact
//! mean *of the same samples* (an f64 Neumaier sum). The naive f32 sum stalls once the
//! running sum passes 2^24: adding values below 1 to it rounds them away, so at N =
//! 67,107,840 the U(0,1) mean collapses towards 0.25. Kahan and the trees stay right.
//! Halving is pairwise summation scaled by exact powers of two, so `Div2Mean` is exactly as
//! accurate as a pairwise f32 sum; what halving adds is headroom against overflow.
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
use cufold::ops::{Div2Mean, Mean};
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

/// The exact-as-f64-allows mean: Neumaier's compensated sum in f64.
fn exact_mean(x: &[f32]) -> f64 {
    let (mut s, mut c) = (0f64, 0f64);
    for &v in x {
        let v = v as f64;
        let t = s + v;
        c += if s.abs() >= v.abs() {
            (s - t) + v
        } else {
            (v - t) + s
        };
        s = t;
    }
    (s + c) / x.len() as f64
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
            "backend: CPU (no GPU: {e}); the Div2Mean and Mean columns come from the CPU backend, which computes \
             the same tree, and Table 3 times the CPU backend instead of a GPU"
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
    println!("Table 2: sample means, f32 samples; error = value - exact mean of the same samples");
    println!(
        "(naive, Kahan and Div2Mean compute in f32; Mean widens each sample to f64 and sums the tree in f64)"
    );
    println!(
        "{:<7} {:>11} {:>13} | {:>11} {:>9} | {:>11} {:>9} | {:>11} {:>9} | {:>11} {:>9}",
        "dist",
        "N",
        "exact mean",
        "naive f32",
        "error",
        "Kahan f32",
        "error",
        "Div2Mean",
        "error",
        "Mean (f64)",
        "error"
    );
    for (name, normal) in [("U(0,1)", false), ("N(6,1)", true)] {
        let x = samples(nmax, seed ^ normal as u64, normal);
        let dev = match &gpu {
            Some(g) => Some(g.stream().clone_htod(&x)?),
            None => None,
        };
        for &n in sizes {
            let s = &x[..n];
            let exact = exact_mean(s);
            let naive = naive_mean(s);
            let kahan = kahan_mean(s);
            let (div2, mean) = match (&gpu, &dev) {
                (Some(g), Some(d)) => (
                    g.reduce(&d.slice(..n), Div2Mean)?,
                    g.reduce(&d.slice(..n), Mean)?,
                ),
                _ => (Cpu::new().reduce(s, Div2Mean)?, Cpu::new().reduce(s, Mean)?),
            };
            if gpu.is_some() {
                // The GPU computes the CPU backend's tree: the same bits, or the example fails.
                let cpu = Cpu::new();
                if cpu.reduce(s, Div2Mean)?.to_bits() != div2.to_bits()
                    || cpu.reduce(s, Mean)?.to_bits() != mean.to_bits()
                {
                    return Err(format!(
                        "{name}, N = {n}: the GPU's means differ from the CPU backend's"
                    )
                    .into());
                }
            }
            let err = |v: f64| v - exact;
            println!(
                "{name:<7} {n:>11} {exact:>13.9} | {naive:>11.7} {:>9.1e} | {kahan:>11.7} {:>9.1e} | {div2:>11.7} {:>9.1e} | {mean:>11.7} {:>9.1e}",
                err(naive as f64),
                err(kahan as f64),
                err(div2 as f64),
                err(mean)
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
