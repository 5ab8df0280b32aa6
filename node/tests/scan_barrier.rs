//! Scan (prefix sums) and barrier, every algorithm on every topology kind, run on an
//! in-memory cluster (the real routers and link tasks over in-memory pipes): every
//! node's scan result held against `topocomm_proto::reference`, every barrier checked to
//! let no node out before the last one came in, and no message left over.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use topocomm_node::collectives::{self, barrier};
use topocomm_node::memory_cluster::MemoryCluster;
use topocomm_node::{Comm, CommError};
use topocomm_proto::reference;
use topocomm_proto::spec::{Algorithm, Collective, Dtype, ReduceOp, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

const TIMEOUT: Duration = Duration::from_secs(20);

const SCANS: [Algorithm; 4] = [Algorithm::Hypercube, Algorithm::Linear, Algorithm::Pipeline, Algorithm::Tree];
const BARRIERS: [Algorithm; 2] = [Algorithm::Dissemination, Algorithm::Hypercube];
const KINDS: [TopologyKind; 7] = [
    TopologyKind::Ring,
    TopologyKind::Mesh,
    TopologyKind::Torus,
    TopologyKind::Mesh3d,
    TopologyKind::Torus3d,
    TopologyKind::Hypercube,
    TopologyKind::Full,
];
const DTYPES: [Dtype; 4] = [Dtype::I32, Dtype::I64, Dtype::F32, Dtype::F64];
const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];

/// One scan with `algorithm`, `elements` elements per node.
fn scan_spec(run: u64, algorithm: Algorithm, elements: usize, dtype: Dtype, op: ReduceOp, exclusive: bool) -> RunSpec {
    RunSpec {
        run,
        size_bytes: (elements * dtype.size()) as u64,
        dtype,
        op,
        exclusive,
        seed: 0x5ca0 + run,
        timeout_ms: TIMEOUT.as_millis() as u64,
        ..RunSpec::new(Collective::Scan, algorithm)
    }
}

/// `kind` with p nodes and its default shape, if it has one.
fn topology(kind: TopologyKind, p: usize) -> Option<Topology> {
    Topology::new(kind, p, None).ok()
}

/// Fails unless no node of `cluster` holds a message nobody took.
fn assert_mailboxes_empty(cluster: &MemoryCluster, p: usize, context: &str) {
    for node in 0..p {
        let queued = cluster.router(node).mailbox().queued();
        assert_eq!(queued, 0, "{context}: node {node} holds {queued} messages nobody took");
    }
}

/// Runs `spec` on every node of `cluster` (wired as `topology`), checks every node's
/// output against the reference and that no message was left over.
async fn verify(cluster: &MemoryCluster, topology: &Topology, spec: &RunSpec) {
    let context = format!(
        "{} {}{} on {topology}, {} bytes of {} ({})",
        spec.algorithm,
        if spec.exclusive { "exclusive " } else { "" },
        spec.collective,
        spec.size_bytes,
        spec.dtype,
        spec.op
    );
    if let Err(error) = cluster.verify(spec, TIMEOUT).await {
        panic!("{context}: {error}");
    }
}

/// Both scans, inclusive and exclusive, on `kind` for p = 1..=17 (where `kind` takes p)
/// with 0, 1 and an odd number of elements, walking through every dtype and op.
async fn scan_sweep(kind: TopologyKind) {
    let mut run = 0;
    for p in 1..=17 {
        let Some(topology) = topology(kind, p) else {
            continue;
        };
        let cluster = MemoryCluster::start(&topology);
        for algorithm in SCANS {
            for exclusive in [false, true] {
                for elements in [0, 1, 7] {
                    run += 1;
                    let dtype = DTYPES[run as usize % 4];
                    let op = OPS[run as usize / 4 % 4];
                    let s = scan_spec(run, algorithm, elements, dtype, op, exclusive);
                    verify(&cluster, &topology, &s).await;
                }
            }
        }
    }
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
    let mut run = 0;
    for p in [32, 64] {
        for kind in [
            TopologyKind::Ring,
            TopologyKind::Torus,
            TopologyKind::Torus3d,
            TopologyKind::Hypercube,
            TopologyKind::Full,
        ] {
            let topology = topology(kind, p).unwrap();
            let cluster = MemoryCluster::start(&topology);
            for algorithm in SCANS {
                for exclusive in [false, true] {
                    run += 1;
                    let (dtype, op) =
                        if exclusive { (Dtype::F32, ReduceOp::Prod) } else { (Dtype::F64, ReduceOp::Sum) };
                    let s = scan_spec(run, algorithm, 5, dtype, op, exclusive);
                    verify(&cluster, &topology, &s).await;
                }
            }
        }
    }
}

