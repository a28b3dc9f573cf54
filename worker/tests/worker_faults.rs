//! The worker under faults, on the simulator, with the test playing the
//! master: completion after a connection loss (applied or not, or revoked
//! meanwhile), an assignment revoked under a zombie worker, session
//! expiry while a task runs, and a disconnection that outlasts the
//! session's grace.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use zkdist_coord::{Coordinator, CreateMode, TaskId, TaskResult, WorkerId};
use zkdist_sim::Latency;
use zkdist_worker::{CompletionReadBack, WorkerDecision, WorkerError};

use common::*;

/// One-way latency of these tests: a request is in flight for this long.
const LATENCY_MS: u64 = 10;

/// Submits an `echo` task, lets the handler run it once, assigns it to
/// worker `id` and checks its result: the worker is still one.
async fn runs_the_next_task(setup: &Setup, id: &WorkerId, handler: &GatedHandler) {
    let next = setup
        .client
        .submit(&task_payload("echo", "next"))
        .await
        .unwrap();
    handler.open_once();
    assign_and_wait(setup, id, next.as_str()).await;
    assert_eq!(
        setup
            .client
            .session()
            .get_data(&setup.layout.result(&next), zkdist_coord::Watch::No)
            .await
            .map(|(data, _)| TaskResult::decode(&data).unwrap()),
        Ok(TaskResult::Success {
            output: b"next".to_vec()
        })
    );
}

/// The handler's future was dropped: a permit given now stays unused.
async fn assert_run_dropped(handler: &GatedHandler) {
    handler.open_once();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(handler.gate.available_permits(), 1, "the task is not run");
}

/// Deletes `id`'s registration by hand and checks that the worker notes
/// the loss, stopping `task` if it holds one, and ends with the error that
/// makes the role join again.
async fn registration_deleted_under(
    setup: &Setup,
    mut worker: RunningWorker,
    id: &WorkerId,
    task: Option<&TaskId>,
) {
    let registration = setup.layout.worker(id);
    setup.master.delete(&registration, None).await.unwrap();
    assert_eq!(
        worker.next_decision().await,
        WorkerDecision::RegistrationLost {
            worker: id.clone(),
            task: task.cloned()
        }
    );
    assert_eq!(
        worker.handle.await.unwrap(),
        Err(WorkerError::Deregistered { registration })
    );
}

fn result_of(tree: &zkdist_sim::Tree, path: &str) -> Option<TaskResult> {
    tree.data(path)
        .map(|bytes| TaskResult::decode(bytes).unwrap())
}

#[test]
fn an_applied_completion_whose_reply_is_lost_is_recognised_and_not_sent_again() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;
        let session = worker.session.session_id();

        // The completion reaches the server; its reply is held, then lost
        // with the link.
        setup.sim.hold(session).await;
        handler.open_once();
        let result_path = setup.layout.result(&task);
        let watched = result_path.clone();
        until_tree(&setup.sim, "the result", move |tree| tree.exists(&watched)).await;
        setup.sim.cut(session, Duration::from_secs(1)).await;
        // What travels after the heal gets through.
        setup.sim.release(session).await;

        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::CompletionRecovered {
                worker: id.clone(),
                task: task.clone(),
                found: CompletionReadBack::ResultPresent
            }
        );
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::AssignmentReleased {
                worker: id.clone(),
                task: Some(task.clone())
            }
        );
        let trace = setup.sim.trace().await;
        assert_eq!(
            count_applied(&trace, "worker multi [create"),
            1,
            "the completion was applied once:\n{}",
            trace.join("\n")
        );
        assert_eq!(
            count_lines(&trace, "worker multi [create"),
            2,
            "the multi and its failure, and no second send:\n{}",
            trace.join("\n")
        );
        assert_eq!(
            count_lines(&trace, "fail worker multi [create"),
            1,
            "its reply was lost"
        );
        let result = setup
            .sim
            .inspect(move |tree| result_of(tree, &result_path))
            .await;
        assert_eq!(
            result,
            Some(TaskResult::Success {
                output: b"done".to_vec()
            })
        );

        // The worker is idle and takes the next task.
        let next = setup
            .client
            .submit(&task_payload("echo", "next"))
            .await
            .unwrap();
        handler.open_once();
        assign(&setup, &id, next.as_str()).await;
        assert!(matches!(
            worker.next_decision().await,
            WorkerDecision::TaskStarted { .. }
        ));
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::ResultWritten {
                worker: id.clone(),
                task: next,
                success: true
            }
        );
    });
}

