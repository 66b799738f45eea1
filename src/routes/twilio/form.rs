//! The form bodies (and queries) of the Twilio-compatible paths, read as Twilio's SDKs send
//! them, and the fields a service's create or update takes.

use std::borrow::Cow;

use url::form_urlencoded;

use super::reply::TwilioReply;
use crate::twilio_compat::{ServiceChanges, ServiceTotp, TwilioError};

/// A form body (or a query) as Twilio's SDKs send it, its names and values borrowed from the
/// body unless percent-encoded; the last of a repeated name counts.
pub(super) struct Form<'a>(Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl<'a> Form<'a> {
    /// Never fails: undecodable bytes are read as U+FFFD, as `serde_urlencoded` read them.
    pub(super) fn read(bytes: &'a [u8]) -> Self {
        Self(form_urlencoded::parse(bytes).collect())
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_ref())
    }

    pub(super) fn text(&self, name: &str) -> Option<String> {
        self.get(name).map(str::to_owned)
    }

    pub(super) fn flag(&self, name: &'static str) -> Result<Option<bool>, TwilioReply> {
        match self.get(name) {
            None => Ok(None),
            Some(value) if value.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(value) if value.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(_) => Err(TwilioError::InvalidParameter(name).into()),
        }
    }

    pub(super) fn number<T: std::str::FromStr>(
        &self,
        name: &'static str,
    ) -> Result<Option<T>, TwilioReply> {
        self.get(name)
            .map(|value| {
                value
                    .trim()
                    .parse()
                    .map_err(|_| TwilioError::InvalidParameter(name).into())
            })
            .transpose()
    }

    pub(super) fn service_changes(&self) -> Result<ServiceChanges, TwilioReply> {
        Ok(ServiceChanges {
            friendly_name: self.text("FriendlyName"),
            code_length: self.number("CodeLength")?,
            lookup_enabled: self.flag("LookupEnabled")?,
            psd2_enabled: self.flag("Psd2Enabled")?,
            skip_sms_to_landlines: self.flag("SkipSmsToLandlines")?,
            dtmf_input_required: self.flag("DtmfInputRequired")?,
            do_not_share_warning_enabled: self.flag("DoNotShareWarningEnabled")?,
            custom_code_enabled: self.flag("CustomCodeEnabled")?,
            code_ttl_secs: self.number("VcodeCodeTtl")?,
            totp: ServiceTotp {
                issuer: self.text("Totp.Issuer"),
                time_step: self.number("Totp.TimeStep")?,
                code_length: self.number("Totp.CodeLength")?,
                skew: self.number("Totp.Skew")?,
            },
            texts: self
                .get("VcodeTexts")
                .map(serde_json::from_str)
                .transpose()
                .map_err(|_| TwilioError::InvalidParameter("VcodeTexts"))?,
        })
    }
}
