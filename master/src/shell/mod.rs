//! The master's async shell: sends what the core asks for and feeds back
//! what ZooKeeper answers. One task owns the core; the session's event
//! stream and the replies to its requests are the only inputs, consumed one
//! at a time, so the state needs no lock and every decision follows from the
//! order of inputs (which, on the simulator, the seed decides).

mod recovery;
mod send;
mod settled;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use zkdist_coord::retry::until_known;
use zkdist_coord::validate::reply_over_limit;
use zkdist_coord::{
    AssignmentView, Coordinator, Directory, Event, EventStream, Layout, Observer, SessionState,
    Stat, TaskId, WatchKind, WorkerId, ZkError, ZkResult,
};

use crate::decision::MasterDecision;
use crate::discovery::TaskDiscovery;
use crate::election::Epoch;
use crate::fenced::FencedReply;
use crate::in_flight::InFlight;
use crate::state::{
    AssignmentData, AssignmentFound, MasterState, ReclaimOutcome, RegistrationRead, Step,
    TaskStatus, WriteOutcome,
};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MasterError {
    #[error("cannot lay out the zkdist tree under {root}: {error}")]
    Layout { root: String, error: ZkError },
    #[error("the master's session ended ({})", SessionState::describe_end(*state))]
    SessionEnded {
        /// `None` when the event stream closed without saying why.
        state: Option<SessionState>,
    },
    #[error("{what} failed: {error}")]
    Request { what: String, error: ZkError },
    /// A write was refused by the epoch check: a newer master leads. The
    /// master stopped at once; nothing it sent after that changed the tree.
    #[error("deposed: the master of epoch {epoch} was superseded")]
    Deposed { epoch: Epoch },
}

impl MasterError {
    /// Whether this is a listing refused for a reply over the client's
    /// limit ([`zkdist_coord::validate::reply_over_limit`]), which the same
    /// listing meets every time.
    pub fn is_listing_over_limit(&self) -> bool {
        matches!(self, MasterError::Request { error, .. } if reply_over_limit(error).is_some())
    }
}

/// A reply to one [`Command`], or to the shell's own sync after a
/// reconnection.
enum Reply {
    Resynced {
        generation: u64,
        result: ZkResult<()>,
    },
    Listed {
        dir: Directory,
        result: ZkResult<(Vec<String>, Stat)>,
        /// The listing had to be sent more than once.
        resent: bool,
    },
    WatchedRecursively {
        dir: Directory,
        result: ZkResult<()>,
        /// The request had to be sent more than once.
        resent: bool,
    },
    AssignmentRead {
        worker: WorkerId,
        result: ZkResult<Vec<u8>>,
    },
    TasksChecked {
        tasks: Vec<TaskId>,
        /// Whether each task is settled, in the order of `tasks`.
        result: ZkResult<Vec<bool>>,
    },
    AssignmentCreated {
        worker: WorkerId,
        task: TaskId,
        reply: FencedReply,
    },
    AssignmentRecovered {
        worker: WorkerId,
        task: TaskId,
        result: ZkResult<AssignmentFound>,
    },
    Reclaimed {
        worker: WorkerId,
        task: TaskId,
        result: ZkResult<ReclaimOutcome>,
    },
    ReleasedTaskChecked {
        worker: WorkerId,
        task: TaskId,
        result: ZkResult<TaskStatus>,
    },
    PayloadsRead {
        reads: Vec<(TaskId, Option<Vec<u8>>)>,
        /// Why the whole request failed, if it did (a missing task fails
        /// only its own read, and is not one).
        failure: Option<ZkError>,
    },
    RegistrationRead {
        worker: WorkerId,
        result: ZkResult<(Vec<u8>, Stat)>,
    },
}

enum Input {
    Event(Option<Event>),
    Reply(Reply),
    /// The pause after a failed reconcile listing is over.
    ReconcileDue,
    /// The pause for the results of released tasks is over.
    ReleaseChecksDue,
}

/// Lists every directory, as after a reconnection: ZooKeeper re-arms
/// watches then and fires those that missed a change, but listing again
/// costs little and does not depend on it (a listing is a diff, so an
/// extra one is harmless).
fn reconcile_all(state: &mut MasterState) -> Step {
    let mut step = Step::default();
    for dir in Directory::ALL {
        let fired = state.on_watch_fired(dir);
        step.decisions.extend(fired.decisions);
        step.commands.extend(fired.commands);
    }
    step
}

