//! How an emulated run was dilated, as tables and JSON say it: the factor K (every time
//! reported is emulated time), whether `--dilation` gave it or `auto` chose it and why
//! (what the probe measured, the messages it weighed), and what the run cost in wall
//! time. `tools::dilation` fills these in; this file only holds and words them: by
//! default in one line (the factor and what set it), with `--verbose` in full (what the
//! probe measured and what each rule asks), as the JSON always has it.

use serde::Serialize;
use topocomm_proto::spec::Dilation;

use crate::render::quantity::size_text;

/// `--verbose` of the commands that dilate emulated links (`run`, `sweep`, `bench-model`).
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct Verbosity {
    /// Say in full why `--dilation auto` chose its factor: what the probe measured and
    /// what each rule asks (by default one line gives the factor and what set it; the
    /// JSON always has it all).
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

/// How a run was dilated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dilated {
    /// K: the emulated world ran K times slower than the wall clock. 1: not dilated.
    pub factor: f64,
    /// What `auto` measured and weighed; `None` when `--dilation` gave the factor.
    pub auto: Option<AutoDilation>,
    /// Wall time the run took, warm-up, wiring and reports included, in seconds.
    pub wall_s: Option<f64>,
}

impl Dilated {
    /// The factor a spec ran with, given by `--dilation`.
    pub fn given(dilation: Dilation) -> Self {
        Dilated { factor: dilation.factor(), auto: None, wall_s: None }
    }

    /// The line under a run's table: by how much, how it was chosen, and the wall time
    /// it cost (why `auto` chose it goes to the log before the run, and to the JSON).
    pub fn line(&self) -> String {
        let wall = self.wall_s.map(|s| format!("; the run took {} of wall time", seconds_text(s))).unwrap_or_default();
        let how = if self.auto.is_some() { "--dilation auto" } else { "--dilation" };
        if self.factor > 1.0 {
            format!("dilated ×{} ({how}): every time above is emulated time{wall}", factor_text(self.factor))
        } else {
            format!("not dilated ({how}){wall}")
        }
    }

    /// What `auto` chose and why, said before the run: in one line, or (`verbose`) in
    /// full.
    pub fn announcement(&self, verbose: bool) -> Option<String> {
        let auto = self.auto.as_ref()?;
        Some(format!("dilation ×{} (--dilation auto): {}", factor_text(self.factor), auto.why(verbose)))
    }
}

impl AutoDilation {
    /// Why the factor is what it is: in full (`verbose`), or what set it in a few words
    /// and where to read the rest.
    pub fn why(&self, verbose: bool) -> String {
        if verbose { self.reason.clone() } else { format!("{}; --verbose says why", self.what_set_it()) }
    }

    /// What set the factor, in a few words with the probe's figure that did.
    pub fn what_set_it(&self) -> String {
        let probe = &self.probe;
        let steps = probe.long.as_ref().unwrap_or(&probe.small);
        let needed = factor_text((self.release_needs.max(self.bytes_need) * 10.0 - 1e-9).ceil() / 10.0);
        match self.binding {
            Binding::Nothing => "the machine keeps up undilated".to_owned(),
            Binding::Release => format!(
                "set by how late this machine releases a step of {} nodes sending at once ({:.0} µs for {} per node)",
                probe.nodes,
                probe.small.release_us,
                size_text(probe.small.size_bytes)
            ),
            Binding::Bytes => format!(
                "set by how long this machine takes to move a step of {} nodes sending at once ({:.0} µs for {} per node)",
                probe.nodes,
                steps.cold_us,
                size_text(steps.size_bytes)
            ),
            Binding::Timeout => {
                format!("×{needed} would be needed, but an iteration must fit in a quarter of --timeout")
            }
            Binding::Limit => format!("×{needed} would be needed; this is the most"),
        }
    }
}

/// What `--dilation auto` measured and weighed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AutoDilation {
    /// The probe's figures.
    pub probe: ProbeFigures,
    /// The run's shortest message and its emulated time over one hop.
    pub shortest_message: Option<MessageTime>,
    /// The run's longest message and its emulated time over one hop.
    pub longest_message: Option<MessageTime>,
    /// The factor that keeps the release of a step's messages within a few per cent of
    /// their time, for the shortest and the longest message (unrounded).
    pub release_needs: f64,
    /// The factor that lets a step's messages move within half of their time, for the
    /// shortest and the longest (unrounded).
    pub bytes_need: f64,
    /// What set the factor.
    pub binding: Binding,
    /// All of it in words.
    pub reason: String,
}

