//! GPU tests of operators whose values are compiled into their CUDA text (`ops::cuda_f64`,
//! as the docs allow: "parameters compiled in exactly") rather than passed as run-time
//! parameters. Each value's text differs, so each value needs its own kernel: a kernel
//! compiled for one value must never serve another. Every primitive is run with three
//! values of such a constant in one process, on one handle, and each result is compared
//! with the CPU backend's for the same value.
//!
//! They need a CUDA device and are ignored by a plain `cargo test`: run them with
//! `--include-ignored`.

mod common;

use common::*;
use cufold::dist::{ChunkLayout, GpuRank, LocalGroup};
use cufold::monte_carlo::MonteCarlo;
use cufold::ops::{cuda_f64, CudaOp, Mapped, Operator, Sum, Transform};
use cufold::segment::Rows;
use cufold::{Backend, Cpu, ScanKind};

/// `x -> x + c`, with `c` written into the CUDA source (no run-time parameters).
#[derive(Clone, Copy, Debug)]
struct AddC(f64);

impl Transform<f64> for AddC {
    type Out = f64;
    fn apply(&self, x: f64, _index: u64) -> f64 {
        x + self.0
    }
    fn cuda(&self) -> CudaOp {
        // The name is the same for every value: only the text differs, as in a user's
        // operator that formats its constant into a fixed struct.
        CudaOp {
            type_name: "AddC".into(),
            source: format!(
                "struct AddC {{
    typedef double In;
    typedef double Out;
    __device__ double operator()(double x, unsigned long long) const {{ return x + {}; }}
}};",
                cuda_f64(self.0)
            ),
        }
    }
}

/// The values every test runs, in one process.
const VALUES: [f64; 3] = [1.0, 2.0, 3.0];

fn op(c: f64) -> Mapped<AddC, Sum> {
    Mapped::new(AddC(c), Sum)
}

fn zeros(n: usize) -> Vec<f64> {
    vec![0.0; n]
}

