//! cufold's reductions and scans on [candle](https://github.com/huggingface/candle) tensors.
//!
//! `tensor.cufold()` (the [`TensorExt`] trait) gives candle-named methods that work along any
//! dim: `cumsum` (inclusive, exclusive, reverse), `cummax`, `cummin`, `sum`, `max`, `min`,
//! `argmax`, `argmin`, `mean`, `var`, `log_sum_exp`, each with a `_keepdim` form where candle
//! has one, plus any cufold operator (`reduce_keepdim`, `scan`, `#[cufold::op]` ones
//! included), segment reductions by an offsets tensor and `reduce_by_key`.
//!
//! ```
//! use candle_core::{Device, Tensor, D};
//! use cufold_candle::TensorExt;
//!
//! let x = Tensor::new(&[[1f32, 2., 3.], [4., 5., 6.]], &Device::Cpu)?;
//! assert_eq!(x.cufold().cumsum(D::Minus1)?.to_vec2::<f32>()?, [[1., 3., 6.], [4., 9., 15.]]);
//! assert_eq!(x.cufold().argmax(1)?.to_vec1::<u32>()?, [2, 2]);
//! assert_eq!(x.cufold().sum_keepdim(0)?.to_vec2::<f32>()?, [[5., 7., 9.]]);
//! # Ok::<(), candle_core::Error>(())
//! ```
//!
//! **Where it runs.** On a CUDA tensor (feature `cuda`), on the tensor's own device and
//! stream (`CudaDevice::cuda_stream()`), into memory allocated by candle's device, with no
//! host synchronisation inside, except `reduce_by_key`, which must learn the number of runs
//! before it sizes its outputs (one wait, as `torch.unique_consecutive`). The calls can
//! be captured in a CUDA graph once each has run before the capture (that run compiles its
//! kernel and sizes cufold's scratch memory). A call along another dim than the last, or on a
//! strided view, goes through candle's `contiguous`, whose copy uploads its layout from host
//! memory: run the warm-up and the capture inside candle's
//! `CudaDevice::enable_cuda_graph_htod_cache()`, as for candle's own strided ops. Kernels are
//! compiled by NVRTC on first use and kept for the device. On a CPU tensor, cufold's CPU
//! backend: **the same bits** as the GPU.
//!
//! **Results.** The canonical combination tree of cufold: a row's result depends on its
//! length only, never on the launch, and is the same on the CPU and every GPU. f16 and bf16
//! sums, means and cumsums accumulate in f32 and round once (cufold's `Sum`); `argmax` and
//! `argmin` return `U32` indices (as candle's own), the lowest index on ties, the first NaN
//! when there is one (as PyTorch); `var` divides by `n - 1` (as candle); `mean`, `var` and
//! `log_sum_exp` take float tensors only. Integer `sum` and `cumsum` wrap in the element
//! type, as candle's do.
//!
//! **Layouts.** The dim is brought last: a tensor whose other dims collapse into rows of
//! one stride (a contiguous tensor along its last dim, a narrowed one, ...) is read in place;
//! any other layout (another dim, a transposed or broadcast view) is first copied by
//! candle's `contiguous`. Results come back in the input's dim order. Reverse scans flip
//! the dim (two copies).
//!
//! **Gradients.** `cumsum` (all three forms), `sum`, `mean`, `max`, `min`, `var` and
//! `log_sum_exp` take part in candle's backward pass (cumsum's gradient is a reverse cumsum,
//! log-sum-exp's is the softmax); the index results and custom operators have none.
//!
//! **Errors** are candle errors, never panics: tensors on different devices, a dtype the
//! method does not take, a dim out of range, offsets that are not `U32` or `I64`, a row longer
//! than `u32::MAX + 1` for the index results, and every cufold error (an operator whose CUDA
//! does not compile gives the NVRTC log with the source).

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

use candle_core::shape::Dim;
use candle_core::{DType, Result, Tensor, WithDType};
use cufold::ops::{Max, Min, Operator, Sum};
use cufold::{bf16, f16, DeviceValue, ScanKind};

