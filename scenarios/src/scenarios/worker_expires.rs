//! A worker's session expires while it holds an assignment: the server
//! deletes its registration (and its id node) while the worker is in the
//! middle of its task.
//!
//! What happens today (the failures issue decides what must happen): the
//! master sees the worker leave and records the task as lost with it
//! (`worker-left ... lost-task`); the worker's result write fails (its
//! session is gone) and it stops; the assignment node stays. The other
//! worker takes the next task, but the lost one never finishes: the run
//! ends with `finished-exactly-once` ("never finished"), which this
//! scenario asserts, so that the fix shows up as a reviewed change of this
//! file and of its snapshot.

use std::time::Duration;

use super::script::{assignment_exists, find, rounds_assigning, run, settle, until};
use crate::checker::Invariant;
use crate::harness::RunReport;

pub fn run_scenario(seed: u64) -> RunReport {
    run(seed, async move |h| {
        h.start_master().await;
        let doomed = h.start_worker().await;
        h.start_worker().await;
        let worker = h.registered(1).await;
        let survivor = h.registered(2).await;
        settle().await;

        let lost = h.submit(50_000).await;
        until(h, "the task is assigned", assignment_exists(h, &worker)).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        h.note("expire the first worker's session while it runs its task");
        h.expire(doomed).await;
        let next = h.submit(1_000).await;
        let all = h.all_finished(Duration::from_secs(60)).await;
        assert!(!all, "today the lost task never finishes");
        let report = h.finish().await;

        let trace = &report.trace;
        let expired = find(trace, 0, "control expire w1");
        find(
            trace,
            expired,
            &format!("decide m1: worker-left {worker} lost-task {lost}"),
        );
        find(trace, expired, &format!("{next}->{survivor}"));
        assert_eq!(rounds_assigning(trace, &lost), 1, "nobody runs it again");
        let violation = report.violation.as_ref().expect("today the task is lost");
        assert_eq!(violation.invariant, Invariant::Liveness);
        assert_eq!(
            violation.detail,
            format!(
                "{lost} never finished: its assignment to {worker} is still there, and {worker} is no longer registered"
            )
        );
        report
    })
}
