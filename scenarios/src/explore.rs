//! The explorer: runs the whole system on many seeds, each a different
//! random schedule (latencies, who starts when, how long tasks take and,
//! when asked, faults), with the checker on. The same seed and the same
//! config run the same schedule, byte for byte, which is what `zkdist
//! replay` relies on.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use tokio::time::Instant;
use zkdist_coord::SessionId;
use zkdist_master::TaskDiscovery;

use crate::checker::Violation;
use crate::harness::{Harness, HarnessConfig, RunReport};
use crate::plan::{FaultKind, Plan, PlannedFault, PlannedStall, Target};

/// The session timeout of every explorer run. Short, so that a cut past it
/// (and a crash) ends a session soon; simulated time costs nothing anyway.
pub const SESSION_TIMEOUT_MS: u64 = 2_000;
/// How long, in simulated time, a run waits for every task's result once
/// the workload is in. A task without a result by then is lost.
pub const RESULT_LIMIT: Duration = Duration::from_secs(60);
/// Bounds that keep a run small enough to be a unit of exploration.
pub const MAX_WORKERS: usize = 64;
pub const MAX_TASKS: usize = 10_000;

/// Which sources of trouble a run draws from its seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Faults {
    /// Zero latency: only the seeded tie-breaks between simultaneous
    /// messages, the order of listings and the workload vary.
    #[default]
    None,
    /// Random latency distributions too (uniform, fixed, heavy-tailed).
    /// In about half the seeds reads lag (`SimConfig::follower_lag_txns`),
    /// and up to three servers fall behind for a while at random times
    /// (`SimZk::stall`): no failure, so FIFO order is still required.
    Latency,
    /// Random latency, two master candidates, and one to four faults at
    /// random times on the elected master or a worker: link cuts (short,
    /// or past the session timeout), session expiries, and process crashes
    /// (the process restarts after a random delay); or a short cut of the
    /// client's link, which its submits must survive. Half the cuts are
    /// silent partitions (`SimZk::partition`): the client notices them
    /// only from its link watch, and the server may expire the session
    /// soon after. When the plan's reads
    /// lag, half the short cuts also stall the session's server past the
    /// heal (`SimZk::stall`), beside the stalls of [`Faults::Latency`].
    /// Then the liveness
    /// phase: once the faults are over and every link healed, every task
    /// must finish; the client then deletes some finished tasks, and the
    /// master's view must match the tree.
    All,
}

impl Faults {
    pub const ALL: [Faults; 3] = [Faults::None, Faults::Latency, Faults::All];

    pub fn name(self) -> &'static str {
        match self {
            Faults::None => "none",
            Faults::Latency => "latency",
            Faults::All => "all",
        }
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Faults {
    type Err = String;
    fn from_str(text: &str) -> Result<Faults, String> {
        Faults::ALL
            .into_iter()
            .find(|faults| faults.name() == text)
            .ok_or_else(|| format!("unknown fault mode {text:?}: expected none, latency or all"))
    }
}

/// What every seed of one exploration runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExploreConfig {
    pub workers: usize,
    pub tasks: usize,
    pub faults: Faults,
    /// How the masters discover tasks.
    pub discovery: TaskDiscovery,
    /// A planted bug, for the tests that show the explorer catches it.
    #[cfg(feature = "mutants")]
    pub mutant: Option<crate::mutant::Mutant>,
    /// How many of the workers are of a build older than inline payloads
    /// (a rolling upgrade; see [`crate::OldWorkerSession`]).
    pub old_workers: usize,
    /// The first task's sequence number (see
    /// [`HarnessConfig::first_task_sequence`]); `None` starts as a fresh
    /// server does, at 0, with the layout left to the masters to create.
    pub first_task_sequence: Option<i32>,
    /// Makes the first tasks, which run while the faults strike, last from
    /// a quarter of the session timeout to twice it: long enough that a
    /// cut finds a worker in the middle of one past its session's grace
    /// (see [`zkdist_coord::disconnected_grace_ms`]), so the worker must
    /// stop it and join again while its old session still lives. Off by
    /// default: tasks then take up to 20 ms, and seeds keep the schedules
    /// they always had.
    pub long_tasks: bool,
    /// Whether half the cuts of `Faults::All` are silent partitions (on,
    /// always, outside the mutant tests). Off, every cut fails its
    /// connection at once, as before silent partitions were modelled: the
    /// test that shows what they catch turns them off to compare.
    #[cfg(feature = "mutants")]
    pub silent_partitions: bool,
}

