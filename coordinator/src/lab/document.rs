//! A run, a schedule (`explain`) or a simulation as the JSON document the lab's page
//! plays: what ran and its verdict (the CLI's own JSON), the topology with its picture's
//! layout (the one `topology --svg` draws), and the message flow joined into messages,
//! each with its hops in emulated nanoseconds (`render::trace::messages`).

use serde_json::{Value, json};
use topocomm_proto::Topology;
use topocomm_proto::flow::FlowEvent;
use topocomm_proto::spec::RunSpec;

use crate::render::picture::PALETTE;
use crate::render::schema;
use crate::render::topology_svg;
use crate::render::trace::{describe_links, messages};
use crate::tools::execute::Executed;

/// What a document shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A run on the cluster, verified.
    Run,
    /// The schedule the cost model makes, nothing run (`explain`).
    Explain,
    /// A run on the simulator's virtual network (`simulate`).
    Simulate,
    /// Simulations at several points (`simulate --nodes a..b`), plotted.
    Scaling,
    /// Runs on the cluster over a range of sizes and algorithms (`sweep`), plotted.
    Sweep,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Run => "run",
            Kind::Explain => "explain",
            Kind::Simulate => "simulate",
            Kind::Scaling => "scaling",
            Kind::Sweep => "sweep",
        }
    }
}

/// The topology: its shape, edges and the layout of its picture.
pub fn topology(topology: &Topology) -> Value {
    json!({
        "kind": topology.kind().to_string(),
        "p": topology.p(),
        "dims": topology.dims(),
        "edges": topology.edges(),
        "diameter": topology.diameter(),
        "layout": topology_svg::layout(topology),
    })
}

/// The message flow of `events`: every message with its source, destination, step,
/// bytes and hops (`[from, to, depart_ns, arrive_ns]`, from the first event), and
/// whether its delivery was recorded.
pub fn flow(events: &[FlowEvent], source: &str) -> Value {
    let origin = events.iter().map(|e| e.at_ns).min().unwrap_or(0);
    let joined = messages(events);
    let span = events.iter().map(|e| e.at_ns - origin).max().unwrap_or(0);
    let list: Vec<Value> = joined
        .iter()
        .map(|m| {
            let hops: Vec<[u64; 4]> = m
                .hops
                .iter()
                .map(|h| [h.from as u64, h.to as u64, h.depart_ns - origin, h.arrive_ns - origin])
                .collect();
            json!({
                "src": m.src, "dst": m.dst, "step": m.step, "bytes": m.bytes, "hops": hops,
                "sent_ns": events[m.send].at_ns - origin,
                "delivered_ns": m.deliver.map(|d| events[d].at_ns - origin),
            })
        })
        .collect();
    json!({ "source": source, "span_ns": span, "messages": list, "palette": PALETTE })
}

/// A document: `kind`, its title, the command's words, the CLI's JSON of the result,
/// the topology and the flow.
pub fn document(kind: Kind, spec: &RunSpec, on: &Topology, args: &[String], result: Value, flow: Value) -> Value {
    let title = format!(
        "{} ({}) on a {on}, {} per node",
        spec.collective,
        spec.algorithm,
        crate::render::quantity::size_text(spec.size_bytes)
    );
    schema::versioned(json!({
        "kind": kind.name(),
        "title": title,
        "args": args,
        "result": result,
        "topology": topology(on),
        "flow": flow,
    }))
}

/// The document of a run that came back from the cluster: the run's trace when it was
/// traced, else the cost model's schedule when the links had physics.
pub fn of_run(executed: &Executed, args: &[String]) -> anyhow::Result<Value> {
    let outcome = &executed.outcome;
    let on = Topology::new(outcome.topology.kind, outcome.topology.p, Some(&outcome.topology.dims))?;
    let links = executed.predict_with.map(|l| describe_links(&l)).unwrap_or_else(|| "full-speed links".to_owned());
    let flow = match (&outcome.trace, &executed.prediction) {
        (Some(recorded), _) => {
            let dilated = outcome.spec.dilation.dilates().then(|| format!(", dilated ×{}", outcome.spec.dilation));
            let source = format!("measured, last iteration, {links}{}", dilated.unwrap_or_default());
            flow(&recorded.events, &source)
        }
        (None, Some(prediction)) => flow(&prediction.events, &format!("cost model's schedule, {links}")),
        (None, None) => flow(&[], "no flow recorded"),
    };
    Ok(document(Kind::Run, &outcome.spec, &on, args, executed.json.clone(), flow))
}