/// Runs a worker whose completion is cut in flight, with `seed`; checks
/// the outcome and returns whether the first multi was applied, and the
/// trace.
fn completion_cut_in_flight(seed: u64) -> (bool, Vec<String>) {
    run_seeded(seed, async move {
        let setup = setup_seeded(seed, Latency::Fixed { ms: LATENCY_MS }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;
        let session = worker.session.session_id();
        handler.open_once();
        // The worker sends the multi at once; cut halfway through its
        // trip to the server.
        tokio::time::sleep(Duration::from_millis(LATENCY_MS / 2)).await;
        setup.sim.cut(session, Duration::from_secs(1)).await;

        let recovered = worker.next_decision().await;
        let WorkerDecision::CompletionRecovered { found, .. } = recovered else {
            panic!("seed {seed}: {recovered}");
        };
        // With nobody else working, a result equal to ours is ours.
        let applied = match found {
            CompletionReadBack::NotApplied => false,
            CompletionReadBack::ResultPresent => true,
            CompletionReadBack::TaskGone => panic!("seed {seed}: nobody deleted the task"),
        };
        let mut expected = vec![];
        if !applied {
            expected.push(WorkerDecision::ResultWritten {
                worker: id.clone(),
                task: task.clone(),
                success: true,
            });
        }
        expected.push(WorkerDecision::AssignmentReleased {
            worker: id.clone(),
            task: Some(task.clone()),
        });
        for want in expected {
            assert_eq!(worker.next_decision().await, want, "seed {seed}");
        }

        let trace = setup.sim.trace().await;
        let sent_again = count_lines(&trace, "lost worker multi [create");
        let applied_lines = count_applied(&trace, "worker multi [create");
        assert_eq!(applied_lines, 1, "seed {seed}: applied exactly once");
        // Not applied means the first multi never reached the server
        // and a second one went out.
        assert_eq!(sent_again, usize::from(!applied), "seed {seed}");
        let result_path = setup.layout.result(&task);
        let assignment = setup.layout.assignment(&id);
        let (result, assigned) = setup
            .sim
            .inspect(move |tree| (result_of(tree, &result_path), tree.exists(&assignment)))
            .await;
        assert_eq!(
            result,
            Some(TaskResult::Success {
                output: b"done".to_vec()
            }),
            "seed {seed}"
        );
        assert!(!assigned, "seed {seed}: the assignment is released");
        (applied, trace)
    })
}

/// A cut while the completion is in flight: for some seeds the multi had
/// reached the server (applied, reply lost), for others it had not. The
/// worker must tell which: applied is not sent again, not applied is.
/// Either way the task ends with exactly one result and the worker idle.
#[test]
fn a_completion_cut_in_flight_is_sent_again_only_if_it_was_not_applied() {
    let outcomes: BTreeSet<bool> = (0..16)
        .map(|seed| completion_cut_in_flight(seed).0)
        .collect();
    assert_eq!(
        outcomes,
        BTreeSet::from([false, true]),
        "both outcomes happen for some seed"
    );
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    for seed in [3, 4] {
        let (_, first) = completion_cut_in_flight(seed);
        let (_, second) = completion_cut_in_flight(seed);
        assert_eq!(first, second, "seed {seed}");
    }
}

#[test]
fn a_zombie_whose_assignment_was_revoked_writes_nothing() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;

        // The master thought the worker dead and took the assignment back.
        // A zombie hears nothing of it (the worker's link holds what the
        // server sends) and completes.
        let session = worker.session.session_id();
        setup.sim.hold(session).await;
        setup
            .master
            .delete(&setup.layout.assignment(&id), None)
            .await
            .unwrap();
        handler.open_once();
        tokio::time::sleep(Duration::from_millis(20)).await;
        setup.sim.release(session).await;
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::AssignmentRevoked {
                worker: id.clone(),
                task: Some(task.clone())
            }
        );
        assert_no_result(&setup, &task).await;

        // Still a worker: the next assignment is run.
        runs_the_next_task(&setup, &id, &handler).await;
    });
}

/// The master takes an assignment back only from a worker it holds for
/// gone: one whose registration was deleted, by its session's end or by
/// hand while the session lives. A live worker hears the deletion of its
/// registration: it stops the task at once, without waiting for the
/// master's reclaim (the master gives the task to another worker, and
/// running it here too would run it twice at once) and joins again under
/// a new id, which the role does with a new session (the master never
/// gives work to an id it saw leave).
#[test]
fn a_worker_whose_registration_is_deleted_stops_its_task_and_joins_again() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (worker, id, task, handler) = worker_holding_a_task(&setup).await;
        registration_deleted_under(&setup, worker, &id, Some(&task)).await;
        assert_run_dropped(&handler).await;
        assert_no_result(&setup, &task).await;
        // The assignment is the master's to reclaim, not the worker's.
        let assignment = setup.layout.assignment(&id);
        assert!(
            setup
                .sim
                .inspect(move |tree| tree.exists(&assignment))
                .await
        );
    });
}

