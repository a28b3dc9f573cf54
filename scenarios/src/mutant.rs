//! Test-only mutants: the real master and worker, each run on a session
//! that plants one known bug, so the tests can show that the checker and
//! the explorer catch it. Built only with the `mutants` feature, which only
//! this crate's own tests turn on.
//!
//! A mutant is a [`Coordinator`] wrapped around the actor's session: the
//! actor's code is untouched, but what it sees or does through ZooKeeper
//! is what the bug would make it see or do.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::Either;

use zkdist_coord::{
    AddWatchMode, AssignmentView, Coordinator, CreateMode, Layout, Op, OpResult, Reply, Request,
    SessionId, Stat, Watch, WorkerId, ZkError, ZkResult, path,
};

use crate::checker::Invariant;

/// One planted bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mutant {
    /// The master's assignments listing always comes back empty: it takes
    /// every busy worker for idle (it assigns without checking idleness).
    MasterAssignsBusyWorkers,
    /// The master's task discovery stops after its first listing: with the
    /// founding listing loop, every later listing comes back as the first
    /// one; with the watch, the recursive watch is never set. Either way
    /// later tasks are never queued.
    MasterSkipsTasksDiff,
    /// The master lists the worker-id scratch directory instead of the
    /// registrations: it sees workers before they register. Its creates
    /// for them are refused (each checks the registration), so the tree
    /// never shows the bug; the master's view of its workers does.
    MasterListsIdsAsWorkers,
    /// The master sends the assignment create of every even-numbered task a
    /// few milliseconds late, from a task of its own: creates overtake each
    /// other.
    MasterReordersCreates,
    /// The worker arms its assignment watch only after registering (a few
    /// milliseconds later), and ignores an assignment already there.
    WorkerArmsAfterRegistering,
    /// The worker deletes its assignment before writing the task's result.
    WorkerReleasesBeforeResult,
    /// The master's reclaim of a dead worker's assignment is never sent:
    /// the session answers it as applied. The master re-queues the task
    /// and gives it to another worker while the dead one's assignment
    /// still names it. Needs faults (workers must die).
    MasterFakesReclaims,
    /// The client's submit, after a connection loss, creates the task again
    /// without looking for its token first (its listing of `tasks/` comes
    /// back empty). The mutant also plants the loss: its first task create
    /// is applied, and answered with `ConnectionLoss`.
    ClientSubmitsBlindly,
    /// The master drops the last byte of every payload it puts inline in an
    /// assignment (an off-by-one in the copy): workers run a payload that is
    /// not their task's.
    MasterTruncatesInlinePayloads,
    /// The master takes every worker for one that reads inline payloads
    /// (its reads of registrations all come back naming the format), so
    /// workers older than the format are given payloads they cannot read.
    /// Shows only with such workers in the fleet (`old_workers`).
    MasterIgnoresWorkerFormats,
    /// Every second listing of the registrations the master makes leaves
    /// out the newest worker: the master takes it for gone and reclaims
    /// the task it runs.
    MasterDropsTheNewestWorker,
    /// The worker writes, for every task after its first, the result of
    /// the task before (a reused buffer): each result is written once, by
    /// the worker that holds the task, and answers another task.
    WorkerWritesPreviousResult,
    /// The client's `sync` calls are answered as done and never sent. After
    /// a task create whose reply a cut lost, the client looks for the
    /// create's token through a server that may not have applied it (a
    /// reconnect may go through a lagging server), finds nothing, and
    /// submits the task again. Needs faults (the cut) and reads that lag
    /// (`SimConfig::follower_lag_txns`, drawn by the explorer's plans).
    ClientSkipsSyncs,
    /// The master's `sync` calls are answered as done and never sent: the
    /// read-back of an assignment create whose reply a cut lost, the
    /// election's read-back of its claim, and the resync after a
    /// reconnection. Caught by a scripted scenario that stalls the
    /// master's server (the explorer's seeded lag seldom hits a master
    /// read that matters).
    MasterSkipsSyncs,
    /// The worker's `sync` calls are answered as done and never sent: the
    /// read-back of its assignment after a completion or release whose
    /// reply a cut lost. As [`Mutant::MasterSkipsSyncs`], caught by a
    /// scripted scenario.
    WorkerSkipsSyncs,
    /// The worker's session answers a grace of a hundred session timeouts:
    /// a worker cut off in the middle of a task runs it on until it hears
    /// that its session expired, while a master gives the task to another
    /// worker. Needs faults (the cuts) and tasks longer than the grace
    /// (`ExploreConfig::long_tasks`).
    WorkerIgnoresGrace,
    /// The worker's session answers a grace of half the session timeout,
    /// twice the right one: time enough when the client hears of an outage
    /// at once (a cut), too much when it notices only from its own link
    /// watch (a silent partition), after which the server may expire the
    /// session 0.35 of a timeout on. Needs silent partitions (in
    /// `Faults::All`) and long tasks.
    WorkerGraceTooLong,
}

