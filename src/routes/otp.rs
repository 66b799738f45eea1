//! `POST /api/v1/otp/send`, `POST /api/v1/otp/verify`, and the verification resource:
//! `GET /api/v1/otp/verifications/{id}` and `POST /api/v1/otp/verifications/{id}/cancel`.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use vcode_wire::{
    Delivery, SendData, SendRequest, VerificationData, VerificationStatus, VerifyData,
    VerifyRequest, headers, paths,
};

use super::api_key::{MayReadStatus, MaySend, MayVerify};
use super::envelope;
use super::json_body::{JsonBytes, Text};
use super::openapi::Api;
use super::to_the_end::ToTheEnd;
use super::{ApiError, AppState};
use crate::api_keys::{ApiKeyName, Operation};
use crate::idempotency::IdempotencyKey;
use crate::otp::{
    self, Caller, DeliveryStatus, EndUser, Owner, SendCommand, TenantId, VerificationView,
    VerifyCommand,
};

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::post_resource(paths::OTP_SEND).route(web::post().to(send)))
        .service(super::post_resource(paths::OTP_VERIFY).route(web::post().to(verify)))
        .service(super::get_resource(paths::OTP_VERIFICATION).route(super::get().to(verification)))
        .service(
            super::post_resource(paths::OTP_VERIFICATION_CANCEL)
                .route(web::post().to(cancel_verification)),
        );
}

