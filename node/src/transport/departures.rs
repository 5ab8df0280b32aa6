//! The order a link's frames leave in: an output port served first come, first served by
//! the instant each frame became ready to go on the emulated timeline — at its source when
//! its schedule let it go, at a hop when its tail had arrived (its head, under
//! cut-through) — never by the order the router happened to hand them over. A frame
//! passed on travels ahead of its emulated time (the peer holds only frames for itself),
//! so it is handed to its next link before it is ready there, and a frame ready earlier
//! may still come; it waits here until its head is ready, and only then takes the link.
//! Of frames ready at the same instant, those that came in from the lowest-numbered
//! neighbour go first and the node's own last, each in the order handed over: the
//! order the simulator's links take them in (`topocomm_collectives::simulator::network`),
//! so the routers on a paused clock time a run as the model does, to the nanosecond.
//! Outside emulated runs frames leave at once, in the order handed over.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use tokio::time::Instant;
use topocomm_proto::NodeId;

use super::emulated::Occupancy;
use super::{Endpoint, Outbox, Outgoing};

/// One link's outgoing frames, from the router's queue to the wire: each leaves through
/// [`Endpoint::depart`] (which stamps when its tail reaches the peer) when its turn comes.
pub struct Departures {
    outbox: Outbox,
    /// Whether the router may still hand over frames.
    open: bool,
    waiting: BinaryHeap<Waiting>,
    /// Frames handed over so far (the last tie-break: the order they came in).
    handed: u64,
    occupancy: Occupancy,
}

/// A frame handed over and not yet gone, with its turn.
struct Waiting {
    /// When its head is ready, the neighbour it came in from (`NodeId::MAX`: this node's
    /// own), and how many frames were handed over before it.
    turn: (Instant, NodeId, u64),
    outgoing: Outgoing,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.turn == other.turn
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    /// The earliest turn is the greatest (`BinaryHeap` pops its greatest).
    fn cmp(&self, other: &Self) -> Ordering {
        Reverse(self.turn).cmp(&Reverse(other.turn))
    }
}

impl Departures {
    /// The departures of the frames the router queues in `outbox`.
    pub fn new(outbox: Outbox) -> Self {
        Departures { outbox, open: true, waiting: BinaryHeap::new(), handed: 0, occupancy: Occupancy::default() }
    }

    /// The next frame to leave for `peer`, gone through the link physics: waits until
    /// the head of the earliest frame is ready, taking the frames handed over meanwhile.
    /// `None` once the router dropped the queue and every frame has left.
    pub async fn next<E: Endpoint>(&mut self, peer: NodeId, endpoint: &E) -> Option<Outgoing> {
        loop {
            if let Some(outgoing) = self.next_now(peer, endpoint) {
                return Some(outgoing);
            }
            let first = self.waiting.peek().map(|waiting| waiting.turn.0);
            let handed = match (first, self.open) {
                (None, false) => return None,
                (None, true) => self.outbox.recv().await,
                (Some(head_at), false) => {
                    endpoint.emulation().clock().wait_until(head_at).await;
                    continue;
                }
                (Some(head_at), true) => tokio::select! {
                    biased;
                    handed = self.outbox.recv() => handed,
                    _ = endpoint.emulation().clock().wait_until(head_at) => continue,
                },
            };
            match handed {
                Some(outgoing) => self.wait(outgoing, endpoint),
                None => self.open = false,
            }
        }
    }

    /// The next frame to leave for `peer` if one may leave now (a writer sends those
    /// together), gone through the link physics.
    pub fn next_now<E: Endpoint>(&mut self, peer: NodeId, endpoint: &E) -> Option<Outgoing> {
        loop {
            match self.outbox.try_recv() {
                Ok(outgoing) => self.wait(outgoing, endpoint),
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    self.open = false;
                    break;
                }
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
            }
        }
        if self.waiting.peek()?.turn.0 > Instant::now() {
            return None;
        }
        let mut outgoing = self.waiting.pop().expect("a frame waits").outgoing;
        endpoint.depart(peer, &mut self.occupancy, &mut outgoing);
        Some(outgoing)
    }

    /// A frame handed over waits for its turn: when its head is ready, or now if that has
    /// passed. A frame passed on whose head cut through ahead of its tail and was ready by
    /// the time this node had it (onto a slower link) goes one emulated nanosecond after
    /// it came, as in the simulator: so no frame passed on takes its turn at the instant
    /// it was handed over, and every frame whose turn is now is here when the turn comes
    /// (this node's own go last then): a tie never hangs on which task ran first.
    fn wait<E: Endpoint>(&mut self, outgoing: Outgoing, endpoint: &E) {
        let now = Instant::now();
        let turn = match (endpoint.emulation().head_ready(&outgoing), outgoing.from) {
            (Some(head_at), Some(from)) if head_at <= now && head_at < outgoing.ready_at => {
                (now + endpoint.emulation().clock().duration(1), from)
            }
            (Some(head_at), from) => (head_at.max(now), from.unwrap_or(NodeId::MAX)),
            (None, _) => (now, NodeId::MAX),
        };
        let turn = (turn.0, turn.1, self.handed);
        self.handed += 1;
        self.waiting.push(Waiting { turn, outgoing });
    }
}
