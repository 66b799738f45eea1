//! The Redis store's captchas role: image captchas, taken in one step.

use async_trait::async_trait;

use super::*;
use crate::store::CaptchaStore;

#[async_trait]
impl CaptchaStore for RedisStore {
    async fn put_captcha(
        &self,
        id: &CaptchaId,
        captcha: &StoredCaptcha,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("SET")
            .arg(keys::captcha(id))
            .arg(encode_captcha(captcha))
            .arg("PX")
            .arg(duration_ms(ttl))
            .to_owned();
        self.bounded(command.query_async::<()>(&mut connection))
            .await
    }

    async fn captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("GET").arg(keys::captcha(id)).to_owned();
        let raw: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        raw.map(|raw| decode_captcha(&raw)).transpose()
    }

    async fn take_captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        // GETDEL is atomic: of concurrent verifies exactly one receives the value.
        let mut invocation = Invocation::of(&SCRIPTS.take_captcha);
        invocation.key(keys::captcha(id));
        invocation.arg(self.give_up_at_ms());
        let mut connection = self.connections.get();
        let reply: Value = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        let raw =
            value_or_too_late(reply, "take_captcha.lua")?.map_err(|()| self.ran_too_late())?;
        raw.map(|raw| {
            std::str::from_utf8(&raw)
                .map_err(|_| StoreError::Protocol("captcha value not UTF-8".to_owned()))
                .and_then(decode_captcha)
        })
        .transpose()
    }
}
