//! The fake providers' own checks, written from the providers' documentation independently of
//! vcode's signers (only the hash and HMAC primitives are shared, from the `sha2` and `hmac`
//! crates), and their documented answers.

use actix_web::HttpRequest;
use base64::Engine;
use hmac::{Hmac, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::fake_sms_provider::{Accepted, Outcome, Provider, State, request_id, unix_now};

pub enum Checked {
    Valid(Accepted),
    Refused {
        status: u16,
        body: Value,
        reason: String,
    },
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

fn header<'a>(request: &'a HttpRequest, name: &str) -> &'a str {
    request
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn content_length(request: &HttpRequest) -> Option<String> {
    let value = request.headers().get("content-length")?;
    value.to_str().ok().map(str::to_owned)
}

/// `Key=Value` pairs of an `Authorization` header after its algorithm, split on `,`.
fn auth_fields(value: &str, algorithm: &str) -> Option<Vec<(String, String)>> {
    let rest = value.strip_prefix(algorithm)?.trim();
    rest.split(',')
        .map(|field| {
            let (k, v) = field.trim().split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn aliyun_refusal(status: u16, code: &str, message: &str) -> Checked {
    Checked::Refused {
        status,
        body: json!({"RequestId": request_id(), "HostId": "dysmsapi.aliyuncs.com", "Code": code, "Message": message,
                     "Recommend": "https://api.aliyun.com/troubleshoot?q=".to_owned() + code}),
        reason: format!("{code}: {message}"),
    }
}

/// Dysmsapi behind the Alibaba Cloud gateway: ACS3-HMAC-SHA256 over the signed headers,
/// 15-minute timestamp window, one use per nonce.
pub fn aliyun(state: &State, request: &HttpRequest, body: &[u8]) -> Checked {
    let Some(fields) = auth_fields(header(request, "authorization"), "ACS3-HMAC-SHA256") else {
        return aliyun_refusal(
            400,
            "IncompleteSignature",
            "The request signature does not conform to Aliyun standards.",
        );
    };
    if field(&fields, "Credential") != state.key_id {
        return aliyun_refusal(
            404,
            "InvalidAccessKeyId.NotFound",
            "Specified access key is not found.",
        );
    }
    let signed: Vec<&str> = field(&fields, "SignedHeaders").split(';').collect();
    let required = [
        "host",
        "x-acs-action",
        "x-acs-content-sha256",
        "x-acs-date",
        "x-acs-signature-nonce",
        "x-acs-version",
    ];
    if required.iter().any(|h| !signed.contains(h)) {
        return aliyun_refusal(
            400,
            "IncompleteSignature",
            "host and every x-acs- header must be signed",
        );
    }
    if header(request, "x-acs-content-sha256") != sha256_hex(body) {
        return aliyun_refusal(
            400,
            "ContentSHA256NotMatched",
            "The x-acs-content-sha256 does not match the body.",
        );
    }
    let date = header(request, "x-acs-date");
    let within_window = vcode::sms::signing::parse_utc_timestamp(date)
        .is_some_and(|t| t.abs_diff(unix_now()) <= 15 * 60);
    if !within_window {
        return aliyun_refusal(
            400,
            "InvalidTimeStamp.Expired",
            "Specified time stamp or date value is expired.",
        );
    }
    let mut pairs: Vec<(String, String)> = url_pairs(request.query_string());
    pairs.sort();
    let canonical_query = pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, UNRESERVED),
                utf8_percent_encode(v, UNRESERVED)
            )
        })
        .collect::<Vec<_>>()
        .join("&");
    let canonical_headers: String = signed
        .iter()
        .map(|name| format!("{name}:{}\n", header(request, name).trim()))
        .collect();
    let canonical = format!(
        "{}\n{}\n{canonical_query}\n{canonical_headers}\n{}\n{}",
        request.method(),
        request.path(),
        signed.join(";"),
        header(request, "x-acs-content-sha256")
    );
    let to_sign = format!("ACS3-HMAC-SHA256\n{}", sha256_hex(canonical.as_bytes()));
    if hex(&hmac(state.secret.as_bytes(), &to_sign)) != field(&fields, "Signature") {
        return aliyun_refusal(
            400,
            "SignatureDoesNotMatch",
            "Specified signature does not match our calculation.",
        );
    }
    if !state
        .nonces
        .lock()
        .unwrap()
        .insert(header(request, "x-acs-signature-nonce").to_owned())
    {
        return aliyun_refusal(
            400,
            "SignatureNonceUsed",
            "Specified signature nonce was used already.",
        );
    }
    if header(request, "x-acs-action") != "SendSms"
        || header(request, "x-acs-version") != "2017-05-25"
    {
        return aliyun_refusal(
            400,
            "InvalidAction.NotFound",
            "Specified api is not found, please check your url and method.",
        );
    }
    let param = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    for name in ["PhoneNumbers", "SignName", "TemplateCode"] {
        if param(name).is_none_or(|v| v.is_empty()) {
            return aliyun_refusal(
                400,
                &format!("Missing{name}"),
                &format!("{name} is mandatory for this action."),
            );
        }
    }
    let params = match param("TemplateParam").map(|p| serde_json::from_str::<Value>(&p)) {
        None => json!({}),
        Some(Ok(object))
            if object
                .as_object()
                .is_some_and(|o| o.values().all(Value::is_string)) =>
        {
            object
        }
        Some(_) => {
            return Checked::Refused {
                status: 200,
                body: json!({"RequestId": request_id(), "Code": "isv.INVALID_JSON_PARAM", "Message": "JSON参数不合法，只接受字符串值"}),
                reason: "TemplateParam is not a JSON object of strings".to_owned(),
            };
        }
    };
    Checked::Valid(Accepted {
        phone: param("PhoneNumbers").unwrap(),
        template: param("TemplateCode").unwrap(),
        sign_name: param("SignName").unwrap(),
        params,
        content_length: content_length(request),
        messaging_service_sid: None,
    })
}