/// What the probe measured: pairs of steps in which every node exchanges one message
/// with a neighbour at the same instant and then hands back what it got, undilated,
/// timed to the last node's receipt; for 8-byte messages, and for the run's longer ones
/// when it has any. Every figure is per step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeFigures {
    pub nodes: usize,
    /// Timed pairs of steps of each kind (after warm-up ones); the figures are their
    /// 80th percentile by nearest rank.
    pub iterations: u32,
    /// The steps of one 8-byte message per node.
    pub small: Steps,
    /// The steps of longer messages, when the run has any.
    pub long: Option<Steps>,
    /// Wall time the probe took, in seconds (less waiting for the cluster and wiring
    /// it, which the run would have spent anyway).
    pub wall_s: f64,
}

/// The probe's two steps of `size_bytes` per node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Steps {
    pub size_bytes: u64,
    /// A step on links emulated with zero times (sent, read and delivered at once), in
    /// µs: what moving every node's message at once costs.
    pub cold_us: f64,
    /// How long each message of the held steps lasted (as t_w m, no t_s), in µs: long
    /// enough for them to be read before they are due, as in a dilated run.
    pub hold_us: f64,
    /// A held step, less its message's time, in µs: how late the software releases
    /// every node's message at one instant and hands it on.
    pub release_us: f64,
}

impl ProbeFigures {
    /// `small`'s and `long`'s figure `of`, as an affine function of the message length,
    /// at `size_bytes` (just `small`'s without `long`).
    fn at(&self, size_bytes: u64, of: fn(&Steps) -> f64) -> f64 {
        let small = of(&self.small);
        match self.long.filter(|long| long.size_bytes > self.small.size_bytes) {
            Some(long) => {
                let per_byte = (of(&long) - small).max(0.0) / (long.size_bytes - self.small.size_bytes) as f64;
                small + per_byte * size_bytes.saturating_sub(self.small.size_bytes) as f64
            }
            None => small,
        }
    }

    /// How late a step of `size_bytes` per node is released, in µs.
    pub fn release_us(&self, size_bytes: u64) -> f64 {
        self.at(size_bytes, |steps| steps.release_us)
    }

    /// What a cold step of `size_bytes` per node costs, in µs.
    pub fn cold_us(&self, size_bytes: u64) -> f64 {
        self.at(size_bytes, |steps| steps.cold_us)
    }
}

/// A message of the run and how long it takes, emulated, over one hop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MessageTime {
    pub size_bytes: u64,
    pub emulated_us: f64,
}

/// What set an automatic factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Binding {
    /// The machine keeps up undilated.
    Nothing,
    /// The release of a step's messages against their time.
    Release,
    /// Moving a step's messages against their time.
    Bytes,
    /// The iteration's deadline (`--timeout`) allowed no more.
    Timeout,
    /// The largest factor there is.
    Limit,
}

/// A factor to one decimal, as the outputs print it: `29.5`, `4`.
pub fn factor_text(factor: f64) -> String {
    let text = format!("{factor:.1}");
    text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
}

