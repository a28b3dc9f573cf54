//! What the binary's tests share: running `zkdist` as a child process with
//! a hang guard, and long-running role processes that are always killed
//! when a test fails.

#![allow(dead_code)] // Each test binary uses its own part of this module.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use zkdist_coord::zk::{ZkConfig, ZkSession, testing};
use zkdist_coord::{Coordinator, Stat, Watch, ZkError, ZkResult};

/// The binary under test, built by cargo for this test run.
pub const ZKDIST: &str = env!("CARGO_BIN_EXE_zkdist");

/// The longest a command may run before the test calls it hung: a guard,
/// not a speed check.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// A directory of its own for one test's files; removed when the test
/// passes, kept (and named) when it fails.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "zkdist-cli-test-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test files kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `zkdist ARGS...` with a clean environment: no inherited zkdist settings
/// or log filter, logs without colour.
pub fn zkdist(args: &[&str]) -> Command {
    let mut command = Command::new(ZKDIST);
    command
        .args(args)
        .env_remove("ZKDIST_ZK")
        .env_remove("ZKDIST_ROOT")
        .env_remove("ZKDIST_AUTH")
        .env_remove("ZKDIST_MAX_REPLY_BYTES")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

/// How a command ended and what it printed.
#[derive(Debug)]
pub struct Finished {
    pub args: Vec<String>,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Asserts the exit code, showing everything the command printed if it
    /// is not the expected one.
    pub fn expect_code(&self, code: i32) -> &Finished {
        assert_eq!(
            self.status.code(),
            Some(code),
            "zkdist {:?} ended with {}\nstdout:\n{}\nstderr:\n{}",
            self.args,
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Asserts that stderr mentions every needle.
    pub fn expect_stderr(&self, needles: &[&str]) -> &Finished {
        for needle in needles {
            assert!(
                self.stderr.contains(needle),
                "zkdist {:?}: stderr does not mention {needle:?}:\n{}",
                self.args,
                self.stderr
            );
        }
        self
    }

    pub fn stdout_lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
}

/// Runs `zkdist ARGS...` to its end, killing it and failing the test if it
/// runs past [`HANG_GUARD`].
pub fn run(args: &[&str]) -> Finished {
    run_with_stdin(args, None)
}

/// As [`run`], with `stdin` as the command's standard input.
pub fn run_with_stdin(args: &[&str], stdin: Option<&[u8]>) -> Finished {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let scratch = Scratch::new(&format!("run{call}"));
    let (out_path, err_path) = (scratch.path("stdout"), scratch.path("stderr"));
    let mut command = zkdist(args);
    command
        .stdout(File::create(&out_path).expect("create the stdout file"))
        .stderr(File::create(&err_path).expect("create the stderr file"));
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = Guarded(command.spawn().expect("start zkdist"));
    if let Some(bytes) = stdin {
        let mut pipe = child.0.stdin.take().expect("stdin is piped");
        pipe.write_all(bytes).expect("write the command's stdin");
    }
    let status = child.wait_within(HANG_GUARD).unwrap_or_else(|| {
        panic!(
            "zkdist {args:?} hung past {HANG_GUARD:?}; stderr so far:\n{}",
            read(&err_path)
        )
    });
    Finished {
        args: args.iter().map(|s| s.to_string()).collect(),
        status,
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| format!("<cannot read {}: {e}>", path.display()))
}

/// A child process killed (SIGKILL) and reaped when dropped unless it has
/// ended, so that a failing test leaves no process behind.
struct Guarded(Child);

impl Guarded {
    /// Waits until the process ends, up to `bound`; `None` if it is still
    /// running then.
    fn wait_within(&mut self, bound: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = self.0.try_wait().expect("poll the child") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A long-running `zkdist` process (`run`, `master`, `worker`), its output
/// going to a log file. Killed when dropped if it is still running.
pub struct Role {
    pub name: String,
    child: Guarded,
    log: PathBuf,
}

impl Role {
    pub fn spawn(name: &str, args: &[&str], scratch: &Scratch) -> Role {
        Role::spawn_with(name, zkdist(args), scratch)
    }

    /// [`Role::spawn`], started with SIGHUP ignored, as `nohup` starts a
    /// process: bash ignores it, then becomes zkdist.
    pub fn spawn_ignoring_hangup(name: &str, args: &[&str], scratch: &Scratch) -> Role {
        let mut wrapped = Command::new("bash");
        wrapped
            .args(["-c", r#"trap "" HUP; exec "$0" "$@""#, ZKDIST])
            .args(args)
            .stdin(Stdio::null());
        // The environment `zkdist` would be given.
        for (key, value) in zkdist(args).get_envs() {
            match value {
                Some(value) => wrapped.env(key, value),
                None => wrapped.env_remove(key),
            };
        }
        Role::spawn_with(name, wrapped, scratch)
    }

    /// Starts `command` (made with [`zkdist`], then given what the test
    /// needs) as a role.
    pub fn spawn_with(name: &str, command: Command, scratch: &Scratch) -> Role {
        let log = scratch.path(&format!("{name}.log"));
        let file = File::create(&log).expect("create the role's log");
        let output = file.try_clone().expect("clone the log file");
        Role::start(name, command, log, output.into(), file.into())
    }

    /// Starts `command` (made with [`zkdist`]) as a role whose standard
    /// output and error are a pipe whose reader has gone: every write to
    /// them fails, as after the terminal of an ssh session that dropped or
    /// a log pipe whose reader died. Its log stays empty.
    pub fn spawn_unheard(name: &str, command: Command, scratch: &Scratch) -> Role {
        let log = scratch.path(&format!("{name}.log"));
        File::create(&log).expect("create the role's (empty) log");
        let (reader, writer) = std::io::pipe().expect("make a pipe");
        drop(reader);
        let output = writer.try_clone().expect("clone the pipe's writer");
        Role::start(name, command, log, output.into(), writer.into())
    }

    /// Starts `command` with `stdout` and `stderr`, `log` being where
    /// [`Role::log`] reads what it printed.
    fn start(name: &str, mut command: Command, log: PathBuf, stdout: Stdio, stderr: Stdio) -> Role {
        let args: Vec<_> = command.get_args().map(|a| a.to_owned()).collect();
        let child = command
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("start zkdist {args:?}: {e}"));
        Role {
            name: name.to_owned(),
            child: Guarded(child),
            log,
        }
    }

    /// Everything the process printed so far.
    pub fn log(&self) -> String {
        read(&self.log)
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.0.try_wait(), Ok(None))
    }

    /// Sends SIGTERM, by the process's id.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// The process's id.
    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Sends `SIG<signal>` (`"KILL"`, `"STOP"`, `"CONT"`...) by the
    /// process's id, with bash's built-in `kill`: the `kill` program comes
    /// from procps, which minimal Debian images leave out.
    pub fn signal(&self, signal: &str) {
        let pid = self.pid().to_string();
        let status = Command::new("bash")
            .args(["-c", r#"kill -"$1" "$2""#, "kill", signal, &pid])
            .status()
            .expect("run bash's kill");
        assert!(
            status.success(),
            "kill -{signal} {pid} ({}) failed",
            self.name
        );
    }

    /// Waits for the process to end, failing the test if it runs past
    /// [`HANG_GUARD`].
    pub fn wait_exit(&mut self) -> ExitStatus {
        self.child.wait_within(HANG_GUARD).unwrap_or_else(|| {
            panic!(
                "{} did not exit within {HANG_GUARD:?}; its log:\n{}",
                self.name,
                self.log()
            )
        })
    }
}

/// Stops every role with SIGTERM and checks each exits with status 0.
pub fn terminate_all(roles: &mut [Role]) {
    for role in roles.iter() {
        role.terminate();
    }
    for role in roles.iter_mut() {
        let status = role.wait_exit();
        assert!(
            status.success(),
            "{} ended with {status} after SIGTERM; its log:\n{}",
            role.name,
            role.log()
        );
    }
}

/// Calls `probe` until it returns `Some`, failing the test with `what` if
/// that takes past [`HANG_GUARD`].
pub fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {HANG_GUARD:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A test of the 3-node ensemble that `test(connect, ensemble_dir)` runs:
/// it needs `ZKDIST_TEST_ZK` (the ensemble's connect string) and
/// `ZKDIST_TEST_ENSEMBLE_DIR` (its `scripts/zk ensemble` directory, to
/// kill and restart its nodes). Without them it is reported as ignored,
/// saying so on stderr; run with `--include-ignored` anyway (as the
/// ensemble lane does), it fails naming the variable it lacks.
pub fn ensemble_trial(
    name: &'static str,
    test: impl FnOnce(String, PathBuf) + Send + 'static,
) -> libtest_mimic::Trial {
    use zkdist_coord::zk::testing;
    let server = testing::test_zk();
    let ensemble_dir = testing::test_ensemble_dir();
    let ignored = server.is_none() || ensemble_dir.is_none();
    if ignored {
        eprintln!(
            "{name} ignored: it needs ZKDIST_TEST_ZK and ZKDIST_TEST_ENSEMBLE_DIR (a 3-node \
             ensemble; scripts/test-all's ensemble lane sets both)"
        );
    }
    libtest_mimic::Trial::test(name, move || match (server, ensemble_dir) {
        (Some(connect), Some(dir)) => {
            test(connect, dir);
            Ok(())
        }
        (None, _) => Err(testing::NO_SERVER.into()),
        (_, None) => Err(
            "ZKDIST_TEST_ENSEMBLE_DIR is not set: it names a 3-node ensemble \
                          started by `scripts/zk ensemble`"
                .into(),
        ),
    })
    .with_ignored_flag(ignored)
}

// ---------------------------------------------------------------------------
// The tests' own view of the tree, through faults.

/// How long an [`Observer`] read may keep failing before the test fails.
pub const OBSERVER_PATIENCE: Duration = Duration::from_secs(90);

/// A session of the test's own, for looking at the tree. Reads are retried
/// through connection losses (the ensemble loses its leader on purpose)
/// and the session is replaced if it ends.
pub struct Observer {
    runtime: tokio::runtime::Runtime,
    config: ZkConfig,
    zk: ZkSession,
}

impl Observer {
    pub fn connect(connect: &str) -> Observer {
        let runtime = testing::runtime();
        let config = testing::config(connect);
        let (zk, _events) = runtime
            .block_on(ZkSession::connect(&config))
            .unwrap_or_else(|e| panic!("connect to {connect}: {e}"));
        Observer {
            runtime,
            config,
            zk,
        }
    }

    /// Runs one read until it gets an answer; `None` for a missing node.
    /// Fails the test past [`OBSERVER_PATIENCE`].
    pub fn read<T, F, Fut>(&mut self, what: &str, read: F) -> Option<T>
    where
        F: Fn(ZkSession) -> Fut,
        Fut: Future<Output = ZkResult<T>>,
    {
        let deadline = Instant::now() + OBSERVER_PATIENCE;
        loop {
            match self.runtime.block_on(read(self.zk.clone())) {
                Ok(found) => return Some(found),
                Err(ZkError::NoNode { .. }) => return None,
                Err(error) if Instant::now() >= deadline => panic!("{what}: {error}"),
                Err(error) if error.is_outcome_unknown() => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(error) if error.is_session_fatal() => {
                    if let Ok((zk, _events)) =
                        self.runtime.block_on(ZkSession::connect(&self.config))
                    {
                        self.zk = zk;
                    }
                }
                Err(error) => panic!("{what}: {error}"),
            }
        }
    }

    pub fn stat(&mut self, path: &str) -> Option<Stat> {
        let path = path.to_owned();
        self.read(&format!("exists {path}"), |zk| {
            let path = path.clone();
            async move {
                zk.exists(&path, Watch::No)
                    .await?
                    .ok_or(ZkError::NoNode { path })
            }
        })
    }

    /// The children's names, sorted.
    pub fn children(&mut self, path: &str) -> Option<Vec<String>> {
        let path = path.to_owned();
        self.read(&format!("get_children {path}"), |zk| {
            let path = path.clone();
            async move {
                let (mut children, _) = zk.get_children(&path, Watch::No).await?;
                children.sort();
                Ok(children)
            }
        })
    }

    pub fn data(&mut self, path: &str) -> Option<Vec<u8>> {
        self.data_and_stat(path).map(|(data, _)| data)
    }

    pub fn data_and_stat(&mut self, path: &str) -> Option<(Vec<u8>, Stat)> {
        let path = path.to_owned();
        self.read(&format!("get_data {path}"), |zk| {
            let path = path.clone();
            async move { zk.get_data(&path, Watch::No).await }
        })
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        let _ = self.runtime.block_on(self.zk.close());
    }
}
