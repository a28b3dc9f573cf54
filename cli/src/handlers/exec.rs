//! The `exec` task: run a command line, return its exit status and capped
//! output. Off unless the worker was started with `--allow-exec`, because it
//! lets anyone who can submit a task run programs on the worker's machine.

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::prelude::BASE64_STANDARD;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::HandlerError;

pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// A task may ask for up to a day; longer is almost certainly a mistake.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecTask {
    #[allow(dead_code)]
    kind: String,
    /// The program and its arguments; run directly, not through a shell.
    argv: Vec<String>,
    #[serde(default = "default_timeout_ms")]
    timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

/// Read back strictly (no other fields), so that only an `exec` task's
/// result is taken for one.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExecResult {
    /// The exit code, `None` when the process was killed by a signal or by
    /// the timeout.
    pub exit_code: Option<i32>,
    /// The signal that killed the process (9 for SIGKILL, the OOM
    /// killer's), `None` when it exited or timed out. Results written
    /// before the field existed read as `None`.
    #[serde(default)]
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// The standard output as text: bytes that are not UTF-8 are shown as
    /// U+FFFD, and kept exactly in [`ExecResult::stdout_base64`].
    pub stdout: String,
    /// The standard output's exact bytes (standard base64, padded), only
    /// when they are not UTF-8: absent, `stdout` holds them exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_base64: Option<String>,
    /// The standard error, as `stdout` holds the output.
    pub stderr: String,
    /// The standard error's exact bytes when they are not UTF-8, as
    /// `stdout_base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_base64: Option<String>,
    /// True when stdout or stderr was cut to fit the result size limit.
    pub truncated: bool,
}

/// How the command of an `exec` task whose result is `output` failed, or
/// `None` if it exited with 0 or `output` is not an `exec` result. The
/// task itself succeeded (its result carries the command's output), but a
/// script that waits for it must be able to tell from the exit status.
pub fn command_failure(output: &[u8]) -> Option<String> {
    let result: ExecResult = serde_json::from_slice(output).ok()?;
    match result {
        ExecResult {
            exit_code: Some(0), ..
        } => None,
        ExecResult {
            timed_out: true, ..
        } => Some("its command ran past its timeout_ms and was killed".to_owned()),
        ExecResult {
            exit_code: Some(code),
            ..
        } => Some(format!("its command exited with {code}")),
        ExecResult {
            signal: Some(signal),
            ..
        } => Some(format!("its command was killed by signal {signal}")),
        ExecResult { .. } => Some("its command was killed by a signal".to_owned()),
    }
}

pub fn parse(payload: &[u8]) -> Result<ExecTask, HandlerError> {
    let task: ExecTask =
        serde_json::from_slice(payload).map_err(|e| HandlerError::InvalidPayload {
            kind: "exec",
            reason: e.to_string(),
        })?;
    if task.argv.is_empty() || task.argv[0].is_empty() {
        return Err(HandlerError::InvalidPayload {
            kind: "exec",
            reason: "argv must name a program".into(),
        });
    }
    // No program argument can hold a NUL byte (the system takes each as a
    // C string): refused here, at submit time, rather than by the worker
    // that fails to start it.
    if let Some(index) = task.argv.iter().position(|arg| arg.contains('\0')) {
        return Err(HandlerError::InvalidPayload {
            kind: "exec",
            reason: format!("argv[{index}] holds a NUL byte, which no program argument can"),
        });
    }
    if task.timeout_ms == 0 || task.timeout_ms > MAX_TIMEOUT_MS {
        return Err(HandlerError::InvalidPayload {
            kind: "exec",
            reason: format!(
                "timeout_ms must be in 1..={MAX_TIMEOUT_MS}, got {}",
                task.timeout_ms
            ),
        });
    }
    Ok(task)
}

