//! The files a user names, read and written one way everywhere: every file the program
//! reads from a path it was given (a GOAL schedule, an MSCCL-IR program, a tuning table,
//! the calibration, a token file) through [`read_text`], which refuses what is not a
//! regular file (a device such as `/dev/zero`, a FIFO, a socket: their size says nothing,
//! and a FIFO's open would wait for a writer) and reads at most its limit
//! (`take(limit)` on the open file, so a file that grows while it is read cannot pass
//! it either); and every file the program writes to a path it was given (`--trace`,
//! `--diagram`, `--html`, `--csv`, `--json`, `--plot`, `--dump`, `--write-token`, `tune`'s
//! table, the calibration) through [`create`] or [`write`], which refuse to follow a
//! symbolic link in the last component of the path (`O_NOFOLLOW`): a link another user
//! left in `/tmp` under the name never redirects the output onto a file of this user's.
//!
//! Neither ever quotes what a file holds: a read error names the file and what was
//! wrong with it, and the parsers above name a line and column, never the text found
//! there (a secret file named by mistake or by someone else must not be printed back);
//! [`json_error`] says so of a JSON file (a tuning table, the calibration).

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::path::Path;

/// Why a file a user named could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It could not be opened or read (missing, not allowed, ...).
    #[error("the {what} {path}: {error}")]
    Io { what: &'static str, path: String, error: std::io::Error },
    /// It is not a regular file.
    #[error("the {what} {path} is {kind}, not a regular file: give the path of a file")]
    NotRegular { what: &'static str, path: String, kind: &'static str },
    /// It holds more than the limit.
    #[error("the {what} {path} is longer than the {limit} bytes a {what} may have")]
    TooLong { what: &'static str, path: String, limit: u64 },
    /// It is not UTF-8 text.
    #[error("the {what} {path} is not UTF-8 text (from byte {at} on)")]
    NotText { what: &'static str, path: String, at: usize },
}

impl FileError {
    /// Whether the file does not exist.
    pub fn is_missing(&self) -> bool {
        matches!(self, FileError::Io { error, .. } if error.kind() == ErrorKind::NotFound)
    }
}

/// What kind of file `file_type` is, for an error: "a character device", "a FIFO", ...
fn kind_name(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() { "a directory" } else { "not a file" }
}

/// The text of the regular file at `path`, at most `limit` bytes of UTF-8; `what` names
/// the file in errors ("GOAL file", "tuning file", ...). Opened without waiting (a FIFO's
/// open would block until a writer came), refused unless the open file is a regular file,
/// and read through `take(limit + 1)`, so nothing beyond the limit is ever read.
pub fn read_text(path: &Path, what: &'static str, limit: u64) -> Result<String, FileError> {
    let shown = || path.display().to_string();
    let io = |error: std::io::Error| FileError::Io { what, path: shown(), error };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(io)?;
    // The type of the file opened, not of what the path named a moment before.
    let file_type = file.metadata().map_err(io)?.file_type();
    if !file_type.is_file() {
        return Err(FileError::NotRegular { what, path: shown(), kind: kind_name(file_type) });
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLong { what, path: shown(), limit });
    }
    String::from_utf8(bytes).map_err(|error| FileError::NotText {
        what,
        path: shown(),
        at: error.utf8_error().valid_up_to(),
    })
}

/// Why an output could not be opened: a link is refused with this reason (the error of
/// `O_NOFOLLOW` itself, "too many levels of symbolic links", would puzzle a reader).
fn refused_link(path: &Path) -> std::io::Error {
    std::io::Error::other(format!(
        "{} is a symbolic link, and outputs never follow one (another user may have left it there): \
         remove it or name another file",
        path.display()
    ))
}

/// Options that open `path` for writing without following a link in its last component.
fn no_follow() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    options
}

/// Opens `options` on `path`, turning the refusal of a link into [`refused_link`].
fn open_no_follow(options: &std::fs::OpenOptions, path: &Path) -> std::io::Result<File> {
    options.open(path).map_err(|error| {
        let is_link = std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink());
        if is_link { refused_link(path) } else { error }
    })
}

/// Creates (or truncates) the file at `path` for writing, mode 0666 less the umask,
/// refusing a symbolic link there.
pub fn create(path: &Path) -> std::io::Result<File> {
    open_no_follow(no_follow().create(true).truncate(true), path)
}

/// [`create`] with the mode `mode` for a new file (0600 for a token file).
pub fn create_private(path: &Path, mode: u32) -> std::io::Result<File> {
    let mut options = no_follow();
    options.create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    open_no_follow(&options, path)
}

/// Opens the file at `path` for writing without truncating it (made if missing),
/// refusing a symbolic link there: the check that an output can be written, before a run.
pub fn open_for_writing(path: &Path) -> std::io::Result<File> {
    open_no_follow(no_follow().create(true).truncate(false), path)
}

/// Writes `bytes` to the file at `path` ([`create`]: never through a link).
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    create(path)?.write_all(bytes.as_ref())
}

