//! GPU tests of segmented reductions: every segment's result, on every schedule (a thread,
//! a warp or a block per segment, the whole-array reducer per row), has the bits of the CPU's reduction
//! of that segment alone; segments straddle tiles and blocks, start at unaligned positions,
//! and outnumber the grid. They need a CUDA device, so they are ignored by a plain
//! `cargo test`; run them with `--include-ignored`.

mod common;
use common::*;
use cudarc::driver::{CudaSlice, CudaViewMut};
use cufold::ops::*;
use cufold::scan::ScanConfig;
use cufold::segment::{Rows, Schedule, SegmentConfig};
use cufold::{Cpu, DeviceValue, ErrorKind, ScanKind};

const SCHEDULES: [Option<Schedule>; 5] = [
    None,
    Some(Schedule::Thread),
    Some(Schedule::Warp),
    Some(Schedule::Lanes),
    Some(Schedule::Block),
];

/// Ragged lengths around a lone thread's limit (256), a warp's tile (512 f32 positions) and a
/// 256-thread block's (4096),
/// and long enough for a tile count that is not a power of two (70 001).
const LENGTHS: &[usize] = &[
    0, 1, 2, 3, 31, 32, 33, 255, 256, 257, 511, 512, 513, 0, 1535, 1537, 4095, 4096, 4097, 70_001,
    5, 0,
];

fn download<T: DeviceValue>(d: &CudaSlice<T>) -> Vec<T> {
    if d.is_empty() {
        Vec::new()
    } else {
        gpu().stream().clone_dtoh(d).unwrap()
    }
}

/// The CPU's whole-array reduction of each segment (`None` where it has no value).
fn expected<T: DeviceValue, O: Operator<T>>(
    x: &[T],
    offsets: &[u64],
    op: O,
) -> Vec<Option<O::Out>> {
    offsets
        .windows(2)
        .map(|w| Cpu::new().reduce(&x[w[0] as usize..w[1] as usize], op).ok())
        .collect()
}

/// Each segment's whole-array scan by `cpu`, at the segment's own positions of an output as
/// long as `x` (`None` where no segment is).
fn expected_scan<T: DeviceValue, O: Operator<T>>(
    cpu: &Cpu,
    x: &[T],
    offsets: &[u64],
    op: O,
    kind: ScanKind,
) -> Vec<Option<O::Out>> {
    let mut want = vec![None; x.len()];
    for w in offsets.windows(2) {
        let (lo, hi) = (w[0] as usize, w[1] as usize);
        for (j, v) in cpu
            .scan(&x[lo..hi], op, kind)
            .unwrap()
            .into_iter()
            .enumerate()
        {
            want[lo + j] = Some(v);
        }
    }
    want
}

/// GPU outputs against the expected ones; a `None` must have left the poisoned output alone.
fn compare<X: std::fmt::Debug + DeviceValue>(what: &str, got: &[X], want: &[Option<X>]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        match w {
            Some(w) => assert!(same(g, w), "{what}, segment {i}: GPU {g:?}, CPU {w:?}"),
            None => assert!(
                same(g, &poison::<X>()),
                "{what}, segment {i}: empty, but written: {g:?}"
            ),
        }
    }
}

/// The segments at `od` of `xd` reduced by a reducer of `config` into outputs of poison,
/// against `want`; `what` names the case in a failure.
fn reduce_and_compare<T: DeviceValue, O: Operator<T>>(
    op: O,
    config: SegmentConfig,
    xd: &CudaSlice<T>,
    od: &CudaSlice<u64>,
    want: &[Option<O::Out>],
    what: &str,
) {
    let r = gpu().segment_reducer_with::<T, O>(op, config).unwrap();
    let mut out = upload(gpu(), &vec![poison::<O::Out>(); want.len()]);
    r.reduce_segments_into(xd, od, &mut out).unwrap();
    compare(what, &download(&out), want);
}

/// The segments at `od` of `xd` scanned (`kind`) by a scanner of `config` into an output of
/// poison as long as `want` (`xd`'s length), against `want`; `what` names the case.
#[allow(clippy::too_many_arguments)]
fn scan_and_compare<T: DeviceValue, O: Operator<T>>(
    op: O,
    config: SegmentConfig,
    xd: &CudaSlice<T>,
    od: &CudaSlice<u64>,
    kind: ScanKind,
    want: &[Option<O::Out>],
    what: &str,
) {
    let sc = gpu().segment_scanner_with::<T, O>(op, config).unwrap();
    let mut y = upload(gpu(), &vec![poison::<O::Out>(); want.len()]);
    sc.scan_segments_into(xd, od, &mut y, kind).unwrap();
    compare(what, &download(&y), want);
}

/// The segments at `od` of `xd` reduced on every schedule, each against `want`; `label`
/// names the case in a failure.
fn compare_on_every_schedule<T: DeviceValue, O: Operator<T>>(
    op: O,
    xd: &CudaSlice<T>,
    od: &CudaSlice<u64>,
    want: &[Option<O::Out>],
    label: &str,
) {
    for schedule in SCHEDULES {
        let what = format!("{} over {}, {label}, {schedule:?}", O::NAME, T::cuda_name());
        let config = SegmentConfig::default().schedule(schedule);
        reduce_and_compare(op, config, xd, od, want, &what);
    }
}

