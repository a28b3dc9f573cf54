//! The client-side checks every backend runs before anything is sent, and
//! the size rules both backends share. There is one implementation of each,
//! here, so the simulator and the real backend refuse the same input with
//! the same error.
//!
//! Public API (signatures are stable; backends call these directly):
//! - [`validate_data`]`(path, data) -> ZkResult<()>`: data over
//!   [`MAX_DATA_BYTES`] is `DataTooLarge`;
//! - [`validate_version`]`(path, version) -> ZkResult<()>`: a negative
//!   expected version is `BadArguments`;
//! - [`check_create`]`(path, data, mode) -> ZkResult<()>`: the path (or
//!   sequential prefix) and the data of a `create`, then the whole
//!   request's size ([`create_request_bytes`] over [`MAX_FRAME_BYTES`]
//!   is `RequestTooLarge`);
//! - [`check_delete`]`(path, version) -> ZkResult<()>`;
//! - [`check_set_data`]`(path, data, version) -> ZkResult<()>`: as a
//!   create ([`set_data_request_bytes`]), and the version;
//! - [`check_read`]`(path) -> ZkResult<()>`: `exists`, `get_data`,
//!   `get_children`, `sync`;
//! - [`check_op`]`(op) -> ZkResult<()>`: one op of a multi, unwrapped;
//! - [`check_multi`]`(ops) -> ZkResult<()>`: every op (a bad one is
//!   `ZkError::Multi` with its index), then the whole request's size
//!   ([`multi_request_bytes`] over [`MAX_REQUEST_BYTES`] is
//!   `RequestTooLarge`);
//! - [`check_multi_read`]`(request, paths) -> ZkResult<()>`: a multi-read
//!   (`get_data_many`, `get_children_many`) of at least one path, each a
//!   valid path (a bad one is `ZkError::Multi` with its index), within
//!   [`MAX_REQUEST_BYTES`] ([`multi_read_request_bytes`]`(paths) -> usize`,
//!   its size on the wire);
//! - [`multi_request_bytes`]`(ops) -> usize`,
//!   [`create_request_bytes`]`(path, data) -> usize`,
//!   [`set_data_request_bytes`]`(path, data) -> usize`: a request's size on
//!   the wire;
//! - [`check_frame_under_chroot`]`(request, chroot) -> ZkResult<()>`: a
//!   create, set_data, multi or multi-read whose frame, with `chroot`
//!   prefixed to each path, is over [`MAX_FRAME_BYTES`] is
//!   `RequestTooLarge` (the real
//!   backend's check; the simulator has no chroot);
//! - [`children_reply_bytes`]`(names) -> usize`: the size of a
//!   `getChildren2` reply on the wire;
//! - [`check_children_reply`]`(path, names, limit_bytes) -> ZkResult<()>`: a
//!   listing over the session's reply limit ([`MAX_REPLY_BYTES`] unless
//!   configured) is `ConnectionLoss`, as a client that refuses the frame
//!   reports it.

use crate::error::{ZkError, ZkResult};
use crate::op::Op;
use crate::path::{validate_path, validate_sequential_prefix};
use crate::request::Request;
use crate::types::CreateMode;

/// The largest payload zkdist sends in one node: ZooKeeper's default
/// `jute.maxbuffer` (1 MiB) less a kibibyte for the request's framing and
/// path. Checked before anything is sent, so both backends refuse the same
/// payloads with the same error.
pub const MAX_DATA_BYTES: usize = 1024 * 1024 - 1024;

/// The largest reply a client accepts by default (`jute.maxbuffer` on a
/// Java client). A `get_children` listing whose encoding passes the
/// session's limit fails with connection loss, as it does on Java clients.
/// The server sends replies of any size, so a session may raise its limit
/// (`ZkConfig::with_max_reply_bytes`, `SimConfig::max_reply_bytes`; the
/// binary's `--max-reply-bytes` defaults to [`LARGE_REPLY_BYTES`]): a
/// master then lists, and starts on, a `tasks/` directory larger than some
/// 29,000 tasks.
pub const MAX_REPLY_BYTES: usize = 1024 * 1024;

/// The smallest reply limit a session may set: a Java client's default,
/// [`MAX_REPLY_BYTES`]. A lower one would refuse listings of `workers/` or
/// `assignments/` that a Java client reads, and the master retries those
/// without end.
pub const MIN_REPLY_BYTES: usize = MAX_REPLY_BYTES;

