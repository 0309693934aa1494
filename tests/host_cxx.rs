//! The CUDA C++ that `#[cufold::op]` and `#[cufold::transform]` generate (maps run inside
//! `ops::Mapped`; operators with run-time parameters are built from their bytes, as
//! kernels build them), compiled for the host by a C++ compiler
//! (`$CXX`, else `g++`, `clang++` or `c++`) with device qualifiers defined away, and run
//! beside the operators' Rust halves on the same inputs: identity, lift, combine and
//! finish must give the same bits. On the host both halves call the same libm, so even
//! `exp` and `ln` must agree exactly (the transcendental probe is compared within 4 ulps
//! only because Rust's `cbrt` is its own, correctly rounded); this checks the translation and the `cfm` helpers'
//! Rust semantics (wrapping, saturating casts, f16/bf16 rounding, literal typing, ...)
//! on a machine without CUDA. The GPU tests check the same operators on the device.
//! The last test does the same for kernels/random.cuh against `cufold::random`.
//!
//! Without a C++ compiler (or the kernels/ directory) the tests say so and pass, unless
//! `CUFOLD_CI` is set (CI sets it, so there it cannot be skipped).

mod common;
mod macro_ops;

use common::host::{compile, compiler, kernels_dir, shim, INTRINSICS};
use common::{same, Rng};
use cufold::laws::{Approx, Tolerance};
use cufold::ops::{self, CudaOp, Mapped, Operator};
use cufold::{bf16, f16, DeviceValue};
use macro_ops::probes::*;
use macro_ops::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const DRIVER: &str = r#"
static void hex_out(const void* p, size_t n) {
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; ++i) std::printf("%02x", b[i]);
    std::printf("\n");
}
static void hex_in(void* p, size_t n) {
    unsigned char* b = (unsigned char*)p;
    for (size_t i = 0; i < n; ++i) {
        unsigned v;
        if (std::scanf("%2x", &v) != 1) std::abort();
        b[i] = (unsigned char)v;
    }
}
// The operator from its run-time parameters (as cf::make_op does in a kernel: memcpy of
// the bytes, or default construction without any); then identity, lift of every input,
// combine of pairs, finish of every lifted value.
template <class Op> int run() {
    typedef typename Op::In In;
    typedef typename Op::Acc Acc;
    typedef typename Op::Out Out;
    Op op = Op();
    size_t np;
    if (std::scanf("%zu", &np) != 1) return 2;
    if (np > 0) {
        if (np != sizeof(Op)) return 4;
        std::vector<unsigned char> bytes(np);
        hex_in(bytes.data(), np);
        std::memcpy(&op, bytes.data(), np);
    }
    size_t n;
    if (std::scanf("%zu", &n) != 1 || n == 0) return 2;
    std::vector<In> xs(n);
    std::vector<Acc> acc(n);
    for (size_t i = 0; i < n; ++i) hex_in(&xs[i], sizeof(In));
    Acc id = op.identity();
    hex_out(&id, sizeof id);
    for (size_t i = 0; i < n; ++i) { acc[i] = op.lift(xs[i], (cf::u64)i); hex_out(&acc[i], sizeof(Acc)); }
    for (size_t i = 0; i < n; ++i) { Acc c = op.combine(acc[i], acc[(i * 7 + 3) % n]); hex_out(&c, sizeof c); }
    for (size_t i = 0; i < n; ++i) { Out o = op.finish(acc[i], (cf::u64)i); hex_out(&o, sizeof o); }
    return 0;
}
"#;

/// The bytes of a value of a type without padding.
fn bytes<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: only called on the padding-free types below, so every byte is initialised.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
        .to_vec()
}

