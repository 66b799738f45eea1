//! Twilio's Safe List (`/v2/SafeList/Numbers`): numbers an account asks the fraud guard never to
//! judge nor refuse. An account's numbers exempt **that account's sends only**, never another
//! tenant's, a browser's or an API-key caller's (docs/twilio.md says why), and only whole
//! numbers in E.164 (a valid number, not a prefix: one entry is one destination). Kept in the
//! fraud guard's safe list (`fraud::SafeList`) under the account's tenant name, so every
//! instance's guard reads them without a store round trip per send.

use super::{TwilioCompat, TwilioError, sid};
use crate::domain::{Phone, Region};
use crate::fraud::{ListedEntry, SafeListError};
use crate::otp::TenantId;

/// A number of an account's Safe List, as Twilio shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafeListNumber {
    /// `GN…`.
    pub sid: String,
    /// E.164.
    pub phone_number: String,
}

/// The E.164 of a `PhoneNumber` as Twilio asks for it: `+` and the digits of a valid number.
fn e164(raw: &str) -> Option<String> {
    let digits = raw.strip_prefix('+')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Phone::parse(raw, Region::default()).map(|phone| phone.as_e164().to_owned())
}

impl From<SafeListError> for TwilioError {
    fn from(error: SafeListError) -> Self {
        match error {
            SafeListError::Invalid(_) | SafeListError::Configured(_) => {
                Self::InvalidParameter("PhoneNumber")
            }
            SafeListError::Full(most) => Self::TooManyResources("Safe List numbers", most),
            SafeListError::Store(error) => error.into(),
        }
    }
}

impl TwilioCompat {
    fn number(account: &str, entry: &ListedEntry) -> SafeListNumber {
        let phone_number = ["+", &entry.digits].concat();
        SafeListNumber {
            sid: sid::of_safe_number(account, &phone_number),
            phone_number,
        }
    }

    /// Adds `phone_number` to `account`'s Safe List (already there: as it is).
    pub async fn add_safe_number(
        &self,
        account: &str,
        phone_number: Option<&str>,
    ) -> Result<SafeListNumber, TwilioError> {
        let e164 = phone_number
            .and_then(e164)
            .ok_or(TwilioError::InvalidParameter("PhoneNumber"))?;
        let tenant = TenantId::twilio_account(account);
        let (entry, _) = self
            .safe_list
            .add(Some(tenant.as_str()), &e164, account)
            .await?;
        Ok(Self::number(account, &entry))
    }

    /// `phone_number` on `account`'s Safe List (20404 if it is not there, another account's
    /// and the operators' entries included).
    pub async fn safe_number(
        &self,
        account: &str,
        phone_number: &str,
    ) -> Result<SafeListNumber, TwilioError> {
        let not_found = || TwilioError::NotFound(format!("/SafeList/Numbers/{phone_number}"));
        let e164 = e164(phone_number).ok_or_else(not_found)?;
        let tenant = TenantId::twilio_account(account);
        let entry = self
            .safe_list
            .tenant_entry(tenant.as_str(), &e164[1..])
            .await?
            .ok_or_else(not_found)?;
        Ok(Self::number(account, &entry))
    }

    /// Takes `phone_number` off `account`'s Safe List (20404 if it is not there).
    pub async fn remove_safe_number(
        &self,
        account: &str,
        phone_number: &str,
    ) -> Result<(), TwilioError> {
        let not_found = || TwilioError::NotFound(format!("/SafeList/Numbers/{phone_number}"));
        let e164 = e164(phone_number).ok_or_else(not_found)?;
        let tenant = TenantId::twilio_account(account);
        if !self.safe_list.remove(Some(tenant.as_str()), &e164).await? {
            return Err(not_found());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_valid_e164_number_is_a_safe_list_number() {
        assert_eq!(e164("+447400123456").as_deref(), Some("+447400123456"));
        assert_eq!(e164("+8613800138000").as_deref(), Some("+8613800138000"));
        for refused in [
            "",
            "+",
            "447400123456",
            "+44740",
            "+1",
            "+44 7400 123456",
            "+447400123456x",
            "13800138000",
        ] {
            assert_eq!(e164(refused), None, "{refused:?}");
        }
    }
}
