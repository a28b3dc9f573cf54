//! The worker on the simulator, with the test playing the master: it creates
//! assignment nodes by hand and watches what the worker does with them.

mod common;

use std::time::Duration;

use zkdist_coord::{
    Coordinator, CreateMode, Layout, MAX_RESULT_OUTPUT_BYTES, TaskId, TaskPayload, TaskResult,
};
use zkdist_sim::{Latency, SimConfig, SimZk};
use zkdist_worker::{
    STOP_TIMEOUT_MS, TaskError, TaskHandler, TimeLimited, Worker, WorkerDecision, WorkerError,
};

use common::*;

#[test]
fn every_task_gets_a_result_and_bad_ones_fail_without_stopping_the_worker() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id) = RunningWorker::start(&setup).await;
        let cases = [
            (
                "echo",
                "one",
                TaskResult::Success {
                    output: b"one".to_vec(),
                },
            ),
            ("fail", "two", TaskResult::failure("refused: two")),
            (
                "panic",
                "three",
                TaskResult::failure("the task handler panicked: handler bug on three"),
            ),
            (
                "nonsense",
                "four",
                TaskResult::failure("unknown kind \"nonsense\""),
            ),
            (
                "echo",
                "five",
                TaskResult::Success {
                    output: b"five".to_vec(),
                },
            ),
        ];
        for (kind, text, expected) in cases {
            let task = setup
                .client
                .submit(&task_payload(kind, text))
                .await
                .unwrap();
            assign_and_wait(&setup, &id, task.as_str()).await;
            let result = setup.client.wait(&task).await.unwrap();
            assert_eq!(result, expected, "{kind} task");
            assert_eq!(
                worker.next_decision().await,
                WorkerDecision::TaskStarted {
                    worker: id.clone(),
                    task: task.clone()
                }
            );
            assert_eq!(
                worker.next_decision().await,
                WorkerDecision::ResultWritten {
                    worker: id.clone(),
                    task: task.clone(),
                    success: expected.is_success()
                }
            );
            assert_eq!(
                worker.next_decision().await,
                WorkerDecision::AssignmentReleased {
                    worker: id.clone(),
                    task: Some(task)
                }
            );
        }

        // Output over the limit: a failure that names the limit.
        let task = setup.client.submit(&task_payload("big", "")).await.unwrap();
        assign_and_wait(&setup, &id, task.as_str()).await;
        match setup.client.wait(&task).await.unwrap() {
            TaskResult::Failure { message } => {
                assert!(
                    message.contains(&MAX_RESULT_OUTPUT_BYTES.to_string()),
                    "{message}"
                )
            }
            other => panic!("big output gave {other:?}"),
        }

        // The largest output, and a failure message cut to the same size,
        // are written whole with the completion that releases the
        // assignment, and the worker goes on.
        for (kind, success) in [("largest", true), ("long-failure", false)] {
            let task = setup.client.submit(&task_payload(kind, "")).await.unwrap();
            assign_and_wait(&setup, &id, task.as_str()).await;
            let result = setup.client.wait(&task).await.unwrap();
            assert_eq!(result.is_success(), success, "{kind}");
            let written = match result {
                TaskResult::Success { output } => output.len(),
                TaskResult::Failure { message } => message.len(),
            };
            assert_eq!(written, MAX_RESULT_OUTPUT_BYTES, "{kind}");
        }

        let _ = worker.stop.send(());
        assert_eq!(worker.handle.await.unwrap(), Ok(id));
    });
}

