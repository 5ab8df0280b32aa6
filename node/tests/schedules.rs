//! Schedules users bring: MSCCL-IR programs (topocomm's own, made by
//! `tests/schedules/make.py`, and msccl-tools' own output in `tests/schedules/msccl-tools/`)
//! run on 8 and 16 nodes wired as a ring, a torus and a hypercube, in memory and on the
//! simulator, every node's result held against the reference and both runs sending the
//! same messages over the same relays; every refusal with its message; GOAL schedules read, run and written back.

mod common;

use std::path::PathBuf;

use common::TIMEOUT;
use topocomm_collectives::algorithms::schedule::{goal, msccl};
use topocomm_collectives::simulator::Options;
use topocomm_collectives::simulator::spec::{self, Inputs};
use topocomm_node::in_process::InProcessCluster;
use topocomm_proto::schedule::{Program, Schedule};
use topocomm_proto::spec::{Algorithm, Dtype, LinkModel, Ports, ReduceOp, Routing, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/schedules").join(name)
}

fn load(name: &str) -> Program {
    let text = std::fs::read_to_string(path(name)).unwrap_or_else(|error| panic!("{name}: {error}"));
    msccl::parse(&text).unwrap_or_else(|error| panic!("{name}: {error}"))
}

/// A run of `program` with `dtype` and `op` on a size three chunks of elements long per chunk.
fn spec_of(program: &Program, run: u64, dtype: Dtype, op: ReduceOp) -> RunSpec {
    let p = program.gpus.len() as u64;
    let whole_multiple = match program.collective {
        topocomm_proto::spec::Collective::Allgather | topocomm_proto::spec::Collective::Alltoall => p,
        _ => 1,
    };
    // The larger buffer is whole_multiple × size = chunks × 3 elements of 8 B (of 4 B: 6).
    let size_bytes = u64::from(program.chunks_per_loop) * 24 / whole_multiple;
    RunSpec {
        run,
        size_bytes,
        dtype,
        op,
        seed: 40 + run,
        timeout_ms: TIMEOUT.as_millis() as u64,
        schedule: Some(Box::new(Schedule::Msccl(program.clone()))),
        ..RunSpec::new(program.collective, Algorithm::Ring)
    }
}

fn links() -> LinkModel {
    LinkModel { ts_ns: 20_000, th_ns: 1_000, tw_ps: 1_000, routing: Routing::Sf, packet_bytes: 0, ports: Ports::All }
}

fn shapes(p: usize) -> Vec<Topology> {
    [TopologyKind::Ring, TopologyKind::Torus, TopologyKind::Hypercube]
        .into_iter()
        .map(|kind| Topology::new(kind, p, None).expect("a valid shape"))
        .collect()
}

/// Runs `name` on every shape of its p, in memory and on the simulator, with two data
/// cases; both must verify and reach the same depth.
async fn verify_everywhere(name: &str) {
    let program = load(name);
    let p = program.gpus.len();
    program.dry_run().unwrap_or_else(|error| panic!("{name}: {error}"));
    for topology in shapes(p) {
        for (run, dtype, op) in
            [(1, Dtype::I32, ReduceOp::Sum), (2, Dtype::F64, ReduceOp::Max), (3, Dtype::F32, ReduceOp::Sum)]
        {
            let spec = spec_of(&program, run, dtype, op);
            spec.validate(p).unwrap_or_else(|error| panic!("{name}: {error}"));
            let context = format!("{name} on {topology}, {dtype} {op}");
            let cluster = InProcessCluster::start(&topology);
            cluster.verify(&spec, TIMEOUT).await.unwrap_or_else(|error| panic!("{context}: {error}"));
            let simulated = spec::run(&spec, &topology, links(), Inputs::Reference, Options::default())
                .unwrap_or_else(|error| panic!("{context} (simulated): {error}"));
            assert!(simulated.verified, "{context}");
            // The same messages over the same routes (the depth in steps is no measure here:
            // a node's blocks run at once, so it depends on how they interleave).
            let sent: u64 = (0..p).map(|node| cluster.router(node).traffic().frames_sent).sum();
            assert_eq!(sent, simulated.totals.messages, "{context}: messages in memory and on the simulator");
            assert_eq!(common::frames_forwarded(&cluster, p), simulated.totals.forwarded, "{context}: relays");
        }
    }
}

const OWN: [&str; 5] = ["ring_allgather_2ch", "ring_allreduce_4ch", "alltoall", "allgather_deps", "allreduce_scratch"];

