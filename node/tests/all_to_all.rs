//! All-gather, reduce-scatter and all-reduce, every algorithm on every topology kind, run
//! on an in-memory cluster (the real routers and link tasks over in-memory pipes) and
//! every node's result held against `topocomm_proto::reference`; the layout-general
//! entry points on uneven layouts; step counts; which schedules forward frames where.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{
    DTYPES, OPS, SMALL, Specs, TIMEOUT, algorithms_of, assert_no_message_left, dtype_and_op, forwarded_by,
    grids_the_defaults_never_pick, on_each, run_with_input, scaled, shape, shapes_of, verify, verify_fresh,
};
use topocomm_collectives::algorithms::allgather::allgather_layout;
use topocomm_collectives::algorithms::allreduce;
use topocomm_collectives::algorithms::blocks::BlockLayout;
use topocomm_collectives::algorithms::hierarchy::Hierarchy;
use topocomm_collectives::algorithms::patterns::Reduction;
use topocomm_collectives::algorithms::reduce_scatter::reduce_scatter_layout;
use topocomm_collectives::comm::{Comm, CommError};
use topocomm_node::in_process::InProcessCluster;
use topocomm_proto::TopologyKind;
use topocomm_proto::elements::{ElementsError, combine};
use topocomm_proto::spec::{Algorithm, Collective, Dtype, ReduceOp, RunSpec};

const SPECS: Specs = Specs { seed_base: 0xa11 };

/// The collectives of the family.
const FAMILY: [Collective; 3] = [Collective::Allgather, Collective::ReduceScatter, Collective::Allreduce];

/// Every (collective, algorithm) pair of the family, as the catalogue lists them.
fn every_case() -> impl Iterator<Item = (Collective, Algorithm)> {
    FAMILY.into_iter().flat_map(|collective| algorithms_of(collective).into_iter().map(move |a| (collective, a)))
}

/// Run `run` of `collective` by `algorithm`, `elements` elements per block (per vector
/// for the all-reduce).
fn spec(
    run: u64,
    (collective, algorithm): (Collective, Algorithm),
    elements: usize,
    (dtype, op): (Dtype, ReduceOp),
) -> RunSpec {
    RunSpec { op, ..SPECS.of(run, collective, algorithm, elements, dtype) }
}

/// Every algorithm of the family on `kind` for p = 1..=17 (where `kind` takes p), with
/// 0, 1 and an odd number of elements per block; the reductions walk through every
/// dtype and op.
async fn sweep(kind: TopologyKind) {
    let mut run = 0;
    on_each(shapes_of(kind, SMALL), async |cluster, topology| {
        for case in every_case() {
            for elements in [0, 1, 13] {
                run += 1;
                verify(cluster, topology, &spec(run, case, elements, dtype_and_op(run))).await;
            }
        }
    })
    .await;
}

common::tests_on_every_kind!(sweep);

/// The mesh all-gather and all-reduce on grid shapes the defaults never pick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_schedules_on_explicit_grid_shapes() {
    let mut run = 0;
    on_each(grids_the_defaults_never_pick(), async |cluster, topology| {
        for collective in [Collective::Allgather, Collective::Allreduce] {
            run += 1;
            let s = spec(run, (collective, Algorithm::Mesh), 2 * topology.p() + 1, (Dtype::I64, ReduceOp::Sum));
            verify(cluster, topology, &s).await;
        }
    })
    .await;
}

/// p = 32 and 64 on the kinds that scale, every algorithm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_32_and_64_nodes() {
    use TopologyKind as T;
    let mut run = 0;
    on_each(scaled(&[32, 64], &[T::Ring, T::Torus, T::Hypercube, T::Full]), async |cluster, topology| {
        for case in every_case() {
            run += 1;
            verify(cluster, topology, &spec(run, case, 3, (Dtype::F64, ReduceOp::Sum))).await;
        }
    })
    .await;
}

/// Every dtype and op of each reduction, every algorithm, at p = 6 (folded) and 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dtype_and_op() {
    let mut run = 0;
    on_each([shape(TopologyKind::Torus, 6), shape(TopologyKind::Hypercube, 8)], async |cluster, topology| {
        for case in every_case().filter(|(collective, _)| collective.reduces()) {
            for dtype in DTYPES {
                for op in OPS {
                    run += 1;
                    verify(cluster, topology, &spec(run, case, 9, (dtype, op))).await;
                }
            }
        }
    })
    .await;
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
        let elements = (1 << 20) / dtype.size();
        verify_fresh(&shape(kind, p), &spec(run as u64 + 1, (collective, algorithm), elements, (dtype, op))).await;
    }
}

