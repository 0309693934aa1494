//! CompensatedSum on the GPU: the GPU's bits equal the CPU's (which tests/compensated.rs
//! checks against the exact sum and the documented bound) for whole arrays at several block
//! sizes, rows and segments on every schedule, and inclusive and exclusive scans of whole
//! arrays and of rows, for f32, f64, f16 and bf16; and the scan of 2^28 U(0,1) f32 values,
//! whose last prefix must be within 1e-8 relative of the exact sum. Each test needs a CUDA
//! device, except the compile-only one, which needs NVRTC only. Run them all with
//!
//! ```sh
//! cargo test --release --test compensated_gpu -- --include-ignored
//! ```
//!
//! NaNs compare as equal whatever their bits: the device's adds return the canonical NaN,
//! the host's propagate an operand's payload.

#[path = "exact/common.rs"]
mod common;

use common::{gen_sum, rng, wide_exponents, Fmt};
use cufold::ops::{CompensatedSum, CompensatedWord, CudaOp, DoubleWord, Operator};
use cufold::reduce::{ReduceConfig, ReduceShape};
use cufold::scan::{ScanConfig, ScanShape, TypeSizes};
use cufold::segment::{Rows, Schedule, SegmentConfig};
use cufold::{bf16, f16, Cpu, DeviceValue, Element, Gpu, ScanAlgorithm, ScanKind};
use rand::Rng;
use std::sync::OnceLock;

fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| Gpu::open(0).expect("a CUDA device"))
}

/// Equal bits, or both NaN.
fn same<F: Fmt + Element>(a: F, b: F) -> bool {
    a.bits() == b.bits() || (a.is_nan_value() && b.is_nan_value())
}

/// The first position where `got` and `want` differ.
fn first_difference<F: Fmt + Element>(got: &[F], want: &[F]) -> Option<usize> {
    if got.len() != want.len() {
        return Some(got.len().min(want.len()));
    }
    got.iter().zip(want).position(|(&g, &w)| !same(g, w))
}

fn upload<F: DeviceValue>(xs: &[F]) -> cudarc::driver::CudaSlice<F> {
    if xs.is_empty() {
        gpu().stream().alloc_zeros::<F>(0).unwrap()
    } else {
        gpu().stream().clone_htod(xs).unwrap()
    }
}

/// Whole-array reductions (the default configuration and block sizes 128, 256 and 1024 for
/// both of the reducer's kernels) and inclusive and exclusive scans (every block algorithm)
/// of `xs` on the GPU have the CPU's bits.
fn check_whole<F: Fmt + Element>(xs: &[F], what: &str)
where
    CompensatedSum: Operator<F, Out = F>,
{
    let g = gpu();
    let cpu = Cpu::new();
    let dev = upload(xs);
    let want = cpu.reduce(xs, CompensatedSum).unwrap();
    let configs = [
        ReduceConfig::default(),
        ReduceConfig::default().block(256).large_block(256),
        ReduceConfig::default().block(128).large_block(1024),
    ];
    for config in configs {
        let r = g
            .reducer_with::<F, _>(CompensatedSum, config)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let got = r.reduce(&dev).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            same(got, want),
            "{what}: CompensatedSum of {} {}: GPU {got:?} != CPU {want:?} ({config:?})",
            xs.len(),
            F::cuda_name()
        );
    }
    let n = xs.len();
    // Each block scan, and the large inputs' shapes at any size (large_from(0)): the large
    // tiles with warp shuffles, resident tiles of double words with the default.
    for (algorithm, large) in [
        (None, false),
        (Some(ScanAlgorithm::WarpShuffle), false),
        (Some(ScanAlgorithm::Blelloch), false),
        (Some(ScanAlgorithm::HillisSteele), false),
        (None, true),
        (Some(ScanAlgorithm::WarpShuffle), true),
    ] {
        let config = match algorithm {
            None => ScanConfig::default(),
            Some(a) => ScanConfig::default().algorithm(a),
        };
        let config = if large { config.large_from(0) } else { config };
        let s = g
            .scanner_with::<F, _>(CompensatedSum, config)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            let want = cpu.scan(xs, CompensatedSum, kind).unwrap();
            let mut out = g.stream().alloc_zeros::<F>(n).unwrap();
            s.scan(&dev, &mut out, kind).unwrap();
            let got = g.stream().clone_dtoh(&out).unwrap();
            if let Some(i) = first_difference(&got, &want) {
                panic!(
                    "{what}: {kind:?} scan of {n} ({algorithm:?}, large shape: {large}): at {i} GPU {:?} != CPU {:?}",
                    got.get(i),
                    want.get(i)
                );
            }
        }
    }
}

