//! `topocomm simulate`: the collective algorithms, unchanged, on the simulator's virtual
//! network (`topocomm_collectives::simulator`) instead of daemons — thousands to millions of
//! nodes in seconds. One point prints what `run` prints (time, frames sent and
//! forwarded, busiest link, steps) plus what the simulation cost; several node counts,
//! topologies or algorithms print a scaling table with the textbook's closed form beside
//! each point that has one, and `--plot` draws time against p.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytesize::ByteSize;
use clap::{Args, ValueEnum};
use serde::Serialize;
use topocomm_collectives::simulator::spec::{Inputs, RunFailure, SimulatedRun};
use topocomm_collectives::simulator::{self, LiveCounts, Options, SimulationError};
use topocomm_proto::spec::{Algorithm, Collective, LinkModel, RunSpec};
use topocomm_proto::{Topology, TopologyKind, catalogue};

use crate::control::parse::{ParseError, parse_collective, parse_dims, parse_size, parse_timeout, parse_topology};
use crate::control::request::{self, DataArgs, LinkArgs, Repetition};
use crate::control::tuning::TuningArgs;
use crate::render::flow::{self, FlowOutputs};
use crate::render::links::describe_links;
use crate::render::output::outln;
use crate::render::progress::Progress;
use crate::render::quantity::size_text;
use crate::render::report::{BusiestLink, LinkPhysics, TimeStats};
use crate::render::table::HouseTable;
use crate::tools::closed_form;
use crate::tools::explain;
use crate::tools::memory::{self, Exceeded, Limits, MemoryWatch, estimate};
use crate::tools::sweep::{Algorithms, parse_algorithms};

/// `topocomm simulate`: what `run` takes, with node counts, topologies and algorithms as
/// lists.
#[derive(Debug, Clone, Args)]
pub struct SimulateArgs {
    /// The collective: broadcast, reduce, allgather, reduce-scatter, allreduce, scan,
    /// scatter, gather, alltoall, shift, barrier.
    #[arg(value_parser = parse_collective)]
    pub collective: Collective,
    /// Topologies, comma-separated: ring, mesh, torus, mesh3d, torus3d, hypercube, full.
    #[arg(long, short = 't', value_delimiter = ',', default_value = "hypercube", value_parser = parse_topology)]
    pub topology: Vec<TopologyKind>,
    /// Extents for mesh/torus (RxC) and mesh3d/torus3d (AxBxC), with one topology and
    /// one node count; default the squarest.
    #[arg(long, value_parser = parse_dims)]
    pub dims: Option<std::vec::Vec<usize>>,
    /// Node counts: `8..65536` (doubling from the first) or a comma list (`1024,4096`).
    // `std::vec::Vec`, not `Vec`: clap would read `Vec<_>` as many values of usize.
    #[arg(long, short = 'n', default_value = "8", value_parser = parse_node_counts)]
    pub nodes: std::vec::Vec<usize>,
    /// Algorithms: `all` (every one of the collective's), `auto`, or a comma list;
    /// default the one made for each topology.
    #[arg(long, short = 'a', value_parser = parse_algorithms)]
    pub algorithm: Option<Algorithms>,
    /// Bytes per node (B, KiB, MiB, GiB, or KB/MB), a whole number of elements.
    #[arg(long, short = 's', default_value = "8B", value_parser = parse_size)]
    pub size: u64,
    #[command(flatten)]
    pub data: DataArgs,
    /// The links' physics (default: t_s 100 µs, t_h 10 µs, t_w 10 ns/B, as `explain`).
    #[command(flatten)]
    pub links: LinkArgs,
    /// What messages carry: `data` (the reference's inputs; every node's result is
    /// verified), `lengths` (lengths only, nothing verified: for sizes whose data would
    /// not fit in memory), or `auto` (data when it fits).
    #[arg(long, value_enum, default_value_t = PayloadMode::Auto)]
    pub payload: PayloadMode,
    /// Print JSON: one object with `run`'s keys for one point, else `{"points": [...]}`.
    #[arg(long)]
    pub json: bool,
    /// Plot time against p, log-log, a line per topology and algorithm, the closed form
    /// dashed (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Write the message flow as a Chrome trace (one point of at most 1,024 nodes).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Draw the message flow as a space-time diagram, .svg or .png (one point of at most
    /// 1,024 nodes).
    #[arg(long, value_name = "FILE")]
    pub diagram: Option<PathBuf>,
    /// With --diagram: place the messages by step number instead of time.
    #[arg(long, requires = "diagram")]
    pub steps: bool,
    /// Simulate an MSCCL-IR program (the XML MSCCLang and msccl-tools write) instead of an
    /// algorithm: its `coll` must be the collective given and its `ngpus` the node count.
    #[arg(long, value_name = "FILE.xml", conflicts_with_all = ["algorithm", "goal"])]
    pub schedule: Option<PathBuf>,
    /// Simulate a GOAL schedule (LogGOPSim's text) instead of the collective: sizes only,
    /// nothing can be verified; its num_ranks must be the node count.
    #[arg(long, value_name = "FILE", conflicts_with = "algorithm")]
    pub goal: Option<PathBuf>,
    /// Wall time one simulation may take before it is given up (1ms to 24h).
    #[arg(long, default_value = "10m", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Stop a simulation once this process holds more than this much memory (B, KiB,
    /// MiB, GiB; default: what it held when the simulation began plus nine tenths of what
    /// the machine then had available), with an error naming the figures, instead of
    /// running the machine out of memory where the estimate fell short.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_limit: Option<u64>,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// What the simulated messages carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PayloadMode {
    /// Data when the estimate fits in the memory available, else lengths only.
    Auto,
    /// The reference's data; every result verified.
    Data,
    /// Lengths only; nothing verified.
    Lengths,
}

