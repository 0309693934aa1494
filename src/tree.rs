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
#[cfg_attr(not(debug_assertions), inline(always))]
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

/// Segments of at most this many positions are reduced by [`short_tree`] (longer ones by
/// [`subtree`], whose full leaves are vectorised).
pub(crate) const SHORT_TREE: usize = 32;

/// The tree over the lifted `xs` (1 to [`SHORT_TREE`] positions, indices from 0), without
/// allocation: `scratch` holds the level above the leaves. The canonical tree: a node with a
/// present left half combines it with its right half or the identity ([`fold_levels`]); for
/// an order-free operator every grouping gives these bits, so the positions are folded in
/// order.
#[inline(always)]
pub(crate) fn short_tree<T: DeviceValue, O: Operator<T>>(
    op: &O,
    xs: &[T],
    scratch: &mut [O::Acc; SHORT_TREE / 2],
) -> O::Acc {
    let n = xs.len();
    debug_assert!((1..=SHORT_TREE).contains(&n));
    let l = |i: usize| op.lift(xs[i], i as u64);
    match n {
        1 => l(0),
        2 => op.combine(l(0), l(1)),
        3 => fixed_tree::<T, O, 3>(op, xs),
        4 => fixed_tree::<T, O, 4>(op, xs),
        5 => fixed_tree::<T, O, 5>(op, xs),
        6 => fixed_tree::<T, O, 6>(op, xs),
        7 => fixed_tree::<T, O, 7>(op, xs),
        8 => fixed_tree::<T, O, 8>(op, xs),
        16 => fixed_tree::<T, O, 16>(op, xs),
        32 => fixed_tree::<T, O, 32>(op, xs),
        _ if O::ORDER_FREE => {
            let mut acc = l(0);
            for i in 1..n {
                acc = op.combine(acc, l(i));
            }
            acc
        }
        _ => {
            // The level above the leaves (a leaf without a right neighbour joined with the
            // identity, as `fold_levels` does), then the levels above it.
            let pairs = n.div_ceil(2);
            for (k, s) in scratch[..n / 2].iter_mut().enumerate() {
                *s = op.combine(l(2 * k), l(2 * k + 1));
            }
            if n % 2 == 1 {
                scratch[n / 2] = op.combine(l(n - 1), op.identity());
            }
            fold_levels(op, &mut scratch[..pairs], n.next_power_of_two() / 2)
        }
    }
}

/// [`short_tree`] of exactly `N` positions: the same levels as [`fold_levels`] on an array
/// whose size the compiler knows (unrolled, in registers).
#[cfg_attr(not(debug_assertions), inline(always))]
fn fixed_tree<T: DeviceValue, O: Operator<T>, const N: usize>(op: &O, xs: &[T]) -> O::Acc {
    let x: &[T; N] = xs.try_into().expect("N positions");
    let mut buf: [O::Acc; N] = std::array::from_fn(|i| op.lift(x[i], i as u64));
    // Inlined with N known: the levels unroll over registers.
    fold_levels(op, &mut buf, N.next_power_of_two())
}

/// Positions per group of [`segment_scan`].
const SCAN_GROUP: usize = 64;

/// The scratch of [`segment_scan`]: the levels of a group's tree above its leaves and their
/// prefixes (level `l`, of `m >> l` nodes, from [`level_starts`]`[l]`), and a binary counter
/// of at most 64 groups' trees and their prefixes.
pub(crate) struct ScanScratch<A> {
    tree: [A; SCAN_GROUP],
    pre: [A; SCAN_GROUP],
    blocks: [A; 64],
    prefixes: [A; 64],
}

impl<A: Copy> ScanScratch<A> {
    pub(crate) fn new(fill: A) -> Box<Self> {
        Box::new(ScanScratch {
            tree: [fill; SCAN_GROUP],
            pre: [fill; SCAN_GROUP],
            blocks: [fill; 64],
            prefixes: [fill; 64],
        })
    }
}

/// Where each level of a group of `m` positions starts in [`ScanScratch`]'s arrays (levels
/// 1 to `log2(m)`).
#[inline(always)]
fn level_starts(m: usize) -> [usize; 8] {
    let mut at = [0; 8];
    let mut l = 1;
    while (m >> l) > 1 {
        at[l + 1] = at[l] + (m >> l);
        l += 1;
    }
    at
}

