//! `topocomm bench-model`: emulated runs measured against the cost model.
//!
//! For every node count × topology × routing × collective × size, the collective runs
//! with its topology's default algorithm on a local cluster whose links emulate the
//! given t_s, t_h and t_w, and the cost model predicts the same run; the table holds the
//! measured median against the prediction. One cluster serves every run of a node count
//! (the coordinator re-wires it per topology). Every prediction is made before anything
//! runs, so the benchmark can say how long it will take before it starts.
//!
//! Emulated links are dilated (`--dilation`, by default `auto`): each cluster is probed
//! once, on its first topology, and every run gets the K its messages need there
//! (`tools::dilation`); the table gives each run's K, and the closing lines each
//! cluster's range of K and wall time.
//!
//! This file plans, runs and tabulates; it does not touch the model or the cluster code.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use bytesize::ByteSize;
use clap::Args;
use serde::Serialize;
use strum::IntoEnumIterator;
use topocomm_proto::control::RunRequest;
use topocomm_proto::schedule::Schedule;
use topocomm_proto::spec::{Algorithm, Collective, Dilation, LinkModel, MAX_TIMEOUT, MAX_TIMEOUT_MS, Routing, RunSpec};
use topocomm_proto::{Topology, TopologyKind, catalogue};

use crate::control::local::{self, LocalCluster};
use crate::control::parse::{parse_collective, parse_routing, parse_size, parse_time, parse_topology};
use crate::control::request::{Dilating, parse_dilation};
use crate::control::target::Target;
use crate::render::dilation::{ProbeFigures, Verbosity, factor_text, seconds_text};
use crate::render::output::{self, outln};
use crate::render::page::{self, Machine};
use crate::render::quantity::size_text;
use crate::render::report::{self, TimeStats};
use crate::render::table::{Fit, HouseTable};
use crate::tools::dilation::{Messages, Probe};
use crate::tools::model::{self, ModelError, Prediction};
use topocomm_collectives::tuning::Tuning;

#[derive(Debug, Clone, Args)]
pub struct BenchModelArgs {
    /// Node counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8,16,32")]
    pub nodes: Vec<usize>,
    /// Topologies, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "ring,torus,hypercube", value_parser = parse_topology)]
    pub topologies: Vec<TopologyKind>,
    /// Collectives, comma-separated (default: every one but barrier).
    #[arg(long, value_delimiter = ',', value_parser = parse_collective)]
    pub collectives: Vec<Collective>,
    /// Message sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1KiB,64KiB,1MiB", value_parser = parse_size)]
    pub sizes: Vec<u64>,
    /// Routings, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "sf,ct", value_parser = parse_routing)]
    pub routings: Vec<Routing>,
    /// Start-up time t_s.
    #[arg(long, default_value = "200us", value_parser = parse_time)]
    pub ts: u64,
    /// Per-hop time t_h.
    #[arg(long, default_value = "20us", value_parser = parse_time)]
    pub th: u64,
    /// Per-byte time t_w.
    #[arg(long, default_value = "10ns", value_parser = parse_time)]
    pub tw: u64,
    /// Cut-through packet size (default: whole frames, the limit of small packets; see `run --packet`).
    #[arg(long, value_parser = parse_size)]
    pub packet: Option<u64>,
    /// Time dilation (see `run --dilation`): a factor for every run, or `auto`, which
    /// probes each cluster once and gives every run the K its messages need there.
    #[arg(long, value_name = "K|auto", default_value = "auto", value_parser = parse_dilation)]
    pub dilation: Dilating,
    /// Timed iterations per run.
    #[arg(long, short = 'i', default_value_t = 10)]
    pub iterations: u32,
    /// Untimed iterations before them.
    #[arg(long, default_value_t = 2)]
    pub warmup: u32,
    /// Folder for the node daemons' logs, p<nodes> for each cluster (default: a new folder
    /// for this command in this user's own, $XDG_RUNTIME_DIR/topocomm or
    /// /tmp/topocomm-<user>; it is named).
    #[arg(long)]
    pub logs: Option<PathBuf>,
    /// Print JSON lines instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the results as a page of the book (Markdown) to FILE: the command, the
    /// machine, the table and the closing lines, under a line saying that the page was
    /// written by this command (e.g. docs/bench/bench-model.md).
    #[arg(long, value_name = "FILE")]
    pub page: Option<PathBuf>,
    #[command(flatten)]
    pub words: Verbosity,
    /// Benchmark an MSCCL-IR program instead of the topologies' default algorithms: its
    /// collective (the file's `coll`; --collectives may name only it), at the node count it
    /// is written for, on every topology, size and routing given.
    #[arg(long, value_name = "FILE.xml")]
    pub schedule: Option<PathBuf>,
}

