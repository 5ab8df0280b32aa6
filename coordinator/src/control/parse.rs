//! Parsers of the values users type: names of topologies, collectives and the like,
//! sizes, times, timeouts and shapes. Each says why a text is refused.

use std::time::Duration;

use bytesize::ByteSize;
use topocomm_proto::TopologyKind;
use topocomm_proto::network::placement::{Placement, PlacementError};
use topocomm_proto::network::routes::UnknownRoutes;
use topocomm_proto::spec::{Algorithm, ClassPhysics, Collective, Dtype, MAX_TIMEOUT, Ports, ReduceOp, Routing};
use topocomm_proto::topology::Routes;

/// Why a typed value was refused; the message is what the user reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("unknown {what} {text:?}; choose one of: {choices}")]
    UnknownName { what: &'static str, text: String, choices: String },
    #[error("{text:?} is not a time like 200us, 10ns or 0.5ns (units: ps, ns, us, ms, s)")]
    TimeUnit { text: String },
    #[error("{text:?} does not start with a number")]
    NotANumber { text: String },
    #[error("{text:?} is not a size like 8B, 4096, 64KiB or 1MiB ({reason})")]
    Size { text: String, reason: String },
    #[error("{text:?} is not a duration like 30s ({reason})")]
    Duration { text: String, reason: String },
    #[error("{text:?} is under the minimum of 1ms: every wait of an iteration ends by the timeout")]
    TimeoutUnderOneMs { text: String },
    #[error("{text:?} exceeds the limit of one day (24h) per iteration")]
    TimeoutOverOneDay { text: String },
    #[error("unknown algorithm {text:?}; choose all, or some of: {choices}")]
    UnknownAlgorithms { text: String, choices: String },
    #[error("{text:?}: a range runs from a positive size up to a larger one, e.g. 8B..8MiB")]
    SizeRange { text: String },
    #[error("{0}")]
    Routes(String),
    #[error("no sizes given")]
    NoSizes,
    #[error("{text:?} is not a list of node counts like 8..65536 (doubling) or 1024,4096 (positive whole numbers)")]
    NodeCounts { text: String },
    #[error("{text:?} is not a shape like 4x4 or 2x2x2 (positive whole numbers joined by x)")]
    Dims { text: String },
    #[error(
        "{text:?} is not a class of links like intra:ts=1us,th=50ns,tw=0.05ns (a class's name, then one or \
         more of ts, th, tw, each a time)"
    )]
    Class { text: String },
}

fn parse_named<T: std::str::FromStr + strum::VariantNames>(what: &'static str, text: &str) -> Result<T, ParseError> {
    text.parse().map_err(|_| ParseError::UnknownName { what, text: text.to_owned(), choices: T::VARIANTS.join(", ") })
}

pub fn parse_topology(text: &str) -> Result<TopologyKind, ParseError> {
    parse_named("topology", text)
}

/// `linear`, `round-robin` or `random[:SEED]`, refused in one line otherwise.
pub fn parse_placement(text: &str) -> Result<Placement, PlacementError> {
    text.parse()
}

pub fn parse_collective(text: &str) -> Result<Collective, ParseError> {
    parse_named("collective", text)
}

pub fn parse_algorithm(text: &str) -> Result<Algorithm, ParseError> {
    parse_named("algorithm", text)
}

pub fn parse_routing(text: &str) -> Result<Routing, ParseError> {
    parse_named("routing", text)
}

/// `--routes`: a route policy's name ([`Routes`]), refused with the names there are.
pub fn parse_routes(text: &str) -> Result<Routes, ParseError> {
    text.parse().map_err(|error: UnknownRoutes| ParseError::Routes(error.to_string()))
}

pub fn parse_ports(text: &str) -> Result<Ports, ParseError> {
    parse_named("port model", text)
}

pub fn parse_dtype(text: &str) -> Result<Dtype, ParseError> {
    parse_named("dtype", text)
}

pub fn parse_op(text: &str) -> Result<ReduceOp, ParseError> {
    parse_named("op", text)
}

/// Parses a time such as `200us`, `20µs`, `10ns`, `0.5ns`, `1.5ms` into picoseconds.
pub fn parse_time(text: &str) -> Result<u64, ParseError> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "ps" => 1.0,
        "ns" => 1e3,
        "us" | "µs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        _ => return Err(ParseError::TimeUnit { text: text.to_owned() }),
    };
    let value: f64 = number.parse().map_err(|_| ParseError::NotANumber { text: text.to_owned() })?;
    Ok((value * scale).round() as u64)
}

