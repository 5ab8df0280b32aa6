//! Drives runs, one at a time: waits for the cluster, re-wires it when the topology
//! (or a node) changed, starts the run on every node and gathers their reports, failing
//! with the names of the nodes at fault when anything goes wrong or runs out of time.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::{Mutex, mpsc};
use tokio::time::Instant;
use topocomm_node::timebase;
use topocomm_proto::control::{
    NodeReport, RunOutcome, RunRequest, RunTrace, ToCoordinator, ToNode, TopologySpec, Wiring,
};
use topocomm_proto::{Topology, catalogue};

use crate::cluster::{Cluster, Event, Participant, SessionId};

/// How long every node has to bring its links up.
const WIRE_DEADLINE: Duration = Duration::from_secs(20);

/// Clock probes per node before a traced run.
const CLOCK_PROBES: u64 = 8;

/// How long a round of clock probes may take.
const PROBE_DEADLINE: Duration = Duration::from_secs(5);

/// After the first node reports a failure, how much longer the others get.
const FAILURE_GRACE: Duration = Duration::from_secs(2);

/// The coordinator: the cluster and the one-at-a-time run driver.
pub struct Coordinator {
    pub cluster: Cluster,
    driver: Mutex<Driver>,
}

struct Driver {
    events: mpsc::UnboundedReceiver<Event>,
    epoch: u64,
    run: u64,
}

impl Coordinator {
    /// A coordinator for `expected` nodes sharing `token`.
    pub fn new(expected: usize, token: String) -> Self {
        let (cluster, events) = Cluster::new(expected, token);
        Coordinator { cluster, driver: Mutex::new(Driver { events, epoch: 0, run: 0 }) }
    }

    /// Runs `request` on the cluster: wires it as asked, then runs and gathers.
    pub async fn execute(&self, request: RunRequest) -> Result<RunOutcome, String> {
        let mut driver = self.driver.lock().await;
        let timeout = Duration::from_millis(request.spec.timeout_ms);
        let participants = self.cluster.participants(timeout).await?;
        let p = participants.len();
        let topology = Topology::new(request.topology, p, request.dims.as_deref()).map_err(|e| e.to_string())?;
        request.spec.validate(p).map_err(|e| e.to_string())?;
        catalogue::check(request.spec.collective, request.spec.algorithm)?;
        let topology_spec = TopologySpec { kind: topology.kind(), p, dims: topology.dims().to_vec() };
        let sessions: Vec<SessionId> = participants.iter().map(|p| p.session).collect();
        driver.drain();
        if self.cluster.wiring_of(&sessions).as_ref() != Some(&topology_spec) {
            self.cluster.set_wiring(None);
            driver.wire(&participants, &topology, &topology_spec).await?;
            self.cluster.set_wiring(Some((topology_spec.clone(), sessions)));
        }
        let spec = &request.spec;
        let algorithm = catalogue::resolve(spec.collective, spec.algorithm, topology.kind(), p, spec.size_bytes);
        driver.run += 1;
        let spec = topocomm_proto::spec::RunSpec { run: driver.run, algorithm, ..request.spec };
        let clocks =
            if spec.trace || spec.emulation.is_some() { Some(driver.probe_clocks(&participants).await?) } else { None };
        // With emulated links every iteration starts at one common instant (see node::run).
        let clock_offsets_ns = match (&clocks, spec.emulation) {
            (Some(clocks), Some(_)) => clocks.iter().map(ClockOffset::significant_ns).collect(),
            _ => Vec::new(),
        };
        let spec = topocomm_proto::spec::RunSpec { clock_offsets_ns, ..spec };
        match driver.start(&participants, &spec).await {
            Ok(mut reports) => {
                let trace = clocks.map(|clocks| align(&mut reports, &clocks));
                Ok(RunOutcome { spec, topology: topology_spec, reports, trace })
            }
            Err(error) => {
                // Whatever is left of this run dies with the next wiring.
                self.cluster.set_wiring(None);
                Err(error)
            }
        }
    }
}

