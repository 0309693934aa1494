//! CPU tests of `#[cufold::op]`, `#[cufold::transform]` and `#[derive(cufold::DeviceType)]`:
//! the CUDA text they generate (golden, whole structs, so that every change to it is
//! deliberate), the run-time parameters of operators and maps with `&self`, the CPU halves
//! against the built-in operators and exact references, and the law checker.
//! tests/host_cxx.rs runs the generated C++; tests/gpu_macros.rs and tests/params_gpu.rs run
//! it on a GPU.

mod common;
mod macro_ops;

use common::*;
use cufold::laws::{self, Law, Tolerance};
use cufold::ops::{self, Mapped, Operator, Transform};
use cufold::{bf16, f16, Cpu, DeviceValue, ErrorKind, ScanKind};
use macro_ops::*;

/// The generated source after the shared helpers, with the module hash shown as `H`.
fn body(source: &str, module: &str) -> String {
    let h = format!("{:08x}", cufold::__private::fnv(module));
    source
        .strip_prefix(cufold::__private::PRELUDE)
        .expect("every translated operator's source starts with the helpers")
        .replace(&h, "H")
}

#[test]
fn golden_cuda_of_the_function_form() {
    let op = compose.cuda();
    assert_eq!(
        op.type_name,
        format!(
            "compose_{:08x}",
            cufold::__private::fnv("macros::macro_ops")
        )
    );
    assert_eq!(
        body(&op.source, "macros::macro_ops"),
        r#"#ifndef CUFOLD_DECL_Affine_H
#define CUFOLD_DECL_Affine_H
// macros::macro_ops::Affine
struct Affine_H {
    float a;
    float b;
};
static_assert(sizeof(Affine_H) == 8 && alignof(Affine_H) == 4, "cufold: the CUDA struct Affine_H does not have the layout of the Rust struct macros::macro_ops::Affine");
#endif
#ifndef CUFOLD_OP_compose_H
#define CUFOLD_OP_compose_H
struct compose_H {
    typedef Affine_H In;
    typedef Affine_H Acc;
    typedef Affine_H Out;
    __device__ Acc identity() const {
        Affine_H cfm_s;
        cfm_s.a = cfm::flit(1.0f, 1.0);
        cfm_s.b = cfm::flit(0.0f, 0.0);
        return cfm_s;
    }
    __device__ Acc lift(In x, cf::u64) const { return x; }
    __device__ Acc combine(Acc f, Acc g) const {
        Affine_H cfm_s;
        cfm_s.a = cfm::mul(g.a, f.a);
        cfm_s.b = cfm::add(cfm::mul(g.a, f.b), g.b);
        return cfm_s;
    }
    __device__ Out finish(Acc a, cf::u64) const { return a; }
};
#endif
"#
    );
}

#[test]
fn golden_cuda_of_the_impl_form_with_lift_and_finish() {
    assert_eq!(
        body(&LogSumExp.cuda().source, "macros::macro_ops"),
        r#"#ifndef CUFOLD_DECL_Lse_H
#define CUFOLD_DECL_Lse_H
// macros::macro_ops::Lse
struct Lse_H {
    float max;
    float sum;
};
static_assert(sizeof(Lse_H) == 8 && alignof(Lse_H) == 4, "cufold: the CUDA struct Lse_H does not have the layout of the Rust struct macros::macro_ops::Lse");
#endif
#ifndef CUFOLD_OP_LogSumExp_H
#define CUFOLD_OP_LogSumExp_H
struct LogSumExp_H {
    typedef float In;
    typedef Lse_H Acc;
    typedef float Out;
    __device__ Acc identity() const {
        Lse_H cfm_s;
        cfm_s.max = cfm::f32_bits(0xff800000u);
        cfm_s.sum = cfm::flit(0.0f, 0.0);
        return cfm_s;
    }
    __device__ Acc lift(In x, cf::u64) const {
        Lse_H cfm_s;
        cfm_s.max = x;
        cfm_s.sum = cfm::flit(1.0f, 1.0);
        return cfm_s;
    }
    __device__ Acc combine(Acc a, Acc b) const {
        auto m = cfm::max(a.max, b.max);
        if (cfm::eq(a.max, b.max)) {
            Lse_H cfm_s;
            cfm_s.max = m;
            cfm_s.sum = cfm::add(a.sum, b.sum);
            return cfm_s;
        } else {
            auto e = cfm::exp(cfm::neg(cfm::abs(cfm::sub(a.max, b.max))));
            if (cfm::gt(a.max, b.max)) {
                Lse_H cfm_s;
                cfm_s.max = m;
                cfm_s.sum = cfm::add(a.sum, cfm::mul(b.sum, e));
                return cfm_s;
            } else {
                Lse_H cfm_s;
                cfm_s.max = m;
                cfm_s.sum = cfm::add(cfm::mul(a.sum, e), b.sum);
                return cfm_s;
            }
        }
    }
    __device__ Out finish(Acc acc, cf::u64 _n) const {
        return cfm::add(acc.max, cfm::ln(acc.sum));
    }
};
#endif
"#
    );
}

