//! Switched networks for real (issue 46, items 3 and 5): a fat-tree, a dragonfly and a
//! cluster of machines, each a `topocomm serve` coordinator with one `topocomm-node`
//! daemon per vertex on 127.0.0.1 (the ranks, then the switches, which only forward).
//! Every collective's default algorithm runs verified on each, with the frames the
//! simulator counts for the same run; the daemons' established TCP connections are
//! exactly the network's links; a switch killed mid-run fails the run naming it; and a
//! local cluster (`topocomm run`) starts its switches itself. A fat-tree with fewer ranks
//! than hosts runs them all too, and so does a cluster whose ranks are dealt round-robin
//! across its machines (`--placement`), and so do the fat-tree under ECMP and the
//! dragonfly under Valiant (`--routes`, issue 46 item 2), re-wired with the policy.
//!
//! They need the `topocomm-node` binary next to `topocomm` (`cargo build --workspace`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{Background, Scratch, TestCluster, command, poll, run_bounded, topocomm_bin};
use serde_json::Value;
use topocomm_proto::{Topology, TopologyKind};

/// Small enough for debug builds on two shared cores.
const SIZE: &str = "16KiB";
const ITERATIONS: u64 = 2;

/// Every collective, each by its topology's default algorithm.
const COLLECTIVES: &[&str] = &[
    "broadcast",
    "reduce",
    "allgather",
    "reduce-scatter",
    "allreduce",
    "scan",
    "scatter",
    "gather",
    "alltoall",
    "shift",
    "barrier",
];

/// A switched network as the tests name it: `-t`, `--dims`, ranks, `--placement`, and
/// `--routes` if not the default.
struct Network {
    kind: &'static str,
    dims: &'static str,
    ranks: usize,
    placement: &'static str,
    routes: Option<&'static str>,
}

impl Network {
    fn topology(&self) -> Topology {
        let kind: TopologyKind = self.kind.parse().expect("a kind");
        let dims: Vec<usize> = self.dims.split('x').map(|d| d.parse().expect("a dim")).collect();
        let routes = self.routes.map(|routes| routes.parse().expect("a policy"));
        let placement = self.placement.parse().expect("a placement");
        Topology::new(kind, self.ranks, Some(&dims)).and_then(|t| t.routed(routes)?.placed(placement)).expect("a shape")
    }

    fn shape(&self) -> String {
        let routes = self.routes.map(|routes| format!(" --routes {routes}")).unwrap_or_default();
        format!("-t {} --dims {} --placement {}{routes}", self.kind, self.dims, self.placement)
    }

    /// The same network under the policy `routes`.
    fn routed(&self, routes: &'static str) -> Network {
        Network { routes: Some(routes), ..*self }
    }
}

/// `topocomm simulate <collective>` of the same run, one iteration, as JSON.
fn simulated(scratch: &Scratch, network: &Network, collective: &str) -> Value {
    let mut simulate = command(&topocomm_bin());
    simulate.arg("simulate").arg(collective).args(network.shape().split_whitespace());
    simulate.args(["-n", &network.ranks.to_string(), "--size", SIZE, "--json"]);
    run_bounded(simulate, scratch, "simulate", Duration::from_secs(60)).json()
}

fn count(json: &Value, key: &str) -> u64 {
    json[key].as_u64().unwrap_or_else(|| panic!("no {key} in {json:#}"))
}

