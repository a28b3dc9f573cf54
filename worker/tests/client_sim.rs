//! The client's writes after a connection loss, on the simulator: a
//! retried submit never creates a second task, a cleanup whose reply was
//! lost is recognised as done, and reads are simply sent again.
//!
//! These live with the worker's tests because they need the simulator,
//! which `zkdist-coord` (the client's crate) cannot depend on, not even for
//! its tests: the simulator depends on it.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use zkdist_coord::{
    Client, ClientError, Coordinator, CreateMode, Layout, MAX_REPLY_BYTES, SessionState, TaskId,
    TaskResult, TaskToken,
};
use zkdist_sim::{Latency, SimSession, SimZk};

use common::*;

const LATENCY_MS: u64 = 10;

/// The task names under `tasks/`, sorted.
async fn tasks(sim: &SimZk, layout: &Layout) -> Vec<String> {
    let dir = layout.tasks_dir();
    sim.inspect(move |tree| {
        tree.children(&dir)
            .unwrap_or_default()
            .into_iter()
            .map(str::to_owned)
            .collect()
    })
    .await
}

#[test]
fn submitted_tasks_carry_distinct_tokens_and_keep_fifo_order() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 1 }).await;
        let mut submitted = Vec::new();
        for n in 0..5 {
            let task = setup
                .client
                .submit(&task_payload("echo", &n.to_string()))
                .await
                .unwrap();
            submitted.push(task);
        }
        let tokens: BTreeSet<TaskToken> = submitted
            .iter()
            .map(|task| task.token().expect("a protected name"))
            .collect();
        assert_eq!(tokens.len(), 5, "{submitted:?}");
        let mut sorted = submitted.clone();
        sorted.sort();
        assert_eq!(sorted, submitted, "task order is submission order");
        // The token is the session's and the submission's: the first
        // submission of this session.
        let session = setup.client.session().session_id();
        let first_token = TaskToken::for_submission(session, 0);
        assert_eq!(submitted[0].token(), Some(first_token));
        assert_eq!(
            setup.layout.task(&submitted[0]),
            format!(
                "{}{:010}",
                setup.layout.protected_task_prefix(first_token),
                submitted[0].sequence()
            )
        );
        assert_eq!(
            setup.layout.protected_task_prefix(first_token),
            format!("/zkdist/tasks/task-{first_token}-")
        );
        // Names no longer sort in submission order (the token comes
        // first); task ids do.
        let mut stored: Vec<TaskId> = tasks(&setup.sim, &setup.layout)
            .await
            .iter()
            .map(|name| TaskId::parse(name).unwrap())
            .collect();
        stored.sort();
        assert_eq!(stored, submitted);
    });
}

#[test]
fn a_submit_applied_but_whose_reply_was_lost_finds_its_task() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let session = setup.client.session().session_id();
        let (setup, client) = take_client(setup);
        let submitting =
            tokio::spawn(async move { client.submit(&task_payload("echo", "one")).await });
        setup.sim.hold(session).await;
        let dir = setup.layout.tasks_dir();
        until_tree(&setup.sim, "the task", move |tree| {
            tree.children(&dir).is_some_and(|names| !names.is_empty())
        })
        .await;
        setup.sim.cut(session, Duration::from_secs(1)).await;
        setup.sim.release(session).await;

        let task = submitting.await.unwrap().unwrap();
        assert_eq!(tasks(&setup.sim, &setup.layout).await, [task.to_string()]);
        let trace = setup.sim.trace().await;
        assert_eq!(
            count_applied(&trace, "client create /zkdist/tasks/task-"),
            1,
            "created once:\n{}",
            trace.join("\n")
        );
        assert_eq!(count_lines(&trace, "fail client create"), 1, "reply lost");
    });
}

