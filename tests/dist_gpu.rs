//! Distributed reductions and scans on GPUs (`dist::GpuRank`), one thread per rank, each rank
//! on its own stream: of its own device where the machine has several (rank r on device
//! r mod count), of device 0 otherwise (the single-GPU stand-in). Results must have one
//! GPU's bits over the global array for every number of ranks and every chunk layout, and
//! ranks that disagree or fail must give errors on every rank, never hang. They need a CUDA
//! device, so they are ignored by a plain `cargo test`; run them with `--include-ignored`.

mod common;

use common::{
    assert_ranks_agree, canonical_prefix, canonical_root, data, poison, same, seed, tiered, upload,
    FoldShape, Gen, TreeShape,
};
use cudarc::driver::CudaSlice;
#[cfg(feature = "nccl")]
use cufold::dist::NcclGroup;
use cufold::dist::{ChunkLayout, Collective, GpuRank, LocalGroup};
use cufold::monte_carlo::{Draws, MonteCarlo};
use cufold::ops::{Affine, ArgMax, Compose, Div2Mean, Identity, Max, Mean, MeanVar, Operator, Sum};
use cufold::{f16, DeviceValue, ErrorKind, Gpu, ScanKind};
use std::sync::OnceLock;

/// The most ranks a test uses.
const MAX_RANKS: usize = 8;

/// One handle per rank, each on a stream of its own, made once per test binary.
fn rank_gpus() -> &'static [Gpu] {
    static GPUS: OnceLock<Vec<Gpu>> = OnceLock::new();
    GPUS.get_or_init(|| {
        let devices = Gpu::device_count().expect("a CUDA device");
        let first: Vec<Gpu> = (0..devices.min(MAX_RANKS))
            .map(|d| Gpu::open(d).expect("a CUDA device"))
            .collect();
        eprintln!(
            "ranks on {} device(s), one stream each: {}",
            first.len(),
            first[0].device_name()
        );
        (0..MAX_RANKS)
            .map(|r| {
                let ctx = first[r % first.len()].stream().context().clone();
                Gpu::new(&ctx.new_stream().expect("a stream")).expect("a handle")
            })
            .collect()
    })
}

/// The whole array on device 0's first rank handle: one GPU's reference.
fn one_gpu() -> &'static Gpu {
    &rank_gpus()[0]
}

