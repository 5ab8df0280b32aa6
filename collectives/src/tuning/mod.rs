//! `--algorithm auto`'s choice as data: an ordered list of rules (collective, topologies,
//! nodes, sizes, where needed the node's total bytes or the cost model's verdict →
//! algorithm), first match wins, else the topology's default; and the leaner algorithm a
//! run turns to where the pick does not fit in memory. Built in: `default.json`, the
//! crossings measured on a local cluster; `--tuning FILE` (or `TOPOCOMM_TUNING`) reads
//! another, such as the one `topocomm tune` writes. MPICH keeps its collective
//! selection in JSON files and Open MPI's tuned component reads a rules file: the same
//! idea, so a remeasured crossing changes a data file, never the contract with the nodes.

use std::fmt;
use std::path::{Path, PathBuf};

use bytesize::ByteSize;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use topocomm_proto::TopologyKind;
use topocomm_proto::catalogue;
use topocomm_proto::spec::{Algorithm, Collective, RunSpec};

use footprint::Footprint;

/// The one version of the file's layout this program reads.
pub const SCHEMA_VERSION: u32 = 1;

/// The built-in table.
pub const DEFAULT_JSON: &str = include_str!("default.json");

/// Where the built-in table lives in the source, for `topocomm list`.
pub const DEFAULT_SOURCE: &str = "the built-in table (collectives/src/tuning/default.json)";

pub mod footprint;

/// What `auto` knows of the run it picks for.
#[derive(Clone, Copy)]
pub enum Known<'a> {
    /// The topology's kind and its nodes: rules that ask the model do not apply.
    Shape(TopologyKind, usize),
    /// The kind and nodes, and the model of the run itself: its time in nanoseconds by
    /// an algorithm (the simulator over the run's network, classes and physics; `None`
    /// where the algorithm does not run there). The coordinator's `tools::model` makes it.
    Modelled(TopologyKind, usize, &'a dyn Fn(Algorithm) -> Option<u64>),
}

impl fmt::Debug for Known<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Known::Shape(kind, p) => write!(f, "Shape({kind}, {p})"),
            Known::Modelled(kind, p, _) => write!(f, "Modelled({kind}, {p})"),
        }
    }
}

impl Known<'_> {
    fn kind(&self) -> TopologyKind {
        match self {
            Known::Shape(kind, _) | Known::Modelled(kind, _, _) => *kind,
        }
    }

    fn p(&self) -> usize {
        match self {
            Known::Shape(_, p) | Known::Modelled(_, p, _) => *p,
        }
    }

    /// The model's time of the run by `algorithm`, where a model is known.
    fn model_time_ns(&self, algorithm: Algorithm) -> Option<u64> {
        match self {
            Known::Shape(..) => None,
            Known::Modelled(_, _, time_ns) => time_ns(algorithm),
        }
    }
}

/// The rules `auto` picks by, the leaner algorithms, and the memory a run needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tuning {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// What the file is, where it was measured.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub about: String,
    /// In order: the first that matches a run picks its algorithm.
    pub rules: Vec<Rule>,
    /// Where `auto`'s pick does not fit in the nodes' memory: what to run instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaner: Vec<Leaner>,
    /// What a node of a run needs at its peak (a file without it: the built-in factors).
    #[serde(default)]
    pub footprint: Footprint,
    /// The file read, `None` for the built-in table.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// One rule: when it matches a run, `auto` runs `algorithm`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub collective: Collective,
    pub algorithm: Algorithm,
    /// The topologies it applies to; empty: every one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topologies: Vec<TopologyKind>,
    /// Only where the topology's default is this algorithm (the one the rule replaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<Algorithm>,
    /// Node counts, inclusive.
    #[serde(default, skip_serializing_if = "Bounds::is_open")]
    pub nodes: Bounds<u64>,
    /// Bytes per node (the run's `--size`), inclusive.
    #[serde(default, skip_serializing_if = "Bounds::is_open")]
    pub size: Bounds<Bytes>,
    /// A node's bytes p × size, inclusive.
    #[serde(default, skip_serializing_if = "Bounds::is_open")]
    pub node_bytes: Bounds<Bytes>,
    /// Only where the cost model says halving-doubling all-reduce beats recursive
    /// doubling, with a start-up worth this many bytes ([`halving_doubling_pays`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_model: Option<CostModel>,
    /// Only where the model of the run itself (the simulator, over the run's network, its
    /// classes of links and their physics: [`Known::Modelled`]) finishes `algorithm`
    /// before the topology's default, so the rule never picks what the model says is
    /// slower; never where the run's physics are unknown (raw links, or only a shape known).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ahead_in_the_model: bool,
    /// With `ahead_in_the_model`: more algorithms judged beside `algorithm`, the one the
    /// model finishes first running (ties to the earlier named).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Algorithm>,
    /// The measurement behind the rule.
    pub why: String,
}

