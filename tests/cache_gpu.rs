//! The disk cache on a device: a cache file that is not exactly what was written for its
//! kernel (bytes flipped, cut short, emptied, replaced by garbage, swapped with another
//! kernel's, written for another architecture) is never loaded: the kernel is compiled
//! again, gives the CPU's bits, and its file is rewritten, so that the next process loads
//! it from disk. A cache directory that cannot be written costs compiles, never an error.
//!
//! A process keeps the kernels it loaded in memory, so every phase runs in a process of its
//! own: this test binary run again on the one test, with `CUFOLD_CACHE_TEST_DIR` naming the
//! cache directory. The tests need a CUDA device and are ignored without one; run them with
//! `cargo test --release --test cache_gpu -- --include-ignored`.

mod common;
use common::*;
use cufold::ops::Sum;
use cufold::{Cpu, DiskCache, Gpu, GpuOptions, ScanKind};
use std::path::{Path, PathBuf};

const DIR_VAR: &str = "CUFOLD_CACHE_TEST_DIR";
const WORK_VAR: &str = "CUFOLD_CACHE_TEST_WORK";
const N: usize = 100_003;

/// What a child process reports: its kernel counts.
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    compiled: u64,
    from_disk: u64,
    rejected: u64,
}

/// The child's side: reduces and scans seeded data through a handle on `dir`, checks the
/// bits against the CPU, prints its counts.
fn child(dir: &Path, work: &str) {
    let opts = GpuOptions::default().disk_cache(DiskCache::Dir(dir.to_path_buf()));
    let g = Gpu::with_options(gpu().stream(), opts).unwrap();
    let x: Vec<f32> = data(N, 0xCACE);
    let dev = upload(&g, &x);
    if work.contains("reduce") {
        let got = g.reduce(&dev, Sum).unwrap();
        let want = Cpu::new().reduce(&x, Sum).unwrap();
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "reduce: GPU {got} != CPU {want}"
        );
    }
    if work.contains("scan") {
        let got = g.scan_host(&x, Sum, ScanKind::Inclusive).unwrap();
        let want = Cpu::new().scan(&x, Sum, ScanKind::Inclusive).unwrap();
        assert!(same(&got, &want), "scan: GPU and CPU bits differ");
    }
    let s = g.kernel_stats();
    println!(
        "cufold-cache-child compiled={} from_disk={} rejected={}",
        s.compiled, s.from_disk, s.rejected_from_disk
    );
}

/// Runs `test` of this binary again in a new process on cache directory `dir`, doing
/// `work` ("reduce", "scan" or both), and returns its counts.
fn run_child(test: &str, dir: &Path, work: &str) -> Counts {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            test,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_VAR, dir)
        .env(WORK_VAR, work)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find_map(|l| {
            l.split_once("cufold-cache-child ")
                .map(|(_, r)| r.to_string())
        })
        .unwrap_or_else(|| panic!("no counts from the child:\n{stdout}\n{stderr}"));
    let get = |name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            .unwrap()
    };
    Counts {
        compiled: get("compiled"),
        from_disk: get("from_disk"),
        rejected: get("rejected"),
    }
}

/// In a child process: does the child's work and returns true (the test stops there).
fn is_child() -> bool {
    match std::env::var_os(DIR_VAR) {
        Some(dir) => {
            child(Path::new(&dir), &std::env::var(WORK_VAR).unwrap());
            true
        }
        None => false,
    }
}

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cufold-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn cubins(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cubin"))
        .collect();
    v.sort();
    v
}

