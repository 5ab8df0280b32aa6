//! topocomm's own network file, JSON (its schema: `docs/network.schema.json`):
//!
//! ```json
//! {
//!   "schema_version": 1,
//!   "name": "two switches",
//!   "endpoints": ["h0", "h1", "h2"],
//!   "switches": ["s0", "s1"],
//!   "classes": [{"name": "edge", "th": "50ns", "tw": "0.1ns"}, {"name": "trunk", "ts": "1us"}],
//!   "links": [
//!     {"a": "h0", "b": "s0", "class": "edge"}, {"a": "h1", "b": "s0", "class": "edge"},
//!     {"a": "h2", "b": "s1", "class": "edge"}, {"a": "s0", "b": "s1", "class": "trunk", "count": 2}
//!   ]
//! }
//! ```
//!
//! Links name their ends by name; `count` (default 1) gives parallel links. A class's
//! `ts` (start-up), `th` (per hop) and `tw` (per byte) are each optional (left out: the
//! run's default) and are either a number of nanoseconds (`50`, `0.1`) or a string of a
//! number and a unit, `s`, `ms`, `us` (or `µs`), `ns` or `ps` (`"1us"`, `"0.1ns"`); `tw`
//! is the time per byte. `ts` and `th` are kept in whole nanoseconds and `tw` in whole
//! picoseconds, rounded to the nearest. `switches`, `classes` and `name` may be left out.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::description::{ClassPhysics, DescribedLink, NetworkDescription};
use super::error::NetworkFileError;

/// The version of the format this topocomm reads and writes.
pub const SCHEMA_VERSION: u64 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkFile {
    schema_version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    endpoints: Vec<String>,
    #[serde(default)]
    switches: Vec<String>,
    #[serde(default)]
    classes: Vec<FileClass>,
    links: Vec<FileLink>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileClass {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ts: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    th: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tw: Option<Duration>,
}

/// A duration as the file writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum Duration {
    Nanoseconds(f64),
    Text(String),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLink {
    a: String,
    b: String,
    class: String,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    count: u32,
}

fn one() -> u32 {
    1
}

fn is_one(count: &u32) -> bool {
    *count == 1
}

/// Reads a network JSON document into a description (not yet validated: call
/// [`NetworkDescription::build`]).
pub fn parse_network_json(text: &str) -> Result<NetworkDescription, NetworkFileError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|error| NetworkFileError::Json(error.to_string()))?;
    match value.get("schema_version").and_then(serde_json::Value::as_u64) {
        Some(SCHEMA_VERSION) => {}
        Some(found) => return Err(NetworkFileError::SchemaVersion { found, supported: SCHEMA_VERSION }),
        None => return Err(NetworkFileError::Json("no `schema_version` (a whole number: 1)".to_owned())),
    }
    let file: NetworkFile = serde_json::from_value(value).map_err(|error| NetworkFileError::Json(error.to_string()))?;
    let ids: HashMap<&str, usize> =
        file.endpoints.iter().chain(&file.switches).enumerate().map(|(id, name)| (name.as_str(), id)).collect();
    let mut links = Vec::with_capacity(file.links.len());
    for (index, link) in file.links.iter().enumerate() {
        let id = |name: &str| {
            ids.get(name).copied().ok_or_else(|| NetworkFileError::UnknownVertex { index, name: name.to_owned() })
        };
        let (a, b) = (id(&link.a)?, id(&link.b)?);
        if link.count == 0 {
            return Err(NetworkFileError::Json(format!(
                "link {index} (`{}` - `{}`) has count 0: a link is at least 1",
                link.a, link.b
            )));
        }
        links.extend((0..link.count).map(|_| DescribedLink { a, b, class: link.class.clone() }));
    }
    let classes = file
        .classes
        .iter()
        .map(|class| {
            let field = |value: &Option<Duration>, field: &'static str, scale: f64| {
                value
                    .as_ref()
                    .map(|value| duration(value, scale).ok_or_else(|| bad_duration(&class.name, field, value)))
                    .transpose()
            };
            Ok(ClassPhysics {
                name: class.name.clone(),
                ts_ns: field(&class.ts, "ts", 1.0)?,
                th_ns: field(&class.th, "th", 1.0)?,
                tw_ps: field(&class.tw, "tw", 1000.0)?,
            })
        })
        .collect::<Result<Vec<_>, NetworkFileError>>()?;
    Ok(NetworkDescription { name: file.name, endpoints: file.endpoints, switches: file.switches, classes, links })
}

fn bad_duration(class: &str, field: &'static str, value: &Duration) -> NetworkFileError {
    let value = match value {
        Duration::Nanoseconds(number) => number.to_string(),
        Duration::Text(text) => text.clone(),
    };
    NetworkFileError::BadDuration { class: class.to_owned(), field, value }
}

