//! What travels between a session and the server, and how the trace names
//! it.

use zkdist_coord::{CreateMode, MAX_REPLY_BYTES, Op, OpResult, Stat, ZkError, ZkResult};

/// A request as the server receives it. Client-side checks (paths, sizes,
/// versions) have already passed.
#[derive(Debug, Clone)]
pub(crate) enum Request {
    CreateSession,
    Create {
        path: String,
        data: Vec<u8>,
        mode: CreateMode,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
    Exists {
        path: String,
        watch: bool,
    },
    GetData {
        path: String,
        watch: bool,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        version: Option<i32>,
    },
    GetChildren {
        path: String,
        watch: bool,
    },
    Multi {
        ops: Vec<Op>,
    },
    Sync {
        path: String,
    },
    Close,
}

/// The server's answer to a request that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Response {
    SessionCreated,
    Created(String),
    Deleted,
    Exists(Option<Stat>),
    Data(Vec<u8>, Stat),
    DataSet(Stat),
    Children(Vec<String>, Stat),
    Multi(Vec<OpResult>),
    Synced,
    Closed,
}

/// The watch a read asks for, which the client records once the read's
/// reply arrives (as ZooKeeper's client-side `WatchRegistration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WatchingRead {
    Exists(String),
    GetData(String),
    GetChildren(String),
}

impl Request {
    /// Whether the server runs it as a transaction (it takes a zxid).
    pub(crate) fn is_write(&self) -> bool {
        matches!(
            self,
            Request::CreateSession
                | Request::Create { .. }
                | Request::Delete { .. }
                | Request::SetData { .. }
                | Request::Multi { .. }
                | Request::Close
        )
    }

    pub(crate) fn watching_read(&self) -> Option<WatchingRead> {
        match self {
            Request::Exists { path, watch: true } => Some(WatchingRead::Exists(path.clone())),
            Request::GetData { path, watch: true } => Some(WatchingRead::GetData(path.clone())),
            Request::GetChildren { path, watch: true } => {
                Some(WatchingRead::GetChildren(path.clone()))
            }
            _ => None,
        }
    }

    /// One stable, readable description for the trace.
    pub(crate) fn summary(&self) -> String {
        let watch = |w: bool| if w { " watch" } else { "" };
        match self {
            Request::CreateSession => "create_session".to_owned(),
            Request::Create { path, data, mode } => {
                format!("create {path} {} {}B", mode_name(*mode), data.len())
            }
            Request::Delete { path, version } => {
                format!("delete {path} {}", version_name(*version))
            }
            Request::Exists { path, watch: w } => format!("exists {path}{}", watch(*w)),
            Request::GetData { path, watch: w } => format!("get_data {path}{}", watch(*w)),
            Request::SetData {
                path,
                data,
                version,
            } => format!("set_data {path} {}B {}", data.len(), version_name(*version)),
            Request::GetChildren { path, watch: w } => {
                format!("get_children {path}{}", watch(*w))
            }
            Request::Multi { ops } => {
                let parts: Vec<String> = ops.iter().map(op_summary).collect();
                format!("multi [{}]", parts.join(", "))
            }
            Request::Sync { path } => format!("sync {path}"),
            Request::Close => "close".to_owned(),
        }
    }
}

fn mode_name(mode: CreateMode) -> &'static str {
    match mode {
        CreateMode::Persistent => "persistent",
        CreateMode::Ephemeral => "ephemeral",
        CreateMode::PersistentSequential => "persistent_sequential",
        CreateMode::EphemeralSequential => "ephemeral_sequential",
    }
}

fn version_name(version: Option<i32>) -> String {
    match version {
        Some(v) => format!("v{v}"),
        None => "v*".to_owned(),
    }
}

fn op_summary(op: &Op) -> String {
    match op {
        Op::Create { path, data, mode } => {
            format!("create {path} {} {}B", mode_name(*mode), data.len())
        }
        Op::Delete { path, version } => format!("delete {path} {}", version_name(*version)),
        Op::SetData {
            path,
            data,
            version,
        } => format!("set_data {path} {}B {}", data.len(), version_name(*version)),
        Op::Check { path, version } => format!("check {path} v{version}"),
    }
}