fn check<T: Gen + DeviceValue, O: Operator<T>>(op: O, test: &str) {
    let g = gpu();
    let s = seed(test);
    let mut lengths = LENGTHS.to_vec();
    let mut r = Rng(s ^ 1);
    lengths.extend((0..500).map(|_| (r.next() % 70) as usize));
    // Lengths that the thread schedule's warp reduces in one tile (65 to 256) and a little past.
    lengths.extend((0..200).map(|_| 65 + (r.next() % 236) as usize));
    // Short segments, whose warps' spans fit the thread schedule's shared-memory stage.
    let short: Vec<usize> = (0..3000).map(|_| (r.next() % 13) as usize).collect();
    check_short_offsets::<T, O>(op, &short, s ^ 2);
    let off = csr_offsets(3, &lengths);
    let x: Vec<T> = data(*off.last().unwrap() as usize + 5, s);
    let want = expected(&x, &off, op);
    compare(
        &format!("{} over {} on the CPU", O::NAME, T::cuda_name()),
        &Cpu::new()
            .reduce_segments(&x, &off, op)
            .unwrap()
            .into_iter()
            .map(|v| v.unwrap_or_else(poison))
            .collect::<Vec<_>>(),
        &want,
    );
    let xd = upload(g, &x);
    let od = upload(g, &off);
    compare_on_every_schedule(op, &xd, &od, &want, "offsets");
    // Rows of a view at an odd offset: row r is x[5 + r * 4099..][..4097] (straddles a
    // block's tile), short rows (40 of 33), and one long row (split into 18 chunks of 4096
    // f32, completed to 32 by absent blocks).
    let view = xd.slice(5..);
    for rows in [
        Rows::new(12, 4097).stride(4099),
        Rows::new(40, 33).stride(37),
        Rows::new(70, 9),
        Rows::new(301, 128).stride(131),
        Rows::new(1, 70_001),
    ] {
        let want: Vec<Option<O::Out>> = (0..rows.rows)
            .map(|r| {
                let lo = 5 + r * rows.stride;
                Some(Cpu::new().reduce(&x[lo..lo + rows.cols], op).unwrap())
            })
            .collect();
        // Every schedule, then the split schedule's own block size (default 512) at 64 and
        // 1024, which give the same bits. Each of those is two more compiles (seconds for
        // MeanVar's), so in the default tier only for accumulators of up to 8 bytes (the
        // sums, f16 max).
        let split_blocks: &[u32] = if full_tier() || std::mem::size_of::<O::Acc>() <= 8 {
            &[64, 1024]
        } else {
            &[]
        };
        let configs = SCHEDULES
            .into_iter()
            .chain([Some(Schedule::Whole), Some(Schedule::Split)])
            .map(|s| SegmentConfig::default().schedule(s))
            .chain(split_blocks.iter().map(|&b| {
                SegmentConfig::default()
                    .schedule(Some(Schedule::Split))
                    .split_block(b)
            }));
        for config in configs {
            let r = g.segment_reducer_with::<T, O>(op, config).unwrap();
            let mut out = upload(g, &vec![poison::<O::Out>(); rows.rows]);
            r.reduce_rows_into(&view, rows, &mut out).unwrap();
            let what = format!("{} over {}, {rows:?}, {config:?}", O::NAME, T::cuda_name());
            compare(&what, &download(&out), &want);
        }
    }
}

/// Short ragged segments on every schedule: on the thread schedule, warps stage their spans
/// in shared memory (those with an empty or a decreasing segment read from global memory).
fn check_short_offsets<T: Gen + DeviceValue, O: Operator<T>>(op: O, lengths: &[usize], seed: u64) {
    let g = gpu();
    let mut off = csr_offsets(1, lengths);
    // Segment 2000 decreases: it and its warp leave the stage.
    off[2000] = off[2001] + 1;
    let x: Vec<T> = data(*off.last().unwrap() as usize + 1, seed);
    let want: Vec<Option<O::Out>> = off
        .windows(2)
        .map(|w| {
            (w[0] <= w[1])
                .then(|| Cpu::new().reduce(&x[w[0] as usize..w[1] as usize], op).ok())
                .flatten()
        })
        .collect();
    let (xd, od) = (upload(g, &x), upload(g, &off));
    compare_on_every_schedule(op, &xd, &od, &want, "short offsets");
}

/// One test per operator and type, so that their kernels compile in parallel; those marked
/// `full` run in the full tier only (CUFOLD_TEST_TIER=full: every test compiles five or six
/// kernels, and the default tier keeps one of each kind of operator).
macro_rules! segment_tests {
    ($($name:ident: $t:ty, $op:expr, $tier:ident;)*) => {$(
        #[test]
        #[ignore = "needs a CUDA device"]
        fn $name() {
            if stringify!($tier) == "full" && !in_full_tier(stringify!($name)) {
                return;
            }
            check::<$t, _>($op, stringify!($name));
        }
    )*};
}

segment_tests! {
    f32_sum_segments_have_the_cpu_bits: f32, Sum, default;
    f32_argmax_segments_have_the_cpu_bits: f32, ArgMax, default;
    f32_meanvar_segments_have_the_cpu_bits: f32, MeanVar, default;
    f32_div2mean_segments_have_the_cpu_bits: f32, Div2Mean, full;
    f32_min_segments_have_the_cpu_bits: f32, Min, full;
    f64_sum_segments_have_the_cpu_bits: f64, Sum, default;
    f64_argmin_segments_have_the_cpu_bits: f64, ArgMin, full;
    f16_sum_segments_have_the_cpu_bits: cufold::f16, Sum, full;
    f16_max_segments_have_the_cpu_bits: cufold::f16, Max, default;
    bf16_sum_segments_have_the_cpu_bits: cufold::bf16, Sum, full;
    i32_sum_segments_have_the_cpu_bits: i32, Sum, default;
    u8_widesum_segments_have_the_cpu_bits: u8, WideSum, full;
    u8_argmax_segments_have_the_cpu_bits: u8, ArgMax, default;
    i64_prod_segments_have_the_cpu_bits: i64, Prod, full;
    affine_f32_segments_keep_their_order: Affine<f32>, Compose, default;
    affine_f64_segments_keep_their_order: Affine<f64>, Compose, full;
}

