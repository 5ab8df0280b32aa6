//! The data plane under faults and in its counts, against the real binaries on
//! 127.0.0.1: a data link cut in the middle of a run (by a proxy the test puts between
//! two daemons and closes) ends the run at once, naming both ends and the cause (and one
//! cut between runs has the next run wired afresh), and so does one bit flipped in an
//! encrypted record; and the
//! frames a run reports forwarded are exactly its schedule's, as the simulator counts
//! them, run after run.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Background, Cluster, command, poll, run_bounded, topocomm_bin};
use serde_json::Value;

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

#[test]
fn a_data_link_cut_mid_run_ends_the_run_at_once_naming_both_ends() {
    let mut cluster = Cluster::start("cut-link", 4);
    cluster.run_ok("allreduce -t ring --size 1KiB --iterations 2");
    // Node 1 again, its data listener behind the proxy: node 0 dials it through there.
    let listen = format!("127.0.0.1:{}", free_port());
    let proxy = Proxy::start(listen.clone());
    cluster.kill_node(1);
    cluster.restart_node_with(1, &["--listen", &listen, "--advertise", &proxy.address]);
    cluster.wait_for_members(4, Duration::from_secs(30));
    // A long run with the deadline the issue saw: each iteration may take 30 s.
    let mut run = cluster.cli(&["run"]);
    run.args("allreduce -t ring --size 1MiB --iterations 100000 --timeout 30s --json".split_whitespace());
    let running = Background::start(run, &cluster.scratch, "long-run");
    let flowing = poll(Duration::from_secs(60), || (proxy.carried() > 32 << 20).then_some(()));
    assert!(flowing.is_some(), "the run never got going through the proxy ({} bytes)", proxy.carried());
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
    let told = |cluster: &Cluster| {
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
    let mut cluster = Cluster::start_encrypted("tamper", 4);
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
    let cluster = Cluster::start("counts", 8);
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