/// Recursive doubling of a vector of several segments (`Comm::segments`; the in-memory
/// links are raw): on 8 nodes and on 6 (folded), a last segment shorter than the rest,
/// still one step per exchange, and every segment a frame of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recursive_doubling_in_segments() {
    let segment = topocomm_collectives::comm::SEGMENT_LEN;
    for (run, (kind, p, dtype, op)) in
        [(TopologyKind::Hypercube, 8, Dtype::F64, ReduceOp::Sum), (TopologyKind::Full, 6, Dtype::I32, ReduceOp::Max)]
            .into_iter()
            .enumerate()
    {
        let bytes = 4 * segment + 3 * dtype.size();
        let topology = shape(kind, p);
        let s = spec(
            run as u64 + 1,
            (Collective::Allreduce, Algorithm::RecursiveDoubling),
            bytes / dtype.size(),
            (dtype, op),
        );
        let (steps, cluster) = verify_fresh(&topology, &s).await;
        let rounds = p.ilog2() as u16;
        let expected = if p.is_power_of_two() { rounds..=rounds } else { rounds + 1..=rounds + 2 };
        assert!(expected.contains(&steps), "{topology}: {steps} steps, expected {expected:?}");
        // Node 0 is in the core either way: 5 segments in each of its log p exchanges, and
        // on 6 nodes one more frame, the result to its extra node (node 4).
        let sent = cluster.router(0).traffic().frames_sent;
        assert_eq!(sent, 5 * u64::from(rounds) + u64::from(!p.is_power_of_two()), "{topology}: frames node 0 sent");
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
    let shapes = [
        shape(TopologyKind::Ring, 7),
        shape(TopologyKind::Hypercube, 16),
        shape(TopologyKind::Full, 12),
        shape(TopologyKind::Torus, 12),
        shape(TopologyKind::Mesh3d, 12),
    ];
    on_each(shapes, async |cluster, topology| {
        let p = topology.p();
        let ceil_log = (p.next_power_of_two().ilog2()) as u16;
        // Σ (k - 1) over the grid's extents.
        let lines: u16 = match topology.kind() {
            TopologyKind::Torus | TopologyKind::Mesh3d => topology.dims().iter().map(|&k| k as u16 - 1).sum(),
            _ => {
                let (rows, cols) = topocomm_proto::topology::squarest_grid(p);
                (rows + cols - 2) as u16
            }
        };
        let pm1 = p as u16 - 1;
        // The two-level schedules' g groups of c (the grid's rows): a binomial tree of n
        // nodes is ⌊log n⌋ messages deep.
        let hierarchy = Hierarchy::of(topology);
        let (g, c) = (hierarchy.groups(), hierarchy.group_size());
        let expected = [
            (C::Allgather, A::Ring, exact(pm1)),
            (C::Allgather, A::Mesh, exact(lines)),
            (C::Allgather, A::Hypercube, fold(p, log(p))),
            (C::Allgather, A::RecursiveDoubling, fold(p, log(p))),
            (C::Allgather, A::Bruck, exact(ceil_log)),
            (C::Allgather, A::NeighbourExchange, exact(if p.is_multiple_of(2) { p as u16 / 2 } else { pm1 })),
            (C::ReduceScatter, A::Ring, exact(pm1)),
            (C::ReduceScatter, A::RecursiveHalving, fold(p, log(p))),
            (C::ReduceScatter, A::Pairwise, exact(pm1)),
            (C::Allreduce, A::RecursiveDoubling, fold(p, log(p))),
            (C::Allreduce, A::HalvingDoubling, fold(p, 2 * log(p))),
            (C::Allreduce, A::Ring, exact(2 * pm1)),
            (C::Allreduce, A::Mesh, exact(2 * lines)),
            (C::Allgather, A::TwoLevel, exact(2 * log(c) + g as u16 - 1)),
            (C::Allreduce, A::TwoLevel, exact(2 * (log(g) + log(c)))),
            (C::Allreduce, A::TwoLevelRing, exact(2 * log(c) + 2 * (g as u16 - 1))),
            (C::Allreduce, A::MultiLeader, exact(2 * (c as u16 - 1) + 2 * (g as u16 - 1))),
        ];
        for (collective, algorithm, steps) in expected {
            run += 1;
            let measured =
                verify(cluster, topology, &spec(run, (collective, algorithm), 5, (Dtype::I64, ReduceOp::Max))).await;
            assert!(
                steps.contains(&measured),
                "{algorithm} {collective} on {topology}: {measured} steps, expected {steps:?}"
            );
        }
        if p.is_power_of_two() {
            run += 1;
            let s = spec(run, (C::Allreduce, A::ReduceBroadcast), 5, (Dtype::I64, ReduceOp::Max));
            assert_eq!(verify(cluster, topology, &s).await, 2 * log(p));
        }
    })
    .await;
}

