//! The embedded store: pending codes in sharded in-process maps. Each operation is one critical
//! section on one shard; expiry is enforced on every read and a background sweep frees memory.

mod captchas;
mod codes;
mod dev_inbox;
mod events;
mod factors;
mod fraud;
mod fused;
mod health;
mod idempotency;
mod levels;
mod pow;
mod quotas;
mod receipts;
mod safe_list;
mod stats;
mod twilio;
mod verifications;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use siphasher::sip128::{Hasher128, SipHasher13};
use smallvec::SmallVec;

use super::{
    Budget, Budgets, CodeCandidate, DEV_INBOX_CAPACITY, DEV_INBOX_TTL, DeliveryCount,
    DeliveryStatus, DeliveryTransition, DevMessage, Ending, Fact, IssueKind, IssueOutcome,
    IssueParams, IssueUndo, IssuedCode, OutboxEntry, PendingCode, PreviousIssue, QuotaDecision,
    QuotaRule, QuotaScope, QuotaToken, Receipt, ReceiptOutcome, ResendPolicy, SendMark, StoreError,
    StoredCaptcha, VerificationRecord, VerificationStatus, VerificationTarget, VerifyOutcome,
    VerifyParams,
};
use crate::domain::{
    CaptchaId, CodeDigest, Destination, Phone, Purpose, SealedCode, VerificationId,
};

/// Enough shards that 2–64 worker threads rarely meet on one lock, few enough to sweep cheaply.
const SHARDS: usize = 64;

/// The background sweep takes a map's shards in this many rounds, one round a tick: an expired
/// entry (which no read returns) is freed within this many ticks. A whole sweep every second
/// walked every entry each second, the live ones (most of them) included: 3.4 % of the process's
/// CPU under sends with every default on, about 800k sends held (perf, 2026-12-07).
const SWEEP_ROUNDS: usize = 16;

#[derive(Debug)]
struct PendingEntry {
    digest: CodeDigest,
    /// Only with `ResendPolicy::Reuse`.
    sealed: Option<SealedCode>,
    failed_attempts: u32,
    deliveries: u32,
    sent_at_ms: u64,
    expires_at_ms: u64,
    /// The latest send that delivered it: a verify by phone ends that verification (while it
    /// is pending and bound to this code) and tells its events.
    verification: VerificationId,
}

/// What a verification was sent for, as one string: its code's key (`<destination>:<purpose>`),
/// one allocation where a `VerificationTarget`'s two strings were two on every send.
#[derive(Debug)]
struct StoredTarget {
    key: Box<str>,
    /// Where the destination ends in `key`.
    colon: usize,
}

impl StoredTarget {
    fn of(destination: &Destination, purpose: &Purpose) -> Self {
        Self {
            key: [destination.key(), ":", purpose.as_str()].concat().into(),
            colon: destination.key().len(),
        }
    }

    fn destination(&self) -> &str {
        &self.key[..self.colon]
    }

    fn purpose(&self) -> &str {
        &self.key[self.colon + 1..]
    }

    fn to_target(&self) -> VerificationTarget {
        VerificationTarget {
            phone_e164: self.destination().to_owned(),
            purpose: self.purpose().to_owned(),
        }
    }
}

/// One send's verification: what it was sent for, the code it was sent with, its own attempts.
#[derive(Debug)]
struct VerificationEntry {
    target: StoredTarget,
    /// The digest of the code this send delivered: the id verifies only that code.
    digest: CodeDigest,
    /// Set once the id has ended: approved, canceled or spent.
    ended: Option<VerificationStatus>,
    delivery: DeliveryStatus,
    /// The provider's error code an `undelivered` receipt gave.
    delivery_error: Option<Box<str>>,
    failed_attempts: u32,
    /// The id verifies until then (the store's clock).
    verifies_until_ms: u64,
    /// The record is kept until then, for its status (the store's clock).
    retained_until_ms: u64,
    /// Unix ms, for the answer (the store's clock is monotonic, not the wall clock).
    created_at_unix_ms: u64,
    expires_at_unix_ms: u64,
}

