//! Distributed reductions and scans (`dist::GpuRank`) against one GPU's: the sum and the
//! inclusive sum scan of f32 arrays spread over k ranks, one thread each, rank r on device
//! r mod (the machine's devices), each rank on its own stream. On a machine with one GPU the
//! ranks share it, so this measures what the distributed form costs over the plain call
//! (the exchange, the extra pass of a scan's node), not a speed-up.
//!
//! ```text
//! cargo bench --bench gpu_dist -- [--log2 26,28,30] [--ranks 1,2,4] [--reps 10] [--json OUT.json]
//! ```
//!
//! Times are host-clock medians of whole calls, from a barrier before the call on every rank
//! to the last rank's stream finished (the distributed calls wait for their nodes anyway);
//! the one-GPU rows time `Reducer::reduce` (which waits) and `Scanner::inclusive` followed
//! by a stream synchronisation. Every distributed result is checked against one GPU's bits.

use clap::Parser;
use cufold::dist::{ChunkLayout, Collective, GpuRank, LocalGroup};
use cufold::ops::Sum;
use cufold::{Gpu, ScanKind};
use std::sync::Barrier;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

#[derive(Parser, Debug)]
#[command(about = "Distributed sum and scan (GpuRank) against one GPU")]
struct Args {
    /// log2 of the global array's length.
    #[arg(long, value_delimiter = ',', default_values_t = vec![26, 28, 30])]
    log2: Vec<u32>,
    /// Numbers of ranks.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1, 2, 4])]
    ranks: Vec<usize>,
    /// Timed repetitions (after one warm-up).
    #[arg(long, default_value_t = 10)]
    reps: usize,
    #[command(flatten)]
    out: common::Output,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Row: op, log2, ranks (0 for one GPU's plain call), median ms.
type Row = (&'static str, u32, usize, f64);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let devices = Gpu::device_count()?;
    let base: Vec<Gpu> = (0..devices).map(Gpu::open).collect::<Result<_, _>>()?;
    println!(
        "{} device(s): {}; ranks on their own streams",
        devices,
        base[0].device_name()
    );
    let mut rows: Vec<Row> = Vec::new();
    for &lg in &args.log2 {
        let n = 1usize << lg;
        let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 1e-3).collect();
        // One GPU.
        let g = &base[0];
        let x = g.stream().clone_htod(&host)?;
        let reducer = g.reducer::<f32, _>(Sum)?;
        let one_sum = reducer.reduce(&x)?;
        let mut t = Vec::new();
        for _ in 0..=args.reps {
            let s = Instant::now();
            std::hint::black_box(reducer.reduce(&x)?);
            t.push(s.elapsed().as_secs_f64() * 1e3);
        }
        rows.push(("sum", lg, 0, median(t[1..].to_vec())));
        let scanner = g.scanner::<f32, _>(Sum)?;
        let mut y = g.stream().alloc_zeros::<f32>(n)?;
        let mut t = Vec::new();
        for _ in 0..=args.reps {
            let s = Instant::now();
            scanner.inclusive(&x, &mut y)?;
            g.stream().synchronize()?;
            t.push(s.elapsed().as_secs_f64() * 1e3);
        }
        rows.push(("cumsum", lg, 0, median(t[1..].to_vec())));
        let one_last = g.stream().clone_dtoh(&y.slice(n - 1..))?[0];
        drop((x, y));

        for &k in &args.ranks {
            let layout = ChunkLayout::new(n as u64, k)?;
            let barrier = Barrier::new(k);
            let results = std::thread::scope(|s| {
                let handles: Vec<_> = LocalGroup::new(k)
                    .into_iter()
                    .map(|comm| {
                        let (host, barrier, base, reps) = (&host, &barrier, &base, args.reps);
                        s.spawn(move || -> cufold::Result<(f32, f32, Vec<f64>, Vec<f64>)> {
                            let r = comm.rank();
                            let ctx = base[r % base.len()].stream().context().clone();
                            let stream = ctx.new_stream().expect("a stream");
                            let gpu = Gpu::new(&stream)?;
                            let range = layout.range(r);
                            let mine = stream
                                .clone_htod(&host[range.start as usize..range.end as usize])
                                .expect("upload");
                            let mut out = stream.alloc_zeros::<f32>(mine.len()).expect("alloc");
                            let rank = GpuRank::new(gpu, comm);
                            let (mut ts, mut tc) = (Vec::new(), Vec::new());
                            let mut sum = 0.0;
                            for _ in 0..=reps {
                                barrier.wait();
                                let s = Instant::now();
                                sum = rank.all_reduce(&layout, &mine, Sum)?;
                                barrier.wait();
                                ts.push(s.elapsed().as_secs_f64() * 1e3);
                            }
                            for _ in 0..=reps {
                                barrier.wait();
                                let s = Instant::now();
                                rank.scan_into(&layout, &mine, &mut out, Sum, ScanKind::Inclusive)?;
                                stream.synchronize().expect("sync");
                                barrier.wait();
                                tc.push(s.elapsed().as_secs_f64() * 1e3);
                            }
                            let last = if range.end == n as u64 {
                                stream
                                    .clone_dtoh(&out.slice(out.len() - 1..))
                                    .expect("download")[0]
                            } else {
                                f32::NAN
                            };
                            Ok((sum, last, ts, tc))
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap())
                    .collect::<cufold::Result<Vec<_>>>()
            })?;
            for (r, res) in results.iter().enumerate() {
                assert_eq!(res.0.to_bits(), one_sum.to_bits(), "rank {r} of {k}: sum");
                if layout.range(r).end == n as u64 && !layout.range(r).is_empty() {
                    assert_eq!(res.1.to_bits(), one_last.to_bits(), "rank {r} of {k}: scan");
                }
            }
            rows.push(("sum", lg, k, median(results[0].2[1..].to_vec())));
            rows.push(("cumsum", lg, k, median(results[0].3[1..].to_vec())));
        }
    }
    println!("| op | N | ranks | ms | GB/s (read + write for cumsum) | vs one GPU |");
    println!("|---|---|---|---|---|---|");
    for &(op, lg, k, ms) in &rows {
        let bytes = (4u64 << lg) as f64 * if op == "cumsum" { 2.0 } else { 1.0 };
        let one = rows
            .iter()
            .find(|r| r.0 == op && r.1 == lg && r.2 == 0)
            .unwrap()
            .3;
        let who = if k == 0 {
            "one GPU".to_string()
        } else {
            k.to_string()
        };
        println!(
            "| {op} | 2^{lg} | {who} | {ms:.3} | {:.0} | {:.2}x |",
            bytes / ms / 1e6,
            ms / one
        );
    }
    if let Some(path) = &args.out.json {
        let json: Vec<_> = rows
            .iter()
            .map(|&(op, lg, k, ms)| serde_json::json!({"op": op, "log2": lg, "ranks": k, "ms": ms}))
            .collect();
        std::fs::write(path, serde_json::to_string_pretty(&json)?)?;
    }
    Ok(())
}
