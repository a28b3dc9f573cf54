use super::*;
use CreateMode::*;

const OWNER: SessionId = SessionId(7);

/// Every node, data and stat and children, in path order.
fn nodes_in_order(tree: &Tree) -> String {
    let mut nodes: Vec<_> = tree.nodes.iter().collect();
    nodes.sort_unstable_by_key(|&(path, _)| path);
    format!("{nodes:?}")
}

/// Runs one write as its own transaction, as the server does.
fn create(tree: &mut Tree, target: &str, mode: CreateMode) -> ZkResult<String> {
    let zxid = tree.next_zxid();
    let result = tree.create(zxid, OWNER, target, b"d", mode, &mut Journal::default());
    tree.check_invariants();
    result
}

fn delete(tree: &mut Tree, target: &str, version: Option<i32>) -> ZkResult<()> {
    let zxid = tree.next_zxid();
    let result = tree.delete(zxid, target, version, &mut Journal::default());
    tree.check_invariants();
    result
}

#[test]
fn starts_like_a_fresh_server() {
    let tree = Tree::new();
    assert_eq!(
        tree.paths().collect::<Vec<_>>(),
        ["/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"]
    );
    assert_eq!(tree.children("/").unwrap(), ["zookeeper"]);
    // The server links its own nodes without counting them, so a fresh
    // server reports cversion -1 for / and -2 for /zookeeper.
    assert_eq!(tree.get("/").unwrap().sequence_counter(), 0);
    assert_eq!(tree.stat("/").unwrap().cversion, -1);
    assert_eq!(tree.stat("/zookeeper").unwrap().cversion, -2);
    assert_eq!(tree.zxid(), 0);
    // A 3.8 server answers getAllChildrenNumber("/") with its node count
    // less the root: the system nodes count.
    assert_eq!(tree.descendant_count("/"), Some(3));
    assert_eq!(tree.descendant_count("/zookeeper"), Some(2));
    assert_eq!(tree.descendant_count("/missing"), None);
}

#[test]
fn create_sets_stats_and_parent_counters() {
    let mut tree = Tree::new();
    assert_eq!(create(&mut tree, "/a", Persistent).unwrap(), "/a");
    let stat = tree.stat("/a").unwrap();
    assert_eq!((stat.czxid, stat.mzxid, stat.pzxid), (1, 1, 1));
    assert_eq!(
        (stat.version, stat.data_length, stat.ephemeral_owner),
        (0, 1, 0)
    );
    let root = tree.get("/").unwrap();
    assert_eq!(root.sequence_counter(), 1);
    let root = root.stat();
    // Two children, one create of ours and none deleted: 2 * 1 - 2.
    assert_eq!((root.cversion, root.pzxid, root.num_children), (0, 1, 2));
    create(&mut tree, "/a/e", Ephemeral).unwrap();
    assert_eq!(tree.stat("/a/e").unwrap().ephemeral_owner, OWNER.0);
    assert_eq!(tree.ephemerals(OWNER), ["/a/e"]);
}

#[test]
fn create_check_order_matches_zookeeper() {
    let mut tree = Tree::new();
    create(&mut tree, "/e", Ephemeral).unwrap();
    // Missing parent wins over everything.
    assert!(matches!(
        create(&mut tree, "/missing/x", Persistent),
        Err(ZkError::NoNode { path }) if path == "/missing/x"
    ));
    // An existing name under an ephemeral parent is NodeExists, not
    // NoChildrenForEphemerals: the name is checked first.
    assert!(matches!(
        create(&mut tree, "/e", Persistent),
        Err(ZkError::NodeExists { .. })
    ));
    assert!(matches!(
        create(&mut tree, "/e/child", Persistent),
        Err(ZkError::NoChildrenForEphemerals { path }) if path == "/e/child"
    ));
    assert!(matches!(
        create(&mut tree, "/", Persistent),
        Err(ZkError::NodeExists { .. })
    ));
}

