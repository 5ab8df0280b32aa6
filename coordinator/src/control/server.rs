//! The coordinator's control listener. Every connection first passes the mutual
//! handshake (`topocomm_node::security::handshake`: at most a few KiB and a few seconds for a
//! stranger, a capped number of strangers at once per source address and in all, the
//! oldest of the busiest source dropped for the newest and told so; refusals counted in
//! a log line a second); its purpose then makes it a node's control session or a CLI
//! client's request. A node may send a report only when a run it was started on owes
//! one, and only as long as that run's spec lets a report be; anything else closes its
//! session, naming it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::codec::{Framed, LengthDelimitedCodec, LengthDelimitedCodecError};
use topocomm_node::security::encryption::Channel;
use topocomm_node::security::handshake::{self, Gate, GateRefusal};
use topocomm_node::security::{PendingHandshakes, RefusalLog};
use topocomm_proto::auth::{self, Hello, Key, Purpose};
use topocomm_proto::codec;
use topocomm_proto::control::{
    ClientRequest, ClientResponse, MAX_ORDER_FRAME, MAX_REPORT_FRAME, ToCoordinator, ToNode,
};
use topocomm_proto::spec::RunSpec;

use crate::control::cluster::Registration;
use crate::control::run::Coordinator;

/// How often the coordinator asks each node whether it is there.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// A node that says nothing for this long is taken for lost: its session is closed (a
/// run in progress fails naming it) and it must register again.
const SILENCE_LIMIT: Duration = Duration::from_secs(10);

/// How many of one node's messages may wait for the run driver; more are dropped (a
/// node sends at most one per order, so only a broken or rogue node exceeds it).
const QUEUED_PER_NODE: usize = 16;

/// The longest message a node may send when no run owes a report: a wiring's answer (a
/// failure names the neighbours it could not link to, with a line each), a clock reply,
/// a pong. With [`QUEUED_PER_NODE`], what one node can make the coordinator hold.
const MAX_UNASKED_MESSAGE: usize = 1 << 20;

/// How many runs' reports one session may owe at once: a run the coordinator gave up on
/// may still report after the next one started. Older debts are forgotten.
const OWED_REPORTS: usize = 4;

/// A report's fixed part, on the safe side: its counts, verdict, digest, and the words
/// of a mismatch or an error.
const REPORT_BASE: u64 = 64 << 10;

/// One flow event as bincode writes it, on the safe side (its integers as varints).
const FLOW_EVENT_BYTES: u64 = 96;

/// A framed control connection.
pub type Control<S = TcpStream> = Framed<Channel<S>, LengthDelimitedCodec>;

/// Wraps an authenticated channel in the control framing, accepting messages of up to
/// `max_frame` bytes from the other side.
pub fn framed<S: AsyncRead + AsyncWrite>(channel: Channel<S>, max_frame: usize) -> Control<S> {
    Framed::new(channel, LengthDelimitedCodec::builder().max_frame_length(max_frame).new_codec())
}

/// Sends one control message.
pub async fn send<S, T>(control: &mut Control<S>, message: &T) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: serde::Serialize,
{
    let body = codec::encode(message)?;
    control.send(Bytes::from(body)).await.context("sending a control message")
}

/// Receives one control message; `None` when the peer closed the connection.
pub async fn receive<S, T>(control: &mut Control<S>) -> anyhow::Result<Option<T>>
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: serde::de::DeserializeOwned,
{
    match control.next().await {
        None => Ok(None),
        Some(body) => Ok(Some(codec::decode(&body.context("reading a control message")?)?)),
    }
}