impl Default for ExploreConfig {
    fn default() -> ExploreConfig {
        ExploreConfig {
            workers: 3,
            tasks: 20,
            faults: Faults::None,
            discovery: TaskDiscovery::default(),
            #[cfg(feature = "mutants")]
            mutant: None,
            old_workers: 0,
            first_task_sequence: None,
            long_tasks: false,
            #[cfg(feature = "mutants")]
            silent_partitions: true,
        }
    }
}

impl ExploreConfig {
    /// See [`ExploreConfig::silent_partitions`].
    pub(crate) fn draws_silent_partitions(&self) -> bool {
        #[cfg(feature = "mutants")]
        return self.silent_partitions;
        #[cfg(not(feature = "mutants"))]
        return true;
    }

    /// Refuses sizes the explorer cannot run, naming the bound.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_WORKERS).contains(&self.workers) {
            return Err(format!(
                "--workers must be between 1 and {MAX_WORKERS}, got {}",
                self.workers
            ));
        }
        if !(1..=MAX_TASKS).contains(&self.tasks) {
            return Err(format!(
                "--tasks must be between 1 and {MAX_TASKS}, got {}",
                self.tasks
            ));
        }
        if self.old_workers > self.workers {
            return Err(format!(
                "--old-workers must be at most --workers ({}), got {}",
                self.workers, self.old_workers
            ));
        }
        Ok(())
    }

    /// The command that replays `seed` under this config.
    pub fn replay_command(&self, seed: u64) -> String {
        let mut command = format!(
            "zkdist replay --seed {seed} --workers {} --tasks {} --faults {} --discovery {}",
            self.workers, self.tasks, self.faults, self.discovery
        );
        // Named only when set, so that commands printed for fleets of
        // today's workers read as they always did.
        if self.old_workers > 0 {
            command.push_str(&format!(" --old-workers {}", self.old_workers));
        }
        if let Some(sequence) = self.first_task_sequence {
            command.push_str(&format!(" --first-task-sequence={sequence}"));
        }
        if self.long_tasks {
            command.push_str(" --long-tasks");
        }
        command
    }
}

/// One seed's run, as the explorer reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedOutcome {
    pub seed: u64,
    pub steps: u64,
    pub trace_lines: usize,
    /// [`crate::trace::digest`] of the whole trace.
    pub trace_digest: u64,
    pub violation: Option<Violation>,
    /// The whole trace, when the caller asked to keep it.
    pub trace: Option<Vec<String>>,
}

impl SeedOutcome {
    fn of(report: RunReport, keep_trace: bool) -> SeedOutcome {
        debug_assert!(!keep_trace || report.trace.len() == report.trace_lines);
        SeedOutcome {
            seed: report.seed,
            steps: report.steps,
            trace_lines: report.trace_lines,
            trace_digest: report.trace_digest,
            violation: report.violation,
            trace: keep_trace.then_some(report.trace),
        }
    }
}

/// Runs one seed's schedule to the end (or to its first violation) on a
/// fresh simulation runtime.
///
/// # Panics
/// If `config` is invalid (see [`ExploreConfig::validate`]).
pub fn run_seed(seed: u64, config: &ExploreConfig) -> RunReport {
    run_seed_with_trace(seed, config, true)
}

/// [`run_seed`], whose report carries the whole trace only if `keep_trace`.
fn run_seed_with_trace(seed: u64, config: &ExploreConfig, keep_trace: bool) -> RunReport {
    zkdist_sim::runtime::block_on(seed, run_checked(seed, config.clone(), keep_trace))
}

/// Runs one seed's schedule on the simulation runtime the caller is already
/// on: the madsim lane's determinism check builds that runtime itself.
///
/// # Panics
/// If `config` is invalid (see [`ExploreConfig::validate`]).
pub async fn run_seed_here(seed: u64, config: ExploreConfig) -> RunReport {
    run_checked(seed, config, true).await
}

