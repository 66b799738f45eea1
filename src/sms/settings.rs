//! The SMS settings: which providers serve which numbers (`VCODE_SMS`, `VCODE_SMS_ROUTES`), in
//! which language (`VCODE_DEFAULT_LOCALE`, `VCODE_REGION_LOCALES`), each provider's account and
//! its templates per purpose and locale. Like every setting they are serde types read through
//! the one set of sources (`config::sources`): variables over the config file's `[sms]` tables.
//! This file reads them in one direction: the variable types, then [`SmsSettings::read`], which
//! checks them and builds what the senders take.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::aliyun::{self, AliyunSettings};
use super::locales::Locales;
use super::prices::{self, SmsPrices};
use super::receipts::ReceiptSettings;
use super::templates::TextTemplates;
use super::templates::{DEFAULT_PURPOSE, ProviderTemplate, ProviderTemplates, TemplateValue};
use super::tencent::{self, TencentSettings};
use super::twilio::{self, TwilioAuth, TwilioSettings};
use super::webhook::{WebhookProblem, WebhookSettings};
use crate::config::error::ConfigError;
use crate::config::redact::{REDACTED, redact_url};
use crate::config::secret::SecretVariable;
use crate::config::sources::{Setting, Sources, Table, settings_of};
use crate::config::text::{Millis, OptionalText, parse_text, show_text};
use crate::domain::{Locale, Region};

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

