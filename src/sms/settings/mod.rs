//! The SMS settings: which providers serve which numbers (`VCODE_SMS`, `VCODE_SMS_ROUTES`), in
//! which language (`VCODE_DEFAULT_LOCALE`, `VCODE_REGION_LOCALES`), each provider's account and
//! its templates per purpose and locale. Like every setting they are serde types read through
//! the one set of sources (`config::sources`): variables over the config file's `[sms]` tables.
//! [`SmsSettings::read`] checks them and builds what the senders take; each provider reads its
//! own settings in its own file (`webhook`, `aliyun`, `tencent`, `twilio`, through the shared
//! `reader`), the routes, locales, prices and texts in `routes`, the templates' shapes in
//! `templates`, the receipts' URL and token in `receipts`.

mod aliyun;
mod reader;
mod receipts;
mod routes;
mod templates;
mod tencent;
mod twilio;
mod webhook;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::error::ConfigError;
use crate::config::redact::{REDACTED, redact_url};
use crate::config::secret::SecretVariable;
use crate::config::sources::{Setting, Sources, Table, settings_of};
use crate::config::text::{Millis, OptionalText, parse_text, show_text};
use crate::domain::{Locale, Region};
use crate::sms::aliyun::AliyunSettings;
use crate::sms::locales::Locales;
use crate::sms::prices::{self, SmsPrices};
use crate::sms::receipts::ReceiptSettings;
use crate::sms::templates::TextTemplates;
use crate::sms::templates::{DEFAULT_PURPOSE, ProviderTemplate, ProviderTemplates, TemplateValue};
use crate::sms::tencent::TencentSettings;
use crate::sms::twilio::{TwilioAuth, TwilioSettings};
use crate::sms::webhook::{WebhookProblem, WebhookSettings};

use self::aliyun::{AliyunTemplateVariables, AliyunVariables};
use self::reader::{ProviderReader, purpose_variable};
use self::receipts::receipts;
use self::routes::{
    PricesGiven, RegionLocalesGiven, RoutesGiven, parse_providers, prices, region_locales, routes,
    texts,
};
use self::tencent::{TencentTemplateVariables, TencentVariables};
use self::twilio::TwilioVariables;
use self::webhook::WebhookVariables;

/// A provider a route can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProviderName {
    Log,
    Webhook,
    Aliyun,
    Tencent,
    Twilio,
}

impl ProviderName {
    pub const ALL: [ProviderName; 5] = [
        ProviderName::Log,
        ProviderName::Webhook,
        ProviderName::Aliyun,
        ProviderName::Tencent,
        ProviderName::Twilio,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderName::Log => "log",
            ProviderName::Webhook => "webhook",
            ProviderName::Aliyun => "aliyun",
            ProviderName::Tencent => "tencent",
            ProviderName::Twilio => "twilio",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == raw)
    }
}

/// Numbers starting with `calling_code` go through `providers`, in failover order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmsRoute {
    /// `+86`, `+1`, `+1876`: `+` and 1–6 digits.
    pub calling_code: String,
    pub providers: Vec<ProviderName>,
    /// Templates this route's numbers get instead of the provider's own (an international
    /// route's templates and sign name).
    pub templates: Vec<(ProviderName, ProviderTemplates)>,
}

#[derive(Clone)]
pub struct SmsSettings {
    /// Providers for numbers no route matches, in failover order (`VCODE_SMS`, `log`).
    pub default_route: Vec<ProviderName>,
    /// Whether `VCODE_SMS` itself names `log`: the code-printing sender, chosen on purpose.
    pub log_chosen: bool,
    /// Routes by calling code (`VCODE_SMS_ROUTES`, `[sms.routes]`).
    pub routes: Vec<SmsRoute>,
    pub locales: Locales,
    /// Texts for `log`, `webhook` and `twilio`: built-in ones, replaced by `[sms.texts]`.
    pub texts: Arc<TextTemplates>,
    /// What one SMS costs per region (`VCODE_SMS_PRICES`), for the console's spend estimate.
    pub prices: SmsPrices,
    pub webhook: Option<WebhookSettings>,
    pub aliyun: Option<AliyunSettings>,
    pub tencent: Option<TencentSettings>,
    pub twilio: Option<TwilioSettings>,
    /// Delivery receipts (`VCODE_SMS_RECEIPTS_URL`, `VCODE_SMS_RECEIPTS_TOKEN`).
    pub receipts: ReceiptSettings,
}

