//! The quotas role: sliding-window budgets shared by many destinations (per client, per
//! tenant, per email domain, global, a Twilio Service's buckets), reserved together in one
//! atomic step and released when a send's message does not go out.

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;
use crate::domain::Client;

/// "At most `limit` events in any `window`", kept as a sliding-window log of event times, so
/// the limit holds for every window, not just aligned ones: no burst at a window's edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaRule {
    pub limit: u32,
    pub window: Duration,
}

impl QuotaRule {
    /// The rule, or none when `limit` is 0 (off).
    pub fn new(limit: u32, window: Duration) -> Option<Self> {
        (limit > 0).then_some(Self { limit, window })
    }
}

/// Identifies one event in a quota log, so that an event whose SMS was never sent can be taken
/// back out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaToken(pub u64);

impl QuotaToken {
    pub fn generate() -> Self {
        Self(rand::random())
    }
}

/// Quota logs that are not per phone (per-phone logs share the phone's hash tag and are
/// checked inside the code scripts). All of them live together (one Redis hash tag, one lock
/// in memory), so one send's budgets are reserved in one atomic step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaScope {
    /// SMS sends of one client (address or IPv6 network).
    ClientIp(std::net::IpAddr),
    /// Captchas created by one client.
    CaptchaClient(std::net::IpAddr),
    Global,
    /// Code emails to one recipient domain: the first 8 bytes of the domain's SHA-256 (a
    /// fixed-size name keeps the scope `Copy`; [`QuotaScope::email_domain`]).
    EmailDomain(u64),
    /// Sends of one end user a tenant named by its own key (`Client::EndUser`'s digest): the
    /// per-client budget, as `ClientIp` is a browser's.
    EndUser(u64),
    /// Sends of one tenant (an API-key caller or a Twilio account): its own budget, in place
    /// of its server address's.
    Tenant(u64),
    /// Starts counted in one Bucket of a Twilio Service's Rate Limit for one value: a keyed
    /// digest of (Bucket, value).
    Bucket(u64),
    /// Wrong TOTP codes of one client against one identity (`crate::totp`): a digest of
    /// (scope, identity, client).
    TotpFailures(u64),
}

impl QuotaScope {
    /// The per-client budget's scope of `client`.
    pub fn client(client: Client) -> Self {
        match client {
            Client::Address(address) => Self::ClientIp(address),
            Client::EndUser(digest) => Self::EndUser(digest),
        }
    }

    /// The scope of the code emails to `domain` (lower-case A-labels, as `EmailAddress` keeps
    /// it).
    pub fn email_domain(domain: &str) -> Self {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(domain.as_bytes());
        let mut first = [0; 8];
        first.copy_from_slice(&digest[..8]);
        Self::EmailDomain(u64::from_be_bytes(first))
    }
}

/// The scope's log name, the same in every store (`ip:203.0.113.7`, `domain:<16 hex>`, …).
impl std::fmt::Display for QuotaScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ClientIp(ip) => write!(f, "ip:{ip}"),
            Self::CaptchaClient(ip) => write!(f, "captcha:{ip}"),
            Self::Global => f.write_str("global"),
            Self::EmailDomain(domain) => write!(f, "domain:{domain:016x}"),
            Self::EndUser(digest) => write!(f, "user:{digest:016x}"),
            Self::Tenant(digest) => write!(f, "tenant:{digest:016x}"),
            Self::Bucket(digest) => write!(f, "bucket:{digest:016x}"),
            Self::TotpFailures(digest) => write!(f, "totp:{digest:016x}"),
        }
    }
}

/// A budget one send draws on besides its phone's: a quota log and its rules.
#[derive(Clone, Copy, Debug)]
pub struct Budget<'a> {
    pub scope: QuotaScope,
    pub rules: &'a [QuotaRule],
}

/// The budgets one send draws on besides its phone's, and the event it records in each.
#[derive(Clone, Copy, Debug)]
pub struct Budgets<'a> {
    pub budgets: &'a [Budget<'a>],
    pub token: QuotaToken,
}

impl Budgets<'_> {
    /// A send that draws on no budget but its phone's.
    pub fn none() -> Budgets<'static> {
        Budgets {
            budgets: &[],
            token: QuotaToken(0),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaDecision {
    Granted,
    /// Nothing was recorded: `scope` is the first budget without room, and every budget has
    /// room again after `retry_after`.
    Exceeded {
        scope: QuotaScope,
        retry_after: Duration,
    },
}

/// Budgets shared by many phones: per client address and global.
#[async_trait]
pub trait QuotaStore: Send + Sync + 'static {
    /// Records one event (`token`) in every budget's log if each of their rules has room, in
    /// one atomic step; otherwise records nothing.
    async fn reserve_quota(
        &self,
        budgets: &[Budget<'_>],
        token: QuotaToken,
    ) -> Result<QuotaDecision, StoreError>;

    /// Takes a reserved event back out of the `scopes` logs (its SMS was not sent).
    async fn release_quota(
        &self,
        scopes: &[QuotaScope],
        token: QuotaToken,
    ) -> Result<(), StoreError>;
}
