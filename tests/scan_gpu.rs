//! GPU tests of scans: every built-in operator and element type, inclusive and exclusive,
//! into a buffer and in place, compared with the CPU backend bit for bit over sizes that
//! stress every stage (thread runs, warps, blocks, the look-back across tiles). They need a
//! CUDA device, so they are ignored by a plain `cargo test`; run them with
//! `--include-ignored`.

mod common;
use common::*;
use cudarc::driver::{CudaSlice, DevicePtr};
use cufold::ops::*;
use cufold::scan::ScanConfig;
use cufold::{bf16, f16, Cpu, DeviceValue, ErrorKind, Gpu, ScanAlgorithm, ScanKind};

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
    (1 << 20) + 1,
];
/// Added to [`SIZES`] in the full tier (`CUFOLD_TEST_TIER=full`).
const FULL_SIZES: &[usize] = &[(1 << 20) - 1, 3_000_017, 10_000_019];
const KINDS: [ScanKind; 2] = [ScanKind::Inclusive, ScanKind::Exclusive];
const ALGORITHMS: [ScanAlgorithm; 3] = [
    ScanAlgorithm::WarpShuffle,
    ScanAlgorithm::Blelloch,
    ScanAlgorithm::HillisSteele,
];

/// The first position whose bits differ, for a readable failure (compared on all cores:
/// some outputs here have 2^28 elements).
fn first_difference<X: Bits + std::fmt::Debug + Sync>(
    a: &[X],
    b: &[X],
) -> Option<(usize, String, String)> {
    assert_eq!(a.len(), b.len());
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = a.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let hs: Vec<_> = a
            .chunks(chunk)
            .zip(b.chunks(chunk))
            .enumerate()
            .map(|(c, (a, b))| {
                s.spawn(move || {
                    a.iter()
                        .zip(b)
                        .position(|(x, y)| x.bits() != y.bits())
                        .map(|i| (c * chunk + i, format!("{:?}", a[i]), format!("{:?}", b[i])))
                })
            })
            .collect();
        hs.into_iter().find_map(|h| h.join().unwrap())
    })
}

/// Scans on the GPU into a poisoned output, twice, and on the CPU: the bits must agree at
/// every position.
fn check<T: DeviceValue, O: Operator<T>>(
    g: &Gpu,
    dev: &impl DevicePtr<T>,
    host: &[T],
    op: O,
    what: &str,
) where
    O::Out: Bits,
{
    check_with(g, ScanConfig::default(), dev, host, op, what)
}

/// [`check`] with a scanner built with `config`.
fn check_with<T: DeviceValue, O: Operator<T>>(
    g: &Gpu,
    config: ScanConfig,
    dev: &impl DevicePtr<T>,
    host: &[T],
    op: O,
    what: &str,
) where
    O::Out: Bits,
{
    let n = host.len();
    let s = g
        .scanner_with::<T, O>(op, config)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    for kind in KINDS {
        let want = Cpu::new().scan(host, op, kind).unwrap();
        let mut out = upload(g, &vec![poison::<O::Out>(); n]);
        s.scan(dev, &mut out, kind).unwrap();
        let got = g.stream().clone_dtoh(&out).unwrap();
        if let Some((i, gpu, cpu)) = first_difference(&got, &want) {
            panic!("{what} {kind:?} n={n}: at {i} GPU {gpu} != CPU {cpu}");
        }
        s.scan(dev, &mut out, kind).unwrap();
        let again = g.stream().clone_dtoh(&out).unwrap();
        assert!(
            first_difference(&again, &got).is_none(),
            "{what} {kind:?} n={n}: run to run"
        );
    }
}

macro_rules! every_op_test {
    ($name:ident, $t:ty) => {
        #[test]
        #[ignore = "needs a CUDA device"]
        fn $name() {
            let s = seed(stringify!($name));
            let g = gpu();
            for n in tiered(SIZES, FULL_SIZES) {
                let host: Vec<$t> = data(n, s ^ n as u64);
                let dev = upload(g, &host);
                let what = |op: &str| format!("{op}<{}>", stringify!($t));
                check(g, &dev, &host, Sum, &what("Sum"));
                check(g, &dev, &host, Max, &what("Max"));
                check(g, &dev, &host, ArgMin, &what("ArgMin"));
                check(g, &dev, &host, WideSum, &what("WideSum"));
                check(g, &dev, &host, Mean, &what("Mean"));
                if n <= 1 << 20 {
                    check(g, &dev, &host, Prod, &what("Prod"));
                    check(g, &dev, &host, Min, &what("Min"));
                    check(g, &dev, &host, MinMax, &what("MinMax"));
                    check(g, &dev, &host, ArgMax, &what("ArgMax"));
                    check(g, &dev, &host, MeanVar, &what("MeanVar"));
                }
                // A view at an odd offset: unaligned loads and stores.
                if n > 1 {
                    check(
                        g,
                        &dev.slice(1..),
                        &host[1..],
                        Sum,
                        &what("Sum (offset view)"),
                    );
                }
            }
        }
    };
}

