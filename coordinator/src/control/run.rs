//! Drives runs, one at a time: waits for the cluster, re-wires it when the topology
//! (or a node) changed, starts the run on every node and gathers their reports, failing
//! with the names of the nodes at fault when anything goes wrong or runs out of time.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytesize::ByteSize;
use tokio::sync::{Mutex, mpsc};
use tokio::time::Instant;
use topocomm_node::allowance;
use topocomm_node::daemon::limits;
use topocomm_node::timebase;
use topocomm_proto::NodeId;
use topocomm_proto::auth::Key;
use topocomm_proto::catalogue::{self, NoSuchAlgorithm};
use topocomm_proto::control::{
    self, Neighbour, NodeReport, RunLimits, RunOutcome, RunRequest, RunTrace, SetupTimes, ToCoordinator, ToNode,
    TopologySpec, Wiring,
};
use topocomm_proto::spec::{Collective, Dilation, RunSpec, SpecError};
use topocomm_proto::{Topology, TopologyError};

use crate::control::cluster::{Cluster, Event, Incomplete, Participant, SessionId};
use topocomm_collectives::tuning::Tuning;

/// How much longer than its nodes' deadline to link (`control::link_deadline`) the
/// coordinator waits for their word on a wiring.
const WIRE_GRACE: Duration = Duration::from_secs(5);

/// Clock probes per node before a traced run.
const CLOCK_PROBES: u64 = 8;

/// How long a round of clock probes may take.
const PROBE_DEADLINE: Duration = Duration::from_secs(5);

/// The farthest a node's clock may read from the coordinator's: both count from the Unix
/// epoch, so a day apart is a machine whose clock was never set, or a node lying.
const MOST_CLOCK_OFFSET: Duration = Duration::from_secs(24 * 3600);

/// How far two probes' intervals may miss each other and still be one clock's: the
/// clocks' drift over the probes' few milliseconds, and the rounding of the midpoints.
const CLOCK_SLACK: Duration = Duration::from_millis(1);

/// After the first node reports a failure, how much longer the others get.
const FAILURE_GRACE: Duration = Duration::from_secs(2);

/// How long a run that a node reported a broken link in waits to hear the link's other
/// end (whose view may name the cause better: a tampered record, say) before it fails.
const LINK_FAULT_HEARING: Duration = Duration::from_millis(300);

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
    #[error("{node} disconnected {stage}")]
    Disconnected { node: String, stage: Stage },
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

/// What the run was doing when a node left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Wiring,
    ClockProbe,
    Run(u64),
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stage::Wiring => write!(f, "while wiring"),
            Stage::ClockProbe => write!(f, "while its clock was probed"),
            Stage::Run(run) => write!(f, "during run {run}"),
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

/// A wiring that did not bring every link up: who is blamed, and every node's own word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("wiring the {topology} failed{culprits}{}{}", report_lines(.reports), neighbour_table_hint(.reports))]
pub struct WiringFailure {
    pub topology: String,
    pub culprits: Culprits,
    /// Each node that reported a failure, and its reason.
    pub reports: Vec<String>,
}

/// Who a failed wiring is blamed on, most certain first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Culprits {
    /// These nodes never answered within `within`.
    Silent { nodes: String, within: Duration },
    /// These nodes, each with the neighbours that reported it (unreachable at its
    /// address, or never dialling).
    Named(Vec<String>),
    /// Nobody could be named.
    Unknown,
}

impl std::fmt::Display for Culprits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Culprits::Silent { nodes, within } => {
                write!(f, ": {nodes} did not answer within {within:?} (paused, or stuck)")
            }
            Culprits::Named(culprits) => write!(f, " at {}", culprits.join("; ")),
            Culprits::Unknown => Ok(()),
        }
    }
}

fn report_lines(reports: &[String]) -> String {
    reports.iter().map(|report| format!("\n  {report}")).collect()
}

/// What "No route to host" between nodes of one host usually means: its kernel's
/// neighbour (ARP) table, shared by every container, overflowed (at its default
/// `gc_thresh3` of 1,024 entries, a hypercube of 128 containers fails to wire).
const NEIGHBOUR_TABLE_HINT: &str = "\n  \"No route to host\" between the containers of one host usually means that \
     the host's neighbour (ARP) table is full: `dmesg | grep 'neighbor table overflow'` says so, `ip -4 neigh | wc -l` \
     counts its entries against `sysctl net.ipv4.neigh.default.gc_thresh3`, and deploy/prepare-host.sh checks and \
     raises it (deploy/README.md)";

/// [`NEIGHBOUR_TABLE_HINT`] if a node's reason was "No route to host".
fn neighbour_table_hint(reports: &[String]) -> &'static str {
    let no_route = reports.iter().any(|report| report.to_ascii_lowercase().contains("no route to host"));
    if no_route { NEIGHBOUR_TABLE_HINT } else { "" }
}

/// The coordinator: the cluster key, the cluster and the one-at-a-time run driver.
pub struct Coordinator {
    pub cluster: Cluster,
    key: Key,
    encrypted: bool,
    /// The rules `auto` picks by for every request, and the footprint runs are held to.
    tuning: Arc<Tuning>,
    /// The last run shape's allowances at every node, counted here once for all of them.
    allowances: Arc<allowance::Cache>,
    driver: Mutex<Driver>,
}

