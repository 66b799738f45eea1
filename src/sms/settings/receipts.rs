//! The delivery receipts' settings: vcode's public URL and the token unsigned receipts carry.

use secrecy::{ExposeSecret, SecretString};

use super::*;

/// The receipts' settings: the public URL (https, or http to a loopback host) and, when Aliyun
/// or Tencent is in use, the token their unsigned receipts carry (at least 32 characters).
pub(super) fn receipts(
    sources: &Sources,
    lookup: &dyn Fn(&str) -> Option<String>,
    url: Option<String>,
    used: &[ProviderName],
) -> Result<ReceiptSettings, ConfigError> {
    let name = "VCODE_SMS_RECEIPTS_URL";
    let token = RECEIPTS_TOKEN
        .read(lookup)?
        .map(|(token, origin)| {
            if token.expose_secret().len() < crate::sms::webhook::MIN_SECRET_BYTES {
                return Err(ConfigError::invalid(
                    origin,
                    REDACTED,
                    "at least 32 characters (`openssl rand -hex 32`)",
                ));
            }
            Ok(SecretString::from(token.expose_secret().to_owned()))
        })
        .transpose()?;
    let Some(url) = url else {
        return Ok(ReceiptSettings {
            public_url: None,
            token,
        });
    };
    let public_url = url.trim_end_matches('/').to_owned();
    let parsed = reqwest::Url::parse(&public_url).ok();
    let acceptable = parsed.as_ref().is_some_and(|parsed| {
        parsed.query().is_none()
            && parsed.username().is_empty()
            && (parsed.scheme() == "https"
                || (parsed.scheme() == "http" && crate::sms::webhook::is_loopback(parsed)))
    });
    if !acceptable {
        return Err(ConfigError::invalid(
            sources.origin(name),
            url,
            "expected vcode's public https:// URL as the providers reach it (http:// only on a loopback host), without a query",
        ));
    }
    let unsigned = used.contains(&ProviderName::Aliyun) || used.contains(&ProviderName::Tencent);
    if unsigned && token.is_none() {
        return Err(ConfigError::invalid(
            RECEIPTS_TOKEN.name,
            "",
            "required with VCODE_SMS_RECEIPTS_URL when a route names aliyun or tencent (or VCODE_SMS_RECEIPTS_TOKEN_FILE): their receipts are unsigned, so the receipt URL carries it",
        ));
    }
    Ok(ReceiptSettings {
        public_url: Some(public_url),
        token,
    })
}
