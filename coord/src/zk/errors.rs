//! `zookeeper-client` errors mapped onto [`ZkError`], with the path and the
//! expected version of the operation that failed (the crate's errors carry
//! neither).

use zookeeper_client as zkc;

use crate::error::ZkError;
use crate::op::Op;

/// What a failed operation was about, for the error it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpContext {
    /// A short name of the operation, e.g. `"create"`.
    pub op: &'static str,
    pub path: String,
    /// The version the caller expected, if any.
    pub expected_version: Option<i32>,
}

impl OpContext {
    pub(crate) fn new(op: &'static str, path: &str, expected_version: Option<i32>) -> OpContext {
        OpContext {
            op,
            path: path.to_owned(),
            expected_version,
        }
    }

    pub(crate) fn of_op(op: &Op) -> OpContext {
        match op {
            Op::Create { path, .. } => OpContext::new("create", path, None),
            Op::Delete { path, version } => OpContext::new("delete", path, *version),
            Op::SetData { path, version, .. } => OpContext::new("set_data", path, *version),
            Op::Check { path, version } => OpContext::new("check", path, *version),
        }
    }
}

/// Maps an error of one operation.
pub(crate) fn map_error(error: zkc::Error, context: &OpContext) -> ZkError {
    let path = context.path.clone();
    match error {
        zkc::Error::NoNode => ZkError::NoNode { path },
        zkc::Error::NodeExists => ZkError::NodeExists { path },
        zkc::Error::BadVersion => ZkError::BadVersion {
            path,
            // The server answers BadVersion only to an expected version;
            // -1 (ZooKeeper's "any") cannot be refused.
            expected: context.expected_version.unwrap_or(-1),
        },
        zkc::Error::NotEmpty => ZkError::NotEmpty { path },
        zkc::Error::NoChildrenForEphemerals => ZkError::NoChildrenForEphemerals { path },
        zkc::Error::NoAuth => ZkError::NoAuth { path },
        zkc::Error::InvalidAcl => ZkError::InvalidAcl { path },
        zkc::Error::AuthFailed => ZkError::AuthFailed {
            reason: "the server refused this session's credentials".into(),
        },
        zkc::Error::SessionExpired => ZkError::SessionExpired,
        zkc::Error::SessionMoved => ZkError::SessionMoved,
        zkc::Error::ClientClosed => ZkError::SessionClosed,
        zkc::Error::ConnectionLoss => ZkError::ConnectionLoss {
            reason: format!(
                "the connection dropped before the reply to {} {path}; it may or may not have been applied",
                context.op
            ),
        },
        zkc::Error::NoHosts => ZkError::ConnectionLoss {
            reason: format!("no server reachable for {} {path}", context.op),
        },
        zkc::Error::Timeout => ZkError::OperationTimeout {
            reason: format!("{} {path} timed out", context.op),
        },
        zkc::Error::BadArguments(what) => ZkError::BadArguments {
            reason: format!("{} {path}: {what}", context.op),
        },
        zkc::Error::Unimplemented => ZkError::Unimplemented {
            what: format!("{} {path} is not implemented by this server", context.op),
        },
        // The client fails every request in flight with the error that
        // broke its connection: a read or write error, "no response from
        // connection in N ms" (a server that went silent), a writable
        // server found while on a read-only one. None of them is the
        // server's answer: the request may or may not have been applied,
        // exactly as after `ConnectionLoss`, and the session carries on
        // (or expires, which later requests are told).
        zkc::Error::Custom(broken) => ZkError::ConnectionLoss {
            reason: format!(
                "the connection broke ({broken}) before the reply to {} {path}; it may or may not have been applied",
                context.op
            ),
        },
        // The client answers a request with an unexpected error in
        // different situations. A request that could not even be queued
        // because the session task has stopped while the session still
        // looks alive ("expect error state, got SyncConnected") was never
        // sent, and nothing will ever answer on this handle again: the
        // handle is as good as closed. Retrying on it is useless; a new
        // session is what may succeed, as after a close. (The vendored
        // copy now answers such a request `ClientClosed`, mapped the same
        // way above; this stays for the message an unpatched client
        // gives.) Otherwise the
        // request may have reached the server: the client fails every request in
        // flight with what broke its connection when that is a frame it
        // could not read (a reply whose xid matches no request, a reply or
        // event that does not decode), answers a request its stopping
        // session task dropped ("BUG: ... expect response, but got none"),
        // or could not read an applied reply (a sequential name without
        // its number). The outcome is unknown, and calling it a definite
        // failure would have a submitter queue a task twice; the next
        // request on a stopped handle is told the session is closed.
        zkc::Error::UnexpectedError(message) if session_task_stopped(&message) => {
            tracing::warn!(
                target: "zkdist::zk",
                op = context.op,
                %path,
                %message,
                "the ZooKeeper client stopped serving this session: treating it as closed"
            );
            ZkError::SessionClosed
        }
        broken @ (zkc::Error::UnexpectedError(_) | zkc::Error::UnmarshalError { .. }) => {
            ZkError::ConnectionLoss {
                reason: format!(
                    "the client failed ({broken}) before the reply to {} {path}; it may or may not have been applied",
                    context.op
                ),
            }
        }
        // The server refused the request unapplied, under load: worth
        // retrying, as after a timeout.
        zkc::Error::Throttled => ZkError::OperationTimeout {
            reason: format!(
                "the server throttled {} {path} (it is overloaded); not applied",
                context.op
            ),
        },
        other => ZkError::System {
            reason: format!("{} {path}: {other}", context.op),
        },
    }
}

