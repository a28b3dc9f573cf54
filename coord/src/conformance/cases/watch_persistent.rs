//! Persistent and persistent-recursive watches (`addWatch`, ZooKeeper
//! 3.6+): never consumed, a recursive one reports its whole subtree on the
//! path that changed and never `NodeChildrenChanged`, one event per change
//! per session whatever number of watches the change fires, kept across a
//! reconnect and gone with the session.
//!
//! Behaviour the Programmer's Guide leaves open, as a 3.8 server shows it
//! (and the simulator reproduces): a recursive watch reports its own node
//! too (created, changed, deleted); a deletion below it is reported as
//! `NodeDeleted` on the deleted node's path; a persistent watch stays after
//! its node is deleted and reports the node's re-creation.

use std::sync::Arc;
use std::time::Duration;

use crate::conformance::{
    Backend, TestSession, connect, create_dir, create_node, expect_code, expect_multi_error,
    op_check, op_create, op_delete, op_set_data, under, watch_event,
};
use crate::{AddWatchMode, Coordinator, CreateMode, ErrorCode, Event, SessionState, Watch};
use crate::{WatchKind, ZkError};

use AddWatchMode::{Persistent, PersistentRecursive};
use WatchKind::{NodeChildrenChanged, NodeCreated, NodeDataChanged, NodeDeleted};

/// A cut well under every backend's session timeout.
const SHORT_CUT: Duration = Duration::from_secs(1);

async fn add_watch<S: Coordinator>(s: &TestSession<S>, path: &str, mode: AddWatchMode) {
    s.zk.add_watch(path, mode)
        .await
        .unwrap_or_else(|e| panic!("add_watch({path}, {mode:?}): {e}"));
}

pub async fn persistent_watch_fires_on_every_change_of_its_node<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let mut writer = connect(&*b).await;
    let node = create_dir(&writer.zk, b.root(), "node").await;
    watcher.zk.sync(&node).await.unwrap();
    add_watch(&watcher, &node, Persistent).await;

    for data in [b"1", b"2", b"3"] {
        writer.zk.set_data(&node, data, None).await.unwrap();
        watcher.expect_watch(NodeDataChanged, &node).await;
    }
    let child = create_node(&writer.zk, &under(&node, "c"), b"", CreateMode::Persistent).await;
    watcher.expect_watch(NodeChildrenChanged, &node).await;
    // A child's own changes are not the node's.
    writer.zk.set_data(&child, b"x", None).await.unwrap();
    watcher.assert_no_event().await;
    writer.zk.delete(&child, None).await.unwrap();
    watcher.expect_watch(NodeChildrenChanged, &node).await;
    writer.zk.delete(&node, None).await.unwrap();
    watcher.expect_watch(NodeDeleted, &node).await;
    watcher.assert_no_event().await;
    // Still there after its node went: the node's return is reported.
    create_node(&writer.zk, &node, b"", CreateMode::Persistent).await;
    watcher.expect_watch(NodeCreated, &node).await;
    watcher.assert_no_event().await;
    // Only the session that set it hears.
    writer.assert_no_event().await;
}

pub async fn persistent_watch_on_a_missing_node_fires_on_create<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    for (name, mode) in [("plain", Persistent), ("recursive", PersistentRecursive)] {
        let node = under(b.root(), name);
        add_watch(&watcher, &node, mode).await;
        create_node(&writer.zk, &node, b"", CreateMode::Persistent).await;
        watcher.expect_watch(NodeCreated, &node).await;
        watcher.assert_no_event().await;
    }
}

