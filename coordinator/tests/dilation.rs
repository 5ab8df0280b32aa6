//! Time dilation of emulated links, as a user meets it: the JSON of a dilated run says
//! by how much and what it cost in wall time, and its times are emulated time; `auto`
//! says what its probe measured, on a local cluster and on a served one. No assertion
//! here is a speed goal: each checks what dilation makes true whatever the machine —
//! nothing arrives before its emulated time (so no iteration beats the model), and a run
//! dilated by K lasts at least K times its emulated time on the wall clock.

mod common;

use std::time::Duration;

use common::{Scratch, TestCluster, command, run_bounded, topocomm_bin};
use serde_json::Value;

const PATIENCE: Duration = Duration::from_secs(240);

/// Runs `topocomm <words>` on a local cluster to success and returns its JSON.
fn run_json(scratch: &Scratch, label: &str, words: &str) -> Value {
    let mut cli = command(&topocomm_bin());
    cli.args(words.split_whitespace()).args(["--json", "--logs"]).arg(scratch.path.join("logs"));
    let json = run_bounded(cli, scratch, label, PATIENCE).json();
    assert_eq!(json["verified"], true, "{json:#}");
    json
}

/// The timed iterations' times, in µs.
fn iterations(json: &Value) -> Vec<f64> {
    json["iteration_us"].as_array().expect("iteration_us").iter().map(|t| t.as_f64().expect("a time")).collect()
}

#[test]
fn a_dilated_run_reports_emulated_times_and_its_wall_time() {
    let scratch = Scratch::new("dilation-given");
    // Two store-and-forward steps of 5 ms each on a ring of 4: 10 ms emulated, 40 ms of
    // wall time per iteration at ×4.
    let json = run_json(
        &scratch,
        "run",
        "run broadcast --nodes 4 --topology ring --size 1KiB --ts 5ms --tw 1ns --dilation 4 --iterations 3 --warmup 1",
    );
    let dilation = &json["dilation"];
    assert_eq!(dilation["factor"], 4.0, "{json:#}");
    assert!(dilation["auto"].is_null(), "--dilation 4 was given, not chosen: {json:#}");
    let model = json["model_us"].as_f64().expect("emulated runs carry the model");
    assert!((model - 2.0 * (5000.0 + 1.024)).abs() < 1e-6, "{json:#}");
    let times = iterations(&json);
    assert_eq!(times.len(), 3);
    // Emulated time: nothing arrives before the model says, to the nanosecond.
    for &time in &times {
        assert!(time >= model - 1e-3, "an iteration of {time} µs beat the model's {model} µs: {json:#}");
    }
    // Dilated: the timed iterations alone lasted 4 times their emulated time on the wall
    // clock (times reported in wall time would be 4 times larger and fail this).
    let wall_s = dilation["wall_s"].as_f64().expect("wall time");
    let emulated_s: f64 = times.iter().sum::<f64>() / 1e6;
    assert!(wall_s >= 4.0 * emulated_s, "wall {wall_s} s < 4 × {emulated_s} s emulated: {json:#}");
}

