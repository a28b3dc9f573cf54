//! zkdist master: the founding design's master, generic over
//! [`zkdist_coord::Coordinator`].
//!
//! [`MasterState`] is the core: the processed-task set, the FIFO pending
//! queue and the worker -> assignment map, with every decision taken on them
//! and no I/O, so it can be tested input by input. [`Master`] is the shell:
//! three watch loops (workers, tasks, assignments) whose replies and events
//! feed one queue consumed by one task.
//!
//! ```text
//! let layout = Layout::new("/zkdist")?;
//! if claim_master(&session, &layout).await? {
//!     let (tx, decisions) = tokio::sync::mpsc::unbounded_channel();
//!     let state = Master::new(session, events, layout)
//!         .with_observer(tx)
//!         .run_until(shutdown_signal)
//!         .await?;
//! }
//! ```

mod decision;
mod election;
mod in_flight;
mod listing;
mod shell;
mod state;

pub use decision::{Command, MasterDecision, Trigger};
pub use election::claim_master;
pub use shell::{Master, MasterError, READ_RETRY_DELAY_MS};
pub use state::{Assignment, AssignmentData, MasterState, Step};
