//! Drives runs, one at a time: waits for the cluster, re-wires it when the topology
//! (or a node) changed, starts the run on every node and gathers their reports, failing
//! with the names of the nodes at fault when anything goes wrong or runs out of time.
//!
//! This module holds the `Coordinator` and its `execute` (the run's order of stages),
//! and the errors a run ends in; each stage's own work is a module of its own:
//! - `wiring`: sending the wiring, waiting for every link, and the blame when it fails;
//! - `clocks`: the clock probes before a traced or emulated run, and the trace's alignment;
//! - `gather`: starting the run on every node and gathering their reports and link faults;
//! - `admission`: the memory a run may take at a host, and each node's rows of limits.

mod admission;
mod clocks;
mod gather;
mod wiring;

pub use clocks::ClockRefusal;
pub use wiring::WiringFailure;

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{Mutex, mpsc};
use tokio::time::Instant;
use topocomm_node::allowance;
use topocomm_proto::auth::Key;
use topocomm_proto::catalogue::{self, NoSuchAlgorithm};
use topocomm_proto::control::{RunOutcome, RunRequest, SetupTimes, ToCoordinator, ToNode, TopologySpec};
use topocomm_proto::spec::{Collective, RunSpec, SpecError};
use topocomm_proto::{Topology, TopologyError, TopologyKind};

use crate::control::cluster::{Cluster, Event, Incomplete, Participant, SessionId};
use topocomm_collectives::simulator::spec::with_known;
use topocomm_collectives::tuning::Tuning;

use admission::check_memory;
use clocks::{ClockOffset, PROBE_DEADLINE, align};

/// Why a run gave no outcome: refused before any node was asked, or failed on the way
/// (naming the nodes at fault).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The spec is invalid, or needs more memory than a node has.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The shape does not fit the cluster.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// The collective has no such algorithm.
    #[error(transparent)]
    Algorithm(#[from] NoSuchAlgorithm),
    /// Not every node was there in time.
    #[error(transparent)]
    Incomplete(#[from] Incomplete),
    /// A node's control session closed while the run needed it.
    #[error("{node} disconnected {underway}")]
    Disconnected { node: String, underway: Underway },
    /// Not every link came up.
    #[error(transparent)]
    Wiring(#[from] WiringFailure),
    /// Some nodes did not answer a clock probe in time.
    #[error("clock probe {round} was not answered within {PROBE_DEADLINE:?} by {nodes}")]
    ProbeUnanswered { round: u64, nodes: String },
    /// A node's clock replies are not those of a clock.
    #[error("{node}'s clock replies were refused: {why}")]
    ClockRefused { node: String, why: ClockRefusal },
    /// Counting the run's allowances at its nodes did not finish.
    #[error("counting the run's allowances failed: {reason}")]
    Limits { reason: String },
    /// Some nodes failed the run, or never reported.
    #[error("run {run} of {collective} failed{}", failure_lines(.silent, .failures))]
    Failed {
        run: u64,
        collective: Collective,
        /// The nodes that did not report, if any.
        silent: Option<String>,
        /// Each failed node and what it said.
        failures: Vec<String>,
    },
}

/// What was underway in the run when a node left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Underway {
    Wiring,
    ClockProbe,
    Run(u64),
}

impl std::fmt::Display for Underway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Underway::Wiring => write!(f, "while wiring"),
            Underway::ClockProbe => write!(f, "while its clock was probed"),
            Underway::Run(run) => write!(f, "during run {run}"),
        }
    }
}

fn failure_lines(silent: &Option<String>, failures: &[String]) -> String {
    let mut text = silent.as_ref().map(|nodes| format!("; no report from {nodes}")).unwrap_or_default();
    for failure in failures {
        text += &format!("\n  {failure}");
    }
    text
}

/// The coordinator: the cluster key, the cluster and the one-at-a-time run conductor.
pub struct Coordinator {
    pub cluster: Cluster,
    key: Key,
    encrypted: bool,
    /// The rules `auto` picks by for every request, and the footprint runs are held to.
    tuning: Arc<Tuning>,
    /// The last run shape's allowances at every node, counted here once for all of them.
    allowances: Arc<allowance::Cache>,
    conductor: Mutex<Conductor>,
}

struct Conductor {
    events: mpsc::UnboundedReceiver<Event>,
    epoch: u64,
    run: u64,
    /// The nonce of the next clock probe: never reused, so a late reply to a run that was
    /// cancelled while its clocks were probed answers no probe of a later run.
    next_nonce: u64,
}

