//! Named race scenarios. Each is a seeded script that drives the
//! simulator's delivery control (hold and release, pause and step, waits
//! on the tree) so that one specific interleaving happens, asserts from the
//! trace that it did, and checks what must hold (the checker runs
//! throughout). The tests snapshot each scenario's trace.
//!
//! The failure scenarios (a master killed mid-round, partitioned, expired;
//! a worker killed mid-task, expired, or completing as a zombie; and a
//! connection loss on each kind of write, applied and not applied) run
//! with two master candidates where a standby matters, and require that
//! no rule breaks and every task finishes exactly once.

mod burst;
mod connection_loss;
mod existing_state;
mod failures;
mod finish_while_tasks_arrive;
mod lost_wakeup;
mod register_during_round;
mod script;
mod stale_listing;
pub mod stalled_server;
mod watch_reconcile;
mod worker_expires;
mod worker_stop;

use crate::harness::RunReport;
use connection_loss::Write;
use finish_while_tasks_arrive::Order;

/// A named scenario and the seed it runs with.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    pub seed: u64,
    /// What the scenario shows, in one line.
    pub about: &'static str,
    run: fn(u64) -> RunReport,
}

impl Scenario {
    /// Runs the scenario (on a fresh simulation runtime) and reports.
    ///
    /// # Panics
    /// If the interleaving did not happen or an outcome differs from what
    /// the scenario asserts.
    pub fn run(&self) -> RunReport {
        self.run_on_seed(self.seed)
    }

    /// Runs the scenario's script on another seed: how a seed is found for
    /// a scenario whose outcome depends on the simulator's draws (such as
    /// whether a write cut off in flight was applied).
    ///
    /// # Panics
    /// As [`Scenario::run`].
    pub fn run_on_seed(&self, seed: u64) -> RunReport {
        (self.run)(seed)
    }
}

