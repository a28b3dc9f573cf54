//! The master's life: starting on a system that already has workers, tasks,
//! results and assignments; riding out a dropped connection; and its clear
//! exits.

mod common;

use std::time::Duration;

use zkdist_coord::{
    Coordinator, CreateMode, Event, Layout, SessionId, TaskId, TaskResult, WatchKind, ZkError,
};
use zkdist_master::{
    Epoch, Master, MasterDecision, MasterError, MasterState, TaskDiscovery, Trigger, claim_master,
    run_master_role,
};
use zkdist_sim::{Latency, SimConfig, SimConnector, SimZk};
use zkdist_worker::WorkerDecision;

use common::*;

const STEP_TIMEOUT: Duration = Duration::from_secs(600);

#[test]
fn the_master_adopts_workers_tasks_results_and_assignments_it_finds() {
    run_sim(5, async {
        let sim = SimZk::start(sim_config(
            5,
            Latency::Uniform {
                min_us: 200,
                max_us: 2_000,
            },
        ));
        let layout = Layout::default();
        let mut client = client(&sim, &layout).await;
        let (old_master, _old_events) = sim.connect("old-master").await.unwrap();

        let mut busy = start_worker(&sim, "busy", &layout, TestHandler).await;
        let mut idle = start_worker(&sim, "idle", &layout, TestHandler).await;
        let id_of = |decisions: Vec<WorkerDecision>| match decisions.first() {
            Some(WorkerDecision::Registered { worker }) => worker.clone(),
            other => panic!("first decision {other:?}"),
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let busy_id = id_of(busy.decisions_so_far());
        let idle_id = id_of(idle.decisions_so_far());

        // Task 0 finished under an earlier master; task 1 is running on
        // `busy` (for 10 s); tasks 2..=5 wait.
        let mut tasks = Vec::new();
        for n in 0..6 {
            let work_us = if n == 1 { 10_000_000 } else { 1_000 };
            tasks.push(client.submit(&payload("echo", n, work_us)).await.unwrap());
        }
        let old_result = TaskResult::Success {
            output: b"from an earlier run".to_vec(),
        };
        old_master
            .create(
                &layout.result(&tasks[0]),
                &old_result.encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        // Task 6 refused its result under an earlier master: marked so, it
        // is settled, and no master runs it again.
        let refused = client.submit(&payload("echo", 6, 1_000)).await.unwrap();
        old_master
            .create(&layout.refused_dir(), b"", CreateMode::Persistent)
            .await
            .unwrap();
        old_master
            .create(
                &layout.refused(&refused),
                &TaskResult::failure("refused under an earlier master").encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        old_master
            .create(
                &layout.assignment(&busy_id),
                tasks[1].as_str().as_bytes(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(matches!(
            busy.decisions_so_far().as_slice(),
            [WorkerDecision::TaskStarted { .. }]
        ));

        let master = start_master(&sim, "master", &layout).await;
        for task in &tasks[1..] {
            let result = tokio::time::timeout(STEP_TIMEOUT, client.wait(task))
                .await
                .expect("every task finishes")
                .unwrap();
            assert!(result.is_success(), "{task}: {result:?}");
        }
        assert_eq!(client.wait(&tasks[0]).await.unwrap(), old_result);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (state, decisions) = master.stop().await;
        let state = state.unwrap();

        let position = |wanted: &MasterDecision| {
            decisions
                .iter()
                .position(|decision| decision == wanted)
                .unwrap_or_else(|| panic!("no {wanted} in {decisions:#?}"))
        };
        let finished = position(&MasterDecision::TaskAlreadyFinished {
            task: tasks[0].clone(),
        });
        let refused_settled = position(&MasterDecision::TaskAlreadyFinished {
            task: refused.clone(),
        });
        let adopted = position(&MasterDecision::TaskInProgress {
            worker: busy_id.clone(),
            task: tasks[1].clone(),
        });
        let initialised = position(&MasterDecision::Initialised {
            workers: 2,
            pending_tasks: 4,
            busy_workers: 1,
        });
        assert!(finished < initialised && refused_settled < initialised && adopted < initialised);
        // The first round, for what the first listings found, gives the
        // oldest waiting task to the only idle worker.
        assert_eq!(
            decisions[initialised + 1],
            MasterDecision::Round {
                round: 1,
                triggers: vec![Trigger::NewTask, Trigger::NewWorker],
                assigned: vec![(idle_id.clone(), tasks[2].clone())],
            }
        );
        let assigned: Vec<_> = decisions
            .iter()
            .flat_map(|decision| decision.assigned().iter().map(|(_, task)| task.clone()))
            .collect();
        assert_eq!(
            assigned,
            tasks[2..].to_vec(),
            "neither task 0 nor 1 runs again, nor the refused task 6"
        );
        assert!(state.pending_tasks().is_empty());
        assert_eq!(state.idle_workers().count(), 2);

        for worker in [busy, idle] {
            let (outcome, decisions) = worker.stop().await;
            outcome.unwrap();
            assert!(
                !decisions
                    .iter()
                    .any(|d| matches!(d, WorkerDecision::ResultAlreadyPresent { .. })),
                "no task ran twice"
            );
        }
    });
}

#[test]
fn the_master_stops_with_a_clear_error_when_its_session_expires() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let (zk, events) = sim.connect("master").await.unwrap();
        let session = zk.session_id();
        // Unclaimed: the test is about the session, not the election.
        let master = tokio::spawn(Master::new(zk, events, layout, Epoch(0)).run());
        tokio::time::sleep(Duration::from_millis(10)).await;
        sim.expire(session).await;
        let outcome = tokio::time::timeout(STEP_TIMEOUT, master)
            .await
            .expect("the master notices")
            .unwrap();
        match outcome {
            Err(error @ MasterError::SessionEnded { .. }) => {
                assert!(error.to_string().contains("session ended"), "{error}")
            }
            other => panic!("{other:?}"),
        }
    });
}

#[test]
fn a_root_that_cannot_be_created_is_a_clear_error() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let (owner, _owner_events) = sim.connect("owner").await.unwrap();
        owner
            .create("/ephemeral", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        let layout = Layout::new("/ephemeral/zkdist").unwrap();
        let (zk, events) = sim.connect("master").await.unwrap();
        // Unclaimed: the claim would fail on the layout the same way.
        let error = Master::new(zk, events, layout, Epoch(0))
            .run()
            .await
            .unwrap_err();
        assert!(matches!(error, MasterError::Layout { .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.contains("/ephemeral/zkdist"), "{message}");
        assert!(message.contains("ephemeral"), "{message}");
    });
}

#[test]
fn a_nested_root_is_created_on_first_use() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::new("/apps/team/zkdist").unwrap();
        let master = start_master(&sim, "master", &layout).await;
        let mut worker = start_worker(&sim, "worker", &layout, TestHandler).await;
        let mut client = client(&sim, &layout).await;
        let task = client.submit(&payload("echo", 7, 10)).await.unwrap();
        let result = tokio::time::timeout(STEP_TIMEOUT, client.wait(&task))
            .await
            .expect("the task finishes")
            .unwrap();
        assert_eq!(result, expected_result("echo", 7));
        let result_path = layout.result(&task);
        assert!(sim.inspect(move |tree| tree.exists(&result_path)).await);
        assert!(!worker.decisions_so_far().is_empty());
        master.stop().await.0.unwrap();
    });
}

