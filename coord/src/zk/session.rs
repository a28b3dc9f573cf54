//! [`ZkSession`]: the [`Coordinator`] on a real ZooKeeper ensemble.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use zookeeper_client as zkc;

use super::acl::acls_for_created_nodes;
use super::config::ZkConfig;
use super::connect::establish;
use super::ops::{Reply, Request};
use super::pump::{Command, Pump, session_state_of};
use crate::coordinator::Coordinator;
use crate::error::{ZkError, ZkResult};
use crate::event::{Event, EventStream, SessionState};
use crate::op::{Op, OpResult};
use crate::types::{AddWatchMode, CreateMode, SessionId, Stat, Watch};

/// One session with a real ZooKeeper ensemble. Cloning shares the session;
/// dropping the last clone closes it (as [`Coordinator::close`] does, but
/// without waiting).
///
/// Needs a tokio runtime with I/O and time enabled: the session's actor is a
/// tokio task, and the client's socket is registered with the runtime's
/// reactor (vendor/zookeeper-client/PATCHES.md).
#[derive(Clone)]
pub struct ZkSession {
    inner: Arc<Inner>,
}

struct Inner {
    commands: mpsc::UnboundedSender<Command>,
    session_id: SessionId,
    /// Id and password, to re-attach from a second client (see
    /// [`ZkSession::expire_from_second_client`]).
    info: zkc::SessionInfo,
    config: ZkConfig,
    state: zkc::StateWatcher,
}

impl std::fmt::Debug for ZkSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkSession")
            .field("session_id", &self.inner.session_id)
            .field("config", &self.inner.config)
            .finish()
    }
}

impl ZkSession {
    /// Connects to the ensemble. The stream's first event is
    /// `Event::Session(SessionState::Connected)`.
    ///
    /// A malformed connect string or configuration fails at once with
    /// `BadArguments` naming the fault; an unreachable ensemble fails with
    /// `ConnectionLoss` after `connect_timeout_ms` (plus under a second of
    /// probing that says what each server did); a chroot that does not
    /// exist fails with `BadArguments` naming it.
    ///
    /// ZooKeeper's digest scheme accepts any credentials when a session
    /// authenticates: wrong ones show as `NoAuth` on the first write to a
    /// node whose ACL they do not satisfy (reads of zkdist's nodes are open
    /// to everyone; see `acl.rs`).
    pub async fn connect(config: &ZkConfig) -> ZkResult<(ZkSession, EventStream)> {
        let target = config.validate()?;
        let client = establish(config, &target, None).await?;
        let session_id = SessionId(client.session_id().0);
        let info = client.session().clone();
        let state = client.state_watcher();
        let acls = acls_for_created_nodes(config.auth.is_some());
        tracing::debug!(%session_id, connect = %config.connect, "zookeeper session established");
        let (event_sender, events) = mpsc::unbounded_channel();
        event_sender
            .send(Event::Session(SessionState::Connected))
            .expect("the receiver is held here");
        let (commands, command_receiver) = mpsc::unbounded_channel();
        tokio::spawn(
            Pump::new(client, acls, config.max_reply_bytes, event_sender).run(command_receiver),
        );
        let session = ZkSession {
            inner: Arc::new(Inner {
                commands,
                session_id,
                info,
                config: config.clone(),
                state,
            }),
        };
        Ok((session, events))
    }

    /// The configuration this session connected with.
    pub fn config(&self) -> &ZkConfig {
        &self.inner.config
    }

    /// The session's state as the client sees it now.
    pub fn state(&self) -> SessionState {
        session_state_of(self.inner.state.peek_state())
    }

    pub(crate) fn session_info(&self) -> &zkc::SessionInfo {
        &self.inner.info
    }

    pub(crate) fn state_watcher(&self) -> zkc::StateWatcher {
        self.inner.state.clone()
    }

    /// Sends a checked request to the session's actor now, so that requests
    /// keep the order of the calls, and waits for its reply later.
    fn request(&self, request: Request) -> impl Future<Output = ZkResult<Reply>> + Send + 'static {
        let sent = request.check().and_then(|()| {
            let (reply, receiver) = oneshot::channel();
            self.inner
                .commands
                .send(Command::Run { request, reply })
                .map_err(|_| ZkError::SessionClosed)?;
            Ok(receiver)
        });
        async move { sent?.await.unwrap_or(Err(ZkError::SessionClosed)) }
    }
}

fn unexpected(reply: Reply, op: &str) -> ZkError {
    ZkError::System {
        reason: format!("{op} got the reply {reply:?}"),
    }
}

