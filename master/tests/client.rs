//! The client API on the simulator: submit, wait, cleanup and status, and
//! their clear errors on bad input. The test plays master and worker by
//! hand where it needs a task assigned or finished.

mod common;

use std::time::Duration;

use zkdist_coord::{
    ClientError, Coordinator, CreateMode, Event, Layout, MAX_DATA_BYTES, MasterNode, TaskId,
    TaskResult, Watch, WorkerId, ZkError,
};
use zkdist_sim::{SimConfig, SimZk};

use common::*;

#[test]
fn submit_refuses_oversized_and_malformed_payloads_before_sending() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let client = client(&sim, &layout).await;

        let oversized = vec![b' '; MAX_DATA_BYTES + 1];
        let error = client.submit(&oversized).await.unwrap_err();
        assert!(
            matches!(error, ClientError::PayloadTooLarge(_)),
            "{error:?}"
        );
        assert!(
            error.to_string().contains(&MAX_DATA_BYTES.to_string()),
            "the limit is named: {error}"
        );

        for bad in [&b"not json"[..], br#"{"n": 1}"#, br#"{"kind": ""}"#] {
            let error = client.submit(bad).await.unwrap_err();
            assert!(matches!(error, ClientError::InvalidPayload(_)), "{error:?}");
            assert!(error.to_string().contains("kind"), "{error}");
        }
        // Nothing reached the server: not even the layout was created.
        let tasks_dir = layout.tasks_dir();
        assert!(!sim.inspect(move |tree| tree.exists(&tasks_dir)).await);
    });
}

#[test]
fn submit_creates_the_layout_and_numbers_tasks_in_order() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::new("/nested/root").unwrap();
        let client = client(&sim, &layout).await;
        let first = client.submit(&payload("echo", 1, 0)).await.unwrap();
        let second = client.submit(&payload("echo", 2, 0)).await.unwrap();
        assert!(first < second);
        let (data, _) = client
            .session()
            .get_data(&layout.task(&second), Watch::No)
            .await
            .unwrap();
        assert_eq!(data, payload("echo", 2, 0));
        let dirs = [
            layout.workers_dir(),
            layout.assignments_dir(),
            layout.ids_dir(),
        ];
        assert!(
            sim.inspect(move |tree| dirs.iter().all(|dir| tree.exists(dir)))
                .await
        );
    });
}

#[test]
fn wait_arms_one_watch_and_reads_once() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let mut client = client(&sim, &layout).await;
        let (worker, _worker_events) = sim.connect("worker").await.unwrap();
        let task = client.submit(&payload("echo", 1, 0)).await.unwrap();

        let result = TaskResult::Success {
            output: b"42".to_vec(),
        };
        let result_path = layout.result(&task);
        let write = {
            let (path, bytes) = (result_path.clone(), result.encode());
            async move {
                // The result comes a minute later: a polling client would
                // show many reads meanwhile.
                tokio::time::sleep(Duration::from_secs(60)).await;
                worker
                    .create(&path, &bytes, CreateMode::Persistent)
                    .await
                    .unwrap();
            }
        };
        let (got, ()) = tokio::join!(client.wait(&task), write);
        assert_eq!(got.unwrap(), result);

        let task_path = layout.task(&task);
        let reads: Vec<String> = sim
            .trace()
            .await
            .into_iter()
            .filter(|line| line.contains("] read client ") && line.contains(&task_path))
            .collect();
        // A first look without a watch (a finished task would keep one for
        // good), then one that arms it, and one read of the result: no
        // polling in between.
        assert_eq!(
            reads.len(),
            3,
            "two listings of the task, the second with a watch, one get_data: {reads:#?}"
        );
        assert!(reads[0].contains(&format!("get_children {task_path} -> ")));
        assert!(reads[1].contains(&format!("get_children {task_path} watch")));
        assert!(reads[2].contains(&format!("get_data {result_path}")));
    });
}

