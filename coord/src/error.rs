//! Errors mirror ZooKeeper's result codes so that callers can tell "retry"
//! (connection loss) from "give up" (session expired) from "your request was
//! wrong" (bad version, no node). Every variant names the path or limit it is
//! about, because "NoNode" alone is useless in a log.

use crate::event::SessionState;

/// ZooKeeper's result codes, as the wire protocol numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorCode {
    SystemError = -1,
    RuntimeInconsistency = -2,
    DataInconsistency = -3,
    ConnectionLoss = -4,
    MarshallingError = -5,
    Unimplemented = -6,
    OperationTimeout = -7,
    BadArguments = -8,
    NoNode = -101,
    NoAuth = -102,
    BadVersion = -103,
    NoChildrenForEphemerals = -108,
    NodeExists = -110,
    NotEmpty = -111,
    SessionExpired = -112,
    InvalidAcl = -114,
    AuthFailed = -115,
    SessionMoved = -118,
    /// Not a server code: the handle was closed by its owner.
    SessionClosed = -1000,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZkError {
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath { path: String, reason: String },
    #[error("bad arguments: {reason}")]
    BadArguments { reason: String },
    #[error(
        "data for {path} is {size_bytes} bytes, over the {limit_bytes}-byte limit of a node \
         (keep larger data outside ZooKeeper and pass a reference to it)"
    )]
    DataTooLarge {
        path: String,
        size_bytes: usize,
        limit_bytes: usize,
    },
    /// A request too large for the server to accept as one frame (a multi
    /// whose ops together pass the limit, or data within the node limit
    /// under a long path), refused before it is sent. `request` names it:
    /// "multi of 2 ops", "create of /path", "set_data of /path".
    #[error("{request} is {size_bytes} bytes, over the {limit_bytes}-byte request limit")]
    RequestTooLarge {
        request: String,
        size_bytes: usize,
        limit_bytes: usize,
    },
    #[error("no node {path}")]
    NoNode { path: String },
    #[error("node {path} already exists")]
    NodeExists { path: String },
    #[error("bad version for {path}: expected {expected}")]
    BadVersion { path: String, expected: i32 },
    #[error("node {path} has children")]
    NotEmpty { path: String },
    #[error("cannot create {path}: its parent is ephemeral")]
    NoChildrenForEphemerals { path: String },
    #[error("not authorised for {path}")]
    NoAuth { path: String },
    #[error("invalid ACL for {path}")]
    InvalidAcl { path: String },
    #[error("authentication failed: {reason}")]
    AuthFailed { reason: String },
    #[error("connection lost: {reason}")]
    ConnectionLoss { reason: String },
    #[error("operation timed out: {reason}")]
    OperationTimeout { reason: String },
    #[error("session expired")]
    SessionExpired,
    #[error("session moved")]
    SessionMoved,
    #[error("session closed by its owner")]
    SessionClosed,
    #[error("multi failed at op {index}: {error}")]
    Multi { index: usize, error: Box<ZkError> },
    #[error("unimplemented: {what}")]
    Unimplemented { what: String },
    #[error("ZooKeeper system error: {reason}")]
    System { reason: String },
}

impl ZkError {
    /// The ZooKeeper result code this error corresponds to. For a failed
    /// multi it is the code of the op that failed.
    pub fn code(&self) -> ErrorCode {
        match self {
            ZkError::InvalidPath { .. }
            | ZkError::BadArguments { .. }
            | ZkError::DataTooLarge { .. }
            | ZkError::RequestTooLarge { .. } => ErrorCode::BadArguments,
            ZkError::NoNode { .. } => ErrorCode::NoNode,
            ZkError::NodeExists { .. } => ErrorCode::NodeExists,
            ZkError::BadVersion { .. } => ErrorCode::BadVersion,
            ZkError::NotEmpty { .. } => ErrorCode::NotEmpty,
            ZkError::NoChildrenForEphemerals { .. } => ErrorCode::NoChildrenForEphemerals,
            ZkError::NoAuth { .. } => ErrorCode::NoAuth,
            ZkError::InvalidAcl { .. } => ErrorCode::InvalidAcl,
            ZkError::AuthFailed { .. } => ErrorCode::AuthFailed,
            ZkError::ConnectionLoss { .. } => ErrorCode::ConnectionLoss,
            ZkError::OperationTimeout { .. } => ErrorCode::OperationTimeout,
            ZkError::SessionExpired => ErrorCode::SessionExpired,
            ZkError::SessionMoved => ErrorCode::SessionMoved,
            ZkError::SessionClosed => ErrorCode::SessionClosed,
            ZkError::Multi { error, .. } => error.code(),
            ZkError::Unimplemented { .. } => ErrorCode::Unimplemented,
            ZkError::System { .. } => ErrorCode::SystemError,
        }
    }

    /// True when the outcome of the operation is unknown and the same session
    /// may retry it: the request may or may not have been applied.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(
            self.code(),
            ErrorCode::ConnectionLoss | ErrorCode::OperationTimeout
        )
    }

    /// True when the session is gone for good and a new one is needed.
    pub fn is_session_fatal(&self) -> bool {
        self.session_end().is_some()
    }

    /// The session state this error reports, when it means the session is
    /// gone for good.
    pub fn session_end(&self) -> Option<SessionState> {
        match self.code() {
            ErrorCode::SessionExpired => Some(SessionState::Expired),
            ErrorCode::SessionClosed => Some(SessionState::Closed),
            ErrorCode::AuthFailed => Some(SessionState::AuthFailed),
            _ => None,
        }
    }

    /// True when starting over on a new session may succeed where this
    /// session failed: the session expired or was closed, the outcome was
    /// unknown, or the server moved the session. False for errors a new
    /// session would meet again (failed authentication, no authorisation,
    /// bad arguments, an unexpected node state), which a role must report
    /// instead of looping on.
    pub fn is_transient(&self) -> bool {
        self.is_outcome_unknown()
            || matches!(
                self.code(),
                ErrorCode::SessionExpired | ErrorCode::SessionClosed | ErrorCode::SessionMoved
            )
    }
}

pub type ZkResult<T> = Result<T, ZkError>;
