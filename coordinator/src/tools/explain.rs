//! `topocomm explain`: an algorithm's schedule step by step and the cost model's time,
//! without running anything. The schedule is the model's own (`model::predict` runs the
//! real algorithm on the real router on a paused clock), so what is printed is what a run
//! with the same link physics does: who sends how many bytes to whom in each step, over
//! which route, when each message leaves and arrives, and which link carries the most.
//!
//! It only reads the command line and the model; it starts no cluster. Like `simulate`,
//! it estimates the model's memory before it starts and refuses what would not fit, and
//! a watcher stops the model past `--memory-limit` or past [`MOST_MESSAGES_EXPLAINED`]
//! recorded messages ([`explain_within`], which the lab calls too).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::time::Duration;

use std::sync::Arc;

use anyhow::{Context, bail};
use bytesize::ByteSize;
use clap::Args;
use serde_json::json;
use topocomm_collectives::simulator::spec::RunFailure;
use topocomm_collectives::simulator::{LiveCounts, SimulationError};
use topocomm_proto::flow::{FlowEvent, FlowKind};
use topocomm_proto::spec::{Algorithm, LinkModel, Ports, Routing, RunSpec};
use topocomm_proto::topology::Flow;
use topocomm_proto::{NodeId, Topology, catalogue};

use crate::control::request::{self, CollectiveArgs, Emulated, LinkArgs, Repetition};
use crate::control::tuning::TuningArgs;
use crate::render::output;
use crate::tools::goal_out;
use crate::tools::memory::{self, Exceeded, Limits, MemoryWatch};
use crate::tools::model::{self, ModelError, Prediction};
use topocomm_collectives::simulator::spec::with_known;
use topocomm_collectives::tuning::Tuning;

#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub what: CollectiveArgs,
    /// Print JSON (the schedule's messages and the model's time) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the schedule as GOAL (LogGOPSim's text: per node, its sends and
    /// receives in order, with the dependencies that order them) to FILE.
    #[arg(long, value_name = "FILE")]
    pub goal: Option<std::path::PathBuf>,
    /// Stop the model once this process holds more than this much memory (B, KiB, MiB,
    /// GiB; default: what it held when the model began plus nine tenths of what the
    /// machine then had available), with an error naming the figures.
    #[arg(long, value_name = "SIZE", value_parser = crate::control::parse::parse_size)]
    pub memory_limit: Option<u64>,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// The most messages `explain` records and shows: a schedule of more (an all-to-all of
/// 4,096 nodes sends 16.8 million) would take gigabytes to record and pages to print;
/// `simulate` runs it without recording. An all-to-all of 1,024 nodes (1,047,552
/// messages) is explained.
pub const MOST_MESSAGES_EXPLAINED: u64 = 1 << 20;

/// One iteration, nothing to dump: the model runs the schedule once.
const ONCE: Repetition = Repetition { warmup: 0, iterations: 1, timeout: Duration::from_secs(30), dump: false };

/// The physics explained with when the user gives no --ts/--th/--tw: t_s 100 µs,
/// t_h 10 µs, t_w 10 ns per byte (the user's --routing and --packet are kept).
const DEFAULT_TS_NS: u64 = 100_000;
const DEFAULT_TH_NS: u64 = 10_000;
const DEFAULT_TW_PS: u64 = 10_000;

/// Messages printed per step; the rest are counted ("... and K more").
const LINES_PER_STEP: usize = 12;

/// Prints the schedule `args` describes, as text or (`--json`) one JSON object.
pub fn print(args: &ExplainArgs) -> anyhow::Result<()> {
    let limit = args.memory_limit.or_else(memory::default_memory_limit);
    let explained = explain_within(&args.what, &*args.tuning.load()?, limit)?;
    if let Some(path) = &args.goal {
        let written = goal_out::write(&explained.spec, &explained.topology, explained.links, path)?;
        eprintln!("{written}");
    }
    let text = if args.json {
        serde_json::to_string_pretty(&crate::render::schema::versioned(to_json(&explained)))? + "\n"
    } else {
        to_text(&explained)
    };
    output::print(text)
}