#[test]
fn wait_ends_with_no_such_task_when_the_task_is_deleted_meanwhile() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let mut client = client(&sim, &layout).await;
        let (other, _other_events) = sim.connect("other").await.unwrap();
        let task = client.submit(&payload("echo", 1, 0)).await.unwrap();
        let delete = {
            let path = layout.task(&task);
            async move {
                tokio::time::sleep(Duration::from_secs(60)).await;
                other.delete(&path, None).await.unwrap();
            }
        };
        // Simulated time: a wait that never ends fails here after an hour
        // of it, instead of hanging the test.
        let wait = tokio::time::timeout(Duration::from_secs(3600), client.wait(&task));
        let (waited, ()) = tokio::join!(wait, delete);
        match waited.expect("wait ends when its task is deleted") {
            Err(ClientError::NoSuchTask { task: named, path }) => {
                assert_eq!(named, task);
                assert_eq!(path, layout.task(&task));
            }
            other => panic!("expected NoSuchTask, got {other:?}"),
        }
    });
}

#[test]
fn wait_for_a_missing_task_leaves_no_watch_on_it() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let mut client = client(&sim, &layout).await;
        let (other, _other_events) = sim.connect("other").await.unwrap();
        layout.ensure_layout(&other).await.unwrap();
        let missing = TaskId::from_sequence(7);
        assert!(matches!(
            client.wait(&missing).await,
            Err(ClientError::NoSuchTask { .. })
        ));
        // The task and its result appear later (written by hand): a watch
        // left on either would now fire.
        let task_path = layout.task(&missing);
        other
            .create(&task_path, &payload("echo", 7, 0), CreateMode::Persistent)
            .await
            .unwrap();
        other
            .create(
                &layout.result(&missing),
                &TaskResult::failure("late").encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        other.delete(&layout.result(&missing), None).await.unwrap();
        other.delete(&task_path, None).await.unwrap();
        let (zk, mut events) = client.into_parts();
        // A round trip after the writes: an event they fired would be in
        // the stream by now.
        zk.sync("/").await.unwrap();
        zk.exists(&task_path, Watch::No).await.unwrap();
        let mut stray = Vec::new();
        while let Ok(event) = events.try_recv() {
            if let Event::Watch(event) = event {
                stray.push(event);
            }
        }
        assert_eq!(stray, vec![], "no watch was left behind");
    });
}

#[test]
fn wait_and_cleanup_name_what_is_wrong() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let mut client = client(&sim, &layout).await;
        let unknown = TaskId::from_sequence(99);
        // Under a root with no tasks at all (a mistyped root), that is
        // what the wait says.
        match client.wait(&unknown).await {
            Err(error @ ClientError::NoLayout { .. }) => {
                assert!(error.to_string().contains(layout.root()), "{error}")
            }
            other => panic!("{other:?}"),
        }

        let task = client.submit(&payload("echo", 1, 0)).await.unwrap();
        match client.wait(&unknown).await {
            Err(error @ ClientError::NoSuchTask { .. }) => {
                assert!(error.to_string().contains("task-0000000099"), "{error}")
            }
            other => panic!("{other:?}"),
        }
        match client.cleanup(&task).await {
            Err(ClientError::NotFinished { task: named }) => assert_eq!(named, task),
            other => panic!("{other:?}"),
        }
        let task_path = layout.task(&task);
        let still_there = task_path.clone();
        assert!(sim.inspect(move |tree| tree.exists(&still_there)).await);

        // A result written by hand stands for a worker's.
        let (worker, _worker_events) = sim.connect("worker").await.unwrap();
        worker
            .create(
                &layout.result(&task),
                &TaskResult::failure("nope").encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        assert_eq!(
            client.wait(&task).await.unwrap(),
            TaskResult::failure("nope")
        );
        client.cleanup(&task).await.unwrap();
        assert!(!sim.inspect(move |tree| tree.exists(&task_path)).await);
        assert!(matches!(
            client.cleanup(&task).await,
            Err(ClientError::NoSuchTask { .. })
        ));
    });
}

/// A `master` node that is not ephemeral is no master's: nothing deletes
/// it, and no candidate can claim it. Status says so instead of reporting
/// a master present.
#[test]
fn status_tells_a_master_node_that_is_not_ephemeral_from_a_master() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let client = client(&sim, &layout).await;
        client.submit(&payload("echo", 0, 0)).await.unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(status.master, MasterNode::Absent);

        let (actor, _actor_events) = sim.connect("actor").await.unwrap();
        actor
            .create(&layout.master(), b"", CreateMode::Persistent)
            .await
            .unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(status.master, MasterNode::NotEphemeral);

        actor.delete(&layout.master(), None).await.unwrap();
        actor
            .create(&layout.master(), b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(status.master, MasterNode::Held);
    });
}