/// A cut while the create is in flight: for some seeds it had reached the
/// server, for others not. Either way exactly one task exists afterwards,
/// and it is the one `submit` returns.
#[test]
fn a_submit_cut_in_flight_creates_exactly_one_task() {
    let mut outcomes = BTreeSet::new();
    for seed in 0..16 {
        let applied_first = run_seeded(seed, async move {
            let setup = setup_seeded(seed, Latency::Fixed { ms: LATENCY_MS }).await;
            let session = setup.client.session().session_id();
            let (setup, client) = take_client(setup);
            let submitting =
                tokio::spawn(async move { client.submit(&task_payload("echo", "one")).await });
            tokio::time::sleep(Duration::from_millis(LATENCY_MS / 2)).await;
            setup.sim.cut(session, Duration::from_secs(1)).await;

            let task = submitting.await.unwrap().unwrap();
            assert_eq!(
                tasks(&setup.sim, &setup.layout).await,
                [task.to_string()],
                "seed {seed}"
            );
            let trace = setup.sim.trace().await;
            assert_eq!(
                count_applied(&trace, "client create /zkdist/tasks/task-"),
                1,
                "seed {seed}: created once"
            );
            let never_arrived = count_lines(&trace, "lost client create /zkdist/tasks/task-");
            assert!(never_arrived <= 1, "seed {seed}");
            never_arrived == 0
        });
        outcomes.insert(applied_first);
    }
    assert_eq!(
        outcomes,
        BTreeSet::from([false, true]),
        "both outcomes happen for some seed"
    );
}

/// Takes `setup`'s client out, to move it into a task of its own; the
/// rest of the setup stays usable.
fn take_client(setup: Setup) -> (Setup, Client<SimSession>) {
    let Setup {
        sim,
        layout,
        master,
        client,
    } = setup;
    let (zk, events) = client.into_parts();
    let moved = Client::new(zk.clone(), events, layout.clone());
    // A stand-in with no events: the test only reads its session id.
    let (_, no_events) = tokio::sync::mpsc::unbounded_channel();
    let stand_in = Client::new(zk, no_events, layout.clone());
    (
        Setup {
            sim,
            layout,
            master,
            client: stand_in,
        },
        moved,
    )
}

#[test]
fn a_cleanup_applied_but_whose_reply_was_lost_counts_as_done() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let task = setup
            .client
            .submit(&task_payload("echo", "x"))
            .await
            .unwrap();
        setup
            .master
            .create(
                &setup.layout.result(&task),
                &TaskResult::Success { output: vec![] }.encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        assert!(setup.client.wait(&task).await.unwrap().is_success());

        let session = setup.client.session().session_id();
        let (setup, client) = take_client(setup);
        let cleaning = {
            let task = task.clone();
            tokio::spawn(async move { client.cleanup(&task).await })
        };
        setup.sim.hold(session).await;
        let task_path = setup.layout.task(&task);
        until_tree(&setup.sim, "the task's deletion", move |tree| {
            !tree.exists(&task_path)
        })
        .await;
        setup.sim.cut(session, Duration::from_secs(1)).await;
        setup.sim.release(session).await;
        assert_eq!(cleaning.await.unwrap(), Ok(()));
        let trace = setup.sim.trace().await;
        assert_eq!(count_lines(&trace, "fail client multi"), 1, "reply lost");
        assert_eq!(count_applied(&trace, "client multi"), 1, "sent once");
    });
}

/// A wait on a session that has ended says so and names the task, whether
/// a request or the event stream meets the end first.
#[test]
fn a_wait_on_an_expired_session_names_the_task() {
    run_sim(async {
        let mut setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let task = setup
            .client
            .submit(&task_payload("echo", "x"))
            .await
            .unwrap();
        setup.sim.expire(setup.client.session().session_id()).await;
        match setup.client.wait(&task).await {
            Err(error @ ClientError::SessionEnded { .. }) => {
                assert!(
                    matches!(
                        &error,
                        ClientError::SessionEnded { task: ended, state: Some(SessionState::Expired) }
                            if *ended == task
                    ),
                    "{error:?}"
                );
                assert_eq!(
                    error.to_string(),
                    format!("the session ended (expired) while waiting for {task}")
                );
            }
            other => panic!("{other:?}"),
        }
    });
}

