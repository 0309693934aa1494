//! One process per rank, as a launcher runs a job: a reduce, an inclusive scan and a Monte
//! Carlo estimate of an array spread over N processes, each with one device's bits.
//!
//! Without `RANK` in the environment the example is its own launcher: it starts `--ranks N`
//! copies of itself (rank r given `RANK`, `WORLD_SIZE`, `LOCAL_RANK` and a shared rendezvous
//! file; rank 0 listens on 127.0.0.1 at a port the system picks and writes it there), waits
//! for them, and checks that every rank printed one device's bits (exit status 1 otherwise).
//! With `RANK` set it is one rank: under torchrun (`torchrun --nproc-per-node N
//! target/release/examples/dist_processes`), an MPI launcher (with `MASTER_ADDR` and
//! `MASTER_PORT`, or `CUFOLD_RENDEZVOUS_FILE`) or its own launcher.
//!
//! Each rank holds its share of the global array (`ChunkLayout::new`: with the default
//! length, 2^20 + 3, over 4 ranks about 2^18 elements each). Without `--gpu` the
//! ranks are `CpuRank`s talking over TCP (`TcpGroup`); with `--gpu` (cufold's `nccl`
//! feature) rank r takes GPU `LOCAL_RANK` and an `NcclGroup` whose id rank 0 sends over the
//! same rendezvous, and the reference is one GPU's.
//!
//! ```text
//! cargo run --example dist_processes -- --ranks 3
//! cargo run --release --features nccl --example dist_processes -- --ranks 2 --gpu
//! ```

use clap::Parser;
use cufold::dist::{ChunkLayout, CpuRank, Launch, TcpGroup};
use cufold::monte_carlo::MonteCarlo;
use cufold::ops::{Identity, Sum};
use cufold::{Cpu, ScanKind};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/children.rs"]
mod children;
use children::Children;

