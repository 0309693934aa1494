//! Reproduces Pechprasarn & Khiripet, "Accelerating Bayesian Computation with Parallel
//! Reduction using CUDA": Monte Carlo sample means by a tree reduction that halves every
//! pairwise add, `(a + b) / 2`, corrected by `C = next_pow2(N) / N`.
//!
//! Table 2 — accuracy. For U(0,1) and N(6,1) samples at the paper's sizes, the mean by a
//! naive sequential f32 sum, by sequential Kahan summation, by `Div2Mean` (the paper's
//! halving tree) and by `Mean` (tree sum in f64), each with its error against the exact
//! mean *of the same samples* (an f64 Neumaier sum). The naive f32 sum stalls once the
//! running sum passes 2^24: adding values below 1 to it rounds them away, so at N =
//! 67,107,840 the U(0,1) mean collapses towards 0.25. Kahan and the trees stay right.
//! Halving is pairwise summation scaled by exact powers of two, so `Div2Mean` is exactly as
//! accurate as a pairwise f32 sum; what halving adds is headroom against overflow.
//!
//! Table 3 — speed. The GPU `Div2Mean` against sequential Kahan on one CPU core, for block
//! sizes 128 to 1024 (the paper's 2048 is not possible: CUDA allows at most 1024 threads per
//! block). The GPU time is the kernel alone (CUDA events, median of 20 launches), the input
//! already on the device, as in the paper.
//!
//! `cargo run --release --example paper [-- --quick]`; `CUFOLD_SEED=n` fixes the samples.
//! Without a GPU it runs on the CPU backend (same tree, same bits) and says so first.

#[path = "../benches/common/mod.rs"]
mod common;

use cudarc::driver::CudaSlice;
use cufold::ops::{Div2Mean, Mean};
use cufold::reduce::ReduceConfig;
use cufold::{Cpu, Gpu};
use std::time::Instant;

const SIZES: [usize; 5] = [8_388_480, 16_776_960, 33_553_920, 67_107_840, 134_215_680];
const BLOCKS: [u32; 4] = [128, 256, 512, 1024];

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
    let mut kahan_ms = vec![0f64; sizes.len()];
    let mut uniform_dev = None;
    println!("Table 2: sample means, f32 samples; error = value - exact mean of the same samples");
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
        "Mean",
        "error"
    );
    for (name, normal) in [("U(0,1)", false), ("N(6,1)", true)] {
        let x = samples(nmax, seed ^ normal as u64, normal);
        let dev = match &gpu {
            Some(g) => Some(g.stream().clone_htod(&x)?),
            None => None,
        };
        for (i, &n) in sizes.iter().enumerate() {
            let s = &x[..n];
            let exact = exact_mean(s);
            let naive = naive_mean(s);
            let t = Instant::now();
            let kahan = kahan_mean(s);
            if !normal {
                kahan_ms[i] = t.elapsed().as_secs_f64() * 1e3;
            }
            let (div2, mean) = match (&gpu, &dev) {
                (Some(g), Some(d)) => (
                    g.reduce(&d.slice(..n), Div2Mean)?,
                    g.reduce(&d.slice(..n), Mean)?,
                ),
                _ => (Cpu::new().reduce(s, Div2Mean)?, Cpu::new().reduce(s, Mean)?),
            };
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
            uniform_dev = dev.map(|d| (d, x));
        }
    }

    println!("\nTable 3: Div2Mean speed-up over sequential Kahan (one CPU core), U(0,1) samples");
    println!(
        "(block 2048, in the paper, is not possible: CUDA allows at most 1024 threads per block)"
    );
    match (&gpu, &uniform_dev) {
        (Some(g), Some((dev, _))) => {
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
                "(GPU ms per block size: the kernel alone, median of 20 CUDA-event-timed launches)"
            );
        }
        _ => {
            let x = samples(nmax, seed, false);
            println!(
                "{:>11} {:>10} | {:>15} {:>8}",
                "N", "Kahan ms", "CPU-backend ms", "speed-up"
            );
            for (i, &n) in sizes.iter().enumerate() {
                let t = Instant::now();
                let _ = Cpu::new().reduce(&x[..n], Div2Mean)?;
                let ms = t.elapsed().as_secs_f64() * 1e3;
                println!(
                    "{n:>11} {:>10.2} | {ms:>15.2} {:>7.1}x",
                    kahan_ms[i],
                    kahan_ms[i] / ms
                );
            }
            println!("(no GPU: the CPU backend, all cores, has no block size)");
        }
    }
    Ok(())
}
