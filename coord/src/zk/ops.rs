//! One request of the trait, checked on the client and then run on
//! `zookeeper-client`.

use zookeeper_client as zkc;

use super::errors::{OpContext, map_error, map_multi_error};
use super::watches::{Seen, WatchClass};
use crate::error::{ZkError, ZkResult};
use crate::op::{Op, OpResult};
use crate::request::{Reply, Request};
use crate::types::{AddWatchMode, CreateMode, Stat};
use crate::validate::check_children_reply;

/// What running a request produced: the reply, and the watcher it left.
pub(crate) struct Outcome {
    pub result: ZkResult<Reply>,
    pub watcher: Option<NewWatcher>,
    pub persistent: Option<NewPersistentWatcher>,
}

pub(crate) struct NewPersistentWatcher {
    pub path: String,
    pub mode: AddWatchMode,
    pub watcher: zkc::PersistentWatcher,
}

pub(crate) struct NewWatcher {
    pub path: String,
    pub class: WatchClass,
    /// What the read saw, to tell one notification from two (see
    /// `watches.rs`).
    pub seen: Seen,
    pub watcher: zkc::OneshotWatcher,
}

fn client_mode(mode: CreateMode) -> zkc::CreateMode {
    match mode {
        CreateMode::Persistent => zkc::CreateMode::Persistent,
        CreateMode::Ephemeral => zkc::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zkc::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zkc::CreateMode::EphemeralSequential,
    }
}

fn client_watch_mode(mode: AddWatchMode) -> zkc::AddWatchMode {
    match mode {
        AddWatchMode::Persistent => zkc::AddWatchMode::Persistent,
        AddWatchMode::PersistentRecursive => zkc::AddWatchMode::PersistentRecursive,
    }
}

pub(crate) fn stat_of(stat: &zkc::Stat) -> Stat {
    Stat {
        czxid: stat.czxid,
        mzxid: stat.mzxid,
        pzxid: stat.pzxid,
        version: stat.version,
        cversion: stat.cversion,
        aversion: stat.aversion,
        ephemeral_owner: stat.ephemeral_owner,
        data_length: stat.data_length,
        num_children: stat.num_children,
    }
}

