//! The SMS settings, one type: which providers serve which numbers (`VCODE_SMS`,
//! `VCODE_SMS_ROUTES`), each provider's account, templates and texts per purpose and locale
//! (`VCODE_DEFAULT_LOCALE`). Read from variables over the optional TOML file's `[sms]` table
//! (`VCODE_CONFIG_FILE`); an invalid setting stops start-up naming its variable or key.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::aliyun::AliyunSettings;
use super::provider_settings::{aliyun, tencent, twilio, webhook};
use super::settings_source::{Result, Source};
use super::templates::TextTemplates;
use super::tencent::TencentSettings;
use super::twilio::TwilioSettings;
use super::webhook::WebhookSettings;
use crate::domain::Locale;

pub use super::settings_source::SmsSettingsError;

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
}

#[derive(Clone)]
pub struct SmsSettings {
    /// The locale of a message whose request names none (`VCODE_DEFAULT_LOCALE`, `zh-CN`).
    pub default_locale: Locale,
    /// Providers for numbers no route matches, in failover order (`VCODE_SMS`, `log`).
    pub default_route: Vec<ProviderName>,
    /// Routes by calling code (`VCODE_SMS_ROUTES`, `[sms.routes]`).
    pub routes: Vec<SmsRoute>,
    /// Texts for `log`, `webhook` and `twilio`: built-in ones, replaced by `[sms.texts]`.
    pub texts: Arc<TextTemplates>,
    pub webhook: Option<WebhookSettings>,
    pub aliyun: Option<AliyunSettings>,
    pub tencent: Option<TencentSettings>,
    pub twilio: Option<TwilioSettings>,
}

impl Default for SmsSettings {
    /// The `log` sender for every number, built-in texts, `zh-CN`.
    fn default() -> Self {
        Self {
            default_locale: Locale::default(),
            default_route: vec![ProviderName::Log],
            routes: Vec::new(),
            texts: Arc::new(TextTemplates::default()),
            webhook: None,
            aliyun: None,
            tencent: None,
            twilio: None,
        }
    }
}

/// The default purposes; others come from `VCODE_PURPOSES` and the config file.
const DEFAULT_PURPOSES: [&str; 4] = ["login", "register", "reset_password", "bind_phone"];

/// Variables read here besides the per-provider ones (also the candidates `config` suggests for
/// a misspelt name).
pub const VARIABLES: [&str; 4] = [
    "VCODE_SMS",
    "VCODE_SMS_ROUTES",
    "VCODE_DEFAULT_LOCALE",
    "VCODE_CONFIG_FILE",
];

/// The webhook's variables, listed so that a misspelt secret variable stops start-up. The
/// secret also comes from `VCODE_SMS_WEBHOOK_SECRET_FILE`.
const WEBHOOK_VARIABLES: [&str; 4] = [
    "VCODE_SMS_WEBHOOK_URL",
    "VCODE_SMS_WEBHOOK_TIMEOUT_MS",
    "VCODE_SMS_WEBHOOK_SECRET",
    "VCODE_SMS_WEBHOOK_SECRET_FILE",
];

