//! Which algorithms serve which collective: for each, the topology it is made for, the
//! node counts it serves, its step count and its source; the default algorithm of each
//! (collective, topology) pair and the size-based choice of `auto`. `topocomm list`
//! prints this table, and the node refuses a pair that is not in it.

use crate::spec::{Algorithm, Collective};
use crate::topology::TopologyKind;

/// One algorithm of one collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub collective: Collective,
    pub algorithm: Algorithm,
    /// The topology whose edges carry every message of the algorithm.
    pub made_for: &'static str,
    /// Node counts the algorithm serves.
    pub nodes: &'static str,
    /// Communication steps, as a formula in p: the longest chain of messages on the
    /// topology it is made for (what `run` and `explain` count), except that the linear
    /// schedules of a root count its p-1 one-port sends (each a chain of one).
    pub steps: &'static str,
    /// Where the algorithm comes from.
    pub source: &'static str,
}

const fn entry(
    collective: Collective,
    algorithm: Algorithm,
    made_for: &'static str,
    nodes: &'static str,
    steps: &'static str,
    source: &'static str,
) -> Entry {
    Entry { collective, algorithm, made_for, nodes, steps, source }
}

use Algorithm as A;
use Collective as C;

const ANY: &str = "any p";
const FOLDS: &str = "any p (extra nodes fold into partners)";
const FOLDED_LOG: &str = "log p; ⌊log p⌋+2 folded";

