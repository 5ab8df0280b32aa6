//! Space-time diagrams of the message flow: one horizontal lane per node ("node i"),
//! time (or the algorithm's step) running left to right, and an arrow for every link a
//! message crosses, from the sender's lane at the moment it left to the receiver's lane
//! at the moment it arrived. A message over three links is three arrows, the forwarded
//! ones dashed; a dot marks where a message is delivered; the number on each arrow (and
//! its colour) is the message's step, as in the textbook's numbered-arrow figures
//! ([KGGK94 Fig. 3.2]). With `by_steps` the x axis is the step itself: each step is a
//! column and a message's hops share its column (the textbook figure).
//!
//! Works on [`FlowEvent`]s from the cost model or from a real run alike; `explain` and
//! `run --diagram` both come here. Writes SVG, or PNG through [`crate::render::picture`].

use std::path::Path;

use topocomm_proto::flow::FlowEvent;

use crate::render::messages::{self, Message};
use crate::render::picture::{self, Svg, colour, n};

/// What the diagram's title and subtitle say, and how its x axis runs.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagramMeta {
    pub collective: String,
    pub algorithm: String,
    /// The topology as people read it, e.g. "ring of 8 nodes".
    pub topology: String,
    /// The links, e.g. "SF, t_s 200 µs, t_h 20 µs, t_w 10 ns/B" or "full-speed links".
    pub routing: String,
    /// Bytes per node.
    pub size_bytes: u64,
    /// Lanes to draw (every node, even one without events).
    pub nodes: usize,
    /// Where the events come from, e.g. "cost model's schedule" or "measured".
    pub source: String,
    /// Place events by step number instead of time.
    pub by_steps: bool,
}

/// Writes the diagram of `events` to `path` (`.svg` or `.png`).
pub fn render(events: &[FlowEvent], meta: &DiagramMeta, path: &Path) -> anyhow::Result<()> {
    picture::Format::of(path)?;
    picture::save(&svg(events, meta), path)
}

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 96.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 104.0;
/// Below the lanes: the axis, its title and the legend.
const BOTTOM: f64 = 128.0;
/// Above this many hops, arrows carry no step numbers (the colours still tell).
const MAX_LABELLED_HOPS: usize = 160;

