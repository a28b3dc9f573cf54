//! A worker told to stop while the ensemble is out of reach, on the
//! simulator: each stretch of requests it still makes once told (the reads
//! before a task, the writes after it) gets `STOP_TIMEOUT_MS`, after which
//! it gives its session up rather than wait for the link; a stretch that
//! ends within it ends as it would have without the stop.

mod common;

use std::time::Duration;

use tokio::time::Instant;
use zkdist_coord::{Coordinator, TaskId, TaskResult, Watch, WorkerId};
use zkdist_sim::Latency;
use zkdist_worker::{STOP_TIMEOUT_MS, Worker, WorkerDecision, WorkerError};

use common::*;

/// One-way latency of these tests: a request is in flight for this long.
const LATENCY_MS: u64 = 10;

/// Longer than any test here runs: the link is not back before the end.
const LONG_OUTAGE: Duration = Duration::from_secs(3600);

/// How a worker asked to stop ended: its outcome, how long it took, and
/// every decision it made after the one the test waited for last.
struct Stopped {
    outcome: Result<WorkerId, WorkerError>,
    waited: Duration,
    decisions: Vec<WorkerDecision>,
}

/// Asks `worker` to stop and waits for its end, at most the stop's
/// timeout and a second.
async fn stop_and_wait(mut worker: RunningWorker) -> Stopped {
    let stopped_at = Instant::now();
    let _ = worker.stop.send(());
    let timeout = Duration::from_millis(STOP_TIMEOUT_MS);
    let outcome = tokio::time::timeout(timeout + Duration::from_secs(1), worker.handle)
        .await
        .expect("the worker ends by the stop's timeout, long before the link is back")
        .expect("the worker's task does not panic");
    Stopped {
        outcome,
        waited: stopped_at.elapsed(),
        decisions: std::iter::from_fn(|| worker.decisions.try_recv().ok()).collect(),
    }
}

/// Checks that a worker told to stop lost nothing: it noted the stop
/// first and its deregistration last, wrote `task`'s result (`done`), and
/// released its assignment.
async fn assert_stopped_after_writing(
    setup: &Setup,
    id: &WorkerId,
    task: &TaskId,
    decisions: &[WorkerDecision],
) {
    assert_eq!(
        decisions.first(),
        Some(&WorkerDecision::StopRequested { worker: id.clone() })
    );
    assert_eq!(
        decisions.last(),
        Some(&WorkerDecision::Deregistered { worker: id.clone() })
    );
    let (result, _) = setup
        .client
        .session()
        .get_data(&setup.layout.result(task), Watch::No)
        .await
        .expect("the result was written");
    assert_eq!(
        TaskResult::decode(&result).unwrap(),
        TaskResult::Success {
            output: b"done".to_vec()
        }
    );
    assert!(
        !setup
            .sim
            .inspect({
                let assignment = setup.layout.assignment(id);
                move |tree| tree.exists(&assignment)
            })
            .await,
        "the assignment is released"
    );
}

/// A worker whose task has just finished, its completion cut halfway
/// through its trip to the server by a cut of `outage`; the stop comes
/// 50 ms later, while the worker asks the ensemble what became of it.
async fn completion_cut_in_flight(
    setup: &Setup,
    outage: Duration,
) -> (RunningWorker, WorkerId, TaskId, GatedHandler) {
    let (worker, id, task, handler) = worker_holding_a_task(setup).await;
    let session = worker.session.session_id();
    handler.open_once();
    // The worker sends the completion at once.
    tokio::time::sleep(Duration::from_millis(LATENCY_MS / 2)).await;
    setup.sim.cut(session, outage).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    (worker, id, task, handler)
}

/// The completion's reply is lost to a cut that outlasts the test, and
/// the stop comes while the worker asks the ensemble what became of it:
/// the worker gives the session up at the stop's timeout, the task
/// abandoned (written or not, it is the master's to settle once the
/// session has expired).
#[test]
fn a_stop_while_the_result_waits_out_an_outage_gives_the_session_up() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let (worker, id, task, handler) = completion_cut_in_flight(&setup, LONG_OUTAGE).await;

        let Stopped {
            outcome: ended,
            waited,
            decisions,
        } = stop_and_wait(worker).await;
        assert_eq!(ended, Err(WorkerError::SessionEnded { state: None }));
        let timeout = Duration::from_millis(STOP_TIMEOUT_MS);
        assert!(
            waited >= timeout,
            "gave up after {waited:?}, before the timeout"
        );
        assert_eq!(decisions, gave_up_after_stop(&id, &task));
        let trace = setup.sim.trace().await;
        assert_eq!(
            count_lines(&trace, "fail worker multi [create"),
            1,
            "the completion was in flight when the link was cut, and failed with it"
        );
        assert_eq!(handler.runs(), 1);
    });
}

