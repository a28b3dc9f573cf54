//! Waiting for a task's result.

use std::time::Duration;

use super::{Client, ClientError};
use crate::codec::TaskResult;
use crate::error::ZkError;
use crate::names::TaskId;
use crate::retry::{FIRST_RETRY_PAUSE_MS, until_known};
use crate::{AddWatchMode, Coordinator, Event, SessionState, Watch, WatchKind, path};

/// What ended a wait for a task's child watch.
enum TaskChange {
    /// The task's children changed, or those of `refused/`: its result or
    /// its mark may be there.
    Children,
    /// The task node was deleted.
    Deleted,
    /// The session reconnected after a disconnection.
    Reconnected,
}

impl<C: Coordinator> Client<C> {
    /// Waits for a task's result. The result node is the task node's only
    /// child, so one child watch on the task node covers two ways the wait
    /// can end: the result's creation (`NodeChildrenChanged`) and the task's
    /// deletion (`NodeDeleted`, then [`ClientError::NoSuchTask`]). The third
    /// is a task whose node refused its result, which a worker marks under
    /// `refused/` ([`ClientError::ResultRefused`]): one persistent watch on
    /// that directory, left by the session's first wait, reports its
    /// creation and every mark, so that a session waiting for many tasks
    /// leaves one watch there, not one per task, and no wait lists it.
    /// No polling: between the watches and the result nothing is sent but
    /// a look at the task and its mark when `refused/` changes (a mark made
    /// for any task). A task that does not exist fails (after the second
    /// look below) and leaves no watch on it (a listing of a missing node
    /// sets none); the watch left on a finished task fires once, when the
    /// task is cleaned up, and later waits skip that event.
    ///
    /// A task missing at the first look is looked for once more after a
    /// `sync`: a new session may talk to a server that has not applied the
    /// task's create yet, although its submitter was told it was queued.
    pub async fn wait(&mut self, task: &TaskId) -> Result<TaskResult, ClientError> {
        let task_path = self.layout.task(task);
        let result_path = self.layout.result(task);
        let refused_dir = self.layout.refused_dir();
        let mark = self.layout.refused(task);
        let mut synced = false;
        // The first look arms no watch on the task: a one-shot watch on a
        // task that is already finished would stay on the server (and in
        // this session) until the task node changes, which may be never,
        // so a long-lived client waiting on many finished tasks would
        // gather them. Only once a look found no result is the watch
        // armed, by the next look.
        let mut watching = false;
        let no_such_task = || ClientError::NoSuchTask {
            task: task.clone(),
            path: task_path.clone(),
        };
        // A session that ends is reported the same way whether a request
        // or the event stream meets the end first.
        let failed = |error: ZkError| {
            let state = match error {
                ZkError::SessionExpired => SessionState::Expired,
                ZkError::SessionClosed => SessionState::Closed,
                ZkError::AuthFailed { .. } => SessionState::AuthFailed,
                other => return ClientError::Zk(other),
            };
            ClientError::SessionEnded {
                task: task.clone(),
                state: Some(state),
            }
        };
        loop {
            // Arms the task's watch and looks for the result and the mark
            // in one round trip, behind the watch on `refused/` when this
            // session has none yet. Sent first, and once, the watch covers
            // the mark's read; if its outcome is unknown, the pass is
            // looked at again from the start (a repeat sent after the reads
            // would not cover them).
            let watch_refused = !self.watching_refused;
            let (armed, listing, marked) = futures::join!(
                async {
                    if watch_refused {
                        self.zk
                            .add_watch(&refused_dir, AddWatchMode::Persistent)
                            .await
                    } else {
                        Ok(())
                    }
                },
                until_known(|| self
                    .zk
                    .get_children(&task_path, if watching { Watch::Yes } else { Watch::No })),
                until_known(|| self.zk.exists(&mark, Watch::No))
            );
            match armed {
                Ok(()) => self.watching_refused = true,
                Err(error) if error.is_outcome_unknown() => {
                    tokio::time::sleep(Duration::from_millis(FIRST_RETRY_PAUSE_MS)).await;
                    continue;
                }
                Err(error) => return Err(failed(error)),
            }
            let has_result = match listing {
                Ok((children, _)) => children
                    .iter()
                    .any(|name| *name == path::name(&result_path)),
                Err(ZkError::NoNode { .. }) if !synced => {
                    until_known(|| self.zk.sync(&task_path))
                        .await
                        .map_err(failed)?;
                    synced = true;
                    continue;
                }
                Err(ZkError::NoNode { .. }) => {
                    // Under a root with no tasks at all (a mistyped root,
                    // most likely), that is the news, not this one task.
                    let tasks_dir = self.layout.tasks_dir();
                    let tasks = until_known(|| self.zk.exists(&tasks_dir, Watch::No))
                        .await
                        .map_err(failed)?;
                    return Err(match tasks {
                        Some(_) => no_such_task(),
                        None => self.missing_layout(),
                    });
                }
                Err(error) => return Err(failed(error)),
            };
            if !has_result && marked.map_err(failed)?.is_some() {
                match until_known(|| self.zk.get_data(&mark, Watch::No)).await {
                    Ok((bytes, _)) => {
                        // A mark is written as a failure saying why; a
                        // mark written by hand says what it holds.
                        let reason = match TaskResult::decode(&bytes) {
                            Ok(TaskResult::Failure { message }) => message,
                            _ => String::from_utf8_lossy(&bytes).into_owned(),
                        };
                        return Err(ClientError::ResultRefused {
                            task: task.clone(),
                            reason,
                            mark,
                        });
                    }
                    // Deleted since (to have the task tried again): look
                    // again.
                    Err(ZkError::NoNode { .. }) => continue,
                    Err(error) => return Err(failed(error)),
                }
            }
            if !has_result && !watching {
                watching = true;
                continue;
            }
            if !has_result {
                match self
                    .wait_for_task_change(task, &task_path, &refused_dir)
                    .await?
                {
                    TaskChange::Children => {}
                    TaskChange::Deleted => return Err(no_such_task()),
                    TaskChange::Reconnected => continue,
                }
            }
            match until_known(|| self.zk.get_data(&result_path, Watch::No)).await {
                Ok((bytes, _)) => {
                    return TaskResult::decode(&bytes).map_err(|error| {
                        ClientError::InvalidResult {
                            task: task.clone(),
                            error,
                        }
                    });
                }
                // Not there (yet, or any more): list again, which re-arms
                // the watch and tells a deleted task apart.
                Err(ZkError::NoNode { .. }) => continue,
                Err(error) => return Err(failed(error)),
            }
        }
    }