fn url_pairs(encoded: &str) -> Vec<(String, String)> {
    serde_urlencoded::from_str(encoded).unwrap_or_default()
}

fn tencent_refusal(code: &str, message: &str) -> Checked {
    Checked::Refused {
        status: 200,
        body: json!({"Response": {"Error": {"Code": code, "Message": message}, "RequestId": "a0aabda6-cf91-4f3e-a81f-9198114a2279"}}),
        reason: format!("{code}: {message}"),
    }
}

/// API 3.0 with TC3-HMAC-SHA256: lower-cased signed headers, the date of the timestamp in the
/// credential scope, a 5-minute window; errors at HTTP 200 in `Response.Error`.
pub fn tencent(state: &State, request: &HttpRequest, body: &[u8]) -> Checked {
    let Some(fields) = auth_fields(header(request, "authorization"), "TC3-HMAC-SHA256") else {
        return tencent_refusal(
            "AuthFailure.InvalidAuthorization",
            "Authorization header is not TC3-HMAC-SHA256.",
        );
    };
    let credential: Vec<&str> = field(&fields, "Credential").split('/').collect();
    let [secret_id, date, service, "tc3_request"] = credential[..] else {
        return tencent_refusal(
            "AuthFailure.InvalidAuthorization",
            "Credential is malformed.",
        );
    };
    if secret_id != state.key_id {
        return tencent_refusal(
            "AuthFailure.SecretIdNotFound",
            "The SecretId is not found, please ensure that your SecretId is correct.",
        );
    }
    let timestamp: u64 = header(request, "x-tc-timestamp").parse().unwrap_or(0);
    if timestamp.abs_diff(unix_now()) > 300 {
        return tencent_refusal(
            "AuthFailure.SignatureExpire",
            &format!(
                "Signature expired. Timestamp: {timestamp}; Server Time: {}",
                unix_now()
            ),
        );
    }
    let signed: Vec<&str> = field(&fields, "SignedHeaders").split(';').collect();
    if !signed.contains(&"content-type") || !signed.contains(&"host") {
        return tencent_refusal(
            "AuthFailure.SignatureFailure",
            "content-type and host must be signed.",
        );
    }
    let canonical_headers: String = signed
        .iter()
        .map(|name| {
            format!(
                "{name}:{}\n",
                header(request, name).trim().to_ascii_lowercase()
            )
        })
        .collect();
    let canonical = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{}\n{}",
        request.method(),
        request.path(),
        request.query_string(),
        signed.join(";"),
        sha256_hex(body)
    );
    let scope = format!("{date}/{service}/tc3_request");
    let to_sign = format!(
        "TC3-HMAC-SHA256\n{timestamp}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let key = hmac(
        &hmac(
            &hmac(format!("TC3{}", state.secret).as_bytes(), date),
            service,
        ),
        "tc3_request",
    );
    let date_of_timestamp = vcode::sms::signing::utc_date(timestamp);
    if service != "sms"
        || date != date_of_timestamp
        || hex(&hmac(&key, &to_sign)) != field(&fields, "Signature")
    {
        return tencent_refusal(
            "AuthFailure.SignatureFailure",
            "The provided credentials could not be validated. Please check your signature is correct.",
        );
    }
    if header(request, "x-tc-action") != "SendSms"
        || header(request, "x-tc-version") != "2021-01-11"
    {
        return tencent_refusal("InvalidAction", "The action or version is not valid.");
    }
    if header(request, "x-tc-region").is_empty() {
        return tencent_refusal(
            "MissingParameter",
            "The request is missing a required parameter `Region`.",
        );
    }
    let Ok(json) = serde_json::from_slice::<Value>(body) else {
        return tencent_refusal("InternalError.JsonParseFail", "JSON parse failed.");
    };
    let phones = json["PhoneNumberSet"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if phones.is_empty() {
        return tencent_refusal(
            "MissingParameter.EmptyPhoneNumberSet",
            "The phone number set is empty.",
        );
    }
    for name in ["SmsSdkAppId", "TemplateId"] {
        if json[name].as_str().is_none_or(str::is_empty) {
            return tencent_refusal(
                "MissingParameter",
                &format!("The request is missing a required parameter `{name}`."),
            );
        }
    }
    Checked::Valid(Accepted {
        phone: phones[0].as_str().unwrap_or_default().to_owned(),
        template: json["TemplateId"].as_str().unwrap().to_owned(),
        sign_name: json["SignName"].as_str().unwrap_or_default().to_owned(),
        params: json["TemplateParamSet"].clone(),
        content_length: content_length(request),
        messaging_service_sid: None,
    })
}