/// A master that claimed leadership on a session of its own, its
/// decisions observed, running until stopped.
struct ObservedMaster {
    session: SessionId,
    decisions: tokio::sync::mpsc::UnboundedReceiver<MasterDecision>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<MasterState, MasterError>>,
}

impl ObservedMaster {
    async fn start(sim: &SimZk, layout: &Layout) -> ObservedMaster {
        let (zk, events) = sim.connect("master").await.unwrap();
        let session = zk.session_id();
        let epoch = claim_master(&zk, layout).await.unwrap().unwrap();
        let (decisions_tx, decisions) = tokio::sync::mpsc::unbounded_channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(
            Master::new(zk, events, layout.clone(), epoch)
                .with_observer(decisions_tx)
                .run_until(async move {
                    let _ = stop_rx.await;
                }),
        );
        ObservedMaster {
            session,
            decisions,
            stop,
            task,
        }
    }

    /// Stops the master (it must end cleanly) and returns the tasks it
    /// assigned, in order.
    async fn stop_and_list_assigned(mut self) -> Vec<TaskId> {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
        std::iter::from_fn(|| self.decisions.try_recv().ok())
            .flat_map(|decision| decision.assigned().to_vec())
            .map(|(_, task)| task)
            .collect()
    }
}

#[test]
fn tasks_submitted_while_the_master_is_disconnected_are_assigned_after() {
    run_sim(9, async {
        let sim = SimZk::start(sim_config(9, Latency::Fixed { ms: 1 }));
        let layout = Layout::default();
        let master = ObservedMaster::start(&sim, &layout).await;
        let master_session = master.session;
        let worker = start_worker(&sim, "worker", &layout, TestHandler).await;
        let mut client = client(&sim, &layout).await;
        tokio::time::sleep(Duration::from_millis(50)).await;

        // The master is idle (nothing in flight) when its link drops; the
        // tasks arrive while it hears nothing.
        sim.cut(master_session, Duration::from_secs(2)).await;
        let mut tasks = Vec::new();
        for n in 0..3 {
            tasks.push(client.submit(&payload("echo", n, 10)).await.unwrap());
        }
        for task in &tasks {
            let result = tokio::time::timeout(STEP_TIMEOUT, client.wait(task))
                .await
                .expect("the task finishes after the link heals")
                .unwrap();
            assert!(result.is_success());
        }
        let trace = sim.trace().await;
        let cut = trace
            .iter()
            .position(|line| line.contains("cut") && line.contains("master"))
            .unwrap_or_else(|| panic!("no cut in the trace:\n{}", trace.join("\n")));
        let healed = cut
            + trace[cut..]
                .iter()
                .position(|line| line.contains("deliver master session Connected"))
                .unwrap_or_else(|| panic!("no reconnection in the trace:\n{}", trace.join("\n")));
        let first_assignment = trace
            .iter()
            .position(|line| {
                line.contains("master multi") && line.contains("create /zkdist/assignments/")
            })
            .expect("an assignment was created");
        assert!(
            healed < first_assignment,
            "nothing is assigned while disconnected"
        );
        // The reconnected master syncs before it lists anything again: the
        // server it reconnected to may be behind the one it left, and
        // replay changes it already heard of (see the shell's `Link`).
        let after_heal = |needle: &str| {
            healed
                + trace[healed..]
                    .iter()
                    .position(|line| line.contains(needle))
                    .unwrap_or_else(|| {
                        panic!("no {needle:?} after the heal:\n{}", trace.join("\n"))
                    })
        };
        let synced = after_heal("deliver master reply sync /zkdist ");
        assert!(synced < after_heal("master get_children /zkdist/tasks"));
        assert!(synced < after_heal("master get_children /zkdist/assignments"));
        assert!(synced < first_assignment);

        assert_eq!(master.stop_and_list_assigned().await, tasks);
        worker.stop().await.0.unwrap();
    });
}

