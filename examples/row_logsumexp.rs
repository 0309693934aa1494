//! Row-wise log-sum-exp, `ln(Σ_j exp(x[r][j]))` for every row of a matrix (softmax
//! denominators), with an operator written once in Rust by `#[cufold::op]` and reduced along
//! the rows of a strided view by the segmented reducer; every row is checked against a plain
//! f64 loop on the CPU.
//!
//! `cargo run --release --example row_logsumexp [-- --quick] [--seed N]`
//! (`--quick`: 256 rows instead of 16384). Without a GPU it runs on the CPU backend (the
//! same trees) and says so.

use cufold::segment::Rows;
use cufold::{Backend, Cpu};
use std::time::Instant;

// The operator (a maximum and a sum of `exp(x - max)` a side, one `exp` a combine), in a file
// of its own so that benches/gpu_segment.rs times this very operator.
#[path = "common/log_sum_exp.rs"]
mod log_sum_exp;
use log_sum_exp::LogSumExp;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let seed: u64 = match args.iter().position(|a| a == "--seed") {
        Some(i) => args.get(i + 1).ok_or("--seed needs a value")?.parse()?,
        None => 20_261_123,
    };
    // A rows x 1000 view of a rows x 1024 matrix of logits: rows start 1024 apart.
    let (rows, cols, stride) = (if quick { 256 } else { 16_384 }, 1000, 1024);
    println!(
        "seed {seed} (replay with --seed {seed}); {rows} rows of {cols} logits, stride {stride}"
    );
    let mut state = seed;
    let x: Vec<f32> = (0..rows * stride)
        .map(|_| {
            state = state.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            z ^= z >> 31;
            // Logits in [-20, 20).
            ((z >> 40) as f32 / (1u64 << 24) as f32) * 40.0 - 20.0
        })
        .collect();
    let view = Rows::new(rows, cols).stride(stride);

    let t = Instant::now();
    let backend = Backend::auto();
    let got: Vec<f32> = match &backend {
        Backend::Gpu(gpu) => {
            println!("backend: GPU {}", gpu.device_name());
            let xd = gpu.stream().clone_htod(&x)?;
            let mut out = gpu.stream().alloc_zeros::<f32>(rows)?;
            let lse = gpu.segment_reducer::<f32, _>(LogSumExp)?;
            lse.reduce_rows_into(&xd, view, &mut out)?;
            gpu.stream().clone_dtoh(&out)?
        }
        Backend::Cpu(cpu) => {
            println!("backend: CPU ({} threads; no CUDA device)", cpu.threads());
            cpu.reduce_rows(&x, view, LogSumExp)?
        }
    };
    println!(
        "{rows} row log-sum-exps in {:.2} ms{}",
        t.elapsed().as_secs_f64() * 1e3,
        match backend {
            Backend::Gpu(_) => " (compile or cache load, upload and download included)",
            Backend::Cpu(_) => "",
        }
    );

    // The reference: a plain loop per row in f64, shifted by the row's maximum.
    let mut worst = 0.0f64;
    for (r, &g) in got.iter().enumerate() {
        let row = &x[r * stride..r * stride + cols];
        let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let want = m + row.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
        worst = worst.max(((g as f64 - want) / want.abs().max(1.0)).abs());
    }
    println!("largest relative difference from the f64 loop over {rows} rows: {worst:.2e}");
    if worst > 1e-5 {
        return Err(format!("row log-sum-exp off by {worst:.2e} (more than 1e-5)").into());
    }
    // The CPU backend computes the same per-row trees; the rows agree to f32 rounding of
    // exp and ln, which differ between the CPU's libm and CUDA's.
    let cpu = Cpu::new().reduce_rows(&x, view, LogSumExp)?;
    let differ = cpu
        .iter()
        .zip(&got)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    println!("rows whose bits differ from the CPU backend's: {differ} of {rows} (exp/ln rounding)");
    Ok(())
}
