//! The watch discovery's inputs: the persistent recursive watch on
//! `tasks/` names each task that appears or goes, so no listing is needed
//! between reconnections (see [`crate::TaskDiscovery::Watch`]).

use zkdist_coord::{Directory, TaskId};

use super::{MasterState, Step};
use crate::decision::{Command, MasterDecision, Trigger};
use crate::discovery::TaskDiscovery;

impl MasterState {
    /// The recursive watch on `tasks/` is in place. `resent`: the request
    /// had to be sent more than once, so the server may have set the watch
    /// after reading the first listing, and tasks created in between were
    /// neither listed nor reported: list again.
    pub fn on_tasks_watch_added(&mut self, resent: bool) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        if resent && self.listing_loop(Directory::Tasks).on_watch_fired() {
            self.step.commands.push(Command::List(Directory::Tasks));
        }
        self.finish_step()
    }

    /// `tasks/<name>` was created. A new task joins the queue at its place
    /// in task order and triggers a round; one the master knows already
    /// (from a listing that was read after the create) changes nothing.
    pub fn on_task_created(&mut self, name: &str) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        let Some(task) = self.parse_task_name(name) else {
            return self.finish_step();
        };
        if self.processed_tasks.insert(task.clone()) {
            assert!(
                self.pending_tasks.insert(task.clone()),
                "{task} was queued before it was seen"
            );
            self.decide(MasterDecision::TaskQueued { task });
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
        // A foreign name was reported when it was created.
        let Ok(task) = TaskId::parse(name) else {
            return self.finish_step();
        };
        if self.listing_loop(Directory::Tasks).in_flight() {
            self.deleted_during_listing.insert(task.clone());
        }
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

    /// A reconcile listing of `tasks/` failed after its attempts ran out
    /// (the shell lists again after `retry_in_ms`, through
    /// [`MasterState::on_reconcile_due`]). Only once initialised: without its
    /// first listing the master cannot know the tasks that predate it.
    pub fn on_tasks_listing_failed(&mut self, error: String, retry_in_ms: u64) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        assert!(
            self.is_initialised(),
            "the first tasks listing failing is the shell's error to report"
        );
        self.listing_loop(Directory::Tasks).on_failed();
        self.deleted_during_listing.clear();
        self.reconcile_deferred = true;
        self.decide(MasterDecision::ReconcileDeferred { error, retry_in_ms });
        self.finish_step()
    }

    /// The pause after a failed reconcile is over: list `tasks/` again.
    pub fn on_reconcile_due(&mut self) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        assert!(
            self.reconcile_deferred,
            "a reconcile due that was not deferred"
        );
        self.reconcile_deferred = false;
        self.on_watch_fired(Directory::Tasks)
    }

    fn parse_task_name(&mut self, name: &str) -> Option<TaskId> {
        match TaskId::parse(name) {
            Ok(task) => Some(task),
            Err(error) => {
                if self
                    .ignored_names
                    .insert((Directory::Tasks, name.to_owned()))
                {
                    self.decide(MasterDecision::IgnoredNode {
                        dir: Directory::Tasks,
                        name: name.to_owned(),
                        reason: error.reason,
                    });
                }
                None
            }
        }
    }

    fn assert_watch_discovery(&self) {
        assert!(self.started, "a tasks event before the master started");
        assert_eq!(
            self.discovery,
            TaskDiscovery::Watch,
            "a tasks event reached a master that lists tasks"
        );
    }
}
