//! The command words the lab's page may send: `run`, `explain`, `simulate` and `sweep`
//! take their commands' own options (clap parses them, so a bad word gets the CLI's error
//! text), except every option that names a file. A request comes from whoever reaches
//! the page, and a path in it would be read (`--goal /etc/shadow`, `--tuning /dev/zero`)
//! or written (`--csv`, `--trace`) on the lab's host with the lab's rights: so every
//! option whose value is a path (clap's `ValueHint` of it, which a `PathBuf` option has
//! unless told otherwise, or a `FILE`/`DIR` value name) is refused when the request gives
//! it, before anything is read. The check reads the commands' own definitions, so an
//! option added to them later is refused without a change here.

use clap::builder::ValueHint;
use clap::parser::ValueSource;
use clap::{Arg, Parser};

use crate::control::request::{CollectiveArgs, IterationArgs};
use crate::tools::explain::ExplainArgs;
use crate::tools::simulate::SimulateArgs;
use crate::tools::sweep::SweepArgs;

/// The words of `topocomm run` the page may give: what to run and how often (the cluster
/// is the lab's own).
#[derive(Debug, Parser)]
#[command(name = "run", about = None)]
pub struct RunWords {
    #[command(flatten)]
    pub what: CollectiveArgs,
    #[command(flatten)]
    pub repeat: IterationArgs,
}

/// The words of `topocomm explain`.
#[derive(Debug, Parser)]
#[command(name = "explain")]
pub struct ExplainWords {
    #[command(flatten)]
    pub args: ExplainArgs,
}

/// The words of `topocomm simulate`.
#[derive(Debug, Parser)]
#[command(name = "simulate")]
pub struct SimulateWords {
    #[command(flatten)]
    pub args: SimulateArgs,
}

/// The words of `topocomm sweep`.
#[derive(Debug, Parser)]
#[command(name = "sweep")]
pub struct SweepWords {
    #[command(flatten)]
    pub args: SweepArgs,
}

/// Whether `arg` takes a path: its value hint is one (clap gives every `PathBuf` option
/// `AnyPath`), or its value is named as a file or folder.
pub fn names_a_path(arg: &Arg) -> bool {
    if !arg.get_action().takes_values() {
        return false;
    }
    let hinted = matches!(
        arg.get_value_hint(),
        ValueHint::AnyPath | ValueHint::FilePath | ValueHint::DirPath | ValueHint::ExecutablePath
    );
    let named = arg.get_value_names().into_iter().flatten().any(|name| {
        let name = name.as_str().to_ascii_uppercase();
        name.contains("FILE") || name.contains("DIR") || name.contains("PATH")
    });
    hinted || named
}

/// The options of command `T` that name a path, as `--long` (or `-s`).
#[cfg(test)]
pub fn path_options<T: clap::CommandFactory>() -> Vec<String> {
    T::command().get_arguments().filter(|arg| names_a_path(arg)).map(option_name).collect()
}

fn option_name(arg: &Arg) -> String {
    match (arg.get_long(), arg.get_short()) {
        (Some(long), _) => format!("--{long}"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => arg.get_id().to_string(),
    }
}

/// Why a request's words were refused.
#[derive(Debug, thiserror::Error)]
pub enum WordsError {
    /// The command's own parser refused them: the text the CLI prints.
    #[error("{}", .0.render())]
    Cli(#[source] clap::Error),
    /// They give an option that names a file.
    #[error(
        "error: {option}: the lab reads and writes no files a request names (the path would be opened on the lab's \
         host); its page shows what the command would write, and \"Save JSON\" gives the document"
    )]
    NamesAFile { option: String },
}

/// Parses `args` as command `T` (named `name`) would; refuses, with one line, any option
/// naming a path that the words give (one the lab's own environment sets, such as
/// `TOPOCOMM_TUNING`, is the lab's, as if it was started with it). The error is the text
/// the CLI prints, or the refusal.
pub fn parse<T: Parser>(name: &str, args: &[String]) -> Result<T, WordsError> {
    let command = T::command();
    let words = std::iter::once(name.to_owned()).chain(args.iter().cloned());
    let matches = command.clone().try_get_matches_from(words).map_err(WordsError::Cli)?;
    let given = command
        .get_arguments()
        .filter(|arg| names_a_path(arg))
        .find(|arg| matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine));
    if let Some(arg) = given {
        return Err(WordsError::NamesAFile { option: option_name(arg) });
    }
    T::from_arg_matches(&matches).map_err(WordsError::Cli)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused<T: Parser + std::fmt::Debug>(name: &str, words: &[&str]) -> String {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        parse::<T>(name, &words).expect_err("refused").to_string()
    }

    #[test]
    fn every_option_naming_a_file_is_found_in_each_command() {
        // The options these commands have today that name a file: a new one is found by
        // its type, and this list is only what must be among them.
        let expect = |found: Vec<String>, wanted: &[&str]| {
            for option in wanted {
                assert!(found.iter().any(|f| f == option), "{option} not among {found:?}");
            }
        };
        expect(path_options::<RunWords>(), &["--schedule"]);
        expect(path_options::<ExplainWords>(), &["--goal", "--schedule", "--tuning"]);
        expect(
            path_options::<SimulateWords>(),
            &["--goal", "--schedule", "--tuning", "--plot", "--trace", "--diagram"],
        );
        expect(path_options::<SweepWords>(), &["--schedule", "--tuning", "--csv", "--json", "--plot", "--logs"]);
        // Flags and values that are not paths are not taken for them.
        for found in [path_options::<SimulateWords>(), path_options::<ExplainWords>()] {
            assert!(!found.iter().any(|f| f == "--json" || f == "--size" || f == "--nodes"), "{found:?}");
        }
    }

    #[test]
    fn a_request_naming_any_file_is_refused_before_it_is_read() {
        let secret = "/nonexistent/topocomm-test/secret";
        let mut checked = 0;
        for (name, options) in [
            ("run", path_options::<RunWords>()),
            ("explain", path_options::<ExplainWords>()),
            ("simulate", path_options::<SimulateWords>()),
            ("sweep", path_options::<SweepWords>()),
        ] {
            for option in options {
                for words in
                    [vec!["allreduce", option.as_str(), secret], vec!["allreduce", &format!("{option}={secret}")]]
                {
                    let error = match name {
                        "run" => refused::<RunWords>(name, &words),
                        "explain" => refused::<ExplainWords>(name, &words),
                        "simulate" => refused::<SimulateWords>(name, &words),
                        _ => refused::<SweepWords>(name, &words),
                    };
                    assert!(
                        error.starts_with(&format!("error: {option}: the lab reads and writes no files")),
                        "{error}"
                    );
                    assert_eq!(error.lines().count(), 1, "{error}");
                    checked += 1;
                }
            }
        }
        assert!(checked >= 2 * 16, "{checked}");
    }

    #[test]
    fn words_without_files_parse_as_the_cli_parses_them() {
        let words: Vec<String> =
            ["allreduce", "--size", "4KiB", "--nodes", "16"].iter().map(|w| w.to_string()).collect();
        let parsed = parse::<SimulateWords>("simulate", &words).unwrap();
        assert_eq!(parsed.args.size, 4096);
        assert_eq!(parsed.args.nodes, vec![16]);
        let bad = parse::<SimulateWords>("simulate", &["allreduce".into(), "--size".into(), "banana".into()]);
        assert!(bad.unwrap_err().to_string().contains("invalid value 'banana' for '--size <SIZE>'"));
    }
}
