//! One process per GPU through NCCL (cufold's `nccl` feature): this process is rank 0, the
//! others are children of this test binary (its `worker` test, run with
//! `CUFOLD_DIST_GPU_WORKER` set), rank r on GPU r; the NCCL id travels over a `TcpGroup` on
//! the loopback address. Every rank must get one GPU's bits; a rank killed mid-call, a rank
//! that never joins NCCL and ranks that call with other arguments must be errors within the
//! time limit, never hangs, and rank 0 must be able to build a new group afterwards. They
//! need two GPUs or more (they say so and pass on fewer), so they are ignored by a plain
//! `cargo test`: `cargo test --features nccl --test dist_process_gpu -- --include-ignored`.
#![cfg(feature = "nccl")]

use cufold::dist::{ChunkLayout, Collective, GpuRank, Launch, NcclGroup, TcpGroup};
use cufold::monte_carlo::MonteCarlo;
use cufold::ops::{Identity, Max, Sum};
use cufold::{Gpu, ScanKind};
#[path = "dist_process/job.rs"]
mod job;
use job::Job;
use std::net::TcpListener;
use std::time::{Duration, Instant};

const WORKER: &str = "CUFOLD_DIST_GPU_WORKER";
/// In the smallest chunks over 4 ranks (2^19), rank 2 holds 3 elements and rank 3 none;
/// balanced, every rank about N / ranks, in several pieces.
const N: u64 = (1 << 20) + 3;
/// The NCCL group's time limit.
const LIMIT: Duration = Duration::from_secs(15);

fn global() -> Vec<f32> {
    (0..N)
        .map(|i| ((i.wrapping_mul(2_654_435_761) % 2001) as f32 - 1000.0) / 7.0)
        .collect()
}

fn mc() -> MonteCarlo<f32, Identity> {
    MonteCarlo::<f32, _>::new(Identity).seed(5)
}

/// A reduce, an inclusive scan and a Monte Carlo estimate on this rank, in the smallest
/// chunks and in the balanced layout, checked against one GPU's bits (this rank's GPU over
/// the whole array).
fn calls(rank: &GpuRank<NcclGroup>) -> Result<String, String> {
    let chunk = N.div_ceil(rank.ranks() as u64).next_power_of_two();
    let chunks = ChunkLayout::with_chunk(N, rank.ranks(), chunk).unwrap();
    let line = calls_in(rank, &chunks)?;
    let balanced = ChunkLayout::new(N, rank.ranks()).unwrap();
    calls_in(rank, &balanced)?;
    Ok(line)
}

/// [`calls`] in one layout.
fn calls_in(rank: &GpuRank<NcclGroup>, layout: &ChunkLayout) -> Result<String, String> {
    let x = global();
    let layout = *layout;
    let r = layout.range(rank.rank());
    let stream = rank.gpu().stream().clone();
    let mine = if r.is_empty() {
        stream.alloc_zeros::<f32>(0).unwrap()
    } else {
        stream
            .clone_htod(&x[r.start as usize..r.end as usize])
            .unwrap()
    };
    let e = |e: cufold::Error| e.to_string();
    let sum = rank.all_reduce(&layout, &mine, Sum).map_err(e)?;
    let y = rank
        .scan(&layout, &mine, Sum, ScanKind::Inclusive)
        .map_err(e)?;
    let y = stream.clone_dtoh(&y).unwrap();
    let est = rank.monte_carlo(&layout, &mc()).map_err(e)?;
    let one = rank.gpu();
    let want_sum = one.reduce_host(&x, Sum).unwrap();
    let want_scan = one.scan_host(&x, Sum, ScanKind::Inclusive).unwrap();
    let want_mc = one.monte_carlo(&mc(), N).unwrap();
    assert_eq!(sum.to_bits(), want_sum.to_bits());
    let part = &want_scan[r.start as usize..r.end as usize];
    assert!(y.len() == part.len() && y.iter().zip(part).all(|(a, b)| a.to_bits() == b.to_bits()));
    assert_eq!(
        (est.mean.to_bits(), est.m2.to_bits()),
        (want_mc.mean.to_bits(), want_mc.m2.to_bits())
    );
    Ok(format!(
        "RESULT rank={} holds={} sum={:08x}",
        rank.rank(),
        y.len(),
        sum.to_bits()
    ))
}

/// Rank 1 reduces with another operator: an error on every rank, and the group works after.
fn mismatched(rank: &GpuRank<NcclGroup>) -> Result<(), String> {
    let layout = ChunkLayout::new(N, rank.ranks()).unwrap();
    let r = layout.range(rank.rank());
    let x = global();
    let stream = rank.gpu().stream();
    let mine = if r.is_empty() {
        stream.alloc_zeros::<f32>(0).unwrap()
    } else {
        stream
            .clone_htod(&x[r.start as usize..r.end as usize])
            .unwrap()
    };
    let e = if rank.rank() == 1 {
        rank.all_reduce(&layout, &mine, Max)
    } else {
        rank.all_reduce(&layout, &mine, Sum)
    }
    .expect_err("ranks with other operators");
    if !e.to_string().contains("operator") {
        return Err(e.to_string());
    }
    calls(rank).map(|_| ())
}