#[test]
fn golden_cuda_of_early_returns_mutation_and_block_values() {
    let src = body(&Welford.cuda().source, "macros::macro_ops");
    let start = src.find("#ifndef CUFOLD_OP_Welford_H").unwrap();
    assert_eq!(
        &src[start..],
        r#"#ifndef CUFOLD_OP_Welford_H
#define CUFOLD_OP_Welford_H
struct Welford_H {
    typedef float In;
    typedef Moments_H Acc;
    typedef double Out;
    __device__ Acc identity() const {
        Moments_H cfm_s;
        cfm_s.n = cfm::flit(0.0f, 0.0);
        cfm_s.mean = cfm::flit(0.0f, 0.0);
        cfm_s.m2 = cfm::flit(0.0f, 0.0);
        return cfm_s;
    }
    __device__ Acc lift(In x, cf::u64 _i) const {
        Moments_H cfm_s;
        cfm_s.n = cfm::flit(1.0f, 1.0);
        cfm_s.mean = cfm::cast<double>(x);
        cfm_s.m2 = cfm::flit(0.0f, 0.0);
        return cfm_s;
    }
    __device__ Acc combine(Acc a, Acc b) const {
        if (cfm::eq(a.n, cfm::flit(0.0f, 0.0))) {
            return b;
        }
        if (cfm::eq(b.n, cfm::flit(0.0f, 0.0))) {
            return a;
        }
        auto n = cfm::add(a.n, b.n);
        auto d = cfm::sub(b.mean, a.mean);
        auto m2 = cfm::add(a.m2, b.m2);
        m2 = cfm::add(m2, cfm::mul(cfm::mul(d, d), cfm::div(cfm::mul(a.n, b.n), n)));
        auto mean = [&]() { auto step = cfm::mul(d, cfm::div(b.n, n)); return cfm::add(a.mean, step); }();
        Moments_H cfm_s;
        cfm_s.n = n;
        cfm_s.mean = mean;
        cfm_s.m2 = m2;
        return cfm_s;
    }
    __device__ Out finish(Acc acc, cf::u64 _n) const {
        return cfm::div(acc.m2, acc.n);
    }
};
#endif
"#
    );
}

/// `#[repr(align(N))]` becomes `alignas(N)`.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C, align(16))]
struct Aligned {
    inner: Keywords,
    weight: f32,
}

#[test]
fn golden_cuda_of_shadowing_keywords_and_nested_structs() {
    let src = body(&syntax.cuda().source, "macros::macro_ops");
    let decl = "struct Nested_H {\n    Keywords_H inner;\n    cf::Affine<double> map;\n};\n\
                static_assert(sizeof(Nested_H) == 24 && alignof(Nested_H) == 8,";
    assert!(src.contains(decl), "{src}");
    assert!(src.contains("struct Keywords_H {\n    float new_cf;\n    unsigned int class_cf;\n};"));
    assert!(src.find("\nstruct Keywords_H").unwrap() < src.find("\nstruct Nested_H").unwrap());
    let aligned = Aligned::cuda_decl();
    assert!(aligned.contains(&format!("struct alignas(16) {} {{", Aligned::cuda_name())));
    assert_eq!(std::mem::size_of::<Aligned>(), 16);
    assert!(aligned.contains("== 16 && alignof("), "{aligned}");
    assert!(aligned.contains(") == 16, \"cufold"), "{aligned}");
    let start = src.find("    __device__ Acc combine").unwrap();
    let end = src[start..].find("    __device__ Out finish").unwrap() + start;
    assert_eq!(
        &src[start..end],
        r#"    __device__ Acc combine(Acc x, Acc y) const {
        auto new_cf = cfm::add(x.inner.new_cf, y.inner.new_cf);
        auto new_cf_2 = cfm::mul(new_cf, cfm::flit(0.5f, 0.5));
        double scale = [&]() -> double { if (cfm::gt(new_cf_2, cfm::flit(1.0f, 1.0))) { auto t = cfm::mul(0xccccccccccccdp-55, cfm::flit(2.0f, 2.0)); return t; } else { return cfm::neg(cfm::flit(-1.0f, -1.0)); } }();
        Nested_H cfm_s;
        cfm_s.map = [&]() { cf::Affine<double> cfm_s; cfm_s.a = cfm::mul(cfm::mul(x.map.a, y.map.a), scale); cfm_s.b = cfm::add(x.map.b, cfm::cast<double>(cfm::cast<float>(y.map.b))); return cfm_s; }();
        cfm_s.inner = [&]() { Keywords_H cfm_s; cfm_s.class_cf = cfm::bit_xor(x.inner.class_cf, cfm::shr(cfm::wrapping_mul(y.inner.class_cf, cfm::ilit(3)), ((unsigned char)1))); cfm_s.new_cf = new_cf_2; return cfm_s; }();
        return cfm_s;
    }
"#
    );
}

#[test]
fn shadowing_and_keywords_keep_their_rust_meaning_on_the_cpu() {
    let x = Nested {
        inner: Keywords { new: 3.0, class: 6 },
        map: ops::Affine { a: 2.0, b: 0.5 },
    };
    let r = syntax.combine(x, x);
    assert_eq!(r.inner.new, 3.0); // (3 + 3) * 0.5
    assert_eq!(r.inner.class, 6 ^ (18 >> 1));
    assert_eq!(r.map.a, 4.0 * (SCALE * 2.0));
    assert_eq!(syntax.identity().map.a, 1.0);
}

#[test]
fn derived_types_know_whether_they_have_padding() {
    #[derive(Clone, Copy, cufold::DeviceType)]
    #[repr(C)]
    struct Tight {
        x: f32,
        n: u32,
        w: f64,
    }
    /// 4 bytes of padding after `x`.
    #[derive(Clone, Copy, cufold::DeviceType)]
    #[repr(C)]
    struct Gap {
        x: f32,
        w: f64,
    }
    /// No gap of its own, but a field with one.
    #[derive(Clone, Copy, cufold::DeviceType)]
    #[repr(C)]
    struct Holds {
        inner: Gap,
    }
    /// Dense fields, padded at the end by `align(16)`.
    #[derive(Clone, Copy, cufold::DeviceType)]
    #[repr(C, align(16))]
    struct Over {
        x: f64,
    }
    const {
        assert!(Tight::DENSE && Affine::DENSE && Nested::DENSE);
        assert!(!Gap::DENSE && !Holds::DENSE && !Over::DENSE);
        // Best spells its padding out as a field; cufold's Indexed does not.
        assert!(Best::DENSE && !Pair::DENSE);
    }
    let _ = (
        Tight {
            x: 0.0,
            n: 0,
            w: 0.0,
        },
        Holds {
            inner: Gap { x: 0.0, w: 0.0 },
        },
    );
    let _ = Over { x: 0.0 };
}

