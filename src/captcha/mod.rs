//! Image captchas: create one (a random seed in the store), draw its PNG on every fetch from
//! that seed, and verify it once — the first verify consumes it, whatever the answer. The
//! answer is derived from the seed under the service's secret key, so the store holds nothing
//! that gives an answer away.

pub mod render;
mod settings;

pub use self::settings::CaptchaSettings;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::domain::{CaptchaAnswer, CaptchaId};
use crate::keyring::Keyring;
use crate::stats::{Event, Stats};
use crate::store::{
    Budget, CaptchaStore, QuotaDecision, QuotaRule, QuotaScope, QuotaStore, QuotaToken, StoreError,
    StoredCaptcha, Stores,
};

#[derive(Debug, thiserror::Error)]
pub enum CaptchaError {
    /// Wrong, missing, unknown, used or expired: the client cannot tell which.
    #[error("wrong or missing captcha")]
    Wrong,
    /// No pending captcha has this id (its picture or the dev route).
    #[error("no such captcha")]
    NotFound,
    #[error("captcha picture not drawn")]
    Render(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// This client created its captchas' worth for now.
    #[error("captcha quota exceeded")]
    QuotaExceeded { retry_after: Duration },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A captcha consumed by a right answer, which [`CaptchaService::give_back`] can restore.
#[derive(Debug)]
pub struct SolvedCaptcha {
    id: CaptchaId,
    captcha: StoredCaptcha,
}

pub struct CaptchaService {
    store: Arc<dyn CaptchaStore>,
    quotas: Arc<dyn QuotaStore>,
    /// Captchas per client and minute (none: unlimited); the client already grouped.
    per_client: Option<QuotaRule>,
    keyring: Arc<Keyring>,
    settings: CaptchaSettings,
    stats: Arc<Stats>,
}

impl CaptchaService {
    pub fn new(
        stores: &Stores,
        keyring: Arc<Keyring>,
        settings: CaptchaSettings,
        per_client_minute: u32,
        stats: Arc<Stats>,
    ) -> Self {
        Self {
            store: stores.captchas.clone(),
            quotas: stores.quotas.clone(),
            per_client: QuotaRule::new(per_client_minute, Duration::from_secs(60)),
            keyring,
            settings,
            stats,
        }
    }

    /// The answer of captcha `id` drawn from `seed`, as its picture shows it.
    fn answer(&self, id: &CaptchaId, seed: u64) -> String {
        self.keyring
            .captcha_answer(id.as_str(), seed, render::ALPHABET, self.settings.length)
    }

    pub fn settings(&self) -> &CaptchaSettings {
        &self.settings
    }

    /// A new captcha for `client` (its group), within the client's captcha quota: anonymous
    /// requests must not grow the store without bound. Its picture is drawn when fetched.
    pub async fn create(&self, client: IpAddr) -> Result<CaptchaId, CaptchaError> {
        if let Some(rule) = self.per_client {
            let budget = Budget {
                scope: QuotaScope::CaptchaClient(client),
                rules: std::slice::from_ref(&rule),
            };
            let decision = self
                .quotas
                .reserve_quota(&[budget], QuotaToken::generate())
                .await?;
            if let QuotaDecision::Exceeded { retry_after, .. } = decision {
                self.stats.record(Event::QuotaIp);
                tracing::warn!(%client, quota = "captcha_client", "captcha refused: quota exceeded");
                return Err(CaptchaError::QuotaExceeded { retry_after });
            }
        }
        let id = CaptchaId::generate();
        let captcha = StoredCaptcha {
            seed: rand::random(),
        };
        self.store
            .put_captcha(&id, &captcha, self.settings.ttl)
            .await?;
        self.stats.record(Event::CaptchaCreated);
        tracing::debug!(%id, "captcha created");
        Ok(id)
    }

    /// The PNG of a pending captcha: the same bytes on every fetch.
    pub async fn png(&self, id: &str) -> Result<Vec<u8>, CaptchaError> {
        let (id, captcha) = self.pending(id).await?;
        render::render_png(
            &self.answer(&id, captcha.seed),
            captcha.seed,
            self.settings.width,
            self.settings.height,
        )
        .map_err(|e| CaptchaError::Render(e.into()))
    }

    /// Dev mode: the answer of a pending captcha, left in place.
    pub async fn peek_answer(&self, id: &str) -> Result<String, CaptchaError> {
        let (id, captcha) = self.pending(id).await?;
        Ok(self.answer(&id, captcha.seed))
    }

    async fn pending(&self, id: &str) -> Result<(CaptchaId, StoredCaptcha), CaptchaError> {
        let id = CaptchaId::parse(id).ok_or(CaptchaError::NotFound)?;
        let captcha = self
            .store
            .captcha(&id)
            .await?
            .ok_or(CaptchaError::NotFound)?;
        Ok((id, captcha))
    }

    /// Puts a solved captcha back, so that the same answer passes once more: what it bought
    /// failed on the server side before any SMS went out (the client's retry must not have to
    /// solve again). It lives one captcha TTL from now. A give-back that cannot reach the
    /// store is logged, and the captcha stays used.
    pub async fn give_back(&self, solved: SolvedCaptcha) {
        let SolvedCaptcha { id, captcha } = solved;
        match self
            .store
            .put_captcha(&id, &captcha, self.settings.ttl)
            .await
        {
            Ok(()) => tracing::info!(%id, "captcha given back: the send failed before any SMS"),
            Err(error) => {
                tracing::warn!(%id, %error, "captcha not given back: the store did not answer");
            }
        }
    }

    /// Consumes the captcha and checks the answer. A malformed id is no captcha; an empty
    /// answer never matches, and still consumes the captcha.
    pub async fn verify(
        &self,
        id: Option<&str>,
        answer: Option<&str>,
    ) -> Result<SolvedCaptcha, CaptchaError> {
        let Some(id) = id.and_then(CaptchaId::parse) else {
            self.stats.record(Event::CaptchaFailed);
            return Err(CaptchaError::Wrong);
        };
        let taken = self.store.take_captcha(&id).await?;
        let answer = answer.and_then(CaptchaAnswer::parse);
        match (taken, answer) {
            // Under the current key or, during a rotation, the previous one.
            (Some(captcha), Some(answer))
                if self
                    .keyring
                    .captcha_answers(
                        id.as_str(),
                        captcha.seed,
                        render::ALPHABET,
                        self.settings.length,
                    )
                    .iter()
                    .fold(false, |found, expected| found | answer.matches(expected)) =>
            {
                self.stats.record(Event::CaptchaSolved);
                tracing::info!(%id, "captcha solved");
                Ok(SolvedCaptcha { id, captcha })
            }
            (Some(_), _) => {
                self.stats.record(Event::CaptchaFailed);
                tracing::info!(%id, "captcha wrong: consumed");
                Err(CaptchaError::Wrong)
            }
            (None, _) => {
                self.stats.record(Event::CaptchaFailed);
                tracing::info!(%id, "captcha unknown, used or expired");
                Err(CaptchaError::Wrong)
            }
        }
    }
}
