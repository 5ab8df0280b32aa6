//! `topocomm tune`: measures where `--algorithm auto` should switch on the cluster at
//! hand. For each rule of a tuning table that speaks of this topology and p, it runs the
//! default the rule replaces and the rule's algorithm over doubling sizes (interleaved,
//! `--repeat` times each), finds the crossing (the smallest size from which the
//! alternative is ahead there and at every larger size measured) and writes a tuning
//! file whose rules for this p and topology, each with its medians, come ahead of the
//! general ones. Every run goes through [`Target`], as `run`'s do.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::Args;
use topocomm_proto::control::{RunOutcome, RunRequest};
use topocomm_proto::spec::{Algorithm, Collective, Dtype, ReduceOp};
use topocomm_proto::{TopologyKind, catalogue};

use crate::control::client::RemoteArgs;
use crate::control::local::LocalCluster;
use crate::control::parse::parse_timeout;
use crate::control::request::{self, DataArgs, Repetition, ShapeArgs};
use crate::control::target::Target;
use crate::control::tuning::TuningArgs;
use crate::render::quantity::size_text;
use crate::render::report::{self, TimeStats};
use crate::render::table::HouseTable;
use crate::tools::sweep::parse_sizes;
use topocomm_collectives::tuning::{Bounds, Bytes, Rule, SCHEMA_VERSION, Tuning};

#[derive(Debug, Clone, Args)]
pub struct TuneArgs {
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Nodes of the local cluster (ignored with --coordinator, whose cluster has its own size).
    #[arg(long, short = 'n', default_value_t = 4)]
    pub nodes: usize,
    /// Bytes per node: `64KiB..1MiB` (doubling from the first) or a comma list.
    #[arg(long, default_value = "64KiB..1MiB", value_parser = parse_sizes)]
    pub sizes: std::vec::Vec<u64>,
    /// Timed iterations of each run.
    #[arg(long, short = 'i', default_value_t = 5)]
    pub iterations: u32,
    /// Untimed warm-up iterations before them.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Runs of each algorithm at each size, the two taking turns; their timed
    /// iterations are pooled into one median.
    #[arg(long, default_value_t = 3, value_parser = parse_repeat)]
    pub repeat: u32,
    /// Deadline of every wait of one iteration (and of forming the cluster).
    #[arg(long, default_value = "30s", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// The tuning file to write: this cluster's rules ahead of the general ones.
    #[arg(long, short = 'o', value_name = "FILE", default_value = "tuning.json")]
    pub output: PathBuf,
    /// Local clusters: folder for the node daemons' logs.
    #[arg(long)]
    pub logs: Option<PathBuf>,
    /// The rules to measure and keep behind this cluster's (built in without it).
    #[command(flatten)]
    pub tuning: TuningArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// A `--repeat` that is not a whole number from 1 to 100.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?}: runs per size and algorithm, 1 to 100")]
pub struct BadRepeat {
    text: String,
    /// Why it is no number at all (`None`: a number out of range).
    #[source]
    cause: Option<std::num::ParseIntError>,
}

fn parse_repeat(text: &str) -> Result<u32, BadRepeat> {
    match text.parse::<u32>() {
        Ok(repeat) if (1..=100).contains(&repeat) => Ok(repeat),
        Ok(_) => Err(BadRepeat { text: text.to_owned(), cause: None }),
        Err(cause) => Err(BadRepeat { text: text.to_owned(), cause: Some(cause) }),
    }
}

/// One alternative measured against the default it replaces on this cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pair {
    collective: Collective,
    default: Algorithm,
    alternative: Algorithm,
}

/// The medians of one size, in µs.
#[derive(Debug, Clone, Copy)]
struct Measured {
    size: u64,
    default_us: f64,
    alternative_us: f64,
}

impl Measured {
    fn ahead(&self) -> bool {
        self.alternative_us < self.default_us
    }
}

/// Measures, prints what it measured and writes the tuning file.
pub async fn run(args: &TuneArgs) -> anyhow::Result<()> {
    args.shape.check_routes()?;
    let base = args.tuning.load()?;
    let target = match &args.remote.coordinator {
        Some(address) => Target::Remote { address: address.clone(), credentials: args.remote.credentials()? },
        None => {
            let logs = args.logs.clone().unwrap_or_else(|| std::env::temp_dir().join("topocomm-logs"));
            let topology = args.shape.topology_of(args.nodes)?;
            let local = LocalCluster::start_for(&topology, &logs, args.remote.security.encrypt, base.clone()).await?;
            eprintln!(
                "local cluster: {}, node logs in {}/node-*.log",
                crate::control::local::processes(&topology),
                local.logs.display()
            );
            Target::Local(local)
        }
    };
    let result = tokio::select! {
        result = tune(args, &target, &base) => result,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted")),
    };
    target.shutdown().await;
    result
}