impl Default for SmsSettings {
    /// The `log` sender for every number, built-in texts.
    fn default() -> Self {
        let texts = TextTemplates::default();
        Self {
            default_route: vec![ProviderName::Log],
            log_chosen: false,
            routes: Vec::new(),
            locales: Locales::new(BTreeMap::new(), &texts.languages(), english()),
            texts: Arc::new(texts),
            prices: SmsPrices::default(),
            webhook: None,
            aliyun: None,
            tencent: None,
            twilio: None,
            receipts: ReceiptSettings::default(),
        }
    }
}

fn english() -> Locale {
    Locale::parse("en").expect("en is a language tag")
}

impl SmsSettings {
    /// Whether any number may go through the code-printing `log` sender.
    pub fn uses_log(&self) -> bool {
        self.providers_in_use().contains(&ProviderName::Log)
    }

    /// The `webhook` sender for every number, unsigned: a loopback gateway's (a test's).
    pub fn webhook(url: impl Into<String>, timeout: Duration) -> Self {
        Self {
            default_route: vec![ProviderName::Webhook],
            webhook: Some(WebhookSettings {
                url: url.into(),
                timeout,
                secret: None,
            }),
            ..Self::default()
        }
    }

    /// Every provider a route names, once, in a stable order.
    pub fn providers_in_use(&self) -> Vec<ProviderName> {
        let used: BTreeSet<ProviderName> = self
            .routes
            .iter()
            .flat_map(|route| route.providers.iter().copied())
            .chain(self.default_route.iter().copied())
            .collect();
        used.into_iter().collect()
    }
}

// --- Where the settings are: tables, variables, secrets ---------------------------------------

const SMS: Table = Table {
    path: "sms",
    prefix: "VCODE_SMS_",
    renamed: &[
        ("VCODE_SMS", "providers"),
        ("VCODE_DEFAULT_LOCALE", "default_locale"),
        ("VCODE_REGION_LOCALES", "region_locales"),
    ],
    file_only: &["VCODE_SMS_TEXTS"],
};
const WEBHOOK: Table = Table::new("sms.webhook", "VCODE_SMS_WEBHOOK_");
const ALIYUN: Table = templated("sms.aliyun", "VCODE_ALIYUN_");
const TENCENT: Table = templated("sms.tencent", "VCODE_TENCENT_");
const TWILIO: Table = Table::new("sms.twilio", "VCODE_TWILIO_");

/// A template provider's table: its nested template tables are the file's alone.
const fn templated(path: &'static str, prefix: &'static str) -> Table {
    Table {
        path,
        prefix,
        renamed: &[],
        file_only: TEMPLATE_TABLES,
    }
}
const TEMPLATE_TABLES: &[&str] = &[
    "VCODE_ALIYUN_PARAMS",
    "VCODE_ALIYUN_TEMPLATES",
    "VCODE_ALIYUN_LOCALES",
    "VCODE_TENCENT_PARAMS",
    "VCODE_TENCENT_TEMPLATES",
    "VCODE_TENCENT_LOCALES",
];

/// The file's SMS tables.
pub const TABLES: [Table; 5] = [SMS, WEBHOOK, ALIYUN, TENCENT, TWILIO];

const WEBHOOK_SECRET: SecretVariable =
    SecretVariable::new("VCODE_SMS_WEBHOOK_SECRET", "VCODE_SMS_WEBHOOK_SECRET_FILE");
const ALIYUN_SECRET: SecretVariable = SecretVariable::new(
    "VCODE_ALIYUN_ACCESS_KEY_SECRET",
    "VCODE_ALIYUN_ACCESS_KEY_SECRET_FILE",
);
const TENCENT_SECRET: SecretVariable =
    SecretVariable::new("VCODE_TENCENT_SECRET_KEY", "VCODE_TENCENT_SECRET_KEY_FILE");
const TWILIO_AUTH_TOKEN: SecretVariable =
    SecretVariable::new("VCODE_TWILIO_AUTH_TOKEN", "VCODE_TWILIO_AUTH_TOKEN_FILE");
const TWILIO_API_KEY_SECRET: SecretVariable = SecretVariable::new(
    "VCODE_TWILIO_API_KEY_SECRET",
    "VCODE_TWILIO_API_KEY_SECRET_FILE",
);
const RECEIPTS_TOKEN: SecretVariable =
    SecretVariable::new("VCODE_SMS_RECEIPTS_TOKEN", "VCODE_SMS_RECEIPTS_TOKEN_FILE");

/// The SMS providers' secrets, and the receipts' token.
pub const SECRETS: [SecretVariable; 6] = [
    WEBHOOK_SECRET,
    ALIYUN_SECRET,
    TENCENT_SECRET,
    TWILIO_AUTH_TOKEN,
    TWILIO_API_KEY_SECRET,
    RECEIPTS_TOKEN,
];

