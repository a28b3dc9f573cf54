//! Finishing a task in one atomic step, and what each reply to that step
//! means. No I/O: the shell sends, these functions judge.
//!
//! Completion is one `multi`: create the task's result and delete the
//! worker's assignment *at the version the worker read*. If the master
//! revoked the assignment (it thought this worker dead and deleted it, and
//! may have assigned the task elsewhere), the delete fails and so does the
//! create: a zombie worker writes nothing.

use zkdist_coord::validate::multi_request_bytes;
use zkdist_coord::{
    CreateMode, ErrorCode, MAX_REQUEST_BYTES, Op, OpResult, TaskResult, ZkError, ZkResult,
};

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

/// The completion `ops` (from [`completion_ops`]) with the worker's
/// registration deleted in the same transaction, for a worker told to
/// stop: the tree never shows it idle and registered at once, so a master
/// that hears of the release first and picks this worker for the next
/// task has its create refused by the registration check it makes, and
/// gives the task to another instead of taking it back later. `None` when
/// the three ops do not fit in one request: the worker then completes, and
/// deregisters after.
///
/// The delete names no version, where a deregistration on its own first
/// reads the node to make sure it is this session's. The transaction
/// applies only if the assignment node is still the one this worker read
/// (the delete names its version, and the worker's looks compared its
/// creation zxid), and the master makes that node only for this worker's
/// registration: the three ops apply exactly where the completion alone
/// would. The window the completion already has stays: after the
/// deployment's root is deleted and made anew, an assignment node made
/// anew after the worker's last look passes for the one read, and the
/// registration deleted with it would be the new worker's of that id.
pub(crate) fn deregistering(mut ops: Vec<Op>, registration: &str) -> Option<Vec<Op>> {
    assert_eq!(ops.len(), 2, "a completion multi has two ops");
    ops.push(Op::Delete {
        path: registration.to_owned(),
        version: None,
    });
    (multi_request_bytes(&ops) <= MAX_REQUEST_BYTES).then_some(ops)
}

