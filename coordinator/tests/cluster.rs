//! The real thing: `topocomm serve`, `topocomm-node` daemons and the `topocomm` CLI as
//! separate processes on 127.0.0.1, linked only along the topology's edges. These tests
//! re-wire a long-lived cluster through every topology, check dumped results by hand,
//! turn strangers away, survive a killed daemon, run a local cluster that leaves nothing
//! behind, and refuse bad input before anything starts.
//!
//! They need the `topocomm-node` binary next to `topocomm`: build the workspace first
//! (`cargo build --workspace`). `--nocapture` shows what each test saw.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{
    Background, Scratch, TestCluster, command, kill_and_reap, node_bin, poll, read_text, run_bounded, topocomm_bin,
    wait_until,
};
use serde_json::Value;
use topocomm_node::security::handshake::{HandshakeError, initiate};
use topocomm_proto::auth::{Key, Purpose};

/// Sizes and counts small enough for debug builds on two shared cores.
const SMALL: &str = "--size 16KiB --iterations 3 --warmup 1";

/// What every passing run's JSON must say.
fn assert_summary(json: &Value, collective: &str, algorithm: &str, topology: &str, nodes: u64) {
    let context = format!("{json:#}");
    assert_eq!(json["verified"], true, "{context}");
    assert_eq!(json["collective"], collective, "{context}");
    assert_eq!(json["algorithm"], algorithm, "{context}");
    assert_eq!(json["topology"], topology, "{context}");
    assert_eq!(json["nodes"], nodes, "{context}");
    let iterations = json["iterations"].as_u64().expect("iterations");
    assert_eq!(json["iteration_us"].as_array().map(Vec::len), Some(iterations as usize), "{context}");
    let time = |key: &str| json["time_us"][key].as_f64().expect("time_us entries");
    assert!(time("min") > 0.0, "{context}");
    assert!(time("min") <= time("median"), "{context}");
    assert!(time("median") <= time("max"), "{context}");
    assert!(time("min") <= time("mean"), "{context}");
    assert!(time("mean") <= time("max"), "{context}");
    assert!(frames_sent(json) > 0, "no frames sent: {context}");
    if nodes > 1 {
        let busiest = json["busiest_link"]["bytes"].as_u64();
        assert!(busiest > Some(0), "{context}");
    }
}

fn frames_sent(json: &Value) -> u64 {
    json["frames_sent"].as_u64().expect("frames_sent")
}

fn frames_forwarded(json: &Value) -> u64 {
    json["frames_forwarded"].as_u64().expect("frames_forwarded")
}

/// How many wirings the coordinator has completed (it logs one line per wiring).
fn wirings(cluster: &TestCluster) -> usize {
    cluster.serve_stderr().matches("every link is up").count()
}

