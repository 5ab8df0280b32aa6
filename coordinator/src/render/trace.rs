//! The message flow, as messages and as a Chrome trace.
//!
//! Routers record flow events one node at a time: a send where a message starts, a
//! forward at each node that passes it on, a delivery where it ends. [`messages`] joins
//! them back into messages, each with its hops (one per link crossed); the space-time
//! diagram draws those hops. [`chrome_json`] writes the events in the Chrome
//! trace-event format that Perfetto (ui.perfetto.dev) and chrome://tracing open: one
//! track per node, a slice per event, and a flow arrow from each send through its
//! forwards to its delivery.
//!
//! Everything here works on a list of [`FlowEvent`]s, whether the cost model made them
//! (on its virtual clock) or the nodes of a real run recorded them (moved onto the
//! coordinator's clock). Nothing here runs anything.

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};
use topocomm_proto::Topology;
use topocomm_proto::control::RunOutcome;
use topocomm_proto::flow::{FlowEvent, FlowKind};
use topocomm_proto::spec::{LinkModel, Routing, RunSpec};
use topocomm_proto::topology::NodeId;

#[cfg(feature = "pictures")]
use crate::render::diagram::{self, DiagramMeta};
use crate::render::quantity::size_text;

/// One link crossing of a message: it left `from` at `depart_ns` and reached `to` at
/// `arrive_ns` (its forward there, or its delivery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    pub from: NodeId,
    pub to: NodeId,
    pub depart_ns: u64,
    pub arrive_ns: u64,
    /// Index of the event it left with (a send or a forward).
    pub depart: usize,
    /// Index of the event it arrived with (a forward or the delivery).
    pub arrive: usize,
}

/// A message from its source to its destination, as the events tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub src: NodeId,
    pub dst: NodeId,
    pub tag: u32,
    pub step: u16,
    pub bytes: u64,
    /// Index of its send event.
    pub send: usize,
    /// Index of its delivery event (`None`: the events end before it arrived).
    pub deliver: Option<usize>,
    /// Its hops in order; empty for a message a node sends itself.
    pub hops: Vec<Hop>,
}

/// What identifies a message in flight (the same for every event it causes).
type Key = (u64, u32, NodeId, NodeId, u32, u16);

fn key(event: &FlowEvent) -> Key {
    (event.run, event.iteration, event.src, event.dst, event.tag, event.step)
}

/// Joins `events` into messages, in the order of their sends.
///
/// Routes are deterministic and links keep order, so the n-th time a message with a
/// given identity (run, iteration, source, destination, tag, step) reaches a node is
/// the n-th time it left the node before it; events are paired that way, so the join
/// does not rely on clocks agreeing across nodes. A message whose later events are
/// missing ends early (`deliver` is `None`).
pub fn messages(events: &[FlowEvent]) -> Vec<Message> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| events[i].at_ns);
    // Arrivals (forwards and deliveries) waiting to be paired, per node and identity.
    let mut arrivals: HashMap<(NodeId, Key), VecDeque<usize>> = HashMap::new();
    for &i in &order {
        if events[i].kind != FlowKind::Send {
            arrivals.entry((events[i].node, key(&events[i]))).or_default().push_back(i);
        }
    }
    let mut out = Vec::new();
    for &send in order.iter().filter(|&&i| events[i].kind == FlowKind::Send) {
        let first = &events[send];
        let identity = key(first);
        let mut message = Message {
            src: first.src,
            dst: first.dst,
            tag: first.tag,
            step: first.step,
            bytes: first.bytes,
            send,
            deliver: None,
            hops: Vec::new(),
        };
        let mut at = send;
        loop {
            let here = &events[at];
            // A message to oneself is delivered where it was sent, over no link.
            let next = here.next.unwrap_or(here.node);
            let Some(arrival) = arrivals.get_mut(&(next, identity)).and_then(VecDeque::pop_front) else { break };
            if next != here.node {
                message.hops.push(Hop {
                    from: here.node,
                    to: next,
                    depart_ns: here.at_ns,
                    arrive_ns: events[arrival].at_ns,
                    depart: at,
                    arrive: arrival,
                });
            }
            if events[arrival].kind == FlowKind::Deliver {
                message.deliver = Some(arrival);
                break;
            }
            at = arrival;
        }
        out.push(message);
    }
    out
}

