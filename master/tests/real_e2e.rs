//! The system end to end on a real ZooKeeper, through the real backend: one
//! master, four workers and 200 tasks, each actor on a session of its own in
//! this process, under a fresh root. The run must pass the same checks as
//! the simulator's seeds (`common::checks`), and the server's tree must
//! agree at the end. Then the bad input a real deployment meets: a root
//! that does not exist, one that cannot be created, payloads over the size
//! limit, and tasks that are not valid for their kind. And a worker cut
//! off from the ensemble in the middle of a task, which must stop it
//! before another worker can be given it, and one told to stop while cut
//! off, which must return within its stop's bound.
//!
//! `ZKDIST_TEST_ZK` names the server (a connect string). Without it every
//! test is reported as ignored, never as passed.

mod common;
// The loopback proxy the library's real-server tests cut links with.
#[allow(dead_code)]
#[path = "../../coord/tests/common/proxy.rs"]
mod proxy;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use libtest_mimic::{Arguments, Trial};
use tokio::time::Instant;
use zkdist_coord::zk::testing::{self, server_trial};
use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{
    Client, ClientError, Coordinator, CreateMode, EventStream, Layout, MAX_DATA_BYTES, TaskId,
    TaskPayload, TaskResult, Watch, WorkerId, ZkError,
};
use zkdist_master::{MasterDecision, MasterError};
use zkdist_worker::{TaskError, TaskHandler, WorkerDecision, WorkerError};

use common::checks::{RunLog, check_run};
use common::*;

const WORKERS: usize = 4;
const TASKS: u64 = 200;
/// Tasks queued, and one worker registered, before the master starts: the
/// master must adopt them when it initialises.
const TASKS_BEFORE_MASTER: u64 = 20;
/// Every this many tasks, one fails on purpose.
const FAIL_EVERY: u64 = 9;
/// The longest a test waits for something that must happen: a hang guard,
/// not a speed check.
const HANG_GUARD: Duration = Duration::from_secs(120);
/// The prefix of every root these tests create.
const ROOT_PREFIX: &str = "zkdist-e2e";

fn main() {
    let mut args = Arguments::from_args();
    // One test at a time: each runs several sessions against the same
    // server, and the figures the end-to-end test prints mean more alone.
    args.test_threads = Some(1);
    let trials: Vec<Trial> = vec![
        server_trial("one_master_four_workers_two_hundred_tasks", |connect| {
            testing::runtime().block_on(one_master_four_workers_two_hundred_tasks(connect))
        }),
        server_trial(
            "a_root_that_does_not_exist_is_created_on_first_use",
            |connect| {
                testing::runtime()
                    .block_on(a_root_that_does_not_exist_is_created_on_first_use(connect))
            },
        ),
        server_trial(
            "a_root_that_cannot_be_created_is_a_clear_error",
            |connect| {
                testing::runtime().block_on(a_root_that_cannot_be_created_is_a_clear_error(connect))
            },
        ),
        server_trial(
            "a_payload_over_the_limit_is_refused_at_submit_and_the_largest_allowed_runs",
            |connect| {
                testing::runtime().block_on(
                    a_payload_over_the_limit_is_refused_at_submit_and_the_largest_allowed_runs(
                        connect,
                    ),
                )
            },
        ),
        server_trial(
            "bad_tasks_get_failure_results_and_the_worker_goes_on",
            |connect| {
                testing::runtime().block_on(bad_tasks_get_failure_results_and_the_worker_goes_on(
                    connect,
                ))
            },
        ),
        server_trial("status_counts_a_queue_too_long_to_list", |connect| {
            testing::runtime().block_on(status_counts_a_queue_too_long_to_list(connect))
        }),
        server_trial(
            "a_worker_cut_off_stops_its_task_before_another_worker_runs_it",
            |connect| {
                testing::runtime().block_on(
                    a_worker_cut_off_stops_its_task_before_another_worker_runs_it(connect),
                )
            },
        ),
        server_trial(
            "a_worker_role_told_to_stop_on_a_silent_link_returns_and_its_session_expires",
            |connect| {
                testing::runtime().block_on(
                    a_worker_role_told_to_stop_on_a_silent_link_returns_and_its_session_expires(
                        connect,
                    ),
                )
            },
        ),
    ];
    testing::note_if_ignored();
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(connect) = testing::test_zk() {
        testing::runtime().block_on(testing::delete_run_root_if_empty(&testing::config(
            &connect,
        )));
    }
    conclusion.exit()
}

// ---------------------------------------------------------------------------
// Helpers.

async fn connect(config: &ZkConfig) -> (ZkSession, EventStream) {
    ZkSession::connect(config)
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", config.connect))
}

async fn real_client(config: &ZkConfig, layout: &Layout) -> Client<ZkSession> {
    let (zk, events) = connect(config).await;
    Client::new(zk, events, layout.clone())
}

