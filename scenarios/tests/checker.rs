//! The checker has teeth: for each invariant, a crafted sequence that
//! breaks it is caught (and the same sequence without the bug is not).
//! Decision rules are fed decisions directly; tree rules run on the
//! simulator, with the test playing a buggy master or worker by hand
//! through raw sessions; the end-of-run rules get crafted tree facts and a
//! master state built through its public inputs.

use std::collections::{BTreeMap, BTreeSet};
use std::future::pending;
use std::time::Duration;

use zkdist_coord::{Coordinator, CreateMode, Layout, Op, SessionId, TaskId, Watch, WorkerId};
use zkdist_master::{
    Epoch, MasterDecision, MasterState, RequeueReason, TaskDiscovery, Trigger, WriteOutcome,
};
use zkdist_scenarios::{
    Checker, Harness, HarnessConfig, Invariant, RunReport, Step, TreeFacts, expected_result, trace,
};
use zkdist_sim::{AppliedOp, Change, Latency, SimSession, Tree, TxnKind};
use zkdist_worker::WorkerDecision;

fn worker(n: u32) -> WorkerId {
    WorkerId::parse(&format!("worker-{n:010}")).unwrap()
}

fn task(n: i32) -> TaskId {
    TaskId::from_sequence(n)
}

fn round(n: u64, assigned: &[(u32, i32)]) -> MasterDecision {
    MasterDecision::Round {
        round: n,
        triggers: vec![Trigger::NewTask],
        assigned: assigned
            .iter()
            .map(|&(w, t)| (worker(w), task(t)))
            .collect(),
    }
}

fn checker() -> Checker {
    Checker::new(&Layout::default())
}

/// The tasks `decisions` assign, by number, in ascending order.
fn tasks_assigned_in(decisions: &[MasterDecision]) -> Vec<i32> {
    let numbers: BTreeSet<i32> = decisions
        .iter()
        .flat_map(|decision| decision.assigned().iter().map(|(_, task)| task.sequence()))
        .collect();
    numbers.into_iter().collect()
}

/// Feeds master decisions, after the creates of the tasks they assign (in
/// ascending order); returns the invariant of the first violation.
fn master_log(decisions: &[MasterDecision]) -> Option<Invariant> {
    let mut checker = checker_after_submitting(&tasks_assigned_in(decisions));
    for decision in decisions {
        checker.on_master_decision("master", decision);
    }
    checker.violation().map(|violation| {
        assert!(matches!(violation.step, Step::Decision { .. }));
        violation.invariant
    })
}

fn worker_log(decisions: &[(&str, WorkerDecision)]) -> Option<Invariant> {
    let mut checker = checker();
    for (actor, decision) in decisions {
        checker.on_worker_decision(actor, decision);
    }
    checker.violation().map(|violation| violation.invariant)
}

#[test]
fn a_round_that_assigns_a_busy_worker_is_caught() {
    assert_eq!(
        master_log(&[round(1, &[(1, 0)]), round(2, &[(1, 1)])]),
        Some(Invariant::WorkerAssignedTwice)
    );
    let idle_between = MasterDecision::WorkerIdle {
        worker: worker(1),
        finished_task: task(0),
    };
    assert_eq!(
        master_log(&[round(1, &[(1, 0)]), idle_between, round(2, &[(1, 1)])]),
        None
    );
}

#[test]
fn a_task_assigned_to_two_workers_is_caught() {
    assert_eq!(
        master_log(&[round(1, &[(1, 0), (2, 0)])]),
        Some(Invariant::TaskAssignedTwice)
    );
    let started = |w: u32, t: i32| WorkerDecision::TaskStarted {
        worker: worker(w),
        task: task(t),
    };
    assert_eq!(
        worker_log(&[("w1", started(1, 0)), ("w2", started(2, 0))]),
        Some(Invariant::TaskAssignedTwice)
    );
    assert_eq!(
        worker_log(&[("w1", started(1, 0)), ("w2", started(2, 1))]),
        None
    );
}

/// A checker that saw the client create `tasks`, in that order.
fn checker_after_submitting(tasks: &[i32]) -> Checker {
    let tasks_dir = Layout::default().tasks_dir();
    let mut checker = checker();
    let tree = Tree::new();
    for (zxid, &n) in (1..).zip(tasks) {
        let created = Change::Created(format!("{tasks_dir}/{}", task(n)));
        checker.on_applied(&applied(zxid, 3, TxnKind::Create, vec![created]), &tree);
    }
    checker
}

/// Feeds master decisions after the creates of `submitted`; returns the
/// invariant of the first violation.
fn master_log_after_submitting(
    submitted: &[i32],
    decisions: &[MasterDecision],
) -> Option<Invariant> {
    let mut checker = checker_after_submitting(submitted);
    for decision in decisions {
        checker.on_master_decision("master", decision);
    }
    checker.violation().map(|violation| violation.invariant)
}

