//! The routes (`VCODE_SMS_ROUTES`, `[sms.routes]`), the region locales, the prices and the
//! texts: the settings a variable gives as text and the file as a table.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::templates::{TemplateSet, resolve_templates};
use super::*;

/// A setting a variable gives as text and the file as a table: `VCODE_SMS_ROUTES=
/// "+86:aliyun,tencent;+1:twilio"` or `[sms.routes]` (`"+86" = ["aliyun"]`,
/// `"+1" = { providers = ["tencent"], tencent = { … } }`); `VCODE_REGION_LOCALES="US:en,JP:ja"`
/// or `[sms.region_locales]` (`US = "en"`); `VCODE_SMS_PRICES="CN=0.045,*=0.05"` or
/// `[sms.prices]` (`CN = 0.045`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(untagged, expecting = "text as the variable takes it, or a table")]
pub(super) enum TextOrTable<T> {
    #[default]
    None,
    Text(String),
    Table(T),
}

pub(super) type RoutesGiven = TextOrTable<BTreeMap<String, RouteGiven>>;
pub(super) type RegionLocalesGiven = TextOrTable<BTreeMap<String, String>>;
pub(super) type PricesGiven = TextOrTable<BTreeMap<String, f64>>;

#[derive(Clone, Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "a list of providers, or { providers = [...], aliyun = {...}, tencent = {...} }"
)]
pub(super) enum RouteGiven {
    Providers(Vec<String>),
    Table(Box<RouteTable>),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RouteTable {
    providers: Vec<String>,
    #[serde(default)]
    aliyun: Option<TemplateSet>,
    #[serde(default)]
    tencent: Option<TemplateSet>,
}

/// The routes, each checked: a calling code once, known providers once each.
pub(super) fn routes(sources: &Sources, given: &RoutesGiven) -> Result<Vec<SmsRoute>, ConfigError> {
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

pub(super) fn is_calling_code(code: &str) -> bool {
    code.strip_prefix('+').is_some_and(|digits| {
        (1..=6).contains(&digits.len())
            && digits.bytes().all(|b| b.is_ascii_digit())
            && !digits.starts_with('0')
    })
}

pub(super) fn parse_providers(names: &[String]) -> Result<Vec<ProviderName>, String> {
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

pub(super) fn region_locales(
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
pub(super) fn prices(
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
pub(super) fn texts(
    given: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<TextTemplates, ConfigError> {
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
