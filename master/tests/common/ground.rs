//! What the server's tree says happened, from a hook on every transaction,
//! so that failure tests rest on the tree and not only on the actors' word.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use zkdist_coord::{Layout, assignment_label};
use zkdist_sim::{Change, SimZk};

/// Facts gathered so far.
#[derive(Debug, Default, Clone)]
pub struct Ground {
    /// Every assignment node created, in order: (worker, task).
    pub assignments_created: Vec<(String, String)>,
    /// How many `result` nodes were created for each task.
    pub results_created: BTreeMap<String, usize>,
    /// Moments (zxids) when two assignment nodes named one task.
    pub assigned_twice: Vec<(i64, String)>,
}

/// Starts recording; read the facts with `lock()` at any time.
pub async fn watch_ground(sim: &SimZk, layout: &Layout) -> Arc<Mutex<Ground>> {
    let ground = Arc::new(Mutex::new(Ground::default()));
    let facts = Arc::clone(&ground);
    let assignments_dir = layout.assignments_dir();
    let assignment_prefix = format!("{assignments_dir}/");
    let tasks_prefix = format!("{}/", layout.tasks_dir());
    sim.on_apply(move |op, tree| {
        let mut facts = facts.lock().expect("no panic while recording");
        for change in &op.changes {
            let Change::Created(path) = change else {
                continue;
            };
            if let Some(worker) = path.strip_prefix(&assignment_prefix) {
                let data = tree.data(path).unwrap_or_default();
                facts
                    .assignments_created
                    .push((worker.to_owned(), assignment_label(data)));
            } else if let Some(task) = path
                .strip_prefix(&tasks_prefix)
                .and_then(|rest| rest.strip_suffix("/result"))
            {
                *facts.results_created.entry(task.to_owned()).or_default() += 1;
            }
        }
        let mut named = BTreeSet::new();
        for worker in tree.children(&assignments_dir).unwrap_or_default() {
            let data = tree
                .data(&format!("{assignments_dir}/{worker}"))
                .unwrap_or_default();
            // By the task named: one copy may carry the payload inline.
            let task = assignment_label(data);
            if !named.insert(task.clone()) {
                facts.assigned_twice.push((op.zxid, task));
            }
        }
    })
    .await;
    ground
}

impl Ground {
    /// The tasks whose assignment nodes were created, in creation order.
    pub fn assigned_tasks(&self) -> Vec<String> {
        self.assignments_created
            .iter()
            .map(|(_, task)| task.clone())
            .collect()
    }
}
