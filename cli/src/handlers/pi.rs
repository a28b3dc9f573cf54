//! The `pi` task: a Monte Carlo estimate of pi from a sample count, as the
//! course project zkdist grew out of did. Deterministic for a given seed so
//! that a result can be checked.

use std::sync::atomic::{AtomicBool, Ordering};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::HandlerError;

/// More samples than this would keep a worker busy for minutes; a typo of a
/// few extra zeros should be refused, not run.
pub const MAX_SAMPLES: u64 = 10_000_000_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PiTask {
    #[allow(dead_code)]
    kind: String,
    samples: u64,
    #[serde(default)]
    seed: u64,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct PiResult {
    pub estimate: f64,
    pub samples: u64,
    pub inside: u64,
}

pub fn parse(payload: &[u8]) -> Result<PiTask, HandlerError> {
    let task: PiTask =
        serde_json::from_slice(payload).map_err(|e| HandlerError::InvalidPayload {
            kind: "pi",
            reason: e.to_string(),
        })?;
    if task.samples == 0 || task.samples > MAX_SAMPLES {
        return Err(HandlerError::InvalidPayload {
            kind: "pi",
            reason: format!("samples must be in 1..={MAX_SAMPLES}, got {}", task.samples),
        });
    }
    Ok(task)
}

/// How many samples are drawn between two looks at the abandon flag: a
/// look costs next to nothing beside them, and at some 50 ns a sample an
/// abandoned task stops within milliseconds.
const SAMPLES_PER_LOOK: u64 = 1 << 16;

/// Counts the points of the unit square that fall inside the quarter circle,
/// unless `abandoned` is set first (then `None`): a task the worker gave up
/// (its session ended, its process is stopping) must not keep a core busy
/// for minutes, nor hold the process's exit until it is done.
pub fn estimate(task: &PiTask, abandoned: &AtomicBool) -> Option<PiResult> {
    let mut rng = ChaCha8Rng::seed_from_u64(task.seed);
    let mut inside = 0u64;
    let mut drawn = 0u64;
    while drawn < task.samples {
        if abandoned.load(Ordering::Relaxed) {
            return None;
        }
        let stretch = SAMPLES_PER_LOOK.min(task.samples - drawn);
        for _ in 0..stretch {
            let x: f64 = rng.random();
            let y: f64 = rng.random();
            if x * x + y * y <= 1.0 {
                inside += 1;
            }
        }
        drawn += stretch;
    }
    assert_eq!(drawn, task.samples, "every sample drawn, none twice");
    debug_assert!(inside <= task.samples);
    Some(PiResult {
        estimate: 4.0 * inside as f64 / task.samples as f64,
        samples: task.samples,
        inside,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_is_close_and_reproducible() {
        let task = parse(br#"{"kind":"pi","samples":200000,"seed":7}"#).unwrap();
        let going = AtomicBool::new(false);
        let first = estimate(&task, &going).unwrap();
        assert!(
            (first.estimate - std::f64::consts::PI).abs() < 0.02,
            "{first:?}"
        );
        assert_eq!(first.samples, 200_000);
        assert_eq!(Some(first), estimate(&task, &going));
    }

    #[test]
    fn an_abandoned_estimate_stops_drawing() {
        let task = parse(br#"{"kind":"pi","samples":10000000000}"#).unwrap();
        assert_eq!(estimate(&task, &AtomicBool::new(true)), None);
    }

    #[test]
    fn refuses_bad_sample_counts_and_fields() {
        for payload in [
            r#"{"kind":"pi","samples":0}"#,
            r#"{"kind":"pi","samples":99999999999999}"#,
            r#"{"kind":"pi"}"#,
            r#"{"kind":"pi","samples":10,"colour":"red"}"#,
            r#"{"kind":"pi","samples":-3}"#,
        ] {
            let err = parse(payload.as_bytes()).unwrap_err();
            assert!(
                matches!(err, HandlerError::InvalidPayload { kind: "pi", .. }),
                "{payload}: {err}"
            );
        }
    }
}
