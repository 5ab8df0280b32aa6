//! The switched families against constructions of their own from the papers' words, and
//! their routes against breadth-first search.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{Flow, Placement};
use crate::{Topology, TopologyKind};

pub(super) fn topology(kind: TopologyKind, p: usize, dims: &[usize]) -> Topology {
    Topology::new(kind, p, Some(dims)).unwrap_or_else(|e| panic!("{kind} {dims:?} for {p}: {e}"))
}

/// Every link once, `(a, b, class name)` with `a < b`, from the neighbour lists; checks
/// on the way that every link is seen from both ends with one class, and that
/// `link_class` agrees.
fn links(topology: &Topology) -> BTreeSet<(usize, usize, String)> {
    let names = topology.class_names();
    let switched = topology.switched().expect("a switched kind");
    let mut out = BTreeSet::new();
    for a in 0..topology.vertices() {
        for (b, class) in switched.neighbours(a) {
            assert_ne!(a, b, "{topology}: {a} links to itself");
            assert!(switched.neighbours(b).contains(&(a, class)), "{topology}: {a}-{b} is seen from {a} only");
            assert_eq!(topology.link_class(a, b), Some(class), "{topology}: link_class({a}, {b})");
            out.insert((a.min(b), a.max(b), names[class].to_owned()));
        }
    }
    out
}

fn per_class(links: &BTreeSet<(usize, usize, String)>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (_, _, class) in links {
        *out.entry(class.clone()).or_default() += 1;
    }
    out
}

/// Hop distances from `from` to every vertex, by breadth-first search.
pub(super) fn bfs(topology: &Topology, from: usize) -> Vec<usize> {
    let mut distance = vec![usize::MAX; topology.vertices()];
    distance[from] = 0;
    let mut queue = VecDeque::from([from]);
    while let Some(at) = queue.pop_front() {
        for next in topology.neighbours(at) {
            if distance[next] == usize::MAX {
                distance[next] = distance[at] + 1;
                queue.push_back(next);
            }
        }
    }
    distance
}

/// Every route between ranks follows links, crosses only switches, and (where the
/// family routes shortest) is as short as breadth-first search says.
fn check_routes(topology: &Topology, shortest: bool) {
    let p = topology.p();
    for src in 0..p {
        let distance = bfs(topology, src);
        for (dst, &fewest_hops) in distance.iter().enumerate().take(p) {
            let route = topology.route(src, dst);
            assert_eq!((route[0], *route.last().unwrap()), (src, dst), "{topology}");
            for hop in route.windows(2) {
                assert!(topology.is_neighbour(hop[0], hop[1]), "{topology}: {route:?} jumps {hop:?}");
            }
            let between = if route.len() > 2 { &route[1..route.len() - 1] } else { &[] };
            assert!(between.iter().all(|&v| topology.is_switch(v)), "{topology}: {route:?}");
            assert!(route.len() - 1 <= topology.diameter(), "{topology}: {route:?} longer than the diameter");
            if shortest {
                assert_eq!(route.len() - 1, fewest_hops, "{topology}: {src} -> {dst} is {route:?}");
            }
        }
    }
    let longest = (0..p).flat_map(|a| (0..p).map(move |b| (a, b))).map(|(a, b)| topology.distance(a, b)).max();
    assert_eq!(longest.unwrap_or(0), topology.diameter(), "{topology}");
}

