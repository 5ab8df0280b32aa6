//! The control plane against insiders and floods, on the real binaries on 127.0.0.0/8:
//! a token-holding rogue node sending reports nobody asked for, or blaming a node it
//! does not link to; weak tokens where other hosts can reach the coordinator; a flood of
//! connections from one address beside a client at another; and a flood of refusals
//! against the log. Every loop is bounded and every wait has a deadline; what the
//! coordinator kept is judged by what it read and said, not by its memory.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{TestCluster, command, poll, run_bounded, topocomm_bin};
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use topocomm_node::security::MAX_PENDING_PER_SOURCE;
use topocomm_node::security::encryption::Channel;
use topocomm_node::security::handshake::{self, Gate, GateRefusal};
use topocomm_proto::auth::{self, Challenge, Hello, Key, Purpose};
use topocomm_proto::codec;
use topocomm_proto::control::{NodeReport, ToCoordinator, ToNode, Wiring};

/// A runtime with worker threads, so that a rogue keeps talking while the test blocks.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

/// A rogue's control link, framed as a node's (and able to send what no node would).
type RogueLink = Framed<Channel<tokio::net::TcpStream>, LengthDelimitedCodec>;

/// Registers with the coordinator as node `name` (a token holder taking a place).
async fn register_rogue(cluster: &TestCluster, name: &str, data_addr: &str) -> RogueLink {
    let stream = tokio::net::TcpStream::connect(&cluster.address).await.expect("connecting");
    let purpose = Purpose::Node { name: name.into(), data_addr: data_addr.into(), memory_bytes: 0 };
    let channel =
        handshake::initiate(stream, &Key::from_token(&cluster.token), purpose, false).await.expect("registered");
    Framed::new(channel, LengthDelimitedCodec::builder().max_frame_length(1 << 30).new_codec())
}

async fn send(link: &mut RogueLink, message: &ToCoordinator) -> std::io::Result<()> {
    link.send(Bytes::from(codec::encode(message).expect("encodes"))).await
}

/// Whether the coordinator closes `link` within `patience` (answering its pings).
async fn closed_within(link: &mut RogueLink, patience: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        match tokio::time::timeout_at(deadline, link.next()).await {
            Err(_) => return false,
            Ok(None | Some(Err(_))) => return true,
            Ok(Some(Ok(body))) => {
                if matches!(codec::decode(&body), Ok(ToNode::Ping)) {
                    let _ = send(link, &ToCoordinator::Pong).await;
                }
            }
        }
    }
}

#[test]
fn reports_no_run_asked_for_close_the_session_naming_the_node() {
    let mut cluster = TestCluster::start("unsolicited", 3);
    cluster.run_ok("allreduce -t ring --size 1KiB --iterations 2");
    cluster.kill_node(2);
    let runtime = runtime();
    // A small report out of turn: the session is closed at once.
    let closed = runtime.block_on(async {
        let mut link = register_rogue(&cluster, "node-2", "127.0.0.1:9").await;
        send(&mut link, &ToCoordinator::Report(Box::new(NodeReport::empty(99, 2)))).await.expect("sent");
        closed_within(&mut link, Duration::from_secs(8)).await
    });
    assert!(closed, "the coordinator kept the session of a node that sent a report no run asked for");
    let named = poll(Duration::from_secs(5), || {
        let log = cluster.serve_stderr();
        log.lines().find(|l| l.contains("node-2") && l.contains("no run")).map(str::to_owned)
    });
    assert!(named.is_some(), "the coordinator did not say which node it closed and why:\n{}", cluster.serve_stderr());
    eprintln!("the coordinator logged: {}", named.unwrap_or_default());
    // Twelve reports of 8 MiB out of turn (the probe sent 200 MiB each): the coordinator
    // refuses the first by its length prefix and reads none of them.
    let report = NodeReport { times_us: vec![0.5; 1 << 20], ..NodeReport::empty(99, 2) };
    let body = Bytes::from(codec::encode(&ToCoordinator::Report(Box::new(report))).expect("encodes"));
    assert!(body.len() > 8 << 20);
    let (taken, closed) = runtime.block_on(async {
        let mut link = register_rogue(&cluster, "node-2", "127.0.0.1:9").await;
        let mut taken = 0;
        for _ in 0..12 {
            match tokio::time::timeout(Duration::from_secs(10), link.send(body.clone())).await {
                Ok(Ok(())) => taken += 1,
                _ => break,
            }
        }
        (taken, closed_within(&mut link, Duration::from_secs(8)).await)
    });
    eprintln!("the coordinator took {taken} of 12 unsolicited reports of {} bytes", body.len());
    let oversized = poll(Duration::from_secs(5), || {
        let log = cluster.serve_stderr();
        log.lines().find(|l| l.contains("node-2") && l.contains("longer than")).map(str::to_owned)
    });
    assert!(oversized.is_some(), "the oversized report was not logged:\n{}", cluster.serve_stderr());
    eprintln!("the coordinator logged: {}", oversized.unwrap_or_default());
    assert!(taken <= 1, "the coordinator took {taken} unsolicited reports of 8 MiB");
    assert!(closed, "the session stayed open");
    cluster.restart_node(2);
    cluster.wait_for_members(3, Duration::from_secs(30));
    cluster.run_ok("allreduce -t ring --size 1KiB --iterations 2");
    assert!(cluster.all_alive());
}

