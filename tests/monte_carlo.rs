//! Fused Monte Carlo: the CPU backend's estimates against known integrals, and (on a
//! device) the GPU's bits against the CPU's.

mod common;

use common::{compile_only_test_runs, gpu, seed};
use cufold::monte_carlo::{Draws, MonteCarlo};
use cufold::ops::{Identity, Sum};
use cufold::{Cpu, ErrorKind};

/// x -> x0 * x1 * x2 * x3: the integral over the unit cube is 1/16.
#[derive(Clone, Copy, Debug, Default)]
struct Product4;

#[cufold::transform]
impl Product4 {
    fn apply(x: [f64; 4]) -> f64 {
        x[0] * x[1] * x[2] * x[3]
    }
}

/// A map of samples with no draws (a mistake the backends report).
#[derive(Clone, Copy, Debug, Default)]
struct NoDraws;

#[cufold::transform]
impl NoDraws {
    fn apply(_x: [f32; 0]) -> f32 {
        1.0
    }
}

#[test]
fn cpu_estimates_meet_known_integrals() {
    let cpu = Cpu::new();
    let e = cpu
        .monte_carlo(&MonteCarlo::<f64, _>::new(Identity).seed(3), 1 << 18)
        .unwrap();
    assert!((e.mean - 0.5).abs() < 5.0 * e.std_error(), "{e:?}");
    assert!((e.variance() - 1.0 / 12.0).abs() < 1e-3, "{e:?}");
    let e = cpu
        .monte_carlo(&MonteCarlo::<[f64; 4], _>::new(Product4).seed(4), 1 << 18)
        .unwrap();
    assert!((e.mean - 1.0 / 16.0).abs() < 5.0 * e.std_error(), "{e:?}");
    let e = cpu
        .monte_carlo(
            &MonteCarlo::<f32, _>::new(Identity).draws(Draws::Normal),
            1 << 18,
        )
        .unwrap();
    assert!(
        e.mean.abs() < 5.0 * e.std_error() && (e.variance() - 1.0).abs() < 0.02,
        "{e:?}"
    );
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let mc = MonteCarlo::<[f64; 4], _>::new(Product4).seed(9);
    let a = Cpu::with_threads(1).monte_carlo(&mc, 100_003).unwrap();
    let b = Cpu::with_threads(7).monte_carlo(&mc, 100_003).unwrap();
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

#[test]
fn bad_input_is_an_error() {
    let cpu = Cpu::new();
    let mc = MonteCarlo::<f32, _>::new(Identity);
    assert_eq!(
        cpu.monte_carlo(&mc, 0).unwrap_err().kind(),
        ErrorKind::EmptyInput
    );
    assert_eq!(cpu.monte_carlo(&mc.reduce_with(Sum), 0).unwrap(), 0.0);
    let none = MonteCarlo::<[f32; 0], _>::new(NoDraws).reduce_with(Sum);
    let e = cpu.monte_carlo(&none, 10).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
}

/// x -> the sum of eight draws: a sample of eight draws, whose runs reach 2^64 draws at
/// 2^61 samples.
#[derive(Clone, Copy, Debug, Default)]
struct Sum8;

#[cufold::transform]
impl Sum8 {
    fn apply(x: [f32; 8]) -> f32 {
        x[0] + x[1] + x[2] + x[3] + x[4] + x[5] + x[6] + x[7]
    }
}

/// Counts the tree (2^62 positions) or the Philox counter (2^64 draws) cannot index, each
/// with a bound the call takes; a wrong count used to panic (past 2^63) or run forever.
fn too_large_counts() -> [(u64, bool); 6] {
    // (n, whether it needs eight draws per sample to be too large)
    [
        (u64::MAX, false),
        (1 << 63, false),
        ((1 << 62) + 1, false),
        (u64::MAX, true),
        ((1 << 61) + 1, true),
        (1 << 62, true),
    ]
}

#[test]
fn counts_past_the_tree_or_the_counter_are_an_error_before_any_work() {
    let cpu = Cpu::new();
    let start = std::time::Instant::now();
    let mc = MonteCarlo::<f32, _>::new(Identity);
    let eight = MonteCarlo::<[f32; 8], _>::new(Sum8).reduce_with(Sum);
    for (n, needs_eight) in too_large_counts() {
        let e = if needs_eight {
            cpu.monte_carlo(&eight, n).unwrap_err()
        } else {
            cpu.monte_carlo(&mc, n).unwrap_err()
        };
        assert_eq!(e.kind(), ErrorKind::TooLarge, "n = {n}: {e}");
        assert!(e.to_string().contains("samples"), "{e}");
        if !needs_eight {
            let e = cpu.monte_carlo(&mc.reduce_with(Sum), n).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TooLarge, "n = {n}: {e}");
        }
    }
    assert!(start.elapsed().as_secs() < 5, "{:?}", start.elapsed());
    // Just under the bounds is not refused by the check (runs are not started here), and
    // small runs of eight draws still run.
    let e = cpu.monte_carlo(&eight, 1 << 10).unwrap();
    assert!((e - 4096.0).abs() < 200.0, "{e}");
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_refuses_counts_past_the_tree_or_the_counter() {
    use cufold::dist::{ChunkLayout, GpuRank, LocalGroup};
    let gpu = gpu();
    let mc = MonteCarlo::<f32, _>::new(Identity);
    let eight = MonteCarlo::<[f32; 8], _>::new(Sum8).reduce_with(Sum);
    let one = gpu.integrator(&mc).unwrap();
    let eights = gpu.integrator(&eight).unwrap();
    for (n, needs_eight) in too_large_counts() {
        let (e, p) = if needs_eight {
            (eights.estimate(n).unwrap_err(), eights.plan(n).unwrap_err())
        } else {
            (one.estimate(n).unwrap_err(), one.plan(n).unwrap_err())
        };
        assert_eq!(e.kind(), ErrorKind::TooLarge, "n = {n}: {e}");
        assert_eq!(p.kind(), ErrorKind::TooLarge, "n = {n}: {p}");
    }
    // The distributed estimate checks the whole run (2^62 samples of eight draws: 2^65
    // draws), on every rank alike.
    let rank = GpuRank::new(gpu.clone(), LocalGroup::new(1).pop().unwrap());
    let layout = ChunkLayout::new(1 << 62, 1).unwrap();
    let e = rank.monte_carlo(&layout, &eight).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
    assert!(eights.estimate(1 << 10).is_ok());
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_draws_the_cpu_samples_bit_for_bit() {
    let s = seed("gpu_draws_the_cpu_samples_bit_for_bit");
    let g = gpu();
    let cpu = Cpu::new();
    for n in [
        1u64,
        2,
        3,
        5,
        31,
        33,
        4095,
        4097,
        100_003,
        1 << 22,
        (1 << 24) + 7,
    ] {
        let mc = MonteCarlo::<f32, _>::new(Identity).seed(s);
        let (a, b) = (
            g.monte_carlo(&mc, n).unwrap(),
            cpu.monte_carlo(&mc, n).unwrap(),
        );
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "f32 uniform n = {n}");
        let mc = MonteCarlo::<[f64; 4], _>::new(Product4).seed(s ^ n);
        let (a, b) = (
            g.monte_carlo(&mc, n).unwrap(),
            cpu.monte_carlo(&mc, n).unwrap(),
        );
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "4-d product n = {n}");
    }
    // Normals: within the tolerance of CUDA's ln/sin/cos against the host's.
    let mc = MonteCarlo::<f64, _>::new(Identity)
        .seed(s)
        .draws(Draws::Normal);
    let (a, b) = (
        g.monte_carlo(&mc, 1 << 20).unwrap(),
        cpu.monte_carlo(&mc, 1 << 20).unwrap(),
    );
    assert!(
        (a.mean - b.mean).abs() < 1e-12 && (a.m2 - b.m2).abs() < 1e-9 * b.m2,
        "{a:?} {b:?}"
    );
    // 2^32 + 5 samples: past 32-bit counters, against the GPU's own second run.
    let mc = MonteCarlo::<f32, _>::new(Identity).seed(s);
    let big = g.monte_carlo(&mc, (1 << 32) + 5).unwrap();
    assert_eq!(
        format!("{big:?}"),
        format!("{:?}", g.monte_carlo(&mc, (1 << 32) + 5).unwrap())
    );
    assert!((big.mean - 0.5).abs() < 5.0 * big.std_error());
}

