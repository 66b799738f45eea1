//! Email addresses a code may be sent to: normalised (the domain lower-cased and in IDNA
//! A-labels, the local part kept as written) and checked against RFC 5321's lengths and a
//! narrow grammar, so that no value that passed can change a header or an SMTP command.
//!
//! What is accepted is deliberately less than RFC 5322 allows: a dot-atom local part of ASCII
//! `atext` (no quoted strings, comments, display names or SMTPUTF8 local parts) and a domain
//! name of at least two labels (no IP literals, no dotless names). The rest is refused as
//! [`InvalidEmail`]; real mailboxes outside it are vanishingly rare, while every header trick
//! needs one of the characters it leaves out.

use std::fmt;

/// A normalised, checked address: `local@domain`, the domain in lower-case A-labels.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct EmailAddress {
    address: String,
    /// Where the `@` is.
    at: usize,
}

/// Why an address was refused: each is a request error (`400`, "invalid email").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidEmail {
    /// No `@`, more than one, or nothing on one side of it.
    NotOneAt,
    /// A control character (CR, LF, NUL, tab…), a Unicode line or paragraph separator, a space,
    /// or another character outside an address (`<`, `>`, `"`, `(`, `,`, `;`, `\`…).
    ForbiddenCharacter,
    /// Not a dot-atom (a leading, trailing or doubled dot), non-ASCII, or an RFC 2047
    /// encoded word (`=?utf-8?…`).
    BadLocalPart,
    /// More than 64 octets before the `@`.
    LocalPartTooLong,
    /// Not a domain name of two or more labels (IDNA's rules, STD3 characters, DNS lengths),
    /// or an all-numeric top label (`1.2.3.4`). IP literals (`[127.0.0.1]`) stop earlier, at
    /// their brackets.
    BadDomain,
    /// More than 254 octets in all (RFC 5321's path less its angle brackets).
    TooLong,
}

impl InvalidEmail {
    /// What the client is told: which rule the address broke, never the address.
    pub fn reason(self) -> &'static str {
        match self {
            Self::NotOneAt => "an email address has exactly one @ with text on both sides",
            Self::ForbiddenCharacter => {
                "an email address has no spaces, control characters, line breaks, quotes, \
                 angle brackets, parentheses, commas, semicolons or backslashes"
            }
            Self::BadLocalPart => {
                "the part before @ is ASCII letters, digits and !#$%&'*+-/=?^_`~, with dots \
                 between them"
            }
            Self::LocalPartTooLong => "the part before @ is at most 64 characters",
            Self::BadDomain => "the part after @ is a domain name such as example.com",
            Self::TooLong => "an email address is at most 254 characters",
        }
    }
}

impl fmt::Display for InvalidEmail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for InvalidEmail {}

/// RFC 5321 4.5.3.1: the local part and the whole path less its `<>`. The domain's 255 is
/// kept tighter by IDNA's DNS lengths (253 in all, 63 a label).
const MAX_LOCAL: usize = 64;
const MAX_ADDRESS: usize = 254;
/// Input longer than this is refused before any work (a domain's IDNA mapping can shrink it,
/// so the real limits are checked on the normalised form).
const MAX_INPUT: usize = 1024;

impl EmailAddress {
    /// Checks and normalises `input`. A space or tab anywhere, around the address too, is
    /// refused as inside it (docs/email.md): an address is sent as it was checked.
    pub fn parse(input: &str) -> Result<Self, InvalidEmail> {
        if input.len() > MAX_INPUT {
            return Err(InvalidEmail::TooLong);
        }
        // Before anything else: whatever the grammar below would say, these never pass.
        if input.chars().any(forbidden) {
            return Err(InvalidEmail::ForbiddenCharacter);
        }
        let (local, domain) = match input.split_once('@') {
            Some((local, domain)) if !local.is_empty() && !domain.is_empty() => (local, domain),
            _ => return Err(InvalidEmail::NotOneAt),
        };
        if domain.contains('@') {
            return Err(InvalidEmail::NotOneAt);
        }
        check_local(local)?;
        let domain = normalise_domain(domain)?;
        let address = format!("{local}@{domain}");
        if address.len() > MAX_ADDRESS {
            return Err(InvalidEmail::TooLong);
        }
        Ok(Self {
            at: local.len(),
            address,
        })
    }

