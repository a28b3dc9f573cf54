//! Faults a client cannot cheaply provoke on a real server: link cuts
//! (short and past the session timeout), requests applied but whose reply
//! was lost, server-side expiry, process crashes, and the oversized
//! `get_children` reply.

mod common;

use std::collections::BTreeSet;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;
use zkdist_coord::{
    Coordinator, CreateMode, MAX_REPLY_BYTES, Op, SessionState, Watch, WatchKind, ZkError,
};
use zkdist_sim::{Latency, SimConfig, SimZk};

use common::{drain, next_event, run_paused, run_seeded, state, watch};

fn config(seed: u64, latency: Latency, session_timeout_ms: u64) -> SimConfig {
    SimConfig {
        seed,
        latency,
        session_timeout_ms,
        ..SimConfig::default()
    }
}

/// Requests in flight when a link fails: a seeded prefix of them was
/// applied (their replies lost), the rest never arrived. Either way the
/// caller gets `ConnectionLoss` and cannot tell which. Retrying a
/// sequential create that was applied makes a duplicate.
#[test]
fn a_cut_fails_requests_in_flight_after_applying_a_seeded_prefix() {
    let mut prefixes = BTreeSet::new();
    let mut duplicates = 0;
    for seed in 0..40 {
        let (applied, after_retry) = run_seeded(seed, async move {
            let sim = SimZk::start(config(seed, Latency::Fixed { ms: 10 }, 10_000));
            let (a, mut events) = sim.connect("a").await.unwrap();
            a.create("/q", b"", CreateMode::Persistent).await.unwrap();
            let mut in_flight = Vec::new();
            for name in ["/q/1-", "/q/2-", "/q/3-"] {
                let a = a.clone();
                let mut create =
                    Box::pin(
                        async move { a.create(name, b"", CreateMode::PersistentSequential).await },
                    );
                // Poll once here, which sends the request, so that the
                // requests leave in this order whatever order the runtime
                // (madsim's is randomized) then runs the tasks in.
                let polled = std::future::poll_fn(|cx| Poll::Ready(create.as_mut().poll(cx))).await;
                assert!(polled.is_pending(), "no reply before the latency");
                in_flight.push(tokio::spawn(create));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            sim.cut(a.session_id(), Duration::from_millis(100)).await;
            for task in in_flight {
                let result = task.await.unwrap();
                assert!(
                    matches!(result, Err(ZkError::ConnectionLoss { .. })),
                    "{result:?}"
                );
            }
            let applied: Vec<String> = sim
                .inspect(|tree| {
                    let mut names: Vec<String> = tree
                        .children("/q")
                        .unwrap()
                        .iter()
                        .map(|n| n.to_string())
                        .collect();
                    names.sort();
                    names
                })
                .await;
            // Requests are applied in issue order: what arrived is a prefix.
            let expected = ["1-0000000000", "2-0000000001", "3-0000000002"];
            assert_eq!(applied, expected[..applied.len()], "seed {seed}");
            let _ = drain(&mut events);
            // Retry after the link heals, as a client would.
            assert_eq!(
                next_event(&mut events).await,
                state(SessionState::Connected)
            );
            a.create("/q/1-", b"", CreateMode::PersistentSequential)
                .await
                .unwrap();
            let after_retry = sim
                .inspect(|tree| {
                    tree.children("/q")
                        .unwrap()
                        .iter()
                        .filter(|n| n.starts_with("1-"))
                        .count()
                })
                .await;
            (applied.len(), after_retry)
        });
        prefixes.insert(applied);
        if applied >= 1 {
            assert_eq!(after_retry, 2, "the retry duplicated an applied create");
            duplicates += 1;
        } else {
            assert_eq!(after_retry, 1);
        }
    }
    assert_eq!(
        prefixes,
        BTreeSet::from([0, 1, 2, 3]),
        "every prefix happens for some seed"
    );
    assert!(duplicates > 0);
}

#[test]
fn an_outage_past_the_timeout_expires_the_session_at_cut_plus_timeout() {
    run_paused(async {
        let sim = SimZk::start(config(1, Latency::Fixed { ms: 1 }, 1_000));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, mut b_events) = sim.connect("b").await.unwrap();
        a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
        assert!(b.exists("/e", Watch::Yes).await.unwrap().is_some());
        assert_eq!(drain(&mut a_events), [state(SessionState::Connected)]);
        assert_eq!(drain(&mut b_events), [state(SessionState::Connected)]);

        let cut_at = Instant::now();
        sim.cut(a.session_id(), Duration::from_secs(3)).await;
        assert_eq!(drain(&mut a_events), [state(SessionState::Disconnected)]);
        // The client still believes in its session and its ephemeral: a
        // request waits for the reconnection.
        let waiting = tokio::spawn({
            let a = a.clone();
            async move { a.exists("/e", Watch::No).await }
        });

        // The server expires it one session timeout after the link failed.
        assert_eq!(
            next_event(&mut b_events).await,
            watch(WatchKind::NodeDeleted, "/e")
        );
        let deleted_after = cut_at.elapsed();
        assert!(
            deleted_after >= Duration::from_millis(1_000)
                && deleted_after <= Duration::from_millis(1_010),
            "{deleted_after:?}"
        );
        assert_eq!(b.exists("/e", Watch::No).await.unwrap(), None);

        assert!(!waiting.is_finished(), "still waiting for the reconnection");

        // The partitioned client learns it only when the link heals; the
        // request it queued meanwhile was never sent, and fails.
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Expired)
        );
        assert!(cut_at.elapsed() >= Duration::from_secs(3));
        assert_eq!(waiting.await.unwrap(), Err(ZkError::SessionExpired));
        assert_eq!(a.exists("/", Watch::No).await, Err(ZkError::SessionExpired));
        assert_eq!(a_events.recv().await, None, "the stream ends after Expired");
    });
}

