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

/// The kind of watch `Coordinator::add_watch` leaves (ZooKeeper 3.6+
/// `addWatch`). Both are persistent: they fire on every change until the
/// session ends, and are never consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddWatchMode {
    /// The node's own changes: `NodeCreated`, `NodeDataChanged`,
    /// `NodeDeleted` and `NodeChildrenChanged` of the node itself.
    Persistent,
    /// `NodeCreated`, `NodeDataChanged` and `NodeDeleted` of the node and of
    /// every node below it, each reported on the path that changed; never
    /// `NodeChildrenChanged`.
    PersistentRecursive,
}

impl AddWatchMode {
    /// The error that refuses an `add_watch` of this mode on `path`, which
    /// holds (or asked for) a watch of the other mode, `held`. A ZooKeeper
    /// 3.8 server keeps one watch mode per node and session: the second
    /// `addWatch` would silently replace the first, so every backend
    /// refuses it before anything is sent.
    pub fn refusal(self, path: &str, held: AddWatchMode) -> crate::ZkError {
        debug_assert_ne!(self, held, "the same mode is never refused");
        crate::ZkError::BadArguments {
            reason: format!(
                "add_watch {path} {}: the session already holds a {} watch on it, \
                 and a session keeps one persistent watch mode per node",
                self.name(),
                held.name()
            ),
        }
    }

    /// The mode's name in messages: `persistent`, `persistent_recursive`.
    pub fn name(self) -> &'static str {
        match self {
            AddWatchMode::Persistent => "persistent",
            AddWatchMode::PersistentRecursive => "persistent_recursive",
        }
    }

    /// Whether a watch of this mode on `watched` reports a change of `kind`
    /// on `changed`.
    pub fn reports(self, watched: &str, kind: crate::WatchKind, changed: &str) -> bool {
        match self {
            AddWatchMode::Persistent => watched == changed,
            AddWatchMode::PersistentRecursive => {
                kind != crate::WatchKind::NodeChildrenChanged
                    && crate::path::is_same_or_descendant(changed, watched)
            }
        }
    }
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

impl Stat {
    /// How many children were ever created under this node: the counter
    /// that names the next sequential child. Recovered from what the server
    /// reports (`cversion = 2 * creates - num_children`), in 64 bits so
    /// that a counter past `i32::MAX` does not overflow the sum.
    ///
    /// A child whose sequence number is below it was created before the
    /// read that returned this stat; one at or above it, after.
    pub fn child_creates(&self) -> i64 {
        (i64::from(self.cversion) + i64::from(self.num_children)) / 2
    }
}
