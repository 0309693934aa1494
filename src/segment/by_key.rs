//! Reductions and scans by key: runs of equal consecutive keys are the segments (module
//! [`segment`](crate::segment), "By key").

use super::gpu::{clear_long_list, key_tiles, step_queue_bytes, SegmentArgs};
use super::key_runs::{key_word, RunKernels};
use super::plan::LONG_PASS_MIN_N;
use super::{SegmentReducer, SegmentScanner};
use crate::cpu::Cpu;
use crate::element::{DeviceValue, Element};
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::Gpu;
use crate::ops::Operator;
use crate::scan::ScanKind;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use std::marker::PhantomData;

pub(super) fn check_keys(keys: usize, values: usize) -> Result<()> {
    if keys != values {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!("{keys} keys for {values} values: give one key per value"),
        ));
    }
    Ok(())
}

fn check_room(what: &str, len: usize, runs: u64) -> Result<()> {
    if (len as u64) < runs {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!("{what} holds {len} values, but the keys form {runs} runs"),
        ));
    }
    Ok(())
}

/// Runs of equal consecutive keys on the GPU: their CSR offsets, and each run's key and
/// length (module [`segment`](crate::segment), "By key": keys are equal when their bits are).
///
/// ```no_run
/// let gpu = cufold::Gpu::open(0)?;
/// let keys = gpu.stream().clone_htod(&[7u32, 7, 2, 2, 2, 7]).unwrap();
/// let (offsets, runs) = gpu.key_runs::<u32>()?.offsets(&keys)?;
/// assert_eq!(runs, 3);
/// assert_eq!(gpu.stream().clone_dtoh(&offsets).unwrap(), [0, 2, 5, 6]);
/// # Ok::<(), cufold::Error>(())
/// ```
pub struct KeyRuns<K: Element> {
    kernels: RunKernels,
    _key: PhantomData<fn(K)>,
}

impl<K: Element> std::fmt::Debug for KeyRuns<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRuns")
            .field("key", &K::NAME)
            .field("gpu", &self.kernels.gpu)
            .finish()
    }
}

impl<K: Element> KeyRuns<K> {
    /// Enqueues the runs' offsets of `keys` into `offsets` (room for `keys.len() + 1`):
    /// `offsets[r]` is where run `r` starts, `offsets[runs]` is `keys.len()`; the number
    /// of runs goes to `runs[0]`. Never waits for the stream. Scratch: a bit per key and
    /// two u64 per 1024 keys, allocated on the stream. (The waiting forms below need no
    /// `n + 1` buffer: they count the runs first.)
    ///
    /// Errors: `offsets` shorter than `keys.len() + 1` or `runs` empty
    /// ([`ErrorKind::LengthMismatch`]).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let keys = gpu.stream().clone_htod(&[1i64, 1, 1, 4]).unwrap();
    /// let mut offsets = gpu.stream().alloc_zeros::<u64>(5).unwrap();
    /// let mut runs = gpu.stream().alloc_zeros::<u64>(1).unwrap();
    /// gpu.key_runs::<i64>()?.offsets_into(&keys, &mut offsets, &mut runs)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&runs).unwrap(), [2]);
    /// assert_eq!(gpu.stream().clone_dtoh(&offsets).unwrap()[..3], [0, 3, 4]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn offsets_into(
        &self,
        keys: &impl DevicePtr<K>,
        offsets: &mut impl DevicePtrMut<u64>,
        runs: &mut impl DevicePtrMut<u64>,
    ) -> Result<()> {
        let n = keys.len();
        check_room("the offsets buffer", offsets.len(), n as u64 + 1)?;
        check_room("the run count buffer", runs.len(), 1)?;
        let stream = self.kernels.gpu.stream();
        if n == 0 {
            // No runs; the one offset is 0.
            stream
                .memset_zeros(runs)
                .and_then(|_| stream.memset_zeros(offsets))
                .map_err(|e| Error::driver("writing the runs of no keys", e))?;
            return Ok(());
        }
        let (runs_ptr, _g1) = runs.device_ptr_mut(stream);
        let (off_ptr, _g2) = offsets.device_ptr_mut(stream);
        let (keys_ptr, _g3) = keys.device_ptr(stream);
        // SAFETY: n keys, n + 1 offsets and one count (checked above).
        unsafe { self.kernels.offsets(keys_ptr, n as u64, off_ptr, runs_ptr) }
    }

    /// The runs' offsets of `keys` on the device (`runs + 1` of them) and the number of
    /// runs, after one wait for the stream.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let keys = gpu.stream().clone_htod(&[0.5f32, 0.5, -0.0, 0.0]).unwrap();
    /// let (_, runs) = gpu.key_runs::<f32>()?.offsets(&keys)?;
    /// assert_eq!(runs, 3); // -0.0 and 0.0 differ in their bits
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn offsets(&self, keys: &impl DevicePtr<K>) -> Result<(CudaSlice<u64>, usize)> {
        let n = keys.len() as u64;
        if n == 0 {
            return Ok((self.kernels.gpu.alloc::<u64>(1)?, 0));
        }
        let stream = self.kernels.gpu.stream();
        let (keys_ptr, _g) = keys.device_ptr(stream);
        // SAFETY: `keys` holds n keys of K's width.
        let (offsets, runs) = unsafe { self.kernels.offsets_counted(keys_ptr, n)? };
        Ok((offsets, runs as usize))
    }
}