impl SmsSettings {
    /// Whether any number may go through the code-printing `log` sender.
    pub fn uses_log(&self) -> bool {
        self.default_route
            .iter()
            .chain(self.routes.iter().flat_map(|route| &route.providers))
            .any(|provider| *provider == ProviderName::Log)
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

    /// Reads the settings from the variables and from `VCODE_CONFIG_FILE` if it is set.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let file = match lookup("VCODE_CONFIG_FILE").filter(|p| !p.trim().is_empty()) {
            Some(path) => Some(read_config_file(path.trim())?),
            None => None,
        };
        Self::parse(lookup, file.as_ref())
    }

    /// Parses the settings from variables (`lookup`) over the config file's parsed `document`
    /// (its `[sms]` table; other tables belong to other settings).
    pub fn parse(
        lookup: impl Fn(&str) -> Option<String>,
        document: Option<&toml::Table>,
    ) -> Result<Self> {
        let sms = match document.and_then(|d| d.get("sms")) {
            None => None,
            Some(toml::Value::Table(table)) => Some(table),
            Some(_) => {
                return Err(SmsSettingsError::new(
                    "sms (VCODE_CONFIG_FILE)",
                    "expected a table",
                ));
            }
        };
        let source = Source::new(&lookup, sms);
        let default_locale = match source
            .string(Some("VCODE_DEFAULT_LOCALE"), "sms.default_locale")?
        {
            None => Locale::default(),
            Some(found) => Locale::parse(&found.value)
                .ok_or_else(|| found.error("expected a BCP 47 language tag such as zh-CN or en"))?,
        };
        let default_route = match source.list(Some("VCODE_SMS"), "sms.providers")? {
            None => vec![ProviderName::Log],
            Some(found) => provider_list(&found.value).map_err(|reason| found.error(reason))?,
        };
        let routes = routes(&source)?;
        let purposes = purposes(&source);
        let texts = texts(&source)?;
        let used = in_use(&routes, &default_route);
        let settings = Self {
            default_locale,
            default_route,
            routes,
            texts: Arc::new(texts),
            webhook: webhook(&source, used.contains(&ProviderName::Webhook))?,
            aliyun: aliyun(&source, used.contains(&ProviderName::Aliyun), &purposes)?,
            tencent: tencent(&source, used.contains(&ProviderName::Tencent), &purposes)?,
            twilio: twilio(&source, used.contains(&ProviderName::Twilio))?,
        };
        if let Some(key) = source.unknown_key() {
            return Err(SmsSettingsError::new(
                super::settings_source::key_origin(&key),
                "unknown key",
            ));
        }
        Ok(settings)
    }

    /// Every provider a route names, once, in a stable order.
    pub fn providers_in_use(&self) -> Vec<ProviderName> {
        in_use(&self.routes, &self.default_route)
    }
}

fn in_use(routes: &[SmsRoute], default_route: &[ProviderName]) -> Vec<ProviderName> {
    let mut used: Vec<ProviderName> = routes
        .iter()
        .flat_map(|route| route.providers.iter().copied())
        .chain(default_route.iter().copied())
        .collect();
    used.sort();
    used.dedup();
    used
}

/// Whether `var` is one of the SMS settings' variables (for a check of unknown `VCODE_*`).
pub fn is_sms_variable(var: &str) -> bool {
    if WEBHOOK_VARIABLES.contains(&var) {
        return true;
    }
    let var = match var.strip_suffix("_FILE") {
        Some(stripped) if !VARIABLES.contains(&var) => stripped,
        _ => var,
    };
    VARIABLES.contains(&var)
        || var.starts_with("VCODE_ALIYUN_")
        || var.starts_with("VCODE_TENCENT_")
        || var.starts_with("VCODE_TWILIO_")
}

/// The SMS variables that hold a secret (each also read from `<name>_FILE`, a path, shown).
const SECRET_VARIABLES: [&str; 5] = [
    "VCODE_SMS_WEBHOOK_SECRET",
    "VCODE_ALIYUN_ACCESS_KEY_SECRET",
    "VCODE_TENCENT_SECRET_KEY",
    "VCODE_TWILIO_AUTH_TOKEN",
    "VCODE_TWILIO_API_KEY_SECRET",
];

/// How `check-config` may show an SMS variable's value: a secret as `***`, a URL with its
/// password and query values hidden, anything else (account ids, senders, timeouts) as set.
pub fn shown_value(var: &str, value: &str) -> String {
    if SECRET_VARIABLES.contains(&var) {
        super::provider_settings::REDACTED.to_owned()
    } else if var.ends_with("_URL") || var.ends_with("_ENDPOINT") {
        super::provider_settings::redact_url(value)
    } else {
        value.to_owned()
    }
}

/// Reads and parses the TOML file at `path`, naming `VCODE_CONFIG_FILE` on failure.
pub fn read_config_file(path: &str) -> Result<toml::Table> {
    let origin = format!("VCODE_CONFIG_FILE={path:?}");
    let text =
        std::fs::read_to_string(path).map_err(|e| SmsSettingsError::new(&origin, e.to_string()))?;
    text.parse::<toml::Table>()
        .map_err(|e| SmsSettingsError::new(&origin, e.to_string().trim().to_owned()))
}

