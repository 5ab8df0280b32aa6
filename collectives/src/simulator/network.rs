//! The virtual network of the simulator: every node's mailbox, every link direction's
//! occupancy, and the queue of timed events, in integer nanoseconds of virtual time. A
//! frame crosses each link of its route under the same physics the emulation gives real
//! links ([`link_free_ns`], [`ready_after`], [`split_into_packets`]). Two events move
//! it: it *enters* a link when its head is ready to go there (at its source when the
//! schedule lets it go, at a hop when its tail has arrived, or its head under
//! cut-through), and it is *delivered* when its tail reaches its destination. Events
//! happen in time order, so a link carries frames in the order they became ready to go
//! (first come, first served), never in the order software happened to hand them over.
//! Of frames ready at the same instant, a node sends on first those that came in from
//! its lowest-numbered neighbour, and its own messages last, in the order it sent them
//! ([`Network::advance_to`]): a switch's output port arbitrating its input ports in a
//! fixed order, which the routers' links follow too (`node::transport::departures`).

use std::task::Waker;

use bytes::Bytes;
use rustc_hash::FxHashMap;
use topocomm_proto::flow::{FlowEvent, FlowKind};
use topocomm_proto::frame::{FrameHeader, SYSTEM_TAG_BASE, Tag};
use topocomm_proto::spec::{LinkModel, Ports as PortModel};
use topocomm_proto::{NodeId, Topology, TopologyKind};

use super::event_queue::EventQueue;
use super::huge_pages;
use super::store::{Chunked, Slab};
use super::watch::{Watch, Watched};
use crate::comm::mailbox::Delivery;
use crate::comm::payload::{Payload, concat};
use crate::physics::{
    first_link_model, head_ready_ns, link_free_ns, occupancy_ns, port_step, ready_after, received_ns, sender_free_ns,
    split_into_packets,
};

/// One direction of a link: when it is free to carry the next frame, and what it carried.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinkState {
    free_ns: u64,
    /// Header and payload bytes of the frames it carried.
    pub bytes: u64,
}

/// A one-port node's two ports ([`PortModel::One`]): when its output port is free to send
/// the next frame over any of its links and its input port to take the next from any,
/// and the step of the last message through each ([`port_step`]).
#[derive(Debug, Default, Clone, Copy)]
struct NodePorts {
    output_free_ns: u64,
    input_free_ns: u64,
    output_step: u16,
    input_step: u16,
}

/// What the network holds for one node, in 20 bytes and no allocation of its own: its
/// messages nobody took yet, as a list through the network's letters (oldest first), and
/// the receive it waits in, woken by the node's own waker (the engine's, which the
/// network makes again when it wakes the node: `super::node_waker`). A receive polled
/// with another waker, and those of a schedule's concurrent blocks beyond the first, wait
/// in `Network::more_waiting`, with their wakers.
struct NodeState {
    first: u32,
    last: u32,
    /// The (source, tag) of the message the node waits for.
    waiting: Option<(u32, Tag)>,
}

impl NodeState {
    const EMPTY: NodeState = NodeState { first: NONE, last: NONE, waiting: None };
}

/// No letter (the end of a list).
const NONE: u32 = u32::MAX;

/// The `came_from` of a frame entering its source's link: after every neighbour's.
const SENT_HERE: u32 = u32::MAX;

/// A message in a node's mailbox.
struct Letter {
    src: u32,
    tag: Tag,
    /// The next letter of the same node's list.
    next: u32,
    delivery: Delivery,
}

/// A frame on its way: what happens to it at its event.
struct Event {
    header: FrameHeader,
    payload: Bytes,
    kind: EventKind,
}

/// What happens to a frame at an event.
#[derive(Debug, Clone, Copy)]
enum EventKind {
    /// Its head starts on the link `from` → `to` (ready to go there at `ready_ns`),
    /// having come in from `came_from` ([`SENT_HERE`]: `from` sent it).
    Enter { from: u32, to: u32, came_from: u32, ready_ns: u64 },
    /// Its tail reached `node`, its destination.
    Deliver { node: u32 },
}

