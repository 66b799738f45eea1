//! The list format both credential settings share (`VCODE_API_KEYS`,
//! `VCODE_TWILIO_COMPAT_ACCOUNTS`): entries separated by commas or new lines (blank lines and
//! `#` comments skipped), each `who:sha256hex`, then the caller's own send budget if it sets
//! one (`hour=N day=N`). What `who` may be, and what may not repeat, is each format's own.

use crate::domain::SendBudget;

/// One entry, numbered from 1 for messages.
pub struct CredentialEntry<'a> {
    pub number: usize,
    pub who: &'a str,
    pub digest: [u8; 32],
    pub budget: SendBudget,
}

/// The entries of `text`. `form` is what an entry looks like and `hint` says how to make one,
/// both for the messages, which name an entry by its number and `who`, never its digest.
pub fn credential_entries<'a>(
    text: &'a str,
    form: &str,
    hint: impl Fn(&str) -> String,
) -> Result<Vec<CredentialEntry<'a>>, String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .flat_map(|line| line.split(','))
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .enumerate()
        .map(|(index, entry)| {
            let number = index + 1;
            let (who, rest) = entry
                .split_once(':')
                .ok_or_else(|| format!("entry {number}: expected {form}"))?;
            let rest = rest.trim();
            let (digest, budget) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let budget = SendBudget::parse(budget)
                .map_err(|reason| format!("entry {number} ({who}): {reason}"))?;
            let digest = hex::decode(digest)
                .ok()
                .and_then(|bytes| bytes.try_into().ok())
                .ok_or_else(|| format!("entry {number} ({who}): {}", hint(who)))?;
            Ok(CredentialEntry {
                number,
                who,
                digest,
                budget,
            })
        })
        .collect()
}