/// `VCODE_ALIYUN_TEMPLATE_RESET_PASSWORD`: the template id for one purpose.
fn purpose_variable(table: Table, purpose: &str) -> String {
    let purpose = purpose.to_ascii_uppercase().replace('-', "_");
    format!("{}TEMPLATE_{purpose}", table.prefix)
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

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
struct WebhookVariables {
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

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
struct AliyunVariables {
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
            endpoint: aliyun::DEFAULT_ENDPOINT.to_owned(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
struct TencentVariables {
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
            region: tencent::DEFAULT_REGION.to_owned(),
            endpoint: tencent::DEFAULT_ENDPOINT.to_owned(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
struct TwilioVariables {
    #[serde(rename = "VCODE_TWILIO_ACCOUNT_SID", with = "OptionalText")]
    account_sid: Option<String>,
    /// An API key (`SK…`, with `VCODE_TWILIO_API_KEY_SECRET`) instead of the auth token.
    #[serde(rename = "VCODE_TWILIO_API_KEY_SID", with = "OptionalText")]
    api_key_sid: Option<String>,
    #[serde(rename = "VCODE_TWILIO_FROM", with = "OptionalText")]
    from: Option<String>,
    #[serde(rename = "VCODE_TWILIO_MESSAGING_SERVICE_SID", with = "OptionalText")]
    messaging_service_sid: Option<String>,
    #[serde(rename = "VCODE_TWILIO_ENDPOINT", with = "endpoint")]
    endpoint: String,
    #[serde(rename = "VCODE_TWILIO_TIMEOUT_MS", with = "Millis::<100, 60_000>")]
    timeout: Duration,
}

impl Default for TwilioVariables {
    fn default() -> Self {
        Self {
            account_sid: None,
            api_key_sid: None,
            from: None,
            messaging_service_sid: None,
            endpoint: twilio::DEFAULT_ENDPOINT.to_owned(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// A template provider's template settings, under its own variable names: the template for
/// every purpose (`…_TEMPLATE`), the sign name, and the file's tables of parameters, of
/// templates per purpose and of templates per locale.
macro_rules! template_variables {
    ($name:ident: $template:literal, $sign_name:literal, $params:literal, $templates:literal, $locales:literal) => {
        #[derive(Clone, Debug, Default, Deserialize, Serialize)]
        #[serde(default)]
        struct $name {
            #[serde(rename = $template, with = "OptionalText")]
            template: Option<String>,
            #[serde(rename = $sign_name, with = "OptionalText")]
            sign_name: Option<String>,
            #[serde(rename = $params, skip_serializing)]
            params: Option<Params>,
            #[serde(rename = $templates, skip_serializing)]
            templates: BTreeMap<String, TemplateEntry>,
            #[serde(rename = $locales, skip_serializing)]
            locales: BTreeMap<String, TemplateEntry>,
        }

        impl From<$name> for TemplateSet {
            fn from(given: $name) -> Self {
                Self {
                    template: given.template,
                    sign_name: given.sign_name,
                    params: given.params,
                    templates: given.templates,
                    locales: given.locales,
                }
            }
        }
    };
}

template_variables!(AliyunTemplateVariables: "VCODE_ALIYUN_TEMPLATE", "VCODE_ALIYUN_SIGN_NAME",
    "VCODE_ALIYUN_PARAMS", "VCODE_ALIYUN_TEMPLATES", "VCODE_ALIYUN_LOCALES");
template_variables!(TencentTemplateVariables: "VCODE_TENCENT_TEMPLATE", "VCODE_TENCENT_SIGN_NAME",
    "VCODE_TENCENT_PARAMS", "VCODE_TENCENT_TEMPLATES", "VCODE_TENCENT_LOCALES");

// --- The nested tables' shapes ----------------------------------------------------------------

/// A setting a variable gives as text and the file as a table: `VCODE_SMS_ROUTES=
/// "+86:aliyun,tencent;+1:twilio"` or `[sms.routes]` (`"+86" = ["aliyun"]`,
/// `"+1" = { providers = ["tencent"], tencent = { … } }`); `VCODE_REGION_LOCALES="US:en,JP:ja"`
/// or `[sms.region_locales]` (`US = "en"`); `VCODE_SMS_PRICES="CN=0.045,*=0.05"` or
/// `[sms.prices]` (`CN = 0.045`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(untagged, expecting = "text as the variable takes it, or a table")]
enum TextOrTable<T> {
    #[default]
    None,
    Text(String),
    Table(T),
}

type RoutesGiven = TextOrTable<BTreeMap<String, RouteGiven>>;
type RegionLocalesGiven = TextOrTable<BTreeMap<String, String>>;
type PricesGiven = TextOrTable<BTreeMap<String, f64>>;

#[derive(Clone, Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "a list of providers, or { providers = [...], aliyun = {...}, tencent = {...} }"
)]
enum RouteGiven {
    Providers(Vec<String>),
    Table(Box<RouteTable>),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteTable {
    providers: Vec<String>,
    #[serde(default)]
    aliyun: Option<TemplateSet>,
    #[serde(default)]
    tencent: Option<TemplateSet>,
}

/// A provider's templates as the file gives them (and the route overrides): one for every
/// purpose, per purpose, per locale.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct TemplateSet {
    template: Option<String>,
    sign_name: Option<String>,
    params: Option<Params>,
    templates: BTreeMap<String, TemplateEntry>,
    locales: BTreeMap<String, TemplateEntry>,
}

/// One purpose's (or one locale's) template; a purpose's may have its own per locale.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct TemplateEntry {
    template: Option<String>,
    sign_name: Option<String>,
    params: Option<Params>,
    locales: BTreeMap<String, TemplateEntry>,
}

/// Template parameters: names (`{ code = "code", ttl = "minutes" }`, Aliyun's variables) or
/// positions (`["code", "minutes"]`, Tencent's `{1}`, `{2}`).
#[derive(Clone, Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "a table of names ({ code = \"code\" }) or an array of values ([\"code\", \"minutes\"])"
)]
enum Params {
    Named(BTreeMap<String, ParamValue>),
    Positional(Vec<ParamValue>),
}

impl Params {
    fn resolve(&self) -> Vec<(String, TemplateValue)> {
        match self {
            Params::Named(named) => named
                .iter()
                .map(|(name, ParamValue(value))| (name.clone(), *value))
                .collect(),
            Params::Positional(values) => values
                .iter()
                .enumerate()
                .map(|(i, ParamValue(value))| ((i + 1).to_string(), *value))
                .collect(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct ParamValue(TemplateValue);

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        parse_text(deserializer, |raw| {
            TemplateValue::parse(raw)
                .map(ParamValue)
                .ok_or_else(|| "parameter values are \"code\" or \"minutes\"".to_owned())
        })
    }
}

// --- Reading -----------------------------------------------------------------------------------

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

/// The receipts' settings: the public URL (https, or http to a loopback host) and, when Aliyun
/// or Tencent is in use, the token their unsigned receipts carry (at least 32 characters).
fn receipts(
    sources: &Sources,
    lookup: &dyn Fn(&str) -> Option<String>,
    url: Option<String>,
    used: &[ProviderName],
) -> Result<ReceiptSettings, ConfigError> {
    let name = "VCODE_SMS_RECEIPTS_URL";
    let token = RECEIPTS_TOKEN
        .read(lookup)?
        .map(|(token, origin)| {
            if token.expose_secret().len() < super::webhook::MIN_SECRET_BYTES {
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
                || (parsed.scheme() == "http" && super::webhook::is_loopback(parsed)))
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

struct ProviderReader<'a> {
    sources: &'a Sources,
    lookup: &'a dyn Fn(&str) -> Option<String>,
    purposes: &'a [String],
}

impl ProviderReader<'_> {
    /// `name`'s value, required because a route names its provider.
    fn required(
        &self,
        value: Option<String>,
        name: &str,
        what: &str,
    ) -> Result<String, ConfigError> {
        value.ok_or_else(|| {
            ConfigError::invalid(
                name,
                "",
                format!("{what} is required when a route names this provider"),
            )
        })
    }

    fn secret(&self, secret: SecretVariable) -> Result<SecretString, ConfigError> {
        match secret.read(self.lookup)? {
            Some((value, _)) => Ok(SecretString::from(value.expose_secret().to_owned())),
            None => Err(ConfigError::invalid(
                secret.name,
                "",
                format!(
                    "required when a route names this provider (or {}: a file holding it)",
                    secret.file
                ),
            )),
        }
    }

    fn webhook(&self, given: WebhookVariables) -> Result<WebhookSettings, ConfigError> {
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

    fn aliyun(
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

    fn tencent(
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

    fn twilio(&self, given: TwilioVariables) -> Result<TwilioSettings, ConfigError> {
        let name = "VCODE_TWILIO_ACCOUNT_SID";
        let account_sid = self.required(given.account_sid, name, "the Account SID")?;
        if !is_sid(&account_sid, "AC") {
            return Err(ConfigError::invalid(
                self.sources.origin(name),
                account_sid,
                "expected AC and 32 hex digits",
            ));
        }
        let auth = match (given.api_key_sid, TWILIO_AUTH_TOKEN.read(self.lookup)?) {
            (None, Some(_)) => TwilioAuth::AuthToken(self.secret(TWILIO_AUTH_TOKEN)?),
            (Some(sid), None) if is_sid(&sid, "SK") => TwilioAuth::ApiKey {
                sid,
                secret: self.secret(TWILIO_API_KEY_SECRET)?,
            },
            (Some(sid), None) => {
                return Err(ConfigError::invalid(
                    self.sources.origin("VCODE_TWILIO_API_KEY_SID"),
                    sid,
                    "expected SK and 32 hex digits",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(ConfigError::Inconsistent(
                    "set VCODE_TWILIO_AUTH_TOKEN or an API key (VCODE_TWILIO_API_KEY_SID and VCODE_TWILIO_API_KEY_SECRET), not both".to_owned(),
                ));
            }
            (None, None) => {
                return Err(ConfigError::invalid(
                    TWILIO_AUTH_TOKEN.name,
                    "",
                    "required when a route names twilio (or VCODE_TWILIO_AUTH_TOKEN_FILE), unless an API key is set (VCODE_TWILIO_API_KEY_SID and VCODE_TWILIO_API_KEY_SECRET)",
                ));
            }
        };
        if let Some(from) = &given.from
            && !(from.starts_with('+') || from.chars().all(|c| c.is_ascii_alphanumeric()))
        {
            return Err(ConfigError::invalid(
                self.sources.origin("VCODE_TWILIO_FROM"),
                from,
                "expected an E.164 number (+1…) or an alphanumeric sender id",
            ));
        }
        if let Some(service) = &given.messaging_service_sid
            && !is_sid(service, "MG")
        {
            return Err(ConfigError::invalid(
                self.sources.origin("VCODE_TWILIO_MESSAGING_SERVICE_SID"),
                service,
                "expected a Messaging Service SID (MG and 32 hex digits)",
            ));
        }
        if given.from.is_none() && given.messaging_service_sid.is_none() {
            return Err(ConfigError::invalid(
                "VCODE_TWILIO_FROM",
                "",
                "set VCODE_TWILIO_FROM (a Twilio number or sender id), VCODE_TWILIO_MESSAGING_SERVICE_SID, or both",
            ));
        }
        Ok(TwilioSettings {
            account_sid,
            auth,
            from: given.from,
            messaging_service_sid: given.messaging_service_sid,
            endpoint: given.endpoint,
            timeout: given.timeout,
            status_callback: None,
        })
    }

    /// The provider's templates: the file's over the variables' (`…_TEMPLATE`,
    /// `…_SIGN_NAME`, `…_TEMPLATE_<PURPOSE>`), which override it.
    fn templates(
        &self,
        table: Table,
        mut set: TemplateSet,
        default_params: &[(&str, TemplateValue)],
    ) -> Result<ProviderTemplates, ConfigError> {
        for purpose in self.purposes {
            let name = purpose_variable(table, purpose);
            if let Some(id) = (self.lookup)(&name).filter(|id| !id.trim().is_empty()) {
                set.templates.entry(purpose.clone()).or_default().template =
                    Some(id.trim().to_owned());
            }
        }
        let provider = &table.path["sms.".len()..];
        let sign_name_required = table.path == ALIYUN.path;
        let default_params: Vec<(String, TemplateValue)> = default_params
            .iter()
            .map(|(name, value)| ((*name).to_owned(), *value))
            .collect();
        resolve_templates(table.path, &set, sign_name_required, default_params).map_err(
            |reason| {
                ConfigError::Inconsistent(format!(
                    "{reason}: set {prefix}TEMPLATE (every purpose) or {prefix}TEMPLATE_<PURPOSE>, or sms.{provider}.templates in the config file",
                    prefix = table.prefix
                ))
            },
        )
    }
}

/// A Twilio SID: its two-letter prefix and 32 hex digits.
fn is_sid(sid: &str, prefix: &str) -> bool {
    sid.strip_prefix(prefix)
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A template set made complete: every entry inherits what it leaves out (sign name,
/// parameters) from the purpose's entry, then from the provider's.
fn resolve_templates(
    path: &str,
    set: &TemplateSet,
    sign_name_required: bool,
    default_params: Vec<(String, TemplateValue)>,
) -> Result<ProviderTemplates, String> {
    let base = Partial {
        template: set.template.clone(),
        sign_name: set.sign_name.clone(),
        params: set.params.as_ref().map_or(default_params, Params::resolve),
    };
    let mut templates = ProviderTemplates::default();
    let mut add = |purpose: &str, locale: Option<&str>, entry: &Partial, key: String| {
        let locale = match locale {
            None => None,
            Some(tag) => Some(
                Locale::parse(tag)
                    .ok_or_else(|| format!("{key}: {tag:?} is not a BCP 47 language tag"))?,
            ),
        };
        let Some(id) = entry.template.clone() else {
            return Err(format!("{key}: no template id"));
        };
        let sign_name = match (&entry.sign_name, sign_name_required) {
            (Some(sign), _) => sign.clone(),
            (None, false) => String::new(),
            (None, true) => return Err(format!("{key}: no approved sign name (sign_name)")),
        };
        let params = entry.params.clone();
        templates.insert(
            purpose,
            locale,
            ProviderTemplate {
                id,
                sign_name,
                params,
            },
        );
        Ok(())
    };
    if base.template.is_some() {
        add(DEFAULT_PURPOSE, None, &base, path.to_owned())?;
    }
    for (tag, entry) in &set.locales {
        no_nested_locales(entry, &format!("{path}.locales.{tag}"))?;
        let key = format!("{path}.locales.{tag}");
        add(DEFAULT_PURPOSE, Some(tag), &base.under(entry), key)?;
    }
    for (purpose, entry) in &set.templates {
        let own = base.under(entry);
        let key = format!("{path}.templates.{purpose}");
        if entry.template.is_some() || base.template.is_some() {
            add(purpose, None, &own, key.clone())?;
        }
        for (tag, by_locale) in &entry.locales {
            no_nested_locales(by_locale, &format!("{key}.locales.{tag}"))?;
            // The purpose's template in this locale, else the locale's for every purpose.
            let wide = set
                .locales
                .get(tag)
                .map_or(own.clone(), |wide| own.under(wide));
            add(
                purpose,
                Some(tag),
                &wide.under(by_locale),
                format!("{key}.locales.{tag}"),
            )?;
        }
    }
    if templates.is_empty() {
        return Err(format!("{path}: no template"));
    }
    Ok(templates)
}

fn no_nested_locales(entry: &TemplateEntry, key: &str) -> Result<(), String> {
    if entry.locales.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{key}: a locale's template has no locales of its own"
        ))
    }
}

/// A template before the check that it is complete.
#[derive(Clone, Debug)]
struct Partial {
    template: Option<String>,
    sign_name: Option<String>,
    params: Vec<(String, TemplateValue)>,
}

impl Partial {
    /// `entry` with what it leaves out taken from `self`.
    fn under(&self, entry: &TemplateEntry) -> Partial {
        Partial {
            template: entry.template.clone().or_else(|| self.template.clone()),
            sign_name: entry.sign_name.clone().or_else(|| self.sign_name.clone()),
            params: entry
                .params
                .as_ref()
                .map_or(self.params.clone(), Params::resolve),
        }
    }
}

/// The routes, each checked: a calling code once, known providers once each.
fn routes(sources: &Sources, given: &RoutesGiven) -> Result<Vec<SmsRoute>, ConfigError> {
    let origin = sources.origin("VCODE_SMS_ROUTES");
    let refuse = |reason: String| ConfigError::invalid(&origin, "", reason);
    let mut routes: Vec<SmsRoute> = Vec::new();
    let mut add = |code: &str, providers: &[String], templates| {
        let code = code.trim();
        if !is_calling_code(code) || routes.iter().any(|r| r.calling_code == code) {
            return Err(refuse(format!(
                "{code:?}: expected a calling code such as +86, once"
            )));
        }
        let providers = parse_providers(providers).map_err(|r| refuse(format!("{code}: {r}")))?;
        routes.push(SmsRoute {
            calling_code: code.to_owned(),
            providers,
            templates,
        });
        Ok(())
    };
    match given {
        TextOrTable::None => {}
        TextOrTable::Text(text) => {
            for route in text.split(';').map(str::trim).filter(|r| !r.is_empty()) {
                let (code, providers) = route.split_once(':').ok_or_else(|| {
                    refuse(format!("{route:?}: expected +CODE:provider,provider"))
                })?;
                let names: Vec<String> =
                    providers.split(',').map(|s| s.trim().to_owned()).collect();
                add(code, &names, Vec::new())?;
            }
        }
        TextOrTable::Table(table) => {
            for (code, route) in table {
                match route {
                    RouteGiven::Providers(names) => add(code, names, Vec::new())?,
                    RouteGiven::Table(route) => {
                        let mut templates = Vec::new();
                        for (provider, table, set, params) in [
                            (
                                ProviderName::Aliyun,
                                ALIYUN,
                                &route.aliyun,
                                ("code", TemplateValue::Code),
                            ),
                            (
                                ProviderName::Tencent,
                                TENCENT,
                                &route.tencent,
                                ("1", TemplateValue::Code),
                            ),
                        ] {
                            let Some(set) = set else { continue };
                            let path = format!("sms.routes.\"{code}\".{}", provider.as_str());
                            let params = vec![(params.0.to_owned(), params.1)];
                            let sign_name_required = table.path == ALIYUN.path;
                            let resolved =
                                resolve_templates(&path, set, sign_name_required, params).map_err(
                                    |reason| {
                                        ConfigError::Inconsistent(format!(
                                            "{reason} ({})",
                                            crate::config::sources::FILE
                                        ))
                                    },
                                )?;
                            templates.push((provider, resolved));
                        }
                        add(code, &route.providers, templates)?;
                    }
                }
            }
        }
    }
    Ok(routes)
}

fn is_calling_code(code: &str) -> bool {
    code.strip_prefix('+').is_some_and(|digits| {
        (1..=6).contains(&digits.len())
            && digits.bytes().all(|b| b.is_ascii_digit())
            && !digits.starts_with('0')
    })
}

fn parse_providers(names: &[String]) -> Result<Vec<ProviderName>, String> {
    let mut providers = Vec::new();
    for name in names.iter().map(|name| name.trim()) {
        let provider = ProviderName::parse(name).ok_or_else(|| {
            format!("unknown provider {name:?}: expected log, webhook, aliyun, tencent or twilio")
        })?;
        if providers.contains(&provider) {
            return Err(format!("{name} is listed twice"));
        }
        providers.push(provider);
    }
    if providers.is_empty() {
        return Err("name at least one provider".to_owned());
    }
    Ok(providers)
}

fn region_locales(
    sources: &Sources,
    given: &RegionLocalesGiven,
) -> Result<BTreeMap<String, Locale>, ConfigError> {
    let pairs: Vec<(String, String)> = match given {
        TextOrTable::None => Vec::new(),
        TextOrTable::Text(text) => text
            .split(',')
            .map(str::trim)
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (region, locale) = pair.split_once(':').unwrap_or((pair, ""));
                (region.trim().to_owned(), locale.trim().to_owned())
            })
            .collect(),
        TextOrTable::Table(table) => table.clone().into_iter().collect(),
    };
    let mut by_region = BTreeMap::new();
    for (region, locale) in pairs {
        let refuse = |reason: &str| {
            ConfigError::invalid(
                sources.origin("VCODE_REGION_LOCALES"),
                format!("{region}:{locale}"),
                reason,
            )
        };
        let region =
            Region::parse(&region).ok_or_else(|| refuse("expected a region such as US"))?;
        let locale = Locale::parse(&locale)
            .ok_or_else(|| refuse("expected a region and a BCP 47 language tag, such as US:en"))?;
        by_region.insert(region.as_str().to_owned(), locale);
    }
    Ok(by_region)
}

/// The price table, each refusal naming the variable (or file key) that gave it.
fn prices(
    sources: &Sources,
    given: &PricesGiven,
    currency: Option<&str>,
) -> Result<SmsPrices, ConfigError> {
    const PRICES: &str = "VCODE_SMS_PRICES";
    const CURRENCY: &str = "VCODE_SMS_PRICE_CURRENCY";
    let refused = |name: &str, reason: String| {
        let (value, _) = sources.given(name).unwrap_or_default();
        ConfigError::invalid(sources.origin(name), value, reason)
    };
    let currency = currency.unwrap_or(prices::DEFAULT_CURRENCY);
    SmsPrices::new(currency, []).map_err(|reason| refused(CURRENCY, reason))?;
    let entries = match given {
        TextOrTable::None => Vec::new(),
        TextOrTable::Text(text) => {
            SmsPrices::parse_pairs(text).map_err(|reason| refused(PRICES, reason))?
        }
        TextOrTable::Table(table) => table.clone().into_iter().collect(),
    };
    SmsPrices::new(currency, entries).map_err(|reason| refused(PRICES, reason))
}

/// The built-in texts with `[sms.texts.<purpose>]` (`<locale> = "text"`) over them.
fn texts(given: &BTreeMap<String, BTreeMap<String, String>>) -> Result<TextTemplates, ConfigError> {
    let mut texts = TextTemplates::default();
    for (purpose, locales) in given {
        for (tag, text) in locales {
            let key = format!("sms.texts.{purpose}.{tag}");
            let refuse = |reason: String| {
                ConfigError::invalid(
                    format!("{key} ({})", crate::config::sources::FILE),
                    text,
                    reason,
                )
            };
            let locale =
                Locale::parse(tag).ok_or_else(|| refuse("not a BCP 47 language tag".to_owned()))?;
            texts.set(purpose, locale, text.clone()).map_err(refuse)?;
        }
    }
    Ok(texts)
}

// --- Adapters -----------------------------------------------------------------------------------

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

mod tencent_region {
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
