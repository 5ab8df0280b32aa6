//! The simulator: every algorithm verified against the reference on its virtual network
//! for many shapes and sizes, lengths only timed exactly as data, the same numbers on
//! every run, and a deadlock found and named instead of waited for.

use bytes::Bytes;
use topocomm_collectives::simulator::spec::{self, Inputs, RunFailure, SimulatedRun};
use topocomm_collectives::simulator::{Options, SimulationError, simulate};
use topocomm_proto::catalogue;
use topocomm_proto::network::Placement;
use topocomm_proto::spec::{ClassPhysics, Collective, Dtype, LinkModel, Ports, ReduceOp, Routing, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

fn links(routing: Routing, packet_bytes: u32) -> LinkModel {
    LinkModel { ts_ns: 50_000, th_ns: 3_000, tw_ps: 2_500, routing, packet_bytes, ports: Ports::All }
}

fn shapes() -> Vec<Topology> {
    let shape = |kind, p, dims: Option<&[usize]>| Topology::new(kind, p, dims).expect("a valid shape");
    vec![
        shape(TopologyKind::Ring, 1, None),
        shape(TopologyKind::Ring, 7, None),
        shape(TopologyKind::Ring, 12, None),
        shape(TopologyKind::Mesh, 6, Some(&[2, 3])),
        shape(TopologyKind::Torus, 15, Some(&[3, 5])),
        shape(TopologyKind::Torus, 16, Some(&[4, 4])),
        shape(TopologyKind::Mesh3d, 12, Some(&[2, 2, 3])),
        shape(TopologyKind::Hypercube, 32, None),
        shape(TopologyKind::Full, 5, None),
    ]
}

fn run(spec: &RunSpec, topology: &Topology, model: LinkModel, inputs: Inputs) -> Result<SimulatedRun, RunFailure> {
    spec::run(spec, topology, model, inputs, Options::default())
}

/// Every algorithm of every collective, on shapes of 1 to 32 nodes (powers of two and
/// not), two sizes, a reduction of integers and one of floats, roots 0 and p - 1: every
/// node's result matches the reference.
#[test]
fn every_algorithm_is_verified_on_the_simulator() {
    let cases = [(8, Dtype::I32, ReduceOp::Sum), (3000, Dtype::F64, ReduceOp::Max)];
    let verified: usize = shapes().iter().map(|topology| verify_every_algorithm(topology, cases, 3, &[], |_| {})).sum();
    assert!(verified > 500, "only {verified} cases ran");
}

/// Runs every algorithm of every collective that `topology` takes on it, once for each
/// of `cases` (size, dtype, op; the first from root 0, the second from root p - 1), with
/// the shift and classes of links given: every node's result must match the reference,
/// and `check` sees every run. Returns how many ran.
fn verify_every_algorithm(
    topology: &Topology,
    cases: [(u64, Dtype, ReduceOp); 2],
    shift: usize,
    classes: &[ClassPhysics],
    mut check: impl FnMut(&SimulatedRun),
) -> usize {
    let p = topology.p();
    let mut verified = 0;
    for entry in catalogue::ENTRIES {
        for ((size, dtype, op), root) in cases.into_iter().zip([0, p.saturating_sub(1)]) {
            let spec = RunSpec {
                size_bytes: size,
                dtype,
                op,
                root,
                shift,
                seed: 11,
                classes: classes.to_vec(),
                ..RunSpec::new(entry.collective, entry.algorithm)
            };
            if spec.validate(p).is_err() {
                continue;
            }
            let simulated = run(&spec, topology, links(Routing::Sf, 0), Inputs::Reference).unwrap_or_else(|error| {
                panic!("{} ({}) on {topology}, {size} B: {error}", entry.collective, entry.algorithm)
            });
            assert!(simulated.verified);
            check(&simulated);
            verified += 1;
        }
    }
    verified
}

/// Lengths only: the same time, steps and traffic as with data, under every routing,
/// for the default algorithm of every collective on rings, tori and hypercubes.
#[test]
fn lengths_only_times_a_run_exactly_as_data_does() {
    for kind in [TopologyKind::Ring, TopologyKind::Torus, TopologyKind::Hypercube] {
        let topology = Topology::new(kind, 16, None).expect("a shape of 16");
        for model in [links(Routing::Sf, 0), links(Routing::Ct, 0), links(Routing::Ct, 512)] {
            for collective in [
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
            ] {
                let algorithm = catalogue::default_algorithm(collective, kind);
                let spec = RunSpec { size_bytes: 4096, ..RunSpec::new(collective, algorithm) };
                let data = run(&spec, &topology, model, Inputs::Reference).expect("with data");
                let lengths = run(&spec, &topology, model, Inputs::Lengths).expect("lengths only");
                let case = format!("{collective} on {topology}, {model:?}");
                assert!(data.verified && !lengths.verified, "{case}");
                assert_eq!(
                    (lengths.time_ns, lengths.steps, lengths.totals, lengths.busiest_link),
                    (data.time_ns, data.steps, data.totals, data.busiest_link),
                    "{case}"
                );
            }
        }
    }
}

/// A lengths-only all-gather whose results would fill 64 GiB: the nodes' results are
/// known zeros that take no memory, and the schedule is timed as with data.
#[test]
fn lengths_only_reaches_results_larger_than_memory() {
    let topology = Topology::new(TopologyKind::Torus, 1024, Some(&[32, 32])).expect("a torus");
    let spec = RunSpec {
        size_bytes: 64 << 10,
        ..RunSpec::new(Collective::Allgather, catalogue::default_algorithm(Collective::Allgather, TopologyKind::Torus))
    };
    let simulated = run(&spec, &topology, links(Routing::Sf, 0), Inputs::Lengths).expect("lengths only");
    // [GGKK 4.2.2] on a 32 x 32 torus: t_s (R + C - 2) + t_w m (p - 1), t_h once per step.
    let model = links(Routing::Sf, 0);
    let expected = (model.ts_ns + model.th_ns) * 62 + model.transfer_ns((64 << 10) * 1023);
    assert_eq!(simulated.time_ns, expected);
}

/// The same run twice gives the same numbers and the same message flow, to the event.
#[test]
fn the_same_run_gives_the_same_numbers() {
    let topology = Topology::new(TopologyKind::Ring, 12, None).expect("a ring");
    let spec = RunSpec {
        size_bytes: 2048,
        ..RunSpec::new(
            Collective::Alltoall,
            catalogue::default_algorithm(Collective::Alltoall, TopologyKind::Hypercube),
        )
    };
    let options = Options { record: true, ..Options::default() };
    let runs: Vec<SimulatedRun> = (0..2)
        .map(|_| {
            spec::run(&spec, &topology, links(Routing::Ct, 256), Inputs::Reference, options.clone()).expect("a run")
        })
        .collect();
    assert!(runs[0].totals.forwarded > 0, "the hypercube schedule is relayed on a ring");
    assert_eq!(
        (runs[0].time_ns, runs[0].totals, runs[0].busiest_link),
        (runs[1].time_ns, runs[1].totals, runs[1].busiest_link)
    );
    assert_eq!(runs[0].events, runs[1].events);
}

/// A frame ready now crosses its link at once when no other frame waits to enter one
/// (one event a message instead of two): every algorithm of the catalogue, on shapes
/// that forward (rings, meshes, tori, the full topology) and shapes that do not, under
/// store-and-forward, cut-through and packets, gives the same time, steps, totals, busiest
/// link, message flow to the event and operations of every node as when every frame
/// enters every link through an event.
#[test]
fn carrying_a_ready_frame_at_once_changes_nothing() {
    let (mut compared, mut forwarding) = (0, 0);
    for topology in shapes() {
        let p = topology.p();
        for entry in catalogue::ENTRIES {
            for model in [links(Routing::Sf, 0), links(Routing::Ct, 0), links(Routing::Ct, 700)] {
                let spec = RunSpec {
                    size_bytes: 3000,
                    root: p.saturating_sub(1),
                    shift: 3,
                    ..RunSpec::new(entry.collective, entry.algorithm)
                };
                if spec.validate(p).is_err() {
                    continue;
                }
                let [by_events, at_once] = [true, false].map(|entering_by_events| {
                    let options = Options { record: true, operations: true, entering_by_events, ..Options::default() };
                    spec::run(&spec, &topology, model, Inputs::Lengths, options).expect("a run")
                });
                let case = format!("{} ({}) on {topology}, {model:?}", entry.collective, entry.algorithm);
                assert_eq!(
                    (at_once.time_ns, at_once.steps, at_once.totals, at_once.busiest_link),
                    (by_events.time_ns, by_events.steps, by_events.totals, by_events.busiest_link),
                    "{case}"
                );
                assert!(at_once.events == by_events.events, "{case}: the message flow differs");
                assert!(at_once.operations == by_events.operations, "{case}: the operations differ");
                compared += 1;
                forwarding += usize::from(at_once.totals.forwarded > 0);
            }
        }
    }
    assert!(compared > 700 && forwarding > 100, "only {compared} runs compared, {forwarding} forwarding");
}

/// The busiest link a run reports (found in one pass over the link states) is the one the
/// message flow gives: every frame's header and payload summed over the link directions
/// its sends and forwards left by, store-and-forward, every catalogue algorithm on every
/// shape (grids and hypercubes keep link states by port, the full topology in a map).
#[test]
fn the_busiest_link_is_the_one_the_flow_gives() {
    use std::collections::BTreeMap;
    use topocomm_proto::flow::FlowKind;
    use topocomm_proto::frame::{FrameHeader, SYSTEM_TAG_BASE};
    let mut compared = 0;
    for topology in shapes() {
        let p = topology.p();
        for entry in catalogue::ENTRIES {
            let spec =
                RunSpec { size_bytes: 3000, root: p / 2, shift: 3, ..RunSpec::new(entry.collective, entry.algorithm) };
            if spec.validate(p).is_err() {
                continue;
            }
            let options = Options { record: true, ..Options::default() };
            let run = spec::run(&spec, &topology, links(Routing::Sf, 0), Inputs::Lengths, options).expect("a run");
            let mut carried: BTreeMap<(usize, usize), u64> = BTreeMap::new();
            for event in run.events.iter().filter(|event| event.tag < SYSTEM_TAG_BASE) {
                if let (FlowKind::Send | FlowKind::Forward, Some(next)) = (event.kind, event.next) {
                    *carried.entry((event.node, next)).or_default() += FrameHeader::ENCODED_LEN as u64 + event.bytes;
                }
            }
            let from_flow = carried.into_iter().max_by_key(|&(link, bytes)| (bytes, std::cmp::Reverse(link)));
            let case = format!("{} ({}) on {topology}", entry.collective, entry.algorithm);
            assert_eq!(run.busiest_link, from_flow, "{case}");
            compared += usize::from(from_flow.is_some());
        }
    }
    assert!(compared > 200, "only {compared} runs with a busiest link");
}

/// A node that waits for a message no one sends: the simulator stops when nothing else
/// can happen and names the node and the message.
#[test]
fn a_deadlock_is_found_and_named() {
    let topology = Topology::new(TopologyKind::Hypercube, 4, None).expect("a hypercube");
    let outcome = simulate(
        &topology,
        links(Routing::Sf, 0),
        Options::default(),
        |comm| async move {
            if comm.id() == 2 {
                comm.recv(3, 77).await?;
            } else if comm.id() == 1 {
                comm.send(0, 5, Bytes::from_static(b"hello")).await?;
            } else if comm.id() == 0 {
                comm.recv(1, 5).await?;
            }
            Ok(())
        },
        |_, _, _| {},
    );
    match outcome {
        Err(SimulationError::Deadlock { node: 2, src: 3, tag: 77, stuck: 1, at_ns }) => {
            assert!(at_ns > 0, "the message from 1 to 0 was delivered first");
        }
        Err(other) => panic!("another error: {other}"),
        Ok(_) => panic!("a deadlock went unnoticed"),
    }
}

/// Switched networks of each family, all hosts ranked and some left empty, their link
/// classes under physics of their own.
fn switched_shapes() -> Vec<(Topology, Vec<ClassPhysics>)> {
    let shape = |kind, p, dims: &[usize]| Topology::new(kind, p, Some(dims)).expect("a valid shape");
    let class = |name: &str, ts_ns, tw_ps| ClassPhysics {
        name: name.to_owned(),
        ts_ns: Some(ts_ns),
        th_ns: Some(ts_ns / 10),
        tw_ps: Some(tw_ps),
    };
    vec![
        (shape(TopologyKind::FatTree, 16, &[4]), vec![class("core", 80_000, 4_000), class("edge", 20_000, 1_000)]),
        (shape(TopologyKind::FatTree, 11, &[4]), Vec::new()),
        (shape(TopologyKind::Dragonfly, 12, &[2, 2, 1]), vec![class("global", 90_000, 6_000)]),
        (shape(TopologyKind::Dragonfly, 7, &[2, 2, 1]), Vec::new()),
        (shape(TopologyKind::Cluster, 16, &[4, 4]), vec![class("intra", 1_000, 100), class("inter", 50_000, 2_000)]),
        (shape(TopologyKind::Cluster, 13, &[3, 5]), vec![class("intra", 1_000, 100)]),
    ]
}

/// Every algorithm of every collective on fat-trees, dragonflies and clusters of
/// machines, with fewer ranks than hosts too: every rank's result matches the
/// reference, and the switches forward every message that crosses them.
#[test]
fn every_algorithm_is_verified_on_switched_networks() {
    let cases = [(8, Dtype::I64, ReduceOp::Sum), (3000, Dtype::F32, ReduceOp::Min)];
    let mut verified = 0;
    for (topology, classes) in switched_shapes() {
        verified += verify_every_algorithm(&topology, cases, 2, &classes, |simulated| {
            // Ranks never talk directly on a switched network: every message that leaves
            // its rank is passed on by at least one switch.
            if simulated.totals.frame_hops > 0 {
                assert!(simulated.totals.forwarded >= simulated.totals.messages, "{topology}: {:?}", simulated.totals);
            }
        });
    }
    assert!(verified > 300, "only {verified} cases ran");
}

/// The placements other than linear that the switched shapes are tried under.
const PLACED: [Placement; 3] = [Placement::RoundRobin, Placement::Random { seed: 1 }, Placement::Random { seed: 7 }];

/// Every algorithm of every collective on the switched shapes with their ranks dealt
/// round-robin and shuffled: a machine's, an edge switch's, a dragonfly group's ranks are
/// not consecutive, and the hierarchical algorithms' groups are whichever ranks share
/// one. Every rank's result matches the reference.
#[test]
fn every_algorithm_is_verified_on_switched_networks_under_every_placement() {
    let cases = [(8, Dtype::I64, ReduceOp::Sum), (3000, Dtype::F32, ReduceOp::Min)];
    let mut verified = 0;
    for (topology, classes) in switched_shapes() {
        for placement in PLACED {
            let topology = topology.clone().placed(placement).expect("a switched network takes any placement");
            verified += verify_every_algorithm(&topology, cases, 2, &classes, |_| {});
        }
    }
    assert!(verified > 900, "only {verified} cases ran");
}

/// On a cluster of 4 machines of 4 cores, intra links fast and inter slow, the
/// hierarchical algorithms' groups are the machines wherever the ranks sit: dealt
/// round-robin (each machine's ranks in the order linear gives them) they take exactly as
/// long as placed linearly, shuffled within a tenth (which message takes a shared port
/// first changes with the ranks' ids), while the flat ring, whose neighbours are
/// consecutive ranks, crosses machines at every hop and slows down.
#[test]
fn the_hierarchical_algorithms_follow_the_machines_whatever_the_placement() {
    use topocomm_proto::spec::Algorithm;
    let classes = vec![
        ClassPhysics { name: "intra".into(), ts_ns: Some(1_000), th_ns: Some(100), tw_ps: Some(100) },
        ClassPhysics { name: "inter".into(), ts_ns: Some(50_000), th_ns: Some(5_000), tw_ps: Some(5_000) },
    ];
    let cluster = Topology::new(TopologyKind::Cluster, 16, Some(&[4, 4])).expect("a cluster");
    let time = |collective, algorithm, placement| {
        let topology = cluster.clone().placed(placement).expect("a placement");
        let spec = RunSpec { size_bytes: 64 << 10, classes: classes.clone(), ..RunSpec::new(collective, algorithm) };
        let simulated = run(&spec, &topology, links(Routing::Sf, 0), Inputs::Reference).expect("a run");
        assert!(simulated.verified);
        simulated.time_ns as f64
    };
    for (collective, algorithm) in [
        (Collective::Allreduce, Algorithm::MultiLeader),
        (Collective::Allreduce, Algorithm::TwoLevelRing),
        (Collective::Allreduce, Algorithm::TwoLevel),
        (Collective::Allgather, Algorithm::TwoLevel),
        (Collective::Broadcast, Algorithm::TwoLevel),
    ] {
        let linear = time(collective, algorithm, Placement::Linear);
        assert_eq!(time(collective, algorithm, Placement::RoundRobin), linear, "{collective} ({algorithm})");
        for seed in [1, 7] {
            let random = time(collective, algorithm, Placement::Random { seed });
            assert!(
                (random / linear - 1.0).abs() < 0.1,
                "{collective} ({algorithm}) random:{seed}: {random} against {linear}"
            );
        }
    }
    let ring = |placement| time(Collective::Allreduce, Algorithm::Ring, placement);
    let linear = ring(Placement::Linear);
    for placement in PLACED {
        assert!(ring(placement) > 1.5 * linear, "ring {placement}: {} against {linear}", ring(placement));
    }
}

/// One message from a core to a core of another machine crosses intra, inter, inter,
/// intra: it pays the start-up of the slowest class it crosses once, and every link's
/// own t_h and t_w · m (store-and-forward), to the nanosecond; inside a machine it pays
/// only intra's.
#[test]
fn a_message_pays_the_physics_of_each_class_it_crosses() {
    let cluster = Topology::new(TopologyKind::Cluster, 4, Some(&[2, 2])).expect("a cluster");
    let (intra, inter) = ((1_000u64, 10u64, 100u64), (40_000u64, 700u64, 3_000u64));
    let classes = vec![
        ClassPhysics { name: "intra".into(), ts_ns: Some(intra.0), th_ns: Some(intra.1), tw_ps: Some(intra.2) },
        ClassPhysics { name: "inter".into(), ts_ns: Some(inter.0), th_ns: Some(inter.1), tw_ps: Some(inter.2) },
    ];
    let m = 8_000u64;
    let hop = |(_, th, tw): (u64, u64, u64)| th + tw * m / 1000;
    for (to, expected) in [(1, intra.0 + 2 * hop(intra)), (2, inter.0 + 2 * hop(intra) + 2 * hop(inter))] {
        // A scatter from 0 by the linear schedule: one message to each other rank; the
        // size is per node, so node `to`'s block is m bytes.
        let spec = RunSpec {
            size_bytes: m,
            classes: classes.clone(),
            ..RunSpec::new(Collective::PingPong, topocomm_proto::spec::Algorithm::Linear)
        };
        let spec = RunSpec { root: 0, shift: to, ..spec };
        let simulated = run(&spec, &cluster, links(Routing::Sf, 0), Inputs::Reference).expect("a ping-pong");
        assert!(simulated.verified);
        // There and back.
        assert_eq!(simulated.time_ns, 2 * expected, "0 <-> {to}");
    }
}
