//! GPU reduction throughput: GB/s of compulsory traffic (N x element size), timed with CUDA
//! events around each launch (after warm-up; median of the repetitions), the way
//! `.gpu/peers.py` times PyTorch and CuPy, so the two tables compare like for like.
//!
//! ```text
//! cargo bench --bench gpu_reduce -- [--ops sum,max,argmax,mean,div2mean] [--dtypes f32,f16,f64,i32]
//!                                   [--log2 20,24,28] [--block 1024] [--reps 50] [--json OUT.json]
//! ```
//!
//! Each result is checked once against the CPU backend (the bits must agree) before timing.
//! Inputs of 2^20 elements fit in the 50 MB L2 of an H100, as they do for the peers.

use cudarc::driver::CudaSlice;
use cufold::ops::{ArgMax, Div2Mean, Max, Mean, Operator, Sum};
use cufold::reduce::ReduceConfig;
use cufold::{f16, Cpu, Gpu};
use std::fmt::Write as _;

#[path = "common/mod.rs"]
mod common;
use common::{generate, median_ms, Data};

struct Args {
    ops: Vec<String>,
    dtypes: Vec<String>,
    log2: Vec<u32>,
    block: u32,
    reps: usize,
    json: Option<String>,
}

fn parse() -> Args {
    let mut a = Args {
        ops: "sum,max,argmax,mean,div2mean"
            .split(',')
            .map(String::from)
            .collect(),
        dtypes: "f32,f16,f64,i32".split(',').map(String::from).collect(),
        log2: vec![20, 24, 28],
        block: 1024,
        reps: 50,
        json: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--ops" => a.ops = v().split(',').map(String::from).collect(),
            "--dtypes" => a.dtypes = v().split(',').map(String::from).collect(),
            "--log2" => {
                a.log2 = v()
                    .split(',')
                    .map(|s| s.parse().expect("--log2 takes integers"))
                    .collect()
            }
            "--block" => a.block = v().parse().expect("--block takes an integer"),
            "--reps" => a.reps = v().parse().expect("--reps takes an integer"),
            "--json" => a.json = Some(v()),
            "--bench" => {} // passed by `cargo bench`
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

type Timing = Result<(f64, bool), Box<dyn std::error::Error>>;

/// Times Div2Mean, which exists for f32 and f64 only.
trait Div2: Data {
    fn div2(_: &Gpu, _: ReduceConfig, _: &CudaSlice<Self>, _: &[Self], _: usize) -> Option<Timing> {
        None
    }
}
impl Div2 for f32 {
    fn div2(
        g: &Gpu,
        c: ReduceConfig,
        x: &CudaSlice<Self>,
        h: &[Self],
        reps: usize,
    ) -> Option<Timing> {
        Some(time(g, c, x, h, Div2Mean, reps))
    }
}
impl Div2 for f64 {
    fn div2(
        g: &Gpu,
        c: ReduceConfig,
        x: &CudaSlice<Self>,
        h: &[Self],
        reps: usize,
    ) -> Option<Timing> {
        Some(time(g, c, x, h, Div2Mean, reps))
    }
}
impl Div2 for f16 {}
impl Div2 for i32 {}

struct Row {
    op: String,
    dtype: String,
    n: usize,
    ms: f64,
    gbs: f64,
}

fn time<T: Data, O: Operator<T>>(
    gpu: &Gpu,
    config: ReduceConfig,
    x: &CudaSlice<T>,
    host: &[T],
    op: O,
    reps: usize,
) -> Timing {
    let r = gpu.reducer_with::<T, O>(op, config)?;
    let got = r.reduce(x)?;
    let want = Cpu::new().reduce(host, op)?;
    let ok = format!("{got:?}") == format!("{want:?}");
    if !ok {
        eprintln!(
            "MISMATCH {} over {}: GPU {got:?}, CPU {want:?}",
            O::NAME,
            T::cuda_name()
        );
    }
    let stream = gpu.stream();
    let mut out = stream.alloc_zeros::<O::Out>(1)?;
    let ms = median_ms(stream, reps, || r.reduce_into(x, &mut out))?;
    Ok((ms, ok))
}

fn run_dtype<T: Div2>(
    gpu: &Gpu,
    a: &Args,
    dtype: &str,
    rows: &mut Vec<Row>,
) -> Result<bool, Box<dyn std::error::Error>>
where
    Sum: Operator<T>,
    Max: Operator<T>,
    ArgMax: Operator<T>,
    Mean: Operator<T>,
{
    let mut all_ok = true;
    for &lg in &a.log2 {
        let n = 1usize << lg;
        let host = generate::<T>(n, 0x5eed ^ lg as u64);
        let x = gpu.stream().clone_htod(&host)?;
        let config = ReduceConfig::default().block(a.block);
        for op in &a.ops {
            let res = match op.as_str() {
                "sum" => time(gpu, config, &x, &host, Sum, a.reps),
                "max" => time(gpu, config, &x, &host, Max, a.reps),
                "argmax" => time(gpu, config, &x, &host, ArgMax, a.reps),
                "mean" => time(gpu, config, &x, &host, Mean, a.reps),
                "div2mean" => match T::div2(gpu, config, &x, &host, a.reps) {
                    Some(t) => t,
                    None => continue,
                },
                other => return Err(format!("unknown op {other}").into()),
            };
            let (ms, ok) = res?;
            all_ok &= ok;
            let gbs = (n * std::mem::size_of::<T>()) as f64 / (ms * 1e-3) / 1e9;
            println!(
                "cufold  {op:8} {dtype:4} 2^{lg:<3} {ms:9.4} ms {gbs:8.1} GB/s{}",
                if ok { "" } else { "  MISMATCH" }
            );
            rows.push(Row {
                op: op.clone(),
                dtype: dtype.into(),
                n,
                ms,
                gbs,
            });
        }
    }
    Ok(all_ok)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = parse();
    let gpu = match Gpu::open(0) {
        Ok(g) => g,
        Err(e) => {
            println!("no CUDA device: {e}");
            return Ok(());
        }
    };
    println!(
        "# cufold {} on {}, block {}, median of {} event-timed launches",
        env!("CARGO_PKG_VERSION"),
        gpu.device_name(),
        a.block,
        a.reps
    );
    let mut rows = Vec::new();
    let mut ok = true;
    for d in &a.dtypes {
        ok &= match d.as_str() {
            "f32" => run_dtype::<f32>(&gpu, &a, d, &mut rows)?,
            "f64" => run_dtype::<f64>(&gpu, &a, d, &mut rows)?,
            "f16" => run_dtype::<f16>(&gpu, &a, d, &mut rows)?,
            "i32" => run_dtype::<i32>(&gpu, &a, d, &mut rows)?,
            other => return Err(format!("unknown dtype {other}").into()),
        };
    }
    println!("\n| op | dtype | N | ms | GB/s |\n|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | 2^{} | {:.4} | {:.0} |",
            r.op,
            r.dtype,
            r.n.trailing_zeros(),
            r.ms,
            r.gbs
        );
    }
    if let Some(path) = &a.json {
        let mut s = String::from("[\n");
        for (i, r) in rows.iter().enumerate() {
            let _ = writeln!(
                s,
                "{{\"lib\": \"cufold\", \"op\": \"{}\", \"dtype\": \"{}\", \"n\": {}, \"ms\": {}, \"gbs\": {}, \"device\": \"{}\"}}{}",
                r.op,
                r.dtype,
                r.n,
                r.ms,
                r.gbs,
                gpu.device_name(),
                if i + 1 < rows.len() { "," } else { "" }
            );
        }
        s.push(']');
        std::fs::write(path, s)?;
    }
    if !ok {
        return Err("some GPU results differed from the CPU backend".into());
    }
    Ok(())
}
