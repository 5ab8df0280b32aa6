//! A run on its nodes: the order to start it, and the gathering of every node's report
//! (a broken link or a failed node ending it early, named).

use std::time::Duration;

use tokio::time::Instant;
use topocomm_node::daemon::limits;
use topocomm_proto::NodeId;
use topocomm_proto::control::{NodeReport, RunLimits, ToCoordinator, ToNode};
use topocomm_proto::spec::RunSpec;

use crate::control::cluster::{Event, Participant};

use super::{Conductor, RunError, Underway, describe, index, names};

/// After the first node reports a failure, how much longer the others get.
const FAILURE_GRACE: Duration = Duration::from_secs(2);

/// How long the switches of a run have to report once its ranks have.
const SWITCH_REPORTS: Duration = Duration::from_secs(5);

/// How long a run that a node reported a broken link in waits to hear the link's other
/// end (whose view may name the cause better: a tampered record, say) before it fails.
const LINK_FAULT_HEARING: Duration = Duration::from_millis(300);

impl Conductor {
    /// Starts `spec` on every participant and gathers one report from each.
    /// Each node is sent its own row of `limits`. The first `ranks` participants run the
    /// collective; the rest are switches, which forward until their part is ended
    /// (`Abort`), once every rank has reported, and then report what they forwarded.
    pub(super) async fn start(
        &mut self,
        participants: &[Participant],
        ranks: usize,
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
        let mut switches_ended = participants.len() == ranks;
        while reports.iter().any(Option::is_none) {
            if !switches_ended && reports[..ranks].iter().all(Option::is_some) {
                // Every rank is done (and so is every frame of the run): the switches
                // report what they forwarded.
                switches_ended = true;
                for switch in &participants[ranks..] {
                    let _ = switch.sender.send(ToNode::Abort { run: spec.run });
                }
                deadline = deadline.min(limits::deadline_after(Instant::now(), SWITCH_REPORTS));
            }
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
                        return Err(RunError::Disconnected { node: describe(node), underway: Underway::Run(spec.run) });
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
        // A switch whose part was never ended owes no report yet: the ranks' silence is the news.
        let silent: Vec<bool> =
            reports.iter().enumerate().map(|(at, report)| report.is_none() && (at < ranks || switches_ended)).collect();
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

#[cfg(test)]
mod tests {
    use topocomm_proto::control::{NodeReport, ToCoordinator};

    use super::answer_to_start;
    use crate::control::run::RunError;
    use crate::control::run::tests::{Rogue, cluster_of, traced_request};

    #[tokio::test]
    async fn a_second_report_of_one_run_is_dropped() {
        let coordinator = cluster_of(4, Rogue { reports: 3, ..Rogue::HONEST });
        let outcome = coordinator.execute(traced_request()).await.expect("the forged repeats were dropped");
        assert_eq!(outcome.reports.iter().filter(|r| r.node == 0).count(), 1);
        assert!(outcome.reports.iter().all(|r| r.verified && r.error.is_none()));
    }

    /// A node that cannot start sends no report under a made-up id; its refusal is
    /// charged to the node whose session it came on.
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
}
