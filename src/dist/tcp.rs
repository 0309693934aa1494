//! One process per rank: how the processes of a job find each other (a [`Launch`]: the
//! environment a launcher sets, a shared file or a TCP address), and a [`Collective`] over
//! TCP between them ([`TcpGroup`]).

use super::Collective;
use crate::error::{Error, ErrorKind, Result};
use std::io::{ErrorKind as IoKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where the processes of a job meet: rank 0 listens, the others connect to it.
///
/// ```
/// use cufold::dist::Rendezvous;
/// let tcp = Rendezvous::Tcp("10.0.0.1:29500".into()); // rank 0's host: the others reach it
/// let file = Rendezvous::File {
///     path: "/shared/job-42.rendezvous".into(), // a file every process can read
///     host: "127.0.0.1".into(),                 // what rank 0 listens on and writes there
/// };
/// assert_ne!(tcp, file);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    /// Rank 0 listens on this address (`host:port`, as `MASTER_ADDR:MASTER_PORT`); the
    /// others connect to it.
    Tcp(String),
    /// Rank 0 listens on `host` at a port the system picks and writes `host:port` into the
    /// file at `path` (replacing it; it removes the file once every rank has joined); the
    /// others read the address there. For launchers that give no port (MPI), on one machine
    /// (`host` 127.0.0.1) or several sharing a file system (`host` rank 0's address).
    File {
        /// The file, on a file system every process sees; a new path per job.
        path: PathBuf,
        /// The address rank 0 listens on and publishes (reachable by every process).
        host: String,
    },
}

/// One process's place in a job: its rank, the number of ranks, its rank on its machine
/// (which GPU to take) and where the ranks meet. [`Launch::from_env`] reads what `torchrun`
/// or an MPI launcher sets; [`TcpGroup::join`] joins the job.
///
/// ```
/// use cufold::dist::{Launch, Rendezvous};
/// use std::time::Duration;
/// let l = Launch::new(1, 4, Rendezvous::Tcp("127.0.0.1:29500".into()))
///     .with_local_rank(1)
///     .with_timeout(Duration::from_secs(30));
/// assert_eq!((l.rank, l.ranks, l.local_rank), (1, 4, 1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// This process's rank, `0 .. ranks`.
    pub rank: usize,
    /// The number of ranks (processes) of the job.
    pub ranks: usize,
    /// This process's rank among those of its machine (the GPU ordinal to take).
    pub local_rank: usize,
    /// Where the ranks meet.
    pub rendezvous: Rendezvous,
    /// How long any wait of the group may last: for the ranks to join, and in each call for
    /// the others (60 s unless set).
    pub timeout: Duration,
}

/// The first of `names` set in the environment, parsed as a number.
fn env_number(names: &[&str]) -> Result<Option<usize>> {
    for name in names {
        if let Ok(v) = std::env::var(name) {
            return v.trim().parse().map(Some).map_err(|_| {
                Error::new(
                    ErrorKind::InvalidConfig,
                    format!("{name}={v:?} is not a rank or a number of ranks"),
                )
            });
        }
    }
    Ok(None)
}

impl Launch {
    /// Rank `rank` of `ranks`, meeting at `rendezvous`, with the local rank `rank` and a
    /// time limit of 60 s.
    ///
    /// ```
    /// use cufold::dist::{Launch, Rendezvous};
    /// let l = Launch::new(0, 2, Rendezvous::Tcp("127.0.0.1:29500".into()));
    /// assert_eq!(l.local_rank, 0);
    /// ```
    pub fn new(rank: usize, ranks: usize, rendezvous: Rendezvous) -> Launch {
        Launch {
            rank,
            ranks,
            local_rank: rank,
            rendezvous,
            timeout: Duration::from_secs(60),
        }
    }

    /// The same launch with another local rank.
    ///
    /// ```
    /// use cufold::dist::{Launch, Rendezvous};
    /// let l = Launch::new(5, 8, Rendezvous::Tcp("node0:29500".into())).with_local_rank(1);
    /// assert_eq!(l.local_rank, 1);
    /// ```
    pub fn with_local_rank(mut self, local_rank: usize) -> Launch {
        self.local_rank = local_rank;
        self
    }

    /// The same launch with another time limit.
    ///
    /// ```
    /// use cufold::dist::{Launch, Rendezvous};
    /// use std::time::Duration;
    /// let l = Launch::new(0, 1, Rendezvous::Tcp("127.0.0.1:0".into()));
    /// assert_eq!(l.with_timeout(Duration::from_secs(5)).timeout, Duration::from_secs(5));
    /// ```
    pub fn with_timeout(mut self, timeout: Duration) -> Launch {
        self.timeout = timeout;
        self
    }

