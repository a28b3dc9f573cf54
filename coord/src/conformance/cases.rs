//! The cases. Each is an `async fn(Arc<B>)` registered in [`all_cases`]
//! under its own name.

use std::sync::Arc;

use super::{Backend, Case, connect, under};
use crate::{Coordinator, CreateMode, Watch, WatchKind, ZkError};

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        /// Every case of the suite, in a fixed order.
        pub fn all_cases<B: Backend>() -> Vec<Case<B>> {
            vec![$(Case { name: stringify!($name), run: |b| Box::pin($name(b)) }),*]
        }
    };
}

cases![
    create_returns_path_and_get_data_reads_it,
    create_without_parent_fails_no_node,
    exists_watch_on_missing_node_fires_on_create
];

async fn create_returns_path_and_get_data_reads_it<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "a");
    let created =
        s.zk.create(&path, b"hello", CreateMode::Persistent)
            .await
            .unwrap();
    assert_eq!(created, path);
    let (data, stat) = s.zk.get_data(&path, Watch::No).await.unwrap();
    assert_eq!(data, b"hello");
    assert_eq!(stat.version, 0);
    assert_eq!(stat.data_length, 5);
    assert_eq!(stat.czxid, stat.mzxid);
}

async fn create_without_parent_fails_no_node<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "missing/child");
    match s.zk.create(&path, b"", CreateMode::Persistent).await {
        Err(ZkError::NoNode { path: p }) => assert_eq!(p, path),
        other => panic!("expected NoNode, got {other:?}"),
    }
}

async fn exists_watch_on_missing_node_fires_on_create<B: Backend>(b: Arc<B>) {
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
