//! Delivery control and observation: hold and release, pause and step,
//! run_until, inspect, on_apply, the sequence-counter knob, seeded
//! `get_children` order, the trace's format, and bad input.

mod common;

use std::time::Duration;

use tokio::sync::mpsc;
use zkdist_coord::{
    Coordinator, CreateMode, MAX_DATA_BYTES, Op, SessionId, SessionState, Watch, WatchKind, ZkError,
};
use zkdist_sim::{Change, Latency, SimConfig, SimZk, TxnKind};

use common::{drain, next_event, run_paused, run_seeded, state, watch};

fn config(seed: u64, latency: Latency) -> SimConfig {
    SimConfig {
        seed,
        latency,
        ..SimConfig::default()
    }
}

#[test]
fn hold_queues_replies_and_events_in_order_until_release() {
    run_paused(async {
        let sim = SimZk::start(config(1, Latency::Fixed { ms: 1 }));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, _b_events) = sim.connect("b").await.unwrap();
        b.create("/h", b"", CreateMode::Persistent).await.unwrap();
        a.get_data("/h", Watch::Yes).await.unwrap();
        let _ = drain(&mut a_events);

        sim.hold(a.session_id()).await;
        b.set_data("/h", b"new", None).await.unwrap();
        let read = tokio::spawn({
            let a = a.clone();
            async move { a.get_data("/h", Watch::No).await }
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!read.is_finished(), "the reply is held");
        assert_eq!(drain(&mut a_events), [], "the event is held");

        sim.release(a.session_id()).await;
        let (data, stat) = read.await.unwrap().unwrap();
        assert_eq!((data.as_slice(), stat.version), (&b"new"[..], 1));
        // The event was produced first, so it is already on the stream.
        assert_eq!(
            drain(&mut a_events),
            [watch(WatchKind::NodeDataChanged, "/h")]
        );
    });
}

#[test]
fn step_runs_one_item_at_a_time_while_paused() {
    run_paused(async {
        let sim = SimZk::start(config(2, Latency::Fixed { ms: 5 }));
        let (a, _events) = sim.connect("a").await.unwrap();
        sim.pause().await;
        let create = tokio::spawn({
            let a = a.clone();
            async move { a.create("/s", b"", CreateMode::Persistent).await }
        });
        // Time passes, nothing moves.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!create.is_finished());
        assert!(!sim.inspect(|tree| tree.exists("/s")).await);

        let arrival = sim.step().await.expect("the request's arrival");
        assert!(
            arrival.contains("a create /s persistent 0B -> /s"),
            "{arrival}"
        );
        assert!(arrival.contains("zxid=0x2"), "{arrival}");
        assert!(sim.inspect(|tree| tree.exists("/s")).await);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            !create.is_finished(),
            "applied, but the reply is not delivered"
        );

        let delivery = sim.step().await.expect("the reply's delivery");
        assert!(delivery.contains("deliver a reply create /s"), "{delivery}");
        assert_eq!(create.await.unwrap().unwrap(), "/s");
        assert_eq!(sim.step().await, None, "nothing left");

        sim.resume().await;
        a.delete("/s", None).await.unwrap();
    });
}

#[test]
fn run_until_returns_once_the_predicate_holds_after_a_transaction() {
    run_paused(async {
        let sim = SimZk::start(config(
            3,
            Latency::Uniform {
                min_us: 100,
                max_us: 900,
            },
        ));
        let (a, _events) = sim.connect("a").await.unwrap();
        a.create("/r", b"", CreateMode::Persistent).await.unwrap();
        // Already true: returns at once.
        sim.run_until(|tree| tree.exists("/r")).await;
        let writer = tokio::spawn({
            let a = a.clone();
            async move {
                for i in 0..10 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    a.create(&format!("/r/{i}"), b"", CreateMode::Persistent)
                        .await
                        .unwrap();
                }
            }
        });
        sim.run_until(|tree| tree.children("/r").unwrap().len() >= 5)
            .await;
        assert_eq!(
            sim.inspect(|tree| tree.children("/r").unwrap().len()).await,
            5
        );
        writer.await.unwrap();
        assert_eq!(
            sim.inspect(|tree| tree.children("/r").unwrap().len()).await,
            10
        );
    });
}

