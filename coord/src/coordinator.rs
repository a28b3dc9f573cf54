//! The coordination trait: the subset of ZooKeeper's client API that zkdist
//! needs, as one session's handle.

use std::future::Future;

use crate::error::ZkResult;
use crate::op::{Op, OpResult};
use crate::types::{AddWatchMode, CreateMode, SessionId, Stat, Watch};

/// One ZooKeeper session. Master, worker and client are generic over this
/// trait and never name a backend.
///
/// Contract shared by every implementation (the conformance suite checks it):
/// - paths, data sizes and versions are validated before anything is sent
///   (see [`crate::path`] and [`crate::validate`]);
/// - one session's requests are applied in the order they were issued, and
///   its replies and events arrive in the order the server produced them;
/// - `Watch::Yes` leaves a one-shot watch whose event arrives on the
///   session's [`crate::EventStream`], which also carries session states;
///   [`Coordinator::add_watch`] leaves a persistent one, on the same stream;
///   one change is one event for a session, whatever number of its watches
///   it fires;
/// - an error of kind `ConnectionLoss` means the request may or may not have
///   been applied.
///
/// Futures are `Send` so that a multi-threaded runtime can run them; methods
/// take `&self` so one handle can serve several concurrent requests.
pub trait Coordinator: Send + Sync + 'static {
    /// The server-assigned id of this session.
    fn session_id(&self) -> SessionId;

    /// Creates a node and returns its actual path (with the sequence suffix
    /// for sequential modes).
    fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> impl Future<Output = ZkResult<String>> + Send;

    /// Deletes a node; `version: None` accepts any version.
    fn delete(&self, path: &str, version: Option<i32>)
    -> impl Future<Output = ZkResult<()>> + Send;

    /// The node's stat, or `None` if it does not exist. With `Watch::Yes` the
    /// watch is left even when the node is missing (it fires on create).
    fn exists(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<Option<Stat>>> + Send;

    fn get_data(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<(Vec<u8>, Stat)>> + Send;

    /// Replaces the node's data; `version: None` accepts any version.
    fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> impl Future<Output = ZkResult<Stat>> + Send;

    /// The node's children's names in no particular order (ZooKeeper gives
    /// no order; sort before relying on one), and the node's stat.
    fn get_children(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<(Vec<String>, Stat)>> + Send;

    /// How many nodes lie below `path` at every depth, the node itself not
    /// counted (ZooKeeper 3.6+ `getAllChildrenNumber`); `NoNode` if it is
    /// missing. Asked about `/` (without a chroot), the count includes the
    /// server's own `/zookeeper`, `/zookeeper/quota` and `/zookeeper/config`. The reply is one number however many nodes there are, so
    /// it works where a listing would pass the reply limit; the server
    /// counts by scanning its whole tree, so it is for occasional reads
    /// such as a status, not for every event.
    fn count_descendants(&self, path: &str) -> impl Future<Output = ZkResult<usize>> + Send;

    /// Applies all ops atomically or none of them. On failure the error is
    /// `ZkError::Multi` with the index of the first op that failed.
    fn multi(&self, ops: Vec<Op>) -> impl Future<Output = ZkResult<Vec<OpResult>>> + Send;

    /// Leaves a persistent watch on `path` (ZooKeeper 3.6+ `addWatch`),
    /// which need not exist. Unlike a one-shot watch it fires on every
    /// change it covers (see [`AddWatchMode`]) until the session ends; its
    /// events arrive on the session's [`crate::EventStream`] in server
    /// order with replies, one event per change even when other watches of
    /// this session (one-shot or persistent) cover the same change. It
    /// survives a reconnect within the session (the client registers it
    /// again), but changes made while the session was disconnected are not
    /// reported: after `Connected`, re-read what matters.
    ///
    /// Asking again for the same mode on the same node is harmless (still
    /// one event per change). A session holds one persistent mode per node:
    /// asking for the other mode on a node that has (or asked for) one
    /// fails with `BadArguments` before anything is sent, because a
    /// ZooKeeper 3.8 server would silently replace the first. There is no
    /// removal: the watch goes with the session.
    fn add_watch(
        &self,
        path: &str,
        mode: AddWatchMode,
    ) -> impl Future<Output = ZkResult<()>> + Send;

    /// Waits until the server this session talks to has caught up with the
    /// leader, so that a following read sees every write committed before.
    fn sync(&self, path: &str) -> impl Future<Output = ZkResult<()>> + Send;

    /// Closes the session: the server deletes its ephemerals at once. Later
    /// calls fail with `SessionClosed`.
    fn close(&self) -> impl Future<Output = ZkResult<()>> + Send;
}
