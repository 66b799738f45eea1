//! What an SMS says, and nothing from the request: texts per purpose and locale for the text
//! senders (`log`, `webhook`, `twilio`), and the approved template per purpose (template id,
//! sign name, parameter names) for the template senders (`aliyun`, `tencent`).

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::Locale;

use super::{SmsError, SmsMessage};

/// The key of the entry used for purposes without one of their own.
pub const DEFAULT_PURPOSE: &str = "default";

/// A value a template parameter takes from the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateValue {
    /// The one-time code.
    Code,
    /// Minutes until the code expires (rounded up, at least 1).
    Minutes,
}

impl TemplateValue {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "code" => Some(Self::Code),
            "minutes" => Some(Self::Minutes),
            _ => None,
        }
    }

    /// The value for `message`.
    pub fn value_for(self, message: &SmsMessage<'_>) -> String {
        match self {
            Self::Code => message.code.expose().to_owned(),
            Self::Minutes => message.minutes().to_string(),
        }
    }
}

/// A provider-side template: approved in the provider's console, filled with parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderTemplate {
    /// Aliyun's `TemplateCode` (`SMS_154950909`) or Tencent's `TemplateId` (`1110`).
    pub id: String,
    /// The approved signature (签名) shown before the text.
    pub sign_name: String,
    /// Parameters in order: the template's variable name and the value it takes. Aliyun sends
    /// them as a JSON object by name; Tencent sends the values in this order.
    pub params: Vec<(String, TemplateValue)>,
}

/// One entry per purpose, and an optional `default` entry for the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ByPurpose<T> {
    entries: BTreeMap<String, T>,
}

impl<T> Default for ByPurpose<T> {
    fn default() -> Self {
        Self {
            entries: BTreeMap::new(),
        }
    }
}

impl<T> ByPurpose<T> {
    pub fn insert(&mut self, purpose: impl Into<String>, entry: T) {
        self.entries.insert(purpose.into(), entry);
    }

    /// The purpose's own entry, else the `default` one.
    pub fn get(&self, purpose: &str) -> Option<&T> {
        self.entries
            .get(purpose)
            .or_else(|| self.entries.get(DEFAULT_PURPOSE))
    }
}

/// A provider's approved templates by purpose and locale: an international route needs its own
/// template (and no domestic sign name) where a domestic one would be refused or misread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderTemplates {
    /// (purpose or [`DEFAULT_PURPOSE`], locale or none for any) → template.
    entries: BTreeMap<(String, Option<Locale>), ProviderTemplate>,
}

impl ProviderTemplates {
    pub fn insert(&mut self, purpose: &str, locale: Option<Locale>, template: ProviderTemplate) {
        self.entries.insert((purpose.to_owned(), locale), template);
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The languages some template is written in.
    pub fn languages(&self) -> BTreeSet<String> {
        self.entries
            .keys()
            .filter_map(|(_, locale)| locale.as_ref().map(|l| l.language().to_owned()))
            .collect()
    }

    /// The template for `purpose` in `locale`: the locale matters most (a template in another
    /// language, or a domestic one abroad, is worse than another purpose's wording), so each
    /// tag from the whole locale to its language is tried for the purpose and then for
    /// `default`, before the templates for any locale.
    pub fn find(&self, purpose: &str, locale: Option<&Locale>) -> Option<&ProviderTemplate> {
        let purposes = [purpose, DEFAULT_PURPOSE];
        let for_tag = |tag: &str| {
            purposes.iter().find_map(|p| {
                self.entries.iter().find_map(|((own, l), template)| {
                    (own == p && l.as_ref().is_some_and(|l| l.as_str() == tag)).then_some(template)
                })
            })
        };
        locale
            .and_then(|locale| locale.fallbacks().find_map(for_tag))
            .or_else(|| {
                purposes
                    .iter()
                    .find_map(|p| self.entries.get(&((*p).to_owned(), None)))
            })
    }

    /// The approved template `message` goes out with, or the misconfiguration that `provider`
    /// has none for its purpose and locale.
    pub fn for_message(
        &self,
        provider: &'static str,
        message: &SmsMessage<'_>,
    ) -> Result<&ProviderTemplate, SmsError> {
        let purpose = message.purpose.as_str();
        self.find(purpose, message.locale).ok_or_else(|| {
            SmsError::misconfigured(
                provider,
                format!("no {provider} template for purpose {purpose} (sms.{provider}.templates)"),
            )
        })
    }
}

/// Texts with `{code}` and `{minutes}` placeholders, per purpose and locale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextTemplates {
    texts: ByPurpose<BTreeMap<Locale, String>>,
}

