//! Who may call the Twilio-compatible API: accounts (`AC…`) with their Auth Token, and API keys
//! (`SK…`) with their secret, each acting for one account (`VCODE_TWILIO_COMPAT_ACCOUNTS`).
//! Only SHA-256 digests of the secrets are held; a presented secret is compared with every
//! entry, each in constant time, so the time says neither the secret nor which entry matched.
//! Credentials verified lately are remembered by a keyed digest ([`RecentCredentials`]), so a
//! client's every request does not pay that again.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngExt;
use sha2::{Digest, Sha256};

use super::sid::{self, ACCOUNT, API_KEY};
use crate::api_keys::{CredentialEntry, credential_entries};
use crate::domain::SendBudget;
use crate::domain::secret::constant_time_eq;
use crate::weak_secret::typed_secret_digest;

/// One credential: the user name HTTP Basic carries (an account or API key SID), the account
/// it acts for, and the digest of its secret.
#[derive(Clone)]
struct Credential {
    user: String,
    account: String,
    digest: [u8; 32],
}

/// The configured accounts and API keys.
#[derive(Clone, Default)]
pub struct TwilioAccounts {
    credentials: Vec<Credential>,
    /// The accounts whose entries set a send budget of their own.
    budgets: Vec<(String, SendBudget)>,
}

impl fmt::Debug for TwilioAccounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let users: Vec<&str> = self.credentials.iter().map(|c| c.user.as_str()).collect();
        f.debug_struct("TwilioAccounts")
            .field("users", &users)
            .finish()
    }
}

impl TwilioAccounts {
    /// The first entry whose digest is a typed secret's (`weak_secret::typed_secret_digest`),
    /// named by its SID, never shown.
    pub fn typed_entry(&self) -> Option<String> {
        self.credentials
            .iter()
            .find(|credential| typed_secret_digest(&credential.digest, &credential.user))
            .map(|credential| {
                format!(
                    "the secret of {} is a typed one, not a drawn one (`vcode twilio-account` draws one)",
                    credential.user
                )
            })
    }

    /// Entries separated by commas or new lines (blank lines and `#` comments skipped):
    /// `AC…:sha256hex` (an account and the digest of its Auth Token) or
    /// `AC…/SK…:sha256hex` (an API key of that account and the digest of its secret); an
    /// account's own entry may set its send budget (`AC…:sha256hex hour=N day=N`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut credentials: Vec<Credential> = Vec::new();
        let mut budgets = Vec::new();
        let entries = credential_entries(text, "AC…:sha256hex or AC…/SK…:sha256hex", |_| {
            "expected the secret's SHA-256 as 64 hex digits (`vcode twilio-account` prints an entry)".to_owned()
        })?;
        for CredentialEntry {
            number,
            who,
            digest,
            budget,
        } in entries
        {
            let (account, user) = match who.split_once('/') {
                Some((account, key)) if sid::is_sid(key, API_KEY) => (account, key),
                Some(_) => {
                    return Err(format!(
                        "entry {number}: expected an API key SID (SK and 32 hex digits) after the /"
                    ));
                }
                None => (who, who),
            };
            if !sid::is_sid(account, ACCOUNT) {
                return Err(format!(
                    "entry {number}: expected an account SID (AC and 32 hex digits)"
                ));
            }
            if !budget.is_default() {
                if user != account {
                    return Err(format!(
                        "entry {number} ({user}): a send budget is the account's: set it on {account}'s own entry"
                    ));
                }
                budgets.push((account.to_owned(), budget));
            }
            if credentials.iter().any(|known| known.user == user) {
                return Err(format!("entry {number}: {user} twice"));
            }
            credentials.push(Credential {
                user: user.to_owned(),
                account: account.to_owned(),
                digest,
            });
        }
        if credentials.is_empty() {
            return Err("expected at least one AC…:sha256hex entry".to_owned());
        }
        Ok(Self {
            credentials,
            budgets,
        })
    }

    /// The accounts whose entries set a send budget of their own.
    pub fn budgets(&self) -> impl Iterator<Item = (&str, SendBudget)> {
        self.budgets
            .iter()
            .map(|(account, budget)| (account.as_str(), *budget))
    }

    /// The account `user` acts for, if `secret` is its Auth Token (or its API key's secret).
    pub fn authenticate(&self, user: &str, secret: &str) -> Option<&str> {
        self.find(user, secret).map(|index| self.account_of(index))
    }

    /// Which credential `user` and `secret` are.
    fn find(&self, user: &str, secret: &str) -> Option<usize> {
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let mut found = None;
        for (index, credential) in self.credentials.iter().enumerate() {
            let matches = constant_time_eq(&digest, &credential.digest);
            if matches && credential.user == user {
                found = Some(index);
            }
        }
        found
    }

    fn account_of(&self, credential: usize) -> &str {
        &self.credentials[credential].account
    }

    /// The account HTTP Basic's `encoded` credentials (base64 of `user:secret`) act for,
    /// remembered in `recent` once verified.
    pub fn authenticate_basic(&self, encoded: &str, recent: &RecentCredentials) -> Option<&str> {
        let digest = recent.digest(encoded.as_bytes());
        if let Some(index) = recent.get(digest) {
            return Some(self.account_of(index));
        }
        let decoded = STANDARD.decode(encoded).ok()?;
        let (user, secret) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
        let index = self.find(user, secret)?;
        recent.remember(digest, index);
        Some(self.account_of(index))
    }
}

