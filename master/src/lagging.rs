//! A coordinator for unit tests whose reads come from a server that lags
//! behind the leader until `sync` is called: the situation after a
//! reconnect to a follower that has not yet applied a write whose reply was
//! lost. The simulator runs one server, where `sync` changes nothing, so it
//! cannot show this.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

use zkdist_coord::{
    Coordinator, CreateMode, Op, OpResult, Reply, Request, SessionId, Stat, ZkError, ZkResult,
};

#[derive(Debug, Clone)]
struct Node {
    data: Vec<u8>,
    stat: Stat,
}

#[derive(Debug, Default)]
struct Trees {
    /// What the leader committed: every write goes here.
    leader: BTreeMap<String, Node>,
    /// What reads see: the leader's tree as of the last `sync`.
    follower: BTreeMap<String, Node>,
    /// The next `multi` is applied but answers `ConnectionLoss`.
    lose_next_reply: bool,
    syncs: usize,
    multis: usize,
}

/// More writes than any test needs: past it, a write fails, so that code
/// that would repeat a write for ever fails its test instead of hanging it.
const MAX_MULTIS: usize = 8;

pub(crate) struct LaggingFollower {
    session: SessionId,
    trees: Mutex<Trees>,
}

impl LaggingFollower {
    /// A session `session` on a tree holding `nodes` (path, data), seen
    /// the same by leader and follower.
    pub(crate) fn new(session: i64, nodes: &[(&str, &[u8])]) -> LaggingFollower {
        let mut trees = Trees::default();
        for (path, data) in nodes {
            trees.leader.insert(
                (*path).to_owned(),
                Node {
                    data: data.to_vec(),
                    stat: Stat::default(),
                },
            );
        }
        trees.follower = trees.leader.clone();
        LaggingFollower {
            session: SessionId(session),
            trees: Mutex::new(trees),
        }
    }

    /// The next `multi` is applied by the leader, but its reply is lost.
    pub(crate) fn lose_next_reply(&self) {
        self.trees.lock().unwrap().lose_next_reply = true;
    }

    /// Applies a write on the leader only (another session's, say).
    pub(crate) fn leader_write(&self, ops: Vec<Op>) {
        let mut trees = self.trees.lock().unwrap();
        let session = self.session.0;
        apply(&mut trees.leader, ops, session).expect("a valid write");
    }

    /// The follower catches up with the leader (not counted as a sync).
    pub(crate) fn catch_up(&self) {
        let mut trees = self.trees.lock().unwrap();
        trees.follower = trees.leader.clone();
    }

    pub(crate) fn syncs(&self) -> usize {
        self.trees.lock().unwrap().syncs
    }

    fn read(&self, path: &str) -> Option<Node> {
        self.trees.lock().unwrap().follower.get(path).cloned()
    }

    /// A node's data and stat as the follower has them, as a read answers.
    fn read_data(&self, path: String) -> zkdist_coord::DataRead {
        match self.read(&path) {
            Some(node) => Ok((node.data, node.stat)),
            None => Err(ZkError::NoNode { path }),
        }
    }
}

fn apply(tree: &mut BTreeMap<String, Node>, ops: Vec<Op>, session: i64) -> ZkResult<Vec<OpResult>> {
    let mut next = tree.clone();
    let mut results = Vec::new();
    for (index, op) in ops.into_iter().enumerate() {
        let failed = |error| ZkError::Multi {
            index,
            error: Box::new(error),
        };
        let version_matches =
            |node: &Node, version: Option<i32>| version.is_none_or(|v| v == node.stat.version);
        match op {
            Op::Check { path, version } => match next.get(&path) {
                Some(node) if version_matches(node, version) => results.push(OpResult::Checked),
                Some(_) => {
                    return Err(failed(ZkError::BadVersion {
                        path,
                        expected: version.unwrap_or(-1),
                    }));
                }
                None => return Err(failed(ZkError::NoNode { path })),
            },
            Op::Create { path, data, mode } => {
                if next.contains_key(&path) {
                    return Err(failed(ZkError::NodeExists { path }));
                }
                let ephemeral_owner = if mode == CreateMode::Ephemeral {
                    session
                } else {
                    0
                };
                let stat = Stat {
                    ephemeral_owner,
                    ..Stat::default()
                };
                next.insert(path.clone(), Node { data, stat });
                results.push(OpResult::Created { path });
            }
            Op::SetData {
                path,
                data,
                version,
            } => match next.get_mut(&path) {
                Some(node) if version_matches(node, version) => {
                    node.data = data;
                    node.stat.version += 1;
                    results.push(OpResult::DataSet { stat: node.stat });
                }
                Some(_) => {
                    return Err(failed(ZkError::BadVersion {
                        path,
                        expected: version.unwrap_or(-1),
                    }));
                }
                None => return Err(failed(ZkError::NoNode { path })),
            },
            Op::Delete { path, version } => match next.get(&path) {
                Some(node) if version_matches(node, version) => {
                    next.remove(&path);
                    results.push(OpResult::Deleted);
                }
                Some(_) => {
                    return Err(failed(ZkError::BadVersion {
                        path,
                        expected: version.unwrap_or(-1),
                    }));
                }
                None => return Err(failed(ZkError::NoNode { path })),
            },
        }
    }
    *tree = next;
    Ok(results)
}

impl LaggingFollower {
    fn answer(&self, request: Request) -> ZkResult<Reply> {
        match request {
            Request::Exists { path, .. } => {
                Ok(Reply::Exists(self.read(&path).map(|node| node.stat)))
            }
            Request::GetData { path, .. } => self
                .read_data(path)
                .map(|(data, stat)| Reply::Data(data, stat)),
            Request::GetDataMany { paths } => Ok(Reply::DataMany(
                paths.into_iter().map(|path| self.read_data(path)).collect(),
            )),
            Request::Multi { ops } => {
                let mut trees = self.trees.lock().unwrap();
                trees.multis += 1;
                if trees.multis > MAX_MULTIS {
                    return Err(ZkError::System {
                        reason: format!("more than {MAX_MULTIS} writes: a write repeated for ever"),
                    });
                }
                let applied = apply(&mut trees.leader, ops, self.session.0);
                if std::mem::take(&mut trees.lose_next_reply) {
                    return Err(ZkError::ConnectionLoss {
                        reason: "the reply was lost".into(),
                    });
                }
                applied.map(Reply::Multi)
            }
            Request::Sync { .. } => {
                let mut trees = self.trees.lock().unwrap();
                trees.follower = trees.leader.clone();
                trees.syncs += 1;
                Ok(Reply::Synced)
            }
            other => Err(ZkError::Unimplemented {
                what: format!("{} on the lagging-follower test coordinator", other.name()),
            }),
        }
    }
}

impl Coordinator for LaggingFollower {
    fn session_id(&self) -> SessionId {
        self.session
    }

    /// It never reports a disconnection: any grace would do, so the
    /// default session timeout's.
    fn disconnected_grace_ms(&self) -> u64 {
        zkdist_coord::disconnected_grace_ms(10_000)
    }

    fn call(&self, request: Request) -> impl Future<Output = ZkResult<Reply>> + Send {
        std::future::ready(self.answer(request))
    }

    async fn close(&self) -> ZkResult<()> {
        Ok(())
    }
}
