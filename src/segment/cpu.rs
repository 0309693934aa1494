//! The segmented reduction on the CPU: each segment's canonical tree, segments spread over
//! the backend's threads.

use super::plan::check_rows;
use super::Rows;
use crate::cpu::Cpu;
use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::ops::check::check_empty;
use crate::ops::Operator;
use crate::tree::{subtree, Lifted};

impl Cpu {
    /// One result per row of the row-major matrix `rows` in `x`: row `r`'s result is
    /// `reduce(&x[r * stride..][..cols])` (module [`segment`](crate::segment): same bits,
    /// columns as indices).
    ///
    /// Errors: a stride shorter than a row ([`ErrorKind::InvalidConfig`]), an `x` too short
    /// for the rows ([`ErrorKind::LengthMismatch`]), zero columns for an operator without an
    /// empty value ([`ErrorKind::EmptyInput`]).
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
        check_rows(&rows, x.len(), rows.rows)?;
        if rows.rows > 0 {
            check_empty::<T, O>(rows.cols as u64)?;
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
                self.tree(op, &Lifted(seg))
            } else {
                subtree(op, &Lifted(seg), 0, seg.len().next_power_of_two(), buf)
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

/// CSR offsets: at least one, never decreasing, ending within the input.
fn check_offsets(offsets: &[u64], len: usize) -> Result<()> {
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
