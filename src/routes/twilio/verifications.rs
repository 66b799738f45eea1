//! `/v2/Services/{Sid}/Verifications[/{Sid}]` and `/VerificationCheck`: Twilio's Verifications
//! over HTTP (start, fetch, update, check); what they mean is `twilio_compat::verifications`.

use actix_web::HttpResponse;
use serde::Serialize;

use super::reply::{Reply, json_answer};
use super::{Call, date};
use crate::routes::to_the_end::ToTheEnd;
use crate::twilio_compat::{CheckTarget, StartCommand, TwilioError, Verification, push_json_str};

/// The answer of a check, serialised from a struct (a `serde_json::Value` built first cost
/// more than the rest of the route's own work); the shape of the description's
/// `verify.v2.service.verification_check`.
#[derive(Serialize)]
struct CheckJson<'a> {
    sid: &'a str,
    service_sid: &'a str,
    account_sid: &'a str,
    to: &'a str,
    channel: &'a str,
    status: &'static str,
    valid: bool,
    amount: Option<()>,
    payee: Option<()>,
    date_created: String,
    date_updated: String,
    sna_attempts_error_codes: [(); 0],
}

/// The answer of a start (and of a fetch or an update): the description's
/// `verify.v2.service.verification`, written by hand: serde's writer escaped every string
/// character by character and cost more than the route's own work. Every string goes through
/// [`push_json_str`], which escapes what needs it.
fn verification_body(verification: &Verification, call: &Call<'_>) -> String {
    let mut out = String::with_capacity(640);
    out.push_str("{\"sid\":");
    push_plain_str(&mut out, &verification.sid);
    out.push_str(",\"service_sid\":");
    push_plain_str(&mut out, &verification.service_sid);
    out.push_str(",\"account_sid\":");
    push_plain_str(&mut out, &verification.account_sid);
    out.push_str(",\"to\":");
    push_json_str(&mut out, &verification.to);
    out.push_str(",\"channel\":");
    push_plain_str(&mut out, verification.channel);
    out.push_str(",\"status\":");
    push_plain_str(&mut out, verification.status.as_str());
    let valid = verification.status == crate::twilio_compat::TwilioStatus::Approved;
    out.push_str(if valid {
        ",\"valid\":true"
    } else {
        ",\"valid\":false"
    });
    out.push_str(",\"lookup\":{},\"amount\":null,\"payee\":null,\"send_code_attempts\":[");
    // A first start's three dates are one second: written once.
    let created = date(verification.created_ms);
    let date_of = |ms: u64| {
        if ms / 1000 == verification.created_ms / 1000 {
            std::borrow::Cow::Borrowed(created.as_str())
        } else {
            std::borrow::Cow::Owned(date(ms))
        }
    };
    for (index, attempt) in verification.send_code_attempts.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str("{\"time\":");
        push_plain_str(&mut out, &date_of(attempt.time_ms));
        out.push_str(",\"channel\":");
        push_plain_str(&mut out, &attempt.channel);
        out.push_str(",\"attempt_sid\":");
        push_plain_str(&mut out, &attempt.attempt_sid);
        out.push('}');
    }
    out.push_str("],\"date_created\":");
    push_plain_str(&mut out, &created);
    out.push_str(",\"date_updated\":");
    push_plain_str(&mut out, &date_of(verification.updated_ms));
    out.push_str(",\"sna\":null,\"url\":");
    let mut url = call.base_url();
    for part in [
        "/Services/",
        &verification.service_sid,
        "/Verifications/",
        &verification.sid,
    ] {
        url.push_str(part);
    }
    push_json_str(&mut out, &url);
    out.push('}');
    out
}

/// `text`, known to need no escaping (SIDs and dates vcode writes, a channel, a status), as a
/// JSON string; checked in debug builds. `to` and the `url` (from a request's `Host`) go
/// through [`push_json_str`].
fn push_plain_str(out: &mut String, text: &str) {
    debug_assert!(
        !text
            .bytes()
            .any(|byte| byte < 0x20 || byte == b'"' || byte == b'\\'),
        "{text:?} needs escaping"
    );
    out.push('"');
    out.push_str(text);
    out.push('"');
}

pub(super) async fn start(call: &Call<'_>, sid: &str) -> Reply {
    let form = &call.form;
    let command = StartCommand {
        to: form.text("To").ok_or(TwilioError::InvalidParameter("To"))?,
        channel: form
            .text("Channel")
            .ok_or(TwilioError::InvalidParameter("Channel"))?,
        locale: form.text("Locale"),
        custom_friendly_name: form.text("CustomFriendlyName"),
        channel_configuration: form.text("ChannelConfiguration"),
        rate_limits: form.text("RateLimits"),
    };
    let twilio = call.state.twilio.clone();
    let account = call.account.to_owned();
    let sid = sid.to_owned();
    // Runs to the end even if the client goes away: a code is never left without its SMS (or
    // mail) or its roll-back, nor a send without its log entry.
    let verification = ToTheEnd::new(async move { twilio.start(&account, &sid, command).await })
        .await
        .map_err(|error| TwilioError::Internal(error.into()))??;
    let body = verification_body(&verification, call);
    Ok(json_answer(HttpResponse::Created(), body))
}

pub(super) async fn fetch(call: &Call<'_>, sid: &str, verification: &str) -> Reply {
    let verification = call
        .twilio()
        .verification(call.account, sid, verification)
        .await?;
    let body = verification_body(&verification, call);
    Ok(json_answer(HttpResponse::Ok(), body))
}

pub(super) async fn update(call: &Call<'_>, sid: &str, verification: &str) -> Reply {
    let status = call
        .form
        .get("Status")
        .ok_or(TwilioError::InvalidParameter("Status"))?;
    let verification = call
        .twilio()
        .update_verification(call.account, sid, verification, status)
        .await?;
    let body = verification_body(&verification, call);
    Ok(json_answer(HttpResponse::Ok(), body))
}

pub(super) async fn check(call: &Call<'_>, sid: &str) -> Reply {
    let form = &call.form;
    let code = form
        .get("Code")
        .ok_or(TwilioError::InvalidParameter("Code"))?;
    let target = match (form.text("VerificationSid"), form.text("To")) {
        (Some(verification), _) => CheckTarget::Verification(verification),
        (None, Some(to)) => CheckTarget::To(to),
        (None, None) => return Err(TwilioError::InvalidParameter("To or VerificationSid").into()),
    };
    let check = call.twilio().check(call.account, sid, code, target).await?;
    let verification = &check.verification;
    Ok(HttpResponse::Ok().json(CheckJson {
        sid: &verification.sid,
        service_sid: &verification.service_sid,
        account_sid: &verification.account_sid,
        to: &verification.to,
        channel: verification.channel,
        status: verification.status.as_str(),
        valid: check.valid,
        amount: None,
        payee: None,
        date_created: date(verification.created_ms),
        date_updated: date(verification.updated_ms),
        sna_attempts_error_codes: [],
    }))
}
