//! `create`: the node it makes, the parent it changes, and its errors.

use std::sync::Arc;

use crate::conformance::{Backend, connect, create_dir, expect_error, stat_of, under};
use crate::{Coordinator, CreateMode, ErrorCode, Watch};

pub async fn create_returns_path_and_get_data_reads_it<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "a");
    let created =
        s.zk.create(&path, b"hello", CreateMode::Persistent)
            .await
            .unwrap();
    assert_eq!(created, path);
    let (data, stat) = s.zk.get_data(&path, Watch::No).await.unwrap();
    assert_eq!(data, b"hello");
    assert_eq!(stat.data_length, 5);
    // An empty payload reads back empty, not missing.
    let empty = under(b.root(), "empty");
    s.zk.create(&empty, b"", CreateMode::Persistent)
        .await
        .unwrap();
    let (data, stat) = s.zk.get_data(&empty, Watch::No).await.unwrap();
    assert!(data.is_empty());
    assert_eq!(stat.data_length, 0);
}

pub async fn create_sets_every_stat_field_of_the_new_node<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "fresh");
    s.zk.create(&path, b"12345678", CreateMode::Persistent)
        .await
        .unwrap();
    let (_, stat) = s.zk.get_data(&path, Watch::No).await.unwrap();
    // A new node: created and last modified by the same change, which is
    // also the last change to its (empty) list of children.
    assert_eq!(stat.mzxid, stat.czxid, "mzxid of a new node");
    assert_eq!(stat.pzxid, stat.czxid, "pzxid of a new node");
    assert_eq!(stat.version, 0);
    assert_eq!(stat.cversion, 0);
    assert_eq!(stat.aversion, 0);
    assert_eq!(stat.ephemeral_owner, 0, "a persistent node has no owner");
    assert_eq!(stat.data_length, 8);
    assert_eq!(stat.num_children, 0);
    // exists and get_data report the same stat.
    assert_eq!(stat_of(&s.zk, &path).await, stat);
}

pub async fn create_updates_the_parent_stat<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let parent = create_dir(&s.zk, b.root(), "parent").await;
    let before = stat_of(&s.zk, &parent).await;
    assert_eq!((before.num_children, before.cversion), (0, 0));

    let child = under(&parent, "c1");
    s.zk.create(&child, b"data", CreateMode::Persistent)
        .await
        .unwrap();
    let child_stat = stat_of(&s.zk, &child).await;
    let after = stat_of(&s.zk, &parent).await;
    assert_eq!(after.num_children, 1);
    assert_eq!(after.cversion, 1);
    assert_eq!(after.pzxid, child_stat.czxid, "parent pzxid = child czxid");
    // A child's arrival is not a change of the parent's data.
    assert_eq!(after.version, before.version);
    assert_eq!(after.mzxid, before.mzxid);
    assert_eq!(after.czxid, before.czxid);
    assert_eq!(after.data_length, before.data_length);

    s.zk.create(&under(&parent, "c2"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    let again = stat_of(&s.zk, &parent).await;
    assert_eq!((again.num_children, again.cversion), (2, 2));
    assert!(again.pzxid > after.pzxid);
}

pub async fn create_without_parent_fails_no_node<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "missing/child");
    for mode in [
        CreateMode::Persistent,
        CreateMode::Ephemeral,
        CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential,
    ] {
        let result = s.zk.create(&path, b"", mode).await;
        let error = crate::conformance::expect_code(result, ErrorCode::NoNode, &path);
        if !mode.is_sequential() {
            assert_eq!(crate::conformance::error_path(&error), Some(path.as_str()));
        }
    }
    assert_eq!(
        s.zk.exists(&under(b.root(), "missing"), Watch::No)
            .await
            .unwrap(),
        None,
        "a failed create makes no parent"
    );
}

pub async fn create_existing_node_fails_node_exists<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "taken");
    s.zk.create(&path, b"first", CreateMode::Persistent)
        .await
        .unwrap();
    let before = stat_of(&s.zk, &path).await;
    for mode in [CreateMode::Persistent, CreateMode::Ephemeral] {
        let result = s.zk.create(&path, b"second", mode).await;
        expect_error(result, ErrorCode::NodeExists, &path);
    }
    let (data, after) = s.zk.get_data(&path, Watch::No).await.unwrap();
    assert_eq!(data, b"first", "a failed create leaves the data");
    assert_eq!(after, before, "a failed create leaves the stat");
}

pub async fn create_under_ephemeral_fails_no_children_for_ephemerals<B: Backend>(b: Arc<B>) {
    let owner = connect(&*b).await;
    let other = connect(&*b).await;
    let eph = under(b.root(), "eph");
    owner
        .zk
        .create(&eph, b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    let child = under(&eph, "child");
    for s in [&owner, &other] {
        for mode in [CreateMode::Persistent, CreateMode::Ephemeral] {
            let result = s.zk.create(&child, b"", mode).await;
            expect_error(result, ErrorCode::NoChildrenForEphemerals, &child);
        }
        for mode in [
            CreateMode::PersistentSequential,
            CreateMode::EphemeralSequential,
        ] {
            let result = s.zk.create(&child, b"", mode).await;
            crate::conformance::expect_code(result, ErrorCode::NoChildrenForEphemerals, &child);
        }
    }
    // A missing parent below the ephemeral is reported as such: the parent
    // lookup comes before the ephemeral check.
    let deeper = under(&child, "grandchild");
    let result = owner.zk.create(&deeper, b"", CreateMode::Persistent).await;
    expect_error(result, ErrorCode::NoNode, &deeper);
    let stat = stat_of(&other.zk, &eph).await;
    assert_eq!((stat.num_children, stat.cversion), (0, 0));
}

pub async fn reads_of_a_missing_node_fail_no_node_or_return_none<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "nothing");
    assert_eq!(s.zk.exists(&path, Watch::No).await.unwrap(), None);
    expect_error(
        s.zk.get_data(&path, Watch::No).await,
        ErrorCode::NoNode,
        &path,
    );
    expect_error(
        s.zk.get_children(&path, Watch::No).await,
        ErrorCode::NoNode,
        &path,
    );
}
