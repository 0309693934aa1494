//! GPU tests of reductions and scans by key: the runs the GPU finds are those of a plain CPU
//! loop over the keys' bits, and each run's result has the bits of the CPU's whole-array
//! reduction (or scan) of that run alone. Runs straddle the run kernels' 1024-key spans,
//! and keys repeat in runs that are not adjacent. They need a CUDA device, so they are
//! ignored by a plain `cargo test`; run them with `--include-ignored`.

mod common;
use common::*;
use cudarc::driver::CudaSlice;
use cufold::ops::*;
use cufold::scan::ScanConfig;
use cufold::segment::{Schedule, SegmentConfig};
use cufold::{bf16, f16, Cpu, DeviceValue, Element, ErrorKind, ScanKind};

fn download<T: DeviceValue>(d: &CudaSlice<T>) -> Vec<T> {
    if d.is_empty() {
        Vec::new()
    } else {
        gpu().stream().clone_dtoh(d).unwrap()
    }
}

/// Run lengths: around the spans (1024 keys) and blocks (8 spans), a run over many of them,
/// around the lengths where lanes, groups of lanes and warps take over (8, 32, 64, 128),
/// many short runs.
fn run_lengths(seed: u64) -> Vec<usize> {
    let mut lengths = vec![
        1, 1, 4095, 1, 4096, 2, 70_001, 3, 8191, 1, 1023, 1024, 1, 1025, 8, 9, 32, 33, 64, 65, 100,
        127, 128, 129, 5,
    ];
    let mut r = Rng(seed);
    lengths.extend((0..3000).map(|_| 1 + (r.next() % 40) as usize));
    lengths.push(1);
    lengths
}

/// Keys for those runs: run `r` gets `pick(r)`; adjacent picks must differ in their bits.
fn keys_of<K: Copy>(lengths: &[usize], pick: impl Fn(usize) -> K) -> Vec<K> {
    lengths
        .iter()
        .enumerate()
        .flat_map(|(r, &l)| std::iter::repeat(pick(r)).take(l))
        .collect()
}

/// The runs' offsets by a plain loop over the keys' bits (`bits`: a key's bit pattern).
fn plain_runs<K>(keys: &[K], bits: impl Fn(&K) -> u64) -> Vec<u64> {
    let mut o: Vec<u64> = (0..keys.len())
        .filter(|&i| i == 0 || bits(&keys[i]) != bits(&keys[i - 1]))
        .map(|i| i as u64)
        .collect();
    o.push(keys.len() as u64);
    o
}

