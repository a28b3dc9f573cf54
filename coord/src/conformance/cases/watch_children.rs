//! Child watches, left by `get_children`.

use std::sync::Arc;

use crate::conformance::{Backend, connect, create_dir, sorted_children, under};
use crate::{Coordinator, CreateMode, Watch, WatchKind};

pub async fn child_watch_fires_on_child_create_and_delete<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    let (children, _) = watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    assert!(children.is_empty());
    let child = under(&dir, "child");
    writer
        .zk
        .create(&child, b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    watcher
        .expect_watch(WatchKind::NodeChildrenChanged, &dir)
        .await;
    assert_eq!(sorted_children(&watcher.zk, &dir).await, ["child"]);
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    writer.zk.delete(&child, None).await.unwrap();
    watcher
        .expect_watch(WatchKind::NodeChildrenChanged, &dir)
        .await;
    assert!(sorted_children(&watcher.zk, &dir).await.is_empty());
}

pub async fn child_watch_ignores_a_child_data_change<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    let child = create_dir(&writer.zk, &dir, "child").await;
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    writer.zk.set_data(&child, b"changed", None).await.unwrap();
    watcher.assert_no_event().await;
    // Still armed: the next change to the list is reported.
    writer.zk.delete(&child, None).await.unwrap();
    watcher
        .expect_watch(WatchKind::NodeChildrenChanged, &dir)
        .await;
}

pub async fn set_data_does_not_fire_child_watches<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    writer.zk.set_data(&dir, b"own data", None).await.unwrap();
    watcher.assert_no_event().await;
    writer
        .zk
        .create(&under(&dir, "c"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    watcher
        .expect_watch(WatchKind::NodeChildrenChanged, &dir)
        .await;
}

pub async fn child_watch_on_deleted_node_fires_node_deleted<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    writer.zk.delete(&dir, None).await.unwrap();
    watcher.expect_watch(WatchKind::NodeDeleted, &dir).await;
    // One event for the one watch, and the watch is gone.
    writer
        .zk
        .create(&dir, b"", CreateMode::Persistent)
        .await
        .unwrap();
    writer
        .zk
        .create(&under(&dir, "c"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    watcher.assert_no_event().await;
}

pub async fn child_watch_is_not_fired_by_grandchildren<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    let child = create_dir(&writer.zk, &dir, "child").await;
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    let grandchild = under(&child, "grandchild");
    writer
        .zk
        .create(&grandchild, b"", CreateMode::Persistent)
        .await
        .unwrap();
    writer.zk.delete(&grandchild, None).await.unwrap();
    watcher.assert_no_event().await;
}
