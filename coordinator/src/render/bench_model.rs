//! `topocomm bench-model`'s output: a row per run (measured against the model), the
//! closing line, the table, the failures and the page `--page` writes, from plain data
//! the command (`tools::bench_model`) hands down.

use std::time::Duration;

use bytesize::ByteSize;
use serde::Serialize;
use topocomm_proto::TopologyKind;
use topocomm_proto::spec::{Collective, Routing};

use crate::render::dilation::{ProbeFigures, factor_text, seconds_text};
use crate::render::page::{self, Machine};
use crate::render::quantity::size_text;
use crate::render::report::TimeStats;
use crate::render::table::{Fit, HouseTable};

/// Measured / model ratios inside this band count as the model holding.
pub const BAND: (f64, f64) = (0.95, 1.10);

/// One line of the table (and of `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub collective: Collective,
    /// The algorithm, or the schedule that ran in its place.
    pub algorithm: String,
    pub topology: TopologyKind,
    pub dims: Vec<usize>,
    pub p: usize,
    pub routing: Routing,
    pub size_bytes: u64,
    pub iterations: u32,
    /// Median of the timed iterations (an iteration takes as long as its slowest node).
    pub measured_us: Option<f64>,
    pub measured: Option<TimeStats>,
    pub model_us: Option<f64>,
    /// Measured median over model.
    pub ratio: Option<f64>,
    /// K: the run's emulated links ran K times slower than the wall clock (the times
    /// above are emulated).
    pub dilation: f64,
    /// Wall time the run took, in seconds.
    pub wall_s: f64,
    /// Why the run (or its prediction) failed.
    pub error: Option<String>,
}

impl Row {
    /// The case the row measured, as the progress and failure lines name it:
    /// `broadcast (ring) on ring p=8 sf 1.0 KiB`.
    pub fn case(&self) -> String {
        format!(
            "{} ({}) on {} p={} {} {}",
            self.collective,
            self.algorithm,
            shape_name(self.topology, &self.dims),
            self.p,
            self.routing,
            ByteSize::b(self.size_bytes).display().iec()
        )
    }

    /// Whether the measured / model ratio is inside [`BAND`].
    pub fn within(&self) -> bool {
        self.ratio.is_some_and(|r| (BAND.0..=BAND.1).contains(&r))
    }
}

/// The closing line of the table (and of `--json`).
#[derive(Debug, Serialize)]
pub struct Summary {
    pub runs: usize,
    pub failed: usize,
    pub skipped: Vec<String>,
    pub ratio_min: Option<f64>,
    pub ratio_median: Option<f64>,
    pub ratio_max: Option<f64>,
    pub within: usize,
    pub band: (f64, f64),
    /// Each cluster's dilation and wall time.
    pub clusters: Vec<ClusterTime>,
    pub estimated_s: f64,
    pub elapsed_s: f64,
}

/// How one cluster's runs were dilated and what they cost.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterTime {
    pub p: usize,
    /// The smallest and largest K of its runs.
    pub dilation_min: f64,
    pub dilation_max: f64,
    /// `auto`: what the probe measured there.
    pub probe: Option<ProbeFigures>,
    /// Wall time of its runs (the probe's included), in seconds.
    pub wall_s: f64,
}

pub fn summarize(
    rows: &[Row],
    skipped: Vec<String>,
    clusters: Vec<ClusterTime>,
    estimate: Duration,
    elapsed: Duration,
) -> Summary {
    let mut ratios: Vec<f64> = rows.iter().filter_map(|r| r.ratio).collect();
    ratios.sort_by(f64::total_cmp);
    let stats = (!ratios.is_empty()).then(|| TimeStats::of(&ratios));
    Summary {
        runs: rows.len(),
        failed: rows.iter().filter(|r| r.error.is_some()).count(),
        skipped,
        ratio_min: stats.map(|s| s.min),
        ratio_median: stats.map(|s| s.median),
        ratio_max: stats.map(|s| s.max),
        within: rows.iter().filter(|r| r.within()).count(),
        band: BAND,
        clusters,
        estimated_s: estimate.as_secs_f64(),
        elapsed_s: elapsed.as_secs_f64(),
    }
}

pub fn table(rows: &[Row]) -> HouseTable {
    let mut table = HouseTable::new([
        "collective",
        "algorithm",
        "topology",
        "p",
        "routing",
        "size",
        "measured µs",
        "model µs",
        "ratio",
        "K",
    ]);
    for row in rows {
        let number = |value: Option<f64>, digits: usize| match value {
            Some(v) => format!("{v:.digits$}"),
            None if row.error.is_some() => "FAILED".into(),
            None => "-".into(),
        };
        table.row([
            row.collective.to_string(),
            row.algorithm.to_string(),
            shape_name(row.topology, &row.dims),
            row.p.to_string(),
            row.routing.to_string(),
            ByteSize::b(row.size_bytes).display().iec().to_string(),
            number(row.measured_us, 1),
            row.model_us.map(|m| format!("{m:.1}")).unwrap_or_else(|| "-".into()),
            number(row.ratio, 3),
            factor_text(row.dilation),
        ]);
    }
    table.right_aligned(&[3, 6, 7, 8, 9]);
    table
}

