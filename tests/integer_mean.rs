//! Integer means and wide sums never wrap: `WideSum` of integers adds exactly in 128 bits,
//! and `Mean` of integers is the correctly rounded (nearest, ties to even) f64 of the exact
//! sum over N. CPU tests, with the regression cases as reported; the CUDA half of the
//! rounding (kernels/types.cuh, `cf::round_ratio`) is compiled for the host by a C++
//! compiler and held to the Rust half's bits on the same values (the GPU tests in
//! tests/integer_mean_gpu.rs hold the device to them).
//!
//! Every input here is fixed (patterns, or a fixed-seed generator): no run can fail where
//! another passes.

mod common;

use common::host::Driver;
use cufold::ops::{round_ratio_to_f64, round_ratio_to_f64_unsigned, Mean, MeanVar, Sum, WideSum};
use cufold::segment::Rows;
use cufold::{Cpu, ScanKind, Widen};

// The decimal literals are the expected values as the report states them: 2^64 and -2^63,
// exactly (clippy would have them shortened to the shortest round-trip form).
#[allow(clippy::excessive_precision)]
#[test]
fn the_reported_means_are_exact() {
    let cpu = Cpu::new();
    let two63 = 2f64.powi(63);
    // Was -1.0 (the i64 sum wrapped to -2).
    assert_eq!(cpu.reduce(&[i64::MAX, i64::MAX], Mean).unwrap(), two63);
    // Was 9.22e18 (the u64 sum wrapped to 2^64 - 2).
    assert_eq!(cpu.reduce(&[u64::MAX; 2], Mean).unwrap(), 2f64.powi(64));
    assert_eq!(
        cpu.reduce(&[u64::MAX; 2], Mean).unwrap(),
        1.8446744073709551616e19
    );
    let m = cpu.reduce(&[i64::MIN, i64::MIN], Mean).unwrap();
    assert_eq!(m, -9.223372036854775808e18);
    assert_eq!(m.to_bits(), (-two63).to_bits());
    // MeanVar was right already, and stays so.
    let mv = cpu.reduce(&[i64::MAX, i64::MAX], MeanVar).unwrap();
    assert_eq!(mv.mean, two63);
}

#[test]
fn the_reported_wide_sum_is_exact() {
    let cpu = Cpu::new();
    // Was 0 (u64 accumulated in u64).
    let s: u128 = cpu.reduce(&[u64::MAX, 1], WideSum).unwrap();
    assert_eq!(s, 1u128 << 64);
    let s: i128 = cpu.reduce(&[i64::MIN, i64::MIN, -1], WideSum).unwrap();
    assert_eq!(s, -(1i128 << 64) - 1);
    let s: i128 = cpu.reduce(&[i32::MAX; 3], WideSum).unwrap();
    assert_eq!(s, 3 * i32::MAX as i128);
    let s: u128 = cpu.reduce(&[u8::MAX; 1000], WideSum).unwrap();
    assert_eq!(s, 255_000);
    let s: u128 = cpu.reduce(&[u32::MAX; 5], WideSum).unwrap();
    assert_eq!(s, 5 * u32::MAX as u128);
    // Sum keeps wrapping, as documented.
    assert_eq!(cpu.reduce(&[u64::MAX, 1], Sum).unwrap(), 0);
    assert_eq!(cpu.reduce(&[i64::MAX, i64::MAX], Sum).unwrap(), -2);
}

#[test]
fn every_integer_type_widens_to_128_bits() {
    fn wide_of<T: Widen>(_: T) -> &'static str {
        std::any::type_name::<T::Wide>()
    }
    assert_eq!(wide_of(0i32), "i128");
    assert_eq!(wide_of(0i64), "i128");
    assert_eq!(wide_of(0u8), "u128");
    assert_eq!(wide_of(0u32), "u128");
    assert_eq!(wide_of(0u64), "u128");
    assert_eq!(wide_of(0f32), "f64");
    assert_eq!(wide_of(0f64), "f64");
    assert_eq!(wide_of(cufold::f16::ZERO), "f32");
    assert_eq!(wide_of(cufold::bf16::ZERO), "f32");
}

