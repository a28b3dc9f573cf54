//! The master's requests in flight, answered in the order they were sent.
//!
//! One session's requests are applied by ZooKeeper in the order they are
//! sent, and their replies come back in that order. The master's core relies
//! on seeing replies in that same order (a listing taken before an
//! assignment was created must be read as such), so the shell must not let
//! task scheduling reorder them. Every request future is polled for the
//! first time in the order it was pushed (which is when a backend sends it),
//! and a finished reply is handed out only once every earlier one has been.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};

type Request<T> = Pin<Box<dyn Future<Output = T> + Send>>;

enum Entry<T> {
    Running(Request<T>),
    Done(T),
}

pub(crate) struct InFlight<T> {
    queue: VecDeque<Entry<T>>,
}

impl<T> InFlight<T> {
    pub(crate) fn new() -> InFlight<T> {
        InFlight {
            queue: VecDeque::new(),
        }
    }

    pub(crate) fn push(&mut self, request: impl Future<Output = T> + Send + 'static) {
        self.queue.push_back(Entry::Running(Box::pin(request)));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Drives every request, front to back, and yields the oldest reply
    /// once it is in. Pending forever while nothing is in flight; the owner
    /// polls again after pushing.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<T> {
        for entry in &mut self.queue {
            if let Entry::Running(request) = entry
                && let Poll::Ready(reply) = request.as_mut().poll(cx)
            {
                *entry = Entry::Done(reply);
            }
        }
        match self.queue.front() {
            Some(Entry::Done(_)) => match self.queue.pop_front() {
                Some(Entry::Done(reply)) => Poll::Ready(reply),
                _ => unreachable!("the front was checked to be done"),
            },
            _ => Poll::Pending,
        }
    }

    pub(crate) async fn next(&mut self) -> T {
        poll_fn(|cx| self.poll_next(cx)).await
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
}
