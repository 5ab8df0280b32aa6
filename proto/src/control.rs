//! Control messages between the coordinator, the nodes and CLI clients. They travel
//! length-delimited over one TCP connection per party, encoded by `codec`.
//!
//! A control connection starts with the handshake of `auth`, whose purpose makes it a
//! node's link (then `ToNode` and `ToCoordinator` messages) or a CLI client's (then one
//! `ClientRequest` and its `ClientResponse`). Only after it do the limits below apply.

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::auth::Key;
use crate::flow::FlowEvent;
use crate::network::Placement;
use crate::spec::RunSpec;
use crate::topology::{NodeId, Routes, Topology, TopologyError, TopologyKind};

/// The largest control message the coordinator accepts from an authenticated node, and
/// a client from the coordinator (reports and dumps of large runs ride on these).
pub const MAX_REPORT_FRAME: usize = 512 * 1024 * 1024;

/// The largest message a node accepts from the coordinator (wirings and run specs: a few
/// bytes per node of the cluster), and the coordinator from an authenticated client.
pub const MAX_ORDER_FRAME: usize = 16 * 1024 * 1024;

/// The protocol version: a node and a coordinator of different versions refuse each other.
/// 3: `ToNode::Start` carries the node's [`RunLimits`] beside the spec.
/// 4: a node that cannot take part in a run says so with `ToCoordinator::NotStarted`,
/// which names no node, rather than with a report under a made-up node id.
/// 5: a spec carries the physics of classes of links (`RunSpec::classes`), and a topology
/// may be switched (fat-tree, dragonfly, cluster); the link model carries its port model
/// (`spec::Ports`, one-port or all-port).
/// 6: a topology carries its route policy (`TopologySpec::routes`, `RunRequest::routes`:
/// ECMP on a fat-tree, Valiant on a dragonfly), which every node routes by.
/// 7: a topology carries where its ranks sit on a switched network's hosts
/// (`TopologySpec::placement`, and a run request its `placement`).
pub const PROTOCOL_VERSION: u32 = 7;

/// A topology as the coordinator hands it out: each node rebuilds (and so re-validates) it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologySpec {
    pub kind: TopologyKind,
    pub p: usize,
    pub dims: Vec<usize>,
    /// The route policy (`None`: the kind's default, as documents written before it say).
    #[serde(default)]
    pub routes: Option<Routes>,
    /// Which host each rank sits on (a switched network's; linear on a direct one).
    #[serde(default)]
    pub placement: Placement,
}

impl TopologySpec {
    /// `topology` as it travels to the nodes, which rebuild it ([`TopologySpec::build`]):
    /// its shape, its route policy and its placement.
    pub fn of(topology: &Topology) -> Self {
        TopologySpec {
            kind: topology.kind(),
            p: topology.p(),
            dims: topology.dims().to_vec(),
            routes: Some(topology.routes()),
            placement: topology.placement(),
        }
    }

    /// The topology this names, rebuilt (and so validated) from its kind, size, dims,
    /// route policy and placement.
    pub fn build(&self) -> Result<Topology, TopologyError> {
        Topology::new(self.kind, self.p, Some(&self.dims))?.routed(self.routes)?.placed(self.placement)
    }
}

/// What a node must wire: its id in the topology and where its neighbours listen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wiring {
    /// Increases with every re-wiring; links of an older epoch are closed.
    pub epoch: u64,
    pub id: NodeId,
    pub topology: TopologySpec,
    /// Each neighbour: its id, its data address and the key of the link to it.
    pub neighbours: Vec<Neighbour>,
    /// How long the node has to bring its links up, in milliseconds ([`link_deadline`]
    /// of the cluster's size; a node holds it to [`LONGEST_LINK_DEADLINE`]).
    pub link_within_ms: u64,
}

/// How long the nodes of a cluster of `p` have to bring their links up: 15 s, and 100 ms
/// more for every node, up to [`LONGEST_LINK_DEADLINE`]. Bring-up grows with the cluster:
/// 256 containers on one 2-core host took more than a fixed 15 s to start dialling each
/// other, and 128 did not (docs/containers-at-scale.md).
pub fn link_deadline(p: usize) -> Duration {
    let per_node = Duration::from_millis(100).saturating_mul(u32::try_from(p).unwrap_or(u32::MAX));
    Duration::from_secs(15).saturating_add(per_node).min(LONGEST_LINK_DEADLINE)
}

