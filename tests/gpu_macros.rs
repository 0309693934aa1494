//! GPU tests of operators made by `#[cufold::op]`: each is reduced on the GPU and on the
//! CPU backend (`cufold::Cpu`, the same tree) over sizes that reach every kernel stage,
//! on random data with a printed seed, into poisoned outputs.
//!
//! - Bit for bit: operators built from `+ - * /`, comparisons, min/max, casts, bit
//!   operations and `mul_add` (compose, Hull, ArgMaxTies, Welford, f16/bf16 operators,
//!   integer bit statistics, the nested-struct operator), and the exact probe of every
//!   supported float method and cast, and the integer probe.
//! - Within a tolerance: where `exp`, `ln` and the other transcendental functions enter,
//!   because CUDA's differ from the host libm's by a few ulps. The transcendental probe
//!   allows 8 ulps per function (CUDA documents at most 4 for these, the host libm 1, 3
//!   for glibc's cbrt); log-sum-exp allows 4 ulps per tree level on the accumulated sum
//!   (each combine takes one `exp`), see `lse_tolerance`.
//!
//! They need a CUDA device and are ignored by a plain `cargo test`: run them with
//! `--include-ignored`. The NVRTC-only test compiles every macro operator for sm_90.

mod common;
mod macro_ops;

use common::*;
use cudarc::driver::DevicePtr;
use cufold::laws::{Approx, Tolerance};
use cufold::ops::{self, Operator};
use cufold::{bf16, f16, Cpu, DeviceValue};
use macro_ops::probes::*;
use macro_ops::*;

const SIZES: &[usize] = &[0, 1, 2, 3, 31, 32, 33, 255, 4097, 65_537, 1_000_003];

/// How the GPU's output must relate to the CPU's.
#[derive(Clone, Copy)]
enum Agree {
    /// The same bits (NaNs of any payload count as equal).
    Bits,
    /// Within a tolerance, field by field.
    Within(Tolerance),
}

/// Reduces on the GPU (into a poisoned output, then again) and on the CPU; compares.
fn check<T: DeviceValue, O: Operator<T>>(
    dev: &impl DevicePtr<T>,
    host: &[T],
    op: O,
    agree: Agree,
    what: &str,
) where
    O::Out: Approx,
{
    let g = gpu();
    let n = host.len();
    let r = g
        .reducer::<T, O>(op)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    match Cpu::new().reduce(host, op) {
        Err(e) => assert_eq!(r.reduce(dev).unwrap_err().kind(), e.kind(), "{what} n={n}"),
        Ok(want) => {
            let p = poison::<O::Out>();
            let mut out = g.stream().clone_htod(&[p]).unwrap();
            r.reduce_into(dev, &mut out).unwrap();
            let got = g.stream().clone_dtoh(&out).unwrap()[0];
            assert!(
                !same(&got, &p) || same(&want, &p),
                "{what} n={n}: output never written"
            );
            let ok = match agree {
                Agree::Bits => same(&got, &want),
                Agree::Within(t) => got.approx_eq(&want, t),
            };
            assert!(ok, "{what} n={n}: GPU {got:?} != CPU {want:?}");
            let again = r.reduce(dev).unwrap();
            assert!(
                same(&again, &got),
                "{what} n={n}: run to run {again:?} != {got:?}"
            );
        }
    }
}

