//! A worker process killed mid-task and restarted, through madsim's node
//! kill and restart (simulator lane only: `cargo sim`).
//!
//! The worker runs in a madsim node of its own, as a separate process
//! would; the simulated ZooKeeper, the master and the client run on the
//! main node. Killing the node drops every task of the worker at once: no
//! code of it runs again. What a real server then sees of a dead process is
//! a connection that went silent, which is what [`SimZk::crash`] simulates:
//! the server expires the session after the session timeout and deletes the
//! worker's ephemeral registration. Dropping a `SimSession`'s last handle
//! closes the session, as a live process does; a killed one must not, so
//! the test crashes the session first, with no await between the crash and
//! the kill (`crash` takes its place in the simulation's order when called),
//! and the handles the kill drops then find a crashed session and close
//! nothing. Restarting the node runs its initial task again: a new process,
//! with a new session and a new worker id.
//!
//! The task the dead worker held is not lost: once the server expires the
//! dead worker's session, the master reclaims (deletes) its assignment and
//! re-queues the task, which the restarted worker (a new id) then runs to
//! its one result, before the task submitted after it.

#![cfg(madsim)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use madsim::runtime::Handle;
use madsim::task::NodeId;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use tokio::time::Instant;
use zkdist_coord::{Coordinator, Layout, SessionId, TaskId, WorkerId};
use zkdist_master::{MasterDecision, RequeueReason};
use zkdist_sim::runtime::{check_determinism, current_seed};
use zkdist_sim::{Latency, SimConfig, SimZk};
use zkdist_worker::{Worker, WorkerDecision};

use common::*;

const SESSION_TIMEOUT_MS: u64 = 2_000;
/// The killed worker's task: long enough that the kill lands mid-task.
const LONG_WORK_US: u64 = 5_000_000;
/// The longest a step may take in simulated time: a hang guard, not a
/// speed check.
const HANG_GUARD: Duration = Duration::from_secs(600);
const SEEDS: std::ops::Range<u64> = 0..20;

/// A worker process: a madsim node whose initial task connects a session
/// and runs a worker on it until the node dies. Each incarnation reports
/// its session id and its decisions to the test.
struct WorkerProcess {
    node: NodeId,
    sessions: mpsc::UnboundedReceiver<SessionId>,
    decisions: mpsc::UnboundedReceiver<WorkerDecision>,
    /// The session of the incarnation running now.
    session: Option<SessionId>,
}

impl WorkerProcess {
    fn spawn(sim: &SimZk, layout: &Layout) -> WorkerProcess {
        let (sessions_tx, sessions) = mpsc::unbounded_channel();
        let (decisions_tx, decisions) = mpsc::unbounded_channel();
        let incarnations = Arc::new(AtomicU64::new(0));
        let sim = sim.clone();
        let layout = layout.clone();
        let node = Handle::current()
            .create_node()
            .name("worker-process")
            .init(move || {
                let incarnation = incarnations.fetch_add(1, Ordering::Relaxed) + 1;
                let sim = sim.clone();
                let layout = layout.clone();
                let sessions_tx = sessions_tx.clone();
                let decisions_tx = decisions_tx.clone();
                async move {
                    let (zk, events) = sim
                        .connect(&format!("worker-process-{incarnation}"))
                        .await
                        .expect("the worker process connects");
                    let _ = sessions_tx.send(zk.session_id());
                    let outcome = Worker::new(zk, events, layout, TestHandler)
                        .with_observer(decisions_tx)
                        .run()
                        .await;
                    panic!("the worker process ended on its own: {outcome:?}");
                }
            })
            .build();
        WorkerProcess {
            node: node.id(),
            sessions,
            decisions,
            session: None,
        }
    }

    /// Waits for the current incarnation to connect and register.
    async fn registered(&mut self) -> (SessionId, WorkerId) {
        let session = tokio::time::timeout(HANG_GUARD, self.sessions.recv())
            .await
            .expect("the worker process connects in time")
            .expect("the node's task holds the sender");
        self.session = Some(session);
        match self.next_decision().await {
            WorkerDecision::Registered { worker } => (session, worker),
            other => panic!("the worker's first decision is {other}"),
        }
    }

    async fn next_decision(&mut self) -> WorkerDecision {
        tokio::time::timeout(HANG_GUARD, self.decisions.recv())
            .await
            .expect("a worker decision in time")
            .expect("the node's task holds the sender")
    }

    /// Kills the process: the server sees its connection go silent, and
    /// madsim drops all of its tasks. The crash is ordered before the kill,
    /// so the session handles the kill drops close nothing, and no task of
    /// the process runs between the two.
    async fn kill(&mut self, sim: &SimZk) {
        let session = self.session.take().expect("the process is running");
        let crashed = sim.crash(session);
        Handle::current().kill(self.node);
        crashed.await;
    }

    fn restart(&self) {
        Handle::current().restart(self.node);
    }
}

/// Every `Round` that assigned `task`.
fn assignments_of<'a>(decisions: &'a [MasterDecision], task: &TaskId) -> Vec<&'a WorkerId> {
    decisions
        .iter()
        .flat_map(MasterDecision::assigned)
        .filter(|(_, assigned)| assigned == task)
        .map(|(worker, _)| worker)
        .collect()
}

