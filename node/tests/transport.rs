//! The transport conformance suite: every [`Link`] implementation — the stream link over
//! an in-memory byte pipe and over TCP on loopback, and the in-memory frame link — passes
//! the same checks: frames arrive in order and intact in both directions (payloads of
//! several parts as one), a sender's buffer is released once the link has it, a closed
//! end fails the other with a reason, and the link physics of emulated runs gives the
//! same due times whatever carries the frames. Then whole clusters wired each way run
//! the same collectives to the same results and the same emulated times.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use topocomm_collectives::comm::assembly::Place;
use topocomm_collectives::comm::fault::LinkFault;
use topocomm_collectives::comm::payload::{Payload, Written};
use topocomm_node::in_process::{InProcessCluster, Wires};
use topocomm_node::transport::channel::ChannelLink;
use topocomm_node::transport::emulated::Emulation;
use topocomm_node::transport::pacing::{Clock, Timeline};
use topocomm_node::transport::stream::StreamLink;
use topocomm_node::transport::{Endpoint, Link, Outgoing};
use topocomm_proto::catalogue::default_algorithm;
use topocomm_proto::frame::{DEFAULT_MAX_FRAME, Frame, FrameHeader};
use topocomm_proto::spec::{Collective, LinkModel, Ports, Routing, RunSpec};
use topocomm_proto::{NodeId, Topology, TopologyKind};

/// An endpoint that keeps what arrives (with when, on tokio's clock) and why its link
/// failed.
struct Recorder {
    id: NodeId,
    emulation: Emulation,
    arrived: Mutex<Vec<(NodeId, Frame, Instant)>>,
    /// How long a wait for frames may take: 5 s of wall time, or on the virtual clock
    /// (where an emulated nanosecond lasts a millisecond) a virtual month.
    patience: Duration,
    failures: Mutex<Vec<String>>,
    changed: Notify,
}

impl Recorder {
    fn new(id: NodeId, timeline: Timeline) -> Arc<Self> {
        Arc::new(Recorder {
            id,
            emulation: Emulation::new(timeline),
            arrived: Mutex::default(),
            patience: if timeline.clock().is_real() {
                Duration::from_secs(5)
            } else {
                Duration::from_secs(30 * 24 * 3600)
            },
            failures: Mutex::default(),
            changed: Notify::new(),
        })
    }

    /// Waits (its patience at most) until `count` frames have arrived; returns them.
    async fn frames(&self, count: usize) -> Vec<(NodeId, Frame, Instant)> {
        self.until(|| self.arrived.lock().unwrap().len() >= count).await;
        self.arrived.lock().unwrap().iter().map(|(from, frame, at)| (*from, frame.clone(), *at)).collect()
    }

    /// Waits (its patience at most) for a failure; returns its reason.
    async fn failure(&self) -> String {
        self.until(|| !self.failures.lock().unwrap().is_empty()).await;
        self.failures.lock().unwrap()[0].clone()
    }

    async fn until(&self, done: impl Fn() -> bool) {
        tokio::time::timeout(self.patience, async {
            loop {
                let changed = self.changed.notified();
                if done() {
                    return;
                }
                changed.await;
            }
        })
        .await
        .expect("within the patience");
    }
}

impl Endpoint for Recorder {
    fn id(&self) -> NodeId {
        self.id
    }

    fn emulation(&self) -> &Emulation {
        &self.emulation
    }

    fn on_frame(&self, from: NodeId, frame: Frame) -> Result<(), LinkFault> {
        self.arrived.lock().unwrap().push((from, frame, Instant::now()));
        self.changed.notify_waiters();
        Ok(())
    }

    async fn admit(&self, _header: &FrameHeader, _from: NodeId) {}

    fn landing(&self, _header: &FrameHeader, _len: usize) -> Option<Place> {
        None
    }

    fn link_failed(&self, fault: LinkFault) {
        self.failures.lock().unwrap().push(fault.to_string());
        self.changed.notify_waiters();
    }
}

/// Two started ends of one link between nodes 0 and 1: the queues that feed them, their
/// endpoints, and the tokens that close them.
struct Wired {
    outboxes: [mpsc::UnboundedSender<Outgoing>; 2],
    ends: [Arc<Recorder>; 2],
    cancels: [CancellationToken; 2],
}

fn start<L: Link>((a, b): (L, L), timeline: Timeline) -> Wired {
    let ends = [Recorder::new(0, timeline), Recorder::new(1, timeline)];
    let cancels = [CancellationToken::new(), CancellationToken::new()];
    let (to_a, outbox_a) = mpsc::unbounded_channel();
    let (to_b, outbox_b) = mpsc::unbounded_channel();
    a.start(1, outbox_a, ends[0].clone(), cancels[0].clone());
    b.start(0, outbox_b, ends[1].clone(), cancels[1].clone());
    Wired { outboxes: [to_a, to_b], ends, cancels }
}

