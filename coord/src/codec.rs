//! What the task and result nodes hold.
//!
//! A task's payload is a JSON object with a string `kind` (which handler runs
//! it) and any other fields the kind needs: `{"kind": "pi", "samples": 1000}`.
//!
//! A result is binary, because a handler's output is arbitrary bytes: a
//! 4-byte header (`ZKR` and the format version), one status byte (`+` for
//! success, `-` for failure), then the output bytes or the UTF-8 failure
//! message. A failed task is therefore never mistaken for one whose output
//! happens to look like an error.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::validate::{MAX_DATA_BYTES, MAX_REQUEST_BYTES};

pub use serde_json::Value as JsonValue;

/// Why bytes could not be read as a payload or a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error(
        "task payload is not a JSON object with a string \"kind\" field \
         ({{\"kind\": \"...\", ...}}): {reason}"
    )]
    InvalidPayload { reason: String },
    #[error("task payload's \"kind\" is empty")]
    EmptyKind,
    #[error(
        "task payload has a field named \"kind\" besides its kind {kind:?}; the kind is set by TaskPayload::new"
    )]
    KindInFields { kind: String },
    #[error("not a zkdist result: {reason}")]
    InvalidResult { reason: String },
}

/// A task payload: its kind and the kind's fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskPayload {
    pub kind: String,
    #[serde(flatten)]
    pub fields: serde_json::Map<String, JsonValue>,
}

/// Reads the object in one pass: `kind` into its field, every other key
/// into `fields`. A derived `#[serde(flatten)]` reads the whole object
/// into an intermediate tree first and then reads that again, and every
/// payload is read at least once: the client checks each one it submits,
/// and handlers decode theirs. What it accepts and refuses is the derived
/// reader's (a test holds the two side by side).
impl<'de> Deserialize<'de> for TaskPayload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<TaskPayload, D::Error> {
        deserializer.deserialize_map(PayloadVisitor)
    }
}

struct PayloadVisitor;

impl<'de> Visitor<'de> for PayloadVisitor {
    type Value = TaskPayload;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TaskPayload, A::Error> {
        let mut kind: Option<String> = None;
        let mut fields = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "kind" {
                if kind.is_some() {
                    return Err(de::Error::duplicate_field("kind"));
                }
                kind = Some(map.next_value()?);
            } else {
                // A key given twice keeps its last value, as a JSON map does.
                let value: JsonValue = map.next_value()?;
                fields.insert(key, value);
            }
        }
        let kind = kind.ok_or_else(|| de::Error::missing_field("kind"))?;
        Ok(TaskPayload { kind, fields })
    }
}

impl TaskPayload {
    pub fn new(kind: impl Into<String>) -> TaskPayload {
        TaskPayload {
            kind: kind.into(),
            fields: serde_json::Map::new(),
        }
    }

    /// Adds a field (builder style).
    ///
    /// # Panics
    ///
    /// If `key` is `"kind"`: the kind is set by [`TaskPayload::new`], and a
    /// second `kind` would make JSON with the key twice. That is a mistake
    /// in the calling code, caught in every build.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<JsonValue>) -> TaskPayload {
        let key = key.into();
        assert_ne!(
            key, "kind",
            "TaskPayload::with(\"kind\", ..): the kind is set by TaskPayload::new"
        );
        self.fields.insert(key, value.into());
        self
    }

    /// The JSON bytes a task node holds. Fails on an empty kind, and on a
    /// field named `kind` put in `fields` directly.
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        if self.kind.is_empty() {
            return Err(CodecError::EmptyKind);
        }
        if self.fields.contains_key("kind") {
            return Err(CodecError::KindInFields {
                kind: self.kind.clone(),
            });
        }
        Ok(serde_json::to_vec(self).expect("a map of JSON values always serialises"))
    }

    pub fn decode(bytes: &[u8]) -> Result<TaskPayload, CodecError> {
        // Some editors save one; the JSON reader would only say that it
        // expected a value at column 1.
        if bytes.starts_with(UTF8_BOM) {
            return Err(CodecError::InvalidPayload {
                reason: "it starts with a UTF-8 byte order mark (EF BB BF), which JSON does not \
                         allow: save it without one"
                    .to_owned(),
            });
        }
        let payload: TaskPayload =
            serde_json::from_slice(bytes).map_err(|error| CodecError::InvalidPayload {
                reason: error.to_string(),
            })?;
        if payload.kind.is_empty() {
            return Err(CodecError::EmptyKind);
        }
        Ok(payload)
    }
}