struct Driver {
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
            driver: Mutex::new(Driver { events, epoch: 0, run: 0, next_nonce: 0 }),
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
        let mut driver = self.driver.lock().await;
        // Before the timeout bounds the wait for the cluster.
        request.spec.validate_timing()?;
        let timeout = request.spec.timeout();
        let asked_at = Instant::now();
        let participants = self.cluster.participants(timeout).await?;
        let mut setup = SetupTimes { ready_ms: asked_at.elapsed().as_secs_f64() * 1e3, wiring_ms: None };
        let p = participants.len();
        let topology = Topology::new(request.topology, p, request.dims.as_deref())?;
        request.spec.validate(p)?;
        catalogue::check(request.spec.collective, request.spec.algorithm)?;
        let spec = self.tuning.resolve_checked(&request.spec, topology.kind(), p, |spec| {
            check_memory(spec, &participants, &self.tuning)
        })?;
        let topology_spec = TopologySpec { kind: topology.kind(), p, dims: topology.dims().to_vec() };
        let sessions: Vec<SessionId> = participants.iter().map(|p| p.session).collect();
        if driver.drain() {
            // A link of the wiring broke between runs: the next run needs new links.
            self.cluster.set_wiring(None);
        }
        if self.cluster.wiring_of(&sessions).as_ref() != Some(&topology_spec) {
            self.cluster.set_wiring(None);
            let wiring_from = Instant::now();
            driver.wire(&participants, &topology, &topology_spec).await?;
            setup.wiring_ms = Some(wiring_from.elapsed().as_secs_f64() * 1e3);
            self.cluster.set_wiring(Some((topology_spec.clone(), sessions)));
        }
        driver.run += 1;
        let spec = RunSpec { run: driver.run, ..spec };
        let clocks =
            if spec.trace || spec.emulation.is_some() { Some(driver.probe_clocks(&participants).await?) } else { None };
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
        match driver.start(&participants, &spec, &limits).await {
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

impl Coordinator {
    /// Every node's rows of `spec` on `topology`: its footprint by this coordinator's
    /// tuning table (the one it admitted the run by) and its allowances, counted once
    /// here for all nodes (off the runtime's threads: it is a simulation).
    async fn limits_of(&self, spec: &RunSpec, topology: &Topology) -> Result<Vec<RunLimits>, RunError> {
        let (cache, tuning, spec, topology) =
            (self.allowances.clone(), self.tuning.clone(), spec.clone(), topology.clone());
        tokio::task::spawn_blocking(move || cache.limits_of_run(&spec, &topology, &tuning.footprint))
            .await
            .map_err(|failed| RunError::Limits { reason: failed.to_string() })
    }
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

impl Driver {
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

    /// Sends every participant its part of the wiring, each link with a fresh key only
    /// its two ends get, and waits for all links. When the wiring fails, every node's
    /// word is heard (until the deadline) before the one at fault is named.
    async fn wire(
        &mut self,
        participants: &[Participant],
        topology: &Topology,
        spec: &TopologySpec,
    ) -> Result<(), RunError> {
        self.epoch += 1;
        let epoch = self.epoch;
        let link_within = control::link_deadline(participants.len());
        let link_within_ms = u64::try_from(link_within.as_millis()).unwrap_or(u64::MAX);
        tracing::info!(epoch, %topology, ?link_within, "wiring");
        let mut link_keys: BTreeMap<(NodeId, NodeId), Key> = BTreeMap::new();
        for participant in participants {
            let neighbours = topology
                .neighbours(participant.id)
                .into_iter()
                .map(|n| {
                    let key =
                        link_keys.entry((participant.id.min(n), participant.id.max(n))).or_insert_with(Key::random);
                    Neighbour { id: n, address: participants[n].data_addr.clone(), key: key.clone() }
                })
                .collect();
            let wiring = Wiring { epoch, id: participant.id, topology: spec.clone(), neighbours, link_within_ms };
            let _ = participant.sender.send(ToNode::Wire(wiring));
        }
        let by_session = index(participants);
        let mut outcomes: Vec<Option<WireOutcome>> = vec![None; participants.len()];
        let within = link_within + WIRE_GRACE;
        let deadline = Instant::now() + within;
        while outcomes.iter().any(Option::is_none) {
            let Some(event) = self.next(deadline).await else { break };
            match event {
                Event::Closed { session } => {
                    if let Some(node) = by_session.get(&session) {
                        return Err(RunError::Disconnected { node: describe(node), stage: Stage::Wiring });
                    }
                }
                Event::Message { session, message, .. } => {
                    let Some(node) = by_session.get(&session) else { continue };
                    match message {
                        ToCoordinator::Wired { epoch: e } if e == epoch => {
                            outcomes[node.id] = Some(WireOutcome::Linked)
                        }
                        ToCoordinator::WireFailed { epoch: e, reason, unreachable, missing } if e == epoch => {
                            outcomes[node.id] = Some(WireOutcome::Failed { reason, unreachable, missing });
                        }
                        _ => {}
                    }
                }
            }
        }
        if outcomes.iter().all(|o| matches!(o, Some(WireOutcome::Linked))) {
            tracing::info!(epoch, %topology, "every link is up");
            return Ok(());
        }
        let error = blame(participants, &outcomes, topology, within);
        tracing::error!(epoch, %error, "wiring failed");
        Err(error.into())
    }

    /// Estimates each participant's clock offset from the coordinator's, as NTP does: a
    /// probe's answer is taken to be read halfway through its round trip, and of
    /// `CLOCK_PROBES` probes the one with the shortest round trip wins; its half round
    /// trip bounds the error.
    async fn probe_clocks(&mut self, participants: &[Participant]) -> Result<Vec<ClockOffset>, RunError> {
        let by_session = index(participants);
        let mut samples: Vec<Vec<ClockOffset>> = vec![Vec::new(); participants.len()];
        for round in 0..CLOCK_PROBES {
            let probe = self.next_nonce;
            self.next_nonce += 1;
            let mut sent_at = vec![0u64; participants.len()];
            for participant in participants {
                sent_at[participant.id] = timebase::now_ns();
                let _ = participant.sender.send(ToNode::ClockProbe { nonce: probe });
            }
            let mut answered = vec![false; participants.len()];
            let deadline = Instant::now() + PROBE_DEADLINE;
            while answered.iter().any(|a| !a) {
                let Some(event) = self.next(deadline).await else {
                    let silent: Vec<bool> = answered.iter().map(|a| !a).collect();
                    return Err(RunError::ProbeUnanswered { round, nodes: names(participants, &silent) });
                };
                match event {
                    Event::Message { session, message: ToCoordinator::ClockReply { nonce, node_ns }, .. }
                        if nonce == probe =>
                    {
                        let Some(node) = by_session.get(&session) else { continue };
                        if std::mem::replace(&mut answered[node.id], true) {
                            tracing::warn!(node = %describe(node), round, "dropped a second answer to one clock probe");
                            continue;
                        }
                        let received_at = timebase::now_ns();
                        let sent = sent_at[node.id];
                        let round_trip = received_at.saturating_sub(sent);
                        let midpoint = i128::from(sent / 2 + received_at / 2);
                        let offset = (i128::from(node_ns) - midpoint).clamp(i64::MIN.into(), i64::MAX.into());
                        samples[node.id].push(ClockOffset { offset_ns: offset as i64, error_ns: round_trip / 2 });
                    }
                    Event::Closed { session } if by_session.contains_key(&session) => {
                        let node = describe(&by_session[&session]);
                        return Err(RunError::Disconnected { node, stage: Stage::ClockProbe });
                    }
                    _ => {}
                }
            }
        }
        participants
            .iter()
            .map(|node| {
                ClockOffset::agreed(&samples[node.id])
                    .map_err(|why| RunError::ClockRefused { node: describe(node), why })
            })
            .collect()
    }

    /// Starts `spec` on every participant and gathers one report from each.
    /// Each node is sent its own row of `limits`.
    async fn start(
        &mut self,
        participants: &[Participant],
        spec: &RunSpec,
        limits: &[RunLimits],
    ) -> Result<Vec<NodeReport>, RunError> {
        tracing::info!(run = spec.run, collective = %spec.collective, algorithm = %spec.algorithm, size = spec.size_bytes, "run started");
        for (participant, limits) in participants.iter().zip(limits) {
            let order = ToNode::Start { spec: Box::new(spec.clone()), limits: Box::new(limits.clone()) };
            let _ = participant.sender.send(order);
        }
        let by_session = index(participants);
        let per_iteration = spec.timeout();
        // Validated specs have a deadline; saturating, so that nothing else can panic here.
        let whole = spec.run_deadline().unwrap_or(Duration::MAX);
        let mut deadline = limits::deadline_after(Instant::now(), whole.saturating_add(FAILURE_GRACE));
        let mut reports: Vec<Option<NodeReport>> = vec![None; participants.len()];
        let mut link_faults: Vec<String> = Vec::new();
        while reports.iter().any(Option::is_none) {
            let Some(event) = self.next(deadline).await else {
                break;
            };
            match event {
                Event::Closed { session } => {
                    if by_session.contains_key(&session) && !link_faults.is_empty() {
                        // The broken link is what ended the run.
                        break;
                    }
                    if let Some(node) = by_session.get(&session) {
                        return Err(RunError::Disconnected { node: describe(node), stage: Stage::Run(spec.run) });
                    }
                }
                Event::Message {
                    session,
                    message: message @ (ToCoordinator::Report(_) | ToCoordinator::NotStarted { .. }),
                    ..
                } => {
                    let Some(node) = by_session.get(&session) else {
                        continue;
                    };
                    let Some(report) = answer_to_start(message, node.id) else { continue };
                    if report.run != spec.run {
                        continue;
                    }
                    if reports[node.id].is_some() {
                        tracing::warn!(node = %describe(node), run = spec.run, "dropped a second report of one run");
                        continue;
                    }
                    if report.error.is_some() {
                        // The others are bounded by their own per-iteration deadlines.
                        let grace = per_iteration.saturating_add(FAILURE_GRACE);
                        deadline = deadline.min(limits::deadline_after(Instant::now(), grace));
                    }
                    reports[node.id] = Some(report);
                }
                Event::Message {
                    session, message: ToCoordinator::LinkFault { epoch, peer, cause, source }, ..
                } if epoch == self.epoch => {
                    // A broken link ends the run now (its nodes would wait out their
                    // deadline), once the other end has had a moment to say what it saw.
                    let Some(node) = by_session.get(&session) else { continue };
                    let Some(other) = participants.get(peer).filter(|other| other.id != node.id) else {
                        tracing::warn!(node = %describe(node), peer, "ignored a link fault naming no other node");
                        continue;
                    };
                    if link_faults.is_empty() {
                        deadline = deadline.min(Instant::now() + LINK_FAULT_HEARING);
                    }
                    link_faults.push(link_fault_text(
                        node,
                        other,
                        source.and_then(|source| participants.get(source)),
                        &cause,
                    ));
                }
                Event::Message { .. } => {}
            }
        }
        if !link_faults.is_empty() {
            let error =
                RunError::Failed { run: spec.run, collective: spec.collective, silent: None, failures: link_faults };
            tracing::error!(message = %error);
            return Err(error);
        }
        let failures: Vec<String> = reports
            .iter()
            .flatten()
            .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", describe(&participants[r.node]))))
            .collect();
        let silent: Vec<bool> = reports.iter().map(Option::is_none).collect();
        if !failures.is_empty() || silent.iter().any(|&s| s) {
            let silent = silent.iter().any(|&s| s).then(|| names(participants, &silent));
            let error = RunError::Failed { run: spec.run, collective: spec.collective, silent, failures };
            tracing::error!(message = %error);
            return Err(error);
        }
        tracing::info!(run = spec.run, "every node reported");
        Ok(reports.into_iter().flatten().collect())
    }
}

/// A node's answer to `Start` as the report of node `node`, the node whose session it
/// came on, whatever id a report gives: its report, or, when it did not start (a refusal
/// names no node), a report of that failure. `None` for any other message.
fn answer_to_start(message: ToCoordinator, node: NodeId) -> Option<NodeReport> {
    match message {
        ToCoordinator::Report(report) => Some(NodeReport { node, ..*report }),
        ToCoordinator::NotStarted { run, reason } => {
            Some(NodeReport { error: Some(reason), ..NodeReport::empty(run, node) })
        }
        _ => None,
    }
}

/// A node's clock minus the coordinator's, and the bound on that estimate's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClockOffset {
    offset_ns: i64,
    error_ns: u64,
}

/// Why a node's clock replies are not believed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ClockRefusal {
    #[error("it sent none")]
    NoReply,
    #[error(
        "its clock reads {} s from the coordinator's (more than {} s: not a clock that was set)",
        .offset_ns / 1_000_000_000,
        MOST_CLOCK_OFFSET.as_secs()
    )]
    FarOff { offset_ns: i64 },
    #[error(
        "two of its replies are {} µs apart, more than their round trips allow ({} µs): not one clock",
        .apart_ns / 1_000,
        .allowed_ns / 1_000
    )]
    Disagree { apart_ns: u64, allowed_ns: u64 },
}

