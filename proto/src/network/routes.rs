//! Route policies (`--routes`): how a network picks, among its paths, the one a flow
//! takes, and the flow itself (source, destination and tag: what a frame's header says
//! of the message it belongs to). A fat-tree routes `d-mod-k` (by destination, the
//! default) or `ecmp` (each up-port by a hash of the flow, RFC 2992); a dragonfly
//! `minimal` (the default) or `valiant[:SEED]` (through an intermediate group drawn from
//! the seed and the flow: Valiant and Brebner, STOC 1981; Kim et al., ISCA 2008);
//! the direct networks their `dimension-order` routes; a fully connected network, a
//! cluster and a network from a file their `shortest-path` ones.
//!
//! A policy is a function of the flow, never of the load or of chance at run time, and
//! every hop computes it from the header alone: the hashes are xxh3's, the same on every
//! machine, so a live run and its simulation route every frame alike.

use std::fmt;
use std::str::FromStr;

/// One flow: the frames of the messages from `src` to `dst` under one `tag` (ranks; the
/// tag an algorithm's or the runtime's). Every frame of a flow takes one route, so a
/// message's packets stay in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flow {
    pub src: usize,
    pub dst: usize,
    pub tag: u32,
}

impl Flow {
    pub fn new(src: usize, dst: usize, tag: u32) -> Self {
        Flow { src, dst, tag }
    }

    /// The flow's hash under `seed`: xxh3 of source, destination and tag (little-endian
    /// u64, u64, u32), the same on every machine.
    pub fn hash(&self, seed: u64) -> u64 {
        let mut bytes = [0u8; 20];
        bytes[..8].copy_from_slice(&(self.src as u64).to_le_bytes());
        bytes[8..16].copy_from_slice(&(self.dst as u64).to_le_bytes());
        bytes[16..].copy_from_slice(&self.tag.to_le_bytes());
        xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, seed)
    }
}

/// How a network routes its flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Routes {
    /// Fat-tree: up*/down*, the up-ports by the destination (destination-mod-k).
    DModK,
    /// Fat-tree: up*/down*, each up-port by a hash of the flow (equal-cost multipath).
    Ecmp,
    /// Dragonfly: local, global, local.
    Minimal,
    /// Dragonfly: minimally to an intermediate group drawn from `seed` and the flow,
    /// then minimally on.
    Valiant { seed: u64 },
    /// Ring, mesh, torus (2-D and 3-D) and hypercube: one dimension after the other.
    DimensionOrder,
    /// Fully connected network, cluster, network from a file: the shortest paths.
    ShortestPath,
}

/// The policies' names as users type them, for messages.
pub const ROUTE_NAMES: &str = "d-mod-k, ecmp, minimal, valiant[:SEED], dimension-order, shortest-path";

impl Routes {
    /// Whether every flow to a destination takes one route, whatever its source and
    /// tag (a node may then hold one next hop per destination).
    pub fn by_destination(&self) -> bool {
        !matches!(self, Routes::Ecmp | Routes::Valiant { .. })
    }

    /// The network families this policy applies to, as a message names them.
    pub fn applies_to(&self) -> &'static str {
        match self {
            Routes::DModK | Routes::Ecmp => "fat-tree",
            Routes::Minimal | Routes::Valiant { .. } => "dragonfly",
            Routes::DimensionOrder => "ring, mesh, torus, mesh3d, torus3d and hypercube",
            Routes::ShortestPath => "full, cluster and a network from a file",
        }
    }
}

impl fmt::Display for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Routes::DModK => f.write_str("d-mod-k"),
            Routes::Ecmp => f.write_str("ecmp"),
            Routes::Minimal => f.write_str("minimal"),
            Routes::Valiant { seed } => write!(f, "valiant:{seed}"),
            Routes::DimensionOrder => f.write_str("dimension-order"),
            Routes::ShortestPath => f.write_str("shortest-path"),
        }
    }
}

/// A policy name that is none of [`ROUTE_NAMES`], or a Valiant seed that is no number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown route policy {0:?}; choose one of: {ROUTE_NAMES} (SEED a whole number)")]
pub struct UnknownRoutes(pub String);

impl FromStr for Routes {
    type Err = UnknownRoutes;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownRoutes(text.to_owned());
        Ok(match text {
            "d-mod-k" => Routes::DModK,
            "ecmp" => Routes::Ecmp,
            "minimal" => Routes::Minimal,
            "valiant" => Routes::Valiant { seed: 0 },
            "dimension-order" => Routes::DimensionOrder,
            "shortest-path" => Routes::ShortestPath,
            _ => match text.strip_prefix("valiant:") {
                Some(seed) => Routes::Valiant { seed: seed.parse().map_err(|_| unknown())? },
                None => return Err(unknown()),
            },
        })
    }
}

serde_by_name!(Routes);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_bad_ones_are_refused() {
        for routes in [
            Routes::DModK,
            Routes::Ecmp,
            Routes::Minimal,
            Routes::Valiant { seed: 7 },
            Routes::DimensionOrder,
            Routes::ShortestPath,
        ] {
            assert_eq!(routes.to_string().parse::<Routes>(), Ok(routes));
            let json = serde_json::to_string(&routes).unwrap();
            assert_eq!(serde_json::from_str::<Routes>(&json).unwrap(), routes);
        }
        assert_eq!("valiant".parse::<Routes>(), Ok(Routes::Valiant { seed: 0 }));
        for bad in ["", "ECMP", "valiant:", "valiant:-1", "valiant:x", "adaptive"] {
            let error = bad.parse::<Routes>().unwrap_err();
            assert!(error.to_string().contains("choose one of: d-mod-k, ecmp"), "{error}");
        }
        assert!(serde_json::from_str::<Routes>("\"ugal\"").is_err());
    }

    #[test]
    fn a_flows_hash_depends_on_all_it_holds() {
        let flow = Flow::new(1, 2, 3);
        let hashes = [
            flow.hash(0),
            flow.hash(1),
            Flow::new(2, 1, 3).hash(0),
            Flow::new(1, 2, 4).hash(0),
            Flow::new(1, 3, 3).hash(0),
        ];
        for (i, a) in hashes.iter().enumerate() {
            assert!(hashes[i + 1..].iter().all(|b| b != a), "{hashes:?}");
        }
        assert_eq!(flow.hash(5), Flow::new(1, 2, 3).hash(5));
    }
}
