//! The built-in table against the function it replaced, the picks measured, and every
//! refusal of a bad file.

use super::*;
use strum::IntoEnumIterator;

use Algorithm as A;
use Collective as C;
use TopologyKind as T;

/// `auto` as it was written in proto's catalogue before it became data, constants and
/// all: the built-in table must pick exactly as it did.
mod before {
    use super::*;

    const STARTUP_BYTES: u64 = 128 * 1024;
    const LARGE_SCAN: u64 = 256 * 1024;
    const SMALL_CLUSTER_SCAN: u64 = 128 * 1024;
    const SMALL_CLUSTER_SCAN_FULL: u64 = 64 * 1024;
    const SMALL_CLUSTER_NODES: usize = 8;
    const TREE_ALLREDUCE: u64 = 64 * 1024;
    const TREE_ALLREDUCE_NODES: usize = 16;
    const LARGE_SCATTER: u64 = 64 * 1024;
    /// The longest frame a stream link cut into writes when this was written.
    const CUT_FRAMES_UP_TO: usize = 1024 * 1024;
    pub const PAIRWISE_XOR_NODE_BYTES: std::ops::RangeInclusive<u64> = (4 << 20)..=(16 << 20);

    fn pipeline_scan_from(topology: TopologyKind, p: usize) -> u64 {
        match topology {
            _ if p > SMALL_CLUSTER_NODES => LARGE_SCAN,
            TopologyKind::Full => SMALL_CLUSTER_SCAN_FULL,
            _ => SMALL_CLUSTER_SCAN,
        }
    }

    fn pairwise_xor_pays(p: usize, block_bytes: u64) -> bool {
        block_bytes <= CUT_FRAMES_UP_TO as u64 && PAIRWISE_XOR_NODE_BYTES.contains(&(p as u64 * block_bytes))
    }

    pub fn halving_doubling_pays(p: usize, size_bytes: u64) -> bool {
        let Some(dimension) = p.checked_ilog2() else { return false };
        let core = 1u64 << dimension;
        let steps = f64::from(dimension);
        let bytes_saved = steps - 2.0 * (core - 1) as f64 / core as f64;
        bytes_saved > 0.0 && size_bytes as f64 * bytes_saved >= STARTUP_BYTES as f64 * steps
    }

    pub fn auto(collective: Collective, topology: TopologyKind, p: usize, size_bytes: u64) -> Algorithm {
        let textbook = catalogue::default_algorithm(collective, topology);
        match collective {
            C::Allreduce if topology != T::Ring && halving_doubling_pays(p, size_bytes) => A::HalvingDoubling,
            C::Allreduce
                if textbook == A::RecursiveDoubling && p >= TREE_ALLREDUCE_NODES && size_bytes >= TREE_ALLREDUCE =>
            {
                A::ReduceBroadcast
            }
            C::Scan if textbook == A::Hypercube && p >= 4 && size_bytes >= pipeline_scan_from(topology, p) => {
                A::Pipeline
            }
            C::Scatter if topology == T::Full && p >= 4 && size_bytes >= LARGE_SCATTER => A::Linear,
            C::Alltoall if textbook == A::Hypercube && pairwise_xor_pays(p, size_bytes) => A::PairwiseXor,
            _ => textbook,
        }
    }

    pub fn leaner(collective: Collective, picked: Algorithm) -> Option<Algorithm> {
        match (collective, picked) {
            (C::Alltoall, A::Hypercube) => Some(A::PairwiseXor),
            _ => None,
        }
    }
}

/// The sizes to compare at on p nodes: every power of two from 8 B to 64 MiB and its
/// neighbours (every fixed threshold is one), the node-bytes edges of the all-to-all
/// rule divided by p, and the exact size from which the cost model's halving-doubling
/// pays, with its neighbours.
fn sizes_to_compare(p: usize) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut near = |size: u64| sizes.extend([size.saturating_sub(1), size, size + 1]);
    for power in 3..=26 {
        near(1 << power);
    }
    let edges = before::PAIRWISE_XOR_NODE_BYTES;
    for edge in [*edges.start(), *edges.end()] {
        near(edge / p as u64);
        near(edge.div_ceil(p as u64));
    }
    // The cost model's crossing, by bisection over what the old predicate said.
    let (mut below, mut above) = (0u64, 1u64 << 40);
    if before::halving_doubling_pays(p, above) {
        while above - below > 1 {
            let middle = below + (above - below) / 2;
            if before::halving_doubling_pays(p, middle) { above = middle } else { below = middle }
        }
        near(above);
    }
    sizes
}