/// Accepts control connections until the task is dropped.
pub async fn serve(listener: TcpListener, coordinator: Arc<Coordinator>) {
    let pending = Arc::new(PendingHandshakes::default());
    let refusals = RefusalLog::start("control connections");
    let mut last_accept_warning: Option<Instant> = None;
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let (coordinator, pending, refusals) = (coordinator.clone(), pending.clone(), refusals.clone());
                tokio::spawn(async move {
                    let gate = ControlGate { key: coordinator.key() };
                    let encrypted = coordinator.encrypted();
                    let accepted = handshake::accept_pending(stream, peer, &pending, &refusals, &gate, encrypted).await;
                    // A refusal is counted in the refusal log.
                    let Ok((hello, channel)) = accepted else { return };
                    if let Err(error) = connection(hello, channel, &coordinator).await {
                        tracing::warn!(%peer, error = %format!("{error:#}"), "control connection ended with an error");
                    }
                });
            }
            Err(error) => {
                // Out of descriptors, most likely: say so once a second, not per try.
                if last_accept_warning.is_none_or(|at| at.elapsed() > Duration::from_secs(1)) {
                    tracing::warn!(%error, "accept failed");
                    last_accept_warning = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// What the control port lets in: nodes with a valid name and address, and clients, each
/// proving the cluster key.
struct ControlGate<'a> {
    key: &'a Key,
}

impl Gate for ControlGate<'_> {
    fn key_for(&self, hello: &Hello) -> Result<Key, GateRefusal> {
        match &hello.purpose {
            Purpose::Node { name, data_addr, .. } => {
                auth::check_name(name)?;
                auth::check_address(data_addr)?;
            }
            Purpose::Client => {}
            Purpose::Link { .. } => return Err(GateRefusal::NotAControlLink),
        }
        Ok(self.key.clone())
    }

    fn admit(&self, _hello: &Hello) -> Result<(), GateRefusal> {
        Ok(())
    }
}

/// Serves one authenticated connection: a node's session or a client's request.
async fn connection(hello: Hello, channel: Channel<TcpStream>, coordinator: &Coordinator) -> anyhow::Result<()> {
    match hello.purpose {
        Purpose::Node { name, data_addr, memory_bytes } => {
            let control = framed(channel, MAX_REPORT_FRAME);
            node_session(control, coordinator, Registration { name, data_addr, memory_bytes }).await
        }
        Purpose::Client => {
            let mut control = framed(channel, MAX_ORDER_FRAME);
            let request = tokio::time::timeout(handshake::HANDSHAKE_TIMEOUT, receive::<_, ClientRequest>(&mut control))
                .await
                .context("no request within the deadline")??;
            let Some(request) = request else { return Ok(()) };
            let response = match request {
                ClientRequest::Run(request) => {
                    let executed = tokio::select! {
                        executed = coordinator.execute(*request) => executed,
                        // The client sends nothing more: a read that ends means it left (a
                        // cancelled job of the lab, a Ctrl-C), and the run, dropped, is
                        // aborted on its nodes.
                        _ = receive::<_, ClientRequest>(&mut control) => return Ok(()),
                    };
                    match executed {
                        Ok(outcome) => ClientResponse::RunDone(Box::new(outcome)),
                        Err(error) => ClientResponse::Error(error.to_string()),
                    }
                }
                ClientRequest::Status => ClientResponse::Status(coordinator.cluster.status()),
            };
            send(&mut control, &response).await
        }
        Purpose::Link { .. } => Ok(()),
    }
}

