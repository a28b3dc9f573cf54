//! The client side of zkdist: submit a task, wait for its result, clean it
//! up, and read the system's status. Generic over [`Coordinator`] like the
//! master and the worker.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::stream::{FuturesOrdered, StreamExt};

use crate::assignment::AssignmentView;
use crate::codec::{CodecError, TaskPayload, TaskResult};
use crate::error::ZkError;
use crate::layout::Layout;
use crate::names::{InvalidName, TaskId, TaskToken, WorkerId};
use crate::retry::{FIRST_RETRY_PAUSE_MS, until_known, until_known_within};
use crate::{
    AddWatchMode, Coordinator, CreateMode, Event, EventStream, Op, SessionState, Stat, Watch,
    WatchKind, path, validate_data,
};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("task payload refused: {0}")]
    InvalidPayload(CodecError),
    #[error("task payload refused: {0}")]
    PayloadTooLarge(ZkError),
    #[error("result of {task} is unreadable: {error}")]
    InvalidResult { task: TaskId, error: CodecError },
    #[error("no task {task} (no node {path})")]
    NoSuchTask { task: TaskId, path: String },
    #[error(
        "task {task} has no result yet: only finished tasks (or tasks marked refused) can be cleaned up"
    )]
    NotFinished { task: TaskId },
    /// The task's node refused its result (credentials the workers lack, or
    /// a node that cannot have children): a worker released it without one
    /// and marked it refused (`Layout::refused`), so it will not run again
    /// until the mark is deleted.
    #[error(
        "{task} will have no result: {reason} (it is marked refused at {mark}; once the cause is put right, delete the mark: the next master tries it again)"
    )]
    ResultRefused {
        task: TaskId,
        reason: String,
        mark: String,
    },
    #[error(
        "no zkdist layout at {root}: it is created when a master or worker starts or a task is submitted"
    )]
    NoLayout { root: String },
    #[error(
        "the session ended ({}) while waiting for {task}",
        SessionState::describe_end(*state)
    )]
    SessionEnded {
        task: TaskId,
        /// `None` when the event stream closed without saying why.
        state: Option<SessionState>,
    },
    /// A submit's create may or may not have been applied, and the client
    /// could not find out: its session ended (or the lookup failed) first.
    /// Look the token up with [`Client::find_submission`] on a new session
    /// before submitting again, or the task may be created twice.
    #[error(
        "submission {token} is in doubt ({cause}): a task named task-{token}-NNNNNNNNNN may exist; look it up before submitting again"
    )]
    SubmitInDoubt {
        token: TaskToken,
        cause: Box<ClientError>,
    },
    /// A listing kept failing as a lost connection, [`MAX_LISTING_ATTEMPTS`]
    /// times, while the session lived on: a connection that keeps
    /// dropping, most likely.
    #[error("cannot list {path}: {attempts} attempts ended in a lost connection (last: {error})")]
    ListingUnreadable {
        path: String,
        attempts: u32,
        error: ZkError,
    },
    /// A listing's reply is over the limit the client accepts
    /// (`ZkConfig::with_max_reply_bytes`; a Java client's `jute.maxbuffer`,
    /// 1 MiB by default, the library's default too: `tasks/` reaches it at
    /// some 29,000 tasks, `workers/` at some 50,000 workers). The error
    /// says by how much, and how to raise the limit. Not sent again: the
    /// same listing is refused every time.
    #[error("{reason}")]
    ListingOverLimit { path: String, reason: String },
    #[error("unexpected node name: {0}")]
    UnexpectedName(#[from] InvalidName),
    #[error(transparent)]
    Zk(#[from] ZkError),
}

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

/// How many times [`Client::cleanup`] looks up what settles a task (its
/// result or its mark) before giving up on a task whose result and mark
/// keep changing under it.
const CLEANUP_LOOKUPS: u32 = 3;

/// How many times [`Client::status`] takes its counts under `tasks/` while
/// tasks are created or deleted during them (see `Client::count_tasks`).
const STATUS_COUNT_ATTEMPTS: u32 = 4;

/// Up to how many nodes under `tasks/` [`Client::status`] lists them to find
/// the names that are not tasks. Ten thousand task names make a reply of
/// some 400 KB, well within the client's default limit of 1 MiB; the
/// counts do not need the listing.
pub const STATUS_MAX_LISTED_TASKS: usize = 10_000;

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

/// How many times a listing (of `tasks/`, and in a status of `workers/`
/// and `assignments/`) is sent while it fails as a lost connection before
/// the client gives up ([`ClientError::ListingUnreadable`]), unless the
/// reply was over the limit, which ends the attempts at once
/// ([`ClientError::ListingOverLimit`]). With the pauses of
/// [`crate::retry`] that is some 14 s: longer than a short outage, and an
/// outage long enough to expire the session ends the attempts anyway.
pub const MAX_LISTING_ATTEMPTS: u32 = 20;

/// One client session. `wait` reads the session's event stream, so it takes
/// `&mut self`; everything else only sends requests.
///
/// Every method survives a connection loss: reads are sent again, and
/// writes are sent again only after reading whether they were applied (see
/// [`Client::submit`] and [`Client::cleanup`]). They give up when the
/// session ends.
///
/// Submissions are told apart by a token made of the session id and this
/// client's count of submissions, so use one `Client` per session for
/// submitting: two on one session would repeat each other's tokens.
pub struct Client<C: Coordinator> {
    zk: C,
    events: EventStream,
    layout: Layout,
    /// How many submissions this client has started; the next one's token
    /// is made from it.
    submissions_started: AtomicU64,
    /// Whether this session watches `refused/` (a persistent watch, left by
    /// the first wait): every wait needs it, and it lasts the session.
    watching_refused: bool,
}

impl<C: Coordinator> Client<C> {
    /// Wraps a connected session and its event stream.
    pub fn new(zk: C, events: EventStream, layout: Layout) -> Client<C> {
        Client {
            zk,
            events,
            layout,
            submissions_started: AtomicU64::new(0),
            watching_refused: false,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn session(&self) -> &C {
        &self.zk
    }

    /// The token the next [`Client::submit`] on this client will carry,
    /// unless another submission starts first: for a caller that must be
    /// able to name a submission it may be interrupted in.
    pub fn next_submission_token(&self) -> TaskToken {
        let submission = self.submissions_started.load(Ordering::Relaxed);
        TaskToken::for_submission(self.zk.session_id(), submission)
    }

    /// Gives the session and its event stream back. A `Client` built again
    /// on the same session counts its submissions from zero again, so its
    /// tokens repeat the first one's: do not submit through both. The
    /// persistent watch a wait left on `refused/` stays with the session,
    /// and its events keep coming on the stream.
    pub fn into_parts(self) -> (C, EventStream) {
        (self.zk, self.events)
    }

    /// Queues a task: creates `tasks/task-<token>-NNNNNNNNNN` with `payload`
    /// as its data. The payload must be a JSON object with a string `kind`
    /// and fit in a node ([`crate::MAX_DATA_BYTES`]); both are checked before
    /// anything is sent. Creates the layout if it is missing.
    ///
    /// Never creates two tasks for one call: the token is chosen before the
    /// create, and when a create's outcome is unknown (connection loss) the
    /// client looks for its token ([`Client::find_submission`]) before
    /// creating again.
    ///
    /// When the outcome cannot be found out on this session, it returns
    /// [`ClientError::SubmitInDoubt`] with the token: the session ended with
    /// the create unanswered (or answered by the session's end, which a
    /// client may report for a request the server had applied), or the
    /// lookup failed. The caller resolves it with
    /// [`Client::find_submission`] on a new session; submitting again
    /// without looking could create the task twice.
    pub async fn submit(&self, payload: &[u8]) -> Result<TaskId, ClientError> {
        let submission = self.submissions_started.fetch_add(1, Ordering::Relaxed);
        let token = TaskToken::for_submission(self.zk.session_id(), submission);
        let prefix = self.layout.protected_task_prefix(token);
        validate_data(&prefix, payload).map_err(ClientError::PayloadTooLarge)?;
        TaskPayload::decode(payload).map_err(ClientError::InvalidPayload)?;
        let in_doubt = |cause: ClientError| ClientError::SubmitInDoubt {
            token,
            cause: Box::new(cause),
        };
        let mut layout_ensured = false;
        loop {
            match self
                .zk
                .create(&prefix, payload, CreateMode::PersistentSequential)
                .await
            {
                Ok(created) => {
                    let task = TaskId::parse(path::name(&created))?;
                    debug_assert_eq!(task.token(), Some(token), "created under our prefix");
                    return Ok(task);
                }
                // A missing parent: nothing was created.
                Err(ZkError::NoNode { .. }) if !layout_ensured => {
                    until_known(|| self.layout.ensure_layout(&self.zk)).await?;
                    layout_ensured = true;
                }
                Err(error) if error.is_outcome_unknown() => match self.find_submission(token).await
                {
                    Ok(Some(task)) => return Ok(task),
                    // Not applied: creating again cannot duplicate it.
                    Ok(None) => {}
                    Err(cause) => return Err(in_doubt(cause)),
                },
                Err(error) if error.session_end().is_some() => return Err(in_doubt(error.into())),
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Queues one task per payload, like [`Client::submit`] called for
    /// each, but with up to `window` creates in flight at once instead of a
    /// round trip each. Returns each payload's outcome, in the payloads'
    /// order: its task, or what [`Client::submit`] would have returned (a
    /// payload refused by the checks gets its error and nothing is sent for
    /// it; the others go out all the same).
    ///
    /// The creates are issued in the payloads' order, and one session's
    /// requests are applied in the order they were issued, so the tasks
    /// are queued (their sequence numbers, the master's FIFO order) in the
    /// payloads' order. That holds while no create fails: a create sent
    /// again after a connection loss or a missing layout is queued behind
    /// the batch's creates that were applied before it.
    ///
    /// The same idempotence as [`Client::submit`]: every payload has its
    /// own token, chosen before anything is sent. At the first create whose
    /// reply is not a task, no further create is issued; once those in
    /// flight are answered, one `sync` and one listing of `tasks/` tell
    /// which of the creates whose outcome is unknown were applied; the
    /// others are created again, in order. A payload whose outcome cannot
    /// be found out on this session gets [`ClientError::SubmitInDoubt`]
    /// with its token; one never sent because the session ended gets the
    /// session's error (nothing was created for it).
    pub async fn submit_many<P: AsRef<[u8]>>(
        &self,
        payloads: &[P],
        window: usize,
    ) -> Vec<Result<TaskId, ClientError>> {
        assert!(window >= 1, "at least one create in flight");
        let count = payloads.len() as u64;
        let first = self.submissions_started.fetch_add(count, Ordering::Relaxed);
        let session = self.zk.session_id();
        let token_of = |index: usize| TaskToken::for_submission(session, first + index as u64);
        let mut outcomes: Vec<Option<Result<TaskId, ClientError>>> = vec![None; payloads.len()];
        let prefixes: Vec<String> = (0..payloads.len())
            .map(|index| self.layout.protected_task_prefix(token_of(index)))
            .collect();
        // Indices still to create, in order.
        let mut pending: VecDeque<usize> = VecDeque::new();
        for ((index, payload), prefix) in payloads.iter().enumerate().zip(&prefixes) {
            let checked = validate_data(prefix, payload.as_ref())
                .map_err(ClientError::PayloadTooLarge)
                .and_then(|()| {
                    TaskPayload::decode(payload.as_ref()).map_err(ClientError::InvalidPayload)
                });
            match checked {
                Ok(_) => pending.push_back(index),
                Err(error) => outcomes[index] = Some(Err(error)),
            }
        }
        let mut layout_ensured = false;
        while !pending.is_empty() {
            let failed = self
                .create_in_order(payloads, &prefixes, &mut pending, window, &mut outcomes)
                .await;
            if failed.is_empty() {
                break;
            }
            let mut again: Vec<usize> = Vec::new();
            let mut unknown: BTreeMap<TaskToken, usize> = BTreeMap::new();
            let mut session_ended: Option<ZkError> = None;
            for (index, error) in failed {
                match error {
                    // A missing parent: nothing was created.
                    ZkError::NoNode { .. } if !layout_ensured => again.push(index),
                    error if error.is_outcome_unknown() => {
                        unknown.insert(token_of(index), index);
                    }
                    error if error.session_end().is_some() => {
                        session_ended.get_or_insert(error.clone());
                        outcomes[index] = Some(Err(ClientError::SubmitInDoubt {
                            token: token_of(index),
                            cause: Box::new(error.into()),
                        }));
                    }
                    error => outcomes[index] = Some(Err(error.into())),
                }
            }
            if let Some(ended) = session_ended {
                // Nothing more can be sent or read on this session. In
                // doubt: the creates whose outcome is unknown. Not
                // created: those refused for a missing parent and those
                // never sent.
                for index in unknown.into_values() {
                    outcomes[index] = Some(Err(ClientError::SubmitInDoubt {
                        token: token_of(index),
                        cause: Box::new(ended.clone().into()),
                    }));
                }
                for index in again.into_iter().chain(pending.drain(..)) {
                    outcomes[index] = Some(Err(ended.clone().into()));
                }
                break;
            }
            if !again.is_empty() {
                if let Err(error) = until_known(|| self.layout.ensure_layout(&self.zk)).await {
                    for index in again.drain(..) {
                        outcomes[index] = Some(Err(error.clone().into()));
                    }
                }
                layout_ensured = true;
            }
            if !unknown.is_empty() {
                let tokens: BTreeSet<TaskToken> = unknown.keys().copied().collect();
                match self.find_submissions(&tokens).await {
                    Ok(mut found) => {
                        for (token, index) in unknown {
                            match found.remove(&token) {
                                Some(task) => outcomes[index] = Some(Ok(task)),
                                // Not applied: creating again cannot
                                // duplicate it.
                                None => again.push(index),
                            }
                        }
                    }
                    Err(cause) => {
                        for (token, index) in unknown {
                            outcomes[index] = Some(Err(ClientError::SubmitInDoubt {
                                token,
                                cause: Box::new(cause.clone()),
                            }));
                        }
                    }
                }
            }
            // Sent again first, in the payloads' order, then the rest.
            again.sort_unstable();
            for index in again.into_iter().rev() {
                pending.push_front(index);
            }
        }
        outcomes
            .into_iter()
            .map(|outcome| outcome.expect("every payload has an outcome"))
            .collect()
    }

    /// Issues the creates of `pending`, in order, up to `window` at a time,
    /// and records each task created in `outcomes`. Stops issuing at the
    /// first reply that is not a task, waits for the creates in flight,
    /// and returns the ones that failed, in order; what was not issued
    /// stays in `pending`.
    async fn create_in_order<P: AsRef<[u8]>>(
        &self,
        payloads: &[P],
        prefixes: &[String],
        pending: &mut VecDeque<usize>,
        window: usize,
        outcomes: &mut [Option<Result<TaskId, ClientError>>],
    ) -> Vec<(usize, ZkError)> {
        let mut in_flight = FuturesOrdered::new();
        let mut failed: Vec<(usize, ZkError)> = Vec::new();
        loop {
            while failed.is_empty() && in_flight.len() < window {
                let Some(index) = pending.pop_front() else {
                    break;
                };
                // Called here, in order: a backend that sends at the call
                // sends in order, and one that sends at the first poll is
                // polled in this order (the queue polls new futures in the
                // order they were pushed).
                let create = self.zk.create(
                    &prefixes[index],
                    payloads[index].as_ref(),
                    CreateMode::PersistentSequential,
                );
                in_flight.push_back(async move { (index, create.await) });
            }
            let Some((index, reply)) = in_flight.next().await else {
                return failed;
            };
            let created = reply.and_then(|created| {
                TaskId::parse(path::name(&created)).map_err(|error| ZkError::System {
                    reason: format!("the server named a task {created:?}: {error}"),
                })
            });
            match created {
                Ok(task) => {
                    debug_assert!(
                        prefixes[index].ends_with(&format!("task-{}-", task.token().unwrap())),
                        "created under our prefix"
                    );
                    outcomes[index] = Some(Ok(task));
                }
                Err(error) => failed.push((index, error)),
            }
        }
    }

    /// The task a submission with `token` created, if its create was
    /// applied: the resolution of a [`ClientError::SubmitInDoubt`]. Works on
    /// any session, e.g. a new one after the submitting session ended:
    /// `sync` first, so that the server this session talks to has caught up
    /// with the leader and an applied create shows. `Ok(None)` means no task
    /// carries the token (never created, or already deleted).
    ///
    /// Lists `tasks/`: fails with [`ClientError::ListingOverLimit`] when the
    /// listing is over the client's reply limit, and gives up with
    /// [`ClientError::ListingUnreadable`] after [`MAX_LISTING_ATTEMPTS`]
    /// attempts that each failed as a lost connection.
    pub async fn find_submission(&self, token: TaskToken) -> Result<Option<TaskId>, ClientError> {
        let mut found = self.find_submissions(&BTreeSet::from([token])).await?;
        Ok(found.remove(&token))
    }

    /// [`Client::find_submission`] for several tokens at once, with one
    /// `sync` and one listing: the task each token's create made, for the
    /// tokens that made one. Resolves the [`ClientError::SubmitInDoubt`]s of
    /// a [`Client::submit_many`] together.
    pub async fn find_submissions(
        &self,
        tokens: &BTreeSet<TaskToken>,
    ) -> Result<BTreeMap<TaskToken, TaskId>, ClientError> {
        let tasks_dir = self.layout.tasks_dir();
        until_known(|| self.zk.sync(&tasks_dir)).await?;
        let names = match self.list_tasks().await {
            Ok(names) => names,
            // No tasks directory: no task at all.
            Err(ClientError::Zk(ZkError::NoNode { .. })) => return Ok(BTreeMap::new()),
            Err(error) => return Err(error),
        };
        // Foreign names are not ours; one token is only ever created once,
        // but should a name repeat it the oldest one counts.
        let mut found: BTreeMap<TaskToken, TaskId> = BTreeMap::new();
        for task in names.iter().filter_map(|name| TaskId::parse(name).ok()) {
            let Some(token) = task.token().filter(|token| tokens.contains(token)) else {
                continue;
            };
            match found.get(&token) {
                Some(older) if *older <= task => {}
                _ => {
                    found.insert(token, task);
                }
            }
        }
        Ok(found)
    }

    /// The names under `tasks/` (see [`Client::list_children`]).
    async fn list_tasks(&self) -> Result<Vec<String>, ClientError> {
        self.list_children(&self.layout.tasks_dir()).await
    }

    /// The names under `dir`, sent again while the outcome is unknown but
    /// at most [`MAX_LISTING_ATTEMPTS`] times (see
    /// [`ClientError::ListingUnreadable`]), and not again when the reply is
    /// over the session's limit ([`ClientError::ListingOverLimit`]): that
    /// fails as a lost connection too, but every time.
    async fn list_children(&self, dir: &str) -> Result<Vec<String>, ClientError> {
        // A listing over the reply limit is a known outcome here, not one
        // to send again: the same listing is refused every time.
        let listed = until_known_within(MAX_LISTING_ATTEMPTS, || async {
            match self.zk.get_children(dir, Watch::No).await {
                Err(error) => match crate::validate::reply_over_limit(&error) {
                    Some(reason) => Ok(Err(reason.to_owned())),
                    None => Err(error),
                },
                Ok(listed) => Ok(Ok(listed)),
            }
        })
        .await;
        match listed {
            Ok(Ok((names, _))) => Ok(names),
            // The refusal's own words: "connection lost" would mislead.
            Ok(Err(reason)) => Err(ClientError::ListingOverLimit {
                path: dir.to_owned(),
                reason,
            }),
            Err(error) if error.is_outcome_unknown() => Err(ClientError::ListingUnreadable {
                path: dir.to_owned(),
                attempts: MAX_LISTING_ATTEMPTS,
                error,
            }),
            Err(error) => Err(error.into()),
        }
    }

    /// The stat of `path` after a write whose outcome is unknown. The
    /// `sync` first makes the server this session now talks to (perhaps
    /// another one, after the reconnect) catch up with the leader, so a
    /// write that was applied shows.
    async fn exists_after_loss(&self, path: &str) -> Result<Option<Stat>, ZkError> {
        until_known(|| self.zk.sync(path)).await?;
        until_known(|| self.zk.exists(path, Watch::No)).await
    }

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

    fn missing_layout(&self) -> ClientError {
        ClientError::NoLayout {
            root: self.layout.root().to_owned(),
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

#[cfg(test)]
mod tests;
