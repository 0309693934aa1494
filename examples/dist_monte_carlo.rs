//! A Monte Carlo estimate spread over every GPU of the machine, with one GPU's bits.
//!
//! `E[x0 x1 x2 x3]` over U(0,1)^4 (exactly 1/16) from N samples: rank r (one per GPU, on
//! its own thread) draws samples `layout.range(r)` of the run in the fused kernel, at
//! their global sample numbers, reduces them to its chunk's node of the canonical tree, and
//! every rank joins the nodes: the estimate is bit for bit one GPU's estimate of the same
//! run, which the example checks. `--ranks K` puts K ranks on the machine's GPUs in turn
//! (several ranks of one GPU on streams of their own: the single-GPU stand-in).
//!
//! ```text
//! cargo run --release --example dist_monte_carlo -- [--log2 30] [--ranks K] [--seed 7]
//! ```

use clap::Parser;
use cufold::dist::{ChunkLayout, Collective, GpuRank, LocalGroup};
use cufold::monte_carlo::MonteCarlo;
use cufold::Gpu;
use std::time::Instant;

/// x -> x0 * x1 * x2 * x3.
#[derive(Clone, Copy, Debug, Default)]
struct Product4;

#[cufold::transform]
impl Product4 {
    fn apply(x: [f32; 4]) -> f64 {
        x[0] as f64 * x[1] as f64 * x[2] as f64 * x[3] as f64
    }
}

#[derive(Parser, Debug)]
#[command(about = "A Monte Carlo estimate over every GPU, with one GPU's bits")]
struct Args {
    /// log2 of the number of samples.
    #[arg(long, default_value_t = 30)]
    log2: u32,
    /// Ranks (default: one per GPU).
    #[arg(long)]
    ranks: Option<usize>,
    /// The run's seed.
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let devices = match Gpu::device_count() {
        Ok(n) if n > 0 => n,
        Ok(_) => return Err("no CUDA device: this example needs at least one GPU".into()),
        Err(e) => return Err(format!("no CUDA device ({e}): this example needs a GPU").into()),
    };
    let ranks = args.ranks.unwrap_or(devices);
    let n = 1u64 << args.log2;
    let layout = ChunkLayout::new(n, ranks)?;
    let mc = MonteCarlo::<[f32; 4], _>::new(Product4).seed(args.seed);
    println!(
        "{n} samples over {ranks} rank(s) on {devices} GPU(s), {} samples on rank 0",
        layout.range(0).end
    );

    let start = Instant::now();
    let estimates = std::thread::scope(|s| {
        let handles: Vec<_> = LocalGroup::new(ranks)
            .into_iter()
            .map(|comm| {
                let mc = &mc;
                s.spawn(move || -> cufold::Result<_> {
                    let device = Gpu::open(comm.rank() % devices)?;
                    // A stream of its own, so that ranks sharing a GPU run side by side.
                    let stream = device
                        .stream()
                        .context()
                        .new_stream()
                        .expect("a CUDA stream");
                    let rank = GpuRank::new(Gpu::new(&stream)?, comm);
                    rank.monte_carlo(&layout, mc)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank's thread"))
            .collect::<cufold::Result<Vec<_>>>()
    })?;
    let spread = start.elapsed();
    let est = estimates[0];
    assert!(
        estimates.iter().all(|e| e == &est),
        "every rank has the same estimate"
    );
    println!(
        "estimate {:.9} ± {:.2e} (exact 1/16 = 0.0625), {:.1} ms with compiles",
        est.mean,
        est.std_error(),
        spread.as_secs_f64() * 1e3
    );

    let start = Instant::now();
    let one = Gpu::open(0)?.monte_carlo(&mc, n)?;
    println!(
        "one GPU: {:.9}, {:.1} ms with compiles",
        one.mean,
        start.elapsed().as_secs_f64() * 1e3
    );
    let same = one.mean.to_bits() == est.mean.to_bits()
        && one.m2.to_bits() == est.m2.to_bits()
        && one.count.to_bits() == est.count.to_bits();
    println!(
        "the same bits as one GPU: {}",
        if same { "yes" } else { "NO" }
    );
    if !same {
        return Err("the estimate over ranks differs from one GPU's".into());
    }
    Ok(())
}
