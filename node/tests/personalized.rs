//! The personalized collectives — scatter, gather, all-to-all personalized and circular
//! shift — every algorithm on every topology kind, run on an in-memory cluster (the real
//! routers and link tasks over in-memory pipes) and every node's result held against
//! `topocomm_proto::reference`; plus the layout-general scatter and gather with uneven
//! blocks, the frames each schedule makes the routers forward, and refused inputs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{
    DTYPES, SMALL, Specs, TIMEOUT, algorithms_of, assert_no_message_left, forwarded_by, grids_the_defaults_never_pick,
    on_each, run_on_reference_inputs, run_with_input, scaled, shape, shapes_of, verify, verify_fresh,
};
use topocomm_collectives::algorithms::blocks::BlockLayout;
use topocomm_collectives::algorithms::{alltoall, scatter_gather};
use topocomm_collectives::comm::{CommError, MessageError};
use topocomm_node::in_process::InProcessCluster;
use topocomm_proto::spec::{Algorithm, Collective, Dtype, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

const SPECS: Specs = Specs { seed_base: 0x9e75 };

/// The algorithms of scatter and of gather (the catalogue gives the two the same).
fn rooted() -> Vec<Algorithm> {
    let scatter = algorithms_of(Collective::Scatter);
    assert_eq!(scatter, algorithms_of(Collective::Gather), "scatter and gather have the same algorithms");
    scatter
}
/// Elements per block: none, one, an odd count.
const ELEMENTS: [usize; 3] = [0, 1, 7];

/// Run `run` of `collective` by `algorithm` from/to `root` (or shifting by `shift`):
/// `elements` elements of `dtype` per block.
fn spec(
    run: u64,
    (collective, algorithm): (Collective, Algorithm),
    root: usize,
    elements: usize,
    dtype: Dtype,
    shift: usize,
) -> RunSpec {
    RunSpec { root, shift, ..SPECS.of(run, collective, algorithm, elements, dtype) }
}

/// Roots worth trying at p: every node while p is small, else the first, the middle and
/// the last.
fn roots(p: usize) -> Vec<usize> {
    if p <= 6 { (0..p).collect() } else { vec![0, p / 2, p - 1] }
}

/// The shifts every sweep tries.
fn shifts(p: usize) -> [usize; 5] {
    [0, 1, 2, p - 1, p + 3]
}

/// Hands out run ids (unique per cluster) and walks through the dtypes.
#[derive(Default)]
struct Runs(u64);

impl Runs {
    fn next(&mut self) -> (u64, Dtype) {
        self.0 += 1;
        (self.0, DTYPES[self.0 as usize % DTYPES.len()])
    }
}

/// Every algorithm of every personalized collective on `cluster`: scatter and gather
/// from `roots` with every block size of [`ELEMENTS`], all-to-all with every size,
/// shift by every q of [`shifts`] (sizes taking turns).
async fn everything(cluster: &InProcessCluster, topology: &Topology, roots: &[usize], runs: &mut Runs) {
    let p = topology.p();
    for algorithm in rooted() {
        for collective in [Collective::Scatter, Collective::Gather] {
            for &root in roots {
                for elements in ELEMENTS {
                    let (run, dtype) = runs.next();
                    verify(cluster, topology, &spec(run, (collective, algorithm), root, elements, dtype, 0)).await;
                }
            }
        }
    }
    for algorithm in algorithms_of(Collective::Alltoall) {
        for elements in ELEMENTS {
            let (run, dtype) = runs.next();
            verify(cluster, topology, &spec(run, (Collective::Alltoall, algorithm), 0, elements, dtype, 0)).await;
        }
    }
    for algorithm in algorithms_of(Collective::Shift) {
        for q in shifts(p) {
            let (run, dtype) = runs.next();
            let elements = ELEMENTS[run as usize % ELEMENTS.len()];
            verify(cluster, topology, &spec(run, (Collective::Shift, algorithm), 0, elements, dtype, q)).await;
        }
    }
}

/// [`everything`] on `kind` for p = 1..=17, where `kind` takes p.
async fn sweep(kind: TopologyKind) {
    on_each(shapes_of(kind, SMALL), async |cluster, topology| {
        everything(cluster, topology, &roots(topology.p()), &mut Runs::default()).await;
    })
    .await;
}

common::tests_on_every_kind!(sweep);

/// Grid shapes the defaults never pick: every collective's mesh algorithm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_algorithms_on_explicit_grid_shapes() {
    let mut runs = Runs::default();
    on_each(grids_the_defaults_never_pick(), async |cluster, topology| {
        let p = topology.p();
        for collective in [Collective::Scatter, Collective::Gather] {
            for root in 0..p {
                let (run, dtype) = runs.next();
                verify(cluster, topology, &spec(run, (collective, Algorithm::Mesh), root, 3, dtype, 0)).await;
            }
        }
        let (run, dtype) = runs.next();
        verify(cluster, topology, &spec(run, (Collective::Alltoall, Algorithm::Mesh), 0, 3, dtype, 0)).await;
        for q in 0..2 * p {
            let (run, dtype) = runs.next();
            verify(cluster, topology, &spec(run, (Collective::Shift, Algorithm::Mesh), 0, 3, dtype, q)).await;
        }
    })
    .await;
}

