//! What travels between a session and the server, and how the trace names
//! it.

use std::fmt;
use std::sync::Arc;

use zkdist_coord::{AddWatchMode, CreateMode, Op, Reply, Request as Call, Stat, ZkError, ZkResult};

use crate::applied::TxnKind;
use crate::digits::{Digits, decimal, hex};

/// What a session sends the server: a request of the coordination trait
/// (the client-side checks have already passed), or one of the session's
/// own messages, which only the client library sends.
#[derive(Debug, Clone)]
pub(crate) enum Request {
    CreateSession,
    Call(Call),
    Close,
}

impl From<Call> for Request {
    fn from(call: Call) -> Request {
        Request::Call(call)
    }
}

/// The server's answer to a request that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Response {
    SessionCreated,
    Reply(Reply),
    Closed,
}

impl From<Reply> for Response {
    fn from(reply: Reply) -> Response {
        Response::Reply(reply)
    }
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
        let call = match self {
            Request::CreateSession => return Some(TxnKind::CreateSession),
            Request::Close => return Some(TxnKind::CloseSession),
            Request::Call(call) => call,
        };
        match call {
            Call::Create { .. } => Some(TxnKind::Create),
            Call::Delete { .. } => Some(TxnKind::Delete),
            Call::SetData { .. } => Some(TxnKind::SetData),
            Call::Multi { .. } => Some(TxnKind::Multi),
            Call::Exists { .. }
            | Call::GetData { .. }
            | Call::GetDataMany { .. }
            | Call::GetChildrenMany { .. }
            | Call::GetChildren { .. }
            | Call::CountDescendants { .. }
            | Call::Sync { .. }
            | Call::AddWatch { .. } => None,
        }
    }

    /// Whether the server runs it as a transaction (it takes a zxid).
    pub(crate) fn is_write(&self) -> bool {
        self.txn_kind().is_some()
    }

    pub(crate) fn watching_read(&self) -> Option<WatchingRead> {
        let Request::Call(call) = self else {
            return None;
        };
        match call {
            Call::Exists { path, watch: true } => Some(WatchingRead::Exists(path.clone())),
            Call::GetData { path, watch: true } => Some(WatchingRead::GetData(path.clone())),
            Call::GetChildren { path, watch: true } => {
                Some(WatchingRead::GetChildren(path.clone()))
            }
            Call::AddWatch { path, mode } => Some(WatchingRead::AddWatch(path.clone(), *mode)),
            _ => None,
        }
    }

    /// The path a `get_children` lists: the client checks the size of its
    /// reply before accepting it.
    pub(crate) fn listed_path(&self) -> Option<String> {
        match self {
            Request::Call(Call::GetChildren { path, .. }) => Some(path.clone()),
            _ => None,
        }
    }

    /// One stable, readable description for the trace.
    pub(crate) fn summary(&self) -> String {
        let mut text = String::with_capacity(64);
        write_summary(&mut text, self).expect("writing to a String cannot fail");
        text
    }

    /// [`Request::summary`] as a shared string, written in `scratch` first
    /// so that the only allocation is the shared one.
    pub(crate) fn shared_summary(&self, scratch: &mut String) -> Arc<str> {
        scratch.clear();
        write_summary(scratch, self).expect("writing to a String cannot fail");
        Arc::from(scratch.as_str())
    }
}

/// [`Request::summary`], written without intermediate strings.
/// Appends each piece in turn.
fn write_words(out: &mut impl fmt::Write, words: &[&str]) -> fmt::Result {
    words.iter().try_for_each(|word| out.write_str(word))
}

/// Writes a request's summary, as the trace shows it, with `write_str` for the pieces (every
/// request's summary is written once, when it is sent).
fn write_summary(out: &mut impl fmt::Write, request: &Request) -> fmt::Result {
    match request {
        Request::CreateSession => out.write_str("create_session"),
        Request::Call(call) => write_call(out, call),
        Request::Close => out.write_str("close"),
    }
}

/// A request of the coordination trait, as the trace shows it.
fn write_call(out: &mut impl fmt::Write, call: &Call) -> fmt::Result {
    let watch = |w: bool| if w { " watch" } else { "" };
    match call {
        Call::Create { path, data, mode } => write_create(out, path, data, *mode),
        Call::Delete { path, version } => write_delete(out, path, *version),
        Call::Exists { path, watch: w } => write_words(out, &["exists ", path, watch(*w)]),
        Call::GetData { path, watch: w } => write_words(out, &["get_data ", path, watch(*w)]),
        Call::SetData {
            path,
            data,
            version,
        } => write_set_data(out, path, data, *version),
        Call::GetChildren { path, watch: w } => {
            write_words(out, &["get_children ", path, watch(*w)])
        }
        Call::Multi { ops } => {
            out.write_str("multi ")?;
            write_list(out, ops, write_op)
        }
        Call::GetDataMany { paths } | Call::GetChildrenMany { paths } => {
            write_words(out, &[call.name(), " "])?;
            write_list(out, paths, |out, path| out.write_str(path))
        }
        Call::CountDescendants { path } => write_words(out, &["count_descendants ", path]),
        Call::Sync { path } => write_words(out, &["sync ", path]),
        Call::AddWatch { path, mode } => write_words(out, &["add_watch ", path, " ", mode.name()]),
    }
}

