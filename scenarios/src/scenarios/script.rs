//! What the scenario scripts share: the simulation they run on, waits on
//! the tree and on the trace, and assertions on the trace.

use std::time::Duration;

use zkdist_coord::{AssignmentView, TaskId, WorkerId};
use zkdist_master::TaskDiscovery;
use zkdist_sim::{Latency, Tree};

use crate::harness::{Harness, HarnessConfig, RunReport};

/// Every message takes exactly one millisecond: the trace's timestamps
/// then count hops, and a script knows what is due when.
pub(crate) const LATENCY: Latency = Latency::Fixed { ms: 1 };

/// Far more simulated time than any step of a scenario takes.
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// Far more simulated time than the tasks of a scenario take to finish.
pub(crate) const FINISH_LIMIT: Duration = Duration::from_secs(60);

/// A short outage: far below the session timeout.
pub(crate) const OUTAGE: Duration = Duration::from_millis(50);

/// Runs a scenario's script on a fresh simulation runtime seeded with
/// `seed`: starts the harness, runs the script to its end, and returns the
/// report the script ends with (usually [`Harness::finish`]'s).
///
/// The script is not cut short by a violation: the checker keeps the first
/// one and [`Harness::finish`] stops early on it, but the script's own
/// assertions after it always run (a scenario may assert the violation
/// itself).
///
/// The masters list `tasks/` as the founding design does: the scripts step
/// through its listings (`deliver m1 reply get_children /zkdist/tasks`) to
/// force their interleavings. [`run_with`] picks the discovery.
pub(crate) fn run<F>(seed: u64, script: F) -> RunReport
where
    F: AsyncFnOnce(&Harness) -> RunReport,
{
    run_with(seed, TaskDiscovery::Listing, script)
}

/// [`run`], with the masters discovering tasks by `discovery`.
pub(crate) fn run_with<F>(seed: u64, discovery: TaskDiscovery, script: F) -> RunReport
where
    F: AsyncFnOnce(&Harness) -> RunReport,
{
    run_configured(seed, |config| config.discovery = discovery, script)
}

/// [`run`], with the harness configured by `configure` (which may plant a
/// mutant, for the tests that show a scenario catches it).
pub(crate) fn run_configured<F>(
    seed: u64,
    configure: impl FnOnce(&mut HarnessConfig),
    script: F,
) -> RunReport
where
    F: AsyncFnOnce(&Harness) -> RunReport,
{
    zkdist_sim::runtime::block_on(seed, async move {
        let mut config = HarnessConfig::new(seed, LATENCY);
        configure(&mut config);
        let h = Harness::start(config).await;
        script(&h).await
    })
}

/// Lets every actor react to what happened so far (a few hops).
pub(crate) async fn settle() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// Waits until `predicate` holds on the tree.
///
/// # Panics
/// If it does not hold within a simulated minute; `what` says what was
/// awaited.
pub(crate) async fn until(
    h: &Harness,
    what: &str,
    predicate: impl FnMut(&Tree) -> bool + Send + 'static,
) {
    tokio::time::timeout(STEP_LIMIT, h.sim().run_until(predicate))
        .await
        .unwrap_or_else(|_| panic!("scenario: timed out waiting until {what}"));
}

/// With the simulation paused, runs the agenda one item at a time, letting
/// the actors react after each, until an item leaves a line containing
/// `needle`. Returns that line.
///
/// # Panics
/// If the agenda stays empty for a simulated second.
pub(crate) async fn step_until(h: &Harness, needle: &str) -> String {
    let mut idle_steps = 0;
    loop {
        match h.sim().step().await {
            Some(lines) => {
                idle_steps = 0;
                if let Some(line) = lines.lines().find(|line| line.contains(needle)) {
                    return line.to_owned();
                }
            }
            None => {
                idle_steps += 1;
                assert!(
                    idle_steps < 1000,
                    "scenario: nothing left to step before a line with {needle:?}"
                );
            }
        }
        // Time only passes once every task waits: the actors react first.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

pub(crate) fn assignment_exists(
    h: &Harness,
    worker: &WorkerId,
) -> impl FnMut(&Tree) -> bool + Send + 'static {
    let path = h.layout().assignment(worker);
    move |tree| tree.exists(&path)
}

pub(crate) fn assignment_gone(
    h: &Harness,
    worker: &WorkerId,
) -> impl FnMut(&Tree) -> bool + Send + 'static {
    let path = h.layout().assignment(worker);
    move |tree| !tree.exists(&path)
}

pub(crate) fn assignment_holds(
    h: &Harness,
    worker: &WorkerId,
    task: &TaskId,
) -> impl FnMut(&Tree) -> bool + Send + 'static {
    let path = h.layout().assignment(worker);
    let task = task.clone();
    // Decoded: with the watch discovery the payload may follow the name.
    move |tree| {
        tree.data(&path)
            .and_then(|data| AssignmentView::decode(data).ok())
            .is_some_and(|view| view.task == task)
    }
}

/// The index of the first line at or after `from` containing `needle`.
///
/// # Panics
/// If there is none, showing the trace from `from`.
pub(crate) fn find(trace: &[String], from: usize, needle: &str) -> usize {
    trace[from..]
        .iter()
        .position(|line| line.contains(needle))
        .map(|offset| from + offset)
        .unwrap_or_else(|| {
            panic!(
                "scenario: no line with {needle:?} after line {}:\n{}",
                from + 1,
                trace[from..].join("\n")
            )
        })
}

/// Whether any line at or after `from` contains `needle`.
pub(crate) fn contains(trace: &[String], from: usize, needle: &str) -> bool {
    trace[from..].iter().any(|line| line.contains(needle))
}

/// The tasks the master's rounds assigned, in order, from the trace.
pub(crate) fn assigned_in_rounds(trace: &[String]) -> Vec<String> {
    trace
        .iter()
        .filter_map(|line| crate::trace::message(line).strip_prefix("decide m1: round "))
        .flat_map(|round| round.split(' ').skip(2))
        .filter_map(|pair| pair.split_once("->").map(|(task, _)| task.to_owned()))
        .collect()
}

/// How many of the master's rounds assigned `task`.
pub(crate) fn rounds_assigning(trace: &[String], task: &TaskId) -> usize {
    assigned_in_rounds(trace)
        .iter()
        .filter(|assigned| assigned.as_str() == task.as_str())
        .count()
}

/// Whether the trace shows the write (the first request of `session_name`
/// whose summary starts with `request` lost at the cut) applied before the
/// link failed: its reply was lost, rather than the request itself.
///
/// # Panics
/// If no such request was in flight at the cut.
pub(crate) fn applied_at_cut(trace: &[String], session_name: &str, request: &str) -> bool {
    let cut = find(trace, 0, &format!("control cut {session_name} "));
    let lost_request = format!("lost {session_name} {request}");
    let lost_reply = format!("lost {session_name} reply {request}");
    let line = trace[cut..]
        .iter()
        .find(|line| line.contains(&lost_request) || line.contains(&lost_reply))
        .unwrap_or_else(|| panic!("no {request} of {session_name} was in flight at the cut"));
    line.contains(&lost_reply)
}
