//! Emulated links on tokio's paused clock, where a run takes exactly its emulated time:
//! store-and-forward pays t_s + l (t_h + t_w m), cut-through t_s + l t_h + t_w m plus
//! the pipeline fill of one packet per extra hop, and two messages sharing a link queue.
//! Every case runs twice, undilated and dilated (each emulated nanosecond lasting K of
//! the clock's own), and must come out the same, to the nanosecond, in emulated time.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use topocomm_node::in_process::InProcessCluster;
use topocomm_node::transport::pacing::Clock;
use topocomm_proto::spec::{Dilation, LinkModel, Ports, Routing};
use topocomm_proto::{NodeId, Topology, TopologyKind};

const TS: u64 = 200_000;
const TH: u64 = 20_000;
const TW_PS: u64 = 10_000; // 10 ns per byte

fn model(routing: Routing, packet_bytes: u32) -> LinkModel {
    LinkModel { ts_ns: TS, th_ns: TH, tw_ps: TW_PS, routing, packet_bytes, ports: Ports::All }
}

/// The clocks every case runs on: the virtual clock as it is, and dilated by 3.
fn clocks() -> [Clock; 2] {
    [Clock::Virtual, Clock::virtual_dilated(Dilation::from_milli(3000).unwrap())]
}

/// A ring of `p` on the virtual `clock`, every link emulated by `model` (`None`: full speed).
fn emulated_ring(clock: Clock, p: usize, model: Option<LinkModel>) -> InProcessCluster {
    let topology = Topology::new(TopologyKind::Ring, p, None).unwrap();
    let cluster = InProcessCluster::with_clock(&topology, clock);
    for id in 0..p {
        cluster.router(id).set_emulation(model, 0);
    }
    cluster
}

/// Runs `sends` (source, destination, bytes) at once on a ring of `p` under `model`
/// and returns the emulated nanoseconds until every message has arrived, the same on
/// every clock of [`clocks`] (or the test fails, naming the clock).
async fn elapsed_ns(p: usize, model: Option<LinkModel>, sends: &[(NodeId, NodeId, usize)]) -> u64 {
    let [plain, dilated] = clocks();
    let undilated = elapsed_on(plain, p, model, sends).await;
    assert_eq!(elapsed_on(dilated, p, model, sends).await, undilated, "{dilated:?} against {plain:?}: {sends:?}");
    undilated
}

/// [`elapsed_ns`] on one clock.
async fn elapsed_on(clock: Clock, p: usize, model: Option<LinkModel>, sends: &[(NodeId, NodeId, usize)]) -> u64 {
    let cluster = emulated_ring(clock, p, model);
    let sends = sends.to_vec();
    let start = Instant::now();
    let results = cluster
        .run_all(1, Duration::from_secs(1 << 40), move |comm| {
            let sends = sends.clone();
            async move {
                for (tag, &(src, dst, bytes)) in sends.iter().enumerate() {
                    if src == comm.id() {
                        comm.send(dst, tag as u32, Bytes::from(vec![7u8; bytes])).await?;
                    }
                }
                for (tag, &(src, dst, bytes)) in sends.iter().enumerate() {
                    if dst == comm.id() {
                        assert_eq!(comm.recv(src, tag as u32).await?.len(), bytes);
                    }
                }
                Ok(Instant::now())
            }
        })
        .await;
    let finished = results.into_iter().map(Result::unwrap).max().unwrap();
    clock.nanos(finished - start)
}

#[tokio::test(start_paused = true)]
async fn full_speed_links_take_no_emulated_time() {
    assert_eq!(elapsed_ns(8, None, &[(0, 4, 4096)]).await, 0);
}

#[tokio::test(start_paused = true)]
async fn store_and_forward_pays_every_hop_in_full() {
    for (dst, hops) in [(1, 1), (2, 2), (4, 4), (6, 2)] {
        let m = 64 * 1024;
        let expected = TS + hops * (TH + m * TW_PS / 1000);
        let got = elapsed_ns(8, Some(model(Routing::Sf, 1024)), &[(0, dst, m as usize)]).await;
        assert_eq!(got, expected, "SF 0 -> {dst} over {hops} hops");
    }
}