#[derive(Parser, Debug, Clone)]
#[command(about = "Reduce, scan and Monte Carlo over processes, with one device's bits")]
struct Args {
    /// Processes to start (ignored by a rank: WORLD_SIZE says).
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    /// Elements of the global array and samples of the estimate.
    #[arg(long, default_value_t = (1 << 20) + 3)]
    len: u64,
    /// One GPU per process (LOCAL_RANK) and NCCL between them (cufold's `nccl` feature).
    #[arg(long)]
    gpu: bool,
    /// Seconds any wait may last.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

/// The global array: every rank makes its own chunk of it.
fn element(i: u64) -> f32 {
    ((i.wrapping_mul(2_654_435_761) % 2001) as f32 - 1000.0) / 7.0
}

fn mc() -> MonteCarlo<f32, Identity> {
    MonteCarlo::<f32, _>::new(Identity).seed(7)
}

/// What a rank prints, and the reference prints the same way.
struct Line {
    sum: f32,
    scan_last: Option<f32>,
    mc_mean: f64,
}

impl Line {
    fn print(&self, rank: usize, holds: u64) {
        println!(
            "RESULT rank={rank} holds={holds} sum={:08x} scan_last={} mc={:016x}",
            self.sum.to_bits(),
            self.scan_last
                .map_or("-".into(), |v| format!("{:08x}", v.to_bits())),
            self.mc_mean.to_bits()
        );
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let args = Args::parse();
    if std::env::var_os("RANK").is_some() {
        rank(&args)
    } else {
        launch(&args)
    }
}

/// One rank of the job.
fn rank(args: &Args) -> Res<()> {
    let launch = Launch::from_env()?.with_timeout(Duration::from_secs(args.timeout));
    let tcp = TcpGroup::join(&launch)?;
    let layout = ChunkLayout::new(args.len, launch.ranks)?;
    let r = layout.range(launch.rank);
    let mine: Vec<f32> = (r.start..r.end).map(element).collect();
    let line = if args.gpu {
        gpu_rank(args, &launch, tcp, &layout, &mine)?
    } else {
        let rank = CpuRank::new(Cpu::new(), tcp);
        let sum = rank.all_reduce(&layout, &mine, Sum)?;
        let scan = rank.scan(&layout, &mine, Sum, ScanKind::Inclusive)?;
        let est = rank.monte_carlo(&layout, &mc())?;
        Line {
            sum,
            scan_last: scan.last().copied(),
            mc_mean: est.mean,
        }
    };
    line.print(launch.rank, r.end - r.start);
    Ok(())
}

#[cfg(feature = "nccl")]
fn gpu_rank(
    args: &Args,
    launch: &Launch,
    tcp: TcpGroup,
    layout: &ChunkLayout,
    mine: &[f32],
) -> Res<Line> {
    use cufold::dist::{GpuRank, NcclGroup};
    let gpu = cufold::Gpu::open(launch.local_rank)?;
    let nccl = NcclGroup::join(gpu.stream(), &tcp, Duration::from_secs(args.timeout))?;
    drop(tcp);
    let stream = gpu.stream().clone();
    let x = if mine.is_empty() {
        stream.alloc_zeros::<f32>(0)?
    } else {
        stream.clone_htod(mine)?
    };
    let rank = GpuRank::new(gpu, nccl);
    let sum = rank.all_reduce(layout, &x, Sum)?;
    let y = stream.clone_dtoh(&rank.scan(layout, &x, Sum, ScanKind::Inclusive)?)?;
    let est = rank.monte_carlo(layout, &mc())?;
    Ok(Line {
        sum,
        scan_last: y.last().copied(),
        mc_mean: est.mean,
    })
}

#[cfg(not(feature = "nccl"))]
fn gpu_rank(_: &Args, _: &Launch, _: TcpGroup, _: &ChunkLayout, _: &[f32]) -> Res<Line> {
    Err(
        "--gpu needs cufold's nccl feature: cargo run --features nccl --example dist_processes"
            .into(),
    )
}

/// One device's answer over the whole array.
fn reference(args: &Args) -> Res<Line> {
    let x: Vec<f32> = (0..args.len).map(element).collect();
    if args.gpu {
        let gpu = cufold::Gpu::open(0)?;
        let scan = gpu.scan_host(&x, Sum, ScanKind::Inclusive)?;
        return Ok(Line {
            sum: gpu.reduce_host(&x, Sum)?,
            scan_last: scan.last().copied(),
            mc_mean: gpu.monte_carlo(&mc(), args.len)?.mean,
        });
    }
    let cpu = Cpu::new();
    let scan = cpu.scan(&x, Sum, ScanKind::Inclusive)?;
    Ok(Line {
        sum: cpu.reduce(&x, Sum)?,
        scan_last: scan.last().copied(),
        mc_mean: cpu.monte_carlo(&mc(), args.len)?.mean,
    })
}

/// The launcher: starts the ranks, waits for them (killing any past the time limit) and
/// checks what they printed.
fn launch(args: &Args) -> Res<()> {
    let n = args.ranks;
    if n == 0 {
        return Err("--ranks must be at least 1".into());
    }
    if args.gpu && !cfg!(feature = "nccl") {
        return Err("--gpu needs cufold's nccl feature: add --features nccl".into());
    }
    if args.gpu {
        // One GPU per rank: NCCL refuses two ranks of one group on one device.
        let gpus = cufold::Gpu::device_count()?;
        if gpus < n {
            return Err(
                format!("--gpu gives each rank a GPU: {n} ranks, {gpus} GPU(s) here").into(),
            );
        }
    }
    let want = reference(args)?;
    println!(
        "one device: sum {} scan[last] {} estimate {}",
        want.sum,
        want.scan_last.unwrap_or(f32::NAN),
        want.mc_mean
    );
    let dir = std::env::temp_dir().join(format!("cufold-dist-processes-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("rendezvous");
    let mut children = Children(Vec::new());
    for r in 0..n {
        let child = Command::new(std::env::current_exe()?)
            .args(std::env::args_os().skip(1))
            .env("RANK", r.to_string())
            .env("WORLD_SIZE", n.to_string())
            .env("LOCAL_RANK", r.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("CUFOLD_RENDEZVOUS_FILE", &file)
            .stdout(Stdio::piped())
            .spawn()?;
        children.0.push(child);
    }
    // Every wait of a rank is bounded by the time limit; the job by a few of them.
    let deadline = Instant::now() + Duration::from_secs(3 * args.timeout + 30);
    let mut ok = true;
    let mut last_scan = None;
    let layout = ChunkLayout::new(args.len, n)?;
    for r in 0..n {
        let (status, out) = children.finish(r, deadline)?;
        let line = out.lines().find(|l| l.starts_with("RESULT ")).unwrap_or("");
        println!(
            "rank {r}: {}",
            if line.is_empty() { "no result" } else { line }
        );
        if !status.success() || line.is_empty() {
            eprintln!("rank {r} failed ({status})");
            ok = false;
            continue;
        }
        let field = |k: &str| {
            line.split(' ')
                .find_map(|f| f.strip_prefix(k))
                .unwrap_or("")
                .to_string()
        };
        let same = field("sum=") == format!("{:08x}", want.sum.to_bits())
            && field("mc=") == format!("{:016x}", want.mc_mean.to_bits());
        if !same {
            eprintln!("rank {r}: not one device's bits");
            ok = false;
        }
        if layout.range(r).end == args.len && layout.range(r).start < args.len {
            last_scan = Some(field("scan_last="));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let want_last = want.scan_last.map(|v| format!("{:08x}", v.to_bits()));
    if args.len > 0 && last_scan != want_last {
        eprintln!("the scan's last value is not one device's: {last_scan:?} against {want_last:?}");
        ok = false;
    }
    if !ok {
        std::process::exit(1);
    }
    println!("{n} processes: one device's bits for the reduce, the scan and the estimate");
    Ok(())
}
