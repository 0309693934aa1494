//! Compiled kernels, kept in memory (per CUDA context) and on disk (so that a second process
//! does not compile again), and the loader every primitive gets its functions from.

use super::hash::fnv64;
use super::jit;
use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, CudaFunction};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Where compiled kernels are kept between processes.
///
/// The default is `$CUFOLD_CACHE_DIR` if set, else `$XDG_CACHE_HOME/cufold`, else
/// `$HOME/.cache/cufold`; setting `CUFOLD_CACHE_DIR=off` (or `0`) turns it off.
///
/// ```
/// let opts = cufold::GpuOptions::default().disk_cache(cufold::DiskCache::Off);
/// # let _ = opts;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum DiskCache {
    /// The environment-dependent default location described above.
    #[default]
    Default,
    /// No disk cache: compile once per process.
    Off,
    /// This directory (created if missing).
    Dir(PathBuf),
}

impl DiskCache {
    pub(crate) fn dir(&self) -> Option<PathBuf> {
        match self {
            DiskCache::Off => None,
            DiskCache::Dir(d) => Some(d.clone()),
            DiskCache::Default => match std::env::var_os("CUFOLD_CACHE_DIR") {
                Some(v) if v == "off" || v == "0" || v.is_empty() => None,
                Some(v) => Some(PathBuf::from(v)),
                None => std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                    .map(|d| d.join("cufold")),
            },
        }
    }
}

type FnCache = Mutex<HashMap<(usize, String), CudaFunction>>;

fn memory_cache() -> &'static FnCache {
    static CACHE: OnceLock<FnCache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Where a kernel came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    Memory,
    Disk,
    /// Compiled by NVRTC; `rejected` when a cache file was there but was not what was
    /// written for this key (and has been replaced).
    Compiled {
        rejected: bool,
    },
}

/// Everything a compiled kernel depends on, as text: the cache file format's version,
/// cufold's version, NVRTC's version, the architecture, the compile options, a hash of the
/// embedded headers, and the generated source itself (whole). A cache file is used only if
/// the key stored in it is this key byte for byte.
pub(crate) fn entry_key(
    src: &str,
    arch: &str,
    options: &[String],
    nvrtc: (i32, i32),
    headers: u64,
) -> String {
    format!(
        "cufold {}\nnvrtc {}.{}\narch {arch}\noptions {}\nheaders {headers:016x}\nsource {}\n{src}",
        env!("CARGO_PKG_VERSION"),
        nvrtc.0,
        nvrtc.1,
        options.join(" "),
        src.len(),
    )
}

/// The file name of a key's entry: two hashes of the key and the architecture, readable.
pub(crate) fn entry_file_name(key: &str, arch: &str) -> String {
    format!(
        "{:016x}{:016x}-{arch}.cubin",
        fnv64(key.as_bytes(), 0),
        fnv64(key.as_bytes(), 0x9e37_79b9_7f4a_7c15)
    )
}

/// The first bytes of every cache file (the format's version is in them).
const MAGIC: &[u8; 8] = b"CUFOLDK1";

/// A cache file's contents: [`MAGIC`], the key's length (u64 LE), the CUBIN's length (u64
/// LE), a checksum of everything after it (u64 LE: two FNV-1a hashes with different seeds,
/// folded), the key, then the CUBIN.
pub(crate) fn encode_entry(key: &str, cubin: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + key.len() + cubin.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u64).to_le_bytes());
    out.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(key.as_bytes(), cubin).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(cubin);
    out
}

fn checksum(key: &[u8], cubin: &[u8]) -> u64 {
    let a = fnv64(cubin, fnv64(key, 1));
    let b = fnv64(cubin, fnv64(key, 0x5bd1_e995));
    a ^ b.rotate_left(29)
}

/// Why a cache file was not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reject {
    /// Shorter than its header, or than the lengths its header gives, or longer.
    Length,
    /// Not a cache file of this format (garbage, an older format, an empty file).
    Magic,
    /// A file written for another key (another source, architecture, NVRTC, options,
    /// cufold version): a swapped or misnamed file.
    Key,
    /// The contents do not match the checksum written with them.
    Checksum,
}

