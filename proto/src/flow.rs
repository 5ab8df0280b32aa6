//! Message-flow events: each send, forward and delivery a router saw, with the time on
//! its clock. `explain`, traces and space-time diagrams are built from them.

use serde::{Deserialize, Serialize};

use crate::frame::FrameHeader;
use crate::topology::NodeId;

/// What happened to a message at a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowKind {
    /// The node originated the message (it leaves towards `next`).
    Send,
    /// The node passed someone else's message on towards `next`.
    Forward,
    /// The message reached its destination (this node) whole.
    Deliver,
}

/// One event of the message flow, as one node recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEvent {
    /// Nanoseconds since the node started recording, on its clock.
    pub at_ns: u64,
    /// The node that recorded the event.
    pub node: NodeId,
    pub kind: FlowKind,
    pub run: u64,
    pub iteration: u32,
    pub src: NodeId,
    pub dst: NodeId,
    pub tag: u32,
    pub step: u16,
    /// Links crossed when the event happened.
    pub hops: u16,
    pub bytes: u64,
    /// The neighbour the message leaves for (send and forward).
    pub next: Option<NodeId>,
}

impl FlowEvent {
    /// The event `kind` of the message `header` describes, at `node`.
    pub fn of(
        at_ns: u64,
        node: NodeId,
        kind: FlowKind,
        header: &FrameHeader,
        bytes: usize,
        next: Option<NodeId>,
    ) -> Self {
        FlowEvent {
            at_ns,
            node,
            kind,
            run: header.run,
            iteration: header.iteration,
            src: header.src(),
            dst: header.dst(),
            tag: header.tag,
            step: header.step,
            hops: header.hops,
            bytes: bytes as u64,
            next,
        }
    }
}