/// Runs the task. The output is cut (and reported as truncated) so that
/// the result, encoded, takes at most `limit_bytes`: one znode. Either
/// stream may use the whole room if the other leaves it.
///
/// The command runs in a process group of its own. A Ctrl-C at the
/// worker's terminal is meant for the worker, which finishes the task in
/// hand; in the worker's group the command would be interrupted by it and
/// its broken result kept as final. The group is killed whole: when the
/// command exits (what it left running in the background would hold the
/// output pipes open, and outlive the task), on the timeout, and when the
/// task is abandoned (this future dropped). The task ends when the command
/// does: a process it started outside its group may hold the output
/// pipes open, and is given [`OUTPUT_GRACE_MS`] before they are let go.
///
/// A worker killed outright (SIGKILL, the OOM killer) runs none of that, and
/// its task is then given to another worker when its session expires: the
/// kernel kills the command when the worker dies
/// ([`kill_when_the_worker_dies`]), so that the task does not run twice at
/// once. Processes the command started itself are not reached that way,
/// nor is a set-user-ID program.
pub async fn run(task: &ExecTask, limit_bytes: usize) -> Result<ExecResult, HandlerError> {
    let mut child = command_for(task)
        .spawn()
        .map_err(|e| HandlerError::Failed(format!("cannot start {:?}: {e}", task.argv[0])))?;
    let group = ProcessGroup::led_by(&child);
    // Either stream may fill the whole budget if the other is short: each
    // keeps up to all of it, and the two are cut to fit once escaped.
    let output_budget_bytes = limit_bytes.saturating_sub(RESULT_FRAME_BYTES);
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut out = Capped::new(output_budget_bytes);
    let mut err = Capped::new(output_budget_bytes);
    // The command's exit, not its output's end, ends the task: a process
    // it started outside its group (`setsid`, a daemon) may hold the pipes
    // open for ever, and would otherwise hold the task until its timeout
    // and hide the exit status. Once the command has exited (or ran past
    // its timeout) and its group is killed, the output still in the pipes
    // is read for a short grace, and then the pipes are let go.
    let (exited_sender, exited) = tokio::sync::oneshot::channel::<()>();
    let waiting = async {
        let timeout = Duration::from_millis(task.timeout_ms);
        let status = tokio::time::timeout(timeout, child.wait()).await;
        group.kill();
        drop(exited_sender);
        status
    };
    let reading = async {
        let to_the_end = async { tokio::try_join!(out.fill_from(stdout), err.fill_from(stderr)) };
        let grace_over = async {
            // Sent or dropped, the command has ended either way.
            exited.await.ok();
            tokio::time::sleep(Duration::from_millis(OUTPUT_GRACE_MS)).await;
        };
        tokio::select! {
            biased;
            read = to_the_end => read.map(|_| true),
            () = grace_over => Ok(false),
        }
    };
    let (read, status) = tokio::join!(reading, waiting);
    let read_to_the_end =
        read.map_err(|e| HandlerError::Failed(format!("reading the output: {e}")))?;
    if !read_to_the_end {
        tracing::warn!(
            program = %task.argv[0],
            "the command ended, but a process it started outside its group still holds its \
             output open: the result has the output read until {OUTPUT_GRACE_MS} ms after"
        );
    }
    let (exit_code, signal, timed_out) = match status {
        Ok(status) => {
            let status = status
                .map_err(|e| HandlerError::Failed(format!("waiting for the process: {e}")))?;
            (status.code(), status.signal(), false)
        }
        Err(_elapsed) => (None, None, true),
    };
    let read_truncated = out.truncated || err.truncated;
    let mut stdout = out.into_bytes();
    let mut stderr = err.into_bytes();
    let cut = fit_streams(&mut stdout, &mut stderr, output_budget_bytes);
    let (stdout, stdout_base64) = text_and_exact(stdout);
    let (stderr, stderr_base64) = text_and_exact(stderr);
    Ok(ExecResult {
        exit_code,
        signal,
        timed_out,
        stdout,
        stdout_base64,
        stderr,
        stderr_base64,
        truncated: read_truncated || cut,
    })
}

/// A stream as the result holds it: its text, and its exact bytes in
/// base64 when they are not UTF-8 (the text then shows each invalid
/// sequence as U+FFFD, so that a reader of `stdout` alone sees the rest).
fn text_and_exact(bytes: Vec<u8>) -> (String, Option<String>) {
    match String::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(not_utf8) => {
            let bytes = not_utf8.into_bytes();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            (text, Some(BASE64_STANDARD.encode(&bytes)))
        }
    }
}