#[test]
fn rounds_out_of_submission_order_break_fifo_unless_a_failure_came_first() {
    let out_of_order = [round(1, &[(1, 1)]), round(2, &[(2, 0)])];
    assert_eq!(
        master_log_after_submitting(&[0, 1], &out_of_order),
        Some(Invariant::FifoOrder)
    );
    let mut after_a_fault = checker_after_submitting(&[0, 1]);
    after_a_fault.on_failure("cut master");
    for decision in &out_of_order {
        after_a_fault.on_master_decision("master", decision);
    }
    assert_eq!(after_a_fault.violation(), None);
    assert_eq!(after_a_fault.first_failure(), Some("cut master"));
    assert_eq!(
        master_log_after_submitting(&[0, 1], &[round(1, &[(1, 0), (2, 1)])]),
        None
    );
}

/// After a fault the tree may show assignments out of submission order
/// (a refused create re-queues its task behind creates already sent), but
/// the master's own queue is still served oldest first: a round that
/// passes over a task the master re-queued breaks FIFO.
#[test]
fn after_a_fault_a_round_still_takes_the_oldest_task_the_master_queued() {
    let queued = |t: i32| MasterDecision::TaskQueued { task: task(t) };
    let requeued = |t: i32| MasterDecision::TaskRequeued {
        task: task(t),
        reason: RequeueReason::WorkerGone { worker: worker(1) },
    };
    let left = MasterDecision::WorkerLeft {
        worker: worker(1),
        held_task: Some(task(0)),
    };
    let reclaimed = MasterDecision::AssignmentReclaimed {
        worker: worker(1),
        task: task(0),
        deleted: true,
    };
    let after_a_fault = |decisions: &[MasterDecision]| {
        let mut checker = checker_after_submitting(&[0, 1, 2]);
        checker.on_failure("crash w1");
        for decision in decisions {
            checker.on_master_decision("master", decision);
        }
        checker.violation().map(|violation| violation.invariant)
    };
    let worker_one_dies = [
        queued(0),
        queued(1),
        queued(2),
        round(1, &[(1, 0)]),
        left,
        reclaimed,
        requeued(0),
    ];
    let skips_the_requeued = [&worker_one_dies[..], &[round(2, &[(2, 1)])]].concat();
    assert_eq!(
        after_a_fault(&skips_the_requeued),
        Some(Invariant::FifoOrder)
    );
    let takes_it_first = [&worker_one_dies[..], &[round(2, &[(2, 0), (3, 1)])]].concat();
    assert_eq!(after_a_fault(&takes_it_first), None);
    // A task that left the queue otherwise is no longer waiting.
    let vanished = MasterDecision::TaskVanished { task: task(0) };
    let skips_a_vanished = [&worker_one_dies[..], &[vanished, round(2, &[(2, 1)])]].concat();
    assert_eq!(after_a_fault(&skips_a_vanished), None);
    // A refused create puts its task back in the queue too.
    let refused = MasterDecision::AssignmentFailed {
        worker: worker(2),
        task: task(1),
        error: "node exists".to_owned(),
    };
    let skips_the_refused = [
        queued(0),
        queued(1),
        queued(2),
        round(1, &[(1, 0), (2, 1)]),
        refused,
        round(2, &[(3, 2)]),
    ];
    assert_eq!(
        after_a_fault(&skips_the_refused),
        Some(Invariant::FifoOrder)
    );
    // A new leadership rebuilds its queue from the tree.
    let elected = MasterDecision::Elected { epoch: Epoch(1) };
    assert_eq!(
        after_a_fault(&[
            queued(0),
            queued(1),
            elected,
            queued(1),
            round(1, &[(1, 1)])
        ]),
        None
    );
}

#[test]
fn a_round_or_an_assignment_of_a_task_never_created_breaks_fifo() {
    // Only task 0 was created: task 1 has no place in submission order.
    assert_eq!(
        master_log_after_submitting(&[0], &[round(1, &[(1, 0), (2, 1)])]),
        Some(Invariant::FifoOrder)
    );
    assert_eq!(
        master_log_after_submitting(&[0, 1], &[round(1, &[(1, 0), (2, 1)])]),
        None
    );
}

#[test]
fn submission_order_is_the_order_of_the_creates_not_of_the_names() {
    // ZooKeeper's counter wraps: -2147483648 is created after 2147483647.
    let (max, min) = (i32::MAX, i32::MIN);
    let in_order = [round(1, &[(1, max)]), round(2, &[(2, min)])];
    let reversed = [round(1, &[(1, min)]), round(2, &[(2, max)])];
    assert_eq!(master_log_after_submitting(&[max, min], &in_order), None);
    assert_eq!(
        master_log_after_submitting(&[max, min], &reversed),
        Some(Invariant::FifoOrder)
    );
    // Whatever the names: created 1 then 0, they are due 1 then 0.
    let one_then_zero = [round(1, &[(1, 1)]), round(2, &[(2, 0)])];
    assert_eq!(master_log_after_submitting(&[1, 0], &one_then_zero), None);
    assert_eq!(
        master_log_after_submitting(&[0, 1], &one_then_zero),
        Some(Invariant::FifoOrder)
    );
}