impl Gpu {
    /// Finds runs of equal consecutive keys of type `K` on this GPU (module
    /// [`segment`](crate::segment)); its kernels are compiled (or loaded) here.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let runs = gpu.key_runs::<u64>()?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn key_runs<K: Element>(&self) -> Result<KeyRuns<K>> {
        Ok(KeyRuns {
            kernels: RunKernels::new(self, std::mem::size_of::<K>())?,
            _key: PhantomData,
        })
    }
}

/// What a reduction by key gives on the GPU: run `r` has key `keys[r]`, `lengths[r]`
/// elements and result `values[r]`; each buffer holds one value per run.
///
/// ```no_run
/// let gpu = cufold::Gpu::open(0)?;
/// let keys = gpu.stream().clone_htod(&[3u8, 3, 9]).unwrap();
/// let x = gpu.stream().clone_htod(&[1.0f32, 2.0, 5.0]).unwrap();
/// let by: cufold::segment::DeviceByKey<u8, f32> =
///     gpu.segment_reducer::<f32, _>(cufold::ops::Sum)?.reduce_by_key(&keys, &x)?;
/// assert_eq!(gpu.stream().clone_dtoh(&by.values).unwrap(), [3.0, 5.0]);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceByKey<K: DeviceValue, V: DeviceValue> {
    /// The key of each run.
    pub keys: CudaSlice<K>,
    /// The result of each run.
    pub values: CudaSlice<V>,
    /// The number of elements in each run.
    pub lengths: CudaSlice<u64>,
}

/// What a reduction by key gives on the CPU: run `r` has key `keys[r]`, `lengths[r]`
/// elements and result `values[r]`.
///
/// ```
/// use cufold::{ops, Cpu};
/// let by = Cpu::new().reduce_by_key(&[3u8, 3, 9], &[1.0f32, 2.0, 5.0], ops::Sum)?;
/// assert_eq!((by.keys, by.values, by.lengths), (vec![3, 9], vec![3.0, 5.0], vec![2, 1]));
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ByKey<K, V> {
    /// The key of each run.
    pub keys: Vec<K>,
    /// The result of each run.
    pub values: Vec<V>,
    /// The number of elements in each run.
    pub lengths: Vec<u64>,
}

