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
//! `delivery` and `faults`) and a thin async shell (`driver`, `sim`,
//! `session`).

mod applied;
mod arrival;
mod client;
mod command;
mod config;
mod delivery;
mod driver;
mod engine;
mod faults;
mod latency;
mod link;
mod multi;
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
pub use latency::Latency;
pub use session::SimSession;
pub use sim::SimZk;
pub use tree::{Node, Tree};
