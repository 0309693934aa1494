//! Group-by mean over sorted keys: readings of many sensors, sorted by sensor id, reduced
//! per run of equal ids with `MeanVar` (count, mean, spread) by `reduce_by_key`. Each
//! group's mean and variance are checked against a plain f64 two-pass loop, and the GPU's
//! bits against the CPU backend's.
//!
//! `cargo run --release --example group_by_mean [-- --quick] [--seed N]`
//! (`--quick`: 2^16 readings instead of 2^24). Without a GPU it runs on the CPU backend (the
//! same trees) and says so.

use cufold::ops::{MeanVar, MeanVarValue};
use cufold::segment::ByKey;
use cufold::{Backend, Cpu};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let seed: u64 = match args.iter().position(|a| a == "--seed") {
        Some(i) => args.get(i + 1).ok_or("--seed needs a value")?.parse()?,
        None => 20_261_123,
    };
    let n = if quick { 1 << 16 } else { 1 << 24 };
    println!("seed {seed} (replay with --seed {seed}); {n} readings");

    // Sensor ids in increasing order, each with a burst of readings whose length is drawn
    // from a heavy tail (1 to ~50 000), around the sensor's own level.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (mut keys, mut x) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut sensor = 0u32;
    while keys.len() < n {
        sensor += rng.random_range(1..4);
        let u: f64 = rng.random_range(0.0..1.0);
        let burst = ((1.0 - u).powf(-1.5) as usize).clamp(1, n - keys.len());
        let level = Normal::new(20.0 + (sensor % 17) as f64, 1.0 + (sensor % 5) as f64)?;
        for _ in 0..burst {
            keys.push(sensor);
            x.push(level.sample(&mut rng) as f32);
        }
    }

    let t = Instant::now();
    let backend = Backend::auto();
    let got: ByKey<u32, MeanVarValue> = match &backend {
        Backend::Gpu(gpu) => {
            println!("backend: GPU {}", gpu.device_name());
            let s = gpu.stream();
            let (kd, xd) = (s.clone_htod(&keys)?, s.clone_htod(&x)?);
            let by = gpu
                .segment_reducer::<f32, _>(MeanVar)?
                .reduce_by_key(&kd, &xd)?;
            ByKey {
                keys: s.clone_dtoh(&by.keys)?,
                values: s.clone_dtoh(&by.values)?,
                lengths: s.clone_dtoh(&by.lengths)?,
            }
        }
        Backend::Cpu(cpu) => {
            println!("backend: CPU ({} threads; no CUDA device)", cpu.threads());
            cpu.reduce_by_key(&keys, &x, MeanVar)?
        }
    };
    println!(
        "{} groups in {:.2} ms{}",
        got.keys.len(),
        t.elapsed().as_secs_f64() * 1e3,
        match backend {
            Backend::Gpu(_) => " (compile or cache load, upload and download included)",
            Backend::Cpu(_) => "",
        }
    );
    for g in 0..3.min(got.keys.len()) {
        let v = &got.values[g];
        println!(
            "  sensor {:>6}: {:>6} readings, mean {:8.4}, std {:7.4}",
            got.keys[g],
            got.lengths[g],
            v.mean,
            v.variance().sqrt()
        );
    }

    // The reference: a plain two-pass f64 loop per group, the groups found by a loop.
    let (mut worst_mean, mut worst_var, mut at, mut g) = (0.0f64, 0.0f64, 0usize, 0usize);
    while at < n {
        let end = at + keys[at..].iter().take_while(|&&k| k == keys[at]).count();
        let run = &x[at..end];
        let mean = run.iter().map(|&v| v as f64).sum::<f64>() / run.len() as f64;
        let var = run.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / run.len() as f64;
        if got.keys.get(g) != Some(&keys[at]) || got.lengths[g] != run.len() as u64 {
            return Err(format!("group {g}: wrong key or length").into());
        }
        worst_mean = worst_mean.max((got.values[g].mean - mean).abs() / mean.abs());
        worst_var = worst_var.max((got.values[g].variance() - var).abs() / var.max(1e-300));
        (at, g) = (end, g + 1);
    }
    if g != got.keys.len() {
        return Err(format!("{} groups, the loop found {g}", got.keys.len()).into());
    }
    println!(
        "largest relative difference from the f64 loop: mean {worst_mean:.2e}, variance {worst_var:.2e}"
    );
    if worst_mean > 1e-12 || worst_var > 1e-9 {
        return Err("group statistics off by more than 1e-12 (mean) or 1e-9 (variance)".into());
    }
    // The CPU backend computes the same trees: every group's bits agree.
    let cpu = Cpu::new().reduce_by_key(&keys, &x, MeanVar)?;
    let differ = (0..g)
        .filter(|&i| {
            let (a, b) = (&cpu.values[i], &got.values[i]);
            (a.count, a.mean.to_bits(), a.m2.to_bits())
                != (b.count, b.mean.to_bits(), b.m2.to_bits())
        })
        .count();
    println!("groups whose bits differ from the CPU backend's: {differ}");
    if differ > 0 {
        return Err("the backends disagree".into());
    }
    Ok(())
}
