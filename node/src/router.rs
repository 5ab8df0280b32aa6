//! The hop-by-hop router of one node for one wiring: a frame for this node goes to the
//! mailbox, any other frame goes to the link towards the next hop of the topology's
//! route (store-and-forward: a frame is forwarded only once it has been read whole).
//! It knows links only as queues of frames ([`crate::transport::Link`]); it never
//! touches a socket. It also tells a link when to read a long message for this node
//! (`admit`: once it is asked for). The link physics of emulated runs is the layer
//! [`Emulation`], which the router holds for its links and asks when a frame is ready.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use topocomm_proto::flow::{FlowEvent, FlowKind};
use topocomm_proto::frame::{Frame, FrameHeader, SYSTEM_TAG_BASE};
use topocomm_proto::spec::LinkModel;
use topocomm_proto::{NodeId, Topology};

use crate::assembly::Place;
use crate::mailbox::{Delivery, Mailbox, MessageKey};
use crate::pacing::{Clock, Timeline};
use crate::transport::emulated::Emulation;
use crate::transport::{Endpoint, Link, LinkFault, Outgoing, Payload, Written};

/// The sending side of one neighbour link, with what it carried.
struct LinkQueue {
    frames: mpsc::UnboundedSender<Outgoing>,
    /// Payload + header bytes handed to this link for algorithm traffic.
    bytes: AtomicU64,
}

/// Traffic counts of algorithm frames (runtime frames such as barriers are not counted).
#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    forwarded: AtomicU64,
}

/// A snapshot of the counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traffic {
    pub frames_sent: u64,
    pub frames_forwarded: u64,
    /// Bytes written to each neighbour, sorted by neighbour id.
    pub link_bytes: Vec<(NodeId, u64)>,
}

/// Why a frame could not be routed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("frame names node {node}, but this cluster has {p} nodes")]
    UnknownNode { node: u32, p: usize },
    #[error("frame from node {src} to node {dst} has crossed {hops} links, more than the diameter {diameter}")]
    TooManyHops { src: u32, dst: u32, hops: u16, diameter: usize },
    #[error("the link to node {0} is closed")]
    LinkClosed(NodeId),
}

/// The longest a link holds back a long message that no receive has asked for yet.
pub const HOLD_LIMIT: std::time::Duration = std::time::Duration::from_millis(200);

/// One node's router for one wiring epoch.
pub struct Router {
    id: NodeId,
    topology: Topology,
    /// `next_hop[dst]`: the neighbour a frame for `dst` leaves through.
    next_hop: Vec<NodeId>,
    /// `arrives_via[src]`: the neighbour a message from `src` comes in from.
    arrives_via: Vec<NodeId>,
    links: HashMap<NodeId, LinkQueue>,
    mailbox: Mailbox,
    counters: Counters,
    /// Cancelled when this wiring is replaced: every link task of it ends.
    shutdown: CancellationToken,
    /// The link physics its links pass frames through.
    emulation: Emulation,
    /// Cut-through messages whose last packet has not arrived yet.
    partial: Mutex<HashMap<MessageKey, BytesMut>>,
    /// The message flow, while recording.
    recorder: Recorder,
}

/// Records flow events when switched on; costs one atomic load per event otherwise.
#[derive(Default)]
struct Recorder {
    on: AtomicBool,
    since: Mutex<Option<Instant>>,
    events: Mutex<Vec<FlowEvent>>,
}

