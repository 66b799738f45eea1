//! Prometheus metrics (`GET /metrics`, OpenMetrics text): HTTP requests by route, method and
//! status with latency histograms, the outcome counters `stats` feeds, SMS attempts and their
//! latency per provider, the Redis store's latency and errors, and API-key use by key name. One registry per process
//! (several apps in one test process share it), encoded by the official `prometheus-client`
//! crate.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::LazyLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Latency buckets (seconds): from well under a millisecond to the slowest SMS gateway.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Counter families fed by `stats::Event`: name (without `_total`), help, label key.
/// (`vcode_sms` is not one: the SMS senders count it per provider, see `observe_sms_attempt`.)
const EVENT_FAMILIES: [(&str, &str); 12] = [
    (
        "vcode_email",
        "code emails by result: sent (the relay took it), refused (5xx), unavailable (no relay, 4xx, timeout before the message), unconfirmed (the message went, its answer never came)",
    ),
    (
        "vcode_fraud_refused",
        "sends the fraud guard refused, by why: level (a range, country or the service judged on its history), spend (a cap), or conversion and surge (blocks recorded before 2026-12-06)",
    ),
    (
        "vcode_fraud_returning",
        "sends a fraud-guard block would have refused, passed as their destination verified before",
    ),
    (
        "vcode_fraud_lifts",
        "fraud-guard suspensions and holds lifted by an operator",
    ),
    ("vcode_otp_send_requests", "otp/send requests"),
    (
        "vcode_otp_dedup",
        "sends answered without a new SMS, by what deduplicated them",
    ),
    ("vcode_otp_verify", "otp/verify outcomes"),
    ("vcode_captcha", "captcha outcomes"),
    (
        "vcode_pow",
        "proof-of-work challenges made, and payloads solved or refused",
    ),
    ("vcode_quota_rejections", "requests refused by a quota"),
    (
        "vcode_otp_test_number_sends",
        "sends to test numbers (VCODE_TEST_NUMBERS): a fixed code stored, no SMS",
    ),
    (
        "vcode_destination_refusals",
        "sends refused for the number: its type (premium rate, non-geographic…) or its country",
    ),
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: String,
    method: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    method: &'static str,
}

type OneLabel = [(&'static str, &'static str); 1];
type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

struct Metrics {
    registry: Registry,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: HistogramFamily<RouteLabels>,
    events: HashMap<&'static str, Family<OneLabel, Counter>>,
    store_duration: HistogramFamily<OneLabel>,
    store_errors: Family<[(&'static str, &'static str); 2], Counter>,
    sms_attempts: Family<[(&'static str, &'static str); 2], Counter>,
    sms_duration: HistogramFamily<OneLabel>,
    api_key_requests: Family<ApiKeyLabels, Counter>,
    api_key_refusals: Family<OneLabel, Counter>,
    monitored_sms: Family<RegionLabel, Counter>,
    sms_by_country: Family<CountryLabel, Counter>,
    verified_by_country: Family<CountryLabel, Counter>,
    fraud_suspensions: Family<CountryLabel, Counter>,
    fraud_holds: Family<CountryLabel, Counter>,
    event_deliveries: Family<OneLabel, Counter>,
    events_pending: Gauge,
    events_oldest_age: Gauge,
    events_failed: Gauge,
    sms_tracked: Family<ProviderCountryLabels, Counter>,
    sms_receipts: Family<DeliveryLabels, Counter>,
    sms_spend: Family<SpendLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    sms_spend_cap: Family<SpendLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
}

/// A spend cap's scope (a country, `*` for the service) and window (`hour`, `day`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpendLabels {
    scope: String,
    window: &'static str,
}

/// A provider and a country: bounded by the providers and the regions there are.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderCountryLabels {
    provider: String,
    country: String,
}

/// A provider, a country and the delivery a receipt reported.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryLabels {
    provider: String,
    country: String,
    delivery: &'static str,
}

