//! Run-time parameters: the bytes of an operator's (or a map's) CUDA struct, which every
//! kernel receives as an argument, so that one compiled kernel serves every value of a type.

use crate::element::DeviceValue;

/// The most bytes of run-time parameters one operator may carry (a kernel's arguments are
/// limited to 4 KiB on many devices; cufold keeps room for its own).
pub const MAX_PARAM_BYTES: usize = 1024;

/// An operator's or a map's run-time parameters: the bytes of its CUDA struct, as C++ lays
/// it out, and their alignment.
///
/// Kernels receive these bytes as an argument and build the operator from them, so a new
/// value of a parameter (a scale, a location, a hyperparameter) reuses the compiled kernel:
/// only the type is compiled into the source. An operator without run-time parameters
/// returns [`OpParams::none`] and its CUDA struct is default-constructed, as before.
///
/// The CUDA struct of an operator with parameters must have exactly the layout of the
/// Rust value given to [`OpParams::of`] (what `#[cufold::op]` and `#[cufold::transform]`
/// generate: the C++ struct derives from the parameters' C++ twin and adds no data
/// members). Kernels `static_assert` that the sizes agree.
///
/// ```
/// use cufold::ops::{Affine, OpParams};
/// let p = OpParams::of(&Affine { a: 2.0f32, b: 1.0 });
/// assert_eq!((p.bytes().len(), p.align()), (8, 4));
/// assert!(OpParams::none().is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OpParams {
    bytes: Vec<u8>,
    align: usize,
}

impl Default for OpParams {
    fn default() -> Self {
        OpParams::none()
    }
}

impl OpParams {
    /// No run-time parameters: the CUDA struct is default-constructed in the kernel.
    ///
    /// ```
    /// assert!(cufold::ops::OpParams::none().bytes().is_empty());
    /// ```
    pub fn none() -> Self {
        OpParams {
            bytes: Vec::new(),
            align: 1,
        }
    }

    /// The bytes of `value`, whose C++ twin is the operator's CUDA struct (or what it
    /// derives from). `P` must have no padding ([`DeviceValue::DENSE`]): a type with padding
    /// is a compile-time error where this is instantiated.
    ///
    /// ```
    /// let p = cufold::ops::OpParams::of(&1.5f64);
    /// assert_eq!(p.bytes(), 1.5f64.to_ne_bytes());
    /// ```
    pub fn of<P: DeviceValue>(value: &P) -> Self {
        const {
            assert!(
                P::DENSE,
                "cufold: run-time parameters must have no padding bytes (DeviceValue::DENSE): \
                 reorder the fields or add explicit padding fields"
            )
        };
        let size = std::mem::size_of::<P>();
        // SAFETY: `P::DENSE` says every byte of a `P` belongs to a field of a number type, so
        // all `size` bytes behind the reference are initialised.
        let bytes = unsafe { std::slice::from_raw_parts(value as *const P as *const u8, size) };
        OpParams {
            bytes: bytes.to_vec(),
            align: std::mem::align_of::<P>(),
        }
    }