mod exec;
pub mod ops;

use exec::{along, Grad, RowsOp, Work};
use ops::{ArgIndex, LogSumExp, MeanOf, VarOf};

/// An element type a candle tensor and cufold share: u8, u32, i32, i64, f16, bf16, f32 and
/// f64 (candle's I16 and 8-bit floats have no cufold twin).
///
/// ```
/// fn takes<T: cufold_candle::Elem>() {}
/// takes::<half::bf16>();
/// ```
#[cfg(feature = "cuda")]
pub trait Elem: DeviceValue + WithDType + candle_core::cuda_backend::CudaDType {}
/// An element type a candle tensor and cufold share: u8, u32, i32, i64, f16, bf16, f32 and
/// f64 (candle's I16 and 8-bit floats have no cufold twin).
///
/// ```
/// fn takes<T: cufold_candle::Elem>() {}
/// takes::<half::bf16>();
/// ```
#[cfg(not(feature = "cuda"))]
pub trait Elem: DeviceValue + WithDType {}

impl Elem for u8 {}
impl Elem for u32 {}
impl Elem for i32 {}
impl Elem for i64 {}
impl Elem for f16 {}
impl Elem for bf16 {}
impl Elem for f32 {}
impl Elem for f64 {}

/// The extension trait: `tensor.cufold()` gives the methods of [`Cufold`].
///
/// ```
/// use cufold_candle::TensorExt;
/// let x = candle_core::Tensor::new(&[3f32, 1., 2.], &candle_core::Device::Cpu)?;
/// assert_eq!(x.cufold().cummax(0)?.to_vec1::<f32>()?, [3., 3., 3.]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub trait TensorExt {
    /// cufold's reductions and scans on this tensor.
    fn cufold(&self) -> Cufold<'_>;
}

impl TensorExt for Tensor {
    fn cufold(&self) -> Cufold<'_> {
        Cufold { t: self }
    }
}

/// cufold's methods on one tensor (from [`TensorExt::cufold`]). Each takes a single dim
/// (a `usize` or `D::Minus1`, ...).
///
/// ```
/// use candle_core::{Device, Tensor, D};
/// use cufold_candle::TensorExt;
/// let logits = Tensor::new(&[[0f32, 0.], [1., 1.]], &Device::Cpu)?;
/// let lse = logits.cufold().log_sum_exp(D::Minus1)?.to_vec1::<f32>()?;
/// assert!((lse[0] - 2f32.ln()).abs() < 1e-6 && (lse[1] - (1. + 2f32.ln())).abs() < 1e-6);
/// # Ok::<(), candle_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Cufold<'a> {
    t: &'a Tensor,
}

/// Runs `$body` with `$T` the Rust type of `$dtype` among `[$($d => $ty),*]`, or returns
/// candle's unsupported-dtype error naming `$op`.
macro_rules! with_dtype {
    ($dtype:expr, $op:expr, $T:ident, [$($d:ident => $ty:ty),*], $body:expr) => {
        match $dtype {
            $(DType::$d => {
                type $T = $ty;
                $body
            })*
            other => Err(candle_core::Error::UnsupportedDTypeForOp(other, $op)),
        }
    };
}

macro_rules! any_dtype {
    ($dtype:expr, $op:expr, $T:ident, $body:expr) => {
        with_dtype!($dtype, $op, $T,
            [U8 => u8, U32 => u32, I32 => i32, I64 => i64, F16 => f16, BF16 => bf16, F32 => f32, F64 => f64],
            $body)
    };
}

macro_rules! float_dtype {
    ($dtype:expr, $op:expr, $T:ident, $body:expr) => {
        with_dtype!($dtype, $op, $T, [F16 => f16, BF16 => bf16, F32 => f32, F64 => f64], $body)
    };
}

impl<'a> Cufold<'a> {
    fn dim<Di: Dim>(&self, dim: Di, op: &'static str) -> Result<usize> {
        dim.to_index(self.t.shape(), op)
    }

