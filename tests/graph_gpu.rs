//! CUDA graphs: reductions and scans enqueued while a stream is being captured are recorded
//! into a graph (no allocation, no synchronisation inside the calls), and every replay of the
//! graph on new inputs gives the CPU's bits (tile order and epochs live on the device, so no
//! replay depends on numbers the host passed at capture time). A binary of its own: it turns
//! off cudarc's event tracking for its context. Captures are thread-local
//! (`CU_STREAM_CAPTURE_MODE_THREAD_LOCAL`): the tests run on parallel threads, and a global
//! capture forbids every other thread's unsafe calls while it lasts (seen on an H100: another
//! test's scratch allocation failed with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED in 2 runs of
//! 15, 0 of 15 on one thread). Needs a CUDA device; run with
//! `cargo test --release --test graph_gpu -- --include-ignored --nocapture`.

mod common;
use common::*;
use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream};
use cufold::ops::{ArgMax, Indexed, Max, Sum};
use cufold::{Cpu, ErrorKind, Gpu, Reducer, ScanKind, Scanner};
use std::sync::Arc;

/// A handle on a new stream of a context without cudarc's event tracking (a stream capture
/// cannot wait on events recorded before it).
fn capture_stream() -> (Arc<CudaStream>, Gpu) {
    let ctx = CudaContext::new(0).unwrap();
    // SAFETY: every buffer of this binary is used on one stream at a time, in order.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let g = Gpu::new(&stream).unwrap();
    (stream, g)
}

/// How every capture of this binary begins (the module's doc says why thread-local).
const CAPTURE: sys::CUstreamCaptureMode =
    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;

struct Outputs {
    sum: CudaSlice<f32>,
    argmax: CudaSlice<Indexed<f32>>,
    cumsum: CudaSlice<f32>,
    running_max: CudaSlice<f32>,
}

/// The calls captured: a kept reducer and scanner, and the convenient forms.
fn enqueue(
    g: &Gpu,
    sum: &Reducer<f32, Sum>,
    cumsum: &Scanner<f32, Sum>,
    x: &CudaSlice<f32>,
    o: &mut Outputs,
) {
    sum.reduce_into(x, &mut o.sum).unwrap();
    g.reduce_into(x, ArgMax, &mut o.argmax).unwrap();
    cumsum.inclusive(x, &mut o.cumsum).unwrap();
    g.scan(x, &mut o.running_max, Max, ScanKind::Inclusive)
        .unwrap();
}

fn check(stream: &Arc<CudaStream>, host: &[f32], o: &Outputs, what: &str) {
    let cpu = Cpu::new();
    let got = stream.clone_dtoh(&o.sum).unwrap()[0];
    let want = cpu.reduce(host, Sum).unwrap();
    assert_eq!(got.to_bits(), want.to_bits(), "{what}: sum {got} != {want}");
    let got = stream.clone_dtoh(&o.argmax).unwrap()[0];
    let want = cpu.reduce(host, ArgMax).unwrap();
    assert!(same(&got, &want), "{what}: argmax {got:?} != {want:?}");
    let got = stream.clone_dtoh(&o.cumsum).unwrap();
    let want = cpu.scan(host, Sum, ScanKind::Inclusive).unwrap();
    assert!(same(&got, &want), "{what}: cumulative sums differ");
    let got = stream.clone_dtoh(&o.running_max).unwrap();
    let want = cpu.scan(host, Max, ScanKind::Inclusive).unwrap();
    assert!(same(&got, &want), "{what}: running maxima differ");
}