/// p = 32 and 64 on the kinds that scale, every algorithm (roots 0, 21 and p - 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_32_and_64_nodes() {
    use TopologyKind as T;
    on_each(scaled(&[32, 64], &[T::Ring, T::Torus, T::Mesh3d, T::Hypercube, T::Full]), async |cluster, topology| {
        let p = topology.p();
        let mut runs = Runs::default();
        for algorithm in rooted() {
            for collective in [Collective::Scatter, Collective::Gather] {
                for root in [0, 21, p - 1] {
                    let (run, dtype) = runs.next();
                    verify(cluster, topology, &spec(run, (collective, algorithm), root, 5, dtype, 0)).await;
                }
            }
        }
        for algorithm in algorithms_of(Collective::Alltoall) {
            let (run, dtype) = runs.next();
            verify(cluster, topology, &spec(run, (Collective::Alltoall, algorithm), 0, 3, dtype, 0)).await;
        }
        for algorithm in algorithms_of(Collective::Shift) {
            for q in [1, p / 2 + 3, p - 1, 3 * p + 5] {
                let (run, dtype) = runs.next();
                verify(cluster, topology, &spec(run, (Collective::Shift, algorithm), 0, 5, dtype, q)).await;
            }
        }
    })
    .await;
}

/// One large case per collective: 256 KiB or more per node (at the root for scatter
/// and gather), each message crossing store-and-forward hops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages() {
    const KIB: usize = 1024;
    let cases = [
        (Collective::Scatter, Algorithm::Hypercube, TopologyKind::Ring, 8, 32 * KIB, 5),
        (Collective::Gather, Algorithm::Mesh, TopologyKind::Torus, 9, 32 * KIB, 4),
        (Collective::Alltoall, Algorithm::Hypercube, TopologyKind::Hypercube, 8, 32 * KIB, 0),
        (Collective::Shift, Algorithm::Ring, TopologyKind::Ring, 6, 256 * KIB, 2),
    ];
    for (run, (collective, algorithm, kind, p, bytes, root_or_shift)) in cases.into_iter().enumerate() {
        let dtype = DTYPES[run % DTYPES.len()];
        let (root, shift) = match collective {
            Collective::Shift => (0, root_or_shift),
            _ => (root_or_shift, 0),
        };
        let s = spec(run as u64 + 1, (collective, algorithm), root, bytes / dtype.size(), dtype, shift);
        verify_fresh(&shape(kind, p), &s).await;
    }
}

/// The hypercube all-to-all with blocks long enough to be read in place (over 64 KiB):
/// on raw links and 2^d nodes each step's message goes as two, the part for the
/// partner itself apart (`alltoall::step_messages`), except the last step's, which is all
/// for the partner; folded, one message per step as in the textbook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hypercube_all_to_all_of_long_blocks() {
    let elements = (64 * 1024 + 40) / Dtype::F64.size();
    let cases = [
        (TopologyKind::Hypercube, 8, 2 + 2 + 1),
        (TopologyKind::Hypercube, 16, 2 + 2 + 2 + 1),
        (TopologyKind::Full, 6, 3),
    ];
    for (run, (kind, p, frames)) in cases.into_iter().enumerate() {
        let topology = shape(kind, p);
        let s = spec(run as u64 + 1, (Collective::Alltoall, Algorithm::Hypercube), 0, elements, Dtype::F64, 0);
        let (_, cluster) = verify_fresh(&topology, &s).await;
        // Node 0 is a core node in all three; on 6 nodes node 1 folds into it: two core
        // steps and the unfold.
        let sent = cluster.router(0).traffic().frames_sent;
        assert_eq!(sent, frames, "{topology}: frames node 0 sent");
    }
}