/// An idle worker whose registration is deleted would wait for ever: the
/// master sends no work to an id it saw leave. It joins again instead.
#[test]
fn an_idle_worker_whose_registration_is_deleted_joins_again() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (worker, id) = RunningWorker::start(&setup).await;
        registration_deleted_under(&setup, worker, &id, None).await;
    });
}

/// The deployment's root is deleted under a live worker, and made anew:
/// ids restart, so the next worker takes the orphan's id, and the master's
/// assignments to it land on the node the orphan watches.
/// `disconnected` says whether the orphan, whose inbound traffic was
/// held meanwhile, hears it all (it then hears the deletion of its
/// registration) or is disconnected past it (events to persistent watches
/// are lost, and it reads its registration, now another session's).
/// Either way the orphan starts nothing, and its only decision is the
/// loss of its registration.
fn root_deleted_under_a_worker(disconnected: bool) {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let orphan_handler = GatedHandler::closed();
        let (mut orphan, id) = RunningWorker::start_with(&setup, orphan_handler.clone()).await;
        let session = orphan.session.session_id();
        setup.sim.hold(session).await;
        // An assignment the orphan hears of only after the root is gone.
        let early = setup
            .client
            .submit(&task_payload("echo", "early"))
            .await
            .unwrap();
        assign(&setup, &id, early.as_str()).await;
        let (_successor, handler, task) = remake_root_with_successor(&setup, &id).await;
        if disconnected {
            setup.sim.cut(session, Duration::from_secs(1)).await;
        }
        setup.sim.release(session).await;

        let orphan_end = tokio::time::timeout(STEP_TIMEOUT, &mut orphan.handle)
            .await
            .expect("the orphan notices it lost its registration");
        assert_eq!(
            orphan_end.unwrap(),
            Err(WorkerError::Deregistered {
                registration: setup.layout.worker(&id)
            })
        );
        successor_finishes(&mut setup, &handler, &task).await;
        assert_eq!(orphan_handler.runs(), 0, "the orphan started nothing");
        assert_eq!(
            orphan.drain(),
            [WorkerDecision::RegistrationLost {
                worker: id,
                task: None
            }]
        );
    })
}

#[test]
fn an_orphan_of_a_deleted_root_runs_nothing_of_the_worker_that_took_its_id() {
    root_deleted_under_a_worker(false);
}

#[test]
fn an_orphan_reconnecting_after_its_root_was_deleted_runs_nothing() {
    root_deleted_under_a_worker(true);
}

/// The busy variant of the above: the root is deleted and made anew while
/// the orphan runs a task, disconnected, so that it hears of none of it.
/// Its assignment node is now the successor's, at the same version (0), so
/// a completion, which checks only the version, would write the orphan's
/// result under the successor's task and delete its assignment. On
/// reconnecting, the orphan looks at the node instead, sees another node
/// (another `czxid`), stops its task, and finds its registration another
/// session's. `lagging`: the orphan's server falls behind the leader
/// before the root goes, and would show the old node to a look that did
/// not `sync` first. `finish`: when the orphan's handler is let finish; a
/// run still going after the reconnection would then complete, and one
/// that finished during the outage would have its completion queued and
/// sent on reconnecting, unlooked-at.
fn orphan_busy_while_its_root_is_deleted(lagging: bool, finish: OrphanFinishes) {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut orphan, id, early, orphan_handler) = worker_holding_a_task(&setup).await;
        let session = orphan.session.session_id();
        if lagging {
            setup.sim.stall(session, Duration::from_secs(30)).await;
        }
        setup.sim.hold(session).await;
        let (_successor, handler, task) = remake_root_with_successor(&setup, &id).await;
        setup.sim.cut(session, Duration::from_secs(1)).await;
        setup.sim.release(session).await;
        let finish_after = match finish {
            OrphanFinishes::DuringTheOutage => Duration::from_millis(100),
            OrphanFinishes::AfterTheReconnection => Duration::from_secs(2),
        };
        tokio::time::sleep(finish_after).await;
        orphan_handler.open_once();

        let orphan_end = tokio::time::timeout(STEP_TIMEOUT, &mut orphan.handle)
            .await
            .expect("the orphan notices on reconnecting");
        assert_eq!(
            orphan_end.unwrap(),
            Err(WorkerError::Deregistered {
                registration: setup.layout.worker(&id)
            })
        );
        // A lagging server owes the events of what it had not applied, and
        // sends them before the look's `sync` is answered: the deletion of
        // the registration ends the task then. An up-to-date one shows the
        // node made anew, and the registration read next another session's.
        let expected = if lagging {
            vec![WorkerDecision::RegistrationLost {
                worker: id.clone(),
                task: Some(early),
            }]
        } else {
            vec![
                WorkerDecision::AssignmentRevoked {
                    worker: id.clone(),
                    task: Some(early),
                },
                WorkerDecision::RegistrationLost {
                    worker: id.clone(),
                    task: None,
                },
            ]
        };
        assert_eq!(orphan.drain(), expected);
        match finish {
            OrphanFinishes::DuringTheOutage => assert_eq!(
                orphan_handler.gate.available_permits(),
                0,
                "the orphan's run finished, to no effect"
            ),
            OrphanFinishes::AfterTheReconnection => assert_eq!(
                orphan_handler.gate.available_permits(),
                1,
                "the orphan's run was dropped before it could finish"
            ),
        }
        assert_no_result(&setup, &task).await;
        successor_finishes(&mut setup, &handler, &task).await;
    });
}

