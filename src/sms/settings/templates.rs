//! Templates as the file and the variables give them, and made complete (every entry
//! inherits what it leaves out from its purpose's, then the provider's).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use super::*;

/// A template provider's template settings, under its own variable names: the template for
/// every purpose (`…_TEMPLATE`), the sign name, and the file's tables of parameters, of
/// templates per purpose and of templates per locale.
macro_rules! template_variables {
    ($name:ident: $template:literal, $sign_name:literal, $params:literal, $templates:literal, $locales:literal) => {
        #[derive(Clone, Debug, Default, Deserialize, Serialize)]
        #[serde(default)]
        pub(super) struct $name {
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

pub(super) use template_variables;

/// A provider's templates as the file gives them (and the route overrides): one for every
/// purpose, per purpose, per locale.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct TemplateSet {
    pub(super) template: Option<String>,
    pub(super) sign_name: Option<String>,
    pub(super) params: Option<Params>,
    pub(super) templates: BTreeMap<String, TemplateEntry>,
    pub(super) locales: BTreeMap<String, TemplateEntry>,
}

/// One purpose's (or one locale's) template; a purpose's may have its own per locale.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct TemplateEntry {
    pub(super) template: Option<String>,
    pub(super) sign_name: Option<String>,
    pub(super) params: Option<Params>,
    pub(super) locales: BTreeMap<String, TemplateEntry>,
}

/// Template parameters: names (`{ code = "code", ttl = "minutes" }`, Aliyun's variables) or
/// positions (`["code", "minutes"]`, Tencent's `{1}`, `{2}`).
#[derive(Clone, Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "a table of names ({ code = \"code\" }) or an array of values ([\"code\", \"minutes\"])"
)]
pub(super) enum Params {
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
pub(super) struct ParamValue(TemplateValue);

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        parse_text(deserializer, |raw| {
            TemplateValue::parse(raw)
                .map(ParamValue)
                .ok_or_else(|| "parameter values are \"code\" or \"minutes\"".to_owned())
        })
    }
}

/// A template set made complete: every entry inherits what it leaves out (sign name,
/// parameters) from the purpose's entry, then from the provider's.
pub(super) fn resolve_templates(
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

pub(super) fn no_nested_locales(entry: &TemplateEntry, key: &str) -> Result<(), String> {
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
pub(super) struct Partial {
    pub(super) template: Option<String>,
    pub(super) sign_name: Option<String>,
    pub(super) params: Vec<(String, TemplateValue)>,
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