/// While disconnected, a client queues requests instead of failing them
/// (as ZooKeeper's clients do): they go out after the reconnection, in the
/// order they were issued, behind the handshake. A request already in
/// flight when the link dropped still fails with `ConnectionLoss`.
#[test]
fn requests_issued_while_disconnected_are_sent_in_order_once_reconnected() {
    run_paused(async {
        let sim = SimZk::start(config(6, Latency::Fixed { ms: 1 }, 10_000));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        a.create("/q", b"", CreateMode::Persistent).await.unwrap();
        let mut in_flight = Box::pin({
            let a = a.clone();
            async move { a.exists("/q", Watch::No).await }
        });
        // Polled once here, which sends it, whatever order the runtime
        // (madsim's is randomized) then runs tasks in.
        let polled = std::future::poll_fn(|cx| Poll::Ready(in_flight.as_mut().poll(cx))).await;
        assert!(polled.is_pending(), "no reply before the latency");
        let in_flight = tokio::spawn(in_flight);
        let cut_at = Instant::now();
        sim.cut(a.session_id(), Duration::from_millis(400)).await;
        assert!(matches!(
            in_flight.await.unwrap(),
            Err(ZkError::ConnectionLoss { .. })
        ));
        let _ = drain(&mut a_events);

        let mut queued = Vec::new();
        for name in ["/q/1-", "/q/2-", "/q/3-"] {
            queued.push(tokio::spawn({
                let a = a.clone();
                async move { a.create(name, b"", CreateMode::PersistentSequential).await }
            }));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let read = tokio::spawn({
            let a = a.clone();
            async move { a.get_children("/q", Watch::No).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(queued.iter().all(|task| !task.is_finished()));
        assert!(!sim.inspect(|tree| tree.exists("/q/1-0000000000")).await);

        let mut created = Vec::new();
        for task in queued {
            created.push(task.await.unwrap().unwrap());
        }
        assert!(cut_at.elapsed() >= Duration::from_millis(400));
        assert_eq!(
            created,
            ["/q/1-0000000000", "/q/2-0000000001", "/q/3-0000000002"],
            "sent in issue order"
        );
        let (mut names, _) = read.await.unwrap().unwrap();
        names.sort();
        assert_eq!(names, ["1-0000000000", "2-0000000001", "3-0000000002"]);
        assert_eq!(
            drain(&mut a_events),
            [state(SessionState::Connected)],
            "the reconnection came first"
        );
        let trace = sim.trace().await;
        let queued_lines = trace.iter().filter(|l| l.contains("queue a ")).count();
        assert_eq!(queued_lines, 4, "{trace:#?}");
        assert!(
            trace
                .iter()
                .any(|l| l.contains("heal a: reconnected") && l.contains("4 queued requests sent")),
            "{trace:#?}"
        );
    });
}

/// A process that dies while disconnected takes its queued requests with
/// it: they fail with `ConnectionLoss`, and none is ever sent.
/// An empty multi is answered by the client library, as zookeeper-client
/// answers it: at once, also while disconnected, with no zxid taken and
/// nothing sent.
#[test]
fn an_empty_multi_is_answered_locally_even_while_disconnected() {
    run_paused(async {
        let sim = SimZk::start(config(3, Latency::Fixed { ms: 10 }, 10_000));
        let (a, _events) = sim.connect("a").await.unwrap();
        let zxid_before = sim.inspect(|tree| tree.zxid()).await;
        let started = Instant::now();
        assert_eq!(a.multi(Vec::new()).await, Ok(Vec::new()));
        // A round trip takes 20 ms; madsim moves its clock a little after
        // every poll, so "at once" is "well within one latency".
        assert!(
            started.elapsed() < Duration::from_millis(10),
            "no round trip: {:?}",
            started.elapsed()
        );
        sim.cut(a.session_id(), Duration::from_secs(1)).await;
        assert_eq!(a.multi(Vec::new()).await, Ok(Vec::new()));
        assert_eq!(sim.inspect(|tree| tree.zxid()).await, zxid_before);
        let trace = sim.trace().await;
        let local = trace
            .iter()
            .filter(|line| line.contains("local a multi [] -> ok 0 ops"))
            .count();
        assert_eq!(local, 2, "{trace:#?}");
    });
}

#[test]
fn a_crash_while_disconnected_fails_the_queued_requests() {
    run_paused(async {
        let sim = SimZk::start(config(7, Latency::Fixed { ms: 1 }, 1_000));
        let (a, _a_events) = sim.connect("a").await.unwrap();
        sim.cut(a.session_id(), Duration::from_millis(200)).await;
        let queued = tokio::spawn({
            let a = a.clone();
            async move { a.create("/never", b"", CreateMode::Persistent).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!queued.is_finished());
        sim.crash(a.session_id()).await;
        assert!(matches!(
            queued.await.unwrap(),
            Err(ZkError::ConnectionLoss { reason }) if reason.contains("crashed")
        ));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!sim.inspect(|tree| tree.exists("/never")).await);
    });
}

#[test]
fn a_short_outage_keeps_the_session_and_replays_missed_watches() {
    run_paused(async {
        let sim = SimZk::start(config(2, Latency::Fixed { ms: 2 }, 10_000));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, _b_events) = sim.connect("b").await.unwrap();
        for path in ["/d", "/p", "/gone", "/same"] {
            b.create(path, b"", CreateMode::Persistent).await.unwrap();
        }
        a.create("/mine", b"", CreateMode::Ephemeral).await.unwrap();
        a.get_data("/d", Watch::Yes).await.unwrap();
        a.get_data("/same", Watch::Yes).await.unwrap();
        assert_eq!(a.exists("/n", Watch::Yes).await.unwrap(), None);
        a.get_children("/p", Watch::Yes).await.unwrap();
        a.exists("/gone", Watch::Yes).await.unwrap().unwrap();
        assert_eq!(drain(&mut a_events), [state(SessionState::Connected)]);

        sim.cut(a.session_id(), Duration::from_millis(500)).await;
        b.set_data("/d", b"new", None).await.unwrap();
        b.create("/n", b"", CreateMode::Persistent).await.unwrap();
        b.delete("/n", None).await.unwrap();
        b.create("/p/child", b"", CreateMode::Persistent)
            .await
            .unwrap();
        b.delete("/gone", None).await.unwrap();
        assert_eq!(drain(&mut a_events), [state(SessionState::Disconnected)]);

        // At reconnect each watch fires if it missed a change; the exists
        // watch on a node created and deleted during the gap stays silent.
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Connected)
        );
        assert_eq!(
            next_event(&mut a_events).await,
            watch(WatchKind::NodeDataChanged, "/d")
        );
        assert_eq!(
            next_event(&mut a_events).await,
            watch(WatchKind::NodeDeleted, "/gone")
        );
        assert_eq!(
            next_event(&mut a_events).await,
            watch(WatchKind::NodeChildrenChanged, "/p")
        );
        a.sync("/").await.unwrap();
        assert_eq!(drain(&mut a_events), []);
        assert!(
            a.exists("/mine", Watch::No).await.unwrap().is_some(),
            "ephemeral kept"
        );

        // The unfired watches are registered again and work.
        b.create("/n", b"", CreateMode::Persistent).await.unwrap();
        b.set_data("/same", b"x", None).await.unwrap();
        assert_eq!(
            next_event(&mut a_events).await,
            watch(WatchKind::NodeCreated, "/n")
        );
        assert_eq!(
            next_event(&mut a_events).await,
            watch(WatchKind::NodeDataChanged, "/same")
        );
    });
}

/// The server expires a connected session: replies it produced before
/// still arrive in order, then the connection closes (`Disconnected`,
/// requests in flight fail with `ConnectionLoss`), then the reconnect
/// learns `Expired`.
#[test]
fn expiring_a_connected_session_closes_its_connection_then_reports_expired() {
    run_paused(async {
        let sim = SimZk::start(config(3, Latency::Fixed { ms: 10 }, 10_000));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, mut b_events) = sim.connect("b").await.unwrap();
        a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
        b.exists("/e", Watch::Yes).await.unwrap();
        let _ = drain(&mut a_events);
        let _ = drain(&mut b_events);

        // One read answered and held back, one still travelling.
        sim.hold(a.session_id()).await;
        let answered = tokio::spawn({
            let a = a.clone();
            async move { a.get_data("/e", Watch::No).await }
        });
        tokio::time::sleep(Duration::from_millis(15)).await;
        let travelling = tokio::spawn({
            let a = a.clone();
            async move { a.exists("/e", Watch::No).await }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        sim.expire(a.session_id()).await;
        assert!(
            !sim.inspect(|tree| tree.exists("/e")).await,
            "the server applied the expiry before expire returned"
        );
        sim.release(a.session_id()).await;

        assert!(answered.await.unwrap().is_ok(), "applied before the expiry");
        assert!(matches!(
            travelling.await.unwrap(),
            Err(ZkError::ConnectionLoss { .. })
        ));
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Disconnected)
        );
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Expired)
        );
        assert_eq!(a_events.recv().await, None);
        assert_eq!(a.exists("/", Watch::No).await, Err(ZkError::SessionExpired));
        assert_eq!(a.close().await, Err(ZkError::SessionExpired));
        assert_eq!(
            next_event(&mut b_events).await,
            watch(WatchKind::NodeDeleted, "/e")
        );
        // Expiring again is harmless.
        sim.expire(a.session_id()).await;
    });
}

