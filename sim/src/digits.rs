//! Numbers for trace lines and sequential names, written digit by digit:
//! the formatting machinery costs more than the rest of a line, and these
//! are written on nearly every step. Each function renders exactly what
//! the `format!` spec it names renders.

/// Room for any `i64` in decimal (19 digits and a sign) or hex (16).
const CAPACITY: usize = 20;

/// A number's text, right-aligned in a small buffer.
pub(crate) struct Digits {
    bytes: [u8; CAPACITY],
    start: usize,
}

impl Digits {
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[self.start..]).expect("ASCII digits")
    }

    /// `magnitude` in `radix`, then `min_digits` at least (zero-padded),
    /// then a minus sign if `negative`.
    fn of(mut magnitude: u64, radix: u64, min_digits: usize, negative: bool) -> Digits {
        const SYMBOLS: &[u8; 16] = b"0123456789abcdef";
        let mut digits = Digits {
            bytes: [b'0'; CAPACITY],
            start: CAPACITY,
        };
        loop {
            digits.start -= 1;
            digits.bytes[digits.start] = SYMBOLS[(magnitude % radix) as usize];
            magnitude /= radix;
            if magnitude == 0 {
                break;
            }
        }
        // The buffer is all zeros to the left of the digits.
        digits.start = digits.start.min(CAPACITY - min_digits);
        if negative {
            digits.start -= 1;
            digits.bytes[digits.start] = b'-';
        }
        digits
    }
}

/// `{n}`.
pub(crate) fn decimal(n: i64) -> Digits {
    Digits::of(n.unsigned_abs(), 10, 1, n < 0)
}

/// `{n:x}`: a negative number shows its two's complement, as Rust's does.
pub(crate) fn hex(n: i64) -> Digits {
    Digits::of(n as u64, 16, 1, false)
}

/// `{n:010}`: ten characters at least, sign included, zero-padded after the
/// sign (which is also what Java's `%010d` gives, for sequential names).
pub(crate) fn decimal_010(n: i32) -> Digits {
    let negative = n < 0;
    let width = if negative { 9 } else { 10 };
    Digits::of(u64::from(n.unsigned_abs()), 10, width, negative)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_match_the_format_specs() {
        let samples = [
            0,
            1,
            -1,
            9,
            10,
            -10,
            255,
            4_096,
            123_456_789,
            -123_456_789,
            i64::from(i32::MAX),
            i64::from(i32::MIN),
            1 << 40,
            i64::MAX,
            i64::MIN,
        ];
        for n in samples {
            assert_eq!(decimal(n).as_str(), format!("{n}"), "{n}");
            assert_eq!(hex(n).as_str(), format!("{n:x}"), "{n}");
            if let Ok(small) = i32::try_from(n) {
                assert_eq!(decimal_010(small).as_str(), format!("{small:010}"), "{n}");
            }
        }
        assert_eq!(decimal_010(-5).as_str(), "-000000005");
        assert_eq!(decimal_010(i32::MIN).as_str(), "-2147483648");
    }
}
