//! GPU scan throughput: GB/s of compulsory traffic (2 x N x element size: every element read
//! once and written once), timed with CUDA events around each launch (after warm-up; median
//! of the repetitions), the way `.gpu/peers.py` times torch.cumsum and cupy.cumsum.
//!
//! ```text
//! cargo bench --bench gpu_scan -- [--ops cumsum,compensated,affine] [--dtypes f32,f64,i32] [--log2 20,24,28]
//!                                 [--algos warp,blelloch,hillis] [--blocks 256] [--bytes 128]
//!                                 [--staging 1,0] [--resident 1,8,0] [--large-from B] [--prefetch B] [--offset K]
//!                                 [--reps 50] [--json OUT.json]
//! ```
//!
//! Several algorithms, block sizes or bytes per thread make a sweep: every combination is
//! timed. Every result is checked bit for bit against the CPU backend before timing.

use cudarc::driver::CudaSlice;
use cufold::ops::{Affine, CompensatedSum, Compose, Operator, Sum};
use cufold::scan::ScanConfig;
use cufold::{Cpu, DeviceValue, Gpu, ScanAlgorithm, ScanKind};

#[path = "common/mod.rs"]
mod common;
use common::{generate, median_ms, Data};

const ALL_OPS: &str = "cumsum,compensated,affine";
const ALL_DTYPES: &str = "f32,f64,i32";
/// Also f16 (f32 accumulators), on request.
const DTYPES: [&str; 4] = ["f32", "f64", "i32", "f16"];

/// A block-level scan algorithm, as the command line names it.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Algo {
    Warp,
    Blelloch,
    Hillis,
}

impl Algo {
    fn of(a: ScanAlgorithm) -> Algo {
        match a {
            ScanAlgorithm::WarpShuffle => Algo::Warp,
            ScanAlgorithm::Blelloch => Algo::Blelloch,
            ScanAlgorithm::HillisSteele => Algo::Hillis,
        }
    }

    fn get(self) -> ScanAlgorithm {
        match self {
            Algo::Warp => ScanAlgorithm::WarpShuffle,
            Algo::Blelloch => ScanAlgorithm::Blelloch,
            Algo::Hillis => ScanAlgorithm::HillisSteele,
        }
    }
}

/// GPU inclusive-scan throughput (GB/s of 2 x N x element size), each result checked bit for
/// bit against the CPU backend before timing. Lists are comma-separated; several algorithms,
/// blocks, bytes or staging choices make a sweep over every combination.
// Each list is one value (`action = Set`) and `args_override_self` lets a flag repeat: the
// last occurrence wins, as it did with the hand-written parser this replaced.
#[derive(clap::Parser, Debug)]
#[command(name = "gpu_scan", bin_name = "gpu_scan", args_override_self = true)]
struct Args {
    /// The scans (compensated: CompensatedSum, the float types; affine: f32 and f64 only;
    /// other types are skipped).
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = ALL_OPS,
          value_parser = clap::builder::PossibleValuesParser::new(ALL_OPS.split(',')))]
    ops: Vec<String>,
    /// The element types.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = ALL_DTYPES,
          value_parser = clap::builder::PossibleValuesParser::new(DTYPES))]
    dtypes: Vec<String>,
    /// log2 of the input sizes.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = "20,24,28")]
    log2: Vec<u32>,
    /// The block-level algorithms.
    #[arg(long, value_enum, value_delimiter = ',', action = clap::ArgAction::Set,
          default_values_t = [Algo::of(ScanAlgorithm::default())])]
    algos: Vec<Algo>,
    /// Threads per block.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set,
          default_values_t = [ScanConfig::default().get_block()])]
    blocks: Vec<u32>,
    /// Input bytes per thread per tile.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set,
          default_values_t = [ScanConfig::default().get_bytes_per_thread()])]
    bytes: Vec<u32>,
    /// Staging through shared memory: 1 (on) or 0 (off); any non-zero value is on.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set,
          default_values_t = [ScanConfig::default().get_staging() as u8])]
    staging: Vec<u8>,
    /// Resident tiles where the planner takes them: 1 (on, the default accumulators of at
    /// most 4 bytes), 8 (accumulators of 8 bytes admitted too) or 0 (off: runs in registers).
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set,
          default_values_t = [ScanConfig::default().get_resident() as u8])]
    resident: Vec<u8>,
    /// Bytes of input from which scans take the large inputs' kernel, its large tiles and
    /// L2 prefetch (ScanConfig::large_from; 0: always, 18446744073709551615: never).
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set,
          default_values_t = [ScanConfig::default().get_large_from()])]
    large_from: Vec<u64>,
    /// How far ahead, in bytes of input, blocks of large inputs ask the L2 for a later
    /// tile (ScanConfig::prefetch_bytes; 0: never).
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set,
          default_values_t = [ScanConfig::default().get_prefetch_bytes()])]
    prefetch: Vec<u64>,
    /// Scan views that start this many elements into their buffers (input and output), so
    /// that a nonzero offset not a multiple of 16 bytes measures unaligned views.
    #[arg(long, default_value_t = 0)]
    offset: usize,
    /// Event-timed launches per measurement (the median is reported).
    #[arg(long, default_value_t = 50)]
    reps: usize,
    #[command(flatten)]
    out: common::Output,
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
/// The views start `offset` elements into `x` and the output buffer.
fn time<T: Data, O: Operator<T>>(
    gpu: &Gpu,
    config: ScanConfig,
    (x, offset): (&CudaSlice<T>, usize),
    want: &[O::Out],
    op: O,
    reps: usize,
) -> Res<(f64, bool)> {
    let s = gpu.scanner_with::<T, O>(op, config)?;
    let stream = gpu.stream();
    let mut buf = stream.alloc_zeros::<O::Out>(x.len())?;
    let x = x.slice(offset..);
    let mut out = buf.slice_mut(offset..);
    s.inclusive(&x, &mut out)?;
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
    let ms = median_ms(stream, reps, || s.inclusive(&x, &mut out))?;
    Ok((ms, bad.is_none()))
}