#[test]
fn a_fat_tree_is_the_tree_of_al_fares_et_al() {
    for k in [2, 4, 6, 8] {
        let half = k / 2;
        let hosts = k * k * k / 4;
        let tree = topology(TopologyKind::FatTree, hosts, &[k]);
        assert_eq!((tree.p(), tree.switches(), tree.hosts()), (hosts, 5 * k * k / 4, hosts), "k = {k}");
        // The paper's wiring, by where each vertex sits (coords), built on its own.
        let at: BTreeMap<Vec<usize>, usize> = (0..tree.vertices()).map(|v| (tree.coords(v), v)).collect();
        assert_eq!(at.len(), tree.vertices(), "k = {k}: two vertices sit at one place");
        let mut expected = BTreeSet::new();
        let mut link = |x: Vec<usize>, y: Vec<usize>, class| {
            let (a, b) = (at[&x], at[&y]);
            expected.insert((a.min(b), a.max(b), String::from(class)));
        };
        for pod in 0..k {
            for e in 0..half {
                for port in 0..half {
                    link(vec![0, pod, e, port], vec![1, pod, e], "edge");
                }
                for a in 0..half {
                    link(vec![1, pod, e], vec![2, pod, a], "aggregation");
                }
            }
            for a in 0..half {
                for j in 0..half {
                    link(vec![2, pod, a], vec![3, a, j], "core");
                }
            }
        }
        let built = links(&tree);
        assert_eq!(built, expected, "k = {k}");
        assert_eq!(built.len(), 3 * k * k * k / 4);
        let counts = per_class(&built);
        assert!(counts.values().all(|&n| n == hosts), "k = {k}: {counts:?}");
        for v in tree.p()..tree.vertices() {
            assert_eq!(tree.neighbours(v).len(), k, "k = {k}: switch {v} has not k ports");
        }
        check_routes(&tree, true);
    }
}

#[test]
fn fat_tree_routes_go_up_then_down_and_spread_by_destination() {
    let k = 8;
    let half = k / 2;
    let tree = topology(TopologyKind::FatTree, k * k * k / 4, &[k]);
    let level = |v: usize| tree.coords(v)[0];
    for src in (0..tree.p()).step_by(3) {
        for dst in 0..tree.p() {
            let levels: Vec<usize> = tree.route(src, dst).iter().map(|&v| level(v)).collect();
            let top = levels.iter().position(|&l| l == *levels.iter().max().unwrap()).unwrap();
            assert!(levels[..=top].windows(2).all(|w| w[1] == w[0] + 1), "{src} -> {dst}: {levels:?}");
            assert!(levels[top..].windows(2).all(|w| w[1] + 1 == w[0]), "{src} -> {dst}: {levels:?}");
        }
    }
    // d-mod-k: from one host, the (k/2)² hosts of another pod are each reached through a
    // core switch of their own.
    let pod_hosts = half * half;
    let cores: BTreeSet<usize> = (pod_hosts..2 * pod_hosts).map(|dst| tree.route(0, dst)[3]).collect();
    assert_eq!(cores.len(), pod_hosts);
    assert!(cores.iter().all(|&c| tree.coords(c)[0] == 3));
}

#[test]
fn a_dragonfly_is_the_network_of_kim_et_al() {
    for (a, p, h) in [(1, 1, 1), (2, 1, 1), (2, 2, 1), (4, 2, 2), (3, 2, 2), (2, 3, 3)] {
        let groups = a * h + 1;
        let hosts = groups * a * p;
        let dragonfly = topology(TopologyKind::Dragonfly, hosts, &[a, p, h]);
        assert_eq!(dragonfly.switches(), groups * a);
        let built = links(&dragonfly);
        let counts = per_class(&built);
        let want = |class: &str| counts.get(class).copied().unwrap_or(0);
        assert_eq!(want("terminal"), hosts, "{a}x{p}x{h}");
        assert_eq!(want("local"), groups * a * (a - 1) / 2, "{a}x{p}x{h}");
        assert_eq!(want("global"), groups * (groups - 1) / 2, "{a}x{p}x{h}");
        let group = |v: usize| dragonfly.coords(v)[0];
        // Every two groups share exactly one global link; a group's routers are all linked.
        let mut pairs = BTreeSet::new();
        for (x, y, class) in &built {
            let (x, y) = (*x, *y);
            match class.as_str() {
                "global" => assert!(pairs.insert((group(x).min(group(y)), group(x).max(group(y))))),
                "local" => assert_eq!(group(x), group(y)),
                _ => {}
            }
        }
        assert_eq!(pairs.len(), groups * (groups - 1) / 2);
        for router in dragonfly.p()..dragonfly.vertices() {
            assert_eq!(dragonfly.neighbours(router).len(), p + a - 1 + h, "{a}x{p}x{h}: router {router}");
        }
        check_routes(&dragonfly, false);
        // Minimal: at most one global hop, and at most one local hop in each group.
        for src in 0..hosts {
            for dst in 0..hosts {
                let route = dragonfly.route(src, dst);
                let classes: Vec<&str> = route
                    .windows(2)
                    .map(|w| dragonfly.class_names()[dragonfly.link_class(w[0], w[1]).unwrap()])
                    .collect();
                assert!(classes.iter().filter(|&&c| c == "global").count() <= 1, "{classes:?}");
                let same_group = group(src) == group(dst);
                assert_eq!(classes.contains(&"global"), !same_group, "{src} -> {dst}: {classes:?}");
            }
        }
    }
}

