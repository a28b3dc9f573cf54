//! Deleting a finished task.

use super::{Client, ClientError};
use crate::error::ZkError;
use crate::names::TaskId;
use crate::retry::until_known;
use crate::{Coordinator, Op, Watch};

/// How many times [`Client::cleanup`] looks up what settles a task (its
/// result or its mark) before giving up on a task whose result and mark
/// keep changing under it.
const CLEANUP_LOOKUPS: u32 = 3;

impl<C: Coordinator> Client<C> {
    /// Deletes a finished task: its result (or, for a task marked refused,
    /// its mark), then the task node, in one atomic multi so that no
    /// half-deleted task is ever visible. When the multi's outcome is
    /// unknown (connection loss), a task found gone afterwards (read after
    /// a `sync`) counts as cleaned up and a task still there is tried again.
    /// A mark is made by a worker, with the worker's credentials: where the
    /// client's differ, deleting it is refused (`NoAuth`).
    pub async fn cleanup(&self, task: &TaskId) -> Result<(), ClientError> {
        let task_path = self.layout.task(task);
        let settled_by = |path: String| {
            vec![
                Op::Delete {
                    path,
                    version: None,
                },
                Op::Delete {
                    path: task_path.clone(),
                    version: None,
                },
            ]
        };
        let (result, mark) = (self.layout.result(task), self.layout.refused(task));
        let mut ops = settled_by(result.clone());
        // How many times what settles the task was looked up: a result and
        // a mark deleted and made again in turn cannot keep it going.
        let mut lookups = 0;
        loop {
            match self.zk.multi(ops.clone()).await {
                Ok(_) => return Ok(()),
                Err(ZkError::Multi { index: 0, error })
                    if matches!(*error, ZkError::NoNode { .. }) =>
                {
                    lookups += 1;
                    if lookups > CLEANUP_LOOKUPS {
                        return Err(ClientError::NotFinished { task: task.clone() });
                    }
                    let (task_now, result_now, mark_now) = futures::join!(
                        until_known(|| self.zk.exists(&task_path, Watch::No)),
                        until_known(|| self.zk.exists(&result, Watch::No)),
                        until_known(|| self.zk.exists(&mark, Watch::No))
                    );
                    if task_now?.is_none() {
                        return Err(ClientError::NoSuchTask {
                            task: task.clone(),
                            path: task_path,
                        });
                    }
                    ops = if result_now?.is_some() {
                        settled_by(result.clone())
                    } else if mark_now?.is_some() {
                        // Marked refused: settled without a result.
                        settled_by(mark.clone())
                    } else {
                        return Err(ClientError::NotFinished { task: task.clone() });
                    };
                }
                Err(error) if error.is_outcome_unknown() => {
                    if self.exists_after_loss(&task_path).await?.is_none() {
                        return Ok(());
                    }
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
}
