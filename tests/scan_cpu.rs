//! CPU tests of scans: they run everywhere (CI has no GPU). The canonical grouping, exact
//! references (integer counts, dyadic floats), every operator's prefixes against a
//! sequential definition, in place and into a buffer, errors.

mod common;
use common::*;
use cufold::ops::*;
use cufold::{Cpu, ErrorKind, ScanKind};

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
    65535,
    65537,
    (1 << 18) + 3,
];

/// The canonical prefix at every position, computed the slow, obvious way: the left fold,
/// largest block first, of the balanced trees over the aligned power-of-two blocks of
/// `[0, len)`.
fn definition<T: cufold::DeviceValue, O: Operator<T>>(op: &O, x: &[T], len: usize) -> O::Acc {
    fn tree<T: cufold::DeviceValue, O: Operator<T>>(
        op: &O,
        x: &[T],
        lo: usize,
        n: usize,
    ) -> O::Acc {
        if n == 1 {
            op.lift(x[lo], lo as u64)
        } else {
            op.combine(tree(op, x, lo, n / 2), tree(op, x, lo + n / 2, n / 2))
        }
    }
    let mut acc: Option<O::Acc> = None;
    let mut lo = 0;
    for bit in (0..usize::BITS).rev() {
        let size = 1usize << bit;
        if len & size != 0 {
            let t = tree(op, x, lo, size);
            acc = Some(match acc {
                None => t,
                Some(a) => op.combine(a, t),
            });
            lo += size;
        }
    }
    acc.unwrap_or_else(|| op.identity())
}

#[test]
fn scans_follow_the_canonical_grouping_for_every_size_and_thread_count() {
    for threads in [1, 2, 3, 8] {
        let cpu = Cpu::with_threads(threads);
        for &n in SIZES {
            let x = vec![0u32; n];
            for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
                // FoldShape breaks the identity law on purpose (it records the grouping).
                let got =
                    cufold::__private::without_law_check(|| cpu.scan(&x, FoldShape, kind)).unwrap();
                for (i, g) in got.iter().enumerate() {
                    let want = canonical_prefix(i as u64, kind == ScanKind::Inclusive);
                    assert_eq!(*g, want, "n = {n}, i = {i}, {kind:?}, {threads} threads");
                }
            }
        }
    }
}

#[test]
fn float_prefixes_have_the_bits_of_the_definition() {
    let s = seed("float_prefixes_have_the_bits_of_the_definition");
    for &n in &[1usize, 7, 100, 1000, 5000, 70_000] {
        let x: Vec<f32> = data(n, s ^ n as u64);
        let inc = Cpu::with_threads(4)
            .scan(&x, Sum, ScanKind::Inclusive)
            .unwrap();
        let exc = Cpu::with_threads(3)
            .scan(&x, Sum, ScanKind::Exclusive)
            .unwrap();
        for i in (0..n).step_by(n / 97 + 1).chain([n - 1]) {
            let want = definition(&Sum, &x, i + 1);
            assert_eq!(
                inc[i].to_bits(),
                want.to_bits(),
                "inclusive n = {n}, i = {i}"
            );
            let want = definition(&Sum, &x, i);
            assert_eq!(
                exc[i].to_bits(),
                want.to_bits(),
                "exclusive n = {n}, i = {i}"
            );
        }
    }
}

#[test]
fn cumulative_counts_of_a_histogram_are_exact() {
    // Bin 2^20 hashed values into 1000 bins; the inclusive sum of the counts is the number
    // of values at or below each bin, exactly, and the last one is the total.
    let s = seed("cumulative_counts_of_a_histogram_are_exact");
    let mut r = Rng(s);
    let mut counts = vec![0u32; 1000];
    let values: Vec<u64> = (0..1 << 20).map(|_| r.next() % 1000).collect();
    for &v in &values {
        counts[v as usize] += 1;
    }
    let cdf = Cpu::new().scan(&counts, Sum, ScanKind::Inclusive).unwrap();
    for (b, &c) in cdf.iter().enumerate() {
        assert_eq!(
            c,
            values.iter().filter(|&&v| v <= b as u64).count() as u32,
            "bin {b}"
        );
    }
    assert_eq!(*cdf.last().unwrap(), 1 << 20);
    let starts = Cpu::new().scan(&counts, Sum, ScanKind::Exclusive).unwrap();
    assert_eq!(starts[0], 0);
    for b in 1..1000 {
        assert_eq!(starts[b], cdf[b - 1]);
    }
}

