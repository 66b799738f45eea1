//! Who the per-client limits count: the failed-verify quota per (destination, client) and the
//! per-client send budget. A browser is its address (IPv6 grouped by its network); an end user
//! that a tenant names is its address grouped the same way, or the tenant's own key for it,
//! kept only as a keyed digest.

use std::fmt;
use std::net::IpAddr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Client {
    /// A browser's address, or an end user's address a tenant named (IPv6 by its network).
    Address(IpAddr),
    /// An end user a tenant named by an opaque key: a keyed digest of (tenant, key), so that
    /// two tenants' users never share a budget and no key is stored.
    EndUser(u64),
}

/// How store keys and logs write a client: an address as it is (the keys browsers had before
/// end users existed), an end user as `u` and 16 hex digits (no address has that form).
impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Address(address) => address.fmt(f),
            Self::EndUser(digest) => write!(f, "u{digest:016x}"),
        }
    }
}

impl From<IpAddr> for Client {
    fn from(address: IpAddr) -> Self {
        Self::Address(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_written_as_it_was_before_end_users() {
        let address: IpAddr = "203.0.113.7".parse().unwrap();
        assert_eq!(Client::Address(address).to_string(), "203.0.113.7");
        assert_eq!(Client::EndUser(0xab).to_string(), "u00000000000000ab");
    }
}
