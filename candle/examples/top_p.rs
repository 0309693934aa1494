//! Top-p (nucleus) sampling over a batch of vocabularies of 128k logits, two ways:
//!
//! - **candle's path**, as candle-transformers' `LogitsProcessor` does it: the softmax on the
//!   device, the probabilities copied to the host, each row sorted there (candle's CUDA
//!   `arg_sort` keeps a row in shared memory: 128k columns do not fit), a cumsum down the
//!   sorted row to the cut (in f64 here: it is the reference), and a draw;
//! - **cufold's path**, all on the device, no sort: the softmax from a one-pass
//!   `log_sum_exp`, the nucleus threshold found by bisection with masked row sums (the
//!   nucleus is every token whose probability is at least the cut's), then a cumsum of the
//!   nucleus, a threshold at the draw and an `argmax` for the first token past it.
//!
//! Both draw in vocabulary order with the same uniform per row, so they pick the same
//! tokens unless rounding puts a row's mass on the other side of `p` or of the draw; the
//! example prints how many rows agree and each path's time, and exits non-zero if fewer
//! than all but one agree.
//!
//! ```text
//! cargo run --release -p cufold-candle --features cuda --example top_p [-- BATCH VOCAB P]
//! ```
//! Without `cuda` (or without a GPU) it runs both paths on the CPU.

use candle_core::{DType, Device, Tensor, D};
use cufold_candle::TensorExt;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

fn main() -> candle_core::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let batch: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(32);
    let vocab: usize = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(128 * 1024);
    let top_p: f32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(0.9);
    let dev = Device::cuda_if_available(0)?;
    println!(
        "top-p {top_p} over {batch} x {vocab} logits on {:?}",
        dev.location()
    );

    let logits = (Tensor::randn(0f32, 1f32, (batch, vocab), &dev)? * 3.0)?;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let u: Vec<f32> = (0..batch).map(|_| rng.random::<f32>()).collect();

    let (ours, t_ours) = best_of(5, &dev, || cufold_top_p(&logits, &u, top_p))?;
    let (theirs, t_theirs) = best_of(5, &dev, || candle_top_p(&logits, &u, top_p))?;
    let agree = ours.iter().zip(&theirs).filter(|(a, b)| a == b).count();
    println!(
        "candle's path (device softmax, host sort + cumsum): {:8.3} ms",
        t_theirs * 1e3
    );
    println!(
        "cufold's path (all on the device, no sort):         {:8.3} ms",
        t_ours * 1e3
    );
    println!(
        "speed-up {:.1}x; rows that pick the same token: {agree} of {batch}",
        t_theirs / t_ours
    );
    println!("first tokens: {:?}", &ours[..ours.len().min(8)]);
    if agree + 1 < batch {
        eprintln!("top_p: the two paths disagree on {} rows", batch - agree);
        std::process::exit(1);
    }
    Ok(())
}

/// The fastest of `n` runs of `f` (after one warm-up), with the device synchronised.
fn best_of<T>(
    n: usize,
    dev: &Device,
    f: impl Fn() -> candle_core::Result<T>,
) -> candle_core::Result<(T, f64)> {
    f()?;
    let mut best = (None, f64::INFINITY);
    for _ in 0..n {
        dev.synchronize()?;
        let t0 = Instant::now();
        let r = f()?;
        dev.synchronize()?;
        let t = t0.elapsed().as_secs_f64();
        if t < best.1 {
            best = (Some(r), t);
        }
    }
    Ok((best.0.expect("n > 0"), best.1))
}

/// cufold's path: everything on the device; only the chosen token ids come back.
fn cufold_top_p(logits: &Tensor, u: &[f32], top_p: f32) -> candle_core::Result<Vec<u32>> {
    let dev = logits.device();
    let (batch, _) = logits.dims2()?;
    let p = logits
        .broadcast_sub(&logits.cufold().log_sum_exp_keepdim(D::Minus1)?)?
        .exp()?;
    let zeros = p.zeros_like()?;
    let target_mass = Tensor::new(top_p, dev)?;
    // The cut: the largest lo with mass(p >= lo) >= top_p, bracketed by [lo, hi) and halved
    // until hi is lo's next float (48 halvings from [0, max p] suffice for cuts down to
    // 2^-20 of the max).
    let mut lo = Tensor::zeros((batch, 1), DType::F32, dev)?;
    let mut hi = (p.cufold().max_keepdim(D::Minus1)? * 1.000001)?;
    for _ in 0..48 {
        let mid = ((&lo + &hi)? * 0.5)?;
        let mass = p
            .broadcast_ge(&mid)?
            .where_cond(&p, &zeros)?
            .cufold()
            .sum_keepdim(D::Minus1)?;
        let ok = mass.broadcast_ge(&target_mass)?;
        lo = ok.where_cond(&mid, &lo)?;
        hi = ok.where_cond(&hi, &mid)?;
    }
    let nucleus = p.broadcast_ge(&lo)?.where_cond(&p, &zeros)?;
    let c = nucleus.cufold().cumsum(D::Minus1)?;
    let mass = c.narrow(1, c.dim(1)? - 1, 1)?;
    let draw = Tensor::from_slice(u, (batch, 1), dev)?;
    let past = c.broadcast_ge(&(mass * draw)?)?;
    past.cufold().argmax(D::Minus1)?.to_vec1::<u32>() // the first token at or past the draw
}

/// candle's path, as candle-transformers samples top-p: softmax on the device, then the host.
fn candle_top_p(logits: &Tensor, u: &[f32], top_p: f32) -> candle_core::Result<Vec<u32>> {
    let max = logits.max_keepdim(D::Minus1)?;
    let e = logits.broadcast_sub(&max)?.exp()?;
    let p = e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?;
    let rows = p.to_vec2::<f32>()?;
    Ok(rows
        .iter()
        .zip(u)
        .map(|(row, &u)| {
            let mut order: Vec<usize> = (0..row.len()).collect();
            order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
            // Sums in f64: this path is the reference the device path is checked against.
            let mut acc = 0f64;
            let mut cut = row[order[0]];
            for &i in &order {
                acc += row[i] as f64;
                cut = row[i];
                if acc >= top_p as f64 {
                    break;
                }
            }
            // Draw in vocabulary order over the nucleus, as the device path does.
            let mass: f64 = row.iter().filter(|&&q| q >= cut).map(|&q| q as f64).sum();
            let target = u as f64 * mass;
            let mut acc = 0f64;
            let mut pick = 0;
            for (i, &q) in row.iter().enumerate() {
                if q >= cut {
                    acc += q as f64;
                    pick = i;
                    if acc >= target {
                        break;
                    }
                }
            }
            pick as u32
        })
        .collect())
}
