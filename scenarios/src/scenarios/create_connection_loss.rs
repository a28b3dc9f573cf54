//! Connection loss on the master's assignment create, where the create was
//! in fact applied: the master's link is cut right after the server
//! created the assignment node, so the reply is lost and the master's
//! create fails with `ConnectionLoss`.
//!
//! What happens today (the founding design does not handle this; the
//! failures issue will): the master takes the create for failed, puts the
//! task back at the head of its queue and the worker back to idle, but the
//! worker got the assignment and runs the task. No round runs after the
//! failure, nor after the link heals (no listing shows anything new), so
//! the master sits on a finished task as pending. The next task that
//! arrives triggers a round, which assigns the finished task again: the
//! worker runs it a second time. The checker stops the run there with
//! `finished-exactly-once`. This scenario asserts exactly that outcome, so
//! that the fix shows up as a reviewed change of this file and of its
//! snapshot.

use std::time::Duration;

use super::script::{assignment_exists, assignment_gone, find, run, settle, until};
use crate::checker::Invariant;
use crate::harness::RunReport;

pub fn run_scenario(seed: u64) -> RunReport {
    run(seed, async move |h| {
        let master = h.start_master().await;
        h.start_worker().await;
        let worker = h.registered(1).await;
        settle().await;

        let first = h.submit(10_000).await;
        until(
            h,
            "the assignment node is created",
            assignment_exists(h, &worker),
        )
        .await;
        h.note("cut the master's link: the create's reply is lost");
        h.cut(master, Duration::from_millis(50)).await;
        let result = h.layout().result(&first);
        until(h, "the worker finished the task", move |tree| {
            tree.exists(&result)
        })
        .await;
        until(h, "the worker released it", assignment_gone(h, &worker)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        h.note("a new task arrives");
        let second = h.submit(1_000).await;
        h.all_finished(Duration::from_secs(60)).await;
        let report = h.finish().await;

        let trace = &report.trace;
        let cut = find(trace, 0, "control cut m1");
        let lost = find(trace, cut, "lost m1 reply create");
        find(
            trace,
            lost,
            &format!("decide m1: assignment-failed {first}->{worker}"),
        );
        let arrived = find(trace, lost, &format!("decide client: submitted {second}"));
        find(trace, arrived, &format!("{first}->{worker}"));
        let violation = report
            .violation
            .as_ref()
            .expect("today the task runs twice");
        assert_eq!(violation.invariant, Invariant::FinishedExactlyOnce);
        assert_eq!(
            violation.detail,
            format!("{worker} started {first}, which {worker} already finished")
        );
        report
    })
}
