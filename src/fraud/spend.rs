//! Spend caps (issue 39 point 5): optional ceilings on what SMS cost per country and for the
//! service, per hour and per day, priced by `VCODE_SMS_PRICES`. Off unless set. Each instance
//! reads the guard's shared per-minute counts (every send the guard admitted, the undelivered
//! included: an SMS that never arrived was still paid) every few seconds and adds its own sends
//! since; a send that would pass a cap is refused before anything is issued (`403`/`40300`),
//! a safe-listed number excepted. Reaching a cap is an event (a `warn` log, the daily stats), a
//! metric and a line in the console's traffic report.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::domain::EMAIL_COUNTRY;
use crate::domain::traffic::BUCKET_MS;
use crate::sms::SmsPrices;
use crate::stats::{Event, Stats};
use crate::store::FraudStore;

/// How often an instance reads the shared counts again: a cap may be passed by what the other
/// instances send within it.
pub const SPEND_REFRESH: Duration = Duration::from_secs(5);

/// The caps (0: none), in the prices' currency.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpendCaps {
    pub service_hour: f64,
    pub service_day: f64,
    pub country_hour: f64,
    pub country_day: f64,
}

impl SpendCaps {
    pub fn any(&self) -> bool {
        [
            self.service_hour,
            self.service_day,
            self.country_hour,
            self.country_day,
        ]
        .iter()
        .any(|cap| *cap > 0.0)
    }
}

/// One cap and what was spent against it.
#[derive(Clone, Debug, PartialEq)]
pub struct SpendLine {
    /// A country's ISO region, or `*` for the service.
    pub scope: String,
    /// `hour` or `day`.
    pub window: &'static str,
    pub spent: f64,
    pub cap: f64,
}

impl SpendLine {
    pub fn reached(&self) -> bool {
        self.spent >= self.cap
    }
}

/// Spent per country over the last hour and day, as last read, plus this instance's sends since.
#[derive(Default)]
struct Spent {
    /// Country → (hour, day).
    countries: HashMap<String, (f64, f64)>,
    /// The caps reached at the last reading (to tell a new one).
    reached: Vec<(String, &'static str)>,
}

pub struct SpendGuard {
    caps: SpendCaps,
    prices: SmsPrices,
    spent: Mutex<Spent>,
    stats: Arc<Stats>,
}

impl SpendGuard {
    pub fn new(caps: SpendCaps, prices: SmsPrices, stats: Arc<Stats>) -> Self {
        Self {
            caps,
            prices,
            spent: Mutex::default(),
            stats,
        }
    }

    pub fn enabled(&self) -> bool {
        self.caps.any()
    }

    /// What one SMS to `country` costs (mail costs nothing here: `EMAIL` is not a country).
    fn price(&self, country: &str) -> f64 {
        if country == EMAIL_COUNTRY {
            return 0.0;
        }
        self.prices.price_of(country).unwrap_or(0.0)
    }

    /// Whether one more SMS to `country` stays within every cap; the cap it would pass and
    /// how long until it may have room (a rough bound: the window's share of a minute's
    /// counts leaving it) if not.
    pub fn check(&self, country: &str) -> Result<(), (SpendLine, Duration)> {
        if !self.enabled() {
            return Ok(());
        }
        let price = self.price(country);
        let spent = self.spent.lock().expect("spend");
        let (hour, day) = spent.countries.get(country).copied().unwrap_or_default();
        let (service_hour, service_day) = spent
            .countries
            .values()
            .fold((0.0, 0.0), |(h, d), (hour, day)| (h + hour, d + day));
        let checks = [
            (country, "hour", hour, self.caps.country_hour),
            (country, "day", day, self.caps.country_day),
            ("*", "hour", service_hour, self.caps.service_hour),
            ("*", "day", service_day, self.caps.service_day),
        ];
        for (scope, window, spent, cap) in checks {
            if cap > 0.0 && spent + price > cap {
                let retry_after = match window {
                    "hour" => Duration::from_secs(60),
                    _ => Duration::from_secs(3600),
                };
                return Err((
                    SpendLine {
                        scope: scope.to_owned(),
                        window,
                        spent,
                        cap,
                    },
                    retry_after,
                ));
            }
        }
        Ok(())
    }

    /// An SMS this instance sent to `country`: counted until the next reading has it.
    pub fn sent(&self, country: &str) {
        if !self.enabled() {
            return;
        }
        let price = self.price(country);
        let mut spent = self.spent.lock().expect("spend");
        let entry = spent.countries.entry(country.to_owned()).or_default();
        entry.0 += price;
        entry.1 += price;
    }