/// Every link direction's state. On a grid, ring or hypercube (a node has a few
/// neighbours, one per port): per node that sent, a table of its ports in groups of
/// [`PORT_GROUP`], each group's states made when one of its ports is first used; on the
/// full topology (p - 1 neighbours each): a hash map of the directions used. An
/// all-reduce uses every port of every node, and this takes a third of what the map
/// took, with no rehashing as it grows; a broadcast's node uses one or two ports of a
/// hypercube's 24, and a group of them is all it gets. On a switched network, whose
/// links are a few per rank and whose switches are few: every vertex's neighbours
/// sorted, in one array, and every link direction's state beside them.
enum Links {
    Rows {
        ports: Ports,
        /// Each node's table in `tables`, plus one (0: none yet); where one group holds
        /// every port (a ring's, a 2-D grid's, a hypercube of up to 16 nodes), the node's
        /// group itself, with no table.
        table_of: Vec<u32>,
        /// Each group's states in `groups`, plus one (0: none yet).
        tables: Chunked<u32>,
        groups: Chunked<[LinkState; PORT_GROUP]>,
    },
    Map(FxHashMap<(u32, u32), LinkState>),
    Sorted {
        /// Vertex v's neighbours are `neighbours[first[v]..first[v + 1]]`, the state of
        /// its link to the i-th of them `states[first[v] + i]`.
        first: Vec<u32>,
        neighbours: Vec<u32>,
        states: Vec<LinkState>,
    },
}

/// Ports whose states are made together.
const PORT_GROUP: usize = 4;

/// How a node's neighbours are numbered.
enum Ports {
    /// Port k: the neighbour across dimension k (bit k of the id).
    Hypercube { dimension: usize },
    /// Ports 2k and 2k + 1: the neighbours one up and one down in dimension k, of
    /// (stride, extent) `dims[k]` (row-major ids, the last coordinate fastest).
    Grid { dims: Vec<(usize, usize)> },
}

impl Ports {
    fn count(&self) -> usize {
        match self {
            Ports::Hypercube { dimension } => *dimension,
            Ports::Grid { dims } => 2 * dims.len(),
        }
    }

    /// The port of `from` that leads to its neighbour `to`.
    ///
    /// On a grid, neighbours differ in one coordinate k, by one or (around a wrap) by
    /// extent - 1, so their ids differ by stride_k or (extent_k - 1) stride_k, a
    /// difference no other dimension's neighbours have (a dimension of extent 1 has
    /// none; one of extent 2 has one neighbour, which both ports lead to: port 2k): the
    /// port is found from the difference alone, with no division.
    fn port(&self, from: NodeId, to: NodeId) -> usize {
        match self {
            Ports::Hypercube { .. } => (from ^ to).trailing_zeros() as usize,
            Ports::Grid { dims } => {
                let difference = from.abs_diff(to);
                let (k, up) = dims
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, extent))| *extent > 1)
                    .find_map(|(k, &(stride, extent))| match difference {
                        _ if extent == 2 && difference == stride => Some((k, true)),
                        _ if difference == stride => Some((k, to > from)),
                        _ if difference == (extent - 1) * stride => Some((k, to < from)),
                        _ => None,
                    })
                    .expect("a neighbour differs in one coordinate");
                2 * k + usize::from(!up)
            }
        }
    }
}

impl Links {
    fn new(topology: &Topology) -> Self {
        let ports = match topology.kind() {
            _ if topology.switched().is_some() => return Links::sorted(topology),
            TopologyKind::Full => return Links::Map(FxHashMap::default()),
            TopologyKind::Hypercube => Ports::Hypercube { dimension: topology.dimension() },
            _ => {
                let extents = topology.dims();
                let stride = |k: usize| extents[k + 1..].iter().product::<usize>();
                Ports::Grid { dims: (0..extents.len()).map(|k| (stride(k), extents[k])).collect() }
            }
        };
        let (table_of, tables, groups) =
            (huge_pages::vec_of(topology.vertices(), |_| 0), Chunked::default(), Chunked::default());
        Links::Rows { ports, table_of, tables, groups }
    }

    /// Every vertex's links, in the order of its sorted neighbours.
    fn sorted(topology: &Topology) -> Self {
        let vertices = topology.vertices();
        let (mut first, mut neighbours) = (Vec::with_capacity(vertices + 1), Vec::new());
        first.push(0);
        for v in 0..vertices {
            neighbours.extend(topology.neighbours(v).into_iter().map(|w| w as u32));
            first.push(u32::try_from(neighbours.len()).expect("fewer than 2^32 link directions"));
        }
        let states = huge_pages::vec_of(neighbours.len(), |_| LinkState::default());
        Links::Sorted { first, neighbours, states }
    }

