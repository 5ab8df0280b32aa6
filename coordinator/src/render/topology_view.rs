//! `topocomm topology`: a topology's ids, coordinates, neighbours, edges and diameter,
//! as text or JSON, so a user can see what will be wired.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use topocomm_proto::spec::Collective;
use topocomm_proto::{Topology, catalogue};

use crate::control::parse::parse_collective;
use crate::control::request::ShapeArgs;
use crate::render::output;

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
}

/// Prints the topology `args` describes.
pub fn print(args: &TopologyArgs) -> anyhow::Result<()> {
    let topology = Topology::new(args.shape.topology, args.nodes, args.shape.dims.as_deref())?;
    let p = topology.p();
    let edges = topology.edges();
    if args.json {
        let json = crate::render::schema::versioned(serde_json::json!({
            "topology": topology.kind().to_string(),
            "nodes": p,
            "dims": topology.dims(),
            "diameter": topology.diameter(),
            "neighbours": (0..p).map(|id| topology.neighbours(id)).collect::<Vec<_>>(),
            "edges": edges,
        }));
        return output::print(serde_json::to_string_pretty(&json)? + "\n");
    }
    let mut text = String::new();
    writeln!(text, "{topology}: {} edges, diameter {}", edges.len(), topology.diameter())?;
    writeln!(text, "{:>4}  {:<12}  neighbours", "id", "coords")?;
    for id in 0..p {
        let coords: Vec<String> = topology.coords(id).iter().map(ToString::to_string).collect();
        let neighbours: Vec<String> = topology.neighbours(id).iter().map(ToString::to_string).collect();
        writeln!(text, "{id:>4}  {:<12}  {}", format!("({})", coords.join(",")), neighbours.join(" "))?;
    }
    let edges: Vec<String> = edges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
    writeln!(text, "edges: {}", edges.join(" "))?;
    output::print(text)
}

/// Prints the algorithm catalogue: `topocomm list`.
pub fn list(args: &ListArgs) -> anyhow::Result<()> {
    let entries = catalogue::ENTRIES.iter().filter(|e| args.collective.is_none_or(|c| c == e.collective));
    let header = ["collective", "algorithm", "made for", "nodes", "steps", "source"];
    let rows: Vec<[String; 6]> = entries
        .map(|e| {
            [
                e.collective.to_string(),
                e.algorithm.to_string(),
                e.made_for.to_string(),
                e.nodes.to_owned(),
                e.steps.to_string(),
                e.source.to_owned(),
            ]
        })
        .collect();
    if args.markdown {
        let mut text = format!("| {} |\n|{}\n", header.join(" | "), " --- |".repeat(header.len()));
        for row in &rows {
            writeln!(text, "| {} |", row.join(" | "))?;
        }
        return output::print(text);
    }
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header(header.to_vec());
    for row in rows {
        table.add_row(row.to_vec());
    }
    output::print(format!("{table}\ndefault: the algorithm made for the topology; {}\n", catalogue::AUTO_RULE))
}
