//! Whether the CUDA pieces found at run time can work together, checked once per process
//! (the versions) and once per handle (the architecture), with errors that say what to
//! install: a CUDA driver older than NVRTC's major version, an NVRTC that cannot compile for
//! the device, a kernel the driver refuses to load, and NCCL present only as `libnccl.so.2`.
//!
//! The decisions are pure functions of the versions, lists and names (unit-tested without a
//! GPU); the few functions that ask the libraries only gather their inputs.

use crate::error::{Error, ErrorKind, Result};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A CUDA version, major and minor (13.0 is `CudaVersion(13, 0)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CudaVersion(pub(crate) i32, pub(crate) i32);

impl CudaVersion {
    /// The version `cuDriverGetVersion` writes as one number (13000 is 13.0, 12080 is 12.8).
    pub(crate) fn from_driver(raw: i32) -> CudaVersion {
        CudaVersion(raw / 1000, raw % 1000 / 10)
    }
}

impl std::fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// The oldest Linux driver series that loads code of CUDA `major`.x (CUDA's minor-version
/// compatibility), where known.
fn driver_series_for(major: i32) -> Option<&'static str> {
    match major {
        11 => Some("450"),
        12 => Some("525"),
        13 => Some("580"),
        _ => None,
    }
}

/// The pip wheel that ships NVRTC of CUDA `v` (`nvidia-cuda-nvrtc-cu12` up to CUDA 12,
/// `nvidia-cuda-nvrtc` from CUDA 13), and the folder of its library inside site-packages.
fn nvrtc_wheel(v: CudaVersion) -> (String, &'static str) {
    if v.0 >= 13 {
        (
            format!("nvidia-cuda-nvrtc=={}.{}.*", v.0, v.1),
            "nvidia/cu13/lib",
        )
    } else {
        (
            format!("nvidia-cuda-nvrtc-cu{}=={}.{}.*", v.0, v.0, v.1),
            "nvidia/cuda_nvrtc/lib",
        )
    }
}

/// How a user makes another NVRTC the one cufold loads (`major`: its CUDA major version,
/// where known).
fn nvrtc_path_advice(major: Option<i32>) -> String {
    let major = major.map_or("<its major version>".to_string(), |m| m.to_string());
    format!(
        "cufold loads NVRTC under the first name the dynamic loader finds, libnvrtc.so before \
         the versioned names (libnvrtc.so.13, libnvrtc.so.12, ...), each looked for on \
         LD_LIBRARY_PATH and then in the system's directories; so link the NVRTC you want as \
         libnvrtc.so in a directory first on LD_LIBRARY_PATH: `mkdir -p $HOME/.local/lib/nvrtc \
         && ln -sf <its directory>/libnvrtc.so.{major} $HOME/.local/lib/nvrtc/libnvrtc.so && \
         export LD_LIBRARY_PATH=$HOME/.local/lib/nvrtc:$LD_LIBRARY_PATH`"
    )
}

/// The check made before a device's first kernel: `None` where the driver loads what this
/// NVRTC compiles, else the message of the error. Code of a newer major version than the
/// driver's never loads; a newer minor version of the same major does (CUDA's minor-version
/// compatibility: an NVRTC 13.5 CUBIN runs on a driver for CUDA 13.0), so it is not refused
/// here, and a kernel the driver does refuse is explained by [`load_refused_message`].
pub(crate) fn driver_too_old(
    driver: CudaVersion,
    nvrtc: CudaVersion,
    nvrtc_file: Option<&Path>,
) -> Option<String> {
    (nvrtc.0 > driver.0).then(|| version_message(driver, nvrtc, nvrtc_file, None))
}

/// The message for NVRTC `nvrtc` newer than the driver's CUDA `driver`; `refused` is the
/// driver's error for a kernel it would not load, when there was one.
fn version_message(
    driver: CudaVersion,
    nvrtc: CudaVersion,
    nvrtc_file: Option<&Path>,
    refused: Option<&str>,
) -> String {
    let at = nvrtc_file.map_or(String::new(), |p| format!(" ({})", p.display()));
    let what = match refused {
        Some(code) => format!(
            "the CUDA driver refused a kernel that NVRTC {nvrtc}{at} compiled ({code}): NVRTC \
             is newer than the driver, which supports CUDA {driver}"
        ),
        None => format!(
            "NVRTC {nvrtc}{at} is newer than the CUDA driver, which supports CUDA {driver}: \
             code NVRTC {}.x compiles cannot be loaded by a driver for CUDA {}.x",
            nvrtc.0, driver.0
        ),
    };
    let need = if refused.is_some() {
        nvrtc
    } else {
        CudaVersion(nvrtc.0, 0)
    };
    let series = driver_series_for(need.0)
        .filter(|_| need.1 == 0)
        .map_or(String::new(), |s| format!(" (driver {s} or later)"));
    let (wheel, folder) = nvrtc_wheel(driver);
    format!(
        "{what}. Either install an NVIDIA driver for CUDA {need} or newer{series}, or use an \
         NVRTC of CUDA {driver} or older (pip: `pip install \"{wheel}\"`, whose library is in \
         site-packages/{folder}): {}",
        nvrtc_path_advice(Some(driver.0))
    )
}