#[tokio::test]
async fn the_projects_own_programs_verify_on_8_and_16_nodes() {
    for p in [8, 16] {
        for name in OWN {
            verify_everywhere(&format!("{name}_p{p}.xml")).await;
        }
    }
}

/// Files msccl-tools wrote from its own examples (the commands are in the folder's README).
#[tokio::test]
async fn programs_msccl_tools_wrote_verify() {
    let folder = path("msccl-tools");
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .expect("the folder of msccl-tools' programs")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".xml"))
        .collect();
    names.sort();
    assert!(names.len() >= 7, "{names:?}");
    for name in names {
        verify_everywhere(&format!("msccl-tools/{name}")).await;
    }
}

fn refusal(program: &Program) -> String {
    program.dry_run().expect_err("the program must be refused").to_string()
}

#[test]
fn a_dependency_cycle_is_found_before_anything_runs_and_names_the_blocks() {
    let mut program = load("allgather_deps_p8.xml");
    // The copy block waits for the sending block's last send, which waits (through the
    // receives) for ... the copy: block 0 → block 1 → block 0.
    program.gpus[3].blocks[0].steps[0].after = Some((1, 0));
    let error = refusal(&program);
    assert!(error.starts_with("the schedule cannot finish: a dependency cycle: gpu 3 tb 0 → tb 1 → tb 0"), "{error}");
}

#[test]
fn a_receive_nothing_feeds_is_found_and_named() {
    let mut program = load("ring_allgather_2ch_p8.xml");
    // Rank 4's channel-1 block sends its own chunk no more: rank 5's last receive waits.
    program.gpus[4].blocks[1].steps.remove(1);
    let error = refusal(&program);
    assert!(error.starts_with("the schedule cannot finish: every block left waits"), "{error}");
    assert!(error.contains("gpu 5 tb 1 step 8 (r) waits for a message from gpu 4 on channel 1"), "{error}");
}

#[test]
fn a_send_with_no_matching_receive_is_named() {
    let mut program = load("alltoall_p8.xml");
    // Rank 2 stops receiving from rank 0.
    program.gpus[2].blocks[1].steps.pop();
    assert_eq!(
        refusal(&program),
        "a send with no matching receive: gpu 0 tb 2 step 0 (s) sends 1 chunks to gpu 2 on channel 0, and no block of gpu 2 receives them"
    );
}

#[test]
fn a_count_that_differs_between_send_and_receive_is_named() {
    let mut program = load("alltoall_p8.xml");
    program.gpus[0].blocks[2].steps[0].count = 2;
    program.gpus[0].blocks[2].steps[0].src.index = 0;
    let error = refusal(&program);
    assert!(
        error.contains(
            "gpu 2 tb 1 step 1 (r) receives 1 chunks, but the message it matches, from gpu 0 tb 2 step 0 (s), carries 2"
        ),
        "{error}"
    );
}

#[test]
fn a_program_for_another_node_count_is_refused_naming_both() {
    let program = load("ring_allreduce_4ch_p8.xml");
    let spec = spec_of(&program, 1, Dtype::F64, ReduceOp::Sum);
    let error = spec.validate(16).unwrap_err().to_string();
    assert_eq!(error, "the schedule is written for 8 ranks, but the cluster has 16 nodes (give --nodes 8)");
}

#[test]
fn a_size_that_does_not_divide_is_refused_naming_the_nearest_that_do() {
    let program = load("ring_allreduce_4ch_p8.xml");
    let spec = RunSpec { size_bytes: 1000, ..spec_of(&program, 1, Dtype::F64, ReduceOp::Sum) };
    let error = spec.validate(8).unwrap_err().to_string();
    assert!(error.contains("sizes that do are multiples of 256 B: try 768 or 1024"), "{error}");
}

#[test]
fn a_command_for_another_collective_is_refused() {
    let program = load("ring_allreduce_4ch_p8.xml");
    let spec = RunSpec {
        collective: topocomm_proto::spec::Collective::Allgather,
        ..spec_of(&program, 1, Dtype::F64, ReduceOp::Sum)
    };
    let error = spec.validate(8).unwrap_err().to_string();
    assert_eq!(error, "the schedule is for allreduce, but the command asks for allgather");
}

