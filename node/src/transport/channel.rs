//! Frames handed over as values: a link between two nodes of one process whose frames
//! cross an in-memory channel, with no bytes, no codec and no socket. What a simulated
//! or in-process network needs from a link, and the reference the conformance suite
//! holds the byte-stream link against. A frame's payload parts arrive as one buffer, as
//! they do over a stream.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use topocomm_proto::NodeId;
use topocomm_proto::frame::Frame;

use super::departures::Departures;
use topocomm_collectives::comm::fault::LinkFault;

use super::{Endpoint, Link, Outbox};

/// One end of an in-memory link: what it sends arrives at the other end's endpoint.
pub struct ChannelLink {
    to_peer: mpsc::UnboundedSender<Frame>,
    from_peer: mpsc::UnboundedReceiver<Frame>,
}

impl ChannelLink {
    /// The two ends of a new link.
    pub fn pair() -> (ChannelLink, ChannelLink) {
        let (a_to_b, b_from_a) = mpsc::unbounded_channel();
        let (b_to_a, a_from_b) = mpsc::unbounded_channel();
        (ChannelLink { to_peer: a_to_b, from_peer: a_from_b }, ChannelLink { to_peer: b_to_a, from_peer: b_from_a })
    }
}

impl Link for ChannelLink {
    /// Starts a writer and a reader task, as a stream link does: frames leave when their
    /// turn comes ([`Departures`]), each through the link physics, and arrive in order.
    fn start<E: Endpoint>(self, peer: NodeId, outbox: Outbox, endpoint: Arc<E>, cancel: CancellationToken) {
        let ChannelLink { to_peer, mut from_peer } = self;
        let write_endpoint = endpoint.clone();
        let write_cancel = cancel.clone();
        tokio::spawn(async move {
            let mut departures = Departures::new(outbox);
            loop {
                let outgoing = tokio::select! {
                    outgoing = departures.next(peer, &*write_endpoint) => match outgoing {
                        Some(outgoing) => outgoing,
                        None => break,
                    },
                    _ = write_cancel.cancelled() => break,
                };
                let frame = Frame { header: outgoing.header, payload: outgoing.payload.into_bytes() };
                if to_peer.send(frame).is_err() {
                    let reason = "the peer is gone".to_owned();
                    write_endpoint.link_failed(LinkFault::WriteFailed { peer, reason });
                    break;
                }
                // `outgoing.written` drops here: the frame is out of the sender's hands.
            }
        });
        tokio::spawn(async move {
            loop {
                let frame = tokio::select! {
                    frame = from_peer.recv() => frame,
                    _ = cancel.cancelled() => return,
                };
                let Some(frame) = frame else {
                    let fault = LinkFault::ClosedByPeer { peer };
                    tracing::warn!(peer, %fault, "link closed");
                    endpoint.link_failed(fault);
                    break;
                };
                if let Err(fault) = endpoint.arrive(peer, frame).await {
                    tracing::warn!(peer, %fault, "link closed");
                    endpoint.link_failed(fault);
                    break;
                }
            }
            // Whatever ended the reader ends the writer too, so the peer sees the close.
            cancel.cancel();
        });
    }
}
