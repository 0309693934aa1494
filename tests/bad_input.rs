//! Shapes no backend can serve, and shapes that cost nothing: each is an error (or an empty
//! result) before any work or allocation, the same on the CPU and the GPU.

mod common;

use cufold::ops::{Max, Sum};
use cufold::segment::Rows;
use cufold::{Cpu, ErrorKind, ScanKind};
use std::time::{Duration, Instant};

/// Whether the kernel may promise memory it does not have (`vm.overcommit_memory = 1`):
/// there an allocation of terabytes succeeds and only writing it fails, so a test may not
/// ask for one.
fn overcommits_always() -> bool {
    std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|s| s.trim() == "1")
}

fn quick<R>(f: impl FnOnce() -> R) -> R {
    let start = Instant::now();
    let r = f();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    r
}

#[test]
fn zero_column_rows_cost_nothing_or_are_too_large() {
    let cpu = Cpu::new();
    let x: [f32; 0] = [];
    // Outputs past isize::MAX bytes: an error, not a capacity overflow.
    for rows in [usize::MAX, 1 << 62, (usize::MAX >> 2) + 1] {
        let e = quick(|| cpu.reduce_rows(&x, Rows::new(rows, 0), Sum)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge, "{rows}: {e}");
        assert!(e.to_string().contains("isize::MAX"), "{e}");
    }
    // 2^40 outputs (4 TiB of f32): more than the allocator gives, an error before anything
    // is written (it aborted the process).
    if !overcommits_always() {
        let e = quick(|| cpu.reduce_rows(&x, Rows::new(1 << 40, 0), Sum)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
    }
    // An operator with no empty value: the empty rows are the error.
    let e = quick(|| cpu.reduce_rows(&x, Rows::new(1 << 40, 0), Max)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EmptyInput, "{e}");
    // A few empty rows: the empty value each.
    assert_eq!(cpu.reduce_rows(&x, Rows::new(5, 0), Sum).unwrap(), [0.0; 5]);
    // Scans of rows with no columns have no outputs: at once, for any number of rows.
    for rows in [1 << 40, usize::MAX] {
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            let y = quick(|| cpu.scan_rows(&x, Rows::new(rows, 0), Sum, kind)).unwrap();
            assert!(y.is_empty());
            let y = quick(|| cpu.scan_rows(&x, Rows::new(rows, 0), Max, kind)).unwrap();
            assert!(y.is_empty());
        }
    }
    // rows x cols past usize: too large, before the input's length is looked at.
    let e = cpu
        .scan_rows(&x, Rows::new(1 << 40, 1 << 40), Sum, ScanKind::Inclusive)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
}

#[test]
fn a_stride_shorter_than_a_row_is_an_error_for_one_row_too() {
    let cpu = Cpu::new();
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    for rows in [0, 1, 2] {
        for stride in [0, 2] {
            let shape = Rows::new(rows, 3).stride(stride);
            let e = cpu.reduce_rows(&x, shape, Sum).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidConfig, "{shape:?}: {e}");
            assert!(e.to_string().contains("stride"), "{e}");
            let e = cpu
                .scan_rows(&x, shape, Sum, ScanKind::Inclusive)
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidConfig, "{shape:?}: {e}");
        }
    }
    // A stride of at least a row: fine, for one row as for many.
    assert_eq!(
        cpu.reduce_rows(&x, Rows::new(1, 3).stride(3), Sum).unwrap(),
        [6.0]
    );
    assert_eq!(
        cpu.reduce_rows(&x, Rows::new(1, 3).stride(100), Sum)
            .unwrap(),
        [6.0]
    );
    assert_eq!(
        cpu.reduce_rows(&x, Rows::new(2, 2).stride(4), Sum).unwrap(),
        [3.0, 11.0]
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_rows_give_the_cpu_errors() {
    let gpu = common::gpu();
    let stream = gpu.stream();
    let cpu = Cpu::new();
    let x = stream
        .clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
        .unwrap();
    let host = stream.clone_dtoh(&x).unwrap();
    let reducer = gpu.segment_reducer::<f32, _>(Sum).unwrap();
    let scanner = gpu.segment_scanner::<f32, _>(Sum).unwrap();
    let mut out = stream.alloc_zeros::<f32>(1).unwrap();
    let mut none = stream.alloc_zeros::<f32>(0).unwrap();
    // Outputs past isize::MAX bytes: TooLarge, whatever buffer is given.
    for rows in [usize::MAX, 1 << 62] {
        let shape = Rows::new(rows, 0);
        let e = reducer.reduce_rows_into(&x, shape, &mut out).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
        let c = cpu.reduce_rows(&host, shape, Sum).unwrap_err();
        assert_eq!(c.kind(), e.kind());
    }
    // Scans of rows without columns: no outputs, at once.
    for rows in [1 << 40, usize::MAX] {
        let shape = Rows::new(rows, 0);
        quick(|| scanner.scan_rows_into(&x, shape, &mut none, ScanKind::Inclusive)).unwrap();
        let e = scanner
            .scan_rows_into(&x, shape, &mut out, ScanKind::Inclusive)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LengthMismatch, "{e}");
    }
    let e = scanner
        .scan_rows_into(
            &x,
            Rows::new(1 << 40, 1 << 40),
            &mut out,
            ScanKind::Inclusive,
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
    // A stride shorter than the row, for one row too.
    for rows in [0, 1, 2] {
        for stride in [0, 2] {
            let shape = Rows::new(rows, 3).stride(stride);
            let mut out = stream.alloc_zeros::<f32>(rows).unwrap();
            let e = reducer.reduce_rows_into(&x, shape, &mut out).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidConfig, "{shape:?}: {e}");
            let mut y = stream.alloc_zeros::<f32>(rows * 3).unwrap();
            let e = scanner
                .scan_rows_into(&x, shape, &mut y, ScanKind::Inclusive)
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidConfig, "{shape:?}: {e}");
        }
    }
    let shape = Rows::new(1, 3).stride(100);
    reducer.reduce_rows_into(&x, shape, &mut out).unwrap();
    assert_eq!(stream.clone_dtoh(&out).unwrap(), [6.0]);
}