/// A handler under a time limit: a task that would run for ever (`slow`
/// runs 5 s here, past the 1 s limit) fails with a result naming the
/// limit, written at the limit, and the worker takes the next task (`echo`),
/// which the limit leaves alone.
#[test]
fn a_task_past_the_time_limit_fails_naming_it_and_the_worker_goes_on() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let limit = Duration::from_secs(1);
        let (worker, id) =
            RunningWorker::start_with(&setup, TimeLimited::new(KindHandler, limit)).await;

        let slow = setup
            .client
            .submit(&task_payload("slow", "never"))
            .await
            .unwrap();
        let assigned_at = tokio::time::Instant::now();
        assign_and_wait(&setup, &id, slow.as_str()).await;
        assert_eq!(
            setup.client.wait(&slow).await.unwrap(),
            TaskResult::failure(TaskError::past_time_limit(limit).message())
        );
        let waited = assigned_at.elapsed();
        assert!(
            limit <= waited && waited < Duration::from_secs(2),
            "the failure is written at the limit, not when the task would end: {waited:?}"
        );

        let echo = setup
            .client
            .submit(&task_payload("echo", "next"))
            .await
            .unwrap();
        assign_and_wait(&setup, &id, echo.as_str()).await;
        assert_eq!(
            setup.client.wait(&echo).await.unwrap(),
            TaskResult::Success {
                output: b"next".to_vec()
            }
        );
        let _ = worker.stop.send(());
        assert_eq!(worker.handle.await.unwrap(), Ok(id));
    });
}

/// Decodes its payload before it returns its future, as a handler that
/// checks its input eagerly does; `panic` panics there, `echo` echoes.
struct EagerHandler;

impl TaskHandler for EagerHandler {
    fn run(
        &self,
        task: &[u8],
    ) -> impl std::future::Future<Output = Result<Vec<u8>, TaskError>> + Send {
        let payload = TaskPayload::decode(task).expect("a payload the test made");
        let text = payload.fields["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if payload.kind == "panic" {
            panic!("eager handler bug on {text}");
        }
        async move { Ok(text.into_bytes()) }
    }
}

/// A panic in the handler before its future exists fails the task, as one
/// inside the future does: a bad task never takes the worker down.
#[test]
fn a_handler_that_panics_before_its_future_exists_fails_only_its_task() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let (worker, id) = RunningWorker::start_with(&setup, EagerHandler).await;
        for (kind, text, expected) in [
            (
                "panic",
                "one",
                TaskResult::failure("the task handler panicked: eager handler bug on one"),
            ),
            (
                "echo",
                "two",
                TaskResult::Success {
                    output: b"two".to_vec(),
                },
            ),
        ] {
            let task = setup
                .client
                .submit(&task_payload(kind, text))
                .await
                .unwrap();
            assign_and_wait(&setup, &id, task.as_str()).await;
            assert_eq!(setup.client.wait(&task).await.unwrap(), expected, "{kind}");
        }
        let _ = worker.stop.send(());
        assert_eq!(worker.handle.await.unwrap(), Ok(id));
    });
}

#[test]
fn the_assignment_watch_is_armed_before_registering() {
    run_sim(async {
        let setup = setup(Latency::Uniform {
            min_us: 100,
            max_us: 900,
        })
        .await;
        let (worker, id) = RunningWorker::start(&setup).await;
        let trace = setup.sim.trace().await;
        let position = |needle: &str| {
            trace
                .iter()
                .position(|line| line.contains(needle))
                .unwrap_or_else(|| panic!("no trace line has {needle:?}:\n{}", trace.join("\n")))
        };
        let id_created = position(&format!(
            "worker create {}",
            setup.layout.worker_id_prefix()
        ));
        let armed = position(&format!(
            "worker add_watch {} persistent",
            setup.layout.assignment(&id)
        ));
        let registered = position(&format!("worker create {}", setup.layout.worker(&id)));
        assert!(id_created < armed, "id, then watch");
        assert!(armed < registered, "watch, then registration");
        // The id came from the scratch directory, not from `workers/`.
        assert!(id.as_str().starts_with("worker-"));
        drop(worker);
    });
}

