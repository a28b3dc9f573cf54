//! The core with the watch discovery, input by input: tasks learned from
//! the recursive watch's events, the reconcile listing (which must neither
//! lose a task newer than its read nor keep one deleted before it), and
//! deletions.

use super::test_support::*;
use super::*;
use crate::discovery::TaskDiscovery;

const EPOCH: Epoch = Epoch(9);

/// A started watch-discovery master whose first listings are in: `workers`
/// registered and idle, `tasks/` empty with `child_creates` creates so far.
fn initialised(workers: &[u32], child_creates: u64) -> MasterState {
    start_watch_master(
        MasterState::new(EPOCH, TaskDiscovery::Watch),
        workers,
        child_creates,
    )
}

#[test]
fn start_sets_the_recursive_watches_before_the_first_listings() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Watch);
    let step = master.start();
    assert_eq!(
        step.commands,
        vec![
            Command::List(Directory::Workers),
            Command::WatchRecursively(Directory::Tasks),
            Command::List(Directory::Tasks),
            Command::WatchRecursively(Directory::Assignments),
            Command::List(Directory::Assignments),
        ]
    );
    assert_eq!(master.discovery(), TaskDiscovery::Watch);
}

#[test]
fn each_created_task_is_queued_in_order_and_assigned_without_a_listing() {
    let mut master = initialised(&[1, 2], 0);
    let step = master.on_task_created(t(0).as_str());
    assert_eq!(creates(&step), vec![(w(1), t(0))]);
    assert!(
        !step.commands.contains(&Command::List(Directory::Tasks)),
        "no listing on a task event: {:?}",
        step.commands
    );
    confirm(&mut master, &step);
    let step = master.on_task_created(t(1).as_str());
    assert_eq!(creates(&step), vec![(w(2), t(1))]);
    confirm(&mut master, &step);
    // No idle worker left: the next tasks wait, in order.
    for n in [2, 3, 4] {
        let step = master.on_task_created(t(n).as_str());
        assert!(creates(&step).is_empty());
        assert!(
            step.decisions
                .contains(&MasterDecision::TaskQueued { task: t(n) })
        );
    }
    assert_eq!(pending(&master), vec![t(2), t(3), t(4)]);
    // The same create reported again (a listing read after it showed it
    // first) changes nothing.
    assert_eq!(master.on_task_created(t(3).as_str()), Step::default());
    // w1 finishes: it takes the oldest pending task.
    let step = master.on_assignment_node_deleted(w(1).as_str());
    assert_eq!(creates(&step), vec![(w(1), t(2))]);
}

#[test]
fn tasks_reported_before_the_first_listing_wait_for_initialisation() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Watch);
    master.start();
    master.on_workers_listed(worker_names(&[1]));
    master.on_recursive_watch_added(Directory::Tasks, false);
    master.on_recursive_watch_added(Directory::Assignments, false);
    // Created after the watch was set, before the listing was read: both
    // the event and the listing show it.
    let step = master.on_task_created(t(5).as_str());
    assert!(creates(&step).is_empty(), "no round before initialisation");
    master.on_tasks_listed_at(task_names(&[4, 5]), ChildCreates::new(6));
    let step = master.on_assignments_listed(vec![]);
    // t4 predates the master: its result is checked first. t5 came after
    // the watch, so no earlier master can have assigned it.
    assert_eq!(step.commands, vec![Command::CheckTasksFinished(vec![t(4)])]);
    let step = master.on_tasks_checked(vec![(t(4), false)]);
    assert!(master.is_initialised());
    assert_eq!(creates(&step), vec![(w(1), t(4))]);
    assert_eq!(pending(&master), vec![t(5)]);
}

