//! The host C++ compiler, the project's kernels/ and their host shim (device intrinsics,
//! types.cuh and ops.cuh pasted in order) for the tests that compile the CUDA headers for the
//! host (tests/host_cxx.rs, tests/integer_mean.rs, tests/exact.rs, ...), and the run of a
//! compiled driver.

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
    // The crate's root, the workspace's (for the candle adapter's tests) and the working
    // directory.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    [manifest, &manifest.join(".."), Path::new(".")]
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

/// Runs the compiled driver `bin` with `input` on its standard input (written from another
/// thread, so that a large input cannot deadlock against its output), fails the test if it
/// fails, and returns its output's lines, trimmed.
pub fn run_driver(bin: &Path, input: String) -> Vec<String> {
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the C++ driver");
    let stdin = child.stdin.take().expect("a piped stdin");
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut stdin = stdin;
        stdin
            .write_all(input.as_bytes())
            .expect("write the driver's input");
    });
    let out = child.wait_with_output().expect("wait for the C++ driver");
    writer.join().expect("the input writer");
    assert!(
        out.status.success(),
        "the C++ driver failed: {:?}",
        out.status
    );
    String::from_utf8(out.stdout)
        .expect("the driver prints text")
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

/// Device intrinsics for the host; then the real kernels/types.cuh and ops.cuh (see
/// `shim`), so that the translated operators meet the names they meet on the device.
pub const INTRINSICS: &str = r#"
#include <math.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline int __float_as_int(float f) { int u; std::memcpy(&u, &f, 4); return u; }
static inline double __longlong_as_double(long long u) { double f; std::memcpy(&f, &u, 8); return f; }
static inline long long __double_as_longlong(double f) { long long u; std::memcpy(&u, &f, 8); return u; }
static inline int __double2hiint(double f) { return (int)(__double_as_longlong(f) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned long long __brevll(unsigned long long x) {
    unsigned long long r = 0;
    for (int i = 0; i < 64; ++i) if ((x >> i) & 1) r |= 1ull << (63 - i);
    return r;
}
// IEEE binary16 conversions in portable C++ (what cvt.f32.f16 and cvt.rn.f16.f32 do).
static inline float host_f16_to_f32(unsigned short h) {
    unsigned sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (man ? 0x400000u | (man << 13) : 0u);
    else if (exp != 0) bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (man == 0) bits = sign;
    else {
        unsigned k = 0;
        while (!(man & 0x400u)) { man <<= 1; ++k; }
        bits = sign | ((113 - k) << 23) | ((man & 0x3ffu) << 13);
    }
    return __uint_as_float(bits);
}
static inline unsigned short host_f32_to_f16(float f) {
    unsigned x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu;
    unsigned man = x & 0x7fffffu;
    if (exp == 0xff) return (unsigned short)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    int e = (int)exp - 112;
    if (e >= 0x1f) return (unsigned short)(sign | 0x7c00u);
    unsigned shift = 13, r;
    if (e <= 0) {
        if (e < -10) return (unsigned short)sign;
        man |= 0x800000u;
        shift = (unsigned)(14 - e);
        r = man >> shift;
    } else {
        r = ((unsigned)e << 10) | (man >> 13);
    }
    unsigned rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;  // a carry rounds up to the next binade
    return (unsigned short)(sign | r);
}
"#;

/// kernels/types.cuh and kernels/ops.cuh for the host: their two inline-PTX f16
/// conversions become portable C++ ones (both round to nearest even), and the bf16 one,
/// which only sm_80 and later compile (`#if __CUDA_ARCH__ >= 800`), is left out: the host
/// runs the integer recipe beside it, and the GPU tests hold the hardware one to the CPU's
/// bits.
pub fn shim(dir: &Path) -> String {
    let types = std::fs::read_to_string(dir.join("types.cuh")).unwrap();
    let ops = std::fs::read_to_string(dir.join("ops.cuh")).unwrap();
    let patches = [
        (
            r#"asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));"#,
            "f = host_f16_to_f32(h.bits);",
        ),
        (
            r#"asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));"#,
            "h.bits = host_f32_to_f16(v);",
        ),
        (
            r#"asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(v));"#,
            "/* sm_80's conversion: device only */",
        ),
    ];
    let mut types = types;
    for (from, to) in patches {
        assert!(
            types.contains(from),
            "kernels/types.cuh no longer has `{from}`: update this host shim"
        );
        types = types.replace(from, to);
    }
    assert!(
        !types.contains("asm("),
        "kernels/types.cuh has new inline PTX: shim it here"
    );
    format!("{INTRINSICS}\n{}\n{}\n", pasted(&types), pasted(&ops))
}

/// A header's text without its `#include "cufold/..."` lines: the headers include each other
/// by NVRTC header name, and for the host they are pasted in order instead.
fn pasted(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("#include \"cufold/"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A C++ driver compiled for the host in a temporary directory of its own.
pub struct Driver {
    dir: PathBuf,
    bin: PathBuf,
}

impl Driver {
    /// The shim, then the named headers of kernels/ (pasted as the shim's own), then
    /// `driver`, compiled as `name`. `None`, after saying so, where there is no C++ compiler
    /// or no kernels/; with `CUFOLD_CI` set, where both must be, that is a failure.
    pub fn build(name: &str, headers: &[&str], driver: &str) -> Option<Driver> {
        let (Some(cxx), Some(kernels)) = (compiler(), kernels_dir()) else {
            assert!(
                std::env::var_os("CUFOLD_CI").is_none(),
                "CUFOLD_CI is set but there is no C++ compiler ($CXX, g++, clang++, c++) or no kernels/"
            );
            eprintln!("no C++ compiler or no kernels/: the host check {name} did not run");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("cufold-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut src = shim(&kernels);
        for h in headers {
            src.push_str(&pasted(&std::fs::read_to_string(kernels.join(h)).unwrap()));
            src.push('\n');
        }
        src.push_str(driver);
        let file = dir.join(format!("{name}.cpp"));
        std::fs::write(&file, src).unwrap();
        let bin = dir.join(name);
        let what = ["kernels/types.cuh", "ops.cuh"]
            .iter()
            .chain(headers)
            .copied()
            .collect::<Vec<_>>()
            .join(" + ");
        compile(&cxx, &file, &bin, &what);
        Some(Driver { dir, bin })
    }

    /// The driver run on `input` (run_driver).
    pub fn run(&self, input: String) -> Vec<String> {
        run_driver(&self.bin, input)
    }

    /// Removes the directory (left in place when a check fails, to look at).
    pub fn remove(self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}
