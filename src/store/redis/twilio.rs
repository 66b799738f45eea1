//! The Redis store's Twilio-compatible records: each account's Services as the fields of one
//! hash (`verify_code:twilio:{<account>}:services`), each send log a string with its TTL
//! (`verify_code:twilio:sends:{<destination key>}:<service>`, under the destination's hash tag
//! so that the issue creates a first start's log in its own script, `add_send_log`); every
//! other write is `twilio_put.lua`, a compare-and-set on one key. Values are
//! `<revision>:<body>`.

use std::sync::LazyLock;

use async_trait::async_trait;
use redis::Script;

use super::*;
use crate::store::{NewSendLog, Revised, TwilioStore};

static PUT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("twilio_put.lua")));

pub(super) fn decode(value: &str) -> Result<Revised, StoreError> {
    value
        .split_once(':')
        .and_then(|(revision, body)| {
            Some(Revised {
                revision: revision.parse().ok()?,
                body: body.to_owned(),
            })
        })
        .ok_or_else(|| StoreError::Protocol("a Twilio record without its revision".to_owned()))
}

/// A first start's send log as `issue.lua`'s companion record: its key after the script's own
/// (the phone's hash tag), then its value at revision 1, its TTL and the mark.
pub(super) fn add_send_log(
    invocation: &mut Invocation<'_>,
    destination: &Destination,
    log: &NewSendLog,
) {
    let mut value = String::with_capacity(2 + log.body.len());
    value.push_str("1:");
    value.push_str(&log.body);
    invocation
        .key(keys::twilio_sends(&log.service, destination))
        .arg(value)
        .arg(duration_ms(log.ttl).max(1))
        .arg("companion");
}

impl RedisStore {
    pub(super) async fn twilio_put(
        &self,
        key: String,
        field: &str,
        expected: Option<u64>,
        body: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let mut invocation = Invocation::of(&PUT);
        invocation.key(key);
        invocation
            .arg(field)
            .arg(expected.unwrap_or(0))
            .arg(body)
            .arg(duration_ms(ttl).max(1));
        let mut connection = self.connections.get();
        let written: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(written == 1)
    }
}

#[async_trait]
impl TwilioStore for RedisStore {
    async fn twilio_services(&self, account: &str) -> Result<Vec<(String, Revised)>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("HGETALL")
            .arg(keys::twilio_services(account))
            .to_owned();
        let fields: Vec<(String, String)> =
            self.bounded(command.query_async(&mut connection)).await?;
        fields
            .into_iter()
            .map(|(sid, value)| Ok((sid, decode(&value)?)))
            .collect()
    }

    async fn twilio_service(
        &self,
        account: &str,
        sid: &str,
    ) -> Result<Option<Revised>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("HGET")
            .arg(keys::twilio_services(account))
            .arg(sid)
            .to_owned();
        let value: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        value.as_deref().map(decode).transpose()
    }

    async fn put_twilio_service(
        &self,
        account: &str,
        sid: &str,
        expected: Option<u64>,
        body: &str,
    ) -> Result<bool, StoreError> {
        self.twilio_put(
            keys::twilio_services(account),
            sid,
            expected,
            body,
            Duration::ZERO,
        )
        .await
    }

    async fn delete_twilio_service(&self, account: &str, sid: &str) -> Result<bool, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("HDEL")
            .arg(keys::twilio_services(account))
            .arg(sid)
            .to_owned();
        let removed: i64 = self.bounded(command.query_async(&mut connection)).await?;
        Ok(removed == 1)
    }

    async fn twilio_sends(
        &self,
        service: &str,
        destination: &Destination,
    ) -> Result<Option<Revised>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("GET")
            .arg(keys::twilio_sends(service, destination))
            .to_owned();
        let value: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        value.as_deref().map(decode).transpose()
    }

    async fn put_twilio_sends(
        &self,
        service: &str,
        destination: &Destination,
        expected: Option<u64>,
        body: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        self.twilio_put(
            keys::twilio_sends(service, destination),
            "",
            expected,
            body,
            ttl,
        )
        .await
    }
}