    /// The launch a launcher describes in the environment:
    ///
    /// - the rank: `RANK` (torchrun), else `OMPI_COMM_WORLD_RANK` (Open MPI), `PMI_RANK`
    ///   (MPICH, Intel MPI), `SLURM_PROCID`;
    /// - the number of ranks: `WORLD_SIZE`, else `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`,
    ///   `SLURM_NTASKS`;
    /// - the local rank: `LOCAL_RANK`, else `OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID`,
    ///   `SLURM_LOCALID`, else the rank;
    /// - where to meet: `CUFOLD_RENDEZVOUS_FILE` (a [`Rendezvous::File`], rank 0 listening
    ///   on `MASTER_ADDR`, else 127.0.0.1), else `MASTER_ADDR:MASTER_PORT` (a
    ///   [`Rendezvous::Tcp`]). `CUFOLD_MASTER_PORT` replaces `MASTER_PORT`; under torchrun,
    ///   whose agent holds `MASTER_PORT` itself (it sets `TORCHELASTIC_USE_AGENT_STORE=True`),
    ///   the ranks meet at `MASTER_PORT + 1`;
    /// - the time limit: `CUFOLD_TIMEOUT` in seconds, else 60.
    ///
    /// Errors ([`ErrorKind::InvalidConfig`]): a variable missing or not a number, a rank out
    /// of range.
    ///
    /// ```no_run
    /// // RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 ./my-program
    /// let launch = cufold::dist::Launch::from_env()?;
    /// let group = cufold::dist::TcpGroup::join(&launch)?;
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn from_env() -> Result<Launch> {
        let missing = |what: &str, names: &str| {
            Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "no {what} in the environment: set {names} (as torchrun or an MPI launcher \
                     does)"
                ),
            )
        };
        let rank = env_number(&["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"])?
            .ok_or_else(|| missing("rank", "RANK"))?;
        let ranks = env_number(&[
            "WORLD_SIZE",
            "OMPI_COMM_WORLD_SIZE",
            "PMI_SIZE",
            "SLURM_NTASKS",
        ])?
        .ok_or_else(|| missing("number of ranks", "WORLD_SIZE"))?;
        let local_rank = env_number(&[
            "LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "MPI_LOCALRANKID",
            "SLURM_LOCALID",
        ])?
        .unwrap_or(rank);
        let addr = std::env::var("MASTER_ADDR").ok();
        let rendezvous = if let Some(path) = std::env::var_os("CUFOLD_RENDEZVOUS_FILE") {
            Rendezvous::File {
                path: path.into(),
                host: addr.unwrap_or_else(|| "127.0.0.1".into()),
            }
        } else {
            let addr = addr.ok_or_else(|| {
                missing(
                    "rendezvous",
                    "MASTER_ADDR and MASTER_PORT, or CUFOLD_RENDEZVOUS_FILE",
                )
            })?;
            let port = match env_number(&["CUFOLD_MASTER_PORT"])? {
                Some(p) => p,
                None => {
                    let p = env_number(&["MASTER_PORT"])?
                        .ok_or_else(|| missing("rendezvous port", "MASTER_PORT"))?;
                    let agent = std::env::var("TORCHELASTIC_USE_AGENT_STORE")
                        .is_ok_and(|v| v.eq_ignore_ascii_case("true"));
                    p + agent as usize
                }
            };
            Rendezvous::Tcp(join_host_port(&addr, port))
        };
        let timeout = match env_number(&["CUFOLD_TIMEOUT"])? {
            Some(s) => Duration::from_secs(s as u64),
            None => Duration::from_secs(60),
        };
        let launch = Launch {
            rank,
            ranks,
            local_rank,
            rendezvous,
            timeout,
        };
        launch.check()?;
        Ok(launch)
    }

    fn check(&self) -> Result<()> {
        if self.rank >= self.ranks {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("rank {} of a job of {} ranks", self.rank, self.ranks),
            ));
        }
        Ok(())
    }
}

/// `host:port`, bracketing an IPv6 address.
fn join_host_port(host: &str, port: usize) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Frames on the wire: a header of four little-endian u64 (tag, kind, round, body length),
/// then the body.
const TAG: u64 = 0x7463_646c_6f66_7563; // "cufoldct"
const FRAME: usize = 32;
const HELLO: u64 = 1; // body: rank, ranks (u64 each)
const WELCOME: u64 = 2;
const DATA: u64 = 3;
const FAIL: u64 = 4; // body: fatal (u8), then the message
/// The most bytes one frame may carry (a guard against a stranger's bytes).
const MAX_BODY: u64 = 1 << 32;

