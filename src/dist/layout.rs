//! Where a distributed array's elements live: one contiguous share per rank, cut at
//! multiples of a power of two (the grain), so that every share is a run of whole subtrees
//! of the canonical tree.

use crate::error::{Error, ErrorKind, Result};
use std::ops::Range;

/// How a global array of `len()` elements is spread over `ranks()` ranks: rank `r` holds
/// one contiguous run of positions, `range(r)`, in rank order, cut at multiples of the
/// `grain()` (a power of two) or at the array's end.
///
/// Two kinds:
///
/// - **Balanced** ([`ChunkLayout::new`], [`ChunkLayout::with_grain`]): the array's blocks of
///   `grain` positions are dealt out in order, each rank taking `blocks / ranks` of them
///   and the first `blocks % ranks` ranks one more, so every rank holds within one grain of
///   `len / ranks` (3 ranks over 2^30 elements hold about 2^30 / 3 each).
/// - **Chunks** ([`ChunkLayout::with_chunk`]): rank `r` holds positions `r * chunk .. (r +
///   1) * chunk`, the grain being the chunk; ranks past the end hold nothing.
///
/// Either way a distributed reduction or scan has the single-device bits. A share is a run
/// of whole aligned blocks of the canonical tree (crate docs): its *pieces*, the largest
/// aligned power-of-two blocks inside it (one for a chunk; a few for a balanced share whose
/// ends are not aligned alike). Each rank reduces its pieces as those nodes of the tree, the
/// ranks exchange them, and every rank joins them as the tree's upper levels; a scan folds
/// the blocks before each piece into its carry and scans the piece from it. A cut anywhere
/// else than a multiple of the grain would split the tree's leaves between ranks.
///
/// ```
/// use cufold::dist::ChunkLayout;
/// let l = ChunkLayout::new(3 << 20, 3)?; // balanced: 2^20 each
/// assert_eq!((l.range(0), l.range(2)), (0..1 << 20, 2 << 20..3 << 20));
/// let l = ChunkLayout::with_chunk(10, 3, 8)?; // chunks of 8: the last rank holds nothing
/// assert_eq!((l.range(1), l.range(2)), (8..10, 10..10));
/// assert!(ChunkLayout::with_chunk(10, 3, 3).is_err()); // not a power of two
/// assert!(ChunkLayout::with_chunk(10, 2, 4).is_err()); // 2 * 4 < 10
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChunkLayout {
    len: u64,
    ranks: usize,
    grain: u64,
    balanced: bool,
}

/// The smallest grain [`ChunkLayout::new`] picks: a distributed Monte Carlo chunk on the GPU
/// starts at a whole Philox block of 4 samples.
const MIN_GRAIN: u64 = 4;
/// [`ChunkLayout::new`] picks the largest grain with at least this many blocks per rank,
/// so that every rank holds within 2 / 256 of `len / ranks` (where that is at least
/// `MIN_GRAIN` blocks of this many; two grains: one for the balance, one for the last,
/// short block).
const BLOCKS_PER_RANK: u64 = 256;

/// One aligned block of the canonical tree inside a rank's share: positions `start ..
/// start + size` (`size` a power of two; the array may end inside it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) start: u64,
    pub(crate) size: u64,
    pub(crate) rank: usize,
}

impl ChunkLayout {
    /// The balanced layout of `len` elements over `ranks` ranks: every rank holds within
    /// two grains of `len / ranks`, with the grain the largest power of two that leaves each
    /// rank at least 256 of them (so within 1% of `len / ranks`), and at least 4 (a Philox
    /// block: a distributed Monte Carlo run may take any layout). Small arrays go to the
    /// first ranks, a grain each.
    ///
    /// ```
    /// let l = cufold::dist::ChunkLayout::new(1 << 30, 3)?;
    /// let sizes: Vec<u64> = (0..3).map(|r| l.range(r).end - l.range(r).start).collect();
    /// assert!(sizes.iter().all(|&s| s.abs_diff((1 << 30) / 3) <= (1 << 30) / 300));
    /// let l = cufold::dist::ChunkLayout::new(10, 3)?; // grains of 4
    /// assert_eq!((l.range(0), l.range(1), l.range(2)), (0..4, 4..8, 8..10));
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn new(len: u64, ranks: usize) -> Result<ChunkLayout> {
        if ranks == 0 {
            return Err(zero_ranks());
        }
        let share = len.div_ceil(ranks as u64) / BLOCKS_PER_RANK;
        let grain = if share < MIN_GRAIN {
            MIN_GRAIN
        } else {
            1 << share.ilog2()
        };
        ChunkLayout::with_grain(len, ranks, grain)
    }

