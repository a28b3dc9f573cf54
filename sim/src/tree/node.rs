//! One znode.

use std::collections::BTreeSet;

use zkdist_coord::Stat;

/// One znode: its data, its stat and its children's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub(super) data: Vec<u8>,
    pub(super) stat: Stat,
    pub(super) children: BTreeSet<String>,
}

impl Node {
    pub(super) fn new(data: Vec<u8>, stat: Stat) -> Node {
        Node {
            data,
            stat,
            children: BTreeSet::new(),
        }
    }

    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The stat as a client sees it. The server stores in `cversion` the
    /// number of child creates (the sequence counter) and reports the number
    /// of child changes, creates and deletes: since every child not present
    /// any more was deleted once, that is `2 * creates - children`
    /// (`DataNode.copyStat`, in Java int arithmetic).
    pub fn stat(&self) -> Stat {
        Stat {
            cversion: self
                .stat
                .cversion
                .wrapping_mul(2)
                .wrapping_sub(self.stat.num_children),
            ..self.stat
        }
    }

    /// The parent-side counter that names sequential children: the number
    /// of child creates, wrapping as a Java int.
    pub fn sequence_counter(&self) -> i32 {
        self.stat.cversion
    }

    /// The children's names, sorted.
    pub fn children(&self) -> impl Iterator<Item = &str> {
        self.children.iter().map(String::as_str)
    }

    pub fn is_ephemeral(&self) -> bool {
        self.stat.ephemeral_owner != 0
    }
}