pub async fn recursive_watch_reports_the_subtree_on_the_changed_path<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    add_watch(&watcher, &dir, PersistentRecursive).await;

    let child = create_node(&writer.zk, &under(&dir, "a"), b"", CreateMode::Persistent).await;
    let grandchild =
        create_node(&writer.zk, &under(&dir, "a/b"), b"", CreateMode::Persistent).await;
    writer.zk.set_data(&grandchild, b"x", None).await.unwrap();
    writer.zk.set_data(&grandchild, b"y", None).await.unwrap();
    writer.zk.delete(&grandchild, None).await.unwrap();
    writer.zk.delete(&child, None).await.unwrap();
    // Every change on the changed node's own path, none of them as a child
    // change of its parent.
    watcher
        .expect_events(&[
            watch_event(NodeCreated, &child),
            watch_event(NodeCreated, &grandchild),
            watch_event(NodeDataChanged, &grandchild),
            watch_event(NodeDataChanged, &grandchild),
            watch_event(NodeDeleted, &grandchild),
            watch_event(NodeDeleted, &child),
        ])
        .await;
    watcher.assert_no_event().await;
}

pub async fn recursive_watch_reports_its_own_node<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    add_watch(&watcher, &dir, PersistentRecursive).await;

    writer.zk.set_data(&dir, b"x", None).await.unwrap();
    writer.zk.delete(&dir, None).await.unwrap();
    create_node(&writer.zk, &dir, b"", CreateMode::Persistent).await;
    watcher
        .expect_events(&[
            watch_event(NodeDataChanged, &dir),
            watch_event(NodeDeleted, &dir),
            watch_event(NodeCreated, &dir),
        ])
        .await;
    watcher.assert_no_event().await;
}

pub async fn recursive_watch_ignores_nodes_outside_its_subtree<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "a").await;
    watcher.zk.sync(&dir).await.unwrap();
    add_watch(&watcher, &dir, PersistentRecursive).await;
    // A sibling whose name starts with the watched one's, and the parent.
    let sibling = create_dir(&writer.zk, b.root(), "ab").await;
    writer.zk.set_data(&sibling, b"x", None).await.unwrap();
    writer.zk.set_data(b.root(), b"x", None).await.unwrap();
    watcher.assert_no_event().await;
    let inside = create_dir(&writer.zk, &dir, "in").await;
    watcher.expect_watch(NodeCreated, &inside).await;
    watcher.assert_no_event().await;
}

pub async fn persistent_and_one_shot_watches_on_one_node_report_each_change_once<B: Backend>(
    b: Arc<B>,
) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let node = create_dir(&writer.zk, b.root(), "node").await;
    watcher.zk.sync(&node).await.unwrap();
    add_watch(&watcher, &node, Persistent).await;
    // One-shot watches of both classes on the same node, after the
    // persistent one: each change they cover is still one event, and the
    // persistent watch outlives them.
    watcher.zk.get_data(&node, Watch::Yes).await.unwrap();
    watcher.zk.get_children(&node, Watch::Yes).await.unwrap();
    for data in [b"1", b"2"] {
        writer.zk.set_data(&node, data, None).await.unwrap();
        watcher.expect_watch(NodeDataChanged, &node).await;
        watcher.assert_no_event().await;
    }
    for name in ["c1", "c2"] {
        create_node(&writer.zk, &under(&node, name), b"", CreateMode::Persistent).await;
        watcher.expect_watch(NodeChildrenChanged, &node).await;
        watcher.assert_no_event().await;
    }
    // Re-armed one-shots, then a deletion that fires all three watches.
    watcher.zk.exists(&node, Watch::Yes).await.unwrap();
    watcher.zk.get_children(&node, Watch::Yes).await.unwrap();
    for name in ["c1", "c2"] {
        writer.zk.delete(&under(&node, name), None).await.unwrap();
    }
    writer.zk.delete(&node, None).await.unwrap();
    watcher
        .expect_events(&[
            watch_event(NodeChildrenChanged, &node),
            watch_event(NodeChildrenChanged, &node),
            watch_event(NodeDeleted, &node),
        ])
        .await;
    watcher.assert_no_event().await;
}

pub async fn one_shot_watch_set_before_a_persistent_one_fires_once_with_it<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let node = create_dir(&writer.zk, b.root(), "node").await;
    watcher.zk.sync(&node).await.unwrap();
    watcher.zk.get_data(&node, Watch::Yes).await.unwrap();
    add_watch(&watcher, &node, PersistentRecursive).await;
    for data in [b"1", b"2"] {
        writer.zk.set_data(&node, data, None).await.unwrap();
        watcher.expect_watch(NodeDataChanged, &node).await;
        watcher.assert_no_event().await;
    }
    let child = create_dir(&writer.zk, &node, "c").await;
    watcher.expect_watch(NodeCreated, &child).await;
    watcher.assert_no_event().await;
}

