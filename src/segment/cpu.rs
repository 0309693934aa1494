//! The segmented reduction and scan on the CPU: each segment's canonical tree or grouping,
//! segments spread over the backend's threads.
//!
//! Segments go by batches of consecutive segments of about equal work (elements plus
//! segments, cut by a binary search on the offsets), a rayon task each, about eight per
//! thread; one batch on the caller's thread for short inputs or a width of one. Within a
//! batch each segment is folded where it lies, its result written straight to the output:
//! short segments by the tree's few combines on the stack (`tree::short_tree`), longer
//! ones by the whole-array leaves (`tree::subtree`), scans by groups of 64 on the stack
//! (`tree::segment_scan`), the longest on all threads (`Cpu::tree`,
//! `Cpu::scan_into`, nested in the batch). A run of empty segments is found by a galloping
//! search on the offsets and costs a few probes (a scan writes nothing for it; a reduction
//! fills its outputs with the one empty value).

use super::plan::{check_rows, MAX_OUTPUT_BYTES};
use super::Rows;
use crate::cpu::{Cpu, PARALLEL_MIN};
use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::ops::check::check_empty;
use crate::ops::check::check_scannable;
use crate::ops::Operator;
use crate::scan::ScanKind;
use crate::tree::{segment_scan, short_tree, subtree, Lifted, ScanScratch, SHORT_TREE};
use std::mem::MaybeUninit;

