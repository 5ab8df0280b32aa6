//! Switched networks on the real routers (issue 46, item 3): a switch is a router that
//! only forwards, and every emulated link has its class's physics. On tokio's paused
//! clock the routers of a fat-tree, a dragonfly and a cluster of machines, their links
//! of each class with physics of their own (`--class`), give the collectives the time,
//! steps and frames the simulator gives them, to the nanosecond; and an in-memory
//! cluster of each runs every collective's default algorithm verified.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use topocomm_node::transport::pacing::Clock;
use topocomm_proto::NodeId;
use topocomm_proto::flow::FlowEvent;

use topocomm_collectives::simulator::Options;
use topocomm_collectives::simulator::spec::{self as simulated, Inputs};
use topocomm_node::in_process::{InProcessCluster, time_on_routers};
use topocomm_proto::catalogue;
use topocomm_proto::spec::{Algorithm, ClassPhysics, Collective, LinkModel, Ports, Routing, RunSpec};

use topocomm_proto::topology::Routes;
use topocomm_proto::{Topology, TopologyKind};

/// Every collective (ping-pong aside: two nodes' exchange).
const COLLECTIVES: [Collective; 11] = [
    Collective::Broadcast,
    Collective::Reduce,
    Collective::Allgather,
    Collective::ReduceScatter,
    Collective::Allreduce,
    Collective::Scan,
    Collective::Scatter,
    Collective::Gather,
    Collective::Alltoall,
    Collective::Shift,
    Collective::Barrier,
];

fn network(kind: TopologyKind, p: usize, dims: &[usize]) -> Topology {
    Topology::new(kind, p, Some(dims)).expect("a shape")
}

/// A fat-tree under ECMP and a dragonfly under Valiant (seed 1): routes by flow.
fn multipath() -> [Topology; 2] {
    [
        network(TopologyKind::FatTree, 16, &[4]).with_routes(Routes::Ecmp).expect("a fat-tree's policy"),
        network(TopologyKind::Dragonfly, 12, &[2, 2, 1])
            .with_routes(Routes::Valiant { seed: 1 })
            .expect("a dragonfly's policy"),
    ]
}

/// Each family routed as it is by default.
fn networks() -> Vec<Topology> {
    vec![
        network(TopologyKind::FatTree, 16, &[4]),
        network(TopologyKind::FatTree, 11, &[4]),
        network(TopologyKind::Dragonfly, 12, &[2, 2, 1]),
        network(TopologyKind::Cluster, 16, &[4, 4]),
    ]
}

/// Each class of `topology` slower than the last: t_s, t_h and t_w growing by class (a
/// message starts up as the slowest class on its route).
fn classes_of(topology: &Topology) -> Vec<ClassPhysics> {
    topology
        .class_names()
        .iter()
        .enumerate()
        .map(|(at, &class)| ClassPhysics {
            name: class.to_owned(),
            ts_ns: Some(50_000 * (at as u64 + 1)),
            th_ns: Some(5_000 * (at as u64 + 1)),
            tw_ps: Some(2_000 << at),
        })
        .collect()
}

