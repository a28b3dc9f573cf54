//! The worker role on the simulator: it outlives its sessions, joining
//! again under a new id after one ends, and stops cleanly on shutdown.

mod common;

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use zkdist_coord::{Coordinator, CreateMode, Layout, SessionId, TaskResult, Watch, WorkerId};
use zkdist_sim::{Latency, SimConnector};
use zkdist_worker::{WorkerDecision, WorkerError, run_worker_role};

use common::*;

struct RunningRole {
    stop: Option<oneshot::Sender<()>>,
    handle: JoinHandle<Result<(), WorkerError>>,
    decisions: mpsc::UnboundedReceiver<WorkerDecision>,
}

impl RunningRole {
    fn start(setup: &Setup, handler: GatedHandler) -> RunningRole {
        let (decisions_tx, decisions) = mpsc::unbounded_channel();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let connector = SimConnector::new(setup.sim.clone(), "worker");
        let handle = tokio::spawn(run_worker_role(
            connector,
            setup.layout.clone(),
            handler,
            async move {
                let _ = stop_rx.await;
            },
            Some(decisions_tx.into()),
        ));
        RunningRole {
            stop: Some(stop),
            handle,
            decisions,
        }
    }

    async fn next_decision(&mut self) -> WorkerDecision {
        next_decision(&mut self.decisions).await
    }

    fn stop(&mut self) {
        let stop = self.stop.take().expect("stopped once");
        let _ = stop.send(());
    }

    async fn finished(&mut self) -> Result<(), WorkerError> {
        tokio::time::timeout(STEP_TIMEOUT, &mut self.handle)
            .await
            .expect("the role returns in time")
            .expect("the role does not panic")
    }

    async fn registered(&mut self) -> WorkerId {
        match self.next_decision().await {
            WorkerDecision::Registered { worker } => worker,
            other => panic!("expected a registration, got {other}"),
        }
    }
}

/// The session that owns `worker`'s registration.
async fn session_of(setup: &Setup, worker: &WorkerId) -> SessionId {
    let registration = setup.layout.worker(worker);
    let owner = setup
        .sim
        .inspect(move |tree| tree.stat(&registration).map(|stat| stat.ephemeral_owner))
        .await
        .expect("the worker is registered");
    SessionId(owner)
}

#[test]
fn after_expiry_mid_task_the_role_abandons_it_and_joins_again_under_a_new_id() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let handler = GatedHandler::closed();
        let mut role = RunningRole::start(&setup, handler.clone());
        let first = role.registered().await;
        let task = setup
            .client
            .submit(&task_payload("echo", "once"))
            .await
            .unwrap();
        assign(&setup, &first, task.as_str()).await;
        assert_eq!(
            role.next_decision().await,
            WorkerDecision::TaskStarted {
                worker: first.clone(),
                task: task.clone()
            }
        );
        handler.wait_started().await;

        let first_session = session_of(&setup, &first).await;
        setup.sim.expire(first_session).await;
        assert_eq!(
            role.next_decision().await,
            WorkerDecision::TaskAbandoned {
                worker: first.clone(),
                task: task.clone()
            }
        );
        assert_eq!(
            role.next_decision().await,
            WorkerDecision::SessionLost {
                worker: first.clone()
            }
        );
        let second = role.registered().await;
        assert_ne!(second, first, "a new session, a new id");
        assert_ne!(session_of(&setup, &second).await, first_session);
        let result_path = setup.layout.result(&task);
        let watched = result_path.clone();
        assert!(
            !setup.sim.inspect(move |tree| tree.exists(&watched)).await,
            "the abandoned task has no result"
        );
        assert_eq!(
            handler.gate.available_permits(),
            0,
            "no permit was given yet"
        );

        // The master's part: the old assignment is stale, the task goes to
        // the new worker, which runs it.
        setup
            .master
            .delete(&setup.layout.assignment(&first), None)
            .await
            .unwrap();
        handler.open_once();
        assign(&setup, &second, task.as_str()).await;
        assert_eq!(
            setup.client.wait(&task).await.unwrap(),
            TaskResult::Success {
                output: b"once".to_vec()
            }
        );
        assert_eq!(
            role.next_decision().await,
            WorkerDecision::TaskStarted {
                worker: second.clone(),
                task: task.clone()
            }
        );
        assert_eq!(
            role.next_decision().await,
            WorkerDecision::ResultWritten {
                worker: second.clone(),
                task: task.clone(),
                success: true
            }
        );

        role.stop();
        assert_eq!(role.finished().await, Ok(()));
        let trace = setup.sim.trace().await;
        assert_eq!(
            count_lines(&trace, "connect worker.2 as session"),
            1,
            "the role opened a second session"
        );
        assert_eq!(count_lines(&trace, "connect worker.3 as session"), 0);
    });
}

