//! The message flow as messages: routers record flow events one node at a time (a send
//! where a message starts, a forward at each node that passes it on, a delivery where it
//! ends); [`messages`] joins them back into messages, each with its hops (one per link
//! crossed). The space-time diagram, the Chrome trace and the lab's documents read them.
//!
//! Everything here works on a list of [`FlowEvent`]s, whether the cost model made them
//! (on its virtual clock) or the nodes of a real run recorded them (moved onto the
//! coordinator's clock). Nothing here runs anything.

use std::collections::{HashMap, VecDeque};

use topocomm_proto::flow::{FlowEvent, FlowKind};
use topocomm_proto::topology::NodeId;

/// One link crossing of a message: it left `from` at `depart_ns` and reached `to` at
/// `arrive_ns` (its forward there, or its delivery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    pub from: NodeId,
    pub to: NodeId,
    pub depart_ns: u64,
    pub arrive_ns: u64,
    /// Index of the event it left with (a send or a forward).
    pub depart: usize,
    /// Index of the event it arrived with (a forward or the delivery).
    pub arrive: usize,
}

/// A message from its source to its destination, as the events tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub src: NodeId,
    pub dst: NodeId,
    pub tag: u32,
    pub step: u16,
    pub bytes: u64,
    /// Index of its send event.
    pub send: usize,
    /// Index of its delivery event (`None`: the events end before it arrived).
    pub deliver: Option<usize>,
    /// Its hops in order; empty for a message a node sends itself.
    pub hops: Vec<Hop>,
}

/// What identifies a message in flight (the same for every event it causes).
type Key = (u64, u32, NodeId, NodeId, u32, u16);

fn key(event: &FlowEvent) -> Key {
    (event.run, event.iteration, event.src, event.dst, event.tag, event.step)
}

/// Joins `events` into messages, in the order of their sends.
///
/// Routes are deterministic and links keep order, so the n-th time a message with a
/// given identity (run, iteration, source, destination, tag, step) reaches a node is
/// the n-th time it left the node before it; events are paired that way, so the join
/// does not rely on clocks agreeing across nodes. A message whose later events are
/// missing ends early (`deliver` is `None`).
pub fn messages(events: &[FlowEvent]) -> Vec<Message> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| events[i].at_ns);
    // Arrivals (forwards and deliveries) waiting to be paired, per node and identity.
    let mut arrivals: HashMap<(NodeId, Key), VecDeque<usize>> = HashMap::new();
    for &i in &order {
        if events[i].kind != FlowKind::Send {
            arrivals.entry((events[i].node, key(&events[i]))).or_default().push_back(i);
        }
    }
    let mut out = Vec::new();
    for &send in order.iter().filter(|&&i| events[i].kind == FlowKind::Send) {
        let first = &events[send];
        let identity = key(first);
        let mut message = Message {
            src: first.src,
            dst: first.dst,
            tag: first.tag,
            step: first.step,
            bytes: first.bytes,
            send,
            deliver: None,
            hops: Vec::new(),
        };
        let mut at = send;
        loop {
            let here = &events[at];
            // A message to oneself is delivered where it was sent, over no link.
            let next = here.next.unwrap_or(here.node);
            let Some(arrival) = arrivals.get_mut(&(next, identity)).and_then(VecDeque::pop_front) else { break };
            if next != here.node {
                message.hops.push(Hop {
                    from: here.node,
                    to: next,
                    depart_ns: here.at_ns,
                    arrive_ns: events[arrival].at_ns,
                    depart: at,
                    arrive: arrival,
                });
            }
            if events[arrival].kind == FlowKind::Deliver {
                message.deliver = Some(arrival);
                break;
            }
            at = arrival;
        }
        out.push(message);
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::tools::model::{self, Prediction};

    use topocomm_proto::spec::{Algorithm, Collective, LinkModel, Ports, Routing, RunSpec};
    use topocomm_proto::{Topology, TopologyKind};

    use super::*;

    /// The cost model's events of `collective` (`algorithm`) on `topology`.
    pub(crate) fn model_run(
        collective: Collective,
        algorithm: Algorithm,
        kind: TopologyKind,
        p: usize,
        size: u64,
        routing: Routing,
    ) -> (Topology, Prediction) {
        let topology = Topology::new(kind, p, None).unwrap();
        let links =
            LinkModel { ts_ns: 200_000, th_ns: 20_000, tw_ps: 10_000, routing, packet_bytes: 1024, ports: Ports::All };
        let spec = RunSpec { size_bytes: size, emulation: Some(links), ..RunSpec::new(collective, algorithm) };
        let prediction = model::predict(&spec, &topology, links).unwrap();
        (topology, prediction)
    }

    #[test]
    fn a_ring_broadcast_joins_into_one_message_per_link() {
        let (_, prediction) =
            model_run(Collective::Broadcast, Algorithm::Ring, TopologyKind::Ring, 8, 1024, Routing::Sf);
        let messages = messages(&prediction.events);
        assert_eq!(messages.len(), 7, "{messages:#?}");
        for m in &messages {
            assert!(m.deliver.is_some(), "{m:?}");
            assert_eq!(m.hops.len(), 1, "the ring broadcast only talks to neighbours: {m:?}");
            assert!(m.hops[0].arrive_ns > m.hops[0].depart_ns);
        }
        // Steps 1..=4: two messages leave node 0 at step 1, the last one lands in step 4.
        assert_eq!(messages.iter().map(|m| m.step).max(), Some(4));
        assert_eq!(messages.iter().filter(|m| m.step == 1).count(), 2);
    }

    #[test]
    fn forwarded_messages_keep_every_hop() {
        // Linear broadcast on a ring: the root sends to each node over the shorter way.
        let (topology, prediction) =
            model_run(Collective::Broadcast, Algorithm::Linear, TopologyKind::Ring, 8, 512, Routing::Sf);
        let messages = messages(&prediction.events);
        assert_eq!(messages.len(), 7);
        for m in &messages {
            let route = topology.route(m.src, m.dst);
            let walked: Vec<NodeId> = std::iter::once(m.src).chain(m.hops.iter().map(|h| h.to)).collect();
            assert_eq!(walked, route, "{m:?}");
            for pair in m.hops.windows(2) {
                assert_eq!(pair[0].arrive, pair[1].depart);
                assert!(pair[0].arrive_ns <= pair[1].arrive_ns);
            }
        }
        assert!(messages.iter().any(|m| m.hops.len() == 4));
    }
}
