//! Reductions and scans of an array spread over several ranks (devices, processes or
//! threads), with the bits of one device.
//!
//! Each rank holds one contiguous share of the global array ([`ChunkLayout`]: balanced over
//! any number of ranks, cut at multiples of a power of two). A reduction reduces each share
//! as its nodes of the canonical tree (crate docs; the share's aligned subtrees), exchanges
//! the nodes (one all-gather per call, [`Collective`]) and joins them as the tree's upper
//! levels, in order, so any operator works, non-commutative and `#[op]` ones included, and
//! the result is the single-device result for the same global array, for every number of
//! ranks and every layout. A scan folds the blocks before each of a rank's subtrees into its
//! carry and scans the subtree from it (and gives the prefix through a full subtree's end
//! from the nodes, where the subtree's tree joins the blocks before it).
//!
//! Every call is collective and checked: with the nodes, the ranks exchange what each was
//! asked (the call, the global length, the layout, the operator and its parameters, its local
//! length), so that ranks that disagree, or a rank that failed before the call, give an
//! [`ErrorKind::Collective`] error on every rank, never a hang or a wrong answer; a rank that
//! panics in the operator tells the others before its panic goes on.
//!
//! [`CpuRank`] is the CPU backend's form and [`GpuRank`] the GPU's (the share on the rank's
//! device, reduced and scanned there; the nodes through the collective), on an in-process
//! [`LocalGroup`] (one thread per rank, each with its device or its own stream of a shared
//! one), an `NcclGroup` (NCCL between devices, in one process or many; cufold's `nccl`
//! feature) or any other
//! [`Collective`] (see docs/ARCHITECTURE.md, "Many devices").
//!
//! ```
//! use cufold::dist::{ChunkLayout, CpuRank, LocalGroup};
//! use cufold::{ops::Sum, Cpu, ScanKind};
//! let x: Vec<f32> = (0..1000).map(|i| (i as f32).sin()).collect();
//! let layout = ChunkLayout::new(x.len() as u64, 3)?;
//! let (sums, scans) = std::thread::scope(|s| {
//!     let handles: Vec<_> = LocalGroup::new(3)
//!         .into_iter()
//!         .map(|comm| {
//!             let (x, layout) = (&x, layout);
//!             s.spawn(move || {
//!                 let rank = CpuRank::new(Cpu::new(), comm);
//!                 let r = layout.range(rank.rank());
//!                 let mine = &x[r.start as usize..r.end as usize];
//!                 let sum = rank.all_reduce(&layout, mine, Sum)?;
//!                 let scan = rank.scan(&layout, mine, Sum, ScanKind::Inclusive)?;
//!                 Ok::<_, cufold::Error>((sum, scan))
//!             })
//!         })
//!         .collect();
//!     let all: Vec<_> = handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect();
//!     let sums: Vec<f32> = all.iter().map(|a| a.0).collect();
//!     let scans: Vec<f32> = all.into_iter().flat_map(|a| a.1).collect();
//!     (sums, scans)
//! });
//! let one = Cpu::new().reduce(&x, Sum)?;
//! assert!(sums.iter().all(|s| s.to_bits() == one.to_bits())); // the same bits
//! assert_eq!(scans, Cpu::new().scan(&x, Sum, ScanKind::Inclusive)?);
//! # Ok::<(), cufold::Error>(())
//! ```

mod gpu;
mod group;
mod layout;
#[cfg(feature = "nccl")]
mod nccl;
mod tcp;

pub use gpu::GpuRank;
pub(crate) use gpu::Tree;
pub use group::{Collective, LocalGroup};
pub use layout::ChunkLayout;
pub(crate) use layout::Piece;
#[cfg(feature = "nccl")]
pub use nccl::{NcclGroup, NcclId};
pub use tcp::{Launch, Rendezvous, TcpGroup};

use crate::cpu::Cpu;
use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::monte_carlo::{check_sample, check_samples, MonteCarlo, Sample};
use crate::ops::check::{check_empty, check_scan_lengths, check_scannable};
use crate::ops::{short_type_name, Mapped, Operator, Transform};
use crate::scan::cpu::{scan_run, Lift};
use crate::scan::ScanKind;
use crate::tree::Leaves;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// A piece's node of the canonical tree from the tree over its present positions (the
/// canonical tree over `next_pow2(present)` of them): the right halves past the array's end
/// are the identity up to the piece's size, as on one device.
pub(crate) fn piece_node<T: DeviceValue, O: Operator<T>>(
    op: &O,
    len: u64,
    piece: &Piece,
    tree: O::Acc,
) -> O::Acc {
    let mut acc = tree;
    let mut width = present(len, piece).next_power_of_two();
    while width < piece.size {
        acc = op.combine(acc, op.identity());
        width *= 2;
    }
    acc
}

