//! The CPU's segments go by batches of many segments (cut by their elements, not their
//! count), each short segment folded on the stack: every result must keep the bits of the
//! whole-array call on that segment alone, wherever the batches cut, on 1 and many threads.
//! Lengths 0 to 70 mixed (every short case, groups of 64 and their remainders), runs of empty
//! segments, a segment long enough for all threads, runs by key of every length.

mod common;
use common::*;
use cufold::ops::*;
use cufold::segment::Rows;
use cufold::{Cpu, DeviceValue, ErrorKind, ScanKind};

const THREADS: &[usize] = &[1, 2, 3, 16];

/// Segment lengths 0..=70, each several times, in a seeded order, with runs of empty
/// segments and one segment past 2^18 (on all threads); about 2^18 elements in all, so that
/// the batches cut many places.
fn lengths(test: &str, long: bool) -> Vec<usize> {
    let mut r = Rng(seed(test));
    let mut v: Vec<usize> = (0..7000).map(|_| (r.next() % 71) as usize).collect();
    for k in 0..40 {
        let at = (r.next() % v.len() as u64) as usize;
        v.splice(at..at, std::iter::repeat(0).take(k * 7));
    }
    if long {
        v.insert(v.len() / 2, 300_001);
    }
    v
}

fn reduce_one<T: DeviceValue, O: Operator<T>>(x: &[T], op: O) -> Option<O::Out> {
    match Cpu::with_threads(1).reduce(x, op) {
        Ok(v) => Some(v),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::EmptyInput);
            None
        }
    }
}

fn check_reduce<T: Gen + DeviceValue, O: Operator<T>>(op: O, test: &str) {
    let lens = lengths(test, true);
    let off = csr_offsets(5, &lens);
    let x: Vec<T> = data(*off.last().unwrap() as usize + 3, seed(test));
    let want: Vec<_> = off
        .windows(2)
        .map(|w| reduce_one(&x[w[0] as usize..w[1] as usize], op))
        .collect();
    for &t in THREADS {
        let got = Cpu::with_threads(t).reduce_segments(&x, &off, op).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                same(g, w),
                "{} {test}, {t} threads, segment {i} ({} long): {g:?} != {w:?}",
                O::NAME,
                lens[i]
            );
        }
    }
    // Rows of every width 1..=70, a stride past the row.
    for cols in (1..=70).chain([128, 1024]) {
        let rows = Rows::new(150_000 / cols + 1, cols).stride(cols + 3);
        let x: Vec<T> = data(rows.rows * rows.stride, seed(test) ^ cols as u64);
        let want: Vec<_> = (0..rows.rows)
            .map(|r| reduce_one(&x[r * rows.stride..][..cols], op).unwrap())
            .collect();
        for &t in THREADS {
            let got = Cpu::with_threads(t).reduce_rows(&x, rows, op).unwrap();
            let mut into = vec![want[0]; rows.rows];
            Cpu::with_threads(t)
                .reduce_rows_into(&x, rows, &mut into, op)
                .unwrap();
            for (r, w) in want.iter().enumerate() {
                assert!(
                    same(&got[r], w) && same(&into[r], w),
                    "{} rows of {cols}, {t} threads, row {r}",
                    O::NAME
                );
            }
        }
    }
}

fn scan_one<T: DeviceValue, O: Operator<T>>(x: &[T], op: O, kind: ScanKind) -> Vec<O::Out> {
    Cpu::with_threads(1).scan(x, op, kind).unwrap()
}

fn check_scan<T: Gen + DeviceValue, O: Operator<T>>(op: O, test: &str) {
    let lens = lengths(test, true);
    let off = csr_offsets(2, &lens);
    let n = *off.last().unwrap() as usize + 4;
    let x: Vec<T> = data(n, seed(test));
    for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
        let mut want = vec![poison::<O::Out>(); n];
        for w in off.windows(2) {
            let (lo, hi) = (w[0] as usize, w[1] as usize);
            want[lo..hi].copy_from_slice(&scan_one(&x[lo..hi], op, kind));
        }
        for &t in THREADS {
            let mut got = vec![poison::<O::Out>(); n];
            Cpu::with_threads(t)
                .scan_segments_into(&x, &off, &mut got, op, kind)
                .unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    same(g, w),
                    "{} {kind:?} {test}, {t} threads, position {i}: {g:?} != {w:?}",
                    O::NAME
                );
            }
        }
        for cols in (1..=70).chain([128, 1000]) {
            let rows = Rows::new(100_000 / cols + 1, cols).stride(cols + 1);
            let x: Vec<T> = data(rows.rows * rows.stride, seed(test) ^ cols as u64);
            let want: Vec<O::Out> = (0..rows.rows)
                .flat_map(|r| scan_one(&x[r * rows.stride..][..cols], op, kind))
                .collect();
            for &t in THREADS {
                let got = Cpu::with_threads(t).scan_rows(&x, rows, op, kind).unwrap();
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        same(g, w),
                        "{} {kind:?} rows of {cols}, {t} threads, output {i}",
                        O::NAME
                    );
                }
            }
        }
    }
}

