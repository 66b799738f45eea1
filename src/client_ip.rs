//! Which address a request comes from: the socket peer, unless the peer is a trusted proxy;
//! then the right-most address in `X-Forwarded-For` that is not a trusted proxy. Addresses a
//! client wrote itself (to the left of that) are never believed. A hop the walk reaches that
//! is no address (`unknown`, garbage) leaves the client unknown: see [`UnknownClient`].

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use ipnet::{IpNet, Ipv4Net};

/// `VCODE_TRUSTED_PROXIES`: comma-separated CIDRs or single addresses; empty trusts none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Refuses a list that covers every IPv4 or every IPv6 address (`0.0.0.0/0`, `::/0`,
    /// `::ffff:0:0/96`, or halves that add up to one): every client would then be a trusted
    /// proxy, and write whatever address it likes into `X-Forwarded-For`, where every
    /// per-client limit would read it.
    pub fn parse(input: &str) -> Result<Self, String> {
        let nets: Vec<IpNet> = input
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| {
                IpNet::from_str(item)
                    .or_else(|_| IpAddr::from_str(item).map(IpNet::from))
                    .map(canonical_net)
                    .map_err(|_| format!("{item:?} is not an address or CIDR"))
            })
            .collect::<Result<_, _>>()?;
        if let Some(everything) = IpNet::aggregate(&nets)
            .into_iter()
            .find(|net| net.prefix_len() == 0)
        {
            let family = if everything.addr().is_ipv4() {
                "IPv4"
            } else {
                "IPv6"
            };
            return Err(format!(
                "trusts every {family} address ({everything}): any client could write the address it likes into X-Forwarded-For and escape every per-client limit; list your proxies' addresses only"
            ));
        }
        Ok(Self(nets))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `address` is one of the trusted proxies.
    pub fn trusts(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.0.iter().any(|net| net.contains(&address))
    }

    /// The client address of a request from `peer` carrying `forwarded_for` header values
    /// (each may hold a comma-separated list; several headers read as one list, in order).
    pub fn client_ip<'a>(
        &self,
        peer: IpAddr,
        forwarded_for: impl DoubleEndedIterator<Item = &'a [u8]>,
    ) -> Result<IpAddr, UnknownClient> {
        let peer = canonical(peer);
        if !self.trusts(peer) {
            return Ok(peer);
        }
        let mut client = peer;
        let hops = forwarded_for
            .rev()
            .flat_map(|header| header.rsplit(|&byte| byte == b','))
            .map(<[u8]>::trim_ascii)
            // Empty list elements are no hops (RFC 9110, section 5.6.1).
            .filter(|hop| !hop.is_empty());
        for hop in hops {
            client = hop_address(hop).map(canonical).ok_or(UnknownClient)?;
            if !self.trusts(client) {
                break;
            }
        }
        Ok(client)
    }
}

/// The walk reached a hop that is no address: the trusted proxy that wrote it (`unknown`, an
/// obfuscated name, garbage) does not say who its peer was. No address stands in for it:
/// the proxy's own would put every such client in one budget (one client's sends would
/// refuse everyone's), and the hops to its left are the unknown party's own words (a client
/// would pick its budget). Such a request is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownClient;

/// A hop's address: `192.0.2.7`, `2001:db8::7`, or with the port some proxies add
/// (`192.0.2.7:5040`, `[2001:db8::7]:5040`, `[2001:db8::7]`).
fn hop_address(hop: &[u8]) -> Option<IpAddr> {
    let hop = std::str::from_utf8(hop).ok()?;
    IpAddr::from_str(hop)
        .or_else(|_| SocketAddr::from_str(hop).map(|socket| socket.ip()))
        .ok()
        .or_else(|| {
            let bracketed = hop.strip_prefix('[')?.strip_suffix(']')?;
            std::net::Ipv6Addr::from_str(bracketed).ok().map(IpAddr::V6)
        })
}

