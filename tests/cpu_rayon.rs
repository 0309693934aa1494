//! The CPU backend on rayon: what the hand-made threads got wrong (issue 14), and that the
//! faster leaves keep the canonical tree's bits. CPU only: runs everywhere.

mod common;
use common::*;
use cufold::ops::*;
use cufold::{Backend, Cpu, ScanKind};
use rayon::prelude::*;
use std::collections::HashSet;
use std::sync::Mutex;
use std::thread::ThreadId;

/// The mean of integers, in integers: `finish` divides by the count, which is never 0 for
/// the outputs of an inclusive scan (nor for a non-empty reduction).
#[derive(Clone, Copy, Debug)]
struct IntMean;

impl Operator<u32> for IntMean {
    type Acc = u32;
    type Out = u32;
    const COMMUTATIVE: bool = true;
    const EMPTY_IS_ERROR: bool = true;
    const NAME: &'static str = "IntMean";
    fn identity(&self) -> u32 {
        0
    }
    fn lift(&self, x: u32, _: u64) -> u32 {
        x
    }
    fn combine(&self, a: u32, b: u32) -> u32 {
        a.wrapping_add(b)
    }
    fn finish(&self, acc: u32, n: u64) -> u32 {
        acc / n as u32 // panics for n = 0
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: "IntMean".into(),
            source: String::new(),
        }
    }
}

#[test]
fn scans_compute_no_output_the_definition_does_not_ask_for() {
    let x = [2u32, 4, 6];
    let cpu = Cpu::new();
    assert_eq!(
        cpu.scan(&x, IntMean, ScanKind::Inclusive).unwrap(),
        [2, 3, 4]
    );
    let b = Backend::Cpu(cpu);
    assert_eq!(b.scan(&x, IntMean, ScanKind::Inclusive).unwrap(), [2, 3, 4]);
    // Long enough for the parallel path, on any width.
    let long: Vec<u32> = (0..200_000).map(|i| i % 7).collect();
    for threads in [1, 2, 5] {
        let y = Cpu::with_threads(threads)
            .scan(&long, IntMean, ScanKind::Inclusive)
            .unwrap();
        let (mut s, mut want) = (0u32, Vec::new());
        for (i, &v) in long.iter().enumerate() {
            s += v;
            want.push(s / (i as u32 + 1));
        }
        assert!(y == want, "{threads} threads");
    }
}

#[test]
fn any_width_is_safe_and_gives_the_same_bits() {
    let s = seed("any_width_is_safe_and_gives_the_same_bits");
    let x: Vec<f32> = data(300_001, s);
    let one = Cpu::with_threads(1);
    let sum = one.reduce(&x, Sum).unwrap();
    let scan = one.scan(&x, Sum, ScanKind::Inclusive).unwrap();
    let offsets = [0u64, 7, 100_000, 300_001];
    let segs = one.reduce_segments(&x, &offsets, MeanVar).unwrap();
    for threads in [0, 2, 1 << 62, usize::MAX] {
        let cpu = Cpu::with_threads(threads);
        assert!(cpu.threads() >= 1);
        assert_eq!(cpu.reduce(&x, Sum).unwrap().to_bits(), sum.to_bits());
        let got = cpu.scan(&x, Sum, ScanKind::Inclusive).unwrap();
        assert!(
            got.iter()
                .zip(&scan)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{threads} threads"
        );
        assert!(same(
            &cpu.reduce_segments(&x, &offsets, MeanVar).unwrap(),
            &segs
        ));
    }
}

/// The threads an operator has run on.
static SEEN: Mutex<Option<HashSet<ThreadId>>> = Mutex::new(None);

/// Sum, noting the thread of every combine.
#[derive(Clone, Copy, Debug)]
struct Watched;

impl Operator<u32> for Watched {
    type Acc = u32;
    type Out = u32;
    const COMMUTATIVE: bool = true;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "Watched";
    fn identity(&self) -> u32 {
        0
    }
    fn lift(&self, x: u32, _: u64) -> u32 {
        x
    }
    fn combine(&self, a: u32, b: u32) -> u32 {
        SEEN.lock()
            .unwrap()
            .get_or_insert_with(HashSet::new)
            .insert(std::thread::current().id());
        a.wrapping_add(b)
    }
    fn finish(&self, acc: u32, _: u64) -> u32 {
        acc
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: "Watched".into(),
            source: String::new(),
        }
    }
}

