//! A sweep's plan: the algorithms and sizes that can run, each point's run request,
//! and (under `--dilation auto`) the probe and every point's K before anything is measured.

use std::time::Duration;

use topocomm_proto::control::{ClientRequest, ClientResponse};
use topocomm_proto::spec::{Algorithm, RunSpec};
use topocomm_proto::{Topology, catalogue};

use crate::control::client::{self, Credentials};
use crate::control::local::{self, Capacity, CapacityError};
use crate::control::request::{self, CollectiveArgs, Planned, Repetition};
use crate::control::target::Target;
use crate::render::dilation::factor_text;
use crate::render::quantity::size_text;
use crate::render::sweep_outputs::Sweep;
use crate::tools::dilation::{self, Messages, Probe};
use crate::tools::model::{self, Prediction};
use crate::tools::sweep::args::{Algorithms, SweepArgs};
use topocomm_collectives::tuning::Tuning;

/// The node count of the served cluster at `address`: a sweep there runs on its nodes,
/// whatever `--nodes` says, and its sizes are checked on them.
pub(super) async fn served_nodes(address: &str, credentials: &Credentials) -> anyhow::Result<usize> {
    match client::request(address, credentials, ClientRequest::Status, Duration::from_secs(10)).await? {
        ClientResponse::Status(status) => Ok(status.expected),
        ClientResponse::Error(error) => anyhow::bail!("the coordinator at {address}: {error}"),
        other => anyhow::bail!("unexpected answer from the coordinator at {address}: {other:?}"),
    }
}

/// The run request of one point.
pub(super) fn what(args: &SweepArgs, algorithm: Algorithm, size: u64) -> CollectiveArgs {
    CollectiveArgs {
        collective: args.collective,
        shape: args.shape.clone(),
        nodes: args.nodes,
        algorithm: Some(algorithm),
        size,
        data: args.data.clone(),
        links: args.links.clone(),
        schedule: args.schedule.clone(),
    }
}

/// The algorithms `--algorithm` names (default: the one made for the topology), each
/// checked to compute the collective.
pub fn algorithms(args: &SweepArgs) -> anyhow::Result<Vec<Algorithm>> {
    let collective = args.collective;
    let algorithms: Vec<Algorithm> = match &args.algorithm {
        None => vec![catalogue::default_algorithm(collective, args.shape.topology)],
        Some(Algorithms::All) => catalogue::algorithms(collective).map(|e| e.algorithm).collect(),
        Some(Algorithms::Named(named)) => named.clone(),
    };
    for &algorithm in &algorithms {
        catalogue::check(collective, algorithm)?;
    }
    Ok(algorithms)
}

/// The sizes of `--sizes` that can run on `args.nodes` nodes (perhaps none), and why
/// each other one cannot (not whole elements, too large, ...), a line each. On a cluster of this machine (`local`:
/// its capacity) a size's run must fit on it and its links must carry its messages.
pub fn runnable_sizes(
    args: &SweepArgs,
    algorithm: Algorithm,
    repetition: Repetition,
    local: Option<&Capacity>,
    tuning: &Tuning,
) -> anyhow::Result<(Vec<u64>, Vec<String>)> {
    let (mut sizes, mut skipped) = (Vec::new(), Vec::new());
    for &size in &args.sizes {
        let Planned { request, .. } = request::plan(&what(args, algorithm, size), repetition)?;
        let spec = &request.spec;
        let checked = match local {
            Some(capacity) => {
                let topology = Topology::new(args.shape.topology, args.nodes, args.shape.dims.as_deref())?
                    .routed(args.shape.routes)?
                    .placed(args.shape.placement)?;
                spec.validate(args.nodes)
                    .map_err(CapacityError::from)
                    .and_then(|()| capacity.check_run(spec, request.topology, args.nodes, tuning))
                    .and_then(|resolved| local::check_messages(&resolved, &topology))
            }
            None => spec.validate(args.nodes).map_err(CapacityError::from),
        };
        match checked {
            Ok(()) => sizes.push(size),
            Err(error) => skipped.push(format!("skipping {}: {error}", size_text(size))),
        }
    }
    Ok((sizes, skipped))
}

/// What a point runs with: its request, and (under `--dilation auto`) its prediction
/// made before the run, on the topology the probe found.
pub(super) struct PlannedSweepPoint {
    pub(super) algorithm: Algorithm,
    pub(super) size: u64,
    pub(super) request: topocomm_proto::control::RunRequest,
    pub(super) predicted: Option<(RunSpec, Topology, Prediction)>,
}