/// A country (ISO region, `001` for the non-geographic codes): bounded, unlike the fraud
/// guard's prefixes, which no per-send series is labelled with.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CountryLabel {
    country: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RegionLabel {
    region: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiKeyLabels {
    api_key: String,
    operation: &'static str,
}

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::default();
    let http_requests = Family::<HttpLabels, Counter>::default();
    registry.register(
        "vcode_http_requests",
        "HTTP requests by route pattern, method and status",
        http_requests.clone(),
    );
    let http_duration: HistogramFamily<RouteLabels> =
        Family::new_with_constructor(latency_histogram);
    registry.register(
        "vcode_http_request_duration_seconds",
        "HTTP request latency by route pattern and method",
        http_duration.clone(),
    );
    let events = EVENT_FAMILIES
        .iter()
        .map(|(name, help)| {
            let family = Family::<OneLabel, Counter>::default();
            registry.register(*name, *help, family.clone());
            (*name, family)
        })
        .collect();
    let store_duration: HistogramFamily<OneLabel> = Family::new_with_constructor(latency_histogram);
    registry.register(
        "vcode_store_duration_seconds",
        "latency of store calls",
        store_duration.clone(),
    );
    let store_errors = Family::<[(&'static str, &'static str); 2], Counter>::default();
    registry.register(
        "vcode_store_errors",
        "failed store calls by kind",
        store_errors.clone(),
    );
    // SMS: one count per provider attempt (a failover is two), by provider and result.
    let sms_attempts = Family::<[(&'static str, &'static str); 2], Counter>::default();
    registry.register(
        "vcode_sms",
        "SMS delivery attempts by provider and result (sent, invalid_number, rejected, retryable, unconfirmed)",
        sms_attempts.clone(),
    );
    let sms_duration: HistogramFamily<OneLabel> = Family::new_with_constructor(latency_histogram);
    registry.register(
        "vcode_sms_duration_seconds",
        "latency of SMS delivery attempts by provider",
        sms_duration.clone(),
    );
    // API keys by name (configured names only: the label set is bounded by the configuration).
    let api_key_requests = Family::<ApiKeyLabels, Counter>::default();
    registry.register(
        "vcode_api_key_requests",
        "requests accepted with an API key, by the key's name and operation",
        api_key_requests.clone(),
    );
    let api_key_refusals = Family::<OneLabel, Counter>::default();
    registry.register(
        "vcode_api_key_refusals",
        "requests refused for a missing or unknown API key, by operation",
        api_key_refusals.clone(),
    );
    // Bounded by the regions there are (about 250).
    let monitored_sms = Family::<RegionLabel, Counter>::default();
    registry.register(
        "vcode_sms_monitored",
        "SMS delivered to a monitored country (VCODE_MONITORED_REGIONS), by region",
        monitored_sms.clone(),
    );
    let by_country = |registry: &mut Registry, name: &str, help: &str| {
        let family = Family::<CountryLabel, Counter>::default();
        registry.register(name, help, family.clone());
        family
    };
    let sms_by_country = by_country(
        &mut registry,
        "vcode_sms_sent_by_country",
        "SMS sent (or in doubt), by the destination's country",
    );
    let verified_by_country = by_country(
        &mut registry,
        "vcode_verified_by_country",
        "codes verified, by the phone's country",
    );
    let fraud_suspensions = by_country(
        &mut registry,
        "vcode_fraud_suspensions",
        "number ranges and prefixes the fraud guard suspended (unconverted or undelivered beyond their history), by country",
    );
    let fraud_holds = by_country(
        &mut registry,
        "vcode_fraud_holds",
        "countries and services the fraud guard held back for spread pumping (ranges without converting history refused), by country",
    );
    let event_deliveries = Family::<OneLabel, Counter>::default();
    registry.register(
        "vcode_event_deliveries",
        "event webhook tries, by outcome (delivered, retry, failed; skipped: an expiry timer of a verification that ended otherwise, or an event no endpoint's filter wants)",
        event_deliveries.clone(),
    );
    let events_pending = Gauge::default();
    registry.register(
        "vcode_events_pending",
        "events due or retrying in the store's outbox (sampled by the dispatcher)",
        events_pending.clone(),
    );
    let events_oldest_age = Gauge::default();
    registry.register(
        "vcode_events_oldest_pending_age_seconds",
        "age of the oldest event not yet delivered",
        events_oldest_age.clone(),
    );
    let events_failed = Gauge::default();
    registry.register(
        "vcode_events_failed",
        "events given up on, waiting for an operator's replay",
        events_failed.clone(),
    );
    // The delivery rate per provider and country: receipts{delivery="delivered"} / tracked.
    let sms_tracked = Family::<ProviderCountryLabels, Counter>::default();
    registry.register(
        "vcode_sms_tracked",
        "SMS whose provider message was recorded for delivery receipts, by provider and country",
        sms_tracked.clone(),
    );
    let sms_receipts = Family::<DeliveryLabels, Counter>::default();
    registry.register(
        "vcode_sms_receipts",
        "delivery receipts that moved a verification, by provider, country and delivery (sent, delivered, undelivered)",
        sms_receipts.clone(),
    );
    let sms_spend = Family::<SpendLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    registry.register(
        "vcode_sms_spend",
        "what SMS cost over the cap's window by VCODE_SMS_PRICES, per spend cap (scope: a country or * for the service; window: hour or day), as this instance last read the shared counts",
        sms_spend.clone(),
    );
    let sms_spend_cap = Family::<SpendLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    registry.register(
        "vcode_sms_spend_cap",
        "each spend cap (VCODE_FRAUD_SPEND_*): sends are refused once vcode_sms_spend reaches it",
        sms_spend_cap.clone(),
    );
    Metrics {
        registry,
        sms_spend,
        sms_spend_cap,
        sms_tracked,
        sms_receipts,
        event_deliveries,
        events_pending,
        events_oldest_age,
        events_failed,
        monitored_sms,
        sms_by_country,
        verified_by_country,
        fraud_suspensions,
        fraud_holds,
        api_key_requests,
        api_key_refusals,
        sms_attempts,
        sms_duration,
        http_requests,
        http_duration,
        events,
        store_duration,
        store_errors,
    }
});

