//! The webhook sender's settings (`VCODE_SMS_WEBHOOK_*`).

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub(super) struct WebhookVariables {
    #[serde(rename = "VCODE_SMS_WEBHOOK_URL", with = "OptionalText")]
    url: Option<String>,
    #[serde(
        rename = "VCODE_SMS_WEBHOOK_TIMEOUT_MS",
        with = "Millis::<100, 60_000>"
    )]
    timeout: Duration,
}

impl Default for WebhookVariables {
    fn default() -> Self {
        Self {
            url: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl ProviderReader<'_> {
    pub(super) fn webhook(&self, given: WebhookVariables) -> Result<WebhookSettings, ConfigError> {
        let name = "VCODE_SMS_WEBHOOK_URL";
        let url = self.required(given.url, name, "the webhook sender's URL")?;
        let secret = WEBHOOK_SECRET
            .read(self.lookup)?
            .map(|(secret, _)| SecretString::from(secret.expose_secret().to_owned()));
        let settings = WebhookSettings {
            url,
            timeout: given.timeout,
            secret,
        };
        match settings.problem() {
            None => Ok(settings),
            Some(problem @ WebhookProblem::Url(_)) => Err(ConfigError::invalid(
                self.sources.origin(name),
                redact_url(&settings.url),
                problem.reason(),
            )),
            Some(problem @ WebhookProblem::Secret(_)) => Err(ConfigError::invalid(
                problem.variable(),
                REDACTED,
                problem.reason(),
            )),
        }
    }
}
