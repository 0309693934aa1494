//! ExactSum and ExactMean on the GPU: the GPU's bits equal the CPU's (which tests/exact.rs
//! checks against an exact reference) for whole arrays (of elements and of a map's images),
//! rows, segments and runs of keys, on the hard cases and on seeded random data, for f32,
//! f64, f16 and bf16, at every block size of the reduction and on every segment schedule.
//! Each test needs a CUDA device, except the compile-only one, which needs NVRTC only. Run
//! them all with
//!
//! ```sh
//! cargo test --release --test exact_gpu -- --include-ignored
//! ```

#[path = "exact/common.rs"]
mod common;

use common::*;
use cufold::ops::{ExactFloat, ExactMean, ExactSum, Mapped, Operator, Transform};
use cufold::reduce::{ReduceConfig, ReduceShape};
use cufold::segment::{Rows, Schedule, SegmentConfig};
use cufold::{bf16, f16, Backend, Cpu, DeviceValue, Gpu};
use std::sync::OnceLock;

fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| Gpu::open(0).expect("a CUDA device"))
}

fn bits_eq<F: Fmt>(a: &[F], b: &[F]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.bits() == y.bits())
}

/// The reducer's configurations the whole-array checks run: the default, and block sizes
/// 128, 256 and 1024 for both of the reducer's kernels.
fn configs() -> [ReduceConfig; 3] {
    [
        ReduceConfig::default(),
        ReduceConfig::default().block(256).large_block(256),
        ReduceConfig::default().block(128).large_block(1024),
    ]
}

/// `op` over `dev` (a copy of `xs`) on the GPU with `config` has the bits of `op` over `xs`
/// on the CPU.
fn check_same<T, O>(
    xs: &[T],
    dev: &cudarc::driver::CudaSlice<T>,
    op: O,
    config: ReduceConfig,
    what: &str,
) where
    T: DeviceValue,
    O: Operator<T> + Copy,
    O::Out: Fmt,
{
    let want = Cpu::new().reduce(xs, op).unwrap();
    let got = gpu()
        .reducer_with::<T, _>(op, config)
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .reduce(dev)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        got.bits() == want.bits(),
        "{what}: {} of {} {}: GPU {got:?} != CPU {want:?} ({config:?})",
        O::name(),
        xs.len(),
        T::cuda_name()
    );
}