/// The command `task` names, set up as [`run`] describes.
fn command_for(task: &ExecTask) -> Command {
    let mut command = Command::new(&task.argv[0]);
    command
        .args(&task.argv[1..])
        // The worker's credentials are not the command's: anyone may read
        // a result, and a command that prints its environment would
        // publish them. This keeps them from leaking by accident only: the
        // command runs as the worker's user, which can read the worker's
        // own environment and arguments under /proc.
        .env_remove(AUTH_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    kill_when_the_worker_dies(&mut command);
    command
}

/// How long the output is read after the command ended, for what is
/// still in the pipes. They empty at once unless a process the command
/// started outside its group holds them open: this is what such a process
/// can delay the result by.
const OUTPUT_GRACE_MS: u64 = 500;

/// The environment variable that carries the worker's credentials.
const AUTH_ENV: &str = "ZKDIST_AUTH";

/// Room kept in the result for its JSON beyond the two streams' text (the
/// field names, the exit code, the signal, the flags: under 120 bytes).
const RESULT_FRAME_BYTES: usize = 1024;

/// The bytes `c` takes inside a JSON string as serde_json writes it: the
/// quote, the backslash and the five short escapes take two, other
/// control characters six (`\u00XX`), everything else its UTF-8 length.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if u32::from(c) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

fn total_escaped_len(text: &str) -> usize {
    text.chars().map(escaped_len).sum()
}

/// The bytes a stream's `bytes` take in the result: its text escaped and,
/// when they are not UTF-8, their base64 besides (see [`text_and_exact`]).
fn stream_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(text) => total_escaped_len(text),
        Err(_) => total_escaped_len(&String::from_utf8_lossy(bytes)) + bytes.len().div_ceil(3) * 4,
    }
}

/// Cuts `bytes` so that the stream takes at most `budget_bytes` in the
/// result ([`stream_len`]). Text is cut at the last character boundary that
/// fits; other bytes at the longest prefix found to fit. True if anything
/// was cut.
fn cut_stream(bytes: &mut Vec<u8>, budget_bytes: usize) -> bool {
    if stream_len(bytes) <= budget_bytes {
        return false;
    }
    let fits = match std::str::from_utf8(bytes) {
        Ok(text) => {
            let mut used_bytes = 0;
            text.char_indices()
                .find(|&(_, c)| {
                    used_bytes += escaped_len(c);
                    used_bytes > budget_bytes
                })
                .map_or(text.len(), |(at, _)| at)
        }
        // A prefix's length in the result grows with it but for a few
        // bytes at its end (a sequence cut short is one U+FFFD until it is
        // whole), so a search by halves finds a prefix that fits, within a
        // character of the longest: `fits` always does, `over` never.
        Err(_) => {
            let (mut fits, mut over) = (0, bytes.len());
            while over - fits > 1 {
                let middle = fits + (over - fits) / 2;
                if stream_len(&bytes[..middle]) <= budget_bytes {
                    fits = middle;
                } else {
                    over = middle;
                }
            }
            fits
        }
    };
    bytes.truncate(fits);
    debug_assert!(stream_len(bytes) <= budget_bytes);
    true
}

/// Cuts the two streams so that, in the result, they take at most
/// `budget_bytes` together. A stream that needs less than half leaves the
/// rest to the other; two long ones get half each. True if anything was
/// cut.
fn fit_streams(stdout: &mut Vec<u8>, stderr: &mut Vec<u8>, budget_bytes: usize) -> bool {
    let out_bytes = stream_len(stdout);
    let err_bytes = stream_len(stderr);
    if out_bytes + err_bytes <= budget_bytes {
        return false;
    }
    let half_bytes = budget_bytes / 2;
    let (out_budget, err_budget) = if out_bytes <= half_bytes {
        (out_bytes, budget_bytes - out_bytes)
    } else if err_bytes <= half_bytes {
        (budget_bytes - err_bytes, err_bytes)
    } else {
        (half_bytes, budget_bytes - half_bytes)
    };
    let cut = cut_stream(stdout, out_budget) | cut_stream(stderr, err_budget);
    debug_assert!(cut, "over the budget, something is cut");
    debug_assert!(stream_len(stdout) + stream_len(stderr) <= budget_bytes);
    cut
}

