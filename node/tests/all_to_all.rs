//! All-gather, reduce-scatter and all-reduce, every algorithm on every topology kind, run
//! on an in-memory cluster (the real routers and link tasks over in-memory pipes) and
//! every node's result held against `topocomm_proto::reference`; the layout-general
//! entry points on uneven layouts; step counts; which schedules forward frames where.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use topocomm_node::collectives::allgather::allgather_layout;
use topocomm_node::collectives::blocks::BlockLayout;
use topocomm_node::collectives::patterns::Reduction;
use topocomm_node::collectives::reduce_scatter::reduce_scatter_layout;
use topocomm_node::collectives::{self, allreduce};
use topocomm_node::memory_cluster::MemoryCluster;
use topocomm_node::{Comm, CommError};
use topocomm_proto::elements::{ElementsError, combine};
use topocomm_proto::spec::{Algorithm, Collective, Dtype, ReduceOp, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

const TIMEOUT: Duration = Duration::from_secs(20);

const ALLGATHER: [Algorithm; 5] =
    [Algorithm::Ring, Algorithm::Mesh, Algorithm::Hypercube, Algorithm::RecursiveDoubling, Algorithm::Bruck];
const REDUCE_SCATTER: [Algorithm; 4] =
    [Algorithm::Ring, Algorithm::Hypercube, Algorithm::RecursiveHalving, Algorithm::Pairwise];
const ALLREDUCE: [Algorithm; 5] = [
    Algorithm::ReduceBroadcast,
    Algorithm::RecursiveDoubling,
    Algorithm::HalvingDoubling,
    Algorithm::Ring,
    Algorithm::Mesh,
];
const DTYPES: [Dtype; 4] = [Dtype::I32, Dtype::I64, Dtype::F32, Dtype::F64];
const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];

/// Every (collective, algorithm) pair of the family.
fn every_case() -> impl Iterator<Item = (Collective, Algorithm)> {
    let allgather = ALLGATHER.into_iter().map(|a| (Collective::Allgather, a));
    let reduce_scatter = REDUCE_SCATTER.into_iter().map(|a| (Collective::ReduceScatter, a));
    let allreduce = ALLREDUCE.into_iter().map(|a| (Collective::Allreduce, a));
    allgather.chain(reduce_scatter).chain(allreduce)
}

/// Run `run` of `collective` with `algorithm`, `elements` elements of `dtype` per block
/// (per vector for the all-reduce).
fn spec(
    run: u64,
    collective: Collective,
    algorithm: Algorithm,
    elements: usize,
    dtype: Dtype,
    op: ReduceOp,
) -> RunSpec {
    RunSpec {
        run,
        collective,
        size_bytes: (elements * dtype.size()) as u64,
        dtype,
        op,
        seed: 0xa11 + run,
        timeout_ms: TIMEOUT.as_millis() as u64,
        ..RunSpec::new(collective, algorithm)
    }
}

/// Runs `spec` on every node of `cluster` (wired as `topology`), checks every node's
/// output against the reference and that no message was left over; returns the most
/// steps any node's messages took (the longest chain of messages).
async fn verify(cluster: &MemoryCluster, topology: &Topology, spec: &RunSpec) -> u16 {
    let context = format!(
        "{} {} on {topology}, {} bytes of {} ({})",
        spec.algorithm, spec.collective, spec.size_bytes, spec.dtype, spec.op
    );
    cluster.verify(spec, TIMEOUT).await.unwrap_or_else(|error| panic!("{context}: {error}"))
}

/// `kind` with p nodes and its default shape, if it has one.
fn topology(kind: TopologyKind, p: usize) -> Option<Topology> {
    Topology::new(kind, p, None).ok()
}

