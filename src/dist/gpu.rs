//! The GPU form of a distributed reduction or scan: a rank owns a [`Gpu`] (its device and
//! stream) and a [`Collective`] to the other ranks.

use super::{
    check_root, exchange, mc_call, piece_node, piece_scans, present, refuse, root_call,
    scan_needs_nodes, ChunkLayout, Collective, Piece, CALL_REDUCE, CALL_SCAN_EXCLUSIVE,
    CALL_SCAN_INCLUSIVE,
};
use crate::element::DeviceValue;
#[cfg(doc)]
use crate::error::ErrorKind;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::monte_carlo::gpu::ChunkEstimator;
use crate::monte_carlo::{MonteCarlo, Sample};
use crate::ops::check::{check_empty, check_scan_lengths, check_scannable};
use crate::ops::{CudaOp, Mapped, OpParams, Operator, Transform};
use crate::reduce::Reducer;
use crate::scan::ScanKind;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

/// `O` over the positions `first ..` of a global array: lifts at the global index and
/// finishes with the global count (a chunk's scan). kernels/ops.cuh's `cf::At`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct At<O> {
    pub(crate) op: O,
    pub(crate) first: u64,
}

/// `O` over the positions `first ..` of a global array, unfinished: the output is the
/// accumulator (a chunk's node of the canonical tree). kernels/ops.cuh's `cf::Tree`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tree<O> {
    pub(crate) op: O,
    pub(crate) first: u64,
}

/// The parts of [`At`]'s and [`Tree`]'s `Operator` impls they share: `O`'s, lifting at the
/// global index `first + index`, their CUDA half `cf::$name<O>`, `O`'s parameters then
/// `first` as its two members.
macro_rules! chunk_operator {
    ($name:ident) => {
        const COMMUTATIVE: bool = O::COMMUTATIVE;
        const ORDER_FREE: bool = O::ORDER_FREE;
        const LANE_RUNS: bool = O::LANE_RUNS;
        const EMPTY_IS_ERROR: bool = O::EMPTY_IS_ERROR;
        const SCANNABLE: bool = O::SCANNABLE;
        const NAME: &'static str = stringify!($name);
        fn name() -> String {
            format!("{}<{}>", stringify!($name), O::name())
        }
        fn identity(&self) -> O::Acc {
            self.op.identity()
        }
        fn lift(&self, x: T, index: u64) -> O::Acc {
            self.op.lift(x, self.first + index)
        }
        fn combine(&self, a: O::Acc, b: O::Acc) -> O::Acc {
            self.op.combine(a, b)
        }
        fn combine_full(&self, a: O::Acc, b: O::Acc) -> O::Acc {
            self.op.combine_full(a, b)
        }
        fn cuda(&self) -> CudaOp {
            let op = self.op.cuda();
            CudaOp {
                type_name: format!("cf::{}<{}>", stringify!($name), op.type_name),
                source: op.source,
            }
        }
        fn params(&self) -> OpParams {
            OpParams::pair(&self.op.params(), &OpParams::of(&self.first))
        }
    };
}

impl<T: DeviceValue, O: Operator<T>> Operator<T> for At<O> {
    type Acc = O::Acc;
    type Out = O::Out;
    chunk_operator!(At);
    fn finish(&self, acc: O::Acc, n: u64) -> O::Out {
        self.op.finish(acc, self.first + n)
    }
}

impl<T: DeviceValue, O: Operator<T>> Operator<T> for Tree<O> {
    type Acc = O::Acc;
    type Out = O::Acc;
    chunk_operator!(Tree);
    fn finish(&self, acc: O::Acc, _n: u64) -> O::Acc {
        acc
    }
}

/// `v` on the device in one copy (`None` for nothing), on `stream`; `what` names it in an
/// error.
fn upload<T: cudarc::driver::DeviceRepr>(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    v: &[T],
    what: &str,
) -> Result<Option<CudaSlice<T>>> {
    if v.is_empty() {
        return Ok(None);
    }
    let d = stream.clone_htod(v);
    Ok(Some(d.map_err(|e| {
        Error::driver(&format!("copying {what}"), e)
    })?))
}

