//! Which address a request comes from: the socket peer, unless the peer is a trusted proxy;
//! then the right-most address in `X-Forwarded-For` that is not a trusted proxy. Addresses a
//! client wrote itself (to the left of that) are never believed.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

/// `VCODE_TRUSTED_PROXIES`: comma-separated CIDRs or single addresses; empty trusts none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn parse(input: &str) -> Result<Self, String> {
        input
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| {
                IpNet::from_str(item)
                    .or_else(|_| IpAddr::from_str(item).map(IpNet::from))
                    .map_err(|_| format!("{item:?} is not an address or CIDR"))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn trusts(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.0.iter().any(|net| net.contains(&address))
    }

    /// The client address of a request from `peer` carrying `forwarded_for` headers (each may
    /// hold a comma-separated list; several headers read as one list, in order).
    pub fn client_ip<'a>(
        &self,
        peer: IpAddr,
        forwarded_for: impl DoubleEndedIterator<Item = &'a str>,
    ) -> IpAddr {
        let peer = canonical(peer);
        if !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        for hop in forwarded_for.rev().flat_map(|header| header.rsplit(',')) {
            // A hop that does not parse ends the chain we can believe.
            let Ok(address) = IpAddr::from_str(hop.trim()) else {
                break;
            };
            client = canonical(address);
            if !self.trusts(client) {
                break;
            }
        }
        client
    }
}

/// IPv4 written as IPv6 (`::ffff:1.2.3.4`) is the IPv4 address, so quotas count it once.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The group a client address counts in for per-client limits: an IPv4 address alone, an IPv6
/// address with its `/ipv6_prefix` network (one subscriber usually holds a whole /64, so
/// counting its addresses one by one would give it billions of budgets).
pub fn client_group(address: IpAddr, ipv6_prefix: u8) -> IpAddr {
    match canonical(address) {
        IpAddr::V6(v6) => {
            let prefix = u32::from(ipv6_prefix.min(128));
            let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ipv6_clients_are_grouped_by_prefix_and_ipv4_clients_alone() {
        use super::client_group;
        let a: std::net::IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: std::net::IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: std::net::IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_group(a, 64), client_group(b, 64));
        assert_ne!(client_group(a, 64), client_group(c, 64));
        assert_eq!(client_group(a, 48), client_group(c, 48));
        assert_eq!(client_group(a, 128), a);
        assert_eq!(
            client_group(a, 0),
            "::".parse::<std::net::IpAddr>().unwrap()
        );
        let v4: std::net::IpAddr = "203.0.113.7".parse().unwrap();
        assert_eq!(client_group(v4, 64), v4);
        let mapped: std::net::IpAddr = "::ffff:203.0.113.7".parse().unwrap();
        assert_eq!(client_group(mapped, 64), v4);
    }

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client() {
        let none = TrustedProxies::default();
        assert_eq!(
            none.client_ip(ip("203.0.113.7"), ["1.2.3.4"].into_iter()),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn an_untrusted_peer_cannot_spoof_forwarded_for() {
        let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
        assert_eq!(
            proxies.client_ip(ip("203.0.113.7"), ["1.2.3.4"].into_iter()),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn a_trusted_proxy_gives_the_rightmost_untrusted_hop() {
        let proxies = TrustedProxies::parse("10.0.0.0/8, 192.168.1.1").unwrap();
        // The client claims 6.6.6.6; the edge proxy appended the real 198.51.100.9.
        let header = "6.6.6.6, 198.51.100.9, 10.1.2.3";
        assert_eq!(
            proxies.client_ip(ip("192.168.1.1"), [header].into_iter()),
            ip("198.51.100.9")
        );
        // Several headers read as one list.
        assert_eq!(
            proxies.client_ip(
                ip("10.0.0.1"),
                ["6.6.6.6", "198.51.100.9", "10.9.9.9"].into_iter()
            ),
            ip("198.51.100.9")
        );
    }

    #[test]
    fn garbage_in_the_chain_stops_the_walk() {
        let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
        assert_eq!(
            proxies.client_ip(ip("10.0.0.1"), ["1.2.3.4, nonsense, 10.0.0.2"].into_iter()),
            ip("10.0.0.2")
        );
        assert_eq!(
            proxies.client_ip(ip("10.0.0.1"), std::iter::empty()),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn mapped_ipv4_is_ipv4() {
        let proxies = TrustedProxies::parse("127.0.0.1").unwrap();
        assert_eq!(
            proxies.client_ip(ip("::ffff:127.0.0.1"), ["::ffff:198.51.100.9"].into_iter()),
            ip("198.51.100.9")
        );
    }

    #[test]
    fn bad_entries_are_refused() {
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse("proxy.local").is_err());
        assert!(TrustedProxies::parse("").unwrap().is_empty());
    }
}
