//! `--dilation auto`: how much to dilate an emulated run on the cluster that runs it.
//!
//! Emulated links hold every message to the model's instant, but the software still
//! has to release it and act on it: wake up, deliver, copy or combine, send the next.
//! When every node does so at the same emulated instant, as the worst step of a
//! collective does, p daemons queue for the machine's cores, and the last comes late by
//! what that costs. Dilation by K ([`Dilation`]) leaves those costs as they are on the
//! wall clock while every emulated time lasts K times longer, so against emulated time
//! they shrink by K ([Gupta 2006], [DieCast 2008]).
//!
//! The probe measures them on the cluster, wired as the run asks: two steps in which
//! every node exchanges one message with a neighbour at the same instant, the second
//! handing back what the first brought, as a relay does (`node::probe`), undilated,
//! timed to the last node's receipt ([`PROBE_PERCENTILE`] of a few iterations). Per message length (8 bytes, and the run's longest
//! message up to 1 MiB when it has messages of 16 KiB or more):
//!
//! * cold, on links emulated with zero times (sent, read and delivered at once), a step
//!   costs what moving every node's message at once costs, s(m);
//! * held, on links whose every message lasts H = twice a cold step and at least 10 ms
//!   (as t_w m: no t_s, so no start-up time hides anything; the messages are read long
//!   before they are due and waited for, as in a dilated run), a step costs H plus how
//!   late the software releases every node's message at one instant and hands it on,
//!   c(m).
//!
//! Between the two lengths both are affine in m. K is then the smallest factor (to a
//! tenth) that keeps, for the run's shortest and longest message m (T(m) = t_s + t_h +
//! t_w m over one hop, as the cost model's schedule has them; a ratio of affine
//! functions of m is largest at one end),
//!
//! * c(m) under [`SOFTWARE_SHARE`] of K T(m): the release is late by a few per cent of
//!   the message at most (at the shortest message, the rule); and
//! * s(m) under [`BYTES_SHARE`] of K T(m): the messages have moved well before they are
//!   due,
//!
//! and 1 where both hold undilated. A dilated iteration must still fit in a quarter of
//! the iteration's deadline (`--timeout`): a larger factor is capped there, and the
//! reason says so. Nothing is skipped for speed: the dilated run is the same run, on the
//! same links, verified the same way.

use std::time::{Duration, Instant};

use anyhow::Context;
use topocomm_proto::Topology;
use topocomm_proto::control::RunRequest;
use topocomm_proto::flow::FlowKind;
use topocomm_proto::spec::{Algorithm, Collective, Dilation, LinkModel, RunSpec};

use crate::control::target::Target;
use crate::render::dilation::{AutoDilation, Binding, MessageTime, ProbeFigures, Steps, factor_text, seconds_text};
use crate::render::quantity::size_text;
use crate::render::report;
use crate::tools::model::Prediction;
use topocomm_collectives::simulator::spec::with_known;
use topocomm_collectives::tuning::Tuning;

/// The share of a message's dilated time its release may come late by: a few per cent,
/// so that the run is late by no more than that against the model.
pub const SOFTWARE_SHARE: f64 = 0.03;

/// The share of a message's dilated time that moving every node's message at once may
/// take, so that the messages are read long before they are due.
pub const BYTES_SHARE: f64 = 0.5;

/// The share of the iteration's deadline a dilated iteration may take at most.
const TIMEOUT_SHARE: f64 = 0.25;

/// Bytes per node of the probe's step for the software's cost (one f64).
const SMALL_STEP_BYTES: u64 = 8;

/// The probe measures steps of longer messages only when the run has messages of at
/// least this many bytes (below, their bytes cost little next to the step's own) ...
const LONG_STEP_FROM: u64 = 16 * 1024;

/// ... and with at most this many bytes per node (beyond, the cost per byte is the
/// same and the probe would only take longer).
const LONG_STEP_AT_MOST: u64 = 1 << 20;

/// Untimed and timed probe iterations per kind.
const PROBE_WARMUP: u32 = 2;
const PROBE_ITERATIONS: u32 = 5;

/// The percentile of the timed iterations the probe takes (by nearest rank: the 4th of
/// 5): above the median, so that a machine whose load comes and goes is judged by its
/// busier moments, yet not the maximum, which one stray delay sets.
const PROBE_PERCENTILE: u32 = 80;

/// The shortest hold of a held step: as long as a dilated message lasts, so that the
/// messages wait as they do in a dilated run (a receive stops polling and sleeps after
/// a millisecond, `Comm::wait`; a wait of more than a few milliseconds starts on
/// tokio's coarse timer, `pacing::Clock::wait_until`), and the release is as late as
/// it is there. Shorter holds measured a third of the lateness of dilated runs.
const MIN_HOLD: Duration = Duration::from_millis(10);

