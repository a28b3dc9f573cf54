//! A session whose link drops and comes back within its timeout is the same
//! session: it sees `Disconnected` then `Connected`, keeps its ephemerals
//! and its watches, and hears of the changes it missed only through the
//! watches it still holds ("ZooKeeper Sessions", "ZooKeeper Watches").

use std::sync::Arc;
use std::time::Duration;

use crate::conformance::{
    Backend, TestSession, connect, create_dir, create_node, stat_of, under, watch_event,
};
use crate::{Coordinator, CreateMode, Event, SessionState, Watch, WatchKind, ZkError};

/// A cut well under every backend's session timeout, and long enough for
/// another session to make changes while it lasts.
const SHORT_CUT: Duration = Duration::from_secs(1);

/// The events of a session whose link was cut and came back.
fn disconnected_then_connected() -> [Event; 2] {
    [
        Event::Session(SessionState::Disconnected),
        Event::Session(SessionState::Connected),
    ]
}

/// Cuts `s`'s link for [`SHORT_CUT`] and waits until the session noticed.
async fn cut_and_notice<B: Backend>(b: &B, s: &mut TestSession<B::Session>) {
    b.cut(&s.zk, SHORT_CUT).await;
    assert_eq!(
        s.next_event().await,
        Event::Session(SessionState::Disconnected)
    );
}

pub async fn a_short_cut_keeps_the_session_and_its_ephemerals<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let other = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let eph = create_node(&s.zk, &under(&dir, "eph"), b"", CreateMode::Ephemeral).await;
    let id = s.zk.session_id();

    b.cut(&s.zk, SHORT_CUT).await;
    s.expect_events(&disconnected_then_connected()).await;
    assert_eq!(s.zk.session_id(), id, "the same session");
    other.zk.sync(&dir).await.unwrap();
    let stat = stat_of(&other.zk, &eph).await;
    assert_eq!(
        stat.ephemeral_owner, id.0,
        "the ephemeral is still the session's"
    );
    // The session works on, and owns what it creates.
    s.zk.set_data(&eph, b"after", Some(0)).await.unwrap();
    let later = create_node(&s.zk, &under(&dir, "later"), b"", CreateMode::Ephemeral).await;
    other.zk.sync(&later).await.unwrap();
    assert_eq!(stat_of(&other.zk, &later).await.ephemeral_owner, id.0);
    s.assert_no_event().await;
}

pub async fn a_watch_set_before_a_cut_fires_after_reconnect_if_its_node_changed<B: Backend>(
    b: Arc<B>,
) {
    let mut s = connect(&*b).await;
    let other = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let changed = create_node(&s.zk, &under(&dir, "changed"), b"", CreateMode::Persistent).await;
    let unchanged = create_node(
        &s.zk,
        &under(&dir, "unchanged"),
        b"",
        CreateMode::Persistent,
    )
    .await;
    s.zk.get_data(&changed, Watch::Yes).await.unwrap();
    s.zk.get_data(&unchanged, Watch::Yes).await.unwrap();
    s.zk.get_children(&dir, Watch::Yes).await.unwrap();

    cut_and_notice(&*b, &mut s).await;
    // While the session is away: one watched node changes, a child appears.
    other
        .zk
        .set_data(&changed, b"meanwhile", None)
        .await
        .unwrap();
    create_node(&other.zk, &under(&dir, "new"), b"", CreateMode::Persistent).await;

    // Back: the watches re-registered on reconnect fire for what changed,
    // after `Connected`, once each; the unchanged node's watch stays quiet.
    assert_eq!(
        s.next_event().await,
        Event::Session(SessionState::Connected)
    );
    s.expect_events_unordered(&[
        watch_event(WatchKind::NodeDataChanged, &changed),
        watch_event(WatchKind::NodeChildrenChanged, &dir),
    ])
    .await;
    s.assert_no_event().await;
    // The unchanged node's watch is still armed.
    other.zk.set_data(&unchanged, b"now", None).await.unwrap();
    s.expect_watch(WatchKind::NodeDataChanged, &unchanged).await;
}