#[tokio::test(start_paused = true)]
async fn cut_through_pipelines_packets_across_hops() {
    let (m, packet) = (64 * 1024u64, 1024u64);
    for hops in [1u64, 2, 4] {
        let expected = TS + hops * TH + m * TW_PS / 1000 + (hops - 1) * packet * TW_PS / 1000;
        let got = elapsed_ns(8, Some(model(Routing::Ct, packet as u32)), &[(0, hops as usize, m as usize)]).await;
        assert_eq!(got, expected, "CT over {hops} hops");
    }
}

#[tokio::test(start_paused = true)]
async fn whole_frame_cut_through_is_the_textbook_formula() {
    // No packets: t_s + l t_h + t_w m exactly (the limit of small packets).
    let m = 64 * 1024u64;
    for hops in [1u64, 2, 4] {
        let expected = TS + hops * TH + m * TW_PS / 1000;
        let got = elapsed_ns(8, Some(model(Routing::Ct, 0)), &[(0, hops as usize, m as usize)]).await;
        assert_eq!(got, expected, "CT over {hops} hops");
    }
}

#[tokio::test(start_paused = true)]
async fn whole_frame_cut_through_still_queues_on_a_busy_link() {
    // 1 -> 2 holds link 1-2 for TS + TH + TW m; 0 -> 2's head reaches node 1 at TS + TH
    // and must wait for that link, so its tail leaves node 1 only after 1 -> 2 is done
    // plus its own TH + TW m: TS + TH + TW m + TH + TW m in all.
    let m = 10_000u64;
    let transfer = m * TW_PS / 1000;
    let ct = Some(model(Routing::Ct, 0));
    assert_eq!(elapsed_ns(8, ct, &[(0, 2, m as usize)]).await, TS + 2 * TH + transfer);
    let both = elapsed_ns(8, ct, &[(1, 2, m as usize), (0, 2, m as usize)]).await;
    assert_eq!(both, TS + TH + transfer + TH + transfer);
}

#[tokio::test(start_paused = true)]
async fn messages_sharing_a_link_queue() {
    // 0 -> 2 crosses links 0-1 and 1-2; 1 -> 2 uses 1-2 too. Alone, each takes its own
    // time; together the second to reach link 1-2 waits for the first.
    let m = 10_000u64;
    let hop = TH + m * TW_PS / 1000;
    let sf = Some(model(Routing::Sf, 1024));
    assert_eq!(elapsed_ns(8, sf, &[(1, 2, m as usize)]).await, TS + hop);
    assert_eq!(elapsed_ns(8, sf, &[(0, 2, m as usize)]).await, TS + 2 * hop);
    // 1 -> 2 holds link 1-2 until TS + hop; 0 -> 2 arrives at node 1 at TS + hop and
    // then takes its second hop: no overlap on link 1-2, so the pair ends at TS + 2 hop.
    assert_eq!(elapsed_ns(8, sf, &[(1, 2, m as usize), (0, 2, m as usize)]).await, TS + 2 * hop);
    // Two messages from node 1 to node 2 share the link outright: the second one waits
    // for the first (t_s is paid on the link, once per message).
    assert_eq!(elapsed_ns(8, sf, &[(1, 2, m as usize), (1, 2, m as usize)]).await, 2 * (TS + hop));
}

#[tokio::test(start_paused = true)]
async fn a_node_sends_on_two_links_at_once() {
    // The ring broadcast's first step: both neighbours in one step.
    let m = 10_000usize;
    let one = elapsed_ns(8, Some(model(Routing::Sf, 1024)), &[(0, 1, m)]).await;
    let both = elapsed_ns(8, Some(model(Routing::Sf, 1024)), &[(0, 1, m), (0, 7, m)]).await;
    assert_eq!(one, both);
}

