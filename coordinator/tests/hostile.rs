//! Hostile input against the real binaries (`topocomm serve`, `topocomm-node`, the CLI)
//! on 127.0.0.1, one test per attack a hostile tester tried: a huge length prefix before
//! authentication, forged and oversized names, a thousand idle connections, a rogue
//! node flooding the coordinator, hellos spammed while the cluster re-wires, a paused
//! node and an unreachable address during wiring, and an encrypted cluster that turns
//! plain parties away. Every loop is bounded; memory is read from /proc, and compared
//! with generous margins (the attacks cost hundreds of MiB before the fix).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Member, TestCluster, poll, rss_kib, signal};
use futures::SinkExt;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use topocomm_node::security::handshake::{HandshakeError, initiate};
use topocomm_proto::auth::{Key, Purpose};
use topocomm_proto::codec;
use topocomm_proto::control::ToCoordinator;

/// Whether the peer closes `stream` within `patience` (reading or writing fails).
fn closed_within(stream: &mut TcpStream, patience: Duration) -> bool {
    stream.set_read_timeout(Some(Duration::from_millis(200))).expect("a read timeout");
    let deadline = Instant::now() + patience;
    let mut buffer = [0u8; 4096];
    while Instant::now() < deadline {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// Runs `future` on a fresh single-threaded runtime.
fn block_on<T>(future: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime").block_on(future)
}

/// Opens a handshake to `address` as `purpose` with `token`'s key.
fn handshake(address: &str, token: &str, purpose: Purpose) -> Result<(), HandshakeError> {
    block_on(async {
        let stream = tokio::net::TcpStream::connect(address).await?;
        initiate(stream, &Key::from_token(token), purpose, false).await.map(|_| ())
    })
}

#[test]
fn a_huge_length_prefix_before_authentication_costs_nothing() {
    let mut cluster = TestCluster::start("huge-prefix", 2);
    let before = rss_kib(cluster.serve_pid()).expect("the coordinator runs");
    for _ in 0..3 {
        let mut stream = TcpStream::connect(&cluster.address).expect("connecting to the control port");
        stream.write_all(&(512u32 << 20).to_be_bytes()).expect("writing the prefix");
        // Up to 64 MiB behind it, as fast as the coordinator takes it; it must close
        // the connection long before.
        let chunk = vec![0x5a; 1 << 20];
        let mut sent = 0;
        while sent < 64 && stream.write_all(&chunk).is_ok() {
            sent += 1;
        }
        assert!(sent < 64, "the coordinator read 64 MiB after a 512 MiB prefix");
        assert!(closed_within(&mut stream, Duration::from_secs(8)), "the connection stayed open");
    }
    let after = rss_kib(cluster.serve_pid()).expect("the coordinator still runs");
    eprintln!("coordinator resident memory: {before} KiB before, {after} KiB after three 512 MiB prefixes");
    assert!(after < before + 32 * 1024, "the coordinator grew from {before} to {after} KiB");
    let counted = poll(Duration::from_secs(5), || {
        (common::refusals_logged(&cluster.serve_stderr(), "control connections") >= 3).then_some(())
    });
    assert!(counted.is_some(), "three refusals were not counted:\n{}", cluster.serve_stderr());
    cluster.run_ok("allreduce -t ring --size 1KiB --iterations 2");
    assert!(cluster.all_alive());
}

#[test]
fn forged_and_oversized_names_are_refused_and_logged_escaped() {
    let mut cluster = TestCluster::start("names", 2);
    let forged = "evil\n2026-11-24T00:00:00Z  INFO topocomm::cluster: cluster formed \u{1b}[2J";
    for name in [forged.to_owned(), "n".repeat(300)] {
        let purpose = Purpose::Node { name, data_addr: "127.0.0.1:9".into(), memory_bytes: 0 };
        match handshake(&cluster.address, &cluster.token, purpose) {
            Err(HandshakeError::Refused(reason)) => {
                assert!(reason.contains("node name"), "{reason}");
                assert!(!reason.contains('\n') && !reason.contains('\u{1b}'), "{reason:?}");
            }
            other => panic!("a bad name got {other:?}"),
        }
    }
    // A 300 MiB name never gets read: the hello's prefix alone is refused.
    let mut stream = TcpStream::connect(&cluster.address).expect("connecting");
    stream.write_all(&(300u32 << 20).to_be_bytes()).expect("writing");
    assert!(closed_within(&mut stream, Duration::from_secs(8)));
    let log = poll(Duration::from_secs(5), || {
        let log = cluster.serve_stderr();
        (common::refusals_logged(&log, "control connections") >= 3).then_some(log)
    })
    .unwrap_or_else(|| panic!("three refusals were not logged:\n{}", cluster.serve_stderr()));
    assert_eq!(log.matches("cluster formed").count(), 1, "a forged log line:\n{log}");
    assert!(!log.contains('\u{1b}'), "an escape code reached the log");
    assert!(log.lines().filter(|l| l.contains("refused control connections")).all(|l| l.contains("127.0.0.1:")));
    assert!(cluster.all_alive());
}

#[test]
fn status_answers_while_a_thousand_idle_connections_are_open() {
    let mut cluster = TestCluster::start("idle", 2);
    let idle: Vec<TcpStream> = (0..1000).filter_map(|_| TcpStream::connect(&cluster.address).ok()).collect();
    assert!(idle.len() >= 990, "only {} connections opened", idle.len());
    let started = Instant::now();
    let members = cluster.status().expect("topocomm status answered");
    eprintln!("status answered in {:?} beside {} idle connections", started.elapsed(), idle.len());
    assert_eq!(members.len(), 2);
    cluster.run_ok("broadcast -t ring --size 1KiB --iterations 2");
    drop(idle);
    assert!(!cluster.serve_stderr().contains("Too many open files"), "{}", cluster.serve_stderr());
    assert!(cluster.all_alive());
}

#[test]
fn a_rogue_node_flooding_the_coordinator_is_bounded_and_dropped() {
    let mut cluster = TestCluster::start("rogue", 3);
    cluster.run_ok("allreduce -t ring --size 1KiB --iterations 2");
    cluster.kill_node(2);
    let before = rss_kib(cluster.serve_pid()).expect("the coordinator runs");
    // A token holder takes node 2's place and sends two million messages nobody asked for.
    const FLOOD: usize = 2_000_000;
    block_on(async {
        let stream = tokio::net::TcpStream::connect(&cluster.address).await.expect("connecting");
        let purpose = Purpose::Node { name: "node-2".into(), data_addr: "127.0.0.1:9".into(), memory_bytes: 0 };
        let channel = initiate(stream, &Key::from_token(&cluster.token), purpose, false).await.expect("registered");
        let mut control = Framed::new(channel, LengthDelimitedCodec::new());
        let message = Bytes::from(codec::encode(&ToCoordinator::Wired { epoch: 1_000_000 }).expect("encodes"));
        for _ in 0..FLOOD {
            control.feed(message.clone()).await.expect("the coordinator reads the flood");
        }
        SinkExt::<Bytes>::flush(&mut control).await.expect("flushing");
    });
    let logged =
        poll(Duration::from_secs(30), || cluster.serve_stderr().contains("dropped unsolicited messages").then_some(()));
    assert!(logged.is_some(), "no drop was logged:\n{}", cluster.serve_stderr());
    let after = rss_kib(cluster.serve_pid()).expect("the coordinator still runs");
    eprintln!("coordinator resident memory: {before} KiB before, {after} KiB after {FLOOD} unsolicited messages");
    assert!(after < before + 64 * 1024, "the coordinator grew from {before} to {after} KiB");
    // The rogue's session ends once the coordinator has read its flood to the end; until
    // then "node-2" is taken, and a node of that name is refused (as it should be).
    cluster.wait_for_members(2, Duration::from_secs(30));
    cluster.restart_node(2);
    cluster.wait_for_members(3, Duration::from_secs(30));
    cluster.run_ok("allreduce -t ring --size 1KiB --iterations 2");
    assert!(cluster.all_alive());
}

#[test]
fn hellos_spammed_while_the_cluster_rewires_never_take_a_slot() {
    let mut cluster = TestCluster::start("spam", 4);
    cluster.run_ok("broadcast -t ring --size 1KiB --iterations 1");
    let members: Vec<Member> = cluster.wait_for_members(4, Duration::from_secs(10));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (tries, admitted) = std::thread::scope(|scope| {
        let spammer = scope.spawn(|| {
            let (mut tries, mut admitted) = (0u32, 0u32);
            // Bounded: at most 20,000 hellos, and it stops when the re-wiring is done.
            'spam: for round in 0..5_000u64 {
                for member in &members {
                    let to = member.id.expect("formed");
                    for from in (0..4).filter(|&f| f != to) {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break 'spam;
                        }
                        // Guess every epoch the re-wiring may be in.
                        let purpose = Purpose::Link { epoch: 1 + round % 8, from, to };
                        tries += 1;
                        if handshake(&member.data_addr, &cluster.token, purpose).is_ok() {
                            admitted += 1;
                        }
                    }
                }
            }
            (tries, admitted)
        });
        for shape in ["hypercube", "full", "ring", "hypercube", "ring"] {
            cluster.run_ok(&format!("allreduce -t {shape} --size 4KiB --iterations 2"));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spammer.join().expect("the spammer ran")
    });
    eprintln!("{tries} spammed hellos during five re-wirings, {admitted} admitted");
    assert!(tries > 20, "the spammer barely ran ({tries} hellos)");
    assert_eq!(admitted, 0, "a token holder took a wired slot");
    assert!(cluster.all_alive());
}

#[test]
fn a_paused_node_is_the_one_named_when_a_rewiring_fails() {
    let mut cluster = TestCluster::start("paused", 4);
    cluster.run_ok("broadcast -t ring --size 1KiB --iterations 1");
    signal(cluster.node_pid(2), "STOP");
    let failed = cluster.run("broadcast -t full --size 1KiB --iterations 1");
    signal(cluster.node_pid(2), "CONT");
    assert!(!failed.status.success(), "a run with a paused node passed");
    eprintln!("the failed run said: {}", failed.stderr.trim());
    assert!(failed.stderr.contains("node 2 (node-2)"), "{}", failed.stderr);
    for healthy in ["node 0 (node-0)", "node 1 (node-1)", "node 3 (node-3)"] {
        assert!(!failed.stderr.contains(healthy), "a healthy node was named: {}", failed.stderr);
    }
    // Resumed, it registers again and the cluster runs.
    let again = poll(Duration::from_secs(40), || {
        let run = cluster.run("broadcast -t full --size 1KiB --iterations 1");
        run.status.success().then_some(run)
    });
    assert!(again.is_some(), "the cluster did not run again after the node resumed");
    assert!(cluster.all_alive());
}

#[test]
fn an_unreachable_advertised_address_is_the_one_named() {
    let mut cluster = TestCluster::start("unreachable", 4);
    cluster.kill_node(3);
    // Nothing listens on port 1: node 3's lower neighbours cannot reach it.
    cluster.restart_node_with(3, &["--advertise", "127.0.0.1:1"]);
    cluster.wait_for_members(4, Duration::from_secs(30));
    let failed = cluster.run("broadcast -t ring --size 1KiB --iterations 1");
    assert!(!failed.status.success(), "a run with an unreachable node passed");
    eprintln!("the failed run said: {}", failed.stderr.trim());
    let headline = failed.stderr.lines().find(|l| l.contains("failed")).unwrap_or_default().to_owned();
    assert!(headline.contains("node 3 (node-3)") && headline.contains("could not be reached"), "{}", failed.stderr);
    for healthy in ["node 1 (node-1) (", "node 2 (node-2) ("] {
        assert!(!headline.contains(healthy), "a healthy node was blamed: {headline}");
    }
    assert!(cluster.all_alive());
}

#[test]
fn an_encrypted_cluster_verifies_and_turns_plain_parties_away() {
    let mut cluster = TestCluster::start_encrypted("encrypted", 4);
    for shape in ["ring", "hypercube"] {
        cluster.run_ok(&format!("allreduce -t {shape} --size 256KiB --iterations 2"));
    }
    // A client without --encrypt is told why.
    let mut plain = common::command(&common::topocomm_bin());
    plain.args(["status", "--coordinator", &cluster.address]).env("TOPOCOMM_TOKEN", &cluster.token);
    let plain = common::run_bounded(plain, &cluster.scratch, "plain-status", Duration::from_secs(30));
    assert!(!plain.status.success());
    assert!(plain.stderr.contains("--encrypt"), "{}", plain.stderr);
    // Nor does a plain node get in.
    match handshake(
        &cluster.address,
        &cluster.token,
        Purpose::Node { name: "plain".into(), data_addr: "127.0.0.1:9".into(), memory_bytes: 0 },
    ) {
        Err(HandshakeError::Refused(reason)) => assert!(reason.contains("--encrypt"), "{reason}"),
        other => panic!("a plain node got {other:?}"),
    }
    assert!(cluster.all_alive());
}