/// Patterns of extremes at sizes past the CPU's parallel grain (2^14) and its single-thread
/// limit (2^16): the tree's every split adds exactly, so every grouping gives the exact sum.
#[test]
fn means_and_wide_sums_of_extremes_are_exact_at_every_size() {
    macro_rules! check {
        ($t:ty, $wide:ty, $ratio:path) => {
            for n in [1usize, 2, 3, 1000, (1 << 16) + 1, (1 << 20) + 3] {
                let mixed: Vec<$t> = (0..n)
                    .map(|i| match i % 5 {
                        0 | 1 | 3 => <$t>::MAX,
                        2 => <$t>::MIN,
                        _ => <$t>::MAX - (i % 7) as $t,
                    })
                    .collect();
                for (what, x) in [
                    ("MAX", vec![<$t>::MAX; n]),
                    ("MIN", vec![<$t>::MIN; n]),
                    ("mixed", mixed),
                ] {
                    let sum: $wide = x.iter().map(|&v| v as $wide).sum();
                    for threads in [1, 3] {
                        let cpu = Cpu::with_threads(threads);
                        let what = format!("{} {what} n={n} threads={threads}", stringify!($t));
                        assert_eq!(cpu.reduce(&x, WideSum).unwrap(), sum, "WideSum {what}");
                        let want = $ratio(sum, n as u64);
                        let got = cpu.reduce(&x, Mean).unwrap();
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "Mean {what}: {got} != {want}"
                        );
                    }
                }
            }
        };
    }
    check!(i32, i128, round_ratio_to_f64);
    check!(i64, i128, round_ratio_to_f64);
    check!(u8, u128, round_ratio_to_f64_unsigned);
    check!(u32, u128, round_ratio_to_f64_unsigned);
    check!(u64, u128, round_ratio_to_f64_unsigned);
    // The all-MAX mean of u64 is u64::MAX rounded (2^64), of i64 MAX 2^63, of MIN -2^63.
    let n = (1 << 20) + 3;
    assert_eq!(
        Cpu::new().reduce(&vec![u64::MAX; n], Mean).unwrap(),
        2f64.powi(64)
    );
    assert_eq!(
        Cpu::new().reduce(&vec![i64::MIN; n], Mean).unwrap(),
        -(2f64.powi(63))
    );
}

/// Scans and segmented reductions follow: 128-bit prefixes and per-row exact means.
#[test]
fn scans_and_segments_of_integer_wide_sums_are_exact() {
    let x: Vec<u64> = (0..5000)
        .map(|i| if i % 3 == 2 { 7 } else { u64::MAX })
        .collect();
    let inc = Cpu::new().scan(&x, WideSum, ScanKind::Inclusive).unwrap();
    let exc = Cpu::new().scan(&x, WideSum, ScanKind::Exclusive).unwrap();
    let mut acc = 0u128;
    for i in 0..x.len() {
        assert_eq!(exc[i], acc, "exclusive at {i}");
        acc += x[i] as u128;
        assert_eq!(inc[i], acc, "inclusive at {i}");
    }
    let means = Cpu::new().scan(&x, Mean, ScanKind::Inclusive).unwrap();
    let mut acc = 0u128;
    for i in 0..x.len() {
        acc += x[i] as u128;
        let want = round_ratio_to_f64_unsigned(acc, i as u64 + 1);
        assert_eq!(means[i].to_bits(), want.to_bits(), "running mean at {i}");
    }
    // The exclusive scan's first mean is of no elements: NaN.
    assert!(Cpu::new().scan(&x, Mean, ScanKind::Exclusive).unwrap()[0].is_nan());
    let rows = Rows::new(50, 100);
    let sums = Cpu::new().reduce_rows(&x, rows, WideSum).unwrap();
    let row_means = Cpu::new().reduce_rows(&x, rows, Mean).unwrap();
    for r in 0..50 {
        let s: u128 = x[r * 100..(r + 1) * 100].iter().map(|&v| v as u128).sum();
        assert_eq!(sums[r], s, "row {r}");
        assert_eq!(row_means[r], round_ratio_to_f64_unsigned(s, 100), "row {r}");
    }
}

