//! CPU tests: they run everywhere (CI has no GPU). The CPU backend against exact
//! references, the tree's shape, operator laws on exact data, errors and empty inputs.

mod common;
use common::*;
use cufold::ops::*;
use cufold::{bf16, f16, Cpu, ErrorKind};

const SIZES: &[usize] = &[
    0,
    1,
    2,
    3,
    5,
    31,
    32,
    33,
    255,
    256,
    257,
    4095,
    4096,
    4097,
    65537,
    1 << 20,
    (1 << 20) + 1,
];

#[test]
fn the_tree_is_the_canonical_tree_for_every_size_and_thread_count() {
    for threads in [1, 2, 3, 8] {
        let cpu = Cpu::with_threads(threads);
        for &n in SIZES.iter().chain(&[100_003, 1 << 21, 3 << 19]) {
            let x = vec![0u32; n];
            // TreeShape breaks the identity law on purpose (it records the tree).
            let root = cufold::__private::without_law_check(|| cpu.reduce(&x, TreeShape)).unwrap();
            assert_eq!(root, canonical_root(n as u64), "n = {n}, {threads} threads");
        }
    }
}

#[test]
fn integer_sums_are_exact_and_wrap() {
    let s = seed("integer_sums_are_exact_and_wrap");
    for &n in SIZES {
        let x: Vec<i32> = data(n, s ^ n as u64);
        let want = x.iter().fold(0i32, |a, &b| a.wrapping_add(b));
        assert_eq!(Cpu::new().reduce(&x, Sum).unwrap(), want, "n = {n}");
        let wide = x.iter().map(|&v| v as i128).sum::<i128>();
        assert_eq!(Cpu::new().reduce(&x, WideSum).unwrap(), wide, "n = {n}");
        let y: Vec<u8> = data(n, s ^ n as u64);
        assert_eq!(
            Cpu::new().reduce(&y, WideSum).unwrap(),
            y.iter().map(|&v| v as u128).sum::<u128>()
        );
        assert_eq!(
            Cpu::new().reduce(&y, Sum).unwrap(),
            y.iter().fold(0u8, |a, &b| a.wrapping_add(b))
        );
    }
}

#[test]
fn float_sums_of_dyadic_data_are_exact() {
    // Multiples of 2^-10 below 2^10: every partial sum of up to 2^21 of them is exact in
    // f64, whatever the order, so the tree must give the exact sum.
    let s = seed("float_sums_of_dyadic_data_are_exact");
    let mut r = Rng(s);
    for &n in SIZES {
        let x: Vec<f64> = (0..n)
            .map(|_| ((r.next() % (1 << 20)) as f64 - (1 << 19) as f64) / 1024.0)
            .collect();
        let exact: i128 = x.iter().map(|&v| (v * 1024.0) as i128).sum();
        assert_eq!(
            Cpu::new().reduce(&x, Sum).unwrap(),
            exact as f64 / 1024.0,
            "n = {n}"
        );
        let mean = Cpu::new().reduce(&x, Mean);
        if n > 0 {
            assert_eq!(mean.unwrap(), (exact as f64 / 1024.0) / n as f64);
        }
    }
}

#[test]
fn div2mean_is_the_pairwise_sum_scaled_by_a_power_of_two() {
    let s = seed("div2mean_is_the_pairwise_sum_scaled_by_a_power_of_two");
    for &n in SIZES.iter().filter(|&&n| n > 0) {
        let x: Vec<f32> = data(n, s ^ n as u64);
        let p = (n as u64).next_power_of_two();
        let sum = Cpu::new().reduce_acc(&x, Sum);
        let halved = Cpu::new().reduce_acc(&x, Div2Mean);
        let scaled = sum * (1.0 / p as f64) as f32;
        assert!(same(&halved, &scaled), "n = {n}: {halved:?} vs {scaled:?}");
        let mean = Cpu::new().reduce(&x, Div2Mean).unwrap();
        assert_eq!(mean, (halved as f64 * (p as f64 / n as f64)) as f32);
        let y: Vec<f64> = data(n, s ^ n as u64);
        let (sum, halved) = (
            Cpu::new().reduce_acc(&y, Sum),
            Cpu::new().reduce_acc(&y, Div2Mean),
        );
        assert!(same(&halved, &(sum / p as f64)), "f64 n = {n}");
    }
}

