//! The debug-build law check of the CPU backend (`laws::debug_check`): an operator whose
//! identity is wrong, or that claims to be order-free and is not, is an `InvalidConfig`
//! error on the first values of a reduction or a scan; the built-in operators pass on
//! values that exercise every rule (signed zeros, NaN payloads, infinities, ties). Release
//! builds check nothing: there the same calls succeed (with the wrong results).

use cufold::ops::{self, Operator};
use cufold::{bf16, f16, Cpu, ErrorKind, ScanKind};

/// A sum whose identity is wrong.
#[cufold::op(identity = 1.0, commutative)]
fn sum_from_one(a: f64, b: f64) -> f64 {
    a + b
}

/// A max whose identity is wrong for negative values.
#[cufold::op(identity = 0, commutative)]
fn max_from_zero(a: i32, b: i32) -> i32 {
    a.max(b)
}

/// Subtraction claimed order-free: 0 is only its right identity.
#[cufold::op(identity = 0, order_free)]
fn minus(a: i64, b: i64) -> i64 {
    a.wrapping_sub(b)
}

/// Float addition claimed order-free: its identity holds, but not associativity.
#[cufold::op(identity = 0.0, order_free)]
fn float_sum_claimed_order_free(a: f64, b: f64) -> f64 {
    a + b
}

/// The first non-zero value: associative with identity 0, but not commutative.
#[cufold::op(identity = 0, order_free)]
fn first_nonzero(a: u32, b: u32) -> u32 {
    if a == 0 {
        b
    } else {
        a
    }
}

/// Bitwise or, rightly claimed order-free.
#[cufold::op(identity = 0, order_free)]
fn bit_or(a: u32, b: u32) -> u32 {
    a | b
}

#[cfg(debug_assertions)]
fn law_error<T>(r: cufold::Result<T>) -> String {
    match r {
        Ok(_) => panic!("the debug-build check let a broken law through"),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidConfig, "{e}");
            let m = e.to_string();
            assert!(m.contains("laws::check is the test to write"), "{m}");
            m
        }
    }
}

#[cfg(debug_assertions)]
#[test]
fn a_wrong_identity_is_an_error_on_the_cpu_on_finite_values() {
    let cpu = Cpu::new();
    let x = [2.0f64, 3.0, 5.0];
    let m = law_error(cpu.reduce(&x, sum_from_one));
    assert!(m.contains("left identity fails for sum_from_one"), "{m}");
    assert!(
        m.contains("combine(identity, identity) = 2.0 but identity = 1.0"),
        "{m}"
    );
    assert!(m.contains("Cpu::reduce"), "{m}");
    // The values that break the law are shown.
    let m = law_error(cpu.reduce(&[4i32, -5, 2], max_from_zero));
    assert!(m.contains("left identity fails for max_from_zero"), "{m}");
    assert!(m.contains("a = lift(x[1] = -5) = -5"), "{m}");
    assert!(
        m.contains("combine(identity, a) = 0 but a = -5 (identity = 0)"),
        "{m}"
    );
    let m = law_error(cpu.scan(&x, sum_from_one, ScanKind::Inclusive));
    assert!(
        m.contains("left identity fails for sum_from_one") && m.contains("Cpu::scan"),
        "{m}"
    );
    let mut y = x;
    law_error(cpu.scan_in_place(&mut y, sum_from_one, ScanKind::Exclusive));
    assert_eq!(y, x, "nothing is scanned after the check fails");
    // Values with a NaN or an infinity are left out for an operator that is not
    // order-free: there the wrong identity goes unseen.
    let m = law_error(cpu.reduce(&[f64::NAN, 2.0], sum_from_one));
    assert!(m.contains("identity"), "{m}");
    let m = law_error(cpu.reduce(&[i32::MIN, 4], max_from_zero));
    assert!(m.contains("x[0] = -2147483648"), "{m}");
}

#[cfg(debug_assertions)]
#[test]
fn a_false_order_free_claim_is_an_error_on_the_cpu() {
    let cpu = Cpu::new();
    let m = law_error(cpu.reduce(&[5i64, 3, 1], minus));
    assert!(m.contains("left identity fails for minus"), "{m}");
    assert!(m.contains("bit for bit"), "{m}");
    let m = law_error(cpu.reduce(&[0.1f64, 0.2, 0.3], float_sum_claimed_order_free));
    assert!(
        m.contains("associativity fails for float_sum_claimed_order_free"),
        "{m}"
    );
    assert!(m.contains("lift(x[0] = 0.1) = 0.1"), "{m}");
    let m = law_error(cpu.scan(&[0u32, 7, 9], first_nonzero, ScanKind::Inclusive));
    assert!(m.contains("commutativity fails for first_nonzero"), "{m}");
    assert!(m.contains("claims to be order-free"), "{m}");
}