/// Runs every collective on `cluster` (wired as `network`), each verified on every rank,
/// its frames sent and forwarded those the simulator counts for one iteration, times
/// the iterations: every frame crossed the switches the routes name, and nothing else.
fn every_collective_runs_as_simulated(cluster: &TestCluster, network: &Network) {
    let topology = network.topology();
    for collective in COLLECTIVES {
        let words = format!("{collective} {} --size {SIZE} --iterations {ITERATIONS} --warmup 1", network.shape());
        let json = cluster.run_ok(&words);
        let context = format!("{collective} on {topology}: {json:#}");
        assert_eq!(json["nodes"], network.ranks, "{context}");
        assert_eq!(json["placement"], network.placement, "{context}");
        assert_eq!(json["switches"], topology.switches(), "{context}");
        assert_eq!(json["iteration_us"].as_array().map(Vec::len), Some(ITERATIONS as usize), "{context}");
        assert_eq!(json["route_policy"], topology.routes().to_string(), "{context}");
        let simulation = simulated(&cluster.scratch, network, collective);
        assert_eq!(simulation["verified"], true, "{context}");
        assert_eq!(simulation["placement"], network.placement, "{context}");
        for key in ["frames_sent", "frames_forwarded"] {
            assert_eq!(count(&json, key), ITERATIONS * count(&simulation, key), "{key} of {context}\n{simulation:#}");
        }
        assert_eq!(simulation["route_policy"], json["route_policy"], "{context}");
        // The link that carried the most: the simulator's, its bytes the iterations' (the
        // routes crossed the same links).
        let busiest = |json: &Value| (json["busiest_link"]["from"].clone(), json["busiest_link"]["to"].clone());
        assert_eq!(busiest(&json), busiest(&simulation), "busiest link of {context}\n{simulation:#}");
        assert_eq!(
            json["busiest_link"]["bytes"].as_u64(),
            simulation["busiest_link"]["bytes"].as_u64().map(|bytes| ITERATIONS * bytes),
            "busiest link of {context}"
        );
        if *collective != "barrier" {
            // Every message between two ranks crosses a switch.
            assert!(count(&json, "frames_forwarded") >= count(&json, "frames_sent"), "{context}");
        }
        eprintln!(
            "{collective} on {topology}: verified, {} frames sent, {} forwarded, as simulated",
            count(&json, "frames_sent"),
            count(&json, "frames_forwarded")
        );
    }
}

/// The established TCP connections between `pids` (by vertex), read from
/// /proc/net/tcp{,6} and each process's descriptors: every connection once, as the pair
/// of vertices at its ends (lower first), with how many sockets were seen of it.
fn connections_between(pids: &[u32]) -> BTreeMap<(usize, usize), usize> {
    let mut owner: BTreeMap<u64, usize> = BTreeMap::new();
    for (vertex, pid) in pids.iter().enumerate() {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else { continue };
            let target = target.to_string_lossy().into_owned();
            if let Some(inode) = target.strip_prefix("socket:[").and_then(|rest| rest.strip_suffix(']')) {
                owner.insert(inode.parse().expect("a socket inode"), vertex);
            }
        }
    }
    // (local, remote) address of every established socket some vertex owns.
    let mut ends: BTreeMap<(String, String), usize> = BTreeMap::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(remote), Some(state), Some(inode)) =
                (fields.get(1), fields.get(2), fields.get(3), fields.get(9))
            else {
                continue;
            };
            if *state != "01" {
                continue;
            }
            if let Some(&vertex) = inode.parse::<u64>().ok().and_then(|inode| owner.get(&inode)) {
                ends.insert((local.to_string(), remote.to_string()), vertex);
            }
        }
    }
    let mut links: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for ((local, remote), &vertex) in &ends {
        // The other end, when a vertex owns it too (a control link's is the coordinator's).
        if let Some(&other) = ends.get(&(remote.clone(), local.clone())) {
            *links.entry((vertex.min(other), vertex.max(other))).or_default() += 1;
        }
    }
    links
}

/// What the host's socket table shows of `cluster`'s daemons is the graph's links: one
/// connection per edge of `topology`, between its two vertices' daemons, and no other.
fn sockets_are_the_links(cluster: &TestCluster, topology: &Topology) {
    let pids: Vec<u32> = (0..topology.vertices()).map(|index| cluster.node_pid(index)).collect();
    let connections = connections_between(&pids);
    let edges: BTreeSet<(usize, usize)> = topology.edges().into_iter().collect();
    let seen: BTreeSet<(usize, usize)> = connections.keys().copied().collect();
    assert_eq!(seen, edges, "the daemons' connections are not {topology}'s links");
    // Both ends of each, once: no link doubled.
    assert!(connections.values().all(|&sockets| sockets == 2), "{connections:?}");
    eprintln!("{topology}: {} connections between daemons, one per link", connections.len());
}