/// A reply limit that takes any listing zkdist makes in practice: 64 MiB,
/// some 1.8 million task names. The binary's default `--max-reply-bytes`
/// (a master must list all of `tasks/` to start, so at a Java client's
/// 1 MiB a failover during a backlog of more than some 29,000 tasks would
/// leave the queue without a master), and what test cleanup lists with.
/// The server sends listings of any size and the Rust client reads them
/// whole: a limit protects no memory, it only stands for a Java client's.
pub const LARGE_REPLY_BYTES: usize = 64 * MAX_REPLY_BYTES;

/// The largest multi request zkdist sends, as counted by
/// [`multi_request_bytes`]. The server drops the connection on a request
/// frame over `jute.maxbuffer` (1 MiB less one byte by default), which the
/// client can only report as a connection loss; the kibibyte kept back
/// covers what the count cannot see: a chroot prefixed to every path.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024 - 1024;

/// The largest request frame a server accepts: ZooKeeper's default
/// `jute.maxbuffer`, 1 MiB less one byte (`0xfffff`), counted without the
/// frame's 4-byte length. A larger one makes the server drop the
/// connection. A `create` or `set_data` on its own is held to this, not to
/// [`MAX_REQUEST_BYTES`]: data of [`MAX_DATA_BYTES`] must fit beside any
/// path zkdist makes, and does beside paths of up to 960 bytes. Paths are
/// counted as given; the real backend adds a chroot, which the server sees
/// prefixed ([`check_frame_under_chroot`]).
pub const MAX_FRAME_BYTES: usize = 1024 * 1024 - 1;

/// Refuses data over [`MAX_DATA_BYTES`], naming the path and the limit.
pub fn validate_data(path: &str, data: &[u8]) -> ZkResult<()> {
    if data.len() > MAX_DATA_BYTES {
        return Err(ZkError::DataTooLarge {
            path: path.to_owned(),
            size_bytes: data.len(),
            limit_bytes: MAX_DATA_BYTES,
        });
    }
    Ok(())
}

/// Refuses an expected version that can never match. `None` means "any
/// version" (ZooKeeper's `-1`); a negative `Some` is a caller's mistake that
/// the wire format would silently turn into "any" or into a BadVersion.
pub fn validate_version(path: &str, version: Option<i32>) -> ZkResult<()> {
    match version {
        Some(v) if v < 0 => Err(ZkError::BadArguments {
            reason: format!(
                "expected version {v} for {path} is negative; pass None to accept any version"
            ),
        }),
        _ => Ok(()),
    }
}

/// Checks a `create`: the path (for sequential modes, the prefix the server
/// appends the counter to), the data, and the size of the whole request
/// against [`MAX_FRAME_BYTES`] (data within [`MAX_DATA_BYTES`] beside a
/// path of more than 960 bytes would pass it, and the server would drop
/// the connection).
pub fn check_create(path: &str, data: &[u8], mode: CreateMode) -> ZkResult<()> {
    check_create_fields(path, data, mode)?;
    check_request_bytes(
        || format!("create of {path}"),
        create_request_bytes(path, data),
        MAX_FRAME_BYTES,
    )
}

/// [`check_create`] without the request's size: a multi's op, whose size
/// the multi counts as a whole.
fn check_create_fields(path: &str, data: &[u8], mode: CreateMode) -> ZkResult<()> {
    if mode.is_sequential() {
        validate_sequential_prefix(path)?;
    } else {
        validate_path(path)?;
    }
    validate_data(path, data)
}

/// Checks a `delete`: the path and the expected version.
pub fn check_delete(path: &str, version: Option<i32>) -> ZkResult<()> {
    validate_path(path)?;
    validate_version(path, version)
}

/// Checks a `set_data`: the path, the data, the expected version and the
/// size of the whole request (as [`check_create`]).
pub fn check_set_data(path: &str, data: &[u8], version: Option<i32>) -> ZkResult<()> {
    check_set_data_fields(path, data, version)?;
    check_request_bytes(
        || format!("set_data of {path}"),
        set_data_request_bytes(path, data),
        MAX_FRAME_BYTES,
    )
}