/// x -> 2^1023.99 (2x - 1)^31: finite, one sample in 23 past 2^1022 in magnitude, and
/// differences of samples of opposite signs past f64::MAX. Products only, which the GPU and
/// the CPU round alike.
#[derive(Clone, Copy, Debug, Default)]
struct Extremes64;

#[cufold::transform]
impl Extremes64 {
    fn apply(x: f64) -> f64 {
        let a = 2.0 * x - 1.0;
        let a2 = a * a;
        let a4 = a2 * a2;
        let a8 = a4 * a4;
        let a16 = a8 * a8;
        a16 * a8 * a4 * a2 * a * 1.79e308
    }
}

/// x -> 1 / ((x - 1/2) 1e-36) in f32: an infinity of either sign for one sample in 170.
#[derive(Clone, Copy, Debug, Default)]
struct Extremes32;

#[cufold::transform]
impl Extremes32 {
    fn apply(x: f32) -> f32 {
        1.0 / ((x - 0.5) * 1e-36)
    }
}

/// MeanVar's fast trees (the tame combine, checked per load) where samples are infinite or
/// their differences overflow: the GPU's bits equal the CPU's.
#[test]
#[ignore = "needs a CUDA device"]
fn gpu_meanvar_of_extreme_samples_has_the_cpus_bits() {
    // Fixed seeds, so that which runs meet an extreme sample does not vary.
    let s = 0x5eed_e87e;
    let g = gpu();
    let cpu = Cpu::new();
    let mut specials = 0;
    for n in [2u64, 17, 300, 8191, 8192, 20_000, 100_003, 1 << 20] {
        for k in 0..4u64 {
            let mc = MonteCarlo::<f64, _>::new(Extremes64).seed(s ^ (n << 8) ^ k);
            let (a, b) = (
                g.monte_carlo(&mc, n).unwrap(),
                cpu.monte_carlo(&mc, n).unwrap(),
            );
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "f64 n = {n}, k = {k}");
            specials += usize::from(b.mean.is_finite() && b.m2.is_infinite());
            let mc = MonteCarlo::<f32, _>::new(Extremes32).seed(s ^ (n << 8) ^ k);
            let (a, b) = (
                g.monte_carlo(&mc, n).unwrap(),
                cpu.monte_carlo(&mc, n).unwrap(),
            );
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "f32 n = {n}, k = {k}");
        }
    }
    // The data reach the slow trees: runs whose differences overflowed end with a finite mean
    // and an infinite m2 (all 32 f64 runs with these seeds, on the CPU).
    assert!(
        specials >= 16,
        "only {specials} runs met an overflowing difference"
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn new_seeds_reuse_the_kernel() {
    let g = cufold::Gpu::with_options(
        gpu().stream(),
        cufold::GpuOptions::default().disk_cache(cufold::DiskCache::Off),
    )
    .unwrap();
    let mc = MonteCarlo::<[f64; 4], _>::new(Product4).draws(Draws::Normal);
    let i = g.integrator(&mc).unwrap();
    for seed in 0..100 {
        let a = i.with(&mc.seed(seed)).unwrap().estimate(10_000).unwrap();
        let b = Cpu::new().monte_carlo(&mc.seed(seed), 10_000).unwrap();
        assert!((a.mean - b.mean).abs() < 1e-12, "seed {seed}");
    }
    assert_eq!(g.kernel_stats().compiled, 1);
}

#[test]
#[ignore = "needs NVRTC (part of the CUDA toolkit)"]
fn monte_carlo_kernels_compile_for_hopper() {
    if !compile_only_test_runs("monte_carlo_kernels_compile_for_hopper") {
        return;
    }
    use cufold::monte_carlo::compile_kernel;
    use cufold::ops::Operator;
    for draws in [Draws::Uniform, Draws::Normal] {
        let op = MonteCarlo::<f32, _>::new(Identity).operator();
        compile_kernel(&<_ as Operator<f32>>::cuda(&op), 0, draws, "sm_90").unwrap();
        let op = MonteCarlo::<[f64; 4], _>::new(Product4).operator();
        compile_kernel(&<_ as Operator<[f64; 4]>>::cuda(&op), 0, draws, "sm_90").unwrap();
    }
}

/// A map whose CUDA half does not compile (it names an undefined variable).
#[derive(Clone, Copy, Debug, Default)]
struct BrokenMap;

impl cufold::ops::Transform<f32> for BrokenMap {
    type Out = f32;
    fn apply(&self, x: f32, _: u64) -> f32 {
        x
    }
    fn cuda(&self) -> cufold::ops::CudaOp {
        cufold::ops::CudaOp {
            type_name: "BrokenMap".into(),
            source: "struct BrokenMap {\n  typedef float In; typedef float Out;\n  \
                     __device__ float operator()(float x, unsigned long long) const { return x * no_such_scale; }\n};"
                .into(),
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_map_that_fails_to_compile_reports_the_log_and_the_source() {
    let e = gpu()
        .integrator(&MonteCarlo::<f32, _>::new(BrokenMap))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Compile);
    let msg = e.to_string();
    assert!(msg.contains("no_such_scale"), "{msg}");
    assert!(
        msg.lines()
            .any(|l| l.starts_with('>') && l.contains("no_such_scale")),
        "{msg}"
    );
    assert!(e.compile_log().unwrap().contains("error"));
}
