//! Reading back what the master cannot know: an assignment create whose
//! outcome is unknown, and a departed worker's assignment taken back.

use zkdist_coord::retry::until_known;
use zkdist_coord::{
    AssignmentView, Coordinator, Layout, Op, TaskId, Watch, WorkerId, ZkError, ZkResult,
};

use super::settled::task_status;
use crate::election::Epoch;
use crate::fenced::{FencedOps, FencedReply};
use crate::state::{AssignmentFound, ReclaimOutcome};

/// Reads back an assignment create whose outcome is unknown. The worker is
/// alive and only this master assigns, so the node, if present, is that
/// create's; if absent, the task's result tells whether the worker already
/// ran it (completion creates the result and deletes the assignment in one
/// `multi`); a task whose node refused its result is marked refused by
/// the release, and reads as finished the same way. A `sync` comes first: after a reconnect
/// the server may be a follower that has not applied the create yet, and
/// reading "absent" there would re-queue a task the worker is running.
pub(super) async fn recover_assignment<C: Coordinator>(
    zk: &C,
    layout: &Layout,
    worker: &WorkerId,
    task: &TaskId,
) -> ZkResult<AssignmentFound> {
    let path = layout.assignment(worker);
    until_known(|| zk.sync(&path)).await?;
    match until_known(|| zk.get_data(&path, Watch::No)).await {
        Ok((data, _)) if AssignmentView::decode(&data).is_ok_and(|view| view.task == *task) => {
            Ok(AssignmentFound::Present)
        }
        // Not this master's node (only it assigns to this worker): it was
        // there before, so the create was refused.
        Ok(_) => Ok(AssignmentFound::Foreign),
        Err(ZkError::NoNode { .. }) => Ok(AssignmentFound::Absent(
            task_status(zk, layout, task).await?,
        )),
        Err(error) => Err(error),
    }
}

/// Deletes the assignment of a worker that is gone, fenced by the epoch,
/// then reads the task's status. Sent again after a connection loss: no
/// one creates a dead worker's assignment again, so a repeat deletes
/// nothing more, and `NoNode` then means an earlier attempt (or the worker,
/// on completing) deleted it.
pub(super) async fn reclaim<C: Coordinator>(
    zk: &C,
    layout: &Layout,
    epoch: Epoch,
    worker: &WorkerId,
    task: &TaskId,
) -> ZkResult<ReclaimOutcome> {
    let path = layout.assignment(worker);
    let delete = FencedOps::new(
        layout,
        epoch,
        [Op::Delete {
            path: path.clone(),
            version: None,
        }],
    );
    let deleted = match until_known(|| async {
        match delete.send(zk).await {
            FencedReply::Unknown => Err(ZkError::ConnectionLoss {
                reason: format!("deleting {path}: outcome unknown"),
            }),
            known => Ok(known),
        }
    })
    .await?
    {
        FencedReply::Applied => true,
        FencedReply::OpFailed {
            error: ZkError::NoNode { .. },
            ..
        } => false,
        FencedReply::FencedOff => return Ok(ReclaimOutcome::Fenced),
        FencedReply::Unknown => unreachable!("repeated until known"),
        FencedReply::OpFailed { error, .. } | FencedReply::Error(error) => return Err(error),
    };
    // Read on the server that answered the delete: no sync needed.
    let status = task_status(zk, layout, task).await?;
    Ok(ReclaimOutcome::Reclaimed { deleted, status })
}
