//! A sweep measured: every planned point run on the cluster in order, each a verified
//! run summarised as a [`SweepPoint`], and what a front end is told as it goes
//! ([`SweepUpdate`]).

use anyhow::{Context, anyhow};
use topocomm_proto::Topology;
use topocomm_proto::spec::{Algorithm, Collective, LinkModel};

use crate::control::request::Repetition;
use crate::control::target::Target;
use crate::render::bus_factor::bus_factor;
use crate::render::quantity::size_text;
use crate::render::report;
use crate::render::sweep_outputs::Sweep;
use crate::render::sweep_table::SweepPoint;
use crate::tools::model::{self, Prediction};
use crate::tools::sweep::args::SweepArgs;
use crate::tools::sweep::plan::{PlannedSweepPoint, plan_points};

/// Where a sweep is, for a front end that shows it (the terminal's table and progress
/// bar, the lab's page).
pub enum SweepUpdate<'a> {
    /// Point `index` of `of` goes to the cluster.
    Starting { index: usize, of: usize, algorithm: Algorithm, size: u64 },
    /// Point `index` came back verified: the point, its summary, the topology it ran on,
    /// and how `--dilation auto` chose (as the table's header says it; the sweep's JSON
    /// has it in full).
    Measured {
        index: usize,
        point: &'a SweepPoint,
        summary: &'a report::RunSummary,
        topology: &'a Topology,
        dilation_line: Option<&'a str>,
    },
}

impl SweepPoint {
    pub(super) fn of(summary: &report::RunSummary, collective: Collective) -> SweepPoint {
        let time = summary.time_us;
        let algbw = (summary.size_bytes > 0 && time.mean > 0.0).then(|| summary.size_bytes as f64 / time.mean / 1e3);
        let factor = bus_factor(collective).on(summary.nodes);
        SweepPoint {
            algorithm: summary.algorithm.clone(),
            size_bytes: summary.size_bytes,
            avg_us: time.mean,
            min_us: time.min,
            max_us: time.max,
            median_us: time.median,
            p50_us: time.p50,
            p90_us: time.p90,
            p99_us: time.p99,
            iterations: summary.iterations,
            model_us: summary.model_us,
            algbw_gbps: algbw.filter(|_| factor.is_some()),
            busbw_gbps: algbw.zip(factor).map(|(a, f)| a * f),
            dilation: summary.dilation.as_ref().map(|d| d.factor),
            wall_s: summary.dilation.as_ref().and_then(|d| d.wall_s).unwrap_or(0.0),
        }
    }
}

/// Measures every point of the sweep on `cluster` (the dilation probe first under
/// `--dilation auto`), in order, each a verified run, into `sweep`, telling `on_step`
/// where it is; the first failed point stops the sweep. Both the command line and the
/// lab's page sweep through here.
#[allow(clippy::too_many_arguments)]
pub async fn measure_points(
    args: &SweepArgs,
    cluster: &Target,
    algorithms: &[Algorithm],
    sizes: &[u64],
    predict_with: Option<LinkModel>,
    repetition: Repetition,
    sweep: &mut Sweep,
    on_step: &mut (dyn FnMut(SweepUpdate<'_>) -> anyhow::Result<()> + Send),
) -> anyhow::Result<()> {
    let plans = plan_points(args, cluster, algorithms, sizes, repetition, sweep).await?;
    let of = plans.len();
    for (index, plan) in plans.into_iter().enumerate() {
        let PlannedSweepPoint { algorithm, size, request, predicted } = plan;
        on_step(SweepUpdate::Starting { index, of, algorithm, size })?;
        let began = std::time::Instant::now();
        let outcome = cluster.execute(request).await.with_context(|| format!("{algorithm} at {}", size_text(size)))?;
        let wall_s = began.elapsed().as_secs_f64();
        let topology = outcome.topology.build()?;
        let prediction = match (predict_with, predicted) {
            (Some(_), Some((spec, on, prediction))) if spec.algorithm == outcome.spec.algorithm && on == topology => {
                Some(prediction)
            }
            (Some(links), _) => Some(model::predict(&outcome.spec, &topology, links)?),
            (None, _) => None,
        };
        let mut summary = report::summarize(&outcome, prediction.as_ref().map(Prediction::time_us).zip(predict_with))
            .map_err(|failure| anyhow!("the sweep stopped: {failure}"))?;
        if let Some(dilated) = &mut summary.dilation {
            dilated.wall_s = Some(wall_s);
        }
        let mut point = SweepPoint::of(&summary, args.collective);
        // The run's own wall time, dilated or not (only a dilated summary carries one,
        // and the sweep's total was the sum of zeros on raw links).
        point.wall_s = wall_s;
        sweep.points.push(point);
        sweep.links = summary.links;
        on_step(SweepUpdate::Measured {
            index,
            point: sweep.points.last().expect("just pushed"),
            summary: &summary,
            topology: &topology,
            dilation_line: sweep.dilation_line.as_deref(),
        })?;
        sweep.topology = Some(topology);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_takes_busbw_from_its_collective() {
        // The test summary: one iteration of 1 ms.
        let point = |collective, nodes, size_bytes| {
            let mut summary = crate::render::report::tests::summary_for_tests();
            summary.nodes = nodes;
            summary.size_bytes = size_bytes;
            SweepPoint::of(&summary, collective)
        };
        // 1 MB in 1 ms is 1 GB/s of algbw.
        let allgather = point(Collective::Allgather, 8, 1_000_000);
        assert_eq!(allgather.algbw_gbps, Some(1.0));
        assert_eq!(allgather.busbw_gbps, Some(7.0));
        let barrier = point(Collective::Barrier, 8, 0);
        assert_eq!((barrier.algbw_gbps, barrier.busbw_gbps), (None, None));
    }
}
