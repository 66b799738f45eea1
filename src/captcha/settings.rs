//! What captchas are configured with: their life, size and whether `otp/send` needs one. Each
//! field's serde name is its variable; the defaults are the `Default` impl.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::render;
use crate::config::text::{Flag, Secs, Whole};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct CaptchaSettings {
    #[serde(rename = "VCODE_CAPTCHA_TTL_SECS", with = "Secs::<10, 3600>")]
    pub ttl: Duration,
    #[serde(rename = "VCODE_CAPTCHA_LENGTH", with = "Length")]
    pub length: usize,
    #[serde(rename = "VCODE_CAPTCHA_WIDTH", with = "Width")]
    pub width: u32,
    #[serde(rename = "VCODE_CAPTCHA_HEIGHT", with = "Height")]
    pub height: u32,
    /// `otp/send` needs a solved captcha first (protects the SMS budget).
    #[serde(rename = "VCODE_SEND_REQUIRES_CAPTCHA", with = "Flag")]
    pub send_requires_captcha: bool,
}

// What the renderer can draw.
type Length = Whole<{ render::MIN_LEN as u64 }, { render::MAX_LEN as u64 }>;
type Width = Whole<{ render::MIN_WIDTH as u64 }, { render::MAX_WIDTH as u64 }>;
type Height = Whole<{ render::MIN_HEIGHT as u64 }, { render::MAX_HEIGHT as u64 }>;

impl Default for CaptchaSettings {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(300),
            length: render::DEFAULT_LEN,
            width: render::DEFAULT_WIDTH,
            height: render::DEFAULT_HEIGHT,
            send_requires_captcha: false,
        }
    }
}
