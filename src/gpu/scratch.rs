//! A handle's temporary device memory: one arena, one ticket word (a counter and an epoch).
//!
//! Layout of the one allocation:
//!
//! ```text
//! [0, 256)                      the ticket word (a u64 at 0)
//! [256, 256 + slot_cap)         epoch-tagged slots (the scan's look-back)
//! [256 + slot_cap, ... + plain) plain memory (the reduction's per-block partials)
//! ```
//!
//! **Tickets.** Kernels that need their blocks in an order of their own (the scan's tiles,
//! the reduction's last block) take tickets with `atomicAdd` on the ticket word (a u64 at 0),
//! whose low 32 bits count the launch's tickets and are zero between launches: the block that
//! takes a launch's last ticket puts them back.
//!
//! **Epochs.** Slots are published as 64-bit words holding a 32-bit value and the epoch of
//! the launch that wrote it, so nothing is cleared between launches. The epoch is kept on the
//! device too (the last launch's, the ticket word's high 32 bits, so that one `atomicAdd`
//! returns a block's ticket and the epoch together, with no fence): each tile-ordered launch
//! takes the next one, and its last ticket-taker writes it back (kernels/lookback.cuh,
//! `cf::take_ticket`). Since neither number is passed from
//! the host, a launch captured in a CUDA graph is right on every replay. The plain region is
//! separate, so that no reduction's partial can ever read as a slot of a later epoch. When
//! the arena grows, or after 2^32 - 2^16 slot-using launches enqueued by the host (graph
//! replays are not counted; the epoch skips 0 when it wraps), the memory starts zeroed again.
//!
//! **Per-thread streams.** CUDA's per-thread default stream (`CU_STREAM_PER_THREAD`,
//! cudarc's `CudaContext::per_thread_stream`, which candle's devices use) is one handle for a
//! different stream in every thread: launches from two threads are not ordered against each
//! other, so they must not share a ticket word. A handle on that stream keeps one arena per
//! thread ([`Scratch`]); every other stream (the legacy default stream included) orders all
//! its launches and has one arena.
//!
//! **Stream capture.** Growing the arena allocates, which a CUDA graph cannot hold: a launch
//! that needs more scratch memory than the arena has while the stream is capturing is an
//! error; the same call run once before the capture grows it.

use crate::error::{Error, ErrorKind, Result};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

/// The value of `CU_STREAM_PER_THREAD`: the per-thread default stream's handle.
const PER_THREAD_STREAM: usize = 0x2;

/// A handle's arenas: one for a stream that orders every launch made on it, one per
/// calling thread for the per-thread default stream (whose launches from different threads
/// run on different streams).
#[derive(Default)]
pub(crate) struct Scratch {
    shared: Mutex<Arena>,
    per_thread: Mutex<HashMap<ThreadId, Arena>>,
}

impl Scratch {
    /// Runs `launch` with a lease on the arena that `stream` orders for this thread (see
    /// [`Arena::with_lease`]).
    pub(crate) fn with_lease(
        &self,
        stream: &Arc<CudaStream>,
        slot_bytes: usize,
        plain_bytes: usize,
        launch: impl FnOnce(Lease) -> Result<()>,
    ) -> Result<()> {
        if stream.cu_stream() as usize == PER_THREAD_STREAM {
            let mut arenas = self.per_thread.lock().unwrap_or_else(|e| e.into_inner());
            let arena = arenas.entry(std::thread::current().id()).or_default();
            arena.with_lease(stream, slot_bytes, plain_bytes, launch)
        } else {
            let mut arena = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            arena.with_lease(stream, slot_bytes, plain_bytes, launch)
        }
    }
}

impl Drop for Scratch {
    /// A thread's arena is freed on the dropping thread's per-thread stream, which is not
    /// ordered after the other threads' launches: wait for the context first (only handles on
    /// the per-thread stream that were used from some thread do).
    fn drop(&mut self) {
        let arenas = self.per_thread.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(buf) = arenas.values().find_map(|a| a.buf.as_ref()) {
            let _ = buf.stream().context().synchronize();
        }
    }
}

