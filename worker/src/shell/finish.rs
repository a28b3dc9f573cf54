//! How the worker lets go of an assignment: the completion (the result
//! and the assignment's deletion in one multi), a release alone, a
//! release that marks the task refused, and the reads that settle a
//! write whose outcome the connection's loss left unknown.

use zkdist_coord::retry::until_known;
use zkdist_coord::{Coordinator, CreateMode, Stat, TaskId, TaskResult, Watch, ZkError};

use super::{Worker, WorkerError};
use crate::completion::{
    CompletionReply, ReleaseReply, completion_ops, deregistering, judge_completion, judge_release,
    oversized_completion,
};
use crate::handler::TaskHandler;
use crate::state::{AssignmentAfterLoss, CompletionReadBack, ResultWrite, WorkerState};

impl<C: Coordinator, H: TaskHandler> Worker<C, H> {
    /// Leaves `task` without a result, for its client or an operator to
    /// deal with, and releases its assignment with a mark that keeps every
    /// master from trying it again and tells its waiters `why`.
    pub(super) async fn refuse(
        &self,
        state: &mut WorkerState,
        task: &TaskId,
        assignment: &str,
        why: String,
        error: ZkError,
    ) -> Result<(), WorkerError> {
        tracing::error!(
            target: "zkdist::worker",
            "{why}; the task is left without a result and marked refused (run every role and \
             client with the same credentials, then delete {}: the next master tries it again)",
            self.layout.refused(task)
        );
        self.note(state.result_written(ResultWrite::Refused { error }));
        self.release_marked_refused(state, task, assignment, &TaskResult::failure(why))
            .await
    }

    /// Writes `result` and deletes the assignment, atomically, and only if
    /// the assignment is still the one read. A worker told to stop deletes
    /// its registration in the same transaction ([`deregistering`]).
    pub(super) async fn complete(
        &self,
        state: &mut WorkerState,
        task: &TaskId,
        assignment: &str,
        mut result: TaskResult,
    ) -> Result<(), WorkerError> {
        let held = state
            .held_assignment()
            .expect("a task is completed while its assignment is held");
        let result_path = self.layout.result(task);
        let mut result_bytes = result.encode();
        let mut ops = completion_ops(&result_path, &result_bytes, assignment, held.version);
        if let Some(failure) = oversized_completion(&ops) {
            result = failure;
            result_bytes = result.encode();
            ops = completion_ops(&result_path, &result_bytes, assignment, held.version);
            assert!(
                oversized_completion(&ops).is_none(),
                "a failure naming the sizes fits where the result did not"
            );
        }
        let mut deregisters = false;
        if state.stop_requested()
            && let Some(with_deregistration) =
                deregistering(ops.clone(), &self.layout.worker(state.worker()))
        {
            ops = with_deregistration;
            deregisters = true;
        }
        loop {
            let reply = self.zk.multi(ops.clone()).await;
            match judge_completion(&reply) {
                CompletionReply::Applied => {
                    self.note(state.result_written(ResultWrite::Written {
                        success: result.is_success(),
                    }));
                    self.note(state.on_assignment_released());
                    if deregisters {
                        self.note(state.on_deregistered());
                    }
                    return Ok(());
                }
                CompletionReply::DeregistrationRefused => {
                    // Sent again without it; the worker deregisters after,
                    // as it does without a stop.
                    assert!(deregisters, "only a folded deregistration is refused");
                    ops.truncate(2);
                    deregisters = false;
                }
                CompletionReply::ResultAlreadyPresent => {
                    self.note(state.result_written(ResultWrite::AlreadyPresent));
                    return self.release(state, assignment).await;
                }
                CompletionReply::TaskMissing => {
                    self.note(state.result_written(ResultWrite::TaskMissing));
                    return self.release(state, assignment).await;
                }
                CompletionReply::ResultRefused(error) => {
                    let why = format!("{task}'s result cannot be written: {error}");
                    return self.refuse(state, task, assignment, why, error).await;
                }
                CompletionReply::AssignmentRevoked => return self.revoked(state).await,
                CompletionReply::OutcomeUnknown => {
                    let now = self.read_after_loss(assignment).await?;
                    match state.assignment_after_loss(now.as_ref()) {
                        AssignmentAfterLoss::StillHeld => {
                            // Not applied (applying deletes this node): the
                            // same multi again is safe.
                            self.note(
                                state.on_completion_read_back(CompletionReadBack::NotApplied),
                            );
                        }
                        AssignmentAfterLoss::Gone => {
                            return self
                                .recover_gone_assignment(state, task, &result_path, &result_bytes)
                                .await;
                        }
                    }
                }
                CompletionReply::Failed(error) => {
                    return Err(WorkerError::request(format!("completing {task}"), error));
                }
            }
        }
    }

