//! Turns a panic inside a future into an error value, so that a handler's
//! bug fails its task instead of the worker.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

pub(crate) struct CatchUnwind<F> {
    inner: Pin<Box<F>>,
}

impl<F: Future> CatchUnwind<F> {
    pub(crate) fn new(inner: F) -> CatchUnwind<F> {
        CatchUnwind {
            inner: Box::pin(inner),
        }
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    /// The future's output, or the panic's message.
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.inner.as_mut();
        // The future is never polled again after it panicked (its caller
        // gets `Ready`), so no broken invariant of it can be observed.
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_its_message() {
        let ok = CatchUnwind::new(async { 7 }).await;
        assert_eq!(ok, Ok(7));
        let panicked = CatchUnwind::new(async {
            if true {
                panic!("bad payload {}", 3);
            }
            7
        })
        .await;
        assert_eq!(panicked, Err("bad payload 3".to_owned()));
    }
}
