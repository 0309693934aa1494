//! A [`Collective`] over NCCL: ranks in one process or many, one device each.

use super::Collective;
use crate::error::{Error, ErrorKind, Result};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use cudarc::nccl::{result as nccl, sys};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The identity of an NCCL group under construction: made once ([`NcclId::new`], on one
/// rank), sent to the other ranks by the caller's own means (its 128 bytes), and given to
/// [`NcclGroup::new`] on every rank.
///
/// ```no_run
/// use cufold::dist::NcclId;
/// let id = NcclId::new()?; // on rank 0
/// let bytes: [u8; 128] = id.to_bytes(); // to the other ranks, by any means
/// let same = NcclId::from_bytes(bytes); // on each of them
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct NcclId(sys::ncclUniqueId);

impl std::fmt::Debug for NcclId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NcclId(..)")
    }
}

impl NcclId {
    /// A new group identity (NCCL's `ncclGetUniqueId`). Errors ([`ErrorKind::NoCuda`]) where
    /// libnccl cannot be loaded, saying how to link or install it ([`NcclGroup`]).
    ///
    /// ```no_run
    /// let id = cufold::dist::NcclId::new()?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn new() -> Result<NcclId> {
        probe_nccl()?;
        nccl::get_uniqueid()
            .map(NcclId)
            .map_err(|e| nccl_error("creating an NCCL group id", e))
    }

    /// The identity's bytes, to send to the other ranks.
    ///
    /// ```no_run
    /// let bytes = cufold::dist::NcclId::new()?.to_bytes();
    /// assert_eq!(bytes.len(), 128);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn to_bytes(&self) -> [u8; 128] {
        self.0.internal.map(|c| c as u8)
    }

    /// The identity another rank made, from its bytes.
    ///
    /// ```
    /// let id = cufold::dist::NcclId::from_bytes([0; 128]);
    /// assert_eq!(id.to_bytes(), [0; 128]);
    /// ```
    pub fn from_bytes(bytes: [u8; 128]) -> NcclId {
        NcclId(sys::ncclUniqueId {
            internal: bytes.map(|b| b as _),
        })
    }
}

/// One rank of an NCCL communicator, as the [`Collective`] of a [`GpuRank`](super::GpuRank)
/// or [`CpuRank`](super::CpuRank): its all-gathers go through NCCL on the rank's stream
/// (one device per rank; NCCL refuses two ranks of one group on one device).
///
/// Calls never hang for ever: each waits at most the group's time limit (60 s unless
/// [`NcclGroup::with_timeout`]) for its exchange, polling NCCL's asynchronous error, and
/// past it aborts the communicator (`ncclCommAbort`) and returns an
/// [`ErrorKind::Collective`] error; the group is unusable from then on. Every rank must
/// send as many bytes to each all-gather (NCCL cannot tell): cufold's calls do, their
/// sizes fixed by the header exchange that precedes every node exchange.
///
/// libnccl is loaded at run time under cudarc's names for it (`libnccl.so`, then
/// `libnccl.so.13`, `libnccl.so.12`, ...; never `libnccl.so.2`). Where only `libnccl.so.2`
/// is installed (pip's `nvidia-nccl-cu12`/`-cu13` wheels, PyTorch), the constructors give an
/// [`ErrorKind::NoCuda`] error that says where it is and the commands that link it as
/// `libnccl.so` into a directory on `LD_LIBRARY_PATH`; with no NCCL at all, one that says
/// what to install. Never a panic.
///
/// ```no_run
/// use cufold::dist::{ChunkLayout, GpuRank, NcclGroup};
/// use cufold::Gpu;
/// // One process, every GPU: one rank per device, one thread per rank.
/// let gpus: Vec<Gpu> = (0..Gpu::device_count()?).map(Gpu::open).collect::<Result<_, _>>()?;
/// let streams: Vec<_> = gpus.iter().map(|g| g.stream().clone()).collect();
/// let groups = NcclGroup::for_streams(&streams)?;
/// let layout = ChunkLayout::new(1 << 20, gpus.len())?;
/// std::thread::scope(|s| {
///     for (gpu, comm) in gpus.into_iter().zip(groups) {
///         s.spawn(move || -> cufold::Result<f32> {
///             let rank = GpuRank::new(gpu, comm);
///             let r = layout.range(rank.rank());
///             let mine = rank.gpu().stream().alloc_zeros::<f32>((r.end - r.start) as usize).unwrap();
///             rank.all_reduce(&layout, &mine, cufold::ops::Sum)
///         });
///     }
/// });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct NcclGroup {
    comm: sys::ncclComm_t,
    stream: Arc<CudaStream>,
    rank: usize,
    ranks: usize,
    timeout: Duration,
    broken: Mutex<Option<String>>,
}