async fn tune(args: &TuneArgs, target: &Target, base: &Arc<Tuning>) -> anyhow::Result<()> {
    let repetition =
        Repetition { warmup: args.warmup, iterations: args.iterations, timeout: args.timeout, dump: false };
    // The cluster's p (and, for a served cluster, that it wires this shape): a barrier.
    let first = execute(args, target, Collective::Barrier, None, 8, repetition).await?;
    let (kind, p) = (first.topology.kind, first.topology.p);
    let pairs = pairs(base, kind, p);
    anyhow::ensure!(
        !pairs.is_empty(),
        "no rule of {} speaks of {p} nodes of a {kind}: nothing to tune",
        base.source_name()
    );
    let mut tuned = Vec::new();
    let mut table =
        HouseTable::new(["collective", "size", "default", "median µs", "alternative", "median µs", "ahead"]);
    let mut sizes = args.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    for pair in &pairs {
        let mut measured = Vec::new();
        for &size in &sizes {
            let mut times = [Vec::new(), Vec::new()];
            let mut refused = None;
            for _ in 0..args.repeat {
                for (slot, algorithm) in [pair.default, pair.alternative].into_iter().enumerate() {
                    match execute(args, target, pair.collective, Some(algorithm), size, repetition).await {
                        Ok(outcome) => times[slot].extend(iteration_times(&outcome)?),
                        Err(error) => refused = Some(error),
                    }
                }
                if refused.is_some() {
                    break;
                }
            }
            if let Some(error) = refused {
                eprintln!("skipping {} of {}: {error:#}", pair.collective, size_text(size));
                continue;
            }
            let [default_us, alternative_us] = times.map(|samples| TimeStats::of(&samples).median);
            let point = Measured { size, default_us, alternative_us };
            table.row([
                pair.collective.to_string(),
                size_text(size),
                pair.default.to_string(),
                format!("{default_us:.1}"),
                pair.alternative.to_string(),
                format!("{alternative_us:.1}"),
                if point.ahead() { "alternative" } else { "default" }.to_owned(),
            ]);
            measured.push(point);
        }
        tuned.extend(rules_of(pair, kind, p, &measured, args));
    }
    println!("{table}");
    let tuning = Tuning {
        schema_version: SCHEMA_VERSION,
        about: format!(
            "Measured by `topocomm tune` on {p} nodes of a {kind} ({} runs of {} iterations per size and \
             algorithm); these rules come first, then those of {}.",
            args.repeat,
            args.iterations,
            base.source_name()
        ),
        rules: tuned
            .iter()
            .cloned()
            .chain(base.rules.iter().filter(|rule| !is_tuned_for(rule, kind, p)).cloned())
            .collect(),
        leaner: base.leaner.clone(),
        footprint: base.footprint.clone(),
        source: None,
    };
    tuning.check().context("the measured rules do not fit with the general ones")?;
    topocomm_collectives::files::write(&args.output, tuning.to_json())
        .with_context(|| format!("writing {}", args.output.display()))?;
    for rule in &tuned {
        println!("{} on {p} nodes of a {kind}, size {}: auto runs {}", rule.collective, rule.size, rule.algorithm);
    }
    println!("wrote {} (use it with --tuning {0}, or TOPOCOMM_TUNING)", args.output.display());
    Ok(())
}

/// The alternatives to measure on p nodes of `kind`: each rule that speaks of them
/// (whatever the size), against the default it replaces, each pair once.
fn pairs(tuning: &Tuning, kind: TopologyKind, p: usize) -> Vec<Pair> {
    let mut pairs: Vec<Pair> = Vec::new();
    for rule in &tuning.rules {
        let default = catalogue::default_algorithm(rule.collective, kind);
        if !rule.applies_on(kind, default, p as u64) {
            continue;
        }
        let pair = Pair {
            collective: rule.collective,
            default: rule.replaces.unwrap_or(default),
            alternative: rule.algorithm,
        };
        if pair.default != pair.alternative && !pairs.contains(&pair) {
            pairs.push(pair);
        }
    }
    pairs
}

/// A rule a tune of p nodes of `kind` wrote: it is measured again, not kept.
fn is_tuned_for(rule: &Rule, kind: TopologyKind, p: usize) -> bool {
    let p = p as u64;
    rule.topologies == [kind] && rule.nodes == Bounds { min: Some(p), max: Some(p) }
}

/// The smallest size from which the alternative is ahead at that size and every
/// larger one measured: its index in `measured` (by size).
fn crossing(measured: &[Measured]) -> Option<usize> {
    let behind_last = measured.iter().rposition(|point| !point.ahead());
    match behind_last {
        None if measured.is_empty() => None,
        None => Some(0),
        Some(last) if last + 1 < measured.len() => Some(last + 1),
        Some(_) => None,
    }
}

