//! CPU tests of segmented reductions: every segment's result has the bits of the
//! whole-array reduction of that segment alone, for ragged offsets and for rows of a strided
//! matrix, on every thread count; bad input gets clear errors before any work.

mod common;
use common::*;
use cufold::ops::*;
use cufold::segment::Rows;
use cufold::{Cpu, DeviceValue, ErrorKind};

/// Ragged segment lengths: empty, tiny, around powers of two and the CPU's leaf (4096),
/// and one past 2^20 (reduced on all threads when segments are few).
const LENGTHS: &[usize] = &[0, 1, 2, 3, 7, 31, 32, 33, 0, 4095, 4096, 4097, 70_001, 5, 0];

/// What the whole-array reduction of each segment gives: `None` where it errors for an
/// empty input.
fn expected<T: DeviceValue, O: Operator<T>>(
    x: &[T],
    offsets: &[u64],
    op: O,
) -> Vec<Option<O::Out>> {
    offsets
        .windows(2)
        .map(
            |w| match Cpu::new().reduce(&x[w[0] as usize..w[1] as usize], op) {
                Ok(v) => Some(v),
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::EmptyInput);
                    None
                }
            },
        )
        .collect()
}

fn check<T: Gen + DeviceValue, O: Operator<T>>(op: O, test: &str) {
    let s = seed(test);
    let mut lengths = LENGTHS.to_vec();
    // Many short segments too, so that threads take runs of them.
    let mut r = Rng(s ^ 1);
    lengths.extend((0..3000).map(|_| (r.next() % 40) as usize));
    let off = csr_offsets(3, &lengths);
    let x: Vec<T> = data(*off.last().unwrap() as usize + 5, s);
    let want = expected(&x, &off, op);
    for threads in [1, 3, 16] {
        let got = Cpu::with_threads(threads)
            .reduce_segments(&x, &off, op)
            .unwrap();
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                same(g, w),
                "{} over {}, segment {i} ({} threads): {g:?} != {w:?}",
                O::NAME,
                T::cuda_name(),
                threads
            );
        }
    }
    // Fewer segments than threads: each reduced on all of them.
    let few = csr_offsets(3, &[70_001, 0, 4097]);
    let got = Cpu::with_threads(16).reduce_segments(&x, &few, op).unwrap();
    for (i, (g, w)) in got.iter().zip(&expected(&x, &few, op)).enumerate() {
        assert!(
            same(g, w),
            "{} over {}, segment {i} of 3: {g:?} != {w:?}",
            O::NAME,
            T::cuda_name()
        );
    }
    // Rows of a strided view: row r is x[5 + r * 131..][..120].
    let rows = Rows::new(40, 120).stride(131);
    let got = Cpu::new().reduce_rows(&x[5..], rows, op).unwrap();
    for (r, g) in got.iter().enumerate() {
        let lo = 5 + r * 131;
        let w = Cpu::new().reduce(&x[lo..lo + 120], op).unwrap();
        assert!(
            same(g, &w),
            "{} over {}, row {r}: {g:?} != {w:?}",
            O::NAME,
            T::cuda_name()
        );
    }
}

#[test]
fn segments_have_the_bits_of_their_whole_array_reduction() {
    check::<f32, _>(Sum, "f32 sum");
    check::<f32, _>(ArgMax, "f32 argmax");
    check::<f32, _>(MeanVar, "f32 meanvar");
    check::<f32, _>(Div2Mean, "f32 div2mean");
    check::<f64, _>(Mean, "f64 mean");
    check::<cufold::f16, _>(Max, "f16 max");
    check::<i32, _>(Sum, "i32 sum");
    check::<u8, _>(WideSum, "u8 widesum");
    check::<Affine<f32>, _>(Compose, "affine f32"); // not commutative: order within segments
}

