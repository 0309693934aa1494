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
    /// The tree over positions `lo..lo + len`, all present (`len` a power of two, at most
    /// [`LEAF`]): [`fold_full`] of their accumulators. `buf` is scratch.
    fn full_tree(&self, op: &O, lo: usize, len: usize, buf: &mut Vec<O::Acc>) -> O::Acc {
        buf.clear();
        self.fill(op, lo, lo + len, buf);
        fold_full(op, buf)
    }
}

/// The leaves of a slice whose first position has index `.1`: `lift(x[i], .1 + i)`.
pub(crate) struct Lifted<'a, T>(pub(crate) &'a [T], pub(crate) u64);

impl<T: DeviceValue, O: Operator<T>> Leaves<T, O> for Lifted<'_, T> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn fill(&self, op: &O, lo: usize, hi: usize, out: &mut Vec<O::Acc>) {
        out.extend(
            self.0[lo..hi]
                .iter()
                .enumerate()
                .map(|(i, &v)| op.lift(v, self.1 + (lo + i) as u64)),
        );
    }
    fn full_tree(&self, op: &O, lo: usize, len: usize, buf: &mut Vec<O::Acc>) -> O::Acc {
        // Lifted straight into the levels of the tree, not through `buf`'s `fill`.
        let x = &self.0[lo..lo + len];
        let first = self.1 + lo as u64;
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has the features this copy was compiled for.
                return unsafe { isa::avx512::lifted_tree(op, x, first, buf) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: as above.
                return unsafe { isa::avx2::lifted_tree(op, x, first, buf) };
            }
        }
        lifted_tree(op, x, first, buf, pairs)
    }
}

/// Copies of the leaves' code compiled for wider vector registers, chosen at run time
/// ([`Lifted::full_tree`]). The same source, so the same operations in the same order on
/// the same values: only the number of lanes per instruction changes, never a result's bits
/// (Rust neither contracts `a * b + c` into a fused multiply-add nor reassociates, whatever
/// the target's features).
#[cfg(target_arch = "x86_64")]
mod isa {
    macro_rules! copy_for {
        ($name:ident, $features:literal) => {
            pub(super) mod $name {
                use crate::element::DeviceValue;
                use crate::ops::Operator;

                /// [`super::super::pairs`], compiled with these features.
                #[target_feature(enable = $features)]
                #[inline(never)]
                unsafe fn pairs<T: DeviceValue, O: Operator<T>>(
                    op: &O,
                    src: &[O::Acc],
                    dst: &mut [O::Acc],
                ) {
                    super::super::pairs_body(op, src, dst)
                }

                /// [`super::super::lifted_tree`], compiled with these features.
                #[target_feature(enable = $features)]
                pub(in crate::tree) unsafe fn lifted_tree<T: DeviceValue, O: Operator<T>>(
                    op: &O,
                    x: &[T],
                    first: u64,
                    buf: &mut Vec<O::Acc>,
                ) -> O::Acc {
                    // SAFETY: called from a function with the same features.
                    super::super::lifted_tree(op, x, first, buf, |op, s, d| unsafe {
                        pairs(op, s, d)
                    })
                }
            }
        };
    }
    copy_for!(avx2, "avx2");
    copy_for!(avx512, "avx512f,avx512bw,avx512dq,avx512vl");
}

/// The tree over the lifted `x` (a power-of-two count, positions from `first`), all present,
/// as [`fold_full`] of their accumulators; `pairs` is [`pairs`] (or a copy of it compiled
/// for other vector registers).
#[inline(always)]
fn lifted_tree<T: DeviceValue, O: Operator<T>>(
    op: &O,
    x: &[T],
    first: u64,
    buf: &mut Vec<O::Acc>,
    pairs: impl Fn(&O, &[O::Acc], &mut [O::Acc]),
) -> O::Acc {
    let len = x.len();
    if let Some(acc) = op.full_leaf(x, first) {
        return acc;
    }
    if O::ORDER_FREE {
        return fold_lanes(op, x, first);
    }
    if len == 1 {
        return op.lift(x[0], first);
    }
    // The tree level by level, each level a pass over the one below: the first lifts
    // and joins neighbours of `x`, the next ones join neighbours of the level below,
    // all stored one after the other in `buf` (`len - 1` nodes). A pass is a loop
    // with no dependency between its iterations, which the compiler puts in the lanes
    // of vector registers; every node is `combine_full` of its two children, as in
    // `fold_full`, so the bits are the tree's.
    if buf.len() < len {
        buf.resize(len, op.identity());
    }
    if std::mem::size_of::<O::Acc>() <= std::mem::size_of::<T>() || len == 2 {
        let (level, rest) = buf.split_at_mut(len / 2);
        for (k, (o, p)) in level.iter_mut().zip(x.chunks_exact(2)).enumerate() {
            let i = first + 2 * k as u64;
            *o = op.combine_full(op.lift(p[0], i), op.lift(p[1], i + 1));
        }
        return levels_above(op, level, rest, pairs);
    }
    // Accumulators wider than the inputs (f32 into f64, say): the first pass makes two
    // levels, each node of the second joining the pairs of four neighbours of `x`, which
    // halves the widest level's stores (20% faster for Mean over f32 on an AVX-512 core;
    // for same-width accumulators, 10% slower than one level).
    let (level, rest) = buf.split_at_mut(len / 4);
    for (k, (o, p)) in level.iter_mut().zip(x.chunks_exact(4)).enumerate() {
        let i = first + 4 * k as u64;
        let a = op.combine_full(op.lift(p[0], i), op.lift(p[1], i + 1));
        let b = op.combine_full(op.lift(p[2], i + 2), op.lift(p[3], i + 3));
        *o = op.combine_full(a, b);
    }
    levels_above(op, level, rest, pairs)
}