impl Coordinator {
    /// A coordinator for `expected` nodes proving `key`, every link encrypted if asked.
    pub fn new(expected: usize, key: Key, encrypted: bool) -> Self {
        let (cluster, events) = Cluster::new(expected);
        let tuning = Arc::new(Tuning::built_in());
        Coordinator {
            cluster,
            key,
            encrypted,
            tuning,
            allowances: Arc::default(),
            conductor: Mutex::new(Conductor { events, epoch: 0, run: 0, next_nonce: 0 }),
        }
    }

    /// This coordinator resolving `auto` by `tuning` rather than the built-in rules.
    pub fn tuned(self, tuning: Arc<Tuning>) -> Self {
        Coordinator { tuning, ..self }
    }

    /// The rules `--algorithm auto` resolves by for this coordinator's runs.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// The cluster key every connection must prove.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// Whether every link is encrypted.
    pub fn encrypted(&self) -> bool {
        self.encrypted
    }

    /// Runs `request` on the cluster: wires it as asked, then runs and gathers.
    pub async fn execute(&self, request: RunRequest) -> Result<RunOutcome, RunError> {
        let mut conductor = self.conductor.lock().await;
        // Before the timeout bounds the wait for the cluster.
        request.spec.validate_timing()?;
        let timeout = request.spec.timeout();
        let asked_at = Instant::now();
        let participants = self.cluster.participants(timeout).await?;
        let mut setup = SetupTimes { ready_ms: asked_at.elapsed().as_secs_f64() * 1e3, wiring_ms: None };
        // Every participant is a vertex: the ranks, then a switched network's switches.
        let topology = topology_on(request.topology, participants.len(), request.dims.as_deref())?
            .routed(request.routes)?
            .placed(request.placement)?;
        let p = topology.p();
        request.spec.validate(p)?;
        catalogue::check(request.spec.collective, request.spec.algorithm)?;
        let spec = with_known(&request.spec, &topology, request.spec.emulation, |known| {
            self.tuning
                .resolve_checked(&request.spec, known, |spec| check_memory(spec, &participants[..p], &self.tuning))
        })?;
        let topology_spec = TopologySpec::of(&topology);
        let sessions: Vec<SessionId> = participants.iter().map(|p| p.session).collect();
        if conductor.drain() {
            // A link of the wiring broke between runs: the next run needs new links.
            self.cluster.set_wiring(None);
        }
        if self.cluster.wiring_of(&sessions).as_ref() != Some(&topology_spec) {
            self.cluster.set_wiring(None);
            let wiring_from = Instant::now();
            conductor.wire(&participants, &topology, &topology_spec).await?;
            setup.wiring_ms = Some(wiring_from.elapsed().as_secs_f64() * 1e3);
            self.cluster.set_wiring(Some((topology_spec.clone(), sessions)));
        }
        conductor.run += 1;
        let spec = RunSpec { run: conductor.run, ..spec };
        let clocks = if spec.trace || spec.emulation.is_some() {
            Some(conductor.probe_clocks(&participants).await?)
        } else {
            None
        };
        // With emulated links every iteration starts at one common instant (see node::run).
        let clock_offsets_ns = match (&clocks, spec.emulation) {
            (Some(clocks), Some(_)) => clocks.iter().map(ClockOffset::significant_ns).collect(),
            _ => Vec::new(),
        };
        let spec = RunSpec { clock_offsets_ns, ..spec };
        let limits = self.limits_of(&spec, &topology).await?;
        // A run that fails, or whose caller gives up on it (drops this future: a job
        // cancelled in the lab, a client that left), is aborted on every node.
        let aborting = AbortOnDrop { cluster: &self.cluster, participants: &participants, run: spec.run };
        match conductor.start(&participants, p, &spec, &limits).await {
            Ok(mut reports) => {
                // Every node reported: nothing to abort.
                std::mem::forget(aborting);
                let trace = clocks.map(|clocks| align(&mut reports, &clocks, spec.dilation));
                Ok(RunOutcome { spec, topology: topology_spec, reports, trace, setup })
            }
            Err(error) => {
                drop(aborting);
                Err(error)
            }
        }
    }
}