impl Cpu {
    /// One result per row of the row-major matrix `rows` in `x`: row `r`'s result is
    /// `reduce(&x[r * stride..][..cols])` (module [`segment`](crate::segment): same bits,
    /// columns as indices).
    ///
    /// Errors, before any work: a stride shorter than a row, for one row too
    /// ([`ErrorKind::InvalidConfig`]), an output (`rows.rows` values) past `isize::MAX`
    /// bytes or one the allocator refuses ([`ErrorKind::TooLarge`]: 2^40 rows of no columns
    /// need 2^40 outputs), an `x` too short for the rows ([`ErrorKind::LengthMismatch`]),
    /// zero columns for an operator without an empty value ([`ErrorKind::EmptyInput`]).
    ///
    /// ```
    /// use cufold::{ops, segment::Rows, Cpu};
    /// // A 2 x 3 view of a 2 x 4 matrix: stride 4, the last column left out.
    /// let x = [1, 2, 3, 100, 4, 5, 6, 100];
    /// assert_eq!(Cpu::new().reduce_rows(&x, Rows::new(2, 3).stride(4), ops::Sum)?, [6, 15]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_rows<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        op: O,
    ) -> Result<Vec<O::Out>> {
        let count = check_rows::<O::Out>(&rows, x.len(), 1)?;
        if rows.rows > 0 {
            check_empty::<T, O>(rows.cols as u64)?;
        }
        if rows.cols == 0 {
            // Every row is empty: one value, repeated (no work per row but the store).
            let mut out = try_alloc::<O::Out>(count)?;
            out.resize(count, op.finish(op.identity(), 0));
            return Ok(out);
        }
        let mut out = try_alloc::<O::Out>(count)?;
        self.reduce_rows_uninit(x, rows, &mut out.spare_capacity_mut()[..count], &op);
        // SAFETY: every one of the `count` values was written.
        unsafe { out.set_len(count) };
        Ok(out)
    }

    /// The rows' results (at least one column) into `out` (one a row).
    fn reduce_rows_uninit<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        out: &mut [MaybeUninit<O::Out>],
        op: &O,
    ) {
        let cols = rows.cols;
        self.fold_segments(
            op,
            x,
            rows.rows,
            |r| (r * rows.stride, cols),
            |r| r * cols,
            out,
            None,
            |acc, n| op.finish(acc, n),
        );
    }

    /// [`Cpu::reduce_rows`] into `out` (one value a row).
    ///
    /// Errors: as [`Cpu::reduce_rows`], and an `out` of another length than `rows.rows`
    /// ([`ErrorKind::LengthMismatch`]).
    ///
    /// ```
    /// use cufold::{ops, segment::Rows, Cpu};
    /// let mut means = [0.0f64; 2];
    /// Cpu::new().reduce_rows_into(&[1.0f64, 2.0, 3.0, 5.0], Rows::new(2, 2), &mut means, ops::Mean)?;
    /// assert_eq!(means, [1.5, 4.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_rows_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        out: &mut [O::Out],
        op: O,
    ) -> Result<()> {
        let count = check_rows::<O::Out>(&rows, x.len(), 1)?;
        super::plan::check_rows_out(&rows, count, out.len())?;
        if rows.rows > 0 {
            check_empty::<T, O>(rows.cols as u64)?;
        }
        if rows.cols == 0 {
            out.fill(op.finish(op.identity(), 0));
            return Ok(());
        }
        self.reduce_rows_uninit(x, rows, uninit(out), &op);
        Ok(())
    }

    /// One result per segment `offsets[i]..offsets[i + 1]` of `x` (CSR style):
    /// `Some(reduce(segment))`, or `None` for an empty segment of an operator without an
    /// empty value (module [`segment`](crate::segment)).
    ///
    /// Errors, before any work: no offsets ([`ErrorKind::LengthMismatch`]), offsets that
    /// decrease ([`ErrorKind::InvalidConfig`]) or end past `x`
    /// ([`ErrorKind::LengthMismatch`]).
    ///
    /// ```
    /// use cufold::{ops, Cpu};
    /// let x = [3.0f64, 1.0, 4.0, 1.0, 5.0];
    /// let sums = Cpu::new().reduce_segments(&x, &[0, 2, 2, 5], ops::Sum)?;
    /// assert_eq!(sums, [Some(4.0), Some(0.0), Some(10.0)]); // Sum has an empty value
    /// let firsts = Cpu::new().reduce_segments(&x, &[0, 2, 2, 5], ops::ArgMin)?;
    /// assert_eq!(firsts[2].unwrap().index, 1); // the place in the segment
    /// assert!(firsts[1].is_none());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_segments<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        offsets: &[u64],
        op: O,
    ) -> Result<Vec<Option<O::Out>>> {
        check_offsets(offsets, x.len())?;
        let segments = offsets.len() - 1;
        let mut out = Vec::with_capacity(segments);
        let empty = (!O::EMPTY_IS_ERROR).then(|| op.finish(op.identity(), 0));
        let base = offsets[0];
        self.fold_segments(
            &op,
            x,
            segments,
            |i| (offsets[i] as usize, (offsets[i + 1] - offsets[i]) as usize),
            |i| (offsets[i] - base) as usize,
            &mut out.spare_capacity_mut()[..segments],
            Some(empty),
            |acc, n| Some(op.finish(acc, n)),
        );
        // SAFETY: every one of the `segments` values was written.
        unsafe { out.set_len(segments) };
        Ok(out)
    }
}

