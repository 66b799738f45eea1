//! The purpose a code is for (`login`, `reset_password`, ...): codes of different purposes are
//! stored apart and never touch each other.

use std::fmt;

use arrayvec::ArrayString;

/// Kept inline: a purpose is short, and copying one costs no allocation.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Purpose(ArrayString<MAX_LEN>);

const MAX_LEN: usize = 32;

impl Purpose {
    /// `[a-z0-9_-]{1,32}`: safe inside a Redis key and a log line without escaping.
    pub fn parse(input: &str) -> Option<Self> {
        let valid = !input.is_empty()
            && input.len() <= MAX_LEN
            && input
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        ArrayString::from(input).ok().filter(|_| valid).map(Self)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Purpose {
    fn default() -> Self {
        Self(ArrayString::from("login").expect("`login` is a short purpose"))
    }
}

impl fmt::Debug for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Purpose({})", self.0)
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_alphabet() {
        for ok in ["login", "reset_password", "2fa-sms", "a", &"x".repeat(32)] {
            assert_eq!(Purpose::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn refuses_everything_else() {
        for bad in [
            "",
            "Login",
            "log in",
            "login:x",
            "{login}",
            "登录",
            &"x".repeat(33),
        ] {
            assert!(Purpose::parse(bad).is_none(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn default_is_login() {
        assert_eq!(Purpose::default().as_str(), "login");
    }
}
