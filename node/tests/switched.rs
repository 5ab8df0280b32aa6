//! Switched networks on the real routers (issue 46, item 3): a switch is a router that
//! only forwards, and every emulated link has its class's physics. On tokio's paused
//! clock the routers of a fat-tree, a dragonfly and a cluster of machines, their links
//! of each class with physics of their own (`--class`), give the collectives the time,
//! steps and frames the simulator gives them, to the nanosecond; and an in-memory
//! cluster of each runs every collective's default algorithm verified.

use std::time::Duration;

use topocomm_collectives::simulator::Options;
use topocomm_collectives::simulator::spec::{self as simulated, Inputs};
use topocomm_node::in_process::{InProcessCluster, time_on_routers};
use topocomm_proto::catalogue;
use topocomm_proto::spec::{Algorithm, ClassPhysics, Collective, LinkModel, Routing, RunSpec};
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

fn networks() -> Vec<Topology> {
    let network = |kind, p, dims: &[usize]| Topology::new(kind, p, Some(dims)).expect("a shape");
    vec![
        network(TopologyKind::FatTree, 16, &[4]),
        network(TopologyKind::FatTree, 11, &[4]),
        network(TopologyKind::Dragonfly, 12, &[2, 2, 1]),
        network(TopologyKind::Cluster, 16, &[4, 4]),
    ]
}

/// Each class of `topology` slower than the last: t_w doubling and t_h growing by class.
fn classes_of(topology: &Topology) -> Vec<ClassPhysics> {
    topology
        .class_names()
        .iter()
        .enumerate()
        .map(|(at, &class)| ClassPhysics {
            class: class.to_owned(),
            ts_ns: None,
            th_ns: Some(5_000 * (at as u64 + 1)),
            tw_ps: Some(2_000 << at),
        })
        .collect()
}

/// The routers of each network on a paused clock give a collective whose frames no
/// relay hands to a link out of turn (a broadcast, a reduction, a shift) exactly the
/// simulator's time under per-class physics; so do they with the classes' physics left
/// out, and the two differ: every link took its own class's.
#[test]
fn emulated_links_have_their_classes_physics_as_in_the_simulator() {
    for topology in networks() {
        for routing in [Routing::Sf, Routing::Ct] {
            let model = LinkModel { ts_ns: 100_000, th_ns: 10_000, tw_ps: 1_000, routing, packet_bytes: 0 };
            for collective in [Collective::Broadcast, Collective::Reduce, Collective::Shift] {
                let algorithm = catalogue::default_algorithm(collective, topology.kind());
                let plain = RunSpec { size_bytes: 64 << 10, ..RunSpec::new(collective, algorithm) };
                let classed = RunSpec { classes: classes_of(&topology), ..plain.clone() };
                let mut times = Vec::new();
                for spec in [&plain, &classed] {
                    let routers = time_on_routers(spec, &topology, model).expect("the routers run it");
                    let simulation = simulated::run(spec, &topology, model, Inputs::Lengths, Options::default())
                        .expect("the simulator runs it");
                    let case =
                        format!("{collective} by {algorithm} on {topology}, {routing}, {} classes", spec.classes.len());
                    assert_eq!(routers.time_ns, simulation.time_ns, "{case}");
                    assert_eq!(routers.steps, simulation.steps, "{case}");
                    assert_eq!(routers.messages, simulation.totals.messages, "{case}");
                    assert_eq!(routers.forwarded, simulation.totals.forwarded, "{case}");
                    assert!(routers.forwarded > 0, "{case}: nothing crossed a switch");
                    times.push(routers.time_ns);
                }
                assert!(times[1] > times[0], "{collective} on {topology}: the classes' physics changed nothing");
            }
        }
    }
}

/// Every collective's default algorithm, verified on every rank of an in-memory cluster
/// of each network (its switches' routers forwarding every frame).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_collective_runs_verified_through_in_memory_switches() {
    for topology in networks() {
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