/// Where the link physics of an explanation come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhysicsSource {
    /// --ts/--th/--tw on the command line.
    Given,
    /// `--ts auto`: what `topocomm calibrate` fitted.
    Calibrated,
    /// None given: the documented defaults.
    Default,
}

impl PhysicsSource {
    pub fn name(self) -> &'static str {
        match self {
            PhysicsSource::Given => "given",
            PhysicsSource::Calibrated => "calibration",
            PhysicsSource::Default => "default",
        }
    }
}

/// One message of the schedule, on the model's clock.
#[derive(Debug, Clone, PartialEq)]
struct Message {
    step: u16,
    src: NodeId,
    dst: NodeId,
    bytes: u64,
    /// The topology's route, both ends included.
    route: Vec<NodeId>,
    sent_ns: u64,
    /// `None` only if the model recorded no delivery (it always should).
    delivered_ns: Option<u64>,
}

impl Message {
    fn hops(&self) -> usize {
        self.route.len() - 1
    }
}

/// The bytes one directed link carries in the whole schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LinkLoad {
    from: NodeId,
    to: NodeId,
    bytes: u64,
    messages: u64,
}

/// Everything `explain` shows.
#[derive(Debug)]
pub(crate) struct Explained {
    /// The spec with its algorithm resolved.
    pub(crate) spec: RunSpec,
    /// The algorithm as the user named it (`auto` before it was resolved).
    requested: Algorithm,
    pub(crate) topology: Topology,
    pub(crate) links: LinkModel,
    source: PhysicsSource,
    pub(crate) prediction: Prediction,
    schedule: Vec<Message>,
    busiest: Option<LinkLoad>,
}

/// Plans, validates and predicts the run `what` describes, within the default memory
/// limit ([`explain_within`]).
#[cfg(test)]
pub(crate) fn explain(what: &CollectiveArgs, tuning: &Tuning) -> anyhow::Result<Explained> {
    explain_within(what, tuning, memory::default_memory_limit())
}

