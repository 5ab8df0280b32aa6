//! The link physics both the emulated links and the simulator obey, as pure functions of
//! integer nanoseconds: how long a frame occupies a link (t_s at its source, t_h per hop,
//! t_w per byte, one transfer at a time), when a frame's head may go on under
//! cut-through, how a message is cut into packets, and how a one-port node's single
//! output and input ports serialise its frames ([`Ports`]). Hockney's model as [GGKK 4]
//! states it; [`LinkModel`] holds the numbers.

use topocomm_proto::Topology;
use topocomm_proto::frame::{FrameHeader, SYSTEM_TAG_BASE};
use topocomm_proto::spec::{LinkModel, Ports};
use topocomm_proto::topology::Flow;

use crate::comm::payload::Payload;

/// When an emulated link, free from `free_ns`, has carried the frame `header` heads (with
/// `payload_len` bytes, ready to go at `ready_ns`):
///
/// * a frame (a message, or one packet of it) occupies the link for t_w · bytes, plus
///   t_h on a message's first packet, plus t_s when its source sends it; it starts when
///   it is ready or when the link frees up, whichever is later (one transfer at a time);
/// * cut-through without packets: a message an intermediate node passes on had its head
///   here t_w · m before its tail, so it leaves t_h after the tail arrived — unless the
///   link is busy, in which case the head waits and the whole message with it.
pub fn link_free_ns(model: &LinkModel, header: &FrameHeader, payload_len: usize, ready_ns: u64, free_ns: u64) -> u64 {
    free_ns.max(head_ready_ns(model, header, payload_len, ready_ns)) + occupancy_ns(model, header, payload_len)
}

/// How long the frame `header` heads (`payload_len` bytes) occupies a link: t_w · bytes,
/// plus t_h on a message's first packet, plus t_s when its source sends it.
pub fn occupancy_ns(model: &LinkModel, header: &FrameHeader, payload_len: usize) -> u64 {
    let mut busy = model.transfer_ns(payload_len);
    if header.packet == 0 {
        busy += model.th_ns;
        if header.hops == 0 {
            busy += model.ts_ns;
        }
    }
    busy
}

/// When the link a frame is to cross may take it, free itself from `link_free_ns` and
/// the sending node's output port free from `port_free_ns`: under one-port the node
/// sends one frame at a time over all its links, so the later of the two; under
/// all-port every link carries its own, so the link's time alone. Its result is the
/// `free_ns` of [`link_free_ns`], whose answer then frees both the link and the port.
pub fn sender_free_ns(ports: Ports, link_free_ns: u64, port_free_ns: u64) -> u64 {
    match ports {
        Ports::One => link_free_ns.max(port_free_ns),
        Ports::All => link_free_ns,
    }
}

/// When a frame whose tail reaches a node at `arrival_ns`, after occupying its link for
/// `occupancy_ns` ([`occupancy_ns`]), is in, the node's input port free from
/// `port_free_ns`: under one-port the node receives one frame at a time, whichever link
/// it comes over, so a frame that would overlap the one before is received after it,
/// for its own occupancy; under all-port it is in when it arrives. The answer frees the
/// input port.
pub fn received_ns(ports: Ports, arrival_ns: u64, occupancy_ns: u64, port_free_ns: u64) -> u64 {
    match ports {
        Ports::One => arrival_ns.max(port_free_ns.saturating_add(occupancy_ns)),
        Ports::All => arrival_ns,
    }
}

/// The step of a message a node sends or takes through a port whose last message was of
/// step `port_step`: under one-port the port carries one after the other, so a message
/// comes at least one step after the last through the same port (a root's sends to p - 1
/// children are p - 1 steps, as the textbook counts them); under all-port its own
/// `step`.
pub fn port_step(ports: Ports, step: u16, port_step: u16) -> u16 {
    match ports {
        Ports::One => step.max(port_step.saturating_add(1)),
        Ports::All => step,
    }
}

/// Where links differ by class (`class_models`, by class id), the model of the link a
/// message of `flow` leaves `at` on, towards its destination: that link's t_h and t_w,
/// and the start-up t_s of the slowest-starting class the rest of the flow's route
/// crosses, paid once at the source as [GGKK 4] pays it. So a core's message to another
/// machine starts up as the machine's network port does, and one inside the machine as
/// its memory does. Walks the route hop by hop: no allocation. `at != flow.dst`.
pub fn first_link_model(topology: &Topology, class_models: &[LinkModel], at: usize, flow: Flow) -> LinkModel {
    let model_of = |a: usize, b: usize| class_models[topology.link_class(a, b).expect("a route follows links")];
    let first = model_of(at, topology.next_hop(at, flow));
    let (mut here, mut ts_ns) = (at, first.ts_ns);
    while here != flow.dst {
        let next = topology.next_hop(here, flow);
        ts_ns = ts_ns.max(model_of(here, next).ts_ns);
        here = next;
    }
    LinkModel { ts_ns, ..first }
}

