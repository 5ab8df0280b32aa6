//! The route policies against what they promise: ECMP's routes shortest up*/down* paths
//! spread over the core switches, Valiant's through an intermediate group and drawn from
//! the seed, every route the next hops iterated, and the policies a topology does not
//! take refused.

use std::collections::BTreeSet;

use super::tests::{bfs, topology};
use super::{Flow, Routes};
use crate::{Topology, TopologyKind};

fn routed(topology: Topology, routes: Routes) -> Topology {
    topology.with_routes(routes).unwrap_or_else(|e| panic!("{routes}: {e}"))
}

/// Every flow's route of `tags` between every two ranks: along links, through switches
/// only, each hop the next hop, no longer than the diameter, arriving over the link
/// `arrives_via` says, one of the pair's `route_choices`; and its length.
fn checked_routes(topology: &Topology, tags: u32) -> Vec<(Flow, Vec<usize>)> {
    let mut out = Vec::new();
    for src in 0..topology.p() {
        for dst in 0..topology.p() {
            let choices = topology.route_choices(src, dst);
            for tag in 0..tags {
                let flow = Flow::new(src, dst, tag);
                let route = topology.flow_route(flow);
                assert_eq!((route[0], *route.last().unwrap()), (src, dst), "{topology}");
                for hop in route.windows(2) {
                    assert!(topology.is_neighbour(hop[0], hop[1]), "{topology}: {route:?} jumps {hop:?}");
                    assert_eq!(topology.next_hop(hop[0], flow), hop[1], "{topology}: {flow:?}");
                }
                let between = if route.len() > 2 { &route[1..route.len() - 1] } else { &[] };
                assert!(between.iter().all(|&v| topology.is_switch(v)), "{topology}: {route:?}");
                assert!(route.len() - 1 <= topology.diameter(), "{topology}: {route:?} longer than the diameter");
                let before = if src == dst { dst } else { route[route.len() - 2] };
                assert_eq!(topology.arrives_via(src, dst), before, "{topology}: {flow:?} is {route:?}");
                assert!(choices.contains(&route), "{topology}: {flow:?} is {route:?}, none of {choices:?}");
                out.push((flow, route));
            }
        }
    }
    out
}

#[test]
fn ecmp_routes_are_shortest_up_down_paths_spread_over_the_cores() {
    for k in [4, 6] {
        let hosts = k * k * k / 4;
        let d_mod_k = topology(TopologyKind::FatTree, hosts, &[k]);
        assert_eq!(d_mod_k.routes(), Routes::DModK);
        let ecmp = routed(d_mod_k.clone(), Routes::Ecmp);
        assert_eq!((ecmp.routes(), ecmp.diameter()), (Routes::Ecmp, 6));
        let level = |v: usize| ecmp.coords(v)[0];
        let routes = checked_routes(&ecmp, 4);
        for (flow, route) in &routes {
            let shortest = bfs(&ecmp, flow.src)[flow.dst];
            assert_eq!(route.len() - 1, shortest, "{flow:?}: {route:?}");
            let levels: Vec<usize> = route.iter().map(|&v| level(v)).collect();
            let top = levels.iter().position(|&l| l == *levels.iter().max().unwrap()).unwrap();
            assert!(levels[..=top].windows(2).all(|w| w[1] == w[0] + 1), "{flow:?}: {levels:?}");
            assert!(levels[top..].windows(2).all(|w| w[1] + 1 == w[0]), "{flow:?}: {levels:?}");
        }
        // d-mod-k reaches each destination through one core switch (a tree per
        // destination); ECMP through many, and one pair's flows over every core.
        let cores_by_destination = |topology: &Topology, tags: u32| -> BTreeSet<(usize, usize)> {
            checked_routes(topology, tags)
                .into_iter()
                .filter(|(_, route)| route.len() == 7)
                .map(|(flow, route)| (flow.dst, route[3]))
                .collect()
        };
        let (by_d_mod_k, by_ecmp) = (cores_by_destination(&d_mod_k, 1), cores_by_destination(&ecmp, 1));
        assert_eq!(by_d_mod_k.len(), hosts, "k = {k}");
        assert!(by_ecmp.len() > 2 * hosts, "k = {k}: {} (destination, core) pairs", by_ecmp.len());
        let cores: BTreeSet<usize> = (0..128).map(|tag| ecmp.flow_route(Flow::new(0, hosts - 1, tag))[3]).collect();
        assert_eq!(cores.len(), k * k / 4, "k = {k}: {cores:?}");
        // The choices: one under an edge switch, k/2 in a pod, (k/2)² across pods; d-mod-k one.
        let half = k / 2;
        let choices = |dst| ecmp.route_choices(0, dst).len();
        assert_eq!((choices(1), choices(half), choices(hosts - 1)), (1, half, half * half), "k = {k}");
        assert_eq!(d_mod_k.route_choices(0, hosts - 1), [d_mod_k.route(0, hosts - 1)]);
        // The flows of one tag, pairs between pods: ECMP spreads them as evenly as d-mod-k.
        let load = |topology: &Topology| {
            let mut per_core = vec![0usize; topology.vertices()];
            for src in 0..hosts {
                for dst in 0..hosts {
                    if let Some(&core) =
                        topology.route(src, dst).get(3).filter(|_| src / (k * k / 4) != dst / (k * k / 4))
                    {
                        per_core[core] += 1;
                    }
                }
            }
            per_core.into_iter().filter(|&n| n > 0).collect::<Vec<_>>()
        };
        assert_eq!(load(&ecmp).len(), k * k / 4, "k = {k}");
        assert_eq!(load(&d_mod_k).len(), k * k / 4, "k = {k}");
    }
}