/// The longest a wiring may give its nodes to link (what a cluster of 5,850 nodes gets).
pub const LONGEST_LINK_DEADLINE: Duration = Duration::from_secs(600);

/// One neighbour of a wiring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Neighbour {
    pub id: NodeId,
    /// Where its data listener accepts links (`host:port`).
    pub address: String,
    /// The key of this one link in this one epoch: only its two ends get it, so only
    /// they can open it (`auth`).
    pub key: Key,
}

/// Messages to the coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToCoordinator {
    /// Every link of this epoch is up.
    Wired { epoch: u64 },
    /// The node could not wire this epoch: the neighbours it dialled and could not
    /// reach (`unreachable`), and those that never dialled in (`missing`), so that the
    /// coordinator can tell who is at fault.
    WireFailed { epoch: u64, reason: String, unreachable: Vec<NodeId>, missing: Vec<NodeId> },
    /// The node's part of a run.
    Report(Box<NodeReport>),
    /// The answer to `Ping`.
    Pong,
    /// The answer to a clock probe: the node's clock when it answered, in ns.
    ClockReply { nonce: u64, node_ns: u64 },
    /// The link of this epoch to neighbour `peer` failed (reset, closed, a frame refused,
    /// a record that failed authentication), in words: sent at once, so that the run in
    /// progress ends now rather than at its deadline. `source`: the node the fault is
    /// charged to when it is not `peer` — frames that overflowed what the run lets their
    /// source queue at this node, which `peer` may only have relayed.
    LinkFault { epoch: u64, peer: NodeId, cause: String, source: Option<NodeId> },
    /// The node could not take part in run `run` at all (it is not wired), and why. It
    /// names no node: the coordinator knows whose session it came on, as it does for
    /// every message, and charges the failure to that node.
    NotStarted { run: u64, reason: String },
}

/// Messages from the coordinator to a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToNode {
    /// Close the old links and open these.
    Wire(Wiring),
    /// Take part in a run, held to `limits` (this node's own rows: each node gets its own).
    Start { spec: Box<RunSpec>, limits: Box<RunLimits> },
    /// Stop taking part in this run (the coordinator gave up on it).
    Abort { run: u64 },
    /// Refused registration (wrong version, cluster full...): the node exits with this reason.
    Refused { reason: String },
    /// Answer at once with the time on your clock (for aligning traces, as NTP does).
    ClockProbe { nonce: u64 },
    /// Are you there? (Answered with `Pong`; a node silent too long is taken for lost.)
    Ping,
}

/// What the coordinator resolved, once for the whole run, that one node of it holds the
/// run to: its memory footprint by the coordinator's tuning table, and what each source
/// may queue at it, counted on the run's schedule. The node admits the run only if the
/// footprint fits in what it has, and bounds every source and link by these rows (each
/// capped at the memory it has, so that no spec can make it accept more).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLimits {
    /// The bytes this node needs at its peak (the tuning table's `footprint`, `of_node`).
    pub footprint_bytes: u64,
    /// `delivered[src]`: what messages of `src` for this node may hold here until taken
    /// (payload and header bytes); a link's allowance is the sum of the sources it brings.
    pub delivered: Vec<u64>,
    /// `forwarded[src]`: what frames of `src` for other nodes may hold in this node's
    /// outgoing links until written.
    pub forwarded: Vec<u64>,
    /// Whether the rows are the schedule's, counted (`false`: the whole run's bound for all).
    pub counted: bool,
}

/// What a node reports after a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    pub run: u64,
    pub node: NodeId,
    /// Time of this node's part of every timed iteration, in microseconds: wall time,
    /// or emulated time (wall time / K) when the run is dilated.
    pub times_us: Vec<f64>,
    /// Result of the last iteration held against `reference`, and every other
    /// iteration's digest against the last's.
    pub verified: bool,
    /// What differed, when not verified.
    pub mismatch: Option<String>,
    /// xxh3 of the node's output of the last iteration.
    pub digest: u64,
    /// The collective's frames this node originated in the timed iterations (a
    /// message cut into cut-through packets counts once; the runtime's own barrier and
    /// start signals are not counted).
    pub frames_sent: u64,
    /// The collective's frames of the timed iterations this node passed on for others
    /// (counted as `frames_sent` is; a late frame of a warm-up iteration, or of another
    /// run, is not counted): the schedule's forwards, as `simulate` counts them.
    pub frames_forwarded: u64,
    /// Messages on the longest chain that reached this node (the schedule's depth).
    pub steps: u16,
    /// Bytes this node wrote to each neighbour during the timed iterations.
    pub link_bytes: Vec<(NodeId, u64)>,
    /// The run failed on this node: why.
    pub error: Option<String>,
    /// Input and output of the last iteration, when the run asked for a dump.
    pub dump: Option<NodeDump>,
    /// The message flow of the last iteration, when the run asked for a trace.
    pub trace: Option<NodeTrace>,
}

