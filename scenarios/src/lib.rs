//! zkdist's testbed on the simulated ZooKeeper.
//!
//! - [`Harness`]: a [`zkdist_sim::SimZk`] with a master, workers and a
//!   client on it, every actor decision noted into the simulator's trace
//!   (so one trace shows ZooKeeper operations and the decisions they led
//!   to), and the [`Checker`] watching every transaction and every decision.
//! - [`Checker`]: the system's invariants, checked after every applied
//!   transaction, on every decision, and once more when a run ends. The
//!   first violation stops the run and is reported with the seed, the step
//!   and the last trace lines.
//! - [`scenarios`]: named, scripted races, each forcing one interleaving
//!   through the simulator's delivery control.
//! - [`mod@explore`]: seeded random runs (latencies, workload, faults), the
//!   engine of `zkdist explore` and `zkdist replay`.
//! - [`OldWorkerSession`]: a worker of the build older than inline
//!   payloads, for fleets in the middle of a rolling upgrade
//!   (`ExploreConfig::old_workers`, `zkdist explore --old-workers`).
//!
//! Every simulation runs through [`zkdist_sim::runtime::block_on`], never
//! on a runtime of its own, so the madsim lane can swap the runtime.

pub mod checker;
pub mod explore;
mod handler;
mod harness;
#[cfg(feature = "mutants")]
pub mod mutant;
pub mod old_worker;
mod plan;
mod roles;
pub mod scenarios;
pub mod trace;

pub use checker::{Checker, Invariant, Step, TreeFacts, Violation};
pub use explore::{ExploreConfig, Faults, SeedOutcome, explore, run_seed, run_seed_here};
pub use handler::{WorkHandler, expected_result, task_payload};
pub use harness::{Harness, HarnessConfig, RunReport};
pub use old_worker::OldWorkerSession;
pub use scenarios::Scenario;
