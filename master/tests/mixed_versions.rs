//! A rolling upgrade on the simulator: a worker older than inline payloads
//! (it registers with empty data and reads its assignment's whole data as
//! a task name) serves the same master as this build's workers. The master
//! reads each worker's registration and puts payloads inline only for
//! workers that say they read them, so the old worker is given names and
//! every task still gets its result.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use zkdist_coord::{
    AddWatchMode, Coordinator, CreateMode, Event, EventStream, Layout, Op, TaskId, Watch,
    WatchKind, WorkerId, path,
};
use zkdist_sim::{Latency, SimSession, SimZk};

use common::*;

const TASKS: u64 = 40;

/// What the old worker saw: the assignment data it read, in order.
struct OldWorkerLog {
    assignments: Vec<Vec<u8>>,
}

/// The worker of a build before inline payloads, in protocol steps: an id
/// from `ids/`, a persistent watch on its assignment, a registration with
/// empty data; then, for every assignment, the data read as a task name,
/// the result written and the assignment deleted. It serves `tasks`
/// assignments, then stops.
async fn old_worker(
    zk: SimSession,
    mut events: EventStream,
    layout: Layout,
    tasks: usize,
) -> OldWorkerLog {
    let id_path = zk
        .create(
            &layout.worker_id_prefix(),
            b"",
            CreateMode::EphemeralSequential,
        )
        .await
        .expect("an id");
    let worker = WorkerId::parse(path::name(&id_path)).expect("a worker id");
    let assignment = layout.assignment(&worker);
    zk.add_watch(&assignment, AddWatchMode::Persistent)
        .await
        .expect("the assignment watch");
    zk.create(&layout.worker(&worker), b"", CreateMode::Ephemeral)
        .await
        .expect("the registration");
    let mut log = OldWorkerLog {
        assignments: Vec::new(),
    };
    while log.assignments.len() < tasks {
        let event = events.recv().await.expect("the session lives");
        let Event::Watch(event) = event else { continue };
        if event.kind != WatchKind::NodeCreated || event.path != assignment {
            continue;
        }
        let (data, stat) = zk
            .get_data(&assignment, Watch::No)
            .await
            .expect("the assignment is there until this worker deletes it");
        log.assignments.push(data.clone());
        // The old format: the whole data is the task's name.
        let name = String::from_utf8(data).expect("a task name is UTF-8");
        let task = TaskId::parse(&name).expect("the old worker reads a bare task name");
        let (payload, _) = zk
            .get_data(&layout.task(&task), Watch::No)
            .await
            .expect("the task is there");
        let n = payload_number(&payload);
        zk.multi(vec![
            Op::Create {
                path: layout.result(&task),
                data: expected_result("echo", n).encode(),
                mode: CreateMode::Persistent,
            },
            Op::Delete {
                path: assignment.clone(),
                version: Some(stat.version),
            },
        ])
        .await
        .expect("the completion");
    }
    log
}

fn payload_number(payload: &[u8]) -> u64 {
    zkdist_coord::TaskPayload::decode(payload)
        .expect("a payload")
        .fields["n"]
        .as_u64()
        .expect("a number")
}

#[test]
fn an_old_worker_is_given_task_names_and_every_task_finishes() {
    run_sim(11, async {
        let sim = SimZk::start(sim_config(11, Latency::Fixed { ms: 1 }));
        let layout = Layout::default();
        let master = start_master(&sim, "master", &layout).await;
        let (zk, events) = sim.connect("old").await.unwrap();
        let old = tokio::spawn(old_worker(zk, events, layout.clone(), 5));
        let new = start_worker(&sim, "new", &layout, TestHandler).await;
        let mut client = client(&sim, &layout).await;
        // Tasks that take a while, submitted at once: they queue, and the
        // master reads their payloads ahead for inline assignments.
        let mut submitted = Vec::new();
        for n in 0..TASKS {
            submitted.push((n, client.submit(&payload("echo", n, 2_000)).await.unwrap()));
        }
        for (n, task) in &submitted {
            let result = client.wait(task).await.expect("every task finishes");
            assert_eq!(result, expected_result("echo", *n), "{task}");
        }

        let log = tokio::time::timeout(Duration::from_secs(600), old)
            .await
            .expect("the old worker is given its 5 tasks")
            .expect("the old worker does not panic");
        assert_eq!(log.assignments.len(), 5);
        for data in &log.assignments {
            assert!(
                !data.contains(&b'\n'),
                "the old worker was given an inline payload: {:?}",
                String::from_utf8_lossy(data)
            );
        }
        let trace = sim.trace().await;
        // The gate was tested: the master had read ahead the payload of a
        // task it then gave the old worker by name.
        // Read alone (`get_data <path>`) or in a batch (`get_data_many
        // [<path>, <path>]`).
        let read_ahead: BTreeSet<&str> = trace
            .iter()
            .filter(|line| line.contains(" read master get_data"))
            .flat_map(|line| line.split("/zkdist/tasks/").skip(1))
            .filter_map(|rest| rest.split([' ', ',', ']']).next())
            .collect();
        assert!(
            log.assignments
                .iter()
                .any(|data| read_ahead.contains(std::str::from_utf8(data).unwrap())),
            "no task whose payload was read ahead went to the old worker"
        );
        // This build's worker did get payloads inline: assignments it read
        // hold more than the 32-byte task name.
        let inline_to_new = trace
            .iter()
            .filter_map(|line| {
                line.split(" new reply get_data /zkdist/assignments/")
                    .nth(1)
            })
            .filter_map(|rest| {
                rest.split(" -> ")
                    .nth(1)?
                    .split('B')
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .filter(|bytes| *bytes > 32)
            .count();
        assert!(
            inline_to_new > 0,
            "no inline assignment reached the new worker"
        );
        let (outcome, _) = new.stop().await;
        outcome.expect("the new worker stops cleanly");
        let (outcome, _) = master.stop().await;
        outcome.expect("the master stops cleanly");
    });
}