/// The MSCCL-IR program at `path`, checked against the collectives the command names (none,
/// or only the program's own).
fn read_program(path: &Path, collectives: &[Collective]) -> anyhow::Result<(Schedule, Collective)> {
    let schedule = topocomm_collectives::algorithms::schedule::read_msccl(path).map_err(anyhow::Error::msg)?;
    let own = match &schedule {
        Schedule::Msccl(program) => program.collective,
        _ => anyhow::bail!("{}: not an MSCCL-IR program", path.display()),
    };
    if let Some(other) = collectives.iter().find(|&&c| c != own) {
        anyhow::bail!("{}: the program is for {own}, but --collectives names {other}", path.display());
    }
    eprintln!("{}", topocomm_collectives::algorithms::schedule::summary(&schedule));
    Ok((schedule, own))
}

/// The shortest deadline of one iteration's waits.
const MIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Measured / model ratios inside this band count as the model holding.
const BAND: (f64, f64) = (0.95, 1.10);

/// How much longer than the model the estimate takes an iteration to be: software (daemons,
/// loopback TCP, timers) adds to every message; 1.5 is what runs on a shared machine showed.
const SLOWDOWN: f64 = 1.5;

/// What the estimate adds per iteration besides (the coordinator's own start signal).
const SOFTWARE_PER_ITERATION: Duration = Duration::from_millis(1);

/// What the estimate adds per run (start, reports, verification).
const PER_RUN: Duration = Duration::from_millis(20);

/// What the estimate adds per wiring, and per cluster started.
const PER_WIRING: Duration = Duration::from_millis(300);

/// One run to make: what, on what, and what the model says of it.
struct Case {
    topology: Topology,
    routing: Routing,
    spec: RunSpec,
    links: LinkModel,
    /// The model's time of the run (its flow events dropped), or why it has none.
    prediction: Result<Prediction, ModelError>,
    /// The model's time of the barrier every iteration starts with, in µs.
    barrier_us: f64,
    /// The shortest and longest message of the model's schedule.
    messages: Option<Messages>,
}

impl Case {
    fn p(&self) -> usize {
        self.topology.p()
    }

    /// The model's time of the run, in µs (0 without one).
    fn model_us(&self) -> f64 {
        self.prediction.as_ref().map(Prediction::time_us).unwrap_or(0.0)
    }

    /// What the run should take, warm-up, dilation and overheads included.
    fn estimate(&self) -> Duration {
        let dilated = self.spec.dilation.factor() * self.model_us();
        let iteration = Duration::from_secs_f64(SLOWDOWN * (dilated + self.barrier_us) / 1e6) + SOFTWARE_PER_ITERATION;
        iteration * (self.spec.warmup + self.spec.iterations) + PER_RUN
    }

    /// Dilates the run by `dilation`, its deadline with it: ten times the dilated model
    /// (room for a slow machine), never under half a minute.
    fn dilate(&mut self, dilation: Dilation) {
        self.spec.dilation = dilation;
        let timeout = Duration::try_from_secs_f64(10.0 * (dilation.factor() * self.model_us() + self.barrier_us) / 1e6)
            .unwrap_or(MAX_TIMEOUT)
            .clamp(MIN_TIMEOUT, MAX_TIMEOUT);
        self.spec.timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(MAX_TIMEOUT_MS);
    }
}