/// The implementations under test, each as a way to make a connected pair.
#[derive(Debug, Clone, Copy)]
enum Kind {
    BytePipe,
    Tcp,
    FrameChannel,
}

const KINDS: [Kind; 3] = [Kind::BytePipe, Kind::Tcp, Kind::FrameChannel];

async fn wire(kind: Kind, timeline: Timeline) -> Wired {
    match kind {
        Kind::BytePipe => {
            let (a, b) = tokio::io::duplex(64 * 1024);
            start((StreamLink::new(a, DEFAULT_MAX_FRAME), StreamLink::new(b, DEFAULT_MAX_FRAME)), timeline)
        }
        Kind::Tcp => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let (dialled, accepted) = tokio::join!(tokio::net::TcpStream::connect(address), listener.accept());
            let (a, b) = (dialled.unwrap(), accepted.unwrap().0);
            start((StreamLink::new(a, DEFAULT_MAX_FRAME), StreamLink::new(b, DEFAULT_MAX_FRAME)), timeline)
        }
        Kind::FrameChannel => start(ChannelLink::pair(), timeline),
    }
}

fn header(src: u32, dst: u32, tag: u32) -> FrameHeader {
    FrameHeader { run: 1, iteration: 0, src, dst, tag, hops: 0, step: 1, packet: 0, last: true, due_ns: 0 }
}

fn outgoing(header: FrameHeader, payload: Payload) -> Outgoing {
    Outgoing { header, payload, ready_at: Instant::now(), written: None, charge: None, from: None }
}

/// A payload of `len` bytes that differ from one position to the next.
fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect::<Vec<u8>>().into()
}

#[tokio::test]
async fn frames_arrive_in_order_and_intact_both_ways() {
    for kind in KINDS {
        let wired = wire(kind, Timeline::Real { offset_ns: 0 }).await;
        // Empty, short, long (beyond the stream's rendezvous size) and multi-part payloads.
        let sizes = [0, 1, 100, 64 * 1024 + 1, 1 << 20];
        let mut sent = Vec::new();
        for (tag, &size) in sizes.iter().enumerate() {
            let payload = pattern(size, tag as u8);
            sent.push(payload.clone());
            wired.outboxes[0].send(outgoing(header(0, 1, tag as u32), Payload::One(payload))).unwrap();
        }
        let parts = vec![pattern(10, 1), pattern(70_000, 2), pattern(3, 3)];
        let whole: Vec<u8> = parts.iter().flat_map(|part| part.to_vec()).collect();
        wired.outboxes[0].send(outgoing(header(0, 1, 99), Payload::of(parts))).unwrap();
        wired.outboxes[1].send(outgoing(header(1, 0, 7), Payload::One(pattern(5, 9)))).unwrap();

        let at_b = wired.ends[1].frames(sizes.len() + 1).await;
        for (index, (from, frame, _)) in at_b.iter().enumerate().take(sizes.len()) {
            assert_eq!(*from, 0, "{kind:?}");
            assert_eq!(frame.header, header(0, 1, index as u32), "{kind:?}: frame {index} out of order or altered");
            assert_eq!(frame.payload, sent[index], "{kind:?}: payload {index} altered");
        }
        assert_eq!(at_b[sizes.len()].1.header.tag, 99, "{kind:?}");
        assert_eq!(&at_b[sizes.len()].1.payload[..], &whole[..], "{kind:?}: parts arrive as one payload");
        let at_a = wired.ends[0].frames(1).await;
        assert_eq!((at_a[0].0, &at_a[0].1.payload), (1, &pattern(5, 9)), "{kind:?}");
        assert!(wired.ends.iter().all(|end| end.failures.lock().unwrap().is_empty()), "{kind:?}");
    }
}

/// A sender's buffer is released once the link has it, and not before: the moment it is
/// released the sending end is closed, and the frame must still arrive (a link that
/// released the buffer before writing it would lose it here).
#[tokio::test]
async fn a_senders_buffer_is_released_once_the_link_has_it() {
    for kind in KINDS {
        let wired = wire(kind, Timeline::Real { offset_ns: 0 }).await;
        let (written, done) = Written::new();
        let frame = Outgoing { written: Some(written), ..outgoing(header(0, 1, 1), Payload::One(pattern(4096, 0))) };
        wired.outboxes[0].send(frame).unwrap();
        tokio::time::timeout(Duration::from_secs(5), done).await.expect("released within 5 s").unwrap_err();
        wired.cancels[0].cancel();
        let arrived = wired.ends[1].frames(1).await;
        assert_eq!(arrived[0].1.payload, pattern(4096, 0), "{kind:?}: the released frame arrived whole");
    }
}

#[tokio::test]
async fn closing_one_end_fails_the_other_with_a_reason() {
    for kind in KINDS {
        let wired = wire(kind, Timeline::Real { offset_ns: 0 }).await;
        wired.cancels[0].cancel();
        let reason = wired.ends[1].failure().await;
        assert!(reason.contains("link to node 0"), "{kind:?}: {reason}");
        assert!(wired.ends[0].failures.lock().unwrap().is_empty(), "{kind:?}: the closing end reports nothing");
    }
}

