//! A kernel of a user's own, built on `cufold::cuda_header()`: the exported warp- and
//! block-level building blocks (`cf::warp_reduce`, `cf::block_reduce`, `cf::BlockScan`)
//! compiled by NVRTC outside cufold and run, each block's result checked bit for bit
//! against the CPU backend's canonical tree and grouping of the same values.

mod common;

use common::{data, gpu, poison, seed, upload};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use cufold::ops::Sum;
use cufold::{Cpu, ScanKind};

const BLOCK: usize = 256;

const KERNEL: &str = r#"
extern "C" __global__ void __launch_bounds__(256)
user_kernel(const float* x, float* block_sums, float* warp_sums, float* prefixes) {
    typedef cf::Sum<float> Op;
    typedef cf::BlockScan<CF_SCAN_BLELLOCH, 256, Op, float> Scan;
    __shared__ float smem[256 / 32];
    __shared__ Scan::Storage storage;
    const Op op{};
    const unsigned i = blockIdx.x * 256 + threadIdx.x;
    const float v = x[i];
    // Each warp's 32 values, then the whole block's 256.
    const float w = cf::warp_reduce(op, v);
    if ((threadIdx.x & 31) == 0) warp_sums[i / 32] = w;
    const float b = cf::block_reduce<256>(op, v, smem);
    if (threadIdx.x == 0) block_sums[blockIdx.x] = b;
    // The block's exclusive scan from an empty prefix.
    Scan scan;
    scan.up(op, v, storage);
    bool has = false;
    const float p = scan.down(op, 0.0f, has, storage);
    prefixes[i] = has ? p : 0.0f;
}
"#;

#[test]
#[ignore = "needs a CUDA device"]
fn a_user_kernel_on_the_exported_building_blocks_computes_the_canonical_bits() {
    let s = seed("a_user_kernel_on_the_exported_building_blocks_computes_the_canonical_bits");
    let g = gpu();
    let (major, minor) = g.stream().context().compute_capability().unwrap();
    let src = format!("{}\n{KERNEL}", cufold::cuda_header());
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some(Box::leak(format!("sm_{major}{minor}").into_boxed_str())),
        options: vec!["--fmad=false".into(), "--std=c++17".into()],
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(src, opts).expect("the header compiles");
    let module = g.stream().context().load_module(ptx).unwrap();
    let f = module.load_function("user_kernel").unwrap();

    let blocks = 37;
    let host: Vec<f32> = data(blocks * BLOCK, s);
    let x = upload(g, &host);
    let mut block_sums = upload(g, &vec![poison::<f32>(); blocks]);
    let mut warp_sums = upload(g, &vec![poison::<f32>(); blocks * BLOCK / 32]);
    let mut prefixes = upload(g, &vec![poison::<f32>(); blocks * BLOCK]);
    let cfg = LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (BLOCK as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = g.stream().launch_builder(&f);
    launch
        .arg(&x)
        .arg(&mut block_sums)
        .arg(&mut warp_sums)
        .arg(&mut prefixes);
    // SAFETY: user_kernel takes (const float*, float*, float*, float*), with blocks * 256
    // inputs and prefixes, blocks sums and blocks * 8 warp sums, as allocated above.
    unsafe { launch.launch(cfg) }.unwrap();
    let block_sums = g.stream().clone_dtoh(&block_sums).unwrap();
    let warp_sums = g.stream().clone_dtoh(&warp_sums).unwrap();
    let prefixes = g.stream().clone_dtoh(&prefixes).unwrap();

    let cpu = Cpu::with_threads(1);
    for b in 0..blocks {
        let xs = &host[b * BLOCK..(b + 1) * BLOCK];
        let want = cpu.reduce(xs, Sum).unwrap();
        assert_eq!(block_sums[b].to_bits(), want.to_bits(), "block {b}");
        for w in 0..BLOCK / 32 {
            let want = cpu.reduce(&xs[w * 32..(w + 1) * 32], Sum).unwrap();
            let got = warp_sums[b * BLOCK / 32 + w];
            assert_eq!(got.to_bits(), want.to_bits(), "block {b} warp {w}");
        }
        let want = cpu.scan(xs, Sum, ScanKind::Exclusive).unwrap();
        for (i, (got, want)) in prefixes[b * BLOCK..(b + 1) * BLOCK]
            .iter()
            .zip(&want)
            .enumerate()
        {
            assert_eq!(got.to_bits(), want.to_bits(), "block {b} prefix {i}");
        }
    }
}
