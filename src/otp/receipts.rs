//! "A delivery receipt arrived": the providers' receipts authenticated (Twilio's signature, the
//! token of Aliyun's and Tencent's URLs, the webhook gateway's signature), matched by the
//! provider's message id to the verification the send recorded, and applied in the store's one
//! atomic step, which moves the delivery forward only. A change is counted per provider and
//! country (the delivery rate) and logged; it is what the `verification.delivered` /
//! `.undelivered` event carries ([`DeliveryTransition`]). The send's side, recording the
//! message, is [`super::OtpService`]'s (`send.rs`).

use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};

use crate::domain::{Destination, Phone, Region};
use crate::fraud::FraudGuard;
use crate::sms::receipts::{self, ReceiptSettings, Report, ReportError, Reported};
use crate::sms::{aliyun, tencent, twilio, webhook};
use crate::store::{
    DeliveryCount, DeliveryStatus, DeliveryTransition, Receipt, ReceiptOutcome, ReceiptStore,
    StoreError, unix_hour,
};

/// The longest span the delivery rate is asked for, in hours: a week (the store keeps eight
/// days).
pub const MAX_RATE_HOURS: u32 = 168;

/// The delivery rate's counts of one provider and country over a span, and by hour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderCountryRate {
    pub provider: String,
    pub country: String,
    pub delivered: u64,
    pub undelivered: u64,
    /// The hours with receipts, oldest first.
    pub hours: Vec<DeliveryCount>,
}

impl ProviderCountryRate {
    /// delivered / (delivered + undelivered); 0 without receipts.
    pub fn rate(&self) -> f64 {
        let total = self.delivered + self.undelivered;
        if total == 0 {
            0.0
        } else {
            self.delivered as f64 / total as f64
        }
    }
}

/// The delivery rates of the hours `from_hour..=to_hour`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryRates {
    pub from_hour: u64,
    pub to_hour: u64,
    /// Most receipts first.
    pub rates: Vec<ProviderCountryRate>,
}

/// Why a receipt was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    /// A wrong or missing signature or token, or receipts of a provider not set up for them:
    /// nothing was read or changed.
    #[error("the receipt's signature or token is wrong or missing")]
    Unauthenticated,
    #[error("malformed receipt: {0}")]
    Malformed(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<ReportError> for ReceiptError {
    fn from(error: ReportError) -> Self {
        match error {
            ReportError::Unauthenticated => Self::Unauthenticated,
            ReportError::Malformed(what) => Self::Malformed(what),
        }
    }
}

/// What one request's receipts did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Receipts in the request.
    pub receipts: usize,
    /// Those that moved a verification's delivery.
    pub changed: usize,
    /// Those of a message no send recorded (or forgotten since).
    pub unknown: usize,
}

/// The secrets receipts are checked with, taken from the SMS settings.
#[derive(Clone, Default)]
pub struct ReceiptSecrets {
    pub settings: ReceiptSettings,
    /// Twilio's auth token (its signatures).
    pub twilio_auth_token: Option<SecretString>,
    /// The webhook sender's secret (the gateway's signatures).
    pub webhook_secret: Option<SecretString>,
}

impl ReceiptSecrets {
    pub fn from_sms(sms: &crate::sms::SmsSettings) -> Self {
        Self {
            settings: sms.receipts.clone(),
            twilio_auth_token: sms.twilio.as_ref().and_then(|t| match &t.auth {
                twilio::TwilioAuth::AuthToken(token) => Some(token.clone()),
                twilio::TwilioAuth::ApiKey { .. } => None,
            }),
            webhook_secret: sms.webhook.as_ref().and_then(|w| w.secret.clone()),
        }
    }
}

pub struct ReceiptService {
    store: Arc<dyn ReceiptStore>,
    /// Told of each send the guard counted that a receipt calls undelivered.
    fraud: Arc<FraudGuard>,
    secrets: ReceiptSecrets,
    default_region: Region,
}

impl ReceiptService {
    pub fn new(
        store: Arc<dyn ReceiptStore>,
        fraud: Arc<FraudGuard>,
        secrets: ReceiptSecrets,
        default_region: Region,
    ) -> Self {
        Self {
            store,
            fraud,
            secrets,
            default_region,
        }
    }

    /// Twilio's `StatusCallback`: `path_and_query` as requested (the signature covers the full
    /// URL: the configured public URL and this), the form's parameters in order, and the
    /// signature headers.
    pub async fn twilio(
        &self,
        path_and_query: &str,
        params: &[(String, String)],
        signature: Option<&str>,
        signature_settings: Option<&str>,
    ) -> Result<Applied, ReceiptError> {
        let (Some(base), Some(token), Some(signature)) = (
            &self.secrets.settings.public_url,
            &self.secrets.twilio_auth_token,
            signature,
        ) else {
            return Err(ReceiptError::Unauthenticated);
        };
        let url = [base.as_str(), path_and_query].concat();
        let token = token.expose_secret().as_bytes();
        if !receipts::twilio::verify(token, &url, params, signature, signature_settings) {
            return Err(ReceiptError::Unauthenticated);
        }
        let reports = receipts::twilio::parse(params)?;
        self.apply(twilio::PROVIDER, reports.into_iter().collect())
            .await
    }

    /// Aliyun's `SmsReport` push, with the `token` its URL carried.
    pub async fn aliyun(&self, token: Option<&str>, body: &[u8]) -> Result<Applied, ReceiptError> {
        self.check_token(token)?;
        let reports = receipts::aliyun::parse(body)?;
        self.apply(aliyun::PROVIDER, reports).await
    }

