//! The graphs topocomm reads from SimGrid platform files, held against SimGrid itself:
//! for every ordered pair of hosts, the length of topocomm's route must be the number of
//! links of SimGrid's route (`Host.route_to`, through Debian's `python3-simgrid` and
//! `simgrid_routes.py` beside this file), and the sum of its t_h SimGrid's latency.
//!
//! Counted: every link SimGrid's route lists but its pseudo-links, which topocomm's graph
//! leaves out by design: a host's `*_loopback` and `*_limiter` and a flat cluster's
//! `*_backbone` (their latency, when they have one, is taken out of SimGrid's figure).
//!
//! Not held: SimGrid's routes inside a dragonfly group from a router of chassis `c ≠ 0` to
//! a router of another blade. SimGrid 3.32 (and its main branch to date) takes the green
//! link towards the target's blade and then carries on as if it had reached chassis 0
//! (`DragonflyZone::get_local_route` sets the current router to `routers_[group·C·B +
//! blade]`), so those routes are no paths of the graph SimGrid itself builds (a green
//! link of chassis 1 followed by a link of router 0 of chassis 0). Such pairs are counted
//! and said, not compared; every other pair of a dragonfly is.
//!
//! Held: every fixture of `proto/tests/platforms/` (topocomm's own), and every platform
//! with a `<cluster>` in the folder `SIMGRID_PLATFORMS` names, when it is set (SimGrid's
//! `examples/platforms/`, not kept here): those that topocomm refuses to read are listed,
//! those it reads must match. Without python3-simgrid the test prints SKIPPED, except
//! under `CI=true` (`.ci/run` installs it), where it fails.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use topocomm_proto::netfile::{FileGraph, read_network_file};

/// SimGrid's Python bindings are Debian's, for Debian's interpreter.
const PYTHON: &str = "/usr/bin/python3";

/// Hosts of a platform compared pair by pair; a larger one is sampled (every pair of
/// that many hosts spread over it).
const MAX_HOSTS: usize = 48;

fn oracle_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/simgrid_routes.py")
}

/// Whether SimGrid answers; else SKIPPED, or a failure under CI.
fn simgrid_ready() -> bool {
    let imported = Command::new(PYTHON).args(["-c", "import simgrid"]).output();
    if imported.is_ok_and(|output| output.status.success()) {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "SimGrid's Python bindings are missing ({PYTHON} -c 'import simgrid' fails): \
         apt-get install python3-simgrid"
    );
    eprintln!(
        "SKIPPED: SimGrid's Python bindings are missing ({PYTHON} -c 'import simgrid' fails; \
         apt-get install python3-simgrid), so no route was held against SimGrid's"
    );
    false
}

