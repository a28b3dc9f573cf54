//! The harness: a simulated ZooKeeper with master candidates, workers and a
//! client on it, the checker watching every transaction and decision, and
//! every decision noted into the simulator's trace (`decide <actor>: ...`),
//! so that one trace tells what ZooKeeper did and what the actors made of
//! it.
//!
//! Masters and workers run as processes that outlive their sessions (see
//! [`crate::roles`]): master candidates `m1`, `m2`... and workers `w1`,
//! `w2`..., whose sessions are named `m1`, `m1.2`, `m1.3`... A crash kills
//! a process with its session (the server expires the session after its
//! timeout); a restart starts a new process for the same actor, which goes
//! on with the actor's next session name.
//!
//! Every method takes `&self`, so a scenario's script can drive the
//! harness while [`Harness::guard`] watches for the first violation.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use zkdist_coord::{
    Client, ClientError, Coordinator, Layout, Observer, SessionId, TaskId, WorkerId,
};
use zkdist_master::{MasterDecision, MasterError, MasterState, TaskDiscovery};
use zkdist_sim::{Latency, SimConfig, SimSession, SimZk};
use zkdist_worker::{WorkerDecision, WorkerError};

use crate::checker::{Checker, TreeFacts, Violation, decision_line};
use crate::handler::task_payload;
use crate::roles::{ActorConnector, lock, master_role, worker_role};
use crate::trace::TraceSummary;

/// How long the master gets, after the last assignment node is gone, to
/// hear of it: far longer than any latency the testbed draws.
const SETTLE: Duration = Duration::from_secs(2);
/// How long [`Harness::finish`] waits for the assignment nodes to go.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// How a harness's simulation is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessConfig {
    /// Seeds the simulator (and nothing else: scripts draw their own
    /// choices from generators of their own).
    pub seed: u64,
    pub latency: Latency,
    pub session_timeout_ms: u64,
    /// How the masters discover tasks.
    pub discovery: TaskDiscovery,
    /// A planted bug in the master's or the workers' sessions.
    #[cfg(feature = "mutants")]
    pub mutant: Option<crate::mutant::Mutant>,
    /// Workers `w1` to `w<old_workers>` are of a build older than inline
    /// payloads (see [`crate::OldWorkerSession`]).
    pub old_workers: usize,
    /// Where the sequence counter of `tasks/` starts: the first task's
    /// number. `Some` makes the harness create the layout at start and set
    /// the counter (just short of `i32::MAX` runs the queue across
    /// ZooKeeper's 32-bit wrap).
    pub first_task_sequence: Option<i32>,
    /// How far behind the newest write a read may be answered, in
    /// transactions (see [`SimConfig::follower_lag_txns`]); 0, the
    /// default, never.
    pub follower_lag_txns: u32,
    /// Whether the report carries the whole trace (the default) or only
    /// its length, steps and digest.
    pub keep_trace: bool,
}

impl HarnessConfig {
    pub fn new(seed: u64, latency: Latency) -> HarnessConfig {
        HarnessConfig {
            seed,
            latency,
            session_timeout_ms: 2_000,
            discovery: TaskDiscovery::default(),
            #[cfg(feature = "mutants")]
            mutant: None,
            old_workers: 0,
            first_task_sequence: None,
            follower_lag_txns: 0,
            keep_trace: true,
        }
    }
}

/// What a finished run leaves: its whole trace and the first violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    pub seed: u64,
    /// Every line, or none if [`HarnessConfig::keep_trace`] was off.
    pub trace: Vec<String>,
    /// The trace's length, kept or not.
    pub trace_lines: usize,
    /// [`crate::trace::digest`] of the trace, kept or not.
    pub trace_digest: u64,
    pub violation: Option<Violation>,
    /// Requests applied plus messages delivered (see [`crate::trace::is_step`]).
    pub steps: u64,
    pub submitted: Vec<TaskId>,
}

/// What the checker, the simulator's hook and the actors' observers share.
struct Shared {
    checker: Mutex<Checker>,
    violated: watch::Sender<bool>,
    /// Numbers the worker processes started, crashed ones' restarts
    /// included: a crashed process's handler run may end after its
    /// restart's began, and the checker tells the two apart by it.
    worker_processes: AtomicU64,
}

