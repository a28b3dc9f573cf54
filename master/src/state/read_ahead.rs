//! Reading queued tasks' payloads ahead, so that an assignment can carry
//! its task's payload inline (see `zkdist_coord::assignment`) and the
//! worker runs it without reading the task node: one round trip less on
//! every task's path while a queue is waiting.
//!
//! The master reads the payloads of the first tasks of the queue, a few at a
//! time ([`MasterState::with_payload_read_ahead`]), so memory stays bounded
//! by that window times [`MAX_INLINE_PAYLOAD_BYTES`] whatever the backlog.
//! Nothing waits on a read: a task whose payload is not in (yet, or at all:
//! too large, a failed read) is assigned by name, as in the founding design,
//! and its worker reads the payload itself.
//!
//! The reads go out in batches, one batch at a time: every task that joined
//! the window while a batch was out is read by the next one, in one request
//! (`Command::ReadPayloads`). ZooKeeper's cost of a small read is the
//! request, not the node, so a stream's read-ahead costs the server a
//! fraction of a read a task instead of one; and a batch goes out as soon
//! as the one before is answered, so nothing waits longer than a round trip
//! behind another.

use std::ops::Bound;

use zkdist_coord::{MAX_INLINE_PAYLOAD_BYTES, TaskId, WorkerId};

use super::{MasterState, Step};
use crate::decision::Command;
use crate::discovery::PAYLOAD_READS_PER_BATCH;

/// Where the read of one queued task's payload stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ReadAhead {
    /// `Command::ReadPayloads` with the task is out.
    Reading,
    /// The payload, small enough to go inline.
    Ready(Vec<u8>),
    /// The task is assigned by name: its payload is too large, or the read
    /// failed. Never read again while it stays queued.
    ByName,
}

impl MasterState {
    /// Reads ahead the payloads of up to `tasks` queued tasks, for inline
    /// assignments. 0 (the default) reads none: every task is assigned by
    /// name, as in the founding design.
    pub fn with_payload_read_ahead(mut self, tasks: usize) -> MasterState {
        assert!(
            !self.started,
            "the read-ahead is chosen before the master starts"
        );
        self.read_ahead_tasks = tasks;
        self
    }

    /// Queued tasks whose payload is read ahead (read, or being read).
    pub fn payloads_read_ahead(&self) -> usize {
        self.read_ahead.len()
    }

    /// The shell's answer to `Command::ReadPayloads(tasks)`: each task's
    /// payload, or `None` when it could not be read (the task is gone, the
    /// connection dropped), in the order asked. Either way nothing else
    /// changes; a task assigned or gone meanwhile is no longer read ahead
    /// and its answer is dropped. The next batch goes out in this step.
    pub fn on_payloads_read(&mut self, reads: Vec<(TaskId, Option<Vec<u8>>)>) -> Step {
        self.assert_not_deposed();
        let batch = self
            .payload_batch
            .take()
            .expect("payloads are answered only while a batch of reads is out");
        assert!(
            reads.iter().map(|(task, _)| task).eq(batch.iter()),
            "the answer to the reads of {batch:?} names other tasks: {:?}",
            reads.iter().map(|(task, _)| task).collect::<Vec<_>>()
        );
        for (task, payload) in reads {
            if let Some(entry) = self.read_ahead.get_mut(&task) {
                assert_eq!(
                    *entry,
                    ReadAhead::Reading,
                    "{task} was read while not being read"
                );
                *entry = match payload {
                    Some(payload) if payload.len() <= MAX_INLINE_PAYLOAD_BYTES => {
                        ReadAhead::Ready(payload)
                    }
                    _ => ReadAhead::ByName,
                };
            }
        }
        self.finish_step()
    }

    /// Takes `task` off the queue, with whatever was read ahead for it.
    /// True if it was queued.
    pub(super) fn unqueue(&mut self, task: &TaskId) -> bool {
        self.read_ahead.remove(task);
        self.pending_tasks.remove(task)
    }

