//! Bad input is refused on the client, before anything is sent, with an
//! error that names what was wrong.

use std::sync::Arc;

use crate::conformance::{
    Backend, connect, create_dir, expect_code, expect_multi_error, op_check, op_create, op_delete,
    op_set_data, sorted_children, stat_of, under,
};
use crate::{Coordinator, CreateMode, ErrorCode, MAX_DATA_BYTES, Watch, ZkError};

/// Asserts that `result` is an `InvalidPath` error naming `path`.
#[track_caller]
fn expect_invalid_path<T: std::fmt::Debug>(result: Result<T, ZkError>, path: &str, op: &str) {
    match result {
        Err(ZkError::InvalidPath { path: named, .. }) => {
            assert_eq!(named, path, "{op} must name the invalid path")
        }
        other => panic!("{op}({path:?}): expected InvalidPath, got {other:?}"),
    }
}

/// Every form of bad path, built around the case's root so that a backend
/// that sent one anyway could only touch the case's own nodes, each with
/// whether it is also bad as a sequential prefix. ZooKeeper checks a
/// sequential prefix with a digit appended (`PathUtils.validatePath(path +
/// "1")`), so `x/`, `x/.` and `x/..` are valid prefixes: they make
/// `x/0000000003`, `x/.0000000003` and `x/..0000000003`.
fn bad_paths(root: &str) -> Vec<(String, bool)> {
    let relative = root.trim_start_matches('/');
    let bad_everywhere = [
        String::new(),
        format!("{relative}/x"),
        "x".to_owned(),
        format!("{root}//x"),
        format!("{root}/x//y"),
        format!("{root}/./x"),
        format!("{root}/../x"),
        format!("{root}/x\u{0}y"),
        format!("{root}/x\u{1}"),
        format!("{root}/\u{1f}x"),
        format!("{root}/x\u{7f}"),
        format!("{root}/x\u{9f}"),
        format!("{root}/x\u{e000}"),
        format!("{root}/x\u{fff0}"),
        // Above U+FFFF: a surrogate pair in Java, which ZooKeeper refuses.
        format!("{root}/x\u{1f600}"),
    ];
    let valid_as_sequential_prefix = [
        format!("{root}/x/"),
        format!("{root}/x/."),
        format!("{root}/x/.."),
    ];
    bad_everywhere
        .into_iter()
        .map(|path| (path, true))
        .chain(
            valid_as_sequential_prefix
                .into_iter()
                .map(|path| (path, false)),
        )
        .collect()
}

pub async fn invalid_paths_are_refused_naming_the_path<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let modes = [
        CreateMode::Persistent,
        CreateMode::Ephemeral,
        CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential,
    ];
    for (bad, bad_as_prefix) in bad_paths(b.root()) {
        for mode in modes {
            if mode.is_sequential() && !bad_as_prefix {
                continue;
            }
            expect_invalid_path(s.zk.create(&bad, b"", mode).await, &bad, "create");
        }
        expect_invalid_path(s.zk.delete(&bad, None).await, &bad, "delete");
        expect_invalid_path(s.zk.exists(&bad, Watch::Yes).await, &bad, "exists");
        expect_invalid_path(s.zk.get_data(&bad, Watch::Yes).await, &bad, "get_data");
        expect_invalid_path(s.zk.set_data(&bad, b"", None).await, &bad, "set_data");
        expect_invalid_path(
            s.zk.get_children(&bad, Watch::Yes).await,
            &bad,
            "get_children",
        );
        expect_invalid_path(s.zk.sync(&bad).await, &bad, "sync");
        expect_invalid_path(
            s.zk.count_descendants(&bad).await,
            &bad,
            "count_descendants",
        );
    }
    // Nothing was created, and no watch was left on a "nearby" valid path
    // (as a backend that normalised `x/.` or `x/` to `x` would have).
    assert!(sorted_children(&s.zk, b.root()).await.is_empty());
    s.zk.create(&under(b.root(), "x"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    s.zk.set_data(&under(b.root(), "x"), b"1", None)
        .await
        .unwrap();
    s.assert_no_event().await;
}

pub async fn trailing_slash_is_allowed_for_sequential_creates_only<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "q").await;
    let slash = format!("{dir}/");
    for mode in [CreateMode::Persistent, CreateMode::Ephemeral] {
        expect_invalid_path(s.zk.create(&slash, b"", mode).await, &slash, "create");
    }
    // An empty segment before the final '/' is still invalid.
    let double = format!("{dir}//");
    expect_invalid_path(
        s.zk.create(&double, b"", CreateMode::PersistentSequential)
            .await,
        &double,
        "sequential create",
    );
    assert_eq!(stat_of(&s.zk, &dir).await.cversion, 0, "nothing was sent");
    let made =
        s.zk.create(&slash, b"", CreateMode::PersistentSequential)
            .await
            .unwrap();
    assert_eq!(made, under(&dir, "0000000000"));
}

