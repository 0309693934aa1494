//! Monte Carlo throughput in samples per second: the fused estimate (samples drawn in the
//! kernel, never stored) against the same samples stored in device memory and reduced, for
//! (a) the mean of U(0,1) and (b) a 4-dimensional integrand with `exp`,
//! `E[exp(-(x0² + x1² + x2² + x3²))]` over U(0,1)^4 (exactly `(√π/2 · erf 1)^4`).
//! PyTorch's `torch.rand` + expression + `mean` on the same work is timed by
//! `scripts/mc_peers.py` in the same device call (`scripts/gpu-session.sh mc`).
//!
//! ```text
//! cargo bench --bench gpu_monte_carlo -- [--log2 24,26,28,30,32] [--reps 20] [--json OUT.json]
//! ```
//!
//! Times are CUDA-event medians of `estimate_into` / `reduce_into` launches (after warm-up).
//! "stored" generates the draws with a Philox kernel of cufold's own header (one pass that
//! writes them) and reduces them with a `Reducer` of the same mapped operator: its result must
//! have the fused result's bits, which is checked at every size, and the fused result is
//! checked against the CPU backend once at 2^20 samples (bits for the uniform mean; within
//! 1e-6 for `exp`, which differs by a few ulps between the device and libm).

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use cufold::monte_carlo::{MonteCarlo, Sample};
use cufold::ops::{Identity, Mean, Transform};
use cufold::{Cpu, Gpu};

#[path = "common/mod.rs"]
mod common;
use common::median_ms;

/// x -> exp(-|x|²) on U(0,1)^4.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Gauss4 {
    scale: f32,
}

#[cufold::transform]
impl Gauss4 {
    fn apply(&self, x: [f32; 4]) -> f32 {
        (-(x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + x[3] * x[3]) * self.scale).exp()
    }
}

/// The run's draws in the fused kernel's order (draw k = word k % 4 of Philox sample k / 4,
/// f32), written to memory: the "stored" variant's first pass.
const GENERATE: &str = r#"
extern "C" __global__ void generate(float* x, unsigned long long draws, unsigned long long seed) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long b = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; 4 * b < draws;
         b += stride) {
        const cf::PhiloxBlock blk = cf::philox_block(seed, b, 0u);
        float v[4];
        for (int k = 0; k < 4; ++k) v[k] = cf::open01_f32(blk.w[k]);
        if (4 * b + 4 <= draws) {
            reinterpret_cast<float4*>(x)[b] = make_float4(v[0], v[1], v[2], v[3]);
        } else {
            for (int k = 0; 4 * b + k < draws; ++k) x[4 * b + k] = v[k];
        }
    }
}
"#;

/// Fused Monte Carlo throughput (samples/s) against the same samples stored and reduced.
// `action = Set` and `args_override_self`: a repeated flag's last occurrence wins, as it did
// with the hand-written parser this replaced.
#[derive(clap::Parser, Debug)]
#[command(
    name = "gpu_monte_carlo",
    bin_name = "gpu_monte_carlo",
    args_override_self = true
)]
struct Args {
    /// log2 of the sample counts (comma-separated).
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set,
          default_value = "24,26,28,30,32")]
    log2: Vec<u32>,
    /// Event-timed launches per measurement (the median is reported; at most 10 from 2^30).
    #[arg(long, default_value_t = 20)]
    reps: usize,
    #[command(flatten)]
    out: common::Output,
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Row {
    workload: &'static str,
    variant: String,
    log2: u32,
    ms: f64,
    estimate: f64,
}