#[test]
fn on_apply_sees_every_transaction_in_zxid_order() {
    run_paused(async {
        let sim = SimZk::start(config(4, Latency::Fixed { ms: 1 }));
        let (sender, mut applied) = mpsc::unbounded_channel();
        sim.on_apply(move |op, tree| {
            let _ = sender.send((op.clone(), tree.zxid()));
        })
        .await;
        let (a, _events) = sim.connect("a").await.unwrap();
        a.create("/x", b"", CreateMode::Persistent).await.unwrap();
        assert!(a.create("/x", b"", CreateMode::Persistent).await.is_err());
        a.exists("/x", Watch::No).await.unwrap();
        a.create("/x/e", b"", CreateMode::Ephemeral).await.unwrap();
        let failed_multi = a
            .multi(vec![
                Op::SetData {
                    path: "/x".into(),
                    data: b"1".to_vec(),
                    version: None,
                },
                Op::Check {
                    path: "/x".into(),
                    version: 7,
                },
            ])
            .await;
        assert!(matches!(failed_multi, Err(ZkError::Multi { index: 1, .. })));
        a.close().await.unwrap();

        let mut ops = Vec::new();
        while let Ok(op) = applied.try_recv() {
            ops.push(op);
        }
        let kinds: Vec<_> = ops.iter().map(|(op, _)| op.kind).collect();
        assert_eq!(
            kinds,
            [
                TxnKind::CreateSession,
                TxnKind::Create,
                TxnKind::Create,
                TxnKind::Create,
                TxnKind::Multi,
                TxnKind::CloseSession
            ],
            "reads are not transactions"
        );
        for (index, (op, tree_zxid)) in ops.iter().enumerate() {
            assert_eq!(
                op.zxid,
                index as i64 + 1,
                "consecutive zxids, failures included"
            );
            assert_eq!(*tree_zxid, op.zxid, "the hook sees the tree right after");
            assert_eq!(op.session_name, "a");
            assert!(op.trace_line.contains(&format!("zxid=0x{:x}", op.zxid)));
        }
        assert_eq!(ops[1].0.changes, [Change::Created("/x".into())]);
        assert!(ops[2].0.error.is_some() && ops[2].0.changes.is_empty());
        assert!(ops[4].0.error.is_some() && ops[4].0.changes.is_empty());
        assert_eq!(ops[5].0.changes, [Change::Deleted("/x/e".into())]);
    });
}

#[test]
fn sequential_names_wrap_at_32_bits_as_zookeeper_renders_them() {
    run_paused(async {
        let sim = SimZk::start(config(5, Latency::Zero));
        let (a, _events) = sim.connect("a").await.unwrap();
        a.create("/q", b"", CreateMode::Persistent).await.unwrap();
        sim.set_sequence_counter("/q", i32::MAX - 1).await.unwrap();
        let mut names = Vec::new();
        for _ in 0..3 {
            names.push(
                a.create("/q/t-", b"", CreateMode::EphemeralSequential)
                    .await
                    .unwrap(),
            );
        }
        assert_eq!(
            names,
            ["/q/t-2147483646", "/q/t-2147483647", "/q/t--2147483648"]
        );
        // Lexical order no longer follows creation order.
        let mut sorted = names.clone();
        sorted.sort();
        assert_ne!(sorted, names);
        sim.set_sequence_counter("/q", -12).await.unwrap();
        assert_eq!(
            a.create("/q/", b"", CreateMode::PersistentSequential)
                .await
                .unwrap(),
            "/q/-000000012"
        );
        assert_eq!(
            sim.set_sequence_counter("/missing", 1).await,
            Err(ZkError::NoNode {
                path: "/missing".into()
            })
        );
    });
}

#[test]
fn get_children_order_is_seeded() {
    let listing = |seed| {
        run_seeded(seed, async move {
            let sim = SimZk::start(config(seed, Latency::Zero));
            let (a, _events) = sim.connect("a").await.unwrap();
            a.create("/c", b"", CreateMode::Persistent).await.unwrap();
            for i in 0..20 {
                a.create(&format!("/c/{i:02}"), b"", CreateMode::Persistent)
                    .await
                    .unwrap();
            }
            a.get_children("/c", Watch::No).await.unwrap().0
        })
    };
    let orders: Vec<Vec<String>> = (0..5).map(listing).collect();
    assert_eq!(orders[0], listing(0), "same seed, same order");
    assert!(
        orders.iter().any(|order| *order != orders[0]),
        "seeds shuffle"
    );
    let expected: Vec<String> = (0..20).map(|i| format!("{i:02}")).collect();
    for mut order in orders {
        assert_ne!(order, expected, "not handed out sorted");
        order.sort();
        assert_eq!(order, expected);
    }
}

