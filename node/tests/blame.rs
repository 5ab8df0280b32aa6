//! Blame follows the source: a rogue node's junk for the run in progress, relayed by
//! honest nodes, is charged to the node its frames name as their source, not to the
//! last hop; what a relay queues to pass on is bounded per source too; and what a link
//! may queue at a node is what the run's schedule brings over it, counted on the
//! simulator, not the whole run's memory. The nodes are daemons' routers
//! (`Router::start_guarded`) over in-memory byte pipes; the rogue's ends of its links are
//! the test's. What each node holds is read off the routers' counts, every few hundred
//! microseconds while the junk flows.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio::time::Instant;
use topocomm_collectives::comm::fault::LinkFault;
use topocomm_collectives::tuning::footprint::Footprint;
use topocomm_node::allowance::{self, RunAllowance};
use topocomm_node::router::Router;
use topocomm_node::transport::pacing::Timeline;
use topocomm_node::transport::stream::StreamLink;
use topocomm_proto::frame::FrameHeader;
use topocomm_proto::spec::{Algorithm, Collective, Dtype, RunSpec};
use topocomm_proto::{NodeId, Topology, TopologyKind};

/// Frames up to 17 MiB pass the links' size limit: the rogue's 16 MiB frames fit.
const MAX_FRAME: usize = 17 << 20;

/// A tag no algorithm uses.
const UNUSED_TAG: u32 = 0x00ab_cdef;

/// Every node's router by id (`None`: the rogue's place).
type Routers = Vec<Option<Arc<Router>>>;

/// The rogue's end of each of its links, by the neighbour at the other end.
type RogueEnds = Vec<(NodeId, DuplexStream)>;

/// A ring of `p` daemons' routers in which node `rogue` is the test's: every other node
/// has its router, and the test holds the rogue's end of each of its links.
fn ring_with_rogue(p: usize, rogue: NodeId) -> (Routers, RogueEnds) {
    let topology = Topology::new(TopologyKind::Ring, p, None).unwrap();
    let mut links: Vec<Vec<(NodeId, StreamLink<DuplexStream>)>> = (0..p).map(|_| Vec::new()).collect();
    let mut rogue_ends = Vec::new();
    for (a, b) in topology.edges() {
        let (end_a, end_b) = tokio::io::duplex(1 << 16);
        match (a == rogue, b == rogue) {
            (true, _) => {
                links[b].push((a, StreamLink::new(end_b, MAX_FRAME)));
                rogue_ends.push((b, end_a));
            }
            (_, true) => {
                links[a].push((b, StreamLink::new(end_a, MAX_FRAME)));
                rogue_ends.push((a, end_b));
            }
            _ => {
                links[a].push((b, StreamLink::new(end_a, MAX_FRAME)));
                links[b].push((a, StreamLink::new(end_b, MAX_FRAME)));
            }
        }
    }
    let routers = links
        .into_iter()
        .enumerate()
        .map(|(id, links)| {
            (id != rogue).then(|| Router::start_guarded(id, topology.clone(), links, Timeline::Real { offset_ns: 0 }))
        })
        .collect();
    (routers, rogue_ends)
}

fn header(run: u64, src: u32, dst: u32, tag: u32) -> FrameHeader {
    FrameHeader { run, iteration: 0, src, dst, tag, hops: 0, step: 1, packet: 0, last: true, due_ns: 0 }
}

async fn write_frame(far: &mut DuplexStream, header: FrameHeader, payload: &[u8]) -> std::io::Result<()> {
    let length = ((FrameHeader::ENCODED_LEN + payload.len()) as u32).to_be_bytes();
    far.write_all(&length).await?;
    far.write_all(&header.encode()).await?;
    far.write_all(payload).await
}

/// Every node's allowance of `spec` on `topology`, counted once for all on the
/// simulator as the coordinator does, and taken as a daemon takes the rows it is sent.
fn counted(spec: &RunSpec, topology: &Topology) -> Vec<RunAllowance> {
    let rows = allowance::limits_of_run(spec, topology, &Footprint::default());
    let accepted = rows.iter().map(|row| RunAllowance::accept(row, topology.p(), None).expect("the rows fit"));
    let allowances: Vec<RunAllowance> = accepted.collect();
    assert!(allowances.iter().all(|a| a.counted), "the schedule of {spec:?} was not counted");
    allowances
}

/// Starts `spec` on every router with its allowance ([`counted`]); returns the allowances.
fn begin_all(routers: &Routers, spec: &RunSpec) -> Vec<RunAllowance> {
    let topology = routers.iter().flatten().next().expect("a router").topology().clone();
    let allowances = counted(spec, &topology);
    for router in routers.iter().flatten() {
        router.begin_run(spec, &allowances[router.id()]);
    }
    allowances
}

