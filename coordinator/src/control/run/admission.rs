//! What a run may hold: refusing, before any node allocates, a run its hosts' memory
//! cannot hold, and every node's rows of limits (footprint and allowances) sent with it.

use std::collections::BTreeMap;

use bytesize::ByteSize;
use topocomm_proto::Topology;
use topocomm_proto::control::RunLimits;
use topocomm_proto::spec::{RunSpec, SpecError};

use crate::control::cluster::Participant;
use topocomm_collectives::tuning::Tuning;

use super::{Coordinator, RunError, describe};

impl Coordinator {
    /// Every node's rows of `spec` on `topology`: its footprint by this coordinator's
    /// tuning table (the one it admitted the run by) and its allowances, counted once
    /// here for all nodes (off the runtime's threads: it is a simulation).
    pub(super) async fn limits_of(&self, spec: &RunSpec, topology: &Topology) -> Result<Vec<RunLimits>, RunError> {
        let (cache, tuning, spec, topology) =
            (self.allowances.clone(), self.tuning.clone(), spec.clone(), topology.clone());
        tokio::task::spawn_blocking(move || cache.limits_of_run(&spec, &topology, &tuning.footprint))
            .await
            .map_err(|failed| RunError::Limits { reason: failed.to_string() })
    }
}

/// Refuses, before any node allocates, a run that needs more memory than its nodes have:
/// the nodes at one host address share what the one of them with the least reported
/// when it registered, and need the sum of their estimates (the tuning table's `footprint`;
/// a local cluster's nodes each report the whole machine; without sharing, 64 of them at
/// 1 MiB all-to-all were let through to the kernel's OOM killer). Nodes that did not say
/// are left to check for themselves, as every node does again with the footprint by this
/// table it is sent with the run (`RunLimits`). Containers have an
/// address each, so nodes in containers on one host are not grouped.
pub(super) fn check_memory(spec: &RunSpec, participants: &[Participant], tuning: &Tuning) -> Result<(), SpecError> {
    let mut hosts: BTreeMap<&str, Vec<&Participant>> = BTreeMap::new();
    for node in participants.iter().filter(|p| p.memory_bytes > 0) {
        hosts.entry(host_of(&node.data_addr)).or_default().push(node);
    }
    for (host, nodes) in hosts {
        let smallest = nodes.iter().min_by_key(|p| p.memory_bytes).expect("a group has a node");
        let holder = match nodes.len() {
            1 => describe(smallest),
            count => format!(
                "the {count} nodes at {host} (sharing the {} that {} reported)",
                ByteSize(smallest.memory_bytes),
                describe(smallest)
            ),
        };
        let ids = nodes.iter().map(|node| node.id);
        tuning.footprint.check(spec, participants.len(), ids, smallest.memory_bytes, &holder)?;
    }
    Ok(())
}

/// The host part of a node's data address, `HOST:PORT` or `[V6]:PORT` (the whole
/// address when it has no port).
fn host_of(data_addr: &str) -> &str {
    match data_addr.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => data_addr,
    }
}

#[cfg(test)]
mod tests {
    use topocomm_proto::NodeId;
    use topocomm_proto::spec::{Algorithm, Collective};

    use super::*;
    use crate::control::run::tests::participant;

    #[test]
    fn nodes_at_one_host_share_its_memory() {
        let at =
            |id: NodeId, addr: &str| Participant { data_addr: addr.into(), memory_bytes: 1 << 30, ..participant(id) };
        // 4 blocks of 20 MiB in and out, twice the larger in flight: 320 MiB and a little
        // per node, 1.25 GiB and a little for the 4 of them.
        let spec =
            RunSpec { size_bytes: 20 << 20, iterations: 1, ..RunSpec::new(Collective::Alltoall, Algorithm::Ring) };
        let apart: Vec<Participant> = (0..4).map(|id| at(id, &format!("10.0.0.{id}:7000"))).collect();
        assert_eq!(check_memory(&spec, &apart, &Tuning::built_in()), Ok(()));
        let together: Vec<Participant> = (0..4).map(|id| at(id, &format!("127.0.0.1:{}", 7000 + id))).collect();
        let error = check_memory(&spec, &together, &Tuning::built_in()).unwrap_err();
        assert!(matches!(error, SpecError::TooMuchMemory { available, .. } if available == 1 << 30), "{error:?}");
        assert_eq!(
            error.to_string(),
            "the run needs about 1.3 GiB at the 4 nodes at 127.0.0.1 (sharing the 1.0 GiB \
             that node 0 (n0) reported); 1.0 GiB available"
        );
        assert_eq!(host_of("[::1]:7000"), "[::1]");
        assert_eq!(host_of("node-3"), "node-3");
    }
}
