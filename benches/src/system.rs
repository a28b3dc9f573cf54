//! A running zkdist for measurement: one master and any number of workers,
//! each on a session of its own (of any backend), working through tasks
//! with a handler that does nothing, so that what is measured is zkdist
//! and ZooKeeper, not the work.
//!
//! The workers' decisions come out of one stream ([`System::worker_decision`]),
//! which is how a workload learns that a task's result is written and that
//! its worker is free again, without asking ZooKeeper. The master's
//! decisions are only counted (workers it has seen join), never kept, so a
//! long run does not pile them up.

use std::future::Future;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use zkdist_coord::{Coordinator, EventStream, Layout, Observer, ZkError};
use zkdist_master::{Master, MasterDecision, MasterError, TaskDiscovery, claim_master};
use zkdist_worker::{TaskError, TaskHandler, Worker, WorkerDecision, WorkerError};

/// Answers every task at once with empty output.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopHandler;

impl TaskHandler for NoopHandler {
    fn run(&self, _task: &[u8]) -> impl Future<Output = Result<Vec<u8>, TaskError>> + Send {
        std::future::ready(Ok(Vec::new()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SystemError {
    #[error("cannot claim {path}: {error}")]
    Claim { path: String, error: ZkError },
    #[error("another master already holds {path}")]
    MasterTaken { path: String },
    #[error("the {actor} stopped during the run: {outcome}")]
    ActorEnded { actor: String, outcome: String },
    #[error("the master failed: {0}")]
    Master(MasterError),
    #[error("{worker} failed: {error}")]
    Worker { worker: String, error: WorkerError },
    #[error("the {actor} panicked")]
    Panicked { actor: String },
}

/// One actor's task and its stop signal.
struct Actor<T> {
    name: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<T>,
}

/// A master and workers at work. Stop it with [`System::stop`], which
/// waits for every actor and reports the first failure.
pub struct System {
    layout: Layout,
    discovery: TaskDiscovery,
    master: Option<Actor<Result<(), MasterError>>>,
    workers: Vec<Actor<Result<(), WorkerError>>>,
    worker_decisions_tx: mpsc::UnboundedSender<WorkerDecision>,
    worker_decisions: mpsc::UnboundedReceiver<WorkerDecision>,
    /// Tells which actor's task ended, and how; during a run none should.
    ended_tx: mpsc::UnboundedSender<(String, String)>,
    ended: mpsc::UnboundedReceiver<(String, String)>,
    /// What the master has seen, while it runs.
    master_seen: Option<watch::Receiver<MasterSeen>>,
    /// How many `Registered` decisions [`System::wait_registered`] took.
    registered: usize,
    /// How many masters were started, one after another.
    masters_started: usize,
}

impl System {
    /// A system whose master discovers tasks by `discovery`.
    pub fn new(layout: Layout, discovery: TaskDiscovery) -> System {
        let (worker_decisions_tx, worker_decisions) = mpsc::unbounded_channel();
        let (ended_tx, ended) = mpsc::unbounded_channel();
        System {
            layout,
            discovery,
            master: None,
            workers: Vec::new(),
            worker_decisions_tx,
            worker_decisions,
            ended_tx,
            ended,
            master_seen: None,
            registered: 0,
            masters_started: 0,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn workers_started(&self) -> usize {
        self.workers.len()
    }

    /// Runs `future` as a task that says when it ends, and how.
    fn spawn<T, E>(
        &self,
        actor: &str,
        future: impl Future<Output = Result<T, E>> + Send + 'static,
    ) -> JoinHandle<Result<(), E>>
    where
        T: Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let ended = self.ended_tx.clone();
        let actor = actor.to_owned();
        tokio::spawn(async move {
            let outcome = future.await.map(|_| ());
            let description = match &outcome {
                Ok(()) => "it returned".to_owned(),
                Err(error) => error.to_string(),
            };
            // Nobody listens once the system is being stopped.
            let _ = ended.send((actor, description));
            outcome
        })
    }

    /// Claims the master node on `zk` and runs the master there.
    pub async fn start_master<C: Coordinator>(
        &mut self,
        zk: C,
        events: EventStream,
    ) -> Result<(), SystemError> {
        assert!(self.master.is_none(), "one master per system");
        let path = self.layout.master();
        let epoch = match claim_master(&zk, &self.layout).await {
            Ok(Some(epoch)) => epoch,
            Ok(None) => return Err(SystemError::MasterTaken { path }),
            Err(error) => return Err(SystemError::Claim { path, error }),
        };
        let (seen_tx, seen) = watch::channel(MasterSeen::default());
        self.master_seen = Some(seen);
        let (stop, stopped) = oneshot::channel::<()>();
        let master = Master::new(zk, events, self.layout.clone(), epoch)
            .with_discovery(self.discovery)
            .with_observer(count_seen(seen_tx));
        // The first master is "the master", one that takes over from it
        // "the new master": a failure names the one that failed.
        self.masters_started += 1;
        let name = match self.masters_started {
            1 => "master",
            _ => "new master",
        }
        .to_owned();
        let task = self.spawn(
            &name,
            master.run_until(async move {
                let _ = stopped.await;
            }),
        );
        self.master = Some(Actor { name, stop, task });
        Ok(())
    }

    /// Stops the master and waits for it, as [`System::stop`] does, so that
    /// another can be started; its session stays open (the caller closes
    /// it, which hands the master node over). Returns its failure, if it
    /// failed.
    pub async fn stop_master(&mut self) -> Result<(), SystemError> {
        let actor = self.master.take().expect("the master was started");
        self.master_seen = None;
        let _ = actor.stop.send(());
        let stopped = match actor.task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(SystemError::Master(error)),
            Err(_) => Err(SystemError::Panicked {
                actor: actor.name.clone(),
            }),
        };
        // Its ending was reported as it stopped: asked for, it is no
        // failure for a waiter to hear of. Other actors' endings stay.
        let mut others = Vec::new();
        while let Ok(ended) = self.ended.try_recv() {
            if ended.0 != actor.name {
                others.push(ended);
            }
        }
        for ended in others {
            self.ended_tx
                .send(ended)
                .expect("the system holds the receiver");
        }
        stopped
    }

    /// Runs a worker with [`NoopHandler`] on `zk`.
    pub fn start_worker<C: Coordinator>(&mut self, zk: C, events: EventStream) {
        let name = format!("worker {}", self.workers.len() + 1);
        let (stop, stopped) = oneshot::channel::<()>();
        let worker = Worker::new(zk, events, self.layout.clone(), NoopHandler)
            .with_observer(self.worker_decisions_tx.clone());
        let task = self.spawn(
            &name,
            worker.run_until(async move {
                let _ = stopped.await;
            }),
        );
        self.workers.push(Actor { name, stop, task });
    }

    /// The next decision of any worker. Fails if an actor stops meanwhile
    /// (its session ended, or a request failed): a run waiting for its
    /// tasks would otherwise wait forever.
    pub async fn worker_decision(&mut self) -> Result<WorkerDecision, SystemError> {
        tokio::select! {
            biased;
            decision = self.worker_decisions.recv() => {
                Ok(decision.expect("the system holds a sender of the workers' decisions"))
            }
            ended = self.ended.recv() => {
                let (actor, outcome) = ended.expect("the system holds a sender of endings");
                Err(SystemError::ActorEnded { actor, outcome })
            }
        }
    }

    /// Waits until every worker started so far has registered. Decisions
    /// other than registrations taken meanwhile are dropped: call it before
    /// any task can be assigned.
    pub async fn wait_registered(&mut self) -> Result<(), SystemError> {
        while self.registered < self.workers.len() {
            if let WorkerDecision::Registered { .. } = self.worker_decision().await? {
                self.registered += 1;
            }
        }
        Ok(())
    }

    /// Waits until the master has seen `workers` workers join.
    pub async fn wait_master_sees(&mut self, workers: usize) -> Result<(), SystemError> {
        self.wait_master(|seen| seen.workers_joined >= workers)
            .await
    }

    /// Waits until the master has built its state from the tree.
    pub async fn wait_master_initialised(&mut self) -> Result<(), SystemError> {
        self.wait_master(|seen| seen.initialised).await
    }

    /// Waits until the master has queued `tasks` tasks (in all).
    pub async fn wait_master_queued(&mut self, tasks: u64) -> Result<(), SystemError> {
        self.wait_master(|seen| seen.tasks_queued >= tasks).await
    }

    /// Waits until what the master has seen satisfies `done`, or an actor
    /// ends (the master, say, on a listing it cannot read).
    async fn wait_master(
        &mut self,
        done: impl FnMut(&MasterSeen) -> bool,
    ) -> Result<(), SystemError> {
        let mut master_seen = self.master_seen.clone().expect("the master was started");
        tokio::select! {
            biased;
            seen = master_seen.wait_for(done) => {
                if seen.is_err() {
                    // The master dropped its observer: it stopped, and its
                    // ending says why.
                    let (actor, outcome) = self.ended.recv().await.expect("the system holds a sender");
                    return Err(SystemError::ActorEnded { actor, outcome });
                }
                Ok(())
            }
            ended = self.ended.recv() => {
                let (actor, outcome) = ended.expect("the system holds a sender of endings");
                Err(SystemError::ActorEnded { actor, outcome })
            }
        }
    }

    /// Stops the workers, in the order they started, then the master, and
    /// waits for each. Does not close their sessions. Returns the first
    /// failure.
    pub async fn stop(self) -> Result<(), SystemError> {
        let mut first_failure = None;
        for actor in self.workers {
            let _ = actor.stop.send(());
            let failure = match actor.task.await {
                Ok(Ok(())) => None,
                Ok(Err(error)) => Some(SystemError::Worker {
                    worker: actor.name,
                    error,
                }),
                Err(_) => Some(SystemError::Panicked { actor: actor.name }),
            };
            first_failure = first_failure.or(failure);
        }
        if let Some(actor) = self.master {
            let _ = actor.stop.send(());
            let failure = match actor.task.await {
                Ok(Ok(())) => None,
                Ok(Err(error)) => Some(SystemError::Master(error)),
                Err(_) => Some(SystemError::Panicked { actor: actor.name }),
            };
            first_failure = first_failure.or(failure);
        }
        first_failure.map_or(Ok(()), Err)
    }
}

/// What the master has seen so far.
#[derive(Debug, Clone, Copy, Default)]
struct MasterSeen {
    initialised: bool,
    workers_joined: usize,
    tasks_queued: u64,
}

/// Counts the workers the master saw join and the tasks it queued, as it
/// decides, and drops every other decision. The watch channel closes when
/// the master drops its observer, which tells a waiter that it stopped.
fn count_seen(seen: watch::Sender<MasterSeen>) -> Observer<MasterDecision> {
    Observer::new(move |decision| match decision {
        MasterDecision::Initialised { .. } => {
            seen.send_modify(|seen| seen.initialised = true);
        }
        MasterDecision::WorkerJoined { .. } => {
            seen.send_modify(|seen| seen.workers_joined += 1);
        }
        MasterDecision::TaskQueued { .. } => {
            seen.send_modify(|seen| seen.tasks_queued += 1);
        }
        _ => {}
    })
}