/// The routers of each network on a paused clock give every collective's default
/// algorithm exactly the simulator's run, under per-class physics and without: the same
/// time, steps and frames, and the same flow event by event (every send, every forward
/// as its link takes it, every delivery, to the nanosecond). On a switch's output port
/// both serve frames in the order they became ready, of those ready at once the ones
/// from the lowest-numbered input first: an all-to-all or an all-reduce on the
/// dragonfly, whose routes of up to five links cross, fell out of step with the model
/// when a link served frames in the order a router handed them over (a frame passed on
/// travels ahead of its emulated time, so it was handed to a link before a frame that
/// was ready there first). With the classes' physics left out the times differ: every
/// link took its own class's.
#[test]
fn routers_give_every_collective_the_simulators_flow_to_the_nanosecond() {
    let mut checked = 0;
    for topology in networks() {
        for routing in [Routing::Sf, Routing::Ct] {
            let model =
                LinkModel { ts_ns: 100_000, th_ns: 10_000, tw_ps: 1_000, routing, packet_bytes: 0, ports: Ports::All };
            for collective in COLLECTIVES {
                let algorithm = catalogue::default_algorithm(collective, topology.kind());
                let plain = RunSpec { size_bytes: 64 << 10, ..RunSpec::new(collective, algorithm) };
                if plain.validate(topology.p()).is_err() || algorithm == Algorithm::Auto {
                    continue;
                }
                let classed = RunSpec { classes: classes_of(&topology), ..plain.clone() };
                let mut times = Vec::new();
                for spec in [&plain, &classed] {
                    let routers = time_on_routers(spec, &topology, model).expect("the routers run it");
                    let options = Options { record: true, ..Options::default() };
                    let simulation = simulated::run(spec, &topology, model, Inputs::Lengths, options)
                        .expect("the simulator runs it");
                    let case = format!(
                        "{collective} by {algorithm} on {topology} ({}), {routing}, {} classes",
                        topology.routes(),
                        spec.classes.len()
                    );
                    assert_same_flow(&routers.events, &simulation.events, &case);
                    assert_eq!(routers.time_ns, simulation.time_ns, "{case}");
                    assert_eq!(routers.steps, simulation.steps, "{case}");
                    assert_eq!(routers.messages, simulation.totals.messages, "{case}");
                    assert_eq!(routers.forwarded, simulation.totals.forwarded, "{case}");
                    assert!(routers.forwarded > 0, "{case}: nothing crossed a switch");
                    times.push(routers.time_ns);
                    checked += 1;
                }
                // A barrier's empty messages start up as the slowest class does, which on a
                // cluster of machines is the model's own t_s.
                let moves_data = collective != Collective::Barrier;
                assert!(
                    times[1] > times[0] || !moves_data,
                    "{collective} on {topology}: the classes' physics changed nothing"
                );
            }
        }
    }
    assert!(checked >= 4 * 2 * 2 * 9, "only {checked} runs checked");
}

/// The routers' flow is the simulator's, event by event (each list in one order: by
/// time, node, message and kind); the first that differs is named.
fn assert_same_flow(routers: &[FlowEvent], simulation: &[FlowEvent], case: &str) {
    let sorted = |events: &[FlowEvent]| {
        let mut events = events.to_vec();
        events.sort_by_key(|e| (e.at_ns, e.node, e.src, e.dst, e.tag, e.hops, e.kind as u8));
        events
    };
    let (routers, simulation) = (sorted(routers), sorted(simulation));
    if let Some((at, (ours, model))) = routers.iter().zip(&simulation).enumerate().find(|(_, (a, b))| a != b) {
        panic!("{case}: event {at} differs: the routers' {ours:?}, the simulator's {model:?}");
    }
    assert_eq!(routers.len(), simulation.len(), "{case}: events");
}

/// Under ECMP and Valiant the routers route each flow as the simulator does: every
/// collective takes the simulator's messages and forwards, a reduction and a shift its
/// time to the nanosecond with the classes' physics and without (a broadcast too under
/// ECMP; under Valiant, with the classes' physics, a broadcast's time differs: its
/// detours may let two of its flows meet at a relay, which hands them to the link in
/// an order of its own); and Valiant's detours forward more frames than the minimal
/// routes do, ECMP's as many.
#[test]
fn routes_by_flow_are_the_simulators_on_the_routers() {
    for topology in multipath() {
        let default = network(topology.kind(), topology.p(), topology.dims());
        for (collective, routing) in COLLECTIVES.iter().flat_map(|&c| [(c, Routing::Sf), (c, Routing::Ct)]) {
            let model =
                LinkModel { ts_ns: 100_000, th_ns: 10_000, tw_ps: 1_000, routing, packet_bytes: 0, ports: Ports::All };
            let algorithm = catalogue::default_algorithm(collective, topology.kind());
            let plain = RunSpec { size_bytes: 16 << 10, ..RunSpec::new(collective, algorithm) };
            if plain.validate(topology.p()).is_err() || algorithm == Algorithm::Auto {
                continue;
            }
            let classed = RunSpec { classes: classes_of(&topology), ..plain.clone() };
            for spec in [&plain, &classed] {
                let case = format!(
                    "{collective} by {algorithm} on {topology} routed {}, {routing}, {} classes",
                    topology.routes(),
                    spec.classes.len()
                );
                let routers = time_on_routers(spec, &topology, model).expect("the routers run it");
                let simulation = simulated::run(spec, &topology, model, Inputs::Lengths, Options::default())
                    .expect("the simulator runs it");
                assert_eq!(routers.messages, simulation.totals.messages, "{case}");
                assert_eq!(routers.forwarded, simulation.totals.forwarded, "{case}");
                assert_eq!((routers.time_ns, routers.steps), (simulation.time_ns, simulation.steps), "{case}");
                let minimal = simulated::run(spec, &default, model, Inputs::Lengths, Options::default())
                    .expect("the simulator runs it");
                match topology.routes() {
                    Routes::Valiant { .. } if collective == Collective::Alltoall => {
                        assert!(routers.forwarded > minimal.totals.forwarded, "{case}: no detour")
                    }
                    Routes::Ecmp => assert_eq!(routers.forwarded, minimal.totals.forwarded, "{case}: not shortest"),
                    _ => {}
                }
            }
        }
    }
}