#[tokio::test(start_paused = true)]
async fn a_one_port_node_sends_on_one_link_at_a_time_and_receives_on_one() {
    // The same two sends as above: one-port, the second waits for the node's one output
    // port, t_s + t_h + t_w m after the first; two messages for one node likewise wait
    // for its one input port. A third on a link of its own, from another node to
    // another, is not held back.
    let m = 10_000usize;
    let message = TS + TH + m as u64 * TW_PS / 1000;
    let one_port = Some(LinkModel { ports: Ports::One, ..model(Routing::Sf, 0) });
    assert_eq!(elapsed_ns(8, one_port, &[(0, 1, m)]).await, message);
    assert_eq!(elapsed_ns(8, one_port, &[(0, 1, m), (0, 7, m)]).await, 2 * message);
    assert_eq!(elapsed_ns(8, one_port, &[(1, 0, m), (7, 0, m)]).await, 2 * message);
    assert_eq!(elapsed_ns(8, one_port, &[(0, 1, m), (0, 7, m), (3, 4, m)]).await, 2 * message);
    assert_eq!(elapsed_ns(8, one_port, &[(0, 1, m), (0, 7, m), (2, 1, m)]).await, 2 * message);
    // Relayed, a message passes through the relay's output port too: 0 -> 2 through
    // node 1, whose port is busy with its own message of 2m to node 0 until
    // t_s + t_h + 2 t_w m; all-port the relay would go on at once over the other link.
    let transfer = m as u64 * TW_PS / 1000;
    let relayed = [(1, 0, 2 * m), (0, 2, m)];
    assert_eq!(elapsed_ns(8, Some(model(Routing::Sf, 0)), &relayed).await, TS + 2 * TH + 2 * transfer);
    assert_eq!(elapsed_ns(8, one_port, &relayed).await, TS + 2 * TH + 3 * transfer);
}

/// Node 1 takes a message from node 0, works for `work_ns` (emulated), and sends one on
/// to node 2; returns the emulated nanoseconds until node 2 has it (the same on every
/// clock of [`clocks`]).
async fn relay_ns(work_ns: u64) -> u64 {
    let [plain, dilated] = clocks();
    let undilated = relay_on(plain, work_ns).await;
    assert_eq!(relay_on(dilated, work_ns).await, undilated, "{dilated:?} against {plain:?}: {work_ns} ns of work");
    undilated
}

/// [`relay_ns`] on one clock; the work lasts `work_ns` emulated there (K times as long
/// on a dilated clock's own time, as software does on a dilated machine).
async fn relay_on(clock: Clock, work_ns: u64) -> u64 {
    let cluster = emulated_ring(clock, 4, Some(model(Routing::Sf, 0)));
    let start = Instant::now();
    let results = cluster
        .run_all(1, Duration::from_secs(1 << 40), move |comm| async move {
            match comm.id() {
                0 => comm.send(1, 0, Bytes::from(vec![1u8; 1000])).await?,
                1 => {
                    let message = comm.recv(0, 0).await?;
                    tokio::time::sleep(clock.duration(work_ns)).await;
                    comm.send(2, 1, message).await?;
                }
                2 => drop(comm.recv(1, 1).await?),
                _ => {}
            }
            Ok(Instant::now())
        })
        .await;
    clock.nanos(results[2].as_ref().map(|done| *done - start).unwrap())
}

#[tokio::test(start_paused = true)]
async fn software_time_up_to_t_s_hides_inside_the_start_up_time() {
    let hop = TS + TH + 1000 * TW_PS / 1000;
    // Work that takes less than t_s is part of the next message's start-up time ...
    assert_eq!(relay_ns(0).await, 2 * hop);
    assert_eq!(relay_ns(TS - 50_000).await, 2 * hop);
    // ... and longer work delays it, and everything after it, by the difference: the
    // hop and the wire time are never hidden.
    assert_eq!(relay_ns(TS + 30_000).await, 2 * hop + 30_000);
}

#[tokio::test(start_paused = true)]
async fn a_dilated_run_lasts_k_times_its_emulated_time_on_its_own_clock() {
    // The same message, 0 -> 2 store-and-forward: 3 times as long on the dilated clock's
    // own time (tokio's), the same in emulated time.
    let sends = [(0, 2, 10_000)];
    let sf = Some(model(Routing::Sf, 1024));
    let emulated = elapsed_ns(8, sf, &sends).await;
    let [plain, dilated] = clocks();
    let cluster = emulated_ring(dilated, 8, sf);
    let start = Instant::now();
    let results = cluster
        .run_all(1, Duration::from_secs(1 << 40), move |comm| async move {
            match comm.id() {
                0 => comm.send(2, 0, Bytes::from(vec![7u8; 10_000])).await?,
                2 => drop(comm.recv(0, 0).await?),
                _ => {}
            }
            Ok(Instant::now())
        })
        .await;
    let own = results.into_iter().map(Result::unwrap).max().unwrap() - start;
    assert_eq!(own, plain.duration(emulated) * 3);
    assert_eq!(dilated.nanos(own), emulated);
}
