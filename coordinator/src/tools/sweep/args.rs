//! `topocomm sweep`'s options: the collective options of `run`, with sizes and
//! algorithms as lists, and the parsers of those lists.

use std::path::PathBuf;

use clap::Args;
use topocomm_proto::spec::{Algorithm, Collective};

use crate::control::client::RemoteArgs;
use crate::control::parse::{ParseError, parse_collective, parse_size};
use crate::control::request::{DataArgs, IterationArgs, LinkArgs, ShapeArgs};
use crate::control::tuning::TuningArgs;
use crate::render::dilation::Verbosity;

/// `topocomm sweep`: the collective options of `run`, with sizes and algorithms as lists.
#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// The collective: broadcast, reduce, allgather, reduce-scatter, allreduce, scan,
    /// scatter, gather, alltoall, shift, barrier, ping-pong.
    #[arg(value_parser = parse_collective)]
    pub collective: Collective,
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Nodes of the local cluster (ignored with --coordinator, whose cluster has its own size).
    #[arg(long, short = 'n', default_value_t = 8)]
    pub nodes: usize,
    /// Algorithms: `all` (every one of the collective's), or a comma list; default the
    /// one made for the topology.
    #[arg(long, short = 'a', value_parser = parse_algorithms)]
    pub algorithm: Option<Algorithms>,
    /// Sweep an MSCCL-IR program instead of algorithms (sizes that do not cut into its
    /// chunks are left out, with the reason).
    #[arg(long, value_name = "FILE.xml", conflicts_with = "algorithm")]
    pub schedule: Option<PathBuf>,
    /// Bytes per node: `8B..8MiB` (doubling from the first) or a comma list (`1KiB,64KiB`).
    // `std::vec::Vec`, not `Vec`: clap would read `Vec<_>` as many values of u64.
    #[arg(long, default_value = "8B..1MiB", value_parser = parse_sizes)]
    pub sizes: std::vec::Vec<u64>,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub links: LinkArgs,
    #[command(flatten)]
    pub repeat: IterationArgs,
    #[command(flatten)]
    pub words: Verbosity,
    /// Also write the points as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write the sweep as JSON to FILE (`-`: to standard output, instead of the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Plot time against size, log-log, a line per algorithm, the model dashed (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Local clusters: folder for the node daemons' logs (default: a new folder for this
    /// sweep in this user's own, $XDG_RUNTIME_DIR/topocomm or /tmp/topocomm-<user>; the
    /// sweep names it).
    #[arg(long)]
    pub logs: Option<PathBuf>,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// `--algorithm` of a sweep: every algorithm of the collective, or these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Algorithms {
    All,
    Named(Vec<Algorithm>),
}

/// Parses `all` or a comma list of algorithm names.
pub fn parse_algorithms(text: &str) -> Result<Algorithms, ParseError> {
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(Algorithms::All);
    }
    text.split(',')
        .map(|name| {
            name.trim().parse::<Algorithm>().map_err(|_| ParseError::UnknownAlgorithms {
                text: name.to_owned(),
                choices: <Algorithm as strum::VariantNames>::VARIANTS.join(", "),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Algorithms::Named)
}

/// Parses `8B..8MiB` (doubling from the first while not above the last) or a comma
/// list (`1KiB,64KiB,1MiB`).
pub fn parse_sizes(text: &str) -> Result<Vec<u64>, ParseError> {
    let size = |part: &str| parse_size(part);
    if let Some((lo, hi)) = text.split_once("..") {
        let (lo, hi) = (size(lo)?, size(hi)?);
        if lo == 0 || hi < lo {
            return Err(ParseError::SizeRange { text: text.to_owned() });
        }
        let mut sizes = vec![lo];
        while let Some(next) = sizes.last().and_then(|s| s.checked_mul(2)).filter(|&s| s <= hi) {
            sizes.push(next);
        }
        return Ok(sizes);
    }
    let sizes = text.split(',').map(size).collect::<Result<Vec<_>, _>>()?;
    if sizes.is_empty() {
        return Err(ParseError::NoSizes);
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_ranges_double_and_lists_are_taken_as_given() {
        assert_eq!(parse_sizes("8B..64B").unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(parse_sizes("8B..8MiB").unwrap().len(), 21);
        assert_eq!(parse_sizes("1KiB..3KiB").unwrap(), vec![1024, 2048]);
        assert_eq!(parse_sizes("1KiB,64KiB,1MiB").unwrap(), vec![1024, 65536, 1 << 20]);
        assert_eq!(parse_sizes("4096").unwrap(), vec![4096]);
        assert!(parse_sizes("8MiB..8B").is_err());
        assert!(parse_sizes("0..8B").is_err());
        assert!(parse_sizes("8B..lots").unwrap_err().to_string().contains("not a size"));
    }

    #[test]
    fn algorithms_are_all_or_named() {
        assert_eq!(parse_algorithms("all").unwrap(), Algorithms::All);
        assert_eq!(
            parse_algorithms("ring, hypercube").unwrap(),
            Algorithms::Named(vec![Algorithm::Ring, Algorithm::Hypercube])
        );
        assert!(parse_algorithms("ring,donut").unwrap_err().to_string().contains("choose all"));
    }
}
