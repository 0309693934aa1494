//! GPU scan throughput: GB/s of compulsory traffic (2 x N x element size: every element read
//! once and written once), timed with CUDA events around each launch (after warm-up; median
//! of the repetitions), the way `.gpu/peers.py` times torch.cumsum and cupy.cumsum.
//!
//! ```text
//! cargo bench --bench gpu_scan -- [--ops cumsum,affine] [--dtypes f32,f64,i32] [--log2 20,24,28]
//!                                 [--algos warp,blelloch,hillis] [--blocks 256] [--bytes 128]
//!                                 [--staging 1,0]
//!                                 [--reps 50] [--json OUT.json]
//! ```
//!
//! Several algorithms, block sizes or bytes per thread make a sweep: every combination is
//! timed. Every result is checked bit for bit against the CPU backend before timing.

use cudarc::driver::CudaSlice;
use cufold::ops::{Affine, Compose, Operator, Sum};
use cufold::scan::ScanConfig;
use cufold::{Cpu, DeviceValue, Gpu, ScanAlgorithm, ScanKind};

#[path = "common/mod.rs"]
mod common;
use common::{generate, median_ms, Data};

struct Args {
    ops: Vec<String>,
    dtypes: Vec<String>,
    log2: Vec<u32>,
    algos: Vec<ScanAlgorithm>,
    blocks: Vec<u32>,
    bytes: Vec<u32>,
    staging: Vec<bool>,
    reps: usize,
    json: Option<String>,
}

fn list<T: std::str::FromStr>(s: &str, what: &str) -> Vec<T> {
    s.split(',')
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{what} takes a list of integers"))
        })
        .collect()
}

