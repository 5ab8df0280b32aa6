//! Every JSON document the `topocomm` CLI prints carries `schema_version` at its top
//! level: `topology`, `explain`, `simulate`, `run` (and its `--dump` run.json), `sweep`,
//! `calibrate` and `bench-model` on local clusters, `status` and a remote `run` against
//! a serving coordinator. Each is run as a user runs it, with sizes and counts small
//! enough for a debug build on two shared cores.

mod common;

use std::time::Duration;

use common::{Scratch, TestCluster, command, read_text, run_bounded, topocomm_bin};
use serde_json::Value;

/// The version the README documents.
const SCHEMA_VERSION: u64 = 1;

const PATIENCE: Duration = Duration::from_secs(180);

/// Runs `topocomm <words>` to success and returns its stdout.
fn topocomm(scratch: &Scratch, label: &str, words: &str) -> String {
    let mut cli = command(&topocomm_bin());
    cli.args(words.split_whitespace());
    // `calibrate` keeps its fit here, never in the user's cache.
    cli.env("TOPOCOMM_CALIBRATION", scratch.path.join("calibration.json"));
    let finished = run_bounded(cli, scratch, label, PATIENCE);
    assert!(finished.status.success(), "topocomm {words} failed:\n{}\n{}", finished.stderr, finished.stdout);
    finished.stdout
}

/// Parses `text` as one JSON object and checks its version; returns it.
fn versioned(what: &str, text: &str) -> Value {
    let document: Value =
        serde_json::from_str(text).unwrap_or_else(|error| panic!("{what}: not one JSON document ({error}):\n{text}"));
    assert!(document.is_object(), "{what}: not an object:\n{text}");
    assert_eq!(document["schema_version"], SCHEMA_VERSION, "{what}:\n{text}");
    document
}

#[test]
fn documents_made_without_a_cluster_carry_the_version() {
    let scratch = Scratch::new("schema-offline");
    let topology =
        versioned("topology --json", &topocomm(&scratch, "topology", "topology --topology torus --nodes 9 --json"));
    assert_eq!(topology["nodes"], 9, "the document is still the topology's");
    let explain = versioned(
        "explain --json",
        &topocomm(&scratch, "explain", "explain allgather --topology hypercube --nodes 8 --size 1KiB --json"),
    );
    assert_eq!(explain["collective"], "allgather");
    let simulated = versioned(
        "simulate --json",
        &topocomm(&scratch, "simulate", "simulate allreduce --topology hypercube --nodes 16 --size 1KiB --json"),
    );
    assert_eq!(
        (&simulated["collective"], &simulated["nodes"], &simulated["verified"]),
        (&"allreduce".into(), &16.into(), &true.into())
    );
    let scaling = versioned(
        "simulate --json of several points",
        &topocomm(&scratch, "simulate-points", "simulate broadcast -t ring,torus -n 4,16 --json"),
    );
    assert_eq!(scaling["points"].as_array().map(Vec::len), Some(4));
}

#[test]
fn documents_of_local_clusters_carry_the_version() {
    let scratch = Scratch::new("schema-local");
    let logs = scratch.path.join("logs");
    let dump = scratch.path.join("dump");
    let run = topocomm(
        &scratch,
        "run",
        &format!(
            "run allreduce --nodes 4 --topology ring --size 1KiB --iterations 5 --warmup 1 --json --logs {} --dump {}",
            logs.display(),
            dump.display()
        ),
    );
    let run = versioned("run --json", &run);
    let time = &run["time_us"];
    for key in ["min", "median", "mean", "max", "p50", "p90", "p99"] {
        assert!(time[key].as_f64().is_some_and(|t| t > 0.0), "time_us.{key}: {run:#}");
    }
    // Nearest rank of 5 iterations: p50 the 3rd, p90 and p99 the 5th (the maximum).
    let mut sorted: Vec<f64> = run["iteration_us"].as_array().unwrap().iter().map(|t| t.as_f64().unwrap()).collect();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(time["p50"].as_f64(), Some(sorted[2]), "{run:#}");
    assert_eq!(time["p90"].as_f64(), Some(sorted[4]), "{run:#}");
    assert_eq!(time["p99"], time["max"], "{run:#}");
    versioned("run --dump run.json", &read_text(&dump.join("run.json")));

    let sweep = topocomm(
        &scratch,
        "sweep",
        &format!(
            "sweep allgather --nodes 4 --topology ring --sizes 1KiB,2KiB --iterations 2 --warmup 0 --logs {} --json -",
            logs.display()
        ),
    );
    let sweep = versioned("sweep --json", &sweep);
    assert_eq!(sweep["bandwidth"]["busbw_factor"], 3.0, "allgather on 4 nodes: p - 1");
    for point in sweep["points"].as_array().expect("points") {
        for key in ["p50_us", "p90_us", "p99_us"] {
            assert!(point[key].as_f64().is_some_and(|t| t > 0.0), "{key}: {point}");
        }
    }

    let calibrate = topocomm(
        &scratch,
        "calibrate",
        &format!(
            "calibrate --nodes 4 --sizes 8B,1KiB,16KiB --iterations 2 --warmup 0 --no-save --json --logs {}",
            logs.display()
        ),
    );
    versioned("calibrate --json", &calibrate);

    let bench = topocomm(
        &scratch,
        "bench-model",
        &format!(
            "bench-model --nodes 4 --topologies ring --collectives broadcast,scan --sizes 1KiB --routings sf \
             --ts 20us --th 2us --tw 1ns --iterations 1 --warmup 0 --json --logs {}",
            logs.display()
        ),
    );
    let lines: Vec<&str> = bench.lines().filter(|line| !line.trim().is_empty()).collect();
    assert_eq!(lines.len(), 3, "a line per run and the summary:\n{bench}");
    for (i, line) in lines.iter().enumerate() {
        versioned(&format!("bench-model --json, line {}", i + 1), line);
    }
}

#[test]
fn documents_of_a_serving_coordinator_carry_the_version() {
    let cluster = TestCluster::start("schema-serve", 2);
    let status = run_bounded(cluster.cli(&["status", "--json"]), &cluster.scratch, "status", PATIENCE);
    assert!(status.status.success(), "{status:?}");
    let status = versioned("status --json", &status.stdout);
    assert_eq!(status["expected"], 2);
    let run = run_bounded(
        cluster.cli(&["run", "broadcast", "--topology", "ring", "--size", "1KiB", "--iterations", "2", "--json"]),
        &cluster.scratch,
        "run",
        PATIENCE,
    );
    assert!(run.status.success(), "{run:?}");
    versioned("remote run --json", &run.stdout);
}