/// `[{item}, {item}, ...]`, each item written by `write_item`.
fn write_list<W: fmt::Write, T>(
    out: &mut W,
    items: &[T],
    mut write_item: impl FnMut(&mut W, &T) -> fmt::Result,
) -> fmt::Result {
    out.write_str("[")?;
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            out.write_str(", ")?;
        }
        write_item(out, item)?;
    }
    out.write_str("]")
}

/// One op of a multi, as the trace shows it.
fn write_op(out: &mut impl fmt::Write, op: &Op) -> fmt::Result {
    match op {
        Op::Create { path, data, mode } => write_create(out, path, data, *mode),
        Op::Delete { path, version } => write_delete(out, path, *version),
        Op::SetData {
            path,
            data,
            version,
        } => write_set_data(out, path, data, *version),
        Op::Check { path, version } => {
            write_words(out, &["check ", path, " "])?;
            write_version(out, *version)
        }
    }
}

/// `create {path} {mode} {length}B`.
fn write_create(
    out: &mut impl fmt::Write,
    path: &str,
    data: &[u8],
    mode: CreateMode,
) -> fmt::Result {
    let length = byte_count(data);
    write_words(
        out,
        &[
            "create ",
            path,
            " ",
            mode_name(mode),
            " ",
            length.as_str(),
            "B",
        ],
    )
}

/// `delete {path} {version}`.
fn write_delete(out: &mut impl fmt::Write, path: &str, version: Option<i32>) -> fmt::Result {
    write_words(out, &["delete ", path, " "])?;
    write_version(out, version)
}

/// `set_data {path} {length}B {version}`.
fn write_set_data(
    out: &mut impl fmt::Write,
    path: &str,
    data: &[u8],
    version: Option<i32>,
) -> fmt::Result {
    let length = byte_count(data);
    write_words(out, &["set_data ", path, " ", length.as_str(), "B "])?;
    write_version(out, version)
}

