//! Who may call the Twilio-compatible API: accounts (`AC…`) with their Auth Token, and API keys
//! (`SK…`) with their secret, each acting for one account (`VCODE_TWILIO_COMPAT_ACCOUNTS`).
//! Only SHA-256 digests of the secrets are held; a presented secret is compared with every
//! entry, each in constant time, so the time says neither the secret nor which entry matched.

use std::fmt;

use rand::RngExt;
use sha2::{Digest, Sha256};

use super::sid::{self, ACCOUNT, API_KEY};
use crate::domain::secret::constant_time_eq;

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
    /// Entries separated by commas or new lines (blank lines and `#` comments skipped):
    /// `AC…:sha256hex` (an account and the digest of its Auth Token) or
    /// `AC…/SK…:sha256hex` (an API key of that account and the digest of its secret).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut credentials: Vec<Credential> = Vec::new();
        let entries = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.starts_with('#'))
            .flat_map(|line| line.split(','))
            .map(str::trim)
            .filter(|entry| !entry.is_empty());
        for (index, entry) in entries.enumerate() {
            let number = index + 1;
            let (who, digest) = entry.split_once(':').ok_or_else(|| {
                format!("entry {number}: expected AC…:sha256hex or AC…/SK…:sha256hex")
            })?;
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
            let digest: [u8; 32] = hex::decode(digest.trim())
                .ok()
                .and_then(|bytes| bytes.try_into().ok())
                .ok_or_else(|| format!("entry {number} ({user}): expected the secret's SHA-256 as 64 hex digits (`vcode twilio-account` prints an entry)"))?;
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
        Ok(Self { credentials })
    }

    /// The account `user` acts for, if `secret` is its Auth Token (or its API key's secret).
    pub fn authenticate(&self, user: &str, secret: &str) -> Option<&str> {
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let mut found = None;
        for credential in &self.credentials {
            let matches = constant_time_eq(&digest, &credential.digest);
            if matches && credential.user == user {
                found = Some(credential.account.as_str());
            }
        }
        found
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