#[test]
fn positions_are_places_in_the_segment_and_empty_segments_follow_the_operator() {
    let x = [5.0f32, 1.0, 9.0, /* */ 2.0, 8.0, /* */ 7.0];
    let cpu = Cpu::new();
    let arg = cpu.reduce_segments(&x, &[0, 3, 3, 5, 6], ArgMax).unwrap();
    assert_eq!(
        arg.iter().map(|a| a.map(|a| a.index)).collect::<Vec<_>>(),
        [Some(2), None, Some(1), Some(0)]
    );
    let sums = cpu.reduce_segments(&x, &[0, 3, 3, 5, 6], Sum).unwrap();
    assert_eq!(sums, [Some(15.0), Some(0.0), Some(10.0), Some(7.0)]);
    let cols = cpu.reduce_rows(&x[..6], Rows::new(2, 3), ArgMin).unwrap();
    assert_eq!((cols[0].index, cols[1].index), (1, 0));
    // Zero columns: Sum gives its empty value per row, Max has none.
    assert_eq!(cpu.reduce_rows(&x, Rows::new(3, 0), Sum).unwrap(), [0.0; 3]);
    assert_eq!(
        cpu.reduce_rows(&x, Rows::new(3, 0), Max)
            .unwrap_err()
            .kind(),
        ErrorKind::EmptyInput
    );
    assert!(cpu
        .reduce_rows(&x, Rows::new(0, 3), Max)
        .unwrap()
        .is_empty());
    assert!(cpu.reduce_segments(&x, &[4], Max).unwrap().is_empty());
}

#[test]
fn bad_segments_are_errors_before_any_work() {
    let x = [1.0f64; 10];
    let cpu = Cpu::new();
    let e = cpu.reduce_segments(&x, &[], Sum).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
    assert!(e.to_string().contains("n + 1 offsets"), "{e}");
    let e = cpu.reduce_segments(&x, &[0, 4, 3, 10], Sum).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    assert!(
        e.to_string().contains("offsets[1] = 4 > offsets[2] = 3"),
        "{e}"
    );
    let e = cpu.reduce_segments(&x, &[0, 4, 11], Sum).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
    assert!(
        e.to_string().contains("end at 11, past the input's 10"),
        "{e}"
    );
    let e = cpu
        .reduce_rows(&x, Rows::new(3, 4).stride(2), Sum)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    assert!(
        e.to_string()
            .contains("stride of 2 is shorter than a row (4 columns)"),
        "{e}"
    );
    let e = cpu.reduce_rows(&x, Rows::new(3, 4), Sum).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
    assert!(
        e.to_string().contains("need 12 elements, the input has 10"),
        "{e}"
    );
}

fn check_scans<T: Gen + DeviceValue, O: Operator<T>>(op: O, test: &str) {
    use cufold::ScanKind;
    let s = seed(test);
    let mut lengths = LENGTHS.to_vec();
    let mut r = Rng(s ^ 2);
    lengths.extend((0..2000).map(|_| (r.next() % 40) as usize));
    let off = csr_offsets(3, &lengths);
    let x: Vec<T> = data(*off.last().unwrap() as usize + 5, s);
    for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
        for threads in [1, 16] {
            for off in [&off, &csr_offsets(3, &[70_001, 0, 4097])] {
                let mut y = vec![poison::<O::Out>(); x.len()];
                Cpu::with_threads(threads)
                    .scan_segments_into(&x, off, &mut y, op, kind)
                    .unwrap();
                for w in off.windows(2) {
                    let (lo, hi) = (w[0] as usize, w[1] as usize);
                    let want = Cpu::with_threads(1).scan(&x[lo..hi], op, kind).unwrap();
                    for (j, (g, w)) in y[lo..hi].iter().zip(&want).enumerate() {
                        assert!(
                            same(g, w),
                            "{} {kind:?} over {}, segment at {lo}, position {j}: {g:?} != {w:?}",
                            O::NAME,
                            T::cuda_name()
                        );
                    }
                }
                // Outside every segment: untouched.
                let end = *off.last().unwrap() as usize;
                for i in (0..3).chain(end..x.len()) {
                    assert!(
                        same(&y[i], &poison::<O::Out>()),
                        "position {i} is in no segment but was written"
                    );
                }
            }
        }
        let rows = Rows::new(40, 120).stride(131);
        let y = Cpu::new().scan_rows(&x[5..], rows, op, kind).unwrap();
        assert_eq!(y.len(), 40 * 120);
        for r in 0..40 {
            let lo = 5 + r * 131;
            let want = Cpu::with_threads(1)
                .scan(&x[lo..lo + 120], op, kind)
                .unwrap();
            for (j, (g, w)) in y[r * 120..][..120].iter().zip(&want).enumerate() {
                assert!(
                    same(g, w),
                    "{} {kind:?} row {r} column {j}: {g:?} != {w:?}",
                    O::NAME
                );
            }
        }
    }
}

#[test]
fn f32_segment_scans_have_the_bits_of_their_whole_array_scan() {
    check_scans::<f32, _>(Sum, "scan f32 sum");
    check_scans::<f32, _>(ArgMax, "scan f32 argmax");
}