#[test]
fn an_assignment_made_right_after_a_completion_is_announced_without_rearming() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 5 }).await;
        let (mut worker, id) = RunningWorker::start(&setup).await;
        let first = setup
            .client
            .submit(&task_payload("echo", "a"))
            .await
            .unwrap();
        let second = setup
            .client
            .submit(&task_payload("echo", "b"))
            .await
            .unwrap();

        // Hold what travels to the worker from the moment its first
        // assignment is deleted: the second assignment exists before the
        // worker hears of its completion. With a one-shot watch it would
        // come unannounced (the worker would have to find it by looking);
        // the persistent watch announces it.
        assign_and_wait(&setup, &id, first.as_str()).await;
        setup.sim.hold(worker.session.session_id()).await;
        let path = setup.layout.assignment(&id);
        setup
            .master
            .create(&path, second.as_str().as_bytes(), CreateMode::Persistent)
            .await
            .unwrap();
        setup.sim.release(worker.session.session_id()).await;

        let result = tokio::time::timeout(STEP_TIMEOUT, setup.client.wait(&second))
            .await
            .expect("the second task is not lost")
            .unwrap();
        assert_eq!(
            result,
            TaskResult::Success {
                output: b"b".to_vec()
            }
        );
        let trace = setup.sim.trace().await;
        let announced = count_lines(&trace, &format!("deliver worker event NodeCreated {path}"));
        assert_eq!(announced, 2, "both assignments came by event");
        // The watch was left once, and the node looked at once, when the
        // worker started: nothing is re-armed after a task. The other
        // watch is the registration's.
        assert_eq!(count_lines(&trace, &format!("worker add_watch {path}")), 1);
        let registration = setup.layout.worker(&id);
        assert_eq!(
            count_lines(&trace, &format!("worker add_watch {registration}")),
            1
        );
        assert_eq!(count_lines(&trace, "worker add_watch"), 2);
        assert_eq!(
            count_lines(&trace, &format!("read worker exists {path}")),
            1
        );
        // From the first announcement on, a task costs the worker three
        // requests: the assignment, the task, the completion.
        let first_announced = trace
            .iter()
            .position(|line| line.contains(&format!("deliver worker event NodeCreated {path}")))
            .expect("announced");
        let worker_requests: Vec<&String> = trace[first_announced..]
            .iter()
            .filter(|line| {
                (line.contains("] read worker ") || line.contains(" worker "))
                    && !line.contains("deliver ")
                    && !line.contains("control ")
            })
            .collect();
        let kinds: Vec<&str> = worker_requests
            .iter()
            .map(|line| {
                if line.contains("get_data /zkdist/assignments/") {
                    "assignment"
                } else if line.contains("get_data /zkdist/tasks/") {
                    "task"
                } else if line.contains("worker multi [") {
                    "complete"
                } else {
                    "other"
                }
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "assignment",
                "task",
                "complete",
                "assignment",
                "task",
                "complete"
            ],
            "{worker_requests:#?}"
        );
        let decisions: Vec<_> = std::iter::from_fn(|| worker.decisions.try_recv().ok()).collect();
        assert!(decisions.contains(&WorkerDecision::ResultWritten {
            worker: id.clone(),
            task: second,
            success: true
        }));
    });
}

#[test]
fn shutdown_finishes_the_task_in_hand_then_deregisters() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 1 }).await;
        let (mut worker, id) = RunningWorker::start(&setup).await;
        let task = setup
            .client
            .submit(&task_payload("slow", "done"))
            .await
            .unwrap();
        setup
            .master
            .create(
                &setup.layout.assignment(&id),
                task.as_str().as_bytes(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::TaskStarted {
                worker: id.clone(),
                task: task.clone()
            }
        );
        let _ = worker.stop.send(());
        assert_eq!(worker.handle.await.unwrap(), Ok(id.clone()));

        let decisions: Vec<_> = std::iter::from_fn(|| worker.decisions.try_recv().ok()).collect();
        assert_eq!(
            decisions,
            vec![
                WorkerDecision::StopRequested { worker: id.clone() },
                WorkerDecision::ResultWritten {
                    worker: id.clone(),
                    task: task.clone(),
                    success: true
                },
                WorkerDecision::AssignmentReleased {
                    worker: id.clone(),
                    task: Some(task.clone())
                },
                WorkerDecision::Deregistered { worker: id.clone() },
            ]
        );
        assert_eq!(
            setup.client.wait(&task).await.unwrap(),
            TaskResult::Success {
                output: b"done".to_vec()
            }
        );
        let registration = setup.layout.worker(&id);
        assert!(
            !setup
                .sim
                .inspect(move |tree| tree.exists(&registration))
                .await
        );
    });
}

