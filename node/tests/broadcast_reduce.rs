//! Broadcast and reduce, every algorithm on every topology kind, run on an in-memory
//! cluster (the real routers and link tasks over in-memory pipes) and every node's result
//! held against `topocomm_proto::reference`.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{
    DTYPES, OPS, SMALL, Specs, algorithms_of, dtype_and_op, forwarded_by, grids_the_defaults_never_pick, on_each,
    run_with_input, scaled, shape, shapes_of, verify, verify_fresh,
};
use topocomm_collectives::algorithms::reduce;
use topocomm_collectives::comm::{Comm, CommError};
use topocomm_node::in_process::InProcessCluster;
use topocomm_proto::TopologyKind;
use topocomm_proto::elements::ElementsError;
use topocomm_proto::spec::{Algorithm, Collective, Dtype, ReduceOp, RunSpec};

const SPECS: Specs = Specs { seed_base: 0x70c0 };

const COLLECTIVES: [Collective; 2] = [Collective::Broadcast, Collective::Reduce];

/// Every algorithm of both collectives, as the catalogue lists them.
fn pairs() -> Vec<(Collective, Algorithm)> {
    COLLECTIVES
        .into_iter()
        .flat_map(|collective| algorithms_of(collective).into_iter().map(move |a| (collective, a)))
        .collect()
}

/// Run `run` of `collective` by `algorithm` from/to `root`, `elements` elements per node.
fn spec(
    run: u64,
    (collective, algorithm): (Collective, Algorithm),
    root: usize,
    elements: usize,
    (dtype, op): (Dtype, ReduceOp),
) -> RunSpec {
    RunSpec { root, op, ..SPECS.of(run, collective, algorithm, elements, dtype) }
}

/// Every algorithm of both collectives on `kind` for p = 1..=17 (where `kind` takes p),
/// from every root, with 0, 1 and an odd number of elements; the reductions walk
/// through every dtype and op.
async fn sweep(kind: TopologyKind) {
    let mut run = 0;
    on_each(shapes_of(kind, SMALL), async |cluster, topology| {
        for pair in pairs() {
            for root in 0..topology.p() {
                for elements in [0, 1, 7] {
                    run += 1;
                    verify(cluster, topology, &spec(run, pair, root, elements, dtype_and_op(run))).await;
                }
            }
        }
    })
    .await;
}

common::tests_on_every_kind!(sweep);

/// The mesh broadcast and reduction, from every root, on grid shapes the defaults never pick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_explicit_grid_shapes() {
    let mut run = 0;
    on_each(grids_the_defaults_never_pick(), async |cluster, topology| {
        for collective in COLLECTIVES {
            for root in 0..topology.p() {
                run += 1;
                let s = spec(run, (collective, Algorithm::Mesh), root, 3, (Dtype::I64, ReduceOp::Sum));
                verify(cluster, topology, &s).await;
            }
        }
    })
    .await;
}

/// p = 32 and 64 on the kinds that scale, every algorithm of both collectives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_32_and_64_nodes() {
    use TopologyKind as T;
    let mut run = 0;
    on_each(scaled(&[32, 64], &[T::Ring, T::Torus, T::Mesh3d, T::Hypercube, T::Full]), async |cluster, topology| {
        let p = topology.p();
        for pair in pairs() {
            for root in [0, p - 1, 21] {
                run += 1;
                verify(cluster, topology, &spec(run, pair, root, 5, (Dtype::F64, ReduceOp::Sum))).await;
            }
        }
    })
    .await;
}

/// Every dtype and op of the reduction, every algorithm, at p = 6 (no power of two) and 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reduce_every_dtype_and_op() {
    let mut run = 0;
    for (kind, p, root) in [(TopologyKind::Torus, 6, 5), (TopologyKind::Hypercube, 8, 3)] {
        on_each([shape(kind, p)], async |cluster, topology| {
            for pair in pairs().into_iter().filter(|&(collective, _)| collective == Collective::Reduce) {
                for dtype in DTYPES {
                    for op in OPS {
                        run += 1;
                        verify(cluster, topology, &spec(run, pair, root, 9, (dtype, op))).await;
                    }
                }
            }
        })
        .await;
    }
}

