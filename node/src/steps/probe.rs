//! The dilation probe: two steps in which every node sends a message to a neighbour and
//! receives one, all at the same instant — every node releasing at once, as the worst
//! step of a collective does — the second handing on what the first brought (each node
//! copies its partner's vector, as a collective places what it takes, and sends it
//! back), as a relay does. A run whose spec says `probe`
//! runs these steps instead of its collective; their time, less the emulated time of
//! the two messages, is what the software adds to such steps at this p on this
//! machine, which `--dilation auto` weighs against the run's emulated message times.
//!
//! The partners are a matching of the topology's edges, made greedily in id order:
//! each node not yet taken pairs with the lowest-numbered neighbour not yet taken
//! (on a ring, torus or hypercube: 0-1, 2-3, ...). On a switched network, where no two
//! ranks are linked, a rank's neighbours for this are the ranks of its own switch (one
//! switch between them, the fewest hops two ranks can be apart). A node left without a
//! partner (one of an odd ring, say) sits the steps out. Every node sends its own input vector and
//! gets it back; the steps are verified when each node holds exactly its own input.

use bytes::Bytes;
use topocomm_proto::spec::RunSpec;
use topocomm_proto::{NodeId, Topology, reference};

use topocomm_collectives::algorithms::phases::SINGLE;
use topocomm_collectives::comm::{Comm, CommError};

/// The partner of node `me` in the greedy matching of `topology`'s edges (`None`: it
/// sits the step out). Every node computes the same matching.
pub fn partner(topology: &Topology, me: NodeId) -> Option<NodeId> {
    let p = topology.p();
    let mut taken = vec![false; p];
    for node in 0..=me.min(p.saturating_sub(1)) {
        if taken[node] {
            continue;
        }
        // A lower neighbour still free would have taken this node already, so only
        // higher ones are left.
        let Some(mate) = (node + 1..p).find(|&other| !taken[other] && near(topology, node, other)) else {
            continue;
        };
        taken[node] = true;
        taken[mate] = true;
        if node == me {
            return Some(mate);
        }
        if mate == me {
            return Some(node);
        }
    }
    None
}

/// Whether ranks `a` and `b` may be partners: linked, or on a switched network hung off
/// one switch.
fn near(topology: &Topology, a: NodeId, b: NodeId) -> bool {
    match topology.switched() {
        Some(switched) => switched.attachment(a) == switched.attachment(b),
        None => topology.is_neighbour(a, b),
    }
}

/// This node's part of the steps: sends `vector` to its partner, sends back what the
/// partner sent, and returns what came back (nothing when it sits the steps out). Each
/// message taken is copied into a buffer of its own first, as a collective places (or
/// combines) every message it takes into its result.
pub async fn relay(comm: &Comm, vector: Bytes) -> Result<Bytes, CommError> {
    let Some(mate) = partner(comm.topology(), comm.id()) else { return Ok(Bytes::new()) };
    let theirs = Bytes::copy_from_slice(&comm.exchange(mate, mate, SINGLE.tag(1), vector).await?);
    Ok(Bytes::copy_from_slice(&comm.exchange(mate, mate, SINGLE.tag(2), theirs).await?))
}

/// How what a node ended the probe's steps with differs from what it sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeMismatch {
    /// The first byte that differs.
    #[error("the probe's message came back changed at byte {at}")]
    Changed { at: usize },
    /// As long as the shorter of the two, equal, but of another length.
    #[error("the probe's message came back {got} bytes long, not {expected}")]
    Length { got: usize, expected: usize },
}

