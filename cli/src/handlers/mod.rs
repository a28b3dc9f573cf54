//! The task kinds the `zkdist` binary's workers can run, chosen by the
//! payload's `kind` field.

pub mod exec;
pub mod pi;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use zkdist_coord::{CodecError, TaskPayload};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HandlerError {
    #[error("payload is not a JSON object with a string \"kind\" field: {0}")]
    NoKind(String),
    #[error("unknown task kind {0:?}; known kinds: exec, pi")]
    UnknownKind(String),
    #[error("invalid {kind} payload: {reason}")]
    InvalidPayload { kind: &'static str, reason: String },
    #[error("exec tasks are refused: this worker was not started with --allow-exec")]
    ExecNotAllowed,
    #[error("{0}")]
    Failed(String),
}

/// Reads the `kind` field of a payload, as the library's client does: the
/// payload must be a JSON object (an array whose first element happens to
/// be a kind's name is not one).
pub fn kind_of(payload: &[u8]) -> Result<String, HandlerError> {
    match TaskPayload::decode(payload) {
        Ok(payload) => Ok(payload.kind),
        // Said as an unknown kind, which names the known ones.
        Err(CodecError::EmptyKind) => Ok(String::new()),
        Err(CodecError::InvalidPayload { reason }) => Err(HandlerError::NoKind(reason)),
        Err(error) => Err(HandlerError::NoKind(error.to_string())),
    }
}

/// Checks a payload the way a worker would, without running it: used at
/// submit so that a malformed task is refused before it is queued.
pub fn validate(payload: &[u8]) -> Result<(), HandlerError> {
    match kind_of(payload)?.as_str() {
        "pi" => pi::parse(payload).map(drop),
        "exec" => exec::parse(payload).map(drop),
        other => Err(HandlerError::UnknownKind(other.to_owned())),
    }
}

/// Raised when dropped: tells work on a blocking thread that nobody waits
/// for it any more.
#[derive(Default)]
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs any built-in kind.
#[derive(Debug, Clone)]
pub struct BuiltinHandler {
    pub allow_exec: bool,
    /// The size a result must fit in.
    pub result_limit_bytes: usize,
}

impl BuiltinHandler {
    pub async fn run(&self, payload: &[u8]) -> Result<Vec<u8>, HandlerError> {
        let encoded = match kind_of(payload)?.as_str() {
            "pi" => {
                let task = pi::parse(payload)?;
                // Sampling is CPU-bound: keep it off the async threads. A
                // blocking thread cannot be cancelled, so dropping this
                // future (the task abandoned) raises the flag it looks at.
                let abandoned = AbandonOnDrop::default();
                let flag = Arc::clone(&abandoned.0);
                let result = tokio::task::spawn_blocking(move || pi::estimate(&task, &flag))
                    .await
                    .map_err(|e| HandlerError::Failed(format!("pi task panicked: {e}")))?
                    .expect("the flag is raised only once this future is dropped");
                serde_json::to_vec(&result)
            }
            "exec" if !self.allow_exec => return Err(HandlerError::ExecNotAllowed),
            "exec" => serde_json::to_vec(
                &exec::run(&exec::parse(payload)?, self.result_limit_bytes).await?,
            ),
            other => return Err(HandlerError::UnknownKind(other.to_owned())),
        };
        Ok(encoded.expect("results serialise"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(allow_exec: bool) -> BuiltinHandler {
        BuiltinHandler {
            allow_exec,
            result_limit_bytes: zkdist_coord::MAX_DATA_BYTES,
        }
    }

    #[tokio::test]
    async fn dispatches_on_kind_and_names_unknown_kinds() {
        let out = handler(false)
            .run(br#"{"kind":"pi","samples":1000}"#)
            .await
            .unwrap();
        let result: pi::PiResult = serde_json::from_slice(&out).unwrap();
        assert_eq!(result.samples, 1000);
        let err = handler(false).run(br#"{"kind":"sort"}"#).await.unwrap_err();
        assert_eq!(err, HandlerError::UnknownKind("sort".into()));
        assert!(err.to_string().contains("\"sort\""));
        assert!(matches!(
            handler(false).run(b"not json").await,
            Err(HandlerError::NoKind(_))
        ));
    }

    /// Only an object has a kind: an array is refused as not an object,
    /// whatever it holds, before any kind's own reader sees it.
    #[test]
    fn a_payload_that_is_not_an_object_is_refused_as_such() {
        for payload in [
            r#"["pi"]"#,
            r#"["exec"]"#,
            "[1,2]",
            r#"["pi",1000]"#,
            "\"pi\"",
            "7",
        ] {
            let error = validate(payload.as_bytes()).unwrap_err();
            assert!(
                matches!(error, HandlerError::NoKind(_)),
                "{payload}: {error}"
            );
            let said = error.to_string();
            assert!(said.contains("expected a JSON object"), "{payload}: {said}");
        }
        assert_eq!(
            validate(br#"{"kind":""}"#).unwrap_err(),
            HandlerError::UnknownKind(String::new())
        );
        assert!(matches!(
            validate(br#"{"kind":"pi","kind":"exec"}"#),
            Err(HandlerError::NoKind(_))
        ));
    }

    /// A `pi` task abandoned mid-run (its future dropped, as a worker does
    /// when its session ends) stops its blocking thread: the runtime's
    /// shutdown, which waits for blocking threads, then returns at once
    /// instead of after the task's minutes of sampling.
    #[test]
    fn an_abandoned_pi_task_stops_its_blocking_thread() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let cut_short = runtime.block_on(async {
            let handler = handler(false);
            let run = handler.run(br#"{"kind":"pi","samples":10000000000}"#);
            tokio::time::timeout(std::time::Duration::from_millis(100), run).await
        });
        assert!(cut_short.is_err(), "ten billion samples take minutes");
        let (dropped, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(runtime);
            let _ = dropped.send(());
        });
        // A hang guard, not a time limit: without the flag this waits for
        // the whole estimate.
        done.recv_timeout(std::time::Duration::from_secs(60))
            .expect("the abandoned estimate stopped, so the runtime shut down");
    }

    #[tokio::test]
    async fn exec_is_refused_unless_allowed() {
        let payload = br#"{"kind":"exec","argv":["true"]}"#;
        assert_eq!(
            handler(false).run(payload).await,
            Err(HandlerError::ExecNotAllowed)
        );
        assert!(handler(true).run(payload).await.is_ok());
    }
}
