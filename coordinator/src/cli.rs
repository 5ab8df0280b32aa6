//! The `topocomm` command line: every subcommand and option a user meets.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use bytesize::ByteSize;
use clap::{Args, Parser, Subcommand};
use topocomm_node::daemon::NodeArgs;
use topocomm_node::security::SecurityArgs;
use topocomm_proto::TopologyKind;
use topocomm_proto::auth::Key;
use topocomm_proto::spec::{Algorithm, Collective, Dtype, MAX_TIMEOUT, ReduceOp, Routing};

use crate::control::client::Credentials;

/// Run, measure and understand collective communication on interconnection networks.
#[derive(Debug, Parser)]
#[command(name = "topocomm", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a collective: on the coordinator that --coordinator names, or on a local
    /// cluster of --nodes daemons started for this run.
    Run(RunArgs),
    /// Serve as the coordinator of a long-lived cluster that nodes register with.
    Serve(ServeArgs),
    /// Print a topology's ids, neighbours, edges and diameter (nothing is run).
    Topology(TopologyArgs),
    /// Print every collective's algorithms: the topology each is made for, the node
    /// counts it serves, its steps and its source.
    List(ListArgs),
    /// Print an algorithm's schedule step by step (who sends how many bytes to whom,
    /// over which hops) and the cost model's time, without running anything.
    Explain(ExplainArgs),
    /// Fit the real links' t_s, t_h and t_w by ping-pong over one and several hops
    /// (least squares); `--ts auto` then predicts raw runs with them.
    Calibrate(CalibrateArgs),
    /// Measure emulated runs against the cost model: the table of measured / predicted.
    BenchModel(BenchModelArgs),
    /// Run a collective over a range of sizes (and algorithms) on one cluster: OSU-style
    /// columns, algbw/busbw, the model's prediction, CSV, JSON and a plot.
    Sweep(SweepArgs),
    /// Ask a serving coordinator how the cluster stands.
    Status(StatusArgs),
    /// Run a node daemon (the same daemon as `topocomm-node`; local clusters use it).
    #[command(hide = true)]
    Node(NodeArgs),
}

/// Where a serving coordinator is and the token it wants.
#[derive(Debug, Clone, Args)]
pub struct RemoteArgs {
    /// A serving coordinator, HOST:PORT. Without it, `run` starts a local cluster.
    #[arg(long, env = "TOPOCOMM_COORDINATOR")]
    pub coordinator: Option<String>,
    /// The token (local clusters make a random one) and the mode.
    #[command(flatten)]
    pub security: SecurityArgs,
}

impl RemoteArgs {
    /// What this client proves to a serving coordinator.
    pub fn credentials(&self) -> anyhow::Result<Credentials> {
        let token = self.security.token()?.context(
            "a serving coordinator needs the cluster token: --token-file FILE or TOPOCOMM_TOKEN (or --token)",
        )?;
        Ok(Credentials { key: Key::from_token(&token), encrypted: self.security.encrypt })
    }
}

/// The shape to wire.
#[derive(Debug, Clone, Args)]
pub struct ShapeArgs {
    /// Topology: ring, mesh, torus, mesh3d, torus3d, hypercube, full.
    #[arg(long, short = 't', default_value = "hypercube", value_parser = parse_topology)]
    pub topology: TopologyKind,
    /// Extents for mesh/torus (RxC) and mesh3d/torus3d (AxBxC); default the squarest.
    // `std::vec::Vec`, not `Vec`: clap would read `Option<Vec<_>>` as many values of usize.
    #[arg(long, value_parser = parse_dims)]
    pub dims: Option<std::vec::Vec<usize>>,
}