#[test]
fn div2mean_has_overflow_headroom_that_sum_lacks() {
    let big = f32::MAX / 2.0;
    let x = vec![big; 1000];
    assert_eq!(Cpu::new().reduce(&x, Sum).unwrap(), f32::INFINITY);
    let m = Cpu::new().reduce(&x, Div2Mean).unwrap();
    assert!(m.is_finite() && (m / big - 1.0).abs() < 1e-6, "{m}");
}

#[test]
fn extremes_and_their_indices() {
    let s = seed("extremes_and_their_indices");
    for &n in SIZES.iter().filter(|&&n| n > 0) {
        let x: Vec<i64> = data(n, s ^ n as u64);
        let max = *x.iter().max().unwrap();
        let min = *x.iter().min().unwrap();
        let cpu = Cpu::new();
        assert_eq!(cpu.reduce(&x, Max).unwrap(), max);
        assert_eq!(cpu.reduce(&x, Min).unwrap(), min);
        assert_eq!(cpu.reduce(&x, MinMax).unwrap(), MinMaxValue { min, max });
        let am = cpu.reduce(&x, ArgMax).unwrap();
        assert_eq!(
            (am.value, am.index),
            (max, x.iter().position(|&v| v == max).unwrap() as u64)
        );
        let am = cpu.reduce(&x, ArgMin).unwrap();
        assert_eq!(
            (am.value, am.index),
            (min, x.iter().position(|&v| v == min).unwrap() as u64)
        );
    }
}

#[test]
fn ties_go_to_the_lowest_index() {
    let mut x = vec![1u32; 10_000];
    for i in [7777, 300, 9000] {
        x[i] = 5;
    }
    assert_eq!(
        Cpu::new().reduce(&x, ArgMax).unwrap(),
        Indexed {
            value: 5,
            index: 300
        }
    );
    assert_eq!(
        Cpu::new().reduce(&x, ArgMin).unwrap(),
        Indexed { value: 1, index: 0 }
    );
    let flat = vec![f32::NEG_INFINITY; 33];
    assert_eq!(Cpu::new().reduce(&flat, ArgMax).unwrap().index, 0);
}

#[test]
fn nan_propagates_like_numpy() {
    let mut x: Vec<f32> = (0..5000).map(|i| i as f32).collect();
    x[1234] = f32::NAN;
    x[4000] = f32::NAN;
    let cpu = Cpu::new();
    assert!(cpu.reduce(&x, Max).unwrap().is_nan());
    assert!(cpu.reduce(&x, Min).unwrap().is_nan());
    let mm = cpu.reduce(&x, MinMax).unwrap();
    assert!(mm.min.is_nan() && mm.max.is_nan());
    assert_eq!(cpu.reduce(&x, ArgMax).unwrap().index, 1234);
    assert_eq!(cpu.reduce(&x, ArgMin).unwrap().index, 1234);
    let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
    assert_eq!(cpu.reduce(&h, ArgMax).unwrap().index, 1234);
    let b: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    assert!(cpu.reduce(&b, Max).unwrap().is_nan());
}

/// Min and Max order -0.0 below 0.0 whatever the order of the inputs (IEEE 754-2019's
/// minimum and maximum), so they are order-free; the arg- operators see two equal values
/// and report the lowest index.
#[test]
fn signed_zeros_are_ordered_the_same_way_in_every_order() {
    let cpu = Cpu::new();
    for z in [[-0.0f32, 0.0], [0.0, -0.0]] {
        assert!(cpu.reduce(&z, Min).unwrap().is_sign_negative());
        assert!(cpu.reduce(&z, Max).unwrap().is_sign_positive());
        let mm = cpu.reduce(&z, MinMax).unwrap();
        assert!(mm.min.is_sign_negative() && mm.max.is_sign_positive());
        assert_eq!(cpu.reduce(&z, ArgMin).unwrap().index, 0);
        assert_eq!(cpu.reduce(&z, ArgMax).unwrap().index, 0);
    }
    assert!(cpu.reduce(&[-0.0f64, 0.0], Max).unwrap().is_sign_positive());
    let h = [f16::from_f32(0.0), f16::from_f32(-0.0)];
    assert!(cpu.reduce(&h, Min).unwrap().is_sign_negative());
}

