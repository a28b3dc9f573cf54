//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use zkdist_benches::ensemble::DEFAULT_WARMUP_TASKS;
use zkdist_master::TaskDiscovery;

use crate::origin::{FromEnvironment, setting_name};

#[derive(Debug, Parser)]
#[command(
    name = "zkdist",
    version,
    about = "Distribute tasks over a pool of workers through ZooKeeper"
)]
pub struct Cli {
    /// Log filter (tracing's env-filter syntax); RUST_LOG overrides it.
    /// Default: info; info,zookeeper_client=warn for submit, wait, find and
    /// status, without the client library's session lines; warn for bench
    /// and demo, whose actors would log every decision of every task; off
    /// for explore and replay, whose simulated actors would log every fault
    /// of every seed (the trace holds it all: `--log warn` shows their
    /// warnings again).
    #[arg(long, global = true)]
    pub log: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a master candidate and a worker, each on a session of its own.
    Run(RunArgs),
    /// Run a master candidate: lead if nobody does, else stand by and take
    /// over when the master goes.
    Master(MasterArgs),
    /// Run as a worker (re-joining under a new id if its session expires).
    Worker(RoleArgs),
    /// Queue a task; with --wait, print its result.
    Submit(SubmitArgs),
    /// Wait for a task's result and print it.
    Wait(WaitArgs),
    /// Look submissions up by their tokens (as an in-doubt submission's
    /// error names them): print each token with the task it made, or
    /// `none` if it made none, so that, once the submitting session has
    /// ended (a killed process's ends at its timeout), submitting it again
    /// cannot queue it twice.
    Find(FindArgs),
    /// Show workers, their assignments, and pending and finished task counts.
    Status(StatusArgs),
    /// Run a master, workers and a client on the embedded simulated
    /// ZooKeeper, printing the trace and a summary.
    Demo(DemoArgs),
    /// Run many seeded random schedules on the simulator with the invariant
    /// checker on, and report every violation with its replay command.
    Explore(ExploreArgs),
    /// Re-run one seed's schedule exactly and print its whole trace (and
    /// its violation, if any).
    Replay(ReplayArgs),
    /// Measure zkdist on a real ensemble: the server's raw write ceiling,
    /// then a master, workers and a client in this process working through
    /// tasks; prints tasks/s, latencies, writes per task and the
    /// efficiency. Works under a root of its own (default /zkdist-bench),
    /// which must not exist and is deleted afterwards.
    // Only `--root` names the bench's root, never ZKDIST_ROOT: a shell set
    // up to run a deployment must not point the bench, which deletes its
    // root when done, at the deployment's root.
    #[command(mut_arg("root", |root| root.default_value(BENCH_ROOT).env(None)))]
    Bench(BenchArgs),
}

/// Where `zkdist bench` works unless told otherwise.
/// The connect string used when neither `--zk` nor `ZKDIST_ZK` names one.
pub const DEFAULT_ZK: &str = "127.0.0.1:2181";

pub const BENCH_ROOT: &str = "/zkdist-bench";

#[derive(Debug, Args, Clone)]
pub struct ConnectArgs {
    /// ZooKeeper connect string: `host:port[,host:port...][/chroot]`.
    #[arg(long = "zk", env = "ZKDIST_ZK", default_value = DEFAULT_ZK)]
    pub zk: String,
    /// The node under which zkdist keeps its state.
    #[arg(long, env = "ZKDIST_ROOT", default_value = zkdist_coord::DEFAULT_ROOT)]
    pub root: String,
    /// How long the ensemble keeps this process's session without contact
    /// (the server holds it between its minSessionTimeout and
    /// maxSessionTimeout).
    #[arg(
        long,
        default_value_t = 10_000,
        value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=i32::MAX as u64),
    )]
    pub session_timeout_ms: u64,
    /// How long to try to reach the ensemble before giving up.
    #[arg(
        long,
        default_value_t = 10_000,
        value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..),
    )]
    pub connect_timeout_ms: u64,
    /// Digest credentials, USER:PASSWORD, neither empty.
    #[arg(long, env = "ZKDIST_AUTH", value_parser = parse_auth)]
    pub auth: Option<String>,
    /// The largest listing reply to accept, in bytes (what a Java client
    /// calls jute.maxbuffer). The default, 64 MiB, holds some 1.8 million
    /// task names, so that a master can start on, or reconcile, a large
    /// backlog; 1048576, a Java client's default and the least allowed,
    /// holds some 29,000. (The library and the simulator keep a Java
    /// client's default, so that what they accept is what any client does.)
    #[arg(
        long,
        env = "ZKDIST_MAX_REPLY_BYTES",
        default_value_t = zkdist_coord::LARGE_REPLY_BYTES,
        value_parser = reply_limit_parser(),
    )]
    pub max_reply_bytes: usize,
    /// Which of these came from the environment, for errors to name them
    /// as given (filled in by `main` from clap's matches).
    #[arg(skip)]
    pub from_env: FromEnvironment,
}