/// What to run: the collective, its algorithm, the shape and size, the data and the links.
#[derive(Debug, Clone, Args)]
pub struct CollectiveArgs {
    /// The collective: broadcast, reduce, allgather, reduce-scatter, allreduce, scan,
    /// scatter, gather, alltoall, shift, barrier (`topocomm list` shows their algorithms).
    #[arg(value_parser = parse_collective)]
    pub collective: Collective,
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Nodes of the local cluster (ignored with --coordinator, whose cluster has its own size).
    #[arg(long, short = 'n', default_value_t = 8)]
    pub nodes: usize,
    /// Algorithm (`topocomm list` shows each collective's); default the one made for
    /// the topology; `auto` picks by size and p.
    #[arg(long, short = 'a', value_parser = parse_algorithm)]
    pub algorithm: Option<Algorithm>,
    /// The root of broadcast, reduce, scatter and gather.
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// Bytes per node (B, KiB, MiB, GiB, or KB/MB), a whole number of elements.
    #[arg(long, short = 's', default_value = "64KiB", value_parser = parse_size)]
    pub size: u64,
    /// Element type: i32, i64, f32, f64.
    #[arg(long, default_value = "f64", value_parser = parse_dtype)]
    pub dtype: Dtype,
    /// Reduction operator: sum, prod, min, max.
    #[arg(long, default_value = "sum", value_parser = parse_op)]
    pub op: ReduceOp,
    /// Shift: how many places the data moves (node i's vector ends on node i + Q mod p).
    #[arg(long, default_value_t = 1)]
    pub shift: usize,
    /// Scan: exclusive prefix (node i reduces nodes 0..i; node 0 ends with nothing).
    #[arg(long)]
    pub exclusive: bool,
    /// Seed of the generated inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub links: LinkArgs,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub what: CollectiveArgs,
    /// Timed iterations.
    #[arg(long, short = 'i', default_value_t = 20)]
    pub iterations: u32,
    /// Untimed warm-up iterations before them.
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// Deadline of every wait of one iteration (and of forming the cluster): 1ms to 24h.
    #[arg(long, default_value = "30s", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write each node's input and output of the last iteration and run.json here.
    #[arg(long)]
    pub dump: Option<PathBuf>,
    /// Local clusters: folder for the node daemons' logs (default: a topocomm-logs
    /// folder in the system's temporary directory).
    #[arg(long)]
    pub logs: Option<PathBuf>,
    /// Write the message flow of the last iteration as a Chrome trace (JSON: open it in
    /// ui.perfetto.dev or chrome://tracing): a track per node, flow arrows per message.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Draw the message flow of the last iteration as a space-time diagram (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub diagram: Option<PathBuf>,
    /// With --diagram: place the messages by step number instead of time (the textbook figure).
    #[arg(long, requires = "diagram")]
    pub steps: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

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
    #[arg(long, short = 'a', value_parser = crate::tools::sweep::parse_algorithms)]
    pub algorithm: Option<crate::tools::sweep::Algorithms>,
    /// Bytes per node: `8B..8MiB` (doubling from the first) or a comma list (`1KiB,64KiB`).
    // `std::vec::Vec`, not `Vec`: clap would read `Vec<_>` as many values of u64.
    #[arg(long, default_value = "8B..1MiB", value_parser = crate::tools::sweep::parse_sizes)]
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

#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub what: CollectiveArgs,
    /// Print JSON (the schedule's messages and the model's time) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// Nodes of the local ring the ping-pongs run on (the multi-hop one crosses p/2 links).
    #[arg(long, short = 'n', default_value_t = 8)]
    pub nodes: usize,
    /// Message sizes to ping-pong, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8B,1KiB,16KiB,64KiB,256KiB,1MiB", value_parser = parse_size)]
    pub sizes: Vec<u64>,
    /// Round trips per size and route.
    #[arg(long, short = 'i', default_value_t = 50)]
    pub iterations: u32,
    /// Untimed round trips before them.
    #[arg(long, default_value_t = 5)]
    pub warmup: u32,
    /// Folder for the node daemons' logs (default: topocomm-logs/calibrate in the
    /// system's temporary directory).
    #[arg(long)]
    pub logs: Option<PathBuf>,
    /// Do not keep the fit for `--ts auto`.
    #[arg(long)]
    pub no_save: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct BenchModelArgs {
    /// Node counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8,16")]
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
    /// Timed iterations per run.
    #[arg(long, short = 'i', default_value_t = 10)]
    pub iterations: u32,
    /// Untimed iterations before them.
    #[arg(long, default_value_t = 2)]
    pub warmup: u32,
    /// Folder for the node daemons' logs (default: topocomm-logs/bench-model-<p> in the
    /// system's temporary directory).
    #[arg(long)]
    pub logs: Option<PathBuf>,
    /// Print JSON lines instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Emulated link physics (none of them: the links run at full speed).
#[derive(Debug, Clone, Args)]
pub struct LinkArgs {
    /// Start-up time t_s, paid once per message when its source sends it (e.g. 200us);
    /// `auto`: no emulation, but predict with the t_s, t_h, t_w `topocomm calibrate` fitted.
    #[arg(long, value_parser = parse_time_or_auto)]
    pub ts: Option<Emulated>,
    /// Per-hop time t_h (e.g. 20us).
    #[arg(long, value_parser = parse_time)]
    pub th: Option<u64>,
    /// Per-byte time t_w (e.g. 10ns, 0.5ns).
    #[arg(long, value_parser = parse_time)]
    pub tw: Option<u64>,
    /// Routing of emulated links: sf (store-and-forward) or ct (cut-through packets).
    #[arg(long, default_value = "sf", value_parser = parse_routing)]
    pub routing: Routing,
    /// Cut-through packet size: messages then travel as real packets that every hop passes
    /// on as they arrive. Without it, cut-through is emulated in the limit of small packets
    /// (a hop passes a message on t_h after its tail arrived), free of per-packet overhead.
    #[arg(long, value_parser = parse_size)]
    pub packet: Option<u64>,
}

/// `--ts`: a time in picoseconds, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emulated {
    Picos(u64),
    Auto,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// How many nodes form the cluster.
    #[arg(long, short = 'n', default_value_t = 8)]
    pub nodes: usize,
    /// Address to accept nodes and clients on.
    #[arg(long, default_value = "0.0.0.0:7700", env = "TOPOCOMM_LISTEN")]
    pub listen: String,
    /// The cluster token nodes and clients must prove (default: a random one, written
    /// to --write-token FILE or else printed), and the mode.
    #[command(flatten)]
    pub security: SecurityArgs,
    /// Write the random token made for this cluster to FILE (mode 0600) instead of
    /// printing it.
    #[arg(long, value_name = "FILE")]
    pub write_token: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct TopologyArgs {
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Number of nodes.
    #[arg(long, short = 'n', default_value_t = 8)]
    pub nodes: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also draw the wiring to FILE (.svg, or .png by the extension).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Only this collective's algorithms.
    #[arg(value_parser = parse_collective)]
    pub collective: Option<Collective>,
    /// Print a Markdown table (as in the README).
    #[arg(long)]
    pub markdown: bool,
}

#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// Exit with success only when every expected node is registered and connected
    /// (for health checks: `topocomm status --ready`).
    #[arg(long)]
    pub ready: bool,
    /// Print one JSON object (expected, connected, ready, nodes, topology) instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_named<T: std::str::FromStr + strum::VariantNames>(what: &str, text: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("unknown {what} {text:?}; choose one of: {}", T::VARIANTS.join(", ")))
}

fn parse_topology(text: &str) -> Result<TopologyKind, String> {
    parse_named("topology", text)
}

fn parse_collective(text: &str) -> Result<Collective, String> {
    parse_named("collective", text)
}

fn parse_algorithm(text: &str) -> Result<Algorithm, String> {
    parse_named("algorithm", text)
}

fn parse_routing(text: &str) -> Result<Routing, String> {
    parse_named("routing", text)
}

/// Parses a time such as `200us`, `20µs`, `10ns`, `0.5ns`, `1.5ms` into picoseconds.
pub fn parse_time(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "ps" => 1.0,
        "ns" => 1e3,
        "us" | "µs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        _ => return Err(format!("{text:?} is not a time like 200us, 10ns or 0.5ns (units: ps, ns, us, ms, s)")),
    };
    let value: f64 = number.parse().map_err(|_| format!("{text:?} does not start with a number"))?;
    Ok((value * scale).round() as u64)
}