/// Where the session is in a reconnection.
///
/// After a reconnection, the server the session now talks to may be behind
/// the one it left: a change the master already heard of through an event
/// (which carries no zxid, so it does not hold the client back from a
/// server that has not applied it) is then applied there again, and
/// reported again when it is (a worker's assignment deleted a second time,
/// which would free the worker from the task it holds now). A `sync`
/// brings that server up to date, and what it reports before the sync's
/// reply may be such a replay. So the master holds back the events of its
/// recursive watches from the disconnection until that reply, and then
/// lists every directory: requests sent after the sync read a state at
/// least as new as it, and a listing is a diff, so the events it held back
/// are accounted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Connected,
    Disconnected,
    /// Reconnected; the `sync` numbered `generation` is in flight.
    Resyncing {
        generation: u64,
    },
}

/// With the watch discovery, how long the master waits before listing
/// `tasks/` again after a reconcile listing failed (typically over the
/// client's reply limit: the queue must shrink first).
pub const RECONCILE_RETRY_DELAY_MS: u64 = 5_000;

/// How long a task released without a result heard of waits for its result
/// before its status is read (see [`MasterState::on_release_checks_due`]).
/// A result's event may reach the master after its release's, but in the
/// same burst: a second covers that with room to spare, and a task whose
/// assignment was deleted by hand is queued again one to two seconds on.
pub const RELEASE_CHECK_DELAY_MS: u64 = 1_000;

/// The master of one session. Build it with [`Master::new`], optionally
/// attach an observer, then [`Master::run_until`].
pub struct Master<C: Coordinator> {
    zk: Arc<C>,
    events: EventStream,
    layout: Layout,
    observer: Option<Observer<MasterDecision>>,
    /// The epoch this session was elected in: every write checks it.
    epoch: Epoch,
    discovery: TaskDiscovery,
    /// See [`Link`].
    link: Link,
    /// How many post-reconnection syncs were sent: a reconnection during
    /// one makes its reply stale.
    resyncs_sent: u64,
    /// Whether `run_until` must lay the tree out first (the role lays it
    /// out once per session, before the claim).
    lay_out: bool,
    /// Whether a read-ahead request failed for a reason other than the
    /// connection (see [`Master::note_payload_read_failure`]).
    payload_read_failure_warned: bool,
}

impl<C: Coordinator> Master<C> {
    /// A master on a connected session and its event stream, elected in
    /// `epoch` (see [`crate::claim_master`], or [`crate::run_master_role`]
    /// which does it all). Every write it sends is fenced by `epoch`.
    pub fn new(zk: C, events: EventStream, layout: Layout, epoch: Epoch) -> Master<C> {
        let mut master = Master::shared(Arc::new(zk), events, layout, epoch);
        master.lay_out = true;
        master
    }

    /// As [`Master::new`], on a session the caller keeps a handle on (to
    /// close it once the master stops) and laid the tree out on already.
    pub(crate) fn shared(
        zk: Arc<C>,
        events: EventStream,
        layout: Layout,
        epoch: Epoch,
    ) -> Master<C> {
        Master {
            zk,
            events,
            layout,
            observer: None,
            epoch,
            discovery: TaskDiscovery::default(),
            link: Link::Connected,
            resyncs_sent: 0,
            lay_out: false,
            payload_read_failure_warned: false,
        }
    }

    /// Discovers tasks with `discovery` (default: [`TaskDiscovery::Watch`]).
    pub fn with_discovery(mut self, discovery: TaskDiscovery) -> Master<C> {
        self.discovery = discovery;
        self
    }

    /// Calls `observer` with every decision, in order, as it is made, on
    /// the master's task; the log has each one too.
    pub fn with_observer(mut self, observer: impl Into<Observer<MasterDecision>>) -> Master<C> {
        self.observer = Some(observer.into());
        self
    }

    /// Runs until the session ends.
    pub async fn run(self) -> Result<MasterState, MasterError> {
        self.run_until(std::future::pending()).await
    }

