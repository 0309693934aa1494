//! The runs of equal consecutive keys on the GPU: the run kernels (kernels/key_runs.cuh:
//! heads counted per span, the runs' starts scanned, their starts, keys and lengths
//! scattered) and their cache per key width. Below the segmented primitives: the reduction
//! (`gpu.rs`), the scan (`scan_gpu.rs`) and the by-key forms (`by_key.rs`) take them from
//! here.

use crate::error::{Error, ErrorKind, Result};
use crate::gpu::{get_or_try, jit, resident_grid, Gpu};
use crate::ops::{CudaOp, Sum};
use crate::scan::Scanner;
use cudarc::driver::{
    CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};
use std::sync::OnceLock;

/// Threads per block of the run kernels.
const RUN_BLOCK: u32 = 256;
/// Keys per lane of a warp's span (a span: `32 * RUN_ITEMS` keys, one count of heads each).
const RUN_ITEMS: u32 = 32;
const RUN_SPAN: u64 = 32 * RUN_ITEMS as u64;
/// Spans per block of the run kernels (a warp each).
const RUN_WARPS: u64 = RUN_BLOCK as u64 / 32;

/// The unsigned CUDA type as wide as a key of `bytes` bytes.
pub(super) fn key_word(bytes: usize) -> Result<&'static str> {
    Ok(match bytes {
        1 => "unsigned char",
        2 => "unsigned short",
        4 => "unsigned int",
        8 => "unsigned long long",
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("keys of {bytes} bytes are not supported (1, 2, 4 or 8)"),
            ))
        }
    })
}

/// The CUDA source of the run kernels for keys of `key_bytes` bytes (1, 2, 4 or 8): the
/// count of run heads per span of 1024 keys (and a bit a key for the heads), the scatter of
/// the runs' starts, keys and lengths (kernels/key_runs.cuh).
///
/// ```
/// let src = cufold::segment::runs_kernel_source(4)?;
/// assert!(src.contains("#define CF_OP unsigned int") && src.contains("cufold/key_runs.cuh"));
/// # Ok::<(), cufold::Error>(())
/// ```
pub fn runs_kernel_source(key_bytes: usize) -> Result<String> {
    Ok(jit::kernel_source(
        "key_runs",
        &word_op(key_bytes)?,
        &[
            ("CF_BLOCK", RUN_BLOCK.to_string()),
            ("CF_ITEMS", RUN_ITEMS.to_string()),
        ],
    ))
}

/// Compiles the run kernels (see [`runs_kernel_source`]) for `arch` and returns the CUBIN;
/// it needs NVRTC but no device.
///
/// ```no_run
/// assert!(!cufold::segment::compile_runs_kernel(8, "sm_90")?.is_empty());
/// # Ok::<(), cufold::Error>(())
/// ```
pub fn compile_runs_kernel(key_bytes: usize, arch: &str) -> Result<Vec<u8>> {
    let src = runs_kernel_source(key_bytes)?;
    jit::probe_nvrtc()?;
    jit::compile(&src, &jit::compile_options(arch))
}

/// The "operator" the run kernels are generated for: only the word type of a key.
fn word_op(key_bytes: usize) -> Result<CudaOp> {
    Ok(CudaOp {
        type_name: key_word(key_bytes)?.to_string(),
        source: String::new(),
    })
}

/// The run kernels for keys of one width, and the scan of the per-span counts.
pub(super) struct RunKernels {
    pub(super) gpu: Gpu,
    /// Each kernel and the number of its blocks the device holds at once: the grid of the
    /// count and the scatter, whose warps take spans in turn.
    count: (CudaFunction, u64),
    scatter: (CudaFunction, u64),
    last_lengths: CudaFunction,
    starts: Scanner<u64, Sum>,
}

impl RunKernels {
    pub(super) fn new(gpu: &Gpu, key_bytes: usize) -> Result<RunKernels> {
        let src = runs_kernel_source(key_bytes)?;
        let load = |name: &str| gpu.kernel(name, src.clone());
        // All of a grid's blocks resident at once: a block left for a second round would
        // take its spans alone after the others finish.
        let resident = |name: &str| -> Result<(CudaFunction, u64)> {
            let f = load(name)?;
            let grid = resident_grid(&f, RUN_BLOCK, 0, gpu.props().sm_count, "run-kernel")?;
            Ok((f, grid))
        };
        Ok(RunKernels {
            gpu: gpu.clone(),
            count: resident("cf_run_count")?,
            scatter: resident("cf_run_scatter")?,
            last_lengths: load("cf_run_last_lengths")?,
            starts: gpu.scanner::<u64, Sum>(Sum)?,
        })
    }

