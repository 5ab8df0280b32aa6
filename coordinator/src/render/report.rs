//! What a finished run says to people and programs: the run's verdict (every node
//! verified, or which failed and how), timing statistics the OSU way (an iteration
//! takes as long as its slowest node), traffic, a table, JSON, and raw dumps.

use std::path::Path;

use anyhow::Context;
use bytesize::ByteSize;
use serde::Serialize;
use topocomm_proto::control::{RunOutcome, SetupTimes};
use topocomm_proto::network::Placement;
use topocomm_proto::spec::{Algorithm, ClassPhysics, Collective, LinkModel, Ports, Routing};
use topocomm_proto::topology::Routes;
use topocomm_proto::{NodeId, Topology, TopologyKind};

use crate::render::dilation::Dilated;
use crate::render::table::HouseTable;

/// Minimum, median, mean and maximum of the per-iteration times, in µs, and the tail
/// percentiles p50, p90 and p99 (OSU micro-benchmarks' `-z`, nccl-tests' `-I`), each by
/// [`nearest_rank`]. The median averages the two middle samples of an even count; p50
/// is always one of the samples, so the two can differ.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimeStats {
    pub min: f64,
    pub median: f64,
    pub mean: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl TimeStats {
    /// Statistics of `samples` (at least one).
    pub fn of(samples: &[f64]) -> Self {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        TimeStats {
            min: sorted[0],
            median,
            mean: sorted.iter().sum::<f64>() / n as f64,
            max: sorted[n - 1],
            p50: nearest_rank(&sorted, 50),
            p90: nearest_rank(&sorted, 90),
            p99: nearest_rank(&sorted, 99),
        }
    }
}

/// The `percent`-th percentile of `sorted` (ascending, at least one sample) by the
/// nearest-rank method: the smallest sample that at least `percent` % of the samples
/// are less than or equal to, i.e. the sample of 1-based rank ⌈percent · n / 100⌉
/// (at least 1; `percent` above 100 counts as 100). No interpolation: the result is
/// always a measured time. With n = 1 every percentile is the sample; with n = 2, p50
/// is the smaller and p90, p99 the larger; with n = 100, p90 is the 90th smallest.
pub fn nearest_rank(sorted: &[f64], percent: u32) -> f64 {
    let n = sorted.len();
    // Integer arithmetic: 0.9 · 100 in floating point is not exactly 90.
    let rank = (percent.min(100) as usize * n).div_ceil(100).max(1);
    sorted[rank.min(n) - 1]
}

/// The link that carried the most bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BusiestLink {
    pub from: usize,
    pub to: usize,
    pub bytes: u64,
}

/// A verified run, summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub run: u64,
    pub collective: String,
    pub algorithm: String,
    pub topology: String,
    pub dims: Vec<usize>,
    /// Where the ranks sat on the hosts (a switched network's; linear on a direct one).
    pub placement: Placement,
    /// A switched network's route policy (left out on a direct one, which has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_policy: Option<String>,
    pub nodes: usize,
    /// The switches that forwarded the run's frames (a switched network's; 0 on a direct
    /// one), each counted in the traffic, none in the times or the verdict.
    #[serde(skip_serializing_if = "is_zero")]
    pub switches: usize,
    pub size_bytes: u64,
    pub root: usize,
    pub dtype: String,
    pub op: String,
    /// Scan: whether the prefix was exclusive (node i reduces nodes 0..i).
    pub exclusive: bool,
    /// Shift: how many places the data moved (node i's vector ended on node i + shift mod p).
    pub shift: usize,
    /// The seed of the generated inputs.
    pub seed: u64,
    /// The deadline of every wait of one iteration, in ms.
    pub timeout_ms: u64,
    /// Whether every control and data link was encrypted (`--encrypt`): the run's
    /// caller says, as it knows how it reached the cluster.
    pub encrypted: bool,
    pub warmup: u32,
    pub iterations: u32,
    pub verified: bool,
    pub time_us: TimeStats,
    /// Each timed iteration's time: its slowest node's.
    pub iteration_us: Vec<f64>,
    pub frames_sent: u64,
    pub frames_forwarded: u64,
    pub busiest_link: Option<BusiestLink>,
    /// Messages on the longest chain of the schedule, as the run's frames counted them.
    pub steps: u16,
    /// The emulated link physics, if the links were emulated (`None`: full speed).
    pub links: Option<LinkPhysics>,
    /// Classes of links with physics of their own (`--class`, a network file's), over
    /// `links`; left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassPhysics>,
    /// The cost model's time for this run, in µs (with emulation or `--ts auto`).
    pub model_us: Option<f64>,
    /// Measured median over predicted.
    pub model_ratio: Option<f64>,
    /// What the run waited for before its first iteration: the cluster, the wiring.
    pub setup_ms: SetupTimes,
    /// How the emulated links were dilated (every time above is emulated time); `None`
    /// for raw links, which never are.
    pub dilation: Option<Dilated>,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

