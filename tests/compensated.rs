//! CompensatedSum on the CPU: accuracy against the exact sum (ExactSum, itself checked
//! against an exact reference in tests/exact.rs) on U(0,1) data and on ill-conditioned data,
//! where its documented error bound is asserted; its scans' prefixes; special values; the
//! laws; and kernels/compensated.cuh compiled for the host, which must give the Rust half's
//! bits for the canonical tree, every prefix of a scan and a left fold.

#[path = "exact/common.rs"]
mod common;

use common::{gen_sum, rng, wide_exponents, Fmt};
use cufold::laws::{check, Tolerance};
use cufold::ops::{CompensatedSum, CompensatedWord, CudaOp, DoubleWord, ExactSum, Operator, Sum};
use cufold::{bf16, f16, Cpu, Element, ScanKind};
use rand::Rng;

/// CompensatedSum with its accumulator as the output: what a scan's prefixes hold.
#[derive(Clone, Copy, Debug)]
struct Raw;

impl<T: Element> Operator<T> for Raw
where
    T::Calc: CompensatedWord,
{
    type Acc = DoubleWord<T::Calc>;
    type Out = DoubleWord<T::Calc>;
    const COMMUTATIVE: bool = true;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "Raw";
    fn identity(&self) -> Self::Acc {
        <CompensatedSum as Operator<T>>::identity(&CompensatedSum)
    }
    fn lift(&self, x: T, i: u64) -> Self::Acc {
        CompensatedSum.lift(x, i)
    }
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
        <CompensatedSum as Operator<T>>::combine(&CompensatedSum, a, b)
    }
    fn finish(&self, acc: Self::Acc, _: u64) -> Self::Acc {
        acc
    }
    fn cuda(&self) -> CudaOp {
        unreachable!("Raw runs on the CPU only")
    }
}

/// The value of a double word, in f64 (exact for f32 words of nearby exponents; within
/// 2^-53 relative otherwise).
fn value<W: CompensatedWord>(a: DoubleWord<W>) -> f64 {
    a.hi.to_f64() + a.lo.to_f64()
}

/// The exact sum of `xs` (as f64 values) minus `r`, rounded once to f64.
fn error_of(xs: &[f64], r: f64) -> f64 {
    error_of_acc(xs, &[r])
}

/// The exact sum of `xs` minus the exact sum of `rs`, rounded once to f64.
fn error_of_acc(xs: &[f64], rs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.extend(rs.iter().map(|r| -r));
    Cpu::new().reduce(&v, ExactSum).unwrap()
}

/// The documented bound with grouping depth `d` for a sum `s` with `sum |x| = abs`: `u_t` is
/// the element type's unit roundoff (with f16 and bf16's extra rounding added by the
/// caller), `u` the words'.
fn bound_depth(d: u32, s: f64, abs: f64, u_t: f64, u: f64) -> f64 {
    u_t * s.abs() + 4.0 * d as f64 * u * u * abs
}

/// The bound of a reduction of `n` elements: depth `ceil(log2 n)`.
fn bound(n: usize, s: f64, abs: f64, u_t: f64, u: f64) -> f64 {
    bound_depth(n.next_power_of_two().trailing_zeros(), s, abs, u_t, u)
}

/// The depth of the canonical grouping of a prefix of `m` elements.
fn scan_depth(m: usize) -> u32 {
    m.ilog2() + m.count_ones() - 1
}

/// `γ_n^2 sum |x|` plus `u_t |S|`: the Sum2 form of the bound, which the one above implies.
fn sum2_bound(n: usize, s: f64, abs: f64, u_t: f64, u: f64) -> f64 {
    let g = n as f64 * u / (1.0 - n as f64 * u);
    u_t * s.abs() + g * g * abs
}

fn u01_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut r = rng(seed);
    (0..n).map(|_| r.random::<f32>()).collect()
}

