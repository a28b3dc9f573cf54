//! Tasks and workers already exist when the master starts: three workers
//! are registered and five tasks submitted; an earlier master (and a
//! worker of its time) left task 0 finished (it has a result) and task 1
//! assigned to the first worker, which is running it.
//!
//! What must hold: the new master adopts all of it before its first round:
//! task 0 is not run again, task 1 stays with the first worker, and the
//! three waiting tasks go out oldest first to the two idle workers and
//! then to whoever frees up. Every task finishes exactly once.

use std::time::Duration;

use zkdist_coord::{Coordinator, CreateMode, Op, TaskId, Watch, WorkerId, path};

use super::script::{find, rounds_assigning, run, settle};
use crate::handler::expected_result;
use crate::harness::RunReport;

pub fn run_scenario(seed: u64) -> RunReport {
    run(seed, async move |h| {
        for _ in 0..3 {
            h.start_worker().await;
        }
        let busy = h.registered(1).await;
        for n in 2..=3 {
            h.registered(n).await;
        }
        let mut tasks = Vec::new();
        for work_us in [1_000, 400_000, 5_000, 2_000, 3_000] {
            tasks.push(h.submit(work_us).await);
        }

        h.note("an earlier master's leftovers: task 0 finished, task 1 assigned");
        let (old_master, _events) = h.sim().connect("old-master").await.expect("connects");
        old_master
            .create(&h.layout().master(), b"old", CreateMode::Ephemeral)
            .await
            .expect("the old master leads");
        let (old_worker, _events) = h.sim().connect("old-worker").await.expect("connects");
        let id = old_worker
            .create(
                &h.layout().worker_id_prefix(),
                b"",
                CreateMode::EphemeralSequential,
            )
            .await
            .expect("the old worker's id");
        let old_id = WorkerId::parse(path::name(&id)).expect("a worker id");
        old_worker
            .create(&h.layout().worker(&old_id), b"", CreateMode::Ephemeral)
            .await
            .expect("the old worker registers");
        let create_assignment = async |worker: &WorkerId, task: &TaskId| {
            old_master
                .create(
                    &h.layout().assignment(worker),
                    task.as_str().as_bytes(),
                    CreateMode::Persistent,
                )
                .await
                .expect("the old assignment is written");
        };
        create_assignment(&old_id, &tasks[0]).await;
        // The result the earlier run's worker wrote: the task's answer.
        let (payload, _) = old_worker
            .get_data(&h.layout().task(&tasks[0]), Watch::No)
            .await
            .expect("the task is there");
        let finished = expected_result(&payload);
        old_worker
            .multi(vec![
                Op::Create {
                    path: h.layout().result(&tasks[0]),
                    data: finished.encode(),
                    mode: CreateMode::Persistent,
                },
                Op::Delete {
                    path: h.layout().assignment(&old_id),
                    version: Some(0),
                },
            ])
            .await
            .expect("the old result is written");
        create_assignment(&busy, &tasks[1]).await;
        for session in [old_worker, old_master] {
            session.close().await.expect("the earlier run ends");
        }
        settle().await;

        h.start_master().await;
        assert!(
            h.all_finished(Duration::from_secs(60)).await,
            "every task finishes"
        );
        let report = h.finish().await;

        let trace = &report.trace;
        let started = find(trace, 0, "connect m1 as session");
        let already = find(
            trace,
            started,
            &format!("decide m1: task-already-finished {}", tasks[0]),
        );
        let adopted = find(
            trace,
            started,
            &format!("decide m1: task-in-progress {} on {busy}", tasks[1]),
        );
        let initialised = find(
            trace,
            started,
            "decide m1: initialised workers=3 pending=3 busy=1",
        );
        assert!(already < initialised && adopted < initialised);
        assert_eq!(rounds_assigning(trace, &tasks[0]), 0);
        assert_eq!(rounds_assigning(trace, &tasks[1]), 0);
        for task in &tasks[2..] {
            assert_eq!(rounds_assigning(trace, task), 1);
        }
        let ran = |task: &zkdist_coord::TaskId| {
            trace
                .iter()
                .filter(|line| line.ends_with(&format!(" started {task}")))
                .count()
        };
        assert_eq!(ran(&tasks[0]), 0, "task 0 is not run again");
        assert_eq!(ran(&tasks[1]), 1, "task 1 runs once, on the first worker");
        report
    })
}