impl Cpu {
    /// The scan of every row of `rows` in `x`, packed: output `r * cols + j` is element `j`
    /// of row `r`'s scan, which is what [`Cpu::scan`] of that row alone gives (the canonical
    /// grouping of the row, positions counted from the row's start).
    ///
    /// Errors: as [`Cpu::reduce_rows`] for the rows (the output is `rows * cols` values:
    /// rows of no columns have none, and cost nothing), and operators that cannot be scanned
    /// ([`ErrorKind::InvalidConfig`]).
    ///
    /// ```
    /// use cufold::{ops, segment::Rows, Cpu, ScanKind};
    /// let x = [1, 2, 3, 100, 4, 5, 6, 100]; // two rows of 3 in a stride of 4
    /// let y = Cpu::new().scan_rows(&x, Rows::new(2, 3).stride(4), ops::Sum, ScanKind::Inclusive)?;
    /// assert_eq!(y, [1, 3, 6, 4, 9, 15]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_rows<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        let len = check_rows::<O::Out>(&rows, x.len(), rows.cols)?;
        check_scannable::<T, O>()?;
        let mut out = super::try_zeroed::<O::Out>(len)?;
        self.scan_rows_into(x, rows, &mut out, op, kind)?;
        Ok(out)
    }

    /// [`Cpu::scan_rows`] into `out` (`rows * cols` values, every one written).
    ///
    /// Errors: as [`Cpu::scan_rows`], and an `out` of another length
    /// ([`ErrorKind::LengthMismatch`]).
    ///
    /// ```
    /// use cufold::{ops, segment::Rows, Cpu, ScanKind};
    /// let mut y = [0; 4];
    /// Cpu::new().scan_rows_into(&[1, 2, 3, 4], Rows::new(2, 2), &mut y, ops::Max, ScanKind::Inclusive)?;
    /// assert_eq!(y, [1, 2, 3, 4]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_rows_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        let len = check_rows::<O::Out>(&rows, x.len(), rows.cols)?;
        super::plan::check_rows_out(&rows, len, out.len())?;
        check_scannable::<T, O>()?;
        if len == 0 {
            return Ok(());
        }
        let cols = rows.cols;
        self.scan_segments_with(
            &op,
            kind,
            x,
            out,
            rows.rows,
            |r| (r * rows.stride, cols),
            |r| r * cols,
        );
        Ok(())
    }

    /// The scan of every segment `offsets[i]..offsets[i + 1]` of `x`, at the same positions
    /// of a new vector as long as `x` ([`Cpu::scan_segments_into`]); positions outside every
    /// segment hold zeros (all bits zero).
    ///
    /// ```
    /// use cufold::{ops, Cpu, ScanKind};
    /// let y = Cpu::new().scan_segments(&[1, 2, 3, 4, 5], &[0, 2, 4], ops::Sum, ScanKind::Inclusive)?;
    /// assert_eq!(y, [1, 3, 3, 7, 0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_segments<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        offsets: &[u64],
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        check_offsets(offsets, x.len())?;
        let mut out = super::try_zeroed::<O::Out>(x.len())?;
        self.scan_segments_into(x, offsets, &mut out, op, kind)?;
        Ok(out)
    }

    /// The scan of every segment `offsets[i]..offsets[i + 1]` of `x`, into the same positions
    /// of `out` (as long as `x`): each segment's scan is what [`Cpu::scan`] of that segment
    /// alone gives; positions outside every segment are left as they are.
    ///
    /// Errors: as [`Cpu::reduce_segments`] for the offsets, an `out` of another length than
    /// `x` ([`ErrorKind::LengthMismatch`]), operators that cannot be scanned.
    ///
    /// ```
    /// use cufold::{ops, Cpu, ScanKind};
    /// let x = [1, 2, 3, 4, 5, 6];
    /// let mut y = [0; 6];
    /// Cpu::new().scan_segments_into(&x, &[0, 2, 2, 5], &mut y, ops::Sum, ScanKind::Exclusive)?;
    /// assert_eq!(y, [0, 1, 0, 3, 7, 0]); // the last position is in no segment
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_segments_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        offsets: &[u64],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        check_offsets(offsets, x.len())?;
        crate::ops::check::check_scan_lengths(x.len(), out.len())?;
        check_scannable::<T, O>()?;
        let segments = offsets.len() - 1;
        let base = offsets[0];
        // The outputs from the first offset on, so that segments are disjoint runs of it.
        let tail = &mut out[base as usize..offsets[segments] as usize];
        self.scan_segments_with(
            &op,
            kind,
            x,
            tail,
            segments,
            |i| (offsets[i] as usize, (offsets[i + 1] - offsets[i]) as usize),
            |i| (offsets[i] - base) as usize,
        );
        Ok(())
    }

    /// Scans `count` segments into `out`: segment `i` is `seg(i) = (input start, length)`,
    /// its outputs at `before(i)`, the number of elements of the segments before it (so
    /// `before` never decreases, and `before(count)` is `out`'s length).
    #[allow(clippy::too_many_arguments)]
    fn scan_segments_with<T: DeviceValue, O: Operator<T>>(
        &self,
        op: &O,
        kind: ScanKind,
        x: &[T],
        out: &mut [O::Out],
        count: usize,
        seg: impl Fn(usize) -> (usize, usize) + Sync,
        before: impl Fn(usize) -> usize + Sync,
    ) {
        let cuts = self.batches(count, &before);
        // Cut `out` at the batches' first segments (each batch a disjoint slice).
        let mut work = Vec::with_capacity(cuts.len() - 1);
        let mut rest = out;
        for w in cuts.windows(2) {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(before(w[1]) - before(w[0]));
            work.push((w[0], w[1], head));
            rest = tail;
        }
        self.run_chunks(work.into_iter(), |(a, b, ys)| {
            let at = before(a);
            let mut scratch = ScanScratch::new(op.identity());
            let mut i = a;
            while i < b {
                let (lo, len) = seg(i);
                if len == 0 {
                    i = empty_run_end(&before, i, b);
                    continue;
                }
                let o = before(i) - at;
                self.scan_one(
                    op,
                    kind,
                    &x[lo..lo + len],
                    &mut ys[o..o + len],
                    &mut scratch,
                );
                i += 1;
            }
        });
    }

    /// The scan of one segment (not empty) into `ys`: by groups on the stack, the longest on
    /// all threads.
    #[inline(always)]
    pub(super) fn scan_one<T: DeviceValue, O: Operator<T>>(
        &self,
        op: &O,
        kind: ScanKind,
        xs: &[T],
        ys: &mut [O::Out],
        scratch: &mut ScanScratch<O::Acc>,
    ) {
        if xs.len() < LONG {
            segment_scan(op, kind == ScanKind::Inclusive, xs, ys, scratch);
        } else {
            // The segment's lengths were checked by the caller; no law check per segment.
            self.scan_with(op, kind, xs, ys);
        }
    }

    /// The tree of one segment (not empty): short ones on the stack, longer ones by the
    /// whole-array leaves, the longest on all threads.
    #[inline(always)]
    pub(super) fn segment_tree<T: DeviceValue, O: Operator<T>>(
        &self,
        op: &O,
        xs: &[T],
        scratch: &mut [O::Acc; SHORT_TREE / 2],
        buf: &mut Vec<O::Acc>,
    ) -> O::Acc {
        let len = xs.len();
        if len <= SHORT_TREE {
            short_tree(op, xs, scratch)
        } else if len < LONG {
            subtree(op, &Lifted(xs, 0), 0, len.next_power_of_two(), buf)
        } else {
            self.tree(op, &Lifted(xs, 0))
        }
    }

    /// Reduces `count` segments into `out` (one value each): segment `i` is `seg(i) =
    /// (input start, length)`, `before(i)` the number of elements of the segments before it.
    /// A segment's value is `put(tree, length)`; an empty segment's is `empty` (which must
    /// be given where segments may be empty).
    #[allow(clippy::too_many_arguments)]
    fn fold_segments<T: DeviceValue, O: Operator<T>, R: Copy + Send + Sync>(
        &self,
        op: &O,
        x: &[T],
        count: usize,
        seg: impl Fn(usize) -> (usize, usize) + Sync,
        before: impl Fn(usize) -> usize + Sync,
        out: &mut [MaybeUninit<R>],
        empty: Option<R>,
        put: impl Fn(O::Acc, u64) -> R + Sync,
    ) {
        let cuts = self.batches(count, &before);
        let mut work = Vec::with_capacity(cuts.len() - 1);
        let mut rest = out;
        for w in cuts.windows(2) {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            work.push((w[0], head));
            rest = tail;
        }
        self.run_chunks(work.into_iter(), |(a, ys)| {
            let b = a + ys.len();
            let mut scratch = [op.identity(); SHORT_TREE / 2];
            let mut buf = Vec::new();
            let mut i = a;
            while i < b {
                let (lo, len) = seg(i);
                if len == 0 {
                    let j = empty_run_end(&before, i, b);
                    let e = empty.expect("an empty value where segments may be empty");
                    for y in &mut ys[i - a..j - a] {
                        y.write(e);
                    }
                    i = j;
                    continue;
                }
                let acc = self.segment_tree(op, &x[lo..lo + len], &mut scratch, &mut buf);
                ys[i - a].write(put(acc, len as u64));
                i += 1;
            }
        });
    }

    /// The batches of `count` segments, as cuts `0 = c_0 < c_1 < ... = count` (`count > 0`;
    /// just `[0, 0]` for none): about eight per thread of about equal work, the elements
    /// plus the segments of a batch (`before(i) + i` before segment `i`, which never
    /// decreases), at least [`MIN_BATCH`] each; one where the width is one or the work short.
    pub(super) fn batches(&self, count: usize, before: &impl Fn(usize) -> usize) -> Vec<usize> {
        let work = |i: usize| before(i) as u128 + i as u128;
        let total = work(count);
        let threads = self.threads().min(1 << 20) as u128;
        if threads == 1 || total < PARALLEL_MIN as u128 {
            return vec![0, count];
        }
        let pieces = (total / MIN_BATCH as u128).clamp(1, 8 * threads);
        let mut cuts = Vec::with_capacity(pieces as usize + 1);
        cuts.push(0);
        for j in 1..pieces {
            let target = total * j / pieces;
            // The first segment with at least `target` of work before it.
            let (mut lo, mut hi) = (*cuts.last().expect("a cut"), count);
            while lo < hi {
                let m = lo + (hi - lo) / 2;
                if work(m) < target {
                    lo = m + 1;
                } else {
                    hi = m;
                }
            }
            if lo > *cuts.last().expect("a cut") && lo < count {
                cuts.push(lo);
            }
        }
        cuts.push(count);
        cuts
    }
}