/// The trace's exact text for a small scripted run: any change of format
/// or of the order of events shows up here.
#[test]
fn trace_lines_have_a_stable_format() {
    let trace = run_paused(async {
        let sim = SimZk::start(config(0, Latency::Fixed { ms: 2 }));
        let (a, _a_events) = sim.connect("alice").await.unwrap();
        a.create("/g", b"hi", CreateMode::Persistent).await.unwrap();
        a.get_data("/g", Watch::Yes).await.unwrap();
        let (b, _b_events) = sim.connect("bob").await.unwrap();
        b.set_data("/g", b"yo", Some(0)).await.unwrap();
        sim.note("bob wrote /g");
        assert!(b.delete("/g", Some(0)).await.is_err());
        tokio::time::sleep(Duration::from_millis(10)).await;
        sim.trace().await
    });
    assert_eq!(
        trace,
        [
            "[      0.000ms] connect alice as session 0x1",
            "[      2.000ms] zxid=0x1 alice create_session -> ok",
            "[      4.000ms] deliver alice session Connected",
            "[      6.000ms] zxid=0x2 alice create /g persistent 2B -> /g",
            "[      8.000ms] deliver alice reply create /g persistent 2B -> /g",
            "[     10.000ms] read alice get_data /g watch -> 2B v0 mzxid=0x2",
            "[     12.000ms] deliver alice reply get_data /g watch -> 2B v0 mzxid=0x2",
            "[     12.000ms] connect bob as session 0x2",
            "[     14.000ms] zxid=0x3 bob create_session -> ok",
            "[     16.000ms] deliver bob session Connected",
            "[     18.000ms] zxid=0x4 bob set_data /g 2B v0 -> v1 mzxid=0x4",
            "[     20.000ms] deliver alice event NodeDataChanged /g",
            "[     20.000ms] deliver bob reply set_data /g 2B v0 -> v1 mzxid=0x4",
            "[     20.000ms] bob wrote /g",
            "[     22.000ms] zxid=0x5 bob delete /g v0 -> BadVersion",
            "[     24.000ms] deliver bob reply delete /g v0 -> BadVersion",
        ]
    );
}

