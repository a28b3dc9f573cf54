//! The fence: a master whose epoch was superseded (a successor was elected
//! while it was paused or partitioned, and its session has not expired
//! yet, so it still believes it leads) has its next write refused by the
//! epoch check, stops at once, and leaves the tree exactly as it was.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use zkdist_coord::{Coordinator, ErrorCode, Layout, Stat};
use zkdist_master::{Epoch, Master, MasterDecision, MasterError, claim_master};
use zkdist_sim::{Latency, SimZk};

use common::*;

const HANG_GUARD: Duration = Duration::from_secs(600);

/// Every node of the tree: path, data and stat.
async fn snapshot(sim: &SimZk) -> Vec<(String, Vec<u8>, Stat)> {
    sim.inspect(|tree| {
        tree.paths()
            .map(|path| {
                (
                    path.to_owned(),
                    tree.data(path).unwrap_or_default().to_vec(),
                    tree.stat(path).expect("listed"),
                )
            })
            .collect()
    })
    .await
}

#[test]
fn a_superseded_master_is_refused_its_next_write_and_changes_nothing() {
    run_sim(3, async {
        let sim = SimZk::start(sim_config(3, Latency::Fixed { ms: 1 }));
        let layout = Layout::default();
        let (zk, events) = sim.connect("old-master").await.unwrap();
        let old_session = zk.session_id();
        // Kept so that the session outlives the master (dropping the last
        // handle would close it, deleting `master`, which is not a write of
        // the master's).
        let _old_handle = zk.clone();
        let epoch = claim_master(&zk, &layout).await.unwrap().unwrap();
        assert_eq!(epoch, Epoch(1));
        let (decisions_tx, mut decisions) = tokio::sync::mpsc::unbounded_channel();
        let old_master = tokio::spawn(
            Master::new(zk, events, layout.clone(), epoch)
                .with_observer(decisions_tx)
                .run(),
        );
        tokio::time::sleep(Duration::from_millis(50)).await;

        // The old master hears nothing for a while (a long pause), and
        // meanwhile a successor is elected: the epoch moves on. The old
        // master's session lives on and its `master` node stays.
        sim.hold(old_session).await;
        let (successor, _successor_events) = sim.connect("successor").await.unwrap();
        let bumped = successor
            .set_data(&layout.epoch(), b"successor", None)
            .await
            .unwrap();
        assert_eq!(bumped.version, 2);
        let worker = start_worker(&sim, "worker", &layout, TestHandler).await;
        let client = client(&sim, &layout).await;
        let task = client.submit(&payload("echo", 1, 1_000)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;

        // From here on, record every transaction of the old master.
        let before = snapshot(&sim).await;
        let old_writes = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&old_writes);
        sim.on_apply(move |op, _| {
            if op.session == old_session {
                record.lock().unwrap().push(op.clone());
            }
        })
        .await;
        sim.release(old_session).await;

        let outcome = tokio::time::timeout(HANG_GUARD, old_master)
            .await
            .expect("the old master stops")
            .unwrap();
        assert_eq!(outcome.unwrap_err(), MasterError::Deposed { epoch });
        let decisions: Vec<MasterDecision> =
            std::iter::from_fn(|| decisions.try_recv().ok()).collect();
        // It did try: a round gave the task to the worker, then the create
        // was refused and the master stopped with that as its last word.
        assert!(
            decisions
                .iter()
                .any(|d| d.assigned().iter().any(|(_, assigned)| *assigned == task)),
            "{decisions:#?}"
        );
        assert_eq!(decisions.last(), Some(&MasterDecision::Deposed { epoch }));

        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(snapshot(&sim).await, before, "the tree is unchanged");
        let old_writes = old_writes.lock().unwrap().clone();
        assert!(!old_writes.is_empty(), "the old master sent a write");
        for write in &old_writes {
            assert!(write.changes.is_empty(), "{}", write.trace_line);
            let error = write.error.as_ref().expect("refused");
            assert!(
                matches!(error, zkdist_coord::ZkError::Multi { index: 0, error } if error.code() == ErrorCode::BadVersion),
                "refused by the epoch check: {}",
                write.trace_line
            );
        }
        // Its session is alive and still holds `master`: the fence, not an
        // expiry, stopped it.
        let holder = successor
            .get_data(&layout.master(), zkdist_coord::Watch::No)
            .await
            .unwrap()
            .0;
        assert_eq!(holder, old_session.to_string().into_bytes());
        worker.stop().await.0.unwrap();
    });
}
