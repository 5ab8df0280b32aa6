//! A neighbour that holds the cluster's keys but not its manners: a rogue at the far end
//! of a guarded link (a daemon's, `Router::start_guarded`) sends big frames of a run that
//! is not in progress, frames under a forged source, and more messages than the run lets
//! one link hold. Its victim's memory stays bounded (read off the router's count of what
//! each link holds, not the process's size) and the link is closed naming the sender.
//! Also: a frame corrupted on the way during a warm-up iteration fails the run naming
//! that iteration (a proxy link that flips one bit of one frame).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;
use topocomm_collectives::comm::Comm;
use topocomm_collectives::tuning::footprint::Footprint;
use topocomm_node::allowance::{self, RunAllowance, signal_allowance};
use topocomm_node::daemon::driver;
use topocomm_node::router::Router;
use topocomm_node::transport::pacing::Timeline;
use topocomm_node::transport::stream::StreamLink;
use topocomm_proto::control::NodeReport;
use topocomm_proto::frame::{FrameHeader, SYSTEM_TAG_BASE};
use topocomm_proto::spec::{Algorithm, Collective, Dtype, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

/// Frames up to 8 MiB pass the link's size limit: the rogue stays under it.
const MAX_FRAME: usize = 8 << 20;

/// Node 0 of a 4-node ring, its links guarded as a daemon's; the test drives the far
/// ends of its links to node 1 and node 3 by hand. On this ring a message for node 0
/// from node 1 comes over the link from node 1; one from node 2 comes over the link from
/// node 3 (2 → 3 → 0: a tie goes the increasing way).
fn victim() -> (Arc<Router>, DuplexStream, DuplexStream) {
    let topology = Topology::new(TopologyKind::Ring, 4, None).unwrap();
    let (near_1, far_1) = tokio::io::duplex(1 << 16);
    let (near_3, far_3) = tokio::io::duplex(1 << 16);
    let links = vec![(1, StreamLink::new(near_1, MAX_FRAME)), (3, StreamLink::new(near_3, MAX_FRAME))];
    (Router::start_guarded(0, topology, links, Timeline::Real { offset_ns: 0 }), far_1, far_3)
}

/// Run 5, an all-reduce of 1 KiB on the ring: what node 0 takes part in.
fn small_run() -> RunSpec {
    RunSpec { run: 5, size_bytes: 1024, dtype: Dtype::I32, ..RunSpec::new(Collective::Allreduce, Algorithm::Ring) }
}

/// Starts `spec` on `router` with its allowances counted, as the coordinator counts them
/// and a daemon takes them.
fn begin(router: &Router, spec: &RunSpec) {
    let rows = allowance::limits_of_run(spec, router.topology(), &Footprint::default());
    let accepted = RunAllowance::accept(&rows[router.id()], router.topology().p(), None).expect("the rows fit");
    router.begin_run(spec, &accepted);
}

fn header(run: u64, src: u32, dst: u32, tag: u32) -> FrameHeader {
    FrameHeader { run, iteration: 0, src, dst, tag, hops: 0, step: 1, packet: 0, last: true, due_ns: 0 }
}

async fn write_frame(far: &mut DuplexStream, header: FrameHeader, payload: &[u8]) -> std::io::Result<()> {
    let mut bytes = ((FrameHeader::ENCODED_LEN + payload.len()) as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&header.encode());
    bytes.extend_from_slice(payload);
    far.write_all(&bytes).await
}

/// Waits (at most 5 s) for the message with `tag` from node 1 of run 5.
async fn receive(router: &Arc<Router>, tag: u32) -> Result<Bytes, String> {
    let comm = Comm::new(router.clone(), 5, 0, Instant::now() + Duration::from_secs(5));
    comm.recv(1, tag).await.map_err(|error| error.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_frames_of_a_run_not_in_progress_are_dropped_counted_and_never_kept() {
    let (router, mut far_1, _far_3) = victim();
    begin(&router, &small_run());
    const FRAMES: usize = 24;
    let big = vec![0xA5u8; 4 << 20];
    let writer = tokio::spawn(async move {
        for _ in 0..FRAMES {
            write_frame(&mut far_1, header(u64::MAX, 1, 0, 7), &big).await.expect("the link reads on");
        }
        // Then a frame of the run in progress: the link still serves it.
        write_frame(&mut far_1, header(5, 1, 0, 8), b"still here").await.expect("the link reads on");
        far_1
    });
    let mut most_held = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !writer.is_finished() && Instant::now() < deadline {
        most_held = most_held.max(router.held_from(1));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let _far_1 = writer.await.expect("the rogue wrote every frame");
    assert_eq!(&receive(&router, 8).await.expect("the frame of this run arrives")[..], b"still here");
    eprintln!(
        "{FRAMES} frames of 4 MiB for run 2^64-1: {} dropped, at most {most_held} bytes held for the link",
        router.frames_dropped()
    );
    assert_eq!(router.frames_dropped(), FRAMES as u64);
    assert_eq!(most_held, 0, "a frame of another run was held");
    assert_eq!(router.held_from(1), 0);
    assert_eq!(router.mailbox().queued(), 0, "a frame of another run was queued");
}

#[tokio::test]
async fn a_frame_under_a_forged_source_closes_the_link_naming_the_sender() {
    // Node 2's messages for node 0 come over the link from node 3, never from node 1;
    // node 1's for node 3 go 1 → 2 → 3, never through node 0.
    for (src, dst) in [(2, 0), (1, 3), (0, 2)] {
        let (router, mut far_1, _far_3) = victim();
        begin(&router, &small_run());
        // The link may close before the rogue has written it all.
        let _ = write_frame(&mut far_1, header(5, src, dst, 7), &[1; 4 << 20]).await;
        let error = receive(&router, 7).await.expect_err("the forged frame must close the link");
        assert!(error.contains(&format!("node 1 sent a frame from node {src} to node {dst}")), "{error}");
        assert!(error.contains("link to node 1"), "{error}");
        assert_eq!(router.held_from(1), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_queueing_past_its_allowance_is_closed_naming_the_sender() {
    let spec = small_run();
    // Messages nobody asked for, and packets of a message that never ends.
    let floods = [
        ("messages", FrameHeader { ..header(5, 1, 0, 0) }),
        ("packets", FrameHeader { last: false, ..header(5, 1, 0, 9) }),
    ];
    for (what, template) in floods {
        let (router, mut far_1, _far_3) = victim();
        begin(&router, &spec);
        let allowance = router.link_allowance(1).expect("a bound");
        let watcher = {
            let router = router.clone();
            tokio::spawn(async move {
                let mut most_held = 0;
                for _ in 0..5_000 {
                    most_held = most_held.max(router.held_from(1));
                    if router.mailbox().fault().is_some() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
                most_held
            })
        };
        let mut written = 0u64;
        for n in 0..10_000u32 {
            let header = match template.last {
                true => FrameHeader { tag: n, ..template },
                false => FrameHeader { packet: n, ..template },
            };
            if write_frame(&mut far_1, header, &[3; 1024]).await.is_err() {
                break;
            }
            written += 1024;
        }
        let error = receive(&router, SYSTEM_TAG_BASE - 1).await.expect_err("the flood must close the link");
        let most_held = watcher.await.expect("watched");
        eprintln!(
            "{what}: {written} bytes written; at most {most_held} held, allowance {allowance}; the wait said: {error}"
        );
        assert!(error.contains("link to node 1") && error.contains("node 1 overflowed"), "{error}");
        assert!(error.contains("this run lets node 1 queue here"), "{error}");
        assert!(most_held <= allowance, "{what}: {most_held} bytes held, over the allowance of {allowance}");
        assert!(written < 10_000 * 1024, "{what}: the link took the whole flood");
    }
}

#[tokio::test]
async fn before_the_first_run_a_link_holds_no_more_than_the_runtime_signals() {
    let (router, mut far_1, _far_3) = victim();
    // No run has begun: frames of a run this node may not know yet are taken, up to the
    // signals the first iteration's barrier can bring.
    write_frame(&mut far_1, header(77, 1, 0, SYSTEM_TAG_BASE), b"").await.expect("written");
    let allowance = signal_allowance(4);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(router.held_from(1) > 0 && router.held_from(1) <= allowance);
    write_frame(&mut far_1, header(77, 1, 0, 7), &vec![0; allowance as usize]).await.expect("written");
    let error = receive(&router, 7).await.expect_err("past the signals' allowance the link closes");
    assert!(error.contains("node 1 overflowed"), "{error}");
    // The run that then begins drops what it does not own.
    begin(&router, &small_run());
    assert_eq!(router.held_from(1), 0);
}

/// A link between two routers through a proxy that flips one bit of the first
/// algorithm frame of `iteration` going from the first to the second.
fn corrupting_pair(iteration: Option<u32>) -> (StreamLink<DuplexStream>, StreamLink<DuplexStream>) {
    let (a, mut a_proxy) = tokio::io::duplex(1 << 16);
    let (b, mut b_proxy) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let (mut from_a, mut to_a) = tokio::io::split(&mut a_proxy);
        let (mut from_b, mut to_b) = tokio::io::split(&mut b_proxy);
        let forward = async {
            let mut corrupted = false;
            loop {
                let mut length = [0u8; 4];
                if from_a.read_exact(&mut length).await.is_err() {
                    break;
                }
                let mut body = vec![0u8; u32::from_be_bytes(length) as usize];
                if from_a.read_exact(&mut body).await.is_err() {
                    break;
                }
                let header = FrameHeader::decode(&body[..FrameHeader::ENCODED_LEN]).expect("a header");
                if !corrupted
                    && Some(header.iteration) == iteration
                    && header.tag < SYSTEM_TAG_BASE
                    && body.len() > FrameHeader::ENCODED_LEN
                {
                    body[FrameHeader::ENCODED_LEN] ^= 0x10;
                    corrupted = true;
                }
                if to_b.write_all(&length).await.is_err() || to_b.write_all(&body).await.is_err() {
                    break;
                }
            }
        };
        let backward = tokio::io::copy(&mut from_b, &mut to_a);
        let _ = tokio::join!(forward, backward);
    });
    (StreamLink::new(a, MAX_FRAME), StreamLink::new(b, MAX_FRAME))
}

/// Every node's report of an all-reduce on a 4-node ring, two warm-up iterations and two
/// timed ones, whose link 0 → 1 flips a bit in `iteration` (if any).
async fn reports_with_a_bit_flipped_in(iteration: Option<u32>) -> Vec<NodeReport> {
    let topology = Topology::new(TopologyKind::Ring, 4, None).unwrap();
    let mut links: Vec<Vec<(usize, StreamLink<DuplexStream>)>> = (0..4).map(|_| Vec::new()).collect();
    for (a, b) in topology.edges() {
        // Edges come lower id first.
        let (end_a, end_b) = if (a, b) == (0, 1) {
            corrupting_pair(iteration)
        } else {
            let (x, y) = tokio::io::duplex(1 << 16);
            (StreamLink::new(x, MAX_FRAME), StreamLink::new(y, MAX_FRAME))
        };
        links[a].push((b, end_a));
        links[b].push((a, end_b));
    }
    let spec = RunSpec {
        run: 3,
        size_bytes: 64 << 10,
        dtype: Dtype::I32,
        warmup: 2,
        iterations: 2,
        timeout_ms: 10_000,
        ..RunSpec::new(Collective::Allreduce, Algorithm::Ring)
    };
    // Each node's rows as the coordinator would send them.
    let limits = allowance::limits_of_run(&spec, &topology, &Footprint::default());
    let tasks: Vec<_> = links
        .into_iter()
        .zip(limits)
        .enumerate()
        .map(|(id, (links, limits))| {
            let router = Router::start_guarded(id, topology.clone(), links, Timeline::Real { offset_ns: 0 });
            let spec = spec.clone();
            tokio::spawn(async move { driver::execute(router, &spec, &limits).await })
        })
        .collect();
    let mut reports = Vec::new();
    for task in tasks {
        reports.push(task.await.expect("a node's run"));
    }
    reports
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bit_flipped_in_a_warm_up_iteration_fails_the_run_naming_it() {
    let clean = reports_with_a_bit_flipped_in(None).await;
    assert!(clean.iter().all(|r| r.verified && r.error.is_none()), "{clean:#?}");
    let reports = reports_with_a_bit_flipped_in(Some(0)).await;
    let failed: Vec<&NodeReport> = reports.iter().filter(|r| !r.verified).collect();
    assert!(!failed.is_empty(), "a corrupted warm-up passed: {reports:#?}");
    for report in failed {
        let said = report.mismatch.as_deref().or(report.error.as_deref()).unwrap_or_default();
        eprintln!("node {}: {said}", report.node);
        assert!(said.contains("iteration 0 (warm-up)"), "node {}: {said}", report.node);
    }
}
