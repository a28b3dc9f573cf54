//! Reading the system's status: the master, the workers, their
//! assignments, and how many tasks are pending, assigned, finished and
//! refused.

use std::collections::{BTreeMap, BTreeSet};

use super::{Client, ClientError};
use crate::assignment::AssignmentView;
use crate::error::ZkError;
use crate::names::{TaskId, WorkerId};
use crate::retry::until_known;
use crate::{Coordinator, Stat, Watch, path};

/// What [`Client::status`] found at the `master` node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MasterNode {
    /// No node: no master leads.
    #[default]
    Absent,
    /// An ephemeral node: a master holds it with its session.
    Held,
    /// A node that is not ephemeral: no session holds it, nobody deletes
    /// it, and no master can be elected until an operator does (it was
    /// made by hand, or by laying a tree out under it).
    NotEphemeral,
}

/// The system as a few reads saw it. They are not one snapshot: a task can
/// finish, or be submitted or cleaned up, between two of them (see
/// [`Client::status`] for how far that can move the counts).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    /// Who holds the `master` node, if anyone.
    pub master: MasterNode,
    /// Registered workers, sorted.
    pub workers: Vec<WorkerId>,
    /// Registrations that are not ephemeral nodes, so no live worker's: a
    /// worker registers with an ephemeral node, which goes with its
    /// session. The master takes such a node for an idle worker, and the
    /// tasks it gives it never run: a stray node an operator made, most
    /// likely, to be deleted.
    pub not_ephemeral: BTreeSet<WorkerId>,
    /// Current assignments (worker -> task).
    pub assignments: BTreeMap<WorkerId, TaskId>,
    /// The assigned tasks that are no longer in progress: their result is
    /// written (their worker has yet to release them), or they were
    /// deleted. Each is in [`Status::assignments`], and none counts in
    /// [`Status::assigned_tasks`].
    pub settled_assignments: BTreeSet<TaskId>,
    /// Tasks with neither a result nor an assignment nor a refusal mark
    /// (and, when [`Status::task_names_read`] is false, the nodes under
    /// `tasks/` that are not tasks).
    pub pending_tasks: usize,
    /// Tasks without a result that are assigned to a worker.
    pub assigned_tasks: usize,
    /// Tasks with a result.
    pub finished_tasks: usize,
    /// Tasks without a result whose node refused it, marked so under
    /// `refused/`: no new master runs them again while the mark is there.
    pub refused_tasks: usize,
    /// Nodes that are not zkdist's, skipped rather than failing the whole
    /// status: a name under `tasks/` that is not a task name (found only
    /// when [`Status::task_names_read`]), an assignment whose data is not a
    /// task name (or, under `workers/` and `assignments/`, a name that is
    /// not a worker id).
    pub ignored_nodes: usize,
    /// Whether `tasks/` was listed. It is not when it holds more than
    /// [`STATUS_MAX_LISTED_TASKS`] nodes: the tasks are then counted from
    /// `tasks/`'s stat alone, and a node there that is not a task counts
    /// as a pending task.
    pub task_names_read: bool,
}

/// What [`Client::status`] counts under `tasks/`.
struct TaskCounts {
    /// Tasks, finished or not (the nodes that are not tasks left out, when
    /// the names were read).
    tasks: usize,
    /// Tasks with a result; at most `tasks`.
    finished: usize,
    /// Nodes whose names are not task names (found only when listed).
    foreign_nodes: usize,
    names_read: bool,
}

/// How many times [`Client::status`] takes its counts under `tasks/` while
/// tasks are created or deleted during them (see `Client::count_tasks`).
const STATUS_COUNT_ATTEMPTS: u32 = 4;

/// Up to how many nodes under `tasks/` [`Client::status`] lists them to find
/// the names that are not tasks. Ten thousand task names make a reply of
/// some 400 KB, well within the client's default limit of 1 MiB; the
/// counts do not need the listing.
pub const STATUS_MAX_LISTED_TASKS: usize = 10_000;

