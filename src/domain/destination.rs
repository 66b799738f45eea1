//! Where a code goes: a phone (by SMS) or an email address (by mail). The OTP use cases and
//! the stores take a `Destination`, so that one send and one verify serve both channels; the
//! stores see only its `key`, the string their keys and rows are named after.

use std::fmt;

use super::{EmailAddress, Phone, PhoneParser};

/// The channel a code travels by: the token's `channel` claim and the metrics' label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Channel {
    Sms,
    Email,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sms => "sms",
            Self::Email => "email",
        }
    }
}

/// An email destination: the address as the request wrote it (normalised), which the mail is
/// addressed to, and its mailbox (`EmailAddress::mailbox`: lower case, `+tag` and Gmail's dots
/// folded), which names its records and budgets.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct EmailDestination {
    address: EmailAddress,
    folded: String,
}

impl EmailDestination {
    pub fn new(address: EmailAddress) -> Self {
        let folded = address.mailbox();
        Self { address, folded }
    }

    /// The address the mail goes to, the local part as written.
    pub fn address(&self) -> &EmailAddress {
        &self.address
    }
}

/// The "country" of every email address: mail has none, so per-country counts see all mail
/// as one.
pub const EMAIL_COUNTRY: &str = "EMAIL";

/// A checked destination.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Destination {
    Phone(Phone),
    Email(EmailDestination),
}

impl Destination {
    /// What the stores name its records after, and the token's `sub`: a phone's E.164
    /// (`+8613800138000`, the layout phones always had), an address folded to its mailbox
    /// (`john@example.com`): `John@`, `john+news@` and `john@` are one mailbox, one code, one
    /// budget, and `j.ohn@gmail.com` is `john@gmail.com`. The two never collide: an E.164
    /// starts with `+` and has no `@`.
    pub fn key(&self) -> &str {
        match self {
            Self::Phone(phone) => phone.as_e164(),
            Self::Email(email) => &email.folded,
        }
    }

    /// The country its traffic counts under (the fraud guard's per-country counts, the
    /// delivery rate): a phone's ISO region, or `001`; every email address's is
    /// [`EMAIL_COUNTRY`].
    pub fn country(&self) -> String {
        match self {
            Self::Phone(phone) => phone.country(),
            Self::Email(_) => EMAIL_COUNTRY.to_owned(),
        }
    }

    pub fn channel(&self) -> Channel {
        match self {
            Self::Phone(_) => Channel::Sms,
            Self::Email(_) => Channel::Email,
        }
    }

    pub fn phone(&self) -> Option<&Phone> {
        match self {
            Self::Phone(phone) => Some(phone),
            Self::Email(_) => None,
        }
    }

    pub fn email(&self) -> Option<&EmailAddress> {
        match self {
            Self::Phone(_) => None,
            Self::Email(email) => Some(&email.address),
        }
    }

    /// A destination from a stored `key` (a verification's target): an address when it holds
    /// an `@`, else a phone.
    pub fn from_key(key: &str, phones: &PhoneParser) -> Option<Self> {
        if key.contains('@') {
            EmailAddress::parse(key)
                .ok()
                .map(|address| Self::Email(EmailDestination::new(address)))
        } else {
            phones.parse(key).map(Self::Phone)
        }
    }

    /// The form logs show: masked (`+86138****8000`, `j***@example.com`).
    pub fn masked(&self) -> String {
        match self {
            Self::Phone(phone) => phone.masked(),
            Self::Email(email) => email.address.masked(),
        }
    }
}

impl From<Phone> for Destination {
    fn from(phone: Phone) -> Self {
        Self::Phone(phone)
    }
}

impl From<EmailAddress> for Destination {
    fn from(address: EmailAddress) -> Self {
        Self::Email(EmailDestination::new(address))
    }
}

/// A stored destination key in the form `Destination::masked` shows.
pub fn masked_key(key: &str) -> String {
    match EmailAddress::parse(key) {
        Ok(address) if key.contains('@') => address.masked(),
        _ => super::masked_e164(key),
    }
}

// Debug and Display are masked, as the phone's and the address's are.
impl fmt::Debug for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Phone(phone) => fmt::Debug::fmt(phone, f),
            Self::Email(email) => fmt::Debug::fmt(&email.address, f),
        }
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

impl fmt::Debug for EmailDestination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.address, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Region;

    #[test]
    fn spellings_of_one_mailbox_are_one_key() {
        let keys: Vec<String> = [
            "victim+1@gmail.com",
            "Vic.tim+2@GMAIL.com",
            "victim@googlemail.com",
        ]
        .into_iter()
        .map(|raw| {
            Destination::from(EmailAddress::parse(raw).unwrap())
                .key()
                .to_owned()
        })
        .collect();
        assert_eq!(keys, ["victim@gmail.com"; 3]);
        let tagged = Destination::from(EmailAddress::parse("Vic.tim+2@gmail.com").unwrap());
        assert_eq!(tagged.email().unwrap().as_str(), "Vic.tim+2@gmail.com");
    }

    #[test]
    fn an_address_is_keyed_folded_and_sent_as_written() {
        let email = Destination::from(EmailAddress::parse("John.Doe@Example.COM").unwrap());
        assert_eq!(email.key(), "john.doe@example.com");
        assert_eq!(email.email().unwrap().as_str(), "John.Doe@example.com");
        assert_eq!(email.channel(), Channel::Email);
        assert_eq!(email.to_string(), "J***@example.com");
    }

    #[test]
    fn stored_keys_read_back_to_their_channel() {
        let phones = PhoneParser::new(Region::default(), 0);
        let phone = Destination::from_key("+8613800138000", &phones).unwrap();
        assert_eq!(phone.channel(), Channel::Sms);
        assert_eq!(phone.key(), "+8613800138000");
        let email = Destination::from_key("a.b@example.com", &phones).unwrap();
        assert_eq!(email.channel(), Channel::Email);
        assert_eq!(email.key(), "a.b@example.com");
        assert!(Destination::from_key("not a key", &phones).is_none());
        assert_eq!(masked_key("a.b@example.com"), "a***@example.com");
        assert_eq!(masked_key("+8613800138000"), "+86138****8000");
    }
}
