//! Tencent Cloud SMS (API 3.0 `SendSms`, version 2021-01-11), signed with TC3-HMAC-SHA256 over
//! `content-type;host` and the JSON body, as the official SDK (`tencentcloud-sdk-python`)
//! signs a POST.

use std::time::Duration;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::aliyun::host_header;
use super::http::{HttpAnswer, PreparedRequest, ProviderClient, classify_status, excerpt};
use super::signing::{hex, hmac_sha256, sha256_hex, utc_date};
use super::templates::ProviderTemplates;
use super::throttle::{self, ThrottleWindow};
use super::{SmsError, SmsErrorKind, SmsMessage, SmsReceipt, SmsSender};

pub const PROVIDER: &str = "tencent";
pub const DEFAULT_ENDPOINT: &str = "https://sms.tencentcloudapi.com";
pub const DEFAULT_REGION: &str = "ap-guangzhou";
pub const ALGORITHM: &str = "TC3-HMAC-SHA256";
pub const SERVICE: &str = "sms";
pub const CONTENT_TYPE: &str = "application/json";
const ACTION: &str = "SendSms";
const VERSION: &str = "2021-01-11";

#[derive(Clone, Debug)]
pub struct TencentSettings {
    pub secret_id: String,
    /// `Debug` shows `[REDACTED]`.
    pub secret_key: SecretString,
    /// The `SdkAppId` of the SMS application (`1400006666`).
    pub sdk_app_id: String,
    /// `X-TC-Region` (`ap-guangzhou`, `ap-beijing`, `ap-nanjing`).
    pub region: String,
    pub endpoint: String,
    pub timeout: Duration,
    pub templates: ProviderTemplates,
}

pub struct TencentSender {
    settings: TencentSettings,
    client: ProviderClient,
}

/// The body of `SendSms`, field names as the API documents them.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct SendSmsBody<'a> {
    phone_number_set: [&'a str; 1],
    sms_sdk_app_id: &'a str,
    /// International templates go without one.
    #[serde(skip_serializing_if = "str::is_empty")]
    sign_name: &'a str,
    template_id: &'a str,
    template_param_set: Vec<String>,
}

impl TencentSender {
    pub fn new(settings: TencentSettings) -> Result<Self, SmsError> {
        let client = ProviderClient::new(PROVIDER, settings.timeout)?;
        Ok(Self { settings, client })
    }

    /// The signed request for `message` at `unix_secs`: a pure function (see `aliyun`).
    pub fn build_request(
        &self,
        message: &SmsMessage<'_>,
        unix_secs: u64,
    ) -> Result<PreparedRequest, SmsError> {
        let template = self.settings.templates.for_message(PROVIDER, message)?;
        let body = serde_json::to_vec(&SendSmsBody {
            phone_number_set: [message.phone.as_e164()],
            sms_sdk_app_id: &self.settings.sdk_app_id,
            sign_name: &template.sign_name,
            template_id: &template.id,
            template_param_set: template
                .params
                .iter()
                .map(|(_, value)| value.value_for(message))
                .collect(),
        })
        .expect("the body serialises");
        let url = reqwest::Url::parse(&self.settings.endpoint)
            .map_err(|e| SmsError::misconfigured(PROVIDER, format!("endpoint: {e}")))?;
        let host = host_header(&url);
        let authorization = authorization(
            &self.settings.secret_id,
            self.settings.secret_key.expose_secret(),
            &host,
            unix_secs,
            &body,
        );
        Ok(PreparedRequest {
            method: reqwest::Method::POST,
            url: format!("{}/", self.settings.endpoint.trim_end_matches('/')),
            headers: vec![
                ("authorization".to_owned(), authorization),
                ("content-type".to_owned(), CONTENT_TYPE.to_owned()),
                ("host".to_owned(), host),
                ("x-tc-action".to_owned(), ACTION.to_owned()),
                ("x-tc-timestamp".to_owned(), unix_secs.to_string()),
                ("x-tc-version".to_owned(), VERSION.to_owned()),
                ("x-tc-region".to_owned(), self.settings.region.clone()),
            ],
            body,
        })
    }
}

