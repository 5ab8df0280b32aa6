//! Executes one run on one node: the input from the reference, warm-up and timed
//! iterations each after a barrier, this node's time for each, the check of the last
//! result against the reference, and the report for the coordinator.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use topocomm_proto::control::{NodeDump, NodeReport};
use topocomm_proto::reference;
use topocomm_proto::spec::RunSpec;

use crate::collectives::{self, barrier};
use crate::comm::{Comm, CommError};
use crate::router::Router;

/// Takes part in `spec` over `router`'s wiring and says how it went.
pub async fn execute(router: Arc<Router>, spec: &RunSpec) -> NodeReport {
    let (id, p) = (router.id(), router.topology().p());
    router.mailbox().begin_run(spec.run);
    router.set_emulation(spec.emulation);
    let input = reference::input(spec, p, id);
    let mut report = NodeReport {
        run: spec.run,
        node: id,
        times_us: Vec::with_capacity(spec.iterations as usize),
        verified: false,
        mismatch: None,
        digest: 0,
        frames_sent: 0,
        frames_forwarded: 0,
        steps: 0,
        link_bytes: Vec::new(),
        error: None,
        dump: None,
    };
    match iterate(&router, spec, &input, &mut report.times_us, &mut report.steps).await {
        Ok(output) => {
            let traffic = router.traffic();
            report.frames_sent = traffic.frames_sent;
            report.frames_forwarded = traffic.frames_forwarded;
            report.link_bytes = traffic.link_bytes;
            report.digest = reference::digest(&output);
            match reference::check(spec, p, id, &output) {
                Ok(()) => report.verified = true,
                Err(mismatch) => {
                    tracing::error!(run = spec.run, %mismatch, "result differs from the reference");
                    report.mismatch = Some(mismatch.to_string());
                }
            }
            if spec.dump {
                report.dump = Some(NodeDump { input, output });
            }
        }
        Err(error) => {
            tracing::error!(run = spec.run, %error, "run failed");
            report.error = Some(error.to_string());
        }
    }
    report
}

/// Runs every iteration; returns the output of the last one.
async fn iterate(
    router: &Arc<Router>,
    spec: &RunSpec,
    input: &Bytes,
    times_us: &mut Vec<f64>,
    steps: &mut u16,
) -> Result<Bytes, CommError> {
    let timeout = Duration::from_millis(spec.timeout_ms);
    let mut output = Bytes::new();
    for iteration in 0..spec.warmup + spec.iterations {
        if iteration == spec.warmup {
            router.reset_traffic();
        }
        let deadline = Instant::now() + timeout;
        let synchronise = Comm::new(router.clone(), spec.run, iteration, deadline);
        barrier::dissemination(&synchronise, barrier::RUNTIME_BARRIER_TAG).await?;
        // A fresh handle, so the barrier's messages do not count as steps of the collective.
        let comm = Comm::new(router.clone(), spec.run, iteration, deadline);
        let started = Instant::now();
        output = collectives::run(&comm, spec, input.clone()).await?;
        let elapsed = started.elapsed();
        *steps = (*steps).max(comm.steps());
        if iteration >= spec.warmup {
            times_us.push(elapsed.as_secs_f64() * 1e6);
        }
    }
    Ok(output)
}
