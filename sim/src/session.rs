//! `SimSession`: one simulated session's handle, implementing the
//! `Coordinator` trait. It checks its arguments as a client library does,
//! before anything is sent, then sends the request to the driver.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use zkdist_coord::path::{validate_path, validate_sequential_prefix};
use zkdist_coord::{
    Coordinator, CreateMode, MAX_DATA_BYTES, Op, OpResult, SessionId, Stat, Watch, ZkError,
    ZkResult, validate_data, validate_version,
};

use crate::command::Command;
use crate::request::{Request, Response};

/// A handle on one simulated session. Clones share the session.
#[derive(Debug, Clone)]
pub struct SimSession {
    id: SessionId,
    name: Arc<str>,
    commands: mpsc::UnboundedSender<Command>,
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

fn check_create(path: &str, data: &[u8], mode: CreateMode) -> ZkResult<()> {
    if mode.is_sequential() {
        validate_sequential_prefix(path)?;
    } else {
        validate_path(path)?;
    }
    validate_data(path, data)
}

fn check_op(op: &Op) -> ZkResult<()> {
    match op {
        Op::Create { path, data, mode } => check_create(path, data, *mode),
        Op::Delete { path, version } => {
            validate_path(path)?;
            validate_version(path, *version)
        }
        Op::SetData {
            path,
            data,
            version,
        } => {
            validate_path(path)?;
            validate_data(path, data)?;
            validate_version(path, *version)
        }
        Op::Check { path, version } => {
            validate_path(path)?;
            validate_version(path, Some(*version))
        }
    }
}

/// Checks every op (a bad one is reported with its index, as a failed
/// multi is) and the request's total payload, which the server would refuse
/// as one oversized packet.
fn check_multi(ops: &[Op]) -> ZkResult<()> {
    for (index, op) in ops.iter().enumerate() {
        check_op(op).map_err(|error| ZkError::Multi {
            index,
            error: Box::new(error),
        })?;
    }
    let payload_bytes: usize = ops
        .iter()
        .map(|op| match op {
            Op::Create { data, .. } | Op::SetData { data, .. } => data.len() + op.path().len(),
            Op::Delete { .. } | Op::Check { .. } => op.path().len(),
        })
        .sum();
    if payload_bytes > MAX_DATA_BYTES {
        return Err(ZkError::DataTooLarge {
            path: format!("multi of {} ops", ops.len()),
            size_bytes: payload_bytes,
            limit_bytes: MAX_DATA_BYTES,
        });
    }
    Ok(())
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
        let request = validate_path(path)
            .and_then(|()| validate_version(path, version))
            .map(|()| Request::Delete {
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
        let request = validate_path(path).map(|()| Request::Exists {
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
        let request = validate_path(path).map(|()| Request::GetData {
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
        let request = validate_path(path)
            .and_then(|()| validate_data(path, data))
            .and_then(|()| validate_version(path, version))
            .map(|()| Request::SetData {
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
        let request = validate_path(path).map(|()| Request::GetChildren {
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
        let request = validate_path(path).map(|()| Request::Sync {
            path: path.to_owned(),
        });
        async move {
            match self.call(request?).await? {
                Response::Synced => Ok(()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_checks_name_the_bad_op() {
        let ops = vec![
            Op::Check {
                path: "/a".into(),
                version: 0,
            },
            Op::Delete {
                path: "/a/".into(),
                version: None,
            },
        ];
        match check_multi(&ops) {
            Err(ZkError::Multi { index: 1, error }) => {
                assert!(matches!(*error, ZkError::InvalidPath { ref path, .. } if path == "/a/"))
            }
            other => panic!("{other:?}"),
        }
        let negative = vec![Op::Check {
            path: "/a".into(),
            version: -1,
        }];
        assert!(matches!(
            check_multi(&negative),
            Err(ZkError::Multi { index: 0, error }) if matches!(*error, ZkError::BadArguments { .. })
        ));
    }

    #[test]
    fn multi_payload_is_bounded_as_a_whole() {
        let half = vec![0u8; MAX_DATA_BYTES / 2 + 1];
        let ops = vec![
            Op::SetData {
                path: "/a".into(),
                data: half.clone(),
                version: None,
            },
            Op::SetData {
                path: "/b".into(),
                data: half,
                version: None,
            },
        ];
        match check_multi(&ops) {
            Err(ZkError::DataTooLarge {
                path, limit_bytes, ..
            }) => {
                assert_eq!(path, "multi of 2 ops");
                assert_eq!(limit_bytes, MAX_DATA_BYTES);
            }
            other => panic!("{other:?}"),
        }
    }
}