#[derive(Debug, Clone, Copy)]
enum OrphanFinishes {
    DuringTheOutage,
    AfterTheReconnection,
}

#[test]
fn an_orphan_busy_while_its_root_is_deleted_stops_its_task_on_reconnecting() {
    orphan_busy_while_its_root_is_deleted(false, OrphanFinishes::AfterTheReconnection);
}

#[test]
fn an_orphan_busy_while_its_root_is_deleted_is_not_fooled_by_a_lagging_server() {
    orphan_busy_while_its_root_is_deleted(true, OrphanFinishes::AfterTheReconnection);
}

#[test]
fn an_orphan_finishing_during_the_outage_writes_nothing_on_reconnecting() {
    orphan_busy_while_its_root_is_deleted(false, OrphanFinishes::DuringTheOutage);
}

/// A handler that finishes while a look at its assignment node is out
/// waits for the look: here the node was deleted and made anew, for
/// another task, at the same version, which a completion (checking the
/// version only) would take for the node read: it would write the old
/// task's result and delete the new assignment, whose task would then
/// never run.
#[test]
fn a_task_finishing_while_its_assignment_is_looked_at_waits_for_the_look() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;
        let session = worker.session.session_id();
        let next = setup
            .client
            .submit(&task_payload("echo", "next"))
            .await
            .unwrap();
        // The worker hears the deletion and the creation together, and
        // its look at the node (a sync, then an exists) is out for two
        // round trips (8 ms): the handler finishes 1 ms into it.
        setup.sim.hold(session).await;
        let assignment = setup.layout.assignment(&id);
        setup.master.delete(&assignment, None).await.unwrap();
        assign(&setup, &id, next.as_str()).await;
        setup.sim.release(session).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        handler.open_once();

        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::AssignmentRevoked {
                worker: id.clone(),
                task: Some(task.clone())
            }
        );
        assert_no_result(&setup, &task).await;
        // The new assignment stands, and runs.
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::TaskStarted {
                worker: id.clone(),
                task: next.clone()
            }
        );
        handler.open_once();
        let result = tokio::time::timeout(STEP_TIMEOUT, setup.client.wait(&next))
            .await
            .expect("the new task finishes")
            .unwrap();
        assert_eq!(
            result,
            TaskResult::Success {
                output: b"next".to_vec()
            }
        );
        assert_no_result(&setup, &task).await;
    });
}