pub const ALL: [Scenario; 29] = [
    Scenario {
        name: "finish_then_task_arrive_while_master_held",
        seed: 101,
        about: "a worker finishes, then a task arrives, both while the master hears nothing",
        run: |seed| finish_while_tasks_arrive::run_order(seed, Order::FinishFirst),
    },
    Scenario {
        name: "task_arrives_then_finish_while_master_held",
        seed: 102,
        about: "a task arrives, then a worker finishes, both while the master hears nothing",
        run: |seed| finish_while_tasks_arrive::run_order(seed, Order::TaskFirst),
    },
    Scenario {
        name: "worker_registers_during_round",
        seed: 103,
        about: "a new worker registers while an assignment round is in progress",
        run: register_during_round::run_scenario,
    },
    Scenario {
        name: "master_starts_on_existing_state",
        seed: 104,
        about: "workers, tasks, a result and an assignment exist when the master starts",
        run: existing_state::run_scenario,
    },
    Scenario {
        name: "burst_with_fewer_workers",
        seed: 105,
        about: "eight tasks at once for two workers: FIFO kept",
        run: burst::run_scenario,
    },
    Scenario {
        name: "stale_tasks_listing",
        seed: 106,
        about: "the tasks listing's reply is in flight when the next task is created",
        run: stale_listing::run_scenario,
    },
    Scenario {
        name: "watch_reconcile_after_disconnection",
        seed: 115,
        about: "watch discovery: tasks submitted while the master is cut off are found by its reconcile listing",
        run: watch_reconcile::run_scenario,
    },
    Scenario {
        name: "assignment_recreated_before_rearm",
        seed: 107,
        about: "the next assignment is made before the worker hears its completion was applied; the persistent watch announces it",
        run: lost_wakeup::run_scenario,
    },
    Scenario {
        name: "worker_expires_holding_assignment",
        seed: 109,
        about: "a worker's session expires mid-task: the task is re-queued and runs elsewhere",
        run: worker_expires::run_scenario,
    },
    Scenario {
        name: "master_killed_mid_round",
        seed: 108,
        about: "the master dies between two assignment creates; the standby takes over",
        run: failures::master_killed_mid_round,
    },
    Scenario {
        name: "restarted_master_races_the_standby",
        seed: 108,
        about: "the master dies mid-round and restarts at once; at its old session's expiry it races the standby, and one leads",
        run: failures::restarted_master_races_the_standby,
    },
    Scenario {
        name: "master_partitioned_standby_takes_over",
        seed: 111,
        about: "the master is cut off past its timeout; the standby leads; the old one stands by",
        run: failures::master_partitioned_standby_takes_over,
    },
    Scenario {
        name: "master_session_expires",
        seed: 112,
        about: "the master's session expires; the standby leads; the old one re-joins",
        run: failures::master_session_expires,
    },
    Scenario {
        name: "worker_killed_mid_task",
        seed: 113,
        about: "a worker's process dies mid-task; its task is reclaimed and runs elsewhere",
        run: failures::worker_killed_mid_task,
    },
    Scenario {
        name: "zombie_worker_completes_late",
        seed: 114,
        about: "a worker completes after its session expired; it writes nothing",
        run: failures::zombie_worker_completes_late,
    },
    Scenario {
        name: "worker_cut_off_mid_task",
        seed: 114,
        about: "a worker cut off mid-task stops it before its session can expire; the task then runs elsewhere",
        run: failures::worker_cut_off_mid_task,
    },
    Scenario {
        name: "worker_partitioned_mid_task",
        seed: 114,
        about: "a worker silently partitioned mid-task notices late and still stops it before its session expires",
        run: failures::worker_partitioned_mid_task,
    },
    Scenario {
        name: "connection_loss_on_submit_applied",
        seed: 3,
        about: "the client's task create is applied but its reply lost: no second task",
        run: |seed| connection_loss::run_write(seed, Write::Submit, true),
    },
    Scenario {
        name: "connection_loss_on_submit_not_applied",
        seed: 1,
        about: "the client's task create is lost on the way: it is created once",
        run: |seed| connection_loss::run_write(seed, Write::Submit, false),
    },
    Scenario {
        name: "connection_loss_on_assignment_create_applied",
        seed: 1,
        about: "the master's assignment create is applied but its reply lost",
        run: |seed| connection_loss::run_write(seed, Write::AssignmentCreate, true),
    },
    Scenario {
        name: "connection_loss_on_assignment_create_not_applied",
        seed: 0,
        about: "the master's assignment create is lost on the way",
        run: |seed| connection_loss::run_write(seed, Write::AssignmentCreate, false),
    },
    Scenario {
        name: "connection_loss_on_completion_applied",
        seed: 0,
        about: "the worker's completion is applied but its reply lost",
        run: |seed| connection_loss::run_write(seed, Write::Completion, true),
    },
    Scenario {
        name: "connection_loss_on_completion_not_applied",
        seed: 1,
        about: "the worker's completion is lost on the way",
        run: |seed| connection_loss::run_write(seed, Write::Completion, false),
    },
    Scenario {
        name: "connection_loss_on_reclaim_applied",
        seed: 8,
        about: "the master's reclaim of a dead worker's assignment is applied but its reply lost",
        run: |seed| connection_loss::run_write(seed, Write::Reclaim, true),
    },
    Scenario {
        name: "connection_loss_on_reclaim_not_applied",
        seed: 0,
        about: "the master's reclaim of a dead worker's assignment is lost on the way",
        run: |seed| connection_loss::run_write(seed, Write::Reclaim, false),
    },
    Scenario {
        name: "lost_assignment_create_read_back_through_a_stalled_server",
        seed: 1,
        about: "the master's assignment create is applied, its reply lost, and the master reconnects through a server that has not applied it",
        run: |seed| {
            stalled_server::run_write(seed, stalled_server::Write::AssignmentCreate, |_| {})
        },
    },
    Scenario {
        name: "lost_completion_read_back_through_a_stalled_server",
        seed: 1,
        about: "the worker's completion is applied, its reply lost, and the worker reconnects through a server that has not applied it",
        run: |seed| stalled_server::run_write(seed, stalled_server::Write::Completion, |_| {}),
    },
    Scenario {
        name: "lost_claim_read_back_through_a_stalled_server",
        seed: 1,
        about: "the master candidate's claim is applied, its reply lost, and the candidate reconnects through a server that has not applied it",
        run: |seed| stalled_server::run_write(seed, stalled_server::Write::Claim, |_| {}),
    },
    Scenario {
        name: "worker_stops_mid_task",
        seed: 116,
        about: "a worker told to stop mid-task writes its result and deregisters in one transaction; the master gives it nothing more",
        run: worker_stop::worker_stops_mid_task,
    },
];

/// The scenario called `name`.
pub fn named(name: &str) -> Option<&'static Scenario> {
    ALL.iter().find(|scenario| scenario.name == name)
}
