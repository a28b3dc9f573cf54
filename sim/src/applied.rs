//! What an observer (an invariant checker, a scenario) learns about each
//! transaction the server applies.

use std::time::Duration;

use zkdist_coord::{SessionId, ZkError};

use crate::tree::Trigger;

/// The kind of transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnKind {
    CreateSession,
    Create,
    Delete,
    SetData,
    Multi,
    /// The session's owner closed it.
    CloseSession,
    /// The server expired it (timeout or `SimZk::expire`).
    ExpireSession,
}

/// One node-level change a transaction made.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Change {
    Created(String),
    Deleted(String),
    DataChanged(String),
}

/// One transaction, as handed to `SimZk::on_apply` hooks together with the
/// tree right after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedOp {
    pub zxid: i64,
    pub session: SessionId,
    pub session_name: String,
    pub kind: TxnKind,
    /// Empty when the transaction failed.
    pub changes: Vec<Change>,
    /// A failed write still takes a zxid, as on a real server.
    pub error: Option<ZkError>,
    /// Simulated time since `SimZk::start`.
    pub elapsed: Duration,
    /// The transaction's line in the trace.
    pub trace_line: String,
}

/// The node-level changes behind a list of watch triggers.
pub(crate) fn changes_of(triggers: &[Trigger]) -> Vec<Change> {
    triggers
        .iter()
        .filter_map(|trigger| match trigger {
            Trigger::Created(p) => Some(Change::Created(p.clone())),
            Trigger::Deleted(p) => Some(Change::Deleted(p.clone())),
            Trigger::DataChanged(p) => Some(Change::DataChanged(p.clone())),
            Trigger::ChildrenChanged(_) => None,
        })
        .collect()
}