/// The bytes a UTF-8 byte order mark takes.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

const RESULT_MAGIC: &[u8; 3] = b"ZKR";
const RESULT_VERSION: u8 = 1;
const STATUS_SUCCESS: u8 = b'+';
const STATUS_FAILURE: u8 = b'-';

/// The bytes an encoded result spends before its body.
pub const RESULT_HEADER_BYTES: usize = RESULT_MAGIC.len() + 2;

/// What a worker's completion request spends besides the result: the
/// multi's headers (some 80 bytes), the result's path and the assignment's
/// path, which under the longest root (`layout::MAX_ROOT_BYTES`) take some
/// 600 bytes together, and, for a worker told to stop, the deletion of its
/// registration (some 300 more: under the longest root the largest result
/// still leaves a few dozen bytes, as the worker's completion tests
/// check).
pub const COMPLETION_RESERVE_BYTES: usize = 1024;

/// The largest handler output that fits in a result node and in the request
/// that writes it (the worker's completion, which also releases the
/// assignment). A handler that caps its output should cap it to this; a
/// failure message is cut to it.
pub const MAX_RESULT_OUTPUT_BYTES: usize =
    MAX_REQUEST_BYTES - COMPLETION_RESERVE_BYTES - RESULT_HEADER_BYTES;

const _: () = assert!(
    RESULT_HEADER_BYTES + MAX_RESULT_OUTPUT_BYTES <= MAX_DATA_BYTES,
    "the largest result fits in a node"
);

/// The outcome of a task, as written to `tasks/<task>/result`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskResult {
    /// The handler's output.
    Success { output: Vec<u8> },
    /// Why the task failed (bad payload, handler error, output too large...).
    Failure { message: String },
}

impl TaskResult {
    /// The result for a handler's outcome, made to fit in a node: an output
    /// over [`MAX_RESULT_OUTPUT_BYTES`] becomes a failure that says so, and
    /// a failure message is cut to fit.
    pub fn from_outcome(outcome: Result<Vec<u8>, String>) -> TaskResult {
        match outcome {
            Ok(output) if output.len() <= MAX_RESULT_OUTPUT_BYTES => TaskResult::Success { output },
            Ok(output) => TaskResult::failure(format!(
                "the task's output is {} bytes, over the {MAX_RESULT_OUTPUT_BYTES}-byte result limit",
                output.len()
            )),
            Err(message) => TaskResult::failure(message),
        }
    }