fn check_runs<K: Element>(keys: &[K], bits: impl Fn(&K) -> u64, what: &str) {
    let g = gpu();
    let want = plain_runs(keys, bits);
    let kd = upload(g, keys);
    let runs = g.key_runs::<K>().unwrap();
    let (offsets, count) = runs.offsets(&kd).unwrap();
    assert_eq!(count + 1, want.len(), "{what}: number of runs");
    assert_eq!(download(&offsets), want, "{what}: offsets");
    // The enqueue-only form, into a buffer longer than needed.
    let mut long = upload(g, &vec![u64::MAX; keys.len() + 9]);
    let mut n = upload(g, &[7u64]);
    runs.offsets_into(&kd, &mut long, &mut n).unwrap();
    assert_eq!(download(&n), [count as u64], "{what}: offsets_into count");
    let long = download(&long);
    assert_eq!(long[..want.len()], want[..], "{what}: offsets_into offsets");
    // The same keys one key into a buffer: not 16-byte aligned (unless a key is 16 bytes).
    let padded: Vec<K> = keys[..1].iter().chain(keys).copied().collect();
    let pd = upload(g, &padded);
    let (offsets, count) = runs.offsets(&pd.slice(1..)).unwrap();
    assert_eq!(
        count + 1,
        want.len(),
        "{what}: number of runs, keys at an offset"
    );
    assert_eq!(
        download(&offsets),
        want,
        "{what}: offsets, keys at an offset"
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn runs_are_those_of_a_plain_loop_for_every_key_width() {
    let s = seed("runs_are_those_of_a_plain_loop_for_every_key_width");
    let lengths = run_lengths(s);
    check_runs(&keys_of(&lengths, |r| (r % 3) as u8), |k| *k as u64, "u8");
    check_runs(
        &keys_of(&lengths, |r| f16::from_f64((r % 5) as f64)),
        |k| k.to_bits() as u64,
        "f16",
    );
    check_runs(
        &keys_of(&lengths, |r| (r as u32).wrapping_mul(0x9e37_79b9)),
        |k| *k as u64,
        "u32",
    );
    // -0.0 and 0.0 are different keys; NaNs with the same bits are one key.
    let floats = [0.0f32, -0.0, f32::NAN, 1.5];
    check_runs(
        &keys_of(&lengths, |r| floats[r % 4]),
        |k| k.to_bits() as u64,
        "f32",
    );
    check_runs(
        &keys_of(&lengths, |r| (r as i64) - 1000),
        |k| *k as u64,
        "i64",
    );
    // One key, one run; every key its own run; one key alone.
    check_runs(&vec![4u64; 50_000], |k| *k, "one run");
    check_runs(
        &(0..50_000u32).collect::<Vec<_>>(),
        |k| *k as u64,
        "all distinct",
    );
    check_runs(&[9u32], |k| *k as u64, "one key");
}

/// `reduce_by_key_into` of `keys` and `x` into outputs of room `cap` (poisoned first): the
/// first runs as the CPU's `want`, the count of all of them, nothing written past them or
/// past `cap`; then the same without lengths (`reduce_by_key_into_without_lengths`).
fn check_into<K: Element + PartialEq + std::fmt::Debug, T: DeviceValue, O: Operator<T>>(
    reducer: &cufold::segment::SegmentReducer<T, O>,
    keys: &impl cudarc::driver::DevicePtr<K>,
    x: &CudaSlice<T>,
    want: &cufold::segment::ByKey<K, O::Out>,
    cap: usize,
    what: &str,
) {
    let g = gpu();
    let runs = want.lengths.len();
    let m = runs.min(cap);
    for with_lengths in [true, false] {
        let what = format!("{what}, lengths {with_lengths}");
        let mut k = upload(g, &vec![keys_poison::<K>(); cap + 3]);
        let mut v = upload(g, &vec![poison::<O::Out>(); cap]);
        let mut l = upload(g, &vec![u64::MAX; cap + 1]);
        let mut count = upload(g, &[7u64, 9]);
        if with_lengths {
            reducer
                .reduce_by_key_into(keys, x, &mut k.slice_mut(..cap), &mut v, &mut l, &mut count)
                .unwrap();
            let l = download(&l);
            assert_eq!(l[..m], want.lengths[..m], "{what}: lengths");
            assert!(
                l[m..].iter().all(|&x| x == u64::MAX),
                "{what}: lengths past the runs"
            );
        } else {
            reducer
                .reduce_by_key_into_without_lengths(
                    keys,
                    x,
                    &mut k.slice_mut(..cap),
                    &mut v,
                    &mut count,
                )
                .unwrap();
        }
        assert_eq!(download(&count), [runs as u64, 9], "{what}: count");
        let (k, v) = (download(&k), download(&v));
        assert_eq!(k[..m], want.keys[..m], "{what}: keys");
        for (r, (g, c)) in v[..m].iter().zip(&want.values).enumerate() {
            assert!(same(g, c), "{what}: run {r}: GPU {g:?}, CPU {c:?}");
        }
        assert!(
            k[m..].iter().all(|x| *x == keys_poison::<K>()),
            "{what}: keys past the runs"
        );
        let p = poison::<O::Out>();
        assert!(
            v[m..].iter().all(|x| same(x, &p)),
            "{what}: values past the runs"
        );
    }
}

/// A key no test's runs use.
fn keys_poison<K: Element>() -> K {
    K::from_f64(77.0)
}

fn check_by_key<T: Gen + DeviceValue, O: Operator<T>>(op: O, test: &str) {
    let g = gpu();
    let s = seed(test);
    let lengths = run_lengths(s);
    let keys = keys_of(&lengths, |r| (r % 3) as u32 * 10);
    let x: Vec<T> = data(keys.len(), s ^ 7);
    let off = csr_offsets(0, &lengths);
    let cpu = Cpu::new().reduce_by_key(&keys, &x, op).unwrap();
    for (r, w) in off.windows(2).enumerate() {
        let alone = Cpu::new()
            .reduce(&x[w[0] as usize..w[1] as usize], op)
            .unwrap();
        assert!(same(&cpu.values[r], &alone), "{test}: CPU run {r}");
    }
    assert_eq!(cpu.lengths.len(), lengths.len());
    let reducer = g.segment_reducer::<T, O>(op).unwrap();
    // The keys as given, and one key into a buffer (not 16-byte aligned).
    let padded: Vec<u32> = keys[..1].iter().chain(&keys).copied().collect();
    let (kd, pd, xd) = (upload(g, &keys), upload(g, &padded), upload(g, &x));
    for (by, at) in [
        (reducer.reduce_by_key(&kd, &xd).unwrap(), "aligned"),
        (
            reducer.reduce_by_key(&pd.slice(1..), &xd).unwrap(),
            "at an offset",
        ),
    ] {
        assert_eq!(download(&by.keys), cpu.keys, "{test}: keys, {at}");
        assert_eq!(download(&by.lengths), cpu.lengths, "{test}: lengths, {at}");
        let got = download(&by.values);
        assert_eq!(got.len(), cpu.values.len());
        for (r, (g, c)) in got.iter().zip(&cpu.values).enumerate() {
            assert!(same(g, c), "{test}: run {r}, {at}: GPU {g:?}, CPU {c:?}");
        }
    }
    // One pass into the caller's buffers: room for every key, exactly for the runs, and
    // for fewer runs than there are (the count still all of them).
    let runs = cpu.lengths.len();
    for cap in [keys.len(), runs, runs / 2] {
        check_into(
            &reducer,
            &kd,
            &xd,
            &cpu,
            cap,
            &format!("{test}: into, room {cap}"),
        );
    }
    check_into(
        &reducer,
        &pd.slice(1..),
        &xd,
        &cpu,
        runs,
        &format!("{test}: into, keys at an offset"),
    );
    if O::SCANNABLE {
        let scanner = g.segment_scanner::<T, O>(op).unwrap();
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            let mut want = vec![poison::<O::Out>(); x.len()];
            Cpu::new()
                .scan_by_key_into(&keys, &x, &mut want, op, kind)
                .unwrap();
            // The CPU's own by-key scan against the whole-array scan of each run.
            for w in off.windows(2) {
                let (lo, hi) = (w[0] as usize, w[1] as usize);
                let alone = Cpu::new().scan(&x[lo..hi], op, kind).unwrap();
                assert!(same(&want[lo..hi].to_vec(), &alone), "{test}: CPU {kind:?}");
            }
            let mut y = upload(g, &vec![poison::<O::Out>(); x.len()]);
            scanner
                .scan_by_key_into(&upload(g, &keys), &upload(g, &x), &mut y, kind)
                .unwrap();
            let got = download(&y);
            for (i, (g, c)) in got.iter().zip(&want).enumerate() {
                assert!(same(g, c), "{test}: {kind:?} at {i}: GPU {g:?}, CPU {c:?}");
            }
        }
    }
}

macro_rules! by_key_tests {
    ($($name:ident: $t:ty, $op:expr;)*) => {$(
        #[test]
        #[ignore = "needs a CUDA device"]
        fn $name() {
            check_by_key::<$t, _>($op, stringify!($name));
        }
    )*};
}

by_key_tests! {
    f32_sum_by_key_has_the_cpu_bits: f32, Sum;
    f64_mean_by_key_has_the_cpu_bits: f64, Mean;
    f32_argmax_by_key_has_the_cpu_bits: f32, ArgMax;
    bf16_max_by_key_has_the_cpu_bits: bf16, Max;
    i64_sum_by_key_has_the_cpu_bits: i64, Sum;
    affine_f64_by_key_keeps_its_order: Affine<f64>, Compose;
}

#[test]
#[ignore = "needs a CUDA device"]
fn bad_by_key_calls_are_errors_and_empty_keys_give_no_runs() {
    let g = gpu();
    let keys = upload(g, &[1u32, 1, 2]);
    let x = upload(g, &[1.0f32, 2.0]);
    let r = g.segment_reducer::<f32, _>(Sum).unwrap();
    let e = r.reduce_by_key(&keys, &x).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch, "{e}");
    assert!(e.to_string().contains("3 keys for 2 values"), "{e}");
    let mut y = upload(g, &[0.0f32; 2]);
    let s = g.segment_scanner::<f32, _>(Sum).unwrap();
    let e = s
        .scan_by_key_into(&keys, &x, &mut y, ScanKind::Inclusive)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch, "{e}");
    let runs = g.key_runs::<u32>().unwrap();
    let mut short = upload(g, &[0u64; 3]);
    let mut n = upload(g, &[0u64]);
    let e = runs.offsets_into(&keys, &mut short, &mut n).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch, "{e}");
    let (mut ko, mut vo, mut lo) = (
        upload(g, &[0u32; 3]),
        upload(g, &[0.0f32; 3]),
        upload(g, &[0u64; 3]),
    );
    let mut no_count = upload(g, &[] as &[u64]);
    let mut count = upload(g, &[5u64]);
    let e = r
        .reduce_by_key_into(&keys, &x, &mut ko, &mut vo, &mut lo, &mut count)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch, "{e}");
    let e = r
        .reduce_by_key_into(
            &keys,
            &upload(g, &[1.0f32; 3]),
            &mut ko,
            &mut vo,
            &mut lo,
            &mut no_count,
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch, "{e}");
    assert!(e.to_string().contains("run count"), "{e}");
    // The same checks without lengths.
    let e = r
        .reduce_by_key_into_without_lengths(&keys, &x, &mut ko, &mut vo, &mut count)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch, "{e}");
    let e = r
        .reduce_by_key_into_without_lengths(
            &keys,
            &upload(g, &[1.0f32; 3]),
            &mut ko,
            &mut vo,
            &mut no_count,
        )
        .unwrap_err();
    assert!(e.to_string().contains("run count"), "{e}");
    // No keys: no runs, nothing launched, the count written as 0.
    let none_x = upload(g, &[] as &[f32]);
    r.reduce_by_key_into(
        &upload(g, &[] as &[u32]),
        &none_x,
        &mut ko,
        &mut vo,
        &mut lo,
        &mut count,
    )
    .unwrap();
    assert_eq!(download(&count), [0]);
    let mut count = upload(g, &[5u64]);
    r.reduce_by_key_into_without_lengths(
        &upload(g, &[] as &[u32]),
        &none_x,
        &mut ko,
        &mut vo,
        &mut count,
    )
    .unwrap();
    assert_eq!(download(&count), [0]);
    let none = upload(g, &[] as &[u32]);
    let by = r.reduce_by_key(&none, &upload(g, &[] as &[f32])).unwrap();
    assert!(by.keys.is_empty() && by.values.is_empty() && by.lengths.is_empty());
    let (_, count) = runs.offsets(&none).unwrap();
    assert_eq!(count, 0);
    let mut n = upload(g, &[5u64]);
    let mut one = upload(g, &[5u64]);
    runs.offsets_into(&none, &mut one, &mut n).unwrap();
    assert_eq!((download(&n), download(&one)), (vec![0], vec![0]));
}

