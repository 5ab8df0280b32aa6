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

/// The most bytes a calibration file may have (one is a few hundred).
pub const MAX_FILE_BYTES: u64 = 64 << 10;

/// The fitted link physics of the last calibration, read through the bounded reader
/// (`topocomm_collectives::files`); an error quotes nothing of the file.
pub fn load() -> anyhow::Result<LinkModel> {
    let path = path();
    let text = match topocomm_collectives::files::read_text(&path, "calibration file", MAX_FILE_BYTES) {
        Err(error) if error.is_missing() => {
            anyhow::bail!("no calibration at {} (run `topocomm calibrate` first)", path.display())
        }
        other => other?,
    };
    serde_json::from_str(&text).map_err(|error| {
        anyhow::anyhow!(
            "unreadable calibration at {}: {} (run `topocomm calibrate` again)",
            path.display(),
            topocomm_collectives::files::json_error(&error)
        )
    })
}

/// Keeps `model` for later `--ts auto` runs; returns where.
pub fn save(model: &LinkModel) -> anyhow::Result<PathBuf> {
    let path = path();
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).with_context(|| format!("creating {}", folder.display()))?;
    }
    topocomm_collectives::files::write(&path, serde_json::to_string_pretty(model)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
