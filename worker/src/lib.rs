//! zkdist worker, generic over [`zkdist_coord::Coordinator`].
//!
//! A worker takes a unique id from a sequential node (the master does not
//! hear of it), arms an exists watch on its assignment node, and only then
//! registers under `workers/`. For each assignment it reads the task, runs
//! it through a [`TaskHandler`], then in one atomic multi writes the task's
//! result and deletes the assignment (which tells the master it is idle),
//! only if the assignment is still the one it read: a worker the master
//! took for dead writes nothing. A failing or panicking handler produces a
//! failure result; it never stops the worker.
//!
//! A [`Worker`] lives for one session. [`run_worker_role`] outlives
//! sessions: when one ends, the task in hand is abandoned and a new worker
//! joins on a new session.
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
//!
//! `master/examples/embedded.rs` is a whole program: a master, workers
//! with a handler of their own and a client, on the simulator or a real
//! ensemble (`cargo run -p zkdist-master --example embedded`).

mod catch_unwind;
mod completion;
mod decision;
mod handler;
mod role;
mod shell;
mod state;
mod stop_timeout;

pub use decision::WorkerDecision;
pub use handler::{TaskError, TaskHandler, TimeLimited};
pub use role::{SESSION_RETRY_DELAY_MS, run_worker_role};
pub use shell::{Worker, WorkerError};
pub use state::{
    AssignmentAfterLoss, AssignmentNode, CompletionReadBack, HandlerOutcome, ResultWrite,
    WorkerState,
};
pub use stop_timeout::STOP_TIMEOUT_MS;
