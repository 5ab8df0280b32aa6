//! The k-port three-level fat-tree of Al-Fares, Loukissas and Vahdat ("A Scalable,
//! Commodity Data Center Network Architecture", SIGCOMM 2008, §3.2), a folded Clos
//! network (Leiserson, "Fat-trees", IEEE Trans. Computers 1985): k pods, each of k/2 edge
//! and k/2 aggregation switches; every edge switch links k/2 hosts and every aggregation
//! switch of its pod; (k/2)² core switches, core (i, j) linked to aggregation switch i of
//! every pod. k³/4 hosts, 5k²/4 switches, 3k³/4 links, full bisection bandwidth.
//!
//! Routes are up*/down* with destination-mod-k (d-mod-k) port choice (the deterministic
//! routing of Gómez et al., "Deterministic versus Adaptive Routing in Fat-Trees", IPDPS
//! workshops 2007, in this tree's terms): going up, the edge switch takes aggregation
//! switch `d mod k/2` and that switch core `(a, ⌊d / (k/2)⌋ mod k/2)`, so the hosts of one
//! edge switch are reached over different aggregation and core switches, and every route
//! from anywhere to `d` through one core switch is the same tree.
//!
//! Under `ecmp` (equal-cost multipath, RFC 2992) the up-ports are a hash of the flow's
//! instead: the edge switch takes aggregation switch `x mod k/2` and that switch core
//! `(a, ⌊x / (k/2)⌋ mod k/2)` for the flow's hash `x`, so the flows between two pods
//! spread over all the core switches. Every route is still a shortest up*/down* path.
//!
//! Vertices, as [`super::Family`] numbers them: hosts `0..k³/4` (pod-major, then edge
//! switch, then port), then the edge switches (pod-major), the aggregation switches
//! (pod-major) and the core switches (`i · k/2 + j`).

use super::{ClassId, Vertex};

/// The class of a host's link to its edge switch.
pub const EDGE: ClassId = 0;
/// The class of an edge switch's link to an aggregation switch.
pub const AGGREGATION: ClassId = 1;
/// The class of an aggregation switch's link to a core switch.
pub const CORE: ClassId = 2;

/// The fat-tree's link classes, by [`ClassId`].
pub const CLASSES: &[&str] = &["edge", "aggregation", "core"];

/// A k-port fat-tree (k even, at least 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatTree {
    k: usize,
}

/// Which switch or host a vertex is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Host(usize),
    /// Edge switch `pod · k/2 + e`.
    Edge(usize),
    /// Aggregation switch `pod · k/2 + a`.
    Aggregation(usize),
    /// Core switch `i · k/2 + j`.
    Core(usize),
}

impl FatTree {
    /// The tree of `k`-port switches; `k` must be even and at least 2 (checked by the
    /// caller, which says why).
    pub fn new(k: usize) -> Self {
        debug_assert!(k >= 2 && k.is_multiple_of(2));
        FatTree { k }
    }

    /// The switches' port count.
    pub fn k(&self) -> usize {
        self.k
    }

    fn half(&self) -> usize {
        self.k / 2
    }

    /// k³/4.
    pub fn hosts(&self) -> usize {
        self.k * self.half() * self.half()
    }

    /// 5k²/4: k²/2 edge, k²/2 aggregation and k²/4 core switches.
    pub fn switches(&self) -> usize {
        5 * self.half() * self.half()
    }

    fn pod_switches(&self) -> usize {
        self.k * self.half()
    }

    fn place(&self, v: Vertex) -> Place {
        let (hosts, pod_switches) = (self.hosts(), self.pod_switches());
        match v {
            _ if v < hosts => Place::Host(v),
            _ if v < hosts + pod_switches => Place::Edge(v - hosts),
            _ if v < hosts + 2 * pod_switches => Place::Aggregation(v - hosts - pod_switches),
            _ => Place::Core(v - hosts - 2 * pod_switches),
        }
    }

    fn vertex(&self, place: Place) -> Vertex {
        let (hosts, pod_switches) = (self.hosts(), self.pod_switches());
        match place {
            Place::Host(h) => h,
            Place::Edge(e) => hosts + e,
            Place::Aggregation(a) => hosts + pod_switches + a,
            Place::Core(c) => hosts + 2 * pod_switches + c,
        }
    }