/// Every algorithm of the family on `kind` for p = 1..=17 (where `kind` takes p), with
/// 0, 1 and an odd number of elements per block; the reductions walk through every
/// dtype and op.
async fn sweep(kind: TopologyKind) {
    let mut run = 0;
    for p in 1..=17 {
        let Some(topology) = topology(kind, p) else {
            continue;
        };
        let cluster = MemoryCluster::start(&topology);
        for (collective, algorithm) in every_case() {
            for elements in [0, 1, 13] {
                run += 1;
                let dtype = DTYPES[run as usize % 4];
                let op = OPS[run as usize / 4 % 4];
                verify(&cluster, &topology, &spec(run, collective, algorithm, elements, dtype, op)).await;
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
async fn on_hypercubes_of_1_to_16() {
    sweep(TopologyKind::Hypercube).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_fully_connected_networks_of_1_to_17() {
    sweep(TopologyKind::Full).await;
}

/// Explicit grid shapes the defaults never pick (long thin, 1 x n, 3-D with a 1 extent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_schedules_on_explicit_grid_shapes() {
    let shapes: [(TopologyKind, &[usize]); 6] = [
        (TopologyKind::Mesh, &[4, 2]),
        (TopologyKind::Torus, &[1, 6]),
        (TopologyKind::Torus, &[5, 2]),
        (TopologyKind::Mesh3d, &[3, 1, 2]),
        (TopologyKind::Torus3d, &[2, 3, 2]),
        (TopologyKind::Mesh, &[1, 7]),
    ];
    let mut run = 0;
    for (kind, dims) in shapes {
        let p = dims.iter().product();
        let topology = Topology::new(kind, p, Some(dims)).unwrap();
        let cluster = MemoryCluster::start(&topology);
        for collective in [Collective::Allgather, Collective::Allreduce] {
            run += 1;
            let s = spec(run, collective, Algorithm::Mesh, 2 * p + 1, Dtype::I64, ReduceOp::Sum);
            verify(&cluster, &topology, &s).await;
        }
    }
}

/// p = 32 and 64 on the kinds that scale, every algorithm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_32_and_64_nodes() {
    let mut run = 0;
    for p in [32, 64] {
        for kind in [TopologyKind::Ring, TopologyKind::Torus, TopologyKind::Hypercube, TopologyKind::Full] {
            let topology = topology(kind, p).unwrap();
            let cluster = MemoryCluster::start(&topology);
            for (collective, algorithm) in every_case() {
                run += 1;
                verify(&cluster, &topology, &spec(run, collective, algorithm, 3, Dtype::F64, ReduceOp::Sum)).await;
            }
        }
    }
}

/// Every dtype and op of each reduction, every algorithm, at p = 6 (folded) and 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dtype_and_op() {
    let mut run = 0;
    for (kind, p) in [(TopologyKind::Torus, 6), (TopologyKind::Hypercube, 8)] {
        let topology = topology(kind, p).unwrap();
        let cluster = MemoryCluster::start(&topology);
        for (collective, algorithm) in every_case().filter(|(c, _)| c.reduces()) {
            for dtype in DTYPES {
                for op in OPS {
                    run += 1;
                    verify(&cluster, &topology, &spec(run, collective, algorithm, 9, dtype, op)).await;
                }
            }
        }
    }
}

/// One 1 MiB case per collective (blocks of 1 MiB for the all-gather and the
/// reduce-scatter, a 1 MiB vector for the all-reduce), each crossing several hops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mebibyte() {
    let cases = [
        (Collective::Allgather, Algorithm::Bruck, TopologyKind::Ring, 6, Dtype::I32, ReduceOp::Sum),
        (Collective::ReduceScatter, Algorithm::RecursiveHalving, TopologyKind::Torus, 5, Dtype::F64, ReduceOp::Sum),
        (Collective::Allreduce, Algorithm::HalvingDoubling, TopologyKind::Torus, 12, Dtype::F32, ReduceOp::Sum),
    ];
    for (run, (collective, algorithm, kind, p, dtype, op)) in cases.into_iter().enumerate() {
        let topology = topology(kind, p).unwrap();
        let cluster = MemoryCluster::start(&topology);
        let elements = (1 << 20) / dtype.size();
        verify(&cluster, &topology, &spec(run as u64 + 1, collective, algorithm, elements, dtype, op)).await;
    }
}

/// The longest chain of messages (what `Comm::steps` counts) is the step count each
/// schedule's docs give. A folded schedule runs two rounds more than its core, but its
/// longest chain may be one shorter: the unfold message extends the longest core chain
/// only when the partner's last core partner also had an extra node (r > q/2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_counts() {
    use Algorithm as A;
    use Collective as C;
    let log = |p: usize| p.ilog2() as u16;
    // A folded core of `core` rounds.
    let fold = |p: usize, core: u16| if p.is_power_of_two() { core..=core } else { core + 1..=core + 2 };
    let exact = |steps: u16| steps..=steps;
    let mut run = 0;
    for (kind, p) in [
        (TopologyKind::Ring, 7),
        (TopologyKind::Hypercube, 16),
        (TopologyKind::Full, 12),
        (TopologyKind::Torus, 12),
        (TopologyKind::Mesh3d, 12),
    ] {
        let topology = topology(kind, p).unwrap();
        let cluster = MemoryCluster::start(&topology);
        let ceil_log = (p.next_power_of_two().ilog2()) as u16;
        // Σ (k - 1) over the grid's extents.
        let lines: u16 = match kind {
            TopologyKind::Torus | TopologyKind::Mesh3d => topology.dims().iter().map(|&k| k as u16 - 1).sum(),
            _ => {
                let (rows, cols) = topocomm_proto::topology::squarest_grid(p);
                (rows + cols - 2) as u16
            }
        };
        let pm1 = p as u16 - 1;
        let expected = [
            (C::Allgather, A::Ring, exact(pm1)),
            (C::Allgather, A::Mesh, exact(lines)),
            (C::Allgather, A::Hypercube, fold(p, log(p))),
            (C::Allgather, A::RecursiveDoubling, fold(p, log(p))),
            (C::Allgather, A::Bruck, exact(ceil_log)),
            (C::ReduceScatter, A::Ring, exact(pm1)),
            (C::ReduceScatter, A::RecursiveHalving, fold(p, log(p))),
            (C::ReduceScatter, A::Pairwise, exact(pm1)),
            (C::Allreduce, A::RecursiveDoubling, fold(p, log(p))),
            (C::Allreduce, A::HalvingDoubling, fold(p, 2 * log(p))),
            (C::Allreduce, A::Ring, exact(2 * pm1)),
            (C::Allreduce, A::Mesh, exact(2 * lines)),
        ];
        for (collective, algorithm, steps) in expected {
            run += 1;
            let s = spec(run, collective, algorithm, 5, Dtype::I64, ReduceOp::Max);
            let context = format!("{algorithm} {collective} on {topology}");
            let measured = verify(&cluster, &topology, &s).await;
            assert!(steps.contains(&measured), "{context}: {measured} steps, expected {steps:?}");
        }
        if p.is_power_of_two() {
            run += 1;
            let s = spec(run, C::Allreduce, A::ReduceBroadcast, 5, Dtype::I64, ReduceOp::Max);
            assert_eq!(verify(&cluster, &topology, &s).await, 2 * log(p));
        }
    }
}