pub async fn negative_versions_are_refused_with_bad_arguments<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let path = under(b.root(), "node");
    s.zk.create(&path, b"kept", CreateMode::Persistent)
        .await
        .unwrap();
    for version in [-1, -2, i32::MIN] {
        // On the wire -1 would mean "any version": refusing it here is what
        // keeps a caller's arithmetic mistake from deleting the node.
        let error = expect_code(
            s.zk.delete(&path, Some(version)).await,
            ErrorCode::BadArguments,
            "delete",
        );
        assert!(error.to_string().contains(&path), "names the path: {error}");
        let error = expect_code(
            s.zk.set_data(&path, b"lost", Some(version)).await,
            ErrorCode::BadArguments,
            "set_data",
        );
        assert!(error.to_string().contains(&path), "names the path: {error}");
        for (index, op) in [
            op_delete(&path, Some(version)),
            op_set_data(&path, b"lost", Some(version)),
            op_check(&path, Some(version)),
        ]
        .into_iter()
        .enumerate()
        {
            let fresh = under(b.root(), "fresh");
            let mut ops = vec![op_create(&fresh, b"", CreateMode::Persistent)];
            ops.push(op);
            let result = s.zk.multi(ops).await;
            let error = expect_multi_error(result, 1, ErrorCode::BadArguments);
            assert!(
                error.to_string().contains(&path),
                "multi op {index} names the path: {error}"
            );
        }
    }
    let (data, stat) = s.zk.get_data(&path, Watch::No).await.unwrap();
    assert_eq!(data, b"kept");
    assert_eq!(stat.version, 0);
    assert_eq!(sorted_children(&s.zk, b.root()).await, ["node"]);
}

pub async fn invalid_op_in_multi_is_refused_with_its_index<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let good = under(b.root(), "good");
    let bad = format!("{}/bad/", b.root());
    let result =
        s.zk.multi(vec![
            op_create(&good, b"", CreateMode::Persistent),
            op_create(&bad, b"", CreateMode::Persistent),
        ])
        .await;
    match expect_multi_error(result, 1, ErrorCode::BadArguments) {
        ZkError::InvalidPath { path, .. } => assert_eq!(path, bad),
        other => panic!("expected InvalidPath, got {other:?}"),
    }
    let too_big = vec![0u8; MAX_DATA_BYTES + 1];
    let result =
        s.zk.multi(vec![
            op_create(&good, b"", CreateMode::Persistent),
            op_check(&good, Some(0)),
            op_set_data(&good, &too_big, None),
        ])
        .await;
    match expect_multi_error(result, 2, ErrorCode::BadArguments) {
        ZkError::DataTooLarge {
            path, limit_bytes, ..
        } => assert_eq!((path, limit_bytes), (good.clone(), MAX_DATA_BYTES)),
        other => panic!("expected DataTooLarge, got {other:?}"),
    }
    assert!(sorted_children(&s.zk, b.root()).await.is_empty());
}