/// A task created after the master's session reconnected, but heard of
/// before the sync that follows the reconnection is answered, waits for
/// that answer: until then an event may replay a change the master already
/// handled (see the shell's `Link`), so it is held back, and the listing
/// after the sync finds the task.
#[test]
fn a_task_heard_of_before_the_sync_after_a_reconnection_waits_for_it() {
    run_sim(9, async {
        let sim = SimZk::start(sim_config(9, Latency::Fixed { ms: 1 }));
        let layout = Layout::default();
        let master = ObservedMaster::start(&sim, &layout).await;
        let master_session = master.session;
        let worker = start_worker(&sim, "worker", &layout, TestHandler).await;
        let mut client = client(&sim, &layout).await;
        tokio::time::sleep(Duration::from_millis(50)).await;

        // Everything bound for the master is held from before the heal, so
        // the task's event reaches it ahead of the session's `Connected`,
        // and so ahead of any reply to a sync sent after it.
        sim.cut(master_session, Duration::from_secs(2)).await;
        sim.hold(master_session).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let task = client.submit(&payload("echo", 0, 10)).await.unwrap();
        sim.release(master_session).await;
        let result = tokio::time::timeout(STEP_TIMEOUT, client.wait(&task))
            .await
            .expect("the task finishes once the sync is answered")
            .unwrap();
        assert!(result.is_success());

        let trace = sim.trace().await;
        let position = |needle: &str| {
            trace
                .iter()
                .position(|line| line.contains(needle))
                .unwrap_or_else(|| panic!("no {needle:?} in the trace:\n{}", trace.join("\n")))
        };
        let heard = position("deliver master event NodeCreated /zkdist/tasks/");
        let synced = position("deliver master reply sync /zkdist ");
        let assigned = position("create /zkdist/assignments/");
        assert!(
            heard < synced,
            "the task's event comes before the sync's reply:\n{}",
            trace.join("\n")
        );
        assert!(
            synced < assigned,
            "the task is assigned only after the sync's reply:\n{}",
            trace.join("\n")
        );

        assert_eq!(
            master.stop_and_list_assigned().await,
            vec![task],
            "assigned once, from the listing"
        );
        worker.stop().await.0.unwrap();
    });
}

