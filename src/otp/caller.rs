//! Who asks for a send or a verify, as the limits see it. A browser is anonymous: its client is
//! its address (behind trusted proxies), and the browser gates apply to it. A tenant (an
//! API-key caller, a Twilio account) authenticated itself: it draws on its own budgets, never
//! on its server address's, and may name the end user it asks for, who is then limited as a
//! browser is. Who is counted where is decided here and nowhere else.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use crate::domain::Client;
use crate::keyring::Keyring;
use crate::store::{Budget, QuotaRule, QuotaScope};

/// The longest end-user key a tenant may name.
pub const MAX_END_USER_KEY: usize = 255;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// Anonymous: its client address as the routes read and group it.
    Browser(IpAddr),
    /// An authenticated caller, and the end user it asks for, if it names one.
    Tenant {
        tenant: TenantId,
        end_user: Option<EndUser>,
    },
}

/// A tenant's name, unique across both APIs: `key:<API key name>` or `twilio:<Account SID>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TenantId(Arc<str>);

impl TenantId {
    /// The caller of an API key.
    pub fn api_key(name: &str) -> Self {
        Self(format!("key:{name}").into())
    }

    /// A Twilio-compatible account.
    pub fn twilio_account(account_sid: &str) -> Self {
        Self(format!("twilio:{account_sid}").into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The end user a tenant names: its address (grouped as a browser's is) or the tenant's own
/// opaque key for it (an account id, a session), stored only as a keyed digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndUser {
    Address(IpAddr),
    Key(String),
}

impl EndUser {
    /// The key a tenant sent: 1 to 255 visible ASCII characters.
    pub fn key(raw: &str) -> Option<Self> {
        let valid = (1..=MAX_END_USER_KEY).contains(&raw.len())
            && raw.bytes().all(|byte| byte.is_ascii_graphic());
        valid.then(|| Self::Key(raw.to_owned()))
    }

    /// An address a tenant sent, in any form `IpAddr` reads.
    pub fn address(raw: &str) -> Option<Self> {
        raw.trim().parse().ok().map(Self::Address)
    }
}

impl Caller {
    /// Whether the browser gates (captcha, proof of work) apply whatever the request carries.
    pub fn is_browser(&self) -> bool {
        matches!(self, Self::Browser(_))
    }

    /// The tenant that asks, if one does.
    pub fn tenant(&self) -> Option<&TenantId> {
        match self {
            Self::Browser(_) => None,
            Self::Tenant { tenant, .. } => Some(tenant),
        }
    }
}

/// How logs name a caller: a browser by its address, a tenant by its name (never an end
/// user's key).
impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Browser(address) => address.fmt(f),
            Self::Tenant { tenant, end_user } => match end_user {
                None => tenant.fmt(f),
                Some(EndUser::Address(address)) => write!(f, "{tenant} for {address}"),
                Some(EndUser::Key(_)) => write!(f, "{tenant} for a named end user"),
            },
        }
    }
}

/// The limits that depend on who asks: the per-client budget (a browser's, or a named end
/// user's) and each tenant's own.
pub(super) struct CallerLimits {
    /// Sends per client (`VCODE_QUOTA_IP_HOUR`).
    pub client: Vec<QuotaRule>,
    /// Sends per tenant (`VCODE_QUOTA_TENANT_HOUR`, `_DAY`).
    pub tenant: Vec<QuotaRule>,
    /// The tenants whose entries set their own budget, and its rules.
    pub tenant_budgets: HashMap<TenantId, Vec<QuotaRule>>,
    /// An end user's IPv6 address counts by its network of this length, as a browser's does.
    pub ipv6_prefix: u8,
    pub keyring: Arc<Keyring>,
}

impl CallerLimits {
    /// The client the per-client limits count for `caller`: `None` for a tenant that names no
    /// end user (its own server is never such a client).
    pub fn client(&self, caller: &Caller) -> Option<Client> {
        client_of(
            caller,
            |address| crate::client_ip::client_group(address, self.ipv6_prefix),
            |tenant, key| self.keyring.end_user_digest(tenant.as_str(), key),
        )
    }

    /// The budgets a send by `caller` draws on for who it is (the global one and the
    /// destination's are not the caller's): its client's, and a tenant's own.
    pub fn budgets(&self, caller: &Caller) -> impl Iterator<Item = Budget<'_>> {
        let client = self
            .client(caller)
            .map(|client| (QuotaScope::client(client), self.client.as_slice()));
        let tenant = match caller {
            Caller::Tenant { tenant, .. } => {
                let rules = self.tenant_budgets.get(tenant).unwrap_or(&self.tenant);
                Some((QuotaScope::Tenant(tenant_digest(tenant)), rules.as_slice()))
            }
            Caller::Browser(_) => None,
        };
        client
            .into_iter()
            .chain(tenant)
            .filter(|(_, rules)| !rules.is_empty())
            .map(|(scope, rules)| Budget { scope, rules })
    }
}

/// A tenant's budget name: its name is no secret, a plain digest keeps the scope `Copy`.
fn tenant_digest(tenant: &TenantId) -> u64 {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(tenant.as_str().as_bytes());
    u64::from_be_bytes(
        digest[..8]
            .try_into()
            .expect("a SHA-256 is longer than 8 bytes"),
    )
}

/// A resolved client of the per-client limits: `None` for a tenant that names no end user
/// (its own server is never such a client).
fn client_of(
    caller: &Caller,
    group: impl Fn(IpAddr) -> IpAddr,
    digest: impl Fn(&TenantId, &str) -> u64,
) -> Option<Client> {
    match caller {
        Caller::Browser(address) => Some(Client::Address(*address)),
        Caller::Tenant { end_user: None, .. } => None,
        Caller::Tenant {
            end_user: Some(EndUser::Address(address)),
            ..
        } => Some(Client::Address(group(*address))),
        Caller::Tenant {
            tenant,
            end_user: Some(EndUser::Key(key)),
        } => Some(Client::EndUser(digest(tenant, key))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_user_keys_are_visible_ascii_of_bounded_length() {
        assert!(EndUser::key("user-42").is_some());
        assert!(EndUser::key("").is_none());
        assert!(EndUser::key("has space").is_none());
        assert!(EndUser::key(&"k".repeat(256)).is_none());
        assert!(EndUser::address("2001:db8::1").is_some());
        assert!(EndUser::address("not an address").is_none());
    }

    #[test]
    fn a_tenant_without_an_end_user_is_no_client_and_its_key_never_shows() {
        let tenant = TenantId::api_key("shop");
        let none = Caller::Tenant {
            tenant: tenant.clone(),
            end_user: None,
        };
        assert_eq!(client_of(&none, |a| a, |_, _| 7), None);
        let keyed = Caller::Tenant {
            tenant,
            end_user: Some(EndUser::Key("alice@example.com".into())),
        };
        assert_eq!(client_of(&keyed, |a| a, |_, _| 7), Some(Client::EndUser(7)));
        assert!(!keyed.to_string().contains("alice"));
    }
}
