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
                    version: Some(7),
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
                version: Some(-1)
            }])
            .await,
            Err(ZkError::Multi { index: 0, .. })
        ));
        // Two writes that each fit make one request that does not.
        let half = vec![0u8; MAX_DATA_BYTES / 2 + 1];
        let two_halves = vec![
            Op::SetData {
                path: "/q".into(),
                data: half.clone(),
                version: None,
            },
            Op::SetData {
                path: "/fits".into(),
                data: half,
                version: None,
            },
        ];
        assert!(matches!(
            a.multi(two_halves).await,
            Err(ZkError::RequestTooLarge { request, .. }) if request == "multi of 2 ops"
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
        // The closing session watches one of its own ephemerals.
        a.exists("/e1", Watch::Yes).await.unwrap();
        let _ = drain(&mut b_events);

        a.close().await.unwrap();
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Connected)
        );
        // As on a 3.8 server, the closer hears its watched ephemeral go
        // before its session is reported closed.
        assert_eq!(
            next_event(&mut a_events).await,
            watch(WatchKind::NodeDeleted, "/e1")
        );
        assert_eq!(next_event(&mut a_events).await, state(SessionState::Closed));
        assert_eq!(a_events.recv().await, None);
        // The ephemerals go in a seeded order, so B's two events come in
        // either order.
        let mut heard = vec![
            next_event(&mut b_events).await,
            next_event(&mut b_events).await,
        ];
        heard.sort_by_key(|event| format!("{event:?}"));
        assert_eq!(
            heard,
            [
                watch(WatchKind::NodeChildrenChanged, "/"),
                watch(WatchKind::NodeDeleted, "/e1"),
            ]
        );
        let (children, _) = b.get_children("/", Watch::No).await.unwrap();
        assert_eq!(children, ["zookeeper"]);
    });
}

/// Dropping a session's last handle closes it, as a real client does when
/// its last handle goes: within a round trip the server deletes its
/// ephemerals. Dropping one clone of several does nothing.
#[test]
fn dropping_the_last_handle_closes_the_session() {
    run_paused(async {
        let sim = SimZk::start(config(10, Latency::Fixed { ms: 1 }));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, mut b_events) = sim.connect("b").await.unwrap();
        a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
        b.exists("/e", Watch::Yes).await.unwrap();
        let _ = drain(&mut b_events);

        let clone = a.clone();
        drop(a);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(
            sim.inspect(|tree| tree.exists("/e")).await,
            "a clone still holds the session"
        );

        let dropped_at = tokio::time::Instant::now();
        drop(clone);
        assert_eq!(
            next_event(&mut b_events).await,
            watch(WatchKind::NodeDeleted, "/e")
        );
        // The close's trip to the server and the event's back, and under
        // madsim a little scheduling time.
        assert!(
            dropped_at.elapsed() <= Duration::from_millis(3),
            "gone within a round trip: {:?}",
            dropped_at.elapsed()
        );
        assert_eq!(
            drain(&mut a_events),
            [state(SessionState::Connected), state(SessionState::Closed)]
        );
        assert_eq!(a_events.recv().await, None, "the stream ends");
        let trace = sim.trace().await;
        assert!(
            trace
                .iter()
                .any(|l| l.ends_with("drop a: last handle dropped, closing")),
            "{trace:#?}"
        );
        assert!(
            trace.iter().any(|l| l.contains("a close -> deleted [/e]")),
            "{trace:#?}"
        );
    });
}

