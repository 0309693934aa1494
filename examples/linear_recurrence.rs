//! A linear recurrence `x[t+1] = a[t] * x[t] + b[t]` by a scan: step t is the affine map
//! `f_t(x) = a[t] x + b[t]`, and the inclusive scan of the maps under `ops::Compose`
//! (apply the earlier map first: not commutative, and cufold never reorders) gives
//! `F_t = f_t ∘ ... ∘ f_1 ∘ f_0` for every t at once, so `x[t+1] = F_t(x[0])`. The
//! sequential loop has a chain of 10^7 dependent steps; the scan has none longer than
//! log2(10^7) combines.
//!
//! The coefficients are seeded random: `a[t]` uniform in [0.9, 1.05) (some steps grow, the
//! recurrence contracts on average, so the values stay finite and positive) and `b[t]`
//! uniform in [0, 1); `x[0] = 1`. Every term of `x[t]` is then positive, so relative errors
//! are meaningful at every step. In f64, the scan is compared with the sequential loop; in
//! f32 (the coefficients rounded to f32), both the scan and a sequential f32 loop are
//! compared with an f64 loop over the same f32 coefficients.
//!
//! `cargo run --release --example linear_recurrence [-- --quick]` (`--quick`: 10^5 steps).
//! Without a GPU it runs on the CPU backend (the same canonical grouping) and says so in its
//! first line; on the CPU a 10^7-step scan does more work than the loop and is not faster.

#[path = "../benches/common/mod.rs"]
mod common;

use cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
use cufold::ops::{Affine, Compose};
use cufold::{Backend, Gpu, Real, ScanKind};
use std::hint::black_box;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// `n` maps `a x + b`, a uniform in [0.9, 1.05), b uniform in [0, 1), generated on all cores
/// (from the seed's ChaCha8 streams, so the data depend on the seed and n only).
fn maps(n: usize, seed: u64) -> Vec<Affine<f64>> {
    common::fill(n, seed, Affine { a: 1.0, b: 0.0 }, |rng| Affine {
        a: 0.9 + 0.15 * common::unit(rng),
        b: common::unit(rng),
    })
}

/// The sequential loop: x[t+1] = a[t] x[t] + b[t]; returns x[n].
fn sequential<T: Real>(maps: &[Affine<T>], x0: T) -> T {
    let mut x = x0;
    for m in maps {
        x = m.a * x + m.b;
    }
    x
}

/// Relative errors of `got[t]` (x[t+1]) against the f64 loop over `maps`: the largest, and
/// the last.
fn errors(maps: &[Affine<f64>], x0: f64, got: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut x, mut max, mut last) = (x0, 0f64, 0f64);
    for (m, g) in maps.iter().zip(got) {
        x = m.a * x + m.b;
        last = ((g - x) / x).abs();
        max = max.max(last);
    }
    (max, last)
}