/// Told to stop after its root was deleted and made anew, an orphan that
/// heard none of it deregisters only a registration of its own session's:
/// the node of its name is now its successor's, which deleting would take
/// out of the pool. `lagging`: the orphan's server falls behind the leader
/// before the root goes, and would show the old registration (same name,
/// same version) to a read that did not `sync` first.
fn orphan_stopping_after_its_root_is_deleted(lagging: bool) {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let (orphan, id) = RunningWorker::start(&setup).await;
        let session = orphan.session.session_id();
        if lagging {
            setup.sim.stall(session, Duration::from_secs(30)).await;
        }
        setup.sim.hold(session).await;
        delete_tree(&setup.master, setup.layout.root()).await;
        setup.layout.ensure_layout(&setup.master).await.unwrap();
        let (successor, successor_id) = RunningWorker::start(&setup).await;
        assert_eq!(successor_id, id, "the ids restarted with the root");
        // The stop is taken before the held events are let through: one
        // of them, the registration's deletion, would end the orphan as
        // `Deregistered` instead.
        let _ = orphan.stop.send(());
        tokio::time::sleep(Duration::from_millis(20)).await;
        setup.sim.release(session).await;
        let stopped = tokio::time::timeout(STEP_TIMEOUT, orphan.handle)
            .await
            .expect("the orphan stops");
        assert_eq!(stopped.unwrap(), Ok(id.clone()));

        let registration = setup.layout.worker(&id);
        let successor_session = successor.session.session_id().0;
        assert_eq!(
            setup
                .sim
                .inspect(move |tree| tree.stat(&registration).map(|stat| stat.ephemeral_owner))
                .await,
            Some(successor_session),
            "the successor's registration stands"
        );
        let task = setup
            .client
            .submit(&task_payload("echo", "kept"))
            .await
            .unwrap();
        assign(&setup, &id, task.as_str()).await;
        let result = tokio::time::timeout(STEP_TIMEOUT, setup.client.wait(&task))
            .await
            .expect("the successor runs its task")
            .unwrap();
        assert_eq!(
            result,
            TaskResult::Success {
                output: b"kept".to_vec()
            }
        );
    });
}

#[test]
fn an_orphan_stopping_leaves_the_registration_of_the_worker_that_took_its_id() {
    orphan_stopping_after_its_root_is_deleted(false);
}

#[test]
fn an_orphan_stopping_through_a_lagging_server_leaves_its_successors_registration() {
    orphan_stopping_after_its_root_is_deleted(true);
}

/// A deletion of the registration heard while the task's node is read,
/// after the assignment was, ends the task before the handler is first
/// polled: a handler may act on the world as soon as it is.
#[test]
fn a_registration_deleted_while_the_task_is_read_stops_it_before_it_starts() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let handler = GatedHandler::closed();
        let (mut worker, id) = RunningWorker::start_with(&setup, handler.clone()).await;
        let task = setup
            .client
            .submit(&task_payload("echo", "never"))
            .await
            .unwrap();
        // Released at t0, the worker reads its assignment (t0 to t0 + 4 ms)
        // and then the task (t0 + 4 to t0 + 8 ms); the deletion, sent at
        // t0 + 2, is applied at t0 + 4 and heard at t0 + 6, between the two.
        let session = worker.session.session_id();
        setup.sim.hold(session).await;
        assign(&setup, &id, task.as_str()).await;
        setup.sim.release(session).await;
        tokio::time::sleep(Duration::from_millis(2)).await;
        let registration = setup.layout.worker(&id);
        setup.master.delete(&registration, None).await.unwrap();

        let ended = tokio::time::timeout(STEP_TIMEOUT, &mut worker.handle)
            .await
            .expect("the worker ends");
        assert_eq!(
            ended.unwrap(),
            Err(WorkerError::Deregistered { registration })
        );
        assert_eq!(
            worker.drain(),
            [
                WorkerDecision::TaskStarted {
                    worker: id.clone(),
                    task: task.clone()
                },
                WorkerDecision::RegistrationLost {
                    worker: id,
                    task: Some(task.clone())
                }
            ]
        );
        assert_eq!(handler.runs(), 0, "the handler was never polled");
        assert_no_result(&setup, &task).await;
    });
}

/// The grace deadline stops a running handler. One that finished during
/// an outage runs nothing: its result waits for the reconnection and a
/// look at the assignment after it, through an outage longer than the
/// grace (short of the session timeout), rather than be thrown away with
/// the session.
#[test]
fn a_task_finished_during_an_outage_is_not_cut_off_at_the_grace() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;
        let session = worker.session.session_id();
        let grace_ms = worker.session.disconnected_grace_ms();
        let outage = Duration::from_millis(grace_ms + 1_500);
        assert!(
            outage < Duration::from_millis(zkdist_sim::SimConfig::default().session_timeout_ms),
            "the outage ends before the session can expire"
        );
        setup.sim.cut(session, outage).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        handler.open_once();

        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::ResultWritten {
                worker: id.clone(),
                task: task.clone(),
                success: true
            },
            "the finished task's result is written after the reconnection"
        );
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::AssignmentReleased {
                worker: id.clone(),
                task: Some(task.clone())
            }
        );
        let trace = setup.sim.trace().await;
        let assignment = setup.layout.assignment(&id);
        let position = |needle: &str| {
            trace
                .iter()
                .position(|line| line.contains(needle))
                .unwrap_or_else(|| panic!("no {needle:?} in the trace:\n{}", trace.join("\n")))
        };
        let heal = position("heal worker");
        let look = heal
            + trace[heal..]
                .iter()
                .position(|line| line.contains(&format!("read worker exists {assignment}")))
                .expect("a look after the reconnection");
        assert!(
            look < position("worker multi [create"),
            "the completion went out after the reconnection's look:\n{}",
            trace.join("\n")
        );
        // Still a worker: the next assignment is run.
        runs_the_next_task(&setup, &id, &handler).await;
        let result = setup.client.wait(&task).await.unwrap();
        assert_eq!(
            result,
            TaskResult::Success {
                output: b"done".to_vec()
            }
        );
    });
}

