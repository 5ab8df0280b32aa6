//! One run as `topocomm run` makes it, for every front end that runs (the command line
//! and the lab's page): the dilation chosen when `--dilation auto` asks (the probe), the
//! request executed on its [`Target`], the cost model's prediction of what ran, and the
//! verdict with its statistics and JSON. What to print, dump or draw is the caller's.

use std::time::Instant;

use topocomm_proto::Topology;
use topocomm_proto::control::RunOutcome;
use topocomm_proto::spec::{LinkModel, RunSpec};

use crate::control::request::Planned;
use crate::control::target::Target;
use crate::render::dilation::Dilated;
use crate::render::report::{self, RunSummary, VerificationFailure};
use crate::tools::dilation;
use crate::tools::model::{self, Prediction};
use topocomm_collectives::tuning::Tuning;

/// A run that came back from its nodes (verified or not).
pub struct Executed {
    pub outcome: RunOutcome,
    /// The verdict: every node verified (with the statistics), or which were not.
    pub summary: Result<RunSummary, VerificationFailure>,
    /// The cost model's schedule and time of what ran, when the links have physics.
    pub prediction: Option<Prediction>,
    /// The link physics the prediction used.
    pub predict_with: Option<LinkModel>,
    /// The summary (or the failure) as the CLI's versioned JSON document.
    pub json: serde_json::Value,
}

/// What a run is doing, for a front end that shows progress.
#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    /// The dilation probe measures this cluster (`--dilation auto`).
    Probing,
    /// The dilation was chosen: which, and why (see [`Dilated::announcement`]).
    Dilated(Box<Dilated>),
    /// The request went to the cluster.
    Running,
}

/// Runs `planned` on `target` (dilated as it says, after the probe when it says `auto`;
/// `auto` algorithms resolved by `tuning` for the probe's prediction), telling `on_stage` where it is, and summarises what came back.
pub async fn run(
    target: &Target,
    planned: Planned,
    tuning: &Tuning,
    on_stage: &(dyn Fn(Stage) + Sync),
) -> anyhow::Result<Executed> {
    let Planned { mut request, predict_with, auto_dilation } = planned;
    let mut predicted: Option<(RunSpec, Topology, Prediction)> = None;
    let mut auto = None;
    if let (true, Some(links)) = (auto_dilation, request.spec.emulation) {
        on_stage(Stage::Probing);
        let mut probe = dilation::Probe::measure(target, &request, links).await?;
        let topology = probe.topology().clone();
        let spec = dilation::resolved(&request.spec, &topology, tuning);
        let prediction = model::predict(&spec, &topology, links)?;
        let longest = dilation::Messages::of(&prediction).map(|m| m.longest);
        probe.measure_long(target, &request, links, longest).await?;
        let (factor, choice) = probe.choose_for(&spec, &links, &prediction);
        request.spec.dilation = factor;
        let chosen = Dilated { factor: factor.factor(), auto: Some(choice), wall_s: None };
        auto = chosen.auto.clone();
        on_stage(Stage::Dilated(Box::new(chosen)));
        predicted = Some((spec, topology, prediction));
    }
    on_stage(Stage::Running);
    let began = Instant::now();
    let outcome = target.execute(request).await?;
    let wall_s = began.elapsed().as_secs_f64();
    let prediction = match predict_with {
        Some(links) if outcome.reports.iter().all(|r| r.error.is_none()) => {
            let topology = outcome.topology.build()?;
            // The probe's prediction, when it was of what ran.
            match predicted {
                Some((spec, on, prediction)) if spec.algorithm == outcome.spec.algorithm && on == topology => {
                    Some(prediction)
                }
                _ => Some(model::predict(&outcome.spec, &topology, links)?),
            }
        }
        _ => None,
    };
    let mut summary = report::summarize(&outcome, prediction.as_ref().map(Prediction::time_us).zip(predict_with));
    if let Ok(summary) = &mut summary {
        summary.encrypted = target.encrypted();
        if let Some(dilated) = &mut summary.dilation {
            dilated.auto = auto;
            dilated.wall_s = Some(wall_s);
        }
    }
    let json = match &summary {
        Ok(summary) => crate::render::schema::versioned_json(summary)?,
        Err(failure) => {
            crate::render::schema::versioned(serde_json::json!({ "verified": false, "error": failure.to_string() }))
        }
    };
    Ok(Executed { outcome, summary, prediction, predict_with, json })
}