struct Frame {
    kind: u64,
    round: u64,
    body: Vec<u8>,
}

fn frame(kind: u64, round: u64, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME + body.len());
    for w in [TAG, kind, round, body.len() as u64] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.extend_from_slice(body);
    out
}

fn fail_body(fatal: bool, msg: &str) -> Vec<u8> {
    let mut b = vec![fatal as u8];
    b.extend_from_slice(msg.as_bytes());
    b
}

/// The header's words, checked.
fn parse_header(h: &[u8]) -> std::result::Result<(u64, u64, u64), String> {
    let w = |i: usize| u64::from_le_bytes(h[8 * i..8 * i + 8].try_into().unwrap());
    if w(0) != TAG {
        return Err("a stranger's bytes (not a cufold rank)".into());
    }
    if w(3) > MAX_BODY {
        return Err(format!("a frame of {} bytes", w(3)));
    }
    Ok((w(1), w(2), w(3)))
}

fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

/// Why a read or a write failed, in words.
fn io_why(e: &std::io::Error) -> &'static str {
    match e.kind() {
        IoKind::WouldBlock | IoKind::TimedOut => "timed out",
        IoKind::UnexpectedEof
        | IoKind::ConnectionReset
        | IoKind::ConnectionAborted
        | IoKind::BrokenPipe => "its connection closed (the process ended or left the group)",
        _ => "its connection failed",
    }
}

/// Reads one frame, waiting until `deadline` at most.
fn read_frame(s: &mut TcpStream, deadline: Instant) -> std::result::Result<Frame, String> {
    let mut read = |buf: &mut [u8]| -> std::result::Result<(), String> {
        let mut got = 0;
        while got < buf.len() {
            let left = remaining(deadline).ok_or_else(|| "timed out".to_string())?;
            s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
            match s.read(&mut buf[got..]) {
                Ok(0) => return Err(io_why(&IoKind::UnexpectedEof.into()).into()),
                Ok(k) => got += k,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(io_why(&e).into()),
            }
        }
        Ok(())
    };
    let mut h = [0u8; FRAME];
    read(&mut h)?;
    let (kind, round, len) = parse_header(&h)?;
    let mut body = vec![0u8; len as usize];
    read(&mut body)?;
    Ok(Frame { kind, round, body })
}

fn write_all(
    s: &mut TcpStream,
    bytes: &[u8],
    deadline: Instant,
) -> std::result::Result<(), String> {
    let left = remaining(deadline).unwrap_or(Duration::from_millis(1));
    s.set_write_timeout(Some(left))
        .and_then(|()| s.write_all(bytes))
        .map_err(|e| io_why(&e).to_string())
}

/// A frame being read without blocking (rank 0 gathering from every rank at once).
#[derive(Default)]
struct Inbox {
    buf: Vec<u8>,
}

impl Inbox {
    /// Reads what is there; `Some(frame)` once one is complete.
    fn poll(&mut self, s: &mut TcpStream) -> std::result::Result<Option<Frame>, String> {
        loop {
            let want = if self.buf.len() < FRAME {
                FRAME
            } else {
                FRAME + parse_header(&self.buf[..FRAME])?.2 as usize
            };
            if self.buf.len() >= FRAME && self.buf.len() == want {
                let (kind, round, _) = parse_header(&self.buf[..FRAME])?;
                let body = self.buf.split_off(FRAME);
                self.buf.clear();
                return Ok(Some(Frame { kind, round, body }));
            }
            let have = self.buf.len();
            self.buf.resize(want, 0);
            let read = s.read(&mut self.buf[have..]);
            self.buf.truncate(have + *read.as_ref().unwrap_or(&0));
            match read {
                Ok(0) => return Err(io_why(&IoKind::UnexpectedEof.into()).into()),
                Ok(_) => {}
                Err(e) if e.kind() == IoKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(io_why(&e).into()),
            }
        }
    }
}

