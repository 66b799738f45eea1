//! The records the TOTP use cases keep (an identity's entity, its factors and challenges) as
//! the store holds them (JSON, `crate::store::FactorStore`), and the judgement of one code
//! against a factor: RFC 6238 on `totp-rs`, the replay guard (a step once accepted, and every
//! step before it, is never accepted again) and the lock after `MAX_FAILURES` wrong codes.

use serde::{Deserialize, Serialize};

use super::TotpConfig;

/// Wrong codes in a row before a factor is locked.
pub const MAX_FAILURES: u32 = 5;
/// The first lock's length; each lock after it without a code accepted between is twice as
/// long, up to `MAX_LOCK_MS` (5 wrong codes per lock make guessing a 6-digit code a matter of
/// years, not days).
const FIRST_LOCK_MS: u64 = 5 * 60 * 1000;
const MAX_LOCK_MS: u64 = 24 * 60 * 60 * 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactorStatus {
    Unverified,
    Verified,
}

impl FactorStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unverified => "unverified",
            Self::Verified => "verified",
        }
    }
}

/// An identity's entity.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Entity {
    pub sid: String,
    pub identity: String,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// A factor as stored: its secret sealed (`Keyring::seal_secret`, base64url), never in clear.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Factor {
    pub sid: String,
    pub entity_sid: String,
    pub identity: String,
    pub friendly_name: String,
    pub status: FactorStatus,
    pub config: TotpConfig,
    pub(super) sealed_secret: String,
    pub created_ms: u64,
    pub updated_ms: u64,
    /// The last step a code was accepted for (0: none): it and every step before it are spent.
    #[serde(default)]
    pub(super) last_step: u64,
    /// Wrong codes since the last accepted one or the last lock.
    #[serde(default)]
    pub(super) failures: u32,
    #[serde(default)]
    pub(super) locked_until_ms: u64,
    /// Locks since the last accepted code (each one twice as long).
    #[serde(default)]
    pub(super) locks: u32,
}

/// A challenge as stored: one code checked against one factor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Challenge {
    pub sid: String,
    pub entity_sid: String,
    pub identity: String,
    pub factor_sid: String,
    pub status: ChallengeStatus,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub responded_ms: Option<u64>,
    pub expires_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChallengeStatus {
    Pending,
    Approved,
}

impl ChallengeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
        }
    }
}

/// What one code does to a factor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// Accepted for this step: the factor is to record it.
    Accepted { step: u64 },
    /// Wrong, or a step already spent (a replay): counted; `locked` if it was the last try.
    Refused { replay: bool, locked: bool },
    /// The factor is locked: nothing is checked or counted.
    Locked { retry_after_ms: u64 },
}

impl Factor {
    /// Tries left before the lock.
    pub fn remaining_attempts(&self) -> u32 {
        MAX_FAILURES.saturating_sub(self.failures)
    }

    /// Judges `code` (its digits checked by the caller) at `now_ms`, and changes the factor as
    /// the judgement says (the caller writes it back, compare-and-set).
    pub(super) fn judge(&mut self, secret: &[u8], code: &str, now_ms: u64) -> Judgement {
        if self.locked_until_ms > now_ms {
            return Judgement::Locked {
                retry_after_ms: self.locked_until_ms - now_ms,
            };
        }
        let matched = self.config.totp(secret).check(code, now_ms / 1000);
        match matched {
            Some(step) if step > self.last_step => {
                self.last_step = step;
                self.failures = 0;
                self.locks = 0;
                self.locked_until_ms = 0;
                Judgement::Accepted { step }
            }
            matched => {
                self.failures += 1;
                let locked = self.failures >= MAX_FAILURES;
                if locked {
                    let lock = FIRST_LOCK_MS
                        .saturating_mul(1 << self.locks.min(16))
                        .min(MAX_LOCK_MS);
                    self.locked_until_ms = now_ms + lock;
                    self.locks += 1;
                    self.failures = 0;
                }
                Judgement::Refused {
                    replay: matched.is_some(),
                    locked,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::totp::Algorithm;

    fn factor(skew: u8) -> Factor {
        Factor {
            sid: "YF1".into(),
            entity_sid: "YE1".into(),
            identity: "alice".into(),
            friendly_name: "phone".into(),
            status: FactorStatus::Verified,
            config: TotpConfig {
                algorithm: Algorithm::Sha1,
                digits: 6,
                step_secs: 30,
                skew,
            },
            sealed_secret: String::new(),
            created_ms: 0,
            updated_ms: 0,
            last_step: 0,
            failures: 0,
            locked_until_ms: 0,
            locks: 0,
        }
    }

    /// RFC 6238's own test secret and vectors (Appendix B, SHA-1, 8 digits).
    #[test]
    fn rfc_6238_vectors() {
        let mut f = factor(0);
        f.config.digits = 8;
        let secret = b"12345678901234567890";
        for (time, code) in [
            (59u64, "94287082"),
            (1_111_111_109, "07081804"),
            (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"),
        ] {
            assert_eq!(f.config.totp(secret).generate(time).to_string(), code);
        }
    }

    #[test]
    fn a_step_is_accepted_once_and_the_skew_is_one_step_each_way() {
        let secret = [9u8; 20];
        let now = 1_700_000_015_000u64;
        let mut f = factor(1);
        let code_at = |f: &Factor, secs: u64| f.config.totp(&secret).generate(secs).to_string();
        let before = code_at(&f, now / 1000 - 30);
        let after = code_at(&f, now / 1000 + 30);
        let too_late = code_at(&f, now / 1000 - 60);
        assert!(matches!(
            f.judge(&secret, &too_late, now),
            Judgement::Refused { replay: false, .. }
        ));
        assert!(matches!(
            f.judge(&secret, &before, now),
            Judgement::Accepted { .. }
        ));
        assert!(matches!(
            f.judge(&secret, &before, now),
            Judgement::Refused { replay: true, .. }
        ));
        assert!(matches!(
            f.judge(&secret, &after, now),
            Judgement::Accepted { .. }
        ));
        let current = code_at(&f, now / 1000);
        assert!(
            matches!(
                f.judge(&secret, &current, now),
                Judgement::Refused { replay: true, .. }
            ),
            "a step before one accepted is spent too"
        );
    }

    #[test]
    fn five_wrong_codes_lock_the_factor_longer_each_time() {
        let secret = [9u8; 20];
        let now = 1_700_000_015_000u64;
        let mut f = factor(1);
        let right = f.config.totp(&secret).generate(now / 1000).to_string();
        let wrong = if right == "000000" {
            "111111"
        } else {
            "000000"
        };
        for attempt in 1..=5 {
            let locked = attempt == 5;
            assert_eq!(
                f.judge(&secret, wrong, now),
                Judgement::Refused {
                    replay: false,
                    locked
                }
            );
        }
        assert_eq!(
            f.judge(&secret, &right, now + 1000),
            Judgement::Locked {
                retry_after_ms: FIRST_LOCK_MS - 1000
            },
            "locked: even the right code is not looked at"
        );
        let later = now + FIRST_LOCK_MS;
        for _ in 0..5 {
            f.judge(&secret, wrong, later);
        }
        assert_eq!(
            f.judge(&secret, wrong, later),
            Judgement::Locked {
                retry_after_ms: 2 * FIRST_LOCK_MS
            }
        );
    }
}
