//! `topocomm sweep`: one collective over a range of message sizes and one or more
//! algorithms, on one cluster (a local one started once for the whole sweep, or the
//! serving coordinator `--coordinator` names). Every point is a verified run, as with
//! `topocomm run`; a failed point stops the sweep (what was measured before it is still
//! written).
//!
//! Output follows the OSU micro-benchmarks: per algorithm a block of
//! `# Size  Avg(us)  Min(us)  Max(us)  P50(us)  P90(us)  P99(us)  Iterations`, where an
//! iteration takes as long as its slowest node and the percentiles are by nearest rank
//! ([`crate::render::report::nearest_rank`], as OSU's `-z`), then the cost model's time (with emulated
//! links or `--ts auto`) and bandwidths as nccl-tests defines them:
//!
//! - `algbw = size / Avg`, with `size` the bytes per node (`--sizes`), in GB/s (10^9 B/s);
//! - `busbw = algbw × factor`, the factor making busbw comparable with a link's
//!   bandwidth, one per collective in [`crate::render::bus_factor::bus_factor`]: allreduce 2(p−1)/p; allgather,
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
//!
//! Its parts: `args` (the options), `plan` (what can run and each point's request, the
//! dilation probe first), `measure` (the points run and summarised); what it prints and
//! writes is `render`'s ([`crate::render::sweep_table`], [`crate::render::sweep_outputs`],
//! [`crate::render::bus_factor`]), handed plain data from here.

mod args;
mod measure;
mod plan;

use std::path::Path;

use anyhow::anyhow;
use topocomm_proto::Topology;
use topocomm_proto::spec::{Algorithm, LinkModel};

use crate::control::local::{self, Capacity, LocalCluster};
use crate::control::request::{self, Repetition};
use crate::control::target::Target;
use crate::render;
use crate::render::dilation::seconds_text;
use crate::render::output::{self, outln};
#[cfg(feature = "pictures")]
use crate::render::picture;
use crate::render::progress::Progress;
use crate::render::quantity::size_text;
use crate::render::sweep_outputs::{self, SweepAsked, SweepFiles};
use crate::render::sweep_table::{self, SweepPoint};

pub use crate::render::sweep_outputs::Sweep;
pub use args::{Algorithms, SweepArgs, parse_algorithms, parse_sizes};
pub use measure::{SweepUpdate, measure_points};
pub use plan::{algorithms, runnable_sizes};

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
    // A served cluster has its own size: the sizes are checked on its nodes (a schedule's
    // on the node count it is written for), not on --nodes.
    let served;
    let args = match &args.remote.coordinator {
        Some(address) => {
            let mut on_served = args.clone();
            on_served.nodes = plan::served_nodes(address, &args.remote.credentials()?).await?;
            served = on_served;
            &served
        }
        None => args,
    };
    let repetition = args.repeat.repetition(false);
    // A local cluster must fit on this machine.
    args.shape.check_routes()?;
    let topology = Topology::new(args.shape.kind(), args.nodes, args.shape.dims.as_deref())?
        .routed(args.shape.routes)?
        .placed(args.shape.placement)?;
    let capacity = match args.remote.coordinator {
        None => {
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
            let local = LocalCluster::start_for(&topology, &logs, args.remote.security.encrypt, tuning).await?;
            eprintln!(
                "local cluster: {}, coordinator on {}, node logs in {}/node-*.log",
                local::processes(&topology),
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
    let mut on_step = |step: SweepUpdate<'_>| -> anyhow::Result<()> {
        match step {
            SweepUpdate::Starting { algorithm, size, .. } => {
                bar.set_message(format!("{algorithm}, {}", size_text(size)))
            }
            SweepUpdate::Measured { index, point, summary, topology, dilation_line } => {
                if index == 0 {
                    show(&sweep_outputs::header(&asked(args), topology, summary.links.as_ref(), dilation_line))?;
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

/// What the sweep's outputs say it was asked.
fn asked(args: &SweepArgs) -> SweepAsked {
    SweepAsked {
        collective: args.collective,
        dtype: args.data.dtype,
        op: args.data.op,
        root: args.data.root,
        exclusive: args.data.exclusive,
        shift: args.data.shift,
        seed: args.data.seed,
        encrypted: args.remote.security.encrypt,
        warmup: args.repeat.warmup,
        iterations: args.repeat.iterations,
    }
}

/// The sweep as one JSON object (`sweep --json`).
pub fn json_of(args: &SweepArgs, sweep: &Sweep, topology: &Topology) -> serde_json::Value {
    sweep_outputs::json_of(&asked(args), sweep, topology)
}

fn write_outputs(args: &SweepArgs, sweep: &Sweep) -> anyhow::Result<()> {
    let files = SweepFiles { csv: args.csv.as_deref(), json: args.json.as_deref(), plot: args.plot.as_deref() };
    sweep_outputs::write(&asked(args), files, sweep)
}
