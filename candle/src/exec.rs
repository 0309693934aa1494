//! The work behind the methods: rows of a layout, the custom op that candle runs on either
//! device, and the segment and by-key calls.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Storage, Tensor, D};
use cufold::ops::Operator;
use cufold::segment::Rows;
use cufold::{Cpu, ScanKind};
use std::marker::PhantomData;

use crate::{Elem, TensorExt};

/// A cufold error as a candle error.
pub(crate) fn cf(e: cufold::Error) -> candle_core::Error {
    candle_core::Error::wrap(e)
}

/// The rows of a layout whose last dim is read along: its start and a [`Rows`] (rows of
/// `cols` elements at a fixed stride), when the other dims collapse into one stride and the
/// last is contiguous.
pub(crate) fn rows_of(l: &Layout) -> Option<(usize, Rows)> {
    let dims = l.dims();
    let strides = l.stride();
    let start = l.start_offset();
    let Some((&cols, lead)) = dims.split_last() else {
        return Some((start, Rows::new(1, 1)));
    };
    if cols > 1 && strides[dims.len() - 1] != 1 {
        return None;
    }
    let rows: usize = lead.iter().product();
    // The leading dims that matter (size > 1) must nest: each one's stride is the next one's
    // times its size, and the innermost one's stride is the rows' (at least a row apart).
    let nested: Vec<(usize, usize)> = lead
        .iter()
        .zip(strides)
        .filter(|(&d, _)| d > 1)
        .map(|(&d, &s)| (d, s))
        .collect();
    let stride = match nested.last() {
        None => cols.max(1),
        Some(&(_, s)) => s,
    };
    if rows > 1 && stride < cols {
        return None;
    }
    if nested.windows(2).any(|w| w[0].1 != w[1].1 * w[1].0) {
        return None;
    }
    Some((start, Rows::new(rows, cols).stride(stride.max(cols))))
}

/// Runs `f` on `t` with `dim` brought last (in place when the layout allows, else copied by
/// candle's `contiguous`) and puts the dim back in the result.
pub(crate) fn along(
    t: &Tensor,
    dim: usize,
    f: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let last = t.rank().saturating_sub(1);
    if t.rank() == 0 {
        return f(&t.reshape(1)?)?.reshape(());
    }
    let moved = if dim == last {
        t.clone()
    } else {
        t.transpose(dim, last)?
    };
    let moved = if rows_of(moved.layout()).is_some() {
        moved
    } else {
        moved.contiguous()?
    };
    let r = f(&moved)?;
    if dim == last {
        Ok(r)
    } else {
        r.transpose(dim, last)
    }
}

/// What a [`RowsOp`] does to each row.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Work {
    /// One result a row (the last dim becomes 1).
    Reduce,
    /// A scan of each row.
    Scan(ScanKind),
}

/// The gradient rule of a [`RowsOp`], in its frame (the dim last).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Grad {
    None,
    CumsumInclusive,
    CumsumExclusive,
    Sum,
    Mean,
    Extreme,
    Var,
    LogSumExp,
}

/// A cufold reduction or scan of each row of the last dim, as a candle custom op: cufold's
/// CPU backend on a CPU tensor, the GPU on the tensor's stream on a CUDA tensor.
pub(crate) struct RowsOp<T, O> {
    op: O,
    work: Work,
    grad: Grad,
    name: &'static str,
    _t: PhantomData<fn(T)>,
}

impl<T: Elem, O: Operator<T>> RowsOp<T, O>
where
    O::Out: Elem,
{
    pub(crate) fn new(op: O, work: Work, grad: Grad, name: &'static str) -> Self {
        RowsOp {
            op,
            work,
            grad,
            name,
            _t: PhantomData,
        }
    }

    fn rows(&self, l: &Layout) -> Result<(usize, Rows, Shape)> {
        let (start, rows) = rows_of(l).ok_or_else(|| {
            candle_core::Error::Msg(format!(
                "{}: the layout is not rows of one stride",
                self.name
            ))
        })?;
        let shape = match self.work {
            Work::Reduce => {
                let mut dims = l.dims().to_vec();
                if let Some(last) = dims.last_mut() {
                    *last = 1;
                }
                Shape::from(dims)
            }
            Work::Scan(_) => l.shape().clone(),
        };
        Ok((start, rows, shape))
    }
}

