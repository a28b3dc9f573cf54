//! The watch discovery's inputs: the persistent recursive watch on
//! `tasks/` names each task that appears or goes, so no listing is needed
//! between reconnections (see [`crate::TaskDiscovery::Watch`]).

use zkdist_coord::{Directory, InvalidName, TaskId};

use super::{MasterState, Step};
use crate::decision::{MasterDecision, Trigger};

impl MasterState {
    /// `tasks/<name>` was created. A new task joins the queue at its place
    /// in task order and triggers a round; one the master knows already
    /// (from a listing that was read after the create) changes nothing.
    pub fn on_task_created(&mut self, name: &str) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        let Some(task) = self.parse_created_name(Directory::Tasks, name, TaskId::parse) else {
            return self.finish_step();
        };
        if self.processed_tasks.insert(task.clone()) {
            assert!(
                self.pending_tasks.insert(task.clone()),
                "{task} was queued before it was seen"
            );
            self.decide_queued(&task);
            self.trigger(Trigger::NewTask);
        }
        self.finish_step()
    }

    /// `tasks/<name>` was deleted (by a client). A queued task leaves the
    /// queue; a held one is forgotten once its worker lets it go; any other
    /// is forgotten now.
    pub fn on_task_deleted(&mut self, name: &str) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        // A foreign name was reported when it was created; gone, it is
        // forgotten (reported again should it come back).
        let Ok(task) = TaskId::parse(name) else {
            self.ignored_names
                .remove(&(Directory::Tasks, name.to_owned()));
            return self.finish_step();
        };
        if self.listing_loop(Directory::Tasks).in_flight() {
            self.deleted_during_listing.insert(task.clone());
        }
        self.requeued_after_release.remove(&task);
        if self.unqueue(&task) {
            assert!(self.processed_tasks.remove(&task));
            self.decide(MasterDecision::TaskVanished { task });
        } else if self.held_tasks().contains(&task) {
            assert!(
                self.processed_tasks.contains(&task),
                "{task} is held but was never seen"
            );
            self.deleted_while_held.insert(task);
        } else {
            self.processed_tasks.remove(&task);
        }
        self.finish_step()
    }

    /// The task or worker a created node's name stands for; a name that is
    /// neither is reported once.
    pub(super) fn parse_created_name<T>(
        &mut self,
        dir: Directory,
        name: &str,
        parse: fn(&str) -> Result<T, InvalidName>,
    ) -> Option<T> {
        match parse(name) {
            Ok(parsed) => Some(parsed),
            Err(error) => {
                if self.ignored_names.insert((dir, name.to_owned())) {
                    self.decide(MasterDecision::IgnoredNode {
                        dir,
                        name: name.to_owned(),
                        reason: error.reason,
                    });
                }
                None
            }
        }
    }
}
