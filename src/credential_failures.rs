//! Failed credentials (a wrong API key, a wrong Twilio Auth Token or API key secret) counted
//! per client address: past the limit within a minute, the address is refused before its
//! credentials are even compared, until that minute ends. Right credentials from other
//! addresses are never slowed: only the failing address is held.
//!
//! Kept in the instance, not the store: the check sits on every authenticated request, where
//! a store round trip would cost more than the comparison it guards, and it costs one atomic
//! load while no address has failed. So N instances allow N times the limit (documented).
//! The addresses held are bounded: past `MAX_ADDRESSES`, expired windows are dropped, and a
//! new address that still finds no room is not counted (an attacker with that many addresses
//! gets the limit once from each anyway).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);
const MAX_ADDRESSES: usize = 65_536;

pub struct CredentialFailures {
    /// Failures an address may have in a minute; 0: off.
    limit: u32,
    /// The number of addresses in `windows`: 0 makes the check a single load.
    tracked: AtomicUsize,
    windows: Mutex<HashMap<IpAddr, Window>>,
}

#[derive(Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

impl CredentialFailures {
    pub fn new(limit: u32) -> Self {
        Self {
            limit,
            tracked: AtomicUsize::new(0),
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// How long `address` must wait before its credentials are compared again, if it is held.
    pub fn held(&self, address: IpAddr) -> Option<Duration> {
        if self.limit == 0 || self.tracked.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let windows = self.windows.lock().expect("credential failures lock");
        let window = windows.get(&address)?;
        let elapsed = window.started.elapsed();
        (window.failures >= self.limit && elapsed < WINDOW).then(|| WINDOW - elapsed)
    }

    /// Counts a failed attempt of `address`.
    pub fn failed(&self, address: IpAddr) {
        if self.limit == 0 {
            return;
        }
        let now = Instant::now();
        let mut windows = self.windows.lock().expect("credential failures lock");
        if windows.len() >= MAX_ADDRESSES && !windows.contains_key(&address) {
            windows.retain(|_, window| now.duration_since(window.started) < WINDOW);
            if windows.len() >= MAX_ADDRESSES {
                return;
            }
        }
        let window = windows.entry(address).or_insert(Window {
            started: now,
            failures: 0,
        });
        if now.duration_since(window.started) >= WINDOW {
            *window = Window {
                started: now,
                failures: 0,
            };
        }
        window.failures = window.failures.saturating_add(1);
        self.tracked.store(windows.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(last: u8) -> IpAddr {
        IpAddr::from([198, 51, 100, last])
    }

    #[test]
    fn an_address_is_held_after_its_limit_and_others_are_not() {
        let failures = CredentialFailures::new(3);
        for _ in 0..2 {
            failures.failed(address(1));
        }
        assert_eq!(failures.held(address(1)), None);
        failures.failed(address(1));
        let wait = failures
            .held(address(1))
            .expect("held at its third failure");
        assert!(wait <= WINDOW && wait > WINDOW - Duration::from_secs(5));
        assert_eq!(failures.held(address(2)), None);
    }

    #[test]
    fn a_limit_of_zero_holds_no_one() {
        let failures = CredentialFailures::new(0);
        for _ in 0..100 {
            failures.failed(address(1));
        }
        assert_eq!(failures.held(address(1)), None);
    }
}
