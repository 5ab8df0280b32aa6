//! What a user meets around a run, with the real binaries on 127.0.0.1: a shell that
//! exported a served cluster's variables, a reader that closes standard output early, a
//! size beyond what a link carries, an output path that cannot be written, the node
//! logs' folder, and a report that names every option that changed the run. Each test
//! failed before the change it holds (the module docs of `control/local.rs` and
//! `render/output.rs` say what was decided).

mod common;

use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use common::{
    Finished, Scratch, TestCluster, command, kill_and_reap, read_text, run_bounded, topocomm_bin, wait_until,
};
use serde_json::Value;

/// The longest any one command here may take (a debug build on two shared cores).
const PATIENCE: Duration = Duration::from_secs(90);

/// A small local run: two ring nodes, one timed iteration, a short deadline.
const SMALL_LOCAL: &str = "--nodes 2 --topology ring --size 1KiB --iterations 1 --warmup 0 --timeout 10s";

/// `topocomm <words>` (split at whitespace), the steering environment cleared.
fn topocomm(words: &str) -> Command {
    let mut cli = command(&topocomm_bin());
    cli.args(words.split_whitespace());
    cli
}

/// Runs `cli` with its standard output a pipe whose reading end is closed before it
/// starts (`topocomm ... | true` where `true` has already gone): its exit status and
/// standard error.
fn with_closed_stdout(mut cli: Command, scratch: &Scratch, label: &str) -> (ExitStatus, String) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let stderr = scratch.file(label, "stderr");
    cli.stdout(writer).stderr(std::fs::File::create(&stderr).expect("a stderr file"));
    let mut child = cli.spawn().expect("starting topocomm");
    // The parent's copy of the writing end went with `cli`'s stdout; only the child holds it.
    drop(cli);
    let status = wait_until(&mut child, Instant::now() + PATIENCE);
    let Some(status) = status else {
        kill_and_reap(&mut child);
        panic!("{label} did not finish within {PATIENCE:?}; stderr:\n{}", read_text(&stderr));
    };
    (status, read_text(&stderr))
}

/// Asserts that a refused command failed at once, said `needles` on stderr, printed
/// nothing and started nothing (`logs` was never made).
fn assert_refused_up_front(finished: &Finished, words: &str, needles: &[&str], logs: &Path) {
    let said = &finished.stderr;
    assert_eq!(finished.status.code(), Some(1), "{words}: {finished:?}");
    assert!(finished.elapsed < Duration::from_secs(20), "{words} took {:?} to be refused", finished.elapsed);
    for needle in needles {
        assert!(said.contains(needle), "{words}: {needle:?} is not in: {said}");
    }
    assert!(!said.contains("panicked") && !said.contains("local cluster:"), "{words}: {said}");
    assert!(finished.stdout.is_empty(), "{words}: {}", finished.stdout);
    assert!(!logs.exists(), "{words} got as far as making its log folder");
}

/// A shell set up for a served cluster (the README's `TOPOCOMM_TOKEN_FILE`, a token, an
/// advertised address) must not reach the local cluster's children: before, they read
/// the exported file instead of the local token, and the run waited out its deadline
/// with "0 of 2 nodes connected".
#[test]
fn a_local_cluster_ignores_a_served_clusters_environment() {
    let scratch = Scratch::new("served-env");
    let token_file = scratch.path.join("served.token");
    std::fs::write(&token_file, "the-served-clusters-token-not-this-one\n").unwrap();
    let mut cli = topocomm(&format!("run broadcast {SMALL_LOCAL} --json"));
    cli.arg("--logs").arg(scratch.path.join("logs"));
    cli.env("TOPOCOMM_TOKEN_FILE", &token_file)
        .env("TOPOCOMM_TOKEN", "another-served-token")
        .env("TOPOCOMM_TOKEN_SOMETHING_ELSE", "x")
        .env("TOPOCOMM_ADVERTISE", "192.0.2.1:9")
        .env("TOPOCOMM_NODE_NAME", "not-a-local-name")
        .env("TOPOCOMM_LISTEN", "192.0.2.1:0");
    let finished = run_bounded(cli, &scratch, "run", PATIENCE);
    let json = finished.json();
    assert_eq!(json["verified"], true, "{json:#}");
    assert!(finished.elapsed < Duration::from_secs(30), "took {:?}: {}", finished.elapsed, finished.stderr);
}