/// The message for a kernel the driver refused to load with `code`, or `None` where the
/// code does not say the kernel was made for a newer CUDA or NVRTC is not newer than the
/// driver (the driver's own error then stands).
pub(crate) fn load_refused_message(
    code: cudarc::driver::sys::CUresult,
    driver: CudaVersion,
    nvrtc: CudaVersion,
    nvrtc_file: Option<&Path>,
) -> Option<String> {
    use cudarc::driver::sys::CUresult as R;
    let versioned = matches!(
        code,
        R::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
            | R::CUDA_ERROR_NO_BINARY_FOR_GPU
            | R::CUDA_ERROR_INVALID_PTX
            | R::CUDA_ERROR_INVALID_IMAGE
    );
    (versioned && nvrtc > driver)
        .then(|| version_message(driver, nvrtc, nvrtc_file, Some(&format!("{code:?}"))))
}

/// Compute capability `(major, minor)` as NVRTC's architecture number (9.0 is 90).
pub(crate) fn arch_number((major, minor): (i32, i32)) -> i32 {
    major * 10 + minor
}

/// The architecture number in `sm_XY` or `compute_XY` (with an optional letter suffix such
/// as `sm_90a`), or in an option `--gpu-architecture=sm_XY`.
pub(crate) fn parse_arch(s: &str) -> Option<i32> {
    let s = s.strip_prefix("--gpu-architecture=").unwrap_or(s);
    let digits = s
        .strip_prefix("sm_")
        .or_else(|| s.strip_prefix("compute_"))?;
    let digits = digits.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    digits.parse().ok().filter(|n| *n > 0)
}

/// Why NVRTC cannot compile for a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArchProblem {
    /// The device is newer than every architecture NVRTC knows; `highest` is its newest.
    TooNew { highest: i32 },
    /// The device is older than every architecture NVRTC still compiles for; `lowest` is
    /// its oldest.
    TooOld { lowest: i32 },
    /// Neither: the list has a gap where the device is (and no lower architecture of the
    /// same major version); `highest` is NVRTC's newest.
    Unlisted { highest: i32 },
}

/// The architecture to compile for on a device of architecture number `device`, given
/// NVRTC's list `supported`: the device's own where listed, else the newest listed one of
/// the same major version and a lower minor (a CUBIN for X.y runs on every X.z with z ≥ y),
/// else why none will do.
pub(crate) fn choose_arch(device: i32, supported: &[i32]) -> std::result::Result<i32, ArchProblem> {
    if supported.contains(&device) {
        return Ok(device);
    }
    supported
        .iter()
        .copied()
        .filter(|&a| a / 10 == device / 10 && a < device)
        .max()
        .ok_or_else(|| arch_problem(device, supported))
}

/// Why NVRTC, whose list `supported` does not hold `arch`, cannot compile for exactly it.
pub(crate) fn arch_problem(arch: i32, supported: &[i32]) -> ArchProblem {
    let (Some(&lowest), Some(&highest)) = (supported.iter().min(), supported.iter().max()) else {
        return ArchProblem::Unlisted { highest: 0 };
    };
    if arch > highest {
        ArchProblem::TooNew { highest }
    } else if arch < lowest {
        ArchProblem::TooOld { lowest }
    } else {
        ArchProblem::Unlisted { highest }
    }
}

/// The first CUDA version whose NVRTC compiles for architecture `arch`, where known.
fn first_cuda_for(arch: i32) -> Option<&'static str> {
    Some(match arch {
        80 => "11.0",
        86 => "11.1",
        87 => "11.4",
        89 | 90 => "11.8",
        100 | 120 => "12.8",
        103 | 121 => "12.9",
        110 => "13.0",
        _ => return None,
    })
}

