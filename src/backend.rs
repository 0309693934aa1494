//! Host data, reduced or scanned on whichever backend the machine has.

use crate::cpu::Cpu;
use crate::element::DeviceValue;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::ops::Operator;
use crate::scan::ScanKind;

/// Where reductions of host data run: a GPU if one is usable, else the CPU.
///
/// ```
/// let b = cufold::Backend::auto();
/// println!("{}", b.describe());
/// assert_eq!(b.reduce(&[5i32, 7], cufold::ops::Max)?, 7);
/// # Ok::<(), cufold::Error>(())
/// ```
#[derive(Clone, Debug)]
pub enum Backend {
    /// CUDA device 0's default stream.
    Gpu(Gpu),
    /// All CPU cores.
    Cpu(Cpu),
}

impl Backend {
    /// The GPU (device 0) if a driver, NVRTC and a device are present, else the CPU. Never
    /// panics. [`Gpu::open`] says why a GPU is not usable.
    ///
    /// ```
    /// let b = cufold::Backend::auto();
    /// # let _ = b;
    /// ```
    pub fn auto() -> Backend {
        match Gpu::open(0) {
            Ok(gpu) => Backend::Gpu(gpu),
            Err(_) => Backend::Cpu(Cpu::new()),
        }
    }

    /// Reduces host data: on the GPU (after an upload) or on the CPU. Both compute the same
    /// tree.
    ///
    /// ```
    /// let s = cufold::Backend::Cpu(cufold::Cpu::new()).reduce(&[1u32, 2, 3], cufold::ops::Sum)?;
    /// assert_eq!(s, 6);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce<T: DeviceValue, O: Operator<T>>(&self, x: &[T], op: O) -> Result<O::Out> {
        match self {
            Backend::Gpu(g) => g.reduce_host(x, op),
            Backend::Cpu(c) => c.reduce(x, op),
        }
    }

    /// Scans host data: on the GPU (upload, scan, download) or on the CPU. Both follow the
    /// same canonical grouping.
    ///
    /// ```
    /// use cufold::{ops::Sum, Backend, Cpu, ScanKind};
    /// let s = Backend::Cpu(Cpu::new()).scan(&[1i64, 2, 3], Sum, ScanKind::Inclusive)?;
    /// assert_eq!(s, [1, 3, 6]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        match self {
            Backend::Gpu(g) => g.scan_host(x, op, kind),
            Backend::Cpu(c) => c.scan(x, op, kind),
        }
    }

    /// Scans host data into `out` (as long as `x`): on the GPU (upload, scan, download into
    /// `out`) or on the CPU, with no output vector allocated. Both follow the same canonical
    /// grouping.
    ///
    /// Errors: `out` of another length than `x`
    /// ([`ErrorKind::LengthMismatch`](crate::ErrorKind::LengthMismatch)), an operator that
    /// cannot be scanned ([`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig)).
    ///
    /// ```
    /// use cufold::{ops::Max, Backend, Cpu, ScanKind};
    /// let mut running_max = [0i32; 4];
    /// Backend::Cpu(Cpu::new()).scan_into(&[3, 1, 4, 1], &mut running_max, Max, ScanKind::Inclusive)?;
    /// assert_eq!(running_max, [3, 3, 4, 4]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        match self {
            Backend::Gpu(g) => g.scan_host_into(x, out, op, kind),
            Backend::Cpu(c) => c.scan_into(x, out, op, kind),
        }
    }

    /// A line saying which backend this is ("GPU: NVIDIA H100 80GB HBM3", "CPU: 8 threads").
    ///
    /// ```
    /// assert!(cufold::Backend::Cpu(cufold::Cpu::with_threads(2)).describe().starts_with("CPU"));
    /// ```
    pub fn describe(&self) -> String {
        match self {
            Backend::Gpu(g) => format!("GPU: {}", g.device_name()),
            Backend::Cpu(c) => format!("CPU: {} threads", c.threads()),
        }
    }
}
