//! Where an actor's decisions go besides its log: a test's checker, a
//! benchmark's counters.

use std::fmt;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

/// Called with every decision of an actor (master or worker), in order, at
/// the moment it is made, on the actor's own task. It must return at once:
/// record, count or forward, never wait; and a panic in it is a panic of the
/// actor.
///
/// Being called in place, rather than sent to a task that reads a channel,
/// it sees each decision before the actor's next request goes out, and
/// saves a task switch per decision (some 2% of the explorer's
/// instructions). A channel still serves (`From<UnboundedSender<D>>`) where
/// the decisions are to be read later.
pub struct Observer<D>(Arc<dyn Fn(D) + Send + Sync>);

impl<D> Observer<D> {
    pub fn new(observe: impl Fn(D) + Send + Sync + 'static) -> Observer<D> {
        Observer(Arc::new(observe))
    }

    pub fn observe(&self, decision: D) {
        (self.0)(decision);
    }
}

impl<D> Clone for Observer<D> {
    fn clone(&self) -> Observer<D> {
        Observer(Arc::clone(&self.0))
    }
}

impl<D> fmt::Debug for Observer<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Observer")
    }
}

/// Sends each decision on the channel; once its receiver is gone, the
/// decisions are dropped and the actor goes on.
impl<D: Send + 'static> From<UnboundedSender<D>> for Observer<D> {
    fn from(sender: UnboundedSender<D>) -> Observer<D> {
        Observer::new(move |decision| {
            let _ = sender.send(decision);
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn a_closure_sees_every_decision_in_order_and_a_channel_receives_them() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorder = Arc::clone(&seen);
        let observer = Observer::new(move |n: u32| recorder.lock().unwrap().push(n));
        let copy = observer.clone();
        observer.observe(1);
        copy.observe(2);
        assert_eq!(*seen.lock().unwrap(), [1, 2]);

        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        let observer = Observer::from(sender);
        observer.observe("a");
        observer.observe("b");
        assert_eq!(receiver.try_recv(), Ok("a"));
        assert_eq!(receiver.try_recv(), Ok("b"));
        drop(receiver);
        // A receiver gone is no error of the actor's.
        observer.observe("c");
    }
}