#[test]
fn a_cluster_keeps_a_machines_traffic_inside_it_and_shares_its_port() {
    for (machines, cores) in [(1, 1), (1, 4), (4, 4), (3, 5), (4, 8)] {
        let cluster = topology(TopologyKind::Cluster, machines * cores, &[machines, cores]);
        assert_eq!(cluster.switches(), machines + usize::from(machines > 1));
        let counts = per_class(&links(&cluster));
        assert_eq!(counts.get("intra").copied(), Some(machines * cores));
        assert_eq!(counts.get("inter").copied().unwrap_or(0), if machines > 1 { machines } else { 0 });
        check_routes(&cluster, true);
        let class = |a: usize, b: usize| cluster.class_names()[cluster.link_class(a, b).unwrap()];
        for src in 0..cluster.p() {
            // Every route to another machine leaves over the one port of src's machine.
            let ports: BTreeSet<(usize, usize)> = (0..cluster.p())
                .filter(|dst| dst / cores != src / cores)
                .map(|dst| {
                    let route = cluster.route(src, dst);
                    (route[1], route[2])
                })
                .collect();
            assert!(ports.len() <= 1, "{ports:?}");
            for dst in 0..cluster.p() {
                let route = cluster.route(src, dst);
                let inter = route.windows(2).filter(|w| class(w[0], w[1]) == "inter").count();
                assert_eq!(inter, if src / cores == dst / cores { 0 } else { 2 }, "{src} -> {dst}: {route:?}");
            }
        }
    }
}

#[test]
fn fewer_ranks_than_hosts_leave_the_rest_out() {
    let tree = topology(TopologyKind::FatTree, 5, &[4]);
    assert_eq!((tree.p(), tree.hosts(), tree.switches(), tree.vertices()), (5, 16, 20, 25));
    // Host 4 is the first of pod 1: its edge switch's other host has no rank, so is no vertex.
    let edge = tree.switched().unwrap().attachment(4);
    let ranks: Vec<usize> = tree.neighbours(edge).into_iter().filter(|&v| v < 5).collect();
    assert_eq!(ranks, [4]);
    assert_eq!(tree.diameter(), 6);
    check_routes(&tree, true);
    let dragonfly = topology(TopologyKind::Dragonfly, 7, &[2, 2, 1]);
    check_routes(&dragonfly, false);
}

#[test]
fn bad_shapes_say_what_fits() {
    let error = |kind, p, dims: Option<&[usize]>| Topology::new(kind, p, dims).unwrap_err().to_string();
    assert!(
        error(TopologyKind::FatTree, 4, Some(&[3])).contains("even K"),
        "{}",
        error(TopologyKind::FatTree, 4, Some(&[3]))
    );
    assert!(error(TopologyKind::FatTree, 4, Some(&[0])).contains("even K"));
    assert!(error(TopologyKind::FatTree, 4, Some(&[4, 4])).contains("one dim"));
    assert!(error(TopologyKind::FatTree, 17, Some(&[4])).contains("do not fit on the 16 hosts"));
    assert!(error(TopologyKind::Dragonfly, 4, Some(&[2, 0, 1])).contains("at least 1"));
    assert!(error(TopologyKind::Dragonfly, 4, Some(&[2, 2])).contains("AxPxH"));
    assert!(error(TopologyKind::Dragonfly, 13, Some(&[2, 2, 1])).contains("do not fit on the 12 hosts"));
    assert!(error(TopologyKind::Cluster, 4, None).contains("MxC"));
    assert!(error(TopologyKind::Cluster, 4, Some(&[0, 4])).contains("at least one machine"));
    assert!(error(TopologyKind::Cluster, 17, Some(&[4, 4])).contains("do not fit"));
    assert!(error(TopologyKind::FatTree, 4, Some(&[1 << 20])).contains("beyond"));
}