#[test]
fn a_revocation_found_at_completion_with_the_registration_gone_joins_again() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;
        let session = worker.session.session_id();
        setup.sim.hold(session).await;
        let registration = setup.layout.worker(&id);
        setup.master.delete(&registration, None).await.unwrap();
        setup
            .master
            .delete(&setup.layout.assignment(&id), None)
            .await
            .unwrap();
        handler.open_once();
        tokio::time::sleep(Duration::from_millis(20)).await;
        setup.sim.release(session).await;
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::AssignmentRevoked {
                worker: id.clone(),
                task: Some(task.clone())
            }
        );
        // A worker that stayed would wait for work for ever.
        let ended = tokio::time::timeout(Duration::from_secs(60), worker.handle).await;
        assert_eq!(
            ended.expect("the worker ends").unwrap(),
            Err(WorkerError::Deregistered { registration })
        );
    });
}

/// An assignment taken back from a worker whose registration stands (no
/// master of zkdist's does that) stops the task all the same; the worker
/// stays in the pool and runs what it is given next.
#[test]
fn a_worker_whose_assignment_is_taken_back_stops_its_task_and_stays() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;
        setup
            .master
            .delete(&setup.layout.assignment(&id), None)
            .await
            .unwrap();
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::AssignmentRevoked {
                worker: id.clone(),
                task: Some(task.clone())
            }
        );
        // One permit for the next task: the dropped run takes none.
        runs_the_next_task(&setup, &id, &handler).await;
        assert!(!worker.handle.is_finished(), "still a worker");
    });
}

#[test]
fn a_zombie_finding_another_workers_result_leaves_it_and_writes_nothing() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;

        // Revoked, re-run elsewhere and finished before the zombie (which
        // hears nothing meanwhile) is done.
        let theirs = TaskResult::Success {
            output: b"theirs".to_vec(),
        };
        let session = worker.session.session_id();
        setup.sim.hold(session).await;
        setup
            .master
            .delete(&setup.layout.assignment(&id), None)
            .await
            .unwrap();
        setup
            .master
            .create(
                &setup.layout.result(&task),
                &theirs.encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        handler.open_once();
        tokio::time::sleep(Duration::from_millis(20)).await;
        setup.sim.release(session).await;
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::ResultAlreadyPresent {
                worker: id.clone(),
                task: task.clone()
            }
        );
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::AssignmentRevoked {
                worker: id.clone(),
                task: Some(task.clone())
            }
        );
        let result_path = setup.layout.result(&task);
        assert_eq!(
            setup
                .sim
                .inspect(move |tree| result_of(tree, &result_path))
                .await,
            Some(theirs)
        );
    });
}

/// What the test, playing the master and the client, does to a task
/// whose assignment it revoked while the worker ran it.
#[derive(Debug, Clone, Copy)]
enum AfterRevocation {
    /// Another worker wrote the very result this worker will.
    SameResult,
    /// Another worker wrote a different result.
    OtherResult,
    /// Nothing yet: the task waits for its next worker.
    NoResult,
    /// The task was deleted.
    TaskDeleted,
}