/// The cost model's halving-doubling predicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostModel {
    /// t_s / t_w: what one message's start-up costs, in the bytes a node could move meanwhile.
    pub startup_bytes: Bytes,
}

/// Where `auto`'s pick `instead_of` does not fit, run `algorithm`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leaner {
    pub collective: Collective,
    pub instead_of: Algorithm,
    pub algorithm: Algorithm,
    pub why: String,
}

/// An inclusive range, either end open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bounds<T> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<T>,
}

/// A byte count, written `"64 KiB"` (or a bare number of bytes) in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    /// Exactly: `64 KiB` where a binary unit divides it, else `65535 B`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        match units.iter().find(|(unit, _)| self.0 >= *unit && self.0.is_multiple_of(*unit)) {
            Some((unit, name)) => write!(f, "{} {name}", self.0 / unit),
            None => write!(f, "{} B", self.0),
        }
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(u64),
            Text(String),
        }
        match Written::deserialize(deserializer)? {
            Written::Number(bytes) => Ok(Bytes(bytes)),
            Written::Text(text) => text
                .trim()
                .parse::<ByteSize>()
                .map(|size| Bytes(size.as_u64()))
                .map_err(|_| serde::de::Error::custom("expected a size like \"64 KiB\" or 4096")),
        }
    }
}

impl<T: Limit> Bounds<T> {
    /// No end given: every value.
    pub fn is_open(&self) -> bool {
        self.min.is_none() && self.max.is_none()
    }

    pub fn contains(&self, value: T) -> bool {
        self.min.is_none_or(|min| value >= min) && self.max.is_none_or(|max| value <= max)
    }

    /// Whether no value is in it.
    fn is_empty(&self) -> bool {
        matches!((self.min, self.max), (Some(min), Some(max)) if min > max)
    }

    /// Whether every value of `other` is in this one.
    fn covers(&self, other: &Bounds<T>) -> bool {
        let low = match (self.min, other.min) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(mine), Some(theirs)) => mine <= theirs,
        };
        let high = match (self.max, other.max) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(mine), Some(theirs)) => mine >= theirs,
        };
        low && high
    }

    /// Whether some value is in both.
    fn meets(&self, other: &Bounds<T>) -> bool {
        let above = |min: Option<T>, max: Option<T>| matches!((min, max), (Some(min), Some(max)) if min > max);
        !above(self.min, other.max) && !above(other.min, self.max)
    }
}

/// A bound's value, and how an inclusive maximum reads better as an exclusive one.
pub trait Limit: Copy + PartialOrd + fmt::Display {
    /// The least value above `self`, where it reads better than `self` (`512 KiB` for
    /// 524287 B): the maximum is then written "under" it.
    fn under(&self) -> Option<String> {
        None
    }
}

impl Limit for u64 {}

impl Limit for Bytes {
    fn under(&self) -> Option<String> {
        let (this, next) = (self.to_string(), Bytes(self.0.saturating_add(1)).to_string());
        (this.ends_with(" B") && !next.ends_with(" B")).then_some(next)
    }
}

impl<T: Limit> fmt::Display for Bounds<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max.map(|max| (max, max.under()))) {
            (None, None) => f.write_str("any"),
            (Some(min), None) => write!(f, "≥ {min}"),
            (None, Some((_, Some(under)))) => write!(f, "under {under}"),
            (None, Some((max, None))) => write!(f, "≤ {max}"),
            (Some(min), Some((max, _))) if min == max => write!(f, "{min}"),
            (Some(min), Some((_, Some(under)))) => write!(f, "{min} to under {under}"),
            (Some(min), Some((max, None))) => write!(f, "{min} - {max}"),
        }
    }
}

