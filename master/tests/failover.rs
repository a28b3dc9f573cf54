//! Failures the master must survive, end to end on the simulator: the
//! leading master's session expiring, its process crashing, or its link
//! cut past the session timeout while a standby waits, and a worker dying
//! mid-task. In each case every task finishes exactly once, checked on the
//! server's tree.

mod common;

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use zkdist_coord::{Coordinator, Layout, SessionId, TaskId, Watch};
use zkdist_master::{
    Epoch, MasterDecision, MasterError, RequeueReason, TaskDiscovery, run_master_role,
};
use zkdist_sim::{Latency, SimConfig, SimConnector, SimZk};
use zkdist_worker::WorkerDecision;

use common::ground::watch_ground;
use common::*;

const SESSION_TIMEOUT_MS: u64 = 2_000;
/// Far more simulated time than any step needs: a hang guard, not a speed
/// check.
const HANG_GUARD: Duration = Duration::from_secs(600);
const TASKS: u64 = 40;
const WORKERS: usize = 3;

/// A master candidate running `run_master_role` on sessions named after it.
struct Candidate {
    stop: oneshot::Sender<()>,
    handle: JoinHandle<Result<(), MasterError>>,
    decisions: mpsc::UnboundedReceiver<MasterDecision>,
    seen: Vec<MasterDecision>,
}

impl Candidate {
    fn start(sim: &SimZk, name: &str, layout: &Layout) -> Candidate {
        let (decisions_tx, decisions) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(run_master_role(
            SimConnector::new(sim.clone(), name),
            layout.clone(),
            TaskDiscovery::Watch,
            async move {
                let _ = stopped.await;
            },
            Some(decisions_tx.into()),
        ));
        Candidate {
            stop,
            handle,
            decisions,
            seen: Vec::new(),
        }
    }

    /// Waits for a decision matching `wanted`, keeping every one seen.
    async fn wait_for(&mut self, wanted: impl Fn(&MasterDecision) -> bool) -> MasterDecision {
        loop {
            let decision = tokio::time::timeout(HANG_GUARD, self.decisions.recv())
                .await
                .expect("the candidate decides in time")
                .expect("the candidate is running");
            self.seen.push(decision.clone());
            if wanted(&decision) {
                return decision;
            }
        }
    }

    /// Stops the role and returns every decision it took.
    async fn stop(mut self) -> Vec<MasterDecision> {
        let _ = self.stop.send(());
        let outcome = tokio::time::timeout(HANG_GUARD, self.handle)
            .await
            .expect("the role stops on shutdown")
            .expect("the role does not panic");
        assert_eq!(outcome, Ok(()), "the role returns Ok on shutdown");
        while let Ok(decision) = self.decisions.try_recv() {
            self.seen.push(decision);
        }
        self.seen
    }
}

/// The session holding the `master` node, from the node's data.
async fn leader_session(sim: &SimZk, layout: &Layout) -> SessionId {
    let path = layout.master();
    let data = sim
        .inspect(move |tree| tree.data(&path).map(<[u8]>::to_vec))
        .await
        .expect("a master leads");
    let text = String::from_utf8(data).expect("a session id is text");
    let hex = text.strip_prefix("0x").expect("a session id is 0x-hex");
    SessionId(i64::from_str_radix(hex, 16).expect("a session id is 0x-hex"))
}

