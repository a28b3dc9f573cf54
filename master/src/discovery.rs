//! How the master learns which tasks exist.

use std::fmt;
use std::str::FromStr;

use zkdist_coord::Directory;

/// How the master discovers tasks under `tasks/`.
///
/// The founding design re-lists the whole directory on every change to it:
/// each new task costs a listing as long as the queue (O(n²) to fill a
/// backlog), and the master stops working altogether once a listing passes
/// the client's reply limit (a Java client's 1 MiB, the library's default,
/// holds some 29,000 tasks with zkdist's names; the binary's
/// `--max-reply-bytes` defaults to 64 MiB).
/// The watch design hears of each task by itself and lists the directory
/// only to start and to reconcile after a disconnection; it hears of each
/// finished assignment the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TaskDiscovery {
    /// The founding design: a one-shot child watch on `tasks/`, and a full
    /// listing every time it fires.
    Listing,
    /// A persistent recursive watch on `tasks/` (ZooKeeper 3.6+), whose
    /// `NodeCreated` and `NodeDeleted` events name each task; the directory
    /// is listed once at start and once after every reconnection (the
    /// server does not replay what changed while the session was away).
    /// The default: the per-task cost does not grow with the queue.
    ///
    /// Beyond discovery, this mode also reads the payloads of the queue's
    /// first tasks ahead (`PAYLOAD_READ_AHEAD_TASKS`, 64) and puts small ones
    /// inline in their assignments, which saves each worker a read on the
    /// task's path; the founding design's mode assigns by name only.
    #[default]
    Watch,
}

/// How many of the queue's first tasks the watch mode reads ahead. Enough
/// that the tasks the next rounds assign are read by the time they go out
/// (a round assigns as many as there are free workers, and a task's read
/// takes a round trip, or two when it waits behind the batch that is out);
/// small enough that the payloads held, at most this many times
/// `zkdist_coord::MAX_INLINE_PAYLOAD_BYTES` (16 KiB), do not matter.
/// Payloads over that size are read too (a `get_data` cannot ask for the
/// size first without another round trip) and dropped on arrival.
pub const PAYLOAD_READ_AHEAD_TASKS: usize = 64;

/// The most payloads one batch of the read-ahead reads, in one request.
/// A reply holds every payload it read, large ones too, so this bounds it
/// to some 16 MiB (16 nodes of up to a mebibyte) whatever the queue holds;
/// a busy stream's batches hold a few tasks, far under it, and filling the
/// whole window at start takes four round trips.
pub const PAYLOAD_READS_PER_BATCH: usize = 16;

impl TaskDiscovery {
    pub const ALL: [TaskDiscovery; 2] = [TaskDiscovery::Listing, TaskDiscovery::Watch];

    /// How many queued tasks' payloads the master reads ahead in this mode.
    pub fn payload_read_ahead_tasks(self) -> usize {
        match self {
            TaskDiscovery::Listing => 0,
            TaskDiscovery::Watch => PAYLOAD_READ_AHEAD_TASKS,
        }
    }

    /// Whether the master learns the changes under `dir` from a persistent
    /// recursive watch, listing it only to start and to reconcile. The
    /// watch discovery watches `assignments/` too: a worker's release then
    /// names the worker, and its next task goes out without a listing of
    /// the directory in between (a round trip per task).
    pub fn watches_recursively(self, dir: Directory) -> bool {
        self == TaskDiscovery::Watch && matches!(dir, Directory::Tasks | Directory::Assignments)
    }

    pub fn name(self) -> &'static str {
        match self {
            TaskDiscovery::Listing => "listing",
            TaskDiscovery::Watch => "watch",
        }
    }
}

impl fmt::Display for TaskDiscovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A discovery name that is neither `listing` nor `watch`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown task discovery {given:?}: expected \"listing\" or \"watch\"")]
pub struct UnknownDiscovery {
    pub given: String,
}

impl FromStr for TaskDiscovery {
    type Err = UnknownDiscovery;

    fn from_str(given: &str) -> Result<TaskDiscovery, UnknownDiscovery> {
        TaskDiscovery::ALL
            .into_iter()
            .find(|discovery| discovery.name() == given)
            .ok_or_else(|| UnknownDiscovery {
                given: given.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_others_are_refused_by_name() {
        for discovery in TaskDiscovery::ALL {
            assert_eq!(discovery.name().parse(), Ok(discovery));
        }
        let error = "relist".parse::<TaskDiscovery>().unwrap_err();
        assert!(error.to_string().contains("\"relist\""), "{error}");
        assert_eq!(TaskDiscovery::default(), TaskDiscovery::Watch);
    }

    #[test]
    fn only_the_watch_discovery_watches_recursively_and_never_workers() {
        for dir in Directory::ALL {
            assert!(!TaskDiscovery::Listing.watches_recursively(dir));
        }
        assert!(TaskDiscovery::Watch.watches_recursively(Directory::Tasks));
        assert!(TaskDiscovery::Watch.watches_recursively(Directory::Assignments));
        assert!(!TaskDiscovery::Watch.watches_recursively(Directory::Workers));
    }
}
