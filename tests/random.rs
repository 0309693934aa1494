//! Statistical sanity of `cufold::random` on 10^6 draws (CPU only): uniforms stay inside
//! (0, 1) with the mean, variance and bin counts of U(0, 1); normals have the mean,
//! variance, skewness and kurtosis of N(0, 1); neighbouring draws and samples are
//! uncorrelated. Seeds are fixed, so the results are deterministic; every bound is five
//! standard errors or more.

use cufold::random::{fill_normal, fill_uniform, Draw};

const N: usize = 1_000_000;

/// N draws of `T`: samples `base..base + N/4`, draws 0..4 of each (so both the sample and
/// the draw coordinates vary, and one f32 block in four is used whole).
fn draws<T: Draw + Default>(seed: u64, base: u64, normal: bool) -> Vec<T> {
    let mut v = Vec::with_capacity(N);
    let mut four = [T::default(); 4];
    for i in 0..(N / 4) as u64 {
        if normal {
            fill_normal(seed, base + i, 0, &mut four);
        } else {
            fill_uniform(seed, base + i, 0, &mut four);
        }
        v.extend_from_slice(&four);
    }
    v
}

/// Mean, then the central moments 2, 3 and 4.
fn moments(x: &[f64]) -> (f64, f64, f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let (mut m2, mut m3, mut m4) = (0.0, 0.0, 0.0);
    for &v in x {
        let d = v - mean;
        m2 += d * d;
        m3 += d * d * d;
        m4 += d * d * d * d;
    }
    (mean, m2 / n, m3 / n, m4 / n)
}

/// Pearson correlation of `x[k]` and `y[k]`.
fn correlation(x: &[f64], y: &[f64]) -> f64 {
    let (mx, vx, _, _) = moments(x);
    let (my, vy, _, _) = moments(y);
    let c: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| (a - mx) * (b - my))
        .sum::<f64>()
        / x.len() as f64;
    c / (vx * vy).sqrt()
}

/// Draw `d` (0..4) of every sample, and the same for the next sample.
fn column(x: &[f64], d: usize) -> Vec<f64> {
    x.iter().skip(d).step_by(4).copied().collect()
}

