//! `topocomm sweep`: one collective over a range of message sizes and one or more
//! algorithms, on one cluster (a local one started once for the whole sweep, or the
//! serving coordinator `--coordinator` names). Every point is a verified run, as with
//! `topocomm run`; a failed point stops the sweep (what was measured before it is still
//! written).
//!
//! Output follows the OSU micro-benchmarks: per algorithm a block of
//! `# Size  Avg(us)  Min(us)  Max(us)  Iterations`, where an iteration takes as long as
//! its slowest node, then the cost model's time (with emulated links or `--ts auto`)
//! and bandwidths as nccl-tests defines them:
//!
//! - `algbw = size / Avg`, with `size` the bytes per node (`--sizes`), in GB/s (10^9 B/s);
//! - `busbw = algbw × factor`, the factor making busbw comparable with a link's
//!   bandwidth: allreduce 2(p−1)/p; allgather, reduce-scatter, alltoall, scatter and
//!   gather (p−1)/p; broadcast, reduce, scan, shift and ping-pong 1; barrier moves no
//!   data and has none.
//!
//! Also `--csv`, `--json` (`-`: standard output, instead of the table) and `--plot`
//! (time against size, log-log, see [`crate::render::plot`]). A progress bar shows on the
//! terminal (stderr) only.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::Args;
use serde::Serialize;
use serde_json::json;
use topocomm_proto::control::{ClientRequest, ClientResponse, RunOutcome, RunRequest};
use topocomm_proto::spec::{Algorithm, Collective, Dtype, LinkModel, ReduceOp};
use topocomm_proto::{Topology, catalogue};

use crate::control::client::RemoteArgs;
use crate::control::local::{Capacity, CapacityError, LocalCluster};
use crate::control::parse::{ParseError, parse_collective, parse_dtype, parse_op, parse_size, parse_timeout};
use crate::control::request::{self, CollectiveArgs, LinkArgs, Planned, Repetition, ShapeArgs};
#[cfg(feature = "pictures")]
use crate::render::picture;
#[cfg(feature = "pictures")]
use crate::render::plot::{self, Series};
use crate::render::progress::Progress;
use crate::render::quantity::size_text;
use crate::render::report::{self, LinkPhysics};
use crate::render::{self, trace};
use crate::tools::model::{self, Prediction};

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
    /// Bytes per node: `8B..8MiB` (doubling from the first) or a comma list (`1KiB,64KiB`).
    // `std::vec::Vec`, not `Vec`: clap would read `Vec<_>` as many values of u64.
    #[arg(long, default_value = "8B..1MiB", value_parser = parse_sizes)]
    pub sizes: std::vec::Vec<u64>,
    /// The root of broadcast, reduce, scatter and gather.
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// Element type: i32, i64, f32, f64.
    #[arg(long, default_value = "f64", value_parser = parse_dtype)]
    pub dtype: Dtype,
    /// Reduction operator: sum, prod, min, max.
    #[arg(long, default_value = "sum", value_parser = parse_op)]
    pub op: ReduceOp,
    /// Shift: how many places the data moves.
    #[arg(long, default_value_t = 1)]
    pub shift: usize,
    /// Scan: exclusive prefix.
    #[arg(long)]
    pub exclusive: bool,
    /// Seed of the generated inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub links: LinkArgs,
    /// Timed iterations per point.
    #[arg(long, short = 'i', default_value_t = 20)]
    pub iterations: u32,
    /// Untimed warm-up iterations before them.
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// Deadline of every wait of one iteration (and of forming the cluster): 1ms to 24h.
    #[arg(long, default_value = "30s", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Also write the points as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write the sweep as JSON to FILE (`-`: to standard output, instead of the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Plot time against size, log-log, a line per algorithm, the model dashed (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Local clusters: folder for the node daemons' logs.
    #[arg(long)]
    pub logs: Option<PathBuf>,
    #[command(flatten)]
    pub remote: RemoteArgs,
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

/// nccl-tests' bus-bandwidth factor of `collective` on `p` nodes (`None`: no data moves).
pub fn bus_factor(collective: Collective, p: usize) -> Option<f64> {
    let p = p.max(1) as f64;
    match collective {
        Collective::Allreduce => Some(2.0 * (p - 1.0) / p),
        Collective::Allgather
        | Collective::ReduceScatter
        | Collective::Alltoall
        | Collective::Scatter
        | Collective::Gather => Some((p - 1.0) / p),
        Collective::Broadcast | Collective::Reduce | Collective::Scan | Collective::Shift | Collective::PingPong => {
            Some(1.0)
        }
        Collective::Barrier => None,
    }
}