fn twilio_refusal(status: u16, code: u32, message: &str) -> Checked {
    Checked::Refused {
        status,
        body: json!({"code": code, "message": message, "more_info": format!("https://www.twilio.com/docs/errors/{code}"), "status": status}),
        reason: format!("{code}: {message}"),
    }
}

/// Messages.json: HTTP Basic with the account SID and token or with one of the account's API
/// keys (SID and secret), the account SID in the path, the form.
pub fn twilio(state: &State, request: &HttpRequest, body: &[u8]) -> Checked {
    let expected = format!("/2010-04-01/Accounts/{}/Messages.json", state.key_id);
    let credentials = header(request, "authorization")
        .strip_prefix("Basic ")
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .and_then(|raw| String::from_utf8(raw).ok());
    let api_key = state.api_key.lock().unwrap().clone();
    let accepted = [Some((state.key_id.clone(), state.secret.clone())), api_key]
        .into_iter()
        .flatten()
        .any(|(user, password)| credentials == Some(format!("{user}:{password}")));
    if !accepted {
        return twilio_refusal(401, 20003, "Authenticate");
    }
    if request.path() != expected {
        return twilio_refusal(404, 20404, "The requested resource was not found");
    }
    let form = url_pairs(std::str::from_utf8(body).unwrap_or(""));
    let value = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let Some(to) = value("To") else {
        return twilio_refusal(400, 21604, "A 'To' phone number is required.");
    };
    if value("From").is_none() && value("MessagingServiceSid").is_none() {
        return twilio_refusal(400, 21603, "A 'From' phone number is required.");
    }
    let Some(text) = value("Body") else {
        return twilio_refusal(400, 21602, "Message body is required.");
    };
    Checked::Valid(Accepted {
        phone: to,
        template: String::new(),
        sign_name: value("From").unwrap_or_default(),
        params: Value::String(text),
        content_length: content_length(request),
        messaging_service_sid: value("MessagingServiceSid"),
    })
}

