//! A server answering reads as of an older zxid ([`Server::read_as_of`]):
//! what the read sees, the watch it leaves, and the tree it leaves behind.

use zkdist_coord::{CreateMode, Reply, Request as Call, SessionId, WatchEvent, WatchKind};

use crate::history::ChangeAt;
use crate::request::Request;
use crate::server::{Applied, Ending, Server};
use crate::watches::ClientWatch;

const A: SessionId = SessionId(1);
const B: SessionId = SessionId(2);

fn server_keeping(capacity_txns: usize) -> Server {
    let mut server = Server::default();
    server.keep_history(capacity_txns);
    server.apply(A, Request::CreateSession);
    server.apply(B, Request::CreateSession);
    server
}

fn write(server: &mut Server, session: SessionId, call: Call) -> i64 {
    let applied = server.apply(session, call);
    assert!(applied.result.is_ok(), "{:?}", applied.result);
    applied.zxid.expect("a write")
}

fn create(
    server: &mut Server,
    session: SessionId,
    path: &str,
    data: &[u8],
    mode: CreateMode,
) -> i64 {
    write(
        server,
        session,
        Call::Create {
            path: path.into(),
            data: data.to_vec(),
            mode,
        },
    )
}

fn set_data(server: &mut Server, path: &str, data: &[u8]) -> i64 {
    write(
        server,
        A,
        Call::SetData {
            path: path.into(),
            data: data.to_vec(),
            version: None,
        },
    )
}

fn get_data(path: &str, watch: bool) -> Call {
    Call::GetData {
        path: path.into(),
        watch,
    }
}

fn data_of(reply: &Reply) -> (&[u8], i32) {
    match reply {
        Reply::Data(data, stat) => (data, stat.version),
        other => panic!("not a data reply: {other:?}"),
    }
}

fn tree_text(server: &Server) -> String {
    format!("{:?}", server.tree())
}

/// Events a later write fires, as (session, kind, path).
fn fired(applied: &Applied) -> Vec<(SessionId, WatchKind, &str)> {
    applied
        .events
        .iter()
        .map(|(session, event)| (*session, event.kind, event.path.as_str()))
        .collect()
}

#[test]
fn a_read_as_of_an_older_zxid_sees_the_tree_as_it_was_and_leaves_it_as_it_is() {
    let mut server = server_keeping(16);
    let created = create(&mut server, A, "/a", b"one", CreateMode::Persistent);
    set_data(&mut server, "/a", b"two");
    create(&mut server, A, "/a/b", b"", CreateMode::Persistent);
    create(
        &mut server,
        A,
        "/a/q-",
        b"",
        CreateMode::PersistentSequential,
    );
    let now = tree_text(&server);

    let old = server.read_as_of(B, &get_data("/a", false), created);
    assert_eq!(data_of(&old.result.unwrap()), (&b"one"[..], 0));
    let children = Call::GetChildren {
        path: "/a".into(),
        watch: false,
    };
    match server.read_as_of(B, &children, created).result.unwrap() {
        Reply::Children(names, stat) => {
            assert!(names.is_empty(), "{names:?}");
            assert_eq!((stat.num_children, stat.pzxid), (0, created));
        }
        other => panic!("{other:?}"),
    }
    let before_it = server.read_as_of(B, &get_data("/a", false), created - 1);
    assert!(before_it.result.is_err(), "/a did not exist yet");

    // Nothing moved: not the nodes, their stats, nor the sequence counter.
    assert_eq!(tree_text(&server), now);
    server.check_invariants();
    // /a/b took number 0 and /a/q-0000000001 number 1.
    create(
        &mut server,
        A,
        "/a/q-",
        b"",
        CreateMode::PersistentSequential,
    );
    assert!(server.tree().exists("/a/q-0000000002"));
}

#[test]
fn a_read_as_of_the_current_zxid_is_a_plain_read() {
    let mut server = server_keeping(4);
    create(&mut server, A, "/a", b"one", CreateMode::Persistent);
    let current = set_data(&mut server, "/a", b"two");
    let read = server.read_as_of(B, &get_data("/a", true), current);
    assert_eq!(data_of(&read.result.unwrap()), (&b"two"[..], 1));
    assert!(read.owed_event.is_none());
    let applied = server.apply(
        A,
        Call::SetData {
            path: "/a".into(),
            data: vec![],
            version: None,
        },
    );
    assert_eq!(fired(&applied), [(B, WatchKind::NodeDataChanged, "/a")]);
}

