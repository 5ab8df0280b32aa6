//! The dragonfly of Kim, Dally, Scott and Abts ("Technology-Driven, Highly-Scalable
//! Dragonfly Topology", ISCA 2008, §3): groups of `a` routers, the routers of a group
//! fully connected (class `local`), `p` hosts on each router (class `terminal`) and `h`
//! global links on each router (class `global`), `g = a·h + 1` groups so that every two
//! groups share exactly one global link. Kim et al. balance it with `a = 2p = 2h`; any
//! `a, p, h ≥ 1` closes.
//!
//! The global links are arranged as the "palm tree" of Camarero, Vallejo and Beivide
//! ("Topological Characterization of Hamming and Dragonfly Networks and Its Implications
//! on Routing", ACM TACO 2014): global link `l` of group `G` (`l = i·h + q`, port `q` of
//! router `i`) leads to group `G + l + 1 (mod g)`, where it is that group's link
//! `g − 2 − l`.
//!
//! Routes are minimal, as Kim et al. route by default: to the router of the destination's
//! group if it is in this group (local), otherwise to this group's router that holds the
//! global link to the destination's group (local), across it (global), then to the
//! destination's router (local): at most local, global, local between routers, five hops
//! host to host.
//!
//! Under `valiant` (Valiant and Brebner, "Universal Schemes for Parallel Communication",
//! STOC 1981, as Kim et al. route a dragonfly's adversarial traffic) a flow goes
//! minimally to an intermediate group drawn from the flow, then minimally on: at most
//! local, global, local, global, local, seven hops host to host. Where the draw is the
//! source's or the destination's own group the route is the minimal one.
//!
//! Vertices, as [`super::Family`] numbers them: hosts `0..g·a·p` (router-major, so host
//! `x` hangs off router `x / p`), then the routers (`G · a + i`).

use super::{ClassId, Vertex};

/// The class of a host's link to its router.
pub const TERMINAL: ClassId = 0;
/// The class of a link between two routers of a group.
pub const LOCAL: ClassId = 1;
/// The class of a link between two groups.
pub const GLOBAL: ClassId = 2;

/// The dragonfly's link classes, by [`ClassId`].
pub const CLASSES: &[&str] = &["terminal", "local", "global"];

/// A dragonfly of `a` routers a group, `p` hosts a router and `h` global links a router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dragonfly {
    routers_per_group: usize,
    hosts_per_router: usize,
    globals_per_router: usize,
}

impl Dragonfly {
    /// The dragonfly `a x p x h`, each at least 1 (checked by the caller).
    pub fn new(routers_per_group: usize, hosts_per_router: usize, globals_per_router: usize) -> Self {
        Dragonfly { routers_per_group, hosts_per_router, globals_per_router }
    }

    /// `a · h + 1`.
    pub fn groups(&self) -> usize {
        self.routers_per_group * self.globals_per_router + 1
    }

    /// `a · p`: the hosts of one group.
    pub fn hosts_per_group(&self) -> usize {
        self.routers_per_group * self.hosts_per_router
    }

    /// `g · a`.
    pub fn routers(&self) -> usize {
        self.groups() * self.routers_per_group
    }

    /// `g · a · p`.
    pub fn hosts(&self) -> usize {
        self.routers() * self.hosts_per_router
    }

    fn router_vertex(&self, router: usize) -> Vertex {
        self.hosts() + router
    }

    /// The router a host hangs off, as a vertex.
    pub fn attachment(&self, host: usize) -> Vertex {
        self.router_vertex(host / self.hosts_per_router)
    }

    /// The router at the other end of global port `q` of router `router`, and which
    /// port of its own that is.
    fn global_peer(&self, router: usize, q: usize) -> (usize, usize) {
        let (a, h, g) = (self.routers_per_group, self.globals_per_router, self.groups());
        let (group, i) = (router / a, router % a);
        let link = i * h + q;
        let peer_group = (group + link + 1) % g;
        let peer_link = g - 2 - link;
        (peer_group * a + peer_link / h, peer_link % h)
    }

    /// The router of `group` that holds the global link to `to_group` (`≠ group`), and
    /// which global port of that router it is.
    fn gateway(&self, group: usize, to_group: usize) -> (usize, usize) {
        let (a, h, g) = (self.routers_per_group, self.globals_per_router, self.groups());
        let link = (to_group + g - group - 1) % g;
        (group * a + link / h, link % h)
    }

    /// Every vertex linked to `v`, with the link's class.
    pub fn neighbours(&self, v: Vertex) -> Vec<(Vertex, ClassId)> {
        let (a, p) = (self.routers_per_group, self.hosts_per_router);
        if v < self.hosts() {
            return vec![(self.attachment(v), TERMINAL)];
        }
        let router = v - self.hosts();
        let group = router / a;
        let hosts = (0..p).map(|port| (router * p + port, TERMINAL));
        let local = (0..a).map(|i| group * a + i).filter(|&r| r != router).map(|r| (self.router_vertex(r), LOCAL));
        let global = (0..self.globals_per_router).map(|q| (self.router_vertex(self.global_peer(router, q).0), GLOBAL));
        hosts.chain(local).chain(global).collect()
    }

