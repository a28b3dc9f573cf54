//! `set_data`: the stat it changes, the stat it leaves, and its errors.

use std::sync::Arc;

use crate::conformance::{Backend, connect, create_dir, expect_error, stat_of, under};
use crate::{Coordinator, CreateMode, ErrorCode, Watch};

pub async fn set_data_bumps_version_and_mzxid_not_czxid<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "node");
    s.zk.create(&path, b"old", CreateMode::Persistent)
        .await
        .unwrap();
    create_dir(&s.zk, &path, "child").await;
    let before = stat_of(&s.zk, &path).await;

    let returned = s.zk.set_data(&path, b"newer", None).await.unwrap();
    let (data, read) = s.zk.get_data(&path, Watch::No).await.unwrap();
    assert_eq!(data, b"newer");
    assert_eq!(returned, read, "set_data returns the node's new stat");
    assert_eq!(read.version, before.version + 1);
    assert!(read.mzxid > before.mzxid, "mzxid moves forward");
    assert_eq!(read.czxid, before.czxid, "czxid never changes");
    assert_eq!(read.data_length, 5);
    // The children are not touched.
    assert_eq!(read.cversion, before.cversion);
    assert_eq!(read.pzxid, before.pzxid);
    assert_eq!(read.num_children, before.num_children);

    let second = s.zk.set_data(&path, b"", None).await.unwrap();
    assert_eq!(second.version, before.version + 2);
    assert!(second.mzxid > read.mzxid);
    assert_eq!(second.data_length, 0);
}

pub async fn set_data_missing_node_fails_no_node<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "absent");
    expect_error(
        s.zk.set_data(&path, b"x", None).await,
        ErrorCode::NoNode,
        &path,
    );
    expect_error(
        s.zk.set_data(&path, b"x", Some(0)).await,
        ErrorCode::NoNode,
        &path,
    );
    assert_eq!(
        s.zk.exists(&path, Watch::No).await.unwrap(),
        None,
        "set_data never creates"
    );
}

pub async fn set_data_with_wrong_version_fails_bad_version<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "cas");
    s.zk.create(&path, b"v0", CreateMode::Persistent)
        .await
        .unwrap();
    let v1 = s.zk.set_data(&path, b"v1", Some(0)).await.unwrap();
    assert_eq!(v1.version, 1);
    // A stale compare-and-set loses and changes nothing.
    expect_error(
        s.zk.set_data(&path, b"lost", Some(0)).await,
        ErrorCode::BadVersion,
        &path,
    );
    expect_error(
        s.zk.set_data(&path, b"lost", Some(5)).await,
        ErrorCode::BadVersion,
        &path,
    );
    let (data, stat) = s.zk.get_data(&path, Watch::No).await.unwrap();
    assert_eq!(data, b"v1");
    assert_eq!(stat, v1);
    let v2 = s.zk.set_data(&path, b"v2", Some(1)).await.unwrap();
    assert_eq!(v2.version, 2);
}

pub async fn set_data_with_same_bytes_still_bumps_version<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "same");
    s.zk.create(&path, b"same", CreateMode::Persistent)
        .await
        .unwrap();
    let before = stat_of(&s.zk, &path).await;
    let after = s.zk.set_data(&path, b"same", None).await.unwrap();
    assert_eq!(after.version, before.version + 1, "every set is a change");
    assert!(after.mzxid > before.mzxid);
}