    /// The payload read ahead for `task`, which is being assigned to
    /// `worker` now, if that worker reads inline payloads. Either way the
    /// task leaves the read-ahead.
    pub(super) fn take_inline_payload(
        &mut self,
        task: &TaskId,
        worker: &WorkerId,
    ) -> Option<Vec<u8>> {
        assert!(
            !self.pending_tasks.contains(task),
            "{task} is given its payload while still queued"
        );
        let read = self.read_ahead.remove(task)?;
        if !self.inline_readers.contains(worker) {
            return None;
        }
        match read {
            ReadAhead::Ready(payload) => Some(payload),
            ReadAhead::Reading | ReadAhead::ByName => None,
        }
    }

    /// Sends one batch of reads for the queue's next tasks, as many as the
    /// window has room for, up to [`PAYLOAD_READS_PER_BATCH`], unless a
    /// batch is out already (its answer sends the next). The window follows the queue's head: it holds the
    /// oldest queued tasks, and each round that assigns some makes room for
    /// the next. A task that comes back to the queue behind the window's
    /// last is not read ahead (it is assigned by name): keeping the window
    /// exact would cost a scan of it on every step.
    pub(super) fn read_payloads_ahead(&mut self) {
        if self.read_ahead_tasks == 0
            || self.deposed
            || !self.is_initialised()
            || self.payload_batch.is_some()
        {
            return;
        }
        // Payloads nobody can be given inline are not worth reading: before
        // the first worker's registration is read, or while every worker
        // is older than the format (a rolling upgrade's start).
        if self.inline_readers.is_empty() {
            return;
        }
        let room = self.read_ahead_tasks.saturating_sub(self.read_ahead.len());
        if room == 0 {
            return;
        }
        let after = match self.read_ahead.last_key_value() {
            Some((last, _)) => Bound::Excluded(last),
            None => Bound::Unbounded,
        };
        let batch: Vec<TaskId> = self
            .pending_tasks
            .range((after, Bound::Unbounded))
            .take(room.min(PAYLOAD_READS_PER_BATCH))
            .cloned()
            .collect();
        if batch.is_empty() {
            return;
        }
        for task in &batch {
            self.read_ahead.insert(task.clone(), ReadAhead::Reading);
        }
        self.step
            .commands
            .push(Command::ReadPayloads(batch.clone()));
        self.payload_batch = Some(batch);
    }

    /// What must hold of the read-ahead after every step.
    pub(super) fn check_read_ahead(&self) {
        for worker in &self.inline_readers {
            assert!(
                self.workers.contains_key(worker),
                "{worker} is counted as reading inline payloads but is not registered"
            );
        }
        assert!(
            self.read_ahead_tasks > 0 || self.inline_readers.is_empty(),
            "workers' formats were read without a payload read-ahead"
        );
        assert!(
            self.read_ahead.len() <= self.read_ahead_tasks,
            "{} payloads read ahead, over the window of {}",
            self.read_ahead.len(),
            self.read_ahead_tasks
        );
        if let Some(batch) = &self.payload_batch {
            assert!(!batch.is_empty(), "a batch of no reads is out");
            assert!(
                batch.windows(2).all(|pair| pair[0] < pair[1]),
                "a batch out of queue order: {batch:?}"
            );
            assert!(
                batch.len() <= self.read_ahead_tasks.min(PAYLOAD_READS_PER_BATCH),
                "a batch of {} reads, over the window of {} or the batch limit",
                batch.len(),
                self.read_ahead_tasks
            );
        }
        for (task, entry) in &self.read_ahead {
            assert!(
                self.pending_tasks.contains(task),
                "{task}'s payload is read ahead but the task is not queued"
            );
            // A read is out only in the batch that is out: none is left
            // waiting for an answer that will never come.
            if *entry == ReadAhead::Reading {
                assert!(
                    self.payload_batch
                        .as_ref()
                        .is_some_and(|batch| batch.binary_search(task).is_ok()),
                    "{task} is being read outside the batch that is out"
                );
            }
            if let ReadAhead::Ready(payload) = entry {
                assert!(
                    payload.len() <= MAX_INLINE_PAYLOAD_BYTES,
                    "{task}'s payload of {} bytes is kept for an inline assignment",
                    payload.len()
                );
            }
        }
    }
}