#[test]
fn without_dims_the_smallest_shape_that_holds_the_ranks() {
    assert_eq!(Topology::new(TopologyKind::FatTree, 16, None).unwrap().dims(), [4]);
    assert_eq!(Topology::new(TopologyKind::FatTree, 17, None).unwrap().dims(), [6]);
    assert_eq!(Topology::new(TopologyKind::Dragonfly, 6, None).unwrap().dims(), [2, 1, 1]);
    assert_eq!(Topology::new(TopologyKind::Dragonfly, 7, None).unwrap().dims(), [4, 2, 2]);
}

#[test]
fn a_large_fat_tree_and_dragonfly_route_without_tables() {
    let tree = topology(TopologyKind::FatTree, 65_536, &[64]);
    assert_eq!((tree.switches(), tree.diameter()), (5_120, 6));
    assert_eq!(tree.route(0, 65_535).len(), 7);
    let dragonfly = topology(TopologyKind::Dragonfly, 16 * 8 * 129, &[16, 8, 8]);
    assert_eq!(dragonfly.diameter(), 5);
    let route = dragonfly.route(0, dragonfly.p() - 1);
    assert!(route.len() <= 6, "{route:?}");
}

/// Every shape the placement tests take: each family, full and with fewer ranks than
/// hosts.
fn placed_shapes() -> Vec<(TopologyKind, usize, Vec<usize>)> {
    vec![
        (TopologyKind::Cluster, 16, vec![4, 4]),
        (TopologyKind::Cluster, 6, vec![4, 4]),
        (TopologyKind::Cluster, 15, vec![3, 5]),
        (TopologyKind::FatTree, 16, vec![4]),
        (TopologyKind::FatTree, 11, vec![4]),
        (TopologyKind::Dragonfly, 12, vec![2, 2, 1]),
        (TopologyKind::Dragonfly, 7, vec![2, 2, 1]),
    ]
}

const PLACEMENTS: [Placement; 4] =
    [Placement::Linear, Placement::RoundRobin, Placement::Random { seed: 1 }, Placement::Random { seed: 7 }];

fn placed(kind: TopologyKind, p: usize, dims: &[usize], placement: Placement) -> Topology {
    topology(kind, p, dims).placed(placement).unwrap_or_else(|e| panic!("{kind} {dims:?} {placement}: {e}"))
}

/// Every rank on a host of its own (a bijection onto the hosts when they are all
/// taken), each host's rank the inverse, and the routes valid under every placement.
#[test]
fn every_placement_puts_each_rank_on_a_host_of_its_own_and_routes_stay_valid() {
    for (kind, p, dims) in placed_shapes() {
        for placement in PLACEMENTS {
            let topology = placed(kind, p, &dims, placement);
            let switched = topology.switched().unwrap();
            assert_eq!(switched.placement(), placement);
            let hosts: BTreeSet<usize> = (0..p).map(|rank| switched.host_of(rank)).collect();
            assert_eq!(hosts.len(), p, "{topology}: two ranks on one host");
            assert!(hosts.iter().all(|&h| h < topology.hosts()), "{topology}");
            for host in 0..topology.hosts() {
                let rank = switched.rank_on(host);
                assert_eq!(rank.is_some(), hosts.contains(&host), "{topology}: host {host}");
                if let Some(rank) = rank {
                    assert_eq!(switched.host_of(rank), host, "{topology}");
                }
            }
            // The links are the family's, the ranks on their hosts: each rank hangs off
            // its host's switch, and a rank's coordinates are its host's.
            for rank in 0..p {
                let attached: Vec<usize> = topology.neighbours(rank);
                assert_eq!(attached, [switched.attachment(rank)], "{topology}: rank {rank}");
                let linear = self::topology(kind, topology.hosts(), &dims);
                assert_eq!(topology.coords(rank), linear.coords(switched.host_of(rank)), "{topology}");
            }
            let shortest = kind != TopologyKind::Dragonfly;
            check_routes(&topology, shortest);
            for src in 0..p {
                for dst in 0..p {
                    let mut at = src;
                    let mut walked = vec![at];
                    while at != dst {
                        at = topology.next_hop(at, Flow::new(src, dst, 0));
                        walked.push(at);
                    }
                    assert_eq!(walked, topology.route(src, dst), "{topology}");
                }
            }
        }
    }
}

/// The lowest group (machine, edge switch, router) of each rank's host.
fn lowest_group(topology: &Topology, rank: usize) -> usize {
    topology.switched().unwrap().attachment(rank)
}