impl<T: DeviceValue, O: Operator<T>> SegmentReducer<T, O> {
    /// Reduces each run of equal consecutive `keys` over the matching `values`: one key,
    /// one result and one length per run, in new device buffers. Waits for the stream once
    /// (module [`segment`](crate::segment), "By key").
    ///
    /// Errors: keys and values of different lengths
    /// ([`ErrorKind::LengthMismatch`](crate::ErrorKind::LengthMismatch)), before any launch.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let keys = gpu.stream().clone_htod(&[1u32, 1, 1, 2, 2, 1]).unwrap();
    /// let x = gpu.stream().clone_htod(&[1.0f64, 2.0, 3.0, 4.0, 6.0, 8.0]).unwrap();
    /// let means = gpu.segment_reducer::<f64, _>(cufold::ops::Mean)?.reduce_by_key(&keys, &x)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&means.keys).unwrap(), [1, 2, 1]);
    /// assert_eq!(gpu.stream().clone_dtoh(&means.values).unwrap(), [2.0, 5.0, 8.0]);
    /// assert_eq!(gpu.stream().clone_dtoh(&means.lengths).unwrap(), [3, 2, 1]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_by_key<K: Element>(
        &self,
        keys: &impl DevicePtr<K>,
        values: &impl DevicePtr<T>,
    ) -> Result<DeviceByKey<K, O::Out>> {
        check_keys(keys.len(), values.len())?;
        let n = keys.len() as u64;
        let gpu = &self.gpu;
        let kernels = self.runs.get(gpu, std::mem::size_of::<K>())?;
        if n == 0 {
            return Ok(DeviceByKey {
                keys: gpu.alloc(0)?,
                values: gpu.alloc(0)?,
                lengths: gpu.alloc(0)?,
            });
        }
        let stream = gpu.stream();
        let (keys_ptr, _g1) = keys.device_ptr(stream);
        let (x_ptr, _g2) = values.device_ptr(stream);
        // SAFETY: `keys` holds n keys of K's width.
        let (counted, runs) = unsafe { kernels.count(keys_ptr, n)? };
        // SAFETY: the scatter writes every key and length, and the segmented reduction
        // below every value.
        let mut out = unsafe {
            DeviceByKey {
                keys: gpu.alloc_uninit::<K>(runs as usize)?,
                values: gpu.alloc_uninit::<O::Out>(runs as usize)?,
                lengths: gpu.alloc_uninit::<u64>(runs as usize)?,
            }
        };
        let offsets = {
            let (k_out, _g4) = out.keys.device_ptr_mut(stream);
            let (l_out, _g5) = out.lengths.device_ptr_mut(stream);
            // SAFETY: n keys, counted; runs keys and runs lengths allocated.
            unsafe { kernels.scattered(keys_ptr, n, &counted, runs, (k_out, l_out))? }
        };
        let (off_ptr, _g3) = offsets.device_ptr(stream);
        let (v_out, _g6) = out.values.device_ptr_mut(stream);
        // Few long runs take the thread schedule's long pass (plan_reduction): every run cut
        // into chunks across the device, in one launch with the others.
        let plan = self.plan(runs, n, false);
        // SAFETY: runs + 1 monotone offsets within the n values; runs outputs.
        unsafe {
            self.launch(plan, SegmentArgs::offsets(x_ptr, n, runs, off_ptr, v_out))?;
        }
        drop(_g6);
        Ok(out)
    }

    /// Reduces each run of equal consecutive `keys` over the matching `values` in one pass
    /// over both, into the caller's buffers: run `r` gets its key in `keys_out[r]`, its
    /// result in `values_out[r]` and its length in `lengths_out[r]`, and the number of runs
    /// goes to `runs[0]`. Never waits for the stream (module [`segment`](crate::segment),
    /// "By key").
    ///
    /// The outputs need room for every run: `keys.len()` always suffices. Runs past the
    /// shortest output are not written (nothing is written outside the buffers), and
    /// `runs[0]` still gets the number of runs, so a caller that reads a count above its
    /// capacity knows the outputs were short. Slots at and past the run count are never
    /// written (the kernel stores run `r` only for a run that exists): they keep what they
    /// held, as [`Cpu::reduce_by_key`](crate::Cpu::reduce_by_key) returns exactly one entry a
    /// run. Fill them with a value no run gives, or read the count, to tell them apart. Scratch: the handle's (64 bytes per 8192 keys
    /// and, for inputs of 2^20 or more, the long list).
    ///
    /// Errors, before any launch: keys and values of different lengths, or `runs` empty
    /// ([`ErrorKind::LengthMismatch`]).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let s = gpu.stream();
    /// let keys = s.clone_htod(&[4u32, 4, 1, 1, 1, 4]).unwrap();
    /// let x = s.clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    /// let (mut k, mut v) = (s.alloc_zeros::<u32>(6).unwrap(), s.alloc_zeros::<f32>(6).unwrap());
    /// let (mut len, mut runs) = (s.alloc_zeros::<u64>(6).unwrap(), s.alloc_zeros::<u64>(1).unwrap());
    /// let sums = gpu.segment_reducer::<f32, _>(cufold::ops::Sum)?;
    /// sums.reduce_by_key_into(&keys, &x, &mut k, &mut v, &mut len, &mut runs)?;
    /// assert_eq!(s.clone_dtoh(&runs).unwrap(), [3]);
    /// assert_eq!(s.clone_dtoh(&v).unwrap()[..3], [3.0, 12.0, 6.0]);
    /// assert_eq!(s.clone_dtoh(&k).unwrap()[..3], [4, 1, 4]);
    /// assert_eq!(s.clone_dtoh(&len).unwrap()[..3], [2, 3, 1]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_by_key_into<K: Element>(
        &self,
        keys: &impl DevicePtr<K>,
        values: &impl DevicePtr<T>,
        keys_out: &mut impl DevicePtrMut<K>,
        values_out: &mut impl DevicePtrMut<O::Out>,
        lengths_out: &mut impl DevicePtrMut<u64>,
        runs: &mut impl DevicePtrMut<u64>,
    ) -> Result<()> {
        self.by_key_into(keys, values, keys_out, values_out, Some(lengths_out), runs)
    }

    /// [`reduce_by_key_into`](Self::reduce_by_key_into) without the lengths: run `r` gets
    /// its key in `keys_out[r]` and its result in `values_out[r]`, and the number of runs
    /// goes to `runs[0]`; no length is computed or written (what CUB's `ReduceByKey` gives).
    /// For callers that do not need the lengths: it saves 8 bytes of writes a run. Never
    /// waits for the stream.
    ///
    /// The outputs need room for every run (`keys.len()` always suffices); runs past the
    /// shorter output are not written, and `runs[0]` still gets the number of runs. Slots
    /// at and past the run count are never written (as for `reduce_by_key_into`). Errors,
    /// before any launch: keys and values of different lengths, or `runs` empty
    /// ([`ErrorKind::LengthMismatch`]).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let s = gpu.stream();
    /// let keys = s.clone_htod(&[4u32, 4, 1, 1, 1, 4]).unwrap();
    /// let x = s.clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    /// let (mut k, mut v) = (s.alloc_zeros::<u32>(6).unwrap(), s.alloc_zeros::<f32>(6).unwrap());
    /// let mut runs = s.alloc_zeros::<u64>(1).unwrap();
    /// let sums = gpu.segment_reducer::<f32, _>(cufold::ops::Sum)?;
    /// sums.reduce_by_key_into_without_lengths(&keys, &x, &mut k, &mut v, &mut runs)?;
    /// assert_eq!(s.clone_dtoh(&runs).unwrap(), [3]);
    /// assert_eq!(s.clone_dtoh(&v).unwrap()[..3], [3.0, 12.0, 6.0]);
    /// assert_eq!(s.clone_dtoh(&k).unwrap()[..3], [4, 1, 4]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_by_key_into_without_lengths<K: Element>(
        &self,
        keys: &impl DevicePtr<K>,
        values: &impl DevicePtr<T>,
        keys_out: &mut impl DevicePtrMut<K>,
        values_out: &mut impl DevicePtrMut<O::Out>,
        runs: &mut impl DevicePtrMut<u64>,
    ) -> Result<()> {
        self.by_key_into(
            keys,
            values,
            keys_out,
            values_out,
            None::<&mut CudaSlice<u64>>,
            runs,
        )
    }

    /// The checks and launch of both `reduce_by_key_into` forms; `lengths_out` `None`: no
    /// lengths written.
    fn by_key_into<K: Element>(
        &self,
        keys: &impl DevicePtr<K>,
        values: &impl DevicePtr<T>,
        keys_out: &mut impl DevicePtrMut<K>,
        values_out: &mut impl DevicePtrMut<O::Out>,
        lengths_out: Option<&mut impl DevicePtrMut<u64>>,
        runs: &mut impl DevicePtrMut<u64>,
    ) -> Result<()> {
        check_keys(keys.len(), values.len())?;
        check_room("the run count buffer", runs.len(), 1)?;
        key_word(std::mem::size_of::<K>())?;
        let n = keys.len() as u64;
        let cap = keys_out
            .len()
            .min(values_out.len())
            .min(lengths_out.as_ref().map_or(usize::MAX, |l| l.len())) as u64;
        let stream = self.gpu.stream();
        let (runs_ptr, _g6) = runs.device_ptr_mut(stream);
        if n == 0 {
            // SAFETY: runs_ptr holds at least one u64 (checked), used on this stream.
            return unsafe {
                cudarc::driver::result::memset_d8_async(runs_ptr, 0, 8, stream.cu_stream())
            }
            .map_err(|e| Error::driver("writing the runs of no keys", e));
        }
        let (keys_ptr, _g1) = keys.device_ptr(stream);
        let (x_ptr, _g2) = values.device_ptr(stream);
        let (k_out, _g3) = keys_out.device_ptr_mut(stream);
        let (v_out, _g4) = values_out.device_ptr_mut(stream);
        // 0 (a null pointer in the kernel): no lengths.
        let (l_out, _g5) = match lengths_out {
            Some(l) => {
                let (p, g) = l.device_ptr_mut(stream);
                (p, Some(g))
            }
            None => (0, None),
        };
        // SAFETY: n keys and values; `cap` values in each output (lengths: none, or `cap`),
        // one count.
        unsafe { self.launch_by_key::<K>(keys_ptr, x_ptr, n, cap, (k_out, v_out, l_out), runs_ptr) }
    }

    /// Enqueues the one-pass reduction by key (kernels/segment.cuh, `cf_reduce_by_key`) of
    /// the `n > 0` keys at `keys` and values at `x`: runs below `cap` into the outputs (keys,
    /// values, and lengths unless `l_out` is 0), the number of runs into `runs`; then, for
    /// inputs of [`LONG_PASS_MIN_N`] or more, the long pass over the runs listed.
    ///
    /// # Safety
    ///
    /// `keys` and `x` hold `n` keys and values; each output holds `cap` values (`l_out` may
    /// be 0: no lengths); `runs` holds one u64.
    unsafe fn launch_by_key<K: Element>(
        &self,
        keys: u64,
        x: u64,
        n: u64,
        cap: u64,
        (k_out, v_out, l_out): (u64, u64, u64),
        runs: u64,
    ) -> Result<()> {
        let bytes = std::mem::size_of::<K>();
        let f = self.by_key_kernel(bytes, key_word(bytes)?)?;
        let block = self.shape.block;
        let (tiles, slot_bytes) = key_tiles(n, block, "a reduction by key")?;
        let long = match n >= LONG_PASS_MIN_N {
            true => Some(self.long_pass()?),
            false => None,
        };
        let list_bytes = long.as_ref().map_or(0, |l| l.list_bytes(n));
        let stream = &self.gpu.inner.stream;
        self.gpu
            .inner
            .scratch
            .with_lease(stream, slot_bytes, list_bytes, |lease| {
                let hdr = if long.is_some() { lease.plain } else { 0 };
                if hdr != 0 {
                    clear_long_list(stream, hdr)?;
                }
                // Each tile's own mark, then its inclusive prefix (cf::chained_look_back).
                let (aggs, incls) = (lease.slots, lease.slots + slot_bytes as u64 / 2);
                let mut b = stream.launch_builder(f);
                b.arg(&keys)
                    .arg(&x)
                    .arg(&n)
                    .arg(&tiles)
                    .arg(&cap)
                    .arg(&k_out)
                    .arg(&v_out)
                    .arg(&l_out)
                    .arg(&runs)
                    .arg(&lease.ticket)
                    .arg(&aggs)
                    .arg(&incls)
                    .arg(&hdr)
                    .arg(&*self.params);
                let cfg = LaunchConfig {
                    grid_dim: (tiles as u32, 1, 1),
                    block_dim: (block, 1, 1),
                    shared_mem_bytes: step_queue_bytes(block),
                };
                // SAFETY: (const word* keys, const In* x, u64 n, u64 tiles, u64 cap, word*, Out*,
                // u64* lengths, u64* runs, u64* ticket, u64* aggs, u64* incls, u64* long_hdr,
                // OpBytes): the caller's buffers, written below `cap` only (lengths null: none
                // written); the ticket word's count is zero and its high half the last epoch (the
                // arena's contract); aggs and incls hold a slot of a 16-byte mark per tile each;
                // the long list is cleared.
                unsafe { b.launch(cfg) }
                    .map_err(|e| Error::driver("launching the reduction by key", e))?;
                match &long {
                    // SAFETY: the list the launch above filled, over the same values and outputs.
                    Some(l) => unsafe { l.launch(hdr, x, n, v_out) },
                    None => Ok(()),
                }
            })
    }
}

