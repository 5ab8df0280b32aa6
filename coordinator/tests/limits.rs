//! Hostile input against the real binaries: sizes, counts and timeouts past what a run,
//! a node or this machine can take are refused with one line naming the limit, before
//! a local cluster starts any process; and the daemons of a served cluster outlive a
//! run too large for them.
//!
//! The served-cluster test needs the `topocomm-node` binary next to `topocomm`: build
//! the workspace first (`cargo build --workspace`).

mod common;

use std::time::Duration;

use common::{Scratch, TestCluster, command, run_bounded, topocomm_bin};

/// Runs `topocomm run allreduce <args>` on a local cluster logging to a fresh folder and
/// checks that it was refused: a failure, exactly one error line holding every one of
/// `needles`, no panic, no output, and no cluster (its log folder never created).
fn assert_refused(args: &str, needles: &[&str]) {
    let scratch = Scratch::new("refused");
    let logs = scratch.path.join("logs");
    let mut bad = command(&topocomm_bin());
    bad.args(["run", "allreduce"]).args(args.split_whitespace()).arg("--logs").arg(&logs);
    let finished = run_bounded(bad, &scratch, "refused", Duration::from_secs(60));
    let said = &finished.stderr;
    assert!(!finished.status.success(), "{args} was accepted: {finished:?}");
    assert!(!said.contains("panicked"), "{args}: {said}");
    let errors: Vec<&str> = said.lines().filter(|line| line.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{args}: not exactly one error line:\n{said}");
    for needle in needles {
        assert!(errors[0].contains(needle), "{args}: {needle:?} is not in: {}", errors[0]);
    }
    assert!(finished.stdout.is_empty(), "{args}: {}", finished.stdout);
    assert!(!said.contains("local cluster"), "{args} started a cluster: {said}");
    assert!(!logs.exists(), "{args} got as far as creating the log folder");
}

#[test]
fn a_size_no_node_can_hold_is_refused() {
    assert_refused("--size 100GiB", &["the run needs about 3.1 TiB at the 8 local nodes", "available"]);
}

#[test]
fn iterations_past_u32_with_the_warmup_are_refused() {
    assert_refused("--iterations 4294967295", &["warmup 3 + iterations 4294967295", "limit of 4294967295 iterations"]);
}

#[test]
fn a_warmup_past_u32_with_the_iterations_is_refused() {
    assert_refused("--warmup 4294967295", &["warmup 4294967295 + iterations 20", "limit of 4294967295 iterations"]);
}

#[test]
fn a_timeout_of_centuries_is_refused() {
    assert_refused("--timeout 200years --iterations 2000", &["200years", "limit of one day (24h) per iteration"]);
}

#[test]
fn a_zero_timeout_is_refused() {
    assert_refused("--timeout 0", &["--timeout", "minimum of 1ms"]);
}

#[test]
fn more_local_nodes_than_the_machine_allows_start_none() {
    assert_refused(
        "--topology ring --nodes 100000 --size 8B",
        &["--nodes 100000 is more than this machine allows", "local nodes by"],
    );
}

#[test]
fn a_served_cluster_survives_a_run_too_large_for_its_nodes() {
    let mut cluster = TestCluster::start("limits-served", 4);
    let finished = cluster.run("allreduce --topology ring --size 100GiB --iterations 1 --warmup 0");
    assert!(!finished.status.success(), "100 GiB was accepted: {finished:?}");
    let said = &finished.stderr;
    assert!(!said.contains("panicked"), "{said}");
    eprintln!("the refused run said: {said}");
    // The coordinator refuses it from the memory the nodes reported, before any starts;
    // the four share one host address, so they need 4 x 400 GiB of what it has.
    assert!(said.contains("the run needs about 1.6 TiB at the 4 nodes at 127.0.0.1 (sharing the "), "{said}");
    assert!(said.contains("GiB available"), "{said}");
    assert_eq!(said.lines().filter(|l| !l.trim().is_empty()).count(), 1, "one line: {said}");
    assert!(!said.contains("disconnected"), "{said}");
    assert!(cluster.all_alive(), "a process died:\n{}", cluster.serve_stderr());
    let json = cluster.run_ok("allreduce --topology ring --size 16KiB --iterations 3 --warmup 1");
    assert_eq!(json["nodes"], 4, "{json:#}");
    assert!(cluster.all_alive(), "a process died:\n{}", cluster.serve_stderr());
}

/// A simulation that outgrows its memory limit is stopped with one error naming the
/// figures (the process's memory, the limit, the estimate), not left to the kernel's
/// out-of-memory killer; the limit is the user's (`--memory-limit`), else nine tenths of
/// what the machine has available. The 65,536-node all-reduce holds about 90 MiB.
#[test]
fn a_simulation_past_its_memory_limit_is_stopped_with_the_figures() {
    let scratch = Scratch::new("memory-limit");
    let simulate = |extra: &[&str]| {
        let mut cli = command(&topocomm_bin());
        cli.args(["simulate", "allreduce", "-n", "65536", "--ts", "10us", "--tw", "1ns"]).args(extra);
        run_bounded(cli, &scratch, "simulate", Duration::from_secs(120))
    };
    let stopped = simulate(&["--memory-limit", "40MiB"]);
    assert_eq!(stopped.status.code(), Some(1), "{stopped:?}");
    let said = &stopped.stderr;
    assert!(!said.contains("panicked"), "{said}");
    for needle in ["stopped at", "over the limit of 40.0 MiB (--memory-limit", "the estimate before the run was"] {
        assert!(said.contains(needle), "{needle:?} is not in: {said}");
    }
    assert!(stopped.stdout.is_empty(), "a stopped point printed a table: {}", stopped.stdout);
    let finished = simulate(&[]);
    assert!(finished.status.success(), "the same run without a limit: {finished:?}");
    assert!(finished.stdout.contains("160.128"), "{}", finished.stdout);
}

/// An all-to-all's every node holds a share for each of the p blocks: 16,384 nodes
/// took more than 23 GiB and were killed by the kernel; they are refused before the run.
#[test]
fn an_all_to_all_that_cannot_fit_is_refused_before_the_run() {
    let scratch = Scratch::new("alltoall-memory");
    let mut cli = command(&topocomm_bin());
    cli.args(["simulate", "alltoall", "-n", "262144", "--payload", "lengths"]);
    let finished = run_bounded(cli, &scratch, "simulate", Duration::from_secs(60));
    assert_eq!(finished.status.code(), Some(1), "{finished:?}");
    assert!(finished.stderr.contains("even with lengths only"), "{}", finished.stderr);
    assert!(finished.stderr.contains("needs about 16.0 TiB"), "{}", finished.stderr);
}