/// A line per failed run.
pub fn failures(rows: &[Row]) -> impl Iterator<Item = String> + '_ {
    rows.iter()
        .filter(|r| r.error.is_some())
        .map(|row| format!("failed: {}: {}", row.case(), row.error.as_deref().unwrap_or_default()))
}

/// The page `--page` writes: what `bench-model` prints, with the command and the machine.
pub fn results_page(
    link_text: &str,
    iterations: u32,
    warmup: u32,
    rows: &[Row],
    summary: &Summary,
    interrupted: Option<&str>,
) -> String {
    let mut body = format!(
        "Emulated links: {link_text}; {} timed iterations after {} warm-up per run. Each run is the \
         topology's default algorithm, measured on a local cluster of this machine against the cost \
         model's prediction of the same run ([Emulated links and the cost model](../emulation.md)).\n\n",
        iterations, warmup
    );
    if let Some(error) = interrupted {
        body += &format!("**The command stopped before the end** ({error}): the table holds the runs made.\n\n");
    }
    body += &format!("```text\n{}\n{}\n", table(rows).render(Fit::Natural), closing_line(summary));
    for line in failures(rows) {
        body += &format!("{line}\n");
    }
    body += "```\n";
    page::page(
        "bench-model: emulated runs against the cost model",
        "topocomm bench-model --page",
        &page::this_command(),
        &Machine::this(),
        std::time::SystemTime::now(),
        &body,
    )
}

pub fn closing_line(summary: &Summary) -> String {
    let measured = summary.runs - summary.failed;
    let ratios = match (summary.ratio_min, summary.ratio_median, summary.ratio_max) {
        (Some(min), Some(median), Some(max)) => format!(
            "measured / model over {measured} runs: min {min:.3}, median {median:.3}, max {max:.3}; \
             {} of {measured} within [{:.2}, {:.2}]",
            summary.within, summary.band.0, summary.band.1
        ),
        _ => "no run was measured".into(),
    };
    let mut line = ratios;
    if summary.failed > 0 {
        line += &format!("; {} FAILED", summary.failed);
    }
    if !summary.skipped.is_empty() {
        line += &format!("; {} skipped ({})", summary.skipped.len(), summary.skipped.join("; "));
    }
    for cluster in &summary.clusters {
        let probe = cluster
            .probe
            .as_ref()
            .map(|probe| {
                let steps: Vec<String> = std::iter::once(&probe.small)
                    .chain(&probe.long)
                    .map(|steps| format!("{} released {:.0} µs late", size_text(steps.size_bytes), steps.release_us))
                    .collect();
                format!(" (auto: a step of {} nodes sending at once: {})", cluster.p, steps.join(", "))
            })
            .unwrap_or_default();
        let k = if cluster.dilation_min == cluster.dilation_max {
            format!("×{}", factor_text(cluster.dilation_min))
        } else {
            format!("×{} to ×{}", factor_text(cluster.dilation_min), factor_text(cluster.dilation_max))
        };
        line += &format!("\np = {}: dilation {k}{probe}; wall time {}", cluster.p, seconds_text(cluster.wall_s));
    }
    line + &format!(
        "\ntook {} (estimated {})",
        human(Duration::from_secs_f64(summary.elapsed_s)),
        human(Duration::from_secs_f64(summary.estimated_s))
    )
}

/// `ring`, `hypercube`, or a grid with its extents: `torus 4x4`.
pub fn shape_name(kind: TopologyKind, dims: &[usize]) -> String {
    match kind {
        TopologyKind::Mesh | TopologyKind::Torus | TopologyKind::Mesh3d | TopologyKind::Torus3d => {
            let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
            format!("{kind} {}", dims.join("x"))
        }
        _ => kind.to_string(),
    }
}

/// A duration to the second, as people say it: `4 min 05 s`.
pub fn human(duration: Duration) -> String {
    let seconds = duration.as_secs_f64().round() as u64;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {:02} s", seconds / 60, seconds % 60),
        _ => format!("{} h {:02} min", seconds / 3600, seconds % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topocomm_proto::spec::Algorithm;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human(Duration::from_millis(400)), "0 s");
        assert_eq!(human(Duration::from_secs(59)), "59 s");
        assert_eq!(human(Duration::from_secs(245)), "4 min 05 s");
        assert_eq!(human(Duration::from_secs(3 * 3600 + 120)), "3 h 02 min");
    }

    #[test]
    fn shapes_name_their_grid() {
        assert_eq!(shape_name(TopologyKind::Torus, &[2, 4]), "torus 2x4");
        assert_eq!(shape_name(TopologyKind::Hypercube, &[2, 2, 2]), "hypercube");
    }

    #[test]
    fn a_case_names_everything_that_tells_it_from_the_others() {
        let row = Row {
            collective: Collective::Allgather,
            algorithm: Algorithm::Mesh.to_string(),
            topology: TopologyKind::Torus,
            dims: vec![4, 4],
            p: 16,
            routing: Routing::Ct,
            size_bytes: 64 << 10,
            iterations: 10,
            measured_us: None,
            measured: None,
            model_us: None,
            ratio: None,
            error: None,
            dilation: 1.0,
            wall_s: 0.0,
        };
        assert_eq!(row.case(), "allgather (mesh) on torus 4x4 p=16 ct 64.0 KiB");
    }
}