impl<T: DeviceValue, O: Operator<T>> SegmentScanner<T, O> {
    /// Scans `values` into `y` (the same length), restarting at each run of equal
    /// consecutive `keys`: each run's outputs are those of the whole-array scan of that run
    /// alone. One pass over keys and values (module [`segment`](crate::segment), "By key"),
    /// enqueued on the stream without waiting for it.
    ///
    /// Errors, before any launch: keys, values and `y` of different lengths
    /// ([`ErrorKind::LengthMismatch`](crate::ErrorKind::LengthMismatch)), keys of a width
    /// other than 1, 2, 4 or 8 bytes
    /// ([`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig)).
    ///
    /// ```no_run
    /// use cufold::{ops, ScanKind};
    /// let gpu = cufold::Gpu::open(0)?;
    /// let keys = gpu.stream().clone_htod(&[5u32, 5, 5, 6, 6]).unwrap();
    /// let x = gpu.stream().clone_htod(&[1i32, 2, 3, 4, 5]).unwrap();
    /// let mut y = gpu.stream().alloc_zeros::<i32>(5).unwrap();
    /// gpu.segment_scanner::<i32, _>(ops::Sum)?.scan_by_key_into(&keys, &x, &mut y, ScanKind::Inclusive)?;
    /// assert_eq!(gpu.stream().clone_dtoh(&y).unwrap(), [1, 3, 6, 4, 9]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_by_key_into<K: Element>(
        &self,
        keys: &impl DevicePtr<K>,
        values: &impl DevicePtr<T>,
        y: &mut impl DevicePtrMut<O::Out>,
        kind: ScanKind,
    ) -> Result<()> {
        check_keys(keys.len(), values.len())?;
        crate::ops::check::check_scan_lengths(values.len(), y.len())?;
        let key_bytes = std::mem::size_of::<K>();
        key_word(key_bytes)?;
        let n = keys.len() as u64;
        if n == 0 {
            return Ok(());
        }
        let stream = self.gpu.stream();
        let (keys_ptr, _g1) = keys.device_ptr(stream);
        let (x_ptr, _g2) = values.device_ptr(stream);
        let (y_ptr, _g3) = y.device_ptr_mut(stream);
        // SAFETY: n keys of K's width, n values, n outputs (checked above).
        unsafe { self.launch_by_key(key_bytes, keys_ptr, x_ptr, n, y_ptr, kind) }
    }
}

