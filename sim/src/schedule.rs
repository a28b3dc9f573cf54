//! The simulation's agenda: everything that will happen at a future
//! instant, in a total order fixed by the seed.

use std::collections::BTreeMap;

use zkdist_coord::SessionId;

/// Orders the agenda: by due time, then by a seeded tie-break (so that who
/// goes first among equals depends on the seed alone), then by insertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key {
    pub due_us: u64,
    tiebreak: u64,
    seq: u64,
}

/// What happens when a key comes due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// The request at the head of the session's outbound queue reaches the
    /// server.
    Arrival(SessionId),
    /// The message at the head of the session's inbound queue reaches the
    /// client.
    Delivery(SessionId),
    /// The session's cut link comes back.
    Heal(SessionId),
    /// The server gives up on a session whose link has been down for the
    /// session timeout.
    SessionTimeout(SessionId),
}

#[derive(Debug, Default)]
pub(crate) struct Schedule {
    items: BTreeMap<Key, Item>,
    next_seq: u64,
}

impl Schedule {
    pub(crate) fn insert(&mut self, due_us: u64, tiebreak: u64, item: Item) -> Key {
        let key = Key {
            due_us,
            tiebreak,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        let previous = self.items.insert(key, item);
        assert!(previous.is_none(), "agenda keys are unique");
        key
    }

    /// Takes an item off the agenda; it must be on it.
    pub(crate) fn cancel(&mut self, key: Key) {
        let removed = self.items.remove(&key);
        assert!(removed.is_some(), "cancelled an item not on the agenda");
    }

    pub(crate) fn pop_first(&mut self) -> Option<(Key, Item)> {
        self.items.pop_first()
    }

    pub(crate) fn next_due_us(&self) -> Option<u64> {
        self.items.first_key_value().map(|(key, _)| key.due_us)
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_due_then_tiebreak_then_insertion() {
        let mut schedule = Schedule::default();
        let s = SessionId(1);
        schedule.insert(10, 5, Item::Arrival(s));
        schedule.insert(10, 1, Item::Delivery(s));
        let cancelled = schedule.insert(3, 9, Item::Heal(s));
        schedule.insert(10, 1, Item::SessionTimeout(s));
        schedule.cancel(cancelled);
        assert_eq!(schedule.next_due_us(), Some(10));
        let order: Vec<Item> =
            std::iter::from_fn(|| schedule.pop_first().map(|(_, i)| i)).collect();
        assert_eq!(
            order,
            [Item::Delivery(s), Item::SessionTimeout(s), Item::Arrival(s)]
        );
    }
}
