//! Integer `Mean` and `WideSum` on the GPU: exact 128-bit sums, and means rounded once from
//! the exact quotient, with the CPU backend's bits. The inputs are extremes (MAX, MIN and
//! values near them), where a 64-bit accumulator wraps, at sizes that reach every stage of
//! the reduction (one element, one block, the order-free schedule's large blocks from 2^16
//! elements, many blocks), of the segmented reduction and of the scans. The data are fixed
//! patterns, not random, so no run can fail where another passes.
//!
//! The GPU tests are ignored without a CUDA device (`--include-ignored` runs them); the
//! compile-only test needs NVRTC alone:
//! `LD_LIBRARY_PATH=<nvrtc lib> cargo test --test integer_mean_gpu -- --ignored nvrtc`.

mod common;
use common::*;
use cufold::ops::{round_ratio_to_f64, round_ratio_to_f64_unsigned, Mean, Operator, WideSum};
use cufold::segment::Rows;
use cufold::{Cpu, DeviceValue, ScanKind, Widen};

/// One element, a block's worth, around the large-block threshold (2^16, where order-free
/// reductions take 128-thread blocks), and many blocks with a ragged end.
const SIZES: &[usize] = &[
    1,
    2,
    1000,
    (1 << 16) - 1,
    1 << 16,
    (1 << 16) + 1,
    (1 << 20) + 3,
];

/// Fixed patterns of `n` extremes: all MAX, all MIN, and MAX, MIN and near-MAX mixed (more
/// MAX than MIN, so that the sum leaves 64 bits for the 64-bit types).
fn patterns<T: Copy>(
    n: usize,
    max: T,
    min: T,
    near: impl Fn(usize) -> T,
) -> Vec<(&'static str, Vec<T>)> {
    vec![
        ("all MAX", vec![max; n]),
        ("all MIN", vec![min; n]),
        (
            "mixed",
            (0..n)
                .map(|i| match i % 5 {
                    0 | 1 | 3 => max,
                    2 => min,
                    _ => near(i),
                })
                .collect(),
        ),
    ]
}

/// The GPU's reduction of `host` by `op`, the CPU's, and `want`: all three the same bits.
fn reduce_agrees<T: DeviceValue, O: Operator<T>>(host: &[T], op: O, want: O::Out, what: &str) {
    let g = gpu();
    let dev = upload(g, host);
    let r = g
        .reducer::<T, O>(op)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = r.reduce(&dev).unwrap();
    let cpu = Cpu::new().reduce(host, op).unwrap();
    assert!(same(&cpu, &want), "{what}: CPU {cpu:?} != exact {want:?}");
    assert!(same(&got, &want), "{what}: GPU {got:?} != exact {want:?}");
}

macro_rules! extremes_test {
    ($name:ident, $t:ty, $wide:ty, $ratio:path) => {
        #[test]
        #[ignore = "needs a CUDA device"]
        fn $name() {
            for &n in SIZES {
                let near = |i: usize| <$t>::MAX - (i % 7) as $t;
                for (what, host) in patterns::<$t>(n, <$t>::MAX, <$t>::MIN, near) {
                    let sum: $wide = host.iter().map(|&v| v as $wide).sum();
                    let what = format!("{} {what} n={n}", stringify!($t));
                    reduce_agrees(&host, WideSum, sum, &format!("WideSum {what}"));
                    reduce_agrees(&host, Mean, $ratio(sum, n as u64), &format!("Mean {what}"));
                }
            }
        }
    };
}

extremes_test!(
    i32_extremes_mean_and_widesum_are_exact_on_the_gpu,
    i32,
    i128,
    round_ratio_to_f64
);
extremes_test!(
    u8_extremes_mean_and_widesum_are_exact_on_the_gpu,
    u8,
    u128,
    round_ratio_to_f64_unsigned
);
extremes_test!(
    i64_extremes_mean_and_widesum_are_exact_on_the_gpu,
    i64,
    i128,
    round_ratio_to_f64
);
extremes_test!(
    u64_extremes_mean_and_widesum_are_exact_on_the_gpu,
    u64,
    u128,
    round_ratio_to_f64_unsigned
);
extremes_test!(
    u32_extremes_mean_and_widesum_are_exact_on_the_gpu,
    u32,
    u128,
    round_ratio_to_f64_unsigned
);

