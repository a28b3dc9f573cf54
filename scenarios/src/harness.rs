//! The harness: a simulated ZooKeeper with a master, workers and a client
//! on it, the checker watching every transaction and decision, and every
//! decision noted into the simulator's trace (`decide <session>: ...`), so
//! that one trace tells what ZooKeeper did and what the actors made of it.
//!
//! Every method takes `&self`, so a scenario's script can drive the
//! harness while [`Harness::guard`] watches for the first violation.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use zkdist_coord::{Client, Coordinator, EventStream, Layout, SessionId, TaskId, WorkerId};
use zkdist_master::{Master, MasterDecision, MasterError, MasterState, claim_master};
use zkdist_sim::{Latency, SimConfig, SimSession, SimZk};
use zkdist_worker::{Worker, WorkerDecision, WorkerError};

use crate::checker::{Checker, TreeFacts, Violation, decision_line};
use crate::handler::{WorkHandler, task_payload};

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
    /// A planted bug in the master's or the workers' sessions.
    #[cfg(feature = "mutants")]
    pub mutant: Option<crate::mutant::Mutant>,
}

impl HarnessConfig {
    pub fn new(seed: u64, latency: Latency) -> HarnessConfig {
        HarnessConfig {
            seed,
            latency,
            session_timeout_ms: 2_000,
            #[cfg(feature = "mutants")]
            mutant: None,
        }
    }
}

/// What a finished run leaves: its whole trace and the first violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    pub seed: u64,
    pub trace: Vec<String>,
    pub violation: Option<Violation>,
    /// Requests applied plus messages delivered (see [`crate::trace::is_step`]).
    pub steps: u64,
    pub submitted: Vec<TaskId>,
}

/// What the checker, the simulator's hook and the decision forwarders share.
struct Shared {
    checker: Mutex<Checker>,
    violated: watch::Sender<bool>,
}

impl Shared {
    fn checker(&self) -> MutexGuard<'_, Checker> {
        // A panic elsewhere leaves the checker's state as it was: keep it.
        self.checker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs a check; signals the harness when it found the first violation.
    fn check(&self, check: impl FnOnce(&mut Checker) -> bool) {
        if check(&mut self.checker()) {
            self.violated.send_replace(true);
        }
    }
}

/// A running actor: how to stop it, and its task.
struct Actor<T> {
    session: SessionId,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<T>,
    /// Ends once the actor's decisions are all noted.
    forwarder: JoinHandle<()>,
}

struct RunningWorker {
    actor: Actor<Result<WorkerId, WorkerError>>,
    id: watch::Receiver<Option<WorkerId>>,
}

