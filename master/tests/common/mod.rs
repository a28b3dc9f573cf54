//! What the end-to-end tests share: the simulation runtime (`run_sim`), a
//! deterministic task handler, helpers that start a master and workers (on
//! a simulated ZooKeeper or on any session) and collect their decisions,
//! and the checks every end-to-end run must pass (`checks`).

#![allow(dead_code)]

pub mod checks;
pub mod ground;

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use zkdist_coord::{Client, Coordinator, EventStream, Layout, TaskPayload, TaskResult, WorkerId};
use zkdist_master::{Master, MasterDecision, MasterError, MasterState, claim_master};
use zkdist_sim::{SimConfig, SimZk};
use zkdist_worker::{TaskError, TaskHandler, Worker, WorkerDecision, WorkerError};

/// Runs `body` on a fresh simulation runtime seeded with `seed`: tokio's
/// current-thread runtime with its clock paused, or madsim's under
/// `--cfg madsim`. Simulated time advances only when every task waits, so
/// runs are fast and repeatable.
pub fn run_sim<F: std::future::Future>(seed: u64, body: F) -> F::Output {
    zkdist_sim::runtime::block_on(seed, body)
}

/// Sleeps `work_us` of simulated time, then answers `done <n>` for kind
/// `echo` and fails for kind `fail`.
pub struct TestHandler;

impl TaskHandler for TestHandler {
    async fn run(&self, task: &[u8]) -> Result<Vec<u8>, TaskError> {
        let payload = TaskPayload::decode(task).map_err(|error| TaskError::from_display(&error))?;
        let field = |name: &str| {
            payload
                .fields
                .get(name)
                .and_then(|v| v.as_u64())
                .ok_or_else(|| TaskError::new(format!("payload has no numeric {name:?}")))
        };
        let n = field("n")?;
        tokio::time::sleep(Duration::from_micros(field("work_us")?)).await;
        match payload.kind.as_str() {
            "echo" => Ok(format!("done {n}").into_bytes()),
            "fail" => Err(TaskError::new(format!("task {n} fails on purpose"))),
            "panic" => panic!("task {n} panics on purpose"),
            other => Err(TaskError::new(format!("unknown kind {other:?}"))),
        }
    }
}

pub fn payload(kind: &str, n: u64, work_us: u64) -> Vec<u8> {
    TaskPayload::new(kind)
        .with("n", n)
        .with("work_us", work_us)
        .encode()
        .expect("kind is not empty")
}

/// The result `TestHandler` gives a payload built by [`payload`].
pub fn expected_result(kind: &str, n: u64) -> TaskResult {
    match kind {
        "echo" => TaskResult::Success {
            output: format!("done {n}").into_bytes(),
        },
        "fail" => TaskResult::failure(format!("task {n} fails on purpose")),
        "panic" => TaskResult::failure(format!(
            "the task handler panicked: task {n} panics on purpose"
        )),
        other => panic!("no expectation for kind {other}"),
    }
}

pub async fn client(sim: &SimZk, layout: &Layout) -> Client<zkdist_sim::SimSession> {
    let (zk, events) = sim.connect("client").await.expect("client connects");
    Client::new(zk, events, layout.clone())
}

/// A running actor, its stop signal, and the decisions it sends.
pub struct Running<T, D> {
    stop: oneshot::Sender<()>,
    handle: JoinHandle<T>,
    decisions: mpsc::UnboundedReceiver<D>,
}

impl<T, D> Running<T, D> {
    /// Asks the actor to stop, waits for it, and returns its outcome and
    /// every decision it took.
    pub async fn stop(self) -> (T, Vec<D>) {
        let _ = self.stop.send(());
        let outcome = self.handle.await.expect("the actor does not panic");
        (outcome, drain(self.decisions))
    }

    /// Waits for the actor to end on its own (it is not asked to stop), and
    /// returns its outcome and every decision it took.
    pub async fn outcome(self) -> (T, Vec<D>) {
        let outcome = self.handle.await.expect("the actor does not panic");
        drop(self.stop);
        (outcome, drain(self.decisions))
    }

    /// Ends the actor at once, as a process that dies: none of its code
    /// runs again.
    pub fn abort(&self) {
        self.handle.abort();
    }

    /// Waits for the actor's next decision (`None` once it stopped).
    pub async fn next_decision(&mut self) -> Option<D> {
        self.decisions.recv().await
    }

    /// Decisions taken so far.
    pub fn decisions_so_far(&mut self) -> Vec<D> {
        let mut taken = Vec::new();
        while let Ok(decision) = self.decisions.try_recv() {
            taken.push(decision);
        }
        taken
    }
}

fn drain<D>(mut decisions: mpsc::UnboundedReceiver<D>) -> Vec<D> {
    let mut taken = Vec::new();
    while let Ok(decision) = decisions.try_recv() {
        taken.push(decision);
    }
    taken
}

pub type RunningMaster = Running<Result<MasterState, MasterError>, MasterDecision>;
pub type RunningWorker = Running<Result<WorkerId, WorkerError>, WorkerDecision>;

/// Connects a session named `name`, claims the master node, and runs the
/// master.
pub async fn start_master(sim: &SimZk, name: &str, layout: &Layout) -> RunningMaster {
    let (zk, events) = sim.connect(name).await.expect("master connects");
    spawn_master(zk, events, layout).await
}

/// Claims the master node on a connected session (of any backend) and
/// runs the master.
pub async fn spawn_master<C: Coordinator>(
    zk: C,
    events: EventStream,
    layout: &Layout,
) -> RunningMaster {
    let epoch = claim_master(&zk, layout)
        .await
        .expect("claim")
        .expect("nobody else leads");
    let (decisions_tx, decisions) = mpsc::unbounded_channel();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let master = Master::new(zk, events, layout.clone(), epoch).with_observer(decisions_tx);
    let handle = tokio::spawn(master.run_until(async move {
        let _ = stop_rx.await;
    }));
    Running {
        stop,
        handle,
        decisions,
    }
}

pub async fn start_worker<H: TaskHandler>(
    sim: &SimZk,
    name: &str,
    layout: &Layout,
    handler: H,
) -> RunningWorker {
    let (zk, events) = sim.connect(name).await.expect("worker connects");
    spawn_worker(zk, events, layout, handler)
}

/// Runs a worker on a connected session (of any backend).
pub fn spawn_worker<C: Coordinator, H: TaskHandler>(
    zk: C,
    events: EventStream,
    layout: &Layout,
    handler: H,
) -> RunningWorker {
    let (decisions_tx, decisions) = mpsc::unbounded_channel();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let worker = Worker::new(zk, events, layout.clone(), handler).with_observer(decisions_tx);
    let handle = tokio::spawn(worker.run_until(async move {
        let _ = stop_rx.await;
    }));
    Running {
        stop,
        handle,
        decisions,
    }
}

pub fn sim_config(seed: u64, latency: zkdist_sim::Latency) -> SimConfig {
    SimConfig {
        seed,
        latency,
        ..SimConfig::default()
    }
}
