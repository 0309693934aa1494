//! A handle's temporary device memory: one arena, one ticket counter, one epoch.
//!
//! Layout of the one allocation:
//!
//! ```text
//! [0, 256)                      the ticket counter (a u64 at 0)
//! [256, 256 + slot_cap)         epoch-tagged slots (the scan's look-back)
//! [256 + slot_cap, ... + plain) plain memory (the reduction's per-block partials)
//! ```
//!
//! **Tickets.** Kernels that need their blocks in an order of their own (the scan's tiles,
//! the reduction's last block) take tickets with `atomicAdd` on the counter, which only ever
//! grows: a launch is told the count handed out before it (`ticket_base`) and subtracts it.
//! Work on a handle is enqueued on one stream, in order, so every launch finds the counter
//! where the host says it is.
//!
//! **Epochs.** Slots are published as 64-bit words holding a 32-bit value and the epoch of
//! the launch that wrote it; each launch that uses slots gets a new epoch, so nothing is
//! cleared between launches. The plain region is separate, so that no reduction's partial
//! can ever read as a slot of a later epoch. When the epoch would wrap, or the arena grows,
//! the memory starts zeroed again (no slot holds an epoch of zero).

use crate::error::{Error, Result};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use std::sync::Arc;

/// Bytes before the slots: the ticket counter, on a line of its own.
const TICKET_BYTES: usize = 256;
/// The least either region grows to.
const MIN_REGION: usize = 64 * 1024;

/// The device addresses and numbers one launch needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lease {
    /// The ticket counter (a `unsigned long long*`).
    pub(crate) ticket: u64,
    /// Tickets handed out before this launch.
    pub(crate) ticket_base: u64,
    /// This launch's epoch (at least 1).
    pub(crate) epoch: u32,
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
    epoch: u32,
    tickets: u64,
}

impl Arena {
    /// Runs `launch` with memory for `slot_bytes` of slots and `plain_bytes` of plain memory,
    /// for a launch that takes `tickets` tickets; the tickets count as handed out only if
    /// `launch` succeeds. Grows the arena (a new zeroed allocation) when it is too small.
    pub(crate) fn with_lease(
        &mut self,
        stream: &Arc<CudaStream>,
        slot_bytes: usize,
        plain_bytes: usize,
        tickets: u64,
        launch: impl FnOnce(Lease) -> Result<()>,
    ) -> Result<()> {
        if self.buf.is_none() || slot_bytes > self.slot_cap || plain_bytes > self.plain_cap {
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
                epoch: self.epoch,
                tickets: 0,
            };
        }
        if slot_bytes > 0 {
            if self.epoch == u32::MAX {
                if let Some(buf) = self.buf.as_mut() {
                    stream
                        .memset_zeros(buf)
                        .map_err(|e| Error::driver("clearing cufold's scratch memory", e))?;
                }
                self.epoch = 0;
                self.tickets = 0;
            }
            self.epoch += 1;
        }
        let slots = self.ptr + TICKET_BYTES as u64;
        launch(Lease {
            ticket: self.ptr,
            ticket_base: self.tickets,
            epoch: self.epoch.max(1),
            slots,
            plain: slots + self.slot_cap as u64,
        })?;
        self.tickets += tickets;
        Ok(())
    }
}