/// Padding from a field that is a cufold value type with padding of its own.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Pair {
    best: ops::Indexed<f32>,
}

#[test]
fn raw_identifiers_lose_their_prefix() {
    #[derive(Clone, Copy, cufold::DeviceType)]
    #[repr(C)]
    struct Raw {
        r#type: u32,
        r#float: f32,
    }
    let r = Raw {
        r#type: 1,
        r#float: 2.0,
    };
    assert_eq!(format!("{r:?}"), "Raw { type: 1, float: 2.0 }");
    assert_eq!(r.r#type as f32 + r.r#float, 3.0);
    let decl = Raw::cuda_decl();
    assert!(
        decl.contains("    unsigned int type;\n    float float_cf;\n"),
        "{decl}"
    );
}

#[test]
fn type_names_are_unique_per_module() {
    mod other {
        #[derive(Clone, Copy, cufold::DeviceType)]
        #[repr(C)]
        pub struct Affine {
            pub a: f32,
            pub b: f32,
        }
    }
    assert_ne!(Affine::cuda_name(), other::Affine::cuda_name());
    assert!(other::Affine::cuda_name().starts_with("Affine_"));
    assert_eq!(Affine::cuda_name(), Affine::cuda_name());
    // Each op struct and each declaration sits in an include guard, declared once.
    let src = compose.cuda().source;
    assert_eq!(src.matches("\nstruct Affine_").count(), 1);
    assert_eq!(src.matches("#ifndef CUFOLD_MACRO_SUPPORT").count(), 1);
}

#[test]
fn trait_constants_follow_the_attribute() {
    const {
        assert!(!<compose as Operator<Affine>>::COMMUTATIVE);
        assert!(<lse as Operator<Lse>>::COMMUTATIVE);
        assert!(!<compose as Operator<Affine>>::EMPTY_IS_ERROR);
        assert!(<ArgMaxTies as Operator<f32>>::EMPTY_IS_ERROR);
    }
    assert_eq!(<compose as Operator<Affine>>::NAME, "compose");
    assert_eq!(<LogSumExp as Operator<f32>>::NAME, "LogSumExp");
    let e = Cpu::new().reduce(&[] as &[f32], ArgMaxTies).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EmptyInput);
    assert!(e.to_string().contains("ArgMaxTies"), "{e}");
    assert_eq!(
        Cpu::new().reduce(&[] as &[Affine], compose).unwrap(),
        Affine { a: 1.0, b: 0.0 }
    );
}

const SIZES: &[usize] = &[0, 1, 2, 3, 33, 4097, 100_003];

#[test]
fn macro_operators_equal_the_builtins_bit_for_bit() {
    // Same formulas, same tree: the macro-made operators must give the built-ins' bits.
    let s = seed("macro_operators_equal_the_builtins_bit_for_bit");
    let cpu = Cpu::new();
    for &n in SIZES {
        let maps: Vec<ops::Affine<f32>> = data(n, s ^ n as u64);
        let mine: Vec<Affine> = maps.iter().map(|m| Affine { a: m.a, b: m.b }).collect();
        let want = cpu.reduce(&maps, ops::Compose).unwrap();
        let got = cpu.reduce(&mine, compose).unwrap();
        assert_eq!(
            (got.a.to_bits(), got.b.to_bits()),
            (want.a.to_bits(), want.b.to_bits()),
            "n = {n}"
        );

        let x: Vec<f32> = data(n, s ^ (n as u64) << 1);
        if n > 0 {
            let want = cpu.reduce(&x, ops::MeanVar).unwrap();
            let got = cpu.reduce_acc(&x, Welford);
            assert!(
                same(
                    &(got.n, got.mean, got.m2),
                    &(want.count, want.mean, want.m2)
                ),
                "n = {n}"
            );
            assert!(same(&cpu.reduce(&x, Welford).unwrap(), &want.variance()));
            let ties: Vec<f32> = x.iter().map(|v| (v * 8.0).round()).collect();
            assert_eq!(
                cpu.reduce(&ties, ArgMaxTies).unwrap(),
                cpu.reduce(&ties, ops::ArgMax).unwrap().index,
                "n = {n}"
            );
            let wide: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let hull = cpu.reduce(&wide, Hull).unwrap();
            let mm = cpu.reduce(&wide, ops::MinMax).unwrap();
            assert!(same(&(hull.lo, hull.hi), &(mm.min, mm.max)), "n = {n}");
        }
        let h: Vec<f16> = data(n, s ^ 3);
        // ops::Sum adds f16 in f32 along the same tree and rounds once; hsum rounds each add.
        let wide: Vec<f32> = h.iter().map(|v| v.to_f32()).collect();
        assert!(same(
            &cpu.reduce(&h, ops::Sum).unwrap(),
            &f16::from_f32(cpu.reduce(&wide, ops::Sum).unwrap())
        ));
        let _ = cpu.reduce(&h, hsum).unwrap();
        let b: Vec<bf16> = data(n, s ^ 4);
        if n > 0 {
            assert!(same(
                &cpu.reduce(&b, bmax).unwrap(),
                &cpu.reduce(&b, ops::Max).unwrap()
            ));
        }
    }
}

