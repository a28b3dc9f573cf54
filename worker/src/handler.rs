//! What a worker runs: a [`TaskHandler`] turns a task's payload into output
//! bytes or an error. The worker writes either as the task's result.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Why a task failed. The message is what the task's result records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TaskError {
    message: String,
}

impl TaskError {
    pub fn new(message: impl Into<String>) -> TaskError {
        TaskError {
            message: message.into(),
        }
    }

    /// A failure described by any error's message.
    pub fn from_display(error: &impl fmt::Display) -> TaskError {
        TaskError::new(error.to_string())
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The failure of a run that [`TimeLimited`] stopped at `limit`.
    pub fn past_time_limit(limit: Duration) -> TaskError {
        TaskError::new(format!(
            "the task ran past the worker's time limit of {} ms and was stopped",
            limit.as_millis()
        ))
    }
}

/// Runs one task. `task` is the payload as submitted (a JSON object with a
/// `kind`, see [`zkdist_coord::TaskPayload`]). An `Err`, and even a panic,
/// becomes a failure result: a bad task never takes the worker down. Output
/// over [`zkdist_coord::MAX_RESULT_OUTPUT_BYTES`] becomes a failure too.
///
/// The worker sets no deadline of its own: a handler that never returns
/// keeps its task, which no other worker is then given while the worker's
/// session lives, and a stop request waits for it (the binary ends at once
/// only on a second signal). Bound the work inside the handler, as the
/// binary's `exec` does with its `timeout_ms`, or wrap the handler in
/// [`TimeLimited`]. The future is dropped when
/// the task is abandoned (the session expired, or stayed disconnected past
/// its grace): hold what must be cleaned up in values whose `Drop` does it.
///
/// The future is polled on the worker's own task, beside the worker's
/// watch on its session: a handler that blocks the thread in `poll` (long
/// computation, synchronous I/O) holds that watch back too, and the worker
/// cannot stop the task in time when it is cut off. Run such work on
/// `tokio::task::spawn_blocking` (or a thread of its own) and await it.
pub trait TaskHandler: Send + Sync + 'static {
    fn run(&self, task: &[u8]) -> impl Future<Output = Result<Vec<u8>, TaskError>> + Send;
}

impl<H: TaskHandler> TaskHandler for Arc<H> {
    fn run(&self, task: &[u8]) -> impl Future<Output = Result<Vec<u8>, TaskError>> + Send {
        (**self).run(task)
    }
}

/// A handler whose runs are stopped at a time limit: a run still going
/// when `limit` has passed is dropped (its values' `Drop` clean-ups run;
/// the binary's `exec` kills its command) and the task fails, its result
/// naming the limit ([`TaskError::past_time_limit`]). The task is then
/// finished, as after any failure: it is not run again. The limit counts
/// from the run's start, in the runtime's time.
///
/// Like the worker's own watch on its session, the limit acts only at an
/// `await`: a handler that blocks its thread is stopped only once it yields.
#[derive(Debug, Clone)]
pub struct TimeLimited<H> {
    inner: H,
    limit: Duration,
}

impl<H: TaskHandler> TimeLimited<H> {
    pub fn new(inner: H, limit: Duration) -> TimeLimited<H> {
        TimeLimited { inner, limit }
    }
}

impl<H: TaskHandler> TaskHandler for TimeLimited<H> {
    fn run(&self, task: &[u8]) -> impl Future<Output = Result<Vec<u8>, TaskError>> + Send {
        let limit = self.limit;
        // Built inside the timed future, so that a handler doing work
        // before it returns its future is timed (and guarded) too.
        let inner = &self.inner;
        async move {
            tokio::time::timeout(limit, async move { inner.run(task).await })
                .await
                .unwrap_or_else(|_elapsed| Err(TaskError::past_time_limit(limit)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sleeps(Duration);

    impl TaskHandler for Sleeps {
        async fn run(&self, task: &[u8]) -> Result<Vec<u8>, TaskError> {
            tokio::time::sleep(self.0).await;
            Ok(task.to_vec())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_within_the_limit_gives_its_output_and_one_past_it_fails_naming_it() {
        let limit = Duration::from_millis(500);
        let quick = TimeLimited::new(Sleeps(Duration::from_millis(499)), limit);
        assert_eq!(quick.run(b"done").await, Ok(b"done".to_vec()));

        let slow = TimeLimited::new(Sleeps(Duration::from_secs(3_600)), limit);
        let started = tokio::time::Instant::now();
        let outcome = slow.run(b"never").await;
        // Exactly the limit on tokio's paused clock; madsim's moves a
        // little with every poll.
        let stopped_after = started.elapsed();
        assert!(
            limit <= stopped_after && stopped_after < limit + Duration::from_millis(1),
            "stopped at the limit, not later: {stopped_after:?}"
        );
        let error = outcome.expect_err("a run past the limit fails");
        assert_eq!(
            error.message(),
            "the task ran past the worker's time limit of 500 ms and was stopped"
        );
    }
}