/// An assignment the master made just as the worker was stopping (before
/// it saw the worker leave) is left alone: the master reclaims it and
/// gives the task to another worker. Running it after deregistering would
/// let two live workers run it at once.
#[test]
fn an_assignment_made_as_the_worker_stops_is_left_to_the_master() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 1 }).await;
        let (mut worker, id) = RunningWorker::start(&setup).await;
        let task = setup
            .client
            .submit(&task_payload("echo", "not here"))
            .await
            .unwrap();
        let _ = worker.stop.send(());
        // Created while the worker deregisters: there when it is gone.
        assign(&setup, &id, task.as_str()).await;
        let stopped = tokio::time::timeout(STEP_TIMEOUT, worker.handle)
            .await
            .expect("the worker stops in time");
        assert_eq!(stopped.unwrap(), Ok(id.clone()));
        assert_eq!(
            std::iter::from_fn(|| worker.decisions.try_recv().ok()).collect::<Vec<_>>(),
            vec![
                WorkerDecision::StopRequested { worker: id.clone() },
                WorkerDecision::Deregistered { worker: id.clone() },
            ]
        );
        let (assignment, result) = (setup.layout.assignment(&id), setup.layout.result(&task));
        let (assigned, finished) = setup
            .sim
            .inspect(move |tree| {
                (
                    tree.data(&assignment).map(<[u8]>::to_vec),
                    tree.exists(&result),
                )
            })
            .await;
        assert_eq!(
            assigned.as_deref(),
            Some(task.as_str().as_bytes()),
            "left for the master"
        );
        assert!(!finished, "not run");
        let trace = setup.sim.trace().await;
        assert_eq!(
            count_lines(&trace, "worker get_data /zkdist/assignments"),
            0,
            "not even read"
        );
    });
}

/// Shutdown asked for while a task runs: the task is finished, and an
/// assignment that comes right after it is not taken (tasks that keep
/// coming must not hold the shutdown back).
#[test]
fn a_worker_stopping_takes_no_further_assignment() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 1 }).await;
        let handler = GatedHandler::closed();
        let (mut worker, id) = RunningWorker::start_with(&setup, handler.clone()).await;
        let first = setup
            .client
            .submit(&task_payload("echo", "first"))
            .await
            .unwrap();
        let second = setup
            .client
            .submit(&task_payload("echo", "second"))
            .await
            .unwrap();
        assign(&setup, &id, first.as_str()).await;
        handler.wait_started().await;
        let _ = worker.stop.send(());
        assert_eq!(
            next_decision(&mut worker.decisions).await,
            WorkerDecision::TaskStarted {
                worker: id.clone(),
                task: first.clone()
            }
        );
        assert_eq!(
            next_decision(&mut worker.decisions).await,
            WorkerDecision::StopRequested { worker: id.clone() }
        );
        // Enough for both tasks, should the worker take the second.
        handler.open_once();
        handler.open_once();
        // The master assigns the next task the moment the first is done.
        let assignment = setup.layout.assignment(&id);
        until_tree(&setup.sim, "the first task's release", move |tree| {
            !tree.exists(&assignment)
        })
        .await;
        assign(&setup, &id, second.as_str()).await;

        let stopped = tokio::time::timeout(STEP_TIMEOUT, worker.handle)
            .await
            .expect("the worker stops in time");
        assert_eq!(stopped.unwrap(), Ok(id.clone()));
        let lines: Vec<String> = std::iter::from_fn(|| worker.decisions.try_recv().ok())
            .map(|decision| decision.to_string())
            .collect();
        assert_eq!(
            lines,
            [
                format!("{id} wrote {first} result success"),
                format!("{id} released {first}"),
                format!("{id} deregistered"),
            ]
        );
        let result = setup.layout.result(&second);
        assert!(!setup.sim.inspect(move |tree| tree.exists(&result)).await);
    });
}