/// Revokes the assignment of a worker running a task, does `after` to the
/// task, then lets the worker complete with the reply to its completion
/// lost. Returns the worker, the task and the decisions that follow, once
/// the worker is idle, and checks that the worker changed nothing.
fn read_back_after_revocation(after: AfterRevocation) -> (WorkerId, TaskId, Vec<String>) {
    run_sim(async move {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;
        let session = worker.session.session_id();
        // A zombie: it hears nothing of the revocation.
        setup.sim.hold(session).await;
        setup
            .master
            .delete(&setup.layout.assignment(&id), None)
            .await
            .unwrap();
        let result_path = setup.layout.result(&task);
        let theirs = match after {
            AfterRevocation::SameResult => Some(TaskResult::Success {
                output: b"done".to_vec(),
            }),
            AfterRevocation::OtherResult => Some(TaskResult::Success {
                output: b"theirs".to_vec(),
            }),
            AfterRevocation::NoResult | AfterRevocation::TaskDeleted => None,
        };
        if let Some(theirs) = &theirs {
            setup
                .master
                .create(&result_path, &theirs.encode(), CreateMode::Persistent)
                .await
                .unwrap();
        }
        if let AfterRevocation::TaskDeleted = after {
            setup
                .master
                .delete(&setup.layout.task(&task), None)
                .await
                .unwrap();
        }
        // The completion reaches the server and fails there; its reply is
        // held, then lost with the link.
        handler.open_once();
        tokio::time::sleep(Duration::from_millis(3 * LATENCY_MS)).await;
        setup.sim.cut(session, Duration::from_secs(1)).await;
        setup.sim.release(session).await;

        let mut lines = vec![worker.next_decision().await];
        if !matches!(lines[0], WorkerDecision::AssignmentRevoked { .. }) {
            lines.push(worker.next_decision().await);
        }
        let trace = setup.sim.trace().await;
        assert_eq!(
            count_lines(&trace, "fail worker multi [create"),
            1,
            "{after:?}: the completion's reply was lost"
        );
        // Reached the server once, and failed there: nothing written.
        let sent: Vec<&String> = trace
            .iter()
            .filter(|line| line.contains("zxid=") && line.contains("worker multi [create"))
            .collect();
        assert_eq!(sent.len(), 1, "{after:?}: {sent:?}");
        assert!(sent[0].contains("-> Multi["), "{after:?}: {sent:?}");
        let found = setup
            .sim
            .inspect(move |tree| result_of(tree, &result_path))
            .await;
        assert_eq!(found, theirs, "{after:?}");
        let lines = lines.iter().map(|decision| decision.to_string()).collect();
        (id, task, lines)
    })
}

/// After a completion whose outcome was unknown the assignment is gone;
/// the worker reports only what the tree proves. A result equal to its
/// own may be another worker's (the master revoked the assignment and
/// re-ran the task), so it is not claimed as this worker's completion.
#[test]
fn a_completion_read_back_after_a_revocation_claims_only_what_it_can_prove() {
    let (id, t, same) = read_back_after_revocation(AfterRevocation::SameResult);
    assert_eq!(
        same,
        [
            format!(
                "{id} recovered {t} completion: result present, written by this worker or another"
            ),
            format!("{id} released {t}"),
        ]
    );
    for after in [AfterRevocation::OtherResult, AfterRevocation::NoResult] {
        let (id, t, lines) = read_back_after_revocation(after);
        assert_eq!(
            lines,
            [format!("{id} found {t} revoked, wrote nothing")],
            "{after:?}"
        );
    }
    let (id, t, deleted) = read_back_after_revocation(AfterRevocation::TaskDeleted);
    assert_eq!(
        deleted,
        [
            format!("{id} recovered {t} completion: task gone, completed or revoked"),
            format!("{id} released {t}"),
        ]
    );
}

#[test]
fn expiry_while_a_task_runs_abandons_it_at_once() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;

        setup.sim.expire(worker.session.session_id()).await;
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::TaskAbandoned {
                worker: id.clone(),
                task: task.clone()
            }
        );
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::SessionLost { worker: id.clone() }
        );
        let outcome = worker.handle.await.unwrap();
        assert_eq!(
            outcome,
            Err(WorkerError::SessionEnded {
                state: Some(zkdist_coord::SessionState::Expired)
            })
        );
        assert_run_dropped(&handler).await;
        assert_no_result(&setup, &task).await;
    });
}

/// A worker cut off past its session timeout finishes its task while
/// partitioned, within the session's grace, so its result waits for the
/// link (and for a look at the assignment after it, since what changed
/// meanwhile comes without events). The server expired it meanwhile (the
/// master would re-queue the task); when the link heals the worker learns
/// of the expiry and writes nothing.
#[test]
fn a_worker_partitioned_past_its_session_timeout_writes_nothing() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;
        let registration = setup.layout.worker(&id);

        // The default session timeout is 10 s, its grace 2.5 s: the task
        // ends a second into the cut, and its result waits.
        setup
            .sim
            .cut(worker.session.session_id(), Duration::from_secs(15))
            .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        handler.open_once();
        until_tree(&setup.sim, "the worker's expiry", move |tree| {
            !tree.exists(&registration)
        })
        .await;
        // The master's part: take the assignment back.
        setup
            .master
            .delete(&setup.layout.assignment(&id), None)
            .await
            .unwrap();

        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::TaskAbandoned {
                worker: id.clone(),
                task: task.clone()
            }
        );
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::SessionLost { worker: id.clone() }
        );
        assert_eq!(
            worker.handle.await.unwrap(),
            Err(WorkerError::SessionEnded {
                state: Some(zkdist_coord::SessionState::Expired)
            })
        );
        let result_path = setup.layout.result(&task);
        assert!(
            !setup
                .sim
                .inspect(move |tree| tree.exists(&result_path))
                .await,
            "the zombie wrote nothing"
        );
        let trace = setup.sim.trace().await;
        assert_eq!(
            count_applied(&trace, "worker multi [create"),
            0,
            "no completion reached the server:\n{}",
            trace.join("\n")
        );
        assert_eq!(
            count_lines(&trace, "worker multi [create"),
            0,
            "no completion was even sent: a result finished while cut off waits for the \
             reconnection and a look, and the session expired first"
        );
    });
}

