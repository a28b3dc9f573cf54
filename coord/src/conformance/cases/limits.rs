//! Size limits: node data up to `MAX_DATA_BYTES`, a multi's whole request
//! up to `MAX_REQUEST_BYTES`, replies up to `MAX_REPLY_BYTES`
//! (`jute.maxbuffer`).

use std::sync::Arc;

use crate::conformance::{
    Backend, connect, create_dir, create_node, op_create, op_delete, op_set_data, sorted_children,
    stat_of, under,
};
use crate::validate::{
    MAX_FRAME_BYTES, create_request_bytes, multi_request_bytes, set_data_request_bytes,
};
use crate::{
    Coordinator, CreateMode, Event, MAX_DATA_BYTES, MAX_REPLY_BYTES, MAX_REQUEST_BYTES,
    SessionState, Watch, WatchKind, ZkError,
};

/// Asserts that `result` is `DataTooLarge` for `path` at `size_bytes`.
#[track_caller]
fn expect_too_large<T: std::fmt::Debug>(result: Result<T, ZkError>, path: &str, size_bytes: usize) {
    match result {
        Err(ZkError::DataTooLarge {
            path: named,
            size_bytes: size,
            limit_bytes,
        }) => {
            assert_eq!(named, path);
            assert_eq!(size, size_bytes);
            assert_eq!(limit_bytes, MAX_DATA_BYTES);
        }
        other => panic!("expected DataTooLarge for {path}, got {other:?}"),
    }
}

pub async fn data_at_the_limit_is_accepted_and_one_byte_more_refused<B: Backend>(b: Arc<B>) {
    let s = connect(&*b).await;
    let at_limit: Vec<u8> = (0..MAX_DATA_BYTES).map(|i| (i % 251) as u8).collect();
    let over: Vec<u8> = vec![7; MAX_DATA_BYTES + 1];

    let big = under(b.root(), "big");
    create_node(&s.zk, &big, &at_limit, CreateMode::Persistent).await;
    let (data, stat) = s.zk.get_data(&big, Watch::No).await.unwrap();
    assert!(data == at_limit, "the full payload reads back");
    assert_eq!(stat.data_length as usize, MAX_DATA_BYTES);

    for mode in [CreateMode::Persistent, CreateMode::EphemeralSequential] {
        let path = under(b.root(), "over");
        expect_too_large(s.zk.create(&path, &over, mode).await, &path, over.len());
    }
    assert_eq!(
        s.zk.exists(&under(b.root(), "over"), Watch::No)
            .await
            .unwrap(),
        None
    );

    expect_too_large(s.zk.set_data(&big, &over, None).await, &big, over.len());
    assert_eq!(stat_of(&s.zk, &big).await.version, 0, "nothing was set");
    let reversed: Vec<u8> = at_limit.iter().rev().copied().collect();
    let stat = s.zk.set_data(&big, &reversed, Some(0)).await.unwrap();
    assert_eq!(stat.version, 1);
    assert!(s.zk.get_data(&big, Watch::No).await.unwrap().0 == reversed);
}

