//! The measured phases, on any backend: queueing a backlog, draining it,
//! and a stream of tasks with a bounded number in flight. Time comes from
//! `tokio::time`, which is the wall clock on a real runtime and simulated
//! time on the simulator's paused one (where the criterion benchmarks take
//! the wall clock around the whole run instead).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use zkdist_coord::{Client, ClientError, Coordinator, TaskId, TaskPayload};
use zkdist_worker::{CompletionReadBack, WorkerDecision};

use crate::counting::{OpCounter, OpCounts};
use crate::system::{System, SystemError};

/// What the phases can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("submitting task {n} failed: {error}")]
    Submit { n: u64, error: ClientError },
    #[error(transparent)]
    System(#[from] SystemError),
    #[error("{0}")]
    Inconsistent(String),
}

/// The payload of the `n`th task of a run: small, and of a kind that the
/// benchmark's handler ignores.
pub fn payload(n: u64) -> Vec<u8> {
    TaskPayload::new("noop")
        .with("n", n)
        .encode()
        .expect("the kind is not empty")
}

/// One phase's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseReport {
    pub tasks: u64,
    pub elapsed: Duration,
    /// Submit-to-result latencies, sorted (empty for a backlog, whose tasks
    /// were queued before anyone worked).
    pub latencies: Vec<Duration>,
    /// Requests issued by every counted session during the phase.
    pub ops: OpCounts,
}

impl PhaseReport {
    pub fn tasks_per_s(&self) -> f64 {
        self.tasks as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn per_task(&self) -> Duration {
        self.elapsed / u32::try_from(self.tasks.max(1)).unwrap_or(u32::MAX)
    }

    pub fn writes_per_task(&self) -> f64 {
        self.ops.writes() as f64 / self.tasks.max(1) as f64
    }

    pub fn node_writes_per_task(&self) -> f64 {
        self.ops.node_writes() as f64 / self.tasks.max(1) as f64
    }

    /// Read requests per task, a multi-read counted once.
    pub fn reads_per_task(&self) -> f64 {
        self.ops.reads() as f64 / self.tasks.max(1) as f64
    }

    /// Nodes read per task, alone or inside a multi-read.
    pub fn node_reads_per_task(&self) -> f64 {
        self.ops.node_reads() as f64 / self.tasks.max(1) as f64
    }

    /// The latency at `percent` (nearest rank), if any was measured.
    pub fn latency_percentile(&self, percent: f64) -> Option<Duration> {
        assert!((0.0..=100.0).contains(&percent), "a percentile is 0..=100");
        if self.latencies.is_empty() {
            return None;
        }
        let rank = ((percent / 100.0) * self.latencies.len() as f64).ceil() as usize;
        Some(self.latencies[rank.clamp(1, self.latencies.len()) - 1])
    }
}

/// Told how far a phase got, e.g. to draw a progress bar.
pub trait Progress {
    /// A phase of `total` tasks begins.
    fn start(&mut self, phase: &str, total: u64);
    /// `done` of its tasks are finished.
    fn advance(&mut self, done: u64);
    fn finish(&mut self);
}

/// Reports a phase to `inner` under another name: a stream run as a
/// warm-up shows as one.
pub struct RenamedPhase<'p> {
    pub inner: &'p mut dyn Progress,
    pub phase: &'static str,
}

impl Progress for RenamedPhase<'_> {
    fn start(&mut self, _phase: &str, total: u64) {
        self.inner.start(self.phase, total);
    }
    fn advance(&mut self, done: u64) {
        self.inner.advance(done);
    }
    fn finish(&mut self) {
        self.inner.finish();
    }
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&mut self, _phase: &str, _total: u64) {}
    fn advance(&mut self, _done: u64) {}
    fn finish(&mut self) {}
}

/// Queues `count` tasks, numbered from `first`, with up to `window`
/// creates in flight at once ([`Client::submit_many`]), so that the queue's
/// order is the tasks' numbers. Returns their ids in that order.
pub async fn submit_backlog<C: Coordinator>(
    client: &Client<C>,
    first: u64,
    count: u64,
    window: usize,
) -> Result<Vec<TaskId>, WorkloadError> {
    assert!(window >= 1, "at least one submission in flight");
    let payloads: Vec<Vec<u8>> = (first..first + count).map(payload).collect();
    client
        .submit_many(&payloads, window)
        .await
        .into_iter()
        .zip(first..)
        .map(|(outcome, n)| outcome.map_err(|error| WorkloadError::Submit { n, error }))
        .collect()
}