/// Carries one node's control session until either side closes it.
async fn node_session(
    mut control: Control,
    coordinator: &Coordinator,
    registration: Registration,
) -> anyhow::Result<()> {
    let (sender, mut outgoing) = mpsc::unbounded_channel();
    let name = registration.name.clone();
    let session = match coordinator.cluster.register(registration, sender) {
        Ok(session) => session,
        Err(refusal) => {
            tracing::warn!(%name, %refusal, "refused a node");
            return send(&mut control, &ToNode::Refused { reason: refusal.to_string() }).await;
        }
    };
    let queue = Arc::new(Semaphore::new(QUEUED_PER_NODE));
    let mut dropped: u64 = 0;
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    let mut last_heard = Instant::now();
    let mut owed = OwedReports::default();
    let result = loop {
        let limit = owed.longest_message();
        control.codec_mut().set_max_frame_length(limit);
        tokio::select! {
            message = outgoing.recv() => match message {
                Some(message) => {
                    owed.ordered(&message);
                    if let Err(error) = send(&mut control, &message).await { break Err(error) }
                }
                None => break Ok(()),
            },
            incoming = receive::<_, ToCoordinator>(&mut control) => match incoming {
                Ok(Some(ToCoordinator::Pong)) => last_heard = Instant::now(),
                Ok(Some(ToCoordinator::Report(report))) if !owed.settle(report.run) => {
                    tracing::warn!(%name, run = report.run, "closing a node's session: it sent a report no run asked for");
                    break Err(anyhow::anyhow!("node {name} sent a report of run {} that no run asked of it", report.run));
                }
                Ok(Some(ToCoordinator::NotStarted { run, .. })) if !owed.settle(run) => {
                    tracing::warn!(%name, run, "closing a node's session: it refused a run no one asked of it");
                    break Err(anyhow::anyhow!("node {name} refused run {run}, which no run asked of it"));
                }
                Ok(Some(message)) => {
                    last_heard = Instant::now();
                    match queue.clone().try_acquire_owned() {
                        Ok(place) => coordinator.cluster.forward(session, message, place),
                        Err(_) => {
                            // Nobody asked for this many: log the first and every 10,000th.
                            if dropped.is_multiple_of(10_000) {
                                tracing::warn!(%name, dropped = dropped + 1, "dropped unsolicited messages from a node");
                            }
                            dropped += 1;
                        }
                    }
                }
                Ok(None) => break Ok(()),
                Err(error) if is_oversized(&error) => {
                    tracing::warn!(%name, limit, "closing a node's session: it sent a message longer than it may now");
                    break Err(anyhow::anyhow!(
                        "node {name} sent a control message longer than the {limit} bytes it may send now (a report \
                         as long as the run it answers allows, else {MAX_UNASKED_MESSAGE} bytes)"
                    ));
                }
                Err(error) => break Err(error),
            },
            _ = heartbeat.tick() => {
                // A paused or cut-off node keeps its TCP connection (the kernel still
                // acknowledges), so silence is the only sign of it.
                if last_heard.elapsed() > SILENCE_LIMIT {
                    tracing::warn!(%name, silent = ?last_heard.elapsed(), "node silent too long; closing its session");
                    break Err(anyhow::anyhow!("node {name} did not answer for {SILENCE_LIMIT:?}"));
                }
                if let Err(error) = send(&mut control, &ToNode::Ping).await {
                    break Err(error);
                }
            }
        }
    };
    coordinator.cluster.disconnected(session);
    result
}

/// Whether a receive failed because the message's length prefix was over the limit.
fn is_oversized(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .is_some_and(|inner| inner.is::<LengthDelimitedCodecError>())
    })
}

/// The reports a node's session owes: one for each run started on it (newest last),
/// each with the most bytes that run's spec lets it take.
#[derive(Debug, Default)]
struct OwedReports {
    runs: VecDeque<(u64, usize)>,
    /// The cluster size of the last wiring the node was sent.
    p: usize,
}

impl OwedReports {
    /// Takes note of an order on its way to the node.
    fn ordered(&mut self, order: &ToNode) {
        match order {
            ToNode::Wire(wiring) => self.p = wiring.topology.p,
            ToNode::Start { spec, .. } => {
                self.runs.push_back((spec.run, report_bound(spec, self.p)));
                if self.runs.len() > OWED_REPORTS {
                    self.runs.pop_front();
                }
            }
            _ => {}
        }
    }

    /// The longest message the node may send now.
    fn longest_message(&self) -> usize {
        self.runs.iter().map(|&(_, bytes)| bytes).fold(MAX_UNASKED_MESSAGE, usize::max)
    }

    /// Takes run `run`'s report off the debts; false if no run owed it.
    fn settle(&mut self, run: u64) -> bool {
        let owed = self.runs.iter().position(|&(owed, _)| owed == run);
        owed.and_then(|at| self.runs.remove(at)).is_some()
    }
}