/// `serve --write-token F` makes a token for the cluster: with one given already (flag,
/// file or environment) it used to serve the given one silently and never write F.
#[test]
fn serve_refuses_to_write_a_token_when_one_was_given() {
    let scratch = Scratch::new("write-token");
    let given = scratch.path.join("given.token");
    std::fs::write(&given, "a-token-given-in-a-file-of-enough-length\n").unwrap();
    let written = scratch.path.join("written.token");
    let cases: [(&str, &str, &str); 3] = [
        ("TOPOCOMM_TOKEN", "a-token-given-in-the-environment", ""),
        ("TOPOCOMM_TOKEN_FILE", given.to_str().unwrap(), ""),
        ("", "", "--token a-token-given-on-the-command-line"),
    ];
    for (variable, value, flag) in cases {
        let mut serve = topocomm(&format!("serve --nodes 1 --listen 127.0.0.1:0 {flag}"));
        serve.arg("--write-token").arg(&written);
        if !variable.is_empty() {
            serve.env(variable, value);
        }
        let finished = run_bounded(serve, &scratch, "serve", Duration::from_secs(20));
        let said = &finished.stderr;
        assert_eq!(finished.status.code(), Some(1), "{variable}{flag}: {finished:?}");
        assert!(said.contains("--write-token") && said.contains("a token was given already"), "{said}");
        assert!(!said.contains("coordinator on"), "{variable}{flag} served: {said}");
        assert!(!written.exists(), "{variable}{flag}: the token file was written");
    }
}

/// `topocomm status | true`, `topocomm list | head -1`: a reader that leaves before the
/// output is written. Before, `status` (and `run`, `simulate`, ...) panicked with "failed
/// printing to stdout: Broken pipe" and exit status 101.
#[test]
fn every_command_exits_quietly_on_a_closed_stdout() {
    let scratch = Scratch::new("closed-stdout");
    let cluster = TestCluster::start("closed-stdout-served", 1);
    let mut commands: Vec<(String, Command)> = [
        "--help",
        "list",
        "list --markdown",
        "topology --topology torus --nodes 9",
        "topology --topology ring --nodes 4 --json",
        "explain allgather --topology hypercube --nodes 8 --size 1KiB",
        "explain scan --nodes 4 --json",
        "simulate broadcast --topology ring --nodes 8 --size 1KiB",
        "simulate allreduce --nodes 8 --json",
    ]
    .into_iter()
    .map(|words| (words.to_owned(), topocomm(words)))
    .collect();
    let logs = scratch.path.join("logs");
    for words in [format!("run broadcast {SMALL_LOCAL}"), format!("run broadcast {SMALL_LOCAL} --json")] {
        let mut run = topocomm(&words);
        run.arg("--logs").arg(&logs);
        commands.push((words, run));
    }
    commands.push(("status (served)".to_owned(), cluster.cli(&["status"])));
    commands.push(("status --json (served)".to_owned(), cluster.cli(&["status", "--json"])));
    commands.push(("run --json (served)".to_owned(), cluster.run_command("broadcast --size 1KiB --iterations 1")));
    for (words, cli) in commands {
        let (status, stderr) = with_closed_stdout(cli, &scratch, "closed");
        assert!(!stderr.contains("panicked"), "topocomm {words} panicked on a closed stdout:\n{stderr}");
        assert_eq!(status.code(), Some(0), "topocomm {words} on a closed stdout: {status}\n{stderr}");
        assert!(!stderr.contains("error"), "topocomm {words} on a closed stdout said:\n{stderr}");
    }
}

