//! ExactSum and ExactMean on the CPU, against an exact reference written from the IEEE
//! rules (tests/exact/common.rs): the hard cases, ill-conditioned and wide-exponent random
//! sums (fixed seeds), every split of the input giving the same bits, and the laws.

#[path = "exact/common.rs"]
mod common;

use common::*;
use cufold::laws::{check, Tolerance};
use cufold::ops::{ExactFloat, ExactMean, ExactSum, Operator};
use cufold::segment::Rows;
use cufold::{bf16, f16, Cpu, ErrorKind, ScanKind};

fn same_bits<F: Fmt>(a: F, b: F) -> bool {
    a.bits() == b.bits()
}

/// ExactSum (and, for n ≥ 1, ExactMean) of `xs` on the CPU equal the reference, bit for
/// bit, and so do those of the reversed input and of a single thread's reduction.
fn check_both<F: Fmt + ExactFloat>(xs: &[F], what: &str)
where
    ExactSum: Operator<F, Out = F>,
    ExactMean: Operator<F, Out = F>,
{
    let cpu = Cpu::new();
    let want = reference(xs, false);
    let got = cpu.reduce(xs, ExactSum).unwrap();
    assert!(
        same_bits(got, want),
        "{what}: ExactSum of {} elements: {got:?} ({:#x}), want {want:?} ({:#x})",
        xs.len(),
        got.bits(),
        want.bits()
    );
    let mut rev = xs.to_vec();
    rev.reverse();
    assert!(
        same_bits(cpu.reduce(&rev, ExactSum).unwrap(), want),
        "{what}: reversed"
    );
    if xs.is_empty() {
        assert_eq!(
            cpu.reduce(xs, ExactMean).unwrap_err().kind(),
            ErrorKind::EmptyInput
        );
        return;
    }
    let want = reference(xs, true);
    let got = cpu.reduce(xs, ExactMean).unwrap();
    assert!(
        same_bits(got, want),
        "{what}: ExactMean of {} elements: {got:?} ({:#x}), want {want:?} ({:#x})",
        xs.len(),
        got.bits(),
        want.bits()
    );
}

#[test]
fn the_reference_gives_the_stated_answers() {
    // The reference itself, on answers worked out by hand or by Python's math.fsum.
    for (xs, want) in hard_f64() {
        let got = reference(&xs, false);
        match want {
            Some(w) => assert_eq!(got.to_bits(), w.to_bits(), "{xs:?}"),
            None => assert_eq!(got.to_bits(), nan_bits::<f64>(), "{xs:?}"),
        }
    }
    for (xs, want) in hard_f32() {
        let got = reference(&xs, false);
        match want {
            Some(w) => assert_eq!(got.to_bits(), w.to_bits(), "{:?}", &xs[..xs.len().min(4)]),
            None => assert_eq!(got.to_bits() as u64, nan_bits::<f32>()),
        }
    }
    // Means: 3 * 2^-1074 / 2 is a tie between 1 and 2 units (to even: 2); 2^-1074 / 2 one
    // between 0 and 1 (to even: 0); a negative mean below half a unit is -0.
    let tiny = two(-1074);
    assert_eq!(reference(&[3.0 * tiny, 0.0], true), 2.0 * tiny);
    assert_eq!(reference(&[tiny, 0.0], true).to_bits(), 0);
    assert_eq!(
        reference(&[-tiny, 0.0, 0.0], true).to_bits(),
        (-0.0f64).to_bits()
    );
    assert_eq!(reference(&[1.0f64, 2.0], true), 1.5);
    assert_eq!(reference(&[f64::MAX, f64::MAX], true), f64::MAX);
    assert_eq!(reference(&[1.0f64, 1.0, 2.0], true), 4.0 / 3.0);
}

#[test]
fn hard_cases_f64() {
    for (xs, want) in hard_f64() {
        check_both(&xs, "hard f64");
        let got = Cpu::new().reduce(&xs, ExactSum).unwrap();
        match want {
            Some(w) => assert_eq!(got.to_bits(), w.to_bits(), "{xs:?}"),
            None => assert_eq!(got.to_bits(), 0x7ff8_0000_0000_0000, "{xs:?}"),
        }
    }
}

