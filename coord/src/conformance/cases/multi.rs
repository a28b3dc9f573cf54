//! `multi`: all ops or none, in one change, with the index of the first
//! failing op; watches fire only for what was applied.

use std::sync::Arc;

use crate::conformance::{
    Backend, connect, create_dir, create_node, error_path, expect_multi_error, op_check, op_create,
    op_delete, op_set_data, sorted_children, stat_of, under, watch_event,
};
use crate::{Coordinator, CreateMode, ErrorCode, OpResult, Watch, WatchKind};

pub async fn multi_applies_every_op_and_returns_their_results<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let existing = create_node(
        &s.zk,
        &under(b.root(), "existing"),
        b"v0",
        CreateMode::Persistent,
    )
    .await;
    let doomed = create_dir(&s.zk, b.root(), "doomed").await;
    let dir = under(b.root(), "dir");
    let child = under(&dir, "child");
    let results =
        s.zk.multi(vec![
            op_create(&dir, b"d", CreateMode::Persistent),
            op_create(&child, b"c", CreateMode::Ephemeral),
            op_set_data(&existing, b"v1", Some(0)),
            op_check(&existing, Some(1)),
            op_delete(&doomed, None),
        ])
        .await
        .unwrap();
    assert_eq!(results.len(), 5);
    assert_eq!(results[0], OpResult::Created { path: dir.clone() });
    assert_eq!(
        results[1],
        OpResult::Created {
            path: child.clone()
        }
    );
    let after_set = stat_of(&s.zk, &existing).await;
    assert_eq!(results[2], OpResult::DataSet { stat: after_set });
    assert_eq!(after_set.version, 1);
    assert_eq!(results[3], OpResult::Checked);
    assert_eq!(results[4], OpResult::Deleted);

    let (data, stat) = s.zk.get_data(&child, Watch::No).await.unwrap();
    assert_eq!(data, b"c");
    assert_eq!(stat.ephemeral_owner, s.zk.session_id().0);
    assert_eq!(s.zk.get_data(&existing, Watch::No).await.unwrap().0, b"v1");
    assert_eq!(s.zk.exists(&doomed, Watch::No).await.unwrap(), None);
    assert_eq!(sorted_children(&s.zk, b.root()).await, ["dir", "existing"]);
}

pub async fn multi_ops_share_one_zxid<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let x = create_dir(&s.zk, b.root(), "x").await;
    let y = create_dir(&s.zk, b.root(), "y").await;
    let before = stat_of(&s.zk, &y).await.czxid;
    let a = under(b.root(), "a");
    let a_b = under(&a, "b");
    s.zk.multi(vec![
        op_create(&a, b"", CreateMode::Persistent),
        op_create(&a_b, b"", CreateMode::Persistent),
        op_set_data(&x, b"x", None),
        op_delete(&y, None),
    ])
    .await
    .unwrap();
    let zxid = stat_of(&s.zk, &a).await.czxid;
    assert!(zxid > before);
    assert_eq!(stat_of(&s.zk, &a_b).await.czxid, zxid, "second create");
    assert_eq!(stat_of(&s.zk, &a).await.pzxid, zxid, "child of the first");
    assert_eq!(stat_of(&s.zk, &x).await.mzxid, zxid, "set_data");
    assert_eq!(stat_of(&s.zk, b.root()).await.pzxid, zxid, "delete");
    let next = create_dir(&s.zk, b.root(), "next").await;
    assert!(stat_of(&s.zk, &next).await.czxid > zxid, "the next write");
}

pub async fn multi_ops_see_the_effects_of_earlier_ops<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let t = under(b.root(), "t");
    let before = stat_of(&s.zk, b.root()).await;
    let results =
        s.zk.multi(vec![
            op_create(&t, b"", CreateMode::Persistent),
            op_set_data(&t, b"x", Some(0)),
            op_check(&t, Some(1)),
            op_delete(&t, Some(1)),
        ])
        .await
        .unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(s.zk.exists(&t, Watch::No).await.unwrap(), None);
    let after = stat_of(&s.zk, b.root()).await;
    assert_eq!(after.num_children, before.num_children);
    assert_eq!(after.cversion, before.cversion + 2, "a create and a delete");

    let u = under(b.root(), "u");
    let result =
        s.zk.multi(vec![
            op_create(&u, b"", CreateMode::Persistent),
            op_create(&u, b"", CreateMode::Persistent),
        ])
        .await;
    let error = expect_multi_error(result, 1, ErrorCode::NodeExists);
    assert_eq!(error_path(&error), Some(u.as_str()));
    assert_eq!(s.zk.exists(&u, Watch::No).await.unwrap(), None);
}