/// Uneven blocks: node i's block of `layout` is `layout.len(i)` bytes of the value i + 1.
fn uneven_blocks(layout: &BlockLayout) -> Vec<Bytes> {
    (0..layout.p()).map(|i| Bytes::from(vec![i as u8 + 1; layout.len(i)])).collect()
}

/// `scatter_layout` and `gather_layout` with uneven blocks (element counts differing by
/// one, some blocks empty when there are fewer elements than nodes), every algorithm,
/// several roots: the scatter hands node i its block, the gather brings them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_general_scatter_and_gather() {
    let mut run = 0;
    let shapes = [
        shape(TopologyKind::Ring, 7),
        shape(TopologyKind::Torus, 12),
        shape(TopologyKind::Mesh3d, 8),
        shape(TopologyKind::Hypercube, 8),
        shape(TopologyKind::Full, 5),
    ];
    on_each(shapes, async |cluster, topology| {
        let p = topology.p();
        for (total, elem) in [(4 * 37, 4), (8 * 3, 8), (0, 4)] {
            let layout = Arc::new(BlockLayout::split(total, p, elem));
            let blocks = Arc::new(uneven_blocks(&layout));
            let whole = Bytes::from(blocks.concat());
            for algorithm in rooted() {
                for root in [0, p / 2, p - 1] {
                    run += 1;
                    let shared = (layout.clone(), blocks.clone(), whole.clone());
                    let outputs = cluster
                        .run_all(run, TIMEOUT, move |comm| {
                            let (layout, blocks, whole) = &shared;
                            let (layout, blocks, whole) = (layout.clone(), blocks.clone(), whole.clone());
                            async move {
                                let me = comm.id();
                                let input = if me == root { whole } else { Bytes::new() };
                                let mine =
                                    scatter_gather::scatter_layout(&comm, algorithm, root, &layout, input).await?;
                                assert_eq!(mine, blocks[me], "{algorithm} scatter to {me}");
                                scatter_gather::gather_layout(&comm, algorithm, root, &layout, mine).await
                            }
                        })
                        .await;
                    for (node, output) in outputs.into_iter().enumerate() {
                        let output = output
                            .unwrap_or_else(|e| panic!("{algorithm} on {topology} from {root}: node {node}: {e}"));
                        let expected = if node == root { whole.clone() } else { Bytes::new() };
                        assert_eq!(output, expected, "{algorithm} gather on {topology} to {root}");
                    }
                    assert_no_message_left(cluster, p, &format!("{algorithm} on {topology} from {root}"));
                }
            }
        }
    })
    .await;
}

