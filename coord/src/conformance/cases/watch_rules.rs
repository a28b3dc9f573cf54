//! Rules shared by every one-shot watch: one firing per registration,
//! deduplication per session, and the order of the events one change fires.

use std::sync::Arc;

use crate::conformance::{Backend, connect, create_dir, sorted_children, under, watch_event};
use crate::{Coordinator, CreateMode, Watch, WatchKind};

pub async fn watches_are_one_shot_until_rearmed<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let path = create_dir(&writer.zk, b.root(), "node").await;
    watcher.zk.sync(&path).await.unwrap();
    watcher.zk.get_data(&path, Watch::Yes).await.unwrap();
    writer.zk.set_data(&path, b"1", None).await.unwrap();
    watcher
        .expect_watch(WatchKind::NodeDataChanged, &path)
        .await;
    writer.zk.set_data(&path, b"2", None).await.unwrap();
    watcher.assert_no_event().await;
    // Re-arming reads the latest data; the next change fires again.
    let (data, _) = watcher.zk.get_data(&path, Watch::Yes).await.unwrap();
    assert_eq!(data, b"2");
    writer.zk.set_data(&path, b"3", None).await.unwrap();
    watcher
        .expect_watch(WatchKind::NodeDataChanged, &path)
        .await;
    watcher.assert_no_event().await;
}

pub async fn changes_before_rearm_are_not_reported_one_by_one<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    for name in ["c1", "c2", "c3"] {
        writer
            .zk
            .create(&under(&dir, name), b"", CreateMode::Persistent)
            .await
            .unwrap();
    }
    // Three changes, one event: the client must re-read to learn the rest.
    watcher
        .expect_watch(WatchKind::NodeChildrenChanged, &dir)
        .await;
    watcher.assert_no_event().await;
    let (mut children, _) = watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    children.sort();
    assert_eq!(children, ["c1", "c2", "c3"]);
    writer
        .zk
        .create(&under(&dir, "c4"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    watcher
        .expect_watch(WatchKind::NodeChildrenChanged, &dir)
        .await;
    assert_eq!(
        sorted_children(&watcher.zk, &dir).await,
        ["c1", "c2", "c3", "c4"]
    );
}

pub async fn same_watch_registered_several_times_fires_once<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    // Three data-watch registrations and two child-watch registrations.
    watcher.zk.exists(&dir, Watch::Yes).await.unwrap();
    watcher.zk.exists(&dir, Watch::Yes).await.unwrap();
    watcher.zk.get_data(&dir, Watch::Yes).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    writer.zk.set_data(&dir, b"x", None).await.unwrap();
    writer
        .zk
        .create(&under(&dir, "c"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    watcher
        .expect_events(&[
            watch_event(WatchKind::NodeDataChanged, &dir),
            watch_event(WatchKind::NodeChildrenChanged, &dir),
        ])
        .await;
    watcher.assert_no_event().await;
}

pub async fn data_and_child_watch_on_deleted_node_fire_one_node_deleted<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.exists(&dir, Watch::Yes).await.unwrap();
    watcher.zk.get_data(&dir, Watch::Yes).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    writer.zk.delete(&dir, None).await.unwrap();
    watcher.expect_watch(WatchKind::NodeDeleted, &dir).await;
    watcher.assert_no_event().await;
}

pub async fn data_and_child_watches_fire_independently<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.get_data(&dir, Watch::Yes).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    // A new child fires the child watch only ...
    writer
        .zk
        .create(&under(&dir, "c"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    watcher
        .expect_watch(WatchKind::NodeChildrenChanged, &dir)
        .await;
    watcher.assert_no_event().await;
    // ... and leaves the data watch armed.
    writer.zk.set_data(&dir, b"x", None).await.unwrap();
    watcher.expect_watch(WatchKind::NodeDataChanged, &dir).await;
    writer
        .zk
        .create(&under(&dir, "d"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    watcher.assert_no_event().await;
}

pub async fn create_fires_node_event_before_parent_event<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    let child = under(&dir, "child");
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    assert_eq!(watcher.zk.exists(&child, Watch::Yes).await.unwrap(), None);
    writer
        .zk
        .create(&child, b"", CreateMode::Persistent)
        .await
        .unwrap();
    watcher
        .expect_events(&[
            watch_event(WatchKind::NodeCreated, &child),
            watch_event(WatchKind::NodeChildrenChanged, &dir),
        ])
        .await;
}

pub async fn delete_fires_node_event_before_parent_event<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    let child = create_dir(&writer.zk, &dir, "child").await;
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    watcher.zk.get_data(&child, Watch::Yes).await.unwrap();
    watcher.zk.get_children(&child, Watch::Yes).await.unwrap();
    writer.zk.delete(&child, None).await.unwrap();
    watcher
        .expect_events(&[
            watch_event(WatchKind::NodeDeleted, &child),
            watch_event(WatchKind::NodeChildrenChanged, &dir),
        ])
        .await;
    watcher.assert_no_event().await;
}

pub async fn watch_fires_only_for_the_session_that_set_it<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let mut writer = connect(&*b).await;
    let mut bystander = connect(&*b).await;
    let path = create_dir(&writer.zk, b.root(), "node").await;
    watcher.zk.sync(&path).await.unwrap();
    watcher.zk.get_data(&path, Watch::Yes).await.unwrap();
    // The bystander reads without a watch; the writer reads with none either.
    bystander.zk.sync(&path).await.unwrap();
    bystander.zk.get_data(&path, Watch::No).await.unwrap();
    bystander.zk.get_children(&path, Watch::No).await.unwrap();
    writer.zk.get_data(&path, Watch::No).await.unwrap();
    writer.zk.set_data(&path, b"x", None).await.unwrap();
    watcher
        .expect_watch(WatchKind::NodeDataChanged, &path)
        .await;
    writer.assert_no_event().await;
    bystander.assert_no_event().await;
}