fn from_hex<T: DeviceValue>(line: &str) -> T {
    let b: Vec<u8> = (0..line.len() / 2)
        .map(|i| u8::from_str_radix(&line[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    assert_eq!(b.len(), std::mem::size_of::<T>(), "C++ wrote {line}");
    // SAFETY: the size matches, and every bit pattern is a valid value of these types
    // (numbers, and structs of numbers without padding).
    unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) }
}

trait Case {
    fn name(&self) -> &str;
    fn cuda(&self) -> CudaOp;
    fn stdin(&self) -> String;
    /// Compares the C++ output with the Rust half; returns the mismatches.
    fn check(&self, out: &str) -> Vec<String>;
}

struct Run<In, O> {
    name: &'static str,
    op: O,
    xs: Vec<In>,
    /// None: the same bits; else within this tolerance.
    tol: Option<Tolerance>,
}

impl<In: DeviceValue, O: Operator<In>> Case for Run<In, O>
where
    O::Acc: Approx,
    O::Out: Approx,
{
    fn name(&self) -> &str {
        self.name
    }
    fn cuda(&self) -> CudaOp {
        self.op.cuda()
    }
    fn stdin(&self) -> String {
        let params = self.op.params();
        let mut s = format!("{}\n", params.bytes().len());
        for b in params.bytes() {
            s.push_str(&format!("{b:02x}"));
        }
        s.push_str(&format!("\n{}\n", self.xs.len()));
        for x in &self.xs {
            for b in bytes(x) {
                s.push_str(&format!("{b:02x}"));
            }
            s.push('\n');
        }
        s
    }
    fn check(&self, out: &str) -> Vec<String> {
        let n = self.xs.len();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines.len(),
            1 + 3 * n,
            "{}: C++ printed {} lines",
            self.name,
            lines.len()
        );
        let op = self.op;
        let mut bad = Vec::new();
        let mut cmp = |what: String, cpp: String, rust: String| {
            if cpp != rust {
                bad.push(format!("{}: {what}: C++ {cpp} != Rust {rust}", self.name));
            }
        };
        let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
        let tol = self.tol;
        fn agree<T: Approx + std::fmt::Debug + 'static>(
            a: &T,
            b: &T,
            tol: Option<Tolerance>,
        ) -> bool {
            match tol {
                None => same(a, b),
                Some(t) => a.approx_eq(b, t),
            }
        }
        let id: O::Acc = from_hex(lines[0]);
        cmp("identity".into(), show(&id), show(&op.identity()));
        let acc: Vec<O::Acc> = (0..n).map(|i| op.lift(self.xs[i], i as u64)).collect();
        for i in 0..n {
            let c: O::Acc = from_hex(lines[1 + i]);
            if !agree(&c, &acc[i], tol) {
                cmp(
                    format!("lift({:?}, {i})", self.xs[i]),
                    show(&c),
                    show(&acc[i]),
                );
            }
            let j = (i * 7 + 3) % n;
            let c: O::Acc = from_hex(lines[1 + n + i]);
            let r = op.combine(acc[i], acc[j]);
            if !agree(&c, &r, tol) {
                cmp(
                    format!("combine(lift(x[{i}]), lift(x[{j}]))"),
                    show(&c),
                    show(&r),
                );
            }
            let c: O::Out = from_hex(lines[1 + 2 * n + i]);
            let r = op.finish(acc[i], i as u64);
            if !agree(&c, &r, tol) {
                cmp(format!("finish(lift(x[{i}]), {i})"), show(&c), show(&r));
            }
        }
        bad
    }
}

