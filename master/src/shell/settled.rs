//! Whether a task is settled: its result written, or its mark made when
//! its node refused the result.

use zkdist_coord::retry::until_known;
use zkdist_coord::{ChildrenRead, Coordinator, Layout, TaskId, Watch, ZkError, ZkResult};

use crate::state::TaskStatus;

/// The nodes either of which settles a task: its result, or its mark when
/// its node refused the result (see `Layout::refused`), which no master
/// tries again. Built before the reads go out, so that a check in flight
/// holds two paths, not a copy of the layout.
pub(super) struct SettledBy {
    result: String,
    mark: String,
}

impl SettledBy {
    pub(super) fn of(layout: &Layout, task: &TaskId) -> SettledBy {
        SettledBy {
            result: layout.result(task),
            mark: layout.refused(task),
        }
    }

    /// Whether either node exists. Both reads are sent together.
    async fn any<C: Coordinator>(&self, zk: &C) -> ZkResult<bool> {
        let (result, mark) = futures::join!(
            until_known(|| zk.exists(&self.result, Watch::No)),
            until_known(|| zk.exists(&self.mark, Watch::No))
        );
        Ok(result?.is_some() || mark?.is_some())
    }

    /// Whether each of `checks` is settled, in one request: a multi-read
    /// of both nodes of every task, listing them to learn whether they
    /// exist (a multi-read has no `exists`). A node the session may not
    /// read is answered `NoAuth`, which ZooKeeper gives only for a node it
    /// found, so it counts as present, as `exists` would show it.
    pub(super) async fn each<C: Coordinator>(zk: &C, checks: &[SettledBy]) -> ZkResult<Vec<bool>> {
        let paths: Vec<String> = checks
            .iter()
            .flat_map(|check| [check.result.clone(), check.mark.clone()])
            .collect();
        let listed = until_known(|| zk.get_children_many(paths.clone())).await?;
        assert_eq!(listed.len(), paths.len(), "one listing per path");
        settled_pairs(&listed)
    }
}

/// Whether each task is settled, from the listings of its two nodes (in
/// pairs, as [`SettledBy::each`] asks for them): a node is there if its
/// listing was answered, or refused with `NoAuth` (the server checks the
/// ACL of a node it found); `NoNode` says it is missing. A task with
/// either node there is settled whatever the other's answer; one whose
/// nodes are neither there nor both missing is an error the master cannot
/// decide on.
fn settled_pairs(listed: &[ChildrenRead]) -> ZkResult<Vec<bool>> {
    let there = |listing: &ChildrenRead| matches!(listing, Ok(_) | Err(ZkError::NoAuth { .. }));
    listed
        .chunks_exact(2)
        .map(|pair| match pair {
            [result, mark] if there(result) || there(mark) => Ok(true),
            [Err(ZkError::NoNode { .. }), Err(ZkError::NoNode { .. })] => Ok(false),
            [Err(error), _] | [_, Err(error)] if !matches!(error, ZkError::NoNode { .. }) => {
                Err(error.clone())
            }
            _ => unreachable!("a pair neither there nor missing holds an error"),
        })
        .collect()
}

/// Whether `task` is settled (a result, or marked refused), exists
/// unsettled, or is gone. A settled task is finished whatever else holds;
/// otherwise, whether its node exists tells unfinished from gone.
pub(super) async fn task_status<C: Coordinator>(
    zk: &C,
    layout: &Layout,
    task: &TaskId,
) -> ZkResult<TaskStatus> {
    if SettledBy::of(layout, task).any(zk).await? {
        return Ok(TaskStatus::Finished);
    }
    let task = layout.task(task);
    Ok(match until_known(|| zk.exists(&task, Watch::No)).await? {
        Some(_) => TaskStatus::Unfinished,
        None => TaskStatus::Gone,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_settled_when_either_node_is_there_even_unreadable() {
        let missing = || Err(ZkError::NoNode { path: "/x".into() });
        let there = || Ok(Vec::new());
        let closed = || Err(ZkError::NoAuth { path: "/x".into() });
        let listed = vec![
            missing(),
            missing(),
            there(),
            missing(),
            missing(),
            there(),
            closed(),
            missing(),
            missing(),
            closed(),
            there(),
            there(),
        ];
        assert_eq!(
            settled_pairs(&listed),
            Ok(vec![false, true, true, true, true, true])
        );
        let failed = ZkError::System {
            reason: "broken".into(),
        };
        assert_eq!(
            settled_pairs(&[missing(), Err(failed.clone())]),
            Err(failed.clone()),
            "an answer that says neither is not taken as missing"
        );
        assert_eq!(
            settled_pairs(&[Err(failed.clone()), missing()]),
            Err(failed.clone())
        );
        assert_eq!(
            settled_pairs(&[Err(failed.clone()), closed(), there(), Err(failed)]),
            Ok(vec![true, true]),
            "either node there settles the task"
        );
    }
}
