//! The segmented reduction on the CPU: each segment's canonical tree, segments spread over
//! the backend's threads.

use super::plan::{check_rows, MAX_OUTPUT_BYTES};
use super::Rows;
use crate::cpu::Cpu;
use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::ops::check::check_empty;
use crate::ops::check::check_scannable;
use crate::ops::Operator;
use crate::scan::cpu::{scan_run, Lift};
use crate::scan::ScanKind;
use crate::tree::{subtree, Lifted};

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
        let out = self.per_segment(
            &op,
            rows.rows,
            rows.rows * rows.cols,
            |r| {
                let lo = r * rows.stride;
                lo..lo + rows.cols
            },
            x,
        );
        Ok(out
            .into_iter()
            .map(|v| v.expect("checked non-empty or with an empty value"))
            .collect())
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
        out.copy_from_slice(&self.reduce_rows(x, rows, op)?);
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
        let total = (offsets[segments] - offsets[0]) as usize;
        Ok(self.per_segment(
            &op,
            segments,
            total,
            |i| offsets[i] as usize..offsets[i + 1] as usize,
            x,
        ))
    }

    /// Each segment's result, `None` for an empty segment of an operator without an empty
    /// value. Many segments: a thread takes a run of them, each reduced on that thread;
    /// fewer segments than threads: one after the other, each on all threads. The bits are
    /// the same either way (each is its segment's canonical tree).
    fn per_segment<T: DeviceValue, O: Operator<T>>(
        &self,
        op: &O,
        segments: usize,
        total: usize,
        range: impl Fn(usize) -> std::ops::Range<usize> + Sync,
        x: &[T],
    ) -> Vec<Option<O::Out>> {
        let one = |i: usize, buf: &mut Vec<O::Acc>, all_threads: bool| {
            let seg = &x[range(i)];
            if seg.is_empty() {
                return (!O::EMPTY_IS_ERROR).then(|| op.finish(op.identity(), 0));
            }
            let acc = if all_threads {
                self.tree(op, &Lifted(seg, 0))
            } else {
                subtree(op, &Lifted(seg, 0), 0, seg.len().next_power_of_two(), buf)
            };
            Some(op.finish(acc, seg.len() as u64))
        };
        let mut out: Vec<Option<O::Out>> = vec![None; segments];
        if segments < self.threads() || total / segments.max(1) > (1 << 22) {
            let mut buf = Vec::new();
            for (i, o) in out.iter_mut().enumerate() {
                *o = one(i, &mut buf, true);
            }
            return out;
        }
        // About 8 runs per thread, of at least 64 segments.
        let run = segments.div_ceil(8 * self.threads()).max(64);
        let work = out.chunks_mut(run).enumerate();
        self.run_chunks(work, |(k, chunk)| {
            let mut buf = Vec::new();
            for (j, o) in chunk.iter_mut().enumerate() {
                *o = one(k * run + j, &mut buf, false);
            }
        });
        out
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
        let lo = |r: usize| r * rows.stride;
        self.scan_segments_with(&op, kind, x, out, rows.rows, |r| {
            (lo(r), r * rows.cols, rows.cols)
        });
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
        let base = offsets[0] as usize;
        // The outputs from the first offset on, so that segments are disjoint runs of it.
        let tail = &mut out[base..];
        self.scan_segments_with(&op, kind, x, tail, segments, |i| {
            let lo = offsets[i] as usize;
            (lo, lo - base, offsets[i + 1] as usize - lo)
        });
        Ok(())
    }

    /// Scans `count` segments: `seg(i) = (input start, output start, length)`, output
    /// starts increasing with `i` and the segments disjoint in `out`. Many segments: a thread
    /// takes a run of them; few: one after the other, each on all threads.
    fn scan_segments_with<T: DeviceValue, O: Operator<T>>(
        &self,
        op: &O,
        kind: ScanKind,
        x: &[T],
        out: &mut [O::Out],
        count: usize,
        seg: impl Fn(usize) -> (usize, usize, usize) + Sync,
    ) {
        let one =
            |x: &[T], out: &mut [O::Out]| scan_run(op, None, None, kind, &mut Lift::new(x, 0, out));
        if count < self.threads() {
            for i in 0..count {
                let (lo, o, len) = seg(i);
                let (xs, ys) = (&x[lo..lo + len], &mut out[o..o + len]);
                if len > (1 << 22) {
                    // A long segment alone: the whole-array scan, on all threads.
                    self.scan_into(xs, ys, *op, kind).expect("lengths checked");
                } else {
                    one(xs, ys);
                }
            }
            return;
        }
        // Cut `out` into runs of consecutive segments (each run a disjoint slice).
        let run = count.div_ceil(8 * self.threads()).max(64);
        let mut work = Vec::with_capacity(count.div_ceil(run));
        let mut rest = out;
        let mut taken = 0;
        for first in (0..count).step_by(run) {
            let last = (first + run).min(count);
            let (_, o_end, _) = {
                let (lo, o, len) = seg(last - 1);
                (lo, o + len, len)
            };
            let (_, o_first, _) = seg(first);
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(o_end - taken);
            work.push((first, last, o_first, &mut head[o_first - taken..]));
            rest = tail;
            taken = o_end;
        }
        self.run_chunks(work.into_iter(), |(first, last, o_first, ys)| {
            for i in first..last {
                let (lo, o, len) = seg(i);
                one(&x[lo..lo + len], &mut ys[o - o_first..o - o_first + len]);
            }
        });
    }
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
