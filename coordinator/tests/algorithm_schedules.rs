//! The exact message schedule of every algorithm in the catalogue, held as golden files:
//! who sends how many bytes to whom, in which step, over which route, and when, as
//! `explain --json` gives it, at p = 8 and at an odd p (7, or 9 on a grid), each on the
//! topology the algorithm is made for (a fully connected network for the hypercube
//! algorithms at 7 nodes, where the extra nodes fold into partners).
//!
//! A change to any algorithm's schedule fails here, naming the algorithm; after a
//! deliberate one, `INSTA_UPDATE=always cargo test -p topocomm-coordinator --test
//! algorithm_schedules` rewrites the files, and the diff of `tests/snapshots/algorithm_schedules__*.snap`
//! shows what moved.

mod common;

use common::{Scratch, command, run_bounded, topocomm_bin};
use std::fmt::Write;
use std::time::Duration;
use topocomm_proto::catalogue::{ENTRIES, Entry};
use topocomm_proto::topology::TopologyKind;

/// The shift of the shift and ping-pong schedules (`--shift`).
const SHIFT: u64 = 3;

/// The two shapes every algorithm's schedule is held on: (topology, p) at p = 8 and at
/// an odd p.
fn shapes(entry: &Entry) -> [(TopologyKind, usize); 2] {
    use TopologyKind as T;
    match entry.made_for.first() {
        T::Mesh | T::Torus | T::Mesh3d | T::Torus3d => [(T::Torus, 8), (T::Torus, 9)],
        T::Hypercube => [(T::Hypercube, 8), (T::Full, 7)],
        other => [(other, 8), (other, 7)],
    }
}

fn number(value: &serde_json::Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("{value} is not a count"))
}

fn microseconds(value: &serde_json::Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("{value} is not a time"))
}

/// One line per message, in the order `explain` gives them (by step, then by send).
fn schedule_lines(explained: &serde_json::Value) -> String {
    let mut text = String::new();
    for key in ["collective", "algorithm", "topology", "p", "routing", "steps", "messages", "forwarded", "model_us"] {
        writeln!(text, "{key}: {}", explained[key]).ok();
    }
    let messages = explained["schedule"].as_array().expect("explain --json lists the schedule");
    for message in messages {
        let route: Vec<String> = message["route"]
            .as_array()
            .expect("every message has its route")
            .iter()
            .map(|hop| hop.to_string())
            .collect();
        writeln!(
            text,
            "step {:>2}: {:>2} -> {:<2} {:>6} B  route {:<16} sent {:>10.3} us  delivered {:>10.3} us",
            number(&message["step"]),
            number(&message["src"]),
            number(&message["dst"]),
            number(&message["bytes"]),
            route.join("-"),
            microseconds(&message["sent_us"]),
            microseconds(&message["delivered_us"]),
        )
        .ok();
    }
    text
}

#[test]
fn every_algorithm_s_exact_schedule_at_p_8_and_an_odd_p() {
    let scratch = Scratch::new("algorithm-schedules");
    let mut held = 0;
    for entry in ENTRIES {
        for (topology, p) in shapes(entry) {
            let routing = match entry.made_for.routing {
                Some("cut-through") => "ct",
                _ => "sf",
            };
            let words = format!(
                "explain {} --algorithm {} --topology {topology} --nodes {p} --size 1KiB --root 3 --shift {SHIFT} \
                 --routing {routing} --json",
                entry.collective, entry.algorithm
            );
            let mut explain = command(&topocomm_bin());
            explain.args(words.split_whitespace()).current_dir(&scratch.path);
            let finished = run_bounded(explain, &scratch, "explain", Duration::from_secs(60));
            assert!(finished.status.success(), "topocomm {words} failed:\n{}{}", finished.stdout, finished.stderr);
            let explained: serde_json::Value =
                serde_json::from_str(&finished.stdout).unwrap_or_else(|error| panic!("{words}: not JSON ({error})"));
            assert_eq!(explained["algorithm"], entry.algorithm.to_string(), "{words} ran another algorithm");
            let name = format!("{}_{}_{topology}_{p}", entry.collective, entry.algorithm);
            let mut settings = insta::Settings::clone_current();
            settings.set_description(format!("topocomm {words}"));
            settings.set_omit_expression(true);
            settings.set_prepend_module_to_snapshot(true);
            settings.bind(|| insta::assert_snapshot!(name, schedule_lines(&explained)));
            held += 1;
        }
    }
    assert_eq!(held, 2 * ENTRIES.len(), "every algorithm's schedule is held twice");
}