#[test]
fn integer_and_dyadic_prefixes_equal_sequential_sums() {
    let s = seed("integer_and_dyadic_prefixes_equal_sequential_sums");
    for &n in SIZES {
        let xi: Vec<i32> = data(n, s ^ n as u64);
        let got = Cpu::new().scan(&xi, Sum, ScanKind::Inclusive).unwrap();
        let mut acc = 0i32;
        for i in 0..n {
            acc = acc.wrapping_add(xi[i]);
            assert_eq!(got[i], acc, "n = {n}, i = {i}");
        }
        let wide = Cpu::new().scan(&xi, WideSum, ScanKind::Exclusive).unwrap();
        let mut acc = 0i128;
        for i in 0..n {
            assert_eq!(wide[i], acc, "n = {n}, i = {i}");
            acc += xi[i] as i128;
        }
        // Multiples of 2^-10 below 2^10: every partial sum is exact in f64.
        let xf: Vec<f64> = xi
            .iter()
            .map(|&v| (v % (1 << 20)) as f64 / 1024.0)
            .collect();
        let got = Cpu::new().scan(&xf, Sum, ScanKind::Inclusive).unwrap();
        let mut acc = 0f64;
        for i in 0..n {
            acc += xf[i];
            assert_eq!(got[i], acc, "n = {n}, i = {i}");
        }
    }
}

#[test]
fn every_operator_scans_to_its_prefixes() {
    let s = seed("every_operator_scans_to_its_prefixes");
    let n = 3000;
    let x: Vec<f64> = data(n, s);
    let cpu = Cpu::with_threads(3);
    let max = cpu.scan(&x, Max, ScanKind::Inclusive).unwrap();
    let min = cpu.scan(&x, Min, ScanKind::Inclusive).unwrap();
    let arg = cpu.scan(&x, ArgMax, ScanKind::Inclusive).unwrap();
    let mm = cpu.scan(&x, MinMax, ScanKind::Exclusive).unwrap();
    let mean = cpu.scan(&x, Mean, ScanKind::Inclusive).unwrap();
    let mv = cpu.scan(&x, MeanVar, ScanKind::Inclusive).unwrap();
    for i in 0..n {
        let head = &x[..=i];
        let m = head.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(max[i], m);
        assert_eq!(min[i], head.iter().cloned().fold(f64::INFINITY, f64::min));
        assert_eq!(arg[i].value, m);
        assert_eq!(
            arg[i].index,
            head.iter().position(|&v| v == m).unwrap() as u64,
            "ties go to the lowest index"
        );
        let exact = head.iter().sum::<f64>() / (i + 1) as f64;
        assert!((mean[i] - exact).abs() < 1e-12, "mean at {i}");
        assert_eq!(mv[i].count, (i + 1) as f64);
        assert!((mv[i].mean - exact).abs() < 1e-12);
        // m2: the sum of squared deviations, two-pass in f64.
        let m2: f64 = head.iter().map(|&v| (v - exact) * (v - exact)).sum();
        assert!(
            (mv[i].m2 - m2).abs() <= 1e-12 * m2.max(1.0),
            "m2 at {i}: {} vs {m2}",
            mv[i].m2
        );
        if i > 0 {
            assert_eq!(mm[i].max, max[i - 1]);
            assert_eq!(mm[i].min, min[i - 1]);
        }
    }
    // Exclusive output 0 is finish(identity, 0).
    assert_eq!(mm[0].min, f64::INFINITY);
    assert_eq!(mm[0].max, f64::NEG_INFINITY);
    assert!(cpu.scan(&x, Mean, ScanKind::Exclusive).unwrap()[0].is_nan());
}

