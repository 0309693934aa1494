//! The GPU core that every primitive is built on: the [`Gpu`] handle (the caller's stream,
//! the device's properties, [`GpuOptions`]), its scratch arena (one ticket word: a counter
//! and an epoch), kernel sources and NVRTC (`jit`), and the compiled-kernel cache (`cache`).
//!
//! The primitives (`crate::reduce`, `crate::scan`) each add their own `impl Gpu` block with
//! their entry points; this module knows none of them.

pub(crate) mod cache;
pub(crate) mod compat;
mod hash;
pub(crate) mod jit;
mod options;
pub(crate) mod scratch;

pub use cache::DiskCache;
pub use jit::{cuda_header, cuda_headers};
pub use options::GpuOptions;

use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::ops::CudaOp;
use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What the launch planners need to know about the device.
///
/// ```
/// let h100 = cufold::gpu::DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// assert_eq!(h100.sm_count, 132);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceProps {
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// Resident threads per multiprocessor.
    pub max_threads_per_sm: u32,
}

impl DeviceProps {
    /// Blocks of `block` threads resident on the whole device at once (one wave), by thread
    /// count alone: at least one a multiprocessor.
    pub(crate) fn resident_blocks(&self, block: u32) -> u64 {
        self.sm_count as u64 * (self.max_threads_per_sm / block).max(1) as u64
    }
}

/// The value in `cell`, built by `make` on first use: for what a handle compiles or builds
/// lazily (a kernel for one schedule, a whole-array handle). A failed `make` leaves the cell
/// empty, so a later call tries again.
pub(crate) fn get_or_try<T>(
    cell: &std::sync::OnceLock<T>,
    make: impl FnOnce() -> Result<T>,
) -> Result<&T> {
    if let Some(v) = cell.get() {
        return Ok(v);
    }
    let v = make()?;
    Ok(cell.get_or_init(|| v))
}

/// Blocks of `f` (`block` threads, `dynamic` bytes of dynamic shared memory each) that the
/// whole device holds at once, as its occupancy calculator says (registers and shared
/// memory included, at least one a multiprocessor): the grid of a kernel whose blocks take
/// work in turn, where a block left over for a second round would take its share alone
/// after the others finish. `what` names the kernel in the error.
pub(crate) fn resident_grid(
    f: &cudarc::driver::CudaFunction,
    block: u32,
    dynamic: usize,
    sm_count: u32,
    what: &str,
) -> Result<u64> {
    let per_sm = f
        .occupancy_max_active_blocks_per_multiprocessor(block, dynamic, None)
        .map_err(|e| Error::driver(&format!("asking how many {what} blocks fit"), e))?;
    Ok(per_sm.max(1) as u64 * sm_count as u64)
}

/// Lets `f` take `bytes` of dynamic shared memory a block, which its launches then pass:
/// past 48 KiB with what it declares, a kernel must ask for it (0 asks nothing). Errors if
/// the device has less to give; `what` says which kernel and how to ask for less.
pub(crate) fn allow_dynamic_shared(
    f: &cudarc::driver::CudaFunction,
    bytes: usize,
    what: impl FnOnce() -> String,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    use cudarc::driver::sys::CUfunction_attribute as A;
    f.set_attribute(
        A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        bytes as i32,
    )
    .map_err(|e| Error::driver(&what(), e))
}

/// Checks a block size: a power of two from 32 to 1024, which every kernel assumes.
pub(crate) fn check_block(block: u32) -> Result<()> {
    if !(32..=1024).contains(&block) || !block.is_power_of_two() {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "block size {block} is not supported: use a power of two from 32 to 1024 \
                 (CUDA allows at most 1024 threads per block)"
            ),
        ));
    }
    Ok(())
}

/// A first call into the driver, after [`probe_libraries`], with cudarc's panics and errors
/// turned into [`ErrorKind::NoCuda`] errors (`what` says what failed).
fn guarded<T>(
    call: impl FnOnce() -> std::result::Result<T, cudarc::driver::DriverError> + std::panic::UnwindSafe,
    what: impl FnOnce() -> String,
) -> Result<T> {
    probe_libraries()?;
    std::panic::catch_unwind(call)
        .map_err(|_| {
            Error::new(
                ErrorKind::NoCuda,
                "the CUDA driver could not be initialised",
            )
        })?
        .map_err(|e| Error::new(ErrorKind::NoCuda, format!("{}: {e:?}", what())).with_source(e))
}