/// The most nodes `--trace` and `--diagram` draw.
pub(crate) const MOST_NODES_DRAWN: usize = 1024;

/// Parses `8..65536` (doubling from the first while not above the last) or a comma list.
pub fn parse_node_counts(text: &str) -> Result<Vec<usize>, ParseError> {
    let count = |part: &str| -> Result<usize, ParseError> {
        part.trim().parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| ParseError::NodeCounts { text: text.into() })
    };
    if let Some((lo, hi)) = text.split_once("..") {
        let (lo, hi) = (count(lo)?, count(hi)?);
        if hi < lo {
            return Err(ParseError::NodeCounts { text: text.into() });
        }
        return Ok(std::iter::successors(Some(lo), |&n| n.checked_mul(2).filter(|&next| next <= hi)).collect());
    }
    text.split(',').map(count).collect()
}

/// One simulated run (a topology, a node count, an algorithm), summarised with `run`'s
/// keys where they mean the same (as [`crate::render::report::RunSummary`] does a run).
#[derive(Debug, Clone, Serialize)]
pub struct SimulationSummary {
    pub collective: String,
    pub algorithm: String,
    pub topology: String,
    pub dims: Vec<usize>,
    pub nodes: usize,
    pub size_bytes: u64,
    pub root: usize,
    pub dtype: String,
    pub op: String,
    /// Whether every node's result was verified against the reference (false with
    /// lengths only).
    pub verified: bool,
    /// What the messages carried: "data" or "lengths".
    pub payload: &'static str,
    /// The simulated time (one deterministic sample: every statistic is the same).
    pub time_us: TimeStats,
    pub frames_sent: u64,
    pub frames_forwarded: u64,
    pub busiest_link: Option<BusiestLink>,
    pub steps: u16,
    pub links: LinkPhysics,
    /// The textbook's closed form for this point, where one applies.
    pub closed_form_us: Option<f64>,
    pub closed_form: Option<&'static str>,
    pub simulation: Cost,
}

/// What a simulation took, in the simulator's own terms (deterministic: the wall time and
/// rate go to standard error, so that standard output is the same for the same command).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Cost {
    /// Link crossings of frames (a message over h links, in k packets, makes h k).
    pub frame_hops: u64,
    /// Times a node's future was polled.
    pub polls: u64,
    /// The memory the simulation was estimated to need.
    pub memory_estimate_bytes: u64,
}

/// One point to simulate.
pub(crate) struct Planned {
    pub(crate) topology: Topology,
    pub(crate) spec: RunSpec,
    pub(crate) inputs: Inputs,
    pub(crate) estimate: u64,
}