fn parse() -> Args {
    let mut a = Args {
        ops: vec!["cumsum".into(), "affine".into()],
        dtypes: vec!["f32".into(), "f64".into(), "i32".into()],
        log2: vec![20, 24, 28],
        algos: vec![ScanAlgorithm::default()],
        blocks: vec![ScanConfig::default().get_block()],
        bytes: vec![ScanConfig::default().get_bytes_per_thread()],
        staging: vec![ScanConfig::default().get_staging()],
        reps: 50,
        json: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--ops" => a.ops = v().split(',').map(String::from).collect(),
            "--dtypes" => a.dtypes = v().split(',').map(String::from).collect(),
            "--log2" => a.log2 = list(&v(), "--log2"),
            "--blocks" => a.blocks = list(&v(), "--blocks"),
            "--bytes" => a.bytes = list(&v(), "--bytes"),
            "--staging" => {
                a.staging = list::<u8>(&v(), "--staging")
                    .iter()
                    .map(|&b| b != 0)
                    .collect()
            }
            "--algos" => {
                a.algos = v()
                    .split(',')
                    .map(|s| match s {
                        "warp" => ScanAlgorithm::WarpShuffle,
                        "blelloch" => ScanAlgorithm::Blelloch,
                        "hillis" => ScanAlgorithm::HillisSteele,
                        other => panic!("unknown algorithm {other}: warp, blelloch or hillis"),
                    })
                    .collect()
            }
            "--reps" => a.reps = v().parse().expect("--reps takes an integer"),
            "--json" => a.json = Some(v()),
            "--bench" => {} // passed by `cargo bench`
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Row {
    op: String,
    dtype: String,
    n: usize,
    config: String,
    ms: f64,
    gbs: f64,
}

/// The bytes of a value. The types scanned here (f32, f64, i32, `Affine<f32>`,
/// `Affine<f64>`) have no padding, so every byte is initialised.
fn bytes<T: DeviceValue>(v: &T) -> &[u8] {
    // SAFETY: `v` is a live reference to size_of::<T>() bytes, all initialised (no padding in
    // the types used).
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

/// Checks the GPU's inclusive scan against the CPU backend (every bit of every output),
/// then times it. Returns (median ms, whether the bits agreed).
fn time<T: Data, O: Operator<T>>(
    gpu: &Gpu,
    config: ScanConfig,
    x: &CudaSlice<T>,
    want: &[O::Out],
    op: O,
    reps: usize,
) -> Res<(f64, bool)> {
    let s = gpu.scanner_with::<T, O>(op, config)?;
    let stream = gpu.stream();
    let mut out = stream.alloc_zeros::<O::Out>(x.len())?;
    s.inclusive(x, &mut out)?;
    let got = stream.clone_dtoh(&out)?;
    let bad = got.iter().zip(want).position(|(a, b)| bytes(a) != bytes(b));
    if let Some(i) = bad {
        eprintln!(
            "MISMATCH {} over {} at {i} of {}: GPU {:?}, CPU {:?}",
            O::NAME,
            T::cuda_name(),
            x.len(),
            got[i],
            want[i]
        );
    }
    let ms = median_ms(stream, reps, || s.inclusive(x, &mut out))?;
    Ok((ms, bad.is_none()))
}

fn run<T: Data, O: Operator<T>>(
    base: &Gpu,
    a: &Args,
    op: O,
    name: &str,
    dtype: &str,
    rows: &mut Vec<Row>,
) -> Res<bool> {
    let mut all_ok = true;
    for &lg in &a.log2 {
        let n = 1usize << lg;
        let host = generate::<T>(n, 0x5eed ^ lg as u64);
        let want = Cpu::new().scan(&host, op, ScanKind::Inclusive)?;
        let x = base.stream().clone_htod(&host)?;
        for &algo in &a.algos {
            for &block in &a.blocks {
                for (&bytes, &staging) in a
                    .bytes
                    .iter()
                    .flat_map(|b| a.staging.iter().map(move |s| (b, s)))
                {
                    let config = ScanConfig::default()
                        .algorithm(algo)
                        .block(block)
                        .bytes_per_thread(bytes)
                        .staging(staging);
                    let (ms, ok) = time(base, config, &x, &want, op, a.reps)?;
                    all_ok &= ok;
                    let shape = base.scanner_with::<T, O>(op, config)?.shape();
                    let config = format!(
                        "{algo:?}/{}x{}{}",
                        shape.block,
                        shape.items,
                        if shape.staging { "/staged" } else { "" }
                    );
                    let gbs = (2 * n * std::mem::size_of::<T>()) as f64 / (ms * 1e-3) / 1e9;
                    println!(
                        "cufold  {name:7} {dtype:4} 2^{lg:<3} {config:22} {ms:9.4} ms {gbs:8.1} GB/s{}",
                        if ok { "" } else { "  MISMATCH" }
                    );
                    rows.push(Row {
                        op: name.into(),
                        dtype: dtype.into(),
                        n,
                        config,
                        ms,
                        gbs,
                    });
                }
            }
        }
    }
    Ok(all_ok)
}

fn main() -> Res<()> {
    let a = parse();
    let gpu = match Gpu::open(0) {
        Ok(g) => g,
        Err(e) => {
            println!("no CUDA device: {e}");
            return Ok(());
        }
    };
    println!(
        "# cufold {} on {}, inclusive scans, median of {} event-timed launches",
        env!("CARGO_PKG_VERSION"),
        gpu.device_name(),
        a.reps
    );
    let mut rows = Vec::new();
    let mut ok = true;
    for op in &a.ops {
        for d in &a.dtypes {
            ok &= match (op.as_str(), d.as_str()) {
                ("cumsum", "f32") => run::<f32, _>(&gpu, &a, Sum, op, d, &mut rows)?,
                ("cumsum", "f64") => run::<f64, _>(&gpu, &a, Sum, op, d, &mut rows)?,
                ("cumsum", "i32") => run::<i32, _>(&gpu, &a, Sum, op, d, &mut rows)?,
                ("affine", "f32") => run::<Affine<f32>, _>(&gpu, &a, Compose, op, d, &mut rows)?,
                ("affine", "f64") => run::<Affine<f64>, _>(&gpu, &a, Compose, op, d, &mut rows)?,
                ("affine", _) => continue,
                (o, d) => return Err(format!("unknown op or dtype {o} {d}").into()),
            };
        }
    }
    println!("\n| op | dtype | N | config | ms | GB/s |\n|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | 2^{} | {} | {:.4} | {:.0} |",
            r.op,
            r.dtype,
            r.n.trailing_zeros(),
            r.config,
            r.ms,
            r.gbs
        );
    }
    if let Some(path) = &a.json {
        let rows: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "lib": "cufold", "family": "scan", "op": r.op, "dtype": r.dtype, "n": r.n,
                    "config": r.config, "ms": r.ms, "gbs": r.gbs, "device": gpu.device_name(),
                })
            })
            .collect();
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)?;
    }
    if !ok {
        return Err("some GPU results differed from the CPU backend".into());
    }
    Ok(())
}