/// Classes of links with physics of their own, as a line under the model's: "classes of
/// their own: intra t_s 5 µs, t_h 0.5 µs, t_w 0.5 ns/B" (what a class leaves out is the
/// line above's); empty when none.
pub fn class_words(classes: &[ClassPhysics]) -> String {
    if classes.is_empty() {
        return String::new();
    }
    let class = |physics: &ClassPhysics| {
        let times = [
            physics.ts_ns.map(|ns| format!("t_s {} µs", ns as f64 / 1e3)),
            physics.th_ns.map(|ns| format!("t_h {} µs", ns as f64 / 1e3)),
            physics.tw_ps.map(|ps| format!("t_w {} ns/B", ps as f64 / 1e3)),
        ];
        let times: Vec<String> = times.into_iter().flatten().collect();
        format!("{} {}", physics.name, times.join(", "))
    };
    let classes: Vec<String> = classes.iter().map(class).collect();
    format!("\nclasses of links with physics of their own: {}", classes.join("; "))
}

/// Link physics in the units people read.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkPhysics {
    pub ts_us: f64,
    pub th_us: f64,
    pub tw_ns_per_byte: f64,
    pub routing: Routing,
    pub packet_bytes: u32,
    /// The port model: "one" (one send and one receive at a time per node) or "all".
    pub ports: Ports,
    /// Whether the links were emulated with these (else they were only used to predict).
    pub emulated: bool,
}

impl LinkPhysics {
    pub fn of(model: &LinkModel, emulated: bool) -> Self {
        LinkPhysics {
            ts_us: model.ts_ns as f64 / 1e3,
            th_us: model.th_ns as f64 / 1e3,
            tw_ns_per_byte: model.tw_ps as f64 / 1e3,
            routing: model.routing,
            packet_bytes: model.packet_bytes,
            ports: model.ports,
            emulated,
        }
    }
}

/// ", one-port" after the routing under the one-port model; nothing under all-port (what
/// every link model was before there was a choice, so that those outputs stay as they were).
pub fn one_port_words(ports: Ports) -> &'static str {
    match ports {
        Ports::One => ", one-port",
        Ports::All => "",
    }
}

/// A run that some node did not verify: which nodes, and what each said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "run {run} of {collective} ({algorithm}) FAILED verification on {} of {nodes} nodes:{}",
    .wrong.len(),
    wrong_lines(.wrong)
)]
pub struct VerificationFailure {
    pub run: u64,
    pub collective: Collective,
    pub algorithm: Algorithm,
    /// How many nodes reported.
    pub nodes: usize,
    /// Each node not verified, and its mismatch or error.
    pub wrong: Vec<(NodeId, String)>,
}

fn wrong_lines(wrong: &[(NodeId, String)]) -> String {
    wrong.iter().map(|(node, why)| format!("\n  node {node}: {why}")).collect()
}