/// Why a tuning file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TuningError {
    /// Where the JSON is wrong, quoting none of it ([`crate::files::json_error`]).
    #[error("not a tuning file: {0}")]
    Json(String),
    #[error("schema_version {found} is not one this topocomm reads (it reads {SCHEMA_VERSION})")]
    Schema { found: u32 },
    #[error("rule {rule}: {error}")]
    NoSuchAlgorithm { rule: String, error: catalogue::NoSuchAlgorithm },
    #[error("rule {rule}: `auto` resolves to an algorithm; name one")]
    PicksAuto { rule: String },
    #[error("rule {rule}: {what} {bounds} is empty (its min is above its max)")]
    Empty { rule: String, what: &'static str, bounds: String },
    #[error(
        "rule {rule}: the cost model's predicate is halving-doubling all-reduce's, and this rule picks {algorithm}"
    )]
    CostModelElsewhere { rule: String, algorithm: String },
    #[error("rule {rule}: alternatives are judged by the model; say \"ahead_in_the_model\": true")]
    AlternativesUnjudged { rule: String },
    #[error("rule {rule} can never apply: rule {by}, ahead of it, matches every run it names")]
    Shadowed { rule: usize, by: usize },
    #[error(
        "rules {first} and {second} overlap: both name {collective} on the same topologies and nodes for sizes in both {a} and {b}; give each size to one rule"
    )]
    Overlap { first: usize, second: usize, collective: Collective, a: String, b: String },
    #[error("leaner {collective}: {instead_of} has two leaner algorithms")]
    TwoLeaner { collective: Collective, instead_of: Algorithm },
}

impl From<serde_json::Error> for TuningError {
    fn from(error: serde_json::Error) -> Self {
        TuningError::Json(crate::files::json_error(&error))
    }
}

/// The most bytes a tuning file may have (the built-in table has about 6 KiB).
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// Why a tuning file could not be used: unreadable, or refused for what it says.
#[derive(Debug, thiserror::Error)]
pub enum TuningFileError {
    #[error(transparent)]
    Read(#[from] crate::files::FileError),
    #[error("the tuning file {file}: {error}")]
    Refused { file: String, error: TuningError },
}

impl Tuning {
    /// The built-in table (checked by the tests, so it always loads).
    pub fn built_in() -> Self {
        Tuning::parse(DEFAULT_JSON).expect("the built-in tuning table is valid")
    }

    /// Reads and checks a tuning file.
    pub fn read(path: &Path) -> Result<Self, TuningFileError> {
        let file = path.display().to_string();
        let text = crate::files::read_text(path, "tuning file", MAX_FILE_BYTES)?;
        let tuning = Tuning::parse(&text).map_err(|error| TuningFileError::Refused { file, error })?;
        Ok(Tuning { source: Some(path.to_owned()), ..tuning })
    }

    /// Parses and checks a tuning table: its schema version first, then its fields (none
    /// unknown), then what the fields say ([`Tuning::check`]).
    pub fn parse(text: &str) -> Result<Self, TuningError> {
        #[derive(Deserialize)]
        struct Versioned {
            schema_version: u32,
        }
        let Versioned { schema_version } = serde_json::from_str(text)?;
        if schema_version != SCHEMA_VERSION {
            return Err(TuningError::Schema { found: schema_version });
        }
        let tuning: Tuning = serde_json::from_str(text)?;
        tuning.check()?;
        Ok(tuning)
    }

    /// The table as a file, pretty-printed.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a tuning table serializes") + "\n"
    }

    /// Where the table came from, as `topocomm list` says it.
    pub fn source_name(&self) -> String {
        match &self.source {
            Some(path) => path.display().to_string(),
            None => DEFAULT_SOURCE.to_owned(),
        }
    }

    /// Refuses an algorithm a collective does not have, an empty range, the cost model on
    /// another pair, a rule that can never apply, two rules of one scope whose sizes
    /// overlap, and two leaner algorithms for one pick.
    pub fn check(&self) -> Result<(), TuningError> {
        for (index, rule) in self.rules.iter().enumerate() {
            let name = || format!("{} ({} → {})", index + 1, rule.collective, rule.algorithm);
            if !rule.alternatives.is_empty() && !rule.ahead_in_the_model {
                return Err(TuningError::AlternativesUnjudged { rule: name() });
            }
            for algorithm in
                std::iter::once(rule.algorithm).chain(rule.replaces).chain(rule.alternatives.iter().copied())
            {
                if algorithm == Algorithm::Auto {
                    return Err(TuningError::PicksAuto { rule: name() });
                }
                catalogue::check(rule.collective, algorithm)
                    .map_err(|error| TuningError::NoSuchAlgorithm { rule: name(), error })?;
            }
            let empty = |what, bounds: String| TuningError::Empty { rule: name(), what, bounds };
            if rule.nodes.is_empty() {
                return Err(empty("nodes", rule.nodes.to_string()));
            }
            if rule.size.is_empty() {
                return Err(empty("size", rule.size.to_string()));
            }
            if rule.node_bytes.is_empty() {
                return Err(empty("node_bytes", rule.node_bytes.to_string()));
            }
            if rule.cost_model.is_some()
                && (rule.collective, rule.algorithm) != (Collective::Allreduce, Algorithm::HalvingDoubling)
            {
                return Err(TuningError::CostModelElsewhere { rule: name(), algorithm: rule.algorithm.to_string() });
            }
            for (earlier, before) in self.rules[..index].iter().enumerate() {
                if before.covers(rule) {
                    return Err(TuningError::Shadowed { rule: index + 1, by: earlier + 1 });
                }
                if before.same_scope(rule) && before.size.meets(&rule.size) {
                    return Err(TuningError::Overlap {
                        first: earlier + 1,
                        second: index + 1,
                        collective: rule.collective,
                        a: before.size.to_string(),
                        b: rule.size.to_string(),
                    });
                }
            }
        }
        for (index, leaner) in self.leaner.iter().enumerate() {
            let name = format!("leaner {}", index + 1);
            for algorithm in [leaner.instead_of, leaner.algorithm] {
                catalogue::check(leaner.collective, algorithm)
                    .map_err(|error| TuningError::NoSuchAlgorithm { rule: name.clone(), error })?;
            }
            let twice = self.leaner[..index]
                .iter()
                .any(|other| (other.collective, other.instead_of) == (leaner.collective, leaner.instead_of));
            if twice {
                return Err(TuningError::TwoLeaner { collective: leaner.collective, instead_of: leaner.instead_of });
            }
        }
        Ok(())
    }