#[test]
fn integer_bit_statistics_are_exact() {
    let s = seed("integer_bit_statistics_are_exact");
    for &n in SIZES {
        let x: Vec<u32> = data(n, s ^ n as u64);
        let got = Cpu::new().reduce(&x, BitStats).unwrap();
        // An independent reference, field by field from the inputs (not through the
        // operator's lift or combine): every field is a wrapping sum, xor, or or and, so a
        // plain loop in index order gives the exact value.
        let (mut sum, mut xor, mut ones, mut or) = (0u64, 0u32, 0u32, 0u32);
        let (mut and, mut signed, mut low) = (u32::MAX, 0i32, 0u8);
        for (i, &v) in x.iter().enumerate() {
            let i = i as u64;
            sum = sum.wrapping_add(((v as u64).wrapping_mul(i % 8) << 3) ^ (v as u64 / 32));
            xor ^= v.rotate_left((i % 32) as u32);
            ones = ones.wrapping_add(
                (v.count_ones() + v.leading_zeros()).wrapping_sub(v.trailing_zeros().min(3)),
            );
            or |= v >> (i % 32);
            and &= !v | 0x80;
            signed = signed.wrapping_add((v as i32).wrapping_mul(-3) >> 2);
            low = low.wrapping_add(v as u8);
        }
        let want = (sum, xor, ones, or, and, signed, low);
        let got = (
            got.sum, got.xor, got.ones, got.or, got.and, got.signed, got.low,
        );
        assert_eq!(got, want, "n = {n}");
    }
}

#[test]
fn log_sum_exp_matches_an_f64_reference() {
    let s = seed("log_sum_exp_matches_an_f64_reference");
    for &n in &SIZES[1..] {
        let x: Vec<f32> = data::<f32>(n, s ^ n as u64)
            .iter()
            .map(|v| v * 30.0)
            .collect();
        let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let want = max + x.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
        let got = Cpu::new().reduce(&x, LogSumExp).unwrap() as f64;
        assert!(
            (got - want).abs() <= 1e-5 * want.abs().max(1.0),
            "n = {n}: {got} vs {want}"
        );
        let lses: Vec<Lse> = x.iter().map(|&v| Lse { max: v, sum: 1.0 }).collect();
        let acc = Cpu::new().reduce(&lses, lse).unwrap();
        assert!(same(&acc, &Cpu::new().reduce_acc(&x, LogSumExp)), "n = {n}");
    }
    assert_eq!(
        Cpu::new()
            .reduce(&[f32::NEG_INFINITY; 3], LogSumExp)
            .unwrap(),
        f32::NEG_INFINITY
    );
}

#[test]
fn log_sum_exp_of_infinities_and_nan() {
    let cpu = Cpu::new();
    for (x, want) in log_sum_exp_special_cases() {
        let got = cpu.reduce(&x, LogSumExp).unwrap();
        assert!(
            got == want || (got.is_nan() && want.is_nan()),
            "{x:?}: {got} (want {want})"
        );
        // The function form over the lifted values: the same value (NaN payloads aside).
        let lses: Vec<Lse> = x.iter().map(|&v| Lse { max: v, sum: 1.0 }).collect();
        let acc = cpu.reduce(&lses, lse).unwrap();
        let got = acc.max + acc.sum.ln();
        assert!(
            got == want || (got.is_nan() && want.is_nan()),
            "lse {x:?}: {got} (want {want})"
        );
    }
    // The laws hold with infinities among the samples, and equal maxima (a NaN result is
    // checked above: its accumulator's `max` depends on the grouping, as f32::max ignores
    // NaN, while its value is NaN in every grouping).
    let s = seed("log_sum_exp_of_infinities_and_nan");
    let mut x: Vec<f32> = data::<f32>(30, s).iter().map(|v| v * 30.0).collect();
    x.extend([
        f32::INFINITY,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
        0.0,
        0.0,
    ]);
    laws::check(LogSumExp, &x, Tolerance::Relative(1e-5)).unwrap();
}

#[test]
fn half_precision_structs_round_like_the_half_crate() {
    let s = seed("half_precision_structs_round_like_the_half_crate");
    let x: Vec<f32> = data::<f32>(5000, s).iter().map(|v| v * 100.0).collect();
    let r = Cpu::new().reduce_acc(&x, HalfSummary);
    let rounded: Vec<f32> = x.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
    assert!(same(
        &r.sum,
        &Cpu::new().reduce(&rounded, ops::Sum).unwrap()
    ));
    let max = x
        .iter()
        .map(|&v| f16::from_f32(v))
        .fold(f16::NEG_INFINITY, f16::max);
    let min = x
        .iter()
        .map(|&v| bf16::from_f32(v))
        .fold(bf16::INFINITY, bf16::min);
    assert_eq!((r.max, r.min), (max, min));
    let out = Cpu::new().reduce(&x, HalfSummary).unwrap();
    assert_eq!(out, r.sum + max.to_f32() - min.to_f32());
}

// ---- the law checker ----------------------------------------------------------------

/// (a + b) / 2: commutative, but neither associative nor with an identity.
#[cufold::op(identity = 0.0, commutative)]
fn midpoint(a: f64, b: f64) -> f64 {
    (a + b) / 2.0
}

/// Subtraction: not associative, identity only on the right.
#[cufold::op(identity = 0)]
fn minus(a: i64, b: i64) -> i64 {
    a.wrapping_sub(b)
}