/// What the probe measured on a cluster.
#[derive(Debug, Clone)]
pub struct Probe {
    figures: ProbeFigures,
    /// The topology the probe ran on, as the cluster wired it.
    topology: Topology,
}

impl Probe {
    /// Measures the steps of one 8-byte message per node on `target`, wired as `request`
    /// asks, its links emulated like `links` but with other times.
    pub async fn measure(target: &Target, request: &RunRequest, links: LinkModel) -> anyhow::Result<Self> {
        let (small, topology, wall_s) = steps(target, request, links, SMALL_STEP_BYTES).await?;
        let figures = ProbeFigures { nodes: topology.p(), iterations: PROBE_ITERATIONS, small, long: None, wall_s };
        Ok(Probe { figures, topology })
    }

    /// Adds the steps of messages as long as `longest` (the longest message of the runs
    /// to come; at most 1 MiB per node), if they are long enough to matter.
    pub async fn measure_long(
        &mut self,
        target: &Target,
        request: &RunRequest,
        links: LinkModel,
        longest: Option<u64>,
    ) -> anyhow::Result<()> {
        let Some(longest) = longest.filter(|&bytes| bytes >= LONG_STEP_FROM) else { return Ok(()) };
        // A whole number of f64 elements.
        let size_bytes = longest.min(LONG_STEP_AT_MOST) / 8 * 8;
        let (long, _, wall_s) = steps(target, request, links, size_bytes).await?;
        self.figures.long = Some(long);
        self.figures.wall_s += wall_s;
        Ok(())
    }

    /// What the probe measured.
    pub fn figures(&self) -> &ProbeFigures {
        &self.figures
    }

    /// The topology the cluster is wired as (a served cluster's size comes from here).
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The dilation a run needs under `links`, given its messages and the model's time
    /// of one iteration, whose dilated time must fit in a quarter of `timeout`; and why.
    pub fn choose(
        &self,
        links: &LinkModel,
        messages: Option<Messages>,
        iteration_us: f64,
        timeout: Duration,
    ) -> (Dilation, AutoDilation) {
        choose(&self.figures, links, messages, iteration_us, timeout)
    }

    /// [`Probe::choose`] for the run `spec` that the model predicted.
    pub fn choose_for(&self, spec: &RunSpec, links: &LinkModel, prediction: &Prediction) -> (Dilation, AutoDilation) {
        self.choose(links, Messages::of(prediction), prediction.time_us(), spec.timeout())
    }
}

/// `spec` with its algorithm as the coordinator will resolve it on `topology` (`auto`
/// picks by p and size as `tuning` says), so that the model predicts what will run.
pub fn resolved(spec: &RunSpec, topology: &Topology, tuning: &Tuning) -> RunSpec {
    let algorithm = with_known(spec, topology, spec.emulation, |known| tuning.resolve_known(spec, known));
    RunSpec { algorithm, ..spec.clone() }
}

/// Runs the probe's cold and held steps of `size_bytes` per node; returns them (per
/// step), the topology they ran on and the wall time they took, in seconds.
async fn steps(
    target: &Target,
    request: &RunRequest,
    links: LinkModel,
    size_bytes: u64,
) -> anyhow::Result<(Steps, Topology, f64)> {
    let zero_time = LinkModel { ts_ns: 0, th_ns: 0, tw_ps: 0, ..links };
    let (cold_us, topology, cold_s) = relay(target, request, zero_time, size_bytes).await?;
    let hold = Duration::from_secs_f64(cold_us / 1e6).max(MIN_HOLD);
    // Every message lasts the hold, as t_w m (to the picosecond per byte, rounded up).
    let hold_ps = u64::try_from(hold.as_nanos()).unwrap_or(u64::MAX / 1000).saturating_mul(1000);
    let held = LinkModel { tw_ps: hold_ps.div_ceil(size_bytes.max(1)), ..zero_time };
    let hold_us = held.transfer_ns(size_bytes as usize) as f64 / 1e3;
    let (held_us, _, held_s) = relay(target, request, held, size_bytes).await?;
    let steps = Steps { size_bytes, cold_us: cold_us / 2.0, hold_us, release_us: (held_us / 2.0 - hold_us).max(0.0) };
    Ok((steps, topology, cold_s + held_s))
}

