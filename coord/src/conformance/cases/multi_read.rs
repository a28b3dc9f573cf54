//! `get_data_many` and `get_children_many` (ZooKeeper's `multiRead` of
//! `getData` or `getChildren` ops): one result per path, each as
//! `get_data` or `get_children` would give it, a missing node failing only
//! its own place; no watch left; checked on the client before sending.

use std::sync::Arc;

use crate::conformance::{Backend, connect, create_node, expect_multi_error, under};
use crate::{Coordinator, CreateMode, ErrorCode, Watch, WatchKind, ZkError};

pub async fn get_data_many_answers_each_path_as_get_data_does<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let first = create_node(
        &s.zk,
        &under(b.root(), "first"),
        b"one",
        CreateMode::Persistent,
    )
    .await;
    let second = create_node(
        &s.zk,
        &under(b.root(), "second"),
        b"",
        CreateMode::Persistent,
    )
    .await;
    s.zk.set_data(&second, b"two, changed", None).await.unwrap();
    let missing = under(b.root(), "missing");
    let results =
        s.zk.get_data_many(vec![
            first.clone(),
            missing.clone(),
            second.clone(),
            first.clone(),
        ])
        .await
        .expect("a multi-read with a missing node still succeeds");
    assert_eq!(results.len(), 4, "one result per path");
    let first_read = s.zk.get_data(&first, Watch::No).await.unwrap();
    let second_read = s.zk.get_data(&second, Watch::No).await.unwrap();
    assert_eq!(results[0].as_ref(), Ok(&first_read));
    assert_eq!(
        results[1],
        Err(ZkError::NoNode {
            path: missing.clone()
        }),
        "the missing node fails its own place, naming its path"
    );
    assert_eq!(results[2].as_ref(), Ok(&second_read));
    assert_eq!(second_read.0, b"two, changed");
    assert_eq!(second_read.1.version, 1);
    assert_eq!(results[3].as_ref(), Ok(&first_read), "a path asked twice");
}

pub async fn get_data_many_leaves_no_watch<B: Backend>(b: Arc<B>) {
    let mut reader = connect(&*b).await;
    let writer = connect(&*b).await;
    let node = create_node(
        &writer.zk,
        &under(b.root(), "n"),
        b"v0",
        CreateMode::Persistent,
    )
    .await;
    let missing = under(b.root(), "later");
    let results = reader
        .zk
        .get_data_many(vec![node.clone(), missing.clone()])
        .await
        .unwrap();
    assert_eq!(results.len(), 2);
    writer.zk.set_data(&node, b"v1", None).await.unwrap();
    create_node(&writer.zk, &missing, b"", CreateMode::Persistent).await;
    writer.zk.delete(&node, None).await.unwrap();
    reader.assert_no_event().await;
    // The stream does carry events: a one-shot watch set now fires.
    reader.zk.get_data(&missing, Watch::Yes).await.unwrap();
    writer.zk.delete(&missing, None).await.unwrap();
    reader.expect_watch(WatchKind::NodeDeleted, &missing).await;
}

pub async fn get_data_many_is_checked_before_sending<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    assert_eq!(
        s.zk.get_data_many(Vec::new()).await,
        Ok(Vec::new()),
        "nothing to read is answered at once"
    );
    let node = create_node(&s.zk, &under(b.root(), "n"), b"", CreateMode::Persistent).await;
    let bad = format!("{node}/");
    let error = expect_multi_error(
        s.zk.get_data_many(vec![node.clone(), bad.clone()]).await,
        1,
        ErrorCode::BadArguments,
    );
    assert!(
        matches!(error, ZkError::InvalidPath { ref path, .. } if *path == bad),
        "{error:?}"
    );
    // The session is unharmed.
    assert_eq!(s.zk.get_data_many(vec![node]).await.unwrap().len(), 1);
}

pub async fn get_children_many_answers_each_path_as_get_children_does<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let parent = create_node(&s.zk, &under(b.root(), "p"), b"", CreateMode::Persistent).await;
    for child in ["b", "a", "c"] {
        create_node(
            &s.zk,
            &format!("{parent}/{child}"),
            b"",
            CreateMode::Persistent,
        )
        .await;
    }
    let leaf = format!("{parent}/a");
    let missing = under(b.root(), "missing");
    let results =
        s.zk.get_children_many(vec![parent.clone(), missing.clone(), leaf.clone()])
            .await
            .expect("a multi-read with a missing node still succeeds");
    let (mut listed, _) = s.zk.get_children(&parent, Watch::No).await.unwrap();
    let mut first = results[0].clone().expect("the parent is listed");
    // Neither backend promises an order of children.
    listed.sort();
    first.sort();
    assert_eq!(first, listed);
    assert_eq!(first, ["a", "b", "c"]);
    assert_eq!(
        results[1..],
        [Err(ZkError::NoNode { path: missing }), Ok(Vec::new()),],
        "the missing node fails its own place, naming its path; a leaf has no children"
    );
}

pub async fn get_children_many_leaves_no_watch<B: Backend>(b: Arc<B>) {
    let mut reader = connect(&*b).await;
    let writer = connect(&*b).await;
    let node = create_node(
        &writer.zk,
        &under(b.root(), "n"),
        b"",
        CreateMode::Persistent,
    )
    .await;
    // A missing node's listing leaves no watch anyway; its create below
    // shows that a multi-read does not leave one as `exists` would.
    let missing = under(b.root(), "later");
    let results = reader
        .zk
        .get_children_many(vec![node.clone(), missing.clone()])
        .await
        .unwrap();
    assert_eq!(results.len(), 2);
    create_node(
        &writer.zk,
        &format!("{node}/child"),
        b"",
        CreateMode::Persistent,
    )
    .await;
    create_node(&writer.zk, &missing, b"", CreateMode::Persistent).await;
    writer
        .zk
        .delete(&format!("{node}/child"), None)
        .await
        .unwrap();
    writer.zk.delete(&node, None).await.unwrap();
    reader.assert_no_event().await;
    // The stream does carry events: a one-shot watch set now fires.
    reader.zk.get_children(&missing, Watch::Yes).await.unwrap();
    writer.zk.delete(&missing, None).await.unwrap();
    reader.expect_watch(WatchKind::NodeDeleted, &missing).await;
}

pub async fn get_children_many_is_checked_before_sending<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    assert_eq!(
        s.zk.get_children_many(Vec::new()).await,
        Ok(Vec::new()),
        "nothing to list is answered at once"
    );
    let node = create_node(&s.zk, &under(b.root(), "n"), b"", CreateMode::Persistent).await;
    let bad = format!("{node}//x");
    let error = expect_multi_error(
        s.zk.get_children_many(vec![node.clone(), node.clone(), bad.clone()])
            .await,
        2,
        ErrorCode::BadArguments,
    );
    assert!(
        matches!(error, ZkError::InvalidPath { ref path, .. } if *path == bad),
        "{error:?}"
    );
    // The session is unharmed.
    assert_eq!(
        s.zk.get_children_many(vec![node]).await,
        Ok(vec![Ok(Vec::new())])
    );
}