#[test]
fn a_watch_left_as_of_the_past_is_owed_the_first_change_since() {
    let mut server = server_keeping(16);
    let before = server.tree().zxid();
    let created = create(&mut server, A, "/x", b"", CreateMode::Persistent);
    set_data(&mut server, "/x", b"later");

    // An exists watch on the missing /x: /x was created since.
    let exists = Call::Exists {
        path: "/x".into(),
        watch: true,
    };
    let read = server.read_as_of(B, &exists, before);
    assert!(matches!(read.result, Ok(Reply::Exists(None))));
    assert_eq!(
        read.owed_event,
        Some((
            WatchEvent {
                kind: WatchKind::NodeCreated,
                path: "/x".into()
            },
            ChangeAt {
                zxid: created,
                trigger: 0
            }
        ))
    );
    // Owed, so not kept: the next change tells B nothing more.
    let applied = server.apply(
        A,
        Call::SetData {
            path: "/x".into(),
            data: vec![],
            version: None,
        },
    );
    assert!(fired(&applied).is_empty(), "{:?}", fired(&applied));

    // A child watch as of a time /x had no children, then one came and
    // /x was deleted with it: the first change since is the child's.
    let child = create(&mut server, A, "/x/c", b"", CreateMode::Persistent);
    let as_of = child - 1;
    write(
        &mut server,
        A,
        Call::Delete {
            path: "/x/c".into(),
            version: None,
        },
    );
    let children = Call::GetChildren {
        path: "/x".into(),
        watch: true,
    };
    let read = server.read_as_of(B, &children, as_of);
    let (event, zxid) = read.owed_event.expect("the child watch is owed its event");
    assert_eq!(
        (event.kind, zxid),
        (
            WatchKind::NodeChildrenChanged,
            ChangeAt {
                zxid: child,
                // After the child's own NodeCreated.
                trigger: 1
            }
        )
    );
    server.check_invariants();
}

#[test]
fn a_watch_with_nothing_owed_is_kept_and_fires_on_the_next_change() {
    let mut server = server_keeping(16);
    create(&mut server, A, "/x", b"", CreateMode::Persistent);
    let as_of = set_data(&mut server, "/x", b"two");
    // Later changes elsewhere do not concern a watch on /x.
    create(&mut server, A, "/y", b"", CreateMode::Persistent);
    let read = server.read_as_of(B, &get_data("/x", true), as_of);
    assert_eq!(data_of(&read.result.unwrap()), (&b"two"[..], 1));
    assert!(read.owed_event.is_none());
    let applied = server.apply(
        A,
        Call::Delete {
            path: "/x".into(),
            version: None,
        },
    );
    assert_eq!(fired(&applied), [(B, WatchKind::NodeDeleted, "/x")]);
    server.check_invariants();
}

#[test]
fn multis_and_session_ends_are_taken_back_too() {
    let mut server = server_keeping(16);
    create(&mut server, A, "/e", b"", CreateMode::Ephemeral);
    let before_multi = create(&mut server, A, "/q", b"", CreateMode::Persistent);
    write(
        &mut server,
        A,
        Call::Multi {
            ops: vec![
                zkdist_coord::Op::Create {
                    path: "/q/r".into(),
                    data: b"r".to_vec(),
                    mode: CreateMode::Persistent,
                },
                zkdist_coord::Op::Delete {
                    path: "/q/r".into(),
                    version: None,
                },
                zkdist_coord::Op::SetData {
                    path: "/q".into(),
                    data: b"after".to_vec(),
                    version: Some(0),
                },
            ],
        },
    );
    // A failed write takes a zxid and changes nothing.
    let failed = server.apply(
        A,
        Call::Create {
            path: "/q".into(),
            data: vec![],
            mode: CreateMode::Persistent,
        },
    );
    assert!(failed.result.is_err());
    let order = vec!["/e".to_owned()];
    server.end_session(A, Ending::Expire, &order).unwrap();
    let now = tree_text(&server);

    let exists_e = Call::Exists {
        path: "/e".into(),
        watch: false,
    };
    match server
        .read_as_of(B, &exists_e, before_multi)
        .result
        .unwrap()
    {
        Reply::Exists(Some(stat)) => assert_eq!(stat.ephemeral_owner, A.0),
        other => panic!("the ephemeral was there before A expired: {other:?}"),
    }
    let read = server.read_as_of(B, &get_data("/q", false), before_multi);
    assert_eq!(data_of(&read.result.unwrap()), (&b""[..], 0));
    assert_eq!(tree_text(&server), now);
    server.check_invariants();
}

