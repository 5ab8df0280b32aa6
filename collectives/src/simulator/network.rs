//! The virtual network of the simulator: every node's mailbox, every link direction's
//! occupancy, and the queue of timed events, in integer nanoseconds of virtual time. A
//! frame crosses each link of its route under the same physics the emulation gives real
//! links ([`link_free_ns`], [`ready_after`], [`split_into_packets`]). Two events move
//! it: it *enters* a link when its head is ready to go there (at its source when the
//! schedule lets it go, at a hop when its tail has arrived, or its head under
//! cut-through), and it is *delivered* when its tail reaches its destination. Events
//! happen in time order, so a link carries frames in the order they became ready to go
//! (first come, first served; at the same instant, in the order they were sent), never
//! in the order software happened to hand them over.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::task::Waker;

use bytes::Bytes;
use rustc_hash::FxHashMap;
use topocomm_proto::flow::{FlowEvent, FlowKind};
use topocomm_proto::frame::{FrameHeader, SYSTEM_TAG_BASE, Tag};
use topocomm_proto::spec::LinkModel;
use topocomm_proto::{NodeId, Topology};

use crate::algorithms::blocks::concat;
use crate::comm::mailbox::Delivery;
use crate::comm::payload::Payload;
use crate::physics::{head_ready_ns, link_free_ns, ready_after, split_into_packets};

/// One direction of a link: when it is free to carry the next frame, and what it carried.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinkState {
    free_ns: u64,
    /// Header and payload bytes of the frames it carried.
    pub bytes: u64,
}

/// What a node holds: messages nobody took yet, the receives it waits in (usually one at
/// most; a schedule's concurrent blocks wait in several), and the packets of messages
/// whose last packet has not come.
#[derive(Default)]
struct NodeState {
    mailbox: Vec<(NodeId, Tag, Delivery)>,
    waiting: Vec<(NodeId, Tag, Waker)>,
    partial: Vec<(NodeId, Tag, Vec<Bytes>)>,
}

/// A frame on its way: what happens to it at its event.
struct Event {
    header: FrameHeader,
    payload: Bytes,
    step: Step,
}

/// When an event happens, and where it waits in the slab: the queue orders these small
/// keys (earliest first; at the same instant, in the order they were made), not the
/// events themselves, which stay where they were put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Scheduled {
    at_ns: u64,
    /// Order of scheduling: events at the same instant happen in the order they were made.
    order: u64,
    slot: u32,
}

/// What happens to a frame at an event.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Its head starts on the link `from` → `to` (ready to go there at `ready_ns`).
    Enter { from: NodeId, to: NodeId, ready_ns: u64 },
    /// Its tail reached `node`, its destination.
    Deliver { node: NodeId },
}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed, so that the standard max-heap pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at_ns, other.order).cmp(&(self.at_ns, self.order))
    }
}

/// Totals over the whole network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Messages the nodes originated.
    pub messages: u64,
    /// Messages passed on by intermediate nodes (a packetised message counts once).
    pub forwarded: u64,
    /// Frames that crossed a link (one per packet per link).
    pub frame_hops: u64,
}

/// The state of the virtual network (see the module docs).
pub struct Network {
    topology: Topology,
    model: LinkModel,
    now_ns: u64,
    order: u64,
    events: BinaryHeap<Scheduled>,
    /// The events the queue's keys point to (`None`: a free slot, listed in `free`).
    slab: Vec<Option<Event>>,
    free: Vec<u32>,
    nodes: Vec<NodeState>,
    links: FxHashMap<(u32, u32), LinkState>,
    totals: Totals,
    /// Every send, forward and delivery, while recording.
    recording: Option<Vec<FlowEvent>>,
}

/// Why a frame could not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("frame names node {node}, but this network has {p} nodes")]
pub struct UnknownNode {
    pub node: NodeId,
    pub p: usize,
}

impl Network {
    pub fn new(topology: Topology, model: LinkModel, record: bool) -> Self {
        let nodes = (0..topology.p()).map(|_| NodeState::default()).collect();
        Network {
            topology,
            model,
            now_ns: 0,
            order: 0,
            events: BinaryHeap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            nodes,
            links: FxHashMap::default(),
            totals: Totals::default(),
            recording: record.then(Vec::new),
        }
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The virtual time now, in nanoseconds since the start.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// The time of the earliest pending event, if any.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.events.peek().map(|event| event.at_ns)
    }