/// One rank of a distributed reduction or scan on a GPU: a [`Gpu`] (its device and stream)
/// for its chunk, which lives on that device, and a [`Collective`] to the other ranks.
///
/// The rank's share is reduced on the GPU as its nodes of the canonical tree (one per
/// aligned subtree of the share: one for a chunk, a few for a balanced share; its elements
/// lifted at their global positions); the nodes travel through the collective to every
/// rank's host, where they are joined and finished (the operator's Rust half: the GPU's bits
/// for operators built from `+ - * /`, min, max and comparisons, as [`Operator`] promises).
/// A scan then scans each subtree on the GPU from its carry, the fold of the blocks before
/// it. So every call waits for this rank's stream once (the nodes to the host) and makes one
/// exchange (none on a group of one); the result has the bits of one GPU's [`Gpu::reduce`]
/// and [`Gpu::scan`] over the global array, for every number of ranks and every
/// [`ChunkLayout`].
///
/// Ranks may share a device (each with its own stream: the single-GPU stand-in the tests
/// use) or each own one.
///
/// ```no_run
/// use cufold::dist::{ChunkLayout, Collective, GpuRank, LocalGroup};
/// use cufold::{ops::Sum, Gpu};
/// let x: Vec<f32> = (0..1 << 20).map(|i| (i as f32).sin()).collect();
/// let layout = ChunkLayout::new(x.len() as u64, 2)?;
/// let sums = std::thread::scope(|s| {
///     let handles: Vec<_> = LocalGroup::new(2)
///         .into_iter()
///         .map(|comm| {
///             let (x, layout) = (&x, layout);
///             s.spawn(move || {
///                 // One GPU per rank where the machine has them (ordinal = rank).
///                 let gpu = Gpu::open(comm.rank() % Gpu::device_count()?)?;
///                 let r = layout.range(comm.rank());
///                 let mine = gpu.stream().clone_htod(&x[r.start as usize..r.end as usize]).unwrap();
///                 let rank = GpuRank::new(gpu, comm);
///                 rank.all_reduce(&layout, &mine, Sum)
///             })
///         })
///         .collect();
///     handles.into_iter().map(|h| h.join().unwrap()).collect::<Result<Vec<f32>, _>>()
/// })?;
/// let one = Gpu::open(0)?.reduce_host(&x, Sum)?;
/// assert!(sums.iter().all(|s| s.to_bits() == one.to_bits())); // one GPU's bits
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct GpuRank<C: Collective> {
    gpu: Gpu,
    comm: C,
}

impl<C: Collective> std::fmt::Debug for GpuRank<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuRank")
            .field("rank", &self.comm.rank())
            .field("ranks", &self.comm.ranks())
            .field("gpu", &self.gpu)
            .finish()
    }
}

impl<C: Collective> GpuRank<C> {
    /// A rank that reduces its chunk on `gpu` (its stream) and talks to the others through
    /// `comm`.
    ///
    /// ```no_run
    /// use cufold::dist::{GpuRank, LocalGroup};
    /// let rank = GpuRank::new(cufold::Gpu::open(0)?, LocalGroup::new(1).pop().unwrap());
    /// assert_eq!((rank.rank(), rank.ranks()), (0, 1));
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn new(gpu: Gpu, comm: C) -> GpuRank<C> {
        GpuRank { gpu, comm }
    }