/// What `config` serves, for the OpenAPI description.
pub fn describe(api: &mut Api, api_key_required: &[Operation]) {
    use vcode_wire::ErrorCode::*;
    api.security_scheme(
        "apiKey",
        serde_json::json!({
            "type": "http",
            "scheme": "bearer",
            "description": "An API key (`vcode api-key NAME`), on the operations VCODE_REQUIRE_API_KEY lists",
        }),
    );
    let key_for = |operation: Operation, api: &mut Api, path: &'static str| {
        if api_key_required.contains(&operation) {
            api.operation_mut(path)
                .security(serde_json::json!([{"apiKey": []}]))
                .errors(&[Unauthorized]);
        }
    };
    let body = api.schema::<SendRequest>();
    let data = api.schema::<SendData>();
    api.post(paths::OTP_SEND, "otp", "Send a code by SMS or email")
        .describe(
            "To `phone` by SMS or to `email` by mail: exactly one of the two (40000 otherwise; \
             40008 for an address vcode does not send to, 40000 where the service has no mail \
             relay). A mail the relay refused (5xx) or could not take rolls the code back \
             (50201); one written whole whose answer never came is `unconfirmed`, as an SMS. \
             Number types and countries apply to phones only. \
             One code per destination and purpose: a send during the cooldown changes nothing (42900); \
             after it the same code is sent again or replaced (VCODE_RESEND). An SMS the provider \
             refused rolls the code back (50200). An SMS whose provider never answered (a timeout \
             after the request went out) may still arrive: its code and cooldown stay, no other \
             provider is tried, and the answer is 200 with `delivery` `unconfirmed` (`sent` when \
             the provider confirmed). Over a quota, vcode's own or the SMS provider's limit on the \
             number or the account (not failed over to another provider), the answer is 42902 \
             with retry_after, and the code is rolled back. With VCODE_SEND_GATE the body also \
             carries a solved captcha (40020 otherwise) or an ALTCHA payload (40021 otherwise). Only \
             numbers of the allowed types (mobile, fixed-line-or-mobile by default; 40004 \
             otherwise: premium rate, toll-free, non-geographic…) in served countries (the \
             default region's by default; 40005 otherwise) get an SMS. A destination prefix the \
             fraud guard suspended (its sends stopped converting) or held back (a surge of \
             unverified sends) is refused with 40300 and retry_after, before the gate is consumed.",
        )
        .parameter(
            "header",
            "Idempotency-Key",
            false,
            serde_json::json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x21-\\x7e]+$"}),
            "Retries of one logical send carry the same key: one code, one SMS, the same answer \
             (40000 when not 1 to 255 visible ASCII characters). With API keys, each caller's \
             keys are its own",
        )
        .body(body)
        .ok_envelope(data)
        .errors(&[
            InvalidPhone,
            InvalidEmail,
            InvalidPurpose,
            NumberTypeRefused,
            RegionRefused,
            DestinationSuspended,
            WrongCaptcha,
            PowRejected,
            IdempotencyInProgress,
            IdempotencyMismatch,
            ResendCooldown,
            QuotaExceeded,
            Internal,
            SmsDelivery,
            EmailDelivery,
            StoreUnavailable,
        ]);
    key_for(Operation::Send, api, paths::OTP_SEND);
    let body = api.schema::<VerifyRequest>();
    let data = api.schema::<VerifyData>();
    api.post(paths::OTP_VERIFY, "otp", "Verify a code")
        .describe(
            "By the `verification_id` the send answered (VCODE_VERIFY_BY=id, the default; 40006 \
             without it, 40401 for an unknown one, 40007 when a `phone` or `purpose` given is \
             not the verification's), or by destination (`phone`, or `email` for a code sent by \
             mail: one of the two; 40008 for a malformed address), or either. The token's `sub` \
             is the E.164 phone or the address (its domain in A-labels, all lower case), and its \
             `channel` claim `sms` or `email`. One atomic step: a match \
             consumes the code (for every id) and the token names the id (`vid`); a mismatch \
             counts a failed attempt of that id alone (40010 with the attempts left) and the \
             last one spends the id (42901), never the code: under its own id its requester \
             still verifies it. By phone, the attempts are the code's and the last destroys it. \
             41000 when the code is no longer pending for this id (used, replaced, expired, or \
             the verification canceled).",
        )
        .body(body)
        .ok_envelope(data)
        .errors(&[
            InvalidPhone,
            InvalidEmail,
            InvalidCode,
            InvalidPurpose,
            VerificationIdRequired,
            VerificationMismatch,
            WrongCode,
            VerificationNotFound,
            CodeExpired,
            PayloadTooLarge,
            TooManyAttempts,
            QuotaExceeded,
            Internal,
            StoreUnavailable,
        ]);
    key_for(Operation::Verify, api, paths::OTP_VERIFY);
    let verification = api.schema::<VerificationData>();
    let id_parameter = serde_json::json!({"type": "string", "pattern": "^[A-Za-z0-9_-]{22}$"});
    api.get(paths::OTP_VERIFICATION, "otp", "A verification's status")
        .describe(
            "One send's verification: `pending`, `approved`, `canceled`, `expired` or \
             `max_attempts_reached`, its delivery, the attempts it has left, when it was created \
             and until when it verifies, the phone (masked) and the purpose. Kept \
             VCODE_VERIFICATION_RETENTION_SECS after its code's TTL; 40401 after that or for an \
             unknown id.",
        )
        .parameter(
            "path",
            "id",
            true,
            id_parameter.clone(),
            "`verification_id` of the send",
        )
        .ok_envelope(verification.clone())
        .errors(&[VerificationNotFound, Internal, StoreUnavailable]);
    key_for(Operation::Status, api, paths::OTP_VERIFICATION);
    api.post(
        paths::OTP_VERIFICATION_CANCEL,
        "otp",
        "Cancel a verification",
    )
    .describe(
        "No body. A pending verification becomes `canceled`: its id no longer verifies \
             (41000). The code stays pending for its other ids (the sends that re-sent it), so \
             one requester never ends another's; under VCODE_VERIFY_BY=id a code without a live \
             id cannot be verified and expires. Its cooldown stays. An ended verification is \
             left as it is. Answers the verification; 40401 for an unknown id. Behind the API \
             key of `verify` when VCODE_REQUIRE_API_KEY lists it.",
    )
    .parameter(
        "path",
        "id",
        true,
        id_parameter,
        "`verification_id` of the send",
    )
    .ok_envelope(verification)
    .errors(&[VerificationNotFound, Internal, StoreUnavailable]);
    key_for(Operation::Verify, api, paths::OTP_VERIFICATION_CANCEL);
}