fn provider_list(names: &[String]) -> std::result::Result<Vec<ProviderName>, String> {
    let mut providers = Vec::new();
    for name in names {
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

fn is_calling_code(code: &str) -> bool {
    code.strip_prefix('+').is_some_and(|digits| {
        (1..=6).contains(&digits.len())
            && digits.bytes().all(|b| b.is_ascii_digit())
            && !digits.starts_with('0')
    })
}

/// `VCODE_SMS_ROUTES` (`+86:aliyun,tencent;+1:twilio`), else `[sms.routes]`.
fn routes(source: &Source<'_>) -> Result<Vec<SmsRoute>> {
    let mut routes = Vec::new();
    if let Some(raw) = source.var("VCODE_SMS_ROUTES") {
        let error =
            |reason: String| SmsSettingsError::new(format!("VCODE_SMS_ROUTES={raw:?}"), reason);
        for route in raw.split(';').map(str::trim).filter(|r| !r.is_empty()) {
            let (code, providers) = route
                .split_once(':')
                .ok_or_else(|| error(format!("{route:?}: expected +CODE:provider,provider")))?;
            let names: Vec<String> = providers.split(',').map(|s| s.trim().to_owned()).collect();
            routes.push((
                code.trim().to_owned(),
                provider_list(&names).map_err(error)?,
            ));
        }
    } else if let Some(table) = source.table("sms.routes")? {
        for code in table.keys() {
            let path = format!("sms.routes.{code}");
            let found = source.list(None, &path)?.expect("the key exists");
            routes.push((
                code.clone(),
                provider_list(&found.value).map_err(|r| found.error(r))?,
            ));
        }
    }
    let mut checked: Vec<SmsRoute> = Vec::new();
    for (calling_code, providers) in routes {
        if !is_calling_code(&calling_code) || checked.iter().any(|r| r.calling_code == calling_code)
        {
            return Err(SmsSettingsError::new(
                "VCODE_SMS_ROUTES or sms.routes",
                format!("{calling_code:?}: expected a calling code such as +86, once"),
            ));
        }
        checked.push(SmsRoute {
            calling_code,
            providers,
        });
    }
    Ok(checked)
}

/// The purposes templates may be set for: the default ones, `VCODE_PURPOSES`, and those of
/// the config file's template tables.
fn purposes(source: &Source<'_>) -> Vec<String> {
    let mut purposes: Vec<String> = DEFAULT_PURPOSES.iter().map(|p| p.to_string()).collect();
    if let Some(listed) = source.var("VCODE_PURPOSES") {
        purposes.extend(listed.split(',').map(|p| p.trim().to_owned()));
    }
    purposes.push(super::templates::DEFAULT_PURPOSE.to_owned());
    purposes.sort();
    purposes.dedup();
    purposes.retain(|p| !p.is_empty());
    purposes
}

/// The built-in texts with `[sms.texts.<purpose>]` (`<locale> = "text"`) over them.
fn texts(source: &Source<'_>) -> Result<TextTemplates> {
    let mut texts = TextTemplates::default();
    let Some(table) = source.table("sms.texts")? else {
        return Ok(texts);
    };
    for purpose in table.keys() {
        let purpose_path = format!("sms.texts.{purpose}");
        let locales = source.table(&purpose_path)?.ok_or_else(|| {
            SmsSettingsError::new(
                super::settings_source::key_origin(&purpose_path),
                "expected a table",
            )
        })?;
        for locale in locales.keys() {
            let path = format!("{purpose_path}.{locale}");
            let found = source.string(None, &path)?.expect("the key exists");
            let parsed =
                Locale::parse(locale).ok_or_else(|| found.error("not a BCP 47 language tag"))?;
            texts
                .set(purpose, parsed, found.value.clone())
                .map_err(|reason| found.error(reason))?;
        }
    }
    Ok(texts)
}

/// Secrets, the webhook URL's credentials and query values are hidden; `vcode check-config`
/// prints this.
impl fmt::Debug for SmsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            default_locale,
            default_route,
            routes,
            texts: _,
            webhook,
            aliyun,
            tencent,
            twilio,
        } = self;
        let webhook = webhook.as_ref().map(|w| {
            format!(
                "WebhookSettings {{ url: {:?}, timeout: {:?}, secret: {} }}",
                super::provider_settings::redact_url(&w.url),
                w.timeout,
                if w.secret.is_some() {
                    "Some(\"***\")"
                } else {
                    "None"
                }
            )
        });
        f.debug_struct("SmsSettings")
            .field("default_locale", default_locale)
            .field("default_route", default_route)
            .field("routes", routes)
            .field("webhook", &webhook.map(Raw))
            .field("aliyun", aliyun)
            .field("tencent", tencent)
            .field("twilio", twilio)
            .finish_non_exhaustive()
    }
}

/// Prints a preformatted string without quotes.
struct Raw(String);

impl fmt::Debug for Raw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
