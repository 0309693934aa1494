//! Options of a [`Gpu`](super::Gpu) handle: what every primitive on the handle shares.

use super::cache::DiskCache;

/// Options of a [`Gpu`](super::Gpu) handle, builder style: each setter takes and returns the
/// options, and `get_NAME` reads what `NAME` set.
///
/// What only one primitive uses (block sizes, the scan's block algorithm) is configured where
/// that primitive is built: [`ReduceConfig`](crate::reduce::ReduceConfig) with
/// [`Gpu::reducer_with`](super::Gpu::reducer_with), [`ScanConfig`](crate::scan::ScanConfig)
/// with [`Gpu::scanner_with`](super::Gpu::scanner_with).
///
/// ```
/// use cufold::{DiskCache, GpuOptions};
/// let opts = GpuOptions::default().disk_cache(DiskCache::Off);
/// assert_eq!(opts.get_disk_cache(), &DiskCache::Off);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GpuOptions {
    disk_cache: DiskCache,
}

impl GpuOptions {
    /// Where compiled kernels are cached between processes (default [`DiskCache::Default`]).
    ///
    /// ```
    /// let opts = cufold::GpuOptions::default().disk_cache(cufold::DiskCache::Dir("/tmp/k".into()));
    /// # let _ = opts;
    /// ```
    pub fn disk_cache(mut self, cache: DiskCache) -> Self {
        self.disk_cache = cache;
        self
    }

    /// The disk cache these options ask for.
    ///
    /// ```
    /// assert_eq!(cufold::GpuOptions::default().get_disk_cache(), &cufold::DiskCache::Default);
    /// ```
    pub fn get_disk_cache(&self) -> &DiskCache {
        &self.disk_cache
    }
}