    /// Tencent's status callback, with the `token` its URL carried.
    pub async fn tencent(&self, token: Option<&str>, body: &[u8]) -> Result<Applied, ReceiptError> {
        self.check_token(token)?;
        let reports = receipts::tencent::parse(body)?;
        self.apply(tencent::PROVIDER, reports).await
    }

    /// The webhook gateway's receipt and its signature headers.
    pub async fn webhook(
        &self,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
    ) -> Result<Applied, ReceiptError> {
        let Some(secret) = self.enabled_secret(self.secrets.webhook_secret.as_ref()) else {
            return Err(ReceiptError::Unauthenticated);
        };
        let now = crate::sms::unix_now();
        if !receipts::webhook::verify(
            secret.expose_secret().as_bytes(),
            timestamp,
            signature,
            body,
            now,
        ) {
            return Err(ReceiptError::Unauthenticated);
        }
        let report = receipts::webhook::parse(body)?;
        self.apply(webhook::PROVIDER, vec![report]).await
    }

    /// The delivery rate per provider and country over the last `hours` hours (this one
    /// included; 1 to [`MAX_RATE_HOURS`]), from the counts every instance keeps in the store.
    pub async fn delivery_rates(&self, hours: u32) -> Result<DeliveryRates, StoreError> {
        let to_hour = unix_hour(crate::sms::unix_now() * 1000);
        let from_hour = to_hour.saturating_sub(u64::from(hours.clamp(1, MAX_RATE_HOURS)) - 1);
        let counts = self.store.delivery_counts(from_hour).await?;
        let mut by_pair: std::collections::BTreeMap<(String, String), ProviderCountryRate> =
            std::collections::BTreeMap::new();
        for count in counts.into_iter().filter(|count| count.hour <= to_hour) {
            let rate = by_pair
                .entry((count.provider.clone(), count.country.clone()))
                .or_insert_with(|| ProviderCountryRate {
                    provider: count.provider.clone(),
                    country: count.country.clone(),
                    ..ProviderCountryRate::default()
                });
            rate.delivered += count.delivered;
            rate.undelivered += count.undelivered;
            rate.hours.push(count);
        }
        let mut rates: Vec<ProviderCountryRate> = by_pair.into_values().collect();
        for rate in &mut rates {
            rate.hours.sort_by_key(|count| count.hour);
        }
        rates.sort_by_key(|rate| std::cmp::Reverse(rate.delivered + rate.undelivered));
        Ok(DeliveryRates {
            from_hour,
            to_hour,
            rates,
        })
    }

    /// A secret, while receipts are on.
    fn enabled_secret<'a>(&self, secret: Option<&'a SecretString>) -> Option<&'a SecretString> {
        secret.filter(|_| self.secrets.settings.enabled())
    }

    fn check_token(&self, given: Option<&str>) -> Result<(), ReceiptError> {
        let expected = self.enabled_secret(self.secrets.settings.token.as_ref());
        match (expected, given) {
            (Some(expected), Some(given))
                if receipts::same_secret(given.as_bytes(), expected.expose_secret().as_bytes()) =>
            {
                Ok(())
            }
            _ => Err(ReceiptError::Unauthenticated),
        }
    }

    /// Applies each report in turn; a store failure stops there (the provider retries the
    /// request, and the receipts already applied change nothing the second time).
    async fn apply(
        &self,
        provider: &'static str,
        reports: Vec<Report>,
    ) -> Result<Applied, ReceiptError> {
        let mut applied = Applied {
            receipts: reports.len(),
            ..Applied::default()
        };
        for report in &reports {
            let receipt = Receipt {
                provider,
                message_id: &report.message_id,
                delivery: match report.reported {
                    Reported::Sent => DeliveryStatus::Sent,
                    Reported::Delivered => DeliveryStatus::Delivered,
                    Reported::Undelivered => DeliveryStatus::Undelivered,
                },
                error_code: report.error_code.as_deref(),
            };
            match self.store.apply_receipt(&receipt).await? {
                ReceiptOutcome::Changed(transition) => {
                    applied.changed += 1;
                    self.changed(&transition).await;
                }
                ReceiptOutcome::Unchanged => {}
                ReceiptOutcome::Unknown => {
                    applied.unknown += 1;
                    tracing::debug!(provider, message_id = %report.message_id, "receipt of an unknown message");
                }
            }
        }
        Ok(applied)
    }

    /// A delivery moved: counted and logged (the store wrote its `verification.delivered` /
    /// `.undelivered` event in the same step); an undelivered send the fraud guard counted
    /// leaves its judgement (once: the store's step changes a delivery once).
    async fn changed(&self, transition: &DeliveryTransition) {
        let phone =
            Phone::parse(&transition.target.phone_e164, self.default_region).map(Destination::from);
        if let (DeliveryStatus::Undelivered, Some(mark), Some(phone)) =
            (transition.delivery, transition.guarded, &phone)
        {
            self.fraud.undelivered(phone, mark).await;
        }
        let country = phone
            .as_ref()
            .map_or_else(|| "none".to_owned(), crate::fraud::country_of);
        crate::metrics::count_sms_receipt(
            &transition.provider,
            &country,
            transition.delivery.as_str(),
        );
        let masked = phone
            .as_ref()
            .map_or_else(|| "-".to_owned(), Destination::masked);
        tracing::info!(
            phone = masked,
            purpose = %transition.target.purpose,
            provider = %transition.provider,
            message_id = %transition.message_id,
            previous = transition.previous.as_str(),
            delivery = transition.delivery.as_str(),
            error = transition.error_code.as_deref().unwrap_or("-"),
            "SMS delivery receipt"
        );
    }
}