    /// The state of the link `from` → `to` (neighbours).
    fn state(&mut self, from: NodeId, to: NodeId) -> &mut LinkState {
        match self {
            Links::Map(map) => map.entry((from as u32, to as u32)).or_default(),
            Links::Sorted { first, neighbours, states } => {
                let start = first[from] as usize;
                let row = &neighbours[start..first[from + 1] as usize];
                let port = row.binary_search(&(to as u32)).expect("a frame crosses a link");
                &mut states[start + port]
            }
            Links::Rows { ports, table_of, tables, groups } => {
                let port = ports.port(from, to);
                let group = if ports.count() <= PORT_GROUP {
                    // One group holds all the node's ports: the node's entry is its group.
                    &mut table_of[from]
                } else {
                    if table_of[from] == 0 {
                        table_of[from] = tables.run(ports.count().div_ceil(PORT_GROUP)) + 1;
                    }
                    tables.at_mut(table_of[from] - 1 + (port / PORT_GROUP) as u32)
                };
                if *group == 0 {
                    *group = groups.run(1) + 1;
                }
                &mut groups.at_mut(*group - 1)[port % PORT_GROUP]
            }
        }
    }
}

/// The link direction that carried the most bytes so far, and how many (of equals, the
/// lowest (from, to)), kept up as frames cross: a link's bytes only grow, so the one
/// that held the most when it was last counted is the busiest at the end (no pass over
/// p log p link states at the end of a hypercube's run).
#[derive(Debug, Default, Clone, Copy)]
struct Busiest(Option<((NodeId, NodeId), u64)>);

impl Busiest {
    fn counted(&mut self, link: (NodeId, NodeId), bytes: u64) {
        let busier = |(best_link, best_bytes): ((NodeId, NodeId), u64)| {
            (bytes, std::cmp::Reverse(link)) > (best_bytes, std::cmp::Reverse(best_link))
        };
        if bytes > 0 && self.0.is_none_or(busier) {
            self.0 = Some((link, bytes));
        }
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
    /// Each link class's physics, by class id; empty: every link has `model`.
    class_models: Vec<LinkModel>,
    now_ns: u64,
    events_due: EventQueue,
    /// The events the queue's entries point to.
    events: Slab<Event>,
    nodes: Vec<NodeState>,
    /// Every node's mailbox letters (see `NodeState`).
    letters: Slab<Letter>,
    /// Receives waiting beyond each node's first, by (node, source, tag).
    more_waiting: FxHashMap<(u32, u32, Tag), Waker>,
    /// The packets of messages whose last packet has not come, by (node, source, tag).
    partial: FxHashMap<(u32, u32, Tag), Vec<Bytes>>,
    links: Links,
    /// Every node's ports under one-port (`None` under all-port, where each link direction
    /// is on its own: nothing more to hold).
    node_ports: Option<Vec<NodePorts>>,
    busiest: Busiest,
    /// Messages sent and taken so far, by any node (see [`Network::only_waits`]).
    acted: u64,
    /// `EventKind::Enter` events pending, those due now and not carried yet included (see
    /// [`Network::enter`]).
    entering: u64,
    /// The frames whose heads are ready now, taken from the queue and not carried yet,
    /// each with its key of the order they go in ([`Network::advance_to`]).
    entering_now: Vec<((u32, u32), Event)>,
    /// Whether a frame may cross its link at once when it is ready now and nothing else
    /// waits to enter a link (see [`Network::enter`]); off, every entry is an event.
    carry_at_once: bool,
    totals: Totals,
    /// Every send, forward and delivery, while recording.
    recording: Option<Vec<FlowEvent>>,
    /// What the watched nodes were delivered and passed on, by source (`None`: no node
    /// watched).
    watch: Option<Watch>,
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
        // A switch has a state too, though nothing is ever delivered to it.
        let nodes = huge_pages::vec_of(topology.vertices(), |_| NodeState::EMPTY);
        let links = Links::new(&topology);
        let node_ports = (model.ports == PortModel::One).then(|| vec![NodePorts::default(); topology.vertices()]);
        Network {
            topology,
            model,
            class_models: Vec::new(),
            now_ns: 0,
            events_due: EventQueue::default(),
            events: Slab::default(),
            nodes,
            letters: Slab::default(),
            more_waiting: FxHashMap::default(),
            partial: FxHashMap::default(),
            links,
            node_ports,
            busiest: Busiest::default(),
            acted: 0,
            entering: 0,
            entering_now: Vec::new(),
            carry_at_once: true,
            totals: Totals::default(),
            recording: record.then(Vec::new),
            watch: None,
        }
    }