#[test]
fn short_inputs_run_on_the_callers_thread() {
    let x: Vec<u32> = (0..1000).collect();
    let me = std::thread::current().id();
    for cpu in [Cpu::new(), Cpu::with_threads(8)] {
        *SEEN.lock().unwrap() = None;
        cpu.scan(&x, Watched, ScanKind::Inclusive).unwrap();
        cpu.reduce(&x, Watched).unwrap();
        cpu.reduce_segments(&x, &[0, 10, 500, 1000], Watched)
            .unwrap();
        let seen = SEEN.lock().unwrap().take().unwrap();
        assert_eq!(seen, HashSet::from([me]), "{} threads", cpu.threads());
    }
}

/// Sum that panics on one value, with a message of its own.
#[derive(Clone, Copy, Debug)]
struct Fragile;

impl Operator<u32> for Fragile {
    type Acc = u32;
    type Out = u32;
    const COMMUTATIVE: bool = true;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "Fragile";
    fn identity(&self) -> u32 {
        0
    }
    fn lift(&self, x: u32, index: u64) -> u32 {
        if x == 13 {
            panic!("unlucky element at {index}");
        }
        x
    }
    fn combine(&self, a: u32, b: u32) -> u32 {
        a.wrapping_add(b)
    }
    fn finish(&self, acc: u32, _: u64) -> u32 {
        acc
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: "Fragile".into(),
            source: String::new(),
        }
    }
}

#[test]
fn a_panic_in_an_operator_keeps_its_payload() {
    let n = 1 << 20;
    let mut x = vec![1u32; n];
    x[n - 5] = 13; // in the last piece, on a worker thread
    let cpu = Cpu::with_threads(4);
    let message = |r: std::thread::Result<()>| -> String {
        let p = r.expect_err("the operator panicked");
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .expect("the operator's own payload, a string")
    };
    let want = format!("unlucky element at {}", n - 5);
    let r = std::panic::catch_unwind(|| {
        cpu.reduce(&x, Fragile).unwrap();
    });
    assert_eq!(message(r), want);
    let r = std::panic::catch_unwind(|| {
        cpu.scan(&x, Fragile, ScanKind::Inclusive).unwrap();
    });
    assert_eq!(message(r), want);
    // In the first chunk of a parallel scan, which the later chunks wait for: they stop
    // (no hang) and the panic is the call's.
    let mut early = vec![1u32; n];
    early[5] = 13;
    let r = std::panic::catch_unwind(|| {
        cpu.scan(&early, Fragile, ScanKind::Exclusive).unwrap();
    });
    assert_eq!(message(r), "unlucky element at 5");
    // In a row the index is the column.
    let r = std::panic::catch_unwind(|| {
        cpu.reduce_rows(&x, cufold::segment::Rows::new(1 << 10, 1 << 10), Fragile)
            .unwrap();
    });
    assert_eq!(
        message(r),
        format!("unlucky element at {}", (n - 5) % (1 << 10))
    );
}

#[test]
fn runs_in_the_callers_pool_and_composes_with_par_iter() {
    let s = seed("runs_in_the_callers_pool_and_composes_with_par_iter");
    let inputs: Vec<Vec<f64>> = (0..6)
        .map(|k| data(100_000 + k * 31_337, s ^ k as u64))
        .collect();
    let want: Vec<u64> = inputs
        .iter()
        .map(|x| Cpu::with_threads(1).reduce(x, Sum).unwrap().to_bits())
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let got: Vec<u64> = pool.install(|| {
        assert_eq!(Cpu::new().threads(), 3);
        inputs
            .par_iter()
            .map(|x| Cpu::new().reduce(x, Sum).unwrap().to_bits())
            .collect()
    });
    assert_eq!(got, want);
    let scans: Vec<Vec<f64>> = inputs
        .par_iter()
        .map(|x| Cpu::new().scan(x, Sum, ScanKind::Exclusive).unwrap())
        .collect();
    for (x, y) in inputs.iter().zip(&scans) {
        let one = Cpu::with_threads(1)
            .scan(x, Sum, ScanKind::Exclusive)
            .unwrap();
        assert!(same(&one, y));
    }
}

/// The canonical tree, the obvious way, with `combine` only (no leaf shortcuts).
fn naive<T: cufold::DeviceValue, O: Operator<T>>(op: &O, x: &[T]) -> O::Acc {
    fn tree<T: cufold::DeviceValue, O: Operator<T>>(
        op: &O,
        x: &[T],
        lo: usize,
        len: usize,
    ) -> O::Acc {
        if len == 1 {
            return op.lift(x[lo], lo as u64);
        }
        let h = len / 2;
        let left = tree(op, x, lo, h);
        let right = if lo + h < x.len() {
            tree(op, x, lo + h, h)
        } else {
            op.identity()
        };
        op.combine(left, right)
    }
    if x.is_empty() {
        return op.identity();
    }
    tree(op, x, 0, x.len().next_power_of_two())
}

