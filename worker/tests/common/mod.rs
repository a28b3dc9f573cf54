//! What the worker's simulator tests share: the runtime, task handlers, a
//! simulation with a client and a session playing the master, and a worker
//! running on it.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;
use zkdist_coord::{
    Client, Coordinator, CreateMode, Layout, MAX_DATA_BYTES, MAX_RESULT_OUTPUT_BYTES, TaskId,
    TaskPayload, TaskResult, WorkerId,
};
use zkdist_sim::{Latency, SimConfig, SimSession, SimZk};
use zkdist_worker::{TaskError, TaskHandler, Worker, WorkerDecision, WorkerError};

/// More simulated time than any step here needs.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// The seed of every simulation here (and of madsim's scheduler under
/// `--cfg madsim`), unless a test sweeps seeds.
pub const SEED: u64 = 11;

/// Runs `body` on a fresh simulation runtime: tokio's current-thread runtime
/// with its clock paused, or madsim's under `--cfg madsim`.
pub fn run_sim<F: std::future::Future>(body: F) -> F::Output {
    run_seeded(SEED, body)
}

pub fn run_seeded<F: std::future::Future>(seed: u64, body: F) -> F::Output {
    zkdist_sim::runtime::block_on(seed, body)
}

/// `echo` returns its `text`; `fail` fails; `panic` panics; `big` returns
/// one byte more than a result can hold, `largest` exactly what it can
/// hold; `long-failure` fails with a message longer than a node; `slow`
/// echoes after 5 s.
pub struct KindHandler;

impl TaskHandler for KindHandler {
    async fn run(&self, task: &[u8]) -> Result<Vec<u8>, TaskError> {
        let payload = TaskPayload::decode(task).map_err(|error| TaskError::from_display(&error))?;
        let text = text_of(&payload);
        match payload.kind.as_str() {
            "echo" => Ok(text.into_bytes()),
            "slow" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(text.into_bytes())
            }
            "fail" => Err(TaskError::new(format!("refused: {text}"))),
            "panic" => panic!("handler bug on {text}"),
            "big" => Ok(vec![b'x'; MAX_RESULT_OUTPUT_BYTES + 1]),
            "largest" => Ok(vec![b'x'; MAX_RESULT_OUTPUT_BYTES]),
            "long-failure" => Err(TaskError::new("e".repeat(MAX_DATA_BYTES))),
            other => Err(TaskError::new(format!("unknown kind {other:?}"))),
        }
    }
}