/// Has the kernel SIGKILL the command when the thread that starts it ends.
/// That is the thread the worker's handlers are polled on: the one that
/// runs the binary's `block_on` (no handler is spawned as a task of its
/// own), which lives as long as the process. A handler moved to a thread
/// that can end first (a blocking-pool thread, or one `block_in_place`
/// hands over) would have its commands killed when that thread ends. The
/// kernel forgets the request when the command executes a set-user-ID,
/// set-group-ID or file-capability program (`sudo`, say): such a command
/// outlives a killed worker.
#[cfg(target_os = "linux")]
fn kill_when_the_worker_dies(command: &mut Command) {
    let worker = libc::pid_t::try_from(std::process::id()).expect("a pid fits in pid_t");
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: prctl and getppid are
    // plain system calls, and building an io::Error from a raw code
    // allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The worker may have died before the request took effect:
            // the command then belongs to another parent, and must not run.
            if libc::getppid() != worker {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Elsewhere, a worker killed outright leaves its command running.
#[cfg(not(target_os = "linux"))]
fn kill_when_the_worker_dies(_command: &mut Command) {}

/// A command's process group (its id is the command's pid). Killed on
/// drop unless killed before, so an abandoned task leaves nothing running;
/// and listed until killed, so that a worker ending at once on a second
/// signal takes its tasks' processes with it ([`kill_every_task`]).
struct ProcessGroup {
    id: Option<libc::pid_t>,
    /// Killed already: by then the command has exited or been killed, and
    /// its pid may be reused, so the group is not killed again.
    killed: AtomicBool,
}

/// The process groups of the tasks running in this process.
static RUNNING: Mutex<BTreeSet<libc::pid_t>> = Mutex::new(BTreeSet::new());

impl ProcessGroup {
    fn led_by(child: &tokio::process::Child) -> ProcessGroup {
        let id = child
            .id()
            .map(|pid| libc::pid_t::try_from(pid).expect("a pid fits in pid_t"));
        if let Some(id) = id {
            assert!(id > 1, "a command's group is never the whole system's");
            running().insert(id);
        }
        ProcessGroup {
            id,
            killed: AtomicBool::new(false),
        }
    }

    /// Kills every process of the group, once. Once the command itself
    /// has been waited for, its pid could in principle be reused, but only
    /// by a process that made itself the leader of a group of that number,
    /// in the instant between the wait and this kill.
    fn kill(&self) {
        let Some(id) = self.id else { return };
        if !self.killed.swap(true, Ordering::Relaxed) {
            kill_group(id);
            running().remove(&id);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

fn running() -> std::sync::MutexGuard<'static, BTreeSet<libc::pid_t>> {
    // The set is consistent whatever panicked while holding it.
    RUNNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn kill_group(id: libc::pid_t) {
    // SAFETY: killpg takes plain integers and touches no memory of ours. A
    // group already gone gives ESRCH, which is what was wanted.
    unsafe {
        libc::killpg(id, libc::SIGKILL);
    }
}

/// Kills the processes of every task running in this process: for a
/// process about to end without running its destructors.
pub fn kill_every_task() {
    for &id in running().iter() {
        kill_group(id);
    }
}

/// One output stream, kept up to a cap.
struct Capped {
    kept: Vec<u8>,
    cap_bytes: usize,
    truncated: bool,
}

impl Capped {
    fn new(cap_bytes: usize) -> Capped {
        Capped {
            kept: Vec::new(),
            cap_bytes,
            truncated: false,
        }
    }

    /// Reads a stream to its end, keeping at most the cap; the rest is
    /// read and dropped so the child never blocks on a full pipe. What was
    /// read stays kept if this future is dropped (on the timeout).
    async fn fill_from(&mut self, mut stream: impl AsyncRead + Unpin) -> std::io::Result<()> {
        let mut buf = [0u8; 8192];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            let room = self.cap_bytes - self.kept.len();
            if n > room {
                self.truncated = true;
            }
            self.kept.extend_from_slice(&buf[..n.min(room)]);
            debug_assert!(self.kept.len() <= self.cap_bytes);
        }
    }

    /// What was kept. A stream cut at the cap may end in the middle of a
    /// character: those last bytes go, so that text cut short stays text
    /// (it is marked truncated either way).
    fn into_bytes(mut self) -> Vec<u8> {
        if self.truncated
            && let Err(error) = std::str::from_utf8(&self.kept)
            && error.error_len().is_none()
        {
            self.kept.truncate(error.valid_up_to());
        }
        self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_a_command_and_reports_status_and_output() {
        let task = parse(br#"{"kind":"exec","argv":["sh","-c","echo out; echo err >&2; exit 3"]}"#)
            .unwrap();
        let result = run(&task, 1 << 20).await.unwrap();
        assert_eq!((result.exit_code, result.signal), (Some(3), None));
        assert_eq!(result.stdout, "out\n");
        assert_eq!(result.stderr, "err\n");
        assert!(!result.timed_out && !result.truncated);
    }

    #[tokio::test]
    async fn a_command_killed_by_a_signal_names_it() {
        let task =
            parse(br#"{"kind":"exec","argv":["sh","-c","echo before; kill -9 $$"]}"#).unwrap();
        let result = run(&task, 1 << 20).await.unwrap();
        assert_eq!((result.exit_code, result.signal), (None, Some(9)));
        assert_eq!(result.stdout, "before\n");
        assert!(!result.timed_out);
    }

    /// What a client says of each way an `exec` task's command can end,
    /// read from the result as the worker writes it.
    #[test]
    fn a_command_that_did_not_exit_with_0_is_a_failure_to_its_waiter() {
        let ended = |exit_code, signal, timed_out| {
            let result = ExecResult {
                exit_code,
                signal,
                timed_out,
                stdout: "\u{fffd}".into(),
                stdout_base64: Some("/w==".into()),
                stderr: String::new(),
                stderr_base64: None,
                truncated: false,
            };
            command_failure(&serde_json::to_vec(&result).unwrap())
        };
        assert_eq!(ended(Some(0), None, false), None);
        assert_eq!(
            ended(Some(3), None, false).as_deref(),
            Some("its command exited with 3")
        );
        assert_eq!(
            ended(None, Some(9), false).as_deref(),
            Some("its command was killed by signal 9")
        );
        assert_eq!(
            ended(None, None, true).as_deref(),
            Some("its command ran past its timeout_ms and was killed")
        );
        // Written before results named the signal.
        let older =
            br#"{"exit_code":null,"timed_out":false,"stdout":"","stderr":"","truncated":false}"#;
        assert_eq!(
            command_failure(older).as_deref(),
            Some("its command was killed by a signal")
        );
        // Any other task's output is none of this.
        for other in [
            &br#"{"estimate":3.14,"samples":100,"inside":78}"#[..],
            br#"{"exit_code":3,"timed_out":false,"stdout":"","stderr":"","truncated":false,"mine":1}"#,
            br#"{"exit_code":3}"#,
            b"exit_code 3",
            b"",
        ] {
            assert_eq!(command_failure(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    /// Runs `script` under `sh -c` with the node-sized limit, and checks
    /// that the result fits in it.
    async fn run_capped(script: &str) -> ExecResult {
        let payload = serde_json::json!({"kind": "exec", "argv": ["sh", "-c", script]});
        let task = parse(payload.to_string().as_bytes()).unwrap();
        let limit = zkdist_coord::MAX_DATA_BYTES;
        let result = run(&task, limit).await.unwrap();
        assert_eq!(result.exit_code, Some(0), "{:?}", result.stderr);
        let encoded_bytes = serde_json::to_vec(&result).unwrap().len();
        assert!(encoded_bytes <= limit, "{encoded_bytes} bytes");
        result
    }

    const BUDGET_BYTES: usize = zkdist_coord::MAX_DATA_BYTES - RESULT_FRAME_BYTES;

    #[tokio::test]
    async fn a_long_output_fills_the_node_not_a_fraction_of_it() {
        let result = run_capped("head -c 3000000 /dev/zero | tr '\\0' 'x'").await;
        assert!(result.truncated);
        assert_eq!(result.stdout.len(), BUDGET_BYTES);
        assert_eq!(result.stderr, "");
    }

    #[tokio::test]
    async fn output_that_escapes_long_is_cut_to_fit_once_escaped() {
        // A NUL byte is written `\u0000`: six bytes of the node each.
        let result = run_capped("head -c 3000000 /dev/zero").await;
        assert!(result.truncated);
        assert_eq!(result.stdout.len(), BUDGET_BYTES / 6);
        assert!(result.stdout.bytes().all(|byte| byte == 0));
    }

    #[tokio::test]
    async fn a_short_stream_is_kept_whole_beside_a_long_one() {
        let result = run_capped("echo err >&2; head -c 3000000 /dev/zero | tr '\\0' 'x'").await;
        assert!(result.truncated);
        assert_eq!(result.stderr, "err\n");
        // `err\n` escaped is five bytes.
        assert_eq!(result.stdout.len(), BUDGET_BYTES - 5);
    }

    #[tokio::test]
    async fn two_long_streams_get_half_the_node_each() {
        let result = run_capped(
            "head -c 3000000 /dev/zero | tr '\\0' 'e' >&2; head -c 3000000 /dev/zero | tr '\\0' 'o'",
        )
        .await;
        assert!(result.truncated);
        assert_eq!(result.stdout.len(), BUDGET_BYTES / 2);
        assert_eq!(result.stderr.len(), BUDGET_BYTES - BUDGET_BYTES / 2);
        assert!(result.stdout.bytes().all(|byte| byte == b'o'));
        assert!(result.stderr.bytes().all(|byte| byte == b'e'));
    }

    #[test]
    fn fitting_counts_escapes_and_never_splits_a_character() {
        // `"` takes two bytes escaped, `é` two in UTF-8, `\u{1}` six.
        let mut out = "a\"é\u{1}b".as_bytes().to_vec();
        let mut err = Vec::new();
        assert_eq!(stream_len(&out), 1 + 2 + 2 + 6 + 1);
        assert!(!fit_streams(&mut out, &mut err, 12));
        assert_eq!(out, "a\"é\u{1}b".as_bytes());
        assert!(fit_streams(&mut out, &mut err, 11));
        assert_eq!(out, "a\"é\u{1}".as_bytes());
        assert!(fit_streams(&mut out, &mut err, 10));
        assert_eq!(out, "a\"é".as_bytes());
        assert!(fit_streams(&mut out, &mut err, 4));
        assert_eq!(out, b"a\"", "é is not split");
        // The escaped length agrees with serde_json's for every byte value.
        for byte in 0..=0x7f_u8 {
            let c = char::from(byte);
            let quoted = serde_json::to_string(&c.to_string()).unwrap();
            assert_eq!(escaped_len(c), quoted.len() - 2, "{c:?}");
        }
    }

    /// Bytes that are not UTF-8 cost their text (three bytes for each
    /// U+FFFD) and their base64 besides, and are cut to the longest prefix
    /// that fits; a cut that leaves UTF-8 text leaves no base64 to pay for.
    #[test]
    fn fitting_bytes_that_are_not_utf8_counts_their_base64() {
        // `ok`, then 0xFF: text `ok\u{fffd}` (5 bytes), base64 `b2v/` (4).
        let mut out = b"ok\xff".to_vec();
        let mut err = Vec::new();
        assert_eq!(stream_len(&out), 5 + 4);
        assert!(!fit_streams(&mut out, &mut err, 9));
        assert!(fit_streams(&mut out, &mut err, 8));
        assert_eq!(out, b"ok", "the cut leaves text, with no base64");
        // A long run of invalid bytes: each costs 3 of text and 4/3 of
        // base64, and the prefix kept is within a byte of the longest.
        let mut out = vec![0xff_u8; 10_000];
        assert!(fit_streams(&mut out, &mut err, 4_000));
        assert!(stream_len(&out) <= 4_000);
        assert!(
            stream_len(&[0xff; 10_000][..out.len() + 2]) > 4_000,
            "{}",
            out.len()
        );
    }

    #[tokio::test]
    async fn output_that_is_not_utf8_is_kept_exactly_in_base64() {
        let result = run_capped("printf 'ok\\377\\376\\n'; printf 'plain' >&2").await;
        assert_eq!(result.stdout, "ok\u{fffd}\u{fffd}\n");
        let exact = BASE64_STANDARD
            .decode(result.stdout_base64.as_deref().expect("the exact bytes"))
            .unwrap();
        assert_eq!(exact, b"ok\xff\xfe\n");
        assert_eq!(
            (result.stderr.as_str(), result.stderr_base64),
            ("plain", None)
        );
        assert!(!result.truncated);
        // UTF-8 output writes no base64 field at all.
        let plain = run_capped("echo é").await;
        let encoded = serde_json::to_string(&plain).unwrap();
        assert!(!encoded.contains("base64"), "{encoded}");
    }

    #[tokio::test]
    async fn a_long_output_that_is_not_utf8_is_cut_to_fit_with_its_base64() {
        let result = run_capped("head -c 3000000 /dev/zero | tr '\\0' '\\377'").await;
        assert!(result.truncated);
        let exact = BASE64_STANDARD
            .decode(result.stdout_base64.as_deref().expect("the exact bytes"))
            .unwrap();
        assert!(exact.iter().all(|&byte| byte == 0xff));
        // Each byte takes 3 of text and 4/3 of base64: some 13/3 in all.
        let expected_bytes = BUDGET_BYTES * 3 / 13;
        assert!(
            exact.len().abs_diff(expected_bytes) <= 3,
            "{} bytes kept, some {expected_bytes} fit",
            exact.len()
        );
        assert_eq!(result.stdout.chars().count(), exact.len());
    }

    /// A stream cut at the cap in the middle of a character stays text:
    /// the character's first bytes go, not the whole stream into base64.
    #[tokio::test]
    async fn text_cut_in_the_middle_of_a_character_stays_text() {
        // `€` takes three bytes, and the budget is not a multiple of three.
        assert_ne!(BUDGET_BYTES % 3, 0);
        let result = run_capped("yes € | tr -d '\\n' | head -c 3000000").await;
        assert!(result.truncated);
        assert_eq!(result.stdout_base64, None);
        assert!(result.stdout.chars().all(|c| c == '€'));
        assert_eq!(result.stdout.len(), BUDGET_BYTES / 3 * 3);
    }

    #[test]
    fn a_command_does_not_see_the_worker_s_credentials() {
        let task = parse(br#"{"kind":"exec","argv":["true"]}"#).unwrap();
        let command = command_for(&task);
        let auth = command
            .as_std()
            .get_envs()
            .find(|(key, _)| *key == AUTH_ENV)
            .map(|(_, value)| value);
        assert_eq!(
            auth,
            Some(None),
            "{AUTH_ENV} is taken out of its environment"
        );
    }

    #[tokio::test]
    async fn kills_on_timeout() {
        let task = parse(br#"{"kind":"exec","argv":["sleep","30"],"timeout_ms":100}"#).unwrap();
        let result = run(&task, 1 << 20).await.unwrap();
        assert!(result.timed_out);
        assert_eq!((result.exit_code, result.signal), (None, None));
    }

    /// A command that exits while a process it started outside its group
    /// (`setsid`) still holds its output open ends the task with its own
    /// exit status and the output it wrote; it is not taken for one that
    /// ran past its timeout (before, the task waited for the pipes until
    /// the timeout, and reported it).
    #[tokio::test]
    async fn a_command_whose_output_a_detached_process_holds_ends_with_its_own_status() {
        // The command waits until the detached process leads a session
        // of its own (field 6 of its stat): until then, the kill of the
        // command's group would still reach it.
        let script = "setsid sleep 60 & \
            while [ \"$(cut -d' ' -f6 /proc/$!/stat)\" != \"$!\" ]; do sleep 0.01; done; \
            echo $!; echo done >&2; exit 3";
        let payload =
            serde_json::json!({"kind": "exec", "argv": ["sh", "-c", script], "timeout_ms": 30000});
        let task = parse(payload.to_string().as_bytes()).unwrap();
        let result = run(&task, 1 << 20).await.unwrap();
        let detached = result.stdout.trim().to_owned();
        // The detached process is out of the command's group: end it here.
        assert!(is_running(&detached), "{result:?}");
        std::process::Command::new("kill")
            .arg(&detached)
            .status()
            .unwrap();
        assert!(!result.timed_out, "{result:?}");
        assert_eq!((result.exit_code, result.signal), (Some(3), None));
        assert_eq!(result.stderr, "done\n");
        assert!(!result.truncated);
    }

    /// Whether process `pid` still runs (a zombie waiting to be reaped
    /// does not).
    fn is_running(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // The state follows the command name, which is in parentheses.
            Ok(stat) => !stat
                .rsplit_once(')')
                .unwrap()
                .1
                .trim_start()
                .starts_with('Z'),
            Err(_) => false,
        }
    }

    /// Waits for process `pid` to be gone. A hang guard, not a time limit.
    async fn gone(pid: &str) -> bool {
        for _ in 0..1_000 {
            if !is_running(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn a_command_runs_in_a_process_group_of_its_own() {
        // The shell prints its pid and its process group's id: equal for
        // a group leader.
        let task =
            parse(br#"{"kind":"exec","argv":["sh","-c","echo $$; cut -d' ' -f5 /proc/$$/stat"]}"#)
                .unwrap();
        let result = run(&task, 1 << 20).await.unwrap();
        assert_eq!(result.exit_code, Some(0), "{result:?}");
        let lines: Vec<&str> = result.stdout.lines().collect();
        assert_eq!(lines.len(), 2, "{result:?}");
        assert_eq!(lines[0], lines[1], "the command leads its own group");
    }

    #[tokio::test]
    async fn a_command_that_exits_is_not_held_by_what_it_left_running() {
        // The background sleep keeps the output pipes open: without the
        // group killed at the command's exit, this would wait out the
        // timeout and be reported as timed out.
        let task = parse(
            br#"{"kind":"exec","argv":["sh","-c","sleep 1000 & echo $!; exit 4"],"timeout_ms":30000}"#,
        )
        .unwrap();
        let result = run(&task, 1 << 20).await.unwrap();
        assert_eq!(result.exit_code, Some(4), "{result:?}");
        assert!(!result.timed_out);
        let background = result.stdout.trim();
        assert!(
            gone(background).await,
            "the background sleep {background} was killed"
        );
    }

    #[tokio::test]
    async fn a_timed_out_command_keeps_its_output_and_its_group_is_killed() {
        let task = parse(
            br#"{"kind":"exec","argv":["sh","-c","sleep 1000 & echo $!; echo waiting >&2; wait"],"timeout_ms":3000}"#,
        )
        .unwrap();
        let result = run(&task, 1 << 20).await.unwrap();
        assert!(result.timed_out, "{result:?}");
        assert_eq!(result.exit_code, None);
        assert_eq!(
            result.stderr, "waiting\n",
            "what it wrote before the timeout"
        );
        let background = result.stdout.trim();
        assert!(!background.is_empty(), "{result:?}");
        assert!(
            gone(background).await,
            "the background sleep {background} was killed"
        );
    }

    #[tokio::test]
    async fn an_abandoned_command_is_killed_with_its_group() {
        // The pid goes to a file: the result of an abandoned run is never
        // seen.
        let scratch = std::env::temp_dir().join(format!("zkdist-exec-{}", std::process::id()));
        let payload = serde_json::json!({
            "kind": "exec",
            "argv": ["sh", "-c", "sleep 1000 & echo $! > \"$0\"; wait", scratch],
            "timeout_ms": 600_000,
        });
        let task = parse(payload.to_string().as_bytes()).unwrap();
        let mut running = Box::pin(run(&task, 1 << 20));
        let mut background = String::new();
        for _ in 0..1_000 {
            assert!(
                futures::poll!(running.as_mut()).is_pending(),
                "the command runs until abandoned"
            );
            background = std::fs::read_to_string(&scratch).unwrap_or_default();
            if background.ends_with('\n') {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let background = background.trim().to_owned();
        assert!(!background.is_empty(), "the command started its sleep");
        assert!(is_running(&background));
        drop(running);
        assert!(
            gone(&background).await,
            "the background sleep {background} was killed"
        );
        let _ = std::fs::remove_file(&scratch);
    }

    #[tokio::test]
    async fn a_missing_program_is_a_task_failure_naming_it() {
        let task = parse(br#"{"kind":"exec","argv":["/nonexistent/zkdist-test"]}"#).unwrap();
        let err = run(&task, 1 << 20).await.unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/zkdist-test"),
            "{err}"
        );
    }

    #[test]
    fn refuses_malformed_payloads() {
        for payload in [
            r#"{"kind":"exec","argv":[]}"#,
            r#"{"kind":"exec"}"#,
            r#"{"kind":"exec","argv":["ls"],"timeout_ms":0}"#,
            r#"{"kind":"exec","argv":"ls"}"#,
        ] {
            assert!(parse(payload.as_bytes()).is_err(), "{payload}");
        }
        // A NUL byte is named with the argument that holds it.
        let error = parse(br#"{"kind":"exec","argv":["echo","a\u0000b"]}"#).unwrap_err();
        assert!(
            error.to_string().contains("argv[1] holds a NUL byte"),
            "{error}"
        );
    }
}