/// The topology of `kind` (shaped by `dims`) whose vertices are `vertices` daemons: all
/// of them ranks on a direct network; on a switched one, as many ranks as leave the
/// shape's switches one daemon each (the ranks get ids `0..p`, the switches the rest).
pub fn topology_on(kind: TopologyKind, vertices: usize, dims: Option<&[usize]>) -> Result<Topology, TopologyError> {
    if !kind.is_switched() || vertices == 0 {
        return Topology::new(kind, vertices, dims);
    }
    // The smallest network of the shape (its dims refused here if bad).
    let one = Topology::new(kind, 1, dims)?;
    let refused = || {
        let (switches, hosts) = (one.switches(), one.hosts());
        TopologyError::Invalid(match dims {
            Some(_) => format!(
                "{vertices} daemons make no {kind} {}: its {switches} switches take a daemon each and its 1 to \
                 {hosts} ranks one each, {} to {} daemons",
                one.describe_dims(),
                switches + 1,
                switches + hosts
            ),
            None => format!(
                "{vertices} daemons make no {kind} of the shape its ranks would get: give --dims (the smallest, \
                 {}, takes {} to {} daemons)",
                one.describe_dims(),
                switches + 1,
                switches + hosts
            ),
        })
    };
    if dims.is_some() {
        let p = vertices.checked_sub(one.switches()).filter(|&p| p > 0).ok_or_else(refused)?;
        return Topology::new(kind, p, dims);
    }
    // The default shape grows with p, and the vertices with it: at most one p fits.
    for p in 1..=vertices {
        let topology = Topology::new(kind, p, None)?;
        if topology.vertices() == vertices {
            return Ok(topology);
        }
        if topology.vertices() > vertices {
            break;
        }
    }
    Err(refused())
}

/// Aborts a started run when dropped: every node stops it now (not at its own deadline),
/// and whatever is left of it dies with the next wiring.
struct AbortOnDrop<'a> {
    cluster: &'a Cluster,
    participants: &'a [Participant],
    run: u64,
}

impl Drop for AbortOnDrop<'_> {
    fn drop(&mut self) {
        for participant in self.participants {
            let _ = participant.sender.send(ToNode::Abort { run: self.run });
        }
        self.cluster.set_wiring(None);
    }
}

impl Conductor {
    /// Forgets events left over from earlier runs; says whether a node reported a link
    /// of the current wiring broken among them.
    fn drain(&mut self) -> bool {
        let mut broken = false;
        while let Ok(event) = self.events.try_recv() {
            broken |= matches!(event, Event::Message { message: ToCoordinator::LinkFault { epoch, .. }, .. } if epoch == self.epoch);
        }
        broken
    }

    /// The next event before `deadline`, or `None` when it passes.
    async fn next(&mut self, deadline: Instant) -> Option<Event> {
        tokio::time::timeout_at(deadline, self.events.recv()).await.ok().flatten()
    }
}

fn index(participants: &[Participant]) -> HashMap<SessionId, Participant> {
    participants.iter().map(|p| (p.session, p.clone())).collect()
}

fn describe(node: &Participant) -> String {
    format!("node {} ({})", node.id, node.name)
}

