//! The `exec` task: run a command line, return its exit status and capped
//! output. Off unless the worker was started with `--allow-exec`, because it
//! lets anyone who can submit a task run programs on the worker's machine.

use std::process::Stdio;
use std::time::Duration;

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

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct ExecResult {
    /// The exit code, `None` when the process was killed by a signal or by
    /// the timeout.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    /// True when stdout or stderr was cut to fit the result size limit.
    pub truncated: bool,
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

/// Runs the task. Output beyond `limit_bytes` in all is dropped (and
/// reported as truncated), so the result always fits in one znode.
pub async fn run(task: &ExecTask, limit_bytes: usize) -> Result<ExecResult, HandlerError> {
    let mut child = Command::new(&task.argv[0])
        .args(&task.argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| HandlerError::Failed(format!("cannot start {:?}: {e}", task.argv[0])))?;
    // Half of the budget per stream, less room for the JSON around them and
    // for escaping, which can grow a byte to six.
    let per_stream_bytes = limit_bytes.saturating_sub(1024) / 2 / 6;
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let collect = async {
        let (out, err) = tokio::join!(
            read_capped(stdout, per_stream_bytes),
            read_capped(stderr, per_stream_bytes)
        );
        let status = child.wait().await;
        (out, err, status)
    };
    match tokio::time::timeout(Duration::from_millis(task.timeout_ms), collect).await {
        Ok((out, err, status)) => {
            let (stdout, out_cut) =
                out.map_err(|e| HandlerError::Failed(format!("reading stdout: {e}")))?;
            let (stderr, err_cut) =
                err.map_err(|e| HandlerError::Failed(format!("reading stderr: {e}")))?;
            let status = status
                .map_err(|e| HandlerError::Failed(format!("waiting for the process: {e}")))?;
            Ok(ExecResult {
                exit_code: status.code(),
                timed_out: false,
                stdout: String::from_utf8_lossy(&stdout).into_owned(),
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
                truncated: out_cut || err_cut,
            })
        }
        // Dropping the future drops the child, and kill_on_drop kills it.
        Err(_) => Ok(ExecResult {
            exit_code: None,
            timed_out: true,
            stdout: String::new(),
            stderr: format!("killed after {} ms", task.timeout_ms),
            truncated: false,
        }),
    }
}

/// Reads a stream to its end, keeping at most `cap_bytes`; the rest is read
/// and dropped so the child never blocks on a full pipe.
async fn read_capped(
    mut stream: impl AsyncRead + Unpin,
    cap_bytes: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok((kept, truncated));
        }
        let room = cap_bytes - kept.len();
        if n > room {
            truncated = true;
        }
        kept.extend_from_slice(&buf[..n.min(room)]);
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
        assert_eq!(result.exit_code, Some(3));
        assert_eq!(result.stdout, "out\n");
        assert_eq!(result.stderr, "err\n");
        assert!(!result.timed_out && !result.truncated);
    }

    #[tokio::test]
    async fn caps_output_to_fit_the_limit() {
        let task = parse(
            br#"{"kind":"exec","argv":["sh","-c","head -c 3000000 /dev/zero | tr '\\0' 'x'"]}"#,
        )
        .unwrap();
        let limit = zkdist_coord::MAX_DATA_BYTES;
        let result = run(&task, limit).await.unwrap();
        assert!(result.truncated);
        assert_eq!(result.exit_code, Some(0));
        assert!(serde_json::to_vec(&result).unwrap().len() <= limit);
    }

    #[tokio::test]
    async fn kills_on_timeout() {
        let task = parse(br#"{"kind":"exec","argv":["sleep","30"],"timeout_ms":100}"#).unwrap();
        let result = run(&task, 1 << 20).await.unwrap();
        assert!(result.timed_out);
        assert_eq!(result.exit_code, None);
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
    }
}