#[test]
fn round_robin_deals_consecutive_ranks_to_different_machines_and_fills_them_evenly() {
    for (kind, p, dims) in placed_shapes() {
        let topology = placed(kind, p, &dims, Placement::RoundRobin);
        let groups: BTreeSet<usize> = (0..topology.hosts())
            .map(|host| self::topology(kind, topology.hosts(), &dims).switched().unwrap().attachment(host))
            .collect();
        let g = groups.len();
        for rank in 1..p {
            let (here, before) = (lowest_group(&topology, rank), lowest_group(&topology, rank - 1));
            assert_ne!(here, before, "{topology}: ranks {} and {rank} share a switch", rank - 1);
        }
        // Rank r on the (r mod G)-th group: ranks G apart share one.
        for rank in g..p {
            assert_eq!(lowest_group(&topology, rank), lowest_group(&topology, rank - g), "{topology}");
        }
        let mut per_group: BTreeMap<usize, usize> = BTreeMap::new();
        for rank in 0..p {
            *per_group.entry(lowest_group(&topology, rank)).or_default() += 1;
        }
        let (fewest, most) = (per_group.values().min().unwrap(), per_group.values().max().unwrap());
        assert!(most - fewest <= 1, "{topology}: {per_group:?}");
    }
    // Cluster 4x4: ranks 0, 4, 8, 12 on machine 0, in its cores' order.
    let cluster = placed(TopologyKind::Cluster, 16, &[4, 4], Placement::RoundRobin);
    let hosts: Vec<usize> = (0..16).map(|rank| cluster.switched().unwrap().host_of(rank)).collect();
    assert_eq!(hosts, [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]);
}

#[test]
fn random_placement_is_a_permutation_stable_for_its_seed_and_different_across_seeds() {
    let hosts = |seed| {
        let cluster = placed(TopologyKind::Cluster, 32, &[4, 8], Placement::Random { seed });
        (0..32).map(|rank| cluster.switched().unwrap().host_of(rank)).collect::<Vec<_>>()
    };
    assert_eq!(hosts(1), hosts(1));
    assert_ne!(hosts(1), hosts(2));
    assert_ne!(hosts(1), (0..32).collect::<Vec<_>>());
    let mut sorted = hosts(3);
    sorted.sort_unstable();
    assert_eq!(sorted, (0..32).collect::<Vec<_>>());
    // The seed of `random` alone, and the placement in the topology's name.
    assert_eq!("random".parse::<Placement>(), Ok(Placement::Random { seed: 1 }));
    let cluster = placed(TopologyKind::Cluster, 16, &[4, 4], Placement::Random { seed: 9 });
    assert_eq!(cluster.to_string(), "cluster of 4 machines x 4 cores (16 nodes placed random:9, 5 switches)");
}

#[test]
fn placements_are_read_and_refused_in_one_line() {
    for (text, placement) in [
        ("linear", Placement::Linear),
        ("round-robin", Placement::RoundRobin),
        ("random:0", Placement::Random { seed: 0 }),
        ("random:18446744073709551615", Placement::Random { seed: u64::MAX }),
    ] {
        assert_eq!(text.parse::<Placement>(), Ok(placement));
        assert_eq!(placement.to_string(), text);
        assert_eq!(serde_json::to_string(&placement).unwrap(), format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<Placement>(&format!("\"{text}\"")).unwrap(), placement);
    }
    let refused = |text: &str| text.parse::<Placement>().unwrap_err().to_string();
    assert_eq!(
        refused("spread"),
        "unknown placement \"spread\": linear, round-robin or random[:SEED] (default seed 1)"
    );
    assert_eq!(refused("random:x"), "the seed of random:x is not a whole number from 0 to 18446744073709551615");
    assert!(refused("random:-1").contains("not a whole number"));
    assert!(refused("linear:3").contains("unknown placement"));
    let ring = Topology::new(TopologyKind::Ring, 8, None).unwrap();
    let error = ring.placed(Placement::RoundRobin).unwrap_err().to_string();
    assert!(error.contains("applies to switched networks only") && !error.contains('\n'), "{error}");
    assert!(Topology::new(TopologyKind::Ring, 8, None).unwrap().placed(Placement::Linear).is_ok());
}
