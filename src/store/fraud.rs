//! The fraud guard's role: the prefixes' blocks, which a send's step reads before anything is
//! written, and the traffic report's counts per minute per destination prefix, country and
//! service, which each instance adds up and flushes about once a second (`fraud::traffic`): no
//! send or verify waits for them, and no verdict reads them (the levels judge: `LevelStore`).

use async_trait::async_trait;
use serde::Serialize;

use super::StoreError;
use crate::domain::traffic::{LevelCounts, Reason};

/// One send as the fraud guard's step reads it: its destination prefix, whose block may refuse
/// it, its country (which a recorded block names), and the caller's clock.
#[derive(Clone, Copy, Debug)]
pub struct FraudSend<'a> {
    pub prefix: &'a str,
    pub country: &'a str,
    pub now_ms: u64,
}

/// A send the guard counted, as its delivery receipt hands it back: the minute it was counted
/// in, and a token of its own.
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
    /// The prefix is blocked and the step enforces: nothing was written.
    Refused(PrefixBlock),
    /// Not refused: the prefix's block record if it has one (active only when not enforced).
    Admitted {
        block: Option<PrefixBlock>,
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
    /// Sends a receipt called undelivered: counted in `sends` too.
    pub undelivered: u64,
}

/// What one instance adds to one prefix's minute (`FraudStore::add_traffic`), as
/// [`MinuteCounts`] reads it: `sends` (undelivered ones included), `conversions` and
/// `undelivered` go to the prefix, its country and the service, `refused` to the service
/// alone. Signed: a correction may take back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrafficChange {
    pub prefix: String,
    pub country: String,
    pub minute: u64,
    pub sends: i64,
    pub conversions: i64,
    pub refused: i64,
    pub undelivered: i64,
}

/// The counts of a span of minutes, per minute (minutes without any left out), for the
/// service, each country and each prefix (with its country).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrafficCounts {
    pub service: Vec<MinuteCounts>,
    pub countries: Vec<(String, Vec<MinuteCounts>)>,
    pub prefixes: Vec<(String, String, Vec<MinuteCounts>)>,
}

/// The fraud guard's shared records: the prefixes' blocks, and the traffic report's counts
/// per minute, per destination prefix, per country and for the service. Its keys are apart from
/// the codes' (on a Cluster, another slot than the phone's): a send's step is its own, unless
/// the code store takes it in its own (`FusedSteps::issue_guarded`).
#[async_trait]
pub trait FraudStore: Send + Sync + 'static {
    /// The guard's step of one send: refuses it if its prefix's block is active and `enforce`
    /// (nothing written), else answers the prefix's block record, if any. A read: counting is
    /// the levels' (`LevelStore`) and the traffic report's (`add_traffic`).
    async fn admit_send(
        &self,
        send: &FraudSend<'_>,
        enforce: bool,
    ) -> Result<Admission, StoreError>;

    /// Records `block` unless the prefix has an active one at `now_ms`; true if recorded.
    async fn block_prefix(&self, block: &PrefixBlock, now_ms: u64) -> Result<bool, StoreError>;

    /// Every block record, active or not.
    async fn prefix_blocks(&self) -> Result<Vec<PrefixBlock>, StoreError>;

    /// Ends the prefix's active block now and notes the lift (its strikes stay); false if
    /// none was active.
    async fn lift_block(&self, prefix: &str, now_ms: u64) -> Result<bool, StoreError>;

    /// Adds what one instance counted (`TrafficChange`) to the shared minutes, each kept for
    /// `RETENTION_MINUTES`. The guard only adds; a change that takes a count below 0 (a
    /// caller's correction) reads 0. One call a flush; atomic per change, not across them (a
    /// flush that fails part way is counted again, at most once more: no verdict reads the
    /// report).
    async fn add_traffic(&self, changes: &[TrafficChange]) -> Result<(), StoreError>;

    /// The counts of the minutes `from..=to`.
    async fn fraud_traffic(&self, from: u64, to: u64) -> Result<TrafficCounts, StoreError>;
}
