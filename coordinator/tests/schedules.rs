//! Schedules users bring, on real daemons: topocomm's own MSCCL-IR programs on clusters
//! of 8 and 16 `topocomm-node` processes re-wired as a ring, a torus and a hypercube, each
//! run verified on every node and sending the messages `simulate` counts for it; a GOAL
//! schedule that `explain --goal` wrote, run with sizes only and said so; a program for
//! another node count refused with its message; `bench-model --schedule` holding a
//! program against its model.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Scratch, TestCluster, command, run_bounded, topocomm_bin};
use serde_json::Value;

fn schedule(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../node/tests/schedules").join(name);
    path.to_str().expect("a UTF-8 path").to_owned()
}

/// Each program of `node/tests/schedules/make.py` with its collective and a --size that
/// cuts into its chunks on p nodes.
fn programs(p: usize) -> [(&'static str, &'static str, usize); 5] {
    [
        ("ring_allgather_2ch", "allgather", 768),
        ("ring_allreduce_4ch", "allreduce", 96 * p * 16),
        ("alltoall", "alltoall", 384),
        ("allgather_deps", "allgather", 384),
        ("allreduce_scratch", "allreduce", 384),
    ]
}

/// `topocomm simulate` of the same point, as JSON.
fn simulated(scratch: &Scratch, words: &str) -> Value {
    let mut simulate = command(&topocomm_bin());
    simulate.arg("simulate").args(words.split_whitespace()).arg("--json");
    run_bounded(simulate, scratch, "simulate", Duration::from_secs(60)).json()
}

#[test]
fn the_projects_own_programs_run_verified_on_8_and_16_daemons_as_the_simulator_counts() {
    for p in [8, 16] {
        let cluster = TestCluster::start(&format!("schedules-{p}"), p);
        let scratch = Scratch::new(&format!("schedules-simulate-{p}"));
        for topology in ["ring", "torus", "hypercube"] {
            for (name, collective, size) in programs(p) {
                let file = schedule(&format!("{name}_p{p}.xml"));
                let point = format!("{collective} --topology {topology} --size {size} --schedule {file}");
                let json = cluster.run_ok(&format!("{point} --iterations 1 --warmup 0 --dtype i64"));
                assert!(json["algorithm"].as_str().unwrap().starts_with("MSCCL-IR program"), "{point}: {json:#}");
                let model = simulated(&scratch, &format!("{point} --nodes {p} --dtype i64"));
                assert_eq!(model["verified"], true, "{point}: {model:#}");
                assert_eq!(json["frames_sent"], model["frames_sent"], "{point}: messages on daemons and simulated");
                // A daemon counts the frames it relayed until it reports, and it may report
                // while it still relays others' last messages: at most the simulated count.
                let relayed = |json: &Value| json["frames_forwarded"].as_u64().unwrap();
                assert!(relayed(&json) <= relayed(&model), "{point}: relays {json:#} {model:#}");
            }
        }
    }
}

