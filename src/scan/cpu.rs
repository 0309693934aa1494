//! The scan's CPU twin: the canonical grouping of `crate::tree`, on the caller's rayon pool.
//!
//! Short inputs (or a width of one) are scanned in one pass on the caller's thread. Longer
//! ones go in rounds of power-of-two chunks, a few per thread: each chunk's elements are
//! lifted once into a buffer of accumulators (small enough for the core's cache) and its
//! tree computed from it, in parallel; a binary counter over the trees gives each chunk its
//! exclusive prefix (and, for a full chunk, the prefix through its end); then every chunk
//! scans its buffer from its prefix, in parallel. Each element is lifted once.
//!
//! The scan of a run of positions goes by aligned groups of eight: the group's tree nodes
//! are combined as a fixed pattern, its outputs from the prefix before it, and a binary
//! counter over the groups' trees carries the prefix across groups.

use super::ScanKind;
use crate::cpu::Cpu;
use crate::element::DeviceValue;
use crate::error::Result;
use crate::ops::check::{check_scan_lengths, check_scannable};
use crate::ops::Operator;
use crate::tree::{tree_of_full, PrefixStack};
use rayon::prelude::*;
use std::cell::Cell;

/// The bytes of lifted accumulators a chunk buffers (so that its second read comes from the
/// core's cache).
const CHUNK_BYTES: usize = 1 << 18;

/// A vector of `n` all-zero values, every one of which the caller overwrites. Nothing is
/// computed for it (`finish(identity, 0)` may not be defined for an operator).
pub(crate) fn zeroed_vec<V: DeviceValue>(n: usize) -> Vec<V> {
    // SAFETY: DeviceValue types are ValidAsZeroBits.
    vec![unsafe { std::mem::zeroed::<V>() }; n]
}

impl Cpu {
    /// The scan of `x` with `op`: output `i` is `finish(prefix, count)` with the prefix of
    /// the inputs up to and including `i` ([`ScanKind::Inclusive`], count `i + 1`) or before
    /// it ([`ScanKind::Exclusive`], count `i`; output 0 is `finish(identity, 0)`). No other
    /// output is computed: `finish` is called once per position, with the counts above.
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
        check_scannable::<T, O>()?;
        let mut out = zeroed_vec(x.len());
        self.scan_into(x, &mut out, op, kind)?;
        Ok(out)
    }

    /// The scan of `x` into `out`, which must have the same length
    /// ([`ErrorKind::LengthMismatch`](crate::ErrorKind::LengthMismatch) otherwise).
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
        check_scan_lengths(x.len(), out.len())?;
        check_scannable::<T, O>()?;
        self.scan_with(&op, kind, x, out);
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
        let n = x.len();
        if !self.parallel(n) {
            // One pass: every group of positions is read before any of it is written.
            let cells = Cell::from_mut(x).as_slice_of_cells();
            scan_run(
                &op,
                0,
                n,
                None,
                None,
                kind,
                |i| op.lift(cells[i].get(), i as u64),
                |i, v| cells[i].set(v),
            );
            return Ok(());
        }
        self.scan_rounds(&op, kind, Source::Output(|s| s), x);
        Ok(())
    }

    /// The scan of `x` into `out` (of the same length).
    fn scan_with<T: DeviceValue, O: Operator<T>>(
        &self,
        op: &O,
        kind: ScanKind,
        x: &[T],
        out: &mut [O::Out],
    ) {
        if !self.parallel(x.len()) {
            scan_run(
                op,
                0,
                x.len(),
                None,
                None,
                kind,
                |i| op.lift(x[i], i as u64),
                |i, v| out[i] = v,
            );
            return;
        }
        self.scan_rounds(op, kind, Source::Slice(x), out);
    }

    /// The parallel scan into `out`, in rounds of a few chunks per thread: lift each chunk
    /// into its buffer and compute its tree (in parallel), give each chunk its prefixes
    /// (sequential, one combine or two per chunk), scan each chunk from its buffer (in
    /// parallel). A round reads all its inputs before it writes any output, so the input
    /// may be the output (`Source::Output`).
    fn scan_rounds<T: DeviceValue, O: Operator<T>>(
        &self,
        op: &O,
        kind: ScanKind,
        src: Source<'_, T, O::Out>,
        out: &mut [O::Out],
    ) {
        let n = out.len();
        let size = std::mem::size_of::<O::Acc>().max(1);
        let chunk = (CHUNK_BYTES / size).next_power_of_two().max(1 << 12);
        let chunks = n.div_ceil(chunk);
        let per_round = self.threads().saturating_mul(2).min(chunks);
        let mut bufs: Vec<Vec<O::Acc>> = (0..per_round).map(|_| Vec::new()).collect();
        let mut stack = PrefixStack::new(None);
        for first in (0..chunks).step_by(per_round) {
            let last = (first + per_round).min(chunks);
            let (lo_r, hi_r) = (first * chunk, n.min(last * chunk));
            let xs: &[T] = match src {
                Source::Slice(x) => &x[lo_r..hi_r],
                Source::Output(view) => view(&out[lo_r..hi_r]),
            };
            // Lift each chunk into its buffer; the tree of each full one.
            let trees: Vec<Option<O::Acc>> = bufs[..last - first]
                .par_iter_mut()
                .with_max_len(1)
                .zip(xs.par_chunks(chunk))
                .enumerate()
                .map(|(k, (buf, xs))| {
                    let lo = (first + k) * chunk;
                    buf.clear();
                    buf.extend(
                        xs.iter()
                            .enumerate()
                            .map(|(i, &v)| op.lift(v, (lo + i) as u64)),
                    );
                    (xs.len() == chunk).then(|| tree_of_full(op, buf))
                })
                .collect();
            // Each chunk's exclusive prefix and, for a full one, the prefix through its end.
            let ends: Vec<_> = trees
                .iter()
                .map(|t| {
                    let base = stack.prefix();
                    let end = t.map(|t| {
                        stack.push(|a, b| op.combine(a, b), t);
                        stack.prefix().expect("non-empty after a push")
                    });
                    (base, end)
                })
                .collect();
            out[lo_r..hi_r]
                .par_chunks_mut(chunk)
                .with_max_len(1)
                .zip(&bufs[..last - first])
                .zip(ends)
                .enumerate()
                .for_each(|(k, ((ys, buf), (base, end)))| {
                    let lo = (first + k) * chunk;
                    scan_run(
                        op,
                        lo,
                        ys.len(),
                        base,
                        end,
                        kind,
                        |i| buf[i],
                        |i, v| ys[i] = v,
                    );
                });
        }
    }
}

