//! Sequential nodes: `prefix` + the parent's child-create counter, `%010d`.

use std::sync::Arc;

use crate::conformance::{
    Backend, connect, create_dir, create_node, expect_code, sorted_children, stat_of, under,
};
use crate::{Coordinator, CreateMode, ErrorCode, Watch};

pub async fn sequential_names_append_a_ten_digit_counter<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "queue").await;
    let seq = CreateMode::PersistentSequential;
    let first = create_node(&s.zk, &under(&dir, "task-"), b"a", seq).await;
    let second = create_node(&s.zk, &under(&dir, "task-"), b"b", seq).await;
    // Different prefixes under one parent share its counter.
    let other = create_node(&s.zk, &under(&dir, "other"), b"c", seq).await;
    assert_eq!(first, under(&dir, "task-0000000000"));
    assert_eq!(second, under(&dir, "task-0000000001"));
    assert_eq!(other, under(&dir, "other0000000002"));
    let (data, stat) = s.zk.get_data(&second, Watch::No).await.unwrap();
    assert_eq!(data, b"b", "the returned name is the node's real name");
    assert_eq!(
        stat.ephemeral_owner, 0,
        "persistent sequential has no owner"
    );
    assert_eq!(
        sorted_children(&s.zk, &dir).await,
        ["other0000000002", "task-0000000000", "task-0000000001"]
    );
}

pub async fn sequence_counter_advances_on_plain_creates<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "gaps").await;
    let seq = CreateMode::PersistentSequential;
    let n0 = create_node(&s.zk, &under(&dir, "n-"), b"", seq).await;
    create_node(&s.zk, &under(&dir, "plain1"), b"", CreateMode::Persistent).await;
    create_node(&s.zk, &under(&dir, "plain2"), b"", CreateMode::Ephemeral).await;
    let n3 = create_node(&s.zk, &under(&dir, "n-"), b"", seq).await;
    assert_eq!(n0, under(&dir, "n-0000000000"));
    assert_eq!(n3, under(&dir, "n-0000000003"), "plain creates leave a gap");
    // A failed create is not a create: it leaves the counter.
    let taken = under(&dir, "plain1");
    let result = s.zk.create(&taken, b"", CreateMode::Persistent).await;
    expect_code(result, ErrorCode::NodeExists, &taken);
    let n4 = create_node(&s.zk, &under(&dir, "n-"), b"", seq).await;
    assert_eq!(n4, under(&dir, "n-0000000004"));
}

pub async fn sequence_counter_never_reuses_after_delete<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "noreuse").await;
    let seq = CreateMode::PersistentSequential;
    let n0 = create_node(&s.zk, &under(&dir, "n-"), b"", seq).await;
    let n1 = create_node(&s.zk, &under(&dir, "n-"), b"", seq).await;
    s.zk.delete(&n1, None).await.unwrap();
    s.zk.delete(&n0, None).await.unwrap();
    assert!(sorted_children(&s.zk, &dir).await.is_empty());
    let n2 = create_node(&s.zk, &under(&dir, "n-"), b"", seq).await;
    assert_eq!(
        n2,
        under(&dir, "n-0000000002"),
        "deleted numbers never return"
    );
}

pub async fn sequence_counter_belongs_to_the_parent<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let left = create_dir(&s.zk, b.root(), "left").await;
    let right = create_dir(&s.zk, b.root(), "right").await;
    let seq = CreateMode::PersistentSequential;
    for _ in 0..3 {
        create_node(&s.zk, &under(&left, "x"), b"", seq).await;
    }
    let r0 = create_node(&s.zk, &under(&right, "x"), b"", seq).await;
    assert_eq!(
        r0,
        under(&right, "x0000000000"),
        "a fresh parent starts at 0"
    );
    // Grandchildren do not count for the grandparent.
    let l0 = under(&left, "x0000000000");
    create_node(&s.zk, &under(&l0, "deep"), b"", CreateMode::Persistent).await;
    let l3 = create_node(&s.zk, &under(&left, "x"), b"", seq).await;
    assert_eq!(l3, under(&left, "x0000000003"));
}

