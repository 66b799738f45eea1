//! The embedded store's captchas role: image captchas, taken in one step.

use async_trait::async_trait;

use super::*;
use crate::store::CaptchaStore;

#[async_trait]
impl CaptchaStore for MemoryStore {
    async fn put_captcha(
        &self,
        id: &CaptchaId,
        captcha: &StoredCaptcha,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let entry = CaptchaEntry {
            captcha: captcha.clone(),
            expires_at_ms: self.now_ms().saturating_add(duration_ms(ttl)),
        };
        self.captchas
            .lock(id.as_str())
            .insert(id.as_str().into(), entry);
        Ok(())
    }

    async fn captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        let now = self.now_ms();
        Ok(self
            .captchas
            .lock(id.as_str())
            .get(id.as_str())
            .filter(|entry| entry.expires_at_ms > now)
            .map(|entry| entry.captcha.clone()))
    }

    async fn take_captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        let now = self.now_ms();
        Ok(self
            .captchas
            .lock(id.as_str())
            .remove(id.as_str())
            .filter(|entry| entry.expires_at_ms > now)
            .map(|entry| entry.captcha))
    }
}