#[test]
fn a_long_lived_cluster_rewires_through_every_topology() {
    let started = Instant::now();
    let mut cluster = TestCluster::start("topologies", 8);
    // (topology with its options, its name, the default algorithm, the dims it gets)
    let shapes: &[(&str, &str, &str, &[u64])] = &[
        ("ring", "ring", "ring", &[8]),
        ("mesh", "mesh", "mesh", &[2, 4]),
        ("torus", "torus", "mesh", &[2, 4]),
        ("mesh3d --dims 2x2x2", "mesh3d", "mesh", &[2, 2, 2]),
        ("torus3d", "torus3d", "mesh", &[2, 2, 2]),
        ("hypercube", "hypercube", "hypercube", &[2, 2, 2]),
        ("full", "full", "hypercube", &[8]),
    ];
    for &(shape, topology, algorithm, dims) in shapes {
        let before = wirings(&cluster);
        for (collective, root) in [("broadcast", 3), ("reduce", 0)] {
            let json = cluster.run_ok(&format!("{collective} --topology {shape} --root {root} {SMALL}"));
            assert_summary(&json, collective, algorithm, topology, 8);
            assert_eq!(json["root"], root, "{json:#}");
            assert_eq!(json["size_bytes"], 16 * 1024, "{json:#}");
            assert_eq!(json["dims"], serde_json::json!(dims), "{json:#}");
            if topology == "hypercube" {
                // Every step of the hypercube algorithms is between neighbours.
                assert_eq!(frames_forwarded(&json), 0, "{collective}: {json:#}");
            }
            eprintln!(
                "{collective} ({algorithm}) on {shape}: {} frames, {} forwarded, median {:.0} µs",
                frames_sent(&json),
                frames_forwarded(&json),
                json["time_us"]["median"].as_f64().unwrap_or_default()
            );
        }
        // One wiring per topology: the second collective reused the first's links.
        assert_eq!(
            wirings(&cluster),
            before + 1,
            "{shape}: expected exactly one new wiring\n{}",
            cluster.serve_stderr()
        );
    }

    // The hypercube schedule on a ring sends to non-neighbours: frames are forwarded.
    let json = cluster.run_ok(&format!("broadcast -t ring --algorithm hypercube {SMALL}"));
    assert_summary(&json, "broadcast", "hypercube", "ring", 8);
    assert!(frames_forwarded(&json) > 0, "{json:#}");
    // On a fully connected network even the linear algorithm never forwards.
    let json = cluster.run_ok(&format!("broadcast -t full --algorithm linear --root 6 {SMALL}"));
    assert_summary(&json, "broadcast", "linear", "full", 8);
    assert_eq!(frames_forwarded(&json), 0, "{json:#}");

    // Other element types and operators, with roots other than 0.
    for (shape, algorithm, dtype, op, root) in [
        ("torus", "mesh", "i32", "max", 5),
        ("mesh3d", "mesh", "f32", "prod", 7),
        ("ring", "ring", "i64", "min", 2),
        ("hypercube", "hypercube", "f64", "sum", 6),
    ] {
        let json = cluster
            .run_ok(&format!("reduce -t {shape} --dtype {dtype} --op {op} --root {root} --size 4KiB --iterations 2"));
        assert_summary(&json, "reduce", algorithm, shape, 8);
        assert_eq!(json["dtype"], dtype, "{json:#}");
        assert_eq!(json["op"], op, "{json:#}");
        assert_eq!(json["root"], root, "{json:#}");
    }

    // A request the cluster cannot run is refused with a reason and harms nothing: not
    // even the wiring in force (ring) is touched.
    cluster.run_ok("broadcast -t ring --size 4KiB --iterations 1");
    let before = wirings(&cluster);
    let refused = cluster.run("reduce -t ring --root 9");
    assert!(!refused.status.success(), "{refused:?}");
    assert!(refused.stderr.contains("root 9"), "{}", refused.stderr);
    let refused = cluster.run("reduce -t mesh --dims 3x3");
    assert!(!refused.status.success(), "{refused:?}");
    assert!(refused.stderr.contains("3x3"), "{}", refused.stderr);
    cluster.run_ok("reduce -t ring --size 4KiB --iterations 1");
    assert_eq!(wirings(&cluster), before, "a refused request cost the wiring");

    // The same eight daemons served it all, and the coordinator still knows each by name.
    assert!(cluster.all_alive(), "a process died:\n{}", cluster.serve_stderr());
    let members = cluster.wait_for_members(8, Duration::from_secs(10));
    for (index, member) in members.iter().enumerate() {
        assert_eq!(member.id, Some(index), "{members:?}");
        assert_eq!(member.name, TestCluster::node_name(index), "{members:?}");
        assert!(member.data_addr.starts_with("127.0.0.1:"), "{members:?}");
    }
    eprintln!("every topology in {:?}", started.elapsed());
}