/// The bits of a key, for equality.
fn key_bits<K: Element>(k: &K) -> &[u8] {
    // SAFETY: Element types are plain scalars (integers, IEEE floats) with no padding, valid
    // to read as their bytes.
    unsafe { std::slice::from_raw_parts((k as *const K).cast::<u8>(), std::mem::size_of::<K>()) }
}

/// Whether two keys have the same bits (one integer comparison for keys of 1, 2, 4 or 8
/// bytes).
#[inline(always)]
fn same_key<K: Element>(a: &K, b: &K) -> bool {
    fn read<W: Copy, K>(k: &K) -> W {
        // SAFETY: called with W as wide as K; Element types are plain scalars with no
        // padding, valid to read as bytes.
        unsafe { std::ptr::read_unaligned((k as *const K).cast::<W>()) }
    }
    match std::mem::size_of::<K>() {
        1 => read::<u8, K>(a) == read::<u8, K>(b),
        2 => read::<u16, K>(a) == read::<u16, K>(b),
        4 => read::<u32, K>(a) == read::<u32, K>(b),
        8 => read::<u64, K>(a) == read::<u64, K>(b),
        _ => key_bits(a) == key_bits(b),
    }
}

/// The end of the run of `keys` that starts at `p`, at most `end`.
#[inline(always)]
fn run_end<K: Element>(keys: &[K], p: usize, end: usize) -> usize {
    let k = &keys[p];
    let mut e = p + 1;
    while e < end && same_key(&keys[e], k) {
        e += 1;
    }
    e
}