/// Segments of at least this many elements are reduced or scanned on all threads.
const LONG: usize = 1 << 18;

/// The least work of a batch (elements plus segments).
const MIN_BATCH: usize = 1 << 14;

/// Where the run of empty segments from `i` (empty: `before(i + 1) == before(i)`) ends: the
/// last `j <= b` with `before(j) == before(i)`, by a galloping search (a few probes for a
/// run of any length).
fn empty_run_end(before: &impl Fn(usize) -> usize, i: usize, b: usize) -> usize {
    let at = before(i);
    // `before(lo) == at`; `hi` is past the run (or b + 1).
    let (mut lo, mut hi) = (i + 1, b + 1);
    let mut step = 1;
    while lo + step <= b {
        if before(lo + step) == at {
            lo += step;
            step *= 2;
        } else {
            hi = lo + step;
            break;
        }
    }
    while hi - lo > 1 {
        let m = lo + (hi - lo) / 2;
        if before(m) == at {
            lo = m;
        } else {
            hi = m;
        }
    }
    lo
}

/// `out` as a slice of possibly uninitialised values, to write through (which keeps it
/// initialised: only initialised values are written).
fn uninit<V>(out: &mut [V]) -> &mut [MaybeUninit<V>] {
    // SAFETY: MaybeUninit<V> has V's layout; every write through the result is a V.
    unsafe { &mut *(out as *mut [V] as *mut [MaybeUninit<V>]) }
}

