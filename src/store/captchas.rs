//! The captchas role: image captchas kept until solved, tried or expired; a take is one step.

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;
use crate::domain::CaptchaId;

/// A captcha as stored: the seed its picture and (under the service's key) its answer are
/// drawn from, so every fetch of one id shows the same picture. No answer is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCaptcha {
    pub seed: u64,
}

/// Image captchas: stored until solved, tried or expired.
#[async_trait]
pub trait CaptchaStore: Send + Sync + 'static {
    /// Stores a new captcha under `id` for `ttl`.
    async fn put_captcha(
        &self,
        id: &CaptchaId,
        captcha: &StoredCaptcha,
        ttl: Duration,
    ) -> Result<(), StoreError>;

    /// The captcha, left in place (to draw its picture, and for the dev route).
    async fn captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError>;

    /// Removes and returns the captcha in one step: of concurrent takers only one gets it. A
    /// take that reaches a shared store after its caller gave up waiting takes nothing (the
    /// caller answered a failure, and its retry must find the captcha).
    async fn take_captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError>;
}