const SIZES: &[usize] = &[
    0,
    1,
    2,
    3,
    31,
    32,
    33,
    255,
    256,
    257,
    4095,
    4096,
    4097,
    65_535,
    65_537,
    (1 << 20) - 1,
    (1 << 20) + 1,
    10_000_019,
];

fn u01<F: Fmt>(n: usize, r: &mut rand_chacha::ChaCha8Rng) -> Vec<F> {
    (0..n).map(|_| F::of_f64(r.random::<f64>())).collect()
}

#[test]
#[ignore = "needs a CUDA device"]
fn whole_arrays_and_scans_on_the_gpu_have_the_cpus_bits() {
    let mut r = rng(0x5eed_9c0a);
    for &n in SIZES {
        let n6 = n.max(6);
        check_whole(&u01::<f32>(n, &mut r), "U(0,1) f32");
        check_whole(&u01::<f64>(n, &mut r), "U(0,1) f64");
        check_whole(&u01::<f16>(n, &mut r), "U(0,1) f16");
        check_whole(&u01::<bf16>(n, &mut r), "U(0,1) bf16");
        check_whole(&gen_sum::<f64>(n6, 1e30, &mut r), "GenSum f64 1e30");
        check_whole(&gen_sum::<f32>(n6, 1e12, &mut r), "GenSum f32 1e12");
        check_whole(&wide_exponents::<f64>(n, &mut r), "wide f64");
        check_whole(&wide_exponents::<f32>(n, &mut r), "wide f32");
    }
    // Special values: infinities, NaN and overflow in the middle of an array.
    let mut xs = u01::<f32>(100_000, &mut r);
    xs[777] = f32::INFINITY;
    check_whole(&xs, "an infinity");
    xs[50_000] = f32::NEG_INFINITY;
    check_whole(&xs, "both infinities");
    let mut ys = u01::<f64>(100_000, &mut r);
    ys[3] = f64::NAN;
    check_whole(&ys, "a NaN");
    let big = vec![f64::MAX / 3.0; 5000];
    check_whole(&big, "overflow");
    // Finite sums next to the largest finite value, where Knuth's TwoSum overflowed inside
    // and gave NaN: quads [a, MAX, -MAX, -a] (a = -1.5 ulp(MAX)), whose pairs are each
    // MAX - 1 ulp in magnitude and whose sum is 0, so that every prefix is finite (the CPU's
    // values: tests/compensated.rs).
    let a = -1.5 * 2f32.powi(104);
    let quad = [a, f32::MAX, -f32::MAX, -a];
    let edge: Vec<f32> = (0..70_000).map(|i| quad[i % 4]).collect();
    check_whole(&edge, "next to f32::MAX");
}

