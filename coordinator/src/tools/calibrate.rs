//! `topocomm calibrate`: fits the real links' t_s, t_h and t_w by ping-pong.
//!
//! A local ring of `--nodes` daemons with raw links (no emulation) ping-pongs each size
//! over one hop (node 0 and node 1) and over p/2 hops (node 0 and node p/2, the message
//! stored and forwarded in software by every daemon between). Half the median round trip
//! is the one-way time t(l, m) of an m-byte message over l hops, and the store-and-forward
//! model t(l, m) = t_s + l·t_h + l·m·t_w is fitted to every (l, m, t) point by linear least
//! squares: the 3x3 normal equations, solved here by Gaussian elimination (no crate: the
//! system is tiny and this keeps the arithmetic in view). A parameter the noise drives
//! below zero is held at zero and the others refitted, and the output says so.
//!
//! This file measures and fits; it does not touch the cluster's wiring or the model.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::anyhow;
use bytesize::ByteSize;
use clap::Args;
use serde::Serialize;
use topocomm_proto::TopologyKind;
use topocomm_proto::control::RunRequest;
use topocomm_proto::spec::{Algorithm, Collective, LinkModel, Ports, Routing, RunSpec};

use crate::control::calibration;
use crate::control::local::{self, LocalCluster};
use crate::control::parse::parse_size;
use crate::control::request::{Dilating, parse_dilation};
use crate::render::output::outln;
use crate::render::report;
use crate::render::table::HouseTable;
use topocomm_collectives::tuning::Tuning;

#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// Nodes of the local ring the ping-pongs run on (the multi-hop one crosses p/2 links).
    #[arg(long, short = 'n', default_value_t = 8)]
    pub nodes: usize,
    /// Message sizes to ping-pong, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8B,1KiB,16KiB,64KiB,256KiB,1MiB", value_parser = parse_size)]
    pub sizes: Vec<u64>,
    /// Round trips per size and route.
    #[arg(long, short = 'i', default_value_t = 50)]
    pub iterations: u32,
    /// Untimed round trips before them.
    #[arg(long, default_value_t = 5)]
    pub warmup: u32,
    /// Folder for the node daemons' logs (default: a new folder for this calibration in
    /// this user's own, $XDG_RUNTIME_DIR/topocomm or /tmp/topocomm-<user>; it is named).
    #[arg(long)]
    pub logs: Option<PathBuf>,
    /// Do not keep the fit for `--ts auto`.
    #[arg(long)]
    pub no_save: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Refused, with the reason: calibration measures the raw links, never dilated.
    #[arg(long, hide = true, value_parser = parse_dilation)]
    pub dilation: Option<Dilating>,
}

/// Deadline of every wait of one round trip.
const TIMEOUT_MS: u64 = 30_000;

/// The names of the fitted parameters, in the order of the design matrix's columns.
const PARAMETERS: [&str; 3] = ["t_s", "t_h", "t_w"];

/// One ping-pong measured: an m-byte message over l hops took `one_way_us` one way
/// (half the round trip).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PingPongTime {
    pub hops: usize,
    pub size_bytes: u64,
    pub one_way_us: f64,
}

/// The fitted store-and-forward model and how well it fits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fit {
    pub ts_us: f64,
    pub th_us: f64,
    pub tw_ns_per_byte: f64,
    /// Parameters the unconstrained fit made negative: held at 0, the others refitted.
    pub clamped: Vec<&'static str>,
    /// Root mean square of the residuals, in µs.
    pub rms_residual_us: f64,
    /// Coefficient of determination (1 is a perfect fit).
    pub r_squared: f64,
}

impl Fit {
    /// The model's one-way time of `size_bytes` over `hops`, in µs.
    pub fn time_us(&self, hops: usize, size_bytes: u64) -> f64 {
        let l = hops as f64;
        self.ts_us + l * self.th_us + l * size_bytes as f64 * self.tw_ns_per_byte / 1e3
    }

