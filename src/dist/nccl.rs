//! A [`Collective`] over NCCL: ranks in one process or many, one device each.

use super::Collective;
use crate::error::{Error, ErrorKind, Result};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, PinnedHostSlice,
};
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

    /// The group identity, shared through `comm`: rank 0 makes it ([`NcclId::new`]) and
    /// every rank of `comm` gets it, for example a [`TcpGroup`](super::TcpGroup) that the
    /// processes of a job joined ([`NcclGroup::join`] does this and builds the group). A
    /// rank 0 that cannot make one (no libnccl) is an error on every rank, with its reason.
    ///
    /// ```no_run
    /// use cufold::dist::{Launch, NcclId, TcpGroup};
    /// let tcp = TcpGroup::join(&Launch::from_env()?)?;
    /// let id = NcclId::share(&tcp)?; // the same on every rank
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn share(comm: &impl Collective) -> Result<NcclId> {
        share_id(comm, || NcclId::new().map(|id| id.to_bytes())).map(NcclId::from_bytes)
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
/// [`ErrorKind::Collective`] error; the group is dead from then on ([`NcclGroup::is_dead`]):
/// the ranks that go on build a new one. [`NcclGroup::new`] and [`NcclGroup::join`] make a
/// non-blocking communicator and wait at most the time limit for every rank to join (a rank
/// that never comes is an error, not a hang), then split a blocking one from it for the
/// exchanges (NCCL 2.18 and later: a non-blocking communicator starts a thread for every
/// collective); dropping a group finalizes and destroys its
/// communicator, which waits for the other ranks, at most the time limit, then aborts it,
/// and NCCL's own teardown, which can wait for the machine's other ranks to abort too, is
/// left on a thread of its own past that, so a drop never hangs either. Every rank must
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
    /// Blocking (made by ncclCommInitAll, or split from a joined non-blocking one) rather
    /// than non-blocking.
    blocking: bool,
    broken: Mutex<Option<String>>,
    /// The buffers of the last all-gather that completed, for the next: a pinned buffer's
    /// allocation and free cost more than a small exchange.
    kept: Mutex<Held>,
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

/// The bytes of an id that rank 0 makes with `make`, on every rank of `comm`: one
/// all-gather of a status byte, the id and rank 0's error message if it failed.
fn share_id(comm: &impl Collective, make: impl FnOnce() -> Result<[u8; 128]>) -> Result<[u8; 128]> {
    const MSG: usize = 512;
    let mut mine = vec![0u8; 1 + 128 + MSG];
    let made = if comm.rank() == 0 { Some(make()) } else { None };
    match &made {
        Some(Ok(id)) => {
            mine[0] = 1;
            mine[1..129].copy_from_slice(id);
        }
        Some(Err(e)) => {
            let msg = e.to_string();
            let mut cut = msg.len().min(MSG);
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            mine[0] = 2;
            mine[129..129 + cut].copy_from_slice(&msg.as_bytes()[..cut]);
        }
        None => {}
    }
    let all = comm.all_gather(&mine)?;
    if let Some(Err(e)) = made {
        return Err(e);
    }
    let root = &all[..mine.len()];
    match root[0] {
        1 => Ok(root[1..129].try_into().unwrap()),
        2 => Err(Error::new(
            ErrorKind::Collective,
            format!(
                "rank 0 could not make the NCCL group's id: {}",
                String::from_utf8_lossy(&root[129..]).trim_end_matches('\0')
            ),
        )),
        _ => Err(Error::new(
            ErrorKind::Collective,
            "rank 0 sent no NCCL group id".to_string(),
        )),
    }
}

/// NCCL's communicator configuration as of 2.17 (`ncclConfig_v21700`), the oldest layout
/// NCCL accepts with a `size` and `version` of its own: whatever NCCL is loaded reads the
/// fields it knows from these, the rest at their defaults, whichever version cudarc's
/// bindings were generated for.
#[repr(C)]
struct Config {
    size: usize,
    magic: u32,
    version: u32,
    blocking: i32,
    cga_cluster_size: i32,
    min_ctas: i32,
    max_ctas: i32,
    net_name: *const std::ffi::c_char,
    split_share: i32,
}

/// NCCL_CONFIG_UNDEF_INT: the field at NCCL's default.
const UNDEF: i32 = i32::MIN;

impl Config {
    /// A non-blocking communicator: its calls return at once (`ncclInProgress`), and a
    /// caller polls `ncclCommGetAsyncError`, so every wait has a time limit here.
    fn non_blocking() -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            magic: 0xcafe_beef,
            version: 2 * 10000 + 17 * 100, // NCCL_VERSION(2, 17, 0)
            blocking: 0,
            cga_cluster_size: UNDEF,
            min_ctas: UNDEF,
            max_ctas: UNDEF,
            net_name: std::ptr::null(),
            split_share: UNDEF,
        }
    }

    /// A blocking communicator: its collectives are enqueued by the calling thread.
    fn blocking() -> Config {
        Config {
            blocking: 1,
            ..Config::non_blocking()
        }
    }
}