/// The metrics in the OpenMetrics text format.
pub fn render() -> String {
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &METRICS.registry).is_err() {
        tracing::error!("metrics could not be encoded");
    }
    text
}

/// Counts one event in a family of `EVENT_FAMILIES` (`name` without `_total`).
pub fn count_event(name: &'static str, label: &'static str, value: &'static str) {
    EVENT_HANDLES.with_borrow_mut(|handles| {
        let key = (name, label, value);
        let counter = kept(
            handles,
            |known| *known == key,
            || {
                let family = METRICS.events.get(name)?;
                Some((key, family.get_or_create(&[(label, value)]).clone()))
            },
        );
        if let Some(counter) = counter {
            counter.inc();
        }
    });
}

/// Counts one of `crate::stats`'s events, `index` its place among them: the thread keeps each
/// event's counter at its index, one lookup where `count_event` compares labels.
pub fn count_stats_event(
    index: usize,
    name: &'static str,
    label: &'static str,
    value: &'static str,
) {
    STATS_EVENT_HANDLES.with_borrow_mut(|handles| {
        if handles.len() <= index {
            handles.resize(index + 1, None);
        }
        if let Some(counter) = &handles[index] {
            counter.inc();
        } else if let Some(family) = METRICS.events.get(name) {
            let counter = family.get_or_create(&[(label, value)]).clone();
            counter.inc();
            handles[index] = Some(counter);
        }
    });
}

/// Counts one try of an event webhook by its outcome.
pub fn count_event_delivery(outcome: &'static str) {
    METRICS
        .event_deliveries
        .get_or_create(&[("outcome", outcome)])
        .inc();
}

/// The outbox as the dispatcher last saw it.
pub fn set_event_outbox(pending: u64, oldest_age_secs: u64, failed: u64) {
    let gauge = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    METRICS.events_pending.set(gauge(pending));
    METRICS.events_oldest_age.set(gauge(oldest_age_secs));
    METRICS.events_failed.set(gauge(failed));
}