/// Whether an unexpected error of the client says that its session task has
/// stopped and the request was not sent. The message is that of the
/// vendored `zookeeper-client` (`SessionState::to_error`), quoted verbatim
/// by the unit tests below.
fn session_task_stopped(message: &str) -> bool {
    message.starts_with("expect error state")
}

/// Maps the error of a multi: the failing op's error, with its index.
pub(crate) fn map_multi_error(error: zkc::MultiWriteError, ops: &[Op]) -> ZkError {
    match error {
        zkc::MultiWriteError::OperationFailed { index, source } => {
            let context = match ops.get(index) {
                Some(op) => OpContext::of_op(op),
                None => OpContext::new("multi", "?", None),
            };
            ZkError::Multi {
                index,
                error: Box::new(map_error(source, &context)),
            }
        }
        // The request as a whole failed (the connection dropped, say): no
        // op is to blame, so the error names the multi, not its first op.
        zkc::MultiWriteError::RequestFailed { source } => {
            let what = format!("of {} ops", ops.len());
            map_error(source, &OpContext::new("multi", &what, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorCode, SessionState};

    #[test]
    fn maps_codes_with_path_and_version() {
        let context = OpContext::new("set_data", "/a", Some(3));
        assert_eq!(
            map_error(zkc::Error::BadVersion, &context),
            ZkError::BadVersion {
                path: "/a".into(),
                expected: 3
            }
        );
        assert_eq!(
            map_error(zkc::Error::NoNode, &context),
            ZkError::NoNode { path: "/a".into() }
        );
        for (error, code) in [
            (zkc::Error::NodeExists, ErrorCode::NodeExists),
            (zkc::Error::NotEmpty, ErrorCode::NotEmpty),
            (
                zkc::Error::NoChildrenForEphemerals,
                ErrorCode::NoChildrenForEphemerals,
            ),
            (zkc::Error::NoAuth, ErrorCode::NoAuth),
            (zkc::Error::AuthFailed, ErrorCode::AuthFailed),
            (zkc::Error::SessionExpired, ErrorCode::SessionExpired),
            (zkc::Error::ClientClosed, ErrorCode::SessionClosed),
            (zkc::Error::ConnectionLoss, ErrorCode::ConnectionLoss),
            (zkc::Error::Unimplemented, ErrorCode::Unimplemented),
            (zkc::Error::MarshallingError, ErrorCode::SystemError),
        ] {
            assert_eq!(map_error(error, &context).code(), code);
        }
    }

    /// Errors the client hands every request in flight when a frame it
    /// could not read breaks the connection leave the outcome unknown, as a
    /// connection loss does; a throttled request is worth retrying.
    #[test]
    fn an_unreadable_reply_leaves_the_outcome_unknown() {
        let context = OpContext::new("create", "/tasks/task-", None);
        for broken in [
            zkc::Error::UnexpectedError("recv response with xid 7 but no pending request".into()),
            zkc::Error::UnmarshalError {
                entity: "reply header",
                reason: &"buffer underflow",
            },
        ] {
            let shown = broken.to_string();
            let mapped = map_error(broken, &context);
            assert!(mapped.is_outcome_unknown(), "{mapped:?}");
            assert!(mapped.is_transient(), "{mapped:?}");
            let reason = mapped.to_string();
            assert!(reason.contains(&shown), "{reason}");
            assert!(reason.contains("create /tasks/task-"), "{reason}");
        }
        let throttled = map_error(zkc::Error::Throttled, &context);
        assert_eq!(throttled.code(), ErrorCode::OperationTimeout);
        assert!(throttled.is_transient());
    }

    /// A client whose session task has stopped refuses every new request
    /// with an unexpected error while the session still looks connected.
    /// The handle is as good as closed: were it an unknown outcome, callers
    /// that retry until the outcome is known would retry forever on it,
    /// and a role must start over on a new session, not stop. A request
    /// the stopping task dropped may have been sent: its outcome is
    /// unknown.
    #[test]
    fn a_stopped_session_task_is_a_closed_session() {
        let context = OpContext::new("create", "/tasks/task-", None);
        let refused = zkc::Error::UnexpectedError("expect error state, got SyncConnected".into());
        let mapped = map_error(refused, &context);
        assert_eq!(mapped, ZkError::SessionClosed);
        assert!(!mapped.is_outcome_unknown(), "{mapped:?}");
        assert!(mapped.is_transient(), "a new session may succeed");
        assert_eq!(mapped.session_end(), Some(SessionState::Closed));

        let dropped =
            zkc::Error::UnexpectedError("BUG: Create expect response, but got none".into());
        let mapped = map_error(dropped, &context);
        assert!(mapped.is_outcome_unknown(), "{mapped:?}");
        assert!(mapped.to_string().contains("got none"), "{mapped}");
    }

    #[test]
    fn a_failed_multi_names_the_failing_op() {
        let ops = vec![
            Op::Check {
                path: "/a".into(),
                version: Some(1),
            },
            Op::Delete {
                path: "/b".into(),
                version: Some(4),
            },
        ];
        let error = zkc::MultiWriteError::OperationFailed {
            index: 1,
            source: zkc::Error::BadVersion,
        };
        assert_eq!(
            map_multi_error(error, &ops),
            ZkError::Multi {
                index: 1,
                error: Box::new(ZkError::BadVersion {
                    path: "/b".into(),
                    expected: 4
                })
            }
        );
        let lost = zkc::MultiWriteError::RequestFailed {
            source: zkc::Error::ConnectionLoss,
        };
        match map_multi_error(lost, &ops) {
            ZkError::ConnectionLoss { reason } => {
                assert!(reason.contains("multi of 2 ops"), "{reason}");
                assert!(!reason.contains("/a"), "no op is blamed: {reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
