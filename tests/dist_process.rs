//! One process per rank on the CPU: ranks found through the launcher's environment (`RANK`,
//! `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`) or a shared file, exchanging over TCP on the
//! loopback address (`TcpGroup`). This test binary is its own worker: run with
//! `CUFOLD_DIST_WORKER` set, its `worker` test acts as one rank. Every process must get one
//! device's bits; a rank killed mid-call, a rank that never joins and ranks that call with
//! other arguments must give every surviving rank an error within its time limit; every child
//! is reaped.

use cufold::dist::{ChunkLayout, Collective, CpuRank, Launch, TcpGroup};
use cufold::monte_carlo::MonteCarlo;
use cufold::ops::{Identity, Max, Sum};
use cufold::{Cpu, ScanKind};
#[path = "dist_process/job.rs"]
mod job;
use job::Job;
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The variable that makes this binary a worker, and its mode.
const WORKER: &str = "CUFOLD_DIST_WORKER";
/// Elements of the global array: in the smallest chunks over 4 ranks (2^15), rank 2 holds
/// 3 elements and rank 3 none; over 3, rank 2 holds 3. Balanced, every rank holds about
/// N / ranks, in several pieces.
const N: u64 = (1 << 16) + 3;

/// The layouts each rank's calls take: the smallest chunks, then the balanced layout.
fn layouts(ranks: usize) -> Result<[ChunkLayout; 2], String> {
    let chunk = N.div_ceil(ranks as u64).next_power_of_two();
    let chunks = ChunkLayout::with_chunk(N, ranks, chunk).map_err(|e| e.to_string())?;
    let balanced = ChunkLayout::new(N, ranks).map_err(|e| e.to_string())?;
    Ok([chunks, balanced])
}

fn global() -> Vec<f32> {
    (0..N)
        .map(|i| ((i.wrapping_mul(2_654_435_761) % 2001) as f32 - 1000.0) / 7.0)
        .collect()
}

fn mc() -> MonteCarlo<f32, Identity> {
    MonteCarlo::<f32, _>::new(Identity).seed(2024)
}

/// One rank's calls (a reduce, a reduce to the last rank, an inclusive scan, a Monte Carlo
/// estimate) in both layouts, each checked here against one device's bits; the line it
/// prints: the chunks' results, and what the rank holds in the balanced layout.
fn calls<C: Collective>(rank: &CpuRank<C>) -> Result<String, String> {
    let [chunks, balanced] = layouts(rank.ranks())?;
    let line = calls_in(rank, &chunks)?;
    calls_in(rank, &balanced)?;
    let r = balanced.range(rank.rank());
    Ok(format!("{line} balanced={}", r.end - r.start))
}

/// [`calls`] in one layout.
fn calls_in<C: Collective>(rank: &CpuRank<C>, layout: &ChunkLayout) -> Result<String, String> {
    let x = global();
    let layout = *layout;
    let r = layout.range(rank.rank());
    let mine = &x[r.start as usize..r.end as usize];
    let sum = rank
        .all_reduce(&layout, mine, Sum)
        .map_err(|e| e.to_string())?;
    let root = rank
        .reduce(rank.ranks() - 1, &layout, mine, Sum)
        .map_err(|e| e.to_string())?;
    let scan = rank
        .scan(&layout, mine, Sum, ScanKind::Inclusive)
        .map_err(|e| e.to_string())?;
    let est = rank
        .monte_carlo(&layout, &mc())
        .map_err(|e| e.to_string())?;
    let one = Cpu::new();
    let want_sum = one.reduce(&x, Sum).unwrap();
    let want_scan = one.scan(&x, Sum, ScanKind::Inclusive).unwrap();
    let want_mc = one.monte_carlo(&mc(), N).unwrap();
    let me = rank.rank();
    assert_eq!(sum.to_bits(), want_sum.to_bits(), "rank {me}'s sum");
    assert_eq!(root.is_some(), me == rank.ranks() - 1);
    if let Some(v) = root {
        assert_eq!(v.to_bits(), want_sum.to_bits(), "rank {me}'s root reduce");
    }
    let want_part = &want_scan[r.start as usize..r.end as usize];
    assert!(
        scan.iter()
            .zip(want_part)
            .all(|(a, b)| a.to_bits() == b.to_bits())
            && scan.len() == want_part.len(),
        "rank {me}'s scan"
    );
    assert_eq!(
        (est.mean.to_bits(), est.m2.to_bits()),
        (want_mc.mean.to_bits(), want_mc.m2.to_bits()),
        "rank {me}'s estimate"
    );
    Ok(format!(
        "RESULT rank={me} holds={} sum={:08x} scan_last={} mc={:016x}",
        mine.len(),
        sum.to_bits(),
        scan.last()
            .map_or("-".into(), |v| format!("{:08x}", v.to_bits())),
        est.mean.to_bits()
    ))
}