/// The leaves folded as fixed-size blocks (with `combine_full`) and the order-free
/// operators' independent runs give the bits of the plain tree, on data with the values
/// that tell groupings apart: NaNs, signed zeros, infinities, ties, huge and tiny values.
#[test]
fn fast_leaves_have_the_bits_of_the_plain_tree() {
    let s = seed("fast_leaves_have_the_bits_of_the_plain_tree");
    let specials = [
        f64::NAN,
        -f64::NAN,
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MAX,
        -f64::MAX,
        1e300,
        5e-324,
    ];
    for &n in &[1usize, 63, 64, 65, 4096, 4097, 70_000, 262_144] {
        for density in [0usize, 3, 1000] {
            let mut x: Vec<f64> = data(n, s ^ n as u64);
            let mut rng = Rng(s ^ density as u64);
            for _ in 0..density.min(n) {
                let i = rng.next() as usize % n;
                x[i] = specials[rng.next() as usize % specials.len()];
            }
            let what = format!("n = {n}, {density} specials");
            let cpu = Cpu::new();
            let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            macro_rules! same_bits {
                (bits $xs:expr, $op:expr) => {
                    // Debug shows every NaN as "NaN": compare the bits too. (Which NaN an
                    // arithmetic operation returns is not specified by Rust: the compiler
                    // may swap an add's operands. Max and Min select, so theirs are exact.)
                    let got = cpu.reduce_acc($xs, $op);
                    let want = naive(&$op, $xs);
                    let arithmetic_nan = got.is_nan()
                        && want.is_nan()
                        && stringify!($op) != "Max"
                        && stringify!($op) != "Min";
                    assert!(
                        arithmetic_nan || got.to_bits() == want.to_bits(),
                        "{} {what}: {got:?} vs {want:?}",
                        stringify!($op)
                    );
                };
                ($xs:expr, $op:expr) => {
                    let got = cpu.reduce_acc($xs, $op);
                    let want = naive(&$op, $xs);
                    assert!(
                        same(&got, &want),
                        "{} {what}: {got:?} vs {want:?}",
                        stringify!($op)
                    );
                };
            }
            same_bits!(bits & x, Sum);
            same_bits!(bits & xf, Sum);
            same_bits!(bits & xf, WideSum);
            same_bits!(bits & xf, Mean);
            same_bits!(bits & x, Max);
            same_bits!(bits & xf, Min);
            same_bits!(bits & xf, Div2Mean);
            same_bits!(&x, MeanVar);
            same_bits!(&xf, MeanVar);
            same_bits!(&x, Max);
            same_bits!(&xf, Min);
            same_bits!(&xf, MinMax);
            same_bits!(&x, ArgMax);
            same_bits!(&xf, ArgMin);
            same_bits!(&xf, Div2Mean);
            let ints: Vec<i32> = x.iter().map(|&v| (v * 1e9) as i32).collect();
            same_bits!(&ints, Sum);
            same_bits!(&ints, ArgMax);
        }
    }
}

/// Exact bits of an element, NaN payloads included (the selecting operators return one of
/// their inputs, so even which NaN comes back is fixed).
trait Raw: Copy {
    fn raw(self) -> u64;
}
macro_rules! raw {
    (int $($t:ty),*) => {$(impl Raw for $t { fn raw(self) -> u64 { self as u64 } })*};
    (float $($t:ty),*) => {$(impl Raw for $t { fn raw(self) -> u64 { self.to_bits() as u64 } })*};
}
raw!(int i32, i64, u32, u64, u8);
raw!(float f32, f64, cufold::f16, cufold::bf16);