impl Mutant {
    pub const ALL: [Mutant; 17] = [
        Mutant::MasterAssignsBusyWorkers,
        Mutant::MasterSkipsTasksDiff,
        Mutant::MasterListsIdsAsWorkers,
        Mutant::MasterReordersCreates,
        Mutant::WorkerArmsAfterRegistering,
        Mutant::WorkerReleasesBeforeResult,
        Mutant::MasterFakesReclaims,
        Mutant::ClientSubmitsBlindly,
        Mutant::MasterTruncatesInlinePayloads,
        Mutant::MasterIgnoresWorkerFormats,
        Mutant::WorkerWritesPreviousResult,
        Mutant::MasterDropsTheNewestWorker,
        Mutant::ClientSkipsSyncs,
        Mutant::MasterSkipsSyncs,
        Mutant::WorkerSkipsSyncs,
        Mutant::WorkerIgnoresGrace,
        Mutant::WorkerGraceTooLong,
    ];

    /// Whether the master carries the bug (else every worker does).
    pub fn is_master(self) -> bool {
        matches!(
            self,
            Mutant::MasterAssignsBusyWorkers
                | Mutant::MasterSkipsTasksDiff
                | Mutant::MasterListsIdsAsWorkers
                | Mutant::MasterReordersCreates
                | Mutant::MasterFakesReclaims
                | Mutant::MasterTruncatesInlinePayloads
                | Mutant::MasterIgnoresWorkerFormats
                | Mutant::MasterDropsTheNewestWorker
                | Mutant::MasterSkipsSyncs
        )
    }

    /// Whether the bug shows only when some workers are older than the
    /// inline-payload format (see `ExploreConfig::old_workers`).
    pub fn needs_old_workers(self) -> bool {
        self == Mutant::MasterIgnoresWorkerFormats
    }

    /// Whether the client carries the bug.
    pub fn is_client(self) -> bool {
        matches!(
            self,
            Mutant::ClientSubmitsBlindly | Mutant::ClientSkipsSyncs
        )
    }

    /// Whether the bug shows only when processes fail (the explorer's
    /// `--faults all`).
    pub fn needs_faults(self) -> bool {
        matches!(
            self,
            Mutant::MasterFakesReclaims | Mutant::WorkerIgnoresGrace | Mutant::WorkerGraceTooLong
        ) || self.skips_syncs()
    }

    /// Whether the bug shows only with tasks that outlast a session's
    /// grace (see `ExploreConfig::long_tasks`).
    pub fn needs_long_tasks(self) -> bool {
        matches!(
            self,
            Mutant::WorkerIgnoresGrace | Mutant::WorkerGraceTooLong
        )
    }

    /// Whether the bug is a `sync` answered and never sent.
    pub fn skips_syncs(self) -> bool {
        matches!(
            self,
            Mutant::ClientSkipsSyncs | Mutant::MasterSkipsSyncs | Mutant::WorkerSkipsSyncs
        )
    }