#[test]
fn lawful_operators_pass_and_the_check_looks_at_the_first_values_only() {
    let cpu = Cpu::new();
    let words: Vec<u32> = (0..1000u32)
        .map(|i| i.wrapping_mul(2_654_435_761) >> 7)
        .collect();
    let or = words.iter().fold(0, |a, b| a | b);
    assert_eq!(cpu.reduce(&words, bit_or).unwrap(), or);
    // Only the first eight values are tried: a zero among them keeps first_nonzero's
    // counterexamples out of reach (every pair with a zero commutes).
    let mut zeros = vec![0u32; 8];
    zeros.extend([7, 9]);
    assert_eq!(cpu.reduce(&zeros, first_nonzero).unwrap(), 7);
    // Probes that break the laws on purpose can turn the check off.
    let r = cufold::__private::without_law_check(|| cpu.reduce(&[2.0f64, 3.0], sum_from_one));
    assert_eq!(r.unwrap(), 5.0);
    // Nothing to check on an empty input.
    assert_eq!(cpu.reduce(&[], sum_from_one).unwrap(), 1.0);
}

/// Values that exercise every rule of the built-ins: signed zeros, infinities, NaNs with
/// different payloads and signs, ties.
fn nasty() -> Vec<f32> {
    let mut v = vec![
        -0.0f32,
        0.0,
        1.0,
        -1.0,
        1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        2.5,
    ];
    for bits in [
        0x7fc0_0000u32,
        0x7fc0_0001,
        0xffc0_0000,
        0x7f80_0001,
        0xff80_0123,
    ] {
        v.push(f32::from_bits(bits));
    }
    v
}

/// Every window of eight of `x` (so that each value is among the first eight of some
/// call), reduced and scanned with `op`.
fn every_window<T: cufold::DeviceValue, O: Operator<T>>(x: &[T], op: O) {
    let cpu = Cpu::new();
    for start in 0..x.len() {
        let w = &x[start..];
        cpu.reduce(w, op)
            .unwrap_or_else(|e| panic!("{}: {e}", O::name()));
        if O::SCANNABLE {
            cpu.scan(w, op, ScanKind::Inclusive)
                .unwrap_or_else(|e| panic!("{}: {e}", O::name()));
        }
        // Reversed, so that every order of neighbours is tried.
        let r: Vec<T> = w.iter().rev().copied().collect();
        cpu.reduce(&r, op)
            .unwrap_or_else(|e| panic!("{}: {e}", O::name()));
    }
}

macro_rules! every_builtin {
    ($x:expr) => {{
        let x = $x;
        every_window(&x, ops::Sum);
        every_window(&x, ops::Prod);
        every_window(&x, ops::WideSum);
        every_window(&x, ops::Mean);
        every_window(&x, ops::Min);
        every_window(&x, ops::Max);
        every_window(&x, ops::MinMax);
        every_window(&x, ops::ArgMin);
        every_window(&x, ops::ArgMax);
        every_window(&x, ops::MeanVar);
        every_window(&x, ops::Mapped::new(ops::Identity, ops::Max));
    }};
}

#[test]
fn the_builtins_pass_on_signed_zeros_nans_and_ties() {
    let x = nasty();
    every_builtin!(x.clone());
    every_builtin!(x.iter().map(|&v| v as f64).collect::<Vec<f64>>());
    every_builtin!(x.iter().map(|&v| f16::from_f32(v)).collect::<Vec<f16>>());
    every_builtin!(x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<bf16>>());
    let ints: Vec<i64> = vec![0, -1, 1, i64::MIN, i64::MAX, 7, 7, -3, 0, 2];
    every_builtin!(ints.clone());
    every_builtin!(ints.iter().map(|&v| v as i32).collect::<Vec<i32>>());
    every_builtin!(ints.iter().map(|&v| v as u64).collect::<Vec<u64>>());
    every_builtin!(ints.iter().map(|&v| v as u32).collect::<Vec<u32>>());
    every_builtin!(ints.iter().map(|&v| v as u8).collect::<Vec<u8>>());
    // Div2Mean is no monoid (its identity is a padding value): not checked.
    every_window(&x, ops::Div2Mean);
    // Affine maps, infinite and NaN coefficients included: `identity ∘ f` is `inf * 0.0`,
    // a NaN, in `b` when `f.a` is infinite, which laws::check reports; the debug-build check
    // tries the identity of an operator that is not order-free on finite values only.
    let maps: Vec<ops::Affine<f64>> = x
        .iter()
        .zip(x.iter().rev())
        .map(|(&a, &b)| ops::Affine {
            a: a as f64,
            b: b as f64,
        })
        .collect();
    every_window(&maps, ops::Compose);
    let inf = [ops::Affine {
        a: f64::INFINITY,
        b: 1.0,
    }];
    assert!(Cpu::new().reduce(&inf, ops::Compose).is_ok());
    let e = cufold::laws::check(ops::Compose, &inf, cufold::laws::Tolerance::Exact).unwrap_err();
    assert_eq!(e.law(), cufold::laws::Law::LeftIdentity);
}

#[cfg(not(debug_assertions))]
#[test]
fn release_builds_do_not_check() {
    let cpu = Cpu::new();
    assert_eq!(cpu.reduce(&[2.0f64, 3.0], sum_from_one).unwrap(), 5.0);
    assert!(cpu.reduce(&[5i64, 3, 1], minus).is_ok());
}
