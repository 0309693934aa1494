//! The crate's one error type.

use std::fmt;

/// What went wrong, broadly: [`Error::kind`] returns one of these.
///
/// The list may grow, so match it with a wildcard arm.
///
/// ```
/// let err = cufold::Cpu::new().reduce(&[] as &[f32], cufold::ops::Max).unwrap_err();
/// assert_eq!(err.kind(), cufold::ErrorKind::EmptyInput);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No CUDA driver (libcuda) or no NVRTC library could be loaded, or no device exists, or
    /// the ones found cannot work together (an NVRTC of a newer CUDA major version than the
    /// driver, or one that cannot compile for the device: see [`crate::Gpu::open`]); for
    /// `dist::NcclGroup`, no libnccl under a name cudarc loads. The message says what to
    /// install or link; the CPU backend works regardless.
    NoCuda,
    /// A CUDA driver call failed (out of device memory, a launch failure, ...).
    Driver,
    /// NVRTC rejected the generated kernel source; [`Error::compile_log`] has its log.
    Compile,
    /// The operator has no value for an empty input (min, max, argmax, means).
    EmptyInput,
    /// An output buffer or a second input has the wrong length.
    LengthMismatch,
    /// The input is longer than the library supports.
    TooLarge,
    /// A configuration value is out of range (a block size that is not a power of two, ...).
    InvalidConfig,
    /// Reading or writing the on-disk kernel cache failed (only reported when it matters).
    Io,
    /// A distributed call ([`crate::dist`]) could not agree: ranks disagree on the call, its
    /// length or its operator, another rank failed, or a rank did not join in time.
    Collective,
}

/// The error type of every fallible cufold call.
///
/// Its `Display` says what happened and what to do about it; [`Error::kind`] classifies it.
/// For a kernel that NVRTC refused, the message holds the compiler log and the numbered
/// generated source around each line the log names.
///
/// ```
/// let err = cufold::Cpu::new().reduce(&[] as &[f32], cufold::ops::ArgMax).unwrap_err();
/// println!("{err}"); // "ArgMax has no value for an empty input ..."
/// # Ok::<(), cufold::Error>(())
/// ```
pub struct Error {
    kind: ErrorKind,
    message: String,
    compile_log: Option<String>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            compile_log: None,
            source: None,
        }
    }

    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    pub(crate) fn compile(message: String, log: String) -> Self {
        Error {
            kind: ErrorKind::Compile,
            message,
            compile_log: Some(log),
            source: None,
        }
    }

    pub(crate) fn driver(what: &str, e: cudarc::driver::DriverError) -> Self {
        let hint = if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            " (the device is out of memory: free buffers or reduce in smaller pieces)"
        } else {
            ""
        };
        Error::new(
            ErrorKind::Driver,
            format!("CUDA driver error while {what}: {e:?}{hint}"),
        )
        .with_source(e)
    }

    /// The broad class of this error.
    ///
    /// ```
    /// let err = cufold::Cpu::new().reduce(&[] as &[i32], cufold::ops::Min).unwrap_err();
    /// assert_eq!(err.kind(), cufold::ErrorKind::EmptyInput);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// NVRTC's log, for an error of kind [`ErrorKind::Compile`].
    ///
    /// ```
    /// let err = cufold::Cpu::new().reduce(&[] as &[f64], cufold::ops::Mean).unwrap_err();
    /// assert!(err.compile_log().is_none());
    /// ```
    pub fn compile_log(&self) -> Option<&str> {
        self.compile_log.as_deref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?}): {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e.as_ref() as &(dyn std::error::Error + 'static))
    }
}

/// A cudarc driver error met in the caller's own code (a copy, an allocation) becomes an
/// [`ErrorKind::Driver`] error, so that `?` works on cudarc calls in functions that return
/// [`cufold::Result`](crate::Result).
///
/// ```no_run
/// fn total(samples: &[f32]) -> cufold::Result<f32> {
///     let gpu = cufold::Gpu::open(0)?;
///     let x = gpu.stream().clone_htod(samples)?; // a cudarc::driver::DriverError
///     gpu.reduce(&x, cufold::ops::Sum)
/// }
/// # let _ = total(&[1.0]);
/// ```
impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::driver("running a cudarc call", e)
    }
}

/// `Result<T, cufold::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;