/// The scan of `xs` (indices from 0) into `out` (as long), without allocation: output `i` is
/// `finish(prefix, count)` with the canonical prefix through `i` (inclusive, count `i + 1`)
/// or before it (exclusive, count `i`; the identity at 0), as `crate::scan::cpu::scan_run`.
///
/// By aligned groups of [`SCAN_GROUP`] positions: a binary counter of the groups' trees
/// carries the prefix across groups (the prefix through a full group, which may merge it
/// with the groups before); within a group, its tree level by level, then the prefixes of
/// every level from the top down (at an odd node the level above's, at an even one the one
/// before the pair joined with the node; the first node of a level joined with the prefix
/// before the group), each level a loop of independent combines. The last, partial group's
/// blocks are all smaller than a group, so they start from the prefix before it.
#[inline(always)]
pub(crate) fn segment_scan<T: DeviceValue, O: Operator<T>>(
    op: &O,
    inclusive: bool,
    xs: &[T],
    out: &mut [O::Out],
    s: &mut ScanScratch<O::Acc>,
) {
    let n = xs.len();
    match n {
        1 => {
            out[0] = if inclusive {
                op.finish(op.lift(xs[0], 0), 1)
            } else {
                op.finish(op.identity(), 0)
            };
        }
        2 => fixed_scan::<T, O, 2>(op, inclusive, xs, out, s),
        3 => fixed_scan::<T, O, 3>(op, inclusive, xs, out, s),
        4 => fixed_scan::<T, O, 4>(op, inclusive, xs, out, s),
        5 => fixed_scan::<T, O, 5>(op, inclusive, xs, out, s),
        6 => fixed_scan::<T, O, 6>(op, inclusive, xs, out, s),
        7 => fixed_scan::<T, O, 7>(op, inclusive, xs, out, s),
        8 => fixed_scan::<T, O, 8>(op, inclusive, xs, out, s),
        16 => fixed_scan::<T, O, 16>(op, inclusive, xs, out, s),
        _ => groups_scan(op, inclusive, xs, out, s),
    }
}

/// [`segment_scan`] by groups (a function of its own, so that the short cases inlined into
/// a caller's loop keep their registers).
#[inline(never)]
fn groups_scan<T: DeviceValue, O: Operator<T>>(
    op: &O,
    inclusive: bool,
    xs: &[T],
    out: &mut [O::Out],
    s: &mut ScanScratch<O::Acc>,
) {
    let n = xs.len();
    let mut depth = 0usize;
    let mut q = None;
    let mut at = 0;
    while at + SCAN_GROUP <= n {
        let x = &xs[at..at + SCAN_GROUP];
        let o = &mut out[at..at + SCAN_GROUP];
        let mut block = group_tree(op, x, at as u64, s);
        for _ in 0..(at / SCAN_GROUP).trailing_ones() {
            depth -= 1;
            block = op.combine(s.blocks[depth], block);
        }
        let last = if depth == 0 {
            block
        } else {
            op.combine(s.prefixes[depth - 1], block)
        };
        s.blocks[depth] = block;
        s.prefixes[depth] = last;
        depth += 1;
        group_scan(op, inclusive, x, at as u64, q, Some(last), o, s);
        q = Some(last);
        at += SCAN_GROUP;
    }
    if at < n {
        let x = &xs[at..];
        group_tree(op, x, at as u64, s);
        group_scan(op, inclusive, x, at as u64, q, None, &mut out[at..], s);
    }
}

/// [`segment_scan`] of exactly `N` positions (fewer than a group): the same code on slices
/// whose length the compiler knows (unrolled).
#[cfg_attr(not(debug_assertions), inline(always))]
fn fixed_scan<T: DeviceValue, O: Operator<T>, const N: usize>(
    op: &O,
    inclusive: bool,
    xs: &[T],
    out: &mut [O::Out],
    s: &mut ScanScratch<O::Acc>,
) {
    let x: &[T; N] = xs.try_into().expect("N positions");
    let o: &mut [O::Out; N] = out.try_into().expect("N outputs");
    group_tree(op, x, 0, s);
    group_scan(op, inclusive, x, 0, None, None, o, s);
}