/// SimGrid's routes of a platform, or why SimGrid would not load it.
fn simgrid_routes(platform: &Path) -> Result<Value, String> {
    let output = Command::new(PYTHON)
        .arg(oracle_script())
        .arg(platform)
        .arg(MAX_HOSTS.to_string())
        .output()
        .map_err(|error| format!("cannot run {PYTHON}: {error}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reason = stderr.lines().find(|line| line.contains("CRITICAL") || line.contains("Error")).unwrap_or("");
        return Err(format!("SimGrid refuses it: {reason}"));
    }
    serde_json::from_slice(&output.stdout).map_err(|error| format!("the oracle printed no JSON: {error}"))
}

/// A SimGrid link that topocomm's graph leaves out.
fn is_pseudo_link(name: &str) -> bool {
    ["_loopback", "_limiter", "_backbone"].iter().any(|suffix| name.ends_with(suffix))
}

/// The (group, chassis, blade) of the dragonfly router a host hangs off, when it does
/// (its one neighbour is named `…_router_{g}_{c}_{b}`).
fn dragonfly_router(graph: &FileGraph, host: usize) -> Option<(u64, u64, u64)> {
    let [(router, _)] = graph.neighbours(host) else { return None };
    let mut parts = graph.vertex_name(*router).rsplitn(4, '_');
    let (blade, chassis, group) =
        (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
    parts.next()?.ends_with("_router").then_some((group, chassis, blade))
}

/// Whether SimGrid's route between these hosts is one of its dragonfly routes that are
/// no path (see the module's comment).
fn simgrid_dragonfly_teleports(graph: &FileGraph, source: usize, destination: usize) -> bool {
    match (dragonfly_router(graph, source), dragonfly_router(graph, destination)) {
        (Some((group, chassis, blade)), Some((target_group, _, target_blade))) => {
            group == target_group && chassis != 0 && blade != target_blade
        }
        _ => false,
    }
}

/// How topocomm's graph of `platform` differs from SimGrid's routes: the mismatches
/// (empty when every pair matches), how many pairs were compared and how many were
/// not (SimGrid's dragonfly routes that are no path).
fn compare(platform: &Path, graph: &FileGraph, simgrid: &Value) -> (Vec<String>, usize, usize) {
    let mut mismatches = Vec::new();
    let ids: HashMap<&str, usize> = (0..graph.endpoints()).map(|id| (graph.vertex_name(id), id)).collect();
    let host_count = simgrid["host_count"].as_u64().expect("host_count") as usize;
    if host_count != graph.endpoints() {
        mismatches.push(format!("SimGrid has {host_count} hosts, topocomm {} endpoints", graph.endpoints()));
    }
    let routes = simgrid["routes"].as_array().expect("routes");
    let mut not_compared = 0;
    for route in routes {
        let (source, destination) = (route[0].as_str().unwrap(), route[1].as_str().unwrap());
        let (Some(&from), Some(&to)) = (ids.get(source), ids.get(destination)) else {
            mismatches.push(format!("{source} -> {destination}: a host topocomm's graph does not have"));
            continue;
        };
        if simgrid_dragonfly_teleports(graph, from, to) {
            not_compared += 1;
            continue;
        }
        let links: Vec<&str> = route[2].as_array().unwrap().iter().map(|link| link.as_str().unwrap()).collect();
        let counted = links.iter().filter(|link| !is_pseudo_link(link)).count();
        let ours = graph.route(from, to);
        if ours.len() - 1 != counted {
            mismatches.push(format!(
                "{source} -> {destination}: SimGrid's route has {counted} links ({}), topocomm's {} ({})",
                links.join(" "),
                ours.len() - 1,
                ours.iter().map(|&vertex| graph.vertex_name(vertex)).collect::<Vec<_>>().join(" ")
            ));
            continue;
        }
        // SimGrid's latency without the pseudo-links' (only a backbone has one).
        let pseudo_latency_free = links.iter().all(|link| !link.ends_with("_backbone"));
        if pseudo_latency_free {
            let simgrid_ns = route[3].as_f64().unwrap() * 1e9;
            let ours_ns: u64 = ours
                .windows(2)
                .map(|hop| {
                    let class = graph.class_of(hop[0], hop[1]).expect("a route follows links");
                    graph.class_physics()[class.0].th_ns.expect("SimGrid classes have a t_h")
                })
                .sum();
            if (ours_ns as f64 - simgrid_ns).abs() > 0.5 * (ours.len() as f64) + 1e-6 * simgrid_ns {
                mismatches.push(format!(
                    "{source} -> {destination}: SimGrid's latency is {simgrid_ns} ns, the sum of topocomm's t_h {ours_ns} ns"
                ));
            }
        }
    }
    if mismatches.len() > 5 {
        let more = mismatches.len() - 5;
        mismatches.truncate(5);
        mismatches.push(format!("… and {more} more ({})", platform.display()));
    }
    (mismatches, routes.len() - not_compared, not_compared)
}

/// What a comparison line says of the pairs it did not compare.
fn untold(not_compared: usize) -> String {
    match not_compared {
        0 => String::new(),
        pairs => format!("; {pairs} pairs not compared (SimGrid's dragonfly routes that are no path)"),
    }
}

fn platforms_in(folder: &Path) -> Vec<PathBuf> {
    let mut platforms: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", folder.display()))
        .map(|entry| entry.expect("a folder entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "xml"))
        .collect();
    platforms.sort();
    platforms
}

#[test]
fn every_fixture_routes_as_simgrid_does() {
    if !simgrid_ready() {
        return;
    }
    let fixtures = platforms_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/platforms"));
    assert!(fixtures.len() >= 13, "the fixtures are there: {fixtures:?}");
    let mut failures = Vec::new();
    for platform in &fixtures {
        let graph = read_network_file(platform)
            .and_then(|description| description.build())
            .unwrap_or_else(|error| panic!("{}: {error}", platform.display()));
        let simgrid = simgrid_routes(platform).unwrap_or_else(|error| panic!("{}: {error}", platform.display()));
        let (mismatches, pairs, not_compared) = compare(platform, &graph, &simgrid);
        assert!(pairs > 0, "{}: SimGrid gave no route", platform.display());
        eprintln!(
            "{}: {pairs} pairs compared, {} differ{}",
            platform.display(),
            mismatches.len(),
            untold(not_compared)
        );
        failures.extend(mismatches.into_iter().map(|mismatch| format!("{}: {mismatch}", platform.display())));
    }
    assert!(failures.is_empty(), "routes that differ from SimGrid's:\n{}", failures.join("\n"));
}

/// SimGrid's own example platforms, when `SIMGRID_PLATFORMS` names their folder.
#[test]
fn simgrid_example_platforms_route_as_simgrid_does() {
    let Some(folder) = std::env::var_os("SIMGRID_PLATFORMS") else {
        eprintln!("SIMGRID_PLATFORMS is not set: SimGrid's example platforms were not compared");
        return;
    };
    if !simgrid_ready() {
        return;
    }
    let mut failures = Vec::new();
    for platform in platforms_in(Path::new(&folder)) {
        let text = std::fs::read_to_string(&platform).expect("a platform reads");
        if !text.contains("<cluster") {
            continue;
        }
        let shown = platform.file_name().unwrap().to_string_lossy().into_owned();
        let graph = match read_network_file(&platform).and_then(|description| description.build()) {
            Ok(graph) => graph,
            Err(error) => {
                eprintln!("{shown}: NOT READ by topocomm: {error}");
                continue;
            }
        };
        let simgrid = match simgrid_routes(&platform) {
            Ok(simgrid) => simgrid,
            Err(error) => {
                eprintln!("{shown}: NOT COMPARED: {error}");
                continue;
            }
        };
        let (mismatches, pairs, not_compared) = compare(&platform, &graph, &simgrid);
        if mismatches.is_empty() {
            eprintln!(
                "{shown}: MATCHED, {pairs} pairs ({} endpoints, {} switches){}",
                graph.endpoints(),
                graph.switches().len(),
                untold(not_compared)
            );
        } else {
            eprintln!("{shown}: DIFFERS in {} of {pairs} pairs", mismatches.len());
            failures.extend(mismatches.into_iter().map(|mismatch| format!("{shown}: {mismatch}")));
        }
    }
    assert!(failures.is_empty(), "routes that differ from SimGrid's:\n{}", failures.join("\n"));
}
