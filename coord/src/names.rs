//! The names of tasks and workers: the last segment of their nodes.
//!
//! A task is named by the server when the client creates it
//! (`task-` + the sequence counter, `%010d`), so its number is its place in
//! submission order. A worker is named after its node in the id scratch
//! directory (`worker-` + counter), which is unique for the life of the
//! ensemble because a sequence counter never goes back.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// The name prefix of task nodes under `tasks/`.
pub const TASK_PREFIX: &str = "task-";
/// The name prefix of id nodes under `ids/`, and so of worker ids.
pub const WORKER_PREFIX: &str = "worker-";

/// A name that is not a valid task or worker name, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {name:?}: {reason}")]
pub struct InvalidName {
    pub what: &'static str,
    pub name: String,
    pub reason: String,
}

fn invalid(what: &'static str, name: &str, reason: impl Into<String>) -> InvalidName {
    InvalidName {
        what,
        name: name.to_owned(),
        reason: reason.into(),
    }
}

/// Checks that `name` can be one path segment.
fn validate_segment(what: &'static str, name: &str) -> Result<(), InvalidName> {
    if name.is_empty() {
        return Err(invalid(what, name, "it is empty"));
    }
    if name.contains('/') {
        return Err(invalid(what, name, "it contains '/'"));
    }
    crate::path::validate_path(&format!("/{name}"))
        .map_err(|error| invalid(what, name, error.to_string()))
}

/// A task's node name, `task-NNNNNNNNNN`. Ordered by sequence number, which
/// is submission order (until the 32-bit counter wraps, which ZooKeeper
/// renders as a negative number and which breaks any order by name too).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskId {
    name: String,
    sequence: i32,
}

impl TaskId {
    /// Parses a task node's name, e.g. `task-0000000042`.
    pub fn parse(name: &str) -> Result<TaskId, InvalidName> {
        const WHAT: &str = "task id";
        validate_segment(WHAT, name)?;
        let Some(digits) = name.strip_prefix(TASK_PREFIX) else {
            return Err(invalid(
                WHAT,
                name,
                format!("it does not start with {TASK_PREFIX:?}"),
            ));
        };
        let sequence: i32 = digits.parse().map_err(|_| {
            invalid(
                WHAT,
                name,
                "it does not end with a 32-bit sequence number (task-NNNNNNNNNN)",
            )
        })?;
        // The server renders the counter with `%010d`; any other spelling of
        // the same number would be a different node.
        if format!("{sequence:010}") != digits {
            return Err(invalid(
                WHAT,
                name,
                "its sequence number is not written with 10 digits (task-NNNNNNNNNN)",
            ));
        }
        Ok(TaskId {
            name: name.to_owned(),
            sequence,
        })
    }

    /// The task made by the `sequence`-th create under `tasks/`.
    pub fn from_sequence(sequence: i32) -> TaskId {
        TaskId {
            name: format!("{TASK_PREFIX}{sequence:010}"),
            sequence,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.name
    }

    pub fn sequence(&self) -> i32 {
        self.sequence
    }
}

impl Ord for TaskId {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.sequence, &self.name).cmp(&(other.sequence, &other.name))
    }
}

impl PartialOrd for TaskId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl FromStr for TaskId {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<TaskId, InvalidName> {
        TaskId::parse(s)
    }
}

/// A worker's name, as registered under `workers/`. zkdist's workers use
/// `worker-NNNNNNNNNN` from the id scratch directory, but any valid node name
/// is accepted so that a foreign registration is handled, not a crash.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(String);

impl WorkerId {
    pub fn parse(name: &str) -> Result<WorkerId, InvalidName> {
        validate_segment("worker id", name)?;
        Ok(WorkerId(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for WorkerId {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<WorkerId, InvalidName> {
        WorkerId::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_parse_and_order_by_sequence() {
        let a = TaskId::parse("task-0000000009").unwrap();
        let b = TaskId::parse("task-0000000010").unwrap();
        assert_eq!(a.sequence(), 9);
        assert!(a < b);
        assert_eq!(TaskId::from_sequence(10), b);
        assert_eq!(b.to_string(), "task-0000000010");
        // The wrapped counter is rendered negative and parses.
        let wrapped = TaskId::parse("task--2147483648").unwrap();
        assert_eq!(wrapped.sequence(), i32::MIN);
        assert_eq!(TaskId::from_sequence(i32::MIN), wrapped);
    }

    #[test]
    fn bad_task_ids_are_named_with_the_reason() {
        for (name, reason) in [
            ("", "empty"),
            ("job-0000000001", "does not start"),
            ("task-12", "10 digits"),
            ("task-00000000x1", "sequence number"),
            ("task-99999999999", "sequence number"),
            ("a/b", "'/'"),
        ] {
            let error = TaskId::parse(name).unwrap_err();
            assert_eq!(error.name, name);
            assert!(
                error.to_string().contains(reason),
                "{name:?}: {error} lacks {reason:?}"
            );
        }
    }

    #[test]
    fn worker_ids_are_any_valid_segment() {
        assert_eq!(
            WorkerId::parse("worker-0000000001").unwrap().as_str(),
            "worker-0000000001"
        );
        assert!(WorkerId::parse("host-a").is_ok());
        for bad in ["", "a/b", "..", "x\u{1}"] {
            let error = WorkerId::parse(bad).unwrap_err();
            assert!(error.to_string().contains("invalid worker id"), "{error}");
        }
    }
}
