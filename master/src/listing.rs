//! One watch loop of the founding design: list a directory's children with
//! a watch, and list again when the watch fires.
//!
//! At most one listing per directory is in flight, so listings are fed to
//! the core in the order ZooKeeper took them and a newer view is never
//! overwritten by an older one. A watch that fires while a listing is in
//! flight marks the loop stale, and the loop lists again as soon as the
//! reply is in: the change that fired the watch may have come after the
//! server read the children.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ListingLoop {
    in_flight: bool,
    stale: bool,
    listed_once: bool,
}

impl ListingLoop {
    /// Whether a listing is in flight.
    pub(crate) fn in_flight(&self) -> bool {
        self.in_flight
    }

    /// Whether a first listing has been fed to the core.
    pub(crate) fn listed_once(&self) -> bool {
        self.listed_once
    }

    /// Starts a listing; returns false when one is already in flight.
    pub(crate) fn start(&mut self) -> bool {
        if self.in_flight {
            return false;
        }
        self.in_flight = true;
        self.stale = false;
        true
    }

    /// The directory changed. Returns true when a listing must be sent now.
    pub(crate) fn on_watch_fired(&mut self) -> bool {
        if self.in_flight {
            self.stale = true;
            false
        } else {
            self.start()
        }
    }

    /// The listing's reply is in. Returns true when the loop must list again
    /// at once. Also returns whether this was the first listing.
    pub(crate) fn on_listed(&mut self) -> (bool, bool) {
        assert!(
            self.in_flight,
            "a listing reply arrived with none in flight"
        );
        let first = !self.listed_once;
        self.listed_once = true;
        self.in_flight = false;
        let again = self.stale;
        if again {
            assert!(self.start());
        }
        (again, first)
    }

    /// The listing in flight failed and will not be fed to the core: the
    /// loop is idle until it is started again.
    pub(crate) fn on_failed(&mut self) {
        assert!(self.in_flight, "a listing failed with none in flight");
        self.in_flight = false;
        self.stale = false;
    }

    pub(crate) fn check(&self) {
        assert!(
            !self.stale || self.in_flight,
            "a loop is stale only while a listing is in flight"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_during_a_listing_lists_again_after_it() {
        let mut watch_loop = ListingLoop::default();
        assert!(watch_loop.start());
        assert!(!watch_loop.start(), "one listing in flight at a time");
        assert!(!watch_loop.on_watch_fired());
        watch_loop.check();
        assert_eq!(watch_loop.on_listed(), (true, true));
        assert_eq!(watch_loop.on_listed(), (false, false));
        assert!(watch_loop.on_watch_fired());
        watch_loop.check();
    }

    #[test]
    #[should_panic(expected = "none in flight")]
    fn a_reply_without_a_listing_is_a_bug() {
        ListingLoop::default().on_listed();
    }
}
