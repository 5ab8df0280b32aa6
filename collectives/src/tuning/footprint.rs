//! How many bytes a node of a run needs at its peak, on the safe side: its input, its
//! output, the messages in flight, its timings. The in-flight allowances are measured
//! factors, so they are data beside `auto`'s rules (the `footprint` section of
//! `default.json`); the coordinator refuses a run its nodes cannot hold and sends each
//! daemon its own share, which the daemon checks against the memory it has (a daemon
//! reads no tuning file: it holds the run to the coordinator's figure).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use topocomm_proto::NodeId;
use topocomm_proto::spec::{Algorithm, Collective, RunSpec, SpecError};

/// The in-flight allowances: how many times the largest input or output any node of the
/// run holds may be in flight at once (frames received, blocks being combined or
/// concatenated, blocks passed on towards the root of a scatter or gather).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Footprint {
    /// In order: the first that names a run's collective (and algorithm, if it names
    /// any) gives its factor.
    pub in_flight: Vec<InFlight>,
    /// The factor of a run no entry names.
    pub default_in_flight: Factor,
    /// Why the default is what it is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
}

/// One in-flight allowance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InFlight {
    pub collective: Collective,
    /// The algorithms it holds for (empty: every algorithm of the collective).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub algorithms: Vec<Algorithm>,
    pub factor: Factor,
    /// The measurement behind it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
}

/// A factor as a fraction, "3/2" or "2", so that the estimate stays in whole bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Factor {
    pub times: u64,
    pub over: u64,
}

impl Factor {
    /// `bytes` times the factor, rounded down; `None` on overflow.
    pub fn of(self, bytes: u64) -> Option<u64> {
        Some(bytes.checked_mul(self.times)? / self.over)
    }
}

impl fmt::Display for Factor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.over {
            1 => write!(f, "{}", self.times),
            over => write!(f, "{}/{over}", self.times),
        }
    }
}

impl Serialize for Factor {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Factor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let refuse = || serde::de::Error::custom("expected a factor, a whole number or a fraction like \"3/2\"");
        let (times, over) = match text.split_once('/') {
            Some((times, over)) => (times.trim(), over.trim()),
            None => (text.trim(), "1"),
        };
        let times: u64 = times.parse().map_err(|_| refuse())?;
        let over: u64 = over.parse().map_err(|_| refuse())?;
        if over == 0 {
            return Err(refuse());
        }
        Ok(Factor { times, over })
    }
}

impl Default for Footprint {
    /// The built-in table's factors (what a tuning file without a footprint gets).
    fn default() -> Self {
        /// The built-in table, read for its footprint alone.
        #[derive(Deserialize)]
        struct BuiltIn {
            footprint: Footprint,
        }
        let built_in: BuiltIn = serde_json::from_str(super::DEFAULT_JSON).expect("the built-in table has a footprint");
        built_in.footprint
    }
}

impl Footprint {
    /// The in-flight factor of `spec`'s collective and algorithm.
    pub fn in_flight_factor(&self, spec: &RunSpec) -> Factor {
        self.in_flight
            .iter()
            .find(|entry| {
                entry.collective == spec.collective
                    && (entry.algorithms.is_empty() || entry.algorithms.contains(&spec.algorithm))
            })
            .map_or(self.default_in_flight, |entry| entry.factor)
    }

