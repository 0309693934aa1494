//! CPU backend throughput (criterion): the canonical tree on all cores.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cufold::ops::{ArgMax, Sum};
use cufold::Cpu;
use std::time::Duration;

fn cpu_reduce(c: &mut Criterion) {
    let cpu = Cpu::new();
    let mut g = c.benchmark_group("cpu");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300));
    for lg in [20u32, 24] {
        let n = 1usize << lg;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i as u32).wrapping_mul(2654435761) >> 8) as f32 / (1 << 24) as f32)
            .collect();
        g.throughput(Throughput::Bytes((n * 4) as u64));
        g.bench_with_input(
            BenchmarkId::new("sum_f32", format!("2^{lg}")),
            &x,
            |b, x| b.iter(|| cpu.reduce(x, Sum).unwrap()),
        );
        g.bench_with_input(
            BenchmarkId::new("argmax_f32", format!("2^{lg}")),
            &x,
            |b, x| b.iter(|| cpu.reduce(x, ArgMax).unwrap()),
        );
    }
    g.finish();
}

criterion_group!(benches, cpu_reduce);
criterion_main!(benches);
