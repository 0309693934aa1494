//! GPU test of kernels/random.cuh (through `cufold::cuda_header()`): a kernel draws with
//! `cf::draw_uniform` / `cf::draw_normal` and the scalar functions, on two launch shapes,
//! and every value is compared with `cufold::random`: words and uniforms bit for bit,
//! normals within the 16 ulps the module documents (the farthest distance seen is printed).
//! Needs a CUDA device, so ignored by a plain `cargo test`; run with `--include-ignored`.

mod common;
use common::*;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use cufold::laws::{Approx, Tolerance};
use cufold::random::*;

/// Sample `base + i` for i < n, grid-stride: 7 f32 and 5 f64 uniforms and normals from
/// draw `first`, and two scalar checks packed in `w`.
const KERNEL: &str = r#"
extern "C" __global__ void draws(unsigned long long seed, unsigned long long base, unsigned long long n,
                                 unsigned first, float* uf, double* ud, float* nf, double* nd,
                                 unsigned* w, float* n3) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long s = base + i;
        float a[7], c[7];
        double b[5], d[5];
        cf::draw_uniform(seed, s, a, first);
        cf::draw_uniform(seed, s, b, first);
        cf::draw_normal(seed, s, c, first);
        cf::draw_normal(seed, s, d, first);
        for (int k = 0; k < 7; ++k) { uf[i * 7 + k] = a[k]; nf[i * 7 + k] = c[k]; }
        for (int k = 0; k < 5; ++k) { ud[i * 5 + k] = b[k]; nd[i * 5 + k] = d[k]; }
        w[i] = cf::random_u32(seed, s, first + 11);
        n3[i] = cf::normal<float>(seed, s, first + 3);
    }
}"#;

fn ulps32(a: f32, b: f32) -> u64 {
    if a.is_sign_negative() != b.is_sign_negative() {
        return u64::MAX;
    }
    u64::from(a.to_bits().abs_diff(b.to_bits()))
}

fn ulps64(a: f64, b: f64) -> u64 {
    if a.is_sign_negative() != b.is_sign_negative() {
        return u64::MAX;
    }
    a.to_bits().abs_diff(b.to_bits())
}

#[test]
#[ignore = "needs a CUDA device"]
fn random_cuh_on_the_device_gives_the_cpu_draws() {
    let g = gpu();
    let opts = cudarc::nvrtc::CompileOptions {
        fmad: Some(false),
        options: vec!["--std=c++17".into()],
        ..Default::default()
    };
    let src = format!("{}\n{KERNEL}", cufold::cuda_header());
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(src, opts).unwrap();
    let module = g.stream().context().load_module(ptx).unwrap();
    let f = module.load_function("draws").unwrap();
    let n: usize = 1 << 16;
    let mut worst = (0u64, 0u64);
    let mut identical = 0usize;
    for (seed, base, first, grid, block) in [
        (0x5eed_u64, 0u64, 0u32, 64u32, 256u32),
        (u64::MAX, (1u64 << 40) - 1000, 5, 7, 96),
        (42, u64::MAX - n as u64 + 1, u32::MAX - 3, 1, 32),
    ] {
        let st = g.stream();
        let mut uf = st.alloc_zeros::<f32>(7 * n).unwrap();
        let mut ud = st.alloc_zeros::<f64>(5 * n).unwrap();
        let mut nf = st.alloc_zeros::<f32>(7 * n).unwrap();
        let mut nd = st.alloc_zeros::<f64>(5 * n).unwrap();
        let mut w = st.alloc_zeros::<u32>(n).unwrap();
        let mut n3 = st.alloc_zeros::<f32>(n).unwrap();
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        let n64 = n as u64;
        let mut launch = st.launch_builder(&f);
        launch
            .arg(&seed)
            .arg(&base)
            .arg(&n64)
            .arg(&first)
            .arg(&mut uf)
            .arg(&mut ud)
            .arg(&mut nf)
            .arg(&mut nd)
            .arg(&mut w)
            .arg(&mut n3);
        // SAFETY: draws(...) writes uf/nf[0..7n), ud/nd[0..5n), w/n3[0..n), the sizes
        // allocated above; the scalars match the kernel's parameter types.
        unsafe { launch.launch(cfg) }.unwrap();
        let (uf, ud) = (st.clone_dtoh(&uf).unwrap(), st.clone_dtoh(&ud).unwrap());
        let (nf, nd) = (st.clone_dtoh(&nf).unwrap(), st.clone_dtoh(&nd).unwrap());
        let (w, n3) = (st.clone_dtoh(&w).unwrap(), st.clone_dtoh(&n3).unwrap());
        let mut bad = Vec::new();
        for i in 0..n {
            let s = base.wrapping_add(i as u64);
            let (mut a, mut b, mut c, mut d) = ([0f32; 7], [0f64; 5], [0f32; 7], [0f64; 5]);
            fill_uniform(seed, s, first, &mut a);
            fill_uniform(seed, s, first, &mut b);
            fill_normal(seed, s, first, &mut c);
            fill_normal(seed, s, first, &mut d);
            for k in 0..7 {
                if uf[i * 7 + k].to_bits() != a[k].to_bits() {
                    bad.push(format!(
                        "sample {s} f32 uniform {k}: {} != {}",
                        uf[i * 7 + k],
                        a[k]
                    ));
                }
                let z = nf[i * 7 + k];
                worst.0 = worst.0.max(ulps32(z, c[k]));
                identical += usize::from(z.to_bits() == c[k].to_bits());
                if !z.approx_eq(&c[k], Tolerance::Ulps(16)) {
                    bad.push(format!("sample {s} f32 normal {k}: {z} vs {}", c[k]));
                }
            }
            for k in 0..5 {
                if ud[i * 5 + k].to_bits() != b[k].to_bits() {
                    bad.push(format!(
                        "sample {s} f64 uniform {k}: {} != {}",
                        ud[i * 5 + k],
                        b[k]
                    ));
                }
                let z = nd[i * 5 + k];
                worst.1 = worst.1.max(ulps64(z, d[k]));
                identical += usize::from(z.to_bits() == d[k].to_bits());
                if !z.approx_eq(&d[k], Tolerance::Ulps(16)) {
                    bad.push(format!("sample {s} f64 normal {k}: {z} vs {}", d[k]));
                }
            }
            if w[i] != random_u32(seed, s, first.wrapping_add(11)) {
                bad.push(format!("sample {s}: random_u32"));
            }
            let want = normal_f32(seed, s, first.wrapping_add(3));
            if !n3[i].approx_eq(&want, Tolerance::Ulps(16)) {
                bad.push(format!("sample {s}: normal<float> {} vs {want}", n3[i]));
            }
        }
        assert!(
            bad.is_empty(),
            "seed {seed:#x}: {} mismatches, the first:\n{}",
            bad.len(),
            bad[..bad.len().min(20)].join("\n")
        );
    }
    eprintln!(
        "uniforms and words identical; {identical} of {} normals identical; farthest: \
         f32 {} ulps, f64 {} ulps",
        3 * 12 * n,
        worst.0,
        worst.1
    );
}