/// A root inside another deployment's `workers/` has no layout of its
/// own, and never will (every role and submit refuses it): status says
/// that, naming the deployment, not how a layout comes to be.
#[test]
fn status_at_a_root_inside_a_deployment_names_the_deployment() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let outer = Layout::default();
        client(&sim, &outer)
            .await
            .submit(&payload("echo", 1, 0))
            .await
            .unwrap();
        let nested = Layout::new(&outer.workers_dir()).unwrap();
        match client(&sim, &nested).await.status().await {
            Err(ClientError::Zk(ZkError::InvalidPath { path, reason })) => {
                assert_eq!(path, outer.workers_dir());
                assert!(
                    reason.contains(&format!("zkdist deployment at {}", outer.root())),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
        // A root merely missing is still said to be missing.
        let elsewhere = Layout::new("/elsewhere").unwrap();
        match client(&sim, &elsewhere).await.status().await {
            Err(error @ ClientError::NoLayout { .. }) => {
                assert!(error.to_string().contains("/elsewhere"), "{error}")
            }
            other => panic!("{other:?}"),
        }
    });
}

/// A `tasks/` something else made: a submit queues into it without laying
/// the rest out (it lays the root out only when `tasks/` is missing), and
/// `status` then says the layout is incomplete, not that a submit would
/// create it. Once laid out (as a master or worker starting there does),
/// the task is there to run.
#[test]
fn status_at_a_root_with_a_stranger_s_tasks_dir_says_the_layout_is_incomplete() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::new("/stranger").unwrap();
        let client = client(&sim, &layout).await;
        for path in [layout.root().to_owned(), layout.tasks_dir()] {
            client
                .session()
                .create(&path, b"", CreateMode::Persistent)
                .await
                .unwrap();
        }
        client.submit(&payload("echo", 1, 0)).await.unwrap();
        match client.status().await {
            Err(error @ ClientError::IncompleteLayout { .. }) => {
                let shown = error.to_string();
                assert!(shown.contains("/stranger is incomplete"), "{shown}");
                assert!(!shown.contains("submitted"), "{shown}");
            }
            other => panic!("{other:?}"),
        }
        layout.ensure_layout(client.session()).await.unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(status.pending_tasks, 1, "{status:?}");
    });
}