/// Runs the probe's two steps with `size_bytes` per node on links emulated by `links`
/// and returns their time in µs ([`PROBE_PERCENTILE`] of the iterations; wall time:
/// the probe itself is never dilated),
/// the topology they ran on and the wall time the run took in seconds (less waiting
/// for the cluster and wiring it, which the run to come would have spent).
async fn relay(
    target: &Target,
    request: &RunRequest,
    links: LinkModel,
    size_bytes: u64,
) -> anyhow::Result<(f64, Topology, f64)> {
    let spec = RunSpec {
        size_bytes,
        warmup: PROBE_WARMUP,
        iterations: PROBE_ITERATIONS,
        timeout_ms: request.spec.timeout_ms,
        seed: request.spec.seed,
        emulation: Some(links),
        probe: true,
        // The spec of a shift (one vector per node), which the probe's steps stand in for.
        ..RunSpec::new(Collective::Shift, Algorithm::Ring)
    };
    let probe = RunRequest {
        topology: request.topology,
        dims: request.dims.clone(),
        routes: request.routes,
        placement: request.placement,
        spec,
    };
    let began = Instant::now();
    let outcome =
        target.execute(probe).await.with_context(|| format!("the dilation probe ({})", size_text(size_bytes)))?;
    let setup_s = (outcome.setup.ready_ms + outcome.setup.wiring_ms.unwrap_or(0.0)) / 1e3;
    let wall_s = (began.elapsed().as_secs_f64() - setup_s).max(0.0);
    let summary =
        report::summarize(&outcome, None).map_err(|failure| anyhow::anyhow!("the dilation probe: {failure}"))?;
    let topology = outcome.topology.build()?;
    let mut times = summary.iteration_us.clone();
    times.sort_by(f64::total_cmp);
    Ok((report::nearest_rank(&times, PROBE_PERCENTILE), topology, wall_s))
}

/// The shortest and the longest message of a predicted run, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Messages {
    pub shortest: u64,
    pub longest: u64,
}

impl Messages {
    /// The messages the model's schedule sends (`None` for a run without messages).
    pub fn of(prediction: &Prediction) -> Option<Self> {
        let sizes = prediction.events.iter().filter(|e| e.kind == FlowKind::Send).map(|e| e.bytes);
        sizes.fold(None, |seen: Option<Messages>, bytes| match seen {
            None => Some(Messages { shortest: bytes, longest: bytes }),
            Some(m) => Some(Messages { shortest: m.shortest.min(bytes), longest: m.longest.max(bytes) }),
        })
    }
}

/// A message of `bytes` over one hop, in emulated µs: t_s + t_h + t_w m.
fn one_hop_us(links: &LinkModel, bytes: u64) -> f64 {
    (links.ts_ns + links.th_ns) as f64 / 1e3 + links.tw_ps as f64 * bytes as f64 / 1e6
}

/// The rules of the module's header, on the probe's `figures`.
fn choose(
    figures: &ProbeFigures,
    links: &LinkModel,
    messages: Option<Messages>,
    iteration_us: f64,
    timeout: Duration,
) -> (Dilation, AutoDilation) {
    let time_of = |bytes| MessageTime { size_bytes: bytes, emulated_us: one_hop_us(links, bytes) };
    let shortest = messages.map(|m| time_of(m.shortest));
    let longest = messages.map(|m| time_of(m.longest));
    // The factor `cost` of a message needs to stay under `share` of its time, at both ends.
    let needs = |cost: &dyn Fn(u64) -> f64, share: f64| {
        shortest.zip(longest).map_or(1.0, |(short, long)| {
            [short, long].iter().map(|m| cost(m.size_bytes) / (share * m.emulated_us)).fold(0.0, f64::max)
        })
    };
    let release_needs = needs(&|bytes| figures.release_us(bytes), SOFTWARE_SHARE);
    let bytes_need = needs(&|bytes| figures.cold_us(bytes), BYTES_SHARE);
    let wanted = release_needs.max(bytes_need).max(1.0);
    let timeout_allows =
        if iteration_us > 0.0 { TIMEOUT_SHARE * timeout.as_secs_f64() * 1e6 / iteration_us } else { f64::INFINITY };
    let limit = Dilation::MAX.factor();
    let capped = wanted.min(timeout_allows).min(limit);
    // To a tenth, up (where the cap allows), never below 1.
    let tenths = if capped < wanted { (capped * 10.0).floor() } else { (capped * 10.0 - 1e-9).ceil() };
    let factor = Dilation::at_least((tenths / 10.0).clamp(1.0, limit)).unwrap_or(Dilation::NONE);
    let binding = if capped < wanted {
        if timeout_allows < limit { Binding::Timeout } else { Binding::Limit }
    } else if wanted <= 1.0 {
        Binding::Nothing
    } else if bytes_need > release_needs {
        Binding::Bytes
    } else {
        Binding::Release
    };
    let auto = AutoDilation {
        probe: figures.clone(),
        shortest_message: shortest,
        longest_message: longest,
        release_needs,
        bytes_need,
        binding,
        reason: String::new(),
    };
    let reason = reason(&auto, factor, wanted, iteration_us, timeout);
    (factor, AutoDilation { reason, ..auto })
}

