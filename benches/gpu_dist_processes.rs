//! Many GPUs as a job runs them: one process per GPU, NCCL between them (cufold's `nccl`
//! feature). The sum and the inclusive sum scan of an f32 array spread over k processes
//! (`ChunkLayout::new`, the data already on each GPU), against one GPU's plain call in the
//! same job; and a fused Monte Carlo estimate with its standard error (`MeanVar` of U(0, 1)
//! samples) over k GPUs, with its samples/s and its bits against one GPU's.
//!
//! Without `RANK` in the environment the bench is its own launcher: for each k it starts k
//! copies of itself (rank r on GPU r, given `RANK`, `WORLD_SIZE`, `LOCAL_RANK` and a shared
//! rendezvous file), waits for them and prints rank 0's table. Under another launcher
//! (torchrun, MPI) with `RANK` set, it is one rank of that job.
//!
//! ```text
//! cargo bench --features nccl --bench gpu_dist_processes -- [--ranks 1,2,3,4] [--log2 28,30,32] [--reps 10] [--mc-log2 32]
//! ```
//!
//! A time is the median over repetitions of the slowest rank's call: from a barrier (an
//! all-gather through NCCL, outside the timing) to the result on the host (a reduce) or the
//! rank's stream finished (a scan). Every sum is checked: the array is all ones, so the sum
//! is exactly the length.

use clap::Parser;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../examples/common/children.rs"]
mod children;
#[path = "common/mod.rs"]
mod common;
use children::Children;

#[derive(Parser, Debug)]
#[command(about = "Distributed sum, scan and Monte Carlo, one process per GPU, against one GPU")]
struct Args {
    /// Numbers of processes (GPUs).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1, 2, 3, 4])]
    ranks: Vec<usize>,
    /// log2 of the global array's length.
    #[arg(long, value_delimiter = ',', default_values_t = vec![28, 30, 32])]
    log2: Vec<u32>,
    /// Timed repetitions (after one warm-up).
    #[arg(long, default_value_t = 10)]
    reps: usize,
    /// log2 of the Monte Carlo run's samples (0: no Monte Carlo rows).
    #[arg(long, default_value_t = 32)]
    mc_log2: u32,
    /// Seconds any wait of a rank may last.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    #[command(flatten)]
    out: common::Output,
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let args = Args::parse();
    if std::env::var_os("RANK").is_some() {
        return rank(&args);
    }
    launch(&args)
}