/// Runs a checked request. The request is sent when this future is first
/// polled, which is what lets the pump order requests, replies and watch
/// events exactly (see `pump.rs`).
pub(crate) async fn run(
    client: &zkc::Client,
    acls: zkc::Acls<'static>,
    max_reply_bytes: usize,
    request: Request,
) -> Outcome {
    let no_watch = |result| Outcome {
        result,
        watcher: None,
        persistent: None,
    };
    match request {
        Request::Create { path, data, mode } => {
            let options = client_mode(mode).with_acls(acls);
            let context = OpContext::new("create", &path, None);
            let result = client
                .create(&path, &data, &options)
                .await
                .map(|(_stat, sequence)| {
                    if mode.is_sequential() {
                        Reply::Created(format!("{path}{sequence}"))
                    } else {
                        Reply::Created(path.clone())
                    }
                })
                .map_err(|e| map_error(e, &context));
            no_watch(result)
        }
        Request::Delete { path, version } => {
            let context = OpContext::new("delete", &path, version);
            no_watch(
                client
                    .delete(&path, version)
                    .await
                    .map(|()| Reply::Deleted)
                    .map_err(|e| map_error(e, &context)),
            )
        }
        Request::Exists { path, watch: false } => {
            let context = OpContext::new("exists", &path, None);
            no_watch(
                client
                    .check_stat(&path)
                    .await
                    .map(|stat| Reply::Exists(stat.as_ref().map(stat_of)))
                    .map_err(|e| map_error(e, &context)),
            )
        }
        Request::Exists { path, watch: true } => {
            let context = OpContext::new("exists", &path, None);
            match client.check_and_watch_stat(&path).await {
                Ok((stat, watcher)) => {
                    let seen = stat.as_ref().map(stat_of);
                    Outcome {
                        result: Ok(Reply::Exists(seen)),
                        watcher: Some(NewWatcher {
                            path,
                            class: WatchClass::Data,
                            seen,
                            watcher,
                        }),
                        persistent: None,
                    }
                }
                Err(e) => no_watch(Err(map_error(e, &context))),
            }
        }
        Request::GetData { path, watch: false } => {
            let context = OpContext::new("get_data", &path, None);
            no_watch(
                client
                    .get_data(&path)
                    .await
                    .map(|(data, stat)| Reply::Data(data, stat_of(&stat)))
                    .map_err(|e| map_error(e, &context)),
            )
        }
        Request::GetData { path, watch: true } => {
            let context = OpContext::new("get_data", &path, None);
            match client.get_and_watch_data(&path).await {
                Ok((data, stat, watcher)) => Outcome {
                    result: Ok(Reply::Data(data, stat_of(&stat))),
                    watcher: Some(NewWatcher {
                        path,
                        class: WatchClass::Data,
                        seen: Some(stat_of(&stat)),
                        watcher,
                    }),
                    persistent: None,
                },
                Err(e) => no_watch(Err(map_error(e, &context))),
            }
        }
        Request::SetData {
            path,
            data,
            version,
        } => {
            let context = OpContext::new("set_data", &path, version);
            no_watch(
                client
                    .set_data(&path, &data, version)
                    .await
                    .map(|stat| Reply::DataSet(stat_of(&stat)))
                    .map_err(|e| map_error(e, &context)),
            )
        }
        Request::GetChildren { path, watch } => {
            let context = OpContext::new("get_children", &path, None);
            let (result, watcher) = if watch {
                match client.get_and_watch_children(&path).await {
                    Ok((children, stat, watcher)) => (Ok((children, stat)), Some(watcher)),
                    Err(e) => (Err(e), None),
                }
            } else {
                (client.get_children(&path).await, None)
            };
            match result {
                Err(e) => no_watch(Err(map_error(e, &context))),
                Ok((children, stat)) => {
                    if let Err(error) = check_children_reply(&path, &children, max_reply_bytes) {
                        return no_watch(Err(error));
                    }
                    Outcome {
                        result: Ok(Reply::Children(children, stat_of(&stat))),
                        watcher: watcher.map(|watcher| NewWatcher {
                            path,
                            class: WatchClass::Child,
                            seen: Some(stat_of(&stat)),
                            watcher,
                        }),
                        persistent: None,
                    }
                }
            }
        }
        Request::CountDescendants { path } => {
            let context = OpContext::new("count_descendants", &path, None);
            no_watch(
                client
                    .count_descendants_number(&path)
                    .await
                    .map(Reply::DescendantCount)
                    .map_err(|e| map_error(e, &context)),
            )
        }
        Request::Multi { ops } => no_watch(run_multi(client, acls, &ops).await),
        Request::GetDataMany { paths } => no_watch(run_get_data_many(client, &paths).await),
        Request::GetChildrenMany { paths } => no_watch(run_get_children_many(client, &paths).await),
        Request::Sync { path } => {
            let context = OpContext::new("sync", &path, None);
            no_watch(
                sync_then_refused_write(client, &path)
                    .await
                    .map(|()| Reply::Synced)
                    .map_err(|e| map_error(e, &context)),
            )
        }
        Request::AddWatch { path, mode } => {
            let context = OpContext::new("add_watch", &path, None);
            match client.watch(&path, client_watch_mode(mode)).await {
                Ok(watcher) => Outcome {
                    result: Ok(Reply::WatchAdded),
                    watcher: None,
                    persistent: Some(NewPersistentWatcher {
                        path,
                        mode,
                        watcher,
                    }),
                },
                Err(e) => no_watch(Err(map_error(e, &context))),
            }
        }
    }
}

/// The name under the synced path that [`sync_then_refused_write`] asks to
/// delete. No one needs to avoid it: the delete names a version no node
/// has, so it can never succeed.
const SYNC_BARRIER_NAME: &str = "zkdist-sync-barrier";

/// A version no node ever has: versions start at 0 and only grow (a
/// node reaches -2 only after 2^32 - 2 changes, when the count wraps), and
/// -1 means "any".
const NO_NODE_HAS_VERSION: i32 = -2;

