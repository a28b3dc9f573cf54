//! The core, input by input: initialisation, each of the triggers (and
//! that nothing else runs a round), FIFO order, the diffs, and the failure
//! paths: dead workers, creates in doubt, reclaims, bounded memory and
//! deposition.

use super::test_support::*;
use super::*;
use crate::decision::{Recovery, RequeueReason, Trigger};
use crate::discovery::TaskDiscovery;

const EPOCH: Epoch = Epoch(4);

/// One round as (triggers, assignments).
type RoundSummary = (Vec<Trigger>, Vec<(WorkerId, TaskId)>);

/// The rounds a step ran.
fn rounds(step: &Step) -> Vec<RoundSummary> {
    step.decisions
        .iter()
        .filter_map(|decision| match decision {
            MasterDecision::Round {
                triggers, assigned, ..
            } => Some((triggers.clone(), assigned.clone())),
            _ => None,
        })
        .collect()
}

/// A started master whose first listings are in: `workers` registered and
/// idle, no task, no assignment. The listings are done, so the next
/// `on_*_listed` needs a watch to have fired first.
fn initialised(workers: &[u32]) -> MasterState {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_workers_listed(worker_names(workers));
    master.on_tasks_listed(vec![]);
    let step = master.on_assignments_listed(vec![]);
    assert!(master.is_initialised());
    assert!(matches!(
        step.decisions.first(),
        Some(MasterDecision::Initialised { .. })
    ));
    master
}

/// Fires the directory's watch and feeds the listing the shell would get.
fn relist(master: &mut MasterState, dir: Directory, children: Vec<String>) -> Step {
    let fired = master.on_watch_fired(dir);
    assert_eq!(fired.commands, vec![Command::List(dir)]);
    assert!(fired.decisions.is_empty());
    match dir {
        Directory::Workers => master.on_workers_listed(children),
        Directory::Tasks => master.on_tasks_listed(children),
        Directory::Assignments => master.on_assignments_listed(children),
    }
}

/// w1 busy with t1 (confirmed), `pending` tasks queued behind it.
fn one_busy_worker(pending: &[i32]) -> MasterState {
    let mut master = initialised(&[1]);
    let mut all = vec![1];
    all.extend_from_slice(pending);
    let step = relist(&mut master, Directory::Tasks, task_names(&all));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    confirm(&mut master, &step);
    let step = relist(&mut master, Directory::Assignments, worker_names(&[1]));
    assert_eq!(
        step,
        Step::default(),
        "the master's own create changes nothing"
    );
    master
}

#[test]
fn start_lists_the_three_directories() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    let step = master.start();
    assert_eq!(
        step.commands,
        vec![
            Command::List(Directory::Workers),
            Command::List(Directory::Tasks),
            Command::List(Directory::Assignments),
        ]
    );
    assert!(step.decisions.is_empty());
    assert!(!master.is_initialised());
}

#[test]
fn empty_system_initialises_without_a_round() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    assert_eq!(master.on_workers_listed(vec![]), Step::default());
    assert_eq!(master.on_tasks_listed(vec![]), Step::default());
    let step = master.on_assignments_listed(vec![]);
    assert_eq!(
        step.decisions,
        vec![MasterDecision::Initialised {
            workers: 0,
            pending_tasks: 0,
            busy_workers: 0
        }]
    );
    assert!(step.commands.is_empty());
    assert_eq!(master.rounds_run(), 0);
}

#[test]
fn no_round_runs_before_the_state_is_built() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    // Workers and tasks are known, but the assignments listing is not in:
    // a worker may be busy, so nothing may be assigned yet.
    let step = master.on_workers_listed(worker_names(&[1]));
    assert!(rounds(&step).is_empty());
    let step = master.on_tasks_listed(task_names(&[1]));
    assert!(rounds(&step).is_empty());
    assert!(
        step.commands.is_empty(),
        "result checks wait for the assignments"
    );
    let step = master.on_assignments_listed(vec![]);
    assert!(rounds(&step).is_empty(), "the result check is not in");
    assert_eq!(step.commands, vec![Command::CheckTasksFinished(vec![t(1)])]);
    assert!(!master.is_initialised());

    let step = master.on_tasks_checked(vec![(t(1), false)]);
    assert!(master.is_initialised());
    assert_eq!(
        rounds(&step),
        vec![(
            vec![Trigger::NewTask, Trigger::NewWorker],
            vec![(w(1), t(1))]
        )]
    );
    assert_eq!(
        step.commands,
        vec![Command::CreateAssignment {
            worker: w(1),
            task: t(1),
            payload: None,
        }]
    );
}