/// Calls with other arguments on rank 1: another operator, another length; both errors
/// everywhere, and the group works after them.
fn mismatched<C: Collective>(rank: &CpuRank<C>) -> Result<(), String> {
    let x = global();
    let layout = layouts(rank.ranks())?[0];
    let r = layout.range(rank.rank());
    let mine = &x[r.start as usize..r.end as usize];
    let odd = rank.rank() == 1;
    let e = if odd {
        rank.all_reduce(&layout, mine, Max)
    } else {
        rank.all_reduce(&layout, mine, Sum)
    }
    .expect_err("ranks with other operators");
    if !e.to_string().contains("disagree on the operator") {
        return Err(format!("another operator: {e}"));
    }
    let longer = ChunkLayout::new(N + 1, rank.ranks()).unwrap();
    let e = rank
        .all_reduce(if odd { &longer } else { &layout }, mine, Sum)
        .expect_err("ranks with other lengths");
    if !e.to_string().contains("disagree on the global length") {
        return Err(format!("another length: {e}"));
    }
    let e = rank
        .scan(
            &layout,
            mine,
            Sum,
            if odd {
                ScanKind::Exclusive
            } else {
                ScanKind::Inclusive
            },
        )
        .expect_err("ranks with other calls");
    if !e.to_string().contains("disagree on the call") {
        return Err(format!("another call: {e}"));
    }
    calls(rank).map(|_| ())
}

/// The worker: one rank of a job, from the environment; what it does is the mode.
#[test]
fn worker() {
    let Ok(mode) = std::env::var(WORKER) else {
        return; // a plain test run
    };
    println!(); // after libtest's "test worker ... ", so that each line is ours
    let launch = Launch::from_env().expect("a launch in the environment");
    let t = Instant::now();
    let group = match TcpGroup::join(&launch) {
        Ok(g) => g,
        Err(e) => {
            println!("ERR ms={} {e}", t.elapsed().as_millis());
            std::process::exit(3);
        }
    };
    let rank = CpuRank::new(Cpu::with_threads(1), group);
    match mode.as_str() {
        "calls" => match calls(&rank) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                println!("ERR ms={} {e}", t.elapsed().as_millis());
                std::process::exit(3);
            }
        },
        "mismatch" => {
            if let Err(e) = mismatched(&rank) {
                println!("ERR {e}");
                std::process::exit(3);
            }
            println!("OK");
        }
        // One call, then wait in the next one's place, to be killed or to be late.
        "hang" => {
            calls(&rank).unwrap();
            println!("READY");
            std::thread::sleep(Duration::from_secs(120));
        }
        // One call, then one that must fail (another rank dies or hangs): how fast.
        "survivor" => {
            calls(&rank).unwrap();
            let t = Instant::now();
            match calls(&rank) {
                Ok(_) => {
                    println!("UNEXPECTED success");
                    std::process::exit(4);
                }
                Err(e) => println!("ERR ms={} {e}", t.elapsed().as_millis()),
            }
        }
        m => panic!("no worker mode {m}"),
    }
    std::process::exit(0);
}

/// How a rank meets the others.
enum Meet<'a> {
    /// MASTER_ADDR and MASTER_PORT.
    Port(u16),
    /// CUFOLD_RENDEZVOUS_FILE.
    File(&'a std::path::Path),
}