impl Expiring for VerificationEntry {
    fn expires_at_ms(&self) -> u64 {
        self.retained_until_ms
    }
}

/// A provider's message: the verification whose SMS it carried.
#[derive(Debug)]
struct MessageEntry {
    verification: VerificationId,
    /// The fraud guard's mark of the send, if it counted it.
    guarded: Option<SendMark>,
    retained_until_ms: u64,
}

impl Expiring for MessageEntry {
    fn expires_at_ms(&self) -> u64 {
        self.retained_until_ms
    }
}

#[derive(Debug)]
struct CaptchaEntry {
    captcha: StoredCaptcha,
    expires_at_ms: u64,
}

#[derive(Debug)]
struct IdempotencyEntry {
    record: Box<[u8]>,
    expires_at_ms: u64,
}

impl Expiring for IdempotencyEntry {
    fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

/// A sliding-window log: event times (ms, ascending) with their tokens. Its first event is kept
/// inline: most logs (a phone's, a client's) never hold a second, and a buffer of their own
/// was a heap allocation and 64 bytes more for each of a send's two new logs.
#[derive(Debug, Default)]
struct QuotaLog {
    events: SmallVec<[(u64, QuotaToken); 1]>,
    expires_at_ms: u64,
}

fn longest_window_ms(rules: &[QuotaRule]) -> u64 {
    rules
        .iter()
        .map(|rule| duration_ms(rule.window))
        .max()
        .unwrap_or(0)
}

impl QuotaLog {
    /// 0 if every rule has room for one more event at `now`, else the ms until one does.
    fn wait(&mut self, now: u64, rules: &[QuotaRule]) -> u64 {
        let horizon = now.saturating_sub(longest_window_ms(rules));
        let expired = self.events.partition_point(|(at, _)| *at <= horizon);
        if expired > 0 {
            self.events.drain(..expired);
        }
        rules
            .iter()
            .filter_map(|rule| {
                let window = duration_ms(rule.window);
                let since = now.saturating_sub(window);
                let first = self.events.partition_point(|(at, _)| *at <= since);
                let count = self.events.len() - first;
                let limit = rule.limit as usize;
                // The window has room again once this event leaves it.
                (count >= limit).then(|| self.events[first + count - limit].0 + window - now)
            })
            .max()
            .unwrap_or(0)
    }

    fn record(&mut self, now: u64, rules: &[QuotaRule], token: QuotaToken) {
        let longest = longest_window_ms(rules);
        if longest == 0 {
            return;
        }
        // Callers read the clock before taking the lock, so keep the log sorted.
        let at = self.events.partition_point(|(time, _)| *time <= now);
        self.events.insert(at, (now, token));
        self.expires_at_ms = self.expires_at_ms.max(now.saturating_add(longest));
    }

    fn remove(&mut self, token: QuotaToken) {
        self.events.retain(|(_, t)| *t != token);
    }
}

#[derive(Default)]
struct DevInbox {
    messages: VecDeque<DevMessage>,
    expires_at_ms: u64,
}

/// Entries that expire, so the sweep can drop them.
trait Expiring {
    fn expires_at_ms(&self) -> u64;
}

impl Expiring for PendingEntry {
    fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

impl Expiring for CaptchaEntry {
    fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

impl Expiring for QuotaLog {
    fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

impl Expiring for DevInbox {
    fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

/// One shard: keys boxed rather than `String`, 8 bytes less in every bucket.
type Shard<V, K = Box<str>, S = RandomState> = Mutex<HashMap<K, V, S>>;

/// A map split into independently locked shards.
struct Shards<V, K = Box<str>, S = RandomState> {
    shards: Box<[Shard<V, K, S>]>,
    /// Picks a key's shard. Not SipHash, as the maps in the shards are: keys aimed at one shard
    /// would only make it one map under one lock, which flooding cannot make slower than a map
    /// unsharded; the second SipHash of every key cost 200 instructions a lock.
    picker: foldhash::fast::RandomState,
}

/// The hot maps (codes, verifications, quota logs): keyed by [`HashedKey`]s.
type Hashed<V> = Shards<V, HashedKey, PassHash>;

impl<V: Expiring, K, S: Default> Shards<V, K, S> {
    fn new(count: usize) -> Self {
        Self {
            shards: (0..count).map(|_| Mutex::default()).collect(),
            picker: foldhash::fast::RandomState::default(),
        }
    }