/// Placeholders a text may hold.
const PLACEHOLDERS: [&str; 2] = ["{code}", "{minutes}"];

/// The built-in texts: every default purpose (and any other) in `zh-CN` and `en`.
const BUILT_IN: [(&str, &str, &str); 10] = [
    (
        "login",
        "zh-CN",
        "您的登录验证码是{code}，{minutes}分钟内有效。请勿告诉他人。",
    ),
    (
        "login",
        "en",
        "Your login code is {code}. It expires in {minutes} min. Do not share it.",
    ),
    (
        "register",
        "zh-CN",
        "您的注册验证码是{code}，{minutes}分钟内有效。请勿告诉他人。",
    ),
    (
        "register",
        "en",
        "Your sign-up code is {code}. It expires in {minutes} min. Do not share it.",
    ),
    (
        "reset_password",
        "zh-CN",
        "您正在重置密码，验证码是{code}，{minutes}分钟内有效。请勿告诉他人。",
    ),
    (
        "reset_password",
        "en",
        "Your password reset code is {code}. It expires in {minutes} min. Do not share it.",
    ),
    (
        "bind_phone",
        "zh-CN",
        "您正在绑定手机号，验证码是{code}，{minutes}分钟内有效。请勿告诉他人。",
    ),
    (
        "bind_phone",
        "en",
        "Your code to link this phone is {code}. It expires in {minutes} min. Do not share it.",
    ),
    (
        DEFAULT_PURPOSE,
        "zh-CN",
        "您的验证码是{code}，{minutes}分钟内有效。请勿告诉他人。",
    ),
    (
        DEFAULT_PURPOSE,
        "en",
        "Your verification code is {code}. It expires in {minutes} min. Do not share it.",
    ),
];

impl Default for TextTemplates {
    fn default() -> Self {
        let mut templates = Self {
            texts: ByPurpose::default(),
        };
        for (purpose, locale, text) in BUILT_IN {
            let locale = Locale::parse(locale).expect("built-in locales are valid");
            templates
                .set(purpose, locale, text.to_owned())
                .expect("built-in texts are valid");
        }
        templates
    }
}

impl TextTemplates {
    /// Sets (or replaces) one text. It must hold `{code}` and no other `{…}` than
    /// `{code}` and `{minutes}`.
    pub fn set(&mut self, purpose: &str, locale: Locale, text: String) -> Result<(), String> {
        check_text(&text)?;
        match self.texts.entries.get_mut(purpose) {
            Some(locales) => {
                locales.insert(locale, text);
            }
            None => self.texts.insert(purpose, BTreeMap::from([(locale, text)])),
        }
        Ok(())
    }

    /// The languages some text is written in.
    pub fn languages(&self) -> BTreeSet<String> {
        self.texts
            .entries
            .values()
            .flat_map(|locales| locales.keys().map(|l| l.language().to_owned()))
            .collect()
    }

    /// The text for `message`: the purpose's own texts (else the `default` ones), in the
    /// message's locale, else `default_locale`, each looked up from the whole tag to its
    /// language, then any text in the same language; a purpose has at least one text.
    pub fn render(&self, message: &SmsMessage<'_>, default_locale: &Locale) -> String {
        if let Some(wording) = message.tenant {
            return wording.render(message, default_locale);
        }
        let locales = self
            .texts
            .get(message.purpose.as_str())
            .expect("the built-in default texts are never removed");
        let requested = message.locale.unwrap_or(default_locale);
        let text = requested
            .pick(locales)
            .or_else(|| default_locale.pick(locales))
            .or_else(|| locales.values().next())
            .expect("a purpose has at least one text");
        fill(text, message)
    }
}

fn check_text(text: &str) -> Result<(), String> {
    check_placeholders(text, &PLACEHOLDERS)
}

fn check_placeholders(text: &str, allowed: &[&str]) -> Result<(), String> {
    if !text.contains("{code}") {
        return Err("the text must contain {code}".to_owned());
    }
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let end = rest[start..].find('}').ok_or("an unclosed { in the text")?;
        let placeholder = &rest[start..start + end + 1];
        if !allowed.contains(&placeholder) {
            return Err(format!(
                "unknown placeholder {placeholder}: use {}",
                allowed.join(", ")
            ));
        }
        rest = &rest[start + end + 1..];
    }
    Ok(())
}

