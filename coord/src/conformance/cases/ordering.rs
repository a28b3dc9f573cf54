//! Per-session order: one session's requests are applied in the order it
//! issued them, and its replies and events arrive in the order the server
//! produced them, so an event always comes before any read that shows the
//! change behind it.

use std::sync::Arc;

use crate::conformance::{Backend, connect, create_dir, stat_of, under, watch_event};
use crate::{Coordinator, CreateMode, Watch, WatchKind};

/// How many reads a case makes while waiting to see a concurrent write.
const MAX_POLLING_READS: usize = 10_000;

pub async fn watch_event_arrives_before_a_read_that_shows_the_change<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let path = under(b.root(), "node");
    writer
        .zk
        .create(&path, b"old", CreateMode::Persistent)
        .await
        .unwrap();
    watcher.zk.sync(&path).await.unwrap();
    watcher.zk.get_data(&path, Watch::Yes).await.unwrap();

    // The watcher reads while the write is in flight. The first read that
    // shows the new data must find the event already delivered.
    let (set, ()) = tokio::join!(writer.zk.set_data(&path, b"new", None), async {
        for _ in 0..MAX_POLLING_READS {
            let (data, stat) = watcher.zk.get_data(&path, Watch::No).await.unwrap();
            if data == b"new" {
                assert_eq!(stat.version, 1);
                assert_eq!(
                    watcher.event_now(),
                    watch_event(WatchKind::NodeDataChanged, &path),
                    "the event precedes the read that shows the change"
                );
                return;
            }
            assert_eq!(data, b"old");
        }
        panic!("the write never became visible in {MAX_POLLING_READS} reads");
    });
    set.unwrap();
    watcher.assert_no_event().await;
}

pub async fn own_write_event_arrives_before_the_write_reply<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let child = under(&dir, "child");

    assert_eq!(s.zk.exists(&child, Watch::Yes).await.unwrap(), None);
    s.zk.create(&child, b"", CreateMode::Persistent)
        .await
        .unwrap();
    assert_eq!(s.event_now(), watch_event(WatchKind::NodeCreated, &child));
    s.assert_no_event_now();

    s.zk.get_data(&child, Watch::Yes).await.unwrap();
    s.zk.set_data(&child, b"x", None).await.unwrap();
    assert_eq!(
        s.event_now(),
        watch_event(WatchKind::NodeDataChanged, &child)
    );

    s.zk.get_children(&dir, Watch::Yes).await.unwrap();
    s.zk.exists(&child, Watch::Yes).await.unwrap();
    s.zk.delete(&child, None).await.unwrap();
    assert_eq!(s.event_now(), watch_event(WatchKind::NodeDeleted, &child));
    assert_eq!(
        s.event_now(),
        watch_event(WatchKind::NodeChildrenChanged, &dir)
    );
    s.assert_no_event_now();
}

pub async fn events_arrive_in_the_order_of_the_changes<B: Backend>(b: Arc<B>) {
    let mut watcher = connect(&*b).await;
    let writer = connect(&*b).await;
    let names = ["a", "b", "c", "d"];
    for name in names {
        create_dir(&writer.zk, b.root(), name).await;
    }
    watcher.zk.sync(b.root()).await.unwrap();
    for name in names {
        watcher
            .zk
            .get_data(&under(b.root(), name), Watch::Yes)
            .await
            .unwrap();
    }
    let order = ["c", "a", "d", "b"];
    for name in order {
        writer
            .zk
            .set_data(&under(b.root(), name), b"x", None)
            .await
            .unwrap();
    }
    let expected: Vec<_> = order
        .iter()
        .map(|name| watch_event(WatchKind::NodeDataChanged, &under(b.root(), name)))
        .collect();
    watcher.expect_events(&expected).await;
}

pub async fn concurrent_creates_of_one_session_apply_in_issue_order<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let prefix = under(&dir, "n-");
    let seq = CreateMode::PersistentSequential;
    let (r0, r1, r2, r3, r4) = tokio::join!(
        s.zk.create(&prefix, b"0", seq),
        s.zk.create(&prefix, b"1", seq),
        s.zk.create(&prefix, b"2", seq),
        s.zk.create(&prefix, b"3", seq),
        s.zk.create(&prefix, b"4", seq),
    );
    let names = [r0, r1, r2, r3, r4].map(Result::unwrap);
    let mut last_czxid = 0;
    for (i, name) in names.iter().enumerate() {
        assert_eq!(
            *name,
            format!("{prefix}{i:010}"),
            "issue order = sequence order"
        );
        let (data, stat) = s.zk.get_data(name, Watch::No).await.unwrap();
        assert_eq!(data, i.to_string().as_bytes());
        assert!(stat.czxid > last_czxid, "issue order = zxid order");
        last_czxid = stat.czxid;
    }

    let node = names[0].as_str();
    let (v1, v2, v3) = tokio::join!(
        s.zk.set_data(node, b"first", None),
        s.zk.set_data(node, b"second", None),
        s.zk.set_data(node, b"third", None),
    );
    let versions = [v1, v2, v3].map(|r| r.unwrap().version);
    assert_eq!(versions, [1, 2, 3]);
    let (data, _) = s.zk.get_data(node, Watch::No).await.unwrap();
    assert_eq!(data, b"third", "the last issued write wins");
}

pub async fn concurrent_dependent_ops_of_one_session_all_succeed<B: Backend>(b: Arc<B>) {
    // Each op depends on the one before it, so any reordering fails one.
    let s = connect(&*b).await;
    let dir = under(b.root(), "dir");
    let child = under(&dir, "child");
    let (created_dir, created_child, set, read, deleted_child, deleted_dir, gone) = tokio::join!(
        s.zk.create(&dir, b"", CreateMode::Persistent),
        s.zk.create(&child, b"a", CreateMode::Persistent),
        s.zk.set_data(&child, b"b", Some(0)),
        s.zk.get_data(&child, Watch::No),
        s.zk.delete(&child, Some(1)),
        s.zk.delete(&dir, Some(0)),
        s.zk.exists(&dir, Watch::No),
    );
    assert_eq!(created_dir.unwrap(), dir);
    assert_eq!(created_child.unwrap(), child);
    assert_eq!(set.unwrap().version, 1);
    assert_eq!(read.unwrap().0, b"b");
    deleted_child.unwrap();
    deleted_dir.unwrap();
    assert_eq!(gone.unwrap(), None);
}

pub async fn sync_then_read_sees_another_sessions_write<B: Backend>(b: Arc<B>) {
    let reader = connect(&*b).await;
    let writer = connect(&*b).await;
    let path = under(b.root(), "node");
    let mut last_version = -1;
    for (i, data) in [b"one", b"two", b"six"].iter().enumerate() {
        if i == 0 {
            writer
                .zk
                .create(&path, *data, CreateMode::Persistent)
                .await
                .unwrap();
        } else {
            writer.zk.set_data(&path, *data, None).await.unwrap();
        }
        reader.zk.sync(&path).await.unwrap();
        let (read, stat) = reader.zk.get_data(&path, Watch::No).await.unwrap();
        assert_eq!(read, *data, "a read after sync sees the latest write");
        assert!(stat.version > last_version, "the reader never goes back");
        last_version = stat.version;
    }
    assert_eq!(stat_of(&reader.zk, &path).await.version, 2);
}