    /// Runs until `shutdown` completes (then returns the core, whose view the
    /// caller may compare with ZooKeeper's), the session ends, or a write is
    /// fenced off (`MasterError::Deposed`: the master stops at once).
    /// Creates the layout if it is missing. Does not close the session.
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<MasterState, MasterError> {
        if self.lay_out {
            self.layout
                .ensure_layout(&*self.zk)
                .await
                .map_err(|error| MasterError::Layout {
                    root: self.layout.root().to_owned(),
                    error,
                })?;
        }
        let mut state = MasterState::new(self.epoch, self.discovery)
            .with_payload_read_ahead(self.discovery.payload_read_ahead_tasks());
        let mut in_flight = InFlight::new();
        let step = state.start();
        self.apply(step, true, &mut in_flight);
        let mut shutdown = pin!(shutdown);
        // Armed while a failed reconcile listing waits to be sent again.
        let mut reconcile_retry = pin!(None::<tokio::time::Sleep>);
        // Armed while released tasks wait for their results to be heard of.
        let mut release_checks = pin!(None::<tokio::time::Sleep>);
        loop {
            let input = tokio::select! {
                biased;
                () = &mut shutdown => return Ok(state),
                event = self.events.recv() => Input::Event(event),
                reply = in_flight.next() => Input::Reply(reply),
                () = async { reconcile_retry.as_mut().as_pin_mut().expect("armed").await },
                    if reconcile_retry.is_some() => Input::ReconcileDue,
                () = async { release_checks.as_mut().as_pin_mut().expect("armed").await },
                    if release_checks.is_some() => Input::ReleaseChecksDue,
            };
            let initialising = !state.is_initialised();
            let step = match input {
                Input::Event(event) => self.on_event(&mut state, event, &mut in_flight)?,
                Input::Reply(reply) => self.on_reply(&mut state, reply)?,
                Input::ReconcileDue => {
                    reconcile_retry.set(None);
                    state.on_reconcile_due()
                }
                Input::ReleaseChecksDue => {
                    release_checks.set(None);
                    state.on_release_checks_due()
                }
            };
            if state.has_release_checks_waiting() && release_checks.is_none() {
                release_checks.set(Some(tokio::time::sleep(Duration::from_millis(
                    RELEASE_CHECK_DELAY_MS,
                ))));
            }
            if state.is_reconcile_deferred() && reconcile_retry.is_none() {
                reconcile_retry.set(Some(tokio::time::sleep(Duration::from_millis(
                    RECONCILE_RETRY_DELAY_MS,
                ))));
            }
            self.apply(step, initialising, &mut in_flight);
            if state.is_deposed() {
                // Whatever is still in flight is dropped unanswered; it can
                // change nothing, as the epoch check refuses it.
                return Err(MasterError::Deposed { epoch: self.epoch });
            }
        }
    }

