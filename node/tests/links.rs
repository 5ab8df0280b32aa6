//! The link layer under bad input: oversized, malformed and misaddressed frames close
//! the link with a reason and fail the waiting algorithm; nothing panics or hangs.
//! Also: forwarding keeps payloads intact and counts hops.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio::time::Instant;
use topocomm_node::Comm;
use topocomm_node::comm::CommError;
use topocomm_node::pacing::Timeline;
use topocomm_node::router::Router;
use topocomm_node::testing::MemoryCluster;
use topocomm_proto::frame::FrameHeader;
use topocomm_proto::{Topology, TopologyKind};

const MAX_FRAME: usize = 1024;

/// Node 0 of a 2-node ring whose only link's far end the test drives by hand.
fn lone_node() -> (std::sync::Arc<Router>, DuplexStream) {
    let topology = Topology::new(TopologyKind::Ring, 2, None).unwrap();
    let (near, far) = tokio::io::duplex(1 << 16);
    let router = Router::start(0, topology, vec![(1, near)], MAX_FRAME, Timeline::Real { offset_ns: 0 });
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
    assert!(text.contains("closed by the peer") && text.contains("node 1"), "{text}");
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
    let cluster = MemoryCluster::start(&topology);
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
