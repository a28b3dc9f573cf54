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
    /// How many children were ever created under this node (the counter
    /// that names the next sequential child), as far as a stat can tell.
    /// The server reports `cversion = 2 * creates - num_children` in Java's
    /// 32-bit `int` arithmetic, so `2 * creates` is known modulo 2^32 and
    /// the count modulo 2^31: past about a billion creates the doubled
    /// count wraps, and a plain subtraction would read it as negative.
    pub fn child_creates(&self) -> ChildCreates {
        // Both fields as the server's 32 bits; their sum is `2 * creates`
        // modulo 2^32.
        let doubled = (self.cversion as u32).wrapping_add(self.num_children as u32);
        ChildCreates(doubled / 2)
    }
}

/// How many children were ever created under a node, modulo 2^31 (all a
/// stat tells, see [`Stat::child_creates`]): enough to tell whether a
/// sequential child was created before the read that returned the stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChildCreates(u32);

impl ChildCreates {
    /// 2^31: the count is known modulo this.
    const MODULUS: u32 = 1 << 31;

    /// `creates` creates, modulo 2^31.
    pub fn new(creates: u64) -> ChildCreates {
        ChildCreates((creates % u64::from(Self::MODULUS)) as u32)
    }

    /// Whether the count includes the sequential child numbered
    /// `sequence`, i.e. it was created before this count was read. A
    /// child's number is the count before its create, modulo 2^32 and
    /// rendered signed (ZooKeeper's `%010d` of an `int`: after
    /// 2,147,483,647 comes -2,147,483,648), so the child came
    /// first when the count is 1 to 2^30 creates ahead of its number
    /// (modulo 2^31), and later when it is not: right for any child
    /// created less than 2^30 (about a billion) creates from the read.
    pub fn includes(self, sequence: i32) -> bool {
        let ahead = self.0.wrapping_sub(sequence as u32) % Self::MODULUS;
        (1..=Self::MODULUS / 2).contains(&ahead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stat the server reports for `creates` child creates of which
    /// `children` are left, in Java `int` arithmetic.
    fn stat_after(creates: u64, children: i32) -> Stat {
        Stat {
            cversion: (creates as u32)
                .wrapping_mul(2)
                .wrapping_sub(children as u32) as i32,
            num_children: children,
            ..Stat::default()
        }
    }

    /// The name ZooKeeper gives the `n`th child create (0-based).
    fn sequence_of(n: u64) -> i32 {
        n as u32 as i32
    }

    #[test]
    fn a_stat_gives_the_count_of_child_creates_modulo_2_31() {
        assert_eq!(stat_after(0, 0).child_creates(), ChildCreates::new(0));
        assert_eq!(stat_after(5, 2).child_creates(), ChildCreates::new(5));
        // Past 2^30 creates the reported cversion wraps negative; past 2^31
        // the count itself wraps.
        for creates in [
            (1 << 30) + 7,
            (1 << 31) - 1,
            1 << 31,
            (1 << 31) + 3,
            (1 << 32) + 11,
        ] {
            let stat = stat_after(creates, 3);
            assert_eq!(
                stat.child_creates(),
                ChildCreates::new(creates),
                "{creates}"
            );
        }
        assert!(stat_after((1 << 30) + 7, 3).cversion < 0);
        assert_eq!(ChildCreates::new(1 << 31), ChildCreates::new(0));
    }

    #[test]
    fn a_count_includes_the_children_created_before_it_across_the_wrap() {
        for creates in [
            10,
            1 << 30,
            (1 << 31) - 2,
            1 << 31,
            (1 << 31) + 2,
            (1 << 32) - 1,
            (1 << 32) + 5,
        ] {
            let count = ChildCreates::new(creates);
            // The last creates before the read are included, however
            // their numbers render.
            for n in creates.saturating_sub(3)..creates {
                assert!(count.includes(sequence_of(n)), "{n} of {creates}");
            }
            // The next creates are not.
            for n in creates..creates + 3 {
                assert!(!count.includes(sequence_of(n)), "{n} of {creates}");
            }
        }
        // A billion creates either way is the edge of what it can tell.
        let count = ChildCreates::new(1 << 31);
        assert!(count.includes(sequence_of((1 << 31) - (1 << 30))));
        assert!(!count.includes(sequence_of((1 << 31) + (1 << 30) - 1)));
    }
}
