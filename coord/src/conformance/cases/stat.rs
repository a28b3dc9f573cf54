//! `Stat` fields and the global zxid order of writes.

use std::sync::Arc;

use crate::conformance::{
    Backend, connect, create_dir, expect_error, op_create, sorted_children, stat_of, under,
};
use crate::{ChildCreates, Coordinator, CreateMode, ErrorCode, Watch};

pub async fn every_write_gets_a_higher_zxid<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let dir_czxid = stat_of(&s.zk, &dir).await.czxid;

    let a = under(&dir, "a");
    s.zk.create(&a, b"", CreateMode::Persistent).await.unwrap();
    let a_czxid = stat_of(&s.zk, &a).await.czxid;
    assert!(a_czxid > dir_czxid, "create after create");

    let set = s.zk.set_data(&a, b"x", None).await.unwrap();
    assert!(set.mzxid > a_czxid, "set_data after create");

    let bee = under(&dir, "b");
    s.zk.create(&bee, b"", CreateMode::Persistent)
        .await
        .unwrap();
    let b_czxid = stat_of(&s.zk, &bee).await.czxid;
    assert!(b_czxid > set.mzxid, "create after set_data");

    // A delete shows its zxid as the parent's new pzxid.
    s.zk.delete(&bee, None).await.unwrap();
    let delete_zxid = stat_of(&s.zk, &dir).await.pzxid;
    assert!(delete_zxid > b_czxid, "delete after create");

    let c = under(&dir, "c");
    s.zk.multi(vec![op_create(&c, b"", CreateMode::Persistent)])
        .await
        .unwrap();
    let c_czxid = stat_of(&s.zk, &c).await.czxid;
    assert!(c_czxid > delete_zxid, "multi after delete");

    let again = s.zk.set_data(&a, b"y", None).await.unwrap();
    assert!(again.mzxid > c_czxid, "set_data after multi");
}