#[test]
fn half_precision_rounds_after_every_add() {
    // 2048 + 1 is not representable in f16 (11 significant bits): rounds to even, 2048.
    let x = [f16::from_f32(2048.0), f16::from_f32(1.0)];
    assert_eq!(Cpu::new().reduce(&x, Sum).unwrap(), f16::from_f32(2048.0));
    assert_eq!(Cpu::new().reduce(&x, WideSum).unwrap(), 2049.0f32);
    assert_eq!(Cpu::new().reduce(&x, Mean).unwrap(), 1024.5);
}

/// MeanVar gives NumPy's `mean` and `var * n` on extremes: no overflow of the difference
/// makes the mean infinite, an infinity keeps the mean infinite and makes the variance NaN.
#[test]
fn meanvar_follows_numpy_on_infinities_and_overflow() {
    let cpu = Cpu::new();
    let mv = |x: &[f64]| cpu.reduce(x, MeanVar).unwrap();
    let r = mv(&[f64::MAX, -f64::MAX]);
    assert_eq!((r.count, r.mean, r.m2), (2.0, 0.0, f64::INFINITY));
    let r = mv(&[f64::INFINITY, 1.0]);
    assert_eq!(r.mean, f64::INFINITY);
    assert!(r.m2.is_nan());
    let r = mv(&[f64::INFINITY, f64::INFINITY]);
    assert_eq!(r.mean, f64::INFINITY);
    assert!(r.m2.is_nan());
    let r = mv(&[1.0, f64::NEG_INFINITY, 2.0, 3.0, 4.0]);
    assert_eq!(r.mean, f64::NEG_INFINITY);
    assert!(r.m2.is_nan());
    assert!(mv(&[f64::INFINITY, f64::NEG_INFINITY]).mean.is_nan());
    // Finite data far from overflow keeps the ordinary update (mean 2, m2 2).
    let r = mv(&[1.0, 2.0, 3.0]);
    assert_eq!((r.mean, r.m2), (2.0, 2.0));
}

/// The equal-count shortcut (weight 0.5, no division) gives the bits of the division it
/// skips: every combine of equal counts equals the Chan-Golub-LeVeque update written out.
#[test]
fn meanvar_equal_counts_skip_the_division_with_the_same_bits() {
    let mut rng = Rng(seed("meanvar_equal_counts"));
    for _ in 0..10_000 {
        let c = (1u64 << (rng.next() % 40)) as f64;
        let a = MeanVarValue {
            count: c,
            mean: rng.unit() * 1e3 - 500.0,
            m2: rng.unit() * c,
        };
        let b = MeanVarValue {
            count: c,
            mean: rng.unit() * 1e-3,
            m2: rng.unit() * c,
        };
        let r = <MeanVar as Operator<f64>>::combine(&MeanVar, a, b);
        let n = a.count + b.count;
        let w = b.count / n;
        let d = b.mean - a.mean;
        assert_eq!(r.mean.to_bits(), (a.mean + d * w).to_bits());
        assert_eq!(
            r.m2.to_bits(),
            (a.m2 + b.m2 + d * d * (a.count * w)).to_bits()
        );
    }
}

#[test]
fn mean_and_variance_match_a_two_pass_reference() {
    let s = seed("mean_and_variance_match_a_two_pass_reference");
    for &n in SIZES.iter().filter(|&&n| n > 1) {
        let x: Vec<f32> = data::<f32>(n, s ^ n as u64)
            .iter()
            .map(|v| v * 3.0 + 1e3)
            .collect();
        let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let m2 = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>();
        let mv = Cpu::new().reduce(&x, MeanVar).unwrap();
        assert_eq!(mv.count, n as f64);
        assert!(
            (mv.mean - mean).abs() <= 1e-12 * mean.abs(),
            "n = {n}: {} vs {mean}",
            mv.mean
        );
        assert!(
            (mv.m2 - m2).abs() <= 1e-9 * m2.max(1e-300),
            "n = {n}: {} vs {m2}",
            mv.m2
        );
        let m = Cpu::new().reduce(&x, Mean).unwrap();
        assert!((m - mean).abs() <= 1e-12 * mean.abs());
    }
}

