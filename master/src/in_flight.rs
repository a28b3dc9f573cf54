//! The master's requests in flight, answered in the order they were sent.
//!
//! One session's requests are applied by ZooKeeper in the order they are
//! sent, and their replies come back in that order. The master's core relies
//! on seeing replies in that same order (a listing taken before an
//! assignment was created must be read as such), so the shell must not let
//! task scheduling reorder them. Every request future is polled for the
//! first time in the order it was pushed (which is when a backend sends it),
//! and a finished reply is handed out only once every earlier one has been.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;

use futures::StreamExt;
use futures::stream::FuturesOrdered;

type Request<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// `FuturesOrdered` polls a request only when it was woken (not every
/// request on every wake, which made a start-up with one check per task
/// quadratic), polls new requests first in the order they were pushed, and
/// yields replies in that order.
pub(crate) struct InFlight<T> {
    queue: FuturesOrdered<Request<T>>,
}

impl<T> InFlight<T> {
    pub(crate) fn new() -> InFlight<T> {
        InFlight {
            queue: FuturesOrdered::new(),
        }
    }

    pub(crate) fn push(&mut self, request: impl Future<Output = T> + Send + 'static) {
        self.queue.push_back(Box::pin(request));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// The oldest reply, once it is in. Pending forever while nothing is in
    /// flight; the owner polls again after pushing.
    pub(crate) async fn next(&mut self) -> T {
        poll_fn(|cx| match self.queue.poll_next_unpin(cx) {
            Poll::Ready(Some(reply)) => Poll::Ready(reply),
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    #[tokio::test(start_paused = true)]
    async fn replies_come_out_in_request_order() {
        let mut in_flight = InFlight::new();
        let (first_tx, first_rx) = oneshot::channel::<u32>();
        let (second_tx, second_rx) = oneshot::channel::<u32>();
        in_flight.push(async move { first_rx.await.unwrap() });
        in_flight.push(async move { second_rx.await.unwrap() });
        second_tx.send(2).unwrap();
        // The second reply is in, the first is not: nothing comes out.
        let early = tokio::time::timeout(std::time::Duration::from_millis(10), in_flight.next());
        assert!(early.await.is_err());
        first_tx.send(1).unwrap();
        assert_eq!(in_flight.next().await, 1);
        assert_eq!(in_flight.next().await, 2);
        assert_eq!(in_flight.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_are_first_polled_in_push_order() {
        let polled = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut in_flight = InFlight::new();
        for n in 0..5_u32 {
            let polled = std::sync::Arc::clone(&polled);
            in_flight.push(async move {
                polled.lock().unwrap().push(n);
                n
            });
        }
        for n in 0..5 {
            assert_eq!(in_flight.next().await, n);
        }
        assert_eq!(*polled.lock().unwrap(), [0, 1, 2, 3, 4]);
    }
}