/// Median milliseconds of 10 event-timed scans of `maps` already on the GPU (the kernel
/// alone), after a warm-up.
fn gpu_kernel_ms<T: Real>(gpu: &Gpu, maps: &[Affine<T>]) -> Res<f64> {
    let stream = gpu.stream();
    let ctx = stream.context();
    let x = stream.clone_htod(maps)?;
    let mut y = stream.alloc_zeros::<Affine<T>>(maps.len())?;
    let scanner = gpu.scanner::<Affine<T>, _>(Compose)?;
    for _ in 0..3 {
        scanner.inclusive(&x, &mut y)?;
    }
    let mut ms = Vec::new();
    for _ in 0..10 {
        let (a, b) = (
            ctx.new_event(Some(CU_EVENT_DEFAULT))?,
            ctx.new_event(Some(CU_EVENT_DEFAULT))?,
        );
        a.record(stream)?;
        scanner.inclusive(&x, &mut y)?;
        b.record(stream)?;
        b.synchronize()?;
        ms.push(a.elapsed_ms(&b)? as f64);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// On the GPU, the scan's bits must be the CPU backend's (the maps are composed with + and *
/// along the same grouping): the example fails otherwise.
fn same_as_cpu<T: Real>(backend: &Backend, maps: &[Affine<T>], prefixes: &[Affine<T>]) -> Res<()> {
    if let Backend::Gpu(_) = backend {
        let cpu = cufold::Cpu::new().scan(maps, Compose, ScanKind::Inclusive)?;
        let bits = |f: &Affine<T>| (f.a.to_f64().to_bits(), f.b.to_f64().to_bits());
        if !prefixes.iter().zip(&cpu).all(|(f, g)| bits(f) == bits(g)) {
            return Err("the GPU's scan of the maps differs from the CPU backend's".into());
        }
    }
    Ok(())
}

fn main() -> Res<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let backend = Backend::auto();
    println!("backend: {}", backend.describe());
    let steps = if quick { 100_000 } else { 10_000_000 };
    let seed = 20240607;
    let x0 = 1.0;
    let m64 = maps(steps, seed);
    println!(
        "x[t+1] = a[t] x[t] + b[t], {steps} steps, a in [0.9, 1.05), b in [0, 1), x[0] = {x0}, \
         seed {seed}"
    );
    let via = match backend {
        Backend::Gpu(_) => "Backend::scan, upload and download included",
        Backend::Cpu(_) => "Backend::scan",
    };

    // f64: the scan against the sequential loop.
    let t = Instant::now();
    let last = black_box(sequential(black_box(&m64), x0));
    let loop_ms = ms_since(t);
    let t = Instant::now();
    let prefixes = backend.scan(&m64, Compose, ScanKind::Inclusive)?;
    let scan_ms = ms_since(t);
    let (max, end) = errors(&m64, x0, prefixes.iter().map(|f| f.apply(x0)));
    same_as_cpu(&backend, &m64, &prefixes)?;
    drop(prefixes);
    if max > 1e-9 {
        return Err(
            format!("the f64 scan is {max:.1e} from the sequential loop (over 1e-9)").into(),
        );
    }
    println!(
        "f64: x[{steps}] = {last:.15}; scan against the sequential f64 loop: relative error max \
         over t {max:.2e}, at the end {end:.2e}"
    );
    println!("     sequential loop {loop_ms:.1} ms, scan {scan_ms:.1} ms ({via})");

    // f32: the scan and an f32 loop, each against an f64 loop over the same f32 maps.
    let m32: Vec<Affine<f32>> = m64
        .iter()
        .map(|m| Affine {
            a: m.a as f32,
            b: m.b as f32,
        })
        .collect();
    drop(m64);
    let widened: Vec<Affine<f64>> = m32
        .iter()
        .map(|m| Affine {
            a: m.a as f64,
            b: m.b as f64,
        })
        .collect();
    let t = Instant::now();
    let _ = black_box(sequential(black_box(&m32), x0 as f32));
    let loop32_ms = ms_since(t);
    let t = Instant::now();
    let prefixes = backend.scan(&m32, Compose, ScanKind::Inclusive)?;
    let scan32_ms = ms_since(t);
    let (max, end) = errors(
        &widened,
        x0,
        prefixes.iter().map(|f| f.apply(x0 as f32) as f64),
    );
    same_as_cpu(&backend, &m32, &prefixes)?;
    drop(prefixes);
    let mut x = x0 as f32;
    let (loop_max, loop_end) = errors(
        &widened,
        x0,
        m32.iter().map(|m| {
            x = m.a * x + m.b;
            x as f64
        }),
    );
    println!(
        "f32: against an f64 loop over the same f32 maps, relative error max over t / at the end: \
         scan {max:.2e} / {end:.2e}, sequential f32 loop {loop_max:.2e} / {loop_end:.2e}"
    );
    println!("     sequential loop {loop32_ms:.1} ms, scan {scan32_ms:.1} ms ({via})");

    if let Backend::Gpu(gpu) = &backend {
        let k64 = gpu_kernel_ms(gpu, &maps(steps, seed))?;
        let k32 = gpu_kernel_ms(gpu, &m32)?;
        println!(
            "GPU kernel alone (inputs on the device, CUDA events, median of 10): f64 {k64:.3} ms \
             ({:.0} GB/s), f32 {k32:.3} ms ({:.0} GB/s), reading and writing 16 or 8 bytes a step",
            2.0 * 16.0 * steps as f64 / (k64 * 1e6),
            2.0 * 8.0 * steps as f64 / (k32 * 1e6)
        );
    }
    Ok(())
}
