//! The fraud guard's operator routes (the operator listener, behind the admin token): the
//! prefixes suspended or held back, a lift, the traffic series the console charts, and the
//! safe list (list, add, remove). HTTP only: the guard's use-case methods and the safe list's
//! answer, mapped to the wire types here.

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::openapi::Api;
use super::{ApiError, AppState, envelope};
use crate::fraud::{Level, ListedEntry, PrefixState, Reason, Suspension, TrafficReport};
use vcode_wire::{
    FraudCountryCounts, FraudLevel, FraudLifted, FraudPrefixState, FraudPrefixTraffic, FraudReason,
    FraudSafeList, FraudSafeListAdd, FraudSafeListAdded, FraudSafeListEntry, FraudSafeListQuery,
    FraudSafeListRemoved, FraudSafeListSource, FraudSpend, FraudSuspension, FraudSuspensions,
    FraudTraffic, FraudTrafficBucket, paths,
};

/// The traffic route's span: a day at most (what the guard keeps), an hour by default.
const MAX_MINUTES: u32 = 1440;
const DEFAULT_MINUTES: u32 = 60;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::get_resource(paths::FRAUD_SUSPENSIONS).route(super::get().to(suspensions)))
        .service(super::post_resource(paths::FRAUD_LIFT).route(web::post().to(lift)))
        .service(super::get_resource(paths::FRAUD_TRAFFIC).route(super::get().to(traffic)))
        .service(
            super::resource(paths::FRAUD_SAFE_LIST, "GET, HEAD, POST")
                .route(super::get().to(safe_list))
                .route(web::post().to(add_safe_entry)),
        )
        .service(
            super::resource(paths::FRAUD_SAFE_LIST_ENTRY, "DELETE")
                .route(web::delete().to(remove_safe_entry)),
        );
}

/// The safe list's routes in the operator listener's description.
pub fn describe(api: &mut Api) {
    use vcode_wire::ErrorCode::*;
    let list = api.schema::<FraudSafeList>();
    api.get(
        paths::FRAUD_SAFE_LIST,
        "fraud",
        "The fraud guard's safe list",
    )
    .describe(
        "Every entry the guard exempts (a send to a number that is, or starts with, an \
             entry is counted but never judged nor refused): VCODE_FRAUD_SAFE_LIST's first \
             (read-only here), then the stored ones, each tenant's (exempting that tenant's \
             sends only) after the operators'. Read from the store. Every instance reads the \
             stored entries again every refresh_secs; the one that changed them applies the \
             change at once.",
    )
    .ok_envelope(list)
    .errors(&[Unauthorized, Internal, StoreUnavailable]);
    let body = api.schema::<FraudSafeListAdd>();
    let added = api.schema::<FraudSafeListAdded>();
    api.post(paths::FRAUD_SAFE_LIST, "fraud", "Add a safe-list entry")
        .describe(
            "A number or a prefix (1 to 15 digits, + optional) whose sends the guard no longer \
             judges nor refuses, whoever asks. An entry there already is answered as stored \
             (added: false), its first author and time kept. Anything but digits, more than 15 \
             of them, or an added_by that is empty, longer than 64 characters or holds a \
             control character is 40000, and nothing changes.",
        )
        .body(body)
        .ok_envelope(added)
        .errors(&[Unauthorized, Internal, StoreUnavailable]);
    let removed = api.schema::<FraudSafeListRemoved>();
    api.delete(
        paths::FRAUD_SAFE_LIST_ENTRY,
        "fraud",
        "Remove a safe-list entry",
    )
    .describe(
        "The entry for every send, or with ?tenant= the tenant's (twilio:AC…). 40400 when \
             there is none; 40000 for an entry that is not 1 to 15 digits (+ optional), or one \
             of VCODE_FRAUD_SAFE_LIST (change the setting).",
    )
    .parameter(
        "path",
        "entry",
        true,
        serde_json::json!({"type": "string", "pattern": "^\\+?[0-9]{1,15}$"}),
        "the number or prefix",
    )
    .parameter(
        "query",
        "tenant",
        false,
        serde_json::json!({"type": "string"}),
        "the tenant whose entry it is (twilio:AC…); left out, the entry for every send",
    )
    .ok_envelope(removed)
    .errors(&[
        Malformed,
        NotFound,
        Unauthorized,
        Internal,
        StoreUnavailable,
    ]);
}

async fn suspensions(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let suspensions = state.fraud.suspensions().await?;
    Ok(envelope::ok(FraudSuspensions {
        level: level(state.fraud.level()),
        suspensions: suspensions.into_iter().map(suspension).collect(),
    }))
}

async fn lift(
    state: web::Data<AppState>,
    prefix: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let prefix = prefix.into_inner();
    let digits = (1..=15).contains(&prefix.len()) && prefix.bytes().all(|b| b.is_ascii_digit());
    // An email domain's prefix is `@` and the domain as the guard keeps it (lower-case A-labels).
    let domain = prefix.strip_prefix('@').is_some_and(|domain| {
        crate::domain::EmailAddress::parse(&format!("x{prefix}"))
            .is_ok_and(|address| address.domain() == domain)
    });
    if !digits && !domain {
        return Err(ApiError::Malformed(
            "prefix must be 1 to 15 digits, without +, or @ and an email domain in lower case"
                .to_owned(),
        ));
    }
    if !state.fraud.lift(&prefix).await? {
        return Err(ApiError::NotFound);
    }
    Ok(envelope::ok(FraudLifted { lifted: true }))
}