impl ClockOffset {
    /// The offset of the probe with the shortest round trip, once every probe's answer is
    /// seen to be a clock's: within [`MOST_CLOCK_OFFSET`] of the coordinator's (both count
    /// from the Unix epoch), and each probe's interval (offset ± half its round trip, where
    /// an honest clock's offset must lie) overlapping the best one's, as Marzullo's
    /// intersection of NTP samples asks (Mills, RFC 5905 §11.2.1).
    fn agreed(samples: &[ClockOffset]) -> Result<ClockOffset, ClockRefusal> {
        let best = *samples.iter().min_by_key(|s| s.error_ns).ok_or(ClockRefusal::NoReply)?;
        if best.offset_ns.unsigned_abs() > MOST_CLOCK_OFFSET.as_nanos() as u64 {
            return Err(ClockRefusal::FarOff { offset_ns: best.offset_ns });
        }
        for sample in samples {
            let apart = sample.offset_ns.abs_diff(best.offset_ns);
            let allowed = sample.error_ns.saturating_add(best.error_ns).saturating_add(CLOCK_SLACK.as_nanos() as u64);
            if apart > allowed {
                return Err(ClockRefusal::Disagree { apart_ns: apart, allowed_ns: allowed });
            }
        }
        Ok(best)
    }

    /// The offset, or 0 when it lies within its own error bound: nodes on one host share
    /// a clock, and a probe's noise must not invent a difference between them.
    fn significant_ns(&self) -> i64 {
        if self.offset_ns.unsigned_abs() <= self.error_ns { 0 } else { self.offset_ns }
    }
}