/// The factor as the table's header writes it.
fn bus_formula(collective: Collective) -> &'static str {
    match collective {
        Collective::Allreduce => "2(p-1)/p",
        Collective::Allgather
        | Collective::ReduceScatter
        | Collective::Alltoall
        | Collective::Scatter
        | Collective::Gather => "(p-1)/p",
        Collective::Barrier => "none",
        _ => "1",
    }
}

/// One measured point of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    pub algorithm: String,
    pub size_bytes: u64,
    pub avg_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub median_us: f64,
    pub iterations: u32,
    pub model_us: Option<f64>,
    pub algbw_gbps: Option<f64>,
    pub busbw_gbps: Option<f64>,
}

impl Point {
    fn of(summary: &report::RunSummary, collective: Collective) -> Point {
        let time = summary.time_us;
        let algbw = (summary.size_bytes > 0 && time.mean > 0.0).then(|| summary.size_bytes as f64 / time.mean / 1e3);
        let factor = bus_factor(collective, summary.nodes);
        Point {
            algorithm: summary.algorithm.clone(),
            size_bytes: summary.size_bytes,
            avg_us: time.mean,
            min_us: time.min,
            max_us: time.max,
            median_us: time.median,
            iterations: summary.iterations,
            model_us: summary.model_us,
            algbw_gbps: algbw.filter(|_| factor.is_some()),
            busbw_gbps: algbw.zip(factor).map(|(a, f)| a * f),
        }
    }
}

/// Where the sweep runs.
enum Cluster {
    Local(LocalCluster),
    Remote { address: String, credentials: crate::control::client::Credentials },
}

impl Cluster {
    async fn execute(&self, request: RunRequest, patience: Duration) -> anyhow::Result<RunOutcome> {
        match self {
            Cluster::Local(local) => local.coordinator.execute(request).await.map_err(|e| anyhow!(e)),
            Cluster::Remote { address, credentials } => {
                match crate::control::client::request(address, credentials, ClientRequest::Run(request), patience)
                    .await?
                {
                    ClientResponse::RunDone(outcome) => Ok(*outcome),
                    ClientResponse::Error(error) => Err(anyhow!(error)),
                    other => bail!("unexpected answer from the coordinator: {other:?}"),
                }
            }
        }
    }