/// `sync`, made to keep the promise of `Coordinator::sync` on every server.
///
/// ZooKeeper (3.8) keeps it on a follower only: there a sync waits for the
/// leader. The leader serves a sync as a read, and its reads may run before
/// it applies a commit that it has already sent, so a follower can apply a
/// write and acknowledge it to its client while a sync and read on the
/// leader still miss it (`real_zk`'s
/// `a_sync_on_the_leader_sees_what_a_follower_acknowledged` sees this
/// within a few hundred rounds).
///
/// A write of this session's own closes the gap. Every server applies
/// writes in zxid order, a refused write is ordered like any other (the
/// leader commits an error transaction for it), and the session's later
/// requests wait for its pending write. So once the refusal comes back, the
/// server has applied every write committed before, and the reads that
/// follow see them. The write is a delete of a child of `path` at a version
/// no node has: it changes nothing and fires no watch, whatever is there.
/// Both requests are sent before either reply is awaited: one round trip.
///
/// One server setting weakens it: with `zookeeper.enableEagerACLCheck`
/// (off by default) a server checks ACLs before forwarding a write, so a
/// session that may not delete under `path` is refused locally, and the
/// barrier then orders nothing beyond ZooKeeper's own sync.
async fn sync_then_refused_write(client: &zkc::Client, path: &str) -> Result<(), zkc::Error> {
    let barrier = crate::path::join(path, SYNC_BARRIER_NAME);
    let synced = client.sync(path);
    let refused = client.delete(&barrier, Some(NO_NODE_HAS_VERSION));
    let (synced, refused) = futures::join!(synced, refused);
    synced?;
    match refused {
        // Missing (the usual case), present at another version, or under a
        // parent this session may not delete from: each is a refusal that
        // went through the leader, which is all the barrier needs.
        Err(zkc::Error::NoNode | zkc::Error::BadVersion | zkc::Error::NoAuth) => Ok(()),
        Err(error) => Err(error),
        // Only a server that took -2 for "any" version would delete such a
        // node; that delete went through the leader too.
        Ok(()) => {
            tracing::warn!(
                target: "zkdist::zk",
                "deleting {barrier} at version {NO_NODE_HAS_VERSION} succeeded: the server \
                 does not check versions as ZooKeeper does"
            );
            Ok(())
        }
    }
}

/// A multi-read of `getData` ops: one result per path, an error (with
/// that path's context) in its place.
async fn run_get_data_many(client: &zkc::Client, paths: &[String]) -> ZkResult<Reply> {
    let read = MultiRead {
        request: "get_data_many",
        op: "get_data",
        add: |reader, path| reader.add_get_data(path),
    };
    let results = read
        .run(client, paths, |result| match result {
            zkc::MultiReadResult::Data { data, stat } => Ok((data, stat_of(&stat))),
            other => Err(other),
        })
        .await?;
    Ok(Reply::DataMany(results))
}

/// A multi-read of `getChildren` ops, answered as `run_get_data_many`'s.
async fn run_get_children_many(client: &zkc::Client, paths: &[String]) -> ZkResult<Reply> {
    let read = MultiRead {
        request: "get_children_many",
        op: "get_children",
        add: |reader, path| reader.add_get_children(path),
    };
    let results = read
        .run(client, paths, |result| match result {
            zkc::MultiReadResult::Children { children } => Ok(children),
            other => Err(other),
        })
        .await?;
    Ok(Reply::ChildrenMany(results))
}