/// Holds every node's report to the reference verdict; a failed check names the nodes.
/// `prediction` is the cost model's time (µs) and the links it assumed, if any.
pub fn summarize(
    outcome: &RunOutcome,
    prediction: Option<(f64, LinkModel)>,
) -> Result<RunSummary, VerificationFailure> {
    // The ranks' reports are verified and timed; a switch's (its id past the ranks')
    // says only what it forwarded, which the traffic counts add up with the ranks'.
    let p = outcome.topology.p;
    let ranks = || outcome.reports.iter().filter(move |r| r.node < p);
    let wrong: Vec<(NodeId, String)> = outcome
        .reports
        .iter()
        .filter(|r| !r.verified && (r.node < p || r.error.is_some()))
        .map(|r| (r.node, r.mismatch.as_deref().or(r.error.as_deref()).unwrap_or("not verified").to_owned()))
        .collect();
    if !wrong.is_empty() {
        return Err(VerificationFailure {
            run: outcome.spec.run,
            collective: outcome.spec.collective,
            algorithm: outcome.spec.algorithm,
            nodes: ranks().count(),
            wrong,
        });
    }
    let iterations = outcome.spec.iterations as usize;
    let iteration_us: Vec<f64> = (0..iterations)
        .map(|i| ranks().map(|r| r.times_us.get(i).copied().unwrap_or(f64::NAN)).fold(0.0, f64::max))
        .collect();
    let busiest_link = outcome
        .reports
        .iter()
        .flat_map(|r| r.link_bytes.iter().map(move |&(to, bytes)| BusiestLink { from: r.node, to, bytes }))
        .max_by_key(|link| (link.bytes, std::cmp::Reverse((link.from, link.to))));
    let spec = &outcome.spec;
    let time_us = TimeStats::of(&iteration_us);
    let links = match (spec.emulation, prediction) {
        (Some(model), _) => Some(LinkPhysics::of(&model, true)),
        (None, Some((_, model))) => Some(LinkPhysics::of(&model, false)),
        (None, None) => None,
    };
    let model_us = prediction.map(|(time_us, _)| time_us);
    Ok(RunSummary {
        run: spec.run,
        collective: spec.what_collective(),
        algorithm: spec.what_runs(),
        topology: outcome.topology.kind.to_string(),
        dims: outcome.topology.dims.clone(),
        placement: outcome.topology.placement,
        route_policy: switched_routes(outcome.topology.kind, outcome.topology.routes),
        nodes: outcome.topology.p,
        switches: outcome.reports.iter().filter(|r| r.node >= p).count(),
        // A GOAL schedule's messages have their own sizes (`--size` is not theirs): its
        // longest message stands for it.
        size_bytes: match spec.schedule.as_deref() {
            Some(schedule) if spec.runs_goal() => {
                schedule.longest_message(outcome.topology.p, spec.size_bytes, spec.dtype).map_or(0, |(bytes, ..)| bytes)
            }
            _ => spec.size_bytes,
        },
        root: spec.root,
        dtype: spec.dtype.to_string(),
        op: spec.op.to_string(),
        exclusive: spec.exclusive,
        shift: spec.shift,
        seed: spec.seed,
        timeout_ms: spec.timeout_ms,
        encrypted: false,
        warmup: spec.warmup,
        iterations: spec.iterations,
        verified: !spec.runs_goal(),
        time_us,
        iteration_us,
        frames_sent: outcome.reports.iter().map(|r| r.frames_sent).sum(),
        frames_forwarded: outcome.reports.iter().map(|r| r.frames_forwarded).sum(),
        busiest_link,
        steps: outcome.reports.iter().map(|r| r.steps).max().unwrap_or(0),
        links,
        classes: spec.classes.clone(),
        model_us,
        model_ratio: model_us.filter(|&m| m > 0.0).map(|m| time_us.median / m),
        setup_ms: outcome.setup,
        dilation: spec.emulation.map(|_| Dilated::given(spec.dilation)),
    })
}

