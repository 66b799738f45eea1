//! What a code's email says, and nothing from the request: a subject and a lead line per
//! purpose and locale, around one text body and one HTML body per locale, filled with the code,
//! its minutes and the service's name (escaped in the HTML). Built in: English and Simplified
//! Chinese. The locale is chosen as for SMS texts ([`Locale::pick`]): the request's, else the
//! default (`VCODE_DEFAULT_LOCALE`), each from the whole tag to its language, else English.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::domain::{Code, Locale, Purpose};

/// The key of the wording used for purposes without one of their own (as for SMS texts).
const DEFAULT_PURPOSE: &str = "default";

/// A mail ready to send: its subject and its two bodies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedEmail {
    pub subject: String,
    pub text: String,
    pub html: String,
}

/// What one purpose's mail says in one locale; `{service}` may stand in either.
struct Wording {
    subject: &'static str,
    lead: &'static str,
}

/// What every mail of a locale says around the code; `{minutes}` in `expiry`.
struct Frame {
    expiry: &'static str,
    warning: &'static str,
    lang: &'static str,
}

const BUILT_IN: [(&str, &str, Wording); 10] = [
    (
        "login",
        "en",
        Wording {
            subject: "Your {service} login code",
            lead: "Use this code to log in to {service}:",
        },
    ),
    (
        "login",
        "zh-CN",
        Wording {
            subject: "您的{service}登录验证码",
            lead: "您正在登录{service}，验证码是：",
        },
    ),
    (
        "register",
        "en",
        Wording {
            subject: "Your {service} sign-up code",
            lead: "Use this code to finish signing up to {service}:",
        },
    ),
    (
        "register",
        "zh-CN",
        Wording {
            subject: "您的{service}注册验证码",
            lead: "您正在注册{service}，验证码是：",
        },
    ),
    (
        "reset_password",
        "en",
        Wording {
            subject: "Your {service} password reset code",
            lead: "Use this code to reset your {service} password:",
        },
    ),
    (
        "reset_password",
        "zh-CN",
        Wording {
            subject: "您的{service}重置密码验证码",
            lead: "您正在重置{service}的密码，验证码是：",
        },
    ),
    (
        "bind_phone",
        "en",
        Wording {
            subject: "Your {service} code to link a phone",
            lead: "Use this code to link a phone to your {service} account:",
        },
    ),
    (
        "bind_phone",
        "zh-CN",
        Wording {
            subject: "您的{service}绑定手机验证码",
            lead: "您正在为{service}账号绑定手机，验证码是：",
        },
    ),
    (
        DEFAULT_PURPOSE,
        "en",
        Wording {
            subject: "Your {service} verification code",
            lead: "Your {service} verification code is:",
        },
    ),
    (
        DEFAULT_PURPOSE,
        "zh-CN",
        Wording {
            subject: "您的{service}验证码",
            lead: "您的{service}验证码是：",
        },
    ),
];

const FRAMES: [(&str, Frame); 2] = [
    (
        "en",
        Frame {
            expiry: "It expires in {minutes} minutes.",
            warning: "If you did not ask for this code, ignore this email. Never share the code \
                      with anyone, including people who say they work for {service}.",
            lang: "en",
        },
    ),
    (
        "zh-CN",
        Frame {
            expiry: "{minutes}分钟内有效。",
            warning: "如非本人操作，请忽略本邮件。请勿将验证码告诉任何人，包括自称{service}工作人员的人。",
            lang: "zh-CN",
        },
    ),
];

/// The mails by purpose and locale.
pub struct EmailTemplates {
    wordings: BTreeMap<&'static str, BTreeMap<Locale, &'static Wording>>,
    frames: BTreeMap<Locale, &'static Frame>,
    english: Locale,
}

impl Default for EmailTemplates {
    fn default() -> Self {
        let locale = |tag| Locale::parse(tag).expect("built-in locales are valid");
        let mut wordings: BTreeMap<_, BTreeMap<_, _>> = BTreeMap::new();
        for (purpose, tag, wording) in &BUILT_IN {
            wordings
                .entry(*purpose)
                .or_default()
                .insert(locale(tag), wording);
        }
        Self {
            wordings,
            frames: FRAMES
                .iter()
                .map(|(tag, frame)| (locale(tag), frame))
                .collect(),
            english: locale("en"),
        }
    }
}

