//! Where a distributed array's elements live: one contiguous chunk per rank, cut at
//! multiples of a power of two, so that every chunk is a subtree of the canonical tree.

use crate::error::{Error, ErrorKind, Result};
use std::ops::Range;

/// How a global array of `len()` elements is spread over `ranks()` ranks: rank `r` holds
/// positions `r * chunk .. (r + 1) * chunk` (cut at the end of the array), `chunk` a power
/// of two. Ranks past the end hold nothing.
///
/// This is the layout for which a distributed reduction or scan has the single-device bits:
/// each full chunk is one node of the canonical tree (crate docs), the last non-empty chunk
/// is the node over `chunk` positions with the array's end inside it, and the ranks' nodes
/// are joined as the tree's upper levels. A scan's prefix of position `q` in rank `r` is the
/// left fold of the blocks of `[0, r * chunk)` (trees of whole chunks) and then of the
/// blocks inside the chunk, which is the chunk's own scan started from that carry. A cut
/// anywhere else would split nodes of the tree between ranks, so no other layout is
/// accepted.
///
/// ```
/// use cufold::dist::ChunkLayout;
/// let l = ChunkLayout::new(10, 3)?; // chunks of next_pow2(ceil(10 / 3)) = 4
/// assert_eq!((l.chunk(), l.range(0), l.range(2)), (4, 0..4, 8..10));
/// let l = ChunkLayout::with_chunk(10, 3, 8)?; // the last rank holds nothing
/// assert_eq!((l.range(1), l.range(2)), (8..10, 10..10));
/// assert!(ChunkLayout::with_chunk(10, 3, 3).is_err()); // not a power of two
/// assert!(ChunkLayout::with_chunk(10, 2, 4).is_err()); // 2 * 4 < 10
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChunkLayout {
    len: u64,
    ranks: usize,
    chunk: u64,
}

impl ChunkLayout {
    /// The layout of `len` elements over `ranks` ranks with the smallest chunk that holds
    /// them: `next_pow2(ceil(len / ranks))`. Balanced when `len / ranks` is a power of
    /// two; otherwise the last ranks hold less (or nothing).
    ///
    /// ```
    /// let l = cufold::dist::ChunkLayout::new(1 << 30, 2)?;
    /// assert_eq!(l.range(1), (1 << 29)..(1 << 30));
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn new(len: u64, ranks: usize) -> Result<ChunkLayout> {
        if ranks == 0 {
            return Err(zero_ranks());
        }
        let chunk = len.div_ceil(ranks as u64).max(1).next_power_of_two();
        ChunkLayout::with_chunk(len, ranks, chunk)
    }

    /// The layout with chunks of `chunk` elements, a power of two with `ranks * chunk >=
    /// len`.
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
        if ranks == 0 {
            return Err(zero_ranks());
        }
        if len > 1 << 62 {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!("{len} elements: cufold supports arrays of up to 2^62 elements"),
            ));
        }
        if !chunk.is_power_of_two() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "a chunk of {chunk} elements: chunks must be a power of two, so that each \
                     is a subtree of the canonical tree"
                ),
            ));
        }
        if (ranks as u128) * (chunk as u128) < len as u128 {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("{ranks} chunks of {chunk} elements cannot hold {len} elements"),
            ));
        }
        Ok(ChunkLayout { len, ranks, chunk })
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

    /// Elements per chunk (a power of two).
    ///
    /// ```
    /// assert_eq!(cufold::dist::ChunkLayout::new(7, 2)?.chunk(), 4);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn chunk(&self) -> u64 {
        self.chunk
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
        let start = (rank as u128 * self.chunk as u128).min(self.len as u128) as u64;
        let end = ((rank as u128 + 1) * self.chunk as u128).min(self.len as u128) as u64;
        start..end
    }

    /// The ranks that hold at least one element: `0 .. holders()`.
    ///
    /// ```
    /// assert_eq!(cufold::dist::ChunkLayout::with_chunk(9, 4, 4)?.holders(), 3);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn holders(&self) -> usize {
        self.len.div_ceil(self.chunk) as usize
    }

    /// The positions each rank's node of the canonical tree spans: the chunk, or
    /// `next_pow2(len)` when the whole array fits in the first chunk.
    ///
    /// ```
    /// use cufold::dist::ChunkLayout;
    /// assert_eq!(ChunkLayout::with_chunk(9, 4, 4)?.span(), 4);
    /// assert_eq!(ChunkLayout::with_chunk(3, 2, 8)?.span(), 4);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn span(&self) -> u64 {
        self.chunk.min(self.len.max(1).next_power_of_two())
    }
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

    #[test]
    fn chunks_cover_the_array_once_in_rank_order() {
        for len in [0u64, 1, 2, 3, 7, 8, 9, 100, 4096, 4097] {
            for ranks in 1..=9 {
                let l = ChunkLayout::new(len, ranks).unwrap();
                assert!(l.chunk().is_power_of_two());
                let mut next = 0;
                for r in 0..ranks {
                    let range = l.range(r);
                    assert_eq!(range.start, next, "len {len} ranks {ranks}");
                    assert!(range.end - range.start <= l.chunk());
                    assert_eq!(range.start < range.end, r < l.holders());
                    next = range.end;
                }
                assert_eq!(next, len);
                // The smallest chunk: half of it would not hold the array.
                assert!(l.chunk() == 1 || (l.chunk() / 2) * (ranks as u64) < len);
            }
        }
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
        }
        let e = ChunkLayout::with_chunk(9, 2, 4).unwrap_err();
        assert!(e.to_string().contains("cannot hold 9"), "{e}");
        let e = ChunkLayout::new((1 << 62) + 1, 2).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge);
        // Huge but valid: no overflow in the arithmetic.
        let l = ChunkLayout::with_chunk(1 << 62, usize::MAX, 1 << 62).unwrap();
        assert_eq!(l.range(usize::MAX), (1 << 62)..(1 << 62));
    }
}