/// The positions of `piece` inside an array of `len`.
pub(crate) fn present(len: u64, piece: &Piece) -> u64 {
    (piece.start + piece.size).min(len) - piece.start
}

/// Every rank's pieces with their nodes, in order: what a distributed call joins.
pub(crate) struct Nodes<A> {
    len: u64,
    pieces: Vec<(Piece, A)>,
}

impl<A: Copy> Nodes<A> {
    /// The tree over the aligned block `start .. start + size`: a piece's node, the
    /// identity past the array's end, else its two halves' trees combined. Every block
    /// asked for is a piece or made of whole pieces (the root, and the aligned blocks
    /// before a piece's start or end, which are cuts between pieces).
    fn block<T: DeviceValue, O: Operator<T, Acc = A>>(&self, op: &O, start: u64, size: u64) -> A {
        if start >= self.len {
            return op.identity();
        }
        let i = self.pieces.partition_point(|(p, _)| p.start < start);
        if let Some((p, acc)) = self.pieces.get(i) {
            if p.start == start && p.size == size {
                return *acc;
            }
        }
        debug_assert!(size > 1, "a block inside a piece");
        let half = size / 2;
        op.combine(
            self.block(op, start, half),
            self.block(op, start + half, half),
        )
    }

    /// The whole array's tree: the canonical tree's levels above the pieces. The identity
    /// for an empty array.
    pub(crate) fn root<T: DeviceValue, O: Operator<T, Acc = A>>(&self, op: &O) -> A {
        if self.len == 0 {
            return op.identity();
        }
        self.block(op, 0, self.len.next_power_of_two())
    }

    /// The exclusive prefix of position `end` (a cut between pieces): the left fold,
    /// largest first, of the trees over the aligned blocks that make up `0 .. end`; `None`
    /// for 0.
    pub(crate) fn prefix<T: DeviceValue, O: Operator<T, Acc = A>>(
        &self,
        op: &O,
        end: u64,
    ) -> Option<A> {
        let mut acc: Option<A> = None;
        let mut start = 0;
        for bit in (0..u64::BITS).rev() {
            let size = 1u64 << bit;
            if end & size != 0 {
                let block = self.block(op, start, size);
                acc = Some(match acc {
                    Some(a) => op.combine(a, block),
                    None => block,
                });
                start += size;
            }
        }
        acc
    }
}

/// How a rank scans one of its pieces: from the prefix of the positions before it, and,
/// where the piece is full and not the array's first, with the prefix through its end
/// given apart (there the piece's tree joins the blocks before it, which the piece's own
/// scan cannot see: the inclusive prefix of position 63 with pieces of 16 is the tree over
/// 0..64, not the prefix of 0..48 extended by 48..64).
pub(crate) struct PieceScan<A> {
    pub(crate) piece: Piece,
    /// Its positions in the rank's share.
    pub(crate) local: std::ops::Range<usize>,
    pub(crate) base: Option<A>,
    pub(crate) end: Option<A>,
}

/// The scans of rank `rank`'s pieces.
pub(crate) fn piece_scans<T: DeviceValue, O: Operator<T>>(
    op: &O,
    layout: &ChunkLayout,
    nodes: &Nodes<O::Acc>,
    rank: usize,
) -> Vec<PieceScan<O::Acc>> {
    let first = layout.range(rank).start;
    let len = layout.len();
    layout
        .pieces_of(rank)
        .into_iter()
        .map(|piece| {
            let n = present(len, &piece);
            let full = n == piece.size && piece.start > 0;
            PieceScan {
                piece,
                local: (piece.start - first) as usize..(piece.start - first + n) as usize,
                base: nodes.prefix(op, piece.start),
                end: full.then(|| {
                    nodes
                        .prefix(op, piece.start + piece.size)
                        .expect("a prefix after a piece")
                }),
            }
        })
        .collect()
}

/// A rank's leaves: its chunk lifted at global positions.
struct ChunkLeaves<'a, T> {
    x: &'a [T],
    first: u64,
}

