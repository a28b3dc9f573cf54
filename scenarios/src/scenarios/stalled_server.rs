//! A write whose reply a cut lost, read back through a server that has not
//! applied it: the master's assignment create, the worker's completion,
//! and the master candidate's claim.
//!
//! How it is forced: the actor's server is stalled first (see
//! `SimZk::stall`: it applies nothing new on its own for a while); the
//! simulation is paused and stepped until the write is applied, and the
//! actor's link is cut before the reply reaches it. The actor
//! reconnects through its stalled server, which has applied only what the
//! actor last heard of, from before the write. A read there says the write
//! did not happen; a `sync` first makes that server catch up. Neither the
//! seed nor the timing decides any of it: every seed gives the case.
//!
//! What must hold: no rule breaks, and every task finishes exactly once.
//! With the actor's syncs left out (the mutant tests'
//! `MasterSkipsSyncs` and `WorkerSkipsSyncs`), the scenario shows what
//! each sync prevents: a task run twice after the assignment create or the
//! completion. The claim's sync only saves a round trip: claiming again
//! fails on the candidate's own node, and that failed write brings its
//! server up to date.

use std::time::Duration;

use zkdist_coord::SessionId;
use zkdist_master::TaskDiscovery;

use super::script::{
    FINISH_LIMIT, OUTAGE, applied_at_cut, assignment_exists, find, run_configured, settle,
    step_until, until,
};
use crate::harness::{Harness, HarnessConfig, RunReport};

/// The kind of write whose reply is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// The master's assignment create.
    AssignmentCreate,
    /// The worker's completion (result create and assignment delete).
    Completion,
    /// The master candidate's claim (`master` create and epoch bump).
    Claim,
}

impl Write {
    /// How the masters discover tasks. The master's case runs the founding
    /// listing loop: its listing of `tasks/` comes back in a reply, so the
    /// server it reconnects through has applied the task's create, and
    /// only the assignment create is missing there. With the recursive
    /// watch the master hears of the task by an event, which tells a
    /// reconnect nothing: the server it comes back through may then lack
    /// the task too, and a read there finds nothing to assign again.
    fn discovery(self) -> TaskDiscovery {
        match self {
            Write::AssignmentCreate => TaskDiscovery::Listing,
            Write::Completion | Write::Claim => TaskDiscovery::default(),
        }
    }
}

/// How long the actor's server stays behind: well past the outage, the
/// reconnect and the read-back that follows.
const STALL: Duration = Duration::from_millis(500);
/// The work of the task the worker is in the middle of when its server
/// stalls, in microseconds: long enough to pause and stall meanwhile.
const LONG_TASK_US: u64 = 20_000;

/// With the simulation paused, stalls `session`'s server before the write
/// reaches it (so that server never applies the write on its own while
/// the actor looks), steps until the write (the line with `applied`) is
/// applied, then cuts `session`'s link, which loses the write's reply
/// still on its way, and resumes.
async fn lose_the_reply(h: &Harness, session: SessionId, what: &str, applied: &str) {
    h.note(format!(
        "stall the server of the session about to send the {what}"
    ));
    h.stall(session, STALL).await;
    step_until(h, applied).await;
    h.note(format!("cut the link: the {what}'s reply is lost"));
    h.cut(session, OUTAGE).await;
    h.sim().resume().await;
}

/// Runs the scenario for `write`, on a harness `configure` may change
/// further (the mutant tests plant a mutant there).
pub fn run_write(seed: u64, write: Write, configure: impl FnOnce(&mut HarnessConfig)) -> RunReport {
    let configure = |config: &mut HarnessConfig| {
        config.discovery = write.discovery();
        configure(config);
    };
    run_configured(seed, configure, async move |h| {
        if write == Write::Claim {
            h.sim().pause().await;
            let applied = "m1 multi [create /zkdist/master ephemeral";
            tokio::join!(h.start_master(), async {
                // The candidate has laid the tree out; its claim is next.
                step_until(h, "deliver m1 reply create /zkdist/epoch").await;
                lose_the_reply(h, h.master_session(1), "claim", applied).await;
            });
        } else {
            h.start_master().await;
        }
        h.start_worker().await;
        let worker = h.registered(1).await;
        h.start_worker().await;
        h.registered(2).await;
        settle().await;

        let (name, request) = match write {
            Write::Claim => {
                h.submit(1_000).await;
                ("m1", "multi [create /zkdist/master ephemeral")
            }
            Write::AssignmentCreate => {
                let m1 = h.master_session(1);
                let request = "multi [check /zkdist/epoch v1, check /zkdist/workers/";
                let applied = format!("m1 {request}");
                h.sim().pause().await;
                tokio::join!(h.submit(1_000), async {
                    // The listing that shows the master the task: it sends
                    // the assignment create in reaction.
                    step_until(h, "deliver m1 reply get_children /zkdist/tasks watch -> 1").await;
                    lose_the_reply(h, m1, "assignment create", &applied).await;
                });
                ("m1", request)
            }
            Write::Completion => {
                let w1 = h.worker_session(1);
                h.submit(LONG_TASK_US).await;
                until(h, "the task is assigned", assignment_exists(h, &worker)).await;
                // The worker runs its task meanwhile.
                h.sim().pause().await;
                let request = "multi [create /zkdist/tasks/";
                lose_the_reply(h, w1, "completion", &format!("w1 {request}")).await;
                ("w1", request)
            }
        };
        // One more task after the loss, so that later rounds run too.
        h.submit(1_000).await;
        let finished = h.guard(h.all_finished(FINISH_LIMIT)).await;
        assert_ne!(finished, Some(false), "every task finishes");
        let report = h.finish().await;
        assert_interleaving(&report.trace, name, request);
        report
    })
}

/// Asserts from the trace that the write's reply was lost at the cut, and
/// that the session reconnected through a server behind the write.
fn assert_interleaving(trace: &[String], name: &str, request: &str) {
    assert!(
        applied_at_cut(trace, name, request),
        "the write was applied and its reply lost"
    );
    let cut = find(trace, 0, &format!("control cut {name} "));
    find(
        trace,
        cut,
        &format!("heal {name}: reconnected, through a server as of"),
    );
}
