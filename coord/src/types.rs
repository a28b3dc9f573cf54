//! Plain value types shared by every backend.

use crate::error::{ZkError, ZkResult};

/// How `create` makes a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CreateMode {
    Persistent,
    Ephemeral,
    /// The name gets the parent's child-create counter appended, `%010d`.
    PersistentSequential,
    EphemeralSequential,
}

impl CreateMode {
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential | CreateMode::EphemeralSequential
        )
    }
}

/// A session's identity as the server knows it (ZooKeeper's 64-bit id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionId(pub i64);

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{:x}", self.0)
    }
}

/// Whether a read leaves a one-shot watch behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Watch {
    No,
    Yes,
}

/// A node's metadata, as ZooKeeper's `Stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Stat {
    /// The zxid of the change that created the node.
    pub czxid: i64,
    /// The zxid of the change that last modified the node's data.
    pub mzxid: i64,
    /// The zxid of the change that last added or removed a child.
    pub pzxid: i64,
    /// Number of data changes.
    pub version: i32,
    /// Number of changes to the children, creates and deletes. The server
    /// stores the number of creates (the sequence counter, which deletes
    /// never move) and reports `2 * creates - num_children`.
    pub cversion: i32,
    /// Number of ACL changes.
    pub aversion: i32,
    /// The owning session for an ephemeral node, 0 otherwise.
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
}

/// The largest payload zkdist sends in one node: ZooKeeper's default
/// `jute.maxbuffer` (1 MiB) less a kibibyte for the request's framing and
/// path. Checked before anything is sent, so both backends refuse the same
/// payloads with the same error.
pub const MAX_DATA_BYTES: usize = 1024 * 1024 - 1024;

/// The largest reply a client accepts (`jute.maxbuffer` on the client). A
/// `get_children` listing whose encoding passes it fails with connection
/// loss, as it does on real clients.
pub const MAX_REPLY_BYTES: usize = 1024 * 1024;

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