/// One rank of a job of processes, as a [`Collective`] over TCP: rank 0 gathers every
/// rank's bytes and sends the whole to each (a star: fine for the few bytes a distributed
/// call exchanges). Made by [`TcpGroup::join`] (every rank, from a [`Launch`]) or, where
/// rank 0's process already holds a bound listener, [`TcpGroup::with_listener`].
///
/// Every wait is bounded by the group's time limit, and a rank whose process ends (killed,
/// crashed, or dropping its group) is seen at once by the others: rank 0 sees its
/// connection close and tells every rank. Either makes the call an
/// [`ErrorKind::Collective`] error on every surviving rank, naming the rank, and the group
/// dead ([`TcpGroup::is_dead`]): later calls fail at once, and the ranks that go on join a
/// new group (a new rendezvous). Ranks that send different sizes to one all-gather get an
/// error and keep a working group. Rank 0 gives its verdict within the time limit; the
/// others wait for it up to a quarter longer.
///
/// ```no_run
/// use cufold::dist::{ChunkLayout, CpuRank, Launch, TcpGroup};
/// // In each process of the job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set):
/// let group = TcpGroup::join(&Launch::from_env()?)?;
/// let rank = CpuRank::new(cufold::Cpu::new(), group);
/// let layout = ChunkLayout::new(1000, rank.ranks())?;
/// let r = layout.range(rank.rank());
/// let mine: Vec<f64> = (r.start..r.end).map(|i| i as f64).collect();
/// assert_eq!(rank.all_reduce(&layout, &mine, cufold::ops::Sum)?, 499_500.0);
/// # Ok::<(), cufold::Error>(())
/// ```
pub struct TcpGroup {
    rank: usize,
    ranks: usize,
    timeout: Duration,
    state: Mutex<State>,
}

struct State {
    /// Rank 0: one connection per other rank (index r - 1). The others: rank 0's.
    peers: Vec<TcpStream>,
    round: u64,
    dead: Option<String>,
}

impl std::fmt::Debug for TcpGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpGroup")
            .field("rank", &self.rank)
            .field("ranks", &self.ranks)
            .field("timeout", &self.timeout)
            .finish()
    }
}

fn collective(msg: String) -> Error {
    Error::new(ErrorKind::Collective, msg)
}

fn resolve(addr: &str) -> Result<Vec<std::net::SocketAddr>> {
    addr.to_socket_addrs().map(|a| a.collect()).map_err(|e| {
        Error::new(
            ErrorKind::InvalidConfig,
            format!("the rendezvous address {addr:?}: {e}"),
        )
    })
}

