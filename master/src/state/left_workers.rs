//! The ids of the workers that left during a master's term, which are never
//! given work again (see `MasterState::left_workers`).
//!
//! A master runs for months, and workers come and go: one short name kept
//! per departure would grow without bound (some 35 MB a year at one
//! departure a minute). zkdist's own workers are named `worker-NNNNNNNNNN`
//! from one sequence counter, and the ids of the workers that left are
//! mostly runs of consecutive numbers: kept as ranges, they cost memory
//! in proportion to the gaps among them, not to the departures. A gap is
//! a worker still registered, or a number this master never saw leave:
//! taken by a worker that died before it registered, or that joined and
//! left between two listings, or by an id create sent again after a lost
//! reply. Other names (foreign registrations, and the negative numbers
//! ZooKeeper writes once its 32-bit counter wraps) are kept one by one.

use std::collections::{BTreeMap, BTreeSet};

use zkdist_coord::WorkerId;

/// How zkdist's workers' ids begin; the sequence number follows.
const WORKER_ID_PREFIX: &str = "worker-";
/// Digits of a sequence number in a node's name (ZooKeeper's `%010d`).
const SEQUENCE_DIGITS: usize = 10;

/// A set of worker ids that only grows; membership is exact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LeftWorkers {
    /// The numbers of the canonical `worker-NNNNNNNNNN` ids, as disjoint
    /// inclusive ranges, start to end, none adjacent to another.
    numbered: BTreeMap<u64, u64>,
    /// Every other id, as it is.
    named: BTreeSet<WorkerId>,
}

/// The number of a canonical `worker-NNNNNNNNNN` id (exactly ten digits,
/// as ZooKeeper writes a non-negative sequence number), `None` for any
/// other name: `worker-1` and `worker-0000000001` are two ids.
fn canonical_number(worker: &WorkerId) -> Option<u64> {
    let digits = worker.as_str().strip_prefix(WORKER_ID_PREFIX)?;
    (digits.len() == SEQUENCE_DIGITS && digits.bytes().all(|byte| byte.is_ascii_digit()))
        .then(|| digits.parse().expect("ten ASCII digits fit a u64"))
}

impl LeftWorkers {
    /// Adds `worker`; false if it was already there.
    pub(crate) fn insert(&mut self, worker: &WorkerId) -> bool {
        let Some(number) = canonical_number(worker) else {
            return self.named.insert(worker.clone());
        };
        if self.contains_number(number) {
            return false;
        }
        // Joins the range ending just before it and the one starting just
        // after it, if either exists.
        let before = self
            .numbered
            .range(..number)
            .next_back()
            .filter(|(_, end)| **end + 1 == number)
            .map(|(start, _)| *start);
        let after_end = number
            .checked_add(1)
            .and_then(|next| self.numbered.remove(&next));
        let end = after_end.unwrap_or(number);
        match before {
            Some(start) => self.numbered.insert(start, end),
            None => self.numbered.insert(number, end),
        };
        if cfg!(debug_assertions) {
            self.check_ranges();
        }
        true
    }

    pub(crate) fn contains(&self, worker: &WorkerId) -> bool {
        match canonical_number(worker) {
            Some(number) => self.contains_number(number),
            None => self.named.contains(worker),
        }
    }

    fn contains_number(&self, number: u64) -> bool {
        self.numbered
            .range(..=number)
            .next_back()
            .is_some_and(|(_, end)| number <= *end)
    }

    /// How many entries the set keeps (ranges and names): what its memory
    /// grows with.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.numbered.len() + self.named.len()
    }

    /// The ranges are ordered, disjoint, and never adjacent (adjacent ones
    /// are one range).
    fn check_ranges(&self) {
        let mut previous_end: Option<u64> = None;
        for (&start, &end) in &self.numbered {
            assert!(start <= end, "range {start}..={end} is empty");
            if let Some(previous_end) = previous_end {
                assert!(
                    previous_end + 1 < start,
                    "range {start}..={end} touches the one ending at {previous_end}"
                );
            }
            previous_end = Some(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(name: &str) -> WorkerId {
        WorkerId::parse(name).expect("a valid worker id")
    }

    fn numbered(n: u64) -> WorkerId {
        worker(&format!("worker-{n:010}"))
    }

    #[test]
    fn membership_is_exact_for_every_kind_of_name() {
        let mut left = LeftWorkers::default();
        assert!(left.insert(&numbered(7)));
        assert!(!left.insert(&numbered(7)), "already there");
        assert!(left.insert(&worker("worker-8")));
        assert!(left.insert(&worker("gpu-box")));
        assert!(left.contains(&numbered(7)));
        assert!(left.contains(&worker("worker-8")));
        assert!(left.contains(&worker("gpu-box")));
        // Near misses are other ids.
        // Past the 32-bit counter's wrap, ZooKeeper writes a sign: names.
        for wrapped in ["worker--000000001", "worker--2147483648"] {
            assert!(left.insert(&worker(wrapped)));
            assert!(left.contains(&worker(wrapped)), "{wrapped}");
        }
        assert!(!left.contains(&worker("worker--000000002")));
        for other in [
            "worker-7",
            "worker-0000000008",
            "worker-00000000007",
            "worker-000000007",
            "Worker-0000000007",
            "gpu-box-2",
        ] {
            assert!(!left.contains(&worker(other)), "{other}");
        }
        assert!(!left.contains(&numbered(6)) && !left.contains(&numbered(9)));
    }

    #[test]
    fn neighbouring_numbers_make_one_range_whatever_their_order() {
        let mut left = LeftWorkers::default();
        for n in [5, 3, 9, 4, 8, 7] {
            left.insert(&numbered(n));
        }
        // 3..=5 and 7..=9.
        assert_eq!(left.entries(), 2);
        left.insert(&numbered(6));
        assert_eq!(left.entries(), 1);
        for n in 3..=9 {
            assert!(left.contains(&numbered(n)), "{n}");
        }
        assert!(!left.contains(&numbered(2)) && !left.contains(&numbered(10)));
        assert!(left.insert(&numbered(0)) && left.insert(&numbered(u64::from(u32::MAX))));
        assert!(left.contains(&numbered(0)) && !left.contains(&numbered(1)));
        assert_eq!(left.entries(), 3);
    }

    /// A long term: 100,000 workers, 16 registered at any time, and each
    /// join followed by the departure of one of the registered, not always
    /// the oldest (so departures come out of order). The set keeps a
    /// handful of ranges, where a set of names would keep 100,000.
    #[test]
    fn a_long_term_of_departures_keeps_a_few_ranges() {
        const WORKERS: u64 = 100_000;
        const REGISTERED: usize = 16;
        let mut left = LeftWorkers::default();
        let mut registered: Vec<u64> = Vec::new();
        let mut most_entries = 0;
        for joined in 0..WORKERS {
            registered.push(joined);
            if registered.len() > REGISTERED {
                let index = usize::try_from(joined * 7919).unwrap() % registered.len();
                assert!(left.insert(&numbered(registered.remove(index))));
            }
            most_entries = most_entries.max(left.entries());
        }
        for n in 0..WORKERS {
            assert_eq!(left.contains(&numbered(n)), !registered.contains(&n), "{n}");
        }
        assert!(most_entries <= REGISTERED + 1, "{most_entries} entries");
    }
}