/// How a phase learns that its tasks are done: from the workers' decisions.
#[derive(Debug, Default)]
struct Tally {
    /// Tasks whose worker released the assignment (it is free again).
    released: u64,
    /// When each task's result was written, for tasks whose submission's
    /// reply is not in yet.
    written_early: BTreeMap<TaskId, Instant>,
    /// When each task was submitted, until its result is written.
    submitted_at: BTreeMap<TaskId, Instant>,
    latencies: Vec<Duration>,
}

impl Tally {
    fn on_decision(&mut self, decision: WorkerDecision) -> Result<(), WorkloadError> {
        match decision {
            // A completion read back after a connection loss with the
            // result present wrote it just the same (a benchmark revokes
            // nothing, so no other worker wrote it).
            WorkerDecision::ResultWritten { task, .. }
            | WorkerDecision::CompletionRecovered {
                task,
                found: CompletionReadBack::ResultPresent,
                ..
            } => {
                let now = Instant::now();
                match self.submitted_at.remove(&task) {
                    Some(submitted) => self.latencies.push(now - submitted),
                    None => {
                        let previous = self.written_early.insert(task.clone(), now);
                        if previous.is_some() {
                            return Err(WorkloadError::Inconsistent(format!(
                                "{task} got two results"
                            )));
                        }
                    }
                }
            }
            WorkerDecision::AssignmentReleased { task: Some(_), .. } => self.released += 1,
            WorkerDecision::ResultAlreadyPresent { .. }
            | WorkerDecision::TaskMissing { .. }
            | WorkerDecision::ResultRefused { .. }
            | WorkerDecision::CompletionRecovered {
                found: CompletionReadBack::TaskGone,
                ..
            } => {
                return Err(WorkloadError::Inconsistent(format!(
                    "a task was assigned again after its result was written, lost its node, \
                     or refused its result: {decision}"
                )));
            }
            // A benchmark injects no faults: a worker losing its session, its
            // registration or its assignment is a failed run.
            WorkerDecision::BadAssignment { .. }
            | WorkerDecision::AssignmentRevoked { .. }
            | WorkerDecision::TaskAbandoned { .. }
            | WorkerDecision::SessionLost { .. }
            | WorkerDecision::RegistrationLost { .. } => {
                return Err(WorkloadError::Inconsistent(format!("{decision}")));
            }
            WorkerDecision::Registered { .. }
            | WorkerDecision::TaskStarted { .. }
            | WorkerDecision::AssignmentReleased { task: None, .. }
            // Sent again: its `ResultWritten` follows.
            | WorkerDecision::CompletionRecovered {
                found: CompletionReadBack::NotApplied,
                ..
            }
            | WorkerDecision::StopRequested { .. }
            | WorkerDecision::Deregistered { .. } => {}
        }
        Ok(())
    }

    fn on_submitted(&mut self, task: TaskId, submitted: Instant) {
        match self.written_early.remove(&task) {
            Some(written) => self
                .latencies
                .push(written.saturating_duration_since(submitted)),
            None => {
                let previous = self.submitted_at.insert(task, submitted);
                assert!(previous.is_none(), "the server names each task once");
            }
        }
    }
}

/// Waits until `tasks` tasks are finished (their assignments released):
/// the drain of a backlog that the master and workers found when they
/// started. `started` is when the clock started, `ops_before` the counts
/// then: the report counts what was sent from then on (the workers'
/// registrations too), not the submissions, which came before the clock
/// started, so that its writes per task and its tasks/s cover the same
/// interval.
pub async fn drain(
    system: &mut System,
    counter: &OpCounter,
    ops_before: OpCounts,
    tasks: u64,
    started: Instant,
    progress: &mut dyn Progress,
) -> Result<PhaseReport, WorkloadError> {
    progress.start("backlog", tasks);
    let mut tally = Tally::default();
    while tally.released < tasks {
        tally.on_decision(system.worker_decision().await?)?;
        progress.advance(tally.released);
    }
    let elapsed = started.elapsed();
    progress.finish();
    Ok(PhaseReport {
        tasks,
        elapsed,
        latencies: Vec::new(),
        ops: counter.snapshot().since(&ops_before),
    })
}

