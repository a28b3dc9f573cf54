//! The data tree: ZooKeeper's `DataTree` and the checks of its
//! `PrepRequestProcessor`, as plain data with no I/O and no time.
//!
//! Each mutation takes the zxid of the transaction it belongs to, records how
//! to undo itself (so that a failed `multi` leaves no trace) and reports the
//! watch triggers it caused; the caller decides who hears about them.

mod journal;
mod node;
#[cfg(test)]
mod tests;

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use rustc_hash::FxHashMap;
use zkdist_coord::{CreateMode, SessionId, Stat, ZkError, ZkResult, path};

use crate::digits::decimal_010;

pub(crate) use journal::{Journal, Trigger, Undo};
pub use node::Node;

/// Nodes a ZooKeeper server creates itself and refuses to delete
/// (`ZKDatabase.isSpecialPath`).
const SYSTEM_PATHS: [&str; 4] = ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

/// The read-only view of the simulated server's data that tests, predicates
/// and invariant checkers get.
#[derive(Clone)]
pub struct Tree {
    /// By path, hashed: every request looks up a node or two, and a sorted
    /// map compares whole paths (long shared prefixes) at every level. A
    /// fixed hasher, and no iteration in hash order: whatever is listed is
    /// sorted first ([`Tree::paths`]), so the order never depends on it.
    nodes: FxHashMap<String, Node>,
    zxid: i64,
    /// Every session's ephemeral nodes, kept equal to the owners recorded in
    /// the nodes' stats.
    ephemerals: BTreeMap<SessionId, BTreeSet<String>>,
    /// Every sequential name handed out under a parent that lives, to
    /// assert none is reused. It grows with every sequential create, so only
    /// debug builds keep it.
    #[cfg(debug_assertions)]
    sequential_issued: BTreeSet<String>,
    /// Parents whose counter a test moved by hand: only there may a
    /// sequential name come back.
    counters_overridden: BTreeSet<String>,
}

/// The parent of a create's target, sequential prefixes included: the part
/// before the last `/` (`/queue/` has parent `/queue`, `/` has parent `/`).
fn parent_of_target(target: &str) -> &str {
    match path::last_slash(target) {
        Some(0) | None => "/",
        Some(i) => &target[..i],
    }
}

impl Default for Tree {
    fn default() -> Tree {
        Tree::new()
    }
}

/// The nodes in path order, whatever order the map keeps them in.
impl fmt::Debug for Tree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut nodes: Vec<(&String, &Node)> = self.nodes.iter().collect();
        nodes.sort_unstable_by_key(|&(path, _)| path);
        let mut tree = f.debug_struct("Tree");
        tree.field("nodes", &NodesInOrder(&nodes))
            .field("zxid", &self.zxid)
            .field("ephemerals", &self.ephemerals);
        #[cfg(debug_assertions)]
        tree.field("sequential_issued", &self.sequential_issued);
        tree.field("counters_overridden", &self.counters_overridden)
            .finish()
    }
}

struct NodesInOrder<'a>(&'a [(&'a String, &'a Node)]);

impl fmt::Debug for NodesInOrder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter().copied()).finish()
    }
}

impl Tree {
    /// A fresh server's tree: the root, `/zookeeper`, and its `quota` and
    /// `config` children, all with zeroed stats as the server builds them.
    pub fn new() -> Tree {
        let mut nodes = FxHashMap::default();
        for path in SYSTEM_PATHS {
            nodes.insert(path.to_owned(), Node::new(Vec::new(), Stat::default()));
        }
        let mut tree = Tree {
            nodes,
            zxid: 0,
            ephemerals: BTreeMap::new(),
            #[cfg(debug_assertions)]
            sequential_issued: BTreeSet::new(),
            counters_overridden: BTreeSet::new(),
        };
        // The server links these directly, leaving the parents' counters
        // and pzxid at zero.
        for path in &SYSTEM_PATHS[1..] {
            tree.link_child(path);
        }
        tree.check_invariants();
        tree
    }

    /// The last zxid the server assigned.
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    pub fn exists(&self, path: &str) -> bool {
        self.nodes.contains_key(path)
    }