/// One line of the table (and of `--json`).
#[derive(Debug, Clone, Serialize)]
struct Row {
    collective: Collective,
    /// The algorithm, or the schedule that ran in its place.
    algorithm: String,
    topology: TopologyKind,
    dims: Vec<usize>,
    p: usize,
    routing: Routing,
    size_bytes: u64,
    iterations: u32,
    /// Median of the timed iterations (an iteration takes as long as its slowest node).
    measured_us: Option<f64>,
    measured: Option<TimeStats>,
    model_us: Option<f64>,
    /// Measured median over model.
    ratio: Option<f64>,
    /// K: the run's emulated links ran K times slower than the wall clock (the times
    /// above are emulated).
    dilation: f64,
    /// Wall time the run took, in seconds.
    wall_s: f64,
    /// Why the run (or its prediction) failed.
    error: Option<String>,
}

impl Row {
    fn of(case: &Case) -> Self {
        Row {
            collective: case.spec.collective,
            algorithm: case.spec.what_runs(),
            topology: case.topology.kind(),
            dims: case.topology.dims().to_vec(),
            p: case.p(),
            routing: case.routing,
            size_bytes: case.spec.size_bytes,
            iterations: case.spec.iterations,
            measured_us: None,
            measured: None,
            model_us: case.prediction.as_ref().ok().map(Prediction::time_us),
            ratio: None,
            dilation: case.spec.dilation.factor(),
            wall_s: 0.0,
            error: case.prediction.as_ref().err().map(ModelError::to_string),
        }
    }

    /// The case the row measured, as the progress and failure lines name it:
    /// `broadcast (ring) on ring p=8 sf 1.0 KiB`.
    fn case(&self) -> String {
        format!(
            "{} ({}) on {} p={} {} {}",
            self.collective,
            self.algorithm,
            shape_name(self.topology, &self.dims),
            self.p,
            self.routing,
            ByteSize::b(self.size_bytes).display().iec()
        )
    }

    fn within(&self) -> bool {
        self.ratio.is_some_and(|r| (BAND.0..=BAND.1).contains(&r))
    }
}

/// The closing line of the table (and of `--json`).
#[derive(Debug, Serialize)]
struct Summary {
    runs: usize,
    failed: usize,
    skipped: Vec<String>,
    ratio_min: Option<f64>,
    ratio_median: Option<f64>,
    ratio_max: Option<f64>,
    within: usize,
    band: (f64, f64),
    /// Each cluster's dilation and wall time.
    clusters: Vec<ClusterTime>,
    estimated_s: f64,
    elapsed_s: f64,
}

/// How one cluster's runs were dilated and what they cost.
#[derive(Debug, Clone, Serialize)]
struct ClusterTime {
    p: usize,
    /// The smallest and largest K of its runs.
    dilation_min: f64,
    dilation_max: f64,
    /// `auto`: what the probe measured there.
    probe: Option<ProbeFigures>,
    /// Wall time of its runs (the probe's included), in seconds.
    wall_s: f64,
}

