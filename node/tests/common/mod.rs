//! What the collective tests on an in-memory cluster share: the dtypes, ops and topology
//! kinds to walk through, the shapes to wire, a run-spec builder, running a spec on every
//! node and holding each result against the reference (with a failure that says which
//! run it was), the counts every test reads off the routers (frames forwarded, messages
//! nobody took), and `tests_on_every_kind!`, which makes one test per topology kind.
//!
//! Only the public face of `topocomm_node` is used: `InProcessCluster` (`start`,
//! `with_clock`, `run_all`, `verify`, a node's router's traffic and mailbox counts) and
//! `algorithms::run`.

#![allow(dead_code)] // Every test file uses some of these, none uses all.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use topocomm_collectives::algorithms;
use topocomm_collectives::comm::CommError;
use topocomm_node::in_process::InProcessCluster;
use topocomm_proto::reference;
use topocomm_proto::spec::{Algorithm, Collective, Dtype, ReduceOp, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

/// The deadline of every wait of a run.
pub const TIMEOUT: Duration = Duration::from_secs(20);

pub const DTYPES: [Dtype; 4] = [Dtype::I32, Dtype::I64, Dtype::F32, Dtype::F64];
pub const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];
pub const KINDS: [TopologyKind; 7] = [
    TopologyKind::Ring,
    TopologyKind::Mesh,
    TopologyKind::Torus,
    TopologyKind::Mesh3d,
    TopologyKind::Torus3d,
    TopologyKind::Hypercube,
    TopologyKind::Full,
];

/// The node counts the sweeps over every kind try: 1 to 17 (each kind takes those it can).
pub const SMALL: std::ops::RangeInclusive<usize> = 1..=17;

/// The dtype and op of the `run`-th run of a sweep: the dtypes take turns, and the ops
/// turn once every four runs, so a sweep meets every pair.
pub fn dtype_and_op(run: u64) -> (Dtype, ReduceOp) {
    (DTYPES[run as usize % DTYPES.len()], OPS[run as usize / DTYPES.len() % OPS.len()])
}

/// `kind` with p nodes and its default shape, if it has one.
pub fn default_shape(kind: TopologyKind, p: usize) -> Option<Topology> {
    Topology::new(kind, p, None).ok()
}

/// `kind` with p nodes and its default shape, for a case that names a shape `kind` has.
pub fn shape(kind: TopologyKind, p: usize) -> Topology {
    Topology::new(kind, p, None).unwrap_or_else(|error| panic!("the test names no {kind} of {p}: {error}"))
}

/// `kind` with the extents `dims`.
pub fn grid(kind: TopologyKind, dims: &[usize]) -> Topology {
    let p = dims.iter().product();
    Topology::new(kind, p, Some(dims)).unwrap_or_else(|error| panic!("the test names no {kind} {dims:?}: {error}"))
}

/// Grid shapes the defaults never pick: long thin ones, 1 x n, 3-D with an extent of 1.
pub fn grids_the_defaults_never_pick() -> [Topology; 8] {
    [
        grid(TopologyKind::Mesh, &[4, 2]),
        grid(TopologyKind::Mesh, &[2, 5]),
        grid(TopologyKind::Mesh, &[1, 7]),
        grid(TopologyKind::Torus, &[1, 6]),
        grid(TopologyKind::Torus, &[5, 2]),
        grid(TopologyKind::Mesh3d, &[3, 1, 2]),
        grid(TopologyKind::Torus3d, &[2, 3, 2]),
        grid(TopologyKind::Torus3d, &[3, 3, 1]),
    ]
}

/// Every shape of `kind` among the node counts `ps` (the counts `kind` does not take are
/// skipped: a hypercube takes powers of two only).
pub fn shapes_of(kind: TopologyKind, ps: impl IntoIterator<Item = usize>) -> impl Iterator<Item = Topology> {
    ps.into_iter().filter_map(move |p| default_shape(kind, p))
}

/// Each of `kinds` at each of the node counts `ps`, the counts outermost.
pub fn scaled(ps: &[usize], kinds: &[TopologyKind]) -> Vec<Topology> {
    ps.iter().flat_map(|&p| kinds.iter().map(move |&kind| shape(kind, p))).collect()
}

/// Wires each of `topologies` in turn as a fresh in-memory cluster and runs `body` on it.
pub async fn on_each(
    topologies: impl IntoIterator<Item = Topology>,
    mut body: impl AsyncFnMut(&InProcessCluster, &Topology),
) {
    for topology in topologies {
        let cluster = InProcessCluster::start(&topology);
        body(&cluster, &topology).await;
    }
}

/// The algorithms of `collective`, in the catalogue's order: the node tests run every
/// one, so that an algorithm added to the catalogue is run here with no word changed.
pub fn algorithms_of(collective: Collective) -> Vec<Algorithm> {
    topocomm_proto::catalogue::algorithms(collective).map(|entry| entry.algorithm).collect()
}

/// The specs of one test file: run `run` takes its inputs from seed `seed_base + run`,
/// so each file has inputs of its own.
pub struct Specs {
    pub seed_base: u64,
}

