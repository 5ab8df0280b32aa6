//! The link layer under bad input: oversized, malformed and misaddressed frames close
//! the link with a reason and fail the waiting algorithm; nothing panics or hangs.
//! Also: forwarding keeps payloads intact and counts hops, and a long message nobody
//! asked for yet waits in its link (a rendezvous) without ever blocking one behind it.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use topocomm_collectives::comm::Comm;
use topocomm_collectives::comm::CommError;
use topocomm_node::in_process::InProcessCluster;
use topocomm_node::router::Router;
use topocomm_node::transport::pacing::Timeline;
use topocomm_node::transport::stream::StreamLink;
use topocomm_proto::frame::FrameHeader;
use topocomm_proto::{Topology, TopologyKind};

const MAX_FRAME: usize = 1024;

/// Node 0 of a 2-node ring whose only link's far end the test drives by hand.
fn lone_node() -> (std::sync::Arc<Router>, DuplexStream) {
    lone_node_taking(MAX_FRAME)
}

/// [`lone_node`] with frames up to `max_frame` bytes; its pipe buffers 64 KiB.
fn lone_node_taking(max_frame: usize) -> (std::sync::Arc<Router>, DuplexStream) {
    let topology = Topology::new(TopologyKind::Ring, 2, None).unwrap();
    let (near, far) = tokio::io::duplex(1 << 16);
    let router =
        Router::start(0, topology, vec![(1, StreamLink::new(near, max_frame))], Timeline::Real { offset_ns: 0 });
    (router, far)
}

fn header(src: u32, dst: u32) -> FrameHeader {
    FrameHeader { run: 1, iteration: 0, src, dst, tag: 7, hops: 0, step: 1, packet: 0, last: true, due_ns: 0 }
}

async fn write_frame(far: &mut DuplexStream, header: FrameHeader, payload: &[u8]) {
    let mut bytes = ((FrameHeader::ENCODED_LEN + payload.len()) as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&header.encode());
    bytes.extend_from_slice(payload);
    far.write_all(&bytes).await.unwrap();
}

/// Waits for a message from node 1 and returns how the wait ended.
async fn wait_for_node_1(router: &std::sync::Arc<Router>) -> Result<Bytes, CommError> {
    let comm = Comm::new(router.clone(), 1, 0, Instant::now() + Duration::from_secs(5));
    comm.recv(1, 7).await
}

#[tokio::test]
async fn a_well_formed_frame_is_delivered() {
    let (router, mut far) = lone_node();
    write_frame(&mut far, header(1, 0), b"hello").await;
    assert_eq!(&wait_for_node_1(&router).await.unwrap()[..], b"hello");
}

#[tokio::test]
async fn an_oversized_frame_closes_the_link_and_fails_the_wait() {
    let (router, mut far) = lone_node();
    far.write_all(&(MAX_FRAME as u32 + 1).to_be_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let error = wait_for_node_1(&router).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "the fault must end the wait at once");
    let text = error.to_string();
    assert!(text.contains("link to node 1") && text.contains("frame"), "{text}");
}

#[tokio::test]
async fn a_frame_shorter_than_its_header_is_malformed() {
    let (router, mut far) = lone_node();
    far.write_all(&[0, 0, 0, 3, 1, 2, 3]).await.unwrap();
    let text = wait_for_node_1(&router).await.unwrap_err().to_string();
    assert!(text.contains("malformed"), "{text}");
}

#[tokio::test]
async fn a_frame_for_an_unknown_node_closes_the_link() {
    let (router, mut far) = lone_node();
    write_frame(&mut far, header(1, 9), b"x").await;
    let text = wait_for_node_1(&router).await.unwrap_err().to_string();
    assert!(text.contains("node 9") && text.contains("2 nodes"), "{text}");
}

#[tokio::test]
async fn a_peer_that_hangs_up_fails_the_wait_with_its_name() {
    let (router, far) = lone_node();
    drop(far);
    let text = wait_for_node_1(&router).await.unwrap_err().to_string();
    assert!(text.contains("closed by node 1"), "{text}");
}

#[tokio::test]
async fn a_frame_due_beyond_the_deadline_is_refused_not_held() {
    let (router, mut far) = lone_node();
    router.emulation().set_due_horizon(Duration::from_secs(5));
    // Due in about a century: a forged or stray emulated frame.
    let due_ns = topocomm_node::timebase::now_ns() + 100 * 365 * 24 * 3600 * 1_000_000_000;
    write_frame(&mut far, FrameHeader { due_ns, ..header(1, 0) }, b"late").await;
    let started = std::time::Instant::now();
    let text = wait_for_node_1(&router).await.unwrap_err().to_string();
    assert!(started.elapsed() < Duration::from_secs(2), "refused at once, not held: {text}");
    assert!(text.contains("beyond the run's deadline"), "{text}");
}