    /// An estimate, on the safe side, of the bytes node `node` of a `p`-node run of `spec`
    /// needs at its peak:
    ///
    /// * its input: p blocks of `size_bytes` for scatter at the root, reduce-scatter and
    ///   alltoall, nothing for barrier or for scatter away from the root, one block
    ///   otherwise (`reference::input_len`);
    /// * its output: p blocks for allgather, gather at the root and alltoall, nothing for
    ///   barrier or for gather away from the root, one block otherwise
    ///   (`reference::expected`);
    /// * in flight, the largest input or output any node of the run holds times the
    ///   collective's factor ([`Footprint::in_flight_factor`]), while input and output are
    ///   held;
    /// * 8 bytes of timing per timed iteration;
    /// * for a schedule the user brought, what it holds beyond the collective's buffers
    ///   ([`Schedule::bytes_held`](topocomm_proto::schedule::Schedule::bytes_held): every
    ///   message of a GOAL rank, an MSCCL-IR rank's scratch and the messages it
    ///   receives), so that a schedule file cannot ask a node for more than it has.
    ///
    /// The daemon's own base is not included (docs/PERFORMANCE-NOTES.md holds the
    /// estimate against measured peaks). `None` when the estimate overflows `u64` (or a
    /// program does not lay out at this size).
    pub fn of_node(&self, spec: &RunSpec, p: usize, node: NodeId) -> Option<u64> {
        let size = spec.size_bytes;
        let blocks = || size.checked_mul(u64::try_from(p).ok()?);
        let at_root = node == spec.root;
        let input = match spec.collective {
            Collective::Barrier => 0,
            Collective::Scatter if !at_root => 0,
            Collective::Scatter | Collective::ReduceScatter | Collective::Alltoall => blocks()?,
            _ => size,
        };
        let output = match spec.collective {
            Collective::Barrier => 0,
            Collective::Gather if !at_root => 0,
            Collective::Allgather | Collective::Gather | Collective::Alltoall => blocks()?,
            _ => size,
        };
        let largest_anywhere = match spec.collective {
            Collective::Scatter | Collective::Gather => blocks()?,
            _ => input.max(output),
        };
        let in_flight = self.in_flight_factor(spec).of(largest_anywhere)?;
        let timing = u64::from(spec.iterations).checked_mul(std::mem::size_of::<f64>() as u64)?;
        let schedule = match &spec.schedule {
            Some(schedule) => schedule.bytes_held(node, p, size, spec.dtype)?,
            None => 0,
        };
        input.checked_add(output)?.checked_add(in_flight)?.checked_add(timing)?.checked_add(schedule)
    }

    /// [`Footprint::of_node`] summed over `nodes`: what they need together when they
    /// share one machine. `None` when the sum overflows `u64`.
    pub fn of_nodes(&self, spec: &RunSpec, p: usize, nodes: impl IntoIterator<Item = NodeId>) -> Option<u64> {
        nodes.into_iter().try_fold(0u64, |sum, node| sum.checked_add(self.of_node(spec, p, node)?))
    }