#[test]
fn wait_and_status_read_again_after_a_connection_loss() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let task = setup
            .client
            .submit(&task_payload("echo", "x"))
            .await
            .unwrap();
        let session = setup.client.session().session_id();
        let (setup, mut client) = take_client(setup);
        let waiting = {
            let task = task.clone();
            tokio::spawn(async move {
                let result = client.wait(&task).await;
                (client, result)
            })
        };
        // Cut while the wait's first listing is in flight or answered:
        // either way it fails or its watch is re-sent, and the wait goes on.
        tokio::time::sleep(Duration::from_millis(LATENCY_MS / 2)).await;
        setup.sim.cut(session, Duration::from_secs(1)).await;
        setup
            .master
            .create(
                &setup.layout.result(&task),
                &TaskResult::Success {
                    output: b"x".to_vec(),
                }
                .encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        let (client, result) = tokio::time::timeout(STEP_TIMEOUT, waiting)
            .await
            .expect("the wait ends")
            .unwrap();
        assert_eq!(
            result,
            Ok(TaskResult::Success {
                output: b"x".to_vec()
            })
        );
        let trace = setup.sim.trace().await;
        assert!(
            count_lines(&trace, "fail client get_children") >= 1,
            "the listing failed with the cut:\n{}",
            trace.join("\n")
        );

        // Status: a read in flight at a cut is sent again.
        let status = tokio::spawn(async move { client.status().await });
        tokio::time::sleep(Duration::from_millis(LATENCY_MS / 2)).await;
        setup.sim.cut(session, Duration::from_secs(1)).await;
        let status = status.await.unwrap().unwrap();
        assert_eq!(status.finished_tasks, 1);
        assert_eq!(status.pending_tasks, 0);
        let trace = setup.sim.trace().await;
        assert_eq!(
            count_lines(&trace, &format!("fail client sync {}", setup.layout.root())),
            1,
            "the status's first request, its sync, failed with the cut:\n{}",
            trace.join("\n")
        );
    });
}

/// A wait on a task that is already finished arms no watch on it: one
/// would stay on the server, and in the session, until the task node
/// changes, which may be never. A wait on a task still running does.
#[test]
fn a_wait_on_a_finished_task_leaves_no_watch_behind() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let finished = setup
            .client
            .submit(&task_payload("echo", "done"))
            .await
            .unwrap();
        let running = setup
            .client
            .submit(&task_payload("echo", "later"))
            .await
            .unwrap();
        let result = TaskResult::Success {
            output: b"x".to_vec(),
        };
        setup
            .master
            .create(
                &setup.layout.result(&finished),
                &result.encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        let (setup, mut client) = take_client(setup);
        assert_eq!(client.wait(&finished).await, Ok(result.clone()));
        let waiting = {
            let running = running.clone();
            tokio::spawn(async move {
                let outcome = client.wait(&running).await;
                (client, outcome)
            })
        };
        tokio::time::sleep(Duration::from_millis(10 * LATENCY_MS)).await;
        setup
            .master
            .create(
                &setup.layout.result(&running),
                &result.encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        let (_client, outcome) = tokio::time::timeout(STEP_TIMEOUT, waiting)
            .await
            .expect("the wait ends")
            .unwrap();
        assert_eq!(outcome, Ok(result));

        let trace = setup.sim.trace().await;
        let listings = |task: &TaskId| -> Vec<String> {
            let listing = format!("client get_children {} ", setup.layout.task(task));
            trace
                .iter()
                .filter(|line| line.starts_with('[') && line.contains(&listing))
                .filter(|line| !line.contains("deliver"))
                .cloned()
                .collect()
        };
        let of_finished = listings(&finished);
        assert!(!of_finished.is_empty(), "{}", trace.join("\n"));
        assert!(
            of_finished.iter().all(|line| !line.contains(" watch ")),
            "the finished task was listed without a watch:\n{}",
            of_finished.join("\n")
        );
        assert!(
            listings(&running)
                .iter()
                .any(|line| line.contains(" watch ")),
            "the running task was listed with a watch:\n{}",
            trace.join("\n")
        );
    });
}