/// The choice in words: what the probe measured, what each rule asks, what was taken.
fn reason(auto: &AutoDilation, factor: Dilation, wanted: f64, iteration_us: f64, timeout: Duration) -> String {
    let figures = &auto.probe;
    let measured = |steps: &Steps| {
        format!(
            "{} per node: released and handed on {:.0} µs late after {:.0} ms in flight, moved in {:.0} µs",
            size_text(steps.size_bytes),
            steps.release_us,
            steps.hold_us / 1e3,
            steps.cold_us
        )
    };
    let mut text = format!(
        "a step of {} nodes sending at once on this cluster (probe: p{PROBE_PERCENTILE} of {} pairs of steps, {} of wall time): {}",
        figures.nodes,
        figures.iterations,
        seconds_text(figures.wall_s),
        measured(&figures.small)
    );
    if let Some(long) = &figures.long {
        text += &format!("; {}", measured(long));
    }
    let (Some(shortest), Some(longest)) = (auto.shortest_message, auto.longest_message) else {
        return text + "; the run sends no messages: nothing to dilate";
    };
    let messages = if shortest.size_bytes == longest.size_bytes {
        format!(
            "its messages ({}) take {:.1} µs emulated over one hop",
            size_text(shortest.size_bytes),
            shortest.emulated_us
        )
    } else {
        format!(
            "its messages take {:.1} µs ({}) to {:.1} µs ({}) emulated over one hop",
            shortest.emulated_us,
            size_text(shortest.size_bytes),
            longest.emulated_us,
            size_text(longest.size_bytes)
        )
    };
    text += &format!(
        ". In the run {messages}: {} keeps the release under {:.0} % of them, {} the moving under {:.0} %",
        needs_text(auto.release_needs),
        SOFTWARE_SHARE * 100.0,
        needs_text(auto.bytes_need),
        BYTES_SHARE * 100.0
    );
    text += &match auto.binding {
        Binding::Nothing => "; the machine keeps up undilated".to_owned(),
        Binding::Release | Binding::Bytes => format!(": ×{factor}"),
        Binding::Timeout => format!(
            "; ×{} would be needed, but a dilated iteration ({:.0} µs emulated) must fit in a quarter of --timeout {}: ×{factor} (raise --timeout for more fidelity)",
            factor_text(wanted),
            iteration_us,
            humantime::format_duration(timeout)
        ),
        Binding::Limit => format!("; ×{} would be needed, ×{factor} is the most", factor_text(wanted)),
    };
    text
}