fn fill(text: &str, message: &SmsMessage<'_>) -> String {
    text.replace("{code}", message.code.expose())
        .replace("{minutes}", &message.minutes().to_string())
}

/// Placeholders a tenant's own text may hold: the shared ones and its name.
const TENANT_PLACEHOLDERS: [&str; 3] = ["{code}", "{minutes}", "{name}"];

/// The built-in texts of a tenant with a name (a Twilio Verify Service's `FriendlyName`, as
/// Twilio's own SMS reads), and the do-not-share sentence its switch adds, per locale.
const TENANT_BUILT_IN: [(&str, &str, &str); 2] = [
    (
        "en",
        "Your {name} verification code is: {code}. It expires in {minutes} min.",
        " Don't share this code with anyone; our employees will never ask for the code.",
    ),
    (
        "zh-CN",
        "您的{name}验证码是：{code}，{minutes}分钟内有效。",
        "请勿将验证码告诉任何人，我们的工作人员绝不会向您索要验证码。",
    ),
];

/// What a tenant (a Twilio Verify Service) says in its SMS: its name, the do-not-share
/// sentence if it asks for one, and (vcode's own extension) texts of its own per locale,
/// which may hold `{name}` besides `{code}` and `{minutes}`. The text senders (`log`,
/// `webhook`, `twilio`) write it; the template senders (`aliyun`, `tencent`) can only send
/// their approved templates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantWording {
    /// Shown for `{name}` (never empty: a Service's name is required).
    pub name: String,
    pub do_not_share: bool,
    pub texts: BTreeMap<Locale, String>,
}

impl TenantWording {
    /// A tenant's own text must hold `{code}` and no other `{…}` than `{code}`, `{minutes}`
    /// and `{name}`.
    pub fn check_text(text: &str) -> Result<(), String> {
        check_placeholders(text, &TENANT_PLACEHOLDERS)
    }