/// The summary as a table for people.
pub fn table(summary: &RunSummary) -> String {
    let mut table = HouseTable::new([
        "collective",
        "algorithm",
        "topology",
        "p",
        "size",
        "iters",
        "min µs",
        "median µs",
        "mean µs",
        "max µs",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "verified",
    ]);
    let t = summary.time_us;
    table.row([
        summary.collective.clone(),
        summary.algorithm.clone(),
        summary.topology.clone(),
        summary.nodes.to_string(),
        ByteSize::b(summary.size_bytes).display().iec().to_string(),
        summary.iterations.to_string(),
        format!("{:.1}", t.min),
        format!("{:.1}", t.median),
        format!("{:.1}", t.mean),
        format!("{:.1}", t.max),
        format!("{:.1}", t.p50),
        format!("{:.1}", t.p90),
        format!("{:.1}", t.p99),
        // A summary exists only for a run every node passed: unverified means sizes only.
        if summary.verified { "yes".into() } else { "no (sizes only)".into() },
    ]);
    let model = match (summary.model_us, summary.model_ratio, &summary.links) {
        (Some(model), ratio, Some(links)) => {
            format!(
                "\nmodel ({}{}, t_s {} µs, t_h {} µs, t_w {} ns/B{}): {model:.1} µs; measured median / model = {}; {}",
                links.routing,
                one_port_words(links.ports),
                links.ts_us,
                links.th_us,
                links.tw_ns_per_byte,
                match (links.routing, links.packet_bytes) {
                    (Routing::Ct, 0) => ", whole frames".to_owned(),
                    (Routing::Ct, bytes) => format!(", {bytes} B packets"),
                    (Routing::Sf, _) => String::new(),
                },
                ratio.map(|r| format!("{r:.3}")).unwrap_or_else(|| "-".into()),
                crate::render::quantity::count(summary.steps as u64, "step")
            ) + &class_words(&summary.classes)
        }
        _ => format!("\n{}", crate::render::quantity::count(summary.steps as u64, "step")),
    };
    let busiest = summary
        .busiest_link
        .map(|l| format!("busiest link {}→{}: {}", l.from, l.to, ByteSize::b(l.bytes).display().iec()))
        .unwrap_or_else(|| "no link traffic".into());
    let dilation = summary.dilation.as_ref().map(|d| format!("\n{}", d.line())).unwrap_or_default();
    format!(
        "{table}\nframes sent {}, forwarded {}; {busiest} (per run of {} timed iterations){model}{dilation}",
        summary.frames_sent, summary.frames_forwarded, summary.iterations
    )
}

/// The name of a switched network's route policy (its kind's default when `routes` is
/// `None`) for the JSON outputs; `None` on a direct network, which routes one way.
pub fn switched_routes(kind: TopologyKind, routes: Option<Routes>) -> Option<String> {
    kind.is_switched().then(|| routes.unwrap_or(kind.default_routes()).to_string())
}

/// A one-line description of what ran.
pub fn headline(summary: &RunSummary) -> String {
    let shape = summary
        .topology
        .parse()
        .ok()
        .and_then(|kind| Topology::new(kind, summary.nodes, Some(&summary.dims)).ok())
        .and_then(|topology| topology.placed(summary.placement).ok())
        .map(|t| t.to_string())
        .unwrap_or_else(|| summary.topology.clone());
    let collective: Option<Collective> = summary.collective.parse().ok();
    let data = match collective {
        // Only a GOAL run is unverified; its size is its longest message's.
        _ if !summary.verified => format!("GOAL messages of up to {}", ByteSize::b(summary.size_bytes).display().iec()),
        Some(Collective::Barrier) => "no data".to_owned(),
        Some(c) if c.reduces() => {
            format!("{} per node, {} {}", ByteSize::b(summary.size_bytes).display().iec(), summary.dtype, summary.op)
        }
        _ => format!("{} per node, {}", ByteSize::b(summary.size_bytes).display().iec(), summary.dtype),
    };
    let which = match collective {
        Some(c) if c.has_root() => format!(", root {}", summary.root),
        Some(Collective::Scan) if summary.exclusive => ", exclusive".to_owned(),
        Some(Collective::Scan) => ", inclusive".to_owned(),
        Some(Collective::Shift) => format!(", shift by {}", summary.shift),
        _ => String::new(),
    };
    let encrypted = if summary.encrypted { ", every link encrypted" } else { "" };
    let forwarded = match summary.switches {
        0 => String::new(),
        1 => " (through 1 switch)".to_owned(),
        switches => format!(" (through {switches} switches)"),
    };
    let verdict = match summary.verified {
        true => format!("verified on all {} nodes{forwarded}", summary.nodes),
        false => format!("ran on all {} nodes; sizes only: nothing could be verified", summary.nodes),
    };
    format!(
        "{} ({}) on a {shape}: {data}{which}, {} after {} warm-up — {verdict}{encrypted}",
        summary.collective,
        summary.algorithm,
        crate::render::quantity::count(summary.iterations as u64, "iteration"),
        summary.warmup
    )
}

