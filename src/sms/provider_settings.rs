//! Each provider's settings, read from its `VCODE_<PROVIDER>_*` variables over its
//! `[sms.<provider>]` table. A provider no route names is not required to be complete.

use std::time::Duration;

use super::aliyun::{self, AliyunSettings};
use super::settings_source::{Found, Result, SmsSettingsError, Source, key_origin};
use super::templates::{ByPurpose, DEFAULT_PURPOSE, ProviderTemplate, TemplateValue};
use super::tencent::{self, TencentSettings};
use super::twilio::{self, TwilioAuth, TwilioSettings};
use super::webhook::{WebhookProblem, WebhookSettings};

const TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 100..=60_000;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// What `Debug` and errors show instead of a secret.
pub(super) const REDACTED: &str = "***";

pub fn webhook(source: &Source<'_>, used: bool) -> Result<Option<WebhookSettings>> {
    let url = source.string(Some("VCODE_SMS_WEBHOOK_URL"), "sms.webhook.url")?;
    let timeout = source.millis(
        "VCODE_SMS_WEBHOOK_TIMEOUT_MS",
        "sms.webhook.timeout_ms",
        DEFAULT_TIMEOUT,
        TIMEOUT_RANGE,
    )?;
    let secret = source.secret("VCODE_SMS_WEBHOOK_SECRET", "sms.webhook.secret")?;
    if !used {
        return Ok(None);
    }
    let url = url.ok_or_else(|| {
        SmsSettingsError::new(
            "VCODE_SMS_WEBHOOK_URL",
            "the webhook sender needs a URL (or sms.webhook.url in the file)",
        )
    })?;
    let settings = WebhookSettings {
        url: url.value.clone(),
        timeout,
        secret,
    };
    match settings.problem() {
        None => Ok(Some(settings)),
        Some(problem @ WebhookProblem::Url(_)) => {
            let shown = if url.origin.starts_with("VCODE_") {
                format!("VCODE_SMS_WEBHOOK_URL={:?}", redact_url(&url.value))
            } else {
                key_origin("sms.webhook.url")
            };
            Err(SmsSettingsError::new(shown, problem.reason()))
        }
        Some(problem @ WebhookProblem::Secret(_)) => {
            Err(SmsSettingsError::new(problem.variable(), problem.reason()))
        }
    }
}

pub fn aliyun(
    source: &Source<'_>,
    used: bool,
    purposes: &[String],
) -> Result<Option<AliyunSettings>> {
    let p = "sms.aliyun";
    let access_key_id = source.string(
        Some("VCODE_ALIYUN_ACCESS_KEY_ID"),
        &format!("{p}.access_key_id"),
    )?;
    let secret = source.secret(
        "VCODE_ALIYUN_ACCESS_KEY_SECRET",
        &format!("{p}.access_key_secret"),
    )?;
    let (endpoint, timeout) = connection(source, "ALIYUN", p, aliyun::DEFAULT_ENDPOINT)?;
    let templates = templates(
        source,
        "ALIYUN",
        p,
        purposes,
        &[("code", TemplateValue::Code)],
    )?;
    if !used {
        return Ok(None);
    }
    let access_key_id = required(
        access_key_id,
        "VCODE_ALIYUN_ACCESS_KEY_ID",
        "the AccessKey ID",
    )?;
    let access_key_secret =
        secret.ok_or_else(|| missing_secret("VCODE_ALIYUN_ACCESS_KEY_SECRET"))?;
    let templates = require_templates(templates, "VCODE_ALIYUN", p, true)?;
    Ok(Some(AliyunSettings {
        access_key_id,
        access_key_secret,
        endpoint,
        timeout,
        templates,
    }))
}