pub async fn an_exists_watch_on_a_node_created_and_deleted_during_a_cut_is_lost<B: Backend>(
    b: Arc<B>,
) {
    let mut s = connect(&*b).await;
    let other = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "dir").await;
    let node = under(&dir, "brief");
    assert_eq!(s.zk.exists(&node, Watch::Yes).await.unwrap(), None);

    cut_and_notice(&*b, &mut s).await;
    create_node(&other.zk, &node, b"", CreateMode::Persistent).await;
    other.zk.delete(&node, None).await.unwrap();

    // On reconnect the node is missing again, as when the watch was set:
    // nothing tells the session it existed meanwhile. (Unless the server
    // it comes back through had not applied the create yet: the watch it
    // registers again then fires when it does.)
    assert_eq!(
        s.next_event().await,
        Event::Session(SessionState::Connected)
    );
    let told = s.events_after_sync().await;
    let created = watch_event(WatchKind::NodeCreated, &node);
    if b.servers_may_lag() && told == [created] {
        assert_eq!(s.zk.exists(&node, Watch::Yes).await.unwrap(), None);
    } else {
        assert_eq!(told, [], "nothing is told of the brief node");
    }
    // The watch itself survived: the next create fires it.
    create_node(&other.zk, &node, b"", CreateMode::Persistent).await;
    s.expect_watch(WatchKind::NodeCreated, &node).await;
}

pub async fn a_request_issued_while_disconnected_is_sent_after_reconnect<B: Backend>(b: Arc<B>) {
    let mut s = connect(&*b).await;
    let other = connect(&*b).await;
    let node = create_node(&s.zk, &under(b.root(), "node"), b"", CreateMode::Persistent).await;

    cut_and_notice(&*b, &mut s).await;
    // Issued while the session knows it is disconnected: the client keeps
    // the request and sends it once reconnected, rather than fail it.
    let stat = s.zk.set_data(&node, b"queued", Some(0)).await.unwrap();
    assert_eq!(stat.version, 1);
    assert_eq!(
        s.event_now(),
        Event::Session(SessionState::Connected),
        "the reply comes after the reconnection"
    );
    other.zk.sync(&node).await.unwrap();
    assert_eq!(
        other.zk.get_data(&node, Watch::No).await.unwrap().0,
        b"queued"
    );
    s.assert_no_event().await;
}

/// A write the server applied but whose reply never reached the client
/// fails with `ConnectionLoss`, and stays applied: the client cannot tell
/// it from a write that never arrived. Sent again, a sequential create
/// makes a second node ("ZooKeeper Sessions": a connection loss leaves an
/// operation's outcome unknown), which is why a submit looks for its token
/// before it creates again.
pub async fn a_write_applied_whose_reply_was_lost_fails_with_connection_loss<B: Backend>(
    b: Arc<B>,
) {
    let mut s = connect(&*b).await;
    let other = connect(&*b).await;
    let dir = create_dir(&s.zk, b.root(), "queue").await;
    let prefix = under(&dir, "t-");

    b.deafen(&s.zk).await;
    let created = s.zk.create(&prefix, b"", CreateMode::PersistentSequential);
    let applied_then_cut = async {
        // The create is applied: another session sees its node. Then the
        // link goes, with the reply that never came.
        let applied = async {
            loop {
                other.zk.sync(&dir).await.unwrap();
                let (children, _) = other.zk.get_children(&dir, Watch::No).await.unwrap();
                if !children.is_empty() {
                    break children;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        // A hang guard, not a time limit.
        let children = tokio::time::timeout(Duration::from_secs(60), applied)
            .await
            .expect("the deafened session's create is applied");
        b.cut(&s.zk, SHORT_CUT).await;
        children
    };
    let (created, children) = tokio::join!(created, applied_then_cut);
    assert!(
        matches!(created, Err(ZkError::ConnectionLoss { .. })),
        "the create's outcome is unknown to the client: {created:?}"
    );
    assert_eq!(children, ["t-0000000000"], "and yet it was applied");
    s.expect_events(&disconnected_then_connected()).await;
    assert_eq!(
        s.zk.create(&prefix, b"", CreateMode::PersistentSequential)
            .await
            .unwrap(),
        under(&dir, "t-0000000001"),
        "sent again, it makes a second node"
    );
    s.assert_no_event().await;
}
