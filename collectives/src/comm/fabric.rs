//! The seam between `Comm` and whatever carries its messages on a live node: the
//! [`Fabric`] a node's router implements, and the [`LinkCapabilities`] value that says
//! what an algorithm may count on from the links beneath (the one thing it may know of
//! them). No socket, codec or transport type crosses this seam.

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
    ) -> Result<(), String>;

    /// `instant` on the emulated timeline, or `None` outside emulated runs.
    fn emulated_stamp(&self, instant: Instant) -> Option<u64>;

    /// How long a receive polls before it sleeps: a while on the real clock (as MPI's
    /// progress engine does), not at all on a paused test clock.
    fn busy_poll(&self) -> Option<Duration>;

    /// A message due at `due_ns` on the emulated timeline was taken just now (the router
    /// traces how late, `taken late_us=…`).
    fn taken(&self, _due_ns: u64) {}
}