    fn on_event(
        &mut self,
        state: &mut MasterState,
        event: Option<Event>,
        in_flight: &mut InFlight<Reply>,
    ) -> Result<Step, MasterError> {
        match event {
            None => Err(MasterError::SessionEnded { state: None }),
            Some(Event::Watch(watch)) => {
                // The recursive watches on `tasks/` and `assignments/`
                // report every node below them; only their children (not
                // a task's result, nor a directory's own data) matter here.
                for dir in [Directory::Tasks, Directory::Assignments] {
                    if !self.discovery.watches_recursively(dir) {
                        continue;
                    }
                    // A result: what tells a worker's release of its task
                    // from an assignment deleted by someone else.
                    if dir == Directory::Tasks
                        && watch.kind == WatchKind::NodeCreated
                        && self.link == Link::Connected
                        && let Some(task) = self.layout.result_owner_of(&watch.path)
                    {
                        return Ok(state.on_result_created(task));
                    }
                    let Some(name) = self.layout.child_name_of(dir, &watch.path) else {
                        let path = self.layout.directory(dir);
                        // The directory itself deleted (an operator's
                        // `deleteall`, say): no event will come for what is
                        // made in it from now on, and every assignment
                        // create would be refused. The role lays the tree
                        // out again on a new session, as it does when a
                        // listing finds the directory gone.
                        if watch.path == path && watch.kind == WatchKind::NodeDeleted {
                            return Err(MasterError::Request {
                                what: format!("watching {path} (deleted)"),
                                error: ZkError::NoNode { path },
                            });
                        }
                        if self.layout.is_in_directory(dir, &watch.path) {
                            return Ok(Step::default());
                        }
                        continue;
                    };
                    if self.link != Link::Connected {
                        // Possibly a replay of a change already handled;
                        // the listings after the sync account for it.
                        tracing::debug!(target: "zkdist::master", ?watch, "held back until the sync after the reconnection");
                        return Ok(Step::default());
                    }
                    return Ok(match (dir, watch.kind) {
                        (Directory::Tasks, WatchKind::NodeCreated) => state.on_task_created(name),
                        (Directory::Tasks, WatchKind::NodeDeleted) => state.on_task_deleted(name),
                        (Directory::Assignments, WatchKind::NodeCreated) => {
                            state.on_assignment_node_created(name)
                        }
                        (Directory::Assignments, WatchKind::NodeDeleted) => {
                            state.on_assignment_node_deleted(name)
                        }
                        _ => Step::default(),
                    });
                }
                match self.layout.watched_directory(&watch.path) {
                    Some(dir) => Ok(state.on_watch_fired(dir)),
                    None => {
                        tracing::debug!(target: "zkdist::master", ?watch, "ignored watch event");
                        Ok(Step::default())
                    }
                }
            }
            Some(Event::Session(SessionState::Disconnected)) => {
                self.link = Link::Disconnected;
                Ok(Step::default())
            }
            // Reconnected: every directory is listed. With recursive
            // watches, once a sync has brought the server up to date (see
            // `Link`). The listing loop needs none: it learns the tree from
            // replies, which carry their zxid, so the client reconnects
            // only to a server that has applied all it learned.
            Some(Event::Session(SessionState::Connected)) => {
                if self.link == Link::Connected {
                    return Ok(Step::default());
                }
                let recursive = Directory::ALL
                    .into_iter()
                    .any(|dir| self.discovery.watches_recursively(dir));
                if !recursive {
                    self.link = Link::Connected;
                    return Ok(reconcile_all(state));
                }
                self.resyncs_sent += 1;
                let generation = self.resyncs_sent;
                self.link = Link::Resyncing { generation };
                let zk = Arc::clone(&self.zk);
                let root = self.layout.root().to_owned();
                in_flight.push(async move {
                    let result = until_known(|| zk.sync(&root)).await;
                    Reply::Resynced { generation, result }
                });
                Ok(Step::default())
            }
            Some(Event::Session(
                state @ (SessionState::Expired | SessionState::Closed | SessionState::AuthFailed),
            )) => Err(MasterError::SessionEnded { state: Some(state) }),
        }
    }

