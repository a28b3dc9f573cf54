//! zkdist worker, generic over [`zkdist_coord::Coordinator`].
//!
//! A worker takes a unique id from a sequential node (the master does not
//! hear of it), arms an exists watch on its assignment node, and only then
//! registers under `workers/`. For each assignment it reads the task, runs
//! it through a [`TaskHandler`], writes the task's result, and deletes the
//! assignment, which tells the master it is idle. A failing or panicking
//! handler produces a failure result; it never stops the worker.
//!
//! ```text
//! struct Echo;
//! impl TaskHandler for Echo {
//!     async fn run(&self, task: &[u8]) -> Result<Vec<u8>, TaskError> {
//!         Ok(task.to_vec())
//!     }
//! }
//! let id = Worker::new(session, events, Layout::default(), Echo)
//!     .with_observer(tx)
//!     .run_until(shutdown_signal)
//!     .await?;
//! ```

mod catch_unwind;
mod decision;
mod handler;
mod shell;
mod state;

pub use decision::WorkerDecision;
pub use handler::{TaskError, TaskHandler};
pub use shell::{Worker, WorkerError};
pub use state::{HandlerOutcome, ResultWrite, WorkerState};