/// Runs `collective` by `algorithm` on a fresh cluster wired as `kind` with p nodes;
/// returns the frames its routers forwarded.
async fn forwarded_running(collective: Collective, algorithm: Algorithm, kind: TopologyKind, p: usize) -> u64 {
    forwarded_by(&shape(kind, p), &[spec(1, (collective, algorithm), 4, (Dtype::I32, ReduceOp::Sum))]).await
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
        let on_ring = forwarded_running(collective, algorithm, T::Ring, 8).await;
        assert!(on_ring > 0, "{algorithm} {collective} on a ring of 8 forwarded nothing");
        let on_hypercube = forwarded_running(collective, algorithm, T::Hypercube, 8).await;
        assert_eq!(on_hypercube, 0, "{algorithm} {collective} on a hypercube of 8 forwarded frames");
    }
    assert!(forwarded_running(C::Allgather, A::Bruck, T::Ring, 8).await > 0);
    assert!(forwarded_running(C::Allgather, A::Ring, T::Hypercube, 8).await > 0);
    let native = [
        (C::Allgather, A::Ring, T::Ring, 9),
        (C::Allgather, A::Mesh, T::Mesh, 12),
        (C::Allgather, A::Mesh, T::Torus, 16),
        (C::Allgather, A::Mesh, T::Torus3d, 27),
        (C::Allgather, A::Mesh, T::Mesh3d, 12),
        (C::Allgather, A::RecursiveDoubling, T::Hypercube, 16),
        (C::Allgather, A::RecursiveDoubling, T::Full, 11),
        (C::Allgather, A::Bruck, T::Full, 11),
        (C::Allgather, A::NeighbourExchange, T::Ring, 10),
        (C::Allgather, A::NeighbourExchange, T::Ring, 9),
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
        let frames = forwarded_running(collective, algorithm, kind, p).await;
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
    let shapes = [shape(TopologyKind::Ring, 7), shape(TopologyKind::Torus, 6), shape(TopologyKind::Hypercube, 8)];
    on_each(shapes, async |cluster, topology| {
        let p = topology.p();
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
            for algorithm in algorithms_of(Collective::Allgather) {
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
            for algorithm in algorithms_of(Collective::ReduceScatter) {
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
            assert_no_message_left(cluster, p, &format!("layout runs {layout:?} on {topology}"));
        }
    })
    .await;
}

/// Inputs that do not fit fail every node at once, with a reason and no message sent;
/// vectors of different lengths fail the combine; an algorithm of another family is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_fail_cleanly() {
    let cluster = InProcessCluster::start(&shape(TopologyKind::Full, 4));
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
    // Even nodes hold 4 bytes, odd ones 8; every node's first partner holds the other
    // length. Which of the two is combined into the other depends on which buffer no one
    // else holds by then (`Reduction::combine_segment`).
    for (me, output) in outputs.iter().enumerate() {
        let mismatch =
            |acc, other| Err(CommError::Elements { me, source: ElementsError::LengthMismatch { acc, other } });
        assert!(*output == mismatch(8, 4) || *output == mismatch(4, 8), "node {me}: {output:?}");
    }
    let s = spec(4, (Collective::Allgather, Algorithm::Pairwise), 1, (Dtype::I32, ReduceOp::Sum));
    for output in run_with_input(&cluster, &s, Bytes::from_static(&[0; 4])).await {
        let error = output.unwrap_err();
        assert!(matches!(error, CommError::Unsupported { .. }), "{error}");
        assert!(error.to_string().contains("bruck"), "{error}");
    }
    assert_no_message_left(&cluster, 4, "refused runs");
}