/// The same, with a cut shorter than the stop's timeout: the worker waits
/// it out, learns the completion's fate, writes the result if it was not,
/// and deregisters; the stop loses nothing. (A guard against a bound too
/// short: this passes without one too.)
#[test]
fn a_stop_while_the_result_waits_out_a_short_outage_still_writes_it() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let outage = Duration::from_millis(STOP_TIMEOUT_MS / 2);
        let (worker, id, task, _handler) = completion_cut_in_flight(&setup, outage).await;

        let Stopped {
            outcome: ended,
            waited,
            decisions,
        } = stop_and_wait(worker).await;
        assert_eq!(ended, Ok(id.clone()));
        assert!(
            waited >= outage - Duration::from_millis(50),
            "ended after {waited:?}, before the link was back"
        );
        assert!(
            decisions.contains(&WorkerDecision::AssignmentReleased {
                worker: id.clone(),
                task: Some(task.clone())
            }),
            "{decisions:?}"
        );
        assert_stopped_after_writing(&setup, &id, &task, &decisions).await;
    });
}

/// The stop comes while the worker reads an assignment whose read a cut
/// lost: the worker gives the session up at the stop's timeout, having
/// started nothing.
#[test]
fn a_stop_while_an_assignment_is_read_in_an_outage_gives_the_session_up() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let handler = GatedHandler::closed();
        let (worker, id) = RunningWorker::start_with(&setup, handler.clone()).await;
        let session = worker.session.session_id();
        let task = setup
            .client
            .submit(&task_payload("echo", "never"))
            .await
            .unwrap();
        // The master's create is answered as the worker hears of it; the
        // worker's read is then in flight for a latency.
        assign(&setup, &id, task.as_str()).await;
        tokio::time::sleep(Duration::from_millis(LATENCY_MS / 2)).await;
        setup.sim.cut(session, LONG_OUTAGE).await;
        tokio::time::sleep(Duration::from_millis(50)).await;

        let Stopped {
            outcome: ended,
            waited,
            decisions,
        } = stop_and_wait(worker).await;
        assert_eq!(ended, Err(WorkerError::SessionEnded { state: None }));
        assert!(
            waited >= Duration::from_millis(STOP_TIMEOUT_MS),
            "gave up after {waited:?}"
        );
        assert_eq!(
            decisions,
            [
                WorkerDecision::StopRequested { worker: id.clone() },
                WorkerDecision::SessionLost { worker: id.clone() }
            ]
        );
        let trace = setup.sim.trace().await;
        let read = format!(
            "fail worker get_data {} -> ConnectionLoss",
            setup.layout.assignment(&id)
        );
        assert_eq!(
            count_lines(&trace, &read),
            1,
            "the read was in flight when the link was cut, and failed with it"
        );
        assert_eq!(handler.runs(), 0, "nothing was started");
    });
}

/// Told to stop before it registered, a worker leaves without
/// registering: no assignment can come to it, and it has nothing to
/// delete.
#[test]
fn a_stop_while_joining_leaves_without_registering() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let (session, events) = setup.sim.connect("worker").await.unwrap();
        let (decisions_tx, mut decisions) = tokio::sync::mpsc::unbounded_channel();
        let worker = Worker::new(session, events, setup.layout.clone(), KindHandler)
            .with_observer(decisions_tx)
            .run_until(std::future::ready(()));
        let id = tokio::time::timeout(STEP_TIMEOUT, worker)
            .await
            .expect("the worker ends")
            .expect("a stop while joining is a clean end");
        let decisions: Vec<_> = std::iter::from_fn(|| decisions.try_recv().ok()).collect();
        assert_eq!(
            decisions,
            [WorkerDecision::StopRequested { worker: id.clone() }]
        );
        let registration = setup.layout.worker(&id);
        assert!(
            !setup
                .sim
                .inspect(move |tree| tree.exists(&registration))
                .await,
            "the worker did not register"
        );
        let trace = setup.sim.trace().await;
        assert_eq!(count_lines(&trace, "add_watch"), 0, "nor armed a watch");
    });
}

/// A worker whose task ends while its link is down: the link is cut for
/// `outage`, the task's gate opens at once (well within the session's
/// grace, so the handler finishes), and the stop comes 50 ms later, while
/// the result waits for the link.
async fn finished_in_an_outage(
    setup: &Setup,
    outage: Duration,
) -> (RunningWorker, WorkerId, TaskId, GatedHandler) {
    let (worker, id, task, handler) = worker_holding_a_task(setup).await;
    setup.sim.cut(worker.session.session_id(), outage).await;
    handler.open_once();
    tokio::time::sleep(Duration::from_millis(50)).await;
    (worker, id, task, handler)
}

