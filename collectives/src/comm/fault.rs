//! Why a link stopped ([`LinkFault`]): the words every wait of a broken wiring fails with,
//! whatever the transport under it.

use topocomm_proto::NodeId;

/// Why a link stopped: the wiring is broken, and every wait of it fails with this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkFault {
    #[error("link to node {peer} was closed by node {peer}")]
    ClosedByPeer { peer: NodeId },
    #[error("link to node {peer}: connection reset by node {peer}")]
    Reset { peer: NodeId },
    #[error("link to node {peer}: closed by node {peer} in the middle of a frame")]
    Truncated { peer: NodeId },
    #[error(
        "link to node {peer}: a record from node {peer} failed authentication (tampered with or corrupted on the way)"
    )]
    Tampered { peer: NodeId },
    #[error("link to node {peer}: read failed: {reason}")]
    ReadFailed { peer: NodeId, reason: String },
    #[error("link to node {peer}: write failed: {reason}")]
    WriteFailed { peer: NodeId, reason: String },
    #[error("link to node {peer}: bad frame: {reason}")]
    BadFrame { peer: NodeId, reason: String },
    #[error("link to node {peer}: malformed frame: {reason}")]
    Malformed { peer: NodeId, reason: String },
    /// The frame was not one of this cluster's (the endpoint says why).
    #[error("link to node {peer}: {reason}")]
    Rejected { peer: NodeId, reason: String },
    /// The frame would take its source past what the run lets it queue at this node
    /// (`charged`: the node the frames name as theirs, which `peer` may only have relayed).
    #[error("link to node {peer}: {reason}")]
    Overflowed { peer: NodeId, charged: NodeId, reason: String },
    #[error("link to node {peer}: a frame due {due_ms} ms from now, beyond the run's deadline of {horizon_ms} ms")]
    DueBeyondDeadline { peer: NodeId, due_ms: u64, horizon_ms: u64 },
    #[error("the wiring was closed")]
    WiringClosed,
}

impl LinkFault {
    /// The fault of a read from `peer` that failed with `error`, in words.
    pub fn from_io(peer: NodeId, error: &std::io::Error) -> Self {
        use std::io::ErrorKind;
        match error.kind() {
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
                LinkFault::Reset { peer }
            }
            ErrorKind::UnexpectedEof => LinkFault::Truncated { peer },
            // The words the encrypted stream (`secure`) fails an unsealing with.
            ErrorKind::InvalidData if error.to_string().contains("failed its authentication") => {
                LinkFault::Tampered { peer }
            }
            ErrorKind::InvalidData => LinkFault::BadFrame { peer, reason: error.to_string() },
            _ => LinkFault::ReadFailed { peer, reason: error.to_string() },
        }
    }

    /// The neighbour this fault is about (`None`: the whole wiring).
    pub fn peer(&self) -> Option<NodeId> {
        match self {
            LinkFault::ClosedByPeer { peer }
            | LinkFault::Reset { peer }
            | LinkFault::Truncated { peer }
            | LinkFault::Tampered { peer }
            | LinkFault::ReadFailed { peer, .. }
            | LinkFault::WriteFailed { peer, .. }
            | LinkFault::BadFrame { peer, .. }
            | LinkFault::Malformed { peer, .. }
            | LinkFault::Rejected { peer, .. }
            | LinkFault::Overflowed { peer, .. }
            | LinkFault::DueBeyondDeadline { peer, .. } => Some(*peer),
            LinkFault::WiringClosed => None,
        }
    }

    /// The node the fault is charged to when that is not the link's peer: the source of
    /// frames that overflowed what the run lets it queue.
    pub fn charged_source(&self) -> Option<NodeId> {
        match self {
            LinkFault::Overflowed { charged, .. } => Some(*charged),
            _ => None,
        }
    }
}
