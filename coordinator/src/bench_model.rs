//! `topocomm bench-model`: emulated runs measured against the cost model.

use crate::cli::BenchModelArgs;

/// Runs the benchmark `args` describes.
pub async fn run(args: &BenchModelArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("bench-model is being written")
}