impl<C: Coordinator> Client<C> {
    /// Reads workers, assignments and tasks, after a `sync`, so that it
    /// sees every write committed before it was called. Writes nothing (the
    /// sync's own delete is refused whatever the identity's rights), so it
    /// works for an identity that may not write.
    ///
    /// The tasks are counted, not read one by one: `tasks/`'s stat gives
    /// how many tasks there are and one `count_descendants` how many
    /// results lie below them (a task's only child is its result); the
    /// assigned tasks are read one each, all at once. `tasks/` is listed as
    /// well, to find the names that are not tasks, only while it holds at
    /// most [`STATUS_MAX_LISTED_TASKS`] nodes: beyond that a listing may
    /// not fit in a reply, and a foreign node there counts as a pending
    /// task ([`Status::task_names_read`]). Past that size the number of
    /// reads does not grow with the queue.
    ///
    /// The reads are not one snapshot. Tasks submitted or cleaned up while
    /// the counts are taken make them read again (a few times at most);
    /// under a steady stream of submissions the finished count may then be
    /// short by the tasks submitted during the reads, and is never raised
    /// by them. A result written between the count and the read of its
    /// assigned task shows that task as pending.
    ///
    /// Each registration's stat is read too (all at once), to name the
    /// ones that are not ephemeral ([`Status::not_ephemeral`]): those reads
    /// grow with the workers. A container or TTL node there (which zkdist
    /// never makes) is not told from a live worker's.
    pub async fn status(&self) -> Result<Status, ClientError> {
        self.status_listing_at_most(STATUS_MAX_LISTED_TASKS).await
    }

    /// The registrations among `workers` that are not ephemeral nodes. One
    /// stat each, all in flight together; a worker that left between the
    /// listing and its read is not counted.
    async fn not_ephemeral(&self, workers: &[WorkerId]) -> Result<BTreeSet<WorkerId>, ClientError> {
        let reads = workers.iter().map(|worker| {
            let registration = self.layout.worker(worker);
            async move { until_known(|| self.zk.exists(&registration, Watch::No)).await }
        });
        let stats = futures::future::join_all(reads).await;
        let mut not_ephemeral = BTreeSet::new();
        for (worker, stat) in workers.iter().zip(stats) {
            if stat?.is_some_and(|stat| stat.ephemeral_owner == 0) {
                not_ephemeral.insert(worker.clone());
            }
        }
        Ok(not_ephemeral)
    }

    /// [`Client::status`], listing `tasks/` only while it holds at most
    /// `max_listed_tasks` nodes: 0 never lists it; a session with a larger
    /// reply limit can afford a longer listing (some 36 bytes a task name).
    pub async fn status_listing_at_most(
        &self,
        max_listed_tasks: usize,
    ) -> Result<Status, ClientError> {
        match self.read_status(max_listed_tasks).await {
            // A root inside another deployment is never laid out (every
            // role and submit refuses it): say so, rather than how a
            // layout comes to be.
            Err(ClientError::NoLayout { root }) => {
                until_known(|| self.layout.refuse_nested_root(&self.zk)).await?;
                // A `tasks/` made by something else, which a submit queued
                // into: telling the operator that a submit lays the root
                // out would be wrong, since one just did not.
                let tasks_dir = self.layout.tasks_dir();
                if until_known(|| self.zk.exists(&tasks_dir, Watch::No))
                    .await?
                    .is_some()
                {
                    return Err(ClientError::IncompleteLayout { root });
                }
                Err(ClientError::NoLayout { root })
            }
            read => read,
        }
    }

