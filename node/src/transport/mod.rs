//! The transport seam: beneath the router, a link to one neighbour is anything that
//! implements [`Link`]. A link carries the router's [`Outgoing`] frames to its peer in
//! order and hands every frame from the peer to the node's [`Endpoint`] (the router).
//!
//! * [`stream::StreamLink`]: frames as bytes over any byte stream — TCP (raw or
//!   encrypted) in the daemon, an in-memory duplex pipe in tests and the cost model.
//! * [`tcp`]: the TCP sockets a daemon's stream links run over, opened with the
//!   congestion control the links ask for.
//! * [`channel::ChannelLink`]: frames handed over as values through a channel, no bytes.
//! * [`departures::Departures`]: the order every link's frames leave in, first come,
//!   first served by when each became ready to go on the emulated timeline.
//! * [`emulated::Emulation`]: the link physics of emulated runs (t_s, t_h, t_w,
//!   store-and-forward and cut-through), a layer every link passes its frames through on
//!   their way out ([`Endpoint::depart`]) and in ([`Endpoint::arrive`]); no link
//!   implementation knows what it does.
//!
//! `node/tests/transport.rs` is the conformance suite every implementation passes.

pub mod channel;
pub mod departures;
pub mod emulated;
pub mod pacing;
pub mod stream;
pub mod tcp;

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use topocomm_proto::NodeId;
use topocomm_proto::frame::{Frame, FrameHeader};

use crate::forwarding::Charge;
use emulated::{Emulation, Occupancy};
use topocomm_collectives::comm::assembly::Place;
use topocomm_collectives::comm::fault::LinkFault;
use topocomm_collectives::comm::payload::{Payload, Written};

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
    /// A forwarded frame's charge to its source ([`crate::forwarding`]), given back when
    /// the link is done with it.
    pub charge: Option<Charge>,
    /// The neighbour a forwarded frame came in from (`None`: this node sends it): of
    /// frames ready at the same instant, a link takes those from lower-numbered
    /// neighbours first and this node's own last ([`departures::Departures`]).
    pub from: Option<NodeId>,
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

    /// A frame leaves on the link to `peer`, whose emulated occupancy is `occupancy`: the
    /// physics stamps when its tail will reach the peer. Links call this as each frame's
    /// turn comes ([`departures::Departures`]).
    fn depart(&self, _peer: NodeId, occupancy: &mut Occupancy, outgoing: &mut Outgoing) {
        self.emulation().depart(occupancy, outgoing);
    }

    /// A frame came in from `from`: the physics takes it through the node's input port
    /// (under one-port) and holds one for this node until its tail is due, then the
    /// endpoint routes it. Links call this for every frame, in order.
    fn arrive(&self, from: NodeId, frame: Frame) -> impl Future<Output = Result<(), LinkFault>> + Send {
        async move {
            let mut frame = frame;
            let emulation = self.emulation();
            emulation.receive(&mut frame.header, frame.payload.len());
            emulation.hold(self.id(), from, &frame.header).await?;
            emulation.delivered_step(self.id(), &mut frame.header);
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