/// A gate that admits the links of one wiring with their keys, as a real node would.
struct WiredGate(Wiring);

impl Gate for WiredGate {
    fn key_for(&self, hello: &Hello) -> Result<Key, GateRefusal> {
        let Purpose::Link { from, .. } = hello.purpose else { return Err(GateRefusal::NotALink) };
        let neighbour = self.0.neighbours.iter().find(|n| n.id == from);
        neighbour.map(|n| n.key.clone()).ok_or(GateRefusal::NotWired)
    }

    fn admit(&self, _hello: &Hello) -> Result<(), GateRefusal> {
        Ok(())
    }
}

#[test]
fn a_wire_failed_naming_a_node_the_reporter_does_not_link_to_is_ignored() {
    let mut cluster = TestCluster::start("blame", 4);
    cluster.run_ok("broadcast -t ring --size 1KiB --iterations 1");
    cluster.kill_node(3);
    let runtime = runtime();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).expect("a data listener");
    let data_addr = listener.local_addr().expect("bound").to_string();
    let mut link = runtime.block_on(register_rogue(&cluster, "node-3", &data_addr));
    // Node 3 of a ring of 4 links to nodes 0 and 2. It lets both in, then says it could
    // not reach node 1, which is healthy and none of its neighbours.
    let rogue = runtime.spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let mut held = Vec::new();
        while let Ok(Some(Ok(body))) = tokio::time::timeout_at(deadline, link.next()).await {
            match codec::decode::<ToNode>(&body) {
                Ok(ToNode::Ping) => {
                    let _ = send(&mut link, &ToCoordinator::Pong).await;
                }
                Ok(ToNode::Wire(wiring)) => {
                    let gate = WiredGate(wiring.clone());
                    for _ in 0..2 {
                        let Ok(Ok((stream, _))) =
                            tokio::time::timeout(Duration::from_secs(20), listener.accept()).await
                        else {
                            break;
                        };
                        if let Ok((_, channel)) = handshake::accept(stream, &gate, false).await {
                            held.push(channel);
                        }
                    }
                    let blamed = ToCoordinator::WireFailed {
                        epoch: wiring.epoch,
                        reason: "could not link to neighbour 1".into(),
                        unreachable: vec![1],
                        missing: vec![],
                    };
                    let _ = send(&mut link, &blamed).await;
                }
                _ => {}
            }
        }
        held.len()
    });
    cluster.wait_for_members(4, Duration::from_secs(30));
    let failed = cluster.run("broadcast -t ring --size 1KiB --iterations 1");
    assert!(!failed.status.success(), "a run with a rogue node passed");
    eprintln!("the failed run said: {}", failed.stderr.trim());
    let headline = failed.stderr.lines().find(|l| l.contains("failed")).unwrap_or_default().to_owned();
    assert!(headline.contains("wiring"), "{}", failed.stderr);
    assert!(!headline.contains("node 1 (node-1)"), "a healthy node was blamed by a node not linked to it: {headline}");
    let logged = poll(Duration::from_secs(5), || {
        let log = cluster.serve_stderr();
        log.lines().find(|l| l.contains("node-3") && l.contains("neither dials nor is dialled by")).map(str::to_owned)
    });
    assert!(logged.is_some(), "the rogue reporter was not logged:\n{}", cluster.serve_stderr());
    eprintln!("the coordinator logged: {}", logged.unwrap_or_default());
    // The rogue gone and node 3 back, the cluster runs.
    rogue.abort();
    let _ = runtime.block_on(rogue);
    cluster.restart_node(3);
    let again = poll(Duration::from_secs(40), || {
        let run = cluster.run("broadcast -t ring --size 1KiB --iterations 1");
        run.status.success().then_some(run)
    });
    assert!(again.is_some(), "the cluster did not run again after node 3 came back");
    assert!(cluster.all_alive());
}