fn parse_time_or_auto(text: &str) -> Result<Emulated, String> {
    if text.eq_ignore_ascii_case("auto") { Ok(Emulated::Auto) } else { parse_time(text).map(Emulated::Picos) }
}

fn parse_dtype(text: &str) -> Result<Dtype, String> {
    parse_named("dtype", text)
}

fn parse_op(text: &str) -> Result<ReduceOp, String> {
    parse_named("op", text)
}

/// Parses `64KiB`, `1MiB`, `4096`, `8B`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|error| format!("{text:?} is not a size like 8B, 4096, 64KiB or 1MiB ({error})"))
}

/// Parses `--timeout`: a duration such as `30s` or `2min`, from 1 ms (every wait of an
/// iteration ends by it) to one day ([`MAX_TIMEOUT`], the most a run spec takes).
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let timeout =
        humantime::parse_duration(text).map_err(|error| format!("{text:?} is not a duration like 30s ({error})"))?;
    if timeout < Duration::from_millis(1) {
        return Err(format!("{text:?} is under the minimum of 1ms: every wait of an iteration ends by the timeout"));
    }
    if timeout > MAX_TIMEOUT {
        return Err(format!("{text:?} exceeds the limit of one day (24h) per iteration"));
    }
    Ok(timeout)
}