/// IPv4 written as IPv6 (`::ffff:1.2.3.4`) is the IPv4 address, so quotas count it once.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// An IPv4 network written as IPv6 (`::ffff:10.0.0.0/104`) is the IPv4 network (`10.0.0.0/8`):
/// addresses are matched in their [`canonical`] form, where no address is a mapped one, so as an
/// IPv6 network it would trust no one.
fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => v6
            .network()
            .to_ipv4_mapped()
            .and_then(|v4| Ipv4Net::new(v4, v6.prefix_len() - 96).ok())
            .map_or(net, IpNet::V4),
        other => other,
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

    /// The client `proxies` see for a request from `peer` with these `X-Forwarded-For` values.
    fn client(
        proxies: &TrustedProxies,
        peer: &str,
        forwarded_for: &[&str],
    ) -> Result<IpAddr, UnknownClient> {
        proxies.client_ip(ip(peer), forwarded_for.iter().map(|value| value.as_bytes()))
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client() {
        let none = TrustedProxies::default();
        assert_eq!(
            client(&none, "203.0.113.7", &["1.2.3.4"]),
            Ok(ip("203.0.113.7"))
        );
    }

    #[test]
    fn an_untrusted_peer_cannot_spoof_forwarded_for() {
        let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
        assert_eq!(
            client(&proxies, "203.0.113.7", &["1.2.3.4"]),
            Ok(ip("203.0.113.7"))
        );
        // Nor make itself unknown.
        assert_eq!(
            client(&proxies, "203.0.113.7", &["garbage"]),
            Ok(ip("203.0.113.7"))
        );
    }

    #[test]
    fn a_trusted_proxy_gives_the_rightmost_untrusted_hop() {
        let proxies = TrustedProxies::parse("10.0.0.0/8, 192.168.1.1").unwrap();
        // The client claims 6.6.6.6; the edge proxy appended the real 198.51.100.9.
        let header = "6.6.6.6, 198.51.100.9, 10.1.2.3";
        assert_eq!(
            client(&proxies, "192.168.1.1", &[header]),
            Ok(ip("198.51.100.9"))
        );
        // Several headers read as one list.
        assert_eq!(
            client(
                &proxies,
                "10.0.0.1",
                &["6.6.6.6", "198.51.100.9", "10.9.9.9"]
            ),
            Ok(ip("198.51.100.9"))
        );
        // A trusted peer that forwards nothing speaks for itself.
        assert_eq!(client(&proxies, "10.0.0.1", &[]), Ok(ip("10.0.0.1")));
    }

    #[test]
    fn garbage_left_of_the_client_is_never_read() {
        let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
        assert_eq!(
            client(
                &proxies,
                "10.0.0.1",
                &["unknown, nonsense, 198.51.100.9, 10.0.0.2"]
            ),
            Ok(ip("198.51.100.9"))
        );
    }

    #[test]
    fn a_hop_that_is_no_address_leaves_the_client_unknown() {
        let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
        for forwarded_for in [
            &["garbage"][..],
            &["unknown"],
            &["_hidden"],
            &["1.2.3.4, nonsense, 10.0.0.2"],
            &["198.51.100.9", "unknown"],
            &["198.51.100.9:port"],
        ] {
            // Neither the proxy (10.0.0.1, 10.0.0.2) nor 1.2.3.4 / 198.51.100.9.
            assert_eq!(
                client(&proxies, "10.0.0.1", forwarded_for),
                Err(UnknownClient),
                "{forwarded_for:?}"
            );
        }
        // A header value that is not text is no address either.
        assert_eq!(
            proxies.client_ip(
                ip("10.0.0.1"),
                [b"198.51.100.9, \xff\xfe".as_slice()].into_iter()
            ),
            Err(UnknownClient)
        );
    }

    #[test]
    fn hops_with_ports_or_brackets_and_empty_elements_are_read() {
        let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
        for (forwarded_for, expected) in [
            ("198.51.100.9:5040", "198.51.100.9"),
            ("[2001:db8::7]:5040", "2001:db8::7"),
            ("[2001:db8::7]", "2001:db8::7"),
            ("6.6.6.6, 198.51.100.9, , 10.0.0.2:443,", "198.51.100.9"),
        ] {
            assert_eq!(
                client(&proxies, "10.0.0.1", &[forwarded_for]),
                Ok(ip(expected)),
                "{forwarded_for}"
            );
        }
    }

    #[test]
    fn mapped_ipv4_is_ipv4() {
        let proxies = TrustedProxies::parse("127.0.0.1").unwrap();
        assert_eq!(
            client(&proxies, "::ffff:127.0.0.1", &["::ffff:198.51.100.9"]),
            Ok(ip("198.51.100.9"))
        );
        // A trusted network written as mapped IPv6 is the IPv4 network.
        for written in ["::ffff:10.0.0.0/104", "::ffff:10.0.0.1"] {
            let proxies = TrustedProxies::parse(written).unwrap();
            assert_eq!(
                client(&proxies, "10.0.0.1", &["198.51.100.9"]),
                Ok(ip("198.51.100.9")),
                "{written}"
            );
            assert_eq!(
                client(&proxies, "::ffff:10.0.0.1", &["198.51.100.9"]),
                Ok(ip("198.51.100.9")),
                "{written}"
            );
        }
        assert_eq!(
            TrustedProxies::parse("::ffff:10.0.0.0/104").unwrap(),
            TrustedProxies::parse("10.0.0.0/8").unwrap()
        );
    }

    #[test]
    fn lists_that_trust_every_address_are_refused() {
        for everything in [
            "0.0.0.0/0",
            "::/0",
            "10.0.0.0/8, 0.0.0.0/0",
            // Halves adding up to everything, and every IPv4 address written as mapped IPv6.
            "0.0.0.0/1, 128.0.0.0/1",
            "::/1,8000::/1",
            "::ffff:0:0/96",
            "::ffff:0.0.0.0/96",
        ] {
            let error = TrustedProxies::parse(everything).unwrap_err();
            assert!(
                error.starts_with("trusts every IPv") && error.contains("X-Forwarded-For"),
                "{everything}: {error}"
            );
        }
        // Broad, but not every client.
        for broad in [
            "0.0.0.0/1",
            "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16",
            "fc00::/7",
        ] {
            assert!(TrustedProxies::parse(broad).is_ok(), "{broad}");
        }
    }

    #[test]
    fn bad_entries_are_refused() {
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse("proxy.local").is_err());
        assert!(TrustedProxies::parse("").unwrap().is_empty());
    }
}