/// [`check_set_data`] without the request's size, for a multi's op.
fn check_set_data_fields(path: &str, data: &[u8], version: Option<i32>) -> ZkResult<()> {
    validate_path(path)?;
    validate_data(path, data)?;
    validate_version(path, version)
}

/// Refuses a request of `size_bytes` over `limit_bytes`, naming it as
/// `request` says.
fn check_request_bytes(
    request: impl FnOnce() -> String,
    size_bytes: usize,
    limit_bytes: usize,
) -> ZkResult<()> {
    if size_bytes > limit_bytes {
        return Err(ZkError::RequestTooLarge {
            request: request(),
            size_bytes,
            limit_bytes,
        });
    }
    Ok(())
}

/// Checks that a create, set_data or multi still fits in a frame once
/// the server sees each of its paths under `chroot` (a connect string's
/// `/chroot`, which the client prefixes to every path): the checks above
/// count paths as given, and data near [`MAX_DATA_BYTES`] under a long
/// chroot would pass them while the server drops the connection, again
/// on every reconnection the request is sent on; so would a multi-read of
/// many paths. Other requests name one path and always fit.
pub fn check_frame_under_chroot(request: &Request, chroot: &str) -> ZkResult<()> {
    let chroot_bytes = chroot.len();
    let (size_bytes, what) = match request {
        Request::Create { path, data, .. } => (
            create_request_bytes(path, data) + chroot_bytes,
            format!("create of {path}"),
        ),
        Request::SetData { path, data, .. } => (
            set_data_request_bytes(path, data) + chroot_bytes,
            format!("set_data of {path}"),
        ),
        Request::Multi { ops } => (
            multi_request_bytes(ops) + chroot_bytes * ops.len(),
            format!("multi of {} ops", ops.len()),
        ),
        Request::GetDataMany { paths } | Request::GetChildrenMany { paths } => (
            multi_read_request_bytes(paths) + chroot_bytes * paths.len(),
            format!("{} of {} paths", request.name(), paths.len()),
        ),
        _ => return Ok(()),
    };
    check_request_bytes(
        || format!("{what} under chroot {chroot}"),
        size_bytes,
        MAX_FRAME_BYTES,
    )
}

/// Checks a read or a `sync`: the path only.
pub fn check_read(path: &str) -> ZkResult<()> {
    validate_path(path)
}

/// Checks one op of a multi, as the same request on its own would be
/// checked. [`check_multi`] wraps its error with the op's index.
pub fn check_op(op: &Op) -> ZkResult<()> {
    match op {
        Op::Create { path, data, mode } => check_create_fields(path, data, *mode),
        Op::Delete { path, version } => check_delete(path, *version),
        Op::SetData {
            path,
            data,
            version,
        } => check_set_data_fields(path, data, *version),
        Op::Check { path, version } => {
            validate_path(path)?;
            validate_version(path, *version)
        }
    }
}

/// Checks each part of a multi-part request in order, reporting the first
/// bad one as `ZkError::Multi` with its index, as the server reports a
/// failing op.
fn check_each<T>(parts: &[T], check: impl Fn(&T) -> ZkResult<()>) -> ZkResult<()> {
    for (index, part) in parts.iter().enumerate() {
        check(part).map_err(|error| ZkError::Multi {
            index,
            error: Box::new(error),
        })?;
    }
    Ok(())
}

/// Checks a multi: every op in order (the first bad one is reported as
/// `ZkError::Multi` with its index, as the server reports a failing op),
/// then the size of the whole request, which the server would refuse as one
/// oversized frame by dropping the connection.
pub fn check_multi(ops: &[Op]) -> ZkResult<()> {
    check_each(ops, check_op)?;
    check_request_bytes(
        || format!("multi of {} ops", ops.len()),
        multi_request_bytes(ops),
        MAX_REQUEST_BYTES,
    )
}

/// Checks a multi-read (`get_data_many` or `get_children_many`, named by
/// `request`): at least one path (an empty one is answered without a
/// request, so none is ever sent), every path as a read checks it (the
/// first bad one is reported as `ZkError::Multi` with its index), and the
/// whole request's size.
pub fn check_multi_read(request: &str, paths: &[String]) -> ZkResult<()> {
    if paths.is_empty() {
        return Err(ZkError::BadArguments {
            reason: format!("{request} of no paths"),
        });
    }
    check_each(paths, |path| check_read(path))?;
    check_request_bytes(
        || format!("{request} of {} paths", paths.len()),
        multi_read_request_bytes(paths),
        MAX_REQUEST_BYTES,
    )
}

