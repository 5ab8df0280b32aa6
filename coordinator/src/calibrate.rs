//! `topocomm calibrate`: fits the real links' t_s, t_h and t_w by ping-pong.

use crate::cli::CalibrateArgs;

/// Runs the calibration `args` describes.
pub async fn run(args: &CalibrateArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("calibrate is being written")
}
