//! The task handler the testbed's workers run: it takes a seeded amount of
//! simulated time and answers deterministically, so a run depends on the
//! seed alone.

use std::time::Duration;

use zkdist_coord::{Observer, TaskPayload, TaskResult};
use zkdist_worker::{TaskError, TaskHandler};

/// Runs `work` tasks: sleeps `work_us` microseconds of simulated time, then
/// answers `done <n>`.
#[derive(Debug, Clone, Default)]
pub struct WorkHandler {
    /// Told `true` when a run starts and `false` when it ends, finished or
    /// dropped half-way (the task abandoned, the process crashed).
    runs: Option<Observer<bool>>,
}

impl WorkHandler {
    /// A handler that tells `runs` of each run's start and end.
    pub fn observed(runs: Observer<bool>) -> WorkHandler {
        WorkHandler { runs: Some(runs) }
    }
}

/// Tells a run's end to the observer when dropped: a run's future may be
/// dropped at any await, and that ends the run too.
struct RunEnd<'a>(Option<&'a Observer<bool>>);

impl Drop for RunEnd<'_> {
    fn drop(&mut self) {
        if let Some(runs) = self.0 {
            runs.observe(false);
        }
    }
}

/// A `work` task's payload: task number `n`, taking `work_us` to run.
pub fn task_payload(n: u64, work_us: u64) -> Vec<u8> {
    TaskPayload::new("work")
        .with("n", n)
        .with("work_us", work_us)
        .encode()
        .expect("the kind is not empty")
}

/// What a payload asks for: how long to work, and then what to answer.
struct Answer {
    work: Duration,
    /// `done <n>` for a `work` task.
    output: Result<Vec<u8>, TaskError>,
}

/// A payload without its numbers fails at once, before any work.
fn answer(task: &[u8]) -> Result<Answer, TaskError> {
    let payload = TaskPayload::decode(task).map_err(|error| TaskError::from_display(&error))?;
    let field = |name: &str| {
        payload
            .fields
            .get(name)
            .and_then(|value| value.as_u64())
            .ok_or_else(|| TaskError::new(format!("payload has no numeric {name:?}")))
    };
    let n = field("n")?;
    let work = Duration::from_micros(field("work_us")?);
    let output = match payload.kind.as_str() {
        "work" => Ok(format!("done {n}").into_bytes()),
        other => Err(TaskError::new(format!("unknown kind {other:?}"))),
    };
    Ok(Answer { work, output })
}

/// The result a worker running [`WorkHandler`] writes for `task` (the
/// payload): what the checker holds every result to.
pub fn expected_result(task: &[u8]) -> TaskResult {
    TaskResult::from_outcome(
        answer(task)
            .and_then(|answer| answer.output)
            .map_err(|error| error.to_string()),
    )
}

impl TaskHandler for WorkHandler {
    async fn run(&self, task: &[u8]) -> Result<Vec<u8>, TaskError> {
        if let Some(runs) = &self.runs {
            runs.observe(true);
        }
        let _end = RunEnd(self.runs.as_ref());
        let Answer { work, output } = answer(task)?;
        tokio::time::sleep(work).await;
        output
    }
}