    /// Advances the clock to `at_ns` and carries out every event due then, in order
    /// (events they schedule for the same instant included).
    pub fn advance_to(&mut self, at_ns: u64) {
        self.now_ns = at_ns;
        while self.events.peek().is_some_and(|event| event.at_ns == at_ns) {
            let slot = self.events.pop().expect("peeked").slot;
            let event = self.slab[slot as usize].take().expect("a scheduled event is in its slot");
            self.free.push(slot);
            match event.step {
                Step::Enter { from, to, ready_ns } => self.carry(from, to, event.header, event.payload, ready_ns),
                Step::Deliver { node } => self.deliver(node, event.header, event.payload),
            }
        }
    }

    /// Node `me` sends a message: under the physics its frames are ready to go at
    /// `causal_ns` (when its schedule let it go; 0: now), and leave towards the next hop.
    pub fn originate(
        &mut self,
        me: NodeId,
        header: FrameHeader,
        payload: Payload,
        causal_ns: u64,
    ) -> Result<(), UnknownNode> {
        let (dst, p) = (header.dst(), self.topology.p());
        if dst >= p {
            return Err(UnknownNode { node: dst, p });
        }
        let algorithm = header.tag < SYSTEM_TAG_BASE;
        if algorithm {
            self.totals.messages += 1;
        }
        let next = (dst != me).then(|| self.topology.next_hop(me, dst));
        self.record(FlowKind::Send, me, &header, payload.len(), next);
        let ready_ns = if causal_ns > 0 { ready_after(causal_ns, self.now_ns, self.model.ts_ns) } else { self.now_ns };
        let Some(next) = next else {
            self.deliver(me, FrameHeader { due_ns: ready_ns, ..header }, payload.into_bytes());
            return Ok(());
        };
        let model = algorithm.then_some(self.model);
        match split_into_packets(model, header, payload) {
            Err(whole) => self.enter(me, next, header, whole.into_bytes(), ready_ns),
            Ok(packets) => {
                for (header, packet) in packets {
                    self.enter(me, next, header, packet.into_bytes(), ready_ns);
                }
            }
        }
        Ok(())
    }

    /// Takes the oldest message from `src` with `tag` for node `me`, or (with `waker`)
    /// notes that `me` waits for it.
    pub fn take(&mut self, me: NodeId, src: NodeId, tag: Tag, waker: Option<&Waker>) -> Option<Delivery> {
        let node = &mut self.nodes[me];
        if let Some(index) = node.mailbox.iter().position(|(from, t, _)| (*from, *t) == (src, tag)) {
            node.waiting.retain(|(s, t, _)| (*s, *t) != (src, tag));
            return Some(node.mailbox.remove(index).2);
        }
        if let Some(waker) = waker {
            match node.waiting.iter_mut().find(|(s, t, _)| (*s, *t) == (src, tag)) {
                Some(waiting) => waiting.2.clone_from(waker),
                None => node.waiting.push((src, tag, waker.clone())),
            }
        }
        None
    }

