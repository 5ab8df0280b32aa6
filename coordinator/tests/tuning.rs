//! `auto` by a tuning file, as a user meets it: a file made by hand steers `run` on a
//! local cluster and on a served one (through `serve --tuning`), `explain` and
//! `TOPOCOMM_TUNING`; a bad file is refused saying why; and `topocomm tune` measures a
//! local cluster of 4 nodes and writes a file that loads back and that `run` then
//! follows, rule by rule.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Scratch, TestCluster, command, read_text, run_bounded, topocomm_bin};
use serde_json::{Value, json};

const PATIENCE: Duration = Duration::from_secs(120);

/// A tuning file whose one rule scatters by the root's direct sends from 1 KiB on a
/// fully connected network (the built-in rule waits for 64 KiB).
fn linear_scatter_from_1_kib() -> Value {
    json!({
        "schema_version": 1,
        "rules": [{
            "collective": "scatter",
            "algorithm": "linear",
            "topologies": ["full"],
            "size": { "min": "1 KiB" },
            "why": "made by hand for a test"
        }]
    })
}

fn write(path: &Path, json: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(json).unwrap()).expect("writing a tuning file");
}

/// `topocomm <words>` with `--logs` in the scratch folder, to success; its stdout.
fn topocomm(scratch: &Scratch, label: &str, words: &[&str], env: Option<&Path>) -> String {
    let mut cli = command(&topocomm_bin());
    cli.args(words);
    if words[0] == "run" || words[0] == "tune" {
        cli.arg("--logs").arg(scratch.path.join("logs"));
    }
    if let Some(file) = env {
        cli.env("TOPOCOMM_TUNING", file);
    }
    let finished = run_bounded(cli, scratch, label, PATIENCE);
    assert!(finished.status.success(), "topocomm {words:?} failed:\n{}\n{}", finished.stderr, finished.stdout);
    finished.stdout
}

/// The algorithm a local run of `scatter` by `auto` reports.
fn scatter_by_auto(scratch: &Scratch, label: &str, extra: &[&str], env: Option<&Path>) -> String {
    let mut words = vec!["run", "scatter", "-t", "full", "-n", "4", "-a", "auto", "-s", "1KiB", "-i", "2", "--json"];
    words.extend(extra);
    let json: Value = serde_json::from_str(&topocomm(scratch, label, &words, env)).expect("run --json");
    assert_eq!(json["verified"], true, "{json:#}");
    json["algorithm"].as_str().expect("the algorithm").to_owned()
}

#[test]
fn a_file_made_by_hand_steers_auto_wherever_it_is_resolved() {
    let scratch = Scratch::new("tuning-by-hand");
    let file = scratch.path.join("tuning.json");
    write(&file, &linear_scatter_from_1_kib());
    let path = file.to_str().unwrap();
    assert_eq!(scatter_by_auto(&scratch, "built-in", &[], None), "hypercube");
    assert_eq!(scatter_by_auto(&scratch, "by-file", &["--tuning", path], None), "linear");
    assert_eq!(scatter_by_auto(&scratch, "by-env", &[], Some(&file)), "linear");
    // explain resolves auto the same way, without a cluster.
    let explain = |extra: &[&str]| -> Value {
        let mut words = vec!["explain", "scatter", "-t", "full", "-n", "4", "-a", "auto", "-s", "1KiB", "--json"];
        words.extend(extra);
        serde_json::from_str(&topocomm(&scratch, "explain", &words, None)).expect("explain --json")
    };
    assert_eq!(explain(&[])["algorithm"], "hypercube");
    assert_eq!(explain(&["--tuning", path])["algorithm"], "linear");
    // list names the file and prints it back.
    let listed = topocomm(&scratch, "list", &["list", "scatter", "--tuning", path], None);
    assert!(listed.contains(&format!("Rules from {path}")), "{listed}");
    assert!(listed.contains("│ 1 ┆ scatter    ┆ linear"), "{listed}");
    let printed: Value =
        serde_json::from_str(&topocomm(&scratch, "print", &["list", "--tuning-json", "--tuning", path], None)).unwrap();
    // What is in force: the file's rules, and the built-in memory factors it left out.
    let built_in: Value =
        serde_json::from_str(&topocomm(&scratch, "print-built-in", &["list", "--tuning-json"], None)).unwrap();
    let mut expected = linear_scatter_from_1_kib();
    expected["footprint"] = built_in["footprint"].clone();
    assert!(expected["footprint"]["in_flight"].is_array(), "{built_in}");
    assert_eq!(printed, expected);
}