#[test]
fn bad_input_is_refused_with_an_error_naming_it() {
    run_paused(async {
        let sim = SimZk::start(config(6, Latency::Zero));
        let (a, _events) = sim.connect("a").await.unwrap();
        for bad in ["", "a", "/a/", "/a//b", "/a/../b", "/a\u{0}"] {
            let invalid = |result: Result<(), ZkError>| match result {
                Err(ZkError::InvalidPath { path, .. }) => assert_eq!(path, bad),
                other => panic!("{bad:?}: {other:?}"),
            };
            invalid(a.create(bad, b"", CreateMode::Persistent).await.map(drop));
            invalid(a.delete(bad, None).await);
            invalid(a.exists(bad, Watch::Yes).await.map(drop));
            invalid(a.get_data(bad, Watch::No).await.map(drop));
            invalid(a.set_data(bad, b"", None).await.map(drop));
            invalid(a.get_children(bad, Watch::Yes).await.map(drop));
            invalid(a.sync(bad).await);
        }
        // A sequential prefix may end with '/'.
        a.create("/q", b"", CreateMode::Persistent).await.unwrap();
        assert_eq!(
            a.create("/q/", b"", CreateMode::PersistentSequential)
                .await
                .unwrap(),
            "/q/0000000000"
        );

        let too_big = vec![0u8; MAX_DATA_BYTES + 1];
        let error = a
            .create("/big", &too_big, CreateMode::Persistent)
            .await
            .unwrap_err();
        assert!(matches!(error, ZkError::DataTooLarge { ref path, .. } if path == "/big"));
        assert!(
            error.to_string().contains(&MAX_DATA_BYTES.to_string()),
            "{error}"
        );
        assert!(matches!(
            a.set_data("/q", &too_big, None).await,
            Err(ZkError::DataTooLarge { .. })
        ));
        a.create("/fits", &too_big[1..], CreateMode::Persistent)
            .await
            .unwrap();

        let error = a.set_data("/q", b"", Some(-1)).await.unwrap_err();
        assert!(matches!(error, ZkError::BadArguments { .. }));
        assert!(error.to_string().contains("/q"), "{error}");
        assert!(matches!(
            a.delete("/q", Some(-5)).await,
            Err(ZkError::BadArguments { .. })
        ));
        assert!(matches!(
            a.multi(vec![Op::Check {
                path: "/q".into(),
                version: -1
            }])
            .await,
            Err(ZkError::Multi { index: 0, .. })
        ));
        assert!(matches!(
            a.delete("/", None).await,
            Err(ZkError::BadArguments { .. })
        ));
        assert!(matches!(
            a.delete("/zookeeper", None).await,
            Err(ZkError::BadArguments { .. })
        ));

        // Controls on a session that does not exist do nothing.
        let nobody = SessionId(999);
        sim.expire(nobody).await;
        sim.cut(nobody, Duration::from_secs(1)).await;
        sim.crash(nobody).await;
        sim.hold(nobody).await;
        sim.release(nobody).await;
        assert!(
            sim.trace()
                .await
                .iter()
                .any(|l| l.contains("no such session"))
        );

        // A closed session refuses everything, and closing again is fine.
        a.close().await.unwrap();
        assert_eq!(a.exists("/", Watch::No).await, Err(ZkError::SessionClosed));
        assert_eq!(
            a.create("/z", b"", CreateMode::Persistent).await,
            Err(ZkError::SessionClosed)
        );
        assert_eq!(a.close().await, Ok(()));
    });
}

#[test]
fn close_deletes_ephemerals_fires_watches_and_ends_the_stream() {
    run_paused(async {
        let sim = SimZk::start(config(
            7,
            Latency::Uniform {
                min_us: 0,
                max_us: 3_000,
            },
        ));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, mut b_events) = sim.connect("b").await.unwrap();
        a.create("/e1", b"", CreateMode::Ephemeral).await.unwrap();
        a.create("/e2", b"", CreateMode::EphemeralSequential)
            .await
            .unwrap();
        b.get_children("/", Watch::Yes).await.unwrap();
        b.exists("/e1", Watch::Yes).await.unwrap();
        let _ = drain(&mut b_events);

        a.close().await.unwrap();
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Connected)
        );
        assert_eq!(next_event(&mut a_events).await, state(SessionState::Closed));
        assert_eq!(a_events.recv().await, None);
        assert_eq!(
            next_event(&mut b_events).await,
            watch(WatchKind::NodeDeleted, "/e1")
        );
        assert_eq!(
            next_event(&mut b_events).await,
            watch(WatchKind::NodeChildrenChanged, "/")
        );
        let (children, _) = b.get_children("/", Watch::No).await.unwrap();
        assert_eq!(children, ["zookeeper"]);
    });
}

#[test]
fn absurd_latencies_and_outages_do_not_panic() {
    run_paused(async {
        let sim = SimZk::start(config(8, Latency::Fixed { ms: u64::MAX }));
        let connecting = tokio::spawn({
            let sim = sim.clone();
            async move { sim.connect("slow").await }
        });
        tokio::time::sleep(Duration::from_secs(3_600)).await;
        assert!(!connecting.is_finished(), "the handshake never arrives");
        assert!(sim.trace().await[0].contains("connect slow"));

        let sim = SimZk::start(config(8, Latency::Zero));
        let (a, mut events) = sim.connect("a").await.unwrap();
        let (b, _b_events) = sim.connect("b").await.unwrap();
        a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
        sim.cut(a.session_id(), Duration::MAX).await;
        tokio::time::sleep(Duration::from_secs(3_600)).await;
        assert_eq!(
            drain(&mut events),
            [
                state(SessionState::Connected),
                state(SessionState::Disconnected)
            ]
        );
        assert!(matches!(
            a.exists("/", Watch::No).await,
            Err(ZkError::ConnectionLoss { .. })
        ));
        assert_eq!(
            b.exists("/e", Watch::No).await.unwrap(),
            None,
            "expired meanwhile"
        );
    });
}
