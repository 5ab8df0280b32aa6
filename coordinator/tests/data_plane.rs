//! The data plane under faults and in its counts, against the real binaries on
//! 127.0.0.1: a data link cut in the middle of a run (by a proxy the test puts between
//! two daemons and closes) ends the run at once, naming both ends and the cause (and one
//! cut between runs has the next run wired afresh), and so does one bit flipped in an
//! encrypted record; and the
//! frames a run reports forwarded are exactly its schedule's, as the simulator counts
//! them, run after run. And a rogue token holder wired as a node floods its neighbour
//! with frames of another run and messages nobody asked for: the neighbour keeps none of
//! the first, closes the link past its allowance, and the run fails naming the sender.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Background, TestCluster, command, poll, rss_kib, run_bounded, topocomm_bin};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use topocomm_node::security::handshake::initiate;
use topocomm_proto::auth::{Key, Purpose};
use topocomm_proto::codec;
use topocomm_proto::control::{ToCoordinator, ToNode};
use topocomm_proto::frame::FrameHeader;

/// A TCP proxy on 127.0.0.1 in front of `target`: it carries every connection both
/// ways, counts the bytes, and cuts them all when told.
struct Proxy {
    address: String,
    carried: Arc<AtomicU64>,
    connections: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
    /// Set: the next chunk carried from the dialling side gets one bit flipped.
    tamper: Arc<AtomicBool>,
}

impl Proxy {
    fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a proxy port");
        let address = listener.local_addr().expect("its address").to_string();
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let (carried, connections, stop) = (Arc::default(), Arc::default(), Arc::new(AtomicBool::new(false)));
        let proxy = Proxy { address, carried, connections, stop, tamper: Arc::default() };
        let (carried, connections, stop) = (proxy.carried.clone(), proxy.connections.clone(), proxy.stop.clone());
        let tamper = proxy.tamper.clone();
        std::thread::spawn(move || {
            // Bounded: it stops when told, or after ten minutes.
            let until = Instant::now() + Duration::from_secs(600);
            while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).expect("a blocking socket");
                let Ok(server) = TcpStream::connect(&target) else { continue };
                let mut held = connections.lock().expect("connections lock");
                for (from, to, dialling) in [(&client, &server, true), (&server, &client, false)] {
                    let (mut from, mut to) = (from.try_clone().expect("a clone"), to.try_clone().expect("a clone"));
                    let (carried, tamper) = (carried.clone(), tamper.clone());
                    std::thread::spawn(move || {
                        let mut buffer = vec![0u8; 64 * 1024];
                        while let Ok(n) = from.read(&mut buffer) {
                            if n > 0 && dialling && tamper.swap(false, Ordering::Relaxed) {
                                buffer[n / 2] ^= 0x01;
                            }
                            if n == 0 || to.write_all(&buffer[..n]).is_err() {
                                break;
                            }
                            carried.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        let _ = to.shutdown(Shutdown::Write);
                    });
                }
                held.extend([client, server]);
            }
        });
        proxy
    }

    /// Bytes carried so far, both ways.
    fn carried(&self) -> u64 {
        self.carried.load(Ordering::Relaxed)
    }

    /// Cuts every connection it carries, both ways.
    fn cut(&self) {
        for stream in self.connections.lock().expect("connections lock").iter() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cut();
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("its address").port()
}

/// Node 1 of `cluster` again, its data listener behind a proxy (node 0 dials it through
/// there), and a long all-reduce on a ring flowing through it, with the per-iteration
/// deadline of 30 s a cut link used to wait out.
fn long_run_through_a_proxy(cluster: &mut TestCluster) -> (Proxy, Background) {
    let listen = format!("127.0.0.1:{}", free_port());
    let proxy = Proxy::start(listen.clone());
    cluster.kill_node(1);
    cluster.restart_node_with(1, &["--listen", &listen, "--advertise", &proxy.address]);
    cluster.wait_for_members(4, Duration::from_secs(30));
    let mut run = cluster.cli(&["run"]);
    run.args("allreduce -t ring --size 1MiB --iterations 100000 --timeout 30s --json".split_whitespace());
    let running = Background::start(run, &cluster.scratch, "long-run");
    let flowing = poll(Duration::from_secs(60), || (proxy.carried() > 32 << 20).then_some(()));
    assert!(flowing.is_some(), "the run never got going through the proxy ({} bytes)", proxy.carried());
    (proxy, running)
}