fn poison_all(stream: &Arc<CudaStream>, n: usize, o: &mut Outputs) {
    stream.memcpy_htod(&[poison::<f32>()], &mut o.sum).unwrap();
    stream
        .memcpy_htod(&[poison::<Indexed<f32>>()], &mut o.argmax)
        .unwrap();
    let p = vec![poison::<f32>(); n];
    stream.memcpy_htod(&p, &mut o.cumsum).unwrap();
    stream.memcpy_htod(&p, &mut o.running_max).unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn captured_reductions_and_scans_replay_with_the_cpu_bits() {
    let s = seed("captured_reductions_and_scans_replay_with_the_cpu_bits");
    let (stream, g) = capture_stream();
    // Many blocks for the reductions (tickets, partials), many tiles for the scans
    // (tickets, epochs, look-back slots).
    let n = 3_000_017;
    let mut x = stream.alloc_zeros::<f32>(n).unwrap();
    let mut o = Outputs {
        sum: stream.alloc_zeros(1).unwrap(),
        argmax: stream.alloc_zeros(1).unwrap(),
        cumsum: stream.alloc_zeros(n).unwrap(),
        running_max: stream.alloc_zeros(n).unwrap(),
    };
    let sum = g.reducer::<f32, _>(Sum).unwrap();
    let cumsum = g.scanner::<f32, _>(Sum).unwrap();
    assert!(sum.plan(n as u64).unwrap().grid > 1);

    // Once outside the capture: compiles the convenient forms' kernels and grows the
    // handle's scratch memory.
    let host: Vec<f32> = data(n, s);
    stream.memcpy_htod(&host, &mut x).unwrap();
    poison_all(&stream, n, &mut o);
    enqueue(&g, &sum, &cumsum, &x, &mut o);
    check(&stream, &host, &o, "before the capture");

    stream.begin_capture(CAPTURE).unwrap();
    enqueue(&g, &sum, &cumsum, &x, &mut o);
    let graph = stream
        .end_capture(sys::CUgraphInstantiate_flags(0))
        .unwrap()
        .expect("a graph");

    for round in 1..=4u64 {
        let host: Vec<f32> = data(n, s.wrapping_add(round));
        stream.memcpy_htod(&host, &mut x).unwrap();
        poison_all(&stream, n, &mut o);
        graph.launch().unwrap();
        check(&stream, &host, &o, &format!("replay {round}"));
        eprintln!("replay {round}: the CPU's bits");
    }
    // Plain calls after the replays still find the device's counters where they expect.
    let host: Vec<f32> = data(n, s.wrapping_add(99));
    stream.memcpy_htod(&host, &mut x).unwrap();
    poison_all(&stream, n, &mut o);
    enqueue(&g, &sum, &cumsum, &x, &mut o);
    check(&stream, &host, &o, "after the replays");
}

#[test]
#[ignore = "needs a CUDA device"]
fn growing_scratch_memory_during_a_capture_is_an_error() {
    let (stream, g) = capture_stream();
    let n = 1 << 22;
    let x = stream.alloc_zeros::<f32>(n).unwrap();
    let mut y = stream.alloc_zeros::<f32>(n).unwrap();
    let cumsum = g.scanner::<f32, _>(Sum).unwrap();
    stream.begin_capture(CAPTURE).unwrap();
    let e = cumsum.inclusive(&x, &mut y).unwrap_err();
    let _ = stream.end_capture(sys::CUgraphInstantiate_flags(0));
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    assert!(e.to_string().contains("before the capture"), "{e}");
    // Outside the capture the same call works, and grows the memory for the next capture.
    cumsum.inclusive(&x, &mut y).unwrap();
    stream.synchronize().unwrap();
}

/// The host-side cost of what `Gpu::reduce` did per call before (build a reducer: the
/// operator's source, a kernel look-up in the process's cache) against what it does now (a
/// look-up in the handle's map and a parameter copy) and against a kept `Reducer`'s
/// `reduce_into` (enqueue only). Printed, not asserted.
#[test]
#[ignore = "needs a CUDA device"]
fn the_convenient_forms_cost_little_on_the_host() {
    let (stream, g) = capture_stream();
    let x = stream.alloc_zeros::<f32>(1000).unwrap();
    let mut out = stream.alloc_zeros::<f32>(1).unwrap();
    let kept = g.reducer::<f32, _>(Sum).unwrap();
    g.reduce_into(&x, Sum, &mut out).unwrap();
    stream.synchronize().unwrap();
    let time = |what: &str, f: &mut dyn FnMut()| {
        let calls = 20_000;
        let t = std::time::Instant::now();
        for _ in 0..calls {
            f();
        }
        let per = t.elapsed().as_secs_f64() / calls as f64 * 1e6;
        eprintln!("{what}: {per:.2} us per call (host)");
        per
    };
    let build = time("Gpu::reducer (what Gpu::reduce did per call)", &mut || {
        std::hint::black_box(g.reducer::<f32, _>(Sum).unwrap());
    });
    let with_op = time("Reducer::with_op (what Gpu::reduce does now)", &mut || {
        std::hint::black_box(kept.with_op(Sum).unwrap());
    });
    stream.synchronize().unwrap();
    let enqueue_kept = time("Reducer::reduce_into (enqueue)", &mut || {
        kept.reduce_into(&x, &mut out).unwrap();
    });
    stream.synchronize().unwrap();
    let enqueue_conv = time("Gpu::reduce_into (enqueue)", &mut || {
        g.reduce_into(&x, Sum, &mut out).unwrap();
    });
    stream.synchronize().unwrap();
    let sync_kept = time("Reducer::reduce (to the host)", &mut || {
        std::hint::black_box(kept.reduce(&x).unwrap());
    });
    let sync_conv = time("Gpu::reduce (to the host)", &mut || {
        std::hint::black_box(g.reduce(&x, Sum).unwrap());
    });
    eprintln!(
        "summary: build {build:.2} us, with_op {with_op:.2} us; enqueue kept {enqueue_kept:.2} / \
         convenient {enqueue_conv:.2} us; to host kept {sync_kept:.2} / convenient {sync_conv:.2} us"
    );
}