    async fn shutdown(self) {
        if let Cluster::Local(local) = self {
            local.shutdown().await;
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
        root: args.root,
        size,
        dtype: args.dtype,
        op: args.op,
        shift: args.shift,
        exclusive: args.exclusive,
        seed: args.seed,
        links: args.links.clone(),
    }
}

/// Runs the sweep `args` describes.
pub async fn run(args: &SweepArgs) -> anyhow::Result<()> {
    let collective = args.collective;
    let algorithms: Vec<Algorithm> = match &args.algorithm {
        None => vec![catalogue::default_algorithm(collective, args.shape.topology)],
        Some(Algorithms::All) => catalogue::algorithms(collective).map(|e| e.algorithm).collect(),
        Some(Algorithms::Named(named)) => named.clone(),
    };
    for &algorithm in &algorithms {
        catalogue::check(collective, algorithm)?;
    }
    render::check_pictures_built("--plot", args.plot.as_deref())?;
    #[cfg(feature = "pictures")]
    if let Some(path) = &args.plot {
        picture::Format::of(path)?;
    }
    let repetition =
        Repetition { warmup: args.warmup, iterations: args.iterations, timeout: args.timeout, dump: false };
    let remote = args.remote.coordinator.is_some();
    if !remote {
        Topology::new(args.shape.topology, args.nodes, args.shape.dims.as_deref())?;
    }
    // A local cluster must fit on this machine, and so must each size's run.
    let capacity = (!remote).then(Capacity::of_this_machine);
    if let Some(capacity) = &capacity {
        capacity.check_nodes(args.nodes)?;
    }
    // Sizes that cannot run (not whole elements, too large, ...) are left out, once, with the reason.
    let mut sizes = Vec::new();
    for &size in &args.sizes {
        let Planned { request, .. } = request::plan(&what(args, algorithms[0], size), repetition)?;
        let spec = &request.spec;
        let checked = match &capacity {
            Some(capacity) => spec
                .validate(args.nodes)
                .map_err(CapacityError::from)
                .and_then(|()| capacity.check_run(spec, args.nodes)),
            None => spec.validate(usize::MAX).map_err(CapacityError::from),
        };
        match checked {
            Ok(()) => sizes.push(size),
            Err(error) => eprintln!("skipping {}: {error}", size_text(size)),
        }
    }
    anyhow::ensure!(!sizes.is_empty(), "no size of --sizes can run");
    let predict_with = request::link_models(&args.links)?.1;

    let cluster = match &args.remote.coordinator {
        Some(address) => Cluster::Remote { address: address.clone(), credentials: args.remote.credentials()? },
        None => {
            let logs = args.logs.clone().unwrap_or_else(|| std::env::temp_dir().join("topocomm-logs"));
            let local = LocalCluster::start(args.nodes, &logs, args.remote.security.encrypt).await?;
            eprintln!(
                "local cluster: {} node processes, coordinator on {}, node logs in {}/node-*.log",
                args.nodes,
                local.address,
                local.logs.display()
            );
            Cluster::Local(local)
        }
    };

    let bar = Progress::new(algorithms.len() * sizes.len());
    let table = args.json.as_deref() != Some(Path::new("-"));
    let mut sweep = Sweep { points: Vec::new(), topology: None, links: None };
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
struct Sweep {
    points: Vec<Point>,
    /// The topology the runs reported, e.g. "hypercube of 8 nodes (d=3)".
    topology: Option<Topology>,
    links: Option<LinkPhysics>,
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    args: &SweepArgs,
    cluster: &Cluster,
    algorithms: &[Algorithm],
    sizes: &[u64],
    predict_with: Option<LinkModel>,
    repetition: Repetition,
    bar: &Progress,
    table: bool,
    sweep: &mut Sweep,
) -> anyhow::Result<()> {
    let show = |text: &str| {
        if table {
            bar.suspend(|| println!("{text}"));
        }
    };
    for (a, &algorithm) in algorithms.iter().enumerate() {
        for (s, &size) in sizes.iter().enumerate() {
            bar.set_message(format!("{algorithm}, {}", size_text(size)));
            let Planned { request, .. } = request::plan(&what(args, algorithm, size), repetition)?;
            let patience = request::client_patience(&request.spec);
            let outcome = cluster
                .execute(request, patience)
                .await
                .with_context(|| format!("{algorithm} at {}", size_text(size)))?;
            let topology = Topology::new(outcome.topology.kind, outcome.topology.p, Some(&outcome.topology.dims))?;
            let prediction = match predict_with {
                Some(links) => Some(model::predict(&outcome.spec, &topology, links)?),
                None => None,
            };
            let summary = report::summarize(&outcome, prediction.as_ref().map(Prediction::time_us).zip(predict_with))
                .map_err(|failure| anyhow!("the sweep stopped: {failure}"))?;
            if a == 0 && s == 0 {
                show(&header(args, &topology, summary.links.as_ref()));
            }
            if s == 0 {
                show(&format!("#\n# Algorithm: {}\n{}", summary.algorithm, columns(predict_with.is_some())));
            }
            let point = Point::of(&summary, args.collective);
            show(&row(&point, predict_with.is_some()));
            sweep.topology = Some(topology);
            sweep.links = summary.links;
            sweep.points.push(point);
            bar.inc();
        }
    }
    Ok(())
}

fn header(args: &SweepArgs, topology: &Topology, links: Option<&LinkPhysics>) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "# topocomm sweep: {} on a {topology}, {} {}", args.collective, args.dtype, args.op);
    let links = match links {
        Some(l) if l.emulated => format!("emulated links: {}", physics(l)),
        Some(l) => format!("full-speed links; model from the calibration: {}", physics(l)),
        None => "full-speed links (no model: give --ts/--th/--tw or --ts auto)".to_owned(),
    };
    let _ = writeln!(text, "# {links}");
    let _ = writeln!(
        text,
        "# {} iterations after {} warm-up per point; an iteration takes as long as its slowest node",
        args.iterations, args.warmup
    );
    let _ = write!(
        text,
        "# Size = bytes per node; algbw = Size / Avg; busbw = algbw x {} (nccl-tests); GB/s = 1e9 B/s",
        bus_formula(args.collective)
    );
    text
}

