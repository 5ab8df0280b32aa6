//! Broadcast and reduce, every algorithm on every topology kind, run on an in-memory
//! cluster (the real routers and link tasks over in-memory pipes) and every node's result
//! held against `topocomm_proto::reference`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use topocomm_node::collectives::{self, reduce};
use topocomm_node::memory_cluster::MemoryCluster;
use topocomm_node::{Comm, CommError};
use topocomm_proto::elements::ElementsError;
use topocomm_proto::spec::{Algorithm, Collective, Dtype, ReduceOp, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

const TIMEOUT: Duration = Duration::from_secs(20);

const COLLECTIVES: [Collective; 2] = [Collective::Broadcast, Collective::Reduce];
/// Every algorithm of both collectives.
const PAIRS: [(Collective, Algorithm); 12] = [
    (Collective::Broadcast, Algorithm::Linear),
    (Collective::Reduce, Algorithm::Linear),
    (Collective::Broadcast, Algorithm::Ring),
    (Collective::Reduce, Algorithm::Ring),
    (Collective::Broadcast, Algorithm::Mesh),
    (Collective::Reduce, Algorithm::Mesh),
    (Collective::Broadcast, Algorithm::Hypercube),
    (Collective::Reduce, Algorithm::Hypercube),
    (Collective::Broadcast, Algorithm::RecursiveDoubling),
    (Collective::Reduce, Algorithm::RecursiveHalving),
    (Collective::Broadcast, Algorithm::ScatterAllgather),
    (Collective::Reduce, Algorithm::ReduceScatterGather),
];
const DTYPES: [Dtype; 4] = [Dtype::I32, Dtype::I64, Dtype::F32, Dtype::F64];
const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];

/// One run of `collective` with `algorithm` from/to `root`, `elements` elements per node.
fn spec(
    run: u64,
    collective: Collective,
    algorithm: Algorithm,
    root: usize,
    elements: usize,
    dtype: Dtype,
    op: ReduceOp,
) -> RunSpec {
    RunSpec {
        run,
        root,
        size_bytes: (elements * dtype.size()) as u64,
        dtype,
        op,
        seed: 0x70c0 + run,
        timeout_ms: TIMEOUT.as_millis() as u64,
        ..RunSpec::new(collective, algorithm)
    }
}

/// Runs `spec` on every node of `cluster` (wired as `topology`), checks every node's
/// output against the reference and that no message was left over.
async fn verify(cluster: &MemoryCluster, topology: &Topology, spec: &RunSpec) {
    let context = format!(
        "{} {} on {topology}, root {}, {} bytes of {} ({})",
        spec.algorithm, spec.collective, spec.root, spec.size_bytes, spec.dtype, spec.op
    );
    if let Err(error) = cluster.verify(spec, TIMEOUT).await {
        panic!("{context}: {error}");
    }
}

/// `kind` with p nodes and its default shape, if it has one.
fn topology(kind: TopologyKind, p: usize) -> Option<Topology> {
    Topology::new(kind, p, None).ok()
}

