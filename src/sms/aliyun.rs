//! Alibaba Cloud SMS (Dysmsapi `SendSms`, version 2017-05-25), signed as the official SDK
//! (`alibabacloud-tea-openapi`) signs by default: ACS3-HMAC-SHA256 over the canonical request.
//! The parameters go in the query string of a POST with an empty body (`Content-Length: 0`),
//! as the SDK sends them.

use std::time::Duration;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::http::{HttpAnswer, PreparedRequest, ProviderClient, classify_status, excerpt};
use super::signing::{hex, hmac_sha256, percent_encode, sha256_hex, utc_timestamp};
use super::templates::ProviderTemplates;
use super::throttle::{self, ThrottleWindow};
use super::{SmsError, SmsErrorKind, SmsMessage, SmsReceipt, SmsSender};

pub const PROVIDER: &str = "aliyun";
pub const DEFAULT_ENDPOINT: &str = "https://dysmsapi.aliyuncs.com";
pub const ALGORITHM: &str = "ACS3-HMAC-SHA256";
const ACTION: &str = "SendSms";
const VERSION: &str = "2017-05-25";

#[derive(Clone, Debug)]
pub struct AliyunSettings {
    pub access_key_id: String,
    /// `Debug` shows `[REDACTED]`.
    pub access_key_secret: SecretString,
    /// Scheme, host and optional port (`https://dysmsapi.aliyuncs.com`); tests use a fake.
    pub endpoint: String,
    pub timeout: Duration,
    pub templates: ProviderTemplates,
}

pub struct AliyunSender {
    settings: AliyunSettings,
    client: ProviderClient,
}

impl AliyunSender {
    pub fn new(settings: AliyunSettings) -> Result<Self, SmsError> {
        let client = ProviderClient::new(PROVIDER, settings.timeout)?;
        Ok(Self { settings, client })
    }

    /// The signed request for `message` at `unix_secs` with `nonce`: a pure function, so that
    /// the tests can hold it against the official SDK's signer.
    pub fn build_request(
        &self,
        message: &SmsMessage<'_>,
        unix_secs: u64,
        nonce: &str,
    ) -> Result<PreparedRequest, SmsError> {
        let template = self.settings.templates.for_message(PROVIDER, message)?;
        let params: serde_json::Map<String, serde_json::Value> = template
            .params
            .iter()
            .map(|(name, value)| (name.clone(), value.value_for(message).into()))
            .collect();
        let query = vec![
            // Without the `+`: the form Dysmsapi documents for every destination.
            (
                "PhoneNumbers".to_owned(),
                message.phone.as_e164().trim_start_matches('+').to_owned(),
            ),
            ("SignName".to_owned(), template.sign_name.clone()),
            ("TemplateCode".to_owned(), template.id.clone()),
            (
                "TemplateParam".to_owned(),
                serde_json::Value::Object(params).to_string(),
            ),
        ];
        let url = reqwest::Url::parse(&self.settings.endpoint)
            .map_err(|e| SmsError::misconfigured(PROVIDER, format!("endpoint: {e}")))?;
        let headers = vec![
            ("host".to_owned(), host_header(&url)),
            ("x-acs-action".to_owned(), ACTION.to_owned()),
            ("x-acs-content-sha256".to_owned(), sha256_hex(b"")),
            ("x-acs-date".to_owned(), utc_timestamp(unix_secs)),
            ("x-acs-signature-nonce".to_owned(), nonce.to_owned()),
            ("x-acs-version".to_owned(), VERSION.to_owned()),
        ];
        let authorization = authorization(
            "POST",
            "/",
            &query,
            &headers,
            &sha256_hex(b""),
            &self.settings.access_key_id,
            self.settings.access_key_secret.expose_secret(),
        );
        let mut headers = headers;
        headers.push(("authorization".to_owned(), authorization));
        headers.push(("accept".to_owned(), "application/json".to_owned()));
        // Unsigned, as the SDK sends it: without it the HTTP client sends a POST of no stated
        // length, which gateways and proxies may refuse (411 Length Required).
        headers.push(("content-length".to_owned(), "0".to_owned()));
        Ok(PreparedRequest {
            method: reqwest::Method::POST,
            url: format!(
                "{}/?{}",
                self.settings.endpoint.trim_end_matches('/'),
                canonical_query(&query)
            ),
            headers,
            body: Vec::new(),
        })
    }
}

