//! `topocomm bench-model`: emulated runs measured against the cost model.
//!
//! For every node count × topology × routing × collective × size, the collective runs
//! with its topology's default algorithm on a local cluster whose links emulate the
//! given t_s, t_h and t_w, and the cost model predicts the same run; the table holds the
//! measured median against the prediction. One cluster serves every run of a node count
//! (the coordinator re-wires it per topology). Every prediction is made before anything
//! runs, so the benchmark can say how long it will take before it starts.
//!
//! Emulated links are dilated (`--dilation`, by default `auto`): each cluster is probed
//! once, on its first topology, and every run gets the K its messages need there
//! (`tools::dilation`); the table gives each run's K, and the closing lines each
//! cluster's range of K and wall time.
//!
//! Its parts: `args` (the options), `plan` (every case predicted and estimated),
//! `measure` (each cluster's runs); the rows, the table and the page are
//! [`crate::render::bench_model`]'s.

mod args;
mod measure;
mod plan;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use strum::IntoEnumIterator;
use topocomm_proto::spec::{Collective, LinkModel, Ports};

use crate::control::local::{self, LocalCluster};
use crate::control::request::Dilating;
use crate::control::target::Target;
use crate::render::bench_model::{ClusterTime, Row, closing_line, failures, human, results_page, summarize, table};
use crate::render::output::{self, outln};
use crate::render::page;
use crate::tools::bench_model::args::read_program;
use crate::tools::bench_model::measure::{ClusterRuns, Forecast};
use crate::tools::bench_model::plan::{Case, PER_WIRING, dedup_count, plan};
use topocomm_collectives::tuning::Tuning;

pub use args::BenchModelArgs;

/// Runs the benchmark `args` describes.
pub async fn run(args: &BenchModelArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.iterations >= 1, "--iterations must be at least 1");
    for (name, empty) in [
        ("--nodes", args.nodes.is_empty()),
        ("--topologies", args.topologies.is_empty()),
        ("--sizes", args.sizes.is_empty()),
        ("--routings", args.routings.is_empty()),
    ] {
        anyhow::ensure!(!empty, "{name} needs at least one value");
    }
    if let Some(&p) = args.nodes.iter().find(|&&p| p < 2) {
        anyhow::bail!("--nodes {p}: a benchmark of communication needs at least 2 nodes");
    }
    if let Some(path) = &args.page {
        output::check_file_writable("--page", path)?;
    }
    // 0 emulates cut-through in the limit of small packets (whole frames, no packet overhead).
    let packet_bytes = u32::try_from(args.packet.unwrap_or(0)).map_err(|_| anyhow!("--packet must be below 4 GiB"))?;
    let links = |routing| LinkModel {
        ts_ns: args.ts / 1000,
        th_ns: args.th / 1000,
        tw_ps: args.tw,
        routing,
        packet_bytes,
        ports: Ports::All,
    };
    let schedule = match &args.schedule {
        Some(path) => Some(read_program(path, &args.collectives)?),
        None => None,
    };
    let collectives: Vec<Collective> = match &schedule {
        Some((_, collective)) => vec![*collective],
        None if args.collectives.is_empty() => Collective::iter().filter(|&c| c != Collective::Barrier).collect(),
        None => args.collectives.clone(),
    };
    let link_text = format!(
        "t_s {} µs, t_h {} µs, t_w {} ns/B, cut-through {}",
        args.ts as f64 / 1e6,
        args.th as f64 / 1e6,
        args.tw as f64 / 1e3,
        if packet_bytes == 0 { "in whole frames".to_owned() } else { format!("in {packet_bytes} B packets") }
    );

    let (mut cases, skipped) = plan(args, &collectives, schedule.as_ref().map(|(schedule, _)| schedule), links)?;
    anyhow::ensure!(!cases.is_empty(), "nothing to run: every shape or size was skipped");
    if let Dilating::By(factor) = args.dilation {
        cases.iter_mut().for_each(|case| case.dilate(factor));
    }
    let clusters = dedup_count(cases.iter().map(Case::p));
    let wirings = dedup_count(cases.iter().map(|c| (c.p(), c.topology.kind())));
    let estimate: Duration =
        cases.iter().map(Case::estimate).sum::<Duration>() + PER_WIRING * (clusters + wirings) as u32;
    let dilation = match args.dilation {
        Dilating::By(factor) => format!("dilated ×{factor}"),
        Dilating::Auto => "dilated as each cluster's probe says (--dilation auto)".to_owned(),
    };
    eprintln!(
        "{} runs ({} iterations after {warmup} warm-up each) on {clusters} local cluster{} with emulated links ({link_text}), \
         {dilation}; expected to take about {}{}",
        cases.len(),
        args.iterations,
        if clusters == 1 { "" } else { "s" },
        human(estimate),
        if args.dilation == Dilating::Auto { " undilated" } else { "" },
        warmup = args.warmup,
    );

    let started = Instant::now();
    let mut rows: Vec<Row> = Vec::with_capacity(cases.len());
    let mut times: Vec<ClusterTime> = Vec::new();
    let mut interrupted = None;
    let mut forecast = Forecast { total: cases.len(), estimate, started, planned_done: Duration::ZERO };
    let mut node_counts: Vec<usize> = cases.iter().map(Case::p).collect();
    node_counts.dedup();
    let log_root = local::log_folder(args.logs.as_deref())?;
    for p in node_counts {
        let logs = log_root.join(format!("p{p}"));
        // Every run names its algorithm (the topology's default): no `auto` to tune.
        let local = LocalCluster::start(p, &logs, false, Arc::new(Tuning::built_in())).await?;
        eprintln!("local cluster of {p} nodes up, node logs in {}/node-*.log", local.logs.display());
        let target = Target::Local(local);
        let ours: Vec<&mut Case> = cases.iter_mut().filter(|c| c.p() == p).collect();
        let cluster = ClusterRuns {
            target: &target,
            p,
            auto: args.dilation == Dilating::Auto,
            json: args.json,
            verbose: args.words.verbose,
        };
        let result = tokio::select! {
            result = cluster.run(ours, &mut rows, &mut forecast) => result,
            _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted after {} of {} runs; every node process was stopped", rows.len(), cases.len())),
        };
        target.shutdown().await;
        match result {
            Ok(time) => times.push(time),
            Err(error) => {
                interrupted = Some(error);
                break;
            }
        }
    }

    // The estimate as dilation left it.
    let summary = summarize(&rows, skipped, times, forecast.estimate, started.elapsed());
    if args.json {
        outln!("{}", crate::render::schema::versioned(serde_json::json!({ "summary": summary })))?;
    } else {
        outln!(
            "emulated links: {link_text}; {} timed iterations after {} warm-up per run",
            args.iterations,
            args.warmup
        )?;
        outln!("{}", table(&rows))?;
        outln!("{}", closing_line(&summary))?;
        for line in failures(&rows) {
            outln!("{line}")?;
        }
    }
    if let Some(path) = &args.page {
        let interrupted = interrupted.as_ref().map(|error| format!("{error:#}"));
        page::write(
            path,
            &results_page(&link_text, args.iterations, args.warmup, &rows, &summary, interrupted.as_deref()),
        )?;
        eprintln!("wrote the page {}", path.display());
    }
    if let Some(error) = interrupted {
        return Err(error);
    }
    anyhow::ensure!(summary.failed == 0, "{} of {} runs failed (see above)", summary.failed, summary.runs);
    Ok(())
}