/// A duration in nanoseconds times `scale` (1000 for picoseconds), rounded; `None` when
/// it is no duration, negative or past 64 bits.
fn duration(value: &Duration, scale: f64) -> Option<u64> {
    let nanoseconds = match value {
        Duration::Nanoseconds(number) => *number,
        Duration::Text(text) => {
            let text = text.trim();
            let (number, unit_ns) = [("ms", 1e6), ("us", 1e3), ("µs", 1e3), ("ns", 1.0), ("ps", 1e-3), ("s", 1e9)]
                .iter()
                .find_map(|&(unit, scale)| text.strip_suffix(unit).map(|number| (number, scale)))
                .unwrap_or((text, 1.0));
            number.trim().parse::<f64>().ok()? * unit_ns
        }
    };
    let scaled = (nanoseconds * scale).round();
    (scaled.is_finite() && scaled >= 0.0 && scaled < u64::MAX as f64).then_some(scaled as u64)
}

/// The description as a network JSON document (durations written in whole `ns`, `tw`
/// in `ps`; one link per entry).
pub fn to_network_json(description: &NetworkDescription) -> String {
    let name = |vertex: usize| description.vertex_name(vertex).unwrap_or("?").to_owned();
    let file = NetworkFile {
        schema_version: SCHEMA_VERSION,
        name: description.name.clone(),
        endpoints: description.endpoints.clone(),
        switches: description.switches.clone(),
        classes: description
            .classes
            .iter()
            .map(|class| FileClass {
                name: class.name.clone(),
                ts: class.ts_ns.map(|ns| Duration::Text(format!("{ns}ns"))),
                th: class.th_ns.map(|ns| Duration::Text(format!("{ns}ns"))),
                tw: class.tw_ps.map(|ps| Duration::Text(format!("{ps}ps"))),
            })
            .collect(),
        links: description
            .links
            .iter()
            .map(|link| FileLink { a: name(link.a), b: name(link.b), class: link.class.clone(), count: 1 })
            .collect(),
    };
    serde_json::to_string_pretty(&file).expect("a network file serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_numbers_of_ns_or_numbers_with_a_unit() {
        let text = |text: &str| Duration::Text(text.to_owned());
        for (value, nanoseconds) in [
            (text("1us"), 1000),
            (text("1µs"), 1000),
            (text("50ns"), 50),
            (text("2ms"), 2_000_000),
            (text("1s"), 1_000_000_000),
            (text("1500ps"), 2),
            (text(" 7 "), 7),
            (Duration::Nanoseconds(12.4), 12),
        ] {
            assert_eq!(duration(&value, 1.0), Some(nanoseconds), "{value:?}");
        }
        assert_eq!(duration(&text("0.1ns"), 1000.0), Some(100), "t_w in picoseconds");
        for bad in [text("1 furlong"), text("-1ns"), text("ns"), Duration::Nanoseconds(-0.6), text("1e30s")] {
            assert_eq!(duration(&bad, 1.0), None, "{bad:?}");
        }
    }

    #[test]
    fn names_become_ids_and_counts_parallel_links() {
        let description = parse_network_json(
            r#"{"schema_version": 1, "endpoints": ["a", "b"], "switches": ["s"],
                "classes": [{"name": "w", "tw": 5}],
                "links": [{"a": "a", "b": "s", "class": "w"}, {"a": "s", "b": "b", "class": "w", "count": 3}]}"#,
        )
        .unwrap();
        assert_eq!(description.links.len(), 4);
        assert_eq!((description.links[3].a, description.links[3].b), (2, 1));
        assert_eq!(description.classes[0].tw_ps, Some(5000));
    }

    #[test]
    fn bad_documents_get_one_line_naming_the_culprit() {
        let error = |text: &str| parse_network_json(text).unwrap_err().to_string();
        assert_eq!(
            error(r#"{"schema_version": 2, "endpoints": [], "links": []}"#),
            "network JSON: unknown schema_version 2 (this topocomm reads 1)"
        );
        assert_eq!(
            error(r#"{"schema_version": 1, "endpoints": ["a"], "links": [{"a": "a", "b": "z", "class": "w"}]}"#),
            "network JSON: link 0 names `z`, which is neither an endpoint nor a switch"
        );
        assert!(
            error(
                r#"{"schema_version": 1, "endpoints": ["a"], "classes": [{"name": "w", "th": "soon"}], "links": []}"#
            )
            .contains("class `w`: th `soon` is not a duration")
        );
        assert!(
            error(r#"{"schema_version": 1, "endpoints": ["a"], "links": [], "colour": 1}"#)
                .contains("unknown field `colour`")
        );
    }
}