impl Router {
    /// Builds the router of node `id` over its links, one per neighbour, and starts
    /// them; emulated delays are measured on `timeline`.
    pub fn start<L: Link>(id: NodeId, topology: Topology, links: Vec<(NodeId, L)>, timeline: Timeline) -> Arc<Self> {
        let next_hop = (0..topology.p()).map(|dst| if dst == id { id } else { topology.next_hop(id, dst) }).collect();
        let arrives_via = (0..topology.p())
            .map(|src| if src == id { id } else { topology.route(src, id).iter().rev().nth(1).copied().unwrap_or(src) })
            .collect();
        let mut queues = HashMap::new();
        let mut starting = Vec::new();
        for (peer, link) in links {
            let (tx, rx) = mpsc::unbounded_channel();
            queues.insert(peer, LinkQueue { frames: tx, bytes: AtomicU64::new(0) });
            starting.push((peer, link, rx));
        }
        let router = Arc::new(Router {
            id,
            topology,
            next_hop,
            arrives_via,
            links: queues,
            mailbox: Mailbox::default(),
            counters: Counters::default(),
            shutdown: CancellationToken::new(),
            emulation: Emulation::new(timeline),
            partial: Mutex::new(HashMap::new()),
            recorder: Recorder::default(),
        });
        for (peer, link, outbox) in starting {
            link.start(peer, outbox, router.clone(), router.shutdown.child_token());
        }
        router
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    pub fn mailbox(&self) -> &Mailbox {
        &self.mailbox
    }

    /// The link physics of this node's links.
    pub fn emulation(&self) -> &Emulation {
        &self.emulation
    }

    /// The clock emulated delays are measured on.
    pub fn clock(&self) -> Clock {
        self.emulation.clock()
    }

    /// The timeline emulated frames are stamped on.
    pub fn timeline(&self) -> Timeline {
        self.emulation.timeline()
    }

    /// Sets the link physics for the run that starts (`None`: full speed), and this
    /// node's clock offset from the coordinator's (see [`Emulation::set`]).
    pub fn set_emulation(&self, model: Option<LinkModel>, clock_offset_ns: i64) {
        self.emulation.set(model, clock_offset_ns);
    }

    /// Starts recording the message flow afresh, with times counted from now; returns now.
    pub fn start_recording(&self) -> Instant {
        let since = Instant::now();
        *self.recorder.since.lock().expect("recorder lock") = Some(since);
        self.recorder.events.lock().expect("recorder lock").clear();
        self.recorder.on.store(true, Ordering::Release);
        since
    }

    /// Stops recording and hands over what was recorded.
    pub fn take_recording(&self) -> Vec<FlowEvent> {
        self.recorder.on.store(false, Ordering::Release);
        std::mem::take(&mut *self.recorder.events.lock().expect("recorder lock"))
    }

    fn record(&self, kind: FlowKind, header: &FrameHeader, bytes: usize, next: Option<NodeId>) {
        if !self.recorder.on.load(Ordering::Acquire) || header.tag >= SYSTEM_TAG_BASE {
            return;
        }
        let since = self.recorder.since.lock().expect("recorder lock").unwrap_or_else(Instant::now);
        let at_ns = self.clock().nanos(Instant::now().saturating_duration_since(since));
        let event = FlowEvent::of(at_ns, self.id, kind, header, bytes, next);
        self.recorder.events.lock().expect("recorder lock").push(event);
    }

    /// Closes every link of this wiring.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Sends a message this node originates, ready to go at `ready_at` on the emulated
    /// timeline (`None`: now); `written` goes with its (last) frame.
    pub fn originate(
        &self,
        header: FrameHeader,
        payload: Payload,
        ready_at: Option<Instant>,
        written: Option<Written>,
    ) -> Result<(), RouteError> {
        let dst = header.dst();
        if dst >= self.topology.p() {
            return Err(RouteError::UnknownNode { node: header.dst, p: self.topology.p() });
        }
        tracing::debug!(
            run = header.run,
            iteration = header.iteration,
            tag = header.tag,
            src = header.src,
            dst = header.dst,
            hop = 0,
            bytes = payload.len(),
            "send"
        );
        if header.tag < SYSTEM_TAG_BASE {
            self.counters.sent.fetch_add(1, Ordering::Relaxed);
        }
        self.record(FlowKind::Send, &header, payload.len(), (dst != self.id).then(|| self.next_hop[dst]));
        let ready_at = self.emulation.source_ready(ready_at);
        if dst == self.id {
            let due_ns = self.emulation.self_due_ns(ready_at);
            self.deliver(FrameHeader { due_ns, ..header }, payload.into_bytes());
            return Ok(());
        }
        match self.emulation.packets(header, payload) {
            Err(whole) => self.push(header, whole, ready_at, written),
            Ok(packets) => {
                let mut written = written;
                for (header, packet) in packets {
                    let written = if header.last { written.take() } else { None };
                    self.push(header, packet, ready_at, written)?;
                }
                Ok(())
            }
        }
    }

    /// Takes a frame that arrived on the link from `from`: delivers or forwards it.
    fn route(&self, from: NodeId, frame: Frame) -> Result<(), RouteError> {
        let header = frame.header;
        let p = self.topology.p();
        for node in [header.src, header.dst] {
            if node as usize >= p {
                return Err(RouteError::UnknownNode { node, p });
            }
        }
        if header.dst() == self.id {
            tracing::debug!(
                run = header.run,
                iteration = header.iteration,
                tag = header.tag,
                src = header.src,
                dst = header.dst,
                hop = header.hops + 1,
                from,
                bytes = frame.payload.len(),
                "deliver"
            );
            self.deliver(header, frame.payload);
            return Ok(());
        }
        let diameter = self.topology.diameter();
        if header.hops as usize >= diameter.max(1) {
            return Err(RouteError::TooManyHops { src: header.src, dst: header.dst, hops: header.hops, diameter });
        }
        let forwarded = FrameHeader { hops: header.hops + 1, ..header };
        tracing::debug!(
            run = header.run,
            iteration = header.iteration,
            tag = header.tag,
            src = header.src,
            dst = header.dst,
            hop = forwarded.hops,
            from,
            to = self.next_hop[header.dst()],
            bytes = frame.payload.len(),
            "forward"
        );
        if header.tag < SYSTEM_TAG_BASE && header.packet == 0 {
            self.counters.forwarded.fetch_add(1, Ordering::Relaxed);
            self.record(FlowKind::Forward, &forwarded, frame.payload.len(), Some(self.next_hop[header.dst()]));
        }
        // Under emulation the frame is ready to go on when its tail arrived here.
        let ready_at = self.emulation.hop_ready(&header);
        self.push(forwarded, Payload::One(frame.payload), ready_at, None)
    }

    /// Zeroes the traffic counters (at the start of the timed iterations).
    pub fn reset_traffic(&self) {
        self.counters.sent.store(0, Ordering::Relaxed);
        self.counters.forwarded.store(0, Ordering::Relaxed);
        for link in self.links.values() {
            link.bytes.store(0, Ordering::Relaxed);
        }
    }

    /// The traffic counted since the last reset.
    pub fn traffic(&self) -> Traffic {
        let mut link_bytes: Vec<(NodeId, u64)> =
            self.links.iter().map(|(peer, link)| (*peer, link.bytes.load(Ordering::Relaxed))).collect();
        link_bytes.sort_unstable();
        Traffic {
            frames_sent: self.counters.sent.load(Ordering::Relaxed),
            frames_forwarded: self.counters.forwarded.load(Ordering::Relaxed),
            link_bytes,
        }
    }

    /// Hands a message (or, under cut-through, one of its packets) to the mailbox.
    fn deliver(&self, header: FrameHeader, payload: Bytes) {
        let key = MessageKey { run: header.run, iteration: header.iteration, src: header.src(), tag: header.tag };
        let payload = if header.packet == 0 && header.last {
            payload
        } else {
            let mut partial = self.partial.lock().expect("reassembly lock");
            let message = partial.entry(key).or_default();
            message.extend_from_slice(&payload);
            if !header.last {
                return;
            }
            partial.remove(&key).expect("just extended").freeze()
        };
        self.record(FlowKind::Deliver, &header, payload.len(), None);
        self.mailbox.deliver(key, Delivery { payload, step: header.step, due_ns: header.due_ns });
    }

    fn push(
        &self,
        header: FrameHeader,
        payload: Payload,
        ready_at: Instant,
        written: Option<Written>,
    ) -> Result<(), RouteError> {
        let via = self.next_hop[header.dst()];
        let link = self.links.get(&via).ok_or(RouteError::LinkClosed(via))?;
        if header.tag < SYSTEM_TAG_BASE {
            link.bytes.fetch_add((FrameHeader::ENCODED_LEN + payload.len()) as u64, Ordering::Relaxed);
        }
        let outgoing = Outgoing { header, payload, ready_at, written };
        link.frames.send(outgoing).map_err(|_| RouteError::LinkClosed(via))
    }
}

impl Endpoint for Router {
    fn id(&self) -> NodeId {
        self.id
    }

