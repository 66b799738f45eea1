//! The verifications of the embedded store: one entry per send's id, bound to the code that send
//! delivered, with its own attempts. A verify by id holds the code's shard, then the id's, then
//! the failure logs': one critical section, as `verify_code`. The providers' messages lead to
//! their verification, whose delivery a receipt moves under the verification's lock.

use super::*;
use crate::domain::Region;
use crate::store::{DELIVERY_COUNTS_KEPT_HOURS, DeliveryCount, add_delivery, unix_hour};

impl MemoryStore {
    /// Records the verification of a send that delivers the code of digest `digest` (the
    /// caller holds that code's shard).
    pub(super) fn bind_verification(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        id: &VerificationId,
        digest: CodeDigest,
        now: u64,
        params: &IssueParams,
    ) {
        let ttl = duration_ms(params.ttl);
        let created_at_unix_ms = unix_now_ms();
        let entry = VerificationEntry {
            target: StoredTarget::of(destination, purpose),
            digest,
            ended: None,
            delivery: DeliveryStatus::Sent,
            delivery_error: None,
            failed_attempts: 0,
            verifies_until_ms: now.saturating_add(ttl),
            retained_until_ms: now
                .saturating_add(ttl)
                .saturating_add(duration_ms(params.retention)),
            created_at_unix_ms,
            expires_at_unix_ms: created_at_unix_ms.saturating_add(ttl),
        };
        let expires_at_ms = entry.expires_at_unix_ms;
        let key = self.keys.verification(id);
        self.verifications.lock(key).insert(key, entry);
        if self.events.is_on() {
            let created = |fact| {
                OutboxEntry::of_verification(
                    fact,
                    id.as_str(),
                    destination.key(),
                    purpose.as_str(),
                    created_at_unix_ms,
                )
            };
            self.events.append(
                created(Fact::Created).with_detail(format!("expires_at_ms={expires_at_ms}")),
            );
            self.events
                .append(created(Fact::ExpiryDue).placed_at(expires_at_ms));
        }
    }

    /// Appends an event of the verification `entry` (the caller holds its shard), its detail
    /// made only when events are on.
    pub(super) fn verification_event(
        &self,
        fact: Fact,
        id: &VerificationId,
        entry: &VerificationEntry,
        detail: impl FnOnce() -> String,
    ) {
        if !self.events.is_on() {
            return;
        }
        let detail = detail();
        self.events.append(
            OutboxEntry::of_verification(
                fact,
                id.as_str(),
                entry.target.destination(),
                entry.target.purpose(),
                unix_now_ms(),
            )
            .with_detail(detail),
        );
    }

    pub(super) fn locate(&self, id: &VerificationId) -> Option<VerificationTarget> {
        self.read_target(self.keys.verification(id), StoredTarget::to_target)
    }

    /// `read` of what the verification of key `key` was sent for, while its record is kept.
    fn read_target<T>(&self, key: HashedKey, read: impl FnOnce(&StoredTarget) -> T) -> Option<T> {
        let now = self.now_ms();
        self.verifications
            .lock(key)
            .get(&key)
            .filter(|entry| entry.retained_until_ms > now)
            .map(|entry| read(&entry.target))
    }

    pub(super) fn verify_id(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        id: &VerificationId,
        candidates: &[CodeDigest],
        client: crate::domain::Client,
        params: VerifyParams,
    ) -> VerifyOutcome {
        let key = self.keys.code(destination, purpose);
        let id_key = self.keys.verification(id);
        let now = self.now_ms();
        let mut codes = self.codes.lock(key);
        let mut verifications = self.verifications.lock(id_key);
        let Some(verification) = verifications
            .get_mut(&id_key)
            .filter(|entry| entry.retained_until_ms > now)
        else {
            return VerifyOutcome::CodeExpired;
        };
        match verification.ended {
            Some(VerificationStatus::Canceled) => return VerifyOutcome::Canceled,
            Some(VerificationStatus::MaxAttemptsReached) => return VerifyOutcome::Destroyed,
            Some(_) => return VerifyOutcome::CodeExpired,
            None if verification.verifies_until_ms <= now => return VerifyOutcome::CodeExpired,
            None => {}
        }
        let mut limits = FailureLimits::lock(self, destination, client, &params);
        let wait = limits.wait(now);
        if wait > 0 {
            return VerifyOutcome::QuotaExceeded {
                retry_after: Duration::from_millis(wait),
            };
        }
        let bound = codes.get(&key).is_some_and(|code| {
            code.expires_at_ms > now
                && code
                    .digest
                    .is_any_of(std::slice::from_ref(&verification.digest))
        });
        if !bound {
            return VerifyOutcome::CodeExpired;
        }
        if verification.digest.is_any_of(candidates) {
            codes.remove(&key);
            verification.ended = Some(VerificationStatus::Approved);
            self.verification_event(Fact::Ended(Ending::Approved), id, verification, String::new);
            return VerifyOutcome::Verified;
        }
        limits.record(now);
        verification.failed_attempts += 1;
        let failed = verification.failed_attempts;
        let attempts = || format!("attempts={failed}");
        self.verification_event(Fact::AttemptFailed, id, verification, attempts);
        if verification.failed_attempts >= params.max_attempts {
            verification.ended = Some(VerificationStatus::MaxAttemptsReached);
            self.verification_event(
                Fact::Ended(Ending::MaxAttemptsReached),
                id,
                verification,
                attempts,
            );
            return VerifyOutcome::Destroyed;
        }
        VerifyOutcome::Mismatch {
            remaining_attempts: params.max_attempts - verification.failed_attempts,
        }
    }