/// Every dtype and op, both scans, inclusive and exclusive, at p = 6 (no power of two)
/// and 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_every_dtype_and_op() {
    let mut run = 0;
    for (kind, p) in [(TopologyKind::Full, 6), (TopologyKind::Hypercube, 8)] {
        let topology = topology(kind, p).unwrap();
        let cluster = MemoryCluster::start(&topology);
        for algorithm in SCANS {
            for dtype in DTYPES {
                for op in OPS {
                    for exclusive in [false, true] {
                        run += 1;
                        let s = scan_spec(run, algorithm, 9, dtype, op, exclusive);
                        verify(&cluster, &topology, &s).await;
                    }
                }
            }
        }
    }
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
        let topology = topology(kind, p).unwrap();
        let cluster = MemoryCluster::start(&topology);
        let elements = (1 << 20) / dtype.size();
        let s = scan_spec(run as u64 + 1, algorithm, elements, dtype, op, exclusive);
        verify(&cluster, &topology, &s).await;
    }
}

/// The pipeline with several segments (the last one shorter), inclusive and exclusive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_scan_in_segments() {
    let segment = collectives::scan::SEGMENT;
    let cases = [
        (TopologyKind::Hypercube, 8, Dtype::F64, ReduceOp::Sum, false, 2 * segment + 8 * 1001),
        (TopologyKind::Ring, 5, Dtype::I32, ReduceOp::Prod, true, 3 * segment + 4 * 7),
        (TopologyKind::Full, 3, Dtype::F32, ReduceOp::Max, false, segment + 4),
        (TopologyKind::Full, 4, Dtype::I64, ReduceOp::Sum, true, 4 * segment + 8 * 3),
    ];
    for (run, (kind, p, dtype, op, exclusive, bytes)) in cases.into_iter().enumerate() {
        let topology = topology(kind, p).unwrap();
        let cluster = MemoryCluster::start(&topology);
        let s = scan_spec(run as u64 + 1, Algorithm::Pipeline, bytes / dtype.size(), dtype, op, exclusive);
        verify(&cluster, &topology, &s).await;
    }
}

/// Frames forwarded by the routers of every node of `cluster`.
fn forwarded(cluster: &MemoryCluster, p: usize) -> u64 {
    (0..p).map(|node| cluster.router(node).traffic().frames_forwarded).sum()
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
        let topology = topology(kind, p).unwrap();
        let cluster = MemoryCluster::start(&topology);
        let s = RunSpec { run: run as u64 + 1, size_bytes: 16, ..RunSpec::new(collective, algorithm) };
        verify(&cluster, &topology, &s).await;
        assert_eq!(forwarded(&cluster, p), 0, "{algorithm} {collective} on {kind} of {p} forwarded frames");
    }
    // And off its topology the hypercube scan's messages travel several hops.
    let ring = topology(TopologyKind::Ring, 8).unwrap();
    let cluster = MemoryCluster::start(&ring);
    let s = scan_spec(1, Algorithm::Hypercube, 3, Dtype::I64, ReduceOp::Sum, false);
    verify(&cluster, &ring, &s).await;
    assert!(forwarded(&cluster, 8) > 0);
}

/// Both barriers on every kind for p = 1..=17 (where the kind takes p), then 32 and 64.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barrier_on_every_kind() {
    let mut run = 0;
    for kind in KINDS {
        for p in (1..=17).chain([32, 64]) {
            let Some(topology) = topology(kind, p) else {
                continue;
            };
            let cluster = MemoryCluster::start(&topology);
            for algorithm in BARRIERS {
                run += 1;
                let s = RunSpec {
                    run,
                    timeout_ms: TIMEOUT.as_millis() as u64,
                    ..RunSpec::new(Collective::Barrier, algorithm)
                };
                verify(&cluster, &topology, &s).await;
            }
        }
    }
}

/// When node `late` enters `algorithm`'s barrier (`None`: the runtime's own barrier
/// before every iteration) 200 ms after the others, no node leaves before it entered.
async fn nobody_leaves_before(algorithm: Option<Algorithm>, kind: TopologyKind, p: usize, late: usize) {
    let name = algorithm.map_or("runtime".to_string(), |algorithm| algorithm.to_string());
    const DELAY: Duration = Duration::from_millis(200);
    let topology = topology(kind, p).unwrap();
    let cluster = MemoryCluster::start(&topology);
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
    assert_mailboxes_empty(&cluster, p, &format!("{name} barrier on {kind} of {p}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barrier_lets_nobody_out_before_the_last_arrives() {
    let cases = [(TopologyKind::Hypercube, 8), (TopologyKind::Full, 6), (TopologyKind::Full, 13)];
    for algorithm in BARRIERS {
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    let topology = topology(TopologyKind::Ring, 3).unwrap();
    let cluster = MemoryCluster::start(&topology);
    for (run, (collective, algorithm)) in
        [(Collective::Scan, Algorithm::Bruck), (Collective::Barrier, Algorithm::Ring)].into_iter().enumerate()
    {
        let s = Arc::new(RunSpec { run: run as u64 + 1, size_bytes: 8, ..RunSpec::new(collective, algorithm) });
        let outputs = cluster
            .run_all(run as u64 + 1, TIMEOUT, move |comm| {
                let s = s.clone();
                async move {
                    let input = reference::input(&s, comm.p(), comm.id());
                    collectives::run(&comm, &s, input).await
                }
            })
            .await;
        for output in outputs {
            match output {
                Err(CommError::Unsupported { reason, .. }) => {
                    assert!(reason.contains("hypercube"), "{reason}")
                }
                other => panic!("{collective} {algorithm}: {other:?}"),
            }
        }
    }
}