/// Parses `--class NAME:ts=1us,th=50ns,tw=0.05ns`: a class of links and the times of
/// its own (at least one; the rest are the run's).
pub fn parse_class(text: &str) -> Result<ClassPhysics, ParseError> {
    let refused = || ParseError::Class { text: text.to_owned() };
    let (class, times) = text.split_once(':').ok_or_else(refused)?;
    let class = class.trim();
    if class.is_empty() || times.trim().is_empty() {
        return Err(refused());
    }
    let mut physics = ClassPhysics::named(class);
    for part in times.split(',') {
        let (name, value) = part.split_once('=').ok_or_else(refused)?;
        let picos = parse_time(value)?;
        let slot = match name.trim() {
            "ts" => &mut physics.ts_ns,
            "th" => &mut physics.th_ns,
            "tw" => &mut physics.tw_ps,
            _ => return Err(refused()),
        };
        *slot = Some(if name.trim() == "tw" { picos } else { picos / 1000 });
    }
    Ok(physics)
}

/// Parses `64KiB`, `1MiB`, `4096`, `8B`.
pub fn parse_size(text: &str) -> Result<u64, ParseError> {
    text.trim()
        .parse::<ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|reason| ParseError::Size { text: text.to_owned(), reason: reason.to_string() })
}

/// Parses `--timeout`: a duration such as `30s` or `2min`, from 1 ms (every wait of an
/// iteration ends by it) to one day ([`MAX_TIMEOUT`], the most a run spec takes).
pub fn parse_timeout(text: &str) -> Result<Duration, ParseError> {
    let timeout = humantime::parse_duration(text)
        .map_err(|reason| ParseError::Duration { text: text.to_owned(), reason: reason.to_string() })?;
    if timeout < Duration::from_millis(1) {
        return Err(ParseError::TimeoutUnderOneMs { text: text.to_owned() });
    }
    if timeout > MAX_TIMEOUT {
        return Err(ParseError::TimeoutOverOneDay { text: text.to_owned() });
    }
    Ok(timeout)
}

/// Parses `4x4` or `2x2x2`.
pub fn parse_dims(text: &str) -> Result<Vec<usize>, ParseError> {
    text.split(['x', 'X'])
        .map(|part| part.trim().parse::<usize>().ok().filter(|&n| n > 0))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| ParseError::Dims { text: text.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_dims_parse_or_say_why_not() {
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("8B").unwrap(), 8);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("lots").unwrap_err().to_string().contains("not a size"));
        assert_eq!(parse_dims("4x2").unwrap(), vec![4, 2]);
        assert_eq!(parse_dims("2x2x2").unwrap(), vec![2, 2, 2]);
        assert!(parse_dims("4x").is_err());
        assert!(parse_dims("0x4").is_err());
    }

    #[test]
    fn times_parse_to_picoseconds() {
        assert_eq!(parse_time("200us").unwrap(), 200_000_000);
        assert_eq!(parse_time("20µs").unwrap(), 20_000_000);
        assert_eq!(parse_time("10ns").unwrap(), 10_000);
        assert_eq!(parse_time("0.5ns").unwrap(), 500);
        assert!(parse_time("10").unwrap_err().to_string().contains("units"));
        assert_eq!(
            parse_time("x.yns").unwrap_err().to_string(),
            "\"x.yns\" is not a time like 200us, 10ns or 0.5ns (units: ps, ns, us, ms, s)"
        );
    }

    #[test]
    fn timeouts_are_one_ms_to_one_day() {
        let refused = |text: &str| parse_timeout(text).unwrap_err().to_string();
        assert_eq!(parse_timeout("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_timeout("1ms").unwrap(), Duration::from_millis(1));
        assert_eq!(parse_timeout("24h").unwrap(), MAX_TIMEOUT);
        assert!(refused("0").contains("minimum of 1ms"));
        assert!(refused("999us").contains("minimum of 1ms"));
        assert!(refused("24h 1ms").contains("one day"));
        assert!(refused("200years").contains("one day"));
        assert!(refused("soon").contains("not a duration"));
    }

    #[test]
    fn a_class_of_links_names_itself_and_some_of_its_times() {
        let intra = parse_class("intra:ts=1us,th=50ns,tw=0.05ns").unwrap();
        assert_eq!(intra, ClassPhysics { name: "intra".into(), ts_ns: Some(1_000), th_ns: Some(50), tw_ps: Some(50) });
        let core = parse_class("core:tw=2ns").unwrap();
        assert_eq!(core, ClassPhysics { tw_ps: Some(2_000), ..ClassPhysics::named("core") });
        for bad in ["intra", ":ts=1us", "intra:", "intra:tx=1us", "intra:ts"] {
            let error = parse_class(bad).unwrap_err().to_string();
            assert!(error.contains("is not a class of links like intra:ts=1us"), "{bad}: {error}");
        }
        assert!(parse_class("intra:ts=fast").unwrap_err().to_string().contains("is not a time"));
    }

    #[test]
    fn unknown_names_list_the_choices() {
        let error = parse_topology("donut").unwrap_err().to_string();
        assert!(error.starts_with("unknown topology \"donut\"; choose one of: "), "{error}");
        assert!(error.contains("ring") && error.contains("hypercube"), "{error}");
    }
}