/// Every (collective, algorithm) pair topocomm runs.
pub const ENTRIES: &[Entry] = &[
    entry(C::Broadcast, A::Linear, "full", ANY, "p-1", "[GGKK 4.1] (naive)"),
    entry(C::Broadcast, A::Ring, "ring", ANY, "⌊p/2⌋", "[KGGK94 3.2], SF ring"),
    entry(C::Broadcast, A::Mesh, "mesh, torus, mesh3d, torus3d", ANY, "2⌊√p/2⌋ (torus)", "[GGKK 4.1.2]"),
    entry(C::Broadcast, A::Hypercube, "hypercube", ANY, "⌈log p⌉", "Algorithms 4.1, 4.2"),
    entry(C::Broadcast, A::RecursiveDoubling, "ring (cut-through)", ANY, "⌈log p⌉", "[GGKK 4.1.1], CT ring"),
    entry(C::Broadcast, A::ScatterAllgather, "hypercube", ANY, "2⌈log p⌉", "textbook 4.7 (large messages)"),
    entry(C::Reduce, A::Linear, "full", ANY, "p-1", "dual of linear broadcast"),
    entry(C::Reduce, A::Ring, "ring", ANY, "⌊p/2⌋", "dual of ring broadcast"),
    entry(C::Reduce, A::Mesh, "mesh, torus, mesh3d, torus3d", ANY, "2⌊√p/2⌋ (torus)", "dual of mesh broadcast"),
    entry(C::Reduce, A::Hypercube, "hypercube", ANY, "⌈log p⌉", "Algorithm 4.3"),
    entry(C::Reduce, A::RecursiveHalving, "ring (cut-through)", ANY, "⌈log p⌉", "dual of recursive-doubling broadcast"),
    entry(
        C::Reduce,
        A::ReduceScatterGather,
        "hypercube",
        ANY,
        "2⌈log p⌉ (+2 folded)",
        "[GGKK 4.7], [Rabenseifner 2004] (large messages)",
    ),
    entry(C::Allgather, A::Ring, "ring", ANY, "p-1", "Algorithm 4.4"),
    entry(C::Allgather, A::Mesh, "mesh, torus, mesh3d, torus3d", ANY, "2(√p-1)", "Algorithm 4.6"),
    entry(C::Allgather, A::Hypercube, "hypercube", FOLDS, FOLDED_LOG, "Algorithm 4.7"),
    entry(C::Allgather, A::RecursiveDoubling, "hypercube", FOLDS, FOLDED_LOG, "[Thakur 2005]"),
    entry(C::Allgather, A::Bruck, "full", ANY, "⌈log p⌉", "Bruck et al. 1997"),
    entry(C::ReduceScatter, A::Ring, "ring", ANY, "p-1", "Algorithm 4.5"),
    entry(C::ReduceScatter, A::Hypercube, "hypercube", FOLDS, FOLDED_LOG, "Algorithm 4.8"),
    entry(C::ReduceScatter, A::RecursiveHalving, "hypercube", FOLDS, FOLDED_LOG, "[Thakur 2005]"),
    entry(C::ReduceScatter, A::Pairwise, "full", ANY, "p-1", "MPI libraries"),
    entry(C::Allreduce, A::ReduceBroadcast, "hypercube", ANY, "2⌈log p⌉", "[GGKK 4.3]"),
    entry(C::Allreduce, A::RecursiveDoubling, "hypercube", FOLDS, FOLDED_LOG, "[GGKK 4.3], [Thakur 2005]"),
    entry(C::Allreduce, A::HalvingDoubling, "hypercube", FOLDS, "2 log p; 2⌊log p⌋+2 folded", "[Rabenseifner 2004]"),
    entry(C::Allreduce, A::Ring, "ring", ANY, "2(p-1)", "ring reduce-scatter + ring all-gather"),
    entry(C::Allreduce, A::Mesh, "mesh, torus, mesh3d, torus3d", ANY, "rows, then columns", "textbook 4.3"),
    entry(C::Scan, A::Hypercube, "hypercube", ANY, "⌈log p⌉", "Algorithm 4.9"),
    entry(C::Scan, A::Linear, "ring", ANY, "p-1", "[GGKK 4.3], pipeline"),
    entry(
        C::Scan,
        A::Pipeline,
        "ring",
        ANY,
        "p-1, of k segments each",
        "[Pješivac-Grbović 2007], segmented (large messages)",
    ),
    entry(C::Scan, A::Tree, "hypercube", ANY, "2⌈log p⌉-1", "Brent-Kung 1982 (work-efficient)"),
    entry(C::Scatter, A::Linear, "full", ANY, "p-1", "[GGKK 4.4] (naive)"),
    entry(C::Scatter, A::Ring, "ring", ANY, "⌈p/2⌉", "[GGKK 4.4]"),
    entry(C::Scatter, A::Mesh, "mesh, torus, mesh3d, torus3d", ANY, "rows, then columns", "[GGKK 4.4]"),
    entry(C::Scatter, A::Hypercube, "hypercube", ANY, "⌈log p⌉", "[GGKK 4.4]"),
    entry(C::Gather, A::Linear, "full", ANY, "p-1", "dual of linear scatter"),
    entry(C::Gather, A::Ring, "ring", ANY, "⌈p/2⌉", "dual of ring scatter"),
    entry(C::Gather, A::Mesh, "mesh, torus, mesh3d, torus3d", ANY, "columns, then the row", "dual of mesh scatter"),
    entry(C::Gather, A::Hypercube, "hypercube", ANY, "⌈log p⌉", "dual of hypercube scatter"),
    entry(C::Alltoall, A::Ring, "ring", ANY, "p-1", "[GGKK 4.5.1]"),
    entry(C::Alltoall, A::Mesh, "mesh, torus, mesh3d, torus3d", ANY, "2(√p-1)", "[GGKK 4.5.2]"),
    entry(C::Alltoall, A::Hypercube, "hypercube", FOLDS, "log p", "[GGKK 4.5.3]"),
    entry(C::Alltoall, A::PairwiseXor, "hypercube (E-cube)", ANY, "2^⌈log p⌉ - 1", "Algorithm 4.10"),
    entry(C::Alltoall, A::Pairwise, "full", ANY, "p-1", "MPI libraries"),
    entry(C::Alltoall, A::Bruck, "full", ANY, "⌈log p⌉", "Bruck et al. 1997"),
    entry(C::Shift, A::Ring, "ring", ANY, "min(q, p-q)", "textbook 4.6"),
    entry(C::Shift, A::Mesh, "mesh, torus", ANY, "row shift + column shift", "textbook 4.6"),
    entry(C::Shift, A::Hypercube, "hypercube", ANY, "≤ 2⌈log p⌉", "textbook 4.6"),
    entry(C::Barrier, A::Dissemination, "full", ANY, "⌈log p⌉", "Hensgen, Finkel, Manber 1988"),
    entry(C::PingPong, A::Linear, "any", ANY, "2", "OSU latency test"),
    entry(C::Barrier, A::Hypercube, "hypercube", FOLDS, FOLDED_LOG, "butterfly barrier"),
];

