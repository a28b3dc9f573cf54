//! One end-to-end run on the simulator, shared by the tests that run it over
//! many seeds in both lanes: a client submits tasks, one master and a few
//! workers process them, and the run is checked with `common::checks`.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zkdist_coord::{Layout, TaskId, TaskResult};
use zkdist_master::{MasterDecision, MasterState};
use zkdist_sim::{Latency, SimZk};
use zkdist_worker::WorkerDecision;

use crate::common::checks::{RunLog, check_run};
use crate::common::*;

/// Far more simulated time than a run needs: a hang guard.
const RESULT_TIMEOUT: Duration = Duration::from_secs(600);

/// What a run does, beyond its seed.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    pub workers: usize,
    pub tasks: u64,
    /// Every this many tasks, one fails on purpose.
    pub fail_every: u64,
    /// Seeded latency and task durations; otherwise zero latency and every
    /// task takes the same time, so only the schedule differs between seeds.
    pub seeded: bool,
}

/// Everything one run produced.
pub struct WorkloadRun {
    pub submitted: Vec<(TaskId, TaskResult)>,
    pub results: Vec<TaskResult>,
    pub master_decisions: Vec<MasterDecision>,
    pub worker_decisions: Vec<WorkerDecision>,
    pub final_state: MasterState,
    pub trace: Vec<String>,
}

impl WorkloadRun {
    /// Panics, naming the seed, unless the run passes every end-to-end check.
    pub fn check(&self, seed: u64, workload: &Workload) {
        let log = RunLog {
            submitted: &self.submitted,
            results: &self.results,
            master_decisions: &self.master_decisions,
            worker_decisions: &self.worker_decisions,
            final_state: &self.final_state,
            workers: workload.workers,
        };
        if let Err(what) = check_run(&log) {
            panic!("seed {seed}: {what}");
        }
        assert!(!self.trace.is_empty(), "seed {seed}: no trace");
    }
}

/// Runs `workload` with simulator seed `seed` on the runtime the caller
/// provides (see `zkdist_sim::runtime`).
pub async fn run_workload(seed: u64, workload: Workload) -> WorkloadRun {
    // The test's own choices come from a generator of their own, so they do
    // not shift the simulator's.
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let latency = if workload.seeded {
        Latency::Uniform {
            min_us: rng.random_range(0..=200),
            max_us: rng.random_range(500..=5_000),
        }
    } else {
        Latency::Zero
    };
    let sim = SimZk::start(sim_config(seed, latency));
    let layout = Layout::default();
    let mut client = client(&sim, &layout).await;
    let master = start_master(&sim, "master", &layout).await;
    let mut workers = Vec::new();
    for i in 0..workload.workers {
        workers.push(start_worker(&sim, &format!("worker{i}"), &layout, TestHandler).await);
    }
    let mut submitted = Vec::new();
    for n in 0..workload.tasks {
        let kind = if n % workload.fail_every == workload.fail_every - 1 {
            "fail"
        } else {
            "echo"
        };
        let work_us = if workload.seeded {
            rng.random_range(0..=20_000)
        } else {
            2_000
        };
        let task = client
            .submit(&payload(kind, n, work_us))
            .await
            .expect("submit");
        submitted.push((task, expected_result(kind, n)));
    }

    let mut results = Vec::new();
    for (task, _) in &submitted {
        let result = tokio::time::timeout(RESULT_TIMEOUT, client.wait(task))
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: no result for {task} in {RESULT_TIMEOUT:?}"));
        results.push(result.expect("wait"));
    }
    // Let the last assignment deletions reach the master, so that its final
    // view is the quiescent one.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let (final_state, master_decisions) = master.stop().await;
    let final_state = final_state.expect("the master ran until stopped");
    let mut worker_decisions = Vec::new();
    for worker in workers {
        let (outcome, decisions) = worker.stop().await;
        outcome.expect("the worker ran until stopped");
        worker_decisions.extend(decisions);
    }
    WorkloadRun {
        submitted,
        results,
        master_decisions,
        worker_decisions,
        final_state,
        trace: sim.trace().await,
    }
}