#[test]
fn valiant_routes_go_through_an_intermediate_group_drawn_from_the_seed() {
    let (a, p, h) = (4, 2, 2);
    let hosts = (a * h + 1) * a * p;
    let minimal = topology(TopologyKind::Dragonfly, hosts, &[a, p, h]);
    assert_eq!((minimal.routes(), minimal.diameter()), (Routes::Minimal, 5));
    let valiant = |seed| routed(minimal.clone(), Routes::Valiant { seed });
    let (one, other) = (valiant(1), valiant(2));
    assert_eq!(one.diameter(), 7);
    let group = |v: usize| one.coords(v)[0];
    let routes = checked_routes(&one, 3);
    let mut through = 0;
    for (flow, route) in &routes {
        let minimal_route = minimal.flow_route(*flow);
        let groups: Vec<usize> = route.iter().map(|&v| group(v)).collect();
        let (first, last) = (group(flow.src), group(flow.dst));
        let visited: BTreeSet<usize> = groups.iter().copied().collect();
        if visited.len() == 3 {
            // Source group, then the intermediate one, then the destination's: each once.
            let mut runs = groups.clone();
            runs.dedup();
            assert_eq!(runs.len(), 3, "{flow:?}: {groups:?}");
            assert_eq!((runs[0], runs[2]), (first, last), "{flow:?}: {groups:?}");
            through += 1;
        } else {
            assert_eq!(route, &minimal_route, "{flow:?}");
        }
        if first == last {
            assert_eq!(route, &minimal_route, "{flow:?}: within a group Valiant is minimal");
        }
    }
    // Of g = 9 groups the draw is a third one for 7 in 9 flows between groups.
    let between = routes.iter().filter(|(flow, _)| group(flow.src) != group(flow.dst)).count();
    assert!(through * 9 > between * 6 && through * 9 < between * 8, "{through} of {between}");
    let longest = routes.iter().map(|(_, route)| route.len() - 1).max();
    assert_eq!(longest, Some(one.diameter()));
    // Between two groups: the minimal route and one by way of each of the 7 other groups.
    let (src, dst) = (0, hosts - 1);
    assert_eq!(one.route_choices(src, dst).len(), 8, "{:?}", one.route_choices(src, dst));
    assert_eq!(one.route_choices(src, 1), [minimal.route(src, 1)]);
    // Deterministic per seed, different between seeds.
    let again = valiant(1);
    let differ = routes
        .iter()
        .filter(|(flow, route)| {
            assert_eq!(&again.flow_route(*flow), route, "{flow:?}");
            &other.flow_route(*flow) != route
        })
        .count();
    assert!(differ * 2 > through, "{differ} of {} flows differ between seeds 1 and 2", routes.len());
}