/// Why `simulate` refuses `--dilation`.
pub(crate) const SIMULATED_TIME_UNDILATED: &str = "--dilation stretches emulated links on the wall clock; simulate runs on no clock (its times are emulated time already), so there is nothing to dilate";

/// Runs `topocomm simulate`.
pub fn run(args: &SimulateArgs) -> anyhow::Result<()> {
    crate::render::check_pictures_built("--plot", args.plot.as_deref())?;
    crate::render::check_pictures_built("--diagram", args.diagram.as_deref())?;
    for (option, path) in [("--plot", &args.plot), ("--trace", &args.trace), ("--diagram", &args.diagram)] {
        if let Some(path) = path {
            crate::render::output::check_file_writable(option, path)?;
        }
    }
    anyhow::ensure!(args.links.dilation.is_none(), SIMULATED_TIME_UNDILATED);
    let (_, predict_with) = request::link_models(&args.links)?;
    let (links, source) = explain::physics(predict_with, &args.links)?;
    let planned = plan(args)?;
    let drawn = args.trace.is_some() || args.diagram.is_some();
    if drawn {
        anyhow::ensure!(
            planned.len() == 1 && planned[0].topology.p() <= MOST_NODES_DRAWN,
            "--trace and --diagram draw one point of at most {MOST_NODES_DRAWN} nodes: give one topology, one node \
             count and one algorithm"
        );
    }
    let mut points = Vec::new();
    let mut failures = Vec::new();
    let mut last_events = Vec::new();
    // On a terminal: points done, and how far the one running has come.
    let bar = Progress::new(planned.len());
    for point in &planned {
        let what = format!(
            "{} ({}) on a {}, {} per node",
            point.spec.collective,
            point.spec.what_runs(),
            point.topology,
            size_text(point.spec.size_bytes)
        );
        let live = Arc::new(LiveCounts::default());
        let options = Options {
            run: 1,
            record: drawn,
            wall_limit: Some(args.timeout),
            live: Some(live.clone()),
            ..Options::default()
        };
        let began = Instant::now();
        let p = point.topology.p();
        let running = format!("{} of {p} nodes ({})", point.topology.kind(), point.spec.what_runs());
        let so_far = || {
            format!(
                "{running}: {} done, {} messages, {:.1} µs simulated",
                live.nodes_finished.load(Ordering::Relaxed),
                live.messages.load(Ordering::Relaxed),
                live.virtual_ns.load(Ordering::Relaxed) as f64 / 1e3
            )
        };
        bar.set_message(so_far());
        let limit = args.memory_limit.or_else(memory::default_memory_limit);
        let watched = MemoryWatch::default();
        let simulated = watched.during(&live, Limits { memory: limit, messages: None }, || {
            bar.watching(so_far, || simulator::spec::run(&point.spec, &point.topology, links, point.inputs, options))
        });
        bar.inc();
        match simulated {
            Ok(simulated) => {
                let wall = began.elapsed().as_secs_f64();
                let peak = topocomm_node::daemon::allocator::peak_resident_bytes().map_or_else(String::new, |bytes| {
                    format!(", peak memory so far {}", ByteSize(bytes).display().iec())
                });
                bar.suspend(|| {
                    eprintln!(
                        "simulated {what}: {} messages in {wall:.3} s of wall time ({:.0} messages/s){peak}",
                        simulated.totals.messages,
                        simulated.totals.messages as f64 / wall.max(1e-9)
                    )
                });
                points.push(describe(point, &simulated, &links));
                last_events = simulated.events;
            }
            Err(error) => match (&error, watched.exceeded(), limit) {
                (
                    RunFailure::Simulation(SimulationError::Stopped { at_ns }),
                    Some(Exceeded::Memory(resident)),
                    Some(limit),
                ) => failures.push(format!(
                    "{what}: stopped at {:.3} µs of virtual time, the process holding {} of memory, over the limit of \
                     {} (--memory-limit; the estimate before the run was {}): fewer nodes, a smaller size or \
                     --payload lengths need less",
                    *at_ns as f64 / 1e3,
                    ByteSize(resident).display().iec(),
                    ByteSize(limit).display().iec(),
                    ByteSize(point.estimate).display().iec()
                )),
                _ => failures.push(format!("{what}: {error}")),
            },
        }
    }
    bar.finish();
    if args.json {
        let value = match points.as_slice() {
            [only] if failures.is_empty() => serde_json::to_value(only)?,
            _ => serde_json::json!({ "points": points, "failures": failures }),
        };
        outln!("{}", serde_json::to_string_pretty(&crate::render::schema::versioned(value))?)?;
    } else if !points.is_empty() {
        outln!("{}", headline(args, &links, source))?;
        outln!("{}", table(&points))?;
        for note in notes(&points) {
            outln!("{note}")?;
        }
    }
    if drawn && let ([point], [planned]) = (points.as_slice(), planned.as_slice()) {
        let outputs =
            FlowOutputs { trace: args.trace.as_deref(), diagram: args.diagram.as_deref(), by_steps: args.steps };
        let source = if point.verified { "simulated (verified)" } else { "simulated (lengths only)" };
        flow::write_flow(outputs, &last_events, &planned.spec, &planned.topology, &describe_links(&links), source)?;
    }
    #[cfg(feature = "pictures")]
    if let Some(path) = &args.plot {
        plot(args, &points, path)?;
    }
    if !failures.is_empty() {
        bail!("{} of {} simulations failed:\n  {}", failures.len(), planned.len(), failures.join("\n  "));
    }
    Ok(())
}