#[test]
fn a_data_link_cut_mid_run_ends_the_run_at_once_naming_both_ends() {
    let mut cluster = TestCluster::start("cut-link", 4);
    cluster.run_ok("allreduce -t ring --size 1KiB --iterations 2");
    let (proxy, running) = long_run_through_a_proxy(&mut cluster);
    let cut_at = Instant::now();
    proxy.cut();
    let failed = running.finish(Duration::from_secs(90));
    let took = cut_at.elapsed();
    eprintln!("the run ended {took:?} after the cut: {}", failed.stderr.trim());
    assert!(!failed.status.success(), "a run with a cut link passed");
    // Well before a single iteration's deadline, let alone the run's.
    assert!(took < Duration::from_secs(10), "the run ended only {took:?} after the cut");
    let said = &failed.stderr;
    assert!(said.contains("the link between node"), "{said}");
    assert!(said.contains("node 0 (node-0)") && said.contains("node 1 (node-1)"), "{said}");
    assert!(said.contains("closed by node") || said.contains("connection reset by node"), "{said}");
    // The cluster runs again (re-wired, still through the proxy's port, which still
    // carries new connections).
    cluster.run_ok("allreduce -t ring --size 1KiB --iterations 2");
    // Cut between runs: the next run is wired afresh instead of failing on broken links.
    let told = |cluster: &TestCluster| {
        (0..2)
            .map(|node| cluster.node_stderr(node).matches("telling the coordinator a link failed").count())
            .sum::<usize>()
    };
    let before = told(&cluster);
    proxy.cut();
    let heard = poll(Duration::from_secs(10), || (told(&cluster) > before).then_some(()));
    assert!(heard.is_some(), "no node told the coordinator of the cut");
    std::thread::sleep(Duration::from_millis(200));
    cluster.run_ok("allreduce -t ring --size 1KiB --iterations 2");
    assert!(cluster.all_alive());
}

#[test]
fn a_record_tampered_with_mid_run_ends_the_encrypted_run_at_once_saying_so() {
    let mut cluster = TestCluster::start_encrypted("tamper", 4);
    let (proxy, running) = long_run_through_a_proxy(&mut cluster);
    let tampered_at = Instant::now();
    proxy.tamper.store(true, Ordering::Relaxed);
    let failed = running.finish(Duration::from_secs(90));
    let took = tampered_at.elapsed();
    eprintln!("the run ended {took:?} after one bit was flipped: {}", failed.stderr.trim());
    assert!(!failed.status.success(), "a run with a tampered record passed");
    assert!(took < Duration::from_secs(10), "the run ended only {took:?} after the tampering");
    let said = &failed.stderr;
    assert!(said.contains("node 0 (node-0)") && said.contains("node 1 (node-1)"), "{said}");
    assert!(said.contains("a record from node 0 failed authentication"), "{said}");
    assert!(cluster.all_alive());
}

/// `topocomm simulate <words> --json`: the schedule's one point.
fn simulated(words: &str, scratch: &common::Scratch) -> Value {
    let mut simulate = command(&topocomm_bin());
    simulate.arg("simulate").args(words.split_whitespace()).arg("--json");
    run_bounded(simulate, scratch, "simulate", Duration::from_secs(60)).json()
}

#[test]
fn frames_forwarded_are_exactly_the_schedules_run_after_run() {
    let cluster = TestCluster::start("counts", 8);
    // Schedules that forward: a hypercube's steps on a ring, Bruck's on a mesh, the
    // dissemination barrier and a scan on a ring; each run three times, with warm-ups
    // whose stragglers must not be counted.
    let cases = [
        "allgather -t ring --algorithm hypercube --size 64KiB",
        "allreduce -t ring --algorithm recursive-doubling --size 256KiB",
        "alltoall -t mesh --algorithm bruck --size 4KiB",
        "barrier -t ring --algorithm dissemination",
        "broadcast -t ring --algorithm hypercube --size 1MiB",
    ];
    for words in cases {
        let schedule = simulated(&format!("{words} --nodes 8"), &cluster.scratch);
        let per_iteration = schedule["frames_forwarded"].as_u64().expect("frames_forwarded");
        let sent_per_iteration = schedule["frames_sent"].as_u64().expect("frames_sent");
        for _ in 0..3 {
            let json = cluster.run_ok(&format!("{words} --warmup 3 --iterations 7"));
            let iterations = json["iterations"].as_u64().expect("iterations");
            eprintln!(
                "{words}: forwarded {} (schedule {per_iteration} x {iterations}), sent {} (schedule {sent_per_iteration} x {iterations})",
                json["frames_forwarded"], json["frames_sent"]
            );
            assert_eq!(json["frames_forwarded"].as_u64(), Some(per_iteration * iterations), "{words}: {json:#}");
            assert_eq!(json["frames_sent"].as_u64(), Some(sent_per_iteration * iterations), "{words}: {json:#}");
        }
    }
}

/// Messages of 1 KiB the rogue tries to queue at its neighbour.
const FLOOD_MESSAGES: u32 = 100_000;

/// One frame as a link writes it: length prefix, header, payload.
fn frame(run: u64, src: u32, dst: u32, tag: u32, payload: &[u8]) -> Vec<u8> {
    let header = FrameHeader { run, iteration: 0, src, dst, tag, hops: 0, step: 1, packet: 0, last: true, due_ns: 0 };
    let mut bytes = ((FrameHeader::ENCODED_LEN + payload.len()) as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&header.encode());
    bytes.extend_from_slice(payload);
    bytes
}