#[test]
fn a_goal_schedule_explain_wrote_runs_on_daemons_with_sizes_only() {
    let cluster = TestCluster::start("schedules-goal", 8);
    let scratch = Scratch::new("schedules-goal-explain");
    let goal = scratch.file("allreduce", "goal");
    let goal = goal.to_str().unwrap();
    let mut explain = command(&topocomm_bin());
    explain.args(["explain", "allreduce", "--nodes", "8", "--topology", "ring", "--size", "4KiB", "--goal", goal]);
    let explained = run_bounded(explain, &scratch, "explain", Duration::from_secs(60));
    assert!(explained.status.success(), "{}", explained.stderr);
    assert!(explained.stderr.contains("wrote the schedule as GOAL"), "{}", explained.stderr);
    let json = cluster.run(&format!("allreduce --topology ring --goal {goal} --iterations 2 --warmup 1")).json();
    assert_eq!(json["verified"], false, "{json:#}");
    assert_eq!(json["algorithm"], "GOAL schedule", "{json:#}");
    assert!(json["frames_sent"].as_u64().unwrap() > 0, "{json:#}");
    // Issue 45, item 9: the size reported is the schedule's (its longest message, of the
    // 4 KiB it was written for), not the unused --size (64 KiB by default).
    let size = json["size_bytes"].as_u64().unwrap();
    assert!(size > 0 && size <= 4096, "{json:#}");
    assert_eq!(json["collective"], "goal", "a GOAL schedule has no collective: {json:#}");

    // Issue 45, item 9: a GOAL run and a GOAL simulation need no collective, and say so
    // when neither a collective nor --goal is given.
    let bare = cluster.run(&format!("--topology ring --goal {goal} --iterations 2 --warmup 1"));
    assert!(bare.status.success(), "{}", bare.stderr);
    let bare = bare.json();
    assert_eq!((&bare["collective"], &bare["algorithm"]), (&json["collective"], &json["algorithm"]), "{bare:#}");
    let mut simulate = command(&topocomm_bin());
    simulate.args(["simulate", "--nodes", "8", "--topology", "ring", "--goal", goal]);
    let simulated = run_bounded(simulate, &scratch, "simulate", Duration::from_secs(60));
    assert!(simulated.status.success(), "{}", simulated.stderr);
    assert!(simulated.stdout.contains("GOAL schedule simulated: messages of their own sizes"), "{}", simulated.stdout);
    let mut neither = command(&topocomm_bin());
    neither.args(["simulate", "--nodes", "8"]);
    let refused = run_bounded(neither, &scratch, "neither", Duration::from_secs(60));
    assert!(!refused.status.success());
    assert!(refused.stderr.contains("COLLECTIVE"), "clap names the missing collective: {}", refused.stderr);
}

#[test]
fn a_program_for_another_node_count_is_refused_with_its_message() {
    let cluster = TestCluster::start("schedules-refused", 8);
    let file = schedule("ring_allreduce_4ch_p16.xml");
    let finished = cluster.run(&format!("allreduce --topology ring --size 24KiB --schedule {file}"));
    assert!(!finished.status.success());
    let said = format!("{}{}", finished.stdout, finished.stderr);
    assert!(said.contains("the schedule is written for 16 ranks, but the cluster has 8 nodes"), "{said}");
}

/// `bench-model --schedule`: the program's runs on emulated links, each held against the
/// cost model of its own schedule and named by the program; a --collectives the program is
/// not for is refused before any daemon starts.
#[test]
fn bench_model_holds_a_program_against_its_model() {
    let scratch = Scratch::new("schedules-bench-model");
    let file = schedule("ring_allreduce_4ch_p8.xml");
    let mut bench = command(&topocomm_bin());
    bench.args(
        format!(
            "bench-model --nodes 8 --topologies ring --sizes 768B --routings sf --iterations 2 --warmup 1 --json \
             --schedule {file}"
        )
        .split_whitespace(),
    );
    let finished = run_bounded(bench, &scratch, "bench-model", Duration::from_secs(120));
    assert!(finished.status.success(), "{}", finished.stderr);
    let rows: Vec<Value> =
        finished.stdout.lines().map(|line| serde_json::from_str(line).expect("JSON lines")).collect();
    let run = rows.iter().find(|row| row.get("algorithm").is_some()).expect("one run's line");
    assert_eq!(run["algorithm"], "MSCCL-IR program \"ring_allreduce_4ch\"", "{run}");
    assert_eq!(run["collective"], "allreduce");
    assert!(run["error"].is_null(), "the program's run failed: {run}");
    assert!(run["measured_us"].as_f64().is_some_and(|us| us > 0.0), "{run}");
    assert!(run["model_us"].as_f64().is_some_and(|us| us > 0.0), "{run}");

    let mut wrong = command(&topocomm_bin());
    wrong.args(format!("bench-model --nodes 8 --collectives allgather --schedule {file}").split_whitespace());
    let refused = run_bounded(wrong, &scratch, "bench-model-wrong", Duration::from_secs(30));
    assert!(!refused.status.success());
    assert!(
        refused.stderr.contains("the program is for allreduce, but --collectives names allgather"),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("local cluster"), "refused before any daemon started: {}", refused.stderr);
}
