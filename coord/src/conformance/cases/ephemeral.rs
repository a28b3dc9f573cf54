//! Ephemeral nodes go with the session that owns them, on close and on
//! expiry, and other sessions' watches report it.

use std::sync::Arc;

use crate::conformance::{
    Backend, connect, create_dir, create_node, sorted_children, stat_of, under, watch_event,
};
use crate::{Coordinator, CreateMode, Watch, WatchKind};

pub async fn ephemerals_are_deleted_when_their_session_closes<B: Backend>(b: Arc<B>) {
    let owner = connect(&*b).await;
    let mut watcher = connect(&*b).await;
    let dir = create_dir(&owner.zk, b.root(), "dir").await;
    let eph = create_node(&owner.zk, &under(&dir, "eph"), b"", CreateMode::Ephemeral).await;
    let kept = create_node(&owner.zk, &under(&dir, "kept"), b"", CreateMode::Persistent).await;
    watcher.zk.sync(&dir).await.unwrap();
    assert!(watcher.zk.exists(&eph, Watch::Yes).await.unwrap().is_some());
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();

    owner.zk.close().await.unwrap();
    watcher
        .expect_events(&[
            watch_event(WatchKind::NodeDeleted, &eph),
            watch_event(WatchKind::NodeChildrenChanged, &dir),
        ])
        .await;
    assert_eq!(watcher.zk.exists(&eph, Watch::No).await.unwrap(), None);
    assert!(
        watcher.zk.exists(&kept, Watch::No).await.unwrap().is_some(),
        "the session's persistent nodes stay"
    );
    assert_eq!(sorted_children(&watcher.zk, &dir).await, ["kept"]);
}

pub async fn ephemerals_are_deleted_when_their_session_expires<B: Backend>(b: Arc<B>) {
    let mut owner = connect(&*b).await;
    let mut watcher = connect(&*b).await;
    let dir = create_dir(&owner.zk, b.root(), "dir").await;
    let plain = create_node(&owner.zk, &under(&dir, "plain"), b"", CreateMode::Ephemeral).await;
    let seq = create_node(
        &owner.zk,
        &under(&dir, "seq-"),
        b"",
        CreateMode::EphemeralSequential,
    )
    .await;
    let kept = create_node(&owner.zk, &under(&dir, "kept"), b"", CreateMode::Persistent).await;
    watcher.zk.sync(&dir).await.unwrap();
    for path in [&plain, &seq] {
        let (_, stat) = watcher.zk.get_data(path, Watch::Yes).await.unwrap();
        assert_eq!(stat.ephemeral_owner, owner.zk.session_id().0);
    }
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();

    b.expire(&owner.zk).await;
    // The server deletes the ephemerals in an order of its own; the parent's
    // child watch fires once, at the first of them.
    watcher
        .expect_events_unordered(&[
            watch_event(WatchKind::NodeDeleted, &plain),
            watch_event(WatchKind::NodeDeleted, &seq),
            watch_event(WatchKind::NodeChildrenChanged, &dir),
        ])
        .await;
    watcher.assert_no_event().await;
    assert_eq!(sorted_children(&watcher.zk, &dir).await, ["kept"]);
    assert!(watcher.zk.exists(&kept, Watch::No).await.unwrap().is_some());
    // The owner finds out when it next talks to the server.
    owner.learn_expiry().await;
}

pub async fn ephemerals_of_a_session_are_deleted_in_one_step<B: Backend>(b: Arc<B>) {
    let owner = connect(&*b).await;
    let mut watcher = connect(&*b).await;
    let left = create_dir(&owner.zk, b.root(), "left").await;
    let right = create_dir(&owner.zk, b.root(), "right").await;
    create_node(&owner.zk, &under(&left, "e"), b"", CreateMode::Ephemeral).await;
    create_node(&owner.zk, &under(&right, "e"), b"", CreateMode::Ephemeral).await;
    watcher.zk.sync(&right).await.unwrap();
    watcher.zk.get_children(&left, Watch::Yes).await.unwrap();
    watcher.zk.get_children(&right, Watch::Yes).await.unwrap();
    let before = stat_of(&watcher.zk, &right).await.pzxid;

    owner.zk.close().await.unwrap();
    watcher
        .expect_events_unordered(&[
            watch_event(WatchKind::NodeChildrenChanged, &left),
            watch_event(WatchKind::NodeChildrenChanged, &right),
        ])
        .await;
    // One change removed both: both parents record the same zxid.
    let left_stat = stat_of(&watcher.zk, &left).await;
    let right_stat = stat_of(&watcher.zk, &right).await;
    assert_eq!((left_stat.num_children, right_stat.num_children), (0, 0));
    assert!(right_stat.pzxid > before);
    assert_eq!(
        left_stat.pzxid, right_stat.pzxid,
        "a session's ephemerals are deleted by one change"
    );
}

pub async fn closing_a_session_leaves_other_sessions_ephemerals<B: Backend>(b: Arc<B>) {
    let leaving = connect(&*b).await;
    let mut staying = connect(&*b).await;
    let dir = create_dir(&staying.zk, b.root(), "dir").await;
    leaving.zk.sync(&dir).await.unwrap();
    let theirs = create_node(
        &leaving.zk,
        &under(&dir, "theirs"),
        b"",
        CreateMode::Ephemeral,
    )
    .await;
    let mine = create_node(
        &staying.zk,
        &under(&dir, "mine"),
        b"",
        CreateMode::Ephemeral,
    )
    .await;
    staying.zk.sync(&dir).await.unwrap();
    assert!(
        staying
            .zk
            .exists(&theirs, Watch::Yes)
            .await
            .unwrap()
            .is_some()
    );

    leaving.zk.close().await.unwrap();
    staying.expect_watch(WatchKind::NodeDeleted, &theirs).await;
    let stat = stat_of(&staying.zk, &mine).await;
    assert_eq!(stat.ephemeral_owner, staying.zk.session_id().0);
    assert_eq!(sorted_children(&staying.zk, &dir).await, ["mine"]);
}