/// Runs the benchmark `args` describes.
pub async fn run(args: &BenchModelArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.iterations >= 1, "--iterations must be at least 1");
    for (name, empty) in [
        ("--nodes", args.nodes.is_empty()),
        ("--topologies", args.topologies.is_empty()),
        ("--sizes", args.sizes.is_empty()),
        ("--routings", args.routings.is_empty()),
    ] {
        anyhow::ensure!(!empty, "{name} needs at least one value");
    }
    if let Some(&p) = args.nodes.iter().find(|&&p| p < 2) {
        anyhow::bail!("--nodes {p}: a benchmark of communication needs at least 2 nodes");
    }
    if let Some(path) = &args.page {
        output::check_file_writable("--page", path)?;
    }
    // 0 emulates cut-through in the limit of small packets (whole frames, no packet overhead).
    let packet_bytes = u32::try_from(args.packet.unwrap_or(0)).map_err(|_| anyhow!("--packet must be below 4 GiB"))?;
    let links =
        |routing| LinkModel { ts_ns: args.ts / 1000, th_ns: args.th / 1000, tw_ps: args.tw, routing, packet_bytes };
    let schedule = match &args.schedule {
        Some(path) => Some(read_program(path, &args.collectives)?),
        None => None,
    };
    let collectives: Vec<Collective> = match &schedule {
        Some((_, collective)) => vec![*collective],
        None if args.collectives.is_empty() => Collective::iter().filter(|&c| c != Collective::Barrier).collect(),
        None => args.collectives.clone(),
    };
    let link_text = format!(
        "t_s {} µs, t_h {} µs, t_w {} ns/B, cut-through {}",
        args.ts as f64 / 1e6,
        args.th as f64 / 1e6,
        args.tw as f64 / 1e3,
        if packet_bytes == 0 { "in whole frames".to_owned() } else { format!("in {packet_bytes} B packets") }
    );

    let (mut cases, skipped) = plan(args, &collectives, schedule.as_ref().map(|(schedule, _)| schedule), links)?;
    anyhow::ensure!(!cases.is_empty(), "nothing to run: every shape or size was skipped");
    if let Dilating::By(factor) = args.dilation {
        cases.iter_mut().for_each(|case| case.dilate(factor));
    }
    let clusters = dedup_count(cases.iter().map(Case::p));
    let wirings = dedup_count(cases.iter().map(|c| (c.p(), c.topology.kind())));
    let estimate: Duration =
        cases.iter().map(Case::estimate).sum::<Duration>() + PER_WIRING * (clusters + wirings) as u32;
    let dilation = match args.dilation {
        Dilating::By(factor) => format!("dilated ×{factor}"),
        Dilating::Auto => "dilated as each cluster's probe says (--dilation auto)".to_owned(),
    };
    eprintln!(
        "{} runs ({} iterations after {warmup} warm-up each) on {clusters} local cluster{} with emulated links ({link_text}), \
         {dilation}; expected to take about {}{}",
        cases.len(),
        args.iterations,
        if clusters == 1 { "" } else { "s" },
        human(estimate),
        if args.dilation == Dilating::Auto { " undilated" } else { "" },
        warmup = args.warmup,
    );

    let started = Instant::now();
    let mut rows: Vec<Row> = Vec::with_capacity(cases.len());
    let mut times: Vec<ClusterTime> = Vec::new();
    let mut interrupted = None;
    let mut progress = Progress { total: cases.len(), estimate, started, planned_done: Duration::ZERO };
    let mut node_counts: Vec<usize> = cases.iter().map(Case::p).collect();
    node_counts.dedup();
    let log_root = local::log_folder(args.logs.as_deref())?;
    for p in node_counts {
        let logs = log_root.join(format!("p{p}"));
        // Every run names its algorithm (the topology's default): no `auto` to tune.
        let local = LocalCluster::start(p, &logs, false, Arc::new(Tuning::built_in())).await?;
        eprintln!("local cluster of {p} nodes up, node logs in {}/node-*.log", local.logs.display());
        let target = Target::Local(local);
        let ours: Vec<&mut Case> = cases.iter_mut().filter(|c| c.p() == p).collect();
        let cluster = Cluster {
            target: &target,
            p,
            auto: args.dilation == Dilating::Auto,
            json: args.json,
            verbose: args.words.verbose,
        };
        let result = tokio::select! {
            result = cluster.run(ours, &mut rows, &mut progress) => result,
            _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted after {} of {} runs; every node process was stopped", rows.len(), cases.len())),
        };
        target.shutdown().await;
        match result {
            Ok(time) => times.push(time),
            Err(error) => {
                interrupted = Some(error);
                break;
            }
        }
    }

    // The estimate as dilation left it.
    let summary = summarize(&rows, skipped, times, progress.estimate, started.elapsed());
    if args.json {
        outln!("{}", crate::render::schema::versioned(serde_json::json!({ "summary": summary })))?;
    } else {
        outln!(
            "emulated links: {link_text}; {} timed iterations after {} warm-up per run",
            args.iterations,
            args.warmup
        )?;
        outln!("{}", table(&rows))?;
        outln!("{}", closing_line(&summary))?;
        for line in failures(&rows) {
            outln!("{line}")?;
        }
    }
    if let Some(path) = &args.page {
        let interrupted = interrupted.as_ref().map(|error| format!("{error:#}"));
        page::write(path, &results_page(&link_text, args, &rows, &summary, interrupted.as_deref()))?;
        eprintln!("wrote the page {}", path.display());
    }
    if let Some(error) = interrupted {
        return Err(error);
    }
    anyhow::ensure!(summary.failed == 0, "{} of {} runs failed (see above)", summary.failed, summary.runs);
    Ok(())
}

