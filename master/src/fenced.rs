//! The master's writes: every one is a `multi` whose first op checks that
//! the `epoch` node is still at the master's version, so that nothing a
//! deposed master sends can change the tree. [`FencedOps`] is the only way
//! the shell builds one, so an unfenced write cannot be written by mistake.

use zkdist_coord::{Coordinator, ErrorCode, Layout, Op, ZkError};

use crate::election::Epoch;

/// A master write: the epoch check, then the write's own ops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FencedOps {
    ops: Vec<Op>,
}

/// What a fenced write's reply means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FencedReply {
    Applied,
    /// The epoch check (op 0) failed: a newer master leads.
    FencedOff,
    /// One of the write's own ops failed definitely, after the epoch check
    /// passed: nothing was applied. `op` is its index among the write's own
    /// ops (the epoch check not counted). A check of the write's own
    /// refused for want of read permission (`NoAuth`) is such an answer
    /// too: it is about that node alone.
    OpFailed {
        op: usize,
        error: ZkError,
    },
    /// Applied or not, nobody knows yet: the connection dropped, or the
    /// server answered something that does not say.
    Unknown,
    /// The session is gone (`SessionEnded`), or the server refused the
    /// write for a reason a retry would meet again (no authorisation, bad
    /// arguments): the master must stop.
    Error(ZkError),
}

impl FencedOps {
    /// `ops` fenced by `epoch`.
    pub(crate) fn new(layout: &Layout, epoch: Epoch, ops: impl IntoIterator<Item = Op>) -> Self {
        let mut fenced = vec![Op::Check {
            path: layout.epoch(),
            version: Some(epoch.0),
        }];
        fenced.extend(ops);
        assert!(fenced.len() >= 2, "a fenced write has ops of its own");
        FencedOps { ops: fenced }
    }

    /// Sends the write once and says what its reply means.
    pub(crate) async fn send<C: Coordinator>(&self, zk: &C) -> FencedReply {
        classify(zk.multi(self.ops.clone()).await, &self.ops)
    }
}

fn classify(result: Result<Vec<zkdist_coord::OpResult>, ZkError>, ops: &[Op]) -> FencedReply {
    match result {
        Ok(_) => FencedReply::Applied,
        Err(ZkError::Multi { index: 0, .. }) => FencedReply::FencedOff,
        // A definite answer about the write's own op: the node was there
        // already, or was not there to delete (or its parent was gone), or,
        // for a check, cannot be read. A refused create or delete is the
        // deployment's (every such write would meet it), and stops the
        // master below.
        Err(ZkError::Multi { index, error })
            if matches!(error.code(), ErrorCode::NodeExists | ErrorCode::NoNode)
                || (error.code() == ErrorCode::NoAuth
                    && matches!(ops.get(index), Some(Op::Check { .. }))) =>
        {
            FencedReply::OpFailed {
                op: index - 1,
                error: *error,
            }
        }
        Err(error) if error.session_end().is_some() || !error.is_transient() => {
            FencedReply::Error(error)
        }
        // Connection loss, a timeout, a moved session: the write may have
        // been applied.
        Err(_) => FencedReply::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ops of an assignment create: epoch check, registration check,
    /// create.
    fn assignment_create() -> Vec<Op> {
        let layout = Layout::new("/zkdist").unwrap();
        FencedOps::new(
            &layout,
            Epoch(1),
            [
                Op::Check {
                    path: "/zkdist/workers/w".into(),
                    version: None,
                },
                Op::Create {
                    path: "/zkdist/assignments/w".into(),
                    data: Vec::new(),
                    mode: zkdist_coord::CreateMode::Persistent,
                },
            ],
        )
        .ops
    }

    fn classify(result: Result<Vec<zkdist_coord::OpResult>, ZkError>) -> FencedReply {
        super::classify(result, &assignment_create())
    }

    fn multi_error(index: usize, error: ZkError) -> FencedReply {
        classify(Err(ZkError::Multi {
            index,
            error: Box::new(error),
        }))
    }

    #[test]
    fn only_a_definite_answer_about_the_write_counts_as_not_applied() {
        let exists = ZkError::NodeExists { path: "/a".into() };
        assert_eq!(
            multi_error(1, exists.clone()),
            FencedReply::OpFailed {
                op: 0,
                error: exists
            }
        );
        let gone = ZkError::NoNode {
            path: "/workers/w".into(),
        };
        assert_eq!(
            multi_error(2, gone.clone()),
            FencedReply::OpFailed { op: 1, error: gone }
        );
        assert_eq!(
            multi_error(
                0,
                ZkError::BadVersion {
                    path: "/epoch".into(),
                    expected: 3
                }
            ),
            FencedReply::FencedOff
        );
        for unknown in [
            ZkError::ConnectionLoss {
                reason: "cut".into(),
            },
            ZkError::OperationTimeout {
                reason: "slow".into(),
            },
            ZkError::SessionMoved,
        ] {
            assert_eq!(classify(Err(unknown)), FencedReply::Unknown);
        }
    }

    #[test]
    fn a_refusal_a_retry_would_meet_again_stops_the_master() {
        let no_auth = ZkError::NoAuth { path: "/a".into() };
        assert!(matches!(
            multi_error(2, no_auth.clone()),
            FencedReply::Error(ZkError::Multi { .. })
        ));
        // A check's refusal is about the node checked, not the write.
        assert_eq!(
            multi_error(1, no_auth.clone()),
            FencedReply::OpFailed {
                op: 0,
                error: no_auth.clone()
            }
        );
        assert_eq!(classify(Err(no_auth.clone())), FencedReply::Error(no_auth));
        assert_eq!(
            classify(Err(ZkError::SessionExpired)),
            FencedReply::Error(ZkError::SessionExpired)
        );
    }

    #[test]
    fn every_write_starts_with_the_epoch_check() {
        let layout = Layout::new("/zkdist").unwrap();
        let write = FencedOps::new(
            &layout,
            Epoch(4),
            [Op::Delete {
                path: "/zkdist/assignments/w".into(),
                version: None,
            }],
        );
        assert_eq!(
            write.ops[0],
            Op::Check {
                path: layout.epoch(),
                version: Some(4)
            }
        );
        assert_eq!(write.ops.len(), 2);
    }
}
