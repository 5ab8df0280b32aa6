//! The hop-by-hop router of one node for one wiring: a frame for this node goes to the
//! mailbox, any other frame goes to the link towards the next hop of the topology's
//! route (store-and-forward: a frame is forwarded only once it has been read whole).
//! It knows links only as queues of frames ([`crate::transport::Link`]); it never
//! touches a socket. It also tells a link when to read a long message for this node
//! (`admit`: once it is asked for). The link physics of emulated runs is the layer
//! [`Emulation`], which the router holds for its links and asks when a frame is ready.
//!
//! A neighbour is not trusted with this node's memory: a frame of a run other than the
//! one in progress (or the next, whose first frames may come early) is dropped and
//! counted; a frame whose source's route does not enter this node over the link it came
//! in on closes that link; and what each source may queue here for messages nobody has
//! taken yet, and in this node's outgoing links to be passed on, is held to what the
//! run's schedule brings from it ([`crate::allowance`]; per link, the sum of the sources
//! it brings): past it the link is closed and the run fails naming the source.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use topocomm_proto::flow::{FlowEvent, FlowKind};
use topocomm_proto::frame::{Frame, FrameHeader, SYSTEM_TAG_BASE};
use topocomm_proto::spec::{ClassPhysics, LinkModel, RunSpec, UnknownClass, class_models};
use topocomm_proto::topology::Flow;
use topocomm_proto::{NodeId, Topology};

use topocomm_collectives::comm::assembly::Place;
use topocomm_collectives::comm::fault::LinkFault;
use topocomm_collectives::comm::mailbox::{Allowance, Bound, Delivery, Mailbox, MessageKey, Overdrawn};
use topocomm_collectives::comm::payload::{Payload, Written};
use topocomm_collectives::comm::{CarrierError, Fabric, LinkCapabilities};

use crate::allowance::{self, RunAllowance};
use crate::forwarding::{Charge, Ledger, Overforwarded};
use crate::transport::emulated::{Emulation, LinkModels, Occupancy, Toward};
use crate::transport::pacing::{Clock, Timeline};
use crate::transport::stream::STREAM_LINKS;
use crate::transport::{Endpoint, Link, Outgoing};

/// The sending side of one neighbour link, with what it carried.
struct LinkQueue {
    frames: mpsc::UnboundedSender<Outgoing>,
    /// Payload + header bytes handed to this link for algorithm traffic.
    bytes: AtomicU64,
}

/// Traffic counts of algorithm frames (runtime frames such as barriers are not counted),
/// of the run in progress from the iteration the counts were last reset at; and frames
/// of other runs dropped.
#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    forwarded: AtomicU64,
    /// Frames of the run counted from this iteration on (earlier ones are stragglers).
    from_iteration: AtomicU32,
    dropped: AtomicU64,
}

/// Which runs' frames this router takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runs {
    /// Every run's, unbounded: in-process clusters, whose links are the test's own.
    Any,
    /// Any run's, before the first run's spec arrives (its frames may come first), each
    /// link bounded by the allowance of the first iteration's runtime signals.
    BeforeFirst,
    /// This run's and the next's.
    Current(u64),
}

/// [`Runs`] in atomics: read for every frame, so no lock.
#[derive(Default)]
struct RunWindow {
    /// 0: any run; 1: before the first; 2: the run in `current`.
    mode: AtomicU8,
    current: AtomicU64,
}

impl RunWindow {
    fn set(&self, runs: Runs) {
        let (mode, current) = match runs {
            Runs::Any => (0, 0),
            Runs::BeforeFirst => (1, 0),
            Runs::Current(run) => (2, run),
        };
        self.current.store(current, Ordering::Release);
        self.mode.store(mode, Ordering::Release);
    }

    fn get(&self) -> Runs {
        match self.mode.load(Ordering::Acquire) {
            0 => Runs::Any,
            1 => Runs::BeforeFirst,
            _ => Runs::Current(self.current.load(Ordering::Acquire)),
        }
    }
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
    #[error(
        "node {from} sent a frame from node {src} to node {dst}, but that route does not reach this node from node {from}"
    )]
    WrongLink { from: NodeId, src: u32, dst: u32 },
    #[error("node {} overflowed this node's queue{}: {overdrawn}", overdrawn.charged_node(), relayed(*from, overdrawn.charged_node()))]
    Overdrawn { from: NodeId, overdrawn: Overdrawn },
    #[error("node {} overflowed this node's queue of frames to pass on{}: {overdrawn}", overdrawn.src, relayed(*from, overdrawn.src))]
    Overforwarded { from: NodeId, overdrawn: Overforwarded },
}

