//! The `topocomm` command line: every subcommand and option a user meets.

//! Each layer owns the options of its commands; this file puts them together.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use topocomm_node::daemon::NodeArgs;
use topocomm_node::security::SecurityArgs;

use crate::control::client::RemoteArgs;
use crate::control::request::{CollectiveArgs, IterationArgs};
use crate::control::tuning::TuningArgs;
use crate::lab::LabArgs;
use crate::render::dilation::Verbosity;
use crate::render::topology_view::{ListArgs, TopologyArgs};
use crate::tools::bench_model::BenchModelArgs;
use crate::tools::calibrate::CalibrateArgs;
use crate::tools::explain::ExplainArgs;
use crate::tools::simulate::SimulateArgs;
use crate::tools::sweep::SweepArgs;
use crate::tools::tune::TuneArgs;

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
    /// counts it serves, its steps and its source; and the rules `auto` picks by.
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
    /// Run a collective's algorithm on the simulator's virtual network instead of
    /// daemons: any p up to millions of nodes, the same algorithm code, every result
    /// verified (or lengths only), a scaling table with the textbook's closed forms.
    // The flattened link options bring `--dilation`, which simulated time refuses (with
    // a message saying why): kept out of the help.
    #[command(mut_arg("dilation", |arg| arg.hide(true)))]
    Simulate(SimulateArgs),
    /// Ask a serving coordinator how the cluster stands.
    Status(StatusArgs),
    /// Start a local cluster of --nodes daemons and the lab, its page in a browser: the
    /// cluster drawn on its topology, runs from a form, every message animated.
    Lab(LabArgs),
    /// Measure where `--algorithm auto` should switch on this cluster (each rule's
    /// alternative against the default it replaces, over doubling sizes) and write the
    /// rules as a file for `--tuning`.
    Tune(TuneArgs),
    /// Run a node daemon (the same daemon as `topocomm-node`; local clusters use it).
    #[command(hide = true)]
    Node(NodeArgs),
}

#[derive(Debug, Clone, Args)]
// A GOAL schedule has no collective: with --goal the collective may be left out.
#[command(mut_arg("collective", |arg| arg.required(false).required_unless_present("goal").default_value("allreduce").hide_default_value(true)))]
pub struct RunArgs {
    #[command(flatten)]
    pub what: CollectiveArgs,
    #[command(flatten)]
    pub repeat: IterationArgs,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write each node's input and output of the last iteration and run.json here.
    #[arg(long)]
    pub dump: Option<PathBuf>,
    /// Local clusters: folder for the node daemons' logs (default: a new folder for this
    /// run in this user's own, $XDG_RUNTIME_DIR/topocomm or /tmp/topocomm-<user>; the
    /// run names it).
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
    /// Write the run as one self-contained HTML page (data inline) that plays its message
    /// flow offline, as the lab does: for slides and course pages.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Run a GOAL schedule (LogGOPSim's text: sends, receives and their dependencies per
    /// rank) instead of a collective (none need be given): sizes only, nothing can be
    /// verified.
    #[arg(long, value_name = "FILE", conflicts_with = "schedule")]
    pub goal: Option<PathBuf>,
    #[command(flatten)]
    pub words: Verbosity,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// How many node daemons form the cluster. A run on a switched network (fat-tree,
    /// dragonfly, cluster) makes the daemons past its ranks its switches, one each:
    /// `cluster --dims 3x4` on 16 daemons is 12 ranks and 4 switches.
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
    /// Also serve the lab, the cluster's page in a browser, on ADDR (HOST:PORT). Any
    /// address but loopback needs the cluster token (--token-file or TOPOCOMM_TOKEN), a
    /// strong one (128 random bits), which the page asks for.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// The rules `--algorithm auto` picks by for every client.
    #[command(flatten)]
    pub tuning: TuningArgs,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