#[test]
fn initialisation_adopts_existing_workers_tasks_and_assignments() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_workers_listed(worker_names(&[1, 2, 3]));
    let step = master.on_tasks_listed(task_names(&[5, 2, 4, 1, 3]));
    assert!(step.commands.is_empty(), "checks wait for the assignments");
    let step = master.on_assignments_listed(worker_names(&[2]));
    assert_eq!(step.commands, vec![Command::ReadAssignment(w(2))]);

    // Task 1 finished before this master started; worker 2 runs task 2,
    // which needs no check once its assignment is read.
    let step = master.on_assignment_read(w(2), AssignmentData::Task(t(2)));
    assert_eq!(
        step.decisions,
        vec![MasterDecision::TaskInProgress {
            worker: w(2),
            task: t(2)
        }]
    );
    assert_eq!(
        step.commands,
        vec![Command::CheckTasksFinished(vec![t(1), t(3), t(4), t(5)])],
        "checked in sequence order, in one batch, after the assignment reads"
    );
    let step = master.on_tasks_checked(vec![
        (t(1), true),
        (t(3), false),
        (t(4), false),
        (t(5), false),
    ]);
    assert_eq!(
        step.decisions[..2],
        [
            MasterDecision::TaskAlreadyFinished { task: t(1) },
            MasterDecision::Initialised {
                workers: 3,
                pending_tasks: 3,
                busy_workers: 1
            }
        ]
    );
    assert_eq!(
        rounds(&step),
        vec![(
            vec![Trigger::NewTask, Trigger::NewWorker],
            vec![(w(1), t(3)), (w(3), t(4))]
        )]
    );
    assert_eq!(pending(&master), [t(5)]);
    assert_eq!(
        master.workers()[&w(2)],
        Some(Assignment {
            task: t(2),
            confirmed: true,
            result_heard: false,
        })
    );

    // Worker 2 finishing its adopted task frees it for task 5.
    let step = relist(&mut master, Directory::Assignments, worker_names(&[1, 3]));
    assert_eq!(
        rounds(&step),
        vec![(vec![Trigger::WorkerIdle], vec![(w(2), t(5))])]
    );
}

#[test]
fn start_up_checks_go_in_batches_and_the_state_waits_for_every_one() {
    let queued = 2 * TASK_CHECKS_PER_BATCH + 3;
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_workers_listed(worker_names(&[1]));
    let numbers: Vec<i32> = (1..=queued as i32).collect();
    master.on_tasks_listed(task_names(&numbers));
    let step = master.on_assignments_listed(vec![]);
    let batches: Vec<Vec<TaskId>> = step
        .commands
        .iter()
        .map(|command| match command {
            Command::CheckTasksFinished(batch) => batch.clone(),
            other => panic!("only checks go out, not {other:?}"),
        })
        .collect();
    let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    assert_eq!(
        sizes,
        [TASK_CHECKS_PER_BATCH, TASK_CHECKS_PER_BATCH, 3],
        "full batches first"
    );
    let in_order: Vec<TaskId> = batches.concat();
    assert_eq!(
        in_order,
        numbers.iter().map(|&n| t(n)).collect::<Vec<_>>(),
        "every queued task once, in queue order"
    );

    // The batches may be answered in any order; the state is built once
    // the last is in, and not before.
    let answer = |batch: &[TaskId]| -> Vec<(TaskId, bool)> {
        batch
            .iter()
            .map(|task| (task.clone(), *task == t(2)))
            .collect()
    };
    for batch in [&batches[2], &batches[0]] {
        let step = master.on_tasks_checked(answer(batch));
        assert!(!master.is_initialised());
        assert!(rounds(&step).is_empty());
    }
    let step = master.on_tasks_checked(answer(&batches[1]));
    assert!(master.is_initialised());
    assert_eq!(
        rounds(&step),
        vec![(
            vec![Trigger::NewTask, Trigger::NewWorker],
            vec![(w(1), t(1))]
        )]
    );
    assert!(
        !pending(&master).contains(&t(2)),
        "the settled task is not queued"
    );
    assert_eq!(pending(&master).len(), queued - 2);
}

#[test]
#[should_panic(expected = "which are not a batch still out")]
fn an_answer_to_part_of_a_batch_is_a_bug() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_workers_listed(vec![]);
    master.on_tasks_listed(task_names(&[1, 2]));
    master.on_assignments_listed(vec![]);
    master.on_tasks_checked(vec![(t(1), false)]);
}

#[test]
#[should_panic(expected = "tasks are checked only while initialising")]
fn a_batch_answered_twice_is_a_bug() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_workers_listed(vec![]);
    master.on_tasks_listed(task_names(&[1, 2]));
    master.on_assignments_listed(vec![]);
    master.on_tasks_checked(vec![(t(1), false), (t(2), true)]);
    master.on_tasks_checked(vec![(t(1), false), (t(2), true)]);
}

/// A master whose start-up found w1 registered, tasks 1 and 2, and an
/// assignment of task 1 to w9, which is not registered. Initialised; its
/// first round gave task 2 to w1.
fn stale_assignment_found() -> MasterState {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_workers_listed(worker_names(&[1]));
    master.on_tasks_listed(task_names(&[1, 2]));
    master.on_assignments_listed(worker_names(&[9]));
    let step = master.on_assignment_read(w(9), AssignmentData::Task(t(1)));
    assert_eq!(
        step.decisions,
        vec![MasterDecision::StaleAssignment {
            worker: w(9),
            task: Some(t(1))
        }]
    );
    assert_eq!(
        step.commands,
        vec![
            Command::Reclaim {
                worker: w(9),
                task: t(1)
            },
            Command::CheckTasksFinished(vec![t(2)]),
        ]
    );
    let step = master.on_tasks_checked(vec![(t(2), false)]);
    assert_eq!(
        rounds(&step),
        vec![(
            vec![Trigger::NewTask, Trigger::NewWorker],
            vec![(w(1), t(2))]
        )],
        "task 1 is held by the stale assignment until it is reclaimed: not checked"
    );
    assert!(master.pending_tasks().is_empty());
    assert_eq!(master.reclaiming().collect::<Vec<_>>(), [(&w(9), &t(1))]);
    master
}