/// The last prefix of the f32 data's inclusive cumsum and compensated scan, against the
/// exact sum (`ExactSum` of the same values as f64, rounded once to f64): the relative error
/// of each. At a power-of-two N the last prefix is the canonical tree over all N, so the
/// CPU's reduction gives its bits (which the GPU scans above match).
fn last_prefix_errors(log2: &[u32]) -> Res<()> {
    let cpu = Cpu::new();
    for &lg in log2 {
        let n = 1usize << lg;
        let host = generate::<f32>(n, 0x5eed ^ lg as u64);
        let wide: Vec<f64> = host.iter().map(|&x| x as f64).collect();
        let exact: f64 = cpu.reduce(&wide, cufold::ops::ExactSum)?;
        let plain: f32 = cpu.reduce(&host, Sum)?;
        let comp: f32 = cpu.reduce(&host, CompensatedSum)?;
        let rel = |x: f32| ((x as f64 - exact) / exact).abs();
        println!(
            "last prefix f32 2^{lg}: exact {exact:e}, cumsum rel. error {:.3e}, compensated {:.3e}",
            rel(plain),
            rel(comp)
        );
    }
    Ok(())
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
        let mut padded = host[..a.offset.min(n)].to_vec();
        padded.extend_from_slice(&host);
        let x = base.stream().clone_htod(&padded)?;
        for algo in a.algos.iter().map(|a| a.get()) {
            for &block in &a.blocks {
                for (&bytes, staging, resident) in a.bytes.iter().flat_map(|b| {
                    a.staging
                        .iter()
                        .flat_map(move |&s| a.resident.iter().map(move |&r| (b, s != 0, r)))
                }) {
                    let config = ScanConfig::default()
                        .algorithm(algo)
                        .block(block)
                        .bytes_per_thread(bytes)
                        .staging(staging)
                        .resident(resident != 0);
                    let config = if resident > 1 {
                        config.resident_acc_bytes(resident as u32)
                    } else {
                        config
                    };
                    for (&large_from, &prefetch) in a
                        .large_from
                        .iter()
                        .flat_map(|l| a.prefetch.iter().map(move |p| (l, p)))
                    {
                        let config = config.large_from(large_from).prefetch_bytes(prefetch);
                        let (ms, ok) = time(base, config, (&x, a.offset), &want, op, a.reps)?;
                        all_ok &= ok;
                        let shape = base
                            .scanner_with::<T, O>(op, config)?
                            .shape_for_len(n as u64);
                        let config = format!(
                            "{algo:?}/{}x{}{}{}",
                            shape.block,
                            shape.items,
                            if shape.resident {
                                "/resident"
                            } else if shape.staging {
                                "/staged"
                            } else {
                                ""
                            },
                            if shape.prefetch > 0 {
                                format!("/pf{}", shape.prefetch)
                            } else {
                                String::new()
                            }
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
    }
    Ok(all_ok)
}

fn main() -> Res<()> {
    let a = <Args as clap::Parser>::parse();
    let Some(gpu) = common::open_gpu() else {
        return Ok(());
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
                ("cumsum", "f16") => run::<half::f16, _>(&gpu, &a, Sum, op, d, &mut rows)?,
                ("compensated", "f32") => {
                    run::<f32, _>(&gpu, &a, CompensatedSum, op, d, &mut rows)?
                }
                ("compensated", "f64") => {
                    run::<f64, _>(&gpu, &a, CompensatedSum, op, d, &mut rows)?
                }
                ("compensated", "f16") => {
                    run::<half::f16, _>(&gpu, &a, CompensatedSum, op, d, &mut rows)?
                }
                ("compensated", _) => continue,
                ("affine", "f32") => run::<Affine<f32>, _>(&gpu, &a, Compose, op, d, &mut rows)?,
                ("affine", "f64") => run::<Affine<f64>, _>(&gpu, &a, Compose, op, d, &mut rows)?,
                ("affine", _) => continue,
                (o, d) => return Err(format!("unknown op or dtype {o} {d}").into()),
            };
        }
    }
    if a.ops.iter().any(|o| o == "compensated") && a.dtypes.iter().any(|d| d == "f32") {
        last_prefix_errors(&a.log2)?;
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
    if let Some(path) = &a.out.json {
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