/// A `tasks/` listing over the client's reply limit fails as a lost
/// connection (the client drops the frame), and would every time it was
/// sent again. The token lookup and the status fail at the first refusal,
/// with an error naming the listing, its size and the limit, rather than
/// send it again.
#[test]
fn an_oversized_tasks_listing_fails_at_once_with_a_clear_error() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: 1 }).await;
        let tasks_dir = setup.layout.tasks_dir();
        // Foreign names, long ones, so that few nodes pass the limit.
        let name_bytes = 1_000;
        let nodes = MAX_REPLY_BYTES / name_bytes + 10;
        for n in 0..nodes {
            let name = format!("{n:06}{}", "x".repeat(name_bytes - 6));
            setup
                .master
                .create(&format!("{tasks_dir}/{name}"), b"", CreateMode::Persistent)
                .await
                .unwrap();
        }
        let token = TaskToken::for_submission(setup.client.session().session_id(), 0);
        let error = setup.client.find_submission(token).await.unwrap_err();
        match &error {
            ClientError::ListingOverLimit { path, .. } => assert_eq!(path, &tasks_dir),
            other => panic!("{other:?}"),
        }
        let message = error.to_string();
        assert!(message.contains("/zkdist/tasks"), "{message}");
        assert!(message.contains("-byte limit"), "{message}");
        assert!(message.contains("--max-reply-bytes"), "{message}");
        let trace = setup.sim.trace().await;
        assert_eq!(
            count_lines(&trace, "get_children /zkdist/tasks -> refused"),
            1,
            "refused once, and not sent again"
        );
        // So does the status, which lists so few (long) names.
        assert!(matches!(
            setup.client.status().await,
            Err(ClientError::ListingOverLimit { .. })
        ));
    });
}

/// The status lists `workers/` and `assignments/` too: over the reply
/// limit, each fails in the same way, at once, naming the directory.
#[test]
fn a_status_gives_up_on_an_oversized_workers_or_assignments_listing() {
    for dir in ["workers", "assignments"] {
        run_sim(async {
            let setup = setup(Latency::Fixed { ms: 1 }).await;
            let listed = format!("{}/{dir}", setup.layout.root());
            let name_bytes = 1_000;
            for n in 0..MAX_REPLY_BYTES / name_bytes + 10 {
                let name = format!("{n:06}{}", "x".repeat(name_bytes - 6));
                setup
                    .master
                    .create(&format!("{listed}/{name}"), b"", CreateMode::Persistent)
                    .await
                    .unwrap();
            }
            match setup.client.status().await {
                Err(ClientError::ListingOverLimit { path, .. }) => assert_eq!(path, listed),
                other => panic!("{dir}: {other:?}"),
            }
            let trace = setup.sim.trace().await;
            assert_eq!(
                count_lines(&trace, &format!("get_children {listed} -> refused")),
                1,
                "{dir}: refused once, and not sent again"
            );
        });
    }
}

/// `submit_many` sends its creates back to back: the batch takes one
/// round trip per window rather than one per task, and the tasks are
/// queued in the payloads' order, each with a token of its own.
#[test]
fn submit_many_pipelines_its_creates_and_keeps_the_payloads_order() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        // Lay out first, so that the batch's creates are all that is timed.
        setup
            .client
            .submit(&task_payload("echo", "first"))
            .await
            .unwrap();
        let payloads: Vec<Vec<u8>> = (0..20)
            .map(|n| task_payload("echo", &n.to_string()))
            .collect();
        let started = tokio::time::Instant::now();
        let outcomes = setup.client.submit_many(&payloads, 8).await;
        let elapsed = started.elapsed();
        let submitted: Vec<TaskId> = outcomes.into_iter().map(Result::unwrap).collect();
        // Three windows of up to 8 creates, one round trip (two latencies)
        // each; one create at a time would take 20 round trips.
        assert!(
            elapsed <= Duration::from_millis(3 * 2 * LATENCY_MS + 5),
            "{elapsed:?}"
        );
        let mut sorted = submitted.clone();
        sorted.sort();
        assert_eq!(sorted, submitted, "queued in the payloads' order");
        let tokens: BTreeSet<TaskToken> = submitted.iter().filter_map(TaskId::token).collect();
        assert_eq!(tokens.len(), 20);
        // The tokens continue the client's count: a later submit repeats
        // none of them.
        let after = setup
            .client
            .submit(&task_payload("echo", "after"))
            .await
            .unwrap();
        assert!(!tokens.contains(&after.token().unwrap()));
        assert!(after > submitted[19]);
        // Each task holds its own payload.
        for (task, payload) in submitted.iter().zip(&payloads) {
            let (data, _) = setup
                .master
                .get_data(&setup.layout.task(task), zkdist_coord::Watch::No)
                .await
                .unwrap();
            assert_eq!(&data, payload, "{task}");
        }
    });
}

