//! Distributed reductions and scans on the CPU backend, one thread per rank: the single-device
//! bits for every number of ranks and every chunk size, and errors (never hangs) when ranks
//! disagree or fail.

mod common;

use common::{assert_ranks_agree, canonical_root, data, full_tier, same, seed, Gen, TreeShape};
use cufold::dist::{ChunkLayout, Collective, CpuRank, LocalGroup};
use cufold::monte_carlo::{Draws, MonteCarlo};
use cufold::ops::{
    Affine, ArgMax, CompensatedSum, Compose, Div2Mean, ExactMean, ExactSum, Identity, MeanVar,
    Operator, Sum,
};
use cufold::{bf16, f16, Cpu, DeviceValue, ErrorKind, ScanKind};
use std::time::Duration;

/// Runs `f` on every rank of a new group of `ranks`, each on its own thread, with its chunk
/// of `x`; returns the ranks' results in rank order.
fn on_ranks<T: Sync, R: Send>(
    ranks: Vec<LocalGroup>,
    layout: ChunkLayout,
    x: &[T],
    f: impl Fn(&CpuRank<LocalGroup>, &[T]) -> R + Sync,
) -> Vec<R> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|comm| {
                let f = &f;
                s.spawn(move || {
                    let rank = CpuRank::new(Cpu::with_threads(2), comm);
                    let r = layout.range(rank.rank());
                    f(&rank, &x[r.start as usize..r.end as usize])
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Every layout worth trying for `n` elements over 1..=5 and 8 ranks: the balanced one,
/// balanced ones of a fine grain (shares of many pieces), the smallest chunks and chunks up
/// to 4 times larger (ranks past the end hold nothing).
fn layouts(n: u64) -> Vec<ChunkLayout> {
    let mut out = Vec::new();
    for ranks in [1, 2, 3, 4, 5, 8] {
        out.push(ChunkLayout::new(n, ranks).unwrap());
        for grain in [1, 16] {
            out.push(ChunkLayout::with_grain(n, ranks, grain).unwrap());
        }
        let chunk = n.div_ceil(ranks as u64).max(1).next_power_of_two();
        for more in [1, 2, 4] {
            out.push(ChunkLayout::with_chunk(n, ranks, chunk * more).unwrap());
        }
    }
    out
}

const SIZES: [usize; 12] = [0, 1, 2, 3, 5, 8, 100, 255, 4096, 4097, 70_001, 1 << 17];

fn check_reduce<T: Gen + DeviceValue + Sync, O: Operator<T> + Sync>(op: O, test: &str) {
    let s = seed(test);
    for n in SIZES {
        let x: Vec<T> = data(n, s ^ n as u64);
        let want = Cpu::new().reduce(&x, op);
        for layout in layouts(n as u64) {
            let got = on_ranks(LocalGroup::new(layout.ranks()), layout, &x, |rank, mine| {
                rank.all_reduce(&layout, mine, op)
            });
            assert_ranks_agree(&want, &got, &format!("{test}: n {n}, {layout:?}"));
        }
    }
}

#[test]
fn reductions_have_the_single_device_bits_for_every_layout() {
    check_reduce::<f32, _>(Sum, "dist_f32_sum");
    check_reduce::<f32, _>(ArgMax, "dist_f32_argmax");
    check_reduce::<f64, _>(MeanVar, "dist_f64_meanvar");
    check_reduce::<f32, _>(Div2Mean, "dist_f32_div2mean");
    check_reduce::<Affine<f32>, _>(Compose, "dist_affine_compose");
    // Exact sums are exact on any split; the others keep the tree's grouping.
    check_reduce::<f64, _>(ExactSum, "dist_f64_exactsum");
    check_reduce::<f32, _>(ExactMean, "dist_f32_exactmean");
    check_reduce::<f32, _>(CompensatedSum, "dist_f32_compensated");
    check_reduce::<bf16, _>(Sum, "dist_bf16_sum");
}

#[test]
fn the_joined_tree_is_the_canonical_tree() {
    for n in SIZES {
        let x = vec![0u32; n];
        for layout in layouts(n as u64) {
            let got = on_ranks(LocalGroup::new(layout.ranks()), layout, &x, |rank, mine| {
                rank.all_reduce(&layout, mine, TreeShape).unwrap()
            });
            for g in got {
                assert_eq!(g, canonical_root(n as u64), "n {n}, {layout:?}");
            }
        }
    }
}

#[test]
fn an_all_negative_zero_sum_keeps_its_sign_across_ranks() {
    // The padding above the last chunk is combined as the identity, as on one device: the
    // same sign of zero either way.
    for n in [1usize, 3, 5, 6, 100] {
        let x = vec![-0.0f32; n];
        for layout in layouts(n as u64) {
            let one = Cpu::new().reduce(&x, Sum).unwrap();
            let got = on_ranks(LocalGroup::new(layout.ranks()), layout, &x, |rank, mine| {
                rank.all_reduce(&layout, mine, Sum).unwrap()
            });
            assert!(
                got.iter().all(|g| g.to_bits() == one.to_bits()),
                "n {n} {layout:?}"
            );
        }
    }
}

fn check_scan<T: Gen + DeviceValue + Sync, O: Operator<T> + Sync>(op: O, test: &str)
where
    O::Out: Send,
{
    let s = seed(test);
    for n in SIZES {
        let x: Vec<T> = data(n, s ^ n as u64);
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            let want = Cpu::new().scan(&x, op, kind).unwrap();
            for layout in layouts(n as u64) {
                let got: Vec<O::Out> =
                    on_ranks(LocalGroup::new(layout.ranks()), layout, &x, |rank, mine| {
                        rank.scan(&layout, mine, op, kind).unwrap()
                    })
                    .into_iter()
                    .flatten()
                    .collect();
                assert_eq!(got.len(), n);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        same(g, w),
                        "{test}: {kind:?} n {n}, {layout:?}, position {i}: {g:?}, one device {w:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn scans_have_the_single_device_bits_for_every_layout() {
    check_scan::<f32, _>(Sum, "dist_scan_f32_sum");
    check_scan::<f64, _>(MeanVar, "dist_scan_f64_meanvar");
    check_scan::<Affine<f32>, _>(Compose, "dist_scan_affine_compose");
    check_scan::<f32, _>(ArgMax, "dist_scan_f32_argmax");
    check_scan::<f32, _>(CompensatedSum, "dist_scan_f32_compensated");
    check_scan::<f16, _>(Sum, "dist_scan_f16_sum");
}

/// Layouts whose last holding chunk is short and whose last ranks hold nothing (2^20 + 3
/// over 4 ranks: chunks of 2^19, rank 2 holds 3 elements, rank 3 none): every rank takes
/// part in every call, with one device's bits; the Monte Carlo estimate too, its chunks
/// starting anywhere.
#[test]
fn short_and_empty_chunks_take_part_in_every_call() {
    let s = seed("dist_short_chunks");
    let mc = MonteCarlo::<f32, _>::new(Identity).seed(s);
    let normal = MonteCarlo::<f64, _>::new(Identity)
        .seed(s ^ 1)
        .draws(Draws::Normal);
    for n in [4097, (1 << 20) + 3, 4103, (1 << 24) + 5] {
        let x: Vec<f32> = data(n, s ^ n as u64);
        let want_sum = Cpu::new().reduce(&x, Sum).unwrap();
        let want_scan = Cpu::new().scan(&x, Sum, ScanKind::Inclusive).unwrap();
        // 2^24 + 5 samples in the full tier; 2^16 + 5 otherwise (drawing is slow unoptimised).
        let draws = if n > 1 << 21 && !full_tier() {
            (1 << 16) + 5
        } else {
            n as u64
        };
        let want_mc = Cpu::new().monte_carlo(&mc, draws).unwrap();
        let want_normal = Cpu::new().monte_carlo(&normal, draws).unwrap();
        for ranks in [3, 4, 5] {
            let layout = ChunkLayout::new(n as u64, ranks).unwrap();
            let mc_layout = ChunkLayout::new(draws, ranks).unwrap();
            let what = format!("n {n}, {layout:?}, Monte Carlo over {mc_layout:?}");
            let got = on_ranks(LocalGroup::new(ranks), layout, &x, |rank, mine| {
                let sum = rank.all_reduce(&layout, mine, Sum).unwrap();
                let root = rank.reduce(ranks - 1, &layout, mine, Sum).unwrap();
                let scan = rank.scan(&layout, mine, Sum, ScanKind::Inclusive).unwrap();
                let est = rank.monte_carlo(&mc_layout, &mc).unwrap();
                let est_normal = rank.monte_carlo(&mc_layout, &normal).unwrap();
                (sum, root, scan, est, est_normal)
            });
            let mut scan = Vec::new();
            for (r, (sum, root, part, est, est_normal)) in got.into_iter().enumerate() {
                assert_eq!(sum.to_bits(), want_sum.to_bits(), "{what}, rank {r}");
                assert_eq!(
                    root.map(f32::to_bits),
                    (r == ranks - 1).then_some(want_sum.to_bits())
                );
                assert!(
                    same(&est, &want_mc),
                    "{what}, rank {r}: {est:?} against {want_mc:?}"
                );
                assert!(same(&est_normal, &want_normal), "{what}, rank {r}");
                scan.extend(part);
            }
            assert_eq!(scan.len(), n);
            assert!(
                scan.iter()
                    .zip(&want_scan)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{what}"
            );
        }
    }
    // Chunks with rank 2 short and rank 3 empty, starting at an odd position.
    let l = ChunkLayout::with_chunk((1 << 20) + 3, 4, 1 << 19).unwrap();
    assert_eq!(
        (l.range(2), l.range(3)),
        ((1 << 20)..(1 << 20) + 3, (1 << 20) + 3..(1 << 20) + 3)
    );
    // Chunks of one or two samples split Philox groups: the CPU draws them all the same.
    for chunk in [1, 2] {
        let layout = ChunkLayout::with_chunk(9, 9 / chunk as usize + 1, chunk).unwrap();
        let got = on_ranks(
            LocalGroup::new(layout.ranks()),
            layout,
            &[0u8; 9],
            |rank, _| rank.monte_carlo(&layout, &mc).unwrap(),
        );
        let want = Cpu::new().monte_carlo(&mc, 9).unwrap();
        assert!(got.iter().all(|g| same(g, &want)), "chunks of {chunk}");
    }
}

/// A reduction to a root that one rank names out of range, or ranks that name different
/// roots: an error on every rank at once (the root is part of the call's header), never a
/// wait for the rank that refused.
#[test]
fn ranks_that_disagree_on_the_root_are_errors_not_waits() {
    let x: Vec<u32> = (1..=10).collect();
    let layout = ChunkLayout::new(10, 3).unwrap();
    let t = std::time::Instant::now();
    let got = on_ranks(
        LocalGroup::with_timeout(3, Duration::from_secs(30)),
        layout,
        &x,
        |rank, mine| {
            let root = if rank.rank() == 1 { 7 } else { 0 };
            rank.reduce(root, &layout, mine, Sum)
        },
    );
    assert_eq!(
        got[1].as_ref().unwrap_err().kind(),
        ErrorKind::InvalidConfig
    );
    for r in [0, 2] {
        let e = got[r].as_ref().unwrap_err();
        assert!(e.to_string().contains("rank 1 failed: root 7"), "{e}");
    }
    let got = on_ranks(LocalGroup::new(3), layout, &x, |rank, mine| {
        rank.reduce(rank.rank() % 2, &layout, mine, Sum)
    });
    for g in got {
        let e = g.unwrap_err();
        assert!(e.to_string().contains("disagree on the call"), "{e}");
    }
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

/// After a timeout a group is dead: every later call on it is an error at once, saying to
/// build a new group; a new group of the same ranks works.
#[test]
fn a_dead_group_says_so_and_a_new_group_works() {
    let x: Vec<f32> = vec![1.0; 64];
    let layout = ChunkLayout::new(64, 3).unwrap();
    let got = on_ranks(
        LocalGroup::with_timeout(3, Duration::from_millis(200)),
        layout,
        &x,
        |rank, mine| {
            if rank.rank() == 2 {
                return None; // never comes to the first call
            }
            let first = rank.all_reduce(&layout, mine, Sum).unwrap_err();
            let t = std::time::Instant::now();
            let again = rank.all_reduce(&layout, mine, Sum).unwrap_err();
            assert!(t.elapsed() < Duration::from_millis(100));
            Some((first, again, rank.collective().is_dead()))
        },
    );
    for g in got.into_iter().take(2) {
        let (first, again, dead) = g.unwrap();
        assert_eq!(first.kind(), ErrorKind::Collective);
        assert!(first.to_string().contains("build a new group"), "{first}");
        assert!(again.to_string().contains("(rank 2)"), "{again}");
        assert!(dead);
    }
    let got = on_ranks(LocalGroup::new(3), layout, &x, |rank, mine| {
        assert!(!rank.collective().is_dead());
        rank.all_reduce(&layout, mine, Sum).unwrap()
    });
    assert_eq!(got, [64.0; 3]);
}

/// A layout for another number of ranks than the group's is an error at once, however many
/// ranks it names (its pieces are never enumerated).
#[test]
fn a_layout_for_another_group_size_is_an_error_at_once() {
    let huge = ChunkLayout::new(1 << 40, 1 << 30).unwrap();
    let t = std::time::Instant::now();
    let got: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = LocalGroup::new(2)
            .into_iter()
            .map(|comm| {
                s.spawn(move || CpuRank::new(Cpu::new(), comm).all_reduce(&huge, &[0f32; 4], Sum))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for g in got {
        let e = g.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidConfig, "{e}");
        assert!(e.to_string().contains("in a group of 2"), "{e}");
    }
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn root_reduce_answers_on_the_root_only() {
    let x: Vec<u32> = (1..=10).collect();
    let layout = ChunkLayout::new(10, 3).unwrap();
    let got = on_ranks(LocalGroup::new(3), layout, &x, |rank, mine| {
        rank.reduce(1, &layout, mine, Sum).unwrap()
    });
    assert_eq!(got, [None, Some(55), None]);
}

/// Ranks that disagree, fail or never come: an error on every rank, naming the problem.
#[test]
fn disagreeing_or_failing_ranks_are_errors_on_every_rank() {
    let x: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let layout = ChunkLayout::new(100, 4).unwrap();

    // Rank 2 thinks the array is longer.
    let got = on_ranks(LocalGroup::new(4), layout, &x, |rank, mine| {
        let l = if rank.rank() == 2 {
            ChunkLayout::with_chunk(101, 4, 32).unwrap()
        } else {
            layout
        };
        rank.all_reduce(&l, mine, Sum)
    });
    for g in &got {
        let e = g.as_ref().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Collective);
        assert!(e.to_string().contains("global length"), "{e}");
    }

    // Rank 0 reduces with another operator (same accumulator size).
    let got = on_ranks(LocalGroup::new(4), layout, &x, |rank, mine| {
        if rank.rank() == 0 {
            rank.all_reduce(&layout, mine, cufold::ops::Max)
        } else {
            rank.all_reduce(&layout, mine, Sum)
        }
    });
    for g in &got {
        let e = g.as_ref().unwrap_err();
        assert!(e.to_string().contains("operator"), "{e}");
    }

    // Rank 3 passes a chunk of the wrong length.
    let got = on_ranks(LocalGroup::new(4), layout, &x, |rank, mine| {
        let mine = if rank.rank() == 3 { &mine[1..] } else { mine };
        rank.all_reduce(&layout, mine, Sum)
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

    // Rank 1's scan output has the wrong length: its error, on every rank.
    let got = on_ranks(LocalGroup::new(4), layout, &x, |rank, mine| {
        let mut out = vec![0f32; mine.len() + (rank.rank() == 1) as usize];
        rank.scan_into(&layout, mine, &mut out, Sum, ScanKind::Inclusive)
    });
    for (r, g) in got.iter().enumerate() {
        let e = g.as_ref().unwrap_err();
        if r == 1 {
            assert_eq!(e.kind(), ErrorKind::LengthMismatch);
        } else {
            assert!(e.to_string().starts_with("rank 1 failed:"), "{e}");
        }
    }

    // A layout for another number of ranks.
    let two = ChunkLayout::new(100, 2).unwrap();
    let got = on_ranks(LocalGroup::new(4), layout, &x, |rank, mine| {
        rank.all_reduce(&two, mine, Sum)
    });
    assert!(got.iter().all(|g| g.is_err()));

    // An empty array and an operator without an empty value: EmptyInput everywhere.
    let empty = ChunkLayout::new(0, 4).unwrap();
    let got = on_ranks(LocalGroup::new(4), empty, &x[..0], |rank, mine| {
        rank.all_reduce(&empty, mine, ArgMax)
    });
    assert!(got
        .iter()
        .all(|g| g.as_ref().unwrap_err().kind() == ErrorKind::EmptyInput));
}

#[test]
fn a_rank_that_never_comes_is_a_timeout_not_a_hang() {
    let x: Vec<f32> = vec![1.0; 64];
    let layout = ChunkLayout::new(64, 3).unwrap();
    let t = std::time::Instant::now();
    let got = on_ranks(
        LocalGroup::with_timeout(3, Duration::from_millis(200)),
        layout,
        &x,
        |rank, mine| {
            if rank.rank() == 2 {
                return None;
            }
            Some(rank.all_reduce(&layout, mine, Sum))
        },
    );
    assert!(t.elapsed() < Duration::from_secs(10));
    for g in got.iter().take(2) {
        let e = g.as_ref().unwrap().as_ref().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Collective);
        assert!(e.to_string().contains("(rank 2)"), "{e}");
    }
}

/// An operator that panics on one rank's data.
#[derive(Clone, Copy)]
struct Fragile;
impl Operator<f32> for Fragile {
    type Acc = f32;
    type Out = f32;
    const COMMUTATIVE: bool = true;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "Fragile";
    fn identity(&self) -> f32 {
        0.0
    }
    fn lift(&self, x: f32, _: u64) -> f32 {
        assert!(x >= 0.0, "Fragile met a negative value");
        x
    }
    fn combine(&self, a: f32, b: f32) -> f32 {
        a + b
    }
    fn finish(&self, a: f32, _: u64) -> f32 {
        a
    }
    fn cuda(&self) -> cufold::ops::CudaOp {
        unreachable!("a CPU-only test operator")
    }
}

#[test]
fn a_rank_that_panics_keeps_its_panic_and_the_others_hear_of_it() {
    let mut x: Vec<f32> = vec![1.0; 64];
    x[40] = -1.0; // rank 1's (balanced: 24, 20 and 20 elements)
    let layout = ChunkLayout::new(64, 3).unwrap();
    let got = on_ranks(LocalGroup::new(3), layout, &x, |rank, mine| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rank.all_reduce(&layout, mine, Fragile)
        }));
        match r {
            Ok(res) => Ok(res.map_err(|e| e.to_string())),
            Err(p) => Err(p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()),
        }
    });
    assert_eq!(layout.range(1), 24..44);
    assert_eq!(got[1].as_ref().unwrap_err(), "Fragile met a negative value");
    for r in [0, 2] {
        let e = got[r].as_ref().unwrap().as_ref().unwrap_err();
        assert!(e.contains("rank 1 panicked"), "{e}");
    }
}

#[test]
fn local_groups_check_their_sizes() {
    let got = std::thread::scope(|s| {
        let hs: Vec<_> = LocalGroup::new(2)
            .into_iter()
            .map(|c| s.spawn(move || c.all_gather(&vec![1u8; c.rank() + 1])))
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for g in got {
        assert!(g.unwrap_err().to_string().contains("different sizes"));
    }
}

/// Where libnccl cannot be loaded (CI), NCCL's constructors say so with an error, never a
/// panic inside cudarc's loader.
#[cfg(feature = "nccl")]
#[test]
fn nccl_without_the_library_is_an_error_not_a_panic() {
    match cufold::dist::NcclId::new() {
        Ok(id) => assert_eq!(
            cufold::dist::NcclId::from_bytes(id.to_bytes()).to_bytes(),
            id.to_bytes()
        ),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::NoCuda, "{e}");
            assert!(e.to_string().contains("libnccl"), "{e}");
        }
    }
}