#[test]
fn a_weak_token_is_refused_where_other_hosts_can_reach_the_coordinator() {
    let scratch = common::Scratch::new("weak-token");
    // The probe's `--token a`, the compose file's old default, and 64 bits of hex.
    for token in ["a", "topocomm-local-only", "0123456789abcdef"] {
        let mut serve = command(&topocomm_bin());
        serve.args(["serve", "--nodes", "1", "--listen", "0.0.0.0:0"]).env("TOPOCOMM_TOKEN", token);
        let mut started = common::Background::start(serve, &scratch, "serve-weak");
        let exited = common::wait_until(&mut started.child, Instant::now() + Duration::from_secs(10));
        let finished = started.finish(Duration::from_secs(1));
        assert!(exited.is_some_and(|status| !status.success()), "served with token {token:?}: {}", finished.stderr);
        assert!(
            finished.stderr.contains("--write-token"),
            "the error does not say how to make one: {}",
            finished.stderr
        );
        eprintln!("token {token:?}: {}", finished.stderr.trim());
    }
    // Where only this machine can reach it, the token is the user's business.
    let mut serve = command(&topocomm_bin());
    serve.args(["serve", "--nodes", "1", "--listen", "127.0.0.1:0"]).env("TOPOCOMM_TOKEN", "a");
    let serving = common::Background::start(serve, &scratch, "serve-loopback");
    let stderr = scratch.path.clone();
    let announced = poll(Duration::from_secs(10), || {
        let text: String = std::fs::read_dir(&stderr)
            .ok()?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("serve-loopback"))
            .map(|e| common::read_text(&e.path()))
            .collect();
        text.contains("topocomm coordinator on 127.0.0.1:").then_some(())
    });
    drop(serving);
    assert!(announced.is_some(), "a coordinator on 127.0.0.1 refused a short token");
}

/// Opens connections from `source` to `address` as fast as they go, saying nothing and
/// keeping the newest 128 open, until `stop` (or 60 s); returns how many it opened.
async fn flood(address: SocketAddr, source: &str, stop: Arc<AtomicBool>, opened: Arc<AtomicUsize>) {
    let source: SocketAddr = format!("{source}:0").parse().expect("an address");
    let mut held = std::collections::VecDeque::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let socket = TcpSocket::new_v4().expect("a socket");
        socket.bind(source).expect("binding the flood's source address");
        // Closed with a reset: no TIME_WAIT to use up the source's ports.
        let _ = socket.set_zero_linger();
        if let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_secs(1), socket.connect(address)).await {
            held.push_back(stream);
            opened.fetch_add(1, Ordering::Relaxed);
        }
        if held.len() > 128 {
            held.pop_front();
        }
    }
}

