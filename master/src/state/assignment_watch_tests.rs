//! The core with the watch discovery's recursive watch on `assignments/`,
//! input by input: a worker's delete event frees it and sends its next
//! task without a listing, in whatever order the event and the replies
//! about the same node come; the reconcile listing after a reconnection
//! (which must not undo a delete seen while it was in flight); foreign
//! nodes; workers that leave.

use super::test_support::*;
use super::*;
use crate::decision::{Recovery, RequeueReason, Trigger};
use crate::discovery::TaskDiscovery;

const EPOCH: Epoch = Epoch(11);

/// A started watch-discovery master whose first listings are in: `workers`
/// registered and idle, nothing else.
fn initialised(workers: &[u32]) -> MasterState {
    start_watch_master(MasterState::new(EPOCH, TaskDiscovery::Watch), workers, 0)
}

/// `initialised(&[1])` with t0 created and assigned to w1 (the create is
/// not answered yet) and t1 queued behind it.
fn t0_being_assigned_to_w1() -> MasterState {
    let mut master = initialised(&[1]);
    let step = master.on_task_created(t(0).as_str());
    assert_eq!(creates(&step), vec![(w(1), t(0))]);
    master.on_task_created(t(1).as_str());
    assert_eq!(pending(&master), vec![t(1)]);
    master
}

/// `t0_being_assigned_to_w1()` with the create confirmed (its event, then
/// its reply): w1 holds t0.
fn t0_held_by_w1() -> MasterState {
    let mut master = t0_being_assigned_to_w1();
    master.on_assignment_node_created(w(1).as_str());
    confirm_created(&mut master, w(1), t(0));
    master
}

fn worker_idle(worker: u32, task: i32) -> MasterDecision {
    MasterDecision::WorkerIdle {
        worker: w(worker),
        finished_task: t(task),
    }
}

/// The assignment `worker` holds, if any.
fn holding(master: &MasterState, worker: u32) -> Option<Assignment> {
    master.workers().get(&w(worker)).cloned().flatten()
}

fn lists(step: &Step) -> bool {
    step.commands
        .iter()
        .any(|command| matches!(command, Command::List(_)))
}

#[test]
fn a_delete_event_frees_the_worker_and_sends_its_next_task_without_a_listing() {
    let mut master = t0_being_assigned_to_w1();
    // The event of the master's own create, then its reply.
    assert_eq!(
        master.on_assignment_node_created(w(1).as_str()),
        Step::default()
    );
    confirm_created(&mut master, w(1), t(0));
    // w1 writes t0's result and releases it, in one transaction whose
    // events come in that order: its next task goes out at once.
    assert_eq!(master.on_result_created(t(0).as_str()), Step::default());
    let step = master.on_assignment_node_deleted(w(1).as_str());
    assert_eq!(step.decisions[0], worker_idle(1, 0));
    assert!(matches!(
        &step.decisions[1],
        MasterDecision::Round { triggers, assigned, .. }
            if *triggers == [Trigger::WorkerIdle] && *assigned == [(w(1), t(1))]
    ));
    assert_eq!(
        step.commands,
        vec![Command::CreateAssignment {
            worker: w(1),
            task: t(1),
            payload: None,
        }]
    );
    assert!(!lists(&step));
    assert!(master.processed_tasks().contains(&t(1)));
}

#[test]
fn a_delete_handled_before_its_create_reply_takes_effect_with_the_reply() {
    // The same node's create and delete, the delete's event handled before
    // the create's reply (both orders must end the same).
    let mut in_order = t0_being_assigned_to_w1();
    let mut in_order_decisions = Vec::new();
    for step in [
        in_order.on_assignment_node_created(w(1).as_str()),
        in_order.on_assignment_created(w(1), t(0), WriteOutcome::Applied),
        in_order.on_assignment_node_deleted(w(1).as_str()),
    ] {
        in_order_decisions.extend(step.decisions);
    }

    let mut overtaken = t0_being_assigned_to_w1();
    overtaken.on_assignment_node_created(w(1).as_str());
    let early = overtaken.on_assignment_node_deleted(w(1).as_str());
    assert_eq!(
        early,
        Step::default(),
        "the worker is not free before its create is confirmed"
    );
    assert_eq!(
        holding(&overtaken, 1).map(|a| a.task),
        Some(t(0)),
        "w1 keeps t0 until the reply"
    );
    let step = overtaken.on_assignment_created(w(1), t(0), WriteOutcome::Applied);
    assert_eq!(step.decisions, in_order_decisions);
    assert_eq!(creates(&step), vec![(w(1), t(1))]);

    assert_eq!(holding(&in_order, 1), holding(&overtaken, 1));
    assert_eq!(
        holding(&overtaken, 1),
        Some(Assignment {
            task: t(1),
            confirmed: false,
            result_heard: false,
        })
    );
    assert_eq!(pending(&overtaken), pending(&in_order));
    // Applied once: the next create's reply is an ordinary one.
    confirm_created(&mut overtaken, w(1), t(1));
}