    fn on_reply(&mut self, state: &mut MasterState, reply: Reply) -> Result<Step, MasterError> {
        let failed = |what: String, error: ZkError| match error.session_end() {
            Some(state) => MasterError::SessionEnded { state: Some(state) },
            None => MasterError::Request { what, error },
        };
        match reply {
            Reply::Resynced { generation, result } => {
                if self.link != (Link::Resyncing { generation }) {
                    // The session reconnected again since: that
                    // reconnection's sync settles it. (Were it ended, the
                    // event stream says so.)
                    return Ok(Step::default());
                }
                result.map_err(|error| {
                    failed(
                        format!("syncing {} after a reconnection", self.layout.root()),
                        error,
                    )
                })?;
                self.link = Link::Connected;
                Ok(reconcile_all(state))
            }
            Reply::Listed {
                dir,
                result,
                resent,
            } => {
                if resent {
                    // Sent again, it was read after requests pushed after
                    // it (an assignment create, say) but reaches the core
                    // before their replies, and the watch it left may have
                    // missed their effects: list again once it is handled.
                    state.on_listing_resent(dir);
                }
                let reconcile = dir == Directory::Tasks
                    && self.discovery == TaskDiscovery::Watch
                    && state.is_initialised();
                let (children, stat) = match result {
                    Ok(listed) => listed,
                    // The master knows its tasks from the watch; only those
                    // created while it was disconnected wait for a listing
                    // that can be read.
                    Err(error) if reconcile && error.is_outcome_unknown() => {
                        return Ok(state
                            .on_tasks_listing_failed(error.to_string(), RECONCILE_RETRY_DELAY_MS));
                    }
                    Err(error) => {
                        return Err(failed(
                            format!("listing {}", self.layout.directory(dir)),
                            error,
                        ));
                    }
                };
                Ok(match (dir, self.discovery) {
                    (Directory::Workers, _) => state.on_workers_listed(children),
                    (Directory::Tasks, TaskDiscovery::Listing) => state.on_tasks_listed(children),
                    (Directory::Tasks, TaskDiscovery::Watch) => {
                        state.on_tasks_listed_at(children, stat.child_creates())
                    }
                    (Directory::Assignments, _) => state.on_assignments_listed(children),
                })
            }
            Reply::WatchedRecursively {
                dir,
                result,
                resent,
            } => {
                result.map_err(|error| {
                    failed(format!("watching {}", self.layout.directory(dir)), error)
                })?;
                Ok(state.on_recursive_watch_added(dir, resent))
            }
            Reply::AssignmentRead { worker, result } => {
                let data = match result {
                    Ok(bytes) => match AssignmentView::decode(&bytes) {
                        Ok(view) => AssignmentData::Task(view.task),
                        Err(_) => AssignmentData::Unreadable,
                    },
                    Err(ZkError::NoNode { .. }) => AssignmentData::Gone,
                    Err(error) => {
                        let path = self.layout.assignment(&worker);
                        return Err(failed(format!("reading {path}"), error));
                    }
                };
                Ok(state.on_assignment_read(worker, data))
            }
            Reply::TasksChecked { tasks, result } => {
                let settled = result.map_err(|error| {
                    failed(
                        format!(
                            "checking whether {} queued tasks (from {} on) have a result or a refusal mark",
                            tasks.len(),
                            self.layout.task(&tasks[0]),
                        ),
                        error,
                    )
                })?;
                assert_eq!(settled.len(), tasks.len(), "one answer per task checked");
                Ok(state.on_tasks_checked(tasks.into_iter().zip(settled).collect()))
            }
            Reply::AssignmentCreated {
                worker,
                task,
                reply,
            } => {
                let outcome = match reply {
                    FencedReply::Applied => WriteOutcome::Applied,
                    FencedReply::FencedOff => WriteOutcome::Fenced,
                    FencedReply::Unknown => WriteOutcome::Unknown,
                    // The registration check: the worker left, or its
                    // node is no live worker's.
                    FencedReply::OpFailed { op: 0, error } => WriteOutcome::WorkerGone {
                        why: match error {
                            ZkError::NoNode { .. } => "its registration is gone".to_owned(),
                            error => format!("its registration cannot be read ({error})"),
                        },
                    },
                    // A create refused for want of a parent: `assignments/`
                    // is gone, and so would every next create be. The role
                    // lays the tree out again (see the deleted directory's
                    // event above, which may come after this reply).
                    FencedReply::OpFailed {
                        error: error @ ZkError::NoNode { .. },
                        ..
                    } => {
                        let path = self.layout.assignment(&worker);
                        return Err(MasterError::Request {
                            what: format!(
                                "creating {path} (is {} gone?)",
                                self.layout.assignments_dir()
                            ),
                            error,
                        });
                    }
                    FencedReply::OpFailed { error, .. } => WriteOutcome::Failed(error.to_string()),
                    FencedReply::Error(error) => {
                        let path = self.layout.assignment(&worker);
                        return Err(failed(format!("creating {path}"), error));
                    }
                };
                Ok(state.on_assignment_created(worker, task, outcome))
            }
            Reply::AssignmentRecovered {
                worker,
                task,
                result,
            } => {
                let found = result.map_err(|error| {
                    let path = self.layout.assignment(&worker);
                    failed(format!("reading back {path}"), error)
                })?;
                Ok(state.on_assignment_recovered(worker, task, found))
            }
            Reply::Reclaimed {
                worker,
                task,
                result,
            } => {
                let outcome = result.map_err(|error| {
                    let path = self.layout.assignment(&worker);
                    failed(format!("reclaiming {path}"), error)
                })?;
                Ok(state.on_assignment_reclaimed(worker, task, outcome))
            }
            Reply::ReleasedTaskChecked {
                worker,
                task,
                result,
            } => {
                let status = result.map_err(|error| {
                    let path = self.layout.task(&task);
                    failed(format!("reading the status of released {path}"), error)
                })?;
                Ok(state.on_released_task_checked(worker, task, status))
            }
            Reply::PayloadsRead { reads, failure } => {
                if let Some(error) = failure {
                    self.note_payload_read_failure(reads.len(), &error);
                }
                Ok(state.on_payloads_read(reads))
            }
            Reply::RegistrationRead { worker, result } => match result {
                Ok((data, stat)) => {
                    let read = if stat.ephemeral_owner == 0 {
                        RegistrationRead::NotEphemeral
                    } else {
                        RegistrationRead::Live { data }
                    };
                    Ok(state.on_registration_read(worker, read))
                }
                // The session is gone: as for every other reply.
                Err(error) if error.is_session_fatal() => Err(failed(
                    format!("reading {}", self.layout.worker(&worker)),
                    error,
                )),
                // The worker left (or its node cannot be read): it is
                // given names, which every worker reads.
                Err(_) => Ok(state.on_registration_read(worker, RegistrationRead::Unreadable)),
            },
        }
    }