/// A communicator pointer, to abort or destroy on another thread.
struct Comm(sys::ncclComm_t);
// SAFETY: NCCL communicators may be used from any thread; this one is used by one at a time.
unsafe impl Send for Comm {}

/// Waits until `comm`'s pending operation completes (its asynchronous state leaves
/// `ncclInProgress`), at most until `deadline`: `Ok` on success, the error NCCL reported,
/// or `Err(None)` past the deadline.
fn wait_ready(
    comm: sys::ncclComm_t,
    deadline: Instant,
) -> std::result::Result<(), Option<sys::ncclResult_t>> {
    let mut backoff = Backoff::new();
    loop {
        let mut state = sys::ncclResult_t::ncclSuccess;
        // SAFETY: the communicator is live; `state` receives its asynchronous state.
        let r = unsafe { sys::ncclCommGetAsyncError(comm, &mut state) };
        if r != sys::ncclResult_t::ncclSuccess {
            return Err(Some(r));
        }
        match state {
            sys::ncclResult_t::ncclSuccess => return Ok(()),
            sys::ncclResult_t::ncclInProgress => {}
            e => return Err(Some(e)),
        }
        if Instant::now() >= deadline {
            return Err(None);
        }
        backoff.wait();
    }
}

/// How a poll of NCCL's state waits between looks: it yields the thread for the first
/// 2 ms (an exchange between the GPUs of one machine takes tens of microseconds, and a
/// sleep at least about 50), then sleeps, doubling the pause up to 1 ms.
struct Backoff {
    start: Instant,
    pause: Duration,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            start: Instant::now(),
            pause: Duration::from_micros(20),
        }
    }

    fn wait(&mut self) {
        if self.start.elapsed() < Duration::from_millis(2) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(self.pause);
            self.pause = (self.pause * 2).min(Duration::from_millis(1));
        }
    }
}

/// Runs `f` on a thread of its own and waits for it at most `limit`: NCCL's abort and
/// destroy can wait for the other ranks of the machine to do the same, which a dead rank
/// never does. Past the limit the thread is left to NCCL (it ends with the process).
fn bounded(limit: Duration, f: impl FnOnce() + Send + 'static) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("cufold-nccl-teardown".into())
        .spawn(move || {
            f();
            let _ = tx.send(());
        });
    spawned.is_ok() && rx.recv_timeout(limit).is_ok()
}

/// Aborts `comm` (NCCL's `ncclCommAbort`, which stops its kernels), waiting at most `limit`.
fn abort_bounded(comm: sys::ncclComm_t, limit: Duration) -> bool {
    let c = Comm(comm);
    bounded(limit, move || {
        let c = c;
        // SAFETY: the communicator is not used after this.
        let _ = unsafe { nccl::comm_abort(c.0) };
    })
}