    /// The balanced layout with blocks of `grain` elements (a power of two): the array's
    /// `ceil(len / grain)` blocks dealt out in order, `blocks / ranks` to each rank and one
    /// more to each of the first `blocks % ranks`. A larger grain gives fewer pieces per
    /// share (fewer launches for each rank), a smaller one a closer balance.
    ///
    /// Errors ([`ErrorKind::InvalidConfig`]): no ranks, a grain that is not a power of two;
    /// ([`ErrorKind::TooLarge`]) more than 2^62 elements.
    ///
    /// ```
    /// let l = cufold::dist::ChunkLayout::with_grain(10, 2, 2)?; // 5 blocks of 2: 3 and 2
    /// assert_eq!((l.range(0), l.range(1)), (0..6, 6..10));
    /// assert!(cufold::dist::ChunkLayout::with_grain(10, 2, 3).is_err());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn with_grain(len: u64, ranks: usize, grain: u64) -> Result<ChunkLayout> {
        check(len, ranks, grain, "grain")?;
        Ok(ChunkLayout {
            len,
            ranks,
            grain,
            balanced: true,
        })
    }

    /// The layout with chunks of `chunk` elements, a power of two with `ranks * chunk >=
    /// len`: rank `r` holds `r * chunk .. (r + 1) * chunk`, cut at the array's end.
    ///
    /// Errors ([`ErrorKind::InvalidConfig`]): no ranks, a chunk that is not a power of two,
    /// chunks that do not hold the array; ([`ErrorKind::TooLarge`]) more than 2^62
    /// elements.
    ///
    /// ```
    /// let l = cufold::dist::ChunkLayout::with_chunk(5, 4, 2)?;
    /// assert_eq!((l.range(2), l.range(3)), (4..5, 5..5));
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn with_chunk(len: u64, ranks: usize, chunk: u64) -> Result<ChunkLayout> {
        check(len, ranks, chunk, "chunk")?;
        if (ranks as u128) * (chunk as u128) < len as u128 {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("{ranks} chunks of {chunk} elements cannot hold {len} elements"),
            ));
        }
        Ok(ChunkLayout {
            len,
            ranks,
            grain: chunk,
            balanced: false,
        })
    }

    /// The global array's length.
    ///
    /// ```
    /// assert_eq!(cufold::dist::ChunkLayout::new(7, 2)?.len(), 7);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the global array is empty.
    ///
    /// ```
    /// assert!(cufold::dist::ChunkLayout::new(0, 2)?.is_empty());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of ranks.
    ///
    /// ```
    /// assert_eq!(cufold::dist::ChunkLayout::new(7, 2)?.ranks(), 2);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The power of two every cut between ranks is a multiple of: the blocks a balanced
    /// layout deals out, or a chunk layout's chunk.
    ///
    /// ```
    /// use cufold::dist::ChunkLayout;
    /// assert_eq!(ChunkLayout::with_chunk(7, 2, 4)?.grain(), 4);
    /// assert_eq!(ChunkLayout::new(1 << 30, 4)?.grain(), 1 << 20);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn grain(&self) -> u64 {
        self.grain
    }

    /// Whether the layout is balanced ([`ChunkLayout::new`], [`ChunkLayout::with_grain`])
    /// rather than made of chunks ([`ChunkLayout::with_chunk`]).
    ///
    /// ```
    /// use cufold::dist::ChunkLayout;
    /// assert!(ChunkLayout::new(7, 2)?.is_balanced());
    /// assert!(!ChunkLayout::with_chunk(7, 2, 4)?.is_balanced());
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn is_balanced(&self) -> bool {
        self.balanced
    }

    /// The blocks of `grain` positions: `ceil(len / grain)`.
    fn blocks(&self) -> u64 {
        self.len.div_ceil(self.grain)
    }

    /// The first block of rank `rank` (`rank <= ranks`; the blocks' count for `ranks`).
    fn first_block(&self, rank: usize) -> u64 {
        let blocks = self.blocks();
        let r = rank.min(self.ranks) as u64;
        if !self.balanced {
            return r.min(blocks);
        }
        let k = self.ranks as u64;
        let (q, rem) = (blocks / k, blocks % k);
        // r * q <= blocks: no overflow.
        r * q + r.min(rem)
    }

    /// The global positions rank `rank` holds (empty past the array's end, and for ranks
    /// out of range).
    ///
    /// ```
    /// let l = cufold::dist::ChunkLayout::new(7, 2)?;
    /// assert_eq!((l.range(0), l.range(1), l.range(5)), (0..4, 4..7, 7..7));
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn range(&self, rank: usize) -> Range<u64> {
        let at = |b: u64| (b as u128 * self.grain as u128).min(self.len as u128) as u64;
        if rank >= self.ranks {
            return self.len..self.len;
        }
        at(self.first_block(rank))..at(self.first_block(rank + 1))
    }

    /// The ranks that hold at least one element: `0 .. holders()`.
    ///
    /// ```
    /// use cufold::dist::ChunkLayout;
    /// assert_eq!(ChunkLayout::with_chunk(9, 4, 4)?.holders(), 3);
    /// assert_eq!(ChunkLayout::new(9, 4)?.holders(), 3); // grains of 4
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn holders(&self) -> usize {
        (self.blocks().min(self.ranks as u64)) as usize
    }

    /// The rank that holds position `pos` (`pos < len`).
    fn owner(&self, pos: u64) -> usize {
        let b = pos / self.grain;
        if !self.balanced {
            return b as usize;
        }
        let k = self.ranks as u64;
        let (q, rem) = (self.blocks() / k, self.blocks() % k);
        let big = rem * (q + 1);
        if b < big {
            (b / (q + 1)) as usize
        } else {
            (rem + (b - big) / q) as usize
        }
    }

    /// Every rank's pieces, in order: the canonical tree's nodes, from the root down, whose
    /// present positions one rank holds, and whose parent's it does not. They cover the
    /// array once; a rank's pieces are its share, in order.
    pub(crate) fn pieces(&self) -> Vec<Piece> {
        self.pieces_within(0..self.len)
    }

    /// Rank `rank`'s pieces, in order (none for a rank that holds nothing): the descent of
    /// [`ChunkLayout::pieces`] into the subtrees that meet its share alone.
    pub(crate) fn pieces_of(&self, rank: usize) -> Vec<Piece> {
        self.pieces_within(self.range(rank))
    }

    /// The pieces that meet positions `within`.
    fn pieces_within(&self, within: Range<u64>) -> Vec<Piece> {
        let mut out = Vec::new();
        if !within.is_empty() {
            self.descend(0, self.len.next_power_of_two(), &within, &mut out);
        }
        out
    }

    fn descend(&self, start: u64, size: u64, within: &Range<u64>, out: &mut Vec<Piece>) {
        if start >= within.end || start + size <= within.start {
            return;
        }
        let end = (start + size).min(self.len);
        let rank = self.owner(start);
        if self.owner(end - 1) == rank {
            out.push(Piece { start, size, rank });
        } else {
            self.descend(start, size / 2, within, out);
            self.descend(start + size / 2, size / 2, within, out);
        }
    }

    /// The most pieces any rank holds.
    pub(crate) fn max_pieces(&self, pieces: &[Piece]) -> usize {
        let mut most = 0;
        let mut i = 0;
        while i < pieces.len() {
            let j = i + pieces[i..].partition_point(|p| p.rank == pieces[i].rank);
            most = most.max(j - i);
            i = j;
        }
        most
    }
}

