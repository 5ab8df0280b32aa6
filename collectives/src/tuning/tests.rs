//! The mechanism on tables the tests build (rule matching, precedence, ranges, the
//! fallback to the default, the leaner turn, every refusal of a bad file), and the
//! shipped table against what can fail: every rule names a pair of the catalogue, picks
//! other than the default wherever it matches, and matches some run; every leaner
//! algorithm needs less memory. That `auto` is never slower than the default it
//! replaces is measured, not mirrored here, on the direct networks: `bench/run.py`'s
//! `auto` against `default` table (bench/README.md) runs both columns through the table
//! the binary ships. On the switched networks, where the rules ask the model of the run,
//! it is held in that model by `collectives/tests/auto_on_switched_networks.rs`.

use super::*;
use serde_json::{Value, json};
use strum::IntoEnumIterator;
use topocomm_proto::Topology;

use footprint::Footprint;

use Algorithm as A;
use Collective as C;
use TopologyKind as T;

/// A table of `rules` and `leaner` entries (JSON), parsed and checked.
fn table(rules: Value, leaner: Value) -> Result<Tuning, TuningError> {
    Tuning::parse(&json!({ "schema_version": SCHEMA_VERSION, "rules": rules, "leaner": leaner }).to_string())
}

/// A rule of `collective` → `algorithm` with `scope` (more fields) merged in.
fn rule(collective: &str, algorithm: &str, scope: Value) -> Value {
    let mut rule = json!({ "collective": collective, "algorithm": algorithm, "why": "a test's" });
    rule.as_object_mut().unwrap().extend(scope.as_object().cloned().unwrap_or_default());
    rule
}

fn rules(rules: Value) -> Tuning {
    table(rules, json!([])).expect("the test's table is valid")
}

fn refused(rules: Value) -> String {
    table(rules, json!([])).expect_err("the test's table is refused").to_string()
}

#[test]
fn no_rule_runs_the_topologys_default() {
    let empty = rules(json!([]));
    for collective in Collective::iter() {
        for topology in TopologyKind::iter() {
            for (p, size) in [(1, 0), (8, 1 << 20), (64, 64 << 20)] {
                assert_eq!(
                    empty.auto(collective, topology, p, size),
                    catalogue::default_algorithm(collective, topology),
                    "{collective} on {p} of {topology}"
                );
                assert_eq!(empty.resolve(collective, A::Ring, topology, p, size), A::Ring, "a named one as named");
            }
        }
    }
}

#[test]
fn ranges_hold_both_ends_inclusive() {
    let tuning = rules(json!([rule(
        "scatter",
        "linear",
        json!({ "nodes": { "min": 4, "max": 8 }, "size": { "min": "1 KiB", "max": "2 KiB" } })
    )]));
    let auto = |p, size| tuning.auto(C::Scatter, T::Hypercube, p, size);
    for (p, size, picked) in [
        (4, 1024, A::Linear),
        (8, 2048, A::Linear),
        (3, 1024, A::Hypercube),
        (9, 1024, A::Hypercube),
        (4, 1023, A::Hypercube),
        (4, 2049, A::Hypercube),
    ] {
        assert_eq!(auto(p, size), picked, "{p} nodes, {size} B");
    }
    // A node's bytes p × size, inclusive too.
    let tuning =
        rules(json!([rule("alltoall", "pairwise-xor", json!({ "node_bytes": { "min": 4096, "max": 8192 } }))]));
    let auto = |p, size| tuning.auto(C::Alltoall, T::Hypercube, p, size);
    assert_eq!(auto(4, 1024), A::PairwiseXor);
    assert_eq!(auto(8, 1024), A::PairwiseXor);
    assert_eq!(auto(4, 1023), A::Hypercube);
    assert_eq!(auto(8, 1025), A::Hypercube);
}