impl Driver {
    /// Forgets events left over from earlier runs.
    fn drain(&mut self) {
        while self.events.try_recv().is_ok() {}
    }

    /// The next event before `deadline`, or `None` when it passes.
    async fn next(&mut self, deadline: Instant) -> Option<Event> {
        tokio::time::timeout_at(deadline, self.events.recv()).await.ok().flatten()
    }

    /// Sends every participant its part of the wiring and waits for all links.
    async fn wire(
        &mut self,
        participants: &[Participant],
        topology: &Topology,
        spec: &TopologySpec,
    ) -> Result<(), String> {
        self.epoch += 1;
        let epoch = self.epoch;
        tracing::info!(epoch, %topology, "wiring");
        for participant in participants {
            let neighbours = topology
                .neighbours(participant.id)
                .into_iter()
                .map(|n| (n, participants[n].data_addr.clone()))
                .collect();
            let wiring = Wiring { epoch, id: participant.id, topology: spec.clone(), neighbours };
            let _ = participant.sender.send(ToNode::Wire(wiring));
        }
        let by_session = index(participants);
        let mut waiting: Vec<bool> = vec![true; participants.len()];
        let deadline = Instant::now() + WIRE_DEADLINE;
        while waiting.iter().any(|&w| w) {
            let Some(event) = self.next(deadline).await else {
                return Err(format!(
                    "wiring the {topology} timed out after {WIRE_DEADLINE:?}; not linked: {}",
                    names(participants, &waiting)
                ));
            };
            match event {
                Event::Closed { session } => {
                    if let Some(node) = by_session.get(&session) {
                        return Err(format!("{} disconnected while wiring", describe(node)));
                    }
                }
                Event::Message { session, message } => {
                    let Some(node) = by_session.get(&session) else {
                        continue;
                    };
                    match message {
                        ToCoordinator::Wired { epoch: e } if e == epoch => waiting[node.id] = false,
                        ToCoordinator::WireFailed { epoch: e, reason } if e == epoch => {
                            return Err(format!("{} could not wire: {reason}", describe(node)));
                        }
                        _ => {}
                    }
                }
            }
        }
        tracing::info!(epoch, %topology, "every link is up");
        Ok(())
    }

    /// Estimates each participant's clock offset from the coordinator's, as NTP does: a
    /// probe's answer is taken to be read halfway through its round trip, and of
    /// `CLOCK_PROBES` probes the one with the shortest round trip wins; its half round
    /// trip bounds the error.
    async fn probe_clocks(&mut self, participants: &[Participant]) -> Result<Vec<ClockOffset>, String> {
        let by_session = index(participants);
        let mut best: Vec<Option<ClockOffset>> = vec![None; participants.len()];
        for round in 0..CLOCK_PROBES {
            let mut sent_at = vec![0u64; participants.len()];
            for participant in participants {
                sent_at[participant.id] = timebase::now_ns();
                let _ = participant.sender.send(ToNode::ClockProbe { nonce: round });
            }
            let mut waiting = participants.len();
            let deadline = Instant::now() + PROBE_DEADLINE;
            while waiting > 0 {
                let Some(event) = self.next(deadline).await else {
                    return Err(format!("clock probe {round} was not answered within {PROBE_DEADLINE:?}"));
                };
                match event {
                    Event::Message { session, message: ToCoordinator::ClockReply { nonce, node_ns } }
                        if nonce == round =>
                    {
                        let Some(node) = by_session.get(&session) else { continue };
                        let received_at = timebase::now_ns();
                        let sent = sent_at[node.id];
                        let round_trip = received_at.saturating_sub(sent);
                        let offset_ns = node_ns as i64 - (sent / 2 + received_at / 2) as i64;
                        let candidate = ClockOffset { offset_ns, error_ns: round_trip / 2 };
                        if best[node.id].is_none_or(|b| candidate.error_ns < b.error_ns) {
                            best[node.id] = Some(candidate);
                        }
                        waiting -= 1;
                    }
                    Event::Closed { session } if by_session.contains_key(&session) => {
                        return Err(format!(
                            "{} disconnected while its clock was probed",
                            describe(&by_session[&session])
                        ));
                    }
                    _ => {}
                }
            }
        }
        Ok(best.into_iter().map(|b| b.expect("every node answered every probe")).collect())
    }

