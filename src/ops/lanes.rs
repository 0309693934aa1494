//! The vectorisable leaves of the order-free built-in operators ([`Operator::full_leaf`]):
//! keys of the element's own width compared in the lanes of fixed-size arrays, which the
//! compiler keeps in vector registers. Any grouping of an order-free operator's combines
//! gives the canonical tree's bits, so a run of lanes joined at the end is the tree's result;
//! what must hold is that each function returns exactly the element `combine` would: the
//! keys are bijections onto the operators' total orders (tested in `element.rs`), and the
//! arg- operators' ties go to the lowest index.
//!
//! [`Operator::full_leaf`]: super::Operator::full_leaf

use crate::element::Element;

/// Lanes per loop iteration: sixteen 32-bit keys, four SSE registers' worth.
const L: usize = 16;

/// The greatest (`MAX`) or least key of `xs` (non-empty).
#[inline(always)]
pub(crate) fn extreme_key<T: Element, const MAX: bool>(
    xs: &[T],
    key: impl Fn(T) -> T::LaneKey,
) -> T::LaneKey {
    let pick = |a: T::LaneKey, b: T::LaneKey| if MAX { a.max(b) } else { a.min(b) };
    let mut acc = [key(xs[0]); L];
    let mut it = xs.chunks_exact(L);
    for c in &mut it {
        let c: &[T; L] = c.try_into().expect("a full chunk");
        for j in 0..L {
            acc[j] = pick(acc[j], key(c[j]));
        }
    }
    let m = acc.into_iter().reduce(pick).expect("L > 0");
    it.remainder().iter().fold(m, |m, &x| pick(m, key(x)))
}

/// The least and greatest of `min_key` and of `max_key` over `xs` (non-empty), in one pass.
#[inline(always)]
pub(crate) fn min_max_keys<T: Element>(xs: &[T]) -> (T::LaneKey, T::LaneKey) {
    let mut lo = [xs[0].min_lane_key(); L];
    let mut hi = [xs[0].max_lane_key(); L];
    let mut it = xs.chunks_exact(L);
    for c in &mut it {
        let c: &[T; L] = c.try_into().expect("a full chunk");
        for j in 0..L {
            lo[j] = lo[j].min(c[j].min_lane_key());
            hi[j] = hi[j].max(c[j].max_lane_key());
        }
    }
    let lo = lo.into_iter().min().expect("L > 0");
    let hi = hi.into_iter().max().expect("L > 0");
    it.remainder().iter().fold((lo, hi), |(lo, hi), &x| {
        (lo.min(x.min_lane_key()), hi.max(x.max_lane_key()))
    })
}

/// The position in `xs` (non-empty, at most `u32::MAX` long) of the greatest key, the
/// lowest such position where several have it.
#[inline(always)]
pub(crate) fn arg_best<T: Element>(xs: &[T], key: impl Fn(T) -> T::LaneKey) -> usize {
    debug_assert!(!xs.is_empty() && xs.len() <= u32::MAX as usize);
    let scalar = |from: usize, best: T::LaneKey, at: usize| {
        let (mut best, mut at) = (best, at);
        for (i, &x) in xs.iter().enumerate().skip(from) {
            let k = key(x);
            if k > best {
                (best, at) = (k, i);
            }
        }
        at
    };
    if xs.len() < 2 * L {
        return scalar(1, key(xs[0]), 0);
    }
    // Lane j sees positions j, L + j, 2L + j, ... in increasing order: a strictly greater
    // key replaces its best, so each lane keeps its lowest position among its ties.
    let mut best: [T::LaneKey; L] = std::array::from_fn(|j| key(xs[j]));
    let mut at: [u32; L] = std::array::from_fn(|j| j as u32);
    let mut it = xs[L..].chunks_exact(L);
    let mut i = L as u32;
    for c in &mut it {
        let c: &[T; L] = c.try_into().expect("a full chunk");
        for j in 0..L {
            let k = key(c[j]);
            let better = k > best[j];
            best[j] = if better { k } else { best[j] };
            at[j] = if better { i + j as u32 } else { at[j] };
        }
        i += L as u32;
    }
    // Across lanes: the greatest key, the lowest position among equals.
    let mut b = 0;
    for j in 1..L {
        if best[j] > best[b] || (best[j] == best[b] && at[j] < at[b]) {
            b = j;
        }
    }
    // The remainder lies after every lane's positions: only a greater key wins.
    scalar(xs.len() - it.remainder().len(), best[b], at[b] as usize)
}