/// The bugs as reported, on the GPU: the two-element means and the sum past 2^64.
#[test]
#[ignore = "needs a CUDA device"]
fn reported_integer_mean_cases_are_exact_on_the_gpu() {
    let two63 = 2f64.powi(63);
    reduce_agrees(&[i64::MAX, i64::MAX], Mean, two63, "Mean [i64::MAX; 2]");
    reduce_agrees(&[i64::MIN, i64::MIN], Mean, -two63, "Mean [i64::MIN; 2]");
    reduce_agrees(
        &[u64::MAX, u64::MAX],
        Mean,
        2f64.powi(64),
        "Mean [u64::MAX; 2]",
    );
    reduce_agrees(
        &[u64::MAX, 1],
        WideSum,
        1u128 << 64,
        "WideSum [u64::MAX, 1]",
    );
    // (2^55 + 3) / 3 needs the single rounding: the two-rounding answer is 2 below.
    reduce_agrees(
        &[1u64 << 54, 1 << 54, 3],
        Mean,
        12009599006321324.0,
        "Mean 2^55 + 3 over 3",
    );
}

/// Rows of u64 and i64 extremes: WideSum and Mean per row, GPU == CPU == exact, over
/// shapes that take the thread, lanes, warp, block and split schedules.
#[test]
#[ignore = "needs a CUDA device"]
fn segmented_rows_of_extremes_are_exact_on_the_gpu() {
    /// WideSum and Mean of every row on the GPU and the CPU, the same bits; the sums exact,
    /// the means the exact sums' correctly rounded quotients.
    fn check<T: DeviceValue + Widen, W>(
        host: &[T],
        rows: Rows,
        exact: impl Fn(&[T]) -> W,
        mean: impl Fn(W, u64) -> f64,
        what: &str,
    ) where
        WideSum: Operator<T, Out = W>,
        Mean: Operator<T, Out = f64>,
        W: DeviceValue + PartialEq + Copy,
    {
        let g = gpu();
        let dev = upload(g, host);
        fn one<T: DeviceValue, O: Operator<T>>(
            host: &[T],
            dev: &cudarc::driver::CudaSlice<T>,
            rows: Rows,
            op: O,
            what: &str,
        ) -> Vec<O::Out> {
            let g = gpu();
            let r = g.segment_reducer::<T, O>(op).unwrap();
            let mut out = g.stream().alloc_zeros::<O::Out>(rows.rows).unwrap();
            r.reduce_rows_into(dev, rows, &mut out).unwrap();
            let got = g.stream().clone_dtoh(&out).unwrap();
            let want = Cpu::new().reduce_rows(host, rows, op).unwrap();
            assert_eq!(got.len(), want.len());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    same(a, b),
                    "{what} {}: row {i}: GPU {a:?} != CPU {b:?}",
                    O::NAME
                );
            }
            want
        }
        let sums = one(host, &dev, rows, WideSum, what);
        let means = one(host, &dev, rows, Mean, what);
        for r in 0..rows.rows {
            let row = &host[r * rows.stride..r * rows.stride + rows.cols];
            let want = exact(row);
            assert!(
                sums[r] == want,
                "{what}: row {r}: {:?} is not the exact sum {want:?}",
                sums[r]
            );
            let m = mean(want, rows.cols as u64);
            assert_eq!(
                means[r].to_bits(),
                m.to_bits(),
                "{what}: row {r}: mean {} != {m}",
                means[r]
            );
        }
    }
    for (rows, cols) in [(1000, 3), (4096, 40), (300, 700), (64, 5000), (3, 200_000)] {
        let shape = Rows::new(rows, cols);
        let n = rows * cols;
        for (what, host) in patterns::<u64>(n, u64::MAX, 0, |i| u64::MAX - (i % 7) as u64) {
            let exact = |row: &[u64]| row.iter().map(|&v| v as u128).sum::<u128>();
            let what = format!("u64 {what} {rows}x{cols}");
            check(&host, shape, exact, round_ratio_to_f64_unsigned, &what);
        }
        for (what, host) in patterns::<i64>(n, i64::MAX, i64::MIN, |i| i64::MIN + (i % 7) as i64) {
            let exact = |row: &[i64]| row.iter().map(|&v| v as i128).sum::<i128>();
            let what = format!("i64 {what} {rows}x{cols}");
            check(&host, shape, exact, round_ratio_to_f64, &what);
        }
    }
}