pub async fn multi_over_the_request_limit_is_refused_before_sending<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let first = create_dir(&s.zk, b.root(), "first").await;
    let second = create_dir(&s.zk, b.root(), "second").await;
    // A watch that a multi that reached the server would fire.
    s.zk.get_data(&first, Watch::Yes).await.unwrap();
    // Two ops that each fit in a node, but not together in one request.
    let payload = vec![3u8; 600 * 1024];
    let ops = vec![
        op_set_data(&first, &payload, None),
        op_set_data(&second, &payload, None),
    ];
    let size_bytes = multi_request_bytes(&ops);
    assert!(size_bytes > MAX_REQUEST_BYTES);
    assert_eq!(
        s.zk.multi(ops).await,
        Err(ZkError::RequestTooLarge {
            request: "multi of 2 ops".into(),
            size_bytes,
            limit_bytes: MAX_REQUEST_BYTES,
        })
    );
    // Nothing was sent: the session kept its connection (no Disconnected),
    // nothing changed, no watch fired.
    s.assert_no_event().await;
    assert_eq!(stat_of(&s.zk, &first).await.version, 0);
    assert_eq!(stat_of(&s.zk, &second).await.version, 0);

    // The limit is exact: a multi of exactly `MAX_REQUEST_BYTES` is sent
    // and applied, and the server accepts it.
    let empty_ops = vec![
        op_set_data(&first, b"", None),
        op_set_data(&second, b"", None),
    ];
    let room = MAX_REQUEST_BYTES - multi_request_bytes(&empty_ops);
    let (head, tail) = (vec![1u8; room / 2], vec![2u8; room - room / 2]);
    let at_limit = vec![
        op_set_data(&first, &head, None),
        op_set_data(&second, &tail, None),
    ];
    assert_eq!(multi_request_bytes(&at_limit), MAX_REQUEST_BYTES);
    s.zk.multi(at_limit).await.unwrap();
    s.expect_watch(WatchKind::NodeDataChanged, &first).await;
    assert!(s.zk.get_data(&second, Watch::No).await.unwrap().0 == tail);
    // One byte more is refused.
    let over = vec![
        op_set_data(&first, &head, None),
        op_set_data(&second, &[tail.as_slice(), &[0]].concat(), None),
    ];
    assert!(matches!(
        s.zk.multi(over).await,
        Err(ZkError::RequestTooLarge { size_bytes, .. }) if size_bytes == MAX_REQUEST_BYTES + 1
    ));
    s.assert_no_event().await;
}

pub async fn create_or_set_data_over_the_request_limit_is_refused_before_sending<B: Backend>(
    b: Arc<B>,
) {
    let mut s = connect(&*b).await;
    // A name long enough that data within the node limit no longer fits
    // beside it in one request: a server would drop the connection.
    let path = under(b.root(), &"n".repeat(2 * 1024));
    let fits = MAX_FRAME_BYTES - create_request_bytes(&path, b"");
    assert!(
        fits < MAX_DATA_BYTES,
        "the path leaves less than a node's data"
    );
    let over = vec![5u8; fits + 1];
    let size_bytes = create_request_bytes(&path, &over);
    assert_eq!(size_bytes, MAX_FRAME_BYTES + 1);
    for mode in [CreateMode::Persistent, CreateMode::PersistentSequential] {
        assert_eq!(
            s.zk.create(&path, &over, mode).await,
            Err(ZkError::RequestTooLarge {
                request: format!("create of {path}"),
                size_bytes,
                limit_bytes: MAX_FRAME_BYTES,
            })
        );
    }
    // Nothing was sent: no connection was dropped, nothing was created.
    s.assert_no_event().await;
    assert_eq!(sorted_children(&s.zk, b.root()).await, Vec::<String>::new());

    // The limit is exact, and it is the server's: a create of exactly the
    // limit is sent, and applied.
    let at_limit = vec![6u8; fits];
    create_node(&s.zk, &path, &at_limit, CreateMode::Persistent).await;
    assert!(s.zk.get_data(&path, Watch::Yes).await.unwrap().0 == at_limit);

    // A set_data counts its own fields (no ACL, no flags, a version).
    let fits = MAX_FRAME_BYTES - set_data_request_bytes(&path, b"");
    let over = vec![7u8; fits + 1];
    assert_eq!(
        s.zk.set_data(&path, &over, None).await,
        Err(ZkError::RequestTooLarge {
            request: format!("set_data of {path}"),
            size_bytes: MAX_FRAME_BYTES + 1,
            limit_bytes: MAX_FRAME_BYTES,
        })
    );
    s.assert_no_event().await;
    assert_eq!(stat_of(&s.zk, &path).await.version, 0, "nothing was set");
    let at_limit = vec![8u8; fits];
    s.zk.set_data(&path, &at_limit, Some(0)).await.unwrap();
    s.expect_watch(WatchKind::NodeDataChanged, &path).await;
    assert!(s.zk.get_data(&path, Watch::No).await.unwrap().0 == at_limit);
}