impl NodeReport {
    /// The report of node `node` for `run`, before anything happened: no times, not
    /// verified, no traffic, no error.
    pub fn empty(run: u64, node: NodeId) -> Self {
        NodeReport {
            run,
            node,
            times_us: Vec::new(),
            verified: false,
            mismatch: None,
            digest: 0,
            frames_sent: 0,
            frames_forwarded: 0,
            steps: 0,
            link_bytes: Vec::new(),
            error: None,
            dump: None,
            trace: None,
        }
    }
}

/// The events a node recorded: `origin_ns` is when it began, on its own wall clock;
/// each event's `at_ns` counts emulated nanoseconds from there (wall ones undilated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeTrace {
    pub origin_ns: u64,
    pub events: Vec<FlowEvent>,
}

/// Every node's events of the last iteration on the coordinator's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunTrace {
    /// Events sorted by time; `at_ns` counts from the earliest event of the run, in
    /// emulated time when the run is dilated.
    pub events: Vec<FlowEvent>,
    /// Each node's clock offset estimate's error bound (half the best probe's round
    /// trip), in µs, by node id (emulated µs when the run is dilated).
    pub clock_error_us: Vec<f64>,
}

/// A node's raw little-endian input and output arrays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDump {
    pub input: Bytes,
    pub output: Bytes,
}

/// A CLI request to a serving coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ClientRequest {
    /// Run a collective on this topology (re-wiring first if it differs). Boxed: a
    /// request is far larger than the other variants (the encoding is the same).
    Run(Box<RunRequest>),
    /// How the cluster stands.
    Status,
}

/// A run as the user asked for it; the coordinator fills in run id and topology size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    pub topology: TopologyKind,
    pub dims: Option<Vec<usize>>,
    /// The route policy (`None`: the topology's default).
    #[serde(default)]
    pub routes: Option<Routes>,
    /// Which host each rank sits on, on a switched network.
    #[serde(default)]
    pub placement: Placement,
    pub spec: RunSpec,
}

/// The coordinator's answer to a client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ClientResponse {
    RunDone(Box<RunOutcome>),
    Status(ClusterStatus),
    Error(String),
}

/// The cluster as the coordinator sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub expected: usize,
    /// The connected nodes, numbered ones first in id order.
    pub registered: Vec<RegisteredNode>,
    pub topology: Option<TopologySpec>,
}

/// A connected node as `topocomm status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredNode {
    /// Its id, once the cluster formed and numbered its members.
    pub id: Option<NodeId>,
    pub name: String,
    pub data_addr: String,
}

/// A finished run: the spec that ran, the topology it ran on and every node's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    pub spec: RunSpec,
    pub topology: TopologySpec,
    pub reports: Vec<NodeReport>,
    /// The aligned message flow, when the run asked for a trace.
    pub trace: Option<RunTrace>,
    /// How long the run waited for the cluster and for its links.
    pub setup: SetupTimes,
}

/// What a run spent before its first iteration, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SetupTimes {
    /// Waiting until every expected node was registered and connected.
    pub ready_ms: f64,
    /// Wiring the topology (`None`: the wiring in force was the one asked for).
    pub wiring_ms: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A topology travels whole: its kind, size, dims and placement rebuild it.
    #[test]
    fn a_topology_spec_rebuilds_its_topology_placement_and_all() {
        for placement in [Placement::Linear, Placement::RoundRobin, Placement::Random { seed: 9 }] {
            let cluster = Topology::new(TopologyKind::Cluster, 14, Some(&[4, 4])).unwrap().placed(placement).unwrap();
            let spec = TopologySpec::of(&cluster);
            assert_eq!(spec.placement, placement);
            assert_eq!(spec.build(), Ok(cluster));
        }
    }
}
