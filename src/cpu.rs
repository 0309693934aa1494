//! The CPU backend's handle and its plumbing: how work is spread over the threads of the
//! caller's rayon pool. The primitives' CPU twins (`crate::reduce`, `crate::scan`,
//! `crate::segment`, `crate::monte_carlo`) add their own `impl Cpu` blocks and compute the
//! canonical tree and grouping of `crate::tree`.

use crate::element::DeviceValue;
use crate::ops::Operator;
use crate::tree::{subtree, Leaves};
use rayon::prelude::*;
use std::num::NonZeroUsize;

/// Inputs shorter than this run on the caller's thread: splitting them costs more than it
/// saves (a rayon join from outside the pool is several microseconds).
pub(crate) const PARALLEL_MIN: usize = 1 << 16;

/// The smallest span of positions one thread reduces alone (a power of two).
const MIN_GRAIN: usize = 1 << 14;

/// Reductions, scans, segmented reductions and scans, and Monte Carlo integration on the
/// CPU, along the canonical tree and grouping (crate docs): for operators built from
/// `+ - * /`, min, max and comparisons the results have the same bits as the GPU's. Use it
/// where there is no CUDA, and as the reference in tests.
///
/// Work runs on [rayon](https://docs.rs/rayon): in the pool of the caller (the global pool,
/// or the one a [`ThreadPool::install`](rayon::ThreadPool::install) around the call
/// names), so it composes with `par_iter` and starts no thread of its own. Inputs of fewer
/// than 65 536 elements run on the caller's thread. A panic in an operator resurfaces in the
/// caller with its original payload. The results never depend on the number of threads.
///
/// ```
/// use cufold::{ops, Cpu, ScanKind};
/// let cpu = Cpu::new();
/// let x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
/// assert_eq!(cpu.reduce(&x, ops::Sum)?, 499500.0);
/// assert_eq!(cpu.reduce(&x, ops::ArgMax)?.index, 999);
/// assert_eq!(cpu.scan(&x, ops::Max, ScanKind::Inclusive)?[10], 10.0);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Cpu {
    /// How many threads' worth of pieces a call is split into; `None`: the current pool's
    /// thread count, read at each call.
    width: Option<NonZeroUsize>,
}

impl Default for Cpu {
    fn default() -> Self {
        Cpu::new()
    }
}

impl Cpu {
    /// A backend using every thread of the current rayon pool (rayon's global pool, one
    /// thread per core unless configured otherwise, or the pool a call runs inside).
    ///
    /// ```
    /// let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    /// assert_eq!(pool.install(|| cufold::Cpu::new().threads()), 3);
    /// assert!(cufold::Cpu::new().threads() >= 1);
    /// ```
    pub fn new() -> Cpu {
        Cpu { width: None }
    }

    /// A backend that splits each call's work for `threads` threads (0 counts as 1) of the
    /// current rayon pool. It creates no thread and no pool: `with_threads(1)` runs every
    /// call on the caller's thread, and a width past the pool's size only cuts the input
    /// into more pieces (each at least 16 384 positions long, however large `threads` is).
    /// To run on a pool of a given size, install one around the call. The result does not
    /// depend on any of it.
    ///
    /// ```
    /// let one = cufold::Cpu::with_threads(1);
    /// let many = cufold::Cpu::with_threads(usize::MAX);
    /// let x: Vec<f32> = (0..100_000).map(|i| (i as f32).sin()).collect();
    /// let (a, b) = (one.reduce(&x, cufold::ops::Sum)?, many.reduce(&x, cufold::ops::Sum)?);
    /// assert_eq!(a.to_bits(), b.to_bits());
    /// // Four threads of a private pool:
    /// let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    /// let c = pool.install(|| cufold::Cpu::new().reduce(&x, cufold::ops::Sum))?;
    /// assert_eq!(a.to_bits(), c.to_bits());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn with_threads(threads: usize) -> Cpu {
        Cpu {
            width: NonZeroUsize::new(threads.max(1)),
        }
    }

    /// The number of threads a call's work is split for: the width given to
    /// [`with_threads`](Cpu::with_threads), or the current rayon pool's thread count.
    ///
    /// ```
    /// assert_eq!(cufold::Cpu::with_threads(3).threads(), 3);
    /// assert_eq!(cufold::Cpu::with_threads(0).threads(), 1);
    /// ```
    pub fn threads(&self) -> usize {
        self.width
            .map_or_else(rayon::current_num_threads, NonZeroUsize::get)
    }

    /// Whether `n` items of work are worth splitting.
    pub(crate) fn parallel(&self, n: usize) -> bool {
        n >= PARALLEL_MIN && self.threads() > 1
    }

    /// The power-of-two span of positions a thread reduces alone, out of `p`: about sixteen
    /// pieces per thread, none shorter than `MIN_GRAIN` (with four, the pieces of an input
    /// just past a power of two left one thread a third more work than the other: 10^7
    /// elements on two threads were five pieces of 2^21, three on one thread).
    fn grain(&self, p: usize) -> usize {
        (p / self.threads().saturating_mul(16))
            .max(MIN_GRAIN)
            .next_power_of_two()
    }

    /// The canonical tree over `leaves`, before `finish` (the identity when there are none):
    /// the tree's upper levels split by `rayon::join`, the subtrees below the grain
    /// sequential. Every split is a split of the canonical tree, so the bits do not depend
    /// on where the splits stop.
    pub(crate) fn tree<T: DeviceValue, O: Operator<T>, L: Leaves<T, O> + ?Sized>(
        &self,
        op: &O,
        leaves: &L,
    ) -> O::Acc {
        let n = leaves.len();
        if n == 0 {
            return op.identity();
        }
        let p = n.next_power_of_two();
        if !self.parallel(n) {
            return subtree(op, leaves, 0, p, &mut Vec::new());
        }
        par_subtree(op, leaves, 0, p, self.grain(p))
    }

    /// Runs `f` on every work item, on the current pool's threads (a single item, or a
    /// width of one, runs on the caller's thread).
    pub(crate) fn run_chunks<W: Send>(&self, work: impl Iterator<Item = W>, f: impl Fn(W) + Sync) {
        let items = work.collect::<Vec<_>>();
        if items.len() <= 1 || self.threads() == 1 {
            items.into_iter().for_each(f);
            return;
        }
        items.into_par_iter().with_max_len(1).for_each(&f);
    }
}

/// The tree over positions `lo..lo + len` (as `subtree`), split in halves on the pool down
/// to spans of `grain`.
fn par_subtree<T: DeviceValue, O: Operator<T>, L: Leaves<T, O> + ?Sized>(
    op: &O,
    leaves: &L,
    lo: usize,
    len: usize,
    grain: usize,
) -> O::Acc {
    if len <= grain {
        return subtree(op, leaves, lo, len, &mut Vec::new());
    }
    let half = len / 2;
    if lo + half >= leaves.len() {
        // No position in the right half: the left half with the identity, as `subtree`.
        return op.combine(par_subtree(op, leaves, lo, half, grain), op.identity());
    }
    let (left, right) = rayon::join(
        || par_subtree(op, leaves, lo, half, grain),
        || par_subtree(op, leaves, lo + half, half, grain),
    );
    op.combine(left, right)
}