#[test]
fn the_built_in_table_picks_exactly_as_the_function_it_replaced() {
    let tuning = Tuning::built_in();
    let mut compared = 0u64;
    for collective in Collective::iter() {
        for topology in TopologyKind::iter() {
            for p in 1..=64 {
                for size in sizes_to_compare(p) {
                    let (now, then) =
                        (tuning.auto(collective, topology, p, size), before::auto(collective, topology, p, size));
                    assert_eq!(now, then, "{collective} on {p} nodes of {topology}, {size} B");
                    compared += 1;
                }
            }
            for algorithm in catalogue::algorithms(collective).map(|entry| entry.algorithm) {
                assert_eq!(tuning.leaner(collective, algorithm), before::leaner(collective, algorithm));
            }
        }
    }
    // The comparison ran over every point (12 collectives x 7 topologies x 64 p x >= 72 sizes).
    assert!(compared > 12 * 7 * 64 * 72, "{compared}");
}

#[test]
fn the_built_in_table_round_trips_through_its_own_json() {
    let tuning = Tuning::built_in();
    assert_eq!(Tuning::parse(&tuning.to_json()).unwrap(), tuning);
    assert!(tuning.rules.iter().all(|rule| !rule.why.is_empty()));
    assert!(tuning.to_json().contains("\"startup_bytes\": \"128 KiB\""), "{}", tuning.to_json());
}

#[test]
fn auto_picks_large_message_algorithms() {
    let tuning = Tuning::built_in();
    let auto = |c, t, p, s| tuning.auto(c, t, p, s);
    // The measured crossings: recursive doubling ahead at 256 KiB on 8 nodes,
    // halving-doubling from 256 KiB on 16 and 32, at 64 KiB on none.
    assert_eq!(auto(C::Allreduce, T::Hypercube, 8, 256 << 10), A::RecursiveDoubling);
    assert_eq!(auto(C::Allreduce, T::Hypercube, 8, 1 << 20), A::HalvingDoubling);
    assert_eq!(auto(C::Allreduce, T::Hypercube, 16, 256 << 10), A::HalvingDoubling);
    assert_eq!(auto(C::Allreduce, T::Hypercube, 32, 32 << 10), A::RecursiveDoubling);
    // The tree from 64 KiB on 16 nodes or more, until halving-doubling pays.
    assert_eq!(auto(C::Allreduce, T::Hypercube, 32, 64 << 10), A::ReduceBroadcast);
    assert_eq!(auto(C::Allreduce, T::Hypercube, 8, 64 << 10), A::RecursiveDoubling);
    assert_eq!(auto(C::Allreduce, T::Torus, 16, 128 << 10), A::Mesh);
    assert_eq!(auto(C::Allreduce, T::Torus, 16, 1 << 20), A::HalvingDoubling);
    assert_eq!(auto(C::Allreduce, T::Ring, 16, 8 << 20), A::Ring);
    assert_eq!(auto(C::Allreduce, T::Full, 3, 1 << 30), A::RecursiveDoubling);
    assert_eq!(auto(C::Scan, T::Hypercube, 8, 128 << 10), A::Pipeline);
    assert_eq!(auto(C::Scan, T::Hypercube, 8, 64 << 10), A::Hypercube);
    assert_eq!(auto(C::Scan, T::Full, 6, 64 << 10), A::Pipeline);
    assert_eq!(auto(C::Scan, T::Full, 9, 128 << 10), A::Hypercube);
    assert_eq!(auto(C::Scatter, T::Full, 8, 1 << 20), A::Linear);
    assert_eq!(auto(C::Scatter, T::Hypercube, 8, 1 << 20), A::Hypercube);
    // Algorithm 4.10 where a node's blocks of up to 1 MiB take 4 to 16 MiB together.
    assert_eq!(auto(C::Alltoall, T::Hypercube, 4, 1 << 20), A::PairwiseXor);
    assert_eq!(auto(C::Alltoall, T::Hypercube, 16, 1 << 20), A::PairwiseXor);
    assert_eq!(auto(C::Alltoall, T::Hypercube, 4, (1 << 20) - 1), A::Hypercube);
    assert_eq!(auto(C::Alltoall, T::Hypercube, 8, 2 << 20), A::Hypercube);
    assert_eq!(auto(C::Alltoall, T::Full, 8, 1 << 20), A::Pairwise);
}

