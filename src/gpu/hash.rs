//! The one hash the GPU core uses for names and keys: below both the kernel sources
//! (`jit`: the headers' hash) and the kernel cache (`cache`: file names and checksums).

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