/// Rows on every schedule (reductions and scans) and CSR segments: the GPU's bits are the
/// CPU's.
fn check_segments<F: Fmt + Element>(xs: &[F], what: &str)
where
    CompensatedSum: Operator<F, Out = F>,
{
    let g = gpu();
    let cpu = Cpu::new();
    let dev = upload(xs);
    let n = xs.len();
    let schedules = [
        None,
        Some(Schedule::Thread),
        Some(Schedule::Lanes),
        Some(Schedule::Warp),
        Some(Schedule::Block),
        Some(Schedule::Split),
        Some(Schedule::Whole),
    ];
    for cols in [1usize, 3, 8, 33, 1000, 5000, n / 2] {
        let rows = Rows::new(n / cols.max(1), cols);
        let want = cpu.reduce_rows(xs, rows, CompensatedSum).unwrap();
        for schedule in schedules {
            let config = SegmentConfig::default().schedule(schedule);
            let mut out = g.stream().alloc_zeros::<F>(rows.rows).unwrap();
            let s = g
                .segment_reducer_with::<F, _>(CompensatedSum, config)
                .unwrap();
            s.reduce_rows_into(&dev, rows, &mut out).unwrap();
            let got = g.stream().clone_dtoh(&out).unwrap();
            assert!(
                first_difference(&got, &want).is_none(),
                "{what}: rows of {cols}, {schedule:?}"
            );
        }
        let want = cpu
            .scan_rows(xs, rows, CompensatedSum, ScanKind::Inclusive)
            .unwrap();
        let mut out = g.stream().alloc_zeros::<F>(rows.rows * cols).unwrap();
        let s = g.segment_scanner::<F, _>(CompensatedSum).unwrap();
        s.scan_rows_into(&dev, rows, &mut out, ScanKind::Inclusive)
            .unwrap();
        let got = g.stream().clone_dtoh(&out).unwrap();
        assert!(
            first_difference(&got, &want).is_none(),
            "{what}: scans of rows of {cols}"
        );
    }
    // Ragged segments: lengths 0 to 40, some long ones.
    let mut r = rng(0x5eed_05ea);
    let mut offsets = vec![0u64];
    while (*offsets.last().unwrap() as usize) < n {
        let len: u64 = match r.random_range(0..100) {
            0 => 10_000,
            1..=3 => 300,
            _ => r.random_range(0..=40),
        };
        offsets.push((offsets.last().unwrap() + len).min(n as u64));
    }
    let want: Vec<F> = cpu
        .reduce_segments(xs, &offsets, CompensatedSum)
        .unwrap()
        .into_iter()
        .map(|w| w.unwrap())
        .collect();
    let dev_off = g.stream().clone_htod(&offsets).unwrap();
    for schedule in [
        None,
        Some(Schedule::Thread),
        Some(Schedule::Warp),
        Some(Schedule::Block),
    ] {
        let config = SegmentConfig::default().schedule(schedule);
        let mut out = g.stream().alloc_zeros::<F>(offsets.len() - 1).unwrap();
        let s = g
            .segment_reducer_with::<F, _>(CompensatedSum, config)
            .unwrap();
        s.reduce_segments_into(&dev, &dev_off, &mut out).unwrap();
        let got = g.stream().clone_dtoh(&out).unwrap();
        assert!(
            first_difference(&got, &want).is_none(),
            "{what}: segments, {schedule:?}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn rows_and_segments_on_the_gpu_have_the_cpus_bits() {
    let mut r = rng(0x5eed_05eb);
    for n in [1000usize, 100_000] {
        check_segments(&gen_sum::<f64>(n, 1e25, &mut r), "GenSum f64");
        check_segments(&gen_sum::<f32>(n, 1e10, &mut r), "GenSum f32");
        check_segments(&u01::<f32>(n, &mut r), "U(0,1) f32");
        check_segments(&u01::<f16>(n, &mut r), "U(0,1) f16");
        check_segments(&u01::<bf16>(n, &mut r), "U(0,1) bf16");
        check_segments(&wide_exponents::<f64>(n, &mut r), "wide f64");
    }
}

/// CompensatedSum over f32 with its accumulator as the output (the CUDA half finishes with
/// the accumulator itself): what a scan's prefixes hold.
#[derive(Clone, Copy, Debug)]
struct Raw;

impl Operator<f32> for Raw {
    type Acc = DoubleWord<f32>;
    type Out = DoubleWord<f32>;
    const COMMUTATIVE: bool = true;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "Raw";
    fn identity(&self) -> Self::Acc {
        <CompensatedSum as Operator<f32>>::identity(&CompensatedSum)
    }
    fn lift(&self, x: f32, i: u64) -> Self::Acc {
        CompensatedSum.lift(x, i)
    }
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
        <CompensatedSum as Operator<f32>>::combine(&CompensatedSum, a, b)
    }
    fn finish(&self, acc: Self::Acc, _: u64) -> Self::Acc {
        acc
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: "RawCompensated".into(),
            source: "struct RawCompensated : cf::CompensatedSum<float> {
    typedef cf::DoubleWord<float> Out;
    __device__ Out finish(cf::DoubleWord<float> a, unsigned long long) const { return a; }
};"
            .into(),
        }
    }
}