/// Every point's plan; under `--dilation auto` (with emulated links) the probe runs
/// first and every point gets its own K from it and the point's predicted messages.
pub(super) async fn plan_points(
    args: &SweepArgs,
    cluster: &Target,
    algorithms: &[Algorithm],
    sizes: &[u64],
    repetition: Repetition,
    sweep: &mut Sweep,
) -> anyhow::Result<Vec<PlannedSweepPoint>> {
    let mut plans = Vec::with_capacity(algorithms.len() * sizes.len());
    let mut auto = None;
    for &algorithm in algorithms {
        for &size in sizes {
            let Planned { request, auto_dilation, .. } = request::plan_live(&what(args, algorithm, size), repetition)?;
            if auto_dilation && let Some(links) = request.spec.emulation {
                auto = Some(links);
            }
            plans.push(PlannedSweepPoint { algorithm, size, request, predicted: None });
        }
    }
    let (Some(links), Some(first)) = (auto, plans.first().map(|plan| plan.request.clone())) else { return Ok(plans) };
    let mut probe = Probe::measure(cluster, &first, links).await?;
    let topology = probe.topology().clone();
    let tuning = args.tuning.load()?;
    for plan in &mut plans {
        let spec = dilation::resolved(&plan.request.spec, &topology, &tuning);
        let prediction = model::predict(&spec, &topology, links)?;
        plan.predicted = Some((spec, topology.clone(), prediction));
    }
    let longest = plans
        .iter()
        .filter_map(|plan| plan.predicted.as_ref().and_then(|(_, _, prediction)| Messages::of(prediction)))
        .map(|messages| messages.longest)
        .max();
    probe.measure_long(cluster, &first, links, longest).await?;
    let mut chosen = Vec::new();
    for plan in &mut plans {
        let Some((spec, _, prediction)) = &plan.predicted else { continue };
        let (factor, _) = probe.choose_for(spec, &links, prediction);
        plan.request.spec.dilation = factor;
        chosen.push(factor);
    }
    let (least, most) = (chosen.iter().min(), chosen.iter().max());
    if let (Some(least), Some(most), Some(plan)) = (least, most, plans.first())
        && let Some((spec, _, prediction)) = &plan.predicted
    {
        let (_, first) = probe.choose_for(spec, &links, prediction);
        let text = |why: String| {
            format!(
                "auto, from ×{} to ×{} by point (first point: {why})",
                factor_text(least.factor()),
                factor_text(most.factor())
            )
        };
        // The JSON has it in full; the terminal in one line unless --verbose.
        sweep.dilation = Some(text(first.why(true)));
        sweep.dilation_line = Some(text(first.why(args.words.verbose)));
        eprintln!("dilation {}", sweep.dilation_line.as_deref().unwrap_or_default());
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_planned_as_run_plans_the_same_options() {
        use clap::Parser;
        use topocomm_proto::spec::{Dtype, ReduceOp};

        use crate::cli::{Cli, Command};

        let shared = "scan -t ring -a linear --root 3 --dtype i32 --op max --shift 2 --exclusive --seed 9 \
                      -i 5 --warmup 1 --timeout 2s --ts 10us";
        let parse = |line: String| Cli::try_parse_from(line.split_whitespace()).expect("parses").command;
        let Command::Run(run) = parse(format!("topocomm run {shared} --size 1KiB")) else { panic!("not a run") };
        let Command::Sweep(sweep) = parse(format!("topocomm sweep {shared} --sizes 1KiB")) else {
            panic!("not a sweep")
        };
        let ran = request::plan(&run.what, run.repeat.repetition(false)).expect("planned").request;
        let point = what(&sweep, Algorithm::Linear, 1024);
        let swept = request::plan(&point, sweep.repeat.repetition(false)).expect("planned").request;
        assert_eq!(ran, swept);
        let spec = &ran.spec;
        assert_eq!((spec.root, spec.dtype, spec.op, spec.shift, spec.seed), (3, Dtype::I32, ReduceOp::Max, 2, 9));
        assert!(spec.exclusive);
        assert_eq!((spec.iterations, spec.warmup, spec.timeout_ms), (5, 1, 2000));
        assert_eq!(spec.emulation.map(|links| links.ts_ns), Some(10_000));
    }
}