    pub fn data(&self, path: &str) -> Option<&[u8]> {
        self.nodes.get(path).map(Node::data)
    }

    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.nodes.get(path).map(Node::stat)
    }

    /// The children's names of `path`, sorted, or `None` if it is missing.
    pub fn children(&self, path: &str) -> Option<Vec<&str>> {
        self.nodes.get(path).map(|node| node.children().collect())
    }

    /// How many nodes lie below `path` at every depth (itself not counted),
    /// or `None` if it is missing: ZooKeeper's `getAllChildrenNumber`, which
    /// counts the system nodes too when asked about `/`. Walks the subtree:
    /// O(its size).
    pub fn descendant_count(&self, path: &str) -> Option<usize> {
        let node = self.nodes.get(path)?;
        let mut to_visit: Vec<String> =
            node.children().map(|name| path::join(path, name)).collect();
        let mut count = 0;
        while let Some(descendant) = to_visit.pop() {
            count += 1;
            let node = self
                .nodes
                .get(&descendant)
                .expect("every child a node lists is in the tree");
            to_visit.extend(node.children().map(|name| path::join(&descendant, name)));
        }
        Some(count)
    }

    /// Every path, sorted, system nodes included. Sorts them: O(n log n).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        let mut paths: Vec<&str> = self.nodes.keys().map(String::as_str).collect();
        paths.sort_unstable();
        paths.into_iter()
    }

    /// The ephemeral nodes `session` owns, sorted.
    pub fn ephemerals(&self, session: SessionId) -> Vec<&str> {
        self.ephemerals
            .get(&session)
            .map(|paths| paths.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The sessions that own at least one ephemeral node, sorted.
    pub fn ephemeral_owners(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.ephemerals.keys().copied()
    }

    /// Number of nodes, system nodes included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Takes the next zxid. Every write that reaches the server takes one,
    /// whether it succeeds or not: ZooKeeper logs a failed write as an error
    /// transaction under its own zxid.
    pub(crate) fn next_zxid(&mut self) -> i64 {
        let next = self.zxid + 1;
        assert!(next > self.zxid, "zxid must strictly increase");
        self.zxid = next;
        next
    }

    /// Creates a node (PrepRequestProcessor's checks in its order: missing
    /// parent, then existing name, then ephemeral parent) and returns its
    /// actual path.
    pub(crate) fn create(
        &mut self,
        zxid: i64,
        owner: SessionId,
        target: &str,
        data: &[u8],
        mode: CreateMode,
        journal: &mut Journal,
    ) -> ZkResult<String> {
        debug_assert_eq!(zxid, self.zxid, "a mutation runs under the current zxid");
        if !mode.is_sequential() && target == "/" {
            return Err(ZkError::NodeExists {
                path: target.to_owned(),
            });
        }
        let parent_path = parent_of_target(target);
        let Some(parent) = self.nodes.get(parent_path) else {
            return Err(ZkError::NoNode {
                path: target.to_owned(),
            });
        };
        let created = if mode.is_sequential() {
            // The suffix is the parent's cversion before this create, as
            // Java's `%010d` renders it (negatives keep their sign).
            [target, decimal_010(parent.stat.cversion).as_str()].concat()
        } else {
            target.to_owned()
        };
        let parent_is_ephemeral = parent.is_ephemeral();
        // One lookup checks the name and keeps the slot for the new node.
        let slot = match self.nodes.entry(created) {
            Entry::Occupied(existing) => {
                return Err(ZkError::NodeExists {
                    path: existing.key().clone(),
                });
            }
            Entry::Vacant(slot) => slot,
        };
        if parent_is_ephemeral {
            return Err(ZkError::NoChildrenForEphemerals {
                path: slot.into_key(),
            });
        }
        let created = slot.key().clone();
        let ephemeral_owner = if mode.is_ephemeral() { owner.0 } else { 0 };
        assert!(
            !mode.is_ephemeral() || ephemeral_owner != 0,
            "session id 0 cannot own an ephemeral node"
        );
        slot.insert(Node::new(
            data.to_vec(),
            Stat {
                czxid: zxid,
                mzxid: zxid,
                pzxid: zxid,
                version: 0,
                cversion: 0,
                aversion: 0,
                ephemeral_owner,
                data_length: data.len() as i32,
                num_children: 0,
            },
        ));

        let parent = self.nodes.get_mut(parent_path).expect("parent checked");
        let stat = parent.stat;
        journal.push_undo(|| Undo::RestoreStat {
            path: parent_path.to_owned(),
            stat,
        });
        // The counter moves on every child create, sequential or not, and
        // wraps as Java's int does.
        parent.stat.cversion = parent.stat.cversion.wrapping_add(1);
        parent.stat.pzxid = zxid;
        Self::link_child_of(parent, &created);
        if mode.is_ephemeral() {
            self.ephemerals
                .entry(owner)
                .or_default()
                .insert(created.clone());
        }
        #[cfg(debug_assertions)]
        if mode.is_sequential() {
            let fresh = self.sequential_issued.insert(created.clone());
            assert!(
                fresh || self.counters_overridden.contains(parent_path),
                "sequential name {created} issued twice"
            );
        }
        journal.push_undo(|| Undo::Remove {
            path: created.clone(),
            sequential: mode.is_sequential(),
        });
        journal.triggers.push(Trigger::Created(created.clone()));
        journal
            .triggers
            .push(Trigger::ChildrenChanged(parent_path.to_owned()));
        Ok(created)
    }

    /// Deletes a node: system nodes are refused, then missing parent or
    /// node, then a version mismatch, then children.
    pub(crate) fn delete(
        &mut self,
        zxid: i64,
        target: &str,
        version: Option<i32>,
        journal: &mut Journal,
    ) -> ZkResult<()> {
        debug_assert_eq!(zxid, self.zxid, "a mutation runs under the current zxid");
        if SYSTEM_PATHS.contains(&target) {
            return Err(ZkError::BadArguments {
                reason: format!("{target} is a system node and cannot be deleted"),
            });
        }
        let no_node = || ZkError::NoNode {
            path: target.to_owned(),
        };
        if !self.nodes.contains_key(path::parent(target)) {
            return Err(no_node());
        }
        let node = self.nodes.get(target).ok_or_else(no_node)?;
        expect_version(target, node.stat.version, version)?;
        if !node.children.is_empty() {
            return Err(ZkError::NotEmpty {
                path: target.to_owned(),
            });
        }
        self.remove(zxid, target, journal);
        // A node made anew under the same path starts its counter at zero,
        // as ZooKeeper's does: the names its children were given may come
        // again. (A multi that fails after this delete puts the node back
        // with its counter; its children's names then go unchecked.)
        #[cfg(debug_assertions)]
        {
            let children = format!("{target}/");
            let issued: Vec<String> = self
                .sequential_issued
                .range(children.clone()..)
                .take_while(|name| name.starts_with(&children))
                .cloned()
                .collect();
            for name in issued {
                self.sequential_issued.remove(&name);
            }
        }
        Ok(())
    }

    /// Replaces a node's data: missing node, then version mismatch.
    pub(crate) fn set_data(
        &mut self,
        zxid: i64,
        target: &str,
        data: &[u8],
        version: Option<i32>,
        journal: &mut Journal,
    ) -> ZkResult<Stat> {
        debug_assert_eq!(zxid, self.zxid, "a mutation runs under the current zxid");
        let node = self.nodes.get_mut(target).ok_or_else(|| ZkError::NoNode {
            path: target.to_owned(),
        })?;
        expect_version(target, node.stat.version, version)?;
        let previous_data = std::mem::replace(&mut node.data, data.to_vec());
        let previous_stat = node.stat;
        journal.push_undo(|| Undo::RestoreData {
            path: target.to_owned(),
            data: previous_data,
            stat: previous_stat,
        });
        // ZooKeeper 3.8 increments a Java int: it wraps.
        node.stat.version = node.stat.version.wrapping_add(1);
        node.stat.mzxid = zxid;
        node.stat.data_length = data.len() as i32;
        journal
            .triggers
            .push(Trigger::DataChanged(target.to_owned()));
        Ok(node.stat())
    }

    /// A multi's `check`: the node exists, with exactly this version if one
    /// is given.
    pub(crate) fn check_version(&self, target: &str, version: Option<i32>) -> ZkResult<()> {
        let node = self.nodes.get(target).ok_or_else(|| ZkError::NoNode {
            path: target.to_owned(),
        })?;
        expect_version(target, node.stat.version, version)
    }

    /// Deletes every ephemeral node of `owner` in the order given, as the
    /// one transaction that closes or expires a session. The order is the
    /// caller's choice (ZooKeeper walks a hash set), but it must name
    /// exactly the nodes [`Tree::ephemerals`] lists.
    pub(crate) fn delete_ephemerals(
        &mut self,
        zxid: i64,
        owner: SessionId,
        order: &[String],
        journal: &mut Journal,
    ) {
        debug_assert_eq!(zxid, self.zxid, "a mutation runs under the current zxid");
        let mut named: Vec<&str> = order.iter().map(String::as_str).collect();
        named.sort_unstable();
        assert_eq!(
            named,
            self.ephemerals(owner),
            "the deletion order of {owner}'s ephemerals names each of them once"
        );
        for path in order {
            self.remove(zxid, path, journal);
        }
        assert!(
            !self.ephemerals.contains_key(&owner),
            "session {owner} still owns ephemerals after their deletion"
        );
    }

    /// Moves a parent's child-create counter (which also moves the cversion
    /// clients see): a test knob for the 32-bit wrap, which no client could
    /// reach cheaply.
    pub(crate) fn set_sequence_counter(&mut self, parent: &str, value: i32) -> ZkResult<()> {
        let node = self.nodes.get_mut(parent).ok_or_else(|| ZkError::NoNode {
            path: parent.to_owned(),
        })?;
        node.stat.cversion = value;
        self.counters_overridden.insert(parent.to_owned());
        Ok(())
    }

    /// Takes back the steps of a failed multi, last first.
    pub(crate) fn rollback(&mut self, undo: Vec<Undo>) {
        for step in undo.into_iter().rev() {
            match step {
                Undo::Remove { path, sequential } => {
                    self.take_out(&path);
                    #[cfg(debug_assertions)]
                    if sequential {
                        self.sequential_issued.remove(&path);
                    }
                    #[cfg(not(debug_assertions))]
                    let _ = sequential;
                }
                Undo::Reinsert { path, node } => self.put_back(&path, node),
                Undo::RestoreStat { path, stat } => {
                    self.nodes.get_mut(&path).expect("undo of a stat").stat = stat;
                }
                Undo::RestoreData { path, data, stat } => {
                    let node = self.nodes.get_mut(&path).expect("undo of a set_data");
                    node.data = data;
                    node.stat = stat;
                }
            }
        }
    }

    /// Applies `steps` last first, as [`Tree::rollback`] does, and returns
    /// the steps that take them back again, in the same form: so that
    /// `tree.travel(tree.travel(steps))` leaves the tree as it was. It is
    /// how a lagging server's read is answered: the transactions it has not
    /// applied yet are taken back, the read runs, and they are put back.
    ///
    /// Unlike a rollback it leaves the record of issued sequential names
    /// alone: the nodes taken back come back before anyone can see a gap.
    pub(crate) fn travel(&mut self, steps: Vec<Undo>) -> Vec<Undo> {
        let mut inverse = Vec::with_capacity(steps.len());
        for step in steps.into_iter().rev() {
            inverse.push(match step {
                Undo::Remove {
                    path,
                    sequential: _,
                } => {
                    let node = self.take_out(&path);
                    Undo::Reinsert { path, node }
                }
                Undo::Reinsert { path, node } => {
                    self.put_back(&path, node);
                    Undo::Remove {
                        path,
                        sequential: false,
                    }
                }
                Undo::RestoreStat { path, stat } => {
                    let node = self.nodes.get_mut(&path).expect("a node whose stat moves");
                    let now = std::mem::replace(&mut node.stat, stat);
                    Undo::RestoreStat { path, stat: now }
                }
                Undo::RestoreData { path, data, stat } => {
                    let node = self.nodes.get_mut(&path).expect("a node whose data moves");
                    let now_data = std::mem::replace(&mut node.data, data);
                    let now_stat = std::mem::replace(&mut node.stat, stat);
                    Undo::RestoreData {
                        path,
                        data: now_data,
                        stat: now_stat,
                    }
                }
            });
        }
        inverse
    }

    /// Takes a childless node out of the tree (undoing its create), and
    /// returns it.
    fn take_out(&mut self, path: &str) -> Node {
        let node = self.nodes.remove(path).expect("a node to take out");
        assert!(node.children.is_empty(), "taking out {path} with children");
        self.unlink_child(path);
        self.forget_ephemeral(path, &node);
        node
    }

    /// Puts a node taken out back into the tree (undoing its delete).
    fn put_back(&mut self, path: &str, node: Node) {
        if node.is_ephemeral() {
            self.ephemerals
                .entry(SessionId(node.stat.ephemeral_owner))
                .or_default()
                .insert(path.to_owned());
        }
        let previous = self.nodes.insert(path.to_owned(), node);
        assert!(previous.is_none(), "putting {path} back over a live node");
        self.link_child(path);
    }

    /// Removes a childless node under `zxid`, updating its parent.
    fn remove(&mut self, zxid: i64, target: &str, journal: &mut Journal) {
        let parent_path = path::parent(target);
        let parent = self.nodes.get_mut(parent_path).expect("parent of a node");
        let stat = parent.stat;
        journal.push_undo(|| Undo::RestoreStat {
            path: parent_path.to_owned(),
            stat,
        });
        // Deletes never move the counter; only pzxid records the change.
        if zxid > parent.stat.pzxid {
            parent.stat.pzxid = zxid;
        }
        Self::unlink_child_of(parent, target);
        let node = self.nodes.remove(target).expect("node to remove");
        assert!(node.children.is_empty(), "removing {target} with children");
        self.forget_ephemeral(target, &node);
        journal.push_undo(|| Undo::Reinsert {
            path: target.to_owned(),
            node,
        });
        journal.triggers.push(Trigger::Deleted(target.to_owned()));
        journal
            .triggers
            .push(Trigger::ChildrenChanged(parent_path.to_owned()));
    }

    fn link_child(&mut self, child: &str) {
        let parent = self
            .nodes
            .get_mut(path::parent(child))
            .expect("parent of a new child");
        Self::link_child_of(parent, child);
    }

    /// Lists `child` under `parent`, which the caller has looked up.
    fn link_child_of(parent: &mut Node, child: &str) {
        let added = parent.children.insert(path::name(child).to_owned());
        assert!(added, "{child} linked twice");
        parent.stat.num_children = parent.children.len() as i32;
    }

    fn unlink_child(&mut self, child: &str) {
        let parent = self
            .nodes
            .get_mut(path::parent(child))
            .expect("parent of a removed child");
        Self::unlink_child_of(parent, child);
    }

    /// Takes `child` off the list of `parent`, which the caller has looked
    /// up.
    fn unlink_child_of(parent: &mut Node, child: &str) {
        let removed = parent.children.remove(path::name(child));
        assert!(removed, "{child} unlinked but was not linked");
        parent.stat.num_children = parent.children.len() as i32;
    }

    fn forget_ephemeral(&mut self, target: &str, node: &Node) {
        if !node.is_ephemeral() {
            return;
        }
        let owner = SessionId(node.stat.ephemeral_owner);
        let owned = self
            .ephemerals
            .get_mut(&owner)
            .expect("owner of an ephemeral");
        assert!(owned.remove(target), "ephemeral {target} not indexed");
        if owned.is_empty() {
            self.ephemerals.remove(&owner);
        }
    }

    /// Checks every structural invariant; O(nodes). Run after each
    /// transaction in debug builds.
    pub(crate) fn check_invariants(&self) {
        let mut indexed = BTreeMap::<SessionId, BTreeSet<String>>::new();
        for (path_, node) in &self.nodes {
            let stat = node.stat;
            assert_eq!(
                stat.data_length as usize,
                node.data.len(),
                "{path_} data_length"
            );
            assert_eq!(
                stat.num_children as usize,
                node.children.len(),
                "{path_} num_children"
            );
            assert!(
                stat.czxid <= stat.mzxid && stat.mzxid <= self.zxid,
                "{path_} zxids"
            );
            assert!(
                stat.czxid <= stat.pzxid && stat.pzxid <= self.zxid,
                "{path_} pzxid"
            );
            for child in &node.children {
                assert!(
                    self.nodes.contains_key(&path::join(path_, child)),
                    "{path_} lists missing child {child}"
                );
            }
            if path_ != "/" {
                let parent = &self.nodes[path::parent(path_)];
                assert!(
                    parent.children.contains(path::name(path_)),
                    "{path_} not listed by its parent"
                );
            }
            if node.is_ephemeral() {
                assert!(node.children.is_empty(), "ephemeral {path_} has children");
                indexed
                    .entry(SessionId(stat.ephemeral_owner))
                    .or_default()
                    .insert(path_.clone());
            }
        }
        assert_eq!(indexed, self.ephemerals, "ephemeral index");
    }
}

/// What a version-checked write (delete, set_data, a multi's check) asks
/// of `target`, whose version is `actual`: `expected`, or any version when
/// `None` (ZooKeeper's -1).
fn expect_version(target: &str, actual: i32, expected: Option<i32>) -> ZkResult<()> {
    match expected {
        Some(expected) if expected != actual => Err(ZkError::BadVersion {
            path: target.to_owned(),
            expected,
        }),
        _ => Ok(()),
    }
}