#[test]
fn reads_reach_back_as_far_as_the_history_keeps() {
    let mut server = server_keeping(3);
    let first = create(&mut server, A, "/a", b"", CreateMode::Persistent);
    assert_eq!(server.oldest_readable_zxid(), 0, "the two sessions and /a");
    for n in 0..5 {
        set_data(&mut server, "/a", format!("{n}").as_bytes());
    }
    let current = server.tree().zxid();
    assert_eq!(current, first + 5);
    assert_eq!(server.oldest_readable_zxid(), current - 3);
    let read = server.read_as_of(B, &get_data("/a", false), current - 3);
    assert_eq!(data_of(&read.result.unwrap()), (&b"1"[..], 2));

    // A counter moved by hand is no transaction: the past is out of reach.
    server.set_sequence_counter("/a", 7).unwrap();
    assert_eq!(server.oldest_readable_zxid(), current);
}

#[test]
#[should_panic(expected = "reaches before the history")]
fn a_read_before_the_history_is_refused() {
    let mut server = server_keeping(1);
    create(&mut server, A, "/a", b"", CreateMode::Persistent);
    let current = set_data(&mut server, "/a", b"x");
    server.read_as_of(B, &get_data("/a", false), current - 2);
}

/// A session reconnects through a server as of zxid `as_of`: `SetWatches`
/// is answered as of there, and the watches registered again fire, in the
/// order of the changes, as that server applies what it is behind on.
#[test]
fn a_reconnect_through_a_lagging_server_fires_the_watches_registered_again_as_it_catches_up() {
    let mut server = server_keeping(16);
    create(&mut server, A, "/d", b"", CreateMode::Persistent);
    let last_seen = create(&mut server, A, "/d/n", b"", CreateMode::Persistent);
    server.detach(B);
    let as_of = set_data(&mut server, "/d/n", b"changed");
    let created = create(&mut server, A, "/d/m", b"", CreateMode::Persistent);
    write(
        &mut server,
        A,
        Call::Delete {
            path: "/d/n".into(),
            version: None,
        },
    );
    let held: std::collections::BTreeSet<(ClientWatch, String)> = [
        (ClientWatch::Data, "/d/n"),
        (ClientWatch::Child, "/d"),
        (ClientWatch::Persistent, "/d/m"),
        (ClientWatch::Exist, "/d/never"),
    ]
    .into_iter()
    .map(|(watch, path)| (watch, path.to_owned()))
    .collect();
    let reattached = server.reattach(B, &held, last_seen, as_of);

    // As of `as_of`, /d/n changed after what B last saw: fired at once.
    let now: Vec<_> = reattached
        .fired_now
        .iter()
        .map(|e| (e.kind, e.path.as_str()))
        .collect();
    assert_eq!(now, [(WatchKind::NodeDataChanged, "/d/n")]);
    // Then the create of /d/m fires the persistent watch on it and the
    // child watch on /d, in the create's order; the delete of /d/n after
    // it finds the child watch gone (one-shot) and the data watch fired.
    let owed: Vec<_> = reattached
        .owed
        .iter()
        .map(|(e, at)| (e.kind, e.path.as_str(), at.zxid, at.trigger))
        .collect();
    assert_eq!(
        owed,
        [
            (WatchKind::NodeCreated, "/d/m", created, 0),
            (WatchKind::NodeChildrenChanged, "/d", created, 1),
        ]
    );
    // What did not fire is registered: the persistent watch and the exists
    // watch on the node that never came.
    assert_eq!(server.watch_count(), 2);
    server.check_invariants();
}