#[test]
fn hard_cases_f32() {
    for (xs, want) in hard_f32() {
        check_both(&xs, "hard f32");
        let got = Cpu::new().reduce(&xs, ExactSum).unwrap();
        match want {
            Some(w) => assert_eq!(got.to_bits(), w.to_bits()),
            None => assert_eq!(got.to_bits(), 0x7fc0_0000),
        }
    }
    // The mean of 2^20 copies of 0.1f32 is 0.1f32 itself, exactly.
    let tenths = vec![0.1f32; 1 << 20];
    assert_eq!(Cpu::new().reduce(&tenths, ExactMean).unwrap(), 0.1);
}

#[test]
fn exact_means_round_once() {
    let tiny = two(-1074);
    let cases: Vec<Vec<f64>> = vec![
        vec![3.0 * tiny, 0.0],
        vec![tiny, 0.0],
        vec![-tiny, 0.0, 0.0],
        vec![-3.0 * tiny, 0.0],
        vec![f64::MAX, f64::MAX],
        vec![-f64::MAX, -f64::MAX, -f64::MAX],
        vec![1.0, 1.0, 2.0],
        vec![1.0, two(-52), 0.0],
        vec![1e300, 1.0, -1e300, 2.0, 5.0, 7.0, 11.0],
        vec![two(-1022), tiny, tiny, 0.0, 0.0, 0.0, 0.0],
        vec![-0.0, -0.0],
        vec![0.1; 1000],
    ];
    for xs in cases {
        check_both(&xs, "mean");
    }
    // Means with n beyond 2^48 (the long division's multi-word remainders): the finish
    // of the accumulator of a few elements, with a larger n.
    let acc = Cpu::new().reduce_acc(&[1e300f64, -3.0, two(-1000)], ExactSum);
    let e = exact_sum(&[1e300f64, -3.0, two(-1000)]);
    for n in [3u64, 1 << 48, (1 << 50) + 1, u64::MAX, u64::MAX / 3] {
        let got = <ExactMean as Operator<f64>>::finish(&ExactMean, acc, n);
        assert_eq!(got.to_bits(), common::round::<f64>(&e.sum, n), "n = {n}");
    }
    assert!(<ExactMean as Operator<f64>>::finish(&ExactMean, acc, 0).is_nan());
}

#[test]
fn no_element_and_one_element() {
    let cpu = Cpu::new();
    assert_eq!(cpu.reduce(&[] as &[f64], ExactSum).unwrap().to_bits(), 0);
    assert_eq!(cpu.reduce(&[] as &[f32], ExactSum).unwrap().to_bits(), 0);
    let one = |x: f64| {
        let s = cpu.reduce(&[x], ExactSum).unwrap();
        let m = cpu.reduce(&[x], ExactMean).unwrap();
        if x.is_nan() {
            assert_eq!((s.to_bits(), m.to_bits()), (0x7ff8 << 48, 0x7ff8 << 48));
        } else {
            assert_eq!(
                (s.to_bits(), m.to_bits()),
                (x.to_bits(), x.to_bits()),
                "{x}"
            );
        }
    };
    for x in [
        0.0,
        -0.0,
        1.0,
        -2.5,
        two(-1074),
        -two(-1074),
        two(-1022) - two(-1074),
        f64::MAX,
        -f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001), // a signalling NaN's bits
    ] {
        one(x);
    }
    for b in [
        0u32,
        0x8000_0000,
        1,
        0x8000_0001,
        0x007f_ffff,
        0x7f7f_ffff,
        0x3f80_0000,
    ] {
        let x = f32::from_bits(b);
        assert_eq!(cpu.reduce(&[x], ExactSum).unwrap().to_bits(), b);
        assert_eq!(cpu.reduce(&[x], ExactMean).unwrap().to_bits(), b);
    }
}