// ---- round_ratio_to_f64 against an exact check ------------------------------------------

/// A 256-bit unsigned integer, little-endian words: enough for `m · 2^k` and `M · n · 2^k`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct U256([u64; 4]);

impl U256 {
    fn from(v: u128) -> U256 {
        U256([v as u64, (v >> 64) as u64, 0, 0])
    }
    fn shl(self, k: u32) -> U256 {
        let mut r = [0u64; 4];
        for i in 0..4 {
            for b in 0..64 {
                if self.0[i] >> b & 1 == 1 {
                    let p = i as u32 * 64 + b + k;
                    assert!(p < 256, "overflow");
                    r[p as usize / 64] |= 1 << (p % 64);
                }
            }
        }
        U256(r)
    }
    fn abs_diff(self, o: U256) -> U256 {
        let (a, b) = if self.cmp_key() >= o.cmp_key() {
            (self, o)
        } else {
            (o, self)
        };
        let mut r = [0u64; 4];
        let mut borrow = 0u64;
        for (i, w) in r.iter_mut().enumerate() {
            let (d, b1) = a.0[i].overflowing_sub(b.0[i]);
            let (d, b2) = d.overflowing_sub(borrow);
            *w = d;
            borrow = (b1 || b2) as u64;
        }
        U256(r)
    }
    fn cmp_key(self) -> [u64; 4] {
        [self.0[3], self.0[2], self.0[1], self.0[0]]
    }
}

/// Whether `f` (positive, normal) is the f64 nearest to `m / n`, ties to even: with
/// `f = M · 2^E`, `|m / n - f| ≤ 2^(E-1)` (half an ulp; at a power of two the ulp below is
/// half as wide, which makes the lower bound tighter, checked with the predecessor), with
/// equality only for an even `M`. Computed exactly in 256-bit integers.
fn is_nearest(f: f64, m: u128, n: u64) -> bool {
    let bits = f.to_bits();
    let e = (bits >> 52) as i32 - 1075; // f = mant · 2^e
    let mant = (bits & ((1 << 52) - 1)) | 1 << 52;
    // Compare |m - mant·n·2^e| with n·2^(e-1), all scaled by 2^(1-e) (or by 1).
    let mn2 = U256::from(2 * mant as u128 * n as u128); // 2·mant·n < 2^118
    let (lhs, half) = if e <= 1 {
        let s = (1 - e) as u32;
        (U256::from(m).shl(s).abs_diff(mn2), U256::from(n as u128))
    } else {
        let s = (e - 1) as u32;
        (
            U256::from(m).abs_diff(mn2.shl(s)),
            U256::from(n as u128).shl(s),
        )
    };
    let ok = match lhs.cmp_key().cmp(&half.cmp_key()) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => mant % 2 == 0,
        std::cmp::Ordering::Greater => false,
    };
    // Below a power of two the neighbour is a quarter-ulp nearer: if m/n < f there, the
    // predecessor must not be nearer.
    if ok && mant == 1 << 52 {
        let pred = f64::from_bits(bits - 1);
        return !is_strictly_nearer(pred, f, m, n);
    }
    ok
}

/// Whether `a` is strictly nearer to `m / n` than `b` (both positive, normal), exactly.
fn is_strictly_nearer(a: f64, b: f64, m: u128, n: u64) -> bool {
    let dist = |f: f64| {
        let bits = f.to_bits();
        let e = (bits >> 52) as i32 - 1075;
        let mant = (bits & ((1 << 52) - 1)) | 1 << 52;
        (e, U256::from(mant as u128 * n as u128))
    };
    let (ea, ma) = dist(a);
    let (eb, mb) = dist(b);
    let lo = ea.min(eb).min(0);
    let s = |e: i32| (e - lo) as u32;
    let m = U256::from(m).shl((-lo) as u32);
    let da = m.abs_diff(ma.shl(s(ea)));
    let db = m.abs_diff(mb.shl(s(eb)));
    da.cmp_key() < db.cmp_key()
}

