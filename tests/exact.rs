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
    const {
        assert!(<ExactSum as Operator<f64>>::ORDER_FREE && <ExactMean as Operator<f32>>::ORDER_FREE)
    };
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

// ---- the CUDA half, compiled for the host ------------------------------------------------

#[path = "common/host.rs"]
mod host;

/// Reads lines `0 T n x_1 .. x_n` (T: 0 f32, 1 f64, 2 f16, 3 bf16; the elements' bits in
/// hex) and prints the accumulator of `combine(acc, lift(x))` folded left (its words in
/// hex), whether a thread's run (`cf::Run`, element by element and by whole loads) gives
/// the same words, and the bits of ExactSum's
/// and ExactMean's finish (`-` for the mean of nothing); lines `1 T n w_0 .. w_K` print
/// ExactMean's finish of the accumulator of these words over n.
const DRIVER: &str = r#"
template <class T> void fold(int n) {
    typedef cf::ExactSum<T> Op;
    typedef typename Op::Acc Acc;
    typedef cf::Run<Op> R;
    Op op;
    Acc acc = op.identity();
    // One run adds every element alone, the other whole loads of VEC (as a kernel's full
    // tiles do) and the rest alone.
    constexpr int VEC = sizeof(T) >= 4 ? 16 / (int)sizeof(T) : 8;
    typename R::State st = R::start(op), st_all = R::start(op);
    std::vector<T> xs(n);
    for (int i = 0; i < n; ++i) {
        unsigned long long b;
        if (std::scanf("%llx", &b) != 1) std::exit(2);
        const T x = cf::exact_traits<T>::of(b);
        xs[i] = x;
        acc = op.combine(acc, op.lift(x, i));
        R::add(op, st, x, i);
    }
    int i = 0;
    for (; i + VEC <= n; i += VEC) {
        T v[VEC];
        for (int j = 0; j < VEC; ++j) v[j] = xs[i + j];
        R::template add_all<VEC>(op, st_all, v, i);
    }
    for (; i < n; ++i) R::add(op, st_all, xs[i], i);
    const Acc run = R::end(op, st), run_all = R::end(op, st_all);
    unsigned long long w[sizeof(Acc) / 8];
    std::memcpy(w, &acc, sizeof(Acc));
    for (unsigned long long v : w) std::printf("%llx ", v);
    std::printf("%d %llx ", std::memcmp(&acc, &run, sizeof(Acc)) == 0 && std::memcmp(&acc, &run_all, sizeof(Acc)) == 0,
                cf::exact_traits<T>::bits(op.finish(acc, n)));
    if (n == 0) std::printf("-\n");
    else std::printf("%llx\n", cf::exact_traits<T>::bits(cf::ExactMean<T>().finish(acc, n)));
}
template <class T> void mean(unsigned long long n) {
    typedef typename cf::ExactSum<T>::Acc Acc;
    unsigned long long w[sizeof(Acc) / 8];
    for (unsigned long long& v : w)
        if (std::scanf("%llx", &v) != 1) std::exit(2);
    Acc acc;
    std::memcpy(&acc, w, sizeof(Acc));
    std::printf("%llx\n", cf::exact_traits<T>::bits(cf::ExactMean<T>().finish(acc, n)));
}
int main() {
    int kind, t;
    unsigned long long n;
    while (std::scanf("%d %d %llx", &kind, &t, &n) == 3) {
        if (kind == 0) {
            if (t == 0) fold<float>((int)n); else if (t == 1) fold<double>((int)n);
            else if (t == 2) fold<cf::f16>((int)n); else fold<cf::bf16>((int)n);
        } else {
            if (t == 0) mean<float>(n); else if (t == 1) mean<double>(n);
            else if (t == 2) mean<cf::f16>(n); else mean<cf::bf16>(n);
        }
    }
    return 0;
}
"#;

