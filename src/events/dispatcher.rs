//! The dispatcher: claims due events from the store's outbox under a lease (so of several
//! instances one at a time tries an event), posts each to the endpoints that want it and have
//! not taken it yet (signed, `webhook-id` the same on every try), and settles it: done, retry
//! after an exponential backoff, or failed once it has been retried for the retry period.
//! The expiry timer is turned into `verification.expired` here, if the verification is still
//! unresolved when it falls due.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;

use super::settings::{Endpoint, EventSettings};
use super::signature::{ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signature_header};
use super::{EventKind, payload};
use crate::domain::VerificationId;
use crate::sms::http::{PreparedRequest, ProviderClient};
use crate::store::{
    ClaimedEntry, CodeStore, EventStore, Settlement, StoreError, VerificationRecord,
    VerificationStatus, VerificationTarget,
};

/// Events claimed at once: each is one subject's, so they are posted concurrently.
const BATCH: usize = 32;
/// How often the outbox's size is sampled for the metrics.
const STATUS_EVERY: Duration = Duration::from_secs(5);

/// What a claimed event comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ToSend {
    Event(EventKind),
    /// Nothing to send: it leaves the outbox.
    Nothing,
    /// An expiry timer that fell due before its verification expired: looked at again.
    NotYet,
}

/// How long after its time an expiry timer whose verification still reads pending is looked at
/// again, and for how long at most past the verification's expiry.
const TIMER_RECHECK_MS: u64 = 1_000;
const TIMER_PATIENCE_MS: u64 = 5 * 60 * 1000;

/// The expiry timer's outcome: `expired` if the verification is still unresolved, nothing if it
/// was approved, canceled or spent, or is forgotten. The timer is placed by the sending
/// instance's wall clock, while the store decides expiry by its own (the embedded store's
/// monotonic clock, redis-server's, another instance's): a timer that falls due while the
/// verification still reads pending is looked at again, not dropped (it was, and the expired
/// event was lost: a flaky test under load, 2026-12-05), for up to five minutes past the
/// expiry its record states.
fn timer_outcome(record: Option<&VerificationRecord>, now_ms: u64) -> ToSend {
    match record {
        Some(record) if record.status == VerificationStatus::Expired => {
            ToSend::Event(EventKind::Expired)
        }
        Some(record)
            if record.status == VerificationStatus::Pending
                && now_ms < record.expires_at_ms.saturating_add(TIMER_PATIENCE_MS) =>
        {
            ToSend::NotYet
        }
        _ => ToSend::Nothing,
    }
}

pub struct Dispatcher {
    outbox: Arc<dyn EventStore>,
    codes: Arc<dyn CodeStore>,
    settings: EventSettings,
    client: ProviderClient,
}

fn unix_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |now| u64::try_from(now.as_millis()).unwrap_or(u64::MAX))
}

/// A running dispatcher, to stop at shutdown.
pub struct Dispatching {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Dispatching {
    /// Claims no more, and waits (at most `bound`) for the batch under way to settle.
    pub async fn stop(self, bound: Duration) {
        let _ = self.stop.send(true);
        if tokio::time::timeout(bound, self.task).await.is_err() {
            tracing::warn!(
                "event dispatcher: its batch did not settle in time; its leases run out"
            );
        }
    }
}

impl Dispatcher {
    pub fn new(
        outbox: Arc<dyn EventStore>,
        codes: Arc<dyn CodeStore>,
        settings: EventSettings,
    ) -> anyhow::Result<Self> {
        let client = ProviderClient::new("events", settings.timeout)
            .map_err(|e| anyhow::anyhow!("event webhooks' HTTP client: {e}"))?;
        Ok(Self {
            outbox,
            codes,
            settings,
            client,
        })
    }

    /// Long enough for one try (the endpoints are posted at once) and a margin: no other
    /// instance takes the event meanwhile.
    fn lease(&self) -> Duration {
        self.settings.timeout * 2 + Duration::from_secs(5)
    }