/// The checks every layout makes: ranks, the array's size, a power-of-two `what`.
fn check(len: u64, ranks: usize, grain: u64, what: &str) -> Result<()> {
    if ranks == 0 {
        return Err(zero_ranks());
    }
    if len > 1 << 62 {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!("{len} elements: cufold supports arrays of up to 2^62 elements"),
        ));
    }
    if !grain.is_power_of_two() {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "a {what} of {grain} elements: it must be a power of two, so that every cut \
                 between ranks is a cut of the canonical tree"
            ),
        ));
    }
    Ok(())
}

fn zero_ranks() -> Error {
    Error::new(
        ErrorKind::InvalidConfig,
        "a layout over 0 ranks: at least one rank must hold the array",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes past and below powers of two, and ones with few blocks per rank.
    const LENS: [u64; 14] = [
        0,
        1,
        2,
        3,
        7,
        8,
        9,
        100,
        4096,
        4097,
        70_001,
        (1 << 20) + 3,
        (1 << 30) + 12_345,
        3 << 28,
    ];

    /// Shares that cover the array once, in rank order, holders first; pieces that are
    /// aligned nodes of the canonical tree, cover every share once, in order.
    fn check_cover(l: &ChunkLayout) {
        let mut next = 0;
        for r in 0..l.ranks() {
            let range = l.range(r);
            assert_eq!(range.start, next, "{l:?} rank {r}");
            assert_eq!(range.start < range.end, r < l.holders(), "{l:?} rank {r}");
            assert!(
                range.is_empty() || range.start % l.grain() == 0,
                "{l:?} rank {r}"
            );
            next = range.end;
        }
        assert_eq!(next, l.len(), "{l:?}");
        let pieces = l.pieces();
        let mut next = 0;
        for p in &pieces {
            assert!(
                p.size.is_power_of_two() && p.start % p.size == 0,
                "{l:?} {p:?}"
            );
            assert_eq!(p.start, next, "{l:?} {p:?}");
            next = (p.start + p.size).min(l.len());
            let share = l.range(p.rank);
            assert!(share.start <= p.start && next <= share.end, "{l:?} {p:?}");
            // Its parent is not one rank's: a piece is as large as it can be.
            if p.size < l.len().next_power_of_two() {
                let up = p.start & !(2 * p.size - 1);
                let end = (up + 2 * p.size).min(l.len());
                assert_ne!(l.owner(up), l.owner(end - 1), "{l:?} {p:?}");
            }
        }
        assert_eq!(next, l.len(), "{l:?}");
        for r in 0..l.ranks().min(9) {
            let theirs: Vec<Piece> = pieces.iter().filter(|p| p.rank == r).copied().collect();
            assert_eq!(l.pieces_of(r), theirs, "{l:?} rank {r}");
        }
        for p in 0..l.len().min(64) {
            assert!(l.range(l.owner(p)).contains(&p));
        }
    }

    #[test]
    fn chunks_cover_the_array_once_in_rank_order() {
        for len in LENS {
            for ranks in 1..=9 {
                let l = ChunkLayout::new(len, ranks).unwrap();
                let c = l.range(0).end.max(1).next_power_of_two();
                for chunk in [c, 2 * c] {
                    let l = ChunkLayout::with_chunk(len, ranks, chunk).unwrap();
                    check_cover(&l);
                    // Full pieces are chunks; the array's end may sit in a larger one.
                    let full = |p: &&Piece| p.start + p.size <= len;
                    let span = chunk.min(len.max(1).next_power_of_two());
                    assert!(l.pieces().iter().filter(full).all(|p| p.size == span));
                    assert_eq!(l.max_pieces(&l.pieces()), (len > 0) as usize);
                }
            }
        }
    }

    #[test]
    fn balanced_layouts_give_every_rank_its_share() {
        for len in LENS {
            for ranks in 1..=8 {
                let l = ChunkLayout::new(len, ranks).unwrap();
                check_cover(&l);
                let fair = len as f64 / ranks as f64;
                for r in 0..l.holders() {
                    let got = (l.range(r).end - l.range(r).start) as f64;
                    assert!(
                        (got - fair).abs() < 2.0 * l.grain() as f64,
                        "{l:?} rank {r}"
                    );
                    if fair >= (MIN_GRAIN * BLOCKS_PER_RANK) as f64 {
                        assert!((got - fair).abs() <= fair / 100.0, "{l:?} rank {r}: {got}");
                    }
                }
                // A share of at most 2 * 256 blocks is at most two descending runs of
                // pieces: about 2 log2(256) of them.
                assert!(l.max_pieces(&l.pieces()) <= 20, "{l:?}");
                // Powers of two over powers of two are the chunk layout.
                if len.is_power_of_two() && ranks.is_power_of_two() && len >= 4 * ranks as u64 {
                    let c = ChunkLayout::with_chunk(len, ranks, len / ranks as u64).unwrap();
                    assert!((0..ranks).all(|r| l.range(r) == c.range(r)), "{l:?}");
                    assert_eq!(l.pieces(), c.pieces());
                }
            }
        }
        let l = ChunkLayout::with_grain(100, 3, 1).unwrap();
        assert_eq!(
            (l.range(0), l.range(1), l.range(2)),
            (0..34, 34..67, 67..100)
        );
        check_cover(&l);
    }

    #[test]
    fn bad_layouts_are_errors() {
        assert_eq!(
            ChunkLayout::new(5, 0).unwrap_err().kind(),
            ErrorKind::InvalidConfig
        );
        for chunk in [0, 3, 6] {
            let e = ChunkLayout::with_chunk(5, 4, chunk).unwrap_err();
            assert!(e.to_string().contains("power of two"), "{e}");
            let e = ChunkLayout::with_grain(5, 4, chunk).unwrap_err();
            assert!(e.to_string().contains("grain of"), "{e}");
        }
        let e = ChunkLayout::with_chunk(9, 2, 4).unwrap_err();
        assert!(e.to_string().contains("cannot hold 9"), "{e}");
        let e = ChunkLayout::new((1 << 62) + 1, 2).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge);
        // Huge but valid: no overflow in the arithmetic.
        let l = ChunkLayout::with_chunk(1 << 62, usize::MAX, 1 << 62).unwrap();
        assert_eq!(l.range(usize::MAX), (1 << 62)..(1 << 62));
        let l = ChunkLayout::new(1 << 62, usize::MAX).unwrap();
        assert_eq!(l.range(usize::MAX - 1), (1 << 62)..(1 << 62));
        assert_eq!(l.range(0), 0..4);
        let l = ChunkLayout::new(1 << 62, 3).unwrap();
        check_cover(&l);
    }
}