    /// Refuses a `p`-node run of `spec` whose [`Footprint::of_nodes`] for `nodes`, which
    /// share `available_bytes`, exceeds it; `holder` names them in the error (e.g. "node 3
    /// (node-3)" or "the 8 local nodes").
    pub fn check(
        &self,
        spec: &RunSpec,
        p: usize,
        nodes: impl IntoIterator<Item = NodeId>,
        available_bytes: u64,
        holder: &str,
    ) -> Result<(), SpecError> {
        let needed = self.of_nodes(spec, p, nodes).ok_or(SpecError::MemoryOverflow { size: spec.size_bytes, p })?;
        if needed > available_bytes {
            return Err(SpecError::TooMuchMemory { needed, available: available_bytes, holder: holder.to_owned() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    const GIB: u64 = 1 << 30;

    /// The built-in table's factors.
    fn footprint() -> Footprint {
        Footprint::default()
    }

    #[test]
    fn everyday_specs_fit_in_memory() {
        for collective in Collective::iter() {
            let spec =
                RunSpec { size_bytes: 1 << 20, warmup: 3, iterations: 20, ..RunSpec::new(collective, Algorithm::Auto) };
            for p in [1, 8, 1024] {
                assert_eq!(
                    footprint().check(&spec, p, [0], 24 * GIB, "node 0 (node-0)"),
                    Ok(()),
                    "{collective} on {p}"
                );
            }
        }
    }

    #[test]
    fn memory_of_node_counts_input_output_flight_and_timing() {
        let spec = |collective, size| RunSpec {
            size_bytes: size,
            iterations: 10,
            root: 2,
            ..RunSpec::new(collective, Algorithm::Auto)
        };
        // One block in, one out, two in flight, 10 timings.
        assert_eq!(footprint().of_node(&spec(Collective::Allreduce, 1000), 8, 0), Some(4000 + 80));
        // p blocks in and out.
        assert_eq!(footprint().of_node(&spec(Collective::Alltoall, 1000), 8, 5), Some(4 * 8000 + 80));
        // The pairwise exchanges send and receive one block at a time.
        for algorithm in [Algorithm::Pairwise, Algorithm::PairwiseXor] {
            let pairwise = RunSpec { algorithm, ..spec(Collective::Alltoall, 1000) };
            assert_eq!(footprint().of_node(&pairwise, 8, 5), Some(2 * 8000 + 4000 + 80), "{algorithm}");
        }
        // One block in, p out, one and a half times the p blocks in flight.
        assert_eq!(footprint().of_node(&spec(Collective::Allgather, 1000), 8, 7), Some(1000 + 8000 + 12000 + 80));
        assert_eq!(footprint().of_node(&spec(Collective::ReduceScatter, 1000), 8, 7), Some(8000 + 1000 + 12000 + 80));
        // The root of a scatter holds the p blocks; the others one block, and pass on up
        // to all of them.
        let scatter = spec(Collective::Scatter, 1000);
        assert_eq!(footprint().of_node(&scatter, 8, 2), Some(8000 + 1000 + 2 * 8000 + 80));
        assert_eq!(footprint().of_node(&scatter, 8, 0), Some(1000 + 2 * 8000 + 80));
        let gather = spec(Collective::Gather, 1000);
        assert_eq!(footprint().of_node(&gather, 8, 2), Some(1000 + 8000 + 2 * 8000 + 80));
        assert_eq!(footprint().of_node(&gather, 8, 3), Some(1000 + 2 * 8000 + 80));
        assert_eq!(footprint().of_nodes(&scatter, 8, 0..8), Some(8000 + 8 * (1000 + 2 * 8000 + 80)));
        assert_eq!(footprint().of_nodes(&scatter, 8, []), Some(0));
        assert_eq!(footprint().of_node(&spec(Collective::Barrier, 1000), 8, 0), Some(80));
        // Timing data alone, for the most iterations a spec can have.
        let many = RunSpec { iterations: u32::MAX, ..spec(Collective::Barrier, 0) };
        assert_eq!(footprint().of_node(&many, 2, 0), Some(u64::from(u32::MAX) * 8));
        assert_eq!(footprint().of_node(&spec(Collective::Alltoall, u64::MAX / 4), 8, 0), None);
        assert_eq!(footprint().of_node(&spec(Collective::Allreduce, u64::MAX / 2), 8, 0), None);
        assert_eq!(
            footprint().of_node(&spec(Collective::Allreduce, u64::MAX / 8), usize::MAX, 0),
            Some(u64::MAX / 8 * 4 + 80)
        );
        assert_eq!(footprint().of_nodes(&spec(Collective::Allreduce, u64::MAX / 8), 8, 0..2), None);
    }

    #[test]
    fn check_memory_names_what_is_needed_and_who_has_what() {
        let spec = RunSpec { size_bytes: 75 * GIB, ..RunSpec::new(Collective::Allreduce, Algorithm::Ring) };
        let err = footprint().check(&spec, 8, [3], 18 * GIB + GIB / 5, "node 3 (node-3)").unwrap_err();
        assert!(matches!(err, SpecError::TooMuchMemory { needed, .. } if needed == 300 * GIB + 8));
        assert_eq!(err.to_string(), "the run needs about 300.0 GiB at node 3 (node-3); 18.2 GiB available");
        let needed = footprint().of_node(&spec, 8, 0).expect("fits");
        assert_eq!(footprint().check(&spec, 8, [0], needed, "node 0 (node-0)"), Ok(()));
        assert!(footprint().check(&spec, 8, [0], needed - 1, "node 0 (node-0)").is_err());
        // Nodes that share a machine need the sum.
        assert_eq!(footprint().check(&spec, 8, [0, 1], 2 * needed, "the 2 nodes"), Ok(()));
        assert!(footprint().check(&spec, 8, [0, 1], 2 * needed - 1, "the 2 nodes").is_err());
        let huge = RunSpec { size_bytes: u64::MAX / 2, ..spec };
        let err = footprint().check(&huge, 8, [0], u64::MAX, "node 0").unwrap_err();
        assert!(matches!(err, SpecError::MemoryOverflow { p: 8, .. }), "{err}");
    }

    #[test]
    fn factors_read_as_fractions_and_refuse_what_is_not_one() {
        let read = |text: &str| serde_json::from_str::<Factor>(&format!("{text:?}"));
        assert_eq!(read("3/2").unwrap(), Factor { times: 3, over: 2 });
        assert_eq!(read("2").unwrap(), Factor { times: 2, over: 1 });
        assert_eq!(Factor { times: 3, over: 2 }.to_string(), "3/2");
        assert_eq!(Factor { times: 2, over: 1 }.to_string(), "2");
        for bad in ["1/0", "x", "1.5", "-1", ""] {
            let error = read(bad).unwrap_err().to_string();
            assert!(error.contains("expected a factor, a whole number or a fraction"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_changed_factor_changes_the_estimate() {
        let spec = RunSpec { size_bytes: 1000, iterations: 0, ..RunSpec::new(Collective::Allgather, Algorithm::Ring) };
        let mut footprint = footprint();
        assert_eq!(footprint.of_node(&spec, 8, 0), Some(1000 + 8000 + 12000));
        footprint.in_flight.retain(|entry| entry.collective != Collective::Allgather);
        assert_eq!(footprint.of_node(&spec, 8, 0), Some(1000 + 8000 + 16000), "the default, twice");
    }

    /// A GOAL file of 150 bytes asked node 0 for 10^15 B and aborted its daemon: the
    /// schedule's messages count in the estimate, so every memory check (the CLI's
    /// local capacity, the coordinator's, the node's own on arrival) refuses it.
    #[test]
    fn a_schedules_messages_count_in_the_estimate() {
        use topocomm_proto::schedule::{Goal, GoalKind, GoalOp, GoalRank, Schedule};
        let op = |kind| GoalOp { kind, requires: vec![], irequires: vec![] };
        let goal = |bytes| Goal {
            ranks: vec![
                GoalRank { ops: vec![op(GoalKind::Send { bytes, peer: 1, tag: 0 }), op(GoalKind::Calc { ns: 5 })] },
                GoalRank { ops: vec![op(GoalKind::Recv { bytes, peer: 0, tag: 0 })] },
            ],
        };
        let spec = |bytes| RunSpec {
            size_bytes: 8,
            iterations: 1,
            schedule: Some(Box::new(Schedule::Goal(goal(bytes)))),
            ..RunSpec::new(Collective::Allreduce, Algorithm::Auto)
        };
        let plain = footprint().of_node(&RunSpec { schedule: None, ..spec(0) }, 2, 0).unwrap();
        assert_eq!(footprint().of_node(&spec(1000), 2, 0), Some(plain + 1000));
        assert_eq!(footprint().of_node(&spec(1000), 2, 1), Some(plain + 1000));
        let huge = spec(1 << 40);
        let error = footprint().check(&huge, 2, [0], 24 * GIB, "node 0 (node-0)").unwrap_err();
        assert!(matches!(error, SpecError::TooMuchMemory { needed, .. } if needed == plain + (1 << 40)), "{error}");
    }
}
