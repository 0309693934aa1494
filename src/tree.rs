//! The canonical tree and the canonical grouping, computed on the CPU: what every CPU twin
//! of a primitive is made of, and the reference the GPU's bits are tested against.
//!
//! - `subtree` / `fold_levels`: the balanced binary tree over a power-of-two span of
//!   positions, positions past the input being absent (a node with no present position is
//!   not computed; one with a present left half combines it with its right half or the
//!   identity).
//! - `PrefixStack`: the canonical prefix of a growing sequence (the left fold, largest block
//!   first, of the trees over the aligned power-of-two blocks pushed so far).

use crate::element::DeviceValue;
use crate::ops::Operator;

/// Leaves reduced by one sequential pass over a buffer.
pub(crate) const LEAF: usize = 1 << 12;

/// Where a tree's leaves come from: `len()` positions, whose lifted accumulators
/// `fill(lo, hi, out)` appends for positions `lo..hi` (in order).
pub(crate) trait Leaves<T: DeviceValue, O: Operator<T>>: Sync {
    /// The number of positions.
    fn len(&self) -> usize;
    /// Appends the accumulators of positions `lo..hi` to `out`.
    fn fill(&self, op: &O, lo: usize, hi: usize, out: &mut Vec<O::Acc>);
}

/// The leaves of a slice: `lift(x[i], i)`.
pub(crate) struct Lifted<'a, T>(pub(crate) &'a [T]);

impl<T: DeviceValue, O: Operator<T>> Leaves<T, O> for Lifted<'_, T> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn fill(&self, op: &O, lo: usize, hi: usize, out: &mut Vec<O::Acc>) {
        out.extend(
            self.0[lo..hi]
                .iter()
                .enumerate()
                .map(|(i, &v)| op.lift(v, (lo + i) as u64)),
        );
    }
}

/// The tree over positions `lo..lo + len` (`len` a power of two, `lo < leaves.len()`).
pub(crate) fn subtree<T: DeviceValue, O: Operator<T>, L: Leaves<T, O> + ?Sized>(
    op: &O,
    leaves: &L,
    lo: usize,
    len: usize,
    buf: &mut Vec<O::Acc>,
) -> O::Acc {
    let n = leaves.len();
    if len <= LEAF {
        let end = n.min(lo + len);
        buf.clear();
        leaves.fill(op, lo, end, buf);
        return fold_levels(op, buf, len);
    }
    let half = len / 2;
    let left = subtree(op, leaves, lo, half, buf);
    let right = if lo + half < n {
        subtree(op, leaves, lo + half, half, buf)
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
