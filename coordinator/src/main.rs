//! `topocomm`: the coordinator and the user's command line.
//!
//! The layers, the arrows going one way (a layer uses only those to its right; held by
//! `collectives/tests/arrows.rs`):
//!
//! `main`, `cli` → `tools`, `lab` → `render` → `control` → (`topocomm-node`, `topocomm-collectives`, `topocomm-proto`)
//!
//! - `control`: the control plane (clusters, the server and client, run requests, the
//!   `--tuning` option every layer above declares);
//! - `render`: reports, traces and (feature `pictures`) SVG/PNG pictures;
//! - `tools`: the cost model, `explain`, calibration, `bench-model`, sweeps and `tune`;
//! - `lab`: (feature `lab`) the page in a browser, a front end beside `main` that uses
//!   the others and that none of them names.
//!
//! Each layer declares the options of its own commands; `cli` only assembles them.

mod cli;
mod control;
mod lab;
mod render;
mod tools;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::Parser;
use tokio::net::TcpListener;
use topocomm_node::security;
use topocomm_proto::Topology;
use topocomm_proto::control::{ClientRequest, ClientResponse, RunRequest};
use topocomm_proto::spec::{LinkModel, RunSpec};

use crate::cli::{Cli, Command, RunArgs, ServeArgs, StatusArgs};
use crate::control::local::{self, Capacity, LocalCluster};
use crate::control::request::{self, Planned};
use crate::control::run::Coordinator;
use crate::control::target::Target;
use crate::control::{client, server};
use crate::render::flow::{self, FlowOutputs};
use crate::render::output::{self, StdoutClosed, outln};
use crate::render::report;
#[cfg(feature = "pictures")]
use crate::render::topology_svg;
use crate::render::topology_view::{self, TopologyArgs};
use crate::tools::model;
use crate::tools::{bench_model, calibrate, execute, explain, simulate, sweep, tune};
use topocomm_collectives::tuning::Tuning;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Node(args) = cli.command {
        topocomm_node::daemon::logging::init();
        return match topocomm_node::daemon::main(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    // A coordinator holds a descriptor per node and per connection in its handshake (the
    // node role raises its own limit in the daemon).
    topocomm_node::daemon::limits::raise_open_file_limit();
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(command(cli)),
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn command(cli: Cli) -> ExitCode {
    let default_level = match &cli.command {
        Command::Serve(_) | Command::Node(_) | Command::Lab(_) => "info",
        _ => "error",
    };
    topocomm_node::daemon::logging::init_with_default(default_level);
    let result = match cli.command {
        Command::Run(args) => run(args).await,
        Command::Serve(args) => serve(args).await.map(|()| ExitCode::SUCCESS),
        Command::Topology(args) => topology(&args).map(|()| ExitCode::SUCCESS),
        Command::List(args) => topology_view::list(&args).map(|()| ExitCode::SUCCESS),
        Command::Explain(args) => explain::print(&args).map(|()| ExitCode::SUCCESS),
        Command::Calibrate(args) => calibrate::run(&args).await.map(|()| ExitCode::SUCCESS),
        Command::BenchModel(args) => bench_model::run(&args).await.map(|()| ExitCode::SUCCESS),
        Command::Sweep(args) => sweep::run(&args).await.map(|()| ExitCode::SUCCESS),
        Command::Simulate(args) => simulate::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Status(args) => status(args).await.map(|()| ExitCode::SUCCESS),
        Command::Lab(args) => lab::run(args).await.map(|()| ExitCode::SUCCESS),
        Command::Tune(args) => tune::run(&args).await.map(|()| ExitCode::SUCCESS),
        Command::Node(_) => unreachable!("the node role runs on its own runtime"),
    };
    result.unwrap_or_else(|error| {
        // A reader that left early (`| head -1`) ends the command, quietly.
        if error.is::<StdoutClosed>() {
            return ExitCode::SUCCESS;
        }
        eprintln!("error: {error:#}");
        ExitCode::FAILURE
    })
}

/// `topocomm topology`: the text or JSON, then the picture `--svg` asks for.
fn topology(args: &TopologyArgs) -> anyhow::Result<()> {
    render::check_pictures_built("--svg", args.svg.as_deref())?;
    topology_view::print(args)?;
    #[cfg(feature = "pictures")]
    topology_svg::write_requested(args)?;
    Ok(())
}

async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    render::check_pictures_built("--diagram", args.diagram.as_deref())?;
    check_outputs(&args)?;
    lab::check_built("--html", args.html.as_deref())?;
    let repetition = args.repeat.repetition(args.dump.is_some());
    let mut planned = request::plan_live(&args.what, repetition)?;
    // Traces and diagrams draw the run's own message flow, gathered from every node.
    planned.request.spec.trace = args.trace.is_some() || args.diagram.is_some() || args.html.is_some();
    if let Some(path) = &args.goal {
        let goal = topocomm_collectives::algorithms::schedule::read_goal(path).map_err(anyhow::Error::msg)?;
        planned.request.spec.schedule = Some(Box::new(goal));
    }
    if let Some(schedule) = &planned.request.spec.schedule {
        eprintln!("{}", topocomm_collectives::algorithms::schedule::summary(schedule));
    }
    let tuning = args.tuning.load()?;
    let target = open_target(&args, &planned.request, &tuning).await?;
    let interrupted = match target {
        Target::Local(_) => "interrupted; every node process was stopped",
        Target::Remote { .. } => "interrupted",
    };
    let result = tokio::select! {
        result = run_on(&target, &args, planned, &tuning) => result,
        _ = tokio::signal::ctrl_c() => Err(anyhow!(interrupted)),
    };
    target.shutdown().await;
    result
}

/// Refuses, before anything runs, an output file or folder that cannot be written (or a
/// picture of a format that cannot be drawn).
fn check_outputs(args: &RunArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.trace {
        output::check_file_writable("--trace", path)?;
    }
    if let Some(path) = &args.diagram {
        #[cfg(feature = "pictures")]
        render::picture::Format::of(path)?;
        output::check_file_writable("--diagram", path)?;
    }
    if let Some(folder) = &args.dump {
        output::check_folder_writable("--dump", folder)?;
    }
    if let Some(path) = &args.html {
        output::check_file_writable("--html", path)?;
    }
    Ok(())
}

/// The cluster `args` asks for: the serving coordinator `--coordinator` names, or a local
/// one started for this run (after refusing a bad shape or size, more than this machine
/// holds, or a message longer than its links carry, before any process starts).
async fn open_target(args: &RunArgs, request: &RunRequest, tuning: &Arc<Tuning>) -> anyhow::Result<Target> {
    if let Some(address) = &args.remote.coordinator {
        if let Some(file) = &args.tuning.tuning {
            eprintln!(
                "note: the serving coordinator resolves auto by its own rules (serve --tuning); {} only shapes the prediction here",
                file.display()
            );
        }
        return Ok(Target::Remote { address: address.clone(), credentials: args.remote.credentials()? });
    }
    let topology =
        Topology::new(request.topology, args.what.nodes, request.dims.as_deref())?.placed(request.placement)?;
    request.spec.validate(args.what.nodes)?;
    let resolved = Capacity::of_this_machine().check_run(&request.spec, request.topology, args.what.nodes, tuning)?;
    local::check_messages(&resolved, &topology)?;
    let logs = local::log_folder(args.logs.as_deref())?;
    let local = LocalCluster::start_for(&topology, &logs, args.remote.security.encrypt, tuning.clone()).await?;
    eprintln!(
        "local cluster: {}, coordinator on {}, node logs in {}/{}.log",
        local::processes(&topology),
        local.address,
        local.logs.display(),
        if topology.switches() > 0 { "{node,switch}-*" } else { "node-*" }
    );
    Ok(Target::Local(local))
}

/// Runs the planned request on `target` (dilated as `--dilation` says, after the probe
/// when it says `auto`), then reports, dumps and draws as asked.
async fn run_on(target: &Target, args: &RunArgs, planned: Planned, tuning: &Tuning) -> anyhow::Result<ExitCode> {
    let announce = |stage: execute::Stage| {
        if let execute::Stage::Dilated(chosen) = stage
            && let Some(line) = chosen.announcement(args.words.verbose)
        {
            eprintln!("{line}");
        }
    };
    let executed = execute::run(target, planned, tuning, &announce).await?;
    let execute::Executed { outcome, summary, prediction, predict_with, json } = &executed;
    // The results first, then the files: a file that cannot be written after all (the
    // paths were checked before the run) loses nothing of what was measured.
    let shown = match summary {
        Ok(_) if args.json => outln!("{}", serde_json::to_string_pretty(json)?),
        Ok(summary) => outln!("{}\n{}", report::headline(summary), report::table(summary)),
        Err(failure) => {
            eprintln!("error: {failure}");
            Ok(())
        }
    };
    if let Some(dir) = &args.dump {
        report::dump(dir, outcome, json)?;
        eprintln!("dumped inputs, outputs and run.json to {}", dir.display());
    }
    if summary.is_ok() {
        let outputs =
            FlowOutputs { trace: args.trace.as_deref(), diagram: args.diagram.as_deref(), by_steps: args.steps };
        let predicted = prediction.as_ref().map(|p| p.events.as_slice());
        let schedule = |spec: &RunSpec, topology: &Topology, links: LinkModel| {
            model::predict(spec, topology, links).map(|p| p.events).map_err(anyhow::Error::from)
        };
        flow::write_run_outputs(outputs, outcome, predicted, *predict_with, &schedule)?;
    }
    if let Some(path) = &args.html {
        lab::write_run_html(&executed, path)?;
        eprintln!("wrote the run's page to {} (open it in a browser: it plays offline)", path.display());
    }
    shown?;
    Ok(if summary.is_ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.nodes >= 1, "--nodes must be at least 1");
    let given = args.security.writing_to(args.write_token.as_deref()).token()?;
    anyhow::ensure!(
        given.is_none() || args.write_token.is_none(),
        "--write-token writes a random token made for this cluster, but a token was given already (--token, \
         --token-file, TOPOCOMM_TOKEN or TOPOCOMM_TOKEN_FILE): give one or the other"
    );
    if let Some(token) = &given
        && !security::loopback_only(&args.listen).await
    {
        security::check_reachable_token(token, "a coordinator", &args.listen)?;
    }
    let token = given.clone().unwrap_or_else(local::random_token);
    let listener = TcpListener::bind(&args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let key = topocomm_proto::auth::Key::from_token(&token);
    let coordinator = Arc::new(Coordinator::new(args.nodes, key, args.security.encrypt).tuned(args.tuning.load()?));
    let mode = if args.security.encrypt { "every link encrypted" } else { "links authenticated, not encrypted" };
    eprintln!("topocomm coordinator on {} for {} nodes ({mode})", listener.local_addr()?, args.nodes);
    match (&given, &args.write_token) {
        (None, Some(path)) => {
            local::write_token_file(path, &token)?;
            eprintln!("cluster token written to {} (give it to nodes and clients as --token-file)", path.display());
        }
        (None, None) => {
            eprintln!("cluster token (give it to nodes and clients in a --token-file or TOPOCOMM_TOKEN): {token}")
        }
        (Some(_), _) => {}
    }
    let _page = match &args.http {
        Some(http) => {
            Some(lab::serve_beside(http, given.as_deref(), coordinator.clone(), listener.local_addr()?, &token).await?)
        }
        None => None,
    };
    tokio::select! {
        () = server::serve(listener, coordinator) => Ok(()),
        signal = topocomm_node::daemon::stop_signal() => {
            eprintln!("stopping on {signal}");
            Ok(())
        }
    }
}

async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let address = args.remote.coordinator.clone().context("--coordinator (or TOPOCOMM_COORDINATOR) is needed")?;
    let credentials = args.remote.credentials()?;
    match client::request(&address, &credentials, ClientRequest::Status, Duration::from_secs(10)).await? {
        ClientResponse::Status(status) => {
            // Ready: the cluster formed (every member has an id) and every member is connected.
            let connected = status.registered.len();
            let ready = connected == status.expected && status.registered.iter().all(|node| node.id.is_some());
            if args.json {
                let nodes: Vec<serde_json::Value> = status
                    .registered
                    .iter()
                    .map(|node| serde_json::json!({ "id": node.id, "name": node.name, "data_addr": node.data_addr }))
                    .collect();
                let topology = status.topology.as_ref().map(|topology| {
                    serde_json::json!({ "kind": topology.kind.to_string(), "p": topology.p, "dims": topology.dims })
                });
                let json = render::schema::versioned(serde_json::json!({
                    "expected": status.expected,
                    "connected": connected,
                    "ready": ready,
                    "nodes": nodes,
                    "topology": topology,
                }));
                outln!("{}", serde_json::to_string_pretty(&json)?)?;
            } else {
                outln!("{} of {} nodes connected", connected, status.expected)?;
                for node in &status.registered {
                    let id = node.id.map_or_else(|| "-".to_owned(), |id| id.to_string());
                    outln!("  {id:>4}  {}  {}", node.name, node.data_addr)?;
                }
                match status.topology {
                    Some(topology) => outln!("wired as {} (dims {:?})", topology.kind, topology.dims)?,
                    None => outln!("not wired")?,
                }
            }
            if args.ready && !ready {
                bail!("not ready: {connected} of {} nodes connected", status.expected);
            }
            Ok(())
        }
        ClientResponse::Error(error) => Err(anyhow!(error)),
        other => bail!("unexpected answer from the coordinator: {other:?}"),
    }
}
