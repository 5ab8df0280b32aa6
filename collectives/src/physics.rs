//! The link physics both the emulated links and the simulator obey, as pure functions of
//! integer nanoseconds: how long a frame occupies a link (t_s at its source, t_h per hop,
//! t_w per byte, one transfer at a time), when a frame's head may go on under
//! cut-through, and how a message is cut into packets. Hockney's model as [GGKK 4]
//! states it; [`LinkModel`] holds the numbers.

use topocomm_proto::Topology;
use topocomm_proto::frame::{FrameHeader, SYSTEM_TAG_BASE};
use topocomm_proto::spec::LinkModel;

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
    let mut busy = model.transfer_ns(payload_len);
    if header.packet == 0 {
        busy += model.th_ns;
        if header.hops == 0 {
            busy += model.ts_ns;
        }
    }
    free_ns.max(head_ready_ns(model, header, payload_len, ready_ns)) + busy
}

/// Where links differ by class (`class_models`, by class id), the model of a message's
/// first link from `src` to `dst`: that link's t_h and t_w, and the start-up t_s of the
/// slowest-starting class the route crosses, paid once at the source as [GGKK 4] pays
/// it. So a core's message to another machine starts up as the machine's network port
/// does, and one inside the machine as its memory does.
pub fn first_link_model(topology: &Topology, class_models: &[LinkModel], src: usize, dst: usize) -> LinkModel {
    let route = topology.route(src, dst);
    let model_of = |a: usize, b: usize| class_models[topology.link_class(a, b).expect("a route follows links")];
    let ts_ns = route.windows(2).map(|hop| model_of(hop[0], hop[1]).ts_ns).max().unwrap_or(0);
    LinkModel { ts_ns, ..model_of(route[0], route[1]) }
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