#[test]
fn a_crash_drops_the_link_silently_and_the_server_expires_it_later() {
    run_paused(async {
        let sim = SimZk::start(config(4, Latency::Fixed { ms: 1 }, 2_000));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, mut b_events) = sim.connect("b").await.unwrap();
        a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
        b.exists("/e", Watch::Yes).await.unwrap();
        let _ = drain(&mut b_events);

        let crashed_at = Instant::now();
        sim.crash(a.session_id()).await;
        assert_eq!(a_events.recv().await, Some(state(SessionState::Connected)));
        assert_eq!(a_events.recv().await, None, "a dead process hears nothing");
        assert!(matches!(
            a.create("/x", b"", CreateMode::Persistent).await,
            Err(ZkError::ConnectionLoss { .. })
        ));
        // Until the timeout, the server still holds the ephemeral.
        assert!(b.exists("/e", Watch::No).await.unwrap().is_some());
        assert_eq!(
            next_event(&mut b_events).await,
            watch(WatchKind::NodeDeleted, "/e")
        );
        let after = crashed_at.elapsed();
        assert!(
            after >= Duration::from_millis(2_000) && after <= Duration::from_millis(2_005),
            "{after:?}"
        );
    });
}

/// Makes `count` children whose names sum to exactly `total_name_bytes`.
async fn make_children(
    zk: &zkdist_sim::SimSession,
    parent: &str,
    count: usize,
    total_name_bytes: usize,
) {
    let base = total_name_bytes / count;
    let mut remaining = total_name_bytes;
    let mut ops = Vec::new();
    for index in 0..count {
        let len = if index + 1 == count { remaining } else { base };
        remaining -= len;
        let prefix = format!("{index:05}");
        let name = format!("{prefix}{}", "x".repeat(len - prefix.len()));
        ops.push(Op::Create {
            path: format!("{parent}/{name}"),
            data: Vec::new(),
            mode: CreateMode::Persistent,
        });
        if ops.len() == 100 {
            zk.multi(std::mem::take(&mut ops)).await.unwrap();
        }
    }
    zk.multi(ops).await.unwrap();
}

