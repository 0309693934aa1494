//! Host slices on the GPU: the segmented primitives' upload, launch and download, for
//! [`Backend`](crate::Backend)'s GPU arm. Each makes the CPU backend's checks on the host
//! first (the same errors, before any copy), then runs the device form, and waits for the
//! stream once, at the download.

use super::by_key::{check_keys, ByKey};
use super::cpu::{check_offsets, try_alloc};
use super::plan::{check_rows, check_rows_out};
use super::Rows;
use crate::element::{DeviceValue, Element};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::ops::check::check_scan_lengths;
use crate::ops::Operator;
use crate::scan::ScanKind;
use cudarc::driver::CudaSlice;

impl Gpu {
    /// `x` on the device (an empty slice as an empty buffer).
    fn upload<T: DeviceValue>(&self, x: &[T]) -> Result<CudaSlice<T>> {
        if x.is_empty() {
            return self.alloc(0);
        }
        self.stream()
            .clone_htod(x)
            .map_err(|e| Error::driver("copying an input to the device", e))
    }

    /// `dev` into `out` (as long), after the work enqueued before it.
    fn download<V: DeviceValue>(&self, dev: &CudaSlice<V>, out: &mut [V]) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        let stream = self.stream();
        stream
            .memcpy_dtoh(dev, out)
            .map_err(|e| Error::driver("copying the results to the host", e))?;
        stream
            .synchronize()
            .map_err(|e| Error::driver("waiting for the results", e))
    }

    /// [`Cpu::reduce_rows_into`](crate::Cpu::reduce_rows_into) on the GPU.
    pub(crate) fn reduce_rows_host_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        out: &mut [O::Out],
        op: O,
    ) -> Result<()> {
        let need = check_rows::<O::Out>(&rows, x.len(), 1)?;
        check_rows_out(&rows, need, out.len())?;
        let reducer = self.segment_reducer::<T, O>(op)?;
        if need == 0 {
            return Ok(());
        }
        let dx = self.upload(x)?;
        let mut dout = self.alloc::<O::Out>(need)?;
        reducer.reduce_rows_into(&dx, rows, &mut dout)?;
        self.download(&dout, out)
    }

    /// [`Cpu::reduce_segments`](crate::Cpu::reduce_segments) on the GPU: `None` for an empty
    /// segment of an operator without an empty value.
    pub(crate) fn reduce_segments_host<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        offsets: &[u64],
        op: O,
    ) -> Result<Vec<Option<O::Out>>> {
        check_offsets(offsets, x.len())?;
        let segments = offsets.len() - 1;
        let mut host = try_zeroed::<O::Out>(segments)?;
        let reducer = self.segment_reducer::<T, O>(op)?;
        if segments > 0 {
            let (dx, doffs) = (self.upload(x)?, self.upload(offsets)?);
            let mut dout = self.alloc::<O::Out>(segments)?;
            reducer.reduce_segments_into(&dx, &doffs, &mut dout)?;
            self.download(&dout, &mut host)?;
        }
        Ok(host
            .into_iter()
            .zip(offsets.windows(2))
            .map(|(v, w)| (w[0] < w[1] || !O::EMPTY_IS_ERROR).then_some(v))
            .collect())
    }

    /// [`Cpu::scan_rows_into`](crate::Cpu::scan_rows_into) on the GPU.
    pub(crate) fn scan_rows_host_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        rows: Rows,
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        let need = check_rows::<O::Out>(&rows, x.len(), rows.cols)?;
        check_rows_out(&rows, need, out.len())?;
        let scanner = self.segment_scanner::<T, O>(op)?;
        if need == 0 {
            return Ok(());
        }
        let dx = self.upload(x)?;
        let mut dout = self.alloc::<O::Out>(need)?;
        scanner.scan_rows_into(&dx, rows, &mut dout, kind)?;
        self.download(&dout, out)
    }

    /// [`Cpu::scan_segments_into`](crate::Cpu::scan_segments_into) on the GPU: positions
    /// outside every segment keep what `out` held.
    pub(crate) fn scan_segments_host_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        offsets: &[u64],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        check_offsets(offsets, x.len())?;
        check_scan_lengths(x.len(), out.len())?;
        let scanner = self.segment_scanner::<T, O>(op)?;
        if x.is_empty() || offsets.len() < 2 {
            return Ok(());
        }
        let (dx, doffs) = (self.upload(x)?, self.upload(offsets)?);
        // The output starts as `out`, so that what no segment covers comes back unchanged.
        let mut dout = self.upload(out)?;
        scanner.scan_segments_into(&dx, &doffs, &mut dout, kind)?;
        self.download(&dout, out)
    }

    /// [`Cpu::reduce_by_key`](crate::Cpu::reduce_by_key) on the GPU.
    pub(crate) fn reduce_by_key_host<K: Element, T: DeviceValue, O: Operator<T>>(
        &self,
        keys: &[K],
        values: &[T],
        op: O,
    ) -> Result<ByKey<K, O::Out>> {
        check_keys(keys.len(), values.len())?;
        let reducer = self.segment_reducer::<T, O>(op)?;
        if keys.is_empty() {
            return Ok(ByKey {
                keys: Vec::new(),
                values: Vec::new(),
                lengths: Vec::new(),
            });
        }
        let dev = reducer.reduce_by_key(&self.upload(keys)?, &self.upload(values)?)?;
        let fetch = |what: &'static str| move |e| Error::driver(what, e);
        let stream = self.stream();
        Ok(ByKey {
            keys: stream
                .clone_dtoh(&dev.keys)
                .map_err(fetch("copying the run keys to the host"))?,
            values: stream
                .clone_dtoh(&dev.values)
                .map_err(fetch("copying the run results to the host"))?,
            lengths: stream
                .clone_dtoh(&dev.lengths)
                .map_err(fetch("copying the run lengths to the host"))?,
        })
    }

    /// [`Cpu::scan_by_key_into`](crate::Cpu::scan_by_key_into) on the GPU.
    pub(crate) fn scan_by_key_host_into<K: Element, T: DeviceValue, O: Operator<T>>(
        &self,
        keys: &[K],
        values: &[T],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        check_keys(keys.len(), values.len())?;
        check_scan_lengths(values.len(), out.len())?;
        let scanner = self.segment_scanner::<T, O>(op)?;
        if keys.is_empty() {
            return Ok(());
        }
        let mut dout = self.alloc::<O::Out>(out.len())?;
        scanner.scan_by_key_into(&self.upload(keys)?, &self.upload(values)?, &mut dout, kind)?;
        self.download(&dout, out)
    }
}

/// `n` zeroed values, or an error ([`ErrorKind::TooLarge`](crate::ErrorKind::TooLarge))
/// where the allocator refuses them, before anything is written.
pub(crate) fn try_zeroed<V: DeviceValue>(n: usize) -> Result<Vec<V>> {
    let mut v = try_alloc::<V>(n)?;
    // SAFETY: DeviceValue types are ValidAsZeroBits (as `scan::cpu::zeroed_vec`).
    v.resize(n, unsafe { std::mem::zeroed::<V>() });
    Ok(v)
}

/// The number of outputs of `rows` over `len` elements, `per_row` a row (1 for a reduction,
/// `cols` for a scan), after the rows' checks (the CPU's, in its order).
pub(crate) fn rows_outputs<V>(rows: &Rows, len: usize, per_row: usize) -> Result<usize> {
    check_rows::<V>(rows, len, per_row)
}