/// Frames forwarded by the routers of every node of `cluster`.
fn forwarded(cluster: &MemoryCluster, p: usize) -> u64 {
    (0..p).map(|node| cluster.router(node).traffic().frames_forwarded).sum()
}

/// Runs `collective` with `algorithm` on a fresh cluster wired as `kind` with p nodes;
/// returns the frames its routers forwarded.
async fn forwarded_by(collective: Collective, algorithm: Algorithm, kind: TopologyKind, p: usize) -> u64 {
    let topology = topology(kind, p).unwrap();
    let cluster = MemoryCluster::start(&topology);
    verify(&cluster, &topology, &spec(1, collective, algorithm, 4, Dtype::I32, ReduceOp::Sum)).await;
    forwarded(&cluster, p)
}

/// A schedule on a topology it was not made for still verifies, but its messages travel
/// several hops; on its own topology every message crosses exactly one link (folding
/// included: an extra node's partner is its neighbour on a ring or a hypercube).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hypercube_schedules_forward_frames_on_a_ring_only() {
    use Algorithm as A;
    use Collective as C;
    use TopologyKind as T;
    for (collective, algorithm) in
        [(C::Allgather, A::Hypercube), (C::ReduceScatter, A::Hypercube), (C::Allreduce, A::RecursiveDoubling)]
    {
        let on_ring = forwarded_by(collective, algorithm, T::Ring, 8).await;
        assert!(on_ring > 0, "{algorithm} {collective} on a ring of 8 forwarded nothing");
        let on_hypercube = forwarded_by(collective, algorithm, T::Hypercube, 8).await;
        assert_eq!(on_hypercube, 0, "{algorithm} {collective} on a hypercube of 8 forwarded frames");
    }
    assert!(forwarded_by(C::Allgather, A::Bruck, T::Ring, 8).await > 0);
    assert!(forwarded_by(C::Allgather, A::Ring, T::Hypercube, 8).await > 0);
    let native = [
        (C::Allgather, A::Ring, T::Ring, 9),
        (C::Allgather, A::Mesh, T::Mesh, 12),
        (C::Allgather, A::Mesh, T::Torus, 16),
        (C::Allgather, A::Mesh, T::Torus3d, 27),
        (C::Allgather, A::Mesh, T::Mesh3d, 12),
        (C::Allgather, A::RecursiveDoubling, T::Hypercube, 16),
        (C::Allgather, A::RecursiveDoubling, T::Full, 11),
        (C::Allgather, A::Bruck, T::Full, 11),
        (C::ReduceScatter, A::Ring, T::Ring, 9),
        (C::ReduceScatter, A::RecursiveHalving, T::Hypercube, 16),
        (C::ReduceScatter, A::Pairwise, T::Full, 7),
        (C::Allreduce, A::ReduceBroadcast, T::Hypercube, 8),
        (C::Allreduce, A::HalvingDoubling, T::Hypercube, 16),
        (C::Allreduce, A::HalvingDoubling, T::Full, 13),
        (C::Allreduce, A::Ring, T::Ring, 10),
        (C::Allreduce, A::Mesh, T::Torus, 12),
        (C::Allreduce, A::Mesh, T::Torus3d, 8),
    ];
    for (collective, algorithm, kind, p) in native {
        let frames = forwarded_by(collective, algorithm, kind, p).await;
        assert_eq!(frames, 0, "{algorithm} {collective} on {kind} of {p} forwarded frames");
    }
}