/// Composition claimed commutative: false.
#[cufold::op(identity = Affine { a: 1.0, b: 0.0 }, commutative)]
fn compose_claimed_commutative(f: Affine, g: Affine) -> Affine {
    Affine {
        a: g.a * f.a,
        b: g.a * f.b + g.b,
    }
}

/// The midpoint with the identity fixed up: a real identity, still not associative.
#[cufold::op(identity = f64::NAN, commutative)]
fn midpoint_or_other(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() {
        a
    } else {
        (a + b) / 2.0
    }
}

#[test]
fn the_law_checker_finds_counterexamples() {
    let e = laws::check(midpoint, &[1.0, 2.0, 3.0], Tolerance::Exact).unwrap_err();
    assert_eq!(e.law(), Law::LeftIdentity);
    assert_eq!(e.samples(), &[0]);
    let msg = e.to_string();
    assert!(
        msg.contains("left identity fails for midpoint") && msg.contains("samples[0] = 1.0"),
        "{msg}"
    );

    // Non-dyadic data: the midpoint's rounding breaks associativity, and the report says
    // which triple and what each side gave.
    let e = laws::check(midpoint_or_other, &[0.1, 0.7, 0.3], Tolerance::Exact).unwrap_err();
    assert_eq!(e.law(), Law::Associativity);
    let [i, j, k] = e.samples() else {
        panic!("{e}")
    };
    let xs = [0.1, 0.7, 0.3];
    let (l, r) = (
        ((xs[*i] + xs[*j]) / 2.0 + xs[*k]) / 2.0,
        (xs[*i] + (xs[*j] + xs[*k]) / 2.0) / 2.0,
    );
    assert_ne!(l, r);
    assert!(
        e.to_string()
            .contains(&format!("combine(combine(a, b), c) = {l:?}")),
        "{e}"
    );

    let e = laws::check(minus, &[5i64, 3, 1], Tolerance::Exact).unwrap_err();
    assert_eq!(e.law(), Law::LeftIdentity);
    assert!(
        laws::check(minus, &[0i64, 0], Tolerance::Exact).is_ok(),
        "on zeros alone subtraction is lawful"
    );

    let maps = [Affine { a: 2.0, b: 1.0 }, Affine { a: 3.0, b: -1.0 }];
    let e = laws::check(compose_claimed_commutative, &maps, Tolerance::Exact).unwrap_err();
    assert_eq!(e.law(), Law::Commutativity);
    assert!(e.to_string().contains("claims to be commutative"), "{e}");
    // The same operator without the claim passes on this exact data.
    laws::check(compose, &maps, Tolerance::Exact).unwrap();
}

#[test]
fn the_law_checker_passes_lawful_operators() {
    let s = seed("the_law_checker_passes_lawful_operators");
    let mut r = Rng(s);
    // Exact data (small dyadic values) for the float operators built from + and *.
    let maps: Vec<Affine> = (0..60)
        .map(|_| Affine {
            a: [0.5, 1.0, 2.0, -1.0][(r.next() % 4) as usize],
            b: (r.next() % 9) as f32 - 4.0,
        })
        .collect();
    laws::check(compose, &maps, Tolerance::Exact).unwrap();
    let ties: Vec<f32> = (0..80).map(|_| (r.next() % 7) as f32).collect();
    laws::check(ArgMaxTies, &ties, Tolerance::Exact).unwrap();
    let wide: Vec<f64> = data(100, s);
    laws::check(Hull, &wide, Tolerance::Exact).unwrap();
    let words: Vec<u32> = data(50, s);
    laws::check(BitStats, &words, Tolerance::Exact).unwrap();
    // Rounding: exp and ln, and the moments' divisions, within a tolerance.
    let x: Vec<f32> = data(45, s);
    laws::check(LogSumExp, &x, Tolerance::Relative(1e-5)).unwrap();
    laws::check(Welford, &x, Tolerance::Relative(1e-9)).unwrap();
    assert_eq!(
        laws::check(Welford, &x, Tolerance::Exact).map_err(|e| e.law()),
        Err(Law::Associativity),
        "the moments' rounding is visible without a tolerance"
    );
}

// ---- order-free operators ------------------------------------------------------------

/// Float addition claimed order-free: false (rounding depends on the grouping).
#[cufold::op(identity = 0.0, order_free)]
fn sum_claimed_order_free(a: f32, b: f32) -> f32 {
    a + b
}

/// Bitwise or: order-free, rightly claimed.
#[cufold::op(identity = 0, order_free)]
fn bit_or(a: u32, b: u32) -> u32 {
    a | b
}

/// A max that keeps the left of equal values: commutative numerically, but `-0.0, 0.0`
/// depends on the order, so the order-free claim fails on signed zeros.
#[cufold::op(identity = f32::NEG_INFINITY, order_free)]
fn max_keep_left(a: f32, b: f32) -> f32 {
    if a < b {
        b
    } else {
        a
    }
}