/// A message longer than a link's largest frame used to start the cluster, wait out
/// the deadline and end with an internal "frame size too big"; it is refused before any
/// process starts, naming the limit and a size that fits.
#[test]
fn a_message_longer_than_a_link_carries_is_refused_before_anything_starts() {
    let scratch = Scratch::new("longest-message");
    let cases: [(&str, &[&str]); 3] = [
        // A broadcast sends the whole vector.
        (
            "run broadcast --nodes 2 --size 264MiB",
            &["a message of 264.0 MiB (node 0 to node 1)", "longer than a link carries", "268435415 bytes"],
        ),
        // Emulated links take recursive doubling's vector whole.
        (
            "run allreduce --nodes 2 --size 300MiB --ts 1us --algorithm recursive-doubling",
            &["allreduce by recursive-doubling of 300.0 MiB per node on 2 nodes", "longer than a link carries"],
        ),
        // The issue's command: this machine's memory or a link's frame refuses it, by name.
        ("run allreduce --nodes 8 --size 1GiB", &["error: the run needs about"]),
    ];
    for (index, (words, needles)) in cases.into_iter().enumerate() {
        let logs = scratch.path.join(format!("logs-{index}"));
        let mut cli = topocomm(words);
        cli.arg("--logs").arg(&logs);
        let finished = run_bounded(cli, &scratch, "too-long", PATIENCE);
        if index == 2 && finished.stderr.contains("longer than a link carries") {
            // A machine with the memory for 8 x 1 GiB reaches the frame's limit instead.
            assert_refused_up_front(&finished, words, &["longer than a link carries", "--size"], &logs);
            continue;
        }
        assert_refused_up_front(&finished, words, needles, &logs);
    }
}

/// `--trace` to a folder that does not exist (a read-only root in a container) used to
/// be found out after the run, and the results were lost; every output path is checked
/// before anything starts.
#[test]
fn an_output_that_cannot_be_written_is_refused_before_the_run() {
    let scratch = Scratch::new("unwritable");
    let a_file = scratch.path.join("a-file");
    std::fs::write(&a_file, "not a folder").unwrap();
    let missing = scratch.path.join("no-such-folder");
    let cases = [
        ("run", "--trace", missing.join("t.json")),
        ("run", "--diagram", missing.join("d.svg")),
        ("run", "--dump", a_file.join("dump")),
        ("sweep", "--csv", missing.join("s.csv")),
        ("sweep", "--json", missing.join("s.json")),
    ];
    for (index, (subcommand, option, path)) in cases.into_iter().enumerate() {
        let logs = scratch.path.join(format!("logs-{index}"));
        let words = match subcommand {
            "run" => format!("run broadcast {SMALL_LOCAL}"),
            _ => "sweep broadcast --nodes 2 --topology ring --sizes 1KiB --iterations 1".to_owned(),
        };
        let mut cli = topocomm(&words);
        cli.arg(option).arg(&path).arg("--logs").arg(&logs);
        let finished = run_bounded(cli, &scratch, "unwritable", PATIENCE);
        let shown = format!("{words} {option} {}", path.display());
        assert_refused_up_front(&finished, &shown, &[option, "cannot write there", "nothing was run"], &logs);
    }
}

/// The node logs' folder named on standard error: `node logs in FOLDER/node-*.log`.
fn named_log_folder(stderr: &str) -> String {
    let rest = stderr.split("node logs in ").nth(1).unwrap_or_else(|| panic!("no log folder named:\n{stderr}"));
    rest.split("/node-*.log").next().unwrap().to_owned()
}