#[test]
fn u01_f32_sums_are_as_good_as_the_exact_sum_rounded() {
    let cpu = Cpu::new();
    let n = 1 << 20;
    let x = u01_f32(n, 0x5eed_c0a1);
    let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    // f32 values of [0, 1) at 2^20 elements: their sum is exact in f64 (at most 48 bits).
    let exact = cpu.reduce(&x64, ExactSum).unwrap();
    let rel = |v: f64| (v - exact).abs() / exact;
    let acc = cpu.reduce_acc(&x, CompensatedSum);
    let r = cpu.reduce(&x, CompensatedSum).unwrap();
    let plain = cpu.reduce(&x, Sum).unwrap();
    println!(
        "U(0,1) f32, n = 2^20: exact {exact}; CompensatedSum {r} (relative error {:.2e}; its \
         accumulator {:.2e}); plain Sum {plain} ({:.2e}); ExactSum {}",
        rel(r as f64),
        rel(value(acc)),
        rel(plain as f64),
        cpu.reduce(&x, ExactSum).unwrap()
    );
    // The accumulator is within 1e-8 relative (in fact far closer), and the f32 result is its
    // rounding: here the correctly rounded sum, ExactSum's.
    assert!(rel(value(acc)) <= 1e-8, "{:e}", rel(value(acc)));
    assert_eq!(r, cpu.reduce(&x, ExactSum).unwrap());
    let u = 2f64.powi(-24);
    assert!(
        (r as f64 - exact).abs() <= bound(n, exact, exact, u, u),
        "the bound"
    );
}

#[test]
fn a_u01_f32_scan_does_not_drift() {
    let cpu = Cpu::new();
    let n = 1 << 20;
    let x = u01_f32(n, 0x5eed_5ca1);
    // Exact prefixes: f32 values of [0, 1) are multiples of 2^-24, so every prefix of 2^20
    // of them is exact in f64.
    let mut exact = Vec::with_capacity(n);
    let mut s = 0f64;
    for &v in &x {
        s += v as f64;
        exact.push(s);
    }
    let raw = cpu.scan(&x, Raw, ScanKind::Inclusive).unwrap();
    let out = cpu.scan(&x, CompensatedSum, ScanKind::Inclusive).unwrap();
    let plain = cpu.scan(&x, Sum, ScanKind::Inclusive).unwrap();
    let last = value(raw[n - 1]);
    let rel_last = (last - exact[n - 1]).abs() / exact[n - 1];
    let u = 2f64.powi(-24);
    let (mut worst, mut worst_plain) = (0f64, 0f64);
    for i in 0..n {
        let e = exact[i];
        let err = (out[i] as f64 - e).abs();
        assert!(
            err <= bound_depth(scan_depth(i + 1), e, e, u, u),
            "prefix {i}: {} against {e}",
            out[i]
        );
        assert_eq!(out[i], raw[i].hi, "prefix {i}: the finish of the prefix");
        if e > 0.0 {
            worst = worst.max(err / e);
            worst_plain = worst_plain.max((plain[i] as f64 - e).abs() / e);
        }
    }
    println!(
        "inclusive scan of 2^20 U(0,1) f32: last prefix's accumulator within {rel_last:.2e} \
         relative; worst prefix {worst:.2e} relative (the f32 rounding); plain Sum's worst \
         prefix {worst_plain:.2e}, its last {:.2e}",
        (plain[n - 1] as f64 - exact[n - 1]).abs() / exact[n - 1]
    );
    assert!(rel_last <= 1e-8, "{rel_last:e}");
    assert_eq!(out[n - 1], cpu.reduce(&x, CompensatedSum).unwrap());
    // Within one rounding of the exact value: the correctly rounded one or its neighbour.
    assert!(((out[n - 1] as f64) - exact[n - 1]).abs() <= u * exact[n - 1]);
}

/// `CompensatedSum` of `xs` on the CPU is within the documented bound of the exact sum (and
/// within the Sum2 form); returns the error over the bound.
fn within_bound<F: Fmt + Element>(xs: &[F], u_t: f64, u: f64, what: &str) -> f64
where
    CompensatedSum: Operator<F, Out = F>,
{
    let cpu = Cpu::new();
    let x64: Vec<f64> = xs.iter().map(|&v| Fmt::to_f64(v)).collect();
    let abs: Vec<f64> = x64.iter().map(|v| v.abs()).collect();
    let s = cpu.reduce(&x64, ExactSum).unwrap();
    let abs = cpu.reduce(&abs, ExactSum).unwrap();
    let r = Fmt::to_f64(cpu.reduce(xs, CompensatedSum).unwrap());
    let err = error_of(&x64, r).abs();
    let b = bound(xs.len(), s, abs, u_t, u) * (1.0 + 1e-9);
    assert!(
        err <= b,
        "{what}: n {}: error {err:e} above the bound {b:e} (sum {s:e}, sum |x| {abs:e})",
        xs.len()
    );
    assert!(err <= sum2_bound(xs.len(), s, abs, u_t, u) * (1.0 + 1e-9) || xs.len() < 2);
    err / b
}