impl Coordinator for ZkSession {
    fn session_id(&self) -> SessionId {
        self.inner.session_id
    }

    fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> impl Future<Output = ZkResult<String>> + Send {
        let reply = self.request(Request::Create {
            path: path.to_owned(),
            data: data.to_vec(),
            mode,
        });
        async move {
            match reply.await? {
                Reply::Created(path) => Ok(path),
                other => Err(unexpected(other, "create")),
            }
        }
    }

    fn delete(
        &self,
        path: &str,
        version: Option<i32>,
    ) -> impl Future<Output = ZkResult<()>> + Send {
        let reply = self.request(Request::Delete {
            path: path.to_owned(),
            version,
        });
        async move {
            match reply.await? {
                Reply::Deleted => Ok(()),
                other => Err(unexpected(other, "delete")),
            }
        }
    }

    fn exists(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<Option<Stat>>> + Send {
        let reply = self.request(Request::Exists {
            path: path.to_owned(),
            watch: watch == Watch::Yes,
        });
        async move {
            match reply.await? {
                Reply::Exists(stat) => Ok(stat),
                other => Err(unexpected(other, "exists")),
            }
        }
    }

    fn get_data(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<(Vec<u8>, Stat)>> + Send {
        let reply = self.request(Request::GetData {
            path: path.to_owned(),
            watch: watch == Watch::Yes,
        });
        async move {
            match reply.await? {
                Reply::Data(data, stat) => Ok((data, stat)),
                other => Err(unexpected(other, "get_data")),
            }
        }
    }

    fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> impl Future<Output = ZkResult<Stat>> + Send {
        let reply = self.request(Request::SetData {
            path: path.to_owned(),
            data: data.to_vec(),
            version,
        });
        async move {
            match reply.await? {
                Reply::DataSet(stat) => Ok(stat),
                other => Err(unexpected(other, "set_data")),
            }
        }
    }

    fn get_children(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<(Vec<String>, Stat)>> + Send {
        let reply = self.request(Request::GetChildren {
            path: path.to_owned(),
            watch: watch == Watch::Yes,
        });
        async move {
            match reply.await? {
                Reply::Children(children, stat) => Ok((children, stat)),
                other => Err(unexpected(other, "get_children")),
            }
        }
    }

    fn count_descendants(&self, path: &str) -> impl Future<Output = ZkResult<usize>> + Send {
        let reply = self.request(Request::CountDescendants {
            path: path.to_owned(),
        });
        async move {
            match reply.await? {
                Reply::DescendantCount(count) => Ok(count),
                other => Err(unexpected(other, "count_descendants")),
            }
        }
    }

    fn multi(&self, ops: Vec<Op>) -> impl Future<Output = ZkResult<Vec<OpResult>>> + Send {
        let reply = self.request(Request::Multi { ops });
        async move {
            match reply.await? {
                Reply::Multi(results) => Ok(results),
                other => Err(unexpected(other, "multi")),
            }
        }
    }

    fn sync(&self, path: &str) -> impl Future<Output = ZkResult<()>> + Send {
        let reply = self.request(Request::Sync {
            path: path.to_owned(),
        });
        async move {
            match reply.await? {
                Reply::Synced => Ok(()),
                other => Err(unexpected(other, "sync")),
            }
        }
    }

    fn add_watch(
        &self,
        path: &str,
        mode: AddWatchMode,
    ) -> impl Future<Output = ZkResult<()>> + Send {
        let reply = self.request(Request::AddWatch {
            path: path.to_owned(),
            mode,
        });
        async move {
            match reply.await? {
                Reply::WatchAdded => Ok(()),
                other => Err(unexpected(other, "add_watch")),
            }
        }
    }

    fn close(&self) -> impl Future<Output = ZkResult<()>> + Send {
        let (done, receiver) = oneshot::channel();
        let sent = self.inner.commands.send(Command::Close { done }).is_ok();
        async move {
            if !sent {
                return Ok(());
            }
            // The actor answers once the server confirmed the close (or
            // the session ended otherwise); a vanished actor means the
            // session is gone already.
            receiver.await.unwrap_or(Ok(()))
        }
    }
}

/// A configuration opens sessions on its ensemble.
impl crate::Connector for ZkConfig {
    type Session = ZkSession;

    fn connect(&self) -> impl Future<Output = ZkResult<(ZkSession, EventStream)>> + Send {
        ZkSession::connect(self)
    }
}
