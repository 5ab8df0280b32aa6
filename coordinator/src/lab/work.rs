//! What each of the lab's jobs does, through the code of its command: a run through
//! `tools::execute` on the lab's `Target`, a sweep through `tools::sweep::measure_points`,
//! an explanation through `tools::explain::explain_within` (its memory estimate and
//! watcher), a simulation through `tools::simulate`'s plan (its memory estimate) and
//! under `tools::memory`'s watcher; both against `--memory-limit` (default as the CLI's). Every job can be stopped (`jobs::Stop`): a run or sweep is
//! dropped, and the coordinator aborts it on its nodes; a simulation stops at its next
//! poll.

use anyhow::{Context, anyhow};
use bytesize::ByteSize;
use serde_json::{Value, json};
use topocomm_collectives::simulator::spec::SimulatedRun;
use topocomm_collectives::simulator::{self, Options};
use topocomm_proto::spec::LinkModel;

use crate::control::local::Capacity;
use crate::control::request;
use crate::control::run::topology_on;
use crate::control::target::Target;
use crate::lab::document::{self, Kind};
use crate::lab::jobs::{Status, Stop};
use crate::lab::server::Lab;
use crate::lab::words::{self, ExplainWords, RunWords, SimulateWords, SweepWords};
use crate::render::schema;
use crate::tools::execute::{self, Stage};
use crate::tools::explain::{self, ExplainArgs};
use crate::tools::memory::{self, Exceeded, Limits, MemoryWatch};
use crate::tools::simulate::{self, SimulateArgs};
use crate::tools::sweep::{self, SweepArgs};

/// How a job ended: its status, what to say, and its document.
pub type Ended = (Status, Option<String>, Option<Value>);

/// What a job's work gives: its document, whether it verified, and why not.
type Done = anyhow::Result<(Value, bool, Option<String>)>;

/// A job checked and ready to go.
pub enum Job {
    Run(Box<request::Planned>),
    Explain(Box<ExplainArgs>),
    Simulate(Box<SimulateArgs>),
    Sweep(Box<SweepJob>),
}

/// A sweep checked and ready to go, as `topocomm sweep` prepares it.
pub struct SweepJob {
    args: SweepArgs,
    algorithms: Vec<topocomm_proto::spec::Algorithm>,
    sizes: Vec<u64>,
    /// Sizes left out, with the reason.
    skipped: Vec<String>,
    predict_with: Option<topocomm_proto::spec::LinkModel>,
    repetition: request::Repetition,
}