/// Plans, validates and predicts the run `what` describes: refused before the model
/// starts where its memory estimate (simulate's, with data: the model runs on zeros)
/// exceeds what the machine has available or `memory_limit`; stopped, with an error
/// naming the figures, where the process passes `memory_limit` (`None`: no limit) or the
/// schedule passes [`MOST_MESSAGES_EXPLAINED`] messages.
pub(crate) fn explain_within(
    what: &CollectiveArgs,
    tuning: &Tuning,
    memory_limit: Option<u64>,
) -> anyhow::Result<Explained> {
    let planned = request::plan(what, ONCE)?;
    let request = planned.request;
    let topology = what.shape.topology_of(what.nodes)?;
    let p = topology.p();
    let requested = request.spec.algorithm;
    let (links, source) = physics(planned.predict_with, &what.links)?;
    let algorithm =
        with_known(&request.spec, &topology, Some(links), |known| tuning.resolve_known(&request.spec, known));
    let spec = RunSpec { algorithm, ..request.spec };
    spec.validate(p)?;
    let what =
        format!("{} ({}) on a {topology}, {} per node", spec.collective, spec.what_runs(), size(spec.size_bytes));
    let (estimate, _) = memory::estimate(&spec, &topology);
    let shown = |bytes: u64| ByteSize(bytes).display().iec().to_string();
    if let Some(available) = topocomm_node::daemon::allocator::available_bytes()
        && estimate > available
    {
        bail!(
            "explaining {what} needs about {} and this machine has {} available: fewer nodes or a smaller size need less",
            shown(estimate),
            shown(available)
        );
    }
    if let Some(limit) = memory_limit
        && estimate > limit
    {
        bail!("explaining {what} needs about {}, over the limit of {} (--memory-limit)", shown(estimate), shown(limit));
    }
    let live = Arc::new(LiveCounts::default());
    let watch = MemoryWatch::default();
    let limits = Limits { memory: memory_limit, messages: Some(MOST_MESSAGES_EXPLAINED) };
    let predicted = watch.during(&live, limits, || model::predict_counted(&spec, &topology, links, Some(live.clone())));
    let prediction = match (predicted, watch.exceeded()) {
        (Ok(prediction), _) => prediction,
        (Err(ModelError(RunFailure::Simulation(SimulationError::Stopped { at_ns }))), Some(exceeded)) => {
            let at = format!("{:.3} µs of virtual time", at_ns as f64 / 1e3);
            match exceeded {
                Exceeded::Memory(resident) => bail!(
                    "explaining {what} was stopped at {at}, the process holding {}, over the limit of {} \
                     (--memory-limit; the estimate before it was {}): fewer nodes or a smaller size need less",
                    shown(resident),
                    shown(memory_limit.unwrap_or(0)),
                    shown(estimate)
                ),
                Exceeded::Messages(sent) => bail!(
                    "explaining {what} was stopped at {at} after {sent} messages: explain records and shows at most \
                     {MOST_MESSAGES_EXPLAINED}; fewer nodes send fewer (`topocomm simulate` runs it without recording)"
                ),
            }
        }
        (Err(error), _) => return Err(error.into()),
    };
    let schedule = schedule(&prediction.events, &topology);
    let busiest = busiest_link(&schedule);
    Ok(Explained { spec, requested, topology, links, source, prediction, schedule, busiest })
}

/// The physics to explain with: the user's (or the calibration's), else the defaults
/// with the user's routing and packet size.
pub fn physics(predict_with: Option<LinkModel>, links: &LinkArgs) -> anyhow::Result<(LinkModel, PhysicsSource)> {
    if let Some(model) = predict_with {
        let source = if links.ts == Some(Emulated::Auto) { PhysicsSource::Calibrated } else { PhysicsSource::Given };
        return Ok((model, source));
    }
    let packet_bytes = links.packet.map_or(Ok(0), u32::try_from).context("--packet must be 1 B to 4 GiB")?;
    let model = LinkModel {
        ts_ns: DEFAULT_TS_NS,
        th_ns: DEFAULT_TH_NS,
        tw_ps: DEFAULT_TW_PS,
        routing: links.routing,
        packet_bytes,
        ports: links.ports,
    };
    Ok((model, PhysicsSource::Default))
}

/// The messages the nodes originated, each with its route and the time it was delivered
/// (sends and deliveries matched by (src, dst, tag, step), in time order), ordered by
/// step, then by the time they left, then by sender; one sender's messages of one
/// instant stay in the order the algorithm sent them.
fn schedule(events: &[FlowEvent], topology: &Topology) -> Vec<Message> {
    type Key = (NodeId, NodeId, u32, u16);
    let key = |e: &FlowEvent| -> Key { (e.src, e.dst, e.tag, e.step) };
    let mut deliveries: HashMap<Key, VecDeque<u64>> = HashMap::new();
    for event in events.iter().filter(|e| e.kind == FlowKind::Deliver) {
        deliveries.entry(key(event)).or_default().push_back(event.at_ns);
    }
    let mut messages: Vec<Message> = events
        .iter()
        .filter(|e| e.kind == FlowKind::Send)
        .map(|e| Message {
            step: e.step,
            src: e.src,
            dst: e.dst,
            bytes: e.bytes,
            route: topology.flow_route(Flow::new(e.src, e.dst, e.tag)),
            sent_ns: e.at_ns,
            delivered_ns: deliveries.get_mut(&key(e)).and_then(VecDeque::pop_front),
        })
        .collect();
    messages.sort_by_key(|m| (m.step, m.sent_ns, m.src));
    messages
}

