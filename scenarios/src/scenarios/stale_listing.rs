//! The master's `get_children` reply on `tasks/` is still on its way when
//! the next task is created: the listing it gets is stale. The simulation
//! is paused and stepped until the server has answered the listing, the
//! master's inbound traffic is held, and a second task is created.
//!
//! What must hold: the watch the listing left fires for the second task,
//! and its event reaches the master right behind the stale reply, so the
//! master lists again and queues the second task: nothing is lost.

use std::time::Duration;

use super::script::{find, rounds_assigning, run, settle, step_until};
use crate::harness::RunReport;

pub fn run_scenario(seed: u64) -> RunReport {
    run(seed, async move |h| {
        let master = h.start_master().await;
        h.start_worker().await;
        h.registered(1).await;
        settle().await;

        h.note("pause, and step until the server answers the master's listing");
        h.sim().pause().await;
        let (first, ()) = tokio::join!(h.submit(20_000), async {
            step_until(h, "read m1 get_children /zkdist/tasks watch").await;
            h.sim().hold(master).await;
            h.sim().resume().await;
        });
        h.note("the listing's reply is held; a second task arrives");
        let second = h.submit(1_000).await;
        h.note("release the master");
        h.sim().release(master).await;
        assert!(
            h.all_finished(Duration::from_secs(60)).await,
            "both tasks finish"
        );
        let report = h.finish().await;

        let trace = &report.trace;
        let listed = find(
            trace,
            0,
            "read m1 get_children /zkdist/tasks watch -> 1 children",
        );
        let created = find(trace, listed, &format!("-> {}", h.layout().task(&second)));
        let released = find(trace, created, "control release m1");
        let stale = find(
            trace,
            released,
            "deliver m1 reply get_children /zkdist/tasks watch -> 1 children",
        );
        let fired = find(
            trace,
            stale,
            "deliver m1 event NodeChildrenChanged /zkdist/tasks",
        );
        let relisted = find(
            trace,
            fired,
            "deliver m1 reply get_children /zkdist/tasks watch -> 2 children",
        );
        find(trace, relisted, &format!("decide m1: task-queued {second}"));
        assert_eq!(rounds_assigning(trace, &first), 1);
        assert_eq!(rounds_assigning(trace, &second), 1);
        report
    })
}
