//! One request of the [`crate::Coordinator`] trait as data, and its reply.
//!
//! Every backend carries requests this way (the real one to its session's
//! actor, the simulator to its server), and every wrapper of a session (one
//! that counts requests, or plants a bug in a test) sees them this way:
//! each implements [`crate::Coordinator::call`] alone, and the trait's
//! typed methods build the request and unpack the reply.

use crate::error::{ZkError, ZkResult};
use crate::op::{Op, OpResult};
use crate::types::{AddWatchMode, CreateMode, Stat};
use crate::validate::{check_create, check_delete, check_multi, check_read, check_set_data};

/// A request, as the typed method that makes it takes its arguments
/// (`watch: true` is `Watch::Yes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Create {
        path: String,
        data: Vec<u8>,
        mode: CreateMode,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
    Exists {
        path: String,
        watch: bool,
    },
    GetData {
        path: String,
        watch: bool,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        version: Option<i32>,
    },
    GetChildren {
        path: String,
        watch: bool,
    },
    CountDescendants {
        path: String,
    },
    Multi {
        ops: Vec<Op>,
    },
    Sync {
        path: String,
    },
    AddWatch {
        path: String,
        mode: AddWatchMode,
    },
}

/// The reply to a request that succeeded, one variant per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The created node's path (with its sequence suffix if sequential).
    Created(String),
    Deleted,
    Exists(Option<Stat>),
    Data(Vec<u8>, Stat),
    DataSet(Stat),
    Children(Vec<String>, Stat),
    DescendantCount(usize),
    Multi(Vec<OpResult>),
    Synced,
    WatchAdded,
}

impl Request {
    /// Client-side checks, done before anything is sent (the same for
    /// every backend: see [`crate::validate`]). A multi's faulty op is
    /// reported as `ZkError::Multi` with its index, as the server would
    /// report a failing op.
    pub fn check(&self) -> ZkResult<()> {
        match self {
            Request::Create { path, data, mode } => check_create(path, data, *mode),
            Request::Delete { path, version } => check_delete(path, *version),
            Request::Exists { path, .. }
            | Request::GetData { path, .. }
            | Request::GetChildren { path, .. }
            | Request::CountDescendants { path }
            | Request::Sync { path }
            | Request::AddWatch { path, .. } => check_read(path),
            Request::SetData {
                path,
                data,
                version,
            } => check_set_data(path, data, *version),
            Request::Multi { ops } => check_multi(ops),
        }
    }

    /// The typed method that makes this request.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Create { .. } => "create",
            Request::Delete { .. } => "delete",
            Request::Exists { .. } => "exists",
            Request::GetData { .. } => "get_data",
            Request::SetData { .. } => "set_data",
            Request::GetChildren { .. } => "get_children",
            Request::CountDescendants { .. } => "count_descendants",
            Request::Multi { .. } => "multi",
            Request::Sync { .. } => "sync",
            Request::AddWatch { .. } => "add_watch",
        }
    }
}

/// A backend answered `method` with a reply of another request: a bug in
/// the backend, reported rather than trusted.
pub(crate) fn unexpected(method: &str, reply: Reply) -> ZkError {
    ZkError::System {
        reason: format!("{method} got the reply {reply:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn checks_are_the_validators_and_names_are_the_methods() {
        let create = Request::Create {
            path: "tasks/t-".into(),
            data: vec![],
            mode: CreateMode::PersistentSequential,
        };
        assert_eq!(
            create.check().map_err(|e| e.code()),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(create.name(), "create");
        let multi = Request::Multi {
            ops: vec![
                Op::Check {
                    path: "/a".into(),
                    version: 0,
                },
                Op::Delete {
                    path: "/a/".into(),
                    version: None,
                },
            ],
        };
        match multi.check() {
            Err(ZkError::Multi { index: 1, .. }) => {}
            other => panic!("the second op is named: {other:?}"),
        }
        let sync = Request::Sync { path: "/".into() };
        assert_eq!(sync.check(), Ok(()));
        assert_eq!(sync.name(), "sync");
        let error = unexpected("sync", Reply::Deleted);
        assert!(
            error.to_string().contains("sync got the reply Deleted"),
            "{error}"
        );
    }
}
