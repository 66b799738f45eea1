//! The Redis store's TOTP records: a scope's entities as the fields of one hash
//! (`verify_code:totp:{<scope>}:entities`, by identity), each identity's factors and
//! challenges as the fields of another (`…:records:<identity>`, by SID), both under the
//! scope's hash tag. Values are `<revision>:<body>`; every write is `twilio_put.lua`'s
//! compare-and-set on one field, and an identity's read and delete are one script each.

use std::sync::LazyLock;

use async_trait::async_trait;
use redis::Script;

use super::twilio::decode;
use super::*;
use crate::store::{ENTITY, FactorStore, Revised};

/// KEYS[1] the entities, KEYS[2] the identity's records; ARGV[1] the identity. The entity's
/// value (or false), then the records' fields and values.
static READ: LazyLock<Script> = LazyLock::new(|| {
    Script::new("return {redis.call('HGET', KEYS[1], ARGV[1]), redis.call('HGETALL', KEYS[2])}")
});

/// The same keys: removes the entity and its records; 1 if the entity was there.
static DELETE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local removed = redis.call('HDEL', KEYS[1], ARGV[1]) redis.call('DEL', KEYS[2]) return removed",
    )
});

#[async_trait]
impl FactorStore for RedisStore {
    async fn totp_entities(&self, scope: &str) -> Result<Vec<(String, Revised)>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("HGETALL")
            .arg(keys::totp_entities(scope))
            .to_owned();
        let fields: Vec<(String, String)> =
            self.bounded(command.query_async(&mut connection)).await?;
        fields
            .into_iter()
            .map(|(identity, value)| Ok((identity, decode(&value)?)))
            .collect()
    }

    async fn totp_records(
        &self,
        scope: &str,
        identity: &str,
    ) -> Result<Vec<(String, Revised)>, StoreError> {
        let mut invocation = READ.key(keys::totp_entities(scope));
        invocation
            .key(keys::totp_records(scope, identity))
            .arg(identity);
        let mut connection = self.connections.get();
        let (entity, fields): (Option<String>, Vec<(String, String)>) = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        let mut records = Vec::with_capacity(fields.len() + 1);
        if let Some(entity) = entity {
            records.push((ENTITY.to_owned(), decode(&entity)?));
        }
        for (sid, value) in fields {
            records.push((sid, decode(&value)?));
        }
        Ok(records)
    }

    async fn totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
    ) -> Result<Option<Revised>, StoreError> {
        let command = if sid == ENTITY {
            redis::cmd("HGET")
                .arg(keys::totp_entities(scope))
                .arg(identity)
                .to_owned()
        } else {
            redis::cmd("HGET")
                .arg(keys::totp_records(scope, identity))
                .arg(sid)
                .to_owned()
        };
        let mut connection = self.connections.get();
        let value: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        value.as_deref().map(decode).transpose()
    }

    async fn put_totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        expected: Option<u64>,
        body: &str,
    ) -> Result<bool, StoreError> {
        let (key, field) = if sid == ENTITY {
            (keys::totp_entities(scope), identity)
        } else {
            (keys::totp_records(scope, identity), sid)
        };
        self.twilio_put(key, field, expected, body, Duration::ZERO)
            .await
    }

    async fn delete_totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
    ) -> Result<bool, StoreError> {
        if sid == ENTITY {
            return Ok(false);
        }
        let mut connection = self.connections.get();
        let command = redis::cmd("HDEL")
            .arg(keys::totp_records(scope, identity))
            .arg(sid)
            .to_owned();
        let removed: i64 = self.bounded(command.query_async(&mut connection)).await?;
        Ok(removed == 1)
    }

    async fn delete_totp_identity(&self, scope: &str, identity: &str) -> Result<bool, StoreError> {
        let mut invocation = DELETE.key(keys::totp_entities(scope));
        invocation
            .key(keys::totp_records(scope, identity))
            .arg(identity);
        let mut connection = self.connections.get();
        let removed: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(removed == 1)
    }
}