/// A multi-read of one kind of op. The server answers each op on its own,
/// so a request that succeeds holds one result per path.
struct MultiRead {
    /// The typed method's name, for failures of the whole request.
    request: &'static str,
    /// The name of each op's method, for the failure of one.
    op: &'static str,
    add: fn(&mut zkc::MultiReader<'_>, &str) -> Result<(), zkc::Error>,
}

impl MultiRead {
    /// Sends the multi-read of `paths` and gives each path's answer:
    /// `answer` takes a result of this kind of op (and gives back any
    /// other, which the server should never send), and an error is mapped
    /// with that path's context.
    async fn run<T>(
        &self,
        client: &zkc::Client,
        paths: &[String],
        answer: impl Fn(zkc::MultiReadResult) -> Result<T, zkc::MultiReadResult>,
    ) -> ZkResult<Vec<ZkResult<T>>> {
        let context = |path: &str| OpContext::new(self.op, path, None);
        let mut reader = client.new_multi_reader();
        for (index, path) in paths.iter().enumerate() {
            (self.add)(&mut reader, path).map_err(|error| ZkError::Multi {
                index,
                error: Box::new(map_error(error, &context(path))),
            })?;
        }
        // A failure of the whole request (a lost connection, say) names it
        // by its size and first path: the context's path is all an error
        // shows.
        let first = format!("{} and {} more paths", paths[0], paths.len() - 1);
        let request = OpContext::new(self.request, &first, None);
        let results = reader.commit().await.map_err(|e| map_error(e, &request))?;
        if results.len() != paths.len() {
            return Err(ZkError::System {
                reason: format!(
                    "{} of {} paths got {} results",
                    self.request,
                    paths.len(),
                    results.len()
                ),
            });
        }
        let mut answers = Vec::with_capacity(results.len());
        for (path, result) in paths.iter().zip(results) {
            answers.push(match result {
                zkc::MultiReadResult::Error { err } => Err(map_error(err, &context(path))),
                result => match answer(result) {
                    Ok(value) => Ok(value),
                    Err(other) => {
                        return Err(ZkError::System {
                            reason: format!("{} of {path} in a multi-read got {other:?}", self.op),
                        });
                    }
                },
            });
        }
        Ok(answers)
    }
}

async fn run_multi(client: &zkc::Client, acls: zkc::Acls<'static>, ops: &[Op]) -> ZkResult<Reply> {
    let mut writer = client.new_multi_writer();
    for (index, op) in ops.iter().enumerate() {
        let added = match op {
            Op::Create { path, data, mode } => {
                writer.add_create(path, data, &client_mode(*mode).with_acls(acls))
            }
            Op::Delete { path, version } => writer.add_delete(path, *version),
            Op::SetData {
                path,
                data,
                version,
            } => writer.add_set_data(path, data, *version),
            // ZooKeeper's -1 matches any version.
            Op::Check { path, version } => writer.add_check_version(path, version.unwrap_or(-1)),
        };
        if let Err(error) = added {
            return Err(ZkError::Multi {
                index,
                error: Box::new(map_error(error, &OpContext::of_op(op))),
            });
        }
    }
    let results = writer.commit().await.map_err(|e| map_multi_error(e, ops))?;
    if results.len() != ops.len() {
        return Err(ZkError::System {
            reason: format!("multi of {} ops got {} results", ops.len(), results.len()),
        });
    }
    let mut mapped = Vec::with_capacity(results.len());
    for (op, result) in ops.iter().zip(results) {
        let mapped_result = match (op, result) {
            (Op::Create { .. }, zkc::MultiWriteResult::Create { path, .. }) => {
                OpResult::Created { path }
            }
            (Op::Delete { .. }, zkc::MultiWriteResult::Delete) => OpResult::Deleted,
            (Op::SetData { .. }, zkc::MultiWriteResult::SetData { stat }) => OpResult::DataSet {
                stat: stat_of(&stat),
            },
            (Op::Check { .. }, zkc::MultiWriteResult::Check) => OpResult::Checked,
            (op, result) => {
                return Err(ZkError::System {
                    reason: format!("multi op {op:?} got the result {result:?}"),
                });
            }
        };
        mapped.push(mapped_result);
    }
    Ok(Reply::Multi(mapped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_DATA_BYTES;

    #[test]
    fn requests_are_checked_before_sending() {
        let bad_path = Request::GetData {
            path: "a/b".into(),
            watch: false,
        };
        assert!(matches!(bad_path.check(), Err(ZkError::InvalidPath { .. })));
        let sequential_dir = Request::Create {
            path: "/queue/".into(),
            data: vec![],
            mode: CreateMode::PersistentSequential,
        };
        assert_eq!(sequential_dir.check(), Ok(()));
        let too_big = Request::SetData {
            path: "/a".into(),
            data: vec![0; MAX_DATA_BYTES + 1],
            version: None,
        };
        assert!(matches!(too_big.check(), Err(ZkError::DataTooLarge { .. })));
        let negative = Request::Delete {
            path: "/a".into(),
            version: Some(-2),
        };
        assert!(matches!(
            negative.check(),
            Err(ZkError::BadArguments { .. })
        ));
    }

    #[test]
    fn a_multi_is_checked_as_a_whole() {
        let half = vec![0u8; 600 * 1024];
        let multi = Request::Multi {
            ops: ["/a", "/b"]
                .map(|path| Op::SetData {
                    path: path.into(),
                    data: half.clone(),
                    version: None,
                })
                .to_vec(),
        };
        assert!(matches!(
            multi.check(),
            Err(ZkError::RequestTooLarge { request, .. }) if request == "multi of 2 ops"
        ));
    }
}
