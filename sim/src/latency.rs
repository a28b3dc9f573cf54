//! Seeded one-way network delays between a session and the server.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The distribution of one-way delays of a session's link, sampled once per
/// message (request, reply, watch event, session event) from the
/// simulation's seeded generator. Integer arithmetic only, so that the same
/// seed gives the same delays on every platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latency {
    /// Every message arrives at the instant it is sent; the seeded
    /// tie-break alone decides the order across sessions.
    Zero,
    /// Every message takes exactly `ms` milliseconds.
    Fixed { ms: u64 },
    /// Uniform in `min_us..=max_us` microseconds (bounds given in the wrong
    /// order are swapped).
    Uniform { min_us: u64, max_us: u64 },
    /// Mostly fast with rare slow outliers, as on a loaded network: with
    /// probability `100 - tail_probability_pct` percent the delay is uniform
    /// in `base_us / 2..=base_us`; otherwise it is drawn from
    /// `base_us..=tail_max_us` with a bias to the low end (a random number of
    /// halvings of the range, so each doubling of the delay is about equally
    /// likely: a log-uniform tail). Percentages above 100 count as 100.
    HeavyTail {
        base_us: u64,
        tail_probability_pct: u8,
        tail_max_us: u64,
    },
}

/// How many halvings the heavy tail's range may undergo: 2^16 covers a tail
/// from microseconds to about a minute.
const TAIL_HALVINGS_MAX: u32 = 16;

impl Latency {
    /// One delay, in microseconds.
    pub(crate) fn sample_us(&self, rng: &mut ChaCha8Rng) -> u64 {
        match *self {
            Latency::Zero => 0,
            Latency::Fixed { ms } => ms.saturating_mul(1000),
            Latency::Uniform { min_us, max_us } => {
                let (low, high) = (min_us.min(max_us), min_us.max(max_us));
                rng.random_range(low..=high)
            }
            Latency::HeavyTail {
                base_us,
                tail_probability_pct,
                tail_max_us,
            } => {
                let in_tail = rng.random_range(0..100u8) < tail_probability_pct.min(100);
                if in_tail {
                    let tail_max_us = tail_max_us.max(base_us);
                    let halvings = rng.random_range(0..=TAIL_HALVINGS_MAX);
                    let span_us = (tail_max_us - base_us) >> halvings;
                    base_us + rng.random_range(0..=span_us)
                } else {
                    rng.random_range(base_us / 2..=base_us)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn samples(latency: Latency, count: usize) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        (0..count).map(|_| latency.sample_us(&mut rng)).collect()
    }

    #[test]
    fn zero_and_fixed_are_constant() {
        assert!(samples(Latency::Zero, 50).iter().all(|&d| d == 0));
        assert!(
            samples(Latency::Fixed { ms: 3 }, 50)
                .iter()
                .all(|&d| d == 3000)
        );
    }

    #[test]
    fn uniform_stays_in_bounds_and_spreads() {
        let drawn = samples(
            Latency::Uniform {
                min_us: 100,
                max_us: 200,
            },
            500,
        );
        assert!(drawn.iter().all(|&d| (100..=200).contains(&d)));
        assert!(drawn.iter().any(|&d| d < 120) && drawn.iter().any(|&d| d > 180));
        // Swapped bounds are tolerated, not a panic.
        let swapped = samples(
            Latency::Uniform {
                min_us: 200,
                max_us: 100,
            },
            50,
        );
        assert!(swapped.iter().all(|&d| (100..=200).contains(&d)));
    }

    #[test]
    fn heavy_tail_is_mostly_fast_with_outliers() {
        let drawn = samples(
            Latency::HeavyTail {
                base_us: 1_000,
                tail_probability_pct: 10,
                tail_max_us: 1_000_000,
            },
            2_000,
        );
        assert!(drawn.iter().all(|&d| (500..=1_000_000).contains(&d)));
        let slow = drawn.iter().filter(|&&d| d > 1_000).count();
        assert!((100..=300).contains(&slow), "{slow} outliers of 2000");
        assert!(drawn.iter().any(|&d| d > 100_000), "the tail reaches far");
    }

    #[test]
    fn same_seed_same_delays() {
        let latency = Latency::Uniform {
            min_us: 0,
            max_us: 1_000_000,
        };
        assert_eq!(samples(latency, 100), samples(latency, 100));
    }
}
