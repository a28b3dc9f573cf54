//! The payload read-ahead, input by input: which queued tasks are read,
//! how the window follows the queue's head, and that an assignment carries
//! a payload only when it was read in time, was small enough, and belongs
//! to the task assigned.

use zkdist_coord::MAX_INLINE_PAYLOAD_BYTES;

use super::test_support::*;
use super::*;
use crate::discovery::TaskDiscovery;

const EPOCH: Epoch = Epoch(3);

/// A started watch-discovery master reading `window` payloads ahead, with
/// `workers` registered and idle and nothing queued.
fn initialised(workers: &[u32], window: usize) -> MasterState {
    let master = MasterState::new(EPOCH, TaskDiscovery::Watch).with_payload_read_ahead(window);
    start_watch_master(master, workers, 0)
}

/// The tasks whose payloads the step reads, in one batch if any.
fn reads(step: &Step) -> Vec<TaskId> {
    let batches = commands(step, |command| match command {
        Command::ReadPayloads(tasks) => Some(tasks.clone()),
        _ => None,
    });
    assert!(batches.len() <= 1, "one batch a step at most: {batches:?}");
    batches.into_iter().flatten().collect()
}

/// Answers the batch out with `answers` (task number, payload).
fn answer(master: &mut MasterState, answers: &[(i32, Option<&[u8]>)]) -> Step {
    master.on_payloads_read(
        answers
            .iter()
            .map(|(n, payload)| (t(*n), payload.map(<[u8]>::to_vec)))
            .collect(),
    )
}

fn create_payloads(step: &Step) -> Vec<(TaskId, Option<Vec<u8>>)> {
    commands(step, |command| match command {
        Command::CreateAssignment { task, payload, .. } => Some((task.clone(), payload.clone())),
        _ => None,
    })
}

/// Queues tasks `ns` (no worker idle); returns the reads sent meanwhile:
/// the first task's alone, if the window has room and no batch is out (the
/// others wait for its answer).
fn queue(master: &mut MasterState, ns: &[i32]) -> Vec<TaskId> {
    let mut read = Vec::new();
    for n in ns {
        let step = master.on_task_created(t(*n).as_str());
        assert!(creates(&step).is_empty(), "no worker is idle");
        read.extend(reads(&step));
    }
    read
}

/// A started master reading `window` payloads ahead whose workers `ns`
/// read inline payloads and are busy, worker n with task 100 + n: tasks
/// queued now wait until one is freed (see [`free`]).
fn busy(ns: &[u32], window: usize) -> MasterState {
    let mut master = initialised(ns, window);
    for n in ns {
        let step = master.on_task_created(t(100 + *n as i32).as_str());
        assert_eq!(creates(&step), vec![(w(*n), t(100 + *n as i32))]);
        confirm(&mut master, &step);
    }
    master
}

/// Worker `n` finishes (its assignment node deleted): the step in which it
/// takes its next task.
fn free(master: &mut MasterState, n: u32) -> Step {
    master.on_assignment_node_deleted(w(n).as_str())
}

#[test]
fn without_a_window_nothing_is_read_and_tasks_go_by_name() {
    let mut master = initialised(&[1], 0);
    let step = master.on_task_created(t(0).as_str());
    assert!(reads(&step).is_empty());
    assert_eq!(create_payloads(&step), vec![(t(0), None)]);
}

#[test]
fn the_window_holds_the_oldest_queued_tasks() {
    let mut master = busy(&[1], 3);
    assert_eq!(queue(&mut master, &[0, 1, 2, 3, 4]), vec![t(0)]);
    // Its answer sends the rest of the window in one batch; nothing more
    // goes out while the window is full.
    let step = answer(&mut master, &[(0, Some(b"p0"))]);
    assert_eq!(reads(&step), vec![t(1), t(2)]);
    assert_eq!(master.payloads_read_ahead(), 3);
    let step = answer(&mut master, &[(1, Some(b"p1")), (2, Some(b"p2"))]);
    assert!(step.commands.is_empty(), "{:?}", step.commands);
    // The worker is freed: it takes the oldest task, with its payload
    // inline, and the window moves on to the next task not read yet.
    let step = free(&mut master, 1);
    assert_eq!(create_payloads(&step), vec![(t(0), Some(b"p0".to_vec()))]);
    assert_eq!(reads(&step), vec![t(3)]);
    assert_eq!(master.payloads_read_ahead(), 3);
}