/// Reads `dir/name`, failing with the folder's listing if it is missing.
fn read_dumped(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|error| {
        let listing: Vec<_> = std::fs::read_dir(dir)
            .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        panic!("{name} in {}: {error}; the folder holds {listing:?}", dir.display())
    })
}

fn dumped_run_json(dir: &Path) -> Value {
    let text = String::from_utf8(read_dumped(dir, "run.json")).expect("run.json is UTF-8");
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("run.json: {error}\n{text}"))
}

/// Runs `words --dump dir` on `cluster`; its JSON.
fn run_dumped(cluster: &TestCluster, words: &str, dir: &Path) -> Value {
    let mut run = cluster.run_command(words);
    run.arg("--dump").arg(dir);
    let json = run_bounded(run, &cluster.scratch, "dump", Duration::from_secs(60)).json();
    assert_eq!(json["verified"], true, "{json:#}");
    json
}

fn i64s(bytes: &[u8]) -> Vec<i64> {
    bytes.chunks_exact(8).map(|e| i64::from_le_bytes(e.try_into().expect("8 bytes"))).collect()
}

#[test]
fn dumps_hold_every_input_and_output_and_the_reduction_checks_out() {
    const NODES: usize = 4;
    const SIZE: usize = 8 * 1024;
    let cluster = TestCluster::start("dump", NODES);

    // Broadcast from node 1: every node ends with exactly the root's input.
    let dir = cluster.scratch.path.join("broadcast-dump");
    let words = "broadcast -t ring --root 1 --size 8KiB --dtype i64 --iterations 2";
    let json = run_dumped(&cluster, words, &dir);
    assert_summary(&json, "broadcast", "ring", "ring", NODES as u64);
    let message = read_dumped(&dir, "node-1.input");
    assert_eq!(message.len(), SIZE, "the root's input");
    for node in 0..NODES {
        read_dumped(&dir, &format!("node-{node}.input"));
        let output = read_dumped(&dir, &format!("node-{node}.output"));
        assert_eq!(output.len(), SIZE, "node {node}'s output");
        assert!(output == message, "node {node} did not end with the root's message");
    }
    let run = dumped_run_json(&dir);
    assert_eq!(run["verified"], true, "{run:#}");
    assert_eq!(run["collective"], "broadcast", "{run:#}");
    assert_eq!(run["root"], 1, "{run:#}");

    // Reduce (i64 sum) to node 2: the root's output is the wrapping element-wise sum of
    // every dumped input, computed here independently of the reference.
    let dir = cluster.scratch.path.join("reduce-dump");
    let words = "reduce -t ring --root 2 --size 8KiB --dtype i64 --op sum --iterations 2";
    let json = run_dumped(&cluster, words, &dir);
    assert_summary(&json, "reduce", "ring", "ring", NODES as u64);
    let mut sum = vec![0i64; SIZE / 8];
    let mut inputs = Vec::new();
    for node in 0..NODES {
        let input = read_dumped(&dir, &format!("node-{node}.input"));
        assert_eq!(input.len(), SIZE, "node {node}'s input");
        for (total, x) in sum.iter_mut().zip(i64s(&input)) {
            *total = total.wrapping_add(x);
        }
        let output = read_dumped(&dir, &format!("node-{node}.output"));
        let expected_len = if node == 2 { SIZE } else { 0 };
        assert_eq!(output.len(), expected_len, "node {node}'s output");
        inputs.push(input);
    }
    assert!(
        inputs.windows(2).all(|pair| pair[0] != pair[1]),
        "the nodes' inputs should differ, or the sum proves little"
    );
    let result = i64s(&read_dumped(&dir, "node-2.output"));
    let wrong = result.iter().zip(&sum).filter(|(a, b)| a != b).count();
    assert_eq!(wrong, 0, "{wrong} of {} elements at the root are not the sum of the inputs", sum.len());
    let run = dumped_run_json(&dir);
    assert_eq!(run["verified"], true, "{run:#}");
    assert_eq!(run["collective"], "reduce", "{run:#}");
    assert_eq!(run["root"], 2, "{run:#}");
}

