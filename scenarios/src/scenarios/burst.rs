//! A burst of eight tasks arrives while the master hears nothing (its
//! inbound traffic is held), with only two workers, so one listing brings
//! all eight and six of them wait their turn; the tasks' run times differ,
//! so workers free up in an order of their own.
//!
//! What must hold: assignments follow submission order exactly (FIFO),
//! each task once, and every task finishes.

use std::time::Duration;

use super::script::{assigned_in_rounds, find, run, settle};
use crate::harness::RunReport;

pub fn run_scenario(seed: u64) -> RunReport {
    run(seed, async move |h| {
        let master = h.start_master().await;
        h.start_worker().await;
        h.start_worker().await;
        h.registered(1).await;
        h.registered(2).await;
        settle().await;

        h.note("hold the master's inbound traffic during the burst");
        h.sim().hold(master).await;
        for work_ms in [7, 1, 5, 3, 8, 2, 6, 4] {
            h.submit(work_ms * 1_000).await;
        }
        h.note("release the master");
        h.sim().release(master).await;
        assert!(
            h.all_finished(Duration::from_secs(60)).await,
            "every task finishes"
        );
        let report = h.finish().await;

        let trace = &report.trace;
        let released = find(trace, 0, "control release m1");
        find(
            trace,
            released,
            "deliver m1 reply get_children /zkdist/tasks watch -> 8 children",
        );
        let submitted: Vec<String> = report.submitted.iter().map(ToString::to_string).collect();
        assert_eq!(assigned_in_rounds(trace), submitted, "FIFO, each once");
        report
    })
}