#[test]
#[ignore = "needs a CUDA device"]
fn worker() {
    let Ok(mode) = std::env::var(WORKER) else {
        return;
    };
    println!();
    let launch = Launch::from_env().unwrap();
    let tcp = TcpGroup::join(&launch).unwrap();
    if mode == "never" {
        // Joins the rendezvous, takes the id, never joins NCCL.
        let _ = cufold::dist::NcclId::share(&tcp).unwrap();
        println!("READY");
        std::thread::sleep(Duration::from_secs(120));
    }
    let gpu = Gpu::open(launch.local_rank).unwrap();
    let nccl = NcclGroup::join(gpu.stream(), &tcp, LIMIT).unwrap();
    let rank = GpuRank::new(gpu, nccl);
    match mode.as_str() {
        "calls" => println!("{}", calls(&rank).unwrap()),
        "mismatch" => {
            mismatched(&rank).unwrap();
            println!("OK");
        }
        "hang" => {
            calls(&rank).unwrap();
            println!("READY");
            std::thread::sleep(Duration::from_secs(120));
        }
        m => panic!("no mode {m}"),
    }
    std::process::exit(0);
}

/// Starts rank `rank` of `ranks` as a process of this binary in `mode`, meeting the others
/// at `port`.
fn spawn(job: &mut Job, rank: usize, ranks: usize, mode: &str, port: u16) {
    let mut cmd = job::worker(WORKER, mode, rank, ranks, 60);
    cmd.arg("--include-ignored")
        .env("MASTER_PORT", port.to_string())
        .env_remove("CUFOLD_RENDEZVOUS_FILE");
    job.start(&mut cmd);
}

/// The machine's GPUs, or `None` (and a message) with fewer than two.
fn gpus() -> Option<usize> {
    let n = Gpu::device_count().expect("a CUDA device");
    if n < 2 {
        eprintln!("skipped: NCCL between processes needs 2 GPUs or more, this machine has {n}");
        return None;
    }
    Some(n)
}

/// Rank 0 (this process) of a job of `ranks`, its other ranks started in `mode`.
fn rank_0(ranks: usize, mode: &str) -> (Job, GpuRank<NcclGroup>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut job = Job::default();
    for r in 1..ranks {
        spawn(&mut job, r, ranks, mode, port);
    }
    let tcp = TcpGroup::with_listener(l, ranks, Duration::from_secs(60)).unwrap();
    let gpu = Gpu::open(0).unwrap();
    let nccl = NcclGroup::join(gpu.stream(), &tcp, LIMIT).unwrap();
    (job, GpuRank::new(gpu, nccl))
}

#[test]
#[ignore = "needs a CUDA device"]
fn nccl_between_processes_has_one_gpus_bits() {
    let Some(devices) = gpus() else { return };
    for ranks in [2, devices.min(4)] {
        let (mut job, rank) = rank_0(ranks, "calls");
        let mut lines = vec![calls(&rank).unwrap()];
        for i in 0..ranks - 1 {
            let (status, out, _) = job.finish(i, Duration::from_secs(120));
            assert!(status.success(), "rank {}: {status}: {out}", i + 1);
            lines.push(
                out.lines()
                    .find(|l| l.starts_with("RESULT"))
                    .unwrap()
                    .into(),
            );
        }
        eprintln!(
            "{ranks} processes on {}: {lines:#?}",
            rank.gpu().device_name()
        );
    }
}

/// A rank killed while rank 0 waits in a call: rank 0's call is an error within the time
/// limit, its group is dead, dropping it does not hang, and a new group works.
#[test]
#[ignore = "needs a CUDA device"]
fn a_killed_process_is_an_error_and_a_new_group_works() {
    if gpus().is_none() {
        return;
    }
    let (mut job, rank) = rank_0(2, "hang");
    calls(&rank).unwrap();
    job.wait_for_line(0, "READY");
    let mut job = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        job.child(0).kill().unwrap();
        job
    })
    .join()
    .unwrap();
    let t = Instant::now();
    let e = calls(&rank).unwrap_err();
    assert!(
        t.elapsed() < LIMIT + Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
    eprintln!("after {:?}: {e}", t.elapsed());
    assert!(rank.collective().is_dead());
    let t = Instant::now();
    drop(rank);
    assert!(
        t.elapsed() < LIMIT + Duration::from_secs(5),
        "drop took {:?}",
        t.elapsed()
    );
    let _ = job.finish(0, Duration::from_secs(10));
    // A new group of the ranks that go on (this one) works.
    let (_job, rank) = rank_0(1, "calls");
    calls(&rank).unwrap();
}

/// A rank that takes the id and never joins NCCL: rank 0's join is an error within its limit.
#[test]
#[ignore = "needs a CUDA device"]
fn a_rank_that_never_joins_nccl_is_an_error() {
    if gpus().is_none() {
        return;
    }
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut job = Job::default();
    spawn(&mut job, 1, 2, "never", port);
    let tcp = TcpGroup::with_listener(l, 2, Duration::from_secs(60)).unwrap();
    let gpu = Gpu::open(0).unwrap();
    let t = Instant::now();
    let e = NcclGroup::join(gpu.stream(), &tcp, Duration::from_secs(5)).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    eprintln!("after {:?}: {e}", t.elapsed());
    drop(job);
}

#[test]
#[ignore = "needs a CUDA device"]
fn processes_that_call_with_other_arguments_get_errors() {
    if gpus().is_none() {
        return;
    }
    let (mut job, rank) = rank_0(2, "mismatch");
    mismatched(&rank).unwrap();
    let (status, out, _) = job.finish(0, Duration::from_secs(120));
    assert!(status.success(), "{status}: {out}");
}

/// A job of one process (any machine with a GPU): the non-blocking NCCL communicator of
/// `NcclGroup::join`, its exchanges and its teardown.
#[test]
#[ignore = "needs a CUDA device"]
fn a_job_of_one_process_has_one_gpus_bits() {
    let (_job, rank) = rank_0(1, "calls");
    eprintln!("{}", calls(&rank).unwrap());
    // A rank alone makes no exchange in its calls: one of the group's own.
    assert_eq!(rank.collective().all_gather(b"alone").unwrap(), b"alone");
    let t = Instant::now();
    drop(rank);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "drop took {:?}",
        t.elapsed()
    );
}