/// The first link fault of `router`'s wiring, waited for at most `patience`.
async fn fault_within(router: &Router, patience: Duration) -> Option<LinkFault> {
    let mut faults = router.faults();
    let waited = tokio::time::timeout(patience, faults.wait_for(Option::is_some)).await.ok()?;
    waited.ok().and_then(|seen| seen.clone())
}

/// Run 5 of an all-to-all by pairwise exchange on a ring of 8: at step k node i sends
/// to node i + k over the ring's route, so node 7's block for node 2 goes 7 → 0 → 1 → 2
/// and nodes 0 and 1 relay node 7's frames.
fn all_to_all() -> RunSpec {
    RunSpec {
        run: 5,
        size_bytes: 64 << 10,
        dtype: Dtype::I32,
        ..RunSpec::new(Collective::Alltoall, Algorithm::Pairwise)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_relayed_by_honest_nodes_is_charged_to_its_source_and_bounded_at_every_hop() {
    let (routers, mut rogue_ends) = ring_with_rogue(8, 7);
    let spec = all_to_all();
    let node = |id: NodeId| routers[id].clone().expect("an honest node");
    let (relay_0, relay_1, victim) = (node(0), node(1), node(2));
    let allowances = begin_all(&routers, &spec);
    let (at_0, at_1, at_2) = (allowances[0].clone(), allowances[1].clone(), allowances[2].clone());
    // The schedule does route node 7's frames through nodes 0 and 1 to node 2.
    assert!(at_0.forwarded[7] > 0 && at_1.forwarded[7] > 0 && at_2.delivered[7] > 0, "{at_0:?} {at_1:?} {at_2:?}");
    let victims_link = victim.link_allowance(1).expect("a bound");
    eprintln!(
        "allowances for node 7's frames: node 0 may queue {} B to pass on, node 1 {} B, node 2 {} B of messages \
         (the link from node 1: {victims_link} B; the whole run's memory: {} B)",
        at_0.forwarded[7],
        at_1.forwarded[7],
        at_2.delivered[7],
        allowance::whole_run_bound(&spec, 8, &Footprint::default())
    );
    // The rogue's frames for node 2, of this run, with a tag nobody uses: 4 KiB each,
    // far more in all than the schedule sends node 2 from node 7.
    let (_, mut towards_0) = rogue_ends.remove(rogue_ends.iter().position(|(peer, _)| *peer == 0).unwrap());
    const FRAMES: u32 = 20_000;
    let junk = vec![0x5au8; 4096];
    let writer = tokio::spawn(async move {
        let mut written = 0u32;
        for n in 0..FRAMES {
            let frame = FrameHeader { step: (n % 100) as u16, ..header(5, 7, 2, UNUSED_TAG) };
            if write_frame(&mut towards_0, frame, &junk).await.is_err() {
                break;
            }
            written += 1;
        }
        (written, towards_0)
    });
    let (mut most_at_victim, mut most_over_link, mut most_at_0, mut most_at_1) = (0, 0, 0, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while victim.mailbox().fault().is_none() && relay_0.mailbox().fault().is_none() && Instant::now() < deadline {
        most_at_victim = most_at_victim.max(victim.held_by_source(7));
        most_over_link = most_over_link.max(victim.held_from(1));
        most_at_0 = most_at_0.max(relay_0.forwarding_from(7));
        most_at_1 = most_at_1.max(relay_1.forwarding_from(7));
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let fault = fault_within(&victim, Duration::from_secs(5)).await;
    let relays_fault = relay_0.mailbox().fault().or_else(|| relay_1.mailbox().fault());
    let (written, _towards_0) = writer.await.expect("the rogue's writer");
    eprintln!(
        "{written} of {FRAMES} frames of 4 KiB written; node 2 held at most {most_at_victim} B of node 7's \
         ({most_over_link} B over the link from node 1), nodes 0 and 1 at most {most_at_0} B and {most_at_1} B to pass \
         on; node 2's fault: {fault:?}; the relays': {relays_fault:?}"
    );
    let fault = fault.or(relays_fault).expect("the junk ended the run");
    assert_eq!(fault.charged_source(), Some(7), "the fault is not charged to the frames' source: {fault}");
    let said = fault.to_string();
    assert!(said.contains("node 7 overflowed this node's queue"), "{said}");
    assert!(!said.contains("node 1 overflowed") && !said.contains("node 0 overflowed"), "a relay was blamed: {said}");
    assert!(
        most_at_victim <= at_2.delivered[7],
        "node 2 held {most_at_victim} B of node 7's, over {}",
        at_2.delivered[7]
    );
    assert!(most_over_link <= victims_link, "the link from node 1 held {most_over_link} B, over {victims_link}");
    assert!(most_at_0 <= at_0.forwarded[7], "node 0 queued {most_at_0} B of node 7's, over {}", at_0.forwarded[7]);
    assert!(most_at_1 <= at_1.forwarded[7], "node 1 queued {most_at_1} B of node 7's, over {}", at_1.forwarded[7]);
    assert!(written < FRAMES, "the nodes took the whole flood");
    // What node 2 held is freed with the failure.
    assert_eq!((victim.held_by_source(7), victim.held_from(1), victim.mailbox().queued()), (0, 0, 0));
}

/// Run 5, an all-reduce of 16 MiB by the ring on a ring of 4.
fn big_all_reduce() -> RunSpec {
    RunSpec { run: 5, size_bytes: 16 << 20, dtype: Dtype::I32, ..RunSpec::new(Collective::Allreduce, Algorithm::Ring) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_neighbour_flooding_big_frames_holds_no_more_than_its_link_carries_and_is_freed() {
    flood_big_frames(4, big_all_reduce(), 16 << 20, 40).await;
}

/// On 80 nodes, more than a node could count for itself when each counted its own: the
/// coordinator's count still gives each link its true allowance, far below the whole
/// run's bound, and a flood is refused past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_64_nodes_a_link_still_holds_only_what_its_schedule_brings() {
    let spec = RunSpec { size_bytes: 1 << 20, ..big_all_reduce() };
    flood_big_frames(80, spec, 1 << 20, 400).await;
}

/// Node 1 of a ring of `p` floods node 0 with `frames` frames of `frame_bytes` during
/// `spec`: node 0 holds no more than the link's counted allowance, refuses the rest, and
/// frees what it held.
async fn flood_big_frames(p: usize, spec: RunSpec, frame_bytes: usize, frames: usize) {
    let (routers, mut rogue_ends) = ring_with_rogue(p, 1);
    let victim = routers[0].clone().expect("node 0");
    let allowances = begin_all(&routers, &spec);
    // What the schedule brings node 0 over the link from node 1: the messages of every
    // source whose route to node 0 comes that way.
    let over_link_1 = |src: &NodeId| victim.topology().route(*src, 0).iter().rev().nth(1) == Some(&1);
    let link: u64 = (1..p).filter(over_link_1).map(|src| allowances[0].delivered[src]).sum();
    let whole_run = allowance::whole_run_bound(&spec, p, &Footprint::default());
    eprintln!("the link from node 1 may hold {link} B at node 0 (the whole run's memory: {whole_run} B)");
    let (_, mut towards_0) = rogue_ends.remove(rogue_ends.iter().position(|(peer, _)| *peer == 0).unwrap());
    let started = Instant::now();
    let writer = tokio::spawn(async move {
        let big = vec![0xa5u8; frame_bytes];
        let mut written = 0;
        for n in 0..frames {
            let frame = FrameHeader { step: n as u16, ..header(5, 1, 0, UNUSED_TAG) };
            if write_frame(&mut towards_0, frame, &big).await.is_err() {
                break;
            }
            written += 1;
        }
        (written, towards_0)
    });
    let mut most_held = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while victim.mailbox().fault().is_none() && !writer.is_finished() && Instant::now() < deadline {
        most_held = most_held.max(victim.held_from(1));
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    most_held = most_held.max(victim.held_from(1));
    let fault = fault_within(&victim, Duration::from_secs(10)).await;
    let failed_after = started.elapsed();
    let (written, _towards_0) = writer.await.expect("the rogue's writer");
    eprintln!(
        "{written} of {frames} frames of {frame_bytes} B written; node 0 held at most {most_held} B from node 1 \
         (allowed {link} B); failed after {failed_after:?}: {fault:?}"
    );
    let fault = fault.expect("the flood ended the run");
    assert_eq!(fault.peer(), Some(1), "{fault}");
    assert!(fault.to_string().contains("node 1 overflowed this node's queue"), "{fault}");
    assert!(most_held <= link, "node 0 held {most_held} B from node 1, over the link's {link} B");
    assert!(written < frames, "node 0 took the whole flood");
    assert!(
        (written as u64) * (frame_bytes as u64) < whole_run,
        "node 0 took {written} frames, as much as the whole run's bound"
    );
    // Freed with the failure, not at the next run.
    assert_eq!((victim.held_from(1), victim.held_by_source(1), victim.mailbox().queued()), (0, 0, 0));
    assert_eq!(victim.link_allowance(1), Some(link), "the router's bound is not the schedule's");
    assert!(link < whole_run / 4, "the link's allowance {link} B is not below a quarter of the whole run's");
}
