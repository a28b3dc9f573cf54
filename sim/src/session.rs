//! `SimSession`: one simulated session's handle, implementing the
//! `Coordinator` trait. It checks its arguments as a client library does,
//! before anything is sent (with `zkdist_coord::validate`, the checks every
//! backend shares), then sends the request to the driver.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use zkdist_coord::validate::{check_create, check_delete, check_multi, check_read, check_set_data};
use zkdist_coord::{
    AddWatchMode, Coordinator, CreateMode, Op, OpResult, SessionId, Stat, Watch, ZkError, ZkResult,
};

use crate::command::Command;
use crate::request::{Request, Response};

/// A handle on one simulated session. Clones share the session; dropping
/// the last one closes it, as dropping the last handle of a real client
/// does.
#[derive(Debug, Clone)]
pub struct SimSession {
    id: SessionId,
    name: Arc<str>,
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
        commands: mpsc::UnboundedSender<Command>,
    ) -> SimSession {
        SimSession {
            id,
            name: name.into(),
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

    async fn call(&self, request: Request) -> ZkResult<Response> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Request {
            session: self.id,
            request,
            reply,
        };
        if self.commands.send(command).is_err() {
            return Err(simulator_stopped());
        }
        answer.await.unwrap_or_else(|_| Err(simulator_stopped()))
    }
}

impl Coordinator for SimSession {
    fn session_id(&self) -> SessionId {
        self.id
    }

    fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> impl Future<Output = ZkResult<String>> + Send {
        let request = check_create(path, data, mode).map(|()| Request::Create {
            path: path.to_owned(),
            data: data.to_vec(),
            mode,
        });
        async move {
            match self.call(request?).await? {
                Response::Created(created) => Ok(created),
                other => Err(unexpected(other)),
            }
        }
    }

    fn delete(
        &self,
        path: &str,
        version: Option<i32>,
    ) -> impl Future<Output = ZkResult<()>> + Send {
        let request = check_delete(path, version).map(|()| Request::Delete {
            path: path.to_owned(),
            version,
        });
        async move {
            match self.call(request?).await? {
                Response::Deleted => Ok(()),
                other => Err(unexpected(other)),
            }
        }
    }

    fn exists(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<Option<Stat>>> + Send {
        let request = check_read(path).map(|()| Request::Exists {
            path: path.to_owned(),
            watch: watch == Watch::Yes,
        });
        async move {
            match self.call(request?).await? {
                Response::Exists(stat) => Ok(stat),
                other => Err(unexpected(other)),
            }
        }
    }

    fn get_data(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<(Vec<u8>, Stat)>> + Send {
        let request = check_read(path).map(|()| Request::GetData {
            path: path.to_owned(),
            watch: watch == Watch::Yes,
        });
        async move {
            match self.call(request?).await? {
                Response::Data(data, stat) => Ok((data, stat)),
                other => Err(unexpected(other)),
            }
        }
    }

    fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> impl Future<Output = ZkResult<Stat>> + Send {
        let request = check_set_data(path, data, version).map(|()| Request::SetData {
            path: path.to_owned(),
            data: data.to_vec(),
            version,
        });
        async move {
            match self.call(request?).await? {
                Response::DataSet(stat) => Ok(stat),
                other => Err(unexpected(other)),
            }
        }
    }

    fn get_children(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<(Vec<String>, Stat)>> + Send {
        let request = check_read(path).map(|()| Request::GetChildren {
            path: path.to_owned(),
            watch: watch == Watch::Yes,
        });
        async move {
            match self.call(request?).await? {
                Response::Children(names, stat) => Ok((names, stat)),
                other => Err(unexpected(other)),
            }
        }
    }

    fn count_descendants(&self, path: &str) -> impl Future<Output = ZkResult<usize>> + Send {
        let request = check_read(path).map(|()| Request::CountDescendants {
            path: path.to_owned(),
        });
        async move {
            match self.call(request?).await? {
                Response::DescendantCount(count) => Ok(count),
                other => Err(unexpected(other)),
            }
        }
    }

    fn multi(&self, ops: Vec<Op>) -> impl Future<Output = ZkResult<Vec<OpResult>>> + Send {
        let request = check_multi(&ops).map(|()| Request::Multi { ops });
        async move {
            match self.call(request?).await? {
                Response::Multi(results) => Ok(results),
                other => Err(unexpected(other)),
            }
        }
    }

    fn sync(&self, path: &str) -> impl Future<Output = ZkResult<()>> + Send {
        let request = check_read(path).map(|()| Request::Sync {
            path: path.to_owned(),
        });
        async move {
            match self.call(request?).await? {
                Response::Synced => Ok(()),
                other => Err(unexpected(other)),
            }
        }
    }

    fn add_watch(
        &self,
        path: &str,
        mode: AddWatchMode,
    ) -> impl Future<Output = ZkResult<()>> + Send {
        let request = check_read(path).map(|()| Request::AddWatch {
            path: path.to_owned(),
            mode,
        });
        async move {
            match self.call(request?).await? {
                Response::WatchAdded => Ok(()),
                other => Err(unexpected(other)),
            }
        }
    }

    async fn close(&self) -> ZkResult<()> {
        match self.call(Request::Close).await? {
            Response::Closed => Ok(()),
            other => Err(unexpected(other)),
        }
    }
}