/// Every point to simulate, in order (topology, algorithm, p), each checked and with its
/// memory estimated; a point whose data would not fit runs with lengths only when the
/// payload is `auto`, and is refused otherwise.
pub(crate) fn plan(args: &SimulateArgs) -> anyhow::Result<Vec<Planned>> {
    anyhow::ensure!(
        args.dims.is_none() || (args.topology.len() == 1 && args.nodes.len() == 1),
        "--dims gives the shape of one topology: give one --topology and one --nodes with it"
    );
    let available = topocomm_node::daemon::allocator::available_bytes();
    let schedule = match (&args.schedule, &args.goal) {
        (Some(path), _) => Some(Box::new(request::read_schedule(path, args.collective)?)),
        (None, Some(path)) => {
            Some(Box::new(topocomm_collectives::algorithms::schedule::read_goal(path).map_err(anyhow::Error::msg)?))
        }
        (None, None) => None,
    };
    if let Some(schedule) = &schedule {
        eprintln!("{}", topocomm_collectives::algorithms::schedule::summary(schedule));
    }
    let tuning = args.tuning.load()?;
    let mut planned = Vec::new();
    for &kind in &args.topology {
        let algorithms: Vec<Algorithm> = match &args.algorithm {
            None => vec![catalogue::default_algorithm(args.collective, kind)],
            Some(Algorithms::All) => catalogue::algorithms(args.collective).map(|entry| entry.algorithm).collect(),
            Some(Algorithms::Named(named)) => named.clone(),
        };
        for &algorithm in &algorithms {
            catalogue::check(args.collective, algorithm)?;
            for &p in &args.nodes {
                let topology =
                    Topology::new(kind, p, args.dims.as_deref()).with_context(|| format!("{kind} of {p} nodes"))?;
                let resolved = tuning.resolve(args.collective, algorithm, kind, p, args.size);
                let once = Repetition { warmup: 0, iterations: 1, timeout: args.timeout, dump: false };
                let spec = RunSpec {
                    run: 1,
                    schedule: schedule.clone(),
                    ..request::run_spec(args.collective, resolved, args.size, &args.data, once)?
                };
                spec.validate(p).with_context(|| format!("{} on a {topology}", args.collective))?;
                let (inputs, estimate) = fit(&spec, &topology, args.payload, available)?;
                planned.push(Planned { topology, spec, inputs, estimate });
            }
        }
    }
    Ok(planned)
}