#[test]
fn a_refused_create_whose_blocking_node_was_seen_deleted_does_not_block() {
    // Refused without a delete seen: the node in the way blocks w1.
    let mut master = t0_being_assigned_to_w1();
    master.on_assignment_created(w(1), t(0), WriteOutcome::Failed("node exists".into()));
    assert!(master.blocked_workers().contains(&w(1)));
    // Its delete unblocks w1, which takes the oldest task again.
    let step = master.on_assignment_node_deleted(w(1).as_str());
    assert_eq!(
        step.decisions[0],
        MasterDecision::WorkerUnblocked { worker: w(1) }
    );
    assert_eq!(creates(&step), vec![(w(1), t(0))]);

    // The delete overtook the refusal: nothing is in the way any more.
    let mut master = t0_being_assigned_to_w1();
    assert_eq!(
        master.on_assignment_node_deleted(w(1).as_str()),
        Step::default()
    );
    let step = master.on_assignment_created(w(1), t(0), WriteOutcome::Failed("node exists".into()));
    assert!(master.blocked_workers().is_empty());
    assert_eq!(creates(&step), vec![(w(1), t(0))]);
    assert_eq!(pending(&master), vec![t(1)]);
}

#[test]
fn a_task_deleted_while_its_refused_create_was_in_flight_is_not_queued_again() {
    // A foreign node appears at w1's assignment while the master's create
    // is in flight (so its event is taken for the create's), the client
    // deletes t0, and the create is refused: t0 is gone, not re-queued.
    let mut master = t0_being_assigned_to_w1();
    master.on_assignment_node_created(w(1).as_str());
    master.on_task_deleted(t(0).as_str());
    let step = master.on_assignment_created(w(1), t(0), WriteOutcome::Failed("node exists".into()));
    assert!(matches!(
        &step.decisions[..2],
        [
            MasterDecision::AssignmentFailed { task, .. },
            MasterDecision::TaskVanished { task: vanished },
        ] if *task == t(0) && *vanished == t(0)
    ));
    assert_eq!(pending(&master), vec![t(1)]);
    assert!(!master.processed_tasks().contains(&t(0)), "forgotten");
    assert!(
        master.blocked_workers().contains(&w(1)),
        "the node is in the way"
    );
    assert!(creates(&step).is_empty());
}

#[test]
fn a_delete_before_an_unknown_create_reply_is_settled_by_the_read_back() {
    let mut master = t0_being_assigned_to_w1();
    master.on_assignment_node_created(w(1).as_str());
    master.on_assignment_node_deleted(w(1).as_str());
    let step = master.on_assignment_created(w(1), t(0), WriteOutcome::Unknown);
    assert_eq!(
        step.commands,
        vec![Command::RecoverAssignment {
            worker: w(1),
            task: t(0)
        }]
    );
    // The read-back went out after the delete: no node, and t0's result.
    let step =
        master.on_assignment_recovered(w(1), t(0), AssignmentFound::Absent(TaskStatus::Finished));
    assert_eq!(
        step.decisions[..2],
        [
            MasterDecision::AssignmentRecovered {
                worker: w(1),
                task: t(0),
                recovery: Recovery::AppliedAndFinished
            },
            worker_idle(1, 0),
        ]
    );
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    // The delete was used up by the read-back: the next create's reply is
    // an ordinary one, and w1 stays busy with t1 once it is confirmed.
    confirm(&mut master, &step);
    assert_eq!(
        holding(&master, 1),
        Some(Assignment {
            task: t(1),
            confirmed: true,
            result_heard: false,
        })
    );
}