/// The diagram as SVG text.
///
/// Elements carry classes that tests and stylesheets can find: `lane` (one per node),
/// `hop` (one per link crossing; `forwarded` too when an intermediate node sent it
/// on), `deliver` (one per delivered message), `step-label`, `legend`.
pub fn svg(events: &[FlowEvent], meta: &DiagramMeta) -> String {
    let messages = messages::messages(events);
    let nodes = meta.nodes.max(events.iter().map(|e| e.node + 1).max().unwrap_or(0)).max(1);
    let lane_gap = (560.0 / nodes as f64).clamp(30.0, 60.0);
    let height = TOP + lane_gap * nodes as f64 + BOTTOM;
    let lane_y = |node: usize| TOP + lane_gap * (node as f64 + 0.5);
    let (x0, x1) = (LEFT, WIDTH - RIGHT);
    let axis = Axis::of(&messages, events, meta.by_steps);
    let x_of = |value: f64| x0 + (value - axis.lo) / (axis.hi - axis.lo) * (x1 - x0);

    let mut svg = Svg::new(WIDTH, height);
    let title = format!(
        "{} ({}) on a {}, {} per node",
        meta.collective,
        meta.algorithm,
        meta.topology,
        crate::render::quantity::size_text(meta.size_bytes)
    );
    svg.text((x0, 34.0), 20.0, &title, r##"font-weight="bold" fill="#222""##);
    let hops: usize = messages.iter().map(|m| m.hops.len()).sum();
    let forwarded = messages.iter().map(|m| m.hops.len().saturating_sub(1)).sum::<usize>();
    let placed = if meta.by_steps { "placed by step" } else { "placed in time" };
    svg.text((x0, 58.0), 13.0, &format!("{}; {}", meta.routing, meta.source), r##"fill="#555""##);
    let counts = format!(
        "{}, {} ({forwarded} forwarded); {placed}",
        crate::render::quantity::count(messages.len() as u64, "message"),
        crate::render::quantity::count(hops as u64, "link crossing")
    );
    svg.text((x0, 77.0), 13.0, &counts, r##"fill="#555""##);

    // Grid: step columns or time ticks, behind everything.
    let (lanes_top, lanes_bottom) = (TOP, TOP + lane_gap * nodes as f64);
    svg.open(r#"class="axis""#);
    for tick in &axis.ticks {
        let x = x_of(tick.at);
        svg.line((x, lanes_top), (x, lanes_bottom), r##"stroke="#e4e4e4" stroke-width="1""##);
        svg.line((x, lanes_bottom), (x, lanes_bottom + 5.0), r##"stroke="#444" stroke-width="1""##);
        if let Some(label) = &tick.label {
            let lx = if meta.by_steps { x_of(tick.at + 0.5) } else { x };
            svg.text((lx, lanes_bottom + 20.0), 12.0, label, r##"text-anchor="middle" fill="#333""##);
        }
    }
    svg.line((x0, lanes_bottom), (x1, lanes_bottom), r##"stroke="#444" stroke-width="1""##);
    svg.text(((x0 + x1) / 2.0, lanes_bottom + 42.0), 13.0, &axis.title, r##"text-anchor="middle" fill="#333""##);
    svg.close();

    for node in 0..nodes {
        let y = lane_y(node);
        svg.open(r#"class="lane""#);
        svg.line((x0, y), (x1, y), r##"stroke="#b8b8b8" stroke-width="1.2""##);
        svg.text((x0 - 12.0, y + 4.5), 13.0, &format!("node {node}"), r##"text-anchor="end" fill="#222""##);
        svg.close();
    }

    // Hops, longest first so that short arrows stay on top.
    let mut drawn: Vec<(&Message, usize)> =
        messages.iter().flat_map(|m| (0..m.hops.len()).map(move |k| (m, k))).collect();
    drawn.sort_by_key(|(m, k)| std::cmp::Reverse(m.hops[*k].from.abs_diff(m.hops[*k].to)));
    let labelled = hops <= MAX_LABELLED_HOPS;
    let mut labels = Vec::new();
    for (message, k) in drawn {
        let hop = &message.hops[k];
        let (start, end) = axis.place(message, k);
        let (from, to) = ((x_of(start), lane_y(hop.from)), (x_of(end), lane_y(hop.to)));
        let step_colour = colour(message.step.saturating_sub(1) as usize);
        let class = if k == 0 { "hop" } else { "hop forwarded" };
        let dash = if k == 0 { "" } else { r#" stroke-dasharray="6 4""# };
        // Stop the shaft at the arrowhead's base so its tip lands on the lane.
        let shortened = shorten(from, to, 2.0);
        svg.line(
            from,
            shortened,
            &format!(
                r#"class="{class}" stroke="{step_colour}" stroke-width="1.8"{dash} marker-end="url(#head-{})""#,
                message.step.saturating_sub(1) as usize % picture::PALETTE.len()
            ),
        );
        if labelled && k == 0 {
            labels.push(((from.0 * 0.6 + to.0 * 0.4, from.1 * 0.6 + to.1 * 0.4), message.step, step_colour));
        }
    }
    for message in messages.iter().filter(|m| m.deliver.is_some() && !m.hops.is_empty()) {
        let last = message.hops.len() - 1;
        let (_, end) = axis.place(message, last);
        svg.circle(
            (x_of(end), lane_y(message.dst)),
            3.2,
            &format!(r#"class="deliver" fill="{}""#, colour(message.step.saturating_sub(1) as usize)),
        );
    }
    for ((x, y), step, step_colour) in labels {
        svg.open(r#"class="step-label""#);
        svg.circle((x, y), 8.5, &format!(r#"fill="white" stroke="{step_colour}" stroke-width="1.5""#));
        svg.text((x, y + 3.8), 10.5, &step.to_string(), r##"text-anchor="middle" font-weight="bold" fill="#222""##);
        svg.close();
    }

    legend(&mut svg, x0, lanes_bottom + 70.0, labelled);
    let defs: String = (0..picture::PALETTE.len())
        .map(|i| {
            format!(
                r#"<marker id="head-{i}" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="7" markerHeight="7" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{}"/></marker>"#,
                colour(i)
            )
        })
        .collect();
    svg.finish(&defs)
}

/// The end of the segment `from -> to` pulled back by `by` units.
fn shorten(from: (f64, f64), to: (f64, f64), by: f64) -> (f64, f64) {
    let (dx, dy) = (to.0 - from.0, to.1 - from.1);
    let length = (dx * dx + dy * dy).sqrt();
    if length <= by * 2.0 {
        return to;
    }
    (to.0 - dx / length * by, to.1 - dy / length * by)
}

fn legend(svg: &mut Svg, x: f64, y: f64, labelled: bool) {
    svg.open(r#"class="legend""#);
    let ink = colour(0);
    let mut at = x;
    svg.line((at, y), (at + 34.0, y), &format!(r#"stroke="{ink}" stroke-width="1.8" marker-end="url(#head-0)""#));
    svg.text((at + 42.0, y + 4.5), 12.5, "sent by its source (one link)", r##"fill="#222""##);
    at += 250.0;
    svg.line(
        (at, y),
        (at + 34.0, y),
        &format!(r#"stroke="{ink}" stroke-width="1.8" stroke-dasharray="6 4" marker-end="url(#head-0)""#),
    );
    svg.text((at + 42.0, y + 4.5), 12.5, "forwarded by an intermediate node", r##"fill="#222""##);
    at += 290.0;
    svg.circle((at + 4.0, y), 3.2, &format!(r#"fill="{ink}""#));
    svg.text((at + 14.0, y + 4.5), 12.5, "delivered", r##"fill="#222""##);
    at += 100.0;
    let what = if labelled { "step (number and colour)" } else { "colour: step" };
    for i in 0..3 {
        svg.circle(
            (at + 8.0 + i as f64 * 20.0, y),
            8.5,
            &format!(r#"fill="white" stroke="{}" stroke-width="1.5""#, colour(i)),
        );
        svg.text(
            (at + 8.0 + i as f64 * 20.0, y + 3.8),
            10.5,
            &(i + 1).to_string(),
            r##"text-anchor="middle" font-weight="bold" fill="#222""##,
        );
    }
    svg.text((at + 68.0, y + 4.5), 12.5, what, r##"fill="#222""##);
    svg.close();
}

/// A tick of the x axis: where, and what it says.
struct Tick {
    at: f64,
    label: Option<String>,
}

/// The x axis: time in a readable unit, or steps.
struct Axis {
    by_steps: bool,
    lo: f64,
    hi: f64,
    /// Nanoseconds per axis unit (time axes).
    scale: f64,
    ticks: Vec<Tick>,
    title: String,
}

impl Axis {
    fn of(messages: &[Message], events: &[FlowEvent], by_steps: bool) -> Axis {
        if by_steps {
            let last = messages.iter().map(|m| m.step).max().unwrap_or(1).max(1) as f64;
            let ticks = (0..=last as usize)
                .map(|s| Tick { at: s as f64, label: (s < last as usize).then(|| format!("step {}", s + 1)) })
                .collect();
            return Axis { by_steps, lo: 0.0, hi: last, scale: 1.0, ticks, title: "step".to_owned() };
        }
        let first = events.iter().map(|e| e.at_ns).min().unwrap_or(0) as f64;
        let last = events.iter().map(|e| e.at_ns).max().unwrap_or(0) as f64;
        let span = (last - first.min(0.0)).max(1.0);
        let (scale, unit) = if span < 10_000.0 {
            (1.0, "ns")
        } else if span < 10_000_000.0 {
            (1e3, "µs")
        } else {
            (1e6, "ms")
        };
        let (lo, hi) = (first.min(0.0) / scale, last / scale * 1.02 + f64::EPSILON);
        let ticks =
            picture::ticks(lo, hi, 8).into_iter().map(|at| Tick { at, label: Some(n(at).to_string()) }).collect();
        Axis { by_steps, lo, hi, scale, ticks, title: format!("time ({unit})") }
    }

    /// Where hop `k` of `message` starts and ends on this axis.
    fn place(&self, message: &Message, k: usize) -> (f64, f64) {
        if self.by_steps {
            let column = message.step.saturating_sub(1) as f64;
            let count = message.hops.len() as f64;
            // Inset from the column's edges so consecutive steps do not touch.
            let (inset, width) = (0.08, 0.84);
            return (column + inset + width * k as f64 / count, column + inset + width * (k + 1) as f64 / count);
        }
        let hop = &message.hops[k];
        (hop.depart_ns as f64 / self.scale, hop.arrive_ns as f64 / self.scale)
    }
}

#[cfg(test)]
mod tests {
    use topocomm_proto::TopologyKind;
    use topocomm_proto::flow::FlowKind;
    use topocomm_proto::spec::{Algorithm, Collective, Routing};

    use super::*;
    use crate::render::messages::tests::model_run;

    fn meta(p: usize, by_steps: bool) -> DiagramMeta {
        DiagramMeta {
            collective: "broadcast".into(),
            algorithm: "ring".into(),
            topology: format!("ring of {p} nodes"),
            routing: "SF".into(),
            size_bytes: 65536,
            nodes: p,
            source: "cost model's schedule".into(),
            by_steps,
        }
    }

    fn count_class(doc: &roxmltree::Document, class: &str) -> usize {
        doc.descendants().filter(|n| n.attribute("class").is_some_and(|c| c.split(' ').any(|c| c == class))).count()
    }

    #[test]
    fn a_ring_broadcast_has_a_lane_per_node_and_an_arrow_per_link() {
        let (_, prediction) =
            model_run(Collective::Broadcast, Algorithm::Ring, TopologyKind::Ring, 8, 65536, Routing::Sf);
        for by_steps in [false, true] {
            let text = svg(&prediction.events, &meta(8, by_steps));
            let doc = roxmltree::Document::parse(&text).expect("valid XML");
            assert_eq!(count_class(&doc, "lane"), 8);
            assert_eq!(count_class(&doc, "hop"), 7);
            assert_eq!(count_class(&doc, "forwarded"), 0);
            assert_eq!(count_class(&doc, "deliver"), 7);
            assert_eq!(count_class(&doc, "step-label"), 7);
            let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
            assert!(texts.contains(&"node 7"));
            assert!(texts.iter().any(|t| t.contains("broadcast (ring) on a ring of 8 nodes, 64 KiB per node")));
            assert_eq!(texts.contains(&"step 4"), by_steps);
        }
    }

    #[test]
    fn forwarded_hops_are_drawn_one_arrow_per_link() {
        let (_, prediction) =
            model_run(Collective::Broadcast, Algorithm::Linear, TopologyKind::Ring, 16, 4096, Routing::Ct);
        let crossings = prediction.events.iter().filter(|e| e.kind != FlowKind::Send).count();
        let forwards = prediction.events.iter().filter(|e| e.kind == FlowKind::Forward).count();
        let text = svg(&prediction.events, &meta(16, false));
        let doc = roxmltree::Document::parse(&text).unwrap();
        assert_eq!(count_class(&doc, "lane"), 16);
        assert_eq!(count_class(&doc, "hop"), crossings);
        assert_eq!(count_class(&doc, "forwarded"), forwards);
        assert!(forwards > 0);
    }

    #[test]
    fn the_png_has_the_svg_size() {
        let (_, prediction) =
            model_run(Collective::Broadcast, Algorithm::Ring, TopologyKind::Ring, 8, 1024, Routing::Sf);
        let dir = std::env::temp_dir().join(format!("topocomm-diagram-{}", std::process::id()));
        let path = dir.join("ring.png");
        render(&prediction.events, &meta(8, false), &path).unwrap();
        let decoder = ::png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
        let reader = decoder.read_info().unwrap();
        let info = reader.info();
        let height = (TOP + 60.0 * 8.0 + BOTTOM) as u32;
        assert_eq!((info.width, info.height), (WIDTH as u32, height));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