    /// [`Client::status_listing_at_most`]'s reads.
    async fn read_status(&self, max_listed_tasks: usize) -> Result<Status, ClientError> {
        // On an ensemble this session's server may lag behind the leader:
        // catch up first, so that what other clients wrote before this call
        // (a submit that returned, a worker that finished) shows.
        until_known(|| self.zk.sync(self.layout.root())).await?;
        let master_path = self.layout.master();
        let master = until_known(|| self.zk.exists(&master_path, Watch::No)).await?;
        let mut status = Status {
            master: match master {
                None => MasterNode::Absent,
                Some(stat) if stat.ephemeral_owner != 0 => MasterNode::Held,
                Some(_) => MasterNode::NotEphemeral,
            },
            ..Status::default()
        };

        let mut workers = self
            .list_children(&self.layout.workers_dir())
            .await
            .map_err(|error| self.no_layout_listed(error))?;
        workers.sort();
        for name in &workers {
            match WorkerId::parse(name) {
                Ok(worker) => status.workers.push(worker),
                Err(_) => status.ignored_nodes += 1,
            }
        }
        status.not_ephemeral = self.not_ephemeral(&status.workers).await?;

        // Before the assignments: a task is marked in the multi that
        // releases its assignment, so read in this order it is never both.
        let refused = self.count_refused(max_listed_tasks).await?;

        let assignment_names = self
            .list_children(&self.layout.assignments_dir())
            .await
            .map_err(|error| self.no_layout_listed(error))?;
        let mut assigned_workers = Vec::new();
        for name in assignment_names {
            match WorkerId::parse(&name) {
                Ok(worker) => assigned_workers.push(worker),
                Err(_) => status.ignored_nodes += 1,
            }
        }
        // One read per assignment, all in flight together. A worker may
        // finish between the listing and the read.
        let assignment_reads = assigned_workers.iter().map(|worker| {
            let assignment = self.layout.assignment(worker);
            async move { until_known(|| self.zk.get_data(&assignment, Watch::No)).await }
        });
        let assignment_data = futures::future::join_all(assignment_reads).await;
        for (worker, read) in assigned_workers.into_iter().zip(assignment_data) {
            match read {
                Ok((data, _)) => match AssignmentView::decode(&data) {
                    Ok(view) => {
                        status.assignments.insert(worker, view.task);
                    }
                    Err(_) => status.ignored_nodes += 1,
                },
                Err(ZkError::NoNode { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }

        let counts = self.count_tasks(max_listed_tasks).await?;
        status.task_names_read = counts.names_read;
        status.ignored_nodes += counts.foreign_nodes;

        // The assigned tasks still without a result: a task whose result
        // is there has finished (its worker has yet to release it), and one
        // that is gone was cancelled.
        let assigned_tasks: BTreeSet<&TaskId> = status.assignments.values().collect();
        let task_reads = assigned_tasks.iter().map(|task| {
            let task_path = self.layout.task(task);
            async move { until_known(|| self.zk.exists(&task_path, Watch::No)).await }
        });
        let mut in_progress = 0;
        let task_stats = futures::future::join_all(task_reads).await;
        for (task, stat) in assigned_tasks.into_iter().zip(task_stats) {
            if stat?.is_some_and(|stat| stat.num_children == 0) {
                in_progress += 1;
            } else {
                status.settled_assignments.insert(task.clone());
            }
        }

        status.finished_tasks = counts.finished;
        status.assigned_tasks = in_progress.min(counts.tasks - counts.finished);
        let unassigned = counts.tasks - counts.finished - status.assigned_tasks;
        status.refused_tasks = refused.min(unassigned);
        status.pending_tasks = unassigned - status.refused_tasks;
        Ok(status)
    }

    /// How many tasks are marked refused: the marks under `refused/` whose
    /// task is there without a result. A mark left behind by a task deleted
    /// without it, or whose task has a result after all, or a name there
    /// that is not a task's, does not count. One read per mark, all at
    /// once: marks are few, one per task whose node refused its result.
    ///
    /// Past `max_listed` marks it neither lists nor reads them (a listing
    /// could outgrow a reply, and the reads would grow with them): it
    /// counts `refused/`'s children from its stat, stale marks included.
    async fn count_refused(&self, max_listed: usize) -> Result<usize, ClientError> {
        let refused_dir = self.layout.refused_dir();
        let Some(stat) = until_known(|| self.zk.exists(&refused_dir, Watch::No)).await? else {
            // Made when first needed: no task was ever refused.
            return Ok(0);
        };
        let marked = usize::try_from(stat.num_children).expect("a child count is never negative");
        if marked == 0 || marked > max_listed {
            return Ok(marked);
        }
        let marks = match self.list_children(&refused_dir).await {
            Ok(marks) => marks,
            Err(ClientError::Zk(ZkError::NoNode { .. })) => return Ok(0),
            Err(error) => return Err(error),
        };
        let task_reads = marks
            .iter()
            .filter_map(|name| TaskId::parse(name).ok())
            .map(|task| {
                let task_path = self.layout.task(&task);
                async move { until_known(|| self.zk.exists(&task_path, Watch::No)).await }
            });
        let mut refused = 0;
        for stat in futures::future::join_all(task_reads).await {
            if stat?.is_some_and(|stat| stat.num_children == 0) {
                refused += 1;
            }
        }
        Ok(refused)
    }

    /// A missing node read by `status` means nobody laid the root out.
    fn no_layout(&self, error: ZkError) -> ClientError {
        match error {
            ZkError::NoNode { .. } => self.missing_layout(),
            other => other.into(),
        }
    }

    /// [`Client::no_layout`] for a listing's error.
    fn no_layout_listed(&self, error: ClientError) -> ClientError {
        match error {
            ClientError::Zk(error) => self.no_layout(error),
            other => other,
        }
    }

    /// Counts the tasks under `tasks/` and those of them with a result,
    /// listing `tasks/` for the names that are not tasks only while it
    /// holds at most `max_listed_tasks` nodes.
    ///
    /// The counts come from separate reads: `tasks/`'s stat, then the
    /// number of nodes below it (tasks and their results), then the stat
    /// again. When tasks were created or deleted in between (the stat's
    /// `pzxid` moved), the reads are taken again, up to
    /// [`STATUS_COUNT_ATTEMPTS`] times; under a steady stream of
    /// submissions the last reads stand. Results are counted as the nodes
    /// below less the tasks of the later stat, so a task created during
    /// the reads is never taken for a result: the finished count is then
    /// at most short by the tasks created meanwhile.
    async fn count_tasks(&self, max_listed_tasks: usize) -> Result<TaskCounts, ClientError> {
        let tasks_dir = self.layout.tasks_dir();
        let tasks_dir_stat = || async {
            until_known(|| self.zk.exists(&tasks_dir, Watch::No))
                .await?
                .ok_or_else(|| self.missing_layout())
        };
        let child_count = |stat: &Stat| {
            usize::try_from(stat.num_children).expect("a child count is never negative")
        };

        let mut before = tasks_dir_stat().await?;
        for attempt in 1..=STATUS_COUNT_ATTEMPTS {
            let names_read = child_count(&before) <= max_listed_tasks;
            let mut foreign_names = Vec::new();
            if names_read {
                let names = match self.list_tasks().await {
                    Ok(names) => names,
                    Err(ClientError::Zk(error)) => return Err(self.no_layout(error)),
                    Err(error) => return Err(error),
                };
                foreign_names.extend(
                    names
                        .into_iter()
                        .filter(|name| TaskId::parse(name).is_err()),
                );
            }
            let below_tasks_dir = until_known(|| self.zk.count_descendants(&tasks_dir))
                .await
                .map_err(|error| self.no_layout(error))?;
            // What lies below a node that is not a task is no result.
            let mut below_foreign_nodes = 0;
            for name in &foreign_names {
                let foreign = path::join(&tasks_dir, name);
                match until_known(|| self.zk.count_descendants(&foreign)).await {
                    Ok(count) => below_foreign_nodes += count,
                    Err(ZkError::NoNode { .. }) => {}
                    Err(error) => return Err(error.into()),
                }
            }
            let after = tasks_dir_stat().await?;
            if after.pzxid == before.pzxid || attempt == STATUS_COUNT_ATTEMPTS {
                let tasks = child_count(&after).saturating_sub(foreign_names.len());
                let finished = below_tasks_dir
                    .saturating_sub(child_count(&after))
                    .saturating_sub(below_foreign_nodes)
                    .min(tasks);
                return Ok(TaskCounts {
                    tasks,
                    finished,
                    foreign_nodes: foreign_names.len(),
                    names_read,
                });
            }
            before = after;
        }
        unreachable!("the last attempt returns")
    }
}