/// The directed link that carries the most bytes (the lowest-numbered one on a tie).
fn busiest_link(schedule: &[Message]) -> Option<LinkLoad> {
    let mut loads: BTreeMap<(NodeId, NodeId), LinkLoad> = BTreeMap::new();
    for message in schedule {
        for hop in message.route.windows(2) {
            let load =
                loads.entry((hop[0], hop[1])).or_insert(LinkLoad { from: hop[0], to: hop[1], bytes: 0, messages: 0 });
            load.bytes += message.bytes;
            load.messages += 1;
        }
    }
    loads.into_values().fold(None, |best, load| match best {
        Some(best) if best.bytes >= load.bytes => Some(best),
        _ => Some(load),
    })
}

/// The text explanation: header, the messages of each step, the totals.
fn to_text(x: &Explained) -> String {
    let mut text = header(x);
    let route_width = x.schedule.iter().map(|m| route_text(m).len()).max().unwrap_or(0);
    let mut steps: BTreeMap<u16, Vec<&Message>> = BTreeMap::new();
    for message in &x.schedule {
        steps.entry(message.step).or_default().push(message);
    }
    for (step, messages) in &steps {
        text += &step_text(*step, messages, route_width, x.topology.p());
    }
    text + &totals(x)
}

/// What runs where, with which physics.
fn header(x: &Explained) -> String {
    let spec = &x.spec;
    let mut text = format!("{} by {}", spec.collective, spec.what_runs());
    if let Some(schedule) = &spec.schedule {
        write!(text, "\n{}", topocomm_collectives::algorithms::schedule::summary(schedule)).ok();
    } else if x.requested != spec.algorithm {
        write!(text, " (picked by {})", x.requested).ok();
    }
    if let Some(entry) = catalogue::find(spec.collective, spec.algorithm).filter(|_| spec.schedule.is_none()) {
        write!(text, ", made for {}", entry.made_for).ok();
    }
    write!(text, "\non a {}", x.topology).ok();
    if x.topology.switches() > 0 {
        write!(text, ", routes {}", x.topology.routes()).ok();
    }
    write!(text, ": p = {}, --size {}", x.topology.p(), size(spec.size_bytes)).ok();
    if spec.collective.has_root() {
        write!(text, ", root {}", spec.root).ok();
    }
    text + "\n" + &physics_text(&x.links, x.source) + &crate::render::report::class_words(&spec.classes) + "\n"
}

/// The link physics in one line, saying where they come from.
fn physics_text(links: &LinkModel, source: PhysicsSource) -> String {
    let routing = match links.routing {
        Routing::Sf => "store-and-forward".to_owned(),
        Routing::Ct if links.packet_bytes == 0 => "cut-through (whole messages, the small-packet limit)".to_owned(),
        Routing::Ct => format!("cut-through, {} packets", size(u64::from(links.packet_bytes))),
    };
    let origin = match source {
        PhysicsSource::Given => "",
        PhysicsSource::Calibrated => " (from `topocomm calibrate`)",
        PhysicsSource::Default => " (defaults: no --ts/--th/--tw given)",
    };
    let ports = match links.ports {
        Ports::One => ", one-port (a node sends one message at a time and receives one)",
        Ports::All => "",
    };
    format!(
        "links: {routing}{ports}; t_s {}, t_h {}, t_w {} ns/B{origin}",
        short_micros(links.ts_ns),
        short_micros(links.th_ns),
        links.tw_ps as f64 / 1e3
    )
}

