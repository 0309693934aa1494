//! The checks every backend makes before it reduces or scans, whatever runs the work: an
//! empty input, an operator that cannot be scanned, buffers of different lengths.

use super::Operator;
use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};

/// An error for an empty input if `O` has no value for one ([`Operator::EMPTY_IS_ERROR`]).
pub(crate) fn check_empty<T: DeviceValue, O: Operator<T>>(n: u64) -> Result<()> {
    if n == 0 && O::EMPTY_IS_ERROR {
        return Err(Error::new(
            ErrorKind::EmptyInput,
            format!(
                "{} has no value for an empty input: check the length before reducing",
                O::name()
            ),
        ));
    }
    Ok(())
}

/// An error if `O`'s prefixes mean nothing ([`Operator::SCANNABLE`]).
pub(crate) fn check_scannable<T: DeviceValue, O: Operator<T>>() -> Result<()> {
    if !O::SCANNABLE {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "{} cannot be scanned: its combine is associative only on the balanced tree of a \
                 reduction, so its prefixes mean nothing (scan Mean for running means)",
                O::name()
            ),
        ));
    }
    Ok(())
}

/// An error unless a scan's input (`n` elements) and output (`out`) have the same length.
pub(crate) fn check_scan_lengths(n: usize, out: usize) -> Result<()> {
    if n != out {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "a scan writes one output per input: the input has {n} elements but the output {out}"
            ),
        ));
    }
    Ok(())
}

/// An error unless a reduction's output buffer holds exactly one value.
pub(crate) fn check_reduce_output(out: usize) -> Result<()> {
    if out != 1 {
        return Err(Error::new(
            ErrorKind::LengthMismatch,
            format!(
                "the output of a reduction holds one value, but the buffer given has length {out}"
            ),
        ));
    }
    Ok(())
}
