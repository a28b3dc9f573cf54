//! What travels between a session and the server, and how the trace names
//! it.

use std::fmt::{self, Write as _};
use std::sync::Arc;

use zkdist_coord::{AddWatchMode, CreateMode, Op, OpResult, Stat, ZkError, ZkResult};

use crate::applied::TxnKind;

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
    AddWatch {
        path: String,
        mode: AddWatchMode,
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
    WatchAdded,
    Closed,
}

/// The watch a read asks for, which the client records once the read's
/// reply arrives (as ZooKeeper's client-side `WatchRegistration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WatchingRead {
    Exists(String),
    GetData(String),
    GetChildren(String),
    /// `add_watch`: the client records it once the server confirmed it,
    /// as ZooKeeper's `AddWatchRegistration` does.
    AddWatch(String, AddWatchMode),
}

impl Request {
    /// The kind of transaction the server runs it as, or `None` for a read
    /// (which takes no zxid).
    pub(crate) fn txn_kind(&self) -> Option<TxnKind> {
        match self {
            Request::CreateSession => Some(TxnKind::CreateSession),
            Request::Create { .. } => Some(TxnKind::Create),
            Request::Delete { .. } => Some(TxnKind::Delete),
            Request::SetData { .. } => Some(TxnKind::SetData),
            Request::Multi { .. } => Some(TxnKind::Multi),
            Request::Close => Some(TxnKind::CloseSession),
            Request::Exists { .. }
            | Request::GetData { .. }
            | Request::GetChildren { .. }
            | Request::Sync { .. }
            | Request::AddWatch { .. } => None,
        }
    }

    /// Whether the server runs it as a transaction (it takes a zxid).
    pub(crate) fn is_write(&self) -> bool {
        self.txn_kind().is_some()
    }

    pub(crate) fn watching_read(&self) -> Option<WatchingRead> {
        match self {
            Request::Exists { path, watch: true } => Some(WatchingRead::Exists(path.clone())),
            Request::GetData { path, watch: true } => Some(WatchingRead::GetData(path.clone())),
            Request::GetChildren { path, watch: true } => {
                Some(WatchingRead::GetChildren(path.clone()))
            }
            Request::AddWatch { path, mode } => Some(WatchingRead::AddWatch(path.clone(), *mode)),
            _ => None,
        }
    }

    /// The path a `get_children` lists: the client checks the size of its
    /// reply before accepting it.
    pub(crate) fn listed_path(&self) -> Option<String> {
        match self {
            Request::GetChildren { path, .. } => Some(path.clone()),
            _ => None,
        }
    }

    /// One stable, readable description for the trace.
    pub(crate) fn summary(&self) -> String {
        let mut text = String::with_capacity(64);
        write!(text, "{}", Summary(self)).expect("writing to a String cannot fail");
        text
    }

    /// [`Request::summary`] as a shared string, written in `scratch` first
    /// so that the only allocation is the shared one.
    pub(crate) fn shared_summary(&self, scratch: &mut String) -> Arc<str> {
        scratch.clear();
        write!(scratch, "{}", Summary(self)).expect("writing to a String cannot fail");
        Arc::from(scratch.as_str())
    }
}

/// [`Request::summary`], written without intermediate strings.
struct Summary<'a>(&'a Request);

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let watch = |w: bool| if w { " watch" } else { "" };
        match self.0 {
            Request::CreateSession => f.write_str("create_session"),
            Request::Create { path, data, mode } => {
                write!(f, "create {path} {} {}B", mode_name(*mode), data.len())
            }
            Request::Delete { path, version } => {
                write!(f, "delete {path} {}", VersionName(*version))
            }
            Request::Exists { path, watch: w } => write!(f, "exists {path}{}", watch(*w)),
            Request::GetData { path, watch: w } => write!(f, "get_data {path}{}", watch(*w)),
            Request::SetData {
                path,
                data,
                version,
            } => write!(
                f,
                "set_data {path} {}B {}",
                data.len(),
                VersionName(*version)
            ),
            Request::GetChildren { path, watch: w } => {
                write!(f, "get_children {path}{}", watch(*w))
            }
            Request::Multi { ops } => {
                f.write_str("multi [")?;
                for (index, op) in ops.iter().enumerate() {
                    if index > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}", OpSummary(op))?;
                }
                f.write_str("]")
            }
            Request::Sync { path } => write!(f, "sync {path}"),
            Request::AddWatch { path, mode } => {
                write!(f, "add_watch {path} {}", mode.name())
            }
            Request::Close => f.write_str("close"),
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