async fn kill_mid_task_then_restart(seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6b69_6c6c);
    let sim = SimZk::start(SimConfig {
        seed,
        latency: Latency::Uniform {
            min_us: 100,
            max_us: 3_000,
        },
        session_timeout_ms: SESSION_TIMEOUT_MS,
        ..SimConfig::default()
    });
    let layout = Layout::default();
    let mut client = client(&sim, &layout).await;
    let master = start_master(&sim, "master", &layout).await;
    let mut process = WorkerProcess::spawn(&sim, &layout);
    let (first_session, first) = process.registered().await;

    let lost = client
        .submit(&payload("echo", 1, LONG_WORK_US))
        .await
        .expect("submit");
    assert_eq!(
        process.next_decision().await,
        WorkerDecision::TaskStarted {
            worker: first.clone(),
            task: lost.clone()
        }
    );
    // Somewhere in the first four of the task's five simulated seconds.
    tokio::time::sleep(Duration::from_micros(rng.random_range(0..4_000_000))).await;
    let crashed_at = Instant::now();
    process.kill(&sim).await;
    assert!(Handle::current().is_exit(process.node));

    // The server keeps the dead worker registered until its session
    // times out, then deletes the registration.
    let registration = layout.worker(&first);
    let still_there = registration.clone();
    assert!(sim.inspect(move |tree| tree.exists(&still_there)).await);
    tokio::time::timeout(
        HANG_GUARD,
        sim.run_until(move |tree| !tree.exists(&registration)),
    )
    .await
    .expect("the server expires the dead worker's session");
    // The simulator's clock counts whole microseconds, hence the 1 µs.
    let expired_after = crashed_at.elapsed() + Duration::from_micros(1);
    assert!(
        expired_after >= Duration::from_millis(SESSION_TIMEOUT_MS)
            && expired_after <= Duration::from_millis(SESSION_TIMEOUT_MS + 5),
        "seed {seed}: expired {expired_after:?} after the crash"
    );
    // Nothing of the killed process ran after the kill.
    assert!(
        process.decisions.try_recv().is_err(),
        "seed {seed}: the killed worker took a decision"
    );

    process.restart();
    let (second_session, second) = process.registered().await;
    assert_ne!(
        second_session, first_session,
        "a new process, a new session"
    );
    assert_ne!(second, first, "a new process, a new worker id");

    let next = client
        .submit(&payload("echo", 2, 1_000))
        .await
        .expect("submit");
    // The re-queued task runs again, on the restarted worker, and gets its
    // result; the task submitted after it follows.
    let lost_result = tokio::time::timeout(HANG_GUARD, client.wait(&lost))
        .await
        .expect("the dead worker's task is run again")
        .expect("wait");
    assert_eq!(lost_result, expected_result("echo", 1), "seed {seed}");
    let result = tokio::time::timeout(HANG_GUARD, client.wait(&next))
        .await
        .expect("the restarted worker runs the next task")
        .expect("wait");
    assert_eq!(result, expected_result("echo", 2), "seed {seed}");
    let stale_assignment = layout.assignment(&first);
    assert!(
        !sim.inspect(move |tree| tree.exists(&stale_assignment))
            .await,
        "seed {seed}: the dead worker's assignment node was reclaimed"
    );

    let (outcome, master_decisions) = master.stop().await;
    outcome.expect("the master ran until stopped");
    let position = |wanted: &MasterDecision| {
        master_decisions
            .iter()
            .position(|decision| decision == wanted)
            .unwrap_or_else(|| panic!("seed {seed}: no {wanted} in {master_decisions:#?}"))
    };
    let left = position(&MasterDecision::WorkerLeft {
        worker: first.clone(),
        held_task: Some(lost.clone()),
    });
    let reclaimed = position(&MasterDecision::AssignmentReclaimed {
        worker: first.clone(),
        task: lost.clone(),
        deleted: true,
    });
    let requeued = position(&MasterDecision::TaskRequeued {
        task: lost.clone(),
        reason: RequeueReason::WorkerGone {
            worker: first.clone(),
        },
    });
    assert!(left < reclaimed && reclaimed < requeued, "seed {seed}");
    assert_eq!(
        assignments_of(&master_decisions, &lost),
        vec![&first, &second]
    );
    assert_eq!(assignments_of(&master_decisions, &next), vec![&second]);
    assert!(!sim.trace().await.is_empty());
}

#[test]
fn a_worker_killed_mid_task_expires_its_task_is_requeued_and_it_restarts_as_a_new_worker() {
    for seed in SEEDS {
        run_sim(seed, kill_mid_task_then_restart(seed));
    }
}

/// Killing and restarting nodes keeps a run a function of its seed.
#[test]
fn killing_and_restarting_a_worker_is_deterministic() {
    for seed in [SEEDS.start, SEEDS.end - 1] {
        check_determinism(seed, || async {
            kill_mid_task_then_restart(current_seed()).await
        });
    }
}