    /// After a completion whose outcome was unknown, the assignment is
    /// gone: either the multi was applied, or the master revoked the
    /// assignment (and may have given the task to another worker). What is
    /// left tells as much as can be known, and no more:
    /// - a result other than this worker's: ours was never written (a
    ///   result is created once and goes only with its task): revoked;
    /// - no result but the task still there: ours was never written
    ///   either: revoked;
    /// - a result equal to this worker's: applied, or another worker wrote
    ///   the same bytes after a revocation; the task is finished either
    ///   way ([`CompletionReadBack::ResultPresent`]);
    /// - no task at all: cleaned up by its client after either
    ///   ([`CompletionReadBack::TaskGone`]).
    ///
    /// In every case nothing is left to write. The reads come after the
    /// `sync` of [`Worker::read_after_loss`], so they see the leader's
    /// state as of that sync.
    async fn recover_gone_assignment(
        &self,
        state: &mut WorkerState,
        task: &TaskId,
        result_path: &str,
        result_bytes: &[u8],
    ) -> Result<(), WorkerError> {
        let found = match until_known(|| self.zk.get_data(result_path, Watch::No)).await {
            Ok((data, _)) if data == result_bytes => Some(CompletionReadBack::ResultPresent),
            Ok(_) => None,
            Err(ZkError::NoNode { .. }) => {
                let task_path = self.layout.task(task);
                match until_known(|| self.zk.exists(&task_path, Watch::No)).await {
                    Ok(Some(_)) => None,
                    Ok(None) => Some(CompletionReadBack::TaskGone),
                    Err(error) => {
                        return Err(WorkerError::request(format!("reading {task_path}"), error));
                    }
                }
            }
            Err(error) => {
                return Err(WorkerError::request(
                    format!("reading {result_path}"),
                    error,
                ));
            }
        };
        match found {
            Some(found) => {
                self.note(state.on_completion_read_back(found));
                self.note(state.on_assignment_released());
            }
            None => return self.revoked(state).await,
        }
        Ok(())
    }

    /// Deletes the assignment alone (no result to write: a garbage
    /// assignment, a missing task, a result already present), at the
    /// version read.
    pub(super) async fn release(
        &self,
        state: &mut WorkerState,
        assignment: &str,
    ) -> Result<(), WorkerError> {
        let held = state
            .held_assignment()
            .expect("an assignment is released while held");
        loop {
            let reply = self.zk.delete(assignment, Some(held.version)).await;
            match judge_release(&reply) {
                ReleaseReply::Released => {
                    self.note(state.on_assignment_released());
                    return Ok(());
                }
                ReleaseReply::Revoked => return self.revoked(state).await,
                ReleaseReply::OutcomeUnknown => {
                    if self.released_after_loss(state, assignment).await? {
                        return Ok(());
                    }
                }
                ReleaseReply::Failed(error) => {
                    return Err(WorkerError::request(
                        format!("deleting {assignment}"),
                        error,
                    ));
                }
            }
        }
    }