/// Every case to run, predicted; and every shape or size skipped, with why.
fn plan(
    args: &BenchModelArgs,
    collectives: &[Collective],
    schedule: Option<&Schedule>,
    links: impl Fn(Routing) -> LinkModel,
) -> anyhow::Result<(Vec<Case>, Vec<String>)> {
    let mut shapes = Vec::new();
    let mut skipped = Vec::new();
    for p in unique(&args.nodes) {
        for kind in unique(&args.topologies) {
            match Topology::new(kind, p, None) {
                Ok(topology) => shapes.push(topology),
                Err(error) => {
                    eprintln!("skipping {kind} with {p} nodes: {error}");
                    skipped.push(format!("{kind} p={p}: {error}"));
                }
            }
        }
    }
    let mut specs = Vec::new();
    for topology in &shapes {
        for &routing in &unique(&args.routings) {
            for &collective in &unique(collectives) {
                for &size_bytes in &unique(&args.sizes) {
                    let spec = RunSpec {
                        run: 0,
                        root: 0,
                        size_bytes,
                        warmup: args.warmup,
                        iterations: args.iterations,
                        shift: 1,
                        emulation: Some(links(routing)),
                        schedule: schedule.map(|schedule| Box::new(schedule.clone())),
                        ..RunSpec::new(collective, catalogue::default_algorithm(collective, topology.kind()))
                    };
                    match spec.validate(topology.p()) {
                        Ok(()) => specs.push((topology.clone(), routing, spec)),
                        Err(error) => {
                            let what =
                                format!("{collective} of {} on {topology}", ByteSize::b(size_bytes).display().iec());
                            eprintln!("skipping {what}: {error}");
                            skipped.push(format!("{what}: {error}"));
                        }
                    }
                }
            }
        }
    }
    let total = specs.len();
    let mut cases = Vec::with_capacity(total);
    let mut barriers: Vec<((usize, TopologyKind, Routing), f64)> = Vec::new();
    let began = Instant::now();
    for (index, (topology, routing, spec)) in specs.into_iter().enumerate() {
        if index % 20 == 0 {
            eprintln!("predicting {}/{total} ({:.1} s)", index + 1, began.elapsed().as_secs_f64());
        }
        let links = links(routing);
        let key = (topology.p(), topology.kind(), routing);
        let barrier_us = match barriers.iter().find(|(k, _)| *k == key) {
            Some(&(_, us)) => us,
            None => {
                let barrier = RunSpec::new(Collective::Barrier, Algorithm::Dissemination);
                let us = model::predict(&barrier, &topology, links).map(|p| p.time_us()).unwrap_or(0.0);
                barriers.push((key, us));
                us
            }
        };
        let prediction = model::predict(&spec, &topology, links);
        let messages = prediction.as_ref().ok().and_then(Messages::of);
        let prediction = prediction.map(|p| Prediction { events: Vec::new(), ..p });
        let mut case = Case { topology, routing, spec, links, prediction, barrier_us, messages };
        // Undilated until a dilation is chosen; this sets the deadline.
        case.dilate(Dilation::NONE);
        cases.push(case);
    }
    eprintln!("predicted {total} runs in {:.1} s", began.elapsed().as_secs_f64());
    Ok((cases, skipped))
}

/// Where the benchmark stands, for the progress lines.
struct Progress {
    total: usize,
    estimate: Duration,
    started: Instant,
    /// The estimates of the runs made so far.
    planned_done: Duration,
}

/// One cluster of the benchmark and how its runs are dilated.
struct Cluster<'a> {
    target: &'a Target,
    p: usize,
    /// `--dilation auto`: probe the cluster first and dilate each run as it needs.
    auto: bool,
    json: bool,
    /// `--verbose`: say in full why `auto` chose the first run's K.
    verbose: bool,
}