/// The levels of the tree over the full aligned blocks of the group `x` (1 to
/// [`SCAN_GROUP`] positions, indices from `first`) above its leaves, into `s.tree`; returns
/// the top node (the group's tree where `x` is a full group).
#[inline(always)]
fn group_tree<T: DeviceValue, O: Operator<T>>(
    op: &O,
    x: &[T],
    first: u64,
    s: &mut ScanScratch<O::Acc>,
) -> O::Acc {
    let m = x.len();
    if m == 1 {
        return op.lift(x[0], first);
    }
    let at = level_starts(m);
    for (k, (t, p)) in s.tree[..m / 2]
        .iter_mut()
        .zip(x.chunks_exact(2))
        .enumerate()
    {
        let i = first + 2 * k as u64;
        *t = op.combine_full(op.lift(p[0], i), op.lift(p[1], i + 1));
    }
    let mut l = 1;
    while (m >> l) > 1 {
        let (below, above) = s.tree.split_at_mut(at[l + 1]);
        let below = &below[at[l]..];
        for (k, t) in above[..m >> (l + 1)].iter_mut().enumerate() {
            *t = op.combine_full(below[2 * k], below[2 * k + 1]);
        }
        l += 1;
    }
    s.tree[at[l]]
}

/// The outputs of the group `x` (indices from `first`; its levels in `s.tree` from
/// [`group_tree`]) into `out`: `q` is the prefix before the group, `last` the prefix through
/// its end where it is a full group (from the counter).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn group_scan<T: DeviceValue, O: Operator<T>>(
    op: &O,
    inclusive: bool,
    x: &[T],
    first: u64,
    q: Option<O::Acc>,
    last: Option<O::Acc>,
    out: &mut [O::Out],
    s: &mut ScanScratch<O::Acc>,
) {
    let m = x.len();
    let with_q = |v: O::Acc| match q {
        Some(q) => op.combine(q, v),
        None => v,
    };
    let at = level_starts(m);
    let top = m.ilog2() as usize;
    if top >= 1 {
        let t = s.tree[at[top]];
        s.pre[at[top]] = last.unwrap_or_else(|| with_q(t));
        for l in (1..top).rev() {
            let (here, up) = (at[l], at[l + 1]);
            let (pre_lo, pre_up) = s.pre.split_at_mut(up);
            let (pre, up_pre) = (&mut pre_lo[here..], &pre_up[..]);
            let tree = &s.tree[here..];
            let nodes = m >> l;
            pre[0] = with_q(tree[0]);
            if nodes > 1 {
                pre[1] = up_pre[0];
            }
            for j in 1..nodes / 2 {
                pre[2 * j] = op.combine(up_pre[j - 1], tree[2 * j]);
                pre[2 * j + 1] = up_pre[j];
            }
            if nodes % 2 == 1 && nodes > 1 {
                let j = nodes / 2;
                pre[2 * j] = op.combine(up_pre[j - 1], tree[2 * j]);
            }
        }
    }
    // The positions: at an odd one the prefix of level 1, at an even one the pair before's
    // joined with the position.
    let pre = &s.pre[..m / 2];
    let l = |i: usize| op.lift(x[i], first + i as u64);
    let p0 = with_q(l(0));
    if inclusive {
        out[0] = op.finish(p0, first + 1);
        if m > 1 {
            out[1] = op.finish(pre[0], first + 2);
        }
        for j in 1..m / 2 {
            let i = 2 * j;
            out[i] = op.finish(op.combine(pre[j - 1], l(i)), first + i as u64 + 1);
            out[i + 1] = op.finish(pre[j], first + i as u64 + 2);
        }
        if m % 2 == 1 && m > 1 {
            let i = m - 1;
            out[i] = op.finish(op.combine(pre[i / 2 - 1], l(i)), first + i as u64 + 1);
        }
    } else {
        out[0] = op.finish(q.unwrap_or_else(|| op.identity()), first);
        if m > 1 {
            out[1] = op.finish(p0, first + 1);
        }
        for j in 1..m / 2 {
            let i = 2 * j;
            out[i] = op.finish(pre[j - 1], first + i as u64);
            out[i + 1] = op.finish(op.combine(pre[j - 1], l(i)), first + i as u64 + 1);
        }
        if m % 2 == 1 && m > 1 {
            let i = m - 1;
            out[i] = op.finish(pre[i / 2 - 1], first + i as u64);
        }
    }
}