/// A `get_children` reply over the client's buffer fails as on a real
/// client: `ConnectionLoss`, the connection drops and comes back, and the
/// watch that read would have set is lost, while older watches survive.
#[test]
fn an_oversized_get_children_reply_drops_the_connection_and_its_watch() {
    run_paused(async {
        let sim = SimZk::start(config(5, Latency::Fixed { ms: 1 }, 10_000));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, _b_events) = sim.connect("b").await.unwrap();
        b.create("/big", b"", CreateMode::Persistent).await.unwrap();
        b.create("/other", b"", CreateMode::Persistent)
            .await
            .unwrap();
        // 88 bytes of framing, then 4 + name length per child: exactly at
        // the limit with 1024 children.
        let count = 1024;
        make_children(&b, "/big", count, MAX_REPLY_BYTES - 88 - 4 * count).await;
        let (names, stat) = a.get_children("/big", Watch::No).await.unwrap();
        assert_eq!((names.len(), stat.num_children), (count, count as i32));

        a.get_data("/other", Watch::Yes).await.unwrap();
        b.create("/big/y", b"", CreateMode::Persistent)
            .await
            .unwrap();
        let _ = drain(&mut a_events);
        match a.get_children("/big", Watch::Yes).await {
            Err(ZkError::ConnectionLoss { reason }) => {
                assert!(reason.contains(&MAX_REPLY_BYTES.to_string()), "{reason}");
                assert!(reason.contains("/big"), "{reason}");
            }
            other => panic!("expected ConnectionLoss, got {other:?}"),
        }
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Disconnected)
        );
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Connected)
        );

        // The child watch never took; the data watch set before survived.
        b.create("/big/z", b"", CreateMode::Persistent)
            .await
            .unwrap();
        b.set_data("/other", b"x", None).await.unwrap();
        assert_eq!(
            next_event(&mut a_events).await,
            watch(WatchKind::NodeDataChanged, "/other")
        );
        a.sync("/").await.unwrap();
        assert_eq!(drain(&mut a_events), []);
        assert!(
            sim.trace()
                .await
                .iter()
                .any(|l| l.contains("connection dropped"))
        );
    });
}