fn counts(compiled: u64, from_disk: u64, rejected: u64) -> Counts {
    Counts {
        compiled,
        from_disk,
        rejected,
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn corrupt_cache_files_are_recompiled_and_rewritten() {
    const TEST: &str = "corrupt_cache_files_are_recompiled_and_rewritten";
    if is_child() {
        return;
    }
    let dir = fresh_dir("cache-corrupt");
    // The reduction's kernel first, alone, so that its file is known; then the scan's.
    assert_eq!(run_child(TEST, &dir, "reduce"), counts(1, 0, 0));
    let reduce_file = cubins(&dir).pop().expect("a cache file");
    assert_eq!(run_child(TEST, &dir, "reduce scan"), counts(1, 1, 0));
    let scan_file = cubins(&dir)
        .into_iter()
        .find(|p| *p != reduce_file)
        .expect("the scan's cache file");
    assert_eq!(run_child(TEST, &dir, "reduce scan"), counts(0, 2, 0));
    let good = std::fs::read(&reduce_file).unwrap();
    let good_scan = std::fs::read(&scan_file).unwrap();
    let arch = reduce_file
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .rsplit_once('-')
        .unwrap()
        .1
        .to_string();
    eprintln!(
        "device architecture {arch}, cache files of {} and {} bytes",
        good.len(),
        good_scan.len()
    );

    let flip = |at: &[usize]| {
        let mut b = good.clone();
        for &i in at {
            b[i] ^= 0x5a;
        }
        b
    };
    let n = good.len();
    let garbage: Vec<u8> = (0..n as u64)
        .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
        .collect();
    // The same file for another architecture: every "sm_XY" in it rewritten (its key and
    // the CUBIN's own strings), as a cache directory shared with another GPU would hold.
    let other_arch = if arch == "sm_80" { "sm_86" } else { "sm_80" };
    let for_other_arch = replace_all(&good, arch.as_bytes(), other_arch.as_bytes());
    assert_ne!(for_other_arch, good, "the file names its architecture");
    // A CUBIN compiled for another architecture, written raw where the file should be.
    let shape = cufold::reduce::ReduceShape::for_sizes(4, 256).unwrap();
    let raw_other = cufold::reduce::compile_kernel(
        &<Sum as cufold::ops::Operator<f32>>::cuda(&Sum),
        0,
        &shape,
        true,
        other_arch,
    )
    .unwrap();
    let corruptions: Vec<(&str, Vec<u8>)> = vec![
        ("one byte flipped in the middle", flip(&[n / 2])),
        (
            "bytes flipped near the end",
            flip(&[n - 1, n - 100, n - 1000]),
        ),
        ("a byte flipped in the header", flip(&[12])),
        ("cut in half", good[..n / 2].to_vec()),
        ("one byte short", good[..n - 1].to_vec()),
        ("empty", Vec::new()),
        ("garbage of the same length", garbage),
        ("the scan kernel's file (swapped)", good_scan.clone()),
        ("written for another architecture", for_other_arch),
        ("a raw CUBIN for another architecture", raw_other),
    ];
    for (what, bytes) in corruptions {
        std::fs::write(&reduce_file, &bytes).unwrap();
        assert_eq!(
            run_child(TEST, &dir, "reduce"),
            counts(1, 0, 1),
            "{what}: not rejected and recompiled"
        );
        assert_eq!(
            run_child(TEST, &dir, "reduce"),
            counts(0, 1, 0),
            "{what}: the file was not rewritten"
        );
        eprintln!("{what}: rejected, recompiled (same bits as the CPU), rewritten");
    }
    // Both files swapped: both rejected.
    std::fs::write(&reduce_file, &good_scan).unwrap();
    std::fs::write(&scan_file, &good).unwrap();
    assert_eq!(run_child(TEST, &dir, "reduce scan"), counts(2, 0, 2));
    assert_eq!(run_child(TEST, &dir, "reduce scan"), counts(0, 2, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = hay.to_vec();
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
    out
}

#[test]
#[ignore = "needs a CUDA device"]
fn processes_filling_one_cache_directory_at_once() {
    const TEST: &str = "processes_filling_one_cache_directory_at_once";
    if is_child() {
        return;
    }
    let dir = fresh_dir("cache-race");
    std::thread::scope(|s| {
        let children: Vec<_> = (0..4)
            .map(|_| s.spawn(|| run_child(TEST, &dir, "reduce scan")))
            .collect();
        for c in children {
            let c = c.join().unwrap();
            // Each process compiles what it did not find whole on disk.
            assert_eq!(c.compiled + c.from_disk, 2, "{c:?}");
            assert_eq!(c.rejected, 0, "a process saw a partial file: {c:?}");
        }
    });
    assert_eq!(cubins(&dir).len(), 2);
    // No temporary file left behind.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    assert_eq!(run_child(TEST, &dir, "reduce scan"), counts(0, 2, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn an_unwritable_cache_costs_compiles_not_errors() {
    const TEST: &str = "an_unwritable_cache_costs_compiles_not_errors";
    if is_child() {
        return;
    }
    let base = fresh_dir("cache-unwritable");
    std::fs::create_dir_all(&base).unwrap();
    // A file where the cache directory should be.
    let file = base.join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    assert_eq!(run_child(TEST, &file, "reduce scan"), counts(2, 0, 0));
    assert_eq!(run_child(TEST, &file, "reduce scan"), counts(2, 0, 0));
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
    // Directories where the cache files should be.
    let dir = base.join("cache");
    assert_eq!(run_child(TEST, &dir, "reduce scan"), counts(2, 0, 0));
    for f in cubins(&dir) {
        std::fs::remove_file(&f).unwrap();
        std::fs::create_dir_all(f.join("in-the-way")).unwrap();
    }
    assert_eq!(run_child(TEST, &dir, "reduce scan"), counts(2, 0, 0));
    assert_eq!(run_child(TEST, &dir, "reduce scan"), counts(2, 0, 0));
    // A read-only directory (only where permissions bind: not for root).
    let ro = base.join("read-only");
    std::fs::create_dir_all(&ro).unwrap();
    let mut perm = std::fs::metadata(&ro).unwrap().permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(&ro, perm).unwrap();
    let c = run_child(TEST, &ro, "reduce scan");
    assert_eq!(c.compiled + c.from_disk, 2, "{c:?}");
    let mut perm = std::fs::metadata(&ro).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(&ro, perm).unwrap();
    std::fs::remove_dir_all(&base).unwrap();
}