/// What a trace says about itself: the title of its process and free-form details.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceMeta {
    /// E.g. "broadcast (ring) on a ring of 8 nodes, 64 KiB per node — cost model".
    pub title: String,
    /// Nodes of the run: every one gets a track, even one without events.
    pub nodes: usize,
    /// Written to the trace's `otherData` (Perfetto shows it under "Info and stats").
    pub details: Value,
}

/// The Chrome trace-event JSON of `events`.
///
/// - One process (pid 1, named by `meta.title`) with one thread per node (tid = node
///   id, named "node i", sorted by id).
/// - One complete slice ("ph":"X") per node and instant: events a node recorded at the
///   same nanosecond share a slice (so slices never overlap on a track); it lasts until
///   the slowest of its messages reaches the next node, but ends before the node's next
///   slice. Its args list the events.
/// - One flow per message that crosses a link: "ph":"s" at its send, "ph":"t" at each
///   forward, "ph":"f" at its delivery, all with the message's id and bound to the
///   enclosing slice ("bp":"e"). A message whose delivery is missing gets no flow.
///
/// Times are µs (the format's unit) with ns precision.
pub fn chrome_json(events: &[FlowEvent], meta: &TraceMeta) -> Value {
    let messages = messages(events);
    // When each event's message reaches the next node (sends and forwards).
    let mut reaches: HashMap<usize, u64> = HashMap::new();
    for hop in messages.iter().flat_map(|m| &m.hops) {
        reaches.insert(hop.depart, hop.arrive_ns);
    }
    let span = events.iter().map(|e| e.at_ns).max().unwrap_or(0).max(1);
    // A slice never narrower than this, so a lone delivery stays visible.
    let thinnest = (span / 400).max(1);
    let us = |ns: u64| ns as f64 / 1e3;

    let mut out = vec![json!({"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": meta.title}})];
    let nodes = meta.nodes.max(events.iter().map(|e| e.node + 1).max().unwrap_or(0));
    for node in 0..nodes {
        out.push(
            json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": node, "args": {"name": format!("node {node}")}}),
        );
        out.push(json!({"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": node, "args": {"sort_index": node}}));
    }

    let mut timed = Vec::new();
    for node in 0..nodes {
        let mut mine: Vec<usize> = (0..events.len()).filter(|&i| events[i].node == node).collect();
        mine.sort_by_key(|&i| events[i].at_ns);
        let groups: Vec<&[usize]> = mine.chunk_by(|&a, &b| events[a].at_ns == events[b].at_ns).collect();
        for (g, group) in groups.iter().enumerate() {
            let start = events[group[0]].at_ns;
            let natural = group.iter().map(|i| reaches.get(i).copied().unwrap_or(start)).max().unwrap_or(start);
            let mut dur = natural.saturating_sub(start).max(thinnest);
            if let Some(next) = groups.get(g + 1) {
                // Stop short of the next slice so that the two never touch.
                let gap = events[next[0]].at_ns - start;
                if dur >= gap {
                    dur = gap - gap / 20;
                }
            }
            let names: Vec<String> = group.iter().map(|&i| slice_name(&events[i])).collect();
            let name = if names.len() <= 3 { names.join(" + ") } else { format!("{} events", names.len()) };
            let args: Vec<Value> = group.iter().map(|&i| event_args(&events[i])).collect();
            timed.push((
                start,
                0,
                json!({"ph": "X", "name": name, "cat": "message", "pid": 1, "tid": node,
                       "ts": us(start), "dur": us(dur.max(1)), "args": {"events": args}}),
            ));
        }
    }
    for (id, message) in messages.iter().enumerate().filter(|(_, m)| m.deliver.is_some() && !m.hops.is_empty()) {
        let id = id + 1;
        let name = format!("{} → {}", message.src, message.dst);
        let flow = |ph: &str, event: &FlowEvent| {
            json!({"ph": ph, "name": name, "cat": "flow", "id": id, "pid": 1, "tid": event.node,
                   "ts": us(event.at_ns), "bp": "e"})
        };
        timed.push((events[message.send].at_ns, 1, flow("s", &events[message.send])));
        for hop in &message.hops[..message.hops.len() - 1] {
            timed.push((events[hop.arrive].at_ns, 1, flow("t", &events[hop.arrive])));
        }
        let deliver = message.deliver.expect("filtered on delivery");
        timed.push((events[deliver].at_ns, 1, flow("f", &events[deliver])));
    }
    // Slices before the flow events that bind to them.
    timed.sort_by_key(|(at, order, _)| (*at, *order));
    out.extend(timed.into_iter().map(|(_, _, event)| event));
    json!({"traceEvents": out, "displayTimeUnit": "ns", "otherData": meta.details})
}