/// A blocking communicator split from `parent`, a non-blocking one whose ranks have all
/// joined, with the parent finalized and destroyed; `None`, the parent kept, where NCCL is
/// older than 2.18 (no `ncclCommSplit`) or the split fails. Every rank of the group makes
/// this call.
///
/// Why: a non-blocking communicator launches each collective from a thread NCCL starts for
/// it, which cost about a tenth of a millisecond an exchange (measured on 2 to 4 H200s), as
/// much as a reduction of 2^26 floats. A blocking one enqueues from the calling thread. Its
/// collectives still return before their kernels end, so an exchange is still polled
/// against the time limit and a stuck one aborted; only joining needed the non-blocking
/// form, to wait for the ranks with a limit.
fn split_blocking(
    parent: sys::ncclComm_t,
    rank: usize,
    timeout: Duration,
) -> Option<sys::ncclComm_t> {
    let mut version = 0;
    // SAFETY: `version` receives NCCL's version code.
    let r = unsafe { sys::ncclGetVersion(&mut version) };
    if r != sys::ncclResult_t::ncclSuccess || version < 21800 {
        return None;
    }
    let deadline = Instant::now() + timeout;
    let mut fast = std::ptr::null_mut();
    let mut config = Config::blocking();
    // SAFETY: `parent` is a live communicator all of whose ranks make this call; `fast`
    // receives the new one; `config` is an ncclConfig_t of NCCL 2.17's layout.
    let r = unsafe {
        sys::ncclCommSplit(
            parent,
            0,
            rank as i32,
            &mut fast,
            (&mut config as *mut Config).cast(),
        )
    };
    let split = matches!(
        r,
        sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress
    ) && wait_ready(parent, deadline).is_ok()
        && !fast.is_null()
        && wait_ready(fast, deadline).is_ok();
    if !split {
        if !fast.is_null() {
            abort_bounded(fast, timeout);
        }
        return None;
    }
    // The parent's work is done: finalize (a collective: every rank is here) and destroy it.
    // SAFETY: the parent is not used after this.
    let finalized =
        unsafe { nccl::comm_finalize(parent) }.is_ok() && wait_ready(parent, deadline).is_ok();
    if finalized {
        // SAFETY: as above.
        let _ = unsafe { nccl::comm_destroy(parent) };
    } else {
        abort_bounded(parent, timeout);
    }
    Some(fast)
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
        NcclGroup::init(stream, rank, ranks, id, Duration::from_secs(60))
    }

    fn init(
        stream: &Arc<CudaStream>,
        rank: usize,
        ranks: usize,
        id: &NcclId,
        timeout: Duration,
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
        let mut config = Config::non_blocking();
        // SAFETY: `comm` receives the communicator; the id is one ncclGetUniqueId made;
        // `config` is an ncclConfig_t of NCCL 2.17's layout, its size and version set.
        let r = unsafe {
            nccl::comm_init_rank_config(
                &mut comm,
                ranks as i32,
                id.0,
                rank as i32,
                (&mut config as *mut Config).cast(),
            )
        };
        if let Err(e) = r {
            if !comm.is_null() {
                abort_bounded(comm, timeout);
            }
            return Err(nccl_error("joining the group", e));
        }
        // Every rank must join: wait for the others at most the time limit.
        match wait_ready(comm, Instant::now() + timeout) {
            Ok(()) => {
                let (comm, blocking) = match split_blocking(comm, rank, timeout) {
                    Some(fast) => (fast, true),
                    None => (comm, false),
                };
                let mut g = NcclGroup::from_comm(comm, stream, rank, ranks);
                g.blocking = blocking;
                Ok(g.with_timeout(timeout))
            }
            Err(e) => {
                abort_bounded(comm, timeout);
                Err(Error::new(
                    ErrorKind::Collective,
                    match e {
                        Some(e) => format!("NCCL, joining the group: {e:?}"),
                        None => format!(
                            "rank {rank} of {ranks}: the other ranks did not join the NCCL \
                             group within {timeout:?} (the group was aborted)"
                        ),
                    },
                ))
            }
        }
    }

    /// Rank `comm.rank()` of an NCCL group of `comm.ranks()`, its id shared through `comm`
    /// ([`NcclId::share`]; for example a [`TcpGroup`](super::TcpGroup) of the job's
    /// processes), on `stream`, waiting at most `timeout` in each call (and for the ranks to
    /// join). The form for one process per GPU.
    ///
    /// ```no_run
    /// use cufold::dist::{GpuRank, Launch, NcclGroup, TcpGroup};
    /// use std::time::Duration;
    /// let launch = Launch::from_env()?; // RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...
    /// let gpu = cufold::Gpu::open(launch.local_rank)?;
    /// let tcp = TcpGroup::join(&launch)?;
    /// let nccl = NcclGroup::join(gpu.stream(), &tcp, Duration::from_secs(60))?;
    /// let rank = GpuRank::new(gpu, nccl);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn join(
        stream: &Arc<CudaStream>,
        comm: &impl Collective,
        timeout: Duration,
    ) -> Result<NcclGroup> {
        let id = NcclId::share(comm)?;
        NcclGroup::init(stream, comm.rank(), comm.ranks(), &id, timeout)
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
            blocking: true,
            broken: Mutex::new(None),
            kept: Mutex::new(Held::default()),
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

    /// Whether the group is dead: a call timed out or NCCL reported an error, and the
    /// communicator was aborted, so every call from now on fails at once. The ranks that go
    /// on build a new group (a new [`NcclId`]).
    ///
    /// ```no_run
    /// let gpu = cufold::Gpu::open(0)?;
    /// let g = cufold::dist::NcclGroup::for_streams(&[gpu.stream().clone()])?;
    /// assert!(!g[0].is_dead());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn is_dead(&self) -> bool {
        self.broken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Marks the group unusable and aborts its communicator; whether the abort completed
    /// (within its bound).
    fn abort(&self, why: String) -> (Error, bool) {
        let mut broken = self.broken.lock().unwrap_or_else(|p| p.into_inner());
        let mut aborted = true;
        if broken.is_none() {
            aborted = abort_bounded(self.comm, self.timeout.min(Duration::from_secs(10)));
            *broken = Some(why.clone());
        }
        (Error::new(ErrorKind::Collective, why), aborted)
    }

    /// One all-gather; on failure the communicator is aborted before its buffers are freed:
    /// freeing pinned memory waits for the device, which a stuck NCCL kernel (a peer that
    /// died) would hold for ever. Where the abort does not complete in its bound, the
    /// buffers are leaked instead.
    fn gather(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        let mut held = std::mem::take(&mut *self.kept.lock().unwrap_or_else(|p| p.into_inner()));
        match self.gather_in(bytes, &mut held) {
            Ok(v) => {
                *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = held;
                Ok(v)
            }
            Err(why) => {
                let (e, aborted) = self.abort(format!(
                    "{why}; the NCCL group was aborted and is dead from now on (build a new \
                     one)"
                ));
                if !aborted {
                    std::mem::forget(held);
                }
                Err(e)
            }
        }
    }

    /// One all-gather of `bytes` from every rank, in `held`'s buffers where they are large
    /// enough (else new ones, kept there).
    fn gather_in(&self, bytes: &[u8], held: &mut Held) -> std::result::Result<Vec<u8>, String> {
        let stream = &self.stream;
        fn drv(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> String {
            move |e| format!("{what}: {e:?}")
        }
        let n = bytes.len();
        let all = n * self.ranks;
        if !matches!(&held.send, Some(s) if s.len() >= n) {
            // Room for the usual exchanges (headers and a few nodes) from the first call.
            let room = n.next_power_of_two().max(4096);
            held.send = None;
            held.recv = None;
            for host in [held.host.take(), held.stage.take()].into_iter().flatten() {
                keep_pinned(host);
            }
            held.send = Some(
                stream
                    .alloc_zeros::<u8>(room)
                    .map_err(drv("allocating an all-gather's buffer"))?,
            );
            held.recv = Some(
                stream
                    .alloc_zeros::<u8>(room * self.ranks)
                    .map_err(drv("allocating an all-gather's buffer"))?,
            );
            let pinned = |len: usize| match take_pinned(stream.context(), len) {
                Some(host) => Ok(host),
                // SAFETY: the pinned buffer is written before it is read.
                None => unsafe { stream.context().alloc_pinned_with_flags::<u8>(len, 0) }
                    .map_err(drv("allocating pinned memory")),
            };
            held.host = Some(pinned(room * self.ranks)?);
            held.stage = Some(pinned(room)?);
        }
        let (send, recv) = (held.send.as_mut().unwrap(), held.recv.as_mut().unwrap());
        // Through pinned memory, so that the copy does not wait for the stream.
        let stage = held.stage.as_mut().unwrap();
        stage.as_mut_slice().map_err(drv("writing pinned memory"))?[..n].copy_from_slice(bytes);
        stream
            .memcpy_htod(&*stage, &mut send.slice_mut(0..stage.len()))
            .map_err(drv("copying an all-gather's bytes to the device"))?;
        {
            let (s, _s) = send.device_ptr(stream);
            let (r, _r) = recv.device_ptr_mut(stream);
            // SAFETY: `send` holds at least n bytes and `recv` n per rank, on this rank's
            // device, used on this stream; they live until the exchange is complete (waited
            // for below) or the communicator is aborted.
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
        let start = Instant::now();
        if !self.blocking {
            // A non-blocking communicator enqueues the exchange once its state leaves
            // ncclInProgress (connecting to the other ranks on a first call): wait for that,
            // within the time limit, before anything after it on the stream.
            wait_ready(self.comm, start + self.timeout).map_err(|e| match e {
                Some(e) => format!("NCCL reported {e:?} starting an all-gather"),
                None => format!(
                    "an all-gather of rank {} of {} did not start within {:?}: a rank did not \
                     join the call",
                    self.rank, self.ranks, self.timeout
                ),
            })?;
        }
        let host = held.host.as_mut().unwrap();
        stream
            .memcpy_dtoh(&recv.slice(0..all), host)
            .map_err(drv("copying an all-gather's bytes to the host"))?;
        let done = held.done.insert(
            stream
                .record_event(None)
                .map_err(drv("recording an event"))?,
        );
        let mut backoff = Backoff::new();
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
            backoff.wait();
        }
        host.as_slice()
            .map(|s| s[..all].to_vec())
            .map_err(drv("reading an all-gather's bytes"))
    }
}

/// Pinned host buffers of dropped groups, kept for later groups on the same context rather
/// than freed: freeing pinned memory waits for the whole device, which an NCCL kernel of
/// another group of the process, stuck on a dead peer, can hold until that group's time
/// limit (and a rank waiting there cannot launch its own part of an exchange).
static PINNED: Mutex<Vec<PinnedHostSlice<u8>>> = Mutex::new(Vec::new());

/// A kept pinned buffer of `len` bytes on `ctx`, if there is one.
fn take_pinned(ctx: &Arc<CudaContext>, len: usize) -> Option<PinnedHostSlice<u8>> {
    let mut pool = PINNED.lock().unwrap_or_else(|p| p.into_inner());
    let i = pool
        .iter()
        .position(|p| Arc::ptr_eq(p.context(), ctx) && p.len() == len)?;
    Some(pool.swap_remove(i))
}

/// Keeps `host` for a later group (see [`PINNED`]).
fn keep_pinned(host: PinnedHostSlice<u8>) {
    PINNED.lock().unwrap_or_else(|p| p.into_inner()).push(host);
}

/// An all-gather's buffers and event, freed only once the exchange completed or the
/// communicator was aborted.
#[derive(Default)]
struct Held {
    /// Pinned: what `send` gets.
    stage: Option<PinnedHostSlice<u8>>,
    send: Option<CudaSlice<u8>>,
    recv: Option<CudaSlice<u8>>,
    host: Option<PinnedHostSlice<u8>>,
    done: Option<CudaEvent>,
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
        self.gather(bytes)
    }
}