/// A handle dropped after its session crashed (a dead process's memory
/// going away) or expired closes nothing: the crashed session's ephemeral
/// lives until the session timeout.
#[test]
fn dropping_a_crashed_or_expired_sessions_last_handle_closes_nothing() {
    run_paused(async {
        let sim = SimZk::start(SimConfig {
            session_timeout_ms: 2_000,
            ..config(11, Latency::Fixed { ms: 1 })
        });
        let (crashed, _crashed_events) = sim.connect("crashed").await.unwrap();
        let (expired, _expired_events) = sim.connect("expired").await.unwrap();
        crashed
            .create("/c", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        let crashed_id = crashed.session_id();
        sim.crash(crashed_id).await;
        drop(crashed);
        sim.expire(expired.session_id()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(expired);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            sim.inspect(|tree| tree.exists("/c")).await,
            "the server waits for the session timeout"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!sim.inspect(|tree| tree.exists("/c")).await);
        let trace = sim.trace().await;
        for name in ["crashed", "expired"] {
            let dropped: Vec<&String> = trace
                .iter()
                .filter(|l| l.contains(&format!("drop {name}:")))
                .collect();
            assert_eq!(dropped.len(), 1, "{trace:#?}");
            assert!(dropped[0].contains("nothing to close"), "{dropped:?}");
        }
        assert!(
            trace
                .iter()
                .any(|l| l.contains("crashed expire (session timeout) -> deleted [/c]")),
            "{trace:#?}"
        );
        assert!(!trace.iter().any(|l| l.contains("close ->")), "{trace:#?}");
    });
}

/// Every hop takes the delay drawn for it, to the microsecond: delays
/// under a millisecond are not rounded up to the runtime's timer tick, and
/// the seed shows in them.
#[test]
fn sub_millisecond_delays_keep_their_microseconds() {
    let hops = |seed: u64| {
        let trace = run_seeded(seed, async move {
            let sim = SimZk::start(config(
                seed,
                Latency::Uniform {
                    min_us: 100,
                    max_us: 900,
                },
            ));
            let (a, _events) = sim.connect("a").await.unwrap();
            a.create("/x", b"", CreateMode::Persistent).await.unwrap();
            for _ in 0..5 {
                a.get_data("/x", Watch::No).await.unwrap();
            }
            sim.trace().await
        });
        let micros = |line: &String| -> u64 {
            let stamp = line[1..line.find("ms]").expect("a timestamp")].trim();
            let (ms, us) = stamp.split_once('.').expect("ms.us");
            ms.parse::<u64>().unwrap() * 1000 + us.parse::<u64>().unwrap()
        };
        // One session, one request at a time: each line is one hop after
        // the one before. Each hop: whether it reached the client, and how
        // long it took.
        trace
            .windows(2)
            .map(|pair| {
                let to_client = pair[1].contains("] deliver a ");
                (to_client, micros(&pair[1]) - micros(&pair[0]))
            })
            .collect::<Vec<(bool, u64)>>()
    };
    let first = hops(1);
    assert_eq!(first.len(), 14, "{first:?}");
    for &(to_client, hop_us) in &first {
        // A hop to the server starts when the client reacts to the reply
        // before it: at once on tokio's scheduler, while madsim's may run
        // the client a little later (its timers wake no sooner than a
        // millisecond ahead, so the driver may deliver before the client
        // runs). Hops to the client are exact on both.
        let exact = to_client || cfg!(not(madsim));
        assert!(
            hop_us >= 100 && (!exact || hop_us <= 900),
            "a hop within the drawn bounds: {first:?}"
        );
    }
    assert_eq!(first, hops(1), "same seed, same delays");
    assert_ne!(first, hops(2), "the seed shows below a millisecond");
}

/// Two messages for one session due at the same instant: the task the
/// first one wakes runs before the second is delivered, as it could on a
/// real network. Here the read's caller looks at its stream as soon as the
/// reply is in and finds the later event not yet there.
///
/// Only on tokio's scheduler, which runs woken tasks in order: madsim's
/// picks the next task at random, so it may deliver the event first, which
/// is a legitimate interleaving too.
#[cfg(not(madsim))]
#[test]
fn each_delivery_lets_the_task_it_wakes_run_before_the_next_one() {
    run_paused(async {
        let sim = SimZk::start(config(12, Latency::Fixed { ms: 1 }));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, _b_events) = sim.connect("b").await.unwrap();
        b.create("/x", b"", CreateMode::Persistent).await.unwrap();
        let _ = drain(&mut a_events);

        sim.hold(a.session_id()).await;
        let reader = tokio::spawn({
            let a = a.clone();
            async move {
                let read = a.get_data("/x", Watch::Yes).await;
                let seen = drain(&mut a_events);
                (read, seen, a_events)
            }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        // Its event queues behind the held reply.
        b.set_data("/x", b"new", None).await.unwrap();
        sim.release(a.session_id()).await;

        let (read, seen_with_the_reply, mut a_events) = reader.await.unwrap();
        assert_eq!(read.unwrap().1.version, 0);
        assert_eq!(seen_with_the_reply, [], "the event comes after");
        assert_eq!(
            next_event(&mut a_events).await,
            watch(WatchKind::NodeDataChanged, "/x")
        );
        let trace = sim.trace().await;
        let reply_at = trace
            .iter()
            .position(|l| l.contains("deliver a reply get_data /x watch"))
            .unwrap();
        assert!(
            trace[reply_at + 1].contains("deliver a event NodeDataChanged /x"),
            "{trace:#?}"
        );
        assert_eq!(
            trace[reply_at][..15],
            trace[reply_at + 1][..15],
            "same instant"
        );
    });
}

/// ZooKeeper deletes a session's ephemerals in a hash set's order: the
/// simulation's order comes from the seed, and differs between seeds.
#[test]
fn ephemerals_of_an_ending_session_go_in_a_seeded_order() {
    let deletion_order = |seed: u64| {
        run_seeded(seed, async move {
            let sim = SimZk::start(config(seed, Latency::Zero));
            let (sender, mut applied) = mpsc::unbounded_channel();
            sim.on_apply(move |op, _tree| {
                if op.kind == TxnKind::CloseSession {
                    let _ = sender.send(op.changes.clone());
                }
            })
            .await;
            let (a, _events) = sim.connect("a").await.unwrap();
            for i in 0..8 {
                a.create(&format!("/e{i}"), b"", CreateMode::Ephemeral)
                    .await
                    .unwrap();
            }
            a.close().await.unwrap();
            applied.recv().await.expect("the close transaction")
        })
    };
    let orders: Vec<Vec<Change>> = (0..5).map(deletion_order).collect();
    assert_eq!(orders[0], deletion_order(0), "same seed, same order");
    assert!(
        orders.iter().any(|order| *order != orders[0]),
        "seeds shuffle"
    );
    let sorted: Vec<Change> = (0..8).map(|i| Change::Deleted(format!("/e{i}"))).collect();
    for mut order in orders {
        order.sort();
        assert_eq!(order, sorted, "each ephemeral deleted once");
    }
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
        // A request waits for a reconnection that never comes.
        let waiting = tokio::spawn({
            let a = a.clone();
            async move { a.exists("/", Watch::No).await }
        });
        tokio::time::sleep(Duration::from_secs(3_600)).await;
        assert!(!waiting.is_finished());
        assert_eq!(
            b.exists("/e", Watch::No).await.unwrap(),
            None,
            "expired meanwhile"
        );
    });
}