#[test]
fn a_garbage_assignment_or_a_deleted_task_is_dropped_and_the_worker_goes_on() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 1 }).await;
        let (mut worker, id) = RunningWorker::start(&setup).await;

        assign_and_wait(&setup, &id, "not a task").await;
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::BadAssignment {
                worker: id.clone(),
                data: "not a task".into()
            }
        );
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::AssignmentReleased {
                worker: id.clone(),
                task: None
            }
        );

        let missing = TaskId::from_sequence(4242);
        assign_and_wait(&setup, &id, missing.as_str()).await;
        worker.next_decision().await;
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::TaskMissing {
                worker: id.clone(),
                task: missing
            }
        );
        worker.next_decision().await;

        assert_still_works(&mut setup, &id).await;
    });
}

/// A task node that refuses children (here a foreign ephemeral one, as a
/// task whose ACL the worker's credentials do not cover would with
/// `NoAuth`) cannot take a result. The refusal belongs to that task: the
/// worker releases it, leaving the task as it is, and goes on. Ending the
/// worker instead would let the master give the task to the next worker,
/// and one task would stop every worker in turn.
#[test]
fn a_task_that_refuses_its_result_is_released_and_the_worker_goes_on() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 1 }).await;
        let (mut worker, id) = RunningWorker::start(&setup).await;

        let refusing = TaskId::from_sequence(4243);
        let refusing_path = setup.layout.task(&refusing);
        setup
            .master
            .create(
                &refusing_path,
                &task_payload("echo", "nowhere to go"),
                CreateMode::Ephemeral,
            )
            .await
            .unwrap();
        assign_and_wait(&setup, &id, refusing.as_str()).await;
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::TaskStarted {
                worker: id.clone(),
                task: refusing.clone()
            }
        );
        match worker.next_decision().await {
            WorkerDecision::ResultRefused {
                worker: refused_by,
                task,
                reason,
            } => {
                assert_eq!((&refused_by, &task), (&id, &refusing));
                assert!(reason.contains("ephemeral"), "{reason}");
            }
            other => panic!("expected the result's refusal, got {other}"),
        }
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::AssignmentReleased {
                worker: id.clone(),
                task: Some(refusing.clone())
            }
        );
        let result = setup.layout.result(&refusing);
        assert!(
            setup
                .sim
                .inspect(move |tree| tree.exists(&refusing_path))
                .await
        );
        assert!(!setup.sim.inspect(move |tree| tree.exists(&result)).await);
        // Marked refused with the release, saying why: `refused/` was made
        // for it.
        let mark = setup.layout.refused(&refusing);
        let why = setup
            .master
            .get_data(&mark, zkdist_coord::Watch::No)
            .await
            .expect("the task is marked refused")
            .0;
        match TaskResult::decode(&why).unwrap() {
            TaskResult::Failure { message } => assert!(
                message.contains(refusing.as_str()) && message.contains("ephemeral"),
                "{message}"
            ),
            other => panic!("the mark holds why, as a failure: {other:?}"),
        }
        // A wait on the task hears why it will have no result.
        match setup.client.wait(&refusing).await {
            Err(zkdist_coord::ClientError::ResultRefused { task, reason, mark }) => {
                assert_eq!(task, refusing);
                assert_eq!(mark, setup.layout.refused(&refusing));
                assert!(reason.contains("ephemeral"), "{reason}");
            }
            other => panic!("expected the refusal, got {other:?}"),
        }

        assert_still_works(&mut setup, &id).await;
    });
}