impl<T: DeviceValue, O: Operator<T>> Leaves<T, O> for ChunkLeaves<'_, T> {
    fn len(&self) -> usize {
        self.x.len()
    }
    fn fill(&self, op: &O, lo: usize, hi: usize, out: &mut Vec<O::Acc>) {
        let first = self.first + lo as u64;
        out.extend(
            self.x[lo..hi]
                .iter()
                .enumerate()
                .map(|(i, &v)| op.lift(v, first + i as u64)),
        );
    }
}

/// What each rank says about a call before the nodes are exchanged.
const HEADER: usize = 256;
/// The words of the header before its message.
const WORDS: usize = 8;
const MAGIC: u64 = 0x6375_666f_6c64_0001; // "cufold", version 1

/// A 64-bit FNV-1a hash, stable across processes and builds.
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for &b in p.iter().chain(&[0xff]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The operator's identity in headers: its name, the input type, the accumulator's size
/// and its run-time parameters.
fn op_id<T: DeviceValue, O: Operator<T>>(op: &O) -> u64 {
    let params = op.params();
    fnv(&[
        O::name().as_bytes(),
        short_type_name::<T>().as_bytes(),
        &(std::mem::size_of::<O::Acc>() as u64).to_le_bytes(),
        params.bytes(),
    ])
}

/// One rank's header: the call, the layout, the operator, its chunk's length, and an error
/// if this rank cannot take part.
fn header(call: u64, layout: &ChunkLayout, op: u64, local: u64, failed: Option<&str>) -> Vec<u8> {
    let words = [
        MAGIC,
        call,
        layout.len(),
        layout.grain() | (layout.is_balanced() as u64) << 63,
        layout.ranks() as u64,
        op,
        local,
        failed.is_some() as u64,
    ];
    let mut h: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let msg = failed.unwrap_or("").as_bytes();
    let room = HEADER - 8 * WORDS;
    // Cut at a character boundary.
    let mut cut = msg.len().min(room);
    while cut > 0 && std::str::from_utf8(&msg[..cut]).is_err() {
        cut -= 1;
    }
    h.extend_from_slice(&msg[..cut]);
    h.resize(HEADER, 0);
    h
}

fn collective(msg: String) -> Error {
    Error::new(ErrorKind::Collective, msg)
}

/// Checks every rank's header against this rank's: the same call, layout and operator,
/// chunks of the layout's lengths, no rank failed. Every rank sees the same headers and so
/// reaches the same verdict.
fn check_headers(all: &[u8], me: usize, mine: &[u8], layout: &ChunkLayout) -> Result<()> {
    let word = |h: &[u8], i: usize| u64::from_le_bytes(h[8 * i..8 * i + 8].try_into().unwrap());
    let heads: Vec<&[u8]> = all.chunks(HEADER).collect();
    if heads.len() != layout.ranks() {
        return Err(collective(format!(
            "the layout has {} ranks but the group has {}",
            layout.ranks(),
            heads.len()
        )));
    }
    if let Some((r, h)) = heads.iter().enumerate().find(|(_, h)| word(h, 7) != 0) {
        let msg = String::from_utf8_lossy(&h[8 * WORDS..]);
        return Err(collective(format!(
            "rank {r} failed: {}",
            msg.trim_end_matches('\0')
        )));
    }
    // The words every rank must share; word 6 is the rank's own length.
    const WHAT: [&str; 6] = [
        "version",
        "call (a reduction, a scan or a Monte Carlo run and its seed and draws)",
        "global length",
        "grain or kind of layout (balanced, or chunks)",
        "number of ranks",
        "operator (name, input type, accumulator size or parameters)",
    ];
    for (r, h) in heads.iter().enumerate() {
        for (i, what) in WHAT.iter().enumerate() {
            if word(h, i) != word(mine, i) {
                return Err(collective(format!(
                    "ranks disagree on the {what}: rank {me} has {}, rank {r} has {}",
                    word(mine, i),
                    word(h, i)
                )));
            }
        }
        let want = layout.range(r);
        if word(h, 6) != want.end - want.start {
            return Err(collective(format!(
                "rank {r} holds {} elements where the layout gives it {} (positions {}..{} of \
                 {})",
                word(h, 6),
                want.end - want.start,
                want.start,
                want.end,
                layout.len()
            )));
        }
    }
    Ok(())
}

/// An error for a root that is not a rank of the group.
pub(crate) fn check_root<C: Collective>(root: usize, comm: &C) -> Result<()> {
    if root >= comm.ranks() {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!("root {root} of a group of {} ranks", comm.ranks()),
        ));
    }
    Ok(())
}

