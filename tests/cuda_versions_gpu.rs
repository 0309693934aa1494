//! The CUDA driver, NVRTC and the device, checked together when a `Gpu` handle is made: on a
//! working installation the check passes and kernels run; NVRTC of a newer major version than
//! the driver, or one that cannot compile for the device, is an `ErrorKind::NoCuda` error that
//! names both sides and what to install; a compile for an architecture NVRTC lacks says so.
//!
//! Needs a CUDA device (or NVRTC alone, for the compile-only test); run with
//! `cargo test --release --test cuda_versions_gpu -- --include-ignored --nocapture`.
//!
//! `an_nvrtc_newer_than_the_driver_works_or_says_what_to_install` asserts only where
//! `CUFOLD_EXPECT_NVRTC_NEWER=1` says that the NVRTC found is newer than the driver: for
//! example NVRTC 13.5 from pip on a driver of the 580 series (CUDA 13.0), with a directory
//! that holds it as `libnvrtc.so` first on the library path (cudarc loads `libnvrtc.so`
//! before the versioned names, so the toolkit's `libnvrtc.so` would win otherwise):
//!
//! ```sh
//! pip install --target /tmp/nvrtc "nvidia-cuda-nvrtc==13.5.*"
//! ln -sf libnvrtc.so.13 /tmp/nvrtc/nvidia/cu13/lib/libnvrtc.so
//! CUFOLD_EXPECT_NVRTC_NEWER=1 LD_LIBRARY_PATH=/tmp/nvrtc/nvidia/cu13/lib:$LD_LIBRARY_PATH \
//!   cargo test --release --test cuda_versions_gpu -- --include-ignored --nocapture newer
//! ```

use cufold::cudarc::driver::{sys as driver, CudaContext};
use cufold::cudarc::nvrtc::sys as nvrtc;
use cufold::{DiskCache, ErrorKind, Gpu, GpuOptions};

/// The driver's CUDA version as (major, minor).
fn driver_version() -> (i32, i32) {
    let mut raw = 0;
    // SAFETY: an out-parameter.
    let r = unsafe { driver::cuDriverGetVersion(&mut raw) };
    assert_eq!(r, driver::CUresult::CUDA_SUCCESS);
    (raw / 1000, raw % 1000 / 10)
}

/// NVRTC's version as (major, minor).
fn nvrtc_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: out-parameters.
    let r = unsafe { nvrtc::nvrtcVersion(&mut major, &mut minor) };
    assert_eq!(r, nvrtc::nvrtcResult::NVRTC_SUCCESS);
    (major, minor)
}

/// The architectures NVRTC compiles for.
fn nvrtc_archs() -> Vec<i32> {
    let mut n = 0;
    // SAFETY: an out-parameter, then a buffer of the size NVRTC gave.
    unsafe {
        assert_eq!(
            nvrtc::nvrtcGetNumSupportedArchs(&mut n),
            nvrtc::nvrtcResult::NVRTC_SUCCESS
        );
        let mut archs = vec![0; n as usize];
        assert_eq!(
            nvrtc::nvrtcGetSupportedArchs(archs.as_mut_ptr()),
            nvrtc::nvrtcResult::NVRTC_SUCCESS
        );
        archs
    }
}

/// A handle on device 0 that compiles its kernels (no disk cache), and the device's compute
/// capability.
fn open() -> (cufold::Result<Gpu>, (i32, i32)) {
    let ctx = CudaContext::new(0).expect("a CUDA device");
    let cc = ctx.compute_capability().unwrap();
    let opts = GpuOptions::default().disk_cache(DiskCache::Off);
    (Gpu::with_options(&ctx.default_stream(), opts), cc)
}

/// Kernels compiled by this NVRTC run on the device and give the right answers.
fn kernels_run(gpu: &Gpu) {
    let x = gpu.stream().clone_htod(&[1.0f32, 2.0, 3.0]).unwrap();
    assert_eq!(gpu.reduce(&x, cufold::ops::Sum).unwrap(), 6.0);
    let y = gpu
        .scan_host(&[1u64, 2, 3], cufold::ops::Sum, cufold::ScanKind::Exclusive)
        .unwrap();
    assert_eq!(y, [0, 1, 3]);
    assert!(gpu.kernel_stats().compiled >= 2, "{:?}", gpu.kernel_stats());
}

#[test]
#[ignore = "needs a CUDA device"]
fn the_installed_driver_nvrtc_and_device_pass_the_check() {
    let (driver, nvrtc) = (driver_version(), nvrtc_version());
    let (gpu, cc) = open();
    eprintln!("driver CUDA {driver:?}, NVRTC {nvrtc:?}, compute capability {cc:?}");
    let gpu = gpu.unwrap_or_else(|e| panic!("the installation is a working one: {e}"));
    assert!(nvrtc.0 <= driver.0, "NVRTC {nvrtc:?}, driver {driver:?}");
    // The handle compiles for the device's own architecture, which NVRTC lists.
    let arch = cc.0 * 10 + cc.1;
    assert!(nvrtc_archs().contains(&arch), "{:?}", nvrtc_archs());
    assert!(
        format!("{gpu:?}").contains(&format!("sm_{arch}")),
        "{gpu:?}"
    );
    kernels_run(&gpu);
}