/// A worker cut off while its task runs stops the task once the session's
/// grace has passed without a reconnection: a quarter of the session
/// timeout after the cut, while the server still holds the session (so no
/// master can have given the task to another worker yet). It returns
/// `CutOff`, having abandoned the task, and the handler never finishes.
#[test]
fn a_worker_cut_off_past_its_grace_stops_its_task_before_the_session_can_expire() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;
        let grace_ms = worker.session.disconnected_grace_ms();
        assert_eq!(grace_ms, 2_500, "a quarter of the default 10 s timeout");

        let cut_at = tokio::time::Instant::now();
        setup
            .sim
            .cut(worker.session.session_id(), Duration::from_secs(15))
            .await;
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::TaskAbandoned {
                worker: id.clone(),
                task: task.clone()
            }
        );
        // Exactly the grace on tokio's paused clock; madsim's moves a few
        // hundred nanoseconds with the polls in between.
        let stopped_after = cut_at.elapsed();
        let grace = Duration::from_millis(grace_ms);
        assert!(
            grace <= stopped_after && stopped_after < grace + Duration::from_millis(1),
            "the task stops when the grace ends, not before and not at the expiry: \
             {stopped_after:?} after the cut"
        );
        let registration = setup.layout.worker(&id);
        assert!(
            setup
                .sim
                .inspect(move |tree| tree.exists(&registration))
                .await,
            "the server still holds the session when the task stops"
        );
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::SessionLost { worker: id.clone() }
        );
        assert_eq!(
            worker.handle.await.unwrap(),
            Err(WorkerError::CutOff { grace_ms })
        );
        assert_run_dropped(&handler).await;
    });
}

/// A short disconnection while the handler runs is not a session's end:
/// the task finishes and is completed, and the disconnection's events,
/// read while the task ran, are acted on afterwards (the worker looks at
/// its assignment node again) without stopping it.
#[test]
fn a_short_disconnection_while_a_task_runs_does_not_stop_it() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 2 }).await;
        let (mut worker, id, task, handler) = worker_holding_a_task(&setup).await;
        setup
            .sim
            .cut(worker.session.session_id(), Duration::from_secs(1))
            .await;
        // Past the heal, and past the grace that the disconnection
        // started (2.5 s): the reconnection ended it, so the task is still
        // running.
        tokio::time::sleep(Duration::from_secs(4)).await;
        handler.open_once();
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::ResultWritten {
                worker: id.clone(),
                task: task.clone(),
                success: true
            }
        );
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::AssignmentReleased {
                worker: id.clone(),
                task: Some(task.clone())
            }
        );

        // Give the worker time for the extra look the disconnection calls
        // for before the next assignment exists, so the look finds the node
        // gone whatever the seed's latencies.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let next = setup
            .client
            .submit(&task_payload("echo", "next"))
            .await
            .unwrap();
        handler.open_once();
        assign_and_wait(&setup, &id, next.as_str()).await;
        assert_eq!(
            worker.next_decision().await,
            WorkerDecision::TaskStarted {
                worker: id.clone(),
                task: next
            }
        );
        let trace = setup.sim.trace().await;
        assert_eq!(
            count_lines(&trace, "heal worker: reconnected"),
            1,
            "{}",
            trace.join("\n")
        );
        // After the task the worker looked at its assignment node once more
        // because of the disconnection it heard of meanwhile (and found it
        // gone, its own completion having deleted it).
        let assignment = setup.layout.assignment(&id);
        assert_eq!(
            count_lines(
                &trace,
                &format!("read worker get_data {assignment} -> NoNode")
            ),
            1,
            "{}",
            trace.join("\n")
        );
    });
}