    /// The whole address, `local@domain`: what the envelope and the `To:` header carry.
    /// Never log it: logs take [`EmailAddress::masked`] (or `Display`).
    pub fn as_str(&self) -> &str {
        &self.address
    }

    /// The part before the `@`, as written.
    pub fn local_part(&self) -> &str {
        &self.address[..self.at]
    }

    /// The domain, lower-case A-labels (`xn--bcher-kva.example`): what per-domain limits count.
    pub fn domain(&self) -> &str {
        &self.address[self.at + 1..]
    }

    /// The address lower-cased whole: the local part is case-sensitive for delivery, but
    /// nearly every mail system ignores its case, so limits per address count this form
    /// (`John@x.com` and `john@x.com` are one budget).
    pub fn folded(&self) -> String {
        self.address.to_ascii_lowercase()
    }

    /// The mailbox the address reaches (issue 39): folded to lower case, a `+tag` dropped
    /// (`ann+news@` is `ann@`), and for the providers that ignore dots in the local part, the
    /// dots (`a.n.n@gmail.com`, `ann@googlemail.com` and `ann@gmail.com` are one). What the
    /// stores name a code's records and budgets after, and the fraud guard counts: twelve
    /// spellings of one mailbox are one budget. The mail still goes to the address as written.
    pub fn mailbox(&self) -> String {
        let folded = self.folded();
        let (local, domain) = folded.split_at(self.at);
        let domain = &domain[1..];
        // A local part that starts with `+` is all tag: kept whole.
        let local = match local.find('+') {
            Some(at) if at > 0 => &local[..at],
            _ => local,
        };
        match domain {
            "gmail.com" | "googlemail.com" => {
                let undotted: String = local.chars().filter(|c| *c != '.').collect();
                // A local part of dots alone is no Gmail address: kept as written.
                let local = if undotted.is_empty() {
                    local
                } else {
                    &undotted
                };
                format!("{local}@gmail.com")
            }
            _ => format!("{local}@{domain}"),
        }
    }

    /// The form used in logs: the first character of the local part, `***`, and the domain
    /// (`j***@example.com`), enough to correlate reports without exposing users.
    pub fn masked(&self) -> String {
        let first = self.local_part().chars().next().unwrap_or('*');
        format!("{first}***@{}", self.domain())
    }
}