#[test]
fn sequence_counts_every_child_create_and_never_deletes() {
    let mut tree = Tree::new();
    create(&mut tree, "/q", Persistent).unwrap();
    assert_eq!(
        create(&mut tree, "/q/t-", PersistentSequential).unwrap(),
        "/q/t-0000000000"
    );
    create(&mut tree, "/q/plain", Persistent).unwrap();
    delete(&mut tree, "/q/t-0000000000", None).unwrap();
    delete(&mut tree, "/q/plain", None).unwrap();
    // Two creates happened: the counter is 2 whatever was deleted.
    assert_eq!(
        create(&mut tree, "/q/t-", EphemeralSequential).unwrap(),
        "/q/t-0000000002"
    );
    assert_eq!(
        create(&mut tree, "/q/", PersistentSequential).unwrap(),
        "/q/0000000003"
    );
    let q = tree.get("/q").unwrap();
    assert_eq!(q.sequence_counter(), 4);
    // Four creates, two deletes: six changes to the children.
    assert_eq!((q.stat().cversion, q.stat().num_children), (6, 2));
}

#[test]
fn sequence_counter_wraps_like_a_java_int() {
    let mut tree = Tree::new();
    create(&mut tree, "/q", Persistent).unwrap();
    tree.set_sequence_counter("/q", i32::MAX).unwrap();
    assert_eq!(
        create(&mut tree, "/q/t-", PersistentSequential).unwrap(),
        "/q/t-2147483647"
    );
    assert_eq!(
        create(&mut tree, "/q/t-", PersistentSequential).unwrap(),
        "/q/t--2147483648"
    );
    assert_eq!(tree.get("/q").unwrap().sequence_counter(), i32::MIN + 1);
    tree.set_sequence_counter("/q", -5).unwrap();
    assert_eq!(
        create(&mut tree, "/q/t-", PersistentSequential).unwrap(),
        "/q/t--000000005"
    );
    assert!(matches!(
        tree.set_sequence_counter("/nope", 1),
        Err(ZkError::NoNode { path }) if path == "/nope"
    ));
}

#[test]
fn delete_check_order_matches_zookeeper() {
    let mut tree = Tree::new();
    create(&mut tree, "/a", Persistent).unwrap();
    create(&mut tree, "/a/b", Persistent).unwrap();
    for system in SYSTEM_PATHS {
        assert!(matches!(
            delete(&mut tree, system, None),
            Err(ZkError::BadArguments { .. })
        ));
    }
    assert!(matches!(
        delete(&mut tree, "/x/y", None),
        Err(ZkError::NoNode { .. })
    ));
    assert!(matches!(
        delete(&mut tree, "/a/x", None),
        Err(ZkError::NoNode { .. })
    ));
    // BadVersion is checked before NotEmpty.
    assert!(matches!(
        delete(&mut tree, "/a", Some(3)),
        Err(ZkError::BadVersion { path, expected: 3 }) if path == "/a"
    ));
    assert!(matches!(
        delete(&mut tree, "/a", Some(0)),
        Err(ZkError::NotEmpty { .. })
    ));
    let pzxid_before = tree.stat("/a").unwrap().pzxid;
    delete(&mut tree, "/a/b", Some(0)).unwrap();
    let a = tree.stat("/a").unwrap();
    assert!(a.pzxid > pzxid_before, "pzxid moves on a child delete");
    assert_eq!(
        tree.get("/a").unwrap().sequence_counter(),
        1,
        "deletes never move the counter"
    );
    assert_eq!(
        (a.cversion, a.num_children),
        (2, 0),
        "clients count the delete"
    );
}

#[test]
fn set_data_bumps_version_and_mzxid() {
    let mut tree = Tree::new();
    create(&mut tree, "/a", Persistent).unwrap();
    let zxid = tree.next_zxid();
    let stat = tree
        .set_data(zxid, "/a", b"four", Some(0), &mut Journal::default())
        .unwrap();
    assert_eq!(
        (stat.version, stat.mzxid, stat.czxid, stat.data_length),
        (1, zxid, 1, 4)
    );
    let zxid = tree.next_zxid();
    assert!(matches!(
        tree.set_data(zxid, "/a", b"", Some(0), &mut Journal::default()),
        Err(ZkError::BadVersion { expected: 0, .. })
    ));
    assert!(matches!(
        tree.set_data(zxid, "/b", b"", None, &mut Journal::default()),
        Err(ZkError::NoNode { .. })
    ));
    assert_eq!(tree.data("/a").unwrap(), b"four");
}