/// The message for NVRTC `nvrtc`, which cannot compile for `device` (a device's name, or
/// just "architecture sm_XY" for a compile with no device) of architecture `arch`.
pub(crate) fn arch_message(
    device: &str,
    arch: i32,
    problem: ArchProblem,
    nvrtc: CudaVersion,
    nvrtc_file: Option<&Path>,
) -> String {
    let at = nvrtc_file.map_or(String::new(), |p| format!(" ({})", p.display()));
    let head = format!("NVRTC {nvrtc}{at} cannot compile for {device} (sm_{arch})");
    match problem {
        ArchProblem::TooNew { highest } | ArchProblem::Unlisted { highest } => {
            let since = first_cuda_for(arch).map_or(String::new(), |v| {
                format!(" (CUDA {v} or later compiles for sm_{arch})")
            });
            format!(
                "{head}: the newest architecture it compiles for is sm_{highest}. Use a newer \
                 NVRTC{since}, and a driver that supports its CUDA major version: from the CUDA \
                 toolkit or pip's `nvidia-cuda-nvrtc` wheel (`nvidia-cuda-nvrtc-cu12` for CUDA \
                 12); {}",
                nvrtc_path_advice(None)
            )
        }
        ArchProblem::TooOld { lowest } => format!(
            "{head}: this NVRTC no longer compiles for it (its oldest architecture is \
             sm_{lowest}). Use an older NVRTC that still does (CUDA 12.x compiles for sm_50 and \
             later: pip's `nvidia-cuda-nvrtc-cu12`, whose library is in \
             site-packages/nvidia/cuda_nvrtc/lib); {}",
            nvrtc_path_advice(Some(12))
        ),
    }
}

/// What this process's NVRTC is: its version, the architectures it compiles for (empty where
/// it cannot say) and the file it was loaded from (where the system tells). Asked once.
pub(crate) struct NvrtcInfo {
    pub(crate) version: CudaVersion,
    pub(crate) archs: Vec<i32>,
    pub(crate) file: Option<PathBuf>,
}

/// NVRTC's [`NvrtcInfo`], after [`super::jit::probe_nvrtc`] found it present.
pub(crate) fn nvrtc_info() -> &'static NvrtcInfo {
    static INFO: OnceLock<NvrtcInfo> = OnceLock::new();
    INFO.get_or_init(|| {
        let (major, minor) = super::jit::nvrtc_version();
        // An NVRTC older than CUDA 11.2 has no nvrtcGetSupportedArchs, and cudarc panics on
        // a missing function: such an NVRTC gets no architecture check.
        let archs = std::panic::catch_unwind(supported_archs).unwrap_or_default();
        NvrtcInfo {
            version: CudaVersion(major, minor),
            archs,
            file: loaded_file(&format!(
                "{}nvrtc{}",
                std::env::consts::DLL_PREFIX,
                std::env::consts::DLL_SUFFIX
            )),
        }
    })
}

fn supported_archs() -> Vec<i32> {
    use cudarc::nvrtc::sys;
    let mut n = 0;
    // SAFETY: an out-parameter.
    if unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) } != sys::nvrtcResult::NVRTC_SUCCESS
        || n <= 0
    {
        return Vec::new();
    }
    let mut archs = vec![0; n as usize];
    // SAFETY: `archs` has room for the `n` numbers NVRTC said it has.
    if unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) } != sys::nvrtcResult::NVRTC_SUCCESS
    {
        return Vec::new();
    }
    archs
}

/// The CUDA version the driver supports (`cuDriverGetVersion`), asked once; `None` where the
/// driver does not answer.
pub(crate) fn driver_version() -> Option<CudaVersion> {
    static VERSION: OnceLock<Option<CudaVersion>> = OnceLock::new();
    *VERSION.get_or_init(|| {
        let mut raw = 0;
        // SAFETY: an out-parameter; the driver was found present before any handle exists.
        let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut raw) };
        (r == cudarc::driver::sys::CUresult::CUDA_SUCCESS && raw > 0)
            .then(|| CudaVersion::from_driver(raw))
    })
}

