//! One race of the worker's look at its assignment node, which needs the
//! worker polled late: the look's verdict ("still the node read") and a
//! `Disconnected` both ready at the same poll. The worker must act on the
//! event before it writes a result that finished during an earlier
//! outage: written then, the completion would be queued while
//! disconnected and sent on the reconnection unlooked-at, and the node
//! may have been deleted and made anew meanwhile (same path, version 0).
//!
//! The simulator delivers replies and events in the order the server sent
//! them, so the test builds the poll by hand: a session wrapper that holds
//! back the look's reply, and an event forwarder it can pause.

mod common;

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use zkdist_coord::{Coordinator, Event, Reply, Request, SessionId, ZkResult};
use zkdist_sim::{Latency, SimSession};
use zkdist_worker::{Worker, WorkerDecision, WorkerError};

use common::*;

/// A simulated session whose next `exists` of one path, once armed, has
/// its reply held back after it arrives until the test lets it go.
#[derive(Clone)]
struct HeldLook {
    inner: SimSession,
    armed_path: Arc<Mutex<Option<String>>>,
    answered: Arc<Notify>,
    let_go: Arc<Notify>,
}

impl HeldLook {
    fn new(inner: SimSession) -> HeldLook {
        HeldLook {
            inner,
            armed_path: Arc::default(),
            answered: Arc::new(Notify::new()),
            let_go: Arc::new(Notify::new()),
        }
    }

    fn arm(&self, path: String) {
        *self.armed_path.lock().unwrap() = Some(path);
    }
}

impl Coordinator for HeldLook {
    fn session_id(&self) -> SessionId {
        self.inner.session_id()
    }

    fn disconnected_grace_ms(&self) -> u64 {
        self.inner.disconnected_grace_ms()
    }

    fn call(&self, request: Request) -> impl Future<Output = ZkResult<Reply>> + Send {
        let held = match &request {
            Request::Exists { path, .. } => {
                let mut armed = self.armed_path.lock().unwrap();
                let hit = armed.as_deref() == Some(path.as_str());
                if hit {
                    *armed = None;
                }
                hit
            }
            _ => false,
        };
        let reply = self.inner.call(request);
        let (answered, let_go) = (self.answered.clone(), self.let_go.clone());
        async move {
            let reply = reply.await;
            if held {
                answered.notify_one();
                let_go.notified().await;
            }
            reply
        }
    }

    fn close(&self) -> impl Future<Output = ZkResult<()>> + Send {
        self.inner.close()
    }
}

#[test]
fn a_disconnection_ready_with_the_looks_verdict_is_acted_on_before_the_result() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: 2 }).await;
        let (session, mut sim_events) = setup.sim.connect("worker").await.unwrap();
        let zk = HeldLook::new(session.clone());

        // Events reach the worker through a forwarder that can buffer them.
        let (to_worker, worker_events) = mpsc::unbounded_channel::<Event>();
        let buffering = Arc::new(AtomicBool::new(false));
        let buffered: Arc<Mutex<VecDeque<Event>>> = Arc::default();
        tokio::spawn({
            let (to_worker, buffering, buffered) =
                (to_worker.clone(), buffering.clone(), buffered.clone());
            async move {
                while let Some(event) = sim_events.recv().await {
                    if buffering.load(Ordering::SeqCst) {
                        buffered.lock().unwrap().push_back(event);
                    } else {
                        let _ = to_worker.send(event);
                    }
                }
            }
        });

        let handler = GatedHandler::closed();
        let (decisions_tx, mut decisions) = mpsc::unbounded_channel();
        let worker = Worker::new(
            zk.clone(),
            worker_events,
            setup.layout.clone(),
            handler.clone(),
        )
        .with_observer(decisions_tx);
        let mut orphan = tokio::spawn(worker.run());
        let id = match next_decision(&mut decisions).await {
            WorkerDecision::Registered { worker } => worker,
            other => panic!("first decision {other}"),
        };
        let early = setup
            .client
            .submit(&task_payload("echo", "early"))
            .await
            .unwrap();
        assign(&setup, &id, early.as_str()).await;
        assert_eq!(
            next_decision(&mut decisions).await,
            WorkerDecision::TaskStarted {
                worker: id.clone(),
                task: early.clone()
            }
        );
        handler.wait_started().await;

        // A short outage, during which the task finishes; the look after
        // the reconnection is answered "still the node read", and held.
        zk.arm(setup.layout.assignment(&id));
        setup
            .sim
            .cut(session.session_id(), Duration::from_millis(500))
            .await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        handler.open_once();
        tokio::time::timeout(STEP_TIMEOUT, zk.answered.notified())
            .await
            .expect("the look after the reconnection is answered");

        // The link drops again as the verdict is handed over: both are
        // ready at the worker's next poll.
        buffering.store(true, Ordering::SeqCst);
        setup
            .sim
            .cut(session.session_id(), Duration::from_secs(2))
            .await;
        while buffered.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        for event in buffered.lock().unwrap().drain(..) {
            let _ = to_worker.send(event);
        }
        buffering.store(false, Ordering::SeqCst);
        zk.let_go.notify_one();

        // During the outage the root is deleted and made anew; a new
        // worker takes the id, and is given a task.
        let (_successor, successor_handler, late) = remake_root_with_successor(&setup, &id).await;

        // Reconnected, the orphan looks again, sees another node, and
        // leaves: its registration is another session's.
        let orphan_end = tokio::time::timeout(STEP_TIMEOUT, &mut orphan)
            .await
            .expect("the orphan leaves after the reconnection");
        assert_eq!(
            orphan_end.unwrap(),
            Err(WorkerError::Deregistered {
                registration: setup.layout.worker(&id)
            })
        );
        let assignment = setup.layout.assignment(&id);
        assert!(
            setup
                .sim
                .inspect(move |tree| tree.exists(&assignment))
                .await,
            "the successor's assignment stands"
        );
        successor_finishes(&mut setup, &successor_handler, &late).await;
    });
}