/// The size on the wire of a multi-read as `zookeeper-client` encodes it:
/// the request header, each op with its multi header (its path and watch
/// flag: `getData` and `getChildren` ops are the same size), and the
/// closing header.
pub fn multi_read_request_bytes(paths: &[String]) -> usize {
    let ops_bytes: usize = paths
        .iter()
        .map(|path| MULTI_HEADER_BYTES + jute_bytes(path.len()) + BOOL_BYTES)
        .sum();
    REQUEST_HEADER_BYTES + ops_bytes + MULTI_HEADER_BYTES
}

// Jute encodings: an int is 4 bytes, a long 8, a bool 1, a string or a
// buffer a 4-byte length then its bytes, a vector a 4-byte count then its
// items.
const INT_BYTES: usize = 4;
const BOOL_BYTES: usize = 1;
/// A request header: xid and op code.
const REQUEST_HEADER_BYTES: usize = 2 * INT_BYTES;
/// A multi's per-op header: op code, done flag, error.
const MULTI_HEADER_BYTES: usize = INT_BYTES + BOOL_BYTES + INT_BYTES;
/// The ACL list of a created node, counted as the longer of the two zkdist
/// sends (`zk::acl`): with credentials, `[auth:"" ALL, world:anyone READ]`,
/// a count, then for each entry its perms, scheme and id. Without them,
/// `[world:anyone ALL]` takes 27 bytes; counting 43 for every create keeps
/// one limit for both kinds of session.
const CREATE_ACL_BYTES: usize = INT_BYTES
    + (INT_BYTES + (INT_BYTES + 4) + INT_BYTES)
    + (INT_BYTES + (INT_BYTES + 5) + (INT_BYTES + 6));

fn jute_bytes(bytes: usize) -> usize {
    INT_BYTES + bytes
}

/// The size on the wire of a multi request as `zookeeper-client` encodes it,
/// without the 4-byte frame length: the request header, each op with its
/// multi header, and the closing multi header. Paths are counted as given
/// (a chroot would lengthen each).
pub fn multi_request_bytes(ops: &[Op]) -> usize {
    let ops_bytes: usize = ops
        .iter()
        .map(|op| {
            let body = match op {
                Op::Create { path, data, .. } => create_body_bytes(path, data),
                // path, version
                Op::Delete { path, .. } | Op::Check { path, .. } => {
                    jute_bytes(path.len()) + INT_BYTES
                }
                Op::SetData { path, data, .. } => set_data_body_bytes(path, data),
            };
            MULTI_HEADER_BYTES + body
        })
        .sum();
    REQUEST_HEADER_BYTES + ops_bytes + MULTI_HEADER_BYTES
}

/// A create's body, alone or in a multi: path, data, ACL and flags (no TTL:
/// zkdist makes no TTL nodes).
fn create_body_bytes(path: &str, data: &[u8]) -> usize {
    jute_bytes(path.len()) + jute_bytes(data.len()) + CREATE_ACL_BYTES + INT_BYTES
}

/// A set_data's body, alone or in a multi: path, data and version.
fn set_data_body_bytes(path: &str, data: &[u8]) -> usize {
    jute_bytes(path.len()) + jute_bytes(data.len()) + INT_BYTES
}

/// The size on the wire of a `create` request on its own (as
/// [`multi_request_bytes`] counts: no frame length, paths as given).
pub fn create_request_bytes(path: &str, data: &[u8]) -> usize {
    REQUEST_HEADER_BYTES + create_body_bytes(path, data)
}

/// The size on the wire of a `set_data` request on its own.
pub fn set_data_request_bytes(path: &str, data: &[u8]) -> usize {
    REQUEST_HEADER_BYTES + set_data_body_bytes(path, data)
}