/// The failure to write instead of the result, when the completion `ops`
/// (from [`completion_ops`]) do not fit in one request; `None` when they
/// do. A completion the client refuses as too large would fail the worker,
/// and the master would give the task to the next worker, which would fail
/// the same way: one task would stop every worker in turn. Results up to
/// [`zkdist_coord::MAX_RESULT_OUTPUT_BYTES`] fit under any root a layout
/// takes (`layout::MAX_ROOT_BYTES`), so this is a guard: it fires only for
/// paths longer than a layout makes.
pub(crate) fn oversized_completion(ops: &[Op]) -> Option<TaskResult> {
    let request_bytes = multi_request_bytes(ops);
    if request_bytes <= MAX_REQUEST_BYTES {
        return None;
    }
    let [
        Op::Create {
            path: result_path,
            data: result,
            ..
        },
        Op::Delete {
            path: assignment_path,
            ..
        },
    ] = ops
    else {
        unreachable!("not a completion: {ops:?}");
    };
    Some(TaskResult::failure(format!(
        "the task's result is {} bytes, and the request that writes it ({request_bytes} bytes, \
         with {result_path} and {assignment_path}) is over the {MAX_REQUEST_BYTES}-byte request limit",
        result.len()
    )))
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
    /// The task's node refuses the result (its ACL does not let this
    /// worker's credentials create under it, or it is a foreign ephemeral
    /// node, which can have no children); nothing changed. The refusal is
    /// the task's, not the worker's: another worker would meet it too, and
    /// ending this one would end each worker in turn as the task is handed
    /// on. The assignment is still to be deleted, with a mark.
    ResultRefused(ZkError),
    /// The assignment is not the one read (deleted, or deleted and made
    /// anew): nothing changed, and nothing must be written.
    AssignmentRevoked,
    /// The registration's delete, folded into the completion by a worker
    /// told to stop ([`deregistering`]), was refused (the node is gone
    /// already): nothing changed. The completion is to be sent without it.
    DeregistrationRefused,
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
            assert!(
                matches!(results.len(), 2 | 3),
                "a completion multi has two ops, three with the deregistration"
            );
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
            ErrorCode::NoAuth | ErrorCode::NoChildrenForEphemerals => {
                CompletionReply::ResultRefused((**error).clone())
            }
            // Anything else (a quota on the whole root, a server fault,
            // the session's end) is no one task's: the worker reports it.
            _ => CompletionReply::Failed((**error).clone()),
        },
        ZkError::Multi { index: 1, error } => match error.code() {
            ErrorCode::NoNode | ErrorCode::BadVersion => CompletionReply::AssignmentRevoked,
            _ => CompletionReply::Failed((**error).clone()),
        },
        // The result and the release would have applied: only the
        // deregistration, a courtesy to the master, stands in the way.
        ZkError::Multi { index: 2, error } if !error.is_session_fatal() => {
            CompletionReply::DeregistrationRefused
        }
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
    use zkdist_coord::MAX_RESULT_OUTPUT_BYTES;

    use super::*;

    const RESULT: &str = "/zkdist/tasks/task-08b4fda8c892b50e-0000000000/result";
    const ASSIGNMENT: &str = "/zkdist/assignments/worker-0000000000";

    /// The completion of `result` as the worker sends it: `result`'s, or
    /// the failure that replaces it.
    fn sent(result: &TaskResult, result_path: &str, assignment_path: &str) -> TaskResult {
        let ops = completion_ops(result_path, &result.encode(), assignment_path, 7);
        match oversized_completion(&ops) {
            None => result.clone(),
            Some(failure) => {
                let ops = completion_ops(result_path, &failure.encode(), assignment_path, 7);
                assert_eq!(oversized_completion(&ops), None, "a failure fits");
                failure
            }
        }
    }

    #[test]
    fn the_largest_results_fit_their_completion_and_larger_ones_become_failures() {
        let largest = TaskResult::Success {
            output: vec![b'x'; MAX_RESULT_OUTPUT_BYTES],
        };
        assert_eq!(sent(&largest, RESULT, ASSIGNMENT), largest);
        let longest_failure = TaskResult::failure("e".repeat(MAX_RESULT_OUTPUT_BYTES + 100));
        assert_eq!(sent(&longest_failure, RESULT, ASSIGNMENT), longest_failure);
        // Under paths longer than a layout makes (a root of 600 bytes), the
        // largest output would not fit with them: the worker writes why.
        let root = format!("/{}", "r".repeat(599));
        let (result_path, assignment_path) =
            (format!("{root}{RESULT}"), format!("{root}{ASSIGNMENT}"));
        match sent(&largest, &result_path, &assignment_path) {
            TaskResult::Failure { message } => {
                assert!(
                    message.contains(&format!("result is {} bytes", MAX_RESULT_OUTPUT_BYTES + 5))
                        && message.contains(&format!("{MAX_REQUEST_BYTES}-byte request limit"))
                        && message.contains(&assignment_path),
                    "{message}"
                );
            }
            other => panic!("an oversized completion was kept: {other:?}"),
        }
    }

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
        let refusals = [
            ZkError::NoAuth { path: "/p".into() },
            ZkError::NoChildrenForEphemerals { path: "/p".into() },
        ];
        for refused in refusals {
            assert_eq!(
                judge_completion(&multi_error(0, refused.clone())),
                CompletionReply::ResultRefused(refused)
            );
        }
        // The session's end, and a refusal no one task causes (a quota
        // on the whole root comes as a system error), are the worker's.
        for error in [
            ZkError::SessionMoved,
            ZkError::AuthFailed {
                reason: "refused".into(),
            },
            ZkError::System {
                reason: "quota exceeded".into(),
            },
        ] {
            assert_eq!(
                judge_completion(&multi_error(0, error.clone())),
                CompletionReply::Failed(error)
            );
        }
        // The assignment is the master's node, written the same way for
        // every task: a refusal there is the deployment's, not one task's.
        let refused = ZkError::NoAuth { path: "/a".into() };
        assert_eq!(
            judge_completion(&multi_error(1, refused.clone())),
            CompletionReply::Failed(refused)
        );
    }

    #[test]
    fn a_stopping_worker_deletes_its_registration_with_the_result_when_it_fits() {
        const REGISTRATION: &str = "/zkdist/workers/worker-0000000000";
        let ops = completion_ops(RESULT, b"r", ASSIGNMENT, 3);
        let folded = deregistering(ops.clone(), REGISTRATION).expect("a small completion fits");
        assert_eq!(folded[..2], ops[..]);
        assert_eq!(
            folded[2],
            Op::Delete {
                path: REGISTRATION.into(),
                version: None
            }
        );
        // The largest result under the longest root a layout takes still
        // leaves room for the deregistration.
        let root = format!("/{}", "r".repeat(255));
        let largest = TaskResult::Success {
            output: vec![b'x'; MAX_RESULT_OUTPUT_BYTES],
        };
        let ops = completion_ops(
            &format!("{root}{RESULT}"),
            &largest.encode(),
            &format!("{root}{ASSIGNMENT}"),
            0,
        );
        assert_eq!(oversized_completion(&ops), None);
        assert!(deregistering(ops, &format!("{root}/workers/worker-0000000000")).is_some());
        // Past the request limit, the worker completes alone and
        // deregisters after.
        let empty = multi_request_bytes(&completion_ops(RESULT, b"", ASSIGNMENT, 0));
        let ops = completion_ops(
            RESULT,
            &vec![b'x'; MAX_REQUEST_BYTES - empty],
            ASSIGNMENT,
            0,
        );
        assert_eq!(oversized_completion(&ops), None);
        assert_eq!(
            deregistering(ops, "/zkdist/workers/worker-0000000000"),
            None
        );
    }

    #[test]
    fn a_refused_deregistration_leaves_the_completion_to_send_alone() {
        let applied = Ok(vec![
            OpResult::Created {
                path: "/t/result".into(),
            },
            OpResult::Deleted,
            OpResult::Deleted,
        ]);
        assert_eq!(judge_completion(&applied), CompletionReply::Applied);
        assert_eq!(
            judge_completion(&multi_error(2, no_node())),
            CompletionReply::DeregistrationRefused
        );
        let expired = multi_error(2, ZkError::SessionExpired);
        assert_eq!(
            judge_completion(&expired),
            CompletionReply::Failed(expired.unwrap_err())
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