/// The words of an accumulator (a dense `#[repr(C)]` struct of 64-bit words).
fn words<A: cufold::DeviceValue>(a: &A) -> Vec<u64> {
    assert!(A::DENSE && std::mem::size_of::<A>() % 8 == 0);
    // SAFETY: a dense value of whole 64-bit words: every byte is initialised.
    let bytes = unsafe {
        std::slice::from_raw_parts((a as *const A).cast::<u8>(), std::mem::size_of::<A>())
    };
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// One input of the host check: its line, and the line the C++ half must print.
fn host_case<F: Fmt + ExactFloat>(t: u32, xs: &[F], input: &mut String, want: &mut Vec<String>)
where
    ExactSum: Operator<F, Out = F, Acc = F::Acc>,
    ExactMean: Operator<F, Out = F, Acc = F::Acc>,
{
    let cpu = Cpu::new();
    input.push_str(&format!("0 {t} {:x}", xs.len()));
    for x in xs {
        input.push_str(&format!(" {:x}", x.bits()));
    }
    input.push('\n');
    let acc = cpu.reduce_acc(xs, ExactSum);
    let mut line: String = words(&acc).iter().map(|w| format!("{w:x} ")).collect();
    line.push_str(&format!(
        "1 {:x} ",
        cpu.reduce(xs, ExactSum).unwrap().bits()
    ));
    if xs.is_empty() {
        line.push('-');
    } else {
        line.push_str(&format!("{:x}", cpu.reduce(xs, ExactMean).unwrap().bits()));
    }
    want.push(line);
    // The mean of the same accumulator over other counts.
    for n in [1u64, 3, 1 << 40, (1 << 53) + 1, u64::MAX] {
        input.push_str(&format!("1 {t} {n:x}"));
        for w in words(&acc) {
            input.push_str(&format!(" {w:x}"));
        }
        input.push('\n');
        want.push(format!(
            "{:x}",
            <ExactMean as Operator<F>>::finish(&ExactMean, acc, n).bits()
        ));
    }
}

#[test]
fn the_cuda_half_compiled_for_the_host_has_the_rust_bits() {
    let Some(driver) = host::Driver::build("exact", &["exact.cuh"], DRIVER) else {
        return;
    };

    let (mut input, mut want) = (String::new(), Vec::new());
    let mut r = rng(0x5eed_c0de);
    for (xs, _) in hard_f64() {
        host_case(1, &xs, &mut input, &mut want);
    }
    for (xs, _) in hard_f32() {
        if xs.len() < 100 {
            host_case(0, &xs, &mut input, &mut want);
        }
    }
    for n in [1usize, 2, 7, 100, 9000, 20_000] {
        host_case(1, &wide_exponents::<f64>(n, &mut r), &mut input, &mut want);
        host_case(0, &wide_exponents::<f32>(n, &mut r), &mut input, &mut want);
        host_case(2, &wide_exponents::<f16>(n, &mut r), &mut input, &mut want);
        host_case(3, &wide_exponents::<bf16>(n, &mut r), &mut input, &mut want);
    }
    // Ordinary data (the runs' expansions hold nearly all of it), with specials, huge
    // elements and signed zeros dropped into some loads, and zeros alone.
    use rand::Rng;
    for n in [3usize, 64, 5000, 30_000] {
        let u64s: Vec<f64> = (0..n).map(|_| r.random::<f64>()).collect();
        let u32s: Vec<f32> = (0..n).map(|_| r.random::<f32>()).collect();
        let signed: Vec<f64> = (0..n).map(|_| r.random::<f64>() - 0.5).collect();
        host_case(1, &u64s, &mut input, &mut want);
        host_case(0, &u32s, &mut input, &mut want);
        host_case(1, &signed, &mut input, &mut want);
        let mut spiked = u64s.clone();
        let mut spiked32 = u32s.clone();
        for (k, v) in [f64::INFINITY, 1e300, -1e300, 1e288, f64::MAX, -0.0, 0.0]
            .into_iter()
            .enumerate()
        {
            spiked[(k * 7919) % n] = v;
            spiked32[(k * 7919) % n] = v as f32;
        }
        host_case(1, &spiked, &mut input, &mut want);
        host_case(0, &spiked32, &mut input, &mut want);
        host_case(1, &vec![-0.0f64; n], &mut input, &mut want);
        host_case(0, &vec![-0.0f32; n], &mut input, &mut want);
        let mut zeros = vec![-0.0f32; n];
        zeros[n / 2] = 0.0;
        host_case(0, &zeros, &mut input, &mut want);
    }
    // Many elements of full significands into one chunk: a run must carry on the way.
    host_case(1, &vec![2.0 - f64::EPSILON; 40_000], &mut input, &mut want);
    host_case(0, &vec![2.0 - f32::EPSILON; 40_000], &mut input, &mut want);
    for e in [4, 12, 20, 30, 40] {
        host_case(
            1,
            &gen_sum::<f64>(1000, 10f64.powi(e), &mut r),
            &mut input,
            &mut want,
        );
        host_case(
            0,
            &gen_sum::<f32>(1000, 10f64.powi(e / 3 + 2), &mut r),
            &mut input,
            &mut want,
        );
    }

    let got = driver.run(input);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g,
            w.trim(),
            "case {i}: the C++ half (left) differs from the Rust half"
        );
    }
    driver.remove();
}
