//! zkdist master: the founding design's master, generic over
//! [`zkdist_coord::Coordinator`], made to survive failures.
//!
//! [`MasterState`] is the core: the processed-task set, the FIFO pending
//! queue and the worker -> assignment map, with every decision taken on them
//! and no I/O, so it can be tested input by input. [`Master`] is the shell
//! for one session: watch loops on workers and assignments, and the task
//! discovery ([`TaskDiscovery`]: a persistent recursive watch on tasks by
//! default, the founding design's listing loop as an option), whose
//! replies and events feed one queue consumed by one task, every write
//! fenced by the master's [`Epoch`]. [`run_master_role`] is the candidate
//! that outlives sessions: it claims the `master` node (or stands by until
//! it is free), leads, and starts over with a new session when one ends.
//!
//! ```text
//! let layout = Layout::new("/zkdist")?;
//! let (tx, decisions) = tokio::sync::mpsc::unbounded_channel();
//! run_master_role(connector, layout, TaskDiscovery::Watch, shutdown_signal, Some(tx.into())).await?;
//!
//! // Or, for one session that is known to lead:
//! if let Some(epoch) = claim_master(&session, &layout).await? {
//!     let state = Master::new(session, events, layout, epoch)
//!         .run_until(shutdown_signal)
//!         .await?;
//! }
//! ```
//!
//! `master/examples/embedded.rs` is a whole program: a master, workers
//! with a handler of their own and a client, on the simulator or a real
//! ensemble (`cargo run -p zkdist-master --example embedded`).

mod decision;
mod discovery;
mod election;
mod fenced;
mod in_flight;
#[cfg(test)]
mod lagging;
mod listing;
mod role;
mod shell;
mod state;

pub use decision::{
    Command, MasterDecision, Recovery, RequeueReason, SEQUENCE_WARNING_CREATES, Trigger,
};
pub use discovery::{TaskDiscovery, UnknownDiscovery};
pub use election::{Epoch, claim_master};
pub use role::{SESSION_RETRY_DELAY_MS, run_master_role, run_master_role_for_state};
pub use shell::{Master, MasterError, RECONCILE_RETRY_DELAY_MS, RELEASE_CHECK_DELAY_MS};
pub use state::{
    Assignment, AssignmentData, AssignmentFound, MasterState, ReclaimOutcome, RegistrationRead,
    Step, TASK_CHECKS_PER_BATCH, TaskStatus, WriteOutcome,
};