#[test]
fn topologies_and_the_replaced_default_scope_a_rule() {
    let tuning = rules(json!([
        rule("allreduce", "ring", json!({ "topologies": ["torus"] })),
        rule("scan", "pipeline", json!({ "replaces": "hypercube" })),
    ]));
    assert_eq!(tuning.auto(C::Allreduce, T::Torus, 16, 8), A::Ring);
    assert_eq!(tuning.auto(C::Allreduce, T::Mesh, 16, 8), catalogue::default_algorithm(C::Allreduce, T::Mesh));
    for topology in TopologyKind::iter() {
        let default = catalogue::default_algorithm(C::Scan, topology);
        let expected = if default == A::Hypercube { A::Pipeline } else { default };
        assert_eq!(tuning.auto(C::Scan, topology, 8, 8), expected, "{topology}");
    }
    // Another collective is never matched.
    assert_eq!(tuning.auto(C::Reduce, T::Torus, 16, 8), catalogue::default_algorithm(C::Reduce, T::Torus));
}

#[test]
fn the_first_matching_rule_wins() {
    // A narrower exception ahead of the general rule.
    let tuning = rules(json!([
        rule("scatter", "hypercube", json!({ "topologies": ["full"], "nodes": { "min": 4, "max": 4 } })),
        rule("scatter", "linear", json!({ "topologies": ["full"], "nodes": { "min": 4 } })),
    ]));
    assert_eq!(tuning.auto(C::Scatter, T::Full, 4, 1), A::Hypercube);
    assert_eq!(tuning.auto(C::Scatter, T::Full, 5, 1), A::Linear);
    assert_eq!(tuning.rule_for(C::Scatter, T::Full, 5, 1).map(|rule| rule.algorithm), Some(A::Linear));
    assert_eq!(tuning.rule_for(C::Scatter, T::Full, 3, 1), None);
}

#[test]
fn the_cost_model_rule_matches_exactly_where_halving_doubling_pays() {
    let tuning =
        rules(json!([rule("allreduce", "halving-doubling", json!({ "cost_model": { "startup_bytes": "64 KiB" } }))]));
    for p in [2, 3, 4, 8, 12, 16, 64] {
        for kib in [1u64, 64, 128, 160, 256, 512, 1024] {
            let size = kib << 10;
            let pays = halving_doubling_pays(p as u64, size, 64 << 10);
            let expected = if pays { A::HalvingDoubling } else { A::RecursiveDoubling };
            assert_eq!(tuning.auto(C::Allreduce, T::Hypercube, p, size), expected, "{p} nodes, {kib} KiB");
        }
    }
}

#[test]
fn auto_turns_leaner_only_where_its_pick_does_not_fit() {
    let tuning = table(
        json!([]),
        json!([{ "collective": "alltoall", "instead_of": "hypercube", "algorithm": "pairwise-xor", "why": "a test's" }]),
    )
    .expect("valid");
    let cube = T::Hypercube;
    let spec = |collective, algorithm| RunSpec { size_bytes: 8 << 20, ..RunSpec::new(collective, algorithm) };
    let everything = |_: &RunSpec| Ok(());
    let only_pairwise = |run: &RunSpec| if run.algorithm == A::PairwiseXor { Ok(()) } else { Err(run.algorithm) };
    let nothing = |run: &RunSpec| Err(run.algorithm);
    let ran = |resolved: Result<RunSpec, Algorithm>| resolved.map(|run| run.algorithm);
    let auto = spec(C::Alltoall, A::Auto);
    assert_eq!(ran(tuning.resolve_checked(&auto, Known::Shape(cube, 32), everything)), Ok(A::Hypercube));
    assert_eq!(ran(tuning.resolve_checked(&auto, Known::Shape(cube, 32), only_pairwise)), Ok(A::PairwiseXor));
    assert_eq!(ran(tuning.resolve_checked(&auto, Known::Shape(cube, 32), nothing)), Err(A::Hypercube));
    // A named algorithm is never swapped, nor a collective without a leaner one.
    let named = spec(C::Alltoall, A::Hypercube);
    assert_eq!(ran(tuning.resolve_checked(&named, Known::Shape(cube, 32), only_pairwise)), Err(A::Hypercube));
    assert_eq!(
        ran(tuning.resolve_checked(&spec(C::Allgather, A::Auto), Known::Shape(cube, 32), nothing)),
        Err(A::Hypercube)
    );
    assert_eq!(ran(tuning.resolve_checked(&auto, Known::Shape(T::Ring, 32), only_pairwise)), Err(A::Ring));
    let resolved = tuning.resolve_checked(&auto, Known::Shape(cube, 32), only_pairwise).expect("pairwise-xor fits");
    assert_eq!(resolved, RunSpec { algorithm: A::PairwiseXor, ..auto });
    assert_eq!(tuning.leaner(C::Alltoall, A::Hypercube), Some(A::PairwiseXor));
    assert_eq!(tuning.leaner(C::Alltoall, A::Pairwise), None);
}

