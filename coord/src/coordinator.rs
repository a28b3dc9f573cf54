//! The coordination trait: the subset of ZooKeeper's client API that zkdist
//! needs, as one session's handle.

use std::future::Future;

use crate::error::ZkResult;
use crate::op::{Op, OpResult};
use crate::request::{ChildrenRead, DataRead, Reply, Request, unexpected};
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
///
/// A backend implements [`Coordinator::call`], which takes any request as
/// a [`Request`]; the typed methods build one, call it and unpack the
/// [`Reply`]. A wrapper of a session (one that counts requests, or delays
/// some) implements `call` alone as well, and sees every request.
pub trait Coordinator: Send + Sync + 'static {
    /// The server-assigned id of this session.
    fn session_id(&self) -> SessionId;

    /// How long this session may report `Disconnected` before its server
    /// may have expired it: from the event on, it holds for at least this
    /// long (see [`crate::disconnected_grace_ms`], which backends apply to
    /// the timeout their server granted). Work the session licenses, such
    /// as a worker's task, must stop once the grace has passed without a
    /// `Connected`: another process may hold it by then.
    fn disconnected_grace_ms(&self) -> u64;

    /// Checks `request` and sends it at once, before the future is polled,
    /// so that a session's requests keep the order of the calls; the
    /// future is its reply. A request that fails the client-side checks is
    /// an error of the future, and nothing is sent.
    fn call(&self, request: Request) -> impl Future<Output = ZkResult<Reply>> + Send;

    /// Creates a node and returns its actual path (with the sequence suffix
    /// for sequential modes).
    fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> impl Future<Output = ZkResult<String>> + Send {
        let reply = self.call(Request::Create {
            path: path.to_owned(),
            data: data.to_vec(),
            mode,
        });
        async move {
            match reply.await? {
                Reply::Created(path) => Ok(path),
                other => Err(unexpected("create", other)),
            }
        }
    }

    /// Deletes a node; `version: None` accepts any version.
    fn delete(
        &self,
        path: &str,
        version: Option<i32>,
    ) -> impl Future<Output = ZkResult<()>> + Send {
        let reply = self.call(Request::Delete {
            path: path.to_owned(),
            version,
        });
        async move {
            match reply.await? {
                Reply::Deleted => Ok(()),
                other => Err(unexpected("delete", other)),
            }
        }
    }

    /// The node's stat, or `None` if it does not exist. With `Watch::Yes` the
    /// watch is left even when the node is missing (it fires on create).
    fn exists(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<Option<Stat>>> + Send {
        let reply = self.call(Request::Exists {
            path: path.to_owned(),
            watch: watch == Watch::Yes,
        });
        async move {
            match reply.await? {
                Reply::Exists(stat) => Ok(stat),
                other => Err(unexpected("exists", other)),
            }
        }
    }

    fn get_data(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<(Vec<u8>, Stat)>> + Send {
        let reply = self.call(Request::GetData {
            path: path.to_owned(),
            watch: watch == Watch::Yes,
        });
        async move {
            match reply.await? {
                Reply::Data(data, stat) => Ok((data, stat)),
                other => Err(unexpected("get_data", other)),
            }
        }
    }

    /// The data and stat of each of `paths`, read in one request
    /// (ZooKeeper 3.6+ `multiRead`), one result per path in their order:
    /// a missing node is `NoNode` in its own place and fails nothing else.
    /// No watch is left. The server's cost follows requests more than
    /// nodes: a multi-read of 16 small nodes costs it one to a few
    /// `get_data`s (`zkdist bench` measures it). An
    /// empty list is answered at once, with nothing sent. The reply is not
    /// held to the session's reply limit, as a `get_data`'s is not: each
    /// node is, so a caller bounds the reply by how many paths it asks for.
    fn get_data_many(
        &self,
        paths: Vec<String>,
    ) -> impl Future<Output = ZkResult<Vec<DataRead>>> + Send {
        // Sent now, before the future is polled, as every request is.
        let reply = (!paths.is_empty()).then(|| self.call(Request::GetDataMany { paths }));
        async move {
            let Some(reply) = reply else {
                return Ok(Vec::new());
            };
            match reply.await? {
                Reply::DataMany(results) => Ok(results),
                other => Err(unexpected("get_data_many", other)),
            }
        }
    }

    /// The children of each of `paths`, listed in one request (ZooKeeper
    /// 3.6+ `multiRead`), one result per path in their order, as
    /// [`get_data_many`](Coordinator::get_data_many) reads data: a missing
    /// node is `NoNode` in its own place, no watch is left, and an empty
    /// list is answered at once. A listing in a multi-read carries no
    /// stat. Neither backend holds the reply to the session's reply limit,
    /// which guards a single listing (a Java client's `jute.maxbuffer`
    /// would hold the whole multi-read's reply to it): a caller lists
    /// nodes it knows to be small (leaves, to learn whether they exist
    /// without one request each).
    fn get_children_many(
        &self,
        paths: Vec<String>,
    ) -> impl Future<Output = ZkResult<Vec<ChildrenRead>>> + Send {
        // Sent now, before the future is polled, as every request is.
        let reply = (!paths.is_empty()).then(|| self.call(Request::GetChildrenMany { paths }));
        async move {
            let Some(reply) = reply else {
                return Ok(Vec::new());
            };
            match reply.await? {
                Reply::ChildrenMany(results) => Ok(results),
                other => Err(unexpected("get_children_many", other)),
            }
        }
    }

    /// Replaces the node's data; `version: None` accepts any version.
    fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> impl Future<Output = ZkResult<Stat>> + Send {
        let reply = self.call(Request::SetData {
            path: path.to_owned(),
            data: data.to_vec(),
            version,
        });
        async move {
            match reply.await? {
                Reply::DataSet(stat) => Ok(stat),
                other => Err(unexpected("set_data", other)),
            }
        }
    }

    /// The node's children's names in no particular order (ZooKeeper gives
    /// no order; sort before relying on one), and the node's stat.
    fn get_children(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<(Vec<String>, Stat)>> + Send {
        let reply = self.call(Request::GetChildren {
            path: path.to_owned(),
            watch: watch == Watch::Yes,
        });
        async move {
            match reply.await? {
                Reply::Children(names, stat) => Ok((names, stat)),
                other => Err(unexpected("get_children", other)),
            }
        }
    }

    /// How many nodes lie below `path` at every depth, the node itself not
    /// counted (ZooKeeper 3.6+ `getAllChildrenNumber`); `NoNode` if it is
    /// missing. Asked about `/` (without a chroot), the count includes the
    /// server's own `/zookeeper`, `/zookeeper/quota` and `/zookeeper/config`. The reply is one number however many nodes there are, so
    /// it works where a listing would pass the reply limit; the server
    /// counts by scanning its whole tree, so it is for occasional reads
    /// such as a status, not for every event.
    fn count_descendants(&self, path: &str) -> impl Future<Output = ZkResult<usize>> + Send {
        let reply = self.call(Request::CountDescendants {
            path: path.to_owned(),
        });
        async move {
            match reply.await? {
                Reply::DescendantCount(count) => Ok(count),
                other => Err(unexpected("count_descendants", other)),
            }
        }
    }

    /// Applies all ops atomically or none of them. On failure the error is
    /// `ZkError::Multi` with the index of the first op that failed.
    fn multi(&self, ops: Vec<Op>) -> impl Future<Output = ZkResult<Vec<OpResult>>> + Send {
        let reply = self.call(Request::Multi { ops });
        async move {
            match reply.await? {
                Reply::Multi(results) => Ok(results),
                other => Err(unexpected("multi", other)),
            }
        }
    }

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
    ) -> impl Future<Output = ZkResult<()>> + Send {
        let reply = self.call(Request::AddWatch {
            path: path.to_owned(),
            mode,
        });
        async move {
            match reply.await? {
                Reply::WatchAdded => Ok(()),
                other => Err(unexpected("add_watch", other)),
            }
        }
    }

    /// Waits until the server this session talks to has caught up with the
    /// leader, so that a following read sees every write committed before.
    /// On a real ensemble this holds on the leader too, which ZooKeeper's
    /// own sync does not promise there (see `zk::ops`).
    fn sync(&self, path: &str) -> impl Future<Output = ZkResult<()>> + Send {
        let reply = self.call(Request::Sync {
            path: path.to_owned(),
        });
        async move {
            match reply.await? {
                Reply::Synced => Ok(()),
                other => Err(unexpected("sync", other)),
            }
        }
    }

    /// Closes the session: the server deletes its ephemerals at once. Later
    /// calls fail with `SessionClosed`.
    fn close(&self) -> impl Future<Output = ZkResult<()>> + Send;
}