/// The inputs a point runs with under `mode`, and the memory it is estimated to need;
/// refuses, with the figures, what would not fit in `available`.
fn fit(
    spec: &RunSpec,
    topology: &Topology,
    mode: PayloadMode,
    available: Option<u64>,
) -> anyhow::Result<(Inputs, u64)> {
    let (with_data, lengths_only) = estimate(spec, topology);
    let fits = |bytes: u64| available.is_none_or(|available| bytes <= available);
    let have =
        available.map_or_else(|| "an unknown amount".to_owned(), |bytes| ByteSize(bytes).display().iec().to_string());
    let what = format!("{} on a {topology}, {} per node", spec.collective, size_text(spec.size_bytes));
    match mode {
        PayloadMode::Data | PayloadMode::Auto if fits(with_data) => Ok((Inputs::Reference, with_data)),
        PayloadMode::Data => bail!(
            "simulating {what} with data needs about {} and this machine has {have} available; --payload lengths \
             needs about {} (nothing is verified then)",
            ByteSize(with_data).display().iec(),
            ByteSize(lengths_only).display().iec()
        ),
        PayloadMode::Auto | PayloadMode::Lengths if fits(lengths_only) => Ok((Inputs::Lengths, lengths_only)),
        PayloadMode::Auto | PayloadMode::Lengths => bail!(
            "simulating {what} needs about {} even with lengths only, and this machine has {have} available",
            ByteSize(lengths_only).display().iec()
        ),
    }
}

pub(crate) fn describe(point: &Planned, simulated: &SimulatedRun, links: &LinkModel) -> SimulationSummary {
    let spec = &point.spec;
    let time_us = simulated.time_ns as f64 / 1e3;
    let closed_form_ns = match spec.schedule {
        None => closed_form::time_ns(spec.collective, spec.algorithm, &point.topology, spec.size_bytes, links),
        Some(_) => None,
    };
    SimulationSummary {
        collective: spec.collective.to_string(),
        algorithm: spec.what_runs(),
        topology: point.topology.kind().to_string(),
        dims: point.topology.dims().to_vec(),
        nodes: point.topology.p(),
        size_bytes: spec.size_bytes,
        root: spec.root,
        dtype: spec.dtype.to_string(),
        op: spec.op.to_string(),
        verified: simulated.verified,
        payload: if point.inputs == Inputs::Lengths { "lengths" } else { "data" },
        time_us: TimeStats::of(&[time_us]),
        frames_sent: simulated.totals.messages,
        frames_forwarded: simulated.totals.forwarded,
        busiest_link: simulated.busiest_link.map(|((from, to), bytes)| BusiestLink { from, to, bytes }),
        steps: simulated.steps,
        links: LinkPhysics::of(links, false),
        closed_form_us: closed_form_ns.map(|ns| ns as f64 / 1e3),
        closed_form: closed_form_ns.and(closed_form::formula(
            spec.collective,
            spec.algorithm,
            point.topology.kind(),
            links.routing,
        )),
        simulation: Cost {
            frame_hops: simulated.totals.frame_hops,
            polls: simulated.polls,
            memory_estimate_bytes: point.estimate,
        },
    }
}

fn headline(args: &SimulateArgs, links: &LinkModel, source: explain::PhysicsSource) -> String {
    let data = if args.collective.reduces() {
        format!("{} per node, {} {}", size_text(args.size), args.data.dtype, args.data.op)
    } else {
        format!("{} per node, {}", size_text(args.size), args.data.dtype)
    };
    format!("{} simulated: {data}; links {} ({})", args.collective, describe_links(links), source.name())
}

fn table(points: &[SimulationSummary]) -> HouseTable {
    let mut table = HouseTable::new([
        "topology",
        "p",
        "algorithm",
        "time µs",
        "closed form µs",
        "steps",
        "frames sent",
        "forwarded",
        "busiest link",
        "verified",
    ]);
    for point in points {
        table.row([
            shape(point),
            point.nodes.to_string(),
            point.algorithm.clone(),
            format!("{:.3}", point.time_us.median),
            point.closed_form_us.map_or_else(|| "-".to_owned(), |us| format!("{us:.3}")),
            point.steps.to_string(),
            point.frames_sent.to_string(),
            point.frames_forwarded.to_string(),
            point
                .busiest_link
                .map_or_else(|| "-".to_owned(), |link| format!("{}→{} {}", link.from, link.to, size_text(link.bytes))),
            if point.verified { "yes".to_owned() } else { "no (lengths only)".to_owned() },
        ]);
    }
    table
}

