//! Registrations that are not ephemeral, input by input: dropped as a
//! worker that left, the task given to one before its registration was
//! read reclaimed and queued again, and nothing more said of the node while
//! listings still show it.

use super::test_support::*;
use super::*;
use crate::decision::RequeueReason;
use crate::discovery::TaskDiscovery;

const EPOCH: Epoch = Epoch(3);

/// A started watch-discovery master reading payloads ahead (so that it
/// reads registrations), with no worker and nothing queued.
fn started() -> MasterState {
    let master = MasterState::new(EPOCH, TaskDiscovery::Watch).with_payload_read_ahead(4);
    start_watch_master(master, &[], 0)
}

/// Whether `step` ignores `workers/<worker>` as no live worker's.
fn ignores_as_stray(step: &Step, worker: &WorkerId) -> bool {
    step.decisions.iter().any(|decision| {
        matches!(
            decision,
            MasterDecision::IgnoredNode { dir: Directory::Workers, name, reason }
                if name == worker.as_str() && reason.contains("not an ephemeral node")
        )
    })
}

#[test]
fn a_stray_registration_given_a_task_is_dropped_and_the_task_goes_to_a_live_worker() {
    let mut master = started();
    // The stray joins and, before its registration is read, takes the
    // first task.
    let step = workers_now(&mut master, &[1]);
    assert_eq!(registration_reads(&step), vec![w(1)]);
    let step = master.on_task_created(t(0).as_str());
    assert_eq!(creates(&step), vec![(w(1), t(0))]);
    confirm(&mut master, &step);

    let step = master.on_registration_read(w(1), RegistrationRead::NotEphemeral);
    assert!(ignores_as_stray(&step, &w(1)), "{:?}", step.decisions);
    assert_eq!(
        step.commands,
        vec![Command::Reclaim {
            worker: w(1),
            task: t(0)
        }]
    );
    assert!(master.workers().is_empty(), "the stray is no worker");

    let step = reclaimed_unfinished(&mut master, 1, t(0));
    assert!(step.decisions.contains(&MasterDecision::TaskRequeued {
        task: t(0),
        reason: RequeueReason::WorkerGone { worker: w(1) },
    }));
    assert_eq!(pending(&master), vec![t(0)]);

    // A live worker joins: the task goes to it. The stray, still listed,
    // is neither given work nor named again.
    let step = workers_now(&mut master, &[1, 2]);
    assert_eq!(registration_reads(&step), vec![w(2)]);
    assert_eq!(creates(&step), vec![(w(2), t(0))]);
    assert!(
        !step
            .decisions
            .iter()
            .any(|decision| matches!(decision, MasterDecision::IgnoredNode { .. })),
        "{:?}",
        step.decisions
    );
}

#[test]
fn a_stray_registration_whose_create_is_in_flight_is_reclaimed_once_it_lands() {
    let mut master = started();
    workers_now(&mut master, &[1]);
    let step = master.on_task_created(t(0).as_str());
    assert_eq!(creates(&step), vec![(w(1), t(0))]);
    let step = master.on_registration_read(w(1), RegistrationRead::NotEphemeral);
    assert!(ignores_as_stray(&step, &w(1)));
    assert!(step.commands.is_empty(), "the create is still in flight");
    let step = master.on_assignment_created(w(1), t(0), WriteOutcome::Applied);
    assert!(step.commands.contains(&Command::Reclaim {
        worker: w(1),
        task: t(0)
    }));
}

#[test]
fn a_live_registration_stays_and_an_idle_stray_goes_without_a_command() {
    let mut master = started();
    workers_now(&mut master, &[1, 2]);
    let step = master.on_registration_read(
        w(1),
        RegistrationRead::Live {
            data: zkdist_coord::registration_data().to_vec(),
        },
    );
    assert!(step.decisions.is_empty());
    let step = master.on_registration_read(w(2), RegistrationRead::NotEphemeral);
    assert!(ignores_as_stray(&step, &w(2)));
    assert!(step.commands.is_empty());
    assert_eq!(master.workers().keys().collect::<Vec<_>>(), vec![&w(1)]);
    // Its answer read again (a resent read) changes nothing.
    let step = master.on_registration_read(w(2), RegistrationRead::NotEphemeral);
    assert_eq!(step, Step::default());
}
