//! Scan (prefix sums) and barrier, every algorithm on every topology kind, run on an
//! in-memory cluster (the real routers and link tasks over in-memory pipes): every
//! node's scan result held against `topocomm_proto::reference`, every barrier checked to
//! let no node out before the last one came in, and no message left over.

mod common;

use std::time::Duration;

use common::{
    DTYPES, KINDS, OPS, SMALL, Specs, TIMEOUT, algorithms_of, assert_no_message_left, dtype_and_op, forwarded_by,
    on_each, run_on_reference_inputs, scaled, shape, shapes_of, verify, verify_fresh,
};
use tokio::time::Instant;
use topocomm_collectives::algorithms::{self, barrier};
use topocomm_collectives::comm::{Comm, CommError};
use topocomm_node::in_process::InProcessCluster;
use topocomm_node::transport::pacing::Clock;
use topocomm_proto::spec::{Algorithm, Collective, Dtype, ReduceOp, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

const SPECS: Specs = Specs { seed_base: 0x5ca0 };

/// Run `run`: a scan by `algorithm`, `elements` elements per node.
fn scan_spec(
    run: u64,
    algorithm: Algorithm,
    elements: usize,
    (dtype, op): (Dtype, ReduceOp),
    exclusive: bool,
) -> RunSpec {
    RunSpec { op, exclusive, ..SPECS.of(run, Collective::Scan, algorithm, elements, dtype) }
}

/// Both scans, inclusive and exclusive, on `kind` for p = 1..=17 (where `kind` takes p)
/// with 0, 1 and an odd number of elements, walking through every dtype and op.
async fn scan_sweep(kind: TopologyKind) {
    let mut run = 0;
    on_each(shapes_of(kind, SMALL), async |cluster, topology| {
        for algorithm in algorithms_of(Collective::Scan) {
            for exclusive in [false, true] {
                for elements in [0, 1, 7] {
                    run += 1;
                    verify(cluster, topology, &scan_spec(run, algorithm, elements, dtype_and_op(run), exclusive)).await;
                }
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_on_every_kind_of_1_to_17() {
    for kind in KINDS {
        scan_sweep(kind).await;
    }
}

/// p = 32 and 64 on the kinds that scale, both scans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_on_32_and_64_nodes() {
    use TopologyKind as T;
    let mut run = 0;
    on_each(scaled(&[32, 64], &[T::Ring, T::Torus, T::Torus3d, T::Hypercube, T::Full]), async |cluster, topology| {
        for algorithm in algorithms_of(Collective::Scan) {
            for exclusive in [false, true] {
                run += 1;
                let (dtype, op) = if exclusive { (Dtype::F32, ReduceOp::Prod) } else { (Dtype::F64, ReduceOp::Sum) };
                verify(cluster, topology, &scan_spec(run, algorithm, 5, (dtype, op), exclusive)).await;
            }
        }
    })
    .await;
}

/// Every dtype and op, both scans, inclusive and exclusive, at p = 6 (no power of two)
/// and 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_every_dtype_and_op() {
    let mut run = 0;
    on_each([shape(TopologyKind::Full, 6), shape(TopologyKind::Hypercube, 8)], async |cluster, topology| {
        for algorithm in algorithms_of(Collective::Scan) {
            for dtype in DTYPES {
                for op in OPS {
                    for exclusive in [false, true] {
                        run += 1;
                        verify(cluster, topology, &scan_spec(run, algorithm, 9, (dtype, op), exclusive)).await;
                    }
                }
            }
        }
    })
    .await;
}

/// A few 1 MiB vectors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_one_mebibyte() {
    let cases = [
        (Algorithm::Hypercube, TopologyKind::Hypercube, 8, Dtype::F64, ReduceOp::Sum, false),
        (Algorithm::Hypercube, TopologyKind::Full, 6, Dtype::I32, ReduceOp::Prod, true),
        (Algorithm::Linear, TopologyKind::Ring, 5, Dtype::F32, ReduceOp::Max, false),
        (Algorithm::Linear, TopologyKind::Torus, 6, Dtype::I64, ReduceOp::Sum, true),
        (Algorithm::Tree, TopologyKind::Hypercube, 8, Dtype::F64, ReduceOp::Sum, false),
        (Algorithm::Tree, TopologyKind::Full, 7, Dtype::I64, ReduceOp::Min, true),
    ];
    for (run, (algorithm, kind, p, dtype, op, exclusive)) in cases.into_iter().enumerate() {
        let elements = (1 << 20) / dtype.size();
        verify_fresh(&shape(kind, p), &scan_spec(run as u64 + 1, algorithm, elements, (dtype, op), exclusive)).await;
    }
}

/// The pipeline with several segments (the last one shorter), inclusive and exclusive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_scan_in_segments() {
    let segment = algorithms::scan::SEGMENT;
    let cases = [
        (TopologyKind::Hypercube, 8, Dtype::F64, ReduceOp::Sum, false, 2 * segment + 8 * 1001),
        (TopologyKind::Ring, 5, Dtype::I32, ReduceOp::Prod, true, 3 * segment + 4 * 7),
        (TopologyKind::Full, 3, Dtype::F32, ReduceOp::Max, false, segment + 4),
        (TopologyKind::Full, 4, Dtype::I64, ReduceOp::Sum, true, 4 * segment + 8 * 3),
    ];
    for (run, (kind, p, dtype, op, exclusive, bytes)) in cases.into_iter().enumerate() {
        let s = scan_spec(run as u64 + 1, Algorithm::Pipeline, bytes / dtype.size(), (dtype, op), exclusive);
        verify_fresh(&shape(kind, p), &s).await;
    }
}

/// On the topology each was made for, every message of a scan or barrier crosses one
/// link (the hypercube ones on a full network too, where p need not be a power of two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_topologies_forward_nothing() {
    let native = [
        (Collective::Scan, Algorithm::Hypercube, TopologyKind::Hypercube, 16),
        (Collective::Scan, Algorithm::Hypercube, TopologyKind::Full, 11),
        (Collective::Scan, Algorithm::Tree, TopologyKind::Hypercube, 16),
        (Collective::Scan, Algorithm::Linear, TopologyKind::Ring, 9),
        (Collective::Barrier, Algorithm::Hypercube, TopologyKind::Hypercube, 16),
        (Collective::Barrier, Algorithm::Hypercube, TopologyKind::Full, 13),
        (Collective::Barrier, Algorithm::Dissemination, TopologyKind::Full, 13),
    ];
    for (run, (collective, algorithm, kind, p)) in native.into_iter().enumerate() {
        let s = RunSpec { run: run as u64 + 1, size_bytes: 16, ..RunSpec::new(collective, algorithm) };
        let frames = forwarded_by(&shape(kind, p), &[s]).await;
        assert_eq!(frames, 0, "{algorithm} {collective} on {kind} of {p} forwarded frames");
    }
    // And off its topology the hypercube scan's messages travel several hops.
    let s = scan_spec(1, Algorithm::Hypercube, 3, (Dtype::I64, ReduceOp::Sum), false);
    assert!(forwarded_by(&shape(TopologyKind::Ring, 8), &[s]).await > 0);
}

/// Both barriers on every kind for p = 1..=17 (where the kind takes p), then 32 and 64:
/// each ends with nothing on any node (the reference of a barrier), and on each shape a
/// node that enters last — the first, the last and one in the middle in turn — holds every
/// other node until it has entered (a barrier that does nothing fails here), with no
/// message left over.
#[tokio::test(start_paused = true)]
async fn barrier_on_every_kind() {
    let mut run = 0;
    let shapes: Vec<Topology> = KINDS.into_iter().flat_map(|kind| shapes_of(kind, SMALL.chain([32, 64]))).collect();
    on_each(shapes.clone(), async |cluster, topology| {
        for algorithm in algorithms_of(Collective::Barrier) {
            run += 1;
            let s =
                RunSpec { run, timeout_ms: TIMEOUT.as_millis() as u64, ..RunSpec::new(Collective::Barrier, algorithm) };
            verify(cluster, topology, &s).await;
        }
    })
    .await;
    for topology in shapes.iter().filter(|topology| topology.p() >= 2) {
        let p = topology.p();
        for algorithm in algorithms_of(Collective::Barrier) {
            for late in [0, p - 1, p / 2] {
                nobody_leaves_before(Some(algorithm), topology.kind(), p, late).await;
            }
        }
    }
}

/// When node `late` enters `algorithm`'s barrier (`None`: the runtime's own barrier
/// before every iteration) 200 ms after the others, no node leaves before it entered.
/// On tokio's paused clock (the caller's runtime): the links run at full speed on the
/// virtual clock, and the late node's sleep ends as soon as every other task waits.
async fn nobody_leaves_before(algorithm: Option<Algorithm>, kind: TopologyKind, p: usize, late: usize) {
    let name = algorithm.map_or("runtime".to_string(), |algorithm| algorithm.to_string());
    const DELAY: Duration = Duration::from_millis(200);
    let cluster = InProcessCluster::with_clock(&shape(kind, p), Clock::Virtual);
    let times = cluster
        .run_all(1, TIMEOUT, move |comm: Comm| async move {
            if comm.id() == late {
                tokio::time::sleep(DELAY).await;
            }
            let entered = Instant::now();
            match algorithm {
                Some(algorithm) => barrier::run(&comm, algorithm).await?,
                None => barrier::runtime(&comm).await?,
            }
            Ok::<_, CommError>((entered, Instant::now()))
        })
        .await;
    let times: Vec<(Instant, Instant)> = times
        .into_iter()
        .enumerate()
        .map(|(node, t)| t.unwrap_or_else(|e| panic!("{name} node {node}: {e}")))
        .collect();
    let last_entry = times[late].0;
    assert!(
        times.iter().all(|&(entered, _)| entered <= last_entry),
        "{name} on {kind} of {p}: node {late} was not the last to enter"
    );
    for (node, &(_, left)) in times.iter().enumerate() {
        assert!(
            left >= last_entry,
            "{name} on {kind} of {p}: node {node} left {:?} before node {late} entered",
            last_entry - left
        );
    }
    assert_no_message_left(&cluster, p, &format!("{name} barrier on {kind} of {p}"));
}

#[tokio::test(start_paused = true)]
async fn barrier_lets_nobody_out_before_the_last_arrives() {
    let cases = [(TopologyKind::Hypercube, 8), (TopologyKind::Full, 6), (TopologyKind::Full, 13)];
    for algorithm in algorithms_of(Collective::Barrier) {
        for (kind, p) in cases {
            // The first node, the last (an extra node when p is not a power of two),
            // and one in the middle.
            for late in [0, p - 1, p / 2] {
                nobody_leaves_before(Some(algorithm), kind, p, late).await;
            }
        }
    }
}

/// The runtime's barrier: the butterfly on a hypercube, dissemination elsewhere.
#[tokio::test(start_paused = true)]
async fn the_runtime_barrier_lets_nobody_out_before_the_last_arrives() {
    for (kind, p) in [(TopologyKind::Hypercube, 8), (TopologyKind::Hypercube, 2), (TopologyKind::Ring, 5)] {
        for late in [0, p - 1, p / 2] {
            nobody_leaves_before(None, kind, p, late).await;
        }
    }
}

/// An algorithm the collective does not have is refused on every node, naming the
/// algorithms it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_algorithms_are_refused() {
    let cluster = InProcessCluster::start(&shape(TopologyKind::Ring, 3));
    for (run, (collective, algorithm)) in
        [(Collective::Scan, Algorithm::Bruck), (Collective::Barrier, Algorithm::Ring)].into_iter().enumerate()
    {
        let s = RunSpec { run: run as u64 + 1, size_bytes: 8, ..RunSpec::new(collective, algorithm) };
        for output in run_on_reference_inputs(&cluster, &s).await {
            match output {
                Err(CommError::Unsupported { reason, .. }) => {
                    assert!(reason.contains("hypercube"), "{reason}")
                }
                other => panic!("{collective} {algorithm}: {other:?}"),
            }
        }
    }
}