/// The vectorised leaves (lanes of keys for Min, Max, MinMax, ArgMin, ArgMax; level passes
/// for Sum and Prod) against the plain tree, for one element type: every size up to 48
/// (the lane boundaries), the sizes around a leaf (4096) and a few past it, on one thread
/// and on three, with `specials` (NaNs of both signs and several payloads, signed zeros,
/// infinities, the extremes) and ties (repeated values) sprinkled in.
fn check_leaves<T: cufold::Element + Gen + Raw + Bits>(specials: &[T]) {
    let s = seed(&format!("vectorised_leaves {}", T::NAME));
    let sizes = (1..=48).chain([63, 64, 65, 4095, 4096, 4097, 8208, 12321, 70_001]);
    for n in sizes {
        for density in [0, 3, n / 4 + 1] {
            let mut x: Vec<T> = data(n, s ^ (n as u64) << 8 ^ density as u64);
            let mut rng = Rng(s ^ n as u64 ^ (density as u64) << 32);
            for _ in 0..density {
                let i = rng.next() as usize % n;
                x[i] = if rng.next() % 2 == 0 {
                    specials[rng.next() as usize % specials.len()]
                } else {
                    x[rng.next() as usize % n] // a tie with another position
                };
            }
            for threads in [1, 3] {
                let cpu = Cpu::with_threads(threads);
                let what = format!("{} n = {n}, {density} specials, {threads} threads", T::NAME);
                let (g, w) = (cpu.reduce_acc(&x, Max), naive(&Max, &x));
                assert_eq!(g.raw(), w.raw(), "Max {what}: {g:?} vs {w:?}");
                let (g, w) = (cpu.reduce_acc(&x, Min), naive(&Min, &x));
                assert_eq!(g.raw(), w.raw(), "Min {what}: {g:?} vs {w:?}");
                let (g, w) = (cpu.reduce_acc(&x, MinMax), naive(&MinMax, &x));
                assert_eq!(
                    (g.min.raw(), g.max.raw()),
                    (w.min.raw(), w.max.raw()),
                    "MinMax {what}: {g:?} vs {w:?}"
                );
                let (g, w) = (cpu.reduce_acc(&x, ArgMax), naive(&ArgMax, &x));
                assert_eq!(
                    (g.value.raw(), g.index),
                    (w.value.raw(), w.index),
                    "ArgMax {what}: {g:?} vs {w:?}"
                );
                let (g, w) = (cpu.reduce_acc(&x, ArgMin), naive(&ArgMin, &x));
                assert_eq!(
                    (g.value.raw(), g.index),
                    (w.value.raw(), w.index),
                    "ArgMin {what}: {g:?} vs {w:?}"
                );
                // Arithmetic: which NaN an operation returns is not specified by Rust.
                // (f16 and bf16 accumulate in f32: compare the finished values, which keep
                // every difference of the accumulators that the element type can show.)
                let n = x.len() as u64;
                let (g, w) = (cpu.reduce_acc(&x, Sum), naive(&Sum, &x));
                let fin = |a| <Sum as Operator<T>>::finish(&Sum, a, n);
                let (g, w) = (fin(g), fin(w));
                assert_eq!(g.bits(), w.bits(), "Sum {what}: {g:?} vs {w:?}");
                let (g, w) = (cpu.reduce_acc(&x, Prod), naive(&Prod, &x));
                let fin = |a| <Prod as Operator<T>>::finish(&Prod, a, n);
                let (g, w) = (fin(g), fin(w));
                assert_eq!(g.bits(), w.bits(), "Prod {what}: {g:?} vs {w:?}");
            }
        }
    }
}

#[test]
fn vectorised_leaves_have_the_bits_of_the_plain_tree_for_every_type() {
    fn floats<T: cufold::Element>(nan_bits: &[u64], from_bits: impl Fn(u64) -> T) -> Vec<T> {
        let mut v: Vec<T> = [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            -f64::MAX,
            1.0,
            -1.0,
            5e-324,
        ]
        .map(T::from_f64)
        .to_vec();
        v.extend(nan_bits.iter().map(|&b| from_bits(b)));
        v
    }
    check_leaves(&floats(
        &[
            0x7fc0_0000,
            0xffc0_0000,
            0x7f80_0001,
            0xff80_0123,
            0x7fff_ffff,
        ],
        |b| f32::from_bits(b as u32),
    ));
    check_leaves(&floats(
        &[
            0x7ff8_0000_0000_0000,
            0xfff8_0000_0000_0000,
            0x7ff0_0000_0000_0001,
            0xfff0_0000_0000_0abc,
        ],
        f64::from_bits,
    ));
    check_leaves(&floats(&[0x7e00, 0xfe00, 0x7c01, 0xfc33], |b| {
        cufold::f16::from_bits(b as u16)
    }));
    check_leaves(&floats(&[0x7fc0, 0xffc0, 0x7f81, 0xff93], |b| {
        cufold::bf16::from_bits(b as u16)
    }));
    check_leaves(&[i32::MIN, i32::MAX, 0, -1, 1]);
    check_leaves(&[i64::MIN, i64::MAX, 0, -1, 1]);
    check_leaves(&[u32::MAX, 0, 1, 1 << 31, (1 << 31) - 1]);
    check_leaves(&[u64::MAX, 0, 1, 1 << 63, (1 << 63) - 1]);
    check_leaves(&[u8::MAX, 0, 1, 128, 127]);
}
