//! How accurate `MeanVar` is, beside `torch.var_mean`: for f32 and f64 data drawn from U(0, 1),
//! N(10^4, 1) and 10^6 + U(0, 1) (a large mean), cufold's mean and population variance on the
//! GPU, their relative errors against a reference, and the data written out for
//! `scripts/meanvar_accuracy.py`, which runs `torch.var_mean(x, correction=0)` on the same
//! values and prints both side by side.
//!
//! ```text
//! cargo bench --bench gpu_meanvar_accuracy -- --dir DIR [--log2 24,26] [--seed 7]
//! python3 scripts/meanvar_accuracy.py DIR
//! ```
//!
//! The reference: the mean is `ExactMean` over the values as f64 (the exact mean, rounded
//! once), the variance `ExactSum` of the squared f64 deviations from it, over n. Each deviation
//! and square rounds once (relative 2^-53), so the reference variance is good to about 3e-16
//! relative, below every error measured here. cufold's GPU result is checked bit for bit
//! against the CPU backend first.

use std::io::Write;

use clap::Parser;
use cufold::ops::{ExactMean, ExactSum, MeanVar, MeanVarValue};
use cufold::Cpu;

#[path = "common/mod.rs"]
mod common;
use common::{fill, open_gpu, unit};

#[derive(Parser, Debug)]
struct Args {
    /// Where to write the data (`DTYPE_DIST_LOG2.bin`, raw little-endian) and `cases.json`.
    #[arg(long)]
    dir: String,
    /// Sizes, as powers of two.
    #[arg(long, default_value = "24,26", value_delimiter = ',')]
    log2: Vec<u32>,
    /// The data's seed.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// A draw from two uniform numbers in [0, 1).
type Draw = fn(f64, f64) -> f64;

/// The distributions: a name and a draw.
const DISTS: [(&str, Draw); 3] = [
    ("uniform", |u, _| u),
    // Box-Muller: one normal draw from two uniforms (1 - u keeps the logarithm finite).
    ("normal_1e4", |u, v| {
        1e4 + (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }),
    ("offset_1e6", |u, _| 1e6 + u),
];

/// The element types measured: their values as raw little-endian bytes, for the script.
trait Float: cufold::Element {
    fn bytes(v: &[Self]) -> Vec<u8>;
}
macro_rules! float {
    ($($t:ty),*) => {$(
        impl Float for $t {
            fn bytes(v: &[Self]) -> Vec<u8> {
                v.iter().flat_map(|x| x.to_le_bytes()).collect()
            }
        }
    )*};
}
float!(f32, f64);

/// The reference (mean, population variance) of `xs`.
fn reference<T: Float>(xs: &[T]) -> (f64, f64) {
    let cpu = Cpu::new();
    let wide: Vec<f64> = xs.iter().map(|x| x.to_f64()).collect();
    let mean = cpu
        .reduce(&wide, ExactMean)
        .expect("a mean of a non-empty input");
    let squares: Vec<f64> = wide.iter().map(|x| (x - mean) * (x - mean)).collect();
    let m2 = cpu.reduce(&squares, ExactSum).expect("a sum");
    (mean, m2 / xs.len() as f64)
}

fn rel(got: f64, want: f64) -> f64 {
    ((got - want) / want).abs()
}

fn case<T: Float>(g: &cufold::Gpu, args: &Args, log2: u32, dist: &str, draw: Draw) -> String {
    let n = 1usize << log2;
    let xs: Vec<T> = fill(n, args.seed, T::from_f64(0.0), |rng| {
        let (u, v) = (unit(rng), unit(rng));
        T::from_f64(draw(u, v))
    });
    let dev = g.stream().clone_htod(&xs).expect("upload");
    let got: MeanVarValue = g.reduce(&dev, MeanVar).expect("MeanVar on the GPU");
    let cpu: MeanVarValue = Cpu::new().reduce(&xs, MeanVar).expect("MeanVar on the CPU");
    assert_eq!(
        (got.mean.to_bits(), got.m2.to_bits()),
        (cpu.mean.to_bits(), cpu.m2.to_bits()),
        "{} {dist} 2^{log2}: the GPU's bits differ from the CPU backend's",
        T::NAME
    );
    let (mean, var) = reference(&xs);
    let file = format!("{}_{dist}_{log2}.bin", T::NAME);
    std::fs::write(std::path::Path::new(&args.dir).join(&file), T::bytes(&xs)).expect("write");
    let cvar = got.m2 / got.count;
    println!(
        "{:4} {:11} 2^{log2}  mean {mean:.17e} var {var:.17e}  cufold: mean err {:.2e}, var err {:.2e}",
        T::NAME,
        dist,
        rel(got.mean, mean),
        rel(cvar, var)
    );
    format!(
        "{{\"dtype\":\"{}\",\"dist\":\"{dist}\",\"n\":{n},\"file\":\"{file}\",\"mean\":{mean:e},\
         \"var\":{var:e},\"cufold_mean\":{:e},\"cufold_var\":{cvar:e}}}",
        T::NAME,
        got.mean
    )
}

fn main() {
    let args = Args::parse();
    let Some(g) = open_gpu() else { return };
    std::fs::create_dir_all(&args.dir).expect("the output folder");
    let mut cases = Vec::new();
    for &log2 in &args.log2 {
        for (dist, draw) in DISTS {
            cases.push(case::<f32>(&g, &args, log2, dist, draw));
            cases.push(case::<f64>(&g, &args, log2, dist, draw));
        }
    }
    let mut f = std::fs::File::create(std::path::Path::new(&args.dir).join("cases.json"))
        .expect("cases.json");
    writeln!(f, "[{}]", cases.join(",\n")).expect("write cases.json");
}