pub async fn zxids_increase_across_sessions<B: Backend>(b: Arc<B>) {
    let s1 = connect(&*b).await;
    let s2 = connect(&*b).await;
    let first = under(b.root(), "first");
    let second = under(b.root(), "second");
    let third = under(b.root(), "third");
    s1.zk
        .create(&first, b"", CreateMode::Persistent)
        .await
        .unwrap();
    // s1's write is applied (its reply came back), so s2's later write is
    // ordered after it in the single global order.
    s2.zk
        .create(&second, b"", CreateMode::Persistent)
        .await
        .unwrap();
    s1.zk
        .create(&third, b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    let z1 = stat_of(&s2.zk, &first).await.czxid;
    let z2 = stat_of(&s2.zk, &second).await.czxid;
    // s2 may lag behind s1's last write on a real ensemble: sync first.
    s2.zk.sync(&third).await.unwrap();
    let z3 = stat_of(&s2.zk, &third).await.czxid;
    assert!(z1 < z2 && z2 < z3, "zxids {z1} {z2} {z3} follow the writes");
}

pub async fn ephemeral_owner_is_the_creating_session<B: Backend>(b: Arc<B>) {
    let s1 = connect(&*b).await;
    let s2 = connect(&*b).await;
    assert_ne!(
        s1.zk.session_id(),
        s2.zk.session_id(),
        "two sessions have two ids"
    );
    let mine = under(b.root(), "mine");
    let yours = under(b.root(), "yours");
    let plain = under(b.root(), "plain");
    s1.zk
        .create(&mine, b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    s2.zk
        .create(&yours, b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    s1.zk
        .create(&plain, b"", CreateMode::Persistent)
        .await
        .unwrap();
    // Each reads nodes the other created: after a sync, on an ensemble.
    s1.zk.sync(&yours).await.unwrap();
    s2.zk.sync(&plain).await.unwrap();
    // Every session reads the same owner, whoever asks.
    for reader in [&s1, &s2] {
        let (_, stat) = reader.zk.get_data(&mine, Watch::No).await.unwrap();
        assert_eq!(stat.ephemeral_owner, s1.zk.session_id().0);
        let stat = stat_of(&reader.zk, &yours).await;
        assert_eq!(stat.ephemeral_owner, s2.zk.session_id().0);
        assert_eq!(stat_of(&reader.zk, &plain).await.ephemeral_owner, 0);
    }
    assert_ne!(s1.zk.session_id().0, 0, "a session id is never 0");
}

pub async fn get_children_returns_names_and_the_parent_stat<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let (children, stat) = s.zk.get_children(&dir, Watch::No).await.unwrap();
    assert!(children.is_empty());
    assert_eq!(stat.num_children, 0);
    for name in ["zeta", "alpha", "mid"] {
        s.zk.create(&under(&dir, name), b"", CreateMode::Persistent)
            .await
            .unwrap();
    }
    s.zk.create(&under(&dir, "alpha/inner"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    let (_, stat) = s.zk.get_children(&dir, Watch::No).await.unwrap();
    assert_eq!(stat, stat_of(&s.zk, &dir).await, "the parent's own stat");
    assert_eq!(stat.num_children, 3);
    // Names only, direct children only.
    assert_eq!(sorted_children(&s.zk, &dir).await, ["alpha", "mid", "zeta"]);
}

pub async fn stat_cversion_counts_child_creates_and_deletes<B: Backend>(b: Arc<B>) {
    // ZooKeeper's stat reports cversion as the number of changes to the
    // children (creates and deletes), while the sequence counter that names
    // sequential children counts creates only.
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let first =
        s.zk.create(&under(&dir, "n-"), b"", CreateMode::PersistentSequential)
            .await
            .unwrap();
    s.zk.create(&under(&dir, "plain"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    assert_eq!(stat_of(&s.zk, &dir).await.cversion, 2);
    s.zk.delete(&first, None).await.unwrap();
    let stat = stat_of(&s.zk, &dir).await;
    assert_eq!((stat.cversion, stat.num_children), (3, 1));
    // A child's data change is not a change to the list of children.
    let pzxid = stat.pzxid;
    s.zk.set_data(&under(&dir, "plain"), b"x", None)
        .await
        .unwrap();
    let stat = stat_of(&s.zk, &dir).await;
    assert_eq!((stat.cversion, stat.pzxid), (3, pzxid));
    // The sequence counter went 0 -> 2 (two creates); the delete left it,
    // and the stat gives it back (what the master's reconcile relies on).
    assert_eq!(stat.child_creates(), ChildCreates::new(2));
    let next =
        s.zk.create(&under(&dir, "n-"), b"", CreateMode::PersistentSequential)
            .await
            .unwrap();
    assert_eq!(next, under(&dir, "n-0000000002"));
    let stat = stat_of(&s.zk, &dir).await;
    assert_eq!(
        (stat.cversion, stat.child_creates()),
        (4, ChildCreates::new(3))
    );
    let (_, listed) = s.zk.get_children(&dir, Watch::No).await.unwrap();
    assert_eq!(
        listed.child_creates(),
        ChildCreates::new(3),
        "a listing's stat tells it too"
    );
}

pub async fn count_descendants_counts_every_level_below_the_node<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let count = |path: String| {
        let zk = &s.zk;
        async move {
            zk.count_descendants(&path)
                .await
                .unwrap_or_else(|e| panic!("count_descendants({path}): {e}"))
        }
    };
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    assert_eq!(
        count(dir.clone()).await,
        0,
        "the node itself is not counted"
    );
    for relative in ["a", "a/b", "a/b/c", "a/b2", "d"] {
        s.zk.create(&under(&dir, relative), b"", CreateMode::Persistent)
            .await
            .unwrap();
    }
    s.zk.create(&under(&dir, "d/e"), b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    s.zk.create(&under(&dir, "d/n-"), b"", CreateMode::PersistentSequential)
        .await
        .unwrap();
    // A sibling whose name starts with the node's is not below it.
    let sibling = create_dir(&s.zk, b.root(), "dir-sibling").await;
    s.zk.create(&under(&sibling, "x"), b"", CreateMode::Persistent)
        .await
        .unwrap();

    assert_eq!(count(dir.clone()).await, 7, "every depth, ephemerals too");
    assert_eq!(count(under(&dir, "a")).await, 3);
    assert_eq!(count(under(&dir, "a/b/c")).await, 0, "a leaf");
    assert_eq!(count(sibling).await, 1);
    // The root's count includes the case's other nodes: 7 + dir, and the
    // sibling with its child.
    assert_eq!(count(b.root().to_owned()).await, 10);

    s.zk.delete(&under(&dir, "a/b/c"), None).await.unwrap();
    assert_eq!(count(dir.clone()).await, 6);
    expect_error(
        s.zk.count_descendants(&under(&dir, "a/b/c")).await,
        ErrorCode::NoNode,
        &under(&dir, "a/b/c"),
    );
}