/// A few 1 MiB messages (each crossing several store-and-forward hops).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mebibyte() {
    use Algorithm as A;
    use Collective as C;
    use TopologyKind as T;
    let cases = [
        (C::Broadcast, A::Ring, T::Ring, 7, 3, Dtype::I32, ReduceOp::Sum),
        (C::Broadcast, A::Mesh, T::Torus, 16, 5, Dtype::F32, ReduceOp::Sum),
        (C::Broadcast, A::Hypercube, T::Ring, 8, 6, Dtype::I64, ReduceOp::Sum),
        (C::Reduce, A::Hypercube, T::Hypercube, 8, 1, Dtype::F64, ReduceOp::Sum),
        (C::Reduce, A::Mesh, T::Mesh3d, 8, 7, Dtype::I32, ReduceOp::Prod),
        (C::Reduce, A::Ring, T::Ring, 5, 2, Dtype::F32, ReduceOp::Max),
        (C::Broadcast, A::RecursiveDoubling, T::Ring, 9, 4, Dtype::I32, ReduceOp::Sum),
        (C::Reduce, A::RecursiveHalving, T::Full, 7, 6, Dtype::F32, ReduceOp::Sum),
        (C::Broadcast, A::ScatterAllgather, T::Ring, 12, 11, Dtype::F64, ReduceOp::Sum),
        (C::Reduce, A::ReduceScatterGather, T::Hypercube, 16, 5, Dtype::F64, ReduceOp::Sum),
    ];
    for (run, (collective, algorithm, kind, p, root, dtype, op)) in cases.into_iter().enumerate() {
        let elements = (1 << 20) / dtype.size();
        let s = spec(run as u64 + 1, (collective, algorithm), root, elements, (dtype, op));
        verify_fresh(&shape(kind, p), &s).await;
    }
}

/// Runs broadcast with `algorithms[0]` and then reduce with `algorithms[1]` on a fresh
/// cluster wired as `kind` with p nodes; returns the frames its routers forwarded.
async fn forwarded_by_pair(algorithms: [Algorithm; 2], kind: TopologyKind, p: usize) -> u64 {
    let specs: Vec<RunSpec> = COLLECTIVES
        .into_iter()
        .zip(algorithms)
        .enumerate()
        .map(|(run, pair)| spec(run as u64 + 1, pair, p / 2 + 1, 4, (Dtype::I32, ReduceOp::Sum)))
        .collect();
    forwarded_by(&shape(kind, p), &specs).await
}

/// A schedule on a topology it was not made for still verifies, but its messages travel
/// several hops; on its own topology every message crosses exactly one link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_topologies_forward_frames() {
    let mismatched = forwarded_by_pair([Algorithm::Hypercube; 2], TopologyKind::Ring, 8).await;
    assert!(mismatched > 0, "hypercube on a ring of 8 forwarded nothing");
    assert!(forwarded_by_pair([Algorithm::Mesh; 2], TopologyKind::Ring, 9).await > 0);
    assert!(forwarded_by_pair([Algorithm::Linear; 2], TopologyKind::Torus, 9).await > 0);
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
        let frames = forwarded_by_pair([algorithm; 2], kind, p).await;
        assert_eq!(frames, 0, "{algorithm} on {kind} of {p} forwarded frames");
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
    let cluster = InProcessCluster::start(&shape(TopologyKind::Ring, 4));
    for (run, pair) in pairs().into_iter().enumerate() {
        let s = spec(run as u64 + 1, pair, 4, 2, (Dtype::I32, ReduceOp::Sum));
        let outputs = run_with_input(&cluster, &s, Bytes::from_static(&[0; 8])).await;
        for (me, output) in outputs.into_iter().enumerate() {
            assert_eq!(output, Err(CommError::NoSuchPeer { me, peer: 4, p: 4 }), "{pair:?}");
        }
    }
}

/// Vectors of different lengths cannot be combined: the node that tries says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unequal_vectors_fail_the_reduction() {
    let cluster = InProcessCluster::start(&shape(TopologyKind::Full, 3));
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