#[test]
fn a_task_finished_twice_is_caught() {
    let written = |w: u32| WorkerDecision::ResultWritten {
        worker: worker(w),
        task: task(0),
        success: true,
    };
    let started = |w: u32| WorkerDecision::TaskStarted {
        worker: worker(w),
        task: task(0),
    };
    let released = |w: u32| WorkerDecision::AssignmentReleased {
        worker: worker(w),
        task: Some(task(0)),
    };
    assert_eq!(
        worker_log(&[
            ("w1", started(1)),
            ("w1", written(1)),
            ("w1", released(1)),
            ("w2", started(2)),
        ]),
        Some(Invariant::FinishedExactlyOnce)
    );
    assert_eq!(
        worker_log(&[(
            "w2",
            WorkerDecision::ResultAlreadyPresent {
                worker: worker(2),
                task: task(0)
            }
        )]),
        Some(Invariant::FinishedExactlyOnce)
    );
    assert_eq!(
        worker_log(&[("w1", started(1)), ("w1", written(1)), ("w1", released(1))]),
        None
    );
}

/// A master state built through the core's public inputs: `workers` are
/// registered, tasks 0 and 1 exist (0 without a result, 1 with one), and
/// the first round gave task 0 to `worker(1)`, confirmed.
fn master_after_one_round() -> MasterState {
    let mut state = MasterState::new(Epoch(1), TaskDiscovery::Listing);
    state.start();
    state.on_workers_listed(vec![worker(1).to_string(), worker(2).to_string()]);
    state.on_tasks_listed(vec![task(0).to_string(), task(1).to_string()]);
    state.on_assignments_listed(vec![]);
    let step = state.on_tasks_checked(vec![(task(0), false), (task(1), true)]);
    assert!(state.is_initialised(), "{step:?}");
    state.on_assignment_created(worker(1), task(0), WriteOutcome::Applied);
    state
}

fn facts(workers: &[u32], assignments: &[(u32, &str)], tasks: &[(i32, bool)]) -> TreeFacts {
    TreeFacts {
        workers: workers.iter().map(|&w| worker(w)).collect::<BTreeSet<_>>(),
        assignments: assignments
            .iter()
            .map(|&(w, data)| (worker(w), data.to_owned()))
            .collect::<BTreeMap<_, _>>(),
        tasks: tasks
            .iter()
            .map(|&(t, finished)| (task(t), finished))
            .collect::<BTreeMap<_, _>>(),
    }
}

fn at_end(facts: &TreeFacts, master: Option<&MasterState>) -> Option<(Invariant, String)> {
    let mut checker = checker();
    checker.on_end(facts, &[], master);
    checker.violation().map(|violation| {
        assert_eq!(violation.step, Step::EndOfRun);
        (violation.invariant, violation.detail.clone())
    })
}

#[test]
fn the_master_view_must_match_zookeeper_at_the_end() {
    let state = master_after_one_round();
    let task0 = task(0).to_string();
    // Matches: worker 1's assignment node holds task 0, as the master
    // believes (the task has its result; the worker has not released it).
    let same = facts(&[1, 2], &[(1, &task0)], &[(0, true), (1, true)]);
    assert_eq!(at_end(&same, Some(&state)), None);

    let no_assignment = facts(&[1, 2], &[], &[(0, true), (1, true)]);
    let (invariant, detail) = at_end(&no_assignment, Some(&state)).expect("a difference");
    assert_eq!(invariant, Invariant::MasterViewMatches);
    assert!(
        detail.contains(&format!(
            "the master believes {} holds {}, but it has no assignment node",
            worker(1),
            task(0)
        )),
        "{detail}"
    );

    let stranger = facts(
        &[1, 2, 3],
        &[(1, &task0)],
        &[(0, true), (1, true), (2, true)],
    );
    let (invariant, detail) = at_end(&stranger, Some(&state)).expect("differences");
    assert_eq!(invariant, Invariant::MasterViewMatches);
    assert!(detail.contains(&format!(
        "{} is registered, but the master does not know it",
        worker(3)
    )));
    assert!(detail.contains(&format!("{} exists, but the master never saw it", task(2))));

    // Bounded memory: once a client deleted task 1, the master must have
    // forgotten it.
    let cleaned_up = facts(&[1, 2], &[(1, &task0)], &[(0, true)]);
    let (invariant, detail) = at_end(&cleaned_up, Some(&state)).expect("a difference");
    assert_eq!(invariant, Invariant::MasterViewMatches);
    assert_eq!(
        detail,
        format!(
            "the master's view differs from ZooKeeper's: the master still remembers {}, which no longer exists",
            task(1)
        )
    );
}