#[test]
fn a_reconcile_drops_what_was_deleted_before_its_read_and_keeps_what_came_after() {
    let mut master = initialised(&[], 0);
    for n in 0..3 {
        master.on_task_created(t(n).as_str());
    }
    assert_eq!(pending(&master), vec![t(0), t(1), t(2)]);
    // Disconnected: t1 is deleted and t3 created unheard, then the session
    // reconnects and the tasks are listed again (5 creates so far). The
    // event of t4, created after that read, is handled before its reply.
    let step = master.on_watch_fired(Directory::Tasks);
    assert_eq!(step.commands, vec![Command::List(Directory::Tasks)]);
    master.on_task_created(t(4).as_str());
    let step = master.on_tasks_listed_at(task_names(&[0, 2, 3]), ChildCreates::new(4));
    assert!(
        step.decisions
            .contains(&MasterDecision::TaskVanished { task: t(1) })
    );
    assert!(
        step.decisions
            .contains(&MasterDecision::TaskQueued { task: t(3) })
    );
    assert!(
        !step
            .decisions
            .contains(&MasterDecision::TaskVanished { task: t(4) }),
        "t4 was created after the read: the listing cannot show it"
    );
    assert_eq!(pending(&master), vec![t(0), t(2), t(3), t(4)]);
    assert_eq!(
        master.processed_tasks().iter().cloned().collect::<Vec<_>>(),
        vec![t(0), t(2), t(3), t(4)]
    );
}

#[test]
fn a_reconcile_across_the_sequence_counter_wrap_keeps_what_came_after() {
    // The counter of `tasks/` passes i32::MAX: the names go on at
    // -2147483648, and the listing's stat counts 2^31 + 2 creates, which
    // the server reports as cversion 1 (2 * creates - 3 children, in 32
    // bits).
    const MAX: i32 = i32::MAX;
    const MIN: i32 = i32::MIN;
    let mut master = initialised(&[], (1 << 31) - 2);
    for n in [MAX - 1, MAX, MIN] {
        master.on_task_created(t(n).as_str());
    }
    assert_eq!(pending(&master), vec![t(MAX - 1), t(MAX), t(MIN)]);
    // Disconnected: t(MAX) is deleted and t(MIN + 1) created unheard; the
    // event of t(MIN + 2), created after the reconcile's read, is handled
    // before its reply.
    master.on_watch_fired(Directory::Tasks);
    master.on_task_created(t(MIN + 2).as_str());
    let listed_stat = zkdist_coord::Stat {
        cversion: 1,
        num_children: 3,
        ..zkdist_coord::Stat::default()
    };
    assert_eq!(
        listed_stat.child_creates(),
        ChildCreates::new((1 << 31) + 2)
    );
    let step = master.on_tasks_listed_at(
        task_names(&[MAX - 1, MIN, MIN + 1]),
        listed_stat.child_creates(),
    );
    assert!(
        step.decisions
            .contains(&MasterDecision::TaskVanished { task: t(MAX) })
    );
    assert!(
        !step
            .decisions
            .contains(&MasterDecision::TaskVanished { task: t(MIN + 2) }),
        "t(MIN + 2) was created after the read, though its number is lower"
    );
    // Submission order, across the wrap.
    assert_eq!(
        pending(&master),
        vec![t(MAX - 1), t(MIN), t(MIN + 1), t(MIN + 2)]
    );
}