/// Every size, and an unaligned view (the scalar-load kernel) for the larger ones.
fn every_size<T: DeviceValue, O: Operator<T>>(
    op: O,
    agree: Agree,
    name: &str,
    gen: impl Fn(usize, u64) -> Vec<T>,
) where
    O::Out: Approx,
{
    let s = seed(name);
    for &n in SIZES {
        let host = gen(n, s ^ n as u64);
        let dev = upload(gpu(), &host);
        check(&dev, &host, op, agree, name);
        if n > 1 {
            check(
                &dev.slice(1..),
                &host[1..],
                op,
                agree,
                &format!("{name} (offset view)"),
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn compose_is_the_cpu_bit_for_bit() {
    every_size(compose, Agree::Bits, "compose", |n, s| {
        data::<ops::Affine<f32>>(n, s)
            .iter()
            .map(|m| Affine { a: m.a, b: m.b })
            .collect()
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn min_max_operators_are_the_cpu_bit_for_bit() {
    // Comparisons: signed zeros included.
    every_size(Hull, Agree::Bits, "Hull", data::<f64>);
    // f32::min / f32::max leave the order of +0.0 and -0.0 unspecified (and Rust's own
    // result depends on inlining), so their data has no negative zero.
    every_size(HullByMethods, Agree::Bits, "HullByMethods", |n, s| {
        data::<f32>(n, s)
            .into_iter()
            .map(|v| if v == 0.0 { 0.0 } else { v })
            .collect()
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn argmax_with_ties_is_the_cpu_bit_for_bit() {
    // Sixteen distinct values: ties at every level of the tree.
    every_size(ArgMaxTies, Agree::Bits, "ArgMaxTies", |n, s| {
        data::<f32>(n, s)
            .iter()
            .map(|v| (v * 8.0).round())
            .collect()
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn welford_moments_are_the_cpu_bit_for_bit() {
    every_size(Welford, Agree::Bits, "Welford", data::<f32>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn half_precision_operators_are_the_cpu_bit_for_bit() {
    every_size(hsum, Agree::Bits, "hsum", data::<f16>);
    every_size(bmax, Agree::Bits, "bmax", data::<bf16>);
    every_size(HalfSummary, Agree::Bits, "HalfSummary", |n, s| {
        data::<f32>(n, s).iter().map(|v| v * 300.0).collect()
    });
}

#[test]
#[ignore = "needs a CUDA device"]
fn integer_bit_statistics_are_the_cpu_bit_for_bit() {
    every_size(BitStats, Agree::Bits, "BitStats", data::<u32>);
}

#[test]
#[ignore = "needs a CUDA device"]
fn nested_structs_shadowing_and_keywords_are_the_cpu_bit_for_bit() {
    every_size(syntax, Agree::Bits, "syntax", |n, s| {
        let f: Vec<f32> = data(3 * n, s);
        (0..n)
            .map(|i| Nested {
                inner: Keywords {
                    new: f[3 * i] * 2.0,
                    class: f[3 * i + 1].to_bits(),
                },
                map: ops::Affine {
                    a: 1.0 + f[3 * i + 1] as f64 * 0.1,
                    b: f[3 * i + 2] as f64,
                },
            })
            .collect()
    });
}

/// The log-sum-exp accumulator's tolerance for N inputs: its `max` exact (a comparison;
/// either zero where Rust leaves the sign open), its `sum` within 4 ulps per tree level.
fn lse_close(got: &Lse, want: &Lse, n: usize) -> bool {
    let levels = (n.max(1) as f64).log2().ceil() as u64;
    got.max == want.max
        && got
            .sum
            .approx_eq(&want.sum, Tolerance::Ulps(4 * levels + 4))
}

#[test]
#[ignore = "needs a CUDA device"]
fn log_sum_exp_is_the_cpu_within_ulps() {
    let s = seed("log_sum_exp_is_the_cpu_within_ulps");
    let g = gpu();
    for &n in SIZES {
        let x: Vec<f32> = data::<f32>(n, s ^ n as u64)
            .iter()
            .map(|v| v * 20.0)
            .collect();
        let dev = upload(gpu(), &x);
        let want = Cpu::new().reduce_acc(&x, LogSumExp);
        // The accumulator: reduce the lifted values with the function-form `lse`.
        let lifted: Vec<Lse> = x.iter().map(|&v| Lse { max: v, sum: 1.0 }).collect();
        let got = g.reduce(&upload(gpu(), &lifted), lse).unwrap();
        assert!(
            lse_close(&got, &want, n),
            "lse n={n}: GPU {got:?} vs CPU {want:?}"
        );
        // The impl form from raw f32, finished: max + ln(sum), whose error is the sum's
        // relative error plus one rounding of the logarithm.
        if n > 0 {
            let got = g.reduce(&dev, LogSumExp).unwrap() as f64;
            let want = Cpu::new().reduce(&x, LogSumExp).unwrap() as f64;
            let levels = (n as f64).log2().ceil();
            let tol = (4.0 * levels + 8.0) * f32::EPSILON as f64 * want.abs().max(1.0);
            assert!(
                (got - want).abs() <= tol,
                "LogSumExp n={n}: GPU {got} vs CPU {want}"
            );
        }
    }
    // All -inf: the identity's max, and an empty sum.
    let r = g
        .reduce(&upload(gpu(), &[f32::NEG_INFINITY; 5]), LogSumExp)
        .unwrap();
    assert_eq!(r, f32::NEG_INFINITY);
}

#[test]
#[ignore = "needs a CUDA device"]
fn log_sum_exp_of_infinities_and_nan_on_the_gpu() {
    let g = gpu();
    for (x, want) in log_sum_exp_special_cases() {
        let dev = upload(gpu(), &x);
        let got = g.reduce(&dev, LogSumExp).unwrap();
        let cpu = Cpu::new().reduce(&x, LogSumExp).unwrap();
        for (who, v) in [("GPU", got), ("CPU", cpu)] {
            assert!(
                v == want || (v.is_nan() && want.is_nan()),
                "{who} {x:?}: {v} (want {want})"
            );
        }
        // The function form over the lifted values: the same results.
        let acc = Cpu::new().reduce_acc(&x, LogSumExp);
        let lifted: Vec<Lse> = x.iter().map(|&v| Lse { max: v, sum: 1.0 }).collect();
        let got = g.reduce(&upload(gpu(), &lifted), lse).unwrap();
        let finish = |a: &Lse| a.max + a.sum.ln();
        assert!(
            finish(&got) == finish(&acc) || (finish(&got).is_nan() && finish(&acc).is_nan()),
            "lse {x:?}: GPU {got:?} vs CPU {acc:?}"
        );
    }
}

/// Each probe sample reduced alone (a one-element view): `finish(sample)` on both sides.
fn probe<O: Operator<T>, T: DeviceValue>(op: O, samples: &[T], agree: Agree, name: &str)
where
    O::Out: Approx,
{
    let dev = upload(gpu(), samples);
    let r = gpu().reducer::<T, O>(op).unwrap();
    let mut bad = Vec::new();
    for (i, sample) in samples.iter().enumerate() {
        let got = r.reduce(&dev.slice(i..i + 1)).unwrap();
        let want = Cpu::new().reduce(std::slice::from_ref(sample), op).unwrap();
        let ok = match agree {
            Agree::Bits => same(&got, &want),
            Agree::Within(t) => got.approx_eq(&want, t),
        };
        if !ok {
            bad.push(format!(
                "{name} on {sample:?}:\n  GPU {got:?}\n  CPU {want:?}"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} samples differ:\n{}",
        bad.len(),
        samples.len(),
        bad.join("\n")
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn every_exact_method_and_cast_is_the_cpu_bit_for_bit() {
    probe(ExactProbe, &float_samples(), Agree::Bits, "ExactProbe");
    probe(IntProbe, &int_samples(), Agree::Bits, "IntProbe");
}

#[test]
#[ignore = "needs a CUDA device"]
fn transcendental_methods_are_the_cpu_within_8_ulps() {
    probe(
        MathProbe,
        &float_samples(),
        Agree::Within(Tolerance::Ulps(8)),
        "MathProbe",
    );
}

#[test]
#[ignore = "needs NVRTC (part of the CUDA toolkit)"]
fn every_macro_kernel_compiles_for_hopper() {
    if !compile_only_test_runs("every_macro_kernel_compiles_for_hopper") {
        return;
    }
    use cufold::reduce::ReduceShape;
    fn build<T: DeviceValue, O: Operator<T>>(op: O) {
        let shape = ReduceShape {
            order_free: O::ORDER_FREE,
            ..ReduceShape::for_sizes(std::mem::size_of::<T>(), 256).unwrap()
        };
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
    build::<Affine, _>(compose);
    build::<Lse, _>(lse);
    build::<f32, _>(LogSumExp);
    build::<f32, _>(ArgMaxTies);
    build::<f64, _>(Hull);
    build::<f32, _>(HullByMethods);
    build::<f32, _>(Welford);
    build::<f16, _>(hsum);
    build::<bf16, _>(bmax);
    build::<f32, _>(HalfSummary);
    build::<u32, _>(BitStats);
    build::<Nested, _>(syntax);
    build::<FSample, _>(ExactProbe);
    build::<FSample, _>(MathProbe);
    build::<ISample, _>(IntProbe);
    // With run-time parameters (tests/params_gpu.rs compiles their scans too).
    build::<f64, _>(Scaled { k: 2.0 });
    build::<f32, _>(InWindow {
        window: Window { lo: 0.0, hi: 1.0 },
        first: 0,
        cap: 9,
        unit: 1.0,
    });
    build::<f32, _>(ops::Mapped::new(
        Standardize {
            mean: 0.5,
            inv_sd: 2.0,
        },
        ops::Sum,
    ));
    build::<f64, _>(ops::Mapped::new(Square, Scaled { k: 0.5 }));
}
