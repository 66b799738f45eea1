//! `/v2/Services/{Sid}/RateLimits[/{Sid}[/Buckets[/{Sid}]]]`: Twilio's Service Rate Limits and
//! their Buckets over HTTP (form bodies, Twilio's JSON and errors); what they mean is
//! `twilio_compat::rate_limits`.

use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Value, json};

use super::{Form, Reply, account, base_url, date, listing};
use crate::routes::AppState;
use crate::twilio_compat::{Bucket, BucketChanges, RateLimit, Service, TwilioCompat};

fn rate_limit_json(service: &Service, limit: &RateLimit, base: &str) -> Value {
    let url = format!("{base}/Services/{}/RateLimits/{}", service.sid, limit.sid);
    json!({
        "sid": limit.sid,
        "service_sid": service.sid,
        "account_sid": service.account_sid,
        "unique_name": limit.unique_name,
        "description": limit.description,
        "date_created": date(limit.created_ms),
        "date_updated": date(limit.updated_ms),
        "url": url,
        "links": {"buckets": format!("{url}/Buckets")},
    })
}

fn bucket_json(service: &Service, limit: &str, bucket: &Bucket, base: &str) -> Value {
    json!({
        "sid": bucket.sid,
        "rate_limit_sid": limit,
        "service_sid": service.sid,
        "account_sid": service.account_sid,
        "max": bucket.max,
        "interval": bucket.interval_secs,
        "date_created": date(bucket.created_ms),
        "date_updated": date(bucket.updated_ms),
        "url": format!("{base}/Services/{}/RateLimits/{limit}/Buckets/{}", service.sid, bucket.sid),
    })
}

fn bucket_changes(form: &Form<'_>) -> Result<BucketChanges, super::TwilioReply> {
    Ok(BucketChanges {
        max: form.number("Max")?,
        interval_secs: form.number("Interval")?,
    })
}

pub(super) async fn list_rate_limits(request: &HttpRequest, state: &AppState, sid: &str) -> Reply {
    let account = account(request, state)?;
    let service = state.twilio.service(account, sid).await?;
    let base = base_url(request, state);
    let url = format!("{base}/Services/{sid}/RateLimits");
    let listed = listing(
        request,
        &service.rate_limits,
        &url,
        "rate_limits",
        |limit| rate_limit_json(&service, limit, &base),
    )?;
    Ok(HttpResponse::Ok().json(listed))
}

pub(super) async fn create_rate_limit(
    request: &HttpRequest,
    state: &AppState,
    sid: &str,
    body: &[u8],
) -> Reply {
    let account = account(request, state)?;
    let form = Form::read(body);
    let limit = state
        .twilio
        .create_rate_limit(
            account,
            sid,
            form.get("UniqueName"),
            form.get("Description"),
        )
        .await?;
    let service = state.twilio.service(account, sid).await?;
    let body = rate_limit_json(&service, &limit, &base_url(request, state));
    Ok(HttpResponse::Created().json(body))
}

pub(super) async fn fetch_rate_limit(
    request: &HttpRequest,
    state: &AppState,
    sid: &str,
    limit: &str,
) -> Reply {
    let account = account(request, state)?;
    let service = state.twilio.service(account, sid).await?;
    let body = rate_limit_json(
        &service,
        service.rate_limit(limit)?,
        &base_url(request, state),
    );
    Ok(HttpResponse::Ok().json(body))
}

pub(super) async fn update_rate_limit(
    request: &HttpRequest,
    state: &AppState,
    sid: &str,
    limit: &str,
    body: &[u8],
) -> Reply {
    let account = account(request, state)?;
    let form = Form::read(body);
    let updated = state
        .twilio
        .update_rate_limit(account, sid, limit, form.get("Description"))
        .await?;
    let service = state.twilio.service(account, sid).await?;
    let body = rate_limit_json(&service, &updated, &base_url(request, state));
    Ok(HttpResponse::Ok().json(body))
}

pub(super) async fn delete_rate_limit(
    request: &HttpRequest,
    state: &AppState,
    sid: &str,
    limit: &str,
) -> Reply {
    let account = account(request, state)?;
    state.twilio.delete_rate_limit(account, sid, limit).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub(super) async fn list_buckets(
    request: &HttpRequest,
    state: &AppState,
    sid: &str,
    limit: &str,
) -> Reply {
    let account = account(request, state)?;
    let service = state.twilio.service(account, sid).await?;
    let base = base_url(request, state);
    let url = format!("{base}/Services/{sid}/RateLimits/{limit}/Buckets");
    let buckets = &service.rate_limit(limit)?.buckets;
    let listed = listing(request, buckets, &url, "buckets", |bucket| {
        bucket_json(&service, limit, bucket, &base)
    })?;
    Ok(HttpResponse::Ok().json(listed))
}

pub(super) async fn create_bucket(
    request: &HttpRequest,
    state: &AppState,
    sid: &str,
    limit: &str,
    body: &[u8],
) -> Reply {
    let account = account(request, state)?;
    let changes = bucket_changes(&Form::read(body))?;
    let bucket = state
        .twilio
        .create_bucket(account, sid, limit, changes)
        .await?;
    let service = state.twilio.service(account, sid).await?;
    let body = bucket_json(&service, limit, &bucket, &base_url(request, state));
    Ok(HttpResponse::Created().json(body))
}

pub(super) async fn fetch_bucket(
    request: &HttpRequest,
    state: &AppState,
    (sid, limit, bucket): (&str, &str, &str),
) -> Reply {
    let account = account(request, state)?;
    let service = state.twilio.service(account, sid).await?;
    let found = TwilioCompat::bucket(&service, limit, bucket)?;
    let body = bucket_json(&service, limit, found, &base_url(request, state));
    Ok(HttpResponse::Ok().json(body))
}

pub(super) async fn update_bucket(
    request: &HttpRequest,
    state: &AppState,
    (sid, limit, bucket): (&str, &str, &str),
    body: &[u8],
) -> Reply {
    let account = account(request, state)?;
    let changes = bucket_changes(&Form::read(body))?;
    let updated = state
        .twilio
        .update_bucket(account, sid, limit, bucket, changes)
        .await?;
    let service = state.twilio.service(account, sid).await?;
    let body = bucket_json(&service, limit, &updated, &base_url(request, state));
    Ok(HttpResponse::Ok().json(body))
}

pub(super) async fn delete_bucket(
    request: &HttpRequest,
    state: &AppState,
    (sid, limit, bucket): (&str, &str, &str),
) -> Reply {
    let account = account(request, state)?;
    state
        .twilio
        .delete_bucket(account, sid, limit, bucket)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