#[test]
fn tasks_queued_while_a_batch_is_out_are_read_together_by_the_next() {
    let mut master = busy(&[1], 64);
    assert_eq!(queue(&mut master, &[0]), vec![t(0)]);
    assert!(
        queue(&mut master, &[1, 2, 3, 4, 5]).is_empty(),
        "one batch out at a time"
    );
    let step = answer(&mut master, &[(0, Some(b"p0"))]);
    assert_eq!(
        step.commands,
        vec![Command::ReadPayloads(vec![t(1), t(2), t(3), t(4), t(5)])],
        "one request for all of them"
    );
    // A task queued now waits for that batch's answer in turn.
    assert!(queue(&mut master, &[6]).is_empty());
    let five: Vec<(i32, Option<&[u8]>)> = (1..=5).map(|n| (n, Some(&b"p"[..]))).collect();
    assert_eq!(reads(&answer(&mut master, &five)), vec![t(6)]);
    assert_eq!(master.payloads_read_ahead(), 7);
}

#[test]
#[should_panic(expected = "names other tasks")]
fn an_answer_for_other_tasks_than_the_batch_out_is_a_bug() {
    let mut master = busy(&[1], 4);
    assert_eq!(queue(&mut master, &[0, 1]), vec![t(0)]);
    answer(&mut master, &[(1, Some(b"p1"))]);
}

#[test]
fn a_worker_that_does_not_say_it_reads_inline_payloads_is_given_names() {
    // w1 (this build) and w2 (an older worker: empty registration data)
    // are busy; w3 joins and its answer is not in yet. Each is asked once,
    // when it joins.
    let mut master = initialised(&[], 4);
    let step = workers_now(&mut master, &[1, 2]);
    assert_eq!(registration_reads(&step), vec![w(1), w(2)]);
    master.on_registration_read(
        w(1),
        RegistrationRead::Live {
            data: zkdist_coord::registration_data().to_vec(),
        },
    );
    master.on_registration_read(w(2), RegistrationRead::Live { data: Vec::new() });
    for n in [1, 2] {
        let step = master.on_task_created(t(100 + n).as_str());
        confirm(&mut master, &step);
    }
    assert_eq!(queue(&mut master, &[0, 1, 2]), vec![t(0)]);
    let step = answer(&mut master, &[(0, Some(b"p0"))]);
    assert_eq!(reads(&step), vec![t(1), t(2)]);
    answer(&mut master, &[(1, Some(b"p1")), (2, Some(b"p2"))]);
    let step = free(&mut master, 2);
    assert_eq!(create_payloads(&step), vec![(t(0), None)], "w2 reads names");
    assert!(registration_reads(&step).is_empty(), "w2 was asked already");
    let step = free(&mut master, 1);
    assert_eq!(create_payloads(&step), vec![(t(1), Some(b"p1".to_vec()))]);
    let step = workers_now(&mut master, &[1, 2, 3]);
    assert_eq!(registration_reads(&step), vec![w(3)]);
    assert_eq!(
        create_payloads(&step),
        vec![(t(2), None)],
        "w3 has not answered yet"
    );
}

#[test]
fn an_answer_for_a_worker_that_left_is_dropped() {
    let mut master = initialised(&[], 2);
    let step = workers_now(&mut master, &[1]);
    assert_eq!(registration_reads(&step), vec![w(1)]);
    workers_now(&mut master, &[]);
    // The invariants (checked on every step) hold that only registered
    // workers count as reading inline payloads.
    let step = master.on_registration_read(
        w(1),
        RegistrationRead::Live {
            data: zkdist_coord::registration_data().to_vec(),
        },
    );
    assert_eq!(step, Step::default());
}

#[test]
fn without_a_window_no_worker_is_asked() {
    let mut master = initialised(&[], 0);
    let step = workers_now(&mut master, &[1, 2]);
    assert!(registration_reads(&step).is_empty(), "{:?}", step.commands);
}

#[test]
fn a_task_assigned_before_its_read_answers_goes_by_name() {
    let mut master = busy(&[1], 2);
    assert_eq!(queue(&mut master, &[0]), vec![t(0)]);
    let step = free(&mut master, 1);
    assert_eq!(create_payloads(&step), vec![(t(0), None)]);
    confirm(&mut master, &step);
    // The late answer is dropped: the task is no longer queued.
    let step = answer(&mut master, &[(0, Some(b"late"))]);
    assert_eq!(step, Step::default());
    assert_eq!(master.payloads_read_ahead(), 0);
}