/// The architecture a handle on a device compiles for (`sm_XY`), or the error that says why
/// the driver, NVRTC and the device cannot work together. `name` is the device's name and
/// `cc` its compute capability.
pub(crate) fn check_device(name: &str, cc: (i32, i32)) -> Result<String> {
    let nvrtc = nvrtc_info();
    if let Some(driver) = driver_version() {
        if let Some(msg) = driver_too_old(driver, nvrtc.version, nvrtc.file.as_deref()) {
            return Err(Error::new(ErrorKind::NoCuda, msg));
        }
    }
    let device = arch_number(cc);
    if nvrtc.archs.is_empty() {
        return Ok(format!("sm_{device}"));
    }
    match choose_arch(device, &nvrtc.archs) {
        Ok(arch) => Ok(format!("sm_{arch}")),
        Err(problem) => Err(Error::new(
            ErrorKind::NoCuda,
            arch_message(
                &format!("{name} (compute capability {}.{})", cc.0, cc.1),
                device,
                problem,
                nvrtc.version,
                nvrtc.file.as_deref(),
            ),
        )),
    }
}

/// The error for a kernel module the driver refused with `e`: the version mismatch where
/// that explains it, else the driver's error (`what` says what was loading).
pub(crate) fn load_error(what: &str, e: cudarc::driver::DriverError) -> Error {
    let nvrtc = nvrtc_info();
    match driver_version()
        .and_then(|d| load_refused_message(e.0, d, nvrtc.version, nvrtc.file.as_deref()))
    {
        Some(msg) => Error::new(ErrorKind::NoCuda, msg).with_source(e),
        None => Error::driver(what, e),
    }
}

/// The error for NVRTC refusing `options` when their architecture is one it does not
/// compile for (a compile with no device, such as `reduce::compile_kernel`); `None` where
/// the architecture is not the reason.
pub(crate) fn compile_arch_error(options: &[String]) -> Option<Error> {
    let arch = options.iter().find_map(|o| {
        o.starts_with("--gpu-architecture=")
            .then(|| parse_arch(o))
            .flatten()
    })?;
    let nvrtc = nvrtc_info();
    if nvrtc.archs.is_empty() || nvrtc.archs.contains(&arch) {
        return None;
    }
    // Compiling for exactly this architecture was asked: a lower one is no answer.
    let problem = arch_problem(arch, &nvrtc.archs);
    Some(Error::new(
        ErrorKind::InvalidConfig,
        arch_message(
            &format!("architecture sm_{arch}"),
            arch,
            problem,
            nvrtc.version,
            nvrtc.file.as_deref(),
        ),
    ))
}

/// The file this process loaded under a name that starts with `prefix` (such as
/// `libnvrtc.so`), from the system's list of mapped files (Linux); `None` elsewhere.
pub(crate) fn loaded_file(prefix: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    mapped_file(&maps, prefix)
}

/// The first file in `maps` (the text of `/proc/self/maps`) whose name starts with `prefix`.
fn mapped_file(maps: &str, prefix: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(Path::new)
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .map(Path::to_path_buf)
}

/// NCCL under the names cudarc looks for, or only as `libnccl.so.2`: the decision and the
/// messages (pure, tested in every build), and the probe of cufold's `nccl` feature.
pub(crate) mod nccl {
    #![cfg_attr(not(feature = "nccl"), allow(dead_code))]
    use std::path::{Path, PathBuf};