/// Values that exercise every rule of the order-free built-ins: signed zeros, infinities,
/// NaNs with different payloads and signs, ties.
fn nasty() -> Vec<f32> {
    let mut v = vec![
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        2.5,
        -0.0,
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

#[test]
fn order_free_claims_are_checked_bit_for_bit() {
    const {
        assert!(<bit_or as Operator<u32>>::ORDER_FREE && <bit_or as Operator<u32>>::COMMUTATIVE);
        assert!(!<midpoint as Operator<f64>>::ORDER_FREE);
        assert!(
            <ops::Max as Operator<f32>>::ORDER_FREE && <ops::ArgMin as Operator<f16>>::ORDER_FREE
        );
        assert!(
            <ops::Sum as Operator<i64>>::ORDER_FREE && !<ops::Sum as Operator<f64>>::ORDER_FREE
        );
        assert!(
            <ops::Mean as Operator<u8>>::ORDER_FREE && !<ops::MeanVar as Operator<i32>>::ORDER_FREE
        );
    }
    let x = nasty();
    // The built-ins keep their claim on every rule at once, bit for bit, whatever the
    // tolerance given.
    laws::check(ops::Max, &x, Tolerance::Relative(0.5)).unwrap();
    laws::check(ops::Min, &x, Tolerance::Exact).unwrap();
    laws::check(ops::MinMax, &x, Tolerance::Exact).unwrap();
    laws::check(ops::ArgMax, &x, Tolerance::Exact).unwrap();
    laws::check(ops::ArgMin, &x, Tolerance::Exact).unwrap();
    let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
    laws::check(ops::Max, &h, Tolerance::Exact).unwrap();
    let b: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    laws::check(ops::Min, &b, Tolerance::Exact).unwrap();
    let ints: Vec<i32> = data(200, 7);
    laws::check(ops::Sum, &ints, Tolerance::Exact).unwrap();
    laws::check(ops::Prod, &ints, Tolerance::Exact).unwrap();
    let words: Vec<u32> = data(100, 9);
    laws::check(bit_or, &words, Tolerance::Exact).unwrap();

    // Claims that are false: rounding, and the sign of zero.
    let e = laws::check(
        sum_claimed_order_free,
        &[0.1f32, 0.7, 0.3],
        Tolerance::Relative(1e-3),
    )
    .unwrap_err();
    assert_eq!(e.law(), Law::Associativity, "{e}");
    let e = laws::check(max_keep_left, &[1.0f32, -0.0, 0.0], Tolerance::Exact).unwrap_err();
    assert_eq!(e.law(), Law::Commutativity, "{e}");
    assert!(e.to_string().contains("claims to be order-free"), "{e}");
}

#[test]
fn min_and_max_order_signed_zeros_and_nans_the_same_way_in_every_order() {
    let cpu = Cpu::new();
    for z in [[0.0f32, -0.0], [-0.0, 0.0]] {
        assert_eq!(
            cpu.reduce(&z, ops::Max).unwrap().to_bits(),
            0.0f32.to_bits()
        );
        assert_eq!(
            cpu.reduce(&z, ops::Min).unwrap().to_bits(),
            (-0.0f32).to_bits()
        );
        assert_eq!(
            cpu.reduce(&z, ops::ArgMax).unwrap().index,
            0,
            "equal values: lowest index"
        );
    }
    // Several NaNs: Max ranks every NaN above +inf, negative ones above positive ones; Min
    // ranks every NaN below -inf, positive ones below negative ones. Either way the pick
    // depends on the values, not on their order.
    let (a, b) = (f32::from_bits(0x7fc0_0001), f32::from_bits(0x7fc0_0000));
    let neg = f32::from_bits(0xffc0_0000);
    for v in [[a, b, 1.0], [1.0, b, a], [b, 1.0, a]] {
        assert_eq!(cpu.reduce(&v, ops::Max).unwrap().to_bits(), a.to_bits());
        assert_eq!(cpu.reduce(&v, ops::Min).unwrap().to_bits(), b.to_bits());
    }
    for v in [[a, neg, f32::INFINITY], [neg, f32::NEG_INFINITY, a]] {
        assert_eq!(cpu.reduce(&v, ops::Max).unwrap().to_bits(), neg.to_bits());
        assert_eq!(cpu.reduce(&v, ops::Min).unwrap().to_bits(), a.to_bits());
        let mm = cpu.reduce(&v, ops::MinMax).unwrap();
        assert_eq!(
            (mm.min.to_bits(), mm.max.to_bits()),
            (a.to_bits(), neg.to_bits())
        );
    }
}

// ---- run-time parameters ------------------------------------------------------------

/// The bytes of a padding-free value.
fn bytes_of<T: DeviceValue>(v: &T) -> Vec<u8> {
    assert!(T::DENSE);
    // SAFETY: DENSE: every byte belongs to a field.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
        .to_vec()
}

#[test]
fn golden_cuda_of_an_operator_with_run_time_parameters() {
    let op = Scaled { k: 2.5 }.cuda();
    let h = format!("{:08x}", cufold::__private::fnv("macros::macro_ops"));
    assert_eq!(op.type_name, format!("Scaled_{h}_op"));
    assert_eq!(
        body(&op.source, "macros::macro_ops"),
        r#"#ifndef CUFOLD_DECL_Scaled_H
#define CUFOLD_DECL_Scaled_H
// macros::macro_ops::Scaled
struct Scaled_H {
    double k;
};
static_assert(sizeof(Scaled_H) == 8 && alignof(Scaled_H) == 8, "cufold: the CUDA struct Scaled_H does not have the layout of the Rust struct macros::macro_ops::Scaled");
#endif
#ifndef CUFOLD_OP_Scaled_H_op
#define CUFOLD_OP_Scaled_H_op
struct Scaled_H_op : Scaled_H {
    typedef double In;
    typedef double Acc;
    typedef double Out;
    __device__ Acc identity() const {
        return cfm::flit(0.0f, 0.0);
    }
    __device__ Acc lift(In x, cf::u64) const {
        return cfm::mul(x, this->k);
    }
    __device__ Acc combine(Acc a, Acc b) const {
        return cfm::add(a, b);
    }
    __device__ Out finish(Acc a, cf::u64) const { return a; }
};
static_assert(sizeof(Scaled_H_op) == sizeof(Scaled_H), "cufold: Scaled_H_op adds data to its run-time parameters Scaled_H");
#endif
"#
    );
    // The value is not in the source: every value shares one kernel.
    assert_eq!(Scaled { k: -1.0 }.cuda(), op);
    assert_eq!(<Scaled as Operator<f64>>::NAME, "Scaled");
}

#[test]
fn golden_cuda_of_nested_parameters_in_every_function() {
    let src = body(
        &InWindow {
            window: Window { lo: 0.0, hi: 1.0 },
            first: 0,
            cap: 10,
            unit: 1.0,
        }
        .cuda()
        .source,
        "macros::macro_ops",
    );
    // The parameters' fields' types are declared before the parameters, and they before
    // the operator.
    let order = [
        "struct Window_H {",
        "struct InWindow_H {",
        "struct Hits_H {",
        "struct InWindow_H_op : InWindow_H {",
    ];
    let at: Vec<usize> = order
        .iter()
        .map(|s| src.find(s).unwrap_or_else(|| panic!("{s}\n{src}")))
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{src}");
    let start = src.find("    __device__ Acc lift").unwrap();
    assert_eq!(
        &src[start..],
        r#"    __device__ Acc lift(In x, cf::u64 index) const {
        if (((cfm::ge(index, this->first) && cfm::ge(x, this->window.lo)) && cfm::lt(x, this->window.hi))) {
            Hits_H cfm_s;
            cfm_s.count = cfm::ilit(1);
            cfm_s.sum = cfm::cast<double>(x);
            return cfm_s;
        } else {
            Hits_H cfm_s;
            cfm_s.count = cfm::ilit(0);
            cfm_s.sum = cfm::flit(0.0f, 0.0);
            return cfm_s;
        }
    }
    __device__ Acc combine(Acc a, Acc b) const {
        Hits_H cfm_s;
        cfm_s.count = cfm::min(cfm::add(a.count, b.count), this->cap);
        cfm_s.sum = cfm::add(a.sum, b.sum);
        return cfm_s;
    }
    __device__ Out finish(Acc acc, cf::u64 _n) const {
        return cfm::mul(cfm::div(acc.sum, cfm::cast<double>(cfm::max(acc.count, cfm::ilit(1)))), this->unit);
    }
};
static_assert(sizeof(InWindow_H_op) == sizeof(InWindow_H), "cufold: InWindow_H_op adds data to its run-time parameters InWindow_H");
#endif
"#
    );
}