    /// The verification of key `id_key` in its locked shard, while it is pending and bound to
    /// the code of `digest` (a verify by phone's code): a canceled or spent one, or one rolled
    /// back, takes nothing.
    pub(super) fn bound_verification<'a>(
        &self,
        verifications: &'a mut HashMap<HashedKey, VerificationEntry, PassHash>,
        id_key: HashedKey,
        digest: CodeDigest,
        now: u64,
    ) -> Option<&'a mut VerificationEntry> {
        verifications.get_mut(&id_key).filter(|entry| {
            entry.retained_until_ms > now
                && entry.ended.is_none()
                && entry.digest.is_any_of(std::slice::from_ref(&digest))
        })
    }

    /// A verify by phone matched the code `verification` (its latest send's) was bound to:
    /// approved, as by its id.
    pub(super) fn approve_by_destination(
        &self,
        id: &VerificationId,
        verification: &mut VerificationEntry,
    ) {
        verification.ended = Some(VerificationStatus::Approved);
        self.verification_event(Fact::Ended(Ending::Approved), id, verification, String::new);
    }

    /// A verify by phone missed: the verification counts the code's failed attempts (or one
    /// more than its own, if a verify under its id counted more) and is spent with the code.
    pub(super) fn fail_by_destination(
        &self,
        id: &VerificationId,
        verification: &mut VerificationEntry,
        code_failed_attempts: u32,
        destroyed: bool,
    ) {
        let failed = code_failed_attempts.max(verification.failed_attempts + 1);
        verification.failed_attempts = failed;
        let attempts = || format!("attempts={failed}");
        self.verification_event(Fact::AttemptFailed, id, verification, attempts);
        if destroyed {
            verification.ended = Some(VerificationStatus::MaxAttemptsReached);
            self.verification_event(
                Fact::Ended(Ending::MaxAttemptsReached),
                id,
                verification,
                attempts,
            );
        }
    }

    /// The verification, canceled first when `cancel` and still pending.
    pub(super) fn read_verification(
        &self,
        id: &VerificationId,
        cancel: bool,
    ) -> Option<VerificationRecord> {
        let id_key = self.keys.verification(id);
        let (target, key) = self.read_target(id_key, |target| {
            (target.to_target(), self.keys.code_of(target))
        })?;
        let now = self.now_ms();
        let codes = self.codes.lock(key);
        let mut verifications = self.verifications.lock(id_key);
        let entry = verifications
            .get_mut(&id_key)
            .filter(|entry| entry.retained_until_ms > now)?;
        let live = entry.ended.is_none()
            && entry.verifies_until_ms > now
            && codes.get(&key).is_some_and(|code| {
                code.expires_at_ms > now
                    && code.digest.is_any_of(std::slice::from_ref(&entry.digest))
            });
        if cancel && live {
            entry.ended = Some(VerificationStatus::Canceled);
            self.verification_event(Fact::Ended(Ending::Canceled), id, entry, String::new);
        }
        let status = match entry.ended {
            Some(ended) => ended,
            None if live => VerificationStatus::Pending,
            None => VerificationStatus::Expired,
        };
        Some(VerificationRecord {
            target,
            status,
            delivery: entry.delivery,
            failed_attempts: entry.failed_attempts,
            created_at_ms: entry.created_at_unix_ms,
            expires_at_ms: entry.expires_at_unix_ms,
            delivery_error: entry.delivery_error.as_deref().map(str::to_owned),
        })
    }

    pub(super) fn set_unconfirmed(&self, id: &VerificationId) {
        let key = self.keys.verification(id);
        if let Some(entry) = self.verifications.lock(key).get_mut(&key) {
            entry.delivery = DeliveryStatus::Unconfirmed;
        }
    }
}

impl MemoryStore {
    /// Counts a receipt's final word in this hour's counts (the caller holds the
    /// verification's lock); forgets hours older than the counts are kept.
    pub(super) fn count_delivery(&self, receipt: &Receipt<'_>, phone_e164: &str) {
        let hour = unix_hour(unix_now_ms());
        let country = Phone::parse(phone_e164, Region::default())
            .map_or_else(String::new, |phone| phone.country());
        let mut counts = self
            .delivery_counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (hour, receipt.provider.to_owned(), country);
        let count = counts.entry(key.clone()).or_insert_with(|| DeliveryCount {
            hour,
            provider: key.1,
            country: key.2,
            ..DeliveryCount::default()
        });
        add_delivery(count, receipt.delivery);
        let oldest = hour.saturating_sub(DELIVERY_COUNTS_KEPT_HOURS);
        counts.retain(|(counted, _, _), _| *counted >= oldest);
    }
}

pub(super) fn message_key(provider: &str, message_id: &str) -> String {
    [provider, " ", message_id].concat()
}
