//! GPU tests: every built-in operator and element type, compared with the CPU backend bit
//! for bit, over the sizes that stress every stage of the kernel. They need a CUDA device,
//! so they are ignored by a plain `cargo test`; run them with `--include-ignored`.

mod common;
use common::*;
use cudarc::driver::{CudaSlice, DevicePtr};
use cufold::ops::*;
use cufold::reduce::ReduceConfig;
use cufold::{bf16, f16, Cpu, DeviceValue, ErrorKind, Gpu, GpuOptions};

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
    (1 << 20) - 1,
    (1 << 20) + 1,
    10_000_019,
];
/// Added to [`SIZES`] in the full tier (`CUFOLD_TEST_TIER=full`).
const FULL_SIZES: &[usize] = &[1 << 28];

/// Reduces on the GPU (into a poisoned output, twice) and on the CPU; the bits must agree.
fn check<T: DeviceValue, O: Operator<T>>(
    g: &Gpu,
    dev: &impl DevicePtr<T>,
    host: &[T],
    op: O,
    what: &str,
) {
    let n = host.len();
    let r = g
        .reducer::<T, O>(op)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    match Cpu::new().reduce(host, op) {
        Err(e) => {
            assert_eq!(r.reduce(dev).unwrap_err().kind(), e.kind(), "{what} n={n}");
        }
        Ok(want) => {
            let p = poison::<O::Out>();
            let mut out = g.stream().clone_htod(&[p]).unwrap();
            r.reduce_into(dev, &mut out).unwrap();
            let first = g.stream().clone_dtoh(&out).unwrap()[0];
            assert!(
                !same(&first, &p) || same(&want, &p),
                "{what} n={n}: output never written"
            );
            assert!(
                same(&first, &want),
                "{what} n={n}: GPU {first:?} != CPU {want:?}"
            );
            let again = r.reduce(dev).unwrap();
            assert!(
                same(&again, &first),
                "{what} n={n}: run to run {again:?} != {first:?}"
            );
        }
    }
}

macro_rules! every_op_test {
    ($name:ident, $t:ty $(, $extra:ident)*) => {
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
                check(g, &dev, &host, Prod, &what("Prod"));
                check(g, &dev, &host, Min, &what("Min"));
                check(g, &dev, &host, Max, &what("Max"));
                check(g, &dev, &host, MinMax, &what("MinMax"));
                check(g, &dev, &host, ArgMin, &what("ArgMin"));
                check(g, &dev, &host, ArgMax, &what("ArgMax"));
                check(g, &dev, &host, WideSum, &what("WideSum"));
                check(g, &dev, &host, Mean, &what("Mean"));
                check(g, &dev, &host, MeanVar, &what("MeanVar"));
                $( check(g, &dev, &host, $extra, &what(stringify!($extra))); )*
                // A view at an odd offset: unaligned, so the scalar-load kernel runs.
                if n > 1 {
                    let view = dev.slice(1..);
                    check(g, &view, &host[1..], Sum, &what("Sum (offset view)"));
                    check(g, &view, &host[1..], ArgMax, &what("ArgMax (offset view)"));
                }
            }
        }
    };
}

every_op_test!(f32_every_op_every_size, f32, Div2Mean);
every_op_test!(f64_every_op_every_size, f64, Div2Mean);
every_op_test!(f16_every_op_every_size, f16);
every_op_test!(bf16_every_op_every_size, bf16);
every_op_test!(i32_every_op_every_size, i32);
every_op_test!(i64_every_op_every_size, i64);
every_op_test!(u32_every_op_every_size, u32);
every_op_test!(u64_every_op_every_size, u64);
every_op_test!(u8_every_op_every_size, u8);

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
                    check(
                        g,
                        &dev.slice(1..),
                        &host[1..],
                        $op,
                        concat!(stringify!($name), " (offset view)"),
                    );
                }
            }
        }
    };
}

ordered_test!(affine_f32_in_order, Affine<f32>, Compose);
ordered_test!(affine_f64_in_order, Affine<f64>, Compose);
ordered_test!(mat2_f32_in_order, Mat2<f32>, MatMul);
ordered_test!(mat2_f64_in_order, Mat2<f64>, MatMul);

