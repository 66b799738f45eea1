//! A code checked against a factor: the client's budget of wrong codes, the judgement
//! (`factor.rs`) and its write, one compare-and-set of the factor with its event; `/api/v1`'s
//! verify (the token) and Twilio's challenge on top.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{
    CHALLENGE_PREFIX, CHALLENGE_TTL_MS, Challenge, ChallengeStatus, Checked, FactorStatus,
    Judgement, MAX_CHALLENGES, TotpError, TotpService, WRITE_TRIES, encode, event, new_sid, now_ms,
    seal_context,
};
use crate::domain::Client;
use crate::store::{Budget, QuotaDecision, QuotaScope, QuotaToken, TotpFact};
use crate::token::Audience;

impl TotpService {
    /// Checks `code` against the factor, `client` counted as other verifies count it; an
    /// unverified factor a right code confirms (`confirming`), a check needs a verified one.
    /// One compare-and-set of the factor: a step is accepted once whoever races for it. Its
    /// event is written in the same step: `factor.verified` for a confirmation,
    /// `challenge.approved` or `challenge.failed` (naming `challenge`, Twilio's, if any).
    pub async fn check_code(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        code: &str,
        client: Option<Client>,
        confirming: bool,
    ) -> Result<Checked, TotpError> {
        self.check_for(scope, identity, sid, code, client, confirming, None)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn check_for(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        code: &str,
        client: Option<Client>,
        confirming: bool,
        challenge: Option<&str>,
    ) -> Result<Checked, TotpError> {
        let (_, current) = self.factor_revised(scope, identity, sid).await?;
        if !confirming && current.status != FactorStatus::Verified {
            return Err(TotpError::NotVerified);
        }
        let code = code.trim();
        if code.len() != usize::from(current.config.digits)
            || !code.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(TotpError::InvalidCode);
        }
        let budget = self.reserve_client(scope, identity, client).await?;
        let checked = self
            .judge_and_write(scope, identity, sid, code, challenge)
            .await;
        if let (Some((quota, token)), Ok(checked)) = (budget, &checked)
            && checked.passed
        {
            // Only wrong codes count: a right one takes its try back.
            self.quotas.release_quota(&[quota], token).await?;
        }
        checked
    }

    /// Counts one try against the client's budget of wrong codes (taken back if it passes).
    async fn reserve_client(
        &self,
        scope: &str,
        identity: &str,
        client: Option<Client>,
    ) -> Result<Option<(QuotaScope, QuotaToken)>, TotpError> {
        let (Some(rule), Some(client)) = (self.client_failures, client) else {
            return Ok(None);
        };
        use sha2::Digest as _;
        let digest = sha2::Sha256::new()
            .chain_update(b"vcode totp client\0")
            .chain_update(scope)
            .chain_update(b"\0")
            .chain_update(identity)
            .chain_update(b"\0")
            .chain_update(client.to_string())
            .finalize();
        let scope = QuotaScope::TotpFailures(u64::from_be_bytes(
            digest[..8]
                .try_into()
                .expect("a SHA-256 is longer than 8 bytes"),
        ));
        let token = QuotaToken::generate();
        let rules = [rule];
        match self
            .quotas
            .reserve_quota(
                &[Budget {
                    scope,
                    rules: &rules,
                }],
                token,
            )
            .await?
        {
            QuotaDecision::Granted => Ok(Some((scope, token))),
            QuotaDecision::Exceeded { retry_after, .. } => {
                tracing::warn!(%scope, "TOTP check refused: the client's wrong codes");
                Err(TotpError::QuotaExceeded { retry_after })
            }
        }
    }