#[test]
fn a_stale_assignment_found_at_start_up_is_reclaimed_and_its_task_requeued() {
    let mut master = stale_assignment_found();
    let step = master.on_assignment_reclaimed(
        w(9),
        t(1),
        ReclaimOutcome::Reclaimed {
            deleted: true,
            status: TaskStatus::Unfinished,
        },
    );
    assert_eq!(
        step.decisions,
        vec![
            MasterDecision::AssignmentReclaimed {
                worker: w(9),
                task: t(1),
                deleted: true
            },
            MasterDecision::TaskRequeued {
                task: t(1),
                reason: RequeueReason::WorkerGone { worker: w(9) }
            },
            MasterDecision::Round {
                round: 2,
                triggers: vec![Trigger::TaskRequeued],
                assigned: vec![]
            },
        ]
    );
    assert!(step.commands.is_empty(), "w1 is busy: nothing to assign");
    assert_eq!(pending(&master), [t(1)]);
    assert_eq!(master.reclaiming().count(), 0);
}

#[test]
fn a_stale_assignment_whose_task_has_a_result_is_reclaimed_and_not_requeued() {
    let mut master = stale_assignment_found();
    let step = master.on_assignment_reclaimed(
        w(9),
        t(1),
        ReclaimOutcome::Reclaimed {
            deleted: true,
            status: TaskStatus::Finished,
        },
    );
    assert_eq!(
        step.decisions,
        vec![
            MasterDecision::AssignmentReclaimed {
                worker: w(9),
                task: t(1),
                deleted: true
            },
            MasterDecision::ReclaimedTaskFinished {
                worker: w(9),
                task: t(1)
            },
        ]
    );
    assert!(rounds(&step).is_empty());
    assert!(master.pending_tasks().is_empty());
}

#[test]
fn assignment_gone_before_its_read_leaves_the_worker_idle() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_workers_listed(worker_names(&[1]));
    master.on_tasks_listed(vec![]);
    master.on_assignments_listed(worker_names(&[1]));
    let step = master.on_assignment_read(w(1), AssignmentData::Gone);
    assert!(master.is_initialised());
    assert_eq!(
        rounds(&step),
        vec![(vec![Trigger::NewWorker], vec![])],
        "the new worker fires a round, with nothing to assign"
    );
    assert_eq!(master.idle_workers().collect::<Vec<_>>(), vec![&w(1)]);
}

#[test]
fn a_new_task_fires_a_round() {
    // Round 1 ran at start-up, for the two workers found.
    let mut master = initialised(&[1, 2]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[1]));
    assert_eq!(
        step.decisions,
        vec![
            MasterDecision::TaskQueued { task: t(1) },
            MasterDecision::Round {
                round: 2,
                triggers: vec![Trigger::NewTask],
                assigned: vec![(w(1), t(1))]
            }
        ]
    );
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
}

#[test]
fn a_new_task_with_no_idle_worker_still_fires_a_round_that_assigns_nothing() {
    let mut master = one_busy_worker(&[]);
    let before = master.rounds_run();
    let step = relist(&mut master, Directory::Tasks, task_names(&[1, 2]));
    assert_eq!(rounds(&step), vec![(vec![Trigger::NewTask], vec![])]);
    assert!(step.commands.is_empty());
    assert_eq!(master.rounds_run(), before + 1);
    assert_eq!(pending(&master), [t(2)]);
}

#[test]
fn a_new_worker_fires_a_round() {
    let mut master = initialised(&[]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[1, 2]));
    assert_eq!(rounds(&step), vec![(vec![Trigger::NewTask], vec![])]);
    let step = relist(&mut master, Directory::Workers, worker_names(&[4]));
    assert_eq!(
        step.decisions,
        vec![
            MasterDecision::WorkerJoined { worker: w(4) },
            MasterDecision::Round {
                round: 2,
                triggers: vec![Trigger::NewWorker],
                assigned: vec![(w(4), t(1))]
            }
        ]
    );
}

#[test]
fn a_new_worker_with_no_pending_task_fires_a_round_that_assigns_nothing() {
    let mut master = initialised(&[1]);
    let step = relist(&mut master, Directory::Workers, worker_names(&[1, 2]));
    assert_eq!(rounds(&step), vec![(vec![Trigger::NewWorker], vec![])]);
    assert!(step.commands.is_empty());
}

#[test]
fn a_worker_becoming_idle_fires_a_round() {
    // Rounds 1 (start-up, one worker) and 2 (tasks 1 and 2) have run.
    let mut master = one_busy_worker(&[2]);
    let step = relist(&mut master, Directory::Assignments, vec![]);
    assert_eq!(
        step.decisions,
        vec![
            MasterDecision::WorkerIdle {
                worker: w(1),
                finished_task: t(1)
            },
            MasterDecision::Round {
                round: 3,
                triggers: vec![Trigger::WorkerIdle],
                assigned: vec![(w(1), t(2))]
            }
        ]
    );
}

#[test]
fn a_worker_becoming_idle_with_nothing_pending_fires_a_round_that_assigns_nothing() {
    let mut master = one_busy_worker(&[]);
    let step = relist(&mut master, Directory::Assignments, vec![]);
    assert_eq!(rounds(&step), vec![(vec![Trigger::WorkerIdle], vec![])]);
    assert_eq!(master.idle_workers().count(), 1);
}