impl<T: Elem, O: Operator<T>> CustomOp1 for RowsOp<T, O>
where
    O::Out: Elem,
{
    fn name(&self) -> &'static str {
        self.name
    }

    fn cpu_fwd(&self, storage: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (start, rows, shape) = self.rows(l)?;
        let x = &storage.as_slice::<T>()?[start..];
        let cpu = Cpu::new();
        let out = match self.work {
            Work::Reduce => cpu.reduce_rows(x, rows, self.op),
            Work::Scan(kind) => cpu.scan_rows(x, rows, self.op, kind),
        }
        .map_err(cf)?;
        Ok((
            <O::Out as candle_core::WithDType>::to_cpu_storage_owned(out),
            shape,
        ))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        storage: &candle_core::CudaStorage,
        l: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::backend::BackendStorage;
        let (start, rows, shape) = self.rows(l)?;
        let dev = storage.device().clone();
        let x = storage.as_cuda_slice::<T>()?;
        let x = x.slice(start..);
        let n = shape.elem_count();
        // SAFETY: every output is written below before the tensor can be read (each row
        // gets its result, each position its prefix).
        let mut out = unsafe { dev.alloc::<O::Out>(n)? };
        if n > 0 {
            match self.work {
                Work::Reduce => {
                    cuda::reducer::<T, O>(&dev, self.op)?.reduce_rows_into(&x, rows, &mut out)
                }
                Work::Scan(kind) => {
                    cuda::scanner::<T, O>(&dev, self.op)?.scan_rows_into(&x, rows, &mut out, kind)
                }
            }
            .map_err(cf)?;
        }
        Ok((candle_core::CudaStorage::wrap_cuda_slice(out, dev), shape))
    }

    fn bwd(&self, arg: &Tensor, res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let n = arg.dim(D::Minus1)?;
        let g = match self.grad {
            Grad::None => return Err(candle_core::Error::BackwardNotSupported { op: self.name }),
            // d(prefix_j)/dx_i = 1 for i <= j: the gradient is the suffix sum of the grads.
            Grad::CumsumInclusive => grad.cufold().cumsum_reverse(D::Minus1)?,
            // For i < j: the suffix sum without position i itself.
            Grad::CumsumExclusive => {
                let suffix = grad.cufold().cumsum_reverse(D::Minus1)?;
                (suffix - grad)?
            }
            Grad::Sum => grad.broadcast_as(arg.shape())?,
            Grad::Mean => (grad.broadcast_as(arg.shape())? / n as f64)?,
            Grad::Extreme => {
                let hit = arg.broadcast_eq(res)?.to_dtype(arg.dtype())?;
                hit.broadcast_mul(grad)?
            }
            Grad::Var => {
                let mean = arg.mean_keepdim(D::Minus1)?;
                let dev = arg.broadcast_sub(&mean)?;
                (dev.broadcast_mul(grad)? * (2.0 / (n as f64 - 1.0)))?
            }
            // d lse / dx_i = exp(x_i - lse): the softmax.
            Grad::LogSumExp => arg.broadcast_sub(res)?.exp()?.broadcast_mul(grad)?,
        };
        Ok(Some(g))
    }
}

/// A 1-D contiguous view of `t` (copied by candle if needed).
fn flat(t: &Tensor, what: &str) -> Result<Tensor> {
    if t.rank() != 1 {
        return Err(candle_core::Error::Msg(format!(
            "{what} must be a 1-D tensor, got shape {:?}",
            t.dims()
        )));
    }
    t.contiguous()
}

fn same_device(a: &Tensor, b: &Tensor, op: &'static str) -> Result<()> {
    if !a.device().same_device(b.device()) {
        return Err(candle_core::Error::DeviceMismatchBinaryOp {
            lhs: a.device().location(),
            rhs: b.device().location(),
            op,
        });
    }
    Ok(())
}

