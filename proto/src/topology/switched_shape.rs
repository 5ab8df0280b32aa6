//! The shapes of the switched kinds, from `--dims` as users type it: validated, each
//! error saying what would fit, and a default shape where none is given (the smallest
//! that holds `p` ranks).

use super::{TopologyError, TopologyKind, join_dims};
use crate::network::Family;
use crate::network::dragonfly::Dragonfly;
use crate::network::fat_tree::FatTree;
use crate::network::machines::Machines;

/// The dims and the family of a switched `kind` for `p` ranks (`p ≥ 1`).
pub(super) fn family(
    kind: TopologyKind,
    p: usize,
    dims: Option<&[usize]>,
) -> Result<(Vec<usize>, Family), TopologyError> {
    let invalid = |message: String| Err(TopologyError::Invalid(message));
    let (dims, family) = match (kind, dims) {
        (TopologyKind::FatTree, None) => {
            let k = (1..).map(|half| 2 * half).find(|&k| FatTree::new(k).hosts() >= p).expect("some k holds p");
            (vec![k], Family::FatTree(FatTree::new(k)))
        }
        (TopologyKind::FatTree, Some(&[k])) => {
            if k < 2 || !k.is_multiple_of(2) {
                return invalid(format!("a fat-tree needs an even K of at least 2 (K-port switches), got K = {k}"));
            }
            if k > 1 << 12 {
                return invalid(format!("a fat-tree of K = {k} is beyond the largest topocomm builds (K = 4096)"));
            }
            (vec![k], Family::FatTree(FatTree::new(k)))
        }
        (TopologyKind::FatTree, Some(other)) => {
            return invalid(format!("a fat-tree takes one dim, K (its switches' ports), got {}", shown(other)));
        }
        (TopologyKind::Dragonfly, None) => {
            let balanced = |h: usize| Dragonfly::new(2 * h, h, h);
            let h = (1..).find(|&h| balanced(h).hosts() >= p).expect("some h holds p");
            (vec![2 * h, h, h], Family::Dragonfly(balanced(h)))
        }
        (TopologyKind::Dragonfly, Some(&[a, hosts, h])) => {
            if a == 0 || hosts == 0 || h == 0 {
                return invalid(format!(
                    "a dragonfly AxPxH needs at least 1 router a group, host a router and global link a router, \
                     got {}",
                    join_dims(&[a, hosts, h])
                ));
            }
            let size = a.checked_mul(h).and_then(|ah| (ah + 1).checked_mul(a)?.checked_mul(hosts));
            if size.is_none_or(|size| size > 1 << 26) {
                return invalid(format!(
                    "a dragonfly {} is beyond the largest topocomm builds (2^26 hosts)",
                    join_dims(&[a, hosts, h])
                ));
            }
            (vec![a, hosts, h], Family::Dragonfly(Dragonfly::new(a, hosts, h)))
        }
        (TopologyKind::Dragonfly, Some(other)) => {
            return invalid(format!(
                "a dragonfly takes three dims, AxPxH (routers a group, hosts a router, global links a router), got {}",
                shown(other)
            ));
        }
        (TopologyKind::Cluster, Some(&[machines, cores])) => {
            if machines == 0 || cores == 0 {
                return invalid(format!(
                    "a cluster MxC needs at least one machine of at least one core, got {}",
                    join_dims(&[machines, cores])
                ));
            }
            if machines.checked_mul(cores).is_none_or(|hosts| hosts > 1 << 26) {
                return invalid(format!(
                    "a cluster {} is beyond the largest topocomm builds (2^26 cores)",
                    join_dims(&[machines, cores])
                ));
            }
            (vec![machines, cores], Family::Machines(Machines::new(machines, cores)))
        }
        (TopologyKind::Cluster, other) => {
            let got = other.map_or_else(|| "none".to_string(), shown);
            return invalid(format!("a cluster takes two dims, MxC (M machines of C cores), got {got}"));
        }
        (kind, _) => unreachable!("{kind} is not a switched kind"),
    };
    let hosts = family.hosts();
    if p > hosts {
        return invalid(format!(
            "{p} ranks do not fit on the {hosts} hosts of {kind} --dims {}: give fewer nodes or a larger shape",
            join_dims(&dims)
        ));
    }
    Ok((dims, family))
}

fn shown(dims: &[usize]) -> String {
    if dims.is_empty() { "none".to_string() } else { join_dims(dims) }
}