/// Counts one SMS delivered to a monitored `region`.
pub fn count_monitored_sms(region: &str) {
    METRICS
        .monitored_sms
        .get_or_create(&RegionLabel {
            region: region.to_owned(),
        })
        .inc();
}

/// Counts one SMS sent to `country` (once a send: the thread keeps its countries' counters).
pub fn count_sms_by_country(country: &str) {
    SMS_COUNTRY_HANDLES.with_borrow_mut(|handles| {
        let counter = kept(
            handles,
            |known| **known == *country,
            || {
                let labels = CountryLabel {
                    country: country.to_owned(),
                };
                Some((
                    country.into(),
                    METRICS.sms_by_country.get_or_create(&labels).clone(),
                ))
            },
        );
        if let Some(counter) = counter {
            counter.inc();
        }
    });
}

/// Counts one code verified for a phone of `country`.
pub fn count_verified_by_country(country: &str) {
    count_country(&METRICS.verified_by_country, country);
}

/// Counts a prefix of `country` the fraud guard suspended (`suspended`) or held back.
pub fn count_fraud_block(country: &str, suspended: bool) {
    let family = if suspended {
        &METRICS.fraud_suspensions
    } else {
        &METRICS.fraud_holds
    };
    count_country(family, country);
}

/// Counts one SMS of `provider` to `country` whose message receipts can match.
pub fn count_sms_tracked(provider: &str, country: &str) {
    METRICS
        .sms_tracked
        .get_or_create(&ProviderCountryLabels {
            provider: provider.to_owned(),
            country: country.to_owned(),
        })
        .inc();
}

/// Counts one receipt of `provider` that moved a delivery of `country` to `delivery`.
pub fn count_sms_receipt(provider: &str, country: &str, delivery: &'static str) {
    METRICS
        .sms_receipts
        .get_or_create(&DeliveryLabels {
            provider: provider.to_owned(),
            country: country.to_owned(),
            delivery,
        })
        .inc();
}

fn count_country(family: &Family<CountryLabel, Counter>, country: &str) {
    family
        .get_or_create(&CountryLabel {
            country: country.to_owned(),
        })
        .inc();
}

/// A spend cap's reading: what was spent in its window, and the cap.
pub fn set_sms_spend(scope: &str, window: &'static str, spent: f64, cap: f64) {
    let labels = SpendLabels {
        scope: scope.to_owned(),
        window,
    };
    METRICS.sms_spend.get_or_create(&labels).set(spent);
    METRICS.sms_spend_cap.get_or_create(&labels).set(cap);
}

/// Times one call to `store` and counts it as an error of `error_kind`, if any.
pub fn observe_store_call(store: &'static str, seconds: f64, error_kind: Option<&'static str>) {
    STORE_HANDLES.with_borrow_mut(|handles| {
        let histogram = kept(
            handles,
            |known| *known == store,
            || {
                let family = &METRICS.store_duration;
                Some((store, family.get_or_create(&[("store", store)]).clone()))
            },
        );
        if let Some(histogram) = histogram {
            histogram.observe(seconds);
        }
    });
    if let Some(kind) = error_kind {
        METRICS
            .store_errors
            .get_or_create(&[("store", store), ("kind", kind)])
            .inc();
    }
}

/// Counts one SMS delivery attempt of `provider` with its `result` and times it (once a
/// send: the thread keeps the series it used, as `observe_http_request` does).
pub fn observe_sms_attempt(provider: &'static str, result: &'static str, seconds: f64) {
    SMS_HANDLES.with_borrow_mut(|handles| {
        let key = (provider, result);
        let series = kept(
            handles,
            |known| *known == key,
            || {
                let attempts = METRICS
                    .sms_attempts
                    .get_or_create(&[("provider", provider), ("result", result)])
                    .clone();
                let duration = METRICS
                    .sms_duration
                    .get_or_create(&[("provider", provider)])
                    .clone();
                Some((key, (attempts, duration)))
            },
        );
        if let Some((attempts, duration)) = series {
            attempts.inc();
            duration.observe(seconds);
        }
    });
}