/// The elements of the contiguous tensor `t` in its CPU storage `s`.
fn cpu_slice<'a, T: Elem>(s: &'a CpuStorage, t: &Tensor) -> Result<&'a [T]> {
    let (start, end) = t.layout().contiguous_offsets().ok_or_else(|| {
        candle_core::Error::Msg("a strided tensor where a contiguous one was made".into())
    })?;
    Ok(&s.as_slice::<T>()?[start..end])
}

/// The offsets as u64 for the CPU: `U32` or `I64`, none negative.
fn cpu_offsets(offsets: &Tensor) -> Result<Vec<u64>> {
    match offsets.dtype() {
        candle_core::DType::U32 => Ok(offsets
            .to_vec1::<u32>()?
            .into_iter()
            .map(u64::from)
            .collect()),
        candle_core::DType::I64 => offsets
            .to_vec1::<i64>()?
            .into_iter()
            .map(|o| {
                u64::try_from(o).map_err(|_| {
                    candle_core::Error::Msg(format!("segment_reduce: a negative offset, {o}"))
                })
            })
            .collect(),
        other => Err(candle_core::Error::UnsupportedDTypeForOp(
            other,
            "segment_reduce offsets",
        )),
    }
}

pub(crate) fn segment_reduce<T: Elem, O: Operator<T>>(
    x: &Tensor,
    offsets: &Tensor,
    op: O,
) -> Result<Tensor>
where
    O::Out: Elem,
{
    same_device(x, offsets, "segment_reduce")?;
    let x = flat(x, "segment_reduce's input")?;
    let offsets = flat(offsets, "segment_reduce's offsets")?;
    if offsets.dim(0)? == 0 {
        return Err(candle_core::Error::Msg(
            "segment_reduce: no offsets (m segments take m + 1 offsets)".into(),
        ));
    }
    let m = offsets.dim(0)? - 1;
    let storage = x.storage_and_layout().0;
    let r = match &*storage {
        Storage::Cpu(s) => {
            let xs = cpu_slice::<T>(s, &x)?;
            let offs = cpu_offsets(&offsets)?;
            let out = Cpu::new().reduce_segments(xs, &offs, op).map_err(cf)?;
            // SAFETY: device values are valid as zero bits (cufold's DeviceValue bound).
            let zero = || unsafe { std::mem::zeroed::<O::Out>() };
            let out: Vec<O::Out> = out.into_iter().map(|o| o.unwrap_or_else(zero)).collect();
            Tensor::from_vec(out, m, x.device())
        }
        #[cfg(feature = "cuda")]
        Storage::Cuda(s) => cuda::segment_reduce::<T, O>(s, &x, &offsets, m, op),
        _ => Err(candle_core::Error::Msg(format!(
            "segment_reduce: no cufold backend for {:?}",
            x.device().location()
        ))),
    };
    drop(storage);
    r
}

