//! `/v2/Services/{Sid}/Entities[/{Identity}[/Factors|Challenges[/{Sid}]]]`: Twilio Verify's
//! TOTP factors over HTTP, the shapes of Twilio's description; every decision is
//! `crate::totp`'s, the same core as `/api/v1/totp`'s, scoped by the Service's SID.

use actix_web::HttpResponse;
use serde_json::{Value, json};

use super::reply::{Reply, TwilioReply};
use super::{Call, date};
use crate::totp::{Algorithm, Challenge, Entity, Factor, TotpConfig, wall_ms};
use crate::twilio_compat::{Service, TwilioError};

fn entity_url(base: &str, service: &str, identity: &str) -> String {
    format!("{base}/Services/{service}/Entities/{identity}")
}

fn entity_json(entity: &Entity, service: &Service, base: &str) -> Value {
    let url = entity_url(base, &service.sid, &entity.identity);
    json!({
        "sid": entity.sid,
        "identity": entity.identity,
        "account_sid": service.account_sid,
        "service_sid": service.sid,
        "date_created": date(entity.created_ms),
        "date_updated": date(entity.updated_ms),
        "url": url,
        "links": {
            "factors": format!("{url}/Factors"),
            "new_factors": format!("{url}/NewFactors"),
            "challenges": format!("{url}/Challenges"),
        },
    })
}

fn factor_json(factor: &Factor, service: &Service, base: &str, binding: Option<Value>) -> Value {
    let url = format!(
        "{}/Factors/{}",
        entity_url(base, &service.sid, &factor.identity),
        factor.sid
    );
    let mut shown = json!({
        "sid": factor.sid,
        "account_sid": service.account_sid,
        "service_sid": service.sid,
        "entity_sid": factor.entity_sid,
        "identity": factor.identity,
        "date_created": date(factor.created_ms),
        "date_updated": date(factor.updated_ms),
        "friendly_name": factor.friendly_name,
        "status": factor.status.as_str(),
        "factor_type": "totp",
        "config": {
            "alg": factor.config.algorithm.as_str(),
            "skew": factor.config.skew,
            "code_length": factor.config.digits,
            "time_step": factor.config.step_secs,
        },
        "metadata": null,
        "url": url,
    });
    // Only a create shows the binding (the secret, once), beside the new factor's options.
    if let Some(binding) = binding {
        shown["binding"] = binding;
        shown["options"] = Value::Null;
    }
    shown
}

fn challenge_json(challenge: &Challenge, service: &Service, base: &str) -> Value {
    let url = format!(
        "{}/Challenges/{}",
        entity_url(base, &service.sid, &challenge.identity),
        challenge.sid
    );
    json!({
        "sid": challenge.sid,
        "account_sid": service.account_sid,
        "service_sid": service.sid,
        "entity_sid": challenge.entity_sid,
        "identity": challenge.identity,
        "factor_sid": challenge.factor_sid,
        "date_created": date(challenge.created_ms),
        "date_updated": date(challenge.updated_ms),
        "date_responded": challenge.responded_ms.map(date),
        "expiration_date": date(challenge.expires_ms),
        "status": challenge.shown_status(wall_ms()),
        "responded_reason": "none",
        "details": null,
        "hidden_details": null,
        "metadata": null,
        "factor_type": "totp",
        "url": url,
        "links": {"notifications": format!("{url}/Notifications")},
    })
}

async fn service(call: &Call<'_>, sid: &str) -> Result<std::sync::Arc<Service>, TwilioReply> {
    Ok(call.twilio().service(call.account, sid).await?)
}

fn failed(error: crate::totp::TotpError) -> TwilioReply {
    TwilioError::from(error).into()
}

pub(super) async fn create_entity(call: &Call<'_>, sid: &str) -> Reply {
    let service = service(call, sid).await?;
    let identity = call
        .form
        .get("Identity")
        .ok_or(TwilioError::InvalidParameter("Identity"))?;
    let entity = call
        .state
        .totp
        .create_entity(&service.sid, identity)
        .await
        .map_err(failed)?;
    Ok(HttpResponse::Created().json(entity_json(&entity, &service, &call.base_url())))
}

pub(super) async fn list_entities(call: &Call<'_>, sid: &str) -> Reply {
    let service = service(call, sid).await?;
    let entities = call
        .state
        .totp
        .entities(&service.sid)
        .await
        .map_err(failed)?;
    let base = call.base_url();
    let url = format!("{base}/Services/{}/Entities", service.sid);
    let listed = call.listing(&entities, &url, "entities", |entity| {
        entity_json(entity, &service, &base)
    })?;
    Ok(HttpResponse::Ok().json(listed))
}

pub(super) async fn fetch_entity(call: &Call<'_>, sid: &str, identity: &str) -> Reply {
    let service = service(call, sid).await?;
    let entity = call
        .state
        .totp
        .entity(&service.sid, identity)
        .await
        .map_err(failed)?;
    Ok(HttpResponse::Ok().json(entity_json(&entity, &service, &call.base_url())))
}

pub(super) async fn delete_entity(call: &Call<'_>, sid: &str, identity: &str) -> Reply {
    let service = service(call, sid).await?;
    call.state
        .totp
        .delete_entity(&service.sid, identity)
        .await
        .map_err(failed)?;
    Ok(HttpResponse::NoContent().finish())
}