/// The rules for p nodes of `kind` that `measured` says, over the sizes measured: the
/// default below the crossing, the alternative from it on.
/// `measured` is in order of size, each size once.
fn rules_of(pair: &Pair, kind: TopologyKind, p: usize, measured: &[Measured], args: &TuneArgs) -> Vec<Rule> {
    let (Some(first), Some(last)) = (measured.first(), measured.last()) else { return Vec::new() };
    let medians: Vec<String> = measured
        .iter()
        .map(|point| format!("{} {:.1} against {:.1}", size_text(point.size), point.default_us, point.alternative_us))
        .collect();
    let found = crossing(measured);
    let verdict = match found {
        Some(index) => format!("{} ahead from {} on", pair.alternative, size_text(measured[index].size)),
        None => format!("{} never ahead up to the largest size", pair.alternative),
    };
    let why = format!(
        "Measured by `topocomm tune` on {p} nodes of a {kind}: median µs of {} against {} ({} runs of {} \
         iterations each): {}; {verdict}.",
        pair.default,
        pair.alternative,
        args.repeat,
        args.iterations,
        medians.join(", ")
    );
    let rule = |algorithm, min: u64, max: u64| Rule {
        collective: pair.collective,
        algorithm,
        topologies: vec![kind],
        replaces: Some(pair.default),
        nodes: Bounds { min: Some(p as u64), max: Some(p as u64) },
        size: Bounds { min: Some(Bytes(min)), max: Some(Bytes(max)) },
        node_bytes: Bounds::default(),
        cost_model: None,
        ahead_in_the_model: false,
        alternatives: Vec::new(),
        why: why.clone(),
    };
    match found {
        None => vec![rule(pair.default, first.size, last.size)],
        Some(0) => vec![rule(pair.alternative, first.size, last.size)],
        Some(index) => vec![
            rule(pair.default, first.size, measured[index].size - 1),
            rule(pair.alternative, measured[index].size, last.size),
        ],
    }
}

/// Runs `collective` (by `algorithm`, or the topology's default) on `size` per node.
async fn execute(
    args: &TuneArgs,
    target: &Target,
    collective: Collective,
    algorithm: Option<Algorithm>,
    size: u64,
    repetition: Repetition,
) -> anyhow::Result<RunOutcome> {
    let algorithm = algorithm.unwrap_or_else(|| catalogue::default_algorithm(collective, args.shape.topology));
    let data = DataArgs { root: 0, dtype: Dtype::F64, op: ReduceOp::Sum, shift: 1, exclusive: false, seed: 1 };
    let spec = request::run_spec(collective, algorithm, size, &data, repetition)?;
    let request = RunRequest {
        topology: args.shape.topology,
        dims: args.shape.dims.clone(),
        routes: args.shape.routes,
        placement: args.shape.placement,
        spec,
    };
    target.execute(request).await
}

/// Each timed iteration's time (its slowest node's), of a verified run.
fn iteration_times(outcome: &RunOutcome) -> anyhow::Result<Vec<f64>> {
    let summary = report::summarize(outcome, None).map_err(|failure| anyhow!("{failure}"))?;
    Ok(summary.iteration_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(ahead: &[bool]) -> Vec<Measured> {
        ahead
            .iter()
            .enumerate()
            .map(|(i, &ahead)| Measured {
                size: 1024 << i,
                default_us: 10.0,
                alternative_us: if ahead { 5.0 } else { 20.0 },
            })
            .collect()
    }

    #[test]
    fn the_crossing_is_where_the_alternative_stays_ahead() {
        assert_eq!(crossing(&points(&[false, false, true, true])), Some(2));
        // Ahead once, behind again: only the tail counts.
        assert_eq!(crossing(&points(&[false, true, false, true])), Some(3));
        assert_eq!(crossing(&points(&[true, true])), Some(0));
        assert_eq!(crossing(&points(&[true, false])), None);
        assert_eq!(crossing(&points(&[])), None);
    }

    #[test]
    fn pairs_follow_the_rules_that_speak_of_the_cluster() {
        let tuning = Tuning::built_in();
        let names = |kind, p| -> Vec<String> {
            pairs(&tuning, kind, p)
                .iter()
                .map(|pair| format!("{} {}>{}", pair.collective, pair.default, pair.alternative))
                .collect()
        };
        assert_eq!(
            names(TopologyKind::Hypercube, 4),
            [
                "allreduce recursive-doubling>halving-doubling",
                "scan hypercube>pipeline",
                "alltoall hypercube>pairwise-xor"
            ]
        );
        assert_eq!(
            names(TopologyKind::Full, 16),
            [
                "allreduce recursive-doubling>halving-doubling",
                "allreduce recursive-doubling>reduce-broadcast",
                "scan hypercube>pipeline",
                "scatter hypercube>linear"
            ]
        );
        assert_eq!(names(TopologyKind::Ring, 8), Vec::<String>::new());
    }
}