/// Why a job was refused before it started.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// Its words do not parse, or name a file.
    #[error(transparent)]
    Words(#[from] words::WordsError),
    /// Its command refuses what they ask, as the CLI would.
    #[error("error: {0:#}")]
    Refused(#[source] anyhow::Error),
    /// No size a sweep asks for can run.
    #[error("error: no size of --sizes can run ({})", .skipped.join("; "))]
    NoSize { skipped: Vec<String> },
}

/// Checks `args` as `kind`'s command does before it starts anything.
pub async fn prepare(lab: &Lab, kind: Kind, args: &[String]) -> Result<Job, PrepareError> {
    let cli = PrepareError::Refused;
    match kind {
        Kind::Run => {
            let parsed: RunWords = words::parse("run", args)?;
            let mut planned = request::plan_live(&parsed.what, parsed.repeat.repetition(false)).map_err(cli)?;
            // The page animates the run's own message flow, gathered from every node.
            planned.request.spec.trace = true;
            let request = &planned.request;
            // The lab's daemons are the run's vertices: its ranks, then a switched network's switches.
            let daemons = lab.coordinator.cluster.status().expected;
            let p = topology_on(request.topology, daemons, request.dims.as_deref())
                .and_then(|topology| topology.routed(request.routes)?.placed(request.placement))
                .map_err(|e| cli(e.into()))?
                .p();
            request.spec.validate(p).map_err(|e| cli(e.into()))?;
            if let Some(Target::Local(_)) = lab.target.read().await.as_ref() {
                Capacity::of_this_machine()
                    .check_run(&request.spec, request.topology, p, lab.coordinator.tuning())
                    .map_err(|e| cli(e.into()))?;
            }
            Ok(Job::Run(Box::new(planned)))
        }
        Kind::Explain => Ok(Job::Explain(Box::new(words::parse::<ExplainWords>("explain", args)?.args))),
        Kind::Simulate | Kind::Scaling | Kind::Steps => {
            let parsed = words::parse::<SimulateWords>("simulate", args)?.args;
            if parsed.links.dilation.is_some() {
                return Err(cli(anyhow::anyhow!(simulate::SIMULATED_TIME_UNDILATED)));
            }
            Ok(Job::Simulate(Box::new(parsed)))
        }
        Kind::Sweep => {
            let mut args = words::parse::<SweepWords>("sweep", args)?.args;
            // The sweep goes to the lab's cluster, whose size is fixed (as a run's).
            let daemons = lab.coordinator.cluster.status().expected;
            let dims = args.shape.dims.as_deref();
            args.nodes = topology_on(args.shape.topology, daemons, dims).map_err(|e| cli(e.into()))?.p();
            let algorithms = sweep::algorithms(&args).map_err(cli)?;
            let repetition = args.repeat.repetition(false);
            let capacity = match lab.target.read().await.as_ref() {
                Some(Target::Local(_)) => Some(Capacity::of_this_machine()),
                _ => None,
            };
            let (sizes, skipped) =
                sweep::runnable_sizes(&args, algorithms[0], repetition, capacity.as_ref(), lab.coordinator.tuning())
                    .map_err(cli)?;
            if sizes.is_empty() {
                return Err(PrepareError::NoSize { skipped });
            }
            let predict_with = request::link_models(&args.links).map_err(cli)?.1;
            Ok(Job::Sweep(Box::new(SweepJob { args, algorithms, sizes, skipped, predict_with, repetition })))
        }
    }
}

/// Carries out job `id` until it ends or `stop` says; tells the pages its progress.
pub async fn carry_out(lab: &Lab, id: u64, args: &[String], job: Job, stop: &Stop) -> Ended {
    let result = match job {
        Job::Run(planned) => {
            let target = lab.target.read().await;
            let Some(target) = target.as_ref() else {
                return (Status::Failed, Some("the lab is stopping".into()), None);
            };
            let on_stage = |stage: Stage| {
                let (status, note) = match stage {
                    Stage::Probing => (Status::Probing, None),
                    Stage::Dilated(chosen) => (Status::Probing, chosen.announcement(true)),
                    Stage::Running => (Status::Running, None),
                };
                lab.update(id, status, note);
            };
            let executed = tokio::select! {
                // Dropped, the run is aborted on its nodes (`Coordinator::execute`).
                () = stop.cancelled.cancelled() => return cancelled(),
                executed = execute::run(target, *planned, lab.coordinator.tuning(), &on_stage) => executed,
            };
            match executed {
                Ok(executed) => {
                    lab.remember_traffic(&executed.outcome);
                    let verified = executed.summary.is_ok();
                    let failure = executed.summary.as_ref().err().map(|f| format!("error: {f}"));
                    document::of_run(&executed, args).map(|d| (d, verified, failure))
                }
                Err(error) => Err(error),
            }
        }
        Job::Explain(words) => {
            let (coordinator, args) = (lab.coordinator.clone(), args.to_vec());
            // The model is not stopped by a cancel: a cancelled explanation (bounded by its
            // estimate, the memory limit and the messages explain records) ends before the
            // next job starts.
            blocking(move || {
                let limit = words.memory_limit.or_else(memory::default_memory_limit);
                let explained = explain::explain_within(&words.what, coordinator.tuning(), limit)?;
                let flow = document::flow(
                    &explained.prediction.events,
                    &format!("cost model's schedule, {}", crate::render::links::describe_links(&explained.links)),
                );
                let result = schema::versioned(explain::to_json(&explained));
                let doc = document::document(Kind::Explain, &explained.spec, &explained.topology, &args, result, flow);
                Ok((doc, true, None))
            })
            .await
        }
        Job::Simulate(words) => {
            let (args, stop) = (args.to_vec(), stop.clone());
            blocking(move || simulated(&words, &args, &stop)).await
        }
        Job::Sweep(job) => {
            let target = lab.target.read().await;
            let Some(target) = target.as_ref() else {
                return (Status::Failed, Some("the lab is stopping".into()), None);
            };
            tokio::select! {
                () = stop.cancelled.cancelled() => return cancelled(),
                swept = swept(lab, id, target, &job, args) => swept,
            }
        }
    };
    if stop.is_cancelled() {
        return cancelled();
    }
    match result {
        Ok((document, true, _)) => (Status::Verified, None, Some(document)),
        Ok((document, false, failure)) => (Status::Failed, failure, Some(document)),
        Err(error) => (Status::Failed, Some(format!("error: {error:#}")), None),
    }
}

fn cancelled() -> Ended {
    (Status::Cancelled, Some("cancelled".into()), None)
}

/// One simulation of `point` (its flow recorded if `record`), stopped by `stop` and by
/// `topocomm simulate`'s memory watcher (`tools::memory`) past `args.memory_limit` (default: what the lab
/// holds now plus nine tenths of what the machine has available).
fn watched(
    args: &SimulateArgs,
    point: &simulate::Planned,
    links: LinkModel,
    record: bool,
    stop: &Stop,
) -> anyhow::Result<SimulatedRun> {
    let options =
        Options { run: 1, record, wall_limit: Some(args.timeout), live: Some(stop.live.clone()), ..Options::default() };
    let limit = args.memory_limit.or_else(memory::default_memory_limit);
    let watch = MemoryWatch::default();
    let limits = Limits { memory: limit, messages: None };
    let ran = watch.during(&stop.live, limits, || {
        simulator::spec::run(&point.spec, &point.topology, links, point.inputs, options)
    });
    ran.map_err(|error| match (watch.exceeded(), limit) {
        (Some(Exceeded::Memory(resident)), Some(limit)) => anyhow!(
            "{} on a {}: stopped, the lab holding {} of memory, over the limit of {} (--memory-limit; the estimate \
             before the run was {}): fewer nodes, a smaller size or --payload lengths need less",
            point.spec.collective,
            point.topology,
            ByteSize(resident).display().iec(),
            ByteSize(limit).display().iec(),
            ByteSize(point.estimate).display().iec()
        ),
        _ if stop.is_cancelled() => anyhow!("cancelled"),
        _ => anyhow!(error),
    })
}

/// `simulate`: one point with its message flow, or (a range of node counts, several
/// topologies or algorithms) every point's figures, for the page's scaling plot.
fn simulated(args: &SimulateArgs, words: &[String], stop: &Stop) -> Done {
    let (_, predict_with) = request::link_models(&args.links)?;
    let (links, _) = explain::physics(predict_with, &args.links)?;
    let planned = simulate::plan(args, links)?;
    let [point] = planned.as_slice() else { return scaling(args, &planned, links, words, stop) };
    if point.topology.p() > simulate::MOST_NODES_DRAWN {
        return by_steps(args, point, links, words, stop);
    }
    let ran = watched(args, point, links, true, stop)?;
    let described = simulate::describe(point, &ran, &links);
    let verified = described.verified;
    let source = format!(
        "simulated ({}), {}",
        if verified { "verified" } else { "lengths only" },
        crate::render::links::describe_links(&links)
    );
    let flow = document::flow(&ran.events, &source);
    // The simulation's own data goes now, before the document is kept.
    drop(ran);
    let result = schema::versioned_json(&described)?;
    Ok((document::document(Kind::Simulate, &point.spec, &point.topology, words, result, flow), true, None))
}

/// A sweep on the lab's cluster through the code of `topocomm sweep`, each point's
/// progress told to the pages; its document holds what `sweep --json` writes. A failed
/// point stops the sweep, and the points measured before it are kept.
async fn swept(lab: &Lab, id: u64, target: &Target, job: &SweepJob, words: &[String]) -> Done {
    let SweepJob { args, algorithms, sizes, skipped, predict_with, repetition } = job;
    lab.update(id, Status::Running, skipped.first().cloned());
    let mut on_step = |step: sweep::SweepUpdate<'_>| -> anyhow::Result<()> {
        let note = match step {
            sweep::SweepUpdate::Starting { index, of, algorithm, size } => {
                format!("point {} of {of}: {algorithm} at {}", index + 1, crate::render::quantity::size_text(size))
            }
            sweep::SweepUpdate::Measured { index, summary, .. } => {
                format!("point {} verified: {:.1} µs", index + 1, summary.time_us.mean)
            }
        };
        lab.update(id, Status::Running, Some(note));
        Ok(())
    };
    let mut measured = sweep::Sweep::default();
    let result =
        sweep::measure_points(args, target, algorithms, sizes, *predict_with, *repetition, &mut measured, &mut on_step)
            .await;
    let Some(topology) = measured.topology.clone() else {
        return Err(result.err().unwrap_or_else(|| anyhow::anyhow!("the sweep measured nothing")));
    };
    let failure = result.err().map(|error| format!("error: {error:#}"));
    let links = match &measured.links {
        Some(l) if l.emulated => "emulated links".to_owned(),
        Some(_) => "full-speed links, the model from the calibration".to_owned(),
        None => "full-speed links".to_owned(),
    };
    let title = format!(
        "{} swept over {} and {} on a {topology}, {links}",
        args.collective,
        crate::render::quantity::count(sizes.len() as u64, "size"),
        crate::render::quantity::count(algorithms.len() as u64, "algorithm")
    );
    let document = schema::versioned(json!({
        "kind": Kind::Sweep.name(), "title": title, "args": words,
        "result": sweep::json_of(args, &measured, &topology),
        "skipped": skipped,
    }));
    Ok((document, failure.is_none(), failure))
}

