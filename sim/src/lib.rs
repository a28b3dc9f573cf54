//! SimZk: a deterministic, seeded, in-memory ZooKeeper for testing zkdist.
//!
//! [`SimZk`] simulates one ZooKeeper 3.8 server and a link per session.
//! Each [`SimSession`] implements [`zkdist_coord::Coordinator`], so master
//! and worker run on it unchanged. Every source of nondeterminism (message
//! delays, who hears first, which in-flight requests survive a link failure,
//! the order of `get_children`) comes from [`SimConfig::seed`]; time comes
//! from `tokio::time`, so tests run on a paused clock, instantly. The same
//! seed and the same driving code give the same [`SimZk::trace`], byte for
//! byte.
//!
//! Layout: a sans-IO core (the server in `tree`, `watches`, `multi`,
//! `server`; the client library in `client`; the network in `link`,
//! `latency`, `schedule`; all tied together by `engine` with `arrival`,
//! `delivery`, `faults` and `control`) and a thin async shell (`driver`,
//! `sim`, `session`).

// `cargo sim` sets ZKDIST_SIM_LANE (through cargo's `[env]`) and passes
// `--cfg madsim` through `build.rustflags`, which cargo ignores whenever
// RUSTFLAGS, CARGO_ENCODED_RUSTFLAGS or a `target.*.rustflags` setting is
// present. Without this check the lane would then pass while testing on
// plain tokio.
const _: () = assert!(
    option_env!("ZKDIST_SIM_LANE").is_none() || cfg!(madsim),
    "the simulator lane (`cargo sim`) is being built without `--cfg madsim`: RUSTFLAGS, \
     CARGO_ENCODED_RUSTFLAGS or a `target.*.rustflags` setting overrides the alias's \
     `build.rustflags`. Unset it (e.g. `env -u RUSTFLAGS cargo sim`) or add `--cfg madsim` to it."
);

mod applied;
mod arrival;
mod client;
mod command;
mod config;
mod connector;
mod control;
mod delivery;
mod digits;
mod driver;
mod engine;
mod faults;
mod follower;
mod history;
#[cfg(test)]
mod lagging_read_tests;
mod latency;
mod link;
mod multi;
mod partition;
mod request;
pub mod runtime;
mod schedule;
mod server;
mod session;
mod sim;
mod trace;
mod tree;
mod watches;

pub use applied::{AppliedOp, Change, TxnKind};
pub use config::SimConfig;
pub use connector::SimConnector;
pub use latency::Latency;
pub use session::SimSession;
pub use sim::SimZk;
pub use tree::{Node, Tree};
