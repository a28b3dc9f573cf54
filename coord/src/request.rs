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
use crate::validate::{
    check_create, check_delete, check_multi, check_multi_read, check_read, check_set_data,
};

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
    /// Several nodes' data in one request (ZooKeeper 3.6+ `multiRead` of
    /// `getData` ops), without watches. Each path is answered on its own:
    /// one missing node does not fail the others.
    GetDataMany {
        paths: Vec<String>,
    },
    /// Several nodes' children in one request (ZooKeeper 3.6+ `multiRead`
    /// of `getChildren` ops), without watches or stats. Each path is
    /// answered on its own, as in `GetDataMany`.
    GetChildrenMany {
        paths: Vec<String>,
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

/// One node's data and stat as a multi-read answers it, or why that node
/// could not be read.
pub type DataRead = ZkResult<(Vec<u8>, Stat)>;

/// One node's children as a multi-read answers it (without a stat:
/// ZooKeeper's multi-read carries none for a listing), or why that node
/// could not be listed.
pub type ChildrenRead = ZkResult<Vec<String>>;

/// The reply to a request that succeeded, one variant per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The created node's path (with its sequence suffix if sequential).
    Created(String),
    Deleted,
    Exists(Option<Stat>),
    Data(Vec<u8>, Stat),
    /// One result per path of a `GetDataMany`, in its order.
    DataMany(Vec<DataRead>),
    /// One result per path of a `GetChildrenMany`, in its order.
    ChildrenMany(Vec<ChildrenRead>),
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
            Request::GetDataMany { paths } | Request::GetChildrenMany { paths } => {
                check_multi_read(self.name(), paths)
            }
        }
    }

    /// The typed method that makes this request.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Create { .. } => "create",
            Request::Delete { .. } => "delete",
            Request::Exists { .. } => "exists",
            Request::GetData { .. } => "get_data",
            Request::GetDataMany { .. } => "get_data_many",
            Request::GetChildrenMany { .. } => "get_children_many",
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
    use crate::path::validate_path;

    /// Each request is checked by its validator (whose own tests say what
    /// each refuses) and named after its method.
    #[test]
    fn checks_are_the_validators_and_names_are_the_methods() {
        let bad = "tasks/t-";
        let refused = |path| validate_path(path).unwrap_err();
        let ops = vec![Op::Delete {
            path: bad.into(),
            version: None,
        }];
        for (request, checked, name) in [
            (
                Request::Create {
                    path: bad.into(),
                    data: vec![],
                    mode: CreateMode::PersistentSequential,
                },
                check_create(bad, &[], CreateMode::PersistentSequential),
                "create",
            ),
            (
                Request::Delete {
                    path: "/a".into(),
                    version: Some(-2),
                },
                check_delete("/a", Some(-2)),
                "delete",
            ),
            (
                Request::SetData {
                    path: bad.into(),
                    data: vec![],
                    version: None,
                },
                check_set_data(bad, &[], None),
                "set_data",
            ),
            (
                Request::Multi { ops: ops.clone() },
                check_multi(&ops),
                "multi",
            ),
            (
                Request::Exists {
                    path: bad.into(),
                    watch: false,
                },
                Err(refused(bad)),
                "exists",
            ),
            (
                Request::GetData {
                    path: bad.into(),
                    watch: true,
                },
                Err(refused(bad)),
                "get_data",
            ),
            (
                Request::GetChildren {
                    path: bad.into(),
                    watch: false,
                },
                Err(refused(bad)),
                "get_children",
            ),
            (
                Request::CountDescendants { path: bad.into() },
                Err(refused(bad)),
                "count_descendants",
            ),
            (
                Request::GetDataMany {
                    paths: vec!["/a".into(), bad.into()],
                },
                check_multi_read("get_data_many", &["/a".into(), bad.into()]),
                "get_data_many",
            ),
            (
                Request::GetChildrenMany {
                    paths: vec![bad.into()],
                },
                check_multi_read("get_children_many", &[bad.into()]),
                "get_children_many",
            ),
            (Request::Sync { path: "/".into() }, Ok(()), "sync"),
            (
                Request::AddWatch {
                    path: bad.into(),
                    mode: AddWatchMode::Persistent,
                },
                Err(refused(bad)),
                "add_watch",
            ),
        ] {
            // Every case but `sync` is refused, so that a request checked
            // by the wrong validator (or by none) shows.
            assert_eq!(checked.is_ok(), name == "sync", "{name}");
            assert_eq!(request.check(), checked, "{name}");
            assert_eq!(request.name(), name);
        }
        let error = unexpected("sync", Reply::Deleted);
        assert!(
            error.to_string().contains("sync got the reply Deleted"),
            "{error}"
        );
    }
}
