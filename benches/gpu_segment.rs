//! GPU segmented reductions across shapes: many short ragged segments, a square matrix's
//! rows, a few long rows and power-law ragged lengths. GB/s counts compulsory traffic: the
//! input once, the offsets once (ragged shapes) and the outputs; each time is the median of
//! event-timed launches after warm-up, as `scripts/segment_peers.py` times PyTorch and CuPy.
//! Every result is checked against the CPU backend before timing: bit for bit (the log-sum-exps
//! within f32 rounding, below).
//!
//! The reductions: `sum`, `max`, `argmax` and `logsumexp`, a log-sum-exp by an operator made
//! with `#[cufold::op]` (checked against the CPU within f32 rounding, since CUDA's `exp` and
//! `ln` round differently from the CPU's). Besides the reductions: `cumsum` (the inclusive
//! segmented scan of each row or segment, traffic: input, outputs and offsets once) and
//! `sum_by_key` (`reduce_by_key` with key `i` on every element of segment `i`, so that its
//! runs are the shape's segments; traffic: the
//! keys, the input and the three outputs once; the time includes the one wait for the
//! number of runs), `sum_by_key_into` (the one-pass `reduce_by_key_into`, into buffers
//! with room for every key, no wait; the same traffic counted) and `sum_by_key_no_lengths`
//! (`reduce_by_key_into_without_lengths`, as CUB's `ReduceByKey`: the traffic less the
//! lengths), and `cumsum_by_key` (`scan_by_key_into`, inclusive, with key `i` on segment
//! `i`, as CUB's `InclusiveSumByKey`; traffic: the keys and the input read, the outputs
//! written; the time includes the one wait for the number of runs).
//!
//! ```text
//! cargo bench --bench gpu_segment -- [--shapes short,square,long,powerlaw,mid,wide,narrow]
//!                                    [--ops sum,max,argmax,logsumexp,cumsum,
//!                                           sum_by_key,sum_by_key_into,sum_by_key_no_lengths,
//!                                           cumsum_by_key]
//!                                    [--schedule thread|warp|lanes|block|whole]
//!                                    [--block 256] [--thread-block 64] [--scan-block 256]
//!                                    [--reps 20] [--json OUT.json]
//! ```
//!
//! Besides the default shapes (and rows2k, rows4k): `long_offsets` and `few_offsets`, few
//! long segments by offsets (16 of 2^24, 512 of 2^19), and `offsets_128`, `offsets_1k`,
//! `offsets_4k` to `offsets_64k` (2^28 elements by offsets in segments of 2^7, 2^10, 2^12,
//! 2^13, 2^14 and 2^16), which scripts/cub_segments.cu runs too.

use cudarc::driver::CudaSlice;
use cufold::ops::{ArgMax, Max, Operator, Sum};
use cufold::segment::Rows;
use cufold::{Cpu, Gpu, ScanKind};

#[path = "common/mod.rs"]
mod common;
/// `ln(Σ exp(x_i))` as a user writes it with `#[cufold::op]`: the operator of
/// `examples/row_logsumexp.rs` (the `logsumexp` op).
#[path = "../examples/common/log_sum_exp.rs"]
mod log_sum_exp;
use common::median_ms;
use log_sum_exp::LogSumExp;

/// The shapes run by default (the ones scripts/segment_peers.py also times).
const DEFAULT_SHAPES: &str = "short,square,long,powerlaw,mid,wide,narrow";
const ALL_SHAPES: &str =
    "short,square,long,powerlaw,mid,wide,narrow,rows2k,rows4k,long_offsets,few_offsets,offsets_128,\
     offsets_1k,offsets_4k,offsets_8k,offsets_16k,offsets_64k";
const ALL_OPS: &str = "sum,max,argmax,logsumexp,cumsum,sum_by_key,sum_by_key_into,\
     sum_by_key_no_lengths,cumsum_by_key";