#[test]
fn golden_cuda_of_maps_with_and_without_parameters() {
    let map = Standardize {
        mean: 1.0,
        inv_sd: 0.5,
    }
    .cuda();
    let h = format!("{:08x}", cufold::__private::fnv("macros::macro_ops"));
    assert_eq!(map.type_name, format!("Standardize_{h}_map"));
    assert_eq!(
        body(&map.source, "macros::macro_ops"),
        r#"#ifndef CUFOLD_DECL_Standardize_H
#define CUFOLD_DECL_Standardize_H
// macros::macro_ops::Standardize
struct Standardize_H {
    double mean;
    double inv_sd;
};
static_assert(sizeof(Standardize_H) == 16 && alignof(Standardize_H) == 8, "cufold: the CUDA struct Standardize_H does not have the layout of the Rust struct macros::macro_ops::Standardize");
#endif
#ifndef CUFOLD_MAP_Standardize_H_map
#define CUFOLD_MAP_Standardize_H_map
struct Standardize_H_map : Standardize_H {
    typedef float In;
    typedef double Out;
    __device__ Out operator()(In x, cf::u64) const {
        return cfm::mul(cfm::sub(cfm::cast<double>(x), this->mean), this->inv_sd);
    }
};
static_assert(sizeof(Standardize_H_map) == sizeof(Standardize_H), "cufold: Standardize_H_map adds data to its run-time parameters Standardize_H");
#endif
"#
    );
    assert_eq!(
        body(&Square.cuda().source, "macros::macro_ops"),
        r#"#ifndef CUFOLD_MAP_Square_H_map
#define CUFOLD_MAP_Square_H_map
struct Square_H_map {
    typedef double In;
    typedef double Out;
    __device__ Out operator()(In x, cf::u64) const {
        return cfm::mul(x, x);
    }
};
#endif
"#
    );
    let ramp = body(
        &Ramp {
            slope: 1.0,
            clip: Window { lo: 0.0, hi: 1.0 },
        }
        .cuda()
        .source,
        "macros::macro_ops",
    );
    assert!(
        ramp.contains(
            "    __device__ Out operator()(In x, cf::u64 index) const {\n        \
             auto y = cfm::add(x, cfm::mul(this->slope, cfm::cast<float>(index)));\n        \
             if (cfm::lt(y, this->clip.lo)) {\n            return this->clip.lo;\n"
        ),
        "{ramp}"
    );
    // In a Mapped, the map's struct and the operator's, each once.
    let m = Mapped::new(
        Standardize {
            mean: 0.0,
            inv_sd: 1.0,
        },
        Scaled { k: 1.0 },
    )
    .cuda();
    assert_eq!(
        m.type_name,
        format!("cf::Mapped<Standardize_{h}_map, Scaled_{h}_op>")
    );
    assert_eq!(m.source.matches("\nstruct Scaled_").count(), 2); // the twin and the op
}

