//! The normal CDF by a scan (the seed chapter "Reduce and Scan", section 2.2): on a grid
//! `x_k = mu - 5 sigma + k h` over `[mu - 5 sigma, mu + 5 sigma]`, the trapezoid rule
//! integrates the density from the left end of the grid to each grid point, and an
//! inclusive scan of the trapezoids' areas gives the integral to every grid point at once:
//!
//! ```text
//! area_0 = 0,   area_k = h/2 (phi(x_k - h) + phi(x_k))   (k >= 1),
//! Phi(x_k) ~ Phi(mu - 5 sigma) + (area_0 + area_1 + ... + area_k)
//! ```
//!
//! The areas are computed on the way into the scan by an `ops::Mapped` transform whose input
//! is the grid itself (one pass over it, nothing stored between the map and the scan), with
//! `h`, `mu` and `sigma` compiled exactly into its CUDA source by `ops::cuda_f64`. The scan
//! is `ops::Sum`: f32 throughout for f32 grids, f64 throughout for f64 grids.
//!
//! The reference is `Phi(x) = erfc(-(x - mu) / (sigma sqrt 2)) / 2` with libm's erfc (a port
//! of FreeBSD's msun, within about 1 ulp; `check_erfc` checks the CDF built on it against
//! 40-digit values), and the integral from `mu - 5 sigma` misses
//! `Phi(mu - 5 sigma) = 2.87e-7`: the table adds that constant (from the reference) and
//! also shows the error without it. The trapezoid rule's own error at x is about
//! `h^2/12 |phi'(x)|`, largest at `x = mu ± sigma`: `h^2/12 * 0.242 / sigma^2`, 1.8e-12 at
//! 2^20 points, which is what f64 shows (its rounding is smaller still); f32 shows the
//! rounding of its sums past 2^16 points. The f64 error at 2^20 points must be within 1e-9
//! (checked at the end: the example fails otherwise).
//!
//! `cargo run --release --example normal_cdf`. Without a GPU it runs on the CPU backend
//! (the same canonical grouping, the same code) and says so in its first line.

use cufold::ops::{cuda_f64, CudaOp, Mapped, Sum, Transform};
use cufold::{Backend, Real, ScanKind};
use std::time::Instant;

// ---- the trapezoid areas, as a transform: a CPU half and a CUDA struct ------------------

/// What the transform needs of its float type beyond `cufold::Real`: `exp`, in Rust and in
/// CUDA C++ (the type's C++ name is `DeviceValue::cuda_name`).
trait Float: Real {
    const CUDA_EXP: &'static str;
    fn exp(self) -> Self;
}

impl Float for f32 {
    const CUDA_EXP: &'static str = "expf";
    fn exp(self) -> f32 {
        f32::exp(self)
    }
}

impl Float for f64 {
    const CUDA_EXP: &'static str = "exp";
    fn exp(self) -> f64 {
        f64::exp(self)
    }
}

/// Grid point `x_k` (at index k) to the area of the trapezoid on `[x_k - h, x_k]` under the
/// density of N(mu, sigma^2), and 0 at k = 0. The parameters are in `T`, the grid's type.
#[derive(Clone, Copy, Debug)]
struct Trapezoid<T> {
    h: T,
    half_h: T,
    mu: T,
    sigma: T,
    /// `1 / (sigma sqrt(2 pi))`, rounded once to `T`.
    scale: T,
}

impl<T: Float> Trapezoid<T> {
    fn new(h: f64, mu: f64, sigma: f64) -> Self {
        let scale = 1.0 / (sigma * (2.0 * std::f64::consts::PI).sqrt());
        let h = T::from_f64(h);
        Trapezoid {
            h,
            half_h: h * T::HALF,
            mu: T::from_f64(mu),
            sigma: T::from_f64(sigma),
            scale: T::from_f64(scale),
        }
    }

    /// The density, written as the CUDA half writes it (so that, `exp` aside, the two halves
    /// round alike).
    fn phi(&self, x: T) -> T {
        let z = (x - self.mu) / self.sigma;
        (T::zero() - z * z * T::HALF).exp() * self.scale
    }
}

impl<T: Float> Transform<T> for Trapezoid<T> {
    type Out = T;
    fn apply(&self, x: T, k: u64) -> T {
        if k == 0 {
            T::zero()
        } else {
            self.half_h * (self.phi(x - self.h) + self.phi(x))
        }
    }

    fn cuda(&self) -> CudaOp {
        let ty = T::cuda_name();
        // Exact: each parameter is a T, so its f64 value and then the cast back are exact.
        let c = |v: T| format!("(({ty}){})", cuda_f64(v.to_f64()));
        let name = format!("Trapezoid_{ty}");
        CudaOp {
            source: format!(
                "struct {name} {{
    typedef {ty} In;
    typedef {ty} Out;
    __device__ {ty} phi({ty} x) const {{
        {ty} z = (x - {mu}) / {sigma};
        return {exp}(({ty})0 - z * z * ({ty})0.5) * {scale};
    }}
    __device__ {ty} operator()({ty} x, unsigned long long k) const {{
        if (k == 0) return ({ty})0;
        return {half_h} * (phi(x - {h}) + phi(x));
    }}
}};",
                mu = c(self.mu),
                sigma = c(self.sigma),
                scale = c(self.scale),
                half_h = c(self.half_h),
                h = c(self.h),
                exp = T::CUDA_EXP,
            ),
            type_name: name,
        }
    }
}

// ---- the reference: erfc from libm ----------------------------------------------------

/// The CDF of N(mu, sigma^2) at x.
fn normal_cdf(x: f64, mu: f64, sigma: f64) -> f64 {
    0.5 * libm::erfc(-((x - mu) / sigma) * std::f64::consts::FRAC_1_SQRT_2)
}