pub async fn multi_failing_check_rolls_back_earlier_ops<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    let x = create_node(&writer.zk, &under(&dir, "x"), b"x0", CreateMode::Persistent).await;
    let y = create_dir(&writer.zk, &dir, "y").await;
    let a = under(&dir, "a");
    let dir_before = stat_of(&writer.zk, &dir).await;
    let x_before = stat_of(&writer.zk, &x).await;

    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.exists(&a, Watch::Yes).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    watcher.zk.get_data(&x, Watch::Yes).await.unwrap();
    watcher.zk.get_data(&y, Watch::Yes).await.unwrap();

    let result = writer
        .zk
        .multi(vec![
            op_create(&a, b"", CreateMode::Persistent),
            op_create(&under(&dir, "s-"), b"", CreateMode::PersistentSequential),
            op_set_data(&x, b"x1", None),
            op_delete(&y, None),
            op_check(&x, Some(99)),
        ])
        .await;
    let error = expect_multi_error(result, 4, ErrorCode::BadVersion);
    assert_eq!(error_path(&error), Some(x.as_str()));

    // Nothing happened: not the creates, not the set, not the delete ...
    assert_eq!(writer.zk.exists(&a, Watch::No).await.unwrap(), None);
    assert_eq!(sorted_children(&writer.zk, &dir).await, ["x", "y"]);
    let (data, x_after) = writer.zk.get_data(&x, Watch::No).await.unwrap();
    assert_eq!((data.as_slice(), x_after), (&b"x0"[..], x_before));
    assert_eq!(stat_of(&writer.zk, &dir).await, dir_before);
    // ... no watch fired ...
    watcher.assert_no_event().await;
    // ... and the sequence counter was not consumed.
    let seq = create_node(
        &writer.zk,
        &under(&dir, "s-"),
        b"",
        CreateMode::PersistentSequential,
    )
    .await;
    assert_eq!(seq, under(&dir, "s-0000000002"));
    watcher
        .expect_watch(WatchKind::NodeChildrenChanged, &dir)
        .await;
}

pub async fn multi_reports_the_first_failing_op<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let node = create_dir(&s.zk, b.root(), "node").await;
    let missing = under(b.root(), "missing");
    let fresh = under(b.root(), "fresh");

    // Ops 1 and 2 would both fail; the first is reported.
    let result =
        s.zk.multi(vec![
            op_create(&fresh, b"", CreateMode::Persistent),
            op_delete(&missing, None),
            op_set_data(&node, b"", Some(5)),
        ])
        .await;
    let error = expect_multi_error(result, 1, ErrorCode::NoNode);
    assert_eq!(error_path(&error), Some(missing.as_str()));

    let result =
        s.zk.multi(vec![
            op_set_data(&node, b"", Some(5)),
            op_delete(&missing, None),
        ])
        .await;
    let error = expect_multi_error(result, 0, ErrorCode::BadVersion);
    assert_eq!(error_path(&error), Some(node.as_str()));

    let result =
        s.zk.multi(vec![
            op_check(&node, Some(0)),
            op_create(&fresh, b"", CreateMode::Persistent),
            op_create(&node, b"", CreateMode::Persistent),
        ])
        .await;
    let error = expect_multi_error(result, 2, ErrorCode::NodeExists);
    assert_eq!(error_path(&error), Some(node.as_str()));

    let result =
        s.zk.multi(vec![
            op_create(&fresh, b"", CreateMode::Persistent),
            op_create(&under(&node, "c"), b"", CreateMode::Persistent),
            op_delete(&node, None),
        ])
        .await;
    let error = expect_multi_error(result, 2, ErrorCode::NotEmpty);
    assert_eq!(error_path(&error), Some(node.as_str()));

    assert_eq!(s.zk.exists(&fresh, Watch::No).await.unwrap(), None);
    assert_eq!(stat_of(&s.zk, &node).await.num_children, 0);
}