/// Moves every node's trace events onto the coordinator's timeline, counted from the
/// run's earliest event, in emulated time: a node times its events in emulated time
/// from an origin on its wall clock, so under `dilation` each event is placed on the
/// wall clock first and the result (and the clocks' error bounds) divided by K.
fn align(reports: &mut [NodeReport], clocks: &[ClockOffset], dilation: Dilation) -> RunTrace {
    let mut events = Vec::new();
    for report in reports.iter_mut() {
        let Some(trace) = report.trace.take() else { continue };
        let clock = clocks[report.node];
        for mut event in trace.events {
            let node_ns = trace.origin_ns.saturating_add(dilation.wall_ns(event.at_ns));
            event.at_ns = (node_ns as i64 - clock.significant_ns()).max(0) as u64;
            events.push(event);
        }
    }
    let earliest = events.iter().map(|e| e.at_ns).min().unwrap_or(0);
    for event in &mut events {
        event.at_ns = dilation.emulated_ns(event.at_ns - earliest);
    }
    events.sort_by_key(|e| (e.at_ns, e.node));
    let clock_error_us = clocks.iter().map(|c| dilation.emulated_ns(c.error_ns) as f64 / 1e3).collect();
    RunTrace { events, clock_error_us }
}

/// Refuses, before any node allocates, a run that needs more memory than its nodes have:
/// the nodes at one host address share what the one of them with the least reported
/// when it registered, and need the sum of their estimates (the tuning table's `footprint`;
/// a local cluster's nodes each report the whole machine; without sharing, 64 of them at
/// 1 MiB all-to-all were let through to the kernel's OOM killer). Nodes that did not say
/// are left to check for themselves, as every node does again with the footprint by this
/// table it is sent with the run (`RunLimits`). Containers have an
/// address each, so nodes in containers on one host are not grouped.
fn check_memory(spec: &RunSpec, participants: &[Participant], tuning: &Tuning) -> Result<(), SpecError> {
    let mut hosts: BTreeMap<&str, Vec<&Participant>> = BTreeMap::new();
    for node in participants.iter().filter(|p| p.memory_bytes > 0) {
        hosts.entry(host_of(&node.data_addr)).or_default().push(node);
    }
    for (host, nodes) in hosts {
        let smallest = nodes.iter().min_by_key(|p| p.memory_bytes).expect("a group has a node");
        let holder = match nodes.len() {
            1 => describe(smallest),
            count => format!(
                "the {count} nodes at {host} (sharing the {} that {} reported)",
                ByteSize(smallest.memory_bytes),
                describe(smallest)
            ),
        };
        let ids = nodes.iter().map(|node| node.id);
        tuning.footprint.check(spec, participants.len(), ids, smallest.memory_bytes, &holder)?;
    }
    Ok(())
}