fn check_uniform(name: &str, u: &[f64], lowest: f64) {
    assert_eq!(u.len(), N);
    let (min, max) = u
        .iter()
        .fold((1.0f64, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    assert!(
        min >= lowest && max <= 1.0 - lowest,
        "{name}: range [{min}, {max}]"
    );
    assert!(min > 0.0 && max < 1.0, "{name}: range [{min}, {max}]");
    let n = N as f64;
    let (mean, var, _, _) = moments(u);
    // Standard errors: sqrt(1/12 / n) for the mean; sqrt((1/80 - 1/144) / n) for the variance.
    assert!(
        (mean - 0.5).abs() < 5.0 * (1.0 / 12.0 / n).sqrt(),
        "{name}: mean {mean}"
    );
    let se_var = ((1.0 / 80.0 - 1.0 / 144.0) / n).sqrt();
    assert!(
        (var - 1.0 / 12.0).abs() < 5.0 * se_var,
        "{name}: variance {var}"
    );
    // 64 equal bins: chi-squared with 63 degrees of freedom (mean 63, sd 11.2).
    let mut bins = [0u64; 64];
    for &x in u {
        bins[(x * 64.0) as usize] += 1;
    }
    let e = n / 64.0;
    let chi2: f64 = bins.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
    assert!(
        chi2 < 63.0 + 5.0 * 126f64.sqrt(),
        "{name}: chi-squared {chi2}"
    );
    eprintln!("{name}: min {min:e} max {max} mean {mean:.6} var {var:.6} chi2(63) {chi2:.1}");
}

fn check_normal(name: &str, z: &[f64], bound: f64) {
    let n = N as f64;
    let (mean, var, m3, m4) = moments(z);
    let (skew, kurt) = (m3 / var.powf(1.5), m4 / (var * var));
    let worst = z.iter().fold(0.0f64, |m, &x| m.max(x.abs()));
    assert!(worst <= bound, "{name}: |z| reaches {worst}");
    // Standard errors: 1/sqrt(n), sqrt(2/n), sqrt(6/n), sqrt(24/n).
    assert!(mean.abs() < 5.0 / n.sqrt(), "{name}: mean {mean}");
    assert!(
        (var - 1.0).abs() < 5.0 * (2.0 / n).sqrt(),
        "{name}: variance {var}"
    );
    assert!(
        skew.abs() < 5.0 * (6.0 / n).sqrt(),
        "{name}: skewness {skew}"
    );
    assert!(
        (kurt - 3.0).abs() < 5.0 * (24.0 / n).sqrt(),
        "{name}: kurtosis {kurt}"
    );
    // The tails: P(|z| > 3) = 0.0026998.
    let p = 0.002_699_796;
    let tail = z.iter().filter(|x| x.abs() > 3.0).count() as f64;
    assert!(
        (tail - p * n).abs() < 5.0 * (p * (1.0 - p) * n).sqrt(),
        "{name}: {tail} beyond 3"
    );
    eprintln!(
        "{name}: mean {mean:.5} var {var:.5} skew {skew:.4} kurt {kurt:.4} max|z| {worst:.3}"
    );
}

fn check_independence(name: &str, x: &[f64]) {
    // Within a sample (draw 0 with 1, 1 with 2: the two halves of a Box–Muller pair and two
    // pairs), across blocks (f32 draws 3 and 0 of the next sample) and across samples.
    let cols: Vec<Vec<f64>> = (0..4).map(|d| column(x, d)).collect();
    let next0: Vec<f64> = cols[0][1..].to_vec();
    let pairs = [
        ("draws 0,1", correlation(&cols[0], &cols[1])),
        ("draws 1,2", correlation(&cols[1], &cols[2])),
        ("draws 2,3", correlation(&cols[2], &cols[3])),
        (
            "draw 3, next sample's 0",
            correlation(&cols[3][..cols[3].len() - 1], &next0),
        ),
        (
            "draw 0, next sample's 0",
            correlation(&cols[0][..cols[0].len() - 1], &next0),
        ),
    ];
    let bound = 5.0 / ((N / 4) as f64).sqrt();
    for (what, r) in pairs {
        assert!(r.abs() < bound, "{name}: correlation of {what} is {r}");
    }
}

#[test]
fn uniform_f32_moments_bins_and_range() {
    let u: Vec<f64> = draws::<f32>(0x5eed, 0, false)
        .into_iter()
        .map(f64::from)
        .collect();
    check_uniform("uniform f32", &u, 2f64.powi(-24));
    check_independence("uniform f32", &u);
}

#[test]
fn uniform_f64_moments_bins_and_range_at_sample_2_pow_40() {
    let u = draws::<f64>(u64::MAX - 12345, 1 << 40, false);
    check_uniform("uniform f64", &u, 2f64.powi(-53));
    check_independence("uniform f64", &u);
}

#[test]
fn normal_f32_moments_and_tails() {
    let z: Vec<f64> = draws::<f32>(7, 1 << 33, true)
        .into_iter()
        .map(f64::from)
        .collect();
    check_normal("normal f32", &z, 5.8);
    check_independence("normal f32", &z);
}

#[test]
fn normal_f64_moments_and_tails() {
    let z = draws::<f64>(0x0123_4567_89ab_cdef, 0, true);
    check_normal("normal f64", &z, 8.6);
    check_independence("normal f64", &z);
}

#[test]
fn uniforms_of_nearby_seeds_do_not_repeat_each_other() {
    // Seeds 0, 1, 2^32 and samples 0, 1, 2^32: any shared value among 3 x 3 x 4096 draws of
    // 2^52 possible f64 values would point at a layout bug (an ignored coordinate).
    let mut all = Vec::new();
    for seed in [0u64, 1, 1 << 32] {
        for sample in [0u64, 1, 1 << 32] {
            let mut u = vec![0.0f64; 4096];
            fill_uniform(seed, sample, 0, &mut u);
            all.extend(u.into_iter().map(f64::to_bits));
        }
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "repeated values across seeds and samples");
}