/// When the head of the frame `header` heads (`payload_len` bytes, ready to go at
/// `ready_ns`: its tail is here then) may start on its next link: at once, but under
/// cut-through without packets a message an intermediate node passes on had its head
/// here t_w · m before its tail.
pub fn head_ready_ns(model: &LinkModel, header: &FrameHeader, payload_len: usize, ready_ns: u64) -> u64 {
    if model.cuts_through_whole() && header.hops > 0 {
        ready_ns.saturating_sub(model.transfer_ns(payload_len))
    } else {
        ready_ns
    }
}

/// When a frame whose schedule lets it go at `due_ns` is ready to go, the software having
/// got to it at `now_ns`: software time up to `slack_ns` (t_s at the source, t_h at a hop:
/// the costs that stand for it in the model) hides inside the emulated time; beyond that
/// it delays the frame. In the simulator software takes no time, so this is `due_ns`
/// whenever the node acts at the instant its schedule allows.
pub fn ready_after(due_ns: u64, now_ns: u64, slack_ns: u64) -> u64 {
    due_ns.max(now_ns.saturating_sub(slack_ns))
}

/// Under cut-through with packets (`model`), the packets an algorithm message leaves in
/// (each hop passes them on as they arrive), in order; `Err` gives the payload back when
/// the message leaves whole (no model, no packets, or a runtime frame).
pub fn split_into_packets(
    model: Option<LinkModel>,
    header: FrameHeader,
    payload: Payload,
) -> Result<Vec<(FrameHeader, Payload)>, Payload> {
    let Some(model) = model.filter(|model| model.packetized() && header.tag < SYSTEM_TAG_BASE) else {
        return Err(payload);
    };
    let payload = payload.into_bytes();
    let packet = model.packet_len(payload.len());
    let count = payload.len().div_ceil(packet).max(1);
    Ok((0..count)
        .map(|index| {
            let part = payload.slice((index * packet).min(payload.len())..((index + 1) * packet).min(payload.len()));
            (FrameHeader { packet: index as u32, last: index + 1 == count, ..header }, Payload::One(part))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use topocomm_proto::spec::Routing;

    fn header(hops: u16, packet: u32) -> FrameHeader {
        FrameHeader { run: 0, iteration: 0, src: 0, dst: 1, tag: 0, hops, step: 1, packet, last: true, due_ns: 0 }
    }

    /// A send is t_s + t_h + t_w m; one port serialises a node's sends over any link and
    /// its receives from any link; all-port leaves each link to itself.
    #[test]
    fn one_port_serialises_sends_and_receives_and_all_port_does_not() {
        let model =
            LinkModel { ts_ns: 100, th_ns: 10, tw_ps: 2_000, routing: Routing::Sf, packet_bytes: 0, ports: Ports::One };
        let busy = occupancy_ns(&model, &header(0, 0), 50);
        assert_eq!(busy, 100 + 10 + 100);
        assert_eq!(occupancy_ns(&model, &header(1, 0), 50), 10 + 100, "no t_s at a hop");
        assert_eq!(occupancy_ns(&model, &header(0, 1), 50), 100, "a later packet: t_w only");
        // Link free at 0, port busy until 500: the send starts at 500.
        let free = sender_free_ns(Ports::One, 0, 500);
        assert_eq!(link_free_ns(&model, &header(0, 0), 50, 0, free), 500 + busy);
        assert_eq!(sender_free_ns(Ports::All, 0, 500), 0);
        assert_eq!(sender_free_ns(Ports::One, 700, 500), 700);
        // Arriving at 300 after 210 of occupancy, the input port busy until 200: in at 410.
        assert_eq!(received_ns(Ports::One, 300, busy, 200), 410);
        assert_eq!(received_ns(Ports::One, 300, busy, 50), 300, "no overlap, no wait");
        assert_eq!(received_ns(Ports::All, 300, busy, 200), 300);
        assert_eq!(port_step(Ports::One, 1, 3), 4);
        assert_eq!(port_step(Ports::One, 6, 3), 6);
        assert_eq!(port_step(Ports::All, 1, 3), 1);
    }
}