/// How long a verified credential is believed without its digest compared again.
const RECENT_TTL: Duration = Duration::from_secs(60);

/// At most this many remembered credentials; past it, expired ones go, and all if none had.
const RECENT_MAX: usize = 1024;

/// HTTP Basic credentials verified in the last [`RECENT_TTL`], by a 128-bit keyed digest of
/// their encoded form (SipHash-2-4 under two keys drawn from the CSPRNG at start): which
/// credential each was.
///
/// Why this is safe:
/// - No secret is held: a digest under keys no client knows, of credentials that are
///   themselves random tokens (an Auth Token has 128 bits), says nothing that guessing would use.
/// - Only credentials that passed the constant-time comparison are remembered, so a request
///   that finds an entry presented exactly a valid credential: telling a hit from a miss by
///   its time teaches a client only that its own valid credential was used lately. A wrong
///   secret always takes the full path (digest, comparison with every entry).
/// - The lookup's time depends on the presented credential's digest under unknown keys, never
///   on how close it is to a remembered one; a hit needs all 128 bits equal.
/// - Entries expire: a credential removed from the configuration (a restart reloads it) is
///   never believed past [`RECENT_TTL`]; the map is bounded by [`RECENT_MAX`].
pub struct RecentCredentials {
    keys: [u64; 4],
    entries: Mutex<HashMap<u128, Recent, BuildHasherDefault<DigestHasher>>>,
}

#[derive(Clone, Copy)]
struct Recent {
    credential: usize,
    until: Instant,
}

impl Default for RecentCredentials {
    fn default() -> Self {
        Self {
            keys: rand::rng().random(),
            entries: Mutex::default(),
        }
    }
}

impl RecentCredentials {
    fn digest(&self, presented: &[u8]) -> u128 {
        #[allow(deprecated)] // std's SipHash-2-4 with explicit keys: deprecated, not unsound.
        let half = |k0: u64, k1: u64| {
            let mut hasher = std::hash::SipHasher::new_with_keys(k0, k1);
            hasher.write(presented);
            hasher.finish()
        };
        let [k0, k1, k2, k3] = self.keys;
        (u128::from(half(k0, k1)) << 64) | u128::from(half(k2, k3))
    }

    fn get(&self, digest: u128) -> Option<usize> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(&digest)
            .filter(|recent| recent.until > Instant::now())
            .map(|recent| recent.credential)
    }

    fn remember(&self, digest: u128, credential: usize) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= RECENT_MAX {
            entries.retain(|_, recent| recent.until > now);
            if entries.len() >= RECENT_MAX {
                entries.clear();
            }
        }
        entries.insert(
            digest,
            Recent {
                credential,
                until: now + RECENT_TTL,
            },
        );
    }
}

/// The map's own hash of a digest: its low 64 bits, already uniform and unknown to clients
/// (no second SipHash over it).
#[derive(Default)]
struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u128(&mut self, value: u128) {
        self.0 = value as u64;
    }
}