#[test]
fn status_counts_workers_assignments_and_tasks() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let client = client(&sim, &layout).await;
        match client.status().await {
            Err(error @ ClientError::NoLayout { .. }) => {
                assert!(error.to_string().contains("/zkdist"), "{error}")
            }
            other => panic!("{other:?}"),
        }

        let tasks: Vec<TaskId> = {
            let mut tasks = Vec::new();
            for n in 0..4 {
                tasks.push(client.submit(&payload("echo", n, 0)).await.unwrap());
            }
            tasks
        };
        let (actor, _actor_events) = sim.connect("actor").await.unwrap();
        let worker = WorkerId::parse("worker-0000000007").unwrap();
        actor
            .create(&layout.worker(&worker), b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        actor
            .create(&layout.master(), b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        actor
            .create(
                &layout.assignment(&worker),
                tasks[1].as_str().as_bytes(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        actor
            .create(
                &layout.result(&tasks[0]),
                &TaskResult::failure("x").encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();

        let status = client.status().await.unwrap();
        assert_eq!(status.master, MasterNode::Held);
        assert_eq!(status.workers, vec![worker.clone()]);
        assert_eq!(
            status.assignments.into_iter().collect::<Vec<_>>(),
            vec![(worker.clone(), tasks[1].clone())]
        );
        assert_eq!(status.finished_tasks, 1);
        assert_eq!(status.assigned_tasks, 1);
        assert_eq!(status.pending_tasks, 2);
        assert_eq!(status.ignored_nodes, 0);
        assert_eq!(status.not_ephemeral, Default::default());
        assert_eq!(status.settled_assignments, Default::default());

        // The assigned task's result is written before its worker releases
        // it: the task counts as finished, not assigned, and the assignment
        // is named as settled, so that the two never contradict each other.
        actor
            .create(
                &layout.result(&tasks[1]),
                &TaskResult::Success { output: vec![] }.encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(
            status.assignments.get(&worker),
            Some(&tasks[1]),
            "the worker has yet to release it"
        );
        assert_eq!(
            (
                status.finished_tasks,
                status.assigned_tasks,
                status.pending_tasks
            ),
            (2, 0, 2)
        );
        assert_eq!(
            status.settled_assignments.into_iter().collect::<Vec<_>>(),
            vec![tasks[1].clone()]
        );

        // A stray persistent node under workers/: taken for a worker by the
        // master, and named as no live worker's by the status.
        let stray = WorkerId::parse("x").unwrap();
        actor
            .create(&layout.worker(&stray), b"", CreateMode::Persistent)
            .await
            .unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(status.workers, vec![worker, stray.clone()]);
        assert_eq!(
            status.not_ephemeral.into_iter().collect::<Vec<_>>(),
            vec![stray]
        );
    });
}

#[test]
fn status_counts_a_queue_it_does_not_list_with_reads_that_do_not_grow_with_it() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let client = client(&sim, &layout).await;
        let submit = |from: u64, count: u64| {
            let payloads: Vec<Vec<u8>> = (from..from + count)
                .map(|n| payload("echo", n, 0))
                .collect();
            let client = &client;
            async move {
                client
                    .submit_many(&payloads, 16)
                    .await
                    .into_iter()
                    .map(Result::unwrap)
                    .collect::<Vec<TaskId>>()
            }
        };
        let tasks = submit(0, 40).await;
        let actor = finish_by_hand(&sim, &layout, &tasks[..10]).await;
        // One assignment to an unfinished task, one to a finished task
        // whose worker has yet to release it, one to a task cancelled
        // (deleted) since, and a stray node with a child among the tasks.
        for (worker, task) in [
            ("worker-0000000001", &tasks[20]),
            ("worker-0000000002", &tasks[0]),
            ("worker-0000000003", &tasks[39]),
        ] {
            let worker = WorkerId::parse(worker).unwrap();
            actor
                .create(
                    &layout.assignment(&worker),
                    task.as_str().as_bytes(),
                    CreateMode::Persistent,
                )
                .await
                .unwrap();
        }
        actor.delete(&layout.task(&tasks[39]), None).await.unwrap();
        let stray = format!("{}/notes", layout.tasks_dir());
        for path in [&stray, &format!("{stray}/draft")] {
            actor
                .create(path, b"", CreateMode::Persistent)
                .await
                .unwrap();
        }

        // Listed: the stray node is found, and its child is no result.
        let listed = client.status_listing_at_most(1000).await.unwrap();
        assert!(listed.task_names_read);
        assert_eq!(
            (
                listed.pending_tasks,
                listed.assigned_tasks,
                listed.finished_tasks,
                listed.ignored_nodes
            ),
            (28, 1, 10, 1)
        );
        assert_eq!(listed.assignments.len(), 3);
        actor.delete(&format!("{stray}/draft"), None).await.unwrap();

        // Counted only: the stray node is taken for a pending task.
        let trace_before = sim.trace().await.len();
        let counted = client.status_listing_at_most(39).await.unwrap();
        let requests = client_reads_since(&sim, trace_before).await;
        assert!(!counted.task_names_read);
        // A sync, the master node, two listings (workers/, assignments/),
        // the three assignments, the stat of tasks/, the count below it,
        // the stat again, the three assigned tasks and the stat of
        // refused/ (missing here).
        assert_eq!(requests.len(), 14, "{requests:#?}");
        assert_eq!(
            (
                counted.pending_tasks,
                counted.assigned_tasks,
                counted.finished_tasks,
                counted.ignored_nodes
            ),
            (29, 1, 10, 0)
        );
        assert_eq!(counted.assignments, listed.assignments);
        assert!(
            !requests
                .iter()
                .any(|line| line.contains("get_children /zkdist/tasks")),
            "{requests:#?}"
        );

        // Ten times the queue, the same requests.
        submit(40, 360).await;
        let trace_before = sim.trace().await.len();
        let counted = client.status_listing_at_most(39).await.unwrap();
        assert_eq!(counted.pending_tasks, 389);
        assert_eq!(
            client_reads_since(&sim, trace_before).await.len(),
            requests.len(),
            "status's requests do not grow with the queue"
        );
    });
}