#[test]
fn a_task_without_a_result_at_the_end_is_lost() {
    let state = master_after_one_round();
    let unfinished = facts(
        &[1, 2],
        &[(1, &task(0).to_string())],
        &[(0, false), (1, true)],
    );
    let (invariant, detail) = at_end(&unfinished, Some(&state)).expect("lost");
    assert_eq!(invariant, Invariant::Liveness);
    assert_eq!(
        detail,
        format!(
            "{} never finished: it is still assigned to {}",
            task(0),
            worker(1)
        )
    );
    let orphaned = facts(&[2], &[(1, &task(0).to_string())], &[(0, false)]);
    let (_, detail) = at_end(&orphaned, None).expect("lost");
    assert!(detail.ends_with("is no longer registered"), "{detail}");
}

#[test]
fn a_submitted_task_whose_node_is_gone_without_a_result_is_lost() {
    // Nothing in the tree says so: the task's node is not there at all.
    let mut checker = checker();
    checker.on_end(&facts(&[1], &[], &[]), &[task(0)], None);
    let violation = checker.violation().expect("lost");
    assert_eq!(violation.invariant, Invariant::Liveness);
    assert_eq!(
        violation.detail,
        format!(
            "{} was submitted and never finished: no result was ever written, and its node is not there",
            task(0)
        )
    );
    // Nothing submitted, nothing to miss.
    let mut quiet = self::checker();
    quiet.on_end(&facts(&[1], &[], &[]), &[], None);
    assert_eq!(quiet.violation(), None);
}

#[test]
fn a_worker_that_ends_by_itself_is_an_actor_failure() {
    let mut checker = checker();
    assert!(checker.on_actor_failed("w2", "it gave up: session expired"));
    let violation = checker.violation().expect("reported");
    assert_eq!(violation.invariant, Invariant::ActorFailed);
    assert_eq!(violation.step, Step::EndOfRun);
    assert_eq!(
        violation.detail,
        "w2 ended before the run did: it gave up: session expired"
    );
    // The first violation stands.
    assert!(!checker.on_actor_failed("w3", "it panicked"));
}