    fn index<Q: std::hash::Hash + ?Sized>(&self, key: &Q) -> usize {
        self.picker.hash_one(key) as usize % self.shards.len()
    }

    /// The shards of all `keys` locked together, in index order (so two callers never wait
    /// on each other crosswise): one critical section over keys in different shards.
    fn lock_all<'a, Q: std::hash::Hash + 'a>(
        &self,
        keys: impl IntoIterator<Item = &'a Q>,
    ) -> LockedShards<'_, V, K, S> {
        let mut indices: SmallVec<[usize; 4]> = keys.into_iter().map(|k| self.index(k)).collect();
        indices.sort_unstable();
        indices.dedup();
        LockedShards {
            guards: indices
                .into_iter()
                .map(|index| (index, lock(&self.shards[index])))
                .collect(),
            shards: self,
        }
    }

    /// Drops the expired entries of the shards whose index is `round` modulo
    /// [`SWEEP_ROUNDS`], one shard at a time, so a request waits for one shard at most.
    fn sweep_round(&self, now_ms: u64, round: usize) -> usize {
        self.shards
            .iter()
            .skip(round % SWEEP_ROUNDS)
            .step_by(SWEEP_ROUNDS)
            .map(|shard| sweep_map(&mut lock(shard), now_ms))
            .sum()
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }
}

impl<V: Expiring> Shards<V> {
    fn lock(&self, key: &str) -> MutexGuard<'_, HashMap<Box<str>, V>> {
        lock(&self.shards[self.index(key)])
    }
}

impl<V: Expiring> Hashed<V> {
    fn lock(&self, key: HashedKey) -> MutexGuard<'_, HashMap<HashedKey, V, PassHash>> {
        lock(&self.shards[self.index(&key)])
    }
}

/// A shard's index and its map, locked.
type LockedShard<'a, V, K, S> = (usize, MutexGuard<'a, HashMap<K, V, S>>);

/// Some shards of one [`Shards`], held together.
struct LockedShards<'a, V, K, S = RandomState> {
    guards: SmallVec<[LockedShard<'a, V, K, S>; 4]>,
    shards: &'a Shards<V, K, S>,
}

impl<V: Expiring, K, S: Default> LockedShards<'_, V, K, S> {
    /// The map holding `key`, which must be one of the keys the shards were locked for.
    fn map<Q: std::hash::Hash + ?Sized>(&mut self, key: &Q) -> &mut HashMap<K, V, S> {
        let index = self.shards.index(key);
        let (_, guard) = self
            .guards
            .iter_mut()
            .find(|(locked, _)| *locked == index)
            .expect("a key of the locked shards");
        guard
    }
}

