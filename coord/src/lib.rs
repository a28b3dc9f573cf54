//! The coordination layer of zkdist.
//!
//! Master, worker and client are generic over [`Coordinator`], the subset of
//! ZooKeeper's client API they need. Production backs it with a real ensemble;
//! tests back it with the deterministic simulator in `zkdist-sim`. The
//! [`conformance`] suite is written once against the trait and run against
//! both, which is what makes the simulator worth trusting.

pub mod assignment;
pub mod client;
pub mod codec;
pub mod conformance;
mod connector;
mod coordinator;
mod disconnection;
mod error;
mod event;
pub mod layout;
pub mod names;
mod observer;
mod op;
pub mod path;
pub mod registration;
pub mod request;
pub mod retry;
mod types;
pub mod validate;
#[cfg(feature = "real")]
pub mod zk;

pub use assignment::{
    AssignmentView, MAX_INLINE_PAYLOAD_BYTES, assignment_label, encode_assignment,
};
pub use client::{
    Client, ClientError, MAX_LISTING_ATTEMPTS, MasterNode, STATUS_MAX_LISTED_TASKS, Status,
};
pub use codec::{CodecError, MAX_RESULT_OUTPUT_BYTES, TaskPayload, TaskResult};
pub use connector::Connector;
pub use coordinator::Coordinator;
pub use disconnection::disconnected_grace_ms;
pub use error::{ErrorCode, ZkError, ZkResult};
pub use event::{Event, EventSender, EventStream, SessionState, WatchEvent, WatchKind};
pub use layout::{DEFAULT_ROOT, Directory, Layout, MAX_ROOT_BYTES};
pub use names::{InvalidName, TaskId, TaskToken, WorkerId};
pub use observer::Observer;
pub use op::{Op, OpResult};
pub use registration::{INLINE_PAYLOAD_FEATURE, reads_inline_payloads, registration_data};
pub use request::{ChildrenRead, DataRead, Reply, Request};
pub use types::{AddWatchMode, ChildCreates, CreateMode, SessionId, Stat, Watch};
pub use validate::{
    LARGE_REPLY_BYTES, MAX_DATA_BYTES, MAX_FRAME_BYTES, MAX_REPLY_BYTES, MAX_REQUEST_BYTES,
    MIN_REPLY_BYTES, validate_data, validate_version,
};