/// Starts a master on a session of its own; returns it with a handle on
/// the session, to close it at the end.
async fn real_master(config: &ZkConfig, layout: &Layout) -> (RunningMaster, ZkSession) {
    let (zk, events) = connect(config).await;
    (spawn_master(zk.clone(), events, layout).await, zk)
}

async fn real_worker(config: &ZkConfig, layout: &Layout) -> (RunningWorker, ZkSession) {
    let (zk, events) = connect(config).await;
    (spawn_worker(zk.clone(), events, layout, TestHandler), zk)
}

/// Waits for `task`'s result, failing the test (not hanging) if it never
/// comes.
async fn wait_result(client: &mut Client<ZkSession>, task: &TaskId) -> TaskResult {
    tokio::time::timeout(HANG_GUARD, client.wait(task))
        .await
        .unwrap_or_else(|_| panic!("no result for {task} within {HANG_GUARD:?}"))
        .unwrap_or_else(|e| panic!("wait for {task}: {e}"))
}

/// Takes `running`'s decisions into `log` until `done(log)` holds.
async fn collect_until<T, D>(
    running: &mut Running<T, D>,
    log: &mut Vec<D>,
    what: &str,
    done: impl Fn(&[D]) -> bool,
) {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        log.extend(running.decisions_so_far());
        if done(log) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {HANG_GUARD:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn children(zk: &ZkSession, path: &str) -> Vec<String> {
    let (mut children, _) = zk
        .get_children(path, Watch::No)
        .await
        .unwrap_or_else(|e| panic!("list {path}: {e}"));
    children.sort();
    children
}

/// Deletes the root and checks that nothing of it is left.
async fn delete_root(config: &ZkConfig, root: &str) {
    testing::delete_tree(config, root).await;
    let (zk, _events) = connect(config).await;
    assert_eq!(
        zk.exists(root, Watch::No).await.unwrap(),
        None,
        "{root} is cleaned up"
    );
    zk.close().await.unwrap();
}

fn work_us(n: u64) -> u64 {
    // A little real work, different per task, so that workers interleave.
    (n * 7_919) % 2_000
}

// ---------------------------------------------------------------------------
// End to end.

async fn one_master_four_workers_two_hundred_tasks(connect_string: String) {
    let config = testing::config(&connect_string);
    let root = testing::fresh_case_root(&config, ROOT_PREFIX, "two-hundred-tasks").await;
    let layout = Layout::new(&root).unwrap();
    let mut client = real_client(&config, &layout).await;

    let mut submitted = Vec::new();
    let submit = async |client: &Client<ZkSession>, n: u64| {
        let kind = if n % FAIL_EVERY == FAIL_EVERY - 1 {
            "fail"
        } else {
            "echo"
        };
        let task = client
            .submit(&payload(kind, n, work_us(n)))
            .await
            .unwrap_or_else(|e| panic!("submit task {n}: {e}"));
        (task, expected_result(kind, n))
    };
    for n in 0..TASKS_BEFORE_MASTER {
        submitted.push(submit(&client, n).await);
    }
    let mut workers = Vec::new();
    let mut sessions = Vec::new();
    let mut worker_decisions: Vec<Vec<WorkerDecision>> = vec![Vec::new(); WORKERS];
    let (mut first, first_session) = real_worker(&config, &layout).await;
    collect_until(
        &mut first,
        &mut worker_decisions[0],
        "the first worker registers",
        |log| {
            log.iter()
                .any(|d| matches!(d, WorkerDecision::Registered { .. }))
        },
    )
    .await;
    workers.push(first);
    sessions.push(first_session);

    let started = Instant::now();
    let (mut master, master_session) = real_master(&config, &layout).await;
    // The master adopts the worker and the tasks it finds when it
    // initialises.
    let mut master_decisions = Vec::new();
    collect_until(
        &mut master,
        &mut master_decisions,
        "the master initialises",
        |log| {
            log.iter()
                .any(|d| matches!(d, MasterDecision::Initialised { .. }))
        },
    )
    .await;
    assert_eq!(
        master_decisions
            .iter()
            .find(|d| matches!(d, MasterDecision::Initialised { .. })),
        Some(&MasterDecision::Initialised {
            workers: 1,
            pending_tasks: TASKS_BEFORE_MASTER as usize,
            busy_workers: 0,
        })
    );
    for _ in 1..WORKERS {
        let (worker, session) = real_worker(&config, &layout).await;
        workers.push(worker);
        sessions.push(session);
    }
    for n in TASKS_BEFORE_MASTER..TASKS {
        submitted.push(submit(&client, n).await);
    }
    let mut results = Vec::new();
    for (task, _) in &submitted {
        results.push(wait_result(&mut client, task).await);
    }
    let elapsed = started.elapsed();
    eprintln!(
        "real_e2e: {TASKS} tasks through {WORKERS} workers on {connect_string}: \
         master start to last result {:.2} s, {:.0} tasks/s",
        elapsed.as_secs_f64(),
        TASKS as f64 / elapsed.as_secs_f64()
    );

    // Quiescence: the master has seen every worker go idle.
    collect_until(
        &mut master,
        &mut master_decisions,
        "the master sees every task finished",
        |log| {
            log.iter()
                .filter(|d| matches!(d, MasterDecision::WorkerIdle { .. }))
                .count()
                == TASKS as usize
        },
    )
    .await;

    // The server's tree agrees: the submitted tasks and nothing else, each
    // with exactly one child, its result; no assignment left; every worker
    // registered.
    let zk = client.session();
    // On an ensemble the client's session may read from a follower that
    // has not applied the workers' last writes yet: catch up first.
    zk.sync(layout.root())
        .await
        .expect("sync before reading the tree");
    // Task names carry a submission token before their sequence number, so
    // they are compared as sets: FIFO order is the sequence, not the name.
    let mut task_names: Vec<String> = submitted.iter().map(|(t, _)| t.to_string()).collect();
    task_names.sort();
    assert_eq!(children(zk, &layout.tasks_dir()).await, task_names);
    for (task, expected) in &submitted {
        assert_eq!(
            children(zk, &layout.task(task)).await,
            ["result"],
            "{task} has one result"
        );
        let (data, stat) = zk.get_data(&layout.result(task), Watch::No).await.unwrap();
        assert_eq!(&TaskResult::decode(&data).unwrap(), expected, "{task}");
        assert_eq!(stat.version, 0, "{task}'s result was written once");
    }
    assert_eq!(
        children(zk, &layout.assignments_dir()).await,
        Vec::<String>::new()
    );
    assert_eq!(children(zk, &layout.workers_dir()).await.len(), WORKERS);

    let (final_state, rest) = master.stop().await;
    master_decisions.extend(rest);
    let final_state = final_state.expect("the master ran until stopped");
    for (worker, log) in workers.into_iter().zip(&mut worker_decisions) {
        let (outcome, rest) = worker.stop().await;
        outcome.expect("the worker ran until stopped");
        log.extend(rest);
    }
    let all_worker_decisions: Vec<WorkerDecision> =
        worker_decisions.iter().flatten().cloned().collect();
    let run = RunLog {
        submitted: &submitted,
        results: &results,
        master_decisions: &master_decisions,
        worker_decisions: &all_worker_decisions,
        final_state: &final_state,
        workers: WORKERS,
    };
    if let Err(what) = check_run(&run) {
        panic!("real server {connect_string}: {what}");
    }
    // How the work was spread (printed, not checked: it depends on timing).
    for (index, log) in worker_decisions.iter().enumerate() {
        let ran = log
            .iter()
            .filter(|d| matches!(d, WorkerDecision::ResultWritten { .. }))
            .count();
        eprintln!("real_e2e: worker {index} ran {ran} tasks");
    }

    // Stopped workers deregister; closed sessions take their ephemerals
    // (the master node, the worker ids) with them. The workers' deletes are
    // committed, but this session's server may not have applied them yet.
    zk.sync(layout.root())
        .await
        .expect("sync before reading the workers");
    assert_eq!(
        children(zk, &layout.workers_dir()).await,
        Vec::<String>::new()
    );
    master_session.close().await.unwrap();
    for session in sessions {
        session.close().await.unwrap();
    }
    assert_eq!(zk.exists(&layout.master(), Watch::No).await.unwrap(), None);
    assert_eq!(children(zk, &layout.ids_dir()).await, Vec::<String>::new());
    client.session().close().await.unwrap();
    delete_root(&config, &root).await;
}

// ---------------------------------------------------------------------------
// Bad input.

async fn a_root_that_does_not_exist_is_created_on_first_use(connect_string: String) {
    let config = testing::config(&connect_string);
    let parent = testing::fresh_case_root(&config, ROOT_PREFIX, "missing-root").await;
    let root = format!("{parent}/not/there/yet");
    let layout = Layout::new(&root).unwrap();
    let mut client = real_client(&config, &layout).await;
    let zk = client.session().clone();
    assert_eq!(
        zk.exists(&format!("{parent}/not"), Watch::No)
            .await
            .unwrap(),
        None
    );

    // Reading the status of a root nobody used is a clear error naming it,
    // and creates nothing.
    match client.status().await {
        Err(error @ ClientError::NoLayout { .. }) => {
            assert!(error.to_string().contains(&root), "{error}");
        }
        other => panic!("status of a missing root gave {other:?}"),
    }
    assert_eq!(
        zk.exists(&format!("{parent}/not"), Watch::No)
            .await
            .unwrap(),
        None
    );

    // The first submit creates the root, its missing parents and the four
    // directories.
    let task = client.submit(&payload("echo", 1, 0)).await.unwrap();
    for dir in [
        layout.root().to_owned(),
        layout.workers_dir(),
        layout.tasks_dir(),
        layout.assignments_dir(),
        layout.ids_dir(),
    ] {
        assert!(
            zk.exists(&dir, Watch::No).await.unwrap().is_some(),
            "{dir} was created"
        );
    }
    let (master, master_session) = real_master(&config, &layout).await;
    let (worker, worker_session) = real_worker(&config, &layout).await;
    assert_eq!(
        wait_result(&mut client, &task).await,
        expected_result("echo", 1)
    );
    master.stop().await.0.expect("the master ran until stopped");
    worker.stop().await.0.expect("the worker ran until stopped");
    master_session.close().await.unwrap();
    worker_session.close().await.unwrap();
    zk.close().await.unwrap();
    delete_root(&config, &parent).await;
}

async fn a_root_that_cannot_be_created_is_a_clear_error(connect_string: String) {
    let config = testing::config(&connect_string);
    let parent = testing::fresh_case_root(&config, ROOT_PREFIX, "uncreatable-root").await;
    // Ephemeral nodes cannot have children: nothing can be laid out under
    // this one.
    let ephemeral = format!("{parent}/ephemeral");
    let (owner, _owner_events) = connect(&config).await;
    owner
        .create(&ephemeral, b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    let root = format!("{ephemeral}/zkdist");
    let layout = Layout::new(&root).unwrap();

    let client = real_client(&config, &layout).await;
    let error = client
        .submit(&payload("echo", 1, 0))
        .await
        .expect_err("nothing can be created under an ephemeral node");
    assert!(
        matches!(
            &error,
            ClientError::Zk(ZkError::NoChildrenForEphemerals { path }) if path == &root
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains(&root), "{error}");

    match run_master_unclaimed(&config, &layout).await {
        Err(error @ MasterError::Layout { .. }) => {
            assert!(error.to_string().contains(&root), "{error}");
        }
        other => panic!("a master under {root} gave {other:?}"),
    }
    let (zk, events) = connect(&config).await;
    let worker = zkdist_worker::Worker::new(zk.clone(), events, layout.clone(), TestHandler)
        .run()
        .await;
    match worker {
        Err(error @ WorkerError::Layout { .. }) => {
            assert!(error.to_string().contains(&root), "{error}");
        }
        other => panic!("a worker under {root} gave {other:?}"),
    }
    zk.close().await.unwrap();
    client.session().close().await.unwrap();
    owner.close().await.unwrap();
    delete_root(&config, &parent).await;
}

/// Runs a master without claiming the master node first (the claim itself
/// would fail under a root that cannot be created), to see how it fails.
async fn run_master_unclaimed(
    config: &ZkConfig,
    layout: &Layout,
) -> Result<zkdist_master::MasterState, MasterError> {
    let (zk, events) = connect(config).await;
    let outcome = tokio::time::timeout(
        HANG_GUARD,
        zkdist_master::Master::new(zk.clone(), events, layout.clone(), zkdist_master::Epoch(0))
            .run(),
    )
    .await
    .expect("a master that cannot lay out its tree stops at once");
    zk.close().await.unwrap();
    outcome
}

/// A payload of kind `echo` for task `n`, padded to exactly `len` bytes.
fn padded_payload(n: u64, len: usize) -> Vec<u8> {
    let bare = TaskPayload::new("echo")
        .with("n", n)
        .with("work_us", 0)
        .with("pad", "")
        .encode()
        .unwrap();
    assert!(len >= bare.len());
    let padded = TaskPayload::new("echo")
        .with("n", n)
        .with("work_us", 0)
        .with("pad", "x".repeat(len - bare.len()))
        .encode()
        .unwrap();
    assert_eq!(padded.len(), len);
    padded
}

async fn a_payload_over_the_limit_is_refused_at_submit_and_the_largest_allowed_runs(
    connect_string: String,
) {
    let config = testing::config(&connect_string);
    let root = testing::fresh_case_root(&config, ROOT_PREFIX, "payload-limit").await;
    let layout = Layout::new(&root).unwrap();
    let mut client = real_client(&config, &layout).await;
    let zk = client.session().clone();

    let too_big = padded_payload(1, MAX_DATA_BYTES + 1);
    match client.submit(&too_big).await {
        Err(error @ ClientError::PayloadTooLarge(_)) => {
            let message = error.to_string();
            assert!(
                message.contains(&format!("{MAX_DATA_BYTES}-byte limit")),
                "{message}"
            );
            assert!(
                message.contains(&(MAX_DATA_BYTES + 1).to_string()),
                "{message}"
            );
        }
        other => panic!("an oversized payload gave {other:?}"),
    }
    assert_eq!(
        children(&zk, &root).await,
        Vec::<String>::new(),
        "nothing was sent for the refused payload"
    );

    // The largest payload zkdist allows is one the real server accepts, and
    // a worker can read and run it.
    let largest = padded_payload(2, MAX_DATA_BYTES);
    let task = client.submit(&largest).await.unwrap();
    let (stored, _) = zk.get_data(&layout.task(&task), Watch::No).await.unwrap();
    assert_eq!(stored.len(), MAX_DATA_BYTES);
    let (master, master_session) = real_master(&config, &layout).await;
    let (worker, worker_session) = real_worker(&config, &layout).await;
    assert_eq!(
        wait_result(&mut client, &task).await,
        expected_result("echo", 2)
    );
    master.stop().await.0.expect("the master ran until stopped");
    worker.stop().await.0.expect("the worker ran until stopped");
    master_session.close().await.unwrap();
    worker_session.close().await.unwrap();
    zk.close().await.unwrap();
    delete_root(&config, &root).await;
}

async fn bad_tasks_get_failure_results_and_the_worker_goes_on(connect_string: String) {
    let config = testing::config(&connect_string);
    let root = testing::fresh_case_root(&config, ROOT_PREFIX, "bad-tasks").await;
    let layout = Layout::new(&root).unwrap();
    let mut client = real_client(&config, &layout).await;

    // Not a payload at all: refused at submit, naming what is missing.
    match client.submit(b"not json").await {
        Err(error @ ClientError::InvalidPayload(_)) => {
            assert!(error.to_string().contains("\"kind\""), "{error}");
        }
        other => panic!("a payload that is not JSON gave {other:?}"),
    }

    let (master, master_session) = real_master(&config, &layout).await;
    let (mut worker, worker_session) = real_worker(&config, &layout).await;
    let no_n = TaskPayload::new("echo")
        .with("work_us", 0)
        .encode()
        .unwrap();
    let cases: [(Vec<u8>, TaskResult); 4] = [
        (
            payload("sort", 1, 0),
            TaskResult::failure("unknown kind \"sort\""),
        ),
        (no_n, TaskResult::failure("payload has no numeric \"n\"")),
        (payload("panic", 3, 0), expected_result("panic", 3)),
        (payload("echo", 4, 0), expected_result("echo", 4)),
    ];
    let mut tasks = Vec::new();
    for (payload, expected) in &cases {
        tasks.push((client.submit(payload).await.unwrap(), expected.clone()));
    }
    for (task, expected) in &tasks {
        assert_eq!(&wait_result(&mut client, task).await, expected, "{task}");
    }

    // One worker did all four, and is still registered and idle.
    let mut worker_log = Vec::new();
    collect_until(
        &mut worker,
        &mut worker_log,
        "the worker releases the last task",
        |log| {
            log.iter()
                .filter(|d| matches!(d, WorkerDecision::AssignmentReleased { .. }))
                .count()
                == tasks.len()
        },
    )
    .await;
    let worker_id: WorkerId = match worker_log.first() {
        Some(WorkerDecision::Registered { worker }) => worker.clone(),
        other => panic!("the worker's first decision is {other:?}"),
    };
    let status = client.status().await.unwrap();
    assert_eq!(status.workers, std::slice::from_ref(&worker_id));
    assert_eq!(status.finished_tasks, tasks.len());
    assert_eq!(status.pending_tasks + status.assigned_tasks, 0);
    let (outcome, rest) = worker.stop().await;
    assert_eq!(outcome.expect("the worker never died"), worker_id);
    worker_log.extend(rest);
    let written: Vec<(TaskId, bool)> = worker_log
        .iter()
        .filter_map(|d| match d {
            WorkerDecision::ResultWritten {
                task,
                success,
                worker,
            } => {
                assert_eq!(worker, &worker_id);
                Some((task.clone(), *success))
            }
            _ => None,
        })
        .collect();
    let expected_written: Vec<(TaskId, bool)> = tasks
        .iter()
        .map(|(task, result)| (task.clone(), result.is_success()))
        .collect();
    assert_eq!(written, expected_written);
    let distinct: BTreeSet<&TaskId> = written.iter().map(|(t, _)| t).collect();
    assert_eq!(distinct.len(), tasks.len());

    master.stop().await.0.expect("the master ran until stopped");
    master_session.close().await.unwrap();
    worker_session.close().await.unwrap();
    client.session().close().await.unwrap();
    delete_root(&config, &root).await;
}

// ---------------------------------------------------------------------------
// A worker cut off mid-task.

/// A handler run's start or end (a future dropped half-way ends it too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunEdge {
    Started,
    Ended,
}

/// One run edge of one worker's handler, and when it came.
type NotedEdge = (&'static str, RunEdge, Instant);

/// When each worker's handler runs started and ended, in this process's
/// clock.
#[derive(Clone, Default)]
struct HandlerRuns(Arc<Mutex<Vec<NotedEdge>>>);

impl HandlerRuns {
    fn note(&self, worker: &'static str, edge: RunEdge) {
        self.0.lock().unwrap().push((worker, edge, Instant::now()));
    }

    fn when(&self, worker: &'static str, edge: RunEdge) -> Option<Instant> {
        let runs = self.0.lock().unwrap();
        runs.iter()
            .find(|(who, what, _)| *who == worker && *what == edge)
            .map(|(_, _, at)| *at)
    }
}

/// Notes its runs' edges; runs until dropped (`forever`) or answers
/// `done` at once.
struct NotedHandler {
    worker: &'static str,
    runs: HandlerRuns,
    forever: bool,
}

/// Notes a run's end when the run's future finishes or is dropped.
struct EndOfRun<'a>(&'a NotedHandler);

impl Drop for EndOfRun<'_> {
    fn drop(&mut self) {
        self.0.runs.note(self.0.worker, RunEdge::Ended);
    }
}

impl TaskHandler for NotedHandler {
    async fn run(&self, _task: &[u8]) -> Result<Vec<u8>, TaskError> {
        self.runs.note(self.worker, RunEdge::Started);
        let _end = EndOfRun(self);
        if self.forever {
            std::future::pending::<()>().await;
        }
        Ok(b"done".to_vec())
    }
}

/// Worker `a` talks to the ensemble through a proxy, worker `b` directly.
/// `a` takes the task; the proxy then swallows everything both ways, as a
/// network that drops packets. `a`'s client notices only by its own
/// timeout, the server expires `a`'s session a session timeout after it
/// last heard from it, and the master then gives the task to `b`. What must
/// hold: `a` stops its run (returning `CutOff`) before `b` starts the task,
/// so the two never run it at once, and `b`'s result is the one written.
async fn a_worker_cut_off_stops_its_task_before_another_worker_runs_it(connect_string: String) {
    let config = testing::config(&connect_string);
    let root = testing::fresh_case_root(&config, ROOT_PREFIX, "cut-off-worker").await;
    let layout = Layout::new(&root).unwrap();
    let mut client = real_client(&config, &layout).await;
    let (master, master_session) = real_master(&config, &layout).await;
    let runs = HandlerRuns::default();

    let proxied = proxy::ProxiedEnsemble::start(&connect_string);
    let (a_session, a_events) = connect(&testing::config(&proxied.connect)).await;
    let grace_ms = a_session.disconnected_grace_ms();
    assert_eq!(
        grace_ms,
        a_session.granted_session_timeout_ms() / 4,
        "a quarter of the granted timeout"
    );
    let a_handler = NotedHandler {
        worker: "a",
        runs: runs.clone(),
        forever: true,
    };
    let a = spawn_worker(a_session.clone(), a_events, &layout, a_handler);
    let task = client.submit(&payload("echo", 1, 0)).await.unwrap();
    let deadline = Instant::now() + HANG_GUARD;
    while runs.when("a", RunEdge::Started).is_none() {
        assert!(Instant::now() < deadline, "a never started {task}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // `b` registers only now, so the task was `a`'s; `b` is there to take
    // it over.
    let (b_session, b_events) = connect(&config).await;
    let b_handler = NotedHandler {
        worker: "b",
        runs: runs.clone(),
        forever: false,
    };
    let mut b = spawn_worker(b_session.clone(), b_events, &layout, b_handler);
    let mut b_log = Vec::new();
    collect_until(&mut b, &mut b_log, "b registers", |log| {
        matches!(log.first(), Some(WorkerDecision::Registered { .. }))
    })
    .await;

    let silenced_at = Instant::now();
    proxied.silence();
    let result = wait_result(&mut client, &task).await;
    assert_eq!(
        result,
        TaskResult::Success {
            output: b"done".to_vec()
        }
    );
    let a_ended = runs.when("a", RunEdge::Ended).expect("a's run ended");
    let b_started = runs.when("b", RunEdge::Started).expect("b ran the task");
    assert!(
        a_ended < b_started,
        "a's run ended {:?} after the cut and b's started {:?} after it: both ran {task} at once",
        a_ended - silenced_at,
        b_started - silenced_at
    );
    assert!(
        a_ended - silenced_at >= Duration::from_millis(grace_ms),
        "a stopped {:?} after the cut, before its grace of {grace_ms} ms could pass",
        a_ended - silenced_at
    );
    let (outcome, a_log) = tokio::time::timeout(HANG_GUARD, a.outcome())
        .await
        .expect("a ends on its own");
    assert_eq!(outcome, Err(WorkerError::CutOff { grace_ms }));
    assert!(
        a_log.iter().any(|decision| matches!(
            decision,
            WorkerDecision::TaskAbandoned { task: abandoned, .. } if *abandoned == task
        )),
        "a abandoned {task}: {a_log:?}"
    );
    println!(
        "cut-off worker: stopped {:?} after the cut, the other started {:?} after it",
        a_ended - silenced_at,
        b_started - silenced_at
    );

    b_log.extend(b.stop().await.1);
    assert!(
        b_log.iter().any(|decision| matches!(
            decision,
            WorkerDecision::ResultWritten { task: written, .. } if *written == task
        )),
        "b wrote {task}'s result: {b_log:?}"
    );
    master.stop().await.0.expect("the master ran until stopped");
    master_session.close().await.unwrap();
    b_session.close().await.unwrap();
    // `a`'s session is expired: closing it is a no-op or an error.
    let _ = tokio::time::timeout(Duration::from_secs(1), a_session.close()).await;
    client.session().close().await.unwrap();
    delete_root(&config, &root).await;
}

/// A worker role told to stop while its link is silent (a network that
/// drops packets: the client hears nothing, and nothing it sends arrives)
/// cannot delete its registration. It gives the requests still to make
/// the stop's timeout (`STOP_TIMEOUT_MS`), gives its session up and
/// returns, its close bounded too, rather than wait for a link that may
/// never come back; it does not claim to have deregistered. The
/// registration goes with the session when the server expires it, which
/// is what tells the master the worker left.
///
/// The session timeout is three stop timeouts, so that neither the
/// server's expiry nor the client's own giving up on the session (it
/// declares a session it has not reached for its whole timeout expired)
/// can be what ends the role: it must return while its session still
/// lives on the server. The client drops its silent connection sooner (at
/// two fifths of the timeout, within the stop's window), which an idle
/// worker notes nothing for. The server must grant such a session
/// (`maxSessionTimeout`; `scripts/zk` allows 60 s): the test checks.
async fn a_worker_role_told_to_stop_on_a_silent_link_returns_and_its_session_expires(
    connect_string: String,
) {
    let config = testing::config(&connect_string);
    let root = testing::fresh_case_root(&config, ROOT_PREFIX, "stop-on-silent-link").await;
    let layout = Layout::new(&root).unwrap();
    let (looker, _looker_events) = connect(&config).await;

    let proxied = proxy::ProxiedEnsemble::start(&connect_string);
    let decisions = Arc::new(Mutex::new(Vec::new()));
    let observer = {
        let decisions = decisions.clone();
        zkdist_coord::Observer::new(move |decision: WorkerDecision| {
            decisions.lock().unwrap().push(decision);
        })
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let session_timeout_ms = 3 * zkdist_worker::STOP_TIMEOUT_MS;
    let (probe, _probe_events) =
        connect(&testing::config(&connect_string).with_session_timeout_ms(session_timeout_ms))
            .await;
    assert_eq!(
        probe.granted_session_timeout_ms(),
        session_timeout_ms,
        "the server must grant {session_timeout_ms} ms sessions (its maxSessionTimeout) for this test"
    );
    probe.close().await.unwrap();
    let role = tokio::spawn(zkdist_worker::run_worker_role(
        testing::config(&proxied.connect).with_session_timeout_ms(session_timeout_ms),
        layout.clone(),
        TestHandler,
        async move {
            let _ = stopped.await;
        },
        Some(observer),
    ));
    let deadline = Instant::now() + HANG_GUARD;
    let worker = loop {
        let registered = decisions
            .lock()
            .unwrap()
            .iter()
            .find_map(|decision| match decision {
                WorkerDecision::Registered { worker } => Some(worker.clone()),
                _ => None,
            });
        if let Some(worker) = registered {
            break worker;
        }
        assert!(Instant::now() < deadline, "the worker never registered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let registration = layout.worker(&worker);
    let registered = async || {
        looker
            .exists(&registration, Watch::No)
            .await
            .unwrap()
            .is_some()
    };
    assert!(
        registered().await,
        "{registration} is there while the link is"
    );

    proxied.silence();
    let stopped_at = Instant::now();
    let _ = stop.send(());
    let outcome = tokio::time::timeout(HANG_GUARD, role)
        .await
        .expect("the role returns by the stop's timeout, the link still silent")
        .expect("the role's task does not panic");
    let waited = stopped_at.elapsed();
    assert_eq!(outcome, Ok(()), "a stop is the end asked for");
    // The stop's bound ended the role, not the session's end: the session
    // is still the server's, and so is its registration.
    assert!(
        registered().await,
        "{registration} was gone when the role returned, {waited:?} after the stop: \
         the session's expiry, not the stop's bound, ended it"
    );
    // A lower bound, not a speed check: the worker waited for its
    // deregistration as long as the stop allows before giving up.
    assert!(
        waited >= Duration::from_millis(zkdist_worker::STOP_TIMEOUT_MS),
        "gave up {waited:?} after the stop, before its timeout"
    );
    let after_registration: Vec<WorkerDecision> = {
        let decisions = decisions.lock().unwrap();
        let registered = decisions
            .iter()
            .position(|decision| matches!(decision, WorkerDecision::Registered { .. }))
            .expect("registered above");
        decisions[registered + 1..].to_vec()
    };
    assert_eq!(
        after_registration,
        [
            WorkerDecision::StopRequested {
                worker: worker.clone()
            },
            WorkerDecision::SessionLost {
                worker: worker.clone()
            },
        ],
        "stopped, and gave the session up without deregistering"
    );
    // The server expires the silent session a session timeout after it
    // last heard from it, and its ephemeral registration with it: nothing
    // the worker held is left for ever.
    let deadline = Instant::now() + HANG_GUARD;
    while registered().await {
        assert!(
            Instant::now() < deadline,
            "{registration} outlived its session"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "stop on a silent link: the role returned {waited:?} after the stop (stop timeout {} ms, session timeout {session_timeout_ms} ms)",
        zkdist_worker::STOP_TIMEOUT_MS,
    );
    looker.close().await.unwrap();
    delete_root(&config, &root).await;
}

// ---------------------------------------------------------------------------
// Status at scale.

/// More tasks than a listing of `tasks/` can hold in the client's default
/// reply limit (1 MiB: some 29,000 of these names).
const TASKS_PAST_THE_LISTING_LIMIT: usize = 30_000;
/// Of which this many are given a result.
const FINISHED_OF_THEM: usize = 1_000;

async fn status_counts_a_queue_too_long_to_list(connect_string: String) {
    let config = testing::config(&connect_string);
    let root = testing::fresh_case_root(&config, ROOT_PREFIX, "status-at-scale").await;
    let layout = Layout::new(&root).unwrap();
    let client = real_client(&config, &layout).await;
    let zk = client.session().clone();

    let payloads: Vec<Vec<u8>> = (0..TASKS_PAST_THE_LISTING_LIMIT as u64)
        .map(|n| payload("echo", n, 0))
        .collect();
    let tasks: Vec<TaskId> = client
        .submit_many(&payloads, 1_000)
        .await
        .into_iter()
        .map(|submitted| submitted.expect("every task is queued"))
        .collect();
    let finished = &tasks[..FINISHED_OF_THEM];
    let result = TaskResult::failure("x").encode();
    in_flight_by_thousands(finished.iter().map(|task| layout.result(task)), |path| {
        let (zk, result) = (&zk, &result);
        async move {
            zk.create(&path, result, CreateMode::Persistent)
                .await
                .map(drop)
        }
    })
    .await;

    // The premise: tasks/ no longer fits in a listing's reply.
    match zk.get_children(&layout.tasks_dir(), Watch::No).await {
        Err(error) if error.is_outcome_unknown() => {}
        other => panic!(
            "a listing of {TASKS_PAST_THE_LISTING_LIMIT} tasks gave {:?}",
            other.map(|(names, _)| names.len())
        ),
    }

    let status = client
        .status()
        .await
        .expect("status counts what it cannot list");
    assert!(!status.task_names_read);
    assert_eq!(status.finished_tasks, FINISHED_OF_THEM);
    assert_eq!(
        status.pending_tasks,
        TASKS_PAST_THE_LISTING_LIMIT - FINISHED_OF_THEM
    );
    assert_eq!(status.assigned_tasks, 0);

    // Clean up by name (a listing would not fit): results first, then
    // their tasks.
    let delete = |path: String| {
        let zk = &zk;
        async move { zk.delete(&path, None).await }
    };
    in_flight_by_thousands(finished.iter().map(|task| layout.result(task)), delete).await;
    in_flight_by_thousands(tasks.iter().map(|task| layout.task(task)), delete).await;
    zk.close().await.unwrap();
    delete_root(&config, &root).await;
}

/// Runs `write` on every path, a thousand writes in flight at a time,
/// failing the test on the first error.
async fn in_flight_by_thousands<F, Fut>(paths: impl Iterator<Item = String>, write: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), ZkError>>,
{
    let paths: Vec<String> = paths.collect();
    for chunk in paths.chunks(1_000) {
        let writes = chunk.iter().map(|path| write(path.clone()));
        for (path, written) in chunk.iter().zip(futures::future::join_all(writes).await) {
            written.unwrap_or_else(|e| panic!("write {path}: {e}"));
        }
    }
}