// ---- the experiment ------------------------------------------------------------------

/// `max |phi'(z)| = phi(1)` for the standard normal density.
const PHI_PRIME_MAX: f64 = 0.24197072451914337;

/// The CDF on an n-point grid over `[mu - 5 sigma, mu + 5 sigma]`, in `T`: the prefixes and
/// the seconds the scan took.
fn trapezoid_cdf<T: Float>(
    backend: &Backend,
    grid: &[T],
    h: f64,
    mu: f64,
    sigma: f64,
) -> cufold::Result<(Vec<T>, f64)>
where
    Sum: cufold::ops::Operator<T, Acc = T, Out = T>,
{
    let op = Mapped::new(Trapezoid::<T>::new(h, mu, sigma), Sum);
    let t = Instant::now();
    let y = backend.scan(grid, op, ScanKind::Inclusive)?;
    Ok((y, t.elapsed().as_secs_f64()))
}

struct Row {
    with_offset: f64,
    worst_at: f64,
    without_offset: f64,
    ms: f64,
}

fn run<T: Float>(backend: &Backend, n: usize, mu: f64, sigma: f64) -> cufold::Result<Row>
where
    Sum: cufold::ops::Operator<T, Acc = T, Out = T>,
{
    let a = mu - 5.0 * sigma;
    let h = 10.0 * sigma / (n - 1) as f64;
    let grid: Vec<T> = (0..n).map(|k| T::from_f64(a + k as f64 * h)).collect();
    // Warm-up: on the GPU the first call compiles the kernel (or loads it from the cache).
    trapezoid_cdf(backend, &grid[..2], h, mu, sigma)?;
    let (y, secs) = trapezoid_cdf(backend, &grid, h, mu, sigma)?;
    let offset = normal_cdf(a, mu, sigma);
    let mut row = Row {
        with_offset: 0.0,
        worst_at: a,
        without_offset: 0.0,
        ms: secs * 1e3,
    };
    for (x, p) in grid.iter().zip(&y) {
        // The reference at the grid point as stored (an f32 grid point is rounded).
        let want = normal_cdf(x.to_f64(), mu, sigma);
        let err = (p.to_f64() + offset - want).abs();
        if err > row.with_offset {
            row.with_offset = err;
            row.worst_at = x.to_f64();
        }
        row.without_offset = row.without_offset.max((p.to_f64() - want).abs());
    }
    Ok(row)
}

fn check_erfc() {
    // Φ(z) for a few z: the f64 nearest to the value mpmath computes with 40 digits.
    const PHI: [(f64, f64); 8] = [
        (-5.0, 2.866515718791939e-7),
        (-4.0, 3.1671241833119924e-5),
        (-2.0, 2.275013194817921e-2),
        (-1.0, 1.5865525393145705e-1),
        (-0.25, 4.012936743170763e-1),
        (0.5, 6.914624612740131e-1),
        (3.0, 9.986501019683699e-1),
        (6.0, 9.999999990134123e-1),
    ];
    for (z, want) in PHI {
        let got = normal_cdf(z, 0.0, 1.0);
        assert!(
            (got - want).abs() <= 1e-15 && (got - want).abs() <= 1e-14 * want,
            "the erfc reference is off at {z}: {got:e} against {want:e}"
        );
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = Backend::auto();
    println!("backend: {}", backend.describe());
    check_erfc();
    let (mu, sigma) = (0.0, 1.0);
    println!(
        "Phi of N({mu}, {sigma}^2) on n grid points over [mu - 5 sigma, mu + 5 sigma], by an \
         inclusive Sum scan of trapezoid areas (ops::Mapped)"
    );
    println!(
        "error = max over the grid of |scan + Phi(mu - 5 sigma) - Phi|, Phi by libm's erfc; \
         Phi(mu - 5 sigma) = {:.6e} is added in f64",
        normal_cdf(mu - 5.0 * sigma, mu, sigma)
    );
    println!(
        "{:<5} {:>5} {:>10} | {:>10} {:>9} | {:>14} | {:>14} | {:>8}",
        "type", "n", "h", "error", "worst at", "rule's error", "without offset", "scan ms"
    );
    let mut f64_at_2_20 = f64::NAN;
    for ty in ["f32", "f64"] {
        for log_n in [10, 16, 20] {
            let n = 1usize << log_n;
            let row = match ty {
                "f32" => run::<f32>(&backend, n, mu, sigma)?,
                _ => run::<f64>(&backend, n, mu, sigma)?,
            };
            if ty == "f64" && log_n == 20 {
                f64_at_2_20 = row.with_offset;
            }
            let h = 10.0 * sigma / (n - 1) as f64;
            println!(
                "{ty:<5} {:>5} {h:>10.3e} | {:>10.2e} {:>9.4} | {:>14.2e} | {:>14.3e} | {:>8.2}",
                format!("2^{log_n}"),
                row.with_offset,
                row.worst_at,
                h * h / 12.0 * PHI_PRIME_MAX / (sigma * sigma),
                row.without_offset,
                row.ms
            );
        }
    }
    let upload = match backend {
        Backend::Gpu(_) => " (upload and download included)",
        Backend::Cpu(_) => "",
    };
    println!(
        "(rule's error: h^2/12 * max |phi'|, the trapezoid rule's own error at x = mu ± sigma; \
         scan ms: one Backend::scan{upload})"
    );
    if f64_at_2_20.is_nan() || f64_at_2_20 > 1e-9 {
        eprintln!("FAILED: the f64 error at 2^20 points is {f64_at_2_20:e}, above 1e-9");
        std::process::exit(1);
    }
    println!("ok: f64 at 2^20 points is within 1e-9 of the erfc CDF ({f64_at_2_20:.2e})");
    Ok(())
}
