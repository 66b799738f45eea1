//! Aliyun's settings (`VCODE_ALIYUN_*`, `[sms.aliyun]`): its account and templates.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::*;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub(super) struct AliyunVariables {
    #[serde(rename = "VCODE_ALIYUN_ACCESS_KEY_ID", with = "OptionalText")]
    access_key_id: Option<String>,
    #[serde(rename = "VCODE_ALIYUN_ENDPOINT", with = "endpoint")]
    endpoint: String,
    #[serde(rename = "VCODE_ALIYUN_TIMEOUT_MS", with = "Millis::<100, 60_000>")]
    timeout: Duration,
}

impl Default for AliyunVariables {
    fn default() -> Self {
        Self {
            access_key_id: None,
            endpoint: crate::sms::aliyun::DEFAULT_ENDPOINT.to_owned(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

use super::templates::{Params, TemplateEntry, TemplateSet, template_variables};

template_variables!(AliyunTemplateVariables: "VCODE_ALIYUN_TEMPLATE", "VCODE_ALIYUN_SIGN_NAME",
    "VCODE_ALIYUN_PARAMS", "VCODE_ALIYUN_TEMPLATES", "VCODE_ALIYUN_LOCALES");

impl ProviderReader<'_> {
    pub(super) fn aliyun(
        &self,
        (given, templates): (AliyunVariables, AliyunTemplateVariables),
    ) -> Result<AliyunSettings, ConfigError> {
        let name = "VCODE_ALIYUN_ACCESS_KEY_ID";
        Ok(AliyunSettings {
            access_key_id: self.required(given.access_key_id, name, "the AccessKey ID")?,
            access_key_secret: self.secret(ALIYUN_SECRET)?,
            endpoint: given.endpoint,
            timeout: given.timeout,
            templates: self.templates(
                ALIYUN,
                templates.into(),
                &[("code", TemplateValue::Code)],
            )?,
        })
    }
}