#[test]
fn nothing_but_the_three_triggers_fires_a_round() {
    let mut master = one_busy_worker(&[2]);
    let rounds_before = master.rounds_run();
    // The same children again: no diff, no decision at all.
    assert_eq!(
        relist(&mut master, Directory::Tasks, task_names(&[1, 2])),
        Step::default()
    );
    assert_eq!(
        relist(&mut master, Directory::Workers, worker_names(&[1])),
        Step::default()
    );
    assert_eq!(
        relist(&mut master, Directory::Assignments, worker_names(&[1])),
        Step::default()
    );
    // A pending task deleted by a client: dropped, no round.
    let step = relist(&mut master, Directory::Tasks, task_names(&[1]));
    assert_eq!(
        step.decisions,
        vec![MasterDecision::TaskVanished { task: t(2) }]
    );
    // A worker registering and one leaving in the same listing: only the
    // new one fires a round.
    let step = relist(&mut master, Directory::Workers, worker_names(&[1, 2]));
    assert_eq!(rounds(&step), vec![(vec![Trigger::NewWorker], vec![])]);
    let step = relist(&mut master, Directory::Workers, worker_names(&[1]));
    assert_eq!(
        step.decisions,
        vec![MasterDecision::WorkerLeft {
            worker: w(2),
            held_task: None
        }]
    );
    // A watch firing alone only lists.
    let fired = master.on_watch_fired(Directory::Tasks);
    assert_eq!(fired.commands, vec![Command::List(Directory::Tasks)]);
    assert!(fired.decisions.is_empty());
    master.on_tasks_listed(task_names(&[1]));
    assert_eq!(master.rounds_run(), rounds_before + 1);
}

#[test]
fn the_masters_own_assignment_create_triggers_nothing() {
    let mut master = initialised(&[1, 2]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[1, 2, 3]));
    assert_eq!(creates(&step), vec![(w(1), t(1)), (w(2), t(2))]);
    let rounds_before = master.rounds_run();
    // Listed before the creates were confirmed, and after.
    assert_eq!(
        relist(&mut master, Directory::Assignments, worker_names(&[1])),
        Step::default()
    );
    confirm(&mut master, &step);
    assert_eq!(
        relist(&mut master, Directory::Assignments, worker_names(&[1, 2])),
        Step::default()
    );
    assert_eq!(master.rounds_run(), rounds_before);
}

#[test]
fn a_listing_taken_before_the_create_does_not_free_the_worker() {
    let mut master = initialised(&[1]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[1, 2]));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    // This listing was sent before the create, so it cannot show it: the
    // worker is not idle, whatever the listing says.
    let stale = relist(&mut master, Directory::Assignments, vec![]);
    assert_eq!(stale, Step::default());
    assert_eq!(master.idle_workers().count(), 0);
    confirm(&mut master, &step);
    // Listed after the confirmation: now absence means finished.
    let step = relist(&mut master, Directory::Assignments, vec![]);
    assert_eq!(
        rounds(&step),
        vec![(vec![Trigger::WorkerIdle], vec![(w(1), t(2))])]
    );
}

#[test]
fn tasks_are_assigned_in_sequence_order() {
    let mut master = initialised(&[1]);
    // ZooKeeper lists children in no order.
    let first = relist(&mut master, Directory::Tasks, task_names(&[3, 1, 2]));
    assert_eq!(creates(&first), vec![(w(1), t(1))]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[3, 1, 2, 5, 4]));
    assert_eq!(rounds(&step), vec![(vec![Trigger::NewTask], vec![])]);
    assert_eq!(pending(&master), [t(2), t(3), t(4), t(5)]);
    let mut order = vec![t(1)];
    let mut step = first;
    for _ in 0..4 {
        confirm(&mut master, &step);
        step = relist(&mut master, Directory::Assignments, vec![]);
        order.extend(creates(&step).into_iter().map(|(_, task)| task));
    }
    assert_eq!(order, (1..=5).map(t).collect::<Vec<_>>());
}

#[test]
fn one_round_fills_every_idle_worker_in_fifo_order() {
    let mut master = initialised(&[3, 1, 2]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[10, 11]));
    assert_eq!(creates(&step), vec![(w(1), t(10)), (w(2), t(11))]);
    assert_eq!(master.idle_workers().collect::<Vec<_>>(), vec![&w(3)]);
}

/// w1 busy with t1 and w2 busy with t2, both confirmed; `pending` queued.
fn two_busy_workers(pending_after: &[i32]) -> MasterState {
    let mut master = initialised(&[1, 2]);
    let mut all = vec![1, 2];
    all.extend_from_slice(pending_after);
    let step = relist(&mut master, Directory::Tasks, task_names(&all));
    assert_eq!(creates(&step), vec![(w(1), t(1)), (w(2), t(2))]);
    confirm(&mut master, &step);
    master
}

#[test]
fn a_dead_workers_task_returns_to_its_fifo_place_and_runs_next() {
    let mut master = two_busy_workers(&[3, 4]);
    let step = relist(&mut master, Directory::Workers, worker_names(&[2]));
    assert_eq!(
        step.decisions,
        vec![MasterDecision::WorkerLeft {
            worker: w(1),
            held_task: Some(t(1))
        }]
    );
    assert_eq!(
        step.commands,
        vec![Command::Reclaim {
            worker: w(1),
            task: t(1)
        }]
    );
    // Until the reclaim is answered, the task is neither pending nor held
    // by a registered worker: it can run nowhere.
    assert_eq!(pending(&master), [t(3), t(4)]);
    assert_eq!(master.reclaiming().collect::<Vec<_>>(), [(&w(1), &t(1))]);
    let step = master.on_assignment_reclaimed(
        w(1),
        t(1),
        ReclaimOutcome::Reclaimed {
            deleted: true,
            status: TaskStatus::Unfinished,
        },
    );
    assert_eq!(
        step.decisions[..2],
        [
            MasterDecision::AssignmentReclaimed {
                worker: w(1),
                task: t(1),
                deleted: true
            },
            MasterDecision::TaskRequeued {
                task: t(1),
                reason: RequeueReason::WorkerGone { worker: w(1) }
            },
        ]
    );
    assert_eq!(
        rounds(&step),
        vec![(vec![Trigger::TaskRequeued], vec![])],
        "no idle worker"
    );
    assert_eq!(pending(&master), [t(1), t(3), t(4)], "back at the head");
    // The next worker to finish takes the re-queued task before the later
    // ones.
    let step = relist(&mut master, Directory::Assignments, vec![]);
    assert_eq!(
        rounds(&step),
        vec![(vec![Trigger::WorkerIdle], vec![(w(2), t(1))])]
    );
    assert_eq!(pending(&master), [t(3), t(4)]);
}