/// The backstop for a deleted `assignments/` whose event the master never
/// hears (a server that sends it only to sessions that may read the node,
/// say): the assignment create it refuses for want of its parent ends the
/// master with an error naming the directory, so the role lays the tree
/// out again, instead of the worker waiting for good on a create that
/// every next attempt would fail as well.
#[test]
fn an_assignment_refused_for_want_of_its_directory_ends_the_master() {
    for discovery in [TaskDiscovery::Watch, TaskDiscovery::Listing] {
        run_sim(7, async move {
            let sim = SimZk::start(sim_config(7, Latency::Fixed { ms: 1 }));
            let layout = Layout::default();
            let (zk, mut events) = sim.connect("master").await.unwrap();
            let epoch = claim_master(&zk, &layout).await.unwrap().unwrap();
            // The master's stream, less the directory's own delete event.
            let (forward, heard) = tokio::sync::mpsc::unbounded_channel();
            let deleted = Event::watch(WatchKind::NodeDeleted, layout.assignments_dir());
            tokio::spawn(async move {
                while let Some(event) = events.recv().await {
                    if event != deleted && forward.send(event).is_err() {
                        break;
                    }
                }
            });
            let master = tokio::spawn(
                Master::new(zk, heard, layout.clone(), epoch)
                    .with_discovery(discovery)
                    .run(),
            );
            let worker = start_worker(&sim, "worker", &layout, TestHandler).await;
            let client = client(&sim, &layout).await;
            let (operator, _operator_events) = sim.connect("operator").await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;

            operator
                .delete(&layout.assignments_dir(), None)
                .await
                .unwrap();
            client.submit(&payload("echo", 0, 10)).await.unwrap();
            let ended = tokio::time::timeout(STEP_TIMEOUT, master)
                .await
                .unwrap_or_else(|_| panic!("{discovery:?}: the master went on"))
                .unwrap();
            match ended {
                Err(MasterError::Request { what, error }) => {
                    assert!(
                        what.contains(&layout.assignments_dir()) && what.contains("gone"),
                        "{discovery:?}: {what}"
                    );
                    assert!(
                        matches!(error, ZkError::NoNode { .. }),
                        "{discovery:?}: {error}"
                    );
                }
                other => panic!("{discovery:?}: the master ended with {other:?}"),
            }
            worker.stop().await.0.unwrap();
        });
    }
}