/// Values drawn from NaNs of both signs, infinities, both zeros and a few repeated numbers:
/// what the arg-operators rank specially (every NaN above every number for ArgMax, below
/// for ArgMin, NaNs and the two zeros tying, ties to the lowest index), in segments that a
/// lane, a group of lanes and a warp reduce, on every schedule, against the CPU's bits.
fn check_arg_specials<T: cufold::Element, O: Operator<T, Out = Indexed<T>>>(
    op: O,
    palette: &[T],
    seed: u64,
) {
    let g = gpu();
    let mut r = Rng(seed);
    let lengths: Vec<usize> = (0..4000)
        .map(|i| match i % 4 {
            3 => 33 + (r.next() % 100) as usize,
            _ => (r.next() % 33) as usize,
        })
        .collect();
    let off = csr_offsets(0, &lengths);
    let n = *off.last().unwrap() as usize;
    // Runs of one special value now and then, so that whole segments tie.
    let mut x = Vec::with_capacity(n);
    while x.len() < n {
        let v = palette[(r.next() % palette.len() as u64) as usize];
        let run = if r.next() % 8 == 0 {
            1 + (r.next() % 40) as usize
        } else {
            1
        };
        x.extend(std::iter::repeat(v).take(run.min(n - x.len())));
    }
    let want = expected(&x, &off, op);
    let (xd, od) = (upload(g, &x), upload(g, &off));
    compare_on_every_schedule(op, &xd, &od, &want, "specials");
}

/// An arg-operator's output for a value under 8 bytes (`Indexed<f32>`, `Indexed<u8>`) is 16
/// bytes with padding after the value, and every byte of it is written, the padding as zeros:
/// outputs whose padding is left as it was have no whole 32-byte sector, and the H100 read each
/// sector from memory to merge the writes into it (BENCHMARKS.md, "Segments, thirty-third
/// step"). Segments by offsets on every schedule, rows on every row schedule and segments
/// scanned on the thread schedule, each into words of ones, against the CPU's values.
#[test]
#[ignore = "needs a CUDA device"]
fn arg_outputs_are_written_whole() {
    fn one<T: Gen + cufold::Element, O: Operator<T, Out = Indexed<T>>>(op: O, s: u64) {
        let g = gpu();
        let mut r = Rng(s);
        // Lanes, groups of lanes, a warp and several tiles; none empty, since an arg-operator
        // leaves an empty segment's output alone.
        let lengths: Vec<usize> = (0..3000)
            .map(|_| match r.next() % 8 {
                0 => 33 + (r.next() % 40) as usize,
                1 => 65 + (r.next() % 190) as usize,
                2 if r.next() % 16 == 0 => 2000 + (r.next() % 3000) as usize,
                _ => 1 + (r.next() % 32) as usize,
            })
            .collect();
        let off = csr_offsets(0, &lengths);
        let n = *off.last().unwrap() as usize;
        let x: Vec<T> = data(n, s ^ 1);
        let (xd, od) = (upload(g, &x), upload(g, &off));
        // Runs `write` into words of ones seen as `len` outputs; the outputs it wrote (their
        // padding checked to be zeros) against `want`.
        let check = |what: &str,
                     len: usize,
                     want: &[Option<Indexed<T>>],
                     write: &dyn Fn(&mut CudaViewMut<'_, Indexed<T>>)| {
            let mut words = upload(g, &vec![u64::MAX; 2 * len]);
            {
                // SAFETY: 2 * len words hold len outputs of 16 bytes, aligned as the words are.
                let mut out = unsafe { words.transmute_mut::<Indexed<T>>(len) }.unwrap();
                write(&mut out);
            }
            let words = download(&words);
            let value_bits = 8 * std::mem::size_of::<T>();
            let got: Vec<Indexed<T>> = words
                .chunks(2)
                .enumerate()
                .map(|(i, w)| {
                    assert_eq!(
                        w[0] >> value_bits,
                        0,
                        "{what}, output {i}: padding not written as zeros: {:#018x}",
                        w[0]
                    );
                    // SAFETY: the value is the word's first bytes (little-endian), any bits valid.
                    Indexed {
                        value: unsafe { std::mem::transmute_copy::<u64, T>(&w[0]) },
                        index: w[1],
                    }
                })
                .collect();
            compare(what, &got, want);
        };
        let want = expected(&x, &off, op);
        for schedule in SCHEDULES {
            let r = g
                .segment_reducer_with::<T, O>(op, SegmentConfig::default().schedule(schedule))
                .unwrap();
            check(
                &format!("{} over {}, offsets, {schedule:?}", O::NAME, T::cuda_name()),
                want.len(),
                &want,
                &|out| r.reduce_segments_into(&xd, &od, out).unwrap(),
            );
        }
        for cols in [100, 3000] {
            let rows = Rows::new(n / cols, cols);
            let want: Vec<_> = (0..rows.rows)
                .map(|i| Cpu::new().reduce(&x[i * cols..(i + 1) * cols], op).ok())
                .collect();
            for schedule in SCHEDULES
                .into_iter()
                .chain([Some(Schedule::Whole), Some(Schedule::Split)])
            {
                let r = g
                    .segment_reducer_with::<T, O>(op, SegmentConfig::default().schedule(schedule))
                    .unwrap();
                check(
                    &format!(
                        "{} over {}, {rows:?}, {schedule:?}",
                        O::NAME,
                        T::cuda_name()
                    ),
                    rows.rows,
                    &want,
                    &|out| r.reduce_rows_into(&xd, rows, out).unwrap(),
                );
            }
        }
        // Scans on the thread schedule: its lanes' segments and its warp's of 33 to 256.
        let short: Vec<usize> = lengths.iter().map(|&l| l.min(256)).collect();
        let off = csr_offsets(0, &short);
        let m = *off.last().unwrap() as usize;
        let od = upload(g, &off);
        let sc = g
            .segment_scanner_with::<T, O>(
                op,
                SegmentConfig::default().schedule(Some(Schedule::Thread)),
            )
            .unwrap();
        let want = expected_scan(&Cpu::new(), &x[..m], &off, op, ScanKind::Inclusive);
        check(
            &format!("{} over {}, scanned", O::NAME, T::cuda_name()),
            m,
            &want,
            &|out| {
                sc.scan_segments_into(&xd.slice(..m), &od, out, ScanKind::Inclusive)
                    .unwrap()
            },
        );
    }
    let s = seed("arg_outputs_are_written_whole");
    one::<f32, _>(ArgMax, s);
    one::<u8, _>(ArgMin, s ^ 2);
}

