//! The CPU backend: the same operators along the same canonical tree, on all cores.

use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::ops::Operator;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Leaves reduced by one sequential pass over a buffer.
const LEAF: usize = 1 << 12;

/// Reductions on the CPU, multi-threaded, along the canonical tree (crate docs): for
/// operators built from `+ - * /`, min, max and comparisons the result has the same bits as
/// the GPU's. Use it where there is no CUDA, and as the reference in tests.
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

    /// Reduces `x` with `op`: `finish(tree(x), x.len())`.
    ///
    /// For N = 0 it returns `finish(identity, 0)`, or an [`ErrorKind::EmptyInput`] error
    /// for the operators that have no value for an empty input (see [`crate::ops`]).
    ///
    /// ```
    /// let m = cufold::Cpu::new().reduce(&[2.0f64, 4.0], cufold::ops::Mean)?;
    /// assert_eq!(m, 3.0);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce<T: DeviceValue, O: Operator<T>>(&self, x: &[T], op: O) -> Result<O::Out> {
        check_empty::<T, O>(x.len() as u64)?;
        Ok(op.finish(self.reduce_acc(x, op), x.len() as u64))
    }

    /// The canonical-tree accumulator of `x`, before `finish` (the identity for N = 0).
    ///
    /// ```
    /// use cufold::ops::Div2Mean;
    /// // (1+2)/2 = 1.5 and (3+0)/2 = 1.5, then (1.5+1.5)/2: no correction yet.
    /// assert_eq!(cufold::Cpu::new().reduce_acc(&[1.0f32, 2.0, 3.0], Div2Mean), 1.5);
    /// ```
    pub fn reduce_acc<T: DeviceValue, O: Operator<T>>(&self, x: &[T], op: O) -> O::Acc {
        let n = x.len();
        if n == 0 {
            return op.identity();
        }
        let p = n.next_power_of_two();
        // A power of two, so that every chunk is a subtree of the canonical tree.
        let chunk = 1usize << (p / (self.threads * 4)).max(LEAF).ilog2();
        if self.threads == 1 || p <= chunk {
            return subtree(&op, x, 0, p, &mut Vec::new());
        }
        let chunks = n.div_ceil(chunk);
        let next = AtomicUsize::new(0);
        let mut parts: Vec<Option<O::Acc>> = vec![None; chunks];
        let workers = self.threads.min(chunks);
        let done: Vec<Vec<(usize, O::Acc)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    s.spawn(|| {
                        let mut buf = Vec::with_capacity(LEAF);
                        let mut out = Vec::new();
                        loop {
                            let c = next.fetch_add(1, Ordering::Relaxed);
                            if c >= chunks {
                                break out;
                            }
                            out.push((c, subtree(&op, x, c * chunk, chunk, &mut buf)));
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("cufold CPU worker panicked"))
                .collect()
        });
        for (c, acc) in done.into_iter().flatten() {
            parts[c] = Some(acc);
        }
        let mut parts: Vec<O::Acc> = parts
            .into_iter()
            .map(|a| a.expect("every chunk reduced"))
            .collect();
        fold_levels(&op, &mut parts, p / chunk)
    }
}

pub(crate) fn check_empty<T: DeviceValue, O: Operator<T>>(n: u64) -> Result<()> {
    if n == 0 && O::EMPTY_IS_ERROR {
        return Err(Error::new(
            ErrorKind::EmptyInput,
            format!(
                "{} has no value for an empty input: check the length before reducing",
                O::NAME
            ),
        ));
    }
    Ok(())
}

/// The tree over positions `lo..lo + len` (`len` a power of two, `lo < x.len()`).
fn subtree<T: DeviceValue, O: Operator<T>>(
    op: &O,
    x: &[T],
    lo: usize,
    len: usize,
    buf: &mut Vec<O::Acc>,
) -> O::Acc {
    if len <= LEAF {
        let end = x.len().min(lo + len);
        buf.clear();
        buf.extend(
            x[lo..end]
                .iter()
                .enumerate()
                .map(|(i, &v)| op.lift(v, (lo + i) as u64)),
        );
        return fold_levels(op, buf, len);
    }
    let half = len / 2;
    let left = subtree(op, x, lo, half, buf);
    let right = if lo + half < x.len() {
        subtree(op, x, lo + half, half, buf)
    } else {
        op.identity()
    };
    op.combine(left, right)
}

/// The tree over `width` positions (a power of two) of which the first `buf.len()` (at
/// least one) are present; the rest are identity. A node with a present left half combines
/// it with its right half (the identity where that half is absent); a node with no present
/// position is the identity, not computed. Consumes `buf`'s contents.
pub(crate) fn fold_levels<T: DeviceValue, O: Operator<T>>(
    op: &O,
    buf: &mut [O::Acc],
    width: usize,
) -> O::Acc {
    let mut count = buf.len();
    let mut width = width;
    while width > 1 {
        let pairs = count.div_ceil(2);
        for i in 0..pairs {
            let right = if 2 * i + 1 < count {
                buf[2 * i + 1]
            } else {
                op.identity()
            };
            buf[i] = op.combine(buf[2 * i], right);
        }
        count = pairs;
        width /= 2;
    }
    buf[0]
}