impl RouteError {
    /// The node an overflow is charged to: the frames' source (`None`: not an overflow).
    pub fn charged(&self) -> Option<NodeId> {
        match self {
            RouteError::Overdrawn { overdrawn, .. } => Some(overdrawn.charged_node()),
            RouteError::Overforwarded { overdrawn, .. } => Some(overdrawn.src),
            _ => None,
        }
    }
}

/// " (its frames relayed by node `from`)" when the frames charged to `src` came over
/// another node's link.
fn relayed(from: NodeId, src: NodeId) -> String {
    if from == src { String::new() } else { format!(" (its frames relayed by node {from})") }
}

/// The longest a link holds back a long message that no receive has asked for yet.
pub const HOLD_LIMIT: std::time::Duration = std::time::Duration::from_millis(200);

/// One node's router for one wiring epoch.
pub struct Router {
    id: NodeId,
    topology: Topology,
    /// `next_hop[dst]`: the neighbour (a node or a switch) a frame for rank `dst` leaves
    /// through; empty under a policy that routes flows apart (ECMP, Valiant), whose next
    /// hop each frame's flow says ([`Router::next_hop_of`]).
    next_hop: Vec<NodeId>,
    /// `arrives_via[src]`: the neighbour a message from rank `src` comes in from, whatever
    /// its flow ([`Topology::arrives_via`]; empty at a switch, which no message is for).
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
    /// Which runs' frames are taken.
    runs: RunWindow,
    /// What each source has queued in this node's links to be passed on, and may.
    forwarding: Arc<Ledger>,
    /// The first link fault of this wiring, for whoever watches ([`Router::faults`]).
    first_fault: tokio::sync::watch::Sender<Option<LinkFault>>,
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
    ///
    /// It takes frames of every run, unbounded, as in-process clusters need; see
    /// [`Router::start_guarded`] for links that face other hosts.
    pub fn start<L: Link>(id: NodeId, topology: Topology, links: Vec<(NodeId, L)>, timeline: Timeline) -> Arc<Self> {
        Self::start_with(id, topology, links, timeline, false)
    }

    /// [`Router::start`] for a daemon's links: until the first run begins, frames of any
    /// run are taken only within [`allowance::signal_allowance`] per source and per link;
    /// then only the run's and the next one's, within the run's allowances (see
    /// [`Router::begin_run`]).
    pub fn start_guarded<L: Link>(
        id: NodeId,
        topology: Topology,
        links: Vec<(NodeId, L)>,
        timeline: Timeline,
    ) -> Arc<Self> {
        Self::start_with(id, topology, links, timeline, true)
    }