/// Checks `config`, draws seed `seed`'s plan under it and runs it.
async fn run_checked(seed: u64, config: ExploreConfig, keep_trace: bool) -> RunReport {
    if let Err(error) = config.validate() {
        panic!("{error}");
    }
    let plan = Plan::draw(seed, &config);
    run_plan(seed, config, plan, keep_trace).await
}

async fn run_plan(seed: u64, config: ExploreConfig, plan: Plan, keep_trace: bool) -> RunReport {
    let mut harness_config = HarnessConfig::new(seed, plan.latency);
    harness_config.keep_trace = keep_trace;
    harness_config.session_timeout_ms = SESSION_TIMEOUT_MS;
    harness_config.discovery = config.discovery;
    harness_config.old_workers = config.old_workers;
    harness_config.first_task_sequence = config.first_task_sequence;
    harness_config.follower_lag_txns = plan.follower_lag_txns;
    #[cfg(feature = "mutants")]
    {
        harness_config.mutant = config.mutant;
    }
    let h = Harness::start(harness_config).await;
    let all_finished = h
        .guard(async {
            for &work_us in &plan.work_us[..plan.tasks_before_master] {
                h.submit(work_us).await;
            }
            for _ in 0..plan.workers_before_master {
                h.start_worker().await;
            }
            for _ in 0..plan.masters {
                h.start_master().await;
            }
            let master_started = Instant::now();
            let workers = async {
                for &gap_us in &plan.worker_gaps_us {
                    tokio::time::sleep(Duration::from_micros(gap_us)).await;
                    h.start_worker().await;
                }
            };
            let tasks = async {
                let later = &plan.work_us[plan.tasks_before_master..];
                for (&gap_us, &work_us) in plan.task_gaps_us.iter().zip(later) {
                    tokio::time::sleep(Duration::from_micros(gap_us)).await;
                    h.submit(work_us).await;
                }
            };
            let faults = run_faults(&h, &plan.faults, master_started);
            let stalls = run_stalls(&h, &plan.stalls, master_started);
            // The stalls joined apart: `join!` takes turns at polling its
            // futures, and a fourth one would change those turns, and the
            // trace, of seeds without a stall.
            tokio::join!(
                async {
                    tokio::join!(workers, tasks, faults);
                },
                stalls
            );
            if !plan.faults.is_empty() {
                h.liveness_phase();
            }
            let all_finished = h.all_finished(RESULT_LIMIT).await;
            if all_finished {
                for task in h.submitted().iter().take(plan.cleanups) {
                    h.cleanup(task).await;
                }
            }
            all_finished
        })
        .await;
    match all_finished {
        // The checker's end-of-run check names whatever did not finish.
        Some(_) => h.finish().await,
        None => h.report().await,
    }
}

/// What happens next in a run's fault schedule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    /// The plan's fault number `n`.
    Fault(usize),
    /// A crashed actor's new process starts.
    Restart(String),
}

/// Injects the planned faults at their times (after `start`), restarts
/// crashed processes after their delay, and returns once every fault is
/// over: the last process restarted and the last cut link healed.
async fn run_faults(h: &Harness, faults: &[PlannedFault], start: Instant) {
    // Due time and insertion order -> what: a deterministic timeline.
    let mut timeline: BTreeMap<(Instant, usize), Due> = faults
        .iter()
        .enumerate()
        .map(|(n, fault)| {
            (
                (start + Duration::from_micros(fault.at_us), n),
                Due::Fault(n),
            )
        })
        .collect();
    let mut order = faults.len();
    let mut healed_by = start;
    while let Some(((at, _), due)) = timeline.pop_first() {
        tokio::time::sleep_until(at).await;
        match due {
            Due::Restart(name) => h.restart(&name),
            Due::Fault(n) => {
                let fault = &faults[n];
                if let FaultKind::CutShort { ms } | FaultKind::CutLong { ms } = fault.kind {
                    // A silent partition lasts until the client notices
                    // it, within half a session timeout.
                    let ms = if fault.silent {
                        ms.max(SESSION_TIMEOUT_MS / 2)
                    } else {
                        ms
                    };
                    healed_by = healed_by.max(Instant::now() + Duration::from_millis(ms));
                }
                if let Some((name, restart_after_ms)) = inject(h, fault).await {
                    let restart_at = Instant::now() + Duration::from_millis(restart_after_ms);
                    timeline.insert((restart_at, order), Due::Restart(name));
                    order += 1;
                }
            }
        }
    }
    tokio::time::sleep_until(healed_by).await;
}