/// The thread schedule in blocks of 32 to 1024 threads (`SegmentConfig::thread_block`,
/// default 64; the reduction's warps' queues take dynamic shared memory by the block): ragged
/// lengths for lanes, groups, warps and, past 2^20 elements, the long pass, reduced and
/// scanned with the CPU's bits on every block size.
#[test]
#[ignore = "needs a CUDA device"]
fn thread_schedule_blocks_have_the_cpu_bits() {
    let s = seed("thread_schedule_blocks_have_the_cpu_bits");
    let mut r = Rng(s);
    let mut lengths = LENGTHS.to_vec();
    let mut draw = || match r.next() % 16 {
        0 => (r.next() % 300) as usize,
        1 => (r.next() % 5000) as usize,
        _ => (r.next() % 12) as usize,
    };
    lengths.extend((0..20_000).map(|_| draw()));
    // About 3.4 million on average; more of the same draws until past 2^20, whatever the
    // seed.
    while lengths.iter().sum::<usize>() <= 1 << 20 {
        lengths.push(draw());
    }
    let off = csr_offsets(3, &lengths);
    assert!(
        *off.last().unwrap() > 1 << 20,
        "long enough for the long pass"
    );
    fn one<T: Gen + DeviceValue, O: Operator<T>>(op: O, off: &[u64], s: u64) {
        let x: Vec<T> = data(*off.last().unwrap() as usize + 5, s);
        let want = expected(&x, off, op);
        let (xd, od) = (upload(gpu(), &x), upload(gpu(), off));
        for block in [32, 64, 256, 1024] {
            let config = SegmentConfig::default()
                .schedule(Some(Schedule::Thread))
                .thread_block(block);
            let what = format!(
                "{} over {}, thread blocks of {block}",
                O::NAME,
                T::cuda_name()
            );
            reduce_and_compare(op, config, &xd, &od, &want, &what);
        }
    }
    one::<f32, _>(Sum, &off, s);
    one::<f32, _>(ArgMax, &off, s ^ 1);
    one::<Affine<f32>, _>(Compose, &off, s ^ 2);
    fn scan<T: Gen + DeviceValue, O: Operator<T>>(op: O, off: &[u64], s: u64) {
        let x: Vec<T> = data(*off.last().unwrap() as usize, s);
        let (xd, od) = (upload(gpu(), &x), upload(gpu(), off));
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            let want = expected_scan(&Cpu::new(), &x, off, op, kind);
            for block in [32, 256, 1024] {
                let config = SegmentConfig::default()
                    .schedule(Some(Schedule::Thread))
                    .thread_block(block);
                let what = format!(
                    "{} {kind:?} over {}, thread blocks of {block}",
                    O::NAME,
                    T::cuda_name()
                );
                scan_and_compare(op, config, &xd, &od, kind, &want, &what);
            }
        }
    }
    scan::<f32, _>(Sum, &off, s ^ 3);
    scan::<Affine<f32>, _>(Compose, &off, s ^ 4);
}

#[test]
#[ignore = "needs a CUDA device"]
fn arg_operators_rank_nans_infinities_and_zeros_as_the_cpu_does() {
    let f32s = [
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xffa0_0001),
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1.5,
        -1.5,
        f32::MIN_POSITIVE / 4.0,
        f32::MAX,
        f32::MIN,
    ];
    let f64s: Vec<f64> = f32s
        .iter()
        .map(|&v| {
            if v.is_nan() {
                f64::from_bits(((v.to_bits() as u64) << 32) | 7)
            } else {
                v as f64
            }
        })
        .chain([f64::MIN_POSITIVE / 4.0])
        .collect();
    check_arg_specials(ArgMax, &f32s, 1);
    check_arg_specials(ArgMin, &f32s, 2);
    check_arg_specials(ArgMax, &f64s, 3);
    check_arg_specials(ArgMin, &f64s, 4);
}

#[test]
#[ignore = "needs a CUDA device"]
fn many_segments_outnumber_the_grid() {
    // 200 000 segments of 0..40 elements: more than four waves of warps and 16 of blocks
    // (a block per segment's grid), so groups take several segments each, each next
    // segment's bounds asked for ahead (a tree's pipelined segments: Sum) or not (Max).
    let g = gpu();
    let s = seed("many_segments_outnumber_the_grid");
    let mut r = Rng(s);
    let lengths: Vec<usize> = (0..200_000).map(|_| (r.next() % 40) as usize).collect();
    let off = csr_offsets(0, &lengths);
    let x: Vec<f32> = data(*off.last().unwrap() as usize, s);
    let (xd, od) = (upload(g, &x), upload(g, &off));
    compare_on_every_schedule(Max, &xd, &od, &expected(&x, &off, Max), "200 000 segments");
    compare_on_every_schedule(Sum, &xd, &od, &expected(&x, &off, Sum), "200 000 segments");
}