/// The documented success answer.
pub fn success_answer(provider: Provider, accepted: &Accepted) -> (u16, Value) {
    match provider {
        Provider::Aliyun => (
            200,
            json!({"Message": "OK", "RequestId": request_id(), "Code": "OK", "BizId": "900619746936498440^0"}),
        ),
        Provider::Tencent => (
            200,
            json!({"Response": {"SendStatusSet": [{"SerialNo": "5000:1045710669157053657849499619",
            "PhoneNumber": accepted.phone, "Fee": 1, "SessionContext": "", "Code": "Ok", "Message": "send success", "IsoCode": "CN"}],
            "RequestId": "a0aabda6-cf91-4f3e-a81f-9198114a2279"}}),
        ),
        Provider::Twilio => (
            201,
            json!({"sid": "SM1f0e8ae6ade43cb3c0ce4525424e404f", "status": "queued", "to": accepted.phone,
            "body": accepted.params, "error_code": null, "error_message": null}),
        ),
    }
}

/// The documented answer for a scripted failure.
pub fn failure_answer(provider: Provider, outcome: Outcome) -> (u16, Value) {
    let tencent_status = |code: &str, message: &str| {
        json!({"Response": {"SendStatusSet": [{"SerialNo": "", "PhoneNumber": "+8613800138000", "Fee": 0,
            "SessionContext": "", "Code": code, "Message": message, "IsoCode": "CN"}], "RequestId": "b1f2"}})
    };
    let tencent_error = |code: &str, message: &str| json!({"Response": {"Error": {"Code": code, "Message": message}, "RequestId": "b1f2"}});
    let twilio = |status: u16, code: u32, message: &str| {
        (
            status,
            json!({"code": code, "message": message, "more_info": format!("https://www.twilio.com/docs/errors/{code}"), "status": status}),
        )
    };
    let aliyun = |code: &str, message: &str| json!({"Message": message, "RequestId": request_id(), "Code": code});
    match (provider, outcome) {
        (Provider::Aliyun, Outcome::Throttle) => (
            200,
            aliyun("isv.BUSINESS_LIMIT_CONTROL", "触发小时级流控Permits:5"),
        ),
        (Provider::Aliyun, Outcome::InvalidNumber) => {
            (200, aliyun("isv.MOBILE_NUMBER_ILLEGAL", "非法手机号"))
        }
        (Provider::Aliyun, Outcome::TemplateNotApproved) => (
            200,
            aliyun("isv.SMS_TEMPLATE_ILLEGAL", "该账号下找不到对应模板"),
        ),
        (Provider::Aliyun, _) => (
            503,
            json!({"RequestId": request_id(), "HostId": "dysmsapi.aliyuncs.com", "Code": "ServiceUnavailable",
            "Message": "The request has failed due to a temporary failure of the server."}),
        ),
        (Provider::Tencent, Outcome::Throttle) => (
            200,
            tencent_status(
                "LimitExceeded.PhoneNumberThirtySecondLimit",
                "the number of sms messages sent from a single mobile number within 30 seconds exceeds the upper limit",
            ),
        ),
        (Provider::Tencent, Outcome::InvalidNumber) => (
            200,
            tencent_status(
                "InvalidParameterValue.IncorrectPhoneNumber",
                "invalid mobile number",
            ),
        ),
        (Provider::Tencent, Outcome::TemplateNotApproved) => (
            200,
            tencent_error(
                "FailedOperation.TemplateIncorrectOrUnapproved",
                "template is not approved or request content does not match the approved template content",
            ),
        ),
        (Provider::Tencent, _) => (502, json!({"message": "Bad Gateway"})),
        (Provider::Twilio, Outcome::Throttle) => twilio(429, 20429, "Too Many Requests"),
        (Provider::Twilio, Outcome::InvalidNumber) => {
            twilio(400, 21211, "Invalid 'To' Phone Number: +1415555XXXX")
        }
        (Provider::Twilio, Outcome::TemplateNotApproved) => twilio(
            400,
            21606,
            "The 'From' phone number provided is not a valid message-capable Twilio phone number for this destination.",
        ),
        (Provider::Twilio, _) => twilio(500, 20500, "Internal Server Error"),
    }
}
