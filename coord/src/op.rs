//! The operations of an atomic `multi`.

use crate::types::{CreateMode, Stat};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Create {
        path: String,
        data: Vec<u8>,
        mode: CreateMode,
    },
    /// `version: None` deletes whatever the version is.
    Delete { path: String, version: Option<i32> },
    SetData {
        path: String,
        data: Vec<u8>,
        version: Option<i32>,
    },
    /// Succeeds only if the node exists, with exactly this version if one
    /// is given (`None`: any version, as ZooKeeper's -1).
    Check { path: String, version: Option<i32> },
}

impl Op {
    pub fn path(&self) -> &str {
        match self {
            Op::Create { path, .. }
            | Op::Delete { path, .. }
            | Op::SetData { path, .. }
            | Op::Check { path, .. } => path,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// The path actually created (with its sequence suffix, if sequential).
    Created {
        path: String,
    },
    Deleted,
    DataSet {
        stat: Stat,
    },
    Checked,
}