    /// Messages delivered and never taken, over every node.
    pub fn unclaimed(&self) -> Vec<(NodeId, usize)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| !node.mailbox.is_empty())
            .map(|(id, node)| (id, node.mailbox.len()))
            .collect()
    }

    /// What node `me` waits for, if it waits: (source, tag).
    pub fn waiting_for(&self, me: NodeId) -> Option<(NodeId, Tag)> {
        self.nodes[me].waiting.first().map(|(src, tag, _)| (*src, *tag))
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// Every link direction that carried a frame, as ((from, to), state).
    pub fn links(&self) -> impl Iterator<Item = ((NodeId, NodeId), &LinkState)> {
        self.links.iter().map(|(&(from, to), state)| ((from as NodeId, to as NodeId), state))
    }

    /// Hands over what was recorded (empty when not recording).
    pub fn take_recording(&mut self) -> Vec<FlowEvent> {
        self.recording.take().unwrap_or_default()
    }

    /// A frame ready to go at `ready_ns` is to cross the link `from` → `to`: it enters
    /// the link when its head is ready (now, if that has passed).
    fn enter(&mut self, from: NodeId, to: NodeId, header: FrameHeader, payload: Bytes, ready_ns: u64) {
        let head_ns = if header.tag < SYSTEM_TAG_BASE {
            head_ready_ns(&self.model, &header, payload.len(), ready_ns)
        } else {
            ready_ns
        };
        self.schedule(head_ns.max(self.now_ns), header, payload, Step::Enter { from, to, ready_ns });
    }

    /// The link `from` → `to` carries a frame whose head is ready now: once the link is
    /// free (one transfer at a time), for t_s, t_h and t_w · bytes as the physics says.
    /// Its tail reaches `to` then, which delivers it or passes it on.
    fn carry(&mut self, from: NodeId, to: NodeId, header: FrameHeader, payload: Bytes, ready_ns: u64) {
        let now = self.now_ns;
        let physics = header.tag < SYSTEM_TAG_BASE;
        if header.hops > 0 && physics && header.packet == 0 {
            self.totals.forwarded += 1;
            self.record(FlowKind::Forward, from, &header, payload.len(), Some(to));
        }
        let link = self.links.entry((from as u32, to as u32)).or_default();
        let mut arrived = header;
        if physics {
            link.bytes += (FrameHeader::ENCODED_LEN + payload.len()) as u64;
            link.free_ns = link_free_ns(&self.model, &header, payload.len(), ready_ns, link.free_ns);
            arrived.due_ns = link.free_ns.max(now);
        }
        self.totals.frame_hops += 1;
        if header.dst() == to {
            self.schedule(arrived.due_ns.max(now), arrived, payload, Step::Deliver { node: to });
            return;
        }
        // Passed on when its tail has arrived (software at a hop takes no time).
        let next = self.topology.next_hop(to, header.dst());
        let ready_ns = if arrived.due_ns > 0 { ready_after(arrived.due_ns, now, self.model.th_ns) } else { now };
        self.enter(to, next, FrameHeader { hops: header.hops + 1, ..arrived }, payload, ready_ns);
    }

    /// A frame for node `me` is released: a whole message goes to the mailbox (waking a
    /// receive that waits for it); a packet waits for the rest of its message.
    fn deliver(&mut self, me: NodeId, header: FrameHeader, payload: Bytes) {
        let (src, tag) = (header.src(), header.tag);
        let payload = if header.packet == 0 && header.last {
            payload
        } else {
            let partial = &mut self.nodes[me].partial;
            let index = match partial.iter().position(|(from, t, _)| (*from, *t) == (src, tag)) {
                Some(index) => index,
                None => {
                    partial.push((src, tag, Vec::new()));
                    partial.len() - 1
                }
            };
            partial[index].2.push(payload);
            if !header.last {
                return;
            }
            concat(&partial.swap_remove(index).2)
        };
        self.record(FlowKind::Deliver, me, &header, payload.len(), None);
        let node = &mut self.nodes[me];
        node.mailbox.push((src, tag, Delivery { payload, step: header.step, due_ns: header.due_ns }));
        if let Some(index) = node.waiting.iter().position(|(s, t, _)| (*s, *t) == (src, tag)) {
            let (_, _, waker) = node.waiting.swap_remove(index);
            waker.wake();
        }
    }

    fn schedule(&mut self, at_ns: u64, header: FrameHeader, payload: Bytes, step: Step) {
        self.order += 1;
        let event = Some(Event { header, payload, step });
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slab[slot as usize] = event;
                slot
            }
            None => {
                self.slab.push(event);
                u32::try_from(self.slab.len() - 1).expect("fewer than 4 billion events in flight")
            }
        };
        self.events.push(Scheduled { at_ns, order: self.order, slot });
    }

    fn record(&mut self, kind: FlowKind, node: NodeId, header: &FrameHeader, bytes: usize, next: Option<NodeId>) {
        if let Some(events) = &mut self.recording
            && header.tag < SYSTEM_TAG_BASE
        {
            events.push(FlowEvent::of(self.now_ns, node, kind, header, bytes, next));
        }
    }
}
