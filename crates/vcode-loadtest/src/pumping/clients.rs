//! The client addresses of the pumping scenario, sent as `X-Forwarded-For` to instances that
//! trust the load generator as their proxy: one address per honest user, and the bot's
//! fan-out over many IPv4 addresses and IPv6 /64 networks, each kept within the per-client
//! budget so that no per-client limit ever stops the bot (the conversion guard has to).
//!
//! The ranges are reserved ones that reach no one: honest users in 198.18.0.0/16, the bot in
//! 198.19.0.0/16 (RFC 2544's benchmarking block) and 2001:db8::/32 (documentation).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rand::RngExt;
use rand::rngs::StdRng;

/// The IPv4 groups there are room for (198.19.0.0/16), and as many IPv6 /64s.
const IPV4_GROUPS: u64 = 1 << 16;
/// The fewest clients a bot spreads over, however few its sends: a botnet, not a host.
pub const MIN_BOT_CLIENTS: u64 = 64;

/// The address of the `index`-th honest user, each its own client (198.18.0.0/16, reused after
/// 65,536 users, an hour and more apart at any rate that makes sense).
pub fn honest_address(index: u64) -> IpAddr {
    let [.., high, low] = index.to_be_bytes();
    IpAddr::V4(Ipv4Addr::new(198, 18, high, low))
}

/// The bot's clients: its `n`-th send comes from group `n mod groups` (every other group an
/// IPv4 address, the rest IPv6 /64s, each send from a fresh address in its /64), so each group
/// is used once per round and at most `budget` times in all; the pool is sized for the sends
/// planned (and at least [`MIN_BOT_CLIENTS`]), and runs dry rather than exceed the budget.
#[derive(Clone, Debug)]
pub struct BotClients {
    groups: u64,
    budget: u32,
    sent: u64,
}

impl BotClients {
    /// Enough groups for `planned` sends at `budget` sends each.
    pub fn new(planned: u64, budget: u32) -> Self {
        let budget = budget.max(1);
        let groups = planned
            .div_ceil(u64::from(budget))
            .clamp(MIN_BOT_CLIENTS, 2 * IPV4_GROUPS);
        Self {
            groups,
            budget,
            sent: 0,
        }
    }

    /// How many client groups (IPv4 addresses and IPv6 /64s) the pool holds.
    pub fn groups(&self) -> u64 {
        self.groups
    }

    /// The address of the next send; `None` once every group has spent its budget.
    pub fn next(&mut self, rng: &mut StdRng) -> Option<IpAddr> {
        if self.sent >= self.groups * u64::from(self.budget) {
            return None;
        }
        let group = self.sent % self.groups;
        self.sent += 1;
        Some(group_address(group, rng))
    }
}

/// An address of client group `group`: even groups are IPv4 198.19.x.y, odd ones a random
/// address in 2001:db8:h:l::/64.
fn group_address(group: u64, rng: &mut StdRng) -> IpAddr {
    let index = group / 2;
    if group.is_multiple_of(2) {
        let [.., high, low] = index.to_be_bytes();
        IpAddr::V4(Ipv4Addr::new(198, 19, high, low))
    } else {
        let network = (0x2001_0db8_u128 << 96) | (u128::from(index) << 64);
        let interface = u128::from(rng.random::<u64>());
        IpAddr::V6(Ipv6Addr::from(network | interface))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use rand::SeedableRng;

    use super::*;

    /// The service's default `VCODE_CLIENT_IPV6_PREFIX`: an IPv6 client is its /64.
    const IPV6_CLIENT_PREFIX: u8 = 64;

    /// The client an address counts as: itself for IPv4, its /`prefix` network for IPv6 (as the
    /// service's per-client limits group them).
    fn client_group(address: IpAddr, prefix: u8) -> IpAddr {
        match address {
            IpAddr::V4(_) => address,
            IpAddr::V6(v6) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(prefix.min(128)))
                    .unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        }
    }

    /// Every address the pool gives, until it runs dry.
    fn drain(pool: &mut BotClients, rng: &mut StdRng) -> Vec<IpAddr> {
        std::iter::from_fn(|| pool.next(rng)).collect()
    }

    #[test]
    fn no_bot_client_exceeds_the_budget() {
        let mut rng = StdRng::seed_from_u64(3);
        // 30 a second for three minutes at the default 20 an hour.
        let mut pool = BotClients::new(5_400, 20);
        assert_eq!(pool.groups(), 270);
        let addresses = drain(&mut pool, &mut rng);
        assert_eq!(addresses.len(), 5_400);
        let mut per_client: HashMap<IpAddr, u32> = HashMap::new();
        for address in &addresses {
            *per_client
                .entry(client_group(*address, IPV6_CLIENT_PREFIX))
                .or_default() += 1;
        }
        assert_eq!(per_client.len(), 270);
        assert!(per_client.values().all(|&sends| sends == 20));
        // Half the clients are IPv6 networks, each seen through many addresses.
        let v6_networks = per_client.keys().filter(|a| a.is_ipv6()).count();
        assert_eq!(v6_networks, 135);
        let v6_addresses: HashSet<_> = addresses.iter().filter(|a| a.is_ipv6()).collect();
        assert_eq!(v6_addresses.len(), 135 * 20);
    }

    #[test]
    fn a_pool_that_does_not_divide_evenly_stays_within_the_budget() {
        let mut rng = StdRng::seed_from_u64(4);
        let mut pool = BotClients::new(1_301, 20);
        assert_eq!(pool.groups(), 66);
        let addresses = drain(&mut pool, &mut rng);
        // Room for 1,320 sends, never more.
        assert_eq!(addresses.len(), 1_320);
        let mut per_client: HashMap<IpAddr, u32> = HashMap::new();
        for address in addresses {
            *per_client.entry(client_group(address, 64)).or_default() += 1;
        }
        assert!(per_client.values().all(|&sends| sends <= 20));
        // However few sends, a botnet; a budget of 0 (the limit off) is one send per client.
        assert_eq!(BotClients::new(10, 20).groups(), MIN_BOT_CLIENTS);
        let mut pool = BotClients::new(0, 0);
        assert_eq!(drain(&mut pool, &mut rng).len() as u64, MIN_BOT_CLIENTS);
    }

    #[test]
    fn consecutive_sends_come_from_different_clients() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut pool = BotClients::new(1_000, 20);
        let first: Vec<_> = (0..pool.groups())
            .map(|_| client_group(pool.next(&mut rng).unwrap(), 64))
            .collect();
        assert_eq!(first.iter().collect::<HashSet<_>>().len(), first.len());
        assert_eq!(
            first[0],
            IpAddr::V4(Ipv4Addr::new(198, 19, 0, 0)),
            "group 0 is the first IPv4 address"
        );
        assert_eq!(
            first[1],
            "2001:db8::".parse::<IpAddr>().unwrap(),
            "group 1 is the first /64"
        );
    }

    #[test]
    fn honest_users_and_the_bot_never_share_a_client() {
        let mut rng = StdRng::seed_from_u64(6);
        let honest: HashSet<_> = (0..70_000).map(honest_address).collect();
        assert_eq!(honest.len(), 65_536);
        let mut pool = BotClients::new(100_000, 20);
        assert!(
            drain(&mut pool, &mut rng)
                .iter()
                .all(|a| !honest.contains(a))
        );
    }
}