pub async fn ephemeral_sequential_node_is_named_and_owned<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "members").await;
    let mode = CreateMode::EphemeralSequential;
    let m0 = create_node(&s.zk, &under(&dir, "m-"), b"me", mode).await;
    let m1 = create_node(&s.zk, &under(&dir, "m-"), b"me", mode).await;
    assert_eq!(m0, under(&dir, "m-0000000000"));
    assert_eq!(m1, under(&dir, "m-0000000001"));
    let stat = stat_of(&s.zk, &m1).await;
    assert_eq!(stat.ephemeral_owner, s.zk.session_id().0);
    // Ephemeral and persistent sequential creates share the counter.
    let p = create_node(
        &s.zk,
        &under(&dir, "p-"),
        b"",
        CreateMode::PersistentSequential,
    )
    .await;
    assert_eq!(p, under(&dir, "p-0000000002"));
}

pub async fn sequential_prefix_may_end_with_slash<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "bare").await;
    let prefix = format!("{dir}/");
    let first = create_node(&s.zk, &prefix, b"", CreateMode::PersistentSequential).await;
    let second = create_node(&s.zk, &prefix, b"", CreateMode::EphemeralSequential).await;
    assert_eq!(
        first,
        under(&dir, "0000000000"),
        "the name is the number alone"
    );
    assert_eq!(second, under(&dir, "0000000001"));
    assert_eq!(
        sorted_children(&s.zk, &dir).await,
        ["0000000000", "0000000001"]
    );
}

pub async fn sequential_prefix_may_end_with_dot_or_dot_dot<B: Backend>(b: Arc<B>) {
    // ZooKeeper checks the prefix with a digit appended: `.` and `..` are
    // then the beginning of a name, not relative segments.
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dots").await;
    let dot = create_node(
        &s.zk,
        &under(&dir, "."),
        b"",
        CreateMode::PersistentSequential,
    )
    .await;
    let dot_dot = create_node(
        &s.zk,
        &under(&dir, ".."),
        b"",
        CreateMode::EphemeralSequential,
    )
    .await;
    assert_eq!(dot, under(&dir, ".0000000000"));
    assert_eq!(dot_dot, under(&dir, "..0000000001"));
    assert_eq!(
        sorted_children(&s.zk, &dir).await,
        ["..0000000001", ".0000000000"]
    );
    // In the middle of the path they are relative segments still.
    let inner = format!("{dir}/./x");
    let error = expect_code(
        s.zk.create(&inner, b"", CreateMode::PersistentSequential)
            .await,
        ErrorCode::BadArguments,
        &inner,
    );
    assert!(error.to_string().contains(&inner), "{error}");
}

pub async fn sequential_name_taken_by_a_plain_node_fails_node_exists<B: Backend>(b: Arc<B>) {
    // The server does not skip a name that is already taken: a plain node
    // named like the next sequential one makes the sequential create fail,
    // and the failure does not advance the counter.
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "clash").await;
    let squatter = under(&dir, "x0000000001");
    create_node(&s.zk, &squatter, b"", CreateMode::Persistent).await;
    let prefix = under(&dir, "x");
    for _ in 0..2 {
        let result =
            s.zk.create(&prefix, b"", CreateMode::PersistentSequential)
                .await;
        expect_code(result, ErrorCode::NodeExists, &prefix);
    }
    assert_eq!(stat_of(&s.zk, &dir).await.num_children, 1);
    // Any other create moves the counter past the taken name.
    create_node(&s.zk, &under(&dir, "other"), b"", CreateMode::Persistent).await;
    let next = create_node(&s.zk, &prefix, b"", CreateMode::PersistentSequential).await;
    assert_eq!(next, under(&dir, "x0000000002"));
}