/// The premise of the GPU's byte runs (kernels/ops.cuh, `MeanVar::byte_run`): on u8 inputs,
/// the canonical tree over 2^k positions (k <= 18) holds the exact count, mean and m2, so
/// computing a node from its integer sum and sum of squares gives the tree's bits.
#[test]
fn meanvar_of_bytes_is_exact_on_power_of_two_runs() {
    let s = seed("meanvar_of_bytes_is_exact_on_power_of_two_runs");
    let mut r = Rng(s);
    for k in 0..=18u32 {
        let n = 1usize << k;
        let patterns: [Vec<u8>; 5] = [
            (0..n).map(|_| r.next() as u8).collect(),
            (0..n).map(|i| if i % 2 == 0 { 0 } else { 255 }).collect(),
            (0..n).map(|i| if i < n / 2 { 0 } else { 255 }).collect(),
            vec![255; n],
            (0..n)
                .map(|_| if r.next() % 3 == 0 { 255 } else { 254 })
                .collect(),
        ];
        for x in &patterns {
            let sum: u128 = x.iter().map(|&v| v as u128).sum();
            let sumsq: u128 = x.iter().map(|&v| (v as u128) * (v as u128)).sum();
            let inv = 1.0 / n as f64;
            let exact = MeanVarValue {
                count: n as f64,
                mean: sum as f64 * inv,
                m2: ((n as u128) * sumsq - sum * sum) as f64 * inv,
            };
            let tree = Cpu::new().reduce(x, MeanVar).unwrap();
            assert!(
                tree.same_bits(&exact),
                "n = 2^{k}: tree {tree:?}, exact {exact:?}"
            );
        }
    }
}

#[test]
fn non_commutative_operators_keep_order() {
    // Small dyadic maps: all arithmetic is exact, so the tree's result equals the
    // sequential composition exactly, and reversing the input changes it.
    let s = seed("non_commutative_operators_keep_order");
    let mut r = Rng(s);
    for &n in &[1usize, 2, 3, 7, 64, 1000, 4097] {
        let maps: Vec<Affine<f64>> = (0..n)
            .map(|_| Affine {
                a: if r.next() % 2 == 0 { 1.0 } else { -1.0 },
                b: (r.next() % 16) as f64,
            })
            .collect();
        let seq = maps.iter().fold(Affine { a: 1.0, b: 0.0 }, |f, g| Affine {
            a: g.a * f.a,
            b: g.a * f.b + g.b,
        });
        let tree = Cpu::new().reduce(&maps, Compose).unwrap();
        assert_eq!(tree, seq, "n = {n}");
        // Applying the composition equals running the recurrence.
        let mut x = 0.5;
        for f in &maps {
            x = f.apply(x);
        }
        assert_eq!(tree.apply(0.5), x);
    }
    let a = Mat2 {
        m00: 1.0f64,
        m01: 2.0,
        m10: 0.0,
        m11: 1.0,
    };
    let b = Mat2 {
        m00: 1.0f64,
        m01: 0.0,
        m10: 3.0,
        m11: 1.0,
    };
    let ab = Cpu::new().reduce(&[a, b], MatMul).unwrap();
    let ba = Cpu::new().reduce(&[b, a], MatMul).unwrap();
    assert_eq!(
        ab,
        Mat2 {
            m00: 7.0,
            m01: 2.0,
            m10: 3.0,
            m11: 1.0
        }
    );
    assert_ne!(ab, ba);
}

#[test]
fn operator_laws_hold_on_exact_data() {
    let s = seed("operator_laws_hold_on_exact_data");
    let mut r = Rng(s);
    fn laws<T: cufold::DeviceValue, O: Operator<T>>(op: O, xs: &[T], name: &str)
    where
        O::Acc: PartialEq,
    {
        let id = op.identity();
        assert!(
            same(&op.combine(id, id), &id),
            "{name}: combine(id, id) != id"
        );
        for (i, w) in xs.windows(3).enumerate() {
            let (a, b, c) = (
                op.lift(w[0], i as u64),
                op.lift(w[1], i as u64 + 1),
                op.lift(w[2], i as u64 + 2),
            );
            assert!(
                same(&op.combine(id, a), &a) && same(&op.combine(a, id), &a),
                "{name}: identity at {i}"
            );
            let l = op.combine(op.combine(a, b), c);
            let r = op.combine(a, op.combine(b, c));
            assert!(
                same(&l, &r),
                "{name}: not associative at {i}: {l:?} vs {r:?}"
            );
        }
    }
    let ints: Vec<i32> = (0..200).map(|_| r.next() as i32).collect();
    laws(Sum, &ints, "Sum<i32>");
    laws(Prod, &ints, "Prod<i32>");
    laws(Min, &ints, "Min<i32>");
    laws(Max, &ints, "Max<i32>");
    laws(MinMax, &ints, "MinMax<i32>");
    laws(ArgMax, &ints, "ArgMax<i32>");
    laws(ArgMin, &ints, "ArgMin<i32>");
    laws(WideSum, &ints, "WideSum<i32>");
    let small: Vec<f32> = (0..200).map(|_| (r.next() % 64) as f32 - 32.0).collect();
    laws(Sum, &small, "Sum<f32> on integers");
    laws(Max, &small, "Max<f32>");
    laws(ArgMin, &small, "ArgMin<f32>");
    let maps: Vec<Affine<f64>> = (0..200)
        .map(|_| Affine {
            a: (r.next() % 5) as f64 - 2.0,
            b: (r.next() % 9) as f64,
        })
        .collect();
    laws(Compose, &maps, "Compose<f64>");
    let mats: Vec<Mat2<f64>> = (0..200)
        .map(|_| Mat2 {
            m00: (r.next() % 3) as f64,
            m01: (r.next() % 3) as f64,
            m10: (r.next() % 3) as f64,
            m11: 1.0,
        })
        .collect();
    laws(MatMul, &mats, "MatMul<f64>");
}

