//! The zkdist binary: the roles on a real ensemble, the client commands, and
//! the demo on the embedded simulator.

// Printing goes through `stdout.rs`, whose macros report a closed stream
// instead of panicking as `println!` and `eprintln!` do.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod commands;
mod connect;
mod handlers;
mod origin;
mod shutdown;
mod stdout;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use tracing_subscriber::EnvFilter;

use args::{Cli, Command};
use commands::Outcome;
use stdout::errln;

/// The simulator and the explorer allocate at every step (paths, trace
/// lines, messages); mimalloc spends a fraction of the system allocator's
/// instructions on it (see the workspace manifest).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A command line that does not parse (sysexits' `EX_USAGE`): not 2, which
/// says a task ran and failed.
const USAGE_EXIT_CODE: u8 = 64;

fn main() -> ExitCode {
    let cli = match parse_command_line() {
        Ok(cli) => cli,
        Err(error) => {
            let args: Vec<_> = std::env::args_os().skip(1).collect();
            if let Some(text) = origin::explain_environment_value(&error, &Cli::command(), &args) {
                errln!("{}", text.trim_end());
                return ExitCode::from(USAGE_EXIT_CODE);
            }
            // `--help` and `--version` come this way too, on stdout.
            let _ = error.print();
            return if error.use_stderr() {
                ExitCode::from(USAGE_EXIT_CODE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let log = cli
        .log
        .as_deref()
        .unwrap_or(default_log_filter(&cli.command));
    // A RUST_LOG that is set but blank (`Environment=RUST_LOG=` in a unit
    // file, `docker run -e RUST_LOG=`) would parse as a filter that lets
    // nothing through, errors included: it is taken for unset.
    let from_environment = std::env::var_os(EnvFilter::DEFAULT_ENV)
        .filter(|value| !value.to_string_lossy().trim().is_empty())
        .map(|_| EnvFilter::try_from_default_env());
    let filter = match from_environment {
        Some(Ok(filter)) => filter,
        unset_or_unreadable => {
            // Unset is the usual case; set but unreadable is said, not
            // passed over.
            if let Some(Err(error)) = unset_or_unreadable {
                errln!("zkdist: RUST_LOG ignored ({error}); logging with {log:?}");
            }
            match EnvFilter::try_new(log) {
                Ok(filter) => filter,
                // A filter with a bad directive would drop it and log less
                // than asked, which a role's operator finds out too late.
                Err(error) => {
                    errln!("zkdist: invalid --log filter {log:?}: {error}");
                    return ExitCode::from(USAGE_EXIT_CODE);
                }
            }
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only where a terminal shows them, not in log files.
        .with_ansi(std::io::stderr().is_terminal())
        // A log line that cannot be written (the terminal of an ssh session
        // that dropped, a log pipe whose reader died) is lost, and nothing
        // else: by default the subscriber reports the failure with
        // `eprintln!`, which panics on that same stderr, and a role would
        // die in the middle of its task, or lose the task that hears its
        // stop signals and run on deaf to them.
        .log_internal_errors(false)
        .init();
    let connect_args = connect_args(&cli.command).cloned();
    // A role stopped by a signal has done what was asked of it: it exits
    // with its status. A one-shot command stopped by one was cut short.
    let one_shot = matches!(cli.command, Command::Submit(_) | Command::Bench(_));
    let outcome = execute(cli.command).map_err(|error| match &connect_args {
        Some(args) => connect::explain_session_expired(connect::explain_environment_root(
            connect::explain_no_auth(error, args),
            args,
        )),
        None => error,
    });
    let exit_code = match outcome {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        // A task that ran and failed is not an error of zkdist's, but a
        // script waiting for it must be able to tell.
        Ok(Outcome::TaskFailed) => ExitCode::from(2),
        Ok(Outcome::Violations) => ExitCode::from(3),
        Err(error) => {
            errln!("zkdist: {error:#}");
            ExitCode::FAILURE
        }
    };
    if one_shot {
        // It said what it settled and what is left to do; it now ends by
        // the signal, so that a script running it stops too.
        shutdown::end_by_received_signal();
    }
    exit_code
}

/// The command line, with what came from the environment noted in the
/// connection settings (clap's matches know; the parsed struct does not).
fn parse_command_line() -> Result<Cli, clap::Error> {
    parse_from(std::env::args_os())
}

fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = Cli::command().try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let (Some(connect), Some((_, subcommand))) =
        (connect_args_mut(&mut cli.command), matches.subcommand())
    {
        connect.from_env = origin::FromEnvironment::of(subcommand);
    }
    Ok(cli)
}

/// The connection flags of a command that talks to a real ensemble.
fn connect_args(command: &Command) -> Option<&args::ConnectArgs> {
    match command {
        Command::Run(args) => Some(&args.role.connect),
        Command::Worker(args) => Some(&args.connect),
        Command::Master(args) => Some(&args.connect),
        Command::Submit(args) => Some(&args.connect),
        Command::Wait(args) => Some(&args.connect),
        Command::Find(args) => Some(&args.connect),
        Command::Status(args) => Some(&args.connect),
        Command::Bench(args) => Some(&args.connect),
        Command::Demo(_) | Command::Explore(_) | Command::Replay(_) => None,
    }
}

fn connect_args_mut(command: &mut Command) -> Option<&mut args::ConnectArgs> {
    match command {
        Command::Run(args) => Some(&mut args.role.connect),
        Command::Worker(args) => Some(&mut args.connect),
        Command::Master(args) => Some(&mut args.connect),
        Command::Submit(args) => Some(&mut args.connect),
        Command::Wait(args) => Some(&mut args.connect),
        Command::Find(args) => Some(&mut args.connect),
        Command::Status(args) => Some(&mut args.connect),
        Command::Bench(args) => Some(&mut args.connect),
        Command::Demo(_) | Command::Explore(_) | Command::Replay(_) => None,
    }
}

fn execute(command: Command) -> anyhow::Result<Outcome> {
    // The simulator's commands run each simulation on a runtime of its own.
    match &command {
        Command::Demo(args) => {
            commands::demo::demo(args)?;
            return Ok(Outcome::Done);
        }
        Command::Explore(args) => return commands::explore::explore(args),
        Command::Replay(args) => return commands::replay::replay(args),
        _ => {}
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        match &command {
            Command::Run(args) => commands::role::run(args).await.map(|()| Outcome::Done),
            Command::Master(args) => commands::role::master(args).await.map(|()| Outcome::Done),
            Command::Worker(args) => commands::role::worker(args).await.map(|()| Outcome::Done),
            Command::Submit(args) => commands::submit::submit(args).await,
            Command::Wait(args) => commands::submit::wait(args).await,
            Command::Find(args) => commands::submit::find(args).await.map(|()| Outcome::Done),
            Command::Status(args) => commands::status::status(args).await.map(|()| Outcome::Done),
            Command::Bench(args) => commands::bench::bench(args).await.map(|()| Outcome::Done),
            Command::Demo(_) | Command::Explore(_) | Command::Replay(_) => {
                unreachable!("simulations run on their own runtimes")
            }
        }
    });
    // The command is over and said so. A blocking thread may still be at
    // work for a session left behind (resolving a host name to reconnect
    // to an ensemble that went away): dropping the runtime would wait for
    // it, for as long as the resolver takes.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_WAIT);
    outcome
}

/// The log filter `command` runs with when neither `--log` nor `RUST_LOG`
/// gives one. `--log`'s help names each: a test holds the two together.
fn default_log_filter(command: &Command) -> &'static str {
    match command {
        // A simulation's actors would log what its faults do to them
        // (an expiry warns that the worker joins again), seed after seed;
        // the trace and the checker already say all of it.
        Command::Explore(_) | Command::Replay(_) => "off",
        // A bench's actors would log every decision of every task, and a
        // demo's would repeat its trace (and break the quiet of `--quiet`).
        Command::Bench(_) | Command::Demo(_) => "warn",
        // A one-shot command would print the client library's session
        // lines (established, closed) around every answer; its own news
        // (a new session after an outage, say) still shows.
        Command::Submit(_) | Command::Wait(_) | Command::Find(_) | Command::Status(_) => {
            "info,zookeeper_client=warn"
        }
        _ => "info",
    }
}

/// How long a command's runtime waits for its blocking threads once the
/// command is over.
const RUNTIME_SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command with the connection flags has its sources read off
    /// clap's matches (which, in a debug build, panics on an id the
    /// command does not have), and a flag given is not from the
    /// environment.
    /// Every command, in the order `--help` lists them, each with the least
    /// it needs to parse.
    const EVERY_COMMAND: [&[&str]; 11] = [
        &["run"],
        &["master"],
        &["worker"],
        &["submit", "{}"],
        &["wait", "task-x"],
        &["find", "abc"],
        &["status"],
        &["demo"],
        &["explore", "--seeds", "1"],
        &["replay", "--seed", "1"],
        &["bench"],
    ];

    /// The commands that take the connection flags.
    const CONNECTING: [&str; 8] = [
        "run", "master", "worker", "submit", "wait", "find", "status", "bench",
    ];

    #[test]
    fn the_tests_lists_of_commands_are_whole() {
        let names: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|command| command.get_name().to_owned())
            .collect();
        let listed: Vec<&str> = EVERY_COMMAND.iter().map(|words| words[0]).collect();
        assert_eq!(names, listed, "EVERY_COMMAND names each command once");
        let connecting: Vec<String> = Cli::command()
            .get_subcommands()
            .filter(|command| {
                command
                    .get_arguments()
                    .any(|arg| arg.get_long() == Some("zk"))
            })
            .map(|command| command.get_name().to_owned())
            .collect();
        assert_eq!(connecting, CONNECTING);
    }

    #[test]
    fn every_command_with_connection_flags_notes_their_sources() {
        let commands = EVERY_COMMAND
            .into_iter()
            .filter(|words| CONNECTING.contains(&words[0]));
        for words in commands {
            let args = ["zkdist"]
                .iter()
                .chain(words)
                .chain(&["--zk", "h:1", "--root", "/r", "--auth", "u:p"]);
            let mut cli = parse_from(args).unwrap_or_else(|e| panic!("{words:?}: {e}"));
            let connect = connect_args_mut(&mut cli.command).expect("connection flags");
            assert_eq!(
                connect.from_env,
                origin::FromEnvironment::default(),
                "{words:?}"
            );
            assert_eq!(connect.zk_name(), "--zk");
        }
    }

    /// `--log`'s help names every command's default filter with the
    /// command, as `default_log_filter` has it.
    #[test]
    fn the_log_help_names_each_command_s_default() {
        let help = Cli::command()
            .get_arguments()
            .find(|arg| arg.get_long() == Some("log"))
            .and_then(|arg| arg.get_help())
            .expect("--log has a help text")
            .to_string();
        for words in EVERY_COMMAND {
            let cli = parse_from(["zkdist"].iter().chain(words)).unwrap();
            let filter = default_log_filter(&cli.command);
            let name = words[0];
            let said = match filter {
                "info" => help.starts_with("Log filter") && help.contains("Default: info;"),
                _ => {
                    let at = help
                        .find(&format!("; {filter} for"))
                        .unwrap_or_else(|| panic!("{filter:?} is not named: {help}"));
                    let clause = help[at + 2..].split(';').next().unwrap();
                    clause.contains(name)
                }
            };
            assert!(said, "{name}: default {filter:?}, help: {help}");
        }
    }
}
