//! The link physics in words, as titles, tables and the lab's documents say them.

use topocomm_proto::spec::{LinkModel, Routing};

use crate::render::quantity::size_text;

/// The link physics in a few words, e.g. "SF, t_s 200 µs, t_h 20 µs, t_w 10 ns/B" (with
/// ", one-port" after the routing under the one-port model).
pub fn describe_links(links: &LinkModel) -> String {
    let routing = match links.routing {
        Routing::Sf => "SF".to_owned(),
        Routing::Ct if links.packet_bytes == 0 => "CT (whole frames)".to_owned(),
        Routing::Ct => format!("CT ({} packets)", size_text(links.packet_bytes as u64)),
    };
    format!(
        "{routing}{}, t_s {} µs, t_h {} µs, t_w {} ns/B",
        crate::render::report::one_port_words(links.ports),
        links.ts_ns as f64 / 1e3,
        links.th_ns as f64 / 1e3,
        links.tw_ps as f64 / 1e3
    )
}
