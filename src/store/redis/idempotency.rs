//! The Redis store's idempotency role: `Idempotency-Key` records.

use async_trait::async_trait;

use super::*;
use crate::store::IdempotencyStore;

#[async_trait]
impl IdempotencyStore for RedisStore {
    async fn begin_idempotent(
        &self,
        key: &str,
        running: &[u8],
        lease: Duration,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        // SET NX GET: claims the key, or returns what holds it, in one command.
        let mut invocation = Invocation::of(&SCRIPTS.begin_idempotent);
        invocation.key(keys::idempotency(key));
        invocation
            .arg(running)
            .arg(duration_ms(lease))
            .arg(self.give_up_at_ms());
        let mut connection = self.connections.get();
        let reply: Value = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        value_or_too_late(reply, "begin_idempotent.lua")?.map_err(|()| self.ran_too_late())
    }

    async fn finish_idempotent(
        &self,
        key: &str,
        done: &[u8],
        retention: Duration,
    ) -> Result<(), StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("SET")
            .arg(keys::idempotency(key))
            .arg(done)
            .arg("PX")
            .arg(duration_ms(retention))
            .to_owned();
        self.bounded(command.query_async::<()>(&mut connection))
            .await
    }

    async fn abandon_idempotent(&self, key: &str, running: &[u8]) -> Result<(), StoreError> {
        let mut command = whole_script(ABANDON_IDEMPOTENT, &[keys::idempotency(key)]);
        command.arg(running);
        let mut connection = self.connections.get();
        self.bounded(command.query_async::<i64>(&mut connection))
            .await
            .map(drop)
    }
}
