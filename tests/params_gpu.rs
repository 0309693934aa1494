//! GPU tests of run-time parameters: operators and maps made by `#[cufold::op]` and
//! `#[cufold::transform]` whose functions take `&self` send their values to the kernel as
//! bytes, so one compiled kernel serves every value of a type.
//!
//! - A thousand values of an operator (and of a map before `Sum`) reduce a fixed input with
//!   one NVRTC compile on a fresh handle, and each result is the CPU's bit for bit.
//! - A hundred values of an operator scan with one compile, bit for bit.
//! - `Reducer::with_op` and `Scanner::with_op` give the bits of a reducer (scanner) built
//!   for the value, with no compile or cache look-up.
//!
//! Each test compiles kernels of types no other test in this binary uses, so that the
//! counts it reads are its own (the memory cache is per process). They need a CUDA device
//! and are ignored by a plain `cargo test`: run them with `--include-ignored`. The
//! NVRTC-only test compiles every kernel here for sm_90, checking the C++ layouts
//! (`cf::make_op`'s `static_assert` that the struct has the parameters' size).

mod common;
mod macro_ops;

use common::*;
use cufold::gpu::KernelStats;
use cufold::ops::{self, Mapped, Operator};
use cufold::{Cpu, DeviceValue, DiskCache, Gpu, GpuOptions, ScanKind};
use macro_ops::*;

/// A handle of its own, so that its kernel counts are the test's, without the disk cache,
/// so that a kernel is compiled (or found in this process's memory) rather than loaded.
fn fresh_handle() -> Gpu {
    Gpu::with_options(
        gpu().stream(),
        GpuOptions::default().disk_cache(DiskCache::Off),
    )
    .unwrap()
}