/// Submits `tasks` tasks, numbered from `first`, keeping at most `window`
/// of them unfinished (submitted, assignment not yet released), and waits
/// until all are finished. A closed loop: the window keeps every worker fed
/// without letting a queue build up, so the latencies measure the system
/// rather than the backlog.
pub async fn stream_tasks<C: Coordinator>(
    client: &Client<C>,
    system: &mut System,
    counter: &OpCounter,
    first: u64,
    tasks: u64,
    window: u64,
    progress: &mut dyn Progress,
) -> Result<(PhaseReport, Vec<TaskId>), WorkloadError> {
    assert!(window >= 1, "at least one task in flight");
    progress.start("tasks", tasks);
    let ops_before = counter.snapshot();
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut submitting = FuturesUnordered::new();
    let mut submitted: Vec<TaskId> = Vec::with_capacity(usize::try_from(tasks).unwrap_or(0));
    let mut issued: u64 = 0;
    while tally.released < tasks {
        while issued < tasks && issued - tally.released < window {
            let n = first + issued;
            submitting.push(async move {
                let submitted = Instant::now();
                let outcome = client.submit(&payload(n)).await;
                (n, submitted, outcome)
            });
            issued += 1;
        }
        tokio::select! {
            biased;
            Some((n, at, outcome)) = submitting.next(), if !submitting.is_empty() => {
                let task = outcome.map_err(|error| WorkloadError::Submit { n, error })?;
                submitted.push(task.clone());
                tally.on_submitted(task, at);
            }
            decision = system.worker_decision() => {
                tally.on_decision(decision?)?;
                progress.advance(tally.released);
            }
        }
    }
    let elapsed = started.elapsed();
    progress.finish();
    // A submission's reply and the decisions about its task travel on
    // different sessions: a reply can come in after the task is done.
    while let Some((n, at, outcome)) = submitting.next().await {
        let task = outcome.map_err(|error| WorkloadError::Submit { n, error })?;
        submitted.push(task.clone());
        tally.on_submitted(task, at);
    }
    if tally.latencies.len() as u64 != tasks || !tally.submitted_at.is_empty() {
        return Err(WorkloadError::Inconsistent(format!(
            "{} of {tasks} tasks have a submit-to-result latency; {} submitted tasks have no result",
            tally.latencies.len(),
            tally.submitted_at.len()
        )));
    }
    let mut latencies = tally.latencies;
    latencies.sort_unstable();
    let report = PhaseReport {
        tasks,
        elapsed,
        latencies,
        ops: counter.snapshot().since(&ops_before),
    };
    Ok((report, submitted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_with(latencies_ms: impl IntoIterator<Item = u64>) -> PhaseReport {
        PhaseReport {
            tasks: 100,
            elapsed: Duration::from_secs(4),
            latencies: latencies_ms
                .into_iter()
                .map(Duration::from_millis)
                .collect(),
            ops: OpCounts {
                creates: 300,
                deletes: 100,
                get_childrens: 50,
                ..OpCounts::default()
            },
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let report = report_with(1..=100);
        let ms = |percent| report.latency_percentile(percent).map(|d| d.as_millis());
        assert_eq!(ms(50.0), Some(50));
        assert_eq!(ms(99.0), Some(99));
        assert_eq!(ms(100.0), Some(100));
        assert_eq!(ms(0.0), Some(1));
        let one = report_with([7]);
        assert_eq!(one.latency_percentile(99.0), Some(Duration::from_millis(7)));
        assert_eq!(report_with([]).latency_percentile(50.0), None);
    }

    #[test]
    fn rates_are_per_task_and_per_second() {
        let report = report_with([]);
        assert_eq!(report.tasks_per_s(), 25.0);
        assert_eq!(report.per_task(), Duration::from_millis(40));
        assert_eq!(report.writes_per_task(), 4.0);
        assert_eq!(report.reads_per_task(), 0.5);
    }
}