/// A local run without `--logs` logs to a folder of its own inside this user's, and
/// says which; before, every run of every user wrote to one shared topocomm-logs folder,
/// which a second user could not write to and where runs mixed.
#[test]
fn a_local_run_logs_to_a_folder_of_its_own_in_this_users() {
    use std::os::unix::fs::PermissionsExt;

    let scratch = Scratch::new("log-folders");
    let temp = scratch.path.join("tmp");
    std::fs::create_dir_all(&temp).unwrap();
    let local_run = |xdg: Option<&Path>| {
        let mut cli = topocomm(&format!("run broadcast {SMALL_LOCAL}"));
        cli.env("TMPDIR", &temp).env("USER", "alice");
        match xdg {
            Some(dir) => cli.env("XDG_RUNTIME_DIR", dir),
            None => cli.env_remove("XDG_RUNTIME_DIR"),
        };
        run_bounded(cli, &scratch, "logs", PATIENCE)
    };
    let mut folders = Vec::new();
    for _ in 0..2 {
        let finished = local_run(None);
        assert!(finished.status.success(), "{finished:?}");
        let folder = named_log_folder(&finished.stderr);
        let user = temp.join("topocomm-alice");
        assert!(folder.starts_with(&format!("{}/run-", user.display())), "{folder}");
        assert!(Path::new(&folder).join("node-0.log").is_file() && Path::new(&folder).join("node-1.log").is_file());
        let mode = std::fs::metadata(&user).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is mode {mode:o}", user.display());
        folders.push(folder);
    }
    assert_ne!(folders[0], folders[1], "two runs logged to one folder");
    // With a runtime folder of the user's own, logs go there.
    let runtime = scratch.path.join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let finished = local_run(Some(&runtime));
    assert!(finished.status.success(), "{finished:?}");
    assert!(named_log_folder(&finished.stderr).starts_with(&format!("{}/topocomm/run-", runtime.display())));
    // A user folder that others may write to is not used.
    let shared = temp.join("topocomm-alice");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let finished = local_run(None);
    assert_eq!(finished.status.code(), Some(1), "{finished:?}");
    assert!(finished.stderr.contains("may be written by others") && finished.stderr.contains("--logs"), "{finished:?}");
}

/// Runs `topocomm <words> --json` on a local cluster (logs in the scratch folder): its JSON.
fn local_json(scratch: &Scratch, words: &str) -> (Value, Finished) {
    let mut cli = topocomm(&format!("{words} --json"));
    cli.arg("--logs").arg(scratch.path.join("logs"));
    let finished = run_bounded(cli, scratch, "report", PATIENCE);
    (finished.json(), finished)
}

/// Options that change a run are in its JSON and its headline: before, `--exclusive` and
/// `--encrypt` appeared nowhere, and a barrier reported 64 KiB of data.
#[test]
fn every_option_that_changes_a_run_is_in_its_report() {
    let scratch = Scratch::new("report-options");
    let (json, _) = local_json(&scratch, &format!("run scan --exclusive --encrypt --seed 7 {SMALL_LOCAL}"));
    assert_eq!(json["verified"], true, "{json:#}");
    assert_eq!((&json["exclusive"], &json["encrypted"], &json["seed"]), (&true.into(), &true.into(), &7.into()));
    assert_eq!(json["timeout_ms"], 10_000, "{json:#}");
    let (json, _) = local_json(&scratch, &format!("run shift --shift 1 {SMALL_LOCAL}"));
    assert_eq!((&json["shift"], &json["exclusive"], &json["encrypted"]), (&1.into(), &false.into(), &false.into()));
    let (json, _) = local_json(&scratch, &format!("run barrier {SMALL_LOCAL}"));
    assert_eq!(json["size_bytes"], 0, "a barrier moves no data: {json:#}");
    // The headline and the table say the same.
    let mut cli = topocomm(&format!("run scan --exclusive --encrypt {SMALL_LOCAL}"));
    cli.arg("--logs").arg(scratch.path.join("logs"));
    let text = run_bounded(cli, &scratch, "text", PATIENCE);
    assert!(text.status.success(), "{text:?}");
    let headline = text.stdout.lines().next().unwrap_or_default();
    assert!(headline.contains(", exclusive,") && headline.ends_with("every link encrypted"), "{headline}");
    let mut cli = topocomm(&format!("run barrier {SMALL_LOCAL}"));
    cli.arg("--logs").arg(scratch.path.join("logs"));
    let text = run_bounded(cli, &scratch, "barrier", PATIENCE);
    assert!(text.status.success(), "{text:?}");
    assert!(text.stdout.contains("no data") && !text.stdout.contains("64.0 KiB"), "{}", text.stdout);
    assert!(text.stdout.contains("┆ 0 B "), "{}", text.stdout);
}

