//! GPU reduction throughput: GB/s of compulsory traffic (N x element size), timed with CUDA
//! events around each launch (after warm-up; median of the repetitions), the way
//! `scripts/peers.py` times PyTorch and CuPy, so the two tables compare like for like.
//!
//! ```text
//! cargo bench --bench gpu_reduce -- [--ops sum,prod,min,max,minmax,argmin,argmax,widesum,mean,meanvar,div2mean,exactsum,exactmean,compensated]
//!                                   [--dtypes f32,f64,f16,bf16,i32,i64,u8]
//!                                   [--log2 20,24,28] [--block 1024] [--large-block 128]
//!                                   [--large-from-len 65536] [--reps 50]
//!                                   [--check-up-to 28] [--json OUT.json]
//! ```
//!
//! Each result is checked once against the CPU backend (the bits must agree) before timing,
//! for N up to 2^`--check-up-to`. Inputs of 2^20 elements fit in the 50 MB L2 of an H100, as
//! they do for the peers. Every row also carries microseconds per call, the number that
//! matters for small inputs.

use cudarc::driver::CudaSlice;
use cufold::ops::*;
use cufold::reduce::ReduceConfig;
use cufold::{bf16, f16, Cpu, Gpu};

#[path = "common/mod.rs"]
mod common;
use common::{generate, median_ms, Data};

const ALL_OPS: &str =
    "sum,prod,min,max,minmax,argmin,argmax,widesum,mean,meanvar,div2mean,exactsum,exactmean,compensated";
const ALL_DTYPES: &str = "f32,f64,f16,bf16,i32,i64,u8";

/// GPU reduction throughput (GB/s of N x element size), each result checked against the CPU
/// backend before timing. Lists are comma-separated.
// Each list is one value (`action = Set`) and `args_override_self` lets a flag repeat: the
// last occurrence wins, as it did with the hand-written parser this replaced.
#[derive(clap::Parser, Debug)]
#[command(
    name = "gpu_reduce",
    bin_name = "gpu_reduce",
    args_override_self = true
)]
struct Args {
    /// The operators (div2mean: f32 and f64 only; exactsum, exactmean, compensated
    /// (CompensatedSum): the float types).
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = ALL_OPS,
          value_parser = clap::builder::PossibleValuesParser::new(ALL_OPS.split(',')))]
    ops: Vec<String>,
    /// The element types.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = ALL_DTYPES,
          value_parser = clap::builder::PossibleValuesParser::new(ALL_DTYPES.split(',')))]
    dtypes: Vec<String>,
    /// log2 of the input sizes.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = "20,24,28")]
    log2: Vec<u32>,
    /// Threads per block.
    #[arg(long, default_value_t = 1024)]
    block: u32,
    /// Threads per block of order-free operators from --large-from-len elements.
    #[arg(long, default_value_t = 128)]
    large_block: u32,
    /// Elements from which order-free operators take --large-block (u64::MAX: never).
    #[arg(long, default_value_t = 1 << 16)]
    large_from_len: u64,
    /// Event-timed launches per measurement (the median is reported).
    #[arg(long, default_value_t = 50)]
    reps: usize,
    /// Check results against the CPU backend for N up to 2^this.
    #[arg(long, default_value_t = 28)]
    check_up_to: u32,
    #[command(flatten)]
    out: common::Output,
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// (median ms, `Some(bits agreed)` or `None` when not checked)
type Timing = Res<(f64, Option<bool>)>;

struct Case<'a, T> {
    gpu: &'a Gpu,
    config: ReduceConfig,
    x: &'a CudaSlice<T>,
    host: &'a [T],
    reps: usize,
    check: bool,
}

impl<T: Data> Case<'_, T> {
    fn time<O: Operator<T>>(&self, op: O) -> Timing {
        let r = self.gpu.reducer_with::<T, O>(op, self.config)?;
        let mut ok = None;
        if self.check {
            let got = r.reduce(self.x)?;
            let want = Cpu::new().reduce(self.host, op)?;
            let same = format!("{got:?}") == format!("{want:?}");
            if !same {
                eprintln!(
                    "MISMATCH {} over {}: GPU {got:?}, CPU {want:?}",
                    O::NAME,
                    T::cuda_name()
                );
            }
            ok = Some(same);
        }
        let stream = self.gpu.stream();
        let mut out = stream.alloc_zeros::<O::Out>(1)?;
        let ms = median_ms(stream, self.reps, || r.reduce_into(self.x, &mut out))?;
        Ok((ms, ok))
    }
}