impl Shared {
    fn checker(&self) -> MutexGuard<'_, Checker> {
        lock(&self.checker)
    }

    /// Runs a check; signals the harness when it found the first violation.
    fn check(&self, check: impl FnOnce(&mut Checker) -> bool) {
        if check(&mut self.checker()) {
            self.violated.send_replace(true);
        }
    }
}

/// One running process of an actor: how to stop it, and its task. Its
/// decisions are noted and checked as it makes them ([`master_observer`],
/// [`worker_observer`]).
struct Process<T> {
    stop: oneshot::Sender<()>,
    task: JoinHandle<T>,
}

/// An actor (a master candidate or a worker): its sessions, and its process
/// unless it crashed and was not restarted yet.
struct Actor<T> {
    connector: ActorConnector,
    process: Option<Process<T>>,
    /// A worker's id on its latest session (unused for masters).
    worker_id: Arc<watch::Sender<Option<WorkerId>>>,
}

/// The client's session: the mutant tests wrap it so that it can plant
/// their bug.
#[cfg(feature = "mutants")]
type ClientSession = crate::mutant::MutantSession<SimSession>;
#[cfg(not(feature = "mutants"))]
type ClientSession = SimSession;

/// What a master candidate's process returns.
type MasterRun = Result<Option<MasterState>, MasterError>;

/// Which kind of actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Master,
    Worker,
}

pub struct Harness {
    sim: SimZk,
    layout: Layout,
    config: HarnessConfig,
    shared: Arc<Shared>,
    violated: watch::Receiver<bool>,
    client: Client<ClientSession>,
    masters: Mutex<Vec<Actor<MasterRun>>>,
    workers: Mutex<Vec<Actor<Result<(), WorkerError>>>>,
    submitted: Mutex<Vec<TaskId>>,
}

impl Harness {
    /// Starts the simulation, hooks the checker onto it and connects the
    /// client (session `client`). Call it on the simulation's runtime.
    pub async fn start(config: HarnessConfig) -> Harness {
        let sim = SimZk::start(SimConfig {
            seed: config.seed,
            latency: config.latency,
            session_timeout_ms: config.session_timeout_ms,
            follower_lag_txns: config.follower_lag_txns,
            ..SimConfig::default()
        });
        if config.follower_lag_txns > 0 {
            // The lagging reads' lines say how far each is behind; this
            // says why a replay has them.
            sim.note(format!(
                "harness: reads may lag up to {} transactions behind the newest",
                config.follower_lag_txns
            ));
        }
        let layout = Layout::default();
        let (violated_tx, violated) = watch::channel(false);
        let shared = Arc::new(Shared {
            checker: Mutex::new(Checker::new(&layout)),
            violated: violated_tx,
            worker_processes: AtomicU64::new(0),
        });
        let hook_shared = Arc::clone(&shared);
        sim.on_apply(move |op, tree| hook_shared.check(|checker| checker.on_applied(op, tree)))
            .await;
        let (zk, events) = sim.connect("client").await.expect("the client connects");
        if let Some(sequence) = config.first_task_sequence {
            layout
                .ensure_layout(&zk)
                .await
                .expect("the client creates the layout");
            sim.set_sequence_counter(&layout.tasks_dir(), sequence)
                .await
                .expect("tasks/ exists");
        }
        #[cfg(feature = "mutants")]
        let zk = crate::mutant::MutantSession::new(
            zk,
            config.mutant.filter(|mutant| mutant.is_client()),
            &layout,
        );
        let client = Client::new(zk, events, layout.clone());
        Harness {
            sim,
            layout,
            config,
            shared,
            violated,
            client,
            masters: Mutex::new(Vec::new()),
            workers: Mutex::new(Vec::new()),
            submitted: Mutex::new(Vec::new()),
        }
    }