const CALL_REDUCE: u64 = 1;
const CALL_SCAN_INCLUSIVE: u64 = 2;
const CALL_SCAN_EXCLUSIVE: u64 = 3;
const CALL_MONTE_CARLO: u64 = 4;
const CALL_REDUCE_ROOT: u64 = 5;

/// The call word of a reduction to `root`: ranks that name other roots disagree on the call.
pub(crate) fn root_call(root: usize) -> u64 {
    fnv(&[
        &CALL_REDUCE_ROOT.to_le_bytes(),
        &(root as u64).to_le_bytes(),
    ])
}

/// The call word of a distributed Monte Carlo run: its seed and kind of draws (the operator
/// and the sample type are in the header's operator word).
pub(crate) fn mc_call<S, F, O>(mc: &MonteCarlo<S, F, O>) -> u64 {
    fnv(&[
        &CALL_MONTE_CARLO.to_le_bytes(),
        &mc.get_seed().to_le_bytes(),
        format!("{:?}", mc.get_draws()).as_bytes(),
    ])
}

/// One rank of a distributed reduction or scan on the CPU backend: a [`Cpu`] for its chunk
/// and a [`Collective`] to the other ranks.
///
/// ```
/// use cufold::dist::{ChunkLayout, CpuRank, LocalGroup};
/// let layout = ChunkLayout::new(4, 1)?;
/// let rank = CpuRank::new(cufold::Cpu::new(), LocalGroup::new(1).pop().unwrap());
/// assert_eq!(rank.all_reduce(&layout, &[1u32, 2, 3, 4], cufold::ops::Sum)?, 10);
/// # Ok::<(), cufold::Error>(())
/// ```
pub struct CpuRank<C: Collective> {
    cpu: Cpu,
    comm: C,
}

impl<C: Collective> CpuRank<C> {
    /// A rank that reduces its chunk with `cpu` and talks to the others through `comm`.
    ///
    /// ```
    /// use cufold::dist::{CpuRank, LocalGroup};
    /// let rank = CpuRank::new(cufold::Cpu::new(), LocalGroup::new(1).pop().unwrap());
    /// assert_eq!((rank.rank(), rank.ranks()), (0, 1));
    /// ```
    pub fn new(cpu: Cpu, comm: C) -> CpuRank<C> {
        CpuRank { cpu, comm }
    }

    /// This rank.
    ///
    /// ```
    /// use cufold::dist::{CpuRank, LocalGroup};
    /// let mut g = LocalGroup::new(2);
    /// assert_eq!(CpuRank::new(cufold::Cpu::new(), g.pop().unwrap()).rank(), 1);
    /// ```
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The number of ranks.
    ///
    /// ```
    /// use cufold::dist::{CpuRank, LocalGroup};
    /// let mut g = LocalGroup::new(2);
    /// assert_eq!(CpuRank::new(cufold::Cpu::new(), g.pop().unwrap()).ranks(), 2);
    /// ```
    pub fn ranks(&self) -> usize {
        self.comm.ranks()
    }

    /// The collective this rank talks through.
    ///
    /// ```
    /// use cufold::dist::{Collective, CpuRank, LocalGroup};
    /// let rank = CpuRank::new(cufold::Cpu::new(), LocalGroup::new(1).pop().unwrap());
    /// assert_eq!(rank.collective().ranks(), 1);
    /// ```
    pub fn collective(&self) -> &C {
        &self.comm
    }

