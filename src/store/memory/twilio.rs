//! The embedded store's Twilio-compatible records: each account's Services in one map (one
//! lock for all, as Services change seldom), the send logs in the sharded maps; every
//! compare-and-set is one critical section.

use async_trait::async_trait;

use super::*;
use crate::store::{Revised, TwilioStore};

/// A send log and when it expires (the store's clock).
#[derive(Debug)]
pub(super) struct SendLog {
    record: Revised,
    expires_at_ms: u64,
}

impl Expiring for SendLog {
    fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

/// Services by account, then by SID.
pub(super) type Services = Mutex<HashMap<String, BTreeMap<String, Revised>>>;

fn sends_key(service: &str, destination: &Destination) -> String {
    [service, ":", destination.key()].concat()
}

/// Whether a record at `current` may be replaced by a writer that read `expected`.
fn revision_matches(current: Option<&Revised>, expected: Option<u64>) -> bool {
    current.map(|record| record.revision) == expected
}

fn next(expected: Option<u64>, body: &str) -> Revised {
    Revised {
        revision: expected.map_or(1, |revision| revision + 1),
        body: body.to_owned(),
    }
}

#[async_trait]
impl TwilioStore for MemoryStore {
    async fn twilio_services(&self, account: &str) -> Result<Vec<(String, Revised)>, StoreError> {
        let services = lock(&self.twilio_services);
        Ok(services
            .get(account)
            .map(|own| {
                own.iter()
                    .map(|(sid, record)| (sid.clone(), record.clone()))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn twilio_service(
        &self,
        account: &str,
        sid: &str,
    ) -> Result<Option<Revised>, StoreError> {
        let services = lock(&self.twilio_services);
        Ok(services.get(account).and_then(|own| own.get(sid)).cloned())
    }

    async fn put_twilio_service(
        &self,
        account: &str,
        sid: &str,
        expected: Option<u64>,
        body: &str,
    ) -> Result<bool, StoreError> {
        let mut services = lock(&self.twilio_services);
        let own = services.entry(account.to_owned()).or_default();
        if !revision_matches(own.get(sid), expected) {
            return Ok(false);
        }
        own.insert(sid.to_owned(), next(expected, body));
        Ok(true)
    }

    async fn delete_twilio_service(&self, account: &str, sid: &str) -> Result<bool, StoreError> {
        let mut services = lock(&self.twilio_services);
        Ok(services
            .get_mut(account)
            .is_some_and(|own| own.remove(sid).is_some()))
    }

    async fn twilio_sends(
        &self,
        service: &str,
        destination: &Destination,
    ) -> Result<Option<Revised>, StoreError> {
        let now = self.now_ms();
        let key = sends_key(service, destination);
        let logs = self.twilio_sends.lock(&key);
        Ok(logs
            .get(key.as_str())
            .filter(|log| log.expires_at_ms > now)
            .map(|log| log.record.clone()))
    }

    async fn put_twilio_sends(
        &self,
        service: &str,
        destination: &Destination,
        expected: Option<u64>,
        body: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let key = sends_key(service, destination);
        let mut logs = self.twilio_sends.lock(&key);
        let current = logs
            .get(key.as_str())
            .filter(|log| log.expires_at_ms > now)
            .map(|log| &log.record);
        if !revision_matches(current, expected) {
            return Ok(false);
        }
        let log = SendLog {
            record: next(expected, body),
            expires_at_ms: now.saturating_add(duration_ms(ttl)),
        };
        logs.insert(key.into(), log);
        Ok(true)
    }
}