/// Whether the peer closes `stream` (EOF or reset) within `patience`, reading and
/// discarding whatever it says first.
fn closed_by_peer(stream: &mut TcpStream, patience: Duration) -> Result<(), String> {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, TimedOut, WouldBlock};
    let deadline = Instant::now() + patience;
    let mut buffer = [0u8; 256];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("still open after {patience:?}"));
        }
        stream.set_read_timeout(Some(left)).expect("a read timeout");
        match stream.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(_) => continue,
            Err(error) if matches!(error.kind(), ConnectionReset | ConnectionAborted) => {
                return Ok(());
            }
            Err(error) if matches!(error.kind(), WouldBlock | TimedOut) => {
                return Err(format!("still open after {patience:?}"));
            }
            Err(error) => return Err(format!("unexpected error: {error}")),
        }
    }
}

#[test]
fn strangers_are_refused_and_the_cluster_carries_on() {
    let mut cluster = TestCluster::start("strangers", 4);
    cluster.run_ok("broadcast -t ring --size 4KiB --iterations 2");

    // (a) A daemon with the wrong token is refused by the coordinator and exits.
    let mut stranger = cluster.spawn_node(&node_bin(), "stranger", "not-the-token");
    let Some(status) = wait_until(&mut stranger, Instant::now() + Duration::from_secs(20)) else {
        kill_and_reap(&mut stranger);
        panic!("a node with a wrong token was still running after 20 s");
    };
    assert!(!status.success(), "a node with a wrong token exited 0");
    let said = read_text(&cluster.scratch.path.join("stranger.stderr"));
    assert!(said.contains("refused") && said.contains("token"), "{said}");
    eprintln!("the stranger daemon said: {}", said.trim());
    let members = cluster.wait_for_members(4, Duration::from_secs(10));
    assert!(members.iter().all(|m| m.name != "stranger"), "{members:?}");

    // (b) Raw connections to a node's data port: garbage, and well-formed hellos that
    // do not fit, are all turned away.
    let target = &members[1];
    let id = target.id.expect("the cluster has formed");
    let garbage: [&[u8]; 2] =
        [b"GET / HTTP/1.1\r\nHost: topocomm\r\n\r\n", &[0, 0, 0, 5, 0xff, 0xfe, 0xfd, 0xfc, 0xfb]];
    for garbage in garbage {
        let mut stream = TcpStream::connect(&target.data_addr).expect("connecting to a data port");
        stream.write_all(garbage).expect("writing garbage");
        if let Err(error) = closed_by_peer(&mut stream, Duration::from_secs(8)) {
            panic!("node {id} kept a connection that sent {garbage:?}: {error}");
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let hello = |token: &str, epoch: u64| {
        runtime.block_on(async {
            let stream = tokio::net::TcpStream::connect(&target.data_addr).await.expect("connecting to a data port");
            let purpose = Purpose::Link { epoch, from: 0, to: id };
            tokio::time::timeout(Duration::from_secs(10), initiate(stream, &Key::from_token(token), purpose, false))
                .await
                .expect("the node answered the handshake in time")
                .map(|_| ())
        })
    };
    // A wrong token is refused: before any proof, as no link is waiting, or else when
    // it cannot check the node's proof (it stops, proving nothing).
    match hello("not-the-token", 1) {
        Err(HandshakeError::Impostor | HandshakeError::Refused(_)) => {}
        other => panic!("a hello with a wrong token got {other:?}"),
    }
    // Even the right token does not open a link outside the current wiring...
    match hello(&cluster.token, u64::MAX) {
        Err(HandshakeError::Refused(reason)) => assert!(reason.contains("epoch"), "{reason}"),
        other => panic!("a hello from another epoch got {other:?}"),
    }
    // ...nor the link of the current wiring: that needs the key only its two ends got.
    let epoch = wirings(&cluster) as u64;
    match hello(&cluster.token, epoch) {
        Err(HandshakeError::Impostor | HandshakeError::Refused(_)) => {}
        other => panic!("the cluster token alone opened a wired link: {other:?}"),
    }
    let logged = poll(Duration::from_secs(5), || {
        let log = cluster.node_stderr(id);
        (common::refusals_logged(&log, "data links") >= 4).then_some(())
    });
    assert!(logged.is_some(), "node {id} did not log four refusals:\n{}", cluster.node_stderr(id));

    // No stranger reached an algorithm: the next runs pass on the same links.
    let before = wirings(&cluster);
    cluster.run_ok("broadcast -t ring --size 4KiB --iterations 2");
    cluster.run_ok("reduce -t ring --size 4KiB --iterations 2");
    assert_eq!(wirings(&cluster), before, "the strangers cost the wiring");
    assert!(cluster.all_alive(), "a daemon died");
}

#[test]
fn a_killed_daemon_fails_the_run_in_time_and_its_restart_runs_again() {
    const VICTIM: usize = 2;
    let mut cluster = TestCluster::start("kill", 4);
    // Wire the ring first so the long run starts at once.
    cluster.run_ok("broadcast -t ring --size 4KiB --iterations 1");
    let runs_before = cluster.node_stderr(VICTIM).matches("run started").count();

    // About 2.5 s per 400 iterations here when nothing disturbs it: far longer than
    // the 0.2 s it gets.
    let long = cluster.run_command("broadcast -t ring --size 4MiB --iterations 2000 --warmup 0");
    let long = Background::start(long, &cluster.scratch, "long-run");
    let started = poll(Duration::from_secs(20), || {
        let runs = cluster.node_stderr(VICTIM).matches("run started").count();
        (runs > runs_before).then_some(())
    });
    assert!(started.is_some(), "the long run never started on node {VICTIM}");
    std::thread::sleep(Duration::from_millis(200));
    let killed = Instant::now();
    cluster.kill_node(VICTIM);
    let failed = long.finish(Duration::from_secs(40));
    let took = killed.elapsed();
    eprintln!("{took:?} after the kill the run said: {}", failed.stderr.trim());
    assert!(!failed.status.success(), "the run passed although node {VICTIM} was killed:\n{}", failed.stdout);
    assert!(took < Duration::from_secs(20), "it took {took:?} to fail");
    assert!(failed.stderr.contains("error:"), "{}", failed.stderr);
    assert!(
        failed.stderr.contains(&format!("node {VICTIM}")) || failed.stderr.contains(&TestCluster::node_name(VICTIM)),
        "the error does not name node {VICTIM}:\n{}",
        failed.stderr
    );

    // The coordinator notices the death; a new daemon under the old name takes its place.
    cluster.wait_for_members(3, Duration::from_secs(10));
    cluster.restart_node(VICTIM);
    let members = cluster.wait_for_members(4, Duration::from_secs(20));
    assert_eq!(members[VICTIM].id, Some(VICTIM), "{members:?}");
    assert_eq!(members[VICTIM].name, TestCluster::node_name(VICTIM), "{members:?}");

    let restarted = Instant::now();
    let mut errors = Vec::new();
    let passed = poll(Duration::from_secs(30), || {
        let finished = cluster.run("broadcast -t ring --size 64KiB --iterations 3");
        if finished.status.success() {
            return Some(finished.json());
        }
        errors.push(finished.stderr);
        std::thread::sleep(Duration::from_millis(250));
        None
    });
    let Some(json) = passed else {
        panic!("no run passed within 30 s of the restart; errors: {errors:#?}");
    };
    eprintln!("a run passed {:?} after the restart, after {} failed attempts", restarted.elapsed(), errors.len());
    assert_summary(&json, "broadcast", "ring", "ring", 4);
    let json = cluster.run_ok("reduce -t ring --root 2 --size 64KiB --iterations 3");
    assert_summary(&json, "reduce", "ring", "ring", 4);
}

/// Processes whose command line (arguments joined by spaces) contains `needle`.
fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("reading /proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if pid != std::process::id() && cmdline.contains(needle) {
            found.push((pid, cmdline));
        }
    }
    found
}

