//! The watch discovery's recursive watches and reconcile listings: the
//! watches on `tasks/` and `assignments/` report each change, and each
//! directory is listed only to start and after a reconnection (the server
//! does not replay what changed while the session was away). A reconcile
//! listing of `tasks/` that cannot be read is deferred, not fatal.
//!
//! `assignments/` holds one short name per worker and cannot outgrow the
//! client's reply limit: its reconcile is sent until it is read, like the
//! founding loops' listings. Bounded and deferred like the `tasks/` one,
//! it would fail with it, as each oversized `tasks/` reply costs the
//! connection both are on; a release missed while disconnected would then
//! keep its worker busy for as long as the task queue stays over the limit.

use zkdist_coord::Directory;

use super::{MasterState, Step};
use crate::decision::{Command, MasterDecision};
use crate::discovery::TaskDiscovery;

impl MasterState {
    /// The recursive watch on `dir` is in place. `resent`: the request had
    /// to be sent more than once, so the server may have set the watch
    /// after reading the first listing, and changes in between were
    /// neither listed nor reported: list again.
    pub fn on_recursive_watch_added(&mut self, dir: Directory, resent: bool) -> Step {
        self.assert_watch_discovery();
        assert!(
            self.is_watched_recursively(dir),
            "{dir} is not watched recursively"
        );
        self.assert_not_deposed();
        if resent && self.listing_loop(dir).on_watch_fired() {
            self.step.commands.push(Command::List(dir));
        }
        self.finish_step()
    }

    /// A reconcile listing of `tasks/` failed after its attempts ran out
    /// (the shell lists again after `retry_in_ms`, through
    /// [`MasterState::on_reconcile_due`]). Only once initialised: without
    /// its first listing the master cannot know the tasks that predate it.
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

    pub(super) fn assert_watch_discovery(&self) {
        assert!(
            self.started,
            "a watch-discovery input before the master started"
        );
        assert_eq!(
            self.discovery,
            TaskDiscovery::Watch,
            "a watch-discovery input reached a master that lists"
        );
    }
}