async fn safe_list(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let entries = state.safe_list.entries().await?;
    Ok(envelope::ok(FraudSafeList {
        refresh_secs: state.safe_list.refresh_period().as_secs(),
        entries: entries.into_iter().map(safe_entry).collect(),
    }))
}

async fn add_safe_entry(
    state: web::Data<AppState>,
    body: web::Json<FraudSafeListAdd>,
) -> Result<HttpResponse, ApiError> {
    let added_by = body.added_by.as_deref().unwrap_or("operator");
    let (entry, added) = state.safe_list.add(None, &body.entry, added_by).await?;
    Ok(envelope::ok(FraudSafeListAdded {
        added,
        entry: safe_entry(entry),
    }))
}

async fn remove_safe_entry(
    state: web::Data<AppState>,
    entry: web::Path<String>,
    query: web::Query<FraudSafeListQuery>,
) -> Result<HttpResponse, ApiError> {
    let tenant = query.tenant.as_deref();
    if !state.safe_list.remove(tenant, &entry).await? {
        return Err(ApiError::NotFound);
    }
    Ok(envelope::ok(FraudSafeListRemoved { removed: true }))
}

fn safe_entry(entry: ListedEntry) -> FraudSafeListEntry {
    let source = match (&entry.tenant, entry.configured) {
        (_, true) => FraudSafeListSource::Configured,
        (None, false) => FraudSafeListSource::Operator,
        (Some(_), false) => FraudSafeListSource::Tenant,
    };
    FraudSafeListEntry {
        entry: ["+", &entry.digits].concat(),
        source,
        tenant: entry.tenant,
        added_by: entry.added_by,
        added_at_ms: entry.added_at_ms,
    }
}

#[derive(Deserialize)]
struct TrafficQuery {
    minutes: Option<u32>,
}

async fn traffic(
    state: web::Data<AppState>,
    query: web::Query<TrafficQuery>,
) -> Result<HttpResponse, ApiError> {
    let minutes = query.minutes.unwrap_or(DEFAULT_MINUTES);
    if !(1..=MAX_MINUTES).contains(&minutes) {
        return Err(ApiError::Malformed(format!(
            "minutes must be from 1 to {MAX_MINUTES}"
        )));
    }
    let report = state.fraud.traffic(u64::from(minutes)).await?;
    Ok(envelope::ok(traffic_of(report)))
}

fn level(level: Level) -> FraudLevel {
    match level {
        Level::Off => FraudLevel::Off,
        Level::Monitor => FraudLevel::Monitor,
        Level::Standard => FraudLevel::Standard,
        Level::Strict => FraudLevel::Strict,
    }
}

fn reason(reason: Reason) -> FraudReason {
    match reason {
        Reason::Conversion => FraudReason::Conversion,
        Reason::Surge => FraudReason::Surge,
        Reason::Unconverted => FraudReason::Unconverted,
        Reason::Undelivered => FraudReason::Undelivered,
        Reason::Spread => FraudReason::Spread,
    }
}

fn suspension(suspension: Suspension) -> FraudSuspension {
    FraudSuspension {
        prefix: suspension.prefix,
        country: suspension.country,
        reason: reason(suspension.reason),
        since_ms: suspension.since_ms,
        until_ms: suspension.until_ms,
        strikes: suspension.strikes,
        sends: suspension.sends,
        conversions: suspension.conversions,
        evidence: suspension.evidence,
    }
}

fn traffic_of(report: TrafficReport) -> FraudTraffic {
    FraudTraffic {
        spend: report
            .spend
            .iter()
            .map(|line| FraudSpend {
                scope: line.scope.clone(),
                window: line.window.to_owned(),
                spent: line.spent,
                cap: line.cap,
                reached: line.reached(),
            })
            .collect(),
        bucket_secs: report.bucket_secs,
        level: level(report.level),
        baseline_conversion: report.baseline_conversion,
        series: report
            .series
            .into_iter()
            .map(|bucket| FraudTrafficBucket {
                t_ms: bucket.t_ms,
                sends: bucket.sends,
                verified: bucket.verified,
                refused: bucket.refused,
                undelivered: bucket.undelivered,
                by_country: bucket
                    .by_country
                    .into_iter()
                    .map(|(country, counts)| {
                        let counts = FraudCountryCounts {
                            sends: counts.sends,
                            verified: counts.conversions,
                        };
                        (country, counts)
                    })
                    .collect(),
            })
            .collect(),
        top_prefixes: report
            .top_prefixes
            .into_iter()
            .map(|prefix| FraudPrefixTraffic {
                prefix: prefix.prefix,
                country: prefix.country,
                sends: prefix.sends,
                verified: prefix.verified,
                undelivered: prefix.undelivered,
                unconverted: prefix.unconverted,
                conversion: prefix.conversion,
                state: match prefix.state {
                    PrefixState::Ok => FraudPrefixState::Ok,
                    PrefixState::Monitored => FraudPrefixState::Monitored,
                    PrefixState::Held => FraudPrefixState::Held,
                    PrefixState::Suspended => FraudPrefixState::Suspended,
                },
            })
            .collect(),
    }
}
