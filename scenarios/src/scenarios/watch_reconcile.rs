//! With the watch discovery, the master is cut off while tasks are
//! submitted: the server does not replay what its recursive watch missed,
//! so the master must find those tasks by the listing it sends once it is
//! back. A task submitted after the reconnection is reported by the watch
//! as usual.
//!
//! What must hold: no event reports the tasks created during the cut; the
//! reconcile listing queues them, in order; every task runs once, FIFO.

use std::time::Duration;

use zkdist_master::TaskDiscovery;

use super::script::{find, rounds_assigning, run_with, settle};
use crate::harness::RunReport;

/// Shorter than the session timeout: the master's session survives.
const CUT: Duration = Duration::from_millis(400);

pub fn run_scenario(seed: u64) -> RunReport {
    run_with(seed, TaskDiscovery::Watch, async move |h| {
        let master = h.start_master().await;
        h.start_worker().await;
        h.registered(1).await;
        settle().await;
        let first = h.submit(1_000).await;
        settle().await;

        h.note("cut the master off; two tasks are submitted meanwhile");
        h.cut(master, CUT).await;
        let missed = [h.submit(1_000).await, h.submit(1_000).await];
        tokio::time::sleep(CUT).await;
        settle().await;
        h.note("the master is back; one more task");
        let after = h.submit(1_000).await;
        assert!(
            h.all_finished(Duration::from_secs(60)).await,
            "every task finishes"
        );
        let report = h.finish().await;

        let trace = &report.trace;
        let layout = h.layout();
        find(
            trace,
            0,
            &format!("deliver m1 event NodeCreated {}", layout.task(&first)),
        );
        let cut = find(trace, 0, "control cut m1");
        for task in &missed {
            // The event of the task itself, not of its result.
            let event = format!("deliver m1 event NodeCreated {}", layout.task(task));
            assert!(
                !trace.iter().any(|line| line.ends_with(&event)),
                "the watch reported {task}, created while the master was away"
            );
        }
        let reconnected = find(trace, cut, "deliver m1 session Connected");
        let listed = find(
            trace,
            reconnected,
            "deliver m1 reply get_children /zkdist/tasks -> 3 children",
        );
        let queued = find(
            trace,
            listed,
            &format!("decide m1: task-queued {}", missed[0]),
        );
        find(
            trace,
            queued,
            &format!("decide m1: task-queued {}", missed[1]),
        );
        find(
            trace,
            listed,
            &format!("deliver m1 event NodeCreated {}", layout.task(&after)),
        );
        for task in missed.iter().chain([&first, &after]) {
            assert_eq!(rounds_assigning(trace, task), 1, "{task} assigned once");
        }
        report
    })
}