/// Bytes of a `getChildren2` reply on the wire: the reply header (xid,
/// zxid, error: 16 bytes), the vector (a 4-byte count, then a 4-byte length
/// and the bytes of each name) and the stat (68 bytes).
pub fn children_reply_bytes(names: &[String]) -> usize {
    const REPLY_HEADER_BYTES: usize = INT_BYTES + 8 + INT_BYTES;
    // czxid, mzxid, ctime, mtime, version, cversion, aversion,
    // ephemeralOwner, dataLength, numChildren, pzxid.
    const STAT_BYTES: usize = 8 * 4 + INT_BYTES * 3 + 8 + INT_BYTES * 2 + 8;
    REPLY_HEADER_BYTES
        + INT_BYTES
        + names.iter().map(|n| jute_bytes(n.len())).sum::<usize>()
        + STAT_BYTES
}

/// How the reason of [`check_children_reply`]'s error begins.
const REPLY_OVER_LIMIT_REASON: &str = "the reply to get_children ";

/// Refuses a `get_children` listing of `path` whose reply is over
/// `limit_bytes`: a Java client drops such a frame as corrupt and reports
/// a connection loss, and so do both backends.
pub fn check_children_reply(path: &str, names: &[String], limit_bytes: usize) -> ZkResult<()> {
    let reply_bytes = children_reply_bytes(names);
    if reply_bytes > limit_bytes {
        return Err(ZkError::ConnectionLoss {
            reason: format!(
                "{REPLY_OVER_LIMIT_REASON}{path} is {reply_bytes} bytes, over the client's {limit_bytes}-byte limit (jute.maxbuffer; --max-reply-bytes raises it)"
            ),
        });
    }
    Ok(())
}