#[test]
fn a_dead_worker_that_finished_first_leaves_its_task_finished() {
    let mut master = one_busy_worker(&[2]);
    let step = relist(&mut master, Directory::Workers, vec![]);
    assert_eq!(
        step.commands,
        vec![Command::Reclaim {
            worker: w(1),
            task: t(1)
        }]
    );
    // The worker completed (result created, assignment deleted) just
    // before it died.
    let step = master.on_assignment_reclaimed(
        w(1),
        t(1),
        ReclaimOutcome::Reclaimed {
            deleted: false,
            status: TaskStatus::Finished,
        },
    );
    assert_eq!(
        step.decisions,
        vec![
            MasterDecision::AssignmentReclaimed {
                worker: w(1),
                task: t(1),
                deleted: false
            },
            MasterDecision::ReclaimedTaskFinished {
                worker: w(1),
                task: t(1)
            },
        ]
    );
    assert!(step.commands.is_empty());
    assert_eq!(pending(&master), [t(2)]);
}

#[test]
fn a_dead_workers_task_deleted_by_a_client_is_dropped() {
    let mut master = one_busy_worker(&[]);
    relist(&mut master, Directory::Workers, vec![]);
    let step = master.on_assignment_reclaimed(
        w(1),
        t(1),
        ReclaimOutcome::Reclaimed {
            deleted: true,
            status: TaskStatus::Gone,
        },
    );
    assert_eq!(
        step.decisions[1..],
        [MasterDecision::TaskVanished { task: t(1) }]
    );
    assert!(master.pending_tasks().is_empty());
    // The next listing forgets it.
    relist(&mut master, Directory::Tasks, vec![]);
    assert!(master.processed_tasks().is_empty());
}

/// w1 registered and idle, tasks 1 and 2 listed: the round asked for
/// task 1's assignment to w1, not yet answered.
fn create_in_flight() -> MasterState {
    let mut master = initialised(&[1]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[1, 2]));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    master
}

#[test]
fn a_create_for_a_worker_that_left_is_reclaimed_once_it_lands() {
    let mut master = create_in_flight();
    let step = relist(&mut master, Directory::Workers, vec![]);
    assert_eq!(
        step.decisions,
        vec![MasterDecision::WorkerLeft {
            worker: w(1),
            held_task: Some(t(1))
        }]
    );
    assert!(step.commands.is_empty(), "nothing to delete yet");
    let step = master.on_assignment_created(w(1), t(1), WriteOutcome::Applied);
    assert_eq!(
        step.decisions,
        vec![MasterDecision::AssignmentCreated {
            worker: w(1),
            task: t(1)
        }]
    );
    assert_eq!(
        step.commands,
        vec![Command::Reclaim {
            worker: w(1),
            task: t(1)
        }]
    );
    let step = master.on_assignment_reclaimed(
        w(1),
        t(1),
        ReclaimOutcome::Reclaimed {
            deleted: true,
            status: TaskStatus::Unfinished,
        },
    );
    assert!(step.decisions.contains(&MasterDecision::TaskRequeued {
        task: t(1),
        reason: RequeueReason::WorkerGone { worker: w(1) }
    }));
    assert_eq!(pending(&master), [t(1), t(2)]);
}

/// A create refused for a worker a listing already showed gone (in the
/// way of another node, or finding its registration gone): the refusal
/// re-queues the task, and nothing else.
#[test]
fn a_refused_create_for_a_worker_that_left_requeues_at_once() {
    let gone = "its registration is gone";
    for (outcome, refusal) in [
        (
            WriteOutcome::Failed("boom".into()),
            MasterDecision::AssignmentFailed {
                worker: w(1),
                task: t(1),
                error: "boom".into(),
            },
        ),
        (
            WriteOutcome::WorkerGone { why: gone.into() },
            MasterDecision::AssignmentRefused {
                worker: w(1),
                task: t(1),
                why: gone.into(),
            },
        ),
    ] {
        let mut master = create_in_flight();
        relist(&mut master, Directory::Workers, vec![]);
        let step = master.on_assignment_created(w(1), t(1), outcome);
        assert_eq!(
            step.decisions[..2],
            [
                refusal,
                MasterDecision::TaskRequeued {
                    task: t(1),
                    reason: RequeueReason::WorkerGone { worker: w(1) }
                },
            ]
        );
        assert!(step.commands.is_empty(), "no worker, no create");
        assert_eq!(pending(&master), [t(1), t(2)]);
        assert_eq!(master.reclaiming().count(), 0);
    }
}