#[test]
fn a_local_cluster_runs_and_leaves_nothing_behind() {
    let scratch = Scratch::new("local");
    let logs = scratch.path.join("logs");
    let mut local = command(&topocomm_bin());
    local.args("run broadcast --nodes 4 --topology ring --size 4KiB".split_whitespace());
    local.args("--iterations 3 --json --timeout 5s --logs".split_whitespace());
    local.arg(&logs).env("RUST_LOG", "debug");
    let finished = run_bounded(local, &scratch, "local", Duration::from_secs(60));
    let json = finished.json();
    assert_summary(&json, "broadcast", "ring", "ring", 4);
    assert_eq!(json["size_bytes"], 4096, "{json:#}");

    let address = finished
        .stderr
        .split("coordinator on ")
        .nth(1)
        .and_then(|rest| rest.split([',', ' ', '\n']).next())
        .unwrap_or_else(|| panic!("no coordinator address on stderr:\n{}", finished.stderr));
    assert!(address.starts_with("127.0.0.1:"), "{address}");
    // Arguments are NUL-separated, turned into spaces: match the address as a whole one.
    let left = processes_mentioning(&format!(" {address} "));
    assert!(left.is_empty(), "processes left behind: {left:?}");
    for node in 0..4 {
        let log = logs.join(format!("node-{node}.log"));
        assert!(log.is_file(), "{} is missing", log.display());
        // Plain text, so that `grep field=value` finds the message flow.
        let text = read_text(&log);
        assert!(!text.contains('\u{1b}'), "{} has terminal colour codes", log.display());
        assert!(text.contains(" deliver ") && text.contains("bytes=4096"), "no deliver line in {}", log.display());
    }
}

