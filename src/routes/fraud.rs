//! The fraud guard's operator routes (the operator listener, behind the admin token): the
//! prefixes suspended or held back, a lift, and the traffic series the console charts. HTTP
//! only: the guard's use-case methods answer, mapped to the wire types here.

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::{ApiError, AppState, envelope};
use crate::fraud::{Level, PrefixState, Reason, Suspension, TrafficReport};
use vcode_wire::{
    FraudCountryCounts, FraudLevel, FraudLifted, FraudPrefixState, FraudPrefixTraffic, FraudReason,
    FraudSuspension, FraudSuspensions, FraudTraffic, FraudTrafficBucket, paths,
};

/// The traffic route's span: a day at most (what the guard keeps), an hour by default.
const MAX_MINUTES: u32 = 1440;
const DEFAULT_MINUTES: u32 = 60;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::get_resource(paths::FRAUD_SUSPENSIONS).route(super::get().to(suspensions)))
        .service(super::post_resource(paths::FRAUD_LIFT).route(web::post().to(lift)))
        .service(super::get_resource(paths::FRAUD_TRAFFIC).route(super::get().to(traffic)));
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