every_op_test!(f32_scans_every_op_every_size, f32);
every_op_test!(f64_scans_every_op_every_size, f64);
every_op_test!(f16_scans_every_op_every_size, f16);
every_op_test!(bf16_scans_every_op_every_size, bf16);
every_op_test!(i32_scans_every_op_every_size, i32);
every_op_test!(i64_scans_every_op_every_size, i64);
every_op_test!(u32_scans_every_op_every_size, u32);
every_op_test!(u64_scans_every_op_every_size, u64);
every_op_test!(u8_scans_every_op_every_size, u8);

/// Both data paths of the scan kernel on the types the planner keeps resident (kernels/scan.cuh,
/// `CF_STAGING == 2`; 8-byte accumulators admitted): the tile resident in shared memory, and the runs in registers
/// (`ScanConfig::resident(false)`), each against the CPU bit for bit, into a buffer at odd
/// offsets (the values loaded one by one) and in place.
fn resident_and_register_paths_agree<T, O>(op: O, what: &str)
where
    T: DeviceValue + Gen + Bits,
    O: Operator<T, Out = T> + Copy,
{
    let s = seed(what);
    let g = gpu();
    // 8-byte accumulators only where admitted (ScanConfig::resident_acc_bytes).
    let on = ScanConfig::default().resident_acc_bytes(8);
    // The third: large tiles at every length (ScanConfig::large_from).
    let scanners = [
        on.large_from(u64::MAX),
        on.resident(false),
        on.large_from(0),
    ]
    .map(|config| (config, g.scanner_with::<T, O>(op, config).unwrap()));
    let (resident, registers) = (scanners[0].1.shape(), scanners[1].1.shape());
    assert!(
        resident.resident && resident.min_blocks > 1,
        "{what}: {resident:?}"
    );
    assert!(!registers.resident, "{what}: {registers:?}");
    let large = scanners[2].1.shape_for_len(1);
    assert!(
        large.resident && large.min_blocks == 3 && large.tile() > resident.tile(),
        "{what}: {large:?}"
    );
    for n in
        tiered(SIZES, FULL_SIZES)
            .into_iter()
            .chain([8191, 8193, 65_537, 196_613, (1 << 20) + 7])
    {
        let host: Vec<T> = data(n + 3, s ^ n as u64);
        let dev = upload(g, &host);
        for kind in KINDS {
            for offset in [0, 1, 3] {
                let want = Cpu::new()
                    .scan(&host[offset..offset + n], op, kind)
                    .unwrap();
                for (config, scanner) in &scanners {
                    let mut out = upload(g, &vec![poison::<T>(); n + 1]);
                    let x = dev.slice(offset..offset + n);
                    let mut y = out.slice_mut(offset.min(1)..offset.min(1) + n);
                    scanner.scan(&x, &mut y, kind).unwrap();
                    let got = g.stream().clone_dtoh(&out).unwrap();
                    let got = &got[offset.min(1)..offset.min(1) + n];
                    if let Some((i, a, b)) = first_difference(got, &want) {
                        panic!("{what} {config:?} {kind:?} n={n} offset {offset}: at {i} GPU {a} != CPU {b}");
                    }
                }
            }
            let want = Cpu::new().scan(&host[..n], op, kind).unwrap();
            for (config, scanner) in &scanners {
                let mut inplace = upload(g, &host[..n]);
                scanner.scan_in_place(&mut inplace, kind).unwrap();
                let got = g.stream().clone_dtoh(&inplace).unwrap();
                assert!(
                    first_difference(&got, &want).is_none(),
                    "{what} {config:?} {kind:?} n={n} in place"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn resident_tiles_and_runs_in_registers_give_the_same_bits() {
    resident_and_register_paths_agree::<f32, _>(Sum, "Sum<f32>");
    resident_and_register_paths_agree::<i32, _>(Sum, "Sum<i32>");
    resident_and_register_paths_agree::<f16, _>(Sum, "Sum<f16>");
    resident_and_register_paths_agree::<f32, _>(Max, "Max<f32>");
    resident_and_register_paths_agree::<u8, _>(Min, "Min<u8>");
    resident_and_register_paths_agree::<f64, _>(Sum, "Sum<f64>");
    resident_and_register_paths_agree::<i64, _>(Max, "Max<i64>");
}

/// Large inputs' kernels ask the L2 for later tiles (`ScanConfig::prefetch_bytes`): a hint
/// that must not change a bit. Here every tile prefetches the next (one byte ahead: at
/// least a tile), from the first element on (`large_from(0)`), on the large tiles and on a
/// shape without them (affine maps of f64: 16-byte accumulators), into a buffer and from a
/// view at an odd offset, against the CPU.
fn prefetching_agrees<T, O>(op: O, what: &str)
where
    T: DeviceValue + Gen,
    O: Operator<T> + Copy,
    O::Out: Bits,
{
    let g = gpu();
    let config = ScanConfig::default().large_from(0).prefetch_bytes(1);
    let shape = g.scanner_with::<T, O>(op, config).unwrap().shape_for_len(1);
    assert_eq!(shape.prefetch, 1, "{what}: {shape:?}");
    for n in [1, 4097, 65_537, 300_007, (1 << 21) + 3] {
        let host: Vec<T> = data(n, seed(what) ^ n as u64);
        let dev = upload(g, &host);
        check_with(g, config, &dev, &host, op, what);
        let what = format!("{what} (offset view)");
        check_with(g, config, &dev.slice(1..), &host[1..], op, &what);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn prefetching_later_tiles_keeps_the_bits() {
    prefetching_agrees::<f32, _>(Sum, "Sum<f32>");
    prefetching_agrees::<u8, _>(Max, "Max<u8>");
    prefetching_agrees::<f64, _>(Sum, "Sum<f64>");
    prefetching_agrees::<Affine<f64>, _>(Compose, "Compose<Affine<f64>>");
}

macro_rules! ordered_test {
    ($name:ident, $t:ty, $op:ident) => {
        #[test]
        #[ignore = "needs a CUDA device"]
        fn $name() {
            let s = seed(stringify!($name));
            let g = gpu();
            for n in tiered(SIZES, FULL_SIZES) {
                let host: Vec<$t> = data(n, s ^ n as u64);
                let dev = upload(g, &host);
                check(g, &dev, &host, $op, stringify!($name));
                if n > 1 {
                    let what = concat!(stringify!($name), " (offset view)");
                    check(g, &dev.slice(1..), &host[1..], $op, what);
                }
            }
        }
    };
}

ordered_test!(affine_f32_scans_in_order, Affine<f32>, Compose);
ordered_test!(affine_f64_scans_in_order, Affine<f64>, Compose);
ordered_test!(mat2_f32_scans_in_order, Mat2<f32>, MatMul);
ordered_test!(mat2_f64_scans_in_order, Mat2<f64>, MatMul);

#[test]
#[ignore = "needs a CUDA device"]
fn every_algorithm_and_block_size_follows_the_canonical_grouping() {
    // FoldShape records every combine and checks every count: each output must be exactly
    // the canonical prefix, for every algorithm, block size and run length.
    // Up to 2^20 + 1 (hundreds of tiles for every configuration) in the default tier.
    let sizes = SIZES
        .iter()
        .copied()
        .filter(|&n| n <= (1 << 20) + 1)
        .chain([5, 100_003])
        .chain(tiered(&[], &[3_000_017, 3 << 20]));
    for algo in ALGORITHMS {
        for (block, bytes) in [(32, 4), (64, 64), (256, 16), (256, 64), (1024, 8)] {
            let config = ScanConfig::default()
                .algorithm(algo)
                .block(block)
                .bytes_per_thread(bytes);
            let g = gpu();
            let s = g.scanner_with::<u32, _>(FoldShape, config).unwrap();
            for n in sizes.clone() {
                let dev = upload(g, &vec![0u32; n]);
                for kind in KINDS {
                    let mut out = upload(g, &vec![poison::<Fold>(); n]);
                    s.scan(&dev, &mut out, kind).unwrap();
                    let got = g.stream().clone_dtoh(&out).unwrap();
                    for (i, f) in got.iter().enumerate() {
                        let want = canonical_prefix(i as u64, kind == ScanKind::Inclusive);
                        assert_eq!(
                            *f, want,
                            "{algo:?} block {block} ({bytes} B/thread) n = {n} {kind:?} at {i}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn results_do_not_depend_on_the_algorithm_or_the_block_size() {
    let s = seed("results_do_not_depend_on_the_algorithm_or_the_block_size");
    for n in tiered(&[3, 4097, 1_000_003], &[1 << 24]) {
        let host: Vec<f32> = data(n, s ^ n as u64);
        let want = Cpu::new().scan(&host, Sum, ScanKind::Inclusive).unwrap();
        let mv = Cpu::new()
            .scan(&host, MeanVar, ScanKind::Exclusive)
            .unwrap();
        for algo in ALGORITHMS {
            for block in [32, 128, 512, 1024] {
                let g = gpu();
                let config = ScanConfig::default().algorithm(algo).block(block);
                let dev = upload(g, &host);
                let mut y = upload(g, &vec![poison::<f32>(); n]);
                g.scanner_with::<f32, _>(Sum, config)
                    .unwrap()
                    .inclusive(&dev, &mut y)
                    .unwrap();
                let got = g.stream().clone_dtoh(&y).unwrap();
                assert!(
                    first_difference(&got, &want).is_none(),
                    "{algo:?} {block} n={n}"
                );
                let mut out = upload(g, &vec![poison::<MeanVarValue>(); n]);
                g.scanner_with::<f32, _>(MeanVar, config)
                    .unwrap()
                    .exclusive(&dev, &mut out)
                    .unwrap();
                let got = g.stream().clone_dtoh(&out).unwrap();
                assert!(
                    first_difference(&got, &mv).is_none(),
                    "{algo:?} {block} n={n}"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn in_place_scans_equal_scans_into_a_buffer() {
    let s = seed("in_place_scans_equal_scans_into_a_buffer");
    let g = gpu();
    for &n in SIZES {
        let host: Vec<f32> = data(n, s ^ n as u64);
        for kind in KINDS {
            let want = Cpu::new().scan(&host, Sum, kind).unwrap();
            let mut dev = upload(g, &host);
            g.scanner::<f32, _>(Sum)
                .unwrap()
                .scan_in_place(&mut dev, kind)
                .unwrap();
            let got = g.stream().clone_dtoh(&dev).unwrap();
            assert!(first_difference(&got, &want).is_none(), "{kind:?} n={n}");
            // In place on a view at an odd offset (unaligned), only the view changes.
            if n > 2 {
                let mut dev = upload(g, &host);
                let mut view = dev.slice_mut(1..n - 1);
                g.scanner::<f32, _>(Max)
                    .unwrap()
                    .scan_in_place(&mut view, kind)
                    .unwrap();
                let got = g.stream().clone_dtoh(&dev).unwrap();
                let want = Cpu::new().scan(&host[1..n - 1], Max, kind).unwrap();
                assert!(same(&got[0], &host[0]) && same(&got[n - 1], &host[n - 1]));
                assert!(
                    first_difference(&got[1..n - 1], &want).is_none(),
                    "{kind:?} n={n}"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn cumulative_counts_of_a_histogram_are_exact_on_the_gpu() {
    let s = seed("cumulative_counts_of_a_histogram_are_exact_on_the_gpu");
    let mut r = Rng(s);
    let bins = 1 << 20;
    let mut counts = vec![0u32; bins];
    for _ in 0..1 << 24 {
        counts[(r.next() % bins as u64) as usize] += 1;
    }
    let g = gpu();
    let cdf = g.scan_host(&counts, Sum, ScanKind::Inclusive).unwrap();
    let mut acc = 0u32;
    for (b, &c) in counts.iter().enumerate() {
        acc += c;
        assert_eq!(cdf[b], acc, "bin {b}");
    }
    assert_eq!(acc, 1 << 24);
}

#[test]
#[ignore = "needs a CUDA device"]
fn scans_are_asynchronous_and_check_their_arguments() {
    let g = gpu();
    let host: Vec<i32> = (0..100_000).collect();
    let dev = upload(g, &host);
    let s = g.scanner::<i32, _>(Sum).unwrap();
    let mut outs: Vec<CudaSlice<i32>> =
        (0..4).map(|_| upload(g, &vec![poison(); 90_000])).collect();
    for (k, out) in outs.iter_mut().enumerate() {
        // Four launches sharing the handle's look-back memory, no synchronisation between.
        s.scan(
            &dev.slice(k * 1000..k * 1000 + 90_000),
            out,
            ScanKind::Inclusive,
        )
        .unwrap();
    }
    for (k, out) in outs.iter().enumerate() {
        let got = g.stream().clone_dtoh(out).unwrap();
        let want = Cpu::new()
            .scan(&host[k * 1000..k * 1000 + 90_000], Sum, ScanKind::Inclusive)
            .unwrap();
        assert_eq!(got, want, "launch {k}");
    }
    let mut short = g.stream().alloc_zeros::<i32>(10).unwrap();
    assert_eq!(
        s.inclusive(&dev, &mut short).unwrap_err().kind(),
        ErrorKind::LengthMismatch
    );
    assert_eq!(
        g.scanner::<f32, _>(Div2Mean).unwrap_err().kind(),
        ErrorKind::InvalidConfig
    );
    let empty = upload::<f32>(g, &[]);
    let mut none = upload::<f32>(g, &[]);
    g.scan(&empty, &mut none, Max, ScanKind::Exclusive).unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_scan_over_2_pow_28_f32_matches_the_cpu() {
    if !in_full_tier("a_scan_over_2_pow_28_f32_matches_the_cpu") {
        return;
    }
    let s = seed("a_scan_over_2_pow_28_f32_matches_the_cpu");
    let n = 1usize << 28;
    let host: Vec<f32> = data(n, s);
    let g = gpu();
    let got = g.scan_host(&host, Sum, ScanKind::Inclusive).unwrap();
    let want = Cpu::new().scan(&host, Sum, ScanKind::Inclusive).unwrap();
    if let Some((i, a, b)) = first_difference(&got, &want) {
        panic!("at {i}: GPU {a} != CPU {b}");
    }
}

#[test]
#[ignore = "needs NVRTC (part of the CUDA toolkit)"]
fn every_builtin_scan_kernel_compiles_for_hopper() {
    if !compile_only_test_runs("every_builtin_scan_kernel_compiles_for_hopper") {
        return;
    }
    use cufold::scan::{ScanShape, TypeSizes};
    fn build<T: DeviceValue, O: Operator<T>>(op: O) {
        for algo in ALGORITHMS {
            let sizes = TypeSizes::of::<T, O>();
            let shape = ScanShape::fitting(sizes, 256, 128, algo, true).unwrap();
            if let Err(e) = cufold::scan::compile_kernel(
                &op.cuda(),
                op.params().bytes().len(),
                sizes,
                &shape,
                "sm_90",
            ) {
                panic!("{} over {} ({algo:?}): {e}", O::NAME, T::cuda_name());
            }
        }
    }
    let mut jobs: Vec<Job> = Vec::new();
    macro_rules! all {
        ($($t:ty),*) => {$(
            // One job per element type: its ten operators.
            jobs.push(Box::new(|| {
                build::<$t, _>(Sum); build::<$t, _>(Prod); build::<$t, _>(Min);
                build::<$t, _>(Max); build::<$t, _>(MinMax); build::<$t, _>(ArgMin);
                build::<$t, _>(ArgMax); build::<$t, _>(WideSum); build::<$t, _>(Mean);
                build::<$t, _>(MeanVar);
            }));
        )*};
    }
    all!(f32, f64, f16, bf16, i32, i64, u32, u64, u8);
    jobs.push(Box::new(|| build::<Affine<f32>, _>(Compose)));
    jobs.push(Box::new(|| build::<Affine<f64>, _>(Compose)));
    jobs.push(Box::new(|| build::<Mat2<f32>, _>(MatMul)));
    jobs.push(Box::new(|| build::<Mat2<f64>, _>(MatMul)));
    jobs.push(Box::new(|| build::<u32, _>(FoldShape)));
    run_parallel(jobs);
}

/// x -> a x + b into f64, with the parameters compiled into the kernel.
#[derive(Clone, Copy)]
struct Scale {
    a: f64,
    b: f64,
}
impl Transform<f32> for Scale {
    type Out = f64;
    fn apply(&self, x: f32, _: u64) -> f64 {
        self.a * x as f64 + self.b
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: "Scale".into(),
            source: format!(
                "struct Scale {{ typedef float In; typedef double Out;
                   __device__ double operator()(float x, unsigned long long) const {{ return {} * (double)x + {}; }} }};",
                cuda_f64(self.a),
                cuda_f64(self.b)
            ),
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_map_on_the_way_in_reduces_and_scans_with_the_cpus_bits() {
    let s = seed("a_map_on_the_way_in_reduces_and_scans_with_the_cpus_bits");
    let g = gpu();
    let op = Mapped::new(
        Scale {
            a: 0.1,
            b: -1.0 / 3.0,
        },
        Sum,
    );
    for &n in &[1usize, 33, 4097, 1_000_003] {
        let host: Vec<f32> = data(n, s ^ n as u64);
        let dev = upload(g, &host);
        check(g, &dev, &host, op, "Mapped<Scale, Sum>");
        let want = Cpu::new().reduce(&host, op).unwrap();
        assert_eq!(
            g.reduce(&dev, op).unwrap().to_bits(),
            want.to_bits(),
            "n = {n}"
        );
    }
}

/// FoldShape with a 128-byte accumulator: the planner then takes look-back chunks of 64
/// tiles (and smaller blocks), so the chunk logic runs at another size.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Wide {
    f: Fold,
    pad: [u64; 12],
}
// SAFETY: #[repr(C)] of a Fold and twelve u64, matching `struct Wide` below.
unsafe impl cudarc::driver::DeviceRepr for Wide {}
// SAFETY: all fields are integers.
unsafe impl cudarc::driver::ValidAsZeroBits for Wide {}
// SAFETY: same layout as the C++ struct `Wide` below.
unsafe impl DeviceValue for Wide {
    fn cuda_name() -> String {
        "Wide".into()
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct WideShape;
impl Operator<u32> for WideShape {
    type Acc = Wide;
    type Out = Fold;
    const COMMUTATIVE: bool = false;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "WideShape";
    fn identity(&self) -> Wide {
        Wide {
            f: FoldShape.identity(),
            pad: [0; 12],
        }
    }
    fn lift(&self, x: u32, i: u64) -> Wide {
        Wide {
            f: FoldShape.lift(x, i),
            pad: [0; 12],
        }
    }
    fn combine(&self, a: Wide, b: Wide) -> Wide {
        Wide {
            f: FoldShape.combine(a.f, b.f),
            pad: [0; 12],
        }
    }
    fn finish(&self, a: Wide, n: u64) -> Fold {
        FoldShape.finish(a.f, n)
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: "WideShapeOp".into(),
            source: format!(
                "{FOLD_CUDA}
struct Wide {{ Fold f; unsigned long long pad[12]; }};
struct WideShapeOp {{
    typedef unsigned In; typedef Wide Acc; typedef Fold Out;
    FoldShapeOp o;
    __device__ static Wide wrap(Fold f) {{ Wide w; w.f = f; for (int i = 0; i < 12; ++i) w.pad[i] = 0; return w; }}
    __device__ Acc identity() const {{ return wrap(o.identity()); }}
    __device__ Acc lift(In x, unsigned long long i) const {{ return wrap(o.lift(x, i)); }}
    __device__ Acc combine(Acc a, Acc b) const {{ return wrap(o.combine(a.f, b.f)); }}
    __device__ Out finish(Acc a, unsigned long long n) const {{ return o.finish(a.f, n); }}
}};"
            ),
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn smaller_look_back_chunks_follow_the_canonical_grouping() {
    for algo in ALGORITHMS {
        let g = gpu();
        let s = g
            .scanner_with::<u32, _>(WideShape, ScanConfig::default().algorithm(algo).block(64))
            .unwrap();
        assert!(s.shape().chunk < 256, "{:?}", s.shape());
        for n in [1usize, 4097, 100_003, 1 << 20] {
            let dev = upload(g, &vec![0u32; n]);
            for kind in KINDS {
                let mut out = upload(g, &vec![poison::<Fold>(); n]);
                s.scan(&dev, &mut out, kind).unwrap();
                let got = g.stream().clone_dtoh(&out).unwrap();
                for (i, f) in got.iter().enumerate() {
                    let want = canonical_prefix(i as u64, kind == ScanKind::Inclusive);
                    assert_eq!(*f, want, "{algo:?} {:?} n = {n} {kind:?} at {i}", s.shape());
                }
            }
        }
    }
}
