//! `topocomm simulate`'s output: a simulated point summarised with `run`'s keys, the
//! headline, the scaling table, its notes and `--plot`, from plain data the command
//! (`tools::simulate`) hands down.

use serde::Serialize;
use topocomm_proto::network::Placement;
use topocomm_proto::spec::{Collective, Dtype, LinkModel, ReduceOp};

use crate::render::links::describe_links;
use crate::render::quantity::size_text;
use crate::render::report::{BusiestLink, LinkPhysics, TimeStats};
use crate::render::table::HouseTable;

/// One simulated run (a topology, a node count, an algorithm), summarised with `run`'s
/// keys where they mean the same (as [`crate::render::report::RunSummary`] does a run).
#[derive(Debug, Clone, Serialize)]
pub struct SimulationSummary {
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
    pub size_bytes: u64,
    pub root: usize,
    pub dtype: String,
    pub op: String,
    /// Whether every node's result was verified against the reference (false with
    /// lengths only).
    pub verified: bool,
    /// What the messages carried: "data" or "lengths".
    pub payload: &'static str,
    /// The simulated time (one deterministic sample: every statistic is the same).
    pub time_us: TimeStats,
    pub frames_sent: u64,
    pub frames_forwarded: u64,
    pub busiest_link: Option<BusiestLink>,
    pub steps: u16,
    pub links: LinkPhysics,
    /// The textbook's closed form for this point, where one applies.
    pub closed_form_us: Option<f64>,
    pub closed_form: Option<&'static str>,
    pub simulation: Cost,
}

/// What a simulation took, in the simulator's own terms (deterministic: the wall time and
/// rate go to standard error, so that standard output is the same for the same command).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Cost {
    /// Link crossings of frames (a message over h links, in k packets, makes h k).
    pub frame_hops: u64,
    /// Times a node's future was polled.
    pub polls: u64,
    /// The memory the simulation was estimated to need.
    pub memory_estimate_bytes: u64,
}

/// The line over the table: the collective (`None`: a GOAL schedule, which has none and
/// whose messages have their own sizes), its data per node and the links, with where
/// their figures came from (`source`: given, calibration, default).
pub fn headline(
    collective: Option<Collective>,
    size: u64,
    dtype: Dtype,
    op: ReduceOp,
    links: &LinkModel,
    source: &str,
) -> String {
    let (what, data) = match collective {
        None => ("GOAL schedule".to_owned(), "messages of their own sizes".to_owned()),
        Some(c) if c.reduces() => (c.to_string(), format!("{} per node, {} {}", size_text(size), dtype, op)),
        Some(c) => (c.to_string(), format!("{} per node, {}", size_text(size), dtype)),
    };
    format!("{what} simulated: {data}; links {} ({})", describe_links(links), source)
}

/// The scaling table: a row per point.
pub fn table(points: &[SimulationSummary]) -> HouseTable {
    let mut table = HouseTable::new([
        "topology",
        "p",
        "algorithm",
        "time µs",
        "closed form µs",
        "steps",
        "frames sent",
        "forwarded",
        "busiest link",
        "verified",
    ]);
    for point in points {
        table.row([
            shape(point),
            point.nodes.to_string(),
            point.algorithm.clone(),
            format!("{:.3}", point.time_us.median),
            point.closed_form_us.map_or_else(|| "-".to_owned(), |us| format!("{us:.3}")),
            point.steps.to_string(),
            point.frames_sent.to_string(),
            point.frames_forwarded.to_string(),
            point
                .busiest_link
                .map_or_else(|| "-".to_owned(), |link| format!("{}→{} {}", link.from, link.to, size_text(link.bytes))),
            if point.verified { "yes".to_owned() } else { "no (lengths only)".to_owned() },
        ]);
    }
    table
}

/// The topology of a point as the table shows it: "torus 4x4", "hypercube", "cluster
/// placed round-robin".
fn shape(point: &SimulationSummary) -> String {
    let shape = match point.topology.as_str() {
        "mesh" | "torus" | "mesh3d" | "torus3d" => {
            let dims: Vec<String> = point.dims.iter().map(ToString::to_string).collect();
            format!("{} {}", point.topology, dims.join("x"))
        }
        kind => kind.to_owned(),
    };
    match point.placement {
        Placement::Linear => shape,
        placement => format!("{shape} placed {placement}"),
    }
}

/// The closed forms the table used, once each, and a word on what was not verified.
pub fn notes(points: &[SimulationSummary]) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    for point in points {
        if let Some(formula) = point.closed_form {
            let note = format!("closed form of {} on a {}: {formula}", point.algorithm, point.topology);
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
    notes.extend(margins(points));
    if points.iter().any(|point| !point.verified) {
        notes.push("lengths only: the messages carried no data, and no result was verified".to_owned());
    }
    notes
}

/// Where several algorithms ran on one topology of one size: which was fastest, and by
/// how much it beat the next and the slowest.
fn margins(points: &[SimulationSummary]) -> Vec<String> {
    let mut margins = Vec::new();
    let mut places: Vec<(String, usize)> = Vec::new();
    for point in points {
        let place = (shape(point), point.nodes);
        if !places.contains(&place) {
            places.push(place);
        }
    }
    for (topology, nodes) in places {
        let mut ran: Vec<(&str, f64)> = Vec::new();
        for point in points.iter().filter(|point| (shape(point), point.nodes) == (topology.clone(), nodes)) {
            if !ran.iter().any(|(algorithm, _)| *algorithm == point.algorithm) {
                ran.push((&point.algorithm, point.time_us.median));
            }
        }
        ran.sort_by(|a, b| a.1.total_cmp(&b.1));
        let [(fastest, best), (next, next_us), ..] = ran[..] else { continue };
        let (slowest, slowest_us) = ran[ran.len() - 1];
        if next_us <= best {
            let tied: Vec<&str> =
                ran.iter().take_while(|(_, us)| *us <= best).map(|(algorithm, _)| *algorithm).collect();
            margins.push(format!("fastest on {topology} of {nodes}, tied: {}", tied.join(", ")));
            continue;
        }
        let mut margin = format!(
            "fastest on {topology} of {nodes}: {fastest}, {:.2}× ahead of {next} ({:.1} % less time)",
            next_us / best,
            100.0 * (1.0 - best / next_us)
        );
        if ran.len() > 2 {
            margin += &format!(" and {:.2}× ahead of {slowest}", slowest_us / best);
        }
        margins.push(margin);
    }
    margins
}

#[cfg(feature = "pictures")]
/// `--plot`: time against p, log-log, a line per topology and algorithm, the closed
/// form dashed.
pub fn plot(
    collective: Collective,
    size: u64,
    points: &[SimulationSummary],
    path: &std::path::Path,
) -> anyhow::Result<()> {
    use crate::render::plot::{Series, XAxis};
    let mut series: Vec<Series> = Vec::new();
    for point in points {
        let label = format!("{} ({})", point.topology, point.algorithm);
        let index = match series.iter().position(|s| s.label == label) {
            Some(index) => index,
            None => {
                series.push(Series { label, measured: Vec::new(), model: Vec::new() });
                series.len() - 1
            }
        };
        let p = point.nodes as f64;
        series[index].measured.push((p, point.time_us.median));
        if let Some(us) = point.closed_form_us {
            series[index].model.push((p, us));
        }
    }
    let title = format!("{}, {} per node, simulated", collective, size_text(size));
    crate::render::plot::write_with(&title, &series, XAxis::Nodes, path)?;
    eprintln!("wrote the plot to {}", path.display());
    Ok(())
}
