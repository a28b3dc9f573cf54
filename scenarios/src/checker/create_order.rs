//! The order in which one master session's assignment creates reach the
//! server. A master sends a round's creates in the order the round chose
//! them, and ZooKeeper applies one session's requests in the order they
//! were sent (the master's core relies on it: its replies come back in
//! that order). So a create that has not arrived when a create its rounds
//! chose later does never arrives: it was lost with a connection, or it
//! arrived and was refused. A create that arrives after all was overtaken,
//! which breaks FIFO order whatever faults came before.

use std::collections::{BTreeMap, VecDeque};

use zkdist_coord::{TaskId, WorkerId};

/// One assignment create: to whom, and which task.
type Create = (WorkerId, TaskId);

#[derive(Debug, Default)]
pub(super) struct CreateOrder {
    /// The creates the session's rounds chose and the server has not yet
    /// applied, oldest first.
    due: VecDeque<Create>,
    /// Creates a later one overtook before they arrived, each with the
    /// create that overtook it: none of them may arrive now.
    overtaken: BTreeMap<Create, Create>,
}

impl CreateOrder {
    /// A round chose `create`; it is sent after every create chosen before.
    pub(super) fn chosen(&mut self, create: Create) {
        self.due.push_back(create);
    }

    /// The server applied `create`. Returns the create that overtook it
    /// (chosen later, applied before it), if one did.
    pub(super) fn applied(&mut self, create: &Create) -> Result<(), Create> {
        let Some(index) = self.due.iter().position(|due| due == create) else {
            // Not chosen by this session (other rules judge who may
            // create an assignment), or overtaken.
            return match self.overtaken.remove(create) {
                Some(overtaking) => Err(overtaking),
                None => Ok(()),
            };
        };
        // Everything chosen before it and still due was refused or lost.
        for passed in self.due.drain(..index) {
            self.overtaken.insert(passed, create.clone());
        }
        let arrived = self.due.pop_front();
        assert_eq!(arrived.as_ref(), Some(create), "the create found due");
        Ok(())
    }

    /// The master learned the create's fate without the server applying it
    /// (refused, or in doubt after a connection loss): it is due no more.
    pub(super) fn settled(&mut self, create: &Create) {
        if let Some(index) = self.due.iter().position(|due| due == create) {
            self.due.remove(index);
        }
        self.overtaken.remove(create);
    }

    /// A new leadership: nothing it chose is in flight yet.
    pub(super) fn clear(&mut self) {
        self.due.clear();
        self.overtaken.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(worker: u32, task: i32) -> Create {
        (
            WorkerId::parse(&format!("worker-{worker:010}")).expect("a worker id"),
            TaskId::from_sequence(task),
        )
    }

    #[test]
    fn a_create_chosen_earlier_may_not_arrive_after_a_later_one() {
        let mut order = CreateOrder::default();
        order.chosen(create(1, 0));
        order.chosen(create(2, 1));
        order.chosen(create(3, 2));
        assert_eq!(order.applied(&create(2, 1)), Ok(()));
        assert_eq!(order.applied(&create(1, 0)), Err(create(2, 1)));
        assert_eq!(order.applied(&create(3, 2)), Ok(()));
        // In order, nothing is overtaken; a create no round chose is not
        // this rule's to judge.
        let mut order = CreateOrder::default();
        order.chosen(create(1, 0));
        order.chosen(create(2, 1));
        assert_eq!(order.applied(&create(1, 0)), Ok(()));
        assert_eq!(order.applied(&create(2, 1)), Ok(()));
        assert_eq!(order.applied(&create(4, 9)), Ok(()));
    }

    #[test]
    fn a_create_settled_without_arriving_is_no_longer_due() {
        let mut order = CreateOrder::default();
        order.chosen(create(1, 0));
        order.chosen(create(2, 1));
        // Refused: the server applied nothing, and the master said so.
        order.settled(&create(1, 0));
        // The same task chosen again, for the same worker, arrives later.
        order.chosen(create(1, 0));
        assert_eq!(order.applied(&create(2, 1)), Ok(()));
        assert_eq!(order.applied(&create(1, 0)), Ok(()));
        // Overtaken, then settled (lost with the connection): chosen
        // again, it may arrive.
        order.chosen(create(3, 2));
        order.chosen(create(4, 3));
        assert_eq!(order.applied(&create(4, 3)), Ok(()));
        order.settled(&create(3, 2));
        order.chosen(create(3, 2));
        assert_eq!(order.applied(&create(3, 2)), Ok(()));
        // A new leadership forgets what the old one had in flight.
        order.chosen(create(5, 4));
        order.chosen(create(6, 5));
        order.clear();
        assert_eq!(order.applied(&create(6, 5)), Ok(()));
        assert_eq!(order.applied(&create(5, 4)), Ok(()));
    }
}
