//! Plain value types shared by every backend.

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