    /// The reduction of the global array, on every rank: `finish(tree, len)` with the
    /// canonical tree over the whole array, so the bits are [`Cpu::reduce`]'s of the global
    /// array (and the GPU's, for operators built from `+ - * /`, min, max and
    /// comparisons). `local` is this rank's chunk, `layout.range(self.rank())`.
    ///
    /// Errors, on every rank alike ([`ErrorKind::Collective`]): ranks that disagree on the
    /// layout or the operator, a chunk whose length is not the layout's, a rank that failed;
    /// [`ErrorKind::EmptyInput`] for an empty array and an operator without an empty value.
    ///
    /// ```
    /// use cufold::dist::{ChunkLayout, CpuRank, LocalGroup};
    /// let layout = ChunkLayout::new(3, 1)?;
    /// let rank = CpuRank::new(cufold::Cpu::new(), LocalGroup::new(1).pop().unwrap());
    /// assert_eq!(rank.all_reduce(&layout, &[1.0f64, 2.0, 6.0], cufold::ops::Mean)?, 3.0);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn all_reduce<T: DeviceValue, O: Operator<T>>(
        &self,
        layout: &ChunkLayout,
        local: &[T],
        op: O,
    ) -> Result<O::Out> {
        let nodes = self.exchange(CALL_REDUCE, layout, local, &op, Ok(()), true)?;
        check_empty::<T, O>(layout.len())?;
        Ok(op.finish(nodes.root(&op), layout.len()))
    }

    /// The reduction of the global array on rank `root` (`Some`), `None` on the others.
    /// The same call on every rank, with the same `root`.
    ///
    /// ```
    /// use cufold::dist::{ChunkLayout, CpuRank, LocalGroup};
    /// let layout = ChunkLayout::new(2, 1)?;
    /// let rank = CpuRank::new(cufold::Cpu::new(), LocalGroup::new(1).pop().unwrap());
    /// assert_eq!(rank.reduce(0, &layout, &[5i32, -1], cufold::ops::Min)?, Some(-1));
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce<T: DeviceValue, O: Operator<T>>(
        &self,
        root: usize,
        layout: &ChunkLayout,
        local: &[T],
        op: O,
    ) -> Result<Option<O::Out>> {
        let ready = check_root(root, &self.comm);
        let nodes = self.exchange(root_call(root), layout, local, &op, ready, true)?;
        check_empty::<T, O>(layout.len())?;
        Ok((self.rank() == root).then(|| op.finish(nodes.root(&op), layout.len())))
    }

    /// A fused Monte Carlo estimate ([`Cpu::monte_carlo`]) of `layout.len()` samples spread
    /// over the ranks: rank `r` draws samples `layout.range(r)` of `mc`'s run (the same
    /// Philox draws one device would, at their global sample numbers), reduces them to its
    /// chunk's node, and every rank gets the estimate, with the bits of [`Cpu::monte_carlo`]
    /// (and of one GPU's, as that promises) for the same `mc` and sample count. Any layout:
    /// chunks may be short or empty.
    ///
    /// Errors as [`CpuRank::all_reduce`]'s (ranks that disagree on the seed or the kind of
    /// draws disagree on the call), and a run past the samples one run can draw.
    ///
    /// ```
    /// use cufold::dist::{ChunkLayout, CpuRank, LocalGroup};
    /// use cufold::monte_carlo::MonteCarlo;
    /// use cufold::ops::Identity;
    /// let rank = CpuRank::new(cufold::Cpu::new(), LocalGroup::new(1).pop().unwrap());
    /// let mc = MonteCarlo::<f32, _>::new(Identity).seed(7);
    /// let est = rank.monte_carlo(&ChunkLayout::new(1000, 1)?, &mc)?;
    /// assert_eq!(est, cufold::Cpu::new().monte_carlo(&mc, 1000)?); // the same bits
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn monte_carlo<S: Sample, F: Transform<S>, O: Operator<F::Out>>(
        &self,
        layout: &ChunkLayout,
        mc: &MonteCarlo<S, F, O>,
    ) -> Result<O::Out> {
        let range = layout.range(self.rank());
        let n = range.end - range.start;
        let op: Mapped<F, O> = mc.operator();
        let ready = check_sample::<S>()
            .and(check_samples::<S>(0, layout.len()))
            .and_then(|()| {
                usize::try_from(n).map_err(|_| {
                    Error::new(
                        ErrorKind::TooLarge,
                        format!("{n} samples: more than this machine's usize counts"),
                    )
                })
            });
        let len = layout.len();
        let (nodes, _) = exchange(&self.comm, mc_call(mc), layout, n, &op, ready, |_, own| {
            let trees = own.iter().map(|p| {
                let count = present(len, p) as usize;
                let tree = crate::monte_carlo::cpu::chunk_tree(&self.cpu, mc, p.start, count);
                piece_node(&op, len, p, tree)
            });
            Ok(Some(trees.collect()))
        })?;
        check_empty::<S, Mapped<F, O>>(len)?;
        Ok(op.finish(nodes.root(&op), len))
    }

    /// This rank's part of the scan of the global array: output `i` of `local` is the
    /// prefix through (inclusive) or before (exclusive) global position
    /// `layout.range(rank).start + i`, in the canonical grouping, finished with the global
    /// count: [`Cpu::scan`]'s bits for the global array, cut to this chunk.
    ///
    /// ```
    /// use cufold::dist::{ChunkLayout, CpuRank, LocalGroup};
    /// use cufold::ScanKind;
    /// let layout = ChunkLayout::new(3, 1)?;
    /// let rank = CpuRank::new(cufold::Cpu::new(), LocalGroup::new(1).pop().unwrap());
    /// let y = rank.scan(&layout, &[1u32, 2, 3], cufold::ops::Sum, ScanKind::Exclusive)?;
    /// assert_eq!(y, [0, 1, 3]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan<T: DeviceValue, O: Operator<T>>(
        &self,
        layout: &ChunkLayout,
        local: &[T],
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        let mut out = crate::scan::cpu::zeroed_vec(local.len());
        self.scan_into(layout, local, &mut out, op, kind)?;
        Ok(out)
    }

    /// [`CpuRank::scan`] into `out` (the length of `local`).
    ///
    /// ```
    /// use cufold::dist::{ChunkLayout, CpuRank, LocalGroup};
    /// use cufold::ScanKind;
    /// let layout = ChunkLayout::new(3, 1)?;
    /// let rank = CpuRank::new(cufold::Cpu::new(), LocalGroup::new(1).pop().unwrap());
    /// let mut y = [0i64; 3];
    /// rank.scan_into(&layout, &[1i64, 2, 3], &mut y, cufold::ops::Max, ScanKind::Inclusive)?;
    /// assert_eq!(y, [1, 2, 3]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_into<T: DeviceValue, O: Operator<T>>(
        &self,
        layout: &ChunkLayout,
        local: &[T],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        let call = match kind {
            ScanKind::Inclusive => CALL_SCAN_INCLUSIVE,
            ScanKind::Exclusive => CALL_SCAN_EXCLUSIVE,
        };
        // Problems of this rank alone are reported through the header, so that the other
        // ranks do not wait for nodes that never come.
        let mine = check_scannable::<T, O>().and(check_scan_lengths(local.len(), out.len()));
        let rank = self.rank();
        let needed = scan_needs_nodes(layout, rank);
        let nodes = self.exchange(call, layout, local, &op, mine, needed)?;
        for scan in piece_scans(&op, layout, &nodes, rank) {
            let x = &local[scan.local.clone()];
            let io = &mut Lift::new(x, scan.piece.start, &mut out[scan.local]);
            scan_run(&op, scan.base, scan.end, kind, io);
        }
        Ok(())
    }

    /// The headers, then every rank's pieces' nodes (this rank's where `needed`), in order.
    fn exchange<T: DeviceValue, O: Operator<T>>(
        &self,
        call: u64,
        layout: &ChunkLayout,
        local: &[T],
        op: &O,
        ready: Result<()>,
        needed: bool,
    ) -> Result<Nodes<O::Acc>> {
        let first = layout.range(self.rank()).start;
        let len = layout.len();
        let (nodes, ()) = exchange(
            &self.comm,
            call,
            layout,
            local.len() as u64,
            op,
            ready,
            |(), own| {
                if !needed {
                    return Ok(None);
                }
                let trees = own.iter().map(|p| {
                    let at = (p.start - first) as usize;
                    let x = &local[at..at + present(len, p) as usize];
                    let leaves = ChunkLeaves { x, first: p.start };
                    piece_node(op, len, p, self.cpu.tree(op, &leaves))
                });
                Ok(Some(trees.collect()))
            },
        )?;
        Ok::<_, Error>(nodes)
    }
}

