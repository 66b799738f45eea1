//! Twilio's error body (`{code, message, more_info, status}`) and status for a `TwilioError`,
//! and the JSON answers written by hand.

use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use actix_web::{HttpResponse, HttpResponseBuilder, ResponseError};

use crate::twilio_compat::{TwilioError, push_json_str};

/// A Twilio error as Twilio answers it: `{code, message, more_info, status}`.
#[derive(Debug)]
pub(super) struct TwilioReply(TwilioError);

impl From<TwilioError> for TwilioReply {
    fn from(error: TwilioError) -> Self {
        Self(error)
    }
}

impl std::fmt::Display for TwilioReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ResponseError for TwilioReply {
    fn status_code(&self) -> StatusCode {
        match &self.0 {
            TwilioError::Unauthenticated => StatusCode::UNAUTHORIZED,
            TwilioError::NotFound(_) => StatusCode::NOT_FOUND,
            TwilioError::InvalidParameter(_)
            | TwilioError::Landline
            | TwilioError::EmailNotConfigured
            | TwilioError::ChannelDisabled(_) => StatusCode::BAD_REQUEST,
            TwilioError::Blocked { .. }
            | TwilioError::DestinationRefused
            | TwilioError::TooManyResources(..) => StatusCode::FORBIDDEN,
            TwilioError::MaxCheckAttempts
            | TwilioError::MaxSendAttempts
            | TwilioError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            TwilioError::Delivery(_) => StatusCode::BAD_GATEWAY,
            TwilioError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            TwilioError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let code = self.0.code();
        if let TwilioError::Unavailable(cause) | TwilioError::Internal(cause) = &self.0 {
            tracing::error!(code, %cause, "Twilio-compatible request failed");
        }
        let mut response = HttpResponse::build(status);
        match &self.0 {
            TwilioError::Unauthenticated => {
                response.insert_header((WWW_AUTHENTICATE, "Basic realm=\"Twilio API\""));
            }
            TwilioError::Blocked { retry_after } | TwilioError::TooManyRequests { retry_after } => {
                response.insert_header((RETRY_AFTER, retry_after.as_secs().max(1)));
            }
            _ => {}
        }
        // Twilio's error body, `{code, message, more_info, status}`, written by hand (serde's
        // writer cost as much as the rest of a check that finds nothing).
        let code = itoa::Buffer::new().format(code).to_owned();
        let mut body = String::with_capacity(160);
        body.push_str("{\"code\":");
        body.push_str(&code);
        body.push_str(",\"message\":");
        push_json_str(&mut body, &self.0.to_string());
        body.push_str(",\"more_info\":\"https://www.twilio.com/docs/errors/");
        body.push_str(&code);
        body.push_str("\",\"status\":");
        body.push_str(itoa::Buffer::new().format(status.as_u16()));
        body.push('}');
        json_answer(response, body)
    }
}

pub(super) type Reply = Result<HttpResponse, TwilioReply>;

/// A JSON answer from a body written by hand.
pub(super) fn json_answer(mut response: HttpResponseBuilder, body: String) -> HttpResponse {
    response
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")))
        .body(body)
}