pub fn tencent(
    source: &Source<'_>,
    used: bool,
    purposes: &[String],
) -> Result<Option<TencentSettings>> {
    let p = "sms.tencent";
    let secret_id = source.string(Some("VCODE_TENCENT_SECRET_ID"), &format!("{p}.secret_id"))?;
    let secret_key = source.secret("VCODE_TENCENT_SECRET_KEY", &format!("{p}.secret_key"))?;
    let sdk_app_id = source.string(Some("VCODE_TENCENT_SDK_APP_ID"), &format!("{p}.sdk_app_id"))?;
    let region = source.string(Some("VCODE_TENCENT_REGION"), &format!("{p}.region"))?;
    let (endpoint, timeout) = connection(source, "TENCENT", p, tencent::DEFAULT_ENDPOINT)?;
    let templates = templates(
        source,
        "TENCENT",
        p,
        purposes,
        &[("1", TemplateValue::Code)],
    )?;
    if !used {
        return Ok(None);
    }
    let sdk_app_id = required(
        sdk_app_id,
        "VCODE_TENCENT_SDK_APP_ID",
        "the SMS application's SdkAppId",
    )?;
    if !sdk_app_id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SmsSettingsError::new(
            format!("VCODE_TENCENT_SDK_APP_ID={sdk_app_id:?}"),
            "expected the digits of the SdkAppId, such as 1400006666",
        ));
    }
    let region = match region {
        None => tencent::DEFAULT_REGION.to_owned(),
        Some(found)
            if found
                .value
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') =>
        {
            found.value
        }
        Some(found) => return Err(found.error("expected a region such as ap-guangzhou")),
    };
    Ok(Some(TencentSettings {
        secret_id: required(secret_id, "VCODE_TENCENT_SECRET_ID", "the SecretId")?,
        secret_key: secret_key.ok_or_else(|| missing_secret("VCODE_TENCENT_SECRET_KEY"))?,
        sdk_app_id,
        region,
        endpoint,
        timeout,
        // Tencent sends international SMS without a sign name.
        templates: require_templates(templates, "VCODE_TENCENT", p, false)?,
    }))
}

pub fn twilio(source: &Source<'_>, used: bool) -> Result<Option<TwilioSettings>> {
    let p = "sms.twilio";
    let account_sid = source.string(
        Some("VCODE_TWILIO_ACCOUNT_SID"),
        &format!("{p}.account_sid"),
    )?;
    let auth_token = source.secret("VCODE_TWILIO_AUTH_TOKEN", &format!("{p}.auth_token"))?;
    let api_key_sid = source.string(
        Some("VCODE_TWILIO_API_KEY_SID"),
        &format!("{p}.api_key_sid"),
    )?;
    let api_key_secret = source.secret(
        "VCODE_TWILIO_API_KEY_SECRET",
        &format!("{p}.api_key_secret"),
    )?;
    let from = source.string(Some("VCODE_TWILIO_FROM"), &format!("{p}.from"))?;
    let service = source.string(
        Some("VCODE_TWILIO_MESSAGING_SERVICE_SID"),
        &format!("{p}.messaging_service_sid"),
    )?;
    let (endpoint, timeout) = connection(source, "TWILIO", p, twilio::DEFAULT_ENDPOINT)?;
    if !used {
        return Ok(None);
    }
    let account_sid = required(account_sid, "VCODE_TWILIO_ACCOUNT_SID", "the Account SID")?;
    if !is_twilio_sid(&account_sid, "AC") {
        return Err(SmsSettingsError::new(
            format!("VCODE_TWILIO_ACCOUNT_SID={account_sid:?}"),
            "expected AC and 32 hex digits",
        ));
    }
    let auth = match (auth_token, api_key_sid, api_key_secret) {
        (Some(token), None, None) => TwilioAuth::AuthToken(token),
        (None, Some(sid), Some(secret)) if is_twilio_sid(&sid.value, "SK") => TwilioAuth::ApiKey {
            sid: sid.value,
            secret,
        },
        (None, Some(sid), Some(_)) => {
            return Err(sid.error("expected an API key SID: SK and 32 hex digits"));
        }
        (None, Some(_), None) => {
            return Err(SmsSettingsError::new(
                "VCODE_TWILIO_API_KEY_SECRET",
                "the API key's secret is required with VCODE_TWILIO_API_KEY_SID (or \
                 VCODE_TWILIO_API_KEY_SECRET_FILE: a file holding it)",
            ));
        }
        (None, None, Some(_)) => {
            return Err(SmsSettingsError::new(
                "VCODE_TWILIO_API_KEY_SID",
                "the API key's SID (SK…) is required with VCODE_TWILIO_API_KEY_SECRET",
            ));
        }
        (None, None, None) => {
            return Err(SmsSettingsError::new(
                "VCODE_TWILIO_AUTH_TOKEN",
                "required when a route names this provider (or VCODE_TWILIO_AUTH_TOKEN_FILE), \
                 unless an API key is set: VCODE_TWILIO_API_KEY_SID and \
                 VCODE_TWILIO_API_KEY_SECRET",
            ));
        }
        (Some(_), _, _) => {
            return Err(SmsSettingsError::new(
                "VCODE_TWILIO_AUTH_TOKEN",
                "set the auth token or an API key (VCODE_TWILIO_API_KEY_SID and \
                 VCODE_TWILIO_API_KEY_SECRET), not both",
            ));
        }
    };
    let from = match from {
        Some(from)
            if from.value.starts_with('+')
                || from.value.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            Some(from.value)
        }
        Some(from) => {
            return Err(from.error("expected an E.164 number (+1…) or an alphanumeric sender id"));
        }
        None => None,
    };
    let messaging_service_sid = match service {
        Some(service) if service.value.starts_with("MG") => Some(service.value),
        Some(service) => return Err(service.error("expected a Messaging Service SID (MG…)")),
        None => None,
    };
    if from.is_none() && messaging_service_sid.is_none() {
        return Err(SmsSettingsError::new(
            "VCODE_TWILIO_FROM",
            "set VCODE_TWILIO_FROM (a Twilio number), VCODE_TWILIO_MESSAGING_SERVICE_SID, or both \
             (the service sends from that number)",
        ));
    }
    Ok(Some(TwilioSettings {
        account_sid,
        auth,
        from,
        messaging_service_sid,
        endpoint,
        timeout,
    }))
}