/// Stalls the planned servers at their times (after `start`).
async fn run_stalls(h: &Harness, stalls: &[PlannedStall], start: Instant) {
    for stall in stalls {
        tokio::time::sleep_until(start + Duration::from_micros(stall.at_us)).await;
        if let Some(session) = session_of(h, stall.target, "stall").await {
            h.stall(session, Duration::from_millis(stall.ms)).await;
        }
    }
}

/// The session `target` names now; `None`, noted in the trace, when no
/// master leads or the worker has not started (`what` names what is not
/// done to it).
async fn session_of(h: &Harness, target: Target, what: &str) -> Option<SessionId> {
    match target {
        Target::Master => {
            let leader = h.current_leader().await;
            if leader.is_none() {
                h.sim()
                    .note(format!("harness: no {what} on the master: none leads now"));
            }
            leader
        }
        Target::Client => Some(h.client_session()),
        Target::Worker(n) => {
            let session = h.current_session(&format!("w{n}"));
            if session.is_none() {
                h.sim()
                    .note(format!("harness: no {what} on w{n}, which has not started"));
            }
            session
        }
    }
}

/// Injects one fault. For a crash that killed a process, returns the actor
/// to restart and after how long.
async fn inject(h: &Harness, fault: &PlannedFault) -> Option<(String, u64)> {
    let session = session_of(h, fault.target, "fault").await?;
    match fault.kind {
        FaultKind::CutShort { ms } | FaultKind::CutLong { ms } => {
            if fault.server_stall_ms > 0 {
                h.stall(session, Duration::from_millis(fault.server_stall_ms))
                    .await;
            }
            if fault.silent {
                h.partition(session, Duration::from_millis(ms)).await;
            } else {
                h.cut(session, Duration::from_millis(ms)).await;
            }
            None
        }
        FaultKind::Expire => {
            h.expire(session).await;
            None
        }
        FaultKind::Crash { restart_after_ms } => {
            h.crash(session).await.map(|name| (name, restart_after_ms))
        }
    }
}

/// Runs `seeds` under `config` on `jobs` threads (each seed on its own
/// runtime) and hands every outcome to `on_outcome` in seed order. With
/// `keep_traces`, outcomes carry their whole trace.
pub fn explore(
    seeds: Range<u64>,
    config: &ExploreConfig,
    jobs: usize,
    keep_traces: bool,
    mut on_outcome: impl FnMut(SeedOutcome),
) {
    let jobs = jobs.clamp(1, 64);
    let next_seed = AtomicU64::new(seeds.start);
    let (outcomes_tx, outcomes) = mpsc::channel::<SeedOutcome>();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let outcomes_tx = outcomes_tx.clone();
            let next_seed = &next_seed;
            let end = seeds.end;
            scope.spawn(move || {
                loop {
                    let seed = next_seed.fetch_add(1, Ordering::Relaxed);
                    if seed >= end {
                        return;
                    }
                    let outcome = SeedOutcome::of(
                        run_seed_with_trace(seed, config, keep_traces),
                        keep_traces,
                    );
                    if outcomes_tx.send(outcome).is_err() {
                        return;
                    }
                }
            });
        }
        drop(outcomes_tx);
        // Threads finish seeds out of order; hand them over in order.
        let mut waiting: BTreeMap<u64, SeedOutcome> = BTreeMap::new();
        let mut next_to_report = seeds.start;
        for outcome in outcomes {
            waiting.insert(outcome.seed, outcome);
            while let Some(outcome) = waiting.remove(&next_to_report) {
                on_outcome(outcome);
                next_to_report += 1;
            }
        }
        assert!(
            waiting.is_empty() && next_to_report >= seeds.end,
            "every seed was reported, in order"
        );
    });
}
