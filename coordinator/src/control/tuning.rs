//! `--tuning FILE` (or `TOPOCOMM_TUNING`): the option of every command that resolves
//! `--algorithm auto` (`run`, `sweep`, `explain`, `simulate`, `serve`, `list`, `tune`,
//! the lab), which loads the algorithm library's tuning table. It lives here, at the
//! bottom of the coordinator's layers, so that `render`, `tools` and `lab` declare it
//! without naming `cli`.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use topocomm_collectives::tuning::Tuning;

/// `--tuning FILE`: the options of every command that resolves `auto`.
#[derive(Debug, Clone, Default, Args)]
pub struct TuningArgs {
    /// The rules `--algorithm auto` picks by: a JSON file (`topocomm tune` writes one,
    /// `topocomm list --tuning-json` prints the built-in one).
    #[arg(long, value_name = "FILE", env = "TOPOCOMM_TUNING")]
    pub tuning: Option<PathBuf>,
}

impl TuningArgs {
    /// The file's rules, or the built-in ones without `--tuning`.
    pub fn load(&self) -> anyhow::Result<Arc<Tuning>> {
        match &self.tuning {
            None => Ok(Arc::new(Tuning::built_in())),
            Some(path) => Ok(Arc::new(Tuning::read(path)?)),
        }
    }
}
