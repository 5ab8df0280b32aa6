//! A run, a schedule (`explain`) or a simulation as the JSON document the lab's page
//! plays: what ran and its verdict (the CLI's own JSON), the topology with its picture's
//! layout (the one `topology --svg` draws), and the message flow joined into messages,
//! each with its hops in emulated nanoseconds (`render::messages::messages`).

use serde_json::{Value, json};
use topocomm_proto::Topology;
use topocomm_proto::flow::FlowEvent;
use topocomm_proto::spec::RunSpec;

use crate::render::links::describe_links;
use crate::render::messages::messages;
use crate::render::picture::PALETTE;
use crate::render::schema;
use crate::render::topology_svg;
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
    /// A simulation of more nodes than the page animates, aggregated by step.
    Steps,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Run => "run",
            Kind::Explain => "explain",
            Kind::Simulate => "simulate",
            Kind::Scaling => "scaling",
            Kind::Sweep => "sweep",
            Kind::Steps => "steps",
        }
    }
}

/// The topology: its shape, edges and the layout of its picture.
pub fn topology(topology: &Topology) -> Value {
    json!({
        "kind": topology.kind().to_string(),
        "p": topology.p(),
        "dims": topology.dims(),
        "placement": topology.placement(),
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

/// The message flow of `events` aggregated by step, in step order: per step its
/// messages, their bytes, the busiest link (`[from, to, bytes]`, the directed link that
/// carried the most bytes in the step, the first such when several tie) and the time
/// span its hops took (`start_ns`, `end_ns`, from the flow's first event).
pub fn by_step(events: &[FlowEvent]) -> Vec<Value> {
    use std::collections::BTreeMap;
    let origin = events.iter().map(|e| e.at_ns).min().unwrap_or(0);
    #[derive(Default)]
    struct Bar {
        messages: u64,
        bytes: u64,
        start: Option<u64>,
        end: u64,
        links: BTreeMap<(usize, usize), u64>,
    }
    let mut steps: BTreeMap<u16, Bar> = BTreeMap::new();
    for message in messages(events) {
        let step = steps.entry(message.step).or_default();
        step.messages += 1;
        step.bytes += message.bytes;
        let sent = events[message.send].at_ns - origin;
        step.start = Some(step.start.map_or(sent, |s| s.min(sent)));
        for hop in &message.hops {
            step.end = step.end.max(hop.arrive_ns - origin);
            *step.links.entry((hop.from, hop.to)).or_default() += message.bytes;
        }
        if let Some(delivered) = message.deliver {
            step.end = step.end.max(events[delivered].at_ns - origin);
        }
    }
    steps
        .into_iter()
        .map(|(number, step)| {
            let busiest = step.links.iter().fold(None, |best: Option<(&(usize, usize), &u64)>, link| match best {
                Some((_, bytes)) if bytes >= link.1 => best,
                _ => Some(link),
            });
            json!({
                "step": number, "messages": step.messages, "bytes": step.bytes,
                "busiest_link": busiest.map(|(&(from, to), &bytes)| json!([from, to, bytes])),
                "start_ns": step.start.unwrap_or(0), "end_ns": step.end,
            })
        })
        .collect()
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
    let on = outcome.topology.build()?;
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