    /// The fit as link physics to keep (store-and-forward, default packets).
    pub fn link_model(&self) -> LinkModel {
        LinkModel {
            ts_ns: (self.ts_us * 1e3).round() as u64,
            th_ns: (self.th_us * 1e3).round() as u64,
            tw_ps: (self.tw_ns_per_byte * 1e3).round() as u64,
            routing: Routing::Sf,
            packet_bytes: LinkModel::DEFAULT_PACKET,
            ports: Ports::All,
        }
    }
}

/// Why the points cannot be fitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    #[error("{points} points cannot determine {parameters} parameters")]
    TooFewPoints { points: usize, parameters: usize },
    #[error("every point has a zero {parameter} term; it cannot be fitted")]
    ZeroTerm { parameter: &'static str },
    #[error("the points cannot tell t_s, t_h and t_w apart: they need at least two hop counts and two message sizes")]
    Indistinct,
}

/// Fits t = t_s + l·t_h + l·m·t_w to `points` by least squares, holding at zero any
/// parameter the noise would make negative.
pub fn fit(points: &[PingPongTime]) -> Result<Fit, FitError> {
    let rows: Vec<[f64; 3]> = points.iter().map(|p| design_row(p.hops, p.size_bytes)).collect();
    let times: Vec<f64> = points.iter().map(|p| p.one_way_us).collect();
    let mut free = [true; 3];
    let coefficients = loop {
        let coefficients = least_squares(&rows, &times, free)?;
        // Hold the most negative at zero and refit the others (one at a time, as an
        // active-set method would; with three unknowns this ends in at most three rounds).
        let most_negative = (0..3)
            .filter(|&j| free[j] && coefficients[j] < 0.0)
            .min_by(|&a, &b| coefficients[a].total_cmp(&coefficients[b]));
        match most_negative {
            Some(j) => free[j] = false,
            None => break coefficients,
        }
    };
    let clamped = (0..3).filter(|&j| !free[j]).map(|j| PARAMETERS[j]).collect();
    let residuals: Vec<f64> = rows
        .iter()
        .zip(&times)
        .map(|(row, t)| t - row.iter().zip(&coefficients).map(|(x, c)| x * c).sum::<f64>())
        .collect();
    let n = points.len() as f64;
    let ss_residual: f64 = residuals.iter().map(|r| r * r).sum();
    let mean = times.iter().sum::<f64>() / n;
    let ss_total: f64 = times.iter().map(|t| (t - mean) * (t - mean)).sum();
    let r_squared = if ss_total > 0.0 {
        1.0 - ss_residual / ss_total
    } else if ss_residual == 0.0 {
        1.0
    } else {
        0.0
    };
    Ok(Fit {
        ts_us: coefficients[0],
        th_us: coefficients[1],
        tw_ns_per_byte: coefficients[2] * 1e3,
        clamped,
        rms_residual_us: (ss_residual / n).sqrt(),
        r_squared,
    })
}

/// The row of the design matrix of an m-byte message over l hops: (1, l, l·m).
fn design_row(hops: usize, size_bytes: u64) -> [f64; 3] {
    let l = hops as f64;
    [1.0, l, l * size_bytes as f64]
}