pub struct MemoryStore {
    /// The keys of `codes`, `verifications` and `quotas`, hashed under this store's own key.
    keys: KeyHasher,
    codes: Hashed<PendingEntry>,
    /// By verification id. Lock order everywhere: a code's shard, then a verification's shard,
    /// then a quota log's.
    verifications: Hashed<VerificationEntry>,
    /// By `<provider> <message id>`, for the delivery receipts.
    messages: Shards<MessageEntry>,
    captchas: Shards<CaptchaEntry>,
    /// The phones' send logs and failure logs, and the (phone, client) failure logs.
    quotas: Hashed<QuotaLog>,
    /// Client and global budgets, in shards of their own: a send reserves in all of its budgets
    /// at once, under their shards' locks together. Under one lock, a million clients' logs
    /// were swept every second and rehashed as they grew while every send waited (a p99 of
    /// about 100 ms in the round where they doubled; 6 ms in shards). Keyed by the scope
    /// itself: its log name would be formatted twice a budget on every send.
    budgets: Shards<QuotaLog, QuotaScope>,
    idempotency: Shards<IdempotencyEntry>,
    /// Daily counters by date; a handful of small maps.
    stats: Mutex<BTreeMap<String, HashMap<String, u64>>>,
    /// Dev mode only, so a few shards do.
    dev_inboxes: Shards<DevInbox>,
    /// Used proof-of-work challenges, by digest.
    pow_replays: Shards<pow::SolvedPow>,
    /// The fraud guard's counts and blocks: one lock, as every send counts in the service's.
    fraud: Mutex<fraud::FraudState>,
    /// The guard's levels and returning destinations (bounded: levels.rs).
    levels: Mutex<levels::LevelState>,
    /// Events written with the changes (taken last, inside any other lock).
    events: events::EventOutbox,
    /// The receipts' delivery counts by (hour, provider, country), taken inside a
    /// verification's lock by the receipt that counts.
    delivery_counts: Mutex<BTreeMap<(u64, String, String), DeliveryCount>>,
    /// The Twilio-compatible API's Services, by account.
    twilio_services: twilio::Services,
    /// Its verifications' send logs, by Service and phone.
    twilio_sends: Shards<twilio::SendLog>,
    /// The fraud guard's safe list as operators and tenants change it.
    safe_list: safe_list::SafeList,
    /// Authenticator-app entities, factors and challenges, by scope and identity.
    factors: factors::Factors,
    /// Monotonic origin of the store's millisecond clock: wall-clock jumps cannot shorten or
    /// stretch a TTL.
    epoch: Instant,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self {
            keys: KeyHasher::random(),
            codes: Shards::new(SHARDS),
            verifications: Shards::new(SHARDS),
            messages: Shards::new(SHARDS),
            delivery_counts: Mutex::default(),
            captchas: Shards::new(SHARDS),
            quotas: Shards::new(SHARDS),
            budgets: Shards::new(SHARDS),
            idempotency: Shards::new(SHARDS),
            stats: Mutex::default(),
            dev_inboxes: Shards::new(4),
            pow_replays: Shards::new(SHARDS),
            fraud: Mutex::default(),
            levels: Mutex::default(),
            events: events::EventOutbox::default(),
            twilio_services: Mutex::default(),
            twilio_sends: Shards::new(SHARDS),
            safe_list: Mutex::default(),
            factors: Mutex::default(),
            epoch: Instant::now(),
        }
    }
}

/// A key of the hot maps (codes, verifications, quota logs): a keyed 128-bit SipHash of what it
/// names, kept in the table's own bucket. Keyed by text, each entry's key was an allocation of
/// its own, read again (a cache miss in a table of millions) whenever its table grew and rehashed
/// it, and hashed twice a lookup (its shard, its bucket). A hashed key is 16 bytes in place,
/// made once a request, and its low half is the table's hash. Under each store's own random key
/// and 128 bits wide, no two of a store's keys meet (the birthday bound is 2^64 keys) and no one
/// can aim keys at one bucket.
///
/// Two halves, not a `u128`: aligned to 8 bytes, not 16, it pads no table's bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HashedKey {
    low: u64,
    high: u64,
}

impl HashedKey {
    fn of(hasher: SipHasher13) -> Self {
        let hash = hasher.finish128();
        Self {
            low: hash.h1,
            high: hash.h2,
        }
    }
}

/// The low half alone: a uniform hash already (the equality still compares both halves).
impl Hash for HashedKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.low);
    }
}

/// What a hashed key names, hashed first: the quota logs hold phones' send logs and both kinds
/// of failure logs in one map, and a phone's two must not hash alike.
#[derive(Clone, Copy)]
enum KeyKind {
    Code = 1,
    Verification,
    Sends,
    PhoneFailures,
    ClientFailures,
    /// A fraud-guard level's scope (levels.rs).
    Level,
}

/// Makes a store's [`HashedKey`]s under its random key.
struct KeyHasher {
    k0: u64,
    k1: u64,
}

