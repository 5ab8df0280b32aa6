//! The sweep's outputs besides its table: the header over the table, `--csv`, `--json`
//! and `--plot`, from what the sweep measured ([`Sweep`]) and what it was asked
//! ([`SweepAsked`]), plain data the command (`tools::sweep`) hands down.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde_json::json;
use topocomm_proto::Topology;
use topocomm_proto::spec::{Collective, Dtype, ReduceOp};

use crate::render::bus_factor::bus_factor;
use crate::render::output;
#[cfg(feature = "pictures")]
use crate::render::plot::{self, Series};
use crate::render::report::LinkPhysics;
use crate::render::sweep_table::SweepPoint;

/// What the sweep measured.
#[derive(Debug, Default)]
pub struct Sweep {
    pub points: Vec<SweepPoint>,
    /// The topology the runs reported, e.g. "hypercube of 8 nodes (d=3)".
    pub topology: Option<Topology>,
    pub links: Option<LinkPhysics>,
    /// How `--dilation auto` chose each point's K, in full words (`None`: not automatic).
    pub dilation: Option<String>,
    /// The same as the table's header says it: in one line, unless `--verbose`.
    pub dilation_line: Option<String>,
}

/// What a sweep was asked, as its outputs name it: the collective, its data, the
/// repetitions and whether the links were encrypted.
#[derive(Debug, Clone)]
pub struct SweepAsked {
    pub collective: Collective,
    pub dtype: Dtype,
    pub op: ReduceOp,
    pub root: usize,
    pub exclusive: bool,
    pub shift: usize,
    pub seed: u64,
    pub encrypted: bool,
    pub warmup: u32,
    pub iterations: u32,
}

/// The files a sweep writes besides its table (`--csv`, `--json`, `--plot`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SweepFiles<'a> {
    pub csv: Option<&'a Path>,
    pub json: Option<&'a Path>,
    pub plot: Option<&'a Path>,
}

/// The lines over the table: what runs on what, the links, the dilation, the
/// repetitions and how the bandwidths are reckoned.
pub fn header(asked: &SweepAsked, topology: &Topology, links: Option<&LinkPhysics>, dilation: Option<&str>) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "# topocomm sweep: {} on a {topology}, {} {}", asked.collective, asked.dtype, asked.op);
    let links = match links {
        Some(l) if l.emulated => format!("emulated links: {}", physics(l)),
        Some(l) => format!("full-speed links; model from the calibration: {}", physics(l)),
        None => "full-speed links (no model: give --ts/--th/--tw or --ts auto)".to_owned(),
    };
    let _ = writeln!(text, "# {links}");
    if links.starts_with("emulated") {
        let how = dilation.map(str::to_owned).unwrap_or_else(|| "as --dilation gives it".to_owned());
        let _ = writeln!(text, "# dilation (the Dilation column; every time is emulated time): {how}");
    }
    let _ = writeln!(
        text,
        "# {} iterations after {} warm-up per point; an iteration takes as long as its slowest node",
        asked.iterations, asked.warmup
    );
    let _ = write!(
        text,
        "# Size = bytes per node; algbw = Size / Avg; busbw (nccl-tests) = algbw x {}; GB/s = 1e9 B/s",
        bus_factor(asked.collective).formula
    );
    text
}

/// The link physics as the header and the plot title say it.
pub fn physics(l: &LinkPhysics) -> String {
    let routing = l.routing.to_string().to_uppercase();
    let ports = crate::render::report::one_port_words(l.ports);
    format!("{routing}{ports}, t_s {} us, t_h {} us, t_w {} ns/B", l.ts_us, l.th_us, l.tw_ns_per_byte)
}

/// The CSV of the points, a header line first.
pub fn csv(collective: Collective, topology: &Topology, points: &[SweepPoint]) -> String {
    let mut text = String::from(
        "collective,algorithm,topology,dims,nodes,size_bytes,avg_us,min_us,max_us,median_us,iterations,model_us,\
         algbw_gbps,busbw_gbps,p50_us,p90_us,p99_us,dilation,wall_s\n",
    );
    let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    for p in points {
        let _ = writeln!(
            text,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            collective,
            p.algorithm,
            topology.kind(),
            topology.describe_dims(),
            topology.p(),
            p.size_bytes,
            p.avg_us,
            p.min_us,
            p.max_us,
            p.median_us,
            p.iterations,
            opt(p.model_us),
            opt(p.algbw_gbps),
            opt(p.busbw_gbps),
            p.p50_us,
            p.p90_us,
            p.p99_us,
            opt(p.dilation),
            p.wall_s
        );
    }
    text
}

/// The sweep as one JSON object (`sweep --json`).
pub fn json_of(asked: &SweepAsked, sweep: &Sweep, topology: &Topology) -> serde_json::Value {
    crate::render::schema::versioned(json!({
        "collective": asked.collective,
        "topology": topology.kind(),
        "dims": topology.dims(),
        "nodes": topology.p(),
        "dtype": asked.dtype,
        "op": asked.op,
        "root": asked.root,
        "exclusive": asked.exclusive,
        "shift": asked.shift,
        "seed": asked.seed,
        "encrypted": asked.encrypted,
        "warmup": asked.warmup,
        "iterations": asked.iterations,
        "links": sweep.links,
        "dilation": sweep.dilation,
        "bandwidth": {
            "size": "bytes per node",
            "algbw": "size / avg time, GB/s (1e9 B/s)",
            "busbw": format!("nccl-tests' bus bandwidth: algbw x {}", bus_factor(asked.collective).formula),
            "busbw_factor": bus_factor(asked.collective).on(topology.p()),
        },
        "points": sweep.points,
    }))
}

/// Writes the files `files` names (nothing before a point was measured).
pub fn write(asked: &SweepAsked, files: SweepFiles<'_>, sweep: &Sweep) -> anyhow::Result<()> {
    let Some(topology) = &sweep.topology else { return Ok(()) };
    if let Some(path) = files.csv {
        topocomm_collectives::files::write(path, csv(asked.collective, topology, &sweep.points))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = files.json {
        output::write_json(&json_of(asked, sweep, topology), path)?;
        if path.as_os_str() != "-" {
            eprintln!("wrote {}", path.display());
        }
    }
    #[cfg(feature = "pictures")]
    if let Some(path) = files.plot {
        let mut series: Vec<Series> = Vec::new();
        for point in &sweep.points {
            if series.last().is_none_or(|s| s.label != point.algorithm) {
                series.push(Series { label: point.algorithm.clone(), measured: Vec::new(), model: Vec::new() });
            }
            let s = series.last_mut().expect("just pushed");
            s.measured.push((point.size_bytes as f64, point.avg_us));
            if let Some(model) = point.model_us {
                s.model.push((point.size_bytes as f64, model));
            }
        }
        let links = match &sweep.links {
            Some(l) => physics(l).replace(" us", " µs"),
            None => "full-speed links".to_owned(),
        };
        let title = format!("{} on a {topology}: {links}", asked.collective);
        plot::write(&title, &series, path)?;
        eprintln!("wrote the plot to {}", path.display());
    }
    Ok(())
}
