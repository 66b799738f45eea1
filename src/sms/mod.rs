//! SMS delivery behind one trait: `log` for development, `webhook` for a team's own gateway,
//! and the providers `aliyun`, `tencent` and `twilio`, routed by calling code with failover
//! ([`build_sender`]). What a message says comes only from configured templates.

pub mod aliyun;
#[cfg(test)]
mod classify_tests;
mod error;
pub mod http;
mod locales;
mod log;
mod observe;
pub mod prices;
pub mod receipts;
mod routing;
pub mod settings;
#[cfg(test)]
mod settings_tests;
pub mod signing;
pub mod templates;
pub mod tencent;
mod throttle;
pub mod twilio;
pub mod webhook;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use crate::domain::{Code, Locale, Phone, Purpose};

pub use self::error::{SmsError, SmsErrorKind};
pub use self::locales::Locales;
pub use self::log::LogSender;
pub use self::observe::{NoObserver, SmsAttempt, SmsObserver};
pub use self::prices::SmsPrices;
pub use self::routing::SmsRouter;
pub use self::settings::{ProviderName, SmsRoute, SmsSettings};
use self::templates::ProviderTemplates;
pub use self::webhook::{UrlRefusal, WebhookSender, WebhookSettings, check_url};

/// One SMS to deliver.
#[derive(Debug)]
pub struct SmsMessage<'a> {
    pub phone: &'a Phone,
    pub purpose: &'a Purpose,
    pub code: &'a Code,
    pub expires_in: Duration,
    /// The request's locale; `None` is the settings' default locale.
    pub locale: Option<&'a Locale>,
    /// A tenant's own wording (a Twilio Verify Service's name, warning and texts) instead of
    /// the purpose's texts.
    pub tenant: Option<&'a templates::TenantWording>,
}

impl SmsMessage<'_> {
    /// Minutes until the code expires, rounded up, at least 1: what the texts say.
    pub fn minutes(&self) -> u64 {
        self.expires_in.as_secs().div_ceil(60).max(1)
    }
}

/// A message a provider accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmsReceipt {
    pub provider: &'static str,
    /// The provider's id for the message (Aliyun's `BizId`, Tencent's `SerialNo`, Twilio's
    /// `sid`), for support requests.
    pub message_id: Option<String>,
}

#[async_trait]
pub trait SmsSender: Send + Sync + 'static {
    /// Delivers one message; `Ok` only once a provider has accepted it.
    async fn send(&self, message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError>;
}

/// The sender `settings` describe: every provider a route names, each observed (metrics, logs,
/// `observer`), behind the router, behind the choice of language. A route with templates of
/// its own gets its own sender of that provider. Fails only on a client that cannot be built.
pub fn build_sender(
    settings: &SmsSettings,
    observer: Arc<dyn SmsObserver>,
) -> Result<Arc<dyn SmsSender>, SmsError> {
    let observed = |name: ProviderName, templates: Option<&ProviderTemplates>| {
        let inner = provider(settings, name, templates)?;
        let sender: Arc<dyn SmsSender> = Arc::new(observe::Observed::new(
            name.as_str(),
            inner,
            observer.clone(),
        ));
        Ok::<_, SmsError>((name.as_str(), sender))
    };
    // One sender per provider in use, shared by the routes without templates of their own.
    let mut shared: Vec<(ProviderName, routing::Provider)> = Vec::new();
    for name in settings.providers_in_use() {
        shared.push((name, observed(name, None)?));
    }
    let providers = |names: &[ProviderName], own: &[(ProviderName, ProviderTemplates)]| {
        names
            .iter()
            .map(
                |name| match own.iter().find(|(provider, _)| provider == name) {
                    Some((_, templates)) => observed(*name, Some(templates)),
                    None => Ok(shared
                        .iter()
                        .find(|(built, _)| built == name)
                        .expect("every provider in use is built")
                        .1
                        .clone()),
                },
            )
            .collect::<Result<routing::Providers, SmsError>>()
    };
    let mut routes = Vec::new();
    for route in &settings.routes {
        let senders = providers(&route.providers, &route.templates)?;
        routes.push((route.calling_code.clone(), senders));
    }
    let router = SmsRouter::new(routes, providers(&settings.default_route, &[])?);
    Ok(Arc::new(LocaleChooser {
        locales: settings.locales.clone(),
        inner: router,
    }))
}

fn provider(
    settings: &SmsSettings,
    name: ProviderName,
    templates: Option<&ProviderTemplates>,
) -> Result<Box<dyn SmsSender>, SmsError> {
    let texts = settings.texts.clone();
    let locale = settings.locales.default().clone();
    let missing = || SmsError::misconfigured(name.as_str(), "no settings for this provider");
    Ok(match name {
        ProviderName::Log => Box::new(LogSender::new(texts, locale)),
        ProviderName::Webhook => Box::new(WebhookSender::new(
            settings.webhook.clone().ok_or_else(missing)?,
            texts,
            locale,
        )?),
        ProviderName::Aliyun => {
            let mut aliyun = settings.aliyun.clone().ok_or_else(missing)?;
            if let Some(templates) = templates {
                aliyun.templates = templates.clone();
            }
            Box::new(aliyun::AliyunSender::new(aliyun)?)
        }
        ProviderName::Tencent => {
            let mut tencent = settings.tencent.clone().ok_or_else(missing)?;
            if let Some(templates) = templates {
                tencent.templates = templates.clone();
            }
            Box::new(tencent::TencentSender::new(tencent)?)
        }
        ProviderName::Twilio => Box::new(twilio::TwilioSmsSender::new(
            settings.twilio.clone().ok_or_else(missing)?,
            texts,
            locale,
        )?),
    })
}

/// Gives a message whose request named no language the one of its number's region.
struct LocaleChooser {
    locales: Locales,
    inner: SmsRouter,
}

#[async_trait]
impl SmsSender for LocaleChooser {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError> {
        if message.locale.is_some() {
            return self.inner.send(message).await;
        }
        let message = SmsMessage {
            locale: Some(self.locales.for_phone(message.phone)),
            ..*message
        };
        self.inner.send(&message).await
    }
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// 32 hex digits from the thread-local CSPRNG: signature nonces and webhook message ids.
fn nonce() -> String {
    use rand::RngExt;
    let bytes: [u8; 16] = rand::rng().random();
    signing::hex(&bytes)
}