/// The number of runs that start in `keys[a..b]` (`a` starting one).
fn count_runs<K: Element>(keys: &[K], a: usize, b: usize) -> usize {
    let (prev, next) = (&keys[a..b - 1], &keys[a + 1..b]);
    1 + prev
        .iter()
        .zip(next)
        .filter(|(p, n)| !same_key(*p, *n))
        .count()
}

impl Cpu {
    /// Batches of whole runs of `keys` (not empty), as cuts `0 = c_0 < ... = keys.len()`,
    /// each a run's start: about eight per thread of about equal length (each cut moved
    /// forward to the next run's start), one where the width is one or the input short.
    fn run_batches<K: Element>(&self, keys: &[K]) -> Vec<usize> {
        let n = keys.len();
        let cuts = self.batches(n, &|i| i);
        // From the last cut down, each moved to the first run start at or after it, but
        // not past the next (so that a long run is walked once in all).
        let mut moved = vec![n];
        for &c in cuts[1..cuts.len() - 1].iter().rev() {
            let limit = *moved.last().expect("a cut");
            let mut c = c;
            while c < limit && same_key(&keys[c], &keys[c - 1]) {
                c += 1;
            }
            if c < limit {
                moved.push(c);
            }
        }
        moved.push(0);
        moved.reverse();
        moved
    }
}