/// Plays node 0 of the cluster at `address` with `token`: registers as `node-0`, links to
/// its neighbours as the wiring says, and when the run starts sends node 1 `big_frames`
/// frames of 4 MiB for run 2^64-1, then messages of the run that nobody asked for until
/// the link closes. Returns how many bytes of those messages it could write (the
/// sockets' buffers take some after node 1 has closed the link).
async fn rogue_node_0(address: String, token: String, big_frames: usize) -> u64 {
    let stream = tokio::net::TcpStream::connect(&address).await.expect("connecting");
    let purpose = Purpose::Node { name: "node-0".into(), data_addr: "127.0.0.1:9".into(), memory_bytes: 0 };
    let channel = initiate(stream, &Key::from_token(&token), purpose, false).await.expect("registered");
    let mut control = Framed::new(channel, LengthDelimitedCodec::new());
    // Every link is kept open: one that closed would end the run before the attack.
    let mut links = Vec::new();
    let mut written = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while let Ok(Some(Ok(body))) = tokio::time::timeout_at(deadline, control.next()).await {
        let reply = match codec::decode::<ToNode>(&body).expect("a control message") {
            ToNode::Ping => ToCoordinator::Pong,
            ToNode::Wire(wiring) => {
                for neighbour in &wiring.neighbours {
                    let purpose = Purpose::Link { epoch: wiring.epoch, from: 0, to: neighbour.id };
                    // As a daemon does: the neighbour may not have its wiring yet.
                    let mut link = None;
                    for _ in 0..500 {
                        let stream = tokio::net::TcpStream::connect(&neighbour.address).await.expect("dialling");
                        if let Ok(linked) = initiate(stream, &neighbour.key, purpose.clone(), false).await {
                            link = Some(linked);
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    links.push((neighbour.id, link.expect("a neighbour admitted the link within 10 s")));
                }
                ToCoordinator::Wired { epoch: wiring.epoch }
            }
            ToNode::Start { spec, .. } => {
                // Node 1 has the run's spec by then (it got its Start at the same time).
                tokio::time::sleep(Duration::from_millis(1500)).await;
                let (_, link) = links.iter_mut().find(|(id, _)| *id == 1).expect("wired to node 1 before the run");
                let big = vec![0xA5u8; 4 << 20];
                for _ in 0..big_frames {
                    link.write_all(&frame(u64::MAX, 0, 1, 7, &big)).await.expect("node 1 reads past them");
                }
                for tag in 0..FLOOD_MESSAGES {
                    if link.write_all(&frame(spec.run, 0, 1, tag, &[3; 1024])).await.is_err() {
                        break;
                    }
                    let _ = link.flush().await;
                    written += 1024;
                }
                continue;
            }
            // It stays registered until the coordinator gives up on the run.
            ToNode::Abort { .. } => return written,
            _ => continue,
        };
        let body = Bytes::from(codec::encode(&reply).expect("encodes"));
        control.send(body).await.expect("the coordinator reads");
    }
    panic!("the run never started, or was never aborted");
}

#[test]
fn a_rogue_neighbour_cannot_take_a_nodes_memory_and_is_named() {
    let mut cluster = TestCluster::start("rogue-data", 4);
    cluster.run_ok("allreduce -t ring --size 1KiB --iterations 2");
    cluster.kill_node(0);
    let victim_before = rss_kib(cluster.node_pid(1)).expect("node 1 runs");
    const BIG_FRAMES: usize = 24;
    let (address, token) = (cluster.address.clone(), cluster.token.clone());
    let rogue = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(rogue_node_0(address, token, BIG_FRAMES))
    });
    cluster.wait_for_members(4, Duration::from_secs(30));
    let failed = cluster.run("allreduce -t ring --size 1KiB --iterations 1");
    let written = rogue.join().expect("the rogue ran");
    let victim_after = rss_kib(cluster.node_pid(1)).expect("node 1 still runs");
    eprintln!(
        "node 1: {victim_before} KiB before, {victim_after} KiB after {BIG_FRAMES} frames of 4 MiB for run 2^64-1 \
         and {written} bytes of messages nobody asked for written; the run said: {}",
        failed.stderr.trim()
    );
    assert!(!failed.status.success(), "the run passed");
    let said = &failed.stderr;
    assert!(said.contains("node 0 (node-0)") && said.contains("node 1 (node-1)"), "{said}");
    assert!(said.contains("node 0 overflowed this node's queue"), "{said}");
    assert!(written < u64::from(FLOOD_MESSAGES) * 1024, "node 1 took the whole flood");
    assert!(victim_after < victim_before + 32 * 1024, "node 1 grew from {victim_before} to {victim_after} KiB");
    let log = cluster.node_stderr(1);
    assert!(log.contains(&format!("dropped={BIG_FRAMES}")) && log.contains("dropped frames of other runs"), "{log}");
}