#[test]
fn a_served_cluster_resolves_auto_by_its_own_file() {
    let scratch = Scratch::new("tuning-served-file");
    let file = scratch.path.join("tuning.json");
    write(&file, &linear_scatter_from_1_kib());
    let cluster = TestCluster::start_tuned("tuning-served", 4, &file);
    let json = cluster.run_ok("scatter --topology full --algorithm auto --size 1KiB --iterations 2");
    assert_eq!(json["algorithm"], "linear", "{json:#}");
    let json = cluster.run_ok("scatter --topology full --algorithm auto --size 512B --iterations 2");
    assert_eq!(json["algorithm"], "hypercube", "{json:#}");
    // tune measures the served cluster through its coordinator, as run does.
    let tuned = scratch.path.join("tuned.json");
    let words =
        ["tune", "--topology", "full", "--sizes", "64KiB", "--iterations", "1", "--warmup", "0", "--repeat", "1"];
    let mut tune = cluster.cli(&words);
    tune.arg("--output").arg(&tuned);
    let finished = run_bounded(tune, &scratch, "tune-served", PATIENCE);
    assert!(finished.status.success(), "tune failed:\n{}\n{}", finished.stderr, finished.stdout);
    assert!(!finished.stderr.contains("local cluster"), "{}", finished.stderr);
    let tuned: Value = serde_json::from_str(&read_text(&tuned)).expect("the file is JSON");
    // On 4 fully connected nodes: the all-reduce, scan and scatter rules, each measured at 64 KiB.
    let measured: Vec<&str> = tuned["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|rule| rule["nodes"] == json!({ "min": 4, "max": 4 }) && rule["topologies"] == json!(["full"]))
        .map(|rule| rule["collective"].as_str().unwrap())
        .collect();
    assert_eq!(measured, ["allreduce", "scan", "scatter"], "{tuned:#}");
}

/// A file whose only footprint factor is `in_flight` (times the largest input or output).
fn footprint_of(in_flight: &str) -> Value {
    json!({
        "schema_version": 1,
        "rules": [],
        "footprint": { "in_flight": [], "default_in_flight": in_flight }
    })
}

/// The coordinator and its daemons hold a run to one footprint, the file's: a file
/// whose factors no node can hold is refused before any node allocates, and one with
/// other factors than the built-in ones is admitted, each daemon told (and logging) the
/// file's figure for itself rather than its own table's.
#[test]
fn the_coordinator_and_its_nodes_hold_a_run_to_the_files_footprint() {
    let scratch = Scratch::new("tuning-footprint");
    let huge = scratch.path.join("huge.json");
    write(&huge, &footprint_of("1000000000"));
    let cluster = TestCluster::start_tuned("tuning-huge-footprint", 4, &huge);
    let refused = cluster.run("allreduce --topology ring --algorithm ring --size 64KiB --iterations 2");
    assert!(!refused.status.success(), "{}", refused.stdout);
    assert!(refused.stderr.contains("the run needs about"), "{}", refused.stderr);
    assert!((0..4).all(|node| !cluster.node_stderr(node).contains("run started")), "a node was asked");
    drop(cluster);

    let lean = scratch.path.join("lean.json");
    write(&lean, &footprint_of("0"));
    let cluster = TestCluster::start_tuned("tuning-lean-footprint", 4, &lean);
    cluster.run_ok("allreduce --topology ring --algorithm ring --size 64KiB --iterations 2 --warmup 1");
    // In and out, nothing in flight, 8 B of timing per iteration; the built-in factor
    // (twice in flight) would say 256 KiB + 16 B.
    let figure = format!("footprint_bytes={}", (128 << 10) + 16);
    for node in 0..4 {
        let log = cluster.node_stderr(node);
        assert!(log.contains(&figure) && log.contains("counted=true"), "node {node}: {log}");
    }
}

#[test]
fn a_bad_file_is_refused_before_anything_runs() {
    let scratch = Scratch::new("tuning-refused");
    let file = scratch.path.join("bad.json");
    let mut bad = linear_scatter_from_1_kib();
    bad["rules"][0]["algorithm"] = json!("pairwise");
    write(&file, &bad);
    for words in [
        vec!["run", "scatter", "-n", "4", "-a", "auto", "--tuning", file.to_str().unwrap()],
        vec!["list", "--tuning", file.to_str().unwrap()],
    ] {
        let mut cli = command(&topocomm_bin());
        cli.args(&words);
        let finished = run_bounded(cli, &scratch, "refused", PATIENCE);
        assert!(!finished.status.success(), "{words:?} ran");
        assert!(
            finished.stderr.contains(&format!("the tuning file {}", file.display()))
                && finished.stderr.contains("rule 1 (scatter → pairwise): scatter has no algorithm pairwise"),
            "{words:?}: {}",
            finished.stderr
        );
        assert!(!finished.stderr.contains("local cluster:"), "a cluster started: {}", finished.stderr);
    }
}

#[test]
fn tune_measures_a_local_cluster_and_run_follows_the_file_it_wrote() {
    let scratch = Scratch::new("tune");
    let file = scratch.path.join("tuned.json");
    let out = topocomm(
        &scratch,
        "tune",
        &[
            "tune",
            "--nodes",
            "4",
            "--topology",
            "hypercube",
            "--sizes",
            "64KiB,256KiB",
            "--iterations",
            "2",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--output",
            file.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.contains(&format!("wrote {}", file.display())), "{out}");
    // The file loads back: list reads it (and checks it), and prints it again unchanged.
    let printed = topocomm(&scratch, "reload", &["list", "--tuning-json", "--tuning", file.to_str().unwrap()], None);
    let tuned: Value = serde_json::from_str(&read_text(&file)).expect("the file is JSON");
    assert_eq!(serde_json::from_str::<Value>(&printed).unwrap(), tuned);
    // On 4 nodes of a hypercube three built-in rules apply: all-reduce, scan, all-to-all.
    // Each gets rules for exactly these 4 nodes ahead of the general ones.
    let rules = tuned["rules"].as_array().expect("rules");
    let measured: Vec<&Value> = rules.iter().filter(|rule| rule["nodes"] == json!({ "min": 4, "max": 4 })).collect();
    let collectives: std::collections::BTreeSet<&str> =
        measured.iter().map(|rule| rule["collective"].as_str().unwrap()).collect();
    assert_eq!(collectives, ["allreduce", "alltoall", "scan"].into_iter().collect(), "{tuned:#}");
    assert!(
        rules[..measured.len()].iter().all(|rule| rule["nodes"]["max"] == 4),
        "measured rules come first: {tuned:#}"
    );
    let built_in = topocomm_collectives::tuning::Tuning::built_in().rules.len();
    assert_eq!(rules.len(), measured.len() + built_in, "then the {built_in} built-in ones: {tuned:#}");
    for rule in &measured {
        let why = rule["why"].as_str().unwrap();
        assert!(why.starts_with("Measured by `topocomm tune` on 4 nodes of a hypercube: median µs"), "{why}");
        assert!(why.contains("64 KiB ") && why.contains("256 KiB "), "{why}");
        assert_eq!(rule["topologies"], json!(["hypercube"]));
        // What run --algorithm auto --tuning FILE picks at the rule's smallest size.
        let size = rule["size"]["min"].as_str().unwrap().replace(' ', "");
        let collective = rule["collective"].as_str().unwrap();
        let words = [
            "run",
            collective,
            "-t",
            "hypercube",
            "-n",
            "4",
            "-a",
            "auto",
            "-s",
            &size,
            "-i",
            "1",
            "--warmup",
            "0",
            "--json",
            "--tuning",
            file.to_str().unwrap(),
        ];
        let json: Value = serde_json::from_str(&topocomm(&scratch, "follow", &words, None)).unwrap();
        assert_eq!(json["verified"], true, "{json:#}");
        assert_eq!(json["algorithm"], rule["algorithm"], "{collective} at {size}: {json:#}\n{tuned:#}");
    }
}