#[test]
fn halving_doubling_pays_from_a_size_that_falls_with_p() {
    let pays = |p, m| halving_doubling_pays(p, m, 128 << 10);
    let crossing = |p| (1u64..).map(|kib| kib << 10).find(|&m| pays(p, m)).unwrap();
    let crossings: Vec<u64> = [4, 8, 16, 32, 64].into_iter().map(crossing).collect();
    assert!(crossings.windows(2).all(|w| w[0] > w[1]), "{crossings:?}");
    // log p t_s / (log p - 2 (p-1)/p) t_w: 4 t_s/t_w on 4 nodes, 2.4 on 8.
    assert_eq!(crossings[0], 512 << 10);
    assert_eq!(crossings[1], (2.4f64 * 128.0).ceil() as u64 * 1024);
    // A folded p runs on its power-of-two core; two and three nodes never pay.
    assert_eq!(crossing(12), crossings[1]);
    assert!(!pays(2, 1 << 40) && !pays(3, 1 << 40) && !pays(0, 1 << 40));
}

#[test]
fn bad_files_are_refused_saying_why() {
    let parse = |file: Value| Tuning::parse(&file.to_string()).expect_err("refused").to_string();
    let version = parse(json!({ "schema_version": 2, "rules": [] }));
    assert_eq!(version, "schema_version 2 is not one this topocomm reads (it reads 1)");
    let scatter = || rule("scatter", "linear", json!({}));
    let with = |field: &str, value: Value| {
        let mut rule = scatter();
        rule[field] = value;
        refused(json!([rule]))
    };
    let unknown = with("nodez", json!({ "min": 4 }));
    assert!(unknown.contains("a field this program does not read") && !unknown.contains("nodez"), "{unknown}");
    let unknown = with("nodes", json!({ "least": 4 }));
    assert!(unknown.contains("a field this program does not read") && !unknown.contains("least"), "{unknown}");
    let collective = with("collective", json!("allreduse"));
    assert!(collective.contains("a name this program does not know") && !collective.contains("allreduse"));
    let algorithm = with("algorithm", json!("quantum"));
    assert!(algorithm.contains("a name this program does not know") && !algorithm.contains("quantum"));
    let wrong_pair = refused(json!([scatter(), rule("scan", "bruck", json!({}))]));
    assert!(
        wrong_pair.starts_with("rule 2 (scan → bruck): scan has no algorithm bruck; choose one of: auto, "),
        "{wrong_pair}"
    );
    let wrong_replaced = with("replaces", json!("recursive-doubling"));
    assert!(wrong_replaced.contains("scatter has no algorithm recursive-doubling"), "{wrong_replaced}");
    assert!(with("algorithm", json!("auto")).contains("name one"));
    let empty = with("nodes", json!({ "min": 9, "max": 8 }));
    assert_eq!(empty, "rule 1 (scatter → linear): nodes 9 - 8 is empty (its min is above its max)");
    let empty = with("size", json!({ "min": "2 MiB", "max": "1 MiB" }));
    assert!(empty.contains("size 2 MiB - 1 MiB is empty"), "{empty}");
    let empty = with("node_bytes", json!({ "min": "2 MiB", "max": "1 MiB" }));
    assert!(empty.contains("node_bytes 2 MiB - 1 MiB is empty"), "{empty}");
    let size = with("size", json!({ "max": "lots" }));
    assert!(size.contains("expected a size like \"64 KiB\" or 4096") && !size.contains("lots"), "{size}");
    let model = with("cost_model", json!({ "startup_bytes": "1 KiB" }));
    assert!(model.contains("rule 1 (scatter → linear): the cost model's predicate"), "{model}");
    let leaner = |algorithm: &str| {
        let entry = json!({ "collective": "alltoall", "instead_of": "hypercube", "algorithm": algorithm, "why": "" });
        table(json!([]), json!([entry])).expect_err("refused").to_string()
    };
    let unknown = leaner("bruck-ish");
    assert!(unknown.contains("a name this program does not know, expected one of") && !unknown.contains("bruck-ish"));
    assert!(leaner("linear").contains("leaner 1: alltoall has no algorithm"), "{}", leaner("linear"));
    let twice = json!({ "collective": "alltoall", "instead_of": "hypercube", "algorithm": "pairwise", "why": "" });
    let two = table(json!([]), json!([twice.clone(), twice])).expect_err("refused").to_string();
    assert_eq!(two, "leaner alltoall: hypercube has two leaner algorithms");
    // Not JSON at all: where it stopped.
    let garbage = Tuning::parse("{ \"schema_version\": 1, \"rules\": [ }").unwrap_err().to_string();
    assert!(garbage.starts_with("not a tuning file: ") && garbage.contains("line 1"), "{garbage}");
}