/// The reason of [`check_children_reply`]'s refusal, if `error` is one: a
/// lost connection to a Java client, and to the requests that repeat what
/// it lost, but one that the same listing meets again every time, however
/// often it is sent. The reason names the listing, its size, the limit and
/// how to raise it.
pub fn reply_over_limit(error: &ZkError) -> Option<&str> {
    match error {
        ZkError::ConnectionLoss { reason } if reason.starts_with(REPLY_OVER_LIMIT_REASON) => {
            Some(reason)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_data(path: &str, len: usize) -> Op {
        Op::SetData {
            path: path.into(),
            data: vec![0; len],
            version: None,
        }
    }

    #[test]
    fn single_requests_are_checked() {
        assert!(matches!(
            check_read("a/b"),
            Err(ZkError::InvalidPath { .. })
        ));
        assert_eq!(
            check_create("/queue/", &[], CreateMode::PersistentSequential),
            Ok(())
        );
        assert!(matches!(
            check_create("/queue/", &[], CreateMode::Persistent),
            Err(ZkError::InvalidPath { .. })
        ));
        assert!(matches!(
            check_set_data("/a", &vec![0; MAX_DATA_BYTES + 1], None),
            Err(ZkError::DataTooLarge { size_bytes, .. }) if size_bytes == MAX_DATA_BYTES + 1
        ));
        assert!(matches!(
            check_delete("/a", Some(-2)),
            Err(ZkError::BadArguments { .. })
        ));
        assert_eq!(check_delete("/a", None), Ok(()));
    }

    #[test]
    fn a_bad_multi_op_is_reported_with_its_index() {
        let ops = vec![
            Op::Check {
                path: "/a".into(),
                version: Some(0),
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
            version: Some(-1),
        }];
        assert!(matches!(
            check_multi(&negative),
            Err(ZkError::Multi { index: 0, error }) if matches!(*error, ZkError::BadArguments { .. })
        ));
    }

    #[test]
    fn a_multi_is_bounded_as_a_whole() {
        let ops = vec![set_data("/a", 600 * 1024), set_data("/b", 600 * 1024)];
        let expected = multi_request_bytes(&ops);
        assert_eq!(
            check_multi(&ops),
            Err(ZkError::RequestTooLarge {
                request: "multi of 2 ops".into(),
                size_bytes: expected,
                limit_bytes: MAX_REQUEST_BYTES,
            })
        );
        // Each op alone is fine.
        assert_eq!(check_multi(&ops[..1]), Ok(()));
    }

    #[test]
    fn a_multi_read_is_checked_path_by_path_and_as_a_whole() {
        assert!(matches!(
            check_multi_read("get_data_many", &[]),
            Err(ZkError::BadArguments { reason }) if reason.contains("no paths")
        ));
        let paths = vec!["/a".to_owned(), "/b/".to_owned()];
        match check_multi_read("get_data_many", &paths) {
            Err(ZkError::Multi { index: 1, error }) => {
                assert!(matches!(*error, ZkError::InvalidPath { ref path, .. } if path == "/b/"))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(check_multi_read("get_data_many", &paths[..1]), Ok(()));
        // Header 8, one op 9 + (4 + 2) + 1, closing header 9.
        assert_eq!(multi_read_request_bytes(&paths[..1]), 8 + 16 + 9);
        let long = format!("/{}", "x".repeat(1000));
        let many = vec![long; 1100];
        assert_eq!(
            check_multi_read("get_data_many", &many),
            Err(ZkError::RequestTooLarge {
                request: "get_data_many of 1100 paths".into(),
                size_bytes: multi_read_request_bytes(&many),
                limit_bytes: MAX_REQUEST_BYTES,
            })
        );
        let under_chroot = Request::GetDataMany {
            paths: paths[..1].to_vec(),
        };
        let chroot = "/c".repeat(MAX_FRAME_BYTES / 2);
        assert!(matches!(
            check_frame_under_chroot(&under_chroot, &chroot),
            Err(ZkError::RequestTooLarge { request, .. }) if request.starts_with("get_data_many of 1 paths")
        ));
    }

    #[test]
    fn a_chroot_counts_once_per_path_of_a_request() {
        // The largest data, beside a path 10 bytes short of the frame.
        let data = vec![0u8; MAX_DATA_BYTES];
        let base_bytes = create_request_bytes("/", &data);
        let path = format!("/{}", "p".repeat(MAX_FRAME_BYTES - 10 - base_bytes));
        let create = Request::Create {
            path: path.clone(),
            data,
            mode: CreateMode::Persistent,
        };
        assert_eq!(create.check(), Ok(()), "fits as given");
        let chroot = "/c".repeat(5);
        assert_eq!(check_frame_under_chroot(&create, &chroot), Ok(()));
        let longer = format!("{chroot}/");
        assert_eq!(
            check_frame_under_chroot(&create, &longer),
            Err(ZkError::RequestTooLarge {
                request: format!("create of {path} under chroot {longer}"),
                size_bytes: MAX_FRAME_BYTES + 1,
                limit_bytes: MAX_FRAME_BYTES,
            })
        );
        // A multi's ops each carry the chroot.
        let ops = vec![set_data("/a", 100), set_data("/b", 100)];
        let room = MAX_FRAME_BYTES - multi_request_bytes(&ops);
        let multi = Request::Multi { ops };
        let fitting = "x".repeat(room / 2);
        assert_eq!(check_frame_under_chroot(&multi, &fitting), Ok(()));
        let over = "x".repeat(room / 2 + 1);
        assert!(matches!(
            check_frame_under_chroot(&multi, &over),
            Err(ZkError::RequestTooLarge { .. })
        ));
        // Reads carry no data: nothing to hold back.
        let read = Request::Sync { path };
        assert_eq!(
            check_frame_under_chroot(&read, &"x".repeat(MAX_FRAME_BYTES)),
            Ok(())
        );
    }

    #[test]
    fn a_create_or_set_data_is_bounded_as_a_whole_request() {
        let path = format!("/{}", "p".repeat(2000));
        // Data within the node limit, too much beside this path.
        let data = vec![0u8; MAX_DATA_BYTES];
        let create_bytes = create_request_bytes(&path, &data);
        assert_eq!(create_bytes, 8 + (4 + 2001) + (4 + MAX_DATA_BYTES) + 43 + 4);
        assert_eq!(
            check_create(&path, &data, CreateMode::EphemeralSequential),
            Err(ZkError::RequestTooLarge {
                request: format!("create of {path}"),
                size_bytes: create_bytes,
                limit_bytes: MAX_FRAME_BYTES,
            })
        );
        let set_bytes = set_data_request_bytes(&path, &data);
        assert_eq!(set_bytes, 8 + (4 + 2001) + (4 + MAX_DATA_BYTES) + 4);
        assert_eq!(
            check_set_data(&path, &data, Some(3)),
            Err(ZkError::RequestTooLarge {
                request: format!("set_data of {path}"),
                size_bytes: set_bytes,
                limit_bytes: MAX_FRAME_BYTES,
            })
        );
        // Exactly at the limit passes.
        let fits = MAX_FRAME_BYTES - create_request_bytes(&path, &[]);
        assert_eq!(
            check_create(&path, &data[..fits], CreateMode::Persistent),
            Ok(())
        );
        assert!(check_create(&path, &data[..=fits], CreateMode::Persistent).is_err());
        // The node limit's data fits beside a path of 960 bytes, not 961.
        for (path_bytes, fits) in [(960, true), (961, false)] {
            let path = format!("/{}", "q".repeat(path_bytes - 1));
            assert_eq!(
                check_create(&path, &data, CreateMode::Persistent).is_ok(),
                fits
            );
            assert!(check_set_data(&path, &data, None).is_ok());
        }
        // The same create in a multi is counted once, as the multi's size,
        // not reported as a faulty op.
        let in_multi = vec![Op::Create {
            path: path.clone(),
            data,
            mode: CreateMode::Persistent,
        }];
        assert!(matches!(
            check_multi(&in_multi),
            Err(ZkError::RequestTooLarge { request, .. }) if request == "multi of 1 ops"
        ));
    }

    #[test]
    fn multi_request_size_counts_every_frame_field() {
        assert_eq!(multi_request_bytes(&[]), 8 + 9);
        assert_eq!(
            multi_request_bytes(&[set_data("/ab", 5)]),
            8 + 9 + (4 + 3 + 4 + 5 + 4) + 9
        );
        let create = Op::Create {
            path: "/c".into(),
            data: vec![1, 2],
            mode: CreateMode::Persistent,
        };
        let check = Op::Check {
            path: "/c".into(),
            version: Some(0),
        };
        assert_eq!(
            multi_request_bytes(&[create, check]),
            8 + 9 + (4 + 2 + 4 + 2 + 43 + 4) + 9 + (4 + 2 + 4) + 9
        );
        // The boundary is exact: one byte more is refused.
        let fixed = multi_request_bytes(&[set_data("/a", 0)]);
        let at_limit = vec![set_data("/a", MAX_REQUEST_BYTES - fixed)];
        assert_eq!(multi_request_bytes(&at_limit), MAX_REQUEST_BYTES);
        assert_eq!(check_multi(&at_limit), Ok(()));
        let over = vec![set_data("/a", MAX_REQUEST_BYTES - fixed + 1)];
        assert!(matches!(
            check_multi(&over),
            Err(ZkError::RequestTooLarge { .. })
        ));
    }

    #[test]
    fn children_reply_size_counts_names_and_framing() {
        assert_eq!(children_reply_bytes(&[]), 16 + 4 + 68);
        assert_eq!(
            children_reply_bytes(&["abc".into(), "de".into()]),
            88 + 7 + 6
        );
        let fits: Vec<String> = vec!["x".repeat(MAX_REPLY_BYTES - 88 - 4)];
        assert_eq!(children_reply_bytes(&fits), MAX_REPLY_BYTES);
        assert_eq!(check_children_reply("/big", &fits, MAX_REPLY_BYTES), Ok(()));
        let over: Vec<String> = vec!["x".repeat(MAX_REPLY_BYTES - 88 - 3)];
        match check_children_reply("/big", &over, MAX_REPLY_BYTES) {
            Err(ZkError::ConnectionLoss { reason }) => {
                assert!(reason.contains("/big") && reason.contains(&MAX_REPLY_BYTES.to_string()))
            }
            other => panic!("{other:?}"),
        }
        // A raised limit takes the larger reply; a lowered one refuses the
        // smaller, naming its own figure.
        assert_eq!(
            check_children_reply("/big", &over, 2 * MAX_REPLY_BYTES),
            Ok(())
        );
        let refused = check_children_reply("/big", &over, MAX_REPLY_BYTES).unwrap_err();
        let reason = reply_over_limit(&refused).expect("the refusal is recognised");
        assert!(reason.contains("-byte limit"), "{reason}");
        assert_eq!(
            reply_over_limit(&ZkError::ConnectionLoss {
                reason: "the server went away".into()
            }),
            None
        );
        match check_children_reply("/big", &fits, 1000) {
            Err(ZkError::ConnectionLoss { reason }) => {
                assert!(
                    reason.contains("over the client's 1000-byte limit"),
                    "{reason}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
}