    /// A read-ahead request failed as a whole: its tasks go by name, which
    /// costs each worker a read but loses nothing. A lost connection is
    /// passing, and an ended session ends the master anyway: both are
    /// logged at debug. Any other failure (a server that does
    /// not know multi-reads, a request refused under a long chroot) would
    /// repeat on every batch and quietly keep payloads out of assignments,
    /// so it is a warning, once per master.
    fn note_payload_read_failure(&mut self, tasks: usize, error: &ZkError) {
        if error.is_outcome_unknown()
            || error.is_session_fatal()
            || self.payload_read_failure_warned
        {
            tracing::debug!(target: "zkdist::master", "reading {tasks} queued payloads ahead failed: {error}");
            return;
        }
        self.payload_read_failure_warned = true;
        tracing::warn!(
            target: "zkdist::master",
            "reading {tasks} queued payloads ahead failed: {error}; tasks whose payload \
             cannot be read ahead are assigned by name, and their workers read them \
             (this is reported once)"
        );
    }

    /// Logs and publishes the step's decisions, then sends its requests in
    /// order. `initialising`: the step was taken before the master's state
    /// was built (see [`log_level`]).
    fn apply(&self, step: Step, initialising: bool, in_flight: &mut InFlight<Reply>) {
        for decision in step.decisions {
            match log_level(&decision, initialising) {
                tracing::Level::WARN => tracing::warn!(target: "zkdist::master", "{decision}"),
                tracing::Level::INFO => tracing::info!(target: "zkdist::master", "{decision}"),
                tracing::Level::DEBUG => tracing::debug!(target: "zkdist::master", "{decision}"),
                level => unreachable!("log_level gives warn, info or debug, not {level}"),
            }
            if let Some(observer) = &self.observer {
                observer.observe(decision);
            }
        }
        for command in step.commands {
            self.send(command, in_flight);
        }
    }
}

/// How loud a decision is in the log. Warnings for what an operator must
/// act on; every other decision at info, except the one line per stored
/// task that building the state takes: a task found queued or finished
/// at start-up is logged at debug, since finished tasks stay until their
/// clients delete them, and a master elected over millions of them would
/// otherwise log millions of lines (the `initialised` line gives the
/// queue they make up).
fn log_level(decision: &MasterDecision, initialising: bool) -> tracing::Level {
    match decision {
        MasterDecision::ReconcileDeferred { .. }
        | MasterDecision::SequenceCounterNearLimit { .. }
        | MasterDecision::ReleasedTaskLeft { .. } => tracing::Level::WARN,
        MasterDecision::TaskAlreadyFinished { .. } => tracing::Level::DEBUG,
        MasterDecision::TaskQueued { .. } if initialising => tracing::Level::DEBUG,
        _ => tracing::Level::INFO,
    }
}

#[cfg(test)]
mod tests {
    use zkdist_coord::TaskId;

    use super::*;

    #[test]
    fn only_the_stored_tasks_met_at_start_up_are_logged_below_info() {
        let task = TaskId::parse("task-0000000000000001-0000000001").unwrap();
        let queued = MasterDecision::TaskQueued { task: task.clone() };
        let finished = MasterDecision::TaskAlreadyFinished { task };
        assert_eq!(log_level(&queued, true), tracing::Level::DEBUG);
        assert_eq!(log_level(&queued, false), tracing::Level::INFO);
        assert_eq!(log_level(&finished, true), tracing::Level::DEBUG);
        let initialised = MasterDecision::Initialised {
            workers: 2,
            pending_tasks: 66,
            busy_workers: 0,
        };
        assert_eq!(log_level(&initialised, true), tracing::Level::INFO);
        let deferred = MasterDecision::ReconcileDeferred {
            error: "over the reply limit".to_owned(),
            retry_in_ms: 5_000,
        };
        assert_eq!(log_level(&deferred, false), tracing::Level::WARN);
    }
}