    /// The invariant the bug characteristically breaks (on some seeds
    /// another may break first).
    pub fn breaks(self) -> Invariant {
        match self {
            Mutant::MasterAssignsBusyWorkers => Invariant::WorkerAssignedTwice,
            Mutant::MasterListsIdsAsWorkers => Invariant::MasterViewMatches,
            Mutant::MasterReordersCreates => Invariant::FifoOrder,
            Mutant::MasterFakesReclaims => Invariant::TaskAssignedTwice,
            Mutant::ClientSubmitsBlindly => Invariant::SubmittedOnce,
            // Tasks never queued, or assignments never noticed: they never
            // finish.
            Mutant::MasterSkipsTasksDiff | Mutant::WorkerArmsAfterRegistering => {
                Invariant::Liveness
            }
            Mutant::WorkerReleasesBeforeResult => Invariant::FinishedExactlyOnce,
            Mutant::MasterTruncatesInlinePayloads | Mutant::MasterIgnoresWorkerFormats => {
                Invariant::InlinePayload
            }
            Mutant::WorkerWritesPreviousResult => Invariant::ResultMatchesTask,
            Mutant::MasterDropsTheNewestWorker => Invariant::TaskAssignedTwice,
            Mutant::ClientSkipsSyncs => Invariant::SubmittedOnce,
            Mutant::MasterSkipsSyncs => Invariant::FinishedExactlyOnce,
            Mutant::WorkerSkipsSyncs => Invariant::FinishedExactlyOnce,
            Mutant::WorkerIgnoresGrace | Mutant::WorkerGraceTooLong => Invariant::RanPastExpiry,
        }
    }
}

/// How late the reordering master sends a delayed create.
const REORDER_DELAY: Duration = Duration::from_millis(3);
/// How long after registering the late-arming worker arms its watch.
const LATE_ARM_DELAY: Duration = Duration::from_millis(5);

/// What a mutant remembers between calls.
#[derive(Debug, Default)]
struct Memory {
    first_tasks_listing: Option<Vec<String>>,
    /// The worker's id, once its id node is created.
    worker: Option<WorkerId>,
    /// The late-arming worker's first arm was skipped.
    first_arm_skipped: bool,
    /// The blind client's planted connection loss happened.
    submit_loss_planted: bool,
    /// The result the stale-result worker wrote last.
    last_result: Option<Vec<u8>>,
    /// How many listings of the registrations the master made.
    workers_listings: u64,
}

/// A session that plants `mutant`'s bug. Clones share the memory.
#[derive(Debug, Clone)]
pub struct MutantSession<C> {
    inner: C,
    /// `None`: every request passes through unchanged, sent at once.
    mutant: Option<Mutant>,
    layout: Layout,
    memory: Arc<Mutex<Memory>>,
}

impl<C: Coordinator> MutantSession<C> {
    pub fn new(inner: C, mutant: Option<Mutant>, layout: &Layout) -> MutantSession<C> {
        MutantSession {
            inner,
            mutant,
            layout: layout.clone(),
            memory: Arc::new(Mutex::new(Memory::default())),
        }
    }