impl Cluster<'_> {
    /// Dilates `cases` (under `auto`, after the probe), runs them one by one, appending
    /// a row for each, and says what the cluster's runs cost.
    async fn run(
        &self,
        mut cases: Vec<&mut Case>,
        rows: &mut Vec<Row>,
        progress: &mut Progress,
    ) -> anyhow::Result<ClusterTime> {
        let began = Instant::now();
        let probe = match (self.auto, cases.first().map(|case| case.links)) {
            (true, Some(links)) => Some(self.dilate(&mut cases, links, progress).await?),
            _ => None,
        };
        for case in &cases {
            run_case(self.target, case, rows, progress, self.json).await?;
        }
        let factors = cases.iter().map(|case| case.spec.dilation.factor());
        Ok(ClusterTime {
            p: self.p,
            dilation_min: factors.clone().fold(f64::INFINITY, f64::min),
            dilation_max: factors.fold(1.0, f64::max),
            probe,
            wall_s: began.elapsed().as_secs_f64(),
        })
    }

    /// Probes the cluster on the first case's topology and gives every case the K its
    /// messages need; returns what the probe measured.
    async fn dilate(
        &self,
        cases: &mut [&mut Case],
        links: LinkModel,
        progress: &mut Progress,
    ) -> anyhow::Result<ProbeFigures> {
        let first = &cases[0];
        let request = RunRequest { topology: first.topology.kind(), dims: None, spec: first.spec.clone() };
        let mut probe = Probe::measure(self.target, &request, links).await?;
        let longest = cases.iter().filter_map(|case| case.messages).map(|m| m.longest).max();
        probe.measure_long(self.target, &request, links, longest).await?;
        let mut reason = String::new();
        for case in cases.iter_mut() {
            let before = case.estimate();
            // The deadline follows the dilation here (`Case::dilate`), so it caps nothing.
            let (factor, auto) = probe.choose(&case.links, case.messages, case.model_us(), MAX_TIMEOUT);
            case.dilate(factor);
            progress.estimate = (progress.estimate + case.estimate()).saturating_sub(before);
            if reason.is_empty() {
                reason = auto.why(self.verbose);
            }
        }
        let factors: Vec<f64> = cases.iter().map(|case| case.spec.dilation.factor()).collect();
        eprintln!(
            "p={}: dilation from ×{} to ×{} by run (--dilation auto; the first run: {reason}); about {} left in all",
            self.p,
            factor_text(factors.iter().copied().fold(f64::INFINITY, f64::min)),
            factor_text(factors.iter().copied().fold(1.0, f64::max)),
            human(remaining(progress, progress.started.elapsed())),
        );
        Ok(probe.figures().clone())
    }
}

/// Runs `case` on `target`, appending its row.
async fn run_case(
    target: &Target,
    case: &Case,
    rows: &mut Vec<Row>,
    progress: &mut Progress,
    json: bool,
) -> anyhow::Result<()> {
    let mut row = Row::of(case);
    if let Ok(prediction) = &case.prediction {
        let request = RunRequest { topology: case.topology.kind(), dims: None, spec: case.spec.clone() };
        let began = Instant::now();
        match target.execute(request).await {
            Ok(outcome) => match report::summarize(&outcome, Some((prediction.time_us(), case.links))) {
                Ok(summary) => {
                    row.measured_us = Some(summary.time_us.median);
                    row.measured = Some(summary.time_us);
                    row.ratio = summary.model_ratio;
                }
                Err(failure) => row.error = Some(failure.to_string()),
            },
            Err(error) => row.error = Some(format!("{error:#}")),
        }
        row.wall_s = began.elapsed().as_secs_f64();
    }
    let done = rows.len() + 1;
    let elapsed = progress.started.elapsed();
    progress.planned_done += case.estimate();
    eprintln!(
        "[{done}/{}] {} ({}) {} p={} {} {} ×{}: {} (elapsed {}, about {} left)",
        progress.total,
        row.collective,
        row.algorithm,
        shape_name(row.topology, &row.dims),
        row.p,
        row.routing,
        ByteSize::b(row.size_bytes).display().iec(),
        factor_text(row.dilation),
        match (&row.error, row.measured_us, row.model_us, row.ratio) {
            (Some(error), ..) => format!("FAILED: {}", error.lines().next().unwrap_or_default()),
            (None, Some(measured), Some(model), Some(ratio)) =>
                format!("measured {measured:.0} µs, model {model:.0} µs, ratio {ratio:.3}"),
            _ => "no timing".into(),
        },
        human(elapsed),
        human(remaining(progress, elapsed)),
    );
    if json {
        match crate::render::schema::versioned_json(&row) {
            Ok(line) => outln!("{line}")?,
            Err(error) => eprintln!("cannot print the row as JSON: {error}"),
        }
    }
    rows.push(row);
    Ok(())
}

