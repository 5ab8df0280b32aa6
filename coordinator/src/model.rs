//! The cost model. A prediction is the time the run's own algorithm takes on the same
//! router and links, wired in memory, on a paused clock: the links carry the emulated
//! physics (t_s once per message at its source, t_h per hop, t_w per byte, store-and-
//! forward or cut-through packets, one transfer per link direction) and software takes
//! no time. So the model follows the algorithm's actual schedule of messages — who sends
//! what to whom in each step, over which route, sharing which links — rather than a
//! formula written per case; the tests hold it against the seeds' closed forms.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use topocomm_node::collectives;
use topocomm_node::pacing::Clock;
use topocomm_node::testing::MemoryCluster;
use topocomm_proto::Topology;
use topocomm_proto::flow::FlowEvent;
use topocomm_proto::reference;
use topocomm_proto::spec::{LinkModel, RunSpec};

/// Long enough for any emulated run (the virtual clock counts one emulated ns per ms).
const FOREVER: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// What the model says of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// Emulated nanoseconds from the common start until the last node is done.
    pub time_ns: u64,
    /// Messages on the longest chain of the schedule.
    pub steps: u16,
    /// Messages the nodes originated.
    pub messages: u64,
    /// Messages passed on by intermediate nodes.
    pub forwarded: u64,
    /// Every send, forward and delivery, on the model's clock.
    pub events: Vec<FlowEvent>,
}

impl Prediction {
    pub fn time_us(&self) -> f64 {
        self.time_ns as f64 / 1e3
    }
}

/// Predicts `spec` (its algorithm already resolved) on `topology` under `model`.
pub fn predict(spec: &RunSpec, topology: &Topology, model: LinkModel) -> Result<Prediction, String> {
    let (spec, topology) = (spec.clone(), topology.clone());
    std::thread::Builder::new()
        .name("topocomm-model".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .map_err(|e| format!("cannot start the model's runtime: {e}"))?;
            runtime.block_on(simulate(spec, &topology, model))
        })
        .map_err(|e| format!("cannot start the model's thread: {e}"))?
        .join()
        .map_err(|_| "the model panicked".to_owned())?
}

async fn simulate(spec: RunSpec, topology: &Topology, model: LinkModel) -> Result<Prediction, String> {
    let cluster = MemoryCluster::with_clock(topology, Clock::Virtual);
    let p = topology.p();
    for id in 0..p {
        cluster.router(id).set_emulation(Some(model));
        cluster.router(id).start_recording();
    }
    let spec = Arc::new(spec);
    let start = Instant::now();
    let shared = spec.clone();
    let finished = cluster
        .run_all(spec.run, FOREVER, move |comm| {
            let spec = shared.clone();
            async move {
                // The timing does not depend on the values, only on the lengths.
                let input = Bytes::from(vec![0u8; reference::input_len(&spec, comm.p(), comm.id())]);
                collectives::run(&comm, &spec, input).await?;
                Ok((Instant::now(), comm.steps()))
            }
        })
        .await;
    let mut time_ns = 0;
    let mut steps = 0;
    for (node, result) in finished.into_iter().enumerate() {
        let (done, node_steps) = result.map_err(|e| format!("the model could not run node {node}: {e}"))?;
        time_ns = time_ns.max(Clock::Virtual.nanos(done - start));
        steps = steps.max(node_steps);
    }
    let (mut messages, mut forwarded, mut events) = (0, 0, Vec::new());
    for id in 0..p {
        let router = cluster.router(id);
        let traffic = router.traffic();
        messages += traffic.frames_sent;
        forwarded += traffic.frames_forwarded;
        events.extend(router.take_recording());
    }
    events.sort_by_key(|e| (e.at_ns, e.node));
    Ok(Prediction { time_ns, steps, messages, forwarded, events })
}
