//! A seed's current code (RFC 6238, through `totp-rs`), and when to type it
//! so that it is still valid when the site checks it.

use std::fmt;

use zeroize::Zeroizing;

use super::seed::{Algorithm, Seed};

/// A code is typed only with at least this many seconds of validity left;
/// otherwise Cordon waits for the next period's code.
pub const MIN_VALIDITY_S: u64 = 3;

/// A one-time code: its digits, wiped when dropped. `Debug` shows its
/// length only.
pub struct Code(Zeroizing<String>);

impl Code {
    /// The digits, to type.
    pub fn digits(&self) -> &str {
        &self.0
    }

    /// How many digits.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true (a code has 6–8 digits); for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Code({} digits)", self.0.len())
    }
}

/// When to type a code computed at `now_ms`: at once, or after `wait_ms`
/// (the rest of a period with less than [`MIN_VALIDITY_S`] left), using
/// the code of Unix second `at_s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// How long to wait before typing.
    pub wait_ms: u64,
    /// The Unix second whose code to type.
    pub at_s: u64,
}

/// The plan for a seed with `period` seconds at `now_ms`.
pub fn plan(period: u32, now_ms: u64) -> Plan {
    let period_ms = u64::from(period.max(1)) * 1000;
    let left = period_ms - now_ms % period_ms;
    if left < MIN_VALIDITY_S * 1000 {
        Plan {
            wait_ms: left,
            at_s: (now_ms + left) / 1000,
        }
    } else {
        Plan {
            wait_ms: 0,
            at_s: now_ms / 1000,
        }
    }
}

/// The seed's code for Unix second `at_s`.
pub fn code_at(seed: &Seed, at_s: u64) -> Code {
    let algorithm = match seed.params.algorithm {
        Algorithm::Sha1 => totp_rs::Algorithm::SHA1,
        Algorithm::Sha256 => totp_rs::Algorithm::SHA256,
        Algorithm::Sha512 => totp_rs::Algorithm::SHA512,
    };
    // Lengths and ranges were checked when the seed was made (`Seed::new`);
    // `build` would refuse the 80-bit secrets most sites still issue.
    let totp = totp_rs::Builder::new()
        .with_algorithm(algorithm)
        .with_digits(seed.params.digits)
        .with_step_duration(u64::from(seed.params.period))
        .with_secret(seed.secret().to_vec())
        .build_noncompliant();
    Code(Zeroizing::new(totp.generate(at_s).to_string()))
}

#[cfg(test)]
mod tests {
    use super::super::seed::Params;
    use super::*;

    fn seed(secret: &[u8], algorithm: Algorithm) -> Seed {
        Seed::new(
            Zeroizing::new(secret.to_vec()),
            Params {
                algorithm,
                digits: 8,
                period: 30,
            },
        )
        .unwrap()
    }

    /// RFC 6238, Appendix B: every published vector.
    #[test]
    fn rfc_6238_test_vectors() {
        let sha1 = seed(b"12345678901234567890", Algorithm::Sha1);
        let sha256 = seed(b"12345678901234567890123456789012", Algorithm::Sha256);
        let sha512 = seed(
            b"1234567890123456789012345678901234567890123456789012345678901234",
            Algorithm::Sha512,
        );
        let vectors: [(u64, &str, &str, &str); 6] = [
            (59, "94287082", "46119246", "90693936"),
            (1111111109, "07081804", "68084774", "25091201"),
            (1111111111, "14050471", "67062674", "99943326"),
            (1234567890, "89005924", "91819424", "93441116"),
            (2000000000, "69279037", "90698825", "38618901"),
            (20000000000, "65353130", "77737706", "47863826"),
        ];
        for (t, a, b, c) in vectors {
            assert_eq!(code_at(&sha1, t).digits(), a, "SHA1 at {t}");
            assert_eq!(code_at(&sha256, t).digits(), b, "SHA256 at {t}");
            assert_eq!(code_at(&sha512, t).digits(), c, "SHA512 at {t}");
        }
    }

    #[test]
    fn six_digit_codes_keep_their_leading_zeros() {
        let mut s = seed(b"12345678901234567890", Algorithm::Sha1);
        s.params.digits = 6;
        // 07081804 cut to six digits.
        assert_eq!(code_at(&s, 1111111109).digits(), "081804");
        assert_eq!(format!("{:?}", code_at(&s, 1111111109)), "Code(6 digits)");
    }

    /// A frozen clock: a code is typed with at least 3 s of validity left.
    #[test]
    fn a_code_with_less_than_three_seconds_left_waits_for_the_next() {
        // 1111111109 s is 1 s before the end of its 30 s period.
        let frozen = 1_111_111_109_000;
        assert_eq!(
            plan(30, frozen),
            Plan {
                wait_ms: 1000,
                at_s: 1_111_111_110
            }
        );
        // 2.999 s left: waits; exactly 3 s left: types now.
        assert_eq!(plan(30, 27_001).wait_ms, 2_999);
        assert_eq!(plan(30, 27_001).at_s, 30);
        assert_eq!(
            plan(30, 27_000),
            Plan {
                wait_ms: 0,
                at_s: 27
            }
        );
        assert_eq!(
            plan(30, 0),
            Plan {
                wait_ms: 0,
                at_s: 0
            }
        );
        // The code typed after the wait is the next period's.
        let s = seed(b"12345678901234567890", Algorithm::Sha1);
        let p = plan(30, frozen);
        assert_eq!(
            code_at(&s, p.at_s).digits(),
            code_at(&s, 1_111_111_111).digits()
        );
        assert_ne!(
            code_at(&s, p.at_s).digits(),
            code_at(&s, 1_111_111_109).digits()
        );
        // Any period: never less than 3 s left at `at_s`.
        for period in [10u32, 30, 60, 300] {
            for now in (0..700_000u64).step_by(137) {
                let p = plan(period, now);
                let typed_at = now + p.wait_ms;
                let left = u64::from(period) * 1000 - typed_at % (u64::from(period) * 1000);
                assert!(
                    left >= MIN_VALIDITY_S * 1000,
                    "period {period} now {now}: {p:?}"
                );
                assert_eq!(p.at_s, typed_at / 1000);
            }
        }
    }
}