// SAFETY: an NCCL communicator may be used from any thread, one at a time; the group is
// moved to its rank's thread and used there (`Collective` takes `&self`, but the group is
// not `Sync`, so no two threads call it at once).
unsafe impl Send for NcclGroup {}

impl std::fmt::Debug for NcclGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclGroup")
            .field("rank", &self.rank)
            .field("ranks", &self.ranks)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Checks that libnccl can be loaded, so that cudarc (which panics when it cannot find it)
/// is never asked to; where only `libnccl.so.2` is there, the error says how to link it.
fn probe_nccl() -> Result<()> {
    crate::gpu::compat::nccl::probe()
}

fn nccl_error(what: &str, e: nccl::NcclError) -> Error {
    Error::new(ErrorKind::Collective, format!("NCCL, {what}: {:?}", e.0))
}

impl NcclGroup {
    /// Rank `rank` of a group of `ranks` with identity `id`, on `stream` (its device is the
    /// rank's): NCCL's `ncclCommInitRank`, which waits for every rank to join. Every rank
    /// of the group makes this call, in its own thread or process.
    ///
    /// ```no_run
    /// use cufold::dist::{NcclGroup, NcclId};
    /// let gpu = cufold::Gpu::open(0)?;
    /// let group = NcclGroup::new(gpu.stream(), 0, 1, &NcclId::new()?)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn new(
        stream: &Arc<CudaStream>,
        rank: usize,
        ranks: usize,
        id: &NcclId,
    ) -> Result<NcclGroup> {
        probe_nccl()?;
        if rank >= ranks {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("rank {rank} of a group of {ranks}"),
            ));
        }
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| Error::driver("binding the rank's device", e))?;
        let mut comm = std::ptr::null_mut();
        // SAFETY: `comm` receives the communicator; the id is one ncclGetUniqueId made.
        unsafe { nccl::comm_init_rank(&mut comm, ranks as i32, id.0, rank as i32) }
            .map_err(|e| nccl_error("joining the group", e))?;
        Ok(NcclGroup::from_comm(comm, stream, rank, ranks))
    }

    /// A group of one rank per stream, all in this process (NCCL's `ncclCommInitAll`): rank
    /// `r` on `streams[r]`'s device. The devices must differ.
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let groups = cufold::dist::NcclGroup::for_streams(&[gpu.stream().clone()])?;
    /// assert_eq!(groups.len(), 1);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn for_streams(streams: &[Arc<CudaStream>]) -> Result<Vec<NcclGroup>> {
        probe_nccl()?;
        let ordinals: Vec<i32> = streams
            .iter()
            .map(|s| s.context().ordinal() as i32)
            .collect();
        let mut sorted = ordinals.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != ordinals.len() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "an NCCL group needs one device per rank; the streams' devices are {ordinals:?}"
                ),
            ));
        }
        let mut comms = vec![std::ptr::null_mut(); streams.len()];
        // SAFETY: `comms` has room for one communicator per device listed.
        unsafe {
            nccl::comm_init_all(comms.as_mut_ptr(), ordinals.len() as i32, ordinals.as_ptr())
        }
        .map_err(|e| nccl_error("creating the group", e))?;
        Ok(comms
            .into_iter()
            .zip(streams)
            .enumerate()
            .map(|(rank, (comm, stream))| NcclGroup::from_comm(comm, stream, rank, streams.len()))
            .collect())
    }

    fn from_comm(
        comm: sys::ncclComm_t,
        stream: &Arc<CudaStream>,
        rank: usize,
        ranks: usize,
    ) -> NcclGroup {
        NcclGroup {
            comm,
            stream: stream.clone(),
            rank,
            ranks,
            timeout: Duration::from_secs(60),
            broken: Mutex::new(None),
        }
    }

    /// The same group, waiting at most `timeout` in each call.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let gpu = cufold::Gpu::open(0)?;
    /// let g = cufold::dist::NcclGroup::for_streams(&[gpu.stream().clone()])?;
    /// let g = g.into_iter().next().unwrap().with_timeout(Duration::from_secs(5));
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn with_timeout(mut self, timeout: Duration) -> NcclGroup {
        self.timeout = timeout;
        self
    }

    /// Marks the group unusable and aborts its communicator.
    fn abort(&self, why: String) -> Error {
        let mut broken = self.broken.lock().unwrap_or_else(|p| p.into_inner());
        if broken.is_none() {
            // SAFETY: the communicator is this group's, not destroyed yet.
            let _ = unsafe { nccl::comm_abort(self.comm) };
            *broken = Some(why.clone());
        }
        Error::new(ErrorKind::Collective, why)
    }

    fn gather(&self, bytes: &[u8]) -> std::result::Result<Vec<u8>, String> {
        let stream = &self.stream;
        fn drv(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> String {
            move |e| format!("{what}: {e:?}")
        }
        let n = bytes.len();
        let send = stream
            .clone_htod(bytes)
            .map_err(drv("copying an all-gather's bytes to the device"))?;
        let mut recv = stream
            .alloc_zeros::<u8>(n * self.ranks)
            .map_err(drv("allocating an all-gather's buffer"))?;
        {
            let (s, _s) = send.device_ptr(stream);
            let (r, _r) = recv.device_ptr_mut(stream);
            // SAFETY: `send` holds n bytes and `recv` n per rank, on this rank's device, used
            // on this stream; they live until the exchange is complete (waited for below) or
            // the communicator is aborted.
            unsafe {
                nccl::all_gather(
                    s as *const _,
                    r as *mut _,
                    n,
                    sys::ncclDataType_t::ncclUint8,
                    self.comm,
                    stream.cu_stream() as sys::cudaStream_t,
                )
            }
            .map_err(|e| format!("NCCL all-gather: {:?}", e.0))?;
        }
        // SAFETY: the pinned buffer is written by the copy below before it is read.
        let mut host = unsafe {
            stream
                .context()
                .alloc_pinned_with_flags::<u8>(n * self.ranks, 0)
        }
        .map_err(drv("allocating pinned memory"))?;
        stream
            .memcpy_dtoh(&recv, &mut host)
            .map_err(drv("copying an all-gather's bytes to the host"))?;
        let done = stream
            .record_event(None)
            .map_err(drv("recording an event"))?;
        let start = Instant::now();
        let mut pause = Duration::from_micros(1);
        loop {
            match done.try_is_complete() {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => return Err(format!("waiting for an all-gather: {e:?}")),
            }
            let mut err = sys::ncclResult_t::ncclSuccess;
            // SAFETY: the communicator is this group's; `err` receives its state.
            unsafe { sys::ncclCommGetAsyncError(self.comm, &mut err) };
            if !matches!(
                err,
                sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress
            ) {
                return Err(format!("NCCL reported {err:?} during an all-gather"));
            }
            if start.elapsed() > self.timeout {
                return Err(format!(
                    "an all-gather of rank {} of {} did not complete within {:?}: a rank did not \
                     join the call (or ranks sent different sizes)",
                    self.rank, self.ranks, self.timeout
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
        host.as_slice()
            .map(|s| s.to_vec())
            .map_err(drv("reading an all-gather's bytes"))
    }
}

impl Collective for NcclGroup {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.ranks
    }

    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        if let Some(why) = &*self.broken.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(Error::new(
                ErrorKind::Collective,
                format!("the NCCL group is unusable: {why}"),
            ));
        }
        if bytes.is_empty() {
            return Ok(Vec::new());
        }
        self.gather(bytes).map_err(|why| {
            self.abort(format!(
                "{why}; the NCCL group was aborted and is unusable from now on"
            ))
        })
    }
}

impl Drop for NcclGroup {
    fn drop(&mut self) {
        let broken = self.broken.get_mut().map_or(true, |b| b.is_some());
        if !broken {
            // SAFETY: the communicator is this group's and is not used after this.
            let _ = unsafe { nccl::comm_destroy(self.comm) };
        }
    }
}