#[test]
fn status_never_takes_a_task_submitted_during_its_reads_for_a_finished_one() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let client = client(&sim, &layout).await;
        let mut tasks = Vec::new();
        for n in 0..20 {
            tasks.push(client.submit(&payload("echo", n, 0)).await.unwrap());
        }
        finish_by_hand(&sim, &layout, &tasks[..5]).await;

        // Another client submits one task after another while this one
        // reads the status again and again.
        let submitter = submitter_client(&sim, &layout).await;
        let submitting = tokio::spawn(async move {
            for n in 20..420 {
                submitter.submit(&payload("echo", n, 0)).await.unwrap();
            }
        });
        let mut statuses = 0;
        while !submitting.is_finished() {
            let status = client.status_listing_at_most(0).await.unwrap();
            assert!(
                status.finished_tasks <= 5,
                "status {statuses}: {} finished, of 5 results",
                status.finished_tasks
            );
            statuses += 1;
        }
        submitting.await.unwrap();
        assert!(
            statuses > 10,
            "the reads overlapped the submissions {statuses} times"
        );
        let settled = client.status_listing_at_most(0).await.unwrap();
        assert_eq!((settled.pending_tasks, settled.finished_tasks), (415, 5));
    });
}

#[test]
fn status_never_counts_more_finished_tasks_than_there_are_while_they_are_cleaned_up() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let client = client(&sim, &layout).await;
        let total = 300;
        let mut tasks = Vec::new();
        for n in 0..total {
            tasks.push(client.submit(&payload("echo", n, 0)).await.unwrap());
        }
        finish_by_hand(&sim, &layout, &tasks).await;
        // As many unfinished, so that the count of finished tasks is not
        // held down by the count of tasks.
        for n in total..2 * total {
            client.submit(&payload("echo", n, 0)).await.unwrap();
        }

        // Another client cleans the finished tasks up, one after another,
        // while this one reads the status again and again. Each cleanup
        // counted here is done, so the results left when a status starts
        // are at most `total` less the count then.
        let cleaner = submitter_client(&sim, &layout).await;
        let cleaned = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let cleaning = tokio::spawn({
            let cleaned = std::sync::Arc::clone(&cleaned);
            async move {
                for task in &tasks {
                    cleaner.cleanup(task).await.unwrap();
                    cleaned.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        });
        let mut statuses = 0;
        while !cleaning.is_finished() {
            let results_at_most =
                total as usize - cleaned.load(std::sync::atomic::Ordering::SeqCst);
            let status = client.status_listing_at_most(0).await.unwrap();
            assert!(
                status.finished_tasks <= results_at_most,
                "status {statuses}: {} finished, of at most {results_at_most} results",
                status.finished_tasks
            );
            statuses += 1;
        }
        cleaning.await.unwrap();
        assert!(
            statuses > 10,
            "the reads overlapped the cleanups {statuses} times"
        );
        let settled = client.status_listing_at_most(0).await.unwrap();
        assert_eq!(
            (settled.pending_tasks, settled.finished_tasks),
            (total as usize, 0)
        );
    });
}

/// A client on a session of its own, to submit from another task.
async fn submitter_client(
    sim: &SimZk,
    layout: &Layout,
) -> zkdist_coord::Client<zkdist_sim::SimSession> {
    let (zk, events) = sim
        .connect("submitter")
        .await
        .expect("the submitter connects");
    zkdist_coord::Client::new(zk, events, layout.clone())
}