pub async fn recursive_watch_survives_a_one_shot_watch_on_its_own_node<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    add_watch(&watcher, &dir, PersistentRecursive).await;
    // Issued without waiting for each other: the reads go out right after
    // the watch, on the same node.
    let (exists, data) = tokio::join!(
        watcher.zk.exists(&dir, Watch::Yes),
        watcher.zk.get_data(&dir, Watch::Yes)
    );
    exists.unwrap().expect("the directory exists");
    data.unwrap();
    writer.zk.set_data(&dir, b"x", None).await.unwrap();
    watcher.expect_watch(NodeDataChanged, &dir).await;
    watcher.assert_no_event().await;
    // The one-shot watches are spent; the recursive one still reports the
    // node and everything below it.
    writer.zk.set_data(&dir, b"y", None).await.unwrap();
    watcher.expect_watch(NodeDataChanged, &dir).await;
    let child = create_dir(&writer.zk, &dir, "c").await;
    watcher.expect_watch(NodeCreated, &child).await;
    watcher.assert_no_event().await;
    // A one-shot child watch on the node adds the child change the
    // recursive watch never reports, once; the recursive watch stays.
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    let second = create_dir(&writer.zk, &dir, "d").await;
    watcher
        .expect_events(&[
            watch_event(NodeCreated, &second),
            watch_event(NodeChildrenChanged, &dir),
        ])
        .await;
    let third = create_dir(&writer.zk, &dir, "e").await;
    watcher.expect_watch(NodeCreated, &third).await;
    writer.zk.set_data(&dir, b"z", None).await.unwrap();
    watcher.expect_watch(NodeDataChanged, &dir).await;
    watcher.assert_no_event().await;
}

pub async fn recursive_and_one_shot_watches_below_it_report_each_change_once<B: Backend>(
    b: Arc<B>,
) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    add_watch(&watcher, &dir, PersistentRecursive).await;
    let node = under(&dir, "a");
    let leaf = under(&node, "b");

    assert_eq!(watcher.zk.exists(&node, Watch::Yes).await.unwrap(), None);
    create_node(&writer.zk, &node, b"", CreateMode::Persistent).await;
    watcher.expect_watch(NodeCreated, &node).await;
    watcher.assert_no_event().await;

    // The one-shot child watch adds what the recursive one never reports.
    watcher.zk.get_children(&node, Watch::Yes).await.unwrap();
    create_node(&writer.zk, &leaf, b"", CreateMode::Persistent).await;
    watcher
        .expect_events(&[
            watch_event(NodeCreated, &leaf),
            watch_event(NodeChildrenChanged, &node),
        ])
        .await;
    writer.zk.delete(&leaf, None).await.unwrap();
    watcher.expect_watch(NodeDeleted, &leaf).await;
    watcher.assert_no_event().await;

    // A deletion fires the child watch and the recursive one: one event.
    watcher.zk.get_children(&node, Watch::Yes).await.unwrap();
    watcher.zk.get_data(&node, Watch::Yes).await.unwrap();
    writer.zk.delete(&node, None).await.unwrap();
    watcher.expect_watch(NodeDeleted, &node).await;
    watcher.assert_no_event().await;
}