fn value<W: CompensatedWord>(a: DoubleWord<W>) -> f64 {
    a.hi.to_f64() + a.lo.to_f64()
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_scan_of_2_28_u01_f32_values_does_not_drift() {
    let g = gpu();
    let n = 1usize << 28;
    let mut r = rng(0x5eed_2a28);
    let x: Vec<f32> = (0..n).map(|_| r.random::<f32>()).collect();
    // f32 values of [0, 1) are multiples of 2^-24: 2^28 of them sum exactly in f64.
    let exact: f64 = x.iter().map(|&v| v as f64).sum();
    let dev = upload(&x);
    let mut out = g.stream().alloc_zeros::<f32>(n).unwrap();
    g.scanner::<f32, _>(CompensatedSum)
        .unwrap()
        .scan(&dev, &mut out, ScanKind::Inclusive)
        .unwrap();
    let got = g.stream().clone_dtoh(&out).unwrap();
    let want = Cpu::new()
        .scan(&x, CompensatedSum, ScanKind::Inclusive)
        .unwrap();
    assert_eq!(first_difference(&got, &want), None, "GPU against CPU");
    let mut raw = g.stream().alloc_zeros::<DoubleWord<f32>>(n).unwrap();
    g.scanner::<f32, _>(Raw)
        .unwrap()
        .scan(&dev, &mut raw, ScanKind::Inclusive)
        .unwrap();
    let last = g.stream().clone_dtoh(&raw.slice(n - 1..)).unwrap()[0];
    let rel = (value(last) - exact).abs() / exact;
    let rel_out = (got[n - 1] as f64 - exact).abs() / exact;
    println!(
        "2^28 U(0,1) f32, inclusive scan on {}: last prefix's accumulator {rel:.2e} relative, \
         its f32 {rel_out:.2e}",
        g.device_name()
    );
    assert!(rel <= 1e-8, "{rel:e}");
    assert!(rel_out <= 2f64.powi(-24), "{rel_out:e}");
}

#[test]
#[ignore = "needs NVRTC (part of the CUDA toolkit)"]
fn compensated_kernels_compile_for_hopper() {
    // Without a device: the reduction kernels at the smallest and largest block size, with
    // and without vector loads, the segment kernels of every group size, and the scan
    // kernels with runs in registers, resident tiles and the large tiles, for every element
    // type, through NVRTC for sm_90.
    fn jobs<T: DeviceValue>(failed: &mut Vec<String>)
    where
        CompensatedSum: Operator<T>,
    {
        let op = CompensatedSum;
        for block in [32u32, 1024] {
            let shape = ReduceShape::for_sizes(std::mem::size_of::<T>(), block).unwrap();
            for vector in [false, shape.vec as usize * std::mem::size_of::<T>() == 16] {
                let cuda = <CompensatedSum as Operator<T>>::cuda(&op);
                if let Err(e) = cufold::reduce::compile_kernel(&cuda, 0, &shape, vector, "sm_90") {
                    failed.push(format!("{} (block {block}): {e}", T::cuda_name()));
                }
            }
        }
        let shape = ReduceShape::for_sizes(std::mem::size_of::<T>(), 256).unwrap();
        for group in [1, 8, 32, 256] {
            let cuda = <CompensatedSum as Operator<T>>::cuda(&op);
            if let Err(e) = cufold::segment::compile_kernel(&cuda, 0, &shape, group, "sm_90") {
                failed.push(format!(
                    "segments over {} (group {group}): {e}",
                    T::cuda_name()
                ));
            }
        }
        let sizes = TypeSizes::of::<T, CompensatedSum>();
        let cuda = <CompensatedSum as Operator<T>>::cuda(&op);
        // Runs in registers; resident tiles as large inputs take them (double words of 4
        // bytes); the large tiles where the warp-shuffle scan has them.
        let small = ScanShape::fitting(sizes, 256, 128, ScanAlgorithm::Blelloch, true).unwrap();
        let mut shapes = vec![small];
        if sizes.acc <= 8 {
            shapes.push(ScanShape {
                resident: true,
                min_blocks: 5,
                ..small
            });
        }
        shapes.extend(ScanShape::large(
            sizes,
            ScanAlgorithm::WarpShuffle,
            228 * 1024,
        ));
        for shape in shapes {
            if let Err(e) = cufold::scan::compile_kernel(&cuda, 0, sizes, &shape, "sm_90") {
                failed.push(format!("scan of {} ({shape:?}): {e}", T::cuda_name()));
            }
        }
    }
    let mut failed = Vec::new();
    jobs::<f32>(&mut failed);
    jobs::<f64>(&mut failed);
    jobs::<f16>(&mut failed);
    jobs::<bf16>(&mut failed);
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
