//! The watch discovery on the simulator: tasks come from the recursive
//! watch's events, and what a disconnection hides is found by the reconcile
//! listing after it; a reconcile listing over the client's reply limit is
//! deferred while the master goes on with the tasks it knows.

mod common;

use std::time::Duration;

use futures::future::join_all;
use zkdist_coord::{Coordinator, CreateMode, Layout, TaskId, Watch, path};
use zkdist_master::{
    MasterDecision, RECONCILE_RETRY_DELAY_MS, RequeueReason, TaskDiscovery, run_master_role,
};
use zkdist_sim::{Latency, SimConfig, SimConnector, SimSession, SimZk};

use common::*;

const HANG_GUARD: Duration = Duration::from_secs(600);
/// A protected-name prefix (`task-<16 hex digits>-`), as clients submit.
const TOKEN_PREFIX: &str = "task-00000000000000aa-";

/// Creates `count` tasks under `tasks/`, many requests in flight at once;
/// returns their ids in creation order.
async fn create_tasks(zk: &SimSession, layout: &Layout, count: usize) -> Vec<TaskId> {
    let prefix = path::join(&layout.tasks_dir(), TOKEN_PREFIX);
    let mut created = Vec::with_capacity(count);
    let mut left = count;
    while left > 0 {
        let batch = left.min(2_000);
        let paths = join_all(
            (0..batch).map(|_| zk.create(&prefix, b"{}", CreateMode::PersistentSequential)),
        )
        .await;
        for path in paths {
            let path = path.expect("a task is created");
            created.push(TaskId::parse(path::name(&path)).expect("a task name"));
        }
        left -= batch;
    }
    created
}

/// Waits until the master's decisions include one `matches` accepts;
/// returns the master and every decision taken up to that one. Panics with
/// the master's outcome if it stops first.
async fn wait_for(
    mut master: RunningMaster,
    what: &str,
    matches: impl Fn(&MasterDecision) -> bool,
) -> (RunningMaster, Vec<MasterDecision>) {
    let mut seen = Vec::new();
    loop {
        let next = tokio::time::timeout(HANG_GUARD, master.next_decision())
            .await
            .unwrap_or_else(|_| panic!("no {what} in time"));
        let Some(decision) = next else {
            let (outcome, _) = master.stop().await;
            panic!("the master stopped before {what}: {outcome:?}");
        };
        let found = matches(&decision);
        seen.push(decision);
        if found {
            return (master, seen);
        }
    }
}

