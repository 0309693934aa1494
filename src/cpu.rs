//! The CPU backend's handle and its plumbing: how work is spread over threads. The
//! primitives' CPU twins (`crate::reduce`, `crate::scan`) add their own `impl Cpu` blocks and
//! compute the canonical tree and grouping of `crate::tree`.

use crate::element::DeviceValue;
use crate::ops::Operator;
use crate::tree::{subtree, Leaves};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Reductions and scans on the CPU, multi-threaded, along the canonical tree and grouping
/// (crate docs): for operators built from `+ - * /`, min, max and comparisons the results
/// have the same bits as the GPU's. Use it where there is no CUDA, and as the reference in
/// tests.
///
/// ```
/// use cufold::{ops, Cpu};
/// let cpu = Cpu::new();
/// let x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
/// assert_eq!(cpu.reduce(&x, ops::Sum)?, 499500.0);
/// assert_eq!(cpu.reduce(&x, ops::ArgMax)?.index, 999);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Cpu {
    threads: usize,
}

impl Default for Cpu {
    fn default() -> Self {
        Cpu::new()
    }
}

impl Cpu {
    /// A backend using every available core.
    ///
    /// ```
    /// assert!(cufold::Cpu::new().threads() >= 1);
    /// ```
    pub fn new() -> Cpu {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Cpu { threads }
    }

    /// A backend using `threads` threads (at least one). The result does not depend on it.
    ///
    /// ```
    /// let one = cufold::Cpu::with_threads(1);
    /// let many = cufold::Cpu::with_threads(8);
    /// let x: Vec<f32> = (0..100_000).map(|i| (i as f32).sin()).collect();
    /// let (a, b) = (one.reduce(&x, cufold::ops::Sum)?, many.reduce(&x, cufold::ops::Sum)?);
    /// assert_eq!(a.to_bits(), b.to_bits());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn with_threads(threads: usize) -> Cpu {
        Cpu {
            threads: threads.max(1),
        }
    }

    /// The number of threads used.
    ///
    /// ```
    /// assert_eq!(cufold::Cpu::with_threads(3).threads(), 3);
    /// ```
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The trees over the first `count` chunks of `chunk` positions of `leaves` (`chunk` a
    /// power of two; the last chunk may be cut by the end), in chunk order, computed on up
    /// to `threads` threads.
    pub(crate) fn subtrees<T: DeviceValue, O: Operator<T>, L: Leaves<T, O> + ?Sized>(
        &self,
        op: &O,
        x: &L,
        chunk: usize,
        count: usize,
    ) -> Vec<O::Acc> {
        let next = AtomicUsize::new(0);
        let parts: Mutex<Vec<Option<O::Acc>>> = Mutex::new(vec![None; count]);
        let workers = self.threads.min(count);
        let work = || {
            let mut buf = Vec::with_capacity(crate::tree::LEAF);
            loop {
                let c = next.fetch_add(1, Ordering::Relaxed);
                if c >= count {
                    break;
                }
                let t = subtree(op, x, c * chunk, chunk, &mut buf);
                parts.lock().unwrap()[c] = Some(t);
            }
        };
        if workers <= 1 {
            work();
        } else {
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(work);
                }
            });
        }
        parts
            .into_inner()
            .unwrap()
            .into_iter()
            .map(|t| t.expect("every chunk reduced"))
            .collect()
    }

    /// The canonical tree over `leaves`, before `finish` (the identity when there are none):
    /// chunks that are subtrees of the canonical tree on all threads, then the tree over
    /// their results.
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
        // A power of two, so that every chunk is a subtree of the canonical tree.
        let chunk = 1usize << (p / (self.threads * 4)).max(crate::tree::LEAF).ilog2();
        if self.threads == 1 || p <= chunk {
            return subtree(op, leaves, 0, p, &mut Vec::new());
        }
        let mut parts = self.subtrees(op, leaves, chunk, n.div_ceil(chunk));
        crate::tree::fold_levels(op, &mut parts, p / chunk)
    }

    /// Runs `f` on every work item, on up to `threads` threads (one per item at most; a
    /// single item, or a single thread, runs on the caller's thread: no thread is started).
    pub(crate) fn run_chunks<W: Send>(&self, work: impl Iterator<Item = W>, f: impl Fn(W) + Sync) {
        let items = work.collect::<Vec<_>>();
        let workers = self.threads.min(items.len());
        if workers <= 1 {
            items.into_iter().for_each(f);
            return;
        }
        let queue = Mutex::new(items.into_iter());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let item = queue.lock().unwrap().next();
                    match item {
                        Some(w) => f(w),
                        None => break,
                    }
                });
            }
        });
    }
}