#[test]
fn a_delete_during_the_read_back_of_an_unknown_create_frees_the_worker_once() {
    // The read-back found the node, and the worker deleted it after: its
    // event overtook the read-back's reply.
    let mut master = t0_being_assigned_to_w1();
    master.on_assignment_created(w(1), t(0), WriteOutcome::Unknown);
    master.on_assignment_node_created(w(1).as_str());
    assert_eq!(
        master.on_assignment_node_deleted(w(1).as_str()),
        Step::default()
    );
    let step = master.on_assignment_recovered(w(1), t(0), AssignmentFound::Present);
    assert_eq!(
        step.decisions[..2],
        [
            MasterDecision::AssignmentRecovered {
                worker: w(1),
                task: t(0),
                recovery: Recovery::Applied
            },
            worker_idle(1, 0),
        ]
    );
    assert_eq!(creates(&step), vec![(w(1), t(1))]);

    // The read-back came after the delete: it finds t0 finished, and the
    // remembered delete frees nobody a second time.
    let mut master = t0_being_assigned_to_w1();
    master.on_assignment_created(w(1), t(0), WriteOutcome::Unknown);
    master.on_assignment_node_deleted(w(1).as_str());
    let step =
        master.on_assignment_recovered(w(1), t(0), AssignmentFound::Absent(TaskStatus::Finished));
    let idle: Vec<_> = step
        .decisions
        .iter()
        .filter(|d| matches!(d, MasterDecision::WorkerIdle { .. }))
        .collect();
    assert_eq!(idle, [&worker_idle(1, 0)]);
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    let step = master.on_assignment_created(w(1), t(1), WriteOutcome::Applied);
    assert_eq!(step.decisions.len(), 1, "{:?}", step.decisions);

    // Not applied, and the foreign node that refused it was deleted
    // meanwhile: w1 is not blocked, and takes t0 again.
    let mut master = t0_being_assigned_to_w1();
    master.on_assignment_created(w(1), t(0), WriteOutcome::Unknown);
    master.on_assignment_node_deleted(w(1).as_str());
    let step = master.on_assignment_recovered(w(1), t(0), AssignmentFound::Foreign);
    assert!(step.decisions.contains(&MasterDecision::TaskRequeued {
        task: t(0),
        reason: RequeueReason::AssignmentNotApplied { worker: w(1) }
    }));
    assert!(master.blocked_workers().is_empty());
    assert_eq!(creates(&step), vec![(w(1), t(0))]);
}

#[test]
fn a_delete_seen_while_a_reconcile_listing_is_in_flight_is_not_undone_by_it() {
    let mut master = t0_being_assigned_to_w1();
    let step = master.on_assignment_created(w(1), t(0), WriteOutcome::Applied);
    assert!(step.commands.is_empty());
    // A reconnection lists `assignments/`; the listing is read, then w1
    // releases t0, whose event is handled before the listing's reply.
    let step = master.on_watch_fired(Directory::Assignments);
    assert_eq!(step.commands, vec![Command::List(Directory::Assignments)]);
    let step = master.on_assignment_node_deleted(w(1).as_str());
    assert_eq!(step.decisions[0], worker_idle(1, 0));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    // The listing still shows w1's node: it neither frees w1 again nor
    // takes t1 from it.
    let step = master.on_assignments_listed(worker_names(&[1]));
    assert_eq!(step, Step::default());
    assert_eq!(
        holding(&master, 1),
        Some(Assignment {
            task: t(1),
            confirmed: false,
            result_heard: false,
        })
    );
    // A listing read after the delete and before t1's create shows no node
    // for w1; t1's create is unconfirmed, so that means nothing either.
    master.on_watch_fired(Directory::Assignments);
    assert_eq!(master.on_assignments_listed(vec![]), Step::default());
    confirm(&mut master, &creates_step(1, 1));
    assert_eq!(holding(&master, 1).map(|a| a.confirmed), Some(true));
}

/// A step holding one create, for `confirm`.
fn creates_step(worker: u32, task: i32) -> Step {
    Step {
        decisions: vec![],
        commands: vec![Command::CreateAssignment {
            worker: w(worker),
            task: t(task),
            payload: None,
        }],
    }
}