/// Writes `node-<id>.input`, `node-<id>.output` (raw little-endian arrays) and `run.json`.
pub fn dump(dir: &Path, outcome: &RunOutcome, json: &serde_json::Value) -> anyhow::Result<()> {
    crate::render::output::check_folder_writable("--dump", dir)?;
    let write = |name: String, bytes: &[u8]| {
        let path = dir.join(name);
        topocomm_collectives::files::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    for report in &outcome.reports {
        if let Some(dump) = &report.dump {
            write(format!("node-{}.input", report.node), &dump.input)?;
            write(format!("node-{}.output", report.node), &dump.output)?;
        }
    }
    write("run.json".to_owned(), serde_json::to_string_pretty(json)?.as_bytes())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A verified 8-node hypercube broadcast of 1 MB, one iteration of 1 ms, for tests
    /// that need a summary to render or derive from.
    pub(crate) fn summary_for_tests() -> RunSummary {
        RunSummary {
            run: 1,
            collective: "broadcast".into(),
            algorithm: "hypercube".into(),
            topology: "hypercube".into(),
            dims: vec![2, 2, 2],
            placement: Placement::Linear,
            route_policy: None,
            nodes: 8,
            switches: 0,
            size_bytes: 1_000_000,
            root: 0,
            dtype: "f64".into(),
            op: "sum".into(),
            exclusive: false,
            shift: 1,
            seed: 1,
            timeout_ms: 30_000,
            encrypted: false,
            warmup: 0,
            iterations: 1,
            verified: true,
            time_us: TimeStats::of(&[1000.0]),
            iteration_us: vec![1000.0],
            frames_sent: 7,
            frames_forwarded: 0,
            busiest_link: None,
            steps: 3,
            links: None,
            classes: Vec::new(),
            model_us: None,
            model_ratio: None,
            setup_ms: SetupTimes::default(),
            dilation: None,
        }
    }

    #[test]
    fn a_node_not_verified_fails_the_run_naming_it_and_why() {
        use topocomm_proto::TopologyKind;
        use topocomm_proto::control::{NodeReport, TopologySpec};
        use topocomm_proto::spec::RunSpec;

        let spec = RunSpec { run: 4, ..RunSpec::new(Collective::Broadcast, Algorithm::Hypercube) };
        let verified = |node| NodeReport { verified: true, times_us: vec![1.0], ..NodeReport::empty(4, node) };
        let mut reports: Vec<NodeReport> = (0..4).map(verified).collect();
        reports[1].verified = false;
        reports[1].mismatch = Some("element 3 differs".into());
        reports[3] = NodeReport { error: Some("no message".into()), ..NodeReport::empty(4, 3) };
        let topology = TopologySpec::of(&Topology::new(TopologyKind::Hypercube, 4, None).unwrap());
        let outcome = RunOutcome { spec, topology, reports, trace: None, setup: SetupTimes::default() };
        let failure = summarize(&outcome, None).unwrap_err();
        assert_eq!(failure.wrong, [(1, "element 3 differs".to_owned()), (3, "no message".to_owned())]);
        assert_eq!(
            failure.to_string(),
            "run 4 of broadcast (hypercube) FAILED verification on 2 of 4 nodes:\n  node 1: element 3 differs\n  \
             node 3: no message"
        );
        // The same run with every node verified passes.
        let mut outcome = outcome;
        outcome.reports = (0..4).map(verified).collect();
        assert!(summarize(&outcome, None).expect("every node verified").verified);
    }

    #[test]
    fn the_headline_names_every_option_that_changed_the_run() {
        let mut summary = summary_for_tests();
        summary.collective = "scan".into();
        summary.algorithm = "hypercube".into();
        assert!(headline(&summary).contains("f64 sum, inclusive, 1 iteration after"), "{}", headline(&summary));
        summary.exclusive = true;
        assert!(headline(&summary).contains("f64 sum, exclusive, 1 iteration after"), "{}", headline(&summary));
        summary.collective = "shift".into();
        summary.shift = 3;
        assert!(headline(&summary).contains("f64, shift by 3, 1 iteration after"), "{}", headline(&summary));
        assert!(!headline(&summary).contains("encrypted"));
        summary.encrypted = true;
        assert!(
            headline(&summary).ends_with("verified on all 8 nodes, every link encrypted"),
            "{}",
            headline(&summary)
        );
        summary.collective = "barrier".into();
        summary.size_bytes = 0;
        assert!(headline(&summary).contains(": no data, 1 iteration after"), "{}", headline(&summary));
    }

    #[test]
    fn stats_of_odd_and_even_samples() {
        let s = TimeStats::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.min, s.median, s.mean, s.max), (1.0, 2.0, 2.0, 3.0));
        assert_eq!((s.p50, s.p90, s.p99), (2.0, 3.0, 3.0));
        let s = TimeStats::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!(s.median, 2.5);
        assert_eq!((s.p50, s.p90, s.p99), (2.0, 4.0, 4.0), "p50 is a sample, the median is not");
    }

    #[test]
    fn the_table_shows_the_percentiles_beside_the_median() {
        let mut summary = summary_for_tests();
        summary.iteration_us = (1..=10).map(|i| f64::from(i) * 100.0).collect();
        summary.time_us = TimeStats::of(&summary.iteration_us);
        let text = table(&summary);
        let cells = |line: &str| -> Vec<String> {
            line.trim_matches(|c| c == '│').split('┆').map(|cell| cell.trim().to_owned()).collect()
        };
        let mut lines = text.lines().filter(|line| line.starts_with('│'));
        let (header, row) = (cells(lines.next().unwrap()), cells(lines.next().unwrap()));
        let cell = |name: &str| {
            let column = header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name} in\n{text}"));
            row[column].clone()
        };
        assert_eq!(cell("median µs"), "550.0");
        assert_eq!(cell("p50 µs"), "500.0");
        assert_eq!(cell("p90 µs"), "900.0");
        assert_eq!(cell("p99 µs"), "1000.0");
        assert_eq!(cell("max µs"), "1000.0");
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let s = TimeStats::of(&[7.5]);
        assert_eq!((s.min, s.median, s.max, s.p50, s.p90, s.p99), (7.5, 7.5, 7.5, 7.5, 7.5, 7.5));
    }

    #[test]
    fn two_samples_split_at_the_median() {
        // Ranks ⌈0.5·2⌉ = 1, ⌈0.9·2⌉ = 2, ⌈0.99·2⌉ = 2.
        let s = TimeStats::of(&[20.0, 10.0]);
        assert_eq!((s.p50, s.p90, s.p99), (10.0, 20.0, 20.0));
        assert_eq!(s.median, 15.0);
    }

    #[test]
    fn a_hundred_samples_give_the_ranked_ones() {
        // 1..=100 shuffled by a fixed stride (37 is coprime to 100): ranks 50, 90, 99.
        let samples: Vec<f64> = (0..100).map(|i| ((i * 37) % 100 + 1) as f64).collect();
        let s = TimeStats::of(&samples);
        assert_eq!((s.p50, s.p90, s.p99), (50.0, 90.0, 99.0));
        assert_eq!((s.min, s.median, s.max), (1.0, 50.5, 100.0));
    }

    #[test]
    fn ranks_round_up_and_stay_in_range() {
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        // ⌈0.5·10⌉ = 5, ⌈0.9·10⌉ = 9, ⌈0.99·10⌉ = 10, ⌈0.91·10⌉ = 10, ⌈0.01·10⌉ = 1.
        assert_eq!(nearest_rank(&ten, 50), 5.0);
        assert_eq!(nearest_rank(&ten, 90), 9.0);
        assert_eq!(nearest_rank(&ten, 99), 10.0);
        assert_eq!(nearest_rank(&ten, 91), 10.0);
        assert_eq!(nearest_rank(&ten, 1), 1.0);
        assert_eq!(nearest_rank(&ten, 0), 1.0, "rank at least 1");
        assert_eq!(nearest_rank(&ten, 250), 10.0, "above 100 counts as 100");
        let three = [1.0, 2.0, 3.0];
        // ⌈0.5·3⌉ = 2 (1.5 rounds up), ⌈0.34·3⌉ = 2, ⌈0.33·3⌉ = 1.
        assert_eq!(nearest_rank(&three, 50), 2.0);
        assert_eq!(nearest_rank(&three, 34), 2.0);
        assert_eq!(nearest_rank(&three, 33), 1.0);
    }
}