/// Every algorithm of both collectives on `kind` for p = 1..=17 (where `kind` takes p),
/// from every root, with 0, 1 and an odd number of elements; the reductions walk
/// through every dtype and op.
async fn sweep(kind: TopologyKind) {
    let mut run = 0;
    for p in 1..=17 {
        let Some(topology) = topology(kind, p) else {
            continue;
        };
        let cluster = MemoryCluster::start(&topology);
        for (collective, algorithm) in PAIRS {
            for root in 0..p {
                for elements in [0, 1, 7] {
                    run += 1;
                    let dtype = DTYPES[run as usize % 4];
                    let op = OPS[run as usize / 4 % 4];
                    verify(&cluster, &topology, &spec(run, collective, algorithm, root, elements, dtype, op)).await;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_rings_of_1_to_17() {
    sweep(TopologyKind::Ring).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_meshes_of_1_to_17() {
    sweep(TopologyKind::Mesh).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_tori_of_1_to_17() {
    sweep(TopologyKind::Torus).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_3d_meshes_of_1_to_17() {
    sweep(TopologyKind::Mesh3d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_3d_tori_of_1_to_17() {
    sweep(TopologyKind::Torus3d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_hypercubes_of_1_to_17() {
    sweep(TopologyKind::Hypercube).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_fully_connected_networks_of_1_to_17() {
    sweep(TopologyKind::Full).await;
}

/// Explicit grid shapes the defaults never pick (long thin, 1 x n, 3-D with a 1 extent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_explicit_grid_shapes() {
    let shapes: [(TopologyKind, &[usize]); 6] = [
        (TopologyKind::Mesh, &[4, 2]),
        (TopologyKind::Torus, &[1, 6]),
        (TopologyKind::Torus, &[5, 2]),
        (TopologyKind::Mesh3d, &[3, 1, 2]),
        (TopologyKind::Torus3d, &[2, 3, 2]),
        (TopologyKind::Torus3d, &[3, 3, 1]),
    ];
    let mut run = 0;
    for (kind, dims) in shapes {
        let p = dims.iter().product();
        let topology = Topology::new(kind, p, Some(dims)).unwrap();
        let cluster = MemoryCluster::start(&topology);
        for collective in COLLECTIVES {
            for root in 0..p {
                run += 1;
                let s = spec(run, collective, Algorithm::Mesh, root, 3, Dtype::I64, ReduceOp::Sum);
                verify(&cluster, &topology, &s).await;
            }
        }
    }
}

/// p = 32 and 64 on the kinds that scale, every algorithm of both collectives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_32_and_64_nodes() {
    let mut run = 0;
    for p in [32, 64] {
        for kind in
            [TopologyKind::Ring, TopologyKind::Torus, TopologyKind::Mesh3d, TopologyKind::Hypercube, TopologyKind::Full]
        {
            let topology = topology(kind, p).unwrap();
            let cluster = MemoryCluster::start(&topology);
            for (collective, algorithm) in PAIRS {
                for root in [0, p - 1, 21] {
                    run += 1;
                    let s = spec(run, collective, algorithm, root, 5, Dtype::F64, ReduceOp::Sum);
                    verify(&cluster, &topology, &s).await;
                }
            }
        }
    }
}

/// Every dtype and op of the reduction, every algorithm, at p = 6 (no power of two) and 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reduce_every_dtype_and_op() {
    let mut run = 0;
    for (kind, p, root) in [(TopologyKind::Torus, 6, 5), (TopologyKind::Hypercube, 8, 3)] {
        let topology = topology(kind, p).unwrap();
        let cluster = MemoryCluster::start(&topology);
        for (_, algorithm) in PAIRS.into_iter().filter(|&(collective, _)| collective == Collective::Reduce) {
            for dtype in DTYPES {
                for op in OPS {
                    run += 1;
                    let s = spec(run, Collective::Reduce, algorithm, root, 9, dtype, op);
                    verify(&cluster, &topology, &s).await;
                }
            }
        }
    }
}

/// A few 1 MiB messages (each crossing several store-and-forward hops).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mebibyte() {
    let cases = [
        (Collective::Broadcast, Algorithm::Ring, TopologyKind::Ring, 7, 3, Dtype::I32, ReduceOp::Sum),
        (Collective::Broadcast, Algorithm::Mesh, TopologyKind::Torus, 16, 5, Dtype::F32, ReduceOp::Sum),
        (Collective::Broadcast, Algorithm::Hypercube, TopologyKind::Ring, 8, 6, Dtype::I64, ReduceOp::Sum),
        (Collective::Reduce, Algorithm::Hypercube, TopologyKind::Hypercube, 8, 1, Dtype::F64, ReduceOp::Sum),
        (Collective::Reduce, Algorithm::Mesh, TopologyKind::Mesh3d, 8, 7, Dtype::I32, ReduceOp::Prod),
        (Collective::Reduce, Algorithm::Ring, TopologyKind::Ring, 5, 2, Dtype::F32, ReduceOp::Max),
        (Collective::Broadcast, Algorithm::RecursiveDoubling, TopologyKind::Ring, 9, 4, Dtype::I32, ReduceOp::Sum),
        (Collective::Reduce, Algorithm::RecursiveHalving, TopologyKind::Full, 7, 6, Dtype::F32, ReduceOp::Sum),
        (Collective::Broadcast, Algorithm::ScatterAllgather, TopologyKind::Ring, 12, 11, Dtype::F64, ReduceOp::Sum),
        (Collective::Reduce, Algorithm::ReduceScatterGather, TopologyKind::Hypercube, 16, 5, Dtype::F64, ReduceOp::Sum),
    ];
    for (run, (collective, algorithm, kind, p, root, dtype, op)) in cases.into_iter().enumerate() {
        let topology = topology(kind, p).unwrap();
        let cluster = MemoryCluster::start(&topology);
        let elements = (1 << 20) / dtype.size();
        verify(&cluster, &topology, &spec(run as u64 + 1, collective, algorithm, root, elements, dtype, op)).await;
    }
}

/// Frames forwarded by the routers of every node of `cluster`.
fn forwarded(cluster: &MemoryCluster, p: usize) -> u64 {
    (0..p).map(|node| cluster.router(node).traffic().frames_forwarded).sum()
}

/// Runs broadcast and reduce with `algorithm` on a fresh cluster wired as `kind` with p
/// nodes; returns the frames its routers forwarded.
async fn forwarded_by(algorithm: Algorithm, kind: TopologyKind, p: usize) -> u64 {
    forwarded_by_pair([algorithm; 2], kind, p).await
}

/// Runs broadcast with `algorithms[0]` and reduce with `algorithms[1]` on a fresh
/// cluster wired as `kind` with p nodes; returns the frames its routers forwarded.
async fn forwarded_by_pair(algorithms: [Algorithm; 2], kind: TopologyKind, p: usize) -> u64 {
    let topology = topology(kind, p).unwrap();
    let cluster = MemoryCluster::start(&topology);
    for (run, (collective, algorithm)) in COLLECTIVES.into_iter().zip(algorithms).enumerate() {
        let s = spec(run as u64 + 1, collective, algorithm, p / 2 + 1, 4, Dtype::I32, ReduceOp::Sum);
        verify(&cluster, &topology, &s).await;
    }
    forwarded(&cluster, p)
}

/// A schedule on a topology it was not made for still verifies, but its messages travel
/// several hops; on its own topology every message crosses exactly one link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_topologies_forward_frames() {
    let mismatched = forwarded_by(Algorithm::Hypercube, TopologyKind::Ring, 8).await;
    assert!(mismatched > 0, "hypercube on a ring of 8 forwarded nothing");
    assert!(forwarded_by(Algorithm::Mesh, TopologyKind::Ring, 9).await > 0);
    assert!(forwarded_by(Algorithm::Linear, TopologyKind::Torus, 9).await > 0);
    let native = [
        (Algorithm::Hypercube, TopologyKind::Hypercube, 8),
        (Algorithm::Hypercube, TopologyKind::Hypercube, 16),
        (Algorithm::Hypercube, TopologyKind::Full, 11),
        (Algorithm::Ring, TopologyKind::Ring, 9),
        (Algorithm::Mesh, TopologyKind::Mesh, 12),
        (Algorithm::Mesh, TopologyKind::Torus, 16),
        (Algorithm::Mesh, TopologyKind::Mesh3d, 12),
        (Algorithm::Mesh, TopologyKind::Torus3d, 27),
        (Algorithm::Linear, TopologyKind::Full, 7),
    ];
    for (algorithm, kind, p) in native {
        assert_eq!(forwarded_by(algorithm, kind, p).await, 0, "{algorithm} on {kind} of {p} forwarded frames");
    }
    // The cut-through ring broadcast and its dual send over distances p/2, p/4, ..., 1:
    // one link each on a full network, several on a ring.
    let doubling = [Algorithm::RecursiveDoubling, Algorithm::RecursiveHalving];
    assert_eq!(forwarded_by_pair(doubling, TopologyKind::Full, 11).await, 0);
    assert!(forwarded_by_pair(doubling, TopologyKind::Ring, 8).await > 0);
}

/// A root outside the cluster is refused by every node, with no message sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_outside_the_cluster_is_refused() {
    let topology = topology(TopologyKind::Ring, 4).unwrap();
    let cluster = MemoryCluster::start(&topology);
    for (run, (collective, algorithm)) in PAIRS.into_iter().enumerate() {
        let s = Arc::new(spec(run as u64 + 1, collective, algorithm, 4, 2, Dtype::I32, ReduceOp::Sum));
        let outputs = cluster
            .run_all(s.run, TIMEOUT, move |comm| {
                let s = s.clone();
                async move { collectives::run(&comm, &s, Bytes::from_static(&[0; 8])).await }
            })
            .await;
        for (me, output) in outputs.into_iter().enumerate() {
            assert_eq!(output, Err(CommError::NoSuchPeer { me, peer: 4, p: 4 }), "{algorithm} {collective}");
        }
    }
}

/// Vectors of different lengths cannot be combined: the node that tries says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unequal_vectors_fail_the_reduction() {
    let topology = topology(TopologyKind::Full, 3).unwrap();
    let cluster = MemoryCluster::start(&topology);
    let outputs = cluster
        .run_all(1, Duration::from_secs(5), |comm: Comm| async move {
            let vector = Bytes::from(vec![1u8; 4 * (comm.id() + 1)]);
            reduce::run(&comm, Algorithm::Linear, 0, vector, Dtype::I32, ReduceOp::Sum).await
        })
        .await;
    let source = ElementsError::LengthMismatch { acc: 4, other: 8 };
    assert_eq!(outputs[0], Err(CommError::Elements { me: 0, source }));
    assert_eq!(outputs[1], Ok(Bytes::new()));
}