/// The error's code, as the trace shows it (`NoNode`, `Multi[1] BadVersion`).
pub(crate) fn error_name(error: &ZkError) -> String {
    match error {
        ZkError::Multi { index, error } => format!("Multi[{index}] {}", error_name(error)),
        other => format!("{:?}", other.code()),
    }
}

/// A reply's outcome, as the trace shows it.
pub(crate) fn outcome(result: &ZkResult<Response>) -> String {
    let stat = |s: &Stat| format!("v{} mzxid=0x{:x}", s.version, s.mzxid);
    match result {
        Err(error) => error_name(error),
        Ok(Response::SessionCreated) => "ok".to_owned(),
        Ok(Response::Created(path)) => path.clone(),
        Ok(Response::Deleted) => "ok".to_owned(),
        Ok(Response::Exists(None)) => "none".to_owned(),
        Ok(Response::Exists(Some(s))) => stat(s),
        Ok(Response::Data(data, s)) => format!("{}B {}", data.len(), stat(s)),
        Ok(Response::DataSet(s)) => stat(s),
        Ok(Response::Children(names, s)) => {
            format!("{} children pzxid=0x{:x}", names.len(), s.pzxid)
        }
        Ok(Response::Multi(results)) => format!("ok {} ops", results.len()),
        Ok(Response::Synced) => "ok".to_owned(),
        Ok(Response::Closed) => "ok".to_owned(),
    }
}

/// Bytes of a `getChildren2` reply on the wire: the reply header (xid,
/// zxid, error: 16 bytes), the vector (a 4-byte count, then a 4-byte length
/// and the bytes of each name) and the stat (68 bytes).
pub(crate) fn children_reply_bytes(names: &[String]) -> usize {
    const REPLY_HEADER_BYTES: usize = 16;
    const STAT_BYTES: usize = 68;
    REPLY_HEADER_BYTES + 4 + names.iter().map(|n| 4 + n.len()).sum::<usize>() + STAT_BYTES
}

/// Whether a client refuses this reply as too large (`jute.maxbuffer`).
pub(crate) fn reply_too_large(response: &Response) -> Option<usize> {
    match response {
        Response::Children(names, _) => {
            let bytes = children_reply_bytes(names);
            (bytes > MAX_REPLY_BYTES).then_some(bytes)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_reply_size_counts_names_and_framing() {
        assert_eq!(children_reply_bytes(&[]), 88);
        assert_eq!(
            children_reply_bytes(&["abc".into(), "de".into()]),
            88 + 7 + 6
        );
        let big: Vec<String> = (0..2000).map(|i| format!("{i:0>600}")).collect();
        let response = Response::Children(big, Stat::default());
        assert_eq!(reply_too_large(&response), Some(88 + 2000 * 604));
        assert_eq!(
            reply_too_large(&Response::Children(vec![], Stat::default())),
            None
        );
    }

    #[test]
    fn summaries_are_readable() {
        let create = Request::Create {
            path: "/a/t-".into(),
            data: vec![1, 2],
            mode: CreateMode::EphemeralSequential,
        };
        assert_eq!(create.summary(), "create /a/t- ephemeral_sequential 2B");
        let multi = Request::Multi {
            ops: vec![
                Op::Check {
                    path: "/a".into(),
                    version: 3,
                },
                Op::Delete {
                    path: "/b".into(),
                    version: None,
                },
            ],
        };
        assert_eq!(multi.summary(), "multi [check /a v3, delete /b v*]");
        let failed: ZkResult<Response> = Err(ZkError::Multi {
            index: 1,
            error: Box::new(ZkError::NoNode { path: "/b".into() }),
        });
        assert_eq!(outcome(&failed), "Multi[1] NoNode");
    }
}