    fn rows<T: Elem, O>(
        &self,
        dim: usize,
        work: Work,
        op: O,
        grad: Grad,
        name: &'static str,
    ) -> Result<Tensor>
    where
        O: Operator<T>,
        O::Out: Elem,
    {
        along(self.t, dim, |t| {
            t.apply_op1(RowsOp::<T, O>::new(op, work, grad, name))
        })
    }

    fn reduced<T: Elem, O>(
        &self,
        dim: usize,
        op: O,
        grad: Grad,
        name: &'static str,
        keepdim: bool,
    ) -> Result<Tensor>
    where
        O: Operator<T>,
        O::Out: Elem,
    {
        let r = self.rows::<T, O>(dim, Work::Reduce, op, grad, name)?;
        if keepdim {
            Ok(r)
        } else {
            r.squeeze(dim)
        }
    }

    fn check_index_len(&self, dim: usize, op: &'static str) -> Result<()> {
        if self.t.dim(dim)? as u64 > u32::MAX as u64 + 1 {
            return Err(candle_core::Error::Msg(format!(
                "{op}: a dim of {} elements has indices past u32::MAX, the index type of the result",
                self.t.dim(dim)?
            )));
        }
        Ok(())
    }

    /// The inclusive cumulative sum along `dim`: output `i` sums inputs `0..=i`. f16 and
    /// bf16 accumulate in f32 and round each prefix once.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[1u32, 2, 3], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().cumsum(0)?.to_vec1::<u32>()?, [1, 3, 6]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn cumsum<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        let d = self.dim(dim, "cumsum")?;
        any_dtype!(
            self.t.dtype(),
            "cumsum",
            T,
            self.rows::<T, _>(
                d,
                Work::Scan(ScanKind::Inclusive),
                Sum,
                Grad::CumsumInclusive,
                "cufold-cumsum"
            )
        )
    }

    /// The exclusive cumulative sum along `dim`: output `i` sums inputs `0..i` (output 0 is
    /// zero).
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[1f64, 2., 3.], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().cumsum_exclusive(0)?.to_vec1::<f64>()?, [0., 1., 3.]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn cumsum_exclusive<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        let d = self.dim(dim, "cumsum_exclusive")?;
        any_dtype!(
            self.t.dtype(),
            "cumsum_exclusive",
            T,
            self.rows::<T, _>(
                d,
                Work::Scan(ScanKind::Exclusive),
                Sum,
                Grad::CumsumExclusive,
                "cufold-cumsum-exclusive"
            )
        )
    }

    /// The reverse (suffix) cumulative sum along `dim`: output `i` sums inputs `i..`.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[1f32, 2., 3.], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().cumsum_reverse(0)?.to_vec1::<f32>()?, [6., 5., 3.]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn cumsum_reverse<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        let d = self.dim(dim, "cumsum_reverse")?;
        // candle's flip takes contiguous tensors only.
        let flipped = self.t.contiguous()?.flip(&[d])?;
        flipped.cufold().cumsum(d)?.contiguous()?.flip(&[d])
    }

    /// The running maximum along `dim` (NaN propagates).
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[1i64, 5, 2, 7], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().cummax(0)?.to_vec1::<i64>()?, [1, 5, 5, 7]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn cummax<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        let d = self.dim(dim, "cummax")?;
        any_dtype!(
            self.t.dtype(),
            "cummax",
            T,
            self.rows::<T, _>(
                d,
                Work::Scan(ScanKind::Inclusive),
                Max,
                Grad::None,
                "cufold-cummax"
            )
        )
    }

    /// The running minimum along `dim` (NaN propagates).
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[3f32, 1., 2.], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().cummin(0)?.to_vec1::<f32>()?, [3., 1., 1.]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn cummin<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        let d = self.dim(dim, "cummin")?;
        any_dtype!(
            self.t.dtype(),
            "cummin",
            T,
            self.rows::<T, _>(
                d,
                Work::Scan(ScanKind::Inclusive),
                Min,
                Grad::None,
                "cufold-cummin"
            )
        )
    }

    /// The sum along `dim`, kept as a dim of size 1. f16 and bf16 accumulate in f32.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 2.], [3., 4.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().sum_keepdim(1)?.to_vec2::<f32>()?, [[3.], [7.]]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn sum_keepdim<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.sum_impl(dim, true)
    }

    /// The sum along `dim`, which is removed.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 2.], [3., 4.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().sum(0)?.to_vec1::<f32>()?, [4., 6.]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn sum<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.sum_impl(dim, false)
    }

    fn sum_impl<Di: Dim>(&self, dim: Di, keepdim: bool) -> Result<Tensor> {
        let d = self.dim(dim, "sum")?;
        any_dtype!(
            self.t.dtype(),
            "sum",
            T,
            self.reduced::<T, _>(d, Sum, Grad::Sum, "cufold-sum", keepdim)
        )
    }

    /// The maximum along `dim`, kept (NaN propagates; `-0.0` is below `0.0`).
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 9.], [3., 4.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().max_keepdim(1)?.to_vec2::<f32>()?, [[9.], [4.]]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn max_keepdim<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.extreme(dim, true, true)
    }

    /// The maximum along `dim`, which is removed.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1u8, 9], [3, 4]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().max(0)?.to_vec1::<u8>()?, [3, 9]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn max<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.extreme(dim, true, false)
    }

    /// The minimum along `dim`, kept.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 9.], [3., 4.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().min_keepdim(1)?.to_vec2::<f32>()?, [[1.], [3.]]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn min_keepdim<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.extreme(dim, false, true)
    }

    /// The minimum along `dim`, which is removed.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 9.], [3., 4.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().min(1)?.to_vec1::<f32>()?, [1., 3.]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn min<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.extreme(dim, false, false)
    }

    fn extreme<Di: Dim>(&self, dim: Di, max: bool, keepdim: bool) -> Result<Tensor> {
        let name = if max { "max" } else { "min" };
        let d = self.dim(dim, name)?;
        any_dtype!(self.t.dtype(), name, T, {
            if max {
                self.reduced::<T, _>(d, Max, Grad::Extreme, "cufold-max", keepdim)
            } else {
                self.reduced::<T, _>(d, Min, Grad::Extreme, "cufold-min", keepdim)
            }
        })
    }

    /// The index of the largest element along `dim`, kept, as `U32`: the lowest index on
    /// ties, the first NaN if there is one.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 9., 9.], [f32::NAN, 4., 5.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().argmax_keepdim(1)?.to_vec2::<u32>()?, [[1], [0]]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn argmax_keepdim<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.arg(dim, true, true)
    }

    /// The index of the largest element along `dim`, which is removed.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 9.], [5., 4.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().argmax(1)?.to_vec1::<u32>()?, [1, 0]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn argmax<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.arg(dim, true, false)
    }

    /// The index of the smallest element along `dim`, kept, as `U32`.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 0., 0.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().argmin_keepdim(1)?.to_vec2::<u32>()?, [[1]]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn argmin_keepdim<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.arg(dim, false, true)
    }

    /// The index of the smallest element along `dim`, which is removed.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 0.], [5., 4.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().argmin(0)?.to_vec1::<u32>()?, [0, 0]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn argmin<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.arg(dim, false, false)
    }

    fn arg<Di: Dim>(&self, dim: Di, max: bool, keepdim: bool) -> Result<Tensor> {
        let name = if max { "argmax" } else { "argmin" };
        let d = self.dim(dim, name)?;
        self.check_index_len(d, name)?;
        any_dtype!(self.t.dtype(), name, T, {
            if max {
                self.reduced::<T, _>(d, ArgIndex::<true>, Grad::None, "cufold-argmax", keepdim)
            } else {
                self.reduced::<T, _>(d, ArgIndex::<false>, Grad::None, "cufold-argmin", keepdim)
            }
        })
    }

    /// The mean along `dim`, kept, in the element type (float tensors).
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 2.], [3., 5.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().mean_keepdim(1)?.to_vec2::<f32>()?, [[1.5], [4.]]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn mean_keepdim<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.mean_impl(dim, true)
    }

    /// The mean along `dim`, which is removed.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f64, 2.], [3., 5.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().mean(0)?.to_vec1::<f64>()?, [2., 3.5]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn mean<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.mean_impl(dim, false)
    }

    fn mean_impl<Di: Dim>(&self, dim: Di, keepdim: bool) -> Result<Tensor> {
        let d = self.dim(dim, "mean")?;
        float_dtype!(
            self.t.dtype(),
            "mean",
            T,
            self.reduced::<T, _>(d, MeanOf, Grad::Mean, "cufold-mean", keepdim)
        )
    }

    /// The sample variance along `dim` (divided by `n - 1`, as candle's), kept, in the
    /// element type (float tensors), in one pass.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f32, 2., 3.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().var_keepdim(1)?.to_vec2::<f32>()?, [[1.]]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn var_keepdim<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.var_impl(dim, true)
    }

    /// The sample variance along `dim`, which is removed.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1f64, 3.], [2., 4.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().var(1)?.to_vec1::<f64>()?, [2., 2.]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn var<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.var_impl(dim, false)
    }

    fn var_impl<Di: Dim>(&self, dim: Di, keepdim: bool) -> Result<Tensor> {
        let d = self.dim(dim, "var")?;
        float_dtype!(
            self.t.dtype(),
            "var",
            T,
            self.reduced::<T, _>(d, VarOf, Grad::Var, "cufold-var", keepdim)
        )
    }

    /// `log(sum(exp(x)))` along `dim`, which is removed (as candle's `log_sum_exp`), in one
    /// pass ([`ops::LogSumExp`]).
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[1000f32, 1000.]], &candle_core::Device::Cpu)?;
    /// let v = x.cufold().log_sum_exp(1)?.to_vec1::<f32>()?;
    /// assert!((v[0] - (1000. + 2f32.ln())).abs() < 1e-3);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn log_sum_exp<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.lse_impl(dim, false)
    }

    /// `log(sum(exp(x)))` along `dim`, kept as a dim of size 1.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[0f64, 0.]], &candle_core::Device::Cpu)?;
    /// let v = x.cufold().log_sum_exp_keepdim(1)?.to_vec2::<f64>()?;
    /// assert!((v[0][0] - 2f64.ln()).abs() < 1e-15);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn log_sum_exp_keepdim<Di: Dim>(&self, dim: Di) -> Result<Tensor> {
        self.lse_impl(dim, true)
    }

    fn lse_impl<Di: Dim>(&self, dim: Di, keepdim: bool) -> Result<Tensor> {
        let d = self.dim(dim, "log_sum_exp")?;
        float_dtype!(
            self.t.dtype(),
            "log_sum_exp",
            T,
            self.reduced::<T, _>(d, LogSumExp, Grad::LogSumExp, "cufold-log-sum-exp", keepdim)
        )
    }

    /// Any cufold operator along `dim`, one result per row, kept as a dim of size 1. The
    /// tensor's dtype must be `T`'s and the operator's output a candle dtype.
    ///
    /// ```
    /// use cufold_candle::TensorExt;
    /// // An operator of your own, written once in Rust (its CUDA half is generated).
    /// #[cufold::op(identity = 0.0, commutative)]
    /// fn add(a: f64, b: f64) -> f64 { a + b }
    ///
    /// let x = candle_core::Tensor::new(&[[1f64, -2.], [-3., 4.]], &candle_core::Device::Cpu)?;
    /// assert_eq!(x.cufold().reduce_keepdim::<f64, _>(1, add)?.to_vec2::<f64>()?, [[-1.], [1.]]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn reduce_keepdim<T: Elem, O>(&self, dim: impl Dim, op: O) -> Result<Tensor>
    where
        O: Operator<T>,
        O::Out: Elem,
    {
        let d = self.dim(dim, "reduce")?;
        self.expect_dtype::<T>("reduce")?;
        self.reduced::<T, O>(d, op, Grad::None, "cufold-reduce", true)
    }

    /// Any cufold operator scanned along `dim` (inclusive or exclusive).
    ///
    /// ```
    /// use cufold::ScanKind;
    /// use cufold_candle::TensorExt;
    /// let x = candle_core::Tensor::new(&[[2f64, 3., 4.]], &candle_core::Device::Cpu)?;
    /// let p = x.cufold().scan::<f64, _>(1, cufold::ops::Prod, ScanKind::Inclusive)?;
    /// assert_eq!(p.to_vec2::<f64>()?, [[2., 6., 24.]]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn scan<T: Elem, O>(&self, dim: impl Dim, op: O, kind: ScanKind) -> Result<Tensor>
    where
        O: Operator<T>,
        O::Out: Elem,
    {
        let d = self.dim(dim, "scan")?;
        self.expect_dtype::<T>("scan")?;
        self.rows::<T, O>(d, Work::Scan(kind), op, Grad::None, "cufold-scan")
    }

    /// One result per segment `offsets[i]..offsets[i + 1]` of this 1-D tensor (`offsets`: a
    /// 1-D `U32` or `I64` tensor on the same device, `m + 1` values for `m` segments). An empty
    /// segment gets the operator's empty value (`Sum`: 0) or, for an operator without one
    /// (`Max`, ...), zero bits. On the CPU offsets are checked (non-decreasing, within the
    /// input) and bad ones are an error; on the GPU they are not read back, and a segment
    /// whose offsets decrease or pass the end is skipped (its output stays zero).
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use cufold_candle::TensorExt;
    /// let x = Tensor::new(&[3f32, 1., 4., 1., 5.], &Device::Cpu)?;
    /// let offsets = Tensor::new(&[0u32, 2, 2, 5], &Device::Cpu)?;
    /// let s = x.cufold().segment_reduce::<f32, _>(&offsets, cufold::ops::Sum)?;
    /// assert_eq!(s.to_vec1::<f32>()?, [4., 0., 10.]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn segment_reduce<T: Elem, O>(&self, offsets: &Tensor, op: O) -> Result<Tensor>
    where
        O: Operator<T>,
        O::Out: Elem,
    {
        self.expect_dtype::<T>("segment_reduce")?;
        exec::segment_reduce::<T, O>(self.t, offsets, op)
    }

    /// The runs of equal consecutive keys of `keys` (a 1-D integer tensor, `U8`, `U32`, `I32`
    /// or `I64`, as long as this 1-D tensor): each run's key, the operator's result over its
    /// values, and its length (`I64`). On a GPU this waits for the device once, to learn the
    /// number of runs.
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use cufold_candle::TensorExt;
    /// let keys = Tensor::new(&[7u32, 7, 2, 2, 2, 7], &Device::Cpu)?;
    /// let x = Tensor::new(&[1f32, 2., 3., 4., 5., 6.], &Device::Cpu)?;
    /// let (k, s, n) = x.cufold().reduce_by_key::<f32, _>(&keys, cufold::ops::Sum)?;
    /// assert_eq!(k.to_vec1::<u32>()?, [7, 2, 7]);
    /// assert_eq!(s.to_vec1::<f32>()?, [3., 12., 6.]);
    /// assert_eq!(n.to_vec1::<i64>()?, [2, 3, 1]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn reduce_by_key<T: Elem, O>(
        &self,
        keys: &Tensor,
        op: O,
    ) -> Result<(Tensor, Tensor, Tensor)>
    where
        O: Operator<T>,
        O::Out: Elem,
    {
        self.expect_dtype::<T>("reduce_by_key")?;
        with_dtype!(keys.dtype(), "reduce_by_key keys", K,
            [U8 => u8, U32 => u32, I32 => i32, I64 => i64],
            exec::reduce_by_key::<K, T, O>(keys, self.t, op))
    }

    fn expect_dtype<T: Elem>(&self, op: &'static str) -> Result<()> {
        if self.t.dtype() != T::DTYPE {
            return Err(candle_core::Error::UnexpectedDType {
                msg: op,
                expected: T::DTYPE,
                got: self.t.dtype(),
            });
        }
        Ok(())
    }
}
