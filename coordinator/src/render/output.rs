//! Where a command's results go: standard output, whose reader may leave early
//! (`topocomm list | head -1`, `topocomm status | true`), and the files a user names
//! (`--trace`, `--diagram`, `--dump`, `--csv`, `--plot`...), each checked before
//! anything runs so that a run's results are never lost to a path that cannot be written.
//! Every output is opened through `topocomm_collectives::files`, which never follows a
//! symbolic link where the file goes (another user's link in `/tmp` must not turn a
//! `--trace` into an overwrite of one of this user's files); a `--dump` folder that is
//! a link is refused as the log folder is.

use std::fmt::Display;
use std::io::{ErrorKind, Write};
use std::path::Path;

use anyhow::Context;

/// Standard output was closed by its reader. The command stops there, quietly and with
/// success, as `head` expects of the commands before it (`main` turns this error into
/// exit status 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("standard output was closed by its reader")]
pub struct StdoutClosed;

/// Writes `text` to standard output; [`StdoutClosed`] if its reader has gone.
pub fn print(text: impl Display) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match write!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Err(error) if error.kind() == ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        other => other.context("writing to standard output"),
    }
}

/// `println!` that returns [`print`]'s result instead of panicking when standard output
/// is closed.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::render::output::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;

/// Checks, before anything runs, that the file `option` names can be written: an
/// existing file is opened for writing (not truncated), a new one is created and
/// removed again; a symbolic link there is refused. `-` (standard output) is always
/// writable.
pub fn check_file_writable(option: &str, path: &Path) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let refuse = |error: std::io::Error| {
        anyhow::anyhow!("{option} {}: cannot write there ({error}); nothing was run", path.display())
    };
    if path.is_dir() {
        return Err(refuse(std::io::Error::new(ErrorKind::IsADirectory, "it is a directory")));
    }
    let existed = path.exists();
    topocomm_collectives::files::open_for_writing(path).map_err(refuse)?;
    if !existed {
        std::fs::remove_file(path).map_err(refuse)?;
    }
    Ok(())
}

/// Checks, before anything runs, that files can be written in the folder `option`
/// names: it is made (with its parents) if it does not exist, it is not a symbolic link,
/// and a probe file is created in it and removed.
pub fn check_folder_writable(option: &str, folder: &Path) -> anyhow::Result<()> {
    let refuse = |error: std::io::Error| {
        anyhow::anyhow!("{option} {}: cannot write there ({error}); nothing was run", folder.display())
    };
    if std::fs::symlink_metadata(folder).is_ok_and(|meta| meta.file_type().is_symlink()) {
        return Err(refuse(std::io::Error::other(
            "it is a symbolic link, and outputs never follow one (another user may have left it there)",
        )));
    }
    std::fs::create_dir_all(folder).map_err(refuse)?;
    let probe = folder.join(format!(".topocomm-probe-{}", std::process::id()));
    std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).map_err(refuse)?;
    std::fs::remove_file(&probe).map_err(refuse)
}

/// Writes `value` as JSON to `path` (`-`: standard output).
pub fn write_json(value: &serde_json::Value, path: &Path) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    if path.as_os_str() == "-" {
        return print(text);
    }
    topocomm_collectives::files::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritable_paths_are_refused_naming_the_option_and_writable_ones_are_left_as_they_were() {
        let scratch = std::env::temp_dir().join(format!("topocomm-output-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).unwrap();
        let missing = scratch.join("no-such-folder").join("t.json");
        let error = check_file_writable("--trace", &missing).unwrap_err().to_string();
        assert!(error.starts_with("--trace ") && error.contains("No such file or directory"), "{error}");
        let error = check_file_writable("--csv", &scratch).unwrap_err().to_string();
        assert!(error.contains("is a directory"), "{error}");
        // A new file is not left behind; an existing one keeps its content.
        let fresh = scratch.join("fresh.json");
        check_file_writable("--trace", &fresh).unwrap();
        assert!(!fresh.exists());
        let kept = scratch.join("kept.json");
        std::fs::write(&kept, "old").unwrap();
        check_file_writable("--trace", &kept).unwrap();
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "old");
        check_file_writable("--json", Path::new("-")).unwrap();
        // A folder is made; a file where a folder should be is refused.
        check_folder_writable("--dump", &scratch.join("dump").join("deeper")).unwrap();
        assert!(scratch.join("dump/deeper").is_dir());
        let error = check_folder_writable("--dump", &kept).unwrap_err().to_string();
        assert!(error.starts_with("--dump "), "{error}");
        std::fs::remove_dir_all(&scratch).unwrap();
    }

    /// A link another user left where `--trace` or `--dump` goes: refused before the
    /// run, its target untouched (on main the link was followed and its target
    /// overwritten).
    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_where_an_output_goes_is_refused_and_its_target_kept() {
        let scratch = std::env::temp_dir().join(format!("topocomm-output-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(scratch.join("victim")).unwrap();
        let target = scratch.join("victim").join(".bashrc");
        std::fs::write(&target, "the user's own").unwrap();
        let link = scratch.join("trace.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = check_file_writable("--trace", &link).unwrap_err().to_string();
        assert!(
            error.starts_with("--trace ") && error.contains("is a symbolic link, and outputs never follow one"),
            "{error}"
        );
        let error = write_json(&serde_json::json!({"x": 1}), &link).unwrap_err();
        assert!(format!("{error:#}").contains("is a symbolic link"), "{error:#}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "the user's own");
        let folder_link = scratch.join("dump");
        std::os::unix::fs::symlink(scratch.join("victim"), &folder_link).unwrap();
        let error = check_folder_writable("--dump", &folder_link).unwrap_err().to_string();
        assert!(error.starts_with("--dump ") && error.contains("is a symbolic link"), "{error}");
        std::fs::remove_dir_all(&scratch).unwrap();
    }
}