/// Least squares over the `free` columns (the others held at 0): solves the normal
/// equations (XᵀX) c = Xᵀt. The columns are scaled to unit norm first, since t_w's
/// column (bytes) is a million times t_s's; the solve is Gaussian elimination with
/// partial pivoting.
fn least_squares(rows: &[[f64; 3]], times: &[f64], free: [bool; 3]) -> Result<[f64; 3], FitError> {
    let columns: Vec<usize> = (0..3).filter(|&j| free[j]).collect();
    let k = columns.len();
    let mut solution = [0.0; 3];
    if k == 0 {
        return Ok(solution);
    }
    if rows.len() < k {
        return Err(FitError::TooFewPoints { points: rows.len(), parameters: k });
    }
    let scale: Vec<f64> = columns.iter().map(|&j| rows.iter().map(|r| r[j] * r[j]).sum::<f64>().sqrt()).collect();
    if let Some(i) = scale.iter().position(|&s| s == 0.0) {
        return Err(FitError::ZeroTerm { parameter: PARAMETERS[columns[i]] });
    }
    // The augmented normal matrix [XᵀX | Xᵀt] of the scaled columns.
    let mut a = vec![vec![0.0; k + 1]; k];
    for (row, &t) in rows.iter().zip(times) {
        for (i, &ci) in columns.iter().enumerate() {
            let xi = row[ci] / scale[i];
            for (j, &cj) in columns.iter().enumerate() {
                a[i][j] += xi * row[cj] / scale[j];
            }
            a[i][k] += xi * t;
        }
    }
    for pivot in 0..k {
        let best = (pivot..k).max_by(|&x, &y| a[x][pivot].abs().total_cmp(&a[y][pivot].abs())).expect("rows");
        // Scaled columns have unit norm, so the diagonal starts at 1: a pivot this small
        // means two columns are (nearly) the same, e.g. only one hop count was measured.
        if a[best][pivot].abs() < 1e-10 {
            return Err(FitError::Indistinct);
        }
        a.swap(pivot, best);
        let (upper, lower) = a.split_at_mut(pivot + 1);
        let pivot_row = &upper[pivot];
        for row in lower {
            let factor = row[pivot] / pivot_row[pivot];
            for (x, p) in row[pivot..].iter_mut().zip(&pivot_row[pivot..]) {
                *x -= factor * p;
            }
        }
    }
    let mut scaled = vec![0.0; k];
    for i in (0..k).rev() {
        let known: f64 = (i + 1..k).map(|j| a[i][j] * scaled[j]).sum();
        scaled[i] = (a[i][k] - known) / a[i][i];
    }
    for (i, &j) in columns.iter().enumerate() {
        solution[j] = scaled[i] / scale[i];
    }
    Ok(solution)
}

/// A ping-pong measured, with the fit's time for it.
#[derive(Debug, Clone, Copy, Serialize)]
struct FittedPingPong {
    #[serde(flatten)]
    point: PingPongTime,
    fitted_us: f64,
    residual_us: f64,
}

/// Everything `--json` prints.
#[derive(Debug, Serialize)]
struct Calibration {
    nodes: usize,
    iterations: u32,
    warmup: u32,
    points: Vec<FittedPingPong>,
    fit: Fit,
    link_model: LinkModel,
    saved_to: Option<String>,
}