/// The longest chain of messages (`Comm::steps`) of each schedule on its own topology
/// is the step count its doc comment gives (where the root's port does not serialise
/// the steps: the one-port count of the linear and ring schedules is not a chain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_counts_match_the_formulas() {
    use Algorithm as A;
    use Collective as C;
    use TopologyKind as T;
    let cases = [
        (C::Scatter, A::Hypercube, T::Hypercube, 16, 0, 4),
        (C::Scatter, A::Hypercube, T::Full, 11, 0, 3), // ⌈log p⌉ rounds; the deepest chain reaches 7 = 0b111
        (C::Gather, A::Hypercube, T::Hypercube, 16, 0, 4),
        (C::Scatter, A::Mesh, T::Torus, 16, 0, 4),
        (C::Gather, A::Ring, T::Ring, 9, 0, 4),
        (C::Alltoall, A::Ring, T::Ring, 7, 0, 6),
        (C::Alltoall, A::Mesh, T::Torus, 16, 0, 6),
        (C::Alltoall, A::Mesh, T::Mesh3d, 8, 0, 3),
        (C::Alltoall, A::Hypercube, T::Hypercube, 16, 0, 4),
        (C::Alltoall, A::Hypercube, T::Full, 12, 0, 4), // 3 + 2 rounds; cores 4..7 fold nothing in
        (C::Alltoall, A::PairwiseXor, T::Hypercube, 8, 0, 7),
        (C::Alltoall, A::Pairwise, T::Full, 6, 0, 5),
        (C::Alltoall, A::Bruck, T::Full, 11, 0, 4),
        (C::Shift, A::Ring, T::Ring, 10, 7, 3),
        (C::Shift, A::Ring, T::Ring, 10, 0, 0),
        (C::Shift, A::Mesh, T::Torus, 16, 5, 3),
        (C::Shift, A::Hypercube, T::Hypercube, 8, 13, 2),
    ];
    for (run, (collective, algorithm, kind, p, shift, steps)) in cases.into_iter().enumerate() {
        let s = spec(run as u64 + 1, (collective, algorithm), 0, 2, Dtype::I32, shift);
        let (longest, _) = verify_fresh(&shape(kind, p), &s).await;
        assert_eq!(longest, steps, "{algorithm} {collective} on {kind} of {p}");
    }
}

/// Runs `collective` with `algorithm` on a fresh cluster wired as `kind` with p nodes;
/// returns the frames its routers forwarded.
async fn forwarded_running(collective: Collective, algorithm: Algorithm, kind: TopologyKind, p: usize) -> u64 {
    forwarded_by(&shape(kind, p), &[spec(1, (collective, algorithm), p / 2 + 1, 4, Dtype::I32, p / 2 + 1)]).await
}

/// A schedule on a topology it was not made for still verifies, but its messages travel
/// several hops; on its own topology every message crosses exactly one link.
///
/// Algorithm 4.10 is the exception that proves the rule: on a hypercube its partner
/// my_id XOR i is i's bit count hops away (E-cube routes, which never contend within a
/// step), so on 8 nodes the routers forward exactly 8 · Σ_{i=1..7} (bits(i) - 1) = 40
/// frames; a ring forwards many more, a fully connected network none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_forward_frames_only_off_their_topology() {
    let a = Collective::Alltoall;
    let e_cube_hops: u64 = (1..8u64).map(|i| u64::from(i.count_ones()) - 1).sum();
    assert_eq!(forwarded_running(a, Algorithm::PairwiseXor, TopologyKind::Hypercube, 8).await, 8 * e_cube_hops);
    assert!(forwarded_running(a, Algorithm::PairwiseXor, TopologyKind::Ring, 8).await > 8 * e_cube_hops);
    assert!(forwarded_running(a, Algorithm::Pairwise, TopologyKind::Ring, 8).await > 0);
    assert!(forwarded_running(a, Algorithm::Hypercube, TopologyKind::Ring, 8).await > 0);
    let scatter = Collective::Scatter;
    assert!(forwarded_running(scatter, Algorithm::Hypercube, TopologyKind::Ring, 8).await > 0);
    let shift = Collective::Shift;
    assert!(forwarded_running(shift, Algorithm::Hypercube, TopologyKind::Hypercube, 8).await > 0);
    let native = [
        (Collective::Scatter, Algorithm::Linear, TopologyKind::Full, 7),
        (Collective::Scatter, Algorithm::Ring, TopologyKind::Ring, 9),
        (Collective::Scatter, Algorithm::Mesh, TopologyKind::Mesh, 12),
        (Collective::Scatter, Algorithm::Mesh, TopologyKind::Torus3d, 27),
        (Collective::Scatter, Algorithm::Hypercube, TopologyKind::Hypercube, 16),
        (Collective::Gather, Algorithm::Ring, TopologyKind::Ring, 8),
        (Collective::Gather, Algorithm::Mesh, TopologyKind::Torus, 16),
        (Collective::Gather, Algorithm::Mesh, TopologyKind::Mesh3d, 12),
        (Collective::Gather, Algorithm::Hypercube, TopologyKind::Hypercube, 8),
        (a, Algorithm::Ring, TopologyKind::Ring, 7),
        (a, Algorithm::Mesh, TopologyKind::Torus, 12),
        (a, Algorithm::Mesh, TopologyKind::Mesh, 12),
        (a, Algorithm::Mesh, TopologyKind::Torus3d, 8),
        (a, Algorithm::Hypercube, TopologyKind::Hypercube, 16),
        (a, Algorithm::Pairwise, TopologyKind::Full, 6),
        (a, Algorithm::PairwiseXor, TopologyKind::Full, 6),
        (a, Algorithm::Bruck, TopologyKind::Full, 6),
        (Collective::Shift, Algorithm::Ring, TopologyKind::Ring, 9),
        (Collective::Shift, Algorithm::Mesh, TopologyKind::Torus, 12),
    ];
    for (collective, algorithm, kind, p) in native {
        assert_eq!(
            forwarded_running(collective, algorithm, kind, p).await,
            0,
            "{algorithm} {collective} on {kind} of {p} forwarded frames"
        );
    }
}