/// The operators a type has: every built-in, Div2Mean for f32 and f64, the exact ones for floats.
trait Ops: Data {
    fn run(case: &Case<'_, Self>, op: &str) -> Option<Timing>;
}

macro_rules! ops {
    ($t:ty $(, $extra:literal => $op:ident)*) => {
        impl Ops for $t {
            fn run(c: &Case<'_, Self>, op: &str) -> Option<Timing> {
                Some(match op {
                    "sum" => c.time(Sum),
                    "prod" => c.time(Prod),
                    "min" => c.time(Min),
                    "max" => c.time(Max),
                    "minmax" => c.time(MinMax),
                    "argmin" => c.time(ArgMin),
                    "argmax" => c.time(ArgMax),
                    "widesum" => c.time(WideSum),
                    "mean" => c.time(Mean),
                    "meanvar" => c.time(MeanVar),
                    $($extra => c.time($op),)*
                    _ => return None,
                })
            }
        }
    };
}
ops!(f32, "div2mean" => Div2Mean, "exactsum" => ExactSum, "exactmean" => ExactMean, "compensated" => CompensatedSum);
ops!(f64, "div2mean" => Div2Mean, "exactsum" => ExactSum, "exactmean" => ExactMean, "compensated" => CompensatedSum);
ops!(f16, "exactsum" => ExactSum, "exactmean" => ExactMean, "compensated" => CompensatedSum);
ops!(bf16, "exactsum" => ExactSum, "exactmean" => ExactMean, "compensated" => CompensatedSum);
ops!(i32);
ops!(i64);
ops!(u8);

struct Row {
    op: String,
    dtype: String,
    n: usize,
    ms: f64,
    gbs: f64,
    checked: Option<bool>,
}

fn run_dtype<T: Ops>(gpu: &Gpu, a: &Args, dtype: &str, rows: &mut Vec<Row>) -> Res<bool> {
    let mut all_ok = true;
    for &lg in &a.log2 {
        let n = 1usize << lg;
        let host = generate::<T>(n, 0x5eed ^ lg as u64);
        let x = gpu.stream().clone_htod(&host)?;
        let case = Case {
            gpu,
            config: ReduceConfig::default()
                .block(a.block)
                .large_block(a.large_block)
                .large_from_len(a.large_from_len),
            x: &x,
            host: &host,
            reps: a.reps,
            check: lg <= a.check_up_to,
        };
        for op in &a.ops {
            let Some(res) = T::run(&case, op) else {
                continue; // Div2Mean over a type that has none
            };
            let (ms, checked) = res?;
            all_ok &= checked != Some(false);
            let gbs = (n * std::mem::size_of::<T>()) as f64 / (ms * 1e-3) / 1e9;
            println!(
                "cufold  {op:8} {dtype:4} 2^{lg:<3} {ms:9.4} ms {gbs:8.1} GB/s{}",
                match checked {
                    Some(true) => "",
                    Some(false) => "  MISMATCH",
                    None => "  (not checked)",
                }
            );
            rows.push(Row {
                op: op.clone(),
                dtype: dtype.into(),
                n,
                ms,
                gbs,
                checked,
            });
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
        "# cufold {} on {}, block {} (order-free operators: {} from {} elements), median of {} event-timed launches",
        env!("CARGO_PKG_VERSION"),
        gpu.device_name(),
        a.block,
        a.large_block,
        a.large_from_len,
        a.reps
    );
    let mut rows = Vec::new();
    let mut ok = true;
    for d in &a.dtypes {
        ok &= match d.as_str() {
            "f32" => run_dtype::<f32>(&gpu, &a, d, &mut rows)?,
            "f64" => run_dtype::<f64>(&gpu, &a, d, &mut rows)?,
            "f16" => run_dtype::<f16>(&gpu, &a, d, &mut rows)?,
            "bf16" => run_dtype::<bf16>(&gpu, &a, d, &mut rows)?,
            "i32" => run_dtype::<i32>(&gpu, &a, d, &mut rows)?,
            "i64" => run_dtype::<i64>(&gpu, &a, d, &mut rows)?,
            "u8" => run_dtype::<u8>(&gpu, &a, d, &mut rows)?,
            other => return Err(format!("unknown dtype {other}").into()),
        };
    }
    if let Some(path) = &a.out.json {
        let rows: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "lib": "cufold", "family": "reduce", "op": r.op, "dtype": r.dtype,
                    "n": r.n, "ms": r.ms, "gbs": r.gbs, "checked": r.checked,
                    "device": gpu.device_name(),
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