fn elected_epochs(decisions: &[MasterDecision]) -> Vec<Epoch> {
    decisions
        .iter()
        .filter_map(|decision| match decision {
            MasterDecision::Elected { epoch } => Some(*epoch),
            _ => None,
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MasterFault {
    /// The server expires the leader's session; its process lives on and
    /// joins again with a new session.
    Expire,
    /// The leader's process dies; the server expires its session after the
    /// session timeout.
    Crash,
    /// The leader's link is cut for longer than the session timeout: the
    /// server expires the session while the leader hears nothing, and the
    /// leader learns it only when the link heals, after the standby took
    /// over.
    Partition,
}

async fn failover(seed: u64, fault: MasterFault) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6661_696c);
    let sim = SimZk::start(SimConfig {
        seed,
        latency: Latency::Uniform {
            min_us: 100,
            max_us: 2_000,
        },
        session_timeout_ms: SESSION_TIMEOUT_MS,
        ..SimConfig::default()
    });
    let layout = Layout::default();
    let ground = watch_ground(&sim, &layout).await;
    let mut client = client(&sim, &layout).await;

    let mut first = Candidate::start(&sim, "m1", &layout);
    let elected = first
        .wait_for(|d| matches!(d, MasterDecision::Elected { .. }))
        .await;
    assert_eq!(elected, MasterDecision::Elected { epoch: Epoch(1) });
    let mut second = Candidate::start(&sim, "m2", &layout);
    second.wait_for(|d| *d == MasterDecision::StandingBy).await;

    let mut workers = Vec::new();
    for i in 0..WORKERS {
        workers.push(start_worker(&sim, &format!("w{i}"), &layout, TestHandler).await);
    }
    let mut submitted: Vec<TaskId> = Vec::new();
    for n in 0..TASKS {
        let work_us = rng.random_range(1_000..=30_000);
        submitted.push(client.submit(&payload("echo", n, work_us)).await.unwrap());
    }

    // Some tasks are done, some running, most waiting when the fault hits.
    tokio::time::timeout(HANG_GUARD, client.wait(&submitted[5]))
        .await
        .expect("the first master runs tasks")
        .unwrap();
    tokio::time::sleep(Duration::from_micros(rng.random_range(0..20_000))).await;
    let leader = leader_session(&sim, &layout).await;
    let assigned_before_fault = ground.lock().unwrap().assignments_created.len();
    assert!(
        assigned_before_fault < submitted.len() - WORKERS,
        "seed {seed}: tasks are left for the successor to assign"
    );
    // The first candidate: still running, or what it decided before it
    // died.
    let first = match fault {
        MasterFault::Expire => {
            sim.expire(leader).await;
            Ok(first)
        }
        MasterFault::Partition => {
            sim.cut(leader, Duration::from_millis(SESSION_TIMEOUT_MS + 1_000))
                .await;
            Ok(first)
        }
        MasterFault::Crash => {
            // The crash takes its place in the simulation when called, and
            // the process's task is gone before it can run again.
            let crashed = sim.crash(leader);
            first.handle.abort();
            crashed.await;
            let mut seen = first.seen;
            while let Ok(decision) = first.decisions.try_recv() {
                seen.push(decision);
            }
            Err(seen)
        }
    };

    for (n, task) in submitted.iter().enumerate() {
        let result = tokio::time::timeout(HANG_GUARD, client.wait(task))
            .await
            .unwrap_or_else(|_| panic!("seed {seed} {fault:?}: {task} never finished"))
            .unwrap();
        assert_eq!(result, expected_result("echo", n as u64), "seed {seed}");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let first = match first {
        Ok(running) => running.stop().await,
        Err(seen) => seen,
    };
    let decisions = [first, second.stop().await];
    for worker in workers {
        worker.stop().await.0.expect("no worker died");
    }

    // One more master was elected, in the next epoch, and it rebuilt its
    // state from the tree before assigning anything.
    let mut epochs: Vec<Epoch> = decisions.iter().flat_map(|d| elected_epochs(d)).collect();
    epochs.sort();
    assert_eq!(epochs, [Epoch(1), Epoch(2)], "seed {seed} {fault:?}");
    let successor = decisions
        .iter()
        .find(|d| elected_epochs(d).contains(&Epoch(2)))
        .expect("someone was elected in epoch 2");
    let elected_at = successor
        .iter()
        .position(|d| *d == MasterDecision::Elected { epoch: Epoch(2) })
        .unwrap();
    let after: &[MasterDecision] = &successor[elected_at..];
    let initialised = after
        .iter()
        .position(|d| matches!(d, MasterDecision::Initialised { .. }))
        .expect("the successor initialised");
    assert!(
        after[..initialised].iter().all(|d| d.assigned().is_empty()),
        "seed {seed}: nothing assigned before the state was rebuilt"
    );
    if let MasterDecision::Initialised { pending_tasks, .. } = &after[initialised] {
        assert!(
            *pending_tasks > 0,
            "seed {seed}: the successor found tasks waiting"
        );
    }
    if fault != MasterFault::Expire {
        assert_eq!(elected_epochs(&decisions[1]), [Epoch(2)], "the standby won");
    }
    if fault != MasterFault::Crash {
        assert!(
            decisions[0].contains(&MasterDecision::SessionLost {
                state: Some(zkdist_coord::SessionState::Expired)
            }),
            "seed {seed}: the expired master noticed"
        );
    }

    // The tree: every task assigned once, in submission order across the
    // failover, never to two workers at once, and given one result.
    let ground = ground.lock().unwrap().clone();
    let names: Vec<String> = submitted.iter().map(|t| t.to_string()).collect();
    assert_eq!(ground.assigned_tasks(), names, "seed {seed} {fault:?}");
    assert!(ground.assigned_twice.is_empty(), "seed {seed}");
    assert_eq!(ground.results_created.len(), names.len());
    assert!(
        ground.results_created.values().all(|count| *count == 1),
        "seed {seed}: {:?}",
        ground.results_created
    );
}

#[test]
fn a_standby_takes_over_when_the_masters_session_expires() {
    for seed in 0..6 {
        run_sim(seed, failover(seed, MasterFault::Expire));
    }
}

#[test]
fn a_standby_takes_over_when_the_master_process_crashes() {
    for seed in 0..6 {
        run_sim(seed, failover(seed, MasterFault::Crash));
    }
}

/// A worker dies holding a long task: once the server expires its session,
/// the master reclaims the assignment and re-queues the task at its place,
/// ahead of later tasks, and another worker runs it.
#[test]
fn a_dead_workers_task_is_requeued_and_finishes_on_another_worker() {
    run_sim(11, async {
        let sim = SimZk::start(SimConfig {
            seed: 11,
            latency: Latency::Uniform {
                min_us: 100,
                max_us: 1_000,
            },
            session_timeout_ms: SESSION_TIMEOUT_MS,
            ..SimConfig::default()
        });
        let layout = Layout::default();
        let ground = watch_ground(&sim, &layout).await;
        let mut client = client(&sim, &layout).await;
        let master = start_master(&sim, "master", &layout).await;

        let (doomed_zk, doomed_events) = sim.connect("doomed").await.unwrap();
        let doomed_session = doomed_zk.session_id();
        let mut doomed = spawn_worker(doomed_zk, doomed_events, &layout, TestHandler);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let doomed_id = match doomed.decisions_so_far().first() {
            Some(WorkerDecision::Registered { worker }) => worker.clone(),
            other => panic!("first decision {other:?}"),
        };
        // Task 0 runs for 10 s on the doomed worker.
        let long = client
            .submit(&payload("echo", 0, 10_000_000))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(matches!(
            doomed.decisions_so_far().as_slice(),
            [WorkerDecision::TaskStarted { task, .. }] if *task == long
        ));

        // The survivor is busy with task 1 when task 0 comes back; task 2
        // waits behind task 0 although it was queued before the re-queue.
        let survivor = start_worker(&sim, "survivor", &layout, TestHandler).await;
        let busy = client.submit(&payload("echo", 1, 5_000_000)).await.unwrap();
        let later = client.submit(&payload("echo", 2, 1_000)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The worker's process dies: its session goes silent, and its task
        // is gone before it can run again.
        let crashed = sim.crash(doomed_session);
        doomed.abort();
        crashed.await;

        for (n, task) in [(0, &long), (1, &busy), (2, &later)] {
            let result = tokio::time::timeout(HANG_GUARD, client.wait(task))
                .await
                .expect("every task finishes")
                .unwrap();
            assert_eq!(result, expected_result("echo", n));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (state, decisions) = master.stop().await;
        let state = state.unwrap();

        let position = |wanted: &MasterDecision| {
            decisions
                .iter()
                .position(|decision| decision == wanted)
                .unwrap_or_else(|| panic!("no {wanted} in {decisions:#?}"))
        };
        let left = position(&MasterDecision::WorkerLeft {
            worker: doomed_id.clone(),
            held_task: Some(long.clone()),
        });
        let reclaimed = position(&MasterDecision::AssignmentReclaimed {
            worker: doomed_id.clone(),
            task: long.clone(),
            deleted: true,
        });
        let requeued = position(&MasterDecision::TaskRequeued {
            task: long.clone(),
            reason: RequeueReason::WorkerGone {
                worker: doomed_id.clone(),
            },
        });
        assert!(left < reclaimed && reclaimed < requeued);
        // Re-queued ahead of task 2: the survivor ran 1, then 0, then 2.
        let order: Vec<TaskId> = decisions
            .iter()
            .flat_map(|d| d.assigned().iter().map(|(_, task)| task.clone()))
            .collect();
        assert_eq!(
            order,
            [long.clone(), busy.clone(), long.clone(), later.clone()]
        );

        let ground = ground.lock().unwrap().clone();
        assert!(ground.assigned_twice.is_empty());
        assert!(ground.results_created.values().all(|count| *count == 1));
        assert_eq!(ground.results_created.len(), 3);
        survivor.stop().await.0.unwrap();
        let exists = client
            .session()
            .exists(&layout.assignment(&doomed_id), Watch::No)
            .await
            .unwrap();
        assert!(exists.is_none(), "the dead worker's assignment is gone");
        assert!(state.pending_tasks().is_empty());
        assert_eq!(state.reclaiming().count(), 0);
        assert_eq!(state.workers().len(), 1, "only the survivor is left");
    });
}

#[test]
fn a_standby_takes_over_while_the_master_is_partitioned() {
    for seed in 0..6 {
        run_sim(seed, failover(seed, MasterFault::Partition));
    }
}

/// Failover keeps a run a function of its seed, under madsim's randomized
/// scheduling too.
#[cfg(madsim)]
#[test]
fn failover_is_deterministic() {
    use zkdist_sim::runtime::{check_determinism, current_seed};
    check_determinism(3, || async {
        failover(current_seed(), MasterFault::Expire).await
    });
    check_determinism(4, || async {
        failover(current_seed(), MasterFault::Crash).await
    });
}