/// Runs the calibration `args` describes.
pub async fn run(args: &CalibrateArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.dilation.is_none(),
        "calibrate measures the raw links, at the machine's own speed, and they are never dilated; \
         --dilation applies to emulated runs (run, sweep and bench-model with --ts, --th, --tw)"
    );
    let p = args.nodes;
    anyhow::ensure!(
        p >= 4,
        "--nodes must be at least 4, so that the far ping-pong (p/2 hops) crosses more than one link"
    );
    anyhow::ensure!(args.iterations >= 1, "--iterations must be at least 1");
    anyhow::ensure!(!args.sizes.is_empty(), "--sizes needs at least one size");
    let spec_of = |size_bytes: u64, shift: usize| RunSpec {
        root: 0,
        size_bytes,
        shift,
        warmup: args.warmup,
        iterations: args.iterations,
        timeout_ms: TIMEOUT_MS,
        ..RunSpec::new(Collective::PingPong, Algorithm::Linear)
    };
    // Refuse a bad size before starting any process.
    for &size in &args.sizes {
        spec_of(size, 1).validate(p)?;
    }
    let mut sizes = args.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    anyhow::ensure!(sizes.len() >= 2, "--sizes needs at least two different sizes to tell t_h from t_w");

    let logs = local::log_folder(args.logs.as_deref())?;
    // Ping-pong names its algorithm: no `auto` to tune.
    let local = LocalCluster::start(p, &logs, false, Arc::new(Tuning::built_in())).await?;
    eprintln!("calibrating on a ring of {p} local nodes (raw links), node logs in {}/node-*.log", local.logs.display());
    let result = tokio::select! {
        result = measure(&local, &sizes, p, &spec_of) => result,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted; every node process was stopped")),
    };
    local.shutdown().await;
    let points = result?;

    let fit = fit(&points)?;
    let link_model = fit.link_model();
    let saved_to = if args.no_save { None } else { Some(calibration::save(&link_model)?) };
    let fitted: Vec<FittedPingPong> = points
        .iter()
        .map(|&point| {
            let fitted_us = fit.time_us(point.hops, point.size_bytes);
            FittedPingPong { point, fitted_us, residual_us: point.one_way_us - fitted_us }
        })
        .collect();
    if args.json {
        let calibration = Calibration {
            nodes: p,
            iterations: args.iterations,
            warmup: args.warmup,
            points: fitted,
            fit,
            link_model,
            saved_to: saved_to.map(|path| path.display().to_string()),
        };
        outln!("{}", serde_json::to_string_pretty(&crate::render::schema::versioned_json(&calibration)?)?)?;
        return Ok(());
    }
    outln!(
        "ping-pong on a ring of {p} nodes, raw links: one-way time = median of {} round trips / 2",
        args.iterations
    )?;
    outln!("{}", points_table(&fitted))?;
    outln!("store-and-forward fit t(l, m) = t_s + l·t_h + l·m·t_w, least squares over {} points:", points.len())?;
    outln!("  t_s = {:.2} µs, t_h = {:.2} µs, t_w = {:.4} ns/B", fit.ts_us, fit.th_us, fit.tw_ns_per_byte)?;
    outln!("  RMS residual {:.2} µs, R² = {:.5}", fit.rms_residual_us, fit.r_squared)?;
    if !fit.clamped.is_empty() {
        outln!(
            "  {} came out negative (noise) and {} held at 0; the others were refitted",
            fit.clamped.join(" and "),
            if fit.clamped.len() == 1 { "is" } else { "are" }
        )?;
    }
    match saved_to {
        Some(path) => outln!(
            "saved to {} (t_s {} ns, t_h {} ns, t_w {} ps/B, sf): `--ts auto` predicts raw runs with it",
            path.display(),
            link_model.ts_ns,
            link_model.th_ns,
            link_model.tw_ps
        )?,
        None => outln!("not saved (--no-save)")?,
    }
    Ok(())
}

/// Ping-pongs every size over 1 and p/2 hops; one point per (size, hops).
async fn measure(
    local: &LocalCluster,
    sizes: &[u64],
    p: usize,
    spec_of: &impl Fn(u64, usize) -> RunSpec,
) -> anyhow::Result<Vec<PingPongTime>> {
    let routes = [1, p / 2];
    let total = sizes.len() * routes.len();
    let mut points = Vec::with_capacity(total);
    for &size_bytes in sizes {
        for hops in routes {
            let request = RunRequest {
                topology: TopologyKind::Ring,
                dims: None,
                routes: None,
                placement: Default::default(),
                spec: spec_of(size_bytes, hops),
            };
            let outcome = local.coordinator.execute(request).await?;
            let summary = report::summarize(&outcome, None)?;
            let one_way_us = summary.time_us.median / 2.0;
            points.push(PingPongTime { hops, size_bytes, one_way_us });
            eprintln!(
                "[{}/{total}] {} over {hops} hop{}: {one_way_us:.1} µs one way",
                points.len(),
                ByteSize::b(size_bytes).display().iec(),
                if hops == 1 { "" } else { "s" }
            );
        }
    }
    Ok(points)
}