#[test]
#[ignore = "needs NVRTC (part of the CUDA toolkit)"]
fn run_kernels_compile_for_hopper_for_every_key_width() {
    if !compile_only_test_runs("run_kernels_compile_for_hopper_for_every_key_width") {
        return;
    }
    for width in [1, 2, 4, 8] {
        if let Err(e) = cufold::segment::compile_runs_kernel(width, "sm_90") {
            panic!("keys of {width} bytes: {e}");
        }
    }
    assert!(cufold::segment::runs_kernel_source(3).is_err());
}

#[test]
#[ignore = "needs a CUDA device"]
fn one_pass_by_key_has_the_cpu_bits_over_many_tiles_and_key_widths() {
    // Over 2^21 keys: more than 256 tiles of 8192 (the look-back's big Fenwick nodes), the
    // long list (inputs of 2^20 or more) for the runs over 4096, runs that end exactly at a
    // tile's or a span's end, and many short runs.
    let s = seed("one_pass_by_key_has_the_cpu_bits_over_many_tiles_and_key_widths");
    let mut r = Rng(s);
    let mut lengths = vec![8192, 8192 - 5, 5, 1 << 20, 3, 4097, 4096, 70_001, 1];
    while lengths.iter().sum::<usize>() < (5 << 20) / 2 {
        lengths.push(match r.next() % 50 {
            0 => 100 + (r.next() % 5000) as usize,
            1..=3 => 50 + (r.next() % 100) as usize,
            _ => 1 + (r.next() % 40) as usize,
        });
    }
    fn one<K: Element + PartialEq + std::fmt::Debug, T: Gen + DeviceValue, O: Operator<T>>(
        op: O,
        keys: &[K],
        s: u64,
    ) {
        let g = gpu();
        let x: Vec<T> = data(keys.len(), s);
        let want = Cpu::new().reduce_by_key(keys, &x, op).unwrap();
        let reducer = g.segment_reducer::<T, O>(op).unwrap();
        let (kd, xd) = (upload(g, keys), upload(g, &x));
        let what = format!("{} keys, {} of {}", K::NAME, O::NAME, T::cuda_name());
        check_into(&reducer, &kd, &xd, &want, keys.len(), &what);
        let by = reducer.reduce_by_key(&kd, &xd).unwrap();
        assert_eq!(download(&by.lengths), want.lengths, "{what}: lengths");
        assert!(same(&download(&by.values), &want.values), "{what}: values");
        if O::SCANNABLE {
            let scanner = g.segment_scanner::<T, O>(op).unwrap();
            check_scan_into((&scanner, op), keys, &kd, &x, &xd, &what);
        }
    }
    one::<u32, f32, _>(Sum, &keys_of(&lengths, |r| (r % 3) as u32), s);
    one::<u8, f64, _>(Sum, &keys_of(&lengths, |r| (r % 2) as u8), s);
    one::<f16, i32, _>(
        Sum,
        &keys_of(&lengths, |r| f16::from_f64((r % 4) as f64)),
        s,
    );
    one::<u64, f32, _>(ArgMax, &keys_of(&lengths, |r| r as u64 * 77), s);
    one::<bf16, Affine<f32>, _>(
        Compose,
        &keys_of(&lengths, |r| bf16::from_f64((r % 5) as f64 - 2.0)),
        s,
    );
    one::<f32, f16, _>(Max, &keys_of(&lengths, |r| [0.0f32, -0.0][r % 2]), s);
    // Tiles of one warp, two warps, and 32 warps (blocks over 512 take spans of 512 keys,
    // `by_key_items`): the same runs and bits.
    let keys = keys_of(&lengths, |r| (r % 3) as u32);
    let x: Vec<f32> = data(keys.len(), s);
    let want = Cpu::new().reduce_by_key(&keys, &x, Sum).unwrap();
    let (kd, xd) = (upload(gpu(), &keys), upload(gpu(), &x));
    let pd = upload(gpu(), &[&[7u32][..], &keys].concat());
    for block in [32, 64, 1024] {
        let config = SegmentConfig::default().block(block);
        let reducer = gpu().segment_reducer_with::<f32, _>(Sum, config).unwrap();
        let what = format!("blocks of {block}");
        check_into(&reducer, &kd, &xd, &want, keys.len(), &what);
        check_into(
            &reducer,
            &pd.slice(1..),
            &xd,
            &want,
            keys.len(),
            &format!("{what}, keys at an offset"),
        );
    }
    // The scan by key's tiles: one warp, two, eight (the default), and 32 warps of spans of
    // 512 keys, its lists of heads and the warps' stages past 48 KiB together.
    for block in [32, 64, 256, 1024] {
        let config = SegmentConfig::default().block(block);
        let scanner = gpu().segment_scanner_with::<f32, _>(Sum, config).unwrap();
        let what = format!("scan by key, blocks of {block}");
        check_scan_into((&scanner, Sum), &keys, &kd, &x, &xd, &what);
        check_scan_into(
            (&scanner, Sum),
            &keys,
            &pd.slice(1..),
            &x,
            &xd,
            &format!("{what}, keys at an offset"),
        );
    }
}

