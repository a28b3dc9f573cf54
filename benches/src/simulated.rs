//! The criterion workloads on the simulator: each builds a fresh simulation
//! on its own runtime ([`zkdist_sim::runtime::block_on`]), and measures the
//! wall-clock time of the part that matters, leaving out the set-up (the
//! simulation's own clock is paused: simulated time costs nothing, so only
//! the wall clock says how fast the code is).

use std::ops::Range;
use std::time::{Duration, Instant};

use zkdist_coord::{Client, Layout};
use zkdist_master::TaskDiscovery;
use zkdist_scenarios::{ExploreConfig, Faults};
use zkdist_sim::{Latency, SimConfig, SimZk};

use crate::counting::{Counted, OpCounter};
use crate::system::System;
use crate::workload::{NoProgress, PhaseReport, drain, stream_tasks, submit_backlog};

/// Every simulated workload runs on this seed: one schedule, so that two
/// measurements of the same workload time the same work.
pub const SEED: u64 = 1;

/// Submissions in flight while a backlog is queued (not measured).
const BACKLOG_SUBMIT_WINDOW: usize = 1_000;

/// One simulated run: the wall-clock time of its measured part, and the
/// phase's own figures (in simulated time, which is zero with
/// `Latency::Zero`).
#[derive(Debug, Clone)]
pub struct SimRun {
    pub wall: Duration,
    pub report: PhaseReport,
}

fn zero_latency_sim() -> SimZk {
    SimZk::start(SimConfig {
        seed: SEED,
        latency: Latency::Zero,
        ..SimConfig::default()
    })
}

/// Connects `workers` workers, counted by `counter`, and starts them.
async fn launch_workers(
    sim: &SimZk,
    system: &mut System,
    counter: &std::sync::Arc<OpCounter>,
    workers: usize,
) {
    for n in 1..=workers {
        let (zk, events) = sim
            .connect(&format!("w{n}"))
            .await
            .expect("a worker connects to the simulator");
        system.start_worker(Counted::new(zk, counter.clone()), events);
    }
}

/// [`launch_workers`], then waits until they registered (before any task
/// can be assigned: other decisions are dropped meanwhile).
async fn start_workers(
    sim: &SimZk,
    system: &mut System,
    counter: &std::sync::Arc<OpCounter>,
    workers: usize,
) {
    launch_workers(sim, system, counter, workers).await;
    system
        .wait_registered()
        .await
        .expect("the workers register");
}

/// Tasks per second end to end: `workers` registered workers and their
/// master (discovering tasks by `discovery`), then a client that keeps
/// `2 * workers` tasks unfinished until `tasks` are done. Zero latency and
/// a handler that does nothing: what is left is the cost of zkdist and the
/// simulator. Measures from the first submission to the last task's
/// assignment released.
pub fn assignment_throughput(workers: usize, tasks: u64, discovery: TaskDiscovery) -> SimRun {
    assert!(
        workers >= 1 && tasks >= 1,
        "a run needs a worker and a task"
    );
    zkdist_sim::runtime::block_on(SEED, async move {
        let sim = zero_latency_sim();
        let layout = Layout::default();
        let counter = OpCounter::new();
        let mut system = System::new(layout.clone(), discovery);
        start_workers(&sim, &mut system, &counter, workers).await;
        let (zk, events) = sim.connect("master").await.expect("the master connects");
        system
            .start_master(Counted::new(zk, counter.clone()), events)
            .await
            .expect("the master starts");
        system
            .wait_master_sees(workers)
            .await
            .expect("the master sees every worker");
        let (zk, events) = sim.connect("client").await.expect("the client connects");
        let client = Client::new(Counted::new(zk, counter.clone()), events, layout);

        let wall = Instant::now();
        let (report, _) = stream_tasks(
            &client,
            &mut system,
            &counter,
            0,
            tasks,
            2 * workers as u64,
            &mut NoProgress,
        )
        .await
        .expect("every task finishes");
        let wall = wall.elapsed();

        system.stop().await.expect("the system stops cleanly");
        SimRun { wall, report }
    })
}

/// Draining a backlog: the master (discovering tasks by `discovery`) runs,
/// `backlog` tasks are queued and the master has queued them all; then
/// `workers` workers start. Measures from the workers' start to the last
/// task's assignment released; the report's writes and reads are those of
/// the same interval (the workers' registrations, not the submissions).
///
/// # Panics
/// If the master stops, e.g. with the founding listing loop on a `tasks/`
/// over the client's reply limit (some 29,000 tasks).
pub fn backlog_drain(workers: usize, backlog: u64, discovery: TaskDiscovery) -> SimRun {
    assert!(
        workers >= 1 && backlog >= 1,
        "a run needs a worker and a task"
    );
    zkdist_sim::runtime::block_on(SEED, async move {
        let sim = zero_latency_sim();
        let layout = Layout::default();
        let counter = OpCounter::new();
        let mut system = System::new(layout.clone(), discovery);
        let (zk, events) = sim.connect("master").await.expect("the master connects");
        system
            .start_master(Counted::new(zk, counter.clone()), events)
            .await
            .expect("the master starts");
        system
            .wait_master_initialised()
            .await
            .expect("the master initialises");
        let (zk, events) = sim.connect("client").await.expect("the client connects");
        let client = Client::new(Counted::new(zk, counter.clone()), events, layout.clone());
        let queued = submit_backlog(&client, 0, backlog, BACKLOG_SUBMIT_WINDOW)
            .await
            .expect("the backlog is queued");
        assert_eq!(queued.len() as u64, backlog);
        system
            .wait_master_queued(backlog)
            .await
            .expect("the master queues the backlog");

        let wall = Instant::now();
        let started = tokio::time::Instant::now();
        let ops_before = counter.snapshot();
        // Work starts as each worker registers: the drain counts it all.
        launch_workers(&sim, &mut system, &counter, workers).await;
        let report = drain(
            &mut system,
            &counter,
            ops_before,
            backlog,
            started,
            &mut NoProgress,
        )
        .await
        .expect("the backlog drains");
        let wall = wall.elapsed();

        system.stop().await.expect("the system stops cleanly");
        SimRun { wall, report }
    })
}

/// The explorer's standard run: 4 workers, 100 tasks, random latencies and
/// random faults (link cuts, expiries, crashes), with the checker on.
#[allow(
    clippy::needless_update,
    reason = "the config has one more field when the scenarios' test-only mutants are compiled in"
)]
pub fn standard_explore_config() -> ExploreConfig {
    ExploreConfig {
        workers: 4,
        tasks: 100,
        faults: Faults::All,
        ..ExploreConfig::default()
    }
}

/// What a batch of explored seeds did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExploreBatch {
    pub schedules: u64,
    /// Schedules that stopped at a violation, which makes them shorter
    /// than a full run (none, unless a change broke a rule).
    pub violations: u64,
    /// Requests applied plus messages delivered, over all schedules.
    pub steps: u64,
}

/// Runs the standard schedule for each seed of `seeds` on `jobs` threads.
pub fn explore_batch(seeds: Range<u64>, jobs: usize) -> ExploreBatch {
    let config = standard_explore_config();
    let mut batch = ExploreBatch::default();
    zkdist_scenarios::explore(seeds, &config, jobs, false, |outcome| {
        batch.schedules += 1;
        batch.steps += outcome.steps;
        batch.violations += u64::from(outcome.violation.is_some());
    });
    batch
}
