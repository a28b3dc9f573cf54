//! Repeating a request whose outcome is unknown.
//!
//! After `ConnectionLoss` (or `OperationTimeout`) a request may or may not
//! have been applied. A read can simply be sent again; a write can be sent
//! again only once the caller has checked that repeating it is harmless (a
//! version-checked delete, a create whose `NodeExists` is understood). The
//! loop ends when the outcome is known: success, a definite error, or the
//! session's end (`SessionExpired`), which ZooKeeper reports once the client
//! reconnects and learns it.

use std::future::Future;
use std::time::Duration;

use crate::error::ZkResult;
use crate::validate::reply_over_limit;

/// The pause before the first repeat; it doubles on each further one.
pub const FIRST_RETRY_PAUSE_MS: u64 = 10;
/// The longest pause between two repeats.
pub const MAX_RETRY_PAUSE_MS: u64 = 1_000;

/// Sends `request` until its outcome is known, pausing between attempts
/// (`tokio::time`, so a simulation's clock drives it), and returns that
/// outcome. `request` must be safe to repeat.
pub async fn until_known<T, F, Fut>(request: F) -> ZkResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ZkResult<T>>,
{
    until_known_within(u32::MAX, request).await
}

/// [`until_known`], but gives up after `max_attempts` attempts whose
/// outcome was unknown and returns the last of them (an error for which
/// [`crate::ZkError::is_outcome_unknown`] holds).
///
/// For a request that may never succeed while it fails as a connection
/// loss: a listing larger than the client accepts (`jute.maxbuffer`) is
/// refused by the client (a Java client drops the frame as corrupt; zkdist's
/// sessions refuse the reply alone) and reported as `ConnectionLoss`,
/// every time.
pub async fn until_known_within<T, F, Fut>(max_attempts: u32, mut request: F) -> ZkResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ZkResult<T>>,
{
    assert!(max_attempts > 0, "a request is sent at least once");
    let mut pause_ms = FIRST_RETRY_PAUSE_MS;
    let mut attempts = 0;
    loop {
        attempts += 1;
        match request().await {
            Err(error) if error.is_outcome_unknown() && attempts < max_attempts => {
                tracing::debug!(target: "zkdist::retry", %error, pause_ms, attempts, "outcome unknown, repeating");
                tokio::time::sleep(Duration::from_millis(pause_ms)).await;
                pause_ms = (pause_ms * 2).min(MAX_RETRY_PAUSE_MS);
            }
            known_or_given_up => return known_or_given_up,
        }
    }
}

/// [`until_known_within`] for a listing: a reply over the client's limit
/// ([`crate::validate::reply_over_limit`]) is returned at once, not sent
/// again. It fails as a lost connection, but the same listing is refused
/// every time, so repeating it would only ask the server to serialise the
/// whole directory again, up to `max_attempts` times (for ever, for a
/// caller that repeats until the session ends), and put off the error
/// that says what to raise.
pub async fn listing_until_known_within<T, F, Fut>(max_attempts: u32, mut list: F) -> ZkResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ZkResult<T>>,
{
    let listed = until_known_within(max_attempts, || {
        let listing = list();
        async move {
            match listing.await {
                Err(error) if reply_over_limit(&error).is_some() => Ok(Err(error)),
                Err(error) => Err(error),
                Ok(listed) => Ok(Ok(listed)),
            }
        }
    })
    .await;
    listed.and_then(|over_limit_or_listed| over_limit_or_listed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ZkError;

    #[tokio::test]
    async fn repeats_only_while_the_outcome_is_unknown() {
        let mut attempts = 0;
        let outcome: ZkResult<u32> = until_known(|| {
            attempts += 1;
            let reply = match attempts {
                1 => Err(ZkError::ConnectionLoss {
                    reason: "cut".into(),
                }),
                2 => Err(ZkError::OperationTimeout {
                    reason: "slow".into(),
                }),
                _ => Err(ZkError::NoNode { path: "/a".into() }),
            };
            async move { reply }
        })
        .await;
        assert_eq!(outcome, Err(ZkError::NoNode { path: "/a".into() }));
        assert_eq!(attempts, 3);

        let mut attempts = 0;
        let expired: ZkResult<()> = until_known(|| {
            attempts += 1;
            async { Err(ZkError::SessionExpired) }
        })
        .await;
        assert_eq!(expired, Err(ZkError::SessionExpired));
        assert_eq!(attempts, 1, "a session's end is final");
    }

    #[tokio::test]
    async fn a_bounded_repeat_gives_up_with_the_last_unknown_outcome() {
        let mut attempts = 0;
        let outcome: ZkResult<()> = until_known_within(3, || {
            attempts += 1;
            let reply = Err(ZkError::ConnectionLoss {
                reason: format!("attempt {attempts}"),
            });
            async move { reply }
        })
        .await;
        assert_eq!(
            outcome,
            Err(ZkError::ConnectionLoss {
                reason: "attempt 3".into()
            })
        );
        assert_eq!(attempts, 3);

        let mut attempts = 0;
        let known: ZkResult<u32> = until_known_within(3, || {
            attempts += 1;
            let reply = if attempts < 3 {
                Err(ZkError::OperationTimeout {
                    reason: "slow".into(),
                })
            } else {
                Ok(7)
            };
            async move { reply }
        })
        .await;
        assert_eq!(known, Ok(7), "the last allowed attempt still counts");
    }

    #[tokio::test]
    async fn a_listing_over_the_reply_limit_is_not_sent_again() {
        let names = vec!["task-0000000000000001-0000000001".to_owned(); 100];
        let over_limit = crate::validate::check_children_reply("/zkdist/tasks", &names, 1_000)
            .expect_err("a reply over the limit is refused");
        let mut attempts = 0;
        let outcome: ZkResult<()> = listing_until_known_within(u32::MAX, || {
            attempts += 1;
            let reply = Err(over_limit.clone());
            async move { reply }
        })
        .await;
        assert_eq!(outcome, Err(over_limit));
        assert_eq!(attempts, 1, "the same listing is refused every time");

        let mut attempts = 0;
        let listed: ZkResult<u32> = listing_until_known_within(u32::MAX, || {
            attempts += 1;
            let reply = if attempts < 3 {
                Err(ZkError::ConnectionLoss {
                    reason: "cut".into(),
                })
            } else {
                Ok(7)
            };
            async move { reply }
        })
        .await;
        assert_eq!(listed, Ok(7), "any other lost connection is sent again");
        assert_eq!(attempts, 3);
    }
}