/// `count` distinct values in `[-2, 2]`, zero, one and a negative zero among them.
fn values(count: usize) -> Vec<f64> {
    (0..count)
        .map(|i| match i {
            0 => 0.0,
            1 => 1.0,
            2 => -0.0,
            _ => -2.0 + 4.0 * i as f64 / count as f64,
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA device"]
fn one_compile_serves_a_thousand_values_of_an_operator() {
    let s = seed("one_compile_serves_a_thousand_values_of_an_operator");
    let g = fresh_handle();
    let host: Vec<f64> = data(65_537, s);
    let x = upload(&g, &host);
    let cpu = Cpu::new();
    for k in values(1000) {
        let op = Scaled { k };
        let got = g.reducer::<f64, _>(op).unwrap().reduce(&x).unwrap();
        let want = cpu.reduce(&host, op).unwrap();
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "k = {k}: GPU {got} != CPU {want}"
        );
    }
    assert_eq!(
        g.kernel_stats(),
        KernelStats {
            compiled: 1,
            from_disk: 0,
            from_memory: 999,
            rejected_from_disk: 0
        },
        "the first value compiles, the others reuse its kernel"
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn one_compile_serves_a_thousand_values_of_a_map() {
    let s = seed("one_compile_serves_a_thousand_values_of_a_map");
    let g = fresh_handle();
    let host: Vec<f32> = data(65_537, s);
    let x = upload(&g, &host);
    let cpu = Cpu::new();
    let before = g.kernel_stats();
    for (i, v) in values(1000).into_iter().enumerate() {
        let op = Mapped::new(
            Standardize {
                mean: v,
                inv_sd: 1.0 + i as f64 / 7.0,
            },
            ops::Sum,
        );
        let got = g.reducer::<f32, _>(op).unwrap().reduce(&x).unwrap();
        let want = cpu.reduce(&host, op).unwrap();
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "value {i}: GPU {got} != CPU {want}"
        );
    }
    let after = g.kernel_stats();
    assert_eq!(after.compiled - before.compiled, 1, "{after:?}");
    assert_eq!(after.from_memory - before.from_memory, 999, "{after:?}");
    assert_eq!(after.from_disk, 0);
}

#[test]
#[ignore = "needs a CUDA device"]
fn one_compile_serves_a_hundred_values_of_a_scan() {
    let s = seed("one_compile_serves_a_hundred_values_of_a_scan");
    let g = fresh_handle();
    let n = 100_003;
    let host: Vec<f32> = data(n, s);
    let x = upload(&g, &host);
    let cpu = Cpu::new();
    for (i, v) in values(100).into_iter().enumerate() {
        let lo = v as f32 * 0.5;
        let op = InWindow {
            window: Window { lo, hi: lo + 0.75 },
            first: (i * 37) as u64,
            cap: 1 + (i as u64 * 997) % 60_000,
            unit: 1.0 + v,
        };
        let kind = [ScanKind::Inclusive, ScanKind::Exclusive][i % 2];
        let mut out = g.stream().clone_htod(&vec![poison::<f64>(); n]).unwrap();
        g.scanner::<f32, _>(op)
            .unwrap()
            .scan(&x, &mut out, kind)
            .unwrap();
        let got = g.stream().clone_dtoh(&out).unwrap();
        let want = cpu.scan(&host, op, kind).unwrap();
        if let Some(j) = (0..n).find(|&j| got[j].to_bits() != want[j].to_bits()) {
            panic!(
                "value {i} ({kind:?}), position {j}: GPU {} != CPU {}",
                got[j], want[j]
            );
        }
    }
    assert_eq!(
        g.kernel_stats(),
        KernelStats {
            compiled: 1,
            from_disk: 0,
            from_memory: 99,
            rejected_from_disk: 0
        }
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn with_op_gives_the_bits_of_a_new_reducer_or_scanner() {
    let s = seed("with_op_gives_the_bits_of_a_new_reducer_or_scanner");
    let g = fresh_handle();
    let cpu = Cpu::new();
    // A map without parameters before an operator with some: the parameters of
    // `cf::Mapped { F f; O o; }` start after the map's empty byte.
    let host: Vec<f64> = data(40_000, s);
    let x = upload(&g, &host);
    let first = g
        .reducer::<f64, _>(Mapped::new(Square, Scaled { k: 1.0 }))
        .unwrap();
    // A map with parameters of another alignment before a built-in operator.
    let host32: Vec<f32> = data(40_000, s ^ 1);
    let x32 = upload(&g, &host32);
    let ramp = |i: usize| Ramp {
        slope: i as f32 * 1e-4,
        clip: Window {
            lo: -0.5,
            hi: 0.5 + i as f32,
        },
    };
    let scanner = g.scanner::<f32, _>(Mapped::new(ramp(0), ops::Max)).unwrap();
    let mut out = g.stream().alloc_zeros::<f32>(host32.len()).unwrap();
    for (i, k) in values(50).into_iter().enumerate() {
        let op = Mapped::new(Square, Scaled { k });
        let before = g.kernel_stats();
        let got = first.with_op(op).unwrap().reduce(&x).unwrap();
        assert_eq!(
            g.kernel_stats(),
            before,
            "with_op neither compiles nor looks up"
        );
        let fresh = g.reducer::<f64, _>(op).unwrap().reduce(&x).unwrap();
        let want = cpu.reduce(&host, op).unwrap();
        assert_eq!(got.to_bits(), fresh.to_bits(), "k = {k}");
        assert_eq!(got.to_bits(), want.to_bits(), "k = {k}");

        let op = Mapped::new(ramp(i), ops::Max);
        let before = g.kernel_stats();
        scanner
            .with_op(op)
            .unwrap()
            .inclusive(&x32, &mut out)
            .unwrap();
        assert_eq!(g.kernel_stats(), before);
        let got = g.stream().clone_dtoh(&out).unwrap();
        let fresh = g.scan_host(&host32, op, ScanKind::Inclusive).unwrap();
        let want = cpu.scan(&host32, op, ScanKind::Inclusive).unwrap();
        assert!(same(&got, &fresh), "ramp {i}");
        assert!(same(&got, &want), "ramp {i}");
    }
    assert_eq!(g.kernel_stats().compiled, 2, "{:?}", g.kernel_stats());
}

#[test]
#[ignore = "needs NVRTC (part of the CUDA toolkit)"]
fn every_parameter_kernel_compiles_for_hopper() {
    if !compile_only_test_runs("every_parameter_kernel_compiles_for_hopper") {
        return;
    }
    use cufold::reduce::ReduceShape;
    use cufold::scan::{ScanShape, TypeSizes};
    use cufold::ScanAlgorithm;
    fn build<T: DeviceValue, O: Operator<T>>(op: O) {
        let (cuda, bytes) = (op.cuda(), op.params().bytes().len());
        let shape = ReduceShape {
            order_free: O::ORDER_FREE,
            ..ReduceShape::for_sizes(std::mem::size_of::<T>(), 256).unwrap()
        };
        for vector in [false, shape.vec as usize * std::mem::size_of::<T>() == 16] {
            if let Err(e) = cufold::reduce::compile_kernel(&cuda, bytes, &shape, vector, "sm_90") {
                panic!("reduce {} over {}: {e}", O::NAME, T::cuda_name());
            }
        }
        let sizes = TypeSizes::of::<T, O>();
        for algo in [
            ScanAlgorithm::WarpShuffle,
            ScanAlgorithm::Blelloch,
            ScanAlgorithm::HillisSteele,
        ] {
            let shape = ScanShape::fitting(sizes, 256, 128, algo, true).unwrap();
            if let Err(e) = cufold::scan::compile_kernel(&cuda, bytes, sizes, &shape, "sm_90") {
                panic!("scan {} over {} ({algo:?}): {e}", O::NAME, T::cuda_name());
            }
        }
    }
    let standardize = Standardize {
        mean: 0.5,
        inv_sd: 2.0,
    };
    build::<f64, _>(Scaled { k: 2.0 });
    build::<f32, _>(InWindow {
        window: Window { lo: 0.0, hi: 1.0 },
        first: 0,
        cap: 9,
        unit: 1.0,
    });
    build::<f32, _>(Mapped::new(standardize, ops::Sum));
    build::<f32, _>(Mapped::new(standardize, Scaled { k: 3.0 }));
    build::<f32, _>(Mapped::new(
        Ramp {
            slope: 1.0,
            clip: Window { lo: 0.0, hi: 1.0 },
        },
        ops::Max,
    ));
    build::<f64, _>(Mapped::new(Square, ops::Sum));
    build::<f64, _>(Mapped::new(Square, Scaled { k: 0.5 }));
    build::<f32, _>(Mapped::new(
        standardize,
        Mapped::new(Square, Scaled { k: 0.5 }),
    ));
}
