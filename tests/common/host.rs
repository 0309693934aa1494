//! The host C++ compiler and the project's kernels/ for the tests that compile the CUDA
//! headers for the host (tests/host_cxx.rs, tests/integer_mean.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The first of `$CXX`, g++, clang++ and c++ that runs.
pub fn compiler() -> Option<String> {
    std::env::var("CXX")
        .ok()
        .into_iter()
        .chain(["g++", "clang++", "c++"].map(String::from))
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// The project's kernels/ directory: where this test was built, else under the working
/// directory (a staged binary runs from a copy of the project root).
pub fn kernels_dir() -> Option<PathBuf> {
    [Path::new(env!("CARGO_MANIFEST_DIR")), Path::new(".")]
        .iter()
        .map(|root| root.join("kernels"))
        .find(|d| d.join("types.cuh").is_file())
}

/// Compiles the C++ file `file` into `bin` with `cxx` as every host check does (C++17, no
/// contraction, no fast math), or fails the test with the compiler's messages (`what`
/// names what was compiled).
pub fn compile(cxx: &str, file: &Path, bin: &Path, what: &str) {
    let out = Command::new(cxx)
        .args([
            "-std=c++17",
            "-O1",
            "-ffp-contract=off",
            "-fno-fast-math",
            "-w",
            "-o",
        ])
        .arg(bin)
        .arg(file)
        .output()
        .expect("run the C++ compiler");
    assert!(
        out.status.success(),
        "{cxx} refused {what} ({}):\n{}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
