//! Wiring the cluster for a topology: every node its part of the wiring, each link a
//! fresh key; and, when not every link comes up, the blame: who is at fault, and every
//! node's own word.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;
use topocomm_proto::NodeId;
use topocomm_proto::Topology;
use topocomm_proto::auth::Key;
use topocomm_proto::control::{self, Neighbour, ToCoordinator, ToNode, TopologySpec, Wiring};

use crate::control::cluster::{Event, Participant};

use super::{Conductor, RunError, Underway, describe, index, names};

/// How much longer than its nodes' deadline to link (`control::link_deadline`) the
/// coordinator waits for their word on a wiring.
const WIRE_GRACE: Duration = Duration::from_secs(5);

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

impl Conductor {
    /// Sends every participant its part of the wiring, each link with a fresh key only
    /// its two ends get, and waits for all links. When the wiring fails, every node's
    /// word is heard (until the deadline) before the one at fault is named.
    pub(super) async fn wire(
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
                        return Err(RunError::Disconnected { node: describe(node), underway: Underway::Wiring });
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

#[cfg(test)]
mod tests {
    use topocomm_proto::TopologyKind;

    use super::*;
    use crate::control::run::tests::participant;

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
}