    /// The class of the link between `a` and `b`, if they are linked. Does not allocate.
    pub fn link_class(&self, x: Vertex, y: Vertex) -> Option<ClassId> {
        let (hosts, a) = (self.hosts(), self.routers_per_group);
        match (x < hosts, y < hosts) {
            (true, true) => None,
            (true, false) => (self.attachment(x) == y).then_some(TERMINAL),
            (false, true) => (self.attachment(y) == x).then_some(TERMINAL),
            (false, false) if x == y => None,
            (false, false) => {
                let (rx, ry) = (x - hosts, y - hosts);
                if rx / a == ry / a {
                    return Some(LOCAL);
                }
                (0..self.globals_per_router).any(|q| self.global_peer(rx, q).0 == ry).then_some(GLOBAL)
            }
        }
    }

    /// The group host `host` is in.
    pub fn group_of(&self, host: usize) -> usize {
        host / self.hosts_per_router / self.routers_per_group
    }

    /// Valiant's intermediate group of a flow from host `src` to host `dst` whose hash
    /// is `hash`: `hash mod g`, `None` (a minimal route) where that is the source's or
    /// the destination's group.
    pub fn intermediate(&self, src: usize, dst: usize, hash: u64) -> Option<usize> {
        let drawn = (hash % self.groups() as u64) as usize;
        (drawn != self.group_of(src) && drawn != self.group_of(dst)).then_some(drawn)
    }

    /// The next vertex from `at` towards host `dst` (see the module docs): minimal, or
    /// by way of group `via` (Valiant) while the frame is in neither that group nor the
    /// destination's. `at != dst`.
    pub fn next_hop(&self, at: Vertex, dst: usize, via: Option<usize>) -> Vertex {
        let a = self.routers_per_group;
        if at < self.hosts() {
            return self.attachment(at);
        }
        let router = at - self.hosts();
        let dst_router = dst / self.hosts_per_router;
        let (group, dst_group) = (router / a, dst_router / a);
        match via {
            Some(via) if group != via && group != dst_group => self.toward_group(router, via),
            _ if router == dst_router => dst,
            _ if group == dst_group => self.router_vertex(dst_router),
            _ => self.toward_group(router, dst_group),
        }
    }

    /// The next vertex from `router` towards group `to_group` (not its own): this group's
    /// router that holds the global link to it, or, from that router, across the link.
    fn toward_group(&self, router: usize, to_group: usize) -> Vertex {
        let (gateway, q) = self.gateway(router / self.routers_per_group, to_group);
        if router != gateway {
            return self.router_vertex(gateway);
        }
        self.router_vertex(self.global_peer(router, q).0)
    }

    /// Where a vertex sits: a host `[group, router, port]`, a router `[group, router]`.
    pub fn coords(&self, v: Vertex) -> Vec<usize> {
        let (a, p) = (self.routers_per_group, self.hosts_per_router);
        if v < self.hosts() {
            let router = v / p;
            vec![router / a, router % a, v % p]
        } else {
            let router = v - self.hosts();
            vec![router / a, router % a]
        }
    }

    /// The most hops a route between two of `hosts` takes: 2 on one router, 3 in one
    /// group, across groups 3 to 5 by where the global links are, and under Valiant
    /// (`valiant`) up to 7 by way of an intermediate group.
    pub fn diameter(&self, hosts: &[usize], valiant: bool) -> usize {
        let (a, p) = (self.routers_per_group, self.hosts_per_router);
        let shared = |under: usize| hosts.iter().all(|host| host / under == hosts[0] / under);
        match hosts {
            [] | [_] => return 0,
            _ if shared(p) => return 2,
            _ if shared(a * p) => return 3,
            _ => {}
        }
        // Across groups: the longest of the routes between the routers in use (a route's
        // hops depend only on its two routers and its intermediate group), stopping at
        // the bound: 5, or 7 by way of a group (4 with one router a group).
        let bound = match (valiant, a) {
            (false, _) => 5,
            (true, 1) => 4,
            (true, _) => 7,
        };
        let vias: Vec<Option<usize>> = match valiant {
            false => vec![None],
            true => std::iter::once(None).chain((0..self.groups()).map(Some)).collect(),
        };
        let mut used_routers: Vec<usize> = hosts.iter().map(|host| host / p).collect();
        used_routers.sort_unstable();
        used_routers.dedup();
        let mut longest = 3;
        for &from in &used_routers {
            for &to in &used_routers {
                let target = to * p;
                let (from_group, to_group) = (self.group_of(from * p), self.group_of(target));
                for &via in vias.iter().filter(|via| via.is_none_or(|via| via != from_group && via != to_group)) {
                    let (mut at, mut hops) = (self.router_vertex(from), 2);
                    while at != self.attachment(target) {
                        at = self.next_hop(at, target, via);
                        hops += 1;
                    }
                    longest = longest.max(hops);
                    if longest == bound {
                        return bound;
                    }
                }
            }
        }
        longest
    }

    /// Links cut by halving the groups (⌊g/2⌋ against ⌈g/2⌉): one global link for each
    /// pair of groups across the cut.
    pub fn bisection_width(&self) -> usize {
        let g = self.groups();
        (g / 2) * g.div_ceil(2)
    }
}