    /// Whether there are no run-time parameters.
    ///
    /// ```
    /// assert!(!cufold::ops::OpParams::of(&3u32).is_none());
    /// ```
    pub fn is_none(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes (empty for [`OpParams::none`]).
    ///
    /// ```
    /// assert_eq!(cufold::ops::OpParams::of(&7u8).bytes(), [7]);
    /// ```
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The alignment of the C++ struct.
    ///
    /// ```
    /// assert_eq!(cufold::ops::OpParams::of(&1.0f64).align(), 8);
    /// ```
    pub fn align(&self) -> usize {
        self.align
    }

    /// The parameters of the C++ struct `{ A a; B b; }` made of two parts, laid out as C++
    /// does (a part without parameters is an empty struct: one byte); [`OpParams::none`]
    /// when neither part has any. This is how [`Mapped`](super::Mapped) (a map, then an
    /// operator) passes both.
    ///
    /// ```
    /// use cufold::ops::OpParams;
    /// let p = OpParams::pair(&OpParams::of(&1.0f64), &OpParams::none());
    /// assert_eq!((p.bytes().len(), p.align()), (16, 8)); // 8 bytes, 1 empty byte, padding
    /// assert!(OpParams::pair(&OpParams::none(), &OpParams::none()).is_none());
    /// ```
    pub fn pair(a: &OpParams, b: &OpParams) -> OpParams {
        if a.is_none() && b.is_none() {
            return OpParams::none();
        }
        let part = |p: &OpParams| {
            if p.is_none() {
                (vec![0u8], 1)
            } else {
                (p.bytes.clone(), p.align)
            }
        };
        let ((mut bytes, align_a), (tail, align_b)) = (part(a), part(b));
        bytes.resize(bytes.len().next_multiple_of(align_b), 0);
        bytes.extend_from_slice(&tail);
        let align = align_a.max(align_b);
        bytes.resize(bytes.len().next_multiple_of(align), 0);
        OpParams { bytes, align }
    }
}

/// The kernel argument that carries an operator's parameters (kernels/ops.cuh's
/// `cf::OpBytes<N>`, of which the driver reads `round_up(N, 16)` bytes).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub(crate) struct ParamBlob(pub(crate) [u8; MAX_PARAM_BYTES]);

// SAFETY: plain bytes with no pointers; the kernel reads at most `MAX_PARAM_BYTES` of them.
unsafe impl cudarc::driver::DeviceRepr for ParamBlob {}

impl ParamBlob {
    /// The blob for `params`, or an error when they are too large.
    pub(crate) fn new(params: &OpParams, name: fn() -> String) -> crate::Result<Box<ParamBlob>> {
        let n = params.bytes().len();
        if n > MAX_PARAM_BYTES {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidConfig,
                format!(
                    "{} carries {n} bytes of run-time parameters, more than the {MAX_PARAM_BYTES} \
                     a kernel argument may hold",
                    name()
                ),
            ));
        }
        let mut blob = Box::new(ParamBlob([0; MAX_PARAM_BYTES]));
        blob.0[..n].copy_from_slice(params.bytes());
        Ok(blob)
    }

    /// The blob for `params` of a new value of an operator whose kernel was compiled for
    /// parameters of `compiled` bytes (an error if the sizes differ).
    pub(crate) fn for_kernel(
        params: &OpParams,
        compiled: usize,
        name: fn() -> String,
    ) -> crate::Result<Box<ParamBlob>> {
        if params.bytes().len() != compiled {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidConfig,
                format!(
                    "{}: this value's run-time parameters take {} bytes, the compiled kernel's {compiled}",
                    name(),
                    params.bytes().len()
                ),
            ));
        }
        ParamBlob::new(params, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_follow_cpp_layout() {
        // { float a; } then { double b; }: b at 8, size 16.
        let p = OpParams::pair(&OpParams::of(&1.0f32), &OpParams::of(&2.0f64));
        assert_eq!((p.bytes().len(), p.align()), (16, 8));
        assert_eq!(&p.bytes()[8..], 2.0f64.to_ne_bytes());
        // An empty part first: one byte, then the other at its alignment.
        let p = OpParams::pair(&OpParams::none(), &OpParams::of(&3u32));
        assert_eq!((p.bytes().len(), p.align()), (8, 4));
        assert_eq!(&p.bytes()[4..], 3u32.to_ne_bytes());
        // Nested pairs, as Mapped<F, Mapped<G, O>>.
        let inner = OpParams::pair(&OpParams::of(&1u8), &OpParams::none());
        let outer = OpParams::pair(&OpParams::of(&1.0f64), &inner);
        assert_eq!((outer.bytes().len(), outer.align()), (16, 8));
    }
}