impl TcpGroup {
    /// Joins the job `launch` describes: rank 0 listens at the rendezvous and waits for the
    /// others; each other rank connects (retrying while rank 0 is not listening yet). Every
    /// rank returns once all have joined, or an error ([`ErrorKind::Collective`]) within the
    /// launch's time limit: a rank that never came (named), ranks that disagree on the
    /// number of ranks, two processes with one rank.
    ///
    /// ```no_run
    /// use cufold::dist::{Collective, Launch, Rendezvous, TcpGroup};
    /// // Process r of 2 on one machine:
    /// # let r = 0;
    /// let launch = Launch::new(r, 2, Rendezvous::Tcp("127.0.0.1:29500".into()));
    /// let group = TcpGroup::join(&launch)?;
    /// assert_eq!(group.all_gather(&[r as u8])?, [0, 1]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn join(launch: &Launch) -> Result<TcpGroup> {
        launch.check()?;
        let deadline = Instant::now() + launch.timeout;
        if launch.rank == 0 {
            let (listener, published) = match &launch.rendezvous {
                Rendezvous::Tcp(addr) => {
                    let l = bind(&resolve(addr)?, addr)?;
                    (l, None)
                }
                Rendezvous::File { path, host } => {
                    let l = bind(&resolve(&join_host_port(host, 0))?, host)?;
                    let port = l.local_addr().map_err(io_config)?.port();
                    publish(path, &join_host_port(host, port as usize))?;
                    (l, Some(path.clone()))
                }
            };
            let group = TcpGroup::accept(listener, launch.ranks, launch.timeout, deadline);
            if let Some(path) = published {
                let _ = std::fs::remove_file(path);
            }
            return group;
        }
        loop {
            let addr = match &launch.rendezvous {
                Rendezvous::Tcp(addr) => Some(addr.clone()),
                Rendezvous::File { path, .. } => std::fs::read_to_string(path)
                    .ok()
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty()),
            };
            if let Some(addr) = addr {
                for a in resolve(&addr)? {
                    let left = remaining(deadline).unwrap_or(Duration::from_millis(1));
                    let wait = left.min(Duration::from_secs(1));
                    if let Ok(s) = TcpStream::connect_timeout(&a, wait) {
                        return TcpGroup::hello(s, launch, deadline);
                    }
                }
            }
            if remaining(deadline).is_none() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(collective(format!(
            "rank {} could not reach rank 0 at {} within {:?}: rank 0 did not start, or \
             listens elsewhere",
            launch.rank,
            match &launch.rendezvous {
                Rendezvous::Tcp(a) => a.clone(),
                Rendezvous::File { path, .. } => format!("the address in {}", path.display()),
            },
            launch.timeout
        )))
    }

    /// Rank 0 of a job of `ranks`, listening on `listener` (bound by the caller, for
    /// example to port 0, its port then given to the other processes): waits for the other
    /// ranks to join, as [`TcpGroup::join`], at most `timeout`, which is then the group's
    /// time limit.
    ///
    /// ```
    /// use cufold::dist::{Collective, Launch, Rendezvous, TcpGroup};
    /// use std::time::Duration;
    /// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let addr = listener.local_addr()?.to_string();
    /// let t = Duration::from_secs(10);
    /// let other = std::thread::spawn(move || {
    ///     let g = TcpGroup::join(&Launch::new(1, 2, Rendezvous::Tcp(addr)).with_timeout(t))?;
    ///     g.all_gather(&[7])
    /// });
    /// let g = TcpGroup::with_listener(listener, 2, t)?;
    /// assert_eq!(g.all_gather(&[5])?, [5, 7]);
    /// assert_eq!(other.join().unwrap()?, [5, 7]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_listener(
        listener: TcpListener,
        ranks: usize,
        timeout: Duration,
    ) -> Result<TcpGroup> {
        if ranks == 0 {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                "a group of 0 ranks".to_string(),
            ));
        }
        TcpGroup::accept(listener, ranks, timeout, Instant::now() + timeout)
    }

    fn accept(
        listener: TcpListener,
        ranks: usize,
        timeout: Duration,
        deadline: Instant,
    ) -> Result<TcpGroup> {
        listener.set_nonblocking(true).map_err(io_config)?;
        let mut peers: Vec<Option<TcpStream>> = (1..ranks).map(|_| None).collect();
        let refuse = |peers: &mut Vec<Option<TcpStream>>, why: String| {
            for s in peers.iter_mut().flatten() {
                let _ = write_all(s, &frame(FAIL, 0, &fail_body(true, &why)), deadline);
                let _ = s.shutdown(Shutdown::Both);
            }
            collective(why)
        };
        while peers.iter().any(Option::is_none) {
            match listener.accept() {
                Ok((mut s, from)) => {
                    s.set_nonblocking(false).map_err(io_config)?;
                    let _ = s.set_nodelay(true);
                    // A short wait for the hello: a stranger must not hold up the others.
                    let hello_by = deadline.min(Instant::now() + Duration::from_secs(5));
                    let hello = match read_frame(&mut s, hello_by) {
                        Ok(f) if f.kind == HELLO && f.body.len() == 16 => f,
                        _ => continue, // not a cufold rank: ignore it
                    };
                    let w = |i: usize| {
                        u64::from_le_bytes(hello.body[8 * i..8 * i + 8].try_into().unwrap())
                    };
                    let (r, n) = (w(0) as usize, w(1) as usize);
                    let why = if n != ranks {
                        Some(format!(
                            "rank {r} (from {from}) joined a job of {n} ranks, rank 0's has \
                             {ranks}"
                        ))
                    } else if r == 0 || r >= ranks {
                        Some(format!(
                            "a process from {from} joined as rank {r} of {ranks}"
                        ))
                    } else if peers[r - 1].is_some() {
                        Some(format!(
                            "two processes joined as rank {r} (the second from {from})"
                        ))
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        let _ =
                            write_all(&mut s, &frame(FAIL, 0, &fail_body(true, &why)), deadline);
                        return Err(refuse(&mut peers, why));
                    }
                    peers[r - 1] = Some(s);
                }
                Err(e) if e.kind() == IoKind::WouldBlock || e.kind() == IoKind::Interrupted => {
                    if remaining(deadline).is_none() {
                        let missing: Vec<String> = (1..ranks)
                            .filter(|&r| peers[r - 1].is_none())
                            .map(|r| format!("rank {r}"))
                            .collect();
                        let why = format!(
                            "{} of {ranks} ranks did not join the group within {timeout:?} ({})",
                            missing.len(),
                            missing.join(", ")
                        );
                        return Err(refuse(&mut peers, why));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(refuse(&mut peers, format!("listening for ranks: {e}"))),
            }
        }
        let mut peers: Vec<TcpStream> = peers.into_iter().map(Option::unwrap).collect();
        for (i, s) in peers.iter_mut().enumerate() {
            if let Err(why) = write_all(s, &frame(WELCOME, 0, &[]), deadline) {
                let why = format!("rank {}: {why} while the group formed", i + 1);
                let mut all: Vec<Option<TcpStream>> = peers.into_iter().map(Some).collect();
                return Err(refuse(&mut all, why));
            }
        }
        Ok(TcpGroup::from_peers(0, ranks, timeout, peers))
    }

    fn hello(mut s: TcpStream, launch: &Launch, deadline: Instant) -> Result<TcpGroup> {
        let _ = s.set_nodelay(true);
        let body: Vec<u8> = [launch.rank as u64, launch.ranks as u64]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let fail =
            |why: String| collective(format!("rank {} joining the group: {why}", launch.rank));
        write_all(&mut s, &frame(HELLO, 0, &body), deadline)
            .map_err(|w| fail(format!("rank 0: {w}")))?;
        // Rank 0 answers once every rank has joined, or with why not: wait a little past the
        // limit for its verdict.
        let verdict_by = deadline + launch.timeout / 4;
        match read_frame(&mut s, verdict_by) {
            Ok(f) if f.kind == WELCOME => Ok(TcpGroup::from_peers(
                launch.rank,
                launch.ranks,
                launch.timeout,
                vec![s],
            )),
            Ok(f) if f.kind == FAIL => Err(collective(
                String::from_utf8_lossy(f.body.get(1..).unwrap_or(&[])).into_owned(),
            )),
            Ok(_) => Err(fail("rank 0 answered out of turn".into())),
            Err(w) => Err(fail(format!("rank 0: {w}"))),
        }
    }

    fn from_peers(rank: usize, ranks: usize, timeout: Duration, peers: Vec<TcpStream>) -> TcpGroup {
        TcpGroup {
            rank,
            ranks,
            timeout,
            state: Mutex::new(State {
                peers,
                round: 0,
                dead: None,
            }),
        }
    }

    /// The group's time limit for each wait.
    ///
    /// ```
    /// use cufold::dist::TcpGroup;
    /// use std::time::Duration;
    /// let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let g = TcpGroup::with_listener(l, 1, Duration::from_secs(3))?; // a job of one
    /// assert_eq!(g.timeout(), Duration::from_secs(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether the group is dead: a rank did not join a call in time, or its process ended,
    /// so every call from now on fails at once. The ranks that go on join a new group (a
    /// new rendezvous: a new port or file).
    ///
    /// ```
    /// use cufold::dist::{Collective, TcpGroup};
    /// use std::time::Duration;
    /// let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let g = TcpGroup::with_listener(l, 1, Duration::from_secs(3))?;
    /// assert_eq!(g.all_gather(&[1, 2])?, [1, 2]);
    /// assert!(!g.is_dead());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_dead(&self) -> bool {
        self.lock().dead.is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Rank 0's part of an all-gather.
    fn gather_root(&self, st: &mut State, bytes: &[u8]) -> std::result::Result<Vec<u8>, Failure> {
        let round = st.round;
        let deadline = Instant::now() + self.timeout;
        let n = self.ranks - 1;
        let mut got: Vec<Option<Vec<u8>>> = vec![None; n];
        let mut inboxes: Vec<Inbox> = (0..n).map(|_| Inbox::default()).collect();
        for s in &st.peers {
            s.set_nonblocking(true)
                .map_err(|e| Failure::Fatal(e.to_string()))?;
        }
        let mut pause = Duration::from_micros(10);
        let outcome = loop {
            let mut progress = false;
            let mut failed = None;
            for r in 0..n {
                if got[r].is_some() {
                    continue;
                }
                match inboxes[r].poll(&mut st.peers[r]) {
                    Ok(Some(f)) if f.kind == DATA && f.round == round => {
                        got[r] = Some(f.body);
                        progress = true;
                    }
                    Ok(Some(_)) => {
                        failed = Some(format!("rank {} sent a frame out of turn", r + 1));
                        break;
                    }
                    Ok(None) => {}
                    Err(why) => {
                        failed = Some(format!("rank {}: {why}", r + 1));
                        break;
                    }
                }
            }
            if let Some(why) = failed {
                break Err(why);
            }
            if got.iter().all(Option::is_some) {
                break Ok(());
            }
            if remaining(deadline).is_none() {
                let missing: Vec<String> = (0..n)
                    .filter(|&r| got[r].is_none())
                    .map(|r| format!("rank {}", r + 1))
                    .collect();
                break Err(format!(
                    "{} of {} ranks did not join a collective call within {:?} ({})",
                    missing.len(),
                    self.ranks,
                    self.timeout,
                    missing.join(", ")
                ));
            }
            if progress {
                pause = Duration::from_micros(10);
            } else {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(1));
            }
        };
        for s in &st.peers {
            let _ = s.set_nonblocking(false);
        }
        let send_by = Instant::now() + self.timeout;
        if let Err(why) = outcome {
            return Err(Failure::Fatal(why));
        }
        let mut all = vec![bytes.to_vec()];
        all.extend(got.into_iter().map(Option::unwrap));
        if let Some((r, b)) = all.iter().enumerate().find(|(_, b)| b.len() != bytes.len()) {
            let why = format!(
                "ranks sent different sizes to one all-gather: rank 0 sent {} bytes, rank {r} {}",
                bytes.len(),
                b.len()
            );
            for (r, s) in st.peers.iter_mut().enumerate() {
                write_all(s, &frame(FAIL, round, &fail_body(false, &why)), send_by)
                    .map_err(|w| Failure::Fatal(format!("rank {}: {w}", r + 1)))?;
            }
            return Err(Failure::Soft(why));
        }
        let all = all.concat();
        let out = frame(DATA, round, &all);
        for (r, s) in st.peers.iter_mut().enumerate() {
            write_all(s, &out, send_by)
                .map_err(|w| Failure::Fatal(format!("rank {}: {w}", r + 1)))?;
        }
        Ok(all)
    }

    /// Another rank's part: its bytes to rank 0, the whole back.
    fn gather_leaf(&self, st: &mut State, bytes: &[u8]) -> std::result::Result<Vec<u8>, Failure> {
        let round = st.round;
        let s = &mut st.peers[0];
        write_all(s, &frame(DATA, round, bytes), Instant::now() + self.timeout)
            .map_err(|w| Failure::Fatal(format!("rank 0: {w}")))?;
        // Rank 0 waits for every rank up to the time limit, then says why: wait a little
        // longer for its verdict.
        let deadline = Instant::now() + self.timeout + self.timeout / 4;
        let f = read_frame(s, deadline).map_err(|w| Failure::Fatal(format!("rank 0: {w}")))?;
        if f.round != round {
            return Err(Failure::Fatal(format!(
                "rank 0 answered round {} in round {round}",
                f.round
            )));
        }
        match f.kind {
            DATA if f.body.len() == bytes.len() * self.ranks => Ok(f.body),
            FAIL => {
                let msg = String::from_utf8_lossy(f.body.get(1..).unwrap_or(&[])).into_owned();
                Err(if f.body.first() == Some(&0) {
                    Failure::Soft(msg)
                } else {
                    Failure::Told(msg)
                })
            }
            _ => Err(Failure::Fatal("rank 0 answered out of turn".into())),
        }
    }
}