#[test]
fn a_create_in_doubt_for_a_worker_that_left_is_reclaimed_whatever_happened() {
    let mut master = create_in_flight();
    relist(&mut master, Directory::Workers, vec![]);
    let step = master.on_assignment_created(w(1), t(1), WriteOutcome::Unknown);
    assert_eq!(
        step.commands,
        vec![Command::Reclaim {
            worker: w(1),
            task: t(1)
        }]
    );
    let step = master.on_assignment_reclaimed(
        w(1),
        t(1),
        ReclaimOutcome::Reclaimed {
            deleted: false,
            status: TaskStatus::Unfinished,
        },
    );
    assert!(
        step.decisions
            .contains(&MasterDecision::AssignmentReclaimed {
                worker: w(1),
                task: t(1),
                deleted: false
            })
    );
    assert_eq!(pending(&master), [t(1), t(2)]);
}

#[test]
fn a_create_in_doubt_is_read_back_and_never_sent_blindly_again() {
    let mut master = create_in_flight();
    let step = master.on_assignment_created(w(1), t(1), WriteOutcome::Unknown);
    assert_eq!(
        step.decisions,
        vec![MasterDecision::AssignmentInDoubt {
            worker: w(1),
            task: t(1)
        }]
    );
    assert_eq!(
        step.commands,
        vec![Command::RecoverAssignment {
            worker: w(1),
            task: t(1)
        }]
    );
    // While in doubt, a listing without the node does not free the worker.
    assert_eq!(
        relist(&mut master, Directory::Assignments, vec![]),
        Step::default()
    );
    assert_eq!(master.idle_workers().count(), 0);
    let step = master.on_assignment_recovered(w(1), t(1), AssignmentFound::Present);
    assert_eq!(
        step.decisions,
        vec![MasterDecision::AssignmentRecovered {
            worker: w(1),
            task: t(1),
            recovery: Recovery::Applied
        }]
    );
    assert!(step.commands.is_empty(), "applied: no second create");
    assert_eq!(
        master.workers()[&w(1)],
        Some(Assignment {
            task: t(1),
            confirmed: true,
            result_heard: false,
        })
    );
    // Now absence from a listing means finished.
    let step = relist(&mut master, Directory::Assignments, vec![]);
    assert_eq!(
        rounds(&step),
        vec![(vec![Trigger::WorkerIdle], vec![(w(1), t(2))])]
    );
}

#[test]
fn a_create_in_doubt_found_not_applied_requeues_the_task_and_assigns_it_again() {
    let mut master = create_in_flight();
    master.on_assignment_created(w(1), t(1), WriteOutcome::Unknown);
    let step =
        master.on_assignment_recovered(w(1), t(1), AssignmentFound::Absent(TaskStatus::Unfinished));
    assert_eq!(
        step.decisions,
        vec![
            MasterDecision::AssignmentRecovered {
                worker: w(1),
                task: t(1),
                recovery: Recovery::NotApplied
            },
            MasterDecision::TaskRequeued {
                task: t(1),
                reason: RequeueReason::AssignmentNotApplied { worker: w(1) }
            },
            MasterDecision::Round {
                round: 3,
                triggers: vec![Trigger::TaskRequeued],
                assigned: vec![(w(1), t(1))]
            },
        ]
    );
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    assert_eq!(pending(&master), [t(2)]);
}

#[test]
fn a_create_in_doubt_found_applied_and_finished_frees_the_worker() {
    let mut master = create_in_flight();
    master.on_assignment_created(w(1), t(1), WriteOutcome::Unknown);
    let step =
        master.on_assignment_recovered(w(1), t(1), AssignmentFound::Absent(TaskStatus::Finished));
    assert_eq!(
        step.decisions[..2],
        [
            MasterDecision::AssignmentRecovered {
                worker: w(1),
                task: t(1),
                recovery: Recovery::AppliedAndFinished
            },
            MasterDecision::WorkerIdle {
                worker: w(1),
                finished_task: t(1)
            },
        ]
    );
    assert_eq!(
        rounds(&step),
        vec![(vec![Trigger::WorkerIdle], vec![(w(1), t(2))])]
    );
    assert!(!master.pending_tasks().contains(&t(1)), "it ran once");
}

#[test]
fn a_create_in_doubt_whose_worker_left_is_reclaimed_if_applied() {
    let mut master = create_in_flight();
    master.on_assignment_created(w(1), t(1), WriteOutcome::Unknown);
    relist(&mut master, Directory::Workers, vec![]);
    let step = master.on_assignment_recovered(w(1), t(1), AssignmentFound::Present);
    assert_eq!(
        step.commands,
        vec![Command::Reclaim {
            worker: w(1),
            task: t(1)
        }]
    );
    assert_eq!(master.reclaiming().collect::<Vec<_>>(), [(&w(1), &t(1))]);
}

#[test]
fn the_processed_set_forgets_tasks_that_are_gone_and_no_longer_held() {
    let mut master = two_busy_workers(&[3]);
    // Tasks 1 and 2 run, 3 waits. A client deletes 2 (running) and 3
    // (pending).
    let step = relist(&mut master, Directory::Tasks, task_names(&[1]));
    assert_eq!(
        step.decisions,
        vec![MasterDecision::TaskVanished { task: t(3) }]
    );
    assert_eq!(
        master.processed_tasks(),
        &BTreeSet::from([t(1), t(2)]),
        "task 2 is still held by w2"
    );
    // Both finish. A task deleted while held is forgotten once released,
    // without waiting for another listing; a listed one stays known.
    relist(&mut master, Directory::Assignments, vec![]);
    assert_eq!(master.processed_tasks(), &BTreeSet::from([t(1)]));
    relist(&mut master, Directory::Tasks, task_names(&[1]));
    assert_eq!(master.processed_tasks(), &BTreeSet::from([t(1)]));
    relist(&mut master, Directory::Tasks, vec![]);
    assert!(master.processed_tasks().is_empty());
    // A forgotten task is not mistaken for a new one: its number never
    // comes back, and newer tasks queue as usual.
    let step = relist(&mut master, Directory::Tasks, task_names(&[4]));
    assert_eq!(creates(&step), vec![(w(1), t(4))]);
}

