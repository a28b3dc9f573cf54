//! `multi`: a list of ops applied all or none, under one zxid.

use zkdist_coord::{Op, OpResult, SessionId, ZkError, ZkResult};

use crate::tree::{Journal, Tree};

/// Applies `ops` in order under `zxid`. On the first failure every earlier
/// op is taken back and the error names that op's index; the watch triggers
/// of a successful multi are returned in op order, so that watches fire only
/// once the whole multi applied, in the journal, which also keeps how to
/// take the multi back.
pub(crate) fn apply_multi(
    tree: &mut Tree,
    zxid: i64,
    owner: SessionId,
    ops: &[Op],
) -> ZkResult<(Vec<OpResult>, Journal)> {
    let mut journal = Journal::default();
    let mut results = Vec::with_capacity(ops.len());
    for (index, op) in ops.iter().enumerate() {
        let result = match op {
            Op::Create { path, data, mode } => tree
                .create(zxid, owner, path, data, *mode, &mut journal)
                .map(|path| OpResult::Created { path }),
            Op::Delete { path, version } => tree
                .delete(zxid, path, *version, &mut journal)
                .map(|()| OpResult::Deleted),
            Op::SetData {
                path,
                data,
                version,
            } => tree
                .set_data(zxid, path, data, *version, &mut journal)
                .map(|stat| OpResult::DataSet { stat }),
            Op::Check { path, version } => tree
                .check_version(path, *version)
                .map(|()| OpResult::Checked),
        };
        match result {
            Ok(result) => results.push(result),
            Err(error) => {
                tree.rollback(journal.undo);
                return Err(ZkError::Multi {
                    index,
                    error: Box::new(error),
                });
            }
        }
    }
    Ok((results, journal))
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkdist_coord::CreateMode;

    const OWNER: SessionId = SessionId(3);

    fn create(path: &str, mode: CreateMode) -> Op {
        Op::Create {
            path: path.into(),
            data: b"x".to_vec(),
            mode,
        }
    }

    #[test]
    fn all_ops_apply_under_one_zxid_in_order() {
        let mut tree = Tree::new();
        let zxid = tree.next_zxid();
        let (results, journal) = apply_multi(
            &mut tree,
            zxid,
            OWNER,
            &[
                create("/q", CreateMode::Persistent),
                create("/q/t-", CreateMode::PersistentSequential),
                create("/q/t-", CreateMode::PersistentSequential),
                Op::Check {
                    path: "/q".into(),
                    version: Some(0),
                },
                Op::SetData {
                    path: "/q".into(),
                    data: vec![],
                    version: Some(0),
                },
            ],
        )
        .unwrap();
        assert_eq!(
            results[..3],
            [
                OpResult::Created { path: "/q".into() },
                OpResult::Created {
                    path: "/q/t-0000000000".into()
                },
                OpResult::Created {
                    path: "/q/t-0000000001".into()
                },
            ]
        );
        assert_eq!(results[3], OpResult::Checked);
        assert_eq!(tree.stat("/q/t-0000000001").unwrap().czxid, zxid);
        assert_eq!(tree.stat("/q").unwrap().version, 1);
        assert_eq!(journal.triggers.len(), 7);
        tree.check_invariants();
    }

    #[test]
    fn a_failure_takes_everything_back_and_names_the_index() {
        let mut tree = Tree::new();
        let zxid = tree.next_zxid();
        apply_multi(
            &mut tree,
            zxid,
            OWNER,
            &[create("/q", CreateMode::Persistent)],
        )
        .unwrap();
        let before = format!("{tree:?}");
        let zxid = tree.next_zxid();
        let error = apply_multi(
            &mut tree,
            zxid,
            OWNER,
            &[
                create("/q/t-", CreateMode::EphemeralSequential),
                Op::SetData {
                    path: "/q".into(),
                    data: b"changed".to_vec(),
                    version: None,
                },
                Op::Delete {
                    path: "/q".into(),
                    version: Some(7),
                },
                create("/never", CreateMode::Persistent),
            ],
        )
        .unwrap_err();
        assert_eq!(
            error,
            ZkError::Multi {
                index: 2,
                error: Box::new(ZkError::BadVersion {
                    path: "/q".into(),
                    expected: 7
                })
            }
        );
        // Nothing changed but the zxid the failed transaction took.
        let after = format!("{tree:?}");
        assert_eq!(after.replace("zxid: 2", "zxid: 1"), before);
        tree.check_invariants();
    }
}
