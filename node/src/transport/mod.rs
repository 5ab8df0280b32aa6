//! The transport seam: beneath the router, a link to one neighbour is anything that
//! implements [`Link`]. A link carries the router's [`Outgoing`] frames to its peer in
//! order and hands every frame from the peer to the node's [`Endpoint`] (the router).
//!
//! * [`stream::StreamLink`]: frames as bytes over any byte stream — TCP (raw or
//!   encrypted) in the daemon, an in-memory duplex pipe in tests and the cost model.
//! * [`tcp`]: the TCP sockets a daemon's stream links run over, opened with the
//!   congestion control the links ask for.
//! * [`memory::MemoryLink`]: frames handed over as values through a channel, no bytes.
//! * [`emulated::Emulation`]: the link physics of emulated runs (t_s, t_h, t_w,
//!   store-and-forward and cut-through), a layer every link passes its frames through on
//!   their way out ([`Endpoint::depart`]) and in ([`Endpoint::arrive`]); no link
//!   implementation knows what it does.
//!
//! `node/tests/transport.rs` is the conformance suite every implementation passes.

pub mod emulated;
pub mod memory;
pub mod stream;
pub mod tcp;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use topocomm_proto::NodeId;
use topocomm_proto::frame::{Frame, FrameHeader};

use crate::assembly::Place;
use emulated::{Emulation, Occupancy};

/// A frame waiting for its link, with the instant it became ready to go on the emulated
/// timeline: when its source's schedule let it go (see `Comm`), or when its tail reached
/// this hop (`due_ns`). Emulated links schedule from it, not from when the software got
/// to it, so software delays do not add up along a route or a schedule.
pub struct Outgoing {
    pub header: FrameHeader,
    pub payload: Payload,
    pub ready_at: Instant,
    /// Dropped with the frame once the link has written it (or given up on it).
    pub written: Option<Written>,
}

/// Held by an outgoing frame until its link is done with it, buffer included: the
/// receiver of [`Written::new`] then resolves (as a closed channel), which tells a sender
/// that its buffer's memory is free again (`Comm::exchange`).
pub struct Written {
    /// Never sent on: dropping it is the signal.
    _signal: tokio::sync::oneshot::Sender<()>,
}

impl Written {
    /// A signal and what resolves when the frame that carries it is done with.
    pub fn new() -> (Self, tokio::sync::oneshot::Receiver<()>) {
        let (signal, done) = tokio::sync::oneshot::channel();
        (Self { _signal: signal }, done)
    }
}

/// A frame's payload: one buffer, or several that a link writes back to back (one
/// vectored write on a stream), so that a message made of blocks is never copied into
/// one buffer on its way out. The receiver gets one payload either way.
#[derive(Debug, Clone)]
pub enum Payload {
    One(Bytes),
    Parts(Vec<Bytes>),
}

impl Payload {
    /// The payload of `parts`, in order (a single part needs no list).
    pub fn of(parts: impl IntoIterator<Item = Bytes>) -> Self {
        let mut parts: Vec<Bytes> = parts.into_iter().filter(|part| !part.is_empty()).collect();
        match parts.len() {
            0 => Payload::One(Bytes::new()),
            1 => Payload::One(parts.pop().expect("one part")),
            _ => Payload::Parts(parts),
        }
    }

    /// Bytes in all.
    pub fn len(&self) -> usize {
        self.parts().iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffers, in order.
    pub fn parts(&self) -> &[Bytes] {
        match self {
            Payload::One(bytes) => std::slice::from_ref(bytes),
            Payload::Parts(parts) => parts,
        }
    }

    /// The payload as one buffer (copies only when it has several parts that are not
    /// all known zeros, see `crate::zeros`).
    pub fn into_bytes(self) -> Bytes {
        match self {
            Payload::One(bytes) => bytes,
            Payload::Parts(parts) if let Some(zeros) = crate::zeros::join(&parts) => zeros,
            Payload::Parts(parts) => {
                let mut whole = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
                for part in &parts {
                    whole.extend_from_slice(part);
                }
                whole.freeze()
            }
        }
    }
}

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
            | LinkFault::DueBeyondDeadline { peer, .. } => Some(*peer),
            LinkFault::WiringClosed => None,
        }
    }
}

/// The queue a link takes its outgoing frames from, in order.
pub type Outbox = mpsc::UnboundedReceiver<Outgoing>;

/// The node a link serves, as the link sees it (the router implements it).
pub trait Endpoint: Send + Sync + 'static {
    /// The node's id.
    fn id(&self) -> NodeId;

    /// The link physics frames pass through (off outside emulated runs).
    fn emulation(&self) -> &Emulation;

    /// Takes a frame that came in from `from`, after the physics released it: delivers
    /// or forwards it. An error breaks the link (the frame was not one of this cluster's).
    fn on_frame(&self, from: NodeId, frame: Frame) -> Result<(), LinkFault>;

    /// Looks at the header of a long frame from `from` before its payload is read: `false`
    /// if the endpoint will not take it (the link reads past its payload without keeping
    /// it), an error if it breaks the link. `on_frame` screens every frame again.
    fn screen(&self, _from: NodeId, _header: &FrameHeader) -> Result<bool, LinkFault> {
        Ok(true)
    }

    /// Resolves when the long payload of `header` (from `from`) may be read: a link that
    /// can leave bytes in flight waits for its receive to be posted (a rendezvous).
    fn admit(&self, header: &FrameHeader, from: NodeId) -> impl Future<Output = ()> + Send;

    /// Where a waiting receive wants the payload (`len` bytes) of `header` put, if it is
    /// a whole message for this node (a link may read it straight there).
    fn landing(&self, header: &FrameHeader, len: usize) -> Option<Place>;

    /// A link failed: every wait of this wiring fails with `fault`.
    fn link_failed(&self, fault: LinkFault);

    /// A frame leaves on a link whose emulated occupancy is `occupancy`: the physics
    /// stamps when its tail will reach the peer. Links call this as they dequeue a frame.
    fn depart(&self, occupancy: &mut Occupancy, outgoing: &mut Outgoing) {
        self.emulation().depart(occupancy, outgoing);
    }

    /// A frame came in from `from`: the physics holds one for this node until its tail
    /// is due, then the endpoint routes it. Links call this for every frame, in order.
    fn arrive(&self, from: NodeId, frame: Frame) -> impl Future<Output = Result<(), LinkFault>> + Send {
        async move {
            self.emulation().hold(self.id(), from, &frame.header).await?;
            self.on_frame(from, frame)
        }
    }
}

/// One end of a link to a neighbour: started once, it carries the frames of `outbox` to
/// `peer` in order and hands each frame from `peer` to `endpoint` through
/// [`Endpoint::arrive`], until `cancel` or a failure (reported with
/// [`Endpoint::link_failed`]). Whatever ends one direction ends the other.
pub trait Link: Send + 'static {
    fn start<E: Endpoint>(self, peer: NodeId, outbox: Outbox, endpoint: Arc<E>, cancel: CancellationToken);
}