#[test]
fn a_large_payload_or_a_failed_read_is_assigned_by_name_and_not_read_again() {
    let mut master = busy(&[1, 2, 3], 4);
    assert_eq!(queue(&mut master, &[0, 1, 2]), vec![t(0)]);
    let large = vec![b'x'; MAX_INLINE_PAYLOAD_BYTES + 1];
    let at_limit = vec![b'y'; MAX_INLINE_PAYLOAD_BYTES];
    let step = answer(&mut master, &[(0, Some(&large))]);
    assert_eq!(reads(&step), vec![t(1), t(2)]);
    let step = answer(&mut master, &[(1, None), (2, Some(&at_limit))]);
    assert!(step.commands.is_empty(), "{:?}", step.commands);
    let mut assigned = Vec::new();
    for n in [1, 2, 3] {
        let step = free(&mut master, n);
        assert!(reads(&step).is_empty(), "nothing left to read ahead");
        assigned.extend(create_payloads(&step));
    }
    assert_eq!(
        assigned,
        vec![(t(0), None), (t(1), None), (t(2), Some(at_limit))]
    );
}

#[test]
fn a_deleted_task_leaves_the_window_and_makes_room() {
    let mut master = busy(&[1], 2);
    assert_eq!(queue(&mut master, &[0, 1, 2]), vec![t(0)]);
    // t0 is deleted while its read is out: its answer is dropped, and the
    // next batch fills the window from t1.
    let step = master.on_task_deleted(t(0).as_str());
    assert!(reads(&step).is_empty(), "a batch is out");
    let step = answer(&mut master, &[(0, Some(b"p0"))]);
    assert_eq!(reads(&step), vec![t(1), t(2)]);
    answer(&mut master, &[(1, Some(b"p1")), (2, Some(b"p2"))]);
    assert_eq!(pending(&master), vec![t(1), t(2)]);
    assert_eq!(master.payloads_read_ahead(), 2);
    // A queued task deleted once read makes room for the next.
    queue(&mut master, &[3]);
    let step = master.on_task_deleted(t(1).as_str());
    assert_eq!(reads(&step), vec![t(3)]);
}

#[test]
fn a_requeued_task_behind_the_window_goes_by_name() {
    // w1 holds t0 and w2 task 102; t1..t3 are queued, t1 and t2 read ahead.
    // w1 leaves: t0 goes back to the head of the queue, behind the
    // window's last task, and is not read (keeping the window exact would
    // cost a scan a step).
    let mut master = initialised(&[1, 2], 2);
    let step = master.on_task_created(t(0).as_str());
    assert_eq!(creates(&step), vec![(w(1), t(0))]);
    confirm(&mut master, &step);
    let step = master.on_task_created(t(102).as_str());
    confirm(&mut master, &step);
    assert_eq!(queue(&mut master, &[1, 2, 3]), vec![t(1)]);
    assert_eq!(reads(&answer(&mut master, &[(1, Some(b"p1"))])), vec![t(2)]);
    answer(&mut master, &[(2, Some(b"p2"))]);
    let step = workers_now(&mut master, &[2]);
    assert!(reads(&step).is_empty(), "{:?}", step.commands);
    let reclaimed = reclaimed_unfinished(&mut master, 1, t(0));
    assert!(reads(&reclaimed).is_empty());
    assert_eq!(pending(&master), vec![t(0), t(1), t(2), t(3)]);
    let step = free(&mut master, 2);
    assert_eq!(create_payloads(&step), vec![(t(0), None)]);
    assert!(reads(&step).is_empty(), "t0 was not in the window");
    confirm(&mut master, &step);
    let step = free(&mut master, 2);
    assert_eq!(create_payloads(&step), vec![(t(1), Some(b"p1".to_vec()))]);
    // t1 left the window: t3, the next after its last task, is read.
    assert_eq!(reads(&step), vec![t(3)]);
}

#[test]
fn nothing_is_read_before_initialisation() {
    let mut master = MasterState::new(EPOCH, TaskDiscovery::Watch).with_payload_read_ahead(8);
    let step = master.start();
    assert!(reads(&step).is_empty());
    master.on_workers_listed(vec![]);
    master.on_recursive_watch_added(Directory::Tasks, false);
    let step = master.on_tasks_listed_at(task_names(&[0, 1]), ChildCreates::new(2));
    assert!(reads(&step).is_empty(), "still initialising");
    master.on_recursive_watch_added(Directory::Assignments, false);
    let step = master.on_assignments_listed(vec![]);
    assert!(reads(&step).is_empty(), "still initialising");
    // The tasks found at start are checked for results first.
    let step = master.on_tasks_checked(vec![(t(0), true), (t(1), false)]);
    assert!(master.is_initialised());
    assert_eq!(pending(&master), vec![t(1)], "only the unfinished task");
    assert!(
        reads(&step).is_empty(),
        "no worker to give a payload to yet"
    );
}