/// Whole-array reductions of `xs` on the GPU (every configuration of `configs`) have the
/// CPU's bits, for ExactSum and ExactMean. (An f64 kernel takes NVRTC about 10 s to
/// compile: its accumulator is 368 bytes.)
fn check_reduce<F: Fmt + ExactFloat>(xs: &[F], what: &str)
where
    ExactSum: Operator<F, Out = F>,
    ExactMean: Operator<F, Out = F>,
{
    let dev = if xs.is_empty() {
        gpu().stream().alloc_zeros::<F>(0).unwrap()
    } else {
        gpu().stream().clone_htod(xs).unwrap()
    };
    for config in configs() {
        check_same(xs, &dev, ExactSum, config, what);
        if !xs.is_empty() {
            check_same(xs, &dev, ExactMean, config, what);
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn hard_cases_on_the_gpu() {
    for (xs, _) in hard_f64() {
        check_reduce(&xs, "hard f64");
    }
    for (xs, _) in hard_f32() {
        check_reduce(&xs, "hard f32");
    }
    // Each hard case also equals the reference (the CPU's answer, checked in tests/exact.rs).
    let g = Backend::Gpu(gpu().clone());
    for (xs, _) in hard_f64() {
        let got = g.reduce(&xs, ExactSum).unwrap();
        assert_eq!(got.to_bits(), reference(&xs, false).to_bits(), "{xs:?}");
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

#[test]
#[ignore = "needs a CUDA device"]
fn random_sums_on_the_gpu_have_the_cpus_bits() {
    let mut r = rng(0x5eed_09e0);
    for &n in SIZES {
        let n6 = n.max(6);
        check_reduce(&gen_sum::<f64>(n6, 1e30, &mut r), "GenSum f64 1e30");
        check_reduce(&gen_sum::<f32>(n6, 1e12, &mut r), "GenSum f32 1e12");
        check_reduce(&wide_exponents::<f64>(n, &mut r), "wide f64");
        check_reduce(&wide_exponents::<f32>(n, &mut r), "wide f32");
        check_reduce(&wide_exponents::<f16>(n, &mut r), "wide f16");
        check_reduce(&wide_exponents::<bf16>(n, &mut r), "wide bf16");
    }
    // Ordinary data, which the runs' expansions hold nearly all of, alone and with an
    // infinity, huge elements or signed zeros in some loads; and zeros alone.
    use rand::Rng;
    for &n in SIZES.iter().filter(|&&n| n >= 8) {
        let u: Vec<f64> = (0..n).map(|_| r.random::<f64>()).collect();
        let s: Vec<f64> = (0..n).map(|_| r.random::<f64>() - 0.5).collect();
        let u32s: Vec<f32> = (0..n).map(|_| r.random::<f32>()).collect();
        check_reduce(&u, "uniform f64");
        check_reduce(&s, "signed f64");
        check_reduce(&u32s, "uniform f32");
        let (mut spiked, mut spiked32) = (u.clone(), u32s.clone());
        let at = |k: usize| (k * 7919 + n / 3) % n;
        for (k, v) in [1e300, -1e300, 1e288, f64::MAX, -0.0]
            .into_iter()
            .enumerate()
        {
            spiked[at(k)] = v;
        }
        for (k, v) in [3e38, -3e38, 1e30, f32::MAX, -0.0].into_iter().enumerate() {
            spiked32[at(k)] = v;
        }
        check_reduce(&spiked, "uniform f64 with spikes");
        check_reduce(&spiked32, "uniform f32 with spikes");
        spiked[at(7)] = f64::NEG_INFINITY;
        check_reduce(&spiked, "uniform f64 with spikes and -inf");
        check_reduce(&vec![-0.0f64; n], "-0 f64");
        let mut zeros = vec![-0.0f32; n];
        zeros[n - 1] = 0.0;
        check_reduce(&zeros, "-0 and one +0 f32");
    }
    for e in [2, 8, 16, 24, 32, 40] {
        check_reduce(
            &gen_sum::<f64>(100_003, 10f64.powi(e), &mut r),
            "GenSum f64",
        );
    }
    for e in [2, 6, 10, 16] {
        check_reduce(
            &gen_sum::<f32>(100_003, 10f64.powi(e), &mut r),
            "GenSum f32",
        );
    }
    // 2^24 and then 2^26 ones, in f32: 2^24 + 2^26 exactly.
    let mut ones = vec![1.0f32; (1 << 26) + 1];
    ones[0] = 16777216.0;
    check_reduce(&ones, "2^24 then ones");
    let got = Backend::Gpu(gpu().clone()).reduce(&ones, ExactSum).unwrap();
    assert_eq!(got, 16777216.0 + 67108864.0);
}

/// Long arrays whose elements nearly all leave the expansions (exponents over hundreds of
/// binades): each block of the whole-array kernel reduces tens of tiles, so its warps carry
/// their deposited chunks in the middle of the run as well as at its end, and an infinity
/// and a NaN late in the array still decide the result. Long f16 arrays likewise move the
/// kernel's plain f16 sums into the accumulator in the middle of a block's run.
#[test]
#[ignore = "needs a CUDA device"]
fn long_runs_of_deposits_have_the_cpus_bits() {
    let mut r = rng(0x5eed_10c9);
    let n = 50_000_017;
    let mut x64 = wide_exponents::<f64>(n, &mut r);
    check_reduce(&x64, "wide f64, 5e7");
    x64[n - 5] = f64::INFINITY;
    check_reduce(&x64, "wide f64, 5e7, +inf near the end");
    let mut x32 = wide_exponents::<f32>(n, &mut r);
    check_reduce(&x32, "wide f32, 5e7");
    x32[n / 2] = f32::NAN;
    check_reduce(&x32, "wide f32, 5e7, NaN in the middle");
    // f16's plain sums (moved into the accumulator every few steps of a block's run): every
    // exponent; the largest values, alternating in sign so that each of a thread's plain
    // sums grows the most; and -0.0, whose sign must survive the moves.
    let m = (1 << 27) + 5;
    check_reduce(&wide_exponents::<f16>(m, &mut r), "wide f16, 2^27 + 5");
    let alternating: Vec<f16> = (0..m)
        .map(|i| if i % 2 == 0 { f16::MAX } else { -f16::MAX })
        .collect();
    check_reduce(&alternating, "f16 +-MAX, 2^27 + 5");
    let mut zeros = vec![f16::NEG_ZERO; m];
    check_reduce(&zeros, "f16 -0.0, 2^27 + 5");
    zeros[m / 3] = f16::ZERO;
    check_reduce(&zeros, "f16 -0.0 and one +0.0, 2^27 + 5");
}

/// An f32 element widened to f64 and moved by its index: `x a + k b`.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Widen {
    a: f64,
    b: f64,
}

#[cufold::transform]
impl Widen {
    fn apply(&self, x: f32, k: u64) -> f64 {
        x as f64 * self.a + k as f64 * self.b
    }
}

/// An f32 element scaled in f32.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Scale {
    a: f32,
}

#[cufold::transform]
impl Scale {
    fn apply(&self, x: f32, _k: u64) -> f32 {
        x * self.a
    }
}

/// ExactSum and ExactMean of `map`'s images of `xs` on the GPU (every configuration of
/// `configs`) have the CPU's bits.
fn check_mapped<M>(xs: &[f32], map: M, what: &str)
where
    M: Transform<f32>,
    M::Out: Fmt,
    ExactSum: Operator<M::Out, Out = M::Out>,
    ExactMean: Operator<M::Out, Out = M::Out>,
{
    let dev = gpu().stream().clone_htod(xs).unwrap();
    for config in configs() {
        check_same(xs, &dev, Mapped::new(map, ExactSum), config, what);
        check_same(xs, &dev, Mapped::new(map, ExactMean), config, what);
    }
}

/// Exact sums of a map's images run the exact sums' own run on the images: the bits are the
/// CPU's for images that the expansions hold, that leave them (exponents over hundreds of
/// binades) and that are not finite.
#[test]
#[ignore = "needs a CUDA device"]
fn mapped_exact_sums_on_the_gpu_have_the_cpus_bits() {
    use rand::Rng;
    let mut r = rng(0x5eed_3a9d);
    let widen = Widen { a: 3.0, b: -0.25 };
    let scale = Scale { a: 0.75 };
    for n in [1usize, 7, 1000, 65_537, (1 << 20) + 3, 10_000_019] {
        let u: Vec<f32> = (0..n).map(|_| r.random::<f32>()).collect();
        check_mapped(&u, widen, "uniform, widened");
        check_mapped(&u, scale, "uniform, scaled");
        let w = wide_exponents::<f32>(n, &mut r);
        check_mapped(&w, widen, "wide, widened");
        check_mapped(&w, scale, "wide, scaled");
        if n >= 1000 {
            let mut s = u.clone();
            s[n / 3] = f32::INFINITY;
            check_mapped(&s, widen, "uniform with +inf, widened");
            s[n / 2] = f32::NEG_INFINITY;
            check_mapped(&s, scale, "uniform with +inf and -inf, scaled");
        }
    }
}

/// Rows and segments on every schedule, and runs of keys: the GPU's bits are the CPU's.
fn check_segments<F: Fmt + ExactFloat>(xs: &[F], what: &str)
where
    ExactSum: Operator<F, Out = F>,
    ExactMean: Operator<F, Out = F>,
{
    let g = gpu();
    let cpu = Cpu::new();
    let dev = g.stream().clone_htod(xs).unwrap();
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
        let want = cpu.reduce_rows(xs, rows, ExactSum).unwrap();
        let want_mean = cpu.reduce_rows(xs, rows, ExactMean).unwrap();
        for schedule in schedules {
            let config = SegmentConfig::default().schedule(schedule);
            let mut out = g.stream().alloc_zeros::<F>(rows.rows).unwrap();
            let s = g.segment_reducer_with::<F, _>(ExactSum, config).unwrap();
            s.reduce_rows_into(&dev, rows, &mut out).unwrap();
            let got = g.stream().clone_dtoh(&out).unwrap();
            assert!(bits_eq(&got, &want), "{what}: rows of {cols}, {schedule:?}");
            let s = g.segment_reducer_with::<F, _>(ExactMean, config).unwrap();
            s.reduce_rows_into(&dev, rows, &mut out).unwrap();
            let got = g.stream().clone_dtoh(&out).unwrap();
            assert!(
                bits_eq(&got, &want_mean),
                "{what}: mean rows of {cols}, {schedule:?}"
            );
        }
    }
    // Ragged segments: lengths 0 to 40, some long ones.
    let mut r = rng(0x5eed_05e9);
    let mut offsets = vec![0u64];
    while (*offsets.last().unwrap() as usize) < n {
        let len: u64 = match rand::Rng::random_range(&mut r, 0..100) {
            0 => 10_000,
            1..=3 => 300,
            _ => rand::Rng::random_range(&mut r, 0..=40),
        };
        offsets.push((offsets.last().unwrap() + len).min(n as u64));
    }
    let want = cpu.reduce_segments(xs, &offsets, ExactSum).unwrap();
    let dev_off = g.stream().clone_htod(&offsets).unwrap();
    for schedule in [
        None,
        Some(Schedule::Thread),
        Some(Schedule::Warp),
        Some(Schedule::Block),
    ] {
        let config = SegmentConfig::default().schedule(schedule);
        let mut out = g.stream().alloc_zeros::<F>(offsets.len() - 1).unwrap();
        let s = g.segment_reducer_with::<F, _>(ExactSum, config).unwrap();
        s.reduce_segments_into(&dev, &dev_off, &mut out).unwrap();
        let got = g.stream().clone_dtoh(&out).unwrap();
        let want: Vec<F> = want.iter().map(|w| w.unwrap()).collect();
        assert!(bits_eq(&got, &want), "{what}: segments, {schedule:?}");
    }
    // Runs of equal keys.
    let keys: Vec<u32> = (0..n as u32).map(|i| (i / 37 + i / 1001) % 3).collect();
    let want = cpu.reduce_by_key(&keys, xs, ExactMean).unwrap();
    let got = Backend::Gpu(g.clone())
        .reduce_by_key(&keys, xs, ExactMean)
        .unwrap();
    assert_eq!(got.lengths, want.lengths, "{what}");
    assert!(bits_eq(&got.values, &want.values), "{what}: by key");
}

#[test]
#[ignore = "needs a CUDA device"]
fn rows_segments_and_keys_on_the_gpu_have_the_cpus_bits() {
    let mut r = rng(0x5eed_05e6);
    for n in [1000usize, 100_000] {
        check_segments(&gen_sum::<f64>(n, 1e25, &mut r), "GenSum f64");
        check_segments(&gen_sum::<f32>(n, 1e10, &mut r), "GenSum f32");
        check_segments(&wide_exponents::<f64>(n, &mut r), "wide f64");
        check_segments(&wide_exponents::<f32>(n, &mut r), "wide f32");
        check_segments(&wide_exponents::<f16>(n, &mut r), "wide f16");
        check_segments(&wide_exponents::<bf16>(n, &mut r), "wide bf16");
    }
    // The hard cases as rows of one matrix each.
    for (xs, _) in hard_f64() {
        if xs.len() >= 2 {
            let rows = Rows::new(1, xs.len());
            let got = Backend::Gpu(gpu().clone())
                .reduce_rows(&xs, rows, ExactSum)
                .unwrap();
            let want = Cpu::new().reduce_rows(&xs, rows, ExactSum).unwrap();
            assert!(bits_eq(&got, &want), "{xs:?}");
        }
    }
}

#[test]
#[ignore = "needs NVRTC (part of the CUDA toolkit)"]
fn exact_kernels_compile_for_hopper() {
    // Without a device: the reduction kernels of the two operators at the smallest and the
    // largest block size (the largest holds the most accumulators in shared memory), with and
    // without vector loads, and the segment kernels of every group size, through NVRTC for
    // sm_90, on every core.
    type Job = Box<dyn FnOnce() -> Option<String> + Send>;
    fn jobs<T: DeviceValue, O: Operator<T>>(op: O, out: &mut Vec<Job>) {
        for block in [32u32, 128, 1024] {
            let shape = ReduceShape {
                order_free: O::ORDER_FREE,
                ..ReduceShape::for_sizes(std::mem::size_of::<T>(), block).unwrap()
            };
            for vector in [false, shape.vec as usize * std::mem::size_of::<T>() == 16] {
                out.push(Box::new(move || {
                    let e = cufold::reduce::compile_kernel(&op.cuda(), 0, &shape, vector, "sm_90");
                    e.err().map(|e| {
                        format!("{} over {} (block {block}): {e}", O::NAME, T::cuda_name())
                    })
                }));
            }
        }
        let shape = ReduceShape {
            order_free: O::ORDER_FREE,
            ..ReduceShape::for_sizes(std::mem::size_of::<T>(), 256).unwrap()
        };
        for group in [1, 8, 32, 256] {
            out.push(Box::new(move || {
                let e = cufold::segment::compile_kernel(&op.cuda(), 0, &shape, group, "sm_90");
                e.err().map(|e| {
                    format!(
                        "{} segments over {} (group {group}): {e}",
                        O::NAME,
                        T::cuda_name()
                    )
                })
            }));
        }
    }
    let mut all: Vec<Job> = Vec::new();
    jobs::<f32, _>(ExactSum, &mut all);
    jobs::<f64, _>(ExactSum, &mut all);
    jobs::<f16, _>(ExactSum, &mut all);
    jobs::<bf16, _>(ExactSum, &mut all);
    jobs::<f32, _>(ExactMean, &mut all);
    jobs::<f64, _>(ExactMean, &mut all);
    let queue = std::sync::Mutex::new(all);
    let failed = std::sync::Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let Some(job) = queue.lock().unwrap().pop() else {
                    return;
                };
                if let Some(e) = job() {
                    failed.lock().unwrap().push(e);
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap();
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