#[test]
fn empty_inputs_return_the_documented_value_or_an_error() {
    let cpu = Cpu::new();
    let e: &[f32] = &[];
    assert_eq!(cpu.reduce(e, Sum).unwrap(), 0.0);
    assert_eq!(cpu.reduce(e, Prod).unwrap(), 1.0);
    assert_eq!(cpu.reduce(e, WideSum).unwrap(), 0.0f64);
    for kind in [
        cpu.reduce(e, Min).unwrap_err().kind(),
        cpu.reduce(e, Max).unwrap_err().kind(),
        cpu.reduce(e, MinMax).unwrap_err().kind(),
        cpu.reduce(e, ArgMin).unwrap_err().kind(),
        cpu.reduce(e, ArgMax).unwrap_err().kind(),
        cpu.reduce(e, Mean).unwrap_err().kind(),
        cpu.reduce(e, MeanVar).unwrap_err().kind(),
        cpu.reduce(e, Div2Mean).unwrap_err().kind(),
    ] {
        assert_eq!(kind, ErrorKind::EmptyInput);
    }
    let msg = cpu.reduce(e, ArgMax).unwrap_err().to_string();
    assert!(msg.contains("ArgMax") && msg.contains("empty"), "{msg}");
    assert_eq!(
        cpu.reduce(&[] as &[Affine<f32>], Compose).unwrap(),
        Affine { a: 1.0, b: 0.0 }
    );
    let i = cpu.reduce(&[] as &[Mat2<f64>], MatMul).unwrap();
    assert_eq!((i.m00, i.m01, i.m10, i.m11), (1.0, 0.0, 0.0, 1.0));
}