    /// Delivers until stopped: a batch as soon as the last one was full, otherwise every poll
    /// interval. [`Dispatching::stop`] lets the batch under way settle (each post has its
    /// timeout) and claims no more: the process then ends holding no lease, so another
    /// instance takes the remaining events at once.
    pub fn spawn(self: Arc<Self>) -> Dispatching {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut sampled = tokio::time::Instant::now() - STATUS_EVERY;
            let mut recording = false;
            while !*stopped.borrow() {
                if !recording {
                    recording = self.outbox.record_events(true).await.is_ok();
                }
                if sampled.elapsed() >= STATUS_EVERY {
                    sampled = tokio::time::Instant::now();
                    self.sample_status().await;
                }
                match self.run_once().await {
                    Ok(claimed) if claimed >= BATCH => continue,
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "event outbox: claim failed"),
                }
                // A dropped handle (never stopped) leaves only the poll.
                tokio::select! {
                    () = tokio::time::sleep(self.settings.poll) => {}
                    Ok(()) = stopped.changed() => {}
                }
            }
        });
        Dispatching { stop, task }
    }

    async fn sample_status(&self) {
        match self.outbox.outbox_status().await {
            Ok(status) => {
                let age = status
                    .oldest_ms
                    .map_or(0, |oldest| unix_now_ms().saturating_sub(oldest) / 1000);
                crate::metrics::set_event_outbox(status.pending, age, status.failed);
            }
            Err(error) => tracing::debug!(%error, "event outbox: status not read"),
        }
    }

    /// Claims one batch, tries each event and settles it; returns how many were claimed.
    pub async fn run_once(&self) -> Result<usize, StoreError> {
        let claims = self.outbox.claim_events(BATCH, self.lease()).await?;
        let count = claims.len();
        join_all(claims.into_iter().map(|claim| self.try_event(claim))).await;
        Ok(count)
    }

    async fn try_event(&self, claim: ClaimedEntry) {
        let settlement = match self.kind_to_send(&claim).await {
            Ok(ToSend::Event(kind)) => self.post_all(&claim, kind).await,
            Ok(ToSend::Nothing) => {
                crate::metrics::count_event_delivery("skipped");
                Settlement::Done
            }
            Ok(ToSend::NotYet) => Settlement::Retry {
                due_ms: unix_now_ms() + TIMER_RECHECK_MS,
                delivered_to: claim.delivered_to,
                error: "its verification has not expired yet by the store's clock".to_owned(),
            },
            // Its lease runs out and a later claim tries again.
            Err(error) => {
                tracing::warn!(%error, "event outbox: verification not read for its expiry");
                return;
            }
        };
        if let Err(error) = self.outbox.settle_event(&claim, &settlement).await {
            // Its lease runs out and it is tried again: at least once.
            tracing::warn!(%error, "event outbox: outcome not recorded");
        }
    }

    /// What `claim` is sent as: itself, or for the expiry timer what [`timer_outcome`] says.
    async fn kind_to_send(&self, claim: &ClaimedEntry) -> Result<ToSend, StoreError> {
        let event = &claim.event;
        if let Some(kind) = super::event_of(event.fact) {
            return Ok(ToSend::Event(kind));
        }
        let Some(id) = VerificationId::parse(&event.subject) else {
            return Ok(ToSend::Nothing);
        };
        // The event names where its verification leads: no index of ids is read.
        let target = (!event.phone_e164.is_empty()).then(|| VerificationTarget {
            phone_e164: event.phone_e164.clone(),
            purpose: event.purpose.clone(),
        });
        let record = self.codes.verification(&id, target.as_ref()).await?;
        Ok(timer_outcome(record.as_ref(), unix_now_ms()))
    }

    /// Posts the event to every endpoint that wants it and has not taken it, at once.
    async fn post_all(&self, claim: &ClaimedEntry, kind: EventKind) -> Settlement {
        let event = &claim.event;
        let id = event.webhook_id();
        let body = payload(event, kind);
        let owed: Vec<(usize, &Endpoint)> = self
            .settings
            .endpoints
            .iter()
            .enumerate()
            .filter(|(at, endpoint)| claim.delivered_to & (1 << at) == 0 && endpoint.wants(kind))
            .collect();
        if owed.is_empty() {
            // No endpoint's filter wants it.
            crate::metrics::count_event_delivery("skipped");
            return Settlement::Done;
        }
        let tries = owed
            .iter()
            .map(|(_, endpoint)| self.post(endpoint, &id, &body));
        let results = join_all(tries).await;
        let mut delivered_to = claim.delivered_to;
        let mut errors = Vec::new();
        for ((at, endpoint), result) in owed.iter().zip(results) {
            match result {
                Ok(()) => delivered_to |= 1 << at,
                Err(error) => errors.push(format!("{}: {error}", redact(&endpoint.url))),
            }
        }
        if errors.is_empty() {
            crate::metrics::count_event_delivery("delivered");
            tracing::debug!(webhook_id = %id, kind = kind.as_str(), "event delivered");
            return Settlement::Done;
        }
        let error = errors.join("; ");
        let attempts = claim.attempts + 1;
        let now = unix_now_ms();
        let since = event.order_ms.min(now);
        let retry_for = u64::try_from(self.settings.retry_for.as_millis()).unwrap_or(u64::MAX);
        if now.saturating_sub(since) >= retry_for {
            crate::metrics::count_event_delivery("failed");
            tracing::warn!(webhook_id = %id, kind = kind.as_str(), attempts, %error, "event given up after the retry period: kept for a replay");
            return Settlement::Failed {
                delivered_to,
                error,
            };
        }
        crate::metrics::count_event_delivery("retry");
        let wait = self.settings.backoff_after(attempts);
        tracing::info!(webhook_id = %id, kind = kind.as_str(), attempts, retry_in_ms = wait.as_millis() as u64, %error, "event not delivered: will retry");
        Settlement::Retry {
            due_ms: now + u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            delivered_to,
            error,
        }
    }

    /// One signed POST; a 2xx answer is delivered, anything else is retried.
    async fn post(&self, endpoint: &Endpoint, id: &str, body: &[u8]) -> Result<(), String> {
        let timestamp = unix_now_ms() / 1000;
        let request = PreparedRequest {
            method: reqwest::Method::POST,
            url: endpoint.url.clone(),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                (ID_HEADER.into(), id.to_owned()),
                (TIMESTAMP_HEADER.into(), timestamp.to_string()),
                (
                    SIGNATURE_HEADER.into(),
                    signature_header(&endpoint.secrets, id, timestamp, body),
                ),
            ],
            body: body.to_vec(),
        };
        let answer = self
            .client
            .execute(request)
            .await
            .map_err(|e| e.to_string())?;
        if (200..300).contains(&answer.status) {
            Ok(())
        } else {
            Err(format!("HTTP {}", answer.status))
        }
    }
}

