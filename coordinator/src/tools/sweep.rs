//! `topocomm sweep`: one collective over a range of message sizes and one or more
//! algorithms, on one cluster (a local one started once for the whole sweep, or the
//! serving coordinator `--coordinator` names). Every point is a verified run, as with
//! `topocomm run`; a failed point stops the sweep (what was measured before it is still
//! written).
//!
//! Output follows the OSU micro-benchmarks: per algorithm a block of
//! `# Size  Avg(us)  Min(us)  Max(us)  P50(us)  P90(us)  P99(us)  Iterations`, where an
//! iteration takes as long as its slowest node and the percentiles are by nearest rank
//! ([`report::nearest_rank`], as OSU's `-z`), then the cost model's time (with emulated
//! links or `--ts auto`) and bandwidths as nccl-tests defines them:
//!
//! - `algbw = size / Avg`, with `size` the bytes per node (`--sizes`), in GB/s (10^9 B/s);
//! - `busbw = algbw × factor`, the factor making busbw comparable with a link's
//!   bandwidth, one per collective in [`bus_factor`]: allreduce 2(p−1)/p; allgather,
//!   reduce-scatter, alltoall, scatter and gather p−1 (nccl-tests' (p−1)/p of their
//!   S = p · size); broadcast, reduce, scan and shift 1; ping-pong 2 (a round trip);
//!   barrier moves no data and has none.
//!
//! Also `--csv`, `--json` (`-`: standard output, instead of the table) and `--plot`
//! (time against size, log-log, see [`crate::render::plot`]). A progress bar shows on the
//! terminal (stderr) only.
//!
//! The lab's page sweeps through the same functions ([`algorithms`], [`runnable_sizes`],
//! [`measure_points`]) and shows what [`json_of`] gives.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::Args;
use serde_json::json;
use topocomm_proto::spec::{Algorithm, Collective, LinkModel, RunSpec};
use topocomm_proto::{Topology, catalogue};

use crate::control::client::RemoteArgs;
use crate::control::local::{self, Capacity, CapacityError, LocalCluster};
use crate::control::parse::{ParseError, parse_collective, parse_size};
use crate::control::request::{
    self, CollectiveArgs, DataArgs, IterationArgs, LinkArgs, Planned, Repetition, ShapeArgs,
};
use crate::control::target::Target;
use crate::control::tuning::TuningArgs;
use crate::render;
use crate::render::dilation::{Verbosity, factor_text, seconds_text};
use crate::render::output::{self, outln};
#[cfg(feature = "pictures")]
use crate::render::picture;
#[cfg(feature = "pictures")]
use crate::render::plot::{self, Series};
use crate::render::progress::Progress;
use crate::render::quantity::size_text;
use crate::render::report::{self, LinkPhysics};
use crate::render::sweep_table::{self, SweepPoint};
use crate::tools::dilation::{self, Messages, Probe};
use crate::tools::model::{self, Prediction};
use topocomm_collectives::tuning::Tuning;

/// `topocomm sweep`: the collective options of `run`, with sizes and algorithms as lists.
#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// The collective: broadcast, reduce, allgather, reduce-scatter, allreduce, scan,
    /// scatter, gather, alltoall, shift, barrier, ping-pong.
    #[arg(value_parser = parse_collective)]
    pub collective: Collective,
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Nodes of the local cluster (ignored with --coordinator, whose cluster has its own size).
    #[arg(long, short = 'n', default_value_t = 8)]
    pub nodes: usize,
    /// Algorithms: `all` (every one of the collective's), or a comma list; default the
    /// one made for the topology.
    #[arg(long, short = 'a', value_parser = parse_algorithms)]
    pub algorithm: Option<Algorithms>,
    /// Sweep an MSCCL-IR program instead of algorithms (sizes that do not cut into its
    /// chunks are left out, with the reason).
    #[arg(long, value_name = "FILE.xml", conflicts_with = "algorithm")]
    pub schedule: Option<PathBuf>,
    /// Bytes per node: `8B..8MiB` (doubling from the first) or a comma list (`1KiB,64KiB`).
    // `std::vec::Vec`, not `Vec`: clap would read `Vec<_>` as many values of u64.
    #[arg(long, default_value = "8B..1MiB", value_parser = parse_sizes)]
    pub sizes: std::vec::Vec<u64>,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub links: LinkArgs,
    #[command(flatten)]
    pub repeat: IterationArgs,
    #[command(flatten)]
    pub words: Verbosity,
    /// Also write the points as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write the sweep as JSON to FILE (`-`: to standard output, instead of the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Plot time against size, log-log, a line per algorithm, the model dashed (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Local clusters: folder for the node daemons' logs (default: a new folder for this
    /// sweep in this user's own, $XDG_RUNTIME_DIR/topocomm or /tmp/topocomm-<user>; the
    /// sweep names it).
    #[arg(long)]
    pub logs: Option<PathBuf>,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// `--algorithm` of a sweep: every algorithm of the collective, or these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Algorithms {
    All,
    Named(Vec<Algorithm>),
}

