//! The registration a worker leaves under `workers/`, read once as the
//! worker joins: what the worker reads (inline payloads or task names), and
//! whether it is a live worker's at all.
//!
//! A live worker registers with an ephemeral node, which its session owns
//! and takes with it when it ends. A persistent node under `workers/` is no
//! worker's: an operator's stray `create`, or the directories of another
//! deployment laid out there (a root nested under this one's `workers/`
//! through a chroot, or before this deployment existed, which the layout's
//! own check cannot see). Taken for an idle worker, such a node would be
//! given this deployment's oldest task, never run it, and never leave. So
//! the master drops a registration that is not ephemeral as it drops a
//! worker that left: the name is never given work again, and a task given
//! to it before its registration was read is reclaimed and queued again at
//! its place.
//!
//! Registrations are read where payloads are read ahead, which is the
//! watch discovery's way. The founding design's listing loop, kept for
//! comparison, reads none, as before: there a stray registration is only
//! named by `status`.

use zkdist_coord::{Directory, WorkerId, reads_inline_payloads};

use super::{MasterState, Step};
use crate::decision::{Command, MasterDecision};

/// What reading a worker's registration found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistrationRead {
    /// An ephemeral node, a live worker's, holding `data`.
    Live { data: Vec<u8> },
    /// A node no session owns: no live worker's registration.
    NotEphemeral,
    /// Nothing could be read: the worker left (its departure comes with
    /// the next listing), or the node cannot be read.
    Unreadable,
}

impl MasterState {
    /// Asks for the registration of `worker`, which just joined, when
    /// payloads are read ahead (the watch discovery). Until it is read,
    /// the worker is taken for a live one that reads task names, which
    /// every worker does.
    pub(super) fn read_registration(&mut self, worker: &WorkerId) {
        assert!(
            self.workers.contains_key(worker),
            "{worker}'s registration read before it joined"
        );
        assert!(
            !self.inline_readers.contains(worker),
            "{worker} joined twice"
        );
        if self.read_ahead_tasks > 0 && !self.deposed {
            self.step
                .commands
                .push(Command::ReadRegistration(worker.clone()));
        }
    }

    /// The shell's answer to `Command::ReadRegistration(worker)`. A worker
    /// that left meanwhile is not given work again, so the answer is
    /// dropped; a registration that is not ephemeral is dropped as a
    /// worker that left (see the module docs).
    pub fn on_registration_read(&mut self, worker: WorkerId, read: RegistrationRead) -> Step {
        self.assert_not_deposed();
        if self.workers.contains_key(&worker) {
            match read {
                RegistrationRead::Live { data } => {
                    if reads_inline_payloads(&data) {
                        self.inline_readers.insert(worker);
                    }
                }
                RegistrationRead::NotEphemeral => self.drop_stray_registration(worker),
                RegistrationRead::Unreadable => {}
            }
        }
        self.finish_step()
    }

    fn drop_stray_registration(&mut self, worker: WorkerId) {
        let name = worker.as_str().to_owned();
        self.depart(worker, |_, held_task| {
            let held = match held_task {
                Some(task) => {
                    format!("; {task}, given to it before this was known, goes back to the queue")
                }
                None => String::new(),
            };
            MasterDecision::IgnoredNode {
                dir: Directory::Workers,
                name: name.clone(),
                reason: format!(
                    "not an ephemeral node, so no live worker's registration (a stray create, \
                     or another deployment's tree laid out here): never given work{held}; \
                     delete it"
                ),
            }
        });
        // The listings that still show the node say nothing more of it.
        let newly_ignored = self.ignored_names.insert((Directory::Workers, name));
        assert!(newly_ignored, "a registration dropped twice");
    }
}