/// An expected version as the trace shows it: `v3`, or `v*` for any.
struct VersionName(Option<i32>);

impl fmt::Display for VersionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "v{v}"),
            None => f.write_str("v*"),
        }
    }
}

/// One op of a multi, as the trace shows it.
struct OpSummary<'a>(&'a Op);

impl fmt::Display for OpSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Op::Create { path, data, mode } => {
                write!(f, "create {path} {} {}B", mode_name(*mode), data.len())
            }
            Op::Delete { path, version } => write!(f, "delete {path} {}", VersionName(*version)),
            Op::SetData {
                path,
                data,
                version,
            } => write!(
                f,
                "set_data {path} {}B {}",
                data.len(),
                VersionName(*version)
            ),
            Op::Check { path, version } => write!(f, "check {path} v{version}"),
        }
    }
}

/// The error's code, as the trace shows it (`NoNode`, `Multi[1] BadVersion`).
pub(crate) fn error_name(error: &ZkError) -> String {
    ErrorName(error).to_string()
}

/// [`error_name`], written where it is shown.
struct ErrorName<'a>(&'a ZkError);

impl fmt::Display for ErrorName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            ZkError::Multi { index, error } => write!(f, "Multi[{index}] {}", ErrorName(error)),
            other => write!(f, "{:?}", other.code()),
        }
    }
}

/// A reply's outcome, as the trace shows it, written where it is shown.
pub(crate) fn outcome(result: &ZkResult<Response>) -> impl fmt::Display + '_ {
    Outcome(result)
}

struct Outcome<'a>(&'a ZkResult<Response>);

impl fmt::Display for Outcome<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_outcome(f, self.0)
    }
}

/// Writes what [`outcome`] shows. Generic over the writer so that a trace
/// line appends the text pieces straight to its `String` (`write_str`),
/// leaving the formatting machinery to the numbers.
pub(crate) fn write_outcome(out: &mut impl fmt::Write, result: &ZkResult<Response>) -> fmt::Result {
    let stat =
        |out: &mut dyn fmt::Write, s: &Stat| write!(out, "v{} mzxid=0x{:x}", s.version, s.mzxid);
    match result {
        Err(error) => write!(out, "{}", ErrorName(error)),
        Ok(Response::SessionCreated) => out.write_str("ok"),
        Ok(Response::Created(path)) => out.write_str(path),
        Ok(Response::Deleted) => out.write_str("ok"),
        Ok(Response::Exists(None)) => out.write_str("none"),
        Ok(Response::Exists(Some(s))) => stat(out, s),
        Ok(Response::Data(data, s)) => {
            write!(out, "{}B ", data.len())?;
            stat(out, s)
        }
        Ok(Response::DataSet(s)) => stat(out, s),
        Ok(Response::Children(names, s)) => {
            write!(out, "{} children pzxid=0x{:x}", names.len(), s.pzxid)
        }
        Ok(Response::Multi(results)) => write!(out, "ok {} ops", results.len()),
        Ok(Response::Synced) => out.write_str("ok"),
        Ok(Response::WatchAdded) => out.write_str("ok"),
        Ok(Response::Closed) => out.write_str("ok"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut scratch = "left over".to_owned();
        assert_eq!(
            &*multi.shared_summary(&mut scratch),
            "multi [check /a v3, delete /b v*]"
        );
        assert_eq!(&*create.shared_summary(&mut scratch), create.summary());
        let failed: ZkResult<Response> = Err(ZkError::Multi {
            index: 1,
            error: Box::new(ZkError::NoNode { path: "/b".into() }),
        });
        assert_eq!(outcome(&failed).to_string(), "Multi[1] NoNode");
        assert_eq!(error_name(&ZkError::NoNode { path: "/b".into() }), "NoNode");
        let data: ZkResult<Response> = Ok(Response::Data(
            vec![1, 2, 3],
            Stat {
                version: 2,
                mzxid: 0x1f,
                ..Stat::default()
            },
        ));
        assert_eq!(outcome(&data).to_string(), "3B v2 mzxid=0x1f");
    }
}
