//! The election: a claim is one `multi` (create `master`, bump `epoch`), and
//! a claim whose reply is lost to a connection loss is read back, never
//! sent blindly again, so the epoch moves exactly once per election.

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zkdist_coord::{Coordinator, Layout};
use zkdist_master::{Epoch, claim_master};
use zkdist_sim::{Latency, SimZk, TxnKind};

use common::*;

const SEEDS: std::ops::Range<u64> = 0..16;

/// Claims with the link cut while the claim travels. Returns whether the
/// claim had been applied before the cut (the first attempt counted).
async fn claim_cut_off(seed: u64) -> bool {
    let sim = SimZk::start(sim_config(seed, Latency::Fixed { ms: 2 }));
    let layout = Layout::default();
    let (setup, _setup_events) = sim.connect("setup").await.unwrap();
    layout.ensure_layout(&setup).await.unwrap();
    let (zk, _events) = sim.connect("candidate").await.unwrap();
    let session = zk.session_id();
    let claims = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&claims);
    sim.on_apply(move |op, _| {
        if op.session == session && op.kind == TxnKind::Multi {
            record.lock().unwrap().push(op.error.is_none());
        }
    })
    .await;

    let claim = {
        let layout = layout.clone();
        tokio::spawn(async move { claim_master(&zk, &layout).await })
    };
    // Let the claim send its request, then cut the link under it.
    tokio::task::yield_now().await;
    sim.cut(session, Duration::from_millis(300)).await;
    let epoch = tokio::time::timeout(Duration::from_secs(600), claim)
        .await
        .expect("the claim settles after the link heals")
        .unwrap()
        .expect("the claim succeeds");
    assert_eq!(epoch, Some(Epoch(1)), "seed {seed}");

    let (master_path, epoch_path) = (layout.master(), layout.epoch());
    let (holder, version) = sim
        .inspect(move |tree| {
            (
                tree.data(&master_path).map(<[u8]>::to_vec),
                tree.stat(&epoch_path).map(|stat| stat.version),
            )
        })
        .await;
    assert_eq!(holder, Some(session.to_string().into_bytes()));
    assert_eq!(version, Some(1), "seed {seed}: the epoch moved once");
    let claims = claims.lock().unwrap().clone();
    // Exactly one claim reached the server, and it succeeded: either the
    // first (applied before the cut, then recognised) or the second (the
    // first never arrived).
    assert_eq!(claims, [true], "seed {seed}");
    // Applied with its reply lost (then recognised), or never arrived
    // (then sent again): the simulator says which in its trace.
    sim.trace()
        .await
        .iter()
        .any(|line| line.contains("lost candidate reply multi"))
}

#[test]
fn a_claim_cut_off_in_flight_is_recognised_and_the_epoch_moves_once() {
    let mut seen = BTreeSet::new();
    for seed in SEEDS {
        seen.insert(run_sim(seed, claim_cut_off(seed)));
    }
    assert_eq!(seen, BTreeSet::from([false, true]), "both sides of the cut");
}

#[test]
fn the_first_claim_leads_and_the_next_stands_by() {
    run_sim(1, async {
        let sim = SimZk::start(sim_config(1, Latency::Fixed { ms: 1 }));
        let layout = Layout::default();
        let (first, _first_events) = sim.connect("first").await.unwrap();
        let (second, _second_events) = sim.connect("second").await.unwrap();
        // The first claim lays the tree out itself.
        assert_eq!(claim_master(&first, &layout).await.unwrap(), Some(Epoch(1)));
        assert_eq!(claim_master(&second, &layout).await.unwrap(), None);
        // Once the leader's session is gone, the next claim bumps the epoch.
        first.close().await.unwrap();
        assert_eq!(
            claim_master(&second, &layout).await.unwrap(),
            Some(Epoch(2))
        );
        let epoch = layout.epoch();
        let data = sim
            .inspect(move |tree| tree.data(&epoch).map(<[u8]>::to_vec))
            .await;
        assert_eq!(data, Some(second.session_id().to_string().into_bytes()));
    });
}