/// The host part of a node's data address, `HOST:PORT` or `[V6]:PORT` (the whole
/// address when it has no port).
fn host_of(data_addr: &str) -> &str {
    match data_addr.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => data_addr,
    }
}

/// How one node's part of a wiring ended.
#[derive(Debug, Clone)]
enum WireOutcome {
    Linked,
    Failed { reason: String, unreachable: Vec<NodeId>, missing: Vec<NodeId> },
}

/// Names the node(s) at fault for a failed wiring, most certain first: those that never
/// answered (paused, or stuck); else those a neighbour dialled and could not reach (an
/// address nobody listens on); else those that never dialled in. Each culprit is named
/// with the neighbours that reported it; every node's own report follows. A node knows
/// only its own links, and of each only its own side: it dials its higher-id neighbours
/// (so only they can be unreachable for it) and is dialled by its lower-id ones (so only
/// they can fail to dial in). A node it names otherwise is ignored, and logged against it.
fn blame(
    participants: &[Participant],
    outcomes: &[Option<WireOutcome>],
    topology: &Topology,
    within: Duration,
) -> WiringFailure {
    let silent: Vec<bool> = outcomes.iter().map(Option::is_none).collect();
    let mut named_unreachable: BTreeMap<NodeId, Vec<NodeId>> = BTreeMap::new();
    let mut named_missing: BTreeMap<NodeId, Vec<NodeId>> = BTreeMap::new();
    for (reporter, outcome) in outcomes.iter().enumerate() {
        if let Some(WireOutcome::Failed { unreachable, missing, .. }) = outcome {
            let neighbours = topology.neighbours(reporter);
            let dials = |n: &&NodeId| neighbours.contains(n) && **n > reporter;
            let is_dialled_by = |n: &&NodeId| neighbours.contains(n) && **n < reporter;
            let foreign: Vec<NodeId> = unreachable
                .iter()
                .filter(|n| !dials(n))
                .chain(missing.iter().filter(|n| !is_dialled_by(n)))
                .copied()
                .collect();
            if !foreign.is_empty() {
                tracing::warn!(
                    reporter = %describe(&participants[reporter]),
                    named = ?foreign,
                    "ignored the nodes a wiring failure names that the reporter neither dials nor is dialled by"
                );
            }
            for &n in unreachable.iter().filter(dials) {
                named_unreachable.entry(n).or_default().push(reporter);
            }
            for &n in missing.iter().filter(is_dialled_by) {
                named_missing.entry(n).or_default().push(reporter);
            }
        }
    }
    let culprits = if silent.iter().any(|&s| s) {
        Culprits::Silent { nodes: names(participants, &silent), within }
    } else {
        let (named, how) = if named_unreachable.is_empty() {
            (&named_missing, "never dialled")
        } else {
            (&named_unreachable, "could not be reached at its address by")
        };
        let most = named.values().map(Vec::len).max().unwrap_or(0);
        let culprits: Vec<String> = named
            .iter()
            .filter(|(_, reporters)| reporters.len() == most)
            .map(|(&n, reporters)| {
                let by: Vec<String> = reporters.iter().map(|r| format!("node {r}")).collect();
                format!("{} ({how} {})", describe(&participants[n]), by.join(", "))
            })
            .collect();
        if culprits.is_empty() { Culprits::Unknown } else { Culprits::Named(culprits) }
    };
    let reports = outcomes
        .iter()
        .enumerate()
        .filter_map(|(node, outcome)| match outcome {
            Some(WireOutcome::Failed { reason, .. }) => Some(format!("{}: {reason}", describe(&participants[node]))),
            _ => None,
        })
        .collect();
    WiringFailure { topology: topology.to_string(), culprits, reports }
}