/// Where a parallel scan reads its inputs: a slice, or the output itself (in place).
enum Source<'a, T, U> {
    Slice(&'a [T]),
    Output(fn(&[U]) -> &[T]),
}

/// Scans positions `lo .. lo + len` (`lo` a multiple of a power of two at least `len`, or
/// 0) from the exclusive prefix `base` of the positions before `lo`; `end`, when given, is
/// the prefix through the last position (which is not `base` extended by the run's tree in
/// general: the tree of a full chunk may merge with earlier blocks). `lifted(i)` is the
/// accumulator of position `lo + i`; every group of eight positions is read before any of
/// its outputs is set.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan_run<T: DeviceValue, O: Operator<T>>(
    op: &O,
    lo: usize,
    len: usize,
    base: Option<O::Acc>,
    end: Option<O::Acc>,
    kind: ScanKind,
    lifted: impl Fn(usize) -> O::Acc,
    mut set: impl FnMut(usize, O::Out),
) {
    const G: usize = 8;
    let c = |a, b| op.combine(a, b);
    // The prefix stack over whole groups, from `base`.
    let mut stack = PrefixStack::new(base);
    let groups = len / G;
    for g in 0..groups {
        let j = g * G;
        let x: [O::Acc; G] = std::array::from_fn(|k| lifted(j + k));
        let q = stack.prefix();
        let qc = |y| match q {
            Some(q) => c(q, y),
            None => y,
        };
        // The group's tree nodes (it is full: every node joins two equal full subtrees).
        let t01 = op.combine_full(x[0], x[1]);
        let t23 = op.combine_full(x[2], x[3]);
        let t45 = op.combine_full(x[4], x[5]);
        let t67 = op.combine_full(x[6], x[7]);
        let t03 = op.combine_full(t01, t23);
        let t47 = op.combine_full(t45, t67);
        let t07 = op.combine_full(t03, t47);
        // Prefixes within the group: the left fold of q and the group's blocks up to k
        // (largest first); no block merges with q's before the group's end.
        let p0 = qc(x[0]);
        let p1 = qc(t01);
        let p2 = c(p1, x[2]);
        let p3 = qc(t03);
        let p4 = c(p3, x[4]);
        let p5 = c(p3, t45);
        let p6 = c(p5, x[6]);
        stack.push(c, t07);
        let p7 = match end {
            Some(e) if j + G == len => e,
            _ => stack.prefix().expect("non-empty after a push"),
        };
        let at = (lo + j) as u64;
        match kind {
            ScanKind::Inclusive => {
                for (k, p) in [p0, p1, p2, p3, p4, p5, p6, p7].into_iter().enumerate() {
                    set(j + k, op.finish(p, at + k as u64 + 1));
                }
            }
            ScanKind::Exclusive => {
                set(j, op.finish(q.unwrap_or_else(|| op.identity()), at));
                for (k, p) in [p0, p1, p2, p3, p4, p5, p6].into_iter().enumerate() {
                    set(j + k + 1, op.finish(p, at + k as u64 + 1));
                }
            }
        }
    }
    // The last positions, fewer than a group: one by one from the prefix of the groups.
    let mut stack = PrefixStack::new(stack.prefix());
    for i in groups * G..len {
        let q = (lo + i) as u64;
        let v = lifted(i);
        match kind {
            ScanKind::Exclusive => {
                let p = stack.prefix().unwrap_or_else(|| op.identity());
                set(i, op.finish(p, q));
                stack.push(c, v);
            }
            ScanKind::Inclusive => {
                stack.push(c, v);
                let p = match end {
                    Some(e) if i + 1 == len => e,
                    _ => stack.prefix().expect("non-empty after a push"),
                };
                set(i, op.finish(p, q + 1));
            }
        }
    }
}