#[test]
fn auto_turns_leaner_only_where_its_pick_does_not_fit() {
    let tuning = Tuning::built_in();
    let cube = T::Hypercube;
    let spec = |collective, algorithm| RunSpec { size_bytes: 8 << 20, ..RunSpec::new(collective, algorithm) };
    let everything = |_: &RunSpec| Ok(());
    let only_pairwise = |run: &RunSpec| if run.algorithm == A::PairwiseXor { Ok(()) } else { Err(run.algorithm) };
    let nothing = |run: &RunSpec| Err(run.algorithm);
    let ran = |resolved: Result<RunSpec, Algorithm>| resolved.map(|run| run.algorithm);
    let auto = spec(C::Alltoall, A::Auto);
    assert_eq!(ran(tuning.resolve_checked(&auto, cube, 32, everything)), Ok(A::Hypercube));
    assert_eq!(ran(tuning.resolve_checked(&auto, cube, 32, only_pairwise)), Ok(A::PairwiseXor));
    assert_eq!(ran(tuning.resolve_checked(&auto, cube, 32, nothing)), Err(A::Hypercube));
    // A named algorithm is never swapped, nor a collective without a leaner one.
    let named = spec(C::Alltoall, A::Hypercube);
    assert_eq!(ran(tuning.resolve_checked(&named, cube, 32, only_pairwise)), Err(A::Hypercube));
    assert_eq!(ran(tuning.resolve_checked(&spec(C::Allgather, A::Auto), cube, 32, nothing)), Err(A::Hypercube));
    assert_eq!(ran(tuning.resolve_checked(&auto, T::Ring, 32, only_pairwise)), Err(A::Ring));
    let resolved = tuning.resolve_checked(&auto, cube, 32, only_pairwise).expect("pairwise-xor fits");
    assert_eq!(resolved, RunSpec { algorithm: A::PairwiseXor, ..auto });
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

/// The built-in file with `edit` applied to its JSON.
fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> Result<Tuning, TuningError> {
    let mut json: serde_json::Value = serde_json::from_str(DEFAULT_JSON).unwrap();
    edit(&mut json);
    Tuning::parse(&json.to_string())
}

fn refusal(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    edited(edit).expect_err("the edited table is refused").to_string()
}

#[test]
fn bad_files_are_refused_saying_why() {
    use serde_json::json;
    assert!(
        refusal(|j| j["schema_version"] = json!(2))
            .contains("schema_version 2 is not one this topocomm reads (it reads 1)")
    );
    let unknown = refusal(|j| j["rules"][0]["nodez"] = json!({ "min": 4 }));
    assert!(unknown.contains("unknown field `nodez`"), "{unknown}");
    let unknown = refusal(|j| j["rules"][0]["nodes"] = json!({ "least": 4 }));
    assert!(unknown.contains("unknown field `least`"), "{unknown}");
    let collective = refusal(|j| j["rules"][0]["collective"] = json!("allreduse"));
    assert!(collective.contains("unknown variant `allreduse`"), "{collective}");
    let algorithm = refusal(|j| j["rules"][0]["algorithm"] = json!("quantum"));
    assert!(algorithm.contains("unknown variant `quantum`"), "{algorithm}");
    let wrong_pair = refusal(|j| j["rules"][2]["algorithm"] = json!("bruck"));
    assert!(
        wrong_pair.starts_with("rule 3 (scan → bruck): scan has no algorithm bruck; choose one of: auto, "),
        "{wrong_pair}"
    );
    let wrong_replaced = refusal(|j| j["rules"][5]["replaces"] = json!("recursive-doubling"));
    assert!(wrong_replaced.contains("scatter has no algorithm recursive-doubling"), "{wrong_replaced}");
    assert!(refusal(|j| j["rules"][5]["algorithm"] = json!("auto")).contains("name one"));
    let empty = refusal(|j| j["rules"][2]["nodes"] = json!({ "min": 9, "max": 8 }));
    assert_eq!(empty, "rule 3 (scan → pipeline): nodes 9 - 8 is empty (its min is above its max)");
    let empty = refusal(|j| j["rules"][6]["size"] = json!({ "min": "2 MiB", "max": "1 MiB" }));
    assert!(empty.contains("size 2 MiB - 1 MiB is empty"), "{empty}");
    let size = refusal(|j| j["rules"][6]["size"] = json!({ "max": "lots" }));
    assert!(size.contains("expected a size like \"64 KiB\" or 4096") && !size.contains("lots"), "{size}");
    let model = refusal(|j| j["rules"][1]["cost_model"] = json!({ "startup_bytes": "1 KiB" }));
    assert!(model.contains("rule 2 (allreduce → reduce-broadcast): the cost model's predicate"), "{model}");
    let leaner = refusal(|j| j["leaner"][0]["algorithm"] = json!("bruck-ish"));
    assert!(
        leaner.contains("a name this program does not know, expected one of") && !leaner.contains("bruck-ish"),
        "{leaner}"
    );
    let leaner = refusal(|j| j["leaner"][0]["algorithm"] = json!("linear"));
    assert!(leaner.contains("leaner 1: alltoall has no algorithm"), "{leaner}");
    // Not JSON at all: where it stopped.
    let garbage = Tuning::parse("{ \"schema_version\": 1, \"rules\": [ }").unwrap_err().to_string();
    assert!(garbage.starts_with("not a tuning file: ") && garbage.contains("line 1"), "{garbage}");
}

#[test]
fn a_rule_that_can_never_apply_or_overlaps_its_twin_is_refused() {
    use serde_json::json;
    // A copy of the scatter rule behind it never applies.
    let shadowed = refusal(|j| {
        let copy = j["rules"][5].clone();
        j["rules"].as_array_mut().unwrap().push(copy);
    });
    assert_eq!(shadowed, "rule 8 can never apply: rule 6, ahead of it, matches every run it names");
    // The same scope from 1 MiB up, picking the tree back, ahead of it: an exception, fine?
    // No: its sizes overlap the general rule's of the very same scope.
    let overlap = refusal(|j| {
        let mut twin = j["rules"][5].clone();
        twin["algorithm"] = json!("hypercube");
        twin["size"] = json!({ "min": "8 B", "max": "1 MiB" });
        j["rules"].as_array_mut().unwrap().insert(0, twin);
    });
    assert!(overlap.starts_with("rules 1 and 7 overlap: both name scatter"), "{overlap}");
    // Below the general rule's sizes, it is fine; and a narrower scope ahead (4 nodes
    // only) is the exception a tuned file puts first.
    edited(|j| {
        let mut twin = j["rules"][5].clone();
        twin["algorithm"] = json!("hypercube");
        twin["size"] = json!({ "max": "65535" });
        j["rules"].as_array_mut().unwrap().insert(0, twin);
    })
    .expect("disjoint sizes of one scope");
    let tuned = edited(|j| {
        let mut narrower = j["rules"][5].clone();
        narrower["nodes"] = json!({ "min": 4, "max": 4 });
        narrower["size"] = json!({ "min": "1 KiB" });
        j["rules"].as_array_mut().unwrap().insert(0, narrower);
    })
    .expect("a narrower rule ahead");
    assert_eq!(tuned.auto(C::Scatter, T::Full, 4, 1 << 10), A::Linear);
    assert_eq!(tuned.auto(C::Scatter, T::Full, 5, 1 << 10), A::Hypercube);
    assert_eq!(tuned.auto(C::Scatter, T::Full, 5, 64 << 10), A::Linear);
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