fn points_table(points: &[FittedPingPong]) -> HouseTable {
    let mut table = HouseTable::new(["size", "hops", "one-way µs", "fitted µs", "residual µs", "residual %"]);
    for p in points {
        let percent = if p.point.one_way_us > 0.0 { 100.0 * p.residual_us / p.point.one_way_us } else { f64::NAN };
        table.row([
            ByteSize::b(p.point.size_bytes).display().iec().to_string(),
            p.point.hops.to_string(),
            format!("{:.1}", p.point.one_way_us),
            format!("{:.1}", p.fitted_us),
            format!("{:+.1}", p.residual_us),
            format!("{percent:+.1}"),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZES: [u64; 6] = [8, 1024, 16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024];

    /// Points of the model (t_s, t_h in µs, t_w in ns/B) over 1 and 4 hops, plus `noise`.
    fn synthetic(ts: f64, th: f64, tw_ns: f64, mut noise: impl FnMut() -> f64) -> Vec<PingPongTime> {
        let mut points = Vec::new();
        for size_bytes in SIZES {
            for hops in [1, 4] {
                let l = hops as f64;
                let one_way_us = ts + l * th + l * size_bytes as f64 * tw_ns / 1e3 + noise();
                points.push(PingPongTime { hops, size_bytes, one_way_us });
            }
        }
        points
    }

    /// Uniform noise in [-amplitude, amplitude), deterministic (xorshift64).
    fn noise(seed: u64, amplitude: f64) -> impl FnMut() -> f64 {
        let mut state = seed.max(1);
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            amplitude * (2.0 * (state >> 11) as f64 / (1u64 << 53) as f64 - 1.0)
        }
    }

    #[test]
    fn exact_points_give_back_the_model() {
        let fit = fit(&synthetic(45.0, 12.5, 0.75, || 0.0)).unwrap();
        assert!((fit.ts_us - 45.0).abs() < 1e-9, "{fit:?}");
        assert!((fit.th_us - 12.5).abs() < 1e-9, "{fit:?}");
        assert!((fit.tw_ns_per_byte - 0.75).abs() < 1e-12, "{fit:?}");
        assert!(fit.clamped.is_empty());
        assert!(fit.rms_residual_us < 1e-9 && (fit.r_squared - 1.0).abs() < 1e-12, "{fit:?}");
        let model = fit.link_model();
        assert_eq!((model.ts_ns, model.th_ns, model.tw_ps), (45_000, 12_500, 750));
        assert_eq!(model.routing, Routing::Sf);
    }

    #[test]
    fn noisy_points_land_near_the_model() {
        for seed in 1..=20 {
            let fit = fit(&synthetic(45.0, 12.5, 0.75, noise(seed, 2.0))).unwrap();
            // ±2 µs of noise on 12 points: the intercepts move by a few µs at most, the
            // slope by a few µs over a 4 MiB·hop lever arm.
            assert!((fit.ts_us - 45.0).abs() < 3.0, "seed {seed}: {fit:?}");
            assert!((fit.th_us - 12.5).abs() < 1.5, "seed {seed}: {fit:?}");
            assert!((fit.tw_ns_per_byte - 0.75).abs() < 0.002, "seed {seed}: {fit:?}");
            assert!(fit.rms_residual_us < 2.0 && fit.rms_residual_us > 0.1, "seed {seed}: {fit:?}");
            assert!(fit.r_squared > 0.9999, "seed {seed}: {fit:?}");
        }
    }

    #[test]
    fn a_negative_parameter_is_held_at_zero_and_the_rest_refitted() {
        // No start-up time, and noise that pulls the intercept below zero.
        let mut points = synthetic(0.0, 10.0, 0.5, || 0.0);
        for point in &mut points {
            if point.size_bytes <= 1024 {
                point.one_way_us -= 3.0;
            }
        }
        let fit = fit(&points).unwrap();
        assert_eq!(fit.clamped, vec!["t_s"], "{fit:?}");
        assert_eq!(fit.ts_us, 0.0);
        assert!(fit.th_us > 0.0 && fit.tw_ns_per_byte > 0.0, "{fit:?}");
        assert!((fit.tw_ns_per_byte - 0.5).abs() < 0.01, "{fit:?}");
        assert_eq!(fit.link_model().ts_ns, 0);
    }

    #[test]
    fn one_hop_count_cannot_separate_the_parameters() {
        let points: Vec<PingPongTime> =
            synthetic(45.0, 12.5, 0.75, || 0.0).into_iter().filter(|p| p.hops == 1).collect();
        let error = fit(&points).unwrap_err().to_string();
        assert!(error.contains("two hop counts"), "{error}");
        assert!(fit(&points[..2]).is_err());
    }
}