#[test]
fn a_task_near_and_then_at_the_end_of_the_sequence_counter_is_reported_once_each() {
    let warn_from = (i32::MAX as u32 - crate::SEQUENCE_WARNING_CREATES) as i32;
    let near_limit = |step: &Step| {
        step.decisions
            .iter()
            .filter(|decision| matches!(decision, MasterDecision::SequenceCounterNearLimit { .. }))
            .cloned()
            .collect::<Vec<_>>()
    };
    // The step reports task `n`, in words that contain `text`.
    let assert_reported = |step: &Step, n: i32, text: &str| {
        let reported = MasterDecision::SequenceCounterNearLimit { task: t(n) };
        assert_eq!(near_limit(step), std::slice::from_ref(&reported));
        assert!(reported.to_string().contains(text), "{reported}");
    };
    let mut master = initialised(&[], warn_from as u64 - 1);
    let step = master.on_task_created(t(warn_from - 1).as_str());
    assert_eq!(near_limit(&step), []);
    let step = master.on_task_created(t(warn_from).as_str());
    assert_reported(
        &step,
        warn_from,
        ": 268435456 more creates under tasks/ bring",
    );
    let step = master.on_task_created(t(warn_from + 1).as_str());
    assert_eq!(near_limit(&step), [], "near: once per master state");
    for n in [i32::MAX - 2, i32::MAX - 1] {
        let step = master.on_task_created(t(n).as_str());
        assert_eq!(near_limit(&step), []);
    }
    // The last number, which a server from 3.6 on repeats from then on.
    let step = master.on_task_created(t(i32::MAX).as_str());
    assert_reported(&step, i32::MAX, "has reached its last number");
    let step = master.on_task_created(t(i32::MIN).as_str());
    assert_eq!(near_limit(&step), [], "reached: once per master state");
    // Past the wrap, as the queue orders numbers, is past the end; a
    // reconcile listing reports as events do.
    let mut master = initialised(&[], 1 << 31);
    master.on_watch_fired(Directory::Tasks);
    let step = master.on_tasks_listed_at(task_names(&[i32::MIN]), ChildCreates::new((1 << 31) + 1));
    assert_reported(&step, i32::MIN, "is past its last number");
}

#[test]
fn a_deleted_task_leaves_the_queue_or_is_forgotten_once_released() {
    let mut master = initialised(&[1], 0);
    let step = master.on_task_created(t(0).as_str());
    confirm(&mut master, &step);
    master.on_task_created(t(1).as_str());
    // A pending task deleted: it leaves the queue and the memory.
    let step = master.on_task_deleted(t(1).as_str());
    assert_eq!(
        step.decisions,
        vec![MasterDecision::TaskVanished { task: t(1) }]
    );
    assert!(pending(&master).is_empty());
    // A held one: remembered until its worker lets it go.
    master.on_task_deleted(t(0).as_str());
    assert!(master.processed_tasks().contains(&t(0)));
    master.on_assignment_node_deleted(w(1).as_str());
    assert!(
        master.processed_tasks().is_empty(),
        "{:?}",
        master.processed_tasks()
    );
    // A finished one that is not held is forgotten at once.
    let step = master.on_task_created(t(2).as_str());
    confirm(&mut master, &step);
    master.on_assignment_node_deleted(w(1).as_str());
    assert_eq!(master.processed_tasks().len(), 1);
    master.on_task_deleted(t(2).as_str());
    assert!(master.processed_tasks().is_empty());
}

#[test]
fn a_resent_watch_lists_again_and_foreign_names_are_reported_once() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Watch);
    master.start();
    // The watch had to be sent twice: the listing already in flight may
    // have been read before the watch was set.
    let step = master.on_recursive_watch_added(Directory::Tasks, true);
    assert!(step.commands.is_empty(), "one listing in flight at a time");
    let step = master.on_tasks_listed_at(vec![], ChildCreates::new(0));
    assert_eq!(step.commands, vec![Command::List(Directory::Tasks)]);

    let mut master = initialised(&[1], 0);
    let step = master.on_task_created("not-a-task");
    assert!(matches!(
        step.decisions.as_slice(),
        [MasterDecision::IgnoredNode { dir: Directory::Tasks, name, .. }] if name == "not-a-task"
    ));
    assert!(master.on_task_created("not-a-task").decisions.is_empty());
    assert_eq!(master.on_task_deleted("not-a-task"), Step::default());
    assert!(master.pending_tasks().is_empty());
    // Deleted, the name is forgotten (a foreign producer's names do not
    // pile up in the master), and reported again if it comes back.
    let step = master.on_task_created("not-a-task");
    assert!(matches!(
        step.decisions.as_slice(),
        [MasterDecision::IgnoredNode { dir: Directory::Tasks, name, .. }] if name == "not-a-task"
    ));
}

#[test]
#[should_panic(expected = "reached a master that lists")]
fn a_task_event_in_a_listing_master_is_a_bug() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_task_created(t(0).as_str());
}