/// The result of a task that ended in an outage waits for the link; a stop
/// gives that wait the stop's timeout from the task's end, as it gives the
/// writes after a task, not the session's grace: an outage longer than
/// the grace and shorter than the timeout loses nothing, and the worker
/// writes the result and deregisters.
#[test]
fn a_stop_while_a_finished_result_waits_out_an_outage_past_the_grace_still_writes_it() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let grace_ms = setup.master.disconnected_grace_ms();
        let outage = Duration::from_millis((grace_ms + STOP_TIMEOUT_MS) / 2);
        assert!(outage > Duration::from_millis(grace_ms) + Duration::from_secs(1));
        assert!(
            outage < Duration::from_millis(zkdist_sim::SimConfig::default().session_timeout_ms),
            "the outage ends before the session can expire"
        );
        let (worker, id, task, handler) = finished_in_an_outage(&setup, outage).await;

        let Stopped {
            outcome: ended,
            waited,
            decisions,
        } = stop_and_wait(worker).await;
        assert_eq!(ended, Ok(id.clone()), "{decisions:?}");
        assert!(
            waited >= outage - Duration::from_millis(100),
            "ended after {waited:?}, before the link was back"
        );
        // Nothing was sent before the link was back: the worker writes
        // the result itself.
        assert!(
            decisions.contains(&WorkerDecision::ResultWritten {
                worker: id.clone(),
                task: task.clone(),
                success: true,
            }),
            "{decisions:?}"
        );
        assert_stopped_after_writing(&setup, &id, &task, &decisions).await;
        assert_eq!(handler.runs(), 1, "the task ran once");
    });
}

/// The same wait with an outage that outlasts the test: the worker gives
/// its session up at the stop's timeout from the stop (the task ended just
/// before it), not at the grace, the task abandoned and its result
/// unwritten (the master gives it to another worker once the session has
/// expired).
#[test]
fn a_stop_while_a_finished_result_waits_out_a_long_outage_gives_the_session_up_at_its_timeout() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let (worker, id, task, handler) = finished_in_an_outage(&setup, LONG_OUTAGE).await;

        let Stopped {
            outcome: ended,
            waited,
            decisions,
        } = stop_and_wait(worker).await;
        assert_eq!(ended, Err(WorkerError::SessionEnded { state: None }));
        assert!(
            waited >= Duration::from_millis(STOP_TIMEOUT_MS),
            "gave up after {waited:?}, before the stop's timeout"
        );
        assert_eq!(decisions, gave_up_after_stop(&id, &task));
        assert_no_result(&setup, &task).await;
        assert_eq!(handler.runs(), 1, "the task ran once");
    });
}

/// A stop heard while the task runs counts from the task's end, however
/// long after the stop that comes: here the stop comes, the link is cut a
/// second later, the task ends at once, and the outage outlasts the test.
/// The worker gives its session up a stop's timeout after the task's end,
/// not after the stop (nor at the grace), the task abandoned and its result
/// unwritten.
#[test]
fn a_stop_heard_while_the_task_runs_gives_the_waiting_result_a_timeout_from_the_task_s_end() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let (worker, id, task, handler) = worker_holding_a_task(&setup).await;
        let RunningWorker {
            session,
            stop,
            handle,
            mut decisions,
        } = worker;
        let stopped_at = Instant::now();
        let _ = stop.send(());
        assert_eq!(
            next_decision(&mut decisions).await,
            WorkerDecision::StopRequested { worker: id.clone() }
        );
        let task_runs_on = Duration::from_secs(1);
        tokio::time::sleep(task_runs_on).await;
        setup.sim.cut(session.session_id(), LONG_OUTAGE).await;
        handler.open_once();

        let timeout = Duration::from_millis(STOP_TIMEOUT_MS);
        let ended = tokio::time::timeout(timeout + task_runs_on + Duration::from_secs(1), handle)
            .await
            .expect("the worker ends a stop's timeout after its task, long before the link is back")
            .expect("the worker's task does not panic");
        let waited = stopped_at.elapsed();
        assert_eq!(ended, Err(WorkerError::SessionEnded { state: None }));
        assert!(
            waited >= timeout + task_runs_on,
            "gave up {waited:?} after the stop, before a timeout from the task's end"
        );
        let decisions: Vec<_> = std::iter::from_fn(|| decisions.try_recv().ok()).collect();
        assert_eq!(decisions, gave_up_after_stop(&id, &task)[1..]);
        assert_no_result(&setup, &task).await;
        assert_eq!(handler.runs(), 1, "the task ran once");
    });
}