    /// What the NCCL probe found.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(crate) enum NcclFound {
        /// A name cudarc looks for loads: cudarc will find NCCL.
        Loadable,
        /// None of cudarc's names loads, but `libnccl.so.2` does (pip's and PyTorch's NCCL).
        OnlySoname2,
        /// No NCCL at all.
        Missing,
    }

    /// The name NCCL has where pip's `nvidia-nccl-cu12`/`-cu13` wheels and PyTorch ship it.
    pub(crate) const NCCL_SONAME: &str = "libnccl.so.2";

    /// What loads, given `names` (cudarc's file names for NCCL, in its order) and `loads` (whether
    /// a file name loads).
    pub(crate) fn nccl_found(names: &[String], loads: impl Fn(&str) -> bool) -> NcclFound {
        if names.iter().any(|n| loads(n)) {
            NcclFound::Loadable
        } else if loads(NCCL_SONAME) {
            NcclFound::OnlySoname2
        } else {
            NcclFound::Missing
        }
    }

    /// The directories of `LD_LIBRARY_PATH`'s value `ld_path` (empty entries skipped).
    pub(crate) fn library_path_dirs(ld_path: &str) -> Vec<PathBuf> {
        ld_path
            .split(':')
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect()
    }

    /// The path `ldconfig -p` (its output `listing`) gives for the file name `name`.
    pub(crate) fn ldconfig_path(listing: &str, name: &str) -> Option<PathBuf> {
        listing.lines().find_map(|l| {
            let (left, path) = l.split_once("=>")?;
            (left.split_whitespace().next() == Some(name)).then(|| PathBuf::from(path.trim()))
        })
    }

    /// Where `libnccl.so.2` is: the first of `dirs` that holds it (`exists` says whether a path
    /// exists), else the path `ldconfig -p` lists (`listing`), else the file the process mapped
    /// (`mapped`).
    pub(crate) fn locate_soname2(
        dirs: &[PathBuf],
        exists: impl Fn(&Path) -> bool,
        listing: Option<&str>,
        mapped: Option<PathBuf>,
    ) -> Option<PathBuf> {
        dirs.iter()
            .map(|d| d.join(NCCL_SONAME))
            .find(|p| exists(p))
            .or_else(|| listing.and_then(|l| ldconfig_path(l, NCCL_SONAME)))
            .or(mapped)
    }

    /// The message for NCCL found only as `libnccl.so.2`, at `found` where known.
    pub(crate) fn nccl_soname2_message(found: Option<&Path>) -> String {
        let link = "$HOME/.local/lib/cufold-nccl";
        let (at, target) = match found {
            Some(p) => (format!(" at {}", p.display()), p.display().to_string()),
            None => (
                " (its directory was found neither on LD_LIBRARY_PATH nor in `ldconfig -p`: \
                 `find / -name libnccl.so.2` shows it)"
                    .to_string(),
                "<its directory>/libnccl.so.2".to_string(),
            ),
        };
        format!(
            "libnccl could not be loaded under the names cudarc looks for (libnccl.so, \
             libnccl.so.13, libnccl.so.12, ...), but NCCL is installed as libnccl.so.2{at}, the \
             name pip's nvidia-nccl-cu12/nvidia-nccl-cu13 wheels and PyTorch give it. Give it a \
             name cudarc looks for, in a directory on LD_LIBRARY_PATH, before the program starts \
             (the loader reads LD_LIBRARY_PATH when a process starts): `mkdir -p {link} && ln -sf \
             {target} {link}/libnccl.so && export LD_LIBRARY_PATH={link}:$LD_LIBRARY_PATH`"
        )
    }

    /// The message for no NCCL at all.
    pub(crate) fn nccl_missing_message() -> String {
        "libnccl could not be loaded: install NCCL, either NVIDIA's libnccl2 and libnccl-dev \
         packages (libnccl-dev adds the name libnccl.so that cudarc looks for) or pip's \
         nvidia-nccl-cu13 or nvidia-nccl-cu12 wheel, whose site-packages/nvidia/nccl/lib/libnccl.so.2 \
         must then be linked as libnccl.so in a directory on LD_LIBRARY_PATH (`ln -s \
         <its directory>/libnccl.so.2 <a directory on LD_LIBRARY_PATH>/libnccl.so`)"
            .to_string()
    }

    /// Checks that cudarc will find libnccl (it panics where it cannot), or says what to do:
    /// link `libnccl.so.2` under a name cudarc looks for, or install NCCL.
    pub(crate) fn probe() -> crate::error::Result<()> {
        use crate::error::{Error, ErrorKind};
        // SAFETY: loading NCCL runs no initialisation code that cudarc's own loading would
        // not run; the handle is dropped at once.
        let loads = |file: &str| unsafe { libloading::Library::new(file) }.is_ok();
        match nccl_found(&crate::gpu::library_file_names("nccl"), loads) {
            NcclFound::Loadable => Ok(()),
            NcclFound::Missing => Err(Error::new(ErrorKind::NoCuda, nccl_missing_message())),
            NcclFound::OnlySoname2 => {
                let dirs = library_path_dirs(&std::env::var("LD_LIBRARY_PATH").unwrap_or_default());
                let listing = ["/sbin/ldconfig", "ldconfig"].iter().find_map(|cmd| {
                    let out = std::process::Command::new(cmd).arg("-p").output().ok()?;
                    out.status
                        .success()
                        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
                });
                // Where neither says, the file the loader took (held while it is read).
                // SAFETY: as above.
                let held = unsafe { libloading::Library::new(NCCL_SONAME) }.ok();
                let mapped = held.as_ref().and_then(|_| super::loaded_file(NCCL_SONAME));
                drop(held);
                let found = locate_soname2(&dirs, |p| p.exists(), listing.as_deref(), mapped);
                Err(Error::new(
                    ErrorKind::NoCuda,
                    nccl_soname2_message(found.as_deref()),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::nccl::*;
    use super::*;
    use cudarc::driver::sys::CUresult as R;

    #[test]
    fn driver_versions_read_as_major_and_minor() {
        assert_eq!(CudaVersion::from_driver(13000), CudaVersion(13, 0));
        assert_eq!(CudaVersion::from_driver(12080), CudaVersion(12, 8));
        assert_eq!(CudaVersion::from_driver(12040), CudaVersion(12, 4));
        assert_eq!(CudaVersion::from_driver(11020), CudaVersion(11, 2));
        assert!(CudaVersion(13, 0) > CudaVersion(12, 9));
        assert!(CudaVersion(13, 5) > CudaVersion(13, 0));
        assert_eq!(CudaVersion(12, 4).to_string(), "12.4");
    }

    #[test]
    fn an_nvrtc_of_a_newer_major_version_than_the_driver_is_refused() {
        let file = Path::new("/opt/cuda-13.0/lib64/libnvrtc.so.13");
        let msg = driver_too_old(CudaVersion(12, 4), CudaVersion(13, 0), Some(file))
            .expect("NVRTC 13 on a driver for CUDA 12.4");
        for want in [
            "NVRTC 13.0 (/opt/cuda-13.0/lib64/libnvrtc.so.13)",
            "supports CUDA 12.4",
            "driver for CUDA 13.0 or newer (driver 580 or later)",
            "pip install \"nvidia-cuda-nvrtc-cu12==12.4.*\"",
            "site-packages/nvidia/cuda_nvrtc/lib",
            "libnvrtc.so.12 $HOME/.local/lib/nvrtc/libnvrtc.so",
            "LD_LIBRARY_PATH=$HOME/.local/lib/nvrtc:$LD_LIBRARY_PATH",
        ] {
            assert!(msg.contains(want), "missing {want:?} in: {msg}");
        }
        let no_file = driver_too_old(CudaVersion(11, 8), CudaVersion(12, 2), None).unwrap();
        assert!(no_file.starts_with("NVRTC 12.2 is newer"), "{no_file}");
        assert!(no_file.contains("(driver 525 or later)"), "{no_file}");
    }

    #[test]
    fn an_nvrtc_of_the_drivers_major_version_is_not_refused_up_front() {
        // Minor-version compatibility: NVRTC 13.5's CUBIN loads on a driver for CUDA 13.0.
        for (driver, nvrtc) in [((13, 0), (13, 5)), ((13, 0), (13, 0)), ((13, 2), (12, 9))] {
            let (d, n) = (
                CudaVersion(driver.0, driver.1),
                CudaVersion(nvrtc.0, nvrtc.1),
            );
            assert_eq!(driver_too_old(d, n, None), None, "{d} {n}");
        }
    }

    #[test]
    fn a_refused_kernel_from_a_newer_nvrtc_says_which_driver_to_install() {
        let (d, n) = (CudaVersion(13, 0), CudaVersion(13, 5));
        for code in [
            R::CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
            R::CUDA_ERROR_NO_BINARY_FOR_GPU,
            R::CUDA_ERROR_INVALID_PTX,
            R::CUDA_ERROR_INVALID_IMAGE,
        ] {
            let msg = load_refused_message(code, d, n, None).expect("a versioned refusal");
            for want in [
                format!("{code:?}"),
                "NVRTC 13.5".into(),
                "supports CUDA 13.0".into(),
                "driver for CUDA 13.5 or newer".into(),
                "pip install \"nvidia-cuda-nvrtc==13.0.*\"".into(),
                "site-packages/nvidia/cu13/lib".into(),
            ] {
                assert!(msg.contains(&want), "missing {want:?} in: {msg}");
            }
        }
        // Another error, or an NVRTC no newer than the driver: the driver's error stands.
        assert_eq!(
            load_refused_message(R::CUDA_ERROR_OUT_OF_MEMORY, d, n, None),
            None
        );
        assert_eq!(
            load_refused_message(R::CUDA_ERROR_INVALID_IMAGE, n, d, None),
            None
        );
    }

    #[test]
    fn architectures_parse_from_names_and_options() {
        assert_eq!(arch_number((9, 0)), 90);
        assert_eq!(arch_number((12, 1)), 121);
        assert_eq!(parse_arch("sm_90"), Some(90));
        assert_eq!(parse_arch("sm_90a"), Some(90));
        assert_eq!(parse_arch("sm_100f"), Some(100));
        assert_eq!(parse_arch("compute_75"), Some(75));
        assert_eq!(parse_arch("--gpu-architecture=sm_120"), Some(120));
        assert_eq!(parse_arch("--fmad=false"), None);
        assert_eq!(parse_arch("sm_"), None);
        assert_eq!(parse_arch("90"), None);
    }

    /// NVRTC 13.0's list, as it reported it on an H200.
    const NVRTC_13_0: &[i32] = &[75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121];
    /// A list like NVRTC 12.x's.
    const NVRTC_12_4: &[i32] = &[50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90];

    #[test]
    fn the_device_architecture_is_chosen_when_listed() {
        assert_eq!(choose_arch(90, NVRTC_13_0), Ok(90));
        assert_eq!(choose_arch(121, NVRTC_13_0), Ok(121));
        assert_eq!(choose_arch(70, NVRTC_12_4), Ok(70));
    }

    #[test]
    fn an_unlisted_device_takes_the_newest_lower_minor_of_its_major() {
        // A CUBIN for X.y runs on X.z, z >= y.
        assert_eq!(choose_arch(122, NVRTC_13_0), Ok(121));
        assert_eq!(choose_arch(101, NVRTC_13_0), Ok(100));
        assert_eq!(choose_arch(73, NVRTC_12_4), Ok(72));
    }

    #[test]
    fn an_architecture_outside_the_list_is_refused() {
        assert_eq!(
            choose_arch(100, NVRTC_12_4),
            Err(ArchProblem::TooNew { highest: 90 })
        );
        assert_eq!(
            choose_arch(130, NVRTC_13_0),
            Err(ArchProblem::TooNew { highest: 121 })
        );
        assert_eq!(
            choose_arch(70, NVRTC_13_0),
            Err(ArchProblem::TooOld { lowest: 75 })
        );
        // 8.5 is in range but neither listed nor above a listed 8.x: 8.0 is listed, so it
        // takes 8.0; 9.5 is above every 9.x but below 10.0.
        assert_eq!(choose_arch(85, NVRTC_13_0), Ok(80));
        assert_eq!(choose_arch(95, NVRTC_13_0), Ok(90));
        assert_eq!(
            choose_arch(100, &[90, 110]),
            Err(ArchProblem::Unlisted { highest: 110 })
        );
        assert_eq!(
            choose_arch(90, &[]),
            Err(ArchProblem::Unlisted { highest: 0 })
        );
        // Exactly one architecture asked (a compile with no device): no lower minor.
        assert_eq!(
            arch_problem(85, NVRTC_13_0),
            ArchProblem::Unlisted { highest: 121 }
        );
        assert_eq!(
            arch_problem(130, NVRTC_13_0),
            ArchProblem::TooNew { highest: 121 }
        );
    }

    #[test]
    fn architecture_errors_name_the_device_and_what_to_install() {
        let msg = arch_message(
            "NVIDIA GeForce RTX 5090 (compute capability 12.0)",
            120,
            ArchProblem::TooNew { highest: 90 },
            CudaVersion(12, 4),
            Some(Path::new("/usr/lib/libnvrtc.so.12")),
        );
        for want in [
            "NVRTC 12.4 (/usr/lib/libnvrtc.so.12)",
            "NVIDIA GeForce RTX 5090 (compute capability 12.0) (sm_120)",
            "newest architecture it compiles for is sm_90",
            "CUDA 12.8 or later compiles for sm_120",
            "nvidia-cuda-nvrtc",
            "LD_LIBRARY_PATH",
        ] {
            assert!(msg.contains(want), "missing {want:?} in: {msg}");
        }
        let old = arch_message(
            "Tesla V100 (compute capability 7.0)",
            70,
            ArchProblem::TooOld { lowest: 75 },
            CudaVersion(13, 0),
            None,
        );
        for want in [
            "sm_70",
            "oldest architecture is sm_75",
            "CUDA 12.x",
            "libnvrtc.so.12",
        ] {
            assert!(old.contains(want), "missing {want:?} in: {old}");
        }
    }

    #[test]
    fn the_nvrtc_file_is_read_from_the_mapped_files() {
        let maps = "\
7f0000000000-7f0000001000 r--p 00000000 08:01 1 /usr/lib/libnvrtc-builtins.so.13.0
7f0000001000-7f0000002000 r-xp 00000000 08:01 2 /opt/cu13/lib/libnvrtc.so.13
7f0000002000-7f0000003000 rw-p 00000000 00:00 0
7f0000003000-7f0000004000 r--p 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3";
        assert_eq!(
            mapped_file(maps, "libnvrtc.so"),
            Some(PathBuf::from("/opt/cu13/lib/libnvrtc.so.13"))
        );
        assert_eq!(
            mapped_file(maps, "libnccl.so.2"),
            Some(PathBuf::from("/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3"))
        );
        assert_eq!(mapped_file(maps, "libcuda.so"), None);
    }

    #[test]
    fn nccl_is_found_under_cudarcs_names_or_only_as_libnccl_so_2() {
        let names: Vec<String> = [
            "libnccl.so",
            "libnccl.so.13",
            "libnccl.so.12",
            "libnccl.so.1",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            nccl_found(&names, |n| n == "libnccl.so.12" || n == NCCL_SONAME),
            NcclFound::Loadable
        );
        assert_eq!(
            nccl_found(&names, |n| n == NCCL_SONAME),
            NcclFound::OnlySoname2
        );
        assert_eq!(nccl_found(&names, |_| false), NcclFound::Missing);
        // cudarc's own list never names libnccl.so.2.
        assert!(!crate::gpu::library_file_names("nccl")
            .iter()
            .any(|n| n == NCCL_SONAME));
    }

    #[test]
    fn libnccl_so_2_is_located_on_the_library_path_then_by_ldconfig() {
        let dirs = library_path_dirs("/usr/local/nvidia/lib64::/venv/nvidia/nccl/lib:");
        assert_eq!(
            dirs,
            [
                PathBuf::from("/usr/local/nvidia/lib64"),
                PathBuf::from("/venv/nvidia/nccl/lib")
            ]
        );
        let listing = "\
1234 libs found in cache `/etc/ld.so.cache'
\tlibnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2
\tlibnccl.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so";
        let in_venv = |p: &Path| p == Path::new("/venv/nvidia/nccl/lib/libnccl.so.2");
        assert_eq!(
            locate_soname2(&dirs, in_venv, Some(listing), None),
            Some(PathBuf::from("/venv/nvidia/nccl/lib/libnccl.so.2"))
        );
        assert_eq!(
            locate_soname2(&dirs, |_| false, Some(listing), None),
            Some(PathBuf::from("/lib/x86_64-linux-gnu/libnccl.so.2"))
        );
        let mapped = Some(PathBuf::from("/x/libnccl.so.2.28.3"));
        assert_eq!(
            locate_soname2(&dirs, |_| false, Some("nothing"), mapped.clone()),
            mapped
        );
        assert_eq!(locate_soname2(&dirs, |_| false, None, None), None);
        assert_eq!(
            ldconfig_path(listing, "libnccl.so"),
            Some(PathBuf::from("/lib/x86_64-linux-gnu/libnccl.so"))
        );
    }

    #[test]
    fn nccl_messages_give_the_exact_fix() {
        let msg = nccl_soname2_message(Some(Path::new("/venv/nvidia/nccl/lib/libnccl.so.2")));
        for want in [
            "installed as libnccl.so.2 at /venv/nvidia/nccl/lib/libnccl.so.2",
            "ln -sf /venv/nvidia/nccl/lib/libnccl.so.2 $HOME/.local/lib/cufold-nccl/libnccl.so",
            "export LD_LIBRARY_PATH=$HOME/.local/lib/cufold-nccl:$LD_LIBRARY_PATH",
        ] {
            assert!(msg.contains(want), "missing {want:?} in: {msg}");
        }
        let unknown = nccl_soname2_message(None);
        assert!(unknown.contains("find / -name libnccl.so.2"), "{unknown}");
        assert!(
            unknown.contains("ln -sf <its directory>/libnccl.so.2"),
            "{unknown}"
        );
        let missing = nccl_missing_message();
        assert!(missing.contains("install NCCL") && missing.contains("nvidia-nccl-cu13"));
    }
}