#[test]
fn a_fenced_create_deposes_the_master_which_asks_for_nothing_more() {
    let mut master = create_in_flight();
    let step = master.on_assignment_created(w(1), t(1), WriteOutcome::Fenced);
    assert_eq!(
        step,
        Step {
            decisions: vec![MasterDecision::Deposed { epoch: EPOCH }],
            commands: vec![],
        }
    );
    assert!(master.is_deposed());
    assert_eq!(master.epoch(), EPOCH);
}

#[test]
fn a_fenced_reclaim_deposes_the_master() {
    let mut master = one_busy_worker(&[2]);
    relist(&mut master, Directory::Workers, vec![]);
    let step = master.on_assignment_reclaimed(w(1), t(1), ReclaimOutcome::Fenced);
    assert_eq!(
        step.decisions,
        vec![MasterDecision::Deposed { epoch: EPOCH }]
    );
    assert!(step.commands.is_empty());
    assert!(master.is_deposed());
    assert_eq!(pending(&master), [t(2)], "nothing re-queued");
}

#[test]
#[should_panic(expected = "deposed master")]
fn an_input_after_deposition_is_a_bug() {
    let mut master = create_in_flight();
    master.on_assignment_created(w(1), t(1), WriteOutcome::Fenced);
    master.on_watch_fired(Directory::Tasks);
}

/// A create that finds the worker's registration gone (a worker that
/// deregistered with its last result, as one told to stop does): the
/// worker leaves there and then, and the task goes to another worker at
/// its place in the queue, without waiting for a listing of `workers/`.
#[test]
fn a_create_refused_for_a_gone_registration_gives_the_task_to_another() {
    let mut master = initialised(&[1, 2]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[1, 2]));
    assert_eq!(creates(&step), vec![(w(1), t(1)), (w(2), t(2))]);
    let step = master.on_assignment_created(
        w(1),
        t(1),
        WriteOutcome::WorkerGone {
            why: "its registration is gone".into(),
        },
    );
    assert_eq!(
        step.decisions[..3],
        [
            MasterDecision::AssignmentRefused {
                worker: w(1),
                task: t(1),
                why: "its registration is gone".into()
            },
            MasterDecision::WorkerLeft {
                worker: w(1),
                held_task: None
            },
            MasterDecision::TaskRequeued {
                task: t(1),
                reason: RequeueReason::WorkerGone { worker: w(1) }
            },
        ]
    );
    assert!(step.commands.is_empty(), "w2 is busy: no create yet");
    assert!(!master.workers().contains_key(&w(1)), "w1 left");
    assert_eq!(pending(&master), [t(1)]);
    // w2 finishes: t1 is next, and w1 is never chosen again, not even
    // when a stale listing still shows it.
    let step = relist(&mut master, Directory::Workers, worker_names(&[1, 2]));
    assert!(creates(&step).is_empty());
    confirm_created(&mut master, w(2), t(2));
    let step = relist(&mut master, Directory::Assignments, vec![]);
    assert_eq!(creates(&step), vec![(w(2), t(1))]);
}

#[test]
fn a_refused_create_blocks_the_worker_and_gives_the_task_to_another() {
    let mut master = initialised(&[1, 2]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[1]));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    let step = master.on_assignment_created(w(1), t(1), WriteOutcome::Failed("boom".into()));
    assert_eq!(
        step.decisions[0],
        MasterDecision::AssignmentFailed {
            worker: w(1),
            task: t(1),
            error: "boom".into()
        }
    );
    // The task goes to the idle w2 at once; w1, whose node is in the way,
    // gets nothing.
    assert_eq!(creates(&step), vec![(w(2), t(1))]);
    assert_eq!(master.blocked_workers().iter().collect::<Vec<_>>(), [&w(1)]);
    assert_eq!(master.idle_workers().count(), 0);
}

#[test]
fn a_blocked_worker_is_idle_again_once_a_listing_shows_its_node_gone() {
    let mut master = initialised(&[1]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[1, 2]));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    let step = master.on_assignment_created(w(1), t(1), WriteOutcome::Failed("boom".into()));
    // No idle worker: the round for the re-queued task assigns nothing, and
    // does not hand w1 the create that was just refused.
    assert!(creates(&step).is_empty());
    assert_eq!(pending(&master), [t(1), t(2)]);
    assert_eq!(master.idle_workers().count(), 0);
    // The foreign node is still there: w1 stays blocked.
    let step = relist(&mut master, Directory::Assignments, worker_names(&[1]));
    assert!(creates(&step).is_empty());
    // Deleted (by the worker, say): w1 is idle and takes the oldest task.
    let step = relist(&mut master, Directory::Assignments, vec![]);
    assert_eq!(
        step.decisions[0],
        MasterDecision::WorkerUnblocked { worker: w(1) }
    );
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    assert!(master.blocked_workers().is_empty());
}

#[test]
fn an_unreadable_assignment_of_a_registered_worker_blocks_it() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_workers_listed(worker_names(&[1]));
    master.on_tasks_listed(task_names(&[1]));
    master.on_assignments_listed(worker_names(&[1]));
    master.on_assignment_read(w(1), AssignmentData::Unreadable);
    let step = master.on_tasks_checked(vec![(t(1), false)]);
    assert!(master.is_initialised());
    assert!(creates(&step).is_empty(), "w1's node is in the way");
    let step = relist(&mut master, Directory::Assignments, vec![]);
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
}