impl ConnectArgs {
    /// `--zk`, or `ZKDIST_ZK` if the connect string came from it.
    pub fn zk_name(&self) -> &'static str {
        setting_name("--zk", "ZKDIST_ZK", self.from_env.zk)
    }

    /// The connect string, quoted, with where it came from if that was
    /// `ZKDIST_ZK`: for messages about the ensemble it names.
    pub fn zk_shown(&self) -> String {
        if self.from_env.zk {
            format!("{:?} (from ZKDIST_ZK)", self.zk)
        } else {
            format!("{:?}", self.zk)
        }
    }

    /// `--root`, or `ZKDIST_ROOT` if the root came from it.
    pub fn root_name(&self) -> &'static str {
        setting_name("--root", "ZKDIST_ROOT", self.from_env.root)
    }

    /// `--auth`, or `ZKDIST_AUTH` if the credentials came from it.
    pub fn auth_name(&self) -> &'static str {
        setting_name("--auth", "ZKDIST_AUTH", self.from_env.auth)
    }

    /// `zkdist WORDS` with what reaches the same deployment as this command
    /// (its `--zk` and `--root`), in backquotes, for a message that tells
    /// the user what to run next: a lookup run without them could look in
    /// another deployment and answer `none` for a task that exists. Both
    /// are named even when they are the defaults, since `ZKDIST_ZK` or
    /// `ZKDIST_ROOT` in the shell would otherwise override them.
    /// Credentials are never printed; a note asks for the same `--auth`.
    pub fn command_line(&self, words: &str) -> String {
        let mut line = format!(
            "`zkdist {words} --zk {} --root {}`",
            shell_word(&self.zk),
            shell_word(&self.root)
        );
        if self.auth.is_some() {
            line.push_str(&format!(" (with the same {})", self.auth_name()));
        }
        line
    }
}

/// `text` as one word of a POSIX shell command line: as it is when it
/// holds nothing a shell treats specially, else in single quotes.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:,@+=%".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// `--auth` (or `ZKDIST_AUTH`): `USER:PASSWORD`, neither part empty (an
/// unset variable in `--auth user:$PASSWORD` would otherwise lay out a
/// tree anyone may change who guesses the empty password), and no `:` in
/// the user, where it would be taken for the separator.
fn parse_auth(text: &str) -> Result<String, String> {
    let Some((user, password)) = text.split_once(':') else {
        return Err("expected USER:PASSWORD".into());
    };
    if user.is_empty() {
        return Err("the user (before the ':') is empty".into());
    }
    if password.is_empty() {
        return Err(format!("the password of user {user:?} is empty"));
    }
    Ok(text.to_owned())
}

/// `--max-reply-bytes` takes no less than a Java client's default, which
/// clap then names in its error.
fn reply_limit_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(zkdist_coord::MIN_REPLY_BYTES as u64..)
}

