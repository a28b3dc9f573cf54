//! A new worker registers while an assignment round is in progress: the
//! round's assignment node is created, but the master has not heard that
//! it was (its reply is held), when a task arrives and a second worker
//! registers.
//!
//! What must hold: once released, the master confirms the first
//! assignment, finds no idle worker for the new task (the only one it knew
//! is busy), then sees the new worker join and gives it the waiting task:
//! nobody gets two tasks, nothing is lost, FIFO holds.

use std::time::Duration;

use super::script::{assignment_exists, find, rounds_assigning, run, settle, until};
use crate::harness::RunReport;

pub fn run_scenario(seed: u64) -> RunReport {
    run(seed, async move |h| {
        let master = h.start_master().await;
        h.start_worker().await;
        let first_worker = h.registered(1).await;
        settle().await;

        let first = h.submit(30_000).await;
        until(
            h,
            "the round's assignment node exists",
            assignment_exists(h, &first_worker),
        )
        .await;
        // Its reply and the event it fired are still on their way.
        h.note("hold the master's inbound traffic while its round is in progress");
        h.sim().hold(master).await;
        let second = h.submit(1_000).await;
        h.start_worker().await;
        let second_worker = h.registered(2).await;
        h.note("release the master");
        h.sim().release(master).await;
        assert!(
            h.all_finished(Duration::from_secs(60)).await,
            "both tasks finish"
        );
        let report = h.finish().await;

        let trace = &report.trace;
        let held = find(trace, 0, "control hold m1");
        let registered = find(
            trace,
            held,
            &format!("w2 create {}", h.layout().worker(&second_worker)),
        );
        let released = find(trace, held, "control release m1");
        assert!(
            registered < released,
            "the worker registered during the round"
        );
        let confirmed = find(
            trace,
            released,
            &format!("decide m1: assignment-created {first}->{first_worker}"),
        );
        let joined = find(
            trace,
            released,
            &format!("decide m1: worker-joined {second_worker}"),
        );
        let assigned = find(trace, released, &format!("{second}->{second_worker}"));
        assert!(confirmed < joined && joined < assigned);
        assert_eq!(rounds_assigning(trace, &first), 1);
        assert_eq!(rounds_assigning(trace, &second), 1);
        report
    })
}