#[test]
fn ill_conditioned_sums_stay_within_the_bound() {
    let mut r = rng(0x5eed_b0d5);
    let (u32_, u64_) = (2f64.powi(-24), 2f64.powi(-53));
    let mut worst = (0f64, 0f64, 0f64);
    for e in (2..=40).step_by(2) {
        for n in [6usize, 7, 100, 4097, 30_000] {
            let xs: Vec<f64> = gen_sum(n, 10f64.powi(e), &mut r);
            worst.1 = worst.1.max(within_bound(&xs, u64_, u64_, "GenSum f64"));
        }
    }
    for e in 2..=16 {
        for n in [6usize, 9, 100, 4097, 30_000] {
            let xs: Vec<f32> = gen_sum(n, 10f64.powi(e), &mut r);
            worst.0 = worst.0.max(within_bound(&xs, u32_, u32_, "GenSum f32"));
        }
    }
    for n in [6usize, 64, 1000] {
        let xs: Vec<f16> = gen_sum(n, 1e4, &mut r);
        let u_h = 2f64.powi(-11);
        worst.2 = worst
            .2
            .max(within_bound(&xs, u_h + 2.0 * u32_, u32_, "f16"));
        let xs: Vec<bf16> = gen_sum(n, 1e6, &mut r);
        let u_b = 2f64.powi(-8);
        worst.2 = worst
            .2
            .max(within_bound(&xs, u_b + 2.0 * u32_, u32_, "bf16"));
    }
    println!(
        "ill-conditioned sums: the largest error as a fraction of the bound: f32 {:.3}, f64 {:.3}, \
         f16/bf16 {:.3}",
        worst.0, worst.1, worst.2
    );
    // Against the plain sum, once: cond 1e12 in f64.
    let xs: Vec<f64> = gen_sum(100_000, 1e12, &mut r);
    let cpu = Cpu::new();
    let s = cpu.reduce(&xs, ExactSum).unwrap();
    println!(
        "GenSum f64, cond 1e12, n 1e5: relative error CompensatedSum {:.2e}, plain Sum {:.2e}",
        (error_of(&xs, cpu.reduce(&xs, CompensatedSum).unwrap()) / s).abs(),
        (error_of(&xs, cpu.reduce(&xs, Sum).unwrap()) / s).abs()
    );
}

/// Every prefix of an inclusive scan of `xs` is within the bound for its grouping's depth,
/// and its accumulator within the bound's second term (what the grouping adds before the
/// final rounding); returns the largest of each error over its bound.
fn scan_within_bound<F: Fmt + Element>(xs: &[F], u: f64, what: &str) -> (f64, f64)
where
    CompensatedSum: Operator<F, Out = F>,
    F::Calc: CompensatedWord,
{
    let cpu = Cpu::new();
    let x64: Vec<f64> = xs.iter().map(|&v| Fmt::to_f64(v)).collect();
    let out = cpu.scan(xs, CompensatedSum, ScanKind::Inclusive).unwrap();
    let raw = cpu.scan(xs, Raw, ScanKind::Inclusive).unwrap();
    let (mut worst, mut worst_acc) = (0f64, 0f64);
    for m in 1..=xs.len() {
        let p = &x64[..m];
        let s = cpu.reduce(p, ExactSum).unwrap();
        let abs: Vec<f64> = p.iter().map(|v| v.abs()).collect();
        let abs = cpu.reduce(&abs, ExactSum).unwrap();
        let err = error_of(p, Fmt::to_f64(out[m - 1])).abs();
        let b = bound_depth(scan_depth(m), s, abs, u, u) * (1.0 + 1e-9);
        assert!(err <= b, "{what}: prefix of {m}: error {err:e} above {b:e}");
        worst = worst.max(err / b);
        let a = raw[m - 1];
        let err = error_of_acc(p, &[a.hi.to_f64(), a.lo.to_f64()]).abs();
        let b = bound_depth(scan_depth(m), 0.0, abs, u, u) * (1.0 + 1e-9);
        assert!(
            err <= b,
            "{what}: prefix of {m}: accumulator error {err:e} above {b:e}"
        );
        worst_acc = worst_acc.max(err / b);
    }
    (worst, worst_acc)
}

