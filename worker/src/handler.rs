//! What a worker runs: a [`TaskHandler`] turns a task's payload into output
//! bytes or an error. The worker writes either as the task's result.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

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
/// binary's `exec` does with its `timeout_ms`. The future is dropped when
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