/// Messages a simulation too large to animate may have for the page to aggregate them
/// by step: the flow of each is held in memory while it is aggregated.
const MOST_MESSAGES_AGGREGATED: u64 = 4_000_000;

/// `simulate` of more nodes than the page animates: the point's figures (as
/// `simulate --json`) and its flow aggregated by step (`document::by_step`). It is
/// simulated first without its flow, whose number of messages says whether the flow
/// may be recorded; one of more messages gets its figures only.
fn by_steps(args: &SimulateArgs, point: &simulate::Planned, links: LinkModel, words: &[String], stop: &Stop) -> Done {
    let ran = watched(args, point, links, false, stop)?;
    let described = simulate::describe(point, &ran, &links);
    drop(ran);
    let steps = if described.frames_sent <= MOST_MESSAGES_AGGREGATED {
        let recorded = watched(args, point, links, true, stop)?;
        Some(document::by_step(&recorded.events))
    } else {
        None
    };
    let title = format!(
        "{} ({}) on a {}, {} per node, by step",
        point.spec.collective,
        point.spec.algorithm,
        point.topology,
        crate::render::quantity::size_text(point.spec.size_bytes)
    );
    let note = match &steps {
        Some(_) => format!("more than {} nodes: aggregated by step instead of animated", simulate::MOST_NODES_DRAWN),
        None => format!("{} messages: too many to aggregate by step here", described.frames_sent),
    };
    let document = schema::versioned(json!({
        "kind": Kind::Steps.name(), "title": title, "args": words, "note": note,
        "result": schema::versioned_json(&described)?,
        "steps": steps,
        "source": format!("simulated, {}", crate::render::links::describe_links(&links)),
    }));
    Ok((document, true, None))
}

