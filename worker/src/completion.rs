//! Finishing a task in one atomic step, and what each reply to that step
//! means. No I/O: the shell sends, these functions judge.
//!
//! Completion is one `multi`: create the task's result and delete the
//! worker's assignment *at the version the worker read*. If the master
//! revoked the assignment (it thought this worker dead and deleted it, and
//! may have assigned the task elsewhere), the delete fails and so does the
//! create: a zombie worker writes nothing.

use zkdist_coord::{CreateMode, ErrorCode, Op, OpResult, ZkError, ZkResult};

/// The ops of the completion multi. Their order is what
/// [`judge_completion`] reads the failing index against.
pub(crate) fn completion_ops(
    result_path: &str,
    result: &[u8],
    assignment_path: &str,
    assignment_version: i32,
) -> Vec<Op> {
    vec![
        Op::Create {
            path: result_path.to_owned(),
            data: result.to_vec(),
            mode: CreateMode::Persistent,
        },
        Op::Delete {
            path: assignment_path.to_owned(),
            version: Some(assignment_version),
        },
    ]
}

/// What the reply to the completion multi means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CompletionReply {
    /// Result created and assignment deleted, together.
    Applied,
    /// The task already had a result; nothing changed. The assignment is
    /// still to be deleted, alone.
    ResultAlreadyPresent,
    /// The task's node is gone (a client deleted it); nothing changed.
    TaskMissing,
    /// The assignment is not the one read (deleted, or deleted and made
    /// anew): nothing changed, and nothing must be written.
    AssignmentRevoked,
    /// Connection loss: applied or not, to be found out.
    OutcomeUnknown,
    /// Anything else, session expiry included: the shell reports it.
    Failed(ZkError),
}

/// Judges the completion multi's reply. The first failing op decides: a
/// result that exists wins over a revoked assignment, which is right, as
/// both mean nothing of ours is written, and the assignment's delete then
/// tells revoked from not.
pub(crate) fn judge_completion(reply: &ZkResult<Vec<OpResult>>) -> CompletionReply {
    let error = match reply {
        Ok(results) => {
            assert_eq!(results.len(), 2, "a completion multi has two ops");
            return CompletionReply::Applied;
        }
        Err(error) => error,
    };
    if error.is_outcome_unknown() {
        return CompletionReply::OutcomeUnknown;
    }
    match error {
        ZkError::Multi { index: 0, error } => match error.code() {
            ErrorCode::NodeExists => CompletionReply::ResultAlreadyPresent,
            ErrorCode::NoNode => CompletionReply::TaskMissing,
            _ => CompletionReply::Failed((**error).clone()),
        },
        ZkError::Multi { index: 1, error } => match error.code() {
            ErrorCode::NoNode | ErrorCode::BadVersion => CompletionReply::AssignmentRevoked,
            _ => CompletionReply::Failed((**error).clone()),
        },
        other => CompletionReply::Failed(other.clone()),
    }
}

/// What the reply to deleting the assignment alone (version-checked) means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReleaseReply {
    Released,
    /// Not the assignment read any more: the master took it back.
    Revoked,
    OutcomeUnknown,
    Failed(ZkError),
}

pub(crate) fn judge_release(reply: &ZkResult<()>) -> ReleaseReply {
    match reply {
        Ok(()) => ReleaseReply::Released,
        Err(error) if error.is_outcome_unknown() => ReleaseReply::OutcomeUnknown,
        Err(error) => match error.code() {
            ErrorCode::NoNode | ErrorCode::BadVersion => ReleaseReply::Revoked,
            _ => ReleaseReply::Failed(error.clone()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn multi_error(index: usize, error: ZkError) -> ZkResult<Vec<OpResult>> {
        Err(ZkError::Multi {
            index,
            error: Box::new(error),
        })
    }

    fn no_node() -> ZkError {
        ZkError::NoNode { path: "/p".into() }
    }

    #[test]
    fn the_ops_create_the_result_then_delete_the_read_version() {
        let ops = completion_ops("/t/result", b"r", "/a/w", 3);
        assert_eq!(
            ops,
            vec![
                Op::Create {
                    path: "/t/result".into(),
                    data: b"r".to_vec(),
                    mode: CreateMode::Persistent
                },
                Op::Delete {
                    path: "/a/w".into(),
                    version: Some(3)
                },
            ]
        );
    }

    #[test]
    fn each_reply_of_the_multi_is_judged() {
        let applied = Ok(vec![
            OpResult::Created {
                path: "/t/result".into(),
            },
            OpResult::Deleted,
        ]);
        assert_eq!(judge_completion(&applied), CompletionReply::Applied);
        let exists = ZkError::NodeExists { path: "/p".into() };
        assert_eq!(
            judge_completion(&multi_error(0, exists)),
            CompletionReply::ResultAlreadyPresent
        );
        assert_eq!(
            judge_completion(&multi_error(0, no_node())),
            CompletionReply::TaskMissing
        );
        assert_eq!(
            judge_completion(&multi_error(1, no_node())),
            CompletionReply::AssignmentRevoked
        );
        let bad_version = ZkError::BadVersion {
            path: "/p".into(),
            expected: 0,
        };
        assert_eq!(
            judge_completion(&multi_error(1, bad_version)),
            CompletionReply::AssignmentRevoked
        );
        let lost = ZkError::ConnectionLoss {
            reason: "cut".into(),
        };
        assert_eq!(
            judge_completion(&Err(lost)),
            CompletionReply::OutcomeUnknown
        );
        assert_eq!(
            judge_completion(&Err(ZkError::SessionExpired)),
            CompletionReply::Failed(ZkError::SessionExpired)
        );
        let refused = ZkError::NoAuth { path: "/p".into() };
        assert_eq!(
            judge_completion(&multi_error(0, refused.clone())),
            CompletionReply::Failed(refused)
        );
    }

    #[test]
    fn each_reply_of_the_lone_delete_is_judged() {
        assert_eq!(judge_release(&Ok(())), ReleaseReply::Released);
        assert_eq!(judge_release(&Err(no_node())), ReleaseReply::Revoked);
        let bad_version = ZkError::BadVersion {
            path: "/p".into(),
            expected: 0,
        };
        assert_eq!(judge_release(&Err(bad_version)), ReleaseReply::Revoked);
        let lost = ZkError::ConnectionLoss {
            reason: "cut".into(),
        };
        assert_eq!(judge_release(&Err(lost)), ReleaseReply::OutcomeUnknown);
        assert_eq!(
            judge_release(&Err(ZkError::SessionExpired)),
            ReleaseReply::Failed(ZkError::SessionExpired)
        );
    }
}