pub async fn multi_check_passes_on_right_version_only<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let node = create_dir(&s.zk, b.root(), "node").await;
    let ok = s.zk.multi(vec![op_check(&node, Some(0))]).await.unwrap();
    assert_eq!(ok, [OpResult::Checked]);
    s.zk.set_data(&node, b"x", None).await.unwrap();
    let stale = s.zk.multi(vec![op_check(&node, Some(0))]).await;
    let error = expect_multi_error(stale, 0, ErrorCode::BadVersion);
    assert_eq!(error_path(&error), Some(node.as_str()));
    let ok = s.zk.multi(vec![op_check(&node, Some(1))]).await.unwrap();
    assert_eq!(ok, [OpResult::Checked]);
    let missing = under(b.root(), "missing");
    let result = s.zk.multi(vec![op_check(&missing, Some(0))]).await;
    let error = expect_multi_error(result, 0, ErrorCode::NoNode);
    assert_eq!(error_path(&error), Some(missing.as_str()));
    // A check is a read: it changes nothing.
    assert_eq!(stat_of(&s.zk, &node).await.version, 1);
}

/// A check without a version (ZooKeeper's -1) asks only that the node
/// exist, whatever its version.
pub async fn multi_check_without_a_version_asks_only_for_the_node<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let node = create_dir(&s.zk, b.root(), "node").await;
    s.zk.set_data(&node, b"x", None).await.unwrap();
    s.zk.set_data(&node, b"y", None).await.unwrap();
    let ok = s.zk.multi(vec![op_check(&node, None)]).await.unwrap();
    assert_eq!(ok, [OpResult::Checked]);
    let missing = under(b.root(), "missing");
    let fresh = under(b.root(), "fresh");
    let result =
        s.zk.multi(vec![
            op_create(&fresh, b"", CreateMode::Persistent),
            op_check(&missing, None),
        ])
        .await;
    let error = expect_multi_error(result, 1, ErrorCode::NoNode);
    assert_eq!(error_path(&error), Some(missing.as_str()));
    assert_eq!(s.zk.exists(&fresh, Watch::No).await.unwrap(), None);
    assert_eq!(stat_of(&s.zk, &node).await.version, 2);
}

pub async fn multi_empty_succeeds<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let before = stat_of(&s.zk, b.root()).await;
    let results = s.zk.multi(Vec::new()).await.unwrap();
    assert!(results.is_empty());
    assert_eq!(stat_of(&s.zk, b.root()).await, before);
}

pub async fn multi_fires_watches_once_it_succeeded<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let dir = create_dir(&writer.zk, b.root(), "dir").await;
    let x = create_dir(&writer.zk, b.root(), "x").await;
    let a = under(&dir, "a");
    watcher.zk.sync(&dir).await.unwrap();
    watcher.zk.exists(&a, Watch::Yes).await.unwrap();
    watcher.zk.get_children(&dir, Watch::Yes).await.unwrap();
    watcher.zk.get_data(&x, Watch::Yes).await.unwrap();

    writer
        .zk
        .multi(vec![
            op_create(&a, b"", CreateMode::Persistent),
            op_create(&under(&dir, "b"), b"", CreateMode::Persistent),
            op_set_data(&x, b"x", None),
        ])
        .await
        .unwrap();
    // Two creates under dir, one child watch: one NodeChildrenChanged.
    watcher
        .expect_events_unordered(&[
            watch_event(WatchKind::NodeCreated, &a),
            watch_event(WatchKind::NodeChildrenChanged, &dir),
            watch_event(WatchKind::NodeDataChanged, &x),
        ])
        .await;
    watcher.assert_no_event().await;
    // Once the events are in, every effect of the multi is visible.
    let (mut children, _) = watcher.zk.get_children(&dir, Watch::No).await.unwrap();
    children.sort();
    assert_eq!(children, ["a", "b"]);
    assert_eq!(watcher.zk.get_data(&x, Watch::No).await.unwrap().0, b"x");
}

pub async fn multi_sequential_create_returns_the_actual_name<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let prefix = under(&dir, "n-");
    let results =
        s.zk.multi(vec![
            op_create(&prefix, b"", CreateMode::PersistentSequential),
            op_create(&under(&dir, "plain"), b"", CreateMode::Persistent),
            op_create(&prefix, b"", CreateMode::EphemeralSequential),
        ])
        .await
        .unwrap();
    assert_eq!(
        results,
        [
            OpResult::Created {
                path: under(&dir, "n-0000000000")
            },
            OpResult::Created {
                path: under(&dir, "plain")
            },
            OpResult::Created {
                path: under(&dir, "n-0000000002")
            },
        ]
    );
    let stat = stat_of(&s.zk, &under(&dir, "n-0000000002")).await;
    assert_eq!(stat.ephemeral_owner, s.zk.session_id().0);
}