/// The `Authorization` header of TC3-HMAC-SHA256 for a POST of the JSON `body` to `host` at
/// `unix_secs`.
pub fn authorization(
    secret_id: &str,
    secret_key: &str,
    host: &str,
    unix_secs: u64,
    body: &[u8],
) -> String {
    let date = utc_date(unix_secs);
    let canonical_request = format!(
        "POST\n/\n\ncontent-type:{CONTENT_TYPE}\nhost:{host}\n\ncontent-type;host\n{}",
        sha256_hex(body)
    );
    let scope = format!("{date}/{SERVICE}/tc3_request");
    let string_to_sign = format!(
        "{ALGORITHM}\n{unix_secs}\n{scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    );
    let key_date = hmac_sha256(format!("TC3{secret_key}").as_bytes(), date.as_bytes());
    let key_service = hmac_sha256(&key_date, SERVICE.as_bytes());
    let key_signing = hmac_sha256(&key_service, b"tc3_request");
    let signature = hex(&hmac_sha256(&key_signing, string_to_sign.as_bytes()));
    format!(
        "{ALGORITHM} Credential={secret_id}/{scope}, SignedHeaders=content-type;host, Signature={signature}"
    )
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "Response")]
    response: ResponseBody,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ResponseBody {
    error: Option<CodeAndMessage>,
    #[serde(default)]
    send_status_set: Vec<SendStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct CodeAndMessage {
    code: String,
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SendStatus {
    code: String,
    message: Option<String>,
    serial_no: Option<String>,
}

/// Delivered (with the `SerialNo`) or why not. API errors come at HTTP 200 in
/// `Response.Error`; a number's own failure in its `SendStatusSet` entry.
pub fn classify(answer: &HttpAnswer) -> Result<Option<String>, SmsError> {
    let Ok(Envelope { response }) = serde_json::from_str::<Envelope>(&answer.body) else {
        return Err(classify_status(PROVIDER, answer));
    };
    let (code, message) = match (response.error, response.send_status_set.first()) {
        (Some(error), _) => (error.code, error.message),
        (None, Some(status)) if status.code == "Ok" && answer.status == 200 => {
            return Ok(status.serial_no.clone());
        }
        (None, Some(status)) => (status.code.clone(), status.message.clone()),
        (None, None) => return Err(classify_status(PROVIDER, answer)),
    };
    let message = excerpt(&message.unwrap_or_default());
    if let Some(window) = throttle_window(&code) {
        return Err(throttle::throttled(
            PROVIDER,
            answer.retry_after,
            code,
            message,
            window,
        ));
    }
    let kind = match code.as_str() {
        "InvalidParameterValue.IncorrectPhoneNumber"
        | "FailedOperation.PhoneNumberParseFail"
        | "FailedOperation.PhoneNumberInBlacklist" => SmsErrorKind::InvalidNumber,
        // Our clock or our signing, a destination the application may not send to, more
        // numbers than one request takes: the operator must look.
        "InternalError.RequestTimeException"
        | "InternalError.SigFieldMissing"
        | "InternalError.SigVerificationFail"
        | "LimitExceeded.AppCountryOrRegionInBlacklist"
        | "LimitExceeded.PhoneNumberCountLimit" => SmsErrorKind::Rejected,
        _ if code.starts_with("InternalError")
            || code.starts_with("ResourceUnavailable")
            || code == "ServiceUnavailable" =>
        {
            SmsErrorKind::Retryable
        }
        // AuthFailure.*, templates, signatures, balance, permissions, unknown codes.
        _ => SmsErrorKind::Rejected,
    };
    Err(SmsError::new(PROVIDER, kind, code, message))
}

/// The window of a Tencent limit, if `code` is one (the SMS API's documented `LimitExceeded.*`
/// codes, the API's `RequestLimitExceeded*`); daily limits count calendar days in China.
fn throttle_window(code: &str) -> Option<ThrottleWindow> {
    Some(match code {
        // Not limits on sending: a destination refused, more than 200 numbers in one request.
        "LimitExceeded.AppCountryOrRegionInBlacklist" | "LimitExceeded.PhoneNumberCountLimit" => {
            return None;
        }
        "LimitExceeded.PhoneNumberThirtySecondLimit" => ThrottleWindow::ThirtySeconds,
        "LimitExceeded.PhoneNumberOneHourLimit" => ThrottleWindow::Hour,
        // PhoneNumberDailyLimit, PhoneNumberSameContentDailyLimit, DailyLimit, AppDailyLimit,
        // AppMainlandChinaDailyLimit, AppGlobalDailyLimit, AppCountryOrRegionDailyLimit.
        _ if code.starts_with("LimitExceeded.") && code.ends_with("DailyLimit") => {
            ThrottleWindow::ChinaDay
        }
        // DeliveryFrequencyLimit (the console's frequency policy) and quota codes that name
        // no window.
        _ if code.starts_with("LimitExceeded") => ThrottleWindow::Minute,
        _ if code.starts_with("RequestLimitExceeded") => ThrottleWindow::Second,
        _ => return None,
    })
}

#[async_trait]
impl SmsSender for TencentSender {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError> {
        let request = self.build_request(message, super::unix_now())?;
        let answer = self.client.execute(request).await?;
        let message_id = classify(&answer)?;
        Ok(SmsReceipt {
            provider: PROVIDER,
            message_id,
        })
    }
}