#[test]
#[ignore = "needs a CUDA device"]
fn invalid_device_offsets_read_and_write_nothing_outside() {
    // Decreasing, past the end, far past the end: those segments are skipped; the valid
    // ones around them are right; nothing else is written.
    let g = gpu();
    let x: Vec<f32> = (0..30).map(|i| i as f32).collect();
    let off: Vec<u64> = vec![0, 10, 5, 20, 1 << 40, 30, 31];
    let (xd, od) = (upload(g, &x), upload(g, &off));
    for schedule in SCHEDULES {
        let r = g
            .segment_reducer_with::<f32, _>(Sum, SegmentConfig::default().schedule(schedule))
            .unwrap();
        // One guard value after the six outputs: it must survive.
        let mut out = upload(g, &[-1.0f32; 7]);
        let mut six = out.slice_mut(..6);
        r.reduce_segments_into(&xd, &od, &mut six).unwrap();
        let host = download(&out);
        assert_eq!(
            host,
            [45.0, -1.0, 180.0, -1.0, -1.0, -1.0, -1.0],
            "{schedule:?}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn bad_segment_calls_are_errors_before_any_launch() {
    let g = gpu();
    let x = upload(g, &[1.0f32; 10]);
    let r = g.segment_reducer::<f32, _>(Max).unwrap();
    let mut out = upload(g, &[0.0f32; 3]);
    let e = r
        .reduce_rows_into(&x, Rows::new(3, 4), &mut out)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
    assert!(
        e.to_string().contains("need 12 elements, the input has 10"),
        "{e}"
    );
    let e = r
        .reduce_rows_into(&x, Rows::new(3, 3).stride(2), &mut out)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    let e = r
        .reduce_rows_into(&x, Rows::new(3, 0), &mut out)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EmptyInput);
    let mut two = upload(g, &[0.0f32; 2]);
    let e = r
        .reduce_rows_into(&x, Rows::new(3, 3), &mut two)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
    let off = upload(g, &[0u64, 2, 4, 6]);
    let e = r.reduce_segments_into(&x, &off, &mut two).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
    assert!(
        e.to_string()
            .contains("4 offsets make 3 segments, but the output holds 2"),
        "{e}"
    );
    let none = upload(g, &[] as &[u64]);
    let mut empty = upload(g, &[] as &[f32]);
    assert_eq!(
        r.reduce_segments_into(&x, &none, &mut empty)
            .unwrap_err()
            .kind(),
        ErrorKind::LengthMismatch
    );
    // Zero columns with an empty value: every row gets it.
    let mut sums = upload(g, &[7.0f32; 3]);
    g.segment_reducer::<f32, _>(Sum)
        .unwrap()
        .reduce_rows_into(&x, Rows::new(3, 0), &mut sums)
        .unwrap();
    assert_eq!(download(&sums), [0.0; 3]);
}

fn check_scan<T: Gen + DeviceValue, O: Operator<T>>(op: O, test: &str) {
    let g = gpu();
    let s = seed(test);
    let mut lengths = LENGTHS.to_vec();
    let mut r = Rng(s ^ 3);
    lengths.extend((0..300).map(|_| (r.next() % 70) as usize));
    // Short segments, whose warps' spans fit the thread schedule's shared-memory stage.
    let short: Vec<usize> = (0..3000).map(|_| (r.next() % 13) as usize).collect();
    let off = csr_offsets(1, &short);
    let x: Vec<T> = data(*off.last().unwrap() as usize + 2, s ^ 4);
    check_scan_offsets(op, &x, &off, "short offsets");
    let off = csr_offsets(3, &lengths);
    let x: Vec<T> = data(*off.last().unwrap() as usize + 5, s);
    let (xd, od) = (upload(g, &x), upload(g, &off));
    for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
        // Each segment's whole-array scan; poison where no segment is.
        let want = expected_scan(&Cpu::with_threads(1), &x, &off, op, kind);
        for schedule in [
            None,
            Some(Schedule::Thread),
            Some(Schedule::Warp),
            Some(Schedule::Block),
        ] {
            let what = format!(
                "{} {kind:?} over {}, offsets, {schedule:?}",
                O::NAME,
                T::cuda_name()
            );
            let config = SegmentConfig::default().schedule(schedule);
            scan_and_compare(op, config, &xd, &od, kind, &want, &what);
        }
        for (first, rows) in [
            (5, Rows::new(6, 4097).stride(4099)),
            (5, Rows::new(40, 33).stride(37)),
            (5, Rows::new(70, 9)),
            // Rows of several tiles of the whole-array scan (Schedule::Whole scans them in one
            // launch, each row's tiles looking back only within their row).
            (5, Rows::new(3, 20_001).stride(20_011)),
            // Rows shorter than its tile: Schedule::Whole takes a smaller one (2048, 1024 f32).
            (5, Rows::new(5, 2_500).stride(2_503)),
            (5, Rows::new(4, 1_500)),
            // A warp's rows (its tiles of 4, 8 and 16 positions a lane for f32), from the
            // buffer's start, so that rows of 16-byte multiples are aligned for 16-byte loads.
            (0, Rows::new(33, 128)),
            (0, Rows::new(17, 256).stride(260)),
            (0, Rows::new(12, 64).stride(68)),
            (0, Rows::new(9, 1024)),
            (8, Rows::new(21, 100).stride(104)),
        ] {
            let view = xd.slice(first..);
            let mut want = Vec::new();
            for r in 0..rows.rows {
                let lo = first + r * rows.stride;
                want.extend(
                    Cpu::with_threads(1)
                        .scan(&x[lo..lo + rows.cols], op, kind)
                        .unwrap()
                        .into_iter()
                        .map(Some),
                );
            }
            // The whole schedule also on the device-wide scan's tiles of 64-thread blocks.
            let small_tiles = SegmentConfig::default()
                .schedule(Some(Schedule::Whole))
                .scan(ScanConfig::default().block(64));
            // And on its large tiles at every size (rows of 20001 fill one of f32 and f64).
            let large_tiles = SegmentConfig::default()
                .schedule(Some(Schedule::Whole))
                .scan(ScanConfig::default().large_from(0));
            for config in SCHEDULES
                .into_iter()
                .chain([Some(Schedule::Whole)])
                .map(|s| SegmentConfig::default().schedule(s))
                .chain([small_tiles, large_tiles])
            {
                let sc = g.segment_scanner_with::<T, O>(op, config).unwrap();
                let mut y = upload(g, &vec![poison::<O::Out>(); rows.rows * rows.cols]);
                sc.scan_rows_into(&view, rows, &mut y, kind).unwrap();
                let what = format!(
                    "{} {kind:?} over {}, {rows:?}, {config:?}",
                    O::NAME,
                    T::cuda_name()
                );
                compare(&what, &download(&y), &want);
            }
        }
    }
}

/// The segmented scan of `x` by these offsets on the default and the thread schedule
/// (positions outside every segment keep their poison), against the CPU's whole-array scan
/// of each segment; `label` names the shape in messages.
fn check_scan_offsets<T: Gen + DeviceValue, O: Operator<T>>(
    op: O,
    x: &[T],
    off: &[u64],
    label: &str,
) {
    let g = gpu();
    let (xd, od) = (upload(g, x), upload(g, off));
    for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
        let want = expected_scan(&Cpu::new(), x, off, op, kind);
        for schedule in [None, Some(Schedule::Thread)] {
            let what = format!(
                "{} {kind:?} over {}, {label}, {schedule:?}",
                O::NAME,
                T::cuda_name()
            );
            let config = SegmentConfig::default().schedule(schedule);
            scan_and_compare(op, config, &xd, &od, kind, &want, &what);
        }
    }
}