#[test]
fn other_segment_scans_have_the_bits_of_their_whole_array_scan() {
    check_scans::<f64, _>(MeanVar, "scan f64 meanvar");
    check_scans::<i32, _>(Max, "scan i32 max");
}

#[test]
fn non_commutative_segment_scans_keep_their_order() {
    check_scans::<Affine<f32>, _>(Compose, "scan affine f32");
}

#[test]
fn bad_segment_scans_are_errors() {
    use cufold::ScanKind::Inclusive;
    let x = [1.0f32; 10];
    let cpu = Cpu::new();
    let mut y = [0.0f32; 9];
    let e = cpu
        .scan_segments_into(&x, &[0, 5, 10], &mut y, Sum, Inclusive)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
    let mut y = [0.0f32; 10];
    let e = cpu
        .scan_segments_into(&x, &[0, 5, 4], &mut y, Sum, Inclusive)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    let e = cpu
        .scan_segments_into(&x, &[0, 5], &mut y, Div2Mean, Inclusive)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    let e = cpu
        .scan_rows(&x, Rows::new(3, 4), Sum, Inclusive)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
}

#[test]
fn reduce_by_key_gives_each_run_its_key_length_and_whole_array_bits() {
    let s = seed("reduce_by_key_gives_each_run_its_key_length_and_whole_array_bits");
    let mut r = Rng(s);
    let lengths: Vec<usize> = [1, 4097, 70_001]
        .into_iter()
        .chain((0..400).map(|_| 1 + (r.next() % 50) as usize))
        .collect();
    // Keys repeat in runs that are not adjacent (0, 10, 20, 0, ...).
    let keys: Vec<u32> = lengths
        .iter()
        .enumerate()
        .flat_map(|(i, &l)| std::iter::repeat((i % 3) as u32 * 10).take(l))
        .collect();
    let x: Vec<f32> = data(keys.len(), s);
    let off = csr_offsets(0, &lengths);
    let by = Cpu::new().reduce_by_key(&keys, &x, ArgMax).unwrap();
    assert_eq!(
        by.lengths,
        lengths.iter().map(|&l| l as u64).collect::<Vec<_>>()
    );
    assert_eq!(
        by.keys,
        (0..lengths.len())
            .map(|i| (i % 3) as u32 * 10)
            .collect::<Vec<_>>()
    );
    for (i, w) in off.windows(2).enumerate() {
        let alone = Cpu::new()
            .reduce(&x[w[0] as usize..w[1] as usize], ArgMax)
            .unwrap();
        assert!(same(&by.values[i], &alone), "run {i}");
    }
    let mut y = vec![0.0f32; x.len()];
    Cpu::new()
        .scan_by_key_into(&keys, &x, &mut y, Sum, cufold::ScanKind::Exclusive)
        .unwrap();
    for w in off.windows(2) {
        let (lo, hi) = (w[0] as usize, w[1] as usize);
        let alone = Cpu::new()
            .scan(&x[lo..hi], Sum, cufold::ScanKind::Exclusive)
            .unwrap();
        assert!(same(&y[lo..hi].to_vec(), &alone), "run at {lo}");
    }
}

#[test]
fn keys_are_equal_by_their_bits() {
    // -0.0 and 0.0 differ; a NaN equals a NaN of the same bits (where == says neither).
    let keys = [0.0f64, -0.0, -0.0, f64::NAN, f64::NAN, 1.0];
    let by = Cpu::new()
        .reduce_by_key(&keys, &[1u32, 2, 3, 4, 5, 6], Sum)
        .unwrap();
    assert_eq!(by.values, [1, 5, 9, 6]);
    assert_eq!(by.lengths, [1, 2, 2, 1]);
    assert_eq!(by.keys[1].to_bits(), (-0.0f64).to_bits());
}

#[test]
fn bad_by_key_calls_are_errors_and_no_keys_give_no_runs() {
    let e = Cpu::new()
        .reduce_by_key(&[1u8, 1, 2], &[1.0f32, 2.0], Sum)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch, "{e}");
    assert!(e.to_string().contains("3 keys for 2 values"), "{e}");
    let mut y = [0.0f32; 3];
    let e = Cpu::new()
        .scan_by_key_into(
            &[1u8, 1],
            &[1.0f32, 2.0],
            &mut y,
            Sum,
            cufold::ScanKind::Inclusive,
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch, "{e}");
    let none = Cpu::new()
        .reduce_by_key(&[] as &[u8], &[] as &[f32], Max)
        .unwrap();
    assert!(none.keys.is_empty() && none.values.is_empty() && none.lengths.is_empty());
}