/// Parses `4x4` or `2x2x2`.
pub fn parse_dims(text: &str) -> Result<Vec<usize>, String> {
    text.split(['x', 'X'])
        .map(|part| part.trim().parse::<usize>().ok().filter(|&n| n > 0))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("{text:?} is not a shape like 4x4 or 2x2x2 (positive whole numbers joined by x)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn sizes_and_dims_parse_or_say_why_not() {
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("8B").unwrap(), 8);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
        assert_eq!(parse_dims("4x2").unwrap(), vec![4, 2]);
        assert_eq!(parse_dims("2x2x2").unwrap(), vec![2, 2, 2]);
        assert!(parse_dims("4x").is_err());
        assert!(parse_dims("0x4").is_err());
    }

    #[test]
    fn times_parse_to_picoseconds() {
        assert_eq!(parse_time("200us").unwrap(), 200_000_000);
        assert_eq!(parse_time("20µs").unwrap(), 20_000_000);
        assert_eq!(parse_time("10ns").unwrap(), 10_000);
        assert_eq!(parse_time("0.5ns").unwrap(), 500);
        assert!(parse_time("10").unwrap_err().contains("units"));
        assert_eq!(parse_time_or_auto("auto").unwrap(), Emulated::Auto);
    }

    #[test]
    fn timeouts_are_one_ms_to_one_day() {
        assert_eq!(parse_timeout("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_timeout("1ms").unwrap(), Duration::from_millis(1));
        assert_eq!(parse_timeout("24h").unwrap(), MAX_TIMEOUT);
        assert!(parse_timeout("0").unwrap_err().contains("minimum of 1ms"));
        assert!(parse_timeout("999us").unwrap_err().contains("minimum of 1ms"));
        assert!(parse_timeout("24h 1ms").unwrap_err().contains("one day"));
        assert!(parse_timeout("200years").unwrap_err().contains("one day"));
        assert!(parse_timeout("soon").unwrap_err().contains("not a duration"));
    }

    #[test]
    fn unknown_names_list_the_choices() {
        let error = parse_topology("donut").unwrap_err();
        assert!(error.contains("ring") && error.contains("hypercube"), "{error}");
    }
}