#[test]
fn the_reconcile_listing_finds_a_release_whose_event_was_lost() {
    let mut master = t0_being_assigned_to_w1();
    master.on_assignment_created(w(1), t(0), WriteOutcome::Applied);
    // Disconnected: w1 released t0 and the event was lost. The
    // reconnection's listing finds the node gone.
    master.on_watch_fired(Directory::Assignments);
    let step = master.on_assignments_listed(vec![]);
    assert_eq!(step.decisions[0], worker_idle(1, 0));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
}

#[test]
fn the_assignments_reconcile_is_not_held_back_by_a_deferred_tasks_reconcile() {
    let mut master = t0_being_assigned_to_w1();
    master.on_assignment_created(w(1), t(0), WriteOutcome::Applied);
    // The tasks reconcile failed (over the reply limit, say) and waits for
    // its retry; the next reconnection lists `assignments/` all the same,
    // and finds the release whose event was lost.
    master.on_watch_fired(Directory::Tasks);
    master.on_tasks_listing_failed("over the limit".into(), 5_000);
    let step = master.on_watch_fired(Directory::Assignments);
    assert_eq!(step.commands, vec![Command::List(Directory::Assignments)]);
    assert!(master.on_watch_fired(Directory::Tasks).commands.is_empty());
    let step = master.on_assignments_listed(vec![]);
    assert_eq!(step.decisions[0], worker_idle(1, 0));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    assert!(master.is_reconcile_deferred());
}

#[test]
fn a_foreign_assignment_blocks_an_idle_worker_until_it_is_deleted() {
    let mut master = initialised(&[1, 2]);
    let step = master.on_assignment_node_created(w(1).as_str());
    assert_eq!(
        step.decisions,
        vec![MasterDecision::ForeignAssignment { worker: w(1) }]
    );
    assert!(master.blocked_workers().contains(&w(1)));
    // w1 is in the way: the task goes to w2.
    let step = master.on_task_created(t(0).as_str());
    assert_eq!(creates(&step), vec![(w(2), t(0))]);
    master.on_task_created(t(1).as_str());
    let step = master.on_assignment_node_deleted(w(1).as_str());
    assert_eq!(
        step.decisions[0],
        MasterDecision::WorkerUnblocked { worker: w(1) }
    );
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    // A node of a worker the master does not know is reported, and
    // blocks no one.
    let step = master.on_assignment_node_created(w(9).as_str());
    assert_eq!(
        step.decisions,
        vec![MasterDecision::ForeignAssignment { worker: w(9) }]
    );
    assert!(master.blocked_workers().is_empty());
    // A name that is no worker id is reported once; its delete is ignored.
    let bad = "bad\u{1}name";
    let step = master.on_assignment_node_created(bad);
    assert!(matches!(
        step.decisions.as_slice(),
        [MasterDecision::IgnoredNode { dir: Directory::Assignments, name, .. }] if name == bad
    ));
    assert!(master.on_assignment_node_created(bad).decisions.is_empty());
    assert_eq!(master.on_assignment_node_deleted(bad), Step::default());
    // Forgotten once deleted: made again, it is reported again.
    assert_eq!(master.on_assignment_node_created(bad).decisions.len(), 1);
    // A delete of a node no one holds changes nothing.
    assert_eq!(
        master.on_assignment_node_deleted(w(9).as_str()),
        Step::default()
    );
}