impl EmailTemplates {
    /// The mail for a `purpose`'s `code`, valid for `expires_in`, in `locale` (else
    /// `default_locale`, else English), naming the service `service`.
    pub fn render(
        &self,
        purpose: &Purpose,
        code: &Code,
        expires_in: Duration,
        locale: Option<&Locale>,
        default_locale: &Locale,
        service: &str,
    ) -> RenderedEmail {
        let wordings = self
            .wordings
            .get(purpose.as_str())
            .or_else(|| self.wordings.get(DEFAULT_PURPOSE))
            .expect("the built-in default wording is never removed");
        let wanted: Vec<&Locale> = locale
            .into_iter()
            .chain([default_locale, &self.english])
            .collect();
        let wording = *pick(wordings, &wanted).expect("every purpose is in English");
        let frame = *pick(&self.frames, &wanted).expect("the English frame is built in");
        let minutes = expires_in.as_secs().div_ceil(60).max(1).to_string();
        let fill = |text: &str, service: &str| {
            text.replace("{service}", service)
                .replace("{minutes}", &minutes)
        };
        let subject = fill(wording.subject, service);
        let lead = fill(wording.lead, service);
        let expiry = fill(frame.expiry, service);
        let warning = fill(frame.warning, service);
        let text = format!(
            "{lead}\n\n    {code}\n\n{expiry}\n\n{warning}\n",
            code = code.expose()
        );
        // The HTML takes every filled value escaped: the code is digits, but the service's
        // name is the operator's text.
        let html_service = escape_html(service);
        let html = format!(
            "<!DOCTYPE html>\n<html lang=\"{lang}\">\n<head><meta charset=\"utf-8\"><title>{title}</title></head>\n\
             <body style=\"font-family:sans-serif;color:#222\">\n\
             <p>{lead}</p>\n\
             <p style=\"font-size:28px;font-weight:bold;letter-spacing:4px\">{code}</p>\n\
             <p>{expiry}</p>\n\
             <p style=\"color:#666;font-size:13px\">{warning}</p>\n\
             </body>\n</html>\n",
            lang = frame.lang,
            title = escape_html(&fill(wording.subject, service)),
            lead = fill(&escape_html(wording.lead), &html_service),
            code = escape_html(code.expose()),
            expiry = escape_html(&expiry),
            warning = fill(&escape_html(frame.warning), &html_service),
        );
        RenderedEmail {
            subject,
            text,
            html,
        }
    }
}

/// The first of the `wanted` locales that `by_locale` has an entry for.
fn pick<'a, T>(by_locale: &'a BTreeMap<Locale, T>, wanted: &[&Locale]) -> Option<&'a T> {
    wanted.iter().find_map(|locale| locale.pick(by_locale))
}

/// `text` safe as HTML element content and as a quoted attribute value.
fn escape_html(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::CodeLength;

    fn render(purpose: &str, locale: Option<&str>, service: &str) -> RenderedEmail {
        let code = Code::parse("123456", CodeLength::default()).unwrap();
        let locale = locale.map(|l| Locale::parse(l).unwrap());
        EmailTemplates::default().render(
            &Purpose::parse(purpose).unwrap(),
            &code,
            Duration::from_secs(300),
            locale.as_ref(),
            &Locale::parse("en").unwrap(),
            service,
        )
    }

    #[test]
    fn every_built_in_purpose_has_english_and_chinese_mails_with_the_code() {
        for purpose in ["login", "register", "reset_password", "bind_phone", "other"] {
            let en = render(purpose, Some("en"), "Acme");
            let zh = render(purpose, Some("zh-CN"), "Acme");
            for mail in [&en, &zh] {
                assert!(mail.subject.contains("Acme"), "{mail:?}");
                assert!(mail.text.contains("123456") && mail.html.contains("123456"));
            }
            assert!(en.text.contains("5 minutes"), "{}", en.text);
            assert!(zh.text.contains("5分钟"), "{}", zh.text);
            assert!(zh.html.contains("lang=\"zh-CN\""));
            assert_ne!(en.subject, zh.subject);
        }
        assert_ne!(
            render("login", Some("en"), "Acme").subject,
            render("register", Some("en"), "Acme").subject
        );
        assert_eq!(
            render("2fa", Some("en"), "Acme").subject,
            "Your Acme verification code"
        );
    }

    #[test]
    fn locales_fall_back_as_sms_texts_do() {
        let zh = render("login", Some("zh-CN"), "Acme");
        assert_eq!(render("login", Some("zh-Hant-TW"), "Acme"), zh);
        assert_eq!(render("login", Some("zh"), "Acme"), zh);
        let en = render("login", Some("en"), "Acme");
        assert_eq!(render("login", Some("en-GB"), "Acme"), en);
        // No French: the default locale's (English here).
        assert_eq!(render("login", Some("fr"), "Acme"), en);
        assert_eq!(render("login", None, "Acme"), en);
    }

    #[test]
    fn the_service_name_is_escaped_in_the_html_and_plain_in_the_text() {
        let mail = render("login", Some("en"), "<b>Tom & Jerry's</b>");
        assert!(!mail.html.contains("<b>Tom"), "{}", mail.html);
        assert!(
            mail.html
                .contains("&lt;b&gt;Tom &amp; Jerry&#39;s&lt;/b&gt;")
        );
        assert!(mail.text.contains("<b>Tom & Jerry's</b>"));
        assert_eq!(escape_html("\"'<>&"), "&quot;&#39;&lt;&gt;&amp;");
    }
}
