//! Where zkdist keeps its state in ZooKeeper. Every path master, worker and
//! client touch is built here, so the layout is written down exactly once:
//!
//! ```text
//! <root>                          persistent, default /zkdist
//! ├── master                      ephemeral: the session that leads (data =
//! │                               its session id)
//! ├── epoch                       persistent: its *version* is the current
//! │                               master's epoch, bumped by each new master;
//! │                               every master write checks it (fencing)
//! ├── workers/<worker-id>         ephemeral: one per live worker (data = the
//! │                               assignment formats it reads, see `registration`)
//! ├── tasks/task-NNNNNNNNNN       persistent sequential: the task payload
//! │   └── result                  persistent: the task's result
//! ├── assignments/<worker-id>     persistent: data = the task's name (and maybe
//! │                               its payload, see `assignment`); created by the
//! │                               master, deleted by the worker when done
//! ├── ids/worker-NNNNNNNNNN       ephemeral sequential: where a worker gets its
//! │                               unique id without the master hearing of it
//! └── refused/<task-id>           persistent: a task whose node refused its
//!                                 result (data = why, an encoded failure
//!                                 result, see `codec`); created by the
//!                                 worker that released it, so that it is not
//!                                 tried again and its waiters hear why.
//!                                 `refused/` is made when first needed
//! ```

use crate::error::{ZkError, ZkResult};
use crate::names::{TASK_PREFIX, TaskId, TaskToken, WORKER_PREFIX, WorkerId};
use crate::path;
use crate::{Coordinator, CreateMode, Watch};

/// The root used when none is configured.
pub const DEFAULT_ROOT: &str = "/zkdist";

const MASTER: &str = "master";
const EPOCH: &str = "epoch";
const WORKERS: &str = "workers";
const TASKS: &str = "tasks";
const ASSIGNMENTS: &str = "assignments";
const IDS: &str = "ids";
const REFUSED: &str = "refused";
const RESULT: &str = "result";

/// The nodes under a deployment's root that no other deployment's root may
/// be or lie under: those whose children its master or its `status` takes
/// for its own (registrations, tasks, assignments, marks), and `master`,
/// the elected master's ephemeral claim. Laid out while no master runs, a
/// root there would make `master` a persistent node, a claim no session
/// holds and none can take over: no master would be elected again.
const NODES_NOT_TO_NEST_IN: [&str; 5] = [WORKERS, TASKS, ASSIGNMENTS, REFUSED, MASTER];

/// The longest root a layout takes. Every request names a path under it,
/// and a worker's completion (its result and the release of its
/// assignment, in one request) names two, within the room the result
/// limit keeps for them (`codec::COMPLETION_RESERVE_BYTES`): a longer root
/// could make a completion that no request can carry.
pub const MAX_ROOT_BYTES: usize = 256;

/// The znode layout under one root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: String,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout::new(DEFAULT_ROOT).expect("the default root is valid")
    }
}

impl Layout {
    /// A layout under `root`, which must be a valid absolute path other than
    /// `/` and outside ZooKeeper's reserved `/zookeeper` subtree.
    pub fn new(root: &str) -> ZkResult<Layout> {
        let invalid = |reason: &str| ZkError::InvalidPath {
            path: root.to_owned(),
            reason: format!("not usable as the zkdist root: {reason}"),
        };
        path::validate_path(root).map_err(|error| match error {
            ZkError::InvalidPath { reason, .. } => invalid(&reason),
            other => other,
        })?;
        if root == "/" {
            return Err(invalid("zkdist needs a node of its own, not `/`"));
        }
        if root == "/zookeeper" || root.starts_with("/zookeeper/") {
            return Err(invalid("`/zookeeper` is reserved by ZooKeeper"));
        }
        if root.len() > MAX_ROOT_BYTES {
            return Err(invalid(&format!(
                "it is {} bytes long, over the {MAX_ROOT_BYTES}-byte limit",
                root.len()
            )));
        }
        Ok(Layout {
            root: root.to_owned(),
        })
    }

