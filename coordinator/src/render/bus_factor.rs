//! The bus bandwidth of a sweep's points: each collective's factor from algbw to busbw,
//! as nccl-tests defines it, with the bound each comes from.

use topocomm_proto::spec::Collective;

/// How a collective's bus bandwidth follows from its algorithm bandwidth, as
/// nccl-tests define it (its doc/PERFORMANCE.md): `busbw = algbw × factor`, the factor
/// chosen so that an algorithm that keeps the busiest node's link(s) of bandwidth B
/// busy the whole time shows busbw = B, whatever p. Each factor comes from a lower
/// bound t ≥ bytes / B on the time, `bytes` being what some node must send or receive.
///
/// topocomm's `algbw = size / time` takes `size` as `--size`, the bytes per node; for
/// the collectives whose nodes hold p blocks of `--size` (all-gather, reduce-scatter,
/// alltoall, scatter, gather) nccl-tests instead take S = p · size, so their (p−1)/p
/// on S is p − 1 on `--size`: the same busbw from a different algbw.
#[derive(Debug, Clone, Copy)]
pub struct BusFactor {
    /// The factor as tables and the README write it, in p: `2(p-1)/p`, `(p-1)`, `1`, ...
    pub formula: &'static str,
    /// The factor on p nodes, `None` where no data moves.
    on: Option<fn(f64) -> f64>,
}

impl BusFactor {
    /// The factor on `p` nodes (`None`: no data moves, no bandwidth).
    pub fn on(self, p: usize) -> Option<f64> {
        self.on.map(|factor| factor(p.max(1) as f64))
    }
}

/// Broadcast, reduce: 1 (nccl-tests: 1). All of the root's vector must leave it
/// (broadcast), or arrive at it (reduce, each element combined on the way): t ≥ size / B.
const WHOLE_VECTOR_THROUGH_THE_ROOT: BusFactor = BusFactor { formula: "1", on: Some(|_| 1.0) };

/// All-reduce: 2(p−1)/p (nccl-tests: the same, S = size). Every element is the sum of
/// p inputs held on p nodes and must end on all p: p − 1 additions and p − 1 copies,
/// each a transfer, 2(p−1) · size bytes over p nodes' links: t ≥ 2(p−1)/p · size / B.
const ALLREDUCE: BusFactor = BusFactor { formula: "2(p-1)/p", on: Some(|p| 2.0 * (p - 1.0) / p) };

/// All-gather, reduce-scatter, alltoall, scatter, gather: p − 1 (nccl-tests: (p−1)/p
/// of S = p · size, the p blocks of a node's output or input). All-gather: each node
/// must receive the p − 1 other blocks; reduce-scatter: each of the p blocks of results
/// needs p − 1 transfers, p(p−1) · size bytes over p nodes' links; alltoall: each node
/// sends p − 1 blocks away; scatter: the root sends p − 1 blocks; gather: the root
/// receives p − 1 blocks. Each: t ≥ (p−1) · size / B.
const ALL_BUT_ONE_BLOCK: BusFactor = BusFactor { formula: "(p-1)", on: Some(|p| p - 1.0) };

/// Scan: 1 (not in nccl-tests). Node i's prefix depends on all the vectors of nodes
/// before it and is a whole vector itself, so every node but node 0 must receive at
/// least size bytes (exclusive too: node 1 receives node 0's vector): t ≥ size / B,
/// the bound of broadcast and reduce.
const SCAN: BusFactor = BusFactor { formula: "1", on: Some(|_| 1.0) };

/// Shift: 1 (nccl-tests' sendrecv: 1). Every node sends its vector to one node and
/// receives one: t ≥ size / B. (A shift by a multiple of p moves nothing.)
const SHIFT: BusFactor = BusFactor { formula: "1", on: Some(|_| 1.0) };

/// Ping-pong: 2. Its time is the round trip: the vector crosses the link out and back,
/// the echo sent once the message has arrived: t ≥ 2 · size / B. busbw is then
/// size / (time / 2), the OSU latency test's one-way time.
const PING_PONG: BusFactor = BusFactor { formula: "2", on: Some(|_| 2.0) };

/// Barrier: none. No data moves; neither algbw nor busbw is shown.
const BARRIER: BusFactor = BusFactor { formula: "none", on: None };

/// The bus-bandwidth factor of every collective (see [`BusFactor`]).
pub fn bus_factor(collective: Collective) -> BusFactor {
    match collective {
        Collective::Broadcast | Collective::Reduce => WHOLE_VECTOR_THROUGH_THE_ROOT,
        Collective::Allreduce => ALLREDUCE,
        Collective::Allgather
        | Collective::ReduceScatter
        | Collective::Alltoall
        | Collective::Scatter
        | Collective::Gather => ALL_BUT_ONE_BLOCK,
        Collective::Scan => SCAN,
        Collective::Shift => SHIFT,
        Collective::PingPong => PING_PONG,
        Collective::Barrier => BARRIER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_factors_match_nccl_tests_and_their_derivations() {
        let on = |collective, p| bus_factor(collective).on(p);
        // nccl-tests' own factors, on their S = size.
        assert_eq!(on(Collective::Allreduce, 8), Some(1.75));
        assert_eq!(on(Collective::Allreduce, 2), Some(1.0));
        assert_eq!(on(Collective::Broadcast, 8), Some(1.0));
        assert_eq!(on(Collective::Reduce, 5), Some(1.0));
        // nccl-tests' (p-1)/p on S = p · size is p - 1 on topocomm's size.
        for collective in [
            Collective::Allgather,
            Collective::ReduceScatter,
            Collective::Alltoall,
            Collective::Scatter,
            Collective::Gather,
        ] {
            let p = 8;
            let nccl_tests = (p as f64 - 1.0) / p as f64;
            assert_eq!(on(collective, p), Some(nccl_tests * p as f64), "{collective}");
            assert_eq!(on(collective, 4), Some(3.0), "{collective}");
            assert_eq!(on(collective, 1), Some(0.0), "{collective}: nothing to move on one node");
        }
        assert_eq!(on(Collective::Scan, 8), Some(1.0));
        assert_eq!(on(Collective::Shift, 8), Some(1.0));
        assert_eq!(on(Collective::PingPong, 2), Some(2.0), "a round trip crosses the link twice");
        assert_eq!(on(Collective::Barrier, 8), None);
        assert_eq!(bus_factor(Collective::Barrier).formula, "none");
    }

    #[test]
    fn every_formula_says_what_its_factor_computes() {
        use strum::IntoEnumIterator;
        // The header's formula, evaluated by hand for p = 2..=9, is the factor used.
        for collective in Collective::iter() {
            let factor = bus_factor(collective);
            for p in 2..=9 {
                let q = p as f64;
                let by_hand = match factor.formula {
                    "2(p-1)/p" => Some(2.0 * (q - 1.0) / q),
                    "(p-1)" => Some(q - 1.0),
                    "1" => Some(1.0),
                    "2" => Some(2.0),
                    "none" => None,
                    other => panic!("{collective}: unknown formula {other}"),
                };
                assert_eq!(factor.on(p), by_hand, "{collective} on {p} nodes");
            }
        }
    }
}