    /// The rule that picks for `collective` on p nodes of `topology` with `size_bytes`
    /// per node: the first that matches (rules that ask the model never do: no model).
    pub fn rule_for(&self, collective: Collective, topology: TopologyKind, p: usize, size_bytes: u64) -> Option<&Rule> {
        self.rule_judged(collective, topology, p, size_bytes, &mut |_| None).map(|(rule, _)| rule)
    }

    /// The first rule that matches and its pick; a rule that asks the model matches only
    /// where `fastest` names one of its algorithms ([`Rule::judged`]) as ahead of the
    /// default.
    fn rule_judged(
        &self,
        collective: Collective,
        topology: TopologyKind,
        p: usize,
        size_bytes: u64,
        fastest: &mut dyn FnMut(&[Algorithm]) -> Option<Algorithm>,
    ) -> Option<(&Rule, Algorithm)> {
        let default = catalogue::default_algorithm(collective, topology);
        self.rules.iter().filter(|rule| rule.matches(collective, topology, default, p, size_bytes)).find_map(|rule| {
            match rule.ahead_in_the_model {
                false => Some((rule, rule.algorithm)),
                true => fastest(&rule.judged()).map(|winner| (rule, winner)),
            }
        })
    }

    /// What `auto` runs: the first matching rule's algorithm, else the topology's default.
    pub fn auto(&self, collective: Collective, topology: TopologyKind, p: usize, size_bytes: u64) -> Algorithm {
        self.auto_for(collective, Known::Shape(topology, p), size_bytes)
    }

    /// [`Tuning::auto`] for `spec` on what is `known` of its run: a rule that asks the
    /// model is judged by simulating its algorithm and the default (once) on the network.
    fn auto_for(&self, collective: Collective, known: Known<'_>, size_bytes: u64) -> Algorithm {
        let default = catalogue::default_algorithm(collective, known.kind());
        let mut fastest = |candidates: &[Algorithm]| {
            let default_ns = known.model_time_ns(default)?;
            let (ns, winner) = candidates
                .iter()
                .filter_map(|&algorithm| Some((known.model_time_ns(algorithm)?, algorithm)))
                .min_by_key(|&(ns, _)| ns)?;
            (ns < default_ns).then_some(winner)
        };
        self.rule_judged(collective, known.kind(), known.p(), size_bytes, &mut fastest)
            .map_or(default, |(_, picked)| picked)
    }

    /// The algorithm a run uses: `auto` resolved, anything else as named.
    pub fn resolve(
        &self,
        collective: Collective,
        algorithm: Algorithm,
        topology: TopologyKind,
        p: usize,
        size_bytes: u64,
    ) -> Algorithm {
        match algorithm {
            Algorithm::Auto => self.auto(collective, topology, p, size_bytes),
            named => named,
        }
    }

    /// The algorithm `spec` runs with on what is `known` of its run: `auto` resolved
    /// (judging the rules that ask the model where the network and its physics are
    /// known), anything else as named.
    pub fn resolve_known(&self, spec: &RunSpec, known: Known<'_>) -> Algorithm {
        match spec.algorithm {
            Algorithm::Auto => self.auto_for(spec.collective, known, spec.size_bytes),
            named => named,
        }
    }