    /// A failure, its message cut (at a character boundary) to fit.
    pub fn failure(message: impl Into<String>) -> TaskResult {
        let mut message = message.into();
        if message.len() > MAX_RESULT_OUTPUT_BYTES {
            let mut end = MAX_RESULT_OUTPUT_BYTES;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        TaskResult::Failure { message }
    }

    pub fn is_success(&self) -> bool {
        matches!(self, TaskResult::Success { .. })
    }

    pub fn encode(&self) -> Vec<u8> {
        let (status, body) = match self {
            TaskResult::Success { output } => (STATUS_SUCCESS, output.as_slice()),
            TaskResult::Failure { message } => (STATUS_FAILURE, message.as_bytes()),
        };
        let mut bytes = Vec::with_capacity(RESULT_HEADER_BYTES + body.len());
        bytes.extend_from_slice(RESULT_MAGIC);
        bytes.push(RESULT_VERSION);
        bytes.push(status);
        bytes.extend_from_slice(body);
        bytes
    }

    pub fn decode(bytes: &[u8]) -> Result<TaskResult, CodecError> {
        let invalid = |reason: String| CodecError::InvalidResult { reason };
        if bytes.len() < RESULT_HEADER_BYTES || &bytes[..RESULT_MAGIC.len()] != RESULT_MAGIC {
            return Err(invalid(format!(
                "{} bytes that do not start with the result header",
                bytes.len()
            )));
        }
        let version = bytes[RESULT_MAGIC.len()];
        if version != RESULT_VERSION {
            return Err(invalid(format!(
                "result format version {version}, this build reads version {RESULT_VERSION}"
            )));
        }
        let body = &bytes[RESULT_HEADER_BYTES..];
        match bytes[RESULT_MAGIC.len() + 1] {
            STATUS_SUCCESS => Ok(TaskResult::Success {
                output: body.to_vec(),
            }),
            STATUS_FAILURE => match std::str::from_utf8(body) {
                Ok(message) => Ok(TaskResult::Failure {
                    message: message.to_owned(),
                }),
                Err(error) => Err(invalid(format!("failure message is not UTF-8: {error}"))),
            },
            other => Err(invalid(format!("unknown status byte 0x{other:02x}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_round_trips_with_its_fields() {
        let payload = TaskPayload::new("pi").with("samples", 1000);
        let bytes = payload.encode().unwrap();
        assert_eq!(bytes, br#"{"kind":"pi","samples":1000}"#);
        assert_eq!(TaskPayload::decode(&bytes).unwrap(), payload);
    }

    #[test]
    #[should_panic(expected = "the kind is set by TaskPayload::new")]
    fn a_second_kind_through_with_is_refused() {
        let _ = TaskPayload::new("pi").with("kind", "other");
    }

    #[test]
    fn a_second_kind_put_in_fields_is_refused_by_encode() {
        let mut payload = TaskPayload::new("pi");
        payload.fields.insert("kind".into(), "other".into());
        assert_eq!(
            payload.encode(),
            Err(CodecError::KindInFields { kind: "pi".into() })
        );
    }

    #[test]
    fn bad_payloads_say_what_is_wrong() {
        for bytes in [
            &b"not json"[..],
            b"[1,2]",
            br#"{"samples":3}"#,
            br#"{"kind":7}"#,
        ] {
            let error = TaskPayload::decode(bytes).unwrap_err();
            assert!(
                matches!(error, CodecError::InvalidPayload { .. }),
                "{bytes:?}"
            );
            assert!(error.to_string().contains("\"kind\""), "{error}");
        }
        assert_eq!(
            TaskPayload::decode(br#"{"kind":""}"#),
            Err(CodecError::EmptyKind)
        );
        assert_eq!(TaskPayload::new("").encode(), Err(CodecError::EmptyKind));
    }

    /// What the derived reader with `#[serde(flatten)]` makes of a
    /// payload: the reference the hand-written one is held to.
    #[derive(Debug, Deserialize)]
    struct DerivedPayload {
        kind: String,
        #[serde(flatten)]
        fields: serde_json::Map<String, JsonValue>,
    }

    #[test]
    fn payloads_are_read_as_the_derived_reader_reads_them() {
        let inputs: [&[u8]; 16] = [
            br#"{"kind":"pi","samples":1000}"#,
            br#"{"samples":1000,"kind":"pi"}"#,
            br#"{"kind":"exec","argv":["sh","-c","echo hi"],"env":{"A":"1"},"x":null}"#,
            br#"{"kind":"pi","samples":1,"samples":2}"#,
            br#" { "kind" : "work" , "n" : 3.5 , "big" : 18446744073709551615 } "#,
            br#"{"kind":"\u00e9t\u00e9","k\"ey":"v"}"#,
            br#"{"kind":"pi","kind":"pi"}"#,
            br#"{"kind":"pi","nested":{"kind":"inner"}}"#,
            br#"{"kind":7}"#,
            br#"{"kind":null}"#,
            br#"{"samples":3}"#,
            br#"{}"#,
            br#"[1,2]"#,
            br#""pi""#,
            br#"{"kind":"pi",}"#,
            br#"{"kind":"pi"} trailing"#,
        ];
        for bytes in inputs {
            let derived = serde_json::from_slice::<DerivedPayload>(bytes);
            let read = serde_json::from_slice::<TaskPayload>(bytes);
            match (derived, read) {
                (Ok(derived), Ok(read)) => {
                    assert_eq!(read.kind, derived.kind, "{bytes:?}");
                    assert_eq!(read.fields, derived.fields, "{bytes:?}");
                }
                // Refused by both, for the same kind of fault (syntax,
                // data, end of input).
                (Err(derived), Err(read)) => {
                    assert_eq!(read.classify(), derived.classify(), "{bytes:?}: {read}")
                }
                (derived, read) => {
                    panic!("{bytes:?}: derived {derived:?}, hand-written {read:?}")
                }
            }
        }
    }

    #[test]
    fn a_payload_naming_its_kind_twice_is_refused() {
        let error = TaskPayload::decode(br#"{"kind":"pi","kind":"exec"}"#).unwrap_err();
        assert!(
            error.to_string().contains("duplicate field `kind`"),
            "{error}"
        );
    }

    #[test]
    fn a_payload_behind_a_byte_order_mark_is_refused_naming_it() {
        let error = TaskPayload::decode(b"\xEF\xBB\xBF{\"kind\":\"pi\"}").unwrap_err();
        assert!(
            matches!(error, CodecError::InvalidPayload { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("byte order mark"), "{error}");
    }

    #[test]
    fn results_round_trip_and_failures_stay_failures() {
        let success = TaskResult::Success {
            output: b"-oops".to_vec(),
        };
        let failure = TaskResult::failure("oops");
        assert_ne!(success.encode(), failure.encode());
        assert_eq!(TaskResult::decode(&success.encode()).unwrap(), success);
        assert_eq!(TaskResult::decode(&failure.encode()).unwrap(), failure);
        assert!(success.is_success() && !failure.is_success());
        let empty = TaskResult::Success { output: vec![] };
        assert_eq!(empty.encode().len(), RESULT_HEADER_BYTES);
        assert_eq!(TaskResult::decode(&empty.encode()).unwrap(), empty);
    }

    #[test]
    fn undecodable_results_are_refused() {
        for (bytes, reason) in [
            (&b""[..], "header"),
            (b"ZKR", "header"),
            (b"XYZ\x01+", "header"),
            (b"ZKR\x02+", "version 2"),
            (b"ZKR\x01?", "status byte 0x3f"),
            (b"ZKR\x01-\xff", "UTF-8"),
        ] {
            let error = TaskResult::decode(bytes).unwrap_err();
            assert!(error.to_string().contains(reason), "{bytes:?}: {error}");
        }
    }

    #[test]
    fn outcomes_are_made_to_fit_a_node() {
        let fits = vec![7u8; MAX_RESULT_OUTPUT_BYTES];
        let encoded = TaskResult::from_outcome(Ok(fits)).encode();
        // The request that writes it keeps room for the rest of a completion.
        assert_eq!(encoded.len() + COMPLETION_RESERVE_BYTES, MAX_REQUEST_BYTES);
        assert!(encoded.len() <= MAX_DATA_BYTES);

        let too_big = TaskResult::from_outcome(Ok(vec![7u8; MAX_RESULT_OUTPUT_BYTES + 1]));
        match &too_big {
            TaskResult::Failure { message } => {
                assert!(
                    message.contains(&MAX_RESULT_OUTPUT_BYTES.to_string()),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }

        // A long message of multi-byte characters is cut on a boundary.
        let long = "é".repeat(MAX_RESULT_OUTPUT_BYTES);
        let cut = TaskResult::from_outcome(Err(long)).encode();
        assert!(cut.len() <= MAX_DATA_BYTES);
        assert!(matches!(
            TaskResult::decode(&cut),
            Ok(TaskResult::Failure { .. })
        ));
    }
}