/// A refused payload gets its error, and nothing is sent for it; the
/// others are queued. A batch on a tree with no layout lays it out once.
#[test]
fn submit_many_refuses_bad_payloads_alone_and_lays_out_a_missing_tree() {
    run_sim(async {
        let sim = SimZk::start(zkdist_sim::SimConfig {
            seed: SEED,
            latency: Latency::Fixed { ms: 1 },
            ..zkdist_sim::SimConfig::default()
        });
        let layout = Layout::default();
        let (zk, events) = sim.connect("client").await.unwrap();
        let client = Client::new(zk, events, layout.clone());
        let payloads = vec![
            task_payload("echo", "a"),
            b"not json".to_vec(),
            task_payload("echo", "c"),
        ];
        let outcomes = client.submit_many(&payloads, 4).await;
        assert!(
            matches!(outcomes[1], Err(ClientError::InvalidPayload(_))),
            "{outcomes:?}"
        );
        let a = outcomes[0].clone().unwrap();
        let c = outcomes[2].clone().unwrap();
        assert!(a < c, "queued in order after the layout was made");
        assert_eq!(tasks(&sim, &layout).await.len(), 2);
        let trace = sim.trace().await;
        let creates = |outcome: &str| {
            trace
                .iter()
                .filter(|line| {
                    line.contains("zxid=")
                        && line.contains("client create /zkdist/tasks/task-")
                        && line.contains(outcome)
                })
                .count()
        };
        // Both creates went out together and met the missing parent; after
        // the one lay-out, both were made.
        assert_eq!(creates("-> NoNode"), 2, "{}", trace.join("\n"));
        assert_eq!(creates("-> /zkdist/tasks/task-"), 2, "{}", trace.join("\n"));
        assert_eq!(
            count_applied(&trace, "client create /zkdist/tasks persistent"),
            1
        );
    });
}

/// A cut while a batch is in flight: whichever creates reached the server,
/// every payload ends up as exactly one task, found by its token rather
/// than created again, and the batch sends one listing to find out.
#[test]
fn submit_many_cut_in_flight_creates_each_task_exactly_once() {
    let mut applied_before_cut = BTreeSet::new();
    for seed in 0..16 {
        let applied = run_seeded(seed, async move {
            // The setup laid the tree out already.
            let setup = setup_seeded(seed, Latency::Fixed { ms: LATENCY_MS }).await;
            let session = setup.client.session().session_id();
            let (setup, client) = take_client(setup);
            let payloads: Vec<Vec<u8>> = (0..10)
                .map(|n| task_payload("echo", &n.to_string()))
                .collect();
            let batch = payloads.clone();
            let submitting = tokio::spawn(async move { client.submit_many(&batch, 10).await });
            tokio::time::sleep(Duration::from_millis(LATENCY_MS / 2)).await;
            setup.sim.cut(session, Duration::from_secs(1)).await;

            let submitted: Vec<TaskId> = submitting
                .await
                .unwrap()
                .into_iter()
                .map(|outcome| outcome.unwrap_or_else(|error| panic!("seed {seed}: {error}")))
                .collect();
            let mut stored = tasks(&setup.sim, &setup.layout).await;
            stored.sort();
            let mut expected: Vec<String> = submitted.iter().map(ToString::to_string).collect();
            expected.sort();
            assert_eq!(stored.len(), 10, "seed {seed}: one task per payload");
            for name in &expected {
                assert!(
                    stored.contains(name),
                    "seed {seed}: {name} returned but not stored"
                );
            }
            let tokens: BTreeSet<TaskToken> = submitted.iter().filter_map(TaskId::token).collect();
            assert_eq!(tokens.len(), 10, "seed {seed}");
            for (task, payload) in submitted.iter().zip(&payloads) {
                let (data, _) = setup
                    .master
                    .get_data(&setup.layout.task(task), zkdist_coord::Watch::No)
                    .await
                    .unwrap();
                assert_eq!(&data, payload, "seed {seed}: {task}");
            }
            let trace = setup.sim.trace().await;
            assert_eq!(
                count_applied(&trace, "client create /zkdist/tasks/task-"),
                10,
                "seed {seed}: each created once"
            );
            assert_eq!(
                count_lines(&trace, "read client get_children /zkdist/tasks "),
                1,
                "seed {seed}: one listing finds them all"
            );
            // Creates applied whose reply the cut lost (found by their
            // token), and creates the cut lost on the way (created again).
            (
                count_lines(&trace, "fail client create /zkdist/tasks/task-"),
                count_lines(&trace, "lost client create /zkdist/tasks/task-"),
            )
        });
        applied_before_cut.insert(applied);
    }
    assert!(
        applied_before_cut.iter().any(|&(found, _)| found > 0)
            && applied_before_cut.iter().any(|&(_, lost)| lost > 0),
        "for some seeds creates were applied before the cut, for some lost: \
         {applied_before_cut:?}"
    );
}