fn slice_name(event: &FlowEvent) -> String {
    match event.kind {
        FlowKind::Send => format!("send → {}", event.dst),
        FlowKind::Forward => format!("forward {} → {}", event.src, event.dst),
        FlowKind::Deliver => format!("deliver from {}", event.src),
    }
}

fn event_args(event: &FlowEvent) -> Value {
    json!({
        "kind": event.kind,
        "src": event.src,
        "dst": event.dst,
        "tag": event.tag,
        "step": event.step,
        "hops": event.hops,
        "bytes": event.bytes,
        "next": event.next,
        "iteration": event.iteration,
    })
}

/// The link physics in a few words, e.g. "SF, t_s 200 µs, t_h 20 µs, t_w 10 ns/B".
pub fn describe_links(links: &LinkModel) -> String {
    let routing = match links.routing {
        Routing::Sf => "SF".to_owned(),
        Routing::Ct if links.packet_bytes == 0 => "CT (whole frames)".to_owned(),
        Routing::Ct => format!("CT ({} packets)", size_text(links.packet_bytes as u64)),
    };
    format!(
        "{routing}, t_s {} µs, t_h {} µs, t_w {} ns/B",
        links.ts_ns as f64 / 1e3,
        links.th_ns as f64 / 1e3,
        links.tw_ps as f64 / 1e3
    )
}

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
    let topology = Topology::new(outcome.topology.kind, outcome.topology.p, Some(&outcome.topology.dims))?;
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
    let nominal = LinkModel { ts_ns: 1000, th_ns: 0, tw_ps: 0, routing: Routing::Sf, packet_bytes: 1024 };
    let events = schedule(&outcome.spec, topology, nominal)?;
    Ok(Flow { events: std::borrow::Cow::Owned(events), source: "cost model's schedule".to_owned(), routing })
}