fn byte_count(data: &[u8]) -> Digits {
    decimal(i64::try_from(data.len()).expect("a length fits an i64"))
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
fn write_version(out: &mut impl fmt::Write, version: Option<i32>) -> fmt::Result {
    match version {
        Some(v) => write_words(out, &["v", decimal(v.into()).as_str()]),
        None => out.write_str("v*"),
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
    let mut words = |words: &[&str]| words.iter().try_for_each(|word| out.write_str(word));
    // `v{version} mzxid=0x{mzxid:x}`.
    let stat = |s: &Stat| [decimal(s.version.into()), hex(s.mzxid)];
    let count = |items: usize| decimal(i64::try_from(items).expect("a count fits an i64"));
    let reply = match result {
        Err(error) => return write!(out, "{}", ErrorName(error)),
        Ok(Response::SessionCreated | Response::Closed) => return words(&["ok"]),
        Ok(Response::Reply(reply)) => reply,
    };
    match reply {
        Reply::Created(path) => words(&[path]),
        Reply::Deleted => words(&["ok"]),
        Reply::Exists(None) => words(&["none"]),
        Reply::Exists(Some(s)) | Reply::DataSet(s) => {
            let [version, mzxid] = stat(s);
            words(&["v", version.as_str(), " mzxid=0x", mzxid.as_str()])
        }
        Reply::Data(data, s) => write_data(out, data, s),
        // `[{data}, {error}, ...]`: each read as its own reply shows.
        Reply::DataMany(results) => write_list(out, results, |out, result| match result {
            Ok((data, s)) => write_data(out, data, s),
            Err(error) => write!(out, "{}", ErrorName(error)),
        }),
        // `[{n} children, {error}, ...]`: a multi-read's listing has no stat.
        Reply::ChildrenMany(results) => write_list(out, results, |out, result| match result {
            Ok(names) => write_words(out, &[count(names.len()).as_str(), " children"]),
            Err(error) => write!(out, "{}", ErrorName(error)),
        }),
        Reply::Children(names, s) => {
            let (listed, pzxid) = (count(names.len()), hex(s.pzxid));
            words(&[listed.as_str(), " children pzxid=0x", pzxid.as_str()])
        }
        Reply::DescendantCount(descendants) => {
            words(&[count(*descendants).as_str(), " descendants"])
        }
        Reply::Multi(results) => {
            let applied = count(results.len());
            words(&["ok ", applied.as_str(), " ops"])
        }
        Reply::Synced | Reply::WatchAdded => words(&["ok"]),
    }
}

/// A read's data, as the trace shows it: `{length}B v{version}
/// mzxid=0x{mzxid:x}`.
fn write_data(out: &mut impl fmt::Write, data: &[u8], stat: &Stat) -> fmt::Result {
    let length = decimal(i64::try_from(data.len()).expect("a length fits an i64"));
    let (version, mzxid) = (decimal(stat.version.into()), hex(stat.mzxid));
    write_words(
        out,
        &[
            length.as_str(),
            "B v",
            version.as_str(),
            " mzxid=0x",
            mzxid.as_str(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use zkdist_coord::OpResult;

    use super::*;

    #[test]
    fn summaries_are_readable() {
        let create = Request::from(Call::Create {
            path: "/a/t-".into(),
            data: vec![1, 2],
            mode: CreateMode::EphemeralSequential,
        });
        assert_eq!(create.summary(), "create /a/t- ephemeral_sequential 2B");
        let multi = Request::from(Call::Multi {
            ops: vec![
                Op::Check {
                    path: "/a".into(),
                    version: Some(3),
                },
                Op::Delete {
                    path: "/b".into(),
                    version: None,
                },
            ],
        });
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
        let data: ZkResult<Response> = Ok(Response::Reply(Reply::Data(
            vec![1, 2, 3],
            Stat {
                version: 2,
                mzxid: 0x1f,
                ..Stat::default()
            },
        )));
        assert_eq!(outcome(&data).to_string(), "3B v2 mzxid=0x1f");
        let many = Request::from(Call::GetDataMany {
            paths: vec!["/a".into(), "/b".into()],
        });
        assert_eq!(many.summary(), "get_data_many [/a, /b]");
        assert!(!many.is_write() && many.watching_read().is_none());
        let listings = Request::from(Call::GetChildrenMany {
            paths: vec!["/a".into(), "/b".into()],
        });
        assert_eq!(listings.summary(), "get_children_many [/a, /b]");
        assert!(!listings.is_write() && listings.watching_read().is_none());
    }

    /// Every outcome reads as the format strings it replaced say.
    #[test]
    fn outcomes_read_as_their_format_strings() {
        let stat = Stat {
            version: -3,
            mzxid: 0x1_0000_00ab,
            pzxid: 0x2c,
            ..Stat::default()
        };
        let shown = |response: Response| outcome(&Ok(response)).to_string();
        let reply = |reply: Reply| outcome(&Ok(Response::Reply(reply))).to_string();
        assert_eq!(shown(Response::SessionCreated), "ok");
        assert_eq!(reply(Reply::Created("/a/b".into())), "/a/b");
        assert_eq!(reply(Reply::Deleted), "ok");
        assert_eq!(reply(Reply::Exists(None)), "none");
        let stat_text = format!("v{} mzxid=0x{:x}", stat.version, stat.mzxid);
        assert_eq!(stat_text, "v-3 mzxid=0x1000000ab");
        assert_eq!(reply(Reply::Exists(Some(stat))), stat_text);
        assert_eq!(reply(Reply::DataSet(stat)), stat_text);
        assert_eq!(
            reply(Reply::Data(vec![0; 1_234], stat)),
            format!("1234B {stat_text}")
        );
        assert_eq!(
            reply(Reply::Children(vec!["x".into(), "y".into()], stat)),
            "2 children pzxid=0x2c"
        );
        assert_eq!(
            reply(Reply::Multi(vec![OpResult::Checked; 12])),
            "ok 12 ops"
        );
        assert_eq!(
            reply(Reply::DataMany(vec![
                Ok((vec![0; 7], stat)),
                Err(ZkError::NoNode { path: "/b".into() }),
            ])),
            format!("[7B {stat_text}, NoNode]")
        );
        assert_eq!(
            reply(Reply::ChildrenMany(vec![
                Ok(vec!["x".into(), "y".into()]),
                Err(ZkError::NoNode { path: "/b".into() }),
                Ok(Vec::new()),
            ])),
            "[2 children, NoNode, 0 children]"
        );
        for done in [Reply::Synced, Reply::WatchAdded] {
            assert_eq!(reply(done), "ok");
        }
        assert_eq!(shown(Response::Closed), "ok");
    }
}