/// Children per multi when filling a big directory: ~100 KB per request.
const CHILDREN_PER_MULTI: usize = 100;
/// Child names long enough that about a thousand of them fill a reply.
const CHILD_NAME_BYTES: usize = 1000;

fn child_name(index: usize) -> String {
    format!("{index:05}{}", "c".repeat(CHILD_NAME_BYTES - 5))
}

async fn add_children<S: Coordinator>(zk: &S, dir: &str, range: std::ops::Range<usize>) {
    let indices: Vec<usize> = range.collect();
    for chunk in indices.chunks(CHILDREN_PER_MULTI) {
        let ops = chunk
            .iter()
            .map(|&i| op_create(&under(dir, &child_name(i)), b"", CreateMode::Persistent))
            .collect();
        zk.multi(ops).await.expect("add children");
    }
}

/// Deletes the children by name: the directory cannot be listed, so a
/// cleanup that walks the tree could not remove it.
async fn remove_children<S: Coordinator>(zk: &S, dir: &str, range: std::ops::Range<usize>) {
    let indices: Vec<usize> = range.collect();
    for chunk in indices.chunks(CHILDREN_PER_MULTI) {
        let ops = chunk
            .iter()
            .map(|&i| op_delete(&under(dir, &child_name(i)), Some(0)))
            .collect();
        zk.multi(ops).await.expect("remove children");
    }
}

pub async fn oversized_children_listing_fails_and_session_survives<B: Backend>(b: Arc<B>) {
    // The listing's encoding is about 4 + name length bytes per child.
    let fits = MAX_REPLY_BYTES / (CHILD_NAME_BYTES + 4) - 40;
    let overflows = MAX_REPLY_BYTES / (CHILD_NAME_BYTES + 4) + 50;
    assert!((fits + 4) * (CHILD_NAME_BYTES + 4) < MAX_REPLY_BYTES);
    assert!(overflows * (CHILD_NAME_BYTES + 4) > MAX_REPLY_BYTES + 16 * 1024);

    let mut s = connect(&*b).await;
    let alive = create_node(&s.zk, &under(b.root(), "alive"), b"", CreateMode::Ephemeral).await;
    let dir = create_dir(&s.zk, b.root(), "big").await;
    add_children(&s.zk, &dir, 0..fits).await;
    let (children, _) = s.zk.get_children(&dir, Watch::No).await.unwrap();
    assert_eq!(children.len(), fits, "a listing under the limit is fine");

    add_children(&s.zk, &dir, fits..overflows).await;
    match s.zk.get_children(&dir, Watch::No).await {
        Err(ZkError::ConnectionLoss { .. }) => {}
        other => panic!(
            "a listing over {MAX_REPLY_BYTES} bytes must fail with ConnectionLoss, got {:?}",
            other.map(|(names, stat)| (names.len(), stat))
        ),
    }

    // The session survives: same id, its ephemeral is still there, and the
    // directory is intact (only the reply was too big).
    let id = s.zk.session_id();
    let stat = s
        .exists_after_reconnect(&alive)
        .await
        .expect("ephemeral kept");
    assert_eq!(stat.ephemeral_owner, id.0);
    assert_eq!(s.zk.session_id(), id);
    assert_eq!(stat_of(&s.zk, &dir).await.num_children as usize, overflows);
    let (children, _) = s.zk.get_children(b.root(), Watch::No).await.unwrap();
    assert_eq!(children.len(), 2);
    remove_children(&s.zk, &dir, 0..overflows).await;
    s.zk.delete(&dir, Some(0)).await.unwrap();
    // A real client reconnects (Disconnected, then Connected); nothing else
    // may have happened to the session.
    s.zk.sync(b.root()).await.unwrap();
    while let Ok(event) = s.events.try_recv() {
        assert!(
            matches!(
                event,
                Event::Session(SessionState::Disconnected | SessionState::Connected)
            ),
            "unexpected {event:?} after a lost reply"
        );
    }
}