/// A new account: its SID, its Auth Token (32 hex digits from the CSPRNG, as Twilio's) and the
/// `VCODE_TWILIO_COMPAT_ACCOUNTS` entry that holds the token's digest.
pub fn generate() -> (String, String, String) {
    let account = sid::generate(ACCOUNT);
    let token = hex::encode(rand::rng().random::<[u8; 16]>());
    let entry = format!(
        "{account}:{}",
        hex::encode(Sha256::digest(token.as_bytes()))
    );
    (account, token, entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_entry_authenticates_its_token_only() {
        let (account, token, entry) = generate();
        let accounts = TwilioAccounts::parse(&entry).unwrap();
        assert_eq!(
            accounts.authenticate(&account, &token),
            Some(account.as_str())
        );
        assert_eq!(accounts.authenticate(&account, "0123"), None);
        assert_eq!(accounts.authenticate(&sid::generate(ACCOUNT), &token), None);
    }

    #[test]
    fn an_api_key_acts_for_its_account() {
        let (account, token, entry) = generate();
        let key = sid::generate(API_KEY);
        let secret = "key secret";
        let text = format!(
            "# accounts\n{entry}\n{account}/{key}:{}",
            hex::encode(Sha256::digest(secret))
        );
        let accounts = TwilioAccounts::parse(&text).unwrap();
        assert_eq!(accounts.authenticate(&key, secret), Some(account.as_str()));
        assert_eq!(accounts.authenticate(&key, &token), None);
        assert_eq!(accounts.authenticate(&account, secret), None);
    }

    fn basic(user: &str, secret: &str) -> String {
        STANDARD.encode(format!("{user}:{secret}"))
    }

    #[test]
    fn remembered_credentials_are_those_verified_and_expire() {
        let (account, token, entry) = generate();
        let accounts = TwilioAccounts::parse(&entry).unwrap();
        let recent = RecentCredentials::default();
        let right = basic(&account, &token);
        let wrong = basic(&account, "0123");
        assert_eq!(accounts.authenticate_basic(&wrong, &recent), None);
        assert!(
            recent.entries.lock().unwrap().is_empty(),
            "a failure is remembered"
        );
        for _ in 0..2 {
            assert_eq!(
                accounts.authenticate_basic(&right, &recent),
                Some(account.as_str())
            );
            assert_eq!(accounts.authenticate_basic(&wrong, &recent), None);
        }
        assert_eq!(recent.entries.lock().unwrap().len(), 1);
        // Expired: not believed, verified again and remembered anew.
        let digest = recent.digest(right.as_bytes());
        recent
            .entries
            .lock()
            .unwrap()
            .get_mut(&digest)
            .unwrap()
            .until = Instant::now();
        assert_eq!(recent.get(digest), None);
        assert_eq!(
            accounts.authenticate_basic(&right, &recent),
            Some(account.as_str())
        );
        assert_eq!(recent.get(digest), Some(0));
    }

    #[test]
    fn remembered_credentials_stay_bounded() {
        let recent = RecentCredentials::default();
        for n in 0..RECENT_MAX as u128 + 10 {
            recent.remember(n, 0);
        }
        assert!(recent.entries.lock().unwrap().len() <= RECENT_MAX);
        // Keyed: another instance digests the same credentials otherwise.
        let other = RecentCredentials::default();
        assert_ne!(recent.digest(b"a"), other.digest(b"a"));
    }

    #[test]
    fn malformed_entries_are_refused_without_their_secret() {
        let digest = "ab".repeat(32);
        for text in [
            String::new(),
            "AC0123:".to_owned() + &digest,
            format!("VA0123456789abcdef0123456789abcdef:{digest}"),
            "AC0123456789abcdef0123456789abcdef:abcd".to_owned(),
            format!(
                "AC0123456789abcdef0123456789abcdef/AC0123456789abcdef0123456789abcdef:{digest}"
            ),
            format!(
                "AC0123456789abcdef0123456789abcdef:{digest},AC0123456789abcdef0123456789abcdef:{digest}"
            ),
        ] {
            let error = TwilioAccounts::parse(&text).unwrap_err();
            assert!(!error.contains(&digest), "{error}");
        }
    }
}
