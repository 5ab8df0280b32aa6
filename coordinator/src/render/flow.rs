//! What `run` and `simulate` write of a run's message flow (`--trace`, `--diagram`):
//! where the events come from (the nodes' own, or the cost model's schedule) and which
//! file each goes to, as a Chrome trace ([`crate::render::trace`]) or a space-time
//! diagram ([`crate::render::diagram`]).

use std::path::Path;

use anyhow::Context;
use serde_json::json;
use topocomm_proto::Topology;
use topocomm_proto::control::RunOutcome;
use topocomm_proto::flow::FlowEvent;
use topocomm_proto::spec::{LinkModel, Ports, Routing, RunSpec};

#[cfg(feature = "pictures")]
use crate::render::diagram::{self, DiagramMeta};
use crate::render::links::describe_links;
use crate::render::quantity::size_text;
use crate::render::trace::{TraceMeta, chrome_json};

/// Where a run's flow events come from.
struct Flow<'a> {
    events: std::borrow::Cow<'a, [FlowEvent]>,
    /// "measured ..." or "cost model ...".
    source: String,
    routing: String,
}

/// What `run` asked to be written of its message flow.
#[derive(Debug, Clone, Copy)]
pub struct FlowOutputs<'a> {
    /// `--trace`: the Chrome trace's file.
    pub trace: Option<&'a Path>,
    /// `--diagram`: the space-time diagram's file.
    pub diagram: Option<&'a Path>,
    /// `--steps`: the diagram places messages by step instead of time.
    pub by_steps: bool,
}

/// The cost model's flow events of a run's spec on its topology under the given links
/// (rendering runs no model itself: the caller hands one in).
pub type Schedule<'a> = &'a dyn Fn(&RunSpec, &Topology, LinkModel) -> anyhow::Result<Vec<FlowEvent>>;

/// Writes what `--trace` and `--diagram` ask of a finished run.
///
/// The events are the nodes' own (`outcome.trace`, on the coordinator's clock) when
/// the run gathered them; otherwise the cost model's for the same spec and topology
/// (`predicted`, under `links`), which needs link physics to place events in time
/// (`--ts/--th/--tw`), or `--steps` (then `schedule` draws them under nominal links).
/// The title says which.
pub fn write_run_outputs(
    outputs: FlowOutputs,
    outcome: &RunOutcome,
    predicted: Option<&[FlowEvent]>,
    links: Option<LinkModel>,
    schedule: Schedule,
) -> anyhow::Result<()> {
    if outputs.trace.is_none() && outputs.diagram.is_none() {
        return Ok(());
    }
    let topology = outcome.topology.build()?;
    let flow = run_flow(outputs, outcome, &topology, predicted, links, schedule)?;
    write_flow(outputs, &flow.events, &outcome.spec, &topology, &flow.routing, &flow.source)
}

/// Writes what `--trace` and `--diagram` ask of the message flow `events` of `spec` on
/// `topology` (`routing` describes the links, `source` where the events come from).
pub fn write_flow(
    outputs: FlowOutputs,
    events: &[FlowEvent],
    spec: &RunSpec,
    topology: &Topology,
    routing: &str,
    source: &str,
) -> anyhow::Result<()> {
    let title =
        format!("{} ({}) on a {topology}, {} per node", spec.collective, spec.algorithm, size_text(spec.size_bytes));
    if let Some(path) = outputs.trace {
        let meta = TraceMeta {
            title: format!("{title} — {source}"),
            nodes: topology.p(),
            details: json!({
                "collective": spec.collective, "algorithm": spec.algorithm, "topology": topology.to_string(),
                "size_bytes": spec.size_bytes, "links": routing, "events": source, "run": spec.run,
            }),
        };
        let text = serde_json::to_string(&chrome_json(events, &meta))?;
        topocomm_collectives::files::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote the trace to {} (open it in ui.perfetto.dev or chrome://tracing)", path.display());
    }
    crate::render::check_pictures_built("--diagram", outputs.diagram)?;
    #[cfg(feature = "pictures")]
    if let Some(path) = outputs.diagram {
        let meta = DiagramMeta {
            collective: spec.collective.to_string(),
            algorithm: spec.algorithm.to_string(),
            topology: topology.to_string(),
            routing: routing.to_owned(),
            size_bytes: spec.size_bytes,
            nodes: topology.p(),
            source: source.to_owned(),
            by_steps: outputs.by_steps,
        };
        diagram::render(events, &meta, path)?;
        eprintln!("wrote the space-time diagram to {}", path.display());
    }
    Ok(())
}

fn run_flow<'a>(
    outputs: FlowOutputs,
    outcome: &'a RunOutcome,
    topology: &Topology,
    predicted: Option<&'a [FlowEvent]>,
    links: Option<LinkModel>,
    schedule: Schedule,
) -> anyhow::Result<Flow<'a>> {
    let routing = links.map(|l| describe_links(&l)).unwrap_or_else(|| "full-speed links".to_owned());
    if let Some(trace) = &outcome.trace {
        let worst = trace.clock_error_us.iter().copied().fold(0.0, f64::max);
        return Ok(Flow {
            events: std::borrow::Cow::Borrowed(&trace.events),
            source: match outcome.spec.dilation {
                dilation if dilation.dilates() => format!(
                    "measured, last iteration, in emulated time (dilated ×{dilation}; clocks aligned to ±{worst:.1} µs)"
                ),
                _ => format!("measured, last iteration (clocks aligned to ±{worst:.0} µs)"),
            },
            routing,
        });
    }
    if let (Some(predicted), Some(links)) = (predicted, links) {
        return Ok(Flow {
            events: std::borrow::Cow::Borrowed(predicted),
            source: "cost model's schedule".to_owned(),
            routing: describe_links(&links),
        });
    }
    anyhow::ensure!(
        outputs.by_steps && outputs.trace.is_none(),
        "this run gathered no flow events; give the links physics (--ts/--th/--tw) to draw the cost model's \
         schedule in time, or --steps for the diagram by step"
    );
    let nominal =
        LinkModel { ts_ns: 1000, th_ns: 0, tw_ps: 0, routing: Routing::Sf, packet_bytes: 1024, ports: Ports::All };
    let events = schedule(&outcome.spec, topology, nominal)?;
    Ok(Flow { events: std::borrow::Cow::Owned(events), source: "cost model's schedule".to_owned(), routing })
}
