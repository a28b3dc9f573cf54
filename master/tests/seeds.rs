//! The system end to end on the simulator, over many seeds: one master,
//! four workers and 200 tasks per seed, with randomized latency, some tasks
//! and workers present before the master starts, and some tasks failing.
//! For every seed: every task gets exactly one result, and the right one; no
//! worker ever holds two assignments; no task is assigned twice; tasks are
//! assigned in submission order; and at the end the master's view matches
//! what happened.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use zkdist_coord::{Layout, TaskId, TaskResult, assignment_label};
use zkdist_master::{MasterDecision, MasterState};
use zkdist_sim::{Change, Latency, SimZk};
use zkdist_worker::WorkerDecision;

use common::checks::{RunLog, check_run};
use common::*;

const WORKERS: usize = 4;
const TASKS: u64 = 200;
/// Every this many tasks, one fails on purpose.
const FAIL_EVERY: u64 = 9;
/// Far more simulated time than a run needs (a few seconds).
const RESULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Everything one seed's run produced.
struct Run {
    submitted: Vec<(TaskId, TaskResult)>,
    results: Vec<TaskResult>,
    master_decisions: Vec<MasterDecision>,
    worker_decisions: Vec<WorkerDecision>,
    final_state: MasterState,
    /// What the server applied, as seen by a hook on every transaction.
    ground: Vec<Ground>,
    trace: Vec<String>,
}

/// A fact about the server's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ground {
    /// `assignments/<worker>` was created with this data.
    Assigned { worker: String, task: String },
    /// A task's `result` node was created.
    ResultCreated { path: String },
    /// Right after a transaction, two assignment nodes named one task.
    TaskAssignedTwice { task: String, zxid: i64 },
}

/// Watches every transaction the server applies and reports what the
/// checks need, so they rest on the tree and not only on the actors' word.
async fn watch_ground(sim: &SimZk, layout: &Layout) -> mpsc::UnboundedReceiver<Ground> {
    let (facts, ground) = mpsc::unbounded_channel();
    let assignments_dir = layout.assignments_dir();
    let assignment_prefix = format!("{assignments_dir}/");
    let tasks_prefix = format!("{}/", layout.tasks_dir());
    sim.on_apply(move |op, tree| {
        for change in &op.changes {
            let Change::Created(path) = change else {
                continue;
            };
            if let Some(worker) = path.strip_prefix(&assignment_prefix) {
                let data = tree.data(path).unwrap_or_default();
                let _ = facts.send(Ground::Assigned {
                    worker: worker.to_owned(),
                    task: assignment_label(data),
                });
            } else if path.starts_with(&tasks_prefix) && path.ends_with("/result") {
                let _ = facts.send(Ground::ResultCreated { path: path.clone() });
            }
        }
        let mut assigned = BTreeSet::new();
        for worker in tree.children(&assignments_dir).unwrap_or_default() {
            let data = tree
                .data(&format!("{assignments_dir}/{worker}"))
                .unwrap_or_default();
            // By the task named: one copy may carry the payload inline.
            let task = assignment_label(data);
            if !assigned.insert(task.clone()) {
                let _ = facts.send(Ground::TaskAssignedTwice {
                    task,
                    zxid: op.zxid,
                });
            }
        }
    })
    .await;
    ground
}