/// The exchange of one distributed call, on rank `comm.rank()` holding `local` elements:
/// every rank's header (its call, layout, operator and length, or why it cannot take part:
/// the error in `ready`, what the rank prepared for the call, such as its kernels) and the
/// state of its nodes, with the nodes themselves where they fit ([`FIRST`] bytes in all,
/// the same for every rank whatever it was asked, so that ranks that disagree cannot hang
/// the collective), checked alike on every rank; then, where they did not fit, the nodes.
/// Returns every rank's pieces' nodes, in order, and what was prepared. `node` computes this
/// rank's (`pieces`, its pieces in order) from what was prepared, or `None` where nobody
/// needs them (a rank that holds nothing, a scan's last rank that needs none for itself);
/// an error or a panic there is told to the other ranks before it goes on here.
pub(crate) fn exchange<C: Collective, T: DeviceValue, O: Operator<T>, P>(
    comm: &C,
    call: u64,
    layout: &ChunkLayout,
    local: u64,
    op: &O,
    ready: Result<P>,
    node: impl FnOnce(&P, &[Piece]) -> Result<Option<Vec<O::Acc>>>,
) -> Result<(Nodes<O::Acc>, P)> {
    let rank = comm.rank();
    let ready = ready.and_then(|p| {
        if layout.ranks() != comm.ranks() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "a layout over {} ranks in a group of {}",
                    layout.ranks(),
                    comm.ranks()
                ),
            ));
        }
        Ok(p)
    });
    let mut first = header(
        call,
        layout,
        op_id::<T, O>(op),
        local,
        ready.as_ref().err().map(|e| e.to_string()).as_deref(),
    );
    first.resize(FIRST, 0);

    // This rank's nodes (unless it cannot take part), or the news that it failed or
    // panicked: computed before the headers are checked, so that one exchange carries both.
    // (Not for a layout of another group's size, which the header refuses: its pieces
    // could be as many as its ranks.)
    let pieces = match layout.ranks() == comm.ranks() {
        true => layout.pieces(),
        false => Vec::new(),
    };
    let most = layout.max_pieces(&pieces);
    let own: Vec<Piece> = pieces.iter().filter(|p| p.rank == rank).copied().collect();
    let size = std::mem::size_of::<O::Acc>();
    let block = 8 + size * most;
    let inline = HEADER + block <= FIRST;
    // A rank whose length is not the layout's computes nothing: the headers say so.
    let share = layout.range(rank);
    let fits = local == share.end - share.start;
    let tree = ready.as_ref().ok().filter(|_| fits).map(|prepared| {
        catch_unwind(AssertUnwindSafe(|| {
            let nodes = node(prepared, &own)?;
            if let Some(n) = &nodes {
                assert_eq!(n.len(), own.len(), "a node for each piece");
            }
            Ok::<_, Error>(nodes)
        }))
    });
    let mut bytes = vec![0u8; block];
    match &tree {
        Some(Ok(Ok(Some(nodes)))) => {
            bytes[0] = NODE_SOME;
            // SAFETY: DeviceValue types are plain bytes.
            let raw = unsafe {
                std::slice::from_raw_parts(nodes.as_ptr().cast::<u8>(), size * nodes.len())
            };
            bytes[8..8 + raw.len()].copy_from_slice(raw);
        }
        Some(Ok(Ok(None))) | None => {}
        Some(Ok(Err(_))) => bytes[0] = NODE_FAILED,
        Some(Err(_)) => bytes[0] = NODE_PANICKED,
    }
    let inlined = if inline { block } else { 8 };
    first[HEADER..HEADER + inlined].copy_from_slice(&bytes[..inlined]);
    // Alone, a rank's exchange is its own message.
    let all = match comm.ranks() {
        1 => Ok(first.clone()),
        _ => comm.all_gather(&first),
    };
    let node = match tree {
        Some(Ok(n)) => Some(n),
        Some(Err(panic)) => resume_unwind(panic),
        None => None,
    };
    let all = all?;
    let prepared = ready?;
    let heads: Vec<u8> = all
        .chunks(FIRST)
        .flat_map(|c| &c[..HEADER])
        .copied()
        .collect();
    check_headers(&heads, rank, &first[..HEADER], layout)?;
    // The headers agree, so this rank holds its share and computed its nodes.
    let node = node.expect("the nodes of a rank that is ready and holds its share")?;
    // Every rank's state, from the first exchange: all go on to the second, or none.
    for (r, c) in all.chunks(FIRST).enumerate() {
        match c[HEADER] {
            NODE_PANICKED => {
                return Err(collective(format!(
                    "rank {r} panicked while reducing its chunk"
                )))
            }
            NODE_FAILED => {
                return Err(collective(format!(
                    "rank {r} failed while reducing its chunk (its own error says why)"
                )))
            }
            _ => {}
        }
    }
    let gathered = if inline {
        all.chunks(FIRST)
            .map(|c| c[HEADER..HEADER + block].to_vec())
            .collect()
    } else {
        let g = match comm.ranks() {
            1 => bytes.clone(),
            _ => comm.all_gather(&bytes)?,
        };
        g.chunks(block).map(<[u8]>::to_vec).collect::<Vec<_>>()
    };
    let mut nodes = Vec::with_capacity(pieces.len());
    for (r, b) in gathered.iter().enumerate() {
        if b[0] != NODE_SOME {
            continue;
        }
        let theirs = pieces.iter().filter(|p| p.rank == r);
        for (i, p) in theirs.enumerate() {
            let acc = if r == rank {
                node.as_ref().expect("this rank's nodes")[i]
            } else {
                let at = &b[8 + i * size..8 + (i + 1) * size];
                // SAFETY: the bytes are an Acc's, written by a rank with the same operator
                // (checked in the headers); DeviceValue types have no invalid bit patterns.
                unsafe { std::ptr::read_unaligned(at.as_ptr().cast()) }
            };
            nodes.push((*p, acc));
        }
    }
    Ok((
        Nodes {
            len: layout.len(),
            pieces: nodes,
        },
        prepared,
    ))
}

