//! A worker's session expires while it holds an assignment: the server
//! deletes its registration (and its id node) while the worker is in the
//! middle of its task.
//!
//! What must hold: the worker notices at once, abandons the task and
//! writes nothing (its session is gone); the master sees the worker leave,
//! reclaims the assignment and puts the task back in the queue at its
//! place; the other worker runs it; the expired worker opens a new session
//! and registers under a new id. No rule breaks and every task finishes
//! exactly once.

use std::time::Duration;

use super::script::{assignment_exists, find, run, settle, until};
use crate::harness::RunReport;

pub fn run_scenario(seed: u64) -> RunReport {
    run(seed, async move |h| {
        h.start_master().await;
        let doomed = h.start_worker().await;
        h.start_worker().await;
        let worker = h.registered(1).await;
        let survivor = h.registered(2).await;
        settle().await;

        let held = h.submit(50_000).await;
        until(h, "the task is assigned", assignment_exists(h, &worker)).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        h.note("expire the first worker's session while it runs its task");
        h.expire(doomed).await;
        let next = h.submit(1_000).await;
        assert!(
            h.all_finished(Duration::from_secs(60)).await,
            "every task finishes"
        );
        let rejoined = h.registered_again(1, &worker).await;
        let report = h.finish().await;

        let trace = &report.trace;
        let expired = find(trace, 0, "control expire w1");
        find(
            trace,
            expired,
            &format!("decide w1: {worker} abandoned {held}"),
        );
        let left = find(
            trace,
            expired,
            &format!("decide m1: worker-left {worker} holding {held}"),
        );
        let requeued = find(trace, left, &format!("decide m1: task-requeued {held}"));
        find(trace, requeued, &format!("{survivor} started {held}"));
        find(trace, expired, &format!("{next}->"));
        find(trace, expired, &format!("decide w1: {rejoined} registered"));
        report
    })
}