/// The estimate of what is left, scaled by how the estimate has fared so far.
fn remaining(progress: &Progress, elapsed: Duration) -> Duration {
    let planned_left = progress.estimate.saturating_sub(progress.planned_done);
    if progress.planned_done.is_zero() {
        return planned_left;
    }
    planned_left.mul_f64((elapsed.as_secs_f64() / progress.planned_done.as_secs_f64()).clamp(0.25, 4.0))
}

fn summarize(
    rows: &[Row],
    skipped: Vec<String>,
    clusters: Vec<ClusterTime>,
    estimate: Duration,
    elapsed: Duration,
) -> Summary {
    let mut ratios: Vec<f64> = rows.iter().filter_map(|r| r.ratio).collect();
    ratios.sort_by(f64::total_cmp);
    let stats = (!ratios.is_empty()).then(|| TimeStats::of(&ratios));
    Summary {
        runs: rows.len(),
        failed: rows.iter().filter(|r| r.error.is_some()).count(),
        skipped,
        ratio_min: stats.map(|s| s.min),
        ratio_median: stats.map(|s| s.median),
        ratio_max: stats.map(|s| s.max),
        within: rows.iter().filter(|r| r.within()).count(),
        band: BAND,
        clusters,
        estimated_s: estimate.as_secs_f64(),
        elapsed_s: elapsed.as_secs_f64(),
    }
}

fn table(rows: &[Row]) -> HouseTable {
    let mut table = HouseTable::new([
        "collective",
        "algorithm",
        "topology",
        "p",
        "routing",
        "size",
        "measured µs",
        "model µs",
        "ratio",
        "K",
    ]);
    for row in rows {
        let number = |value: Option<f64>, digits: usize| match value {
            Some(v) => format!("{v:.digits$}"),
            None if row.error.is_some() => "FAILED".into(),
            None => "-".into(),
        };
        table.row([
            row.collective.to_string(),
            row.algorithm.to_string(),
            shape_name(row.topology, &row.dims),
            row.p.to_string(),
            row.routing.to_string(),
            ByteSize::b(row.size_bytes).display().iec().to_string(),
            number(row.measured_us, 1),
            row.model_us.map(|m| format!("{m:.1}")).unwrap_or_else(|| "-".into()),
            number(row.ratio, 3),
            factor_text(row.dilation),
        ]);
    }
    table.right_aligned(&[3, 6, 7, 8, 9]);
    table
}

/// A line per failed run.
fn failures(rows: &[Row]) -> impl Iterator<Item = String> + '_ {
    rows.iter()
        .filter(|r| r.error.is_some())
        .map(|row| format!("failed: {}: {}", row.case(), row.error.as_deref().unwrap_or_default()))
}

/// The page `--page` writes: what `bench-model` prints, with the command and the machine.
fn results_page(
    link_text: &str,
    args: &BenchModelArgs,
    rows: &[Row],
    summary: &Summary,
    interrupted: Option<&str>,
) -> String {
    let mut body = format!(
        "Emulated links: {link_text}; {} timed iterations after {} warm-up per run. Each run is the \
         topology's default algorithm, measured on a local cluster of this machine against the cost \
         model's prediction of the same run ([Emulated links and the cost model](../emulation.md)).\n\n",
        args.iterations, args.warmup
    );
    if let Some(error) = interrupted {
        body += &format!("**The command stopped before the end** ({error}): the table holds the runs made.\n\n");
    }
    body += &format!("```text\n{}\n{}\n", table(rows).render(Fit::Natural), closing_line(summary));
    for line in failures(rows) {
        body += &format!("{line}\n");
    }
    body += "```\n";
    page::page(
        "bench-model: emulated runs against the cost model",
        "topocomm bench-model --page",
        &page::this_command(),
        &Machine::this(),
        std::time::SystemTime::now(),
        &body,
    )
}