/// Writes `value` as JSON to `path` (`-`: standard output).
pub fn write_json(value: &Value, path: &Path) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    if path.as_os_str() == "-" {
        return crate::render::output::print(text);
    }
    topocomm_collectives::files::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashSet;

    use crate::tools::model::{self, Prediction};

    use topocomm_proto::TopologyKind;
    use topocomm_proto::spec::{Algorithm, Collective};

    use super::*;

    /// The cost model's events of `collective` (`algorithm`) on `topology`.
    pub(crate) fn model_run(
        collective: Collective,
        algorithm: Algorithm,
        kind: TopologyKind,
        p: usize,
        size: u64,
        routing: Routing,
    ) -> (Topology, Prediction) {
        let topology = Topology::new(kind, p, None).unwrap();
        let links = LinkModel { ts_ns: 200_000, th_ns: 20_000, tw_ps: 10_000, routing, packet_bytes: 1024 };
        let spec = RunSpec { size_bytes: size, emulation: Some(links), ..RunSpec::new(collective, algorithm) };
        let prediction = model::predict(&spec, &topology, links).unwrap();
        (topology, prediction)
    }

    #[test]
    fn a_ring_broadcast_joins_into_one_message_per_link() {
        let (_, prediction) =
            model_run(Collective::Broadcast, Algorithm::Ring, TopologyKind::Ring, 8, 1024, Routing::Sf);
        let messages = messages(&prediction.events);
        assert_eq!(messages.len(), 7, "{messages:#?}");
        for m in &messages {
            assert!(m.deliver.is_some(), "{m:?}");
            assert_eq!(m.hops.len(), 1, "the ring broadcast only talks to neighbours: {m:?}");
            assert!(m.hops[0].arrive_ns > m.hops[0].depart_ns);
        }
        // Steps 1..=4: two messages leave node 0 at step 1, the last one lands in step 4.
        assert_eq!(messages.iter().map(|m| m.step).max(), Some(4));
        assert_eq!(messages.iter().filter(|m| m.step == 1).count(), 2);
    }

    #[test]
    fn forwarded_messages_keep_every_hop() {
        // Linear broadcast on a ring: the root sends to each node over the shorter way.
        let (topology, prediction) =
            model_run(Collective::Broadcast, Algorithm::Linear, TopologyKind::Ring, 8, 512, Routing::Sf);
        let messages = messages(&prediction.events);
        assert_eq!(messages.len(), 7);
        for m in &messages {
            let route = topology.route(m.src, m.dst);
            let walked: Vec<NodeId> = std::iter::once(m.src).chain(m.hops.iter().map(|h| h.to)).collect();
            assert_eq!(walked, route, "{m:?}");
            for pair in m.hops.windows(2) {
                assert_eq!(pair[0].arrive, pair[1].depart);
                assert!(pair[0].arrive_ns <= pair[1].arrive_ns);
            }
        }
        assert!(messages.iter().any(|m| m.hops.len() == 4));
    }

    #[test]
    fn the_chrome_trace_has_a_track_per_node_and_matched_flows() {
        let (topology, prediction) =
            model_run(Collective::Allgather, Algorithm::Hypercube, TopologyKind::Ring, 8, 4096, Routing::Ct);
        let meta = TraceMeta { title: "allgather".into(), nodes: topology.p(), details: json!({"k": 1}) };
        let trace = chrome_json(&prediction.events, &meta);
        // It survives a round trip through text, as a viewer reads it.
        let trace: Value = serde_json::from_str(&trace.to_string()).unwrap();
        let events = trace["traceEvents"].as_array().unwrap();
        let threads: HashSet<u64> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .map(|e| e["tid"].as_u64().unwrap())
            .collect();
        assert_eq!(threads, (0..8).collect());
        assert!(events.iter().filter(|e| e["ph"] == "X").all(|e| e["pid"] == 1 && e["dur"].as_f64().unwrap() > 0.0));
        let of = |ph: &str| -> Vec<&Value> { events.iter().filter(|e| e["ph"] == ph).collect() };
        let (starts, ends) = (of("s"), of("f"));
        let crossing = prediction.events.iter().filter(|e| e.kind == FlowKind::Send && e.next.is_some()).count();
        assert_eq!(starts.len(), crossing);
        assert_eq!(ends.len(), crossing);
        assert!(!of("t").is_empty(), "hypercube exchanges on a ring forward");
        let ids: HashSet<u64> = starts.iter().map(|e| e["id"].as_u64().unwrap()).collect();
        assert_eq!(ids.len(), starts.len(), "flow ids are unique");
        for start in &starts {
            let end = ends.iter().find(|e| e["id"] == start["id"]).expect("every flow ends");
            assert!(end["ts"].as_f64() >= start["ts"].as_f64());
        }
        // Every flow event sits inside a slice of its track (so viewers can bind it).
        let slices = of("X");
        for flow in starts.iter().chain(&ends).chain(&of("t")) {
            let ts = flow["ts"].as_f64().unwrap();
            assert!(
                slices.iter().any(|s| s["tid"] == flow["tid"]
                    && s["ts"].as_f64().unwrap() <= ts
                    && ts < s["ts"].as_f64().unwrap() + s["dur"].as_f64().unwrap()),
                "{flow}"
            );
        }
        // Slices on one track never overlap.
        for node in 0..8u64 {
            let mut mine: Vec<(f64, f64)> = slices
                .iter()
                .filter(|s| s["tid"] == node)
                .map(|s| (s["ts"].as_f64().unwrap(), s["ts"].as_f64().unwrap() + s["dur"].as_f64().unwrap()))
                .collect();
            mine.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert!(mine.windows(2).all(|w| w[0].1 <= w[1].0), "node {node}: {mine:?}");
        }
        assert_eq!(trace["otherData"]["k"], 1);
    }

    #[test]
    fn a_truncated_message_gets_no_flow() {
        let (topology, mut prediction) =
            model_run(Collective::Broadcast, Algorithm::Linear, TopologyKind::Ring, 4, 64, Routing::Sf);
        prediction.events.retain(|e| !(e.kind == FlowKind::Deliver && e.node == 2));
        let meta = TraceMeta { title: "t".into(), nodes: topology.p(), details: Value::Null };
        let trace = chrome_json(&prediction.events, &meta);
        let count = |ph: &str| trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == ph).count();
        assert_eq!(count("s"), 2);
        assert_eq!(count("f"), 2);
    }
}
