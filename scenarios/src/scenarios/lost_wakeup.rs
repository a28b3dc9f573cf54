//! A worker's assignment is re-created right after the worker deleted the
//! previous one (the founding design's lost-wakeup case). The worker
//! deletes its finished assignment; everything travelling to it is held
//! from that moment, so nothing it could do would reach the server before
//! the master, which heard of the delete, has created its next assignment.
//!
//! In the founding design the worker re-armed a one-shot `exists` watch
//! after each task, and an assignment made before that re-arm came
//! unannounced (the re-arm's reply showed it). The worker now keeps one
//! persistent watch on its assignment node for the session's life, so
//! there is no re-arm to race: the second creation is announced by an
//! event like the first.
//!
//! What must hold: the worker sends no `exists` on its assignment after
//! starting, an event announces the second assignment, and the worker
//! reads it and runs it.

use std::time::Duration;

use super::script::{assignment_gone, assignment_holds, contains, find, run, settle, until};
use crate::harness::RunReport;

pub fn run_scenario(seed: u64) -> RunReport {
    run(seed, async move |h| {
        h.start_master().await;
        let worker_session = h.start_worker().await;
        let worker = h.registered(1).await;
        settle().await;

        let first = h.submit(5_000).await;
        let second = h.submit(5_000).await;
        until(
            h,
            "the first assignment",
            assignment_holds(h, &worker, &first),
        )
        .await;
        until(h, "the worker deleted it", assignment_gone(h, &worker)).await;
        h.note("hold the worker's inbound traffic: it cannot re-arm its watch");
        h.sim().hold(worker_session).await;
        until(
            h,
            "the second assignment",
            assignment_holds(h, &worker, &second),
        )
        .await;
        h.note("release the worker");
        h.sim().release(worker_session).await;
        assert!(
            h.all_finished(Duration::from_secs(60)).await,
            "both tasks finish"
        );
        let report = h.finish().await;

        let trace = &report.trace;
        let assignment = h.layout().assignment(&worker);
        let registration = h.layout().worker(&worker);
        let create = format!(
            "m1 multi [check /zkdist/epoch v1, check {registration} v*, create {assignment} "
        );
        let recreated = find(trace, 0, &create);
        let recreated = find(trace, recreated + 1, &create);
        let released = find(trace, recreated, "control release w1");
        let announced = find(
            trace,
            released,
            &format!("deliver w1 event NodeCreated {assignment}"),
        );
        let read = find(
            trace,
            announced,
            &format!("read w1 get_data {assignment} -> "),
        );
        find(
            trace,
            read,
            &format!("decide w1: {worker} started {second}"),
        );
        let registered = find(trace, 0, "decide w1: ");
        assert!(
            !contains(trace, registered, &format!("w1 exists {assignment}")),
            "nothing is re-armed after a task"
        );
        report
    })
}