fn closing_line(summary: &Summary) -> String {
    let measured = summary.runs - summary.failed;
    let ratios = match (summary.ratio_min, summary.ratio_median, summary.ratio_max) {
        (Some(min), Some(median), Some(max)) => format!(
            "measured / model over {measured} runs: min {min:.3}, median {median:.3}, max {max:.3}; \
             {} of {measured} within [{:.2}, {:.2}]",
            summary.within, summary.band.0, summary.band.1
        ),
        _ => "no run was measured".into(),
    };
    let mut line = ratios;
    if summary.failed > 0 {
        line += &format!("; {} FAILED", summary.failed);
    }
    if !summary.skipped.is_empty() {
        line += &format!("; {} skipped ({})", summary.skipped.len(), summary.skipped.join("; "));
    }
    for cluster in &summary.clusters {
        let probe = cluster
            .probe
            .as_ref()
            .map(|probe| {
                let steps: Vec<String> = std::iter::once(&probe.small)
                    .chain(&probe.long)
                    .map(|steps| format!("{} released {:.0} µs late", size_text(steps.size_bytes), steps.release_us))
                    .collect();
                format!(" (auto: a step of {} nodes sending at once: {})", cluster.p, steps.join(", "))
            })
            .unwrap_or_default();
        let k = if cluster.dilation_min == cluster.dilation_max {
            format!("×{}", factor_text(cluster.dilation_min))
        } else {
            format!("×{} to ×{}", factor_text(cluster.dilation_min), factor_text(cluster.dilation_max))
        };
        line += &format!("\np = {}: dilation {k}{probe}; wall time {}", cluster.p, seconds_text(cluster.wall_s));
    }
    line + &format!(
        "\ntook {} (estimated {})",
        human(Duration::from_secs_f64(summary.elapsed_s)),
        human(Duration::from_secs_f64(summary.estimated_s))
    )
}

/// `ring`, `hypercube`, or a grid with its extents: `torus 4x4`.
fn shape_name(kind: TopologyKind, dims: &[usize]) -> String {
    match kind {
        TopologyKind::Mesh | TopologyKind::Torus | TopologyKind::Mesh3d | TopologyKind::Torus3d => {
            let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
            format!("{kind} {}", dims.join("x"))
        }
        _ => kind.to_string(),
    }
}

/// `values` without repeats, in their first order.
fn unique<T: PartialEq + Copy>(values: &[T]) -> Vec<T> {
    let mut seen = Vec::with_capacity(values.len());
    for &value in values {
        if !seen.contains(&value) {
            seen.push(value);
        }
    }
    seen
}

/// How many different values `values` holds (they come grouped).
fn dedup_count<T: PartialEq>(values: impl Iterator<Item = T>) -> usize {
    let mut values: Vec<T> = values.collect();
    values.dedup();
    values.len()
}

/// A duration to the second, as people say it: `4 min 05 s`.
fn human(duration: Duration) -> String {
    let seconds = duration.as_secs_f64().round() as u64;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {:02} s", seconds / 60, seconds % 60),
        _ => format!("{} h {:02} min", seconds / 3600, seconds % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human(Duration::from_millis(400)), "0 s");
        assert_eq!(human(Duration::from_secs(59)), "59 s");
        assert_eq!(human(Duration::from_secs(245)), "4 min 05 s");
        assert_eq!(human(Duration::from_secs(3 * 3600 + 120)), "3 h 02 min");
    }

    #[test]
    fn shapes_name_their_grid() {
        assert_eq!(shape_name(TopologyKind::Torus, &[2, 4]), "torus 2x4");
        assert_eq!(shape_name(TopologyKind::Hypercube, &[2, 2, 2]), "hypercube");
    }

    #[test]
    fn a_case_names_everything_that_tells_it_from_the_others() {
        let row = Row {
            collective: Collective::Allgather,
            algorithm: Algorithm::Mesh.to_string(),
            topology: TopologyKind::Torus,
            dims: vec![4, 4],
            p: 16,
            routing: Routing::Ct,
            size_bytes: 64 << 10,
            iterations: 10,
            measured_us: None,
            measured: None,
            model_us: None,
            ratio: None,
            error: None,
            dilation: 1.0,
            wall_s: 0.0,
        };
        assert_eq!(row.case(), "allgather (mesh) on torus 4x4 p=16 ct 64.0 KiB");
    }
}