/// The request's `Idempotency-Key`, in the namespace of the API-key `caller` that sent it.
fn idempotency_key(
    request: &HttpRequest,
    caller: Option<&ApiKeyName>,
) -> Result<Option<IdempotencyKey>, ApiError> {
    let Some(value) = request.headers().get(headers::IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    IdempotencyKey::parse(value.as_bytes(), caller)
        .map(Some)
        .ok_or_else(|| {
            ApiError::Malformed(
                "Idempotency-Key must be 1 to 255 visible ASCII characters".to_owned(),
            )
        })
}

/// Who asks: the tenant of the API key presented, and the end user it names; otherwise a
/// browser, by its address (which may name no end user: only a tenant relays its users).
pub(super) fn caller(
    request: &HttpRequest,
    state: &AppState,
    key: Option<&ApiKeyName>,
    end_user_ip: Option<&str>,
    end_user_id: Option<&str>,
) -> Result<Caller, ApiError> {
    let Some(key) = key else {
        if end_user_ip.is_some() || end_user_id.is_some() {
            return Err(ApiError::Malformed(
                "end_user_ip and end_user_id are for API-key callers".to_owned(),
            ));
        }
        return Ok(Caller::Browser(super::client_ip(request, state)?));
    };
    let end_user = match (end_user_ip, end_user_id) {
        (None, None) => None,
        (Some(address), None) => Some(EndUser::address(address).ok_or_else(|| {
            ApiError::Malformed("end_user_ip must be an IPv4 or IPv6 address".to_owned())
        })?),
        (None, Some(id)) => Some(EndUser::key(id).ok_or_else(|| {
            ApiError::Malformed("end_user_id must be 1 to 255 visible ASCII characters".to_owned())
        })?),
        (Some(_), Some(_)) => {
            return Err(ApiError::Malformed(
                "name the end user by end_user_ip or end_user_id, not both".to_owned(),
            ));
        }
    };
    Ok(Caller::Tenant {
        tenant: TenantId::api_key(key.as_str()),
        end_user,
    })
}

async fn send(
    MaySend(caller_key): MaySend,
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<SendRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let command = SendCommand {
        phone: body.phone,
        email: body.email,
        purpose: body.purpose,
        captcha_id: body.captcha_id,
        captcha_answer: body.captcha_answer,
        locale: body.locale,
        altcha: body.altcha,
        caller: caller(
            &request,
            &state,
            caller_key.as_ref(),
            body.end_user_ip.as_deref(),
            body.end_user_id.as_deref(),
        )?,
        idempotency_key: idempotency_key(&request, caller_key.as_ref())?,
        profile: None,
        verification: None,
    };
    let otp = state.otp.clone();
    // Runs to the end even if the client goes away, so a code is never left stored without
    // its SMS or its roll-back, nor an idempotency record half-written.
    let receipt = ToTheEnd::new(async move { otp.send(command).await })
        .await
        .map_err(|e| ApiError::Internal(e.into()))??;
    Ok(envelope::ok(SendData {
        // None only when an `Idempotency-Key` repeat replays an answer kept before ids existed.
        verification_id: receipt
            .verification_id
            .map(|id| id.as_str().to_owned())
            .unwrap_or_default(),
        expires_in: receipt.expires_in.as_secs(),
        resend_after: receipt.resend_after.as_secs(),
        delivery: delivery(receipt.delivery),
    }))
}

/// [`VerifyRequest`] read in place: its strings borrow from the body (`JsonBytes`).
#[derive(Deserialize)]
struct VerifyBody<'a> {
    #[serde(default, borrow)]
    verification_id: Option<Text<'a>>,
    #[serde(default, borrow)]
    phone: Option<Text<'a>>,
    #[serde(default, borrow)]
    email: Option<Text<'a>>,
    #[serde(borrow)]
    code: Text<'a>,
    #[serde(default, borrow)]
    purpose: Option<Text<'a>>,
    #[serde(default, borrow)]
    audience: Option<Text<'a>>,
    #[serde(default, borrow)]
    end_user_ip: Option<Text<'a>>,
    #[serde(default, borrow)]
    end_user_id: Option<Text<'a>>,
}