/// The wall time printed under the table, parsed back to seconds: `12 ms`, `2.8 s`.
fn printed_wall_s(stdout: &str) -> f64 {
    let line =
        stdout.lines().find_map(|line| line.strip_prefix("# wall time of the runs: ")).expect("a wall-time line");
    match line.split_once(' ') {
        Some((ms, "ms")) => ms.parse::<f64>().expect("a number of ms") / 1e3,
        Some((s, "s")) => s.parse::<f64>().expect("a number of s"),
        _ => panic!("a wall time in ms or s: {line}"),
    }
}

/// `sweep` printed "# wall time of the runs: 0 ms" for a 2.8 s sweep: the total summed
/// each point's wall time from its dilation figures, which raw links have none of. It is
/// now each run's own, at least what its timed iterations took and at most the command.
#[test]
fn a_sweep_prints_the_wall_time_its_runs_took() {
    let scratch = Scratch::new("sweep-wall-time");
    let json = scratch.path.join("sweep.json");
    let mut sweep = topocomm(
        "sweep allreduce --nodes 2 --topology ring --sizes 1KiB,256KiB --iterations 20 --warmup 1 --timeout 10s",
    );
    sweep.arg("--logs").arg(scratch.path.join("logs")).arg("--json").arg(&json);
    let finished = run_bounded(sweep, &scratch, "sweep", PATIENCE);
    assert!(finished.status.success(), "the sweep failed:\n{}", finished.stderr);
    let points: Value = serde_json::from_str(&read_text(&json)).expect("the sweep's JSON");
    let points = points["points"].as_array().expect("points");
    assert_eq!(points.len(), 2, "{points:#?}");
    let mut timed_s = 0.0;
    for point in points {
        let (wall_s, median_us) = (point["wall_s"].as_f64().unwrap(), point["median_us"].as_f64().unwrap());
        let iterations = point["iterations"].as_f64().unwrap();
        assert!(wall_s >= median_us * iterations / 1e6, "a point's wall time under its iterations: {point:#}");
        timed_s += median_us * iterations / 1e6;
    }
    let printed = printed_wall_s(&finished.stdout);
    assert!(printed > 0.0, "{}", finished.stdout);
    // Printed to the ms (or a tenth of a second past one second).
    assert!(printed + 0.05 >= timed_s, "printed {printed} s, the timed iterations took {timed_s} s");
    assert!(
        printed <= finished.elapsed.as_secs_f64(),
        "printed {printed} s, longer than the command's {:?}",
        finished.elapsed
    );
}

/// `sweep --schedule FILE --coordinator ADDR` skipped every size: on a served cluster
/// each size was checked on `usize::MAX` nodes, which no program is written for (and
/// whose p blocks no all-gather holds). The sizes are now checked on the served
/// cluster's own nodes, and the program runs at a size that cuts into its chunks.
#[test]
fn a_schedule_sweeps_on_a_served_cluster() {
    let cluster = TestCluster::start("sweep-schedule-served", 8);
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("../node/tests/schedules/ring_allgather_2ch_p8.xml");
    let mut sweep = cluster.cli(&["sweep", "allgather", "--topology", "ring", "--sizes", "768B", "--iterations", "2"]);
    sweep.arg("--schedule").arg(&program).args(["--warmup", "0", "--timeout", "10s"]);
    let scratch = Scratch::new("sweep-schedule-served-cli");
    let finished = run_bounded(sweep, &scratch, "sweep", PATIENCE);
    assert!(finished.status.success(), "the sweep failed:\n{}", finished.stderr);
    assert!(!finished.stderr.contains("skipping"), "a size was skipped:\n{}", finished.stderr);
    let rows: Vec<&str> = finished.stdout.lines().filter(|line| line.starts_with("768 ")).collect();
    assert_eq!(rows.len(), 1, "a row for the size:\n{}", finished.stdout);
}