    /// Every cap and what was spent against it, as last read (the console's lines).
    pub fn lines(&self) -> Vec<SpendLine> {
        if !self.enabled() {
            return Vec::new();
        }
        let spent = self.spent.lock().expect("spend");
        let mut lines = Vec::new();
        let (mut service_hour, mut service_day) = (0.0, 0.0);
        let mut countries: Vec<_> = spent.countries.iter().collect();
        countries.sort_by(|a, b| a.0.cmp(b.0));
        for (country, (hour, day)) in countries {
            service_hour += hour;
            service_day += day;
            for (window, spent, cap) in [
                ("hour", *hour, self.caps.country_hour),
                ("day", *day, self.caps.country_day),
            ] {
                if cap > 0.0 {
                    lines.push(SpendLine {
                        scope: country.clone(),
                        window,
                        spent,
                        cap,
                    });
                }
            }
        }
        for (window, spent, cap) in [
            ("hour", service_hour, self.caps.service_hour),
            ("day", service_day, self.caps.service_day),
        ] {
            if cap > 0.0 {
                lines.push(SpendLine {
                    scope: "*".to_owned(),
                    window,
                    spent,
                    cap,
                });
            }
        }
        lines
    }

    /// Reads the shared counts of the last day again: what each country cost over the last
    /// hour and day. A cap newly reached is logged, counted and set in the metrics.
    pub async fn refresh(&self, store: &dyn FraudStore, now_ms: u64) {
        let minute = now_ms / BUCKET_MS;
        let traffic = match store
            .fraud_traffic(minute.saturating_sub(1439), minute)
            .await
        {
            Ok(traffic) => traffic,
            Err(error) => {
                tracing::warn!(%error, "spend caps: the counts were not read; the last stand");
                return;
            }
        };
        let mut countries = HashMap::new();
        for (country, minutes) in &traffic.countries {
            let price = self.price(country);
            let (mut hour, mut day) = (0.0, 0.0);
            for counts in minutes {
                let cost = counts.sends as f64 * price;
                day += cost;
                if counts.minute + 60 > minute {
                    hour += cost;
                }
            }
            countries.insert(country.clone(), (hour, day));
        }
        {
            let mut spent = self.spent.lock().expect("spend");
            spent.countries = countries;
        }
        let lines = self.lines();
        for line in &lines {
            crate::metrics::set_sms_spend(&line.scope, line.window, line.spent, line.cap);
        }
        let reached: Vec<(String, &'static str)> = lines
            .iter()
            .filter(|line| line.reached())
            .map(|line| (line.scope.clone(), line.window))
            .collect();
        let mut spent = self.spent.lock().expect("spend");
        for line in lines.iter().filter(|line| line.reached()) {
            if !spent.reached.contains(&(line.scope.clone(), line.window)) {
                self.stats.record(Event::FraudSpendCapped);
                tracing::warn!(
                    scope = %line.scope,
                    window = line.window,
                    spent = line.spent,
                    cap = line.cap,
                    currency = self.prices.currency(),
                    "spend cap reached: sends refused until it has room"
                );
            }
        }
        spent.reached = reached;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(caps: SpendCaps) -> SpendGuard {
        let prices = SmsPrices::new("USD", SmsPrices::parse_pairs("CN=0.5,*=1").unwrap()).unwrap();
        let store = Arc::new(crate::store::MemoryStore::default());
        SpendGuard::new(caps, prices, Stats::spawn(store, Duration::from_secs(3600)))
    }

    #[tokio::test]
    async fn a_country_cap_refuses_the_send_that_would_pass_it() {
        let spend = guard(SpendCaps {
            country_hour: 2.0,
            ..SpendCaps::default()
        });
        for _ in 0..4 {
            assert!(spend.check("CN").is_ok());
            spend.sent("CN");
        }
        let (line, retry_after) = spend.check("CN").unwrap_err();
        assert_eq!(
            (line.scope.as_str(), line.window, line.spent),
            ("CN", "hour", 2.0)
        );
        assert_eq!(retry_after, Duration::from_secs(60));
        // Another country has its own cap; mail costs nothing.
        assert!(spend.check("GB").is_ok());
        assert!(spend.check(EMAIL_COUNTRY).is_ok());
        assert_eq!(spend.lines().len(), 1);
    }

    #[tokio::test]
    async fn the_service_cap_counts_every_country_and_no_cap_is_off() {
        let spend = guard(SpendCaps {
            service_day: 2.5,
            ..SpendCaps::default()
        });
        spend.sent("CN");
        spend.sent("GB");
        // 0.5 + 1 spent: one more GB SMS (1) fits, then nothing does.
        assert!(spend.check("GB").is_ok());
        spend.sent("GB");
        assert_eq!(spend.check("CN").unwrap_err().0.scope, "*");
        let off = guard(SpendCaps::default());
        off.sent("CN");
        assert!(!off.enabled() && off.check("CN").is_ok() && off.lines().is_empty());
    }
}