fn names(participants: &[Participant], which: &[bool]) -> String {
    participants.iter().filter(|p| which[p.id]).map(describe).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Semaphore;
    use topocomm_node::timebase;
    use topocomm_proto::control::NodeReport;
    use topocomm_proto::spec::{Algorithm, Collective, RunSpec};
    use topocomm_proto::{NodeId, TopologyKind};

    use super::*;
    use crate::control::cluster::Registration;

    /// How a fake node misbehaves.
    #[derive(Clone, Copy)]
    pub(super) struct Rogue {
        /// Answers every clock probe this many times.
        pub(super) answers_per_probe: usize,
        /// Sends every report this many times.
        pub(super) reports: usize,
        /// What it says its clock reads, given the probe's nonce.
        pub(super) clock: fn(u64) -> u64,
        /// Answers every start with `NotStarted`, as a daemon does that is not wired.
        pub(super) refuses: bool,
    }

    impl Rogue {
        pub(super) const HONEST: Rogue =
            Rogue { answers_per_probe: 1, reports: 1, clock: |_| timebase::now_ns(), refuses: false };
    }

    /// Registers `p` in-process nodes that answer orders as a daemon would (without
    /// running anything), node 0 as `rogue` says; returns the coordinator.
    pub(super) fn cluster_of(p: usize, rogue: Rogue) -> Arc<Coordinator> {
        let coordinator = Arc::new(Coordinator::new(p, Key::from_token("t"), false));
        for index in 0..p {
            let (sender, mut orders) = mpsc::unbounded_channel();
            let registration =
                Registration { name: format!("node-{index}"), data_addr: format!("a:{index}"), memory_bytes: 1 << 30 };
            let session = coordinator.cluster.register(registration, sender).expect("registered");
            let (coordinator, queue) = (coordinator.clone(), Arc::new(Semaphore::new(16)));
            let behaviour = if index == 0 { rogue } else { Rogue::HONEST };
            tokio::spawn(async move {
                let mut id = usize::MAX;
                while let Some(order) = orders.recv().await {
                    let (replies, message) = match order {
                        ToNode::Wire(wiring) => {
                            id = wiring.id;
                            (1, ToCoordinator::Wired { epoch: wiring.epoch })
                        }
                        ToNode::ClockProbe { nonce } => (
                            behaviour.answers_per_probe,
                            ToCoordinator::ClockReply { nonce, node_ns: (behaviour.clock)(nonce) },
                        ),
                        ToNode::Start { spec, .. } if behaviour.refuses => {
                            (1, ToCoordinator::NotStarted { run: spec.run, reason: "this node is not wired".into() })
                        }
                        ToNode::Start { spec, .. } => {
                            let report =
                                NodeReport { times_us: vec![1.0], verified: true, ..NodeReport::empty(spec.run, id) };
                            (behaviour.reports, ToCoordinator::Report(Box::new(report)))
                        }
                        _ => continue,
                    };
                    for copy in 0..replies {
                        // Repeats of a report are forged: they say the run failed.
                        let message = match &message {
                            ToCoordinator::Report(report) if copy > 0 => ToCoordinator::Report(Box::new(NodeReport {
                                verified: false,
                                error: Some("forged".into()),
                                ..(**report).clone()
                            })),
                            other => other.clone(),
                        };
                        if let Ok(place) = queue.clone().try_acquire_owned() {
                            coordinator.cluster.forward(session, message, place);
                        }
                    }
                }
            });
        }
        coordinator
    }

    pub(super) fn traced_request() -> RunRequest {
        let spec = RunSpec { trace: true, ..RunSpec::new(Collective::Barrier, Algorithm::Hypercube) };
        RunRequest { topology: TopologyKind::Hypercube, dims: None, routes: None, placement: Default::default(), spec }
    }

    pub(super) fn participant(id: NodeId) -> Participant {
        let sender = mpsc::unbounded_channel().0;
        Participant {
            id,
            name: format!("n{id}"),
            data_addr: format!("a:{id}"),
            memory_bytes: 0,
            session: id as u64,
            sender,
        }
    }

    /// A switched network's daemons are its ranks and then its switches: the ranks are
    /// the daemons less the shape's switches, and a count no shape of the kind has is
    /// refused saying what would do.
    #[test]
    fn the_ranks_of_a_switched_network_are_its_daemons_less_its_switches() {
        let ranks = |kind, vertices, dims: Option<&[usize]>| topology_on(kind, vertices, dims).map(|t| t.p());
        assert_eq!(ranks(TopologyKind::Ring, 8, None), Ok(8));
        assert_eq!(ranks(TopologyKind::FatTree, 36, Some(&[4])), Ok(16));
        assert_eq!(ranks(TopologyKind::FatTree, 31, Some(&[4])), Ok(11));
        assert_eq!(ranks(TopologyKind::Dragonfly, 18, Some(&[2, 2, 1])), Ok(12));
        assert_eq!(ranks(TopologyKind::Cluster, 21, Some(&[4, 4])), Ok(16));
        // Without dims, the shape its ranks would get: k = 4 for 16, k = 2 for 2.
        assert_eq!(ranks(TopologyKind::FatTree, 36, None), Ok(16));
        assert_eq!(ranks(TopologyKind::FatTree, 7, None), Ok(2));
        let topology = topology_on(TopologyKind::FatTree, 36, None).unwrap();
        assert_eq!((topology.dims(), topology.vertices()), (&[4][..], 36));
        let refused =
            |kind, vertices, dims: Option<&[usize]>| topology_on(kind, vertices, dims).unwrap_err().to_string();
        assert_eq!(
            refused(TopologyKind::FatTree, 20, Some(&[4])),
            "20 daemons make no fat-tree 4: its 20 switches take a daemon each and its 1 to 16 ranks one each, 21 to 36 \
             daemons"
        );
        assert!(refused(TopologyKind::FatTree, 37, Some(&[4])).starts_with("17 ranks do not fit"));
        assert_eq!(
            refused(TopologyKind::FatTree, 5, None),
            "5 daemons make no fat-tree of the shape its ranks would get: give --dims (the smallest, 2, takes 6 to 7 \
             daemons)"
        );
    }

    #[test]
    fn a_failed_run_names_the_silent_and_the_failed_nodes() {
        let failed = RunError::Failed {
            run: 7,
            collective: Collective::Allreduce,
            silent: Some("node 2 (n2)".into()),
            failures: vec!["node 0 (n0): no message".into(), "node 1 (n1): no message".into()],
        };
        assert_eq!(
            failed.to_string(),
            "run 7 of allreduce failed; no report from node 2 (n2)\n  node 0 (n0): no message\n  node 1 (n1): no message"
        );
        let left = |underway| RunError::Disconnected { node: "node 1 (n1)".into(), underway }.to_string();
        assert_eq!(left(Underway::Wiring), "node 1 (n1) disconnected while wiring");
        assert_eq!(left(Underway::ClockProbe), "node 1 (n1) disconnected while its clock was probed");
        assert_eq!(left(Underway::Run(7)), "node 1 (n1) disconnected during run 7");
    }
}