#[test]
fn the_role_gives_up_on_a_root_that_cannot_be_created() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let (owner, _owner_events) = sim.connect("owner").await.unwrap();
        owner
            .create("/ephemeral", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        let layout = Layout::new("/ephemeral/zkdist").unwrap();
        let (decisions_tx, mut decisions) = tokio::sync::mpsc::unbounded_channel();
        let outcome = tokio::time::timeout(
            STEP_TIMEOUT,
            run_master_role(
                SimConnector::new(sim.clone(), "m1"),
                layout,
                TaskDiscovery::Watch,
                std::future::pending(),
                Some(decisions_tx.into()),
            ),
        )
        .await
        .expect("retrying cannot help: the role returns");
        let error = outcome.unwrap_err();
        assert!(matches!(error, MasterError::Layout { .. }), "{error:?}");
        assert!(error.to_string().contains("/ephemeral/zkdist"), "{error}");
        assert!(decisions.try_recv().is_err(), "it never claimed");
    });
}

#[test]
fn a_standing_by_role_returns_on_shutdown_without_leading() {
    run_sim(2, async {
        let sim = SimZk::start(sim_config(2, Latency::Fixed { ms: 1 }));
        let layout = Layout::default();
        let leader = start_master(&sim, "leader", &layout).await;
        let (decisions_tx, mut decisions) = tokio::sync::mpsc::unbounded_channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let role = tokio::spawn(run_master_role(
            SimConnector::new(sim.clone(), "standby"),
            layout.clone(),
            TaskDiscovery::Watch,
            async move {
                let _ = stopped.await;
            },
            Some(decisions_tx.into()),
        ));
        let first = tokio::time::timeout(STEP_TIMEOUT, decisions.recv())
            .await
            .expect("the standby decides")
            .unwrap();
        assert_eq!(first, MasterDecision::StandingBy);
        // It waits for as long as the leader leads.
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(decisions.try_recv().is_err());
        stop.send(()).unwrap();
        let outcome = tokio::time::timeout(STEP_TIMEOUT, role)
            .await
            .expect("the role stops on shutdown")
            .unwrap();
        assert_eq!(outcome, Ok(()));
        let epoch = layout.epoch();
        let version = sim
            .inspect(move |tree| tree.stat(&epoch).map(|stat| stat.version))
            .await;
        assert_eq!(version, Some(1), "only the leader was ever elected");
        leader.stop().await.0.unwrap();
    });
}

