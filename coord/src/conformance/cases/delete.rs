//! `delete`: what it removes, and its errors in the server's order.

use std::sync::Arc;

use crate::conformance::{
    Backend, connect, create_dir, expect_error, sorted_children, stat_of, under,
};
use crate::{Coordinator, CreateMode, ErrorCode, Watch};

pub async fn delete_removes_the_node_and_updates_the_parent<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let keep = under(&dir, "keep");
    let gone = under(&dir, "gone");
    s.zk.create(&keep, b"", CreateMode::Persistent)
        .await
        .unwrap();
    s.zk.create(&gone, b"bye", CreateMode::Persistent)
        .await
        .unwrap();
    let gone_czxid = stat_of(&s.zk, &gone).await.czxid;
    let before = stat_of(&s.zk, &dir).await;

    s.zk.delete(&gone, None).await.unwrap();
    assert_eq!(s.zk.exists(&gone, Watch::No).await.unwrap(), None);
    expect_error(
        s.zk.get_data(&gone, Watch::No).await,
        ErrorCode::NoNode,
        &gone,
    );
    let after = stat_of(&s.zk, &dir).await;
    assert_eq!(after.num_children, 1);
    assert!(
        after.pzxid > gone_czxid,
        "the delete is the parent's last child change"
    );
    assert_eq!(after.mzxid, before.mzxid, "the parent's data is untouched");
    assert_eq!(after.version, before.version);
    assert_eq!(sorted_children(&s.zk, &dir).await, ["keep"]);
    // The name is free again.
    s.zk.create(&gone, b"again", CreateMode::Persistent)
        .await
        .unwrap();
    let reborn = stat_of(&s.zk, &gone).await;
    assert!(
        reborn.czxid > after.pzxid,
        "a re-created node is a new node"
    );
    assert_eq!(reborn.version, 0);
}

pub async fn delete_missing_node_fails_no_node<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "never");
    expect_error(s.zk.delete(&path, None).await, ErrorCode::NoNode, &path);
    expect_error(s.zk.delete(&path, Some(0)).await, ErrorCode::NoNode, &path);
    let deeper = under(b.root(), "never/below");
    expect_error(s.zk.delete(&deeper, None).await, ErrorCode::NoNode, &deeper);
    // Deleting twice: the second finds nothing.
    let once = create_dir(&s.zk, b.root(), "once").await;
    s.zk.delete(&once, None).await.unwrap();
    expect_error(s.zk.delete(&once, None).await, ErrorCode::NoNode, &once);
}

pub async fn delete_node_with_children_fails_not_empty<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let child = create_dir(&s.zk, &dir, "child").await;
    expect_error(s.zk.delete(&dir, None).await, ErrorCode::NotEmpty, &dir);
    expect_error(s.zk.delete(&dir, Some(0)).await, ErrorCode::NotEmpty, &dir);
    assert_eq!(
        stat_of(&s.zk, &dir).await.num_children,
        1,
        "nothing removed"
    );
    // Bottom-up works.
    s.zk.delete(&child, None).await.unwrap();
    s.zk.delete(&dir, None).await.unwrap();
    assert_eq!(s.zk.exists(&dir, Watch::No).await.unwrap(), None);
}

pub async fn delete_with_wrong_version_fails_bad_version<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "versioned");
    s.zk.create(&path, b"v0", CreateMode::Persistent)
        .await
        .unwrap();
    s.zk.set_data(&path, b"v1", None).await.unwrap();
    for wrong in [0, 2, i32::MAX] {
        expect_error(
            s.zk.delete(&path, Some(wrong)).await,
            ErrorCode::BadVersion,
            &path,
        );
    }
    assert_eq!(stat_of(&s.zk, &path).await.version, 1, "still there");
    s.zk.delete(&path, Some(1)).await.unwrap();
    assert_eq!(s.zk.exists(&path, Watch::No).await.unwrap(), None);
}

pub async fn delete_checks_version_before_children<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    create_dir(&s.zk, &dir, "child").await;
    // Wrong version and children: the server reports the version first.
    expect_error(
        s.zk.delete(&dir, Some(7)).await,
        ErrorCode::BadVersion,
        &dir,
    );
    // Right version and children: NotEmpty.
    expect_error(s.zk.delete(&dir, Some(0)).await, ErrorCode::NotEmpty, &dir);
}

pub async fn delete_without_version_accepts_any_version<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "busy");
    s.zk.create(&path, b"", CreateMode::Persistent)
        .await
        .unwrap();
    for i in 0..3u8 {
        s.zk.set_data(&path, &[i], None).await.unwrap();
    }
    assert_eq!(stat_of(&s.zk, &path).await.version, 3);
    s.zk.delete(&path, None).await.unwrap();
    assert_eq!(s.zk.exists(&path, Watch::No).await.unwrap(), None);
}