    /// Every vertex linked to `v`, with the link's class.
    pub fn neighbours(&self, v: Vertex) -> Vec<(Vertex, ClassId)> {
        let half = self.half();
        match self.place(v) {
            Place::Host(h) => vec![(self.vertex(Place::Edge(h / half)), EDGE)],
            Place::Edge(e) => {
                let pod = e / half;
                let hosts = (0..half).map(|port| (self.vertex(Place::Host(e * half + port)), EDGE));
                let up = (0..half).map(|a| (self.vertex(Place::Aggregation(pod * half + a)), AGGREGATION));
                hosts.chain(up).collect()
            }
            Place::Aggregation(a) => {
                let (pod, index) = (a / half, a % half);
                let down = (0..half).map(|e| (self.vertex(Place::Edge(pod * half + e)), AGGREGATION));
                let up = (0..half).map(|j| (self.vertex(Place::Core(index * half + j)), CORE));
                down.chain(up).collect()
            }
            Place::Core(c) => {
                let i = c / half;
                (0..self.k).map(|pod| (self.vertex(Place::Aggregation(pod * half + i)), CORE)).collect()
            }
        }
    }

    /// The class of the link between `a` and `b`, if they are linked. Does not allocate.
    pub fn link_class(&self, a: Vertex, b: Vertex) -> Option<ClassId> {
        let half = self.half();
        let linked = |lower: Place, upper: Place| match (lower, upper) {
            (Place::Host(h), Place::Edge(e)) => (h / half == e).then_some(EDGE),
            (Place::Edge(e), Place::Aggregation(g)) => (e / half == g / half).then_some(AGGREGATION),
            (Place::Aggregation(g), Place::Core(c)) => (g % half == c / half).then_some(CORE),
            _ => None,
        };
        let (pa, pb) = (self.place(a), self.place(b));
        linked(pa, pb).or_else(|| linked(pb, pa))
    }

    /// The next vertex from `at` towards host `dst` (up*/down*; see the module docs): the
    /// up-ports by `dst` (d-mod-k), or by `spread`, the flow's hash, when it is given
    /// (ecmp). `at != dst`.
    pub fn next_hop(&self, at: Vertex, dst: usize, spread: Option<u64>) -> Vertex {
        let half = self.half();
        let (dst_edge, dst_pod) = (dst / half, dst / (half * half));
        // The two up-ports' choices: base-k/2 digits of the destination or of the hash.
        let (up_edge, up_aggregation) = match spread {
            None => (dst % half, dst_edge % half),
            Some(hash) => {
                let half = half as u64;
                ((hash % half) as usize, ((hash / half) % half) as usize)
            }
        };
        let next = match self.place(at) {
            Place::Host(h) => Place::Edge(h / half),
            Place::Edge(e) if e == dst_edge => Place::Host(dst),
            Place::Edge(e) => Place::Aggregation((e / half) * half + up_edge),
            Place::Aggregation(a) if a / half == dst_pod => Place::Edge(dst_edge),
            Place::Aggregation(a) => Place::Core((a % half) * half + up_aggregation),
            Place::Core(c) => Place::Aggregation(dst_pod * half + c / half),
        };
        self.vertex(next)
    }

    /// Where a vertex sits, its level first: a host `[0, pod, edge, port]`, an edge or
    /// aggregation switch `[1 or 2, pod, index]`, a core switch `[3, i, j]`.
    pub fn coords(&self, v: Vertex) -> Vec<usize> {
        let half = self.half();
        match self.place(v) {
            Place::Host(h) => vec![0, h / (half * half), (h / half) % half, h % half],
            Place::Edge(e) => vec![1, e / half, e % half],
            Place::Aggregation(a) => vec![2, a / half, a % half],
            Place::Core(c) => vec![3, c / half, c % half],
        }
    }

    /// The switch a host hangs off.
    pub fn attachment(&self, host: usize) -> Vertex {
        self.vertex(Place::Edge(host / self.half()))
    }

    /// The most hops a route between two of `hosts` takes: 2 under one edge switch, 4 in
    /// one pod, 6 across pods.
    pub fn diameter(&self, hosts: &[usize]) -> usize {
        let half = self.half();
        let shared = |under: usize| hosts.iter().all(|host| host / under == hosts[0] / under);
        match hosts {
            [] | [_] => 0,
            _ if shared(half) => 2,
            _ if shared(half * half) => 4,
            _ => 6,
        }
    }

    /// Links cut by halving the hosts (pods 0..k/2 against the rest): k³/8, one per
    /// host of a half (full bisection bandwidth).
    pub fn bisection_width(&self) -> usize {
        self.hosts() / 2
    }
}
