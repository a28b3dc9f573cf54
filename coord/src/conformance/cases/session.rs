//! A closed or expired session is dead for good: every call fails with the
//! error that says why.

use std::sync::Arc;

use crate::conformance::{Backend, connect, create_dir, expect_code, op_create, under};
use crate::{Coordinator, CreateMode, ErrorCode, Event, SessionState, Watch};

/// Calls every operation of the trait on `zk` and checks that each fails
/// with `code`.
async fn every_call_fails<S: Coordinator>(zk: &S, dir: &str, code: ErrorCode) {
    let node = under(dir, "node");
    let fresh = under(dir, "fresh");
    expect_code(
        zk.create(&fresh, b"", CreateMode::Persistent).await,
        code,
        "create",
    );
    expect_code(zk.delete(&node, None).await, code, "delete");
    expect_code(zk.exists(&node, Watch::No).await, code, "exists");
    expect_code(zk.exists(&node, Watch::Yes).await, code, "exists+watch");
    expect_code(zk.get_data(&node, Watch::No).await, code, "get_data");
    expect_code(zk.set_data(&node, b"x", None).await, code, "set_data");
    expect_code(zk.get_children(dir, Watch::Yes).await, code, "get_children");
    expect_code(
        zk.multi(vec![op_create(&fresh, b"", CreateMode::Persistent)])
            .await,
        code,
        "multi",
    );
    expect_code(zk.sync(dir).await, code, "sync");
}

pub async fn ops_after_close_fail_session_closed<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let other = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    s.zk.create(&under(&dir, "node"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    let id = s.zk.session_id();
    s.zk.close().await.unwrap();
    assert_eq!(s.zk.session_id(), id, "the id outlives the session");
    // The stream says `Closed`, then ends.
    assert_eq!(s.next_event().await, Event::Session(SessionState::Closed));
    s.expect_stream_end().await;
    every_call_fails(&s.zk, &dir, ErrorCode::SessionClosed).await;
    // The calls changed nothing.
    other.zk.sync(&dir).await.unwrap();
    assert!(
        other
            .zk
            .exists(&under(&dir, "node"), Watch::No)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        other
            .zk
            .exists(&under(&dir, "fresh"), Watch::No)
            .await
            .unwrap(),
        None
    );
}

pub async fn ops_after_expiry_fail_session_expired<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let other = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    s.zk.create(&under(&dir, "node"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    b.expire(&s.zk).await;
    s.learn_expiry().await;
    every_call_fails(&s.zk, &dir, ErrorCode::SessionExpired).await;
    // A new session works, and the dead one changed nothing.
    other.zk.sync(&dir).await.unwrap();
    assert!(
        other
            .zk
            .exists(&under(&dir, "node"), Watch::No)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        other
            .zk
            .exists(&under(&dir, "fresh"), Watch::No)
            .await
            .unwrap(),
        None
    );
    let fresh = connect(&*b).await;
    assert_ne!(fresh.zk.session_id(), s.zk.session_id());
    fresh
        .zk
        .create(&under(&dir, "after"), b"", CreateMode::Ephemeral)
        .await
        .unwrap();
}