#[test]
fn a_startup_assignment_deleted_before_its_read_is_finished_when_read() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Watch);
    master.start();
    master.on_workers_listed(worker_names(&[1]));
    master.on_recursive_watch_added(Directory::Tasks, false);
    master.on_tasks_listed_at(task_names(&[0, 1]), ChildCreates::new(2));
    master.on_recursive_watch_added(Directory::Assignments, false);
    let step = master.on_assignments_listed(worker_names(&[1]));
    assert_eq!(step.commands, vec![Command::ReadAssignment(w(1))]);
    // The read found t0; w1 released it after, and that event came first.
    assert_eq!(
        master.on_assignment_node_deleted(w(1).as_str()),
        Step::default()
    );
    let step = master.on_assignment_read(w(1), AssignmentData::Task(t(0)));
    assert_eq!(
        step.decisions,
        vec![
            MasterDecision::TaskInProgress {
                worker: w(1),
                task: t(0)
            },
            worker_idle(1, 0),
        ]
    );
    // Only t1 is checked and assigned, once initialised.
    assert_eq!(step.commands, vec![Command::CheckTasksFinished(vec![t(1)])]);
    // t0's result was written before the master knew w1 held it: unless
    // heard of, its status is read once the pause is over.
    assert!(master.has_release_checks_waiting());
    let step = master.on_tasks_checked(vec![(t(1), false)]);
    assert!(master.is_initialised());
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    assert_eq!(master.on_release_checks_due(), Step::default());
    let step = master.on_release_checks_due();
    assert_eq!(
        step.commands,
        vec![Command::CheckReleasedTask {
            worker: w(1),
            task: t(0)
        }]
    );
    assert_eq!(
        master.on_released_task_checked(w(1), t(0), TaskStatus::Finished),
        Step::default()
    );
    assert!(!master.has_release_checks_waiting());
}

#[test]
fn a_worker_that_leaves_after_its_delete_was_seen_is_settled_by_the_reclaim() {
    let mut master = t0_being_assigned_to_w1();
    master.on_assignment_node_created(w(1).as_str());
    master.on_assignment_node_deleted(w(1).as_str());
    // w1 leaves before the create's reply.
    master.on_watch_fired(Directory::Workers);
    master.on_workers_listed(vec![]);
    let step = master.on_assignment_created(w(1), t(0), WriteOutcome::Applied);
    assert_eq!(
        step.commands,
        vec![Command::Reclaim {
            worker: w(1),
            task: t(0)
        }]
    );
    // Its reclaim's delete (or any other) event changes nothing: the
    // reclaim's reply settles the task.
    assert_eq!(
        master.on_assignment_node_deleted(w(1).as_str()),
        Step::default()
    );
    let step = master.on_assignment_reclaimed(
        w(1),
        t(0),
        ReclaimOutcome::Reclaimed {
            deleted: false,
            status: TaskStatus::Finished,
        },
    );
    assert!(
        step.decisions
            .contains(&MasterDecision::ReclaimedTaskFinished {
                worker: w(1),
                task: t(0)
            })
    );
    assert_eq!(pending(&master), vec![t(1)]);
}

#[test]
fn a_resent_assignments_watch_lists_again() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Watch);
    master.start();
    master.on_workers_listed(vec![]);
    master.on_tasks_listed_at(vec![], ChildCreates::new(0));
    // The watch may have been set after the listing in flight was read.
    let step = master.on_recursive_watch_added(Directory::Assignments, true);
    assert!(step.commands.is_empty(), "one listing in flight at a time");
    let step = master.on_assignments_listed(vec![]);
    assert_eq!(step.commands, vec![Command::List(Directory::Assignments)]);
}

#[test]
#[should_panic(expected = "reached a master that lists")]
fn an_assignment_event_in_a_listing_master_is_a_bug() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_assignment_node_deleted(w(1).as_str());
}

/// An assignment deleted by someone other than its worker (by hand, say):
/// the worker gives the task up without a result, and the master, which
/// hears of no result for a whole pause, reads the task's status and
/// queues it again at its place; the next free worker runs it. A release
/// after a result heard of costs no read.
#[test]
fn a_release_without_a_result_heard_of_is_checked_and_its_task_queued_again() {
    let mut master = t0_held_by_w1();
    let step = master.on_assignment_node_deleted(w(1).as_str());
    assert_eq!(step.decisions[0], worker_idle(1, 0));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    assert!(master.has_release_checks_waiting());
    // Released just before the checks came due: it waits one more pause.
    assert_eq!(master.on_release_checks_due(), Step::default());
    let step = master.on_release_checks_due();
    assert_eq!(
        step.commands,
        vec![Command::CheckReleasedTask {
            worker: w(1),
            task: t(0)
        }]
    );
    assert!(!master.has_release_checks_waiting());
    // w1 took t1 meanwhile; t0 has no result: it is queued again.
    master.on_assignment_node_created(w(1).as_str());
    confirm_created(&mut master, w(1), t(1));
    let step = master.on_released_task_checked(w(1), t(0), TaskStatus::Unfinished);
    assert_eq!(
        step.decisions[0],
        MasterDecision::TaskRequeued {
            task: t(0),
            reason: RequeueReason::ReleasedUnfinished { worker: w(1) },
        }
    );
    assert!(creates(&step).is_empty(), "no worker is free");
    assert_eq!(master.pending_tasks().first(), Some(&t(0)));
    // w1 finishes t1 as a worker does: no read, and t0 goes out next.
    assert_eq!(master.on_result_created(t(1).as_str()), Step::default());
    let step = master.on_assignment_node_deleted(w(1).as_str());
    assert_eq!(creates(&step), vec![(w(1), t(0))]);
    assert!(
        !step
            .commands
            .iter()
            .any(|command| matches!(command, Command::CheckReleasedTask { .. })),
        "{:?}",
        step.commands
    );
}