/// Opening a GPU never panics. Where there is certainly no CUDA (CI, which `.ci/run` marks
/// with `CUFOLD_CI`), it must be a [`ErrorKind::NoCuda`] error and `Backend::auto` the CPU:
/// a regression to calling cudarc without probing (which panics without `libcuda`) or to
/// reporting a usable device fails here. Elsewhere either answer is allowed, and
/// `a_cuda_device_opens` (ignored without a device) checks the other side.
#[test]
fn no_cuda_is_an_error_never_a_panic() {
    let opened = cufold::Gpu::open(0);
    let b = cufold::Backend::auto();
    if std::env::var_os("CUFOLD_CI").is_some() {
        let e = opened.expect_err("CI has no CUDA: Gpu::open must return an Error");
        assert_eq!(e.kind(), ErrorKind::NoCuda, "{e}");
        assert!(!e.to_string().is_empty());
        assert!(matches!(b, cufold::Backend::Cpu(_)), "{}", b.describe());
    } else if let Err(e) = opened {
        assert!(!e.to_string().is_empty());
        assert!(matches!(b, cufold::Backend::Cpu(_)), "{}", b.describe());
    }
    assert_eq!(b.reduce(&[1.0f64, 3.0], Mean).unwrap(), 2.0);
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_cuda_device_opens() {
    let gpu = cufold::Gpu::open(0).expect("a CUDA device");
    assert!(!gpu.device_name().is_empty());
    let b = cufold::Backend::auto();
    assert!(matches!(b, cufold::Backend::Gpu(_)), "{}", b.describe());
}

#[test]
fn cuda_names_match_the_kernel_templates() {
    use cufold::DeviceValue;
    assert_eq!(f16::cuda_name(), "cf::f16");
    assert_eq!(bf16::cuda_name(), "cf::bf16");
    assert_eq!(i64::cuda_name(), "long long");
    assert_eq!(Indexed::<f64>::cuda_name(), "cf::Indexed<double>");
    assert_eq!(MinMaxValue::<u8>::cuda_name(), "cf::MinMaxV<unsigned char>");
    assert_eq!(Affine::<f32>::cuda_name(), "cf::Affine<float>");
    assert_eq!(Mat2::<f64>::cuda_name(), "cf::Mat2<double>");
    assert_eq!(MeanVarValue::cuda_name(), "cf::MeanVarV");
    assert_eq!(
        <ArgMax as Operator<u32>>::cuda(&ArgMax).type_name,
        "cf::ArgMax<unsigned int>"
    );
    assert_eq!(
        <Compose as Operator<Affine<f64>>>::cuda(&Compose).type_name,
        "cf::Compose<double>"
    );
    // Every template the Rust side names exists in the header.
    let header = cufold::cuda_header();
    for t in [
        "Sum", "Prod", "Min", "Max", "MinMax", "ArgMax", "ArgMin", "WideSum", "Mean", "MeanVar",
        "Div2Mean", "Compose", "MatMul",
    ] {
        assert!(header.contains(&format!("struct {t} ")), "kernels lack {t}");
    }
    // Layouts match the C++ structs (checked on the device by the GPU tests too).
    assert_eq!(std::mem::size_of::<Indexed<f16>>(), 16);
    assert_eq!(std::mem::size_of::<MeanVarValue>(), 24);
}

/// `laws::check` on no samples checks nothing, and says so instead of passing.
#[test]
fn laws_on_an_empty_sample_are_an_error() {
    use cufold::laws::{check, Law, Tolerance};
    let e = check(Sum, &[] as &[f32], Tolerance::Exact).unwrap_err();
    assert_eq!(e.law(), Law::NoSamples);
    assert!(
        e.to_string().contains("nothing about Sum was checked"),
        "{e}"
    );
    check(Sum, &[1.0f32], Tolerance::Exact).unwrap();
}

/// The tests' bit comparison (tests/common `same`): by bits for scalars and cufold's value
/// types, NaNs of any payload equal, signed zeros apart; by Debug text for the rest.
#[test]
fn the_tests_bit_comparison_keeps_signed_zeros_apart_and_nans_together() {
    use cufold::ops::{Affine, Indexed, MeanVarValue, MinMaxValue};
    assert!(same(&1.5f32, &1.5f32) && !same(&0.0f32, &-0.0f32));
    assert!(same(&f32::NAN, &f32::from_bits(0x7fc0_0001)) && !same(&f32::NAN, &1.0));
    assert!(!same(&0.0f64, &-0.0f64) && same(&f64::NAN, &-f64::NAN));
    assert!(!same(&cufold::f16::ZERO, &cufold::f16::NEG_ZERO));
    assert!(same(&7u8, &7u8) && !same(&7i64, &8i64));
    let ix = |value: f32, index: u64| Indexed { value, index };
    assert!(same(&ix(1.0, 3), &ix(1.0, 3)) && !same(&ix(1.0, 3), &ix(1.0, 4)));
    assert!(!same(&ix(0.0, 3), &ix(-0.0, 3)) && same(&ix(f32::NAN, 3), &ix(-f32::NAN, 3)));
    let mm = |min: i32, max: i32| MinMaxValue { min, max };
    assert!(same(&mm(1, 2), &mm(1, 2)) && !same(&mm(1, 2), &mm(1, 3)));
    let mv = |m2: f64| MeanVarValue {
        count: 2.0,
        mean: 1.0,
        m2,
    };
    assert!(same(&mv(0.5), &mv(0.5)) && !same(&mv(0.0), &mv(-0.0)));
    let af = |a: f64| Affine { a, b: 1.0 };
    assert!(same(&af(2.0), &af(2.0)) && !same(&af(2.0), &af(3.0)));
    // Types without a bit path: their Debug text.
    assert!(same(&(1.0f32, 2u64), &(1.0f32, 2u64)) && !same(&(0.0f32, 2u64), &(-0.0f32, 2u64)));
    assert!(!same(&Some(1.0f32), &Some(2.0f32)) && same(&Some(f32::NAN), &Some(-f32::NAN)));
}