/// Whether one of the libraries `names` (cudarc's names, such as `"cuda"` or `"nvrtc"`) can
/// be loaded under one of the file names cudarc tries for it. The same probe whether cudarc
/// loads its libraries at run time (where it panics on a missing one) or another crate in
/// the program has them linked (where cudarc has no probe of its own).
pub(crate) fn library_present(names: &[&str]) -> bool {
    names
        .iter()
        .flat_map(|name| library_file_names(name))
        // SAFETY: loading a CUDA library runs no initialisation code that cudarc's own
        // loading would not run; the handle is dropped at once.
        .any(|file| unsafe { libloading::Library::new(file) }.is_ok())
}

/// The file names under which cudarc's run-time loading looks for the library `name`, in its
/// order, for the CUDA version of cudarc's bindings: the probe must find a library exactly
/// where cudarc would, or cudarc would panic after the probe said yes.
pub(crate) fn library_file_names(name: &str) -> Vec<String> {
    use std::env::consts::{DLL_PREFIX as P, DLL_SUFFIX as S};
    let version = cudarc::driver::sys::CUDA_VERSION;
    let (major, minor) = (version / 1000, version % 1000 / 10);
    let w = if cfg!(target_pointer_width = "32") {
        "32"
    } else {
        "64"
    };
    let mut names = vec![
        format!("{P}{name}{S}"),
        format!("{P}{name}{w}{S}"),
        format!("{P}{name}{w}_{major}{S}"),
        format!("{P}{name}{w}_{major}{minor}{S}"),
        format!("{P}{name}{w}_{major}{minor}_0{S}"),
        format!("{P}{name}{w}_{major}0_{minor}{S}"),
    ];
    names.extend(["10", "11", "12"].map(|m| format!("{P}{name}{w}_{m}{S}")));
    names.push(format!("{P}{name}{w}_{major}0_0{S}"));
    names.push(format!("{P}{name}{w}_9{S}"));
    names.push(format!("{P}{name}{S}.{major}"));
    names.extend(["12", "11", "10", "9", "1"].map(|m| format!("{P}{name}{S}.{m}")));
    names
}

/// Checks that the CUDA driver and NVRTC libraries can be loaded, so that cudarc (which
/// panics when it cannot find them) is never asked to.
fn probe_libraries() -> Result<()> {
    if !library_present(&["cuda", "nvcuda"]) {
        return Err(Error::new(
            ErrorKind::NoCuda,
            "no CUDA driver: libcuda could not be loaded (install the NVIDIA driver, or use cufold::Cpu)",
        ));
    }
    jit::probe_nvrtc()?;
    Ok(())
}

/// How a [`Gpu`] handle got the kernels it asked for: compiled by NVRTC, loaded from the
/// disk cache, or found in this process's memory cache ([`Gpu::kernel_stats`]).
///
/// ```
/// let s = cufold::gpu::KernelStats::default();
/// assert_eq!(s.compiled + s.from_disk + s.from_memory, 0);
/// assert!(s.rejected_from_disk <= s.compiled);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Kernels compiled with NVRTC.
    pub compiled: u64,
    /// Kernels loaded from the disk cache.
    pub from_disk: u64,
    /// Kernels found in the memory cache (compiled or loaded earlier in this process).
    pub from_memory: u64,
    /// Of the kernels compiled, those whose disk-cache file was there but was not exactly
    /// what was written for the kernel (corrupt, truncated, swapped with another, written
    /// for another architecture or NVRTC version): never loaded, compiled and replaced.
    pub rejected_from_disk: u64,
}

pub(crate) struct Inner {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) props: DeviceProps,
    /// Shared memory of one multiprocessor, in bytes (the large scan tiles' check).
    pub(crate) shared_per_sm: usize,
    pub(crate) arch: String,
    name: String,
    opts: GpuOptions,
    pub(crate) scratch: scratch::Scratch,
    stats: Mutex<KernelStats>,
    /// What the convenient forms keep per operator type and CUDA text ([`Gpu::memo`]).
    memo: Mutex<HashMap<(TypeId, CudaOp), Box<dyn Any + Send + Sync>>>,
}