/// Bytes before the slots: the ticket counter, on a line of its own.
const TICKET_BYTES: usize = 256;
/// The least either region grows to.
const MIN_REGION: usize = 64 * 1024;

/// The device addresses and numbers one launch needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lease {
    /// The ticket word: the ticket count (low 32 bits) and the last epoch (high 32 bits).
    pub(crate) ticket: u64,
    /// The slot region.
    pub(crate) slots: u64,
    /// The plain region.
    pub(crate) plain: u64,
}

/// The arena (behind the handle's mutex).
#[derive(Default)]
pub(crate) struct Arena {
    // Owns the memory `ptr` points into.
    buf: Option<CudaSlice<u8>>,
    ptr: u64,
    slot_cap: usize,
    plain_cap: usize,
    /// Slot-using launches enqueued since the memory was last zeroed.
    launches: u64,
}

/// Slot-using launches after which the arena is zeroed again, before the device's epoch
/// (one per launch, graph replays included) can wrap.
const CLEAR_AFTER: u64 = (1 << 32) - (1 << 16);

impl Arena {
    /// Runs `launch` with memory for `slot_bytes` of slots and `plain_bytes` of plain memory.
    /// Grows the arena (a new zeroed allocation) when it is too small, unless `stream` is
    /// capturing a graph (an error then).
    pub(crate) fn with_lease(
        &mut self,
        stream: &Arc<CudaStream>,
        slot_bytes: usize,
        plain_bytes: usize,
        launch: impl FnOnce(Lease) -> Result<()>,
    ) -> Result<()> {
        if self.buf.is_none() || slot_bytes > self.slot_cap || plain_bytes > self.plain_cap {
            refuse_while_capturing(stream, "grow cufold's scratch memory")?;
            let grow = |need: usize, cap: usize| {
                if need == 0 && cap == 0 {
                    0
                } else {
                    need.max(cap).max(MIN_REGION).next_power_of_two()
                }
            };
            let (slot_cap, plain_cap) = (
                grow(slot_bytes, self.slot_cap),
                grow(plain_bytes, self.plain_cap),
            );
            let bytes = TICKET_BYTES + slot_cap + plain_cap;
            let mut buf = stream
                .alloc_zeros::<u8>(bytes)
                .map_err(|e| Error::driver("allocating cufold's scratch memory", e))?;
            let ptr = {
                let (ptr, _record) = buf.device_ptr_mut(stream);
                ptr
            };
            *self = Arena {
                buf: Some(buf),
                ptr,
                slot_cap,
                plain_cap,
                launches: 0,
            };
        }
        if slot_bytes > 0 {
            if self.launches >= CLEAR_AFTER {
                if let Some(buf) = self.buf.as_mut() {
                    stream
                        .memset_zeros(buf)
                        .map_err(|e| Error::driver("clearing cufold's scratch memory", e))?;
                }
                self.launches = 0;
            }
            self.launches += 1;
        }
        let slots = self.ptr + TICKET_BYTES as u64;
        launch(Lease {
            ticket: self.ptr,
            slots,
            plain: slots + self.slot_cap as u64,
        })
    }
}

/// An error if `stream` is capturing a CUDA graph: for what a graph cannot hold (`what`:
/// an allocation), with what to do instead.
fn refuse_while_capturing(stream: &CudaStream, what: &str) -> Result<()> {
    use cudarc::driver::sys::CUstreamCaptureStatus as Status;
    match stream.capture_status() {
        Ok(Status::CU_STREAM_CAPTURE_STATUS_NONE) => Ok(()),
        Ok(_) => Err(Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "cufold would {what} while the stream is capturing a CUDA graph, which cannot hold                  an allocation: run the same call once before the capture (the memory is kept)"
            ),
        )),
        Err(e) => Err(Error::driver("asking whether the stream is capturing", e)),
    }
}
