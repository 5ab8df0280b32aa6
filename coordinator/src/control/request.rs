//! Turns what the user typed into a run request: the algorithm (named, or the one made
//! for the topology), the spec, the emulated link physics and the physics to predict with.

use std::time::Duration;

use anyhow::{Context, anyhow};
use topocomm_proto::catalogue;
use topocomm_proto::control::RunRequest;
use topocomm_proto::spec::{LinkModel, Routing, RunSpec};

use crate::control::calibration;
use crate::cli::{CollectiveArgs, Emulated, LinkArgs};

/// A request and the link physics its prediction uses (if any).
#[derive(Debug, Clone)]
pub struct Planned {
    pub request: RunRequest,
    pub predict_with: Option<LinkModel>,
}

/// How many times to run and how long each iteration may wait.
#[derive(Debug, Clone, Copy)]
pub struct Repetition {
    pub warmup: u32,
    pub iterations: u32,
    pub timeout: Duration,
    pub dump: bool,
}

/// The request `what` describes, repeated as `repetition` says.
pub fn plan(what: &CollectiveArgs, repetition: Repetition) -> anyhow::Result<Planned> {
    let algorithm =
        what.algorithm.unwrap_or_else(|| catalogue::default_algorithm(what.collective, what.shape.topology));
    catalogue::check(what.collective, algorithm).map_err(|e| anyhow!(e))?;
    let (emulation, predict_with) = link_models(&what.links)?;
    let spec = RunSpec {
        run: 0,
        collective: what.collective,
        algorithm,
        root: what.root,
        size_bytes: what.size,
        dtype: what.dtype,
        op: what.op,
        seed: what.seed,
        warmup: repetition.warmup,
        iterations: repetition.iterations,
        timeout_ms: u64::try_from(repetition.timeout.as_millis())
            .map_err(|_| anyhow!("--timeout {:?} does not fit in 64-bit milliseconds", repetition.timeout))?,
        dump: repetition.dump,
        shift: what.shift,
        exclusive: what.exclusive,
        emulation,
        trace: false,
        clock_offsets_ns: Vec::new(),
    };
    let request = RunRequest { topology: what.shape.topology, dims: what.shape.dims.clone(), spec };
    Ok(Planned { request, predict_with })
}

/// Extra patience for wiring and reporting on top of the run's own deadlines.
const CLIENT_SLACK: Duration = Duration::from_secs(60);

/// How long a client waits for a serving coordinator to answer `spec`: the run's own
/// deadline, one more timeout (the wait for the cluster), and slack for wiring and
/// reporting. Saturating: an invalid spec is refused by the coordinator, not here.
pub fn client_patience(spec: &RunSpec) -> Duration {
    let run = spec.run_deadline().unwrap_or(Duration::MAX);
    run.saturating_add(spec.timeout()).saturating_add(CLIENT_SLACK)
}

/// The emulation to run with and the link physics to predict with, from `--ts/--th/--tw`:
/// explicit values emulate and predict; `--ts auto` only predicts, with the calibration.
pub fn link_models(links: &LinkArgs) -> anyhow::Result<(Option<LinkModel>, Option<LinkModel>)> {
    let packet_bytes = match links.packet {
        None => 0,
        Some(bytes) => u32::try_from(bytes).ok().filter(|&p| p > 0).context("--packet must be 1 B to 4 GiB")?,
    };
    if links.ts == Some(Emulated::Auto) {
        anyhow::ensure!(
            links.th.is_none() && links.tw.is_none(),
            "--ts auto takes t_h and t_w from the calibration too"
        );
        let fitted = calibration::load()?;
        return Ok((None, Some(LinkModel { routing: Routing::Sf, ..fitted })));
    }
    let ts = match links.ts {
        Some(Emulated::Picos(ps)) => Some(ps),
        _ => None,
    };
    if ts.is_none() && links.th.is_none() && links.tw.is_none() {
        return Ok((None, None));
    }
    let model = LinkModel {
        ts_ns: ts.unwrap_or(0) / 1000,
        th_ns: links.th.unwrap_or(0) / 1000,
        tw_ps: links.tw.unwrap_or(0),
        routing: links.routing,
        packet_bytes,
    };
    Ok((Some(model), Some(model)))
}