fn text_of(payload: &TaskPayload) -> String {
    payload.fields["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Echoes the payload's `text`, but only once the test opens the gate: one
/// permit per task. A handler whose future is dropped takes no permit.
#[derive(Clone)]
pub struct GatedHandler {
    pub gate: Arc<Semaphore>,
    /// Signalled each time a run starts.
    started: Arc<Notify>,
    /// How many runs started.
    runs: Arc<AtomicUsize>,
}

impl GatedHandler {
    pub fn closed() -> GatedHandler {
        GatedHandler {
            gate: Arc::new(Semaphore::new(0)),
            started: Arc::new(Notify::new()),
            runs: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// How many runs started, finished or not.
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// Returns once a run has started (at once if one started since the
    /// last call).
    pub async fn wait_started(&self) {
        tokio::time::timeout(STEP_TIMEOUT, self.started.notified())
            .await
            .expect("the handler starts in time");
    }

    /// Lets one waiting (or the next) task finish.
    pub fn open_once(&self) {
        self.gate.add_permits(1);
    }
}

impl TaskHandler for GatedHandler {
    async fn run(&self, task: &[u8]) -> Result<Vec<u8>, TaskError> {
        self.started.notify_one();
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.gate
            .acquire()
            .await
            .expect("the gate is never closed")
            .forget();
        let payload = TaskPayload::decode(task).map_err(|error| TaskError::from_display(&error))?;
        Ok(text_of(&payload).into_bytes())
    }
}

pub fn task_payload(kind: &str, text: &str) -> Vec<u8> {
    TaskPayload::new(kind).with("text", text).encode().unwrap()
}

pub struct Setup {
    pub sim: SimZk,
    pub layout: Layout,
    /// The test's own session, playing the master.
    pub master: SimSession,
    pub client: Client<SimSession>,
}

pub async fn setup(latency: Latency) -> Setup {
    setup_seeded(SEED, latency).await
}

pub async fn setup_seeded(seed: u64, latency: Latency) -> Setup {
    let sim = SimZk::start(SimConfig {
        seed,
        latency,
        ..SimConfig::default()
    });
    let layout = Layout::default();
    let (master, _master_events) = sim.connect("fake-master").await.unwrap();
    layout.ensure_layout(&master).await.unwrap();
    let (client_zk, client_events) = sim.connect("client").await.unwrap();
    let client = Client::new(client_zk, client_events, layout.clone());
    Setup {
        sim,
        layout,
        master,
        client,
    }
}

pub struct RunningWorker {
    pub session: SimSession,
    pub stop: oneshot::Sender<()>,
    pub handle: JoinHandle<Result<WorkerId, WorkerError>>,
    pub decisions: mpsc::UnboundedReceiver<WorkerDecision>,
}

impl RunningWorker {
    pub async fn start(setup: &Setup) -> (RunningWorker, WorkerId) {
        RunningWorker::start_with(setup, KindHandler).await
    }

    pub async fn start_with(setup: &Setup, handler: impl TaskHandler) -> (RunningWorker, WorkerId) {
        let (session, events) = setup.sim.connect("worker").await.unwrap();
        let (decisions_tx, decisions) = mpsc::unbounded_channel();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let worker = Worker::new(session.clone(), events, setup.layout.clone(), handler)
            .with_observer(decisions_tx);
        let handle = tokio::spawn(worker.run_until(async move {
            let _ = stop_rx.await;
        }));
        let mut running = RunningWorker {
            session,
            stop,
            handle,
            decisions,
        };
        let id = match running.next_decision().await {
            WorkerDecision::Registered { worker } => worker,
            other => panic!("first decision {other}"),
        };
        (running, id)
    }

    pub async fn next_decision(&mut self) -> WorkerDecision {
        next_decision(&mut self.decisions).await
    }

    /// Every decision already made, without waiting.
    pub fn drain(&mut self) -> Vec<WorkerDecision> {
        std::iter::from_fn(|| self.decisions.try_recv().ok()).collect()
    }
}

pub async fn next_decision(
    decisions: &mut mpsc::UnboundedReceiver<WorkerDecision>,
) -> WorkerDecision {
    tokio::time::timeout(STEP_TIMEOUT, decisions.recv())
        .await
        .expect("a decision in time")
        .expect("the worker is running")
}

/// Creates `worker`'s assignment naming `data`, as the master would.
pub async fn assign(setup: &Setup, worker: &WorkerId, data: &str) {
    setup
        .master
        .create(
            &setup.layout.assignment(worker),
            data.as_bytes(),
            CreateMode::Persistent,
        )
        .await
        .unwrap();
}

/// The decisions of a worker told to stop while it held `task`, which then
/// gave its session up: the task abandoned, written or not.
pub fn gave_up_after_stop(id: &WorkerId, task: &TaskId) -> [WorkerDecision; 3] {
    [
        WorkerDecision::StopRequested { worker: id.clone() },
        WorkerDecision::TaskAbandoned {
            worker: id.clone(),
            task: task.clone(),
        },
        WorkerDecision::SessionLost { worker: id.clone() },
    ]
}

/// Starts a worker with a gated handler, submits an `echo` task and
/// assigns it; returns once the worker has started it.
pub async fn worker_holding_a_task(
    setup: &Setup,
) -> (RunningWorker, WorkerId, TaskId, GatedHandler) {
    let handler = GatedHandler::closed();
    let (mut worker, id) = RunningWorker::start_with(setup, handler.clone()).await;
    let task = setup
        .client
        .submit(&task_payload("echo", "done"))
        .await
        .unwrap();
    assign(setup, &id, task.as_str()).await;
    assert_eq!(
        worker.next_decision().await,
        WorkerDecision::TaskStarted {
            worker: id.clone(),
            task: task.clone()
        }
    );
    handler.wait_started().await;
    (worker, id, task, handler)
}

/// Assigns `task` to `worker` as the master would, and waits until the
/// worker has deleted the assignment.
pub async fn assign_and_wait(setup: &Setup, worker: &WorkerId, data: &str) {
    assign(setup, worker, data).await;
    let path = setup.layout.assignment(worker);
    let gone = setup.sim.run_until(move |tree| !tree.exists(&path));
    tokio::time::timeout(STEP_TIMEOUT, gone)
        .await
        .expect("the worker releases its assignment");
}

/// Waits until `predicate` holds on the tree, failing the test if it does
/// not within [`STEP_TIMEOUT`].
pub async fn until_tree(
    sim: &SimZk,
    what: &str,
    predicate: impl FnMut(&zkdist_sim::Tree) -> bool + Send + 'static,
) {
    tokio::time::timeout(STEP_TIMEOUT, sim.run_until(predicate))
        .await
        .unwrap_or_else(|_| panic!("{what} within the step timeout"));
}

/// How many trace lines contain `needle`.
pub fn count_lines(trace: &[String], needle: &str) -> usize {
    trace.iter().filter(|line| line.contains(needle)).count()
}

/// How many trace lines record `needle` applied by the server (a
/// transaction, so the line has a zxid).
pub fn count_applied(trace: &[String], needle: &str) -> usize {
    trace
        .iter()
        .filter(|line| line.contains("zxid=") && line.contains(needle))
        .count()
}

/// Deletes `path` and everything under it, children first, as an operator
/// removing a deployment's root does (`deleteall`).
pub fn delete_tree<'a>(
    zk: &'a SimSession,
    path: &'a str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + 'a>> {
    Box::pin(async move {
        let (children, _) = zk
            .get_children(path, zkdist_coord::Watch::No)
            .await
            .unwrap();
        for child in children {
            delete_tree(zk, &zkdist_coord::path::join(path, &child)).await;
        }
        zk.delete(path, None).await.unwrap();
    })
}

/// Deletes the deployment's root and makes it anew under a worker `id`
/// that lives on, then starts a successor with a closed gated handler:
/// the ids restart with the root, so it takes `id` (checked). Submits a
/// task `late`, assigns it to the successor and waits for it to start.
/// Returns the successor, its handler and the task.
pub async fn remake_root_with_successor(
    setup: &Setup,
    id: &WorkerId,
) -> (RunningWorker, GatedHandler, TaskId) {
    delete_tree(&setup.master, setup.layout.root()).await;
    setup.layout.ensure_layout(&setup.master).await.unwrap();
    let handler = GatedHandler::closed();
    let (successor, successor_id) = RunningWorker::start_with(setup, handler.clone()).await;
    assert_eq!(&successor_id, id, "the ids restarted with the root");
    let task = setup
        .client
        .submit(&task_payload("echo", "late"))
        .await
        .unwrap();
    assign(setup, id, task.as_str()).await;
    handler.wait_started().await;
    (successor, handler, task)
}

/// Lets the successor of [`remake_root_with_successor`] finish its task,
/// and checks that the result is its own and that it ran the task once.
pub async fn successor_finishes(setup: &mut Setup, handler: &GatedHandler, task: &TaskId) {
    handler.open_once();
    let result = tokio::time::timeout(STEP_TIMEOUT, setup.client.wait(task))
        .await
        .expect("the successor finishes its task")
        .unwrap();
    assert_eq!(
        result,
        TaskResult::Success {
            output: b"late".to_vec()
        }
    );
    assert_eq!(handler.runs(), 1);
}

/// Checks that no result of `task` was written.
pub async fn assert_no_result(setup: &Setup, task: &TaskId) {
    let result_path = setup.layout.result(task);
    assert!(
        !setup
            .sim
            .inspect(move |tree| tree.exists(&result_path))
            .await,
        "no result was written"
    );
}