#[test]
fn a_rule_that_can_never_apply_or_overlaps_its_twin_is_refused() {
    let scope = |algorithm: &str, size: Value| {
        rule("scatter", algorithm, json!({ "topologies": ["full"], "nodes": { "min": 4 }, "size": size }))
    };
    let general = || scope("linear", json!({ "min": "64 KiB" }));
    // A copy behind it never applies; nor a narrower rule behind a wider one.
    assert_eq!(
        refused(json!([general(), general()])),
        "rule 2 can never apply: rule 1, ahead of it, matches every run it names"
    );
    let narrower = rule(
        "scatter",
        "hypercube",
        json!({ "topologies": ["full"], "nodes": { "min": 8 }, "size": { "min": "1 MiB" } }),
    );
    assert!(refused(json!([general(), narrower.clone()])).starts_with("rule 2 can never apply: rule 1"));
    // The same scope, sizes overlapping: refused whichever comes first.
    let overlapping = scope("hypercube", json!({ "min": "8 B", "max": "1 MiB" }));
    let overlap = refused(json!([overlapping, general()]));
    assert!(overlap.starts_with("rules 1 and 2 overlap: both name scatter"), "{overlap}");
    // Disjoint sizes of one scope, and a narrower rule ahead, are fine.
    rules(json!([scope("hypercube", json!({ "max": "65535" })), general()]));
    let tuned = rules(json!([narrower, general()]));
    assert_eq!(tuned.auto(C::Scatter, T::Full, 8, 1 << 20), A::Hypercube);
    assert_eq!(tuned.auto(C::Scatter, T::Full, 7, 1 << 20), A::Linear);
}

#[test]
fn the_built_in_table_round_trips_through_its_own_json() {
    let tuning = Tuning::built_in();
    assert_eq!(Tuning::parse(&tuning.to_json()).unwrap(), tuning);
    assert_eq!(tuning.footprint, Footprint::default());
}

/// The node counts a rule of the shipped table is held at, from 2 to 64: every power of
/// two, its neighbours, and each of the rule's node bounds.
fn node_counts(rule: &Rule) -> Vec<usize> {
    let mut counts: Vec<u64> = (1..=6).flat_map(|d| [(1u64 << d) - 1, 1 << d, (1 << d) + 1]).collect();
    counts.extend(rule.nodes.min.into_iter().chain(rule.nodes.max));
    counts.retain(|&p| (2..=64).contains(&p) && rule.nodes.contains(p));
    counts.sort_unstable();
    counts.dedup();
    counts.into_iter().map(|p| p as usize).collect()
}

/// Every topology `rule` may match on p nodes.
fn topologies(rule: &Rule, p: usize) -> Vec<Topology> {
    TopologyKind::iter()
        .filter(|&kind| rule.applies_on(kind, catalogue::default_algorithm(rule.collective, kind), p as u64))
        .filter_map(|kind| Topology::new(kind, p, None).ok())
        .collect()
}