/// How an all-gather failed.
enum Failure {
    /// The group is dead (this rank found why).
    Fatal(String),
    /// The group is dead (rank 0 told why).
    Told(String),
    /// Only this call failed.
    Soft(String),
}

fn io_config(e: std::io::Error) -> Error {
    Error::new(ErrorKind::InvalidConfig, format!("the rendezvous: {e}"))
}

fn bind(addrs: &[std::net::SocketAddr], what: &str) -> Result<TcpListener> {
    TcpListener::bind(addrs).map_err(|e| {
        Error::new(
            ErrorKind::InvalidConfig,
            format!("rank 0 cannot listen on {what}: {e}"),
        )
    })
}

/// Writes `addr` into `path` at once (a new file renamed over it), so that no rank reads
/// half of it.
fn publish(path: &Path, addr: &str) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, addr)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidConfig,
                format!("writing the rendezvous file {}: {e}", path.display()),
            )
        })
}

impl Collective for TcpGroup {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.ranks
    }

    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        let mut st = self.lock();
        if let Some(why) = &st.dead {
            return Err(collective(why.clone()));
        }
        if self.ranks == 1 {
            return Ok(bytes.to_vec());
        }
        let got = if self.rank == 0 {
            self.gather_root(&mut st, bytes)
        } else {
            self.gather_leaf(&mut st, bytes)
        };
        st.round += 1;
        match got {
            Ok(all) => Ok(all),
            Err(Failure::Soft(why)) => Err(collective(why)),
            Err(Failure::Fatal(why) | Failure::Told(why)) => {
                let why = if why.contains("the group is dead") {
                    why
                } else {
                    format!(
                        "{why}; the group is dead: every later call on it fails at once, so \
                         the ranks that go on join a new group"
                    )
                };
                if self.rank == 0 {
                    // Tell every rank that can still hear, then close.
                    let by = Instant::now() + Duration::from_secs(1);
                    let round = st.round - 1;
                    for s in st.peers.iter_mut() {
                        let _ = write_all(s, &frame(FAIL, round, &fail_body(true, &why)), by);
                    }
                }
                for s in &st.peers {
                    let _ = s.shutdown(Shutdown::Both);
                }
                st.dead = Some(why.clone());
                Err(collective(why))
            }
        }
    }
}