/// GPU segmented reductions and scans across shapes, GB/s of compulsory traffic, each result
/// checked against the CPU backend before timing (bit for bit, the log-sum-exps within f32
/// rounding). Lists are comma-separated.
// Each list is one value (`action = Set`) and `args_override_self` lets a flag repeat: the
// last occurrence wins, as it did with the hand-written parser this replaced.
#[derive(clap::Parser, Debug)]
#[command(
    name = "gpu_segment",
    bin_name = "gpu_segment",
    args_override_self = true
)]
struct Args {
    /// The shapes: 2^24 short ragged segments, a 2^14 x 2^14 matrix's rows, 16 rows of 2^24,
    /// power-law ragged lengths, 2^18 rows of 1024, 2^15 of 8192, 2^21 of 128 (and, when
    /// asked for, 2^17 rows of 2048 and 2^16 of 4096); `offsets_<count>x<len>`: `count`
    /// segments of `len` by offsets.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = DEFAULT_SHAPES,
          value_parser = shape_name)]
    shapes: Vec<String>,
    /// The operations (logsumexp: a log-sum-exp by a macro-made operator; cumsum: the
    /// segmented inclusive scan; sum_by_key: reduce_by_key; sum_by_key_into:
    /// reduce_by_key_into; sum_by_key_no_lengths: reduce_by_key_into_without_lengths).
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = "sum,max,argmax",
          value_parser = clap::builder::PossibleValuesParser::new(ALL_OPS.split(',')))]
    ops: Vec<String>,
    /// Event-timed launches per measurement (the median is reported).
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Force the schedule of the reductions and the scans (the planner's choice by
    /// default), to compare them.
    #[arg(long, value_parser = ["thread", "warp", "lanes", "block", "whole"])]
    schedule: Option<String>,
    /// Threads per block of the device-wide scan's tiles, which the scans take for rows on
    /// the whole schedule and for the longest ragged segments (`SegmentConfig::scan`).
    #[arg(long, default_value_t = 256)]
    scan_block: u32,
    /// Threads per block of the segmented reductions and scans (`SegmentConfig::block`; also
    /// the one pass by key's).
    #[arg(long, default_value_t = 256)]
    block: u32,
    /// Threads per block of the thread schedule, reductions and scans
    /// (`SegmentConfig::thread_block`).
    #[arg(long, default_value_t = 64)]
    thread_block: u32,
    /// Keep freed memory in the device's default memory pool across the stream's waits
    /// (`Gpu::keep_pool_memory(u64::MAX)`), as a caching allocator would: the waiting
    /// forms (by key) allocate their outputs after a wait.
    #[arg(long)]
    keep_pool: bool,
    #[command(flatten)]
    out: common::Output,
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The schedule `--schedule` forces on the reductions and the scans, if any.
static FORCED: std::sync::OnceLock<Option<cufold::segment::Schedule>> = std::sync::OnceLock::new();
/// The device-wide scan's block size, `--scan-block`.
static SCAN_BLOCK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
/// `--block` and `--thread-block`, for the reducers and scanners.
static BLOCKS: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();

/// The reducers' and scanners' configuration: `--block`, `--thread-block` and `--schedule`.
fn segment_config() -> cufold::segment::SegmentConfig {
    let (block, thread_block) = *BLOCKS.get().expect("set");
    cufold::segment::SegmentConfig::default()
        .schedule(FORCED.get().copied().flatten())
        .block(block)
        .thread_block(thread_block)
}

/// The bench's Sum scanner: `segment_config()` with the device-wide scan's `--scan-block`
/// (rows of 2048 or more take its tiles), for `cumsum` and `cumsum_by_key`.
fn sum_scanner(gpu: &Gpu) -> Res<cufold::segment::SegmentScanner<f32, Sum>> {
    let scan = cufold::scan::ScanConfig::default().block(*SCAN_BLOCK.get().expect("set"));
    Ok(gpu.segment_scanner_with::<f32, _>(Sum, segment_config().scan(scan))?)
}

/// The first position where a scan's GPU output differs in its bits from the CPU's,
/// reported on stderr as `op`'s mismatch on `shape_name`.
fn first_mismatch(op: &str, shape_name: &str, got: &[f32], want: &[f32]) -> Option<usize> {
    let bad = got
        .iter()
        .zip(want)
        .position(|(g, w)| g.to_bits() != w.to_bits());
    if let Some(i) = bad {
        eprintln!(
            "MISMATCH {op} {shape_name} position {i}: GPU {}, CPU {}",
            got[i], want[i]
        );
    }
    bad
}

/// A shape: rows of a packed matrix, or CSR offsets.
enum Shape {
    Rows(Rows),
    Offsets(Vec<u64>),
}

/// The lengths the issue names, from a fixed seed (the peers script draws the same ones).
/// splitmix64 here, not rand: scripts/segment_peers.py must draw the very same lengths in
/// NumPy, and splitmix is four lines in either language.
/// `offsets_<count>x<len>`'s count and length.
fn counted(name: &str) -> Option<(usize, u64)> {
    let (count, len) = name.strip_prefix("offsets_")?.split_once('x')?;
    Some((count.parse().ok()?, len.parse().ok()?))
}

/// A shape the bench knows: one of [`ALL_SHAPES`] or `offsets_<count>x<len>`.
fn shape_name(name: &str) -> Result<String, String> {
    if ALL_SHAPES.split(',').any(|s| s == name) || counted(name).is_some() {
        Ok(name.to_string())
    } else {
        Err(format!("one of {ALL_SHAPES}, or offsets_<count>x<len>"))
    }
}

fn shape(name: &str) -> Shape {
    let mut state = 0x5eed_u64;
    let mut next = move || {
        state = state.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    };
    let offsets = |lengths: &mut dyn Iterator<Item = u64>| {
        let mut o = vec![0u64];
        for l in lengths {
            o.push(o.last().unwrap() + l);
        }
        o
    };
    match name {
        // 2^24 segments of 4 to 32 elements.
        "short" => Shape::Offsets(offsets(&mut (0..1 << 24).map(|_| 4 + next() % 29))),
        "square" => Shape::Rows(Rows::new(1 << 14, 1 << 14)),
        "long" => Shape::Rows(Rows::new(16, 1 << 24)),
        // A softmax's or a loss's rows: 2^18 rows of 1024 (a warp per row).
        "mid" => Shape::Rows(Rows::new(1 << 18, 1 << 10)),
        // Rows of 8192 (the longest a warp takes) and of 128.
        "wide" => Shape::Rows(Rows::new(1 << 15, 1 << 13)),
        "narrow" => Shape::Rows(Rows::new(1 << 21, 1 << 7)),
        // Rows between a warp's and a block's (the planner's limit between them).
        "rows2k" => Shape::Rows(Rows::new(1 << 17, 1 << 11)),
        "rows4k" => Shape::Rows(Rows::new(1 << 16, 1 << 12)),
        // Few long segments by offsets (cufold only: the planner's limit between a block per
        // segment and the thread schedule's long pass): 16 of 2^24, 512 of 2^19.
        "long_offsets" => Shape::Offsets(offsets(&mut (0..16).map(|_| 1 << 24))),
        "few_offsets" => Shape::Offsets(offsets(&mut (0..512).map(|_| 1 << 19))),
        // 2^28 elements by offsets in segments of 2^7 and 2^10 (the narrow and mid rows' lengths
        // by offsets: a warp per segment), and of 2^12 to 2^16 (a block per segment for
        // reductions; where a scan by offsets leaves a block per segment for the thread
        // schedule's long pass). CUB's segmented reductions take them too
        // (scripts/cub_segments.cu); torch's segment_reduce is far slower at these counts.
        "offsets_128" => Shape::Offsets(offsets(&mut (0..1 << 21).map(|_| 1 << 7))),
        "offsets_1k" => Shape::Offsets(offsets(&mut (0..1 << 18).map(|_| 1 << 10))),
        "offsets_4k" => Shape::Offsets(offsets(&mut (0..1 << 16).map(|_| 1 << 12))),
        "offsets_8k" => Shape::Offsets(offsets(&mut (0..1 << 15).map(|_| 1 << 13))),
        "offsets_16k" => Shape::Offsets(offsets(&mut (0..1 << 14).map(|_| 1 << 14))),
        "offsets_64k" => Shape::Offsets(offsets(&mut (0..1 << 12).map(|_| 1 << 16))),
        // Pareto(1.2) lengths from 1, capped at 2^22, until 2^26 elements.
        "powerlaw" => {
            let mut total = 0u64;
            let mut lengths = Vec::new();
            while total < 1 << 26 {
                let u = ((next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                let l = (u.powf(-1.0 / 1.2).floor() as u64).clamp(1, 1 << 22);
                lengths.push(l);
                total += l;
            }
            Shape::Offsets(offsets(&mut lengths.into_iter()))
        }
        other => match counted(other) {
            Some((count, len)) => Shape::Offsets(offsets(&mut (0..count).map(|_| len))),
            None => panic!("unknown shape {other}: one of {ALL_SHAPES}"),
        },
    }
}

/// Log-sum-exps within f32 rounding of the CPU's: the same trees, but `exp` and `ln` round
/// differently in CUDA's library and the CPU's.
fn near(a: &f32, b: &f32) -> bool {
    (a - b).abs() <= 1e-5 * b.abs().max(1.0)
}

/// Values compared by their printed form: every field, no padding bytes (ArgMax's result
/// has padding, which the GPU writes as zeros and the CPU's values leave undefined).
fn same<X: std::fmt::Debug>(a: &X, b: &X) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

#[allow(clippy::too_many_arguments)]
fn run<O: Operator<f32>>(
    gpu: &Gpu,
    op: O,
    name: &str,
    shape_name: &str,
    shape: &Shape,
    x_host: &[f32],
    x: &CudaSlice<f32>,
    reps: usize,
    agree: fn(&O::Out, &O::Out) -> bool,
    rows_out: &mut Vec<serde_json::Value>,
) -> Res<bool> {
    let stream = gpu.stream();
    let r = gpu.segment_reducer_with::<f32, O>(op, segment_config())?;
    let (segments, total, extra) = match shape {
        Shape::Rows(rows) => (rows.rows, rows.rows * rows.cols, 0),
        Shape::Offsets(o) => (o.len() - 1, *o.last().unwrap() as usize, o.len() * 8),
    };
    let mut out = stream.alloc_zeros::<O::Out>(segments)?;
    let offsets = match shape {
        Shape::Offsets(o) => Some(stream.clone_htod(o)?),
        Shape::Rows(_) => None,
    };
    let launch = |out: &mut CudaSlice<O::Out>| match (shape, &offsets) {
        (Shape::Rows(rows), _) => r.reduce_rows_into(x, *rows, out),
        (Shape::Offsets(_), Some(o)) => r.reduce_segments_into(x, o, out),
        _ => unreachable!(),
    };
    launch(&mut out)?;
    let got = stream.clone_dtoh(&out)?;
    let want: Vec<Option<O::Out>> = match shape {
        Shape::Rows(rows) => Cpu::new()
            .reduce_rows(x_host, *rows, op)?
            .into_iter()
            .map(Some)
            .collect(),
        Shape::Offsets(o) => Cpu::new().reduce_segments(x_host, o, op)?,
    };
    let bad = got
        .iter()
        .zip(&want)
        .position(|(g, w)| w.as_ref().is_some_and(|w| !agree(g, w)));
    if let Some(i) = bad {
        eprintln!(
            "MISMATCH {name} {shape_name} segment {i}: GPU {:?}, CPU {:?}",
            got[i], want[i]
        );
    }
    let ms = median_ms(stream, reps, || launch(&mut out))?;
    let bytes = total * 4 + extra + segments * std::mem::size_of::<O::Out>();
    let gbs = bytes as f64 / (ms * 1e-3) / 1e9;
    let plan = r.plan(
        segments as u64,
        total as u64,
        matches!(shape, Shape::Rows(_)),
    );
    println!(
        "cufold  {name:7} {shape_name:9} {segments:>9} segs {total:>11} elems {:?} {ms:9.4} ms {gbs:8.1} GB/s{}",
        plan.schedule,
        if bad.is_none() { "" } else { "  MISMATCH" }
    );
    rows_out.push(serde_json::json!({
        "lib": "cufold", "family": "segment", "op": name, "shape": shape_name, "dtype": "f32",
        "segments": segments, "n": total, "bytes": bytes, "schedule": format!("{:?}", plan.schedule),
        "ms": ms, "gbs": gbs, "device": gpu.device_name(),
    }));
    Ok(bad.is_none())
}

/// The shape's segments as (start, length) pairs.
fn segments_of(shape: &Shape) -> Vec<(usize, usize)> {
    match shape {
        Shape::Rows(r) => (0..r.rows).map(|i| (i * r.stride, r.cols)).collect(),
        Shape::Offsets(o) => o
            .windows(2)
            .map(|w| (w[0] as usize, (w[1] - w[0]) as usize))
            .collect(),
    }
}

/// The inclusive segmented Sum scan of every row or segment, checked against the CPU.
fn run_cumsum(
    gpu: &Gpu,
    shape_name: &str,
    shape: &Shape,
    x_host: &[f32],
    x: &CudaSlice<f32>,
    reps: usize,
    rows_out: &mut Vec<serde_json::Value>,
) -> Res<bool> {
    let stream = gpu.stream();
    let s = sum_scanner(gpu)?;
    let total: usize = segments_of(shape).iter().map(|p| p.1).sum();
    let (segments, extra, mut y) = match shape {
        Shape::Rows(r) => (r.rows, 0, stream.alloc_zeros::<f32>(r.rows * r.cols)?),
        Shape::Offsets(o) => (
            o.len() - 1,
            o.len() * 8,
            stream.alloc_zeros::<f32>(x.len())?,
        ),
    };
    let offsets = match shape {
        Shape::Offsets(o) => Some(stream.clone_htod(o)?),
        Shape::Rows(_) => None,
    };
    let launch = |y: &mut CudaSlice<f32>| match (shape, &offsets) {
        (Shape::Rows(rows), _) => s.scan_rows_into(x, *rows, y, ScanKind::Inclusive),
        (Shape::Offsets(_), Some(o)) => s.scan_segments_into(x, o, y, ScanKind::Inclusive),
        _ => unreachable!(),
    };
    launch(&mut y)?;
    let got = stream.clone_dtoh(&y)?;
    let want = match shape {
        Shape::Rows(rows) => Cpu::new().scan_rows(x_host, *rows, Sum, ScanKind::Inclusive)?,
        Shape::Offsets(o) => {
            let mut w = got.clone();
            Cpu::new().scan_segments_into(x_host, o, &mut w, Sum, ScanKind::Inclusive)?;
            w
        }
    };
    let bad = first_mismatch("cumsum", shape_name, &got, &want);
    let ms = median_ms(stream, reps, || launch(&mut y))?;
    let bytes = total * 8 + extra;
    let gbs = bytes as f64 / (ms * 1e-3) / 1e9;
    let plan = s.plan(
        segments as u64,
        total as u64,
        matches!(shape, Shape::Rows(_)),
    );
    println!(
        "cufold  cumsum  {shape_name:9} {segments:>9} segs {total:>11} elems {:?} {ms:9.4} ms {gbs:8.1} GB/s{}",
        plan.schedule,
        if bad.is_none() { "" } else { "  MISMATCH" }
    );
    rows_out.push(serde_json::json!({
        "lib": "cufold", "family": "segment", "op": "cumsum", "shape": shape_name, "dtype": "f32",
        "segments": segments, "n": total, "bytes": bytes, "schedule": format!("{:?}", plan.schedule),
        "ms": ms, "gbs": gbs, "device": gpu.device_name(),
    }));
    Ok(bad.is_none())
}

/// Key `i` (u32) on every element of segment `i` (rows: packed, the stride ignored), and the
/// values those keys cover.
fn keyed<'a>(shape: &Shape, x_host: &'a [f32]) -> (Vec<u32>, &'a [f32]) {
    let segs = segments_of(shape);
    let lo = segs.first().map_or(0, |p| p.0);
    let keys: Vec<u32> = segs
        .iter()
        .enumerate()
        .flat_map(|(i, p)| std::iter::repeat(i as u32).take(p.1))
        .collect();
    let n = keys.len();
    (keys, &x_host[lo..lo + n])
}

/// `scan_by_key_into` (inclusive Sum) with key `i` on segment `i`'s elements, so that it
/// restarts at each of the shape's segments, checked against the CPU.
fn run_cumsum_by_key(
    gpu: &Gpu,
    shape_name: &str,
    shape: &Shape,
    x_host: &[f32],
    reps: usize,
    rows_out: &mut Vec<serde_json::Value>,
) -> Res<bool> {
    let stream = gpu.stream();
    let (keys, values) = keyed(shape, x_host);
    let n = keys.len();
    let (kd, xd) = (stream.clone_htod(&keys)?, stream.clone_htod(values)?);
    let mut y = stream.alloc_zeros::<f32>(n)?;
    let s = sum_scanner(gpu)?;
    let launch = |y: &mut CudaSlice<f32>| s.scan_by_key_into(&kd, &xd, y, ScanKind::Inclusive);
    launch(&mut y)?;
    let got = stream.clone_dtoh(&y)?;
    let mut want = vec![0.0f32; n];
    Cpu::new().scan_by_key_into(&keys, values, &mut want, Sum, ScanKind::Inclusive)?;
    let bad = first_mismatch("cumsum_by_key", shape_name, &got, &want);
    let ms = median_ms(stream, reps, || launch(&mut y))?;
    let runs = segments_of(shape).len();
    let bytes = n * 12;
    let gbs = bytes as f64 / (ms * 1e-3) / 1e9;
    println!(
        "cufold  cumsum_by_key {shape_name:9} {runs:>9} runs {n:>11} elems {ms:9.4} ms {gbs:8.1} GB/s{}",
        if bad.is_none() { "" } else { "  MISMATCH" }
    );
    rows_out.push(serde_json::json!({
        "lib": "cufold", "family": "segment", "op": "cumsum_by_key", "shape": shape_name,
        "dtype": "f32", "segments": runs, "n": n, "bytes": bytes, "ms": ms, "gbs": gbs,
        "device": gpu.device_name(),
    }));
    Ok(bad.is_none())
}

/// Which reduction by key `run_sum_by_key` times.
#[derive(Clone, Copy, PartialEq)]
enum ByKey {
    /// `reduce_by_key` (new buffers, one wait).
    Waiting,
    /// `reduce_by_key_into`.
    Into,
    /// `reduce_by_key_into_without_lengths`.
    NoLengths,
}

/// `reduce_by_key` of Sum with key `i` (u32) on segment `i`'s elements, so that the runs
/// are the shape's segments (rows: packed, the stride ignored); `form` Into or NoLengths:
/// also (and timed) the one pass into buffers with room for every key.
fn run_sum_by_key(
    gpu: &Gpu,
    shape_name: &str,
    shape: &Shape,
    x_host: &[f32],
    reps: usize,
    form: ByKey,
    rows_out: &mut Vec<serde_json::Value>,
) -> Res<bool> {
    let stream = gpu.stream();
    let (keys, values) = keyed(shape, x_host);
    let n = keys.len();
    let (kd, xd) = (stream.clone_htod(&keys)?, stream.clone_htod(values)?);
    let r = gpu.segment_reducer_with::<f32, _>(Sum, segment_config())?;
    let by = r.reduce_by_key(&kd, &xd)?;
    let got = (
        stream.clone_dtoh(&by.values)?,
        stream.clone_dtoh(&by.lengths)?,
    );
    let want = Cpu::new().reduce_by_key(&keys, values, Sum)?;
    let bad = got.1 != want.lengths
        || got
            .0
            .iter()
            .zip(&want.values)
            .any(|(g, w)| g.to_bits() != w.to_bits());
    if bad {
        eprintln!("MISMATCH sum_by_key {shape_name}");
    }
    let mut bad_any = bad;
    let runs = want.lengths.len();
    let ms = if form != ByKey::Waiting {
        // Into buffers with room for every key, as a caller that does not count first holds.
        let (mut k, mut v) = (stream.alloc_zeros::<u32>(n)?, stream.alloc_zeros::<f32>(n)?);
        let mut c = stream.alloc_zeros::<u64>(1)?;
        let mut l = stream.alloc_zeros::<u64>(if form == ByKey::Into { n } else { 0 })?;
        let once = |k: &mut CudaSlice<u32>,
                    v: &mut CudaSlice<f32>,
                    l: &mut CudaSlice<u64>,
                    c: &mut CudaSlice<u64>| match form {
            ByKey::Into => r.reduce_by_key_into(&kd, &xd, k, v, l, c),
            _ => r.reduce_by_key_into_without_lengths(&kd, &xd, k, v, c),
        };
        once(&mut k, &mut v, &mut l, &mut c)?;
        let into_bad = stream.clone_dtoh(&c)?[0] as usize != runs
            || (form == ByKey::Into && stream.clone_dtoh(&l.slice(..runs))? != want.lengths)
            || stream.clone_dtoh(&k.slice(..runs))? != want.keys
            || stream
                .clone_dtoh(&v.slice(..runs))?
                .iter()
                .zip(&want.values)
                .any(|(g, w)| g.to_bits() != w.to_bits());
        if into_bad {
            eprintln!("MISMATCH sum_by_key_into {shape_name}");
            bad_any = true;
        }
        median_ms(stream, reps, || once(&mut k, &mut v, &mut l, &mut c))?
    } else {
        median_ms(stream, reps, || r.reduce_by_key(&kd, &xd).map(|_| ()))?
    };
    let (op, length_bytes) = match form {
        ByKey::Waiting => ("sum_by_key", 8),
        ByKey::Into => ("sum_by_key_into", 8),
        ByKey::NoLengths => ("sum_by_key_no_lengths", 0),
    };
    let bytes = n * 8 + runs * (4 + 4 + length_bytes);
    let gbs = bytes as f64 / (ms * 1e-3) / 1e9;
    println!(
        "cufold  {op:15} {shape_name:9} {runs:>9} runs {n:>11} elems {ms:9.4} ms {gbs:8.1} GB/s{}",
        if bad_any { "  MISMATCH" } else { "" }
    );
    rows_out.push(serde_json::json!({
        "lib": "cufold", "family": "segment", "op": op, "shape": shape_name, "dtype": "f32",
        "segments": runs, "n": n, "bytes": bytes, "ms": ms, "gbs": gbs, "device": gpu.device_name(),
    }));
    Ok(!bad_any)
}

fn main() -> Res<()> {
    let Args {
        shapes,
        ops,
        reps,
        schedule,
        scan_block,
        block,
        thread_block,
        keep_pool,
        out: common::Output { json, .. },
    } = <Args as clap::Parser>::parse();
    use cufold::segment::Schedule;
    let forced = schedule.as_deref().map(|s| match s {
        "thread" => Schedule::Thread,
        "warp" => Schedule::Warp,
        "lanes" => Schedule::Lanes,
        "whole" => Schedule::Whole,
        _ => Schedule::Block,
    });
    FORCED.set(forced).expect("set once");
    SCAN_BLOCK.set(scan_block).expect("set once");
    BLOCKS.set((block, thread_block)).expect("set once");
    let Some(gpu) = common::open_gpu() else {
        return Ok(());
    };
    if keep_pool {
        gpu.keep_pool_memory(u64::MAX)?;
    }
    println!(
        "# cufold {} on {}, segmented reductions, median of {reps} event-timed launches{}",
        env!("CARGO_PKG_VERSION"),
        gpu.device_name(),
        if keep_pool { ", pool kept" } else { "" }
    );
    let mut rows = Vec::new();
    let mut ok = true;
    for s in &shapes {
        let shape = shape(s);
        let n = match &shape {
            Shape::Rows(r) => r.rows * r.cols,
            Shape::Offsets(o) => *o.last().unwrap() as usize,
        };
        let host: Vec<f32> = common::generate(n, 0x5eed ^ n as u64);
        let x = gpu.stream().clone_htod(&host)?;
        for op in &ops {
            ok &= match op.as_str() {
                "sum" => run(&gpu, Sum, op, s, &shape, &host, &x, reps, same, &mut rows)?,
                "max" => run(&gpu, Max, op, s, &shape, &host, &x, reps, same, &mut rows)?,
                "argmax" => run(
                    &gpu, ArgMax, op, s, &shape, &host, &x, reps, same, &mut rows,
                )?,
                "logsumexp" => run(
                    &gpu, LogSumExp, op, s, &shape, &host, &x, reps, near, &mut rows,
                )?,
                "cumsum" => run_cumsum(&gpu, s, &shape, &host, &x, reps, &mut rows)?,
                "sum_by_key" => {
                    run_sum_by_key(&gpu, s, &shape, &host, reps, ByKey::Waiting, &mut rows)?
                }
                "sum_by_key_into" => {
                    run_sum_by_key(&gpu, s, &shape, &host, reps, ByKey::Into, &mut rows)?
                }
                "sum_by_key_no_lengths" => {
                    run_sum_by_key(&gpu, s, &shape, &host, reps, ByKey::NoLengths, &mut rows)?
                }
                "cumsum_by_key" => run_cumsum_by_key(&gpu, s, &shape, &host, reps, &mut rows)?,
                other => return Err(format!("unknown op {other}: one of {ALL_OPS}").into()),
            };
        }
    }
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)?;
    }
    if !ok {
        return Err("some GPU results differed from the CPU backend".into());
    }
    Ok(())
}
