//! A connection loss with an assignment create in flight: the create may or
//! may not have been applied (the simulator applies a seeded prefix of the
//! requests in flight when a link is cut). The master never sends it again
//! blindly: it reads the assignment back, and either keeps it (applied) or
//! re-queues the task and assigns it anew (not applied). Either way the
//! tree sees exactly one assignment of the task, and it runs once.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use zkdist_coord::{Coordinator, Layout};
use zkdist_master::{MasterDecision, Recovery, RequeueReason};
use zkdist_sim::{Latency, SimZk};

use common::ground::watch_ground;
use common::*;

const HANG_GUARD: Duration = Duration::from_secs(600);
const SEEDS: std::ops::Range<u64> = 0..16;

/// Runs one seed; returns how the create in doubt was settled.
async fn cut_during_create(seed: u64) -> Recovery {
    let sim = SimZk::start(sim_config(
        seed,
        Latency::Uniform {
            min_us: 500,
            max_us: 3_000,
        },
    ));
    let layout = Layout::default();
    let ground = watch_ground(&sim, &layout).await;
    let mut client = client(&sim, &layout).await;
    let (zk, events) = sim.connect("master").await.unwrap();
    let master_session = zk.session_id();
    let mut master = spawn_master(zk, events, &layout).await;
    let worker = start_worker(&sim, "worker", &layout, TestHandler).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = master.decisions_so_far();

    let task = client.submit(&payload("echo", 1, 1_000)).await.unwrap();
    // The round's decision is published just before its create is sent:
    // cut the link while the create travels.
    loop {
        let decision = tokio::time::timeout(HANG_GUARD, master.next_decision())
            .await
            .expect("a round in time")
            .expect("the master runs");
        if !decision.assigned().is_empty() {
            break;
        }
    }
    sim.cut(master_session, Duration::from_millis(500)).await;

    let result = tokio::time::timeout(HANG_GUARD, client.wait(&task))
        .await
        .expect("the task finishes after the link heals")
        .unwrap();
    assert_eq!(result, expected_result("echo", 1), "seed {seed}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (state, decisions) = master.stop().await;
    let state = state.unwrap();
    worker.stop().await.0.unwrap();

    let worker_id = state.workers().keys().next().expect("one worker").clone();
    assert!(
        decisions.contains(&MasterDecision::AssignmentInDoubt {
            worker: worker_id.clone(),
            task: task.clone()
        }),
        "seed {seed}: {decisions:#?}"
    );
    let recovery = decisions
        .iter()
        .find_map(|decision| match decision {
            MasterDecision::AssignmentRecovered { recovery, .. } => Some(*recovery),
            _ => None,
        })
        .expect("the create in doubt was read back");
    let requeued = decisions.contains(&MasterDecision::TaskRequeued {
        task: task.clone(),
        reason: RequeueReason::AssignmentNotApplied { worker: worker_id },
    });
    assert_eq!(requeued, recovery == Recovery::NotApplied, "seed {seed}");
    // Assigned in the tree exactly once, whichever way it went.
    let ground = ground.lock().unwrap().clone();
    assert_eq!(ground.assigned_tasks(), [task.to_string()], "seed {seed}");
    assert_eq!(ground.results_created.get(task.as_str()), Some(&1));
    assert!(state.pending_tasks().is_empty());
    assert_eq!(state.idle_workers().count(), 1);
    recovery
}

#[test]
fn a_create_cut_off_in_flight_is_read_back_and_applied_exactly_once() {
    let mut seen = BTreeSet::new();
    for seed in SEEDS {
        seen.insert(format!("{:?}", run_sim(seed, cut_during_create(seed))));
    }
    // The seeds reach both sides of the cut.
    assert!(seen.contains("NotApplied"), "{seen:?}");
    assert!(
        seen.contains("Applied") || seen.contains("AppliedAndFinished"),
        "{seen:?}"
    );
}

/// Runs one seed of a reclaim cut off in flight; returns whether the
/// reclaim that finally answered deleted the node (false: an attempt cut
/// off in flight had been applied, and the repeat found it gone).
async fn cut_during_reclaim(seed: u64) -> bool {
    let sim = SimZk::start(zkdist_sim::SimConfig {
        seed,
        latency: Latency::Uniform {
            min_us: 500,
            max_us: 3_000,
        },
        session_timeout_ms: 2_000,
        ..zkdist_sim::SimConfig::default()
    });
    let layout = Layout::default();
    let ground = watch_ground(&sim, &layout).await;
    let mut client = client(&sim, &layout).await;
    let (zk, events) = sim.connect("master").await.unwrap();
    let master_session = zk.session_id();
    let mut master = spawn_master(zk, events, &layout).await;
    let (doomed_zk, doomed_events) = sim.connect("doomed").await.unwrap();
    let doomed_session = doomed_zk.session_id();
    let doomed = spawn_worker(doomed_zk, doomed_events, &layout, TestHandler);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let task = client
        .submit(&payload("echo", 1, 10_000_000))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let survivor = start_worker(&sim, "survivor", &layout, TestHandler).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let crashed = sim.crash(doomed_session);
    doomed.abort();
    crashed.await;

    // The worker's departure and the reclaim's request come in one step.
    loop {
        let decision = tokio::time::timeout(HANG_GUARD, master.next_decision())
            .await
            .expect("the worker's departure in time")
            .expect("the master runs");
        if matches!(decision, MasterDecision::WorkerLeft { .. }) {
            break;
        }
    }
    sim.cut(master_session, Duration::from_millis(500)).await;

    let result = tokio::time::timeout(HANG_GUARD, client.wait(&task))
        .await
        .expect("the task finishes on the survivor")
        .unwrap();
    assert_eq!(result, expected_result("echo", 1), "seed {seed}");
    let (state, decisions) = master.stop().await;
    state.unwrap();
    survivor.stop().await.0.unwrap();
    let deleted = decisions
        .iter()
        .find_map(|decision| match decision {
            MasterDecision::AssignmentReclaimed { deleted, .. } => Some(*deleted),
            _ => None,
        })
        .unwrap_or_else(|| panic!("seed {seed}: no reclaim in {decisions:#?}"));
    let ground = ground.lock().unwrap().clone();
    assert_eq!(ground.results_created.get(task.as_str()), Some(&1));
    assert!(ground.assigned_twice.is_empty(), "seed {seed}");
    assert_eq!(
        ground.assigned_tasks(),
        [task.to_string(), task.to_string()]
    );
    deleted
}

#[test]
fn a_reclaim_cut_off_in_flight_is_sent_again_and_recognised_as_done() {
    let mut seen = BTreeSet::new();
    for seed in SEEDS {
        seen.insert(run_sim(seed, cut_during_reclaim(seed)));
    }
    assert_eq!(seen, BTreeSet::from([false, true]), "both sides of the cut");
}
