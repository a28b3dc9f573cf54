//! A worker's assignment is re-created before the worker re-arms its watch
//! (the lost-wakeup case). The worker deletes its finished assignment;
//! everything travelling to it is held from that moment, so it cannot send
//! its next `exists` watch until the master, which heard of the delete,
//! has created its next assignment.
//!
//! What must hold: no event announces the second assignment (the watch was
//! not armed when it was created), yet the worker finds it when it re-arms
//! (the `exists` reply shows the node) and runs it.

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
        let recreated = find(
            trace,
            0,
            &format!("m1 multi [check /zkdist/epoch v1, create {assignment} "),
        );
        let recreated = find(
            trace,
            recreated + 1,
            &format!("m1 multi [check /zkdist/epoch v1, create {assignment} "),
        );
        let released = find(trace, recreated, "control release w1");
        let rearmed = find(
            trace,
            released,
            &format!("read w1 exists {assignment} watch -> v0"),
        );
        find(
            trace,
            rearmed,
            &format!("decide w1: {worker} started {second}"),
        );
        assert!(
            !contains(
                trace,
                recreated,
                &format!("deliver w1 event NodeCreated {assignment}")
            ),
            "no event announced the second assignment"
        );
        report
    })
}