impl Drop for TcpGroup {
    fn drop(&mut self) {
        for s in &self.lock().peers {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job of `ranks` threads meeting at a listener on port 0.
    fn job<R: Send>(
        ranks: usize,
        timeout: Duration,
        f: impl Fn(Result<TcpGroup>) -> R + Sync,
    ) -> Vec<R> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        std::thread::scope(|s| {
            let f = &f;
            let others: Vec<_> = (1..ranks)
                .map(|r| {
                    let launch =
                        Launch::new(r, ranks, Rendezvous::Tcp(addr.clone())).with_timeout(timeout);
                    s.spawn(move || f(TcpGroup::join(&launch)))
                })
                .collect();
            let mut out = vec![f(TcpGroup::with_listener(listener, ranks, timeout))];
            out.extend(others.into_iter().map(|h| h.join().unwrap()));
            out
        })
    }

    #[test]
    fn threads_gather_over_tcp() {
        let got = job(4, Duration::from_secs(10), |g| {
            let g = g.unwrap();
            let a = g.all_gather(&[g.rank() as u8; 3]).unwrap();
            let e = g.all_gather(&vec![1; g.rank() + 1]).unwrap_err();
            assert!(e.to_string().contains("different sizes"), "{e}");
            let b = g.all_gather(&[]).unwrap();
            let c = g.all_gather(&[9 - g.rank() as u8]).unwrap();
            (a, b, c, g.is_dead())
        });
        for (a, b, c, dead) in got {
            assert_eq!(a, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
            assert!(b.is_empty());
            assert_eq!(c, [9, 8, 7, 6]);
            assert!(!dead);
        }
    }

    #[test]
    fn a_rank_that_leaves_kills_the_group_at_once() {
        let t = Instant::now();
        let got = job(3, Duration::from_secs(20), |g| {
            let g = g.unwrap();
            if g.rank() == 2 {
                return None; // drops its group: its connection closes
            }
            let e = g.all_gather(&[1]).unwrap_err();
            let again = g.all_gather(&[1]).unwrap_err();
            Some((e.to_string(), again.to_string(), g.is_dead()))
        });
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        for (e, again, dead) in got.into_iter().flatten() {
            assert!(e.contains("rank 2") && e.contains("closed"), "{e}");
            assert_eq!(e, again);
            assert!(dead);
        }
    }

    #[test]
    fn a_rank_that_never_comes_is_named() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let t = Duration::from_millis(300);
        let one = std::thread::spawn(move || {
            TcpGroup::join(&Launch::new(1, 3, Rendezvous::Tcp(addr)).with_timeout(t))
        });
        let e = TcpGroup::with_listener(listener, 3, t).unwrap_err();
        assert!(e.to_string().contains("(rank 2)"), "{e}");
        let e = one.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("(rank 2)"), "{e}");
        // Nobody listening at all.
        let free = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap().to_string();
        drop(free);
        let e =
            TcpGroup::join(&Launch::new(1, 2, Rendezvous::Tcp(addr)).with_timeout(t)).unwrap_err();
        assert!(e.to_string().contains("could not reach rank 0"), "{e}");
    }

