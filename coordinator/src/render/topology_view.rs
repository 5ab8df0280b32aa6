//! `topocomm topology`: a topology's ids, coordinates, neighbours, edges and diameter,
//! as text or JSON, so a user can see what will be wired; `topocomm list`: the
//! catalogue of algorithms and the rules `auto` picks by.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use strum::IntoEnumIterator;
use topocomm_proto::spec::Collective;
use topocomm_proto::{TopologyKind, catalogue};

use crate::control::parse::parse_collective;
use crate::control::request::ShapeArgs;
use crate::control::tuning::TuningArgs;
use crate::render::output;
use crate::render::table::HouseTable;
use topocomm_collectives::tuning::Rule;

#[derive(Debug, Clone, Args)]
pub struct TopologyArgs {
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Number of nodes.
    #[arg(long, short = 'n', default_value_t = 8)]
    pub nodes: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also draw the wiring to FILE (.svg, or .png by the extension).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Only this collective's algorithms.
    #[arg(value_parser = parse_collective)]
    pub collective: Option<Collective>,
    /// Print a Markdown table (as in the README).
    #[arg(long)]
    pub markdown: bool,
    /// Print the tuning file `auto` picks by (the built-in one without --tuning), each
    /// rule with its reason: a start for your own.
    #[arg(long, conflicts_with_all = ["collective", "markdown"])]
    pub tuning_json: bool,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// Up to this many ranks, `--json` gives every route between two of them (of the
/// flow of tag 0 where the policy routes the flows between two ranks apart).
const MOST_RANKS_ROUTED: usize = 512;

/// Up to this many ranks, under a policy that routes flows apart (ECMP, Valiant),
/// `--json` also gives every route each pair's flows may take (`route_choices`): up to
/// (k/2)² a pair on a fat-tree, g - 1 on a dragonfly.
const MOST_RANKS_CHOICES: usize = 128;

/// Prints the topology `args` describes.
pub fn print(args: &TopologyArgs) -> anyhow::Result<()> {
    let topology = args.shape.topology_of(args.nodes)?;
    let (p, vertices) = (topology.p(), topology.vertices());
    let edges = topology.edges();
    let names = topology.class_names();
    let mut per_class = vec![0usize; names.len()];
    for &(a, b) in &edges {
        per_class[topology.link_class(a, b).map_or(0, usize::from)] += 1;
    }
    if args.json {
        let routes = (p <= MOST_RANKS_ROUTED).then(|| {
            (0..p).map(|src| (0..p).map(|dst| topology.route(src, dst)).collect::<Vec<_>>()).collect::<Vec<_>>()
        });
        let mut json = crate::render::schema::versioned(serde_json::json!({
            "topology": topology.kind().to_string(),
            "nodes": p,
            "dims": topology.dims(),
            "placement": topology.placement(),
            "hosts": topology.hosts(),
            "switches": topology.switches(),
            "diameter": topology.diameter(),
            "bisection_width": topology.bisection_width(),
            "route_policy": topology.routes().to_string(),
            "classes": names.iter().zip(&per_class).map(|(name, links)| serde_json::json!({"name": name, "links": links})).collect::<Vec<_>>(),
            "neighbours": (0..vertices).map(|id| topology.neighbours(id)).collect::<Vec<_>>(),
            "edges": edges,
            "edge_classes": edges.iter().map(|&(a, b)| names[topology.link_class(a, b).map_or(0, usize::from)]).collect::<Vec<_>>(),
            "routes": routes,
        }));
        if !topology.routes().by_destination() {
            let choices = (p <= MOST_RANKS_CHOICES).then(|| {
                (0..p)
                    .map(|src| (0..p).map(|dst| topology.route_choices(src, dst)).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            });
            json["route_choices"] = serde_json::json!(choices);
        }
        return output::print(serde_json::to_string_pretty(&json)? + "\n");
    }
    let mut text = String::new();
    let bisection =
        topology.bisection_width().map_or_else(|| "not known (a graph from a file)".to_owned(), |w| w.to_string());
    writeln!(text, "{topology}: {} edges, diameter {}", edges.len(), topology.diameter())?;
    if topology.switches() > 0 {
        let classes: Vec<String> =
            names.iter().zip(&per_class).map(|(name, links)| format!("{links} {name}")).collect();
        writeln!(
            text,
            "{} hosts ({p} with a rank), {} switches; links: {}; bisection width {}; routes {}",
            topology.hosts(),
            topology.switches(),
            classes.join(", "),
            bisection,
            topology.routes()
        )?;
    }
    writeln!(text, "{:>4}  {:<12}  neighbours", "id", "coords")?;
    for id in 0..vertices {
        let coords: Vec<String> = topology.coords(id).iter().map(ToString::to_string).collect();
        let neighbours: Vec<String> = topology.neighbours(id).iter().map(ToString::to_string).collect();
        let role = if topology.is_switch(id) { " switch" } else { "" };
        writeln!(text, "{id:>4}  {:<12}  {}{role}", format!("({})", coords.join(",")), neighbours.join(" "))?;
    }
    let edges: Vec<String> = edges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
    writeln!(text, "edges: {}", edges.join(" "))?;
    output::print(text)
}

/// Prints the algorithm catalogue: `topocomm list`.
pub fn list(args: &ListArgs) -> anyhow::Result<()> {
    let tuning = args.tuning.load()?;
    if args.tuning_json {
        return output::print(tuning.to_json());
    }
    let entries = catalogue::ENTRIES.iter().filter(|e| args.collective.is_none_or(|c| c == e.collective));
    let header = ["collective", "algorithm", "made for", "nodes", "steps", "source"];
    let rows: Vec<[String; 6]> = entries
        .map(|e| {
            [
                e.collective.to_string(),
                e.algorithm.to_string(),
                e.made_for.to_string(),
                e.nodes.to_owned(),
                e.steps_text(),
                e.source.to_owned(),
            ]
        })
        .collect();
    let rules: Vec<[String; 8]> = tuning
        .rules
        .iter()
        .enumerate()
        .filter(|(_, rule)| args.collective.is_none_or(|c| c == rule.collective))
        .map(|(index, rule)| rule_row(index, rule))
        .collect();
    let leaner: Vec<String> = tuning
        .leaner
        .iter()
        .filter(|leaner| args.collective.is_none_or(|c| c == leaner.collective))
        .map(|leaner| format!("{} by {} instead of {}", leaner.collective, leaner.algorithm, leaner.instead_of))
        .collect();
    let steps = "steps: the longest chain of messages on the topology the algorithm is made for, under either \
                 port model unless one is named (one-port: a node sends one message at a time, over any of its links, \
                 and receives one; all-port: every link at once; `--ports`).";
    let auto = format!(
        "default: the algorithm made for the topology. --algorithm auto: the first rule below that matches the run, \
         else the default; where its pick does not fit in the nodes' memory, {}. Rules from {} (each with the \
         measurement behind it: `topocomm list --tuning-json`).",
        if leaner.is_empty() { "nothing leaner".to_owned() } else { leaner.join(", ") },
        tuning.source_name(),
    );
    output::print(format!(
        "{}\n{steps}\n{auto}\n{}",
        render_table(args.markdown, &header, &rows),
        render_table(args.markdown, &RULE_HEADER, &rules)
    ))
}

/// The columns of `auto`'s rules.
const RULE_HEADER: [&str; 8] = ["#", "collective", "auto runs", "instead of", "on", "nodes", "size", "and where"];

/// One rule as a row of [`RULE_HEADER`].
fn rule_row(index: usize, rule: &Rule) -> [String; 8] {
    let mut conditions = Vec::new();
    if !rule.node_bytes.is_open() {
        conditions.push(format!("p × size {}", rule.node_bytes));
    }
    if let Some(model) = rule.cost_model {
        conditions.push(format!("the cost model says it pays (t_s = {} t_w)", model.startup_bytes));
    }
    if rule.ahead_in_the_model {
        conditions.push("the one the model of the run finishes first, where that beats the default".to_owned());
    }
    let runs: Vec<String> = rule.judged().iter().map(ToString::to_string).collect();
    [
        (index + 1).to_string(),
        rule.collective.to_string(),
        runs.join(" or "),
        rule.replaces.map_or_else(|| "the default".to_owned(), |replaced| replaced.to_string()),
        topologies_text(&rule.topologies),
        rule.nodes.to_string(),
        rule.size.to_string(),
        if conditions.is_empty() { "-".to_owned() } else { conditions.join("; ") },
    ]
}

/// The topologies a rule names: `any`, the list, or every one but a few.
fn topologies_text(topologies: &[TopologyKind]) -> String {
    let names = |kinds: Vec<TopologyKind>| kinds.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let missing: Vec<TopologyKind> = TopologyKind::iter().filter(|kind| !topologies.contains(kind)).collect();
    if topologies.is_empty() || missing.is_empty() {
        "any".to_owned()
    } else if missing.len() < topologies.len() {
        format!("all but {}", names(missing))
    } else {
        names(topologies.to_vec())
    }
}

/// A table as text (box-drawn), or as Markdown.
fn render_table<const N: usize>(markdown: bool, header: &[&str; N], rows: &[[String; N]]) -> String {
    if markdown {
        let mut text = format!("| {} |\n|{}\n", header.join(" | "), " --- |".repeat(N));
        for row in rows {
            text.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        return text;
    }
    let mut table = HouseTable::new(header.iter().copied());
    for row in rows {
        table.row(row.iter().cloned());
    }
    format!("{table}\n")
}