/// splitmix64 with a fixed seed: the same values on every run.
struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
}

/// Sums and counts of every magnitude: random bits cut to random lengths, powers of two and
/// their neighbours, and multiples of n near ties.
fn ratio_cases() -> Vec<(u128, u64)> {
    let mut g = Gen(0x5eed);
    let mut cases = Vec::new();
    for _ in 0..30000 {
        let m = ((g.next() as u128) << 64 | g.next() as u128) >> (g.next() % 128);
        let n = (g.next() >> (g.next() % 64)).max(1);
        cases.push((m, n));
        // Near a tie: q + 1/2 with q around 2^53, times n, plus -1, 0 or 1.
        let q = (1u128 << 52) + (g.next() >> 11) as u128;
        let n2 = (g.next() >> (1 + g.next() % 63)).max(2) & !1; // even, so n/2 is whole
        let m2 = q * n2 as u128 + (n2 / 2) as u128;
        for d in [-1i128, 0, 1] {
            cases.push(((m2 as i128 + d) as u128, n2));
        }
    }
    for k in 0..128 {
        let p = 1u128 << k;
        for n in [
            1u64,
            2,
            3,
            7,
            10,
            1 << 53,
            (1 << 53) + 1,
            u64::MAX - 1,
            u64::MAX,
        ] {
            for m in [p, p - 1, p + 1, p.wrapping_mul(3), u128::MAX >> (127 - k)] {
                cases.push((m, n));
            }
        }
    }
    cases
}

#[test]
fn round_ratio_is_the_nearest_f64_ties_to_even() {
    for (m, n) in ratio_cases() {
        let f = round_ratio_to_f64_unsigned(m, n);
        if m == 0 {
            assert_eq!(f.to_bits(), 0, "0 / {n}");
            continue;
        }
        assert!(
            is_nearest(f, m, n),
            "{m} / {n}: {f:e} is not the nearest f64"
        );
        // The signed form: the same magnitude, negated, wherever the sum fits in i128.
        if m <= i128::MAX as u128 {
            let s = round_ratio_to_f64(m as i128, n);
            assert_eq!(s.to_bits(), f.to_bits(), "{m} / {n} signed");
            let s = round_ratio_to_f64(-(m as i128), n);
            assert_eq!(s.to_bits(), (-f).to_bits(), "-{m} / {n}");
        }
    }
    // i128::MIN, whose magnitude is 2^127.
    assert_eq!(round_ratio_to_f64(i128::MIN, 1), -(2f64.powi(127)));
    assert_eq!(round_ratio_to_f64(i128::MIN, 3), -(2f64.powi(127) / 3.0));
}