/// Run with an NVRTC newer than the driver and `CUFOLD_EXPECT_NVRTC_NEWER=1` (the module's
/// doc says how). NVRTC of a newer major version is refused when the handle is made, with
/// both versions and the fix in the message. A newer minor version of the driver's major is
/// not refused up front: the CUBIN it makes loads under CUDA's minor-version compatibility
/// (NVRTC 13.5 on driver 580.159, CUDA 13.0, ran on an H200), so the kernels must run; should
/// a driver refuse one anyway, the error must name both versions and the fix.
#[test]
#[ignore = "needs a CUDA device and an NVRTC newer than the driver: set CUFOLD_EXPECT_NVRTC_NEWER=1 (see the module's doc)"]
fn an_nvrtc_newer_than_the_driver_works_or_says_what_to_install() {
    if std::env::var_os("CUFOLD_EXPECT_NVRTC_NEWER").is_none() {
        eprintln!("CUFOLD_EXPECT_NVRTC_NEWER is not set: nothing asserted (see the module's doc)");
        return;
    }
    let (driver, nvrtc) = (driver_version(), nvrtc_version());
    eprintln!("driver CUDA {driver:?}, NVRTC {nvrtc:?}");
    assert!(
        nvrtc > driver,
        "CUFOLD_EXPECT_NVRTC_NEWER is set, but NVRTC {nvrtc:?} is not newer than the driver's \
         CUDA {driver:?}: put the newer NVRTC first on LD_LIBRARY_PATH as libnvrtc.so"
    );
    let says_what_to_install = |e: &cufold::Error| {
        let msg = e.to_string();
        assert_eq!(e.kind(), ErrorKind::NoCuda, "{msg}");
        for want in [
            format!("NVRTC {}.{}", nvrtc.0, nvrtc.1),
            format!("supports CUDA {}.{}", driver.0, driver.1),
            "install an NVIDIA driver for CUDA".to_string(),
            format!("NVRTC of CUDA {}.{} or older", driver.0, driver.1),
            "LD_LIBRARY_PATH".to_string(),
        ] {
            assert!(msg.contains(&want), "missing {want:?} in: {msg}");
        }
        eprintln!("the error, as expected: {msg}");
    };
    let (gpu, _) = open();
    if nvrtc.0 > driver.0 {
        says_what_to_install(&gpu.expect_err("NVRTC of a newer major version than the driver"));
        return;
    }
    let gpu = gpu.unwrap_or_else(|e| panic!("a newer minor version is not refused up front: {e}"));
    let x = gpu.stream().clone_htod(&[1.0f32, 2.0, 3.0]).unwrap();
    match gpu.reduce(&x, cufold::ops::Sum) {
        Ok(total) => {
            assert_eq!(total, 6.0);
            kernels_run(&gpu);
            eprintln!("NVRTC {nvrtc:?} on driver CUDA {driver:?}: kernels load and run");
        }
        Err(e) => says_what_to_install(&e),
    }
}

/// A compile for an architecture NVRTC does not compile for (no device needed) names the
/// architecture and NVRTC's range instead of NVRTC's bare refusal.
#[test]
#[ignore = "needs NVRTC (a CUDA machine)"]
fn a_compile_for_an_architecture_nvrtc_lacks_says_so() {
    use cufold::ops::{Operator, Sum};
    let archs = nvrtc_archs();
    let (lowest, highest) = (*archs.iter().min().unwrap(), *archs.iter().max().unwrap());
    let shape = cufold::reduce::ReduceShape::for_sizes(4, 256).unwrap();
    let op = <Sum as Operator<f32>>::cuda(&Sum);
    let compile = |arch: &str| cufold::reduce::compile_kernel(&op, 0, &shape, true, arch);
    assert!(!compile(&format!("sm_{highest}")).unwrap().is_empty());
    let too_old = compile("sm_20").expect_err("sm_20");
    assert_eq!(too_old.kind(), ErrorKind::InvalidConfig, "{too_old}");
    let msg = too_old.to_string();
    assert!(
        msg.contains("sm_20") && msg.contains(&format!("oldest architecture is sm_{lowest}")),
        "{msg}"
    );
    let too_new = compile("sm_990").expect_err("sm_990");
    assert_eq!(too_new.kind(), ErrorKind::InvalidConfig, "{too_new}");
    let msg = too_new.to_string();
    assert!(
        msg.contains("sm_990")
            && msg.contains(&format!(
                "newest architecture it compiles for is sm_{highest}"
            )),
        "{msg}"
    );
}