pub struct Harness {
    sim: SimZk,
    layout: Layout,
    config: HarnessConfig,
    shared: Arc<Shared>,
    violated: watch::Receiver<bool>,
    client: Client<SimSession>,
    master: Mutex<Option<Actor<Result<MasterState, MasterError>>>>,
    workers: Mutex<Vec<RunningWorker>>,
    submitted: Mutex<Vec<TaskId>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Harness {
    /// Starts the simulation, hooks the checker onto it and connects the
    /// client (session `client`). Call it on the simulation's runtime.
    pub async fn start(config: HarnessConfig) -> Harness {
        let sim = SimZk::start(SimConfig {
            seed: config.seed,
            latency: config.latency,
            session_timeout_ms: config.session_timeout_ms,
        });
        let layout = Layout::default();
        let (violated_tx, violated) = watch::channel(false);
        let shared = Arc::new(Shared {
            checker: Mutex::new(Checker::new(&layout)),
            violated: violated_tx,
        });
        let hook_shared = Arc::clone(&shared);
        sim.on_apply(move |op, tree| hook_shared.check(|checker| checker.on_applied(op, tree)))
            .await;
        let (zk, events) = sim.connect("client").await.expect("the client connects");
        let client = Client::new(zk, events, layout.clone());
        Harness {
            sim,
            layout,
            config,
            shared,
            violated,
            client,
            master: Mutex::new(None),
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

    /// Connects session `master`, claims the master node and runs the
    /// master, its decisions noted and checked. Returns its session.
    pub async fn start_master(&self) -> SessionId {
        let name = "master".to_owned();
        let (zk, events) = self.sim.connect(&name).await.expect("the master connects");
        let session = zk.session_id();
        #[cfg(feature = "mutants")]
        if let Some(mutant) = self.config.mutant.filter(|m| m.is_master()) {
            let zk = crate::mutant::MutantSession::new(zk, mutant, &self.layout);
            self.spawn_master(name, session, zk, events).await;
            return session;
        }
        self.spawn_master(name, session, zk, events).await;
        session
    }

    async fn spawn_master<C: Coordinator>(
        &self,
        name: String,
        session: SessionId,
        zk: C,
        events: EventStream,
    ) {
        let epoch = claim_master(&zk, &self.layout)
            .await
            .expect("claiming the master node")
            .expect("no other master leads in the harness");
        let (decisions_tx, decisions) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let master =
            Master::new(zk, events, self.layout.clone(), epoch).with_observer(decisions_tx);
        let task = tokio::spawn(master.run_until(async move {
            let _ = stopped.await;
        }));
        let forwarder = tokio::spawn(forward_master_decisions(
            self.sim.clone(),
            Arc::clone(&self.shared),
            name,
            decisions,
        ));
        let previous = lock(&self.master).replace(Actor {
            session,
            stop: Some(stop),
            task,
            forwarder,
        });
        assert!(previous.is_none(), "one master per harness");
    }

    /// Connects session `w<n>` (n counts from 1) and runs a worker on it.
    /// Returns its session.
    pub async fn start_worker(&self) -> SessionId {
        let index = lock(&self.workers).len() + 1;
        let name = format!("w{index}");
        let (zk, events) = self.sim.connect(&name).await.expect("a worker connects");
        let session = zk.session_id();
        #[cfg(feature = "mutants")]
        if let Some(mutant) = self.config.mutant.filter(|m| !m.is_master()) {
            let zk = crate::mutant::MutantSession::new(zk, mutant, &self.layout);
            self.spawn_worker(name, session, zk, events);
            return session;
        }
        self.spawn_worker(name, session, zk, events);
        session
    }

    fn spawn_worker<C: Coordinator>(
        &self,
        name: String,
        session: SessionId,
        zk: C,
        events: EventStream,
    ) {
        let (decisions_tx, decisions) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let worker =
            Worker::new(zk, events, self.layout.clone(), WorkHandler).with_observer(decisions_tx);
        let task = tokio::spawn(worker.run_until(async move {
            let _ = stopped.await;
        }));
        let (id_tx, id) = watch::channel(None);
        let forwarder = tokio::spawn(forward_worker_decisions(
            self.sim.clone(),
            Arc::clone(&self.shared),
            name,
            decisions,
            id_tx,
        ));
        lock(&self.workers).push(RunningWorker {
            actor: Actor {
                session,
                stop: Some(stop),
                task,
                forwarder,
            },
            id,
        });
    }

    /// How many workers were started.
    pub fn workers_started(&self) -> usize {
        lock(&self.workers).len()
    }

    /// The session of worker `w<n>`.
    pub fn worker_session(&self, n: usize) -> SessionId {
        lock(&self.workers)[n - 1].actor.session
    }

    /// The session of the master.
    pub fn master_session(&self) -> SessionId {
        lock(&self.master)
            .as_ref()
            .expect("the master was started")
            .session
    }

    /// Waits until worker `w<n>` has registered, and returns its id.
    ///
    /// # Panics
    /// If it does not register within a simulated minute.
    pub async fn registered(&self, n: usize) -> WorkerId {
        let mut id = lock(&self.workers)[n - 1].id.clone();
        let registered =
            tokio::time::timeout(Duration::from_secs(60), id.wait_for(Option::is_some))
                .await
                .unwrap_or_else(|_| panic!("w{n} did not register within a simulated minute"))
                .expect("the worker's forwarder keeps its id");
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
            &format!("submitted {task} (work {}us)", work_us),
        ));
        lock(&self.submitted).push(task.clone());
        task
    }

    pub fn submitted(&self) -> Vec<TaskId> {
        lock(&self.submitted).clone()
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

    /// Expires a session (see [`SimZk::expire`]).
    pub async fn expire(&self, session: SessionId) {
        self.failure(&format!("expire {session}"));
        self.sim.expire(session).await;
    }

    /// Crashes a session's process (see [`SimZk::crash`]).
    pub async fn crash(&self, session: SessionId) {
        self.failure(&format!("crash {session}"));
        self.sim.crash(session).await;
    }

    /// Waits until every submitted task has its result, for at most
    /// `limit` of simulated time. Returns whether they all did.
    pub async fn all_finished(&self, limit: Duration) -> bool {
        let results: Vec<String> = self
            .submitted()
            .iter()
            .map(|task| self.layout.result(task))
            .collect();
        let done = self
            .sim
            .run_until(move |tree| results.iter().all(|path| tree.exists(path)));
        tokio::time::timeout(limit, done).await.is_ok()
    }

    /// Ends the run: lets it settle (no assignment left, then time for the
    /// master to hear of it), stops the master, checks the tree and the
    /// master's final state, and reports. Stops early on a violation.
    pub async fn finish(&self) -> RunReport {
        let master = self
            .guard(async {
                let assignments = self.layout.assignments_dir();
                let drained = self.sim.run_until(move |tree| {
                    tree.children(&assignments).is_none_or(|c| c.is_empty())
                });
                let _ = tokio::time::timeout(DRAIN_LIMIT, drained).await;
                tokio::time::sleep(SETTLE).await;
                self.stop_master().await
            })
            .await;
        if let Some(master) = master {
            let layout = self.layout.clone();
            let facts = self
                .sim
                .inspect(move |tree| TreeFacts::read(tree, &layout))
                .await;
            self.shared
                .check(|checker| checker.on_end(&facts, master.as_ref().ok()));
            if let Err(error) = &master {
                self.sim
                    .note(format!("harness: the master had stopped: {error}"));
            }
        }
        self.report().await
    }

    /// Stops the master and waits for it and its last decisions.
    async fn stop_master(&self) -> Result<MasterState, MasterError> {
        let mut actor = lock(&self.master).take().expect("the master was started");
        if let Some(stop) = actor.stop.take() {
            let _ = stop.send(());
        }
        let outcome = (&mut actor.task)
            .await
            .expect("the master task does not panic");
        let _ = actor.forwarder.await;
        outcome
    }

    /// The report as things stand: the violation (noted at the end of the
    /// trace) and the whole trace. Freezes the checker; call it once.
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
        let trace = self.sim.trace().await;
        RunReport {
            seed: self.config.seed,
            steps: crate::trace::count_steps(&trace),
            trace,
            violation,
            submitted: self.submitted(),
        }
    }
}

/// Notes every master decision in the trace and checks it, in order.
async fn forward_master_decisions(
    sim: SimZk,
    shared: Arc<Shared>,
    name: String,
    mut decisions: mpsc::UnboundedReceiver<MasterDecision>,
) {
    while let Some(decision) = decisions.recv().await {
        sim.note(decision_line(&name, &decision.to_string()));
        shared.check(|checker| checker.on_master_decision(&name, &decision));
    }
}

/// Notes every worker decision in the trace and checks it, in order, and
/// publishes the worker's id once it registered.
async fn forward_worker_decisions(
    sim: SimZk,
    shared: Arc<Shared>,
    name: String,
    mut decisions: mpsc::UnboundedReceiver<WorkerDecision>,
    id: watch::Sender<Option<WorkerId>>,
) {
    while let Some(decision) = decisions.recv().await {
        sim.note(decision_line(&name, &decision.to_string()));
        if let WorkerDecision::Registered { worker } = &decision {
            id.send_replace(Some(worker.clone()));
        }
        shared.check(|checker| checker.on_worker_decision(&name, &decision));
    }
}