#[test]
fn tasks_changed_during_a_disconnection_are_found_by_the_reconcile() {
    run_sim(3, async {
        let sim = SimZk::start(sim_config(3, Latency::Fixed { ms: 1 }));
        let layout = Layout::default();
        let (zk, events) = sim.connect("master").await.unwrap();
        let master_session = zk.session_id();
        let master = spawn_master(zk, events, &layout).await;
        let (client, _client_events) = sim.connect("client").await.unwrap();
        let (master, _) = wait_for(master, "initialisation", |d| {
            matches!(d, MasterDecision::Initialised { .. })
        })
        .await;

        let before = create_tasks(&client, &layout, 2).await;
        let (master, _) = wait_for(master, "the second task", |d| {
            *d == MasterDecision::TaskQueued {
                task: before[1].clone(),
            }
        })
        .await;
        // While the master is away: one known task deleted, two created.
        // The watch reports none of it.
        sim.cut(master_session, Duration::from_millis(300)).await;
        client.delete(&layout.task(&before[0]), None).await.unwrap();
        let during = create_tasks(&client, &layout, 2).await;
        // One reconcile listing queues what it finds new, then drops what
        // is gone.
        let (master, decisions) = wait_for(master, "the reconcile", |d| {
            *d == MasterDecision::TaskVanished {
                task: before[0].clone(),
            }
        })
        .await;
        for task in &during {
            assert!(
                decisions.contains(&MasterDecision::TaskQueued { task: task.clone() }),
                "{task} was not found: {decisions:#?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (state, _) = master.stop().await;
        let state = state.expect("the master ran");
        assert_eq!(
            state.pending_tasks().iter().cloned().collect::<Vec<_>>(),
            vec![before[1].clone(), during[0].clone(), during[1].clone()]
        );
    });
}

/// An assignment node deleted by someone other than its worker (by hand):
/// the worker gives its task up without a result, and the master, which
/// hears of no result for it, reads the task's status once its pause is
/// over and queues it again; a worker runs it, and its waiter gets the
/// result. Before, the master took the release for a completion, and the
/// task waited for the next master.
#[test]
fn a_task_whose_assignment_was_deleted_by_hand_is_queued_again_and_runs() {
    run_sim(6, async {
        let sim = SimZk::start(sim_config(6, Latency::Fixed { ms: 1 }));
        let layout = Layout::default();
        let (zk, events) = sim.connect("master").await.unwrap();
        let master = spawn_master(zk, events, &layout).await;
        let worker = start_worker(&sim, "worker", &layout, TestHandler).await;
        let mut client = client(&sim, &layout).await;
        // Two seconds of work: the deletion comes while it runs.
        let task = client.submit(&payload("echo", 1, 2_000_000)).await.unwrap();
        let (master, _) = wait_for(master, "the assignment", |d| {
            matches!(d, MasterDecision::AssignmentCreated { task: created, .. } if *created == task)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (holders, _) = client
            .session()
            .get_children(&layout.assignments_dir(), Watch::No)
            .await
            .unwrap();
        assert_eq!(holders.len(), 1, "{holders:?}");
        let assignment = path::join(&layout.assignments_dir(), &holders[0]);
        client.session().delete(&assignment, None).await.unwrap();

        let result = tokio::time::timeout(HANG_GUARD, client.wait(&task))
            .await
            .expect("the task runs again")
            .unwrap();
        assert_eq!(result, expected_result("echo", 1));
        let (_, decisions) = master.stop().await;
        let (outcome, worker_decisions) = worker.stop().await;
        outcome.unwrap();
        // The first run was stopped unwritten; the result is the second's.
        let runs: Vec<String> = worker_decisions
            .iter()
            .map(ToString::to_string)
            .filter(|line| line.contains(task.as_str()))
            .collect();
        assert!(
            runs.iter()
                .any(|line| line.ends_with(&format!("found {task} revoked, wrote nothing"))),
            "{runs:#?}"
        );
        assert_eq!(
            runs.iter()
                .filter(|line| line.contains(" started "))
                .count(),
            2,
            "{runs:#?}"
        );
        let requeued: Vec<&MasterDecision> = decisions
            .iter()
            .filter(|d| matches!(d, MasterDecision::TaskRequeued { .. }))
            .collect();
        assert!(
            matches!(
                requeued[..],
                [MasterDecision::TaskRequeued { task: again, reason: RequeueReason::ReleasedUnfinished { .. } }]
                    if *again == task
            ),
            "{decisions:#?}"
        );
    });
}

#[test]
fn a_reconcile_over_the_reply_limit_is_deferred_until_it_fits() {
    run_sim(4, async {
        let sim = SimZk::start(sim_config(4, Latency::Zero));
        let layout = Layout::default();
        let (zk, events) = sim.connect("master").await.unwrap();
        let master_session = zk.session_id();
        let master = spawn_master(zk, events, &layout).await;
        assert_eq!(TaskDiscovery::default(), TaskDiscovery::Watch);
        let (client, _client_events) = sim.connect("client").await.unwrap();
        let (master, _) = wait_for(master, "initialisation", |d| {
            matches!(d, MasterDecision::Initialised { .. })
        })
        .await;

        // 36 bytes a name on the wire: 30,000 tasks make a listing of over
        // 1 MiB, which the master never needs while connected.
        let queued = create_tasks(&client, &layout, 30_000).await;
        let last = queued.last().unwrap().clone();
        let (master, _) = wait_for(master, "the last task", |d| {
            *d == MasterDecision::TaskQueued { task: last.clone() }
        })
        .await;
        let listing = client.get_children(&layout.tasks_dir(), Watch::No).await;
        assert!(
            listing.is_err(),
            "the directory is over the reply limit: {} children listed",
            listing.map_or(0, |(children, _)| children.len())
        );

        sim.cut(master_session, Duration::from_millis(300)).await;
        let missed = create_tasks(&client, &layout, 1).await.remove(0);
        let (master, _) = wait_for(master, "the deferral", |d| {
            matches!(d, MasterDecision::ReconcileDeferred { error, .. } if error.contains("limit"))
        })
        .await;

        // The queue shrinks (a client deletes half of it): the next
        // reconcile fits, and finds the task created while away.
        let doomed: Vec<String> = queued[..15_000]
            .iter()
            .map(|task| layout.task(task))
            .collect();
        for chunk in doomed.chunks(2_000) {
            for deleted in join_all(chunk.iter().map(|path| client.delete(path, None))).await {
                deleted.expect("a task is deleted");
            }
        }
        let (master, decisions) = wait_for(master, "the missed task", |d| {
            *d == MasterDecision::TaskQueued {
                task: missed.clone(),
            }
        })
        .await;
        assert!(
            !decisions
                .iter()
                .any(|d| matches!(d, MasterDecision::Restarting { .. })),
            "the master kept its session"
        );
        // One deferral, then the retry after its pause: the reconnections
        // that each failed attempt caused did not list again meanwhile.
        assert!(
            !decisions
                .iter()
                .any(|d| matches!(d, MasterDecision::ReconcileDeferred { .. })),
            "the reconcile was retried before its pause: {:?}",
            decisions
                .iter()
                .filter(|d| matches!(d, MasterDecision::ReconcileDeferred { .. }))
                .count()
        );
        let (state, _) = master.stop().await;
        let state = state.expect("the master ran");
        assert_eq!(state.pending_tasks().len(), 15_001);
        assert_eq!(state.pending_tasks().first(), Some(&queued[15_000]));
        assert_eq!(state.pending_tasks().last(), Some(&missed));
    });
}

/// Tasks queued before the master of [`master_on_a_backlog`] starts: a
/// listing of over 1 MiB, the default reply limit.
const BACKLOG_OVER_THE_DEFAULT_LIMIT: usize = 30_000;

/// A simulation whose sessions accept listings of up to `max_reply_bytes`,
/// with [`BACKLOG_OVER_THE_DEFAULT_LIMIT`] tasks queued under the default
/// layout; the tasks, oldest first.
async fn backlog(max_reply_bytes: usize) -> (SimZk, Vec<TaskId>) {
    backlog_with(SimConfig {
        max_reply_bytes,
        ..sim_config(5, Latency::Zero)
    })
    .await
}

/// [`backlog`] on a simulation configured as `config` says.
async fn backlog_with(config: SimConfig) -> (SimZk, Vec<TaskId>) {
    let sim = SimZk::start(config);
    let layout = Layout::default();
    let (client, _client_events) = sim.connect("client").await.unwrap();
    for dir in [layout.root().to_owned(), layout.tasks_dir()] {
        client
            .create(&dir, b"", CreateMode::Persistent)
            .await
            .unwrap();
    }
    let queued = create_tasks(&client, &layout, BACKLOG_OVER_THE_DEFAULT_LIMIT).await;
    (sim, queued)
}

/// Elects a master on a [`backlog`]: to start, the master must list every
/// task. Runs `check` on the master, the tasks and the simulation.
fn master_on_a_backlog(
    max_reply_bytes: usize,
    check: impl AsyncFnOnce(RunningMaster, Vec<TaskId>, SimZk),
) {
    run_sim(5, async {
        let (sim, queued) = backlog(max_reply_bytes).await;
        let master = start_master(&sim, "master", &Layout::default()).await;
        check(master, queued, sim).await;
    });
}

/// With the default reply limit a master cannot list the backlog, so it
/// cannot start, and says why. It lists once: the same listing would be
/// refused every time.
#[test]
fn a_master_cannot_start_on_a_backlog_over_the_default_reply_limit() {
    master_on_a_backlog(zkdist_coord::MAX_REPLY_BYTES, async |master, _, sim| {
        let (outcome, decisions) = tokio::time::timeout(HANG_GUARD, master.outcome())
            .await
            .expect("the master gives up in time");
        let error = outcome
            .expect_err("the master cannot list tasks/")
            .to_string();
        assert!(error.contains("1048576"), "{error}");
        let tasks_listings = sim
            .trace()
            .await
            .iter()
            .filter(|line| line.contains("read master get_children /zkdist/tasks"))
            .count();
        assert_eq!(
            tasks_listings, 1,
            "a listing over the limit is not sent again"
        );
        assert!(
            !decisions
                .iter()
                .any(|d| matches!(d, MasterDecision::Initialised { .. })),
            "the master initialised on a listing it cannot read"
        );
    });
}

/// A master candidate whose sessions cannot list the backlog starts over
/// in a new session, which may fit once clients clean tasks up, but at the
/// reconcile's pace: every try has the server serialise the whole
/// directory. (The simulated client drops its connection on such a reply,
/// as a Java client does, so the session's `master` node outlives the
/// close, and the next session waits for it to expire: a session timeout
/// shorter than the pace shows the pace.)
#[test]
fn a_role_that_cannot_list_the_backlog_starts_over_at_the_reconcile_s_pace() {
    run_sim(5, async {
        let (sim, _) = backlog_with(SimConfig {
            session_timeout_ms: RECONCILE_RETRY_DELAY_MS / 5,
            ..sim_config(5, Latency::Zero)
        })
        .await;
        let (decisions_tx, mut decisions) = tokio::sync::mpsc::unbounded_channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let role = tokio::spawn(run_master_role(
            SimConnector::new(sim.clone(), "m1"),
            Layout::default(),
            TaskDiscovery::Watch,
            async move {
                let _ = stopped.await;
            },
            Some(decisions_tx.into()),
        ));
        let mut restarts = Vec::new();
        while restarts.len() < 3 {
            let decision = tokio::time::timeout(HANG_GUARD, decisions.recv())
                .await
                .expect("the role decides")
                .expect("the role runs");
            if let MasterDecision::Restarting { reason } = decision {
                assert!(reason.contains("1048576"), "{reason}");
                restarts.push(tokio::time::Instant::now());
            }
        }
        for pair in restarts.windows(2) {
            assert!(
                pair[1] - pair[0] >= Duration::from_millis(RECONCILE_RETRY_DELAY_MS),
                "restarted after {:?}",
                pair[1] - pair[0]
            );
        }
        let listings = sim
            .trace()
            .await
            .iter()
            .filter(|line| line.contains("get_children /zkdist/tasks") && line.contains("read "))
            .count();
        assert_eq!(listings, 3, "one listing a session");
        stop.send(()).expect("the role waits for its shutdown");
        role.await
            .expect("the role does not panic")
            .expect("the role shuts down cleanly");
    });
}

/// With the limit raised, the same master starts and queues every task.
#[test]
fn a_master_starts_on_a_backlog_over_the_default_reply_limit_once_it_is_raised() {
    master_on_a_backlog(
        4 * zkdist_coord::MAX_REPLY_BYTES,
        async |master, queued, _| {
            let (master, decisions) = wait_for(master, "initialisation", |d| {
                matches!(d, MasterDecision::Initialised { .. })
            })
            .await;
            assert!(
                matches!(
                    decisions.last(),
                    Some(MasterDecision::Initialised {
                        pending_tasks: BACKLOG_OVER_THE_DEFAULT_LIMIT,
                        ..
                    })
                ),
                "{:?}",
                decisions.last()
            );
            let (state, _) = master.stop().await;
            let state = state.expect("the master ran");
            assert_eq!(state.pending_tasks().first(), queued.first());
            assert_eq!(state.pending_tasks().last(), queued.last());
        },
    );
}

/// A persistent node under `workers/` (an operator's stray create, or the
/// tree of another deployment laid out there) is no live worker's. The
/// master, which reads each registration as its worker joins, drops it
/// for good: every task finishes on the live worker, the one the stray was
/// given before its registration was read included, and the stray is left
/// holding nothing.
#[test]
fn a_registration_that_is_not_ephemeral_is_dropped_and_loses_no_task() {
    run_sim(3, async {
        let sim = SimZk::start(sim_config(3, Latency::Fixed { ms: 1 }));
        let layout = Layout::default();
        let master = start_master(&sim, "m1", &layout).await;
        // Queued while no worker is registered.
        let mut client = client(&sim, &layout).await;
        let mut tasks = Vec::new();
        for n in 0..4 {
            tasks.push(client.submit(&payload("echo", n, 0)).await.unwrap());
        }
        let last = tasks.last().unwrap().clone();
        let (master, _) = wait_for(
            master,
            "the tasks queued",
            |decision| matches!(decision, MasterDecision::TaskQueued { task } if *task == last),
        )
        .await;
        // The stray appears: the master hears of it as of a worker that
        // joined, and gives it the oldest task at once, in the step that
        // asks for its registration.
        let (operator, _events) = sim.connect("operator").await.unwrap();
        let stray = zkdist_coord::WorkerId::parse("x").unwrap();
        operator
            .create(&layout.worker(&stray), b"", CreateMode::Persistent)
            .await
            .unwrap();
        let (master, before) = wait_for(
            master,
            "the stray dropped",
            |decision| matches!(decision, MasterDecision::IgnoredNode { name, .. } if name == "x"),
        )
        .await;
        assert!(
            before.iter().any(|decision| decision
                .assigned()
                .iter()
                .any(|(worker, _)| *worker == stray)),
            "the stray was given a task before its registration was read: {before:?}"
        );
        let worker = start_worker(&sim, "w1", &layout, TestHandler).await;
        for (n, task) in (0..).zip(&tasks) {
            let result = tokio::time::timeout(HANG_GUARD, client.wait(task))
                .await
                .unwrap_or_else(|_| panic!("{task} never finished"))
                .unwrap();
            assert_eq!(result, expected_result("echo", n), "{task}");
        }
        let (_, decisions) = master.stop().await;
        let (stopped, _) = worker.stop().await;
        stopped.expect("the worker stops cleanly");
        assert!(
            !decisions
                .iter()
                .any(|decision| matches!(decision, MasterDecision::IgnoredNode { .. })),
            "the stray is named once: {decisions:?}"
        );
        assert_eq!(
            operator
                .exists(&layout.assignment(&stray), Watch::No)
                .await
                .unwrap(),
            None,
            "the stray holds no assignment"
        );
        // The node itself is the operator's to delete: still there.
        assert!(
            operator
                .exists(&layout.worker(&stray), Watch::No)
                .await
                .unwrap()
                .is_some()
        );
    });
}
