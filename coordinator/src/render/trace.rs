//! The message flow as a Chrome trace: [`chrome_json`] writes flow events in the Chrome
//! trace-event format that Perfetto (ui.perfetto.dev) and chrome://tracing open: one
//! track per node, a slice per event, and a flow arrow from each send through its
//! forwards to its delivery (the events joined into messages by [`crate::render::messages`]).

use std::collections::HashMap;

use serde_json::{Value, json};
use topocomm_proto::flow::{FlowEvent, FlowKind};

use crate::render::messages::messages;

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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use topocomm_proto::TopologyKind;
    use topocomm_proto::spec::{Algorithm, Collective, Routing};

    use super::*;
    use crate::render::messages::tests::model_run;

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