/// Parses `all` or a comma list of algorithm names.
pub fn parse_algorithms(text: &str) -> Result<Algorithms, ParseError> {
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(Algorithms::All);
    }
    text.split(',')
        .map(|name| {
            name.trim().parse::<Algorithm>().map_err(|_| ParseError::UnknownAlgorithms {
                text: name.to_owned(),
                choices: <Algorithm as strum::VariantNames>::VARIANTS.join(", "),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Algorithms::Named)
}

/// Parses `8B..8MiB` (doubling from the first while not above the last) or a comma
/// list (`1KiB,64KiB,1MiB`).
pub fn parse_sizes(text: &str) -> Result<Vec<u64>, ParseError> {
    let size = |part: &str| parse_size(part);
    if let Some((lo, hi)) = text.split_once("..") {
        let (lo, hi) = (size(lo)?, size(hi)?);
        if lo == 0 || hi < lo {
            return Err(ParseError::SizeRange { text: text.to_owned() });
        }
        let mut sizes = vec![lo];
        while let Some(next) = sizes.last().and_then(|s| s.checked_mul(2)).filter(|&s| s <= hi) {
            sizes.push(next);
        }
        return Ok(sizes);
    }
    let sizes = text.split(',').map(size).collect::<Result<Vec<_>, _>>()?;
    if sizes.is_empty() {
        return Err(ParseError::NoSizes);
    }
    Ok(sizes)
}

/// How a collective's bus bandwidth follows from its algorithm bandwidth, as
/// nccl-tests define it (its doc/PERFORMANCE.md): `busbw = algbw × factor`, the factor
/// chosen so that an algorithm that keeps the busiest node's link(s) of bandwidth B
/// busy the whole time shows busbw = B, whatever p. Each factor comes from a lower
/// bound t ≥ bytes / B on the time, `bytes` being what some node must send or receive.
///
/// topocomm's `algbw = size / time` takes `size` as `--size`, the bytes per node; for
/// the collectives whose nodes hold p blocks of `--size` (all-gather, reduce-scatter,
/// alltoall, scatter, gather) nccl-tests instead take S = p · size, so their (p−1)/p
/// on S is p − 1 on `--size`: the same busbw from a different algbw.
#[derive(Debug, Clone, Copy)]
pub struct BusFactor {
    /// The factor as tables and the README write it, in p: `2(p-1)/p`, `(p-1)`, `1`, ...
    pub formula: &'static str,
    /// The factor on p nodes, `None` where no data moves.
    on: Option<fn(f64) -> f64>,
}

impl BusFactor {
    /// The factor on `p` nodes (`None`: no data moves, no bandwidth).
    pub fn on(self, p: usize) -> Option<f64> {
        self.on.map(|factor| factor(p.max(1) as f64))
    }
}

/// Broadcast, reduce: 1 (nccl-tests: 1). All of the root's vector must leave it
/// (broadcast), or arrive at it (reduce, each element combined on the way): t ≥ size / B.
const WHOLE_VECTOR_THROUGH_THE_ROOT: BusFactor = BusFactor { formula: "1", on: Some(|_| 1.0) };

/// All-reduce: 2(p−1)/p (nccl-tests: the same, S = size). Every element is the sum of
/// p inputs held on p nodes and must end on all p: p − 1 additions and p − 1 copies,
/// each a transfer, 2(p−1) · size bytes over p nodes' links: t ≥ 2(p−1)/p · size / B.
const ALLREDUCE: BusFactor = BusFactor { formula: "2(p-1)/p", on: Some(|p| 2.0 * (p - 1.0) / p) };

/// All-gather, reduce-scatter, alltoall, scatter, gather: p − 1 (nccl-tests: (p−1)/p
/// of S = p · size, the p blocks of a node's output or input). All-gather: each node
/// must receive the p − 1 other blocks; reduce-scatter: each of the p blocks of results
/// needs p − 1 transfers, p(p−1) · size bytes over p nodes' links; alltoall: each node
/// sends p − 1 blocks away; scatter: the root sends p − 1 blocks; gather: the root
/// receives p − 1 blocks. Each: t ≥ (p−1) · size / B.
const ALL_BUT_ONE_BLOCK: BusFactor = BusFactor { formula: "(p-1)", on: Some(|p| p - 1.0) };

/// Scan: 1 (not in nccl-tests). Node i's prefix depends on all the vectors of nodes
/// before it and is a whole vector itself, so every node but node 0 must receive at
/// least size bytes (exclusive too: node 1 receives node 0's vector): t ≥ size / B,
/// the bound of broadcast and reduce.
const SCAN: BusFactor = BusFactor { formula: "1", on: Some(|_| 1.0) };

/// Shift: 1 (nccl-tests' sendrecv: 1). Every node sends its vector to one node and
/// receives one: t ≥ size / B. (A shift by a multiple of p moves nothing.)
const SHIFT: BusFactor = BusFactor { formula: "1", on: Some(|_| 1.0) };

/// Ping-pong: 2. Its time is the round trip: the vector crosses the link out and back,
/// the echo sent once the message has arrived: t ≥ 2 · size / B. busbw is then
/// size / (time / 2), the OSU latency test's one-way time.
const PING_PONG: BusFactor = BusFactor { formula: "2", on: Some(|_| 2.0) };

/// Barrier: none. No data moves; neither algbw nor busbw is shown.
const BARRIER: BusFactor = BusFactor { formula: "none", on: None };

/// The bus-bandwidth factor of every collective (see [`BusFactor`]).
pub fn bus_factor(collective: Collective) -> BusFactor {
    match collective {
        Collective::Broadcast | Collective::Reduce => WHOLE_VECTOR_THROUGH_THE_ROOT,
        Collective::Allreduce => ALLREDUCE,
        Collective::Allgather
        | Collective::ReduceScatter
        | Collective::Alltoall
        | Collective::Scatter
        | Collective::Gather => ALL_BUT_ONE_BLOCK,
        Collective::Scan => SCAN,
        Collective::Shift => SHIFT,
        Collective::PingPong => PING_PONG,
        Collective::Barrier => BARRIER,
    }
}

impl SweepPoint {
    fn of(summary: &report::RunSummary, collective: Collective) -> SweepPoint {
        let time = summary.time_us;
        let algbw = (summary.size_bytes > 0 && time.mean > 0.0).then(|| summary.size_bytes as f64 / time.mean / 1e3);
        let factor = bus_factor(collective).on(summary.nodes);
        SweepPoint {
            algorithm: summary.algorithm.clone(),
            size_bytes: summary.size_bytes,
            avg_us: time.mean,
            min_us: time.min,
            max_us: time.max,
            median_us: time.median,
            p50_us: time.p50,
            p90_us: time.p90,
            p99_us: time.p99,
            iterations: summary.iterations,
            model_us: summary.model_us,
            algbw_gbps: algbw.filter(|_| factor.is_some()),
            busbw_gbps: algbw.zip(factor).map(|(a, f)| a * f),
            dilation: summary.dilation.as_ref().map(|d| d.factor),
            wall_s: summary.dilation.as_ref().and_then(|d| d.wall_s).unwrap_or(0.0),
        }
    }
}

/// The run request of one point.
fn what(args: &SweepArgs, algorithm: Algorithm, size: u64) -> CollectiveArgs {
    CollectiveArgs {
        collective: args.collective,
        shape: args.shape.clone(),
        nodes: args.nodes,
        algorithm: Some(algorithm),
        size,
        data: args.data.clone(),
        links: args.links.clone(),
        schedule: args.schedule.clone(),
    }
}

/// The algorithms `--algorithm` names (default: the one made for the topology), each
/// checked to compute the collective.
pub fn algorithms(args: &SweepArgs) -> anyhow::Result<Vec<Algorithm>> {
    let collective = args.collective;
    let algorithms: Vec<Algorithm> = match &args.algorithm {
        None => vec![catalogue::default_algorithm(collective, args.shape.topology)],
        Some(Algorithms::All) => catalogue::algorithms(collective).map(|e| e.algorithm).collect(),
        Some(Algorithms::Named(named)) => named.clone(),
    };
    for &algorithm in &algorithms {
        catalogue::check(collective, algorithm)?;
    }
    Ok(algorithms)
}

/// The sizes of `--sizes` that can run on `args.nodes` nodes (perhaps none), and why
/// each other one cannot (not whole elements, too large, ...), a line each. On a cluster of this machine (`local`:
/// its capacity) a size's run must fit on it and its links must carry its messages.
pub fn runnable_sizes(
    args: &SweepArgs,
    algorithm: Algorithm,
    repetition: Repetition,
    local: Option<&Capacity>,
    tuning: &Tuning,
) -> anyhow::Result<(Vec<u64>, Vec<String>)> {
    let (mut sizes, mut skipped) = (Vec::new(), Vec::new());
    for &size in &args.sizes {
        let Planned { request, .. } = request::plan(&what(args, algorithm, size), repetition)?;
        let spec = &request.spec;
        let checked = match local {
            Some(capacity) => {
                let topology = Topology::new(args.shape.topology, args.nodes, args.shape.dims.as_deref())?;
                spec.validate(args.nodes)
                    .map_err(CapacityError::from)
                    .and_then(|()| capacity.check_run(spec, request.topology, args.nodes, tuning))
                    .and_then(|resolved| local::check_messages(&resolved, &topology))
            }
            None => spec.validate(usize::MAX).map_err(CapacityError::from),
        };
        match checked {
            Ok(()) => sizes.push(size),
            Err(error) => skipped.push(format!("skipping {}: {error}", size_text(size))),
        }
    }
    Ok((sizes, skipped))
}

/// Runs the sweep `args` describes.
pub async fn run(args: &SweepArgs) -> anyhow::Result<()> {
    let algorithms = algorithms(args)?;
    render::check_pictures_built("--plot", args.plot.as_deref())?;
    #[cfg(feature = "pictures")]
    if let Some(path) = &args.plot {
        picture::Format::of(path)?;
    }
    for (option, path) in [("--csv", &args.csv), ("--json", &args.json), ("--plot", &args.plot)] {
        if let Some(path) = path {
            output::check_file_writable(option, path)?;
        }
    }
    let repetition = args.repeat.repetition(false);
    // A local cluster must fit on this machine.
    let capacity = match args.remote.coordinator {
        None => {
            Topology::new(args.shape.topology, args.nodes, args.shape.dims.as_deref())?;
            let capacity = Capacity::of_this_machine();
            capacity.check_nodes(args.nodes)?;
            Some(capacity)
        }
        Some(_) => None,
    };
    let tuning = args.tuning.load()?;
    let (sizes, skipped) = runnable_sizes(args, algorithms[0], repetition, capacity.as_ref(), &tuning)?;
    for line in skipped {
        eprintln!("{line}");
    }
    anyhow::ensure!(!sizes.is_empty(), "no size of --sizes can run");
    let predict_with = request::link_models(&args.links)?.1;

    let cluster = match &args.remote.coordinator {
        Some(address) => Target::Remote { address: address.clone(), credentials: args.remote.credentials()? },
        None => {
            let logs = local::log_folder(args.logs.as_deref())?;
            let local = LocalCluster::start(args.nodes, &logs, args.remote.security.encrypt, tuning).await?;
            eprintln!(
                "local cluster: {} node processes, coordinator on {}, node logs in {}/node-*.log",
                args.nodes,
                local.address,
                local.logs.display()
            );
            Target::Local(local)
        }
    };

    let bar = Progress::new(algorithms.len() * sizes.len());
    let table = args.json.as_deref() != Some(Path::new("-"));
    let mut sweep = Sweep::default();
    let result = tokio::select! {
        result = measure(args, &cluster, &algorithms, &sizes, predict_with, repetition, &bar, table, &mut sweep) => result,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted; every node process was stopped")),
    };
    bar.finish();
    cluster.shutdown().await;
    if !sweep.points.is_empty() {
        write_outputs(args, &sweep)?;
    }
    result
}

/// What the sweep measured.
#[derive(Debug, Default)]
pub struct Sweep {
    pub points: Vec<SweepPoint>,
    /// The topology the runs reported, e.g. "hypercube of 8 nodes (d=3)".
    pub topology: Option<Topology>,
    pub links: Option<LinkPhysics>,
    /// How `--dilation auto` chose each point's K, in full words (`None`: not automatic).
    pub dilation: Option<String>,
    /// The same as the table's header says it: in one line, unless `--verbose`.
    pub dilation_line: Option<String>,
}

/// Where a sweep is, for a front end that shows it (the terminal's table and progress
/// bar, the lab's page).
pub enum Step<'a> {
    /// Point `index` of `of` goes to the cluster.
    Starting { index: usize, of: usize, algorithm: Algorithm, size: u64 },
    /// Point `index` came back verified: the point, its summary, the topology it ran on,
    /// and how `--dilation auto` chose (as the table's header says it; the sweep's JSON
    /// has it in full).
    Measured {
        index: usize,
        point: &'a SweepPoint,
        summary: &'a report::RunSummary,
        topology: &'a Topology,
        dilation_line: Option<&'a str>,
    },
}

/// What a point runs with: its request, and (under `--dilation auto`) its prediction
/// made before the run, on the topology the probe found.
struct PlannedSweepPoint {
    algorithm: Algorithm,
    size: u64,
    request: topocomm_proto::control::RunRequest,
    predicted: Option<(RunSpec, Topology, Prediction)>,
}

/// Every point's plan; under `--dilation auto` (with emulated links) the probe runs
/// first and every point gets its own K from it and the point's predicted messages.
async fn plan_points(
    args: &SweepArgs,
    cluster: &Target,
    algorithms: &[Algorithm],
    sizes: &[u64],
    repetition: Repetition,
    sweep: &mut Sweep,
) -> anyhow::Result<Vec<PlannedSweepPoint>> {
    let mut plans = Vec::with_capacity(algorithms.len() * sizes.len());
    let mut auto = None;
    for &algorithm in algorithms {
        for &size in sizes {
            let Planned { request, auto_dilation, .. } = request::plan(&what(args, algorithm, size), repetition)?;
            if auto_dilation && let Some(links) = request.spec.emulation {
                auto = Some(links);
            }
            plans.push(PlannedSweepPoint { algorithm, size, request, predicted: None });
        }
    }
    let (Some(links), Some(first)) = (auto, plans.first().map(|plan| plan.request.clone())) else { return Ok(plans) };
    let mut probe = Probe::measure(cluster, &first, links).await?;
    let topology = probe.topology().clone();
    let tuning = args.tuning.load()?;
    for plan in &mut plans {
        let spec = dilation::resolved(&plan.request.spec, &topology, &tuning);
        let prediction = model::predict(&spec, &topology, links)?;
        plan.predicted = Some((spec, topology.clone(), prediction));
    }
    let longest = plans
        .iter()
        .filter_map(|plan| plan.predicted.as_ref().and_then(|(_, _, prediction)| Messages::of(prediction)))
        .map(|messages| messages.longest)
        .max();
    probe.measure_long(cluster, &first, links, longest).await?;
    let mut chosen = Vec::new();
    for plan in &mut plans {
        let Some((spec, _, prediction)) = &plan.predicted else { continue };
        let (factor, _) = probe.choose_for(spec, &links, prediction);
        plan.request.spec.dilation = factor;
        chosen.push(factor);
    }
    let (least, most) = (chosen.iter().min(), chosen.iter().max());
    if let (Some(least), Some(most), Some(plan)) = (least, most, plans.first())
        && let Some((spec, _, prediction)) = &plan.predicted
    {
        let (_, first) = probe.choose_for(spec, &links, prediction);
        let text = |why: String| {
            format!(
                "auto, from ×{} to ×{} by point (first point: {why})",
                factor_text(least.factor()),
                factor_text(most.factor())
            )
        };
        // The JSON has it in full; the terminal in one line unless --verbose.
        sweep.dilation = Some(text(first.why(true)));
        sweep.dilation_line = Some(text(first.why(args.words.verbose)));
        eprintln!("dilation {}", sweep.dilation_line.as_deref().unwrap_or_default());
    }
    Ok(plans)
}

/// Measures every point of the sweep on `cluster` (the dilation probe first under
/// `--dilation auto`), in order, each a verified run, into `sweep`, telling `on_step`
/// where it is; the first failed point stops the sweep. Both the command line and the
/// lab's page sweep through here.
#[allow(clippy::too_many_arguments)]
pub async fn measure_points(
    args: &SweepArgs,
    cluster: &Target,
    algorithms: &[Algorithm],
    sizes: &[u64],
    predict_with: Option<LinkModel>,
    repetition: Repetition,
    sweep: &mut Sweep,
    on_step: &mut (dyn FnMut(Step<'_>) -> anyhow::Result<()> + Send),
) -> anyhow::Result<()> {
    let plans = plan_points(args, cluster, algorithms, sizes, repetition, sweep).await?;
    let of = plans.len();
    for (index, plan) in plans.into_iter().enumerate() {
        let PlannedSweepPoint { algorithm, size, request, predicted } = plan;
        on_step(Step::Starting { index, of, algorithm, size })?;
        let began = std::time::Instant::now();
        let outcome = cluster.execute(request).await.with_context(|| format!("{algorithm} at {}", size_text(size)))?;
        let wall_s = began.elapsed().as_secs_f64();
        let topology = Topology::new(outcome.topology.kind, outcome.topology.p, Some(&outcome.topology.dims))?;
        let prediction = match (predict_with, predicted) {
            (Some(_), Some((spec, on, prediction))) if spec.algorithm == outcome.spec.algorithm && on == topology => {
                Some(prediction)
            }
            (Some(links), _) => Some(model::predict(&outcome.spec, &topology, links)?),
            (None, _) => None,
        };
        let mut summary = report::summarize(&outcome, prediction.as_ref().map(Prediction::time_us).zip(predict_with))
            .map_err(|failure| anyhow!("the sweep stopped: {failure}"))?;
        if let Some(dilated) = &mut summary.dilation {
            dilated.wall_s = Some(wall_s);
        }
        sweep.points.push(SweepPoint::of(&summary, args.collective));
        sweep.links = summary.links;
        on_step(Step::Measured {
            index,
            point: sweep.points.last().expect("just pushed"),
            summary: &summary,
            topology: &topology,
            dilation_line: sweep.dilation_line.as_deref(),
        })?;
        sweep.topology = Some(topology);
    }
    Ok(())
}

/// The terminal's sweep: the table (unless the JSON goes to standard output) and the
/// progress bar. On a terminal a block's table comes when its algorithm is measured;
/// elsewhere a line comes per point (see [`sweep_table`]).
#[allow(clippy::too_many_arguments)]
async fn measure(
    args: &SweepArgs,
    cluster: &Target,
    algorithms: &[Algorithm],
    sizes: &[u64],
    predict_with: Option<LinkModel>,
    repetition: Repetition,
    bar: &Progress,
    table: bool,
    sweep: &mut Sweep,
) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let on_terminal = std::io::stdout().is_terminal();
    let model = predict_with.is_some();
    let show = |text: &str| if table { bar.suspend(|| outln!("{text}")) } else { Ok(()) };
    // On a terminal: the points of the algorithm being measured.
    let mut block: Vec<SweepPoint> = Vec::new();
    let mut on_step = |step: Step<'_>| -> anyhow::Result<()> {
        match step {
            Step::Starting { algorithm, size, .. } => bar.set_message(format!("{algorithm}, {}", size_text(size))),
            Step::Measured { index, point, summary, topology, dilation_line } => {
                if index == 0 {
                    show(&header(args, topology, summary.links.as_ref(), dilation_line))?;
                }
                if index % sizes.len() == 0 {
                    show(&format!("#\n# Algorithm: {}", summary.algorithm))?;
                    if !on_terminal {
                        show(&sweep_table::osu_columns(model, summary.dilation.is_some()))?;
                    }
                }
                if on_terminal {
                    block.push(point.clone());
                    if block.len() == sizes.len() {
                        show(&sweep_table::house_block(&std::mem::take(&mut block), model).to_string())?;
                    }
                } else {
                    show(&sweep_table::osu_row(point, model))?;
                }
                bar.inc();
            }
        }
        Ok(())
    };
    let measured =
        measure_points(args, cluster, algorithms, sizes, predict_with, repetition, sweep, &mut on_step).await;
    // A sweep stopped inside a block still shows what the block measured.
    if !block.is_empty() {
        show(&sweep_table::house_block(&block, model).to_string())?;
    }
    measured?;
    if let Some(wall) = (!sweep.points.is_empty()).then(|| sweep.points.iter().map(|p| p.wall_s).sum::<f64>()) {
        show(&format!("# wall time of the runs: {}", seconds_text(wall)))?;
    }
    Ok(())
}

fn header(args: &SweepArgs, topology: &Topology, links: Option<&LinkPhysics>, dilation: Option<&str>) -> String {
    let mut text = String::new();
    let _ =
        writeln!(text, "# topocomm sweep: {} on a {topology}, {} {}", args.collective, args.data.dtype, args.data.op);
    let links = match links {
        Some(l) if l.emulated => format!("emulated links: {}", physics(l)),
        Some(l) => format!("full-speed links; model from the calibration: {}", physics(l)),
        None => "full-speed links (no model: give --ts/--th/--tw or --ts auto)".to_owned(),
    };
    let _ = writeln!(text, "# {links}");
    if links.starts_with("emulated") {
        let how = dilation.map(str::to_owned).unwrap_or_else(|| "as --dilation gives it".to_owned());
        let _ = writeln!(text, "# dilation (the Dilation column; every time is emulated time): {how}");
    }
    let _ = writeln!(
        text,
        "# {} iterations after {} warm-up per point; an iteration takes as long as its slowest node",
        args.repeat.iterations, args.repeat.warmup
    );
    let _ = write!(
        text,
        "# Size = bytes per node; algbw = Size / Avg; busbw (nccl-tests) = algbw x {}; GB/s = 1e9 B/s",
        bus_factor(args.collective).formula
    );
    text
}

fn physics(l: &LinkPhysics) -> String {
    let routing = l.routing.to_string().to_uppercase();
    format!("{routing}, t_s {} us, t_h {} us, t_w {} ns/B", l.ts_us, l.th_us, l.tw_ns_per_byte)
}

/// The CSV of the points, a header line first.
pub fn csv(args: &SweepArgs, topology: &Topology, points: &[SweepPoint]) -> String {
    let mut text = String::from(
        "collective,algorithm,topology,dims,nodes,size_bytes,avg_us,min_us,max_us,median_us,iterations,model_us,\
         algbw_gbps,busbw_gbps,p50_us,p90_us,p99_us,dilation,wall_s\n",
    );
    let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    for p in points {
        let _ = writeln!(
            text,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            args.collective,
            p.algorithm,
            topology.kind(),
            topology.describe_dims(),
            topology.p(),
            p.size_bytes,
            p.avg_us,
            p.min_us,
            p.max_us,
            p.median_us,
            p.iterations,
            opt(p.model_us),
            opt(p.algbw_gbps),
            opt(p.busbw_gbps),
            p.p50_us,
            p.p90_us,
            p.p99_us,
            opt(p.dilation),
            p.wall_s
        );
    }
    text
}

/// The sweep as one JSON object (`sweep --json`).
pub fn json_of(args: &SweepArgs, sweep: &Sweep, topology: &Topology) -> serde_json::Value {
    crate::render::schema::versioned(json!({
        "collective": args.collective,
        "topology": topology.kind(),
        "dims": topology.dims(),
        "nodes": topology.p(),
        "dtype": args.data.dtype,
        "op": args.data.op,
        "root": args.data.root,
        "exclusive": args.data.exclusive,
        "shift": args.data.shift,
        "seed": args.data.seed,
        "encrypted": args.remote.security.encrypt,
        "warmup": args.repeat.warmup,
        "iterations": args.repeat.iterations,
        "links": sweep.links,
        "dilation": sweep.dilation,
        "bandwidth": {
            "size": "bytes per node",
            "algbw": "size / avg time, GB/s (1e9 B/s)",
            "busbw": format!("nccl-tests' bus bandwidth: algbw x {}", bus_factor(args.collective).formula),
            "busbw_factor": bus_factor(args.collective).on(topology.p()),
        },
        "points": sweep.points,
    }))
}

fn write_outputs(args: &SweepArgs, sweep: &Sweep) -> anyhow::Result<()> {
    let Some(topology) = &sweep.topology else { return Ok(()) };
    if let Some(path) = &args.csv {
        topocomm_collectives::files::write(path, csv(args, topology, &sweep.points))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.json {
        output::write_json(&json_of(args, sweep, topology), path)?;
        if path.as_os_str() != "-" {
            eprintln!("wrote {}", path.display());
        }
    }
    #[cfg(feature = "pictures")]
    if let Some(path) = &args.plot {
        let mut series: Vec<Series> = Vec::new();
        for point in &sweep.points {
            if series.last().is_none_or(|s| s.label != point.algorithm) {
                series.push(Series { label: point.algorithm.clone(), measured: Vec::new(), model: Vec::new() });
            }
            let s = series.last_mut().expect("just pushed");
            s.measured.push((point.size_bytes as f64, point.avg_us));
            if let Some(model) = point.model_us {
                s.model.push((point.size_bytes as f64, model));
            }
        }
        let links = match &sweep.links {
            Some(l) => physics(l).replace(" us", " µs"),
            None => "full-speed links".to_owned(),
        };
        let title = format!("{} on a {topology}: {links}", args.collective);
        plot::write(&title, &series, path)?;
        eprintln!("wrote the plot to {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_planned_as_run_plans_the_same_options() {
        use clap::Parser;
        use topocomm_proto::spec::{Dtype, ReduceOp};

        use crate::cli::{Cli, Command};

        let shared = "scan -t ring -a linear --root 3 --dtype i32 --op max --shift 2 --exclusive --seed 9 \
                      -i 5 --warmup 1 --timeout 2s --ts 10us";
        let parse = |line: String| Cli::try_parse_from(line.split_whitespace()).expect("parses").command;
        let Command::Run(run) = parse(format!("topocomm run {shared} --size 1KiB")) else { panic!("not a run") };
        let Command::Sweep(sweep) = parse(format!("topocomm sweep {shared} --sizes 1KiB")) else {
            panic!("not a sweep")
        };
        let ran = request::plan(&run.what, run.repeat.repetition(false)).expect("planned").request;
        let point = what(&sweep, Algorithm::Linear, 1024);
        let swept = request::plan(&point, sweep.repeat.repetition(false)).expect("planned").request;
        assert_eq!(ran, swept);
        let spec = &ran.spec;
        assert_eq!((spec.root, spec.dtype, spec.op, spec.shift, spec.seed), (3, Dtype::I32, ReduceOp::Max, 2, 9));
        assert!(spec.exclusive);
        assert_eq!((spec.iterations, spec.warmup, spec.timeout_ms), (5, 1, 2000));
        assert_eq!(spec.emulation.map(|links| links.ts_ns), Some(10_000));
    }

    #[test]
    fn size_ranges_double_and_lists_are_taken_as_given() {
        assert_eq!(parse_sizes("8B..64B").unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(parse_sizes("8B..8MiB").unwrap().len(), 21);
        assert_eq!(parse_sizes("1KiB..3KiB").unwrap(), vec![1024, 2048]);
        assert_eq!(parse_sizes("1KiB,64KiB,1MiB").unwrap(), vec![1024, 65536, 1 << 20]);
        assert_eq!(parse_sizes("4096").unwrap(), vec![4096]);
        assert!(parse_sizes("8MiB..8B").is_err());
        assert!(parse_sizes("0..8B").is_err());
        assert!(parse_sizes("8B..lots").unwrap_err().to_string().contains("not a size"));
    }

    #[test]
    fn algorithms_are_all_or_named() {
        assert_eq!(parse_algorithms("all").unwrap(), Algorithms::All);
        assert_eq!(
            parse_algorithms("ring, hypercube").unwrap(),
            Algorithms::Named(vec![Algorithm::Ring, Algorithm::Hypercube])
        );
        assert!(parse_algorithms("ring,donut").unwrap_err().to_string().contains("choose all"));
    }

    #[test]
    fn bus_factors_match_nccl_tests_and_their_derivations() {
        let on = |collective, p| bus_factor(collective).on(p);
        // nccl-tests' own factors, on their S = size.
        assert_eq!(on(Collective::Allreduce, 8), Some(1.75));
        assert_eq!(on(Collective::Allreduce, 2), Some(1.0));
        assert_eq!(on(Collective::Broadcast, 8), Some(1.0));
        assert_eq!(on(Collective::Reduce, 5), Some(1.0));
        // nccl-tests' (p-1)/p on S = p · size is p - 1 on topocomm's size.
        for collective in [
            Collective::Allgather,
            Collective::ReduceScatter,
            Collective::Alltoall,
            Collective::Scatter,
            Collective::Gather,
        ] {
            let p = 8;
            let nccl_tests = (p as f64 - 1.0) / p as f64;
            assert_eq!(on(collective, p), Some(nccl_tests * p as f64), "{collective}");
            assert_eq!(on(collective, 4), Some(3.0), "{collective}");
            assert_eq!(on(collective, 1), Some(0.0), "{collective}: nothing to move on one node");
        }
        assert_eq!(on(Collective::Scan, 8), Some(1.0));
        assert_eq!(on(Collective::Shift, 8), Some(1.0));
        assert_eq!(on(Collective::PingPong, 2), Some(2.0), "a round trip crosses the link twice");
        assert_eq!(on(Collective::Barrier, 8), None);
        assert_eq!(bus_factor(Collective::Barrier).formula, "none");
    }

    #[test]
    fn every_formula_says_what_its_factor_computes() {
        use strum::IntoEnumIterator;
        // The header's formula, evaluated by hand for p = 2..=9, is the factor used.
        for collective in Collective::iter() {
            let factor = bus_factor(collective);
            for p in 2..=9 {
                let q = p as f64;
                let by_hand = match factor.formula {
                    "2(p-1)/p" => Some(2.0 * (q - 1.0) / q),
                    "(p-1)" => Some(q - 1.0),
                    "1" => Some(1.0),
                    "2" => Some(2.0),
                    "none" => None,
                    other => panic!("{collective}: unknown formula {other}"),
                };
                assert_eq!(factor.on(p), by_hand, "{collective} on {p} nodes");
            }
        }
    }

    #[test]
    fn a_point_takes_busbw_from_its_collective() {
        // The test summary: one iteration of 1 ms.
        let point = |collective, nodes, size_bytes| {
            let mut summary = crate::render::report::tests::summary_for_tests();
            summary.nodes = nodes;
            summary.size_bytes = size_bytes;
            SweepPoint::of(&summary, collective)
        };
        // 1 MB in 1 ms is 1 GB/s of algbw.
        let allgather = point(Collective::Allgather, 8, 1_000_000);
        assert_eq!(allgather.algbw_gbps, Some(1.0));
        assert_eq!(allgather.busbw_gbps, Some(7.0));
        let barrier = point(Collective::Barrier, 8, 0);
        assert_eq!((barrier.algbw_gbps, barrier.busbw_gbps), (None, None));
    }
}