/// The algorithms of `collective`, in table order.
pub fn algorithms(collective: Collective) -> impl Iterator<Item = &'static Entry> {
    ENTRIES.iter().filter(move |e| e.collective == collective)
}

/// The entry of a pair, if the collective has that algorithm.
pub fn find(collective: Collective, algorithm: Algorithm) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.collective == collective && e.algorithm == algorithm)
}

/// A collective asked to run with an algorithm it does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{collective} has no algorithm {algorithm}; choose one of: auto, {choices}")]
pub struct NoSuchAlgorithm {
    pub collective: Collective,
    pub algorithm: Algorithm,
    /// The collective's algorithms, comma-separated.
    pub choices: String,
}

/// Refuses a pair that is not in the table, naming the algorithms that are.
pub fn check(collective: Collective, algorithm: Algorithm) -> Result<(), NoSuchAlgorithm> {
    if algorithm == Algorithm::Auto || find(collective, algorithm).is_some() {
        return Ok(());
    }
    let names: Vec<&str> = algorithms(collective).map(|e| e.algorithm.into()).collect();
    Err(NoSuchAlgorithm { collective, algorithm, choices: names.join(", ") })
}

/// The algorithm made for `topology`: what runs when the user names none.
pub fn default_algorithm(collective: Collective, topology: TopologyKind) -> Algorithm {
    use TopologyKind as T;
    let grid = matches!(topology, T::Mesh | T::Torus | T::Mesh3d | T::Torus3d);
    match collective {
        C::PingPong => A::Linear,
        C::Barrier if topology == T::Hypercube => A::Hypercube,
        C::Barrier => A::Dissemination,
        C::Scan if topology == T::Hypercube || topology == T::Full => A::Hypercube,
        C::Scan => A::Linear,
        C::ReduceScatter if grid => A::Ring,
        C::Allreduce if topology == T::Hypercube || topology == T::Full => A::RecursiveDoubling,
        C::Alltoall if topology == T::Full => A::Pairwise,
        C::Shift if topology == T::Full => A::Ring,
        _ if topology == T::Ring => A::Ring,
        _ if grid => A::Mesh,
        _ => A::Hypercube,
    }
}

/// Message size (bytes per node) from which `auto` prefers the large-message algorithms.
pub const LARGE_MESSAGE: u64 = 64 * 1024;

/// Message size from which `auto` reduces by reduce-scatter-gather: below it the
/// binomial tree's m log p bytes at the root cost less than the extra log p messages
/// (where the two cross over: docs/PERFORMANCE-NOTES.md).
pub const LARGE_REDUCE: u64 = 2 * 1024 * 1024;

