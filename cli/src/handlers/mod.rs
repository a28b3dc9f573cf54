//! The task kinds the `zkdist` binary's workers can run, chosen by the
//! payload's `kind` field.

pub mod exec;
pub mod pi;

use serde::Deserialize;

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

#[derive(Deserialize)]
struct KindOnly {
    kind: String,
}

/// Reads the `kind` field of a payload.
pub fn kind_of(payload: &[u8]) -> Result<String, HandlerError> {
    serde_json::from_slice::<KindOnly>(payload)
        .map(|k| k.kind)
        .map_err(|e| HandlerError::NoKind(e.to_string()))
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
                // Sampling is CPU-bound: keep it off the async threads.
                let result = tokio::task::spawn_blocking(move || pi::estimate(&task))
                    .await
                    .map_err(|e| HandlerError::Failed(format!("pi task panicked: {e}")))?;
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
