//! A worker finishes (deletes its assignment) while a new task arrives, and
//! the master hears of both only after both happened: its inbound traffic
//! is held from before the first change until after the second. The
//! server applies the two changes in the order the variant asks for, and
//! since one session hears events in server order, that is the order the
//! master sees them in once released.
//!
//! What must hold: the new task goes to the worker that just finished,
//! once; no rule breaks; the master's view matches ZooKeeper's at the end.
//! With the finish first, the worker-idle round finds no task yet and the
//! new-task round assigns it; with the task first, the new-task round finds
//! no idle worker and the worker-idle round assigns it.

use super::script::{
    assignment_exists, assignment_gone, find, rounds_assigning, run, settle, until,
};
use crate::harness::RunReport;

/// Which of the two changes the server applies first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    FinishFirst,
    TaskFirst,
}

pub fn run_order(seed: u64, order: Order) -> RunReport {
    run(seed, async move |h| {
        let master = h.start_master().await;
        h.start_worker().await;
        let worker = h.registered(1).await;
        settle().await;

        let first = h.submit(10_000).await;
        until(
            h,
            "the first task is assigned",
            assignment_exists(h, &worker),
        )
        .await;
        // The master hears of its own create and lists again; the worker
        // has 10 ms of work left.
        tokio::time::sleep(std::time::Duration::from_millis(4)).await;
        h.note("hold the master's inbound traffic");
        h.sim().hold(master).await;
        let second = match order {
            Order::FinishFirst => {
                until(h, "the worker finished", assignment_gone(h, &worker)).await;
                h.submit(1_000).await
            }
            Order::TaskFirst => {
                let second = h.submit(1_000).await;
                until(h, "the worker finished", assignment_gone(h, &worker)).await;
                second
            }
        };
        h.note("release the master");
        h.sim().release(master).await;
        assert!(
            h.all_finished(std::time::Duration::from_secs(60)).await,
            "both tasks finish"
        );
        let report = h.finish().await;

        // The interleaving happened: both changes were applied while the
        // master was held, in the order asked, and it heard them after the
        // release in that order.
        let trace = &report.trace;
        let held = find(trace, 0, "control hold m1");
        let deleted = find(
            trace,
            held,
            &format!("delete {} v0] -> ok", h.layout().assignment(&worker)),
        );
        let created = find(trace, held, &format!("-> {}", h.layout().task(&second)));
        let released = find(trace, held, "control release m1");
        assert!(deleted < released && created < released);
        let idle_event = find(
            trace,
            released,
            "deliver m1 event NodeChildrenChanged /zkdist/assignments",
        );
        let task_event = find(
            trace,
            released,
            "deliver m1 event NodeChildrenChanged /zkdist/tasks",
        );
        match order {
            Order::FinishFirst => assert!(deleted < created && idle_event < task_event),
            Order::TaskFirst => assert!(created < deleted && task_event < idle_event),
        }
        // Each task was assigned once; the second to the worker, after the
        // release.
        find(trace, released, &format!("{second}->{worker}"));
        assert_eq!(rounds_assigning(trace, &first), 1);
        assert_eq!(rounds_assigning(trace, &second), 1);
        report
    })
}
