//! Assignment rounds: pending tasks, oldest first, to idle workers.

use super::{Assignment, MasterState};
use crate::decision::{Command, MasterDecision, Trigger};

impl MasterState {
    /// Runs a round now, or remembers why one must run once initialised.
    pub(super) fn trigger(&mut self, trigger: Trigger) {
        match &mut self.initialisation {
            Some(init) => {
                init.triggers.insert(trigger);
            }
            None => self.run_round(vec![trigger]),
        }
    }

    /// Assigns pending tasks, oldest first, to idle workers until one of
    /// the two runs out.
    pub(super) fn run_round(&mut self, triggers: Vec<Trigger>) {
        assert!(self.is_initialised(), "a round before initialisation");
        assert!(!triggers.is_empty(), "a round runs only on a trigger");
        self.rounds_run += 1;
        let mut assigned = Vec::new();
        for (worker, slot) in &mut self.workers {
            if slot.is_some() || self.blocked.contains(worker) {
                continue;
            }
            let Some(task) = self.pending_tasks.pop_first() else {
                break;
            };
            *slot = Some(Assignment {
                task: task.clone(),
                confirmed: false,
                result_heard: false,
            });
            assigned.push((worker.clone(), task));
        }
        for (worker, task) in &assigned {
            let payload = self.take_inline_payload(task, worker);
            self.step.commands.push(Command::CreateAssignment {
                worker: worker.clone(),
                task: task.clone(),
                payload,
            });
        }
        assert!(
            self.pending_tasks.is_empty() || self.idle_workers().next().is_none(),
            "a round stops only when tasks or idle workers run out"
        );
        self.decide(MasterDecision::Round {
            round: self.rounds_run,
            triggers,
            assigned,
        });
    }
}