/// `prefix` (`AC`, `SK`) and 32 hex digits: the form of Twilio's SIDs.
fn is_twilio_sid(value: &str, prefix: &str) -> bool {
    value
        .strip_prefix(prefix)
        .is_some_and(|hex| hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

fn required(found: Option<Found<String>>, var: &str, what: &str) -> Result<String> {
    found.map(|f| f.value).ok_or_else(|| {
        SmsSettingsError::new(
            var,
            format!("{what} is required when a route names this provider"),
        )
    })
}

fn missing_secret(var: &str) -> SmsSettingsError {
    SmsSettingsError::new(
        var,
        format!("required when a route names this provider (or {var}_FILE: a file holding it)"),
    )
}

/// Where a provider is reached and how long it is waited for: `VCODE_<PROVIDER>_ENDPOINT` and
/// `VCODE_<PROVIDER>_TIMEOUT_MS` over `endpoint` and `timeout_ms` in its table.
fn connection(
    source: &Source<'_>,
    provider: &str,
    prefix: &str,
    default_endpoint: &str,
) -> Result<(String, Duration)> {
    let endpoint = endpoint(
        source,
        &format!("VCODE_{provider}_ENDPOINT"),
        prefix,
        default_endpoint,
    )?;
    let timeout = source.millis(
        &format!("VCODE_{provider}_TIMEOUT_MS"),
        &format!("{prefix}.timeout_ms"),
        DEFAULT_TIMEOUT,
        TIMEOUT_RANGE,
    )?;
    Ok((endpoint, timeout))
}

/// A base URL: https, or http on a loopback host only (a test's fake gateway), so that a
/// credential never crosses a network in clear.
fn endpoint(source: &Source<'_>, var: &str, prefix: &str, default: &str) -> Result<String> {
    let Some(found) = source.string(Some(var), &format!("{prefix}.endpoint"))? else {
        return Ok(default.to_owned());
    };
    let url = reqwest::Url::parse(&found.value).map_err(|e| found.error(e.to_string()))?;
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    let plain_ok = url.scheme() == "https" || (url.scheme() == "http" && loopback);
    if !plain_ok || url.path() != "/" || url.query().is_some() || !url.username().is_empty() {
        return Err(found.error("expected https://host[:port] (http only on a loopback host)"));
    }
    Ok(found.value.trim_end_matches('/').to_owned())
}

/// Templates per purpose: `[<prefix>.templates.<purpose>]` (`template`, `sign_name`, `params`)
/// over the provider-wide `template`, `sign_name`, `params` (the `default` entry, for purposes
/// without their own); `VCODE_<P>_TEMPLATE_<PURPOSE>`, `VCODE_<P>_TEMPLATE` and
/// `VCODE_<P>_SIGN_NAME` override the file.
fn templates(
    source: &Source<'_>,
    provider: &str,
    prefix: &str,
    purposes: &[String],
    default_params: &[(&str, TemplateValue)],
) -> Result<ByPurpose<Partial>> {
    let sign_var = format!("VCODE_{provider}_SIGN_NAME");
    let base_id = source.string(
        Some(&format!("VCODE_{provider}_TEMPLATE")),
        &format!("{prefix}.template"),
    )?;
    let base = Partial {
        id: base_id.map(|f| f.value),
        sign_name: source
            .string(Some(&sign_var), &format!("{prefix}.sign_name"))?
            .map(|f| f.value),
        params: params(source, &format!("{prefix}.params"))?.unwrap_or_else(|| {
            default_params
                .iter()
                .map(|(name, value)| (name.to_string(), *value))
                .collect()
        }),
    };
    let table = source.table(&format!("{prefix}.templates"))?;
    let mut names: Vec<String> = purposes.to_vec();
    names.extend(table.into_iter().flat_map(|t| t.keys().cloned()));
    names.sort();
    names.dedup();
    let mut by_purpose = ByPurpose::default();
    for purpose in names {
        let path = format!("{prefix}.templates.{purpose}");
        let has_table = source.table(&path)?.is_some();
        let own_var = (purpose != DEFAULT_PURPOSE).then(|| {
            format!(
                "VCODE_{provider}_TEMPLATE_{}",
                purpose.to_ascii_uppercase().replace('-', "_")
            )
        });
        let own_id = source.string(own_var.as_deref(), &format!("{path}.template"))?;
        let own_sign = source.string(None, &format!("{path}.sign_name"))?;
        let own_params = params(source, &format!("{path}.params"))?;
        if own_id.is_none() && !has_table {
            continue;
        }
        by_purpose.insert(
            purpose,
            Partial {
                id: own_id.map(|f| f.value).or_else(|| base.id.clone()),
                sign_name: source
                    .var(&sign_var)
                    .or(own_sign.map(|f| f.value))
                    .or_else(|| base.sign_name.clone()),
                params: own_params.unwrap_or_else(|| base.params.clone()),
            },
        );
    }
    if base.id.is_some() && by_purpose.get_own(DEFAULT_PURPOSE).is_none() {
        by_purpose.insert(DEFAULT_PURPOSE, base);
    }
    Ok(by_purpose)
}

/// A template before the check that it is complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partial {
    id: Option<String>,
    sign_name: Option<String>,
    params: Vec<(String, TemplateValue)>,
}

fn require_templates(
    partial: ByPurpose<Partial>,
    var_prefix: &str,
    key_prefix: &str,
    sign_name_required: bool,
) -> Result<ByPurpose<ProviderTemplate>> {
    if partial.is_empty() {
        return Err(SmsSettingsError::new(
            format!("{var_prefix}_TEMPLATE"),
            format!(
                "set a template for every purpose ({var_prefix}_TEMPLATE) or per purpose ({var_prefix}_TEMPLATE_LOGIN, {key_prefix}.templates.login.template)"
            ),
        ));
    }
    let mut complete = ByPurpose::default();
    for (purpose, entry) in partial.iter() {
        let Some(id) = entry.id.clone() else {
            return Err(SmsSettingsError::new(
                key_origin(&format!("{key_prefix}.templates.{purpose}.template")),
                format!(
                    "no template code for purpose {purpose}, and no {var_prefix}_TEMPLATE for all"
                ),
            ));
        };
        let sign_name = match (&entry.sign_name, sign_name_required) {
            (Some(sign), _) => sign.clone(),
            (None, false) => String::new(),
            (None, true) => {
                return Err(SmsSettingsError::new(
                    format!("{var_prefix}_SIGN_NAME"),
                    format!(
                        "the template of purpose {purpose} needs an approved sign name (or {key_prefix}.sign_name)"
                    ),
                ));
            }
        };
        complete.insert(
            purpose,
            ProviderTemplate {
                id,
                sign_name,
                params: entry.params.clone(),
            },
        );
    }
    Ok(complete)
}

/// Template parameters: a table (`{ code = "code", min = "minutes" }`, Aliyun's variable
/// names) or an array (`["code", "minutes"]`, Tencent's positional `{1}`, `{2}`).
fn params(source: &Source<'_>, path: &str) -> Result<Option<Vec<(String, TemplateValue)>>> {
    let error = |reason: &str| SmsSettingsError::new(key_origin(path), reason.to_owned());
    let value_of = |raw: Option<&str>| {
        raw.and_then(TemplateValue::parse)
            .ok_or_else(|| error("parameter values are \"code\" or \"minutes\""))
    };
    match source.key(path) {
        None => Ok(None),
        Some(toml::Value::Table(table)) => {
            let mut params = Vec::new();
            for (name, value) in table {
                source.key(&format!("{path}.{name}"));
                params.push((name.clone(), value_of(value.as_str())?));
            }
            Ok(Some(params))
        }
        Some(toml::Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| Ok(((i + 1).to_string(), value_of(v.as_str())?)))
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(_) => Err(error("expected a table of names or an array of values")),
    }
}

/// An http(s) URL with its password, every query value and its fragment replaced by `***`.
pub fn redact_url(raw: &str) -> String {
    let Ok(mut url) = reqwest::Url::parse(raw) else {
        // Not a URL: hide anything that could be user info.
        return match raw.rfind('@') {
            Some(at) => format!("{REDACTED}{}", &raw[at..]),
            None => raw.to_owned(),
        };
    };
    if url.password().is_some() {
        let _ = url.set_password(Some(REDACTED));
    }
    if let Some(query) = url.query() {
        let query: Vec<String> = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) => format!("{name}={REDACTED}"),
                None => REDACTED.to_owned(),
            })
            .collect();
        url.set_query(Some(&query.join("&")));
    }
    if url.fragment().is_some() {
        url.set_fragment(Some(REDACTED));
    }
    url.into()
}
