//! Sending what the core asks for: one request (or a few, for a read
//! back) per command, whose reply comes back as a [`Reply`].

use std::sync::Arc;

use zkdist_coord::retry::{listing_until_known_within, until_known};
use zkdist_coord::{
    AddWatchMode, Coordinator, CreateMode, Directory, MAX_LISTING_ATTEMPTS, Op, Watch,
    encode_assignment,
};

use super::recovery::{reclaim, recover_assignment};
use super::settled::{SettledBy, task_status};
use super::{Master, Reply};
use crate::decision::Command;
use crate::discovery::TaskDiscovery;
use crate::fenced::FencedOps;
use crate::in_flight::InFlight;

/// How many times the watch discovery sends one listing of `tasks/` while
/// it fails as a lost connection. Few: the replies behind it wait
/// meanwhile, a reconcile that fails is deferred and tried again after
/// [`super::RECONCILE_RETRY_DELAY_MS`], and a first listing that fails
/// ends the session, which the role starts over.
const WATCH_LISTING_ATTEMPTS: u32 = 5;

impl<C: Coordinator> Master<C> {
    pub(super) fn send(&self, command: Command, in_flight: &mut InFlight<Reply>) {
        let zk = Arc::clone(&self.zk);
        match command {
            Command::List(dir) => {
                let path = self.layout.directory(dir);
                let watched_recursively = self.discovery.watches_recursively(dir);
                // The recursive watch reports every change: a one-shot
                // watch on top would only add an event per change.
                let watch = if watched_recursively {
                    Watch::No
                } else {
                    Watch::Yes
                };
                // A listing over the client's reply limit fails at once
                // (see `listing_until_known_within`). Other lost
                // connections are bounded for `tasks/`, the one directory
                // that can outgrow the limit, so that a connection that
                // keeps dropping does not stall the replies behind the
                // listing for ever. Not `assignments/`, even watched: see
                // `state/reconcile.rs`.
                let max_attempts = match (dir, self.discovery) {
                    (Directory::Tasks, TaskDiscovery::Watch) => WATCH_LISTING_ATTEMPTS,
                    (Directory::Tasks, TaskDiscovery::Listing) => MAX_LISTING_ATTEMPTS,
                    (Directory::Workers | Directory::Assignments, _) => u32::MAX,
                };
                in_flight.push(async move {
                    let mut attempts = 0_u32;
                    let result = listing_until_known_within(max_attempts, || {
                        attempts += 1;
                        zk.get_children(&path, watch)
                    })
                    .await;
                    Reply::Listed {
                        dir,
                        result,
                        resent: attempts > 1,
                    }
                });
            }
            Command::WatchRecursively(dir) => {
                let path = self.layout.directory(dir);
                in_flight.push(async move {
                    let mut attempts = 0_u32;
                    let result = until_known(|| {
                        attempts += 1;
                        zk.add_watch(&path, AddWatchMode::PersistentRecursive)
                    })
                    .await;
                    Reply::WatchedRecursively {
                        dir,
                        result,
                        resent: attempts > 1,
                    }
                });
            }
            Command::ReadAssignment(worker) => {
                let path = self.layout.assignment(&worker);
                in_flight.push(async move {
                    let result = until_known(|| zk.get_data(&path, Watch::No)).await;
                    Reply::AssignmentRead {
                        worker,
                        result: result.map(|(data, _)| data),
                    }
                });
            }
            Command::CheckTasksFinished(tasks) => {
                let checks: Vec<SettledBy> = tasks
                    .iter()
                    .map(|task| SettledBy::of(&self.layout, task))
                    .collect();
                in_flight.push(async move {
                    let result = SettledBy::each(&*zk, &checks).await;
                    Reply::TasksChecked { tasks, result }
                });
            }
            Command::CreateAssignment {
                worker,
                task,
                payload,
            } => {
                // The worker must still be registered when the create is
                // applied: a worker that deregistered since the master last
                // heard (one told to stop deletes its registration with its
                // last result) is given nothing, so its task need not be
                // taken back from it. A check without a version: only the
                // node's existence matters.
                let create = FencedOps::new(
                    &self.layout,
                    self.epoch,
                    [
                        Op::Check {
                            path: self.layout.worker(&worker),
                            version: None,
                        },
                        Op::Create {
                            path: self.layout.assignment(&worker),
                            data: encode_assignment(&task, payload.as_deref()),
                            mode: CreateMode::Persistent,
                        },
                    ],
                );
                in_flight.push(async move {
                    // Not retried: after a connection loss the create may
                    // have been applied, and a blind retry could not tell;
                    // the core asks for the outcome to be read back.
                    let reply = create.send(&*zk).await;
                    Reply::AssignmentCreated {
                        worker,
                        task,
                        reply,
                    }
                });
            }
            Command::ReadPayloads(tasks) => {
                let paths: Vec<String> = tasks.iter().map(|task| self.layout.task(task)).collect();
                in_flight.push(async move {
                    // One attempt: nothing waits on it, and a task whose
                    // payload is not read ahead is assigned by name. One
                    // task is read with a plain `get_data`, which the
                    // server answers a little faster than a multi-read.
                    let count = paths.len();
                    let (payloads, failure) = match <[String; 1]>::try_from(paths) {
                        Ok([path]) => match zk.get_data(&path, Watch::No).await {
                            Ok((data, _)) => (vec![Some(data)], None),
                            Err(error) => (vec![None], Some(error)),
                        },
                        Err(paths) => match zk.get_data_many(paths).await {
                            Ok(results) => (
                                results
                                    .into_iter()
                                    .map(|result| result.ok().map(|(data, _)| data))
                                    .collect(),
                                None,
                            ),
                            Err(error) => (vec![None; count], Some(error)),
                        },
                    };
                    assert_eq!(payloads.len(), tasks.len(), "one answer per task read");
                    Reply::PayloadsRead {
                        reads: tasks.into_iter().zip(payloads).collect(),
                        failure,
                    }
                });
            }
            Command::ReadRegistration(worker) => {
                let path = self.layout.worker(&worker);
                in_flight.push(async move {
                    // Sent again after a connection loss: a worker whose
                    // answer is lost would go without inline payloads for
                    // its whole session.
                    let result = until_known(|| zk.get_data(&path, Watch::No)).await;
                    Reply::RegistrationRead { worker, result }
                });
            }
            Command::RecoverAssignment { worker, task } => {
                let layout = self.layout.clone();
                in_flight.push(async move {
                    let result = recover_assignment(&*zk, &layout, &worker, &task).await;
                    Reply::AssignmentRecovered {
                        worker,
                        task,
                        result,
                    }
                });
            }
            Command::CheckReleasedTask { worker, task } => {
                let layout = self.layout.clone();
                in_flight.push(async move {
                    let result = task_status(&*zk, &layout, &task).await;
                    Reply::ReleasedTaskChecked {
                        worker,
                        task,
                        result,
                    }
                });
            }
            Command::Reclaim { worker, task } => {
                let layout = self.layout.clone();
                let epoch = self.epoch;
                in_flight.push(async move {
                    let result = reclaim(&*zk, &layout, epoch, &worker, &task).await;
                    Reply::Reclaimed {
                        worker,
                        task,
                        result,
                    }
                });
            }
        }
    }
}
