//! Tencent Cloud's settings (`VCODE_TENCENT_*`, `[sms.tencent]`): its account, region and
//! templates.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::*;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub(super) struct TencentVariables {
    #[serde(rename = "VCODE_TENCENT_SECRET_ID", with = "OptionalText")]
    secret_id: Option<String>,
    #[serde(rename = "VCODE_TENCENT_SDK_APP_ID", with = "OptionalText")]
    sdk_app_id: Option<String>,
    #[serde(rename = "VCODE_TENCENT_REGION", with = "tencent_region")]
    region: String,
    #[serde(rename = "VCODE_TENCENT_ENDPOINT", with = "endpoint")]
    endpoint: String,
    #[serde(rename = "VCODE_TENCENT_TIMEOUT_MS", with = "Millis::<100, 60_000>")]
    timeout: Duration,
}

impl Default for TencentVariables {
    fn default() -> Self {
        Self {
            secret_id: None,
            sdk_app_id: None,
            region: crate::sms::tencent::DEFAULT_REGION.to_owned(),
            endpoint: crate::sms::tencent::DEFAULT_ENDPOINT.to_owned(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

use super::templates::{Params, TemplateEntry, TemplateSet, template_variables};

template_variables!(TencentTemplateVariables: "VCODE_TENCENT_TEMPLATE", "VCODE_TENCENT_SIGN_NAME",
    "VCODE_TENCENT_PARAMS", "VCODE_TENCENT_TEMPLATES", "VCODE_TENCENT_LOCALES");

impl ProviderReader<'_> {
    pub(super) fn tencent(
        &self,
        (given, templates): (TencentVariables, TencentTemplateVariables),
    ) -> Result<TencentSettings, ConfigError> {
        let name = "VCODE_TENCENT_SDK_APP_ID";
        let sdk_app_id = self.required(given.sdk_app_id, name, "the SMS application's SdkAppId")?;
        if !sdk_app_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ConfigError::invalid(
                self.sources.origin(name),
                sdk_app_id,
                "expected the digits of the SdkAppId, such as 1400006666",
            ));
        }
        Ok(TencentSettings {
            secret_id: self.required(given.secret_id, "VCODE_TENCENT_SECRET_ID", "the SecretId")?,
            secret_key: self.secret(TENCENT_SECRET)?,
            sdk_app_id,
            region: given.region,
            endpoint: given.endpoint,
            timeout: given.timeout,
            templates: self.templates(TENCENT, templates.into(), &[("1", TemplateValue::Code)])?,
        })
    }
}

pub(super) mod tencent_region {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        parse_text(d, |raw| {
            let ok = !raw.is_empty()
                && raw
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            ok.then(|| raw.to_owned())
                .ok_or_else(|| "expected a region such as ap-guangzhou".to_owned())
        })
    }

    pub fn serialize<S: Serializer>(region: &str, s: S) -> Result<S::Ok, S::Error> {
        show_text(region, s)
    }
}