pub async fn same_mode_twice_and_an_ancestor_watch_report_each_change_once<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    add_watch(&watcher, &dir, PersistentRecursive).await;
    add_watch(&watcher, &dir, PersistentRecursive).await;
    let node = create_dir(&writer.zk, &dir, "node").await;
    watcher.expect_watch(NodeCreated, &node).await;
    watcher.assert_no_event().await;
    add_watch(&watcher, &node, Persistent).await;
    add_watch(&watcher, &node, Persistent).await;
    // Three watches see the node change (its own and two recursive ones
    // above it), one of them its child change. Each change is awaited
    // before the next: the order of one burst of changes seen through
    // several persistent watches is not what this case checks.
    add_watch(&watcher, b.root(), PersistentRecursive).await;
    let child = under(&node, "c");
    writer.zk.set_data(&node, b"x", None).await.unwrap();
    watcher.expect_watch(NodeDataChanged, &node).await;
    create_node(&writer.zk, &child, b"", CreateMode::Persistent).await;
    watcher
        .expect_events(&[
            watch_event(NodeCreated, &child),
            watch_event(NodeChildrenChanged, &node),
        ])
        .await;
    writer.zk.set_data(&child, b"x", None).await.unwrap();
    watcher.expect_watch(NodeDataChanged, &child).await;
    writer.zk.delete(&child, None).await.unwrap();
    watcher
        .expect_events(&[
            watch_event(NodeDeleted, &child),
            watch_event(NodeChildrenChanged, &node),
        ])
        .await;
    writer.zk.delete(&node, None).await.unwrap();
    watcher.expect_watch(NodeDeleted, &node).await;
    watcher.assert_no_event().await;
}

pub async fn add_watch_of_the_other_mode_on_a_watched_node_is_refused<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    // Refused whether the first watch is confirmed or still in flight.
    add_watch(&watcher, &dir, PersistentRecursive).await;
    let refused = watcher.zk.add_watch(&dir, Persistent).await;
    expect_code(
        refused,
        ErrorCode::BadArguments,
        "the other mode, confirmed",
    );
    let other = under(b.root(), "other");
    let (first, second) = tokio::join!(
        watcher.zk.add_watch(&other, Persistent),
        watcher.zk.add_watch(&other, PersistentRecursive)
    );
    first.unwrap();
    expect_code(second, ErrorCode::BadArguments, "the other mode, in flight");
    // The first watches are untouched.
    let child = create_dir(&writer.zk, &dir, "c").await;
    watcher.expect_watch(NodeCreated, &child).await;
    let other = create_dir(&writer.zk, b.root(), "other").await;
    create_dir(&writer.zk, &other, "c").await;
    watcher
        .expect_events(&[
            watch_event(NodeCreated, &other),
            watch_event(NodeChildrenChanged, &other),
        ])
        .await;
    watcher.assert_no_event().await;
}

pub async fn own_write_reports_through_a_persistent_watch_before_its_reply<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    add_watch(&s, &dir, PersistentRecursive).await;
    for round in 0..3 {
        let child = under(&dir, &format!("c{round}"));
        create_node(&s.zk, &child, b"", CreateMode::Persistent).await;
        assert_eq!(s.event_now(), watch_event(NodeCreated, &child));
        s.zk.set_data(&child, b"x", None).await.unwrap();
        assert_eq!(s.event_now(), watch_event(NodeDataChanged, &child));
        s.zk.delete(&child, None).await.unwrap();
        assert_eq!(s.event_now(), watch_event(NodeDeleted, &child));
        s.assert_no_event_now();
    }
}

pub async fn multi_reports_through_persistent_watches_once_it_applied<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    let old = create_dir(&writer.zk, &dir, "old").await;
    watcher.zk.sync(&dir).await.unwrap();
    add_watch(&watcher, &dir, PersistentRecursive).await;
    let new = under(&dir, "new");

    // A failing multi reports nothing.
    let failed = writer
        .zk
        .multi(vec![
            op_create(&new, b"", CreateMode::Persistent),
            op_check(&old, Some(7)),
        ])
        .await;
    expect_multi_error(failed, 1, ErrorCode::BadVersion);
    watcher.assert_no_event().await;

    writer
        .zk
        .multi(vec![
            op_create(&new, b"", CreateMode::Persistent),
            op_set_data(&new, b"x", None),
            op_delete(&old, None),
        ])
        .await
        .unwrap();
    watcher
        .expect_events(&[
            watch_event(NodeCreated, &new),
            watch_event(NodeDataChanged, &new),
            watch_event(NodeDeleted, &old),
        ])
        .await;
    watcher.assert_no_event().await;
}