fn case<In: DeviceValue, O: Operator<In>>(name: &'static str, op: O, xs: Vec<In>) -> Box<dyn Case>
where
    O::Acc: Approx,
    O::Out: Approx,
{
    Box::new(Run {
        name,
        op,
        xs,
        tol: None,
    })
}

fn cases() -> Vec<Box<dyn Case>> {
    let f = float_values();
    let finite: Vec<f32> = f
        .iter()
        .copied()
        .filter(|x| x.is_finite() && x.abs() < 1e30)
        .collect();
    let maps: Vec<Affine> = finite
        .windows(2)
        .map(|w| Affine { a: w[0], b: w[1] })
        .collect();
    let lses: Vec<Lse> = finite
        .windows(2)
        .map(|w| Lse {
            max: w[0],
            sum: w[1].abs(),
        })
        .collect();
    let mut r = Rng(7);
    let halves: Vec<f16> = f.iter().map(|&x| f16::from_f32(x)).collect();
    let bhalves: Vec<bf16> = f.iter().map(|&x| bf16::from_f32(x)).collect();
    let words: Vec<u32> = (0..300).map(|_| r.next() as u32).collect();
    let doubles: Vec<f64> = f.iter().map(|&x| x as f64 * 1.25).collect();
    let quantized: Vec<f32> = (0..300).map(|_| (r.next() % 16) as f32).collect();
    let nested: Vec<Nested> = finite
        .windows(3)
        .map(|w| Nested {
            inner: Keywords {
                new: w[0],
                class: w[1].to_bits(),
            },
            map: cufold::ops::Affine {
                a: w[1] as f64,
                b: w[2] as f64 * 1e-3,
            },
        })
        .collect();
    vec![
        case("compose", compose, maps),
        case("lse", lse, lses),
        case("LogSumExp", LogSumExp, f.clone()),
        case("ArgMaxTies", ArgMaxTies, quantized),
        case("Hull", Hull, doubles.clone()),
        case("HullByMethods", HullByMethods, f.clone()),
        case("Welford", Welford, f.clone()),
        case("hsum", hsum, halves),
        case("bmax", bmax, bhalves),
        case("HalfSummary", HalfSummary, f.clone()),
        case("BitStats", BitStats, words),
        case("syntax", syntax, nested),
        // Run-time parameters: the C++ operator is built from the value's bytes.
        case("Scaled", Scaled { k: -0.3 }, doubles.clone()),
        case(
            "InWindow",
            InWindow {
                window: Window { lo: -0.5, hi: 1e3 },
                first: 5,
                cap: 40,
                unit: 0.7,
            },
            f.clone(),
        ),
        case(
            "Mapped<Standardize, Sum>",
            Mapped::new(
                Standardize {
                    mean: 0.3,
                    inv_sd: 1.7,
                },
                ops::Sum,
            ),
            f.clone(),
        ),
        case(
            "Mapped<Standardize, Scaled>",
            Mapped::new(
                Standardize {
                    mean: -2.0,
                    inv_sd: 0.1,
                },
                Scaled { k: 3.0 },
            ),
            f.clone(),
        ),
        case(
            "Mapped<Ramp, Max>",
            Mapped::new(
                Ramp {
                    slope: 0.25,
                    clip: Window {
                        lo: -10.0,
                        hi: 60.0,
                    },
                },
                ops::Max,
            ),
            finite.clone(),
        ),
        case(
            "Mapped<Square, Scaled>",
            Mapped::new(Square, Scaled { k: 0.5 }),
            doubles.clone(),
        ),
        case(
            "Mapped<Standardize, Mapped<Square, Scaled>>",
            Mapped::new(
                Standardize {
                    mean: 0.5,
                    inv_sd: 4.0,
                },
                Mapped::new(Square, Scaled { k: -1.5 }),
            ),
            f.clone(),
        ),
        case("ExactProbe", ExactProbe, float_samples()),
        case("IntProbe", IntProbe, int_samples()),
        // Rust's own cbrt is correctly rounded; glibc's cbrt and cbrtf are within 1 and 3
        // ulps; every other function is the same libm call on both sides.
        Box::new(Run {
            name: "MathProbe",
            op: MathProbe,
            xs: float_samples(),
            tol: Some(Tolerance::Ulps(4)),
        }),
    ]
}

fn build(cxx: &str, kernels: &Path, dir: &Path, cases: &[Box<dyn Case>]) -> PathBuf {
    let mut src = shim(kernels);
    let mut names = Vec::new();
    for c in cases {
        let op = c.cuda();
        assert!(!op.source.is_empty(), "{}: no source", c.name());
        // The macro prelude includes cufold/types.cuh, which the shim has pasted already.
        let source: Vec<&str> = op
            .source
            .lines()
            .filter(|l| !l.starts_with("#include \"cufold/"))
            .collect();
        src.push_str(&source.join("\n"));
        src.push('\n');
        names.push(op.type_name);
    }
    src.push_str(DRIVER);
    src.push_str(
        "int main(int argc, char** argv) {\n    switch (argc > 1 ? std::atoi(argv[1]) : -1) {\n",
    );
    for (i, n) in names.iter().enumerate() {
        src.push_str(&format!("    case {i}: return run<{n}>();\n"));
    }
    src.push_str("    }\n    return 3;\n}\n");
    let file = dir.join("ops.cpp");
    std::fs::write(&file, &src).unwrap();
    let bin = dir.join("ops");
    compile(cxx, &file, &bin, "the generated C++");
    bin
}

#[test]
fn translated_operators_compute_what_their_rust_halves_compute() {
    let (Some(cxx), Some(kernels)) = (compiler(), kernels_dir()) else {
        assert!(
            std::env::var_os("CUFOLD_CI").is_none(),
            "CUFOLD_CI is set but there is no C++ compiler ($CXX, g++, clang++, c++) or no kernels/"
        );
        eprintln!(
            "SKIPPED: no host C++ compiler ($CXX, g++, clang++, c++) or no kernels/ directory; \
             the GPU tests cover the translated operators on a device"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("cufold-host-cxx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = cases();
    let bin = build(&cxx, &kernels, &dir, &cases);
    let mut bad = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let mut child = Command::new(&bin)
            .arg(i.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(c.stdin().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}: the C++ program failed", c.name());
        bad.extend(c.check(&String::from_utf8(out.stdout).unwrap()));
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// kernels/random.cuh's functions on lines of stdin, one output line each (hex words, and
/// floats as their bits):
///   `k c0 c1 c2 c3 k0 k1` -> philox4x32_10
///   `o w lo hi`           -> open01_f32(w), open01_f64(lo, hi)
///   `s seed sample draw`  -> philox_block(draw), random_u32, uniform_f32, uniform_f64,
///                            normal_f32, normal_f64
///   `f seed sample first` -> draw_uniform<float, 7>, draw_uniform<double, 5>,
///                            draw_normal<float, 7>, draw_normal<double, 5>
const RANDOM_DRIVER: &str = r#"
static unsigned f2u(float f) { return __float_as_uint(f); }
static unsigned long long d2u(double d) { return (unsigned long long)__double_as_longlong(d); }
int main() {
    char op;
    while (std::scanf(" %c", &op) == 1) {
        if (op == 'k') {
            unsigned c[4], k[2];
            if (std::scanf("%x %x %x %x %x %x", &c[0], &c[1], &c[2], &c[3], &k[0], &k[1]) != 6) return 2;
            cf::PhiloxBlock b = cf::philox4x32_10(c, k);
            std::printf("%x %x %x %x\n", b.w[0], b.w[1], b.w[2], b.w[3]);
        } else if (op == 'o') {
            unsigned w, lo, hi;
            if (std::scanf("%x %x %x", &w, &lo, &hi) != 3) return 2;
            std::printf("%x %llx\n", f2u(cf::open01_f32(w)), d2u(cf::open01_f64(lo, hi)));
        } else if (op == 's') {
            unsigned long long seed, sample;
            unsigned d;
            if (std::scanf("%llx %llx %x", &seed, &sample, &d) != 3) return 2;
            cf::PhiloxBlock b = cf::philox_block(seed, sample, d);
            std::printf("%x %x %x %x %x %x %llx %x %llx\n", b.w[0], b.w[1], b.w[2], b.w[3],
                        cf::random_u32(seed, sample, d), f2u(cf::uniform_f32(seed, sample, d)),
                        d2u(cf::uniform_f64(seed, sample, d)), f2u(cf::normal_f32(seed, sample, d)),
                        d2u(cf::normal_f64(seed, sample, d)));
        } else if (op == 'f') {
            unsigned long long seed, sample;
            unsigned first;
            if (std::scanf("%llx %llx %x", &seed, &sample, &first) != 3) return 2;
            float uf[7], nf[7];
            double ud[5], nd[5];
            cf::draw_uniform(seed, sample, uf, first);
            cf::draw_uniform(seed, sample, ud, first);
            cf::draw_normal(seed, sample, nf, first);
            cf::draw_normal(seed, sample, nd, first);
            for (int k = 0; k < 7; ++k) std::printf("%x ", f2u(uf[k]));
            for (int k = 0; k < 5; ++k) std::printf("%llx ", d2u(ud[k]));
            for (int k = 0; k < 7; ++k) std::printf("%x ", f2u(nf[k]));
            for (int k = 0; k < 5; ++k) std::printf("%llx ", d2u(nd[k]));
            std::printf("\n");
        } else {
            return 3;
        }
    }
    // The default argument: draws 0 .. D.
    float u0[3];
    cf::draw_uniform(7ull, 9ull, u0);
    std::printf("%x %x %x\n", f2u(u0[0]), f2u(u0[1]), f2u(u0[2]));
    return 0;
}
"#;

/// The Rust halves of RANDOM_DRIVER's answers, as the same hex words.
fn random_expected(line: &str) -> String {
    use cufold::random::*;
    let a: Vec<&str> = line.split_whitespace().collect();
    let h32 = |i: usize| u32::from_str_radix(a[i], 16).unwrap();
    let h64 = |i: usize| u64::from_str_radix(a[i], 16).unwrap();
    let words = |w: &[u32]| w.iter().map(|x| format!("{x:x}")).collect::<Vec<_>>();
    match a[0] {
        "k" => words(&philox4x32_10(
            [h32(1), h32(2), h32(3), h32(4)],
            [h32(5), h32(6)],
        ))
        .join(" "),
        "o" => format!(
            "{:x} {:x}",
            open01_f32(h32(1)).to_bits(),
            open01_f64(h32(2), h32(3)).to_bits()
        ),
        "s" => {
            let (seed, sample, d) = (h64(1), h64(2), h32(3));
            let mut v = words(&block(seed, sample, d));
            v.push(format!("{:x}", random_u32(seed, sample, d)));
            v.push(format!("{:x}", uniform_f32(seed, sample, d).to_bits()));
            v.push(format!("{:x}", uniform_f64(seed, sample, d).to_bits()));
            v.push(format!("{:x}", normal_f32(seed, sample, d).to_bits()));
            v.push(format!("{:x}", normal_f64(seed, sample, d).to_bits()));
            v.join(" ")
        }
        "f" => {
            let (seed, sample, first) = (h64(1), h64(2), h32(3));
            let (mut uf, mut ud, mut nf, mut nd) = ([0f32; 7], [0f64; 5], [0f32; 7], [0f64; 5]);
            fill_uniform(seed, sample, first, &mut uf);
            fill_uniform(seed, sample, first, &mut ud);
            fill_normal(seed, sample, first, &mut nf);
            fill_normal(seed, sample, first, &mut nd);
            let mut v: Vec<String> = uf.iter().map(|x| format!("{:x}", x.to_bits())).collect();
            v.extend(ud.iter().map(|x| format!("{:x}", x.to_bits())));
            v.extend(nf.iter().map(|x| format!("{:x}", x.to_bits())));
            v.extend(nd.iter().map(|x| format!("{:x}", x.to_bits())));
            v.join(" ")
        }
        _ => unreachable!(),
    }
}

/// Which fields of a driver line are normals (compared within the stated tolerance);
/// every other field must be the same bits. Returns (is normal, is f64) per field.
fn random_fields(op: &str) -> Vec<(bool, bool)> {
    match op {
        "s" => {
            let mut v = vec![(false, false); 7];
            v.push((true, false));
            v.push((true, true));
            v
        }
        "f" => [
            vec![(false, false); 12],
            vec![(true, false); 7],
            vec![(true, true); 5],
        ]
        .concat(),
        "o" => vec![(false, false); 2],
        _ => vec![(false, false); 4],
    }
}

/// kernels/random.cuh, compiled for the host, against `cufold::random`: Random123's known
/// answers, then philox, words and uniforms bit for bit and normals within the 16 ulps the
/// module documents for the GPU (on the host both call the same libm, so they are expected
/// to be identical; the count of identical normals is printed).
#[test]
fn random_cuh_computes_the_bits_of_cufold_random() {
    let (Some(cxx), Some(kernels)) = (compiler(), kernels_dir()) else {
        assert!(
            std::env::var_os("CUFOLD_CI").is_none(),
            "CUFOLD_CI is set but there is no C++ compiler ($CXX, g++, clang++, c++) or no kernels/"
        );
        eprintln!(
            "SKIPPED: no host C++ compiler ($CXX, g++, clang++, c++) or no kernels/ directory; \
             the CPU tests of cufold::random still run"
        );
        return;
    };
    let random = std::fs::read_to_string(kernels.join("random.cuh")).unwrap();
    let dir = std::env::temp_dir().join(format!("cufold-host-random-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("random.cpp");
    std::fs::write(&file, format!("{INTRINSICS}\n{random}\n{RANDOM_DRIVER}")).unwrap();
    let bin = dir.join("random");
    compile(&cxx, &file, &bin, "kernels/random.cuh");

    // Random123's kat_vectors for philox4x32 10 (see src/random.rs for the source).
    let kat = [
        ("0 0 0 0 0 0", "6627e8d5 e169c58d bc57ac4c 9b00dbd8"),
        (
            "ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff",
            "408f276d 41c83b0e a20bc7c6 6d5451fd",
        ),
        (
            "243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0",
            "d16cfe09 94fdcceb 5001e420 24126ea1",
        ),
    ];
    let mut r = Rng(0x9e37);
    let mut lines: Vec<String> = kat.iter().map(|(k, _)| format!("k {k}")).collect();
    for _ in 0..200 {
        let w: Vec<String> = (0..6).map(|_| format!("{:x}", r.next() as u32)).collect();
        lines.push(format!("k {}", w.join(" ")));
    }
    let edge32 = [
        0u32,
        1,
        0xff,
        0x100,
        0x1ff,
        0x200,
        0x8000_0000,
        0xffff_ff00,
        u32::MAX,
    ];
    for &w in &edge32 {
        for &x in &edge32 {
            lines.push(format!("o {w:x} {x:x} {w:x}"));
        }
    }
    for _ in 0..200 {
        lines.push(format!(
            "o {:x} {:x} {:x}",
            r.next() as u32,
            r.next() as u32,
            r.next() as u32
        ));
    }
    let seeds = [0u64, 1, u64::MAX, 0x0123_4567_89ab_cdef, r.next()];
    let samples = [
        0u64,
        1,
        (1 << 32) - 1,
        1 << 32,
        1 << 40,
        (1 << 40) + 12345,
        u64::MAX,
        r.next(),
    ];
    let draws = [
        0u32,
        1,
        2,
        3,
        4,
        5,
        6,
        7,
        8,
        4095,
        u32::MAX - 1,
        u32::MAX,
        r.next() as u32,
    ];
    for &s in &seeds {
        for &i in &samples {
            for &d in &draws {
                lines.push(format!("s {s:x} {i:x} {d:x}"));
            }
            for first in [0u32, 1, 2, 3, 5, 6, u32::MAX - 2, r.next() as u32] {
                lines.push(format!("f {s:x} {i:x} {first:x}"));
            }
        }
    }
    for _ in 0..2000 {
        lines.push(format!(
            "s {:x} {:x} {:x}",
            r.next(),
            r.next() >> 24,
            r.next() as u32 % 64
        ));
    }

    let mut child = Command::new(&bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Written from another thread: the answers outgrow the pipe before the questions end.
    let input = lines.join("\n") + "\n";
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        out.status.success(),
        "the C++ program failed: {:?}",
        out.status
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let got: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        got.len(),
        lines.len() + 1,
        "C++ printed {} lines",
        got.len()
    );

    for (i, (_, want)) in kat.iter().enumerate() {
        assert_eq!(got[i], *want, "C++ philox4x32_10 on Random123's vector {i}");
    }
    let mut bad = Vec::new();
    let (mut normals, mut identical, mut worst) = (0usize, 0usize, 0u64);
    for (line, cpp) in lines.iter().zip(&got) {
        let rust = random_expected(line);
        let (c, w): (Vec<&str>, Vec<&str>) = (
            cpp.split_whitespace().collect(),
            rust.split_whitespace().collect(),
        );
        let fields = random_fields(&line[..1]);
        assert_eq!(
            (c.len(), w.len()),
            (fields.len(), fields.len()),
            "{line}: {cpp}"
        );
        for ((a, b), &(normal, double)) in c.iter().zip(&w).zip(&fields) {
            let ok = if !normal {
                a == b
            } else {
                normals += 1;
                identical += usize::from(a == b);
                let (x, y) = (
                    u64::from_str_radix(a, 16).unwrap(),
                    u64::from_str_radix(b, 16).unwrap(),
                );
                // Same sign: the distance of the bit patterns is the distance in ulps.
                let sign = if double { 1 << 63 } else { 1 << 31 };
                worst = worst.max(if (x ^ y) & sign == 0 {
                    x.abs_diff(y)
                } else {
                    u64::MAX
                });
                if double {
                    f64::from_bits(x).approx_eq(&f64::from_bits(y), Tolerance::Ulps(16))
                } else {
                    let (x, y) = (f32::from_bits(x as u32), f32::from_bits(y as u32));
                    x.approx_eq(&y, Tolerance::Ulps(16))
                }
            };
            if !ok {
                bad.push(format!("{line}: C++ {a} != Rust {b}"));
            }
        }
    }
    let mut u0 = [0f32; 3];
    cufold::random::fill_uniform(7, 9, 0, &mut u0);
    let want: Vec<String> = u0.iter().map(|x| format!("{:x}", x.to_bits())).collect();
    assert_eq!(
        got[lines.len()],
        want.join(" "),
        "draw_uniform's default first"
    );
    eprintln!(
        "{} lines: philox, words and uniforms identical; {identical} of {normals} normals \
         identical, the farthest {worst} ulps apart",
        lines.len()
    );
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