fn index(participants: &[Participant]) -> HashMap<SessionId, Participant> {
    participants.iter().map(|p| (p.session, p.clone())).collect()
}

/// How the run's failure names a link fault `node` reported on its link to `other`: the
/// link and the cause; or, when the fault is charged to another node (`charged`, the
/// source of frames that overflowed what the run lets it queue, which `other` only
/// relayed), that node first.
fn link_fault_text(node: &Participant, other: &Participant, charged: Option<&Participant>, cause: &str) -> String {
    match charged.filter(|charged| charged.id != other.id && charged.id != node.id) {
        Some(source) => format!(
            "{} sent more than the run lets it queue at {}, through {}, as {} saw it: {cause}",
            describe(source),
            describe(node),
            describe(other),
            describe(node)
        ),
        None => format!(
            "the link between {} and {} failed, as {} saw it: {cause}",
            describe(node),
            describe(other),
            describe(node)
        ),
    }
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
    use topocomm_proto::TopologyKind;
    use topocomm_proto::control::NodeTrace;
    use topocomm_proto::spec::{Algorithm, Collective, RunSpec};

    use super::*;
    use crate::control::cluster::Registration;

    /// How a fake node misbehaves.
    #[derive(Clone, Copy)]
    struct Rogue {
        /// Answers every clock probe this many times.
        answers_per_probe: usize,
        /// Sends every report this many times.
        reports: usize,
        /// What it says its clock reads, given the probe's nonce.
        clock: fn(u64) -> u64,
        /// Answers every start with `NotStarted`, as a daemon does that is not wired.
        refuses: bool,
    }

    impl Rogue {
        const HONEST: Rogue = Rogue { answers_per_probe: 1, reports: 1, clock: |_| timebase::now_ns(), refuses: false };
    }

    /// Registers `p` in-process nodes that answer orders as a daemon would (without
    /// running anything), node 0 as `rogue` says; returns the coordinator.
    fn cluster_of(p: usize, rogue: Rogue) -> Arc<Coordinator> {
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

    #[test]
    fn a_dilated_trace_is_placed_on_the_wall_clock_and_read_in_emulated_time() {
        use topocomm_proto::flow::{FlowEvent, FlowKind};
        use topocomm_proto::frame::FrameHeader;
        let header = FrameHeader {
            run: 1,
            iteration: 0,
            src: 0,
            dst: 1,
            tag: 0,
            hops: 0,
            step: 1,
            packet: 0,
            last: true,
            due_ns: 0,
        };
        let event = |node, kind, at_ns| FlowEvent::of(at_ns, node, kind, &header, 8, None);
        // Node 1's clock runs 1 ms ahead of the coordinator's (well beyond its 1 µs
        // error bound); it began recording 40 µs of wall time after node 0. Each event
        // is timed in emulated ns from its node's origin, under ×4.
        let traced = |node, origin_ns, events| NodeReport {
            trace: Some(NodeTrace { origin_ns, events }),
            ..NodeReport::empty(1, node)
        };
        let mut reports = vec![
            traced(0, 5_000_000, vec![event(0, FlowKind::Send, 10_000)]),
            traced(1, 6_040_000, vec![event(1, FlowKind::Deliver, 5_000)]),
        ];
        let clocks =
            [ClockOffset { offset_ns: 0, error_ns: 1_000 }, ClockOffset { offset_ns: 1_000_000, error_ns: 4_000 }];
        let k = Dilation::from_milli(4000).unwrap();
        let trace = align(&mut reports, &clocks, k);
        // On the coordinator's wall clock the send comes 40 µs after node 0's origin and
        // the delivery 20 µs after the send: 5 µs of emulated time, counted from the
        // earliest event (the send).
        let at: Vec<(usize, u64)> = trace.events.iter().map(|e| (e.node, e.at_ns)).collect();
        assert_eq!(at, vec![(0, 0), (1, 5_000)]);
        assert_eq!(trace.clock_error_us, vec![0.25, 1.0]);
    }

    /// Issue 44, row 13: a node that lies in its clock replies is refused by name, before
    /// its lie can give a trace a 57-year axis or an emulated run a start 1.8e12 ms away.
    #[tokio::test]
    async fn a_node_whose_clock_replies_are_no_clock_is_refused_by_name() {
        let far_off = cluster_of(4, Rogue { clock: |_| 1 << 63, ..Rogue::HONEST });
        let error = far_off.execute(traced_request()).await.expect_err("a clock 2^63 ns from now");
        assert!(matches!(error, RunError::ClockRefused { why: ClockRefusal::FarOff { .. }, .. }), "{error}");
        assert!(error.to_string().starts_with("node 0 (node-0)'s clock replies were refused"), "{error}");
        // Each reply a different second: no one offset lies within every reply's round trip.
        let jumping =
            cluster_of(4, Rogue { clock: |nonce| timebase::now_ns() + nonce * 1_000_000_000, ..Rogue::HONEST });
        let error = jumping.execute(traced_request()).await.expect_err("a clock that jumps");
        assert!(matches!(error, RunError::ClockRefused { why: ClockRefusal::Disagree { .. }, .. }), "{error}");
        // An honest clock an hour behind is a clock (and the offset is measured).
        let behind = cluster_of(4, Rogue { clock: |_| timebase::now_ns() - 3_600_000_000_000, ..Rogue::HONEST });
        behind.execute(traced_request()).await.expect("an hour behind is still a clock");
    }

    fn traced_request() -> RunRequest {
        let spec = RunSpec { trace: true, ..RunSpec::new(Collective::Barrier, Algorithm::Hypercube) };
        RunRequest { topology: TopologyKind::Hypercube, dims: None, spec }
    }

    #[tokio::test]
    async fn a_node_answering_every_clock_probe_twice_cannot_panic_the_coordinator() {
        let coordinator = cluster_of(4, Rogue { answers_per_probe: 2, ..Rogue::HONEST });
        let outcome = coordinator.execute(traced_request()).await.expect("the run goes on");
        assert_eq!(outcome.reports.len(), 4);
        assert_eq!(outcome.trace.expect("traced").clock_error_us.len(), 4);
        // And again: the extra answers left over from the last run are no answers to this one.
        coordinator.execute(traced_request()).await.expect("the next run goes on");
    }

    #[tokio::test]
    async fn a_second_report_of_one_run_is_dropped() {
        let coordinator = cluster_of(4, Rogue { reports: 3, ..Rogue::HONEST });
        let outcome = coordinator.execute(traced_request()).await.expect("the forged repeats were dropped");
        assert_eq!(outcome.reports.iter().filter(|r| r.node == 0).count(), 1);
        assert!(outcome.reports.iter().all(|r| r.verified && r.error.is_none()));
    }

    /// Issue 45, item 6: a node that cannot start sends no report under a made-up id;
    /// its refusal is charged to the node whose session it came on.
    #[tokio::test]
    async fn a_node_that_did_not_start_is_named_by_its_session() {
        let coordinator = cluster_of(4, Rogue { refuses: true, ..Rogue::HONEST });
        let error = coordinator.execute(traced_request()).await.expect_err("node 0 did not start");
        let RunError::Failed { failures, silent, .. } = &error else { panic!("{error:?}") };
        assert_eq!(failures, &["node 0 (node-0): this node is not wired"], "{error}");
        assert_eq!(silent, &None, "{error}");
        // Any other message is no answer to a start.
        assert_eq!(answer_to_start(ToCoordinator::Pong, 2), None);
        let refusal = ToCoordinator::NotStarted { run: 9, reason: "why".into() };
        let report = answer_to_start(refusal, 2).expect("an answer");
        assert_eq!((report.run, report.node, report.error.as_deref(), report.verified), (9, 2, Some("why"), false));
        let claimed = ToCoordinator::Report(Box::new(NodeReport::empty(9, usize::MAX)));
        assert_eq!(answer_to_start(claimed, 2).expect("an answer").node, 2, "the session's node, not the claim");
    }

    #[tokio::test]
    async fn a_silent_prober_is_named() {
        let coordinator = cluster_of(2, Rogue { answers_per_probe: 0, ..Rogue::HONEST });
        tokio::time::pause();
        let error = coordinator.execute(traced_request()).await.unwrap_err();
        assert!(matches!(&error, RunError::ProbeUnanswered { nodes, .. } if nodes == "node 0 (node-0)"), "{error:?}");
        assert!(
            error.to_string().starts_with("clock probe 0 was not answered within 5s by node 0 (node-0)"),
            "{error}"
        );
    }

    fn participant(id: NodeId) -> Participant {
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

    #[test]
    fn nodes_at_one_host_share_its_memory() {
        let at =
            |id: NodeId, addr: &str| Participant { data_addr: addr.into(), memory_bytes: 1 << 30, ..participant(id) };
        // 4 blocks of 20 MiB in and out, twice the larger in flight: 320 MiB and a little
        // per node, 1.25 GiB and a little for the 4 of them.
        let spec =
            RunSpec { size_bytes: 20 << 20, iterations: 1, ..RunSpec::new(Collective::Alltoall, Algorithm::Ring) };
        let apart: Vec<Participant> = (0..4).map(|id| at(id, &format!("10.0.0.{id}:7000"))).collect();
        assert_eq!(check_memory(&spec, &apart, &Tuning::built_in()), Ok(()));
        let together: Vec<Participant> = (0..4).map(|id| at(id, &format!("127.0.0.1:{}", 7000 + id))).collect();
        let error = check_memory(&spec, &together, &Tuning::built_in()).unwrap_err();
        assert!(matches!(error, SpecError::TooMuchMemory { available, .. } if available == 1 << 30), "{error:?}");
        assert_eq!(
            error.to_string(),
            "the run needs about 1.3 GiB at the 4 nodes at 127.0.0.1 (sharing the 1.0 GiB \
             that node 0 (n0) reported); 1.0 GiB available"
        );
        assert_eq!(host_of("[::1]:7000"), "[::1]");
        assert_eq!(host_of("node-3"), "node-3");
    }

    fn failed(reason: &str, unreachable: Vec<NodeId>, missing: Vec<NodeId>) -> Option<WireOutcome> {
        Some(WireOutcome::Failed { reason: reason.into(), unreachable, missing })
    }

    #[test]
    fn a_failed_wiring_blames_the_silent_first_then_the_most_reported() {
        let participants: Vec<Participant> = (0..4).map(participant).collect();
        let ring = Topology::new(TopologyKind::Ring, 4, None).unwrap();

        let silent = [Some(WireOutcome::Linked), None, failed("no link to 1", vec![], vec![1]), None];
        let failure = blame(&participants, &silent, &ring, Duration::from_secs(20));
        assert_eq!(
            failure.culprits,
            Culprits::Silent { nodes: "node 1 (n1), node 3 (n3)".into(), within: Duration::from_secs(20) }
        );
        assert_eq!(failure.reports, ["node 2 (n2): no link to 1"]);
        assert_eq!(
            failure.to_string(),
            format!(
                "wiring the {ring} failed: node 1 (n1), node 3 (n3) did not answer within 20s (paused, or stuck)\n  \
                 node 2 (n2): no link to 1"
            )
        );

        // Unreachable beats never dialled; of those, the one most neighbours named.
        let unreachable = [
            failed("a", vec![3], vec![]),
            Some(WireOutcome::Linked),
            failed("b", vec![3, 1], vec![]),
            failed("c", vec![], vec![0]),
        ];
        let failure = blame(&participants, &unreachable, &ring, Duration::from_secs(20));
        let culprit = "node 3 (n3) (could not be reached at its address by node 0, node 2)";
        assert_eq!(failure.culprits, Culprits::Named(vec![culprit.into()]));
        assert_eq!(
            failure.to_string(),
            format!("wiring the {ring} failed at {culprit}\n  node 0 (n0): a\n  node 2 (n2): b\n  node 3 (n3): c")
        );

        let answered = [
            failed("a", vec![], vec![]),
            Some(WireOutcome::Linked),
            failed("b", vec![], vec![9]),
            Some(WireOutcome::Linked),
        ];
        let failure = blame(&participants, &answered, &ring, Duration::from_secs(20));
        assert_eq!(failure.culprits, Culprits::Unknown, "a node outside the cluster is named by nobody");
        assert_eq!(failure.to_string(), format!("wiring the {ring} failed\n  node 0 (n0): a\n  node 2 (n2): b"));

        // "No route to host" points at the host's neighbour table, and how to check it.
        let reason = "could not link to neighbour 3 at 172.18.0.5:40000 within 15s (No route to host (os error 113))";
        let no_route = [Some(WireOutcome::Linked), Some(WireOutcome::Linked), failed(reason, vec![3], vec![]), None];
        let text = blame(&participants, &no_route, &ring, Duration::from_secs(20)).to_string();
        assert!(text.ends_with(NEIGHBOUR_TABLE_HINT), "{text}");
        assert!(text.contains("gc_thresh3") && text.contains("deploy/prepare-host.sh"), "{text}");
        // Node 3 of a ring of 4 links to 0 and 2: what it says of node 1 is not its to say.
        let foreign = [
            Some(WireOutcome::Linked),
            Some(WireOutcome::Linked),
            Some(WireOutcome::Linked),
            failed("could not link to neighbour 1", vec![1], vec![1]),
        ];
        let failure = blame(&participants, &foreign, &ring, Duration::from_secs(20));
        assert_eq!(failure.culprits, Culprits::Unknown, "a healthy node was blamed by a node not linked to it");
        assert_eq!(
            failure.to_string(),
            format!("wiring the {ring} failed\n  node 3 (n3): could not link to neighbour 1")
        );
    }

    /// Issue 44, row 14: on a hypercube, a node dials only its higher-id neighbours and is
    /// dialled only by its lower-id ones, so it cannot know that a lower one is unreachable
    /// or that a higher one never dialled in: a failure that says so blames nobody.
    #[test]
    fn a_wiring_failure_names_only_what_its_reporter_can_see_of_a_link() {
        let participants: Vec<Participant> = (0..8).map(participant).collect();
        let cube = Topology::new(TopologyKind::Hypercube, 8, None).unwrap();
        let within = Duration::from_secs(20);
        let mut outcomes = vec![Some(WireOutcome::Linked); 8];
        // Node 5 (neighbours 1, 4, 7): it is dialled by 1 and 4, and dials 7.
        outcomes[5] = failed("forged", vec![1, 4], vec![7]);
        let failure = blame(&participants, &outcomes, &cube, within);
        assert_eq!(failure.culprits, Culprits::Unknown, "{failure}");
        // What it can see is still believed: 7 unreachable, 4 never dialling in.
        outcomes[5] = failed("true", vec![7], vec![4]);
        let failure = blame(&participants, &outcomes, &cube, within);
        assert_eq!(
            failure.culprits,
            Culprits::Named(vec!["node 7 (n7) (could not be reached at its address by node 5)".into()])
        );
    }

    #[test]
    fn the_nodes_get_longer_to_link_in_a_larger_cluster() {
        assert_eq!(control::link_deadline(8), Duration::from_millis(15_800));
        assert_eq!(control::link_deadline(256), Duration::from_millis(40_600));
        assert_eq!(control::link_deadline(usize::MAX), control::LONGEST_LINK_DEADLINE);
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
        let left = |stage| RunError::Disconnected { node: "node 1 (n1)".into(), stage }.to_string();
        assert_eq!(left(Stage::Wiring), "node 1 (n1) disconnected while wiring");
        assert_eq!(left(Stage::ClockProbe), "node 1 (n1) disconnected while its clock was probed");
        assert_eq!(left(Stage::Run(7)), "node 1 (n1) disconnected during run 7");
    }
}