#[test]
#[ignore = "needs a CUDA device"]
fn backend_reduce_and_scan_take_each_values_kernel() {
    let backend = Backend::Gpu(gpu().clone());
    let x = zeros(1000);
    for c in VALUES {
        assert_eq!(backend.reduce(&x, op(c)).unwrap(), 1000.0 * c, "c = {c}");
        let prefixes = backend.scan(&x, op(c), ScanKind::Inclusive).unwrap();
        assert_eq!(prefixes[999], 1000.0 * c, "c = {c}");
        assert_eq!(prefixes[0], c, "c = {c}");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_convenient_forms_and_with_op_take_each_values_kernel() {
    let g = gpu();
    let cpu = Cpu::new();
    for n in [1000usize, 1 << 20] {
        let host = data::<f64>(n, seed("gpu_convenient_forms_and_with_op") ^ n as u64);
        let x = upload(g, &host);
        let reducer = g.reducer::<f64, _>(op(VALUES[0])).unwrap();
        let scanner = g.scanner::<f64, _>(op(VALUES[0])).unwrap();
        for c in VALUES {
            let want = cpu.reduce(&host, op(c)).unwrap();
            let got = g.reduce(&x, op(c)).unwrap();
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "Gpu::reduce, n = {n}, c = {c}"
            );
            let got = reducer.with_op(op(c)).unwrap().reduce(&x).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "with_op, n = {n}, c = {c}");

            let want = cpu.scan(&host, op(c), ScanKind::Exclusive).unwrap();
            let got = g.scan_host(&host, op(c), ScanKind::Exclusive).unwrap();
            assert!(same(&got, &want), "Gpu::scan_host, n = {n}, c = {c}");
            let mut y = g.stream().alloc_zeros::<f64>(n).unwrap();
            scanner
                .with_op(op(c))
                .unwrap()
                .scan(&x, &mut y, ScanKind::Exclusive)
                .unwrap();
            let got = g.stream().clone_dtoh(&y).unwrap();
            assert!(same(&got, &want), "Scanner::with_op, n = {n}, c = {c}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn segments_and_keys_take_each_values_kernel() {
    let g = gpu();
    let cpu = Cpu::new();
    let (rows, cols) = (64usize, 300usize);
    let host = data::<f64>(
        rows * cols,
        seed("segments_and_keys_take_each_values_kernel"),
    );
    let x = upload(g, &host);
    let shape = Rows::new(rows, cols);
    let lengths: Vec<usize> = (0..rows).map(|r| r * 7 % 600).collect();
    let offsets = csr_offsets(0, &lengths);
    let total = *offsets.last().unwrap() as usize;
    let xs = upload(g, &host[..total]);
    let offs = upload(g, &offsets);
    let keys: Vec<u32> = (0..total).map(|i| (i / 37) as u32).collect();
    let dkeys = upload(g, &keys);
    for c in VALUES {
        let reducer = g.segment_reducer::<f64, _>(op(c)).unwrap();
        let scanner = g.segment_scanner::<f64, _>(op(c)).unwrap();

        let want = cpu.reduce_rows(&host, shape, op(c)).unwrap();
        let mut out = g.stream().alloc_zeros::<f64>(rows).unwrap();
        reducer.reduce_rows_into(&x, shape, &mut out).unwrap();
        assert!(
            same(&g.stream().clone_dtoh(&out).unwrap(), &want),
            "rows, c = {c}"
        );

        let want: Vec<f64> = cpu
            .reduce_segments(&host[..total], &offsets, op(c))
            .unwrap()
            .into_iter()
            .map(|v| v.unwrap_or(0.0))
            .collect();
        reducer.reduce_segments_into(&xs, &offs, &mut out).unwrap();
        let got: Vec<f64> = g.stream().clone_dtoh(&out).unwrap();
        // Empty segments get Sum's empty value, which the CPU form gives as None.
        assert!(same(&got, &want), "offsets, c = {c}");

        let want = cpu
            .scan_rows(&host, shape, op(c), ScanKind::Inclusive)
            .unwrap();
        let mut y = g.stream().alloc_zeros::<f64>(rows * cols).unwrap();
        scanner
            .scan_rows_into(&x, shape, &mut y, ScanKind::Inclusive)
            .unwrap();
        assert!(
            same(&g.stream().clone_dtoh(&y).unwrap(), &want),
            "scan rows, c = {c}"
        );

        let mut want = vec![0.0; total];
        cpu.scan_segments_into(
            &host[..total],
            &offsets,
            &mut want,
            op(c),
            ScanKind::Inclusive,
        )
        .unwrap();
        let mut y = g.stream().alloc_zeros::<f64>(total).unwrap();
        scanner
            .scan_segments_into(&xs, &offs, &mut y, ScanKind::Inclusive)
            .unwrap();
        assert!(
            same(&g.stream().clone_dtoh(&y).unwrap(), &want),
            "scan offsets, c = {c}"
        );

        let want = cpu.reduce_by_key(&keys, &host[..total], op(c)).unwrap();
        let got = reducer.reduce_by_key(&dkeys, &xs).unwrap();
        assert!(
            same(&g.stream().clone_dtoh(&got.values).unwrap(), &want.values),
            "reduce by key, c = {c}"
        );

        let mut want = vec![0.0; total];
        cpu.scan_by_key_into(&keys, &host[..total], &mut want, op(c), ScanKind::Exclusive)
            .unwrap();
        scanner
            .scan_by_key_into(&dkeys, &xs, &mut y, ScanKind::Exclusive)
            .unwrap();
        assert!(
            same(&g.stream().clone_dtoh(&y).unwrap(), &want),
            "scan by key, c = {c}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn monte_carlo_and_ranks_take_each_values_kernel() {
    let g = gpu();
    let cpu = Cpu::new();
    let n = 1u64 << 16;
    let first = g
        .integrator(&MonteCarlo::<f64, _>::new(AddC(VALUES[0])).reduce_with(Sum))
        .unwrap();
    let rank = GpuRank::new(g.clone(), LocalGroup::new(1).pop().unwrap());
    let layout = ChunkLayout::new(1000, 1).unwrap();
    let x = upload(g, &zeros(1000));
    for c in VALUES {
        let mc = MonteCarlo::<f64, _>::new(AddC(c)).reduce_with(Sum).seed(3);
        let want = cpu.monte_carlo(&mc, n).unwrap();
        let got = g.monte_carlo(&mc, n).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "Gpu::monte_carlo, c = {c}");
        let got = first.with(&mc).unwrap().estimate(n).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "Integrator::with, c = {c}");
        let got = rank
            .monte_carlo(&ChunkLayout::new(n, 1).unwrap(), &mc)
            .unwrap();
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "GpuRank::monte_carlo, c = {c}"
        );

        let got = rank.all_reduce(&layout, &x, op(c)).unwrap();
        assert_eq!(got, 1000.0 * c, "GpuRank::all_reduce, c = {c}");
        let mut y = g.stream().alloc_zeros::<f64>(1000).unwrap();
        rank.scan_into(&layout, &x, &mut y, op(c), ScanKind::Inclusive)
            .unwrap();
        let y = g.stream().clone_dtoh(&y).unwrap();
        assert_eq!(y[999], 1000.0 * c, "GpuRank::scan_into, c = {c}");
    }
}

/// The operator's CUDA text is what differs between values (a check of the fixture itself,
/// on the CPU).
#[test]
fn each_value_has_its_own_cuda_text() {
    let texts: Vec<CudaOp> = VALUES
        .iter()
        .map(|&c| <Mapped<AddC, Sum> as Operator<f64>>::cuda(&op(c)))
        .collect();
    assert_ne!(texts[0], texts[1]);
    assert_ne!(texts[1], texts[2]);
    assert_eq!(texts[0].type_name, texts[1].type_name);
}
