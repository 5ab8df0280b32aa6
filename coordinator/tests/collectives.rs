//! Every collective with its default algorithm over real daemons on loopback: one
//! long-lived cluster of 8 `topocomm-node` processes, re-wired as a ring, a torus and a
//! hypercube, each run verified against the reference on every node. Also: `auto`
//! names the algorithm it picked, emulated runs report the model, and a traced run
//! brings every node's message flow back on one timeline.

mod common;

use common::TestCluster;
use serde_json::Value;
use topocomm_proto::TopologyKind;
use topocomm_proto::catalogue;
use topocomm_proto::spec::Collective;

const COLLECTIVES: [&str; 11] = [
    "broadcast",
    "reduce",
    "allgather",
    "reduce-scatter",
    "allreduce",
    "scan",
    "scatter",
    "gather",
    "alltoall",
    "shift",
    "barrier",
];

#[test]
fn every_collective_runs_verified_on_ring_torus_and_hypercube() {
    let cluster = TestCluster::start("collectives", 8);
    for topology in ["ring", "torus", "hypercube"] {
        for collective in COLLECTIVES {
            let words = format!("{collective} --topology {topology} --root 3 --size 8KiB --iterations 2 --warmup 1");
            let json = cluster.run_ok(&words);
            let kind: TopologyKind = topology.parse().unwrap();
            let expected = catalogue::default_algorithm(expected_collective(collective), kind);
            assert_eq!(json["algorithm"], expected.to_string(), "{words}: {json:#}");
            assert_eq!(json["nodes"], 8, "{words}");
            assert_eq!(json["topology"], topology, "{words}");
            // An algorithm on the topology it is made for: every message crosses one link.
            // (Where the default is made for another shape — the ring reduce-scatter and
            // scan on a torus, the dissemination barrier — messages may be forwarded; so may
            // a shift on a hypercube, where ids i and i + 1 can differ in several bits.)
            let entry = catalogue::find(expected_collective(collective), expected).unwrap();
            let own_shape = entry.made_for.includes(kind);
            if own_shape && !(collective == "shift" && topology == "hypercube") {
                assert_eq!(json["frames_forwarded"], 0, "{words}: {json:#}");
            }
        }
    }
}

#[test]
fn auto_names_what_it_ran_and_emulated_runs_carry_the_model() {
    let cluster = TestCluster::start("auto-model", 8);
    let json = cluster.run_ok("allreduce --topology hypercube --algorithm auto --size 1MiB --iterations 2 --warmup 1");
    assert_eq!(json["algorithm"], "halving-doubling", "{json:#}");
    let json = cluster.run_ok("allreduce --topology hypercube --algorithm auto --size 64KiB --iterations 2 --warmup 1");
    assert_eq!(json["algorithm"], "recursive-doubling", "{json:#}");

    let json = cluster
        .run_ok("allgather --topology ring --size 4KiB --iterations 3 --warmup 1 --ts 100us --th 10us --tw 10ns");
    // Ring all-gather: p - 1 = 7 steps of t_s + t_h + t_w m = 100 + 10 + 40.96 µs.
    let model = json["model_us"].as_f64().unwrap();
    assert!((model - 7.0 * 150.96).abs() < 1e-6, "{json:#}");
    let ratio = json["model_ratio"].as_f64().unwrap();
    assert!(ratio > 0.0, "{json:#}");
    assert_eq!(json["steps"], 7, "{json:#}");
    assert_eq!(json["links"]["routing"], "sf", "{json:#}");
    let median = json["time_us"]["median"].as_f64().unwrap();
    // Emulated links cannot be faster than their physics allows.
    assert!(median >= model * 0.9, "measured {median} µs under the model's {model} µs: {json:#}");
}

fn expected_collective(name: &str) -> Collective {
    name.parse().unwrap()
}

fn steps_of(json: &Value) -> u64 {
    json["steps"].as_u64().unwrap()
}

#[test]
fn schedules_report_their_steps() {
    let cluster = TestCluster::start("steps", 8);
    assert_eq!(steps_of(&cluster.run_ok("broadcast --topology hypercube --size 1KiB --iterations 1 --warmup 0")), 3);
    assert_eq!(steps_of(&cluster.run_ok("broadcast --topology ring --size 1KiB --iterations 1 --warmup 0")), 4);
    assert_eq!(steps_of(&cluster.run_ok("allgather --topology ring --size 1KiB --iterations 1 --warmup 0")), 7);
}