/// The bytes of each rank's first message of a call: its header, its nodes' state and,
/// where they fit, its nodes.
const FIRST: usize = 2048;

/// Whether rank `rank`'s scan needs nodes: its own (for the prefix before its second piece
/// or through a full piece's end) or the later ranks' (for their carries). Alone, or as the
/// last rank with one piece that starts the array or is cut by its end, it needs none: its
/// scan then reads its share once, as one device's does.
pub(crate) fn scan_needs_nodes(layout: &ChunkLayout, rank: usize) -> bool {
    if rank + 1 < layout.holders() {
        return true;
    }
    let mut own = layout.pieces_of(rank).into_iter();
    match (own.next(), own.next()) {
        (Some(p), None) => p.start > 0 && present(layout.len(), &p) == p.size,
        (Some(_), Some(_)) => true,
        (None, _) => false,
    }
}

/// Takes part in a call this rank cannot make (`why`, such as a failed allocation before
/// it): the other ranks hear of it in the header instead of waiting for this rank; `why`
/// comes back.
pub(crate) fn refuse<C: Collective, T: DeviceValue, O: Operator<T>>(
    comm: &C,
    call: u64,
    layout: &ChunkLayout,
    local: u64,
    op: &O,
    why: Error,
) -> Error {
    match exchange::<C, T, O, ()>(comm, call, layout, local, op, Err(why), |_, _| Ok(None)) {
        Err(e) => e,
        Ok(_) => unreachable!("a refused call goes no further than its header"),
    }
}