/// Every SMS setting, with the per-purpose template variables of `purposes`
/// (`VCODE_ALIYUN_TEMPLATE_LOGIN`).
pub fn settings(purposes: &[String]) -> Vec<Setting> {
    let mut all = [
        settings_of::<SmsVariables>(SMS),
        settings_of::<WebhookVariables>(WEBHOOK),
        settings_of::<AliyunVariables>(ALIYUN),
        settings_of::<AliyunTemplateVariables>(ALIYUN),
        settings_of::<TencentVariables>(TENCENT),
        settings_of::<TencentTemplateVariables>(TENCENT),
        settings_of::<TwilioVariables>(TWILIO),
    ]
    .concat();
    for table in [ALIYUN, TENCENT] {
        all.extend(
            purposes
                .iter()
                .map(|purpose| Setting::variable(purpose_variable(table, purpose))),
        );
    }
    all
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
struct SmsVariables {
    #[serde(rename = "VCODE_SMS", with = "provider_list")]
    providers: Vec<ProviderName>,
    #[serde(rename = "VCODE_SMS_ROUTES", skip_serializing)]
    routes: RoutesGiven,
    #[serde(rename = "VCODE_DEFAULT_LOCALE", with = "locale")]
    default_locale: Locale,
    #[serde(rename = "VCODE_REGION_LOCALES", skip_serializing)]
    region_locales: RegionLocalesGiven,
    /// `[sms.texts.<purpose>]`: `<locale> = "text"`.
    #[serde(rename = "VCODE_SMS_TEXTS", skip_serializing)]
    texts: BTreeMap<String, BTreeMap<String, String>>,
    /// What one SMS costs per region: `CN=0.045,*=0.05`, or `[sms.prices]` (`CN = 0.045`).
    #[serde(rename = "VCODE_SMS_PRICES", skip_serializing)]
    prices: PricesGiven,
    #[serde(rename = "VCODE_SMS_PRICE_CURRENCY", with = "OptionalText")]
    price_currency: Option<String>,
    /// vcode's public URL as the providers reach it: delivery receipts are on when set.
    #[serde(rename = "VCODE_SMS_RECEIPTS_URL", with = "OptionalText")]
    receipts_url: Option<String>,
}

impl Default for SmsVariables {
    fn default() -> Self {
        Self {
            providers: vec![ProviderName::Log],
            routes: RoutesGiven::default(),
            default_locale: english(),
            region_locales: RegionLocalesGiven::default(),
            texts: BTreeMap::new(),
            prices: PricesGiven::default(),
            price_currency: Some(prices::DEFAULT_CURRENCY.to_owned()),
            receipts_url: None,
        }
    }
}

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

impl SmsSettings {
    /// The SMS settings from `sources`, their secrets from `lookup`; the per-purpose template
    /// variables of `purposes`. A provider no route names is not required to be complete.
    pub fn read(
        sources: &Sources,
        lookup: &dyn Fn(&str) -> Option<String>,
        purposes: &[String],
    ) -> Result<Self, ConfigError> {
        let given: SmsVariables = sources.extract()?;
        let routes = routes(sources, &given.routes)?;
        let texts = texts(&given.texts)?;
        let mut settings = Self {
            log_chosen: sources.given("VCODE_SMS").is_some()
                && given.providers.contains(&ProviderName::Log),
            default_route: given.providers,
            routes,
            texts: Arc::new(texts),
            prices: prices(sources, &given.prices, given.price_currency.as_deref())?,
            ..Self::default()
        };
        let by_region = region_locales(sources, &given.region_locales)?;
        // Every provider's settings are read, so that a bad value is refused even before a
        // route names its provider; only a provider in use must be complete.
        let used = settings.providers_in_use();
        let reader = ProviderReader {
            sources,
            lookup,
            purposes,
        };
        let webhook: WebhookVariables = sources.extract()?;
        let aliyun: (AliyunVariables, AliyunTemplateVariables) =
            (sources.extract()?, sources.extract()?);
        let tencent: (TencentVariables, TencentTemplateVariables) =
            (sources.extract()?, sources.extract()?);
        let twilio: TwilioVariables = sources.extract()?;
        if used.contains(&ProviderName::Webhook) {
            settings.webhook = Some(reader.webhook(webhook)?);
        }
        if used.contains(&ProviderName::Aliyun) {
            settings.aliyun = Some(reader.aliyun(aliyun)?);
        }
        if used.contains(&ProviderName::Tencent) {
            settings.tencent = Some(reader.tencent(tencent)?);
        }
        if used.contains(&ProviderName::Twilio) {
            settings.twilio = Some(reader.twilio(twilio)?);
        }
        // Secrets of providers no route names are still read: a bad file is a mistake now.
        for secret in SECRETS {
            secret.read(lookup)?;
        }
        settings.receipts = receipts(sources, lookup, given.receipts_url, &used)?;
        if let Some(twilio) = &mut settings.twilio {
            twilio.status_callback = settings.receipts.url_of(vcode_wire::paths::RECEIPT_TWILIO);
            if twilio.status_callback.is_some() && !matches!(twilio.auth, TwilioAuth::AuthToken(_))
            {
                return Err(ConfigError::Inconsistent(
                    "VCODE_SMS_RECEIPTS_URL with twilio needs VCODE_TWILIO_AUTH_TOKEN: Twilio signs its status callbacks with the auth token, which an API key does not replace".to_owned(),
                ));
            }
        }
        if settings.receipts.enabled()
            && let Some(webhook) = &settings.webhook
            && webhook.secret.is_none()
        {
            return Err(ConfigError::Inconsistent(
                "VCODE_SMS_RECEIPTS_URL with the webhook sender needs VCODE_SMS_WEBHOOK_SECRET: the gateway signs its receipts with it".to_owned(),
            ));
        }
        for route in &settings.routes {
            for (provider, _) in &route.templates {
                if !route.providers.contains(provider) {
                    return Err(ConfigError::Inconsistent(format!(
                        "sms.routes.\"{}\".{} ({}): templates for a provider the route does not name",
                        route.calling_code,
                        provider.as_str(),
                        crate::config::sources::FILE
                    )));
                }
            }
        }
        settings.locales = Locales::new(
            by_region,
            &settings.written_languages(),
            given.default_locale,
        );
        Ok(settings)
    }

    /// The languages of every text and provider template.
    fn written_languages(&self) -> BTreeSet<String> {
        let mut written = self.texts.languages();
        let templates = self
            .aliyun
            .iter()
            .map(|a| &a.templates)
            .chain(self.tencent.iter().map(|t| &t.templates))
            .chain(
                self.routes
                    .iter()
                    .flat_map(|r| r.templates.iter().map(|(_, t)| t)),
            );
        for templates in templates {
            written.extend(templates.languages());
        }
        written
    }
}

mod provider_list {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ProviderName>, D::Error> {
        parse_text(d, |raw| {
            let names: Vec<String> = raw.split(',').map(str::to_owned).collect();
            parse_providers(&names)
        })
    }

    pub fn serialize<S: Serializer>(providers: &[ProviderName], s: S) -> Result<S::Ok, S::Error> {
        let names: Vec<&str> = providers.iter().map(|p| p.as_str()).collect();
        show_text(names.join(","), s)
    }
}

mod locale {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Locale, D::Error> {
        parse_text(d, |raw| {
            Locale::parse(raw)
                .ok_or_else(|| "expected a BCP 47 language tag such as zh-CN or en".to_owned())
        })
    }

    pub fn serialize<S: Serializer>(locale: &Locale, s: S) -> Result<S::Ok, S::Error> {
        show_text(locale, s)
    }
}

/// A provider's base URL: https, or http on a loopback host only (a test's fake gateway), so
/// that a credential never crosses a network in clear.
mod endpoint {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        parse_text(d, |raw| {
            let url = reqwest::Url::parse(raw).map_err(|e| e.to_string())?;
            let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
            let plain_ok = url.scheme() == "https" || (url.scheme() == "http" && loopback);
            if !plain_ok || url.path() != "/" || url.query().is_some() || !url.username().is_empty()
            {
                return Err(
                    "expected https://host[:port] (http only on a loopback host)".to_owned(),
                );
            }
            Ok(raw.trim_end_matches('/').to_owned())
        })
    }

    pub fn serialize<S: Serializer>(endpoint: &str, s: S) -> Result<S::Ok, S::Error> {
        show_text(endpoint, s)
    }
}

/// Secrets show as `***` and the webhook URL redacted: logs may print the settings.
impl fmt::Debug for SmsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let webhook = self.webhook.as_ref().map(|w| {
            let secret = if w.secret.is_some() { REDACTED } else { "none" };
            format!(
                "{} (timeout {:?}, secret {secret})",
                redact_url(&w.url),
                w.timeout
            )
        });
        f.debug_struct("SmsSettings")
            .field("default_route", &self.default_route)
            .field("routes", &self.routes)
            .field("locales", &self.locales)
            .field("prices", &self.prices)
            .field("webhook", &webhook)
            .field("aliyun", &self.aliyun)
            .field("tencent", &self.tencent)
            .field("twilio", &self.twilio)
            .field("receipts", &self.receipts)
            .finish_non_exhaustive()
    }
}