/// Characters no address of ours holds anywhere: controls (C0, DEL, C1 with NEL), the
/// Unicode line and paragraph separators, spaces, and RFC 5322's specials but `@` and `.`
/// (display names, quoted strings, comments, routes, lists, literals and escapes).
fn forbidden(c: char) -> bool {
    c.is_control()
        || c.is_whitespace()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '<' | '>' | '"' | '(' | ')' | ',' | ';' | ':' | '\\' | '['
                | ']'
        )
        // Zero-width and bidirectional controls: invisible in a header, and no domain or
        // ASCII local part needs them.
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// A dot-atom of ASCII `atext` (RFC 5322 3.2.3) less `{`, `|` and `}`, at most 64 octets, with
/// no encoded word. The three are left out because the stores name records after the address
/// and use them as delimiters (Redis hash tags, the event log's field separator); no mailbox
/// one meets needs them.
fn check_local(local: &str) -> Result<(), InvalidEmail> {
    if local.len() > MAX_LOCAL {
        return Err(InvalidEmail::LocalPartTooLong);
    }
    let atext = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`~".contains(&b);
    let dot_atom = local
        .split('.')
        .all(|atom| !atom.is_empty() && atom.bytes().all(atext));
    // `=?charset?q?…?=` is decoded by some mail clients even inside an address.
    if !dot_atom || local.contains("=?") {
        return Err(InvalidEmail::BadLocalPart);
    }
    Ok(())
}

/// The domain in lower-case A-labels (UTS 46, STD3 characters, DNS lengths): `Bücher.Example`
/// → `xn--bcher-kva.example`. Two labels or more, and a top label with a letter.
fn normalise_domain(domain: &str) -> Result<String, InvalidEmail> {
    // IDNA maps some dots (`。`, `．`) to `.`, so the raw text is checked for a trailing dot
    // after the mapping, as an empty last label.
    let ascii = idna::domain_to_ascii_strict(domain).map_err(|_| InvalidEmail::BadDomain)?;
    let labels: Vec<&str> = ascii.split('.').collect();
    let top = labels.last().copied().unwrap_or_default();
    let well_formed = labels.len() >= 2
        && labels.iter().all(|label| !label.is_empty())
        && top.bytes().any(|b| b.is_ascii_alphabetic())
        && ascii
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !well_formed {
        return Err(InvalidEmail::BadDomain);
    }
    Ok(ascii)
}

// Debug and Display are masked so that an address can never reach a log in full by accident.
impl fmt::Debug for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EmailAddress({})", self.masked())
    }
}

impl fmt::Display for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(input: &str) -> String {
        EmailAddress::parse(input)
            .unwrap_or_else(|e| panic!("{input:?} refused: {e:?}"))
            .as_str()
            .to_owned()
    }

    #[test]
    fn spaces_around_an_address_are_refused_as_inside_it() {
        for input in [
            "  user@example.com",
            "user@example.com\t",
            " user@example.com ",
        ] {
            assert_eq!(
                EmailAddress::parse(input).map(|_| ()),
                Err(InvalidEmail::ForbiddenCharacter),
                "{input:?}"
            );
        }
    }

    #[test]
    fn domains_are_lower_cased_and_idna_encoded_and_local_parts_kept() {
        for (input, normal) in [
            ("John.Doe@Example.COM", "John.Doe@example.com"),
            ("user+tag@example.com", "user+tag@example.com"),
            ("a@Bücher.Example", "a@xn--bcher-kva.example"),
            ("a@例子.测试", "a@xn--fsqu00a.xn--0zwm56d"),
            // Full-width letters and the ideographic full stop map to their ASCII forms.
            ("a@ＥＸＡＭＰＬＥ。com", "a@example.com"),
            (
                "x!#$%&'*+-/?=^_`~y@example.com",
                "x!#$%&'*+-/?=^_`~y@example.com",
            ),
            ("a@sub-1.example.co.uk", "a@sub-1.example.co.uk"),
        ] {
            assert_eq!(parsed(input), normal, "{input:?}");
        }
        let address = EmailAddress::parse("John@Bücher.Example").unwrap();
        assert_eq!(address.local_part(), "John");
        assert_eq!(address.domain(), "xn--bcher-kva.example");
        assert_eq!(address.folded(), "john@xn--bcher-kva.example");
        assert_eq!(address.mailbox(), "john@xn--bcher-kva.example");
    }

    /// Every value that could add a header, a recipient or an SMTP command, or that the
    /// grammar leaves out, with the rule it breaks.
    #[test]
    fn the_header_injection_corpus_is_refused() {
        use InvalidEmail::*;
        let long_local = format!("{}@example.com", "a".repeat(65));
        let long_label = format!("a@{}.com", "b".repeat(64));
        let long_domain = format!("a@{}com", "abcdefghi.".repeat(26));
        let long_whole = format!("{}@{}com", "a".repeat(64), "b.".repeat(95));
        let huge = "a".repeat(5000);
        for (input, expected) in [
            ("a@b.c\r\nBcc: x@evil.com", ForbiddenCharacter),
            // The stores' delimiters (a Redis hash tag, the event log's separator).
            ("}a@example.com", BadLocalPart),
            ("a{b@example.com", BadLocalPart),
            ("a|b@example.com", BadLocalPart),
            ("a@example.com\nBcc: x@evil.com", ForbiddenCharacter),
            ("a@example.com\rRCPT TO:<x@evil.com>", ForbiddenCharacter),
            ("\"a\r\n\"@b.c", ForbiddenCharacter),
            ("\"a b\"@example.com", ForbiddenCharacter),
            ("\"quoted\"@example.com", ForbiddenCharacter),
            ("a\0@example.com", ForbiddenCharacter),
            ("a@example.com\u{2028}Bcc: x@evil.com", ForbiddenCharacter),
            ("a@example.com\u{2029}x", ForbiddenCharacter),
            ("a@example.com\u{85}Bcc: x@evil.com", ForbiddenCharacter),
            ("a\u{202E}moc.elpmaxe@evil.com", ForbiddenCharacter),
            ("a\u{200B}@example.com", ForbiddenCharacter),
            ("Eve <eve@example.com>", ForbiddenCharacter),
            ("<eve@example.com>", ForbiddenCharacter),
            ("eve@example.com (comment)", ForbiddenCharacter),
            ("eve(comment)@example.com", ForbiddenCharacter),
            ("a@example.com, b@evil.com", ForbiddenCharacter),
            ("a@example.com;b@evil.com", ForbiddenCharacter),
            ("a@example.com,b@evil.com", ForbiddenCharacter),
            ("group:a@example.com;", ForbiddenCharacter),
            ("a\\@b@example.com", ForbiddenCharacter),
            ("a@[127.0.0.1]", ForbiddenCharacter),
            ("a@[IPv6:::1]", ForbiddenCharacter),
            ("a b@example.com", ForbiddenCharacter),
            ("a@b@c", NotOneAt),
            ("a@b@example.com", NotOneAt),
            ("@example.com", NotOneAt),
            ("a@", NotOneAt),
            ("example.com", NotOneAt),
            ("", NotOneAt),
            ("=?utf-8?q?Bcc=3A_x?=@example.com", BadLocalPart),
            ("=?utf-8?b?QmNjOiB4?=@example.com", BadLocalPart),
            (".a@example.com", BadLocalPart),
            ("a.@example.com", BadLocalPart),
            ("a..b@example.com", BadLocalPart),
            ("jöhn@example.com", BadLocalPart),
            ("a@127.0.0.1", BadDomain),
            ("a@localhost", BadDomain),
            ("a@example.com.", BadDomain),
            ("a@.example.com", BadDomain),
            ("a@exa_mple.com", BadDomain),
            ("a@-example.com", BadDomain),
            ("a@example..com", BadDomain),
            ("a@example.com=?utf-8?q?x?=", BadDomain),
            ("a@ex%0d%0aample.com", BadDomain),
            (long_label.as_str(), BadDomain),
            (long_local.as_str(), LocalPartTooLong),
            (long_domain.as_str(), BadDomain),
            (long_whole.as_str(), TooLong),
            (huge.as_str(), TooLong),
        ] {
            assert_eq!(EmailAddress::parse(input), Err(expected), "{input:?}");
        }
    }

    #[test]
    fn lengths_are_rfc_5321s() {
        let local = "a".repeat(64);
        assert!(EmailAddress::parse(&format!("{local}@example.com")).is_ok());
        // 64 + 1 + 189 = 254: the longest path; one more is refused.
        let domain = |first: usize| {
            format!(
                "{}.{}.{}.com",
                "b".repeat(first),
                "c".repeat(61),
                "d".repeat(61)
            )
        };
        let at_most = format!("{local}@{}", domain(61));
        assert_eq!(at_most.len(), 254);
        assert!(EmailAddress::parse(&at_most).is_ok(), "{at_most}");
        let over = format!("{local}@{}", domain(62));
        assert_eq!(EmailAddress::parse(&over), Err(InvalidEmail::TooLong));
    }

    #[test]
    fn logs_see_the_first_letter_and_the_domain() {
        let address = EmailAddress::parse("john.doe@Example.com").unwrap();
        assert_eq!(address.masked(), "j***@example.com");
        assert_eq!(address.to_string(), "j***@example.com");
        assert_eq!(format!("{address:?}"), "EmailAddress(j***@example.com)");
        assert!(!format!("{address:?}").contains("john"));
    }

    #[test]
    fn a_mailbox_folds_tags_everywhere_and_dots_where_the_provider_ignores_them() {
        let mailbox = |raw: &str| EmailAddress::parse(raw).unwrap().mailbox();
        assert_eq!(mailbox("Victim+1@Example.com"), "victim@example.com");
        assert_eq!(mailbox("victim+a+b@example.com"), "victim@example.com");
        assert_eq!(
            mailbox("v.i.c.t.i.m@example.com"),
            "v.i.c.t.i.m@example.com"
        );
        assert_eq!(mailbox("V.i.c.t.i.m+12@GMail.com"), "victim@gmail.com");
        assert_eq!(mailbox("victim@googlemail.com"), "victim@gmail.com");
        assert_eq!(mailbox("+news@example.com"), "+news@example.com");
        let written = EmailAddress::parse("V.ictim+12@gmail.com").unwrap();
        assert_eq!(
            written.as_str(),
            "V.ictim+12@gmail.com",
            "the mail goes as written"
        );
    }
}