#[test]
#[ignore = "needs a CUDA device"]
fn the_gpu_follows_the_canonical_tree_for_every_block_size() {
    // TreeShape records every combine: the GPU's tree must be exactly the canonical one,
    // for every size and every block size, through a user-defined CUDA operator.
    for block in [32, 128, 256, 1024] {
        let g = gpu();
        let r = g
            .reducer_with::<u32, _>(TreeShape, ReduceConfig::default().block(block))
            .unwrap();
        for n in tiered(SIZES, FULL_SIZES)
            .into_iter()
            .chain([5, 100_003, 3 << 22])
        {
            let dev = upload(g, &vec![0u32; n]);
            let root = r.reduce(&dev).unwrap();
            assert_eq!(root, canonical_root(n as u64), "n = {n}, block = {block}");
            if n > 1 {
                let root = r.reduce(&dev.slice(1..)).unwrap();
                assert_eq!(
                    root,
                    canonical_root(n as u64 - 1),
                    "view n = {}, block = {block}",
                    n - 1
                );
            }
        }
    }
}

/// MeanVar of bytes, whose kernel computes each aligned group of up to 2^18 positions from
/// integer sums (exact nodes, kernels/reduce.cuh's byte groups), against the CPU's tree: the
/// largest sums of squares (all 255), the widest spread (0 and 255 alternating, or in halves),
/// random bytes; sizes that end in a partial group, a partial tile and a whole one; block
/// sizes that change the group's tiles; an unaligned view.
#[test]
#[ignore = "needs a CUDA device"]
fn meanvar_of_bytes_in_groups_has_the_cpus_bits() {
    let s = seed("meanvar_of_bytes_in_groups_has_the_cpus_bits");
    let g = gpu();
    let sizes = tiered(
        &[(1 << 18) - 1, 1 << 18, (1 << 22) + 3, (1 << 24) + 8192 + 5],
        &[(1 << 28) + 77],
    );
    for n in sizes {
        let patterns: [(&str, Vec<u8>); 4] = [
            ("random", data(n, s ^ n as u64)),
            ("all 255", vec![255; n]),
            (
                "0 and 255 alternating",
                (0..n).map(|i| if i % 2 == 0 { 0 } else { 255 }).collect(),
            ),
            (
                "0 then 255",
                (0..n).map(|i| if i < n / 2 { 0 } else { 255 }).collect(),
            ),
        ];
        for (what, host) in &patterns {
            let dev = upload(g, host);
            let want = Cpu::new().reduce(host, MeanVar).unwrap();
            let got = g.reduce(&dev, MeanVar).unwrap();
            assert!(
                same(&got, &want),
                "{what}, n = {n}: GPU {got:?}, CPU {want:?}"
            );
            for block in [32, 64, 1024] {
                let r = g
                    .reducer_with::<u8, _>(MeanVar, ReduceConfig::default().block(block))
                    .unwrap();
                let got = r.reduce(&dev).unwrap();
                assert!(
                    same(&got, &want),
                    "{what}, n = {n}, block = {block}: GPU {got:?}, CPU {want:?}"
                );
            }
            let view = dev.slice(1..);
            let want = Cpu::new().reduce(&host[1..], MeanVar).unwrap();
            let got = g.reduce(&view, MeanVar).unwrap();
            assert!(
                same(&got, &want),
                "{what}, n = {n}, offset view: GPU {got:?}"
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn results_do_not_depend_on_the_block_size() {
    let s = seed("results_do_not_depend_on_the_block_size");
    for n in tiered(&[3, 4097, 1_000_003], &[1 << 24]) {
        let host: Vec<f32> = data(n, s ^ n as u64);
        let dev = upload(gpu(), &host);
        let want = Cpu::new().reduce(&host, MeanVar).unwrap();
        let sum = Cpu::new().reduce(&host, Sum).unwrap();
        for block in [32, 64, 128, 512, 1024] {
            let config = ReduceConfig::default().block(block);
            let g = gpu();
            let r = g.reducer_with::<f32, _>(MeanVar, config).unwrap();
            assert!(
                same(&r.reduce(&dev).unwrap(), &want),
                "n = {n}, block = {block}"
            );
            let r = g.reducer_with::<f32, _>(Sum, config).unwrap();
            assert!(
                same(&r.reduce(&dev).unwrap(), &sum),
                "n = {n}, block = {block}"
            );
        }
    }
}

/// Reduces `host` (uploaded as `dev`) with the default reducer, which takes the large
/// inputs' kernel from `ReduceConfig::large_from_len` elements for order-free operators, and
/// with one that never does (and, with `blocks_of_32`, one that takes 32-thread blocks from
/// 1000 elements): all equal the CPU's bits.
fn check_both_kernels<T: DeviceValue, O: Operator<T>>(
    dev: &impl DevicePtr<T>,
    host: &[T],
    op: O,
    what: &str,
    blocks_of_32: bool,
) {
    let g = gpu();
    let n = host.len() as u64;
    let want = Cpu::new().reduce(host, op).unwrap();
    let default = g.reducer::<T, O>(op).unwrap();
    let config = ReduceConfig::default();
    let one_tile = cufold::reduce::ReduceShape::for_sizes(std::mem::size_of::<T>(), 1024)
        .unwrap()
        .tile();
    // Lane-run operators that are not order-free (f64 sums) take blocks of at most 128.
    let small_block = if O::LANE_RUNS && !O::ORDER_FREE {
        config.get_block().min(128)
    } else {
        config.get_block()
    };
    let expect_block = if O::ORDER_FREE && n >= config.get_large_from_len() && n > one_tile {
        config.get_large_block()
    } else {
        small_block
    };
    assert_eq!(default.shape_for_len(n).block, expect_block, "{what} n={n}");
    let never = g
        .reducer_with::<T, O>(op, config.large_from_len(u64::MAX))
        .unwrap();
    assert_eq!(never.shape_for_len(n).block, small_block);
    let mut reducers = vec![(default, "default"), (never, "never")];
    if blocks_of_32 {
        let config = config.large_block(32).large_from_len(1000);
        reducers.push((g.reducer_with::<T, O>(op, config).unwrap(), "32 from 1000"));
    }
    for (r, how) in &reducers {
        let got = r.reduce(dev).unwrap();
        assert!(
            same(&got, &want),
            "{what} n={n} ({how}): GPU {got:?} != CPU {want:?}"
        );
    }
}

/// Order-free operators switch to 128-thread blocks from 2^16 elements: every size around
/// the switch, aligned and not, gives the CPU's bits (and so those of the 1024-thread kernel).
#[test]
#[ignore = "needs a CUDA device"]
fn order_free_operators_keep_their_bits_across_the_large_inputs_kernel() {
    let s = seed("order_free_operators_keep_their_bits_across_the_large_inputs_kernel");
    let g = gpu();
    macro_rules! each {
        ($t:ty, $n:expr) => {{
            let host: Vec<$t> = data($n, s ^ $n as u64);
            let dev = upload(g, &host);
            let what = |op: &str| format!("{op}<{}> (CUFOLD_SEED={s})", stringify!($t));
            // Blocks of 32 for one operator a type: each new shape is a compile.
            check_both_kernels(&dev, &host, Max, &what("Max"), false);
            check_both_kernels(&dev, &host, MinMax, &what("MinMax"), false);
            check_both_kernels(&dev, &host, ArgMin, &what("ArgMin"), false);
            check_both_kernels(&dev, &host, ArgMax, &what("ArgMax"), true);
            check_both_kernels(&dev, &host, Sum, &what("Sum"), false);
            let view = dev.slice(1..);
            let (h, v) = (&host[1..], "(offset view)");
            check_both_kernels(&view, h, ArgMax, &what(&format!("ArgMax {v}")), false);
            check_both_kernels(&view, h, Min, &what(&format!("Min {v}")), false);
        }};
    }
    for n in [
        (1usize << 16) - 1,
        1 << 16,
        (1 << 16) + 1,
        (1 << 16) + 2,
        (3 << 16) + 7,
        (1 << 21) + 3,
    ] {
        each!(f32, n);
        each!(f64, n);
        each!(f16, n);
        each!(u8, n);
        each!(i32, n);
        each!(i64, n);
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn div2mean_bits_are_the_pairwise_sum_times_a_power_of_two() {
    let s = seed("div2mean_bits_are_the_pairwise_sum_times_a_power_of_two");
    let g = gpu();
    for &n in SIZES.iter().filter(|&&n| n > 0) {
        let host: Vec<f32> = data::<f32>(n, s ^ n as u64)
            .iter()
            .map(|v| v.abs() + 0.5)
            .collect();
        let dev = upload(g, &host);
        let p = (n as u64).next_power_of_two();
        let sum = g.reduce(&dev, Sum).unwrap();
        let halved = sum * (1.0 / p as f64) as f32;
        let want = (halved as f64 * (p as f64 / n as f64)) as f32;
        let got = g.reduce(&dev, Div2Mean).unwrap();
        assert!(
            same(&got, &want),
            "n = {n}: Div2Mean {got:?}, pairwise sum scaled {want:?}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn nan_propagates_on_the_gpu_as_on_the_cpu() {
    let g = gpu();
    for &n in &[2usize, 33, 4097, 1_000_003] {
        for pos in [0, n / 2, n - 1] {
            let mut host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
            host[pos] = f32::NAN;
            if pos + 1 < n {
                host[n - 1] = f32::NAN;
            }
            let dev = upload(g, &host);
            assert!(g.reduce(&dev, Max).unwrap().is_nan());
            assert!(g.reduce(&dev, Min).unwrap().is_nan());
            assert_eq!(g.reduce(&dev, ArgMax).unwrap().index, pos as u64, "n = {n}");
            assert_eq!(g.reduce(&dev, ArgMin).unwrap().index, pos as u64, "n = {n}");
            let mm = g.reduce(&dev, MinMax).unwrap();
            assert!(mm.min.is_nan() && mm.max.is_nan());
            let h: Vec<f16> = host.iter().map(|&v| f16::from_f32(v)).collect();
            let b: Vec<bf16> = host.iter().map(|&v| bf16::from_f32(v)).collect();
            assert_eq!(g.reduce(&upload(g, &h), ArgMax).unwrap().index, pos as u64);
            assert_eq!(g.reduce(&upload(g, &b), ArgMin).unwrap().index, pos as u64);
        }
    }
}

/// The order-free schedule (one accumulator per thread, one tree at the end) gives the
/// canonical tree's bits for the order-free operators, on data that exercises every rule:
/// signed zeros, NaNs of several payloads and signs, infinities, ties, at sizes across
/// tiles, blocks and grids and at odd offsets.
#[test]
#[ignore = "needs a CUDA device"]
fn half_precision_sums_keep_nan_payloads_as_the_cpu_does() {
    // f16 and bf16 round through f32 after every operation; a NaN's payload and sign must
    // come out of the device's conversions as out of the `half` crate's.
    let g = gpu();
    let nans = [
        0x7fc0_0001u32,
        0xffc0_1234,
        0x7f80_0001,
        0xff81_0000,
        0x7fff_ffff,
    ];
    for (k, &bits) in nans.iter().enumerate() {
        let n = 4097 + k;
        let mut host: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
        host[(k * 997) % n] = f32::from_bits(bits);
        let h: Vec<f16> = host.iter().map(|&v| f16::from_f32(v)).collect();
        let b: Vec<bf16> = host.iter().map(|&v| bf16::from_f32(v)).collect();
        let (dh, db) = (upload(g, &h), upload(g, &b));
        check(g, &dh, &h, Sum, &format!("Sum<f16> NaN {bits:#x}"));
        check(g, &dh, &h, Prod, &format!("Prod<f16> NaN {bits:#x}"));
        check(g, &db, &b, Sum, &format!("Sum<bf16> NaN {bits:#x}"));
        check(g, &db, &b, Prod, &format!("Prod<bf16> NaN {bits:#x}"));
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn order_free_operators_give_the_canonical_bits_on_signed_zeros_and_nans() {
    let s = seed("order_free_operators_give_the_canonical_bits_on_signed_zeros_and_nans");
    let g = gpu();
    let specials = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(0x7fc0_0000),
        f32::from_bits(0x7fc0_0001),
        f32::from_bits(0xffc0_0007),
    ];
    let mut rng = Rng(s);
    for &n in &[1usize, 2, 31, 4097, 65_537, 1_000_003, 9_999_991] {
        for round in 0..4 {
            // Round 0: zeros of both signs only (ties everywhere); 1: plus infinities;
            // 2 and 3: plus NaNs, a few or many.
            let kinds = [2, 4, 7, 7][round];
            let rare = if round == 2 { n as u64 / 3 + 1 } else { 4 };
            let host: Vec<f32> = (0..n)
                .map(|_| {
                    let z = rng.next();
                    if round < 2 || z % rare == 0 {
                        specials[(z >> 8) as usize % kinds]
                    } else {
                        (z >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                    }
                })
                .collect();
            let cpu = Cpu::new();
            let dev = upload(g, &host);
            let bits = |v: f32| v.to_bits();
            let what = format!("n = {n}, round {round} (CUFOLD_SEED={s})");
            assert_eq!(
                bits(g.reduce(&dev, Max).unwrap()),
                bits(cpu.reduce(&host, Max).unwrap()),
                "Max {what}"
            );
            assert_eq!(
                bits(g.reduce(&dev, Min).unwrap()),
                bits(cpu.reduce(&host, Min).unwrap()),
                "Min {what}"
            );
            let (a, b) = (
                g.reduce(&dev, MinMax).unwrap(),
                cpu.reduce(&host, MinMax).unwrap(),
            );
            assert_eq!(
                (bits(a.min), bits(a.max)),
                (bits(b.min), bits(b.max)),
                "MinMax {what}"
            );
            for (ga, ca) in [
                (
                    g.reduce(&dev, ArgMax).unwrap(),
                    cpu.reduce(&host, ArgMax).unwrap(),
                ),
                (
                    g.reduce(&dev, ArgMin).unwrap(),
                    cpu.reduce(&host, ArgMin).unwrap(),
                ),
            ] {
                assert_eq!(
                    (bits(ga.value), ga.index),
                    (bits(ca.value), ca.index),
                    "Arg {what}"
                );
            }
            let h: Vec<f16> = host.iter().map(|&v| f16::from_f32(v)).collect();
            let hd = upload(g, &h);
            assert_eq!(
                g.reduce(&hd, Max).unwrap().to_bits(),
                cpu.reduce(&h, Max).unwrap().to_bits(),
                "Max f16 {what}"
            );
            assert_eq!(
                g.reduce(&hd, ArgMin).unwrap().index,
                cpu.reduce(&h, ArgMin).unwrap().index
            );
            let d: Vec<f64> = host.iter().map(|&v| v as f64).collect();
            let dd = upload(g, &d);
            assert_eq!(
                g.reduce(&dd, Min).unwrap().to_bits(),
                cpu.reduce(&d, Min).unwrap().to_bits(),
                "Min f64 {what}"
            );
            if n > 3 {
                let view = dev.slice(3..);
                assert_eq!(
                    bits(g.reduce(&view, Max).unwrap()),
                    bits(cpu.reduce(&host[3..], Max).unwrap()),
                    "Max at offset 3, {what}"
                );
            }
        }
    }
}

/// MeanVar on infinities and on differences past f64::MAX, mixed into ordinary data at
/// every position class: the GPU's bits equal the CPU's (whose answers tests/cpu.rs checks
/// against NumPy's).
#[test]
#[ignore = "needs a CUDA device"]
fn meanvar_extremes_on_the_gpu_as_on_the_cpu() {
    let g = gpu();
    // Past 2^1022 with finite differences (MAX, MAX; 1.5e308, 1.6e308), NaN, and the rest.
    let specials = [
        (f64::MAX, -f64::MAX),
        (f64::MAX, f64::MAX),
        (1.5e308, 1.6e308),
        (f64::INFINITY, 1.0),
        (f64::INFINITY, f64::INFINITY),
        (f64::NEG_INFINITY, f64::INFINITY),
        (f64::NAN, 1.0),
        (1e308, -1e308),
    ];
    for &n in &[2usize, 3, 33, 4097, 1_000_003] {
        for &(a, b) in &specials {
            for pos in [0, n / 2, n - 2] {
                let mut host: Vec<f64> = (0..n).map(|i| (i % 1000) as f64).collect();
                host[pos] = a;
                host[n - 1] = b;
                let want = Cpu::new().reduce(&host, MeanVar).unwrap();
                let got = g.reduce(&upload(g, &host), MeanVar).unwrap();
                assert!(
                    same(&got, &want),
                    "n = {n}, ({a}, {b}) at {pos}: {got:?} != {want:?}"
                );
                // f32 inputs (their own tree of lifted pairs), where the pair fits f32.
                if a.is_finite() && a.abs() > f32::MAX as f64 {
                    continue;
                }
                let host: Vec<f32> = host.iter().map(|&x| x as f32).collect();
                let want = Cpu::new().reduce(&host, MeanVar).unwrap();
                let got = g.reduce(&upload(g, &host), MeanVar).unwrap();
                assert!(
                    same(&got, &want),
                    "f32, n = {n}, ({a}, {b}) at {pos}: {got:?} != {want:?}"
                );
            }
        }
    }
}

/// The byte the fill kernel writes at position `i`: a hash, values 0..=254 (255 is placed by
/// hand), so sums, extremes and indices over > 2^32 positions are all non-trivial.
fn pattern(i: u64, seed: u64) -> u8 {
    let mut z = i ^ seed;
    z = (z ^ (z >> 33)).wrapping_mul(0xff51afd7ed558ccd);
    z = (z ^ (z >> 33)).wrapping_mul(0xc4ceb9fe1a85ec53);
    ((z ^ (z >> 33)) % 255) as u8
}

const FILL: &str = r#"
extern "C" __global__ void fill(unsigned char* x, unsigned long long n, unsigned long long seed) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned long long z = i ^ seed;
        z = (z ^ (z >> 33)) * 0xff51afd7ed558ccdull;
        z = (z ^ (z >> 33)) * 0xc4ceb9fe1a85ec53ull;
        x[i] = (unsigned char)((z ^ (z >> 33)) % 255);
    }
}"#;

#[test]
#[ignore = "needs a CUDA device"]
fn more_than_2_pow_32_elements_generated_on_the_device() {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    if !in_full_tier("more_than_2_pow_32_elements_generated_on_the_device") {
        return;
    }
    let s = seed("more_than_2_pow_32_elements_generated_on_the_device");
    let g = gpu();
    let n: usize = (1 << 32) + (1 << 20) + 7;
    let mut dev = g.stream().alloc_zeros::<u8>(n).unwrap();
    let module = g
        .stream()
        .context()
        .load_module(cudarc::nvrtc::compile_ptx(FILL).unwrap())
        .unwrap();
    let fill = module.load_function("fill").unwrap();
    let cfg = LaunchConfig {
        grid_dim: (132 * 16, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = g.stream().launch_builder(&fill);
    let n64 = n as u64;
    launch.arg(&mut dev).arg(&n64).arg(&s);
    // SAFETY: fill(unsigned char*, u64, u64) writes x[0..n), and dev holds n bytes.
    unsafe { launch.launch(cfg) }.unwrap();
    // The only 255 sits past 2^32 (twice: the first one is the argmax).
    let top = [(1usize << 32) + 5, (1 << 32) + 77];
    for i in top {
        g.stream()
            .memcpy_htod(&[255u8], &mut dev.slice_mut(i..i + 1))
            .unwrap();
    }
    // CPU references, exact for integers whatever the order: all cores.
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = n.div_ceil(threads);
    let (sum, min) = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                sc.spawn(move || {
                    let (mut sum, mut min) = (0u64, u8::MAX);
                    for i in t * chunk..((t + 1) * chunk).min(n) {
                        let v = if top.contains(&i) {
                            255
                        } else {
                            pattern(i as u64, s)
                        };
                        sum += v as u64;
                        min = min.min(v);
                    }
                    (sum, min)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .fold((0u64, u8::MAX), |a, b| (a.0 + b.0, a.1.min(b.1)))
    });
    assert_eq!(g.reduce(&dev, WideSum).unwrap(), sum as u128);
    assert_eq!(g.reduce(&dev, Sum).unwrap(), sum as u8);
    assert_eq!(
        g.reduce(&dev, ArgMax).unwrap(),
        Indexed {
            value: 255,
            index: top[0] as u64
        }
    );
    assert_eq!(
        g.reduce(&dev, MinMax).unwrap(),
        MinMaxValue { min, max: 255 }
    );
    assert_eq!(g.reduce(&dev, Mean).unwrap(), sum as f64 / n as f64);
    // A view that starts past 2^32.
    let tail = dev.slice(top[0] + 1..);
    assert_eq!(
        g.reduce(&tail, ArgMax).unwrap(),
        Indexed {
            value: 255,
            index: (top[1] - top[0] - 1) as u64
        }
    );
    // Run to run, the whole tree over 2^33 positions: the same bits.
    let a = g.reduce(&dev, MeanVar).unwrap();
    assert!(same(&a, &g.reduce(&dev, MeanVar).unwrap()));
    assert_eq!(a.count, n as f64);
}

#[test]
#[ignore = "needs a CUDA device"]
fn reduce_into_is_asynchronous_and_checks_its_output() {
    let g = gpu();
    let host: Vec<i32> = (0..100_000).collect();
    let dev = upload(g, &host);
    let r = g.reducer::<i32, _>(Sum).unwrap();
    let mut outs: Vec<CudaSlice<i32>> = (0..8)
        .map(|_| g.stream().clone_htod(&[poison::<i32>()]).unwrap())
        .collect();
    for (k, out) in outs.iter_mut().enumerate() {
        r.reduce_into(&dev.slice(k * 1000..), out).unwrap(); // no synchronisation in between
    }
    for (k, out) in outs.iter().enumerate() {
        let want: i32 = host[k * 1000..]
            .iter()
            .fold(0i32, |a, &b| a.wrapping_add(b));
        assert_eq!(g.stream().clone_dtoh(out).unwrap(), [want]);
    }
    let mut two = g.stream().alloc_zeros::<i32>(2).unwrap();
    assert_eq!(
        r.reduce_into(&dev, &mut two).unwrap_err().kind(),
        ErrorKind::LengthMismatch
    );
    let empty = upload::<f32>(g, &[]);
    assert_eq!(g.reduce(&empty, Sum).unwrap(), 0.0);
    assert_eq!(
        g.reduce(&empty, Max).unwrap_err().kind(),
        ErrorKind::EmptyInput
    );
    assert_eq!(g.reduce_host(&[] as &[f32], Prod).unwrap(), 1.0);
}

#[derive(Clone, Copy)]
struct Broken;
impl Operator<f32> for Broken {
    type Acc = f32;
    type Out = f32;
    const COMMUTATIVE: bool = true;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "Broken";
    fn identity(&self) -> f32 {
        0.0
    }
    fn lift(&self, x: f32, _: u64) -> f32 {
        x
    }
    fn combine(&self, a: f32, b: f32) -> f32 {
        a + b
    }
    fn finish(&self, a: f32, _: u64) -> f32 {
        a
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: "BrokenOp".into(),
            source:
                "struct BrokenOp {\n  typedef float In; typedef float Acc; typedef float Out;\n  \
                     __device__ Acc identity() const { return 0.0f; }\n  \
                     __device__ Acc lift(In x, unsigned long long) const { return x; }\n  \
                     __device__ Acc combine(Acc a, Acc b) const { return a + undefined_thing; }\n  \
                     __device__ Out finish(Acc a, unsigned long long) const { return a; }\n};"
                    .into(),
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_kernel_that_fails_to_compile_reports_the_log_and_the_source() {
    let e = gpu().reducer::<f32, _>(Broken).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Compile);
    let msg = e.to_string();
    assert!(msg.contains("undefined_thing"), "{msg}");
    assert!(
        msg.contains("--- generated source around the error ---"),
        "{msg}"
    );
    assert!(
        msg.lines()
            .any(|l| l.starts_with('>') && l.contains("undefined_thing")),
        "{msg}"
    );
    assert!(e.compile_log().unwrap().contains("error"));
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_disk_cache_serves_a_second_handle() {
    let dir = std::env::temp_dir().join(format!("cufold-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = GpuOptions::default().disk_cache(cufold::DiskCache::Dir(dir.clone()));
    let g = Gpu::with_options(gpu().stream(), opts).unwrap();
    let dev = upload(&g, &[1.5f64, 2.5]);
    // A block size no other test uses for f64 sums, so that the kernel is compiled here
    // rather than found in this process's memory cache.
    let config = ReduceConfig::default().block(64);
    let r = g.reducer_with::<f64, _>(Sum, config).unwrap();
    assert_eq!(r.reduce(&dev).unwrap(), 4.0);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .collect();
    assert!(
        files
            .iter()
            .any(|f| f.path().extension().is_some_and(|x| x == "cubin")),
        "no cubin in {dir:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The reduction shapes the compile-only tests build for `O` over `T`: 256 threads, and for
/// an operator whose kernels read lane runs the shape the reducer gives it (128 threads, 8
/// loads a thread: the staged ring of kernels/reduce.cuh).
fn compiled_shapes<T: DeviceValue, O: Operator<T>>() -> Vec<cufold::reduce::ReduceShape> {
    let shape = cufold::reduce::ReduceShape {
        order_free: O::ORDER_FREE,
        ..cufold::reduce::ReduceShape::for_sizes(std::mem::size_of::<T>(), 256).unwrap()
    };
    let lane_runs = (O::LANE_RUNS && !O::ORDER_FREE).then_some(cufold::reduce::ReduceShape {
        block: 128,
        loads: 8,
        ..shape
    });
    std::iter::once(shape).chain(lane_runs).collect()
}

#[test]
#[ignore = "needs NVRTC (part of the CUDA toolkit)"]
fn every_builtin_kernel_compiles_for_hopper() {
    if !compile_only_test_runs("every_builtin_kernel_compiles_for_hopper") {
        return;
    }
    fn build<T: DeviceValue, O: Operator<T>>(op: O) {
        // One block size here (and the lane-run shape): the other GPU tests run several.
        for shape in compiled_shapes::<T, O>() {
            for vector in [false, shape.vec as usize * std::mem::size_of::<T>() == 16] {
                if let Err(e) = cufold::reduce::compile_kernel(
                    &op.cuda(),
                    op.params().bytes().len(),
                    &shape,
                    vector,
                    "sm_90",
                ) {
                    panic!("{} over {}: {e}", O::NAME, T::cuda_name());
                }
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
    macro_rules! floats {
        ($($t:ty),*) => {$(
            // The float-only operators, whose runs stage their tiles in shared memory.
            jobs.push(Box::new(|| {
                build::<$t, _>(ExactSum); build::<$t, _>(ExactMean);
                build::<$t, _>(CompensatedSum);
            }));
        )*};
    }
    floats!(f32, f64, f16, bf16);
    jobs.push(Box::new(|| build::<f32, _>(Div2Mean)));
    jobs.push(Box::new(|| build::<f64, _>(Div2Mean)));
    jobs.push(Box::new(|| build::<Affine<f32>, _>(Compose)));
    jobs.push(Box::new(|| build::<Affine<f64>, _>(Compose)));
    jobs.push(Box::new(|| build::<Mat2<f32>, _>(MatMul)));
    jobs.push(Box::new(|| build::<Mat2<f64>, _>(MatMul)));
    jobs.push(Box::new(|| build::<u32, _>(TreeShape)));
    run_parallel(jobs);
}

/// The wrappers that keep an operator's faster forms (kernels/reduce.cuh: lane runs,
/// `combine_full`, the tame combine) compile in every kernel that takes them: a distributed
/// share's `cf::Tree` and `cf::At` (its node and its scan's lifts), Monte Carlo's `cf::Mapped`,
/// over operators with all, some or none of those forms.
#[test]
#[ignore = "needs a CUDA device"]
fn wrapped_operators_compile_for_hopper() {
    if !compile_only_test_runs("wrapped_operators_compile_for_hopper") {
        return;
    }
    use cufold::monte_carlo::{compile_kernel as mc_kernel, Draws, MonteCarlo};
    fn wrap(kind: &str, op: CudaOp) -> CudaOp {
        CudaOp {
            type_name: format!("cf::{kind}<{}>", op.type_name),
            source: op.source,
        }
    }
    fn build<T: DeviceValue, O: Operator<T>>(op: O) {
        // The wrappers' parameters: the operator's, then the first position (8 bytes).
        let bytes = OpParams::pair(&op.params(), &OpParams::of(&0u64))
            .bytes()
            .len();
        for shape in compiled_shapes::<T, O>() {
            for kind in ["Tree", "At"] {
                for vector in [false, shape.vec as usize * std::mem::size_of::<T>() == 16] {
                    let cuda = wrap(kind, op.cuda());
                    if let Err(e) =
                        cufold::reduce::compile_kernel(&cuda, bytes, &shape, vector, "sm_90")
                    {
                        panic!("cf::{kind}<{}> over {}: {e}", O::NAME, T::cuda_name());
                    }
                }
            }
        }
    }
    fn sample<O: Operator<f32> + Send + 'static>(op: O) {
        let mc = MonteCarlo::<f32, _>::new(Identity).reduce_with(op);
        let mapped = mc.operator();
        for tree in [false, true] {
            let (cuda, params) = (
                <_ as Operator<f32>>::cuda(&mapped),
                <_ as Operator<f32>>::params(&mapped),
            );
            let (cuda, params) = match tree {
                true => (
                    wrap("Tree", cuda),
                    OpParams::pair(&params, &OpParams::of(&0u64)),
                ),
                false => (cuda, params),
            };
            let bytes = params.bytes().len();
            for draws in [Draws::Uniform, Draws::Normal] {
                if let Err(e) = mc_kernel(&cuda, bytes, draws, "sm_90") {
                    panic!(
                        "Monte Carlo {} (tree {tree}, {draws:?}): {e}",
                        cuda.type_name
                    );
                }
            }
        }
    }
    let jobs: Vec<Job> = vec![
        Box::new(|| build::<f32, _>(MeanVar)),
        Box::new(|| build::<f64, _>(MeanVar)),
        Box::new(|| build::<f32, _>(CompensatedSum)),
        Box::new(|| build::<f32, _>(Sum)),
        Box::new(|| build::<f64, _>(Sum)),
        Box::new(|| build::<f32, _>(Mean)),
        Box::new(|| build::<f32, _>(ArgMax)),
        Box::new(|| build::<f64, _>(ExactSum)),
        Box::new(|| sample(MeanVar)),
        Box::new(|| sample(Mean)),
        Box::new(|| sample(CompensatedSum)),
    ];
    run_parallel(jobs);
}

/// CUDA's per-thread default stream (`per_thread_stream()`, candle's) is one handle for a
/// different stream in each thread. One cufold handle on it, shared by threads that scan and
/// reduce at the same time, gives every thread the CPU's bits: each thread gets its own
/// scratch memory (one ticket word and look-back shared by unordered launches would mix
/// their tiles).
#[test]
#[ignore = "needs a CUDA device"]
fn threads_sharing_a_handle_on_the_per_thread_stream_get_the_cpus_bits() {
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let g = Gpu::new(&ctx.per_thread_stream()).unwrap();
    let n = (1 << 22) + 5;
    let host: Vec<f32> = (0..n)
        .map(|i| (i * 7919 % 1000) as f32 / 64.0 - 7.0)
        .collect();
    let cpu = Cpu::new();
    let want_scan = cpu.scan(&host, Sum, cufold::ScanKind::Inclusive).unwrap();
    let want_sum: f32 = cpu.reduce(&host, Sum).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let (g, host, want_scan) = (&g, &host, &want_scan);
            s.spawn(move || {
                let stream = g.stream().clone();
                let x = stream.clone_htod(host).unwrap();
                let mut out = stream.alloc_zeros::<f32>(n).unwrap();
                for round in 0..40 {
                    g.scan(&x, &mut out, Sum, cufold::ScanKind::Inclusive)
                        .unwrap();
                    let sum: f32 = g.reduce(&x, Sum).unwrap();
                    assert_eq!(
                        sum.to_bits(),
                        want_sum.to_bits(),
                        "thread {t} round {round}"
                    );
                    if round % 8 == 7 {
                        let got = stream.clone_dtoh(&out).unwrap();
                        let bad = got
                            .iter()
                            .zip(want_scan)
                            .position(|(a, b)| a.to_bits() != b.to_bits());
                        assert_eq!(bad, None, "thread {t} round {round}: first wrong prefix");
                    }
                }
            });
        }
    });
}