/// Runs `f` on every rank of a new group of `layout.ranks()`, each on its own thread with
/// its chunk of `x` on its GPU; returns the ranks' results in rank order.
fn on_ranks<T: DeviceValue + Sync, R: Send>(
    layout: ChunkLayout,
    x: &[T],
    f: impl Fn(&GpuRank<LocalGroup>, &CudaSlice<T>) -> R + Sync,
) -> Vec<R> {
    std::thread::scope(|s| {
        let handles: Vec<_> = LocalGroup::new(layout.ranks())
            .into_iter()
            .map(|comm| {
                let f = &f;
                s.spawn(move || {
                    let gpu = rank_gpus()[comm.rank()].clone();
                    let r = layout.range(comm.rank());
                    let mine = upload(&gpu, &x[r.start as usize..r.end as usize]);
                    let rank = GpuRank::new(gpu, comm);
                    f(&rank, &mine)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The layouts worth trying for `n` elements over 1, 2, 3, 4, 5 and 8 ranks: the balanced
/// one, a balanced one of grains of 4 (shares of many pieces), the smallest chunk and a
/// chunk 4 times larger (the last ranks hold nothing).
fn layouts(n: u64) -> Vec<ChunkLayout> {
    let mut out = Vec::new();
    for ranks in [1, 2, 3, 4, 5, 8] {
        out.push(ChunkLayout::new(n, ranks).unwrap());
        out.push(ChunkLayout::with_grain(n, ranks, 4).unwrap());
        let chunk = n.div_ceil(ranks as u64).max(1).next_power_of_two();
        out.push(ChunkLayout::with_chunk(n, ranks, chunk).unwrap());
        out.push(ChunkLayout::with_chunk(n, ranks, chunk * 4).unwrap());
    }
    out
}

/// Sizes: nothing, one element, within a tile, several tiles per chunk; the full tier adds
/// chunks of many look-back chunks (Fenwick nodes above the carry).
fn sizes() -> Vec<usize> {
    tiered(
        &[0, 1, 3, 100, 4097, 70_001, (1 << 18) + 3],
        &[(1 << 22) + 5, 3 << 21],
    )
}

fn check_reduce<T: Gen + DeviceValue + Sync, O: Operator<T> + Sync>(op: O, test: &str) {
    let s = seed(test);
    for n in sizes() {
        let x: Vec<T> = data(n, s ^ n as u64);
        let want = one_gpu().reduce_host(&x, op);
        for layout in layouts(n as u64) {
            let got = on_ranks(layout, &x, |rank, mine| rank.all_reduce(&layout, mine, op));
            assert_ranks_agree(&want, &got, &format!("{test}: n {n}, {layout:?}"));
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn reductions_have_one_gpus_bits_for_every_layout() {
    check_reduce::<f32, _>(Sum, "dist_gpu_f32_sum");
    check_reduce::<f32, _>(ArgMax, "dist_gpu_f32_argmax");
    check_reduce::<f16, _>(Max, "dist_gpu_f16_max");
    check_reduce::<f64, _>(MeanVar, "dist_gpu_f64_meanvar");
    check_reduce::<f64, _>(Mean, "dist_gpu_f64_mean");
    check_reduce::<f32, _>(Div2Mean, "dist_gpu_f32_div2mean");
    check_reduce::<Affine<f32>, _>(Compose, "dist_gpu_affine_compose");
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_joined_tree_is_the_canonical_tree_at_global_positions() {
    // TreeShape records each node's first global position and size and flags any combine
    // off the canonical tree: the chunks' kernels lift at global indices.
    for n in sizes() {
        let x = vec![0u32; n];
        for layout in layouts(n as u64) {
            let got = on_ranks(layout, &x, |rank, mine| {
                rank.all_reduce(&layout, mine, TreeShape).unwrap()
            });
            for g in got {
                assert_eq!(g, canonical_root(n as u64), "n {n}, {layout:?}");
            }
        }
    }
}

fn check_scan<T: Gen + DeviceValue + Sync, O: Operator<T> + Sync>(op: O, test: &str)
where
    O::Out: Send,
{
    let s = seed(test);
    for n in sizes() {
        let x: Vec<T> = data(n, s ^ n as u64);
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            let want = one_gpu().scan_host(&x, op, kind).unwrap();
            for layout in layouts(n as u64) {
                let got: Vec<O::Out> = on_ranks(layout, &x, |rank, mine| {
                    let stream = rank.gpu().stream();
                    let mut out = upload(rank.gpu(), &vec![poison::<O::Out>(); mine.len()]);
                    rank.scan_into(&layout, mine, &mut out, op, kind).unwrap();
                    if mine.is_empty() {
                        Vec::new()
                    } else {
                        stream.clone_dtoh(&out).unwrap()
                    }
                })
                .into_iter()
                .flatten()
                .collect();
                assert_eq!(got.len(), n);
                if let Some(i) = (0..n).find(|&i| !same(&got[i], &want[i])) {
                    panic!(
                        "{test}: {kind:?} n {n}, {layout:?}, position {i}: {:?}, one GPU {:?}",
                        got[i], want[i]
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn scans_have_one_gpus_bits_for_every_layout() {
    check_scan::<f32, _>(Sum, "dist_gpu_scan_f32_sum");
    check_scan::<f64, _>(Mean, "dist_gpu_scan_f64_mean");
    check_scan::<f64, _>(MeanVar, "dist_gpu_scan_f64_meanvar");
    check_scan::<Affine<f32>, _>(Compose, "dist_gpu_scan_affine_compose");
    check_scan::<f32, _>(ArgMax, "dist_gpu_scan_f32_argmax");
}

#[test]
#[ignore = "needs a CUDA device"]
fn every_prefix_is_folded_in_the_canonical_grouping() {
    // FoldShape records how each prefix was folded (the blocks, largest first): the carry
    // must come first and the chunk's blocks after it, at global positions.
    for n in [1usize, 5, 4097, 70_001] {
        let x = vec![0u32; n];
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            for layout in layouts(n as u64) {
                let got: Vec<_> = on_ranks(layout, &x, |rank, mine| {
                    let y = rank.scan(&layout, mine, FoldShape, kind).unwrap();
                    if mine.is_empty() {
                        Vec::new()
                    } else {
                        rank.gpu().stream().clone_dtoh(&y).unwrap()
                    }
                })
                .into_iter()
                .flatten()
                .collect();
                for (i, g) in got.iter().enumerate() {
                    let want = canonical_prefix(i as u64, kind == ScanKind::Inclusive);
                    assert_eq!(*g, want, "{kind:?} n {n}, {layout:?}, position {i}");
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn root_reduce_answers_on_the_root_only() {
    let x: Vec<u32> = (1..=10).collect();
    let layout = ChunkLayout::new(10, 3).unwrap();
    let got = on_ranks(layout, &x, |rank, mine| {
        rank.reduce(1, &layout, mine, Sum).unwrap()
    });
    assert_eq!(got, [None, Some(55), None]);
}

/// Ranks that disagree or fail: an error on every rank, naming the problem, never a hang.
#[test]
#[ignore = "needs a CUDA device"]
fn disagreeing_or_failing_ranks_are_errors_on_every_rank() {
    let x: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let layout = ChunkLayout::new(100, 4).unwrap();

    // Rank 0 reduces with another operator (same accumulator size).
    let got = on_ranks(layout, &x, |rank, mine| {
        if rank.rank() == 0 {
            rank.all_reduce(&layout, mine, Max)
        } else {
            rank.all_reduce(&layout, mine, Sum)
        }
    });
    for g in &got {
        let e = g.as_ref().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Collective, "{e}");
        assert!(e.to_string().contains("operator"), "{e}");
    }

    // Rank 3 passes a chunk of the wrong length.
    let got = on_ranks(layout, &x, |rank, mine| {
        if rank.rank() == 3 {
            rank.all_reduce(&layout, &mine.slice(1..), Sum)
        } else {
            rank.all_reduce(&layout, mine, Sum)
        }
    });
    let n = layout.range(3).end - layout.range(3).start;
    let want = format!(
        "rank 3 holds {} elements where the layout gives it {n}",
        n - 1
    );
    for g in &got {
        let e = g.as_ref().unwrap_err();
        assert!(e.to_string().contains(&want), "{e}");
    }

    // Rank 1's scan output has the wrong length: its own error there, a collective one
    // naming it elsewhere; nothing written anywhere.
    let got = on_ranks(layout, &x, |rank, mine| {
        let len = mine.len() + (rank.rank() == 1) as usize;
        let mut out = upload(rank.gpu(), &vec![-1.0f32; len]);
        let r = rank.scan_into(&layout, mine, &mut out, Sum, ScanKind::Inclusive);
        let untouched = rank
            .gpu()
            .stream()
            .clone_dtoh(&out)
            .unwrap()
            .iter()
            .all(|&v| v == -1.0);
        (r, untouched)
    });
    for (r, (g, untouched)) in got.iter().enumerate() {
        let e = g.as_ref().unwrap_err();
        assert!(untouched, "rank {r} wrote its output");
        if r == 1 {
            assert_eq!(e.kind(), ErrorKind::LengthMismatch, "{e}");
        } else {
            assert_eq!(e.kind(), ErrorKind::Collective, "{e}");
            assert!(e.to_string().contains("rank 1 failed"), "{e}");
        }
    }

    // An operator that cannot be scanned: the same error on every rank.
    let got = on_ranks(layout, &x, |rank, mine| {
        rank.scan(&layout, mine, Div2Mean, ScanKind::Inclusive)
            .map(|_| ())
    });
    for g in &got {
        let e = g.as_ref().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidConfig, "{e}");
    }

    // A clean call on the same streams after all of this.
    let got = on_ranks(layout, &x, |rank, mine| rank.all_reduce(&layout, mine, Sum));
    assert!(got.iter().all(|g| *g.as_ref().unwrap() == 4950.0));
}

/// x -> x0 * x1 * x2 * x3 over [f32; 4] samples (a sample of four draws: one Philox block).
#[derive(Clone, Copy, Debug, Default)]
struct Product4;

#[cufold::transform]
impl Product4 {
    fn apply(x: [f32; 4]) -> f32 {
        x[0] * x[1] * x[2] * x[3]
    }
}

/// The estimate on k ranks of `mc`'s first n samples, on every rank.
fn estimate_on_ranks<S, F, O>(
    layout: ChunkLayout,
    mc: &MonteCarlo<S, F, O>,
) -> Vec<cufold::Result<O::Out>>
where
    S: cufold::monte_carlo::Sample,
    F: cufold::ops::Transform<S> + Sync,
    O: Operator<F::Out> + Sync,
{
    std::thread::scope(|s| {
        let handles: Vec<_> = LocalGroup::new(layout.ranks())
            .into_iter()
            .map(|comm| {
                s.spawn(move || {
                    let rank = GpuRank::new(rank_gpus()[comm.rank()].clone(), comm);
                    rank.monte_carlo(&layout, mc)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn check_monte_carlo<S, F, O>(mc: MonteCarlo<S, F, O>, what: &str)
where
    S: cufold::monte_carlo::Sample,
    F: cufold::ops::Transform<S> + Sync,
    O: Operator<F::Out> + Sync,
{
    // Sizes whose last holding chunk is short and whose last ranks hold nothing (2^20 + 3
    // over 4 ranks: rank 2 holds 3 samples, rank 3 none, starting at an odd sample).
    for n in tiered(
        &[4, 1000, 4097, (1 << 20) + 3, (1 << 20) + 12],
        &[(1 << 24) + 5, 3 << 24],
    ) {
        let want = one_gpu().monte_carlo(&mc, n as u64).unwrap();
        // Chunks of 1 or 2 samples split Philox blocks on the GPU (tested below).
        let whole_blocks = |l: &ChunkLayout| l.grain() >= 4 || l.holders() == 1;
        for layout in layouts(n as u64).into_iter().filter(whole_blocks) {
            for (r, got) in estimate_on_ranks(layout, &mc).into_iter().enumerate() {
                let got = got.unwrap_or_else(|e| panic!("{what}: n {n}, {layout:?}: {e}"));
                assert!(
                    same(&got, &want),
                    "{what}: n {n}, {layout:?}, rank {r}: {got:?}, one GPU {want:?}"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn monte_carlo_over_ranks_has_one_gpus_bits() {
    check_monte_carlo(
        MonteCarlo::<f32, _>::new(Identity).seed(11),
        "uniform f32 meanvar",
    );
    check_monte_carlo(
        MonteCarlo::<f64, _>::new(Identity)
            .seed(12)
            .draws(Draws::Normal),
        "normal f64 meanvar",
    );
    check_monte_carlo(
        MonteCarlo::<[f32; 4], _>::new(Product4).seed(13),
        "product of four",
    );
    check_monte_carlo(
        MonteCarlo::<f32, _>::new(Identity)
            .seed(14)
            .reduce_with(ArgMax),
        "argmax of uniform f32",
    );

    // Chunks of 2 samples split Philox blocks: an error on the ranks whose chunk starts
    // inside one, a collective one on the others.
    let layout = ChunkLayout::with_chunk(8, 4, 2).unwrap();
    let mc = MonteCarlo::<f32, _>::new(Identity);
    for (r, got) in estimate_on_ranks(layout, &mc).into_iter().enumerate() {
        let e = got.unwrap_err();
        let kind = if r % 2 == 1 {
            ErrorKind::InvalidConfig
        } else {
            ErrorKind::Collective
        };
        assert_eq!(e.kind(), kind, "rank {r}: {e}");
    }

    // Ranks that disagree on the seed disagree on the call.
    let layout = ChunkLayout::new(1 << 12, 2).unwrap();
    let got: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = LocalGroup::new(2)
            .into_iter()
            .map(|comm| {
                s.spawn(move || {
                    let mc = MonteCarlo::<f32, _>::new(Identity).seed(comm.rank() as u64);
                    GpuRank::new(rank_gpus()[comm.rank()].clone(), comm).monte_carlo(&layout, &mc)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for g in got {
        let e = g.unwrap_err();
        assert!(e.to_string().contains("disagree on the call"), "{e}");
    }
}

/// The same calls through NCCL: one rank per device of the machine (a group of one on a
/// one-GPU machine: NCCL refuses two ranks of one group on one device). Needs libnccl
/// loadable as libnccl.so (a failure says so). Built with cufold's `nccl` feature.
#[cfg(feature = "nccl")]
#[test]
#[ignore = "needs a CUDA device"]
fn nccl_groups_have_one_gpus_bits() {
    let devices = Gpu::device_count().unwrap();
    let gpus: Vec<Gpu> = (0..devices).map(|d| Gpu::open(d).unwrap()).collect();
    let streams: Vec<_> = gpus.iter().map(|g| g.stream().clone()).collect();
    // Two ranks of one device: refused before NCCL is asked.
    let e = NcclGroup::for_streams(&[streams[0].clone(), streams[0].clone()]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig, "{e}");
    let groups = NcclGroup::for_streams(&streams).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("an NCCL group of {} rank(s)", groups.len());
    let n = (1 << 20) + 3;
    let x: Vec<f32> = data(n, seed("nccl"));
    let layout = ChunkLayout::new(n as u64, devices).unwrap();
    let want_sum = one_gpu().reduce_host(&x, Sum).unwrap();
    let want_scan = one_gpu().scan_host(&x, Sum, ScanKind::Inclusive).unwrap();
    let mc = MonteCarlo::<f32, _>::new(Identity).seed(5);
    let want_mc = one_gpu().monte_carlo(&mc, n as u64).unwrap();
    let got: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = gpus
            .into_iter()
            .zip(groups)
            .map(|(gpu, comm)| {
                let (x, mc) = (&x, &mc);
                s.spawn(move || {
                    let r = layout.range(comm.rank());
                    let mine = upload(&gpu, &x[r.start as usize..r.end as usize]);
                    let rank = GpuRank::new(gpu, comm);
                    let sum = rank.all_reduce(&layout, &mine, Sum).unwrap();
                    let y = rank.scan(&layout, &mine, Sum, ScanKind::Inclusive).unwrap();
                    let y = rank.gpu().stream().clone_dtoh(&y).unwrap();
                    let est = rank.monte_carlo(&layout, mc).unwrap();
                    // Ranks that disagree: an error, and the group still works after it.
                    let e = if rank.rank() == 0 {
                        rank.all_reduce(&layout, &mine, Max)
                    } else {
                        rank.all_reduce(&layout, &mine, Sum)
                    };
                    let again = rank.all_reduce(&layout, &mine, Sum).unwrap();
                    (sum, y, est, e.map(|_| ()), again)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut scan = Vec::new();
    for (sum, y, est, e, again) in got {
        assert_eq!(sum.to_bits(), want_sum.to_bits());
        assert_eq!(again.to_bits(), want_sum.to_bits());
        assert!(same(&est, &want_mc), "{est:?} against {want_mc:?}");
        if devices > 1 {
            let e = e.unwrap_err();
            assert!(e.to_string().contains("operator"), "{e}");
        }
        scan.extend(y);
    }
    assert!(scan
        .iter()
        .zip(&want_scan)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}