/// Writes a (failure) result for each task, as a worker would, on a
/// session of its own, which it returns for more writes by hand.
async fn finish_by_hand(sim: &SimZk, layout: &Layout, tasks: &[TaskId]) -> zkdist_sim::SimSession {
    let (actor, _events) = sim.connect("actor").await.unwrap();
    for task in tasks {
        actor
            .create(
                &layout.result(task),
                &TaskResult::failure("x").encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
    }
    actor
}

/// The requests the session named `client` sent after trace line `from`.
async fn client_reads_since(sim: &SimZk, from: usize) -> Vec<String> {
    sim.trace()
        .await
        .into_iter()
        .skip(from)
        .filter(|line| line.contains("] read client "))
        .collect()
}

#[test]
fn status_skips_and_counts_nodes_that_are_not_zkdists() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let layout = Layout::default();
        let client = client(&sim, &layout).await;
        let task = client.submit(&payload("echo", 1, 0)).await.unwrap();
        let (actor, _actor_events) = sim.connect("actor").await.unwrap();
        let worker = WorkerId::parse("worker-0000000003").unwrap();
        let idle = WorkerId::parse("worker-0000000004").unwrap();
        for path in [layout.worker(&worker), layout.worker(&idle)] {
            actor
                .create(&path, b"", CreateMode::Ephemeral)
                .await
                .unwrap();
        }
        actor
            .create(
                &layout.assignment(&worker),
                task.as_str().as_bytes(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        // A stray node under tasks/ and one under assignments/ (whose
        // empty data is no task name), and an assignment whose data is not
        // a task name. (Any node name is a valid worker id.)
        for stray in [
            format!("{}/notes", layout.assignments_dir()),
            format!("{}/notes", layout.tasks_dir()),
        ] {
            actor
                .create(&stray, b"", CreateMode::Persistent)
                .await
                .unwrap();
        }
        actor
            .create(
                &layout.assignment(&idle),
                b"not a task",
                CreateMode::Persistent,
            )
            .await
            .unwrap();

        let status = client.status().await.unwrap();
        assert_eq!(status.workers, vec![worker.clone(), idle]);
        assert_eq!(
            status.assignments.into_iter().collect::<Vec<_>>(),
            vec![(worker, task)]
        );
        assert_eq!(status.assigned_tasks, 1);
        assert_eq!(status.pending_tasks, 0);
        assert_eq!(
            status.ignored_nodes, 3,
            "a stray task name and two assignments without a task name"
        );
    });
}

/// A root under one of the nodes another deployment keeps under its root is
/// refused with an error naming that deployment, before anything is
/// created: under `workers/`, its directories would be taken for workers
/// that hold tasks and never run them; as its `master`, for a master's
/// claim nobody holds, which no candidate could ever take over.
#[test]
fn a_root_inside_another_deployment_is_refused_before_anything_is_laid_out() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let (zk, _events) = sim.connect("setup").await.unwrap();
        Layout::default().ensure_layout(&zk).await.unwrap();
        for nested in [
            "/zkdist/workers",
            "/zkdist/tasks/inner",
            "/zkdist/assignments/a/b",
            "/zkdist/refused/r",
            "/zkdist/master",
            "/zkdist/master/inner",
        ] {
            let layout = Layout::new(nested).unwrap();
            match layout.ensure_layout(&zk).await {
                Err(ZkError::InvalidPath { path, reason }) => {
                    assert_eq!(path, nested);
                    assert!(
                        reason.contains("zkdist deployment at /zkdist"),
                        "{nested}: {reason}"
                    );
                }
                other => panic!("{nested}: expected InvalidPath, got {other:?}"),
            }
        }
        // Nothing was created: the deployment still has no worker.
        let (workers, _) = zk.get_children("/zkdist/workers", Watch::No).await.unwrap();
        assert_eq!(workers, Vec::<String>::new());
        for never_made in ["/zkdist/tasks/inner", "/zkdist/master"] {
            assert_eq!(zk.exists(never_made, Watch::No).await.unwrap(), None);
        }
        // A client on such a root says so on its first submit.
        let nested_client = client(&sim, &Layout::new("/zkdist/workers").unwrap()).await;
        let refused = nested_client.submit(&payload("echo", 1, 0)).await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|error| error.to_string().contains("zkdist deployment at /zkdist")),
            "{refused:?}"
        );
    });
}

/// Beside another deployment's records, or under a path that is no
/// deployment, a root is laid out as usual.
#[test]
fn a_root_beside_another_deployment_is_laid_out() {
    run_sim(0, async {
        let sim = SimZk::start(SimConfig::default());
        let (zk, _events) = sim.connect("setup").await.unwrap();
        Layout::default().ensure_layout(&zk).await.unwrap();
        // `/app` has an `epoch` and a `tasks` node, but it is no deployment.
        for node in ["/app", "/app/epoch", "/app/tasks"] {
            zk.create(node, b"", CreateMode::Persistent).await.unwrap();
        }
        for root in [
            "/zkdist/staging",
            "/zkdist/ids/inner",
            "/elsewhere/workers",
            "/zkdist-2",
            "/app/tasks/inner",
        ] {
            Layout::new(root).unwrap().ensure_layout(&zk).await.unwrap();
            assert!(
                zk.exists(&format!("{root}/epoch"), Watch::No)
                    .await
                    .unwrap()
                    .is_some(),
                "{root} laid out"
            );
        }
    });
}
