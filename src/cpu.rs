//! The CPU backend: the same operators along the same canonical tree, on all cores.

use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::ops::Operator;
use crate::scan::{check_scannable, ScanKind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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

impl Cpu {
    /// The scan of `x` with `op`: output `i` is `finish(prefix, count)` with the prefix of
    /// the inputs up to and including `i` ([`ScanKind::Inclusive`], count `i + 1`) or before
    /// it ([`ScanKind::Exclusive`], count `i`; output 0 is `finish(identity, 0)`).
    ///
    /// Every prefix follows the canonical grouping (crate docs), the same as the GPU's, so
    /// for operators built from `+ - * /`, min, max and comparisons the bits agree.
    ///
    /// ```
    /// use cufold::{ops, Cpu, ScanKind};
    /// let running_max = Cpu::new().scan(&[1, 5, 2, 7], ops::Max, ScanKind::Inclusive)?;
    /// assert_eq!(running_max, [1, 5, 5, 7]);
    /// let means = Cpu::new().scan(&[2.0f64, 4.0, 6.0], ops::Mean, ScanKind::Inclusive)?;
    /// assert_eq!(means, [2.0, 3.0, 4.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        let mut out = vec![op.finish(op.identity(), 0); x.len()];
        self.scan_into(x, &mut out, op, kind)?;
        Ok(out)
    }

    /// The scan of `x` into `out`, which must have the same length
    /// ([`ErrorKind::LengthMismatch`] otherwise).
    ///
    /// ```
    /// use cufold::{ops, Cpu, ScanKind};
    /// let mut out = [0u64; 4];
    /// Cpu::new().scan_into(&[3u32, 1, 4, 1], &mut out, ops::WideSum, ScanKind::Exclusive)?;
    /// assert_eq!(out, [0, 3, 4, 8]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        if x.len() != out.len() {
            return Err(Error::new(
                ErrorKind::LengthMismatch,
                format!(
                    "a scan writes one output per input: the input has {} elements but the output {}",
                    x.len(),
                    out.len()
                ),
            ));
        }
        check_scannable::<T, O>()?;
        let (chunk, ends) = self.scan_prefixes(x, &op);
        let work = x
            .chunks(chunk)
            .zip(out.chunks_mut(chunk))
            .zip(ends)
            .enumerate()
            .map(|(c, (io, ends))| (c * chunk, io, ends));
        self.run_chunks(work, |(lo, (xs, ys), (base, end))| {
            scan_run(
                &op,
                lo,
                xs.len(),
                base,
                end,
                kind,
                |i| xs[i],
                |i, v| ys[i] = v,
            )
        });
        Ok(())
    }

    /// The scan of `x` in place, for operators whose output type is the input type.
    ///
    /// ```
    /// use cufold::{ops, Cpu, ScanKind};
    /// let mut x = [1.0f32, 2.0, 3.0, 4.0];
    /// Cpu::new().scan_in_place(&mut x, ops::Sum, ScanKind::Inclusive)?;
    /// assert_eq!(x, [1.0, 3.0, 6.0, 10.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_in_place<T: DeviceValue, O: Operator<T, Out = T>>(
        &self,
        x: &mut [T],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        check_scannable::<T, O>()?;
        let (chunk, ends) = self.scan_prefixes(x, &op);
        let work = x
            .chunks_mut(chunk)
            .zip(ends)
            .enumerate()
            .map(|(c, (xs, ends))| (c * chunk, xs, ends));
        self.run_chunks(work, |(lo, xs, (base, end))| {
            let len = xs.len();
            // Each position is read before it is written.
            let cell = std::cell::RefCell::new(xs);
            scan_run(
                &op,
                lo,
                len,
                base,
                end,
                kind,
                |i| cell.borrow()[i],
                |i, v| cell.borrow_mut()[i] = v,
            )
        });
        Ok(())
    }

    /// Splits `x` into power-of-two chunks and returns, for chunk c, its exclusive prefix
    /// `P_c` (`None` for the first) and `P_{c+1}` when the chunk is full (the prefix through
    /// its last position, which is not `P_c` extended by the chunk's tree in general).
    #[allow(clippy::type_complexity)]
    fn scan_prefixes<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        op: &O,
    ) -> (usize, Vec<(Option<O::Acc>, Option<O::Acc>)>) {
        let n = x.len();
        let chunk = (n / (self.threads * 4)).max(4 * LEAF).next_power_of_two();
        let full = n / chunk;
        let next = AtomicUsize::new(0);
        let trees: Mutex<Vec<Option<O::Acc>>> = Mutex::new(vec![None; full]);
        let workers = self.threads.min(full);
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    let mut buf = Vec::with_capacity(LEAF);
                    loop {
                        let c = next.fetch_add(1, Ordering::Relaxed);
                        if c >= full {
                            break;
                        }
                        let t = subtree(op, x, c * chunk, chunk, &mut buf);
                        trees.lock().unwrap()[c] = Some(t);
                    }
                });
            }
        });
        let trees = trees.into_inner().unwrap();
        let mut stack = PrefixStack::new(None);
        let chunks = n.div_ceil(chunk);
        let mut ends = Vec::with_capacity(chunks);
        for c in 0..chunks {
            let base = stack.prefix();
            let end = trees.get(c).map(|t| {
                stack.push(
                    |a, b| op.combine(a, b),
                    t.expect("every full chunk reduced"),
                );
                stack.prefix().expect("non-empty after a push")
            });
            ends.push((base, end));
        }
        (chunk, ends)
    }

    /// Runs `f` on every work item, on up to `threads` threads.
    fn run_chunks<W: Send>(&self, work: impl Iterator<Item = W>, f: impl Fn(W) + Sync) {
        let queue = Mutex::new(work.collect::<Vec<_>>().into_iter());
        let workers = self.threads;
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

/// The canonical prefix of a growing sequence: a binary counter of the trees over the
/// aligned power-of-two blocks pushed so far (largest first) and, for each, the left fold
/// of `base` and the blocks up to it.
pub(crate) struct PrefixStack<A> {
    blocks: Vec<A>,
    prefixes: Vec<A>,
    base: Option<A>,
    count: u64,
}

impl<A: Copy> PrefixStack<A> {
    pub(crate) fn new(base: Option<A>) -> Self {
        PrefixStack {
            blocks: Vec::with_capacity(64),
            prefixes: Vec::with_capacity(64),
            base,
            count: 0,
        }
    }

    /// The left fold of `base` and every block (`None` while both are empty).
    pub(crate) fn prefix(&self) -> Option<A> {
        self.prefixes.last().copied().or(self.base)
    }

    /// Appends one position: merges the equal-sized blocks it completes, then extends the
    /// prefix of the blocks before the new one.
    pub(crate) fn push(&mut self, combine: impl Fn(A, A) -> A, v: A) {
        let mut block = v;
        let mut k = self.count;
        while k & 1 == 1 {
            block = combine(self.blocks.pop().expect("a block per set bit"), block);
            self.prefixes.pop();
            k >>= 1;
        }
        let prefix = match self.prefix() {
            Some(p) => combine(p, block),
            None => block,
        };
        self.blocks.push(block);
        self.prefixes.push(prefix);
        self.count += 1;
    }
}

/// Scans positions `lo .. lo + len` (a chunk starting at a multiple of its power-of-two size)
/// from the chunk's exclusive prefix `base`; `end` is the prefix through the chunk's last
/// position when the chunk is full. `get(i)` is read before `set(i, ..)` for every i.
#[allow(clippy::too_many_arguments)]
fn scan_run<T: DeviceValue, O: Operator<T>>(
    op: &O,
    lo: usize,
    len: usize,
    base: Option<O::Acc>,
    end: Option<O::Acc>,
    kind: ScanKind,
    get: impl Fn(usize) -> T,
    mut set: impl FnMut(usize, O::Out),
) {
    let mut stack = PrefixStack::new(base);
    let combine = |a, b| op.combine(a, b);
    for i in 0..len {
        let q = (lo + i) as u64;
        let v = op.lift(get(i), q);
        match kind {
            ScanKind::Exclusive => {
                let p = stack.prefix().unwrap_or_else(|| op.identity());
                set(i, op.finish(p, q));
                stack.push(combine, v);
            }
            ScanKind::Inclusive => {
                stack.push(combine, v);
                let p = match end {
                    Some(e) if i + 1 == len => e,
                    _ => stack.prefix().expect("non-empty after a push"),
                };
                set(i, op.finish(p, q + 1));
            }
        }
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