/// Inclusive and exclusive scans of WideSum over u64 extremes (and of Mean over i64 ones):
/// 128-bit prefixes, GPU == CPU == exact, on one tile and across many (the look-back).
#[test]
#[ignore = "needs a CUDA device"]
fn scans_of_widesum_of_extremes_are_exact_on_the_gpu() {
    let g = gpu();
    for n in [1usize, 1000, (1 << 16) + 1, (1 << 20) + 3] {
        for (what, host) in patterns::<u64>(n, u64::MAX, 0, |i| u64::MAX - (i % 7) as u64) {
            for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
                let got = g.scan_host(&host, WideSum, kind).unwrap();
                let cpu = Cpu::new().scan(&host, WideSum, kind).unwrap();
                let mut acc = 0u128;
                for i in 0..n {
                    if kind == ScanKind::Inclusive {
                        acc += host[i] as u128;
                    }
                    assert_eq!(cpu[i], acc, "u64 {what} n={n} {kind:?}: CPU at {i}");
                    assert_eq!(got[i], acc, "u64 {what} n={n} {kind:?}: GPU at {i}");
                    if kind == ScanKind::Exclusive {
                        acc += host[i] as u128;
                    }
                }
            }
        }
        for (what, host) in patterns::<i64>(n, i64::MAX, i64::MIN, |i| i64::MIN + (i % 7) as i64) {
            let got = g.scan_host(&host, Mean, ScanKind::Inclusive).unwrap();
            let cpu = Cpu::new().scan(&host, Mean, ScanKind::Inclusive).unwrap();
            let mut acc = 0i128;
            for i in 0..n {
                acc += host[i] as i128;
                let want = round_ratio_to_f64(acc, i as u64 + 1);
                assert_eq!(
                    cpu[i].to_bits(),
                    want.to_bits(),
                    "i64 {what} n={n}: CPU mean at {i}"
                );
                assert_eq!(
                    got[i].to_bits(),
                    want.to_bits(),
                    "i64 {what} n={n}: GPU mean at {i}"
                );
            }
        }
    }
}

/// A segmented scan (rows) of WideSum over u64 extremes: GPU == CPU.
#[test]
#[ignore = "needs a CUDA device"]
fn segmented_row_scans_of_widesum_of_extremes_match_the_cpu() {
    let g = gpu();
    for (rows, cols) in [(1000, 3), (300, 700), (4, 70_000)] {
        let shape = Rows::new(rows, cols);
        for (what, host) in patterns::<u64>(rows * cols, u64::MAX, 0, |i| u64::MAX - (i % 7) as u64)
        {
            let dev = upload(g, &host);
            let s = g.segment_scanner::<u64, _>(WideSum).unwrap();
            for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
                let mut out = g.stream().alloc_zeros::<u128>(rows * cols).unwrap();
                s.scan_rows_into(&dev, shape, &mut out, kind).unwrap();
                let got = g.stream().clone_dtoh(&out).unwrap();
                let want = Cpu::new().scan_rows(&host, shape, WideSum, kind).unwrap();
                let bad = got.iter().zip(&want).position(|(a, b)| a != b);
                assert_eq!(bad, None, "{what} {rows}x{cols} {kind:?}");
            }
        }
    }
}