/// The levels of a full tree above `below` (a power-of-two count), stored in `rest` (at
/// least as long as `below`, less one); returns the top.
#[inline(always)]
fn levels_above<T: DeviceValue, O: Operator<T>>(
    op: &O,
    below: &[O::Acc],
    mut rest: &mut [O::Acc],
    pairs: impl Fn(&O, &[O::Acc], &mut [O::Acc]),
) -> O::Acc {
    let mut below = below;
    while below.len() > 1 {
        let (level, next) = rest.split_at_mut(below.len() / 2);
        pairs(op, below, level);
        below = level;
        rest = next;
    }
    below[0]
}

/// One level of a full tree: `dst[i]` joins `src[2i]` and `src[2i + 1]`. A function of its
/// own, not inlined: its slice parameters tell the compiler that `src` and `dst` do not
/// overlap, and the loop is vectorised (inlined into the loop over levels it stayed scalar).
#[inline(never)]
fn pairs<T: DeviceValue, O: Operator<T>>(op: &O, src: &[O::Acc], dst: &mut [O::Acc]) {
    pairs_body(op, src, dst)
}

/// The body of [`pairs`] (and of its copies in `isa`).
#[inline(always)]
fn pairs_body<T: DeviceValue, O: Operator<T>>(op: &O, src: &[O::Acc], dst: &mut [O::Acc]) {
    for (o, p) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *o = op.combine_full(p[0], p[1]);
    }
}

/// Positions folded as one fixed-size array by [`fold_block`].
const BLOCK: usize = 64;

/// The tree over a full block of [`BLOCK`] accumulators, level by level on arrays of fixed
/// size (straight-line code the compiler schedules freely): the canonical tree's grouping,
/// every node joining two full, equal subtrees (`combine_full`).
#[inline(always)]
fn fold_block<T: DeviceValue, O: Operator<T>>(op: &O, a: [O::Acc; BLOCK]) -> O::Acc {
    let a: [O::Acc; 32] = level(op, &a);
    let a: [O::Acc; 16] = level(op, &a);
    let a: [O::Acc; 8] = level(op, &a);
    let a: [O::Acc; 4] = level(op, &a);
    let a: [O::Acc; 2] = level(op, &a);
    op.combine_full(a[0], a[1])
}

/// One level of a full tree: `H = N / 2` parents of neighbours.
#[inline(always)]
fn level<T: DeviceValue, O: Operator<T>, const N: usize, const H: usize>(
    op: &O,
    a: &[O::Acc; N],
) -> [O::Acc; H] {
    let mut out = [a[0]; H];
    for i in 0..H {
        out[i] = op.combine_full(a[2 * i], a[2 * i + 1]);
    }
    out
}

/// An order-free operator's result over `xs` (non-empty; positions from `first`): eight
/// independent runs, position `8k + j` in run `j`, joined at the end. Any grouping of an
/// order-free operator's combines gives the canonical tree's bits
/// ([`Operator::ORDER_FREE`]), so this is the tree's result, without its dependencies.
#[inline(always)]
fn fold_lanes<T: DeviceValue, O: Operator<T>>(op: &O, xs: &[T], first: u64) -> O::Acc {
    const L: usize = 8;
    let mut it = xs.chunks_exact(L);
    let mut acc: [O::Acc; L] = std::array::from_fn(|_| op.identity());
    let mut i = first;
    for c in &mut it {
        for j in 0..L {
            acc[j] = op.combine(acc[j], op.lift(c[j], i + j as u64));
        }
        i += L as u64;
    }
    for (j, &v) in it.remainder().iter().enumerate() {
        acc[j] = op.combine(acc[j], op.lift(v, i + j as u64));
    }
    let a: [O::Acc; 4] = std::array::from_fn(|j| op.combine(acc[2 * j], acc[2 * j + 1]));
    op.combine(op.combine(a[0], a[1]), op.combine(a[2], a[3]))
}

/// The tree over `buf` (a power-of-two count, at least one, every position present: each
/// node joins two full subtrees of equal size, `combine_full`). Consumes `buf`'s contents.
pub(crate) fn fold_full<T: DeviceValue, O: Operator<T>>(op: &O, buf: &mut [O::Acc]) -> O::Acc {
    debug_assert!(buf.len().is_power_of_two());
    let mut len = buf.len();
    if len >= BLOCK {
        for b in 0..len / BLOCK {
            let block: [O::Acc; BLOCK] = buf[b * BLOCK..(b + 1) * BLOCK]
                .try_into()
                .expect("a full block");
            buf[b] = fold_block(op, block);
        }
        len /= BLOCK;
    }
    while len > 1 {
        for i in 0..len / 2 {
            buf[i] = op.combine_full(buf[2 * i], buf[2 * i + 1]);
        }
        len /= 2;
    }
    buf[0]
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
        if lo + len <= n {
            return leaves.full_tree(op, lo, len, buf);
        }
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