#[tokio::test]
async fn a_silent_peer_ends_in_a_timeout_naming_it() {
    let (router, _far) = lone_node();
    let comm = Comm::new(router, 1, 0, Instant::now() + Duration::from_millis(100));
    let error = comm.recv(1, 7).await.unwrap_err();
    assert!(matches!(error, CommError::Timeout { src: 1, tag: 7, .. }), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_cross_a_ring_hop_by_hop_intact() {
    let topology = Topology::new(TopologyKind::Ring, 8, None).unwrap();
    let cluster = InProcessCluster::start(&topology);
    let payload = Bytes::from((0..100_000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    let sent = payload.clone();
    let results = cluster
        .run_all(1, Duration::from_secs(10), move |comm| {
            let sent = sent.clone();
            async move {
                match comm.id() {
                    0 => comm.send(4, 1, sent).await.map(|()| None),
                    4 => comm.recv(0, 1).await.map(Some),
                    _ => Ok(None),
                }
            }
        })
        .await;
    let received = results[4].clone().unwrap().unwrap();
    assert_eq!(received, payload);
    // Ring of 8: 0 -> 1 -> 2 -> 3 -> 4 (the tie goes the increasing way): three forwards.
    let forwarded: Vec<u64> = (0..8).map(|id| cluster.router(id).traffic().frames_forwarded).collect();
    assert_eq!(forwarded, vec![0, 1, 1, 1, 0, 0, 0, 0]);
    assert_eq!(cluster.router(0).traffic().frames_sent, 1);
}

/// One MiB: well above the 64 KiB a link reads before its receive is posted.
const LONG: usize = 1 << 20;

/// Writes `frames` (header and payload) into the far end on a task of their own, which
/// ends once the link has taken them all; returns the far end then.
fn send_in_background(mut far: DuplexStream, frames: Vec<(FrameHeader, Vec<u8>)>) -> JoinHandle<DuplexStream> {
    tokio::spawn(async move {
        for (header, payload) in frames {
            write_frame(&mut far, header, &payload).await;
        }
        far
    })
}

#[tokio::test(start_paused = true)]
async fn a_long_message_waits_in_its_link_until_its_receive_is_posted() {
    let (router, far) = lone_node_taking(2 * LONG);
    let sender = send_in_background(far, vec![(header(1, 0), vec![5u8; LONG])]);
    // Long enough for the link to read the whole message if it would (the clock is
    // paused: the sleep ends when every task is idle), shorter than the hold's limit.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(router.mailbox().queued(), 0, "nobody asked for it: it must not be read into memory");
    assert!(!sender.is_finished(), "the sender is held back by the full link");
    let message = wait_for_node_1(&router).await.unwrap();
    assert_eq!(message.len(), LONG);
    assert!(message.iter().all(|&byte| byte == 5));
    sender.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_held_message_is_read_at_once_when_one_behind_it_is_awaited() {
    let (router, far) = lone_node_taking(2 * LONG);
    let behind = FrameHeader { tag: 8, ..header(1, 0) };
    let _sender = send_in_background(far, vec![(header(1, 0), vec![6u8; LONG]), (behind, b"behind".to_vec())]);
    let started = Instant::now();
    let comm = Comm::new(router.clone(), 1, 0, started + Duration::from_secs(5));
    assert_eq!(&comm.recv(1, 8).await.unwrap()[..], b"behind");
    // On the paused clock time moves only when every task waits: had the link waited
    // out its hold, the clock would stand at the limit.
    assert!(started.elapsed() < topocomm_node::router::HOLD_LIMIT, "waited {:?}", started.elapsed());
    assert_eq!(router.mailbox().queued(), 1, "the long message was read to reach the short one");
    let long = comm.recv(1, 7).await.unwrap();
    assert!(long.len() == LONG && long.iter().all(|&byte| byte == 6));
}

#[tokio::test(start_paused = true)]
async fn a_long_message_nobody_asks_for_is_read_after_the_hold_limit() {
    let (router, far) = lone_node_taking(2 * LONG);
    let _sender = send_in_background(far, vec![(header(1, 0), vec![7u8; LONG])]);
    tokio::time::sleep(topocomm_node::router::HOLD_LIMIT + Duration::from_millis(10)).await;
    assert_eq!(router.mailbox().queued(), 1, "after the limit the link reads it anyway");
}