/// Item 11 of the switched networks: an odd K, a dragonfly short of a dimension, more
/// ranks than hosts, a class no link has, a network file whose graph falls apart or whose
/// SimGrid parameters SimGrid would refuse: one clear line each, and nothing starts.
#[test]
fn a_switched_network_that_cannot_be_built_is_refused_before_anything_starts() {
    let scratch = Scratch::new("switched-refusals");
    let disconnected = scratch.path.join("apart.json");
    std::fs::write(
        &disconnected,
        r#"{"schema_version": 1, "endpoints": ["a", "b", "c"], "switches": [],
            "classes": [{"name": "wire"}], "links": [{"a": "a", "b": "b", "class": "wire"}]}"#,
    )
    .expect("a network file");
    let bad_tree = scratch.path.join("bad-tree.xml");
    std::fs::write(
        &bad_tree,
        r#"<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="t" prefix="n-" suffix="" radical="0-15" speed="1Gf" bw="125MBps" lat="50us"
           topology="FAT_TREE" topo_parameters="2;4,4;1,2"/>
</platform>"#,
    )
    .expect("a platform file");
    let cases: Vec<(String, Vec<&str>)> = vec![
        ("run allreduce -t fat-tree --dims 3 -n 4".into(), vec!["a fat-tree needs an even K of at least 2", "K = 3"]),
        ("run allreduce -t dragonfly --dims 2x2 -n 4".into(), vec!["a dragonfly takes three dims, AxPxH"]),
        ("run allreduce -t fat-tree --dims 4 -n 17".into(), vec!["17 ranks do not fit on the 16 hosts"]),
        ("run allreduce -t cluster -n 8".into(), vec!["a cluster takes two dims, MxC"]),
        (
            "explain allreduce -t cluster --dims 2x4 -n 8 --class core:ts=1us".into(),
            vec!["no link of this network has class `core` (its classes: intra, inter)"],
        ),
        (format!("topology --network {}", disconnected.display()), vec!["apart.json"]),
        (format!("simulate allreduce --network {}", bad_tree.display()), vec!["bad-tree.xml"]),
        // A route policy of another topology (issue 46, item 2).
        (
            "run allreduce -t dragonfly --dims 2x2x1 -n 12 --routes ecmp".into(),
            vec!["--routes ecmp applies to fat-tree; a dragonfly routes minimal or valiant[:SEED]"],
        ),
        (
            "simulate allreduce -t torus,fat-tree -n 16 --routes ecmp".into(),
            vec!["--routes ecmp applies to fat-tree; a torus routes dimension-order only"],
        ),
        (
            "explain allreduce -t fat-tree -n 16 --routes valiant:2".into(),
            vec!["--routes valiant:2 applies to dragonfly; a fat-tree routes d-mod-k or ecmp"],
        ),
        ("topology -t cluster --dims 2x4 -n 8 --routes minimal".into(), vec!["a cluster routes shortest-path only"]),
    ];
    for (index, (words, needles)) in cases.iter().enumerate() {
        let logs = scratch.path.join(format!("logs-{index}"));
        let mut cli = topocomm(words);
        if words.starts_with("run ") {
            cli.arg("--logs").arg(&logs);
        }
        let finished = run_bounded(cli, &scratch, "refused", PATIENCE);
        assert_refused_up_front(&finished, words, needles, &logs);
        let lines: Vec<&str> = finished.stderr.lines().filter(|line| !line.trim().is_empty()).collect();
        assert!(lines.len() <= 3, "{words}: more than a clear line or two:\n{}", finished.stderr);
    }
    // A policy of no name: refused as clap refuses a bad value, with the names there are.
    for words in ["run allreduce -t fat-tree -n 16 --routes adaptive", "simulate allreduce --routes valiant:x"] {
        let finished = run_bounded(topocomm(words), &scratch, "refused", PATIENCE);
        assert_eq!(finished.status.code(), Some(2), "{words}: {finished:?}");
        assert!(finished.stderr.contains("unknown route policy"), "{words}: {}", finished.stderr);
        assert!(finished.stderr.contains("d-mod-k, ecmp, minimal, valiant[:SEED]"), "{words}: {}", finished.stderr);
        assert!(!finished.stderr.contains("local cluster:") && finished.stdout.is_empty(), "{words}");
    }
}

