//! `Sum` and `Prod` of f16 and bf16 accumulate in f32 and round once: their C++ halves
//! (kernels/ops.cuh's `cf::Sum`, `cf::Prod` over `cf::sum_calc`), compiled for the host with
//! the shim of the CUDA headers, give the Rust halves' bits for every lift, combine and
//! finish of a fold, on values that round differently when each add is rounded.

mod common;
use common::host;

use cufold::ops::{Operator, Prod, Sum};
use cufold::{bf16, f16};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt::Write as _;

const DRIVER: &str = r#"
template <class T> static unsigned short bits(T h) { return h.bits; }
template <class H> static void fold(int n) {
    cf::Sum<H> s; cf::Prod<H> p;
    typename cf::Sum<H>::Acc a = s.identity();
    typename cf::Prod<H>::Acc b = p.identity();
    for (int i = 0; i < n; ++i) {
        unsigned x; scanf("%x", &x);
        H h; h.bits = (unsigned short)x;
        a = s.combine(a, s.lift(h, i));
        b = p.combine(b, p.lift(h, i));
    }
    printf("%x %x %x %x\n", __float_as_uint(a), bits(s.finish(a, n)), __float_as_uint(b), bits(p.finish(b, n)));
}
int main() {
    int kind, n;
    while (scanf("%d %d", &kind, &n) == 2) {
        if (kind == 0) fold<cf::f16>(n); else fold<cf::bf16>(n);
    }
    return 0;
}
"#;

fn case<T: cufold::Element + Copy>(
    kind: u32,
    xs: &[T],
    to_bits: impl Fn(T) -> u16,
    input: &mut String,
    want: &mut Vec<String>,
) where
    Sum: Operator<T, Acc = f32, Out = T>,
    Prod: Operator<T, Acc = f32, Out = T>,
{
    write!(input, "{kind} {}", xs.len()).unwrap();
    for &x in xs {
        write!(input, " {:x}", to_bits(x)).unwrap();
    }
    input.push('\n');
    let n = xs.len() as u64;
    let (mut a, mut b) = (Sum.identity(), Prod.identity());
    for (i, &x) in xs.iter().enumerate() {
        a = Sum.combine(a, Sum.lift(x, i as u64));
        b = Prod.combine(b, Prod.lift(x, i as u64));
    }
    let (fs, fp): (T, T) = (Sum.finish(a, n), Prod.finish(b, n));
    want.push(format!(
        "{:x} {:x} {:x} {:x}",
        a.to_bits(),
        to_bits(fs),
        b.to_bits(),
        to_bits(fp)
    ));
}

#[test]
fn half_sums_compiled_for_the_host_have_the_rust_bits() {
    let Some(driver) = host::Driver::build("half-sums", &[], DRIVER) else {
        return;
    };

    let mut rng = ChaCha8Rng::seed_from_u64(0x4a1f);
    let (mut input, mut want) = (String::new(), Vec::new());
    for n in [0usize, 1, 2, 3, 17, 300, 2049] {
        for scale in [1.0f32, 1e-3, 300.0] {
            let v: Vec<f32> = (0..n)
                .map(|_| rng.random_range(-1.0f32..1.0) * scale)
                .collect();
            let h: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
            let b: Vec<bf16> = v.iter().map(|&x| bf16::from_f32(x)).collect();
            case(0, &h, f16::to_bits, &mut input, &mut want);
            case(1, &b, bf16::to_bits, &mut input, &mut want);
        }
    }
    // 2048 then ones: each f16 add rounded would stay at 2048.
    let mut h = vec![f16::from_f32(2048.0)];
    h.extend(std::iter::repeat_n(f16::ONE, 64));
    case(0, &h, f16::to_bits, &mut input, &mut want);
    let specials = [
        f16::INFINITY,
        f16::NEG_INFINITY,
        f16::NAN,
        f16::MAX,
        f16::MAX,
        f16::from_f32(-0.0),
    ];
    case(0, &specials, f16::to_bits, &mut input, &mut want);
    let bs: Vec<bf16> = [3e38f32, 3e38, -1.0, 1e-40]
        .iter()
        .map(|&x| bf16::from_f32(x))
        .collect();
    case(1, &bs, bf16::to_bits, &mut input, &mut want);

    let got = driver.run(input);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        // NaN payloads are not specified across the two sides: fields compare equal, or both
        // NaN (f32 accumulators in fields 0 and 2, f16 or bf16 results in 1 and 3).
        let same = g
            .split(' ')
            .zip(w.split(' '))
            .enumerate()
            .all(|(k, (a, b))| {
                let (a, b) = (
                    u32::from_str_radix(a, 16).unwrap(),
                    u32::from_str_radix(b, 16).unwrap(),
                );
                let nan = |x: u32| {
                    if k % 2 == 0 {
                        f32::from_bits(x).is_nan()
                    } else {
                        f16::from_bits(x as u16).is_nan() || bf16::from_bits(x as u16).is_nan()
                    }
                };
                a == b || (nan(a) && nan(b))
            });
        assert!(same, "case {i}: C++ {g}, Rust {w}");
    }
    driver.remove();
}