/// An empty vector with room for `n` values, or an error ([`ErrorKind::TooLarge`]) where the
/// allocator refuses them (past [`MAX_OUTPUT_BYTES`], or past what the machine gives), before
/// anything is written: an allocation that fails otherwise aborts the process.
pub(super) fn try_alloc<V>(n: usize) -> Result<Vec<V>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|e| {
        Error::new(
            ErrorKind::TooLarge,
            format!(
                "an output of {n} values of {} bytes does not fit in memory ({e}; an output \
                 holds at most {MAX_OUTPUT_BYTES} bytes, and what the allocator gives)",
                std::mem::size_of::<V>()
            ),
        )
    })?;
    Ok(v)
}

/// CSR offsets: at least one, never decreasing, ending within the input.
pub(super) fn check_offsets(offsets: &[u64], len: usize) -> Result<()> {
    super::plan::check_offsets_len(offsets.len(), offsets.len().saturating_sub(1))?;
    if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "offsets decrease at {i}: offsets[{i}] = {} > offsets[{}] = {}",
                offsets[i],
                i + 1,
                offsets[i + 1]
            ),
        ));
    }
    let last = *offsets.last().expect("checked non-empty");
    if last > len as u64 {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!("the offsets end at {last}, past the input's {len} elements"),
        ));
    }
    Ok(())
}