/// Node `node`'s block of a layout test: `len` bytes that say whose they are.
fn block_of(node: usize, len: usize) -> Bytes {
    (0..len).map(|j| (node * 31 + j) as u8).collect::<Vec<u8>>().into()
}

/// The layout-general all-gather on layouts with blocks of different lengths (some
/// empty) and the layout-general reduce-scatter on the same, for the algorithms that
/// serve them, folded and not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uneven_layouts() {
    let mut run = 0;
    for (kind, p) in [(TopologyKind::Ring, 7), (TopologyKind::Torus, 6), (TopologyKind::Hypercube, 8)] {
        let topology = topology(kind, p).unwrap();
        let cluster = MemoryCluster::start(&topology);
        // 8-byte elements: 3 of p pieces; 2p + 3 of them; uniform; all empty.
        let layouts = [
            BlockLayout::split(3 * 8, p, 8),
            BlockLayout::split((2 * p + 3) * 8, p, 8),
            BlockLayout::uniform(p, 16),
            BlockLayout::uniform(p, 0),
        ];
        for layout in layouts {
            let layout = Arc::new(layout);
            let all: Vec<u8> = (0..p).flat_map(|i| block_of(i, layout.len(i))).collect();
            for algorithm in ALLGATHER {
                run += 1;
                let shared = layout.clone();
                let outputs = cluster
                    .run_all(run, TIMEOUT, move |comm| {
                        let layout = shared.clone();
                        async move {
                            let mine = block_of(comm.id(), layout.len(comm.id()));
                            allgather_layout(&comm, algorithm, &layout, mine).await
                        }
                    })
                    .await;
                for (node, output) in outputs.into_iter().enumerate() {
                    assert_eq!(output.as_deref(), Ok(&all[..]), "{algorithm} allgather {layout:?} node {node}");
                }
            }
            // Node k's vector: element j is (k + 1) * (j + 1); node i ends with the sum
            // of every node's block i.
            let vector = |k: usize| -> Bytes {
                (0..layout.total() / 8).flat_map(|j| ((k as i64 + 1) * (j as i64 + 1)).to_le_bytes()).collect()
            };
            let mut sum = vector(0).to_vec();
            for k in 1..p {
                combine(Dtype::I64, ReduceOp::Sum, &mut sum, &vector(k)).unwrap();
            }
            for algorithm in REDUCE_SCATTER {
                run += 1;
                let shared = layout.clone();
                let outputs = cluster
                    .run_all(run, TIMEOUT, move |comm| {
                        let layout = shared.clone();
                        let reduction = Reduction { dtype: Dtype::I64, op: ReduceOp::Sum };
                        let mine = vector(comm.id());
                        async move { reduce_scatter_layout(&comm, algorithm, &layout, mine, reduction).await }
                    })
                    .await;
                for (node, output) in outputs.into_iter().enumerate() {
                    let expected = &sum[layout.range(node)];
                    assert_eq!(output.as_deref(), Ok(expected), "{algorithm} reduce-scatter {layout:?} node {node}");
                }
            }
            for node in 0..p {
                assert_eq!(cluster.router(node).mailbox().queued(), 0);
            }
        }
    }
}