#[test]
fn a_fat_tree_runs_every_collective_through_its_switches_and_its_sockets_are_its_links() {
    let network = Network { kind: "fat-tree", dims: "4", ranks: 16, placement: "linear", routes: None };
    let topology = network.topology();
    assert_eq!((topology.p(), topology.switches(), topology.edges().len()), (16, 20, 48));
    let cluster = TestCluster::start("fat-tree", topology.vertices());
    every_collective_runs_as_simulated(&cluster, &network);
    sockets_are_the_links(&cluster, &topology);
    // Under ECMP (re-wired with it): as simulated, the links the same.
    every_collective_runs_as_simulated(&cluster, &network.routed("ecmp"));
    sockets_are_the_links(&cluster, &topology);
}

#[test]
fn a_dragonfly_runs_every_collective_and_a_dead_switch_fails_the_run_naming_it() {
    let network = Network { kind: "dragonfly", dims: "2x2x1", ranks: 12, placement: "linear", routes: None };
    let topology = network.topology();
    assert_eq!((topology.p(), topology.switches()), (12, 6));
    let mut cluster = TestCluster::start("dragonfly", topology.vertices());
    every_collective_runs_as_simulated(&cluster, &network);
    sockets_are_the_links(&cluster, &topology);

    // A switch every global route of its group crosses dies in a long run.
    let victim = topology.p();
    let long =
        cluster.run_command(&format!("alltoall {} --size 64KiB --iterations 100000 --warmup 0", network.shape()));
    let long = Background::start(long, &cluster.scratch, "long-run");
    let started = poll(Duration::from_secs(20), || cluster.node_stderr(victim).contains("run started").then_some(()));
    assert!(started.is_some(), "the long run never started on switch {victim}");
    std::thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    cluster.kill_node(victim);
    let failed = long.finish(Duration::from_secs(40));
    let took = killed.elapsed();
    eprintln!("{took:?} after the kill the run said: {}", failed.stderr.trim());
    assert!(!failed.status.success(), "the run passed although switch {victim} was killed:\n{}", failed.stdout);
    assert!(took < Duration::from_secs(20), "it took {took:?} to fail");
    assert!(
        failed.stderr.contains(&format!("node {victim} ")) || failed.stderr.contains(&TestCluster::node_name(victim)),
        "the error does not name switch {victim}:\n{}",
        failed.stderr
    );
}

/// Under Valiant (the cluster re-wired with it from minimal routes): every collective as
/// simulated, whose forwards its detours add to, over the same links; and so under
/// Valiant with the ranks placed at random.
#[test]
fn a_dragonfly_under_valiant_runs_every_collective_as_simulated() {
    let network = Network { kind: "dragonfly", dims: "2x2x1", ranks: 12, placement: "linear", routes: None };
    let topology = network.topology();
    let cluster = TestCluster::start("dragonfly-valiant", topology.vertices());
    cluster.run_ok(&format!("shift {} --size {SIZE} --iterations 1 --warmup 0", network.shape()));
    every_collective_runs_as_simulated(&cluster, &network.routed("valiant:1"));
    sockets_are_the_links(&cluster, &topology);
    // Placed at random as well (re-wired again): the routes run between the ranks' hosts,
    // through the intermediate groups the flows of ranks draw, as simulated.
    let placed = Network { placement: "random:3", ..network.routed("valiant:1") };
    every_collective_runs_as_simulated(&cluster, &placed);
    sockets_are_the_links(&cluster, &placed.topology());
}