pub async fn persistent_watch_survives_a_reconnect<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let other = connect(&*b).await;
    let dir = create_dir(&other.zk, b.root(), "dir").await;
    s.zk.sync(&dir).await.unwrap();
    add_watch(&s, &dir, PersistentRecursive).await;

    b.cut(&s.zk, SHORT_CUT).await;
    assert_eq!(
        s.next_event().await,
        Event::Session(SessionState::Disconnected)
    );
    assert_eq!(
        s.next_event().await,
        Event::Session(SessionState::Connected)
    );
    // A round trip after the reconnection: the watch the client sent again
    // on reconnecting is registered before what follows.
    s.assert_no_event().await;
    let child = create_dir(&other.zk, &dir, "after").await;
    s.expect_watch(NodeCreated, &child).await;
    other.zk.set_data(&child, b"x", None).await.unwrap();
    s.expect_watch(NodeDataChanged, &child).await;
    s.assert_no_event().await;
}

/// What changed while the session was cut is not reported when it comes
/// back: a persistent watch is registered again with no replay (unlike a
/// one-shot watch, which fires if its node changed meanwhile), so a client
/// must re-read after every reconnection.
pub async fn persistent_watch_events_during_a_cut_are_lost<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let other = connect(&*b).await;
    let dir = create_dir(&other.zk, b.root(), "dir").await;
    let watched = create_dir(&other.zk, &dir, "watched").await;
    s.zk.sync(&dir).await.unwrap();
    add_watch(&s, &dir, PersistentRecursive).await;

    b.cut(&s.zk, SHORT_CUT).await;
    assert_eq!(
        s.next_event().await,
        Event::Session(SessionState::Disconnected)
    );
    // Changes while the session is cut: a create, a change and a delete in
    // its subtree.
    let during = create_dir(&other.zk, &dir, "during").await;
    other.zk.set_data(&watched, b"changed", None).await.unwrap();
    other.zk.delete(&watched, None).await.unwrap();
    assert_eq!(
        s.next_event().await,
        Event::Session(SessionState::Connected)
    );
    // None of them is reported, and the watch still works. (A server that
    // had not applied them all when the session came back through it
    // reports those it applies afterwards: the last ones, in order.)
    let during_the_cut = [
        watch_event(NodeCreated, &during),
        watch_event(NodeDataChanged, &watched),
        watch_event(NodeDeleted, &watched),
    ];
    let told = s.events_after_sync().await;
    if b.servers_may_lag() {
        assert!(during_the_cut.ends_with(&told), "told {told:?}");
    } else {
        assert_eq!(told, [], "nothing is told of what changed during the cut");
    }
    let after = create_dir(&other.zk, &dir, "after").await;
    s.expect_watch(NodeCreated, &after).await;
    other.zk.delete(&during, None).await.unwrap();
    s.expect_watch(NodeDeleted, &during).await;
    s.assert_no_event().await;
}

pub async fn persistent_watch_goes_with_its_session<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let other = connect(&*b).await;
    let dir = create_dir(&other.zk, b.root(), "dir").await;
    s.zk.sync(&dir).await.unwrap();
    add_watch(&s, &dir, PersistentRecursive).await;
    b.expire(&s.zk).await;
    create_dir(&other.zk, &dir, "after").await;
    // Only the expiry, then the end of the stream: no watch event.
    s.learn_expiry().await;
    match s.zk.add_watch(&dir, Persistent).await {
        Err(ZkError::SessionExpired) => {}
        other => panic!("add_watch after expiry: expected SessionExpired, got {other:?}"),
    }
}

pub async fn add_watch_refuses_an_invalid_path<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    for bad in ["", "relative", "/trailing/", "/a//b"] {
        match s.zk.add_watch(bad, PersistentRecursive).await {
            Err(ZkError::InvalidPath { path, .. }) => assert_eq!(path, bad),
            other => panic!("add_watch({bad:?}): expected InvalidPath, got {other:?}"),
        }
    }
    s.assert_no_event().await;
}