    /// The algorithm `auto` turns to where `picked` would need more memory than the
    /// nodes have: one of the same collective that holds less.
    pub fn leaner(&self, collective: Collective, picked: Algorithm) -> Option<Algorithm> {
        self.leaner
            .iter()
            .find(|leaner| leaner.collective == collective && leaner.instead_of == picked)
            .map(|leaner| leaner.algorithm)
    }

    /// `spec` with `auto` resolved and held to `check` (the memory its nodes have):
    /// `auto`'s pick when it passes, else its [`Tuning::leaner`] alternative when that
    /// passes, else the pick's refusal. A named algorithm is checked as named.
    pub fn resolve_checked<E>(
        &self,
        spec: &RunSpec,
        known: Known<'_>,
        check: impl Fn(&RunSpec) -> Result<(), E>,
    ) -> Result<RunSpec, E> {
        let with = |algorithm| RunSpec { algorithm, ..spec.clone() };
        let picked = with(self.resolve_known(spec, known));
        let Err(refusal) = check(&picked) else { return Ok(picked) };
        let lean = match spec.algorithm {
            Algorithm::Auto => self.leaner(spec.collective, picked.algorithm).map(with),
            _ => None,
        };
        match lean {
            Some(lean) if check(&lean).is_ok() => Ok(lean),
            _ => Err(refusal),
        }
    }
}

impl Rule {
    /// The algorithms a rule that asks the model judges: its own, then its alternatives.
    pub fn judged(&self) -> Vec<Algorithm> {
        std::iter::once(self.algorithm).chain(self.alternatives.iter().copied()).collect()
    }

    /// Whether the rule picks for this run (`default`: the topology's own algorithm).
    pub fn matches(
        &self,
        collective: Collective,
        topology: TopologyKind,
        default: Algorithm,
        p: usize,
        size_bytes: u64,
    ) -> bool {
        let p = p as u64;
        self.collective == collective
            && self.applies_on(topology, default, p)
            && self.size.contains(Bytes(size_bytes))
            && self.node_bytes.contains(Bytes(p.saturating_mul(size_bytes)))
            && self.cost_model.is_none_or(|model| halving_doubling_pays(p, size_bytes, model.startup_bytes.0))
    }

    /// Whether the rule speaks of p nodes of `topology`, whose default is `default`
    /// (whatever the size).
    pub fn applies_on(&self, topology: TopologyKind, default: Algorithm, p: u64) -> bool {
        (self.topologies.is_empty() || self.topologies.contains(&topology))
            && self.replaces.is_none_or(|replaced| replaced == default)
            && self.nodes.contains(p)
    }

    /// Whether every run `other` matches, this one matches too.
    fn covers(&self, other: &Rule) -> bool {
        let topologies = self.topologies.is_empty()
            || (!other.topologies.is_empty() && other.topologies.iter().all(|t| self.topologies.contains(t)));
        self.collective == other.collective
            && topologies
            && self.replaces.is_none_or(|replaced| other.replaces == Some(replaced))
            && self.nodes.covers(&other.nodes)
            && self.size.covers(&other.size)
            && self.node_bytes.covers(&other.node_bytes)
            && self.cost_model.is_none_or(|model| other.cost_model == Some(model))
            && (!self.ahead_in_the_model || other.ahead_in_the_model)
    }

    /// Whether the two rules name the same runs but for their sizes.
    fn same_scope(&self, other: &Rule) -> bool {
        let within = |a: &[TopologyKind], b: &[TopologyKind]| a.iter().all(|t| b.contains(t));
        self.collective == other.collective
            && within(&self.topologies, &other.topologies)
            && within(&other.topologies, &self.topologies)
            && self.replaces == other.replaces
            && self.nodes == other.nodes
            && self.node_bytes == other.node_bytes
            && self.cost_model == other.cost_model
            && self.ahead_in_the_model == other.ahead_in_the_model
    }
}

/// Whether halving-doubling all-reduce beats recursive doubling for `size_bytes` per
/// node on p nodes, by the cost model with t_s = `startup_bytes` t_w ([Thakur 2005]):
/// recursive doubling takes log p (t_s + t_w m), halving-doubling 2 log p t_s +
/// 2 (p - 1)/p t_w m, on the power-of-two core the extra nodes fold into.
pub fn halving_doubling_pays(p: u64, size_bytes: u64, startup_bytes: u64) -> bool {
    let Some(dimension) = p.checked_ilog2() else { return false };
    let core = 1u64 << dimension;
    let steps = f64::from(dimension);
    let bytes_saved = steps - 2.0 * (core - 1) as f64 / core as f64;
    bytes_saved > 0.0 && size_bytes as f64 * bytes_saved >= startup_bytes as f64 * steps
}

#[cfg(test)]
mod tests;