    /// Releases the assignment of a task whose node refused its result and,
    /// in the same `multi`, marks the task refused (`refused/<task>`, data
    /// `why` as an encoded failure). The multi is the completion's, with
    /// the mark in the result's place, and its replies read the same way.
    /// Only the release must happen: a mark that cannot be made (another
    /// worker made it first, or `refused/` is closed to this worker) leaves
    /// the release alone to do.
    async fn release_marked_refused(
        &self,
        state: &mut WorkerState,
        task: &TaskId,
        assignment: &str,
        why: &TaskResult,
    ) -> Result<(), WorkerError> {
        let held = state
            .held_assignment()
            .expect("an assignment is released while held");
        let mark = self.layout.refused(task);
        let ops = completion_ops(&mark, &why.encode(), assignment, held.version);
        assert!(
            oversized_completion(&ops).is_none(),
            "a failure fits where a result does, and the mark's path is shorter"
        );
        // The mark is a courtesy; the release is what must happen. Whatever
        // keeps the mark from being made (short of the session's end, which
        // is the shell's to report) leaves the release alone to do, as a
        // failure here would end this worker and then, the task given to
        // the next one, every worker in turn.
        let unmarked = |why: &dyn std::fmt::Display| {
            tracing::warn!(
                target: "zkdist::worker",
                "{task} cannot be marked refused at {mark} ({why}); released without the mark, \
                 so the master may give it to one more worker, and a new master will try it again"
            );
        };
        let mut refused_dir_made = false;
        loop {
            let reply = self.zk.multi(ops.clone()).await;
            match judge_completion(&reply) {
                CompletionReply::Applied => {
                    self.note(state.on_assignment_released());
                    return Ok(());
                }
                // `refused/` is missing: made when first needed.
                CompletionReply::TaskMissing if !refused_dir_made => {
                    let dir = self.layout.refused_dir();
                    match until_known(|| self.zk.create(&dir, b"", CreateMode::Persistent)).await {
                        Ok(_) | Err(ZkError::NodeExists { .. }) => refused_dir_made = true,
                        Err(error) if error.is_session_fatal() => {
                            return Err(WorkerError::request(format!("creating {dir}"), error));
                        }
                        Err(error) => {
                            unmarked(&format_args!("creating {dir}: {error}"));
                            return self.release(state, assignment).await;
                        }
                    }
                }
                // Another worker marked it first.
                CompletionReply::ResultAlreadyPresent => {
                    return self.release(state, assignment).await;
                }
                CompletionReply::TaskMissing => {
                    unmarked(&format_args!("{} is missing", self.layout.refused_dir()));
                    return self.release(state, assignment).await;
                }
                // Any refusal of the mark's create that is not the
                // session's.
                CompletionReply::ResultRefused(error) => {
                    unmarked(&error);
                    return self.release(state, assignment).await;
                }
                CompletionReply::DeregistrationRefused => {
                    unreachable!("the mark's multi deregisters nothing")
                }
                CompletionReply::AssignmentRevoked => return self.revoked(state).await,
                CompletionReply::OutcomeUnknown => {
                    if self.released_after_loss(state, assignment).await? {
                        return Ok(());
                    }
                }
                CompletionReply::Failed(error) => {
                    return Err(WorkerError::request(
                        format!("releasing {assignment} and marking {mark}"),
                        error,
                    ));
                }
            }
        }
    }

    /// After a release (alone, or with a refusal's mark) whose outcome was
    /// unknown: whether the assignment is gone. Deleted by this request or
    /// by the master, the worker is free either way, and nothing of its is
    /// left to write; otherwise the request was not applied, and the caller
    /// sends it again.
    async fn released_after_loss(
        &self,
        state: &mut WorkerState,
        assignment: &str,
    ) -> Result<bool, WorkerError> {
        let now = self.read_after_loss(assignment).await?;
        let gone = state.assignment_after_loss(now.as_ref()) == AssignmentAfterLoss::Gone;
        if gone {
            self.note(state.on_assignment_released());
        }
        Ok(gone)
    }

    /// Reads the assignment node's stat after a write to it had an unknown
    /// outcome. The `sync` first makes the server this session now talks to
    /// catch up with the leader, so a write that was applied shows.
    async fn read_after_loss(&self, assignment: &str) -> Result<Option<Stat>, WorkerError> {
        let read = async {
            until_known(|| self.zk.sync(assignment)).await?;
            until_known(|| self.zk.exists(assignment, Watch::No)).await
        };
        read.await
            .map_err(|error| WorkerError::request(format!("reading {assignment}"), error))
    }
}