/// A task marked refused while a wait is on it ends that wait with the
/// refusal: first `refused/` is made (the wait watched for it), then the
/// mark (the wait then watches `refused/`'s children). `status` counts the
/// task refused, not pending.
#[test]
fn a_wait_hears_of_a_refusal_marked_while_it_waits_and_status_counts_it() {
    run_sim(async {
        let setup = setup(Latency::Fixed { ms: LATENCY_MS }).await;
        let refused = setup
            .client
            .submit(&task_payload("echo", "refused"))
            .await
            .unwrap();
        setup
            .client
            .submit(&task_payload("echo", "waiting"))
            .await
            .unwrap();
        let (setup, mut client) = take_client(setup);
        let waiting = {
            let task = refused.clone();
            tokio::spawn(async move { client.wait(&task).await })
        };
        tokio::time::sleep(Duration::from_millis(10 * LATENCY_MS)).await;
        setup
            .master
            .create(&setup.layout.refused_dir(), b"", CreateMode::Persistent)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(10 * LATENCY_MS)).await;
        assert!(!waiting.is_finished(), "no mark yet");
        let mark = setup.layout.refused(&refused);
        setup
            .master
            .create(
                &mark,
                &TaskResult::failure("not authorised").encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the wait ends once the task is marked refused");
        match ended.unwrap() {
            Err(error @ ClientError::ResultRefused { .. }) => {
                assert_eq!(
                    error,
                    ClientError::ResultRefused {
                        task: refused.clone(),
                        reason: "not authorised".into(),
                        mark: mark.clone(),
                    }
                );
                let text = error.to_string();
                assert!(
                    text.contains(refused.as_str()) && text.contains(&mark),
                    "{text}"
                );
            }
            other => panic!("expected the refusal, got {other:?}"),
        }
        // A mark whose task is gone does not count.
        let gone = TaskId::from_sequence(999);
        setup
            .master
            .create(
                &setup.layout.refused(&gone),
                &TaskResult::failure("long ago").encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        let counts = |status: zkdist_coord::Status| {
            (
                status.pending_tasks,
                status.refused_tasks,
                status.finished_tasks,
            )
        };
        assert_eq!(counts(setup.client.status().await.unwrap()), (1, 1, 0));

        // A refused task is cleaned up with its mark.
        setup.client.cleanup(&refused).await.unwrap();
        let (task_path, mark_path) = (setup.layout.task(&refused), mark);
        assert!(
            !setup
                .sim
                .inspect(move |tree| tree.exists(&task_path) || tree.exists(&mark_path))
                .await
        );
        assert_eq!(counts(setup.client.status().await.unwrap()), (1, 0, 0));
    });
}