    pub fn root(&self) -> &str {
        &self.root
    }

    /// The path of `segments` under the root, built in one allocation.
    fn under(&self, segments: &[&str]) -> String {
        let len = self.root.len() + segments.iter().map(|s| 1 + s.len()).sum::<usize>();
        let mut path = String::with_capacity(len);
        path.push_str(&self.root);
        for segment in segments {
            debug_assert!(!segment.contains('/'), "segment {segment:?} contains '/'");
            path.push('/');
            path.push_str(segment);
        }
        path
    }

    /// Whether `path` is the node of `segments` under the root, without
    /// building it.
    fn is_under(&self, path: &str, segments: &[&str]) -> bool {
        let Some(mut rest) = path.strip_prefix(self.root.as_str()) else {
            return false;
        };
        for segment in segments {
            match rest.strip_prefix('/').and_then(|r| r.strip_prefix(segment)) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty()
    }

    /// The ephemeral node of the leading master.
    pub fn master(&self) -> String {
        self.under(&[MASTER])
    }

    /// The fencing node: each new master bumps its version (the epoch) in
    /// the same `multi` that creates the `master` node, and every write of
    /// a master checks that the version is still its own, so a deposed
    /// master can change nothing.
    pub fn epoch(&self) -> String {
        self.under(&[EPOCH])
    }

    pub fn workers_dir(&self) -> String {
        self.under(&[WORKERS])
    }

    /// A worker's registration (ephemeral).
    pub fn worker(&self, worker: &WorkerId) -> String {
        self.under(&[WORKERS, worker.as_str()])
    }

    pub fn tasks_dir(&self) -> String {
        self.under(&[TASKS])
    }

    /// The name of the task whose node is `path` (`<root>/tasks/<name>`),
    /// or `None` for any other path, a task's result included: what the
    /// master's recursive watch on `tasks/` reports is sorted out with it.
    pub fn task_name_of<'p>(&self, path: &'p str) -> Option<&'p str> {
        self.child_name_of(Directory::Tasks, path)
    }

    /// The name of the child of `dir` whose node is `path`
    /// (`<root>/<dir>/<name>`), or `None` for any other path, deeper ones
    /// included: what the master's recursive watches report is sorted out
    /// with it.
    pub fn child_name_of<'p>(&self, dir: Directory, path: &'p str) -> Option<&'p str> {
        let name = self.below(dir, path)?.strip_prefix('/')?;
        (!name.is_empty() && !name.contains('/')).then_some(name)
    }

    /// The name of the task whose result node is `path`
    /// (`<root>/tasks/<name>/result`), or `None` for any other path.
    pub fn result_owner_of<'p>(&self, path: &'p str) -> Option<&'p str> {
        let rest = self.below(Directory::Tasks, path)?.strip_prefix('/')?;
        let name = rest.strip_suffix(RESULT)?.strip_suffix('/')?;
        (!name.is_empty() && !name.contains('/')).then_some(name)
    }

    /// Whether `path` is `dir` itself or any node below it.
    pub fn is_in_directory(&self, dir: Directory, path: &str) -> bool {
        self.below(dir, path)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// What follows `<root>/<dir>` in `path`, if it starts so.
    fn below<'p>(&self, dir: Directory, path: &'p str) -> Option<&'p str> {
        path.strip_prefix(self.root.as_str())?
            .strip_prefix('/')?
            .strip_prefix(dir.name())
    }

    /// The prefix a persistent-sequential create turns into a new task.
    pub fn task_prefix(&self) -> String {
        self.under(&[TASKS, TASK_PREFIX])
    }

    /// The prefix a persistent-sequential create turns into a task whose
    /// name carries `token` (`tasks/task-<token>-`), so that its creator can
    /// find it after a connection loss.
    pub fn protected_task_prefix(&self, token: TaskToken) -> String {
        self.under(&[TASKS, &token.name_prefix()])
    }

    /// A task's node; its data is the payload.
    pub fn task(&self, task: &TaskId) -> String {
        self.under(&[TASKS, task.as_str()])
    }

    /// A task's result node; its data is an encoded
    /// [`TaskResult`](crate::TaskResult).
    pub fn result(&self, task: &TaskId) -> String {
        self.under(&[TASKS, task.as_str(), RESULT])
    }

    pub fn assignments_dir(&self) -> String {
        self.under(&[ASSIGNMENTS])
    }

    /// A worker's assignment; its data is the assigned task's name.
    pub fn assignment(&self, worker: &WorkerId) -> String {
        self.under(&[ASSIGNMENTS, worker.as_str()])
    }

    /// The scratch directory of worker ids.
    pub fn ids_dir(&self) -> String {
        self.under(&[IDS])
    }

    /// The prefix an ephemeral-sequential create turns into a worker id.
    pub fn worker_id_prefix(&self) -> String {
        self.under(&[IDS, WORKER_PREFIX])
    }

    /// Where tasks whose nodes refused their results are marked. Not part
    /// of [`Layout::ensure_layout`]: the worker that first needs it makes
    /// it, so roots laid out before it existed need nothing done.
    pub fn refused_dir(&self) -> String {
        self.under(&[REFUSED])
    }

    /// The mark of a task whose node refused its result: its data says why.
    /// While it is there, the task is settled without a result: no new
    /// master queues it again, and `wait` reports the refusal. Deleting it
    /// (once the credentials are put right) lets the next master try the
    /// task again.
    pub fn refused(&self, task: &TaskId) -> String {
        self.under(&[REFUSED, task.as_str()])
    }

    /// The nodes that must exist before anyone works, parents first: the
    /// root's ancestors, the root, the four directories and `epoch`.
    fn directories(&self) -> Vec<String> {
        let mut dirs: Vec<String> = self.root[1..]
            .split('/')
            .scan(String::new(), |prefix, segment| {
                prefix.push('/');
                prefix.push_str(segment);
                Some(prefix.clone())
            })
            .collect();
        debug_assert_eq!(dirs.last(), Some(&self.root));
        dirs.extend([
            self.workers_dir(),
            self.tasks_dir(),
            self.assignments_dir(),
            self.ids_dir(),
            self.epoch(),
        ]);
        dirs
    }

    /// Creates the root (and its missing parents), the four directories and
    /// the `epoch` node (empty, version 0), leaving whatever exists
    /// untouched. Safe to run concurrently from any
    /// number of processes: each create that loses a race sees `NodeExists`,
    /// which is success here. Reads first, so a fully laid-out tree costs no
    /// write (a read-only identity can run it).
    ///
    /// A root inside another deployment's nodes is refused before anything
    /// is created ([`ZkError::InvalidPath`]), after a look at the root's
    /// ancestors (`Layout::refuse_nested_root`).
    pub async fn ensure_layout<C: Coordinator>(&self, zk: &C) -> ZkResult<()> {
        self.refuse_nested_root(zk).await?;
        for dir in self.directories() {
            if zk.exists(&dir, Watch::No).await?.is_some() {
                continue;
            }
            match zk.create(&dir, b"", CreateMode::Persistent).await {
                Ok(_) | Err(ZkError::NodeExists { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Refuses a root that is or lies under the `workers`, `tasks`,
    /// `assignments`, `refused` or `master` node of another zkdist
    /// deployment (`--root /zkdist/workers`, say). There, that deployment's
    /// master would take the directories laid out here for records of its
    /// own: under `workers/`, for workers that hold its oldest tasks and
    /// never run them, and never leave. As its `master`, the root would be
    /// a persistent claim that stops every election. A deployment's root is a node with
    /// `epoch`, `tasks`, `workers` and `assignments` children. Reads only,
    /// up to four per such ancestor (none for a root like the default).
    ///
    /// It looks up from the root only: a deployment laid out after a tree
    /// nested in it, or a nested tree made before this check, is not seen
    /// here; under `workers/`, the outer deployment's `status` then names
    /// the nested directories as registrations that are not ephemeral.
    /// Under a chroot, only the ancestors inside it are seen.
    pub(crate) async fn refuse_nested_root<C: Coordinator>(&self, zk: &C) -> ZkResult<()> {
        let mut path = self.root.as_str();
        while let Some((parent, name)) = path.rsplit_once('/') {
            if parent.is_empty() {
                return Ok(());
            }
            if NODES_NOT_TO_NEST_IN.contains(&name) && is_deployment_root(zk, parent).await? {
                let harm = if name == MASTER {
                    "whose master claim it would make a node no master can take over"
                } else {
                    "which would take what is laid out here for records of its own"
                };
                return Err(ZkError::InvalidPath {
                    path: self.root.clone(),
                    reason: format!(
                        "not usable as the zkdist root: it is or lies under `{name}` of the \
                         zkdist deployment at {parent}, {harm}; choose a root outside \
                         {parent}/{name}"
                    ),
                });
            }
            path = parent;
        }
        Ok(())
    }

    /// Whether `path` is one of the three directories the master watches.
    pub fn watched_directory(&self, path: &str) -> Option<Directory> {
        Directory::ALL
            .into_iter()
            .find(|dir| self.is_under(path, &[dir.name()]))
    }

    /// The path of one of the master's watched directories.
    pub fn directory(&self, dir: Directory) -> String {
        self.under(&[dir.name()])
    }
}

/// Whether `path` is a zkdist deployment's root: it has the `epoch`,
/// `tasks`, `workers` and `assignments` children every deployment has.
async fn is_deployment_root<C: Coordinator>(zk: &C, path: &str) -> ZkResult<bool> {
    for child in [EPOCH, TASKS, WORKERS, ASSIGNMENTS] {
        if zk
            .exists(&format!("{path}/{child}"), Watch::No)
            .await?
            .is_none()
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The three directories whose children the master lists and watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Directory {
    Workers,
    Tasks,
    Assignments,
}

impl Directory {
    pub const ALL: [Directory; 3] = [Directory::Workers, Directory::Tasks, Directory::Assignments];

    pub fn name(self) -> &'static str {
        match self {
            Directory::Workers => WORKERS,
            Directory::Tasks => TASKS,
            Directory::Assignments => ASSIGNMENTS,
        }
    }
}

impl std::fmt::Display for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_under_the_default_root() {
        let layout = Layout::default();
        let task = TaskId::from_sequence(7);
        let worker = WorkerId::parse("worker-0000000003").unwrap();
        assert_eq!(layout.root(), "/zkdist");
        assert_eq!(layout.master(), "/zkdist/master");
        assert_eq!(layout.epoch(), "/zkdist/epoch");
        assert_eq!(layout.worker(&worker), "/zkdist/workers/worker-0000000003");
        assert_eq!(layout.task_prefix(), "/zkdist/tasks/task-");
        assert_eq!(layout.task(&task), "/zkdist/tasks/task-0000000007");
        assert_eq!(layout.result(&task), "/zkdist/tasks/task-0000000007/result");
        assert_eq!(
            layout.assignment(&worker),
            "/zkdist/assignments/worker-0000000003"
        );
        assert_eq!(layout.worker_id_prefix(), "/zkdist/ids/worker-");
        assert_eq!(layout.refused_dir(), "/zkdist/refused");
        assert_eq!(layout.refused(&task), "/zkdist/refused/task-0000000007");
        assert_eq!(
            layout.watched_directory("/zkdist/tasks"),
            Some(Directory::Tasks)
        );
        assert_eq!(layout.watched_directory("/zkdist/ids"), None);
        for near_miss in [
            "/zkdist",
            "/zkdist/",
            "/zkdist/tasksx",
            "/zkdist/tasks/",
            "/zkdist/tasks/x",
            "/zkdistx/tasks",
            "/other/tasks",
            "tasks",
        ] {
            assert_eq!(layout.watched_directory(near_miss), None, "{near_miss}");
        }
        for dir in Directory::ALL {
            assert_eq!(layout.watched_directory(&layout.directory(dir)), Some(dir));
        }
        assert_eq!(
            layout.protected_task_prefix(TaskToken(0xc0ffee)),
            "/zkdist/tasks/task-0000000000c0ffee-"
        );
    }

    #[test]
    fn task_names_are_read_off_task_paths_only() {
        let layout = Layout::new("/a/zkdist").unwrap();
        let task = TaskId::from_sequence(7);
        assert_eq!(
            layout.task_name_of(&layout.task(&task)),
            Some(task.as_str())
        );
        for other in [
            layout.result(&task),
            layout.tasks_dir(),
            format!("{}/", layout.tasks_dir()),
            layout.assignments_dir(),
            "/a/zkdist/tasksx/task-0000000007".to_owned(),
            "/b/zkdist/tasks/task-0000000007".to_owned(),
        ] {
            assert_eq!(layout.task_name_of(&other), None, "{other}");
        }
    }

    #[test]
    fn children_and_subtrees_are_told_by_directory() {
        let layout = Layout::new("/a/zkdist").unwrap();
        let worker = WorkerId::parse("worker-0000000003").unwrap();
        let assignment = layout.assignment(&worker);
        assert_eq!(
            layout.child_name_of(Directory::Assignments, &assignment),
            Some(worker.as_str())
        );
        assert_eq!(layout.child_name_of(Directory::Tasks, &assignment), None);
        assert_eq!(
            layout.child_name_of(Directory::Assignments, &format!("{assignment}/deeper")),
            None
        );
        assert!(layout.is_in_directory(Directory::Assignments, &assignment));
        assert!(layout.is_in_directory(Directory::Assignments, &layout.assignments_dir()));
        assert!(
            layout.is_in_directory(Directory::Tasks, &layout.result(&TaskId::from_sequence(1)))
        );
        for other in [
            "/a/zkdist/assignmentsx".to_owned(),
            "/a/zkdist/assignmentsx/worker-0000000003".to_owned(),
            layout.workers_dir(),
            layout.worker(&worker),
        ] {
            assert!(
                !layout.is_in_directory(Directory::Assignments, &other),
                "{other}"
            );
            assert_eq!(
                layout.child_name_of(Directory::Assignments, &other),
                None,
                "{other}"
            );
        }
    }

    #[test]
    fn nested_root_lists_its_parents_first() {
        let layout = Layout::new("/apps/zk/dist").unwrap();
        assert_eq!(
            layout.directories(),
            [
                "/apps",
                "/apps/zk",
                "/apps/zk/dist",
                "/apps/zk/dist/workers",
                "/apps/zk/dist/tasks",
                "/apps/zk/dist/assignments",
                "/apps/zk/dist/ids",
                "/apps/zk/dist/epoch",
            ]
        );
    }

    #[test]
    fn unusable_roots_are_refused_naming_them() {
        let longest = format!("/{}", "r".repeat(MAX_ROOT_BYTES - 1));
        let too_long = format!("{longest}r");
        for (root, reason) in [
            ("zkdist", "start with '/'"),
            ("/zkdist/", "end with '/'"),
            ("/", "a node of its own"),
            ("/zookeeper", "reserved"),
            ("/zookeeper/quota", "reserved"),
            ("/a//b", "empty"),
            (too_long.as_str(), "257 bytes long, over the 256-byte limit"),
        ] {
            match Layout::new(root) {
                Err(ZkError::InvalidPath { path, reason: why }) => {
                    assert_eq!(path, root);
                    assert!(why.contains(reason), "{root:?}: {why}");
                    assert!(why.contains("zkdist root"), "{root:?}: {why}");
                }
                other => panic!("{root:?} gave {other:?}"),
            }
        }
        assert!(Layout::new("/zookeeperish").is_ok());
        assert!(Layout::new(&longest).is_ok());
    }
}
