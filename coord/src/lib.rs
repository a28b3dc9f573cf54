//! The coordination layer of zkdist.
//!
//! Master, worker and client are generic over [`Coordinator`], the subset of
//! ZooKeeper's client API they need. Production backs it with a real ensemble;
//! tests back it with the deterministic simulator in `zkdist-sim`. The
//! [`conformance`] suite is written once against the trait and run against
//! both, which is what makes the simulator worth trusting.

pub mod conformance;
mod coordinator;
mod error;
mod event;
mod op;
pub mod path;
mod types;

pub use coordinator::Coordinator;
pub use error::{ErrorCode, ZkError, ZkResult};
pub use event::{Event, EventSender, EventStream, SessionState, WatchEvent, WatchKind};
pub use op::{Op, OpResult};
pub use types::{
    CreateMode, MAX_DATA_BYTES, MAX_REPLY_BYTES, SessionId, Stat, Watch, validate_data,
    validate_version,
};