/// The mark is a courtesy, the release is not: with `refused/` a node that
/// cannot have children (made ephemeral by another program), the task is
/// released without its mark and the worker goes on.
#[test]
fn a_refused_task_that_cannot_be_marked_is_released_all_the_same() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 1 }).await;
        let (mut worker, id) = RunningWorker::start(&setup).await;
        setup
            .master
            .create(&setup.layout.refused_dir(), b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        let refusing = TaskId::from_sequence(4244);
        setup
            .master
            .create(
                &setup.layout.task(&refusing),
                &task_payload("echo", "nowhere to go"),
                CreateMode::Ephemeral,
            )
            .await
            .unwrap();
        assign_and_wait(&setup, &id, refusing.as_str()).await;
        let mut decisions = Vec::new();
        for _ in 0..3 {
            decisions.push(worker.next_decision().await);
        }
        assert!(
            matches!(
                decisions.as_slice(),
                [
                    WorkerDecision::TaskStarted { .. },
                    WorkerDecision::ResultRefused { .. },
                    WorkerDecision::AssignmentReleased { task: Some(released), .. },
                ] if *released == refusing
            ),
            "{decisions:#?}"
        );
        let mark = setup.layout.refused(&refusing);
        assert!(!setup.sim.inspect(move |tree| tree.exists(&mark)).await);

        assert_still_works(&mut setup, &id).await;
    });
}

/// Gives the worker `id` an echo task, as the master would, and checks
/// its result: the worker is still at work.
async fn assert_still_works(setup: &mut Setup, id: &zkdist_coord::WorkerId) {
    let task = setup
        .client
        .submit(&task_payload("echo", "still here"))
        .await
        .unwrap();
    assign_and_wait(setup, id, task.as_str()).await;
    assert_eq!(
        setup.client.wait(&task).await.unwrap(),
        TaskResult::Success {
            output: b"still here".to_vec()
        }
    );
}

#[test]
fn a_root_that_cannot_be_created_is_a_clear_error() {
    run_sim(async {
        let sim = SimZk::start(SimConfig::default());
        let (owner, _owner_events) = sim.connect("owner").await.unwrap();
        owner
            .create("/ephemeral", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        let layout = Layout::new("/ephemeral/zkdist").unwrap();
        let (session, events) = sim.connect("worker").await.unwrap();
        let error = Worker::new(session, events, layout, KindHandler)
            .run()
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, WorkerError::Layout { .. }), "{error:?}");
        assert!(message.contains("/ephemeral/zkdist"), "{message}");
        assert!(message.contains("ephemeral"), "{message}");
    });
}

/// Told to stop while its link is cut, an idle worker does not wait for
/// the ensemble to come back: after `STOP_TIMEOUT_MS` of trying
/// to delete its registration it gives the session up, and the
/// registration goes with the session.
#[test]
fn a_stop_during_an_outage_gives_the_session_up_instead_of_waiting() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id) = RunningWorker::start(&setup).await;
        let session = worker.session.session_id();
        setup.sim.cut(session, Duration::from_secs(3600)).await;
        let stopped_at = tokio::time::Instant::now();
        let _ = worker.stop.send(());
        let outcome = worker.handle.await.unwrap();
        let waited = stopped_at.elapsed();
        assert_eq!(outcome, Err(WorkerError::SessionEnded { state: None }));
        let timeout = Duration::from_millis(STOP_TIMEOUT_MS);
        assert!(
            waited >= timeout && waited < timeout + Duration::from_secs(1),
            "returned after {waited:?}"
        );
        let decisions: Vec<_> = std::iter::from_fn(|| worker.decisions.try_recv().ok()).collect();
        assert_eq!(decisions[0], WorkerDecision::StopRequested { worker: id });
        assert!(
            !decisions
                .iter()
                .any(|decision| matches!(decision, WorkerDecision::Deregistered { .. })),
            "{decisions:?}"
        );
    });
}