#[test]
fn a_create_in_doubt_found_to_be_someone_elses_node_is_not_applied() {
    let mut master = initialised(&[1]);
    let step = relist(&mut master, Directory::Tasks, task_names(&[1]));
    assert_eq!(creates(&step), vec![(w(1), t(1))]);
    master.on_assignment_created(w(1), t(1), WriteOutcome::Unknown);
    master.on_assignment_recovered(w(1), t(1), AssignmentFound::Foreign);
    assert_eq!(pending(&master), [t(1)]);
    assert_eq!(master.blocked_workers().iter().collect::<Vec<_>>(), [&w(1)]);
}

#[test]
fn a_worker_id_that_left_is_never_given_work_again() {
    let mut master = initialised(&[1]);
    relist(&mut master, Directory::Workers, vec![]);
    // The id reappears (a foreign registration, or a stale listing).
    let step = relist(&mut master, Directory::Workers, worker_names(&[1]));
    assert!(matches!(
        &step.decisions[..],
        [MasterDecision::IgnoredNode {
            dir: Directory::Workers,
            ..
        }]
    ));
    let step = relist(&mut master, Directory::Tasks, task_names(&[1]));
    assert!(creates(&step).is_empty());
    assert_eq!(pending(&master), [t(1)]);
}

/// A long term in which 2,000 workers come and go, four registered at a
/// time: every id that left stays refused, and the master keeps a few
/// ranges of them, not one name per departure.
#[test]
fn a_long_term_of_departures_keeps_every_id_out_in_little_memory() {
    const WORKERS: u32 = 2_000;
    const REGISTERED: u32 = 4;
    let mut master = initialised(&[]);
    for newest in 0..WORKERS {
        let oldest = newest.saturating_sub(REGISTERED - 1);
        let registered: Vec<u32> = (oldest..=newest).collect();
        relist(&mut master, Directory::Workers, worker_names(&registered));
    }
    assert!(
        master.left_workers.entries() <= 1,
        "{} entries",
        master.left_workers.entries()
    );
    // The first id reappears: refused still.
    let last: Vec<u32> = (WORKERS - REGISTERED..WORKERS).chain([0]).collect();
    let step = relist(&mut master, Directory::Workers, worker_names(&last));
    assert!(matches!(
        &step.decisions[..],
        [MasterDecision::IgnoredNode { dir: Directory::Workers, name, .. }] if *name == w(0).to_string()
    ));
}

#[test]
fn a_resent_listing_lists_again_once_it_is_handled() {
    let mut master = initialised(&[]);
    let fired = master.on_watch_fired(Directory::Tasks);
    assert_eq!(fired.commands, vec![Command::List(Directory::Tasks)]);
    master.on_listing_resent(Directory::Tasks);
    let step = master.on_tasks_listed(task_names(&[1]));
    assert_eq!(step.commands, vec![Command::List(Directory::Tasks)]);
    let step = master.on_tasks_listed(task_names(&[1]));
    assert!(step.commands.is_empty());
}

#[test]
fn a_watch_during_a_listing_lists_again_once_it_is_in() {
    let mut master = initialised(&[]);
    let fired = master.on_watch_fired(Directory::Tasks);
    assert_eq!(fired.commands, vec![Command::List(Directory::Tasks)]);
    // Fires again while that listing is in flight: no second listing now...
    assert_eq!(master.on_watch_fired(Directory::Tasks), Step::default());
    // ...but one as soon as the reply is in.
    let step = master.on_tasks_listed(task_names(&[1]));
    assert_eq!(step.commands, vec![Command::List(Directory::Tasks)]);
    let step = master.on_tasks_listed(task_names(&[1, 2]));
    assert!(step.commands.is_empty());
    assert_eq!(pending(&master), [t(1), t(2)]);
}

#[test]
fn foreign_children_are_reported_once_and_ignored() {
    let mut master = initialised(&[]);
    let mut children = task_names(&[1]);
    children.push("notes".into());
    let step = relist(&mut master, Directory::Tasks, children.clone());
    assert!(matches!(
        &step.decisions[0],
        MasterDecision::IgnoredNode { dir: Directory::Tasks, name, .. } if name == "notes"
    ));
    let step = relist(&mut master, Directory::Tasks, children.clone());
    assert_eq!(step, Step::default());
    assert_eq!(pending(&master), [t(1)]);
    // Gone from a listing, the name is forgotten (a foreign producer's
    // names do not pile up in the master); back, it is reported again.
    assert_eq!(
        relist(&mut master, Directory::Tasks, task_names(&[1])),
        Step::default()
    );
    let step = relist(&mut master, Directory::Tasks, children);
    assert!(matches!(
        step.decisions.as_slice(),
        [MasterDecision::IgnoredNode { dir: Directory::Tasks, name, .. }] if name == "notes"
    ));
}

#[test]
#[should_panic(expected = "which are not a batch still out")]
fn an_unrequested_check_is_a_bug() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Listing);
    master.start();
    master.on_tasks_checked(vec![(t(1), false)]);
}

#[test]
#[should_panic(expected = "but the worker holds")]
fn a_create_reply_for_another_assignment_is_a_bug() {
    let mut master = one_busy_worker(&[]);
    master.on_assignment_created(w(1), t(7), WriteOutcome::Applied);
}

#[test]
#[should_panic(expected = "before the master started")]
fn a_watch_before_start_is_a_bug() {
    MasterState::new(EPOCH, TaskDiscovery::Listing).on_watch_fired(Directory::Workers);
}
