//! The scan's CPU twin: the canonical grouping of `crate::tree`, chunks on all cores.
//!
//! A scan of N elements is cut into power-of-two chunks. The trees of the full chunks are
//! computed in parallel; a binary counter over them gives each chunk its exclusive prefix
//! (and, for a full chunk, the prefix through its end); then every chunk scans its positions
//! from its prefix, in parallel.

use super::ScanKind;
use crate::cpu::Cpu;
use crate::element::DeviceValue;
use crate::error::Result;
use crate::ops::check::{check_scan_lengths, check_scannable};
use crate::ops::Operator;
use crate::tree::{Lifted, PrefixStack, LEAF};

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
        let chunk = (n / (self.threads() * 4)).max(4 * LEAF).next_power_of_two();
        let full = n / chunk;
        let trees = self.subtrees(op, &Lifted(x), chunk, full);
        let mut stack = PrefixStack::new(None);
        let chunks = n.div_ceil(chunk);
        let mut ends = Vec::with_capacity(chunks);
        for c in 0..chunks {
            let base = stack.prefix();
            let end = trees.get(c).map(|&t| {
                stack.push(|a, b| op.combine(a, b), t);
                stack.prefix().expect("non-empty after a push")
            });
            ends.push((base, end));
        }
        (chunk, ends)
    }
}

/// Scans positions `lo .. lo + len` (a chunk starting at a multiple of its power-of-two size)
/// from the chunk's exclusive prefix `base`; `end` is the prefix through the chunk's last
/// position when the chunk is full. `get(i)` is read before `set(i, ..)` for every i.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan_run<T: DeviceValue, O: Operator<T>>(
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