impl Cpu {
    /// Reduces each run of equal consecutive `keys` (compared by their bits) over the
    /// matching `values`: the GPU's [`SegmentReducer::reduce_by_key`], same bits.
    ///
    /// Errors: keys and values of different lengths ([`ErrorKind::LengthMismatch`]).
    ///
    /// ```
    /// use cufold::{ops, Cpu};
    /// let by = Cpu::new().reduce_by_key(&[1u32, 1, 2, 1], &[4.0f32, 2.0, 7.0, 1.0], ops::Max)?;
    /// assert_eq!(by.keys, [1, 2, 1]);
    /// assert_eq!(by.values, [4.0, 7.0, 1.0]);
    /// assert_eq!(by.lengths, [2, 1, 1]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_by_key<K: Element, T: DeviceValue, O: Operator<T>>(
        &self,
        keys: &[K],
        values: &[T],
        op: O,
    ) -> Result<ByKey<K, O::Out>> {
        check_keys(keys.len(), values.len())?;
        if keys.is_empty() {
            return Ok(ByKey {
                keys: Vec::new(),
                values: Vec::new(),
                lengths: Vec::new(),
            });
        }
        // Batches of whole runs; the runs of each counted, so that every batch writes its
        // results straight to its place in the outputs, then found again and reduced.
        let cuts = self.run_batches(keys);
        let batches = cuts.len() - 1;
        let mut counts = vec![0usize; batches];
        let work = cuts.windows(2).zip(counts.iter_mut());
        self.run_chunks(work, |(w, c)| *c = count_runs(keys, w[0], w[1]));
        let runs: usize = counts.iter().sum();
        let mut out_keys = Vec::with_capacity(runs);
        let mut out_values = Vec::with_capacity(runs);
        let mut lengths = Vec::with_capacity(runs);
        {
            let mut rest = (
                &mut out_keys.spare_capacity_mut()[..runs],
                &mut out_values.spare_capacity_mut()[..runs],
                &mut lengths.spare_capacity_mut()[..runs],
            );
            let mut work = Vec::with_capacity(batches);
            for (w, &c) in cuts.windows(2).zip(&counts) {
                let (k, k_rest) = std::mem::take(&mut rest.0).split_at_mut(c);
                let (v, v_rest) = std::mem::take(&mut rest.1).split_at_mut(c);
                let (l, l_rest) = std::mem::take(&mut rest.2).split_at_mut(c);
                work.push((w[0], w[1], k, v, l));
                rest = (k_rest, v_rest, l_rest);
            }
            let op = &op;
            self.run_chunks(work.into_iter(), |(a, b, k, v, l)| {
                let mut scratch = [op.identity(); crate::tree::SHORT_TREE / 2];
                let mut buf = Vec::new();
                let mut p = a;
                for r in 0..k.len() {
                    let e = run_end(keys, p, b);
                    let acc = self.segment_tree(op, &values[p..e], &mut scratch, &mut buf);
                    k[r].write(keys[p]);
                    v[r].write(op.finish(acc, (e - p) as u64));
                    l[r].write((e - p) as u64);
                    p = e;
                }
                debug_assert_eq!(p, b);
            });
        }
        // SAFETY: every batch wrote its `counts[j]` runs, which make `runs` in all.
        unsafe {
            out_keys.set_len(runs);
            out_values.set_len(runs);
            lengths.set_len(runs);
        }
        Ok(ByKey {
            keys: out_keys,
            values: out_values,
            lengths,
        })
    }

    /// The scan of `values`, restarting at each run of equal consecutive `keys`, in a new
    /// vector ([`Cpu::scan_by_key_into`]).
    ///
    /// ```
    /// use cufold::{ops, Cpu, ScanKind};
    /// let y = Cpu::new().scan_by_key(&[5u32, 5, 6], &[1.0f32, 2.0, 4.0], ops::Sum, ScanKind::Inclusive)?;
    /// assert_eq!(y, [1.0, 3.0, 4.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_by_key<K: Element, T: DeviceValue, O: Operator<T>>(
        &self,
        keys: &[K],
        values: &[T],
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        check_keys(keys.len(), values.len())?;
        let mut out = super::try_zeroed::<O::Out>(values.len())?;
        self.scan_by_key_into(keys, values, &mut out, op, kind)?;
        Ok(out)
    }

    /// Scans `values` into `out` (the same length), restarting at each run of equal
    /// consecutive `keys`: the GPU's [`SegmentScanner::scan_by_key_into`], same bits.
    ///
    /// Errors: keys, values and `out` of different lengths ([`ErrorKind::LengthMismatch`]).
    ///
    /// ```
    /// use cufold::{ops, Cpu, ScanKind};
    /// let mut y = [0i32; 5];
    /// Cpu::new().scan_by_key_into(&[5u32, 5, 5, 6, 6], &[1, 2, 3, 4, 5], &mut y, ops::Sum, ScanKind::Exclusive)?;
    /// assert_eq!(y, [0, 1, 3, 0, 4]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_by_key_into<K: Element, T: DeviceValue, O: Operator<T>>(
        &self,
        keys: &[K],
        values: &[T],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        check_keys(keys.len(), values.len())?;
        crate::ops::check::check_scan_lengths(values.len(), out.len())?;
        if keys.is_empty() {
            return Ok(());
        }
        crate::ops::check::check_scannable::<T, O>()?;
        // Batches of whole runs, each found and scanned in one pass.
        let cuts = self.run_batches(keys);
        let mut work = Vec::with_capacity(cuts.len() - 1);
        let mut rest = out;
        for w in cuts.windows(2) {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            work.push((w[0], head));
            rest = tail;
        }
        let op = &op;
        self.run_chunks(work.into_iter(), |(a, ys)| {
            let mut scratch = crate::tree::ScanScratch::new(op.identity());
            let b = a + ys.len();
            let mut p = a;
            while p < b {
                let e = run_end(keys, p, b);
                let (xs, o) = (&values[p..e], &mut ys[p - a..e - a]);
                self.scan_one(op, kind, xs, o, &mut scratch);
                p = e;
            }
        });
        Ok(())
    }
}
