//! The simulation's agenda: everything that will happen at a future
//! instant, in a total order fixed by the seed.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
    /// The lagging server the session talks to has applied everything it
    /// was behind on, and sends the watch events it owes.
    CatchUp(SessionId),
    /// The client of a silently partitioned link has heard nothing for its
    /// loss timeout and gives up on the connection.
    Notice(SessionId),
}

/// A binary heap of keys (each unique, so the order is total and the same
/// as a sorted map's), with cancelled keys left in place and skipped: the
/// agenda is small and busy, and a heap does without a sorted map's node
/// allocations. The heap's top is never a cancelled key.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    heap: BinaryHeap<Reverse<(Key, Item)>>,
    /// `seq` of the keys cancelled but still in the heap.
    cancelled: BTreeSet<u64>,
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
        self.heap.push(Reverse((key, item)));
        key
    }

    /// Takes an item off the agenda; it must be on it.
    pub(crate) fn cancel(&mut self, key: Key) {
        assert!(key.seq < self.next_seq, "cancelled an item never scheduled");
        let fresh = self.cancelled.insert(key.seq);
        assert!(fresh, "cancelled an item twice");
        debug_assert!(
            self.heap.iter().any(|Reverse((k, _))| *k == key),
            "cancelled an item not on the agenda"
        );
        self.drop_cancelled_top();
    }

    pub(crate) fn pop_first(&mut self) -> Option<(Key, Item)> {
        let Reverse(first) = self.heap.pop()?;
        self.drop_cancelled_top();
        Some(first)
    }

    pub(crate) fn next_due_us(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((key, _))| key.due_us)
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len() - self.cancelled.len()
    }

    /// Pops cancelled keys off the top until a live one is there.
    fn drop_cancelled_top(&mut self) {
        while let Some(Reverse((key, _))) = self.heap.peek() {
            if !self.cancelled.remove(&key.seq) {
                return;
            }
            self.heap.pop();
        }
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
        assert_eq!(schedule.len(), 0);
    }

    /// Cancelled items never come out, wherever they sit, and `len` and
    /// `next_due_us` count only live ones.
    #[test]
    fn cancelled_items_are_skipped_and_not_counted() {
        let mut schedule = Schedule::default();
        let s = SessionId(1);
        let keys: Vec<Key> = (0..10u64)
            .map(|n| schedule.insert(100 - n * 10, n % 3, Item::Arrival(SessionId(n as i64))))
            .collect();
        // The first due (key 9, due 10), one in the middle, the last due.
        for n in [9, 4, 0] {
            schedule.cancel(keys[n]);
        }
        assert_eq!(schedule.len(), 7);
        assert_eq!(schedule.next_due_us(), Some(20));
        let later = schedule.insert(15, 0, Item::Heal(s));
        assert_eq!(schedule.next_due_us(), Some(15));
        schedule.cancel(later);
        assert_eq!(schedule.next_due_us(), Some(20));
        let dues: Vec<u64> =
            std::iter::from_fn(|| schedule.pop_first().map(|(key, _)| key.due_us)).collect();
        assert_eq!(dues, [20, 30, 40, 50, 70, 80, 90]);
        assert_eq!((schedule.len(), schedule.next_due_us()), (0, None));
    }
}