/// `host` or `host:port` as a client sends it in `Host` (no port when it is the default).
pub fn host_header(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// Parameters sorted by name, names and values RFC 3986-encoded, joined with `&`.
pub fn canonical_query(query: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (percent_encode(k), percent_encode(v)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// The `Authorization` header of ACS3-HMAC-SHA256 over every header in `signed_headers` (names
/// in lower case), for a payload whose SHA-256 is `payload_sha256` (hex).
pub fn authorization(
    method: &str,
    path: &str,
    query: &[(String, String)],
    signed_headers: &[(String, String)],
    payload_sha256: &str,
    access_key_id: &str,
    access_key_secret: &str,
) -> String {
    let mut headers: Vec<(String, String)> = signed_headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    headers.sort();
    let canonical_headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}:{value}\n"))
        .collect();
    let names = headers
        .iter()
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical_request = format!(
        "{method}\n{path}\n{}\n{canonical_headers}\n{names}\n{payload_sha256}",
        canonical_query(query)
    );
    let string_to_sign = format!("{ALGORITHM}\n{}", sha256_hex(canonical_request.as_bytes()));
    let signature = hex(&hmac_sha256(
        access_key_secret.as_bytes(),
        string_to_sign.as_bytes(),
    ));
    format!("{ALGORITHM} Credential={access_key_id},SignedHeaders={names},Signature={signature}")
}

/// Dysmsapi's answer: `Code` is `OK` or an error code, at HTTP 200 for business errors and at
/// 4xx/5xx for the gateway's own (signature, throttling, outages).
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Answer {
    code: Option<String>,
    message: Option<String>,
    biz_id: Option<String>,
}

/// Delivered (with the `BizId`) or why not.
pub fn classify(answer: &HttpAnswer) -> Result<Option<String>, SmsError> {
    let Ok(parsed) = serde_json::from_str::<Answer>(&answer.body) else {
        return Err(classify_status(PROVIDER, answer));
    };
    let code = parsed.code.unwrap_or_default();
    if answer.status == 200 && code == "OK" {
        return Ok(parsed.biz_id);
    }
    let message = parsed.message.unwrap_or_default();
    if let Some(window) = throttle_window(&code, &message) {
        return Err(throttle::throttled(
            PROVIDER,
            answer.retry_after,
            code,
            excerpt(&message),
            window,
        ));
    }
    let kind = match code.as_str() {
        "isv.MOBILE_NUMBER_ILLEGAL" => SmsErrorKind::InvalidNumber,
        "isp.SYSTEM_ERROR" | "isp.GATEWAY_ERROR" | "isp.UNKNOWN" | "ServiceUnavailable"
        | "InternalError" => SmsErrorKind::Retryable,
        // Gateway errors without a known code: by status.
        "" => return Err(classify_status(PROVIDER, answer)),
        _ if answer.status >= 500 => SmsErrorKind::Retryable,
        // Templates, sign names, credentials, signatures, balance, permissions, and codes this
        // table does not know: the operator must look.
        _ => SmsErrorKind::Rejected,
    };
    Err(SmsError::new(PROVIDER, kind, code, excerpt(&message)))
}

/// The window of an Aliyun limit, if `code` is one: the per-number flow control
/// (`isv.BUSINESS_LIMIT_CONTROL`, by default 1 a minute, 5 an hour, 10 a day, its message
/// naming which: `触发小时级流控Permits:5`), the account's daily volume
/// (`isv.DAY_LIMIT_CONTROL`) and the API's request-rate flow control (`Throttling.*`).
fn throttle_window(code: &str, message: &str) -> Option<ThrottleWindow> {
    Some(match code {
        "isv.DAY_LIMIT_CONTROL" | "isv.BUSINESS_LIMIT_DAY" => ThrottleWindow::ChinaDay,
        "isv.BUSINESS_LIMIT_HOUR" => ThrottleWindow::Hour,
        "BUSINESS_LIMIT_CONTROL_MINUTE" => ThrottleWindow::Minute,
        "isv.BUSINESS_LIMIT_CONTROL" | "BUSINESS_LIMIT_CONTROL_PHONE" => {
            let message = message.to_lowercase();
            if message.contains("天") || message.contains("日") || message.contains("day") {
                ThrottleWindow::ChinaDay
            } else if message.contains("小时") || message.contains("hour") {
                ThrottleWindow::Hour
            } else {
                ThrottleWindow::Minute
            }
        }
        _ if code.starts_with("Throttling") => ThrottleWindow::Second,
        _ => return None,
    })
}

#[async_trait]
impl SmsSender for AliyunSender {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError> {
        let request = self.build_request(message, super::unix_now(), &super::nonce())?;
        let answer = self.client.execute(request).await?;
        let message_id = classify(&answer)?;
        Ok(SmsReceipt {
            provider: PROVIDER,
            message_id,
        })
    }
}