/// Checks what node `me` ended the steps with: its own input, byte for byte (nothing
/// when it sat them out).
pub fn check(spec: &RunSpec, topology: &Topology, me: NodeId, output: &[u8]) -> Result<(), ProbeMismatch> {
    let expected = match partner(topology, me) {
        Some(_) => reference::input(spec, topology.p(), me),
        None => Bytes::new(),
    };
    if output == &expected[..] {
        return Ok(());
    }
    match output.iter().zip(expected.iter()).position(|(a, b)| a != b) {
        Some(at) => Err(ProbeMismatch::Changed { at }),
        None => Err(ProbeMismatch::Length { got: output.len(), expected: expected.len() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topocomm_proto::TopologyKind;
    use topocomm_proto::spec::{Algorithm, Collective};

    fn matching(topology: &Topology) -> Vec<Option<NodeId>> {
        (0..topology.p()).map(|id| partner(topology, id)).collect()
    }

    #[test]
    fn partners_are_neighbours_and_each_others() {
        for (kind, p) in [
            (TopologyKind::Ring, 8),
            (TopologyKind::Ring, 7),
            (TopologyKind::Torus, 16),
            (TopologyKind::Torus, 9),
            (TopologyKind::Mesh, 12),
            (TopologyKind::Mesh3d, 8),
            (TopologyKind::Hypercube, 64),
            (TopologyKind::Full, 5),
        ] {
            let topology = Topology::new(kind, p, None).unwrap();
            let partners = matching(&topology);
            for (id, mate) in partners.iter().enumerate() {
                if let Some(mate) = *mate {
                    assert!(topology.is_neighbour(id, mate), "{topology}: {id} - {mate}");
                    assert_eq!(partners[mate], Some(id), "{topology}: {id} - {mate} is not mutual");
                }
            }
            let idle = partners.iter().filter(|m| m.is_none()).count();
            assert!(idle <= p / 4, "{topology}: {idle} of {p} nodes sit the step out");
        }
    }

    /// On a switched network no two ranks are linked: partners share a switch, two hops
    /// apart, and every rank of a switch with an even count of them has one.
    #[test]
    fn ranks_of_a_switched_network_pair_under_their_switch() {
        for (kind, p, dims) in [
            (TopologyKind::FatTree, 16, vec![4]),
            (TopologyKind::Dragonfly, 12, vec![2, 2, 1]),
            (TopologyKind::Cluster, 16, vec![4, 4]),
        ] {
            let topology = Topology::new(kind, p, Some(&dims)).unwrap();
            let partners = matching(&topology);
            for (id, mate) in partners.iter().enumerate() {
                let mate = mate.unwrap_or_else(|| panic!("{topology}: rank {id} has no partner"));
                assert_eq!(topology.distance(id, mate), 2, "{topology}: {id} - {mate}");
                assert_eq!(partners[mate], Some(id), "{topology}: {id} - {mate} is not mutual");
            }
        }
    }

    #[test]
    fn rings_tori_and_hypercubes_pair_neighbouring_ids() {
        let ring = Topology::new(TopologyKind::Ring, 7, None).unwrap();
        assert_eq!(matching(&ring), vec![Some(1), Some(0), Some(3), Some(2), Some(5), Some(4), None]);
        for kind in [TopologyKind::Torus, TopologyKind::Hypercube] {
            let topology = Topology::new(kind, 16, None).unwrap();
            let expected: Vec<Option<NodeId>> = (0..16).map(|id| Some(id ^ 1)).collect();
            assert_eq!(matching(&topology), expected, "{topology}");
        }
    }

    #[test]
    fn a_changed_or_cut_probe_says_where() {
        let ring = Topology::new(TopologyKind::Ring, 2, None).unwrap();
        let spec = RunSpec { probe: true, size_bytes: 64, ..RunSpec::new(Collective::Allreduce, Algorithm::Ring) };
        let sent = reference::input(&spec, 2, 0).to_vec();
        assert_eq!(check(&spec, &ring, 0, &sent), Ok(()));
        let mut changed = sent.clone();
        changed[5] ^= 1;
        let error = check(&spec, &ring, 0, &changed).unwrap_err();
        assert_eq!(error, ProbeMismatch::Changed { at: 5 });
        assert_eq!(error.to_string(), "the probe's message came back changed at byte 5");
        let error = check(&spec, &ring, 0, &sent[..8]).unwrap_err();
        assert_eq!(error, ProbeMismatch::Length { got: 8, expected: sent.len() });
        assert_eq!(error.to_string(), format!("the probe's message came back 8 bytes long, not {}", sent.len()));
    }

    #[test]
    fn a_single_node_sits_out() {
        let one = Topology::new(TopologyKind::Ring, 1, None).unwrap();
        assert_eq!(partner(&one, 0), None);
    }
}