/// Starts rank `rank` of `ranks` as a process of this binary in `mode`.
fn spawn(job: &mut Job, rank: usize, ranks: usize, mode: &str, meet: &Meet, timeout_s: u64) {
    let mut cmd = job::worker(WORKER, mode, rank, ranks, timeout_s);
    cmd.arg("--test-threads=1").stderr(Stdio::inherit());
    match meet {
        Meet::Port(p) => {
            cmd.env("MASTER_PORT", p.to_string())
                .env_remove("CUFOLD_RENDEZVOUS_FILE");
        }
        Meet::File(path) => {
            cmd.env("CUFOLD_RENDEZVOUS_FILE", path)
                .env_remove("MASTER_PORT");
        }
    }
    job.start(&mut cmd);
}

/// The result line a rank printed.
fn result_line(out: &str) -> &str {
    out.lines()
        .find(|l| l.starts_with("RESULT ") || l.starts_with("ERR ") || l == &"OK")
        .unwrap_or_else(|| panic!("no result in {out:?}"))
}

fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

/// A new path for a rendezvous file.
fn rendezvous_file(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cufold-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("rendezvous")
}

/// Ranks found through the launcher's variables: this process is rank 0 (its listener on
/// port 0), the others are children given MASTER_ADDR and MASTER_PORT; every rank gets one
/// device's bits, empty and short chunks included.
#[test]
fn processes_found_by_the_environment_get_one_devices_bits() {
    for ranks in [3, 4, 5] {
        let (l, port) = listener();
        let mut job = Job::default();
        for r in 1..ranks {
            spawn(&mut job, r, ranks, "calls", &Meet::Port(port), 20);
        }
        let group = TcpGroup::with_listener(l, ranks, Duration::from_secs(20)).unwrap();
        let mine = calls(&CpuRank::new(Cpu::new(), group)).unwrap();
        let mut lines = vec![mine];
        for i in 0..ranks - 1 {
            let (status, out, _) = job.finish(i, Duration::from_secs(60));
            assert!(status.success(), "rank {}: {status}: {out}", i + 1);
            lines.push(result_line(&out).to_string());
        }
        // The same sum and estimate on every rank.
        let tail = |l: &str| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[3].to_string(), f[5].to_string())
        };
        assert!(
            lines.iter().all(|l| tail(l) == tail(&lines[0])),
            "{lines:#?}"
        );
        if ranks == 4 {
            // A short chunk and an empty one took part.
            assert!(
                lines[2].contains("holds=3 ") && lines[3].contains("holds=0 "),
                "{lines:#?}"
            );
        }
        // Balanced, every rank held its share: within 1% of N / ranks.
        for l in &lines {
            let held: f64 = l.rsplit("balanced=").next().unwrap().parse().unwrap();
            let fair = N as f64 / ranks as f64;
            assert!((held - fair).abs() <= fair / 100.0, "{lines:#?}");
        }
    }
}