impl Drop for NcclGroup {
    /// Finalizes and destroys the communicator, which waits for the other ranks to do the
    /// same: at most the time limit, then it is aborted (an aborted group is not touched).
    /// Past that NCCL's own teardown is left on a thread of its own, so a drop never hangs.
    fn drop(&mut self) {
        // The last exchange completed: its buffers are idle. The pinned one goes to the
        // process's pool (freeing it would wait for the whole device).
        let kept = std::mem::take(self.kept.get_mut().unwrap_or_else(|p| p.into_inner()));
        for host in [kept.host, kept.stage].into_iter().flatten() {
            keep_pinned(host);
        }
        let broken = self.broken.get_mut().map_or(true, |b| b.is_some());
        if broken {
            return;
        }
        let (comm, blocking, limit) = (Comm(self.comm), self.blocking, self.timeout);
        bounded(limit + Duration::from_secs(1), move || {
            let comm = comm;
            // SAFETY (all three calls): the communicator is this group's and is not used
            // after this.
            if blocking {
                // ncclCommInitAll's communicators, all in this process, or a blocking one
                // split from a joined group: destroying one waits for its peers to do the
                // same (this thread waits at most the time limit).
                let _ = unsafe { nccl::comm_destroy(comm.0) };
                return;
            }
            let deadline = Instant::now() + limit;
            let finalized = unsafe { nccl::comm_finalize(comm.0) }.is_ok()
                && wait_ready(comm.0, deadline).is_ok();
            if finalized {
                let _ = unsafe { nccl::comm_destroy(comm.0) };
            } else {
                let _ = unsafe { nccl::comm_abort(comm.0) };
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::LocalGroup;

    #[test]
    fn the_config_has_nccl_2_17s_layout() {
        // ncclConfig_v21700 on a 64-bit machine: size_t, two unsigned, four int, a pointer,
        // an int.
        assert_eq!(std::mem::size_of::<Config>(), 48);
        assert_eq!(std::mem::offset_of!(Config, blocking), 16);
        assert_eq!(std::mem::offset_of!(Config, net_name), 32);
        assert_eq!(std::mem::offset_of!(Config, split_share), 40);
        let c = Config::non_blocking();
        assert_eq!(
            (c.size, c.magic, c.version, c.blocking),
            (48, 0xcafebeef, 21700, 0)
        );
    }

    fn on_ranks<R: Send>(ranks: usize, f: impl Fn(LocalGroup) -> R + Sync) -> Vec<R> {
        std::thread::scope(|s| {
            let f = &f;
            let hs: Vec<_> = LocalGroup::new(ranks)
                .into_iter()
                .map(|c| s.spawn(move || f(c)))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn rank_0s_id_reaches_every_rank() {
        let got = on_ranks(3, |c| {
            share_id(&c, || Ok(std::array::from_fn(|i| i as u8))).unwrap()
        });
        assert!(got
            .iter()
            .all(|id| id[..] == (0..128).collect::<Vec<u8>>()[..]));
    }

    #[test]
    fn rank_0s_failure_reaches_every_rank() {
        let got = on_ranks(3, |c| {
            share_id(&c, || {
                Err(Error::new(ErrorKind::NoCuda, "no libnccl here".to_string()))
            })
            .unwrap_err()
        });
        assert_eq!(got[0].kind(), ErrorKind::NoCuda);
        for e in &got[1..] {
            assert_eq!(e.kind(), ErrorKind::Collective);
            assert!(
                e.to_string()
                    .contains("rank 0 could not make the NCCL group's id: no libnccl here"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_teardown_that_hangs_is_left_behind() {
        let t = Instant::now();
        assert!(!bounded(Duration::from_millis(50), || std::thread::sleep(
            Duration::from_secs(5)
        )));
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(bounded(Duration::from_secs(5), || {}));
    }
}