/// One step: a summary line, then at most `LINES_PER_STEP` messages.
fn step_text(step: u16, messages: &[&Message], route_width: usize, p: usize) -> String {
    let width = (p.max(2) - 1).to_string().len();
    let sent = messages.iter().map(|m| m.sent_ns);
    let (first, last) = (sent.clone().min().unwrap_or(0), sent.max().unwrap_or(0));
    let arrived = messages.iter().filter_map(|m| m.delivered_ns).max();
    let mut text = format!(
        "\nstep {step}: {} {}, {}, sent {}",
        messages.len(),
        plural(messages.len() as u64, "message"),
        sizes_text(messages),
        span(first, last)
    );
    if let Some(arrived) = arrived {
        write!(text, ", last delivered at {}", micros(arrived)).ok();
    }
    text.push('\n');
    for m in messages.iter().take(LINES_PER_STEP) {
        let delivered = m.delivered_ns.map_or_else(|| "never".to_owned(), micros);
        writeln!(
            text,
            "  {:>width$} → {:<width$}  {:>9}  {:<route_width$}  sent {:>14}  delivered {:>14}",
            m.src,
            m.dst,
            size(m.bytes),
            route_text(m),
            micros(m.sent_ns),
            delivered
        )
        .ok();
    }
    if messages.len() > LINES_PER_STEP {
        writeln!(text, "  ... and {} more", messages.len() - LINES_PER_STEP).ok();
    }
    text
}

/// The model's time and counts, and the busiest link.
fn totals(x: &Explained) -> String {
    let p = &x.prediction;
    let mut text = format!(
        "\nmodel time {}: {} {}, {} {}, {} forwarded {}\n",
        micros(p.time_ns),
        p.steps,
        plural(u64::from(p.steps), "step"),
        p.messages,
        plural(p.messages, "message"),
        p.forwarded,
        plural(p.forwarded, "frame")
    );
    if let Some(load) = x.busiest {
        writeln!(
            text,
            "busiest link {} → {}: {} in {} {}",
            load.from,
            load.to,
            size(load.bytes),
            load.messages,
            plural(load.messages, "message")
        )
        .ok();
    }
    text
}

/// The JSON explanation: the header fields, the model's numbers and every message.
pub(crate) fn to_json(x: &Explained) -> serde_json::Value {
    let links = &x.links;
    let schedule: Vec<serde_json::Value> = x
        .schedule
        .iter()
        .map(|m| {
            json!({
                "step": m.step,
                "src": m.src,
                "dst": m.dst,
                "bytes": m.bytes,
                "route": m.route,
                "sent_us": us(m.sent_ns),
                "delivered_us": m.delivered_ns.map(us),
            })
        })
        .collect();
    let mut explained = json!({
        "collective": x.spec.collective.to_string(),
        "algorithm": x.spec.what_runs(),
        "requested_algorithm": x.requested.to_string(),
        "topology": x.topology.kind().to_string(),
        "dims": x.topology.dims(),
        "placement": x.topology.placement(),
        "p": x.topology.p(),
        "size_bytes": x.spec.size_bytes,
        "root": x.spec.collective.has_root().then_some(x.spec.root),
        "routing": links.routing.to_string(),
        "ports": links.ports.to_string(),
        "physics": {
            "ts_ns": links.ts_ns,
            "th_ns": links.th_ns,
            "tw_ps": links.tw_ps,
            "packet_bytes": links.packet_bytes,
            "source": x.source.name(),
        },
        "model_us": x.prediction.time_us(),
        "steps": x.prediction.steps,
        "messages": x.prediction.messages,
        "forwarded": x.prediction.forwarded,
        "busiest_link": x.busiest.map(|l| json!({ "from": l.from, "to": l.to, "bytes": l.bytes, "messages": l.messages })),
        "schedule": schedule,
    });
    // A switched network's route policy (a direct one routes one way).
    if let Some(policy) = crate::render::report::switched_routes(x.topology.kind(), Some(x.topology.routes())) {
        explained["route_policy"] = json!(policy);
    }
    explained
}

/// `0-1-2 (2 hops)`.
fn route_text(message: &Message) -> String {
    let nodes: Vec<String> = message.route.iter().map(ToString::to_string).collect();
    let hops = message.hops() as u64;
    format!("route {} ({hops} {})", nodes.join("-"), plural(hops, "hop"))
}