/// The URL without user info or query, for logs and the failed list.
fn redact(url: &str) -> String {
    crate::config::redact::redact_urls(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{DeliveryStatus, VerificationTarget};

    fn record(status: VerificationStatus, expires_at_ms: u64) -> VerificationRecord {
        VerificationRecord {
            target: VerificationTarget {
                phone_e164: "+8613800138000".into(),
                purpose: "login".into(),
            },
            status,
            delivery: DeliveryStatus::Sent,
            failed_attempts: 0,
            created_at_ms: expires_at_ms - 300_000,
            expires_at_ms,
            delivery_error: None,
        }
    }

    #[test]
    fn an_expiry_timer_early_by_the_store_s_clock_is_looked_at_again_not_dropped() {
        let expires = 1_700_000_000_000;
        let expired = record(VerificationStatus::Expired, expires);
        assert_eq!(
            timer_outcome(Some(&expired), expires),
            ToSend::Event(EventKind::Expired)
        );
        // Due by the sender's clock, still pending by the store's: again in a second.
        let pending = record(VerificationStatus::Pending, expires);
        assert_eq!(timer_outcome(Some(&pending), expires + 5), ToSend::NotYet);
        assert_eq!(timer_outcome(Some(&pending), expires - 5), ToSend::NotYet);
        // Not forever: a record pending five minutes past its stated expiry is let go.
        assert_eq!(
            timer_outcome(Some(&pending), expires + TIMER_PATIENCE_MS),
            ToSend::Nothing
        );
        for ended in [VerificationStatus::Approved, VerificationStatus::Canceled] {
            assert_eq!(
                timer_outcome(Some(&record(ended, expires)), expires),
                ToSend::Nothing
            );
        }
        assert_eq!(timer_outcome(None, expires), ToSend::Nothing);
    }
}