fn physics(l: &LinkPhysics) -> String {
    let routing = l.routing.to_string().to_uppercase();
    format!("{routing}, t_s {} us, t_h {} us, t_w {} ns/B", l.ts_us, l.th_us, l.tw_ns_per_byte)
}

fn columns(model: bool) -> String {
    let model = if model { format!(" {:>12}", "Model(us)") } else { String::new() };
    format!(
        "# {:<10} {:>12} {:>12} {:>12} {:>10}{model} {:>12} {:>12}",
        "Size", "Avg(us)", "Min(us)", "Max(us)", "Iterations", "algbw(GB/s)", "busbw(GB/s)"
    )
}

fn row(point: &Point, model: bool) -> String {
    let bw = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_else(|| "-".into());
    let model = if model {
        format!(" {:>12}", point.model_us.map(|m| format!("{m:.2}")).unwrap_or_else(|| "-".into()))
    } else {
        String::new()
    };
    format!(
        "{:<12} {:>12.2} {:>12.2} {:>12.2} {:>10}{model} {:>12} {:>12}",
        point.size_bytes,
        point.avg_us,
        point.min_us,
        point.max_us,
        point.iterations,
        bw(point.algbw_gbps),
        bw(point.busbw_gbps)
    )
}

/// The CSV of the points, a header line first.
pub fn csv(args: &SweepArgs, topology: &Topology, points: &[Point]) -> String {
    let mut text = String::from(
        "collective,algorithm,topology,dims,nodes,size_bytes,avg_us,min_us,max_us,median_us,iterations,model_us,\
         algbw_gbps,busbw_gbps\n",
    );
    let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    for p in points {
        let _ = writeln!(
            text,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
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
            opt(p.busbw_gbps)
        );
    }
    text
}

/// The sweep as one JSON object.
fn json_of(args: &SweepArgs, sweep: &Sweep, topology: &Topology) -> serde_json::Value {
    json!({
        "collective": args.collective,
        "topology": topology.kind(),
        "dims": topology.dims(),
        "nodes": topology.p(),
        "dtype": args.dtype,
        "op": args.op,
        "root": args.root,
        "warmup": args.warmup,
        "iterations": args.iterations,
        "links": sweep.links,
        "bandwidth": {
            "size": "bytes per node",
            "algbw": "size / avg time, GB/s (1e9 B/s)",
            "busbw": format!("algbw x {} (nccl-tests)", bus_formula(args.collective)),
            "busbw_factor": bus_factor(args.collective, topology.p()),
        },
        "points": sweep.points,
    })
}

fn write_outputs(args: &SweepArgs, sweep: &Sweep) -> anyhow::Result<()> {
    let Some(topology) = &sweep.topology else { return Ok(()) };
    if let Some(path) = &args.csv {
        std::fs::write(path, csv(args, topology, &sweep.points))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.json {
        trace::write_json(&json_of(args, sweep, topology), path)?;
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
    fn bus_factors_follow_nccl_tests() {
        assert_eq!(bus_factor(Collective::Allreduce, 8), Some(1.75));
        assert_eq!(bus_factor(Collective::Allgather, 8), Some(0.875));
        assert_eq!(bus_factor(Collective::Alltoall, 4), Some(0.75));
        assert_eq!(bus_factor(Collective::Broadcast, 8), Some(1.0));
        assert_eq!(bus_factor(Collective::Barrier, 8), None);
    }

    #[test]
    fn a_row_lines_up_under_its_header() {
        let point = Point {
            algorithm: "ring".into(),
            size_bytes: 65536,
            avg_us: 812.5,
            min_us: 800.0,
            max_us: 830.25,
            median_us: 810.0,
            iterations: 20,
            model_us: Some(790.0),
            algbw_gbps: Some(0.0807),
            busbw_gbps: Some(0.1412),
        };
        let (head, line) = (columns(true), row(&point, true));
        assert!(head.starts_with("# Size"));
        assert_eq!(head.len(), line.len(), "\n{head}\n{line}");
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields, ["65536", "812.50", "800.00", "830.25", "20", "790.00", "0.0807", "0.1412"]);
    }
}