    fn start_with<L: Link>(
        id: NodeId,
        topology: Topology,
        links: Vec<(NodeId, L)>,
        timeline: Timeline,
        guarded: bool,
    ) -> Arc<Self> {
        // Destinations and sources are ranks; this node and the hops between are any
        // vertex, switches included. A switch is no destination: nothing arrives for it.
        let next_hop = match topology.routes().by_destination() {
            true => (0..topology.p()).map(|dst| topology.next_hop(id, Flow::new(id, dst, 0))).collect(),
            false => Vec::new(),
        };
        let arrives_via = match topology.is_switch(id) {
            true => Vec::new(),
            false => (0..topology.p()).map(|src| topology.arrives_via(src, id)).collect(),
        };
        let topology_p = topology.p();
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
            runs: RunWindow::default(),
            forwarding: Ledger::new(topology_p),
            first_fault: tokio::sync::watch::Sender::new(None),
            recorder: Recorder::default(),
        });
        if guarded {
            router.runs.set(Runs::BeforeFirst);
            let signals = RunAllowance::signals_only(router.topology.p());
            router.mailbox.set_allowance(Some(Allowance {
                source: Bound::Each(allowance::signal_allowance(router.topology.p())),
                link: Bound::Each(allowance::signal_allowance(router.topology.p())),
            }));
            router.forwarding.set_allowance(Some(&signals.forwarded));
        }
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

    /// Starts `spec`'s run: from now on only its frames and the next run's are taken, and
    /// each source may hold what `allowance` says of messages not yet taken here and of
    /// frames to pass on; each link, the sum of the sources whose route it is.
    pub fn begin_run(&self, spec: &RunSpec, allowance: &RunAllowance) {
        self.runs.set(Runs::Current(spec.run));
        let mut by_link = vec![0u64; self.topology.vertices()];
        for (src, &delivered) in allowance.delivered.iter().enumerate() {
            if src != self.id
                && let Some(link) = self.arrives_via.get(src).and_then(|&via| by_link.get_mut(via))
            {
                *link = link.saturating_add(delivered);
            }
        }
        let bounds =
            Allowance { source: Bound::ByNode(allowance.delivered.clone()), link: Bound::ByNode(by_link.into()) };
        self.mailbox.begin_run(spec.run, Some(bounds));
        self.forwarding.set_allowance(Some(&allowance.forwarded));
    }

    /// Takes frames of every run again, unbounded (in-process clusters between runs).
    pub fn take_any_run(&self) {
        self.runs.set(Runs::Any);
        self.mailbox.set_allowance(None);
        self.forwarding.set_allowance(None);
    }

    /// What the link from `peer` may hold here of messages not yet taken (`None`: no bound).
    pub fn link_allowance(&self, peer: NodeId) -> Option<u64> {
        self.mailbox.allowance().map(|allowance| allowance.link.of(peer))
    }

    /// Bytes of messages from `src` queued here that nobody has taken yet.
    pub fn held_by_source(&self, src: NodeId) -> u64 {
        self.mailbox.held_by_source(src)
    }

    /// Bytes of frames from `src` queued in this node's links to be passed on.
    pub fn forwarding_from(&self, src: NodeId) -> u64 {
        self.forwarding.held(src)
    }

    /// Watches for this wiring's first link fault (the daemon tells the coordinator).
    pub fn faults(&self) -> tokio::sync::watch::Receiver<Option<LinkFault>> {
        self.first_fault.subscribe()
    }

    /// Bytes the link from `peer` has queued here that nobody has taken yet.
    pub fn held_from(&self, peer: NodeId) -> u64 {
        self.mailbox.held_from(peer)
    }

    /// Frames of other runs dropped since this wiring began.
    pub fn frames_dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }

    /// Whether a frame of `run` is taken.
    fn takes_run(&self, run: u64) -> bool {
        match self.runs.get() {
            Runs::Any | Runs::BeforeFirst => true,
            Runs::Current(current) => run == current || run == current.saturating_add(1),
        }
    }

    /// Whether an algorithm frame of `header`'s run and iteration is counted.
    fn counts(&self, header: &FrameHeader) -> bool {
        header.tag < SYSTEM_TAG_BASE
            && header.iteration >= self.counters.from_iteration.load(Ordering::Relaxed)
            && match self.runs.get() {
                Runs::Current(current) => header.run == current,
                Runs::Any | Runs::BeforeFirst => true,
            }
    }

    /// The neighbour a frame of `header`'s flow leaves this node through (its
    /// destination is not this node).
    fn next_hop_of(&self, header: &FrameHeader) -> NodeId {
        match self.next_hop.get(header.dst()) {
            Some(&via) => via,
            None => self.topology.next_hop(self.id, header.flow()),
        }
    }

    /// The node before this one on `flow`'s route, `None` if the route does not pass
    /// here: walked hop by hop ([`Topology::next_hop`]), at most the diameter's steps and
    /// no allocation, since every forwarded frame (every packet of a cut-through message)
    /// asks.
    fn hop_before_me(&self, flow: Flow) -> Option<NodeId> {
        let mut at = flow.src;
        while at != flow.dst {
            let next = self.topology.next_hop(at, flow);
            if next == self.id {
                return Some(at);
            }
            at = next;
        }
        None
    }

    /// Screens a frame that came in from `from` before anything is done with it: `false`
    /// for a frame of another run (dropped and counted), an error for one whose route
    /// does not come in over this link.
    pub fn screen(&self, from: NodeId, header: &FrameHeader) -> Result<bool, RouteError> {
        let p = self.topology.p();
        for node in [header.src, header.dst] {
            if node as usize >= p {
                return Err(RouteError::UnknownNode { node, p });
            }
        }
        let (src, dst) = (header.src(), header.dst());
        let previous = match dst == self.id {
            true => self.arrives_via.get(src).copied(),
            false => self.hop_before_me(header.flow()),
        };
        if previous != Some(from) {
            return Err(RouteError::WrongLink { from, src: header.src, dst: header.dst });
        }
        if !self.takes_run(header.run) {
            let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::debug!(run = header.run, from, dropped, "dropped a frame of another run");
            return Ok(false);
        }
        Ok(true)
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

    /// Gives each link the physics of its class for the run that starts, over the
    /// emulation's model (`spec.classes`; none: every link has the model), a message's
    /// start-up that of the slowest class on its route. Call after
    /// [`Router::set_emulation`].
    pub fn set_link_classes(&self, classes: &[ClassPhysics]) -> Result<(), UnknownClass> {
        let Some(model) = self.emulation.model().filter(|_| !classes.is_empty()) else {
            self.emulation.set_links(LinkModels::default());
            return Ok(());
        };
        let models = class_models(model, classes, &self.topology.class_names())?;
        let of_link = |peer: NodeId| {
            let class = self.topology.link_class(self.id, peer).unwrap_or(0);
            models.get(class).copied().unwrap_or(model)
        };
        let from = self.links.keys().map(|&peer| (peer, of_link(peer))).collect();
        // Towards each flow: the next link's t_h and t_w, and the start-up of the
        // slowest-starting class its route crosses, which a message pays at its source
        // (`first_link_model`, as the simulator has it; a hop pays no t_s).
        let toward = Some(Toward { id: self.id, topology: self.topology.clone(), classes: models });
        self.emulation.set_links(LinkModels { toward, from });
        Ok(())
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
        if self.counts(&header) {
            self.counters.sent.fetch_add(1, Ordering::Relaxed);
        }
        let mut header = header;
        if dst != self.id {
            // Under one-port, a step after the last message through the output port.
            self.emulation.source_step(&mut header);
        }
        self.record(FlowKind::Send, &header, payload.len(), (dst != self.id).then(|| self.next_hop_of(&header)));
        let ready_at = self.emulation.source_ready(ready_at);
        if dst == self.id {
            let due_ns = self.emulation.self_due_ns(ready_at);
            return self.deliver(FrameHeader { due_ns, ..header }, payload.into_bytes(), None);
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
        if !self.screen(from, &header)? {
            return Ok(());
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
            return self.deliver(header, frame.payload, Some(from));
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
            to = self.next_hop_of(&header),
            bytes = frame.payload.len(),
            "forward"
        );
        if header.packet == 0 && self.counts(&header) {
            self.counters.forwarded.fetch_add(1, Ordering::Relaxed);
        }
        let bytes = (FrameHeader::ENCODED_LEN + frame.payload.len()) as u64;
        let charge = self
            .forwarding
            .charge(header.src(), bytes)
            .map_err(|overdrawn| RouteError::Overforwarded { from, overdrawn })?;
        // Under emulation the frame is ready to go on when its tail arrived here.
        let ready_at = self.emulation.hop_ready(&header, from);
        self.push_charged(forwarded, Payload::One(frame.payload), ready_at, None, charge, Some(from))
    }

    /// Zeroes the traffic counters at the start of the timed iterations: from now on
    /// only frames of `iteration` and later are counted (a frame of an earlier one
    /// forwarded late is not the timed iterations' traffic).
    pub fn reset_traffic(&self, iteration: u32) {
        self.counters.from_iteration.store(iteration, Ordering::Relaxed);
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

    /// Hands a message (or, under cut-through, one of its packets) that came in from
    /// `via` (`None`: sent to itself) to the mailbox; a link past its allowance is refused.
    fn deliver(&self, header: FrameHeader, payload: Bytes, via: Option<NodeId>) -> Result<(), RouteError> {
        let key = MessageKey { run: header.run, iteration: header.iteration, src: header.src(), tag: header.tag };
        let overdrawn = |overdrawn| RouteError::Overdrawn { from: via.unwrap_or(self.id), overdrawn };
        let payload = if header.packet == 0 && header.last {
            payload
        } else {
            let mut partial = self.partial.lock().expect("reassembly lock");
            if let Some(via) = via {
                self.mailbox.hold_partial(via, key.src, payload.len() as u64).map_err(overdrawn)?;
            }
            let message = partial.entry(key).or_default();
            message.extend_from_slice(&payload);
            if !header.last {
                return Ok(());
            }
            let whole = partial.remove(&key).expect("just extended").freeze();
            if let Some(via) = via {
                self.mailbox.release_partial(via, key.src, whole.len() as u64);
            }
            whole
        };
        self.record(FlowKind::Deliver, &header, payload.len(), None);
        self.mailbox
            .deliver(key, Delivery { payload, step: header.step, due_ns: header.due_ns }, via)
            .map_err(overdrawn)
    }

    fn push(
        &self,
        header: FrameHeader,
        payload: Payload,
        ready_at: Instant,
        written: Option<Written>,
    ) -> Result<(), RouteError> {
        self.push_charged(header, payload, ready_at, written, None, None)
    }

    /// [`Router::push`], the frame carrying `charge` (a forwarded frame's, to its source)
    /// until its link is done with it, and the neighbour it came in `from` (`None`: sent
    /// here).
    fn push_charged(
        &self,
        header: FrameHeader,
        payload: Payload,
        ready_at: Instant,
        written: Option<Written>,
        charge: Option<Charge>,
        from: Option<NodeId>,
    ) -> Result<(), RouteError> {
        let via = self.next_hop_of(&header);
        let link = self.links.get(&via).ok_or(RouteError::LinkClosed(via))?;
        if self.counts(&header) {
            link.bytes.fetch_add((FrameHeader::ENCODED_LEN + payload.len()) as u64, Ordering::Relaxed);
        }
        let outgoing = Outgoing { header, payload, ready_at, written, charge, from };
        link.frames.send(outgoing).map_err(|_| RouteError::LinkClosed(via))
    }
}

/// How long a receive on the real clock polls for its message before it sleeps.
const BUSY_POLL: Duration = Duration::from_millis(1);

/// What `Comm` sees of a node: its router, over links to its neighbours.
impl Fabric for Router {
    fn id(&self) -> NodeId {
        self.id
    }

    fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Every link of a wiring, TCP or in memory, behaves as a stream link does towards an
    /// algorithm; under emulation the model's one start-up per message holds instead.
    fn links(&self) -> LinkCapabilities {
        match self.emulation.is_on() {
            true => STREAM_LINKS.emulated(),
            false => STREAM_LINKS,
        }
    }

    fn mailbox(&self) -> &Mailbox {
        &self.mailbox
    }

    fn originate(
        &self,
        header: FrameHeader,
        payload: Payload,
        causal_ns: u64,
        written: Option<Written>,
    ) -> Result<(), CarrierError> {
        let ready_at = (causal_ns > 0).then(|| self.timeline().stamped(causal_ns));
        Router::originate(self, header, payload, ready_at, written).map_err(CarrierError::new)
    }

    fn emulated_stamp(&self, instant: Instant) -> Option<u64> {
        self.emulation.is_on().then(|| self.timeline().stamp(instant))
    }

    fn busy_poll(&self) -> Option<Duration> {
        (self.clock() == Clock::Real).then_some(BUSY_POLL)
    }

    fn taken(&self, due_ns: u64) {
        // The field is computed only when the trace line is enabled.
        tracing::trace!(late_us = crate::transport::pacing::late_us(self.timeline().stamped(due_ns)), "taken");
    }
}

impl Endpoint for Router {
    fn id(&self) -> NodeId {
        self.id
    }

    fn emulation(&self) -> &Emulation {
        &self.emulation
    }

    /// Stamps a frame as its turn on the link to `peer` comes, and records a forwarded
    /// message's leaving then: when its link takes it, as the simulator records it, not
    /// when it was handed over ahead of its time.
    fn depart(&self, peer: NodeId, occupancy: &mut Occupancy, outgoing: &mut Outgoing) {
        self.emulation.depart(occupancy, outgoing);
        let header = &outgoing.header;
        if header.hops > 0 && header.packet == 0 && self.counts(header) {
            self.record(FlowKind::Forward, header, outgoing.payload.len(), Some(peer));
        }
    }

    fn on_frame(&self, from: NodeId, frame: Frame) -> Result<(), LinkFault> {
        self.route(from, frame).map_err(|error| match error.charged() {
            Some(charged) => LinkFault::Overflowed { peer: from, charged, reason: error.to_string() },
            None => LinkFault::Rejected { peer: from, reason: error.to_string() },
        })
    }

    fn screen(&self, from: NodeId, header: &FrameHeader) -> Result<bool, LinkFault> {
        Router::screen(self, from, header)
            .map_err(|error| LinkFault::Rejected { peer: from, reason: error.to_string() })
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

    /// A link failed: the wiring is broken, every wait fails with `fault`, and what was
    /// queued here for receives (whole messages and packets of unfinished ones) is
    /// dropped at once.
    fn link_failed(&self, fault: LinkFault) {
        self.first_fault.send_if_modified(|first| first.is_none().then(|| *first = Some(fault.clone())).is_some());
        self.mailbox.fail(fault);
        self.partial.lock().expect("reassembly lock").clear();
    }
}