    /// This network with links of each class (by class id) under that class's physics:
    /// `models[c]` for a link of class c (`class_models` of proto's spec). With one model
    /// or none, or where every class has the network's (a switched network's classes
    /// unless a run sets one), every link has the network's: no class looked up a hop,
    /// no route walked for a message's first link.
    pub fn with_class_models(mut self, models: Vec<LinkModel>) -> Self {
        let differ = models.len() > 1 && models.iter().any(|model| *model != self.model);
        self.class_models = if differ { models } else { Vec::new() };
        self
    }

    /// The physics of the link `from` → `to`: its class's, or the network's.
    fn model_of(&self, from: NodeId, to: NodeId) -> LinkModel {
        if self.class_models.is_empty() {
            return self.model;
        }
        let class = self.topology.link_class(from, to).expect("a frame crosses a link");
        self.class_models[class]
    }

    /// This network, counting what each of `nodes` is delivered and passes on, by
    /// source ([`Network::take_watched`]).
    pub fn watching(mut self, nodes: &[NodeId]) -> Self {
        self.watch = Watch::of(nodes, self.topology.vertices(), self.topology.p());
        self
    }

    /// Hands over what the watched nodes were delivered and passed on (empty when none
    /// was watched).
    pub fn take_watched(&mut self) -> Vec<Watched> {
        self.watch.take().map(Watch::into_watched).unwrap_or_default()
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// This network, every frame entering its links through an event of its own (the
    /// same times, flows and totals, more slowly: for tests that hold the two ways
    /// against each other).
    pub fn entering_by_events(mut self) -> Self {
        self.carry_at_once = false;
        self
    }

    /// The virtual time now, in nanoseconds since the start.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// The time of the earliest pending event, if any.
    pub fn next_event_ns(&mut self) -> Option<u64> {
        self.events_due.next_ns()
    }

    /// Advances the clock to `at_ns` and carries out every event due then (events they
    /// schedule for the same instant included): deliveries in order; the frames whose
    /// heads are ready then enter their links, those passed on first, by node and at one
    /// node from its lowest-numbered neighbour first, then the nodes' own in the order
    /// they were sent (a stable sort): what goes first on a link where two are ready at
    /// once never hangs on the order the engine scheduled them in.
    pub fn advance_to(&mut self, at_ns: u64) {
        self.now_ns = at_ns;
        loop {
            while let Some(slot) = self.events_due.pop_at(at_ns) {
                let event = self.events.remove(slot);
                match event.kind {
                    EventKind::Enter { from, came_from, .. } => {
                        // A node's own frames keep their order (the order they were sent).
                        let key = if came_from == SENT_HERE { (SENT_HERE, SENT_HERE) } else { (from, came_from) };
                        self.entering_now.push((key, event))
                    }
                    EventKind::Deliver { node } => self.deliver(node as NodeId, event.header, event.payload, true),
                }
            }
            if self.entering_now.is_empty() {
                return;
            }
            let mut entering = std::mem::take(&mut self.entering_now);
            if entering.len() > 1 {
                entering.sort_by_key(|(key, _)| *key);
            }
            for (_, event) in entering.drain(..) {
                let EventKind::Enter { from, to, ready_ns, .. } = event.kind else { unreachable!("an entry") };
                self.entering -= 1;
                self.carry(from as NodeId, to as NodeId, event.header, event.payload, ready_ns);
            }
            // Its storage back, for the next instant's (carrying schedules no entry into it).
            self.entering_now = entering;
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
        self.acted += 1;
        let algorithm = header.tag < SYSTEM_TAG_BASE;
        if algorithm {
            self.totals.messages += 1;
        }
        let next = (dst != me).then(|| self.topology.next_hop(me, header.flow()));
        let mut header = header;
        if let (Some(node_ports), Some(_), true) = (&mut self.node_ports, next, algorithm) {
            // One output port: this message follows the node's last one through it.
            let port = &mut node_ports[me];
            header.step = port_step(PortModel::One, header.step, port.output_step);
            port.output_step = header.step;
        }
        self.record(FlowKind::Send, me, &header, payload.len(), next);
        let ready_ns = if causal_ns > 0 { ready_after(causal_ns, self.now_ns, self.model.ts_ns) } else { self.now_ns };
        let Some(next) = next else {
            self.deliver(me, FrameHeader { due_ns: ready_ns, ..header }, payload.into_bytes(), false);
            return Ok(());
        };
        let model = algorithm.then_some(self.model);
        match split_into_packets(model, header, payload) {
            Err(whole) => self.enter(me, next, SENT_HERE, header, whole.into_bytes(), ready_ns),
            Ok(packets) => {
                for (header, packet) in packets {
                    self.enter(me, next, SENT_HERE, header, packet.into_bytes(), ready_ns);
                }
            }
        }
        Ok(())
    }

    /// Takes the oldest message from `src` with `tag` for node `me`, or (with `waker`)
    /// notes that `me` waits for it.
    pub fn take(&mut self, me: NodeId, src: NodeId, tag: Tag, waker: Option<&Waker>) -> Option<Delivery> {
        let key = (src as u32, tag);
        let (mut before, mut at) = (NONE, self.nodes[me].first);
        while at != NONE {
            let letter = self.letters.get(at);
            if (letter.src, letter.tag) == key {
                let next = letter.next;
                let node = &mut self.nodes[me];
                match before {
                    NONE => node.first = next,
                    before => self.letters.get_mut(before).next = next,
                }
                if node.last == at {
                    node.last = before;
                }
                self.stop_waiting(me, key);
                self.acted += 1;
                return Some(self.letters.remove(at).delivery);
            }
            (before, at) = (at, letter.next);
        }
        if let Some(waker) = waker {
            let own = waker.will_wake(&super::node_waker(me));
            let node = &mut self.nodes[me];
            match node.waiting {
                Some(waiting) if waiting == key && own => {}
                None if own => {
                    node.waiting = Some(key);
                    if !self.more_waiting.is_empty() {
                        self.more_waiting.remove(&(me as u32, key.0, key.1));
                    }
                }
                waiting => {
                    if waiting == Some(key) {
                        node.waiting = None;
                    }
                    self.more_waiting.insert((me as u32, key.0, key.1), waker.clone());
                }
            }
        }
        None
    }

    /// The receive of node `me` for `key` (source, tag) waits no more: its waker, if it waited.
    fn stop_waiting(&mut self, me: NodeId, key: (u32, Tag)) -> Option<Waker> {
        let node = &mut self.nodes[me];
        if node.waiting == Some(key) {
            node.waiting = None;
            return Some(super::node_waker(me));
        }
        if self.more_waiting.is_empty() {
            return None;
        }
        self.more_waiting.remove(&(me as u32, key.0, key.1))
    }

    /// Messages sent and taken so far, by any node.
    pub fn acted(&self) -> u64 {
        self.acted
    }

    /// Whether node `me`, polled when [`Network::acted`] was `acted`, did nothing but wait
    /// in one receive, woken by its own waker: then dropping its future and making it
    /// again when the message comes runs it exactly as keeping it would.
    pub fn only_waits(&self, me: NodeId, acted: u64) -> bool {
        self.acted == acted && self.more_waiting.is_empty() && self.nodes[me].waiting.is_some()
    }

    /// Messages delivered and never taken, over every node.
    pub fn unclaimed(&self) -> Vec<(NodeId, usize)> {
        let count = |mut at: u32| {
            let mut count = 0;
            while at != NONE {
                (count, at) = (count + 1, self.letters.get(at).next);
            }
            count
        };
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| node.first != NONE)
            .map(|(id, node)| (id, count(node.first)))
            .collect()
    }

    /// What node `me` waits for, if it waits: (source, tag).
    pub fn waiting_for(&self, me: NodeId) -> Option<(NodeId, Tag)> {
        self.nodes[me]
            .waiting
            .or_else(|| {
                let more = self.more_waiting.keys().filter(|(node, ..)| *node as NodeId == me);
                more.map(|&(_, src, tag)| (src, tag)).min()
            })
            .map(|(src, tag)| (src as NodeId, tag))
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// The link direction that carried the most bytes, and how many (of equals, the
    /// lowest (from, to)); `None` when no frame crossed a link.
    pub fn busiest_link(&self) -> Option<((NodeId, NodeId), u64)> {
        self.busiest.0
    }

    /// Hands over what was recorded (empty when not recording).
    pub fn take_recording(&mut self) -> Vec<FlowEvent> {
        self.recording.take().unwrap_or_default()
    }

    /// A frame ready to go at `ready_ns`, come in from `came_from` ([`SENT_HERE`]: sent
    /// by `from`), is to cross the link `from` → `to`: it enters the link when its head
    /// is ready (now, if that has passed).
    ///
    /// A frame a node sends whose head is ready now, while no other frame waits to enter
    /// any link, crosses at once rather than through an event at this instant (a frame
    /// passed on always goes through one, to take its turn among those of its instant:
    /// [`Network::advance_to`]): an event would run
    /// after those already due now, and none of them enters a link, so nothing could
    /// take the link before it, and the frames it passes on or delivers are scheduled in
    /// the same order either way. On a schedule between neighbours (no frame forwarded,
    /// every send ready when its node is polled) that is every frame, and a message costs
    /// one event, its delivery, instead of two.
    fn enter(&mut self, from: NodeId, to: NodeId, came_from: u32, header: FrameHeader, payload: Bytes, ready_ns: u64) {
        let head_ns = if header.tag < SYSTEM_TAG_BASE {
            head_ready_ns(&self.model_of(from, to), &header, payload.len(), ready_ns)
        } else {
            ready_ns
        };
        // A frame passed on whose head cut through ahead of its tail and was ready by the
        // time this hop had it (onto a slower link) enters a nanosecond after it came: no
        // relayed frame enters at the instant it was passed on, so those whose heads are
        // ready at one instant are all known then, and the routers' links order them as
        // these do (`node::transport::departures`).
        let cut_ahead = came_from != SENT_HERE && head_ns <= self.now_ns && head_ns < ready_ns;
        let at_ns = if cut_ahead { self.now_ns + 1 } else { head_ns.max(self.now_ns) };
        if self.carry_at_once && came_from == SENT_HERE && self.entering == 0 && at_ns <= self.now_ns {
            return self.carry(from, to, header, payload, ready_ns);
        }
        self.entering += 1;
        let (from, to) = (from as u32, to as u32);
        self.schedule(at_ns, header, payload, EventKind::Enter { from, to, came_from, ready_ns });
    }

    /// The link `from` → `to` carries a frame whose head is ready now: once the link is
    /// free (one transfer at a time), for t_s, t_h and t_w · bytes as the physics says.
    /// Its tail reaches `to` then, which delivers it or passes it on. Under one-port the
    /// frame also waits for `from`'s output port and is taken in by `to`'s input port one
    /// frame after another ([`sender_free_ns`], [`received_ns`]), in the order frames
    /// enter links.
    fn carry(&mut self, from: NodeId, to: NodeId, header: FrameHeader, payload: Bytes, ready_ns: u64) {
        let now = self.now_ns;
        let physics = header.tag < SYSTEM_TAG_BASE;
        if header.hops > 0 && physics && header.packet == 0 {
            self.totals.forwarded += 1;
            self.record(FlowKind::Forward, from, &header, payload.len(), Some(to));
        }
        if header.hops > 0
            && let Some(watch) = &mut self.watch
        {
            watch.forwarded(from, &header, payload.len());
        }
        let model = match header.hops {
            0 if !self.class_models.is_empty() => {
                first_link_model(&self.topology, &self.class_models, from, header.flow())
            }
            _ => self.model_of(from, to),
        };
        let link = self.links.state(from, to);
        let mut arrived = header;
        if physics {
            link.bytes += (FrameHeader::ENCODED_LEN + payload.len()) as u64;
            match &mut self.node_ports {
                None => {
                    link.free_ns = link_free_ns(&model, &header, payload.len(), ready_ns, link.free_ns);
                    arrived.due_ns = link.free_ns.max(now);
                }
                Some(node_ports) => {
                    let free_ns = sender_free_ns(PortModel::One, link.free_ns, node_ports[from].output_free_ns);
                    link.free_ns = link_free_ns(&model, &header, payload.len(), ready_ns, free_ns);
                    node_ports[from].output_free_ns = link.free_ns;
                    let occupancy = occupancy_ns(&model, &header, payload.len());
                    let input = &mut node_ports[to].input_free_ns;
                    *input = received_ns(PortModel::One, link.free_ns.max(now), occupancy, *input);
                    arrived.due_ns = *input;
                }
            }
            self.busiest.counted((from, to), link.bytes);
        }
        self.totals.frame_hops += 1;
        if header.dst() == to {
            self.schedule(arrived.due_ns.max(now), arrived, payload, EventKind::Deliver { node: to as u32 });
            return;
        }
        // Passed on when its tail has arrived (software at a hop takes no time).
        let next = self.topology.next_hop(to, header.flow());
        let ready_ns = if arrived.due_ns > 0 { ready_after(arrived.due_ns, now, model.th_ns) } else { now };
        self.enter(to, next, from as u32, FrameHeader { hops: header.hops + 1, ..arrived }, payload, ready_ns);
    }

    /// A frame for node `me` is released: a whole message goes to the mailbox (waking a
    /// receive that waits for it); a packet waits for the rest of its message. One that
    /// came over a link (`by_link`) to a one-port node is a step after the last message
    /// its input port took.
    fn deliver(&mut self, me: NodeId, header: FrameHeader, payload: Bytes, by_link: bool) {
        let (src, tag) = (header.src, header.tag);
        let payload = if header.packet == 0 && header.last {
            payload
        } else {
            let packets = self.partial.entry((me as u32, src, tag)).or_default();
            packets.push(payload);
            if !header.last {
                return;
            }
            concat(&self.partial.remove(&(me as u32, src, tag)).expect("the packets so far"))
        };
        let mut header = header;
        if let (Some(node_ports), true, true) = (&mut self.node_ports, by_link, header.tag < SYSTEM_TAG_BASE) {
            let port = &mut node_ports[me];
            header.step = port_step(PortModel::One, header.step, port.input_step);
            port.input_step = header.step;
        }
        self.record(FlowKind::Deliver, me, &header, payload.len(), None);
        if let Some(watch) = &mut self.watch {
            watch.delivered(me, &header, payload.len());
        }
        let delivery = Delivery { payload, step: header.step, due_ns: header.due_ns };
        let letter = self.letters.insert(Letter { src, tag, next: NONE, delivery });
        let node = &mut self.nodes[me];
        match node.last {
            NONE => node.first = letter,
            last => self.letters.get_mut(last).next = letter,
        }
        self.nodes[me].last = letter;
        if let Some(waker) = self.stop_waiting(me, (src, tag)) {
            waker.wake();
        }
    }

    fn schedule(&mut self, at_ns: u64, header: FrameHeader, payload: Bytes, kind: EventKind) {
        let slot = self.events.insert(Event { header, payload, kind });
        self.events_due.push(at_ns, slot);
    }

    fn record(&mut self, kind: FlowKind, node: NodeId, header: &FrameHeader, bytes: usize, next: Option<NodeId>) {
        if let Some(events) = &mut self.recording
            && header.tag < SYSTEM_TAG_BASE
        {
            events.push(FlowEvent::of(self.now_ns, node, kind, header, bytes, next));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The port of `from` towards its neighbour `to` by their coordinates, as a grid
    /// defines it: the first dimension they differ in, up (2k) or down (2k + 1).
    fn port_by_coordinates(dims: &[(usize, usize)], from: NodeId, to: NodeId) -> usize {
        let coordinate = |id: NodeId, (stride, extent): (usize, usize)| (id / stride) % extent;
        let k = (0..dims.len()).find(|&k| coordinate(from, dims[k]) != coordinate(to, dims[k])).expect("neighbours");
        let (a, b, extent) = (coordinate(from, dims[k]), coordinate(to, dims[k]), dims[k].1);
        2 * k + usize::from(b != (a + 1) % extent)
    }

    /// A receive waits on the node's own waker in the node's state, and on any other (a
    /// combinator's) with that waker, which the message then wakes; only the first kind
    /// lets the engine drop the node's future while it waits.
    #[test]
    fn a_receive_is_woken_by_the_waker_it_was_last_polled_with() {
        struct Counting(std::sync::atomic::AtomicUsize);
        impl std::task::Wake for Counting {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let topology = Topology::new(TopologyKind::Ring, 4, None).expect("a ring");
        let model = LinkModel {
            ts_ns: 10,
            th_ns: 0,
            tw_ps: 1_000,
            routing: topocomm_proto::spec::Routing::Sf,
            packet_bytes: 0,
            ports: PortModel::All,
        };
        let header = |tag| FrameHeader {
            run: 0,
            iteration: 0,
            src: 1,
            dst: 0,
            tag,
            hops: 0,
            step: 1,
            packet: 0,
            last: true,
            due_ns: 0,
        };
        let counting = std::sync::Arc::new(Counting(0.into()));
        let foreign = Waker::from(counting.clone());
        let woken = || counting.0.load(std::sync::atomic::Ordering::Relaxed);
        let mut network = Network::new(topology, model, false);
        let deliver_all = |network: &mut Network| {
            while let Some(at_ns) = network.next_event_ns() {
                network.advance_to(at_ns);
            }
        };

        // Polled with the node's own waker: it waits in the node's state.
        let acted = network.acted();
        assert!(network.take(0, 1, 7, Some(&super::super::node_waker(0))).is_none());
        assert!(network.only_waits(0, acted));
        assert_eq!(network.waiting_for(0), Some((1, 7)));
        // Polled again with another waker: that one is woken, and the node may not be dropped.
        assert!(network.take(0, 1, 7, Some(&foreign)).is_none());
        assert!(!network.only_waits(0, acted));
        assert_eq!(network.waiting_for(0), Some((1, 7)));
        network.originate(1, header(7), Payload::One(Bytes::from_static(b"x")), 0).expect("a node");
        deliver_all(&mut network);
        assert_eq!(woken(), 1);
        assert_eq!(network.take(0, 1, 7, None).map(|delivery| delivery.payload), Some(Bytes::from_static(b"x")));
        assert_eq!(network.waiting_for(0), None);

        // The other way round: another waker first, then the node's own, which the message
        // wakes; the other is not woken again.
        assert!(network.take(0, 1, 8, Some(&foreign)).is_none());
        assert!(network.take(0, 1, 8, Some(&super::super::node_waker(0))).is_none());
        let acted = network.acted();
        assert!(network.only_waits(0, acted), "the other waker's wait is gone");
        network.originate(1, header(8), Payload::One(Bytes::from_static(b"y")), 0).expect("a node");
        deliver_all(&mut network);
        assert_eq!(woken(), 1);
        assert!(network.take(0, 1, 8, None).is_some());
        assert!(network.unclaimed().is_empty());
    }

    #[test]
    fn a_port_found_from_the_ids_difference_is_the_one_their_coordinates_give() {
        let mut checked = 0;
        for (kind, p, dims) in [
            (TopologyKind::Ring, 2, None),
            (TopologyKind::Ring, 3, None),
            (TopologyKind::Ring, 7, None),
            (TopologyKind::Mesh, 6, Some(&[2, 3][..])),
            (TopologyKind::Mesh, 4, Some(&[4, 1][..])),
            (TopologyKind::Mesh, 4, Some(&[1, 4][..])),
            (TopologyKind::Torus, 4, Some(&[2, 2][..])),
            (TopologyKind::Torus, 15, Some(&[3, 5][..])),
            (TopologyKind::Torus, 16, Some(&[4, 4][..])),
            (TopologyKind::Torus, 10, Some(&[5, 2][..])),
            (TopologyKind::Mesh3d, 12, Some(&[2, 2, 3][..])),
            (TopologyKind::Torus3d, 27, Some(&[3, 3, 3][..])),
            (TopologyKind::Torus3d, 24, Some(&[2, 3, 4][..])),
            (TopologyKind::Hypercube, 32, None),
        ] {
            let topology = Topology::new(kind, p, dims).expect("a valid shape");
            let Links::Rows { ports, .. } = Links::new(&topology) else { panic!("{topology} has ports") };
            for from in 0..p {
                let mut used = vec![None; ports.count()];
                for to in topology.neighbours(from) {
                    let port = ports.port(from, to);
                    let other = used[port].replace(to);
                    assert_eq!(other, None, "{topology}: {from} leads to {to} and {other:?} by port {port}");
                    if let Ports::Grid { dims } = &ports {
                        assert_eq!(port, port_by_coordinates(dims, from, to), "{topology}: {from} -> {to}");
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 400, "only {checked} links checked");
    }

    #[test]
    fn a_switched_networks_link_directions_each_have_a_state_of_their_own() {
        for (kind, p, dims) in [
            (TopologyKind::FatTree, 16, &[4][..]),
            (TopologyKind::FatTree, 11, &[4][..]),
            (TopologyKind::Dragonfly, 72, &[4, 2, 2][..]),
            (TopologyKind::Dragonfly, 7, &[2, 2, 1][..]),
            (TopologyKind::Cluster, 12, &[3, 4][..]),
        ] {
            let topology = Topology::new(kind, p, Some(dims)).expect("a valid shape");
            let mut links = Links::new(&topology);
            assert!(matches!(links, Links::Sorted { .. }), "{topology}");
            let directions: Vec<(NodeId, NodeId)> = (0..topology.vertices())
                .flat_map(|from| topology.neighbours(from).into_iter().map(move |to| (from, to)))
                .collect();
            for (n, &(from, to)) in directions.iter().enumerate() {
                links.state(from, to).bytes = n as u64 + 1;
            }
            for (n, &(from, to)) in directions.iter().enumerate() {
                assert_eq!(links.state(from, to).bytes, n as u64 + 1, "{topology}: {from} -> {to}");
            }
        }
    }
}