#[test]
fn a_task_deleted_while_a_listing_is_in_flight_does_not_come_back_with_it() {
    let mut master = initialised(&[], 0);
    master.on_task_created(t(0).as_str());
    master.on_task_created(t(1).as_str());
    // A reconnection's listing is read, then t0 is deleted; the delete's
    // event is handled before the listing's reply, which still shows t0.
    master.on_watch_fired(Directory::Tasks);
    let step = master.on_task_deleted(t(0).as_str());
    assert_eq!(
        step.decisions,
        vec![MasterDecision::TaskVanished { task: t(0) }]
    );
    let step = master.on_tasks_listed_at(task_names(&[0, 1]), ChildCreates::new(2));
    assert!(
        !step
            .decisions
            .contains(&MasterDecision::TaskQueued { task: t(0) }),
        "{:?}",
        step.decisions
    );
    assert_eq!(pending(&master), vec![t(1)]);
    assert_eq!(
        master.processed_tasks().iter().cloned().collect::<Vec<_>>(),
        vec![t(1)]
    );
}

#[test]
fn a_deferred_reconcile_lists_when_due_and_not_on_every_reconnection() {
    let mut master = initialised(&[], 0);
    master.on_watch_fired(Directory::Tasks);
    let step = master.on_tasks_listing_failed("over the limit".into(), 5_000);
    assert_eq!(
        step.decisions,
        vec![MasterDecision::ReconcileDeferred {
            error: "over the limit".into(),
            retry_in_ms: 5_000
        }]
    );
    assert!(step.commands.is_empty());
    // Each failed attempt cost the connection: the reconnection does not
    // list at once.
    assert!(master.on_watch_fired(Directory::Tasks).commands.is_empty());
    // Tasks the watch reports meanwhile are queued as usual.
    assert!(
        master
            .on_task_created(t(0).as_str())
            .decisions
            .contains(&MasterDecision::TaskQueued { task: t(0) })
    );
    let step = master.on_reconcile_due();
    assert_eq!(step.commands, vec![Command::List(Directory::Tasks)]);
    master.on_tasks_listed_at(task_names(&[0]), ChildCreates::new(1));
    assert_eq!(pending(&master), vec![t(0)]);
}

/// One worker whose assignment of task 0 is being created, and task 1
/// queued behind it.
fn creating_task_0_with_task_1_queued() -> MasterState {
    let mut master = initialised(&[1], 0);
    let step = master.on_task_created(t(0).as_str());
    assert_eq!(creates(&step), vec![(w(1), t(0))]);
    master.on_task_created(t(1).as_str());
    assert_eq!(pending(&master), vec![t(1)]);
    master
}

/// A create in doubt, read back as not applied, of a task its client
/// deleted meanwhile: the task is not queued again, but its worker is free,
/// and a round must give it the next task rather than leave the queue
/// waiting beside it.
#[test]
fn a_worker_freed_by_a_vanished_task_takes_the_next_one() {
    let mut master = creating_task_0_with_task_1_queued();
    master.on_assignment_created(w(1), t(0), WriteOutcome::Unknown);
    // The deletion overtakes the read-back's reply.
    master.on_task_deleted(t(0).as_str());
    let step =
        master.on_assignment_recovered(w(1), t(0), AssignmentFound::Absent(TaskStatus::Unfinished));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    assert!(pending(&master).is_empty());
}

/// The same when the create was refused: a node in the way came and went,
/// and the task was deleted, before the reply.
#[test]
fn a_worker_freed_by_a_refused_create_of_a_vanished_task_takes_the_next_one() {
    let mut master = creating_task_0_with_task_1_queued();
    master.on_assignment_node_created(w(1).as_str());
    master.on_assignment_node_deleted(w(1).as_str());
    master.on_task_deleted(t(0).as_str());
    let step = master.on_assignment_created(w(1), t(0), WriteOutcome::Failed("exists".into()));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    assert!(pending(&master).is_empty());
}
