//! `SimSession`: one simulated session's handle, implementing the
//! `Coordinator` trait. It checks each request as a client library does,
//! before anything is sent (with `zkdist_coord::validate`, the checks every
//! backend shares), then sends the request to the driver.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use zkdist_coord::{Coordinator, Reply, Request as Call, SessionId, ZkError, ZkResult};

use crate::command::Command;
use crate::request::{Request, Response};

/// A handle on one simulated session. Clones share the session; dropping
/// the last one closes it, as dropping the last handle of a real client
/// does.
#[derive(Debug, Clone)]
pub struct SimSession {
    id: SessionId,
    name: Arc<str>,
    /// What [`Coordinator::disconnected_grace_ms`] answers.
    disconnected_grace_ms: u64,
    commands: mpsc::UnboundedSender<Command>,
    _last_handle: Arc<LastHandle>,
}

/// Shared by every clone of a session's handle. When the last clone goes,
/// it tells the driver, on the channel the session's requests take (so
/// after every request issued before), and the client library then closes
/// the session without anyone waiting for the answer. A session that
/// crashed, expired or was closed is left alone.
#[derive(Debug)]
struct LastHandle {
    session: SessionId,
    commands: mpsc::UnboundedSender<Command>,
}

impl Drop for LastHandle {
    fn drop(&mut self) {
        // A stopped simulation has nothing left to close.
        let _ = self.commands.send(Command::HandleDropped {
            session: self.session,
        });
    }
}

pub(crate) fn simulator_stopped() -> ZkError {
    ZkError::ConnectionLoss {
        reason: "the simulator has stopped".to_owned(),
    }
}

fn unexpected(response: Response) -> ZkError {
    ZkError::System {
        reason: format!("the simulator answered with {response:?}"),
    }
}

impl SimSession {
    pub(crate) fn new(
        id: SessionId,
        name: &str,
        disconnected_grace_ms: u64,
        commands: mpsc::UnboundedSender<Command>,
    ) -> SimSession {
        SimSession {
            id,
            name: name.into(),
            disconnected_grace_ms,
            _last_handle: Arc::new(LastHandle {
                session: id,
                commands: commands.clone(),
            }),
            commands,
        }
    }

    /// The name given to `SimZk::connect`, as the trace shows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends `request` to the driver now, so that the session's requests
    /// keep the order of the calls; the receiver gets the reply.
    fn send(&self, request: Request) -> ZkResult<oneshot::Receiver<ZkResult<Response>>> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Request {
            session: self.id,
            request,
            reply,
        };
        self.commands
            .send(command)
            .map_err(|_| simulator_stopped())?;
        Ok(answer)
    }
}

impl Coordinator for SimSession {
    fn session_id(&self) -> SessionId {
        self.id
    }

    /// The real client's grace, for the same timeout: the simulated server
    /// expires a cut session a whole timeout after the cut, so a worker
    /// that gives up at the grace does so in time, as a real one does.
    fn disconnected_grace_ms(&self) -> u64 {
        self.disconnected_grace_ms
    }

    /// Checks the request as the client library does, then sends it.
    fn call(&self, request: Call) -> impl Future<Output = ZkResult<Reply>> + Send {
        let answer = request
            .check()
            .and_then(|()| self.send(Request::Call(request)));
        async move {
            match answer?.await.unwrap_or_else(|_| Err(simulator_stopped()))? {
                Response::Reply(reply) => Ok(reply),
                other => Err(unexpected(other)),
            }
        }
    }

    fn close(&self) -> impl Future<Output = ZkResult<()>> + Send {
        let answer = self.send(Request::Close);
        async move {
            match answer?.await.unwrap_or_else(|_| Err(simulator_stopped()))? {
                Response::Closed => Ok(()),
                other => Err(unexpected(other)),
            }
        }
    }
}