/// Keys whose runs have every length 1..=70 (and a long one), in a seeded order, so that
/// runs straddle every batch cut; adjacent runs differ in their key's bits only where the
/// type allows (0.0 and -0.0 are different keys).
fn check_by_key<T: Gen + DeviceValue, O: Operator<T>>(op: O, test: &str) {
    let mut runs: Vec<usize> = lengths(test, true).into_iter().filter(|&l| l > 0).collect();
    runs.push(1);
    let off = csr_offsets(0, &runs);
    let n = *off.last().unwrap() as usize;
    let x: Vec<T> = data(n, seed(test));
    let mut keys = vec![0f32; n];
    for (r, w) in off.windows(2).enumerate() {
        let k = if r % 2 == 0 { 0.0 } else { -0.0 };
        keys[w[0] as usize..w[1] as usize].fill(if r % 3 == 2 { r as f32 } else { k });
    }
    // Runs by bits: where two neighbouring runs got the same key, they are one run.
    let mut starts = vec![0usize];
    for i in 1..n {
        if keys[i].to_bits() != keys[i - 1].to_bits() {
            starts.push(i);
        }
    }
    starts.push(n);
    for &t in THREADS {
        let cpu = Cpu::with_threads(t);
        let by = cpu.reduce_by_key(&keys, &x, op).unwrap();
        assert_eq!(
            by.values.len(),
            starts.len() - 1,
            "{} {t} threads: runs",
            O::NAME
        );
        for (r, w) in starts.windows(2).enumerate() {
            assert_eq!(by.keys[r].to_bits(), keys[w[0]].to_bits());
            assert_eq!(by.lengths[r], (w[1] - w[0]) as u64);
            let want = reduce_one(&x[w[0]..w[1]], op).unwrap();
            assert!(
                same(&by.values[r], &want),
                "{} by key, {t} threads, run {r}",
                O::NAME
            );
        }
        if O::SCANNABLE {
            for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
                let got = cpu.scan_by_key(&keys, &x, op, kind).unwrap();
                for w in starts.windows(2) {
                    let want = scan_one(&x[w[0]..w[1]], op, kind);
                    for (i, (g, e)) in got[w[0]..w[1]].iter().zip(&want).enumerate() {
                        assert!(
                            same(g, e),
                            "{} {kind:?} by key, {t} threads, position {}",
                            O::NAME,
                            w[0] + i
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn batched_reductions_keep_the_bits_of_each_segment_alone() {
    check_reduce::<f32, _>(Sum, "batches sum f32");
    check_reduce::<f32, _>(Mean, "batches mean f32");
    check_reduce::<f64, _>(MeanVar, "batches meanvar f64");
    check_reduce::<f32, _>(ArgMax, "batches argmax f32");
    check_reduce::<f32, _>(Div2Mean, "batches div2mean f32");
    // TreeShape breaks the identity law on purpose (it records the tree).
    cufold::__private::without_law_check(|| check_reduce::<u32, _>(TreeShape, "batches shape"));
}

#[test]
fn batched_scans_keep_the_bits_of_each_segment_alone() {
    check_scan::<f32, _>(Sum, "batches scan sum f32");
    check_scan::<f64, _>(MeanVar, "batches scan meanvar f64");
    check_scan::<f32, _>(Max, "batches scan max f32");
    cufold::__private::without_law_check(|| check_scan::<u32, _>(TreeShape, "batches scan shape"));
}

#[test]
fn runs_by_key_keep_the_bits_of_each_run_alone() {
    check_by_key::<f32, _>(Sum, "by key sum f32");
    check_by_key::<f64, _>(MeanVar, "by key meanvar f64");
    check_by_key::<f32, _>(ArgMin, "by key argmin f32");
    cufold::__private::without_law_check(|| check_by_key::<u32, _>(TreeShape, "by key shape"));
}

#[test]
fn many_empty_segments_cost_next_to_nothing() {
    // 2^22 empty segments around a few short ones: found by galloping, not one by one.
    let mut off = vec![0u64; 1 << 22];
    off.extend([3, 3, 3, 10, 10]);
    let x: Vec<f32> = (0..10).map(|i| i as f32).collect();
    for t in [1, 2] {
        let cpu = Cpu::with_threads(t);
        let s = cpu.reduce_segments(&x, &off, Sum).unwrap();
        assert_eq!(s.len(), off.len() - 1);
        assert!(s[..(1 << 22) - 1].iter().all(|v| *v == Some(0.0)));
        assert_eq!(s[(1 << 22) - 1], Some(3.0));
        assert_eq!(s[(1 << 22) + 2], Some(42.0));
        let a = cpu.reduce_segments(&x, &off, ArgMax).unwrap();
        assert!(a[0].is_none() && a[(1 << 22) + 2].unwrap().index == 6);
        let mut y = vec![-1f32; 10];
        cpu.scan_segments_into(&x, &off, &mut y, Sum, ScanKind::Inclusive)
            .unwrap();
        assert_eq!(y, [0.0, 1.0, 3.0, 3.0, 7.0, 12.0, 18.0, 25.0, 33.0, 42.0]);
    }
}