#[test]
fn tasks_submitted_across_the_sequence_counter_wrap_run_in_submission_order() {
    run_sim(7, async {
        let sim = SimZk::start(sim_config(7, Latency::Zero));
        let layout = Layout::default();
        let mut client = client(&sim, &layout).await;
        let master = start_master(&sim, "master", &layout).await;
        let worker = start_worker(&sim, "w", &layout, TestHandler).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Three creates before ZooKeeper's 32-bit counter wraps: the next
        // names end in 2147483645..=2147483647, then -2147483648 on.
        sim.set_sequence_counter(&layout.tasks_dir(), i32::MAX - 2)
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for n in 0..6 {
            // 100 ms of work each, while the six submits take no simulated
            // time: the first task still runs when the last is queued.
            tasks.push(client.submit(&payload("echo", n, 100_000)).await.unwrap());
        }
        assert!(tasks[2].as_str().ends_with("-2147483647"), "{tasks:?}");
        assert!(tasks[3].as_str().ends_with("--2147483648"), "{tasks:?}");
        for (n, task) in (0..).zip(&tasks) {
            let result = tokio::time::timeout(STEP_TIMEOUT, client.wait(task))
                .await
                .expect("every task finishes")
                .unwrap();
            assert_eq!(result, expected_result("echo", n), "{task}");
        }
        let (_, decisions) = master.stop().await;
        drop(worker);
        // One worker, all six submitted while it ran the first: every task
        // was queued before the second round, which then had the choice.
        let queued_last = decisions
            .iter()
            .position(|decision| {
                *decision
                    == MasterDecision::TaskQueued {
                        task: tasks[5].clone(),
                    }
            })
            .expect("the last task was queued");
        let second_round = decisions
            .iter()
            .enumerate()
            .filter(|(_, decision)| !decision.assigned().is_empty())
            .nth(1)
            .map(|(index, _)| index)
            .expect("a second round assigned");
        assert!(queued_last < second_round, "{decisions:#?}");
        // The queue gave them out oldest first, the wrapped names after the
        // others.
        let assigned: Vec<_> = decisions
            .iter()
            .flat_map(|decision| decision.assigned().iter().map(|(_, task)| task.clone()))
            .collect();
        assert_eq!(assigned, tasks);
    })
}

/// An operator deletes `assignments/` under a running master (a
/// `deleteall` to clear stuck assignments, say). Either discovery notices:
/// the recursive watch by the directory's own delete (or by a create
/// refused for want of it), the listing loop by a listing that finds it
/// gone. The role then lays the tree out again on a new session, and the
/// next task runs. Before, the watch discovery ignored the directory's
/// delete and blocked each worker in turn on the refused creates.
#[test]
fn a_deleted_assignments_directory_is_laid_out_again_and_work_goes_on() {
    for discovery in [TaskDiscovery::Watch, TaskDiscovery::Listing] {
        run_sim(7, async move {
            let sim = SimZk::start(sim_config(
                7,
                Latency::Uniform {
                    min_us: 200,
                    max_us: 2_000,
                },
            ));
            let layout = Layout::default();
            let mut client = client(&sim, &layout).await;
            let (operator, _operator_events) = sim.connect("operator").await.unwrap();
            let (decisions_tx, mut decisions) = tokio::sync::mpsc::unbounded_channel();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let role = tokio::spawn(run_master_role(
                SimConnector::new(sim.clone(), "master"),
                layout.clone(),
                discovery,
                async move {
                    let _ = stopped.await;
                },
                Some(decisions_tx.into()),
            ));
            let worker = start_worker(&sim, "worker", &layout, TestHandler).await;
            for n in 0..2 {
                if n == 1 {
                    // The first task is done and its assignment released:
                    // the directory is empty, and goes.
                    operator
                        .delete(&layout.assignments_dir(), None)
                        .await
                        .unwrap();
                }
                let task = client.submit(&payload("echo", n, 1_000)).await.unwrap();
                let result = tokio::time::timeout(STEP_TIMEOUT, client.wait(&task))
                    .await
                    .unwrap_or_else(|_| panic!("{discovery:?}: task {n} never finished"))
                    .unwrap();
                assert_eq!(result, expected_result("echo", n), "{discovery:?}");
            }
            let reasons: Vec<String> = std::iter::from_fn(|| decisions.try_recv().ok())
                .filter_map(|decision| match decision {
                    MasterDecision::Restarting { reason } => Some(reason),
                    _ => None,
                })
                .collect();
            assert_eq!(reasons.len(), 1, "{discovery:?}: {reasons:?}");
            assert!(
                reasons[0].contains(&layout.assignments_dir()),
                "{discovery:?}: the reason names the directory: {reasons:?}"
            );
            let _ = stop.send(());
            role.await.unwrap().unwrap();
            worker.stop().await.0.unwrap();
        });
    }
}
