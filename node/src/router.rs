//! The hop-by-hop router of one node for one wiring: a frame for this node goes to the
//! mailbox, any other frame goes to the link towards the next hop of the topology's
//! route (store-and-forward: a frame is forwarded only once it has been read whole).
//! It knows links only as queues of frames; it never touches a socket. It also tells a
//! link when to read a long message for this node (`admit`: once it is asked for).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use topocomm_proto::flow::{FlowEvent, FlowKind};
use topocomm_proto::frame::{Frame, FrameHeader, SYSTEM_TAG_BASE};
use topocomm_proto::spec::LinkModel;
use topocomm_proto::{NodeId, Topology};

use crate::assembly::Place;
use crate::links;
use crate::mailbox::{Delivery, Mailbox, MessageKey};
use crate::pacing::{Clock, Timeline};

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

/// A frame's payload: one buffer, or several that the link writes back to back with one
/// vectored write, so that a message made of blocks is never copied into one buffer on
/// its way out. The receiver reads one payload either way.
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

    /// The payload as one buffer (copies only when it has several parts).
    pub fn into_bytes(self) -> Bytes {
        match self {
            Payload::One(bytes) => bytes,
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
    /// The link physics of the current run (`None`: full speed).
    emulation: RwLock<Option<LinkModel>>,
    /// How far ahead of now an emulated frame may be due: the run's deadline (`None`
    /// outside a run, as in the cost model, whose virtual links may queue far ahead).
    due_horizon: RwLock<Option<std::time::Duration>>,
    /// The timeline emulated frames are stamped on (the clock delays are measured on).
    timeline: RwLock<Timeline>,
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
    /// Builds the router of node `id` over already handshaken streams, one per
    /// neighbour, and starts a reader and a writer task per link.
    pub fn start<S>(
        id: NodeId,
        topology: Topology,
        streams: Vec<(NodeId, S)>,
        max_frame: usize,
        timeline: Timeline,
    ) -> Arc<Self>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let next_hop = (0..topology.p()).map(|dst| if dst == id { id } else { topology.next_hop(id, dst) }).collect();
        let arrives_via = (0..topology.p())
            .map(|src| if src == id { id } else { topology.route(src, id).iter().rev().nth(1).copied().unwrap_or(src) })
            .collect();
        let mut links = HashMap::new();
        let mut outgoing = Vec::new();
        for (peer, stream) in streams {
            let (tx, rx) = mpsc::unbounded_channel();
            links.insert(peer, LinkQueue { frames: tx, bytes: AtomicU64::new(0) });
            outgoing.push((peer, stream, rx));
        }
        let router = Arc::new(Router {
            id,
            topology,
            next_hop,
            arrives_via,
            links,
            mailbox: Mailbox::default(),
            counters: Counters::default(),
            shutdown: CancellationToken::new(),
            emulation: RwLock::new(None),
            due_horizon: RwLock::new(None),
            timeline: RwLock::new(timeline),
            partial: Mutex::new(HashMap::new()),
            recorder: Recorder::default(),
        });
        for (peer, stream, rx) in outgoing {
            links::spawn(peer, stream, rx, router.clone(), max_frame, router.shutdown.child_token());
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

    /// The clock emulated delays are measured on.
    pub fn clock(&self) -> Clock {
        self.timeline().clock()
    }

    /// The timeline emulated frames are stamped on.
    pub fn timeline(&self) -> Timeline {
        *self.timeline.read().expect("timeline lock")
    }

    /// Sets the link physics for the run that starts (`None`: full speed), and this
    /// node's clock offset from the coordinator's (how its timeline reads).
    pub fn set_emulation(&self, model: Option<LinkModel>, clock_offset_ns: i64) {
        *self.emulation.write().expect("emulation lock") = model;
        let mut timeline = self.timeline.write().expect("timeline lock");
        *timeline = timeline.with_offset(clock_offset_ns);
    }

    /// Sets how far ahead of now an emulated frame may be due (the run's per-iteration
    /// deadline): a frame due later is refused, never held.
    pub fn set_due_horizon(&self, horizon: std::time::Duration) {
        *self.due_horizon.write().expect("horizon lock") = Some(horizon);
    }

    /// How far ahead of now an emulated frame may be due, if a run has said.
    pub fn due_horizon(&self) -> Option<std::time::Duration> {
        *self.due_horizon.read().expect("horizon lock")
    }

    /// The link physics in force.
    pub fn emulation(&self) -> Option<LinkModel> {
        *self.emulation.read().expect("emulation lock")
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
        let emulation = self.emulation();
        let ready_at = match (ready_at, emulation) {
            (Some(causal), Some(model)) => self.ready_from(causal, model.ts_ns),
            _ => Instant::now(),
        };
        if dst == self.id {
            let due_ns = if emulation.is_some() { self.timeline().ns(ready_at) } else { 0 };
            self.deliver(FrameHeader { due_ns, ..header }, payload.into_bytes());
            return Ok(());
        }
        let Some(model) = emulation.filter(|m| m.packetized() && header.tag < SYSTEM_TAG_BASE) else {
            return self.push(header, payload, ready_at, written);
        };
        // Cut-through: the message leaves in packets that every hop passes on as they arrive.
        let payload = payload.into_bytes();
        let packet = model.packet_len(payload.len());
        let count = payload.len().div_ceil(packet).max(1);
        let mut written = written;
        for index in 0..count {
            let part = payload.slice((index * packet).min(payload.len())..((index + 1) * packet).min(payload.len()));
            let header = FrameHeader { packet: index as u32, last: index + 1 == count, ..header };
            let written = if header.last { written.take() } else { None };
            self.push(header, Payload::One(part), ready_at, written)?;
        }
        Ok(())
    }

    /// Takes a frame that arrived on the link from `from`: delivers or forwards it.
    pub fn on_frame(&self, from: NodeId, frame: Frame) -> Result<(), RouteError> {
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
        let ready_at = match self.emulation().filter(|_| header.due_ns > 0) {
            Some(model) => self.ready_from(self.timeline().instant(header.due_ns), model.th_ns),
            None => Instant::now(),
        };
        self.push(forwarded, Payload::One(frame.payload), ready_at, None)
    }

    /// When a frame whose emulated schedule lets it go at `due` is ready to go, now that
    /// the software got to it: software time up to `slack_ns` (t_s at the source, t_h at
    /// a hop: the costs that stand for it in the model) hides inside the emulated time;
    /// beyond that it delays the frame, and the wire time t_w·m is never hidden.
    fn ready_from(&self, due: Instant, slack_ns: u64) -> Instant {
        let now = Instant::now();
        due.max(now.checked_sub(self.clock().duration(slack_ns)).unwrap_or(now))
    }

    /// Before the link from `peer` reads the long payload of `header`, a message for this
    /// node: waits until this node asks for it. This is the rendezvous MPI libraries use
    /// above their eager limit (`links::RENDEZVOUS_ABOVE`): until the receive is posted
    /// the payload stays in the socket and TCP holds its sender back, so a node never
    /// buffers large messages of later steps that it is not ready for (an 8 MiB all-reduce
    /// by recursive doubling held a fourth vector that way). It reads at once when the
    /// node waits for any message that comes in over this link (it may be queued behind
    /// this one), on emulated links (their timing stays as it was), and after
    /// `HOLD_LIMIT` in any case: the hold saves memory, it never decides an outcome.
    pub async fn admit(&self, header: &FrameHeader, peer: NodeId) {
        if header.dst() != self.id || self.emulation().is_some() {
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
    pub fn landing(&self, header: &FrameHeader, len: usize) -> Option<Place> {
        if header.dst() != self.id || header.packet != 0 || !header.last {
            return None;
        }
        let key = MessageKey { run: header.run, iteration: header.iteration, src: header.src(), tag: header.tag };
        self.mailbox.landing(key, len)
    }

    /// A link failed: the wiring is broken and every wait fails with `reason`.
    pub fn link_failed(&self, reason: String) {
        self.mailbox.fail(reason);
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