#[test]
fn bad_input_is_refused_clearly_before_anything_starts() {
    let scratch = Scratch::new("bad-input");
    let cases: &[(&str, &[&str])] = &[
        ("--nodes 6 --topology hypercube", &["power-of-two", "6"]),
        ("--size 10 --dtype f64", &["whole number", "f64", "8 or 16"]),
        ("--topology donut", &["donut", "ring", "mesh", "torus", "mesh3d", "torus3d", "hypercube", "full"]),
        ("--dims 3x3 --nodes 8 --topology mesh", &["3x3", "8 nodes", "2x4"]),
        ("--root 9 --nodes 8", &["root 9", "8-node"]),
    ];
    for (index, &(args, needles)) in cases.iter().enumerate() {
        let logs = scratch.path.join(format!("logs-{index}"));
        let mut bad = command(&topocomm_bin());
        bad.args(["run", "broadcast"]).args(args.split_whitespace());
        bad.args(["--iterations", "1", "--logs"]).arg(&logs);
        let finished = run_bounded(bad, &scratch, "bad", Duration::from_secs(20));
        let said = &finished.stderr;
        assert!(!finished.status.success(), "{args} was accepted: {finished:?}");
        assert!(finished.elapsed < Duration::from_secs(5), "{args} took {:?} to be refused", finished.elapsed);
        assert!(said.contains("error"), "{args}: {said}");
        for needle in needles {
            assert!(said.contains(needle), "{args}: {needle:?} is not in: {said}");
        }
        assert!(!said.contains("panicked"), "{args}: {said}");
        assert!(finished.stdout.is_empty(), "{args}: {}", finished.stdout);
        assert!(!said.contains("local cluster"), "{args} started a cluster");
        assert!(!logs.exists(), "{args} got as far as creating the log folder");
    }
}