/// The most bytes a node's report of `spec` can take in a `p`-node cluster, on the safe
/// side: the fixed part, a time per timed iteration, the bytes sent to each neighbour
/// (at most p - 1 of them); with a dump, its input and output (at most p blocks each);
/// with a trace, three events (send, forward or deliver) for each frame that can pass
/// the node in one iteration: a message between every pair of nodes, each cut into as
/// many packets as the longest message (p blocks) makes. Never more than
/// [`MAX_REPORT_FRAME`].
fn report_bound(spec: &RunSpec, p: usize) -> usize {
    let p = p.max(spec.clock_offsets_ns.len()).max(1) as u64;
    let blocks = spec.size_bytes.saturating_mul(p);
    let times = u64::from(spec.iterations).saturating_mul(9);
    let links = p.saturating_mul(20);
    let dump = if spec.dump { blocks.saturating_mul(2).saturating_add(32) } else { 0 };
    let trace = if spec.trace {
        let packets = match &spec.emulation {
            Some(links) if links.packetized() => {
                let longest = usize::try_from(blocks).unwrap_or(usize::MAX);
                longest.div_ceil(links.packet_len(longest).max(1)).max(1) as u64
            }
            _ => 1,
        };
        p.saturating_mul(p).saturating_mul(packets).saturating_mul(3 * FLOW_EVENT_BYTES)
    } else {
        0
    };
    let bound = REPORT_BASE.saturating_add(times).saturating_add(links).saturating_add(dump).saturating_add(trace);
    usize::try_from(bound).unwrap_or(usize::MAX).min(MAX_REPORT_FRAME)
}

#[cfg(test)]
mod tests {
    use topocomm_proto::codec;
    use topocomm_proto::control::{NodeDump, NodeReport, RunLimits, TopologySpec, Wiring};
    use topocomm_proto::spec::{Algorithm, Collective};
    use topocomm_proto::{Topology, TopologyKind};

    use super::*;

    fn encoded_len(report: NodeReport) -> usize {
        codec::encode(&ToCoordinator::Report(Box::new(report))).unwrap().len()
    }

    #[test]
    fn a_report_fits_its_runs_bound_and_an_unasked_one_gets_the_small_limit() {
        let spec = RunSpec {
            size_bytes: 1 << 20,
            iterations: 100,
            dump: true,
            ..RunSpec::new(Collective::Alltoall, Algorithm::Pairwise)
        };
        let p = 8;
        // The largest report a node of this run can send: every time, every link, a dump
        // of p blocks in and out, and long words of an error.
        let largest = NodeReport {
            times_us: vec![1.0e9; 100],
            link_bytes: (0..p).map(|n| (n, u64::MAX)).collect(),
            error: Some("x".repeat(4096)),
            mismatch: Some("y".repeat(4096)),
            dump: Some(NodeDump { input: vec![7; 8 << 20].into(), output: vec![7; 8 << 20].into() }),
            ..NodeReport::empty(u64::MAX, p)
        };
        let bound = report_bound(&spec, p);
        assert!(encoded_len(largest) <= bound, "a legitimate report is over the bound of {bound}");
        assert!(bound < (17 << 20), "{bound}");
        // Without the dump, a few KiB; never more than the frame limit.
        assert!(report_bound(&RunSpec { dump: false, ..spec.clone() }, p) < 128 << 10);
        let huge = RunSpec { size_bytes: u64::MAX / 2, trace: true, ..spec.clone() };
        assert_eq!(report_bound(&huge, 1 << 20), MAX_REPORT_FRAME);

        let mut owed = OwedReports::default();
        assert_eq!(owed.longest_message(), MAX_UNASKED_MESSAGE);
        assert!(!owed.settle(1), "no run owed a report");
        let topology = TopologySpec::of(&Topology::new(TopologyKind::Ring, p, None).unwrap());
        owed.ordered(&ToNode::Wire(Wiring { epoch: 1, id: 0, topology, neighbours: vec![], link_within_ms: 15_000 }));
        let start = |spec: RunSpec| ToNode::Start {
            spec: Box::new(spec),
            limits: Box::new(RunLimits { footprint_bytes: 0, delivered: vec![], forwarded: vec![], counted: false }),
        };
        owed.ordered(&start(RunSpec { run: 5, ..spec.clone() }));
        owed.ordered(&start(RunSpec { run: 6, dump: false, ..spec.clone() }));
        assert!(owed.longest_message() > 16 << 20, "run 5's dump may still come");
        assert!(owed.settle(5));
        assert!(!owed.settle(5), "a second report of one run");
        assert_eq!(owed.longest_message(), MAX_UNASKED_MESSAGE);
        assert!(owed.settle(6));
        for run in 10..20 {
            owed.ordered(&start(RunSpec { run, ..spec.clone() }));
        }
        assert!(!owed.settle(10), "an old debt is forgotten");
        assert!(owed.settle(19));
    }
}