#[test]
fn a_cluster_of_machines_runs_every_collective_through_its_switches() {
    let network = Network { kind: "cluster", dims: "4x4", ranks: 16, placement: "linear", routes: None };
    let topology = network.topology();
    assert_eq!((topology.p(), topology.switches()), (16, 5));
    let cluster = TestCluster::start("machines", topology.vertices());
    every_collective_runs_as_simulated(&cluster, &network);
    sockets_are_the_links(&cluster, &topology);
}

/// A cluster of 4 machines of 4 cores whose ranks are dealt round-robin: machine m holds
/// ranks m, m + 4, m + 8, m + 12, so consecutive ranks talk across machines. Every
/// collective runs verified with the simulator's frames (the routes and the hierarchical
/// algorithms' groups are the placement's on the daemons as in the simulator), the run
/// says its placement, and the sockets are still exactly the graph's links, each rank's
/// to its own machine's switch.
#[test]
fn a_cluster_whose_ranks_are_dealt_round_robin_runs_every_collective_as_simulated() {
    let network = Network { kind: "cluster", dims: "4x4", ranks: 16, placement: "round-robin", routes: None };
    let topology = network.topology();
    assert_eq!((topology.neighbours(1), topology.neighbours(4)), (vec![17], vec![16]));
    let cluster = TestCluster::start("machines-round-robin", topology.vertices());
    every_collective_runs_as_simulated(&cluster, &network);
    sockets_are_the_links(&cluster, &topology);
}

/// Fewer ranks than hosts: 11 ranks on the 16 hosts of a fat-tree (five hosts with no
/// rank and so no daemon), with all 20 switches: every collective runs as simulated.
#[test]
fn a_fat_tree_with_fewer_ranks_than_hosts_runs_every_collective() {
    let network = Network { kind: "fat-tree", dims: "4", ranks: 11, placement: "linear", routes: None };
    let topology = network.topology();
    assert_eq!((topology.p(), topology.switches(), topology.hosts()), (11, 20, 16));
    let cluster = TestCluster::start("fat-tree-11", topology.vertices());
    every_collective_runs_as_simulated(&cluster, &network);
    sockets_are_the_links(&cluster, &topology);
}

/// `topocomm run` starts a local cluster of the network's vertices itself (11 ranks on
/// the 16 hosts of a fat-tree, and its 20 switches) and says so; every rank is verified,
/// the frames are the simulator's, and every switch logged its part.
#[test]
fn a_local_run_starts_its_switches_with_fewer_ranks_than_hosts() {
    let network = Network { kind: "fat-tree", dims: "4", ranks: 11, placement: "linear", routes: None };
    let scratch = Scratch::new("local-switched");
    let logs = scratch.path.join("logs");
    let mut local = command(&topocomm_bin());
    local.args(
        format!("run allreduce {} -n 11 --size {SIZE} --iterations {ITERATIONS}", network.shape()).split_whitespace(),
    );
    local.args(["--warmup", "1", "--json", "--timeout", "10s", "--logs"]).arg(&logs);
    let finished = run_bounded(local, &scratch, "local", Duration::from_secs(90));
    let json = finished.json();
    assert_eq!(
        (json["verified"].clone(), json["nodes"].clone(), json["switches"].clone()),
        (true.into(), 11.into(), 20.into()),
        "{json:#}"
    );
    assert!(finished.stderr.contains("local cluster: 11 node processes + 20 switch processes"), "{}", finished.stderr);
    let simulation = simulated(&scratch, &network, "allreduce");
    for key in ["frames_sent", "frames_forwarded"] {
        assert_eq!(count(&json, key), ITERATIONS * count(&simulation, key), "{key}: {json:#}\n{simulation:#}");
    }
    for switch in 0..20 {
        let log = common::read_text(&logs.join(format!("switch-{switch:02}.log")));
        assert!(log.contains("run started") && log.contains("switch=true"), "switch-{switch:02}: {log}");
    }
}
