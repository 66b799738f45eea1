//! Twilio's settings (`VCODE_TWILIO_*`): its account, credentials and sender.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::*;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub(super) struct TwilioVariables {
    #[serde(rename = "VCODE_TWILIO_ACCOUNT_SID", with = "OptionalText")]
    account_sid: Option<String>,
    /// An API key (`SK…`, with `VCODE_TWILIO_API_KEY_SECRET`) instead of the auth token.
    #[serde(rename = "VCODE_TWILIO_API_KEY_SID", with = "OptionalText")]
    api_key_sid: Option<String>,
    #[serde(rename = "VCODE_TWILIO_FROM", with = "OptionalText")]
    from: Option<String>,
    #[serde(rename = "VCODE_TWILIO_MESSAGING_SERVICE_SID", with = "OptionalText")]
    messaging_service_sid: Option<String>,
    #[serde(rename = "VCODE_TWILIO_ENDPOINT", with = "endpoint")]
    endpoint: String,
    #[serde(rename = "VCODE_TWILIO_TIMEOUT_MS", with = "Millis::<100, 60_000>")]
    timeout: Duration,
}

impl Default for TwilioVariables {
    fn default() -> Self {
        Self {
            account_sid: None,
            api_key_sid: None,
            from: None,
            messaging_service_sid: None,
            endpoint: crate::sms::twilio::DEFAULT_ENDPOINT.to_owned(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl ProviderReader<'_> {
    pub(super) fn twilio(&self, given: TwilioVariables) -> Result<TwilioSettings, ConfigError> {
        let name = "VCODE_TWILIO_ACCOUNT_SID";
        let account_sid = self.required(given.account_sid, name, "the Account SID")?;
        if !is_sid(&account_sid, "AC") {
            return Err(ConfigError::invalid(
                self.sources.origin(name),
                account_sid,
                "expected AC and 32 hex digits",
            ));
        }
        let auth = match (given.api_key_sid, TWILIO_AUTH_TOKEN.read(self.lookup)?) {
            (None, Some(_)) => TwilioAuth::AuthToken(self.secret(TWILIO_AUTH_TOKEN)?),
            (Some(sid), None) if is_sid(&sid, "SK") => TwilioAuth::ApiKey {
                sid,
                secret: self.secret(TWILIO_API_KEY_SECRET)?,
            },
            (Some(sid), None) => {
                return Err(ConfigError::invalid(
                    self.sources.origin("VCODE_TWILIO_API_KEY_SID"),
                    sid,
                    "expected SK and 32 hex digits",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(ConfigError::Inconsistent(
                    "set VCODE_TWILIO_AUTH_TOKEN or an API key (VCODE_TWILIO_API_KEY_SID and VCODE_TWILIO_API_KEY_SECRET), not both".to_owned(),
                ));
            }
            (None, None) => {
                return Err(ConfigError::invalid(
                    TWILIO_AUTH_TOKEN.name,
                    "",
                    "required when a route names twilio (or VCODE_TWILIO_AUTH_TOKEN_FILE), unless an API key is set (VCODE_TWILIO_API_KEY_SID and VCODE_TWILIO_API_KEY_SECRET)",
                ));
            }
        };
        if let Some(from) = &given.from
            && !(from.starts_with('+') || from.chars().all(|c| c.is_ascii_alphanumeric()))
        {
            return Err(ConfigError::invalid(
                self.sources.origin("VCODE_TWILIO_FROM"),
                from,
                "expected an E.164 number (+1…) or an alphanumeric sender id",
            ));
        }
        if let Some(service) = &given.messaging_service_sid
            && !is_sid(service, "MG")
        {
            return Err(ConfigError::invalid(
                self.sources.origin("VCODE_TWILIO_MESSAGING_SERVICE_SID"),
                service,
                "expected a Messaging Service SID (MG and 32 hex digits)",
            ));
        }
        if given.from.is_none() && given.messaging_service_sid.is_none() {
            return Err(ConfigError::invalid(
                "VCODE_TWILIO_FROM",
                "",
                "set VCODE_TWILIO_FROM (a Twilio number or sender id), VCODE_TWILIO_MESSAGING_SERVICE_SID, or both",
            ));
        }
        Ok(TwilioSettings {
            account_sid,
            auth,
            from: given.from,
            messaging_service_sid: given.messaging_service_sid,
            endpoint: given.endpoint,
            timeout: given.timeout,
            status_callback: None,
        })
    }
}

/// A Twilio SID: its two-letter prefix and 32 hex digits.
pub(super) fn is_sid(sid: &str, prefix: &str) -> bool {
    sid.strip_prefix(prefix)
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}