    fn emulation(&self) -> &Emulation {
        &self.emulation
    }

    fn on_frame(&self, from: NodeId, frame: Frame) -> Result<(), LinkFault> {
        self.route(from, frame).map_err(|error| LinkFault::Rejected { peer: from, reason: error.to_string() })
    }

    /// Before the link from `peer` reads the long payload of `header`, a message for this
    /// node: waits until this node asks for it. This is the rendezvous MPI libraries use
    /// above their eager limit (`stream::RENDEZVOUS_ABOVE`): until the receive is posted
    /// the payload stays in the socket and TCP holds its sender back, so a node never
    /// buffers large messages of later steps that it is not ready for (an 8 MiB all-reduce
    /// by recursive doubling held a fourth vector that way). It reads at once when the
    /// node waits for any message that comes in over this link (it may be queued behind
    /// this one), on emulated links (their timing stays as it was), and after
    /// `HOLD_LIMIT` in any case: the hold saves memory, it never decides an outcome.
    async fn admit(&self, header: &FrameHeader, peer: NodeId) {
        if header.dst() != self.id || self.emulation.is_on() {
            return;
        }
        let limit = Instant::now() + HOLD_LIMIT;
        loop {
            let posted = self.mailbox.posted();
            let mut posted = std::pin::pin!(posted);
            posted.as_mut().enable();
            if self.mailbox.is_waiting(|waiting| self.arrives_via.get(waiting.src) == Some(&peer)) {
                return;
            }
            if tokio::time::timeout_at(limit, posted).await.is_err() {
                tracing::debug!(src = header.src, tag = header.tag, "no receive for a held message: reading it anyway");
                return;
            }
        }
    }

    /// The place a waiting receive offers for the payload (`len` bytes) of the frame
    /// `header` heads, if the frame is a whole message for this node: the link reader
    /// then reads the payload straight into it.
    fn landing(&self, header: &FrameHeader, len: usize) -> Option<Place> {
        if header.dst() != self.id || header.packet != 0 || !header.last {
            return None;
        }
        let key = MessageKey { run: header.run, iteration: header.iteration, src: header.src(), tag: header.tag };
        self.mailbox.landing(key, len)
    }

    /// A link failed: the wiring is broken and every wait fails with `fault`.
    fn link_failed(&self, fault: LinkFault) {
        self.mailbox.fail(fault);
    }
}
