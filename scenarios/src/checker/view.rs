//! The end of a run: what ZooKeeper's tree says, and how the master's
//! in-memory view must match it.

use std::collections::{BTreeMap, BTreeSet};

use zkdist_coord::{Layout, TaskId, WorkerId, assignment_label};
use zkdist_master::MasterState;
use zkdist_sim::Tree;

/// The part of the tree the final checks read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeFacts {
    /// Registered workers.
    pub workers: BTreeSet<WorkerId>,
    /// Assignment nodes: worker -> data (a task's name, or anything).
    pub assignments: BTreeMap<WorkerId, String>,
    /// Tasks, and whether each has its result.
    pub tasks: BTreeMap<TaskId, bool>,
}

impl TreeFacts {
    /// Reads the facts under `layout` (names that are not valid worker or
    /// task names are left out).
    pub fn read(tree: &Tree, layout: &Layout) -> TreeFacts {
        let children = |dir: &str| -> Vec<String> {
            tree.children(dir)
                .unwrap_or_default()
                .into_iter()
                .map(str::to_owned)
                .collect()
        };
        let workers = children(&layout.workers_dir())
            .iter()
            .filter_map(|name| WorkerId::parse(name).ok())
            .collect();
        let assignments = children(&layout.assignments_dir())
            .iter()
            .filter_map(|name| WorkerId::parse(name).ok())
            .map(|worker| {
                let data = tree.data(&layout.assignment(&worker)).unwrap_or_default();
                (worker, assignment_label(data))
            })
            .collect();
        let tasks = children(&layout.tasks_dir())
            .iter()
            .filter_map(|name| TaskId::parse(name).ok())
            .map(|task| {
                let finished = tree.exists(&layout.result(&task));
                (task, finished)
            })
            .collect();
        TreeFacts {
            workers,
            assignments,
            tasks,
        }
    }

    /// Tasks neither finished nor named by an assignment node, oldest
    /// first: what the master's pending queue must hold.
    pub fn waiting_tasks(&self) -> Vec<TaskId> {
        let assigned: BTreeSet<&str> = self.assignments.values().map(String::as_str).collect();
        self.tasks
            .iter()
            .filter(|(task, finished)| !**finished && !assigned.contains(task.as_str()))
            .map(|(task, _)| task.clone())
            .collect()
    }

    /// Where an unfinished task is stuck, for a report.
    pub fn whereabouts(&self, task: &TaskId, master: Option<&MasterState>) -> String {
        let holder = self
            .assignments
            .iter()
            .find(|(_, data)| data.as_str() == task.as_str())
            .map(|(worker, _)| worker);
        match (holder, master) {
            (Some(worker), _) if !self.workers.contains(worker) => format!(
                "its assignment to {worker} is still there, and {worker} is no longer registered"
            ),
            (Some(worker), _) => format!("it is still assigned to {worker}"),
            (None, Some(state)) if state.pending_tasks().contains(task) => {
                "it is still in the master's pending queue".to_owned()
            }
            (None, Some(state)) if !state.processed_tasks().contains(task) => {
                "the master never saw it".to_owned()
            }
            (None, Some(state)) => match state
                .workers()
                .iter()
                .find(|(_, slot)| slot.as_ref().is_some_and(|a| &a.task == task))
            {
                Some((worker, _)) => format!(
                    "the master believes {worker} holds it, but no assignment node names it"
                ),
                None => "it has no assignment and the master does not queue it".to_owned(),
            },
            (None, None) => "it is not assigned and the master is gone".to_owned(),
        }
    }
}

/// Every way the master's state differs from the tree's facts, in a stable
/// order (empty when they agree). The processed set must hold exactly the
/// tasks that exist: all of them (the master saw each), and no other (it
/// forgets the tasks a client deleted).
pub(crate) fn differences(state: &MasterState, facts: &TreeFacts) -> Vec<String> {
    let mut found = Vec::new();
    for worker in state.workers().keys() {
        if !facts.workers.contains(worker) {
            found.push(format!(
                "the master lists {worker}, which is not registered"
            ));
        }
    }
    for worker in &facts.workers {
        if !state.workers().contains_key(worker) {
            found.push(format!(
                "{worker} is registered, but the master does not know it"
            ));
        }
    }
    for (worker, slot) in state.workers() {
        match (slot, facts.assignments.get(worker)) {
            (None, None) => {}
            (Some(assignment), Some(data))
                if assignment.confirmed && assignment.task.as_str() == data => {}
            (Some(assignment), Some(data)) => found.push(format!(
                "the master believes {worker} holds {} (confirmed: {}), its assignment node holds {data}",
                assignment.task, assignment.confirmed
            )),
            (Some(assignment), None) => found.push(format!(
                "the master believes {worker} holds {}, but it has no assignment node",
                assignment.task
            )),
            (None, Some(data)) => found.push(format!(
                "the master believes {worker} idle, but its assignment node holds {data}"
            )),
        }
    }
    for (worker, data) in &facts.assignments {
        if !state.workers().contains_key(worker) {
            found.push(format!(
                "an assignment node holds {data} for {worker}, which the master does not know"
            ));
        }
    }
    let waiting = facts.waiting_tasks();
    if !state.pending_tasks().iter().eq(waiting.iter()) {
        let show = |tasks: Vec<&TaskId>| {
            tasks
                .iter()
                .map(|task| task.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        found.push(format!(
            "the master's pending queue is [{}], the tasks waiting in ZooKeeper are [{}]",
            show(state.pending_tasks().iter().collect()),
            show(waiting.iter().collect())
        ));
    }
    for task in facts.tasks.keys() {
        if !state.processed_tasks().contains(task) {
            found.push(format!("{task} exists, but the master never saw it"));
        }
    }
    // Bounded memory: a task a client deleted is forgotten.
    for task in state.processed_tasks() {
        if !facts.tasks.contains_key(task) {
            found.push(format!(
                "the master still remembers {task}, which no longer exists"
            ));
        }
    }
    found
}