pub(crate) fn reduce_by_key<K: Elem + cufold::Element, T: Elem, O: Operator<T>>(
    keys: &Tensor,
    x: &Tensor,
    op: O,
) -> Result<(Tensor, Tensor, Tensor)>
where
    O::Out: Elem,
{
    same_device(x, keys, "reduce_by_key")?;
    let x = flat(x, "reduce_by_key's values")?;
    let keys = flat(keys, "reduce_by_key's keys")?;
    if keys.dim(0)? != x.dim(0)? {
        return Err(candle_core::Error::ShapeMismatchBinaryOp {
            lhs: keys.shape().clone(),
            rhs: x.shape().clone(),
            op: "reduce_by_key",
        });
    }
    let storage = x.storage_and_layout().0;
    let r = match &*storage {
        Storage::Cpu(s) => {
            // Both are contiguous (`flat`): read in place, as segment_reduce does.
            let xs = cpu_slice::<T>(s, &x)?;
            let k_storage = keys.storage_and_layout().0;
            let Storage::Cpu(k) = &*k_storage else {
                return Err(candle_core::Error::Msg(
                    "reduce_by_key: keys not on the CPU".into(),
                ));
            };
            let ks = cpu_slice::<K>(k, &keys)?;
            let r = Cpu::new().reduce_by_key(ks, xs, op).map_err(cf)?;
            let n = r.keys.len();
            let lengths: Vec<i64> = r.lengths.into_iter().map(|l| l as i64).collect();
            Ok((
                Tensor::from_vec(r.keys, n, x.device())?,
                Tensor::from_vec(r.values, n, x.device())?,
                Tensor::from_vec(lengths, n, x.device())?,
            ))
        }
        #[cfg(feature = "cuda")]
        Storage::Cuda(s) => cuda::reduce_by_key::<K, T, O>(&keys, s, &x, op),
        _ => Err(candle_core::Error::Msg(format!(
            "reduce_by_key: no cufold backend for {:?}",
            x.device().location()
        ))),
    };
    drop(storage);
    r
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;
    use candle_core::backend::BackendStorage;
    use candle_core::op::BackpropOp;
    use candle_core::{CudaDevice, CudaStorage};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};

    /// Which stream of which context `dev` runs on. (The per-thread default stream, which
    /// candle's devices take, has the same handle in every context.)
    fn stream_key(dev: &CudaDevice) -> (usize, usize) {
        let stream = dev.cuda_stream();
        (
            stream.context().cu_ctx() as usize,
            stream.cu_stream() as usize,
        )
    }

    /// cufold's handle on a candle device's stream, made once per stream and kept (with its
    /// compiled kernels) for the life of the process. A handle on the per-thread default
    /// stream serves every thread: cufold gives each thread its own scratch memory there.
    pub(super) fn gpu_for(dev: &CudaDevice) -> Result<cufold::Gpu> {
        static GPUS: OnceLock<Mutex<HashMap<(usize, usize), cufold::Gpu>>> = OnceLock::new();
        let stream = dev.cuda_stream();
        let key = stream_key(dev);
        let mut map = GPUS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(g) = map.get(&key) {
            return Ok(g.clone());
        }
        let g = cufold::Gpu::new(&stream).map_err(cf)?;
        map.insert(key, g.clone());
        Ok(g)
    }

    /// cufold's segmented reducer (or scanner) for `op` on `dev`'s stream, made once per
    /// stream, element type, operator and parameter values and kept: a reducer keeps its
    /// kernels once looked up, so a call after the first goes straight to the launch.
    pub(super) fn kept<V: Send + Sync + 'static>(
        dev: &CudaDevice,
        what: (std::any::TypeId, cufold::ops::CudaOp, Vec<u8>),
        make: impl FnOnce(cufold::Gpu) -> cufold::Result<V>,
    ) -> Result<Arc<V>> {
        type Key = (
            (usize, usize),
            std::any::TypeId,
            cufold::ops::CudaOp,
            Vec<u8>,
        );
        type Kept = Mutex<HashMap<Key, Arc<dyn std::any::Any + Send + Sync>>>;
        static KEPT: OnceLock<Kept> = OnceLock::new();
        let key = (stream_key(dev), what.0, what.1, what.2);
        let kept = KEPT.get_or_init(Default::default);
        if let Some(v) = kept.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(v.clone().downcast::<V>().expect("kept under its own type"));
        }
        let v = Arc::new(make(gpu_for(dev)?).map_err(cf)?);
        kept.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, v.clone());
        Ok(v)
    }

    /// [`kept`]'s key for `O` over `T`: the types, the operator's CUDA text and its
    /// parameter values.
    fn key_of<V: 'static, T: Elem, O: Operator<T>>(
        op: &O,
    ) -> (std::any::TypeId, cufold::ops::CudaOp, Vec<u8>) {
        (
            std::any::TypeId::of::<V>(),
            op.cuda(),
            op.params().bytes().to_vec(),
        )
    }

    /// The kept segmented reducer of `op` on `dev`.
    pub(super) fn reducer<T: Elem, O: Operator<T>>(
        dev: &CudaDevice,
        op: O,
    ) -> Result<Arc<cufold::segment::SegmentReducer<T, O>>> {
        type R<T, O> = cufold::segment::SegmentReducer<T, O>;
        kept(dev, key_of::<R<T, O>, T, O>(&op), |g| {
            g.segment_reducer::<T, O>(op)
        })
    }

    /// The kept segmented scanner of `op` on `dev`.
    pub(super) fn scanner<T: Elem, O: Operator<T>>(
        dev: &CudaDevice,
        op: O,
    ) -> Result<Arc<cufold::segment::SegmentScanner<T, O>>> {
        type S<T, O> = cufold::segment::SegmentScanner<T, O>;
        kept(dev, key_of::<S<T, O>, T, O>(&op), |g| {
            g.segment_scanner::<T, O>(op)
        })
    }

    pub(super) fn segment_reduce<T: Elem, O: Operator<T>>(
        s: &CudaStorage,
        x: &Tensor,
        offsets: &Tensor,
        m: usize,
        op: O,
    ) -> Result<Tensor>
    where
        O::Out: Elem,
    {
        let dev = s.device().clone();
        let (start, _) = x.layout().contiguous_offsets().expect("contiguous");
        let xs = s.as_cuda_slice::<T>()?;
        let xs = xs.slice(start..start + x.elem_count());
        let offsets = match offsets.dtype() {
            candle_core::DType::I64 => offsets.clone(),
            candle_core::DType::U32 => offsets.to_dtype(candle_core::DType::I64)?,
            other => {
                return Err(candle_core::Error::UnsupportedDTypeForOp(
                    other,
                    "segment_reduce offsets",
                ))
            }
        };
        let (o_storage, o_layout) = offsets.storage_and_layout();
        let Storage::Cuda(o) = &*o_storage else {
            return Err(candle_core::Error::Msg(
                "segment_reduce: offsets not on the GPU".into(),
            ));
        };
        let o_start = o_layout.start_offset();
        let o = o.as_cuda_slice::<i64>()?;
        let o = o.slice(o_start..o_start + m + 1);
        // SAFETY: i64 and u64 have the same size; a negative offset reads as a huge one,
        // which the kernel skips (past the end of the input).
        let o = unsafe { o.transmute::<u64>(m + 1) }.expect("same size");
        let mut out = dev.alloc_zeros::<O::Out>(m)?;
        reducer::<T, O>(&dev, op)?
            .reduce_segments_into(&xs, &o, &mut out)
            .map_err(cf)?;
        Ok(Tensor::from_storage(
            Storage::Cuda(CudaStorage::wrap_cuda_slice(out, dev)),
            m,
            BackpropOp::none(),
            false,
        ))
    }

    pub(super) fn reduce_by_key<K: Elem + cufold::Element, T: Elem, O: Operator<T>>(
        keys: &Tensor,
        s: &CudaStorage,
        x: &Tensor,
        op: O,
    ) -> Result<(Tensor, Tensor, Tensor)>
    where
        O::Out: Elem,
    {
        let dev = s.device().clone();
        let n = x.elem_count();
        let (start, _) = x.layout().contiguous_offsets().expect("contiguous");
        let xs = s.as_cuda_slice::<T>()?;
        let xs = xs.slice(start..start + n);
        let (k_storage, k_layout) = keys.storage_and_layout();
        let Storage::Cuda(k) = &*k_storage else {
            return Err(candle_core::Error::Msg(
                "reduce_by_key: keys not on the GPU".into(),
            ));
        };
        let k_start = k_layout.start_offset();
        let ks = k.as_cuda_slice::<K>()?;
        let ks = ks.slice(k_start..k_start + n);
        let r = reducer::<T, O>(&dev, op)?
            .reduce_by_key(&ks, &xs)
            .map_err(cf)?;
        let runs = r.keys.len();
        let mut lengths = dev.alloc_zeros::<i64>(runs)?;
        if runs > 0 {
            // SAFETY: i64 and u64 have the same size; run lengths are below 2^63.
            let mut view = unsafe { lengths.transmute_mut::<u64>(runs) }.expect("same size");
            dev.cuda_stream()
                .memcpy_dtod(&r.lengths, &mut view)
                .map_err(|e| candle_core::Error::Cuda(Box::new(e)))?;
        }
        let wrap = |st: CudaStorage| {
            Tensor::from_storage(Storage::Cuda(st), runs, BackpropOp::none(), false)
        };
        Ok((
            wrap(CudaStorage::wrap_cuda_slice(r.keys, dev.clone())),
            wrap(CudaStorage::wrap_cuda_slice(r.values, dev.clone())),
            wrap(CudaStorage::wrap_cuda_slice(lengths, dev)),
        ))
    }
}
