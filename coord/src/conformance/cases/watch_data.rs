//! Data watches, left by `exists` and `get_data`.

use std::sync::Arc;

use crate::conformance::{Backend, connect, create_dir, expect_error, under};
use crate::{Coordinator, CreateMode, ErrorCode, Watch, WatchKind};

pub async fn exists_watch_on_missing_node_fires_on_create<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let path = under(b.root(), "later");
    assert_eq!(watcher.zk.exists(&path, Watch::Yes).await.unwrap(), None);
    writer
        .zk
        .create(&path, b"", CreateMode::Persistent)
        .await
        .unwrap();
    watcher.expect_watch(WatchKind::NodeCreated, &path).await;
    // One-shot: a second change is not reported.
    writer.zk.set_data(&path, b"x", None).await.unwrap();
    watcher.assert_no_event().await;
}

pub async fn exists_watch_on_existing_node_fires_on_change_and_delete<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let path = create_dir(&writer.zk, b.root(), "node").await;
    watcher.zk.sync(&path).await.unwrap();
    assert!(
        watcher
            .zk
            .exists(&path, Watch::Yes)
            .await
            .unwrap()
            .is_some()
    );
    writer.zk.set_data(&path, b"x", None).await.unwrap();
    watcher
        .expect_watch(WatchKind::NodeDataChanged, &path)
        .await;
    assert!(
        watcher
            .zk
            .exists(&path, Watch::Yes)
            .await
            .unwrap()
            .is_some()
    );
    writer.zk.delete(&path, None).await.unwrap();
    watcher.expect_watch(WatchKind::NodeDeleted, &path).await;
    // An exists watch set on the now missing node waits for its return.
    assert_eq!(watcher.zk.exists(&path, Watch::Yes).await.unwrap(), None);
    writer
        .zk
        .create(&path, b"", CreateMode::Persistent)
        .await
        .unwrap();
    watcher.expect_watch(WatchKind::NodeCreated, &path).await;
    watcher.assert_no_event().await;
}

pub async fn get_data_watch_fires_node_data_changed_on_set<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let path = under(b.root(), "node");
    writer
        .zk
        .create(&path, b"v0", CreateMode::Persistent)
        .await
        .unwrap();
    watcher.zk.sync(&path).await.unwrap();
    let (data, _) = watcher.zk.get_data(&path, Watch::Yes).await.unwrap();
    assert_eq!(data, b"v0");
    writer.zk.set_data(&path, b"v1", None).await.unwrap();
    watcher
        .expect_watch(WatchKind::NodeDataChanged, &path)
        .await;
    let (data, _) = watcher.zk.get_data(&path, Watch::No).await.unwrap();
    assert_eq!(data, b"v1", "after the event, the change is visible");
}

pub async fn get_data_watch_fires_node_deleted_on_delete<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let path = create_dir(&writer.zk, b.root(), "node").await;
    watcher.zk.sync(&path).await.unwrap();
    watcher.zk.get_data(&path, Watch::Yes).await.unwrap();
    writer.zk.delete(&path, None).await.unwrap();
    watcher.expect_watch(WatchKind::NodeDeleted, &path).await;
    // The deletion consumed the watch: the node's return is not reported.
    writer
        .zk
        .create(&path, b"", CreateMode::Persistent)
        .await
        .unwrap();
    watcher.assert_no_event().await;
}

pub async fn failed_reads_of_a_missing_node_leave_no_watch<B: Backend>(b: Arc<B>) {
    // Only `exists` watches a missing node; `get_data` and `get_children`
    // fail with NoNode and leave nothing behind.
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let path = under(b.root(), "absent");
    expect_error(
        watcher.zk.get_data(&path, Watch::Yes).await,
        ErrorCode::NoNode,
        &path,
    );
    expect_error(
        watcher.zk.get_children(&path, Watch::Yes).await,
        ErrorCode::NoNode,
        &path,
    );
    writer
        .zk
        .create(&path, b"", CreateMode::Persistent)
        .await
        .unwrap();
    writer
        .zk
        .create(&under(&path, "child"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    writer.zk.set_data(&path, b"x", None).await.unwrap();
    watcher.assert_no_event().await;
}

pub async fn data_watch_is_not_fired_by_child_changes<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.get_data(&dir, Watch::Yes).await.unwrap();
    let child = under(&dir, "child");
    writer
        .zk
        .create(&child, b"", CreateMode::Persistent)
        .await
        .unwrap();
    writer.zk.set_data(&child, b"x", None).await.unwrap();
    writer.zk.delete(&child, None).await.unwrap();
    watcher.assert_no_event().await;
    // The watch is still armed for the node's own data.
    writer.zk.set_data(&dir, b"x", None).await.unwrap();
    watcher.expect_watch(WatchKind::NodeDataChanged, &dir).await;
}