/// `×29.5` (to the tenth above), or `no dilation` for a factor of 1 or less.
fn needs_text(factor: f64) -> String {
    if factor <= 1.0 {
        "no dilation".to_owned()
    } else {
        format!("×{}", factor_text((factor * 10.0 - 1e-9).ceil() / 10.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topocomm_proto::spec::Ports;
    use topocomm_proto::spec::Routing;

    /// t_s 200 µs, t_h 20 µs, t_w 10 ns/B: the physics.
    const LINKS: LinkModel = LinkModel {
        ts_ns: 200_000,
        th_ns: 20_000,
        tw_ps: 10_000,
        routing: Routing::Sf,
        packet_bytes: 0,
        ports: Ports::All,
    };

    /// A probe of 8-byte steps released `release_us` late, moved in `cold_us`.
    fn figures(release_us: f64, cold_us: f64, long: Option<Steps>) -> ProbeFigures {
        let small = Steps { size_bytes: 8, cold_us, hold_us: 10_000.0, release_us };
        ProbeFigures { nodes: 16, iterations: 7, small, long, wall_s: 0.2 }
    }

    fn messages(shortest: u64, longest: u64) -> Option<Messages> {
        Some(Messages { shortest, longest })
    }

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn the_release_sets_k_against_the_shortest_message() {
        // 1 KiB over one hop: 200 + 20 + 10.24 µs = 230.24 µs; 3 % of it is 6.9 µs;
        // a 150 µs release needs 150 / 6.9072 = 21.7...: ×21.8. Moving 8 B in 300 µs
        // asks for 300 / (0.5 × 230.24) = 2.6 only.
        let (factor, auto) = choose(&figures(150.0, 300.0, None), &LINKS, messages(1024, 1024), 5_000.0, MINUTE);
        assert_eq!(factor.milli(), 21_800);
        assert_eq!(auto.binding, Binding::Release);
        assert!((auto.release_needs - 150.0 / (0.03 * 230.24)).abs() < 1e-9);
        assert!((auto.bytes_need - 300.0 / (0.5 * 230.24)).abs() < 1e-9);
        assert!(auto.reason.contains("16 nodes") && auto.reason.ends_with(": ×21.8"), "{}", auto.reason);
    }

    #[test]
    fn a_machine_that_keeps_up_is_not_dilated() {
        // 1 MiB messages take 10.7 ms; a 40 µs release is far under 3 % of them.
        let (factor, auto) = choose(&figures(40.0, 80.0, None), &LINKS, messages(1 << 20, 1 << 20), 5e4, MINUTE);
        assert_eq!(factor, Dilation::NONE);
        assert_eq!(auto.binding, Binding::Nothing);
        assert!(auto.reason.contains("keeps up undilated"), "{}", auto.reason);
        let (factor, auto) = choose(&figures(40.0, 80.0, None), &LINKS, None, 0.0, MINUTE);
        assert_eq!((factor, auto.binding), (Dilation::NONE, Binding::Nothing));
        assert!(auto.reason.contains("nothing to dilate"), "{}", auto.reason);
    }

    #[test]
    fn long_messages_are_weighed_by_their_own_steps() {
        // 1 MiB per node: released 1.4 ms late: 1400 / (0.03 × 10 705.76) = 4.36 → ×4.4.
        let long = Steps { size_bytes: 1 << 20, cold_us: 3_500.0, hold_us: 10_000.0, release_us: 1_400.0 };
        let probe = figures(60.0, 200.0, Some(long));
        let (factor, auto) = choose(&probe, &LINKS, messages(1 << 20, 1 << 20), 5e4, MINUTE);
        assert_eq!(auto.binding, Binding::Release);
        assert_eq!(factor.milli(), 4_400);
        // A run of 1 KiB to 1 MiB messages: the 1 KiB end asks for more.
        let (mixed, auto) = choose(&probe, &LINKS, messages(1024, 1 << 20), 5e4, MINUTE);
        let at_1k = probe.release_us(1024) / (0.03 * 230.24);
        assert!((auto.release_needs - at_1k).abs() < 1e-9 && mixed > factor, "{auto:?}");
        // Moving 8 MiB (extrapolated: 200 + 8 × 3300 µs) in half of 84.1 ms: ×0.63.
        let (_, auto) = choose(&probe, &LINKS, messages(8 << 20, 8 << 20), 5e4, MINUTE);
        let moving = (200.0 + 3_300.0 * ((8 << 20) - 8) as f64 / ((1 << 20) - 8) as f64) / (0.5 * (220.0 + 83_886.08));
        assert!((auto.bytes_need - moving).abs() < 1e-9, "{auto:?}");
    }

    #[test]
    fn moving_the_bytes_can_set_k() {
        // A machine that needs 30 ms to move 1 MiB on every node, released on time.
        let long = Steps { size_bytes: 1 << 20, cold_us: 30_000.0, hold_us: 60_000.0, release_us: 60.0 };
        let (factor, auto) = choose(&figures(60.0, 200.0, Some(long)), &LINKS, messages(1 << 20, 1 << 20), 5e4, MINUTE);
        assert_eq!(auto.binding, Binding::Bytes);
        assert_eq!(factor.milli(), 5_700, "30 000 / (0.5 × 10 705.76) = 5.6...");
    }

    #[test]
    fn the_deadline_caps_k_and_says_so() {
        // ×21.8 wanted; an iteration of 1 s emulated may take 15 s of a 60 s timeout: ×15.
        let (factor, auto) = choose(&figures(150.0, 300.0, None), &LINKS, messages(1024, 1024), 1e6, MINUTE);
        assert_eq!(factor.milli(), 15_000);
        assert_eq!(auto.binding, Binding::Timeout);
        assert!(auto.reason.contains("raise --timeout"), "{}", auto.reason);
        // Zero physics: nothing is long enough, the largest factor there is.
        let zero = LinkModel { ts_ns: 0, th_ns: 0, tw_ps: 0, ..LINKS };
        let (factor, auto) = choose(&figures(150.0, 300.0, None), &zero, messages(8, 8), 0.0, MINUTE);
        assert_eq!((factor, auto.binding), (Dilation::MAX, Binding::Limit));
    }
}
