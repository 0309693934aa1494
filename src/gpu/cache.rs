//! Compiled kernels, kept in memory (per CUDA context) and on disk (so that a second process
//! does not compile again), and the loader every primitive gets its functions from.

use super::jit;
use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, CudaFunction};
use std::collections::HashMap;
use std::path::PathBuf;
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

/// A 64-bit FNV-1a hash: stable across Rust versions and platforms (for cache keys and file
/// names).
pub(crate) fn fnv64(bytes: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf29ce484222325u64 ^ seed;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
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
    Compiled,
}

/// Compiles (or finds in a cache) `src` for `ctx`'s device and returns its function `name`.
/// `key` identifies `src` cheaply in the in-memory cache.
pub(crate) fn load_function(
    ctx: &Arc<CudaContext>,
    arch: &str,
    disk: &DiskCache,
    key: &str,
    name: &str,
    src: impl FnOnce() -> String,
) -> Result<(CudaFunction, Origin)> {
    let mem_key = (ctx.cu_ctx() as usize, format!("{arch}|{key}"));
    if let Some(f) = memory_cache().lock().unwrap().get(&mem_key) {
        return Ok((f.clone(), Origin::Memory));
    }
    let src = src();
    let options = jit::compile_options(arch);
    let id = format!(
        "{:016x}{:016x}-{arch}",
        fnv64(src.as_bytes(), jit::headers_hash()),
        fnv64(
            format!(
                "{options:?}{}{:?}",
                env!("CARGO_PKG_VERSION"),
                jit::nvrtc_version()
            )
            .as_bytes(),
            7
        )
    );
    let file = disk.dir().map(|d| d.join(format!("{id}.cubin")));
    let mut cubin = file.as_ref().and_then(|f| std::fs::read(f).ok());
    let (module, origin) = match cubin
        .take()
        .map(|bin| ctx.load_module(cudarc::nvrtc::Ptx::from_binary(bin)))
    {
        Some(Ok(m)) => (m, Origin::Disk),
        _ => {
            let bin = jit::compile(&src, &options)?;
            if let Some(f) = &file {
                store(f, &bin);
            }
            let m = ctx
                .load_module(cudarc::nvrtc::Ptx::from_binary(bin))
                .map_err(|e| Error::driver("loading a compiled kernel", e))?;
            (m, Origin::Compiled)
        }
    };
    let f = module
        .load_function(name)
        .map_err(|e| Error::driver("finding a kernel in its module", e))?;
    memory_cache().lock().unwrap().insert(mem_key, f.clone());
    Ok((f, origin))
}

/// Writes a cache file atomically; failures only cost a recompilation later.
fn store(file: &std::path::Path, bin: &[u8]) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        file.file_name().unwrap().to_string_lossy(),
        std::process::id()
    ));
    if std::fs::write(&tmp, bin).is_ok() && std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
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

    #[test]
    fn fnv_is_stable() {
        assert_eq!(fnv64(b"", 0), 0xcbf29ce484222325);
        assert_eq!(fnv64(b"a", 0), 0xaf63dc4c8601ec8c);
    }
}