/// Seconds as people read them: `850 ms`, `4.2 s`, `3 min 10 s`.
pub fn seconds_text(seconds: f64) -> String {
    match seconds {
        s if s < 1.0 => format!("{:.0} ms", s * 1e3),
        s if s < 60.0 => format!("{s:.1} s"),
        s => format!("{} min {:02} s", (s / 60.0) as u64, (s % 60.0) as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_and_seconds_read_as_people_say_them() {
        assert_eq!(factor_text(4.0), "4");
        assert_eq!(factor_text(29.46), "29.5");
        assert_eq!(factor_text(2.5), "2.5");
        assert_eq!(seconds_text(0.4321), "432 ms");
        assert_eq!(seconds_text(4.24), "4.2 s");
        assert_eq!(seconds_text(190.0), "3 min 10 s");
    }

    #[test]
    fn the_line_says_by_how_much_and_what_it_cost() {
        let given = Dilated { wall_s: Some(3.2), ..Dilated::given(Dilation::from_milli(4000).unwrap()) };
        assert_eq!(
            given.line(),
            "dilated ×4 (--dilation): every time above is emulated time; the run took 3.2 s of wall time"
        );
        assert_eq!(given.announcement(false), None);
        let small = Steps { size_bytes: 8, cold_us: 80.0, hold_us: 10_000.0, release_us: 40.0 };
        let probe = ProbeFigures { nodes: 8, iterations: 7, small, long: None, wall_s: 0.1 };
        let auto = AutoDilation {
            probe,
            shortest_message: None,
            longest_message: None,
            release_needs: 0.5,
            bytes_need: 0.2,
            binding: Binding::Nothing,
            reason: "the machine keeps up".into(),
        };
        let undilated = Dilated { factor: 1.0, auto: Some(auto), wall_s: Some(0.5) };
        assert_eq!(undilated.line(), "not dilated (--dilation auto); the run took 500 ms of wall time");
        assert_eq!(undilated.announcement(true).unwrap(), "dilation ×1 (--dilation auto): the machine keeps up");
        assert_eq!(
            undilated.announcement(false).unwrap(),
            "dilation ×1 (--dilation auto): the machine keeps up undilated; --verbose says why"
        );
    }

    #[test]
    fn the_short_line_names_what_set_the_factor_with_its_figure() {
        let small = Steps { size_bytes: 8, cold_us: 80.0, hold_us: 10_000.0, release_us: 40.0 };
        let long = Steps { size_bytes: 1 << 20, cold_us: 9000.0, hold_us: 10_000.0, release_us: 300.0 };
        let probe = ProbeFigures { nodes: 16, iterations: 7, small, long: Some(long), wall_s: 0.1 };
        let reason = "a step of 16 nodes sending at once on this cluster (probe: ...) ".repeat(6);
        let auto = |binding, release_needs, bytes_need| AutoDilation {
            probe: probe.clone(),
            shortest_message: None,
            longest_message: None,
            release_needs,
            bytes_need,
            binding,
            reason: reason.clone(),
        };
        let dilated = |auto| Dilated { factor: 21.8, auto: Some(auto), wall_s: None };
        let release = dilated(auto(Binding::Release, 21.73, 3.0)).announcement(false).unwrap();
        assert_eq!(
            release,
            "dilation ×21.8 (--dilation auto): set by how late this machine releases a step of 16 nodes sending at \
             once (40 µs for 8 B per node); --verbose says why"
        );
        assert!(release.chars().count() < 160, "one short line: {release}");
        let bytes = dilated(auto(Binding::Bytes, 3.0, 21.73)).announcement(false).unwrap();
        assert!(bytes.contains("move a step of 16 nodes") && bytes.contains("9000 µs for 1 MiB per node"), "{bytes}");
        let capped = dilated(auto(Binding::Timeout, 50.01, 3.0)).announcement(false).unwrap();
        assert!(capped.contains("×50.1 would be needed") && capped.contains("--timeout"), "{capped}");
        let full = dilated(auto(Binding::Release, 21.73, 3.0)).announcement(true).unwrap();
        assert_eq!(full, format!("dilation ×21.8 (--dilation auto): {reason}"));
    }

    #[test]
    fn probe_figures_are_affine_in_the_message_length() {
        let small = Steps { size_bytes: 8, cold_us: 100.0, hold_us: 10_000.0, release_us: 50.0 };
        let long = Steps { size_bytes: 8 + 1000, cold_us: 2100.0, hold_us: 10_000.0, release_us: 1050.0 };
        let figures = ProbeFigures { nodes: 16, iterations: 7, small, long: Some(long), wall_s: 0.3 };
        assert_eq!(figures.release_us(8), 50.0);
        assert_eq!(figures.release_us(508), 550.0);
        assert_eq!(figures.cold_us(8 + 4000), 8100.0, "extrapolated beyond the longer step");
        assert_eq!(figures.cold_us(0), 100.0, "never below the small step");
        let alone = ProbeFigures { long: None, ..figures };
        assert_eq!(alone.release_us(1 << 20), 50.0);
    }
}