#[test]
fn affine_scans_solve_a_linear_recurrence_in_order() {
    // x[t+1] = a[t] x[t] + b[t]: the inclusive scan of the maps applied to x[0] is x[t+1].
    let s = seed("affine_scans_solve_a_linear_recurrence_in_order");
    let maps: Vec<Affine<f64>> = data(10_000, s);
    let pre = Cpu::with_threads(4)
        .scan(&maps, Compose, ScanKind::Inclusive)
        .unwrap();
    let mut xt = 0.25f64;
    for (t, m) in maps.iter().enumerate() {
        xt = m.apply(xt);
        let got = pre[t].apply(0.25);
        assert!(
            (got - xt).abs() <= 1e-9 * xt.abs().max(1.0),
            "t = {t}: {got} vs {xt}"
        );
    }
    // Matrix prefixes, in order: Fibonacci numbers, exactly.
    let fib = Mat2 {
        m00: 1.0f64,
        m01: 1.0,
        m10: 1.0,
        m11: 0.0,
    };
    let p = Cpu::new()
        .scan(&[fib; 40], MatMul, ScanKind::Inclusive)
        .unwrap();
    let (mut a, mut b) = (0.0f64, 1.0f64);
    for m in &p {
        (a, b) = (b, a + b);
        assert_eq!(m.m01, a);
    }
}

#[test]
fn in_place_and_into_agree_and_check_lengths() {
    let s = seed("in_place_and_into_agree_and_check_lengths");
    for &n in SIZES {
        let x: Vec<f32> = data(n, s ^ n as u64);
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            let want = Cpu::new().scan(&x, Sum, kind).unwrap();
            let mut y = x.clone();
            Cpu::with_threads(5)
                .scan_in_place(&mut y, Sum, kind)
                .unwrap();
            assert!(same(&y, &want), "n = {n}, {kind:?}");
        }
    }
    let mut short = [0f32; 2];
    let e = Cpu::new()
        .scan_into(&[1f32, 2.0, 3.0], &mut short, Sum, ScanKind::Inclusive)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
    // The message says which length is which (not only the two numbers somewhere).
    assert!(
        e.to_string()
            .contains("the input has 3 elements but the output 2"),
        "{e}"
    );
}

#[test]
fn div2mean_cannot_be_scanned() {
    let e = Cpu::new()
        .scan(&[1.0f32, 2.0], Div2Mean, ScanKind::Inclusive)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    assert!(e.to_string().contains("Mean"), "{e}");
    assert!(Cpu::new()
        .scan(&[] as &[f32], Max, ScanKind::Exclusive)
        .unwrap()
        .is_empty());
}

/// Outputs of 8 MiB and more are written with non-temporal stores (16-byte aligned runs) and
/// a fence; an output that does not start on 16 bytes takes the plain copy. Both must write
/// every prefix, on one thread and on several, for `scan`, `scan_into` and `scan_in_place`.
#[test]
fn large_outputs_take_the_streaming_path_and_keep_every_prefix() {
    let s = seed("large_outputs_take_the_streaming_path_and_keep_every_prefix");
    let n = (1usize << 21) + 37; // 8 MiB of u32 and a tail, 32 MiB of u128
    let x: Vec<u32> = data(n, s);
    let mut narrow = vec![0u32; n];
    let mut wide = vec![0u128; n];
    let (mut a, mut b) = (0u32, 0u128);
    for i in 0..n {
        a = a.wrapping_add(x[i]);
        b += x[i] as u128;
        narrow[i] = a;
        wide[i] = b;
    }
    let first_diff = |got: &[u32], want: &[u32]| got.iter().zip(want).position(|(g, w)| g != w);
    for threads in [1, 3] {
        let cpu = Cpu::with_threads(threads);
        let inc = cpu.scan(&x, Sum, ScanKind::Inclusive).unwrap();
        assert_eq!(first_diff(&inc, &narrow), None, "scan, {threads} threads");
        let exc = cpu.scan(&x, WideSum, ScanKind::Exclusive).unwrap();
        assert_eq!(exc[0], 0, "{threads} threads");
        let bad = exc[1..].iter().zip(&wide).position(|(g, w)| g != w);
        assert_eq!(bad, None, "exclusive WideSum, {threads} threads");
        // One element in: the output starts 4 bytes past the allocation's alignment.
        let mut buf = vec![u32::MAX; n + 1];
        cpu.scan_into(&x, &mut buf[1..], Sum, ScanKind::Inclusive)
            .unwrap();
        assert_eq!(buf[0], u32::MAX, "nothing written before the output");
        assert_eq!(
            first_diff(&buf[1..], &narrow),
            None,
            "scan_into, {threads} threads"
        );
        let mut y = x.clone();
        cpu.scan_in_place(&mut y, Sum, ScanKind::Inclusive).unwrap();
        assert_eq!(first_diff(&y, &narrow), None, "in place, {threads} threads");
    }
}