    #[test]
    fn ranks_that_disagree_on_the_job_are_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let t = Duration::from_secs(10);
        let one = std::thread::spawn(move || {
            TcpGroup::join(&Launch::new(1, 3, Rendezvous::Tcp(addr)).with_timeout(t))
        });
        let e = TcpGroup::with_listener(listener, 2, t).unwrap_err();
        assert!(e.to_string().contains("joined a job of 3 ranks"), "{e}");
        let e = one.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("joined a job of 3 ranks"), "{e}");
    }

    #[test]
    fn a_shared_file_finds_rank_0() {
        let dir = std::env::temp_dir().join(format!("cufold-rdv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("job");
        let rdv = Rendezvous::File {
            path: path.clone(),
            host: "127.0.0.1".into(),
        };
        let got: Vec<Vec<u8>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|r| {
                    let launch =
                        Launch::new(r, 3, rdv.clone()).with_timeout(Duration::from_secs(10));
                    s.spawn(move || {
                        let g = TcpGroup::join(&launch).unwrap();
                        g.all_gather(&[r as u8]).unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(got.iter().all(|g| g == &[0, 1, 2]));
        assert!(
            !path.exists(),
            "rank 0 removes the file once every rank has joined"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hosts_and_ports_join() {
        assert_eq!(join_host_port("node1", 5), "node1:5");
        assert_eq!(join_host_port("::1", 5), "[::1]:5");
        assert_eq!(join_host_port("[::1]", 5), "[::1]:5");
    }
}
