//! What a node holds of the frames it passes on for others, by the frames' source: each
//! forwarded frame is charged to its `src` from when the router queues it on the next
//! link until that link has written it (or given up on it: the charge is a guard the
//! frame carries, [`Charge`], released when it is dropped). A run bounds what each
//! source may have queued so (`crate::allowance::RunAllowance::forwarded`), so that a
//! relay never buffers more junk than the schedule would have it carry, and a flood is
//! named by its source at the first node it overflows.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytesize::ByteSize;
use topocomm_proto::NodeId;

/// Bytes queued to be passed on, by source, and what each source may have queued.
pub struct Ledger {
    held: Vec<AtomicU64>,
    /// By source; `u64::MAX` for every source: no bound (in-process clusters).
    allowance: Vec<AtomicU64>,
}

/// A forwarded frame's charge to its source, given back when dropped.
pub struct Charge {
    ledger: Arc<Ledger>,
    src: NodeId,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(held) = self.ledger.held.get(self.src) {
            held.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

/// A source would have more queued to be passed on than its allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "it would hold {} of frames from node {src} to pass on (+{}), over the {} this run lets node {src} queue through here",
    ByteSize(held.saturating_add(*adding)), ByteSize(*adding), ByteSize(*allowance)
)]
pub struct Overforwarded {
    pub src: NodeId,
    pub held: u64,
    pub adding: u64,
    pub allowance: u64,
}

impl Ledger {
    /// A ledger for the sources of a cluster of `p` nodes, with no bound yet.
    pub fn new(p: usize) -> Arc<Self> {
        let zeros = || (0..p).map(|_| AtomicU64::new(0)).collect();
        let ledger = Ledger { held: zeros(), allowance: zeros() };
        ledger.set_allowance(None);
        Arc::new(ledger)
    }

    /// What each source may have queued from now on (`None`: no bound), by source.
    pub fn set_allowance(&self, allowance: Option<&[u64]>) {
        for (source, bound) in self.allowance.iter().enumerate() {
            let value = allowance.map_or(u64::MAX, |by_source| by_source.get(source).copied().unwrap_or(0));
            bound.store(value, Ordering::Relaxed);
        }
    }

    /// Charges `bytes` of a frame from `src` to be passed on, unless that would take
    /// `src` past its allowance; the frame carries the charge until it is written.
    /// Without a bound nothing is charged (`None`).
    pub fn charge(self: &Arc<Self>, src: NodeId, bytes: u64) -> Result<Option<Charge>, Overforwarded> {
        let (Some(held), Some(allowance)) = (self.held.get(src), self.allowance.get(src)) else {
            return Ok(None);
        };
        let allowance = allowance.load(Ordering::Relaxed);
        if allowance == u64::MAX {
            return Ok(None);
        }
        let before = held.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) > allowance {
            held.fetch_sub(bytes, Ordering::Relaxed);
            return Err(Overforwarded { src, held: before, adding: bytes, allowance });
        }
        Ok(Some(Charge { ledger: self.clone(), src, bytes }))
    }

    /// Bytes from `src` queued to be passed on now.
    pub fn held(&self, src: NodeId) -> u64 {
        self.held.get(src).map_or(0, |held| held.load(Ordering::Relaxed))
    }
}