#[test]
fn a_policy_of_another_topology_is_refused_in_one_line() {
    let refused = |kind, p, dims: Option<&[usize]>, routes: &str| {
        let topology = Topology::new(kind, p, dims).unwrap();
        topology.with_routes(routes.parse().unwrap()).unwrap_err().to_string()
    };
    assert_eq!(
        refused(TopologyKind::Dragonfly, 6, None, "ecmp"),
        "--routes ecmp applies to fat-tree; a dragonfly routes minimal or valiant[:SEED]"
    );
    assert_eq!(
        refused(TopologyKind::FatTree, 16, None, "valiant:3"),
        "--routes valiant:3 applies to dragonfly; a fat-tree routes d-mod-k or ecmp"
    );
    assert_eq!(
        refused(TopologyKind::Torus, 16, None, "ecmp"),
        "--routes ecmp applies to fat-tree; a torus routes dimension-order only"
    );
    assert_eq!(
        refused(TopologyKind::Cluster, 8, Some(&[2, 4]), "minimal"),
        "--routes minimal applies to dragonfly; a cluster routes shortest-path only"
    );
    assert!(
        refused(TopologyKind::Full, 4, None, "dimension-order")
            .contains("a fully connected network routes shortest-path only")
    );
    for (kind, p, routes) in [
        (TopologyKind::FatTree, 16, "d-mod-k"),
        (TopologyKind::Ring, 5, "dimension-order"),
        (TopologyKind::Hypercube, 8, "dimension-order"),
        (TopologyKind::Full, 4, "shortest-path"),
    ] {
        let topology = Topology::new(kind, p, None).unwrap();
        assert_eq!(topology.clone().with_routes(routes.parse().unwrap()), Ok(topology));
    }
}

/// Routes and placement together: set in either order they give one network; a policy
/// that spreads flows (ECMP, Valiant) routes between the hosts the ranks sit on while
/// hashing the flow as its header names it (ranks and tag); its routes are valid and no
/// longer than the diameter of the hosts in use, which the longest of their choices
/// reaches (Valiant's beyond the minimal one).
#[test]
fn a_policy_routes_between_the_hosts_a_placement_gives_the_ranks() {
    use crate::network::{Family, Placement};
    let shapes = [
        (TopologyKind::FatTree, 16, vec![4], Routes::Ecmp),
        (TopologyKind::FatTree, 11, vec![4], Routes::Ecmp),
        (TopologyKind::Dragonfly, 12, vec![2, 2, 1], Routes::Valiant { seed: 5 }),
        (TopologyKind::Dragonfly, 20, vec![4, 2, 2], Routes::Valiant { seed: 1 }),
    ];
    for (kind, p, dims, routes) in shapes {
        for placement in [Placement::RoundRobin, Placement::Random { seed: 3 }] {
            let shape = topology(kind, p, &dims);
            let both = routed(shape.clone(), routes).placed(placement).unwrap();
            assert_eq!(Ok(&both), routed(shape.clone().placed(placement).unwrap(), routes).placed(placement).as_ref());
            assert_eq!(Ok(&both), shape.clone().placed(placement).unwrap().with_routes(routes).as_ref());
            assert_eq!((both.routes(), both.placement()), (routes, placement));
            let minimal = shape.placed(placement).unwrap();
            let switched = both.switched().unwrap();
            for (flow, route) in checked_routes(&both, 3) {
                let Family::Dragonfly(dragonfly) = switched.family() else { continue };
                let Routes::Valiant { seed } = routes else { unreachable!() };
                let group = |v: usize| both.coords(v)[0];
                let (src_host, dst_host) = (switched.host_of(flow.src), switched.host_of(flow.dst));
                match dragonfly.intermediate(src_host, dst_host, flow.hash(seed)) {
                    Some(via) if group(flow.src) != group(flow.dst) => {
                        let mut runs: Vec<usize> = route.iter().map(|&v| group(v)).collect();
                        runs.dedup();
                        assert_eq!(runs, [group(flow.src), via, group(flow.dst)], "{both}: {flow:?} is {route:?}");
                    }
                    _ => assert_eq!(route, minimal.flow_route(flow), "{both}: {flow:?}"),
                }
            }
            let both_ref = &both;
            let longest = (0..p)
                .flat_map(|src| (0..p).flat_map(move |dst| both_ref.route_choices(src, dst)))
                .map(|route| route.len() - 1)
                .max();
            assert_eq!(longest, Some(both.diameter()), "{both}");
            if matches!(routes, Routes::Valiant { .. }) {
                assert!(both.diameter() > minimal.diameter(), "{both}: {} hops", both.diameter());
            }
        }
    }
}