/// A factor's settings: the create's `Config.*`, else the Service's `Totp.*`, else RFC 6238's.
fn factor_config(call: &Call<'_>, service: &Service) -> Result<TotpConfig, TwilioReply> {
    let defaults = service.totp_config();
    let form = &call.form;
    Ok(TotpConfig {
        algorithm: match form.get("Config.Alg") {
            None => defaults.algorithm,
            Some(raw) => {
                Algorithm::parse(raw).ok_or(TwilioError::InvalidParameter("Config.Alg"))?
            }
        },
        digits: form.number("Config.CodeLength")?.unwrap_or(defaults.digits),
        step_secs: form
            .number("Config.TimeStep")?
            .unwrap_or(defaults.step_secs),
        skew: form.number("Config.Skew")?.unwrap_or(defaults.skew),
    })
}

pub(super) async fn create_factor(call: &Call<'_>, sid: &str, identity: &str) -> Reply {
    let service = service(call, sid).await?;
    match call.form.get("FactorType") {
        Some("totp") => {}
        Some("push" | "passkeys") => {
            return Err(TwilioError::ChannelDisabled("FactorType".to_owned()).into());
        }
        _ => return Err(TwilioError::InvalidParameter("FactorType").into()),
    }
    let name = call
        .form
        .get("FriendlyName")
        .ok_or(TwilioError::InvalidParameter("FriendlyName"))?;
    let config = factor_config(call, &service)?;
    let issuer = service.totp_issuer();
    let enrolment = call
        .state
        .totp
        .enrol(&service.sid, identity, name, &issuer, config)
        .await
        .map_err(failed)?;
    let binding = json!({"secret": enrolment.secret_base32, "uri": enrolment.uri});
    Ok(HttpResponse::Created().json(factor_json(
        &enrolment.factor,
        &service,
        &call.base_url(),
        Some(binding),
    )))
}

pub(super) async fn list_factors(call: &Call<'_>, sid: &str, identity: &str) -> Reply {
    let service = service(call, sid).await?;
    let factors = call
        .state
        .totp
        .factors(&service.sid, identity)
        .await
        .map_err(failed)?;
    let base = call.base_url();
    let url = format!("{}/Factors", entity_url(&base, &service.sid, identity));
    let listed = call.listing(&factors, &url, "factors", |factor| {
        factor_json(factor, &service, &base, None)
    })?;
    Ok(HttpResponse::Ok().json(listed))
}

pub(super) async fn fetch_factor(call: &Call<'_>, ids: (&str, &str, &str)) -> Reply {
    let (sid, identity, factor) = ids;
    let service = service(call, sid).await?;
    let factor = call
        .state
        .totp
        .factor(&service.sid, identity, factor)
        .await
        .map_err(failed)?;
    Ok(HttpResponse::Ok().json(factor_json(&factor, &service, &call.base_url(), None)))
}

/// Twilio's factor verification: `AuthPayload`, the app's first code; a wrong one leaves it
/// `unverified` (and counts).
pub(super) async fn update_factor(call: &Call<'_>, ids: (&str, &str, &str)) -> Reply {
    let (sid, identity, factor) = ids;
    let service = service(call, sid).await?;
    let Some(code) = call.form.get("AuthPayload") else {
        let factor = call
            .state
            .totp
            .factor(&service.sid, identity, factor)
            .await
            .map_err(failed)?;
        return Ok(HttpResponse::Ok().json(factor_json(&factor, &service, &call.base_url(), None)));
    };
    let checked = call
        .state
        .totp
        .check_code(&service.sid, identity, factor, code, None, true)
        .await
        .map_err(failed)?;
    Ok(HttpResponse::Ok().json(factor_json(
        &checked.factor,
        &service,
        &call.base_url(),
        None,
    )))
}

pub(super) async fn delete_factor(call: &Call<'_>, ids: (&str, &str, &str)) -> Reply {
    let (sid, identity, factor) = ids;
    let service = service(call, sid).await?;
    call.state
        .totp
        .delete_factor(&service.sid, identity, factor)
        .await
        .map_err(failed)?;
    Ok(HttpResponse::NoContent().finish())
}

pub(super) async fn create_challenge(call: &Call<'_>, sid: &str, identity: &str) -> Reply {
    let service = service(call, sid).await?;
    let factor = call
        .form
        .get("FactorSid")
        .ok_or(TwilioError::InvalidParameter("FactorSid"))?;
    let code = call
        .form
        .get("AuthPayload")
        .ok_or(TwilioError::InvalidParameter("AuthPayload"))?;
    let challenge = call
        .state
        .totp
        .challenge_with(&service.sid, identity, factor, code, None)
        .await
        .map_err(failed)?;
    Ok(HttpResponse::Created().json(challenge_json(&challenge, &service, &call.base_url())))
}

pub(super) async fn list_challenges(call: &Call<'_>, sid: &str, identity: &str) -> Reply {
    let service = service(call, sid).await?;
    let challenges = call
        .state
        .totp
        .challenges(&service.sid, identity)
        .await
        .map_err(failed)?;
    let base = call.base_url();
    let url = format!("{}/Challenges", entity_url(&base, &service.sid, identity));
    let listed = call.listing(&challenges, &url, "challenges", |challenge| {
        challenge_json(challenge, &service, &base)
    })?;
    Ok(HttpResponse::Ok().json(listed))
}

pub(super) async fn fetch_challenge(call: &Call<'_>, ids: (&str, &str, &str)) -> Reply {
    let (sid, identity, challenge) = ids;
    let service = service(call, sid).await?;
    let challenge = call
        .state
        .totp
        .challenge(&service.sid, identity, challenge)
        .await
        .map_err(failed)?;
    Ok(HttpResponse::Ok().json(challenge_json(&challenge, &service, &call.base_url())))
}
