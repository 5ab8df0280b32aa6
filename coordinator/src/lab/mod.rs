//! The lab: the cluster's page in a browser. `topocomm lab` starts a local cluster and
//! serves the page; `topocomm serve --http ADDR` serves it beside a long-lived
//! coordinator. The page draws the cluster on its topology, runs collectives from a form
//! through the same code path as `topocomm run` (and `explain`, `simulate` and
//! `sweep`), and animates every message of a run along its links (plots sweeps and
//! simulations at several points; shows a simulation too large to animate by step);
//! `run --html FILE` writes one run as a page that plays offline.
//!
//! - `access`: who may use the page (loopback, Host and Origin checks, the token, the
//!   slowing of wrong tokens);
//! - `door`: the HTTP port before a request is read (connection caps, header deadline);
//! - `document`: a run, a schedule or a simulation as the JSON document the page plays;
//! - `assets`: the page itself (HTML, CSS, JavaScript), embedded in the binary;
//! - `words`: the command words a request may give (every option naming a file refused);
//! - `jobs`: the queue of jobs (one at a time, bounded, cancellable) and the history;
//! - `work`: what each kind of job does, through its command's code, and the loop that
//!   carries the queued jobs out;
//! - `routes`: the page's files and the JSON API's handlers, behind the access checks;
//! - `events`: the server-sent events (the cluster as it changes, each job's progress);
//! - `server`: the lab itself (its state), started beside a local cluster or a serving
//!   coordinator, serving the routes through the door.
//!
//! Behind the `lab` cargo feature (default on; the container image is built without it).

use std::path::{Path, PathBuf};

use clap::Args;
use topocomm_node::security::SecurityArgs;

#[cfg(feature = "lab")]
pub mod access;
#[cfg(feature = "lab")]
pub mod assets;
#[cfg(feature = "lab")]
pub mod document;
#[cfg(feature = "lab")]
pub mod door;
#[cfg(feature = "lab")]
mod events;
#[cfg(feature = "lab")]
pub mod jobs;
#[cfg(feature = "lab")]
mod routes;
#[cfg(feature = "lab")]
pub mod server;
#[cfg(feature = "lab")]
pub mod words;
#[cfg(feature = "lab")]
pub mod work;

/// `topocomm lab`: a local cluster and its page.
#[derive(Debug, Clone, Args)]
pub struct LabArgs {
    /// Nodes of the local cluster.
    #[arg(long, short = 'n', default_value_t = 8)]
    pub nodes: usize,
    /// A switched network (fat-tree, dragonfly, cluster) to start the switches of too:
    /// its `--nodes` ranks and a daemon per switch (its runs' ranks are then those nodes).
    /// A direct shape starts the nodes alone, as without it; every run names its shape.
    #[arg(long, short = 't', value_parser = crate::control::parse::parse_topology)]
    pub topology: Option<topocomm_proto::TopologyKind>,
    /// The switched network's shape (fat-tree K, dragonfly AxPxH, cluster MxC).
    #[arg(long, value_parser = crate::control::parse::parse_dims, requires = "topology")]
    pub dims: Option<std::vec::Vec<usize>>,
    /// Address to serve the page on, HOST:PORT (port 0: any free port). Any address
    /// but loopback needs a strong token (128 random bits: --token-file or
    /// TOPOCOMM_TOKEN), which the page asks for.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7780")]
    pub http: String,
    /// Folder for the node daemons' logs (default: a folder of this lab's own, named when
    /// it starts, as for `run`).
    #[arg(long)]
    pub logs: Option<PathBuf>,
    /// The page's token off loopback, and whether the cluster's links are encrypted.
    #[command(flatten)]
    pub security: SecurityArgs,
    /// The rules `--algorithm auto` picks by for the page's runs.
    #[command(flatten)]
    pub tuning: crate::control::tuning::TuningArgs,
}

/// The lab was asked of a binary built without it.
#[cfg(not(feature = "lab"))]
const LEFT_OUT: &str = "this topocomm was built without the lab (cargo feature `lab`)";

/// Refuses `option` (`--html`) when it names a file and this binary was built without
/// the lab, before anything runs.
pub fn check_built(option: &'static str, path: Option<&Path>) -> anyhow::Result<()> {
    anyhow::ensure!(
        cfg!(feature = "lab") || path.is_none(),
        "{option} writes the lab's page, but this topocomm was built without the lab (cargo feature `lab`)"
    );
    Ok(())
}

/// Runs `topocomm lab` until interrupted.
#[cfg(feature = "lab")]
pub async fn run(args: LabArgs) -> anyhow::Result<()> {
    server::lab(args).await
}

/// Runs `topocomm lab` until interrupted.
#[cfg(not(feature = "lab"))]
pub async fn run(_args: LabArgs) -> anyhow::Result<()> {
    anyhow::bail!(LEFT_OUT)
}

/// Serves the page on `http` beside the serving coordinator of `serve --http`; refuses,
/// before anything is served, an address off loopback without a token.
#[cfg(feature = "lab")]
pub async fn serve_beside(
    http: &str,
    token: Option<&str>,
    coordinator: std::sync::Arc<crate::control::run::Coordinator>,
    control: std::net::SocketAddr,
    cluster_token: &str,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    server::beside_coordinator(http, token, coordinator, control, cluster_token).await
}

/// Serves the page on `http` beside the serving coordinator of `serve --http`.
#[cfg(not(feature = "lab"))]
pub async fn serve_beside(
    _http: &str,
    _token: Option<&str>,
    _coordinator: std::sync::Arc<crate::control::run::Coordinator>,
    _control: std::net::SocketAddr,
    _cluster_token: &str,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    anyhow::bail!("--http: {LEFT_OUT}")
}

/// Writes the run `executed` as one self-contained page that plays it offline.
#[cfg(feature = "lab")]
pub fn write_run_html(executed: &crate::tools::execute::Executed, path: &Path) -> anyhow::Result<()> {
    let document = document::of_run(executed, &[])?;
    let page = assets::standalone(&document)?;
    topocomm_collectives::files::write(path, page)
        .map_err(|error| anyhow::anyhow!("writing {}: {error}", path.display()))
}

/// Writes the run `executed` as one self-contained page that plays it offline.
#[cfg(not(feature = "lab"))]
pub fn write_run_html(_executed: &crate::tools::execute::Executed, _path: &Path) -> anyhow::Result<()> {
    anyhow::bail!("--html: {LEFT_OUT}")
}
