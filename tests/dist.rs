//! Distributed reductions and scans on the CPU backend, one thread per rank: the single-device
//! bits for every number of ranks and every chunk size, and errors (never hangs) when ranks
//! disagree or fail.

mod common;

use common::{assert_ranks_agree, canonical_root, data, same, seed, Gen, TreeShape};
use cufold::dist::{ChunkLayout, Collective, CpuRank, LocalGroup};
use cufold::ops::{Affine, ArgMax, Compose, Div2Mean, MeanVar, Operator, Sum};
use cufold::{Cpu, DeviceValue, ErrorKind, ScanKind};
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

/// Every layout worth trying for `n` elements: the smallest chunk for 1..=5 and 8 ranks,
/// and chunks up to 4 times larger (ranks past the end hold nothing).
fn layouts(n: u64) -> Vec<ChunkLayout> {
    let mut out = Vec::new();
    for ranks in [1, 2, 3, 4, 5, 8] {
        let l = ChunkLayout::new(n, ranks).unwrap();
        out.push(l);
        for more in [2, 4] {
            out.push(ChunkLayout::with_chunk(n, ranks, l.chunk() * more).unwrap());
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
    for g in &got {
        let e = g.as_ref().unwrap_err();
        assert!(
            e.to_string()
                .contains("rank 3 holds 3 elements where the layout gives it 4"),
            "{e}"
        );
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
    x[40] = -1.0; // rank 2 of 3 (chunks of 32: ranks 0 and 1 hold it all, rank 1 has it)
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
    assert_eq!(layout.range(1), 32..64);
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
