//! `Backend`, the one front for host data: every primitive with `Cpu`'s names and shapes.
//!
//! - On the CPU, each method gives what the `Cpu` method of the same name gives, and the
//!   allocating and `_into` forms agree.
//! - On the GPU (ignored without a device), each method gives the CPU backend's bits for
//!   operators built from `+`, min and max, and the same error kinds for bad input.

mod common;

use common::*;
use cufold::monte_carlo::MonteCarlo;
use cufold::ops::{self, Identity};
use cufold::segment::Rows;
use cufold::{Backend, Cpu, ErrorKind, ScanKind};

/// Every primitive of `b` over fixed shapes of `x`, as one comparable record (f64 bits).
#[derive(Debug, PartialEq)]
struct Results {
    whole: (u64, Vec<u64>),
    rows: (Vec<u64>, Vec<u64>, Vec<u64>),
    segments: (Vec<Option<u64>>, Vec<u64>, Vec<u64>),
    by_key: (Vec<u32>, Vec<u64>, Vec<u64>, Vec<u64>),
    max_rows: Vec<u64>,
    monte_carlo: u64,
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn results(b: &Backend, x: &[f64]) -> Results {
    let n = x.len();
    let rows = Rows::new(n / 100, 90).stride(100);
    let offsets: Vec<u64> = (0..=n as u64 / 1000)
        .map(|i| i * 1000 - (i % 3) * 7)
        .collect();
    let keys: Vec<u32> = (0..n).map(|i| (i as u32 / 13) % 5).collect();

    let whole = (
        b.reduce(x, ops::Sum).unwrap().to_bits(),
        bits(&b.scan(x, ops::Sum, ScanKind::Exclusive).unwrap()),
    );
    let mut into = vec![0.0; n];
    b.scan_into(x, &mut into, ops::Sum, ScanKind::Exclusive)
        .unwrap();
    assert_eq!(bits(&into), whole.1, "scan_into");

    let reduced = b.reduce_rows(x, rows, ops::Sum).unwrap();
    let mut reduced_into = vec![0.0; rows.rows];
    b.reduce_rows_into(x, rows, &mut reduced_into, ops::Sum)
        .unwrap();
    assert_eq!(bits(&reduced_into), bits(&reduced), "reduce_rows_into");
    let scanned = b.scan_rows(x, rows, ops::Sum, ScanKind::Inclusive).unwrap();
    let mut scanned_into = vec![0.0; rows.rows * rows.cols];
    b.scan_rows_into(x, rows, &mut scanned_into, ops::Sum, ScanKind::Inclusive)
        .unwrap();
    assert_eq!(bits(&scanned_into), bits(&scanned), "scan_rows_into");

    let seg = b.reduce_segments(x, &offsets, ops::Sum).unwrap();
    let seg_scan = b
        .scan_segments(x, &offsets, ops::Sum, ScanKind::Inclusive)
        .unwrap();
    let mut seg_into = vec![-1.0; n];
    b.scan_segments_into(x, &offsets, &mut seg_into, ops::Sum, ScanKind::Inclusive)
        .unwrap();

    let by = b.reduce_by_key(&keys, x, ops::Sum).unwrap();
    let by_scan = b
        .scan_by_key(&keys, x, ops::Sum, ScanKind::Exclusive)
        .unwrap();
    let mut by_into = vec![0.0; n];
    b.scan_by_key_into(&keys, x, &mut by_into, ops::Sum, ScanKind::Exclusive)
        .unwrap();
    assert_eq!(bits(&by_into), bits(&by_scan), "scan_by_key_into");

    let max_rows = b
        .reduce_rows(x, Rows::new(n / 7, 7), ops::Max)
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    let mc = MonteCarlo::<f64, _>::new(Identity)
        .seed(11)
        .reduce_with(ops::Sum);
    Results {
        whole,
        rows: (bits(&reduced), bits(&scanned), bits(&scanned_into)),
        segments: (
            seg.iter().map(|v| v.map(f64::to_bits)).collect(),
            bits(&seg_scan),
            bits(&seg_into),
        ),
        by_key: (by.keys, bits(&by.values), by.lengths, bits(&by_scan)),
        max_rows,
        monte_carlo: b.monte_carlo(&mc, 1 << 16).unwrap().to_bits(),
    }
}

/// The error kind of each bad call, in a fixed order.
fn errors(b: &Backend) -> Vec<ErrorKind> {
    let x = [1.0f64, 2.0, 3.0, 4.0];
    let kind = |r: cufold::Result<()>| r.unwrap_err().kind();
    vec![
        kind(
            b.reduce_rows(&x, Rows::new(1, 3).stride(2), ops::Sum)
                .map(drop),
        ),
        // The stride is checked before the output is sized, on both arms.
        kind(
            b.reduce_rows(&x, Rows::new(usize::MAX, 3).stride(2), ops::Sum)
                .map(drop),
        ),
        kind(b.reduce_rows(&x, Rows::new(3, 2), ops::Sum).map(drop)),
        kind(b.reduce_rows(&x, Rows::new(2, 0), ops::Max).map(drop)),
        kind(b.reduce_rows_into(&x, Rows::new(2, 2), &mut [0.0; 3], ops::Sum)),
        kind(
            b.scan_rows(
                &[] as &[f64],
                Rows::new(usize::MAX, 0).stride(0),
                ops::Div2Mean,
                ScanKind::Inclusive,
            )
            .map(drop),
        ),
        kind(b.reduce_segments(&x, &[0, 3, 2], ops::Sum).map(drop)),
        kind(b.reduce_segments(&x, &[0, 5], ops::Sum).map(drop)),
        kind(b.reduce_segments(&x, &[], ops::Sum).map(drop)),
        kind(b.scan_segments_into(&x, &[0, 4], &mut [0.0; 3], ops::Sum, ScanKind::Inclusive)),
        kind(b.reduce_by_key(&[1u8, 2], &x, ops::Sum).map(drop)),
        kind(
            b.scan_by_key(&[1u8, 2, 3, 4], &x, ops::Div2Mean, ScanKind::Inclusive)
                .map(drop),
        ),
        kind(
            b.monte_carlo(
                &MonteCarlo::<f64, _>::new(Identity).reduce_with(ops::Max),
                0,
            )
            .map(drop),
        ),
    ]
}

const EXPECTED_ERRORS: [ErrorKind; 13] = [
    ErrorKind::InvalidConfig,
    ErrorKind::InvalidConfig,
    ErrorKind::LengthMismatch,
    ErrorKind::EmptyInput,
    ErrorKind::LengthMismatch,
    ErrorKind::InvalidConfig,
    ErrorKind::InvalidConfig,
    ErrorKind::LengthMismatch,
    ErrorKind::LengthMismatch,
    ErrorKind::LengthMismatch,
    ErrorKind::LengthMismatch,
    ErrorKind::InvalidConfig,
    ErrorKind::EmptyInput,
];

#[test]
fn the_cpu_front_is_the_cpu_backend() {
    let x: Vec<f64> = data(10_000, seed("the_cpu_front_is_the_cpu_backend"));
    let cpu = Cpu::new();
    let b = Backend::Cpu(cpu);
    let r = results(&b, &x);
    assert_eq!(r.whole.0, cpu.reduce(&x, ops::Sum).unwrap().to_bits());
    let rows = Rows::new(100, 90).stride(100);
    assert_eq!(
        r.rows.0,
        bits(&cpu.reduce_rows(&x, rows, ops::Sum).unwrap())
    );
    let offsets: Vec<u64> = (0..=10u64).map(|i| i * 1000 - (i % 3) * 7).collect();
    let mut want = vec![-1.0; x.len()];
    cpu.scan_segments_into(&x, &offsets, &mut want, ops::Sum, ScanKind::Inclusive)
        .unwrap();
    assert_eq!(r.segments.2, bits(&want));
    // The allocating form fills what no segment covers with zeros.
    assert_eq!(r.segments.1[9999], 0.0f64.to_bits());
    assert_eq!(errors(&b), EXPECTED_ERRORS);
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_gpu_front_has_the_cpu_fronts_bits_and_errors() {
    let x: Vec<f64> = data(
        100_000,
        seed("the_gpu_front_has_the_cpu_fronts_bits_and_errors"),
    );
    let g = Backend::Gpu(gpu().clone());
    let c = Backend::Cpu(Cpu::new());
    assert_eq!(results(&g, &x), results(&c, &x));
    assert_eq!(errors(&g), EXPECTED_ERRORS);
}