#[test]
fn ill_conditioned_scans_stay_within_the_bound() {
    let mut r = rng(0x5eed_5cb0);
    let mut worst = (0f64, 0f64);
    let mut keep = |w: (f64, f64)| worst = (worst.0.max(w.0), worst.1.max(w.1));
    for cond in [1e8, 1e20, 1e32] {
        let xs: Vec<f64> = gen_sum(700, cond, &mut r);
        keep(scan_within_bound(&xs, 2f64.powi(-53), "GenSum f64"));
    }
    for cond in [1e4, 1e8, 1e14] {
        let xs: Vec<f32> = gen_sum(700, cond, &mut r);
        keep(scan_within_bound(&xs, 2f64.powi(-24), "GenSum f32"));
    }
    println!(
        "ill-conditioned scans: the largest prefix error as a fraction of its bound {:.3}; the \
         accumulator's error as a fraction of the bound's second term {:.3}",
        worst.0, worst.1
    );
}

#[test]
fn special_values_follow_the_plain_sum() {
    let cpu = Cpu::new();
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let cases: [(&[f64], f64); 8] = [
        (&[1.0, inf, 2.0, 3.0], inf),
        (&[1.0, -inf, 2.0, 3.0, 4.0], -inf),
        (&[inf, 1.0, -inf], nan),
        (&[1.0, nan, 2.0], nan),
        (&[f64::MAX, f64::MAX, 1.0], inf),
        (&[-f64::MAX, -f64::MAX], -inf),
        (&[1e300, 1.0, -1e300], 1.0),
        (&[], 0.0),
    ];
    for (xs, want) in cases {
        let got = cpu.reduce(xs, CompensatedSum).unwrap();
        let plain = cpu.reduce(xs, Sum).unwrap();
        if want.is_nan() {
            assert!(got.is_nan() && plain.is_nan(), "{xs:?}");
        } else {
            assert_eq!(got, want, "{xs:?}");
        }
        if !want.is_finite() {
            assert_eq!(got.to_bits(), plain.to_bits(), "{xs:?}: the plain sum's");
        }
        // Each prefix of a scan too.
        let scan = cpu.scan(xs, CompensatedSum, ScanKind::Inclusive).unwrap();
        let plain = cpu.scan(xs, Sum, ScanKind::Inclusive).unwrap();
        for (g, p) in scan.iter().zip(&plain) {
            if !p.is_finite() {
                assert!(g.to_bits() == p.to_bits() || (g.is_nan() && p.is_nan()));
            }
        }
    }
    let got = cpu.reduce(&[f32::INFINITY, 1.0], CompensatedSum).unwrap();
    assert_eq!(got, f32::INFINITY);
    let tiny = f64::from_bits(1);
    assert_eq!(
        cpu.reduce(&[tiny, tiny, -tiny], CompensatedSum).unwrap(),
        tiny
    );
    let h = [f16::MAX, f16::MAX];
    assert_eq!(cpu.reduce(&h, CompensatedSum).unwrap(), f16::INFINITY);
}