impl Specs {
    /// Run `run` of `collective` by `algorithm`, `elements` elements of `dtype` per block
    /// (per vector where a node holds one), within [`TIMEOUT`]; root 0, sum, shift 1 and
    /// inclusive unless the caller sets them (`RunSpec { root, ..specs.of(...) }`).
    pub fn of(&self, run: u64, collective: Collective, algorithm: Algorithm, elements: usize, dtype: Dtype) -> RunSpec {
        RunSpec {
            run,
            size_bytes: (elements * dtype.size()) as u64,
            dtype,
            seed: self.seed_base + run,
            timeout_ms: TIMEOUT.as_millis() as u64,
            ..RunSpec::new(collective, algorithm)
        }
    }
}

/// What a failure says about `spec` on `topology`.
pub fn describe(spec: &RunSpec, topology: &Topology) -> String {
    format!(
        "run {}: {} {}{} on {topology}, root {}, shift {}, {} bytes of {} ({})",
        spec.run,
        spec.algorithm,
        if spec.exclusive { "exclusive " } else { "" },
        spec.collective,
        spec.root,
        spec.shift,
        spec.size_bytes,
        spec.dtype,
        spec.op
    )
}

/// Runs `spec` on every node of `cluster` (wired as `topology`), holds every node's
/// output against the reference and checks that no message was left over; returns the
/// longest chain of messages any node received (its steps). Fails naming the run.
pub async fn verify(cluster: &InProcessCluster, topology: &Topology, spec: &RunSpec) -> u16 {
    cluster.verify(spec, TIMEOUT).await.unwrap_or_else(|error| panic!("{}: {error}", describe(spec, topology)))
}

/// [`verify`] on a fresh cluster wired as `topology`; returns the cluster too, to read
/// its counts.
pub async fn verify_fresh(topology: &Topology, spec: &RunSpec) -> (u16, InProcessCluster) {
    let cluster = InProcessCluster::start(topology);
    let steps = verify(&cluster, topology, spec).await;
    (steps, cluster)
}

/// Frames forwarded by the routers of the first `p` nodes of `cluster` (all of them).
pub fn frames_forwarded(cluster: &InProcessCluster, p: usize) -> u64 {
    (0..p).map(|node| cluster.router(node).traffic().frames_forwarded).sum()
}

/// Verifies every spec of `specs` in turn on one fresh cluster wired as `topology`;
/// returns the frames its routers forwarded in all.
pub async fn forwarded_by(topology: &Topology, specs: &[RunSpec]) -> u64 {
    let cluster = InProcessCluster::start(topology);
    for spec in specs {
        verify(&cluster, topology, spec).await;
    }
    frames_forwarded(&cluster, topology.p())
}

/// Fails unless no node of `cluster` holds a message nobody took.
pub fn assert_no_message_left(cluster: &InProcessCluster, p: usize, context: &str) {
    for node in 0..p {
        let queued = cluster.router(node).mailbox().queued();
        assert_eq!(queued, 0, "{context}: node {node} holds {queued} messages nobody took");
    }
}

/// Runs `spec` through `algorithms::run` on every node of `cluster`, every node starting
/// with `input` (not the reference's inputs: for inputs that must be refused); returns
/// each node's outcome in id order.
pub async fn run_with_input(cluster: &InProcessCluster, spec: &RunSpec, input: Bytes) -> Vec<Result<Bytes, CommError>> {
    let spec = Arc::new(spec.clone());
    cluster
        .run_all(spec.run, TIMEOUT, move |comm| {
            let (spec, input) = (spec.clone(), input.clone());
            async move { algorithms::run(&comm, &spec, input).await }
        })
        .await
}

/// Runs `spec` through `algorithms::run` on every node of `cluster` from the reference's
/// inputs, without checking the outputs (for runs that must be refused); returns each
/// node's outcome in id order.
pub async fn run_on_reference_inputs(cluster: &InProcessCluster, spec: &RunSpec) -> Vec<Result<Bytes, CommError>> {
    let spec = Arc::new(spec.clone());
    cluster
        .run_all(spec.run, TIMEOUT, move |comm| {
            let spec = spec.clone();
            async move {
                let input = reference::input(&spec, comm.p(), comm.id());
                algorithms::run(&comm, &spec, input).await
            }
        })
        .await
}

/// One test per topology kind, each `$sweep(kind).await` (an `async fn(TopologyKind)`
/// that runs the file's cases on every node count the kind takes), on two worker
/// threads as the rest of the suite.
#[allow(unused_macros)] // Not every test file sweeps every kind.
macro_rules! tests_on_every_kind {
    ($sweep:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn on_rings_of_1_to_17() {
            $sweep(topocomm_proto::TopologyKind::Ring).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn on_meshes_of_1_to_17() {
            $sweep(topocomm_proto::TopologyKind::Mesh).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn on_tori_of_1_to_17() {
            $sweep(topocomm_proto::TopologyKind::Torus).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn on_3d_meshes_of_1_to_17() {
            $sweep(topocomm_proto::TopologyKind::Mesh3d).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn on_3d_tori_of_1_to_17() {
            $sweep(topocomm_proto::TopologyKind::Torus3d).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn on_hypercubes_of_1_to_16() {
            $sweep(topocomm_proto::TopologyKind::Hypercube).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn on_fully_connected_networks_of_1_to_17() {
            $sweep(topocomm_proto::TopologyKind::Full).await;
        }
    };
}
#[allow(unused_imports)]
pub(crate) use tests_on_every_kind;