impl KeyHasher {
    fn random() -> Self {
        Self {
            k0: rand::random(),
            k1: rand::random(),
        }
    }

    fn start(&self, kind: KeyKind) -> SipHasher13 {
        let mut hasher = SipHasher13::new_with_keys(self.k0, self.k1);
        hasher.write_u8(kind as u8);
        hasher
    }

    fn hash(&self, kind: KeyKind, parts: &[&str]) -> HashedKey {
        let mut hasher = self.start(kind);
        for part in parts {
            // Each part's length first: ("ab", "c") and ("a", "bc") are two keys.
            hasher.write_usize(part.len());
            hasher.write(part.as_bytes());
        }
        HashedKey::of(hasher)
    }

    fn code(&self, destination: &Destination, purpose: &Purpose) -> HashedKey {
        self.hash(KeyKind::Code, &[destination.key(), purpose.as_str()])
    }

    /// The code a verification was sent with, from what the verification keeps.
    fn code_of(&self, target: &StoredTarget) -> HashedKey {
        self.hash(KeyKind::Code, &[target.destination(), target.purpose()])
    }

    fn verification(&self, id: &VerificationId) -> HashedKey {
        self.hash(KeyKind::Verification, &[id.as_str()])
    }

    fn sends(&self, destination: &Destination) -> HashedKey {
        self.hash(KeyKind::Sends, &[destination.key()])
    }

    fn phone_failures(&self, destination: &Destination) -> HashedKey {
        self.hash(KeyKind::PhoneFailures, &[destination.key()])
    }

    fn client_failures(
        &self,
        destination: &Destination,
        client: crate::domain::Client,
    ) -> HashedKey {
        let mut hasher = self.start(KeyKind::ClientFailures);
        destination.key().hash(&mut hasher);
        client.hash(&mut hasher);
        HashedKey::of(hasher)
    }
}

/// The tables' hasher of [`HashedKey`]s: the key is a keyed hash already, and its low 64 bits
/// are the table's hash (no second SipHash).
#[derive(Clone, Copy, Default)]
struct PassHash;

impl BuildHasher for PassHash {
    type Hasher = PassHasher;

    fn build_hasher(&self) -> PassHasher {
        PassHasher(0)
    }
}

struct PassHasher(u64);

impl Hasher for PassHasher {
    /// Only [`HashedKey`]s are hashed here, through `write_u64`; anything else is folded in
    /// whole, so that a mistake costs speed, not correctness.
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*byte)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The failure limits a verify is under, the phone's and the (phone, client) one, checked and
/// counted in one place for the verify by code and the verify by id. Both logs are the phone's:
/// one shard of `quotas`, chosen by the phone's key. A log's key is built only when its limit is
/// on, and with both off nothing is locked: a verify then pays nothing for them.
struct FailureLimits<'a>(Option<LockedLogs<'a>>);

/// The phone's shard of failure logs, locked, and the logs whose limit is on.
struct LockedLogs<'a> {
    logs: MutexGuard<'a, HashMap<HashedKey, QuotaLog, PassHash>>,
    limits: [Option<(HashedKey, QuotaRule)>; 2],
}

impl<'a> FailureLimits<'a> {
    /// Locks the phone's failure logs (the caller holds the code's shard already: lock order)
    /// and names the logs whose limit is on.
    fn lock(
        store: &'a MemoryStore,
        destination: &Destination,
        client: crate::domain::Client,
        params: &VerifyParams,
    ) -> Self {
        if params.destination_failures.is_none() && params.client_failures.is_none() {
            return Self(None);
        }
        let phone_key = store.keys.phone_failures(destination);
        let logs = store.quotas.lock(phone_key);
        let limits = [
            params.destination_failures.map(|rule| (phone_key, rule)),
            params
                .client_failures
                .map(|rule| (store.keys.client_failures(destination, client), rule)),
        ];
        Self(Some(LockedLogs { logs, limits }))
    }

