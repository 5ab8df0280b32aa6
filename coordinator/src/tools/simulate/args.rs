//! `topocomm simulate`'s options: what `run` takes, with node counts, topologies and
//! algorithms as lists, and what the simulator's messages carry.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use topocomm_proto::TopologyKind;
use topocomm_proto::network::Placement;
use topocomm_proto::spec::Collective;
use topocomm_proto::topology::Routes;

use crate::control::parse::{
    ParseError, parse_collective, parse_dims, parse_placement, parse_routes, parse_size, parse_timeout, parse_topology,
};
use crate::control::request::{DataArgs, LinkArgs};
use crate::control::tuning::TuningArgs;
use crate::tools::sweep::{Algorithms, parse_algorithms};

/// `topocomm simulate`: what `run` takes, with node counts, topologies and algorithms as
/// lists.
#[derive(Debug, Clone, Args)]
// A GOAL schedule has no collective: with --goal the collective may be left out.
#[command(mut_arg("collective", |arg| arg.required(false).required_unless_present("goal").default_value("allreduce").hide_default_value(true)))]
pub struct SimulateArgs {
    /// The collective: broadcast, reduce, allgather, reduce-scatter, allreduce, scan,
    /// scatter, gather, alltoall, shift, barrier.
    #[arg(value_parser = parse_collective)]
    pub collective: Collective,
    /// Topologies, comma-separated: ring, mesh, torus, mesh3d, torus3d, hypercube, full
    /// (direct); fat-tree, dragonfly, cluster (switched).
    #[arg(long, short = 't', value_delimiter = ',', default_value = "hypercube", value_parser = parse_topology)]
    pub topology: Vec<TopologyKind>,
    /// Extents for mesh/torus (RxC) and mesh3d/torus3d (AxBxC), fat-tree K, dragonfly
    /// AxPxH, cluster MxC, with one topology and one node count; default the squarest
    /// (a switched kind: the smallest that holds the nodes; a cluster needs its MxC).
    #[arg(long, value_parser = parse_dims)]
    pub dims: Option<std::vec::Vec<usize>>,
    /// A network read from FILE instead of --topology (topocomm's JSON or a SimGrid
    /// platform: `topocomm run --help` says more); its endpoints are the nodes.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dims", "topology", "nodes"])]
    pub network: Option<PathBuf>,
    /// Where the ranks sit on a switched network's hosts: linear, round-robin or
    /// random[:SEED] (`topocomm run --help` says more); a direct network takes linear only.
    #[arg(long, default_value = "linear", value_parser = parse_placement)]
    pub placement: Placement,
    /// Route policy, for every topology given: fat-tree d-mod-k (default) or ecmp,
    /// dragonfly minimal (default) or valiant[:SEED] (`topocomm run --help` says more).
    #[arg(long, value_name = "NAME", value_parser = parse_routes)]
    pub routes: Option<Routes>,
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
    /// Simulate a GOAL schedule (LogGOPSim's text) instead of a collective (none need be
    /// given): sizes only, nothing can be verified; its num_ranks must be the node count.
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

/// Why `simulate` refuses `--dilation`.
pub(crate) const SIMULATED_TIME_UNDILATED: &str = "--dilation stretches emulated links on the wall clock; simulate runs on no clock (its times are emulated time already), so there is nothing to dilate";