/// `1 KiB` (one message), `1 KiB each`, or the smallest and largest size and the total.
fn sizes_text(messages: &[&Message]) -> String {
    let bytes = messages.iter().map(|m| m.bytes);
    let (least, most) = (bytes.clone().min().unwrap_or(0), bytes.clone().max().unwrap_or(0));
    match messages.len() {
        1 => size(least),
        _ if least == most => format!("{} each", size(least)),
        _ => format!("{} to {} ({} in all)", size(least), size(most), size(bytes.sum())),
    }
}

/// `12.000 µs`, or `12.000 to 15.000 µs` when the two differ.
fn span(first_ns: u64, last_ns: u64) -> String {
    if first_ns == last_ns {
        format!("at {}", micros(first_ns))
    } else {
        format!("{} to {}", micros(first_ns), micros(last_ns))
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// Nanoseconds as microseconds, to the nanosecond.
fn micros(ns: u64) -> String {
    format!("{:.3} µs", us(ns))
}

/// Nanoseconds as microseconds, without trailing zeros: `100 µs`, `0.5 µs`.
fn short_micros(ns: u64) -> String {
    format!("{} µs", us(ns))
}

/// Bytes in the largest binary unit they reach: `512 B`, `64 KiB`, `1.5 MiB`.
fn size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    match UNITS.iter().find(|(_, unit)| bytes >= *unit) {
        Some((name, unit)) if bytes.is_multiple_of(*unit) => format!("{} {name}", bytes / unit),
        Some((name, unit)) => format!("{:.1} {name}", bytes as f64 / *unit as f64),
        None => format!("{bytes} B"),
    }
}

fn plural(count: u64, word: &str) -> String {
    if count == 1 { word.to_owned() } else { format!("{word}s") }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    /// The explanation of `topocomm explain <args>`.
    fn explained(args: &[&str]) -> Explained {
        let cli = Cli::try_parse_from(["topocomm", "explain"].iter().chain(args)).expect("a valid command line");
        let Command::Explain(args) = cli.command else { panic!("not explain") };
        explain(&args.what, &Tuning::built_in()).expect("an explanation")
    }

    #[test]
    fn every_message_is_delivered_after_it_left() {
        let x = explained(&["alltoall", "-t", "torus", "-n", "16", "-s", "1KiB"]);
        assert_eq!(x.schedule.len() as u64, x.prediction.messages);
        for m in &x.schedule {
            let delivered = m.delivered_ns.expect("delivered");
            assert!(m.sent_ns < delivered && delivered <= x.prediction.time_ns, "{m:?}");
            assert_eq!(m.hops(), 1, "{m:?}");
        }
        let last_step = x.schedule.iter().map(|m| m.step).max();
        assert_eq!(last_step, Some(x.prediction.steps));
    }

    #[test]
    fn defaults_are_said_and_the_ring_broadcast_reads_step_by_step() {
        let x = explained(&["broadcast", "-t", "ring", "-n", "8", "-s", "1KiB"]);
        assert_eq!(x.source, PhysicsSource::Default);
        assert_eq!((x.links.ts_ns, x.links.th_ns, x.links.tw_ps), (100_000, 10_000, 10_000));
        // Each hop: t_s + t_h + t_w m = 100 + 10 + 10.24 µs, 4 steps on a ring of 8.
        assert_eq!(x.prediction.time_ns, 4 * 120_240);
        // The whole text, step by step, is held against a snapshot by the golden test
        // `explain_broadcast_ring_8_defaults` (coordinator/tests/golden.rs).
    }

    #[test]
    fn given_physics_are_used_and_routes_cross_the_ring() {
        let args =
            ["allgather", "-a", "hypercube", "-t", "ring", "-n", "8", "-s", "1KiB", "--ts", "1us", "--tw", "1ns"];
        let x = explained(&args);
        assert_eq!(x.source, PhysicsSource::Given);
        assert_eq!((x.links.ts_ns, x.links.th_ns, x.links.tw_ps), (1_000, 0, 1_000));
        assert!(x.prediction.forwarded > 0);
        let far: Vec<&Message> = x.schedule.iter().filter(|m| m.step == 3).collect();
        assert_eq!(far.len(), 8);
        assert!(far.iter().all(|m| m.hops() == 4 && m.bytes == 4096), "{far:?}");
        // Step 3 sends every message clockwise over 4 links: each such link carries 4
        // of them; in step 2, 0 -> 2 and 1 -> 3 both cross 1 -> 2 ([KGGK94 Fig. 3.14]).
        let busiest = x.busiest.expect("a busiest link");
        assert_eq!((busiest.from, busiest.to, busiest.messages), (1, 2, 6));
        assert_eq!(busiest.bytes, 4 * 4096 + 2 * 2048);
        assert!(to_text(&x).contains("route 0-1-2-3-4 (4 hops)"));
    }

    #[test]
    fn large_steps_are_cut_short() {
        let x = explained(&["allgather", "-t", "ring", "-n", "16", "-s", "1KiB"]);
        let text = to_text(&x);
        assert_eq!(text.matches("... and 4 more").count(), 15, "{text}");
    }

    #[test]
    fn auto_is_resolved_and_named() {
        let x = explained(&["allreduce", "-a", "auto", "-t", "hypercube", "-n", "8", "-s", "1MiB"]);
        assert_eq!(x.spec.algorithm, Algorithm::HalvingDoubling);
        assert!(to_text(&x).starts_with("allreduce by halving-doubling (picked by auto)"));
    }

    #[test]
    fn json_holds_the_header_the_model_and_every_message() {
        let args = ["scatter", "-t", "hypercube", "-n", "8", "-s", "8B", "--routing", "ct", "--packet", "4B"];
        let x = explained(&args);
        let json = to_json(&x);
        assert_eq!(json["collective"], "scatter");
        assert_eq!(json["algorithm"], "hypercube");
        assert_eq!(json["p"], 8);
        assert_eq!(json["routing"], "ct");
        assert_eq!(json["physics"]["source"], "default");
        assert_eq!(json["physics"]["packet_bytes"], 4);
        assert_eq!(json["steps"], 3);
        assert_eq!(json["model_us"], x.prediction.time_us());
        let schedule = json["schedule"].as_array().expect("a schedule");
        assert_eq!(schedule.len(), 7);
        // The root sends half the blocks across the highest dimension first.
        assert_eq!(schedule[0]["src"], 0);
        assert_eq!(schedule[0]["bytes"], 32);
        assert_eq!(schedule[0]["route"], json!([0, 4]));
        assert_eq!(schedule[0]["sent_us"], 0.0);
        assert!(schedule.iter().all(|m| m["delivered_us"].as_f64() > m["sent_us"].as_f64()));
    }

    #[test]
    fn bad_shapes_and_sizes_are_refused() {
        let cli = |args: &[&str]| {
            let cli = Cli::try_parse_from(["topocomm", "explain"].iter().chain(args)).expect("parses");
            let Command::Explain(args) = cli.command else { panic!("not explain") };
            explain(&args.what, &Tuning::built_in()).map(|_| ()).unwrap_err().to_string()
        };
        assert!(cli(&["broadcast", "-t", "hypercube", "-n", "6"]).contains("power-of-two"));
        assert!(cli(&["broadcast", "-n", "8", "-s", "10B"]).contains("try 8 or 16"));
        assert!(cli(&["broadcast", "-n", "8", "--root", "9"]).contains("root 9"));
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(65536), "64 KiB");
        assert_eq!(size(1536 * 1024), "1.5 MiB");
    }
}