#[test]
fn auto_probes_the_cluster_and_says_why() {
    let scratch = Scratch::new("dilation-auto");
    let json = run_json(
        &scratch,
        "run",
        "run allgather --nodes 4 --topology ring --size 1KiB --ts 200us --th 20us --tw 10ns --iterations 2 --warmup 1",
    );
    let dilation = &json["dilation"];
    let factor = dilation["factor"].as_f64().expect("a factor");
    assert!((1.0..=1000.0).contains(&factor), "{json:#}");
    let auto = &dilation["auto"];
    assert_eq!(auto["probe"]["nodes"], 4, "{json:#}");
    let small = &auto["probe"]["small"];
    assert_eq!(small["size_bytes"], 8, "{json:#}");
    assert!(small["cold_us"].as_f64().is_some_and(|us| us > 0.0), "{json:#}");
    assert!(small["hold_us"].as_f64().is_some_and(|us| us >= 10_000.0), "{json:#}");
    assert!(small["release_us"].as_f64().is_some_and(|us| us >= 0.0), "{json:#}");
    assert!(auto["probe"]["long"].is_null(), "1 KiB messages need no long steps: {json:#}");
    // The ring all-gather sends 1 KiB blocks: 200 + 20 + 10.24 µs over one hop.
    assert_eq!(auto["shortest_message"]["size_bytes"], 1024, "{json:#}");
    assert!((auto["shortest_message"]["emulated_us"].as_f64().unwrap() - 230.24).abs() < 1e-9, "{json:#}");
    // K is what the larger rule asks, to the tenth above, or 1 when both ask for less.
    let needs = auto["release_needs"].as_f64().unwrap().max(auto["bytes_need"].as_f64().unwrap());
    let expected = if needs <= 1.0 { 1.0 } else { (needs * 10.0 - 1e-9).ceil() / 10.0 };
    assert!((factor - expected).abs() < 1e-9, "K {factor}, the rules ask {needs}: {json:#}");
    assert!(auto["reason"].as_str().is_some_and(|r| r.contains("a step of 4 nodes sending at once")), "{json:#}");
    let wall_s = dilation["wall_s"].as_f64().expect("wall time");
    assert!(wall_s >= factor * iterations(&json).iter().sum::<f64>() / 1e6, "{json:#}");

    // The text says so too: the choice before the run (in one line, or in full with
    // --verbose), the factor and wall time after.
    let text_run = |verbose: bool| {
        let mut cli = command(&topocomm_bin());
        cli.args(
            "run allgather --nodes 4 --topology ring --size 1KiB --ts 200us --th 20us --tw 10ns --iterations 2 --warmup 1"
                .split_whitespace(),
        )
        .args(verbose.then_some("--verbose"))
        .arg("--logs")
        .arg(scratch.path.join("logs"));
        run_bounded(cli, &scratch, "text", PATIENCE)
    };
    let full = text_run(true);
    assert!(full.status.success(), "{full:?}");
    assert!(full.stderr.contains("(--dilation auto): a step of 4 nodes sending at once on this cluster"), "{full:?}");
    let text = text_run(false);
    assert!(text.status.success(), "{text:?}");
    let line = text.stderr.lines().find(|line| line.contains("(--dilation auto): ")).expect("the dilation's line");
    assert!(!line.contains("a step of 4 nodes sending at once on this cluster (probe"), "{line}");
    assert!(line.ends_with("; --verbose says why") && line.chars().count() < 200, "one short line: {line}");
    assert!(
        text.stdout.contains("dilated ×") || text.stdout.contains("not dilated (--dilation auto)"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("of wall time"), "{}", text.stdout);
}

#[test]
fn a_served_cluster_dilates_its_runs_too() {
    let cluster = TestCluster::start("dilation-serve", 2);
    let json = cluster.run_ok("broadcast --topology ring --size 1KiB --iterations 2 --warmup 1 --ts 200us --th 20us");
    let auto = &json["dilation"]["auto"];
    assert_eq!(auto["probe"]["nodes"], 2, "the probe ran on the served cluster: {json:#}");
    assert!(json["dilation"]["factor"].as_f64().is_some_and(|k| k >= 1.0), "{json:#}");
    let given = cluster.run_ok("broadcast --topology ring --size 1KiB --iterations 2 --warmup 1 --ts 1ms --dilation 3");
    assert_eq!(given["dilation"]["factor"], 3.0, "{given:#}");
    let raw = cluster.run("broadcast --topology ring --size 1KiB --iterations 2 --dilation 3");
    assert!(!raw.status.success(), "raw links cannot be dilated: {raw:?}");
    assert!(raw.stderr.contains("never dilated"), "{raw:?}");
}
