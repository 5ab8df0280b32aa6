//! `topocomm bench-model`'s options, and the MSCCL-IR program `--schedule` names.

use std::path::{Path, PathBuf};

use clap::Args;
use topocomm_proto::TopologyKind;
use topocomm_proto::schedule::Schedule;
use topocomm_proto::spec::{Collective, Routing};

use crate::control::parse::{parse_collective, parse_routing, parse_size, parse_time, parse_topology};
use crate::control::request::{Dilating, parse_dilation};
use crate::render::dilation::Verbosity;

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
pub(super) fn read_program(path: &Path, collectives: &[Collective]) -> anyhow::Result<(Schedule, Collective)> {
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