    /// The text for `message` in its locale (else `default_locale`): the tenant's own text,
    /// else the built-in one in that language, else the English one; then, if asked for, the
    /// do-not-share sentence in the text's language (English for a language vcode has none
    /// in).
    pub fn render(&self, message: &SmsMessage<'_>, default_locale: &Locale) -> String {
        let requested = message.locale.unwrap_or(default_locale);
        let own = requested
            .pick(&self.texts)
            .map(|text| (text.as_str(), requested.language()))
            .or_else(|| {
                default_locale
                    .pick(&self.texts)
                    .map(|text| (text.as_str(), default_locale.language()))
            });
        let built_in = |language: &str| {
            TENANT_BUILT_IN
                .iter()
                .find(|(tag, _, _)| tag.split('-').next() == Some(language))
        };
        let (text, language) = own.unwrap_or_else(|| {
            let (tag, text, _) = built_in(requested.language())
                .or_else(|| built_in(default_locale.language()))
                .unwrap_or(&TENANT_BUILT_IN[0]);
            (text, tag.split('-').next().unwrap_or("en"))
        });
        let mut filled = fill(text, message).replace("{name}", &self.name);
        if self.do_not_share {
            let (_, _, warning) = built_in(language).unwrap_or(&TENANT_BUILT_IN[0]);
            filled.push_str(warning);
        }
        filled
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::{Code, CodeLength, Phone, Purpose, Region};

    fn render(templates: &TextTemplates, purpose: &str, locale: Option<&str>) -> String {
        let phone = Phone::parse("+8613800138000", Region::default()).unwrap();
        let purpose = Purpose::parse(purpose).unwrap();
        let code = Code::parse("123456", CodeLength::default()).unwrap();
        let locale = locale.map(|l| Locale::parse(l).unwrap());
        let message = SmsMessage {
            phone: &phone,
            purpose: &purpose,
            code: &code,
            expires_in: Duration::from_secs(300),
            locale: locale.as_ref(),
            tenant: None,
        };
        templates.render(&message, &Locale::default())
    }

    fn render_tenant(wording: &TenantWording, locale: Option<&str>) -> String {
        let phone = Phone::parse("+8613800138000", Region::default()).unwrap();
        let purpose = Purpose::parse("va0123").unwrap();
        let code = Code::parse("123456", CodeLength::default()).unwrap();
        let locale = locale.map(|l| Locale::parse(l).unwrap());
        let message = SmsMessage {
            phone: &phone,
            purpose: &purpose,
            code: &code,
            expires_in: Duration::from_secs(600),
            locale: locale.as_ref(),
            tenant: Some(wording),
        };
        TextTemplates::default().render(&message, &Locale::default())
    }

    #[test]
    fn a_tenant_is_named_and_warns_in_the_texts_language() {
        let mut wording = TenantWording {
            name: "Acme".to_owned(),
            ..TenantWording::default()
        };
        assert_eq!(
            render_tenant(&wording, Some("en-US")),
            "Your Acme verification code is: 123456. It expires in 10 min."
        );
        assert_eq!(
            render_tenant(&wording, Some("zh")),
            "您的Acme验证码是：123456，10分钟内有效。"
        );
        wording.do_not_share = true;
        let en = render_tenant(&wording, Some("en"));
        assert!(
            en.ends_with("our employees will never ask for the code."),
            "{en}"
        );
        let zh = render_tenant(&wording, None);
        assert!(
            zh.starts_with("您的Acme验证码是：123456") && zh.ends_with("索要验证码。"),
            "{zh}"
        );
        // A tenant's own text in French: its language has no warning, English's is added.
        wording.texts.insert(
            Locale::parse("fr").unwrap(),
            "Code {name} : {code} ({minutes} min).".to_owned(),
        );
        let fr = render_tenant(&wording, Some("fr-CA"));
        assert!(
            fr.starts_with("Code Acme : 123456 (10 min). Don't share"),
            "{fr}"
        );
        // Other locales keep the built-in texts.
        assert!(render_tenant(&wording, Some("en")).starts_with("Your Acme"));
        assert!(TenantWording::check_text("{name} {code}").is_ok());
        assert!(TenantWording::check_text("{name} {phone} {code}").is_err());
        assert!(TenantWording::check_text("{name}").is_err());
    }

    #[test]
    fn every_default_purpose_has_chinese_and_english_texts() {
        let templates = TextTemplates::default();
        for purpose in ["login", "register", "reset_password", "bind_phone"] {
            let zh = render(&templates, purpose, Some("zh-CN"));
            let en = render(&templates, purpose, Some("en"));
            assert!(zh.contains("123456") && zh.contains("5分钟"), "{zh}");
            assert!(en.contains("123456") && en.contains("5 min"), "{en}");
            assert_ne!(zh, en);
            assert_ne!(
                en,
                render(&templates, "default_only_purpose", Some("en")),
                "{purpose} has its own text"
            );
        }
    }

    #[test]
    fn locales_fall_back_from_region_to_language_to_the_default() {
        let templates = TextTemplates::default();
        let en = render(&templates, "login", Some("en"));
        assert_eq!(render(&templates, "login", Some("en-GB")), en);
        assert_eq!(render(&templates, "login", Some("EN-us")), en);
        // `zh` and `zh-TW` have no text of their own: the Chinese one, not the default locale's.
        let zh = render(&templates, "login", Some("zh-CN"));
        assert_eq!(render(&templates, "login", Some("zh-Hant-TW")), zh);
        // No French text: the default locale's.
        assert_eq!(render(&templates, "login", Some("fr")), zh);
        assert_eq!(render(&templates, "login", None), zh);
    }

    #[test]
    fn other_purposes_use_the_default_text() {
        let templates = TextTemplates::default();
        let text = render(&templates, "2fa", Some("en"));
        assert!(
            text.starts_with("Your verification code is 123456"),
            "{text}"
        );
    }

    #[test]
    fn configured_texts_replace_built_in_ones_and_are_checked() {
        let mut templates = TextTemplates::default();
        let fr = Locale::parse("fr").unwrap();
        templates
            .set("login", fr.clone(), "Code {code}, {minutes} min".to_owned())
            .unwrap();
        assert_eq!(
            render(&templates, "login", Some("fr-CA")),
            "Code 123456, 5 min"
        );
        for bad in ["no code here", "{code} {phone}", "{code} {minutes"] {
            assert!(
                templates.set("login", fr.clone(), bad.to_owned()).is_err(),
                "{bad}"
            );
        }
    }
}