#[test]
fn the_laws_hold() {
    // Dyadic samples and special values: every sum is exact, so the laws hold exactly.
    let exact = [
        0.0f64,
        -0.0,
        1.0,
        -1.0,
        0.5,
        3.25,
        -1024.0,
        2f64.powi(60),
        -2f64.powi(-40),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    check(CompensatedSum, &exact, Tolerance::Exact).unwrap();
    let f32s: Vec<f32> = exact.iter().map(|&v| v as f32).collect();
    check(CompensatedSum, &f32s, Tolerance::Exact).unwrap();
    let halves: Vec<f16> = f32s.iter().map(|&v| f16::from_f32(v)).collect();
    check(CompensatedSum, &halves, Tolerance::Exact).unwrap();
    let bhalves: Vec<bf16> = f32s.iter().map(|&v| bf16::from_f32(v)).collect();
    check(CompensatedSum, &bhalves, Tolerance::Exact).unwrap();
    // General samples: associativity up to the double word's rounding, about u^2 relative.
    let mut r = rng(0x5eed_1a35);
    let xs: Vec<f64> = (0..40).map(|_| r.random::<f64>() * 1e3).collect();
    check(CompensatedSum, &xs, Tolerance::Relative(1e-30)).unwrap();
    let xs: Vec<f32> = (0..40).map(|_| r.random::<f32>() * 1e3).collect();
    check(CompensatedSum, &xs, Tolerance::Relative(1e-13)).unwrap();
    check(CompensatedSum, &xs, Tolerance::Ulps(1)).unwrap();
    const { assert!(!<CompensatedSum as Operator<f64>>::ORDER_FREE) };
    const { assert!(<CompensatedSum as Operator<f32>>::SCANNABLE) };
}

// ---- the CUDA half, compiled for the host ------------------------------------------------

#[path = "common/host.rs"]
mod host;

/// Reads lines `T n x_1 .. x_n` (T: 0 f32, 1 f64, 2 f16, 3 bf16; the elements' bits in
/// hex) and prints, in hex (every NaN as `nan`): the canonical tree's accumulator (hi, lo) and finish; the left
/// fold's; and, for every inclusive prefix (the left fold, largest first, of the trees over
/// the aligned power-of-two blocks of [0, i]), its accumulator and finish.
const DRIVER: &str = r#"
// Bits in hex, every NaN as "nan" (its sign and payload depend on the operands' order,
// which a compiler may swap in a commutative add: on the device every NaN is canonical).
static void word(unsigned long long b, bool nan) { if (nan) std::printf("nan "); else std::printf("%llx ", b); }
static void wbits(float x) { word(__float_as_uint(x), x != x); }
static void wbits(double x) { word((unsigned long long)__double_as_longlong(x), x != x); }
static void wbits(cf::f16 x) { word(x.bits, (x.bits & 0x7fff) > 0x7c00); }
static void wbits(cf::bf16 x) { word(x.bits, (x.bits & 0x7fff) > 0x7f80); }
template <class T> T of_bits(unsigned long long b);
template <> float of_bits<float>(unsigned long long b) { return __uint_as_float((unsigned)b); }
template <> double of_bits<double>(unsigned long long b) { return __longlong_as_double((long long)b); }
template <> cf::f16 of_bits<cf::f16>(unsigned long long b) { cf::f16 h; h.bits = (unsigned short)b; return h; }
template <> cf::bf16 of_bits<cf::bf16>(unsigned long long b) { cf::bf16 h; h.bits = (unsigned short)b; return h; }

template <class Op> struct Tree {
    const Op& op;
    const std::vector<typename Op::Acc>& leaf;
    typename Op::Acc at(size_t lo, size_t size) const {
        if (size == 1) return leaf[lo];
        const size_t half = size / 2;
        const typename Op::Acc l = at(lo, half);
        const typename Op::Acc r = lo + half < leaf.size() ? at(lo + half, half) : op.identity();
        return op.combine(l, r);
    }
};

template <class Op> void show(const Op& op, typename Op::Acc a, unsigned long long n) {
    wbits(a.hi);
    wbits(a.lo);
    wbits(op.finish(a, n));
}

static bool same(float a, float b) { return (a != a && b != b) || __float_as_uint(a) == __float_as_uint(b); }
static bool same(double a, double b) {
    return (a != a && b != b) || __double_as_longlong(a) == __double_as_longlong(b);
}

template <class T> void run(size_t n) {
    typedef cf::CompensatedSum<T> Op;
    typedef typename Op::Acc Acc;
    Op op;
    std::vector<Acc> leaf;
    for (size_t i = 0; i < n; ++i) {
        unsigned long long b;
        if (std::scanf("%llx", &b) != 1) std::exit(2);
        leaf.push_back(op.lift(of_bits<T>(b), i));
    }
    Tree<Op> t0{op, leaf};
    // The unchecked combines have combine's bits on every aligned subtree of up to 64 leaves
    // whose result they call ok (the lane runs' test), and say so wherever that subtree
    // holds no infinity or NaN and no overflow (where the checked result is finite).
    struct Unchecked : Op {
        Acc combine(Acc a, Acc b) const { return Op::combine_unchecked(a, b); }
    };
    const Unchecked uop{};
    Tree<Unchecked> ut{uop, leaf};
    for (size_t size = 2; size <= 64 && size <= n; size *= 2)
        for (size_t lo = 0; lo + size <= n; lo += size) {
            const Acc c = t0.at(lo, size), u = ut.at(lo, size);
            if (op.unchecked_ok(u) && (!same(c.hi, u.hi) || !same(c.lo, u.lo)))
                std::printf("combine_unchecked(%zu, %zu) differs ", lo, size);
            if (!op.unchecked_ok(u) && std::isfinite((double)c.hi) && std::isfinite((double)c.lo))
                std::printf("unchecked_ok(%zu, %zu) is false ", lo, size);
        }
    // combine_lifted has combine's bits on lifts: every pair of the first 64 leaves, and
    // every pair of neighbours.
    for (size_t i = 0; i < n; ++i)
        for (size_t j = i < 64 ? 0 : i + 1; j < n && (j < 64 || j == i + 1); ++j) {
            const Acc p = op.combine(leaf[i], leaf[j]), q = op.combine_lifted(leaf[i], leaf[j]);
            if (!same(p.hi, q.hi) || !same(p.lo, q.lo)) std::printf("combine_lifted(%zu, %zu) differs ", i, j);
        }
    Tree<Op> t{op, leaf};
    size_t p = 1;
    while (p < n) p *= 2;
    show(op, n == 0 ? op.identity() : t.at(0, p), n);
    Acc fold = op.identity();
    for (size_t i = 0; i < n; ++i) fold = op.combine(fold, leaf[i]);
    show(op, fold, n);
    for (size_t i = 0; i < n; ++i) {
        const size_t m = i + 1;
        Acc acc;
        bool first = true;
        size_t pos = 0;
        for (int b = 63; b >= 0; --b) {
            const size_t size = (size_t)1 << b;
            if ((m & size) == 0) continue;
            const Acc node = t.at(pos, size);
            acc = first ? node : op.combine(acc, node);
            first = false;
            pos += size;
        }
        show(op, acc, m);
    }
    std::printf("\n");
}

int main() {
    int t;
    unsigned long long n;
    while (std::scanf("%d %llx", &t, &n) == 2) {
        if (t == 0) run<float>(n); else if (t == 1) run<double>(n);
        else if (t == 2) run<cf::f16>(n); else run<cf::bf16>(n);
    }
    return 0;
}
"#;

/// One input of the host check: its line, and the line the C++ half must print (from the
/// CPU backend's reduce and scan and a fold with the Rust half's combine).
fn host_case<F: Fmt + Element>(t: u32, xs: &[F], input: &mut String, want: &mut Vec<String>)
where
    F::Calc: CompensatedWord + Fmt,
    CompensatedSum: Operator<F, Out = F, Acc = DoubleWord<F::Calc>>,
{
    let cpu = Cpu::new();
    input.push_str(&format!("{t} {:x}", xs.len()));
    for x in xs {
        input.push_str(&format!(" {:x}", x.bits()));
    }
    input.push('\n');
    // As the driver prints them: hex bits, every NaN as "nan".
    fn hex<G: Fmt + Element>(x: G) -> String {
        if x.is_nan_value() {
            "nan ".into()
        } else {
            format!("{:x} ", x.bits())
        }
    }
    let show = |a: DoubleWord<F::Calc>, out: F| hex(a.hi) + &hex(a.lo) + &hex(out);
    let op = CompensatedSum;
    let n = xs.len() as u64;
    let mut line = show(
        cpu.reduce_acc(xs, CompensatedSum),
        cpu.reduce(xs, CompensatedSum).unwrap(),
    );
    let fold = xs.iter().enumerate().fold(op.identity(), |a, (i, &x)| {
        op.combine(a, op.lift(x, i as u64))
    });
    line.push_str(&show(fold, op.finish(fold, n)));
    let raw = cpu.scan(xs, Raw, ScanKind::Inclusive).unwrap();
    let out = cpu.scan(xs, CompensatedSum, ScanKind::Inclusive).unwrap();
    for (a, o) in raw.iter().zip(&out) {
        line.push_str(&show(*a, *o));
    }
    want.push(line.trim().to_string());
}

fn u01<F: Fmt>(n: usize, r: &mut rand_chacha::ChaCha8Rng) -> Vec<F> {
    (0..n).map(|_| F::of_f64(r.random::<f64>())).collect()
}

/// Quads [a, MAX, -MAX, -a] with a = -1.5 ulp(MAX): each pair's sum is finite, MAX - 1 ulp
/// in magnitude, a tie rounded to even, and the quad's is 0. Knuth's TwoSum of (a, MAX)
/// overflowed inside (`s - a`) and gave NaN.
fn next_to_max_f32(n: usize) -> Vec<f32> {
    let a = -1.5 * 2f32.powi(104);
    (0..n)
        .map(|i| [a, f32::MAX, -f32::MAX, -a][i % 4])
        .collect()
}
fn next_to_max_f64(n: usize) -> Vec<f64> {
    let a = -1.5 * 2f64.powi(971);
    (0..n)
        .map(|i| [a, f64::MAX, -f64::MAX, -a][i % 4])
        .collect()
}

#[test]
fn sums_next_to_the_largest_finite_value_are_finite() {
    let cpu = Cpu::new();
    let xs = next_to_max_f32(4000);
    assert_eq!(cpu.reduce(&xs, CompensatedSum).unwrap(), 0.0);
    let prefix = cpu.scan(&xs, CompensatedSum, ScanKind::Inclusive).unwrap();
    assert!(prefix.iter().all(|p| p.is_finite()));
    assert_eq!(prefix[1], f32::MAX - 2f32.powi(104));
    let ys = next_to_max_f64(4000);
    assert_eq!(cpu.reduce(&ys, CompensatedSum).unwrap(), 0.0);
    let prefix = cpu.scan(&ys, CompensatedSum, ScanKind::Inclusive).unwrap();
    assert!(prefix.iter().all(|p| p.is_finite()));
    assert_eq!(prefix[1], f64::MAX - 2f64.powi(971));
}

#[test]
fn the_cuda_half_compiled_for_the_host_has_the_rust_bits() {
    let Some(driver) = host::Driver::build("compensated", &["compensated.cuh"], DRIVER) else {
        return;
    };

    let (mut input, mut want) = (String::new(), Vec::new());
    let mut r = rng(0x5eed_c0de);
    let specials = [
        1.0f64,
        f64::INFINITY,
        -2.5,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MAX,
        f64::MAX,
        -0.0,
        1e-310,
        3.0,
    ];
    host_case(1, &specials, &mut input, &mut want);
    let s32: Vec<f32> = specials.iter().map(|&v| v as f32).collect();
    host_case(0, &s32, &mut input, &mut want);
    host_case(0, &next_to_max_f32(40), &mut input, &mut want);
    host_case(1, &next_to_max_f64(40), &mut input, &mut want);
    for n in [0usize, 1, 2, 3, 5, 8, 100, 1000, 3001] {
        host_case(1, &u01::<f64>(n, &mut r), &mut input, &mut want);
        host_case(0, &u01::<f32>(n, &mut r), &mut input, &mut want);
        host_case(2, &u01::<f16>(n, &mut r), &mut input, &mut want);
        host_case(3, &u01::<bf16>(n, &mut r), &mut input, &mut want);
    }
    for n in [6usize, 77, 1500] {
        host_case(1, &gen_sum::<f64>(n, 1e30, &mut r), &mut input, &mut want);
        host_case(0, &gen_sum::<f32>(n, 1e12, &mut r), &mut input, &mut want);
        host_case(2, &gen_sum::<f16>(n, 1e4, &mut r), &mut input, &mut want);
        host_case(3, &gen_sum::<bf16>(n, 1e6, &mut r), &mut input, &mut want);
        host_case(1, &wide_exponents::<f64>(n, &mut r), &mut input, &mut want);
        host_case(0, &wide_exponents::<f32>(n, &mut r), &mut input, &mut want);
    }

    let got = driver.run(input);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if g != w {
            let at = g
                .split(' ')
                .zip(w.split(' '))
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            panic!(
                "case {i}: the C++ half differs from the Rust half at word {at} (3 words an \
                 accumulator: tree, fold, then each prefix):\n C++:  {}\n Rust: {}",
                &g[..g.len().min(400)],
                &w[..w.len().min(400)]
            );
        }
    }
    driver.remove();
}