    /// 0 if every limit on has room for one more failure at `now`, else the ms until all do.
    fn wait(&mut self, now: u64) -> u64 {
        let Some(LockedLogs { logs, limits }) = &mut self.0 else {
            return 0;
        };
        let mut wait = 0;
        for (log_key, rule) in limits.iter().flatten() {
            if let Some(log) = logs.get_mut(log_key) {
                wait = wait.max(log.wait(now, std::slice::from_ref(rule)));
            }
        }
        wait
    }

    /// Counts one failed verify in every log whose limit is on.
    fn record(self, now: u64) {
        let Some(LockedLogs { mut logs, limits }) = self.0 else {
            return;
        };
        let token = QuotaToken::generate();
        for (log_key, rule) in limits.into_iter().flatten() {
            logs.entry(log_key)
                .or_default()
                .record(now, std::slice::from_ref(&rule), token);
        }
    }
}

/// Drops `map`'s expired entries; how many went.
fn sweep_map<K, V: Expiring, S>(map: &mut HashMap<K, V, S>, now_ms: u64) -> usize {
    let before = map.len();
    map.retain(|_, entry| entry.expires_at_ms() > now_ms);
    before - map.len()
}

/// The wall clock in unix ms: only for times a client is shown, never for an expiry check.
fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, duration_ms)
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A poisoned lock only means another request panicked mid-operation; every operation leaves
/// an entry consistent before it can panic, so the data is still good to use.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl MemoryStore {
    /// A store with a background task that drops expired entries every `sweep_every`. The task
    /// ends when the store is dropped.
    pub fn spawn(sweep_every: Duration) -> Arc<Self> {
        let store = Arc::new(Self::default());
        tokio::spawn(sweep_forever(Arc::downgrade(&store), sweep_every));
        store
    }

    /// Milliseconds on the store's clock. It starts far from zero so that "now minus a
    /// window" never saturates: a fresh store must not read an event at 0 ms as outside every
    /// window.
    fn now_ms(&self) -> u64 {
        const ORIGIN_MS: u64 = 1 << 40;
        ORIGIN_MS + duration_ms(self.epoch.elapsed())
    }

    /// Drops every expired entry; returns how many.
    pub fn sweep(&self) -> usize {
        (0..SWEEP_ROUNDS).map(|round| self.sweep_round(round)).sum()
    }

    /// Drops the expired entries of every map's shards of `round` (modulo [`SWEEP_ROUNDS`]);
    /// returns how many.
    fn sweep_round(&self, round: usize) -> usize {
        let now = self.now_ms();
        self.codes.sweep_round(now, round)
            + self.verifications.sweep_round(now, round)
            + self.messages.sweep_round(now, round)
            + self.captchas.sweep_round(now, round)
            + self.quotas.sweep_round(now, round)
            + self.budgets.sweep_round(now, round)
            + self.idempotency.sweep_round(now, round)
            + self.dev_inboxes.sweep_round(now, round)
            + self.pow_replays.sweep_round(now, round)
            + self.twilio_sends.sweep_round(now, round)
    }

    /// How many codes and captchas are held, expired or not (for tests and measurements).
    pub fn len(&self) -> usize {
        self.codes.len() + self.captchas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

async fn sweep_forever(store: Weak<MemoryStore>, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    for round in (0..SWEEP_ROUNDS).cycle() {
        ticker.tick().await;
        let Some(store) = store.upgrade() else { return };
        let removed = store.sweep_round(round);
        if removed > 0 {
            tracing::debug!(removed, "swept expired codes");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Region;
    use crate::store::{CodeStore, QuotaStore};

    #[tokio::test]
    async fn a_fresh_store_counts_events_in_its_first_window() {
        let store = MemoryStore::default();
        let rules = [QuotaRule::new(1, Duration::from_secs(3600)).unwrap()];
        let budget = [Budget {
            scope: QuotaScope::Global,
            rules: &rules,
        }];
        let first = store
            .reserve_quota(&budget, QuotaToken::generate())
            .await
            .unwrap();
        let second = store
            .reserve_quota(&budget, QuotaToken::generate())
            .await
            .unwrap();
        assert_eq!(first, QuotaDecision::Granted);
        assert!(matches!(second, QuotaDecision::Exceeded { .. }));
    }

    #[test]
    fn hashed_keys_name_one_thing_each() {
        let keys = KeyHasher::random();
        let phone = Destination::from(Phone::parse("13800138000", Region::default()).unwrap());
        let login = Purpose::default();
        assert_eq!(keys.code(&phone, &login), keys.code(&phone, &login));
        // The parts are delimited: ("ab", "c") is not ("a", "bc").
        assert_ne!(
            keys.hash(KeyKind::Code, &["ab", "c"]),
            keys.hash(KeyKind::Code, &["a", "bc"])
        );
        // One phone's logs in the one map of quota logs are three keys.
        let client = crate::domain::Client::from(std::net::IpAddr::from([192, 0, 2, 1]));
        let logs = [
            keys.sends(&phone),
            keys.phone_failures(&phone),
            keys.client_failures(&phone, client),
        ];
        assert!(
            logs.iter()
                .enumerate()
                .all(|(i, a)| logs[i + 1..].iter().all(|b| a != b))
        );
        // Another store, another key: no one can aim keys at one bucket of every store.
        assert_ne!(
            KeyHasher::random().code(&phone, &login),
            keys.code(&phone, &login)
        );
        // The table's hash is the key's low half, as the shard picker reads it.
        let key = keys.code(&phone, &login);
        assert_eq!(PassHash.hash_one(key), key.low);
    }

    #[test]
    fn a_sweep_round_frees_its_shards_and_the_rounds_free_them_all() {
        let logs: Shards<QuotaLog> = Shards::new(SHARDS);
        let keys: Vec<String> = (0..2000).map(|i| format!("+86138{i:08}")).collect();
        for key in &keys {
            let expired = QuotaLog {
                expires_at_ms: 10,
                ..QuotaLog::default()
            };
            logs.lock(key).insert(key.as_str().into(), expired);
        }
        let live = "+8613999999999";
        let kept = QuotaLog {
            expires_at_ms: 1_000,
            ..QuotaLog::default()
        };
        logs.lock(live).insert(live.into(), kept);
        let in_round = |round: usize| {
            keys.iter()
                .filter(|key| logs.index(key.as_str()) % SWEEP_ROUNDS == round)
                .count()
        };
        assert!(in_round(3) > 0);
        assert_eq!(logs.sweep_round(100, 3), in_round(3));
        assert_eq!(logs.len(), keys.len() + 1 - in_round(3));
        let rest: usize = (0..SWEEP_ROUNDS)
            .map(|round| logs.sweep_round(100, round))
            .sum();
        assert_eq!(rest, keys.len() - in_round(3));
        assert_eq!(logs.len(), 1, "the live entry stays");
    }

    #[tokio::test]
    async fn sweep_drops_only_expired_entries() {
        let store = MemoryStore::default();
        let purpose = Purpose::default();
        let params = |ttl_ms| IssueParams {
            ttl: Duration::from_millis(ttl_ms),
            retention: Duration::ZERO,
            cooldown: Duration::ZERO,
            policy: ResendPolicy::Reuse,
            destination_quota: Vec::new(),
            names_latest_send: true,
        };
        for (number, ttl_ms) in [("13800138000", 30), ("13800138001", 60_000)] {
            let destination = Destination::from(Phone::parse(number, Region::default()).unwrap());
            let code = CodeCandidate {
                digest: CodeDigest([7; 16]),
                sealed: None,
                verification: VerificationId::generate(),
                says_where: false,
                send_log: None,
            };
            store
                .issue_code(
                    &destination,
                    &purpose,
                    code,
                    &params(ttl_ms),
                    Budgets::none(),
                )
                .await
                .unwrap();
        }
        assert_eq!(store.len(), 2);
        tokio::time::sleep(Duration::from_millis(60)).await;
        // The code and its verification (kept for no longer than the code here).
        assert_eq!(store.sweep(), 2);
        assert_eq!(store.len(), 1);
    }
}
