//! `/v2/Services/{Sid}/RateLimits[/{Sid}[/Buckets[/{Sid}]]]`: Twilio's Service Rate Limits and
//! their Buckets over HTTP (form bodies, Twilio's JSON and errors); what they mean is
//! `twilio_compat::rate_limits`.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use serde_json::{Value, json};

use super::form::Form;
use super::reply::{Reply, TwilioReply};
use super::{Call, date};
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

fn bucket_changes(form: &Form<'_>) -> Result<BucketChanges, TwilioReply> {
    Ok(BucketChanges {
        max: form.number("Max")?,
        interval_secs: form.number("Interval")?,
    })
}

pub(super) async fn list_rate_limits(call: &Call<'_>, sid: &str) -> Reply {
    call.in_service(sid, StatusCode::OK, |service, base| {
        let url = format!("{base}/Services/{sid}/RateLimits");
        call.listing(&service.rate_limits, &url, "rate_limits", |limit| {
            rate_limit_json(service, limit, base)
        })
    })
    .await
}

pub(super) async fn create_rate_limit(call: &Call<'_>, sid: &str) -> Reply {
    let (name, description) = (call.form.get("UniqueName"), call.form.get("Description"));
    let limit = call
        .twilio()
        .create_rate_limit(call.account, sid, name, description)
        .await?;
    call.in_service(sid, StatusCode::CREATED, |service, base| {
        Ok(rate_limit_json(service, &limit, base))
    })
    .await
}

pub(super) async fn fetch_rate_limit(call: &Call<'_>, sid: &str, limit: &str) -> Reply {
    call.in_service(sid, StatusCode::OK, |service, base| {
        Ok(rate_limit_json(service, service.rate_limit(limit)?, base))
    })
    .await
}

pub(super) async fn update_rate_limit(call: &Call<'_>, sid: &str, limit: &str) -> Reply {
    let description = call.form.get("Description");
    let updated = call
        .twilio()
        .update_rate_limit(call.account, sid, limit, description)
        .await?;
    call.in_service(sid, StatusCode::OK, |service, base| {
        Ok(rate_limit_json(service, &updated, base))
    })
    .await
}

pub(super) async fn delete_rate_limit(call: &Call<'_>, sid: &str, limit: &str) -> Reply {
    call.twilio()
        .delete_rate_limit(call.account, sid, limit)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

pub(super) async fn list_buckets(call: &Call<'_>, sid: &str, limit: &str) -> Reply {
    call.in_service(sid, StatusCode::OK, |service, base| {
        let url = format!("{base}/Services/{sid}/RateLimits/{limit}/Buckets");
        let buckets = &service.rate_limit(limit)?.buckets;
        call.listing(buckets, &url, "buckets", |bucket| {
            bucket_json(service, limit, bucket, base)
        })
    })
    .await
}

pub(super) async fn create_bucket(call: &Call<'_>, sid: &str, limit: &str) -> Reply {
    let changes = bucket_changes(&call.form)?;
    let bucket = call
        .twilio()
        .create_bucket(call.account, sid, limit, changes)
        .await?;
    call.in_service(sid, StatusCode::CREATED, |service, base| {
        Ok(bucket_json(service, limit, &bucket, base))
    })
    .await
}

pub(super) async fn fetch_bucket(
    call: &Call<'_>,
    (sid, limit, bucket): (&str, &str, &str),
) -> Reply {
    call.in_service(sid, StatusCode::OK, |service, base| {
        let found = TwilioCompat::bucket(service, limit, bucket)?;
        Ok(bucket_json(service, limit, found, base))
    })
    .await
}

pub(super) async fn update_bucket(
    call: &Call<'_>,
    (sid, limit, bucket): (&str, &str, &str),
) -> Reply {
    let changes = bucket_changes(&call.form)?;
    let updated = call
        .twilio()
        .update_bucket(call.account, sid, limit, bucket, changes)
        .await?;
    call.in_service(sid, StatusCode::OK, |service, base| {
        Ok(bucket_json(service, limit, &updated, base))
    })
    .await
}

pub(super) async fn delete_bucket(
    call: &Call<'_>,
    (sid, limit, bucket): (&str, &str, &str),
) -> Reply {
    call.twilio()
        .delete_bucket(call.account, sid, limit, bucket)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
