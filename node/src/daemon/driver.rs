//! Executes one run on one node: the input from the reference, warm-up and timed
//! iterations each after a barrier, this node's time for each (in emulated time when
//! the run is dilated), a digest of every iteration's result (taken after its time),
//! the check of the last result against the reference and of every other iteration's
//! digest against the last's, and the report for the coordinator. A probe run (`spec.probe`) runs the dilation probe's
//! steps instead of a collective.

use std::sync::Arc;

use bytes::Bytes;
use bytesize::ByteSize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use topocomm_proto::control::{NodeDump, NodeReport, NodeTrace, RunLimits};
use topocomm_proto::reference;
use topocomm_proto::spec::{RunSpec, SpecError, UnknownClass};

use crate::allowance::{LimitsRefusal, RunAllowance};
use crate::daemon::allocator;
use crate::daemon::limits;
use crate::router::Router;
use crate::steps::probe;
use crate::steps::start::announce_start;
use crate::timebase;
use crate::transport::pacing::{self, Clock};
use topocomm_collectives::algorithms::{self, barrier};
use topocomm_collectives::comm::{Comm, CommError};

/// Takes part in `spec` over `router`'s wiring, held to `limits` (the coordinator's rows
/// for this node), and says how it went.
pub async fn execute(router: Arc<Router>, spec: &RunSpec, limits: &RunLimits) -> NodeReport {
    let (id, p) = (router.id(), router.topology().p());
    let mut report = NodeReport::empty(spec.run, id);
    let admitted = admit(spec, limits, p, &mut report);
    // A run this node turned away lets each source no more than the runtime's signals.
    let signals_only = || RunAllowance::signals_only(p);
    let allowance = admitted.as_ref().map_or_else(|_| signals_only(), |(_, allowance)| allowance.clone());
    let classes = set_up(&router, spec, &allowance);
    let last = match admitted.and_then(|admitted| classes.map(|()| admitted)) {
        Ok((last, _)) => last,
        Err(refused) => {
            tracing::error!(run = spec.run, %refused, "run refused");
            report.error = Some(refused.to_string());
            return report;
        }
    };
    // Generating inputs and references is heavy arithmetic: off the runtime's thread, so
    // the node keeps answering its links and the coordinator meanwhile.
    let input_len = reference::input_len(spec, p, id) as u64;
    let input = {
        let spec = spec.clone();
        match tokio::task::spawn_blocking(move || reference::try_input(&spec, p, id)).await {
            Ok(Ok(input)) => input,
            Ok(Err(refused)) => {
                report.error = Some(format!("{} ({refused})", Shortfall::now("the input", input_len)));
                return report;
            }
            Err(failed) => {
                report.error = Some(format!("the input could not be generated: {failed}"));
                return report;
            }
        }
    };
    let dropped_before = router.frames_dropped();
    let iterated = iterate(&router, spec, last, &input, &mut report).await;
    let dropped = router.frames_dropped() - dropped_before;
    if dropped > 0 {
        tracing::warn!(run = spec.run, dropped, "dropped frames of other runs");
    }
    match iterated {
        Ok((output, digests)) => {
            let traffic = router.traffic();
            report.frames_sent = traffic.frames_sent;
            report.frames_forwarded = traffic.frames_forwarded;
            report.link_bytes = traffic.link_bytes;
            report.digest = reference::digest(&output);
            let checked = {
                let (spec, output, topology) = (spec.clone(), output.clone(), router.topology().clone());
                tokio::task::spawn_blocking(move || match spec.probe {
                    // The report carries the mismatch in words.
                    true => probe::check(&spec, &topology, id, &output).map_err(|mismatch| mismatch.to_string()),
                    // A GOAL schedule carries sizes only: its check is that every
                    // operation ran (the report says nothing could be verified).
                    false if spec.runs_goal() => Ok(()),
                    false => reference::check(&spec, p, id, &output)
                        .map_err(|mismatch| format!("{mismatch}{}", algorithms::schedule::locate(&spec, p, &mismatch))),
                })
                .await
            };
            match checked {
                Ok(Ok(())) => match differing_iteration(&digests, report.digest) {
                    None => report.verified = true,
                    Some(iteration) => {
                        let mismatch = format!(
                            "iteration {iteration} ({}) ended with a result whose digest {:016x} differs from the last \
                             iteration's {:016x}, which matches the reference",
                            iteration_kind(spec, iteration),
                            digests[iteration as usize],
                            report.digest
                        );
                        tracing::error!(run = spec.run, %mismatch, "an iteration's result differs");
                        report.mismatch = Some(mismatch);
                    }
                },
                Ok(Err(mismatch)) => {
                    tracing::error!(run = spec.run, %mismatch, "result differs from the reference");
                    report.mismatch = Some(mismatch);
                }
                Err(failed) => report.error = Some(format!("the reference check did not finish: {failed}")),
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

/// Sets `router` up for `spec`'s run, rank or switch alike: only its frames taken, each
/// source held to `allowance`, the wall clock dilated and the links emulated as the spec
/// says, each with its class's physics (a class the network lacks is refused).
fn set_up(router: &Router, spec: &RunSpec, allowance: &RunAllowance) -> Result<(), RunRefusal> {
    router.begin_run(spec, allowance);
    let clock_offset_ns = spec.clock_offsets_ns.get(router.id()).copied().unwrap_or(0);
    // Before the emulation: every emulated instant of the run reads on the dilated clock.
    // (A spec with a dilation out of range is refused and runs nothing.)
    pacing::dilate_wall_clock(spec.dilation.check().map(|()| spec.dilation).unwrap_or_default());
    router.set_emulation(spec.emulation, clock_offset_ns);
    router.emulation().set_due_horizon(spec.timeout());
    Ok(router.set_link_classes(&spec.classes)?)
}

/// A switch's part in `spec`'s run: it runs no program and holds no data, it forwards
/// (held to `limits`, the frames the run's schedule passes through it) until the
/// coordinator ends its part (`end`: once every rank has reported, or when the run
/// failed) or the run's deadline passes, and reports what it forwarded, frames and bytes
/// per link of the timed iterations, and their flow when the run is traced. Nothing in
/// it is verified: the report says `verified: false`, and the coordinator knows a
/// switch's report for what it is.
pub async fn forward(router: Arc<Router>, spec: &RunSpec, limits: &RunLimits, end: CancellationToken) -> NodeReport {
    let (id, p) = (router.id(), router.topology().p());
    let mut report = NodeReport::empty(spec.run, id);
    let admitted = spec
        .validate(p)
        .map_err(RunRefusal::from)
        .and_then(|()| Ok(RunAllowance::accept(limits, p, allocator::available_bytes())?));
    let allowance = admitted.as_ref().map_or_else(|_| RunAllowance::signals_only(p), RunAllowance::clone);
    if let Err(refused) = admitted.and_then(|_| set_up(&router, spec, &allowance)) {
        tracing::error!(run = spec.run, %refused, "run refused");
        report.error = Some(refused.to_string());
        return report;
    }
    // Counted from the first timed iteration on, as the ranks count theirs.
    router.reset_traffic(spec.warmup);
    let origin = spec.trace.then(|| router.start_recording());
    let whole = spec.run_deadline().unwrap_or(spec.timeout());
    if tokio::time::timeout(whole, end.cancelled()).await.is_err() {
        report.error = Some(format!("the coordinator did not end this switch's part within the run's {whole:?}"));
    }
    let traffic = router.traffic();
    report.frames_sent = traffic.frames_sent;
    report.frames_forwarded = traffic.frames_forwarded;
    report.link_bytes = traffic.link_bytes;
    if let Some(origin) = origin {
        let last = spec.total_iterations().and_then(|total| total.checked_sub(1)).unwrap_or(0);
        let events = router.take_recording().into_iter().filter(|event| event.iteration == last).collect();
        report.trace = Some(NodeTrace { origin_ns: timebase::ns_at(origin.into_std()), events });
    }
    report
}

/// The first iteration whose result's digest is not `last`'s, if any.
fn differing_iteration(digests: &[u64], last: u64) -> Option<u32> {
    digests.iter().position(|&digest| digest != last).map(|at| at as u32)
}

/// "warm-up" or "timed", for iteration `iteration` of `spec`.
fn iteration_kind(spec: &RunSpec, iteration: u32) -> &'static str {
    if iteration < spec.warmup { "warm-up" } else { "timed" }
}

/// Why this node turns a run away before allocating anything for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum RunRefusal {
    /// The spec is invalid here, or its memory estimate exceeds what this node has.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// No room for the run's timings.
    #[error(transparent)]
    Timings(Shortfall),
    /// The limits sent with the run are not this run's.
    #[error(transparent)]
    Limits(#[from] LimitsRefusal),
    /// A `--class` names no class of this network's links.
    #[error(transparent)]
    Class(#[from] UnknownClass),
}

/// Something this node could not allocate: what, how large, and what it has available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} needs {} and could not be allocated; this node has {} available", ByteSize(*.needed_bytes), available_text(*.available_bytes))]
struct Shortfall {
    what: String,
    needed_bytes: u64,
    /// `None`: unknown.
    available_bytes: Option<u64>,
}

impl Shortfall {
    /// `what` (`needed_bytes` long) could not be allocated, with what this node has
    /// available now.
    fn now(what: &str, needed_bytes: u64) -> Self {
        Shortfall { what: what.to_owned(), needed_bytes, available_bytes: allocator::available_bytes() }
    }
}

fn available_text(available_bytes: Option<u64>) -> String {
    match available_bytes {
        Some(available) => ByteSize(available).to_string(),
        None => "an unknown amount of memory".to_owned(),
    }
}

/// Checks `spec` before anything is allocated for it: a valid spec whose footprint the
/// coordinator sent (`limits`, by its tuning table) fits in what this process may still
/// use, allowances of one figure per source (each capped at that memory), and room for
/// its timings in `report`. Returns the index of the last iteration and the allowance.
fn admit(
    spec: &RunSpec,
    limits: &RunLimits,
    p: usize,
    report: &mut NodeReport,
) -> Result<(u32, RunAllowance), RunRefusal> {
    spec.validate(p)?;
    let available = allocator::available_bytes();
    if let Some(available) = available
        && limits.footprint_bytes > available
    {
        let (needed, holder) = (limits.footprint_bytes, "this node".to_owned());
        return Err(SpecError::TooMuchMemory { needed, available, holder }.into());
    }
    let allowance = RunAllowance::accept(limits, p, available)?;
    let timings = usize::try_from(spec.iterations).unwrap_or(usize::MAX);
    if report.times_us.try_reserve_exact(timings).is_err() {
        let bytes = u64::from(spec.iterations).saturating_mul(std::mem::size_of::<f64>() as u64);
        return Err(RunRefusal::Timings(Shortfall::now(
            &format!("the timings of {} iterations", spec.iterations),
            bytes,
        )));
    }
    // At least one iteration, and the count fits in u32 (validated above).
    Ok((spec.total_iterations().and_then(|total| total.checked_sub(1)).unwrap_or(0), allowance))
}

/// How far ahead node 0 sets an iteration's common start: time for its announcement to
/// reach every node.
const START_MARGIN_NS: u64 = 2_000_000;

/// After the barrier: node 0 announces an instant a little ahead, on the coordinator's
/// clock; every node waits for it on its own clock (its offset from the coordinator's
/// added) and returns it, so every node times the collective from the same moment, as
/// the cost model does. A node the announcement reaches late starts at once, and its
/// time still counts from the common instant.
async fn common_start(comm: &Comm, offsets_ns: &[i64]) -> Result<Instant, CommError> {
    let start_ns = (timebase::now_ns() + START_MARGIN_NS).saturating_add_signed(-offsets_ns[0]);
    let start_ns = announce_start(comm, start_ns).await?;
    let me = comm.id();
    let start = Instant::from_std(timebase::instant_at(start_ns.saturating_add_signed(offsets_ns[me])));
    Clock::Real.wait_until(start).await;
    Ok(start)
}

/// Runs every iteration, noting each timed one's time, the schedule's steps and (when
/// asked) the last iteration's message flow in `report`; returns the last output and
/// the digest of every iteration's output, taken after its time.
async fn iterate(
    router: &Arc<Router>,
    spec: &RunSpec,
    last: u32,
    input: &Bytes,
    report: &mut NodeReport,
) -> Result<(Bytes, Vec<u64>), CommError> {
    let timeout = spec.timeout();
    let mut output = Bytes::new();
    let mut digests = Vec::new();
    let mut origin = None;
    for iteration in 0..=last {
        if iteration == spec.warmup {
            router.reset_traffic(iteration);
        }
        let deadline = limits::deadline_after(Instant::now(), timeout);
        if spec.trace && iteration == last {
            // Before the barrier: no frame of this iteration can arrive before it.
            origin = Some(router.start_recording());
        }
        let synchronise = Comm::new(router.clone(), spec.run, iteration, deadline);
        barrier::runtime(&synchronise).await?;
        // Offsets of every vertex (a switched network's switches after its ranks).
        let started = if spec.clock_offsets_ns.len() >= synchronise.p() {
            common_start(&synchronise, &spec.clock_offsets_ns).await?
        } else {
            Instant::now()
        };
        // A fresh handle, so the barrier's messages do not count as steps of the collective.
        let comm = Comm::new(router.clone(), spec.run, iteration, deadline).started_at(started);
        // The last iteration's output goes before this one runs: a daemon never holds two.
        drop(std::mem::take(&mut output));
        output = match spec.probe {
            true => probe::relay(&comm, input.clone()).await?,
            false => algorithms::run(&comm, spec, input.clone()).await?,
        };
        // Emulated time: the wall time over the run's dilation.
        let elapsed = spec.dilation.emulated(started.elapsed());
        report.steps = report.steps.max(comm.steps());
        if iteration >= spec.warmup {
            report.times_us.push(elapsed.as_secs_f64() * 1e6);
        }
        // After the time: every iteration's result is held to the last's, which is held
        // to the reference (a corrupted warm-up is caught too).
        digests.push(digest(&output).await);
    }
    // One more barrier, so that the frames this node forwards for others after its own
    // part is done are counted (and traced) before the counts are read: once every node
    // has finished the last iteration, none of its frames is still on the way.
    let closing =
        Comm::new(router.clone(), spec.run, last.saturating_add(1), limits::deadline_after(Instant::now(), timeout));
    barrier::runtime(&closing).await?;
    if let Some(origin) = origin {
        // Frames of earlier iterations still in flight when recording began are not this one's.
        let events = router.take_recording().into_iter().filter(|e| e.iteration == last).collect();
        report.trace = Some(NodeTrace { origin_ns: timebase::ns_at(origin.into_std()), events });
    }
    Ok((output, digests))
}

/// The digest of `output`, off the runtime's thread (it may be long).
async fn digest(output: &Bytes) -> u64 {
    let owned = output.clone();
    match tokio::task::spawn_blocking(move || reference::digest(&owned)).await {
        Ok(digest) => digest,
        // Only a runtime shutting down refuses the task: digest here then.
        Err(_) => reference::digest(output),
    }
}

#[cfg(test)]
mod tests {
    use topocomm_proto::spec::{Algorithm, Collective};

    use super::*;

    #[test]
    fn a_spec_this_node_cannot_run_is_refused_with_the_specs_own_words() {
        let spec = RunSpec { root: 9, ..RunSpec::new(Collective::Broadcast, Algorithm::Hypercube) };
        let mut report = NodeReport::empty(1, 0);
        let refusal = admit(&spec, &limits(8, 0), 8, &mut report).unwrap_err();
        let RunRefusal::Spec(error) = &refusal else { panic!("refused for another reason: {refusal:?}") };
        assert_eq!(refusal.to_string(), error.to_string());
        assert!(refusal.to_string().starts_with("root 9 is not a node of this 8-node cluster"), "{refusal}");
    }

    /// Rows of `p` sources, each allowed 1 KiB, and a footprint of `footprint_bytes`.
    fn limits(p: usize, footprint_bytes: u64) -> RunLimits {
        RunLimits { footprint_bytes, delivered: vec![1024; p], forwarded: vec![1024; p], counted: true }
    }

    /// The node holds a run to the footprint it is sent, whatever its own table says, and
    /// refuses rows that are not one per node.
    #[test]
    fn a_run_is_admitted_by_the_footprint_and_rows_it_was_sent() {
        let spec = RunSpec { size_bytes: 8, ..RunSpec::new(Collective::Allreduce, Algorithm::Ring) };
        let mut report = NodeReport::empty(1, 0);
        let (_, allowance) = admit(&spec, &limits(4, 1), 4, &mut report).expect("1 B fits");
        assert_eq!(&*allowance.delivered, &[1024; 4]);
        if let Some(available) = allocator::available_bytes() {
            let refusal = admit(&spec, &limits(4, available.saturating_add(1 << 30)), 4, &mut report).unwrap_err();
            assert!(matches!(refusal, RunRefusal::Spec(SpecError::TooMuchMemory { .. })), "{refusal}");
        }
        let refusal = admit(&spec, &limits(3, 1), 4, &mut report).unwrap_err();
        assert_eq!(refusal.to_string(), "the run's limits give 3 delivered allowances for 4 nodes");
    }

    #[test]
    fn a_shortfall_says_what_was_needed_and_what_is_there() {
        let known = Shortfall { what: "the input".into(), needed_bytes: 2048, available_bytes: Some(1024) };
        assert_eq!(
            known.to_string(),
            "the input needs 2.0 KiB and could not be allocated; this node has 1.0 KiB available"
        );
        let unknown = Shortfall { available_bytes: None, ..known };
        assert!(unknown.to_string().ends_with("this node has an unknown amount of memory available"), "{unknown}");
    }
}
