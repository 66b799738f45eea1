//! The Redis store's TOTP records: a scope's entities as the fields of one hash
//! (`verify_code:totp:{<scope>}:entities`, by identity), each identity's factors and
//! challenges as the fields of another (`…:records:<identity>`, by SID), both under the
//! scope's hash tag. Values are `<revision>:<body>`; every write is `totp_put.lua`'s
//! compare-and-set on one field, with its event appended in the same script (on a Cluster to
//! the outbox of the scope's slot), and an identity's read and delete are one script each.

use std::sync::LazyLock;

use async_trait::async_trait;
use redis::Script;

use super::events::{EVENTS_PRELUDE, EventSubject};
use super::twilio::decode;
use super::*;
use crate::store::{ENTITY, FactorStore, OutboxEntry, Revised};

static PUT: LazyLock<Script> =
    LazyLock::new(|| Script::new(&[EVENTS_PRELUDE, include_str!("totp_put.lua")].concat()));
static DELETE_ONE: LazyLock<Script> =
    LazyLock::new(|| Script::new(&[EVENTS_PRELUDE, include_str!("totp_delete.lua")].concat()));

impl RedisStore {
    /// `event`'s fact, time and outbox on `invocation` (nothing without one).
    fn totp_event(
        &self,
        invocation: &mut Invocation<'_>,
        scope: &str,
        event: Option<&OutboxEntry>,
    ) {
        let Some(event) = event else {
            invocation.arg("").arg(0);
            return;
        };
        invocation.arg(event.fact.as_str()).arg(event.at_ms);
        self.add_outbox(
            invocation,
            &EventSubject {
                tag: scope,
                subject: &event.subject,
                phone_e164: "",
                purpose: "",
                detail: &event.detail,
            },
        );
    }
}

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
        let mut invocation = Invocation::of(&READ);
        invocation.key(keys::totp_entities(scope));
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
        event: Option<&OutboxEntry>,
    ) -> Result<bool, StoreError> {
        let (key, field) = if sid == ENTITY {
            (keys::totp_entities(scope), identity)
        } else {
            (keys::totp_records(scope, identity), sid)
        };
        let mut invocation = Invocation::of(&PUT);
        invocation.key(key);
        invocation.arg(field).arg(expected.unwrap_or(0)).arg(body);
        self.totp_event(&mut invocation, scope, event);
        let mut connection = self.connections.get();
        let written: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(written == 1)
    }

    async fn delete_totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        event: Option<&OutboxEntry>,
    ) -> Result<bool, StoreError> {
        if sid == ENTITY {
            return Ok(false);
        }
        let mut invocation = Invocation::of(&DELETE_ONE);
        invocation.key(keys::totp_records(scope, identity));
        invocation.arg(sid);
        self.totp_event(&mut invocation, scope, event);
        let mut connection = self.connections.get();
        let removed: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(removed == 1)
    }

    async fn delete_totp_identity(&self, scope: &str, identity: &str) -> Result<bool, StoreError> {
        let mut invocation = Invocation::of(&DELETE);
        invocation.key(keys::totp_entities(scope));
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