/// A released task found finished (its result came after all, or it is
/// marked refused) or gone is not queued again.
#[test]
fn a_released_task_found_finished_or_gone_is_not_queued_again() {
    for status in [TaskStatus::Finished, TaskStatus::Gone] {
        let mut master = t0_held_by_w1();
        master.on_assignment_node_deleted(w(1).as_str());
        master.on_release_checks_due();
        let step = master.on_release_checks_due();
        assert_eq!(step.commands.len(), 1, "{status:?}");
        let step = master.on_released_task_checked(w(1), t(0), status);
        assert_eq!(step, Step::default(), "{status:?}");
        assert!(!master.pending_tasks().contains(&t(0)), "{status:?}");
    }
}

/// The client reports events of the two recursive watches in the order
/// each watch got them, not always across the two: a result's event may
/// come after the release's. Heard of before the checks are due, it
/// explains the release, and nothing is read.
#[test]
fn a_result_heard_of_after_the_release_costs_no_read() {
    let mut master = t0_held_by_w1();
    master.on_assignment_node_deleted(w(1).as_str());
    assert!(master.has_release_checks_waiting());
    assert_eq!(master.on_release_checks_due(), Step::default());
    assert_eq!(master.on_result_created(t(0).as_str()), Step::default());
    assert!(!master.has_release_checks_waiting());
    assert_eq!(master.on_release_checks_due(), Step::default());
    assert!(!master.pending_tasks().contains(&t(0)));
}

/// A worker may give a task up without a result on its own (it could
/// neither write the result nor mark the task refused): queued again once,
/// the task is left when it comes back so, instead of going round the
/// workers for ever, each running it.
#[test]
fn a_task_released_twice_without_a_result_is_queued_again_once_then_left() {
    let mut master = t0_held_by_w1();
    let release = |master: &mut MasterState, task: i32| {
        master.on_assignment_node_deleted(w(1).as_str());
        master.on_release_checks_due();
        let step = master.on_release_checks_due();
        assert_eq!(
            step.commands,
            vec![Command::CheckReleasedTask {
                worker: w(1),
                task: t(task)
            }]
        );
        master.on_released_task_checked(w(1), t(task), TaskStatus::Unfinished)
    };
    // w1 takes t1 on releasing t0; t0 is queued again behind it.
    let step = release(&mut master, 0);
    assert!(matches!(
        step.decisions[0],
        MasterDecision::TaskRequeued {
            reason: RequeueReason::ReleasedUnfinished { .. },
            ..
        }
    ));
    master.on_assignment_node_created(w(1).as_str());
    confirm_created(&mut master, w(1), t(1));
    // t1 finishes as a worker does; t0 goes out again, and comes back
    // without a result again: left.
    master.on_result_created(t(1).as_str());
    let step = master.on_assignment_node_deleted(w(1).as_str());
    assert_eq!(creates(&step), vec![(w(1), t(0))]);
    master.on_assignment_node_created(w(1).as_str());
    confirm_created(&mut master, w(1), t(0));
    let step = release(&mut master, 0);
    assert_eq!(
        step.decisions,
        vec![MasterDecision::ReleasedTaskLeft {
            worker: w(1),
            task: t(0)
        }]
    );
    assert!(master.pending_tasks().is_empty());
}