#[test]
fn every_rule_of_the_shipped_table_names_a_pair_of_the_catalogue_and_applies_somewhere() {
    let tuning = Tuning::built_in();
    for (index, rule) in tuning.rules.iter().enumerate() {
        let name = format!("rule {} ({} → {})", index + 1, rule.collective, rule.algorithm);
        assert!(catalogue::find(rule.collective, rule.algorithm).is_some(), "{name}");
        assert!(!rule.why.is_empty(), "{name}: its measurement");
        // It matches some run of the table's reach, and there it replaces the default.
        let mut matched = 0;
        for p in node_counts(rule) {
            for topology in topologies(rule, p) {
                let default = catalogue::default_algorithm(rule.collective, topology.kind());
                for algorithm in rule.judged() {
                    assert!(catalogue::find(rule.collective, algorithm).is_some(), "{name}: {algorithm}");
                    assert_ne!(algorithm, default, "{name} on {topology:?}: it would pick the default");
                }
                matched += (3..=26)
                    .filter(|&power| rule.matches(rule.collective, topology.kind(), default, p, 1 << power))
                    .count();
            }
        }
        assert!(matched > 0, "{name} matches no run from 2 to 64 nodes, 8 B to 64 MiB");
    }
    for leaner in &tuning.leaner {
        // The leaner one needs less memory where the pick does not fit.
        let footprint = |algorithm| {
            let spec = RunSpec { size_bytes: 1 << 20, ..RunSpec::new(leaner.collective, algorithm) };
            tuning.footprint.of_node(&spec, 32, 0).expect("fits in u64")
        };
        assert!(footprint(leaner.algorithm) < footprint(leaner.instead_of), "{leaner:?}");
    }
}

#[test]
fn sizes_read_as_numbers_or_with_units_and_print_exactly() {
    let read = |text: &str| serde_json::from_str::<Bytes>(text).unwrap().0;
    assert_eq!(read("4096"), 4096);
    assert_eq!(read("\"64 KiB\""), 64 << 10);
    assert_eq!(read("\"64KiB\""), 64 << 10);
    assert_eq!(read("\"1MiB\""), 1 << 20);
    assert_eq!(Bytes(64 << 10).to_string(), "64 KiB");
    assert_eq!(Bytes(65535).to_string(), "65535 B");
    assert_eq!(Bytes(3 << 20).to_string(), "3 MiB");
    assert_eq!(Bytes(0).to_string(), "0 B");
    let bounds = |min: Option<u64>, max: Option<u64>| Bounds { min: min.map(Bytes), max: max.map(Bytes) }.to_string();
    assert_eq!(bounds(Some(64 << 10), Some((512 << 10) - 1)), "64 KiB to under 512 KiB");
    assert_eq!(bounds(None, Some((64 << 10) - 1)), "under 64 KiB");
    assert_eq!(bounds(None, Some(1 << 20)), "≤ 1 MiB");
    assert_eq!(bounds(Some(8), Some(1 << 20)), "8 B - 1 MiB");
    assert_eq!(bounds(Some(1 << 10), Some(1 << 10)), "1 KiB");
    assert_eq!(bounds(Some(64 << 10), None), "≥ 64 KiB");
}

#[test]
fn alternatives_are_only_for_rules_that_ask_the_model() {
    let alternatives = json!({ "topologies": ["cluster"], "alternatives": ["ring"] });
    assert!(refused(json!([rule("allreduce", "multi-leader", alternatives)])).contains("judged by the model"));
    let no_such = json!({ "topologies": ["cluster"], "ahead_in_the_model": true, "alternatives": ["bruck"] });
    assert!(refused(json!([rule("allreduce", "multi-leader", no_such)])).contains("bruck"));
    let judged = json!({ "topologies": ["cluster"], "ahead_in_the_model": true, "alternatives": ["ring"] });
    let tuning = rules(json!([rule("allreduce", "multi-leader", judged)]));
    assert_eq!(tuning.rules[0].judged(), vec![A::MultiLeader, A::Ring]);
}