#[test]
fn round_ratio_ties_go_to_even() {
    let two = |k: i32| 2f64.powi(k);
    // Whole numbers halfway between two f64s above 2^53 (ulp 2 and 4).
    assert_eq!(round_ratio_to_f64_unsigned((1 << 53) + 1, 1), two(53));
    assert_eq!(round_ratio_to_f64_unsigned((1 << 53) + 3, 1), two(53) + 4.0);
    assert_eq!(round_ratio_to_f64_unsigned((1 << 54) + 2, 1), two(54));
    assert_eq!(round_ratio_to_f64_unsigned((1 << 54) + 6, 1), two(54) + 8.0);
    // Halves at 2^52, where the ulp is 1: (2^53 + 1) / 2 and (2^53 + 3) / 2, by way of n = 6.
    assert_eq!(round_ratio_to_f64_unsigned(((1 << 53) + 1) * 3, 6), two(52));
    assert_eq!(
        round_ratio_to_f64_unsigned(((1 << 53) + 3) * 3, 6),
        two(52) + 2.0
    );
    assert_eq!(
        round_ratio_to_f64(-((1 << 53) + 3) * 3, 6),
        -(two(52) + 2.0)
    );
    // A sum one above or below the tie rounds away from it.
    let tie = ((1u128 << 53) + 1) * 12; // (2^53 + 1) / 2 with n = 24
    assert_eq!(round_ratio_to_f64_unsigned(tie + 1, 24), two(52) + 1.0);
    assert_eq!(round_ratio_to_f64_unsigned(tie - 1, 24), two(52));
    // With a 64-bit n and a 128-bit sum.
    let n = u64::MAX;
    assert_eq!(
        round_ratio_to_f64_unsigned(((1 << 53) + 1) * n as u128, n),
        two(53)
    );
    assert_eq!(
        round_ratio_to_f64_unsigned(((1 << 53) + 3) * n as u128, n),
        two(53) + 4.0
    );
}

#[test]
fn the_float_division_rounds_twice_and_round_ratio_once() {
    // 2^55 + 3 becomes 2^55 as f64, and 2^55 / 3 lands 2 (one ulp) below the nearest f64
    // to (2^55 + 3) / 3 = 12009599006321323.67.
    let sum = (1u128 << 55) + 3;
    assert_eq!(sum as f64 / 3.0, 12009599006321322.0);
    assert_eq!(round_ratio_to_f64_unsigned(sum, 3), 12009599006321324.0);
    assert!(is_nearest(12009599006321324.0, sum, 3));
    assert!(!is_nearest(12009599006321322.0, sum, 3));
    // So the mean of three u64 elements with that sum is the nearest one.
    let x = [1u64 << 54, 1 << 54, 3];
    assert_eq!(Cpu::new().reduce(&x, Mean).unwrap(), 12009599006321324.0);
    assert!(round_ratio_to_f64(1, 0).is_nan());
    assert!(round_ratio_to_f64_unsigned(0, 0).is_nan());
}

// ---- the CUDA half, compiled for the host ------------------------------------------------

/// Reads `kind hi lo n` lines (kind 0: Mean<long long>'s finish of the i128 `hi:lo`, 1:
/// Mean<unsigned long long>'s of the u128) and prints the double's bits in hex; `kind 2` /
/// `3` lines `a_hi a_lo b_hi b_lo` print WideSum's combine of two i128 / u128 values; `kind
/// 4 x` prints WideSum<int>'s lift of x, `kind 5 x` WideSum<unsigned char>'s.
const DRIVER: &str = r#"
int main() {
    int kind;
    while (std::scanf("%d", &kind) == 1) {
        unsigned long long a, b, c, d;
        if (kind == 0 || kind == 1) {
            if (std::scanf("%llx %llx %llx", &a, &b, &c) != 3) return 2;
            double r;
            if (kind == 0) { cf::i128 s; s.hi = a; s.lo = b; r = cf::Mean<long long>().finish(s, c); }
            else { cf::u128 s; s.hi = a; s.lo = b; r = cf::Mean<unsigned long long>().finish(s, c); }
            std::printf("%016llx\n", (unsigned long long)__double_as_longlong(r));
        } else if (kind == 2 || kind == 3) {
            if (std::scanf("%llx %llx %llx %llx", &a, &b, &c, &d) != 4) return 2;
            unsigned long long hi, lo;
            if (kind == 2) {
                cf::i128 x, y; x.hi = a; x.lo = b; y.hi = c; y.lo = d;
                cf::i128 z = cf::WideSum<long long>().combine(x, y); hi = z.hi; lo = z.lo;
            } else {
                cf::u128 x, y; x.hi = a; x.lo = b; y.hi = c; y.lo = d;
                cf::u128 z = cf::WideSum<unsigned long long>().combine(x, y); hi = z.hi; lo = z.lo;
            }
            std::printf("%016llx %016llx\n", hi, lo);
        } else if (kind == 4 || kind == 5) {
            long long x;
            if (std::scanf("%lld", &x) != 1) return 2;
            unsigned long long hi, lo;
            if (kind == 4) { cf::i128 z = cf::WideSum<int>().lift((int)x, 0); hi = z.hi; lo = z.lo; }
            else { cf::u128 z = cf::WideSum<unsigned char>().lift((unsigned char)x, 0); hi = z.hi; lo = z.lo; }
            std::printf("%016llx %016llx\n", hi, lo);
        } else {
            return 3;
        }
    }
    static_assert(sizeof(cf::i128) == 16 && alignof(cf::i128) == 16, "cf::i128 is Rust's i128");
    static_assert(sizeof(cf::u128) == 16 && alignof(cf::u128) == 16, "cf::u128 is Rust's u128");
    return 0;
}
"#;