#[cfg(feature = "nccl")]
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Starts k copies of this bench for each k, and prints and checks rank 0's rows.
fn launch(args: &Args) -> Res<()> {
    let exe = std::env::current_exe()?;
    // One GPU per rank: NCCL refuses two ranks of one group on one device.
    let gpus = cufold::Gpu::device_count()?;
    if let Some(k) = args.ranks.iter().find(|&&k| k > gpus) {
        return Err(format!("{k} ranks need {k} GPUs; {gpus} here").into());
    }
    let mut rows: Vec<(String, u32, usize, f64)> = Vec::new();
    let mut mc: Vec<(usize, f64, String)> = Vec::new();
    for &k in &args.ranks {
        let dir = std::env::temp_dir().join(format!("cufold-bench-{}-{k}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("rendezvous");
        let mut children = Children(Vec::new());
        for r in 0..k {
            let mut cmd = Command::new(&exe);
            cmd.args(std::env::args_os().skip(1))
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", k.to_string())
                .env("LOCAL_RANK", r.to_string())
                .env("CUFOLD_RENDEZVOUS_FILE", &file)
                .stdout(Stdio::piped());
            children.0.push(cmd.spawn()?);
        }
        let deadline = Instant::now() + Duration::from_secs(10 * args.timeout);
        let mut out0 = String::new();
        for r in 0..k {
            let (status, out) = children.finish(r, deadline)?;
            if !status.success() {
                return Err(format!("{k} ranks: rank {r} failed ({status}):\n{out}").into());
            }
            if r == 0 {
                out0 = out;
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        for line in out0.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            match f[0] {
                "ROW" => rows.push((f[1].to_string(), f[2].parse()?, k, f[3].parse()?)),
                "MC" => mc.push((k, f[1].parse()?, f[2..].join(" "))),
                _ => println!("{k} ranks: {line}"),
            }
        }
    }
    println!("| op | N | GPUs (processes) | ms | GB/s (read + write for cumsum) | vs one GPU |");
    println!("|---|---|---|---|---|---|");
    for (op, lg, k, ms) in &rows {
        if op.starts_with("one-") || op.starts_with("part-") {
            continue;
        }
        let bytes = (4u64 << lg) as f64 * if op == "cumsum" { 2.0 } else { 1.0 };
        let one = rows
            .iter()
            .find(|r| r.0 == format!("one-{op}") && r.1 == *lg)
            .map(|r| r.3);
        let vs = one.map_or("-".into(), |o| format!("{:.3}x", ms / o));
        println!(
            "| {op} | 2^{lg} | {k} | {ms:.3} | {:.0} | {vs} |",
            bytes / ms / 1e6
        );
    }
    for (op, lg, _, ms) in rows.iter().filter(|r| r.0.starts_with("one-")) {
        println!("one GPU, plain call: {op} 2^{lg}: {ms:.3} ms");
    }
    for (op, lg, k, ms) in rows.iter().filter(|r| r.0.starts_with("part-")) {
        println!("{k} GPUs, {op} 2^{lg}: {ms:.3} ms (slowest rank)");
    }
    if !mc.is_empty() {
        println!();
        println!("| Monte Carlo, 2^{} samples | ms | samples/s | vs one GPU | estimate ± standard error |", args.mc_log2);
        println!("|---|---|---|---|---|");
        let one = mc.iter().find(|m| m.0 == 1).map(|m| m.1);
        for (k, ms, est) in &mc {
            let vs = one.map_or("-".into(), |o| format!("{:.2}x", o / ms));
            let rate = (1u64 << args.mc_log2) as f64 / (ms * 1e-3);
            println!("| {k} GPU(s) | {ms:.2} | {rate:.3e} | {vs} | {est} |");
        }
        // One GPU's bits on every number of GPUs.
        let bits: Vec<&str> = mc
            .iter()
            .map(|m| m.2.split(' ').next_back().unwrap())
            .collect();
        if bits.iter().any(|b| *b != bits[0]) {
            return Err(format!("the estimates' bits differ: {bits:?}").into());
        }
        println!("every number of GPUs gave the same bits: {}", bits[0]);
    }
    if let Some(path) = &args.out.json {
        let json: Vec<_> = rows
            .iter()
            .map(|(op, lg, k, ms)| serde_json::json!({"op": op, "log2": lg, "ranks": k, "ms": ms}))
            .chain(mc.iter().map(|(k, ms, _)| {
                serde_json::json!({"op": "monte_carlo", "log2": args.mc_log2, "ranks": k, "ms": ms})
            }))
            .collect();
        std::fs::write(path, serde_json::to_string_pretty(&json)?)?;
    }
    Ok(())
}

#[cfg(not(feature = "nccl"))]
fn rank(_: &Args) -> Res<()> {
    Err("this bench needs cufold's nccl feature: cargo bench --features nccl".into())
}

#[cfg(feature = "nccl")]
fn rank(args: &Args) -> Res<()> {
    use cudarc::driver::DevicePtrMut;
    use cufold::dist::{ChunkLayout, Collective, GpuRank, Launch, NcclGroup, TcpGroup};
    use cufold::monte_carlo::MonteCarlo;
    use cufold::ops::{Identity, Sum};
    use cufold::{Gpu, ScanKind};

    let timeout = Duration::from_secs(args.timeout);
    let launch = Launch::from_env()?.with_timeout(timeout);
    let tcp = TcpGroup::join(&launch)?;
    let gpu = Gpu::open(launch.local_rank)?;
    let nccl = NcclGroup::join(gpu.stream(), &tcp, timeout)?;
    let stream = gpu.stream().clone();
    let rank = GpuRank::new(gpu.clone(), nccl);
    let (me, k) = (launch.rank, launch.ranks);
    // The slowest rank's time of each repetition: every rank's times, gathered over TCP.
    let slowest = |mine: &[f64]| -> Res<Vec<f64>> {
        let bytes: Vec<u8> = mine.iter().flat_map(|t| t.to_le_bytes()).collect();
        let all = tcp.all_gather(&bytes)?;
        let per: Vec<Vec<f64>> = all
            .chunks(bytes.len())
            .map(|c| {
                c.chunks(8)
                    .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                    .collect()
            })
            .collect();
        Ok((0..mine.len())
            .map(|i| per.iter().map(|p| p[i]).fold(0.0, f64::max))
            .collect())
    };
    // A barrier through NCCL: the ranks leave it within microseconds of each other (a TCP
    // one releases them one by one).
    let barrier = || rank.collective().all_gather(&[0u8]).map(|_| ());
    let report = |op: &str, lg: u32, times: Vec<f64>| -> Res<()> {
        let t = slowest(&times)?;
        if me == 0 {
            println!("ROW {op} {lg} {}", median(t[1..].to_vec()));
        }
        Ok(())
    };
    for &lg in &args.log2 {
        let n = 1u64 << lg;
        let layout = ChunkLayout::new(n, k)?;
        let r = layout.range(me);
        let m = (r.end - r.start) as usize;
        let mut x = stream.alloc_zeros::<f32>(m.max(1))?;
        {
            let (ptr, _g) = x.device_ptr_mut(&stream);
            // SAFETY: x holds m.max(1) f32s, on this stream.
            let rc = unsafe {
                cudarc::driver::sys::cuMemsetD32Async(ptr, 1.0f32.to_bits(), m, stream.cu_stream())
            };
            assert_eq!(rc, cudarc::driver::sys::CUresult::CUDA_SUCCESS);
        }
        let x = x.slice(0..m);
        let mut y = stream.alloc_zeros::<f32>(m.max(1))?;
        let mut y = y.slice_mut(0..m);
        stream.synchronize()?;
        if k == 1 {
            // One GPU's plain calls.
            let reducer = gpu.reducer::<f32, _>(Sum)?;
            let scanner = gpu.scanner::<f32, _>(Sum)?;
            let (mut ts, mut tc) = (vec![], vec![]);
            for _ in 0..=args.reps {
                let s = Instant::now();
                let sum = reducer.reduce(&x)?;
                ts.push(s.elapsed().as_secs_f64() * 1e3);
                assert_eq!(sum, n as f32, "one GPU's sum of {n} ones");
                let s = Instant::now();
                scanner.inclusive(&x, &mut y)?;
                stream.synchronize()?;
                tc.push(s.elapsed().as_secs_f64() * 1e3);
            }
            report("one-sum", lg, ts)?;
            report("one-cumsum", lg, tc)?;
        }
        let (mut ts, mut tc) = (vec![], vec![]);
        for _ in 0..=args.reps {
            barrier()?;
            let s = Instant::now();
            let sum = rank.all_reduce(&layout, &x, Sum)?;
            ts.push(s.elapsed().as_secs_f64() * 1e3);
            assert_eq!(sum, n as f32, "the sum of {n} ones over {k} ranks");
        }
        for _ in 0..=args.reps {
            barrier()?;
            let s = Instant::now();
            rank.scan_into(&layout, &x, &mut y, Sum, ScanKind::Inclusive)?;
            stream.synchronize()?;
            tc.push(s.elapsed().as_secs_f64() * 1e3);
        }
        report("sum", lg, ts)?;
        report("cumsum", lg, tc)?;
        // The parts of a distributed sum: the share's reduction alone, and one exchange of a
        // call's first message.
        let reducer = gpu.reducer::<f32, _>(Sum)?;
        let (mut tl, mut tg) = (vec![], vec![]);
        for _ in 0..=args.reps {
            barrier()?;
            let s = Instant::now();
            std::hint::black_box(reducer.reduce(&x)?);
            tl.push(s.elapsed().as_secs_f64() * 1e3);
            barrier()?;
            let s = Instant::now();
            std::hint::black_box(rank.collective().all_gather(&[0u8; 2048])?);
            tg.push(s.elapsed().as_secs_f64() * 1e3);
        }
        report("part-local-sum", lg, tl)?;
        report("part-exchange", lg, tg)?;
    }
    if args.mc_log2 > 0 {
        let n = 1u64 << args.mc_log2;
        let layout = ChunkLayout::new(n, k)?;
        let mc = MonteCarlo::<f32, _>::new(Identity).seed(2025);
        let mut t = vec![];
        let mut est = None;
        for _ in 0..=args.reps.min(5) {
            barrier()?;
            let s = Instant::now();
            est = Some(rank.monte_carlo(&layout, &mc)?);
            t.push(s.elapsed().as_secs_f64() * 1e3);
        }
        let t = slowest(&t)?;
        let est = est.expect("an estimate");
        if me == 0 {
            let se = (est.m2 / (n as f64 - 1.0) / n as f64).sqrt();
            println!(
                "MC {} {:.9} ± {se:.3e} {:016x}",
                median(t[1..].to_vec()),
                est.mean,
                est.mean.to_bits()
            );
        }
    }
    Ok(())
}