/// `--placement`: an unknown one, a seed that is no number, and a placement other than
/// linear on a direct network (whose vertices are its ranks): one clear line each, on
/// every command that takes a topology, and nothing starts.
#[test]
fn a_placement_that_cannot_be_made_is_refused_in_one_line() {
    let scratch = Scratch::new("placement-refusals");
    let unknown = "unknown placement \"spread\": linear, round-robin or random[:SEED] (default seed 1)";
    let bad_seed = "the seed of random:-3 is not a whole number from 0 to 18446744073709551615";
    let direct = "a ring places rank r on node r: its vertices are its ranks, so --placement round-robin applies to \
                  switched networks only";
    let cases = [
        ("run allreduce -t cluster --dims 2x2 -n 4 --placement spread", unknown),
        ("simulate allreduce -t cluster --dims 2x2 -n 4 --placement spread", unknown),
        ("topology -t cluster --dims 2x2 -n 4 --placement random:-3", bad_seed),
        ("sweep allreduce -t cluster --dims 2x2 -n 4 --placement random:-3", bad_seed),
        ("explain allreduce -t cluster --dims 2x2 -n 4 --placement random:x1", "the seed of random:x1"),
        ("run allreduce -t ring -n 4 --placement round-robin", direct),
        ("simulate allreduce -t ring -n 4 --placement round-robin", direct),
        ("explain allreduce -t ring -n 4 --placement round-robin", direct),
        ("topology -t ring -n 4 --placement round-robin", direct),
    ];
    for (index, (words, needle)) in cases.iter().enumerate() {
        let logs = scratch.path.join(format!("logs-{index}"));
        let mut cli = topocomm(words);
        if words.starts_with("run ") || words.starts_with("sweep ") {
            cli.arg("--logs").arg(&logs);
        }
        let finished = run_bounded(cli, &scratch, "refused", PATIENCE);
        assert!(!finished.status.success(), "{words}: {finished:?}");
        assert!(finished.stderr.contains(needle), "{words}: {needle:?} is not in: {}", finished.stderr);
        assert!(!finished.stderr.contains("panicked") && finished.stdout.is_empty(), "{words}: {finished:?}");
        assert!(!logs.exists(), "{words} got as far as making its log folder");
        // The one line, and clap's pointer to --help under it where clap refused.
        let lines: Vec<&str> = finished.stderr.lines().filter(|line| !line.trim().is_empty()).collect();
        assert!(lines.len() <= 2, "{words}: more than a clear line:\n{}", finished.stderr);
    }
}

/// Every command that takes a topology names its placement, in its text and its JSON:
/// the topology's description (`topology`, `explain`'s header, `simulate`'s table) and
/// `"placement"`.
#[test]
fn every_command_names_the_placement_in_its_text_and_json() {
    let scratch = Scratch::new("placement-named");
    let shape = "-t cluster --dims 2x4 -n 8";
    let cases = [
        (format!("topology {shape} --placement round-robin"), "(8 nodes placed round-robin, 3 switches)"),
        (format!("explain allreduce {shape} --placement random:5"), "(8 nodes placed random:5, 3 switches)"),
        (format!("simulate allreduce {shape} -a multi-leader --placement random"), "cluster placed random:1"),
    ];
    for (words, needle) in &cases {
        let text = run_bounded(topocomm(words), &scratch, "text", PATIENCE);
        assert!(text.status.success(), "{words}: {text:?}");
        assert!(text.stdout.contains(needle), "{words}: {needle:?} is not in:\n{}", text.stdout);
        let json = run_bounded(topocomm(&format!("{words} --json")), &scratch, "json", PATIENCE).json();
        let placement = needle.split("placed ").nth(1).and_then(|rest| rest.split([',', ' ']).next()).unwrap();
        assert_eq!(json["placement"], placement, "{words}: {json:#}");
    }
    let linear = run_bounded(topocomm(&format!("topology {shape} --json")), &scratch, "linear", PATIENCE).json();
    assert_eq!(linear["placement"], "linear");
}