#[test]
fn a_short_disconnection_keeps_the_session_and_the_id() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let handler = GatedHandler::closed();
        let mut role = RunningRole::start(&setup, handler.clone());
        let id = role.registered().await;
        let session = session_of(&setup, &id).await;
        setup.sim.cut(session, Duration::from_secs(1)).await;

        let task = setup
            .client
            .submit(&task_payload("echo", "same"))
            .await
            .unwrap();
        handler.open_once();
        assign(&setup, &id, task.as_str()).await;
        assert_eq!(
            setup.client.wait(&task).await.unwrap(),
            TaskResult::Success {
                output: b"same".to_vec()
            }
        );
        assert!(matches!(
            role.next_decision().await,
            WorkerDecision::TaskStarted { worker, .. } if worker == id
        ));
        role.stop();
        assert_eq!(role.finished().await, Ok(()));
        let rest: Vec<String> = std::iter::from_fn(|| role.decisions.try_recv().ok())
            .map(|decision| decision.to_string())
            .collect();
        assert!(
            rest.iter().all(|line| line.starts_with(id.as_str())),
            "one worker id throughout: {rest:?}"
        );
        assert!(rest.contains(&format!("{id} deregistered")), "{rest:?}");
    });
}

#[test]
fn shutdown_mid_task_finishes_it_deregisters_and_closes_the_session() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let handler = GatedHandler::closed();
        let mut role = RunningRole::start(&setup, handler.clone());
        let id = role.registered().await;
        let session = session_of(&setup, &id).await;
        let task = setup
            .client
            .submit(&task_payload("echo", "last"))
            .await
            .unwrap();
        assign(&setup, &id, task.as_str()).await;
        handler.wait_started().await;
        role.stop();
        assert_eq!(
            role.next_decision().await,
            WorkerDecision::TaskStarted {
                worker: id.clone(),
                task: task.clone()
            }
        );
        assert_eq!(
            role.next_decision().await,
            WorkerDecision::StopRequested { worker: id.clone() }
        );
        handler.open_once();
        assert_eq!(role.finished().await, Ok(()));
        assert_eq!(
            setup.client.wait(&task).await.unwrap(),
            TaskResult::Success {
                output: b"last".to_vec()
            }
        );
        let rest: Vec<WorkerDecision> =
            std::iter::from_fn(|| role.decisions.try_recv().ok()).collect();
        assert_eq!(
            rest.last(),
            Some(&WorkerDecision::Deregistered { worker: id.clone() })
        );
        // The session was closed, not left to time out: its id node is gone
        // at once.
        let ids_dir = setup.layout.ids_dir();
        let (ids, _) = setup
            .master
            .get_children(&ids_dir, Watch::No)
            .await
            .unwrap();
        assert!(ids.is_empty(), "{ids:?}");
        let trace = setup.sim.trace().await;
        assert_eq!(count_lines(&trace, "worker close"), 1, "{session:?}");
    });
}

#[test]
fn a_layout_that_cannot_be_created_stops_the_role_with_a_clear_error() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 1 }).await;
        setup
            .master
            .create("/ephemeral", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        let connector = SimConnector::new(setup.sim.clone(), "worker");
        let layout = Layout::new("/ephemeral/zkdist").unwrap();
        let error = run_worker_role(
            connector,
            layout,
            GatedHandler::closed(),
            std::future::pending(),
            None,
        )
        .await
        .unwrap_err();
        assert!(matches!(error, WorkerError::Layout { .. }), "{error:?}");
        assert!(error.to_string().contains("/ephemeral/zkdist"), "{error}");
    });
}
