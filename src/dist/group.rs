//! The exchange a distributed call needs between its ranks, and its in-process form.

use crate::error::{Error, ErrorKind, Result};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What a distributed call needs from its ranks' transport: each rank's rank and the
/// number of ranks, and an all-gather of a few host bytes (every rank sends as many; every
/// rank receives all of them, in rank order). Calls are collective: every rank makes the
/// same calls in the same order.
///
/// An implementation must never hang for ever: a rank that does not join within its time
/// limit (or that dies) makes the call an [`ErrorKind::Collective`] error on the ranks that
/// did, with a message that says which ranks were missing. Such a group is dead: later calls
/// fail at once, and the ranks that go on build a new group. Errors that every rank sees
/// alike (ranks that sent different sizes) leave it usable.
///
/// Implementations: [`LocalGroup`] (threads of one process), [`TcpGroup`](super::TcpGroup)
/// (processes, over TCP, found through a [`Launch`](super::Launch) rendezvous) and
/// `NcclGroup` (NCCL between devices; cufold's `nccl` feature).
///
/// ```
/// use cufold::dist::{Collective, LocalGroup};
/// let ranks = LocalGroup::new(2);
/// let got = std::thread::scope(|s| {
///     let h: Vec<_> = ranks
///         .into_iter()
///         .map(|c| s.spawn(move || c.all_gather(&[c.rank() as u8 * 10]).unwrap()))
///         .collect();
///     h.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
/// });
/// assert_eq!(got, [vec![0, 10], vec![0, 10]]);
/// ```
pub trait Collective: Send {
    /// This rank, `0 .. ranks()`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn ranks(&self) -> usize;
    /// Every rank's `bytes`, concatenated in rank order. Every rank must pass the same
    /// number of bytes ([`ErrorKind::Collective`] on every rank otherwise).
    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<u8>>;
}

/// One process's ranks, one per thread (the stand-in for one rank per device, and the CPU
/// backend's transport): [`LocalGroup::new`] returns one handle per rank, to be moved to
/// its thread.
///
/// ```
/// use cufold::dist::{Collective, LocalGroup};
/// let ranks = LocalGroup::new(3);
/// assert_eq!(ranks.iter().map(|c| c.rank()).collect::<Vec<_>>(), [0, 1, 2]);
/// assert!(ranks.iter().all(|c| c.ranks() == 3));
/// ```
pub struct LocalGroup {
    rank: usize,
    shared: Arc<Shared>,
}

struct Shared {
    ranks: usize,
    timeout: Duration,
    state: Mutex<Round>,
    turn: Condvar,
}

#[derive(Default)]
struct Round {
    /// Rounds completed so far.
    done: u64,
    /// This round's contributions.
    slots: Vec<Option<Vec<u8>>>,
    /// The last completed round's result (read by its ranks before the next can complete).
    result: Arc<Vec<Vec<u8>>>,
    /// Why the group can no longer be used.
    broken: Option<String>,
}

impl LocalGroup {
    /// `ranks` handles of one group (ranks `0 .. ranks`), with a time limit of 60 s per call.
    ///
    /// ```
    /// assert_eq!(cufold::dist::LocalGroup::new(4).len(), 4);
    /// ```
    pub fn new(ranks: usize) -> Vec<LocalGroup> {
        LocalGroup::with_timeout(ranks, Duration::from_secs(60))
    }

    /// As [`LocalGroup::new`], waiting at most `timeout` in each call for the other ranks.
    ///
    /// ```
    /// use std::time::Duration;
    /// let ranks = cufold::dist::LocalGroup::with_timeout(2, Duration::from_millis(50));
    /// use cufold::dist::Collective;
    /// // Rank 1 never joins: rank 0 gets an error, not a hang.
    /// let e = ranks[0].all_gather(&[1]).unwrap_err();
    /// assert!(e.to_string().contains("rank 1"), "{e}");
    /// ```
    pub fn with_timeout(ranks: usize, timeout: Duration) -> Vec<LocalGroup> {
        let shared = Arc::new(Shared {
            ranks,
            timeout,
            state: Mutex::new(Round {
                slots: vec![None; ranks],
                ..Round::default()
            }),
            turn: Condvar::new(),
        });
        (0..ranks)
            .map(|rank| LocalGroup {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }
}

impl LocalGroup {
    /// Whether the group is dead: a call timed out (a rank did not join it), so every call
    /// from now on, on every rank, fails at once. A caller goes on with a new group
    /// ([`LocalGroup::new`]) for the ranks that remain; a group whose calls only failed (ranks
    /// that disagreed, a rank's own error) stays alive.
    ///
    /// ```
    /// use cufold::dist::{Collective, LocalGroup};
    /// use std::time::Duration;
    /// let ranks = LocalGroup::with_timeout(2, Duration::from_millis(20));
    /// assert!(!ranks[0].is_dead());
    /// assert!(ranks[0].all_gather(&[1]).is_err()); // rank 1 never joins
    /// assert!(ranks[0].is_dead() && ranks[1].is_dead());
    /// let fresh = LocalGroup::new(2); // what the ranks go on with
    /// assert!(!fresh[0].is_dead());
    /// ```
    pub fn is_dead(&self) -> bool {
        let st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        st.broken.is_some()
    }
}

fn broken(why: &str) -> Error {
    Error::new(ErrorKind::Collective, why.to_string())
}

impl Collective for LocalGroup {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.shared.ranks
    }

    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        let sh = &*self.shared;
        // A panic on another rank while it held the lock leaves consistent data behind
        // (every update is a single assignment): go on.
        let mut st = sh.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = &st.broken {
            return Err(broken(why));
        }
        let round = st.done;
        st.slots[self.rank] = Some(bytes.to_vec());
        if st.slots.iter().all(Option::is_some) {
            let all: Vec<Vec<u8>> = st.slots.iter_mut().map(|s| s.take().unwrap()).collect();
            st.result = Arc::new(all);
            st.done += 1;
            sh.turn.notify_all();
        } else {
            let (next, wait) = sh
                .turn
                .wait_timeout_while(st, sh.timeout, |s| s.done == round && s.broken.is_none())
                .unwrap_or_else(|p| p.into_inner());
            st = next;
            if st.done == round {
                if let Some(why) = &st.broken {
                    return Err(broken(why));
                }
                debug_assert!(wait.timed_out());
                let missing: Vec<String> = (0..sh.ranks)
                    .filter(|&r| st.slots[r].is_none())
                    .map(|r| format!("rank {r}"))
                    .collect();
                let why = format!(
                    "{} of {} ranks did not join a collective call within {:?} ({}); the \
                     group is dead: every later call on it fails at once, so build a new \
                     group (LocalGroup::new) for the ranks that go on",
                    missing.len(),
                    sh.ranks,
                    sh.timeout,
                    missing.join(", ")
                );
                st.broken = Some(why.clone());
                sh.turn.notify_all();
                return Err(broken(&why));
            }
        }
        let all = st.result.clone();
        drop(st);
        if let Some((r, b)) = all.iter().enumerate().find(|(_, b)| b.len() != bytes.len()) {
            return Err(broken(&format!(
                "ranks sent different sizes to one all-gather: rank {} sent {} bytes, rank {r} \
                 {}",
                self.rank,
                bytes.len(),
                b.len()
            )));
        }
        Ok(all.concat())
    }
}
