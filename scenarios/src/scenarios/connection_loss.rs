//! Connection loss on each kind of write, with the write applied and not
//! applied: the client's submit, the master's assignment create, the
//! worker's completion, and the master's reclaim of a dead worker's
//! assignment.
//!
//! How the loss is forced: the simulation is paused and stepped until the
//! reply or event that makes the actor send the write is delivered; the
//! actor is let react (it sends the write, which now travels to the
//! server), and its link is cut for a short while (the session survives).
//! The simulator applies a seeded prefix of the requests in flight before
//! the link fails: with this one write in flight, the seed decides whether
//! it reached the server (applied, its reply lost) or not. Each scenario's
//! seed is chosen for the case its name says, and the scenario asserts
//! from the trace that this case happened. Either way the actor sees
//! `ConnectionLoss` and must settle the outcome from the tree.
//!
//! What must hold: no rule breaks (no second task for one submit, no task
//! assigned twice, no result written twice or by a revoked worker), and
//! every task finishes exactly once.

use std::time::Duration;

use super::script::{
    FINISH_LIMIT, OUTAGE, applied_at_cut, assignment_exists, run, settle, step_until, until,
};
use crate::harness::{Harness, RunReport};
use zkdist_coord::SessionId;

/// The kind of write that meets the connection loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Submit,
    AssignmentCreate,
    Completion,
    Reclaim,
}

/// How long the actors get to react to the delivery just stepped.
const REACT: Duration = Duration::from_millis(5);

/// Lets the actors react to the delivery just stepped (the sim stays
/// paused, so what they send stays in flight), cuts `session`'s link, and
/// resumes.
async fn cut_in_flight(h: &Harness, session: SessionId, what: &str) {
    // Nothing arrives while paused, so the wait only needs to be long
    // enough for the actor to send (a worker's zero-length task still
    // waits on a timer first, which madsim may round up to a millisecond).
    tokio::time::sleep(REACT).await;
    h.note(format!("cut the link with the {what} in flight"));
    h.cut(session, OUTAGE).await;
    h.sim().resume().await;
}

pub fn run_write(seed: u64, write: Write, applied: bool) -> RunReport {
    run(seed, async move |h| {
        h.start_master().await;
        h.start_worker().await;
        let worker = h.registered(1).await;
        h.start_worker().await;
        h.registered(2).await;
        settle().await;

        let (name, request) = match write {
            Write::Submit => {
                h.sim().pause().await;
                let client = h.client_session();
                let (submitted, ()) = tokio::join!(h.try_submit(1_000), async {
                    // The create is sent: cut while it travels.
                    cut_in_flight(h, client, "task create").await;
                });
                submitted.expect("the client settles a lost submit by itself");
                ("client", "create /zkdist/tasks/task-")
            }
            Write::AssignmentCreate => {
                let m1 = h.master_session(1);
                h.sim().pause().await;
                let _task = tokio::join!(h.submit(1_000), async {
                    step_until(h, "deliver m1 reply get_children /zkdist/tasks watch -> 1").await;
                    cut_in_flight(h, m1, "assignment create").await;
                });
                (
                    "m1",
                    "multi [check /zkdist/epoch v1, check /zkdist/workers/",
                )
            }
            Write::Completion => {
                let w1 = h.worker_session(1);
                h.submit(0).await;
                until(h, "the task is assigned", assignment_exists(h, &worker)).await;
                h.sim().pause().await;
                step_until(h, "deliver w1 reply get_data /zkdist/tasks/").await;
                cut_in_flight(h, w1, "completion").await;
                ("w1", "multi [create /zkdist/tasks/")
            }
            Write::Reclaim => {
                let m1 = h.master_session(1);
                let w1 = h.worker_session(1);
                h.submit(1_000_000).await;
                until(h, "the task is assigned", assignment_exists(h, &worker)).await;
                h.sim().pause().await;
                h.note("expire the first worker's session while it holds its task");
                h.expire(w1).await;
                step_until(h, "deliver m1 reply get_children /zkdist/workers watch").await;
                cut_in_flight(h, m1, "reclaim").await;
                (
                    "m1",
                    "multi [check /zkdist/epoch v1, delete /zkdist/assignments/",
                )
            }
        };
        if write != Write::Submit {
            // One more task after the loss, so that later rounds run too.
            h.submit(1_000).await;
        }
        assert!(h.all_finished(FINISH_LIMIT).await, "every task finishes");
        let report = h.finish().await;
        assert_eq!(
            applied_at_cut(&report.trace, name, request),
            applied,
            "the seed no longer gives the case this scenario is named for"
        );
        report
    })
}