/// Where and why a JSON file was refused, in words that quote none of it: "line 3,
/// column 14: an unknown field, expected one of `min`, `max`". serde's own messages put
/// what the file holds first and what was expected last ("invalid type: string
/// \"...\", expected u32"); only the expected part, which comes from the layout the
/// program reads, is kept. Syntax errors are serde_json's fixed words ("expected
/// value", "trailing comma"); the project's own messages start with "expected".
pub fn json_error(error: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let full = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full);
    let expected = || message.rfind(", expected ").map(|at| &message[at + 2..]);
    let what = match error.classify() {
        Category::Io => "the file could not be read".to_owned(),
        Category::Syntax | Category::Eof => message.to_owned(),
        Category::Data => {
            let (kind, schema_only) = [
                ("invalid type: ", "a value of the wrong type"),
                ("invalid value: ", "a value out of range"),
                ("invalid length ", "a list of the wrong length"),
                ("unknown variant ", "a name this program does not know"),
                ("unknown field ", "a field this program does not read"),
            ]
            .into_iter()
            .find(|(prefix, _)| message.starts_with(prefix))
            .map_or(("", None), |(_, kind)| (kind, Some(kind)));
            match (schema_only, expected()) {
                (Some(_), Some(expected)) => format!("{kind}, {expected}"),
                (Some(kind), None) => kind.to_owned(),
                _ if message.starts_with("missing field ")
                    || message.starts_with("duplicate field ")
                    || message.starts_with("expected ") =>
                {
                    message.to_owned()
                }
                _ => "a value this program cannot read there".to_owned(),
            }
        }
    };
    format!("line {}, column {}: {what}", error.line(), error.column())
}

#[allow(unsafe_code)] // mkfifo makes the named pipe a test reads.
#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let folder = std::env::temp_dir().join(format!("topocomm-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).unwrap();
        folder
    }

    #[test]
    fn a_regular_file_is_read_whole_within_its_limit_and_refused_past_it() {
        let folder = scratch("limit");
        let file = folder.join("goal.txt");
        std::fs::write(&file, "num_ranks 2\n").unwrap();
        assert_eq!(read_text(&file, "GOAL file", 12).unwrap(), "num_ranks 2\n");
        let error = read_text(&file, "GOAL file", 11).unwrap_err().to_string();
        assert!(error.contains("is longer than the 11 bytes a GOAL file may have"), "{error}");
        std::fs::write(&file, b"ok\xff\xfe").unwrap();
        let error = read_text(&file, "GOAL file", 100).unwrap_err().to_string();
        assert!(error.ends_with("is not UTF-8 text (from byte 2 on)"), "{error}");
        let missing = read_text(&folder.join("none"), "tuning file", 100).unwrap_err();
        assert!(missing.is_missing(), "{missing}");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    /// `/dev/zero` reports a size of 0: a cap on the size let it be read without end.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_device_is_refused_without_reading_it() {
        let error = read_text(Path::new("/dev/zero"), "tuning file", 1 << 20).unwrap_err().to_string();
        assert_eq!(
            error,
            "the tuning file /dev/zero is a character device, not a regular file: give the path of a file"
        );
    }

    /// A FIFO nobody writes to: opening it for reading would wait for a writer forever.
    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_at_once() {
        let folder = scratch("fifo");
        let fifo = folder.join("pipe");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only makes the node.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        let error = read_text(&fifo, "GOAL file", 1 << 20).unwrap_err().to_string();
        assert!(error.contains("is a FIFO (named pipe), not a regular file"), "{error}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        std::fs::remove_dir_all(&folder).unwrap();
    }

    /// A link another user left where an output goes: refused, its target untouched.
    #[cfg(unix)]
    #[test]
    fn outputs_never_follow_a_link() {
        let folder = scratch("link");
        let target = folder.join("precious");
        std::fs::write(&target, "keep me").unwrap();
        let link = folder.join("trace.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for attempt in
            [write(&link, "overwritten"), open_for_writing(&link).map(drop), create_private(&link, 0o600).map(drop)]
        {
            let error = attempt.unwrap_err().to_string();
            assert!(error.contains("trace.json is a symbolic link, and outputs never follow one"), "{error}");
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        // A plain file is written, and written again from the start.
        let plain = folder.join("plain.json");
        write(&plain, "first, longer").unwrap();
        write(&plain, "second").unwrap();
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "second");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    /// serde's messages quote the value they refused; what is left names only the layout.
    #[test]
    fn a_json_error_names_the_place_and_what_was_expected_never_the_text() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Layout {
            count: u32,
            kind: Kind,
        }
        #[derive(Debug, serde::Deserialize)]
        #[serde(rename_all = "lowercase")]
        enum Kind {
            Ring,
            Tree,
        }
        let said = |text: &str| json_error(&serde_json::from_str::<Layout>(text).unwrap_err());
        let secret = "s3cr3t, expected nothing";
        assert_eq!(
            said(&format!("{{\"count\": \"{secret}\"}}")),
            "line 1, column 36: a value of the wrong type, expected u32"
        );
        assert!(!said(&format!("{{\"count\": 1, \"kind\": \"{secret}\"}}")).contains("s3cr3t"));
        assert_eq!(
            said(&format!("{{\"count\": 1, \"kind\": \"{secret}\"}}")),
            "line 1, column 47: a name this program does not know, expected `ring` or `tree`"
        );
        let unknown = said(&format!("{{\"{secret}\": 1}}"));
        assert!(
            unknown == "line 1, column 27: a field this program does not read, expected `count` or `kind`",
            "{unknown}"
        );
        assert!(!unknown.contains("s3cr3t"), "{unknown}");
        assert_eq!(said("{\"count\": 1}"), "line 1, column 12: missing field `kind`");
        assert_eq!(said("root:x:0:0"), "line 1, column 1: expected value");
        assert_eq!(
            said("{\"count\": 99999999999, \"kind\": \"ring\"}"),
            "line 1, column 21: a value out of range, expected u32"
        );
    }
}