/// Every collective's default algorithm, verified on every rank of an in-memory cluster
/// of each network (its switches' routers forwarding every frame), under every policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_collective_runs_verified_through_in_memory_switches() {
    for topology in networks().into_iter().chain(multipath()) {
        let cluster = InProcessCluster::start(&topology);
        for (run, &collective) in COLLECTIVES.iter().enumerate() {
            let algorithm = catalogue::default_algorithm(collective, topology.kind());
            let spec = RunSpec { run: run as u64 + 1, size_bytes: 4096, ..RunSpec::new(collective, algorithm) };
            if spec.validate(topology.p()).is_err() || algorithm == Algorithm::Auto {
                continue;
            }
            cluster
                .verify(&spec, Duration::from_secs(20))
                .await
                .unwrap_or_else(|failure| panic!("{collective} by {algorithm} on {topology}: {failure}"));
        }
    }
}

/// Runs `sends` (source, destination, bytes) at once on `topology`'s routers, switches
/// forwarding, every link emulated by `model` on the virtual clock; returns the emulated
/// nanoseconds until every message has arrived.
async fn elapsed_ns(topology: &Topology, model: LinkModel, sends: &[(NodeId, NodeId, usize)]) -> u64 {
    let cluster = InProcessCluster::with_clock(topology, Clock::Virtual);
    for id in 0..topology.vertices() {
        cluster.router(id).set_emulation(Some(model), 0);
    }
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
    Clock::Virtual.nanos(finished - start)
}

/// Two messages that want the same output port of a switch wait for each other: on a
/// cluster of machines, two cores of machine 0 sending to two cores of machine 1 share
/// machine 0's port (its memory switch's link to the cluster's switch), so the second
/// crosses it a transfer later than the first; to two cores of their own machine they
/// share no link, and take one message's time.
#[tokio::test(start_paused = true)]
async fn messages_for_one_port_of_a_switch_wait_for_each_other() {
    const BYTES: usize = 10_000;
    let topology = Topology::new(TopologyKind::Cluster, 8, Some(&[2, 4])).unwrap();
    let model =
        LinkModel { ts_ns: 1_000, th_ns: 100, tw_ps: 1_000, routing: Routing::Sf, packet_bytes: 0, ports: Ports::All };
    let transfer = model.transfer_ns(BYTES);
    // Core -> memory switch -> core: two hops, store-and-forward.
    let one = elapsed_ns(&topology, model, &[(0, 2, BYTES)]).await;
    assert_eq!(one, model.ts_ns + 2 * (model.th_ns + transfer));
    let apart = elapsed_ns(&topology, model, &[(0, 2, BYTES), (1, 3, BYTES)]).await;
    assert_eq!(apart, one, "two messages on links of their own");
    // Across machines: core, memory, cluster switch, memory, core: four hops.
    let across = elapsed_ns(&topology, model, &[(0, 4, BYTES)]).await;
    assert_eq!(across, model.ts_ns + 4 * (model.th_ns + transfer));
    let shared = elapsed_ns(&topology, model, &[(0, 4, BYTES), (1, 5, BYTES)]).await;
    assert_eq!(shared, across + model.th_ns + transfer, "the second waits a transfer for the shared port");
}