/// The status byte before each rank's node: it holds one, panicked, failed (0: it holds
/// nothing).
const NODE_SOME: u8 = 1;
const NODE_PANICKED: u8 = 2;
const NODE_FAILED: u8 = 3;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Compose, Sum};

    #[test]
    fn headers_name_what_differs() {
        let l = ChunkLayout::new(8, 2).unwrap();
        let a = header(CALL_REDUCE, &l, 7, 4, None);
        let b = header(CALL_REDUCE, &l, 8, 4, None);
        let all = [a.clone(), b].concat();
        let e = check_headers(&all, 0, &a, &l).unwrap_err();
        assert!(e.to_string().contains("operator"), "{e}");
        let c = header(CALL_REDUCE, &l, 7, 3, None);
        let e = check_headers(&[a.clone(), c].concat(), 0, &a, &l).unwrap_err();
        assert!(e.to_string().contains("rank 1 holds 3"), "{e}");
        let long = "é".repeat(400);
        let d = header(CALL_REDUCE, &l, 7, 4, Some(&long));
        assert_eq!(d.len(), HEADER);
        let e = check_headers(&[a.clone(), d].concat(), 0, &a, &l).unwrap_err();
        assert!(e.to_string().starts_with("rank 1 failed: éé"), "{e}");
    }

    #[test]
    fn operators_with_other_parameters_or_types_differ() {
        assert_ne!(op_id::<f32, _>(&Sum), op_id::<f64, _>(&Sum));
        assert_ne!(
            op_id::<f32, _>(&Sum),
            op_id::<crate::ops::Affine<f32>, _>(&Compose)
        );
        assert_eq!(op_id::<f32, _>(&Sum), op_id::<f32, _>(&Sum));
    }
}
