//! Host data, reduced or scanned on whichever backend the machine has.

use crate::cpu::Cpu;
use crate::element::{DeviceValue, Element};
use crate::error::Result;
use crate::gpu::Gpu;
use crate::monte_carlo::{MonteCarlo, Sample};
use crate::ops::{Operator, Transform};
use crate::scan::ScanKind;
use crate::segment::{ByKey, Rows};

/// Where reductions of host data run: a GPU if one is usable, else the CPU.
///
/// Every primitive is here, with the names, arguments and results of [`Cpu`]'s methods:
/// host slices in, a value or a `Vec` out, and an `_into` form that writes into a slice
/// where the result is one value per position or per row. Code written against `Backend`
/// runs on either, with the same bits for operators built from `+ - * /`, min, max and
/// comparisons. On the GPU each call uploads its inputs, runs the device form on the
/// handle's stream and downloads the result (one wait); data that already lives on the GPU
/// goes to [`Gpu`]'s device forms instead ([`Gpu::reduce`], [`Gpu::segment_reducer`], ...).
///
/// | primitive | allocating | into a slice |
/// |---|---|---|
/// | whole array | [`reduce`](Backend::reduce), [`scan`](Backend::scan) | [`scan_into`](Backend::scan_into) |
/// | rows of a matrix | [`reduce_rows`](Backend::reduce_rows), [`scan_rows`](Backend::scan_rows) | [`reduce_rows_into`](Backend::reduce_rows_into), [`scan_rows_into`](Backend::scan_rows_into) |
/// | segments by offsets | [`reduce_segments`](Backend::reduce_segments), [`scan_segments`](Backend::scan_segments) | [`scan_segments_into`](Backend::scan_segments_into) |
/// | runs of equal keys | [`reduce_by_key`](Backend::reduce_by_key), [`scan_by_key`](Backend::scan_by_key) | [`scan_by_key_into`](Backend::scan_by_key_into) |
/// | Monte Carlo | [`monte_carlo`](Backend::monte_carlo) | |
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

    /// One result per row of the matrix `rows` in `x`: [`Cpu::reduce_rows`], or the GPU's
    /// segmented reduction (the same bits).
    ///
    /// ```
    /// use cufold::{ops, segment::Rows, Backend, Cpu};
    /// let b = Backend::Cpu(Cpu::new());
    /// assert_eq!(b.reduce_rows(&[1, 2, 3, 4, 5, 6], Rows::new(2, 3), ops::Max)?, [3, 6]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_rows<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        op: O,
    ) -> Result<Vec<O::Out>> {
        match self {
            Backend::Gpu(g) => {
                let len = crate::segment::rows_outputs::<O::Out>(&rows, x.len(), 1)?;
                let mut out = crate::segment::try_zeroed::<O::Out>(len)?;
                g.reduce_rows_host_into(x, rows, &mut out, op)?;
                Ok(out)
            }
            Backend::Cpu(c) => c.reduce_rows(x, rows, op),
        }
    }

    /// [`Backend::reduce_rows`] into `out` (one value a row): [`Cpu::reduce_rows_into`].
    ///
    /// ```
    /// use cufold::{ops, segment::Rows, Backend, Cpu};
    /// let mut sums = [0u32; 2];
    /// Backend::Cpu(Cpu::new()).reduce_rows_into(&[1, 2, 3, 4], Rows::new(2, 2), &mut sums, ops::Sum)?;
    /// assert_eq!(sums, [3, 7]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_rows_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        out: &mut [O::Out],
        op: O,
    ) -> Result<()> {
        match self {
            Backend::Gpu(g) => g.reduce_rows_host_into(x, rows, out, op),
            Backend::Cpu(c) => c.reduce_rows_into(x, rows, out, op),
        }
    }

    /// One result per segment `offsets[i]..offsets[i + 1]` of `x` (`None` for an empty
    /// segment of an operator without an empty value): [`Cpu::reduce_segments`].
    ///
    /// ```
    /// use cufold::{ops, Backend, Cpu};
    /// let b = Backend::Cpu(Cpu::new());
    /// let m = b.reduce_segments(&[3, 1, 4, 1, 5], &[0, 2, 2, 5], ops::Max)?;
    /// assert_eq!(m, [Some(3), None, Some(5)]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_segments<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        offsets: &[u64],
        op: O,
    ) -> Result<Vec<Option<O::Out>>> {
        match self {
            Backend::Gpu(g) => g.reduce_segments_host(x, offsets, op),
            Backend::Cpu(c) => c.reduce_segments(x, offsets, op),
        }
    }

    /// The scan of each row of the matrix `rows` in `x`, rows one after another
    /// (`rows * cols` values): [`Cpu::scan_rows`].
    ///
    /// ```
    /// use cufold::{ops, segment::Rows, Backend, Cpu, ScanKind};
    /// let b = Backend::Cpu(Cpu::new());
    /// let y = b.scan_rows(&[1, 2, 3, 4], Rows::new(2, 2), ops::Sum, ScanKind::Inclusive)?;
    /// assert_eq!(y, [1, 3, 3, 7]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_rows<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        match self {
            Backend::Gpu(g) => {
                let len = crate::segment::rows_outputs::<O::Out>(&rows, x.len(), rows.cols)?;
                let mut out = crate::segment::try_zeroed::<O::Out>(len)?;
                g.scan_rows_host_into(x, rows, &mut out, op, kind)?;
                Ok(out)
            }
            Backend::Cpu(c) => c.scan_rows(x, rows, op, kind),
        }
    }

    /// [`Backend::scan_rows`] into `out` (`rows * cols` values): [`Cpu::scan_rows_into`].
    ///
    /// ```
    /// use cufold::{ops, segment::Rows, Backend, Cpu, ScanKind};
    /// let mut y = [0; 4];
    /// Backend::Cpu(Cpu::new()).scan_rows_into(&[1, 2, 3, 4], Rows::new(2, 2), &mut y, ops::Sum, ScanKind::Exclusive)?;
    /// assert_eq!(y, [0, 1, 0, 3]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_rows_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        match self {
            Backend::Gpu(g) => g.scan_rows_host_into(x, rows, out, op, kind),
            Backend::Cpu(c) => c.scan_rows_into(x, rows, out, op, kind),
        }
    }

    /// The scan of every segment `offsets[i]..offsets[i + 1]` of `x`, at the same positions
    /// (as long as `x`; positions outside every segment hold zeros): [`Cpu::scan_segments`].
    ///
    /// ```
    /// use cufold::{ops, Backend, Cpu, ScanKind};
    /// let b = Backend::Cpu(Cpu::new());
    /// let y = b.scan_segments(&[1, 2, 3, 4, 5], &[0, 2, 5], ops::Sum, ScanKind::Inclusive)?;
    /// assert_eq!(y, [1, 3, 3, 7, 12]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_segments<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        offsets: &[u64],
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        match self {
            Backend::Gpu(g) => {
                let mut out = crate::segment::try_zeroed::<O::Out>(x.len())?;
                g.scan_segments_host_into(x, offsets, &mut out, op, kind)?;
                Ok(out)
            }
            Backend::Cpu(c) => c.scan_segments(x, offsets, op, kind),
        }
    }

    /// [`Backend::scan_segments`] into `out` (as long as `x`; positions outside every
    /// segment are left as they are): [`Cpu::scan_segments_into`].
    ///
    /// ```
    /// use cufold::{ops, Backend, Cpu, ScanKind};
    /// let mut y = [-1; 5];
    /// Backend::Cpu(Cpu::new()).scan_segments_into(&[1, 2, 3, 4, 5], &[1, 3], &mut y, ops::Sum, ScanKind::Inclusive)?;
    /// assert_eq!(y, [-1, 2, 5, -1, -1]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_segments_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        offsets: &[u64],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        match self {
            Backend::Gpu(g) => g.scan_segments_host_into(x, offsets, out, op, kind),
            Backend::Cpu(c) => c.scan_segments_into(x, offsets, out, op, kind),
        }
    }

    /// One key, result and length per run of equal consecutive `keys` over the matching
    /// `values`: [`Cpu::reduce_by_key`].
    ///
    /// ```
    /// use cufold::{ops, Backend, Cpu};
    /// let by = Backend::Cpu(Cpu::new()).reduce_by_key(&[7u8, 7, 2], &[1.0f32, 2.0, 5.0], ops::Sum)?;
    /// assert_eq!((by.keys, by.values, by.lengths), (vec![7, 2], vec![3.0, 5.0], vec![2, 1]));
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce_by_key<K: Element, T: DeviceValue, O: Operator<T>>(
        &self,
        keys: &[K],
        values: &[T],
        op: O,
    ) -> Result<ByKey<K, O::Out>> {
        match self {
            Backend::Gpu(g) => g.reduce_by_key_host(keys, values, op),
            Backend::Cpu(c) => c.reduce_by_key(keys, values, op),
        }
    }

    /// The scan of `values`, restarting at each run of equal consecutive `keys`:
    /// [`Cpu::scan_by_key`].
    ///
    /// ```
    /// use cufold::{ops, Backend, Cpu, ScanKind};
    /// let b = Backend::Cpu(Cpu::new());
    /// let y = b.scan_by_key(&[5u32, 5, 6], &[1, 2, 3], ops::Sum, ScanKind::Inclusive)?;
    /// assert_eq!(y, [1, 3, 3]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_by_key<K: Element, T: DeviceValue, O: Operator<T>>(
        &self,
        keys: &[K],
        values: &[T],
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        match self {
            Backend::Gpu(g) => {
                let mut out = crate::segment::try_zeroed::<O::Out>(values.len())?;
                g.scan_by_key_host_into(keys, values, &mut out, op, kind)?;
                Ok(out)
            }
            Backend::Cpu(c) => c.scan_by_key(keys, values, op, kind),
        }
    }

    /// [`Backend::scan_by_key`] into `out` (as long as `values`): [`Cpu::scan_by_key_into`].
    ///
    /// ```
    /// use cufold::{ops, Backend, Cpu, ScanKind};
    /// let mut y = [0; 3];
    /// Backend::Cpu(Cpu::new()).scan_by_key_into(&[5u32, 5, 6], &[1, 2, 3], &mut y, ops::Sum, ScanKind::Exclusive)?;
    /// assert_eq!(y, [0, 1, 0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_by_key_into<K: Element, T: DeviceValue, O: Operator<T>>(
        &self,
        keys: &[K],
        values: &[T],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        match self {
            Backend::Gpu(g) => g.scan_by_key_host_into(keys, values, out, op, kind),
            Backend::Cpu(c) => c.scan_by_key_into(keys, values, out, op, kind),
        }
    }

    /// Draws `n` samples of `mc`, maps and reduces them along the canonical tree:
    /// [`Cpu::monte_carlo`], or the GPU's fused kernel (the same draws and tree).
    ///
    /// ```
    /// use cufold::{monte_carlo::MonteCarlo, ops::Identity, Backend, Cpu};
    /// let est = Backend::Cpu(Cpu::new()).monte_carlo(&MonteCarlo::<f32, _>::new(Identity), 4096)?;
    /// assert!((est.mean - 0.5).abs() < 0.05);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn monte_carlo<S: Sample, F: Transform<S>, O: Operator<F::Out>>(
        &self,
        mc: &MonteCarlo<S, F, O>,
        n: u64,
    ) -> Result<O::Out> {
        match self {
            Backend::Gpu(g) => g.monte_carlo(mc, n),
            Backend::Cpu(c) => c.monte_carlo(mc, n),
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