    async fn judge_and_write(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        code: &str,
        challenge: Option<&str>,
    ) -> Result<Checked, TotpError> {
        let context = seal_context(scope, identity, sid);
        let challenge = challenge.map_or(String::new(), |challenge| {
            ["challenge_id=", challenge].concat()
        });
        for _ in 0..WRITE_TRIES {
            let (revision, mut factor) = self.factor_revised(scope, identity, sid).await?;
            let sealed = URL_SAFE_NO_PAD
                .decode(&factor.sealed_secret)
                .map_err(|error| TotpError::Internal(error.to_string()))?;
            let (secret, current_key) = self
                .keyring
                .open_secret(&context, &sealed)
                .ok_or_else(|| TotpError::Internal("a factor's secret does not open".into()))?;
            let now = now_ms();
            let judgement = factor.judge(&secret, code, now);
            if let Judgement::Locked { retry_after_ms } = judgement {
                return Err(TotpError::Locked {
                    retry_after: Duration::from_millis(retry_after_ms.max(1000)),
                });
            }
            if !current_key {
                // Sealed before a key rotation: sealed again under the current key.
                factor.sealed_secret =
                    URL_SAFE_NO_PAD.encode(self.keyring.seal_secret(&context, &secret));
            }
            let passed = matches!(judgement, Judgement::Accepted { .. });
            let (fact, extra) = match judgement {
                Judgement::Accepted { .. } if factor.status == FactorStatus::Unverified => {
                    factor.status = FactorStatus::Verified;
                    (TotpFact::FactorVerified, challenge.clone())
                }
                Judgement::Accepted { .. } => (TotpFact::ChallengeApproved, challenge.clone()),
                _ => {
                    let reason = match judgement {
                        Judgement::Refused { replay: true, .. } => "reason=replay",
                        _ => "reason=wrong_code",
                    };
                    let mut extra = challenge.clone();
                    if !extra.is_empty() {
                        extra.push(';');
                    }
                    extra.push_str(reason);
                    (TotpFact::ChallengeFailed, extra)
                }
            };
            let happened = event(fact, scope, identity, sid, &extra, now);
            factor.updated_ms = now;
            if self
                .store
                .put_totp_record(
                    scope,
                    identity,
                    sid,
                    Some(revision),
                    &encode(&factor),
                    Some(&happened),
                )
                .await?
            {
                match judgement {
                    Judgement::Accepted { .. } => {
                        tracing::info!(scope, factor = %sid, "TOTP code accepted")
                    }
                    Judgement::Refused { replay, locked } => {
                        tracing::info!(scope, factor = %sid, replay, locked, "TOTP code refused")
                    }
                    Judgement::Locked { .. } => {}
                }
                if let Judgement::Refused { locked: true, .. } = judgement {
                    return Err(TotpError::Locked {
                        retry_after: Duration::from_millis(
                            factor.locked_until_ms.saturating_sub(now).max(1000),
                        ),
                    });
                }
                return Ok(Checked { factor, passed });
            }
        }
        Err(TotpError::Busy)
    }

    /// `/api/v1`'s check: a right code answers the signed token of an OTP verify, `channel`
    /// `totp`, `sub` the identity, `vid` the factor's SID; a wrong one is an error.
    #[allow(clippy::too_many_arguments)]
    pub async fn verify(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        code: &str,
        client: Option<Client>,
        purpose: &str,
        audience: Option<&Audience>,
    ) -> Result<String, TotpError> {
        let checked = self
            .check_code(scope, identity, sid, code, client, false)
            .await?;
        if !checked.passed {
            return Err(TotpError::WrongCode {
                remaining_attempts: checked.factor.remaining_attempts(),
            });
        }
        self.tokens
            .issue_on(identity, "totp", purpose, audience, Some(sid))
            .map_err(|error| TotpError::Internal(error.to_string()))
    }

    /// Twilio's challenge: the code checked against a verified factor, recorded as `approved`
    /// or `pending`. Locks and client limits are errors, as for a check.
    pub async fn challenge_with(
        &self,
        scope: &str,
        identity: &str,
        factor_sid: &str,
        code: &str,
        client: Option<Client>,
    ) -> Result<Challenge, TotpError> {
        let challenge_sid = new_sid(CHALLENGE_PREFIX);
        let checked = self
            .check_for(
                scope,
                identity,
                factor_sid,
                code,
                client,
                false,
                Some(&challenge_sid),
            )
            .await?;
        let now = now_ms();
        let challenge = Challenge {
            sid: challenge_sid,
            entity_sid: checked.factor.entity_sid.clone(),
            identity: identity.to_owned(),
            factor_sid: factor_sid.to_owned(),
            status: if checked.passed {
                ChallengeStatus::Approved
            } else {
                ChallengeStatus::Pending
            },
            created_ms: now,
            updated_ms: now,
            responded_ms: checked.passed.then_some(now),
            expires_ms: now + CHALLENGE_TTL_MS,
        };
        self.store
            .put_totp_record(
                scope,
                identity,
                &challenge.sid,
                None,
                &encode(&challenge),
                None,
            )
            .await?;
        // The oldest challenges beyond the bound go.
        let challenges = self.challenges(scope, identity).await?;
        for old in challenges
            .iter()
            .take(challenges.len().saturating_sub(MAX_CHALLENGES))
        {
            self.store
                .delete_totp_record(scope, identity, &old.sid, None)
                .await?;
        }
        Ok(challenge)
    }
}