    pub fn sim(&self) -> &SimZk {
        &self.sim
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Adds a scenario's own line to the trace.
    pub fn note(&self, text: impl AsRef<str>) {
        self.sim.note(format!("scenario: {}", text.as_ref()));
    }

    /// Runs `script` until it ends or the checker finds a violation,
    /// whichever comes first (`None` then).
    pub async fn guard<T>(&self, script: impl Future<Output = T>) -> Option<T> {
        let mut violated = self.violated.clone();
        // The script first: a script that ends in the same poll as a
        // violation is signalled (its report already holds the violation)
        // keeps its output.
        tokio::select! {
            biased;
            output = script => Some(output),
            _ = violated.wait_for(|violated| *violated) => None,
        }
    }

    fn connector(&self, kind: Kind, name: &str) -> ActorConnector {
        let old_worker = kind == Kind::Worker && actor_index(name) < self.config.old_workers;
        #[cfg(feature = "mutants")]
        {
            let mutant = self.config.mutant.filter(|mutant| match kind {
                Kind::Master => mutant.is_master(),
                Kind::Worker => !mutant.is_master() && !mutant.is_client(),
            });
            ActorConnector::new(&self.sim, name, mutant, old_worker, &self.layout)
        }
        #[cfg(not(feature = "mutants"))]
        {
            ActorConnector::new(&self.sim, name, old_worker, &self.layout)
        }
    }

    /// Starts master candidate `m<n>` (n counts from 1): a process that
    /// claims the master node or stands by, session after session. Returns
    /// its first session once a master leads (this candidate, if none led
    /// before).
    pub async fn start_master(&self) -> SessionId {
        let connector = {
            let mut masters = lock(&self.masters);
            let connector = self.connector(Kind::Master, &format!("m{}", masters.len() + 1));
            masters.push(Actor {
                connector: connector.clone(),
                process: None,
                worker_id: Arc::new(watch::channel(None).0),
            });
            connector
        };
        self.spawn(Kind::Master, connector.name());
        let session = connector.opened_after(0).await;
        self.leader().await;
        session
    }

    /// Starts worker `w<n>` (n counts from 1): a process that registers
    /// and works, session after session. Returns its first session once
    /// connected.
    pub async fn start_worker(&self) -> SessionId {
        let connector = {
            let mut workers = lock(&self.workers);
            let connector = self.connector(Kind::Worker, &format!("w{}", workers.len() + 1));
            workers.push(Actor {
                connector: connector.clone(),
                process: None,
                worker_id: Arc::new(watch::channel(None).0),
            });
            connector
        };
        self.spawn(Kind::Worker, connector.name());
        connector.opened_after(0).await
    }

    /// Starts a process for the actor called `name`.
    fn spawn(&self, kind: Kind, name: &str) {
        let index = actor_index(name);
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        match kind {
            Kind::Master => {
                let mut masters = lock(&self.masters);
                let actor = &mut masters[index];
                let task = tokio::spawn(master_role(
                    actor.connector.clone(),
                    self.layout.clone(),
                    self.config.discovery,
                    shutdown,
                    master_observer(self.sim.clone(), Arc::clone(&self.shared), name),
                ));
                let previous = actor.process.replace(Process { stop, task });
                assert!(previous.is_none(), "one process per actor at a time");
            }
            Kind::Worker => {
                let mut workers = lock(&self.workers);
                let actor = &mut workers[index];
                let task = tokio::spawn(worker_role(
                    actor.connector.clone(),
                    self.layout.clone(),
                    shutdown,
                    worker_observer(
                        self.sim.clone(),
                        Arc::clone(&self.shared),
                        name,
                        Arc::clone(&actor.worker_id),
                    ),
                    handler_runs_observer(Arc::clone(&self.shared), name),
                ));
                let previous = actor.process.replace(Process { stop, task });
                assert!(previous.is_none(), "one process per actor at a time");
            }
        }
    }

    /// How many workers were started.
    pub fn workers_started(&self) -> usize {
        lock(&self.workers).len()
    }

    /// How many master candidates were started.
    pub fn masters_started(&self) -> usize {
        lock(&self.masters).len()
    }

    /// The session worker `w<n>` works on now (its latest).
    pub fn worker_session(&self, n: usize) -> SessionId {
        lock(&self.workers)[n - 1]
            .connector
            .current()
            .expect("a started worker has a session")
    }

    /// The session master candidate `m<n>` runs on now (its latest).
    pub fn master_session(&self, n: usize) -> SessionId {
        lock(&self.masters)[n - 1]
            .connector
            .current()
            .expect("a started candidate has a session")
    }

    /// The session the actor called `name` (`m1`, `w2`...) runs on now;
    /// `None` before its first session is open.
    pub fn current_session(&self, name: &str) -> Option<SessionId> {
        let index = actor_index(name);
        let connector = if name.starts_with('m') {
            lock(&self.masters)
                .get(index)
                .map(|actor| actor.connector.clone())
        } else {
            lock(&self.workers)
                .get(index)
                .map(|actor| actor.connector.clone())
        };
        connector.and_then(|connector| connector.current())
    }

    /// The session that holds the master node now, if any.
    pub async fn current_leader(&self) -> Option<SessionId> {
        let master = self.layout.master();
        self.sim
            .inspect(move |tree| {
                tree.stat(&master)
                    .map(|stat| SessionId(stat.ephemeral_owner))
            })
            .await
    }

    /// Waits until a session holds the master node, and returns it.
    ///
    /// # Panics
    /// If none does within a simulated minute.
    pub async fn leader(&self) -> SessionId {
        let master = self.layout.master();
        tokio::time::timeout(
            Duration::from_secs(60),
            self.sim.run_until(move |tree| tree.exists(&master)),
        )
        .await
        .expect("a master leads within a simulated minute");
        self.current_leader().await.expect("waited for it")
    }

    /// The actor whose process opened `session` (`m1`, `w2`...).
    pub fn actor_of(&self, session: SessionId) -> Option<String> {
        let masters = lock(&self.masters);
        let workers = lock(&self.workers);
        let names = masters
            .iter()
            .map(|actor| &actor.connector)
            .chain(workers.iter().map(|actor| &actor.connector));
        names
            .filter(|connector| connector.owns(session))
            .map(|connector| connector.name().to_owned())
            .next()
    }

    /// Waits until worker `w<n>` has registered (on its latest session
    /// that did), and returns its id.
    ///
    /// # Panics
    /// If it does not register within a simulated minute.
    pub async fn registered(&self, n: usize) -> WorkerId {
        let mut id = lock(&self.workers)[n - 1].worker_id.subscribe();
        let registered =
            tokio::time::timeout(Duration::from_secs(60), id.wait_for(Option::is_some))
                .await
                .unwrap_or_else(|_| panic!("w{n} did not register within a simulated minute"))
                .expect("the worker keeps its id sender");
        registered.clone().expect("waited for Some")
    }

    /// Waits until worker `w<n>` registers with an id other than `old`
    /// (after its session ended), and returns the new id.
    ///
    /// # Panics
    /// If it does not within a simulated minute.
    pub async fn registered_again(&self, n: usize, old: &WorkerId) -> WorkerId {
        let mut id = lock(&self.workers)[n - 1].worker_id.subscribe();
        let registered = tokio::time::timeout(
            Duration::from_secs(60),
            id.wait_for(|id| id.as_ref().is_some_and(|id| id != old)),
        )
        .await
        .unwrap_or_else(|_| panic!("w{n} did not register again within a simulated minute"))
        .expect("the worker keeps its id sender");
        registered.clone().expect("waited for Some")
    }

    /// Submits a task taking `work_us` of simulated time to run, and notes
    /// it. Tasks are numbered from 0 in submission order.
    pub async fn submit(&self, work_us: u64) -> TaskId {
        let n = lock(&self.submitted).len() as u64;
        let task = self
            .client
            .submit(&task_payload(n, work_us))
            .await
            .expect("the client submits");
        self.sim.note(decision_line(
            "client",
            format_args!("submitted {task} (work {work_us}us)"),
        ));
        lock(&self.submitted).push(task.clone());
        task
    }

    /// Submits like [`Harness::submit`], but hands back the client's error
    /// instead of panicking on it (a scenario that cuts the client's link).
    pub async fn try_submit(&self, work_us: u64) -> Result<TaskId, ClientError> {
        let n = lock(&self.submitted).len() as u64;
        let task = self.client.submit(&task_payload(n, work_us)).await;
        let text = match &task {
            Ok(task) => format!("submitted {task} (work {}us)", work_us),
            Err(error) => format!("submit failed: {error}"),
        };
        self.sim.note(decision_line("client", &text));
        if let Ok(task) = &task {
            lock(&self.submitted).push(task.clone());
        }
        task
    }

    /// The client's session.
    pub fn client_session(&self) -> SessionId {
        self.client.session().session_id()
    }

    pub fn submitted(&self) -> Vec<TaskId> {
        lock(&self.submitted).clone()
    }

    /// The client deletes a finished task (its result, then its node), as
    /// a user does once it read the result. Notes it.
    pub async fn cleanup(&self, task: &TaskId) {
        let outcome = self.client.cleanup(task).await;
        let text = match outcome {
            Ok(()) => format!("cleaned up {task}"),
            Err(error) => format!("could not clean up {task}: {error}"),
        };
        self.sim.note(decision_line("client", &text));
    }

    /// Tells the checker a failure happened (FIFO is no longer required).
    pub fn failure(&self, what: &str) {
        self.shared.checker().on_failure(what);
    }

    /// Cuts a session's link for `duration` (see [`SimZk::cut`]).
    pub async fn cut(&self, session: SessionId, duration: Duration) {
        self.failure(&format!("cut {session} for {duration:?}"));
        self.sim.cut(session, duration).await;
    }

    /// Partitions a session's link silently for at least `duration` (see
    /// [`SimZk::partition`]).
    pub async fn partition(&self, session: SessionId, duration: Duration) {
        self.failure(&format!("partition {session} for {duration:?}"));
        self.sim.partition(session, duration).await;
    }

    /// Stalls the server `session` talks to (see [`SimZk::stall`]). Not a
    /// failure: a follower behind the leader is ZooKeeper working as
    /// documented.
    pub async fn stall(&self, session: SessionId, duration: Duration) {
        self.sim.stall(session, duration).await;
    }

    /// Expires a session (see [`SimZk::expire`]).
    pub async fn expire(&self, session: SessionId) {
        self.failure(&format!("expire {session}"));
        self.sim.expire(session).await;
    }

    /// Crashes the process that runs `session`: the session's link drops
    /// for good (see [`SimZk::crash`]) and the process dies with everything
    /// it was doing, before any of its tasks runs again. Returns the
    /// actor's name, for [`Harness::restart`]; `None` when no process of
    /// the harness runs that session (only the session crashes).
    pub async fn crash(&self, session: SessionId) -> Option<String> {
        self.failure(&format!("crash {session}"));
        let crashed = self.sim.crash(session);
        let mut killed = None;
        if let Some(name) = self.actor_of(session) {
            let process = if name.starts_with('m') {
                lock(&self.masters)[actor_index(&name)]
                    .process
                    .take()
                    .map(|p| p.task.abort_handle())
            } else {
                lock(&self.workers)[actor_index(&name)]
                    .process
                    .take()
                    .map(|p| p.task.abort_handle())
            };
            // What it decided before dying is noted already: decisions are
            // noted as they are made.
            if let Some(task) = process {
                task.abort();
                killed = Some(name);
            }
        }
        crashed.await;
        killed
    }

    /// Asks worker `w<n>`'s process to stop, as SIGTERM does, and waits
    /// for its end: it finishes the task in hand, writes its result and
    /// leaves. A process that ends with an error is an actor failure.
    pub async fn stop_worker(&self, n: usize) {
        let name = format!("w{n}");
        self.sim.note(format!("harness: stop {name}"));
        let process = lock(&self.workers)[actor_index(&name)]
            .process
            .take()
            .unwrap_or_else(|| panic!("{name} has a process to stop"));
        let _ = process.stop.send(());
        let how = match process.task.await {
            Ok(Ok(())) => return,
            Ok(Err(error)) => format!("told to stop, it gave up: {error}"),
            Err(error) => format!("told to stop, it panicked: {error}"),
        };
        self.actor_failed(&name, &how);
    }

    /// Notes that the process of actor `name` ended as it should not have,
    /// `how`, and reports it to the checker.
    fn actor_failed(&self, name: &str, how: &str) {
        self.sim.note(format!("harness: {name} ended: {how}"));
        self.shared
            .check(|checker| checker.on_actor_failed(name, how));
    }

    /// Starts a new process for the actor called `name` (after a crash).
    pub fn restart(&self, name: &str) {
        self.sim.note(format!("harness: restart {name}"));
        let kind = if name.starts_with('m') {
            Kind::Master
        } else {
            Kind::Worker
        };
        self.spawn(kind, name);
    }

    /// How many sessions the actor `name` opened so far.
    pub fn sessions_opened(&self, name: &str) -> usize {
        let index = actor_index(name);
        if name.starts_with('m') {
            lock(&self.masters)[index].connector.sessions_opened()
        } else {
            lock(&self.workers)[index].connector.sessions_opened()
        }
    }

    /// Notes that the faults are over and every link healed: from now on
    /// every task must finish (the checker's liveness rule, judged at the
    /// end of the run).
    pub fn liveness_phase(&self) {
        self.sim
            .note("harness: faults over, links healed: liveness phase");
    }

    /// Waits until every submitted task has its result, for at most
    /// `limit` of simulated time. Returns whether they all did.
    pub async fn all_finished(&self, limit: Duration) -> bool {
        let results: Vec<String> = self
            .submitted()
            .iter()
            .map(|task| self.layout.result(task))
            .collect();
        // Checked after every transaction, newest task first: tasks finish
        // about in the order they were queued, so the last one is missing
        // until the end, and one lookup answers (oldest first, every
        // finished task was looked up again each time).
        let done = self
            .sim
            .run_until(move |tree| results.iter().rev().all(|path| tree.exists(path)));
        tokio::time::timeout(limit, done).await.is_ok()
    }

    /// Ends the run: lets it settle (no assignment left, then time for the
    /// master to hear of it), stops the master candidates, checks the tree
    /// and the leading master's final state, and reports. Stops early on a
    /// violation.
    pub async fn finish(&self) -> RunReport {
        let master = self
            .guard(async {
                let assignments = self.layout.assignments_dir();
                let drained = self.sim.run_until(move |tree| {
                    tree.children(&assignments).is_none_or(|c| c.is_empty())
                });
                let _ = tokio::time::timeout(DRAIN_LIMIT, drained).await;
                tokio::time::sleep(SETTLE).await;
                self.stop_masters().await
            })
            .await;
        self.check_workers().await;
        if let Some(master) = master {
            let layout = self.layout.clone();
            let facts = self
                .sim
                .inspect(move |tree| TreeFacts::read(tree, &layout))
                .await;
            if master.is_none() {
                self.sim.note("harness: no master led at the end");
            }
            let submitted = self.submitted();
            self.shared
                .check(|checker| checker.on_end(&facts, &submitted, master.as_ref()));
        }
        self.report().await
    }

    /// Notes every worker process (not crashed on purpose) that has ended
    /// by itself, with an error or a panic, and reports the first as a
    /// violation: the workers run until the harness stops them.
    async fn check_workers(&self) {
        let ended: Vec<(String, Process<Result<(), WorkerError>>)> = lock(&self.workers)
            .iter_mut()
            .filter_map(|actor| {
                let process = actor
                    .process
                    .take_if(|process| process.task.is_finished())?;
                Some((actor.connector.name().to_owned(), process))
            })
            .collect();
        for (name, process) in ended {
            let how = match process.task.await {
                Ok(Ok(())) => "it returned without being asked to stop".to_owned(),
                Ok(Err(error)) => format!("it gave up: {error}"),
                Err(error) => format!("it panicked: {error}"),
            };
            self.actor_failed(&name, &how);
        }
    }

    /// Stops every master candidate and waits for each. Returns the state
    /// of the one that led. A candidate that gave up, before the stop or
    /// in answer to it, is an actor failure: a candidate gives up only
    /// where retrying cannot help (a tree it may not write, a node it did
    /// not expect), and neither faults nor the harness make one.
    async fn stop_masters(&self) -> Option<MasterState> {
        let leader = self.current_leader().await;
        let processes: Vec<(String, bool, Process<MasterRun>)> = lock(&self.masters)
            .iter_mut()
            .filter_map(|actor| {
                let leads = leader.is_some_and(|session| actor.connector.owns(session));
                let name = actor.connector.name().to_owned();
                actor.process.take().map(|process| (name, leads, process))
            })
            .collect();
        let mut leading = None;
        for (name, leads, process) in processes {
            let _ = process.stop.send(());
            let state = match process
                .task
                .await
                .expect("a master candidate does not panic")
            {
                Ok(state) => state,
                Err(error) => {
                    let how = format!("it gave up: {error}");
                    self.sim.note(format!("harness: {name} ended: {how}"));
                    self.shared
                        .check(|checker| checker.on_actor_failed(&name, &how));
                    None
                }
            };
            if leads {
                leading = state;
            }
        }
        leading
    }

    /// The report as things stand: the violation (noted at the end of the
    /// trace) and the whole trace, or only its summary (see
    /// [`HarnessConfig::keep_trace`]). Freezes the checker; call it once.
    ///
    /// # Panics
    /// If the simulation's driver has stopped (it panicked) and the trace
    /// is not kept.
    pub async fn report(&self) -> RunReport {
        let violation = {
            let mut checker = self.shared.checker();
            checker.close();
            checker.violation().cloned()
        };
        let violation = match violation {
            Some(mut violation) => {
                let trace = self.sim.trace().await;
                violation.locate(&trace);
                self.sim.note(format!(
                    "violation: {} at {}: {}",
                    violation.invariant, violation.step, violation.detail
                ));
                Some(violation)
            }
            None => None,
        };
        // Actors may still add lines, so the summary comes from the same
        // read as the lines: the copy when the lines are wanted, else the
        // lines where the simulator keeps them (most of the explorer's
        // runs want nothing more, and copying every line out cost it a
        // twentieth of its time).
        let (trace, summary) = if self.config.keep_trace {
            let trace = self.sim.trace().await;
            let summary = TraceSummary::of(trace.iter().map(String::as_str));
            (trace, summary)
        } else {
            let summary = self.sim.read_trace(|lines| TraceSummary::of(lines)).await;
            (Vec::new(), summary)
        };
        RunReport {
            seed: self.config.seed,
            steps: summary.steps,
            trace,
            trace_lines: summary.lines,
            trace_digest: summary.digest,
            violation,
            submitted: self.submitted(),
        }
    }
}

/// `m3` and `w3` are the third of their kind: index 2.
fn actor_index(name: &str) -> usize {
    name[1..]
        .parse::<usize>()
        .expect("actor names are a letter and a number")
        - 1
}

/// Notes each master decision in the trace and checks it, as the master
/// makes it: before the master's next request goes out.
fn master_observer(sim: SimZk, shared: Arc<Shared>, name: &str) -> Observer<MasterDecision> {
    let name = name.to_owned();
    Observer::new(move |decision| {
        sim.note(decision_line(&name, &decision));
        shared.check(|checker| checker.on_master_decision(&name, &decision));
    })
}

/// Tells the checker of each start and end of the handler runs of one
/// worker process (a new number for each process of the actor).
fn handler_runs_observer(shared: Arc<Shared>, name: &str) -> Observer<bool> {
    let name = name.to_owned();
    let process = shared.worker_processes.fetch_add(1, Ordering::Relaxed);
    Observer::new(move |running| {
        shared.checker().on_handler_run(&name, process, running);
    })
}

/// Notes each worker decision in the trace and checks it, as the worker
/// makes it, and publishes the worker's id each time it registers.
fn worker_observer(
    sim: SimZk,
    shared: Arc<Shared>,
    name: &str,
    id: Arc<watch::Sender<Option<WorkerId>>>,
) -> Observer<WorkerDecision> {
    let name = name.to_owned();
    Observer::new(move |decision| {
        sim.note(decision_line(&name, &decision));
        if let WorkerDecision::Registered { worker } = &decision {
            id.send_replace(Some(worker.clone()));
        }
        shared.check(|checker| checker.on_worker_decision(&name, &decision));
    })
}