#[test]
fn payloads_are_read_once_a_worker_reads_them_inline() {
    // Three tasks wait and nobody can take a payload inline: none is read.
    let mut master = initialised(&[], 4);
    assert!(queue(&mut master, &[0, 1, 2]).is_empty());
    // A worker joins: it takes the oldest task by name (its answer is not
    // in), and once it says it reads inline payloads the rest are read.
    let step = workers_now(&mut master, &[1]);
    assert_eq!(create_payloads(&step), vec![(t(0), None)]);
    assert!(reads(&step).is_empty());
    confirm(&mut master, &step);
    let step = master.on_registration_read(
        w(1),
        RegistrationRead::Live {
            data: zkdist_coord::registration_data().to_vec(),
        },
    );
    assert_eq!(reads(&step), vec![t(1), t(2)]);
}

#[test]
fn a_registration_that_cannot_be_read_leaves_its_worker_on_names() {
    let mut master = initialised(&[], 4);
    let step = workers_now(&mut master, &[1]);
    assert_eq!(registration_reads(&step), vec![w(1)]);
    let step = master.on_registration_read(w(1), RegistrationRead::Unreadable);
    assert_eq!(step, Step::default());
    // Still no reader: tasks queue unread behind the busy worker.
    let step = master.on_task_created(t(0).as_str());
    confirm(&mut master, &step);
    assert!(queue(&mut master, &[1, 2]).is_empty());
}

#[test]
fn a_task_requeued_while_its_batch_is_out_is_read_again_by_the_next() {
    let mut master = busy(&[1, 2], 4);
    assert_eq!(queue(&mut master, &[0]), vec![t(0)]);
    // w1 takes t0 by name before the read answers, then leaves: t0 goes
    // back to the queue while its read is still out.
    let step = free(&mut master, 1);
    assert_eq!(create_payloads(&step), vec![(t(0), None)]);
    confirm(&mut master, &step);
    let step = workers_now(&mut master, &[2]);
    assert!(reads(&step).is_empty(), "a batch is out");
    let step = reclaimed_unfinished(&mut master, 1, t(0));
    assert!(reads(&step).is_empty(), "a batch is out");
    assert_eq!(pending(&master), vec![t(0)]);
    // The answer came for the assignment that was taken back: dropped, and
    // the queued t0 is read anew.
    let step = answer(&mut master, &[(0, Some(b"stale"))]);
    assert_eq!(reads(&step), vec![t(0)]);
    answer(&mut master, &[(0, Some(b"p0"))]);
    let step = free(&mut master, 2);
    assert_eq!(create_payloads(&step), vec![(t(0), Some(b"p0".to_vec()))]);
}

#[test]
fn reading_stops_when_the_last_inline_reader_leaves_and_resumes_with_the_next() {
    let mut master = busy(&[1], 4);
    assert_eq!(queue(&mut master, &[0, 1]), vec![t(0)]);
    workers_now(&mut master, &[]);
    // Nobody left to give a payload to: the answer sends no next batch.
    let step = answer(&mut master, &[(0, Some(b"p0"))]);
    assert!(reads(&step).is_empty(), "{:?}", step.commands);
    // A worker joins, is given the oldest task by name (its registration
    // is not read yet), and once it says it reads inline payloads the
    // reads resume with the next task.
    let step = workers_now(&mut master, &[2]);
    assert_eq!(create_payloads(&step), vec![(t(0), None)]);
    confirm(&mut master, &step);
    let step = master.on_registration_read(
        w(2),
        RegistrationRead::Live {
            data: zkdist_coord::registration_data().to_vec(),
        },
    );
    assert_eq!(reads(&step), vec![t(1)]);
}

#[test]
fn a_batch_reads_at_most_the_batch_limit() {
    let mut master = busy(&[1], 64);
    assert_eq!(queue(&mut master, &[0]), vec![t(0)]);
    let more: Vec<i32> = (1..=40).collect();
    assert!(queue(&mut master, &more).is_empty());
    let step = answer(&mut master, &[(0, Some(b"p0"))]);
    let batch = reads(&step);
    assert_eq!(batch.len(), crate::discovery::PAYLOAD_READS_PER_BATCH);
    assert_eq!(batch.first(), Some(&t(1)));
}