    /// Reads events until the child watch on `task_path` or the persistent
    /// watch on `refused_dir` fires, or the session reconnects after a
    /// disconnection (the caller then looks again rather than trust that no
    /// event was lost). Events of watches left by earlier calls on other
    /// paths are skipped.
    async fn wait_for_task_change(
        &mut self,
        task: &TaskId,
        task_path: &str,
        refused_dir: &str,
    ) -> Result<TaskChange, ClientError> {
        let mut disconnected = false;
        loop {
            let ended = |state| ClientError::SessionEnded {
                task: task.clone(),
                state,
            };
            match self.events.recv().await {
                None => return Err(ended(None)),
                Some(Event::Watch(event)) if event.path == task_path => {
                    return Ok(match event.kind {
                        WatchKind::NodeDeleted => TaskChange::Deleted,
                        // A child watch fires only on children changes and
                        // on deletion.
                        _ => TaskChange::Children,
                    });
                }
                Some(Event::Watch(event)) if event.path == refused_dir => {
                    return Ok(TaskChange::Children);
                }
                Some(Event::Watch(_)) => {}
                Some(Event::Session(SessionState::Connected)) => {
                    if std::mem::take(&mut disconnected) {
                        return Ok(TaskChange::Reconnected);
                    }
                }
                Some(Event::Session(SessionState::Disconnected)) => disconnected = true,
                Some(Event::Session(
                    state @ (SessionState::Expired
                    | SessionState::Closed
                    | SessionState::AuthFailed),
                )) => return Err(ended(Some(state))),
            }
        }
    }
}
