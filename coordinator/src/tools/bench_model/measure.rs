//! The benchmark measured: each cluster's runs (under `--dilation auto` after its
//! probe) one by one, a row each, with the progress lines and what is left.

use std::time::{Duration, Instant};

use bytesize::ByteSize;
use topocomm_proto::control::RunRequest;
use topocomm_proto::spec::{LinkModel, MAX_TIMEOUT};

use crate::control::target::Target;
use crate::render::bench_model::{ClusterTime, Row, human, shape_name};
use crate::render::dilation::{ProbeFigures, factor_text};
use crate::render::output::outln;
use crate::render::report;
use crate::tools::bench_model::plan::Case;
use crate::tools::dilation::Probe;
use crate::tools::model::{ModelError, Prediction};

/// Where the benchmark stands, for the progress lines.
pub(super) struct Forecast {
    pub(super) total: usize,
    pub(super) estimate: Duration,
    pub(super) started: Instant,
    /// The estimates of the runs made so far.
    pub(super) planned_done: Duration,
}

/// One cluster of the benchmark and how its runs are dilated.
pub(super) struct ClusterRuns<'a> {
    pub(super) target: &'a Target,
    pub(super) p: usize,
    /// `--dilation auto`: probe the cluster first and dilate each run as it needs.
    pub(super) auto: bool,
    pub(super) json: bool,
    /// `--verbose`: say in full why `auto` chose the first run's K.
    pub(super) verbose: bool,
}

impl ClusterRuns<'_> {
    /// Dilates `cases` (under `auto`, after the probe), runs them one by one, appending
    /// a row for each, and says what the cluster's runs cost.
    pub(super) async fn run(
        &self,
        mut cases: Vec<&mut Case>,
        rows: &mut Vec<Row>,
        forecast: &mut Forecast,
    ) -> anyhow::Result<ClusterTime> {
        let began = Instant::now();
        let probe = match (self.auto, cases.first().map(|case| case.links)) {
            (true, Some(links)) => Some(self.dilate(&mut cases, links, forecast).await?),
            _ => None,
        };
        for case in &cases {
            run_case(self.target, case, rows, forecast, self.json).await?;
        }
        let factors = cases.iter().map(|case| case.spec.dilation.factor());
        Ok(ClusterTime {
            p: self.p,
            dilation_min: factors.clone().fold(f64::INFINITY, f64::min),
            dilation_max: factors.fold(1.0, f64::max),
            probe,
            wall_s: began.elapsed().as_secs_f64(),
        })
    }

    /// Probes the cluster on the first case's topology and gives every case the K its
    /// messages need; returns what the probe measured.
    async fn dilate(
        &self,
        cases: &mut [&mut Case],
        links: LinkModel,
        forecast: &mut Forecast,
    ) -> anyhow::Result<ProbeFigures> {
        let first = &cases[0];
        let request = RunRequest {
            topology: first.topology.kind(),
            dims: None,
            routes: None,
            placement: first.topology.placement(),
            spec: first.spec.clone(),
        };
        let mut probe = Probe::measure(self.target, &request, links).await?;
        let longest = cases.iter().filter_map(|case| case.messages).map(|m| m.longest).max();
        probe.measure_long(self.target, &request, links, longest).await?;
        let mut reason = String::new();
        for case in cases.iter_mut() {
            let before = case.estimate();
            // The deadline follows the dilation here (`Case::dilate`), so it caps nothing.
            let (factor, auto) = probe.choose(&case.links, case.messages, case.model_us(), MAX_TIMEOUT);
            case.dilate(factor);
            forecast.estimate = (forecast.estimate + case.estimate()).saturating_sub(before);
            if reason.is_empty() {
                reason = auto.why(self.verbose);
            }
        }
        let factors: Vec<f64> = cases.iter().map(|case| case.spec.dilation.factor()).collect();
        eprintln!(
            "p={}: dilation from ×{} to ×{} by run (--dilation auto; the first run: {reason}); about {} left in all",
            self.p,
            factor_text(factors.iter().copied().fold(f64::INFINITY, f64::min)),
            factor_text(factors.iter().copied().fold(1.0, f64::max)),
            human(remaining(forecast, forecast.started.elapsed())),
        );
        Ok(probe.figures().clone())
    }
}

/// Runs `case` on `target`, appending its row.
async fn run_case(
    target: &Target,
    case: &Case,
    rows: &mut Vec<Row>,
    forecast: &mut Forecast,
    json: bool,
) -> anyhow::Result<()> {
    let mut row = Row::of(case);
    if let Ok(prediction) = &case.prediction {
        let request = RunRequest {
            topology: case.topology.kind(),
            dims: None,
            routes: None,
            placement: case.topology.placement(),
            spec: case.spec.clone(),
        };
        let began = Instant::now();
        match target.execute(request).await {
            Ok(outcome) => match report::summarize(&outcome, Some((prediction.time_us(), case.links))) {
                Ok(summary) => {
                    row.measured_us = Some(summary.time_us.median);
                    row.measured = Some(summary.time_us);
                    row.ratio = summary.model_ratio;
                }
                Err(failure) => row.error = Some(failure.to_string()),
            },
            Err(error) => row.error = Some(format!("{error:#}")),
        }
        row.wall_s = began.elapsed().as_secs_f64();
    }
    let done = rows.len() + 1;
    let elapsed = forecast.started.elapsed();
    forecast.planned_done += case.estimate();
    eprintln!(
        "[{done}/{}] {} ({}) {} p={} {} {} ×{}: {} (elapsed {}, about {} left)",
        forecast.total,
        row.collective,
        row.algorithm,
        shape_name(row.topology, &row.dims),
        row.p,
        row.routing,
        ByteSize::b(row.size_bytes).display().iec(),
        factor_text(row.dilation),
        match (&row.error, row.measured_us, row.model_us, row.ratio) {
            (Some(error), ..) => format!("FAILED: {}", error.lines().next().unwrap_or_default()),
            (None, Some(measured), Some(model), Some(ratio)) =>
                format!("measured {measured:.0} µs, model {model:.0} µs, ratio {ratio:.3}"),
            _ => "no timing".into(),
        },
        human(elapsed),
        human(remaining(forecast, elapsed)),
    );
    if json {
        match crate::render::schema::versioned_json(&row) {
            Ok(line) => outln!("{line}")?,
            Err(error) => eprintln!("cannot print the row as JSON: {error}"),
        }
    }
    rows.push(row);
    Ok(())
}

/// The estimate of what is left, scaled by how the estimate has fared so far.
pub(super) fn remaining(forecast: &Forecast, elapsed: Duration) -> Duration {
    let planned_left = forecast.estimate.saturating_sub(forecast.planned_done);
    if forecast.planned_done.is_zero() {
        return planned_left;
    }
    planned_left.mul_f64((elapsed.as_secs_f64() / forecast.planned_done.as_secs_f64()).clamp(0.25, 4.0))
}

impl Row {
    pub(super) fn of(case: &Case) -> Self {
        Row {
            collective: case.spec.collective,
            algorithm: case.spec.what_runs(),
            topology: case.topology.kind(),
            dims: case.topology.dims().to_vec(),
            p: case.p(),
            routing: case.routing,
            size_bytes: case.spec.size_bytes,
            iterations: case.spec.iterations,
            measured_us: None,
            measured: None,
            model_us: case.prediction.as_ref().ok().map(Prediction::time_us),
            ratio: None,
            dilation: case.spec.dilation.factor(),
            wall_s: 0.0,
            error: case.prediction.as_ref().err().map(ModelError::to_string),
        }
    }
}
