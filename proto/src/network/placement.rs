//! Where a switched network's ranks sit (`--placement`): which host each rank is put on,
//! and so which ranks share a machine, an edge switch, a router or a dragonfly group.
//!
//! - `linear`: rank `r` on host `r` (the hosts are numbered machine by machine, edge
//!   switch by edge switch, router by router), so consecutive ranks share a machine;
//! - `round-robin`: the ranks dealt across the lowest groups of hosts in turn (the hosts
//!   under one switch: a machine's cores, an edge switch's hosts, a router's hosts), rank
//!   `r` on the next free host of the `(r mod G)`-th group of the G that still have one,
//!   so consecutive ranks sit on different machines and p below the hosts fills every
//!   group evenly;
//! - `random[:SEED]`: the first p hosts of a permutation of all hosts shuffled by a
//!   ChaCha8 generator seeded with SEED (default [`DEFAULT_SEED`]).
//!
//! A direct network (ring, mesh, torus, hypercube, full) has no hosts apart from its
//! vertices, and its algorithms are laid out on the ranks' own ids: it takes `linear` only.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;

use super::Family;

/// The seed of `random` without one.
pub const DEFAULT_SEED: u64 = 1;

/// Which host each rank of a switched network sits on (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Placement {
    /// Rank `r` on host `r`.
    #[default]
    Linear,
    /// The ranks dealt across the lowest groups of hosts in turn.
    RoundRobin,
    /// A seeded permutation of the hosts.
    Random { seed: u64 },
}

impl Placement {
    /// Whether this is the linear placement.
    pub fn is_linear(self) -> bool {
        self == Placement::Linear
    }

    /// The host of each of `ranks` ranks (`ranks ≤ family.hosts()`): distinct hosts.
    pub fn hosts(self, family: &Family, ranks: usize) -> Vec<usize> {
        match self {
            Placement::Linear => (0..ranks).collect(),
            Placement::RoundRobin => {
                let groups = lowest_groups(family);
                let deepest = groups.iter().map(Vec::len).max().unwrap_or(0);
                (0..deepest)
                    .flat_map(|slot| groups.iter().filter_map(move |group| group.get(slot).copied()))
                    .take(ranks)
                    .collect()
            }
            Placement::Random { seed } => {
                let mut hosts: Vec<usize> = (0..family.hosts()).collect();
                hosts.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
                hosts.truncate(ranks);
                hosts
            }
        }
    }
}

/// The hosts grouped by the switch they hang off, groups in the order of their first
/// host, each group's hosts in order.
fn lowest_groups(family: &Family) -> Vec<Vec<usize>> {
    let mut index: HashMap<usize, usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for host in 0..family.hosts() {
        let next = groups.len();
        let g = *index.entry(family.attachment(host)).or_insert(next);
        if g == next {
            groups.push(Vec::new());
        }
        groups[g].push(host);
    }
    groups
}

impl fmt::Display for Placement {
    /// `linear`, `round-robin`, `random:SEED`: what [`Placement::from_str`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Linear => f.write_str("linear"),
            Placement::RoundRobin => f.write_str("round-robin"),
            Placement::Random { seed } => write!(f, "random:{seed}"),
        }
    }
}

/// A placement that cannot be read, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlacementError(String);

impl FromStr for Placement {
    type Err = PlacementError;

    /// `linear`, `round-robin` or `random[:SEED]` (SEED a whole number below 2^64).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once(':') {
            None if text == "linear" => Ok(Placement::Linear),
            None if text == "round-robin" => Ok(Placement::RoundRobin),
            None if text == "random" => Ok(Placement::Random { seed: DEFAULT_SEED }),
            Some(("random", seed)) => seed.parse().map(|seed| Placement::Random { seed }).map_err(|_| {
                PlacementError(format!("the seed of random:{seed} is not a whole number from 0 to {}", u64::MAX))
            }),
            _ => Err(PlacementError(format!(
                "unknown placement {text:?}: linear, round-robin or random[:SEED] (default seed {DEFAULT_SEED})"
            ))),
        }
    }
}

serde_by_name!(Placement);