    /// This rank.
    ///
    /// ```no_run
    /// use cufold::dist::{GpuRank, LocalGroup};
    /// let mut g = LocalGroup::new(2);
    /// assert_eq!(GpuRank::new(cufold::Gpu::open(0)?, g.pop().unwrap()).rank(), 1);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The number of ranks.
    ///
    /// ```no_run
    /// use cufold::dist::{GpuRank, LocalGroup};
    /// let mut g = LocalGroup::new(2);
    /// assert_eq!(GpuRank::new(cufold::Gpu::open(0)?, g.pop().unwrap()).ranks(), 2);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn ranks(&self) -> usize {
        self.comm.ranks()
    }

    /// The GPU this rank's chunk lives on.
    ///
    /// ```no_run
    /// use cufold::dist::{GpuRank, LocalGroup};
    /// let rank = GpuRank::new(cufold::Gpu::open(0)?, LocalGroup::new(1).pop().unwrap());
    /// let chunk = rank.gpu().stream().clone_htod(&[1.0f32, 2.0])?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The collective this rank talks through.
    ///
    /// ```no_run
    /// use cufold::dist::{Collective, GpuRank, LocalGroup};
    /// let rank = GpuRank::new(cufold::Gpu::open(0)?, LocalGroup::new(1).pop().unwrap());
    /// assert_eq!(rank.collective().ranks(), 1);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn collective(&self) -> &C {
        &self.comm
    }

    /// The reduction of the global array, on every rank: `finish(tree, len)` with the
    /// canonical tree over the whole array, the bits of [`Gpu::reduce`] over the global
    /// array on one GPU. `local` is this rank's chunk, `layout.range(self.rank())`, on this
    /// rank's GPU; waits for the rank's stream.
    ///
    /// Errors, on every rank alike ([`ErrorKind::Collective`]): ranks that disagree on the
    /// layout or the operator, a chunk whose length is not the layout's, a rank that failed
    /// (its own error on that rank: a kernel that did not compile, a driver error);
    /// [`ErrorKind::EmptyInput`] for an empty array and an operator without an empty value.
    ///
    /// ```no_run
    /// use cufold::dist::{ChunkLayout, GpuRank, LocalGroup};
    /// let rank = GpuRank::new(cufold::Gpu::open(0)?, LocalGroup::new(1).pop().unwrap());
    /// let x = rank.gpu().stream().clone_htod(&[1.0f64, 2.0, 6.0])?;
    /// let layout = ChunkLayout::new(3, 1)?;
    /// assert_eq!(rank.all_reduce(&layout, &x, cufold::ops::Mean)?, 3.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn all_reduce<T: DeviceValue, O: Operator<T>>(
        &self,
        layout: &ChunkLayout,
        local: &impl DevicePtr<T>,
        op: O,
    ) -> Result<O::Out> {
        self.reduce_call(CALL_REDUCE, Ok(()), layout, local, op)
    }

    /// A reduction on every rank, as the call `call`; `ready` is this rank's own problem
    /// with the call, told to the others in the header.
    fn reduce_call<T: DeviceValue, O: Operator<T>>(
        &self,
        call: u64,
        ready: Result<()>,
        layout: &ChunkLayout,
        local: &impl DevicePtr<T>,
        op: O,
    ) -> Result<O::Out> {
        let n = local.len() as u64;
        let first = layout.range(self.rank()).start;
        let len = layout.len();
        // The kernel first, so that a failure is told to the other ranks in the header.
        let reducer = ready.and_then(|()| self.gpu.memo_reducer(Tree { op, first }));
        let (nodes, _) = exchange(&self.comm, call, layout, n, &op, reducer, |r, own| {
            self.piece_trees(r, local, first, len, own).map(Some)
        })?;
        check_empty::<T, O>(len)?;
        Ok(op.finish(nodes.root(&op), len))
    }

    /// The nodes of this rank's pieces (`own`, inside its share `local`, which starts at
    /// global position `first`): one reduction each into one buffer, then one copy to the
    /// host (waits for the stream).
    fn piece_trees<T: DeviceValue, O: Operator<T>>(
        &self,
        reducer: &Reducer<T, Tree<O>>,
        local: &impl DevicePtr<T>,
        first: u64,
        len: u64,
        own: &[Piece],
    ) -> Result<Vec<O::Acc>> {
        if own.is_empty() {
            return Ok(Vec::new());
        }
        let stream = self.gpu.stream();
        let mut out: CudaSlice<O::Acc> = stream
            .alloc_zeros(own.len())
            .map_err(|e| Error::driver("allocating a distributed call's nodes", e))?;
        {
            let (x_ptr, _x) = local.device_ptr(stream);
            let (out_ptr, _out) = out.device_ptr_mut(stream);
            for (i, p) in own.iter().enumerate() {
                let at = x_ptr + (p.start - first) * std::mem::size_of::<T>() as u64;
                let to = out_ptr + (i * std::mem::size_of::<O::Acc>()) as u64;
                let op = Tree {
                    op: reducer.op().op,
                    first: p.start,
                };
                if p.start == first {
                    reducer.launch(at, present(len, p), to)?;
                } else {
                    reducer.with_op(op)?.launch(at, present(len, p), to)?;
                }
            }
        }
        let trees = stream
            .clone_dtoh(&out)
            .map_err(|e| Error::driver("copying a distributed call's nodes to the host", e))?;
        let op = reducer.op().op;
        Ok(own
            .iter()
            .zip(trees)
            .map(|(p, t)| piece_node(&op, len, p, t))
            .collect())
    }

    /// The reduction of the global array on rank `root` (`Some`), `None` on the others.
    /// The same call on every rank, with the same `root`.
    ///
    /// ```no_run
    /// use cufold::dist::{ChunkLayout, GpuRank, LocalGroup};
    /// let rank = GpuRank::new(cufold::Gpu::open(0)?, LocalGroup::new(1).pop().unwrap());
    /// let x = rank.gpu().stream().clone_htod(&[5i32, -1])?;
    /// let layout = ChunkLayout::new(2, 1)?;
    /// assert_eq!(rank.reduce(0, &layout, &x, cufold::ops::Min)?, Some(-1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reduce<T: DeviceValue, O: Operator<T>>(
        &self,
        root: usize,
        layout: &ChunkLayout,
        local: &impl DevicePtr<T>,
        op: O,
    ) -> Result<Option<O::Out>> {
        let ready = check_root(root, &self.comm);
        let out = self.reduce_call(root_call(root), ready, layout, local, op)?;
        Ok((self.rank() == root).then_some(out))
    }

    /// This rank's part of the scan of the global array, into `out` on this rank's GPU (the
    /// length of `local`): output `i` is the prefix through (inclusive) or before
    /// (exclusive) global position `layout.range(rank).start + i`, in the canonical
    /// grouping, finished with the global count: one GPU's [`Gpu::scan`] bits for the
    /// global array, cut to this chunk. Waits for the rank's stream once (the chunk's node),
    /// then enqueues the chunk's scan and returns.
    ///
    /// Errors as [`GpuRank::all_reduce`]'s, and an operator that cannot be scanned or an
    /// `out` of another length than `local` ([`ErrorKind::Collective`] on the other ranks).
    ///
    /// ```no_run
    /// use cufold::dist::{ChunkLayout, GpuRank, LocalGroup};
    /// use cufold::ScanKind;
    /// let rank = GpuRank::new(cufold::Gpu::open(0)?, LocalGroup::new(1).pop().unwrap());
    /// let stream = rank.gpu().stream().clone();
    /// let x = stream.clone_htod(&[1u32, 2, 3])?;
    /// let mut y = stream.alloc_zeros::<u32>(3)?;
    /// let layout = ChunkLayout::new(3, 1)?;
    /// rank.scan_into(&layout, &x, &mut y, cufold::ops::Sum, ScanKind::Exclusive)?;
    /// assert_eq!(stream.clone_dtoh(&y)?, [0, 1, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan_into<T: DeviceValue, O: Operator<T>>(
        &self,
        layout: &ChunkLayout,
        local: &impl DevicePtr<T>,
        out: &mut impl DevicePtrMut<O::Out>,
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        let call = match kind {
            ScanKind::Inclusive => CALL_SCAN_INCLUSIVE,
            ScanKind::Exclusive => CALL_SCAN_EXCLUSIVE,
        };
        let n = local.len() as u64;
        let rank = self.rank();
        let first = layout.range(rank).start;
        // Problems of this rank alone, and its kernels, before the exchange: the other ranks
        // hear of a failure in the header instead of waiting for a node that never comes.
        // The node reducer only where some rank needs this rank's nodes.
        let needed = scan_needs_nodes(layout, rank);
        let kernels = check_scannable::<T, O>()
            .and(check_scan_lengths(local.len(), out.len()))
            .and_then(|_| {
                let reducer = if needed {
                    Some(self.gpu.memo_reducer(Tree { op, first })?)
                } else {
                    None
                };
                Ok((reducer, self.gpu.memo_scanner(At { op, first })?))
            });
        let len = layout.len();
        let (nodes, (reducer, scanner)) = exchange(
            &self.comm,
            call,
            layout,
            n,
            &op,
            kernels,
            |k, own| match &k.0 {
                Some(reducer) => self.piece_trees(reducer, local, first, len, own).map(Some),
                None => Ok(None),
            },
        )?;
        drop(reducer);
        let scans = piece_scans(&op, layout, &nodes, rank);
        if scans.is_empty() {
            return Ok(());
        }
        let stream = self.gpu.stream();
        // Every piece's carry in one upload, and its last prefix where given apart.
        let bases: Vec<O::Acc> = scans.iter().filter_map(|s| s.base).collect();
        let bases = upload(stream, &bases, "a distributed scan's carries")?;
        let inclusive = kind == ScanKind::Inclusive;
        let ends: Vec<O::Out> = scans
            .iter()
            .filter(|_| inclusive)
            .filter_map(|s| s.end.map(|e| op.finish(e, s.piece.start + s.piece.size)))
            .collect();
        let ends = upload(stream, &ends, "a distributed scan's last prefixes")?;
        let (x_ptr, _x) = local.device_ptr(stream);
        let (y_ptr, _y) = out.device_ptr_mut(stream);
        let bases_guard = bases.as_ref().map(|b| b.device_ptr(stream));
        let ends_guard = ends.as_ref().map(|b| b.device_ptr(stream));
        let (in_size, out_size) = (std::mem::size_of::<T>(), std::mem::size_of::<O::Out>());
        let acc_size = std::mem::size_of::<O::Acc>();
        let (mut base_at, mut end_at) = (0, 0);
        for s in &scans {
            let start = s.local.start as u64;
            let count = (s.local.end - s.local.start) as u64;
            let carry_ptr = match s.base {
                Some(_) => {
                    base_at += 1;
                    bases_guard.as_ref().expect("uploaded carries").0
                        + ((base_at - 1) * acc_size) as u64
                }
                None => 0,
            };
            let at = At {
                op,
                first: s.piece.start,
            };
            let piece_scanner = match s.piece.start == first {
                true => None,
                false => Some(scanner.with_op(at)?),
            };
            piece_scanner.as_ref().unwrap_or(&scanner).launch(
                x_ptr + start * in_size as u64,
                y_ptr + start * out_size as u64,
                count,
                kind,
                false,
                carry_ptr,
            )?;
            if inclusive && s.end.is_some() {
                let src = ends_guard.as_ref().expect("uploaded last prefixes").0
                    + (end_at * out_size) as u64;
                end_at += 1;
                // SAFETY: `out` holds the share's outputs (its length checked against
                // `local`'s), so the piece's last is `out_size` bytes at y_ptr + (start +
                // count - 1) * out_size; `ends` holds one for each piece given one; both are
                // used on this stream, in order, and `ends` is freed in stream order after
                // the copies.
                unsafe {
                    cudarc::driver::result::memcpy_dtod_async(
                        y_ptr + (start + count - 1) * out_size as u64,
                        src,
                        out_size,
                        stream.cu_stream(),
                    )
                }
                .map_err(|e| Error::driver("writing a distributed scan's last prefix", e))?;
            }
        }
        Ok(())
    }

    /// A fused Monte Carlo estimate ([`Gpu::monte_carlo`]) of `layout.len()` samples spread
    /// over the ranks: rank `r` draws samples `layout.range(r)` of `mc`'s run (the same
    /// Philox draws one GPU would, at their global sample numbers), reduces them to its
    /// chunk's node, and every rank gets the estimate, with one GPU's bits for the same `mc`
    /// and sample count. Waits for the rank's stream.
    ///
    /// Errors as [`GpuRank::all_reduce`]'s (ranks that disagree on the seed or the kind of
    /// draws disagree on the call), and a layout whose grain is less than 4 samples with
    /// more than one rank holding samples (each rank's samples take whole Philox blocks;
    /// [`ChunkLayout::new`]'s grain is at least 4).
    ///
    /// ```no_run
    /// use cufold::dist::{ChunkLayout, GpuRank, LocalGroup};
    /// use cufold::monte_carlo::MonteCarlo;
    /// use cufold::ops::Identity;
    /// let rank = GpuRank::new(cufold::Gpu::open(0)?, LocalGroup::new(1).pop().unwrap());
    /// let mc = MonteCarlo::<f32, _>::new(Identity).seed(7);
    /// let est = rank.monte_carlo(&ChunkLayout::new(1 << 24, 1)?, &mc)?;
    /// assert_eq!(est, rank.gpu().monte_carlo(&mc, 1 << 24)?); // the same bits
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn monte_carlo<S: Sample, F: Transform<S>, O: Operator<F::Out>>(
        &self,
        layout: &ChunkLayout,
        mc: &MonteCarlo<S, F, O>,
    ) -> Result<O::Out> {
        let range = layout.range(self.rank());
        let n = range.end - range.start;
        let len = layout.len();
        let op: Mapped<F, O> = mc.operator();
        let call = mc_call(mc);
        // The kernels of this rank's pieces, before the exchange (a failure goes in the
        // header).
        let rank = self.rank();
        let own = layout.pieces_of(rank);
        let ests = ChunkEstimator::new(&self.gpu, mc, range.start, len).and_then(|first| {
            let mut ests = vec![];
            for p in own.iter().skip(1) {
                ests.push(ChunkEstimator::new(&self.gpu, mc, p.start, len)?);
            }
            ests.insert(0, first);
            Ok(ests)
        });
        let (nodes, _) = exchange(&self.comm, call, layout, n, &op, ests, |ests, own| {
            let trees = own
                .iter()
                .zip(ests)
                .map(|(p, est)| Ok(piece_node(&op, len, p, est.tree(present(len, p))?)));
            trees.collect::<Result<Vec<_>>>().map(Some)
        })?;
        check_empty::<S, Mapped<F, O>>(len)?;
        Ok(op.finish(nodes.root(&op), len))
    }

    /// [`GpuRank::scan_into`] into a new buffer on this rank's GPU.
    ///
    /// ```no_run
    /// use cufold::dist::{ChunkLayout, GpuRank, LocalGroup};
    /// use cufold::ScanKind;
    /// let rank = GpuRank::new(cufold::Gpu::open(0)?, LocalGroup::new(1).pop().unwrap());
    /// let x = rank.gpu().stream().clone_htod(&[3i64, 1, 2])?;
    /// let layout = ChunkLayout::new(3, 1)?;
    /// let y = rank.scan(&layout, &x, cufold::ops::Max, ScanKind::Inclusive)?;
    /// assert_eq!(rank.gpu().stream().clone_dtoh(&y)?, [3, 3, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan<T: DeviceValue, O: Operator<T>>(
        &self,
        layout: &ChunkLayout,
        local: &impl DevicePtr<T>,
        op: O,
        kind: ScanKind,
    ) -> Result<CudaSlice<O::Out>> {
        let mut out = match self.gpu.alloc::<O::Out>(local.len()) {
            Ok(out) => out,
            Err(e) => {
                let call = match kind {
                    ScanKind::Inclusive => CALL_SCAN_INCLUSIVE,
                    ScanKind::Exclusive => CALL_SCAN_EXCLUSIVE,
                };
                let n = local.len() as u64;
                return Err(refuse(&self.comm, call, layout, n, &op, e));
            }
        };
        self.scan_into(layout, local, &mut out, op, kind)?;
        Ok(out)
    }
}
