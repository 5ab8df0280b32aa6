//! Where `topocomm calibrate` keeps the link physics it fitted, so that `--ts auto` can
//! predict raw-mode runs with them: a JSON file in the user's cache folder.

use std::path::PathBuf;

use anyhow::Context;
use topocomm_proto::spec::LinkModel;

/// The calibration file: `$TOPOCOMM_CALIBRATION`, else `$XDG_CACHE_HOME/topocomm/calibration.json`,
/// else `~/.cache/topocomm/calibration.json`.
pub fn path() -> PathBuf {
    if let Some(path) = std::env::var_os("TOPOCOMM_CALIBRATION") {
        return PathBuf::from(path);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("topocomm").join("calibration.json")
}

/// The fitted link physics of the last calibration.
pub fn load() -> anyhow::Result<LinkModel> {
    let path = path();
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("no calibration at {} (run `topocomm calibrate` first)", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("unreadable calibration at {}", path.display()))
}

/// Keeps `model` for later `--ts auto` runs; returns where.
pub fn save(model: &LinkModel) -> anyhow::Result<PathBuf> {
    let path = path();
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).with_context(|| format!("creating {}", folder.display()))?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(model)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