/// How a master candidate works.
#[derive(Debug, Args, Clone, Copy)]
pub struct MasterOptions {
    /// How the master learns of tasks: `watch` (a persistent recursive
    /// watch on tasks/, listed only at start and after a reconnection) or
    /// `listing` (the founding design: the whole of tasks/ listed again on
    /// every change, which costs a listing of the whole queue per task and
    /// stops working once a listing passes --max-reply-bytes).
    #[arg(long, default_value_t = TaskDiscovery::default())]
    pub discovery: TaskDiscovery,
}

#[derive(Debug, Args)]
pub struct MasterArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub master: MasterOptions,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub role: RoleArgs,
    #[command(flatten)]
    pub master: MasterOptions,
}

#[derive(Debug, Args)]
pub struct RoleArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Let this worker run `exec` tasks (commands from the task payload).
    #[arg(long)]
    pub allow_exec: bool,
    /// Stop any task still running after this many milliseconds: the run
    /// is dropped (an `exec` command is killed) and the task fails, its
    /// result naming the limit. Without it a task runs as long as its
    /// payload asks (`exec`'s own `timeout_ms`, `pi`'s samples).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub task_time_limit_ms: Option<u64>,
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The task payload (JSON with a "kind"); `-` or nothing reads stdin.
    #[arg(conflicts_with = "file")]
    pub payload: Option<String>,
    /// Read the payload from this file.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Read one payload per line (JSON Lines; blank lines are skipped) and
    /// queue them all, in order, with many creates in flight instead of a
    /// round trip each. Every line is checked first: if one is refused,
    /// none is sent. Prints one line per payload: its task id; `-` if it
    /// was not queued; `?` if it may or may not have been (its session
    /// ended unanswered and the lookup failed: `zkdist find TOKEN` tells,
    /// before it is sent again). The error names the lines of both.
    #[arg(long, conflicts_with = "wait")]
    pub lines: bool,
    /// Wait for the result and print it.
    #[arg(long)]
    pub wait: bool,
    /// Skip checking the payload against the built-in kinds (for workers
    /// that run kinds this binary does not know).
    #[arg(long)]
    pub no_check: bool,
    /// With --wait, delete the task and its result once printed.
    #[arg(long, requires = "wait", conflicts_with = "lines")]
    pub cleanup: bool,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The task's id, as printed by submit (e.g.
    /// task-08b4fda8c892b50e-0000000042).
    pub task: String,
    /// Delete the task and its result once printed.
    #[arg(long)]
    pub cleanup: bool,
}

#[derive(Debug, Args)]
pub struct FindArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The tokens: 16 hex digits each, alone, as `task-<token>-`, or in a
    /// task id as submit printed it.
    #[arg(required = true)]
    pub tokens: Vec<String>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub master: MasterOptions,
    /// Tasks in the measured stream.
    #[arg(long, default_value_t = 5_000)]
    pub tasks: u64,
    /// Workers, each on a session of its own.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Tasks queued (with the master running) before the workers start;
    /// their drain is measured on its own, before the stream.
    #[arg(long, default_value_t = 0)]
    pub backlog: u64,
    /// Tasks the client keeps submitted but unfinished [default: four
    /// times --workers].
    #[arg(long)]
    pub in_flight: Option<u64>,
    /// Tasks streamed before the measured stream, and not measured: a
    /// freshly started server is slower until its JIT has compiled.
    #[arg(long, default_value_t = DEFAULT_WARMUP_TASKS)]
    pub warmup_tasks: u64,
    /// Nodes the raw ceiling creates, then deletes.
    #[arg(long, default_value_t = 10_000)]
    pub raw_nodes: u64,
    /// Requests in flight on the raw ceiling's session (and while queueing
    /// the backlog and cleaning up).
    #[arg(long, default_value_t = 1_000)]
    pub raw_in_flight: usize,
    /// Print a machine-readable report (JSON) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Seed of the simulation: the same seed prints the same trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    #[arg(long, default_value_t = 12)]
    pub tasks: usize,
    /// One-way link delay, uniform in MIN..=MAX microseconds.
    #[arg(long, default_value = "200..2000", value_parser = parse_range_us)]
    pub latency_us: (u64, u64),
    /// Print only the summary, not the trace.
    #[arg(long)]
    pub quiet: bool,
}