    /// Starts `spec` on every participant and gathers one report from each.
    async fn start(
        &mut self,
        participants: &[Participant],
        spec: &topocomm_proto::spec::RunSpec,
    ) -> Result<Vec<NodeReport>, String> {
        tracing::info!(run = spec.run, collective = %spec.collective, algorithm = %spec.algorithm, size = spec.size_bytes, "run started");
        for participant in participants {
            let _ = participant.sender.send(ToNode::Start(Box::new(spec.clone())));
        }
        let by_session = index(participants);
        let per_iteration = Duration::from_millis(spec.timeout_ms);
        let mut deadline = Instant::now() + per_iteration * (spec.warmup + spec.iterations) + FAILURE_GRACE;
        let mut reports: Vec<Option<NodeReport>> = vec![None; participants.len()];
        while reports.iter().any(Option::is_none) {
            let Some(event) = self.next(deadline).await else {
                break;
            };
            match event {
                Event::Closed { session } => {
                    if let Some(node) = by_session.get(&session) {
                        return Err(format!("{} disconnected during run {}", describe(node), spec.run));
                    }
                }
                Event::Message { session, message: ToCoordinator::Report(report) } => {
                    let Some(node) = by_session.get(&session) else {
                        continue;
                    };
                    if report.run != spec.run {
                        continue;
                    }
                    if report.error.is_some() {
                        // The others are bounded by their own per-iteration deadlines.
                        deadline = deadline.min(Instant::now() + per_iteration + FAILURE_GRACE);
                    }
                    reports[node.id] = Some(NodeReport { node: node.id, ..*report });
                }
                Event::Message { .. } => {}
            }
        }
        let failed: Vec<String> = reports
            .iter()
            .flatten()
            .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", describe(&participants[r.node]))))
            .collect();
        let silent: Vec<bool> = reports.iter().map(Option::is_none).collect();
        if !failed.is_empty() || silent.iter().any(|&s| s) {
            let mut message = format!("run {} of {} failed", spec.run, spec.collective);
            if silent.iter().any(|&s| s) {
                message += &format!("; no report from {}", names(participants, &silent));
            }
            for failure in failed {
                message += &format!("\n  {failure}");
            }
            tracing::error!(%message);
            return Err(message);
        }
        tracing::info!(run = spec.run, "every node reported");
        Ok(reports.into_iter().flatten().collect())
    }
}

/// A node's clock minus the coordinator's, and the bound on that estimate's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClockOffset {
    offset_ns: i64,
    error_ns: u64,
}

impl ClockOffset {
    /// The offset, or 0 when it lies within its own error bound: nodes on one host share
    /// a clock, and a probe's noise must not invent a difference between them.
    fn significant_ns(&self) -> i64 {
        if self.offset_ns.unsigned_abs() <= self.error_ns { 0 } else { self.offset_ns }
    }
}

/// Moves every node's trace events onto the coordinator's timeline, counted from the
/// run's earliest event.
fn align(reports: &mut [NodeReport], clocks: &[ClockOffset]) -> RunTrace {
    let mut events = Vec::new();
    for report in reports.iter_mut() {
        let Some(trace) = report.trace.take() else { continue };
        let clock = clocks[report.node];
        for mut event in trace.events {
            let node_ns = trace.origin_ns + event.at_ns;
            event.at_ns = (node_ns as i64 - clock.significant_ns()).max(0) as u64;
            events.push(event);
        }
    }
    let earliest = events.iter().map(|e| e.at_ns).min().unwrap_or(0);
    for event in &mut events {
        event.at_ns -= earliest;
    }
    events.sort_by_key(|e| (e.at_ns, e.node));
    RunTrace { events, clock_error_us: clocks.iter().map(|c| c.error_ns as f64 / 1e3).collect() }
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
