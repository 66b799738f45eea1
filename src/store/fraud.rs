//! The fraud guard's role: per-minute counts per destination prefix, country and service,
//! the attributions that let a verify convert its send, and the prefixes' blocks.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use super::StoreError;
use crate::domain::traffic::{LevelCounts, Reason, Tally, Window};

/// One send as the fraud guard counts it: its destination prefix and country, the pending code
/// it is for (`attribution`: E.164 and purpose, so that the verify of that code converts it),
/// a token of its own (so that giving it back never touches another send's mark), and the
/// caller's clock.
#[derive(Clone, Copy, Debug)]
pub struct FraudSend<'a> {
    pub prefix: &'a str,
    pub country: &'a str,
    pub attribution: &'a str,
    pub token: u64,
    pub now_ms: u64,
}

/// What an attribution holds: the minute of the last send of its code, and that send's token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendMark {
    pub minute: u64,
    pub token: u64,
}

/// A prefix's suspension or hold, as the store keeps it (also once over: its strikes are
/// remembered).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PrefixBlock {
    pub prefix: String,
    pub country: String,
    #[serde(with = "reason_text")]
    pub reason: Reason,
    pub since_ms: u64,
    pub until_ms: u64,
    /// Suspensions within the strike memory, this one included (a hold adds none).
    pub strikes: u32,
    /// When the last suspension began (0: never suspended).
    pub struck_ms: u64,
    /// The prefix's judged sends and conversions when it was blocked.
    pub sends: u64,
    pub conversions: u64,
    /// When an operator last lifted a block of it (0: never).
    #[serde(default)]
    pub lifted_ms: u64,
    /// Why, for the operator: a level's verdict names the level and the figures that decided
    /// it (issue 39); empty for the minute guard's (its sends and conversions say it).
    #[serde(default)]
    pub evidence: String,
}

impl PrefixBlock {
    pub fn is_active(&self, now_ms: u64) -> bool {
        self.until_ms > now_ms
    }
}

mod reason_text {
    use super::Reason;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(reason: &Reason, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(reason.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Reason, D::Error> {
        let raw = String::deserialize(d)?;
        Reason::parse(&raw).ok_or_else(|| serde::de::Error::custom("unknown reason"))
    }
}

/// What the guard's one step did with a send.
#[derive(Clone, Debug, PartialEq)]
pub enum Admission {
    /// The prefix is blocked: nothing was counted but a refusal.
    Refused(PrefixBlock),
    /// Counted: the prefix's and the service's counts over the window, this send included,
    /// the prefix's block record if it has one (active only when not enforced), the
    /// mark the attribution held before (to restore on release), and the mark the send was
    /// counted under, which its release, its conversion (through the attribution) and its
    /// receipt then name: the step's minute and token, unless the store chose where to count
    /// it (PostgreSQL sets the token's low bits to a shard no other send of the instance is
    /// writing).
    Admitted {
        prefix: Tally,
        service: Tally,
        block: Option<PrefixBlock>,
        previous: Option<SendMark>,
        mark: SendMark,
        /// The send's levels after counting it, when the store counted them in this step
        /// (`GuardStep::levels`).
        levels: Option<Vec<LevelCounts>>,
    },
}

/// One minute of one scope's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinuteCounts {
    pub minute: u64,
    pub sends: u64,
    pub conversions: u64,
    /// Sends the guard refused (service scope only).
    pub refused: u64,
    /// Sends a receipt called undelivered (`FraudStore::count_undelivered`): counted in
    /// `sends` too.
    pub undelivered: u64,
}

/// The counts of a span of minutes, per minute (minutes without any left out), for the
/// service, each country and each prefix (with its country).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrafficCounts {
    pub service: Vec<MinuteCounts>,
    pub countries: Vec<(String, Vec<MinuteCounts>)>,
    pub prefixes: Vec<(String, String, Vec<MinuteCounts>)>,
}

/// The fraud guard's counts, per minute, per destination prefix, per country and for the
/// service, and the prefixes' blocks: shared by every instance. Its keys are apart from the
/// codes' (on a Cluster, another slot than the phone's): a send's and a verify's steps are
/// their own, unless the code store takes them in its own (`CodeStore::issue_guarded`,
/// `CodeStore::verify_converting`).
#[async_trait]
pub trait FraudStore: Send + Sync + 'static {
    /// The guard's one step per send: refuses it if its prefix is blocked and `enforce` (and
    /// counts the refusal); else counts it (prefix, country, service, in `window.minute`),
    /// marks `attribution` with its minute and token for `attribution_ttl`, and answers the counts
    /// over `window` and the mark it counted the send under (`Admission::Admitted::mark`).
    /// Atomic: concurrent sends are each counted once.
    async fn admit_send(
        &self,
        send: &FraudSend<'_>,
        window: &Window,
        enforce: bool,
        attribution_ttl: Duration,
    ) -> Result<Admission, StoreError>;

    /// Takes an admitted send back out (its SMS did not go out): uncounts it where its
    /// admission counted it (`mark`, the admission's: its minute and token, not the send's
    /// own token), gives the attribution back its `previous` mark if it still holds this
    /// send's (a concurrent send of the same code may have marked it since), and counts a
    /// refusal if `refused`.
    async fn release_send(
        &self,
        send: &FraudSend<'_>,
        mark: SendMark,
        previous: Option<SendMark>,
        refused: bool,
    ) -> Result<(), StoreError>;

    /// A verified code: takes the attribution's minute and, if it is `since_minute` or later
    /// (no attribution is older than a code lives), counts a conversion in that minute
    /// (prefix, country, service). Once per send. Returns the minute converted.
    async fn count_conversion(
        &self,
        attribution: &str,
        prefix: &str,
        country: &str,
        since_minute: u64,
    ) -> Result<Option<u64>, StoreError>;

    /// Records `block` unless the prefix has an active one at `now_ms`; true if recorded.
    async fn block_prefix(&self, block: &PrefixBlock, now_ms: u64) -> Result<bool, StoreError>;

    /// Every block record, active or not.
    async fn prefix_blocks(&self) -> Result<Vec<PrefixBlock>, StoreError>;

    /// Ends the prefix's active block now and notes the lift (its strikes stay); false if
    /// none was active.
    async fn lift_block(&self, prefix: &str, now_ms: u64) -> Result<bool, StoreError>;

    /// A receipt said the send marked `mark` never arrived: moves it, in its minute, from the
    /// sends the judgement reads to the undelivered (prefix, country, service), in the shard
    /// of its token where the store shards. A minute with no send left to move (forgotten
    /// past retention) is left alone. Once per send: the receipt's transition happens once.
    async fn count_undelivered(
        &self,
        prefix: &str,
        country: &str,
        mark: SendMark,
    ) -> Result<(), StoreError>;

    /// The counts of the minutes `from..=to`.
    async fn fraud_traffic(&self, from: u64, to: u64) -> Result<TrafficCounts, StoreError>;
}