    /// `blocks` blocks of the run kernels' size, at most `most` (at least one).
    pub(super) fn config(blocks: u64, most: u64) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (blocks.clamp(1, most) as u32, 1, 1),
            block_dim: (RUN_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Enqueues the count of run heads per span of the `n > 0` keys at `keys`, each
    /// span's heads, and the counts' exclusive sum.
    ///
    /// # Safety
    ///
    /// `keys` holds `n` keys of this width.
    pub(super) unsafe fn starts(&self, keys: u64, n: u64) -> Result<Counted> {
        let stream = self.gpu.stream();
        let spans = n.div_ceil(RUN_SPAN);
        // One more count than spans, left 0, so that the scan's last value is the total.
        let counts = self.gpu.alloc::<u64>(spans as usize + 1)?;
        // SAFETY: the scan writes every start, the count kernel every span's heads.
        let (mut starts, heads) = unsafe {
            (
                self.gpu.alloc_uninit::<u64>(spans as usize + 1)?,
                self.gpu.alloc_uninit::<u32>(spans as usize * 32)?,
            )
        };
        {
            let (counts_ptr, _g) = counts.device_ptr(stream);
            let (heads_ptr, _g2) = heads.device_ptr(stream);
            let mut a = stream.launch_builder(&self.count.0);
            a.arg(&keys)
                .arg(&n)
                .arg(&spans)
                .arg(&counts_ptr)
                .arg(&heads_ptr);
            // SAFETY: (const word*, u64 n, u64 spans, u64* counts, unsigned* heads): the
            // caller's keys, one count and 32 words of heads per span.
            unsafe { a.launch(Self::config(spans.div_ceil(RUN_WARPS), self.count.1)) }
                .map_err(|e| Error::driver("launching the run-count kernel", e))?;
        }
        self.starts.exclusive(&counts, &mut starts)?;
        Ok(Counted {
            counts,
            starts,
            heads,
        })
    }

    /// Enqueues the scatter of the runs' starts of the `n > 0` keys at `keys` into
    /// `offsets`, then `n`; unless they are 0, each run's first key into `keys_out` and
    /// length into `lengths_out`, and the number of runs into `runs`.
    ///
    /// # Safety
    ///
    /// `keys` holds `n` keys of this width, `offsets` room for every run and one more,
    /// `keys_out` and `lengths_out` are 0 or have room for every run, `runs` is 0 or holds
    /// one u64; `counted` is [`Self::starts`]'s for them.
    pub(super) unsafe fn scatter(
        &self,
        keys: u64,
        n: u64,
        counted: &Counted,
        offsets: u64,
        (keys_out, lengths_out): (u64, u64),
        runs: u64,
    ) -> Result<()> {
        let stream = self.gpu.stream();
        let spans = n.div_ceil(RUN_SPAN);
        let (counts_ptr, _g1) = counted.counts.device_ptr(stream);
        let (starts_ptr, _g2) = counted.starts.device_ptr(stream);
        let (heads_ptr, _g3) = counted.heads.device_ptr(stream);
        let mut b = stream.launch_builder(&self.scatter.0);
        b.arg(&keys)
            .arg(&n)
            .arg(&spans)
            .arg(&starts_ptr)
            .arg(&counts_ptr)
            .arg(&heads_ptr)
            .arg(&offsets)
            .arg(&keys_out)
            .arg(&lengths_out)
            .arg(&runs);
        // SAFETY: (const word*, u64, u64, const u64* starts, const u64* counts, const unsigned*
        // heads, u64* offsets, word* keys_out, u64* lengths_out, u64* runs): one offset per
        // run and one more, and one key and one length per run where asked, are written.
        unsafe { b.launch(Self::config(spans.div_ceil(RUN_WARPS), self.scatter.1)) }
            .map_err(|e| Error::driver("launching the run-scatter kernel", e))?;
        if lengths_out == 0 {
            return Ok(());
        }
        let mut c = stream.launch_builder(&self.last_lengths);
        c.arg(&offsets)
            .arg(&spans)
            .arg(&starts_ptr)
            .arg(&counts_ptr)
            .arg(&lengths_out);
        // SAFETY: (const u64* offsets, u64 spans, const u64* starts, const u64* counts, u64*
        // lengths_out): the offsets just written; one length per span with a head.
        unsafe { c.launch(Self::config(spans.div_ceil(RUN_BLOCK as u64), self.count.1)) }
            .map(|_| ())
            .map_err(|e| Error::driver("launching the run-length kernel", e))
    }

    /// Enqueues the offsets of the runs of the `n > 0` keys at `keys` into `offsets` (room
    /// for `n + 1`) and their number into `runs` (one u64).
    ///
    /// # Safety
    ///
    /// `keys` holds `n` keys of this width, `offsets` `n + 1` u64s, `runs` one.
    pub(super) unsafe fn offsets(&self, keys: u64, n: u64, offsets: u64, runs: u64) -> Result<()> {
        // SAFETY: the caller's.
        unsafe {
            let counted = self.starts(keys, n)?;
            self.scatter(keys, n, &counted, offsets, (0, 0), runs)
        }
    }

    /// The per-span counts and starts of the runs of the `n > 0` keys at `keys`
    /// ([`Self::starts`]) and the number of runs, after one wait for the stream.
    ///
    /// # Safety
    ///
    /// `keys` holds `n` keys of this width.
    pub(super) unsafe fn count(&self, keys: u64, n: u64) -> Result<(Counted, u64)> {
        // SAFETY: the caller's keys.
        let counted = unsafe { self.starts(keys, n)? };
        let spans = n.div_ceil(RUN_SPAN) as usize;
        let runs = self
            .gpu
            .stream()
            .clone_dtoh(&counted.starts.slice(spans..))
            .map_err(|e| Error::driver("reading the number of runs", e))?[0];
        Ok((counted, runs))
    }

    /// The runs' offsets of the `n > 0` keys at `keys` (`runs + 1` of them) and their
    /// number, after one wait for the stream (for the number, between the count and the
    /// scatter, so that the offsets take only the memory they need).
    ///
    /// # Safety
    ///
    /// `keys` holds `n` keys of this width.
    pub(super) unsafe fn offsets_counted(
        &self,
        keys: u64,
        n: u64,
    ) -> Result<(CudaSlice<u64>, u64)> {
        // SAFETY: the caller's keys.
        let (counted, runs) = unsafe { self.count(keys, n)? };
        // SAFETY: the same keys, counted; no other outputs.
        let offsets = unsafe { self.scattered(keys, n, &counted, runs, (0, 0))? };
        Ok((offsets, runs))
    }

    /// The `runs + 1` offsets of the `n > 0` keys at `keys`, in a new buffer, scattered
    /// with each run's key and length into `outs` ([`Self::scatter`]'s `keys_out` and
    /// `lengths_out`, 0 for none).
    ///
    /// # Safety
    ///
    /// `keys` holds `n` keys of this width, `counted` and `runs` are [`Self::count`]'s for
    /// them, and each non-zero output has room for `runs` values.
    pub(super) unsafe fn scattered(
        &self,
        keys: u64,
        n: u64,
        counted: &Counted,
        runs: u64,
        outs: (u64, u64),
    ) -> Result<CudaSlice<u64>> {
        // SAFETY: the scatter writes every one of the runs + 1 offsets.
        let mut offsets = unsafe { self.gpu.alloc_uninit::<u64>(runs as usize + 1)? };
        {
            let (off_ptr, _g) = offsets.device_ptr_mut(self.gpu.stream());
            // SAFETY: the caller's keys and outputs; runs + 1 offsets allocated.
            unsafe { self.scatter(keys, n, counted, off_ptr, outs, 0)? };
        }
        Ok(offsets)
    }
}

/// What the count of runs leaves for the scatter: per span of keys, the number of run heads
/// (one more, 0, at the end), their exclusive sum, and the heads (32 words, a bit a key).
pub(super) struct Counted {
    counts: CudaSlice<u64>,
    starts: CudaSlice<u64>,
    heads: CudaSlice<u32>,
}

/// One [`RunKernels`] per key width (1, 2, 4, 8 bytes), built on first use.
#[derive(Default)]
pub(super) struct RunCache([OnceLock<RunKernels>; 4]);

impl RunCache {
    pub(super) fn get(&self, gpu: &Gpu, key_bytes: usize) -> Result<&RunKernels> {
        key_word(key_bytes)?;
        let slot = &self.0[key_bytes.trailing_zeros() as usize];
        get_or_try(slot, || RunKernels::new(gpu, key_bytes))
    }
}

impl std::fmt::Debug for RunCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunCache")
    }
}