/// Every kernel of integer Mean and WideSum compiles under NVRTC for sm_90 (no device
/// needed): the reduction (order-free, both block sizes, with and without vector loads), the
/// scan (every block algorithm), the segmented reduction (thread, warp and block groups) and
/// the segmented scans. The 16-byte `cf::i128` / `cf::u128` accumulators go through every
/// one of them.
#[test]
#[ignore = "needs NVRTC (part of the CUDA toolkit)"]
fn integer_mean_and_widesum_kernels_compile_with_nvrtc() {
    if !compile_only_test_runs("integer_mean_and_widesum_kernels_compile_with_nvrtc") {
        return;
    }
    use cufold::reduce::ReduceShape;
    use cufold::scan::{ScanConfig, ScanShape, TypeSizes};
    use cufold::ScanAlgorithm;
    fn build<T: DeviceValue, O: Operator<T>>(op: O) {
        let name = format!("{} over {}", O::NAME, T::cuda_name());
        let cuda = op.cuda();
        let bytes = op.params().bytes().len();
        assert!(O::ORDER_FREE, "{name}: integer sums are order-free");
        for block in [256, 128] {
            let shape = ReduceShape {
                order_free: O::ORDER_FREE,
                ..ReduceShape::for_sizes(std::mem::size_of::<T>(), block).unwrap()
            };
            for vector in [false, shape.vec as usize * std::mem::size_of::<T>() == 16] {
                if let Err(e) =
                    cufold::reduce::compile_kernel(&cuda, bytes, &shape, vector, "sm_90")
                {
                    panic!("{name}: reduce (block {block}, vector {vector}): {e}");
                }
            }
            for group in [1, 32, block] {
                if let Err(e) =
                    cufold::segment::compile_kernel(&cuda, bytes, &shape, group, "sm_90")
                {
                    panic!("{name}: segment (block {block}, group {group}): {e}");
                }
            }
        }
        let sizes = TypeSizes::of::<T, O>();
        assert_eq!(sizes.acc, 16, "{name}: a 128-bit accumulator");
        for algo in [
            ScanAlgorithm::WarpShuffle,
            ScanAlgorithm::Blelloch,
            ScanAlgorithm::HillisSteele,
        ] {
            let shape = ScanShape::fitting(sizes, 256, 128, algo, true).unwrap();
            if let Err(e) = cufold::scan::compile_kernel(&cuda, bytes, sizes, &shape, "sm_90") {
                panic!("{name}: scan ({algo:?}): {e}");
            }
        }
        let c = ScanConfig::default();
        let long = ScanShape::fitting(
            sizes,
            c.get_block(),
            c.get_bytes_per_thread() as usize,
            c.get_algorithm(),
            c.get_staging(),
        )
        .unwrap();
        if let Err(e) =
            cufold::segment::compile_scan_long_kernel(&cuda, bytes, sizes, &long, "sm_90")
        {
            panic!("{name}: long segment scan: {e}");
        }
        let s = ScanShape::fitting(sizes, 256, 64, Default::default(), false).unwrap();
        for group in [1, s.block] {
            if let Err(e) = cufold::segment::compile_scan_kernel(
                &cuda,
                bytes,
                s.block,
                s.items,
                group,
                &[long.tile() / 2, long.tile(), long.tile() * 2],
                "sm_90",
            ) {
                panic!("{name}: segment scan (group {group}): {e}");
            }
        }
        eprintln!("{name}: reduce, segment, scan and segment-scan kernels compiled");
    }
    let mut jobs: Vec<Job> = Vec::new();
    macro_rules! all {
        ($($t:ty),*) => {$(
            jobs.push(Box::new(|| build::<$t, _>(WideSum)));
            jobs.push(Box::new(|| build::<$t, _>(Mean)));
        )*};
    }
    all!(i32, u8, i64, u64, u32);
    run_parallel(jobs);
}