#[test]
fn triggers_follow_the_firing_rules() {
    let mut tree = Tree::new();
    let mut journal = Journal::default();
    let zxid = tree.next_zxid();
    tree.create(zxid, OWNER, "/a", b"", Persistent, &mut journal)
        .unwrap();
    let zxid = tree.next_zxid();
    tree.set_data(zxid, "/a", b"x", None, &mut journal).unwrap();
    let zxid = tree.next_zxid();
    tree.delete(zxid, "/a", None, &mut journal).unwrap();
    let triggers = journal.triggers;
    use Trigger::*;
    assert_eq!(
        triggers,
        [
            Created("/a".into()),
            ChildrenChanged("/".into()),
            DataChanged("/a".into()),
            Deleted("/a".into()),
            ChildrenChanged("/".into()),
        ]
    );
}

#[test]
fn rollback_restores_everything() {
    let mut tree = Tree::new();
    create(&mut tree, "/q", Persistent).unwrap();
    create(&mut tree, "/q/old", Ephemeral).unwrap();
    let before = nodes_in_order(&tree);
    let zxid = tree.next_zxid();
    let mut journal = Journal::default();
    tree.create(zxid, OWNER, "/q/s-", b"", EphemeralSequential, &mut journal)
        .unwrap();
    tree.set_data(zxid, "/q", b"new", None, &mut journal)
        .unwrap();
    tree.delete(zxid, "/q/old", None, &mut journal).unwrap();
    tree.rollback(journal.undo);
    tree.check_invariants();
    assert_eq!(nodes_in_order(&tree), before);
    assert_eq!(tree.ephemerals(OWNER), ["/q/old"]);
    // The rolled-back sequential name is free again.
    assert_eq!(
        create(&mut tree, "/q/s-", PersistentSequential).unwrap(),
        "/q/s-0000000001"
    );
}

/// A journal without undo records the same triggers and the same
/// tree, and no step to take back.
#[test]
fn a_journal_without_undo_keeps_triggers_only() {
    let mut with_undo = Tree::new();
    let mut without = Tree::new();
    let mut journals = [Journal::default(), Journal::without_undo()];
    for (tree, journal) in [&mut with_undo, &mut without]
        .into_iter()
        .zip(&mut journals)
    {
        create(tree, "/q", Persistent).unwrap();
        create(tree, "/q/old", Ephemeral).unwrap();
        let zxid = tree.next_zxid();
        tree.create(zxid, OWNER, "/q/s-", b"", EphemeralSequential, journal)
            .unwrap();
        tree.set_data(zxid, "/q", b"new", None, journal).unwrap();
        tree.delete(zxid, "/q/old", None, journal).unwrap();
        tree.check_invariants();
    }
    assert_eq!(nodes_in_order(&with_undo), nodes_in_order(&without));
    let [kept, skipped] = journals;
    assert_eq!(kept.triggers, skipped.triggers);
    assert_eq!(kept.triggers.len(), 5);
    assert_eq!(kept.undo.len(), 5);
    assert!(skipped.undo.is_empty());
}

#[test]
fn ephemerals_go_in_one_step_in_the_order_given() {
    let mut tree = Tree::new();
    create(&mut tree, "/a", Persistent).unwrap();
    create(&mut tree, "/a/b", Ephemeral).unwrap();
    create(&mut tree, "/a/z", Ephemeral).unwrap();
    assert_eq!(tree.ephemeral_owners().collect::<Vec<_>>(), [OWNER]);
    let zxid = tree.next_zxid();
    let mut journal = Journal::default();
    let order = ["/a/z".to_owned(), "/a/b".to_owned()];
    tree.delete_ephemerals(zxid, OWNER, &order, &mut journal);
    tree.check_invariants();
    assert_eq!(tree.children("/a").unwrap(), Vec::<&str>::new());
    assert_eq!(tree.stat("/a").unwrap().pzxid, zxid);
    assert_eq!(
        journal.triggers,
        [
            Trigger::Deleted("/a/z".into()),
            Trigger::ChildrenChanged("/a".into()),
            Trigger::Deleted("/a/b".into()),
            Trigger::ChildrenChanged("/a".into()),
        ]
    );
    assert!(tree.ephemerals(OWNER).is_empty());
    assert_eq!(tree.ephemeral_owners().count(), 0);
}

#[test]
#[should_panic(expected = "names each of them once")]
fn an_ephemeral_order_that_leaves_one_out_is_refused() {
    let mut tree = Tree::new();
    create(&mut tree, "/b", Ephemeral).unwrap();
    create(&mut tree, "/z", Ephemeral).unwrap();
    let zxid = tree.next_zxid();
    tree.delete_ephemerals(zxid, OWNER, &["/z".to_owned()], &mut Journal::default());
}
