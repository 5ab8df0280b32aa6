//! The clocks of a run's nodes: the probes that estimate each node's offset from the
//! coordinator's clock (refusing replies that are no clock's), and the alignment of a
//! traced run's events onto one timeline.

use std::time::Duration;

use tokio::time::Instant;
use topocomm_node::timebase;
use topocomm_proto::control::{NodeReport, RunTrace, ToCoordinator, ToNode};
use topocomm_proto::spec::Dilation;

use crate::control::cluster::{Event, Participant};

use super::{Conductor, RunError, Underway, describe, index, names};

/// Clock probes per node before a traced run.
const CLOCK_PROBES: u64 = 8;

/// How long a round of clock probes may take.
pub(super) const PROBE_DEADLINE: Duration = Duration::from_secs(5);

/// The farthest a node's clock may read from the coordinator's: both count from the Unix
/// epoch, so a day apart is a machine whose clock was never set, or a node lying.
const MOST_CLOCK_OFFSET: Duration = Duration::from_secs(24 * 3600);

/// How far two probes' intervals may miss each other and still be one clock's: the
/// clocks' drift over the probes' few milliseconds, and the rounding of the midpoints.
const CLOCK_SLACK: Duration = Duration::from_millis(1);

impl Conductor {
    /// Estimates each participant's clock offset from the coordinator's, as NTP does: a
    /// probe's answer is taken to be read halfway through its round trip, and of
    /// `CLOCK_PROBES` probes the one with the shortest round trip wins; its half round
    /// trip bounds the error.
    pub(super) async fn probe_clocks(&mut self, participants: &[Participant]) -> Result<Vec<ClockOffset>, RunError> {
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
                        return Err(RunError::Disconnected { node, underway: Underway::ClockProbe });
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
}

/// A node's clock minus the coordinator's, and the bound on that estimate's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ClockOffset {
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
    pub(super) fn significant_ns(&self) -> i64 {
        if self.offset_ns.unsigned_abs() <= self.error_ns { 0 } else { self.offset_ns }
    }
}

/// Moves every node's trace events onto the coordinator's timeline, counted from the
/// run's earliest event, in emulated time: a node times its events in emulated time
/// from an origin on its wall clock, so under `dilation` each event is placed on the
/// wall clock first and the result (and the clocks' error bounds) divided by K.
pub(super) fn align(reports: &mut [NodeReport], clocks: &[ClockOffset], dilation: Dilation) -> RunTrace {
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

#[cfg(test)]
mod tests {
    use topocomm_proto::control::NodeTrace;

    use super::*;
    use crate::control::run::RunError;
    use crate::control::run::tests::{Rogue, cluster_of, traced_request};

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
}
