//! `/v2/Services[/{Sid}]`: Twilio's Verify Services over HTTP (list, create, fetch, update,
//! delete); what they mean is `twilio_compat::services`.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use serde_json::{Value, json};

use super::reply::Reply;
use super::{Call, date};
use crate::twilio_compat::Service;

fn service_json(service: &Service, base: &str) -> Value {
    let url = format!("{base}/Services/{}", service.sid);
    json!({
        "sid": service.sid,
        "account_sid": service.account_sid,
        "friendly_name": service.friendly_name,
        "code_length": service.code_length,
        "lookup_enabled": service.lookup_enabled,
        "psd2_enabled": service.psd2_enabled,
        "skip_sms_to_landlines": service.skip_sms_to_landlines,
        "dtmf_input_required": service.dtmf_input_required,
        "tts_name": null,
        "do_not_share_warning_enabled": service.do_not_share_warning_enabled,
        "custom_code_enabled": service.custom_code_enabled,
        "push": {"include_date": false, "apn_credential_sid": null, "fcm_credential_sid": null},
        "totp": {
            "issuer": service.totp.issuer,
            "time_step": service.totp.time_step,
            "code_length": service.totp.code_length,
            "skew": service.totp.skew,
        },
        "default_template_sid": null,
        "whatsapp": {"msg_service_sid": null, "from": null},
        "passkeys": null,
        "verify_event_subscription_enabled": false,
        // vcode's own, beside Twilio's: the code lifetime (null: the server's) and the texts.
        "vcode_code_ttl": service.code_ttl_secs,
        "vcode_texts": service.texts,
        "date_created": date(service.created_ms),
        "date_updated": date(service.updated_ms),
        "url": url,
        "links": {
            "verification_checks": format!("{url}/VerificationCheck"),
            "verifications": format!("{url}/Verifications"),
            "rate_limits": format!("{url}/RateLimits"),
            "messaging_configurations": format!("{url}/MessagingConfigurations"),
            "entities": format!("{url}/Entities"),
            "webhooks": format!("{url}/Webhooks"),
            "access_tokens": format!("{url}/AccessTokens"),
        },
    })
}

pub(super) async fn list(call: &Call<'_>) -> Reply {
    let services = call.twilio().services(call.account).await?;
    let base = call.base_url();
    let url = format!("{base}/Services");
    let listed = call.listing(&services, &url, "services", |service| {
        service_json(service, &base)
    })?;
    Ok(HttpResponse::Ok().json(listed))
}

pub(super) async fn create(call: &Call<'_>) -> Reply {
    let changes = call.form.service_changes()?;
    let service = call.twilio().create_service(call.account, changes).await?;
    Ok(HttpResponse::Created().json(service_json(&service, &call.base_url())))
}

pub(super) async fn fetch(call: &Call<'_>, sid: &str) -> Reply {
    call.in_service(sid, StatusCode::OK, |service, base| {
        Ok(service_json(service, base))
    })
    .await
}

pub(super) async fn update(call: &Call<'_>, sid: &str) -> Reply {
    let changes = call.form.service_changes()?;
    let service = call
        .twilio()
        .update_service(call.account, sid, changes)
        .await?;
    Ok(HttpResponse::Ok().json(service_json(&service, &call.base_url())))
}

pub(super) async fn delete(call: &Call<'_>, sid: &str) -> Reply {
    call.twilio().delete_service(call.account, sid).await?;
    Ok(HttpResponse::NoContent().finish())
}
