//! Naming a setting the way the user gave it. The connection settings can
//! come from the environment (`ZKDIST_ZK`, `ZKDIST_ROOT`, `ZKDIST_AUTH`,
//! `ZKDIST_MAX_REPLY_BYTES`) as well as from flags, and an error about a
//! value the shell supplied names the variable: a user who never typed
//! `--auth` is not helped by being told that `--auth` is wrong.

use std::collections::BTreeSet;
use std::ffi::OsString;

use clap::ArgMatches;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;

/// Which connection settings were read from the environment rather than
/// given as flags (a default is neither).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FromEnvironment {
    pub zk: bool,
    pub root: bool,
    pub auth: bool,
}

impl FromEnvironment {
    /// Reads the sources off the matches of a subcommand that has the
    /// connection flags.
    pub fn of(matches: &ArgMatches) -> Self {
        let from_env = |id: &str| matches.value_source(id) == Some(ValueSource::EnvVariable);
        Self {
            zk: from_env("zk"),
            root: from_env("root"),
            auth: from_env("auth"),
        }
    }
}

/// `flag`, or `variable` if the value came from it.
pub fn setting_name(flag: &'static str, variable: &'static str, from_env: bool) -> &'static str {
    if from_env { variable } else { flag }
}

/// The text of a command-line error about a value that came from an
/// environment variable, naming the variable; `None` for any other error,
/// which is printed as clap wrote it.
///
/// clap names the flag (`invalid value 'x' for '--auth <AUTH>'`) whether
/// the value was typed or read from the variable behind it; the value came
/// from the variable when the variable is set and the flag is not on the
/// command line (`args`, without the program's name), since a flag given
/// wins over its variable.
pub fn explain_environment_value(
    error: &clap::Error,
    command: &clap::Command,
    args: &[OsString],
) -> Option<String> {
    if error.kind() == ErrorKind::InvalidUtf8 {
        return explain_invalid_utf8(command, args);
    }
    if !matches!(
        error.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return None;
    }
    // "--auth <AUTH>"
    let Some(ContextValue::String(shown_arg)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    let long = shown_arg.split_whitespace().next()?.strip_prefix("--")?;
    let variable = environment_variable_of(command, long)?;
    std::env::var_os(&variable)?;
    if flag_given(args, long) {
        return None;
    }
    let quoted_arg = format!("'{shown_arg}'");
    let mut text = error.to_string();
    // A password set in the environment is not echoed to a log.
    if long == "auth"
        && let Some(ContextValue::String(value)) = error.get(ContextKind::InvalidValue)
        && !value.is_empty()
    {
        text = text.replacen(&format!("'{value}'"), "'<hidden>'", 1);
    }
    text.contains(&quoted_arg).then(|| {
        text.replacen(
            &quoted_arg,
            &format!("{variable} (the environment variable behind {quoted_arg})"),
            1,
        )
    })
}

/// clap says only that "one or more arguments" are not UTF-8; when a
/// variable behind a flag not given is, this names it.
fn explain_invalid_utf8(command: &clap::Command, args: &[OsString]) -> Option<String> {
    let culprits: Vec<String> = environment_variables(command)
        .into_iter()
        .filter(|(long, variable)| {
            !flag_given(args, long)
                && std::env::var_os(variable).is_some_and(|value| value.to_str().is_none())
        })
        .map(|(long, variable)| format!("{variable} (behind '--{long}')"))
        .collect();
    (!culprits.is_empty()).then(|| {
        format!(
            "error: invalid UTF-8 in the environment: {}\n\nFor more information, try '--help'.",
            culprits.join(", ")
        )
    })
}

/// Every flag of `command` and its subcommands that has a variable behind
/// it, as (long name, variable), sorted.
fn environment_variables(command: &clap::Command) -> BTreeSet<(String, String)> {
    let mut found: BTreeSet<(String, String)> = command
        .get_arguments()
        .filter_map(|arg| {
            let long = arg.get_long()?;
            let variable = arg.get_env()?;
            Some((long.to_owned(), variable.to_string_lossy().into_owned()))
        })
        .collect();
    for subcommand in command.get_subcommands() {
        found.extend(environment_variables(subcommand));
    }
    found
}

/// The variable behind `--long` in `command` or any of its subcommands.
fn environment_variable_of(command: &clap::Command, long: &str) -> Option<String> {
    command
        .get_arguments()
        .filter(|arg| arg.get_long() == Some(long))
        .find_map(|arg| arg.get_env())
        .map(|variable| variable.to_string_lossy().into_owned())
        .or_else(|| {
            command
                .get_subcommands()
                .find_map(|subcommand| environment_variable_of(subcommand, long))
        })
}

/// Whether `--long` is on the command line, as `--long VALUE` or
/// `--long=VALUE`, before a `--` that ends the flags.
fn flag_given(args: &[OsString], long: &str) -> bool {
    let flag = format!("--{long}");
    let with_value = format!("--{long}=");
    args.iter()
        .map(|arg| arg.to_string_lossy())
        .take_while(|arg| arg != "--")
        .any(|arg| arg == flag || arg.starts_with(&with_value))
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::args::{Cli, Command};

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_flag_counts_as_given_only_before_the_end_of_flags() {
        assert!(flag_given(&args(&["submit", "--auth", "a:b", "x"]), "auth"));
        assert!(flag_given(&args(&["submit", "--auth=a:b", "x"]), "auth"));
        assert!(!flag_given(&args(&["submit", "--", "--auth"]), "auth"));
        assert!(!flag_given(&args(&["submit", "--authority", "x"]), "auth"));
    }

    #[test]
    fn the_variables_behind_the_connection_flags_are_found_in_the_subcommands() {
        let command = Cli::command();
        assert_eq!(
            environment_variable_of(&command, "auth").as_deref(),
            Some("ZKDIST_AUTH")
        );
        assert_eq!(
            environment_variable_of(&command, "max-reply-bytes").as_deref(),
            Some("ZKDIST_MAX_REPLY_BYTES")
        );
        assert_eq!(
            environment_variable_of(&command, "session-timeout-ms"),
            None
        );
    }

    #[test]
    fn a_flag_on_the_command_line_is_not_from_the_environment() {
        let matches = Cli::command()
            .try_get_matches_from(["zkdist", "status", "--zk", "h:1", "--root", "/r"])
            .expect("the command line parses");
        let (_, status) = matches.subcommand().expect("a subcommand");
        assert_eq!(FromEnvironment::of(status), FromEnvironment::default());
        let cli = Cli::from_arg_matches(&matches).expect("the matches make a command line");
        assert!(matches!(cli.command, Command::Status(_)));
    }

    #[test]
    fn a_setting_is_named_as_given() {
        assert_eq!(setting_name("--root", "ZKDIST_ROOT", false), "--root");
        assert_eq!(setting_name("--root", "ZKDIST_ROOT", true), "ZKDIST_ROOT");
    }
}