#[tokio::test]
async fn a_wrong_program_fails_verification_naming_the_node() {
    let mut program = load("ring_allreduce_4ch_p8.xml");
    // Rank 0's last receive on channel 0 stores its chunk in the wrong place.
    let last = program.gpus[0].blocks[0].steps.last_mut().expect("steps");
    last.dst.index = (last.dst.index + 4) % 32;
    let spec = spec_of(&program, 1, Dtype::I64, ReduceOp::Sum);
    let topology = Topology::new(TopologyKind::Ring, 8, None).unwrap();
    let error = InProcessCluster::start(&topology).verify(&spec, TIMEOUT).await.unwrap_err().to_string();
    assert!(error.starts_with("node 0: "), "{error}");
    assert!(error.contains("differ; first at element"), "{error}");
    // Chunk 8 (segment 2 of channel 0) never arrives where it belongs: it is named.
    assert!(error.ends_with("(in output chunk 8, chunks of 24 B)"), "{error}");
}

const TREE: &str = "num_ranks 4
rank 0 {
l1: send 1000b to 1 tag 0
l2: send 1000b to 2 tag 0
}
rank 1 {
l1: recv 1000b from 0 tag 0
l2: send 1000b to 3 tag 0
l2 requires l1
}
rank 2 {
l1: recv 1000b from 0 tag 0
}
rank 3 {
l1: recv 1000b from 1 tag 0
}
";

#[tokio::test]
async fn a_goal_schedule_runs_in_memory_and_on_the_simulator() {
    let goal = goal::parse(TREE).unwrap();
    let spec = RunSpec {
        timeout_ms: TIMEOUT.as_millis() as u64,
        schedule: Some(Box::new(Schedule::Goal(goal))),
        ..RunSpec::new(topocomm_proto::spec::Collective::Broadcast, Algorithm::Linear)
    };
    let topology = Topology::new(TopologyKind::Ring, 4, None).unwrap();
    let simulated = spec::run(&spec, &topology, links(), Inputs::Lengths, Options::default()).unwrap();
    // 0 → 1 (one hop) then 1 → 3 (two hops) is the longest chain: t_s + 1000 t_w + t_h,
    // then t_s + two hops of store-and-forward.
    let one_hop = 20_000 + 1_000 + 1_000;
    assert_eq!(simulated.time_ns, one_hop + (20_000 + 2 * (1_000 + 1_000)));
    let cluster = InProcessCluster::start(&topology);
    let outcomes = common::run_with_input(&cluster, &spec, bytes::Bytes::new()).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    common::assert_no_message_left(&cluster, 4, "the GOAL tree");
}

/// Every built-in algorithm's schedule at p = 8 and 16, on a ring, a torus and a
/// hypercube, recorded by the simulator, written as GOAL and read back: the GOAL
/// schedule takes the same simulated time to the nanosecond, and sends as many messages.
#[test]
fn every_built_in_schedule_round_trips_through_goal_in_the_same_time() {
    let mut mismatches = Vec::new();
    let mut cases = 0;
    for p in [8, 16] {
        for topology in shapes(p) {
            for entry in topocomm_proto::catalogue::ENTRIES {
                let spec =
                    RunSpec { size_bytes: 4096, root: 1, seed: 3, ..RunSpec::new(entry.collective, entry.algorithm) };
                if spec.validate(p).is_err() {
                    continue;
                }
                let recording = Options { operations: true, ..Options::default() };
                let Ok(original) = spec::run(&spec, &topology, links(), Inputs::Zeros, recording) else {
                    continue; // an algorithm that does not run on this shape
                };
                let text = goal::write(&goal::from_operations(&original.operations));
                let read = goal::parse(&text)
                    .unwrap_or_else(|error| panic!("{} {}: {error}", entry.collective, entry.algorithm));
                let replay = RunSpec { schedule: Some(Box::new(Schedule::Goal(read))), ..spec.clone() };
                let replayed = spec::run(&replay, &topology, links(), Inputs::Lengths, Options::default())
                    .unwrap_or_else(|error| panic!("{} {} on {topology}: {error}", entry.collective, entry.algorithm));
                cases += 1;
                if (replayed.time_ns, replayed.totals.messages) != (original.time_ns, original.totals.messages) {
                    mismatches.push(format!(
                        "{} by {} on {topology}: {} ns, {} messages; as GOAL {} ns, {} messages",
                        entry.collective,
                        entry.algorithm,
                        original.time_ns,
                        original.totals.messages,
                        replayed.time_ns,
                        replayed.totals.messages
                    ));
                }
            }
        }
    }
    eprintln!("{cases} built-in schedules round-tripped through GOAL");
    assert!(cases > 200, "only {cases} cases ran");
    assert!(mismatches.is_empty(), "{} of {cases} differ:\n{}", mismatches.len(), mismatches.join("\n"));
}