#[test]
fn ill_conditioned_sums_f64() {
    let mut r = rng(0x5eed_0f64);
    let mut k = 0;
    for e in (2..=40).step_by(2) {
        let cond = 10f64.powi(e);
        for n in [6usize, 7, 64, 333, 4096, 5000] {
            let xs: Vec<f64> = gen_sum(n, cond, &mut r);
            check_both(&xs, &format!("GenSum f64 cond 1e{e} n {n}"));
            k += 1;
        }
    }
    assert_eq!(k, 20 * 6);
}

#[test]
fn ill_conditioned_sums_f32() {
    let mut r = rng(0x5eed_0f32);
    for e in 2..=16 {
        let cond = 10f64.powi(e);
        for n in [6usize, 9, 100, 4097, 10_000] {
            let xs: Vec<f32> = gen_sum(n, cond, &mut r);
            check_both(&xs, &format!("GenSum f32 cond 1e{e} n {n}"));
        }
    }
}

#[test]
fn exponents_over_the_whole_range() {
    let mut r = rng(0x5eed_01de);
    for n in [1usize, 2, 3, 17, 1000, 20_000] {
        check_both(&wide_exponents::<f64>(n, &mut r), "wide f64");
        check_both(&wide_exponents::<f32>(n, &mut r), "wide f32");
        check_both(&wide_exponents::<f16>(n, &mut r), "wide f16");
        check_both(&wide_exponents::<bf16>(n, &mut r), "wide bf16");
    }
    // Small exponents only (subnormals and their neighbours), where every result is exact
    // or rounds at the subnormal unit.
    for n in [2usize, 5, 300] {
        let xs: Vec<f64> = (0..n)
            .map(|i| two(-1074) * ((i * 7919 % 4096) as f64 - 2048.0))
            .collect();
        check_both(&xs, "subnormal f64");
        let xs: Vec<f32> = (0..n)
            .map(|i| {
                f32::from_bits((i as u32 * 104_729) % 0x0100_0000)
                    * if i % 3 == 0 { -1.0 } else { 1.0 }
            })
            .collect();
        check_both(&xs, "subnormal f32");
    }
}

#[test]
fn half_precision_sums_round_once_to_their_type() {
    // Sums of f16 overflow to infinity from 65520 (the largest finite, 65504, plus half its
    // ulp), as the exact sum rounds; the mean does not overflow.
    let cpu = Cpu::new();
    let xs = vec![f16::from_f32(60000.0), f16::from_f32(6000.0)];
    assert_eq!(cpu.reduce(&xs, ExactSum).unwrap(), f16::INFINITY);
    assert_eq!(cpu.reduce(&xs, ExactMean).unwrap(), f16::from_f32(33000.0));
    let xs = vec![f16::from_f32(60000.0), f16::from_f32(5000.0)];
    assert_eq!(cpu.reduce(&xs, ExactSum).unwrap(), f16::from_f32(64992.0)); // 65000, rounded
    let mut r = rng(0x5eed_0016);
    for n in [6usize, 64, 1000] {
        let xs: Vec<f16> = gen_sum(n, 1e4, &mut r);
        check_both(&xs, "GenSum f16");
        let xs: Vec<bf16> = gen_sum(n, 1e10, &mut r);
        check_both(&xs, "GenSum bf16");
    }
    let ones = vec![bf16::ONE; 4097];
    check_both(&ones, "bf16 ones"); // 4097 is not a bf16: rounds to 4096
    assert_eq!(cpu.reduce(&ones, ExactSum).unwrap(), bf16::from_f32(4096.0));
}