#[test]
fn the_cuda_round_ratio_and_wide_sums_have_the_rust_bits() {
    let Some(driver) = Driver::build("integer-mean", &[], DRIVER) else {
        return;
    };

    let mut input = String::new();
    let mut want = Vec::new();
    let hex = |v: u128| format!("{:x} {:x}", (v >> 64) as u64, v as u64);
    let mut cases = ratio_cases();
    cases.extend([
        (0, 0),
        (5, 0),
        (0, 7),
        (u128::MAX, 1),
        (u128::MAX, u64::MAX),
    ]);
    for &(m, n) in &cases {
        input.push_str(&format!("1 {} {n:x}\n", hex(m)));
        want.push(format!(
            "{:016x}",
            round_ratio_to_f64_unsigned(m, n).to_bits()
        ));
        let s = m as i128; // every bit pattern: negative ones too, i128::MIN included
        input.push_str(&format!("0 {} {n:x}\n", hex(s as u128)));
        want.push(format!("{:016x}", round_ratio_to_f64(s, n).to_bits()));
    }
    input.push_str(&format!("0 {} 3\n", hex(i128::MIN as u128)));
    want.push(format!(
        "{:016x}",
        round_ratio_to_f64(i128::MIN, 3).to_bits()
    ));
    let mut g = Gen(17);
    for _ in 0..2000 {
        let a = (g.next() as u128) << 64 | g.next() as u128;
        let b = (g.next() as u128) << 64 | g.next() as u128;
        let (a, b) = if g.next() % 2 == 0 {
            (a, b)
        } else {
            (a >> 64, b >> 70)
        };
        let sum = |x: u128, y: u128| {
            let z = x.wrapping_add(y);
            format!("{:016x} {:016x}", (z >> 64) as u64, z as u64)
        };
        input.push_str(&format!("2 {} {}\n", hex(a), hex(b)));
        want.push(sum(a, b)); // i128 wrapping_add has the u128 bits
        input.push_str(&format!("3 {} {}\n", hex(a), hex(b)));
        want.push(sum(a, b));
        let x = g.next() as i32;
        input.push_str(&format!("4 {x}\n"));
        want.push(sum(<i32 as Widen>::widen(x) as u128, 0));
        let y = g.next() as u8;
        input.push_str(&format!("5 {y}\n"));
        want.push(sum(<u8 as Widen>::widen(y), 0));
    }
    for x in [i32::MIN, -1, 0, i32::MAX] {
        input.push_str(&format!("4 {x}\n"));
        want.push(sum_hex(x as i128 as u128));
    }

    let got = driver.run(input);
    assert_eq!(
        got.len(),
        want.len(),
        "the C++ driver printed {} lines",
        got.len()
    );
    let bad: Vec<String> = got
        .iter()
        .zip(&want)
        .enumerate()
        .filter(|(_, (g, w))| g != w)
        .take(10)
        .map(|(i, (g, w))| format!("line {i}: C++ {g} != Rust {w}"))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    driver.remove();
}

fn sum_hex(z: u128) -> String {
    format!("{:016x} {:016x}", (z >> 64) as u64, z as u64)
}