async fn verify(
    MayVerify(caller_key): MayVerify,
    request: HttpRequest,
    state: web::Data<AppState>,
    body: JsonBytes,
) -> Result<HttpResponse, ApiError> {
    let body: VerifyBody<'_> = body.parse()?;
    let command = VerifyCommand {
        verification_id: body.verification_id.as_ref().map(Text::as_str),
        phone: body.phone.as_ref().map(Text::as_str),
        email: body.email.as_ref().map(Text::as_str),
        purpose: body.purpose.as_ref().map(Text::as_str),
        code: body.code.as_str(),
        audience: body.audience.as_ref().map(Text::as_str),
        caller: caller(
            &request,
            &state,
            caller_key.as_ref(),
            body.end_user_ip.as_ref().map(Text::as_str),
            body.end_user_id.as_ref().map(Text::as_str),
        )?,
        profile: None,
    };
    let token = state.otp.verify(command).await?;
    Ok(envelope::ok(VerifyData {
        verified: true,
        token: Some(token),
    }))
}

async fn verification(
    _caller: MayReadStatus,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let view = state.otp.verification(&id, Owner::Purposes).await?;
    Ok(envelope::ok(verification_data(view)))
}

async fn cancel_verification(
    _caller: MayVerify,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let view = state.otp.cancel(&id, Owner::Purposes).await?;
    Ok(envelope::ok(verification_data(view)))
}

fn verification_data(view: VerificationView) -> VerificationData {
    VerificationData {
        verification_id: view.id.as_str().to_owned(),
        status: match view.status {
            otp::VerificationStatus::Pending => VerificationStatus::Pending,
            otp::VerificationStatus::Approved => VerificationStatus::Approved,
            otp::VerificationStatus::Canceled => VerificationStatus::Canceled,
            otp::VerificationStatus::Expired => VerificationStatus::Expired,
            otp::VerificationStatus::MaxAttemptsReached => VerificationStatus::MaxAttemptsReached,
        },
        delivery: delivery(view.delivery),
        delivery_error: view.delivery_error,
        remaining_attempts: view.remaining_attempts,
        created_at: view.created_at_ms / 1000,
        expires_at: view.expires_at_ms / 1000,
        phone: view.destination.phone().map(|phone| phone.masked()),
        email: view.destination.email().map(|email| email.masked()),
        purpose: view.purpose.as_str().to_owned(),
    }
}

/// A delivery as the wire spells it.
fn delivery(status: DeliveryStatus) -> Delivery {
    match status {
        DeliveryStatus::Sent => Delivery::Sent,
        DeliveryStatus::Unconfirmed => Delivery::Unconfirmed,
        DeliveryStatus::Delivered => Delivery::Delivered,
        DeliveryStatus::Undelivered => Delivery::Undelivered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `VerifyBody` mirrors the wire crate's `VerifyRequest` (which the OpenAPI description
    /// and the clients use): a field added there and not here would be silently dropped.
    #[test]
    fn the_verify_body_reads_every_field_of_the_wire_request() {
        let some = |text: &str| Some(text.to_owned());
        let request = VerifyRequest {
            verification_id: some("q3Vd0m9YyTnJkqW8cXoB4A"),
            phone: some("+8613800138000"),
            email: some("ann@example.com"),
            code: "123456".to_owned(),
            purpose: some("login"),
            audience: some("app"),
            end_user_ip: some("203.0.113.7"),
            end_user_id: some("user-1"),
        };
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 8, "{json}");
        let raw = serde_json::to_vec(&request).unwrap();
        let body: VerifyBody<'_> = serde_json::from_slice(&raw).unwrap();
        let text = |field: &Option<Text<'_>>| field.as_ref().map(|t| t.as_str().to_owned());
        assert_eq!(text(&body.verification_id), request.verification_id);
        assert_eq!(text(&body.phone), request.phone);
        assert_eq!(text(&body.email), request.email);
        assert_eq!(body.code.as_str(), request.code);
        assert_eq!(text(&body.purpose), request.purpose);
        assert_eq!(text(&body.audience), request.audience);
        assert_eq!(text(&body.end_user_ip), request.end_user_ip);
        assert_eq!(text(&body.end_user_id), request.end_user_id);
    }
}
