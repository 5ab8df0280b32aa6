//! Pages of the book that a command writes itself (`bench-model --page FILE`), never
//! pasted by hand: a title, the line saying which command wrote the page and when (so
//! that nobody edits it), the command line as it was given, the machine it ran on (CPU
//! model, cores, kernel) and then the command's own text.

use std::path::Path;
use std::time::SystemTime;

use anyhow::Context;

/// The machine a page was measured on, as its line says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// `/proc/cpuinfo`'s model name (`unknown CPU` where there is none).
    pub cpu: String,
    /// The cores this process may use.
    pub cores: usize,
    /// The kernel's release (`/proc/sys/kernel/osrelease`), or the operating system.
    pub kernel: String,
}

impl Machine {
    /// This machine.
    pub fn this() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| cpu_model(&text))
            .unwrap_or_else(|| "unknown CPU".to_owned());
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|release| format!("{} {}", std::env::consts::OS, release.trim()))
            .unwrap_or_else(|_| std::env::consts::OS.to_owned());
        Machine { cpu, cores, kernel }
    }

    /// `AMD EPYC 7B13, 2 cores, linux 6.1.0`.
    pub fn line(&self) -> String {
        format!("{}, {} core{}, {}", self.cpu, self.cores, if self.cores == 1 { "" } else { "s" }, self.kernel)
    }
}

/// The first `model name` of a `/proc/cpuinfo`.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_owned())
    })
}

/// The page: `title`, who wrote it and when, the command, the machine, then `body`
/// (Markdown).
pub fn page(title: &str, writer: &str, command: &str, machine: &Machine, written: SystemTime, body: &str) -> String {
    let date = humantime::format_rfc3339_seconds(written);
    format!(
        "# {title}\n\n\
         *Written by `{writer}` on {date}; do not edit by hand: run the command below again.*\n\n\
         ```text\n$ {command}\n```\n\n\
         Machine: {}.\n\n\
         {body}",
        machine.line()
    )
}

/// The command line this process was started with, as a user would type it again:
/// the program's own name, then every argument (quoted where a shell would need it).
pub fn this_command() -> String {
    let mut words = std::env::args();
    let program = words
        .next()
        .and_then(|path| Path::new(&path).file_name().map(|name| name.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "topocomm".to_owned());
    std::iter::once(program).chain(words.map(|word| shell_word(&word))).collect::<Vec<_>>().join(" ")
}

/// `word` as a shell reads it back: as is when plain, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./,:=+@%".contains(c));
    if plain { word.to_owned() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

/// Writes the page to `path`.
pub fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    topocomm_collectives::files::write(path, text).with_context(|| format!("writing the page {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_says_who_wrote_it_when_and_on_what() {
        let machine = Machine { cpu: "AMD EPYC 7B13".into(), cores: 2, kernel: "linux 6.1.0".into() };
        let written = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let text =
            page("Results", "topocomm bench-model", "topocomm bench-model --nodes 8", &machine, written, "body\n");
        assert!(text.starts_with("# Results\n"), "{text}");
        assert!(
            text.contains("*Written by `topocomm bench-model` on 2023-11-14T22:13:20Z; do not edit by hand"),
            "{text}"
        );
        assert!(text.contains("$ topocomm bench-model --nodes 8\n"), "{text}");
        assert!(text.contains("Machine: AMD EPYC 7B13, 2 cores, linux 6.1.0.\n"), "{text}");
        assert!(text.ends_with("body\n"), "{text}");
    }

    #[test]
    fn the_cpu_is_the_first_model_name_and_words_are_quoted_as_a_shell_needs() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(cpuinfo).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0\n"), None);
        assert_eq!(shell_word("--sizes=1KiB,64KiB"), "--sizes=1KiB,64KiB");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
