//! The watch discovery's assignment events: the persistent recursive watch
//! on `assignments/` reports each node the master creates and each node a
//! worker deletes on finishing, so a worker that became free is known
//! without listing the directory (a round trip per task).
//!
//! Events are handled before the reply to any read taken after their
//! change, so a delete the master concluded from a listing or a read never
//! comes as an event afterwards: each event names a node the master has
//! not yet seen go. But an event may overtake the replies to requests sent
//! before it, the create of the very node it reports included.

use zkdist_coord::{Directory, WorkerId};

use super::{MasterState, Step};
use crate::decision::{MasterDecision, Trigger};

impl MasterState {
    /// `assignments/<name>` was created. Only this master creates
    /// assignments, and only for a worker it gave a task (registered, or
    /// departed with that task's create or reclaim under way): then the
    /// event is that create's and changes nothing. Any other node is
    /// foreign: reported, and a registered worker without a task takes no
    /// work until it is gone (a create would only be refused).
    pub fn on_assignment_node_created(&mut self, name: &str) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        let Some(worker) = self.parse_created_name(Directory::Assignments, name, WorkerId::parse)
        else {
            return self.finish_step();
        };
        let own = matches!(self.workers.get(&worker), Some(Some(_)))
            || self.departed.contains_key(&worker);
        if !own {
            self.decide(MasterDecision::ForeignAssignment {
                worker: worker.clone(),
            });
            // A start-up assignment not read yet is settled by its read.
            let idle = matches!(self.workers.get(&worker), Some(None))
                && !self.blocked.contains(&worker)
                && !self.is_unread_assignment(&worker);
            if idle {
                self.block(worker);
            }
        }
        self.finish_step()
    }

    /// `assignments/<name>` was deleted: by its worker on finishing (a
    /// completion writes the result and deletes the assignment in one
    /// transaction), or by this master reclaiming a departed worker's. It
    /// concludes what an `assignments/` listing without the node concludes:
    /// - a confirmed assignment: the worker finished its task and is idle,
    ///   and a round runs at once;
    /// - an assignment whose create (or its read-back) is unanswered, or a
    ///   start-up assignment not read yet: the event overtook that reply,
    ///   and the delete is applied when it comes;
    /// - a blocked worker's: the node in its way is gone;
    /// - a departed worker's: its reclaim reads the tree after deleting,
    ///   which settles the task; nothing to do here.
    ///
    /// A registered worker without a task holds no node of this master's
    /// (every delete before its last assignment was handled already), nor
    /// does an unknown worker: nothing to do.
    pub fn on_assignment_node_deleted(&mut self, name: &str) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        // A foreign name was reported when it was created; gone, it is
        // forgotten (reported again should it come back).
        let Ok(worker) = WorkerId::parse(name) else {
            self.ignored_names
                .remove(&(Directory::Assignments, name.to_owned()));
            return self.finish_step();
        };
        if self.is_unread_assignment(&worker) {
            self.deleted_before_reply.insert(worker);
            return self.finish_step();
        }
        match self.workers.get(&worker) {
            Some(Some(assignment)) if assignment.confirmed => self.finish_assignment(worker),
            Some(Some(_)) => {
                self.deleted_before_reply.insert(worker);
            }
            Some(None) if self.blocked.remove(&worker) => {
                self.decide(MasterDecision::WorkerUnblocked { worker });
                self.trigger(Trigger::WorkerIdle);
            }
            Some(None) | None => {}
        }
        self.finish_step()
    }

    /// Registered `worker`'s confirmed assignment node is gone: it finished
    /// its task and is idle, which triggers a round.
    pub(super) fn finish_assignment(&mut self, worker: WorkerId) {
        let slot = self
            .workers
            .get_mut(&worker)
            .expect("only a registered worker finishes");
        let assignment = slot.take().expect("a finishing worker holds a task");
        assert!(
            assignment.confirmed,
            "{worker} finished {} before its create was confirmed",
            assignment.task
        );
        self.decide(MasterDecision::WorkerIdle {
            worker,
            finished_task: assignment.task,
        });
        self.trigger(Trigger::WorkerIdle);
    }

    /// Whether `worker`'s assignment was found by the first `assignments/`
    /// listing and is not read yet.
    pub(super) fn is_unread_assignment(&self, worker: &WorkerId) -> bool {
        self.initialisation
            .as_ref()
            .is_some_and(|init| init.unread_assignments.contains(worker))
    }
}