/// The CUBIN stored in `file` for `key`, or why `file` is not exactly what [`encode_entry`]
/// wrote for `key`. A pure function of the bytes.
pub(crate) fn decode_entry<'a>(file: &'a [u8], key: &str) -> std::result::Result<&'a [u8], Reject> {
    if file.len() < 32 {
        return Err(if file.len() >= 8 && &file[..8] != MAGIC {
            Reject::Magic
        } else {
            Reject::Length
        });
    }
    if &file[..8] != MAGIC {
        return Err(Reject::Magic);
    }
    let word = |i: usize| u64::from_le_bytes(file[i..i + 8].try_into().unwrap());
    let (key_len, bin_len, sum) = (word(8), word(16), word(24));
    let body = &file[32..];
    if Some(body.len() as u64) != key_len.checked_add(bin_len) {
        return Err(Reject::Length);
    }
    let (stored_key, cubin) = body.split_at(key_len as usize);
    if stored_key != key.as_bytes() {
        return Err(Reject::Key);
    }
    if checksum(stored_key, cubin) != sum || cubin.is_empty() {
        return Err(Reject::Checksum);
    }
    Ok(cubin)
}

/// What reading a cache file gave.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// No file (or the cache is off): compile.
    Missing,
    /// A file that is not what was written for the key: compile and replace it.
    Rejected(Reject),
    /// The CUBIN written for the key.
    Found(Vec<u8>),
}

/// Reads `path` and checks it against `key`. A path that cannot be read (missing, a
/// directory, no permission) is `Missing`.
pub(crate) fn read_entry(path: &Path, key: &str) -> Lookup {
    let Ok(bytes) = std::fs::read(path) else {
        return Lookup::Missing;
    };
    match decode_entry(&bytes, key) {
        Ok(cubin) => Lookup::Found(cubin.to_vec()),
        Err(why) => Lookup::Rejected(why),
    }
}

/// Compiles (or finds in a cache) `src` for `ctx`'s device and returns its function `name`.
/// The memory cache's key is the context, the architecture, the name and the whole source:
/// whatever makes a kernel's source is in its key.
pub(crate) fn load_function(
    ctx: &Arc<CudaContext>,
    arch: &str,
    disk: &DiskCache,
    name: &str,
    src: String,
) -> Result<(CudaFunction, Origin)> {
    let mem_key = (ctx.cu_ctx() as usize, format!("{arch}|{name}|{src}"));
    if let Some(f) = memory_cache().lock().unwrap().get(&mem_key) {
        return Ok((f.clone(), Origin::Memory));
    }
    let options = jit::compile_options(arch);
    let key = entry_key(
        &src,
        arch,
        &options,
        jit::nvrtc_version(),
        jit::headers_hash(),
    );
    let file = disk.dir().map(|d| d.join(entry_file_name(&key, arch)));
    let lookup = file
        .as_deref()
        .map_or(Lookup::Missing, |f| read_entry(f, &key));
    let mut rejected = matches!(lookup, Lookup::Rejected(_));
    let mut module = None;
    if let Lookup::Found(bin) = lookup {
        // A file that passed the checks is what this process (or another) wrote for this
        // key; should the driver still refuse it, it is compiled and replaced like any
        // rejected file.
        match ctx.load_module(cudarc::nvrtc::Ptx::from_binary(bin)) {
            Ok(m) => module = Some((m, Origin::Disk)),
            Err(_) => rejected = true,
        }
    }
    let (module, origin) = match module {
        Some(m) => m,
        None => {
            let bin = jit::compile(&src, &options)?;
            if let Some(f) = &file {
                store(f, &encode_entry(&key, &bin));
            }
            let m = ctx
                .load_module(cudarc::nvrtc::Ptx::from_binary(bin))
                .map_err(|e| super::compat::load_error("loading a compiled kernel", e))?;
            (m, Origin::Compiled { rejected })
        }
    };
    let f = module
        .load_function(name)
        .map_err(|e| Error::driver("finding a kernel in its module", e))?;
    memory_cache().lock().unwrap().insert(mem_key, f.clone());
    Ok((f, origin))
}

