//! The seed paper's application: a Bayesian posterior's normalising constant and mean by
//! Monte Carlo integration, with samples drawn in the kernel (nothing stored), for a model
//! with a known answer, then a sweep over 1000 hyperparameter values with one compile.
//!
//! Model: k successes in n Bernoulli trials, θ ~ Beta(a, b). With θ ~ U(0,1) samples,
//! Z = E[θ^(k+a-1) (1-θ)^(n-k+b-1)] = B(k+a, n-k+b), and the posterior mean is
//! E[θ · w(θ)] / E[w(θ)] = (k+a) / (n+a+b). Runs on the GPU, or on the CPU backend (the
//! same samples and tree) without one.
//!
//! ```text
//! cargo run --release --example bayes
//! ```

use cufold::monte_carlo::MonteCarlo;
use cufold::{Cpu, Gpu};
use std::time::Instant;

/// θ -> θ^α (1 - θ)^β · θ^m: the unnormalised Beta posterior density (times θ^m, m = 0 for
/// Z and 1 for the posterior mean's numerator).
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Posterior {
    alpha: f64,
    beta: f64,
    m: f64,
}

#[cufold::transform]
impl Posterior {
    fn apply(&self, theta: f64) -> f64 {
        theta.powf(self.alpha + self.m) * (1.0 - theta).powf(self.beta)
    }
}

/// ln B(x, y) by Lanczos' ln Γ (g = 7, 9 terms): about 15 digits.
fn ln_beta(x: f64, y: f64) -> f64 {
    fn ln_gamma(z: f64) -> f64 {
        const C: [f64; 9] = [
            0.999_999_999_999_809_9,
            676.520_368_121_885_1,
            -1_259.139_216_722_402_8,
            771.323_428_777_653_1,
            -176.615_029_162_140_6,
            12.507_343_278_686_905,
            -0.138_571_095_265_720_12,
            9.984_369_578_019_572e-6,
            1.505_632_735_149_311_6e-7,
        ];
        let z = z - 1.0;
        let t = z + 7.5;
        let s = C[1..]
            .iter()
            .enumerate()
            .fold(C[0], |s, (i, c)| s + c / (z + i as f64 + 1.0));
        0.5 * (2.0 * std::f64::consts::PI).ln() + (z + 0.5) * t.ln() - t + s.ln()
    }
    ln_gamma(x) + ln_gamma(y) - ln_gamma(x + y)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (k, n) = (7.0, 20.0);
    let samples: u64 = 1 << 26;
    let gpu = Gpu::open(0);
    match &gpu {
        Ok(g) => println!("backend: GPU {}", g.device_name()),
        Err(e) => println!("backend: CPU (no GPU: {e})"),
    }
    let estimate = |mc: &MonteCarlo<f64, Posterior>, n: u64| match &gpu {
        Ok(g) => g.monte_carlo(mc, n),
        Err(_) => Cpu::new().monte_carlo(mc, n),
    };

    println!("\nk = {k} successes in n = {n} trials, prior Beta(1, 1), {samples} samples");
    let post = |a: f64, b: f64, m: f64| Posterior {
        alpha: k + a - 1.0,
        beta: n - k + b - 1.0,
        m,
    };
    let mc = MonteCarlo::<f64, _>::new(post(1.0, 1.0, 0.0)).seed(2009);
    let z = estimate(&mc, samples)?;
    let exact = ln_beta(k + 1.0, n - k + 1.0).exp();
    println!(
        "Z   = {:.6e} ± {:.1e}   exact B(k+1, n-k+1) = {exact:.6e}   ({:+.2} standard errors)",
        z.mean,
        z.std_error(),
        (z.mean - exact) / z.std_error()
    );
    // A fixed seed: the estimate is a fixed number, and it must be where the mathematics says.
    if ((z.mean - exact) / z.std_error()).abs() > 6.0 {
        return Err("Z is more than six standard errors from the exact value".into());
    }
    let num = estimate(&mc.map(post(1.0, 1.0, 1.0)), samples)?;
    println!(
        "E[θ | data] = {:.6}   exact (k+1)/(n+2) = {:.6}",
        num.mean / z.mean,
        (k + 1.0) / (n + 2.0)
    );

    // A sweep over 1000 prior hyperparameters: one kernel, new parameters per estimate.
    let per = 1u64 << 20;
    let grid: Vec<(f64, f64)> = (0..1000)
        .map(|i| (0.5 + (i % 40) as f64 * 0.25, 0.5 + (i / 40) as f64 * 0.25))
        .collect();
    let t = Instant::now();
    let mut worst: f64 = 0.0;
    match &gpu {
        Ok(g) => {
            let integrator = g.integrator(&mc)?;
            for &(a, b) in &grid {
                let z = integrator.with(&mc.map(post(a, b, 0.0)))?.estimate(per)?;
                let exact = ln_beta(k + a, n - k + b).exp();
                worst = worst.max(((z.mean - exact) / z.std_error()).abs());
            }
            println!(
                "\nsweep: 1000 priors x {per} samples, {:.3} ms per estimate, {} NVRTC compile(s) \
                 this run; largest |error| / standard error: {worst:.2}",
                t.elapsed().as_secs_f64() * 1e3 / 1000.0,
                g.kernel_stats().compiled
            );
        }
        Err(_) => {
            let cpu = Cpu::new();
            for &(a, b) in grid.iter().take(20) {
                let z = cpu.monte_carlo(&mc.map(post(a, b, 0.0)), per)?;
                let exact = ln_beta(k + a, n - k + b).exp();
                worst = worst.max(((z.mean - exact) / z.std_error()).abs());
            }
            println!(
                "\nsweep (CPU backend: the first 20 of 1000 priors) x {per} samples, {:.3} ms per \
                 estimate; largest |error| / standard error: {worst:.2}",
                t.elapsed().as_secs_f64() * 1e3 / 20.0
            );
        }
    }
    if worst > 6.0 {
        return Err(format!(
            "a prior's estimate is {worst:.1} standard errors from the exact value"
        )
        .into());
    }
    Ok(())
}