/// Times the fused estimate of `mc` (reduced by Mean and by MeanVar) and, where the draws
/// fit, the stored variant, for every size; appends rows.
#[allow(clippy::too_many_arguments)]
fn workload<S: Sample, F: Transform<S, Out = f32>>(
    gpu: &Gpu,
    generate: &cudarc::driver::CudaFunction,
    name: &'static str,
    map: F,
    exact_map: bool,
    max_stored_log2: u32,
    args: &Args,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let stream = gpu.stream();
    let seed = 2009;
    let mean = MonteCarlo::<S, F>::new(map).seed(seed).reduce_with(Mean);
    let mv = MonteCarlo::<S, F>::new(map).seed(seed);
    let fused_mean = gpu.integrator(&mean)?;
    let fused_mv = gpu.integrator(&mv)?;
    // The fused kernels against the CPU backend (same draws, same tree), once.
    let small = 1u64 << 20;
    let (g, c) = (
        fused_mv.estimate(small)?,
        Cpu::new().monte_carlo(&mv, small)?,
    );
    // Same bits where the map is built from + - * / (the uniform mean); an `exp` is the
    // device's own on the GPU and libm's on the CPU, a few ulps apart per sample.
    let ok = if exact_map {
        format!("{g:?}") == format!("{c:?}")
    } else {
        (g.mean - c.mean).abs() <= 1e-6 * c.mean.abs()
    };
    assert!(ok, "{name}: GPU {g:?} != CPU {c:?}");
    let stored_reducer = gpu.reducer::<S, _>(mean.operator())?;
    let mut out_mean: CudaSlice<f64> = stream.alloc_zeros(1)?;
    let mut out_mv = stream.alloc_zeros::<cufold::ops::MeanVarValue>(1)?;
    for &l in &args.log2 {
        let n = 1u64 << l;
        let reps = if l >= 30 {
            args.reps.min(10)
        } else {
            args.reps
        };
        let ms = median_ms(stream, reps, || fused_mean.estimate_into(n, &mut out_mean))?;
        let fused = stream.clone_dtoh(&out_mean)?[0];
        rows.push(Row {
            workload: name,
            variant: "cufold fused (Mean)".into(),
            log2: l,
            ms,
            estimate: fused,
        });
        let ms = median_ms(stream, reps, || fused_mv.estimate_into(n, &mut out_mv))?;
        let est = stream.clone_dtoh(&out_mv)?[0];
        rows.push(Row {
            workload: name,
            variant: "cufold fused (MeanVar: mean ± SE)".into(),
            log2: l,
            ms,
            estimate: est.mean,
        });
        if l > max_stored_log2 {
            continue;
        }
        let draws = n * S::DIMS as u64;
        let mut x: CudaSlice<f32> = stream.alloc_zeros(draws as usize)?;
        let cfg = LaunchConfig {
            grid_dim: (132 * 16, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let gen_ms = median_ms(stream, reps, || {
            let mut launch = stream.launch_builder(generate);
            launch.arg(&mut x).arg(&draws).arg(&seed);
            // SAFETY: generate(float*, u64, u64) writes x[0..draws), and x holds draws floats.
            unsafe { launch.launch(cfg) }.expect("launching generate");
            Ok(())
        })?;
        // SAFETY: S is DIMS f32s (#[repr(C)] arrays), so the buffer is n samples.
        let samples = unsafe { x.transmute::<S>(n as usize) }.expect("n samples fit");
        let red_ms = median_ms(stream, reps, || {
            stored_reducer.reduce_into(&samples, &mut out_mean)
        })?;
        let stored = stream.clone_dtoh(&out_mean)?[0];
        assert!(
            stored.to_bits() == fused.to_bits(),
            "{name} 2^{l}: stored {stored} != fused {fused}"
        );
        rows.push(Row {
            workload: name,
            variant: "cufold stored: reduce only (Mean)".into(),
            log2: l,
            ms: red_ms,
            estimate: stored,
        });
        rows.push(Row {
            workload: name,
            variant: "cufold stored: generate + reduce".into(),
            log2: l,
            ms: gen_ms + red_ms,
            estimate: stored,
        });
    }
    Ok(())
}

fn main() -> Res<()> {
    let args = <Args as clap::Parser>::parse();
    let Some(gpu) = common::open_gpu() else {
        return Ok(());
    };
    println!("device: {}", gpu.device_name());
    let src = format!("{}\n{GENERATE}", cufold::cuda_header());
    let module = gpu
        .stream()
        .context()
        .load_module(cudarc::nvrtc::compile_ptx(src)?)?;
    let generate = module.load_function("generate")?;
    let mut rows = Vec::new();
    // (a): 4 bytes per stored sample, so 2^32 samples are 16 GiB; (b): 16 bytes, up to 2^30.
    workload::<f32, _>(
        &gpu, &generate, "uniform", Identity, true, 32, &args, &mut rows,
    )?;
    workload::<[f32; 4], _>(
        &gpu,
        &generate,
        "gauss4",
        Gauss4 { scale: 1.0 },
        false,
        30,
        &args,
        &mut rows,
    )?;
    let exact_gauss4 = (0.746_824_132_812_427_f64).powi(4);
    println!("exact: uniform 0.5, gauss4 {exact_gauss4:.9}");
    println!(
        "{:<8} {:<36} {:>5} {:>10} {:>14} {:>12}",
        "work", "variant", "log2", "ms", "samples/s", "estimate"
    );
    let mut json = Vec::new();
    for r in &rows {
        let rate = (1u64 << r.log2) as f64 / (r.ms * 1e-3);
        println!(
            "{:<8} {:<36} {:>5} {:>10.4} {:>14.4e} {:>12.9}",
            r.workload, r.variant, r.log2, r.ms, rate, r.estimate
        );
        json.push(serde_json::json!({
            "lib": "cufold", "workload": r.workload, "variant": r.variant, "log2": r.log2,
            "ms": r.ms, "samples_per_s": rate, "estimate": r.estimate,
        }));
    }
    if let Some(p) = &args.out.json {
        std::fs::write(p, serde_json::to_string_pretty(&json)?)?;
    }
    Ok(())
}