/// Inputs that do not fit fail every node at once, with a reason and no message sent;
/// vectors of different lengths fail the combine; an algorithm of another family is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_fail_cleanly() {
    let topology = topology(TopologyKind::Full, 4).unwrap();
    let cluster = MemoryCluster::start(&topology);
    let layout = Arc::new(BlockLayout::uniform(4, 8));
    let shared = layout.clone();
    let outputs = cluster
        .run_all(1, TIMEOUT, move |comm| {
            let layout = shared.clone();
            async move { allgather_layout(&comm, Algorithm::Bruck, &layout, Bytes::from_static(&[0; 4])).await }
        })
        .await;
    for (me, output) in outputs.into_iter().enumerate() {
        let source = ElementsError::LengthMismatch { acc: 8, other: 4 };
        assert_eq!(output, Err(CommError::Elements { me, source }));
    }
    let shared = layout.clone();
    let outputs = cluster
        .run_all(2, TIMEOUT, move |comm| {
            let layout = shared.clone();
            let reduction = Reduction { dtype: Dtype::I32, op: ReduceOp::Sum };
            async move {
                reduce_scatter_layout(&comm, Algorithm::Ring, &layout, Bytes::from_static(&[0; 8]), reduction).await
            }
        })
        .await;
    assert!(outputs.iter().all(|o| matches!(o, Err(CommError::Elements { .. }))), "{outputs:?}");
    let outputs = cluster
        .run_all(3, Duration::from_secs(5), |comm: Comm| async move {
            let reduction = Reduction { dtype: Dtype::I32, op: ReduceOp::Sum };
            let vector = Bytes::from(vec![1u8; 4 * (1 + comm.id() % 2)]);
            allreduce::run(&comm, Algorithm::RecursiveDoubling, vector, reduction).await
        })
        .await;
    // Even nodes hold 4 bytes, odd ones 8; every node's first partner holds the other length.
    for (me, output) in outputs.iter().enumerate() {
        let (acc, other) = if me % 2 == 0 { (8, 4) } else { (4, 8) };
        let source = ElementsError::LengthMismatch { acc, other };
        assert_eq!(output, &Err(CommError::Elements { me, source }));
    }
    let s = Arc::new(spec(4, Collective::Allgather, Algorithm::Pairwise, 1, Dtype::I32, ReduceOp::Sum));
    let outputs = cluster
        .run_all(4, TIMEOUT, move |comm| {
            let s = s.clone();
            async move { collectives::run(&comm, &s, Bytes::from_static(&[0; 4])).await }
        })
        .await;
    for output in outputs {
        let error = output.unwrap_err();
        assert!(matches!(error, CommError::Unsupported { .. }), "{error}");
        assert!(error.to_string().contains("bruck"), "{error}");
    }
    for node in 0..4 {
        assert_eq!(cluster.router(node).mailbox().queued(), 0);
    }
}