/// A handle for running cufold on a CUDA stream: the caller's stream, the caller's buffers.
///
/// Cheap to clone. It holds a small temporary buffer (the per-block partials of large
/// reductions, the look-back state of scans), allocated once and grown when needed; work
/// is only ever enqueued on the handle's stream, in order, so reuse is safe without host
/// synchronisation. A handle on the per-thread default stream (`per_thread_stream()`,
/// candle's) may be shared by threads: each thread's launches run on its own stream, so
/// each thread gets its own buffer, kept until the handle is dropped.
///
/// ```no_run
/// let gpu = cufold::Gpu::open(0)?; // or Gpu::new(&stream) on a stream of your own
/// let x = gpu.stream().clone_htod(&[1.0f32, 2.0, 3.0]).unwrap();
/// let total: f32 = gpu.reduce(&x, cufold::ops::Sum)?;
/// let best = gpu.reduce(&x, cufold::ops::ArgMax)?;
/// assert_eq!((total, best.index), (6.0, 2));
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("device", &self.inner.name)
            .field("arch", &self.inner.arch)
            .finish()
    }
}

impl Gpu {
    /// A handle on `stream` (a stream of your own cudarc context) with default options.
    ///
    /// Errors with [`ErrorKind::NoCuda`] when NVRTC cannot be loaded, or when the driver,
    /// NVRTC and the device cannot work together (the checks [`Gpu::open`] describes). (cudarc's
    /// `CudaContext::new` panics when there is no driver: [`Gpu::open`] checks first.)
    ///
    /// ```no_run
    /// let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    /// let gpu = cufold::Gpu::new(&ctx.default_stream())?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn new(stream: &Arc<CudaStream>) -> Result<Gpu> {
        Gpu::with_options(stream, GpuOptions::default())
    }

    /// A handle on `stream` with `opts`.
    ///
    /// ```no_run
    /// let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    /// let opts = cufold::GpuOptions::default().disk_cache(cufold::DiskCache::Off);
    /// let gpu = cufold::Gpu::with_options(&ctx.default_stream(), opts)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn with_options(stream: &Arc<CudaStream>, opts: GpuOptions) -> Result<Gpu> {
        probe_libraries()?;
        let ctx = stream.context();
        let attr = |a| {
            ctx.attribute(a)
                .map_err(|e| Error::driver("reading device properties", e))
        };
        let props = DeviceProps {
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            max_threads_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?
                as u32,
        };
        let shared_per_sm =
            attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)? as usize;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| Error::driver("reading the compute capability", e))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown CUDA device".into());
        let arch = compat::check_device(&name, (major, minor))?;
        Ok(Gpu {
            inner: Arc::new(Inner {
                stream: stream.clone(),
                props,
                shared_per_sm,
                arch,
                name,
                opts,
                scratch: scratch::Scratch::default(),
                stats: Mutex::new(KernelStats::default()),
                memo: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Opens device `ordinal` and a handle on its default stream, or explains why not:
    /// no driver, no NVRTC, or no such device is an [`ErrorKind::NoCuda`] error, never a
    /// panic.
    ///
    /// Kernels are compiled by NVRTC for the device's architecture (`sm_XY` from its compute
    /// capability; where NVRTC does not list it, the newest it lists of the same major version,
    /// whose code the device runs). Every handle ([`Gpu::new`] too) first checks that the
    /// pieces work together, and the [`ErrorKind::NoCuda`] error names the versions, the
    /// files and what to install:
    ///
    /// - **NVRTC of a newer CUDA major version than the driver** (NVRTC 13 with a driver for
    ///   CUDA 12.x): what it compiles cannot be loaded. Install a driver for that CUDA
    ///   version (580 or later for CUDA 13), or make an NVRTC no newer than the driver's CUDA
    ///   the one loaded: libnvrtc is loaded as `libnvrtc.so` before the versioned names, so
    ///   link it under that name in a directory first on `LD_LIBRARY_PATH` (pip's
    ///   `nvidia-cuda-nvrtc-cu12==12.X.*` has it in `site-packages/nvidia/cuda_nvrtc/lib`,
    ///   `nvidia-cuda-nvrtc==13.X.*` in `site-packages/nvidia/cu13/lib`). A newer *minor*
    ///   version of the driver's major is fine (CUDA's minor-version compatibility: NVRTC 13.5's
    ///   kernels run on driver 580, CUDA 13.0); should a driver refuse one of its kernels
    ///   anyway, the call that loads it gives the same kind of error instead of the driver's
    ///   bare code.
    /// - **NVRTC that cannot compile for the device**: the error names the device, its `sm_XY`
    ///   and the newest (or, for a device NVRTC no longer supports, the oldest) architecture
    ///   this NVRTC compiles for; use a newer NVRTC (an older one, CUDA 12.x, for devices
    ///   before sm_75).
    ///
    /// ```
    /// match cufold::Gpu::open(0) {
    ///     Ok(gpu) => println!("running on {}", gpu.device_name()),
    ///     Err(e) => println!("no GPU: {e}"),
    /// }
    /// ```
    pub fn open(ordinal: usize) -> Result<Gpu> {
        let ctx = guarded(
            || CudaContext::new(ordinal),
            || format!("CUDA device {ordinal} could not be opened"),
        )?;
        Gpu::new(&ctx.default_stream())
    }

    /// The number of CUDA devices, or why there are none to count: no driver is an
    /// [`ErrorKind::NoCuda`] error, never a panic (the ordinals [`Gpu::open`] takes are
    /// `0 .. device_count()`).
    ///
    /// ```
    /// match cufold::Gpu::device_count() {
    ///     Ok(n) => println!("{n} CUDA devices"),
    ///     Err(e) => println!("no GPU: {e}"),
    /// }
    /// ```
    pub fn device_count() -> Result<usize> {
        let n = guarded(CudaContext::device_count, || {
            "the CUDA devices could not be counted".to_string()
        })?;
        Ok(n.max(0) as usize)
    }

    /// The stream everything is enqueued on.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let x = gpu.stream().clone_htod(&[1u32, 2, 3]).unwrap();
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// The device's name, as the driver reports it.
    ///
    /// ```no_run
    /// println!("{}", cufold::Gpu::open(0)?.device_name());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn device_name(&self) -> &str {
        &self.inner.name
    }

    /// Keeps up to `bytes` of freed memory in the device's default memory pool across the
    /// stream's waits, and returns the amount kept before. The pool (where `cuMemAllocAsync`,
    /// and so cudarc's and cufold's allocations, take memory) gives freed memory back to the
    /// device at every wait by default (0 bytes kept); an allocation after a wait then maps
    /// its memory anew. The forms that allocate their outputs after a wait (by key: they
    /// count the runs first) pay that on every call: 0.5 to 0.7 ms of 2.0 to 2.2 for
    /// `reduce_by_key` over 2^24 short runs on an H100 (BENCHMARKS.md). `u64::MAX` keeps
    /// everything, as PyTorch's and CuPy's caching allocators do.
    ///
    /// This is the device's setting for the whole process, not the handle's: every
    /// allocation from that pool on the device sees it. cufold never sets it by itself.
    ///
    /// Errors: the driver's ([`ErrorKind::Driver`]).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let before = gpu.keep_pool_memory(u64::MAX)?;
    /// assert_eq!(gpu.keep_pool_memory(before)?, u64::MAX);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn keep_pool_memory(&self, bytes: u64) -> Result<u64> {
        use cudarc::driver::result::{device, mem_pool};
        use cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD as THRESHOLD;
        let (mut before, mut after) = (0u64, bytes);
        // SAFETY: the handle's device, whose default pool lives as long as its context; the
        // release threshold is a u64, read and written through the pointers.
        unsafe {
            let pool = device::get_default_mem_pool(self.stream().context().cu_device())
                .map_err(|e| Error::driver("finding the device's memory pool", e))?;
            mem_pool::get_attribute(pool, THRESHOLD, (&mut before as *mut u64).cast())
                .map_err(|e| Error::driver("reading the memory pool's release threshold", e))?;
            mem_pool::set_attribute(pool, THRESHOLD, (&mut after as *mut u64).cast())
                .map_err(|e| Error::driver("setting the memory pool's release threshold", e))?;
        }
        Ok(before)
    }

    /// The properties the launch planners use.
    ///
    /// ```no_run
    /// assert!(cufold::Gpu::open(0)?.props().sm_count > 0);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn props(&self) -> DeviceProps {
        self.inner.props
    }

    /// The options the handle was made with.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// assert_eq!(gpu.options(), &cufold::GpuOptions::default());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn options(&self) -> &GpuOptions {
        &self.inner.opts
    }

    /// The kernel `name` compiled from `src`, from the memory cache, the disk cache or
    /// NVRTC. The memory cache is keyed by the whole source (with the kernel's name), so
    /// that two sources never share a kernel: an operator whose CUDA text embeds a value
    /// (a constant written with `ops::cuda_f64`) gets a kernel for each value.
    pub(crate) fn kernel(&self, name: &str, src: String) -> Result<CudaFunction> {
        let inner = &self.inner;
        let (f, origin) = cache::load_function(
            inner.stream.context(),
            &inner.arch,
            inner.opts.get_disk_cache(),
            name,
            src,
        )?;
        let mut stats = inner.stats.lock().unwrap();
        match origin {
            cache::Origin::Compiled { rejected } => {
                stats.compiled += 1;
                stats.rejected_from_disk += rejected as u64;
            }
            cache::Origin::Disk => stats.from_disk += 1,
            cache::Origin::Memory => stats.from_memory += 1,
        }
        Ok(f)
    }

    /// How this handle got its kernels so far: NVRTC compiles, disk-cache loads and
    /// memory-cache hits. A new value of an operator's run-time parameters is a memory-cache
    /// hit (or no look-up at all, with [`Reducer::with_op`](crate::Reducer::with_op)).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let _ = gpu.reducer::<f32, _>(cufold::ops::Sum)?;
    /// let s = gpu.kernel_stats();
    /// assert_eq!(s.compiled + s.from_disk + s.from_memory, 1);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn kernel_stats(&self) -> KernelStats {
        *self.inner.stats.lock().unwrap()
    }

    /// The value of type `V` this handle keeps for the operator's CUDA text `cuda`, made by
    /// `make` the first time (a failure is not kept): what the
    /// convenient forms (`Gpu::reduce`, `Gpu::scan`) keep per operator type and CUDA text,
    /// so that a call costs a map look-up instead of a kernel look-up. Keyed by the text as
    /// well as the type: two values of one type whose CUDA text differs (a value compiled
    /// into the source) never share kernels. `V` must not hold the handle (it would keep
    /// itself alive).
    pub(crate) fn memo<V: Clone + Send + Sync + 'static>(
        &self,
        cuda: CudaOp,
        make: impl FnOnce() -> Result<V>,
    ) -> Result<V> {
        let key = (TypeId::of::<V>(), cuda);
        if let Some(v) = self.inner.memo.lock().unwrap().get(&key) {
            return Ok(v
                .downcast_ref::<V>()
                .expect("memo entries have their key's type")
                .clone());
        }
        let v = make()?;
        self.inner
            .memo
            .lock()
            .unwrap()
            .insert(key, Box::new(v.clone()));
        Ok(v)
    }

    /// A zeroed device buffer of `len` values on the handle's stream.
    pub(crate) fn alloc<T: DeviceValue>(&self, len: usize) -> Result<CudaSlice<T>> {
        self.stream()
            .alloc_zeros::<T>(len)
            .map_err(|e| Error::driver("allocating device memory", e))
    }

    /// `len` values of device memory on this GPU's stream, left as they are: no memset, for
    /// buffers a kernel fills before anything reads them.
    ///
    /// # Safety
    ///
    /// Every value is written on the stream before any is read.
    pub(crate) unsafe fn alloc_uninit<T: DeviceValue>(&self, len: usize) -> Result<CudaSlice<T>> {
        // SAFETY: the caller writes every value before reading it.
        unsafe { self.stream().alloc::<T>(len) }
            .map_err(|e| Error::driver("allocating device memory", e))
    }
}
