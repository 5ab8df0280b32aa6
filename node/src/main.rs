//! `topocomm-node`: the node daemon binary.

use clap::Parser;
use topocomm_node::daemon::{self, NodeArgs};

/// A topocomm node: links to its topological neighbours and runs collectives on the
/// coordinator's command.
#[derive(Parser)]
#[command(name = "topocomm-node", version, about)]
struct Cli {
    #[command(flatten)]
    node: NodeArgs,
}

fn main() -> anyhow::Result<()> {
    topocomm_node::daemon::logging::init();
    daemon::main(Cli::parse().node)
}