/// Every point of a `simulate` of several points, as `simulate --json` gives them.
fn scaling(
    args: &SimulateArgs,
    planned: &[simulate::Planned],
    links: LinkModel,
    words: &[String],
    stop: &Stop,
) -> Done {
    let mut points = Vec::new();
    let mut failures = Vec::new();
    for (done, point) in planned.iter().enumerate() {
        match watched(args, point, links, false, stop) {
            Ok(ran) => points.push(simulate::describe(point, &ran, &links)),
            Err(error) => failures.push(format!("{} on a {}: {error:#}", point.spec.collective, point.topology)),
        }
        // Stopped (cancelled, or past the memory limit): the points after it are not tried.
        if stop.live.stop.load(std::sync::atomic::Ordering::Relaxed) {
            let left = planned.len() - done - 1;
            if left > 0 {
                failures.push(format!("{left} more points not simulated"));
            }
            break;
        }
    }
    let title = format!(
        "{} simulated at {}, {}",
        args.collective,
        crate::render::quantity::count(planned.len() as u64, "point"),
        crate::render::links::describe_links(&links)
    );
    let failure = (!failures.is_empty()).then(|| format!("error: {}", failures.join("; ")));
    let document = schema::versioned(json!({
        "kind": Kind::Scaling.name(), "title": title, "args": words,
        "result": { "points": points, "failures": failures },
    }));
    Ok((document, failures.is_empty(), failure))
}

/// Runs `work` on the blocking pool (the model and the simulator compute for a while);
/// waits for it to end even when the job is cancelled, so that one job computes at a time.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> anyhow::Result<T> + Send + 'static) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work).await.context("the computation panicked")?
}

/// Carries out the queued jobs, one at a time, until the lab stops; frees what each held
/// when it ends.
pub(crate) async fn work_through(lab: std::sync::Arc<Lab>) {
    loop {
        let (id, args, job, stop) = lab.jobs.next().await;
        lab.update(id, Status::Running, None);
        let (status, note, document) = carry_out(&lab, id, &args, job, &stop).await;
        if let Some(summary) = lab.jobs.finish(id, status, note, document) {
            lab.tell(json!({ "type": "run", "run": summary }));
        }
        topocomm_node::daemon::allocator::release_freed_buffers();
    }
}