/// Counts one request of `operation` accepted with the key named `name`, or refused (None).
pub fn count_api_key(name: Option<&str>, operation: &'static str) {
    match name {
        Some(name) => METRICS
            .api_key_requests
            .get_or_create(&ApiKeyLabels {
                api_key: name.to_owned(),
                operation,
            })
            .inc(),
        None => METRICS
            .api_key_refusals
            .get_or_create(&[("operation", operation)])
            .inc(),
    };
}

/// A method as a label from a fixed set, so a client cannot grow the label set.
fn method_label(method: &str) -> &'static str {
    ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"]
        .into_iter()
        .find(|known| *known == method)
        .unwrap_or("other")
}

/// One HTTP request answered: counted by route pattern (never the raw path, whose ids would
/// explode the label set), method and status, and timed.
pub fn observe_http_request(route: &str, method: &str, status: u16, seconds: f64) {
    let method = method_label(method);
    HTTP_HANDLES.with_borrow_mut(|handles| {
        let found = handles.iter().position(|handle| {
            handle.status == status && handle.method == method && *handle.route == *route
        });
        let handle = match found {
            Some(index) => &handles[index],
            None => {
                handles.push(HttpHandle::new(route, method, status));
                &handles[handles.len() - 1]
            }
        };
        handle.duration.observe(seconds);
        handle.requests.inc();
    });
}

/// The counter and histogram of one (route, method, status). Routes are patterns, methods a
/// fixed set and statuses few: a few dozen of these per thread at most.
struct HttpHandle {
    route: Box<str>,
    method: &'static str,
    status: u16,
    requests: Counter,
    duration: Histogram,
}

impl HttpHandle {
    fn new(route: &str, method: &'static str, status: u16) -> Self {
        // Handles share their values with the families' (`Counter` and `Histogram` are Arcs).
        let duration = METRICS
            .http_duration
            .get_or_create(&RouteLabels {
                route: route.to_owned(),
                method,
            })
            .clone();
        let requests = METRICS
            .http_requests
            .get_or_create(&HttpLabels {
                route: route.to_owned(),
                method,
                status,
            })
            .clone();
        Self {
            route: route.into(),
            method,
            status,
            requests,
            duration,
        }
    }
}

type EventKey = (&'static str, &'static str, &'static str);

/// An SMS provider's attempts of one result, and its latency histogram.
type SmsHandle = ((&'static str, &'static str), (Counter, Histogram));

/// The handle this thread keeps in `handles` under the key `is_key` finds, made by `make` on
/// the thread's first use of it (`None` where there is no such series). A scan: a thread keeps
/// a few dozen at most, and comparing a few `&'static str` costs less than hashing labels.
fn kept<K, H>(
    handles: &mut Vec<(K, H)>,
    is_key: impl Fn(&K) -> bool,
    make: impl FnOnce() -> Option<(K, H)>,
) -> Option<&H> {
    let index = match handles.iter().position(|(known, _)| is_key(known)) {
        Some(index) => index,
        None => {
            handles.push(make()?);
            handles.len() - 1
        }
    };
    Some(&handles[index].1)
}

// Each worker thread's handles on the hot series (the request's, its outcome's, its store
// calls', a send's SMS and country), found without hashing labels or taking a family's lock.
thread_local! {
    static HTTP_HANDLES: RefCell<Vec<HttpHandle>> = const { RefCell::new(Vec::new()) };
    static EVENT_HANDLES: RefCell<Vec<(EventKey, Counter)>> = const { RefCell::new(Vec::new()) };
    static STORE_HANDLES: RefCell<Vec<(&'static str, Histogram)>> = const { RefCell::new(Vec::new()) };
    static STATS_EVENT_HANDLES: RefCell<Vec<Option<Counter>>> = const { RefCell::new(Vec::new()) };
    static SMS_HANDLES: RefCell<Vec<SmsHandle>> = const { RefCell::new(Vec::new()) };
    /// At most one a country code (a few hundred).
    static SMS_COUNTRY_HANDLES: RefCell<Vec<(Box<str>, Counter)>> = const { RefCell::new(Vec::new()) };
}