/// What each explored seed runs; `replay` takes the same flags.
#[derive(Debug, Args, Clone)]
pub struct ScheduleArgs {
    #[arg(long, default_value_t = 3)]
    pub workers: usize,
    #[arg(long, default_value_t = 20)]
    pub tasks: usize,
    /// none: zero latency (seeded tie-breaks and workload only); latency:
    /// random link latencies too; all: latencies plus random link cuts,
    /// session expiries and crashes.
    #[arg(long, default_value = "none")]
    pub faults: zkdist_scenarios::Faults,
    /// How the masters learn of tasks (see `zkdist master --help`).
    #[arg(long, default_value_t = TaskDiscovery::default())]
    pub discovery: TaskDiscovery,
    /// How many of the workers (w1, w2...) are of a build older than inline
    /// payloads, as in the middle of a rolling upgrade: they register naming
    /// no assignment format and read an assignment's whole data as a task
    /// name. At most --workers.
    #[arg(long, default_value_t = 0)]
    pub old_workers: usize,
    /// The first task's sequence number: ZooKeeper's counter under tasks/
    /// starts there instead of 0 (the layout is then created before the
    /// run). It is a 32-bit int whose numbers go on at -2147483648 after
    /// 2147483647: 2147483637 runs the default 20 tasks across that wrap.
    /// Negative numbers take the form --first-task-sequence=-5.
    #[arg(long)]
    pub first_task_sequence: Option<i32>,
    /// Make the first tasks submitted, two for each worker, last from a
    /// quarter of the session timeout (the grace a cut-off worker keeps
    /// its task for) to twice it, so that cuts find workers in the middle
    /// of long tasks.
    #[arg(long)]
    pub long_tasks: bool,
}

#[derive(Debug, Args)]
pub struct ExploreArgs {
    /// How many seeds to run.
    #[arg(long)]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// Threads running seeds (each seed alone on its own runtime); default:
    /// the machine's cores.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Print a machine-readable summary (JSON) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[arg(long)]
    pub seed: u64,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// Print only the violation (or that there was none), not the trace.
    #[arg(long)]
    pub quiet: bool,
}

fn parse_range_us(text: &str) -> Result<(u64, u64), String> {
    let (min, max) = text
        .split_once("..")
        .ok_or_else(|| format!("expected MIN..MAX in microseconds, got {text:?}"))?;
    let parse = |s: &str| s.trim().parse::<u64>().map_err(|e| format!("{s:?}: {e}"));
    let (min, max) = (parse(min)?, parse(max)?);
    if min > max {
        return Err(format!("MIN {min} is above MAX {max}"));
    }
    Ok((min, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect_args(zk: &str, root: &str, auth: Option<&str>) -> ConnectArgs {
        ConnectArgs {
            zk: zk.into(),
            root: root.into(),
            session_timeout_ms: 10_000,
            connect_timeout_ms: 10_000,
            auth: auth.map(str::to_owned),
            max_reply_bytes: zkdist_coord::LARGE_REPLY_BYTES,
            from_env: FromEnvironment::default(),
        }
    }

    #[test]
    fn a_command_line_to_run_next_reaches_the_same_deployment() {
        assert_eq!(
            connect_args(DEFAULT_ZK, zkdist_coord::DEFAULT_ROOT, None).command_line("find abc"),
            "`zkdist find abc --zk 127.0.0.1:2181 --root /zkdist`"
        );
        assert_eq!(
            connect_args("10.0.0.1:2181,10.0.0.2:2181/apps", "/jobs", None)
                .command_line("wait task-x"),
            "`zkdist wait task-x --zk 10.0.0.1:2181,10.0.0.2:2181/apps --root /jobs`"
        );
        assert_eq!(
            connect_args(DEFAULT_ZK, "/my jobs/it's", Some("ops:secret")).command_line("find abc"),
            r"`zkdist find abc --zk 127.0.0.1:2181 --root '/my jobs/it'\''s'` (with the same --auth)"
        );
    }
}
