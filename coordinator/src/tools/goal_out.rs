//! `explain --goal FILE`: the schedule a run executes, as the simulator records it (each
//! node's sends and receives in the order it did them), written as GOAL for LogGOPSim
//! and ATLAHS, with the link physics mapped to LogGP's parameters.

use std::path::Path;

use anyhow::Context;
use topocomm_collectives::algorithms::schedule::goal;
use topocomm_collectives::simulator::Options;
use topocomm_collectives::simulator::spec::{self, Inputs};
use topocomm_proto::Topology;
use topocomm_proto::spec::{LinkModel, RunSpec};

/// LogGP's parameters for `links` (one hop): a message of s bytes costs
/// o + L + (s - 1) G + o there and t_s + t_h + s t_w here, so L = t_s + t_h + t_w,
/// G = t_w and o = g = 0 (topocomm charges no overhead and no gap).
pub fn loggp(links: &LinkModel) -> String {
    let tw_ns = links.tw_ps as f64 / 1e3;
    let l_ns = links.ts_ns as f64 + links.th_ns as f64 + tw_ns;
    format!(
        "LogGOPSim parameters for these links: -L {l_ns} -o 0 -g 0 -G {tw_ns} (ns; one hop: L = t_s + t_h + t_w, G = t_w)"
    )
}

/// Records `spec` on the simulator and writes it to `path` as GOAL; returns what to tell
/// the user.
pub fn write(spec: &RunSpec, topology: &Topology, links: LinkModel, path: &Path) -> anyhow::Result<String> {
    let options = Options { run: spec.run, operations: true, ..Options::default() };
    let recorded = spec::run(spec, topology, links, Inputs::Lengths, options)?;
    let schedule = goal::from_operations(&recorded.operations);
    let operations: usize = schedule.ranks.iter().map(|rank| rank.ops.len()).sum();
    topocomm_collectives::files::write(path, goal::write(&schedule))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(format!(
        "wrote the schedule as GOAL to {}: {} ranks, {operations} operations ({} µs on the model)\n{}",
        path.display(),
        schedule.ranks.len(),
        recorded.time_ns as f64 / 1e3,
        loggp(&links)
    ))
}