/// The topology of a point as the table shows it: "torus 4x4", "hypercube".
fn shape(point: &SimulationSummary) -> String {
    match point.topology.as_str() {
        "mesh" | "torus" | "mesh3d" | "torus3d" => {
            let dims: Vec<String> = point.dims.iter().map(ToString::to_string).collect();
            format!("{} {}", point.topology, dims.join("x"))
        }
        kind => kind.to_owned(),
    }
}

/// The closed forms the table used, once each, and a word on what was not verified.
fn notes(points: &[SimulationSummary]) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    for point in points {
        if let Some(formula) = point.closed_form {
            let note = format!("closed form of {} on a {}: {formula}", point.algorithm, point.topology);
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
    if points.iter().any(|point| !point.verified) {
        notes.push("lengths only: the messages carried no data, and no result was verified".to_owned());
    }
    notes
}

#[cfg(feature = "pictures")]
fn plot(args: &SimulateArgs, points: &[SimulationSummary], path: &std::path::Path) -> anyhow::Result<()> {
    use crate::render::plot::{Series, XAxis};
    let mut series: Vec<Series> = Vec::new();
    for point in points {
        let label = format!("{} ({})", point.topology, point.algorithm);
        let index = match series.iter().position(|s| s.label == label) {
            Some(index) => index,
            None => {
                series.push(Series { label, measured: Vec::new(), model: Vec::new() });
                series.len() - 1
            }
        };
        let p = point.nodes as f64;
        series[index].measured.push((p, point.time_us.median));
        if let Some(us) = point.closed_form_us {
            series[index].model.push((p, us));
        }
    }
    let title = format!("{}, {} per node, simulated", args.collective, size_text(args.size));
    crate::render::plot::write_with(&title, &series, XAxis::Nodes, path)?;
    eprintln!("wrote the plot to {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn spec(collective: Collective, algorithm: Algorithm) -> RunSpec {
        RunSpec { size_bytes: 8, ..RunSpec::new(collective, algorithm) }
    }

    fn hypercube(p: usize) -> Topology {
        Topology::new(TopologyKind::Hypercube, p, None).expect("a power of two")
    }

    /// The runs whose state grows with p on every node (an all-to-all's blocks, the ring
    /// all-gather's) are refused before they start where they would not fit: at 16,384
    /// nodes the all-to-all took more than this machine's 23 GiB and was killed.
    #[test]
    fn an_all_to_all_too_big_for_the_memory_is_refused_before_it_starts() {
        let refused = fit(
            &spec(Collective::Alltoall, Algorithm::Pairwise),
            &hypercube(16384),
            PayloadMode::Lengths,
            Some(23 * GIB),
        )
        .expect_err("64 GiB of blocks");
        assert!(refused.to_string().contains("even with lengths only"), "{refused}");
        let ring = Topology::new(TopologyKind::Ring, 65536, None).expect("a ring");
        assert!(fit(&spec(Collective::Allgather, Algorithm::Ring), &ring, PayloadMode::Auto, Some(23 * GIB)).is_err());
        let (_, estimate) = fit(
            &spec(Collective::Alltoall, Algorithm::Pairwise),
            &hypercube(2048),
            PayloadMode::Lengths,
            Some(23 * GIB),
        )
        .expect("2,048 nodes fit");
        // 2,048 nodes took 621 MiB (lengths only): the estimate is above it.
        assert!(estimate > 621 << 20, "{estimate}");
    }

    /// A rooted tree's nodes hold no future while they wait, so the 2^24-node broadcast
    /// (2.3 GiB resident, data verified) is not refused on a machine of 23 GiB.
    #[test]
    fn a_broadcast_of_sixteen_million_nodes_fits_where_it_runs() {
        let big = hypercube(1 << 24);
        let (inputs, estimate) =
            fit(&spec(Collective::Broadcast, Algorithm::Hypercube), &big, PayloadMode::Auto, Some(23 * GIB))
                .expect("fits");
        assert_eq!(inputs, Inputs::Reference);
        assert!(estimate > 5 * GIB / 2 && estimate < 23 * GIB, "{estimate}");
        // The composite broadcast holds every node's future: the larger estimate.
        let composite = spec(Collective::Broadcast, Algorithm::ScatterAllgather);
        assert!(fit(&composite, &big, PayloadMode::Lengths, Some(23 * GIB)).is_err());
    }
}