/// What `auto` runs: the large-message algorithm where the textbook and MPI libraries
/// prefer one (scatter-allgather broadcast, reduce-scatter-gather reduction,
/// halving-doubling or ring all-reduce, the segmented pipeline scan, the linear scatter
/// on a fully connected network), the topology's default otherwise.
pub fn auto(collective: Collective, topology: TopologyKind, p: usize, size_bytes: u64) -> Algorithm {
    let large = size_bytes >= LARGE_MESSAGE && p >= 4;
    match collective {
        C::Broadcast if large => A::ScatterAllgather,
        C::Reduce if large && size_bytes >= LARGE_REDUCE => A::ReduceScatterGather,
        C::Allreduce if large && topology == TopologyKind::Ring => A::Ring,
        C::Allreduce if large => A::HalvingDoubling,
        C::Scan if large => A::Pipeline,
        // The root's direct sends, as Open MPI scatters large blocks: the binomial tree
        // saves only p - 1 - log p start-ups on a fully connected network, and its relays
        // pass on blocks again (12 block transfers against 7 for p = 8; the measurement:
        // docs/PERFORMANCE-NOTES.md).
        C::Scatter if large && topology == TopologyKind::Full => A::Linear,
        _ => default_algorithm(collective, topology),
    }
}

/// The algorithm a run uses: `auto` resolved, anything else as named.
pub fn resolve(
    collective: Collective,
    algorithm: Algorithm,
    topology: TopologyKind,
    p: usize,
    size_bytes: u64,
) -> Algorithm {
    match algorithm {
        Algorithm::Auto => auto(collective, topology, p, size_bytes),
        named => named,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    #[test]
    fn every_collective_has_algorithms_and_its_defaults_are_in_the_table() {
        for collective in Collective::iter() {
            assert!(algorithms(collective).count() >= 1, "{collective}");
            for topology in TopologyKind::iter() {
                let default = default_algorithm(collective, topology);
                assert!(find(collective, default).is_some(), "{collective} on {topology}: {default}");
                for size in [8, LARGE_MESSAGE] {
                    let auto = auto(collective, topology, 16, size);
                    assert!(find(collective, auto).is_some(), "{collective} auto on {topology}: {auto}");
                }
            }
        }
    }

    #[test]
    fn pairs_are_unique() {
        for (i, a) in ENTRIES.iter().enumerate() {
            for b in &ENTRIES[i + 1..] {
                assert!(!(a.collective == b.collective && a.algorithm == b.algorithm), "{a:?} twice");
            }
        }
    }

    #[test]
    fn a_wrong_pair_names_the_right_ones() {
        let error = check(Collective::Scan, Algorithm::Bruck).unwrap_err().to_string();
        assert!(error.starts_with("scan has no algorithm bruck; choose one of: auto, "), "{error}");
        assert!(error.contains("hypercube") && error.contains("linear"), "{error}");
        assert!(check(Collective::Scan, Algorithm::Auto).is_ok());
    }

    #[test]
    fn auto_picks_large_message_algorithms() {
        assert_eq!(auto(Collective::Broadcast, TopologyKind::Hypercube, 8, 1 << 20), Algorithm::ScatterAllgather);
        assert_eq!(auto(Collective::Broadcast, TopologyKind::Hypercube, 8, 8), Algorithm::Hypercube);
        assert_eq!(auto(Collective::Allreduce, TopologyKind::Ring, 8, 1 << 20), Algorithm::Ring);
        assert_eq!(auto(Collective::Reduce, TopologyKind::Hypercube, 8, 1 << 20), Algorithm::Hypercube);
        assert_eq!(auto(Collective::Reduce, TopologyKind::Hypercube, 8, 8 << 20), Algorithm::ReduceScatterGather);
        assert_eq!(auto(Collective::Scan, TopologyKind::Hypercube, 8, 1 << 20), Algorithm::Pipeline);
        assert_eq!(auto(Collective::Scan, TopologyKind::Hypercube, 8, 8), Algorithm::Hypercube);
        assert_eq!(auto(Collective::Scatter, TopologyKind::Full, 8, 1 << 20), Algorithm::Linear);
        assert_eq!(auto(Collective::Scatter, TopologyKind::Full, 8, 8), Algorithm::Hypercube);
        assert_eq!(auto(Collective::Scatter, TopologyKind::Hypercube, 8, 1 << 20), Algorithm::Hypercube);
    }
}
