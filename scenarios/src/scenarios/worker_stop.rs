//! A worker told to stop while it runs a task, with more tasks queued
//! behind it, as a rolling restart does to each worker in turn.

use zkdist_master::TaskDiscovery;

use super::script::{FINISH_LIMIT, assignment_exists, contains, find, run_with, settle, until};
use crate::harness::RunReport;

/// The task in hand is finished and written; in the same transaction the
/// worker releases its assignment and deletes its registration, so the
/// tree never shows it idle and registered at once. The master,
/// hearing the assignment's deletion first, may still choose the worker
/// for the next task, but its create checks the registration and is
/// refused: no assignment is made for the stopping worker, none is taken
/// back from it, and the other worker runs the queue in order.
pub fn worker_stops_mid_task(seed: u64) -> RunReport {
    run_with(seed, TaskDiscovery::Watch, async move |h| {
        h.start_master().await;
        h.start_worker().await;
        let stopping = h.registered(1).await;
        settle().await;
        // One task for the first worker alone, so that it is the one
        // running when the stop comes; then the second worker and a queue.
        let first = h.submit(50_000).await;
        until(
            h,
            "the first task is assigned",
            assignment_exists(h, &stopping),
        )
        .await;
        h.start_worker().await;
        let other = h.registered(2).await;
        let queued = [
            h.submit(50_000).await,
            h.submit(50_000).await,
            h.submit(50_000).await,
        ];
        settle().await;
        h.note("stop the first worker while it runs its task");
        h.stop_worker(1).await;
        assert!(h.all_finished(FINISH_LIMIT).await, "every task finishes");
        let report = h.finish().await;

        let trace = &report.trace;
        let stop = find(trace, 0, "harness: stop w1");
        let registration = h.layout().worker(&stopping);
        let assignment = h.layout().assignment(&stopping);
        // The completion: the result, the release and the deregistration,
        // applied as one transaction.
        let completion = find(
            trace,
            stop,
            &format!("delete {assignment} v0, delete {registration} v*] -> ok 3 ops"),
        );
        assert!(
            trace[completion].contains("zxid=") && trace[completion].contains(first.as_str()),
            "{}",
            trace[completion]
        );
        find(
            trace,
            completion,
            &format!("decide w1: {stopping} deregistered"),
        );
        // One assignment for the stopping worker in the whole run (its
        // first task's), and nothing taken back from it.
        let created_for_it = trace
            .iter()
            .filter(|line| {
                line.contains("zxid=")
                    && line.contains(&format!("create {assignment} "))
                    && line.contains("-> ok")
            })
            .count();
        assert_eq!(created_for_it, 1, "assignments made for {stopping}");
        assert!(
            !contains(trace, 0, "assignment-reclaimed"),
            "nothing is taken back"
        );
        // Here the master heard the release before the registration's
        // deletion and chose the stopping worker for the next task: the
        // create's check refused it, and the task went to the other one.
        let refused = find(
            trace,
            completion,
            &format!("->{stopping}: its registration is gone"),
        );
        find(
            trace,
            refused,
            &format!("decide m1: worker-left {stopping}"),
        );
        for task in &queued {
            find(trace, 0, &format!("{task}->{other}"));
        }
        report
    })
}
