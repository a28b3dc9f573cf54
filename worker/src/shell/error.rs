//! What ends a worker's session early, and whether a new session may
//! do better.

use zkdist_coord::{SessionState, ZkError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    #[error("cannot lay out the zkdist tree under {root}: {error}")]
    Layout { root: String, error: ZkError },
    #[error("the worker's session ended ({})", SessionState::describe_end(*state))]
    SessionEnded {
        /// `None` when the event stream closed without saying why, or when
        /// the worker, told to stop, gave the session up: the ensemble did
        /// not answer within [`STOP_TIMEOUT_MS`](crate::STOP_TIMEOUT_MS).
        state: Option<SessionState>,
    },
    #[error(
        "the session stayed disconnected for {grace_ms} ms while a task ran, after which its \
         server may expire it and the master give the task to another worker: the task was \
         stopped and the session given up"
    )]
    CutOff { grace_ms: u64 },
    #[error(
        "the worker's registration {registration} was deleted while its session lived (or is \
         now another session's), so the master holds it for gone and reclaims its task: a task \
         in hand was stopped without a result, and the worker joins again as a new one"
    )]
    Deregistered { registration: String },
    #[error("cannot open a session: {error}")]
    Connect { error: ZkError },
    #[error("{what} failed: {error}")]
    Request { what: String, error: ZkError },
}

impl WorkerError {
    pub(super) fn request(what: impl Into<String>, error: ZkError) -> WorkerError {
        match error.session_end() {
            Some(state) => WorkerError::SessionEnded { state: Some(state) },
            None => WorkerError::Request {
                what: what.into(),
                error,
            },
        }
    }

    /// True when a new session may succeed where this one failed: the
    /// session ended (unless the server refused its credentials), or a
    /// request failed in a way [`ZkError::is_transient`] calls transient
    /// (e.g. `SessionMoved`). False for what a new session would meet
    /// again (failed authentication, no authorisation, a tree that cannot
    /// be laid out), which [`crate::run_worker_role`] reports instead of
    /// looping on.
    pub fn is_transient(&self) -> bool {
        match self {
            WorkerError::SessionEnded { state } => *state != Some(SessionState::AuthFailed),
            WorkerError::CutOff { .. } | WorkerError::Deregistered { .. } => true,
            WorkerError::Layout { error, .. }
            | WorkerError::Connect { error }
            | WorkerError::Request { error, .. } => error.is_transient(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_a_new_session_may_fix_are_transient_and_no_others() {
        let request = |error| WorkerError::Request {
            what: "creating /zkdist/workers/worker-0000000001".into(),
            error,
        };
        let lost = ZkError::ConnectionLoss {
            reason: "cut".into(),
        };
        for transient in [
            WorkerError::SessionEnded {
                state: Some(SessionState::Expired),
            },
            WorkerError::SessionEnded {
                state: Some(SessionState::Closed),
            },
            WorkerError::SessionEnded { state: None },
            request(ZkError::SessionMoved),
            WorkerError::CutOff { grace_ms: 2_500 },
            WorkerError::Connect { error: lost },
        ] {
            assert!(transient.is_transient(), "{transient:?}");
        }
        for permanent in [
            WorkerError::SessionEnded {
                state: Some(SessionState::AuthFailed),
            },
            request(ZkError::NoAuth {
                path: "/zkdist/workers".into(),
            }),
            WorkerError::Layout {
                root: "/ephemeral/zkdist".into(),
                error: ZkError::NoChildrenForEphemerals {
                    path: "/ephemeral/zkdist".into(),
                },
            },
            WorkerError::Connect {
                error: ZkError::AuthFailed {
                    reason: "bad digest".into(),
                },
            },
        ] {
            assert!(!permanent.is_transient(), "{permanent:?}");
        }
    }

    #[test]
    fn a_request_ended_by_the_session_says_so() {
        assert_eq!(
            WorkerError::request("reading /a", ZkError::SessionExpired),
            WorkerError::SessionEnded {
                state: Some(SessionState::Expired)
            }
        );
        assert_eq!(
            WorkerError::request("reading /a", ZkError::SessionMoved),
            WorkerError::Request {
                what: "reading /a".into(),
                error: ZkError::SessionMoved
            }
        );
    }
}