/// `scan_by_key_into` of `keys` (on the device: `kd`) and `x` (`xd`), inclusive and
/// exclusive, into the middle of a poisoned buffer: the CPU's bits for every position, and
/// nothing written around them.
fn check_scan_into<K: Element, T: DeviceValue, O: Operator<T>>(
    (scanner, op): (&cufold::segment::SegmentScanner<T, O>, O),
    keys: &[K],
    kd: &impl cudarc::driver::DevicePtr<K>,
    x: &[T],
    xd: &CudaSlice<T>,
    what: &str,
) {
    let g = gpu();
    let n = x.len();
    let p = poison::<O::Out>();
    for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
        let mut want = vec![p; n];
        Cpu::new()
            .scan_by_key_into(keys, x, &mut want, op, kind)
            .unwrap();
        let mut y = upload(g, &vec![p; n + 6]);
        scanner
            .scan_by_key_into(kd, xd, &mut y.slice_mut(3..3 + n), kind)
            .unwrap();
        let y = download(&y);
        assert!(
            y[..3].iter().chain(&y[3 + n..]).all(|v| same(v, &p)),
            "{what}, {kind:?}: written outside the outputs"
        );
        if let Some(i) = (0..n).find(|&i| !same(&y[3 + i], &want[i])) {
            panic!(
                "{what}, {kind:?}: at {i} of {n}: GPU {:?}, CPU {:?}",
                y[3 + i],
                want[i]
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn few_long_runs_take_the_long_pass_with_the_same_bits() {
    // Four runs of 2^20 on average, fewer than the multiprocessors: the reduction's planner
    // gives them the thread schedule, whose long pass cuts each into chunks across the
    // device (the reduction's tree); the scan by key's one pass lists them for the
    // device-wide scan's tiles (its own, or its large ones with `large_from` lowered to
    // every input); the bits are those of the CPU's run alone.
    let g = gpu();
    let s = seed("few_long_runs_take_the_long_pass_with_the_same_bits");
    let lengths = [1 << 20, (1 << 20) + 3, 5, 1 << 21];
    let keys = keys_of(&lengths, |r| r as u64);
    let off = csr_offsets(0, &lengths);
    fn one<T: Gen + DeviceValue, O: Operator<T>>(op: O, keys: &[u64], off: &[u64], s: u64) {
        let g = gpu();
        let x: Vec<T> = data(keys.len(), s);
        let (kd, xd) = (upload(g, keys), upload(g, &x));
        let (runs, n) = (off.len() as u64 - 1, x.len() as u64);
        let reducer = g.segment_reducer::<T, O>(op).unwrap();
        assert_eq!(reducer.plan(runs, n, false).schedule, Schedule::Thread);
        let by = reducer.reduce_by_key(&kd, &xd).unwrap();
        let got = download(&by.values);
        for (r, w) in off.windows(2).enumerate() {
            let want = Cpu::new()
                .reduce(&x[w[0] as usize..w[1] as usize], op)
                .unwrap();
            assert!(same(&got[r], &want), "{} run {r}", O::NAME);
        }
        for large_from in [ScanConfig::default().get_large_from(), 0] {
            let config =
                SegmentConfig::default().scan(ScanConfig::default().large_from(large_from));
            let scanner = g.segment_scanner_with::<T, O>(op, config).unwrap();
            let mut y = upload(g, &vec![poison::<O::Out>(); x.len()]);
            scanner
                .scan_by_key_into(&kd, &xd, &mut y, ScanKind::Inclusive)
                .unwrap();
            let y = download(&y);
            for w in off.windows(2) {
                let (lo, hi) = (w[0] as usize, w[1] as usize);
                let want = Cpu::new()
                    .scan(&x[lo..hi], op, ScanKind::Inclusive)
                    .unwrap();
                assert!(
                    same(&y[lo..hi].to_vec(), &want),
                    "{} scan run at {lo}, large tiles from {large_from} bytes",
                    O::NAME
                );
            }
        }
    }
    assert!(g.props().sm_count > 4);
    one::<f32, _>(Sum, &keys, &off, s);
    one::<f64, _>(Sum, &keys, &off, s);
    one::<f16, _>(Sum, &keys, &off, s);
    one::<Affine<f32>, _>(Compose, &keys, &off, s);
}

#[test]
#[ignore = "needs a CUDA device"]
fn scan_by_key_lists_runs_for_the_small_own_and_large_tiles() {
    // The scan by key lists each long run for the largest tile it fills: with the large
    // tiles (`large_from` lowered to every input), runs of a large tile or more for them,
    // shorter ones of an own tile or more for the own, and those of half an own tile up to
    // that for the small tiles where the types have them (f32: small tiles of 4096, own of
    // 8192, large of 16 384; f64: own of 4096 from half of one, large of 8192), on either
    // side of each bound, between short runs; without the large tiles, every run of an own
    // tile or more for the own.
    let s = seed("scan_by_key_lists_runs_for_the_small_own_and_large_tiles");
    let mut lengths = vec![
        5,
        2047,
        2048,
        4095,
        4096,
        4097,
        8191,
        8192,
        8193,
        9000,
        16_383,
        16_384,
        16_385,
        70_001,
        1 << 20,
        3,
    ];
    let mut r = Rng(s);
    lengths.extend((0..20_000).map(|_| 1 + (r.next() % 300) as usize));
    let keys = keys_of(&lengths, |r| (r % 2) as u32);
    fn one<T: Gen + DeviceValue, O: Operator<T>>(op: O, keys: &[u32], s: u64) {
        let g = gpu();
        let x: Vec<T> = data(keys.len(), s);
        let (kd, xd) = (upload(g, keys), upload(g, &x));
        for large_from in [0, u64::MAX] {
            let config =
                SegmentConfig::default().scan(ScanConfig::default().large_from(large_from));
            let scanner = g.segment_scanner_with::<T, O>(op, config).unwrap();
            let what = format!(
                "{} of {}, large tiles from {large_from} bytes",
                O::NAME,
                T::cuda_name()
            );
            check_scan_into((&scanner, op), keys, &kd, &x, &xd, &what);
        }
    }
    one::<f32, _>(Sum, &keys, s);
    one::<f64, _>(Sum, &keys, s);
    one::<Affine<f32>, _>(Compose, &keys, s);
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_pool_keeps_what_it_is_told_and_gives_back_the_old_setting() {
    let g = gpu();
    let before = g.keep_pool_memory(1 << 30).unwrap();
    assert_eq!(g.keep_pool_memory(u64::MAX).unwrap(), 1 << 30);
    // By key with the pool kept: the same runs as before.
    let keys = keys_of(&[3, 1, 4, 1, 5], |r| r as u32);
    let x = vec![1.0f32; keys.len()];
    let by = g
        .segment_reducer::<f32, _>(Sum)
        .unwrap()
        .reduce_by_key(&upload(g, &keys), &upload(g, &x))
        .unwrap();
    assert_eq!(download(&by.lengths), [3, 1, 4, 1, 5]);
    assert_eq!(download(&by.values), [3.0, 1.0, 4.0, 1.0, 5.0]);
    assert_eq!(g.keep_pool_memory(before).unwrap(), u64::MAX);
}
