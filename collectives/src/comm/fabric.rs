//! The seam between `Comm` and whatever carries its messages on a live node: the
//! [`Fabric`] a node's router implements, and the [`LinkCapabilities`] value that says
//! what an algorithm may count on from the links beneath (the one thing it may know of
//! them). No socket, codec or transport type crosses this seam.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use topocomm_proto::frame::FrameHeader;
use topocomm_proto::{NodeId, Topology};

use super::mailbox::Mailbox;
use super::payload::{Payload, Written};

/// What an algorithm may know of the links its messages travel, handed to `Comm` by the
/// network it runs on (a router reads it from its links, the simulator from its options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkCapabilities {
    /// Raw links: a message costs what the machine makes it cost, so an algorithm may send
    /// more messages than its textbook schedule to save copies. Off on emulated links and
    /// in the simulator (unless it stands for raw links), where the model's one start-up
    /// per message must hold.
    pub raw: bool,
    /// A message longer than this is left in the link until its receive is posted, then
    /// read straight into the place posted for it (a rendezvous); `None`: never.
    pub reads_in_place_above: Option<usize>,
    /// A message up to this long is cut by its link into writes that take turns with the
    /// other messages on the link; `Comm::send_in_turn` waits for such a message to be
    /// written before it sends the next (0: the links cut nothing).
    pub cuts_into_writes_up_to: usize,
}

impl LinkCapabilities {
    /// Links that behave as the cost model says: one message, one start-up; nothing read
    /// in place, nothing cut (the simulator's default).
    pub const MODELLED: LinkCapabilities =
        LinkCapabilities { raw: false, reads_in_place_above: None, cuts_into_writes_up_to: 0 };

    /// These links with the model's physics laid over them (emulation): no longer raw,
    /// so nothing is read in place; how they cut writes stays.
    pub fn emulated(self) -> Self {
        LinkCapabilities { raw: false, reads_in_place_above: None, ..self }
    }

    /// Whether a message of `len` bytes is read from its link straight into its place.
    pub fn reads_in_place(&self, len: usize) -> bool {
        self.raw && self.reads_in_place_above.is_some_and(|above| len > above)
    }

    /// Whether a message of `len` bytes is cut into writes that take turns.
    pub fn cuts_into_writes(&self, len: usize) -> bool {
        len <= self.cuts_into_writes_up_to
    }
}

impl Default for LinkCapabilities {
    fn default() -> Self {
        LinkCapabilities::MODELLED
    }
}

/// Why the carrier beneath `Comm` (a node's [`Fabric`], or the simulator's network) could
/// not take a message: the carrier's own error (the router's `RouteError`, the network's
/// `UnknownNode`), kept whole as the cause. Its text is the cause's.
#[derive(Debug, Clone)]
pub struct CarrierError {
    cause: Arc<dyn Error + Send + Sync + 'static>,
}

impl std::fmt::Display for CarrierError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.cause.fmt(f)
    }
}

/// Written out: the cause is the carrier's error itself, not the `Arc` that holds it.
impl Error for CarrierError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.cause)
    }
}

impl CarrierError {
    /// `cause`, as what the carrier could not do.
    pub fn new(cause: impl Error + Send + Sync + 'static) -> Self {
        CarrierError { cause: Arc::new(cause) }
    }

    /// The carrier's own error (to downcast to its type).
    pub fn cause(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.cause
    }
}

/// Two carrier errors are equal when they say the same (their causes' types are the
/// carriers', which the library does not know).
impl PartialEq for CarrierError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// What carries a live node's messages: its router, over links to its neighbours.
pub trait Fabric: Send + Sync + 'static {
    /// This node's id.
    fn id(&self) -> NodeId;

    /// The topology the cluster is wired as.
    fn topology(&self) -> &Topology;

    /// What the links beneath let an algorithm count on.
    fn links(&self) -> LinkCapabilities;

    /// Where messages for this node wait to be taken.
    fn mailbox(&self) -> &Mailbox;

    /// Hands a message to the network, to travel hop by hop to `header.dst`. Under
    /// emulation `causal_ns` (0: none) is the instant, on the emulated timeline, that the
    /// message follows from; `written` goes with it to its link, which drops it once done.
    fn originate(
        &self,
        header: FrameHeader,
        payload: Payload,
        causal_ns: u64,
        written: Option<Written>,
    ) -> Result<(), CarrierError>;

    /// `instant` on the emulated timeline, or `None` outside emulated runs.
    fn emulated_stamp(&self, instant: Instant) -> Option<u64>;

    /// How long a receive polls before it sleeps: a while on the real clock (as MPI's
    /// progress engine does), not at all on a paused test clock.
    fn busy_poll(&self) -> Option<Duration>;

    /// A message due at `due_ns` on the emulated timeline was taken just now (the router
    /// traces how late, `taken late_us=…`).
    fn taken(&self, _due_ns: u64) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The carrier's own error is the cause, found by its type, and the text is its text.
    #[test]
    fn a_carrier_error_keeps_the_carriers_error_as_its_cause() {
        let unknown = crate::simulator::network::UnknownNode { node: 9, p: 4 };
        let error = CarrierError::new(unknown.clone());
        assert_eq!(error.to_string(), unknown.to_string());
        let cause = error.source().and_then(|cause| cause.downcast_ref::<crate::simulator::network::UnknownNode>());
        assert_eq!(cause, Some(&unknown));
        assert_eq!(error, CarrierError::new(unknown));
    }
}