/// A master candidate that gives up is an actor failure too. An outsider
/// replaces the empty `assignments/` directory with an ephemeral node, so
/// the master's first assignment create is refused with
/// `NoChildrenForEphemerals`, which a new session would meet again: the
/// candidate gives up, and the fleet is left without a master.
#[test]
fn a_master_candidate_that_gives_up_is_an_actor_failure() {
    let report = zkdist_sim::runtime::block_on(7, async {
        let h = Harness::start(HarnessConfig::new(7, Latency::Fixed { ms: 1 })).await;
        h.start_master().await;
        h.start_worker().await;
        h.registered(1).await;
        let (rogue, _events) = h.sim().connect("rogue").await.unwrap();
        let assignments = h.layout().assignments_dir();
        rogue.delete(&assignments, None).await.unwrap();
        rogue
            .create(&assignments, b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        h.submit(0).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        h.finish().await
    });
    let violation = report.violation.as_ref().expect("a violation");
    assert_eq!(violation.invariant, Invariant::ActorFailed, "{violation}");
    assert_eq!(violation.step, Step::EndOfRun);
    assert!(
        violation
            .detail
            .starts_with("m1 ended before the run did: it gave up: ")
            && violation.detail.contains("its parent is ephemeral"),
        "{violation}"
    );
}

#[test]
fn deleting_a_task_before_its_result_is_caught() {
    let report = caught(async |h| {
        let outsider = outsider(h).await;
        outsider
            .delete(&format!("{}/{}", h.layout().tasks_dir(), t(h, 0)), None)
            .await
            .unwrap();
    });
    check_report(
        &report,
        Invariant::FinishedExactlyOnce,
        "rogue deleted {t0} before any result was written: it can never finish",
    );
}

/// The simulator with the checker on and a rogue master session (it holds
/// the master node) that the test drives by hand, after the layout and
/// tasks 0 and 1 exist.
async fn rogue(h: &Harness) -> SimSession {
    let rogue = outsider(h).await;
    rogue
        .create(&h.layout().master(), b"rogue", CreateMode::Ephemeral)
        .await
        .unwrap();
    rogue
}

/// Like [`rogue`], but the session does not hold the master node.
async fn outsider(h: &Harness) -> SimSession {
    for _ in 0..2 {
        h.submit(0).await;
    }
    let (rogue, _events) = h.sim().connect("rogue").await.unwrap();
    rogue
}

/// A worker session, registered by hand: its id node, then its
/// registration.
async fn rogue_worker(h: &Harness, name: &str) -> (SimSession, WorkerId) {
    let (zk, _events) = h.sim().connect(name).await.unwrap();
    let id = zk
        .create(
            &h.layout().worker_id_prefix(),
            b"",
            CreateMode::EphemeralSequential,
        )
        .await
        .unwrap();
    let id = WorkerId::parse(zkdist_coord::path::name(&id)).unwrap();
    zk.create(&h.layout().worker(&id), b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    (zk, id)
}

async fn create(zk: &SimSession, path: &str, data: &str) {
    let _ = zk
        .create(path, data.as_bytes(), CreateMode::Persistent)
        .await;
}

/// Runs `script` with the checker on; requires that it is stopped by a
/// violation (the script itself never ends) and returns the report.
fn caught(script: impl AsyncFnOnce(&Harness)) -> RunReport {
    zkdist_sim::runtime::block_on(7, async {
        let h = Harness::start(HarnessConfig::new(7, Latency::Fixed { ms: 1 })).await;
        let ended = h
            .guard(async {
                script(&h).await;
                // A violation stops the run: this never ends otherwise.
                tokio::time::timeout(Duration::from_secs(60), pending::<()>()).await
            })
            .await;
        assert!(ended.is_none(), "the run was not stopped by a violation");
        h.report().await
    })
}

/// The name of the `n`th task submitted (from 0).
fn t(h: &Harness, n: usize) -> String {
    h.submitted()[n].to_string()
}

/// The report names the seed, the zxid, and ends its excerpt at the
/// transaction's line. `{t0}` and `{t1}` in `detail` stand for the names of
/// the first two tasks submitted.
fn check_report(report: &RunReport, invariant: Invariant, detail: &str) {
    let detail = &detail
        .replace("{t0}", report.submitted[0].as_str())
        .replace("{t1}", report.submitted[1].as_str());
    let violation = report.violation.as_ref().expect("a violation");
    assert_eq!(report.seed, 7);
    assert_eq!(violation.invariant, invariant, "{violation}");
    assert!(violation.detail.contains(detail), "{violation}");
    let Step::Transaction { zxid, line } = &violation.step else {
        panic!("not found on a transaction: {violation}");
    };
    assert!(line.contains(&format!("zxid=0x{zxid:x} ")), "{line}");
    let at = violation.trace_line.expect("located") - 1;
    assert_eq!(&report.trace[at], line);
    assert_eq!(violation.excerpt.last(), Some(line));
    assert!(violation.excerpt.len() <= trace::EXCERPT_LINES);
    assert!(
        report
            .trace
            .last()
            .is_some_and(|last| last.contains(&format!("violation: {invariant}"))),
        "the trace ends with the violation"
    );
    let shown = violation.to_string();
    assert!(
        shown.starts_with(&format!(
            "violation: {invariant} at zxid 0x{zxid:x} (trace line {})",
            at + 1
        )),
        "{shown}"
    );
}

#[test]
fn an_assignment_to_an_unregistered_worker_is_caught() {
    let report = caught(async |h| {
        let rogue = rogue(h).await;
        create(&rogue, &h.layout().assignment(&worker(9)), &t(h, 0)).await;
    });
    check_report(
        &report,
        Invariant::AssignedToUnregistered,
        "{t0} assigned to worker-0000000009, which is not registered",
    );
}

#[test]
fn one_task_in_two_assignment_nodes_is_caught() {
    let report = caught(async |h| {
        let rogue = rogue(h).await;
        for w in [1, 2] {
            let registration = h.layout().worker(&worker(w));
            rogue
                .create(&registration, b"", CreateMode::Ephemeral)
                .await
                .unwrap();
        }
        create(&rogue, &h.layout().assignment(&worker(1)), &t(h, 0)).await;
        create(&rogue, &h.layout().assignment(&worker(2)), &t(h, 0)).await;
    });
    check_report(
        &report,
        Invariant::TaskAssignedTwice,
        "{t0} assigned to worker-0000000002 while worker-0000000001's assignment names it too",
    );
}

#[test]
fn a_second_assignment_for_a_busy_worker_is_caught_though_refused() {
    let report = caught(async |h| {
        let rogue = rogue(h).await;
        let registration = h.layout().worker(&worker(1));
        rogue
            .create(&registration, b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        let assignment = h.layout().assignment(&worker(1));
        create(&rogue, &assignment, &t(h, 0)).await;
        create(&rogue, &assignment, &t(h, 1)).await;
    });
    check_report(
        &report,
        Invariant::WorkerAssignedTwice,
        "rogue tried to create /zkdist/assignments/worker-0000000001 while it exists (holding {t0})",
    );
}

#[test]
fn skipping_an_older_waiting_task_breaks_fifo() {
    let report = caught(async |h| {
        let rogue = rogue(h).await;
        let registration = h.layout().worker(&worker(1));
        rogue
            .create(&registration, b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        create(&rogue, &h.layout().assignment(&worker(1)), &t(h, 1)).await;
    });
    check_report(
        &report,
        Invariant::FifoOrder,
        "{t1} assigned while the older {t0} still waits",
    );
}

#[test]
fn a_worker_releasing_before_its_result_is_caught() {
    let report = caught(async |h| {
        let master = rogue(h).await;
        let (worker_zk, id) = rogue_worker(h, "rogue-worker").await;
        create(&master, &h.layout().assignment(&id), &t(h, 0)).await;
        worker_zk
            .delete(&h.layout().assignment(&id), None)
            .await
            .unwrap();
    });
    check_report(
        &report,
        Invariant::FinishedExactlyOnce,
        "worker-0000000000 released {t0} before writing its result",
    );
}

/// Runs `script` with the checker on and requires that it breaks no rule.
fn clean(script: impl AsyncFnOnce(&Harness)) {
    zkdist_sim::runtime::block_on(7, async {
        let h = Harness::start(HarnessConfig::new(7, Latency::Fixed { ms: 1 })).await;
        let ended = h.guard(script(&h)).await;
        let report = h.report().await;
        assert!(ended.is_some(), "stopped by {:?}", report.violation);
        assert_eq!(report.violation, None);
    })
}

/// The completion `multi` of the failures design: the result and the
/// release of the worker's own assignment, in one transaction.
fn completion(h: &Harness, task: &str, worker: &WorkerId, result: Vec<u8>) -> Vec<Op> {
    let task = TaskId::parse(task).unwrap();
    vec![
        Op::Create {
            path: h.layout().result(&task),
            data: result,
            mode: CreateMode::Persistent,
        },
        Op::Delete {
            path: h.layout().assignment(worker),
            version: Some(0),
        },
    ]
}

#[test]
fn a_completion_multi_by_the_assigned_worker_breaks_no_rule() {
    clean(async |h| {
        let master = rogue(h).await;
        let (worker_zk, id) = rogue_worker(h, "rogue-worker").await;
        create(&master, &h.layout().assignment(&id), &t(h, 0)).await;
        let result = right_result(&worker_zk, h, &t(h, 0)).await;
        worker_zk
            .multi(completion(h, &t(h, 0), &id, result))
            .await
            .unwrap();
    });
}

/// The encoded result the testbed's handler gives for `task`'s payload.
async fn right_result(zk: &SimSession, h: &Harness, task: &str) -> Vec<u8> {
    let task = TaskId::parse(task).unwrap();
    let (payload, _) = zk
        .get_data(&h.layout().task(&task), Watch::No)
        .await
        .unwrap();
    expected_result(&payload).encode()
}

#[test]
fn a_result_that_answers_another_task_is_caught() {
    let report = caught(async |h| {
        let master = rogue(h).await;
        let (worker_zk, id) = rogue_worker(h, "rogue-worker").await;
        create(&master, &h.layout().assignment(&id), &t(h, 0)).await;
        let other_answer = right_result(&worker_zk, h, &t(h, 1)).await;
        let _ = worker_zk
            .multi(completion(h, &t(h, 0), &id, other_answer))
            .await;
    });
    check_report(
        &report,
        Invariant::ResultMatchesTask,
        "the result of {t0} is success \"done 1\", but its payload gives success \"done 0\"",
    );
}

#[test]
fn an_unreadable_result_is_caught() {
    let report = caught(async |h| {
        let master = rogue(h).await;
        let (worker_zk, id) = rogue_worker(h, "rogue-worker").await;
        create(&master, &h.layout().assignment(&id), &t(h, 0)).await;
        let _ = worker_zk
            .multi(completion(h, &t(h, 0), &id, b"done".to_vec()))
            .await;
    });
    check_report(
        &report,
        Invariant::ResultMatchesTask,
        "the result of {t0} is unreadable (",
    );
}

#[test]
fn a_result_written_after_the_assignment_was_revoked_is_a_zombie_write() {
    let report = caught(async |h| {
        let master = rogue(h).await;
        let (worker_zk, id) = rogue_worker(h, "zombie").await;
        let assignment = h.layout().assignment(&id);
        create(&master, &assignment, &t(h, 0)).await;
        // The worker's registration goes (its process hung, say, and an
        // operator removed it), and the master reclaims the assignment.
        worker_zk
            .delete(&h.layout().worker(&id), None)
            .await
            .unwrap();
        master.delete(&assignment, None).await.unwrap();
        let result = h.layout().result(&TaskId::parse(&t(h, 0)).unwrap());
        create(&worker_zk, &result, "done").await;
    });
    check_report(
        &report,
        Invariant::ZombieWrite,
        "zombie wrote the result of {t0} without holding its assignment (no assignment names it)",
    );
}

#[test]
fn a_reclaim_from_a_worker_still_registered_is_caught() {
    let report = caught(async |h| {
        let master = rogue(h).await;
        let (_worker_zk, id) = rogue_worker(h, "busy").await;
        let assignment = h.layout().assignment(&id);
        create(&master, &assignment, &t(h, 0)).await;
        master.delete(&assignment, None).await.unwrap();
    });
    check_report(
        &report,
        Invariant::TaskAssignedTwice,
        "rogue took {t0} back from worker-0000000000, which is still registered and runs it",
    );
}

#[test]
fn an_assignment_rewritten_in_place_is_caught() {
    let report = caught(async |h| {
        let master = rogue(h).await;
        let (_worker_zk, id) = rogue_worker(h, "busy").await;
        let assignment = h.layout().assignment(&id);
        create(&master, &assignment, &t(h, 0)).await;
        master
            .set_data(&assignment, t(h, 1).as_bytes(), None)
            .await
            .unwrap();
    });
    check_report(
        &report,
        Invariant::WorkerAssignedTwice,
        "rogue rewrote worker-0000000000's assignment from {t0} to {t1}",
    );
}

#[test]
fn a_result_rewritten_is_caught() {
    let report = caught(async |h| {
        let master = rogue(h).await;
        let (worker_zk, id) = rogue_worker(h, "rogue-worker").await;
        create(&master, &h.layout().assignment(&id), &t(h, 0)).await;
        let result = right_result(&worker_zk, h, &t(h, 0)).await;
        worker_zk
            .multi(completion(h, &t(h, 0), &id, result.clone()))
            .await
            .unwrap();
        let path = h.layout().result(&TaskId::parse(&t(h, 0)).unwrap());
        worker_zk.set_data(&path, &result, None).await.unwrap();
    });
    check_report(
        &report,
        Invariant::FinishedExactlyOnce,
        "rogue-worker rewrote the result of {t0}",
    );
}

#[test]
fn a_result_written_by_another_workers_session_is_a_zombie_write() {
    let report = caught(async |h| {
        let master = rogue(h).await;
        let (_holder, id) = rogue_worker(h, "holder").await;
        let (other, _) = rogue_worker(h, "other").await;
        create(&master, &h.layout().assignment(&id), &t(h, 0)).await;
        let result = h.layout().result(&TaskId::parse(&t(h, 0)).unwrap());
        create(&other, &result, "done").await;
    });
    check_report(
        &report,
        Invariant::ZombieWrite,
        "other wrote the result of {t0} without holding its assignment (its assignment is worker-0000000000's)",
    );
}

#[test]
fn an_assignment_from_a_session_without_the_master_node_is_a_deposed_master_write() {
    let report = caught(async |h| {
        let deposed = outsider(h).await;
        let (_worker, id) = rogue_worker(h, "rogue-worker").await;
        create(&deposed, &h.layout().assignment(&id), &t(h, 0)).await;
    });
    check_report(
        &report,
        Invariant::DeposedMasterWrite,
        "rogue created worker-0000000000's assignment ({t0}) without holding the master node",
    );
}

#[test]
fn a_reclaim_from_a_session_without_the_master_node_is_a_deposed_master_write() {
    let report = caught(async |h| {
        let master = rogue(h).await;
        let (_worker, id) = rogue_worker(h, "rogue-worker").await;
        let assignment = h.layout().assignment(&id);
        create(&master, &assignment, &t(h, 0)).await;
        let (deposed, _events) = h.sim().connect("deposed").await.unwrap();
        deposed.delete(&assignment, None).await.unwrap();
    });
    check_report(
        &report,
        Invariant::DeposedMasterWrite,
        "deposed deleted worker-0000000000's assignment ({t0}) without holding the master node",
    );
}

#[test]
fn a_refused_assignment_create_inside_a_multi_is_caught() {
    let report = caught(async |h| {
        let master = rogue(h).await;
        let (_worker, id) = rogue_worker(h, "rogue-worker").await;
        let assignment = h.layout().assignment(&id);
        create(&master, &assignment, &t(h, 0)).await;
        let fenced = vec![
            Op::Check {
                path: h.layout().tasks_dir(),
                version: Some(0),
            },
            Op::Create {
                path: assignment.clone(),
                data: t(h, 1).into_bytes(),
                mode: CreateMode::Persistent,
            },
        ];
        let _ = master.multi(fenced).await;
    });
    check_report(
        &report,
        Invariant::WorkerAssignedTwice,
        "rogue tried to create /zkdist/assignments/worker-0000000000 while it exists (holding {t0})",
    );
}

/// A transaction as the simulator reports it, for feeding the checker by
/// hand: `changes` on an otherwise empty tree.
fn applied(zxid: i64, session: i64, kind: TxnKind, changes: Vec<Change>) -> AppliedOp {
    AppliedOp {
        zxid,
        session: SessionId(session),
        session_name: format!("s{session}"),
        kind,
        changes,
        error: None,
        elapsed: Duration::ZERO,
        trace_line: format!("zxid=0x{zxid:x} s{session} ..."),
    }
}

#[test]
fn a_worker_stops_running_its_task_when_its_session_ends() {
    let ids = Layout::default().ids_dir();
    let started = |w: u32| WorkerDecision::TaskStarted {
        worker: worker(w),
        task: task(0),
    };
    let run = |end_first: bool| {
        let mut checker = checker();
        let tree = Tree::new();
        let id_node = Change::Created(format!("{ids}/{}", worker(1)));
        checker.on_applied(&applied(1, 5, TxnKind::Create, vec![id_node]), &tree);
        checker.on_worker_decision("w1", &started(1));
        if end_first {
            // The first worker's session expires: it is a zombie now.
            checker.on_applied(&applied(2, 5, TxnKind::ExpireSession, vec![]), &tree);
        }
        checker.on_worker_decision("w2", &started(2));
        checker.violation().map(|violation| violation.invariant)
    };
    assert_eq!(run(false), Some(Invariant::TaskAssignedTwice));
    assert_eq!(run(true), None);

    // A worker that starts its task only after its session ended (it read
    // the assignment just before) is a zombie from the start.
    let mut checker = checker();
    let tree = Tree::new();
    let id_node = Change::Created(format!("{ids}/{}", worker(1)));
    checker.on_applied(&applied(1, 5, TxnKind::Create, vec![id_node]), &tree);
    checker.on_applied(&applied(2, 5, TxnKind::ExpireSession, vec![]), &tree);
    checker.on_worker_decision("w1", &started(1));
    checker.on_worker_decision("w2", &started(2));
    let written = WorkerDecision::ResultWritten {
        worker: worker(2),
        task: task(0),
        success: true,
    };
    checker.on_worker_decision("w2", &written);
    // Even after another worker finished it: a zombie's late start is no
    // second run.
    checker.on_worker_decision("w1", &started(1));
    assert_eq!(checker.violation(), None);
    // A live worker starting a finished task is.
    checker.on_worker_decision("w3", &started(3));
    assert_eq!(
        checker.violation().map(|violation| violation.invariant),
        Some(Invariant::FinishedExactlyOnce)
    );
}

#[test]
fn each_master_candidate_is_judged_by_its_own_log_from_its_new_session_on() {
    let mut checker = checker_after_submitting(&[0, 1, 2]);
    checker.on_master_decision("m1", &round(1, &[(1, 0)]));
    // Another candidate leads now and rebuilt its state from ZooKeeper:
    // the first one's log is not its own.
    checker.on_master_decision("m2", &round(1, &[(2, 1)]));
    assert_eq!(checker.violation(), None);
    // A new session of the first candidate starts with a fresh log.
    let mut new_session = applied(9, 9, TxnKind::CreateSession, vec![]);
    new_session.session_name = "m1.2".to_owned();
    checker.on_applied(&new_session, &Tree::new());
    checker.on_master_decision("m1", &round(2, &[(1, 2)]));
    assert_eq!(checker.violation(), None);
    // On the same session, that round gives a busy worker a second task.
    assert_eq!(
        master_log(&[round(1, &[(1, 0)]), round(2, &[(1, 2)])]),
        Some(Invariant::WorkerAssignedTwice)
    );
}

/// A worker registers, then its session ends; a master then creates its
/// assignment (it decided before it heard of the end) without the check of
/// the registration that zkdist's master sends with every create.
async fn assign_to_a_worker_that_left(h: &Harness, after_a_failure: bool) {
    let master = rogue(h).await;
    let (worker_zk, id) = rogue_worker(h, "gone").await;
    worker_zk.close().await.unwrap();
    if after_a_failure {
        h.failure("expire gone");
    }
    create(&master, &h.layout().assignment(&id), &t(h, 0)).await;
}

/// The master's create checks the worker's registration in the same
/// transaction, so an assignment to a worker that left is caught whether
/// or not a failure came first.
#[test]
fn an_assignment_to_a_worker_that_just_left_is_caught_even_after_a_failure() {
    for after_a_failure in [false, true] {
        let report = caught(async |h| assign_to_a_worker_that_left(h, after_a_failure).await);
        check_report(
            &report,
            Invariant::AssignedToUnregistered,
            "{t0} assigned to worker-0000000000, which is not registered",
        );
    }
}

#[test]
fn two_tasks_from_one_submission_token_are_caught() {
    let report = caught(async |h| {
        let client = outsider(h).await;
        let prefix = zkdist_coord::path::join(
            &h.layout().tasks_dir(),
            &zkdist_coord::TaskToken(0xabc).name_prefix(),
        );
        for _ in 0..2 {
            client
                .create(
                    &prefix,
                    b"{\"kind\":\"work\"}",
                    CreateMode::PersistentSequential,
                )
                .await
                .unwrap();
        }
    });
    check_report(
        &report,
        Invariant::SubmittedOnce,
        "one submit created two tasks",
    );
    let first = report.violation.as_ref().unwrap().detail.clone();
    assert!(
        first.contains(
            "-0000000003 carries the submission token of task-0000000000000abc-0000000002"
        ),
        "{first}"
    );
}

#[test]
fn an_inline_payload_for_a_worker_that_does_not_read_them_is_caught() {
    // The payload is the task's own: only the worker's registration (empty,
    // as a worker older than inline payloads writes it) breaks the rule.
    let report = caught(async |h| {
        let rogue = rogue(h).await;
        let (_old, id) = rogue_worker(h, "old").await;
        let task = t(h, 0);
        let (payload, _) = rogue
            .get_data(
                &zkdist_coord::path::join(&h.layout().tasks_dir(), &task),
                zkdist_coord::Watch::No,
            )
            .await
            .unwrap();
        let data = format!("{task}\n{}", String::from_utf8(payload).unwrap());
        create(&rogue, &h.layout().assignment(&id), &data).await;
    });
    check_report(
        &report,
        Invariant::InlinePayload,
        "but its registration does not say it reads inline payloads",
    );
}