#[test]
fn parameters_are_the_values_bytes() {
    let s = Scaled { k: 0.1 };
    let p = s.params();
    assert_eq!((p.bytes(), p.align()), (&0.1f64.to_ne_bytes()[..], 8));
    let w = InWindow {
        window: Window { lo: -1.5, hi: 2.0 },
        first: 3,
        cap: u64::MAX,
        unit: 1e-3,
    };
    assert_eq!(w.params().bytes(), bytes_of(&w));
    assert_eq!(w.params().bytes().len(), 32);
    let t = Standardize {
        mean: 3.0,
        inv_sd: 0.25,
    };
    assert_eq!(t.params().bytes(), bytes_of(&t));
    let r = Ramp {
        slope: 0.5,
        clip: Window { lo: 0.0, hi: 9.0 },
    };
    assert_eq!(
        (r.params().bytes(), r.params().align()),
        (&bytes_of(&r)[..], 4)
    );
    // No `&self`, no parameters: the CUDA struct is default-constructed, as before.
    assert!(Square.params().is_none());
    assert!(<LogSumExp as Operator<f32>>::params(&LogSumExp).is_none());
    // A map and an operator: C++'s layout of `cf::Mapped { F f; O o; }`.
    let both = Mapped::new(t, s).params();
    assert_eq!(both, ops::OpParams::pair(&t.params(), &s.params()));
    assert_eq!(&both.bytes()[..16], bytes_of(&t));
    assert_eq!(&both.bytes()[16..], bytes_of(&s));
    let one = <Mapped<Square, Scaled> as Operator<f64>>::params(&Mapped::new(Square, s));
    assert_eq!(
        (one.bytes().len(), &one.bytes()[8..]),
        (16, &bytes_of(&s)[..])
    );
}

#[test]
fn operators_with_parameters_compute_with_their_values_on_the_cpu() {
    let s = seed("operators_with_parameters_compute_with_their_values_on_the_cpu");
    let cpu = Cpu::new();
    for &n in SIZES {
        let x: Vec<f64> = data(n, s ^ n as u64);
        for k in [0.0, 1.0, -2.5, 0.1] {
            // Same lifts, same tree: the bits of a sum of the scaled values.
            let scaled: Vec<f64> = x.iter().map(|v| v * k).collect();
            let want = cpu.reduce(&scaled, ops::Sum).unwrap();
            let got = cpu.reduce(&x, Scaled { k }).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "n = {n}, k = {k}");
            let scan = cpu.scan(&x, Scaled { k }, ScanKind::Inclusive).unwrap();
            let want = cpu.scan(&scaled, ops::Sum, ScanKind::Inclusive).unwrap();
            assert!(same(&scan, &want), "n = {n}, k = {k}");
        }
        let x: Vec<f32> = data(n, s ^ 5 ^ n as u64);
        for (lo, hi, first, cap) in [
            (-0.5, 0.5, 0, u64::MAX),
            (0.0, 1.0, 7, 50),
            (2.0, 3.0, 0, 1),
        ] {
            let w = InWindow {
                window: Window { lo, hi },
                first,
                cap,
                unit: 4.0,
            };
            let inside: Vec<(usize, f32)> = x
                .iter()
                .copied()
                .enumerate()
                .filter(|&(i, v)| i as u64 >= first && v >= lo && v < hi)
                .collect();
            let acc = cpu.reduce_acc(&x, w);
            assert_eq!(acc.count, (inside.len() as u64).min(cap), "n = {n}");
            let sum: f64 = inside.iter().map(|&(_, v)| v as f64).sum();
            assert!((acc.sum - sum).abs() <= 1e-9 * n as f64, "n = {n}");
            let mean = cpu.reduce(&x, w).unwrap();
            assert_eq!(mean, acc.sum / acc.count.max(1) as f64 * 4.0);
        }
    }
}

#[test]
fn maps_with_parameters_feed_any_operator_on_the_cpu() {
    let s = seed("maps_with_parameters_feed_any_operator_on_the_cpu");
    let cpu = Cpu::new();
    for &n in SIZES {
        let x: Vec<f32> = data(n, s ^ n as u64);
        let t = Standardize {
            mean: 0.25,
            inv_sd: 3.0,
        };
        // The map as written is callable, and is the Transform's apply.
        let mapped: Vec<f64> = x.iter().map(|&v| t.apply(v)).collect();
        for (i, &v) in x.iter().enumerate().take(50) {
            assert_eq!(Transform::apply(&t, v, i as u64), (v as f64 - 0.25) * 3.0);
        }
        let want = cpu.reduce(&mapped, ops::Sum).unwrap();
        let got = cpu.reduce(&x, Mapped::new(t, ops::Sum)).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "n = {n}");
        let want = cpu.reduce(&mapped, Scaled { k: 0.5 }).unwrap();
        let got = cpu.reduce(&x, Mapped::new(t, Scaled { k: 0.5 })).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "n = {n}");

        let r = Ramp {
            slope: 1e-3,
            clip: Window { lo: -0.5, hi: 20.0 },
        };
        let ramped: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, &v)| (v + 1e-3 * i as f32).clamp(-0.5, 20.0))
            .collect();
        if n > 0 {
            let got = cpu.reduce(&x, Mapped::new(r, ops::Max)).unwrap();
            assert!(
                same(&got, &cpu.reduce(&ramped, ops::Max).unwrap()),
                "n = {n}"
            );
        }
        let got = cpu
            .scan(&x, Mapped::new(r, ops::Sum), ScanKind::Exclusive)
            .unwrap();
        let want = cpu.scan(&ramped, ops::Sum, ScanKind::Exclusive).unwrap();
        assert!(same(&got, &want), "n = {n}");

        let wide: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let squares: Vec<f64> = wide.iter().map(|v| v * v).collect();
        let got = cpu.reduce(&wide, Mapped::new(Square, ops::Sum)).unwrap();
        assert_eq!(
            got.to_bits(),
            cpu.reduce(&squares, ops::Sum).unwrap().to_bits()
        );
    }
}