macro_rules! segment_scan_tests {
    ($($name:ident: $t:ty, $op:expr, $tier:ident;)*) => {$(
        #[test]
        #[ignore = "needs a CUDA device"]
        fn $name() {
            if stringify!($tier) == "full" && !in_full_tier(stringify!($name)) {
                return;
            }
            check_scan::<$t, _>($op, stringify!($name));
        }
    )*};
}

segment_scan_tests! {
    f32_sum_segment_scans_have_the_cpu_bits: f32, Sum, default;
    f32_argmax_segment_scans_have_the_cpu_bits: f32, ArgMax, full;
    f64_meanvar_segment_scans_have_the_cpu_bits: f64, MeanVar, default;
    i32_max_segment_scans_have_the_cpu_bits: i32, Max, full;
    f16_sum_segment_scans_have_the_cpu_bits: cufold::f16, Sum, full;
    affine_f32_segment_scans_keep_their_order: Affine<f32>, Compose, default;
}

/// Values of 8 bytes aligned to 4 (`Affine<f32>`) that start 4 bytes into their 16 bytes (a
/// view of another crate's buffer of words): the thread schedule's stage cannot take them in
/// 16-byte pieces, and takes them one at a time, with the CPU's bits (segments over 32 are
/// scanned by the warp in the stage, the shorter ones by their lanes).
#[test]
#[ignore = "needs a CUDA device"]
fn affine_f32_scans_four_bytes_into_sixteen_have_the_cpu_bits() {
    let g = gpu();
    let mut r = Rng(seed("affine_f32_scans_four_bytes_into_sixteen"));
    // Mostly short, so that a warp's span fits its stage (512 values of 8 bytes), one in
    // eight over 32 (the warp's, in the stage).
    let lengths: Vec<usize> = (0..3000)
        .map(|_| match r.next() % 64 {
            k if k < 8 => 33 + (r.next() % 28) as usize,
            k => (k % 16) as usize,
        })
        .collect();
    let off = csr_offsets(0, &lengths);
    let n = *off.last().unwrap() as usize;
    let x: Vec<Affine<f32>> = data(n, seed("affine words"));
    let mut words = vec![0f32; 2 * n + 2];
    for (i, v) in x.iter().enumerate() {
        (words[1 + 2 * i], words[2 + 2 * i]) = (v.a, v.b);
    }
    let (xw, od) = (upload(g, &words), upload(g, &off));
    let sc = g
        .segment_scanner_with::<Affine<f32>, _>(
            Compose,
            SegmentConfig::default().schedule(Some(Schedule::Thread)),
        )
        .unwrap();
    for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
        let want = expected_scan(&Cpu::new(), &x, &off, Compose, kind);
        let mut yw = upload(g, &vec![0f32; 2 * n + 2]);
        {
            // SAFETY: the views hold n pairs of f32 from the second word on, which is
            // Affine<f32>'s layout (two f32, aligned to 4).
            let xv = unsafe { xw.slice(1..).transmute::<Affine<f32>>(n) }.unwrap();
            let mut yw1 = yw.slice_mut(1..);
            let mut yv = unsafe { yw1.transmute_mut::<Affine<f32>>(n) }.unwrap();
            sc.scan_segments_into(&xv, &od, &mut yv, kind).unwrap();
        }
        let out = download(&yw);
        let got: Vec<Affine<f32>> = (0..n)
            .map(|i| Affine {
                a: out[1 + 2 * i],
                b: out[2 + 2 * i],
            })
            .collect();
        compare(
            &format!("Compose {kind:?} over Affine<f32> at 4 bytes into 16"),
            &got,
            &want,
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn bad_segment_scans_are_errors_before_any_launch() {
    let g = gpu();
    let x = upload(g, &[1.0f32; 10]);
    let sc = g.segment_scanner::<f32, _>(Sum).unwrap();
    let mut y9 = upload(g, &[0.0f32; 9]);
    let off = upload(g, &[0u64, 5, 10]);
    let e = sc
        .scan_segments_into(&x, &off, &mut y9, ScanKind::Inclusive)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
    let e = sc
        .scan_rows_into(&x, Rows::new(2, 5), &mut y9, ScanKind::Inclusive)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LengthMismatch);
    assert!(
        e.to_string()
            .contains("need an output of 10 values, the output holds 9"),
        "{e}"
    );
    let e = g.segment_scanner::<f32, _>(Div2Mean).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    // Offsets that decrease or run past the end: those segments are skipped.
    let off = upload(g, &[0u64, 4, 2, 11, 12]);
    for schedule in [Some(Schedule::Thread), Some(Schedule::Block)] {
        let sc = g
            .segment_scanner_with::<f32, _>(Sum, SegmentConfig::default().schedule(schedule))
            .unwrap();
        let mut y = upload(g, &[-1.0f32; 10]);
        sc.scan_segments_into(&x, &off, &mut y, ScanKind::Inclusive)
            .unwrap();
        assert_eq!(
            download(&y),
            [1.0, 2.0, 3.0, 4.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0],
            "{schedule:?}"
        );
    }
}

#[test]
#[ignore = "needs NVRTC (part of the CUDA toolkit)"]
fn every_builtin_segment_kernel_compiles_for_hopper() {
    if !compile_only_test_runs("every_builtin_segment_kernel_compiles_for_hopper") {
        return;
    }
    fn build<T: DeviceValue, O: Operator<T>>(op: O) {
        if O::SCANNABLE {
            let sizes = cufold::scan::TypeSizes::of::<T, O>();
            let s = cufold::scan::ScanShape::fitting(sizes, 256, 64, Default::default(), false)
                .unwrap();
            let c = cufold::scan::ScanConfig::default();
            let long = cufold::scan::ScanShape::fitting(
                sizes,
                c.get_block(),
                c.get_bytes_per_thread() as usize,
                c.get_algorithm(),
                c.get_staging(),
            )
            .unwrap();
            let bytes = op.params().bytes().len();
            if let Err(e) =
                cufold::segment::compile_scan_long_kernel(&op.cuda(), bytes, sizes, &long, "sm_90")
            {
                panic!("{} long scan over {}: {e}", O::NAME, T::cuda_name());
            }
            for group in [1, s.block] {
                if let Err(e) = cufold::segment::compile_scan_kernel(
                    &op.cuda(),
                    bytes,
                    s.block,
                    s.items,
                    group,
                    &[long.tile() / 2, long.tile(), long.tile() * 2],
                    "sm_90",
                ) {
                    panic!(
                        "{} scan over {} (group {group}): {e}",
                        O::NAME,
                        T::cuda_name()
                    );
                }
            }
        }
        let shape = cufold::reduce::ReduceShape {
            order_free: O::ORDER_FREE,
            ..cufold::reduce::ReduceShape::for_sizes(std::mem::size_of::<T>(), 256).unwrap()
        };
        for group in [1, 32, 256] {
            if let Err(e) = cufold::segment::compile_kernel(
                &op.cuda(),
                op.params().bytes().len(),
                &shape,
                group,
                "sm_90",
            ) {
                panic!("{} over {} (group {group}): {e}", O::NAME, T::cuda_name());
            }
        }
    }
    let mut jobs: Vec<Job> = Vec::new();
    macro_rules! all {
        ($($t:ty),*) => {$(
            jobs.push(Box::new(|| {
                build::<$t, _>(Sum); build::<$t, _>(Prod); build::<$t, _>(Min); build::<$t, _>(Max);
                build::<$t, _>(MinMax); build::<$t, _>(ArgMin); build::<$t, _>(ArgMax);
                build::<$t, _>(WideSum); build::<$t, _>(Mean); build::<$t, _>(MeanVar);
            }));
        )*};
    }
    all!(f32, f64, cufold::f16, cufold::bf16, i32, i64, u8);
    jobs.push(Box::new(|| {
        build::<f32, _>(Div2Mean);
        build::<Affine<f32>, _>(Compose);
        build::<Mat2<f64>, _>(MatMul);
    }));
    run_parallel(jobs);
}

/// 200 000 segments of 0 to 8 elements from seed `s`, with `longs` (position, length) set
/// among them: their lengths, CSR offsets from 1, and data for them (three past the end).
fn long_tail_shape<T: Gen + DeviceValue>(
    s: u64,
    longs: &[(usize, usize)],
) -> (Vec<usize>, Vec<u64>, Vec<T>) {
    let mut r = Rng(s);
    let mut lengths: Vec<usize> = (0..200_000).map(|_| (r.next() % 9) as usize).collect();
    for &(at, len) in longs {
        lengths[at] = len;
    }
    let off = csr_offsets(1, &lengths);
    let x: Vec<T> = data(*off.last().unwrap() as usize + 3, s ^ 5);
    (lengths, off, x)
}

/// A ragged shape with a long tail on the thread schedule, over 2^20 elements: segments over
/// 4096 go to the long pass (chunks of the segment's tree, a block each, then a block per
/// segment joining them); the bits are the CPU's whole-array reduction of each segment.
fn check_long_tail<T: Gen + DeviceValue, O: Operator<T>>(op: O, test: &str) {
    let g = gpu();
    let s = seed(test);
    // Just over and at the limit (4096), unaligned, chunk counts that are not a power of
    // two, ones long enough for chunks over the minimum, and the old limit (2^16).
    let (lengths, off, x) = long_tail_shape::<T>(
        s,
        &[
            (5, 65_537),
            (700, 65_536),
            (800, 4097),
            (900, 4096),
            (1000, 8193),
            (9_000, 300_001),
            (50_000, (1 << 20) + 5),
            (120_000, 3 << 21),
            (199_999, 70_000),
        ],
    );
    let want = expected(&x, &off, op);
    let (xd, od) = (upload(g, &x), upload(g, &off));
    for schedule in [None, Some(Schedule::Thread)] {
        let red = g
            .segment_reducer_with::<T, O>(op, SegmentConfig::default().schedule(schedule))
            .unwrap();
        assert_eq!(
            red.plan(lengths.len() as u64, x.len() as u64, false)
                .schedule,
            Schedule::Thread
        );
        let mut out = upload(g, &vec![poison::<O::Out>(); lengths.len()]);
        red.reduce_segments_into(&xd, &od, &mut out).unwrap();
        let what = format!("{} over {}, long tail", O::NAME, T::cuda_name());
        compare(&what, &download(&out), &want);
    }
    // Overlapping segments (valid one by one): more long ones than the list holds; those
    // that find no room are reduced by their warps, with the same bits.
    let n = 1usize << 20;
    let x: Vec<T> = data(n, s ^ 9);
    let off: Vec<u64> = (0..41)
        .map(|i| if i % 2 == 0 { 0 } else { n as u64 })
        .collect();
    let want: Vec<Option<O::Out>> = off
        .windows(2)
        .map(|w| {
            (w[0] <= w[1])
                .then(|| Cpu::new().reduce(&x[w[0] as usize..w[1] as usize], op).ok())
                .flatten()
        })
        .collect();
    assert_eq!(want.iter().filter(|w| w.is_some()).count(), 20);
    let (xd, od) = (upload(g, &x), upload(g, &off));
    let red = g
        .segment_reducer_with::<T, O>(
            op,
            SegmentConfig::default().schedule(Some(Schedule::Thread)),
        )
        .unwrap();
    let mut out = upload(g, &[poison::<O::Out>(); 40]);
    red.reduce_segments_into(&xd, &od, &mut out).unwrap();
    let got = download(&out);
    for (i, (gv, w)) in got.iter().zip(&want).enumerate() {
        match w {
            Some(w) => assert!(
                same(gv, w),
                "{test}: overlapping segment {i}: GPU {gv:?}, CPU {w:?}"
            ),
            // Decreasing offsets: skipped, the output untouched.
            None => assert!(same(gv, &poison::<O::Out>()), "{test}: segment {i} written"),
        }
    }
}

macro_rules! long_tail_tests {
    ($($name:ident: $t:ty, $op:expr;)*) => {$(
        #[test]
        #[ignore = "needs a CUDA device"]
        fn $name() {
            check_long_tail::<$t, _>($op, stringify!($name));
        }
    )*};
}

long_tail_tests! {
    f32_sum_long_tail_has_the_cpu_bits: f32, Sum;
    f32_argmax_long_tail_has_the_cpu_bits: f32, ArgMax;
    f64_meanvar_long_tail_has_the_cpu_bits: f64, MeanVar;
    affine_f32_long_tail_keeps_its_order: Affine<f32>, Compose;
}

/// A ragged shape with a long tail on the thread schedule, over 2^20 elements: segments of
/// half a tile of the device-wide scan or more (and of 4096 or more) go to the long passes,
/// the device-wide scan's tiles and look-back on each segment (f32: tiles of 8192; where the
/// mean length is 4096 or more, tiles of 4096 for segments under 8192); every output has the
/// bits of the CPU's whole-array scan of its segment.
fn check_scan_long_tail<T: Gen + DeviceValue, O: Operator<T>>(op: O, test: &str) {
    let g = gpu();
    let s = seed(test);
    // At and just over the lists' limits for 4- to 16-byte accumulators (4096, 8192), a
    // tile count that is not a power of two, more tiles than a look-back chunk (256), and a
    // long segment last.
    let (lengths, off, x) = long_tail_shape::<T>(
        s,
        &[
            (5, 4097),
            (6, 4096),
            (700, 8193),
            (701, 8191),
            (702, 8192),
            (9_000, 300_001),
            (50_000, (1 << 20) + 5),
            (120_000, 3 << 21),
            (199_999, 70_000),
        ],
    );
    let plan =
        g.segment_scanner::<T, O>(op)
            .unwrap()
            .plan(lengths.len() as u64, x.len() as u64, false);
    assert_eq!(plan.schedule, Schedule::Thread);
    check_scan_offsets(op, &x, &off, "long tail");
    // A mean length of a small tile of the device-wide scan or more but under an own one
    // (f32: 4096 and 8192): on the thread schedule, segments of half an own tile up to one
    // listed for the small tiles, longer ones for the own, between short ones.
    let mut r = Rng(s ^ 3);
    let mut lengths: Vec<usize> = (0..200)
        .map(|i| match i % 20 {
            0 => 8192 + (r.next() % 12_000) as usize,
            1..=4 => (r.next() % 300) as usize,
            _ => 4096 + (r.next() % 4096) as usize,
        })
        .collect();
    // The draws' total is only about 2% over 2^20 (some seeds fell short): segments of the
    // common kind (4097 to 8191) are appended until the input holds 2^20 elements and the
    // mean is a small tile or more, whatever the seed. Every segment is under 20 192 and
    // the first 200 average at most 7230, so the mean stays under an own tile (8192).
    let total = |l: &[usize]| l.iter().sum::<usize>();
    while total(&lengths) + 4 < 1 << 20 || total(&lengths) < 4096 * lengths.len() {
        lengths.push(4097 + (r.next() % 4095) as usize);
    }
    let mean = total(&lengths) / lengths.len();
    assert!((4096..8192).contains(&mean), "mean {mean}");
    let off = csr_offsets(1, &lengths);
    let x: Vec<T> = data(*off.last().unwrap() as usize + 3, s ^ 11);
    assert!(x.len() >= 1 << 20);
    check_scan_offsets(op, &x, &off, "a mean of a small tile");
    // Overlapping segments (valid one by one): copies of one segment, more tiles than its
    // list holds; those that find no room are scanned by their warps. Every copy writes the
    // same outputs (the scan of the segment); decreasing offsets write none. Twenty copies of
    // the whole input, and 300 of its first 5000 (more than the 257 entries a list has room
    // for, with 2^20 elements).
    let n = 1usize << 20;
    let x: Vec<T> = data(n, s ^ 9);
    let xd = upload(g, &x);
    let sc = g
        .segment_scanner_with::<T, O>(
            op,
            SegmentConfig::default().schedule(Some(Schedule::Thread)),
        )
        .unwrap();
    for (copies, len) in [(20, n), (300, 5000)] {
        let off: Vec<u64> = (0..=2 * copies)
            .map(|i| if i % 2 == 0 { 0 } else { len as u64 })
            .collect();
        let od = upload(g, &off);
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            let mut want: Vec<Option<O::Out>> = vec![None; n];
            for (w, v) in want
                .iter_mut()
                .zip(Cpu::new().scan(&x[..len], op, kind).unwrap())
            {
                *w = Some(v);
            }
            let mut y = upload(g, &vec![poison::<O::Out>(); n]);
            sc.scan_segments_into(&xd, &od, &mut y, kind).unwrap();
            compare(
                &format!("{test}: {copies} copies of {len}, {kind:?}"),
                &download(&y),
                &want,
            );
        }
    }
}

/// The default tier keeps f32 Sum (20 to 75 s each on an H100 beside the other tests: the
/// CPU's reference for 200 000 segments, twice, and 9 M outputs compared four times).
macro_rules! scan_long_tail_tests {
    ($($name:ident: $t:ty, $op:expr, $tier:ident;)*) => {$(
        #[test]
        #[ignore = "needs a CUDA device"]
        fn $name() {
            if stringify!($tier) == "full" && !in_full_tier(stringify!($name)) {
                return;
            }
            check_scan_long_tail::<$t, _>($op, stringify!($name));
        }
    )*};
}

scan_long_tail_tests! {
    f32_sum_scan_long_tail_has_the_cpu_bits: f32, Sum, default;
    f32_argmax_scan_long_tail_has_the_cpu_bits: f32, ArgMax, full;
    f64_meanvar_scan_long_tail_has_the_cpu_bits: f64, MeanVar, full;
    u8_sum_scan_long_tail_has_the_cpu_bits: u8, Sum, full;
    affine_f32_scan_long_tail_keeps_its_order: Affine<f32>, Compose, full;
}