#[tokio::test]
async fn a_dropped_outbox_closes_the_link() {
    for kind in KINDS {
        let Wired { outboxes: [to_a, _to_b], ends, cancels: _cancels } =
            wire(kind, Timeline::Real { offset_ns: 0 }).await;
        drop(to_a);
        let reason = ends[1].failure().await;
        assert!(reason.contains("was closed by node"), "{kind:?}: {reason}");
    }
}

/// t_s 50 µs, t_h 20 µs, t_w 10 ns/B (on the virtual clock one emulated ns lasts 1 ms).
fn physics(routing: Routing) -> LinkModel {
    LinkModel { ts_ns: 50_000, th_ns: 20_000, tw_ps: 10_000, routing, packet_bytes: 0, ports: Ports::All }
}

#[tokio::test(start_paused = true)]
async fn emulated_frames_are_due_as_the_model_says_on_every_link() {
    for kind in [Kind::BytePipe, Kind::FrameChannel] {
        let timeline = Timeline::of(Clock::Virtual, Instant::now());
        let wired = wire(kind, timeline).await;
        let model = physics(Routing::Sf);
        for end in &wired.ends {
            end.emulation.set(Some(model), 0);
        }
        let ready = Instant::now();
        // Two messages back to back: the second waits for the link (one at a time).
        for tag in 0..2 {
            let frame = Outgoing { ready_at: ready, ..outgoing(header(0, 1, tag), Payload::One(pattern(1000, 0))) };
            wired.outboxes[0].send(frame).unwrap();
        }
        let arrived = wired.ends[1].frames(2).await;
        let one = model.ts_ns + model.th_ns + model.transfer_ns(1000);
        for (index, (_, frame, at)) in arrived.iter().enumerate() {
            let expected = timeline.ns(ready) + one * (index as u64 + 1);
            assert_eq!(frame.header.due_ns, expected, "{kind:?}: frame {index} stamped");
            assert_eq!(timeline.ns(*at), expected, "{kind:?}: frame {index} held until due");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_frame_that_passes_through_is_not_held() {
    for kind in [Kind::BytePipe, Kind::FrameChannel] {
        let timeline = Timeline::of(Clock::Virtual, Instant::now());
        let wired = wire(kind, timeline).await;
        for end in &wired.ends {
            end.emulation.set(Some(physics(Routing::Sf)), 0);
        }
        let start = Instant::now();
        // For node 2, beyond node 1: node 1 takes it at once to send it on.
        wired.outboxes[0].send(outgoing(header(0, 2, 0), Payload::One(pattern(1000, 0)))).unwrap();
        let (_, frame, at) = wired.ends[1].frames(1).await.remove(0);
        assert!(frame.header.due_ns > timeline.ns(at), "{kind:?}: stamped for later, taken now");
        assert_eq!(at, start, "{kind:?}: no virtual time passed");
    }
}

/// Runs `spec` on `topology` wired with `wires` under `model` on the virtual clock;
/// returns the emulated time it took, in ns, after verifying every node's result.
async fn emulated_run(topology: &Topology, wires: Wires, spec: &RunSpec, model: LinkModel) -> u64 {
    let cluster = InProcessCluster::wired(topology, Clock::Virtual, wires);
    for id in 0..topology.p() {
        cluster.router(id).set_emulation(Some(model), 0);
    }
    let start = Instant::now();
    cluster.verify(spec, Duration::from_secs(3600)).await.unwrap_or_else(|error| panic!("{wires:?}: {error}"));
    Clock::Virtual.nanos(start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn clusters_wired_either_way_agree_on_results_and_emulated_times() {
    let cases = [
        (TopologyKind::Hypercube, 8, Collective::Broadcast),
        (TopologyKind::Ring, 6, Collective::Allgather),
        (TopologyKind::Torus, 9, Collective::Allreduce),
        (TopologyKind::Hypercube, 8, Collective::Alltoall),
    ];
    for (kind, p, collective) in cases {
        let topology = Topology::new(kind, p, None).unwrap();
        for routing in [Routing::Sf, Routing::Ct] {
            let algorithm = default_algorithm(collective, kind);
            let spec = RunSpec { size_bytes: 4096, ..RunSpec::new(collective, algorithm) };
            let model = physics(routing);
            let pipes = emulated_run(&topology, Wires::BytePipes, &spec, model).await;
            let channels = emulated_run(&topology, Wires::FrameChannels, &spec, model).await;
            assert!(pipes > 0, "{kind:?} {collective:?}: some emulated time passed");
            assert_eq!(pipes, channels, "{kind:?} p={p} {collective:?} {routing:?}: byte pipes and frame channels");
        }
    }
}