#[test]
fn a_flood_from_one_address_does_not_keep_a_client_at_another_out() {
    let cluster = TestCluster::start("flood", 2);
    let address: SocketAddr = cluster.address.parse().expect("an address");
    let runtime = runtime();
    let (stop, opened) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let flooders: Vec<_> =
        (0..4).map(|_| runtime.spawn(flood(address, "127.0.0.2", stop.clone(), opened.clone()))).collect();
    let flowing = poll(Duration::from_secs(20), || (opened.load(Ordering::Relaxed) > 500).then_some(()));
    assert!(flowing.is_some(), "the flood did not get going");
    let started = Instant::now();
    let mut failures = Vec::new();
    for attempt in 0..20 {
        let status = run_bounded(cluster.cli(&["status"]), &cluster.scratch, "status", Duration::from_secs(30));
        if !status.status.success() {
            failures.push(format!("status {attempt}: {}", status.stderr.trim()));
        }
    }
    let during = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for flooder in flooders {
        let _ = runtime.block_on(flooder);
    }
    let opened = opened.load(Ordering::Relaxed);
    eprintln!("{opened} connections from 127.0.0.2 in all; 20 `status` from 127.0.0.1 took {during:?}");
    assert!(failures.is_empty(), "{} of 20 `status` failed during the flood:\n{}", failures.len(), failures.join("\n"));
}

/// Opens a connection from `source` to `address` that says nothing.
async fn silent(address: SocketAddr, source: &str) -> tokio::net::TcpStream {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.bind(format!("{source}:0").parse().expect("an address")).expect("binding");
    socket.connect(address).await.expect("connecting")
}

#[test]
fn a_party_dropped_for_newer_connections_is_told_why() {
    let cluster = TestCluster::start("evicted", 1);
    let address: SocketAddr = cluster.address.parse().expect("an address");
    let runtime = runtime();
    let said = runtime.block_on(async {
        let mut first = silent(address, "127.0.0.3").await;
        // Enough newer ones from the same address to push the first one out.
        let mut newer = Vec::new();
        for _ in 0..MAX_PENDING_PER_SOURCE + 8 {
            newer.push(silent(address, "127.0.0.3").await);
        }
        let mut length = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(5), first.read_exact(&mut length)).await.ok()?.ok()?;
        let mut body = vec![0u8; u32::from_be_bytes(length) as usize];
        first.read_exact(&mut body).await.ok()?;
        match auth::decode::<Challenge>(&body).ok()? {
            Challenge::Refused(reason) => Some(reason),
            Challenge::Proceed { .. } => None,
        }
    });
    eprintln!("the dropped party read: {said:?}");
    let said = said.expect("the dropped party was told nothing");
    assert!(said.contains("busy") && said.contains("127.0.0.3"), "{said}");
}

#[test]
fn a_flood_of_refusals_is_logged_as_counts_once_a_second() {
    let cluster = TestCluster::start("refusal-log", 1);
    let quiet = cluster.serve_stderr().lines().count();
    const FLOOD: usize = 3000;
    let started = Instant::now();
    for _ in 0..FLOOD {
        // A hello of three bytes that decode to nothing.
        let mut stream = TcpStream::connect(&cluster.address).expect("connecting");
        let _ = stream.write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff]);
    }
    eprintln!("{FLOOD} malformed hellos in {:?}", started.elapsed());
    // Every refusal counted: the totals of the lines add up to the flood.
    let counted = |log: &str| common::refusals_logged(log, "control connections");
    let log = poll(Duration::from_secs(10), || {
        let log = cluster.serve_stderr();
        (counted(&log) >= FLOOD).then_some(log)
    })
    .unwrap_or_else(|| panic!("the refusals were not counted:\n{}", cluster.serve_stderr()));
    let lines: Vec<&str> = log.lines().skip(quiet).filter(|l| l.contains("refused")).collect();
    eprintln!("{} log lines for {FLOOD} refusals:\n{}", lines.len(), lines.join("\n"));
    assert_eq!(counted(&log), FLOOD);
    let seconds = started.elapsed().as_secs() as usize + 2;
    assert!(lines.len() <= 2 * seconds, "{} lines in about {seconds} s for {FLOOD} refusals", lines.len());
}