    fn remember<T>(&self, use_memory: impl FnOnce(&mut Memory) -> T) -> T {
        use_memory(&mut self.memory.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn own_assignment(&self) -> Option<String> {
        self.remember(|memory| memory.worker.clone())
            .map(|worker| self.layout.assignment(&worker))
    }

    /// Whether `path`, created with `data`, is an assignment of an
    /// even-numbered task.
    fn delayed_create(&self, path: &str, data: &[u8]) -> bool {
        self.mutant == Some(Mutant::MasterReordersCreates)
            && path::parent(path) == self.layout.assignments_dir()
            && AssignmentView::decode(data).is_ok_and(|view| view.task.sequence() % 2 == 0)
    }
}

/// The requests a mutant may change, each with what it changes; every other
/// request passes through unchanged.
impl<C: Coordinator> MutantSession<C> {
    async fn create(&self, path: String, data: Vec<u8>, mode: CreateMode) -> ZkResult<String> {
        if self.delayed_create(&path, &data) {
            tokio::time::sleep(REORDER_DELAY).await;
        }
        let is_result = path.ends_with("/result");
        if self.mutant == Some(Mutant::WorkerReleasesBeforeResult)
            && is_result
            && let Some(assignment) = self.own_assignment()
        {
            let _ = self.inner.delete(&assignment, None).await;
        }
        let created = self.inner.create(&path, &data, mode).await?;
        let task_prefix = format!("{}/task-", self.layout.tasks_dir());
        if self.mutant == Some(Mutant::ClientSubmitsBlindly)
            && path.starts_with(&task_prefix)
            && !self.remember(|memory| std::mem::replace(&mut memory.submit_loss_planted, true))
        {
            return Err(ZkError::ConnectionLoss {
                reason: "planted by the blind-submit mutant, after the create".to_owned(),
            });
        }
        if path == self.layout.worker_id_prefix() {
            let worker = WorkerId::parse(path::name(&created)).ok();
            self.remember(|memory| memory.worker = worker);
        }
        let registered = self
            .remember(|memory| memory.worker.clone())
            .is_some_and(|worker| created == self.layout.worker(&worker));
        if self.mutant == Some(Mutant::WorkerArmsAfterRegistering)
            && registered
            && let Some(assignment) = self.own_assignment()
        {
            tokio::time::sleep(LATE_ARM_DELAY).await;
            // Armed now; an assignment made meanwhile goes unseen.
            let _ = self
                .inner
                .add_watch(&assignment, AddWatchMode::Persistent)
                .await;
        }
        Ok(created)
    }

    async fn get_data(&self, path: String, watch: Watch) -> ZkResult<(Vec<u8>, Stat)> {
        let (mut data, stat) = self.inner.get_data(&path, watch).await?;
        if self.mutant == Some(Mutant::MasterIgnoresWorkerFormats)
            && path::parent(&path) == self.layout.workers_dir()
        {
            data = zkdist_coord::registration_data().to_vec();
        }
        Ok((data, stat))
    }

    async fn get_children(&self, path: String, watch: Watch) -> ZkResult<(Vec<String>, Stat)> {
        let (children, stat) = self.inner.get_children(&path, watch).await?;
        let children = match self.mutant {
            Some(Mutant::ClientSubmitsBlindly) if path == self.layout.tasks_dir() => Vec::new(),
            Some(Mutant::MasterAssignsBusyWorkers) if path == self.layout.assignments_dir() => {
                Vec::new()
            }
            Some(Mutant::MasterSkipsTasksDiff) if path == self.layout.tasks_dir() => {
                self.remember(|memory| {
                    memory
                        .first_tasks_listing
                        .get_or_insert_with(|| children.clone())
                        .clone()
                })
            }
            Some(Mutant::MasterDropsTheNewestWorker) if path == self.layout.workers_dir() => {
                let listings = self.remember(|memory| {
                    memory.workers_listings += 1;
                    memory.workers_listings
                });
                let mut children = children;
                if listings.is_multiple_of(2) {
                    children.sort();
                    children.pop();
                }
                children
            }
            Some(Mutant::MasterListsIdsAsWorkers) if path == self.layout.workers_dir() => {
                self.inner
                    .get_children(&self.layout.ids_dir(), Watch::No)
                    .await?
                    .0
            }
            _ => children,
        };
        Ok((children, stat))
    }

    async fn multi(&self, mut ops: Vec<Op>) -> ZkResult<Vec<OpResult>> {
        if self.mutant == Some(Mutant::MasterTruncatesInlinePayloads) {
            for op in &mut ops {
                if let Op::Create { path, data, .. } = op
                    && path::parent(path) == self.layout.assignments_dir()
                    && AssignmentView::decode(data).is_ok_and(|view| view.payload.is_some())
                {
                    data.pop();
                }
            }
        }
        if self.mutant == Some(Mutant::WorkerWritesPreviousResult) {
            for op in &mut ops {
                if let Op::Create { path, data, .. } = op
                    && path.ends_with("/result")
                {
                    let this = data.clone();
                    if let Some(previous) = self.remember(|memory| memory.last_result.replace(this))
                    {
                        *data = previous;
                    }
                }
            }
        }
        let delayed = ops.iter().any(|op| match op {
            Op::Create { path, data, .. } => self.delayed_create(path, data),
            _ => false,
        });
        if delayed {
            tokio::time::sleep(REORDER_DELAY).await;
        }
        let reclaim = ops.iter().any(|op| {
            matches!(op, Op::Delete { path, .. }
                if path::parent(path) == self.layout.assignments_dir())
        }) && !ops.iter().any(|op| matches!(op, Op::Create { .. }));
        if self.mutant == Some(Mutant::MasterFakesReclaims) && reclaim {
            return Ok(ops
                .iter()
                .map(|op| match op {
                    Op::Check { .. } => OpResult::Checked,
                    _ => OpResult::Deleted,
                })
                .collect());
        }
        let own = self.own_assignment();
        let releases_own =
            |op: &Op| matches!(op, Op::Delete { path, .. } if Some(path) == own.as_ref());
        if self.mutant == Some(Mutant::WorkerReleasesBeforeResult)
            && ops.iter().any(|op| op.path().ends_with("/result"))
            && let Some(index) = ops.iter().position(releases_own)
        {
            // The completion, split and in the wrong order: the
            // release first, then the rest; the caller sees one answer.
            let _ = self.inner.multi(vec![ops[index].clone()]).await;
            let rest: Vec<Op> = ops.iter().filter(|op| !releases_own(op)).cloned().collect();
            let mut results = self.inner.multi(rest).await?;
            results.insert(index.min(results.len()), OpResult::Deleted);
            return Ok(results);
        }
        self.inner.multi(ops).await
    }

    async fn add_watch(&self, path: String, mode: AddWatchMode) -> ZkResult<()> {
        if self.mutant == Some(Mutant::MasterSkipsTasksDiff) && path == self.layout.tasks_dir() {
            // Answered as set, never set: no task event ever comes.
            return Ok(());
        }
        let first_arm = self.mutant == Some(Mutant::WorkerArmsAfterRegistering)
            && self.own_assignment().as_deref() == Some(path.as_str())
            && !self.remember(|memory| std::mem::replace(&mut memory.first_arm_skipped, true));
        if first_arm {
            // Not armed yet: that happens after registering.
            return Ok(());
        }
        self.inner.add_watch(&path, mode).await
    }
}

impl<C: Coordinator> Coordinator for MutantSession<C> {
    fn session_id(&self) -> SessionId {
        self.inner.session_id()
    }

    fn disconnected_grace_ms(&self) -> u64 {
        let grace_ms = self.inner.disconnected_grace_ms();
        match self.mutant {
            // A quarter of the timeout, times 400.
            Some(Mutant::WorkerIgnoresGrace) => grace_ms.saturating_mul(400),
            // Half the timeout.
            Some(Mutant::WorkerGraceTooLong) => grace_ms.saturating_mul(2),
            _ => grace_ms,
        }
    }

    /// A request the mutant may change goes through it, and is sent once
    /// this future is polled (the mutant may send it later, or split);
    /// every other request, and every request of a session without a
    /// mutant, is sent at once, as the trait says.
    fn call(&self, request: Request) -> impl Future<Output = ZkResult<Reply>> + Send {
        if self.mutant.is_some_and(Mutant::skips_syncs) && matches!(request, Request::Sync { .. }) {
            return Either::Right(Either::Left(std::future::ready(Ok(Reply::Synced))));
        }
        let changes = self.mutant.is_some()
            && matches!(
                request,
                Request::Create { .. }
                    | Request::GetData { .. }
                    | Request::GetChildren { .. }
                    | Request::Multi { .. }
                    | Request::AddWatch { .. }
            );
        if !changes {
            return Either::Left(self.inner.call(request));
        }
        let watch = |watch: bool| if watch { Watch::Yes } else { Watch::No };
        Either::Right(Either::Right(async move {
            match request {
                Request::Create { path, data, mode } => {
                    self.create(path, data, mode).await.map(Reply::Created)
                }
                Request::GetData { path, watch: w } => self
                    .get_data(path, watch(w))
                    .await
                    .map(|(data, stat)| Reply::Data(data, stat)),
                Request::GetChildren { path, watch: w } => self
                    .get_children(path, watch(w))
                    .await
                    .map(|(names, stat)| Reply::Children(names, stat)),
                Request::Multi { ops } => self.multi(ops).await.map(Reply::Multi),
                Request::AddWatch { path, mode } => {
                    self.add_watch(path, mode).await.map(|()| Reply::WatchAdded)
                }
                other => unreachable!("a mutant does not change {}", other.name()),
            }
        }))
    }

    fn close(&self) -> impl Future<Output = ZkResult<()>> + Send {
        self.inner.close()
    }
}