/// A root outside the cluster is refused by every node, with no message sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_outside_the_cluster_is_refused() {
    let cluster = InProcessCluster::start(&shape(TopologyKind::Ring, 4));
    let mut runs = Runs::default();
    for collective in [Collective::Scatter, Collective::Gather] {
        for algorithm in rooted() {
            let (run, dtype) = runs.next();
            let s = spec(run, (collective, algorithm), 4, 2, dtype, 0);
            let outputs = run_with_input(&cluster, &s, Bytes::from_static(&[0; 64])).await;
            for (me, output) in outputs.into_iter().enumerate() {
                assert_eq!(output, Err(CommError::NoSuchPeer { me, peer: 4, p: 4 }), "{algorithm} {collective}");
            }
        }
    }
}

/// Inputs of the wrong length and algorithms a collective does not have are refused
/// by every node before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_inputs_and_algorithms_are_refused() {
    let cluster = InProcessCluster::start(&shape(TopologyKind::Full, 3));
    let outputs = cluster
        .run_all(1, TIMEOUT, |comm| async move {
            alltoall::run(&comm, Algorithm::Bruck, Bytes::from(vec![0; 3 * 8 + 1]), 8).await
        })
        .await;
    for output in outputs {
        assert!(
            matches!(&output, Err(CommError::Unsupported { reason, .. }) if reason.contains("25 bytes")),
            "{output:?}"
        );
    }
    let cases = [
        (Collective::Scatter, Algorithm::Bruck),
        (Collective::Gather, Algorithm::Pairwise),
        (Collective::Alltoall, Algorithm::Linear),
        (Collective::Shift, Algorithm::Bruck),
    ];
    for (run, (collective, algorithm)) in cases.into_iter().enumerate() {
        let s = spec(run as u64 + 2, (collective, algorithm), 0, 1, Dtype::I32, 1);
        for output in run_on_reference_inputs(&cluster, &s).await {
            assert!(
                matches!(&output, Err(CommError::Unsupported { reason, .. }) if reason.contains("has no algorithm")),
                "{collective} {algorithm}: {output:?}"
            );
        }
    }
}

/// A message of the wrong length (here: the root cuts blocks of 8 bytes where the others
/// expect 4) fails the receiving node with an error naming the sender; nothing panics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_of_the_wrong_length_fails_the_receiver() {
    let cluster = InProcessCluster::start(&shape(TopologyKind::Hypercube, 4));
    for (run, algorithm) in rooted().into_iter().enumerate() {
        let outputs = cluster
            .run_all(run as u64 + 1, Duration::from_secs(2), move |comm| async move {
                let block = if comm.id() == 0 { 8 } else { 4 };
                let layout = BlockLayout::uniform(4, block);
                let input = Bytes::from(vec![7; layout.total()]);
                scatter_gather::scatter_layout(&comm, algorithm, 0, &layout, input).await
            })
            .await;
        assert_eq!(outputs[0], Ok(Bytes::from(vec![7; 8])), "{algorithm}");
        let failed = outputs[1..].iter().filter(|output| {
            matches!(output, Err(CommError::Link { cause: MessageError::WrongLength { got: 8 | 16, .. }, .. }))
        });
        assert!(failed.count() >= 1, "{algorithm}: {outputs:?}");
    }
}