/// Writes a cache file: to a temporary file of this process and thread in the same
/// directory, then renamed over `file` (atomic on one file system: a reader sees the old
/// file or the new one, never a mix, and processes filling one directory at once each
/// write whole files). A failure (read-only or full file system, a directory where the file
/// should be) costs a compile in a later process and one warning on stderr per directory
/// per process; it is never an error. Returns whether the file was written.
pub(crate) fn store(file: &Path, contents: &[u8]) -> bool {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let Some(dir) = file.parent() else {
        return false;
    };
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        file.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, contents))
        .and_then(|()| std::fs::rename(&tmp, file));
    match written {
        Ok(()) => true,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            warn_once(dir, &e);
            false
        }
    }
}

/// One line on stderr the first time a cache directory cannot be written in this process.
fn warn_once(dir: &Path, e: &std::io::Error) {
    static WARNED: OnceLock<Mutex<Vec<PathBuf>>> = OnceLock::new();
    let mut warned = WARNED.get_or_init(Default::default).lock().unwrap();
    if !warned.iter().any(|d| d == dir) {
        warned.push(dir.to_path_buf());
        eprintln!(
            "cufold: warning: cannot write compiled kernels to {} ({e}); they will be compiled \
             again in the next process (set CUFOLD_CACHE_DIR to another directory, or to off)",
            dir.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_cache_location_can_be_set_or_turned_off() {
        assert_eq!(DiskCache::Off.dir(), None);
        assert_eq!(
            DiskCache::Dir("/tmp/x".into()).dir(),
            Some(PathBuf::from("/tmp/x"))
        );
    }

    fn key_for(arch: &str) -> String {
        let options = jit::compile_options(arch);
        entry_key(
            "extern \"C\" __global__ void k() {}",
            arch,
            &options,
            (13, 0),
            42,
        )
    }

    fn cubin() -> Vec<u8> {
        // Stands in for a CUBIN: an ELF header and some code-like bytes.
        let mut b = b"\x7fELF\x02\x01\x01".to_vec();
        b.extend((0..200u32).map(|i| (i * 37 % 251) as u8));
        b
    }

    #[test]
    fn an_entry_reads_back_for_its_key() {
        let key = key_for("sm_90");
        let file = encode_entry(&key, &cubin());
        assert_eq!(decode_entry(&file, &key), Ok(&cubin()[..]));
    }

    #[test]
    fn every_flipped_byte_is_rejected() {
        let key = key_for("sm_90");
        let good = encode_entry(&key, &cubin());
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] ^= flip;
                assert!(
                    decode_entry(&bad, &key).is_err(),
                    "byte {i} ^ {flip:#x} went unnoticed"
                );
            }
        }
        // Two bytes flipped in the CUBIN, which would need the checksum to collide.
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 1] ^= 1;
        bad[n - 9] ^= 1;
        assert_eq!(decode_entry(&bad, &key), Err(Reject::Checksum));
    }

    #[test]
    fn every_truncation_and_extension_is_rejected() {
        let key = key_for("sm_90");
        let good = encode_entry(&key, &cubin());
        for len in 0..good.len() {
            assert!(decode_entry(&good[..len], &key).is_err(), "cut at {len}");
        }
        let half = &good[..good.len() / 2];
        assert_eq!(decode_entry(half, &key), Err(Reject::Length));
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(decode_entry(&longer, &key), Err(Reject::Length));
    }

    #[test]
    fn empty_and_garbage_files_are_rejected() {
        let key = key_for("sm_90");
        assert_eq!(decode_entry(b"", &key), Err(Reject::Length));
        let garbage: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        assert_eq!(decode_entry(&garbage, &key), Err(Reject::Magic));
        // A raw CUBIN, as the cache held before this format.
        assert_eq!(decode_entry(&cubin(), &key), Err(Reject::Magic));
        // The right magic, then garbage lengths.
        let mut bad = MAGIC.to_vec();
        bad.extend_from_slice(&[0xff; 40]);
        assert_eq!(decode_entry(&bad, &key), Err(Reject::Length));
    }

    #[test]
    fn swapped_files_are_rejected() {
        let (ka, kb) = (key_for("sm_90"), key_for("sm_90").replace("k()", "j()"));
        let (fa, fb) = (encode_entry(&ka, &cubin()), encode_entry(&kb, b"other"));
        assert_eq!(decode_entry(&fa, &kb), Err(Reject::Key));
        assert_eq!(decode_entry(&fb, &ka), Err(Reject::Key));
        assert_ne!(entry_file_name(&ka, "sm_90"), entry_file_name(&kb, "sm_90"));
    }

    #[test]
    fn another_architecture_nvrtc_or_option_is_another_key() {
        let k90 = key_for("sm_90");
        let k80 = key_for("sm_80");
        assert_ne!(k80, k90);
        assert!(k90.contains("arch sm_90") && k90.contains("--gpu-architecture=sm_90"));
        assert_eq!(
            decode_entry(&encode_entry(&k80, &cubin()), &k90),
            Err(Reject::Key)
        );
        let src = "x";
        let opts = jit::compile_options("sm_90");
        let base = entry_key(src, "sm_90", &opts, (13, 0), 1);
        assert_ne!(
            base,
            entry_key(src, "sm_90", &opts, (13, 1), 1),
            "NVRTC version"
        );
        assert_ne!(base, entry_key(src, "sm_90", &opts, (13, 0), 2), "headers");
        assert_ne!(
            base,
            entry_key(src, "sm_90", &opts[1..], (13, 0), 1),
            "options"
        );
        assert_ne!(base, entry_key("y", "sm_90", &opts, (13, 0), 1), "source");
        assert!(entry_file_name(&k80, "sm_80").ends_with("-sm_80.cubin"));
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("cufold-cache-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn files_are_read_back_checked_and_replaced() {
        let dir = temp_dir("files");
        let key = key_for("sm_90");
        let path = dir.join(entry_file_name(&key, "sm_90"));
        assert_eq!(read_entry(&path, &key), Lookup::Missing);
        assert!(store(&path, &encode_entry(&key, &cubin())));
        assert_eq!(read_entry(&path, &key), Lookup::Found(cubin()));
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 3] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_entry(&path, &key), Lookup::Rejected(Reject::Checksum));
        assert!(store(&path, &encode_entry(&key, &cubin())));
        assert_eq!(read_entry(&path, &key), Lookup::Found(cubin()));
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_where_a_file_should_be_is_a_miss_and_no_error() {
        let dir = temp_dir("dir");
        let key = key_for("sm_90");
        let path = dir.join(entry_file_name(&key, "sm_90"));
        std::fs::create_dir_all(path.join("inside")).unwrap();
        assert_eq!(read_entry(&path, &key), Lookup::Missing);
        assert!(
            !store(&path, &encode_entry(&key, &cubin())),
            "a rename over a directory"
        );
        assert!(path.join("inside").is_dir());
        // A file where the cache directory should be.
        let file_as_dir = dir.join("not-a-dir");
        std::fs::write(&file_as_dir, b"x").unwrap();
        let below = file_as_dir.join("k.cubin");
        assert_eq!(read_entry(&below, &key), Lookup::Missing);
        assert!(!store(&below, &encode_entry(&key, &cubin())));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn processes_filling_one_directory_at_once_leave_whole_files() {
        let dir = temp_dir("race");
        let key = key_for("sm_90");
        let path = dir.join(entry_file_name(&key, "sm_90"));
        let entry = encode_entry(&key, &cubin());
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        assert!(store(&path, &entry));
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..2000 {
                    match read_entry(&path, &key) {
                        Lookup::Missing | Lookup::Found(_) => {}
                        Lookup::Rejected(why) => panic!("a reader saw a partial file: {why:?}"),
                    }
                }
            });
        });
        assert_eq!(read_entry(&path, &key), Lookup::Found(cubin()));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fnv_is_stable() {
        assert_eq!(fnv64(b"", 0), 0xcbf29ce484222325);
        assert_eq!(fnv64(b"a", 0), 0xaf63dc4c8601ec8c);
    }
}