/// Every rank a child, meeting through a shared file (rank 0 publishes its port there).
#[test]
fn processes_meet_through_a_shared_file() {
    let path = rendezvous_file("file");
    let mut job = Job::default();
    for r in 0..3 {
        spawn(&mut job, r, 3, "calls", &Meet::File(&path), 20);
    }
    let mut lines = Vec::new();
    for i in 0..3 {
        let (status, out, _) = job.finish(i, Duration::from_secs(60));
        assert!(status.success(), "rank {i}: {status}: {out}");
        lines.push(result_line(&out).to_string());
    }
    assert!(lines[2].contains("holds=3 "), "{lines:#?}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// A rank killed (SIGKILL) while the others are in a call: each survivor gets an error at
/// once, long before its time limit, naming the rank; likewise when rank 0 is the one killed.
#[test]
fn a_killed_rank_is_an_error_on_every_survivor_at_once() {
    let limit = 30; // seconds: the survivors must not need it
                    // Rank 2 killed; this process is rank 0.
    let (l, port) = listener();
    let mut job = Job::default();
    spawn(&mut job, 1, 3, "survivor", &Meet::Port(port), limit);
    spawn(&mut job, 2, 3, "hang", &Meet::Port(port), limit);
    let group = TcpGroup::with_listener(l, 3, Duration::from_secs(limit)).unwrap();
    let rank = CpuRank::new(Cpu::new(), group);
    calls(&rank).unwrap();
    job.wait_for_line(1, "READY");
    let t = Instant::now();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300)); // rank 0 and 1 wait in the call
        job.child(1).kill().unwrap();
        job
    });
    let e = calls(&rank).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(e.contains("rank 2") && e.contains("closed"), "{e}");
    assert!(rank.collective().is_dead());
    let mut job = killer.join().unwrap();
    let (status, out, _) = job.finish(0, Duration::from_secs(10));
    assert!(status.success(), "{status}: {out}");
    let line = result_line(&out);
    assert!(line.starts_with("ERR ") && line.contains("rank 2"), "{out}");
    let (status, _, _) = job.finish(1, Duration::from_secs(10));
    assert!(!status.success(), "killed: {status}");

    // Rank 0 killed: ranks 1 and 2 see its connection close.
    let path = rendezvous_file("kill0");
    let mut job = Job::default();
    spawn(&mut job, 0, 3, "hang", &Meet::File(&path), limit);
    spawn(&mut job, 1, 3, "survivor", &Meet::File(&path), limit);
    spawn(&mut job, 2, 3, "survivor", &Meet::File(&path), limit);
    job.wait_for_line(0, "READY");
    std::thread::sleep(Duration::from_millis(300));
    job.child(0).kill().unwrap();
    for i in [1, 2] {
        let (status, out, took) = job.finish(i, Duration::from_secs(10));
        assert!(status.success(), "{status}: {out}");
        let line = result_line(&out);
        assert!(line.starts_with("ERR ") && line.contains("rank 0"), "{out}");
        assert!(took < Duration::from_secs(10));
    }
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// A rank that never starts, and one that joins but never makes its call: the others get an
/// error naming it within their time limit (a little past it for the ranks that wait for
/// rank 0's verdict).
#[test]
fn a_rank_that_never_comes_is_an_error_within_the_time_limit() {
    let limit = Duration::from_secs(2);
    // Never starts.
    let (l, port) = listener();
    let mut job = Job::default();
    spawn(&mut job, 1, 3, "calls", &Meet::Port(port), 2);
    let t = Instant::now();
    let e = TcpGroup::with_listener(l, 3, limit).unwrap_err();
    assert!(t.elapsed() < limit + Duration::from_secs(2));
    assert!(e.to_string().contains("(rank 2)"), "{e}");
    let (status, out, _) = job.finish(0, Duration::from_secs(10));
    assert_eq!(status.code(), Some(3), "{out}");
    assert!(result_line(&out).contains("(rank 2)"), "{out}");

    // Joins, then never calls.
    let (l, port) = listener();
    let mut job = Job::default();
    spawn(&mut job, 1, 3, "survivor", &Meet::Port(port), 2);
    spawn(&mut job, 2, 3, "hang", &Meet::Port(port), 2);
    let rank = CpuRank::new(Cpu::new(), TcpGroup::with_listener(l, 3, limit).unwrap());
    calls(&rank).unwrap();
    let t = Instant::now();
    let e = calls(&rank).unwrap_err();
    assert!(
        t.elapsed() < limit + Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    assert!(
        e.contains("did not join a collective call") && e.contains("(rank 2)"),
        "{e}"
    );
    let (status, out, _) = job.finish(0, Duration::from_secs(10));
    assert!(status.success(), "{status}: {out}");
    assert!(result_line(&out).contains("(rank 2)"), "{out}");
}

/// Ranks that call with other arguments (operator, length, kind of scan): an error on every
/// rank, and the group works after it.
#[test]
fn ranks_that_call_with_other_arguments_are_errors_everywhere() {
    let (l, port) = listener();
    let mut job = Job::default();
    for r in 1..3 {
        spawn(&mut job, r, 3, "mismatch", &Meet::Port(port), 20);
    }
    let group = TcpGroup::with_listener(l, 3, Duration::from_secs(20)).unwrap();
    mismatched(&CpuRank::new(Cpu::new(), group)).unwrap();
    for i in 0..2 {
        let (status, out, _) = job.finish(i, Duration::from_secs(60));
        assert!(status.success(), "rank {}: {status}: {out}", i + 1);
        assert_eq!(result_line(&out), "OK");
    }
}