fn run_seed(seed: u64) -> Run {
    run_sim(seed, async move {
        // The test's own choices come from the seed too, from a generator
        // of their own so they do not shift the simulator's.
        let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let latency = Latency::Uniform {
            min_us: rng.random_range(0..=200),
            max_us: rng.random_range(500..=5_000),
        };
        let sim = SimZk::start(sim_config(seed, latency));
        let layout = Layout::default();
        let mut ground = watch_ground(&sim, &layout).await;
        let mut client = client(&sim, &layout).await;

        let tasks_before_master = rng.random_range(0..=20);
        let workers_before_master = rng.random_range(0..=2);
        let mut submitted = Vec::new();
        let submit = async |client: &mut zkdist_coord::Client<_>, n: u64, rng: &mut ChaCha8Rng| {
            let kind = if n % FAIL_EVERY == FAIL_EVERY - 1 {
                "fail"
            } else {
                "echo"
            };
            let work_us = rng.random_range(0..=20_000);
            let task = client
                .submit(&payload(kind, n, work_us))
                .await
                .expect("submit");
            (task, expected_result(kind, n))
        };
        for n in 0..tasks_before_master {
            submitted.push(submit(&mut client, n, &mut rng).await);
        }
        let mut workers = Vec::new();
        for i in 0..workers_before_master {
            workers.push(start_worker(&sim, &format!("worker{i}"), &layout, TestHandler).await);
        }
        let master = start_master(&sim, "master", &layout).await;
        for i in workers_before_master..WORKERS {
            workers.push(start_worker(&sim, &format!("worker{i}"), &layout, TestHandler).await);
        }
        for n in tasks_before_master..TASKS {
            submitted.push(submit(&mut client, n, &mut rng).await);
        }

        // A lost task shows as a timeout, not a hang: time is simulated, so
        // waiting costs nothing until everything else is idle.
        let mut results = Vec::new();
        for (task, _) in &submitted {
            let result = tokio::time::timeout(RESULT_TIMEOUT, client.wait(task))
                .await
                .unwrap_or_else(|_| {
                    panic!("seed {seed}: no result for {task} in {RESULT_TIMEOUT:?}")
                });
            results.push(result.expect("wait"));
        }
        // Let the last assignment deletions reach the master, so that its
        // final view is the quiescent one.
        tokio::time::sleep(Duration::from_secs(1)).await;

        let (final_state, master_decisions) = master.stop().await;
        let final_state = final_state.expect("the master ran until stopped");
        let mut worker_decisions = Vec::new();
        for worker in workers {
            let (outcome, decisions) = worker.stop().await;
            outcome.expect("the worker ran until stopped");
            worker_decisions.extend(decisions);
        }
        let trace = sim.trace().await;
        let mut facts = Vec::new();
        while let Ok(fact) = ground.try_recv() {
            facts.push(fact);
        }
        Run {
            submitted,
            results,
            master_decisions,
            worker_decisions,
            final_state,
            ground: facts,
            trace,
        }
    })
}

/// Checks everything the run must show; panics naming the seed.
fn check(seed: u64, run: &Run) {
    let fail = |what: String| -> ! { panic!("seed {seed}: {what}") };

    let log = RunLog {
        submitted: &run.submitted,
        results: &run.results,
        master_decisions: &run.master_decisions,
        worker_decisions: &run.worker_decisions,
        final_state: &run.final_state,
        workers: WORKERS,
    };
    if let Err(what) = check_run(&log) {
        fail(what);
    }
    let tasks: Vec<&TaskId> = run.submitted.iter().map(|(task, _)| task).collect();
    if run.trace.is_empty() {
        fail("the simulator recorded no trace".into());
    }

    // The server's tree agrees: each task's assignment node was created
    // once, in submission order, each result node once.
    let mut ground_order = Vec::new();
    let mut results_created = BTreeSet::new();
    for fact in &run.ground {
        match fact {
            Ground::Assigned { task, .. } => ground_order.push(task.as_str()),
            Ground::ResultCreated { path } => {
                if !results_created.insert(path.as_str()) {
                    fail(format!("{path} created twice"));
                }
            }
            Ground::TaskAssignedTwice { .. } => fail(format!("{fact:?}")),
        }
    }
    let submitted_names: Vec<&str> = tasks.iter().map(|task| task.as_str()).collect();
    if ground_order != submitted_names {
        fail(format!(
            "assignment nodes created in order {ground_order:?}"
        ));
    }
    if results_created.len() != tasks.len() {
        fail(format!(
            "{} result nodes for {} tasks",
            results_created.len(),
            tasks.len()
        ));
    }
}

fn run_seeds(seeds: std::ops::Range<u64>) {
    for seed in seeds {
        let run = run_seed(seed);
        check(seed, &run);
    }
}

// 200 seeds in four tests, so the test harness spreads them over cores.
#[test]
fn seeds_000_to_049() {
    run_seeds(0..50);
}

#[test]
fn seeds_050_to_099() {
    run_seeds(50..100);
}

#[test]
fn seeds_100_to_149() {
    run_seeds(100..150);
}

#[test]
fn seeds_150_to_199() {
    run_seeds(150..200);
}

/// The same seed gives the same run: the simulator's trace and every
/// decision, byte for byte.
#[test]
fn a_seed_replays_byte_for_byte() {
    for seed in [3, 77] {
        let first = run_seed(seed);
        let second = run_seed(seed);
        assert_eq!(first.trace, second.trace, "seed {seed}: traces differ");
        let render = |run: &Run| {
            let master = run.master_decisions.iter().map(ToString::to_string);
            let workers = run.worker_decisions.iter().map(ToString::to_string);
            master.chain(workers).collect::<Vec<_>>()
        };
        assert_eq!(
            render(&first),
            render(&second),
            "seed {seed}: decisions differ"
        );
        assert!(!first.trace.is_empty());
    }
}
