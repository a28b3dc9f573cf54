//! [`ZkSession`]: the [`Coordinator`] on a real ZooKeeper ensemble.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use zookeeper_client as zkc;

use super::acl::acls_for_created_nodes;
use super::config::ZkConfig;
use super::connect::establish;
use super::pump::{Command, Pump, session_state_of};
use crate::coordinator::Coordinator;
use crate::error::{ZkError, ZkResult};
use crate::event::{Event, EventStream, SessionState};
use crate::request::{Reply, Request};
use crate::types::SessionId;
use crate::validate::check_frame_under_chroot;

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
    /// The connect string's chroot, which the server sees before every
    /// path: requests are held to the frame limit with it.
    chroot: Option<String>,
    state: zkc::StateWatcher,
    /// The session timeout the server granted: it holds what a client asks
    /// to its `minSessionTimeout` and `maxSessionTimeout` (by default 2 and
    /// 20 of its ticks, 4 and 40 s).
    granted_timeout: std::time::Duration,
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
        let granted_timeout = client.session_timeout();
        if granted_timeout != config.session_timeout() {
            // Every duration derived from the timeout (how long a dead
            // process's session lives on, how soon a cut link expires it)
            // is the granted one's.
            tracing::info!(
                asked_ms = config.session_timeout_ms,
                granted_ms = granted_timeout.as_millis(),
                "the server granted another session timeout than the one asked for"
            );
        }
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
                chroot: target.chroot.clone(),
                state,
                granted_timeout,
            }),
        };
        Ok((session, events))
    }

    /// The configuration this session connected with.
    pub fn config(&self) -> &ZkConfig {
        &self.inner.config
    }

    /// The session timeout the server granted, which may differ from the
    /// configuration's: a server holds it to its `minSessionTimeout` and
    /// `maxSessionTimeout`. How long the session may outlive a silent
    /// client is this.
    pub fn granted_session_timeout_ms(&self) -> u64 {
        u64::try_from(self.inner.granted_timeout.as_millis()).unwrap_or(u64::MAX)
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
}

impl Coordinator for ZkSession {
    fn session_id(&self) -> SessionId {
        self.inner.session_id
    }

    /// A quarter of the granted timeout: the client notices a silent link
    /// within under half of it (see [`crate::disconnected_grace_ms`]).
    fn disconnected_grace_ms(&self) -> u64 {
        crate::disconnected_grace_ms(self.granted_session_timeout_ms())
    }

    /// Hands the checked request to the session's actor now, so that
    /// requests keep the order of the calls, and waits for its reply later.
    fn call(&self, request: Request) -> impl Future<Output = ZkResult<Reply>> + Send {
        let checked = request.check().and_then(|()| match &self.inner.chroot {
            Some(chroot) => check_frame_under_chroot(&request, chroot),
            None => Ok(()),
        });
        let sent = checked.and_then(|()| {
            let (reply, receiver) = oneshot::channel();
            self.inner
                .commands
                .send(Command::Run { request, reply })
                .map_err(|_| ZkError::SessionClosed)?;
            Ok(receiver)
        });
        async move { sent?.await.unwrap_or(Err(ZkError::SessionClosed)) }
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
