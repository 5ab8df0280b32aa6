//! Where a command's results go: standard output, whose reader may leave early
//! (`topocomm list | head -1`, `topocomm status | true`), and the files a user names
//! (`--trace`, `--diagram`, `--dump`, `--csv`, `--plot`...), each checked before
//! anything runs so that a run's results are never lost to a path that cannot be written.

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
/// removed again. `-` (standard output) is always writable.
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
    std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path).map_err(refuse)?;
    if !existed {
        std::fs::remove_file(path).map_err(refuse)?;
    }
    Ok(())
}

/// Checks, before anything runs, that files can be written in the folder `option`
/// names: it is made (with its parents) if it does not exist, and a probe file is
/// created in it and removed.
pub fn check_folder_writable(option: &str, folder: &Path) -> anyhow::Result<()> {
    let refuse = |error: std::io::Error| {
        anyhow::anyhow!("{option} {}: cannot write there ({error}); nothing was run", folder.display())
    };
    std::fs::create_dir_all(folder).map_err(refuse)?;
    let probe = folder.join(format!(".topocomm-probe-{}", std::process::id()));
    std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).map_err(refuse)?;
    std::fs::remove_file(&probe).map_err(refuse)
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
}