#[test]
fn every_split_and_order_gives_the_same_bits() {
    let mut r = rng(0x5eed_5b17);
    let mut xs: Vec<f64> = gen_sum(40_000, 1e30, &mut r);
    xs.extend(wide_exponents::<f64>(10_000, &mut r));
    let cpu = Cpu::new();
    let acc = cpu.reduce_acc(&xs, ExactSum);
    let want = reference(&xs, false);
    assert_eq!(cpu.reduce(&xs, ExactSum).unwrap().to_bits(), want.to_bits());
    // Shuffled, on one thread, and as the combine of uneven parts in either order.
    let mut shuffled = xs.clone();
    shuffle(&mut shuffled, &mut r);
    assert_eq!(cpu.reduce_acc(&shuffled, ExactSum), acc);
    assert_eq!(Cpu::with_threads(1).reduce_acc(&xs, ExactSum), acc);
    for cut in [1usize, 4095, 4096, 12_345, 49_999] {
        let (a, b) = xs.split_at(cut);
        let (a, b) = (cpu.reduce_acc(a, ExactSum), cpu.reduce_acc(b, ExactSum));
        assert_eq!(<ExactSum as Operator<f64>>::combine(&ExactSum, a, b), acc);
        assert_eq!(<ExactSum as Operator<f64>>::combine(&ExactSum, b, a), acc);
    }
    // Rows and segments: each its own reference.
    let rows = cpu.reduce_rows(&xs, Rows::new(50, 1000), ExactSum).unwrap();
    for (row, got) in xs.chunks(1000).zip(&rows) {
        assert_eq!(got.to_bits(), reference(row, false).to_bits());
    }
    let offsets: Vec<u64> = vec![0, 0, 1, 3, 100, 4196, 4197, 30_000, 50_000];
    let segs = cpu.reduce_segments(&xs, &offsets, ExactMean).unwrap();
    for (w, got) in offsets.windows(2).zip(&segs) {
        let seg = &xs[w[0] as usize..w[1] as usize];
        match got {
            None => assert!(seg.is_empty()),
            Some(m) => assert_eq!(m.to_bits(), reference(seg, true).to_bits()),
        }
    }
    // By key: runs of equal keys.
    let keys: Vec<u32> = (0..xs.len() as u32).map(|i| (i / 777) % 5).collect();
    let by = cpu.reduce_by_key(&keys, &xs, ExactSum).unwrap();
    let mut at = 0usize;
    for (len, got) in by.lengths.iter().zip(&by.values) {
        let run = &xs[at..at + *len as usize];
        assert_eq!(got.to_bits(), reference(run, false).to_bits());
        at += *len as usize;
    }
    assert_eq!(at, xs.len());
}

#[test]
fn the_laws_hold_bit_for_bit() {
    let f64s = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        1e100,
        -1e100,
        two(-1074),
        -two(-1074),
        f64::MAX,
        -f64::MAX,
        two(-53),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        0.1,
        -3.75e-300,
    ];
    check(ExactSum, &f64s, Tolerance::Bits).unwrap();
    check(ExactMean, &f64s, Tolerance::Bits).unwrap();
    let f32s: Vec<f32> = f64s
        .iter()
        .map(|&x| x as f32)
        .chain([f32::from_bits(1), f32::MAX])
        .collect();
    check(ExactSum, &f32s, Tolerance::Bits).unwrap();
    check(ExactMean, &f32s, Tolerance::Bits).unwrap();
    let f16s: Vec<f16> = f32s.iter().map(|&x| f16::from_f32(x)).collect();
    check(ExactSum, &f16s, Tolerance::Bits).unwrap();
    let bf16s: Vec<bf16> = f32s.iter().map(|&x| bf16::from_f32(x)).collect();
    check(ExactSum, &bf16s, Tolerance::Bits).unwrap();
    let mut r = rng(0x5eed_1a35);
    check(
        ExactSum,
        &wide_exponents::<f64>(60, &mut r),
        Tolerance::Bits,
    )
    .unwrap();
    assert!(<ExactSum as Operator<f64>>::ORDER_FREE && <ExactMean as Operator<f32>>::ORDER_FREE);
}

#[test]
fn scans_give_each_prefix_rounded_once() {
    let mut r = rng(0x5eed_5ca4);
    let xs: Vec<f64> = gen_sum(300, 1e20, &mut r);
    let cpu = Cpu::new();
    let inc = cpu.scan(&xs, ExactSum, ScanKind::Inclusive).unwrap();
    let mean = cpu.scan(&xs, ExactMean, ScanKind::Inclusive).unwrap();
    for i in 0..xs.len() {
        assert_eq!(
            inc[i].to_bits(),
            reference(&xs[..=i], false).to_bits(),
            "prefix {i}"
        );
        assert_eq!(
            mean[i].to_bits(),
            reference(&xs[..=i], true).to_bits(),
            "mean {i}"
        );
    }
}
