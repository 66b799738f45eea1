//! A send's names as the guard counts them: its prefix (a number range or a mail domain) and
//! its country, laid end to end in the ticket without allocating more than once.

use super::*;

/// The country the guard counts `destination` under ([`Destination::country`]).
pub fn country_of(destination: &Destination) -> String {
    destination.country()
}

/// Writes `country_of` at the end of `names`, without allocating it for a number of a region
/// (a send's ticket; tested).
pub(super) fn push_country(names: &mut String, destination: &Destination) {
    match destination {
        Destination::Phone(phone) => match phone.region() {
            Some(region) => names.push_str(region.as_str()),
            None => names.push_str(&phone.country()),
        },
        Destination::Email(_) => names.push_str(EMAIL_COUNTRY),
    }
}

/// A send's prefix and country one after the other, and where the prefix ends
/// (`Admitted::names`).
pub(super) fn send_names(prefix: &str, destination: &Destination) -> (String, usize) {
    // A country's name is at most `EMAIL` long (tested).
    let mut names = String::with_capacity(prefix.len() + EMAIL_COUNTRY.len());
    names.push_str(prefix);
    let prefix_end = names.len();
    push_country(&mut names, destination);
    (names, prefix_end)
}

/// The destination prefix of `destination`: a phone's calling code and the next `digits`
/// digits (fewer if the number is shorter), without `+`; an email address's domain after an
/// `@` (`@example.com`): a domain is to mail what a number range is to SMS, the unit a pumping
/// attack sends into and whose conversion it drags down.
pub fn prefix_of(destination: &Destination, digits: usize) -> Cow<'_, str> {
    match destination {
        Destination::Phone(phone) => {
            let e164 = &phone.as_e164()[1..];
            let code_len = phone
                .calling_code()
                .checked_ilog10()
                .map_or(1, |l| l as usize + 1);
            Cow::Borrowed(&e164[..(code_len + digits).min(e164.len())])
        }
        Destination::Email(email) => Cow::Owned(format!("@{}", email.address().domain())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{EmailAddress, Phone, Region};

    fn phone(raw: &str) -> Destination {
        Phone::parse(raw, Region::default())
            .unwrap_or_else(|| panic!("{raw} is not valid"))
            .into()
    }

    #[test]
    fn a_prefix_is_the_calling_code_and_the_next_digits() {
        assert_eq!(prefix_of(&phone("+447400123456"), 3), "44740");
        assert_eq!(prefix_of(&phone("+12025550143"), 3), "1202");
        assert_eq!(prefix_of(&phone("13800138000"), 3), "86138");
        assert_eq!(prefix_of(&phone("13800138000"), 1), "861");
        assert_eq!(prefix_of(&phone("+447400123456"), 8), "4474001234");
        assert_eq!(country_of(&phone("+447400123456")), "GB");
        assert_eq!(country_of(&phone("+80012345678")), "001");
    }

    #[test]
    fn an_email_prefix_is_its_domain() {
        let email = Destination::from(EmailAddress::parse("Ann@Mail.Example.COM").unwrap());
        assert_eq!(prefix_of(&email, 3), "@mail.example.com");
        assert_eq!(country_of(&email), crate::domain::EMAIL_COUNTRY);
    }

    #[test]
    fn a_ticket_names_the_send_s_prefix_and_country() {
        let email = Destination::from(EmailAddress::parse("ann@mail.example.com").unwrap());
        for destination in [
            phone("+447400123456"),
            phone("+80012345678"),
            phone("13800138000"),
            email,
        ] {
            let mut names = String::new();
            push_country(&mut names, &destination);
            assert_eq!(names, country_of(&destination));
            assert!(names.len() <= EMAIL_COUNTRY.len(), "{names}");
        }
        let destination = phone("+447400123456");
        let (names, prefix_end) = send_names("44740", &destination);
        assert_eq!(names.capacity(), names.len() + EMAIL_COUNTRY.len() - 2);
        let admitted = Admitted {
            names,
            prefix_end,
            mark: SendMark {
                minute: 0,
                token: 1,
            },
            now_ms: 2,
        };
        let send = admitted.send();
        assert_eq!((send.prefix, send.country, send.now_ms), ("44740", "GB", 2));
    }
}
